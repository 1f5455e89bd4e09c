//! The validation set's scores of the factor types whose models continue
//! scores (boosting), kept from one evaluation to the next together with the
//! models they are of, so that an evaluation scores only what the fits since
//! then added ([`Model::score_continuing`]: the trees fitted since) instead
//! of walking every tree of an ensemble that grows each learning iteration.
//! The same bits as scoring afresh.

use std::sync::Mutex;

use oracles::{Features, Model};

use super::eval_messages::{ExampleFile, example_error, temp_file_error};
use crate::model::{Buffer, SCORES, StructuredModel, with_buffer};
use crate::{Dataset, EvaluationMessages, LearnError};

/// Whether `model`'s class continues scores (it continues from itself, on no
/// rows: [`Model::score_continuing`]), so that keeping its scores pays. Asked
/// when the kept scores are set up (the first evaluation at which some
/// type's model continues); a type whose model did not then (a zero model
/// before its first fit) is scored afresh at every evaluation: the same
/// numbers.
pub(super) fn continues(model: &dyn Model) -> bool {
    Features::new(&[], 0, model.dim()).and_then(|none| model.score_continuing(model, none, &mut [])).unwrap_or(false)
}

thread_local! {
    /// An example's kept scores, read and written back by [`KeptScores::energies`].
    static KEPT: Buffer = const { Buffer::new(Vec::new()) };
}

/// One data set's kept scores (module docs).
#[derive(Debug)]
pub(super) struct KeptScores {
    /// Per factor type, whether its scores are kept.
    keeps: Vec<bool>,
    /// Per factor type, the model the kept scores are of (`None`: not kept,
    /// or no evaluation finished yet).
    pub(super) models: Vec<Option<Box<dyn Model>>>,
    store: ScoreStore,
}

/// Each example's kept scores (its kept types' `rows × classes` one after the
/// other), where [`EvaluationMessages`] says the evaluation keeps its state.
#[derive(Debug)]
enum ScoreStore {
    Memory(Vec<Mutex<Vec<f64>>>),
    File(ExampleFile),
}

impl KeptScores {
    /// Zero scores of the types `keeps` marks, for every example of `data`,
    /// kept as `how` says; `None` if no type is marked.
    pub(super) fn new(data: &Dataset, keeps: Vec<bool>, how: EvaluationMessages) -> Result<Option<Self>, LearnError> {
        if !keeps.contains(&true) {
            return Ok(None);
        }
        let lengths = (0..data.len()).map(|k| {
            let types = data.factor_types().iter().enumerate().filter(|&(t, _)| keeps[t]);
            types.map(|(t, ft)| data.type_rows(t, k..k + 1) * ft.classes).sum::<usize>()
        });
        let store = match how {
            EvaluationMessages::Memory => ScoreStore::Memory(lengths.map(|n| Mutex::new(vec![0.0; n])).collect()),
            EvaluationMessages::TempFile => ScoreStore::File(ExampleFile::zeros_of(lengths).map_err(temp_file_error)?),
        };
        let models = keeps.iter().map(|_| None).collect();
        Ok(Some(Self { keeps, models, store }))
    }

    /// Example `k`'s energies under `model` ([`StructuredModel::energies`],
    /// bit for bit), the kept types' scores continued from the kept ones
    /// where `model`'s grew from the kept models, else scored afresh; the
    /// kept scores become `model`'s. Examples may be asked for in parallel.
    pub(super) fn energies(
        &self,
        model: &StructuredModel,
        data: &Dataset,
        k: usize,
        theta: &mut Vec<f64>,
    ) -> Result<(), LearnError> {
        // This thread's buffers: an example's kept scores are megabytes.
        with_buffer(&KEPT, |kept| with_buffer(&SCORES, |scores| self.energies_in(model, data, k, theta, kept, scores)))
    }

    /// [`KeptScores::energies`] with `kept` and `scores` as scratch.
    fn energies_in(
        &self,
        model: &StructuredModel,
        data: &Dataset,
        k: usize,
        theta: &mut Vec<f64>,
        kept: &mut Vec<f64>,
        scores: &mut Vec<f64>,
    ) -> Result<(), LearnError> {
        match &self.store {
            ScoreStore::Memory(all) => {
                kept.clear();
                kept.extend_from_slice(&lock(&all[k]));
            }
            ScoreStore::File(file) => file.load(k, kept).map_err(|e| example_error(k, e))?,
        }
        let mut offset = 0;
        model.energies_scored_by(data, k, theta, scores, |t, current, features, out| {
            if !self.keeps[t] {
                return current.score(features, out);
            }
            let mine = &mut kept[offset..offset + out.len()];
            offset += out.len();
            out.copy_from_slice(mine);
            let continued = match &self.models[t] {
                Some(previous) => current.score_continuing(previous.as_ref(), features, out)?,
                None => false,
            };
            if !continued {
                current.score(features, out)?;
            }
            mine.copy_from_slice(out);
            Ok(())
        })?;
        match &self.store {
            ScoreStore::Memory(all) => lock(&all[k]).copy_from_slice(kept),
            ScoreStore::File(file) => file.store(k, kept).map_err(|e| example_error(k, e))?,
        }
        Ok(())
    }

    /// After [`KeptScores::energies`] went over every example with `model`:
    /// the kept scores are now `model`'s.
    pub(super) fn scored_by(&mut self, model: &StructuredModel) {
        for ((kept, keeps), current) in self.models.iter_mut().zip(&self.keeps).zip(model.models()) {
            *kept = keeps.then(|| current.clone_model());
        }
    }
}

/// An example's kept scores (a panic while holding them ends the evaluation,
/// and the learner with it: nothing reads them after).
fn lock(scores: &Mutex<Vec<f64>>) -> std::sync::MutexGuard<'_, Vec<f64>> {
    scores.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
