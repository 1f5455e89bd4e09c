//! The ε schedule of `structlearn infer --anneal`.

/// Default floor of the schedule as a fraction of the start value: `--eps-min`
/// defaults to `ANNEAL_FLOOR_RATIO × --eps` (7 halvings, then the floor; see
/// docs/inference.md for the measurement behind it).
pub const ANNEAL_FLOOR_RATIO: f64 = 0.01;

/// The ε values of an annealed run: `start`, then halved while above `floor`,
/// ending at `floor` (once; a floor at or above `start` gives `[start]`).
///
/// ```
/// use structlearn_cli::anneal_schedule;
/// assert_eq!(anneal_schedule(1.0, 0.2), vec![1.0, 0.5, 0.25, 0.2]);
/// assert_eq!(anneal_schedule(1.0, 0.25), vec![1.0, 0.5, 0.25]);
/// assert_eq!(anneal_schedule(0.1, 0.5), vec![0.1]);
/// ```
pub fn anneal_schedule(start: f64, floor: f64) -> Vec<f64> {
    let mut eps = vec![start];
    let mut e = start;
    // At most 64 stages: halving reaches any floor ≥ 1e-6 from ≤ 1e6 in 40.
    while e > floor && eps.len() < 64 {
        e = (e / 2.0).max(floor);
        eps.push(e);
    }
    eps
}
