//! Learners: the ways of turning a training set into a [`StructuredModel`],
//! behind one interface ([`Learner`]) so that choosing one is a setting, not a
//! separate code path (docs/ARCHITECTURE.md, "Learners").
//!
//! Every learner trains on a [`Dataset`] (region graphs, labels, features per
//! factor type), takes one oracle specification per factor type
//! (`{"kind": ...}`, see [`crate::oracle_config`]), reports [`Record`]s to
//! [`Observer`]s, stops at a flag, and returns a [`StructuredModel`] that is
//! saved, loaded and predicted with the same way whatever learned it.
//!
//! | [`LearnerKind`] | what it is | implemented by |
//! |---|---|---|
//! | `algorithm1` | Domke's Algorithm 1: per factor type, a full oracle fit of the message-biased logistic loss, then message passing (docs/MATH.md §4) | [`crate::Algorithm1`] |
//! | `hazan-urtasun` | Hazan & Urtasun's primal-dual learner for linear energies: per round, block-coordinate message passing, then **one** gradient step per factor type with the exact line minimiser ([`oracles::step`]; docs/MATH.md §6.4) | [`crate::Algorithm1`] with [`oracles::Oracle::gradient_step`] oracles and the schedule `[message passing, fit t₁, fit t₂, …]` |
//! | `piecewise` | Algorithm 1's first fit alone: every type fitted once with zero messages (biases `Δ/ε`), i.e. piecewise training of the loss-augmented objective — the smoothed "L+I" of docs/MATH.md §6.5 | [`crate::Algorithm1`] with the schedule `[fit t₁, fit t₂, …]`, one iteration |
//! | `perceptron-local` | Punyakanok et al.'s LO/L+I training: a perceptron per region, no inference | [`Perceptron`] |
//! | `perceptron-global` | their IBT: structured perceptron with exact (constrained) inference in training | [`Perceptron`] |
//!
//! The first three share everything of [`crate::Algorithm1`] — pooled
//! oracle problems, persistent messages, the objective
//! `R = Σ_k [A(λ^k, θ^k) − θ^k(y^k)]`, evaluation, checkpoints — and differ
//! only in the schedule of steps and in what a "fit" of a factor type does:
//! solve the biased logistic problem (Algorithm 1) or take one descent step
//! on it (Hazan & Urtasun). Both are block-coordinate descent on the same
//! jointly convex objective for linear energies, so they reach the same
//! optimum; the schedule decides how fast (`cargo xtask reproduce
//! hazan-urtasun` measures it). The perceptrons optimise no smooth objective
//! and use exact MAP by enumeration ([`crate::exact`]) instead of smoothed
//! inference, so they have their own loop; their `objective` is the number of
//! mistakes in the epoch.
//!
//! ```
//! use std::sync::Arc;
//! use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock, LearnerKind, TrainConfig, build_learner};
//! let graph = Arc::new(factor_graph::grid(1, 2, 2).unwrap());
//! let ex = Example::new(
//!     "tiny",
//!     graph,
//!     Some(vec![0, 1]),
//!     vec![
//!         FeatureBlock { dim: 2, values: vec![0.1, 1.0, 0.9, 1.0] },
//!     FeatureBlock { dim: 1, values: vec![1.0] },
//!     ],
//! );
//! let data = Dataset::new(vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)], vec![ex]).unwrap();
//! let specs = vec![
//!     ("unary".to_string(), serde_json::json!({"kind": "linear"})),
//!     ("pairwise".to_string(), serde_json::json!({"kind": "linear"})),
//! ];
//! let config = TrainConfig { learning_iterations: 5, message_passing_iterations: 2, ..TrainConfig::default() };
//! let mut learner = build_learner(LearnerKind::HazanUrtasun, &data, &specs, config).unwrap();
//! let outcome = learner.train().unwrap();
//! assert!(outcome.history.windows(2).all(|w| w[1].objective <= w[0].objective + 1e-9));
//! ```

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use oracles::{ModelRegistry, Oracle};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::observer::{Observer, Record};
use crate::perceptron::{Perceptron, PerceptronMode};
use crate::train::{Step, TrainOutcome};
use crate::{Algorithm1, Dataset, Executor, LearnError, OracleRegistry, StructuredModel, TrainConfig};

/// The learners [`build_learner`] knows (module docs).
///
/// ```
/// use structlearn::LearnerKind;
/// let k: LearnerKind = "hazan-urtasun".parse().unwrap();
/// assert_eq!(k, LearnerKind::HazanUrtasun);
/// assert_eq!(k.to_string(), "hazan-urtasun");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LearnerKind {
    /// Domke's Algorithm 1.
    Algorithm1,
    /// Hazan & Urtasun's primal-dual learner (linear energies).
    HazanUrtasun,
    /// Piecewise training: Algorithm 1's first fit alone.
    Piecewise,
    /// Local perceptrons (Punyakanok et al.'s LO / L+I training).
    PerceptronLocal,
    /// Structured perceptron with exact constrained inference (their IBT).
    PerceptronGlobal,
}

impl LearnerKind {
    /// Every kind, in the order of the module docs.
    pub const ALL: [LearnerKind; 5] = [
        LearnerKind::Algorithm1,
        LearnerKind::HazanUrtasun,
        LearnerKind::Piecewise,
        LearnerKind::PerceptronLocal,
        LearnerKind::PerceptronGlobal,
    ];

    /// The name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            LearnerKind::Algorithm1 => "algorithm1",
            LearnerKind::HazanUrtasun => "hazan-urtasun",
            LearnerKind::Piecewise => "piecewise",
            LearnerKind::PerceptronLocal => "perceptron-local",
            LearnerKind::PerceptronGlobal => "perceptron-global",
        }
    }

    /// The [`TrainConfig`] settings this learner does not read, each with the
    /// reason. [`TrainConfig::validate_for`] refuses them when they differ
    /// from their defaults, so a setting is never silently ignored.
    ///
    /// | learner | does not read |
    /// |---|---|
    /// | `algorithm1` | — |
    /// | `hazan-urtasun` | `schedule` |
    /// | `piecewise` | `schedule`, `learning_iterations` |
    /// | `perceptron-local`, `perceptron-global` | `epsilon`, `type_epsilon`, `schedule`, `message_passing_iterations`, `message_passing_tolerance`, `predict`, `warm_start_evaluation`, `evaluation_messages` |
    ///
    /// ```
    /// use structlearn::LearnerKind;
    /// assert!(LearnerKind::Algorithm1.ignored_settings().is_empty());
    /// assert!(LearnerKind::PerceptronLocal.ignored_settings().iter().any(|(name, _)| *name == "epsilon"));
    /// ```
    pub fn ignored_settings(self) -> &'static [(&'static str, &'static str)] {
        const PERCEPTRON: &[(&str, &str)] = &[
            ("epsilon", "its inference is a maximisation, not smoothed"),
            ("type_epsilon", "its inference is a maximisation, not smoothed"),
            ("schedule", "a learning iteration is one epoch over the examples"),
            ("message_passing_iterations", "it passes no messages"),
            ("message_passing_tolerance", "it passes no messages"),
            ("predict", "its evaluation decodes by maximisation, without message passing"),
            ("warm_start_evaluation", "its evaluation passes no messages"),
            ("evaluation_messages", "its evaluation passes no messages"),
        ];
        match self {
            LearnerKind::Algorithm1 => &[],
            LearnerKind::HazanUrtasun => {
                &[("schedule", "it defines its own: message passing, then one gradient step per factor type")]
            }
            LearnerKind::Piecewise => &[
                ("schedule", "it fits each factor type once, from zero messages"),
                ("learning_iterations", "it runs exactly one; 1 is accepted"),
            ],
            LearnerKind::PerceptronLocal | LearnerKind::PerceptronGlobal => PERCEPTRON,
        }
    }

    /// Whether this learner reads `setting` (a [`TrainConfig`] field name):
    /// it is not among [`LearnerKind::ignored_settings`].
    ///
    /// ```
    /// use structlearn::LearnerKind;
    /// assert!(LearnerKind::Algorithm1.reads("epsilon"));
    /// assert!(!LearnerKind::PerceptronGlobal.reads("epsilon"));
    /// ```
    pub fn reads(self, setting: &str) -> bool {
        !self.ignored_settings().iter().any(|(name, _)| *name == setting)
    }
}

impl fmt::Display for LearnerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LearnerKind {
    type Err = LearnError;
    fn from_str(s: &str) -> Result<Self, LearnError> {
        Self::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| LearnError::UnknownLearner { name: s.to_string() })
    }
}

/// A way of learning a [`StructuredModel`] from a training set (module docs).
///
/// ```
/// # use std::sync::Arc;
/// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
/// # let graph = Arc::new(factor_graph::grid(1, 2, 2).unwrap());
/// # let ex = |y: Vec<usize>, a: f64, b: f64| Example::new(
/// #     "tiny",
/// #     graph.clone(),
/// #     Some(y),
/// #     vec![
/// #         FeatureBlock { dim: 2, values: vec![a, 1.0, b, 1.0] },
/// #     FeatureBlock { dim: 1, values: vec![1.0] },
/// #     ],
/// # );
/// # let types = vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)];
/// # let data = Dataset::new(types, vec![ex(vec![0, 1], 0.1, 0.9), ex(vec![1, 1], 0.8, 0.7)]).unwrap();
/// # let specs: Vec<_> = ["unary", "pairwise"].iter().map(|t| (t.to_string(), serde_json::json!({"kind": "linear"}))).collect();
/// use structlearn::{Learner, LearnerKind, TrainConfig, build_learner};
/// let mut learner = build_learner(LearnerKind::Piecewise, &data, &specs, TrainConfig::default()).unwrap();
/// learner.set_validation(&data);
/// let outcome = learner.train().unwrap();
/// assert_eq!(learner.name(), LearnerKind::Piecewise.name());
/// assert_eq!(outcome.history.len(), learner.history().len());
/// ```
pub trait Learner<'a> {
    /// The learner's name (`algorithm1`, …, or a new learner's own).
    fn name(&self) -> &str;
    /// Also reports prediction error on this (validation or test) set.
    fn set_validation(&mut self, validation: &'a Dataset);
    /// Adds an observer of the training records.
    fn add_observer(&mut self, observer: Box<dyn Observer + Send + 'a>);
    /// A flag that, once set, stops training after the current step (checkpointed, if configured).
    fn set_stop_flag(&mut self, stop: Arc<AtomicBool>);
    /// Writes the model to this file (atomically) after every learning
    /// iteration ([`Executor::save_model_to`]).
    fn save_model_to(&mut self, path: &Path);
    /// Runs the remaining iterations and returns the model and all records.
    fn train(&mut self) -> Result<TrainOutcome, LearnError>;
    /// The current model.
    fn model(&self) -> Result<StructuredModel, LearnError>;
    /// With early stopping: the best validation iteration's model so far
    /// (what an interrupted run should keep). `None` by default.
    fn best_model(&self) -> Option<&StructuredModel> {
        None
    }
    /// The records so far (after a resume inside a learning iteration, they
    /// end with that iteration's first steps).
    fn history(&self) -> &[Record];
    /// Learning iterations finished so far.
    fn completed_iterations(&self) -> usize;
    /// Steps of the next learning iteration already run (after a resume or
    /// a stop inside one; 0 at an iteration boundary):
    /// [`crate::RunState::steps_into_next`].
    fn steps_into_next(&self) -> usize {
        let completed = self.completed_iterations();
        self.history().iter().rev().take_while(|r| r.iteration > completed).count()
    }
    /// Writes the learner's state atomically (errors if the learner has none worth saving).
    fn save_checkpoint(&self, path: &Path) -> Result<(), LearnError>;
    /// Restores a checkpoint written by [`Learner::save_checkpoint`] of the same learner.
    fn resume_from(&mut self, path: &Path, registry: &ModelRegistry) -> Result<(), LearnError>;
    /// Spreads training over `collective`'s ranks (data-parallel learning,
    /// docs/guide/scaling.md): each rank was given its block of the training
    /// and validation examples ([`oracles::collective::block`]), message
    /// passing stays on the rank, and the objective, the error counts and
    /// every oracle fit's sums are added over the ranks, so that every rank
    /// holds the same models and records. Call before training, on every
    /// rank, then make the same calls on every rank. Only rank 0 writes the
    /// model file; each rank writes its own checkpoint file
    /// ([`crate::executor::rank_file`]). Refused
    /// ([`LearnError::NotDistributed`]) by learners and oracle classes that
    /// cannot ([`oracles::Oracle::distributed`]); the default refuses.
    fn distribute(&mut self, collective: Arc<dyn oracles::Collective>) -> Result<(), LearnError> {
        Err(LearnError::NotDistributed {
            what: format!("the {} learner", self.name()),
            ranks: collective.ranks(),
            reason: "it does not support ranks",
        })
    }
}

/// An oracle for the factor type of this name.
type NamedOracle = (String, Box<dyn Oracle>);

/// Checks what every learner needs of a training set: at least one example,
/// and every label known (an unknown label would enter the loss as its
/// placeholder; train on the graph of the labelled variables instead).
pub(crate) fn check_training_set(train: &Dataset) -> Result<(), LearnError> {
    if train.is_empty() {
        return Err(LearnError::EmptyDataset);
    }
    for k in 0..train.len() {
        train.labels(k)?;
        if let Some(i) = train.ignored(k).and_then(|m| m.iter().position(|&x| x)) {
            return Err(LearnError::Config(format!(
                "training example {k} (`{}`): the label of variable {i} is unknown (ignored); training needs every \
                 label — build the example over its labelled variables only",
                train.examples()[k].name()
            )));
        }
    }
    Ok(())
}

/// `oracles` (named by factor type, in any order) in the data set's type
/// order, each validated: one per factor type, none for an unknown type.
pub(crate) fn oracles_by_type(train: &Dataset, oracles: Vec<NamedOracle>) -> Result<Vec<Box<dyn Oracle>>, LearnError> {
    let mut by_type: Vec<Option<Box<dyn Oracle>>> = (0..train.factor_types().len()).map(|_| None).collect();
    for (name, oracle) in oracles {
        let Some(t) = train.factor_type_index(&name) else {
            return Err(train.unknown_factor_type("oracles", &name));
        };
        if by_type[t].is_some() {
            return Err(LearnError::DuplicateOracle { factor_type: name });
        }
        oracle.validate().map_err(|e| crate::model::oracle_err(&train.factor_types()[t], e))?;
        by_type[t] = Some(oracle);
    }
    by_type
        .into_iter()
        .zip(train.factor_types())
        .map(|(o, ft)| o.ok_or_else(|| LearnError::MissingOracle { factor_type: ft.name.clone() }))
        .collect()
}

/// The oracle of `spec` as the Hazan–Urtasun learner uses it: classes with
/// a gradient step ([`oracles::Oracle::gradient_step`]: linear,
/// indexed-linear) take one step per round on the same objective (their
/// ridge carries over), classes with nothing to learn
/// ([`oracles::Oracle::fixed_model`]: zero, fixed) stay as they are.
fn step_oracle(name: &str, oracle: Box<dyn Oracle>) -> Result<Box<dyn Oracle>, LearnError> {
    if oracle.fixed_model(1, 1).is_some() {
        return Ok(oracle);
    }
    oracle.gradient_step().ok_or_else(|| LearnError::UnsupportedOracle {
        learner: LearnerKind::HazanUrtasun,
        factor_type: name.to_string(),
        kind: oracle.kind().to_string(),
        allowed: "an oracle of linear energies with a gradient step: linear, indexed-linear; or zero, fixed",
    })
}

/// Builds the learner `kind` for `train` with one oracle specification per
/// factor type and the shared settings `config` (for the perceptrons:
/// `learning_iterations` is the largest number of epochs, `evaluate`,
/// `evaluate_train`, `evaluate_train_every` and `predict` apply; `epsilon` scales nothing).
///
/// For `hazan-urtasun` one learning iteration is one round: `config.message_passing_iterations`
/// message-passing iterations, then one gradient step per learnable type. For
/// `piecewise`, `learning_iterations` and the schedule are ignored (one
/// iteration of one fit per type). A custom `config.schedule` is refused for
/// both, since the schedule is what defines them.
///
/// ```
/// # use std::sync::Arc;
/// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
/// # let graph = Arc::new(factor_graph::grid(1, 2, 2).unwrap());
/// # let ex = |y: Vec<usize>, a: f64, b: f64| Example::new(
/// #     "tiny",
/// #     graph.clone(),
/// #     Some(y),
/// #     vec![
/// #         FeatureBlock { dim: 2, values: vec![a, 1.0, b, 1.0] },
/// #     FeatureBlock { dim: 1, values: vec![1.0] },
/// #     ],
/// # );
/// # let types = vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)];
/// # let data = Dataset::new(types, vec![ex(vec![0, 1], 0.1, 0.9), ex(vec![1, 1], 0.8, 0.7)]).unwrap();
/// # let specs: Vec<_> = ["unary", "pairwise"].iter().map(|t| (t.to_string(), serde_json::json!({"kind": "linear"}))).collect();
/// use structlearn::{LearnerKind, TrainConfig, build_learner};
/// let boosting: Vec<_> = specs.iter().map(|(t, _)| (t.clone(), serde_json::json!({"kind": "boosting"}))).collect();
/// // Hazan & Urtasun's learner steps linear energies only.
/// assert!(build_learner(LearnerKind::HazanUrtasun, &data, &boosting, TrainConfig::default()).is_err());
/// assert!(build_learner(LearnerKind::Algorithm1, &data, &boosting, TrainConfig::default()).is_ok());
/// ```
pub fn build_learner<'a>(
    kind: LearnerKind,
    train: &'a Dataset,
    specs: &[(String, Value)],
    config: TrainConfig,
) -> Result<Box<dyn Learner<'a> + 'a>, LearnError> {
    build_learner_with(kind, train, specs, config, OracleRegistry::builtin())
}

/// [`build_learner`] with the oracles built by `registry` (plug-in classes
/// chosen by name: `{"kind": "my-class", ...}`).
///
/// ```
/// # use std::sync::Arc;
/// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
/// # let graph = Arc::new(factor_graph::grid(1, 2, 2).unwrap());
/// # let ex = |y: Vec<usize>, a: f64, b: f64| Example::new(
/// #     "tiny",
/// #     graph.clone(),
/// #     Some(y),
/// #     vec![
/// #         FeatureBlock { dim: 2, values: vec![a, 1.0, b, 1.0] },
/// #     FeatureBlock { dim: 1, values: vec![1.0] },
/// #     ],
/// # );
/// # let types = vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)];
/// # let data = Dataset::new(types, vec![ex(vec![0, 1], 0.1, 0.9), ex(vec![1, 1], 0.8, 0.7)]).unwrap();
/// use structlearn::{LearnerKind, OracleRegistry, TrainConfig, build_learner_with};
/// let mut registry = OracleRegistry::with_builtin();
/// registry.register::<oracles::linear::LinearOracle>("ridge", "linear, by another name", &[]).unwrap();
/// let specs: Vec<_> = ["unary", "pairwise"].iter().map(|t| (t.to_string(), serde_json::json!({"kind": "ridge", "l2": 0.1}))).collect();
/// let mut learner = build_learner_with(LearnerKind::PerceptronLocal, &data, &specs, TrainConfig::default(), &registry).unwrap();
/// assert!(learner.train().is_ok());
/// ```
pub fn build_learner_with<'a>(
    kind: LearnerKind,
    train: &'a Dataset,
    specs: &[(String, Value)],
    mut config: TrainConfig,
    registry: &OracleRegistry,
) -> Result<Box<dyn Learner<'a> + 'a>, LearnError> {
    config.validate_for(kind)?;
    let fits = || train.factor_types().iter().map(|ft| Step::Fit { factor_type: ft.name.clone() });
    let oracles = |step: bool| -> Result<Vec<NamedOracle>, LearnError> {
        specs
            .iter()
            .map(|(name, spec)| {
                let oracle = registry.build(spec)?;
                Ok((name.clone(), if step { step_oracle(name, oracle)? } else { oracle }))
            })
            .collect()
    };
    let smoothed = |oracles, config| -> Result<Box<dyn Learner<'a> + 'a>, LearnError> {
        Ok(Box::new(Executor::for_solver(Algorithm1::new(train, oracles, config)?.named(kind))))
    };
    match kind {
        LearnerKind::Algorithm1 => smoothed(oracles(false)?, config),
        LearnerKind::HazanUrtasun => {
            let mp = Step::MessagePassing { iterations: config.message_passing_iterations };
            config.schedule = Some(std::iter::once(mp).chain(fits()).collect());
            smoothed(oracles(true)?, config)
        }
        LearnerKind::Piecewise => {
            config.schedule = Some(fits().collect());
            config.learning_iterations = 1;
            smoothed(oracles(false)?, config)
        }
        LearnerKind::PerceptronLocal | LearnerKind::PerceptronGlobal => {
            let mode =
                if kind == LearnerKind::PerceptronLocal { PerceptronMode::Local } else { PerceptronMode::Global };
            Ok(Box::new(Executor::for_solver(Perceptron::new(train, oracles(false)?, mode, config)?)))
        }
    }
}
