//! Support for the `structlearn` command line and for experiment drivers
//! (`cargo xtask`): progress reporting on standard error (bars on a terminal,
//! plain lines elsewhere), PNG figures, value parsers, error printing, and the
//! settings a resumed training run is checked against. The
//! library proper is the `structlearn` crate, which depends on no terminal, CLI
//! or plotting crate.

mod checks;
pub mod plots;
mod progress;
mod resume;

pub use checks::{EPS_RANGE, error_text, parse_eps, parse_tolerance};
pub use progress::{ItemProgress, ProgressMode, ProgressObserver, Verbosity, human_duration};
pub use resume::{check_or_record_settings, resume_settings, settings_path};
