//! The synthetic constrained-output data of Punyakanok, Roth, Yih & Zimak
//! (IJCAI 2005, §5.1; docs/MATH.md §6.5).
//!
//! An example is `c` points `x_i ∈ R^d` with binary labels
//! `y = argmax_{y ∈ C} Σ_i (2y_i − 1) f_i(x_i)`, `f_i(x_i) = w_i·x_i + b_i`,
//! where the constraint set `C` holds half of the `2^c` labelings, chosen at
//! random. The local decisions `g_i(x) = [f_i(x_i) > 0]` agree with `y`
//! exactly when `g(x) ∈ C`; an example is **hard** when they disagree. Each
//! example is hard with probability `κ` (`kappa`), by rejection sampling of
//! `x`: `κ = 0` makes the local problems linearly separable, `κ = 1` makes
//! every example's label differ from the local decisions.
//!
//! Draws: `w_i, x_i ~ N(0, I_d)`, `b_i ~ N(0, 1/4)`; `C` is a uniformly random
//! half of the labelings. The hypothesis and `C` come from stream `2·2³²` of a
//! ChaCha8 generator seeded with `seed`; training example `k` from stream `k`
//! and test example `k` from stream `2³² + k`, so the test set does not depend
//! on the number of training examples and the first `n` training examples are
//! the same for every larger training set.
//!
//! As a data set: one region graph with `c` binary singletons (factor type
//! `unary`) and one region over all `c` variables (type `constraint`, the
//! parent of every singleton). Unary features are laid out in blocks so that
//! one shared linear function is `c` separate local classifiers: row `i` is
//! `[0…0, x_i, 1, 0…0]` with `(x_i, 1)` in block `i` (dimension `c·(d+1)`).
//! The constraint region has the single feature `[1]`; its function is the
//! fixed table [`PunyakanokData::constraint_oracle`] (`−∞` off `C`).
//!
//! ```
//! use datasets::punyakanok::{PunyakanokConfig, generate};
//! let data = generate(&PunyakanokConfig { train: 20, test: 5, kappa: 1.0, ..Default::default() }).unwrap();
//! assert_eq!(data.allowed.iter().filter(|&&a| a).count(), 16);
//! // κ = 1: every training label differs from the local decisions.
//! assert!(data.train_hard.iter().all(|&h| h));
//! ```

use std::sync::Arc;

use factor_graph::{RegionGraph, Scope, factors_with_singletons};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};

use crate::DatasetError;

/// Most rejected draws of `x` per example before giving up.
pub const MAX_ATTEMPTS: usize = 100_000;

/// Settings of the generator; [`Default`]: `c = 5`, `d = 10`, `κ = 0`, 100
/// training and 1000 test examples, seed 0.
///
/// ```
/// let cfg = datasets::punyakanok::PunyakanokConfig { kappa: 0.1, ..Default::default() };
/// assert_eq!((cfg.outputs, cfg.dim), (5, 10));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PunyakanokConfig {
    /// Number of binary outputs `c` (2 ≤ c ≤ 16).
    pub outputs: usize,
    /// Dimension `d` of each `x_i` (≥ 1).
    pub dim: usize,
    /// Probability `κ ∈ [0, 1]` that an example is hard.
    pub kappa: f64,
    /// Training examples.
    pub train: usize,
    /// Test examples.
    pub test: usize,
    /// Seed of every random choice.
    pub seed: u64,
}

impl Default for PunyakanokConfig {
    fn default() -> Self {
        Self { outputs: 5, dim: 10, kappa: 0.0, train: 100, test: 1000, seed: 0 }
    }
}

/// Generated data and the hidden truth.
///
/// ```
/// use datasets::punyakanok::{PunyakanokConfig, generate};
/// let d = generate(&PunyakanokConfig { train: 3, test: 2, ..Default::default() }).unwrap();
/// assert_eq!(d.forbidden().len(), 16);
/// assert_eq!(d.constraint_oracle()["kind"], "fixed");
/// ```
#[derive(Debug, Clone)]
pub struct PunyakanokData {
    /// Training set (factor types `unary`, `constraint`).
    pub train: Dataset,
    /// Test set.
    pub test: Dataset,
    /// `allowed[l]`: labeling `l` (mixed radix, output 0 most significant) is in `C`.
    pub allowed: Vec<bool>,
    /// Per training example: whether it is hard (`g(x) ∉ C`).
    pub train_hard: Vec<bool>,
    /// The hypothesis `(w_i, b_i)` per output.
    pub hypothesis: Vec<(Vec<f64>, f64)>,
}

impl PunyakanokData {
    /// The labelings `C` forbids, as indices of the constraint region's configurations.
    pub fn forbidden(&self) -> Vec<usize> {
        (0..self.allowed.len()).filter(|&l| !self.allowed[l]).collect()
    }

    /// The oracle specification of the constraint type: a fixed table, `0`
    /// on `C` and `−∞` elsewhere.
    pub fn constraint_oracle(&self) -> serde_json::Value {
        serde_json::json!({ "kind": "fixed", "table": vec![0.0; self.allowed.len()], "forbidden": self.forbidden() })
    }
}

/// The factor types: `unary` (dimension `c·(d+1)`) and `constraint` (dimension 1).
///
/// ```
/// let t = datasets::punyakanok::factor_types(&Default::default());
/// assert_eq!((t[0].dim, t[1].dim), (55, 1));
/// ```
pub fn factor_types(cfg: &PunyakanokConfig) -> Vec<FactorTypeInfo> {
    vec![FactorTypeInfo::new("unary", cfg.outputs * (cfg.dim + 1)), FactorTypeInfo::new("constraint", 1)]
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    // Box–Muller; 1 − u ∈ (0, 1] keeps the logarithm finite.
    let u: f64 = rng.random();
    let v: f64 = rng.random();
    (-2.0 * (1.0 - u).ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

fn stream(seed: u64, id: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(id);
    rng
}

/// Generates the data (module docs). The same config always gives the same data.
///
/// ```
/// use datasets::punyakanok::{PunyakanokConfig, generate, labeling_index};
/// let d = generate(&PunyakanokConfig { train: 10, test: 2, ..Default::default() }).unwrap();
/// let y = d.train.examples()[0].labels().unwrap();
/// assert!(d.allowed[labeling_index(y)]);
/// ```
pub fn generate(cfg: &PunyakanokConfig) -> Result<PunyakanokData, DatasetError> {
    if !(2..=16).contains(&cfg.outputs) {
        return Err(DatasetError::config("outputs", format!("{} outputs; use 2 to 16", cfg.outputs)));
    }
    if cfg.dim == 0 {
        return Err(DatasetError::config("dim", "the input dimension must be at least 1"));
    }
    if !(0.0..=1.0).contains(&cfg.kappa) {
        return Err(DatasetError::config("kappa", format!("{} is not a probability", cfg.kappa)));
    }
    if cfg.train == 0 || cfg.test == 0 || cfg.train.max(cfg.test) as u64 >= 1 << 32 {
        return Err(DatasetError::config("train/test", "both need 1 to 2³² − 1 examples"));
    }
    let (c, d) = (cfg.outputs, cfg.dim);
    let mut rng = stream(cfg.seed, 2 << 32);
    let hypothesis: Vec<(Vec<f64>, f64)> =
        (0..c).map(|_| ((0..d).map(|_| normal(&mut rng)).collect(), 0.5 * normal(&mut rng))).collect();
    let mut order: Vec<usize> = (0..1 << c).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    let mut allowed = vec![false; 1 << c];
    for &l in &order[..order.len() / 2] {
        allowed[l] = true;
    }
    let graph = Arc::new(factors_with_singletons(
        vec![2; c],
        &[Scope { variables: (0..c).collect(), factor_type: "constraint".into() }],
    )?);
    let make = |split: u64, count: usize| -> Result<(Dataset, Vec<bool>), DatasetError> {
        let mut examples = Vec::with_capacity(count);
        let mut hard = Vec::with_capacity(count);
        for k in 0..count {
            let (ex, h) = example(cfg, &hypothesis, &allowed, &graph, stream(cfg.seed, (split << 32) | k as u64), k)?;
            examples.push(ex);
            hard.push(h);
        }
        Ok((Dataset::new(factor_types(cfg), examples)?, hard))
    };
    let (train, train_hard) = make(0, cfg.train)?;
    let (test, _) = make(1, cfg.test)?;
    Ok(PunyakanokData { train, test, allowed, train_hard, hypothesis })
}

/// The labeling index of binary labels (output 0 most significant).
///
/// ```
/// assert_eq!(datasets::punyakanok::labeling_index(&[1, 0, 1]), 5);
/// ```
pub fn labeling_index(y: &[usize]) -> usize {
    y.iter().fold(0, |a, &b| 2 * a + b)
}

fn example(
    cfg: &PunyakanokConfig,
    hypothesis: &[(Vec<f64>, f64)],
    allowed: &[bool],
    graph: &Arc<RegionGraph>,
    mut rng: ChaCha8Rng,
    k: usize,
) -> Result<(Example, bool), DatasetError> {
    let (c, d) = (cfg.outputs, cfg.dim);
    let hard = rng.random::<f64>() < cfg.kappa;
    for _ in 0..MAX_ATTEMPTS {
        let x: Vec<Vec<f64>> = (0..c).map(|_| (0..d).map(|_| normal(&mut rng)).collect()).collect();
        let f: Vec<f64> = x
            .iter()
            .zip(hypothesis)
            .map(|(xi, (w, b))| xi.iter().zip(w).map(|(a, b)| a * b).sum::<f64>() + b)
            .collect();
        let local: Vec<usize> = f.iter().map(|&v| usize::from(v > 0.0)).collect();
        if allowed[labeling_index(&local)] == hard {
            continue;
        }
        let best = (0..allowed.len())
            .filter(|&l| allowed[l])
            .map(|l| {
                let s: f64 = (0..c).map(|i| if (l >> (c - 1 - i)) & 1 == 1 { f[i] } else { -f[i] }).sum();
                (l, s)
            })
            .fold((0, f64::NEG_INFINITY), |b, (l, s)| if s > b.1 { (l, s) } else { b })
            .0;
        let labels: Vec<usize> = (0..c).map(|i| (best >> (c - 1 - i)) & 1).collect();
        let dim = c * (d + 1);
        let mut unary = vec![0.0; c * dim];
        for i in 0..c {
            let row = &mut unary[i * dim..(i + 1) * dim];
            row[i * (d + 1)..i * (d + 1) + d].copy_from_slice(&x[i]);
            row[i * (d + 1) + d] = 1.0;
        }
        let example = Example::new(
            format!("punyakanok-{k}"),
            graph.clone(),
            Some(labels),
            vec![FeatureBlock { dim, values: unary }, FeatureBlock { dim: 1, values: vec![1.0] }],
        );
        return Ok((example, hard));
    }
    Err(DatasetError::config(
        "kappa",
        format!("no {} example found in {MAX_ATTEMPTS} draws", if hard { "hard" } else { "easy" }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_obey_the_constraint_and_kappa_controls_local_agreement() {
        for kappa in [0.0, 0.1, 1.0] {
            let cfg = PunyakanokConfig { train: 200, test: 10, kappa, ..Default::default() };
            let data = generate(&cfg).unwrap();
            for (k, ex) in data.train.examples().iter().enumerate() {
                let y = ex.labels().unwrap();
                assert!(data.allowed[labeling_index(y)], "label outside C");
                // Local decisions from the hypothesis.
                let local: Vec<usize> = (0..5)
                    .map(|i| {
                        let row = &data.train.features(k, 0)[i * 55..(i + 1) * 55];
                        let (w, b) = &data.hypothesis[i];
                        let f: f64 = row[i * 11..i * 11 + 10].iter().zip(w).map(|(a, b)| a * b).sum::<f64>() + b;
                        usize::from(f > 0.0)
                    })
                    .collect();
                assert_eq!(local != y, data.train_hard[k]);
            }
            let share = data.train_hard.iter().filter(|&&h| h).count() as f64 / 200.0;
            assert!((share - kappa).abs() < 0.08, "κ = {kappa}: hard share {share}");
        }
    }

    #[test]
    fn same_seed_same_data_and_test_independent_of_train_size() {
        let a = generate(&PunyakanokConfig { train: 5, test: 3, ..Default::default() }).unwrap();
        let b = generate(&PunyakanokConfig { train: 9, test: 3, ..Default::default() }).unwrap();
        assert_eq!(a.allowed, b.allowed);
        for k in 0..a.test.len() {
            assert_eq!(a.test.feature_blocks(k), b.test.feature_blocks(k));
        }
        assert_eq!(a.train.feature_blocks(4), b.train.feature_blocks(4));
    }

    #[test]
    fn bad_settings_are_refused() {
        for cfg in [
            PunyakanokConfig { outputs: 1, ..Default::default() },
            PunyakanokConfig { dim: 0, ..Default::default() },
            PunyakanokConfig { kappa: 1.5, ..Default::default() },
            PunyakanokConfig { train: 0, ..Default::default() },
        ] {
            assert!(generate(&cfg).is_err());
        }
    }
}
