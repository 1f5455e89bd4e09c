//! The settings of Algorithm 1 and of every learner's run ([`TrainConfig`]),
//! the steps of a learning iteration and the checkpoint schedule.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::eval_messages::EvaluationMessages;
use crate::early_stopping::EarlyStopping;
use crate::{Dataset, LearnError, LearnerKind, PredictOptions};

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
/// let config = TrainConfig { checkpoint: Some(CheckpointConfig::new("run.ckpt")), ..TrainConfig::default() };
/// let checkpoint = config.checkpoint.unwrap();
/// assert_eq!((checkpoint.every, checkpoint.within_iteration_seconds), (1, None));
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
    /// Also write after a step inside a learning iteration once this many
    /// seconds have passed since the last write (`Some(0.0)`: after every
    /// step; `None`: only where `every` says). For runs whose steps take
    /// long (a cold fit over millions of regions): a killed process then
    /// loses at most the step it was in plus this long. Resuming continues
    /// with the next step; the numbers are those of an uninterrupted run.
    #[serde(default)]
    pub within_iteration_seconds: Option<f64>,
}

impl CheckpointConfig {
    /// A checkpoint at `path` after every learning iteration (and nowhere
    /// inside one).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), every: 1, within_iteration_seconds: None }
    }
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

/// [`EPSILON_RANGE`] in words, for [`LearnError::InvalidSetting`].
const EPSILON_ALLOWED: &str = "between 1e-6 and 1e6 (train::EPSILON_RANGE)";

/// Default [`TrainConfig::message_passing_tolerance`]: a violation of `1e-6`
/// changes the learning objective by far less than one fit does, and on the
/// denoising and Stanford-shaped benchmarks most examples reach it within a
/// few iterations once learning settles (docs/guide/performance.md).
pub const DEFAULT_MESSAGE_PASSING_TOLERANCE: f64 = 1e-6;

/// Default [`TrainConfig::message_passing_iterations`]: 10 after each fit,
/// where the chapter runs 25. Messages carry over from step to step, so a
/// step need not converge; with 10, at 572 Stanford-shaped images a warm
/// learning iteration takes 23–28.5 s instead of 32–38 s and the objective
/// and errors after each of 25 iterations are as low or lower, and the paper-scale
/// denoising problem, the real Stanford Background images and the estimators'
/// benchmark problems end within the noise of 25
/// (docs/guide/performance.md, "Message passing after each fit"). The
/// experiments keep the chapter's 25.
///
/// ```
/// use structlearn::{DEFAULT_MESSAGE_PASSING_ITERATIONS, TrainConfig};
/// assert_eq!(TrainConfig::default().message_passing_iterations, DEFAULT_MESSAGE_PASSING_ITERATIONS);
/// // The chapter's schedule, as the experiments run it:
/// let chapter = TrainConfig { message_passing_iterations: 25, ..TrainConfig::default() };
/// assert_eq!(chapter.changed_settings(), ["message_passing_iterations"]);
/// ```
pub const DEFAULT_MESSAGE_PASSING_ITERATIONS: usize = 10;

/// Default [`TrainConfig::predict`]: 10 message-passing iterations per
/// evaluation, stopping at a violation of 1e-4. Evaluation is warm-started
/// ([`TrainConfig::warm_start_evaluation`]), so the budget accumulates over
/// learning iterations — the same setting the paper experiments use. On the
/// 572-image Stanford-shaped benchmark a training-set evaluation on the former
/// default (100 iterations) cost more than the learning iteration itself
/// (docs/guide/performance.md).
pub const DEFAULT_EVALUATION: PredictOptions = PredictOptions { iterations: 10, tolerance: Some(1e-4) };

/// Default [`TrainConfig::learning_iterations`]: 25, the chapter's count
/// for Stanford Background. Against 10 (the former default) at ε = 0.1 it
/// lowered the test error of a first try by 0.052 on the 50×50 denoising
/// problem and by 0.018 on a noisy 30×30 five-label segmentation problem,
/// and left the quick Stanford and horses sets within ±0.003, at 2–2.5× the
/// time (docs/guide/python.md#defaults-the-evidence).
pub const DEFAULT_LEARNING_ITERATIONS: usize = 25;

/// Default [`TrainConfig::evaluate_train_every`]: the training error after
/// every fifth learning iteration and after the last. It costs a prediction of
/// every training example, several times the validation error's on a usual
/// split; the objective `R`, reported after every step, tracks the fit to the
/// training set in between.
pub const DEFAULT_TRAIN_ERROR_EVERY: usize = 5;

/// Settings of Algorithm 1. `Default` is docs/MATH.md §4: `ε = 0.1`,
/// [`DEFAULT_LEARNING_ITERATIONS`] learning iterations, each of which fits
/// each factor type in order followed by
/// [`DEFAULT_MESSAGE_PASSING_ITERATIONS`] message-passing iterations (the
/// chapter: 25); the validation error after every learning iteration, the
/// training error after every fifth and the last, each evaluation
/// warm-started with 10 message-passing iterations.
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
    /// most a message-passing step runs (a fixed count, as in the paper).
    /// Default [`DEFAULT_MESSAGE_PASSING_ITERATIONS`]; the chapter's
    /// experiments use 25.
    pub message_passing_iterations: usize,
    /// Each training example's message passing stops early once its largest
    /// marginalisation violation `max |μ_{αβ}(y_β) − μ_β(y_β)|` is below this
    /// ([`smoothed_inference::RunOptions::tolerance`], checked every
    /// [`smoothed_inference::TOLERANCE_CHECK_EVERY`] iterations); `None` always
    /// runs every iteration of the step. The violation is a difference of
    /// probabilities, so one tolerance fits any `ε`, label count and graph
    /// size. Default [`DEFAULT_MESSAGE_PASSING_TOLERANCE`].
    pub message_passing_tolerance: Option<f64>,
    /// Seed of every random choice.
    pub seed: u64,
    /// How evaluation predicts. Default [`DEFAULT_EVALUATION`]: 10
    /// message-passing iterations per evaluation, which accumulate over
    /// learning iterations when evaluation is warm-started (below). With
    /// `warm_start_evaluation = false` raise it (`structlearn eval` predicts
    /// from zero messages with [`PredictOptions::default`]: 100).
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
    /// [`crate::StructuredModel::predict_example_from`]) instead of from zero. The
    /// converged prediction is the same; on strongly coupled models, where
    /// message passing needs hundreds of iterations, a small `predict` budget
    /// per evaluation then accumulates over learning iterations. Checkpoints
    /// carry the evaluation messages, so a resumed run records the same errors.
    pub warm_start_evaluation: bool,
    /// Where warm-started evaluation keeps each example's messages between
    /// evaluations, and where the validation set's scores of the types that
    /// keep their training scores (boosting) wait for the next evaluation,
    /// which adds only the trees fitted since ([`oracles::Model::score_continuing`]):
    /// [`EvaluationMessages::TempFile`] (the default: an unnamed temporary
    /// file, read and written one example at a time) or
    /// [`EvaluationMessages::Memory`]. The same numbers either way; in
    /// memory the training set's evaluation messages take as many bytes as
    /// the learner's own messages, and a boosted pair type's validation
    /// scores 8 bytes per class per validation pair.
    pub evaluation_messages: EvaluationMessages,
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
            learning_iterations: DEFAULT_LEARNING_ITERATIONS,
            schedule: None,
            message_passing_iterations: DEFAULT_MESSAGE_PASSING_ITERATIONS,
            message_passing_tolerance: Some(DEFAULT_MESSAGE_PASSING_TOLERANCE),
            seed: 0,
            predict: DEFAULT_EVALUATION,
            evaluate: Evaluate::EveryIteration,
            evaluate_train: true,
            evaluate_train_every: DEFAULT_TRAIN_ERROR_EVERY,
            warm_start_evaluation: true,
            evaluation_messages: EvaluationMessages::TempFile,
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

    /// The settings that differ from [`TrainConfig::default`], by their names
    /// in configuration files, in declaration order.
    ///
    /// ```
    /// use structlearn::TrainConfig;
    /// let config = TrainConfig { epsilon: 1.0, seed: 3, ..TrainConfig::default() };
    /// assert_eq!(config.changed_settings(), ["epsilon", "seed"]);
    /// ```
    pub fn changed_settings(&self) -> Vec<&'static str> {
        // Destructured so that a new field cannot be forgotten here.
        let Self {
            epsilon,
            type_epsilon,
            learning_iterations,
            schedule,
            message_passing_iterations,
            message_passing_tolerance,
            seed,
            predict,
            evaluate,
            evaluate_train,
            evaluate_train_every,
            warm_start_evaluation,
            evaluation_messages,
            checkpoint,
            early_stopping,
        } = self;
        let d = Self::default();
        [
            ("epsilon", *epsilon != d.epsilon),
            ("type_epsilon", *type_epsilon != d.type_epsilon),
            ("learning_iterations", *learning_iterations != d.learning_iterations),
            ("schedule", *schedule != d.schedule),
            ("message_passing_iterations", *message_passing_iterations != d.message_passing_iterations),
            ("message_passing_tolerance", *message_passing_tolerance != d.message_passing_tolerance),
            ("seed", *seed != d.seed),
            ("predict", *predict != d.predict),
            ("evaluate", *evaluate != d.evaluate),
            ("evaluate_train", *evaluate_train != d.evaluate_train),
            ("evaluate_train_every", *evaluate_train_every != d.evaluate_train_every),
            ("warm_start_evaluation", *warm_start_evaluation != d.warm_start_evaluation),
            ("evaluation_messages", *evaluation_messages != d.evaluation_messages),
            ("checkpoint", *checkpoint != d.checkpoint),
            ("early_stopping", *early_stopping != d.early_stopping),
        ]
        .into_iter()
        .filter_map(|(name, changed)| changed.then_some(name))
        .collect()
    }

    /// Refuses every setting changed from its default that learner `kind`
    /// does not read ([`LearnerKind::ignored_settings`]), as
    /// [`LearnError::UnusedSetting`], then [`TrainConfig::validate`].
    /// [`crate::build_learner`] calls it before any work.
    ///
    /// ```
    /// use structlearn::{LearnError, LearnerKind, TrainConfig};
    /// let config = TrainConfig { epsilon: 1.0, ..TrainConfig::default() };
    /// assert!(config.validate_for(LearnerKind::Algorithm1).is_ok());
    /// let err = config.validate_for(LearnerKind::PerceptronGlobal).unwrap_err();
    /// assert!(matches!(err, LearnError::UnusedSetting { name: "epsilon", .. }));
    /// ```
    pub fn validate_for(&self, kind: LearnerKind) -> Result<(), LearnError> {
        let ignored = kind.ignored_settings();
        for name in self.changed_settings() {
            let one_piecewise_iteration = name == "learning_iterations" && self.learning_iterations == 1;
            if let Some(&(name, reason)) = ignored.iter().find(|(n, _)| *n == name)
                && !(kind == LearnerKind::Piecewise && one_piecewise_iteration)
            {
                return Err(LearnError::UnusedSetting { learner: kind, name, reason });
            }
        }
        self.validate()
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
        let (lo, hi) = EPSILON_RANGE;
        if !(lo..=hi).contains(&self.epsilon) {
            return invalid("epsilon", format!("{:e}", self.epsilon), EPSILON_ALLOWED);
        }
        if let Some((name, e)) = self.type_epsilon.iter().find(|(_, e)| !(lo..=hi).contains(e)) {
            return invalid("type_epsilon", format!("{e:e} for factor type `{name}`"), EPSILON_ALLOWED);
        }
        if let Some(steps) = &self.schedule
            && !steps.iter().any(|s| matches!(s, Step::Fit { .. }))
        {
            return invalid(
                "schedule",
                format!("{} steps without a `fit` step", steps.len()),
                "with a `fit` step (else training saves the all-zero model): {\"fit\": {\"factor_type\": …}} for \
                 each type to learn",
            );
        }
        if self.evaluate_train_every == 0 {
            return invalid("evaluate_train_every", "0".into(), "at least 1");
        }
        if let Some(c) = &self.checkpoint
            && c.every == 0
        {
            return invalid("checkpoint.every", "0".into(), "at least 1");
        }
        if let Some(t) = self.checkpoint.as_ref().and_then(|c| c.within_iteration_seconds)
            && !(t >= 0.0 && t.is_finite())
        {
            return invalid("checkpoint.within_iteration_seconds", t.to_string(), "a finite number ≥ 0");
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
        self.validate()?;
        for (name, _) in &self.type_epsilon {
            if data.factor_type_index(name).is_none() {
                return Err(data.unknown_factor_type("type_epsilon", name));
            }
        }
        Ok(data
            .factor_types()
            .iter()
            .map(|ft| self.type_epsilon.iter().rev().find(|(n, _)| *n == ft.name).map_or(self.epsilon, |(_, e)| *e))
            .collect())
    }
}
