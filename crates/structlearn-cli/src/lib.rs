//! Support for the `structlearn` command line and for experiment drivers
//! (`cargo xtask`): progress reporting on standard error (bars on a terminal,
//! plain lines elsewhere), PNG figures, value parsers and error printing. The
//! library proper is the `structlearn` crate, which depends on no terminal, CLI
//! or plotting crate.

mod checks;
pub mod plots;
mod progress;

pub use checks::{EPS_RANGE, error_text, parse_eps, parse_tolerance};
pub use progress::{ItemProgress, ProgressMode, ProgressObserver, Verbosity, human_duration};
