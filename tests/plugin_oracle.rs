//! A function class written outside `crates/oracles` plugs into training,
//! prediction and model files through the public contract alone (issue 3).
//!
//! `HistogramOracle` scores `g(φ, y) = table[bin(φ_j)][y]`: a piecewise-constant
//! function of one feature column. Each bin's class scores are fitted by the
//! crate's L-BFGS on the biased logistic loss of the rows falling in it.

use std::any::Any;
use std::sync::Arc;

use factor_graph::{GridLayout, grid};
use oracles::optim::{LbfgsOptions, lbfgs_minimize};
use oracles::{
    Features, FitContext, Model, ModelRegistry, Oracle, OracleError, Problem, check_model_shape, check_score_buffer,
    decode, downcast_warm, encode, row_loss,
};
use serde::{Deserialize, Serialize};
use structlearn::{
    Dataset, Evaluate, Example, FactorTypeInfo, FeatureBlock, PredictOptions, StructuredModel, TrainConfig, Trainer,
};

const KIND: &str = "histogram";

#[derive(Debug, Clone, Serialize, Deserialize)]
struct HistogramOracle {
    column: usize,
    bins: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct HistogramModel {
    dim: usize,
    classes: usize,
    column: usize,
    lo: f64,
    hi: f64,
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

    fn validate(&self) -> Result<(), OracleError> {
        if self.bins == 0 {
            return Err(OracleError::InvalidHyperParameter { name: "bins", reason: "must be at least 1".into() });
        }
        Ok(())
    }

    fn fit(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        _ctx: FitContext,
    ) -> Result<Box<dyn Model>, OracleError> {
        let (c, f) = (problem.classes(), problem.features());
        if self.column >= f.dim() {
            return Err(OracleError::InvalidHyperParameter {
                name: "column",
                reason: format!("data has {} columns", f.dim()),
            });
        }
        let mut model = match downcast_warm::<HistogramModel>(warm, KIND)? {
            Some(m) => m.clone(),
            None => {
                let col = (0..f.rows()).map(|k| f.row(k)[self.column]);
                let lo = col.clone().fold(f64::INFINITY, f64::min);
                let hi = col.fold(f64::NEG_INFINITY, f64::max);
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
        let bins = model.table.len() / c;
        let mut rows_of = vec![Vec::new(); bins];
        for k in 0..f.rows() {
            rows_of[model.bin(f.row(k)[self.column])].push(k);
        }
        let mut grad = vec![0.0; c];
        for (b, rows) in rows_of.iter().enumerate() {
            let scores = &mut model.table[b * c..(b + 1) * c];
            lbfgs_minimize(
                |s, g| {
                    g.fill(0.0);
                    let mut loss = 0.0;
                    for &k in rows {
                        loss +=
                            row_loss(s, problem.bias_row(k), problem.labels()[k], problem.weight(k), Some(&mut grad));
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
    fn kind(&self) -> &str {
        KIND
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn classes(&self) -> usize {
        self.classes
    }
    fn score(&self, features: Features<'_>, out: &mut [f64]) -> Result<(), OracleError> {
        check_model_shape(self, features.dim(), self.classes)?;
        check_score_buffer(features, self.classes, out)?;
        for (k, o) in out.chunks_mut(self.classes).enumerate() {
            let b = self.bin(features.row(k)[self.column]);
            o.copy_from_slice(&self.table[b * self.classes..(b + 1) * self.classes]);
        }
        Ok(())
    }
    fn to_bytes(&self) -> Result<Vec<u8>, OracleError> {
        encode(KIND, self)
    }
    fn clone_model(&self) -> Box<dyn Model> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn load(bytes: &[u8]) -> Result<Box<dyn Model>, OracleError> {
    Ok(Box::new(decode::<HistogramModel>(KIND, bytes)?))
}

/// Binary blobs on a grid with the paper's noisy unary feature and an
/// informative pair feature.
fn data(seed: u64, count: usize) -> Dataset {
    let (h, w) = (10, 10);
    let graph = Arc::new(grid(h, w, 2).unwrap());
    let layout = GridLayout { height: h, width: w };
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut uniform = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let examples = (0..count)
        .map(|k| {
            let (cr, cc, rad) = (uniform() * 10.0, uniform() * 10.0, 2.0 + uniform() * 3.0);
            let labels: Vec<usize> = (0..h * w)
                .map(|i| usize::from((((i / w) as f64 - cr).powi(2) + ((i % w) as f64 - cc).powi(2)).sqrt() < rad))
                .collect();
            let unary: Vec<f64> = labels
                .iter()
                .flat_map(|&y| [if y == 0 { 0.9 * uniform() } else { 0.1 + 0.9 * uniform() }, 1.0])
                .collect();
            let pair = (0..layout.num_pairs()).flat_map(|p| {
                let (i, j) = layout.pair_pixels(p);
                [if labels[i] == labels[j] { 0.8 * uniform() } else { 0.2 + 0.8 * uniform() }, 1.0]
            });
            let pair: Vec<f64> = pair.collect();
            Example {
                name: format!("blob{k}"),
                graph: graph.clone(),
                labels: Some(labels.clone()),
                features: vec![FeatureBlock { dim: 2, values: unary }, FeatureBlock { dim: 2, values: pair }],
            }
        })
        .collect();
    Dataset::new(vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 2)], examples).unwrap()
}

#[test]
fn an_oracle_from_another_crate_trains_predicts_and_round_trips() {
    let train = data(1, 6);
    let oracles: Vec<(String, Box<dyn Oracle>)> = vec![
        ("unary".into(), Box::new(HistogramOracle { column: 0, bins: 8 })),
        ("pairwise".into(), Box::new(HistogramOracle { column: 0, bins: 8 })),
    ];
    let config = TrainConfig { learning_iterations: 8, evaluate: Evaluate::EveryIteration, ..TrainConfig::default() };
    let mut trainer = Trainer::new(&train, oracles, config).unwrap();
    let r0 = trainer.objective().unwrap();
    let outcome = trainer.train().unwrap();
    let last = outcome.history.last().unwrap();
    assert!(last.objective < 0.75 * r0, "R {r0} -> {}", last.objective);
    let errors: Vec<f64> = outcome.history.iter().filter_map(|r| r.train_error).collect();
    assert!(errors.last() < errors.first(), "train error did not fall: {errors:?}");
    assert!(outcome.history.windows(2).all(|w| w[1].objective <= w[0].objective + 1e-9), "R rose");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("histogram.slm");
    outcome.model.save(&path).unwrap();
    // The built-in registry does not know the class: a typed error names it.
    let err = StructuredModel::load(&path, &ModelRegistry::with_builtin()).unwrap_err();
    assert!(err.to_string().contains("histogram"), "{err}");
    let mut registry = ModelRegistry::with_builtin();
    registry.register(KIND, load).unwrap();
    assert!(registry.register(KIND, load).is_err());
    let loaded = StructuredModel::load(&path, &registry).unwrap();
    let test = data(2, 3);
    let opts = PredictOptions::default();
    let (a, b) = (outcome.model.predict(&test, &opts).unwrap(), loaded.predict(&test, &opts).unwrap());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.labels, y.labels);
        assert_eq!(x.beliefs, y.beliefs);
    }
}

#[test]
fn invalid_plugin_hyper_parameters_are_rejected_before_training() {
    let train = data(3, 2);
    let oracles: Vec<(String, Box<dyn Oracle>)> = vec![
        ("unary".into(), Box::new(HistogramOracle { column: 0, bins: 0 })),
        ("pairwise".into(), Box::new(HistogramOracle { column: 0, bins: 4 })),
    ];
    let err = Trainer::new(&train, oracles, TrainConfig::default()).err().unwrap();
    assert!(err.to_string().contains("bins"), "{err}");
}
