//! Support for the `structlearn` command line and for experiment drivers
//! (`cargo xtask`): terminal progress reporting, value parsers and error
//! printing. The library proper is the `structlearn` crate, which depends on
//! no terminal or CLI crate.

mod checks;
mod progress;

pub use checks::{EPS_RANGE, error_text, parse_eps, parse_tolerance};
pub use progress::ProgressObserver;
