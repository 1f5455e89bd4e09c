//! Algorithm 1 (docs/MATH.md §4; chapter §1.8–1.10): structured learning by iterated,
//! message-biased logistic regression, with shared-parameter pooling.
//!
//! Per training example `k` the learner keeps messages `λ^k` (persisting across
//! learning iterations, starting at 0) and potentials
//! `θ^k(y_α) = ε_t g_t(φ^k_α, y_α) + Δ_α(y^k_α, y_α)`. A learning iteration runs
//! the [`Step`]s of the schedule (default: for each factor type in order, fit
//! it, then `message_passing_iterations` (default 10, the chapter 25) message-passing
//! iterations on every example):
//!
//! * **Fit** type `t`: pool every region of type `t` of every example into one
//!   oracle problem with labels `y^k_α` and biases (Eq. 14)
//!   `b^k_α(y_α) = (Δ_α(y^k_α, y_α) + Σ_{β child} λ^k_α(y_β) − Σ_{γ parent} λ^k_γ(y_α)) / ε_t`,
//!   fit it warm-started from the previous `g_t` (keeping the old one if the new
//!   one is worse: [`oracles::fit_monotone`]), and refresh `θ` of those regions.
//! * **Message passing**: run star-update iterations on every example in
//!   parallel (rayon), from the persisting messages; each example stops early
//!   once its violation is below [`TrainConfig::message_passing_tolerance`].
//!
//! After each step the objective `R = Σ_k [A(λ^k, θ^k) − Σ_α θ^k_α(y^k_α)]`
//! (which equals `Σ_t ε_t L_t` of the oracle losses), plus the oracles'
//! penalties `Σ_t ε_t Ω_t(g_t)` when they have any, is reported to observers.
//! After message passing `R` is summed region by region in a form that
//! rounding cannot make negative ([`crate::objective`]); after a
//! warm-started fit of type `t` it is the previous value plus `ε_t` times the
//! change of the oracle's `L_t + Ω_t` (no pass over the data), recomputed in
//! full in the one case where that update's rounding shows (a value below 0).
//!
//! Randomness: the oracle call of step `s` of iteration `i` gets the seed
//! `mix(seed, i, s)`; no other state is random, so a run resumed from a
//! checkpoint equals an uninterrupted one.

mod checkpoint;
mod config;
mod eval_messages;
mod kept_scores;
mod pooled;

use std::path::Path;
use std::sync::Arc;

use oracles::{
    Collective, Features, FitContext, Model, ModelRegistry, Oracle, Problem, SingleProcess, fit_monotone,
    fit_monotone_scored,
};
use rayon::prelude::*;
use smoothed_inference::{InferenceProblem, Messages, RunOptions, with_thread_workspace};

pub use checkpoint::CHECKPOINT_MAGIC;
pub use config::{
    CheckpointConfig, DEFAULT_EVALUATION, DEFAULT_LEARNING_ITERATIONS, DEFAULT_MESSAGE_PASSING_ITERATIONS,
    DEFAULT_MESSAGE_PASSING_TOLERANCE, DEFAULT_TRAIN_ERROR_EVERY, EPSILON_RANGE, Evaluate, Step, TrainConfig,
};
pub use eval_messages::EvaluationMessages;
use eval_messages::MessageStore;
use kept_scores::KeptScores;
use pooled::{
    DENSE_BIAS_ENTRIES, MessageBias, Pooled, Potentials, SCORE_GROUP_ROWS, ThetaSource, example_loss, gather_energies,
    pool, theta_entry, with_region_deltas, with_theta,
};

use crate::discrepancy::{Discrepancy, Hamming};
use crate::executor::{Executor, RunState, Solver, StopReason};
use crate::learner::{check_training_set, oracles_by_type};
use crate::model::{Energies, error_rate_of, example_plans, oracle_err, zero_messages};
use crate::objective::{NeumaierSum, loss_from_workspace};
use crate::observer::Record;
use crate::{Dataset, LearnError, LearnerKind, StructuredModel};

/// What [`Trainer::train`] returns.
///
/// ```
/// # use std::sync::Arc;
/// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
/// # let graph = Arc::new(factor_graph::grid(2, 2, 2).unwrap());
/// # let ex = |labels: Vec<usize>, x: [f64; 4]| Example::new(
/// #     "x",
/// #     graph.clone(),
/// #     Some(labels),
/// #     vec![FeatureBlock { dim: 2, values: x.iter().flat_map(|&v| [v, 1.0]).collect() }, FeatureBlock { dim: 1, values: vec![1.0; 4] }],
/// # );
/// # let data = Dataset::new(vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)],
/// #     vec![ex(vec![0, 1, 0, 1], [0.1, 0.9, 0.2, 0.8]), ex(vec![1, 1, 0, 0], [0.9, 0.7, 0.1, 0.3])]).unwrap();
/// use structlearn::oracle_config::builtin_oracle;
/// use structlearn::{TrainConfig, Trainer};
/// let oracles = vec![("unary".into(), builtin_oracle("linear").unwrap()), ("pairwise".into(), builtin_oracle("linear").unwrap())];
/// let outcome = Trainer::new(&data, oracles, TrainConfig { learning_iterations: 3, ..TrainConfig::default() })
///     .unwrap()
///     .train()
///     .unwrap();
/// // One record per step: 2 fits + 2 message-passing steps per learning iteration.
/// assert_eq!(outcome.history.len(), 3 * 4);
/// assert!(!outcome.stopped_early && outcome.best_iteration.is_none());
/// ```
#[derive(Debug)]
pub struct TrainOutcome {
    /// The learned model: the last iteration's or, with early stopping, the
    /// best validation iteration's.
    pub model: StructuredModel,
    /// With early stopping: the iteration of the best validation error.
    pub best_iteration: Option<usize>,
    /// Whether early stopping ended training before the last iteration.
    pub stopped_early: bool,
    /// Why training ended.
    pub stop_reason: StopReason,
    /// Every step's record (including those before a resume).
    pub history: Vec<Record>,
}

/// Runs Algorithm 1 on a training set with one oracle per factor type.
///
/// ```
/// use std::sync::Arc;
/// use structlearn::oracle_config::builtin_oracle;
/// use structlearn::{Callback, Dataset, Example, FactorTypeInfo, FeatureBlock, PredictOptions, TrainConfig, TrainEvent, Trainer};
/// // Two 2 × 2 images; unary features [x, 1], pair features [1].
/// let graph = Arc::new(factor_graph::grid(2, 2, 2).unwrap());
/// let ex = |labels: Vec<usize>, x: [f64; 4]| Example::new(
///     "x",
///     graph.clone(),
///     Some(labels),
///     vec![
///         FeatureBlock { dim: 2, values: x.iter().flat_map(|&v| [v, 1.0]).collect() },
///     FeatureBlock { dim: 1, values: vec![1.0; 4] },
///     ],
/// );
/// let types = vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)];
/// let data = Dataset::new(types, vec![ex(vec![0, 1, 0, 1], [0.1, 0.9, 0.2, 0.8]), ex(vec![1, 1, 0, 0], [0.9, 0.7, 0.1, 0.3])])
///     .unwrap();
/// let oracles = vec![("unary".into(), builtin_oracle("linear").unwrap()), ("pairwise".into(), builtin_oracle("constant").unwrap())];
/// let config = TrainConfig { learning_iterations: 5, ..TrainConfig::default() };
/// let mut trainer = Trainer::new(&data, oracles, config).unwrap().with_validation(&data);
/// trainer.add_observer(Box::new(Callback(|e: &TrainEvent<'_>| {
///     if let TrainEvent::Step(r) = e {
///         println!("iteration {} step {}: objective {:.4}", r.iteration, r.step, r.objective);
///     }
///     Ok(())
/// })));
/// let outcome = trainer.train().unwrap();
/// assert_eq!(outcome.model.error_rate(&data, &PredictOptions::default()).unwrap(), 0.0);
/// ```
pub type Trainer<'a> = Executor<'a, Algorithm1<'a>>;

/// Algorithm 1 as a [`Solver`]: pooled oracle problems, persistent messages,
/// the objective, evaluation messages and its checkpoint state (module
/// docs). Run by an [`Executor`] ([`Trainer`]); the Hazan–Urtasun and
/// piecewise learners are this solver under another schedule and oracles
/// ([`crate::build_learner`]).
pub struct Algorithm1<'a> {
    kind: LearnerKind,
    train: &'a Dataset,
    validation: Option<&'a Dataset>,
    oracles: Vec<Box<dyn Oracle>>,
    discrepancy: Box<dyn Discrepancy>,
    config: TrainConfig,
    steps: Vec<Step>,
    step_types: Vec<Option<usize>>,
    epsilon: Vec<f64>,
    pooled: Vec<Pooled>,
    /// `λ^k` per training example.
    messages: Vec<Messages>,
    models: Vec<Option<Box<dyn Model>>>,
    /// Evaluation messages per training example (warm-started evaluation;
    /// allocated at the first evaluation that needs them, kept as
    /// [`TrainConfig::evaluation_messages`] says).
    train_eval_messages: Option<MessageStore>,
    /// Evaluation messages per validation example (the same).
    validation_eval_messages: Option<MessageStore>,
    /// The validation set's scores of the types whose models continue
    /// scores, from the last evaluation ([`KeptScores`]; `None` before it,
    /// after a failed one, or while no type's model continues scores).
    validation_scores: Option<KeptScores>,
    /// The ranks the examples are spread over ([`Algorithm1::distribute`]).
    collective: Arc<dyn Collective>,
}

impl<'a> Executor<'a, Algorithm1<'a>> {
    /// Algorithm 1 on `train` with one oracle per factor type (by name, in
    /// any order); everything is validated before any work
    /// ([`Algorithm1::new`]).
    pub fn new(
        train: &'a Dataset,
        oracles: Vec<(String, Box<dyn Oracle>)>,
        config: TrainConfig,
    ) -> Result<Self, LearnError> {
        Ok(Executor::for_solver(Algorithm1::new(train, oracles, config)?))
    }

    /// Replaces the Hamming discrepancy. Must be called before training starts.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
    /// # let graph = Arc::new(factor_graph::grid(1, 2, 2).unwrap());
    /// # let ex = Example::new(
    /// #     "x",
    /// #     graph,
    /// #     Some(vec![0, 1]),
    /// #     vec![FeatureBlock { dim: 1, values: vec![0.1, 0.9] }, FeatureBlock { dim: 1, values: vec![1.0] }],
    /// # );
    /// # let data = Dataset::new(vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)], vec![ex]).unwrap();
    /// use structlearn::oracle_config::builtin_oracle;
    /// use structlearn::{NoDiscrepancy, TrainConfig, Trainer};
    /// let oracles = vec![("unary".into(), builtin_oracle("linear").unwrap()), ("pairwise".into(), builtin_oracle("linear").unwrap())];
    /// // No loss augmentation: a smoothed CRF-like objective.
    /// let trainer = Trainer::new(&data, oracles, TrainConfig::default()).unwrap().with_discrepancy(Box::new(NoDiscrepancy)).unwrap();
    /// # drop(trainer);
    /// ```
    pub fn with_discrepancy(mut self, discrepancy: Box<dyn Discrepancy>) -> Result<Self, LearnError> {
        let solver = self.solver_mut();
        solver.discrepancy = discrepancy;
        solver.initial_states()?;
        Ok(self)
    }

    /// `ε_t` per factor type.
    pub fn epsilon(&self) -> &[f64] {
        &self.solver().epsilon
    }

    /// [`Algorithm1::objective`].
    pub fn objective(&self) -> Result<f64, LearnError> {
        self.solver().objective()
    }

    /// [`Algorithm1::penalty`].
    pub fn penalty(&self) -> Result<f64, LearnError> {
        self.solver().penalty()
    }
}

impl<'a> Algorithm1<'a> {
    /// Validates everything before any work: the settings
    /// ([`TrainConfig::validate`]), labels on every example, one oracle per
    /// factor type (by name, in any order) with valid hyper-parameters, the
    /// schedule, the entropy weights.
    pub fn new(
        train: &'a Dataset,
        oracles: Vec<(String, Box<dyn Oracle>)>,
        config: TrainConfig,
    ) -> Result<Self, LearnError> {
        check_training_set(train)?;
        let oracles = oracles_by_type(train, oracles)?;
        config.validate()?;
        let evaluates = config.evaluate != Evaluate::Never;
        eval_messages::check_temp_dir(config.evaluation_messages, evaluates)?;
        let steps = config.steps(train);
        let step_types = steps
            .iter()
            .map(|s| match s {
                Step::Fit { factor_type } => train
                    .factor_type_index(factor_type)
                    .map(Some)
                    .ok_or_else(|| train.unknown_factor_type("schedule", factor_type)),
                Step::MessagePassing { .. } => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let epsilon = config.epsilons(train)?;
        let pooled = (0..train.factor_types().len()).map(|t| pool(train, t)).collect::<Result<Vec<_>, _>>()?;
        let models = (0..train.factor_types().len()).map(|_| None).collect();
        let mut trainer = Self {
            kind: LearnerKind::Algorithm1,
            train,
            validation: None,
            oracles,
            discrepancy: Box::new(Hamming),
            config,
            steps,
            step_types,
            epsilon,
            pooled,
            messages: Vec::new(),
            models,
            train_eval_messages: None,
            validation_eval_messages: None,
            validation_scores: None,
            collective: Arc::new(SingleProcess),
        };
        trainer.initial_states()?;
        Ok(trainer)
    }

    /// Spreads the work over `collective`'s ranks
    /// ([`crate::Learner::distribute`]): this rank holds its block of the
    /// examples; sums over examples (the objective, error counts) and every
    /// oracle fit's sums over rows are added over the ranks. Refuses oracle
    /// classes that cannot ([`Oracle::distributed`]) and a rank without
    /// training examples.
    pub fn distribute(&mut self, collective: Arc<dyn Collective>) -> Result<(), LearnError> {
        if collective.ranks() > 1 {
            for (oracle, ft) in self.oracles.iter().zip(self.train.factor_types()) {
                if !oracle.distributed() {
                    return Err(LearnError::NotDistributed {
                        what: format!("oracle `{}` (factor type `{}`)", oracle.kind(), ft.name),
                        ranks: collective.ranks(),
                        reason: "its fits do not add their sums over ranks (`Oracle::distributed`); every \
                                 built-in class does: linear, constant, indexed-linear, boosting, mlp, zero, fixed",
                    });
                }
            }
        }
        self.collective = collective;
        Ok(())
    }

    /// `Σ_k parts[k]` over every rank's examples in example order
    /// ([`NeumaierSum`]): the ranks' parts are gathered first, so the sum has
    /// one process's bits.
    fn sum_over_examples(&self, parts: Vec<f64>) -> f64 {
        let parts = if self.collective.ranks() > 1 { self.collective.gather(&parts) } else { parts };
        parts.into_iter().collect::<NeumaierSum>().value()
    }

    /// The same solver under another learner's name (the Hazan–Urtasun and
    /// piecewise learners are Algorithm 1 with another schedule and oracles).
    pub(crate) fn named(mut self, kind: LearnerKind) -> Self {
        self.kind = kind;
        self
    }

    /// `ε_t` per factor type.
    pub fn epsilon(&self) -> &[f64] {
        &self.epsilon
    }

    /// Zero messages, and `θ = Δ` (every `g = 0` before its first fit).
    fn initial_states(&mut self) -> Result<(), LearnError> {
        self.messages = zero_messages(self.train);
        self.refresh_all_types()
    }

    /// Recomputes `θ` of every factor type from the current models.
    fn refresh_all_types(&mut self) -> Result<(), LearnError> {
        (0..self.train.factor_types().len()).try_for_each(|t| self.refresh_type(t))
    }

    /// Sets `θ = ε_t g + Δ` on the regions of type `t` of every example from
    /// its current model (`g = 0` if not fitted yet) — or, for an oracle that
    /// maintains scores, `g`'s scores ([`Potentials`]).
    fn refresh_type(&mut self, t: usize) -> Result<(), LearnError> {
        let potentials = std::mem::replace(&mut self.pooled[t].potentials, Potentials::Recomputed);
        let mut buffer = match potentials {
            Potentials::Theta(buffer) | Potentials::Scores(buffer) => buffer,
            Potentials::Recomputed => Vec::new(),
        };
        let (result, potentials) = if self.oracles[t].cheap_to_score() {
            (Ok(()), Potentials::Recomputed)
        } else if self.oracles[t].maintains_scores() {
            (self.score_into(t, &mut buffer), Potentials::Scores(buffer))
        } else {
            (self.refresh_into(t, &mut buffer), Potentials::Theta(buffer))
        };
        self.pooled[t].potentials = potentials;
        result
    }

    /// What [`with_theta`] reads: the learner's state as a [`ThetaSource`].
    fn theta_source(&self) -> ThetaSource<'_> {
        ThetaSource {
            data: self.train,
            pooled: &self.pooled,
            discrepancy: self.discrepancy.as_ref(),
            epsilon: &self.epsilon,
            models: &self.models,
        }
    }

    /// `g_t`'s scores on type `t`'s pooled rows into `out` (replacing its
    /// contents; zeros before the first fit): the model scores straight into
    /// it, in groups of whole examples of at most [`SCORE_GROUP_ROWS`] rows (a
    /// model scores each row on its own, so the grouping does not change a bit).
    fn score_into(&self, t: usize, out: &mut Vec<f64>) -> Result<(), LearnError> {
        let ft = &self.train.factor_types()[t];
        let c = ft.classes;
        let pooled = &self.pooled[t];
        out.clear();
        out.resize(pooled.labels.len() * c, 0.0);
        if let Some(m) = &self.models[t] {
            let n = self.train.len();
            let mut first = 0;
            while first < n {
                let mut end = first + 1;
                while end < n && pooled.rows[end + 1] - pooled.rows[first] <= SCORE_GROUP_ROWS {
                    end += 1;
                }
                let rows = pooled.rows[first]..pooled.rows[end];
                if !rows.is_empty() {
                    let features = self.train.type_features(t, first..end);
                    let f = Features::new(features, rows.len(), ft.dim).map_err(|e| oracle_err(ft, e))?;
                    m.score(f, &mut out[rows.start * c..rows.end * c]).map_err(|e| oracle_err(ft, e))?;
                }
                first = end;
            }
        }
        Ok(())
    }

    /// `θ = ε g + Δ` of type `t` into `theta` ([`Potentials::Theta`]).
    fn refresh_into(&self, t: usize, theta: &mut Vec<f64>) -> Result<(), LearnError> {
        let c = self.train.factor_types()[t].classes;
        let pooled = &self.pooled[t];
        self.score_into(t, theta)?;
        let eps = self.epsilon[t];
        pooled.example_chunks(c, theta).into_par_iter().enumerate().for_each(|(k, chunk)| {
            with_region_deltas(self.train, self.discrepancy.as_ref(), pooled, k, c, |i, _, delta| {
                for (v, &d) in chunk[i * c..(i + 1) * c].iter_mut().zip(delta) {
                    *v = theta_entry(eps, *v, d);
                }
            });
        });
        Ok(())
    }

    /// The current model (types not fitted yet score zero).
    pub fn model(&self) -> Result<StructuredModel, LearnError> {
        let models = self
            .models
            .iter()
            .zip(self.train.factor_types())
            .map(|(m, ft)| match m {
                Some(m) => m.clone_model(),
                None => Box::new(oracles::zero::ZeroModel { dim: ft.dim, classes: ft.classes }) as Box<dyn Model>,
            })
            .collect();
        StructuredModel::new(self.train.factor_types().to_vec(), self.epsilon.clone(), models)
    }

    /// The training objective `R = Σ_k [A(λ^k, θ^k) − Σ_α θ^k_α(y^k_α)]`
    /// (docs/MATH.md §4), summed so that it is never negative
    /// ([`crate::objective`]), plus the oracles' penalties `Σ_t ε_t Ω_t(g_t)`
    /// ([`Trainer::penalty`]; 0 unless an oracle has a ridge).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
    /// # let graph = Arc::new(factor_graph::grid(2, 2, 2).unwrap());
    /// # let ex = |labels: Vec<usize>, x: [f64; 4]| Example::new(
    /// #     "x",
    /// #     graph.clone(),
    /// #     Some(labels),
    /// #     vec![FeatureBlock { dim: 2, values: x.iter().flat_map(|&v| [v, 1.0]).collect() }, FeatureBlock { dim: 1, values: vec![1.0; 4] }],
    /// # );
    /// # let data = Dataset::new(vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)],
    /// #     vec![ex(vec![0, 1, 0, 1], [0.1, 0.9, 0.2, 0.8]), ex(vec![1, 1, 0, 0], [0.9, 0.7, 0.1, 0.3])]).unwrap();
    /// use structlearn::oracle_config::builtin_oracle;
    /// use structlearn::{TrainConfig, Trainer};
    /// let oracles = vec![("unary".into(), builtin_oracle("linear").unwrap()), ("pairwise".into(), builtin_oracle("linear").unwrap())];
    /// let mut trainer = Trainer::new(&data, oracles, TrainConfig { learning_iterations: 3, ..TrainConfig::default() }).unwrap();
    /// let before = trainer.objective().unwrap();
    /// let outcome = trainer.train().unwrap();
    /// assert!(outcome.history.last().unwrap().objective < before); // exact oracles: R falls
    /// assert!(trainer.objective().unwrap() >= 0.0);
    /// ```
    pub fn objective(&self) -> Result<f64, LearnError> {
        let plans = example_plans(self.train, &self.epsilon)?;
        let parts: Vec<f64> = (0..self.train.len())
            .into_par_iter()
            .map(|k| {
                with_theta(self.theta_source(), k, |theta| {
                    let problem = InferenceProblem::planned(&plans[k], theta)
                        .map_err(|source| LearnError::Inference { example: k, source })?;
                    Ok(example_loss(&problem, &self.messages[k], self.train.labels(k)?))
                })
            })
            .collect::<Result<_, LearnError>>()?;
        Ok(self.sum_over_examples(parts) + self.penalty()?)
    }

    /// `Σ_t ε_t Ω_t(g_t)`: the penalties of the current functions
    /// ([`oracles::Oracle::penalty`]), the part of the learner's objective
    /// beyond `R` (docs/MATH.md §6.4). 0 when no oracle has a ridge.
    pub fn penalty(&self) -> Result<f64, LearnError> {
        let mut total = NeumaierSum::new();
        for (t, model) in self.models.iter().enumerate() {
            if let Some(m) = model {
                let ft = &self.train.factor_types()[t];
                total.add(self.epsilon[t] * self.oracles[t].penalty(m.as_ref()).map_err(|e| oracle_err(ft, e))?);
            }
        }
        Ok(total.value())
    }

    /// Fits factor type `t` (one oracle call on the pooled, biased problem).
    /// Returns the oracle's loss `L_t` after the fit, whether the fit was
    /// rejected, and the change of the oracle's objective `L_t + Ω_t` on the
    /// same problem (if there was a previous model).
    fn fit_step(&mut self, t: usize, seed: u64) -> Result<(f64, bool, Option<f64>), LearnError> {
        let potentials = std::mem::replace(&mut self.pooled[t].potentials, Potentials::Recomputed);
        let (fit, potentials) = match potentials {
            // Nothing to refresh: θ is scored from the model kept whenever it is gathered.
            Potentials::Recomputed => {
                let fit = self.fit_into(t, seed, None, false);
                (self.keep(t, fit), Potentials::Recomputed)
            }
            // The biases go into type t's θ buffer, which the refresh below
            // overwrites again — also after a failed fit, from the model kept.
            Potentials::Theta(mut buffer) => {
                let fit = self.fit_into(t, seed, Some(&mut buffer), false);
                let fit = self.keep(t, fit);
                let refreshed = self.refresh_into(t, &mut buffer);
                (fit.and_then(|f| refreshed.map(|()| f)), Potentials::Theta(buffer))
            }
            // The fit continues from the scores and leaves the kept model's
            // there; after a failed fit they are unspecified, so they are
            // scored again from the model kept. The biases are computed row by
            // row, never stored (they would double the largest array).
            Potentials::Scores(mut g) => {
                let fit = self.fit_into(t, seed, Some(&mut g), true);
                let fit = self.keep(t, fit);
                // (The fit's error is the one to report, as on the θ path;
                // scoring the kept model fails only where the fit did.)
                if fit.is_err() {
                    let _ = self.score_into(t, &mut g);
                }
                (fit, Potentials::Scores(g))
            }
        };
        self.pooled[t].potentials = potentials;
        fit
    }

    /// Keeps the model of a successful fit of type `t`; returns the oracle's
    /// loss, whether the fit was rejected, and the change of its objective.
    fn keep(
        &mut self,
        t: usize,
        fit: Result<oracles::MonotoneFit, LearnError>,
    ) -> Result<(f64, bool, Option<f64>), LearnError> {
        fit.map(|fit| {
            let outcome = (fit.loss, fit.rejected, fit.previous_objective().map(|p| fit.objective() - p));
            self.models[t] = Some(fit.model);
            outcome
        })
    }

    /// Fits the pooled problem of type `t` with the biases
    /// `b^k_α(y) = (Δ_α(y) + message offsets) / ε_t` (Eq. 14), warm-started.
    /// Without `holds_scores` the biases are written into `buffer`; with it
    /// `buffer` holds the warm start's scores, the fit continues from them and
    /// leaves the kept model's there ([`oracles::fit_monotone_scored`]). Without
    /// a buffer ([`Potentials::Recomputed`]), and with `holds_scores`, the
    /// biases are computed row by row ([`MessageBias`]: the same bits), or all
    /// at once into an array of their own when the oracle reads every row and
    /// they fit in [`DENSE_BIAS_ENTRIES`].
    fn fit_into(
        &self,
        t: usize,
        seed: u64,
        buffer: Option<&mut [f64]>,
        holds_scores: bool,
    ) -> Result<oracles::MonotoneFit, LearnError> {
        let ft = &self.train.factor_types()[t];
        let c = ft.classes;
        let pooled = &self.pooled[t];
        let n = pooled.labels.len();
        let source = MessageBias {
            data: self.train,
            pooled,
            messages: &self.messages,
            discrepancy: self.discrepancy.as_ref(),
            epsilon: self.epsilon[t],
        };
        // `buffer` holds either the biases (written here) or the scores.
        let (bias_in_buffer, scores) = match buffer {
            Some(b) if !holds_scores => {
                source.fill(c, b);
                (Some(&*b), None)
            }
            other => (None, other),
        };
        // The data set holds the type's rows in pooled order: no copy.
        let features = self.train.type_features(t, 0..self.train.len());
        let features = Features::new(features, n, ft.dim).map_err(|e| oracle_err(ft, e))?;
        let (oracle, warm, ctx) = (self.oracles[t].as_ref(), self.models[t].as_deref(), FitContext { seed });
        // Biases of their own (not in `buffer`): all at once when small enough
        // and every row is read (in parallel and in order instead of row by
        // row at random), else row by row — the same numbers either way.
        let dense_bias = || {
            let mut bias = vec![0.0; n * c];
            source.fill(c, &mut bias);
            bias
        };
        let own_bias = bias_in_buffer.is_none() && oracle.reads_every_bias() && n * c <= DENSE_BIAS_ENTRIES;
        let own_bias = own_bias.then(dense_bias);
        let problem = match own_bias.as_deref().or(bias_in_buffer) {
            Some(bias) => Problem::new(features, &pooled.labels, bias, c, None),
            None => Problem::with_bias_rows(features, &pooled.labels, &source, c, None),
        }
        .map_err(|e| oracle_err(ft, e))?
        .distributed(self.collective.as_ref());
        match scores {
            Some(scores) => fit_monotone_scored(oracle, &problem, warm, ctx, scores),
            None => fit_monotone(oracle, &problem, warm, ctx),
        }
        .map_err(|e| oracle_err(ft, e))
    }

    /// Runs up to `iterations` message-passing iterations on every training
    /// example (stopping each early at [`TrainConfig::message_passing_tolerance`]).
    /// Returns the largest violation and the objective after the step (the
    /// numbers [`Trainer::objective`] computes, bit for bit).
    fn message_passing_step(&mut self, iterations: usize) -> Result<(f64, f64), LearnError> {
        let train = self.train;
        let plans = example_plans(train, &self.epsilon)?;
        let tolerance = self.config.message_passing_tolerance;
        let source = ThetaSource {
            data: train,
            pooled: &self.pooled,
            discrepancy: self.discrepancy.as_ref(),
            epsilon: &self.epsilon,
            models: &self.models,
        };
        let results: Vec<(f64, f64)> = self
            .messages
            .par_iter_mut()
            .enumerate()
            .with_max_len(1)
            .map(|(k, messages)| {
                with_theta(source, k, |theta| {
                    let problem = InferenceProblem::planned(&plans[k], theta)
                        .map_err(|source| LearnError::Inference { example: k, source })?;
                    let opts = RunOptions { iterations, tolerance, order: None };
                    let truth = train.labels(k)?;
                    // The loss from the run's own report: the same numbers as example_loss.
                    let (report, loss) = with_thread_workspace(|ws| {
                        problem.run(messages, &opts, ws).map(|r| (r, loss_from_workspace(&problem, ws, truth)))
                    })
                    .map_err(|source| LearnError::Inference { example: k, source })?;
                    Ok((report.max_violation, loss))
                })
            })
            .collect::<Result<_, LearnError>>()?;
        let mut violation = [results.iter().map(|r| r.0).fold(0.0, f64::max)];
        self.collective.max(&mut violation);
        let loss = self.sum_over_examples(results.iter().map(|r| r.1).collect());
        Ok((violation[0], loss + self.penalty()?))
    }

    fn evaluate(&mut self, with_train: bool) -> Result<(Option<f64>, Option<f64>), LearnError> {
        let model = self.model()?;
        let opts = self.config.predict;
        let (warm, how) = (self.config.warm_start_evaluation, self.config.evaluation_messages);
        let collective = self.collective.clone();
        let rate = |data: &Dataset, kept: &mut Option<MessageStore>, energies: Option<Energies<'_>>| {
            let (wrong, total) = if warm {
                let store = match kept {
                    Some(store) => store,
                    None => kept.insert(MessageStore::zeros(data, how)?),
                };
                match store {
                    MessageStore::Memory(messages) => model.error_counts_from_with(data, &opts, messages, energies)?,
                    MessageStore::File(file) => {
                        let (load, keep) = (|k| file.messages(data, k), |k, m: &Messages| file.keep(k, m));
                        model.error_counts_streamed(data, &opts, load, keep, energies)?
                    }
                }
            } else {
                // From zero messages every time: nothing kept between evaluations.
                *kept = None;
                model.error_counts(data, &opts, energies)?
            };
            let mut counts = [wrong as f64, total as f64]; // exact below 2^53
            collective.sum(&mut counts);
            Ok::<f64, LearnError>(error_rate_of(counts[0] as usize, counts[1] as usize))
        };
        // The training set's energies from the pooled scores where a type keeps
        // them (the same bits as scoring the model again, which for boosting
        // costs a pass over every tree). `theta_source()`'s fields, borrowed
        // one by one so that the evaluation messages can be borrowed mutably.
        let source = ThetaSource {
            data: self.train,
            pooled: &self.pooled,
            discrepancy: self.discrepancy.as_ref(),
            epsilon: &self.epsilon,
            models: &self.models,
        };
        let pooled_energies = |k: usize, theta: &mut Vec<f64>| gather_energies(source, k, theta);
        let keeps_scores = self.pooled.iter().any(|p| matches!(p.potentials, Potentials::Scores(_)));
        let train_energies = keeps_scores.then_some(&pooled_energies as Energies<'_>);
        let train =
            if with_train { Some(rate(self.train, &mut self.train_eval_messages, train_energies)?) } else { None };
        // The validation set's energies continue the kept scores of the types
        // whose models continue scores (boosting: the trees fitted since the
        // last evaluation, not every tree again): the same bits.
        let validation = match self.validation {
            Some(v) => {
                if self.validation_scores.is_none() {
                    let keeps = model.models().iter().map(|m| kept_scores::continues(m.as_ref())).collect();
                    self.validation_scores = KeptScores::new(v, keeps, how)?;
                }
                let kept_energies = self
                    .validation_scores
                    .as_ref()
                    .map(|kept| |k: usize, theta: &mut Vec<f64>| kept.energies(&model, v, k, theta));
                let energies = kept_energies.as_ref().map(|e| e as Energies<'_>);
                match rate(v, &mut self.validation_eval_messages, energies) {
                    Ok(rate) => {
                        if let Some(kept) = &mut self.validation_scores {
                            kept.scored_by(&model);
                        }
                        Some(rate)
                    }
                    Err(e) => {
                        // Some examples' kept scores may be the new model's, others the old one's.
                        self.validation_scores = None;
                        return Err(LearnError::Validation(Box::new(e)));
                    }
                }
            }
            None => None,
        };
        Ok((train, validation))
    }

    /// Step `s` of learning iteration `iteration`: a fit or message passing
    /// (module docs). `last` is the previous step's record, whose objective a
    /// fit updates.
    fn run_step(&mut self, iteration: usize, s: usize, last: Option<&Record>) -> Result<Record, LearnError> {
        let mut record = Record::new(iteration, s, "");
        match (&self.steps[s], self.step_types[s]) {
            (Step::Fit { factor_type }, Some(t)) => {
                record.phase = "fit".into();
                record.factor_type = Some(factor_type.clone());
                let (loss, rejected, change) = self.fit_step(t, mix_seed(self.config.seed, iteration, s))?;
                record.oracle_loss = Some(loss);
                record.rejected = Some(rejected);
                // R + Σ_t ε_t Ω_t = Σ_t ε_t (L_t + Ω_t) (docs/MATH.md §4): only type t's
                // term changed, so no pass over θ — unless rounding took the update below 0.
                record.objective = match (change, last) {
                    (Some(change), Some(last)) if last.objective + self.epsilon[t] * change >= 0.0 => {
                        last.objective + self.epsilon[t] * change
                    }
                    _ => self.objective()?,
                };
            }
            (Step::MessagePassing { iterations }, _) => {
                record.phase = "message-passing".into();
                let (violation, objective) = self.message_passing_step(*iterations)?;
                record.max_violation = Some(violation);
                record.objective = objective;
            }
            (Step::Fit { factor_type }, None) => {
                return Err(self.train.unknown_factor_type("schedule", factor_type));
            }
        }
        Ok(record)
    }
}

impl<'a> Solver<'a> for Algorithm1<'a> {
    fn name(&self) -> &str {
        self.kind.name()
    }
    fn config(&self) -> &TrainConfig {
        &self.config
    }
    fn steps_per_iteration(&self) -> usize {
        self.steps.len()
    }
    fn set_validation(&mut self, validation: &'a Dataset) {
        self.validation = Some(validation);
        self.validation_eval_messages = None;
        self.validation_scores = None;
    }
    fn validation(&self) -> Option<&'a Dataset> {
        self.validation
    }
    fn step(&mut self, iteration: usize, step: usize, history: &[Record]) -> Result<Record, LearnError> {
        self.run_step(iteration, step, history.last())
    }
    fn evaluate(&mut self, with_train: bool) -> Result<(Option<f64>, Option<f64>), LearnError> {
        Algorithm1::evaluate(self, with_train)
    }
    fn model(&self) -> Result<StructuredModel, LearnError> {
        Algorithm1::model(self)
    }
    fn save_checkpoint(&self, path: &Path, run: &RunState) -> Result<(), LearnError> {
        self.write_checkpoint(path, run)
    }
    fn resume_from_bytes(
        &mut self,
        bytes: &[u8],
        path: &Path,
        registry: &ModelRegistry,
    ) -> Result<RunState, LearnError> {
        self.read_checkpoint(bytes, path, registry)
    }
    fn distribute(&mut self, collective: Arc<dyn Collective>) -> Result<(), LearnError> {
        Algorithm1::distribute(self, collective)
    }
    fn collective(&self) -> &dyn Collective {
        self.collective.as_ref()
    }
}

/// Seed of the oracle call at step `step` of learning iteration `iteration`
/// (SplitMix64 finaliser over the three).
///
/// ```
/// use structlearn::mix_seed;
/// assert_eq!(mix_seed(1, 2, 3), mix_seed(1, 2, 3));
/// assert_ne!(mix_seed(1, 2, 3), mix_seed(1, 3, 2));
/// ```
pub fn mix_seed(seed: u64, iteration: usize, step: usize) -> u64 {
    let mut z = seed
        ^ (iteration as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (step as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rand::{RngExt, SeedableRng};

    use super::*;
    use crate::{Example, FactorTypeInfo, FeatureBlock};

    /// Examples on one 4×5 grid of three labels: two features per unary and
    /// pair region (a noisy label indicator and a constant), random labels.
    fn grid_data(seed: u64, examples: usize) -> Dataset {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let graph = Arc::new(factor_graph::grid(4, 5, 3).unwrap());
        let examples = (0..examples)
            .map(|k| {
                let labels: Vec<usize> = (0..20).map(|_| rng.random_range(0..3)).collect();
                let unary = labels.iter().flat_map(|&y| [y as f64 + rng.random::<f64>(), 1.0]).collect();
                let pair = (0..31).flat_map(|_| [rng.random::<f64>(), 1.0]).collect();
                let blocks = vec![FeatureBlock { dim: 2, values: unary }, FeatureBlock { dim: 2, values: pair }];
                Example::new(format!("e{k}"), Arc::clone(&graph), Some(labels), blocks)
            })
            .collect();
        let types = vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 2)];
        Dataset::new(types, examples).unwrap()
    }

    /// Linear unary and boosted pairwise energies (the type that keeps its scores).
    fn linear_and_boosting() -> Vec<(String, Box<dyn Oracle>)> {
        vec![
            ("unary".into(), Box::new(oracles::linear::LinearOracle::default())),
            ("pairwise".into(), Box::new(oracles::boosting::BoostingOracle { rounds: 3, ..Default::default() })),
        ]
    }

    /// The validation set's kept scores of the boosted type, continued at
    /// every evaluation from the last one's (the trees fitted since), are
    /// the model's own scores bit for bit: the energies they give equal
    /// [`StructuredModel::energies`], and the validation error equals the one
    /// counted from the model's energies from the same messages — kept in
    /// memory or in a file. Each evaluation does continue (the boosted model
    /// grew from the kept one).
    #[test]
    fn kept_validation_scores_are_the_models_bit_for_bit() {
        let (train, validation) = (grid_data(3, 3), grid_data(4, 2));
        for how in [EvaluationMessages::Memory, EvaluationMessages::TempFile] {
            let config = TrainConfig { evaluation_messages: how, ..TrainConfig::default() };
            let mut learner = Algorithm1::new(&train, linear_and_boosting(), config).unwrap();
            learner.set_validation(&validation);
            let mut messages = crate::model::zero_messages(&validation);
            let mut history: Vec<Record> = Vec::new();
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for iteration in 1..=3 {
                for s in 0..learner.steps.len() {
                    history.push(learner.run_step(iteration, s, history.last()).unwrap());
                }
                let model = learner.model().unwrap();
                let before = learner.validation_scores.as_ref().and_then(|kept| kept.models[1].clone());
                assert_eq!(before.is_some(), iteration > 1, "{how}, iteration {iteration}");
                if let Some(before) = before {
                    let features = Features::new(validation.features(0, 1), 31, 2).unwrap();
                    let mut scores = vec![0.0; 31 * 9];
                    before.score(features, &mut scores).unwrap();
                    assert!(model.models()[1].score_continuing(before.as_ref(), features, &mut scores).unwrap());
                }
                let (_, rate) = learner.evaluate(false).unwrap();
                let opts = learner.config.predict;
                let (wrong, total) = model.error_counts_from_with(&validation, &opts, &mut messages, None).unwrap();
                assert_eq!(rate, Some(error_rate_of(wrong, total)), "{how}, iteration {iteration}");
                let kept = learner.validation_scores.as_ref().unwrap();
                assert!(kept.models[0].is_none(), "the linear type's scores are not kept");
                let mut theta = Vec::new();
                for k in 0..validation.len() {
                    kept.energies(&model, &validation, k, &mut theta).unwrap();
                    assert_eq!(bits(&theta), bits(&model.energies(&validation, k).unwrap()), "{how}, example {k}");
                }
            }
        }
    }

    /// The training set's evaluation reads the pooled scores of types that
    /// keep them: the energies they give are the model's own
    /// ([`StructuredModel::energies`]) bit for bit, for a type that keeps
    /// scores (boosting) beside one scored from its model (linear), after
    /// warm fits.
    #[test]
    fn pooled_energies_are_the_models_bit_for_bit() {
        let data = grid_data(3, 3);
        let oracles = linear_and_boosting();
        let config = TrainConfig { learning_iterations: 2, evaluate: Evaluate::Never, ..TrainConfig::default() };
        let mut learner = Algorithm1::new(&data, oracles, config).unwrap();
        let mut history: Vec<Record> = Vec::new();
        for iteration in 1..=2 {
            for s in 0..learner.steps.len() {
                let record = learner.run_step(iteration, s, history.last()).unwrap();
                history.push(record);
            }
        }
        assert!(matches!(learner.pooled[1].potentials, Potentials::Scores(_)));
        assert!(!matches!(learner.pooled[0].potentials, Potentials::Scores(_)));
        let model = learner.model().unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let mut energies = Vec::new();
        for k in 0..data.len() {
            gather_energies(learner.theta_source(), k, &mut energies).unwrap();
            let expected = model.energies(&data, k).unwrap();
            assert_eq!(bits(&energies), bits(&expected), "example {k}");
            assert!(expected.iter().any(|&v| v != 0.0));
        }
    }
}
