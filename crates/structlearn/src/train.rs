//! Algorithm 1 (docs/MATH.md §4; chapter §1.8–1.10): structured learning by iterated,
//! message-biased logistic regression, with shared-parameter pooling.
//!
//! Per training example `k` the learner keeps messages `λ^k` (persisting across
//! learning iterations, starting at 0) and potentials
//! `θ^k(y_α) = ε_t g_t(φ^k_α, y_α) + Δ_α(y^k_α, y_α)`. A learning iteration runs
//! the [`Step`]s of the schedule (default: for each factor type in order, fit
//! it, then 25 message-passing iterations on every example):
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

use std::path::{Path, PathBuf};

use oracles::{
    BiasRows, Features, FitContext, Model, ModelRegistry, Oracle, Problem, fit_monotone, fit_monotone_scored,
};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use smoothed_inference::{InferenceProblem, Messages, RunOptions, region_message_offsets, with_thread_workspace};

use crate::discrepancy::{Discrepancy, Hamming};
use crate::early_stopping::EarlyStopping;
use crate::executor::{Executor, RunState, Solver, StopReason};
use crate::files::{unwrap_binary, write_binary_atomic};
use crate::model::{example_plans, oracle_err, zero_messages};
use crate::objective::{NeumaierSum, loss_at, loss_from_workspace};
use crate::observer::Record;
use crate::{Dataset, LearnError, LearnerKind, PredictOptions, StructuredModel};

/// One step of a learning iteration.
///
/// ```
/// use structlearn::{Step, TrainConfig};
/// // Fit the unary type, 50 message-passing iterations, then the pairwise type.
/// let config = TrainConfig {
///     schedule: Some(vec![
///         Step::Fit { factor_type: "unary".into() },
///         Step::MessagePassing { iterations: 50 },
///         Step::Fit { factor_type: "pairwise".into() },
///     ]),
///     ..TrainConfig::default()
/// };
/// assert_eq!(config.schedule.unwrap().len(), 3);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// Fit the factor type of this name by its oracle.
    Fit {
        /// The factor type.
        factor_type: String,
    },
    /// Run this many message-passing iterations on every training example.
    MessagePassing {
        /// Iterations.
        iterations: usize,
    },
}

/// When to predict on the training and validation sets.
///
/// ```
/// use structlearn::{Evaluate, TrainConfig};
/// let config = TrainConfig { evaluate: Evaluate::Never, ..TrainConfig::default() }; // objective only
/// assert_eq!(serde_json::to_value(config.evaluate).unwrap(), "never");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Evaluate {
    /// After every step.
    EveryStep,
    /// After the last step of each learning iteration.
    EveryIteration,
    /// Never (only the objective is tracked).
    Never,
}

/// Where and how often to checkpoint.
///
/// ```
/// use structlearn::{CheckpointConfig, TrainConfig};
/// let config = TrainConfig {
///     checkpoint: Some(CheckpointConfig { path: "run.ckpt".into(), every: 1 }),
///     ..TrainConfig::default()
/// };
/// assert_eq!(config.checkpoint.unwrap().every, 1);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointConfig {
    /// The checkpoint file (written atomically).
    pub path: PathBuf,
    /// Write after every this many learning iterations (≥ 1), after the
    /// last, and when the stop flag interrupts training between two of them
    /// (so an interruption keeps every finished iteration; a killed process
    /// loses at most the `every − 1` since the last checkpoint).
    pub every: usize,
}

/// Smallest and largest entropy weight `ε` (of [`TrainConfig::epsilon`] and
/// every [`TrainConfig::type_epsilon`]) training accepts. Outside this range
/// `θ/ε` or `ε·ln|Y|` leave the range where double precision keeps the
/// smoothed dual accurate (at `ε = 1e308` it overflows to NaN; at `1e-300`
/// every message underflows).
///
/// ```
/// let (lo, hi) = structlearn::train::EPSILON_RANGE;
/// assert!(lo > 0.0 && hi.is_finite());
/// ```
pub const EPSILON_RANGE: (f64, f64) = (1e-6, 1e6);

/// Default [`TrainConfig::message_passing_tolerance`]: a violation of `1e-6`
/// changes the learning objective by far less than one fit does, and on the
/// denoising and Stanford-shaped benchmarks most examples reach it within a
/// few iterations once learning settles (docs/guide/performance.md).
pub const DEFAULT_MESSAGE_PASSING_TOLERANCE: f64 = 1e-6;

/// Settings of Algorithm 1. `Default` is docs/MATH.md §4: `ε = 0.1`, each learning
/// iteration fits each factor type in order followed by 25 message-passing
/// iterations, evaluation after every learning iteration.
///
/// ```
/// use structlearn::TrainConfig;
/// let config = TrainConfig { epsilon: 0.1, learning_iterations: 20, seed: 7, ..TrainConfig::default() };
/// // Configuration files hold the same fields; unknown ones are errors.
/// let from_file: TrainConfig = serde_json::from_str(r#"{"learning_iterations": 20, "seed": 7}"#).unwrap();
/// assert_eq!(from_file, config);
/// assert!(serde_json::from_str::<TrainConfig>(r#"{"learning_iteratons": 20}"#).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Entropy weight `ε` of every factor type without an override.
    pub epsilon: f64,
    /// Per-factor-type entropy weights `ε_t` (docs/MATH.md §6.4), by type name.
    pub type_epsilon: Vec<(String, f64)>,
    /// Number of learning iterations.
    pub learning_iterations: usize,
    /// Steps of one learning iteration; `None` is the default schedule.
    pub schedule: Option<Vec<Step>>,
    /// Message-passing iterations after each fit in the default schedule: the
    /// most a message-passing step runs (the paper's fixed count).
    pub message_passing_iterations: usize,
    /// Each training example's message passing stops early once its largest
    /// marginalisation violation `max |μ_{αβ}(y_β) − μ_β(y_β)|` is below this
    /// ([`RunOptions::tolerance`], checked every
    /// [`smoothed_inference::TOLERANCE_CHECK_EVERY`] iterations); `None` always
    /// runs every iteration of the step. The violation is a difference of
    /// probabilities, so one tolerance fits any `ε`, label count and graph
    /// size. Default [`DEFAULT_MESSAGE_PASSING_TOLERANCE`].
    pub message_passing_tolerance: Option<f64>,
    /// Seed of every random choice.
    pub seed: u64,
    /// How evaluation predicts.
    pub predict: PredictOptions,
    /// When to evaluate.
    pub evaluate: Evaluate,
    /// Whether evaluation includes the training set (it costs one prediction per example).
    pub evaluate_train: bool,
    /// With `evaluate_train`, the training error is computed only after every
    /// this many learning iterations (≥ 1) and after the last one; other
    /// evaluations report the validation error alone. On large training sets
    /// the training error costs as much as a message-passing step.
    pub evaluate_train_every: usize,
    /// Whether each evaluation starts message passing from the previous
    /// evaluation's messages of the same example (see
    /// [`StructuredModel::predict_example_from`]) instead of from zero. The
    /// converged prediction is the same; on strongly coupled models, where
    /// message passing needs hundreds of iterations, a small `predict` budget
    /// per evaluation then accumulates over learning iterations. Checkpoints
    /// carry the evaluation messages, so a resumed run records the same errors.
    pub warm_start_evaluation: bool,
    /// Optional checkpointing.
    pub checkpoint: Option<CheckpointConfig>,
    /// Stop when the validation error stops improving, returning the best
    /// iteration's model ([`crate::early_stopping`]); needs a validation set.
    pub early_stopping: Option<EarlyStopping>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            epsilon: 0.1,
            type_epsilon: Vec::new(),
            learning_iterations: 10,
            schedule: None,
            message_passing_iterations: 25,
            message_passing_tolerance: Some(DEFAULT_MESSAGE_PASSING_TOLERANCE),
            seed: 0,
            predict: PredictOptions::default(),
            evaluate: Evaluate::EveryIteration,
            evaluate_train: true,
            evaluate_train_every: 1,
            warm_start_evaluation: true,
            checkpoint: None,
            early_stopping: None,
        }
    }
}

impl TrainConfig {
    /// Whether an evaluation after learning iteration `iteration` (1-based)
    /// includes the training error: `evaluate_train`, and the iteration is a
    /// multiple of `evaluate_train_every` or the last (`learning_iterations`).
    ///
    /// ```
    /// use structlearn::TrainConfig;
    /// let config = TrainConfig { learning_iterations: 10, evaluate_train_every: 4, ..TrainConfig::default() };
    /// let at: Vec<usize> = (1..=10).filter(|&i| config.evaluates_train_at(i)).collect();
    /// assert_eq!(at, [4, 8, 10]);
    /// ```
    pub fn evaluates_train_at(&self, iteration: usize) -> bool {
        self.evaluate_train
            && (iteration.is_multiple_of(self.evaluate_train_every.max(1)) || iteration >= self.learning_iterations)
    }

    /// Checks every setting that needs no data, before any work; each error
    /// names the setting, its value and what is allowed
    /// ([`LearnError::InvalidSetting`]). Every learner calls it when it is
    /// built.
    ///
    /// ```
    /// use structlearn::{LearnError, TrainConfig};
    /// assert!(TrainConfig::default().validate().is_ok());
    /// let bad = TrainConfig { learning_iterations: 0, ..TrainConfig::default() };
    /// assert!(matches!(bad.validate(), Err(LearnError::InvalidSetting { name: "learning_iterations", .. })));
    /// ```
    pub fn validate(&self) -> Result<(), LearnError> {
        let invalid = |name: &'static str, value: String, allowed: &'static str| {
            Err(LearnError::InvalidSetting { name, value, allowed })
        };
        if self.learning_iterations == 0 {
            return invalid("learning_iterations", "0".into(), "at least 1");
        }
        if self.evaluate_train_every == 0 {
            return invalid("evaluate_train_every", "0".into(), "at least 1");
        }
        if let Some(c) = &self.checkpoint
            && c.every == 0
        {
            return invalid("checkpoint.every", "0".into(), "at least 1");
        }
        if let Some(tol) = self.predict.tolerance
            && (tol.is_nan() || tol <= 0.0)
        {
            return invalid("predict.tolerance", tol.to_string(), "> 0");
        }
        if let Some(tol) = self.message_passing_tolerance
            && (tol.is_nan() || tol <= 0.0)
        {
            return invalid("message_passing_tolerance", tol.to_string(), "> 0");
        }
        if let Some(e) = &self.early_stopping {
            if e.patience == 0 {
                return invalid("early_stopping.patience", "0".into(), "at least 1");
            }
            if !(e.min_delta >= 0.0 && e.min_delta.is_finite()) {
                return invalid("early_stopping.min_delta", e.min_delta.to_string(), "finite and ≥ 0");
            }
        }
        Ok(())
    }

    /// The schedule to run for a data set's factor types.
    pub fn steps(&self, data: &Dataset) -> Vec<Step> {
        self.schedule.clone().unwrap_or_else(|| {
            data.factor_types()
                .iter()
                .flat_map(|ft| {
                    [
                        Step::Fit { factor_type: ft.name.clone() },
                        Step::MessagePassing { iterations: self.message_passing_iterations },
                    ]
                })
                .collect()
        })
    }

    /// `ε_t` for each factor type of `data`.
    pub fn epsilons(&self, data: &Dataset) -> Result<Vec<f64>, LearnError> {
        for (name, _) in &self.type_epsilon {
            if data.factor_type_index(name).is_none() {
                return Err(LearnError::Config(format!("type_epsilon names unknown factor type `{name}`")));
            }
        }
        let eps: Vec<f64> = data
            .factor_types()
            .iter()
            .map(|ft| self.type_epsilon.iter().rev().find(|(n, _)| *n == ft.name).map_or(self.epsilon, |(_, e)| *e))
            .collect();
        let (lo, hi) = EPSILON_RANGE;
        if let Some((t, e)) = eps.iter().enumerate().find(|(_, e)| !(lo..=hi).contains(*e)) {
            return Err(LearnError::Config(format!(
                "epsilon of factor type `{}` is {e:e}; it must be between {lo:e} and {hi:e}",
                data.factor_types()[t].name
            )));
        }
        Ok(eps)
    }
}

/// The regions of one factor type pooled over all training examples, and
/// their potentials.
///
/// Arrays of [`Potentials`] are `rows × classes`, row `rows[k] + i` being the
/// `i`-th region of this type of example `k`. Message passing gathers an
/// example's `θ` into a per-thread buffer ([`with_theta`]).
#[derive(Debug)]
struct Pooled {
    labels: Vec<usize>,
    /// `rows[k]..rows[k+1]` are example `k`'s rows.
    rows: Vec<usize>,
    /// Example `k`'s regions of this type, in row order.
    regions: Vec<Vec<usize>>,
    potentials: Potentials,
}

/// How a factor type's potentials are held between fits. Either way the
/// largest array of a pairwise type exists once between fits; during a fit
/// the oracle's biases (Eq. 14) reuse `θ`'s buffer, or take a second array
/// beside the scores (which the fit updates in place), never a third.
#[derive(Debug)]
enum Potentials {
    /// `θ = ε_t g_t + Δ`. While type `t` is fitted the same buffer holds the
    /// oracle's biases, which are computed from the messages alone and
    /// replaced by the new `θ` right after the fit.
    Theta(Vec<f64>),
    /// `g_t`'s scores, for oracles that keep them current
    /// ([`Oracle::maintains_scores`]): fits continue from them instead of
    /// scoring the whole model, and `θ = ε_t g_t + Δ` is computed as an
    /// example's `θ` is gathered (the same expression, so the same bits).
    Scores(Vec<f64>),
}

impl Pooled {
    /// `buffer` (laid out like `theta`) cut into one slice per example.
    fn example_chunks<'b>(&self, classes: usize, buffer: &'b mut [f64]) -> Vec<&'b mut [f64]> {
        let mut chunks = Vec::with_capacity(self.regions.len());
        let mut rest = buffer;
        for k in 0..self.regions.len() {
            let (head, tail) = rest.split_at_mut((self.rows[k + 1] - self.rows[k]) * classes);
            chunks.push(head);
            rest = tail;
        }
        chunks
    }
}

/// Rows scored per model call when `θ` is refreshed: bounds the features
/// gathered for the call (and keeps rayon's chunks inside a call large).
const SCORE_GROUP_ROWS: usize = 1 << 16;

/// Example `k`'s `θ` over its whole graph, gathered from the pooled types
/// (regions of no type keep 0); `θ = ε_t g + Δ` computed here for types that
/// hold scores ([`Potentials::Scores`]).
fn gather_theta(theta: ThetaSource<'_>, k: usize, out: &mut Vec<f64>) {
    let ThetaSource { data, pooled, discrepancy, epsilon } = theta;
    let graph = &data.examples()[k].graph();
    out.clear();
    out.resize(graph.total_configs(), 0.0);
    for (t, p) in pooled.iter().enumerate() {
        let c = data.factor_types()[t].classes;
        let first = p.rows[k];
        match &p.potentials {
            Potentials::Theta(theta) => {
                for (i, &r) in p.regions[k].iter().enumerate() {
                    out[graph.config_range(r)].copy_from_slice(&theta[(first + i) * c..(first + i + 1) * c]);
                }
            }
            Potentials::Scores(g) => {
                let eps = epsilon[t];
                with_region_deltas(data, discrepancy, p, k, c, |i, r, delta| {
                    let g = &g[(first + i) * c..(first + i + 1) * c];
                    for ((o, &g), &d) in out[graph.config_range(r)].iter_mut().zip(g).zip(delta) {
                        *o = theta_entry(eps, g, d);
                    }
                });
            }
        }
    }
}

/// `θ_α(y) = ε_t g_t(y) + Δ_α(y)`: the one expression both ways of holding
/// potentials ([`Potentials`]) evaluate, so they give the same bits.
#[inline(always)]
fn theta_entry(eps: f64, g: f64, delta: f64) -> f64 {
    eps * g + delta
}

/// Calls `f(i, r, Δ_r)` for the `i`-th region `r` of example `k` in `pooled`
/// (one factor type of `c` configurations), with its discrepancy `Δ_r`.
fn with_region_deltas(
    data: &Dataset,
    discrepancy: &dyn Discrepancy,
    pooled: &Pooled,
    k: usize,
    c: usize,
    mut f: impl FnMut(usize, usize, &[f64]),
) {
    let graph = &data.examples()[k].graph();
    let truth = data.examples()[k].labels().unwrap_or(&[]);
    let mut delta = vec![0.0; c];
    for (i, &r) in pooled.regions[k].iter().enumerate() {
        discrepancy.region(graph, r, truth, &mut delta);
        f(i, r, &delta);
    }
}

/// The biases `b^k_α(y) = (Δ_α(y) + message offsets) / ε_t` (Eq. 14) of one
/// factor type, from the messages, region by region
/// (`region_message_offsets`): written for every pooled row at once
/// ([`MessageBias::fill`]) or computed one pooled row at a time for the
/// oracle ([`BiasRows`]).
#[derive(Debug)]
struct MessageBias<'t> {
    data: &'t Dataset,
    pooled: &'t Pooled,
    messages: &'t [Messages],
    discrepancy: &'t dyn Discrepancy,
    epsilon: f64,
}

impl MessageBias<'_> {
    /// Every pooled row (`classes` entries each) into `out`, laid out like
    /// the pooled rows; examples in parallel.
    fn fill(&self, classes: usize, out: &mut [f64]) {
        self.pooled.example_chunks(classes, out).into_par_iter().enumerate().for_each(|(k, chunk)| {
            for (&r, row) in self.pooled.regions[k].iter().zip(chunk.chunks_exact_mut(classes)) {
                self.write_region(k, r, row);
            }
        });
    }

    /// The biases of region `r` of example `k`.
    fn write_region(&self, k: usize, r: usize, out: &mut [f64]) {
        let graph = &self.data.examples()[k].graph();
        let truth = self.data.examples()[k].labels().unwrap_or(&[]);
        with_buffer(&SCRATCH, |offsets| {
            offsets.resize(out.len(), 0.0);
            region_message_offsets(graph, &self.messages[k], r, offsets);
            self.discrepancy.region(graph, r, truth, out);
            for (out, &o) in out.iter_mut().zip(offsets.iter()) {
                *out = (*out + o) / self.epsilon;
            }
        });
    }
}

impl BiasRows for MessageBias<'_> {
    fn write_row(&self, row: usize, out: &mut [f64]) {
        let rows = &self.pooled.rows;
        // The example whose rows rows[k]..rows[k + 1] hold `row`.
        let k = rows.partition_point(|&start| start <= row) - 1;
        self.write_region(k, self.pooled.regions[k][row - rows[k]], out);
    }
}

/// Largest bias array (rows × classes, 64 MiB of `f64`) a fit of an oracle that
/// keeps its scores ([`oracles::Oracle::maintains_scores`]) and reads every
/// row's bias ([`oracles::Oracle::reads_every_bias`]) gets whole; larger ones
/// (a Stanford-scale pair type: 1.8 GB), and those of oracles that read a
/// subsample (boosting), are computed row by row.
const DENSE_BIAS_ENTRIES: usize = 1 << 23;

/// What [`gather_theta`] reads.
#[derive(Clone, Copy)]
struct ThetaSource<'t> {
    data: &'t Dataset,
    pooled: &'t [Pooled],
    discrepancy: &'t dyn Discrepancy,
    epsilon: &'t [f64],
}

type Buffer = std::cell::RefCell<Vec<f64>>;

thread_local! {
    /// An example's gathered `θ` ([`with_theta`]).
    static THETA: Buffer = const { Buffer::new(Vec::new()) };
    /// Per-example scratch of the graph's size (message offsets, `θ̃`).
    static SCRATCH: Buffer = const { Buffer::new(Vec::new()) };
}

/// Calls `f` with one of this thread's buffers: examples of one size then
/// reuse it instead of allocating (and fragmenting the heap with) an array
/// of a graph's configurations each.
fn with_buffer<R>(key: &'static std::thread::LocalKey<Buffer>, f: impl FnOnce(&mut Vec<f64>) -> R) -> R {
    key.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => f(&mut buffer),
        // Re-entered on this thread (a rayon task stolen inside `f`): a fresh buffer.
        Err(_) => f(&mut Vec::new()),
    })
}

/// Calls `f` with example `k`'s gathered `θ` (in a per-thread buffer).
fn with_theta<R>(theta: ThetaSource<'_>, k: usize, f: impl FnOnce(&[f64]) -> R) -> R {
    with_buffer(&THETA, |buffer| {
        gather_theta(theta, k, buffer);
        f(buffer)
    })
}

/// [`loss_at`] in the thread's inference workspace.
fn example_loss(problem: &InferenceProblem<'_>, messages: &Messages, truth: &[usize]) -> f64 {
    with_thread_workspace(|ws| loss_at(problem, messages, truth, ws))
}

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
    /// allocated at the first evaluation that needs them).
    train_eval_messages: Vec<Messages>,
    /// Evaluation messages per validation example (the same).
    validation_eval_messages: Vec<Messages>,
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
        if train.is_empty() {
            return Err(LearnError::EmptyDataset);
        }
        for k in 0..train.len() {
            train.labels(k)?;
            if let Some(i) = train.ignored(k).and_then(|m| m.iter().position(|&x| x)) {
                return Err(LearnError::Config(format!(
                    "training example {k} (`{}`): the label of variable {i} is unknown (ignored); training needs \
                     every label — build the example over its labelled variables only",
                    train.examples()[k].name()
                )));
            }
        }
        let mut by_type: Vec<Option<Box<dyn Oracle>>> = (0..train.factor_types().len()).map(|_| None).collect();
        for (name, oracle) in oracles {
            let t = train
                .factor_type_index(&name)
                .ok_or_else(|| LearnError::Config(format!("an oracle is given for unknown factor type `{name}`")))?;
            if by_type[t].is_some() {
                return Err(LearnError::Config(format!("two oracles are given for factor type `{name}`")));
            }
            oracle.validate().map_err(|e| oracle_err(&train.factor_types()[t], e))?;
            by_type[t] = Some(oracle);
        }
        let oracles = by_type
            .into_iter()
            .zip(train.factor_types())
            .map(|(o, ft)| o.ok_or_else(|| LearnError::Config(format!("factor type `{}` has no oracle", ft.name))))
            .collect::<Result<Vec<_>, _>>()?;
        config.validate()?;
        let steps = config.steps(train);
        if steps.is_empty() {
            return Err(LearnError::Config("the schedule has no steps".into()));
        }
        let step_types = steps
            .iter()
            .map(|s| match s {
                Step::Fit { factor_type } => train.factor_type_index(factor_type).map(Some).ok_or_else(|| {
                    LearnError::Config(format!("the schedule fits unknown factor type `{factor_type}`"))
                }),
                Step::MessagePassing { .. } => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if step_types.iter().all(Option::is_none) {
            return Err(LearnError::Config(
                "the schedule has no `fit` step, so training would save the all-zero model; add a step \
                 {\"fit\": {\"factor_type\": …}} for each type to learn"
                    .into(),
            ));
        }
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
            train_eval_messages: Vec::new(),
            validation_eval_messages: Vec::new(),
        };
        trainer.initial_states()?;
        Ok(trainer)
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
        let potentials = std::mem::replace(&mut self.pooled[t].potentials, Potentials::Theta(Vec::new()));
        let (Potentials::Theta(mut buffer) | Potentials::Scores(mut buffer)) = potentials;
        let (result, potentials) = if self.oracles[t].maintains_scores() {
            (self.score_into(t, &mut buffer), Potentials::Scores(buffer))
        } else {
            (self.refresh_into(t, &mut buffer), Potentials::Theta(buffer))
        };
        self.pooled[t].potentials = potentials;
        result
    }

    /// What [`gather_theta`] reads.
    fn theta_source(&self) -> ThetaSource<'_> {
        ThetaSource {
            data: self.train,
            pooled: &self.pooled,
            discrepancy: self.discrepancy.as_ref(),
            epsilon: &self.epsilon,
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
            let mut features = Vec::new();
            let mut first = 0;
            while first < n {
                let mut end = first + 1;
                while end < n && pooled.rows[end + 1] - pooled.rows[first] <= SCORE_GROUP_ROWS {
                    end += 1;
                }
                let rows = pooled.rows[first]..pooled.rows[end];
                if !rows.is_empty() {
                    self.pool_features(t, first..end, &mut features);
                    let f = Features::new(&features, rows.len(), ft.dim).map_err(|e| oracle_err(ft, e))?;
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
        Ok(parts.into_iter().collect::<NeumaierSum>().value() + self.penalty()?)
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
        let potentials = std::mem::replace(&mut self.pooled[t].potentials, Potentials::Theta(Vec::new()));
        let (fit, potentials) = match potentials {
            // The biases go into type t's θ buffer, which the refresh below
            // overwrites again — also after a failed fit, from the model kept.
            Potentials::Theta(mut buffer) => {
                let fit = self.fit_into(t, seed, &mut buffer, false);
                let fit = self.keep(t, fit);
                let refreshed = self.refresh_into(t, &mut buffer);
                (fit.and_then(|f| refreshed.map(|()| f)), Potentials::Theta(buffer))
            }
            // The fit continues from the scores and leaves the kept model's
            // there; after a failed fit they are unspecified, so they are
            // scored again from the model kept. The biases are computed row by
            // row, never stored (they would double the largest array).
            Potentials::Scores(mut g) => {
                let fit = self.fit_into(t, seed, &mut g, true);
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

    /// The features of type `t` of `examples`, one row per region in pooled
    /// row order, into `out` (replacing its contents): the trainer keeps no
    /// pooled copy between fits.
    fn pool_features(&self, t: usize, examples: std::ops::Range<usize>, out: &mut Vec<f64>) {
        out.clear();
        for ex in &self.train.examples()[examples] {
            out.extend_from_slice(&ex.features()[t].values);
        }
    }

    /// Fits the pooled problem of type `t` with the biases
    /// `b^k_α(y) = (Δ_α(y) + message offsets) / ε_t` (Eq. 14), warm-started.
    /// Without `holds_scores` the biases are written into `buffer`; with it
    /// `buffer` holds the warm start's scores, the fit continues from them and
    /// leaves the kept model's there ([`oracles::fit_monotone_scored`]), and the
    /// biases are computed row by row ([`MessageBias`]: the same bits), or all
    /// at once into an array of their own when the oracle reads every row and
    /// they fit in [`DENSE_BIAS_ENTRIES`].
    fn fit_into(
        &self,
        t: usize,
        seed: u64,
        buffer: &mut [f64],
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
        if !holds_scores {
            source.fill(c, buffer);
        }
        let mut values = Vec::with_capacity(n * ft.dim);
        self.pool_features(t, 0..self.train.len(), &mut values);
        let features = Features::new(&values, n, ft.dim).map_err(|e| oracle_err(ft, e))?;
        let (oracle, warm, ctx) = (self.oracles[t].as_ref(), self.models[t].as_deref(), FitContext { seed });
        if holds_scores && oracle.reads_every_bias() && n * c <= DENSE_BIAS_ENTRIES {
            // Small enough to hold beside the scores: the biases once, in parallel and in
            // order, instead of row by row at random (the same numbers).
            let mut bias = vec![0.0; n * c];
            source.fill(c, &mut bias);
            let problem = Problem::new(features, &pooled.labels, &bias, c, None).map_err(|e| oracle_err(ft, e))?;
            fit_monotone_scored(oracle, &problem, warm, ctx, buffer)
        } else if holds_scores {
            let problem =
                Problem::with_bias_rows(features, &pooled.labels, &source, c, None).map_err(|e| oracle_err(ft, e))?;
            fit_monotone_scored(oracle, &problem, warm, ctx, buffer)
        } else {
            let problem = Problem::new(features, &pooled.labels, buffer, c, None).map_err(|e| oracle_err(ft, e))?;
            fit_monotone(oracle, &problem, warm, ctx)
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
        let violation = results.iter().map(|r| r.0).fold(0.0, f64::max);
        Ok((violation, results.iter().map(|r| r.1).collect::<NeumaierSum>().value() + self.penalty()?))
    }

    fn evaluate(&mut self, with_train: bool) -> Result<(Option<f64>, Option<f64>), LearnError> {
        let model = self.model()?;
        let opts = self.config.predict;
        let warm = self.config.warm_start_evaluation;
        let rate = |data: &Dataset, messages: &mut Vec<Messages>| {
            if messages.len() != data.len() {
                *messages = zero_messages(data);
            } else if !warm {
                messages.iter_mut().for_each(|m| m.as_mut_slice().fill(0.0));
            }
            model.error_rate_from(data, &opts, messages)
        };
        let train = if with_train { Some(rate(self.train, &mut self.train_eval_messages)?) } else { None };
        let validation = match self.validation {
            Some(v) => {
                Some(rate(v, &mut self.validation_eval_messages).map_err(|e| LearnError::Validation(Box::new(e)))?)
            }
            None => None,
        };
        Ok((train, validation))
    }

    /// Step `s` of learning iteration `iteration`: a fit or message passing
    /// (module docs). `last` is the previous step's record, whose objective a
    /// fit updates.
    fn run_step(&mut self, iteration: usize, s: usize, last: Option<&Record>) -> Result<Record, LearnError> {
        let mut record = Record {
            iteration,
            step: s,
            phase: String::new(),
            factor_type: None,
            objective: 0.0,
            oracle_loss: None,
            rejected: None,
            max_violation: None,
            train_error: None,
            validation_error: None,
            step_seconds: 0.0,
            elapsed_seconds: 0.0,
        };
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
                return Err(LearnError::Config(format!("unknown factor type `{factor_type}`")));
            }
        }
        Ok(record)
    }

    /// Writes the learner's state (models, messages, evaluation messages,
    /// seed) and `run` (completed iterations, history, time, best model)
    /// atomically.
    fn write_checkpoint(&self, path: &Path, run: &RunState) -> Result<(), LearnError> {
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
            train_eval_messages: message_slices(&self.train_eval_messages),
            validation_eval_messages: message_slices(&self.validation_eval_messages),
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
    fn read_checkpoint(&mut self, bytes: &[u8], path: &Path, registry: &ModelRegistry) -> Result<RunState, LearnError> {
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
        let restore = |data: &Dataset, saved: Vec<Vec<f64>>, what: &str| -> Result<Vec<Messages>, LearnError> {
            if saved.is_empty() {
                return Ok(Vec::new());
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
            saved
                .into_iter()
                .enumerate()
                .map(|(k, lambda)| {
                    Messages::from_vec(data.examples()[k].graph(), lambda).map_err(|e| {
                        LearnError::bad_file(path, format!("evaluation messages of {what} example {k}: {e}"))
                    })
                })
                .collect()
        };
        let train_eval = restore(self.train, cp.train_eval_messages, "training")?;
        let validation_eval = match self.validation {
            Some(v) => restore(v, cp.validation_eval_messages, "validation")?,
            None => Vec::new(),
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
        self.validation_eval_messages = Vec::new();
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
    train_eval_messages: Vec<&'a [f64]>,
    validation_eval_messages: Vec<&'a [f64]>,
    best_model: Option<Vec<u8>>,
}

/// Pools the regions of type `t` of every example (true configurations; `θ` is
/// set by the first refresh).
fn pool(data: &Dataset, t: usize) -> Result<Pooled, LearnError> {
    let mut labels = Vec::new();
    let mut rows = vec![0];
    let mut regions = Vec::with_capacity(data.len());
    for (k, ex) in data.examples().iter().enumerate() {
        let truth = data.labels(k)?;
        let regs: Vec<usize> = data.regions_of_type(k, t).collect();
        labels.extend(regs.iter().map(|&r| ex.graph().config_of(r, truth)));
        rows.push(labels.len());
        regions.push(regs);
    }
    if labels.is_empty() {
        return Err(LearnError::Config(format!(
            "factor type `{}` has no regions in the training set",
            data.factor_types()[t].name
        )));
    }
    let theta = vec![0.0; labels.len() * data.factor_types()[t].classes];
    Ok(Pooled { labels, rows, regions, potentials: Potentials::Theta(theta) })
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
