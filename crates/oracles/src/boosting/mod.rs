//! The boosting function class `g(φ, y) = Σ_t ν·t(φ)_y` (ch. §1.9.4; docs/MATH.md §5):
//! gradient boosting of multi-output regression trees on the biased multiclass
//! logistic loss.
//!
//! One boosting round, on a random subsample `S` of the rows (the same `S` for
//! steps 2 and 3, a new one each round):
//!
//! 1. per-row gradient vectors `g_k(y) = w_k [softmax(s_k + b_k)_y − 1{y = y_k}]`,
//!    `s_k` the current ensemble scores;
//! 2. induce **one** regression tree fitting the vectors `g_k` by least squares
//!    (split gain `Σ_children ‖Σ g‖² / count`, the chapter's; or, with
//!    [`SplitGain::Newton`], the second-order gain `Σ_children Σ_y G_y²/(H_y + λ)`
//!    of XGBoost and LightGBM), each child keeping at least
//!    [`BoostingOracle::min_child_fraction`] of `S` and nodes under
//!    [`BoostingOracle::min_split_fraction`] of `S` left unsplit (`tree.rs`);
//!    with [`Trees::PerClass`], one tree per class instead, each on its class's
//!    `g_k(y)` (steps 1–4 per class, the classes in turn);
//! 3. with the splits fixed, re-fit each leaf's `C`-vector (per class: its
//!    `v_y`) by L-BFGS on the logistic loss of its rows (`leaves.rs`), or with
//!    [`LeafValues::Newton`] take one Newton step `v_y = −G_y/(H_y + λ)`;
//! 4. shrink the tree by `ν` and add it: `g ← g + ν t`. The training scores `s`
//!    are never recomputed: a round reads the scores of its subsample (the
//!    scores at the start of the call plus this call's trees so far), and the
//!    call's trees are added to every row once, at its end. A caller that keeps
//!    the scores between calls ([`crate::Oracle::fit_scored`]) thus pays for
//!    this call's trees only, however large the ensemble.
//!
//! Features are binned once per fit call into at most [`BoostingOracle::bins`]
//! quantile bins (`bins.rs`), so a split search is a histogram scan, and the
//! training scores are updated by descending the binned rows (`descent.rs`).
//!
//! # What is monotone
//!
//! Step 3's re-fit never returns leaf values worse than zero on `S`, and the loss
//! is convex in the leaf values, so for `0 < ν ≤ 1` **the loss on `S` never
//! increases in a round** (with [`LeafValues::Refit`], the default; a Newton step
//! can overshoot). When `S` holds every row (`subsample ≥ rows`) this is the training
//! loss, which is then non-increasing round by round. With a proper subsample the
//! training loss can rise in a round (the tree also fits the noise of `S`), and
//! over many rounds that noise can accumulate until the training loss drifts up;
//! the leaf ridge [`BoostingOracle::leaf_l2`] damps it. The oracle contract's
//! "never worse than the warm start" is enforced by [`crate::fit_monotone`].
//!
//! # Over ranks
//!
//! On a [`crate::Problem::distributed`] problem (rows spread over ranks), in
//! LightGBM's data-parallel scheme: the bin thresholds come from one
//! process's bin sample over the whole problem's rows, whose feature values
//! are gathered (at most 50,000 rows); each round's subsample is drawn over
//! the whole problem's rows, each rank keeping the rows it holds; the
//! root's totals, every node's histogram, each leaf's Newton sums and every
//! evaluation of its re-fit are completed over the ranks; split decisions
//! use the whole subsample's counts; each rank adds the trees to its rows'
//! scores. A node keeps its rows in subsample order, which is the whole
//! problem's row order, so each sum is continued rank after rank in one
//! process's order (`chain`): every rank builds one process's trees, bit for
//! bit.

mod bins;
mod descent;
mod leaves;
mod model;
mod tree;

#[cfg(test)]
mod tests;

use rand::SeedableRng;
use rand::seq::index;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

pub use model::BoostingModel;

use crate::optim::LbfgsOptions;
use crate::{
    Collective, Features, FitContext, FitLosses, Model, Oracle, OracleError, Problem, check_model_shape,
    check_score_buffer, decode, downcast_warm, logistic_loss,
};
use bins::{BIN_SAMPLE_ROWS, BinEdges};
use descent::Descent;
use leaves::LeafData;
use tree::{Sample, TreeBuilder, TreeLimits, stats_width};

/// Registry name of [`BoostingModel`].
pub const KIND: &str = "boosting";

/// Score entries per parallel block when trees are added to the training
/// scores (256 KiB of `f64`: the block stays in a core's L2 cache while each
/// tree of a call is added to it).
const UPDATE_BLOCK_VALUES: usize = 1 << 15;

/// How a boosting round scores the splits of its tree (step 2 of the module docs).
///
/// For a node with weighted gradient sums `G_y = Σ_k w_k g̃_k(y)`, weighted
/// diagonal Hessian sums `H_y = Σ_k w_k q_k(y)(1 − q_k(y))` and weight
/// `W = Σ_k w_k`, a split into `L` and `R` gains `T(L) + T(R) − T(node)` with
///
/// * least squares: `T = ‖G‖² / W` (the chapter's: the squared error of fitting
///   the gradient vectors by one constant vector per leaf);
/// * Newton: `T = Σ_y G_y² / (H_y + λ)`, `λ` = [`BoostingOracle::leaf_l2`] (twice
///   the decrease of the loss's second-order model at the leaf's diagonal Newton
///   step `v_y = −G_y/(H_y + λ)`; the gain XGBoost and LightGBM use per class).
///
/// The Newton gain weighs each class by its curvature: where a class is
/// already nearly certain (`q ≈ 0` or `1`) its gradients are small and so is
/// `H`, and a split that separates such rows is worth what it gains in loss,
/// not in squared gradient. The leaf values are re-fitted by L-BFGS either way.
///
/// ```
/// use oracles::boosting::{BoostingOracle, SplitGain};
/// use oracles::{Features, FitContext, Oracle, Problem, model_loss};
/// let x: Vec<f64> = (0..300).map(|i| (i % 30) as f64).collect();
/// let labels: Vec<usize> = x.iter().map(|&v| usize::from(v > 20.0) + usize::from(v > 25.0)).collect();
/// let bias = vec![0.0; 900];
/// let p = Problem::new(Features::new(&x, 300, 1).unwrap(), &labels, &bias, 3, None).unwrap();
/// let oracle = BoostingOracle { rounds: 3, split_gain: SplitGain::Newton, leaf_l2: 1.0, ..Default::default() };
/// let model = oracle.fit(&p, None, FitContext { seed: 0 }).unwrap();
/// assert!(model_loss(model.as_ref(), &p).unwrap() < 300.0 * 3f64.ln());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SplitGain {
    /// `‖G‖² / W` per node (the chapter's criterion; the default).
    #[default]
    LeastSquares,
    /// `Σ_y G_y² / (H_y + λ)` per node.
    Newton,
}

/// What a boosting round adds (step 2 of the module docs).
///
/// ```
/// use oracles::boosting::{BoostingOracle, Trees};
/// use oracles::{Features, FitContext, Problem, model_loss};
/// let x: Vec<f64> = (0..300).map(|i| (i % 30) as f64).collect();
/// let labels: Vec<usize> = x.iter().map(|&v| usize::from(v > 20.0) + usize::from(v > 25.0)).collect();
/// let bias = vec![0.0; 900];
/// let p = Problem::new(Features::new(&x, 300, 1).unwrap(), &labels, &bias, 3, None).unwrap();
/// let oracle = BoostingOracle { rounds: 2, trees: Trees::PerClass, leaf_l2: 1.0, ..Default::default() };
/// let model = oracle.fit_observed(&p, None, FitContext { seed: 0 }, &mut |_| {}).unwrap();
/// assert_eq!(model.trees(), 2 * 3); // one tree per class and round
/// assert!(model_loss(&model, &p).unwrap() < 300.0 * 3f64.ln());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trees {
    /// One multi-output tree per round, fitted to the gradient vectors, a
    /// `C`-vector per leaf (the chapter's; the default).
    #[default]
    MultiOutput,
    /// One single-output tree per class and round (the NIPS paper's, and
    /// LightGBM's and XGBoost's for multiclass problems): the tree of class `y`
    /// is fitted to the gradients `g_k(y)` (and, with [`SplitGain::Newton`],
    /// the Hessians `h_k(y)`) and its leaves re-fit `v_y` alone. The classes'
    /// trees are grown one after another, each from the subsample's scores
    /// including the trees before it, so each never raises the subsample's
    /// loss (module docs, "What is monotone"). A round costs `C` trees.
    PerClass,
}

/// How a boosting round sets the values of its tree's leaves (step 3 of the
/// module docs), the splits being fixed.
///
/// For a leaf holding the subsample rows `R` (of the class `y` its tree fits,
/// or every class of a multi-output tree):
///
/// * re-fit: `v = argmin_v Σ_{k∈R} ℓ_k(s_k + v) + (λ/2)‖v‖²` by L-BFGS, the
///   biased logistic loss `ℓ_k` of the rows at their current scores `s_k`
///   (the chapter's, started from the better of 0 and the Newton values, so
///   never worse than `v = 0`: the loss on the subsample never rises);
/// * Newton: one diagonal Newton step from `v = 0`,
///   `v_y = −G_y / (H_y + λ)` with `G_y = Σ_k w_k (q_k(y) − 1{y = y_k})` and
///   `H_y = Σ_k w_k q_k(y)(1 − q_k(y))` (XGBoost's and LightGBM's leaf values; no
///   L-BFGS, so cheaper, but a step can overshoot and raise the subsample's loss
///   — [`crate::fit_monotone`] still guards each call).
///
/// LightGBM's `multiclass` objective scales `H` by `K/(K − 1)`, so at the same
/// nominal learning rate its steps are `(K − 1)/K` of these: `shrinkage`
/// `ν·(K − 1)/K` here takes LightGBM's steps.
///
/// ```
/// use oracles::boosting::{BoostingOracle, LeafValues, Trees};
/// use oracles::{Features, FitContext, Oracle, Problem, model_loss};
/// let x: Vec<f64> = (0..300).map(|i| (i % 30) as f64).collect();
/// let labels: Vec<usize> = x.iter().map(|&v| usize::from(v > 20.0)).collect();
/// let bias = vec![0.0; 600];
/// let p = Problem::new(Features::new(&x, 300, 1).unwrap(), &labels, &bias, 2, None).unwrap();
/// let oracle = BoostingOracle { rounds: 5, trees: Trees::PerClass, leaf_values: LeafValues::Newton, leaf_l2: 1.0, ..Default::default() };
/// let model = oracle.fit(&p, None, FitContext { seed: 0 }).unwrap();
/// assert!(model_loss(model.as_ref(), &p).unwrap() < 300.0 * 2f64.ln());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeafValues {
    /// L-BFGS on the leaf's rows (the chapter's; the default).
    #[default]
    Refit,
    /// One Newton step `−G/(H + λ)` per leaf and class.
    Newton,
}

/// The boosting oracle's hyper-parameters (ch. §1.9.4; defaults from the chapter
/// where it gives one).
///
/// ```
/// use oracles::{Features, FitContext, Oracle, Problem};
/// let oracle = oracles::boosting::BoostingOracle { rounds: 5, max_depth: Some(3), leaf_l2: 1.0, ..Default::default() };
/// let x: Vec<f64> = (0..30).map(|i| (i % 10) as f64).collect();
/// let labels: Vec<usize> = x.iter().map(|&v| usize::from(v > 4.0)).collect();
/// let bias = vec![0.0; 60];
/// let p = Problem::new(Features::new(&x, 30, 1).unwrap(), &labels, &bias, 2, None).unwrap();
/// let first = oracle.fit(&p, None, FitContext { seed: 0 }).unwrap();
/// // Warm-started: the ensemble grows by `rounds` more trees per call.
/// let second = oracle.fit(&p, Some(first.as_ref()), FitContext { seed: 1 }).unwrap();
/// let loss = |m: &dyn oracles::Model| oracles::model_loss(m, &p).unwrap();
/// assert!(loss(second.as_ref()) < loss(first.as_ref()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BoostingOracle {
    /// Boosting rounds (trees added) per fit call; the ensemble keeps growing
    /// across warm-started calls. At least 1.
    pub rounds: usize,
    /// Step length `ν` each tree is multiplied by (ch.: 0.25); in `(0, 1]`.
    pub shrinkage: f64,
    /// Rows drawn (without replacement) for each round's tree induction and leaf
    /// re-fit (ch.: 10,000); all rows when there are fewer. At least 1.
    pub subsample: usize,
    /// Least fraction of the subsample in each child of a split (ch.: 0.01; NIPS
    /// paper: 0.05); in `[0, 0.5]`. At least one row either way.
    pub min_child_fraction: f64,
    /// Nodes holding less than this fraction of the subsample are not split
    /// (ch.: 0.025); in `[0, 1]`.
    pub min_split_fraction: f64,
    /// Most levels below the root (`None`: limited by the fractions only); `≥ 1`.
    pub max_depth: Option<usize>,
    /// Most leaves per tree, best splits first (`None`: no limit); `≥ 2`.
    pub max_leaves: Option<usize>,
    /// Most histogram bins per feature; in `2..=256`.
    pub bins: usize,
    /// Ridge `λ` on each leaf's values in the re-fit, `+ (λ/2)‖v‖²` in loss units
    /// (one unweighted row contributes one unit of loss): it keeps a pure leaf's
    /// values finite, and it damps the sampling noise that each tree fits on its
    /// subsample and that otherwise accumulates over rounds (our addition; the
    /// chapter re-fits without one). `≥ 0`, finite. See [`BoostingOracle::default`].
    pub leaf_l2: f64,
    /// L-BFGS settings of the per-leaf re-fit.
    pub leaf_lbfgs: LbfgsOptions,
    /// How splits are scored ([`SplitGain`]; the chapter's least squares by
    /// default).
    #[serde(default)]
    pub split_gain: SplitGain,
    /// One multi-output tree per round or one tree per class ([`Trees`]; the
    /// chapter's multi-output tree by default).
    #[serde(default)]
    pub trees: Trees,
    /// How leaf values are set once the splits are chosen ([`LeafValues`]; the
    /// chapter's L-BFGS re-fit by default).
    #[serde(default)]
    pub leaf_values: LeafValues,
}

impl Default for BoostingOracle {
    /// The chapter's settings (`ν = 0.25`, 10,000 rows per round, children ≥ 1%,
    /// nodes < 2.5% not split, no depth limit), 256 bins, `λ = 100`, 20 rounds per
    /// call, and per-leaf L-BFGS for at most 50 iterations to a mean-gradient norm
    /// of `10⁻⁶`.
    ///
    /// `λ = 100` (1% of the default subsample) is chosen for robustness. On the
    /// benchmark's 42-feature, 8-class problem (400,000 rows) the training loss
    /// with `λ ≤ 10` fell for 20–50 rounds and then rose again, above its starting
    /// point by 200 rounds with `λ = 1` (each tree fits the noise of its 10,000 rows
    /// and the noise accumulates); with `λ = 100` it fell through 400 rounds. On
    /// one-feature problems (`[value, 1]`, the synthetic denoising types) `λ = 10`
    /// converges faster and ends 0.2–2% lower after 200 rounds.
    ///
    /// Inside structured learning, with few rounds per call and every call
    /// guarded by [`crate::fit_monotone`], a small ridge learns far faster: the
    /// denoising preset uses `λ = 1`, the Stanford preset `λ = 10` (on a
    /// 200-image Stanford subset, 10 learning iterations of 10 trees: training
    /// error 0.247 with `λ = 1`, 0.336 with `λ = 100`; at full scale `λ = 1`
    /// stops improving after 11 iterations, `λ = 10` keeps learning and ends
    /// lower).
    fn default() -> Self {
        Self {
            rounds: 20,
            shrinkage: 0.25,
            subsample: 10_000,
            min_child_fraction: 0.01,
            min_split_fraction: 0.025,
            max_depth: None,
            max_leaves: None,
            bins: 256,
            leaf_l2: 100.0,
            leaf_lbfgs: LbfgsOptions {
                max_iterations: 50,
                memory: 10,
                gradient_tolerance: 1e-6,
                relative_decrease_tolerance: 1e-9,
            },
            split_gain: SplitGain::LeastSquares,
            trees: Trees::MultiOutput,
            leaf_values: LeafValues::Refit,
        }
    }
}

/// What one boosting round did, handed to the observer of
/// [`BoostingOracle::fit_observed`].
#[derive(Debug, Clone, Copy)]
pub struct RoundReport<'a> {
    /// Round index within this fit call (from 0).
    pub round: usize,
    /// Trees in the ensemble after the round (warm-start trees included).
    pub trees: usize,
    /// Leaves of the round's new tree (of its `C` trees with [`Trees::PerClass`]).
    pub leaves: usize,
    /// Rows in the round's subsample.
    pub subsample_rows: usize,
    /// Loss on the subsample before the round.
    pub subsample_loss_before: f64,
    /// Loss on the subsample after the round (never higher with re-fitted
    /// leaves; module docs).
    pub subsample_loss_after: f64,
    /// Scores `g(φ_k, ·)` of every training row after the round, row-major
    /// `rows × classes`; `crate::logistic_loss(problem, scores, None)` is the
    /// training loss.
    pub scores: &'a [f64],
}

fn invalid(name: &'static str, reason: &str) -> OracleError {
    OracleError::InvalidHyperParameter { name, reason: reason.to_string() }
}

impl BoostingOracle {
    /// Fits like [`Oracle::fit`] but with the concrete warm-start and model
    /// types, calling `observer` after every round.
    ///
    /// Errors: invalid hyper-parameters; a warm start whose dimension or class
    /// count differs from the problem's; an L-BFGS failure in a leaf re-fit.
    ///
    /// ```
    /// use oracles::boosting::BoostingOracle;
    /// use oracles::{FitContext, Features, Problem, logistic_loss};
    /// let x: Vec<f64> = (0..200).map(|i| i as f64).collect();
    /// let labels: Vec<usize> = (0..200).map(|i| usize::from(i >= 120)).collect();
    /// let bias = vec![0.0; 400];
    /// let p = Problem::new(Features::new(&x, 200, 1).unwrap(), &labels, &bias, 2, None).unwrap();
    /// let oracle = BoostingOracle { rounds: 5, ..Default::default() };
    /// let mut losses = Vec::new();
    /// let model = oracle
    ///     .fit_observed(&p, None, FitContext { seed: 1 }, &mut |r| losses.push(logistic_loss(&p, r.scores, None)))
    ///     .unwrap();
    /// assert_eq!(model.trees(), 5);
    /// assert!(losses.windows(2).all(|w| w[1] <= w[0]));
    /// ```
    pub fn fit_observed(
        &self,
        problem: &Problem<'_>,
        warm: Option<&BoostingModel>,
        ctx: FitContext,
        observer: &mut dyn FnMut(&RoundReport<'_>),
    ) -> Result<BoostingModel, OracleError> {
        let mut scores = vec![0.0; problem.rows() * problem.classes()];
        let model = self.start(problem, warm, &mut scores, true)?;
        self.boost(problem, model, &mut scores, ctx, Some(observer))
    }

    /// The model to continue (a copy of `warm`, or the empty ensemble), after
    /// checking the hyper-parameters and shapes; with `score_warm`, `scores`
    /// (`rows × classes`) is set to its scores.
    fn start(
        &self,
        problem: &Problem<'_>,
        warm: Option<&BoostingModel>,
        scores: &mut [f64],
        score_warm: bool,
    ) -> Result<BoostingModel, OracleError> {
        self.validate()?;
        check_score_buffer(problem.features(), problem.classes(), scores)?;
        let (d, c) = (problem.dim(), problem.classes());
        match warm {
            Some(w) => {
                check_model_shape(w, d, c)?;
                if score_warm {
                    w.score(problem.features(), scores)?;
                }
                Ok(w.clone())
            }
            None => {
                if score_warm {
                    scores.fill(0.0);
                }
                Ok(BoostingModel::empty(d, c))
            }
        }
    }

    /// [`Oracle::fit_scored`] without the type erasure: `scores` holds the warm
    /// start's scores (unless `score_warm`, which computes them first), then the
    /// new model's; the losses are read off them.
    fn fit_losses(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        ctx: FitContext,
        scores: &mut [f64],
        score_warm: bool,
    ) -> Result<(Box<dyn Model>, FitLosses), OracleError> {
        let warm = downcast_warm::<BoostingModel>(warm, KIND)?;
        let model = self.start(problem, warm, scores, score_warm)?;
        let warm_loss = warm.map(|_| logistic_loss(problem, scores, None));
        let model = self.boost(problem, model, scores, ctx, None)?;
        let loss = Some(logistic_loss(problem, scores, None));
        Ok((Box::new(model), FitLosses { loss, warm_loss }))
    }

    /// The boosting loop (module docs).
    /// `model` is grown from `scores`, its scores on the problem's rows
    /// ([`BoostingOracle::start`]), which hold the grown model's on return.
    ///
    /// A round needs current scores of its subsample only: they are the scores
    /// at the start of the call plus this call's trees so far, added in tree
    /// order. So without an `observer` (which is shown every row's scores after
    /// every round) the trees are added to every row in batches, per block of
    /// rows — once at the end of a short call, or whenever catching the
    /// subsample up would cost more than a pass over every row — with the same
    /// additions in the same order per entry, so the same bits.
    fn boost(
        &self,
        problem: &Problem<'_>,
        mut model: BoostingModel,
        scores: &mut [f64],
        ctx: FitContext,
        mut observer: Option<&mut dyn FnMut(&RoundReport<'_>)>,
    ) -> Result<BoostingModel, OracleError> {
        let (n, d, c) = (problem.rows(), problem.dim(), problem.classes());
        let features = problem.features();
        // Over ranks: samples are drawn over the whole problem's rows, as one
        // process draws them, and each rank keeps the rows it holds
        // (`Ranks`); sums over the subsample are added over the ranks.
        let ranks = Ranks::of(problem);
        let global_rows = ranks.as_ref().map_or(n, |r| r.rows);

        let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);
        let mut bin_sample = Vec::new();
        draw_subsample(&mut rng, global_rows, BIN_SAMPLE_ROWS, &mut bin_sample);
        let edges = match &ranks {
            None => BinEdges::fit(features, &bin_sample, self.bins),
            Some(r) => r.bin_edges(features, &bin_sample, self.bins)?,
        };
        let mut all_bins = Vec::new();
        edges.bin_rows(features, &mut all_bins);

        let m = self.subsample.min(global_rows);
        let limits = TreeLimits {
            min_child: ((self.min_child_fraction * m as f64).ceil() as usize).max(1),
            min_split: (self.min_split_fraction * m as f64).ceil() as usize,
            max_depth: self.max_depth.unwrap_or(usize::MAX),
            max_leaves: self.max_leaves.unwrap_or(usize::MAX),
        };
        // Per class: single-output trees on one class's statistics at a time.
        let (per_class, gain) = (self.trees == Trees::PerClass, self.split_gain);
        // Unit weights: a node's weight is its count, so the statistics carry no weight column.
        let weighted = problem.weights().is_some();
        let mut builder = TreeBuilder::new(&edges, d, if per_class { 1 } else { c }, gain, weighted, self.leaf_l2);
        let mut sub = Vec::with_capacity(m);
        let mut sub_bins = vec![0u8; d * m];
        let mut stats = vec![0.0; m * stats_width(if per_class { 1 } else { c }, gain, weighted)];
        let mut data = LeafData::new(m, c);
        let mut values = Vec::new();
        // The subsample's bins row-major, its current scores, and its rows' leaves.
        let mut sub_rows = vec![0u8; m * d];
        let mut sub_scores = vec![0.0; m * c];
        let mut sub_leaf = vec![0u32; m];
        // This call's trees not yet added to `scores` (without an observer).
        let mut pending: Vec<(Descent<u8>, Vec<f64>)> = Vec::new();
        // The whole subsample's rows, when this rank holds only some of them.
        let mut global_sub = Vec::new();
        // The outputs each tree of a round fits: all at once, or one class per tree.
        let targets: Vec<Option<usize>> = if per_class { (0..c).map(Some).collect() } else { vec![None] };

        for round in 0..self.rounds {
            match &ranks {
                None => draw_subsample(&mut rng, n, m, &mut sub),
                Some(r) => {
                    draw_subsample(&mut rng, global_rows, m, &mut global_sub);
                    r.keep_mine(&global_sub, &mut sub);
                }
            }
            // This rank's rows of the subsample (all of them in one process).
            let mine = sub.len();
            for (r, &k) in sub.iter().enumerate() {
                let row = &all_bins[k * d..(k + 1) * d];
                for (f, &b) in row.iter().enumerate() {
                    sub_bins[f * mine + r] = b;
                }
                sub_rows[r * d..(r + 1) * d].copy_from_slice(row);
                sub_scores[r * c..(r + 1) * c].copy_from_slice(&scores[k * c..(k + 1) * c]);
            }
            for (descent, values) in &pending {
                let (rows, scores, leaf) = (&sub_rows[..mine * d], &mut sub_scores[..mine * c], &mut sub_leaf[..mine]);
                add_tree(descent, values, c, rows, d, scores, leaf);
            }
            let mut subsample_loss_before = 0.0;
            let mut leaves = 0;
            for (i, &target) in targets.iter().enumerate() {
                // Each class's tree sees the scores after the trees before it.
                let loss = data.gather(problem, &sub_scores[..mine * c], &sub, gain, target, &mut stats);
                if i == 0 {
                    subsample_loss_before = loss;
                }
                let width = stats_width(if per_class { 1 } else { c }, gain, weighted);
                let collective = ranks.as_ref().map(|_| problem.collective());
                let sample = Sample {
                    bins: &sub_bins[..d * mine],
                    stats: &stats[..mine * width],
                    rows: mine,
                    ranks: collective,
                };
                builder.grow(&sample, &limits);
                let tree = &builder.tree;
                leaves += tree.leaf_ranges.len();
                values.clear();
                values.resize(tree.leaf_ranges.len() * c, 0.0);
                let leaf = |ranks: Option<&dyn Collective>,
                            hess: &mut Vec<f64>,
                            (v, &(start, end)): (&mut [f64], &(usize, usize))| {
                    let rows = &tree.order[start..end];
                    match self.leaf_values {
                        LeafValues::Refit => data.refit_leaf(ranks, rows, target, self.leaf_l2, &self.leaf_lbfgs, v),
                        LeafValues::Newton => {
                            data.newton_leaf(ranks, rows, target, self.leaf_l2, v, hess);
                            Ok(())
                        }
                    }
                };
                match collective {
                    None => values
                        .par_chunks_mut(c)
                        .zip(tree.leaf_ranges.par_iter())
                        .try_for_each_init(|| vec![0.0; c], |hess, item| leaf(None, hess, item))?,
                    // Every leaf's sums are collective calls: the leaves in turn, in the same order on every rank.
                    Some(_) => {
                        let mut hess = vec![0.0; c];
                        for item in values.chunks_mut(c).zip(&tree.leaf_ranges) {
                            leaf(collective, &mut hess, item)?;
                        }
                    }
                }
                values.iter_mut().for_each(|v| *v *= self.shrinkage);

                let mut descent = Descent::new();
                descent.compile(
                    &tree.feature,
                    |n| tree.split_bin[n],
                    &tree.left,
                    &tree.right,
                    tree.leaf_ranges.len(),
                    u8::MAX,
                );
                // The subsample's rows are grouped by leaf already: no descent.
                for (v, &(start, end)) in values.chunks_exact(c).zip(&tree.leaf_ranges) {
                    for &r in &tree.order[start..end] {
                        let r = r as usize;
                        sub_scores[r * c..(r + 1) * c].iter_mut().zip(v).for_each(|(s, v)| *s += v);
                    }
                }
                model.push_tree(tree, &edges, &values);
                pending.push((descent, values.clone()));
            }
            let mut subsample_loss_after = data.loss_at(problem, &sub_scores[..mine * c], &sub);
            if observer.is_some()
                && let Some(r) = &ranks
            {
                let mut losses = [subsample_loss_before, subsample_loss_after];
                r.collective.sum(&mut losses);
                [subsample_loss_before, subsample_loss_after] = losses;
            }
            // Catching a round's subsample up costs |pending| × m descents,
            // adding the pending trees to every row n × |pending| once: add
            // them to every row once the former would exceed n per round, so a
            // long call costs O(n + m) per tree, not O(m × trees) (the same
            // additions in the same order per entry either way: same bits).
            if observer.is_none() && pending.len() * mine >= n {
                add_trees(&pending, c, &all_bins, d, scores);
                pending.clear();
            }
            if let Some(observer) = observer.as_mut() {
                add_trees(&pending, c, &all_bins, d, scores);
                pending.clear();
                observer(&RoundReport {
                    round,
                    trees: model.trees(),
                    leaves,
                    subsample_rows: m,
                    subsample_loss_before,
                    subsample_loss_after,
                    scores,
                });
            }
        }
        add_trees(&pending, c, &all_bins, d, scores);
        Ok(model)
    }
}

/// Adds one tree's `values` (`leaves × C`) to the scores of the binned `rows`
/// (row-major, `width` bins per row; `scores` row-major `rows × C`); `leaf` is
/// scratch of one entry per row.
fn add_tree(
    descent: &Descent<u8>,
    values: &[f64],
    c: usize,
    rows: &[u8],
    width: usize,
    scores: &mut [f64],
    leaf: &mut [u32],
) {
    descent.leaves(rows, width, leaf);
    for (s, &l) in scores.chunks_exact_mut(c).zip(leaf.iter()) {
        let l = l as usize;
        s.iter_mut().zip(&values[l * c..(l + 1) * c]).for_each(|(s, v)| *s += v);
    }
}

/// Adds `trees` (in order) to the scores (`rows × C`) of every row of `bins`
/// (row-major, `width` per row), in parallel blocks of rows small enough that
/// a block's scores stay in cache while every tree is added.
fn add_trees(trees: &[(Descent<u8>, Vec<f64>)], c: usize, bins: &[u8], width: usize, scores: &mut [f64]) {
    if trees.is_empty() || c == 0 {
        return;
    }
    let block = (UPDATE_BLOCK_VALUES / c).max(1);
    scores.par_chunks_mut(block * c).enumerate().for_each_init(
        || vec![0u32; block],
        |leaf, (chunk, s)| {
            let rows = s.len() / c;
            let start = chunk * block;
            let bins = &bins[start * width..(start + rows) * width];
            for (descent, values) in trees {
                add_tree(descent, values, c, bins, width, s, &mut leaf[..rows]);
            }
        },
    );
}

/// The ranks a fit's rows are spread over ([`Problem::distributed`]): what
/// a boosting fit needs to draw its samples over the whole problem's rows.
struct Ranks<'a> {
    collective: &'a dyn Collective,
    /// Rows of the whole problem.
    rows: usize,
    /// This rank's rows are rows `offset..offset + local` of the whole problem.
    offset: usize,
    local: usize,
}

impl<'a> Ranks<'a> {
    /// `None` for a problem of one process.
    fn of(problem: &Problem<'a>) -> Option<Self> {
        problem.is_distributed().then(|| Ranks {
            collective: problem.collective(),
            rows: problem.global_rows(),
            offset: problem.row_offset(),
            local: problem.rows(),
        })
    }

    /// The rows of `global` (the whole problem's indices, sorted) this rank
    /// holds, as its own indices, in the same order.
    fn keep_mine(&self, global: &[usize], out: &mut Vec<usize>) {
        out.clear();
        out.extend(global.iter().filter_map(|&k| k.checked_sub(self.offset).filter(|&k| k < self.local)));
    }

    /// [`BinEdges::fit`] on the whole problem's `sample` rows (sorted): each
    /// rank contributes the feature values of the sampled rows it holds, and
    /// every rank receives them all (a gather of at most
    /// [`BIN_SAMPLE_ROWS`] rows × `dim` numbers), in the sample's order —
    /// the thresholds one process computes, bit for bit.
    fn bin_edges(&self, features: Features<'_>, sample: &[usize], bins: usize) -> Result<BinEdges, OracleError> {
        let mut mine = Vec::new();
        self.keep_mine(sample, &mut mine);
        let values: Vec<f64> = mine.iter().flat_map(|&k| features.row(k).iter().copied()).collect();
        let all = self.collective.gather(&values);
        let sampled = Features::new(&all, sample.len(), features.dim())?;
        let order: Vec<usize> = (0..sample.len()).collect();
        Ok(BinEdges::fit(sampled, &order, bins))
    }
}

/// Continues the running sums `acc` over the ranks in rank order: rank `r`
/// receives rank `r − 1`'s `acc` (rank 0 starts from the caller's),
/// `accumulate`s its rows onto it and hands it on; every rank then gets the
/// last rank's. Sums whose rows, taken rank after rank, are in one process's
/// order so have one process's bits: every node of a tree keeps its rows in
/// subsample order, which is the whole problem's row order, and each rank
/// holds a block of it, so a node's (or leaf's) rows are one process's taken
/// rank after rank. `R − 1` point-to-point messages in
/// sequence and one gather, of `acc.len()` numbers. A collective call.
pub(super) fn chain(ranks: &dyn Collective, acc: &mut [f64], accumulate: impl FnOnce(&mut [f64])) {
    let (rank, count) = (ranks.rank(), ranks.ranks());
    if rank > 0 {
        ranks.receive(rank - 1, acc);
    }
    accumulate(acc);
    let last = rank + 1 == count;
    if !last {
        ranks.send(rank + 1, acc);
    }
    let all = ranks.gather(if last { acc } else { &[] });
    acc.copy_from_slice(&all);
}

/// Draws `amount` distinct rows of `0..rows` into `out`, sorted (all rows, without
/// using `rng`, when `amount ≥ rows`).
fn draw_subsample(rng: &mut ChaCha8Rng, rows: usize, amount: usize, out: &mut Vec<usize>) {
    out.clear();
    if amount >= rows {
        out.extend(0..rows);
    } else {
        out.extend(index::sample(rng, rows, amount));
        out.sort_unstable();
    }
}

impl Oracle for BoostingOracle {
    fn kind(&self) -> &str {
        KIND
    }

    fn validate(&self) -> Result<(), OracleError> {
        if self.rounds == 0 {
            return Err(invalid("rounds", "must be at least 1"));
        }
        // Every round adds at least one tree of at least one value to the model.
        crate::check_size("rounds", Some(self.rounds), "one call's trees")?;
        if !(self.shrinkage > 0.0 && self.shrinkage <= 1.0) {
            return Err(invalid("shrinkage", &format!("{} is not in (0, 1]", self.shrinkage)));
        }
        if self.subsample == 0 {
            return Err(invalid("subsample", "must be at least 1"));
        }
        if !(0.0..=0.5).contains(&self.min_child_fraction) {
            return Err(invalid("min_child_fraction", &format!("{} is not in [0, 0.5]", self.min_child_fraction)));
        }
        if !(0.0..=1.0).contains(&self.min_split_fraction) {
            return Err(invalid("min_split_fraction", &format!("{} is not in [0, 1]", self.min_split_fraction)));
        }
        if self.max_depth == Some(0) {
            return Err(invalid("max_depth", "must be at least 1 (or None)"));
        }
        if matches!(self.max_leaves, Some(l) if l < 2) {
            return Err(invalid("max_leaves", "must be at least 2 (or None)"));
        }
        if !(2..=256).contains(&self.bins) {
            return Err(invalid("bins", &format!("{} is not in 2..=256", self.bins)));
        }
        if !(self.leaf_l2.is_finite() && self.leaf_l2 >= 0.0) {
            return Err(invalid("leaf_l2", &format!("{} is not finite and >= 0", self.leaf_l2)));
        }
        self.leaf_lbfgs.validate()
    }

    fn fit(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        ctx: FitContext,
    ) -> Result<Box<dyn Model>, OracleError> {
        let warm = downcast_warm::<BoostingModel>(warm, KIND)?;
        let mut scores = vec![0.0; problem.rows() * problem.classes()];
        let model = self.start(problem, warm, &mut scores, true)?;
        Ok(Box::new(self.boost(problem, model, &mut scores, ctx, None)?))
    }

    /// The losses are read off the training scores the fit tracks anyway.
    fn fit_with_losses(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        ctx: FitContext,
    ) -> Result<(Box<dyn Model>, FitLosses), OracleError> {
        let mut scores = vec![0.0; problem.rows() * problem.classes()];
        self.fit_losses(problem, warm, ctx, &mut scores, true)
    }

    fn maintains_scores(&self) -> bool {
        true
    }

    /// LightGBM's data-parallel scheme: the bin thresholds from the whole
    /// problem's sample (its rows' values gathered), each round's subsample
    /// drawn over the whole problem's rows, every node's gradient (and
    /// Hessian) histogram and the root's totals completed over the ranks,
    /// the split decisions on the whole subsample's counts, each leaf's
    /// re-fit (or Newton step) on sums over the ranks; the training scores
    /// are updated by each rank for its rows. Every sum over the subsample
    /// is continued rank after rank in one process's row order (`chain`), so
    /// the model is one process's, bit for bit.
    fn distributed(&self) -> bool {
        true
    }

    /// Continues from the given scores instead of scoring the warm ensemble:
    /// each call then costs its own rounds only, however large the ensemble.
    fn fit_scored(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        ctx: FitContext,
        scores: &mut [f64],
    ) -> Result<(Box<dyn Model>, FitLosses), OracleError> {
        self.fit_losses(problem, warm, ctx, scores, false)
    }
}

/// Loader for the registry: decodes a [`BoostingModel`] and checks its invariants.
pub fn load(bytes: &[u8]) -> Result<Box<dyn Model>, OracleError> {
    let model: BoostingModel = decode(KIND, bytes)?;
    model.check()?;
    Ok(Box::new(model))
}
