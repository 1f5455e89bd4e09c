//! Algorithm 1's checkpoint files: its state (models, messages, evaluation
//! messages) and the run's ([`RunState`]), written atomically and streamed;
//! restored only into the same learner, data set and seed.

use std::path::Path;

use oracles::{Model, ModelRegistry};
use serde::{Deserialize, Serialize};
use smoothed_inference::Messages;

use super::eval_messages::{CheckpointMessages, MessageStore};
use super::{Algorithm1, Step};
use crate::executor::RunState;
use crate::files::{unwrap_binary, write_binary_atomic};
use crate::model::oracle_err;
use crate::observer::Record;
use crate::{Dataset, LearnError, StructuredModel};

impl Algorithm1<'_> {
    /// Writes the learner's state (models, messages, evaluation messages,
    /// seed) and `run` (completed iterations, history, time, best model)
    /// atomically.
    pub(super) fn write_checkpoint(&self, path: &Path, run: &RunState) -> Result<(), LearnError> {
        let models = self
            .models
            .iter()
            .zip(self.train.factor_types())
            .map(|(m, ft)| {
                m.as_ref().map(|m| Ok((m.kind().to_string(), m.to_bytes().map_err(|e| oracle_err(ft, e))?))).transpose()
            })
            .collect::<Result<Vec<_>, LearnError>>()?;
        let body = CheckpointRef {
            seed: self.config.seed,
            examples: self.train.len(),
            factor_types: self.train.factor_types().iter().map(|f| f.name.as_str()).collect(),
            completed: run.completed,
            models,
            messages: message_slices(&self.messages),
            history: &run.history,
            elapsed_seconds: run.elapsed_seconds,
            train_eval_messages: CheckpointMessages(self.train_eval_messages.as_ref()),
            validation_eval_messages: CheckpointMessages(self.validation_eval_messages.as_ref()),
            best_model: run.best_model.as_ref().map(StructuredModel::to_bytes).transpose()?,
        };
        // Streamed to the file: the messages (the bulk) are not copied.
        write_binary_atomic(path, CHECKPOINT_MAGIC, |w| {
            postcard::to_io(&body, w).map(drop).map_err(std::io::Error::other)
        })
    }

    /// Restores a checkpoint written by [`Algorithm1::write_checkpoint`] for
    /// the same training set and seed (`path` names it in errors) and returns
    /// the run state it held.
    pub(super) fn read_checkpoint(
        &mut self,
        bytes: &[u8],
        path: &Path,
        registry: &ModelRegistry,
    ) -> Result<RunState, LearnError> {
        let body = unwrap_binary(path, bytes, CHECKPOINT_MAGIC)?;
        let cp: CheckpointBody = postcard::from_bytes(body).map_err(|e| {
            LearnError::bad_file(
                path,
                format!(
                    "the checkpoint body does not decode although its checksum matches \
                         (written by an incompatible build?): {e}"
                ),
            )
        })?;
        let names: Vec<String> = self.train.factor_types().iter().map(|f| f.name.clone()).collect();
        if cp.seed != self.config.seed || cp.examples != self.train.len() || cp.factor_types != names {
            return Err(LearnError::bad_file(
                path,
                format!(
                    "checkpoint is for seed {}, {} examples, types {:?}; this run has seed {}, {} examples, types {:?}",
                    cp.seed,
                    cp.examples,
                    cp.factor_types,
                    self.config.seed,
                    self.train.len(),
                    names
                ),
            ));
        }
        if cp.models.len() != names.len() || cp.messages.len() != self.train.len() {
            return Err(LearnError::bad_file(
                path,
                format!(
                    "checkpoint holds {} models and messages of {} examples, but declares {} factor types and {} \
                     examples (inconsistent file)",
                    cp.models.len(),
                    cp.messages.len(),
                    names.len(),
                    self.train.len()
                ),
            ));
        }
        let mut models = Vec::with_capacity(cp.models.len());
        for (m, ft) in cp.models.into_iter().zip(self.train.factor_types()) {
            models.push(match m {
                None => None,
                Some((kind, bytes)) => {
                    let model = registry
                        .load(&kind, &bytes)
                        .map_err(|e| LearnError::bad_file(path, format!("model of `{}`: {e}", ft.name)))?;
                    if model.dim() != ft.dim || model.classes() != ft.classes {
                        return Err(LearnError::bad_file(path, format!("model of `{}` has the wrong shape", ft.name)));
                    }
                    Some(model)
                }
            });
        }
        let mut messages = Vec::with_capacity(self.train.len());
        for (k, lambda) in cp.messages.into_iter().enumerate() {
            let graph = &self.train.examples()[k].graph();
            messages.push(
                Messages::from_vec(graph, lambda)
                    .map_err(|e| LearnError::bad_file(path, format!("messages of example {k}: {e}")))?,
            );
        }
        // Empty: not evaluated yet (allocated at the first evaluation).
        let how = self.config.evaluation_messages;
        let restore = |data: &Dataset, saved: Vec<Vec<f64>>, what: &str| -> Result<Option<MessageStore>, LearnError> {
            if saved.is_empty() {
                return Ok(None);
            }
            if saved.len() != data.len() {
                return Err(LearnError::bad_file(
                    path,
                    format!(
                        "checkpoint has evaluation messages for {} {what} examples, this run has {}",
                        saved.len(),
                        data.len()
                    ),
                ));
            }
            let saved = saved
                .into_iter()
                .enumerate()
                .map(|(k, lambda)| {
                    Messages::from_vec(data.examples()[k].graph(), lambda).map_err(|e| {
                        LearnError::bad_file(path, format!("evaluation messages of {what} example {k}: {e}"))
                    })
                })
                .collect::<Result<_, _>>()?;
            MessageStore::from_saved(data, saved, how).map(Some)
        };
        let train_eval = restore(self.train, cp.train_eval_messages, "training")?;
        let validation_eval = match self.validation {
            Some(v) => restore(v, cp.validation_eval_messages, "validation")?,
            None => None,
        };
        let best_model = cp.best_model.map(|b| StructuredModel::from_bytes(&b, registry, path)).transpose()?;
        // After decoding everything, so that a damaged file is reported as such.
        self.check_same_learner(&models, &cp.history, cp.completed, path)?;
        self.train_eval_messages = train_eval;
        self.validation_eval_messages = validation_eval;
        self.models = models;
        self.messages = messages;
        // θ is a function of the models: recompute it exactly as the fits did.
        self.refresh_all_types()?;
        Ok(RunState { completed: cp.completed, history: cp.history, elapsed_seconds: cp.elapsed_seconds, best_model })
    }

    /// Refuses a checkpoint written by another learner: models of other
    /// oracle kinds than this trainer's, a history of another schedule, or
    /// more finished learning iterations than this run has. Without this a
    /// checkpoint of, say, a linear/linear run would silently continue as a
    /// zero/zero run and end in a model that holds linear models.
    fn check_same_learner(
        &self,
        models: &[Option<Box<dyn Model>>],
        history: &[Record],
        completed: usize,
        path: &Path,
    ) -> Result<(), LearnError> {
        let names = || self.train.factor_types().iter().map(|f| f.name.as_str());
        let mismatch =
            models.iter().zip(&self.oracles).any(|(m, oracle)| m.as_ref().is_some_and(|m| m.kind() != oracle.kind()));
        if mismatch {
            let theirs: Vec<String> = names()
                .zip(models)
                .map(|(t, m)| format!("{t}: {}", m.as_ref().map_or("(not fitted yet)", |m| m.kind())))
                .collect();
            let ours: Vec<String> = names().zip(&self.oracles).map(|(t, o)| format!("{t}: {}", o.kind())).collect();
            return Err(LearnError::bad_file(
                path,
                format!(
                    "the checkpoint holds models of oracle kinds {}, but this run's oracles are {}: it was written \
                     by another run (another cell); resume with the oracles it was written with, or delete it to \
                     start afresh",
                    theirs.join(", "),
                    ours.join(", ")
                ),
            ));
        }
        let describe = |step: &Step| match step {
            Step::Fit { factor_type } => format!("fit `{factor_type}`"),
            Step::MessagePassing { .. } => "message-passing".to_string(),
        };
        for r in history {
            let same = self.steps.get(r.step).is_some_and(|step| match step {
                Step::Fit { factor_type } => r.phase == "fit" && r.factor_type.as_deref() == Some(factor_type),
                Step::MessagePassing { .. } => r.phase == "message-passing",
            });
            if !same {
                let theirs = match (r.phase.as_str(), &r.factor_type) {
                    ("fit", Some(t)) => format!("fit `{t}`"),
                    (phase, _) => phase.to_string(),
                };
                return Err(LearnError::bad_file(
                    path,
                    format!(
                        "the checkpoint was written under another schedule (another learner?): step {} of learning \
                         iteration {} was {theirs}, this run's step {} is {}; resume with the learner and schedule \
                         it was written with, or delete it to start afresh",
                        r.step,
                        r.iteration,
                        r.step,
                        self.steps.get(r.step).map_or_else(|| "(none)".to_string(), describe)
                    ),
                ));
            }
        }
        if completed > self.config.learning_iterations {
            return Err(LearnError::bad_file(
                path,
                format!(
                    "the checkpoint has finished {} learning iterations, more than this run's {}; resume with at \
                     least {} learning iterations, or delete it to start afresh",
                    completed, self.config.learning_iterations, completed
                ),
            ));
        }
        Ok(())
    }
}

/// Magic bytes of checkpoint files (last byte: format version).
pub const CHECKPOINT_MAGIC: &[u8; 8] = b"SLCHKPT\x03";

/// A checkpoint as read back ([`CheckpointRef`] is what is written: the same
/// fields in the same order, borrowed, so postcard encodes both alike).
#[derive(Debug, Deserialize)]
struct CheckpointBody {
    seed: u64,
    examples: usize,
    factor_types: Vec<String>,
    completed: usize,
    models: Vec<Option<(String, Vec<u8>)>>,
    messages: Vec<Vec<f64>>,
    history: Vec<Record>,
    elapsed_seconds: f64,
    /// Warm-started evaluation messages per training example (empty: none).
    train_eval_messages: Vec<Vec<f64>>,
    /// The same for the validation set attached when the checkpoint was written.
    validation_eval_messages: Vec<Vec<f64>>,
    /// With early stopping: the best validation iteration's model file bytes.
    best_model: Option<Vec<u8>>,
}

fn message_slices(messages: &[Messages]) -> Vec<&[f64]> {
    messages.iter().map(Messages::as_slice).collect()
}

/// [`CheckpointBody`] borrowed from the trainer, for writing.
#[derive(Serialize)]
struct CheckpointRef<'a> {
    seed: u64,
    examples: usize,
    factor_types: Vec<&'a str>,
    completed: usize,
    models: Vec<Option<(String, Vec<u8>)>>,
    messages: Vec<&'a [f64]>,
    history: &'a [Record],
    elapsed_seconds: f64,
    train_eval_messages: CheckpointMessages<'a>,
    validation_eval_messages: CheckpointMessages<'a>,
    best_model: Option<Vec<u8>>,
}
