//! `cargo xtask reproduce hazan-urtasun --cell unary`: why do **tied** models
//! with bimodal noise predict background everywhere? (docs/results/hazan-urtasun)
//!
//! A tied unary of the features `[x, 1]` (Hazan & Urtasun's "pixel values as
//! node potentials") scores the two labels by a linear function of the pixel
//! value `x`, so on its own it is a **threshold** on `x`. With bimodal noise
//! the class posterior `P(y = 1 | x)` is not monotone in `x` (one mode of
//! each class lies between the other's). For each shape (bimodal noise, tied,
//! ε = 1) this part measures, on the 10 test corruptions:
//!
//! * `threshold`: the best per-pixel rule `x ≷ t` (chosen on the training
//!   pixels) — the best any tied linear unary can do without the edges;
//! * `histogram`: the best per-pixel rule of any shape (majority label of the
//!   training pixels in each of 64 bins of `x`) — close to the Bayes error of
//!   a per-pixel classifier;
//! * `algorithm1 [x, 1]`: Algorithm 1 with the linear oracle, solving every
//!   logistic problem, on the same features — whether the features can do
//!   better once the Ising edges are trained jointly;
//! * `algorithm1 bins`: the same with the unary features replaced by a
//!   one-hot code of the 64 bins (plus 1), a unary that can represent a
//!   non-monotone posterior;
//! * `hazan-urtasun [x, 1]`: the learner of the tables, same data and rounds
//!   as `algorithm1 [x, 1]`'s iterations × 2 (rounds are much cheaper).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use datasets::shapes::{Noise, Shape, ShapesConfig, Tying, generate, oracle_specs};
use structlearn::files::write_atomic;
use structlearn::{
    Dataset, Evaluate, Example, FactorTypeInfo, FeatureBlock, LearnerKind, PredictOptions, TrainConfig, build_learner,
};

use crate::hazan_urtasun::error_at;

/// Bins of `x` for the histogram rule and the one-hot unary.
const BINS: usize = 64;

/// Sizes of this part.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct UnaryCheck {
    /// Training corruptions per shape.
    pub train: usize,
    /// Algorithm 1's learning iterations (default schedule: fit, 25
    /// message-passing iterations, per type).
    pub algorithm1_iterations: usize,
    /// Rounds of the Hazan–Urtasun learner (2 message-passing iterations each).
    pub hazan_urtasun_rounds: usize,
}

/// `(x, label)` of every pixel of `data` (unary feature 0 is `x`).
fn pixels(data: &Dataset) -> Result<Vec<(f64, usize)>> {
    let mut out = Vec::new();
    let dim = data.factor_types()[0].dim;
    for k in 0..data.len() {
        for (row, &y) in data.features(k, 0).chunks_exact(dim).zip(data.labels(k)?) {
            out.push((row[0], y));
        }
    }
    Ok(out)
}

/// The best rule `x > t → 1` or `x < t → 1` on `train`, as a predicate.
fn best_threshold(train: &[(f64, usize)]) -> impl Fn(f64) -> usize {
    let mut sorted = train.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let ones = sorted.iter().filter(|p| p.1 == 1).count();
    // Errors of "x > t → 1" with t just below sorted[i]: the 1s below plus the 0s from i on.
    let mut ones_below = 0usize;
    let n = sorted.len();
    let mut best = (usize::MAX, f64::NEG_INFINITY, true);
    for i in 0..=n {
        let t = if i == 0 { f64::NEG_INFINITY } else { sorted[i - 1].0 };
        let zeros_above = (n - i) - (ones - ones_below);
        let above = ones_below + zeros_above; // errors of x > t → 1
        let below = n - above; // errors of x ≤ t → 1
        if above < best.0 {
            best = (above, t, true);
        }
        if below < best.0 {
            best = (below, t, false);
        }
        if i < n && sorted[i].1 == 1 {
            ones_below += 1;
        }
    }
    let (_, t, up) = best;
    move |x: f64| usize::from((x > t) == up)
}

/// Bin of `x` among [`BINS`] equal bins over `[lo, hi]` (clamped).
fn bin(x: f64, lo: f64, hi: f64) -> usize {
    (((x - lo) / (hi - lo) * BINS as f64).floor().max(0.0) as usize).min(BINS - 1)
}

/// The same data with unary features `[one-hot(bin(x)), 1]`.
fn binned(data: &Dataset, lo: f64, hi: f64) -> Result<Dataset> {
    let dim = data.factor_types()[0].dim;
    let (_, examples) = data.clone().into_parts();
    let examples = examples
        .into_iter()
        .map(|ex| {
            let (name, graph, labels, mut features) = ex.into_parts();
            let values = features[0]
                .values
                .chunks_exact(dim)
                .flat_map(|row| {
                    let mut v = vec![0.0; BINS + 1];
                    v[bin(row[0], lo, hi)] = 1.0;
                    v[BINS] = 1.0;
                    v
                })
                .collect();
            features[0] = FeatureBlock { dim: BINS + 1, values };
            Example::new(name, graph, labels, features)
        })
        .collect();
    let mut types: Vec<FactorTypeInfo> =
        data.factor_types().iter().map(|t| FactorTypeInfo::new(&t.name, t.dim)).collect();
    types[0].dim = BINS + 1;
    Ok(Dataset::new(types, examples)?)
}

/// Runs the check and writes `unary.md` and `unary.csv` into `out`.
pub fn check(out: &Path, cfg: &ShapesConfig, shapes: &[Shape], c: &UnaryCheck, predict: &PredictOptions) -> Result<()> {
    let cfg = ShapesConfig { train: c.train, ..cfg.clone() };
    let mut csv = String::from("shape,foreground,threshold,histogram,algorithm1_x1,algorithm1_bins,hazan_urtasun_x1\n");
    let mut md = format!(
        "Tied models, bimodal noise, ε = 1, {} training / {} test corruptions per shape: test pixel error.\n\n\
         | shape | foreground share | best threshold on x | best per-pixel rule (64 bins) | Algorithm 1, unary [x, 1] ({} it.) | Algorithm 1, unary one-hot bins ({} it.) | Hazan–Urtasun, unary [x, 1] ({} rounds) |\n|---|---|---|---|---|---|---|\n",
        cfg.train, cfg.test, c.algorithm1_iterations, c.algorithm1_iterations, c.hazan_urtasun_rounds
    );
    for &shape in shapes {
        let t0 = Instant::now();
        let data = generate(&cfg, shape, Noise::Bimodal, Tying::Tied)?;
        let (train, test) = (pixels(&data.train)?, pixels(&data.test)?);
        let rate =
            |rule: &dyn Fn(f64) -> usize| test.iter().filter(|p| rule(p.0) != p.1).count() as f64 / test.len() as f64;
        let foreground = test.iter().filter(|p| p.1 == 1).count() as f64 / test.len() as f64;
        let threshold = rate(&best_threshold(&train));
        let (lo, hi) = train.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |a, p| (a.0.min(p.0), a.1.max(p.0)));
        let mut votes = vec![[0usize; 2]; BINS];
        for p in &train {
            votes[bin(p.0, lo, hi)][p.1] += 1;
        }
        let histogram = rate(&|x| usize::from(votes[bin(x, lo, hi)][1] > votes[bin(x, lo, hi)][0]));
        let specs = crate::runner::with_full_cold_fits(oracle_specs(Tying::Tied, cfg.size));
        let config = |iterations: usize| TrainConfig {
            epsilon: 1.0,
            learning_iterations: iterations,
            evaluate: Evaluate::Never,
            seed: cfg.seed,
            ..crate::runner::chapter_config()
        };
        let train_eval = |kind: LearnerKind, train: &Dataset, test: &Dataset, config: TrainConfig| -> Result<f64> {
            let model = build_learner(kind, train, &specs, config)?.train()?.model;
            error_at(&model, test, 1.0, predict)
        };
        let a1 = train_eval(LearnerKind::Algorithm1, &data.train, &data.test, config(c.algorithm1_iterations))?;
        let (btrain, btest) = (binned(&data.train, lo, hi)?, binned(&data.test, lo, hi)?);
        let a1_bins = train_eval(LearnerKind::Algorithm1, &btrain, &btest, config(c.algorithm1_iterations))?;
        let hu_config = TrainConfig { message_passing_iterations: 2, ..config(c.hazan_urtasun_rounds) };
        let hu = train_eval(LearnerKind::HazanUrtasun, &data.train, &data.test, hu_config)?;
        writeln!(csv, "{},{foreground:.6},{threshold:.6},{histogram:.6},{a1:.6},{a1_bins:.6},{hu:.6}", shape.name())?;
        writeln!(
            md,
            "| {} | {foreground:.4} | {threshold:.4} | {histogram:.4} | {a1:.4} | {a1_bins:.4} | {hu:.4} |",
            shape.name()
        )?;
        eprintln!(
            "  unary check {}: foreground {foreground:.4}, threshold {threshold:.4}, histogram {histogram:.4}, \
             Algorithm 1 [x,1] {a1:.4}, bins {a1_bins:.4}, H&U [x,1] {hu:.4} ({:.0} s)",
            shape.name(),
            t0.elapsed().as_secs_f64()
        );
        write_atomic(&out.join("unary.csv"), csv.as_bytes())?;
        write_atomic(&out.join("unary.md"), md.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_threshold_finds_either_direction() {
        let up: Vec<(f64, usize)> = (0..10).map(|i| (i as f64, usize::from(i >= 6))).collect();
        let rule = best_threshold(&up);
        assert!(up.iter().all(|p| rule(p.0) == p.1));
        let down: Vec<(f64, usize)> = up.iter().map(|p| (p.0, 1 - p.1)).collect();
        let rule = best_threshold(&down);
        assert!(down.iter().all(|p| rule(p.0) == p.1));
        // Non-monotone labels: no threshold is perfect; the best makes 2 mistakes.
        let bump: Vec<(f64, usize)> = (0..10).map(|i| (i as f64, usize::from((3..5).contains(&i)))).collect();
        let rule = best_threshold(&bump);
        assert_eq!(bump.iter().filter(|p| rule(p.0) != p.1).count(), 2);
    }
}
