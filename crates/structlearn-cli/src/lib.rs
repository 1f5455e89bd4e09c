//! Support for the `structlearn` command line and for experiment drivers
//! (`cargo xtask`): value parsers, error printing, the settings a resumed
//! training run is checked against and the Ctrl-C handler. Progress and
//! figures are the `structlearn-reporting` crate's (re-exported here); the
//! library proper is the `structlearn` crate, which depends on no terminal,
//! CLI or plotting crate.

mod checks;
pub mod ranks;

pub use checks::{EPS_RANGE, error_text, parse_eps, parse_eps_factor, parse_seconds, parse_tolerance};
pub use reporting::{ItemProgress, ProgressMode, ProgressObserver, Verbosity, human_duration, plots};

/// Installs the Ctrl-C handler of a long run: the first Ctrl-C sets `stop`
/// (the run finishes its current step, keeps what is done and
/// stops), the second ends the process at once with exit code 130 — an
/// oracle fit or a message-passing step that takes long (a typo such as
/// `epochs = 1000000`) cannot otherwise be interrupted.
///
/// ```no_run
/// use std::sync::{Arc, atomic::AtomicBool};
/// let stop = Arc::new(AtomicBool::new(false));
/// structlearn_cli::stop_on_ctrl_c(stop.clone()).expect("a handler");
/// ```
pub fn stop_on_ctrl_c(stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Result<(), ctrlc::Error> {
    use std::sync::atomic::Ordering;
    ctrlc::set_handler(move || {
        if stop.swap(true, Ordering::SeqCst) {
            eprintln!("\nstopped at once (second Ctrl-C); finished learning iterations and cells are kept");
            std::process::exit(130);
        }
        eprintln!("\nstopping after the current step (Ctrl-C again to stop at once)");
    })
}
