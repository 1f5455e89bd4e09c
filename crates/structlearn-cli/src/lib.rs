//! Support for the `structlearn` command line and for experiment drivers
//! (`cargo xtask`): terminal progress reporting. The library proper is the
//! `structlearn` crate, which depends on no terminal or CLI crate.

mod progress;

pub use progress::ProgressObserver;
