//! Support for the `structlearn` command line and for experiment drivers
//! (`cargo xtask`): progress reporting on standard error (bars on a terminal,
//! plain lines elsewhere) and PNG figures. The library proper is the
//! `structlearn` crate, which depends on no terminal, CLI or plotting crate.

pub mod plots;
mod progress;

pub use progress::{ItemProgress, ProgressMode, ProgressObserver, Verbosity, human_duration};
