//! Observers of training (argmin's pattern): progress bars, curve writers and
//! user callbacks are plugged in; the algorithm itself prints nothing.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{LearnError, StructuredModel};

/// What happened in one step of a learning iteration (docs/MATH.md §4).
///
/// ```
/// let r: structlearn::Record = serde_json::from_str(r#"{"iteration": 1, "step": 1, "phase": "message-passing",
///     "factor_type": null, "objective": 12.5, "oracle_loss": null, "rejected": null, "max_violation": 0.01,
///     "train_error": 0.1, "validation_error": null, "step_seconds": 0.2, "elapsed_seconds": 0.5}"#).unwrap();
/// assert_eq!(structlearn::CsvCurveWriter::row(&r), "1,1,message-passing,,12.5,,,0.01,0.1,,0.200000,0.500000");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Learning iteration, from 1.
    pub iteration: usize,
    /// Index of the step in the schedule.
    pub step: usize,
    /// `"fit"` or `"message-passing"`.
    pub phase: String,
    /// The factor type fitted (fit steps).
    pub factor_type: Option<String>,
    /// Training objective `R = Σ_k [A(λ^k, θ^k) − θ^k(y^k)]` after the step
    /// (docs/MATH.md §4), plus the oracles' penalties `Σ_t ε_t Ω_t` if they
    /// have a ridge (docs/MATH.md §6.4); `≥ 0`.
    pub objective: f64,
    /// The oracle's loss `L_t` (logit units) after the fit.
    pub oracle_loss: Option<f64>,
    /// Whether the fit was rejected because it did not lower the loss.
    pub rejected: Option<bool>,
    /// Largest marginalisation violation over the training examples (message-passing steps).
    pub max_violation: Option<f64>,
    /// Error of prediction on the training set, when evaluated at this step.
    pub train_error: Option<f64>,
    /// Error of prediction on the validation/test set, when evaluated.
    pub validation_error: Option<f64>,
    /// Seconds spent in the step (excluding evaluation).
    pub step_seconds: f64,
    /// Seconds since training started (including earlier runs when resumed).
    pub elapsed_seconds: f64,
}

impl Record {
    /// The record of step `step` of learning iteration `iteration` in phase
    /// `phase`, with nothing measured yet (objective 0, every optional figure
    /// `None`, no time): a learner fills in what its step measured, the
    /// executor the errors and times.
    ///
    /// ```
    /// let r = structlearn::Record::new(3, 0, "fit");
    /// assert_eq!((r.iteration, r.step, r.phase.as_str(), r.train_error), (3, 0, "fit", None));
    /// ```
    pub fn new(iteration: usize, step: usize, phase: &str) -> Self {
        Self {
            iteration,
            step,
            phase: phase.to_string(),
            factor_type: None,
            objective: 0.0,
            oracle_loss: None,
            rejected: None,
            max_violation: None,
            train_error: None,
            validation_error: None,
            step_seconds: 0.0,
            elapsed_seconds: 0.0,
        }
    }
}

/// Events sent to observers.
///
/// ```
/// use structlearn::{Callback, TrainEvent};
/// // Print the validation error after every learning iteration.
/// let observer = Callback(|event: &TrainEvent<'_>| {
///     if let TrainEvent::Step(r) = event
///         && let Some(e) = r.validation_error
///     {
///         println!("iteration {}: validation error {e:.4}", r.iteration);
///     }
///     Ok::<(), structlearn::LearnError>(())
/// });
/// # drop(observer);
/// ```
#[derive(Debug)]
pub enum TrainEvent<'a> {
    /// Training starts (or resumes after `completed` iterations).
    Started {
        /// Learning iterations to run in total.
        total_iterations: usize,
        /// Steps per learning iteration.
        steps_per_iteration: usize,
        /// Iterations already completed (resume).
        completed: usize,
    },
    /// A step finished.
    Step(&'a Record),
    /// A learning iteration finished; the current model is available.
    IterationFinished {
        /// The iteration (from 1).
        iteration: usize,
        /// The model after it.
        model: &'a StructuredModel,
    },
    /// A checkpoint was written.
    Checkpointed {
        /// Finished learning iterations it holds.
        iteration: usize,
        /// Steps of the next learning iteration it also holds (0 at the end
        /// of an iteration; see [`crate::CheckpointConfig::within_iteration_seconds`]).
        steps: usize,
        /// Where.
        path: &'a Path,
    },
    /// Training finished.
    Finished,
}

/// Receives training events. An error stops training at once; an observer
/// that wants training to end normally after the current learning iteration
/// (a target reached, a time budget spent) says so in
/// [`Observer::stop_requested`] instead (see [`crate::executor`]).
///
/// ```
/// use structlearn::{LearnError, Observer, TrainEvent};
/// /// Ends training (normally) once the objective is below a target.
/// struct StopBelow {
///     target: f64,
///     reached: bool,
/// }
/// impl Observer for StopBelow {
///     fn observe(&mut self, event: &TrainEvent<'_>) -> Result<(), LearnError> {
///         if let TrainEvent::Step(r) = event {
///             self.reached |= r.objective < self.target;
///         }
///         Ok(())
///     }
///     fn stop_requested(&self) -> bool {
///         self.reached
///     }
/// }
/// // trainer.add_observer(Box::new(StopBelow { target: 100.0, reached: false }));
/// # drop(StopBelow { target: 1.0, reached: false });
/// ```
pub trait Observer {
    /// Handles one event.
    fn observe(&mut self, event: &TrainEvent<'_>) -> Result<(), LearnError>;

    /// Whether training should end after the current learning iteration
    /// (checked once per iteration, after its checkpoint): the run then
    /// returns its model normally, with
    /// [`crate::executor::StopReason::Observer`]. The default is `false`.
    fn stop_requested(&self) -> bool {
        false
    }
}

/// An observer from a closure.
///
/// ```
/// use structlearn::{Callback, TrainEvent};
/// let mut finished = 0;
/// let mut count = Callback(|e: &TrainEvent<'_>| {
///     if let TrainEvent::IterationFinished { .. } = e {
///         finished += 1;
///     }
///     Ok(())
/// });
/// use structlearn::Observer;
/// count.observe(&TrainEvent::Finished).unwrap();
/// ```
pub struct Callback<F>(pub F);

impl<F: FnMut(&TrainEvent<'_>) -> Result<(), LearnError>> Observer for Callback<F> {
    fn observe(&mut self, event: &TrainEvent<'_>) -> Result<(), LearnError> {
        (self.0)(event)
    }
}

/// Writes every [`Record`] as a CSV row, flushed at once, so an interrupted
/// run keeps its curve.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("curve.csv");
/// let writer = structlearn::CsvCurveWriter::create(&path).unwrap(); // trainer.add_observer(Box::new(writer))
/// drop(writer);
/// assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), structlearn::observer::CURVE_CSV_HEADER);
/// ```
pub struct CsvCurveWriter {
    out: std::io::BufWriter<std::fs::File>,
    path: std::path::PathBuf,
}

/// Header of [`CsvCurveWriter`] files.
pub const CURVE_CSV_HEADER: &str = "iteration,step,phase,factor_type,objective,oracle_loss,rejected,max_violation,train_error,validation_error,step_seconds,elapsed_seconds";

impl CsvCurveWriter {
    /// Creates (truncates) `path` and writes the header.
    pub fn create(path: &Path) -> Result<Self, LearnError> {
        let file = std::fs::File::create(path).map_err(|e| LearnError::io(path, e))?;
        let mut out = std::io::BufWriter::new(file);
        writeln!(out, "{CURVE_CSV_HEADER}").map_err(|e| LearnError::io(path, e))?;
        Ok(Self { out, path: path.to_path_buf() })
    }

    /// Continues the curve of a resumed run: rewrites `path` (atomically) with
    /// the header and one row per record of `history` — the steps the
    /// checkpoint kept, e.g. [`crate::Trainer::history`] after
    /// [`crate::Trainer::resume_from`] — then appends. Rows of steps after the
    /// checkpoint, which the resumed run redoes, are dropped, so the finished
    /// curve has every step once.
    pub fn resume(path: &Path, history: &[Record]) -> Result<Self, LearnError> {
        let mut text = format!("{CURVE_CSV_HEADER}\n");
        for r in history {
            text.push_str(&Self::row(r));
            text.push('\n');
        }
        crate::files::write_atomic(path, text.as_bytes())?;
        let file = std::fs::OpenOptions::new().append(true).open(path).map_err(|e| LearnError::io(path, e))?;
        Ok(Self { out: std::io::BufWriter::new(file), path: path.to_path_buf() })
    }

    /// One CSV row of a record (no newline).
    pub fn row(r: &Record) -> String {
        fn opt<T: ToString>(v: &Option<T>) -> String {
            v.as_ref().map_or(String::new(), ToString::to_string)
        }
        format!(
            "{},{},{},{},{},{},{},{},{},{},{:.6},{:.6}",
            r.iteration,
            r.step,
            r.phase,
            opt(&r.factor_type),
            r.objective,
            opt(&r.oracle_loss),
            opt(&r.rejected),
            opt(&r.max_violation),
            opt(&r.train_error),
            opt(&r.validation_error),
            r.step_seconds,
            r.elapsed_seconds
        )
    }
}

impl Observer for CsvCurveWriter {
    fn observe(&mut self, event: &TrainEvent<'_>) -> Result<(), LearnError> {
        if let TrainEvent::Step(r) = event {
            writeln!(self.out, "{}", Self::row(r)).map_err(|e| LearnError::io(&self.path, e))?;
            self.out.flush().map_err(|e| LearnError::io(&self.path, e))?;
        }
        Ok(())
    }
}

/// Writes every [`Record`] as one JSON object per line.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let writer = structlearn::JsonLinesWriter::create(&dir.path().join("curve.jsonl")).unwrap();
/// # drop(writer);
/// // trainer.add_observer(Box::new(writer)); each line then is one serialised `Record`.
/// ```
pub struct JsonLinesWriter {
    out: std::io::BufWriter<std::fs::File>,
    path: std::path::PathBuf,
}

impl JsonLinesWriter {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path) -> Result<Self, LearnError> {
        let file = std::fs::File::create(path).map_err(|e| LearnError::io(path, e))?;
        Ok(Self { out: std::io::BufWriter::new(file), path: path.to_path_buf() })
    }
}

impl Observer for JsonLinesWriter {
    fn observe(&mut self, event: &TrainEvent<'_>) -> Result<(), LearnError> {
        if let TrainEvent::Step(r) = event {
            let line = serde_json::to_string(r).map_err(|e| LearnError::bad_file(&self.path, e.to_string()))?;
            writeln!(self.out, "{line}").map_err(|e| LearnError::io(&self.path, e))?;
            self.out.flush().map_err(|e| LearnError::io(&self.path, e))?;
        }
        Ok(())
    }
}
