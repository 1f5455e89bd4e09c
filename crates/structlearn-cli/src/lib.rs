//! Support for the `structlearn` command line and for experiment drivers
//! (`cargo xtask`): value parsers, error printing, the settings a resumed
//! training run is checked against and the Ctrl-C handler. Progress and
//! figures are the `structlearn-reporting` crate's (re-exported here); the
//! library proper is the `structlearn` crate, which depends on no terminal,
//! CLI or plotting crate.

mod checks;
pub mod ranks;

pub use checks::{EPS_RANGE, error_text, parse_eps, parse_seconds, parse_tolerance};
pub use reporting::{ItemProgress, ProgressMode, ProgressObserver, Verbosity, human_duration, plots};

/// Has the C library's allocator give every block of 128 KiB or more a
/// mapping of its own, returned to the system as soon as the block is freed:
/// glibc's `M_MMAP_THRESHOLD` set, which also stops glibc from raising that
/// threshold to the largest block freed so far (up to 32 MiB). Without it,
/// once a large block has been freed, blocks of a few MB — one image's
/// features, one example's messages — come from glibc's heaps, and those a
/// data set frees while it pools them into one array stay resident beside
/// the array: a Stanford Background run at 20 % (`cargo xtask reproduce
/// stanford --full --cell zero/zero`) peaked at 4.23 GB instead of 3.29 GB.
///
/// `structlearn` and `cargo xtask` call it first thing. Numbers do not
/// change: only where memory comes from. A no-op where the C library is not
/// glibc.
///
/// ```
/// structlearn_cli::return_large_blocks_when_freed();
/// let block = vec![1.0f64; 1 << 20]; // 8 MiB: its own mapping
/// drop(block); // returned to the system here
/// ```
pub fn return_large_blocks_when_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets a parameter of the allocator; glibc takes its
    // lock, so it is safe while other threads allocate.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

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
