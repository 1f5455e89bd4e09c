//! Progress reporting for long runs, on standard error.
//!
//! * On a terminal: an [`indicatif`] bar over all steps of all learning
//!   iterations (or over the examples of a prediction).
//! * Anywhere else (a file, a pipe, CI): one plain line per learning
//!   iteration — objective, train / validation error, seconds, ETA — so that
//!   `cmd > log 2>&1` shows a long run advancing.
//! * `--quiet` prints nothing; `--verbose` adds a line per step (oracle loss,
//!   rejected fits, message-passing violation).
//!
//! Lives in the CLI crate so that the `structlearn` library depends on no
//! terminal crate.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use structlearn::{LearnError, Observer, Record, TrainEvent};

/// How much a command prints on standard error (`--quiet`, default, `--verbose`).
///
/// ```
/// use reporting::{ProgressObserver, Verbosity};
/// let verbosity = Verbosity::from_flags(false, true); // --verbose
/// let observer = ProgressObserver::new("train", verbosity); // trainer.add_observer(Box::new(observer))
/// # drop(observer);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Verbosity {
    /// Errors and warnings only.
    Quiet,
    /// Progress (bar or one line per learning iteration) and a summary.
    #[default]
    Normal,
    /// Also one line per step of each learning iteration.
    Verbose,
}

impl Verbosity {
    /// From the `--quiet` and `--verbose` flags (clap makes them exclusive).
    ///
    /// ```
    /// use reporting::Verbosity;
    /// assert_eq!(Verbosity::from_flags(true, false), Verbosity::Quiet);
    /// assert_eq!(Verbosity::from_flags(false, false), Verbosity::Normal);
    /// assert_eq!(Verbosity::from_flags(false, true), Verbosity::Verbose);
    /// ```
    pub fn from_flags(quiet: bool, verbose: bool) -> Self {
        match (quiet, verbose) {
            (true, _) => Verbosity::Quiet,
            (false, true) => Verbosity::Verbose,
            (false, false) => Verbosity::Normal,
        }
    }

    /// Whether summaries and notes are printed (everything but `Quiet`).
    pub fn normal(self) -> bool {
        self != Verbosity::Quiet
    }

    /// How progress is shown at this verbosity: nothing when quiet, a bar
    /// when standard error is a terminal, plain lines otherwise.
    pub fn mode(self) -> ProgressMode {
        if self == Verbosity::Quiet {
            ProgressMode::Off
        } else if std::io::stderr().is_terminal() {
            ProgressMode::Bar
        } else {
            ProgressMode::Lines
        }
    }
}

/// How progress is shown (see [`Verbosity::mode`]).
///
/// ```
/// use reporting::{ProgressMode, Verbosity};
/// assert_eq!(Verbosity::Quiet.mode(), ProgressMode::Off);
/// // A bar in Bar mode, a hidden one otherwise: drive it unconditionally.
/// let bar = Verbosity::Normal.mode().bar(10, "{wide_bar} {pos}/{len}");
/// bar.inc(1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// An indicatif bar (terminals).
    Bar,
    /// Plain lines on standard error (files, pipes, CI).
    Lines,
    /// Nothing.
    Off,
}

impl ProgressMode {
    /// A bar of `len` positions with an indicatif `template` in [`ProgressMode::Bar`]
    /// mode, a hidden one otherwise (so callers can drive it unconditionally).
    pub fn bar(self, len: u64, template: &str) -> indicatif::ProgressBar {
        if self != ProgressMode::Bar {
            return indicatif::ProgressBar::hidden();
        }
        let bar = indicatif::ProgressBar::new(len);
        bar.set_style(
            indicatif::ProgressStyle::with_template(template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    }
}

/// `1h02m`, `4m30s`, `12.3s`: a duration for humans.
///
/// ```
/// use reporting::human_duration;
/// assert_eq!(human_duration(12.34), "12.3s");
/// assert_eq!(human_duration(270.0), "4m30s");
/// assert_eq!(human_duration(3720.0), "1h02m");
/// ```
pub fn human_duration(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return "?".into();
    }
    if seconds < 60.0 {
        return format!("{seconds:.1}s");
    }
    let s = seconds.round() as u64;
    if s < 3600 { format!("{}m{:02}s", s / 60, s % 60) } else { format!("{}h{:02}m", s / 3600, (s % 3600) / 60) }
}

/// Seconds left after `done` learning iterations of this session took
/// `elapsed` seconds, with `left` to go: the mean of the iterations after the
/// session's first (`since_first`: seconds since it ended) times `left`, or
/// the first's time while it is the only one. The first iteration fits every
/// oracle from scratch (cold) and costs several warm-started ones (3–4 at
/// Stanford scale), so a mean that includes it overestimates the rest.
fn eta_seconds(elapsed: f64, since_first: Option<f64>, done: usize, left: usize) -> f64 {
    let per_iteration = match since_first {
        Some(since) if done >= 2 => since / (done - 1) as f64,
        _ => elapsed / done.max(1) as f64,
    };
    per_iteration * left as f64
}

/// An observer of [`structlearn::Trainer`] that reports progress as a bar or
/// as plain lines ([`ProgressMode`]).
///
/// A plain line (one per learning iteration) reads
///
/// ```text
/// train: iteration 3/20: objective R = 1.234567e3, train error 0.1234, validation error 0.1301, 4.2s (total 12.6s), ETA 1m11s
/// ```
///
/// ```
/// use reporting::{ProgressObserver, Verbosity};
/// // Attach to a trainer with `trainer.add_observer(Box::new(progress))`.
/// let progress = ProgressObserver::new("train", Verbosity::Normal);
/// # drop(progress);
/// ```
pub struct ProgressObserver {
    label: String,
    mode: ProgressMode,
    verbose: bool,
    bar: indicatif::ProgressBar,
    total_iterations: usize,
    steps_per_iteration: usize,
    first_iteration: usize,
    session_start: Instant,
    iteration_start: Instant,
    /// When this session's first learning iteration ended (see [`eta_seconds`]).
    first_end: Option<Instant>,
    /// Factor types whose fit was rejected in the current iteration.
    rejected: Vec<String>,
}

impl ProgressObserver {
    /// Progress of one training run labelled `label` (e.g. `train` or an
    /// experiment cell), in the mode [`Verbosity::mode`] picks.
    pub fn new(label: &str, verbosity: Verbosity) -> Self {
        let mode = verbosity.mode();
        let bar = mode.bar(0, "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} steps {msg}");
        Self::build(label, mode, verbosity, bar)
    }

    /// Draws into an existing bar (e.g. one line of a `MultiProgress`) in
    /// [`ProgressMode::Bar`] mode; prints lines prefixed with `label` in
    /// [`ProgressMode::Lines`] mode.
    pub fn with_bar(bar: indicatif::ProgressBar, label: &str, verbosity: Verbosity) -> Self {
        Self::build(label, verbosity.mode(), verbosity, bar)
    }

    fn build(label: &str, mode: ProgressMode, verbosity: Verbosity, bar: indicatif::ProgressBar) -> Self {
        bar.set_prefix(label.to_string());
        let now = Instant::now();
        Self {
            label: label.to_string(),
            mode,
            verbose: verbosity == Verbosity::Verbose,
            bar,
            total_iterations: 0,
            steps_per_iteration: 1,
            first_iteration: 0,
            session_start: now,
            iteration_start: now,
            first_end: None,
            rejected: Vec::new(),
        }
    }

    fn print(&self, line: String) {
        match self.mode {
            ProgressMode::Bar => self.bar.println(line),
            ProgressMode::Lines => eprintln!("{line}"),
            ProgressMode::Off => {}
        }
    }

    /// The line of a finished learning iteration (its last step's record).
    fn iteration_line(&self, r: &Record) -> String {
        let now = Instant::now();
        let done_here = r.iteration.saturating_sub(self.first_iteration).max(1);
        let since_first = self.first_end.map(|t| (now - t).as_secs_f64());
        let left = self.total_iterations.saturating_sub(r.iteration);
        let eta = eta_seconds((now - self.session_start).as_secs_f64(), since_first, done_here, left);
        let mut line = format!(
            "{}: iteration {}/{}: objective R = {:.6e}",
            self.label, r.iteration, self.total_iterations, r.objective
        );
        if let Some(e) = r.train_error {
            line += &format!(", train error {e:.4}");
        }
        if let Some(e) = r.validation_error {
            line += &format!(", validation error {e:.4}");
        }
        if !self.rejected.is_empty() {
            // A rejected fit keeps the previous model: learning of that type stalled.
            line += &format!(", fits rejected: {}", self.rejected.join(", "));
        }
        line += &format!(
            ", {} (total {}), ETA {}",
            human_duration((now - self.iteration_start).as_secs_f64()),
            human_duration(r.elapsed_seconds),
            human_duration(eta)
        );
        line
    }

    fn step_line(&self, r: &Record) -> String {
        let what = match (&r.factor_type, r.oracle_loss, r.max_violation) {
            (Some(t), Some(loss), _) => {
                let rejected = if r.rejected == Some(true) { " (rejected: kept the previous fit)" } else { "" };
                format!("fit `{t}`: oracle loss {loss:.6e}{rejected}")
            }
            (_, _, Some(v)) => format!("message passing: largest violation {v:.3e}"),
            _ => r.phase.clone(),
        };
        format!(
            "{}: iteration {} step {}: {what}; R = {:.6e}, {}",
            self.label,
            r.iteration,
            r.step,
            r.objective,
            human_duration(r.step_seconds)
        )
    }
}

impl Observer for ProgressObserver {
    fn observe(&mut self, event: &TrainEvent<'_>) -> Result<(), LearnError> {
        match event {
            TrainEvent::Started { total_iterations, steps_per_iteration, completed } => {
                self.total_iterations = *total_iterations;
                self.steps_per_iteration = (*steps_per_iteration).max(1);
                self.first_iteration = *completed;
                self.session_start = Instant::now();
                self.iteration_start = self.session_start;
                self.first_end = None;
                self.bar.set_length((total_iterations * steps_per_iteration) as u64);
                self.bar.set_position((completed * steps_per_iteration) as u64);
                if self.mode == ProgressMode::Lines {
                    let resumed =
                        if *completed > 0 { format!(", resuming after iteration {completed}") } else { String::new() };
                    eprintln!(
                        "{}: {total_iterations} learning iterations of {steps_per_iteration} steps{resumed}",
                        self.label
                    );
                }
            }
            TrainEvent::Step(r) => {
                self.bar.inc(1);
                if self.verbose {
                    self.print(self.step_line(r));
                }
                if r.rejected == Some(true) {
                    self.rejected.push(format!("`{}`", r.factor_type.as_deref().unwrap_or("?")));
                }
                let mut msg = format!("it {} R={:.4e}", r.iteration, r.objective);
                if let Some(e) = r.train_error {
                    msg += &format!(" train={e:.4}");
                }
                if let Some(e) = r.validation_error {
                    msg += &format!(" valid={e:.4}");
                }
                self.bar.set_message(msg);
                if r.step + 1 == self.steps_per_iteration {
                    if self.mode == ProgressMode::Lines {
                        eprintln!("{}", self.iteration_line(r));
                    }
                    self.iteration_start = Instant::now();
                    self.first_end.get_or_insert(self.iteration_start);
                    self.rejected.clear();
                }
            }
            TrainEvent::Checkpointed { iteration, steps, path } if self.verbose => {
                let after = match steps {
                    0 => format!("iteration {iteration}"),
                    s => format!("step {s} of iteration {}", iteration + 1),
                };
                self.print(format!("{}: checkpoint after {after} in {}", self.label, path.display()));
            }
            TrainEvent::Finished => self.bar.finish(),
            _ => {}
        }
        Ok(())
    }
}

/// Progress over a fixed number of items (examples being predicted), safe to
/// advance from many threads: a bar on a terminal, otherwise a line at most
/// every `every` (and at the end).
///
/// ```
/// use reporting::{ItemProgress, Verbosity};
/// let p = ItemProgress::new("predict", "examples", 3, Verbosity::Quiet);
/// for _ in 0..3 {
///     p.inc();
/// }
/// p.finish();
/// ```
pub struct ItemProgress {
    label: String,
    unit: String,
    total: usize,
    mode: ProgressMode,
    bar: indicatif::ProgressBar,
    start: Instant,
    every: Duration,
    state: Mutex<(usize, Instant)>,
}

impl ItemProgress {
    /// Progress over `total` items called `unit`, lines at most every 10 s.
    pub fn new(label: &str, unit: &str, total: usize, verbosity: Verbosity) -> Self {
        let mode = verbosity.mode();
        let bar = mode.bar(total as u64, &format!("{label} [{{elapsed_precise}}] {{wide_bar}} {{pos}}/{{len}} {unit}"));
        let now = Instant::now();
        Self {
            label: label.into(),
            unit: unit.into(),
            total,
            mode,
            bar,
            start: now,
            every: Duration::from_secs(10),
            state: Mutex::new((0, now)),
        }
    }

    /// One more item done.
    pub fn inc(&self) {
        self.bar.inc(1);
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        state.0 += 1;
        let now = Instant::now();
        if self.mode == ProgressMode::Lines && now - state.1 >= self.every && state.0 < self.total {
            state.1 = now;
            let elapsed = (now - self.start).as_secs_f64();
            let eta = elapsed / state.0 as f64 * (self.total - state.0) as f64;
            eprintln!(
                "{}: {}/{} {}, {}, ETA {}",
                self.label,
                state.0,
                self.total,
                self.unit,
                human_duration(elapsed),
                human_duration(eta)
            );
        }
    }

    /// Clears the bar (the caller prints its own summary).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(step: usize, factor_type: Option<&str>, rejected: Option<bool>) -> Record {
        Record {
            iteration: 3,
            step,
            phase: if factor_type.is_some() { "fit" } else { "message-passing" }.into(),
            factor_type: factor_type.map(String::from),
            objective: 12.5,
            oracle_loss: factor_type.map(|_| 1.0),
            rejected,
            max_violation: None,
            train_error: None,
            validation_error: None,
            step_seconds: 0.1,
            elapsed_seconds: 1.0,
        }
    }

    #[test]
    fn the_eta_leaves_out_the_sessions_first_iteration_once_there_are_others() {
        // A cold first iteration of 100 s, then warm ones of 25 s: 10 left take 250 s.
        assert_eq!(eta_seconds(100.0, Some(0.0), 1, 10), 1000.0);
        assert_eq!(eta_seconds(100.0, None, 1, 10), 1000.0);
        assert_eq!(eta_seconds(150.0, Some(50.0), 3, 10), 250.0);
        // Without a recorded first iteration, the mean of all of them.
        assert_eq!(eta_seconds(150.0, None, 3, 10), 500.0);
        assert_eq!(eta_seconds(150.0, Some(50.0), 3, 0), 0.0);
    }

    #[test]
    fn the_observer_records_when_its_first_iteration_ended() {
        let mut p = ProgressObserver::new("cell", Verbosity::Quiet);
        p.observe(&TrainEvent::Started { total_iterations: 5, steps_per_iteration: 1, completed: 0 }).unwrap();
        assert!(p.first_end.is_none());
        p.observe(&TrainEvent::Step(&record(0, None, None))).unwrap();
        let first = p.first_end.expect("set after the first iteration");
        p.observe(&TrainEvent::Step(&record(0, None, None))).unwrap();
        assert_eq!(p.first_end, Some(first), "kept at the first iteration's end");
        p.observe(&TrainEvent::Started { total_iterations: 5, steps_per_iteration: 1, completed: 2 }).unwrap();
        assert!(p.first_end.is_none(), "a resumed session starts again");
    }

    #[test]
    fn the_iteration_line_names_rejected_fits_of_that_iteration_only() {
        let mut p = ProgressObserver::new("cell", Verbosity::Quiet);
        let start = TrainEvent::Started { total_iterations: 5, steps_per_iteration: 3, completed: 0 };
        p.observe(&start).unwrap();
        p.observe(&TrainEvent::Step(&record(0, Some("unary"), Some(false)))).unwrap();
        p.observe(&TrainEvent::Step(&record(1, Some("pair"), Some(true)))).unwrap();
        let last = record(2, None, None);
        let line = p.iteration_line(&last);
        assert!(line.contains("fits rejected: `pair`") && !line.contains("`unary`"), "{line}");
        p.observe(&TrainEvent::Step(&last)).unwrap();
        assert!(!p.iteration_line(&last).contains("rejected"), "cleared after the iteration");
    }
}
