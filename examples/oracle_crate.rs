//! Write an oracle crate: a function class of your own, usable by Algorithm 1,
//! prediction and model files, without editing this project. A crate of your
//! own needs only
//!
//! ```toml
//! [dependencies]
//! oracle_contract = { package = "structlearn-oracle-contract", version = "0.1" }
//! serde = { version = "1", features = ["derive"] }
//! ```
//!
//! — the contract alone, not the built-in classes (plus `structlearn` where
//! you train and register). The class here, `Histogram`, scores
//! `g(φ, y) = table[bin(φ_j)][y]`: a piecewise-constant function of one
//! feature column over equal-width bins, each bin's class scores fitted by the
//! crate's L-BFGS on the biased logistic loss the oracle is handed
//! (docs/ORACLES.md has the contract).
//!
//! The crate's one entry point for programs that use it is [`register`]: it
//! adds the class to an [`OracleRegistry`] (so that configuration files,
//! every learner that can use it and the Python package choose it by name,
//! `{"kind": "histogram", "bins": 8}`) and its model loader to a
//! [`ModelRegistry`] (so that model files holding it load).
//!
//! Run with `cargo run --release --example oracle_crate`. The end-to-end test
//! `tests/plugin_oracle.rs` trains, saves and reloads this same class.

use oracle_contract::optim::{LbfgsOptions, lbfgs_minimize};
use oracle_contract::{
    Features, FitContext, Model, Oracle, OracleError, Problem, check_model_shape, check_score_buffer, decode,
    downcast_warm, row_loss,
};
use serde::{Deserialize, Serialize};
use structlearn::ModelRegistry;
use structlearn::oracle_config::RunConfig;
use structlearn::{LearnError, LearnerKind, OracleRegistry, PredictOptions, StructuredModel, build_learner_with};

/// The registry key of the class (stored in model files).
pub const KIND: &str = "histogram";

/// The oracle: its hyper-parameters (settings of `{"kind": "histogram", ...}`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistogramOracle {
    /// The feature column.
    pub column: usize,
    /// Equal-width bins between the column's smallest and largest value.
    pub bins: usize,
}

impl Default for HistogramOracle {
    fn default() -> Self {
        Self { column: 0, bins: 10 }
    }
}

/// Registers the class: its oracle by name (with what its settings mean) and
/// its model loader.
pub fn register(oracles: &mut OracleRegistry, models: &mut ModelRegistry) -> Result<(), LearnError> {
    oracles.register::<HistogramOracle>(
        KIND,
        "a piecewise-constant function of one feature column over equal-width bins",
        &[("column", "the feature column, < dim"), ("bins", "equal-width bins between its extremes, ≥ 1")],
    )?;
    models.register(KIND, load).map_err(|e| LearnError::Config(e.to_string()))
}

/// A fitted function.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HistogramModel {
    dim: usize,
    classes: usize,
    column: usize,
    lo: f64,
    hi: f64,
    /// `bins × classes` scores.
    table: Vec<f64>,
}

impl HistogramModel {
    fn bin(&self, x: f64) -> usize {
        let bins = self.table.len() / self.classes;
        let t = if self.hi > self.lo { (x - self.lo) / (self.hi - self.lo) } else { 0.0 };
        ((t * bins as f64).floor().max(0.0) as usize).min(bins - 1)
    }
}

impl Oracle for HistogramOracle {
    fn kind(&self) -> &str {
        KIND
    }

    /// Hyper-parameters that can be checked without data; called before training.
    fn validate(&self) -> Result<(), OracleError> {
        if self.bins == 0 {
            return Err(OracleError::InvalidHyperParameter { name: "bins", reason: "must be at least 1".into() });
        }
        Ok(())
    }

    /// Minimise `Σ_k w_k [log Σ_y exp(g(φ_k, y) + b_k(y)) − g(φ_k, y_k) − b_k(y_k)]`,
    /// starting from `warm` (the previous fit of this factor type) if given.
    fn fit(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        _: FitContext,
    ) -> Result<Box<dyn Model>, OracleError> {
        let (c, f) = (problem.classes(), problem.features());
        if self.column >= f.dim() {
            return Err(OracleError::InvalidHyperParameter {
                name: "column",
                reason: format!("the features have {} columns", f.dim()),
            });
        }
        let mut model = match downcast_warm::<HistogramModel>(warm, KIND)? {
            Some(m) => m.clone(),
            None => {
                let column = (0..f.rows()).map(|k| f.row(k)[self.column]);
                let lo = column.clone().fold(f64::INFINITY, f64::min);
                let hi = column.fold(f64::NEG_INFINITY, f64::max);
                HistogramModel {
                    dim: f.dim(),
                    classes: c,
                    column: self.column,
                    lo,
                    hi,
                    table: vec![0.0; self.bins * c],
                }
            }
        };
        // A warm start keeps its own bins.
        let mut rows_of = vec![Vec::new(); model.table.len() / c];
        for k in 0..f.rows() {
            rows_of[model.bin(f.row(k)[self.column])].push(k);
        }
        let (mut grad, mut bias) = (vec![0.0; c], vec![0.0; c]);
        for (b, rows) in rows_of.iter().enumerate() {
            let scores = &mut model.table[b * c..(b + 1) * c];
            lbfgs_minimize(
                |s, g| {
                    g.fill(0.0);
                    let mut loss = 0.0;
                    for &k in rows {
                        // (Algorithm 1 may compute biases row by row: `bias` is the scratch for that.)
                        let bk = problem.bias_row(k, &mut bias);
                        loss += row_loss(s, bk, problem.labels()[k], problem.weight(k), Some(&mut grad));
                        g.iter_mut().zip(&grad).for_each(|(a, b)| *a += b);
                    }
                    loss
                },
                scores,
                &LbfgsOptions::default(),
            )?;
        }
        Ok(Box::new(model))
    }
}

impl Model for HistogramModel {
    // `kind`, `to_bytes` (the serde form, postcard), `clone_model`, `as_any`.
    oracle_contract::impl_model_plumbing!(KIND);
    fn dim(&self) -> usize {
        self.dim
    }
    fn classes(&self) -> usize {
        self.classes
    }
    /// Scores into a caller-owned `rows × classes` buffer.
    fn score(&self, features: Features<'_>, out: &mut [f64]) -> Result<(), OracleError> {
        check_model_shape(self, features.dim(), self.classes)?;
        check_score_buffer(features, self.classes, out)?;
        for (k, o) in out.chunks_mut(self.classes).enumerate() {
            let b = self.bin(features.row(k)[self.column]);
            o.copy_from_slice(&self.table[b * self.classes..(b + 1) * self.classes]);
        }
        Ok(())
    }
}

/// Reads a model back from `to_bytes`; registered under [`KIND`].
pub fn load(bytes: &[u8]) -> Result<Box<dyn Model>, OracleError> {
    Ok(Box::new(decode::<HistogramModel>(KIND, bytes)?))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Small denoising images: unary features [noisy value, 1], pair features [disagreement, 1].
    let cfg = datasets::denoising::DenoisingConfig { height: 30, width: 30, train: 6, test: 4, ..Default::default() };
    let data = datasets::denoising::generate(&cfg)?;
    let (mut oracles, mut models) = (OracleRegistry::with_builtin(), ModelRegistry::with_builtin());
    register(&mut oracles, &mut models)?;
    // The class is now chosen by name, exactly as the built-ins are (a file for `--config` looks the same).
    let config = RunConfig::from_json(&serde_json::json!({
        "train": {"learning_iterations": 6},
        "oracles": {"unary": {"kind": "histogram", "bins": 10}, "pairwise": {"kind": "linear"}}
    }))?;
    let mut learner =
        build_learner_with(LearnerKind::Algorithm1, &data.train, &config.oracles, config.train, &oracles)?;
    learner.set_validation(&data.test);
    let outcome = learner.train()?;
    let last = outcome.history.last().ok_or("no history")?;
    println!("histogram unary + linear pairwise: test error {:.4}", last.validation_error.unwrap_or(f64::NAN));

    // Model files name the kind; loading needs a registry that knows it.
    let path = std::env::temp_dir().join("structlearn-histogram-example.slm");
    outcome.model.save(&path)?;
    match StructuredModel::load(&path, &ModelRegistry::with_builtin()) {
        Err(e) => println!("without the loader: {e}"),
        Ok(_) => return Err("the built-in registry loaded an unknown kind".into()),
    }
    let loaded = StructuredModel::load(&path, &models)?;
    let opts = PredictOptions::default();
    assert_eq!(loaded.predict(&data.test, &opts)?[0].labels, outcome.model.predict(&data.test, &opts)?[0].labels);
    println!("with the loader registered: reloaded {} and predicted the same labels", path.display());
    Ok(())
}
