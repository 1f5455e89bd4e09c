//! Data sets and models between numpy and the library.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use factor_graph::{GridLayout, RegionGraph, RegionGraphBuilder};
use numpy::prelude::*;
use numpy::{PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use oracles::ModelRegistry;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use rayon::prelude::*;
use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock, LearnError, PredictOptions, StructuredModel};

/// A library error as the Python exception a user expects: `OSError` for
/// files that cannot be read or written, `ValueError` for everything else
/// (bad data, bad settings, a model that does not fit the data).
pub(crate) fn py_err(e: LearnError) -> PyErr {
    match e {
        LearnError::Io { .. } => PyOSError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// The model registry of the package: the built-in classes and Python models.
pub(crate) fn model_registry() -> ModelRegistry {
    let mut registry = ModelRegistry::with_builtin();
    // `python` is not a built-in kind, so registering it cannot collide.
    let _ = registry.register(crate::pyoracle::KIND, crate::pyoracle::load_model);
    registry
}

/// `_core.Dataset`: a validated [`Dataset`] (examples, labels, features per
/// factor type), shared read-only with training and prediction.
#[pyclass(module = "structlearn._core", name = "Dataset", frozen)]
pub struct PyDataset {
    pub(crate) data: Arc<Dataset>,
}

impl PyDataset {
    /// Wraps a data set.
    pub fn new(data: Dataset) -> Self {
        Self { data: Arc::new(data) }
    }
}

/// One example as given from Python, before the graph is built.
struct RawExample {
    name: String,
    cardinalities: Vec<usize>,
    grid: Option<(usize, usize)>,
    labels: Option<Vec<i64>>,
    /// Per non-unary type: `(rows, arity, variables row-major)`.
    scopes: Vec<(usize, usize, Vec<usize>)>,
    blocks: Vec<FeatureBlock>,
}

fn block_from(array: &PyReadonlyArray2<'_, f64>) -> FeatureBlock {
    let view = array.as_array();
    FeatureBlock { dim: view.ncols(), values: view.iter().copied().collect() }
}

fn example_error(k: usize, what: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("example {k}: {what}"))
}

fn read_example(k: usize, item: &Bound<'_, PyAny>, types: usize) -> PyResult<RawExample> {
    let d = item.cast::<PyDict>().map_err(|_| example_error(k, "is not a dict"))?;
    let get = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        d.get_item(key)?.ok_or_else(|| example_error(k, format!("has no `{key}`")))
    };
    let name: String = get("name")?.extract()?;
    let cardinalities: Vec<usize> = get("n_states")?.extract()?;
    let grid: Option<(usize, usize)> = get("grid")?.extract()?;
    let labels = {
        let l = get("labels")?;
        if l.is_none() { None } else { Some(l.extract::<PyReadonlyArray1<'_, i64>>()?.as_array().to_vec()) }
    };
    let features: Vec<PyReadonlyArray2<'_, f64>> = get("features")?.extract()?;
    let scope_arrays: Vec<PyReadonlyArray2<'_, i64>> = get("scopes")?.extract()?;
    if features.len() != types || scope_arrays.len() + 1 != types {
        return Err(example_error(
            k,
            format!(
                "{} feature blocks and {} scope blocks for {types} factor types (expected {types} and {})",
                features.len(),
                scope_arrays.len(),
                types - 1
            ),
        ));
    }
    let n = cardinalities.len();
    let mut scopes = Vec::with_capacity(scope_arrays.len());
    for (t, s) in scope_arrays.iter().enumerate() {
        let view = s.as_array();
        let mut vars = Vec::with_capacity(view.len());
        for &v in view.iter() {
            if v < 0 || v as usize >= n {
                return Err(example_error(k, format!("factor type {}: variable {v} is out of range 0..{n}", t + 1)));
            }
            vars.push(v as usize);
        }
        scopes.push((view.nrows(), view.ncols(), vars));
    }
    Ok(RawExample { name, cardinalities, grid, labels, scopes, blocks: features.iter().map(block_from).collect() })
}

/// The example's region graph: singletons of every variable (regions `0..n`,
/// type 0), then the regions of types 1, 2, … in the order given, each the
/// parent of its variables' singletons (`factor_graph::factors_with_singletons`'s
/// layout; for a grid, exactly `factor_graph::grid`).
fn build_graph(raw: &RawExample, names: &[String]) -> Result<RegionGraph, factor_graph::GraphError> {
    if let Some((h, w)) = raw.grid {
        let labels = raw.cardinalities.first().copied().unwrap_or(0);
        return factor_graph::grid(h, w, labels);
    }
    let n = raw.cardinalities.len();
    let mut b = RegionGraphBuilder::new(raw.cardinalities.clone())?;
    let ids = names.iter().map(|name| b.add_factor_type(name)).collect::<Result<Vec<_>, _>>()?;
    for i in 0..n {
        b.add_region(&[i], ids[0])?;
    }
    for (t, (rows, arity, vars)) in raw.scopes.iter().enumerate() {
        for r in 0..*rows {
            let scope = &vars[r * arity..(r + 1) * arity];
            let region = b.add_region(scope, ids[t + 1])?;
            for &v in scope {
                b.add_edge(region, v)?;
            }
        }
    }
    b.build()
}

#[pymethods]
impl PyDataset {
    /// `Dataset.from_examples(type_names, type_dims, examples)`: one dict per
    /// example with `name`, `n_states` (per variable), `grid` (`(H, W)` or
    /// None), `labels` (int64, −1 unknown, or None), `features` (one float64
    /// `(rows, dim)` matrix per factor type) and `scopes` (one int64
    /// `(rows, arity)` matrix per non-unary type). Graphs of equal structure
    /// are shared.
    #[staticmethod]
    fn from_examples(
        py: Python<'_>,
        type_names: Vec<String>,
        type_dims: Vec<usize>,
        examples: &Bound<'_, PyList>,
    ) -> PyResult<Self> {
        if type_names.is_empty() || type_names.len() != type_dims.len() {
            return Err(PyValueError::new_err("type_names and type_dims: one entry per factor type, at least one"));
        }
        let raws = examples
            .iter()
            .enumerate()
            .map(|(k, item)| read_example(k, &item, type_names.len()))
            .collect::<PyResult<Vec<_>>>()?;
        let types: Vec<FactorTypeInfo> =
            type_names.iter().zip(&type_dims).map(|(n, &d)| FactorTypeInfo::new(n, d)).collect();
        let built = py.detach(|| -> Result<Dataset, PyErr> {
            let mut graphs: HashMap<Vec<usize>, Arc<RegionGraph>> = HashMap::new();
            let mut examples = Vec::with_capacity(raws.len());
            let mut masks = Vec::with_capacity(raws.len());
            for (k, raw) in raws.into_iter().enumerate() {
                let mut key = raw.cardinalities.clone();
                key.push(usize::MAX);
                if let Some((h, w)) = raw.grid {
                    key.extend([h, w, usize::MAX]);
                }
                for (rows, arity, vars) in &raw.scopes {
                    key.extend([*rows, *arity]);
                    key.extend(vars);
                    key.push(usize::MAX);
                }
                let graph = match graphs.get(&key) {
                    Some(g) => g.clone(),
                    None => {
                        let g = Arc::new(build_graph(&raw, &type_names).map_err(|e| example_error(k, e))?);
                        graphs.insert(key, g.clone());
                        g
                    }
                };
                let (labels, mask) = match &raw.labels {
                    None => (None, None),
                    Some(l) => {
                        let mask: Vec<bool> = l.iter().map(|&y| y < 0).collect();
                        let labels = l.iter().map(|&y| y.max(0) as usize).collect();
                        (Some(labels), mask.iter().any(|&m| m).then_some(mask))
                    }
                };
                masks.push(mask);
                examples.push(Example::new(raw.name, graph, labels, raw.blocks));
            }
            let mut data = Dataset::new(types, examples).map_err(py_err)?;
            for (k, mask) in masks.into_iter().enumerate() {
                if mask.is_some() {
                    data.set_ignored(k, mask).map_err(py_err)?;
                }
            }
            Ok(data)
        })?;
        Ok(Self::new(built))
    }

    /// Reads a data set file (binary `.sld` or JSON `.json`).
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        py.detach(|| Dataset::load(&path)).map(Self::new).map_err(py_err)
    }

    /// Writes the data set file (binary unless the name ends in `.json`), atomically.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| self.data.save(&path)).map_err(py_err)
    }

    /// Number of examples.
    fn __len__(&self) -> usize {
        self.data.len()
    }

    /// The factor types as `(name, dim, classes)`.
    fn factor_types(&self) -> Vec<(String, usize, usize)> {
        self.data.factor_types().iter().map(|t| (t.name.clone(), t.dim, t.classes)).collect()
    }

    /// The examples as dicts of arrays (the layout `from_examples` takes;
    /// `grid` is `(H, W)` when the graph is laid out as a 4-connected grid).
    fn to_examples<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let data = &self.data;
        let types = data.factor_types();
        (0..data.len())
            .map(|k| {
                let ex = &data.examples()[k];
                let g = ex.graph();
                let d = PyDict::new(py);
                d.set_item("name", ex.name())?;
                d.set_item("n_states", g.cardinalities().to_vec())?;
                d.set_item("grid", GridLayout::of(g).map(|l| (l.height, l.width)))?;
                let labels: Option<Vec<i64>> = ex.labels().map(|l| {
                    l.iter().enumerate().map(|(i, &y)| if data.is_labelled(k, i) { y as i64 } else { -1 }).collect()
                });
                d.set_item("labels", labels.map(|l| PyArray1::from_vec(py, l)))?;
                let mut features = Vec::new();
                let mut scopes = Vec::new();
                for (t, ft) in types.iter().enumerate() {
                    let rows = data.type_rows(t, k..k + 1);
                    features.push(PyArray1::from_slice(py, data.features(k, t)).reshape([rows, ft.dim])?);
                    if t > 0 {
                        let regions: Vec<usize> = data.regions_of_type(k, t).collect();
                        let arity = regions.first().map_or(2, |&r| g.region_variables(r).len());
                        let vars: Vec<i64> =
                            regions.iter().flat_map(|&r| g.region_variables(r).iter().map(|&v| v as i64)).collect();
                        if vars.len() != regions.len() * arity {
                            return Err(example_error(k, format!("factor type `{}` mixes arities", ft.name)));
                        }
                        scopes.push(PyArray1::from_vec(py, vars).reshape([regions.len(), arity])?);
                    }
                }
                d.set_item("features", features)?;
                d.set_item("scopes", scopes)?;
                Ok(d)
            })
            .collect()
    }
}

/// One example's prediction: labels and, if asked, the singleton beliefs.
type PredictedExample<'py> = (Bound<'py, PyArray1<i64>>, Option<Bound<'py, PyArray2<f64>>>);

/// `_core.Model`: a trained [`StructuredModel`].
#[pyclass(module = "structlearn._core", name = "Model", frozen)]
pub struct PyModel {
    pub(crate) model: Arc<StructuredModel>,
}

impl PyModel {
    /// Wraps a model.
    pub fn new(model: StructuredModel) -> Self {
        Self { model: Arc::new(model) }
    }
}

fn pool(n_jobs: Option<usize>) -> PyResult<Option<rayon::ThreadPool>> {
    n_jobs
        .map(|n| {
            let n = structlearn::threads::checked_thread_count(n).map_err(PyValueError::new_err)?;
            rayon::ThreadPoolBuilder::new().num_threads(n).build().map_err(|e| PyOSError::new_err(e.to_string()))
        })
        .transpose()
}

/// Runs `f` on the thread pool of `n_jobs` threads (the global pool when `None`).
pub(crate) fn in_pool<T: Send>(pool: Option<&rayon::ThreadPool>, f: impl FnOnce() -> T + Send) -> T {
    match pool {
        Some(p) => p.install(f),
        None => f(),
    }
}

pub(crate) fn thread_pool(n_jobs: Option<usize>) -> PyResult<Option<rayon::ThreadPool>> {
    pool(n_jobs)
}

#[pymethods]
impl PyModel {
    /// Reads a model from the bytes of a model file.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, bytes: Vec<u8>) -> PyResult<Self> {
        let registry = model_registry();
        let _ = py;
        StructuredModel::from_bytes(&bytes, &registry, std::path::Path::new("model bytes"))
            .map(Self::new)
            .map_err(py_err)
    }

    /// The bytes of the model file (`.slm`): what `structlearn train` writes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.model.to_bytes().map_err(py_err)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Reads a model file.
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        StructuredModel::load(&path, &model_registry()).map(Self::new).map_err(py_err)
    }

    /// Writes the model file atomically.
    fn save(&self, path: PathBuf) -> PyResult<()> {
        self.model.save(&path).map_err(py_err)
    }

    /// The factor types as `(name, dim, classes)`.
    fn factor_types(&self) -> Vec<(String, usize, usize)> {
        self.model.factor_types().iter().map(|t| (t.name.clone(), t.dim, t.classes)).collect()
    }

    /// The entropy weight of every factor type.
    fn epsilon(&self) -> Vec<f64> {
        self.model.epsilon().to_vec()
    }

    /// The oracle kind of every factor type's model.
    fn kinds(&self) -> Vec<String> {
        self.model.models().iter().map(|m| m.kind().to_string()).collect()
    }

    /// Errors (`ValueError`) unless the model's factor types fit the data set's.
    fn check_dataset(&self, data: &PyDataset) -> PyResult<()> {
        self.model.check_dataset(&data.data).map_err(py_err)
    }

    /// Predicts every example: a list of `(labels, beliefs)` with `labels`
    /// int64 `(n,)` and, if `beliefs`, the singleton beliefs float64
    /// `(n, max_states)` (ε-smoothed LP pseudo-marginals; zero-padded where a
    /// variable has fewer states), else None. With `anneal_eps_min` the
    /// labels are the ε → 0 labellings
    /// (`StructuredModel::predict_example_annealed`, `iterations` per stage)
    /// and the beliefs the last stage's.
    #[pyo3(signature = (data, iterations, tolerance, beliefs, n_jobs=None, anneal_eps_min=None))]
    #[allow(clippy::too_many_arguments)]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        data: &PyDataset,
        iterations: usize,
        tolerance: Option<f64>,
        beliefs: bool,
        n_jobs: Option<usize>,
        anneal_eps_min: Option<f64>,
    ) -> PyResult<Vec<PredictedExample<'py>>> {
        let pool = pool(n_jobs)?;
        let opts = PredictOptions { iterations, tolerance };
        let model = &self.model;
        let data = &data.data;
        model.check_dataset(data).map_err(py_err)?;
        let predict = || match anneal_eps_min {
            Some(e) => (0..data.len())
                .into_par_iter()
                .map(|k| model.predict_example_annealed(data, k, &opts, e).map(|(p, _)| p))
                .collect(),
            None => model.predict(data, &opts),
        };
        let predictions = crate::train::interruptible(py, || in_pool(pool.as_ref(), predict))?.map_err(py_err)?;
        predictions
            .iter()
            .zip(data.examples())
            .map(|(p, ex)| {
                let labels = PyArray1::from_vec(py, p.labels.iter().map(|&y| y as i64).collect());
                let b = if beliefs {
                    let g = ex.graph();
                    let width = g.cardinalities().iter().copied().max().unwrap_or(0);
                    let mut out = vec![0.0; g.num_variables() * width];
                    for v in 0..g.num_variables() {
                        if let Some(r) = g.singleton(v) {
                            let b = &p.beliefs[g.config_range(r)];
                            out[v * width..v * width + b.len()].copy_from_slice(b);
                        }
                    }
                    Some(PyArray1::from_vec(py, out).reshape([g.num_variables(), width])?)
                } else {
                    None
                };
                Ok((labels, b))
            })
            .collect()
    }

    /// The model as JSON text (header and, for classes that have one, parameters).
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.model.to_json()).map_err(|e| PyValueError::new_err(e.to_string()))
    }
}

/// The oracle kinds the package can build by name, with their default settings as JSON.
#[pyfunction]
pub fn oracle_kinds() -> Vec<(String, String)> {
    let registry = structlearn::OracleRegistry::builtin();
    registry
        .kinds()
        .map(|k| {
            let params = registry.hyper_parameters(k).unwrap_or_default();
            let text = params.iter().map(|p| format!("{}={}", p.name, p.default_text())).collect::<Vec<_>>().join(", ");
            (k.to_string(), text)
        })
        .collect()
}

/// `structlearn::TrainConfig::default()` as JSON text: the estimators'
/// defaults are read from it, so the package and `structlearn train` cannot
/// drift apart.
#[pyfunction]
pub fn default_train_config() -> PyResult<String> {
    serde_json::to_string(&structlearn::TrainConfig::default()).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The `TrainConfig` settings learner `learner` does not read
/// (`structlearn::LearnerKind::ignored_settings`), which training refuses
/// when they differ from their defaults.
#[pyfunction]
pub fn ignored_settings(learner: &str) -> PyResult<Vec<&'static str>> {
    let kind: structlearn::LearnerKind =
        learner.parse().map_err(|e: structlearn::LearnError| PyValueError::new_err(format!("learner: {e}")))?;
    Ok(kind.ignored_settings().iter().map(|(name, _)| *name).collect())
}

/// `infer_uai(path, eps, iterations, tolerance, evidence, anneal, eps_min,
/// decode_restarts, max_backtracks, polish, label_order)`: the pipeline of `structlearn
/// infer` (`structlearn::infer::infer_region_model`) on a UAI MARKOV or BAYES
/// model file, observed variables of a `.evid` file clamped; returns a dict
/// with `dual_value`, `max_violation`, `iterations`, `converged` (of the last
/// ε stage), `labels` (a labelling the model allows, by `decode_feasible`, or
/// `None` if the search found none), `score` (its `θ(y)`), `bound` (the
/// lowest ε = 0 dual bound of the stages), `gap`, `beliefs` (one array per
/// variable: the last stage's ε-smoothed LP pseudo-marginals), and with
/// `anneal` the per-stage figures (`anneal`) and the chosen stage
/// (`anneal_best_stage`). `label_order` is `"singleton"`, `"regions"` or `"both"`
/// (`smoothed_inference::decoding::LabelOrder`; `None`: `InferOptions`'s
/// default). Bad settings are `ValueError`s naming the argument.
#[pyfunction]
#[pyo3(signature = (
    path, eps=1.0, iterations=1000, tolerance=Some(1e-6), evidence=None, anneal=false, eps_min=None,
    decode_restarts=0, max_backtracks=100_000, polish=2000, label_order=None
))]
#[allow(clippy::too_many_arguments)]
pub fn infer_uai<'py>(
    py: Python<'py>,
    path: PathBuf,
    eps: f64,
    iterations: i64,
    tolerance: Option<f64>,
    evidence: Option<PathBuf>,
    anneal: bool,
    eps_min: Option<f64>,
    decode_restarts: i64,
    max_backtracks: i64,
    polish: i64,
    label_order: Option<String>,
) -> PyResult<Bound<'py, PyDict>> {
    use structlearn::infer::{InferError, InferOptions, infer_region_model};
    let count = |name: &str, v: i64| {
        usize::try_from(v).map_err(|_| PyValueError::new_err(format!("{name}: {v} is not a count (an integer >= 0)")))
    };
    let options = InferOptions {
        eps,
        iterations: count("iterations", iterations)?,
        tolerance,
        polish: count("polish", polish)?,
        anneal,
        eps_min,
        max_backtracks: count("max_backtracks", max_backtracks)?,
        decode_restarts: count("decode_restarts", decode_restarts)?,
        label_order: match label_order {
            Some(name) => name.parse().map_err(|e: String| PyValueError::new_err(format!("label_order: {e}")))?,
            None => InferOptions::default().label_order,
        },
    };
    // Settings first (named as the keyword arguments are), before any file is read.
    options.validate().map_err(|e| PyValueError::new_err(e.to_string()))?;
    let err = |e: &dyn std::fmt::Display| PyValueError::new_err(format!("{}: {e}", path.display()));
    let uai = factor_graph::UaiModel::read(&path).map_err(|e| err(&e))?;
    let mut m = uai.to_region_graph().map_err(|e| err(&e))?;
    // Observed variables clamped (θ = −∞ on their other labels), as `structlearn infer --evidence`.
    if let Some(e) = &evidence {
        let observed =
            factor_graph::UaiEvidence::read(e, &uai.cardinalities).map_err(|x| PyValueError::new_err(x.to_string()))?;
        observed.clamp(&mut m);
    }
    m.check_feasible(&uai).map_err(|e| match &evidence {
        Some(ev) => PyValueError::new_err(format!("{}: with the evidence of {}: {e}", path.display(), ev.display())),
        None => err(&e),
    })?;
    let outcome = py.detach(|| infer_region_model(&m, &options, &mut |_| {})).map_err(|e| match e {
        InferError::Infeasible { .. } if evidence.is_some() => err(&format!("with this evidence: {e}")),
        e => err(&e),
    })?;
    let g = &m.graph;
    let last = outcome.last();
    let chosen = outcome.chosen().as_ref().ok();
    let labelling_score = chosen.map(|d| d.score + m.constant);
    let d = PyDict::new(py);
    d.set_item("dual_value", last.report.dual_value + m.constant)?;
    d.set_item("max_violation", last.report.max_violation)?;
    d.set_item("iterations", last.report.iterations)?;
    d.set_item("converged", tolerance.map(|_| last.report.converged))?;
    d.set_item("labels", chosen.map(|c| PyArray1::from_vec(py, c.labels.iter().map(|&v| v as i64).collect())))?;
    d.set_item("score", labelling_score)?;
    d.set_item("bound", outcome.bound)?;
    d.set_item("gap", labelling_score.map(|s| outcome.bound - s))?;
    let per_variable: Vec<Bound<'py, PyArray1<f64>>> = (0..g.num_variables())
        .map(|v| PyArray1::from_slice(py, g.singleton(v).map_or(&[][..], |r| &outcome.beliefs[g.config_range(r)])))
        .collect();
    d.set_item("beliefs", per_variable)?;
    if anneal {
        let stages = PyList::empty(py);
        for s in &outcome.stages {
            let stage = PyDict::new(py);
            stage.set_item("eps", s.eps)?;
            stage.set_item("iterations", s.report.iterations)?;
            stage.set_item("dual_value", s.report.dual_value + m.constant)?;
            stage.set_item("max_violation", s.report.max_violation)?;
            stage.set_item("bound", s.bound)?;
            stage.set_item("score", s.decoded.as_ref().ok().map(|d| d.score + m.constant))?;
            stages.append(stage)?;
        }
        d.set_item("anneal", stages)?;
        d.set_item("anneal_best_stage", outcome.best)?;
    }
    Ok(d)
}
