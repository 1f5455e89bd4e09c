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
//! Each epoch is one [`Record`] with `objective` = the epoch's mistakes
//! (regions for `Local`, examples for `Global`). Evaluation decodes locally
//! (`Local`) or by constrained MAP (`Global`).
//!
//! The learned model is a [`StructuredModel`] with `ε = 1` and
//! [`LinearModel`]s, so L+I is "train `Local`, predict with
//! [`crate::exact::map_labeling`]".

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use oracles::linear::LinearModel;
use oracles::{Model, ModelRegistry};
use serde_json::Value;

use crate::exact::{local_labeling, map_labeling};
use crate::model::oracle_err;
use crate::observer::{Observer, Record, TrainEvent};
use crate::oracle_config::{FIXED_KIND, oracle_from_json};
use crate::train::TrainOutcome;
use crate::{Dataset, Evaluate, LearnError, Learner, LearnerKind, StructuredModel, TrainConfig};

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
/// let ex = |y: Vec<usize>, a: f64, b: f64| Example {
///     name: "e".into(),
///     graph: graph.clone(),
///     labels: Some(y),
///     features: vec![
///         FeatureBlock { dim: 4, values: vec![a, 1.0, 0.0, 0.0, 0.0, 0.0, b, 1.0] },
///         FeatureBlock { dim: 1, values: vec![1.0] },
///     ],
/// };
/// let examples = vec![ex(vec![1, 0], 1.0, -1.0), ex(vec![0, 1], -1.0, 1.0), ex(vec![0, 0], -1.0, -1.0), ex(vec![1, 0], 1.0, 0.5)];
/// let data = Dataset::new(vec![FactorTypeInfo::new("unary", 4), FactorTypeInfo::new("constraint", 1)], examples).unwrap();
/// let specs = vec![
///     ("unary".to_string(), serde_json::json!({"kind": "linear"})),
///     ("constraint".to_string(), serde_json::json!({"kind": "fixed", "table": [0.0, 0.0, 0.0, 0.0], "forbidden": [3]})),
/// ];
/// use structlearn::{Learner, PerceptronMode, Perceptron, TrainConfig};
/// let lo = Perceptron::new(&data, &specs, PerceptronMode::Local, TrainConfig::default()).unwrap();
/// assert_eq!(lo.kind(), structlearn::LearnerKind::PerceptronLocal);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerceptronMode {
    /// Every region on its own (LO / L+I training).
    Local,
    /// Exact constrained MAP over the whole graph (IBT).
    Global,
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
/// let ex = |y: Vec<usize>, a: f64, b: f64| Example {
///     name: "e".into(),
///     graph: graph.clone(),
///     labels: Some(y),
///     features: vec![
///         FeatureBlock { dim: 4, values: vec![a, 1.0, 0.0, 0.0, 0.0, 0.0, b, 1.0] },
///         FeatureBlock { dim: 1, values: vec![1.0] },
///     ],
/// };
/// let examples = vec![ex(vec![1, 0], 1.0, -1.0), ex(vec![0, 1], -1.0, 1.0), ex(vec![0, 0], -1.0, -1.0), ex(vec![1, 0], 1.0, 0.5)];
/// let data = Dataset::new(vec![FactorTypeInfo::new("unary", 4), FactorTypeInfo::new("constraint", 1)], examples).unwrap();
/// let specs = vec![
///     ("unary".to_string(), serde_json::json!({"kind": "linear"})),
///     ("constraint".to_string(), serde_json::json!({"kind": "fixed", "table": [0.0, 0.0, 0.0, 0.0], "forbidden": [3]})),
/// ];
/// use structlearn::{Learner, PerceptronMode, Perceptron, TrainConfig};
/// let config = TrainConfig { learning_iterations: 100, ..TrainConfig::default() };
/// let mut ibt = Perceptron::new(&data, &specs, PerceptronMode::Global, config).unwrap();
/// let outcome = ibt.train().unwrap();
/// // Separable: the last epoch makes no mistake, and predictions respect the constraint.
/// assert_eq!(outcome.history.last().unwrap().objective, 0.0);
/// assert_eq!(ibt.error_rate(&data).unwrap(), 0.0);
/// ```
pub struct Perceptron<'a> {
    train: &'a Dataset,
    validation: Option<&'a Dataset>,
    mode: PerceptronMode,
    config: TrainConfig,
    types: Vec<TypeModel>,
    observers: Vec<Box<dyn Observer + Send + 'a>>,
    stop: Option<Arc<AtomicBool>>,
    history: Vec<Record>,
    completed: usize,
    /// An epoch without mistakes happened.
    converged: bool,
}

impl<'a> Perceptron<'a> {
    /// A perceptron on `train`; each factor type's oracle specification must
    /// be `linear` (learned, no hyper-parameters used), `zero` or `fixed`.
    pub fn new(
        train: &'a Dataset,
        specs: &[(String, Value)],
        mode: PerceptronMode,
        config: TrainConfig,
    ) -> Result<Self, LearnError> {
        if train.is_empty() {
            return Err(LearnError::EmptyDataset);
        }
        for k in 0..train.len() {
            train.labels(k)?;
        }
        if config.learning_iterations == 0 {
            return Err(LearnError::Config("learning_iterations (epochs) must be at least 1".into()));
        }
        if config.evaluate_train_every == 0 {
            return Err(LearnError::Config("evaluate_train_every must be at least 1".into()));
        }
        if config.early_stopping.is_some() {
            return Err(LearnError::Config(
                "the perceptron learners stop after an epoch without mistakes; remove `early_stopping`".into(),
            ));
        }
        if config.checkpoint.is_some() {
            return Err(LearnError::Config(
                "the perceptron learners do not write checkpoints; remove `checkpoint`".into(),
            ));
        }
        let mut types: Vec<Option<TypeModel>> = (0..train.factor_types.len()).map(|_| None).collect();
        for (name, spec) in specs {
            let t = train
                .factor_type_index(name)
                .ok_or_else(|| LearnError::Config(format!("an oracle is given for unknown factor type `{name}`")))?;
            let ft = &train.factor_types[t];
            let oracle = oracle_from_json(spec)?;
            let model = match oracle.kind() {
                "linear" => TypeModel::Learned(vec![0.0; ft.classes * ft.dim]),
                "zero" => TypeModel::Fixed(Box::new(oracles::zero::ZeroModel { dim: ft.dim, classes: ft.classes })),
                FIXED_KIND => {
                    // The table is the function: its model, without fitting it to data.
                    // (`oracle_from_json` has read this specification already, so this cannot fail.)
                    let fixed = serde_json::from_value::<oracles::fixed::FixedOracle>(spec.clone())
                        .map_err(|e| LearnError::Config(format!("oracle of factor type `{name}`: {e}")))?;
                    TypeModel::Fixed(Box::new(fixed.model(ft.dim, ft.classes).map_err(|e| oracle_err(ft, e))?))
                }
                other => {
                    return Err(LearnError::Config(format!(
                        "the perceptron learns linear functions: factor type `{name}` has oracle `{other}` (use linear, zero or fixed)"
                    )));
                }
            };
            if types[t].replace(model).is_some() {
                return Err(LearnError::Config(format!("two oracles are given for factor type `{name}`")));
            }
        }
        let types = types
            .into_iter()
            .zip(&train.factor_types)
            .map(|(m, ft)| m.ok_or_else(|| LearnError::Config(format!("factor type `{}` has no oracle", ft.name))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            train,
            validation: None,
            mode,
            config,
            types,
            observers: Vec::new(),
            stop: None,
            history: Vec::new(),
            completed: 0,
            converged: false,
        })
    }

    /// `θ` of example `k` of `data` under the current weights (flat per configuration).
    fn energies(&self, data: &Dataset, k: usize) -> Result<Vec<f64>, LearnError> {
        let ex = &data.examples[k];
        let graph = &ex.graph;
        let mut theta = vec![0.0; graph.total_configs()];
        for (t, tm) in self.types.iter().enumerate() {
            let ft = &data.factor_types[t];
            let block = &ex.features[t];
            match tm {
                TypeModel::Learned(w) => {
                    for (row, r) in data.regions_of_type(k, t).enumerate() {
                        let phi = &block.values[row * ft.dim..(row + 1) * ft.dim];
                        for (y, th) in theta[graph.config_range(r)].iter_mut().enumerate() {
                            *th = w[y * ft.dim..(y + 1) * ft.dim].iter().zip(phi).map(|(a, b)| a * b).sum();
                        }
                    }
                }
                TypeModel::Fixed(m) => {
                    let rows = data.regions_of_type(k, t).count();
                    let features =
                        oracles::Features::new(&block.values, rows, ft.dim).map_err(|e| oracle_err(ft, e))?;
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
        let graph = &data.examples[k].graph;
        match self.mode {
            PerceptronMode::Local => local_labeling(graph, &theta),
            PerceptronMode::Global => map_labeling(graph, &theta, k),
        }
    }

    /// `W_t[y] += sign · φ` for region row `row` of type `t` in example `k`.
    fn update(&mut self, k: usize, t: usize, row: usize, y: usize, sign: f64) {
        let d = self.train.factor_types[t].dim;
        let phi = &self.train.examples[k].features[t].values[row * d..(row + 1) * d];
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
            let graph = train.examples[k].graph.clone();
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
        Ok(if total == 0 { 0.0 } else { wrong as f64 / total as f64 })
    }

    fn emit(&mut self, event: &TrainEvent<'_>) -> Result<(), LearnError> {
        for o in &mut self.observers {
            o.observe(event)?;
        }
        Ok(())
    }
}

impl<'a> Learner<'a> for Perceptron<'a> {
    fn kind(&self) -> LearnerKind {
        match self.mode {
            PerceptronMode::Local => LearnerKind::PerceptronLocal,
            PerceptronMode::Global => LearnerKind::PerceptronGlobal,
        }
    }

    fn set_validation(&mut self, validation: &'a Dataset) {
        self.validation = Some(validation);
    }

    fn add_observer(&mut self, observer: Box<dyn Observer + Send + 'a>) {
        self.observers.push(observer);
    }

    fn set_stop_flag(&mut self, stop: Arc<AtomicBool>) {
        self.stop = Some(stop);
    }

    fn train(&mut self) -> Result<TrainOutcome, LearnError> {
        let model = self.model()?;
        if let Some(v) = self.validation {
            model.check_dataset(v)?;
        }
        let start = Instant::now();
        let total = self.config.learning_iterations;
        self.emit(&TrainEvent::Started { total_iterations: total, steps_per_iteration: 1, completed: self.completed })?;
        while self.completed < total && !self.converged {
            if self.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst)) {
                return Err(LearnError::Interrupted { completed: self.completed });
            }
            let t0 = Instant::now();
            let mistakes = self.epoch()?;
            self.completed += 1;
            self.converged = mistakes == 0;
            let step_seconds = t0.elapsed().as_secs_f64();
            let evaluate = !matches!(self.config.evaluate, Evaluate::Never);
            let with_train =
                self.config.evaluates_train_at(self.completed) || (self.converged && self.config.evaluate_train);
            let train_error = if evaluate && with_train { Some(self.error_rate(self.train)?) } else { None };
            let validation_error = match (evaluate, self.validation) {
                (true, Some(v)) => Some(self.error_rate(v)?),
                _ => None,
            };
            let record = Record {
                iteration: self.completed,
                step: 0,
                phase: "perceptron".into(),
                factor_type: None,
                objective: mistakes as f64,
                oracle_loss: None,
                rejected: None,
                max_violation: None,
                train_error,
                validation_error,
                step_seconds,
                elapsed_seconds: start.elapsed().as_secs_f64(),
            };
            self.history.push(record.clone());
            self.emit(&TrainEvent::Step(&record))?;
            let model = self.model()?;
            self.emit(&TrainEvent::IterationFinished { iteration: self.completed, model: &model })?;
        }
        self.emit(&TrainEvent::Finished)?;
        Ok(TrainOutcome {
            model: self.model()?,
            best_iteration: None,
            stopped_early: false,
            history: self.history.clone(),
        })
    }

    fn model(&self) -> Result<StructuredModel, LearnError> {
        let models = self
            .types
            .iter()
            .zip(&self.train.factor_types)
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
        StructuredModel::new(self.train.factor_types.clone(), vec![1.0; models.len()], models)
    }

    fn history(&self) -> &[Record] {
        &self.history
    }

    fn save_checkpoint(&self, _path: &Path) -> Result<(), LearnError> {
        Err(LearnError::Config(
            "the perceptron learners do not write checkpoints (an epoch is one pass of exact inference)".into(),
        ))
    }

    fn resume_from(&mut self, _path: &Path, _registry: &ModelRegistry) -> Result<(), LearnError> {
        Err(LearnError::Config("the perceptron learners do not resume from checkpoints".into()))
    }
}
