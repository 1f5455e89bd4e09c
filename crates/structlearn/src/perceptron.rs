//! Perceptron learners of Punyakanok, Roth, Yih & Zimak (IJCAI 2005, Fig. 1;
//! docs/MATH.md §6.5) on our region graphs: linear scores
//! `θ_α(y_α) = (W_t φ_α)_{y_α}` for learnable factor types and fixed tables
//! (hard constraints, `−∞` on forbidden configurations) for the others.
//!
//! * [`PerceptronMode::Local`] (their "learning without inference feedback",
//!   LO and L+I): for every example and every region `α` of a learnable type,
//!   `ŷ_α = argmax_y θ_α(y)`; on a mistake `W_t[y_α] += φ_α`, `W_t[ŷ_α] −= φ_α`.
//! * [`PerceptronMode::Global`] (IBT): `ŷ = argmax_{y feasible} Σ_α θ_α(y_α)`
//!   by exact enumeration ([`crate::exact::map_labeling`]); on a mistake
//!   `W += Φ(x, y) − Φ(x, ŷ)`, i.e. the same per-region update on every region
//!   whose configuration differs.
//!
//! Examples are visited in data-set order; training stops after an epoch
//! without mistakes or after `learning_iterations` epochs (the paper: 100).
//! An epoch is one learning iteration of the [`crate::Executor`], so the
//! perceptrons have checkpoints and exact resume, early stopping, the
//! evaluation schedule, the stop flag and observers like every learner.
//! Each epoch is one [`Record`] with `objective` = the epoch's mistakes
//! (regions for `Local`, examples for `Global`). Evaluation decodes locally
//! (`Local`) or by constrained MAP (`Global`).
//!
//! The learned model is a [`StructuredModel`] with `ε = 1` and
//! [`LinearModel`]s, so L+I is "train `Local`, predict with
//! [`crate::exact::map_labeling`]".

use std::path::Path;

use oracles::linear::LinearModel;
use oracles::{Model, ModelRegistry, Oracle};
use serde::{Deserialize, Serialize};

use crate::exact::{local_labeling, map_labeling};
use crate::executor::{RunState, Solver};
use crate::files::{unwrap_binary, write_binary_atomic};
use crate::learner::{check_training_set, oracles_by_type};
use crate::model::oracle_err;
use crate::observer::Record;
use crate::{Dataset, LearnError, LearnerKind, StructuredModel, TrainConfig};

/// Where the perceptron's inference happens (module docs).
///
/// ```
/// # use std::sync::Arc;
/// # use factor_graph::{Scope, factors_with_singletons};
/// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
/// // Two binary outputs that may not both be 1; output i reads feature block i.
/// let graph = Arc::new(
///     factors_with_singletons(vec![2, 2], &[Scope { variables: vec![0, 1], factor_type: "constraint".into() }]).unwrap(),
/// );
/// let ex = |y: Vec<usize>, a: f64, b: f64| Example::new(
///     "e",
///     graph.clone(),
///     Some(y),
///     vec![
///         FeatureBlock { dim: 4, values: vec![a, 1.0, 0.0, 0.0, 0.0, 0.0, b, 1.0] },
///     FeatureBlock { dim: 1, values: vec![1.0] },
///     ],
/// );
/// let examples = vec![ex(vec![1, 0], 1.0, -1.0), ex(vec![0, 1], -1.0, 1.0), ex(vec![0, 0], -1.0, -1.0), ex(vec![1, 0], 1.0, 0.5)];
/// let data = Dataset::new(vec![FactorTypeInfo::new("unary", 4), FactorTypeInfo::new("constraint", 1)], examples).unwrap();
/// let registry = structlearn::OracleRegistry::builtin();
/// let oracles = vec![
///     ("unary".to_string(), registry.build(&serde_json::json!({"kind": "linear"})).unwrap()),
///     ("constraint".to_string(), registry.build(&serde_json::json!({"kind": "fixed", "table": [0.0, 0.0, 0.0, 0.0], "forbidden": [3]})).unwrap()),
/// ];
/// use structlearn::{PerceptronMode, Perceptron, TrainConfig};
/// let lo = Perceptron::new(&data, oracles, PerceptronMode::Local, TrainConfig::default()).unwrap();
/// assert_eq!(lo.kind(), structlearn::LearnerKind::PerceptronLocal);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerceptronMode {
    /// Every region on its own (LO / L+I training).
    Local,
    /// Exact constrained MAP over the whole graph (IBT).
    Global,
}

impl PerceptronMode {
    /// The learner this mode is.
    ///
    /// ```
    /// use structlearn::{LearnerKind, perceptron::PerceptronMode};
    /// assert_eq!(PerceptronMode::Global.kind(), LearnerKind::PerceptronGlobal);
    /// ```
    pub fn kind(self) -> LearnerKind {
        match self {
            PerceptronMode::Local => LearnerKind::PerceptronLocal,
            PerceptronMode::Global => LearnerKind::PerceptronGlobal,
        }
    }
}

/// A factor type's function: learned weights or a fixed model.
enum TypeModel {
    Learned(Vec<f64>),
    Fixed(Box<dyn Model>),
}

/// The perceptron learners (module docs).
///
/// ```
/// # use std::sync::Arc;
/// # use factor_graph::{Scope, factors_with_singletons};
/// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
/// // Two binary outputs that may not both be 1; output i reads feature block i.
/// let graph = Arc::new(
///     factors_with_singletons(vec![2, 2], &[Scope { variables: vec![0, 1], factor_type: "constraint".into() }]).unwrap(),
/// );
/// let ex = |y: Vec<usize>, a: f64, b: f64| Example::new(
///     "e",
///     graph.clone(),
///     Some(y),
///     vec![
///         FeatureBlock { dim: 4, values: vec![a, 1.0, 0.0, 0.0, 0.0, 0.0, b, 1.0] },
///     FeatureBlock { dim: 1, values: vec![1.0] },
///     ],
/// );
/// let examples = vec![ex(vec![1, 0], 1.0, -1.0), ex(vec![0, 1], -1.0, 1.0), ex(vec![0, 0], -1.0, -1.0), ex(vec![1, 0], 1.0, 0.5)];
/// let data = Dataset::new(vec![FactorTypeInfo::new("unary", 4), FactorTypeInfo::new("constraint", 1)], examples).unwrap();
/// let registry = structlearn::OracleRegistry::builtin();
/// let oracles = vec![
///     ("unary".to_string(), registry.build(&serde_json::json!({"kind": "linear"})).unwrap()),
///     ("constraint".to_string(), registry.build(&serde_json::json!({"kind": "fixed", "table": [0.0, 0.0, 0.0, 0.0], "forbidden": [3]})).unwrap()),
/// ];
/// use structlearn::{Executor, PerceptronMode, Perceptron, TrainConfig};
/// let config = TrainConfig { learning_iterations: 100, ..TrainConfig::default() };
/// let mut ibt = Executor::for_solver(Perceptron::new(&data, oracles, PerceptronMode::Global, config).unwrap());
/// let outcome = ibt.train().unwrap();
/// // Separable: the last epoch makes no mistake, and predictions respect the constraint.
/// assert_eq!(outcome.history.last().unwrap().objective, 0.0);
/// assert_eq!(ibt.solver().error_rate(&data).unwrap(), 0.0);
/// ```
pub struct Perceptron<'a> {
    train: &'a Dataset,
    validation: Option<&'a Dataset>,
    mode: PerceptronMode,
    config: TrainConfig,
    types: Vec<TypeModel>,
    /// An epoch without mistakes happened.
    converged: bool,
}

impl<'a> Perceptron<'a> {
    /// A perceptron on `train` with one oracle per factor type (by name, in
    /// any order): a linear class ([`Oracle::is_linear`]) is learned, a class
    /// with nothing to learn ([`Oracle::fixed_model`]: zero, fixed) is used as
    /// it is; any other class is refused. The settings are validated for
    /// this learner ([`TrainConfig::validate_for`]): smoothing and
    /// message-passing settings are refused, as it reads none of them.
    pub fn new(
        train: &'a Dataset,
        oracles: Vec<(String, Box<dyn Oracle>)>,
        mode: PerceptronMode,
        config: TrainConfig,
    ) -> Result<Self, LearnError> {
        check_training_set(train)?;
        config.validate_for(mode.kind())?;
        let types = oracles_by_type(train, oracles)?
            .into_iter()
            .zip(train.factor_types())
            .map(|(oracle, ft)| {
                if oracle.is_linear() {
                    Ok(TypeModel::Learned(vec![0.0; ft.classes * ft.dim]))
                } else if let Some(fixed) = oracle.fixed_model(ft.dim, ft.classes) {
                    Ok(TypeModel::Fixed(fixed.map_err(|e| oracle_err(ft, e))?))
                } else {
                    Err(LearnError::UnsupportedOracle {
                        learner: mode.kind(),
                        factor_type: ft.name.clone(),
                        kind: oracle.kind().to_string(),
                        allowed: "a linear oracle (linear energies are learned), or zero, fixed",
                    })
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { train, validation: None, mode, config, types, converged: false })
    }

    /// Which of the two learners this is.
    pub fn kind(&self) -> LearnerKind {
        self.mode.kind()
    }

    /// `θ` of example `k` of `data` under the current weights (flat per configuration).
    fn energies(&self, data: &Dataset, k: usize) -> Result<Vec<f64>, LearnError> {
        let ex = &data.examples()[k];
        let graph = &ex.graph();
        let mut theta = vec![0.0; graph.total_configs()];
        for (t, tm) in self.types.iter().enumerate() {
            let ft = &data.factor_types()[t];
            let block = data.features(k, t);
            match tm {
                TypeModel::Learned(w) => {
                    for (row, r) in data.regions_of_type(k, t).enumerate() {
                        let phi = &block[row * ft.dim..(row + 1) * ft.dim];
                        for (y, th) in theta[graph.config_range(r)].iter_mut().enumerate() {
                            *th = w[y * ft.dim..(y + 1) * ft.dim].iter().zip(phi).map(|(a, b)| a * b).sum();
                        }
                    }
                }
                TypeModel::Fixed(m) => {
                    let rows = data.type_rows(t, k..k + 1);
                    let features = oracles::Features::new(block, rows, ft.dim).map_err(|e| oracle_err(ft, e))?;
                    let mut s = vec![0.0; rows * ft.classes];
                    m.score(features, &mut s).map_err(|e| oracle_err(ft, e))?;
                    for (row, r) in data.regions_of_type(k, t).enumerate() {
                        theta[graph.config_range(r)].copy_from_slice(&s[row * ft.classes..(row + 1) * ft.classes]);
                    }
                }
            }
        }
        Ok(theta)
    }

    /// The prediction of this learner's mode for example `k` of `data`.
    fn decode(&self, data: &Dataset, k: usize) -> Result<Vec<usize>, LearnError> {
        let theta = self.energies(data, k)?;
        let graph = &data.examples()[k].graph();
        match self.mode {
            PerceptronMode::Local => local_labeling(graph, &theta),
            PerceptronMode::Global => map_labeling(graph, &theta, k),
        }
    }

    /// `W_t[y] += sign · φ` for region row `row` of type `t` in example `k`.
    fn update(&mut self, k: usize, t: usize, row: usize, y: usize, sign: f64) {
        let d = self.train.factor_types()[t].dim;
        let phi = &self.train.features(k, t)[row * d..(row + 1) * d];
        if let TypeModel::Learned(w) = &mut self.types[t] {
            for (a, b) in w[y * d..(y + 1) * d].iter_mut().zip(phi) {
                *a += sign * b;
            }
        }
    }

    /// One pass over the training set; returns the mistakes.
    fn epoch(&mut self) -> Result<usize, LearnError> {
        let train = self.train;
        let mut mistakes = 0;
        for k in 0..train.len() {
            let graph = train.examples()[k].graph().clone();
            let truth = train.labels(k)?;
            let theta = self.energies(train, k)?;
            let predicted = match self.mode {
                PerceptronMode::Local => None,
                PerceptronMode::Global => {
                    let y = map_labeling(&graph, &theta, k)?;
                    if y == truth {
                        continue;
                    }
                    mistakes += 1;
                    Some(y)
                }
            };
            for t in 0..self.types.len() {
                if !matches!(self.types[t], TypeModel::Learned(_)) {
                    continue;
                }
                let regions: Vec<usize> = train.regions_of_type(k, t).collect();
                for (row, r) in regions.into_iter().enumerate() {
                    let yt = graph.config_of(r, truth);
                    let yp = match &predicted {
                        Some(y) => graph.config_of(r, y),
                        None => {
                            let c = theta[graph.config_range(r)]
                                .iter()
                                .enumerate()
                                .fold((0, f64::NEG_INFINITY), |b, (y, &v)| if v > b.1 { (y, v) } else { b })
                                .0;
                            if c != yt {
                                mistakes += 1;
                            }
                            c
                        }
                    };
                    if yp != yt {
                        self.update(k, t, row, yt, 1.0);
                        self.update(k, t, row, yp, -1.0);
                    }
                }
            }
        }
        Ok(mistakes)
    }

    /// Fraction of misclassified variables of this learner's prediction on `data`.
    pub fn error_rate(&self, data: &Dataset) -> Result<f64, LearnError> {
        let (mut wrong, mut total) = (0, 0);
        for k in 0..data.len() {
            let truth = data.labels(k)?;
            let y = self.decode(data, k)?;
            wrong += y.iter().zip(truth).filter(|(a, b)| a != b).count();
            total += truth.len();
        }
        Ok(crate::model::error_rate_of(wrong, total))
    }
}

impl<'a> Solver<'a> for Perceptron<'a> {
    fn name(&self) -> &str {
        self.kind().name()
    }

    fn config(&self) -> &TrainConfig {
        &self.config
    }

    fn steps_per_iteration(&self) -> usize {
        1
    }

    fn set_validation(&mut self, validation: &'a Dataset) {
        self.validation = Some(validation);
    }

    fn validation(&self) -> Option<&'a Dataset> {
        self.validation
    }

    /// One epoch; the record's objective is its number of mistakes.
    fn step(&mut self, iteration: usize, _: usize, _: &[Record]) -> Result<Record, LearnError> {
        let mistakes = self.epoch()?;
        self.converged = mistakes == 0;
        Ok(Record { objective: mistakes as f64, ..Record::new(iteration, 0, "perceptron") })
    }

    fn converged(&self) -> bool {
        self.converged
    }

    fn evaluate(&mut self, with_train: bool) -> Result<(Option<f64>, Option<f64>), LearnError> {
        let train = if with_train { Some(self.error_rate(self.train)?) } else { None };
        let validation = self.validation.map(|v| self.error_rate(v)).transpose()?;
        Ok((train, validation))
    }

    fn model(&self) -> Result<StructuredModel, LearnError> {
        let models = self
            .types
            .iter()
            .zip(self.train.factor_types())
            .map(|(tm, ft)| {
                Ok(match tm {
                    TypeModel::Learned(w) => {
                        Box::new(LinearModel::new(ft.dim, ft.classes, w.clone()).map_err(|e| oracle_err(ft, e))?)
                            as Box<dyn Model>
                    }
                    TypeModel::Fixed(m) => m.clone_model(),
                })
            })
            .collect::<Result<Vec<_>, LearnError>>()?;
        StructuredModel::new(self.train.factor_types().to_vec(), vec![1.0; models.len()], models)
    }

    fn save_checkpoint(&self, path: &Path, run: &RunState) -> Result<(), LearnError> {
        let body = PerceptronCheckpoint {
            learner: self.kind().name().to_string(),
            examples: self.train.len(),
            factor_types: self.train.factor_types().iter().map(|f| f.name.clone()).collect(),
            weights: self
                .types
                .iter()
                .map(|t| match t {
                    TypeModel::Learned(w) => Some(w.clone()),
                    TypeModel::Fixed(_) => None,
                })
                .collect(),
            converged: self.converged,
            completed: run.completed,
            history: run.history.clone(),
            elapsed_seconds: run.elapsed_seconds,
            best_model: run.best_model.as_ref().map(StructuredModel::to_bytes).transpose()?,
        };
        write_binary_atomic(path, PERCEPTRON_CHECKPOINT_MAGIC, |w| {
            postcard::to_io(&body, w).map(drop).map_err(std::io::Error::other)
        })
    }

    fn resume_from_bytes(
        &mut self,
        bytes: &[u8],
        path: &Path,
        registry: &ModelRegistry,
    ) -> Result<RunState, LearnError> {
        let body = unwrap_binary(path, bytes, PERCEPTRON_CHECKPOINT_MAGIC)?;
        let cp: PerceptronCheckpoint = postcard::from_bytes(body).map_err(|e| {
            LearnError::bad_file(
                path,
                format!("the checkpoint body does not decode although its checksum matches: {e}"),
            )
        })?;
        let names: Vec<String> = self.train.factor_types().iter().map(|f| f.name.clone()).collect();
        if cp.learner != self.kind().name() || cp.examples != self.train.len() || cp.factor_types != names {
            return Err(LearnError::bad_file(
                path,
                format!(
                    "the checkpoint is of the {} learner on {} examples with types {:?}; this run is {} on {} \
                     examples with types {:?}: resume with the run it was written by, or delete it to start afresh",
                    cp.learner,
                    cp.examples,
                    cp.factor_types,
                    self.kind(),
                    self.train.len(),
                    names
                ),
            ));
        }
        if cp.completed > self.config.learning_iterations {
            return Err(LearnError::bad_file(
                path,
                format!(
                    "the checkpoint has finished {} epochs, more than this run's {}; resume with at least {} \
                     learning iterations, or delete it to start afresh",
                    cp.completed, self.config.learning_iterations, cp.completed
                ),
            ));
        }
        if cp.weights.len() != self.types.len() {
            return Err(LearnError::bad_file(path, "the checkpoint's weights do not match its factor types"));
        }
        let mut types = Vec::with_capacity(self.types.len());
        for ((saved, current), ft) in cp.weights.into_iter().zip(&self.types).zip(self.train.factor_types()) {
            types.push(match (saved, current) {
                (Some(w), TypeModel::Learned(_))
                    if w.len() == ft.classes * ft.dim && w.iter().all(|v| v.is_finite()) =>
                {
                    TypeModel::Learned(w)
                }
                (None, TypeModel::Fixed(m)) => TypeModel::Fixed(m.clone_model()),
                _ => {
                    return Err(LearnError::bad_file(
                        path,
                        format!(
                            "the checkpoint's function of `{}` is not this run's (learned vs fixed, or another \
                             shape); resume with the oracles it was written with",
                            ft.name
                        ),
                    ));
                }
            });
        }
        let best_model = cp.best_model.map(|b| StructuredModel::from_bytes(&b, registry, path)).transpose()?;
        self.types = types;
        self.converged = cp.converged;
        Ok(RunState { completed: cp.completed, history: cp.history, elapsed_seconds: cp.elapsed_seconds, best_model })
    }
}

/// Magic bytes of the perceptrons' checkpoint files (last byte: format version).
pub const PERCEPTRON_CHECKPOINT_MAGIC: &[u8; 8] = b"SLPERCP\x01";

/// A perceptron checkpoint: the weights of the learned types and the run.
#[derive(Debug, Serialize, Deserialize)]
struct PerceptronCheckpoint {
    /// [`LearnerKind::name`] of the learner that wrote it.
    learner: String,
    examples: usize,
    factor_types: Vec<String>,
    /// `W_t` of learned types, `None` for fixed ones.
    weights: Vec<Option<Vec<f64>>>,
    converged: bool,
    completed: usize,
    history: Vec<Record>,
    elapsed_seconds: f64,
    best_model: Option<Vec<u8>>,
}
