//! Training from Python: any learner, the GIL released, Ctrl-C polled.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use serde_json::Value;
use structlearn::resume::{check_or_record_settings, resume_settings};
use structlearn::{
    LearnError, LearnerKind, ModelRegistry, Observer, OracleRegistry, Record, StructuredModel, TrainConfig, TrainEvent,
    build_learner_with,
};

use crate::convert::{PyDataset, PyModel, in_pool, py_err, thread_pool};
use crate::pyoracle::{ErrorSlot, KIND, PyOracle};

/// How often the waiting Python thread looks for signals (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(20);

/// Runs `f` on a worker thread with the GIL released, checking for signals
/// every [`SIGNAL_POLL`] on this (the Python) thread; a signal handler's
/// exception (`KeyboardInterrupt`) is returned once `f` has finished, and
/// `on_signal` is called at once so that `f` can stop early.
fn run_polling<T: Send>(
    py: Python<'_>,
    on_signal: impl Fn() + Send + Sync,
    f: impl FnOnce() -> T + Send,
) -> PyResult<(T, Option<PyErr>)> {
    py.detach(|| {
        std::thread::scope(|s| {
            let handle = s.spawn(f);
            let mut signal = None;
            while !handle.is_finished() {
                std::thread::sleep(SIGNAL_POLL);
                if signal.is_none()
                    && let Err(e) = Python::attach(|py| py.check_signals())
                {
                    signal = Some(e);
                    on_signal();
                }
            }
            match handle.join() {
                Ok(v) => Ok((v, signal)),
                Err(_) => Err(PyRuntimeError::new_err("structlearn: internal error (a worker thread panicked)")),
            }
        })
    })
}

/// [`run_polling`] for work that cannot stop early: the signal's exception
/// is raised after `f` finishes.
pub(crate) fn interruptible<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> PyResult<T> {
    let (value, signal) = run_polling(py, || {}, f)?;
    match signal {
        Some(e) => Err(e),
        None => Ok(value),
    }
}

/// What the observer shares with [`train`].
#[derive(Default)]
struct Shared {
    /// The model of the last finished learning iteration.
    last_model: Option<StructuredModel>,
    /// The Python callback asked to stop.
    stop: bool,
    /// The last finished learning iteration.
    finished: usize,
}

/// Passes each learning iteration's records to the Python layer and keeps
/// the last finished iteration's model. (Ctrl-C sets the learner's stop
/// flag, which the run loop obeys after the current step, checkpointing the
/// finished steps if asked to.)
struct PyObserver {
    on_iteration: Option<Py<PyAny>>,
    pending: Vec<Record>,
    shared: Arc<Mutex<Shared>>,
    errors: ErrorSlot,
}

impl Observer for PyObserver {
    fn observe(&mut self, event: &TrainEvent<'_>) -> Result<(), LearnError> {
        match event {
            TrainEvent::Step(record) => self.pending.push((*record).clone()),
            TrainEvent::IterationFinished { iteration, model } => {
                if let Ok(mut s) = self.shared.lock() {
                    s.last_model = Some((*model).clone());
                    s.finished = *iteration;
                }
                let records = std::mem::take(&mut self.pending);
                if let Some(callback) = &self.on_iteration {
                    let text = serde_json::to_string(&records).unwrap_or_else(|_| "[]".into());
                    let answer = Python::attach(|py| -> PyResult<bool> {
                        let r = callback.bind(py).call1((text,))?;
                        r.is_truthy()
                    });
                    match answer {
                        Ok(stop) => {
                            if stop && let Ok(mut s) = self.shared.lock() {
                                s.stop = true;
                            }
                        }
                        Err(e) => {
                            if let Ok(mut slot) = self.errors.lock()
                                && slot.is_none()
                            {
                                *slot = Some(e);
                            }
                            return Err(LearnError::Interrupted { completed: *iteration });
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn stop_requested(&self) -> bool {
        self.shared.lock().map(|s| s.stop).unwrap_or(false)
    }
}

/// What [`train`] returns to Python: model, history (JSON), best iteration,
/// stop reason, exception to raise.
type TrainResult = (Option<PyModel>, String, Option<usize>, String, Option<Py<PyAny>>);

/// The result of one run, for the Python layer.
struct Outcome {
    model: Option<StructuredModel>,
    history: Vec<Record>,
    best_iteration: Option<usize>,
    stop_reason: String,
    error: Option<LearnError>,
}

/// `train(data, oracles, config, learner, validation=None, n_jobs=None,
/// on_iteration=None, python_oracles=[])`.
///
/// * `oracles`: `(factor type, specification as JSON text)` pairs; a
///   specification `{"kind": "python", "slot": i}` is `python_oracles[i]`
///   ([`crate::pyoracle`]), any other kind comes from the built-in registry;
/// * `config`: [`TrainConfig`] fields as JSON text (unknown fields are errors);
///   with a `checkpoint`, the run resumes from that file if it exists (its
///   settings checked against those recorded beside it:
///   [`structlearn::resume`]), else records them there;
/// * `learner`: `algorithm1`, `hazan-urtasun`, `piecewise`,
///   `perceptron-local` or `perceptron-global`;
/// * `on_iteration(records_json) -> bool`: called after every learning
///   iteration with its step records; a true return stops training.
///
/// Returns `(model, history_json, best_iteration, stop_reason, exception)`:
/// on Ctrl-C or an exception in Python code, `model` is the last finished
/// iteration's (None if none finished) and `exception` the one to raise.
#[pyfunction]
#[pyo3(signature = (data, oracles, config, learner, validation=None, n_jobs=None, on_iteration=None, python_oracles=Vec::new()))]
#[allow(clippy::too_many_arguments)]
pub fn train<'py>(
    py: Python<'py>,
    data: &PyDataset,
    oracles: Vec<(String, String)>,
    config: &str,
    learner: &str,
    validation: Option<&PyDataset>,
    n_jobs: Option<usize>,
    on_iteration: Option<Py<PyAny>>,
    python_oracles: Vec<Py<PyAny>>,
) -> PyResult<TrainResult> {
    let kind: LearnerKind = learner.parse().map_err(|e: LearnError| PyValueError::new_err(format!("learner: {e}")))?;
    let config: TrainConfig =
        serde_json::from_str(config).map_err(|e| PyValueError::new_err(format!("training settings: {e}")))?;
    let specs = oracles
        .into_iter()
        .map(|(t, s)| {
            serde_json::from_str::<Value>(&s)
                .map(|v| (t.clone(), v))
                .map_err(|e| PyValueError::new_err(format!("oracle of `{t}`: {e}")))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let errors: ErrorSlot = Arc::new(Mutex::new(None));
    let mut registry = OracleRegistry::with_builtin();
    let objects = Arc::new(python_oracles);
    {
        let (objects, errors) = (objects.clone(), errors.clone());
        registry
            .register_constructor(
                KIND,
                "a Python object with fit(features, labels, bias, warm_start, sample_weight) -> model",
                &[("slot", "index of the Python oracle object")],
                serde_json::json!({"slot": 0}),
                Box::new(move |params| {
                    let slot = params.get("slot").and_then(Value::as_u64).unwrap_or(0) as usize;
                    let object = objects
                        .get(slot)
                        .ok_or_else(|| LearnError::Config(format!("no Python oracle object in slot {slot}")))?;
                    let object = Python::attach(|py| object.clone_ref(py));
                    let spec = serde_json::json!({"slot": slot});
                    Ok((Box::new(PyOracle::new(object, errors.clone())) as Box<dyn oracles::Oracle>, spec))
                }),
            )
            .map_err(py_err)?;
    }
    let checkpoint = config.checkpoint.as_ref().map(|c| c.path.clone());
    let resuming = checkpoint.as_deref().is_some_and(std::path::Path::exists);
    if let Some(path) = &checkpoint {
        if specs.iter().any(|(_, s)| s.get("kind").and_then(Value::as_str) == Some(KIND)) {
            return Err(PyValueError::new_err(
                "checkpoint: a Python oracle's models cannot be written to a checkpoint; use built-in oracles or \
                 checkpoint=None",
            ));
        }
        let settings = resume_settings(kind, &config, &specs, &registry).map_err(py_err)?;
        let advice = "fit with the same learner, oracles and settings (only max_iter, patience and min_delta may \
                      change), or delete the checkpoint to start afresh";
        // Python always records the settings; a file without them is resumed unchecked.
        check_or_record_settings(path, resuming, &settings, advice).map_err(py_err)?;
    }
    let pool = thread_pool(n_jobs)?;
    let interrupt = Arc::new(AtomicBool::new(false));
    let shared = Arc::new(Mutex::new(Shared::default()));
    let train_data = &data.data;
    let validation = validation.map(|v| &v.data);
    let mut observer = PyObserver { on_iteration, pending: Vec::new(), shared: shared.clone(), errors: errors.clone() };
    let run = || -> Result<Outcome, LearnError> {
        let mut learner = build_learner_with(kind, train_data, &specs, config, &registry)?;
        if let Some(v) = validation {
            learner.set_validation(v);
        }
        if let Some(path) = checkpoint.as_deref().filter(|_| resuming) {
            learner.resume_from(path, &ModelRegistry::with_builtin())?;
            // Resumed at the end of an iteration, its model is the one to keep on
            // an interruption; resumed inside one, none is held until the next ends.
            let completed = learner.completed_iterations();
            let inside = learner.steps_into_next() > 0;
            if let Ok(mut s) = shared.lock() {
                s.finished = completed;
                s.last_model = if inside { None } else { Some(learner.model()?) };
            }
            // The resumed iteration's finished steps: `on_iteration` gets all of
            // its records, as in an uninterrupted run.
            observer.pending = learner.history().iter().filter(|r| r.iteration > completed).cloned().collect();
        }
        learner.add_observer(Box::new(observer));
        learner.set_stop_flag(interrupt.clone());
        match learner.train() {
            Ok(o) => Ok(Outcome {
                model: Some(o.model),
                history: o.history,
                best_iteration: o.best_iteration,
                stop_reason: format!("{:?}", o.stop_reason),
                error: None,
            }),
            Err(e) => {
                let (last, finished) =
                    shared.lock().map(|mut s| (s.last_model.take(), s.finished)).unwrap_or((None, 0));
                let model = match learner.best_model() {
                    Some(best) => Some(best.clone()),
                    None => last,
                };
                // The records of the unfinished iteration go with it.
                let history = learner.history().iter().filter(|r| r.iteration <= finished).cloned().collect();
                Ok(Outcome { model, history, best_iteration: None, stop_reason: "Interrupted".into(), error: Some(e) })
            }
        }
    };
    let (outcome, signal) =
        run_polling(py, || interrupt.store(true, Ordering::SeqCst), || in_pool(pool.as_ref(), run))?;
    let outcome = outcome.map_err(|e| python_error(py, &errors).unwrap_or_else(|| py_err(e)))?;
    let history = serde_json::to_string(&outcome.history).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let exception = match (signal, &outcome.error) {
        (Some(s), _) => Some(s),
        (None, Some(e)) => Some(python_error(py, &errors).unwrap_or_else(|| py_err(clone_error(e)))),
        (None, None) => None,
    };
    // A run that failed before any iteration finished has nothing to keep.
    if outcome.model.is_none()
        && outcome.history.is_empty()
        && let Some(e) = exception
    {
        return Err(e);
    }
    let exception = exception.map(|e| e.into_value(py).into_any());
    Ok((outcome.model.map(PyModel::new), history, outcome.best_iteration, outcome.stop_reason, exception))
}

/// The Python exception kept by an oracle, model or callback, if any.
fn python_error(py: Python<'_>, errors: &ErrorSlot) -> Option<PyErr> {
    let _ = py;
    errors.lock().ok().and_then(|mut s| s.take())
}

/// A library error as text-equal copy (errors are not `Clone`).
fn clone_error(e: &LearnError) -> LearnError {
    match e {
        LearnError::Interrupted { completed } => LearnError::Interrupted { completed: *completed },
        other => LearnError::Config(other.to_string()),
    }
}
