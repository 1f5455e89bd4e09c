//! Worker-thread counts given on a command line.
//!
//! A thread count is checked before a pool is started: rayon starts every
//! thread at once, and a count far beyond the machine's cores (a typo such
//! as `--threads 100000`) would otherwise hang, or abort when the system runs
//! out of thread stacks.

/// The most worker threads a pool may have: 16 per core of this machine
/// (as [`std::thread::available_parallelism`] counts them), and at least 64.
pub fn max_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.saturating_mul(16).max(64)
}

/// `n` if it is a usable worker-thread count (`1..=`[`max_threads`]), else an
/// error message naming the option, the value and the range.
///
/// ```
/// assert_eq!(structlearn::threads::checked_thread_count(2), Ok(2));
/// assert!(structlearn::threads::checked_thread_count(0).is_err());
/// assert!(structlearn::threads::checked_thread_count(1_000_000).is_err());
/// ```
pub fn checked_thread_count(n: usize) -> Result<usize, String> {
    let max = max_threads();
    if (1..=max).contains(&n) {
        Ok(n)
    } else {
        Err(format!("--threads {n}: must be between 1 and {max} (16 per core of this machine, at least 64)"))
    }
}

/// Checks `RAYON_NUM_THREADS`, which sizes rayon's global pool when no thread
/// count is given on the command line: a value beyond [`max_threads`] would
/// hang or abort the same way as such a `--threads`. Unset, empty, `0` or
/// not a number is fine (rayon then uses one thread per core).
///
/// ```
/// use structlearn::threads::{check_environment, max_threads};
/// // Unset, not a number, or within the range: nothing to refuse.
/// let value = std::env::var("RAYON_NUM_THREADS").ok().and_then(|v| v.trim().parse::<u128>().ok());
/// assert_eq!(check_environment().is_ok(), value.is_none_or(|n| n <= max_threads() as u128));
/// ```
pub fn check_environment() -> Result<(), String> {
    let Ok(value) = std::env::var("RAYON_NUM_THREADS") else { return Ok(()) };
    match value.trim().parse::<u128>() {
        Ok(n) if n > max_threads() as u128 => Err(format!(
            "RAYON_NUM_THREADS={value}: must be between 1 and {} (16 per core of this machine, at least 64); unset it \
             or pass --threads",
            max_threads()
        )),
        _ => Ok(()),
    }
}
