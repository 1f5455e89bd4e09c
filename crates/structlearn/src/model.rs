//! A learned structured model: one fitted function per factor type, the
//! entropy weights, prediction (docs/MATH.md §4 "Prediction on new data") and model files.
//!
//! # Model files
//!
//! Binary: the 8 bytes `SLMODEL\x01` (the last byte is the format version),
//! then a postcard body `(ModelHeader, Vec<parameter bytes>)`, then an 8-byte
//! FNV-1a checksum of the body. The self-describing header lists the format
//! version and, per factor type, its name, feature dimension, classes, `ε` and
//! oracle kind; the parameter bytes of each type are read back by the loader
//! registered for its kind in an [`oracles::ModelRegistry`], so function classes
//! from other crates load without editing this one. A file of another version,
//! a foreign file, or a corrupt or truncated one gives [`LearnError::BadFile`].
//! [`StructuredModel::to_json`] exports small models as readable JSON.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use factor_graph::RegionGraph;
use oracles::{Features, Model, ModelRegistry};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use smoothed_inference::decoding::{Certificate, DecodeOptions, Search, certify, decode_feasible, score};
use smoothed_inference::{
    InferenceError, InferenceProblem, Messages, ProblemPlan, RunOptions, RunReport, decode, with_thread_workspace,
};

use crate::files::{unwrap_binary, wrap_binary, write_atomic};
use crate::infer::{InferError, InferOptions, infer_energies};
use crate::train::EPSILON_RANGE;
use crate::{Dataset, FactorTypeInfo, LearnError};

/// Magic bytes of model files (last byte: format version).
pub const MODEL_MAGIC: &[u8; 8] = b"SLMODEL\x01";

/// Version of the model file format.
pub const MODEL_FORMAT_VERSION: u32 = 1;

/// How prediction runs message passing (docs/MATH.md §4: messages from 0, message
/// passing to convergence or a fixed budget, decode).
///
/// ```
/// use structlearn::PredictOptions;
/// // Up to 500 iterations, stopping once the largest violation is below 1e-6.
/// let opts = PredictOptions { iterations: 500, tolerance: Some(1e-6) };
/// assert_eq!(PredictOptions::default().iterations, 100);
/// # drop(opts);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictOptions {
    /// Largest number of message-passing iterations.
    pub iterations: usize,
    /// Stop once the largest marginalisation violation is below this.
    pub tolerance: Option<f64>,
}

impl PredictOptions {
    /// The message-passing options of a prediction: these limits, the graph's
    /// default update order.
    ///
    /// ```
    /// let run = structlearn::PredictOptions { iterations: 20, tolerance: None }.run_options();
    /// assert_eq!((run.iterations, run.tolerance, run.order), (20, None, None));
    /// ```
    pub fn run_options(&self) -> RunOptions {
        RunOptions { iterations: self.iterations, tolerance: self.tolerance, order: None }
    }
}

impl Default for PredictOptions {
    /// 100 iterations or a violation below 1e-4, whichever comes first.
    fn default() -> Self {
        Self { iterations: 100, tolerance: Some(1e-4) }
    }
}

/// The prediction for one example.
///
/// ```
/// # use std::sync::Arc;
/// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock, StructuredModel};
/// # let graph = Arc::new(factor_graph::grid(1, 2, 2).unwrap());
/// # let ex = Example::new(
/// #     "a",
/// #     graph,
/// #     None,
/// #     vec![FeatureBlock { dim: 1, values: vec![0.0; 2] }, FeatureBlock { dim: 1, values: vec![1.0] }],
/// # );
/// # let data = Dataset::new(vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)], vec![ex]).unwrap();
/// # let zero = |c| Box::new(oracles::zero::ZeroModel { dim: 1, classes: c }) as Box<dyn oracles::Model>;
/// # let model = StructuredModel::new(data.factor_types().to_vec(), vec![0.1, 0.1], vec![zero(2), zero(4)]).unwrap();
/// use structlearn::PredictOptions;
/// let p = model.predict_example(&data, 0, &PredictOptions::default()).unwrap();
/// assert_eq!(p.labels.len(), 2); // one label per variable
/// let graph = &data.examples()[0].graph();
/// let b0 = &p.beliefs[graph.config_range(0)]; // pixel 0's belief (region 0)
/// assert!((b0[0] - 0.5).abs() < 1e-9); // zero energies: uniform beliefs
/// assert!(p.report.converged);
/// ```
#[derive(Debug, Clone)]
pub struct Prediction {
    /// `ŷ_i = argmax μ_i(y_i)` per variable, unless the model forbids that
    /// labelling: then the constrained decoding's
    /// ([`smoothed_inference::decoding::decode_feasible`]).
    pub labels: Vec<usize>,
    /// Beliefs `μ_α`, flat per configuration of the example's graph.
    pub beliefs: Vec<f64>,
    /// What message passing did.
    pub report: RunReport,
}

/// The labelling a prediction reports: each variable's most believed label
/// ([`decode`]) — unless the model forbids that combination (a hard
/// constraint, `θ = −∞`, where the relaxation is not tight), in which case
/// the constrained decoding's ([`decode_feasible`], without local search, so
/// the labels stay those the beliefs favour, and with [`Search::Static`], the
/// search of earlier versions, so that the predictions and error rates of
/// learned models stay theirs). Where no allowed labelling is found the error
/// says so; a forbidden labelling is never returned.
fn decode_allowed(graph: &RegionGraph, theta: &[f64], beliefs: &[f64]) -> Result<Vec<usize>, InferenceError> {
    let labels = decode(graph, beliefs)?;
    if score(graph, theta, &labels) > f64::NEG_INFINITY {
        return Ok(labels);
    }
    let opts = DecodeOptions { local_search_sweeps: 0, search: Search::Static, ..DecodeOptions::default() };
    Ok(decode_feasible(graph, theta, beliefs, &opts)?.labels)
}

/// Message passing from `messages` as [`InferenceProblem::run`] does it, then
/// the labels [`decode_allowed`] reads from the final beliefs — computing only
/// the singleton beliefs ([`InferenceProblem::run_and_decode`]) unless their
/// argmax is a labelling the model forbids. Only then are every region's
/// beliefs computed, from the final messages as `run`'s report computes them
/// (a run of no iterations), for the constrained decoding. The same labels as
/// `run` followed by `decode_allowed`, for error rates, where nobody reads a
/// prediction's beliefs or report.
fn run_and_decode_allowed(
    problem: &InferenceProblem<'_>,
    messages: &mut Messages,
    run: &RunOptions,
    ws: &mut smoothed_inference::Workspace,
) -> Result<Vec<usize>, InferenceError> {
    let (_, labels) = problem.run_and_decode(messages, run, ws)?;
    let (graph, theta) = (problem.graph(), problem.theta());
    if score(graph, theta, &labels) > f64::NEG_INFINITY {
        return Ok(labels);
    }
    problem.run(messages, &RunOptions { iterations: 0, tolerance: None, order: None }, ws)?;
    decode_allowed(graph, theta, ws.beliefs())
}

/// Per factor type, what a model file's header says.
///
/// ```
/// let h: structlearn::ModelTypeHeader =
///     serde_json::from_str(r#"{"name": "unary", "dim": 2, "classes": 2, "epsilon": 0.1, "kind": "boosting"}"#).unwrap();
/// assert_eq!(h.kind, "boosting");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelTypeHeader {
    /// Factor type name.
    pub name: String,
    /// Feature dimension.
    pub dim: usize,
    /// Classes (configurations per region).
    pub classes: usize,
    /// Entropy weight `ε_t` (also the energy scale `f = ε g`).
    pub epsilon: f64,
    /// Oracle / model kind, the registry key.
    pub kind: String,
}

/// The self-describing header of a model file.
///
/// ```
/// # use std::sync::Arc;
/// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock, StructuredModel};
/// # let types = vec![FactorTypeInfo { name: "unary".into(), dim: 1, classes: 2 }, FactorTypeInfo { name: "pairwise".into(), dim: 1, classes: 4 }];
/// # let zero = |c| Box::new(oracles::zero::ZeroModel { dim: 1, classes: c }) as Box<dyn oracles::Model>;
/// # let model = StructuredModel::new(types, vec![0.1, 0.1], vec![zero(2), zero(4)]).unwrap();
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("model.slm");
/// model.save(&path).unwrap();
/// let header = StructuredModel::read_header(&path).unwrap(); // no registry needed
/// assert_eq!(header.factor_types[1].name, "pairwise");
/// assert_eq!(header.factor_types[1].kind, "zero");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelHeader {
    /// [`MODEL_FORMAT_VERSION`].
    pub format_version: u32,
    /// The factor types, in order.
    pub factor_types: Vec<ModelTypeHeader>,
}

/// A structured predictor `F(x, y) = Σ_α ε_t g_t(φ_α, y_α)` (docs/MATH.md §4: `f = ε g`).
///
/// ```
/// use std::sync::Arc;
/// use oracles::ModelRegistry;
/// use structlearn::oracle_config::builtin_oracle;
/// use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock, PredictOptions, StructuredModel, TrainConfig, Trainer};
/// let graph = Arc::new(factor_graph::grid(2, 2, 2).unwrap());
/// let ex = |labels: Option<Vec<usize>>, x: [f64; 4]| Example::new(
///     "x",
///     graph.clone(),
///     labels,
///     vec![
///         FeatureBlock { dim: 2, values: x.iter().flat_map(|&v| [v, 1.0]).collect() },
///     FeatureBlock { dim: 1, values: vec![1.0; 4] },
///     ],
/// );
/// let types = vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)];
/// let train = Dataset::new(types.clone(), vec![ex(Some(vec![0, 1, 0, 1]), [0.1, 0.9, 0.2, 0.8])]).unwrap();
/// let oracles = vec![("unary".into(), builtin_oracle("linear").unwrap()), ("pairwise".into(), builtin_oracle("linear").unwrap())];
/// let model = Trainer::new(&train, oracles, TrainConfig::default()).unwrap().train().unwrap().model;
/// // New data needs no labels.
/// let new = Dataset::new(types, vec![ex(None, [0.95, 0.05, 0.9, 0.1])]).unwrap();
/// let predictions = model.predict(&new, &PredictOptions::default()).unwrap();
/// assert_eq!(predictions[0].labels, vec![1, 0, 1, 0]);
/// // Model files: binary, atomic; every oracle kind's loader comes from a registry.
/// let dir = tempfile::tempdir().unwrap();
/// model.save(&dir.path().join("model.slm")).unwrap();
/// let loaded = StructuredModel::load(&dir.path().join("model.slm"), &ModelRegistry::with_builtin()).unwrap();
/// assert_eq!(loaded.predict(&new, &PredictOptions::default()).unwrap()[0].labels, predictions[0].labels);
/// ```
#[derive(Debug, Clone)]
pub struct StructuredModel {
    factor_types: Vec<FactorTypeInfo>,
    epsilon: Vec<f64>,
    models: Vec<Box<dyn Model>>,
}

impl StructuredModel {
    /// Checks that there is one model and one positive, finite `ε` per type,
    /// with matching dimensions and classes; nothing changes a model after.
    pub fn new(
        factor_types: Vec<FactorTypeInfo>,
        epsilon: Vec<f64>,
        models: Vec<Box<dyn Model>>,
    ) -> Result<Self, LearnError> {
        let model = Self { factor_types, epsilon, models };
        model.check()?;
        Ok(model)
    }

    /// Factor types (name, dim, classes).
    pub fn factor_types(&self) -> &[FactorTypeInfo] {
        &self.factor_types
    }

    /// `ε_t` per factor type.
    pub fn epsilon(&self) -> &[f64] {
        &self.epsilon
    }

    /// The fitted `g_t` per factor type.
    pub fn models(&self) -> &[Box<dyn Model>] {
        &self.models
    }

    /// What [`StructuredModel::new`] checks, once.
    fn check(&self) -> Result<(), LearnError> {
        let (factor_types, epsilon, models) = (&self.factor_types, &self.epsilon, &self.models);
        if epsilon.len() != factor_types.len() || models.len() != factor_types.len() {
            return Err(LearnError::Config(format!(
                "{} factor types but {} entropy weights and {} models",
                factor_types.len(),
                epsilon.len(),
                models.len()
            )));
        }
        for ((ft, &eps), m) in factor_types.iter().zip(epsilon).zip(models) {
            if !(eps > 0.0 && eps.is_finite()) {
                return Err(LearnError::Config(format!(
                    "epsilon of `{}` is {eps}; it must be > 0 and finite",
                    ft.name
                )));
            }
            if m.dim() != ft.dim || m.classes() != ft.classes {
                return Err(LearnError::ModelMismatch(format!(
                    "factor type `{}` has dim {} and {} classes, its {} model has dim {} and {} classes",
                    ft.name,
                    ft.dim,
                    ft.classes,
                    m.kind(),
                    m.dim(),
                    m.classes()
                )));
            }
        }
        Ok(())
    }

    /// Checks that a data set has this model's factor types (same names and
    /// order, dimensions and classes).
    pub fn check_dataset(&self, data: &Dataset) -> Result<(), LearnError> {
        if data.factor_types().len() != self.factor_types.len() {
            return Err(LearnError::ModelMismatch(format!(
                "the model has {} factor types, the data {}",
                self.factor_types.len(),
                data.factor_types().len()
            )));
        }
        for (m, d) in self.factor_types.iter().zip(data.factor_types()) {
            if m.name != d.name || m.dim != d.dim || (d.classes != 0 && m.classes != d.classes) {
                return Err(LearnError::ModelMismatch(format!(
                    "model type `{}` (dim {}, {} classes) vs data type `{}` (dim {}, {} classes)",
                    m.name, m.dim, m.classes, d.name, d.dim, d.classes
                )));
            }
        }
        Ok(())
    }

    /// Scores of factor type `t` for all its regions of example `k`
    /// (`rows × classes`, rows in region order).
    pub fn type_scores(&self, data: &Dataset, k: usize, t: usize) -> Result<Vec<f64>, LearnError> {
        let mut out = Vec::new();
        self.type_scores_into(data, k, t, &mut out)?;
        Ok(out)
    }

    /// [`StructuredModel::type_scores`] into `out` (resized; its allocation reused).
    fn type_scores_into(&self, data: &Dataset, k: usize, t: usize, out: &mut Vec<f64>) -> Result<(), LearnError> {
        self.type_scores_with(data, k, t, out, |model, features, out| model.score(features, out))
    }

    /// [`StructuredModel::type_scores_into`] with the rows scored by
    /// `score(model, features, out)` (`out` zeroed), which must write what
    /// `model.score` writes.
    fn type_scores_with(
        &self,
        data: &Dataset,
        k: usize,
        t: usize,
        out: &mut Vec<f64>,
        score: impl FnOnce(&dyn Model, Features<'_>, &mut [f64]) -> Result<(), oracles::OracleError>,
    ) -> Result<(), LearnError> {
        data.example(k)?;
        let (Some(ft), true) = (self.factor_types.get(t), t < data.factor_types().len()) else {
            return Err(LearnError::ModelMismatch(format!(
                "factor type {t} asked of a model of {} and data of {} types",
                self.factor_types.len(),
                data.factor_types().len()
            )));
        };
        let block = data.features(k, t);
        // Rows are regions: with dimension 0 the block holds no values at all.
        let rows = data.type_rows(t, k..k + 1);
        let features = Features::new(block, rows, ft.dim).map_err(|e| oracle_err(ft, e))?;
        out.clear();
        out.resize(rows * ft.classes, 0.0);
        score(self.models[t].as_ref(), features, out).map_err(|e| oracle_err(ft, e))
    }

    /// Energies `θ(y_α) = ε_t g_t(φ_α, y_α)` of example `k` (no `Δ`), flat per
    /// configuration of its graph.
    pub fn energies(&self, data: &Dataset, k: usize) -> Result<Vec<f64>, LearnError> {
        let mut theta = Vec::new();
        self.energies_into(data, k, &mut theta, &mut Vec::new())?;
        Ok(theta)
    }

    /// [`StructuredModel::energies`] into `theta` (resized), with `scores` as
    /// scratch: both allocations reused.
    fn energies_into(
        &self,
        data: &Dataset,
        k: usize,
        theta: &mut Vec<f64>,
        scores: &mut Vec<f64>,
    ) -> Result<(), LearnError> {
        self.energies_scored_by(data, k, theta, scores, |_, model, features, out| model.score(features, out))
    }

    /// [`StructuredModel::energies_into`] with type `t`'s rows scored by
    /// `score(t, model, features, out)` (`out` zeroed), which must write what
    /// `model.score` writes: a caller that kept earlier scores continues
    /// them ([`Model::score_continuing`]).
    pub(crate) fn energies_scored_by(
        &self,
        data: &Dataset,
        k: usize,
        theta: &mut Vec<f64>,
        scores: &mut Vec<f64>,
        mut score: impl FnMut(usize, &dyn Model, Features<'_>, &mut [f64]) -> Result<(), oracles::OracleError>,
    ) -> Result<(), LearnError> {
        self.check_dataset(data)?;
        let graph = &data.example(k)?.graph();
        theta.clear();
        theta.resize(graph.total_configs(), 0.0);
        for t in 0..self.factor_types.len() {
            self.type_scores_with(data, k, t, scores, |model, features, out| score(t, model, features, out))?;
            let c = self.factor_types[t].classes;
            spread_energies(graph, data.regions_of_type(k, t), self.epsilon[t], c, scores, theta);
        }
        Ok(())
    }

    /// Predicts example `k` (docs/MATH.md §4): `θ = ε g`, messages from 0, message
    /// passing until `opts`' tolerance or budget, decode.
    pub fn predict_example(&self, data: &Dataset, k: usize, opts: &PredictOptions) -> Result<Prediction, LearnError> {
        let mut messages = Messages::zeros(data.example(k)?.graph());
        self.predict_example_from(data, k, opts, &mut messages)
    }

    /// [`StructuredModel::predict_example`] (the same prediction) with the
    /// certificates of its labelling ([`smoothed_inference::decoding::certify`]):
    /// its score `θ(ŷ) = Σ_α θ_α(ŷ_α)` under the energies `θ = ε g`
    /// ([`StructuredModel::energies`]), the ε = 0 bound `Σ_α max θ̃_α` at the
    /// final messages (no labelling scores more) and the gap between them. It
    /// costs a second scoring of the example's features.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock, StructuredModel};
    /// # let graph = Arc::new(factor_graph::grid(2, 2, 2).unwrap());
    /// # let ex = Example::new("a", graph, None,
    /// #     vec![FeatureBlock { dim: 1, values: vec![0.0, 0.3, 0.6, 1.0] }, FeatureBlock { dim: 1, values: vec![1.0; 4] }]);
    /// # let data = Dataset::new(vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)], vec![ex]).unwrap();
    /// # let unary = Box::new(oracles::linear::LinearModel::new(1, 2, vec![-2.0, 2.0]).unwrap()) as Box<dyn oracles::Model>;
    /// # let pair = Box::new(oracles::linear::LinearModel::new(1, 4, vec![1.0, 0.0, 0.0, 1.0]).unwrap()) as Box<dyn oracles::Model>;
    /// # let model = StructuredModel::new(data.factor_types().to_vec(), vec![0.5, 0.5], vec![unary, pair]).unwrap();
    /// use structlearn::PredictOptions;
    /// let opts = PredictOptions::default();
    /// let (p, c) = model.predict_example_certified(&data, 0, &opts).unwrap();
    /// assert_eq!(p.labels, model.predict_example(&data, 0, &opts).unwrap().labels);
    /// assert!(c.bound >= c.score - 1e-9 && c.gap == c.bound - c.score); // up to rounding where the bound is tight
    /// ```
    pub fn predict_example_certified(
        &self,
        data: &Dataset,
        k: usize,
        opts: &PredictOptions,
    ) -> Result<(Prediction, Certificate), LearnError> {
        let mut messages = Messages::zeros(data.example(k)?.graph());
        let prediction = self.predict_example_from(data, k, opts, &mut messages)?;
        let graph = &data.example(k)?.graph();
        let theta = self.energies(data, k)?;
        let inference = |source| LearnError::Inference { example: k, source };
        let problem =
            InferenceProblem::new(graph, &theta, &graph_epsilon(data, k, &self.epsilon)).map_err(inference)?;
        let certificate = certify(&problem, &messages, &prediction.labels).map_err(inference)?;
        Ok((prediction, certificate))
    }

    /// Example `k`'s ε → 0 labelling (an estimate of the MAP labelling
    /// `argmax_y θ(y)`, `θ = ε g`), with its certificates: `structlearn
    /// infer --anneal`'s pipeline ([`crate::infer::infer_energies`]) on the
    /// example's energies. Stage `s` smooths every factor type with its own ε
    /// times `2^−s`, from the model's ε (what [`StructuredModel::predict_example`]
    /// decodes from) down to `eps_min` times it, messages warm-started from
    /// stage to stage, each stage up to `opts`' budget of star updates (no
    /// dual polish). Each stage's labelling is decoded respecting the model's
    /// zeros and raised by local search; the best-scoring stage's is returned.
    ///
    /// The prediction's `beliefs` and `report` are the last stage's (its
    /// `iterations` summed over the stages); the certificate's bound is the
    /// lowest stage's, so `gap = 0` proves the labelling a MAP labelling.
    /// On models without hard constraints the beliefs' argmax at the model's
    /// ε ([`StructuredModel::predict_example`]) can differ from it: it
    /// decodes the smoothed marginals, this the energies.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock, StructuredModel};
    /// # let graph = Arc::new(factor_graph::grid(2, 2, 2).unwrap());
    /// # let ex = Example::new("a", graph, None,
    /// #     vec![FeatureBlock { dim: 1, values: vec![0.0, 0.3, 0.6, 1.0] }, FeatureBlock { dim: 1, values: vec![1.0; 4] }]);
    /// # let data = Dataset::new(vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)], vec![ex]).unwrap();
    /// # let unary = Box::new(oracles::linear::LinearModel::new(1, 2, vec![-2.0, 2.0]).unwrap()) as Box<dyn oracles::Model>;
    /// # let pair = Box::new(oracles::linear::LinearModel::new(1, 4, vec![1.0, 0.0, 0.0, 1.0]).unwrap()) as Box<dyn oracles::Model>;
    /// # let model = StructuredModel::new(data.factor_types().to_vec(), vec![0.5, 0.5], vec![unary, pair]).unwrap();
    /// use structlearn::PredictOptions;
    /// let (p, c) = model.predict_example_annealed(&data, 0, &PredictOptions::default(), 0.01).unwrap();
    /// // Four pixels on a 2 × 2 grid: enumerate all 16 labellings.
    /// let theta = model.energies(&data, 0).unwrap();
    /// let graph = data.examples()[0].graph();
    /// let best = (0..16usize)
    ///     .map(|y| smoothed_inference::decoding::score(graph, &theta, &(0..4).map(|i| (y >> i) & 1).collect::<Vec<_>>()))
    ///     .fold(f64::NEG_INFINITY, f64::max);
    /// assert!((c.score - best).abs() < 1e-12 && c.gap.abs() < 1e-6); // a certified MAP labelling
    /// assert_eq!(c.score, smoothed_inference::decoding::score(graph, &theta, &p.labels));
    /// ```
    ///
    /// Errors: `eps_min` not in (0, 1] (factors below
    /// [`EPSILON_RANGE`]'s lower end count as that end); inference errors as
    /// [`StructuredModel::predict_example`]'s.
    pub fn predict_example_annealed(
        &self,
        data: &Dataset,
        k: usize,
        opts: &PredictOptions,
        eps_min: f64,
    ) -> Result<(Prediction, Certificate), LearnError> {
        if !(eps_min > 0.0 && eps_min <= 1.0) {
            return Err(LearnError::InvalidSetting {
                name: "eps_min",
                value: eps_min.to_string(),
                allowed: "a number in (0, 1]: the last stage's ε as a multiple of the model's",
            });
        }
        self.check_dataset(data)?;
        let graph = data.example(k)?.graph();
        let theta = self.energies(data, k)?;
        let weights = graph_epsilon(data, k, &self.epsilon);
        let infer = InferOptions {
            eps: 1.0,
            iterations: opts.iterations,
            tolerance: opts.tolerance,
            polish: 0,
            anneal: true,
            eps_min: Some(eps_min.max(EPSILON_RANGE.0)),
            ..InferOptions::default()
        };
        let inference = |source| LearnError::Inference { example: k, source };
        let out = infer_energies(graph, &theta, 0.0, &weights, &infer, &mut |_| {}).map_err(|e| match e {
            InferError::Problem(e) | InferError::Run(e) => inference(e),
            e => LearnError::Config(format!("inference on example {k}: {e}")),
        })?;
        let decoded = out.chosen().as_ref().map_err(|e| inference(e.clone()))?;
        let certificate = Certificate { score: decoded.score, bound: out.bound, gap: out.bound - decoded.score };
        let mut report = out.last().report;
        report.iterations = out.stages.iter().map(|s| s.report.iterations).sum();
        Ok((Prediction { labels: decoded.labels.clone(), beliefs: out.beliefs, report }, certificate))
    }

    /// Like [`StructuredModel::predict_example`], but message passing starts
    /// from `messages` (which must fit example `k`'s graph) and leaves its
    /// final messages there.
    ///
    /// The smoothed beliefs at the optimum of `A(λ, θ)` are unique (the entropy
    /// is strictly concave), so warm starts change where message passing
    /// starts, not where it converges: a trainer re-predicting after every
    /// learning iteration can keep each example's messages and spend a small
    /// budget per evaluation, accumulating iterations as the model settles.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock, StructuredModel};
    /// # let graph = Arc::new(factor_graph::grid(3, 3, 2).unwrap());
    /// # let ex = Example::new(
    /// #     "a",
    /// #     graph,
    /// #     None,
    /// #     vec![FeatureBlock { dim: 1, values: (0..9).map(|i| i as f64 / 8.0).collect() }, FeatureBlock { dim: 1, values: vec![1.0; 12] }],
    /// # );
    /// # let data = Dataset::new(vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)], vec![ex]).unwrap();
    /// # let unary = Box::new(oracles::linear::LinearModel::new(1, 2, vec![-20.0, 20.0]).unwrap()) as Box<dyn oracles::Model>;
    /// # let pair = Box::new(oracles::linear::LinearModel::new(1, 4, vec![10.0, 0.0, 0.0, 10.0]).unwrap()) as Box<dyn oracles::Model>;
    /// # let model = StructuredModel::new(data.factor_types().to_vec(), vec![0.1, 0.1], vec![unary, pair]).unwrap();
    /// use smoothed_inference::Messages;
    /// use structlearn::PredictOptions;
    /// let few = PredictOptions { iterations: 3, tolerance: None };
    /// let mut messages = Messages::zeros(&data.examples()[0].graph());
    /// // Budgets add up: 3 + 3 + 3 iterations from the same messages …
    /// for _ in 0..3 {
    ///     model.predict_example_from(&data, 0, &few, &mut messages).unwrap();
    /// }
    /// // … continue where one run of 9 iterations from zero would be.
    /// let nine = model.predict_example(&data, 0, &PredictOptions { iterations: 9, tolerance: None }).unwrap();
    /// let again = model.predict_example_from(&data, 0, &PredictOptions { iterations: 0, tolerance: None }, &mut messages).unwrap();
    /// assert_eq!(again.labels, nine.labels);
    /// ```
    pub fn predict_example_from(
        &self,
        data: &Dataset,
        k: usize,
        opts: &PredictOptions,
        messages: &mut Messages,
    ) -> Result<Prediction, LearnError> {
        // Before the plan is built from ε; the example itself is checked in `energies`.
        self.check_dataset(data)?;
        let graph = &data.example(k)?.graph();
        let plan = ProblemPlan::new(Arc::clone(graph), &graph_epsilon(data, k, &self.epsilon))
            .map_err(|source| LearnError::Inference { example: k, source })?;
        self.predict_planned(data, k, &plan, opts, messages)
    }

    /// [`StructuredModel::predict_example_from`] on example `k`'s plan
    /// (see [`example_plans`]).
    fn predict_planned(
        &self,
        data: &Dataset,
        k: usize,
        plan: &ProblemPlan,
        opts: &PredictOptions,
        messages: &mut Messages,
    ) -> Result<Prediction, LearnError> {
        let theta = self.energies(data, k)?;
        let problem =
            InferenceProblem::planned(plan, &theta).map_err(|source| LearnError::Inference { example: k, source })?;
        let run = opts.run_options();
        // The run computes the final beliefs for its report; take them from its workspace.
        let (report, beliefs) =
            with_thread_workspace(|ws| problem.run(messages, &run, ws).map(|r| (r, ws.beliefs().to_vec())))
                .map_err(|source| LearnError::Inference { example: k, source })?;
        let labels = decode_allowed(plan.graph(), &theta, &beliefs)
            .map_err(|source| LearnError::Inference { example: k, source })?;
        Ok(Prediction { labels, beliefs, report })
    }

    /// Predicts every example, in parallel over examples.
    pub fn predict(&self, data: &Dataset, opts: &PredictOptions) -> Result<Vec<Prediction>, LearnError> {
        self.check_dataset(data)?;
        let plans = example_plans(data, &self.epsilon)?;
        (0..data.len())
            .into_par_iter()
            .map(|k| {
                let mut messages = Messages::zeros(plans[k].graph());
                self.predict_planned(data, k, &plans[k], opts, &mut messages)
            })
            .collect()
    }

    /// Fraction of misclassified variables, pooled over all examples
    /// ("univariate error", docs/MATH.md §4), predicting from zero messages. Every
    /// example needs labels; variables marked unknown ([`Dataset::set_ignored`]) are
    /// left out of both counts.
    pub fn error_rate(&self, data: &Dataset, opts: &PredictOptions) -> Result<f64, LearnError> {
        let (wrong, total) = self.error_counts(data, opts, None)?;
        Ok(error_rate_of(wrong, total))
    }

    /// [`StructuredModel::error_rate`] as counts (wrongly predicted and
    /// labelled variables); each example's zero messages are made when it is
    /// predicted, so no array of messages for the whole set exists. Energies
    /// from `energies` when given (see [`Energies`]).
    pub(crate) fn error_counts(
        &self,
        data: &Dataset,
        opts: &PredictOptions,
        energies: Option<Energies<'_>>,
    ) -> Result<(usize, usize), LearnError> {
        let zeros = |k: usize| Ok(Messages::zeros(data.examples()[k].graph()));
        self.error_counts_streamed(data, opts, zeros, |_, _| Ok(()), energies)
    }

    /// [`StructuredModel::error_rate`] with message passing started from
    /// `messages[k]` for example `k` (see
    /// [`StructuredModel::predict_example_from`]); the final messages are left there.
    pub fn error_rate_from(
        &self,
        data: &Dataset,
        opts: &PredictOptions,
        messages: &mut [Messages],
    ) -> Result<f64, LearnError> {
        let (wrong, total) = self.error_counts_from(data, opts, messages)?;
        Ok(error_rate_of(wrong, total))
    }

    /// [`StructuredModel::error_rate_from`] as counts: wrongly predicted and
    /// labelled variables (what ranks holding parts of a data set add up).
    pub fn error_counts_from(
        &self,
        data: &Dataset,
        opts: &PredictOptions,
        messages: &mut [Messages],
    ) -> Result<(usize, usize), LearnError> {
        self.error_counts_from_with(data, opts, messages, None)
    }

    /// [`StructuredModel::error_counts_from`] with example `k`'s energies
    /// from `energies` when given (see [`Energies`]).
    pub(crate) fn error_counts_from_with(
        &self,
        data: &Dataset,
        opts: &PredictOptions,
        messages: &mut [Messages],
        energies: Option<Energies<'_>>,
    ) -> Result<(usize, usize), LearnError> {
        self.check_dataset(data)?;
        if messages.len() != data.len() {
            return Err(LearnError::Config(format!("{} message sets for {} examples", messages.len(), data.len())));
        }
        let plans = example_plans(data, &self.epsilon)?;
        let counts: Vec<(usize, usize)> = messages
            .par_iter_mut()
            .enumerate()
            .with_max_len(1)
            .map(|(k, m)| self.example_error_counts(data, &plans, opts, k, m, energies))
            .collect::<Result<_, LearnError>>()?;
        Ok(counts.iter().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)))
    }

    /// [`StructuredModel::error_counts_from`] with example `k`'s messages
    /// handed over one example at a time: message passing starts from
    /// `load(k)` and its final messages go to `keep(k, …)`, so that only the
    /// examples being predicted hold messages (warm-started evaluation from a
    /// file, [`crate::EvaluationMessages::TempFile`]). The same bits as
    /// `error_counts_from` on the same messages. Energies from `energies`
    /// when given (see [`Energies`]).
    pub(crate) fn error_counts_streamed(
        &self,
        data: &Dataset,
        opts: &PredictOptions,
        load: impl Fn(usize) -> Result<Messages, LearnError> + Sync,
        keep: impl Fn(usize, &Messages) -> Result<(), LearnError> + Sync,
        energies: Option<Energies<'_>>,
    ) -> Result<(usize, usize), LearnError> {
        self.check_dataset(data)?;
        let plans = example_plans(data, &self.epsilon)?;
        let counts: Vec<(usize, usize)> = (0..data.len())
            .into_par_iter()
            .with_max_len(1)
            .map(|k| {
                let mut m = load(k)?;
                let counts = self.example_error_counts(data, &plans, opts, k, &mut m, energies)?;
                keep(k, &m)?;
                Ok(counts)
            })
            .collect::<Result<_, LearnError>>()?;
        Ok(counts.iter().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)))
    }

    /// Example `k`'s wrongly predicted and labelled variables, message
    /// passing from `m` (left with the final messages), with the energies
    /// `energies` writes if given, else the model's ([`Self::energies`]).
    fn example_error_counts(
        &self,
        data: &Dataset,
        plans: &[ProblemPlan],
        opts: &PredictOptions,
        k: usize,
        m: &mut Messages,
        energies: Option<Energies<'_>>,
    ) -> Result<(usize, usize), LearnError> {
        let truth = data.labels(k)?;
        // θ and the scores in this thread's buffers: evaluation runs every
        // learning iteration, over every example.
        let labels = with_buffer(&THETA, |theta| {
            match energies {
                Some(energies) => energies(k, theta)?,
                None => with_buffer(&SCORES, |scores| self.energies_into(data, k, theta, scores))?,
            }
            let inference = |source| LearnError::Inference { example: k, source };
            let problem = InferenceProblem::planned(&plans[k], theta).map_err(inference)?;
            let run = opts.run_options();
            // The labels the prediction gives, without its report and beliefs.
            with_thread_workspace(|ws| run_and_decode_allowed(&problem, m, &run, ws)).map_err(inference)
        })?;
        Ok(count_errors(data, k, &labels, truth))
    }

    /// The header a model file would carry.
    pub fn header(&self) -> ModelHeader {
        ModelHeader {
            format_version: MODEL_FORMAT_VERSION,
            factor_types: self
                .factor_types
                .iter()
                .zip(&self.epsilon)
                .zip(&self.models)
                .map(|((ft, &epsilon), m)| ModelTypeHeader {
                    name: ft.name.clone(),
                    dim: ft.dim,
                    classes: ft.classes,
                    epsilon,
                    kind: m.kind().to_string(),
                })
                .collect(),
        }
    }

    /// The model as bytes of the binary model file format (module docs).
    pub fn to_bytes(&self) -> Result<Vec<u8>, LearnError> {
        let params = self
            .models
            .iter()
            .zip(&self.factor_types)
            .map(|(m, ft)| m.to_bytes().map_err(|e| oracle_err(ft, e)))
            .collect::<Result<Vec<_>, _>>()?;
        let body = postcard::to_stdvec(&(self.header(), params))
            .map_err(|e| LearnError::BadFile { path: "model".into(), reason: e.to_string() })?;
        Ok(wrap_binary(MODEL_MAGIC, &body))
    }

    /// Reads a model from bytes; `source` names it in errors.
    pub fn from_bytes(bytes: &[u8], registry: &ModelRegistry, source: &Path) -> Result<Self, LearnError> {
        let body = unwrap_binary(source, bytes, MODEL_MAGIC)?;
        let (header, params): (ModelHeader, Vec<Vec<u8>>) =
            postcard::from_bytes(body).map_err(|e| LearnError::bad_file(source, undecodable_body(e)))?;
        if header.format_version != MODEL_FORMAT_VERSION {
            return Err(LearnError::bad_file(
                source,
                format!(
                    "model format version {} is not supported (this build reads {MODEL_FORMAT_VERSION})",
                    header.format_version
                ),
            ));
        }
        if params.len() != header.factor_types.len() {
            return Err(LearnError::bad_file(source, "header and parameter blocks disagree"));
        }
        let mut types = Vec::new();
        let mut epsilon = Vec::new();
        let mut models = Vec::new();
        for (h, p) in header.factor_types.into_iter().zip(params) {
            let m = registry
                .load(&h.kind, &p)
                .map_err(|e| LearnError::bad_file(source, format!("parameters of factor type `{}`: {e}", h.name)))?;
            types.push(FactorTypeInfo { name: h.name, dim: h.dim, classes: h.classes });
            epsilon.push(h.epsilon);
            models.push(m);
        }
        Self::new(types, epsilon, models).map_err(|e| LearnError::bad_file(source, e.to_string()))
    }

    /// Writes the model file atomically (the file's mode follows the umask).
    pub fn save(&self, path: &Path) -> Result<(), LearnError> {
        write_atomic(path, &self.to_bytes()?)
    }

    /// Reads a model file, loading each type's parameters through `registry`.
    pub fn load(path: &Path, registry: &ModelRegistry) -> Result<Self, LearnError> {
        let bytes = std::fs::read(path).map_err(|e| LearnError::io(path, e))?;
        Self::from_bytes(&bytes, registry, path)
    }

    /// Reads only the header of a model file (no registry needed).
    pub fn read_header(path: &Path) -> Result<ModelHeader, LearnError> {
        let bytes = std::fs::read(path).map_err(|e| LearnError::io(path, e))?;
        let body = unwrap_binary(path, &bytes, MODEL_MAGIC)?;
        let (header, _): (ModelHeader, Vec<Vec<u8>>) =
            postcard::from_bytes(body).map_err(|e| LearnError::bad_file(path, undecodable_body(e)))?;
        Ok(header)
    }

    /// A readable JSON export: the header plus each type's parameters where
    /// its class supports [`Model::to_json`].
    ///
    /// ```
    /// # use structlearn::{FactorTypeInfo, StructuredModel};
    /// # let types = vec![FactorTypeInfo { name: "unary".into(), dim: 1, classes: 2 }, FactorTypeInfo { name: "pairwise".into(), dim: 1, classes: 4 }];
    /// # let lin = |c: usize| Box::new(oracles::linear::LinearModel::zeros(1, c)) as Box<dyn oracles::Model>;
    /// # let model = StructuredModel::new(types, vec![0.1, 0.1], vec![lin(2), lin(4)]).unwrap();
    /// let json = model.to_json();
    /// println!("{}", serde_json::to_string_pretty(&json).unwrap());
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        let header = self.header();
        let types: Vec<serde_json::Value> = header
            .factor_types
            .iter()
            .zip(&self.models)
            .map(|(h, m)| {
                serde_json::json!({
                    "name": h.name, "dim": h.dim, "classes": h.classes, "epsilon": h.epsilon,
                    "kind": h.kind, "parameters": m.to_json(),
                })
            })
            .collect();
        serde_json::json!({ "format": "structlearn-model", "format_version": MODEL_FORMAT_VERSION, "factor_types": types })
    }
}

/// A per-thread scratch array ([`with_buffer`]).
pub(crate) type Buffer = std::cell::RefCell<Vec<f64>>;

thread_local! {
    /// An example's `θ` (gathered for message passing, or its energies for evaluation).
    pub(crate) static THETA: Buffer = const { Buffer::new(Vec::new()) };
    /// An example's scores of one factor type.
    pub(crate) static SCORES: Buffer = const { Buffer::new(Vec::new()) };
}

/// Calls `f` with one of this thread's buffers: examples of one size then
/// reuse it instead of allocating (and fragmenting the heap with) an array
/// of a graph's configurations each.
pub(crate) fn with_buffer<R>(key: &'static std::thread::LocalKey<Buffer>, f: impl FnOnce(&mut Vec<f64>) -> R) -> R {
    key.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => f(&mut buffer),
        // Re-entered on this thread (a rayon task stolen inside `f`): a fresh buffer.
        Err(_) => f(&mut Vec::new()),
    })
}

/// Zero messages for every example of `data` (message passing's start, docs/MATH.md §4).
pub(crate) fn zero_messages(data: &Dataset) -> Vec<Messages> {
    data.examples().iter().map(|e| Messages::zeros(e.graph())).collect()
}

/// `θ_α(y) = ε g(y)` for the regions `regions` of one factor type (`classes`
/// configurations each), row `i` of `scores` (row-major) going to the `i`-th
/// region's configurations in `theta`: the one expression every way of
/// computing energies evaluates ([`StructuredModel::energies`], the learner's
/// evaluation from its pooled scores), so they give the same bits.
pub(crate) fn spread_energies(
    graph: &RegionGraph,
    regions: impl IntoIterator<Item = usize>,
    eps: f64,
    classes: usize,
    scores: &[f64],
    theta: &mut [f64],
) {
    for (row, r) in regions.into_iter().enumerate() {
        for (th, g) in theta[graph.config_range(r)].iter_mut().zip(&scores[row * classes..(row + 1) * classes]) {
            *th = eps * g;
        }
    }
}

/// `ε` per factor type of example `k`'s *graph*, in the graph's own type order,
/// from `epsilon` given per factor type of the data set (matched by name).
pub(crate) fn graph_epsilon(data: &Dataset, k: usize, epsilon: &[f64]) -> Vec<f64> {
    let g = &data.examples()[k].graph();
    g.factor_types().iter().map(|name| data.factor_type_index(name).map_or(1.0, |t| epsilon[t])).collect()
}

/// Writes example `k`'s energies `θ = ε_t g_t` into the buffer, bit for bit
/// what [`StructuredModel::energies`] gives for the same models: a caller
/// that holds the model's scores already (the learner's pooled training
/// scores) saves scoring the example again.
pub(crate) type Energies<'e> = &'e (dyn Fn(usize, &mut Vec<f64>) -> Result<(), LearnError> + Sync);

/// One [`ProblemPlan`] per example of `data` with per-type weights `epsilon`
/// (in the data set's type order): examples on the same graph share one,
/// and each distinct graph's plan is built once, in parallel.
pub(crate) fn example_plans(data: &Dataset, epsilon: &[f64]) -> Result<Vec<ProblemPlan>, LearnError> {
    // The first example on each distinct graph, and each example's distinct graph.
    let mut first_on: Vec<usize> = Vec::new();
    let mut index: HashMap<*const RegionGraph, usize> = HashMap::new();
    let which: Vec<usize> = data
        .examples()
        .iter()
        .enumerate()
        .map(|(k, ex)| {
            *index.entry(Arc::as_ptr(ex.graph())).or_insert_with(|| {
                first_on.push(k);
                first_on.len() - 1
            })
        })
        .collect();
    let distinct: Vec<ProblemPlan> = first_on
        .par_iter()
        .map(|&k| {
            ProblemPlan::new(Arc::clone(data.examples()[k].graph()), &graph_epsilon(data, k, epsilon))
                .map_err(|source| LearnError::Inference { example: k, source })
        })
        .collect::<Result<_, _>>()?;
    Ok(which.into_iter().map(|d| distinct[d].clone()).collect())
}

pub(crate) fn oracle_err(ft: &FactorTypeInfo, source: oracles::OracleError) -> LearnError {
    LearnError::Oracle { factor_type: ft.name.clone(), source }
}

/// The error rate of `wrong` out of `total` labelled variables (0 when none).
pub(crate) fn error_rate_of(wrong: usize, total: usize) -> f64 {
    if total == 0 { 0.0 } else { wrong as f64 / total as f64 }
}

/// `(wrong, counted)` labels of example `k`'s prediction, skipping its unknown labels.
pub(crate) fn count_errors(data: &Dataset, k: usize, predicted: &[usize], truth: &[usize]) -> (usize, usize) {
    predicted
        .iter()
        .zip(truth)
        .enumerate()
        .filter(|&(i, _)| data.is_labelled(k, i))
        .fold((0, 0), |(wrong, total), (_, (a, b))| (wrong + usize::from(a != b), total + 1))
}

/// The message for a model body that passes its checksum but does not decode.
fn undecodable_body(e: postcard::Error) -> String {
    format!("the model body does not decode although its checksum matches (written by an incompatible build?): {e}")
}
