//! The multi-layer perceptron function class (ch. §1.9.5; NIPS §8; docs/MATH.md §5):
//!
//! ```text
//! g(φ, y) = (W tanh(V φ))_y
//! ```
//!
//! with one hidden layer of `H` tanh units (`H = 100` in the papers). As in the
//! papers there is no bias beyond the constant column the caller puts in `φ`;
//! [`MlpOracle::biases`] optionally adds a hidden bias `c` and an output bias
//! `a`, giving `(W tanh(V φ + c) + a)_y`.
//!
//! # Fitting
//!
//! Minibatch stochastic gradient descent with momentum on the biased logistic
//! loss `L` of [`crate::problem`]. For a minibatch `B` the gradient is that of
//! the weighted **mean** row loss
//!
//! ```text
//! L_B = 1/(|B| w̄) Σ_{k∈B} w_k ℓ_k,      w̄ = Σ_k w_k / n   (w̄ = 1 unweighted),
//! ```
//!
//! an unbiased estimate of the gradient of `L / Σ_k w_k`. The mean (not the sum)
//! is the reading under which the papers' step sizes (0.25 unary, 0.05 pairwise)
//! are sensible: with the sum, a minibatch of 100 rows would multiply them by 100
//! and SGD diverges on the denoising problems. The update is the papers'
//! ("the new step is a combination of .1 times the new gradient plus .9 times the
//! old step", NIPS footnote 2):
//!
//! ```text
//! s ← μ s + (1 − μ) ∇L_B,      θ ← θ − η s,      μ = 0.9.
//! ```
//!
//! One fit runs [`MlpOracle::epochs`] passes over a fresh random permutation of
//! the rows. A warm start continues from the previous weights (the momentum `s`
//! restarts at zero); a cold start draws `V` (and `c`) from
//! `N(0, init_scale² / d)` and sets `W = 0` (and `a = 0`), so a cold start begins
//! at the zero function. All randomness comes from [`FitContext::seed`]
//! (ChaCha8): the same seed gives a bit-identical model whatever the number of
//! threads.
//!
//! After every epoch the full loss `L` is evaluated and the best parameters seen
//! are kept (for a warm start, the start included), so the returned model's loss
//! never exceeds the warm-start model's, as [`Oracle::fit`] requires; if no epoch
//! improved on the warm start, the warm start is returned unchanged. A cold
//! start's loss is not evaluated: it is returned only if every epoch diverges.
//!
//! # Defaults inside Algorithm 1
//!
//! [`MlpOracle::unary`] and [`MlpOracle::pairwise`] use the chapter's minibatch
//! of 100 rows and **one epoch per oracle call**. On denoising-like problems
//! (`benches/oracles.rs`, group `mlp`) a cold fit with one epoch removes ≥ 99.6%
//! of the loss that ten epochs remove (unary, 160,000 × 2, step 0.25, mean loss
//! per row: zero function 9.995, 1 epoch 1.711, 2: 1.706, 5: 1.706, 10: 1.702;
//! pairwise, 320,000 × 2 × 4 classes, step 0.05: zero 1.825, 1 epoch 0.633,
//! 2: 0.632, 5: 0.630, 10: 0.629), at one tenth of the time, and the oracle is
//! called again, warm-started, in every learning iteration. With minibatches of
//! 1000 (NIPS) one epoch is far from enough at step 0.05 (0.873 after one epoch,
//! 0.632 after ten). On a problem that does not change between calls, SGD at
//! these step sizes reaches a noise floor where a one-epoch warm call often
//! finds nothing better and returns its warm start; more epochs per call go
//! further. [`MlpOracle::step_halvings`] lets such a call try again from its
//! warm start at half the step (and half again, up to that many times): a
//! smaller step has a lower noise floor, so the call finds progress the fixed
//! step cannot (default 0, the papers' fixed step).
//!
//! # Performance
//!
//! A minibatch is split into row chunks of equal size (whole blocks) that
//! depends only on the shapes and the minibatch size, at most about `2²¹`
//! floating-point operations each (so a chunk's arrays stay in the L2 cache,
//! and a small minibatch is not split: waking a second thread costs more than
//! it gains); their gradients are computed in parallel (rayon) and summed in
//! chunk order, so the reduction is deterministic. Within a chunk the rows' values are held
//! value-major (`Rows`: one contiguous slice per input, hidden unit or class),
//! and each pass runs over all the chunk's rows:
//!
//! * the forward pass computes groups of 16 rows as vector lanes, with hidden
//!   units (and classes) in tiles of `TILE` (4), so each weight loaded serves
//!   16 rows and the sums stay in registers; a hidden unit's `tanh` is taken
//!   while its sums are still in registers (its division then overlaps the
//!   next tile's products); the last rows (fewer than 16) go by blocks of
//!   `BLOCK` (4) rows, their `tanh` in a pass of its own;
//! * the row losses run four rows at a time, one lane each
//!   (`problem::row_losses`, bit for bit [`crate::row_loss`]);
//! * the backward pass forms `∂ℓ/∂t` two hidden units and 16 rows at a time,
//!   and each weight's gradient as a sum over the chunk's rows held in
//!   registers (`outer_sums`), eight or more weights at a time.
//!
//! On CPUs with AVX-512 the forward products, `tanh` and the outer-product
//! sums run on eight-lane registers (`avx512`: two tiles or eight rows per
//! register), the rest as on AVX2; they compute every value by the same
//! operations in the same order, so they give the same bits (tests
//! `mlp_gradient_is_the_plain_arithmetic_bit_for_bit`,
//! `mlp_wide_kernels_are_the_portable_ones_bit_for_bit`).
//!
//! Every gradient entry receives its rows' terms one row at a time in row
//! order, the bias entries per block of 4 rows first; how the passes are
//! blocked does not change a bit (test
//! `mlp_gradient_is_the_plain_arithmetic_bit_for_bit`). The kernels work on a
//! *packed* copy of the parameters (tiles contiguous, hidden units padded with
//! zeros to whole tiles), converted from and to the model's layout once per
//! call; there is no allocation per minibatch. The next minibatch's rows (a
//! random sample of the data) are prefetched while one is computed: one line
//! of each row at the start (the CPU looks up their pages at once), the rest
//! spread over the forward pass.
//! Full-loss evaluation and [`Model::score`] run in parallel over rows. `tanh`
//! is a vectorisable polynomial version (absolute error < 4·10⁻¹⁶).
//!
//! Every product is added to its sum by one multiply-add, fused where the CPU
//! has FMA ([`fused_arithmetic`]: x86-64 with AVX2 + FMA, where the kernels are
//! compiled for those features and chosen at run time, and AArch64) and
//! separate elsewhere. So a fit is bit-for-bit reproducible on every CPU of the
//! same kind; a CPU without FMA gives a model that differs in the last bits.

use fastmath::{Arith, Fused, Plain};
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{
    Features, FitContext, FitLosses, Model, Oracle, OracleError, Problem, check_model_shape, check_score_buffer,
    decode, downcast_warm, problem::row_losses,
};

#[cfg(target_arch = "x86_64")]
mod avx512;

/// Registry name of [`MlpModel`].
pub const KIND: &str = "mlp";

/// Step size the papers use for factors over single variables (NIPS §8, ch. §1.9.5).
pub const UNARY_STEP_SIZE: f64 = 0.25;

/// Step size the papers use for factors over pairs of variables (NIPS §8, ch. §1.9.5).
pub const PAIRWISE_STEP_SIZE: f64 = 0.05;

/// The most epochs one fit may run (a fit is not interrupted by Ctrl-C).
pub const MAX_EPOCHS: usize = 1_000_000;

/// Rows per chunk of the full-loss evaluation and of scoring. Equal to the chunk
/// of [`crate::logistic_loss`], so the loss computed inside a fit is bit-identical
/// to [`crate::model_loss`] of the returned model.
const EVAL_CHUNK: usize = 4096;

/// Most floating-point work per minibatch chunk (about `2²¹` operations: 160
/// rows of the 42-input, 8-class unary network, so its 100-row minibatches are
/// one chunk; 96 rows of the 3-input, 64-class pairwise one, two chunks). A
/// minibatch takes ≈ 150 µs, and waking a second thread for it and summing the
/// chunks' gradients cost more than the second thread gained: an epoch of
/// 400000 rows of the unary network took 0.61 s on one thread and 0.61–0.68 s
/// on two with `2¹⁹` (3 chunks), 0.58–0.60 s and 0.50–0.51 s with this (the
/// loss pass still runs in parallel); the pairwise one 1.30 s and 1.16–1.22 s
/// with `2¹⁹` (5 chunks), 1.26–1.31 s and 0.89–0.93 s with this.
const CHUNK_WORK: usize = 1 << 21;

/// Fewest rows in a minibatch chunk.
const MIN_CHUNK_ROWS: usize = 8;

/// Rows per block: minibatch chunks hold whole blocks (padded with zero rows),
/// and the bias gradients sum their rows' terms per block first.
const BLOCK: usize = 4;

/// Rows of `V` (or `W`) whose gradient sums the backward pass holds in
/// registers at once.
const OUTER: usize = 8;

/// Rows per step of the full-loss evaluation and of scoring.
const EVAL_ROWS: usize = 16;

/// Hidden units of `V`, and classes of `W`, per register tile.
const TILE: usize = 4;

/// Hyper-parameters of the MLP oracle (ch. §1.9.5; see the module docs for the
/// exact objective and update).
///
/// ```
/// use oracles::mlp::MlpOracle;
/// use oracles::{FitContext, Features, Oracle, Problem, model_loss};
///
/// // Label 1 inside the band |x − 0.5| < 0.25: not linearly separable in (x, 1).
/// let xs: Vec<f64> = (0..400).map(|k| k as f64 / 399.0).collect();
/// let phi: Vec<f64> = xs.iter().flat_map(|&x| [x, 1.0]).collect();
/// let labels: Vec<usize> = xs.iter().map(|&x| usize::from((x - 0.5).abs() < 0.25)).collect();
/// let bias = vec![0.0; 2 * xs.len()];
/// let problem = Problem::new(Features::new(&phi, xs.len(), 2)?, &labels, &bias, 2, None)?;
///
/// let oracle = MlpOracle { hidden: 20, minibatch: 20, epochs: 60, ..MlpOracle::unary() };
/// let model = oracle.fit(&problem, None, FitContext { seed: 3 })?;
/// // A linear function of (x, 1) cannot do better than ln 2 ≈ 0.69 per row here.
/// assert!(model_loss(model.as_ref(), &problem)? < 0.1 * 400.0);
/// # Ok::<(), oracles::OracleError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlpOracle {
    /// Hidden units `H` (papers: 100).
    pub hidden: usize,
    /// Step size `η` (papers: [`UNARY_STEP_SIZE`] for unary factors,
    /// [`PAIRWISE_STEP_SIZE`] for pairwise ones), applied to the momentum step of
    /// the mean minibatch gradient.
    pub step_size: f64,
    /// Momentum `μ ∈ [0, 1)`: the step is `μ · old step + (1 − μ) · gradient`
    /// (papers: 0.9).
    pub momentum: f64,
    /// Rows per minibatch (NIPS: 1000; chapter: 100). Capped at the number of rows.
    pub minibatch: usize,
    /// Passes over the data per oracle call (not given by the papers; default 1,
    /// see the module docs, "Defaults inside Algorithm 1").
    pub epochs: usize,
    /// Standard deviation of a cold-start input weight, times `1/√d`.
    pub init_scale: f64,
    /// Add a hidden bias `c` and an output bias `a` (not in the papers, whose only
    /// bias is the constant input feature).
    pub biases: bool,
    /// When no epoch of a warm-started call lowers the loss below the warm
    /// start's, run the call's epochs again from the warm start with half the
    /// step size, up to this many times (default 0: return the warm start, the
    /// papers' fixed step; at most [`MAX_STEP_HALVINGS`]). Lets a call below
    /// fixed-step SGD's noise floor still make progress (module docs, "Defaults
    /// inside Algorithm 1").
    #[serde(default)]
    pub step_halvings: usize,
}

impl MlpOracle {
    /// The papers' MLP for unary factors: 100 hidden units, step size 0.25,
    /// momentum 0.9, no biases, with the chapter's minibatch of 100 and one epoch
    /// per call (module docs, "Defaults inside Algorithm 1").
    pub fn unary() -> Self {
        Self {
            hidden: 100,
            step_size: UNARY_STEP_SIZE,
            momentum: 0.9,
            minibatch: 100,
            epochs: 1,
            init_scale: 1.0,
            biases: false,
            step_halvings: 0,
        }
    }

    /// As [`MlpOracle::unary`] with the pairwise step size 0.05.
    pub fn pairwise() -> Self {
        Self { step_size: PAIRWISE_STEP_SIZE, ..Self::unary() }
    }

    /// The parameter layout this oracle fits on a problem of `dim` features and `classes` classes.
    fn layout(&self, dim: usize, classes: usize) -> Layout {
        Layout { dim, hidden: self.hidden, classes, biases: self.biases }
    }
}

impl Default for MlpOracle {
    /// [`MlpOracle::unary`].
    fn default() -> Self {
        Self::unary()
    }
}

/// Most halvings of [`MlpOracle::step_halvings`]: a step below 2⁻⁶⁰ of the
/// configured one no longer moves the parameters.
pub const MAX_STEP_HALVINGS: usize = 60;

fn invalid(name: &'static str, reason: String) -> OracleError {
    OracleError::InvalidHyperParameter { name, reason }
}

impl Oracle for MlpOracle {
    fn kind(&self) -> &str {
        KIND
    }

    fn validate(&self) -> Result<(), OracleError> {
        if self.hidden == 0 {
            return Err(invalid("hidden", "at least one hidden unit is needed".into()));
        }
        if !(self.step_size.is_finite() && self.step_size > 0.0) {
            return Err(invalid("step_size", format!("{} is not a finite positive number", self.step_size)));
        }
        if !(0.0..1.0).contains(&self.momentum) {
            return Err(invalid("momentum", format!("{} is not in [0, 1)", self.momentum)));
        }
        if self.minibatch == 0 {
            return Err(invalid("minibatch", "a minibatch needs at least one row".into()));
        }
        if self.epochs == 0 {
            return Err(invalid("epochs", "at least one epoch is needed".into()));
        }
        if self.epochs > MAX_EPOCHS {
            return Err(invalid(
                "epochs",
                format!(
                    "{} > {MAX_EPOCHS} per call (a fit runs to its end uninterrupted); give more learning \
                     iterations instead",
                    self.epochs
                ),
            ));
        }
        if self.step_halvings > MAX_STEP_HALVINGS {
            return Err(invalid(
                "step_halvings",
                format!(
                    "{} > {MAX_STEP_HALVINGS} (the step would be below 2^-{MAX_STEP_HALVINGS} of itself)",
                    self.step_halvings
                ),
            ));
        }
        if !(self.init_scale.is_finite() && self.init_scale > 0.0) {
            // With W = 0 and V = 0 every hidden unit is 0 and no gradient reaches either.
            return Err(invalid("init_scale", format!("{} is not a finite positive number", self.init_scale)));
        }
        Ok(())
    }

    fn fit(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        ctx: FitContext,
    ) -> Result<Box<dyn Model>, OracleError> {
        Ok(self.fit_impl(problem, warm, ctx, None)?.0)
    }

    /// The warm start's loss and the returned model's are computed anyway.
    fn fit_with_losses(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        ctx: FitContext,
    ) -> Result<(Box<dyn Model>, FitLosses), OracleError> {
        self.fit_impl(problem, warm, ctx, None)
    }

    /// Kept scores spare the fit two forward passes over the problem: the warm
    /// start's loss comes from them, and the pass that measures each epoch's
    /// loss writes the scores too.
    fn maintains_scores(&self) -> bool {
        true
    }

    /// Every epoch visits every row.
    fn reads_every_bias(&self) -> bool {
        true
    }

    fn fit_scored(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        ctx: FitContext,
        scores: &mut [f64],
    ) -> Result<(Box<dyn Model>, FitLosses), OracleError> {
        check_score_buffer(problem.features(), problem.classes(), scores)?;
        self.fit_impl(problem, warm, ctx, Some(scores))
    }
}

impl MlpOracle {
    /// [`Oracle::fit`], returning the losses it measured; with `scores` (the
    /// warm start's scores on entry, zeros without one) it takes the warm
    /// start's loss from them and leaves the returned model's scores there,
    /// bit for bit what [`Model::score`] writes.
    fn fit_impl(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        ctx: FitContext,
        mut scores: Option<&mut [f64]>,
    ) -> Result<(Box<dyn Model>, FitLosses), OracleError> {
        self.validate()?;
        let (dim, classes) = (problem.dim(), problem.classes());
        crate::error::check_size(
            "hidden",
            dim.checked_add(classes + 1).and_then(|n| n.checked_mul(self.hidden)).and_then(|n| n.checked_add(classes)),
            &format!("{} hidden units over {dim} features and {classes} classes", self.hidden),
        )?;
        let layout = self.layout(dim, classes);
        let warm = downcast_warm::<MlpModel>(warm, KIND)?;
        let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);
        let start = match warm {
            Some(m) => {
                check_model_shape(m, problem.dim(), problem.classes())?;
                if m.layout.hidden != self.hidden {
                    return Err(invalid(
                        "hidden",
                        format!(
                            "the warm-start model has {} hidden units, the oracle {}",
                            m.layout.hidden, self.hidden
                        ),
                    ));
                }
                if m.layout.biases != self.biases {
                    return Err(invalid(
                        "biases",
                        format!("the warm-start model has biases = {}, the oracle {}", m.layout.biases, self.biases),
                    ));
                }
                m.params.clone()
            }
            None => layout.init(self.init_scale, &mut rng),
        };
        let mut params = layout.pack(&start);
        // A cold start need not be beaten (it is kept only if every epoch diverges),
        // so its loss is not evaluated.
        let mut best_loss = match (warm, scores.as_deref()) {
            (Some(_), Some(s)) => crate::logistic_loss(problem, s, None),
            (Some(_), None) => layout.loss(&params, problem),
            (None, _) => f64::INFINITY,
        };
        let warm_loss = warm.map(|_| best_loss);
        // Whether `scores` holds the scores of `best` (a warm start's are given).
        let mut scores_of_best = warm.is_some();
        let mut best = params.clone();
        let mut improved = false;
        if problem.total_weight() > 0.0 {
            let mut sgd = Sgd::new(layout, self.minibatch.min(problem.rows()), problem);
            let mut order: Vec<usize> = (0..problem.rows()).collect();
            let mut step = self.step_size;
            // A cold start is never retried: it has no loss to beat.
            let attempts = if warm.is_some() { 1 + self.step_halvings } else { 1 };
            for attempt in 0..attempts {
                if attempt > 0 {
                    // Nothing improved on the warm start: start again from it, slower.
                    params.copy_from_slice(&best);
                    sgd.velocity.fill(0.0);
                    step *= 0.5;
                }
                for _ in 0..self.epochs {
                    order.shuffle(&mut rng);
                    let mut batches = order.chunks(self.minibatch).peekable();
                    while let Some(batch) = batches.next() {
                        // The next minibatch's rows (a random sample) load while this one is computed.
                        let ahead = batches.peek().copied().unwrap_or_default();
                        sgd.step(&mut params, problem, batch, ahead, step, self.momentum);
                    }
                    if !params.iter().all(|p| p.is_finite()) {
                        break;
                    }
                    let loss = match scores.as_deref_mut() {
                        Some(s) => layout.loss_scored(&params, problem, s),
                        None => layout.loss(&params, problem),
                    };
                    scores_of_best = loss < best_loss;
                    if loss < best_loss {
                        best_loss = loss;
                        best.copy_from_slice(&params);
                        improved = true;
                    }
                }
                if improved {
                    break;
                }
            }
        }
        let model: Box<dyn Model> = match warm {
            Some(m) if !improved => m.clone_model(),
            _ => Box::new(MlpModel { layout, params: layout.unpack(&best) }),
        };
        if let Some(s) = scores.filter(|_| !scores_of_best) {
            model.score(problem.features(), s)?;
        }
        // A cold start whose every epoch diverged returns its initial weights, never measured.
        let loss = best_loss.is_finite().then_some(best_loss);
        Ok((model, FitLosses { warm_loss, loss }))
    }
}

/// A fitted MLP `g(φ, y) = (W tanh(V φ + c) + a)_y` (`c`, `a` absent unless
/// fitted with [`MlpOracle::biases`]).
///
/// ```
/// use oracles::{Features, FitContext, Oracle, Problem};
/// let oracle = oracles::mlp::MlpOracle { hidden: 4, epochs: 5, ..Default::default() };
/// let x = [0.0, 1.0, 0.2, 1.0, 0.8, 1.0, 1.0, 1.0];
/// let p = Problem::new(Features::new(&x, 4, 2).unwrap(), &[0, 0, 1, 1], &[0.0; 8], 2, None).unwrap();
/// let model = oracle.fit(&p, None, FitContext { seed: 7 }).unwrap();
/// let mlp = model.as_any().downcast_ref::<oracles::mlp::MlpModel>().unwrap();
/// assert_eq!(mlp.hidden(), 4);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlpModel {
    layout: Layout,
    params: Vec<f64>,
}

impl MlpModel {
    /// Hidden units `H`.
    pub fn hidden(&self) -> usize {
        self.layout.hidden
    }

    /// Whether the model has the hidden and output biases `c`, `a`.
    pub fn has_biases(&self) -> bool {
        self.layout.biases
    }

    /// Input weights `V`, stored input-major: entry `i · H + j` is `V_{j,i}`.
    pub fn input_weights(&self) -> &[f64] {
        &self.params[self.layout.v()]
    }

    /// Hidden bias `c` (`H` values; empty without biases).
    pub fn hidden_bias(&self) -> &[f64] {
        &self.params[self.layout.hidden_bias()]
    }

    /// Output weights `W`, row-major `C × H`: entry `y · H + j` is `W_{y,j}`.
    pub fn output_weights(&self) -> &[f64] {
        &self.params[self.layout.w()]
    }

    /// Output bias `a` (`C` values; empty without biases).
    pub fn output_bias(&self) -> &[f64] {
        &self.params[self.layout.output_bias()]
    }
}

impl Model for MlpModel {
    crate::impl_model_plumbing!(KIND);

    fn dim(&self) -> usize {
        self.layout.dim
    }

    fn classes(&self) -> usize {
        self.layout.classes
    }

    fn score(&self, features: Features<'_>, out: &mut [f64]) -> Result<(), OracleError> {
        check_model_shape(self, features.dim(), self.layout.classes)?;
        check_score_buffer(features, self.layout.classes, out)?;
        let c = self.layout.classes;
        let packed = self.layout.pack(&self.params);
        let net = self.layout.net(&packed);
        out.par_chunks_mut(EVAL_CHUNK * c).enumerate().for_each(|(chunk, out)| {
            let mut block = Rows::new(self.layout, EVAL_ROWS);
            let start = chunk * EVAL_CHUNK;
            evaluate_rows(&net, features, None, (start, start + out.len() / c), &mut block, Some(out));
        });
        Ok(())
    }

    /// `{dim, classes, hidden, V (H × d), c, W (C × H), a}`, weights as nested rows
    /// (`c`, `a` empty without biases).
    fn to_json(&self) -> Option<serde_json::Value> {
        let (d, h) = (self.layout.dim, self.layout.hidden);
        let v: Vec<Vec<f64>> = (0..h).map(|j| (0..d).map(|i| self.input_weights()[i * h + j]).collect()).collect();
        let w: Vec<&[f64]> = self.output_weights().chunks_exact(h).collect();
        Some(serde_json::json!({
            "dim": d,
            "classes": self.layout.classes,
            "hidden": h,
            "V": v,
            "c": self.hidden_bias(),
            "W": w,
            "a": self.output_bias(),
        }))
    }
}

/// Loader for the registry: decodes an [`MlpModel`] and checks that its
/// parameter vector matches its shape and is finite.
///
/// ```
/// use oracles::{Features, FitContext, Model, Oracle, Problem};
/// let x = [0.0, 1.0];
/// let p = Problem::new(Features::new(&x, 2, 1).unwrap(), &[0, 1], &[0.0; 4], 2, None).unwrap();
/// let m = oracles::mlp::MlpOracle { hidden: 2, ..Default::default() }.fit(&p, None, FitContext { seed: 0 }).unwrap();
/// assert_eq!(oracles::mlp::load(&m.to_bytes().unwrap()).unwrap().kind(), "mlp");
/// ```
pub fn load(bytes: &[u8]) -> Result<Box<dyn Model>, OracleError> {
    let model = decode::<MlpModel>(KIND, bytes)?;
    let l = model.layout;
    let consistent = l.hidden > 0
        && l.classes >= 2
        && l.checked_len() == Some(model.params.len())
        && model.params.iter().all(|p| p.is_finite());
    if !consistent {
        return Err(OracleError::InvalidModel {
            kind: KIND.to_string(),
            reason: format!(
                "{} parameters (all finite: {}) for {} features, {} hidden units and {} classes",
                model.params.len(),
                model.params.iter().all(|p| p.is_finite()),
                l.dim,
                l.hidden,
                l.classes
            ),
        });
    }
    // |tanh| ≤ 1, so a score is at most Σ_j |W_yj| + |a_y|: that must stay finite.
    let w = model.output_weights();
    let bound = (0..l.classes).fold(0.0f64, |m, y| {
        let row: f64 = w[y * l.hidden..(y + 1) * l.hidden].iter().map(|v| v.abs()).sum();
        m.max(row + model.output_bias().get(y).map_or(0.0, |a| a.abs()))
    });
    if !bound.is_finite() {
        return Err(OracleError::InvalidModel {
            kind: KIND.to_string(),
            reason: "the output weights add up beyond the largest double".into(),
        });
    }
    Ok(Box::new(model))
}

/// Shape of the model's flat parameter vector `[V (input-major), c, W (row-major), a]`
/// and of the *packed* vector the kernels work on (see [`Layout::pack`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Layout {
    dim: usize,
    hidden: usize,
    classes: usize,
    biases: bool,
}

impl Layout {
    fn bias_len(&self, n: usize) -> usize {
        if self.biases { n } else { 0 }
    }

    fn v(&self) -> std::ops::Range<usize> {
        0..self.dim * self.hidden
    }

    fn hidden_bias(&self) -> std::ops::Range<usize> {
        let s = self.v().end;
        s..s + self.bias_len(self.hidden)
    }

    fn w(&self) -> std::ops::Range<usize> {
        let s = self.hidden_bias().end;
        s..s + self.classes * self.hidden
    }

    fn output_bias(&self) -> std::ops::Range<usize> {
        let s = self.w().end;
        s..s + self.bias_len(self.classes)
    }

    fn len(&self) -> usize {
        self.output_bias().end
    }

    /// [`Layout::len`] without overflow, for untrusted (decoded) layouts.
    fn checked_len(&self) -> Option<usize> {
        let v = self.dim.checked_mul(self.hidden)?;
        let w = self.classes.checked_mul(self.hidden)?;
        v.checked_add(w)?.checked_add(self.bias_len(self.hidden))?.checked_add(self.bias_len(self.classes))
    }

    /// Hidden units rounded up to whole tiles; the padding units have zero
    /// weights in and out, so they stay exactly zero during SGD.
    fn padded_hidden(&self) -> usize {
        self.hidden.div_ceil(TILE) * TILE
    }

    /// Classes in whole tiles of `W`; the remaining `classes % TILE` rows of `W`
    /// are stored one by one.
    fn tiled_classes(&self) -> usize {
        self.classes / TILE * TILE
    }

    fn packed_len(&self) -> usize {
        let hp = self.padded_hidden();
        (self.dim + self.classes) * hp + self.bias_len(hp) + self.bias_len(self.classes)
    }

    /// Calls `f(model index, packed index)` for every parameter. The packed
    /// layout is `[V, c, W, a]` with `V` as tiles of [`TILE`] hidden units, each
    /// `dim × TILE`; `c` padded to whole tiles; `W` as groups of [`TILE`] classes,
    /// each `H_padded × TILE`, then single classes, each `H_padded`; and `a`.
    fn for_each_index(&self, mut f: impl FnMut(usize, usize)) {
        let (d, h, hp, c) = (self.dim, self.hidden, self.padded_hidden(), self.classes);
        for j in 0..h {
            for i in 0..d {
                f(i * h + j, (j / TILE * d + i) * TILE + j % TILE);
            }
        }
        let (model_c, packed_c) = (d * h, d * hp);
        for j in 0..self.bias_len(h) {
            f(model_c + j, packed_c + j);
        }
        let (model_w, packed_w) = (model_c + self.bias_len(h), packed_c + self.bias_len(hp));
        for y in 0..c {
            let (group, k) = if y < self.tiled_classes() { (y / TILE * TILE, TILE) } else { (y, 1) };
            for j in 0..h {
                f(model_w + y * h + j, packed_w + group * hp + j * k + (y - group));
            }
        }
        let (model_a, packed_a) = (model_w + c * h, packed_w + c * hp);
        for y in 0..self.bias_len(c) {
            f(model_a + y, packed_a + y);
        }
    }

    /// The kernels' layout of the model parameters `p` (see [`Layout::for_each_index`]).
    fn pack(&self, p: &[f64]) -> Vec<f64> {
        let mut q = vec![0.0; self.packed_len()];
        self.for_each_index(|m, k| q[k] = p[m]);
        q
    }

    /// The model parameters of the packed vector `q` (the padding is dropped).
    fn unpack(&self, q: &[f64]) -> Vec<f64> {
        let mut p = vec![0.0; self.len()];
        self.for_each_index(|m, k| p[m] = q[k]);
        p
    }

    fn packed_ranges(&self) -> [usize; 3] {
        let hp = self.padded_hidden();
        let v = self.dim * hp;
        let c = v + self.bias_len(hp);
        [v, c, c + self.classes * hp]
    }

    /// Views of a packed parameter vector.
    fn net<'a>(&self, q: &'a [f64]) -> Net<'a> {
        let [v_end, c_end, w_end] = self.packed_ranges();
        Net {
            dim: self.dim,
            hp: self.padded_hidden(),
            tiled: self.tiled_classes(),
            v: &q[..v_end],
            c: &q[v_end..c_end],
            w: &q[c_end..w_end],
            a: &q[w_end..],
        }
    }

    /// Mutable views of a packed vector, e.g. a gradient.
    fn net_mut<'a>(&self, q: &'a mut [f64]) -> NetMut<'a> {
        let [v_end, c_end, w_end] = self.packed_ranges();
        let (v, rest) = q.split_at_mut(v_end);
        let (c, rest) = rest.split_at_mut(c_end - v_end);
        let (w, a) = rest.split_at_mut(w_end - c_end);
        NetMut { v, c, w, a }
    }

    /// Cold-start model parameters: `V, c ~ N(0, scale²/d)`, `W = a = 0`.
    fn init(&self, scale: f64, rng: &mut ChaCha8Rng) -> Vec<f64> {
        let mut p = vec![0.0; self.len()];
        let sd = scale / (self.dim.max(1) as f64).sqrt();
        for x in &mut p[self.v().start..self.hidden_bias().end] {
            *x = sd * rng.sample::<f64, _>(StandardNormal);
        }
        p
    }

    /// The loss `L` of the packed parameters `q` on `problem`, in parallel over
    /// rows with the chunking and summation order of [`crate::logistic_loss`].
    fn loss(&self, q: &[f64], problem: &Problem<'_>) -> f64 {
        let net = self.net(q);
        let n = problem.rows();
        let partial: Vec<f64> = (0..n.div_ceil(EVAL_CHUNK))
            .into_par_iter()
            .map(|chunk| {
                let mut block = Rows::new(*self, EVAL_ROWS);
                let rows = (chunk * EVAL_CHUNK, ((chunk + 1) * EVAL_CHUNK).min(n));
                evaluate_rows(&net, problem.features(), Some(problem), rows, &mut block, None)
            })
            .collect();
        partial.iter().sum()
    }

    /// [`Self::loss`], also writing every row's scores into `scores`
    /// (`rows × classes`, bit for bit what [`Model::score`] writes).
    fn loss_scored(&self, q: &[f64], problem: &Problem<'_>, scores: &mut [f64]) -> f64 {
        let net = self.net(q);
        let c = problem.classes();
        let partial: Vec<f64> = scores
            .par_chunks_mut(EVAL_CHUNK * c)
            .enumerate()
            .map(|(chunk, out)| {
                let mut block = Rows::new(*self, EVAL_ROWS);
                let start = chunk * EVAL_CHUNK;
                let rows = (start, start + out.len() / c);
                evaluate_rows(&net, problem.features(), Some(problem), rows, &mut block, Some(out))
            })
            .collect();
        partial.iter().sum()
    }

    /// Rows per parallel minibatch chunk, whole blocks: a function of the shapes
    /// and the minibatch size only, so the gradient's summation order does not
    /// depend on the number of threads.
    fn chunk_rows(&self, minibatch: usize) -> usize {
        // Multiply-adds per row of forward + backward, and ~20 for one tanh.
        let work = self.padded_hidden() * (2 * self.dim + 3 * self.classes + 20);
        let most = (CHUNK_WORK / work.max(1)).max(MIN_CHUNK_ROWS);
        // As many chunks as that needs, of equal size (whole blocks).
        minibatch.div_ceil(minibatch.div_ceil(most).max(1)).div_ceil(BLOCK) * BLOCK
    }
}

/// Packed parameters (see [`Layout::for_each_index`]); `c`, `a` empty without biases.
struct Net<'a> {
    dim: usize,
    /// Padded hidden units.
    hp: usize,
    /// Classes in whole tiles of `W`.
    tiled: usize,
    v: &'a [f64],
    c: &'a [f64],
    w: &'a [f64],
    a: &'a [f64],
}

/// Mutable packed parameter blocks, e.g. of a gradient.
struct NetMut<'a> {
    v: &'a mut [f64],
    c: &'a mut [f64],
    w: &'a mut [f64],
    a: &'a mut [f64],
}

/// Scratch for up to `stride` rows. Each array is value-major: entry
/// `j · stride + r` holds value `j` (input, hidden unit or class) of row `r`,
/// so the values of consecutive rows are contiguous (the forward pass's vector
/// lanes) and each value's row is one contiguous slice (the backward pass's sums).
struct Rows {
    /// Rows the arrays hold, whole blocks of [`BLOCK`].
    stride: usize,
    /// Inputs `φ` (zero in the padding rows of a short last block).
    x: Vec<f64>,
    /// Hidden activations `t = tanh(V φ + c)`.
    t: Vec<f64>,
    /// Scores `s = W t + a`.
    s: Vec<f64>,
    /// `∂ℓ/∂s` (zero in padding rows).
    g: Vec<f64>,
    /// `∂ℓ/∂t`, then `∂ℓ/∂(V φ + c)`.
    dz: Vec<f64>,
    /// `g` of the tiled classes row by row: `[class tile][row]`, `TILE` classes each.
    g_rows: Vec<[f64; TILE]>,
    /// `dz` row by row: `[hidden tile][row]`, `TILE` units each.
    dz_rows: Vec<[f64; TILE]>,
    /// One block's scores, biases and `∂ℓ/∂s` as [`row_losses`] takes them
    /// (`[class]`, one lane per row).
    s_block: Vec<Lanes>,
    b_block: Vec<Lanes>,
    g_block: Vec<Lanes>,
    /// One row's (computed) bias.
    row_b: Vec<f64>,
    /// Two columns of `W` (two hidden units' weights in every class).
    w_cols: Vec<[f64; 2]>,
}

/// One value per row of a block.
type Lanes = [f64; BLOCK];

impl Rows {
    /// Scratch for `rows` rows (rounded up to whole blocks).
    fn new(layout: Layout, rows: usize) -> Self {
        let (hp, c) = (layout.padded_hidden(), layout.classes);
        let stride = rows.max(1).div_ceil(BLOCK) * BLOCK;
        Self {
            stride,
            x: vec![0.0; layout.dim * stride],
            t: vec![0.0; hp * stride],
            s: vec![0.0; c * stride],
            g: vec![0.0; c * stride],
            dz: vec![0.0; hp * stride],
            g_rows: vec![[0.0; TILE]; layout.tiled_classes() / TILE * stride],
            dz_rows: vec![[0.0; TILE]; hp / TILE * stride],
            s_block: vec![[0.0; BLOCK]; c],
            b_block: vec![[0.0; BLOCK]; c],
            g_block: vec![[0.0; BLOCK]; c],
            row_b: vec![0.0; c],
            w_cols: vec![[0.0; 2]; c],
        }
    }

    /// Loads rows `rows` (at most `stride`) into the columns of `x` and zeroes
    /// the padding up to a whole block; returns the columns in use.
    #[inline(always)]
    fn gather(&mut self, features: Features<'_>, rows: impl ExactSizeIterator<Item = usize>) -> usize {
        let (n, st) = (rows.len(), self.stride);
        let used = n.div_ceil(BLOCK) * BLOCK;
        for (r, k) in rows.enumerate() {
            for (xi, &v) in self.x.chunks_exact_mut(st).zip(features.row(k)) {
                xi[r] = v;
            }
        }
        for xi in self.x.chunks_exact_mut(st) {
            xi[n..used].fill(0.0);
        }
        used
    }

    /// The loss terms `scale · w_k ℓ_k` of the block of columns at `r0`, which
    /// holds rows `rows` (at most [`BLOCK`]; [`row_losses`] lane by lane), and
    /// with `GRAD` their gradients `∂/∂s` in the block's columns of `g` (zero
    /// in padding columns).
    #[inline(always)]
    fn block_losses<const GRAD: bool>(
        &mut self,
        problem: &Problem<'_>,
        r0: usize,
        rows: impl ExactSizeIterator<Item = usize>,
        scale: f64,
    ) -> Lanes {
        let st = self.stride;
        for (sb, sy) in self.s_block.iter_mut().zip(self.s.chunks_exact(st)) {
            *sb = lanes(sy, r0);
        }
        let n = rows.len();
        let (mut labels, mut weights) = ([0; BLOCK], [0.0; BLOCK]);
        for (r, k) in rows.enumerate() {
            for (bb, &v) in self.b_block.iter_mut().zip(problem.bias_row(k, &mut self.row_b)) {
                bb[r] = v;
            }
            (labels[r], weights[r]) = (problem.labels()[k], problem.weight(k) * scale);
        }
        for bb in &mut self.b_block {
            bb[n..].fill(0.0);
        }
        let grad = if GRAD { Some(self.g_block.as_mut_slice()) } else { None };
        let losses = row_losses(&self.s_block, &self.b_block, &labels, &weights, n, grad);
        if GRAD {
            for (gy, gb) in self.g.chunks_exact_mut(st).zip(&self.g_block) {
                gy[r0..r0 + BLOCK].copy_from_slice(gb);
            }
        }
        losses
    }
}

/// `a[at..at + L]` as an array (one vector of lanes).
#[inline(always)]
fn lanes<const L: usize>(a: &[f64], at: usize) -> [f64; L] {
    *<&[f64; L]>::try_from(&a[at..at + L]).expect("a slice of L values")
}

/// `out[q][r] = start[q][r] + Σ_i w[i][q] · x[i][r]` (`i` in order) for one tile
/// of `TILE` outputs and the block of rows at `r0` — and, if `PAIR`, the next
/// block too: `w` holds the tile's weights input by input, `x` and `out` are
/// value-major with row stride `st`. (The two blocks' sums are two named
/// arrays: held in one array of blocks, they are not kept in registers.)
#[inline(always)]
fn tile_sums<A: Arith, const PAIR: bool>(
    start: [[f64; BLOCK]; TILE],
    w: &[f64],
    x: &[f64],
    st: usize,
    r0: usize,
    out: &mut [f64],
) {
    let r1 = r0 + BLOCK;
    let (mut a0, mut a1) = (start, start);
    for (wi, xi) in w.chunks_exact(TILE).zip(x.chunks_exact(st)) {
        add_products::<A>(&mut a0, wi, &lanes(xi, r0));
        if PAIR {
            add_products::<A>(&mut a1, wi, &lanes(xi, r1));
        }
    }
    for (oq, (s0, s1)) in out.chunks_exact_mut(st).zip(a0.iter().zip(&a1)) {
        oq[r0..r1].copy_from_slice(s0);
        if PAIR {
            oq[r1..r1 + BLOCK].copy_from_slice(s1);
        }
    }
}

/// `[[v(q); BLOCK]; TILE]`: each of a tile's starting values in every row's lane.
#[inline(always)]
fn splat(v: impl Fn(usize) -> f64) -> [[f64; BLOCK]; TILE] {
    let mut out = [[0.0; BLOCK]; TILE];
    for (q, oq) in out.iter_mut().enumerate() {
        *oq = [v(q); BLOCK];
    }
    out
}

/// `acc[q][r] += w[q] · x[r]`: one weight tile's products with a block of rows.
#[inline(always)]
fn add_products<A: Arith>(acc: &mut [[f64; BLOCK]; TILE], w: &[f64], x: &[f64; BLOCK]) {
    for (aq, &wq) in acc.iter_mut().zip(w) {
        for r in 0..BLOCK {
            aq[r] = A::madd(wq, x[r], aq[r]);
        }
    }
}

/// Rows `0..used` of the `TILE`-row tiles of the value-major `src` written row
/// by row into `dst` (`[tile][row]`).
#[inline(always)]
fn rows_of_tiles(src: &[f64], st: usize, used: usize, dst: &mut [[f64; TILE]]) {
    for (tile, out) in src.chunks_exact(TILE * st).zip(dst.chunks_exact_mut(st)) {
        for (r, o) in out[..used].iter_mut().enumerate() {
            for (k, ok) in o.iter_mut().enumerate() {
                *ok = tile[k * st + r];
            }
        }
    }
}

/// Outer-product sums of the backward pass: for every group `m` of `out`
/// (`TILE` values each) and the matching row `a[m]` of the value-major `a`,
/// `out[m][k] += a[m][r] · b[r][k]` for `r = 0, 1, …` in turn — the same
/// operations, in the same order, as adding the rows' products one row at a
/// time, but with the sums held in registers across the rows.
#[inline(always)]
fn outer_sums<A: Arith>(out: &mut [f64], a: &[f64], st: usize, b: &[[f64; TILE]]) {
    let mut outs = out.chunks_exact_mut(OUTER * TILE);
    let mut rows = a.chunks_exact(OUTER * st);
    for (o, a) in (&mut outs).zip(&mut rows) {
        outer_sum::<A, OUTER>(o, a, st, b);
    }
    for (o, a) in outs.into_remainder().chunks_exact_mut(TILE).zip(rows.remainder().chunks_exact(st)) {
        outer_sum::<A, 1>(o, a, st, b);
    }
}

/// [`outer_sums`] of `M` groups.
#[inline(always)]
fn outer_sum<A: Arith, const M: usize>(out: &mut [f64], a: &[f64], st: usize, b: &[[f64; TILE]]) {
    let n = b.len();
    // Loops, not `std::array::from_fn`: that is not always inlined, and a call
    // leaves the AVX2 build of the kernel.
    let mut rows: [&[f64]; M] = [&[]; M];
    let mut acc = [[0.0; TILE]; M];
    for (m, (row, am)) in rows.iter_mut().zip(&mut acc).enumerate() {
        *row = &a[m * st..m * st + n];
        *am = lanes(out, m * TILE);
    }
    let a = rows;
    for (r, br) in b.iter().enumerate() {
        for m in 0..M {
            let am = a[m][r];
            for k in 0..TILE {
                acc[m][k] = A::madd(am, br[k], acc[m][k]);
            }
        }
    }
    for (o, am) in out.chunks_exact_mut(TILE).zip(&acc) {
        o.copy_from_slice(am);
    }
}

/// `dz[h][r] = (Σ_y w[y][h] · g[y][r]) · (1 − t[h][r]²)` (`y` in order) for
/// two hidden units `h` and the `L` rows at `r0`: `g`, `t` and `dz` value-major
/// with row stride `st`.
#[inline(always)]
fn dz_rows<A: Arith, const L: usize>(w: &[[f64; 2]], g: &[f64], st: usize, r0: usize, t: &[f64], dz: &mut [f64]) {
    let (mut a0, mut a1) = ([0.0; L], [0.0; L]);
    for (y, &[w0, w1]) in w.iter().enumerate() {
        let gy = lanes::<L>(g, y * st + r0);
        for r in 0..L {
            a0[r] = A::madd(w0, gy[r], a0[r]);
            a1[r] = A::madd(w1, gy[r], a1[r]);
        }
    }
    for (h, acc) in [a0, a1].iter().enumerate() {
        let t = lanes::<L>(t, h * st + r0);
        let dz: &mut [f64; L] = (&mut dz[h * st + r0..h * st + r0 + L]).try_into().expect("L rows");
        for r in 0..L {
            dz[r] = acc[r] * (1.0 - t[r] * t[r]);
        }
    }
}

impl Net<'_> {
    /// Where `W[y][j]` (class `y`, hidden unit `j`) is in the packed `w`: in
    /// tile `y / TILE` at `j · TILE + y % TILE` for the tiled classes, in
    /// class-major rows after them for the others.
    #[inline(always)]
    fn w_index(&self, y: usize, j: usize) -> usize {
        if y < self.tiled {
            (y / TILE) * self.hp * TILE + j * TILE + y % TILE
        } else {
            self.tiled * self.hp + (y - self.tiled) * self.hp + j
        }
    }

    /// Forward pass of rows `0..used` (whole blocks): `t = tanh(V φ + c)`,
    /// `s = W t + a`, 16 rows (four blocks) at a time, then a pair of blocks
    /// and a last block. Each row is computed by the same sequence of
    /// operations whatever the other rows hold, so a row's scores do not
    /// depend on the rows beside it.
    ///
    /// Groups of 16 rows take their hidden units' `tanh` while the sums are
    /// in registers; the rows after them, in a pass of their own. The caller's
    /// `ahead(step, steps)` runs at `steps` points spread over the pass (after
    /// each tile of hidden units of each group), `step = 0..steps`.
    #[inline(always)]
    fn forward<K: Kernels>(&self, b: &mut Rows, used: usize, mut ahead: impl FnMut(usize, usize)) {
        const WIDE: usize = 4 * BLOCK;
        let wide = used / WIDE * WIDE;
        let pairs = wide + (used - wide) / (2 * BLOCK) * (2 * BLOCK);
        let (st, tiles) = (b.stride, self.hp / TILE);
        let steps = wide / WIDE * tiles;
        for (group, r0) in (0..wide).step_by(WIDE).enumerate() {
            for (u, tu) in b.t.chunks_exact_mut(TILE * st).enumerate() {
                K::tile_sums_16::<true>(self.hidden_start(u), self.hidden_tile(u), &b.x, st, r0, tu);
                ahead(group * tiles + u, steps);
            }
        }
        if steps == 0 {
            ahead(0, 1);
        }
        if wide < pairs {
            self.hidden_sums::<K::A, true>(b, wide);
        }
        if pairs < used {
            self.hidden_sums::<K::A, false>(b, pairs);
        }
        for tj in b.t.chunks_exact_mut(st) {
            K::tanh_slice(&mut tj[wide..used]);
        }
        for r0 in (0..wide).step_by(WIDE) {
            self.output_sums_16::<K>(b, r0);
        }
        if wide < pairs {
            self.output_sums::<K::A, true>(b, wide);
        }
        if pairs < used {
            self.output_sums::<K::A, false>(b, pairs);
        }
    }

    /// The starting values `c` of the hidden units of tile `u` (zeros without biases).
    #[inline(always)]
    fn hidden_start(&self, u: usize) -> [f64; TILE] {
        match self.c.get(u * TILE..(u + 1) * TILE) {
            Some(c) => lanes(c, 0),
            None => [0.0; TILE],
        }
    }

    /// The weights of `V` of the hidden units of tile `u`, input by input.
    #[inline(always)]
    fn hidden_tile(&self, u: usize) -> &[f64] {
        // By index, not `chunks_exact(dim · TILE)`: with 0 features the tile has no weights.
        let tile_v = self.dim * TILE;
        &self.v[u * tile_v..(u + 1) * tile_v]
    }

    /// `t = V φ + c` (before the tanh) of the block of rows at `r0` and, if
    /// `PAIR`, of the next block too, each block a vector of [`BLOCK`] lanes
    /// ([`tile_sums`] per tile of hidden units).
    #[inline(always)]
    fn hidden_sums<A: Arith, const PAIR: bool>(&self, b: &mut Rows, r0: usize) {
        let st = b.stride;
        for (u, tu) in b.t.chunks_exact_mut(TILE * st).enumerate() {
            let start = self.hidden_start(u);
            tile_sums::<A, PAIR>(splat(|q| start[q]), self.hidden_tile(u), &b.x, st, r0, tu);
        }
    }

    /// `s = W t + a` of the block of rows at `r0` and, if `PAIR`, of the next
    /// (as [`Net::hidden_sums`]).
    #[inline(always)]
    fn output_sums<A: Arith, const PAIR: bool>(&self, b: &mut Rows, r0: usize) {
        let (st, hp) = (b.stride, self.hp);
        let (w_tiled, s_tiled) = (&self.w[..self.tiled * hp], &mut b.s[..self.tiled * st]);
        for (g, (wg, sg)) in w_tiled.chunks_exact(hp * TILE).zip(s_tiled.chunks_exact_mut(TILE * st)).enumerate() {
            let start = self.output_start(g);
            tile_sums::<A, PAIR>(splat(|k| start[k]), wg, &b.t, st, r0, sg);
        }
        self.single_output_sums::<A, PAIR>(b, r0);
    }

    /// [`Net::output_sums`] of the 16 rows at `r0` ([`Kernels::tile_sums_16`]).
    #[inline(always)]
    fn output_sums_16<K: Kernels>(&self, b: &mut Rows, r0: usize) {
        let (st, hp) = (b.stride, self.hp);
        let (w_tiled, s_tiled) = (&self.w[..self.tiled * hp], &mut b.s[..self.tiled * st]);
        for (g, (wg, sg)) in w_tiled.chunks_exact(hp * TILE).zip(s_tiled.chunks_exact_mut(TILE * st)).enumerate() {
            K::tile_sums_16::<false>(self.output_start(g), wg, &b.t, st, r0, sg);
        }
        self.single_output_sums::<K::A, true>(b, r0);
        self.single_output_sums::<K::A, true>(b, r0 + 2 * BLOCK);
    }

    /// The starting values `a` of the classes of tile `g` (zeros without biases).
    #[inline(always)]
    fn output_start(&self, g: usize) -> [f64; TILE] {
        let mut start = [0.0; TILE];
        for (k, s) in start.iter_mut().enumerate() {
            *s = self.a.get(g * TILE + k).copied().unwrap_or(0.0);
        }
        start
    }

    /// The scores of the classes beyond the whole tiles, one by one, of the
    /// block of rows at `r0` and, if `PAIR`, of the next.
    #[inline(always)]
    fn single_output_sums<A: Arith, const PAIR: bool>(&self, b: &mut Rows, r0: usize) {
        let (st, hp) = (b.stride, self.hp);
        let r1 = r0 + BLOCK;
        let bias = |y: usize| self.a.get(y).copied().unwrap_or(0.0);
        let w_single = &self.w[self.tiled * hp..];
        let s_single = &mut b.s[self.tiled * st..];
        for (y, (wy, sy)) in w_single.chunks_exact(hp).zip(s_single.chunks_exact_mut(st)).enumerate() {
            let (mut a0, mut a1) = ([bias(self.tiled + y); BLOCK], [bias(self.tiled + y); BLOCK]);
            for (&wj, tj) in wy.iter().zip(b.t.chunks_exact(st)) {
                let (t0, t1) = (lanes::<BLOCK>(tj, r0), lanes::<BLOCK>(tj, if PAIR { r1 } else { r0 }));
                for r in 0..BLOCK {
                    a0[r] = A::madd(wj, t0[r], a0[r]);
                    if PAIR {
                        a1[r] = A::madd(wj, t1[r], a1[r]);
                    }
                }
            }
            sy[r0..r1].copy_from_slice(&a0);
            if PAIR {
                sy[r1..r1 + BLOCK].copy_from_slice(&a1);
            }
        }
    }

    /// Backward pass of rows `0..used` after [`Net::forward`], with `b.g =
    /// ∂ℓ/∂s`: adds the gradient of the rows' loss to `grad`. Every gradient
    /// entry receives its rows' terms one row at a time in row order; the
    /// biases' terms are summed per block of [`BLOCK`] rows first.
    #[inline(always)]
    fn backward<K: Kernels>(&self, b: &mut Rows, used: usize, grad: &mut NetMut<'_>) {
        let (st, hp) = (b.stride, self.hp);
        for (ay, gy) in grad.a.iter_mut().zip(b.g.chunks_exact(st)) {
            for block in gy[..used].chunks_exact(BLOCK) {
                *ay += block.iter().sum::<f64>();
            }
        }
        // dz = ∂ℓ/∂(Vφ + c) = Wᵀ g ⊙ (1 − t²): per pair of hidden units (`hp`
        // is even), their columns of `W` in class order, then four blocks of
        // rows at a time (eight sums in flight per lane), each row's terms in
        // class order, then the factor.
        let wide = used / (4 * BLOCK) * (4 * BLOCK);
        for j in (0..hp).step_by(2) {
            for (y, wy) in b.w_cols.iter_mut().enumerate() {
                *wy = [self.w[self.w_index(y, j)], self.w[self.w_index(y, j + 1)]];
            }
            let (dz, t) = (&mut b.dz[j * st..(j + 2) * st], &b.t[j * st..(j + 2) * st]);
            for r0 in (0..wide).step_by(4 * BLOCK) {
                dz_rows::<K::A, { 4 * BLOCK }>(&b.w_cols, &b.g, st, r0, t, dz);
            }
            for r0 in (wide..used).step_by(BLOCK) {
                dz_rows::<K::A, BLOCK>(&b.w_cols, &b.g, st, r0, t, dz);
            }
        }
        // ∂ℓ/∂W: the tiled classes through their rows, the others one by one.
        let (gw_tiled, gw_single) = grad.w.split_at_mut(self.tiled * hp);
        let (g_tiled, g_single) = b.g.split_at(self.tiled * st);
        K::rows_of_tiles(g_tiled, st, used, &mut b.g_rows);
        K::outer_sums_tiles(gw_tiled, &b.t, st, &b.g_rows, used);
        for (gwy, gy) in gw_single.chunks_exact_mut(hp).zip(g_single.chunks_exact(st)) {
            for (gwj, tj) in gwy.iter_mut().zip(b.t.chunks_exact(st)) {
                for (&t, &gv) in tj[..used].iter().zip(&gy[..used]) {
                    *gwj = K::A::madd(t, gv, *gwj);
                }
            }
        }
        for (cj, dzj) in grad.c.iter_mut().zip(b.dz.chunks_exact(st)) {
            for block in dzj[..used].chunks_exact(BLOCK) {
                *cj += block.iter().sum::<f64>();
            }
        }
        K::rows_of_tiles(&b.dz, st, used, &mut b.dz_rows);
        K::outer_sums_tiles(grad.v, &b.x, st, &b.dz_rows, used);
    }
}

/// Whether the kernels use fused multiply-adds ([`fastmath::Fused`]): on
/// x86-64 CPUs with AVX2 and FMA (every x86-64 CPU since 2013–2015) and on
/// AArch64 (FMA is part of the base architecture); elsewhere separate
/// multiplies and adds ([`Plain`]). The two differ in the last bits, so a fit's
/// model depends on which of the two the CPU runs, and on nothing else about it.
pub fn fused_arithmetic() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(target_arch = "aarch64")]
    {
        true
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// One build of the kernels: its arithmetic, and the loops that have
/// hand-vectorised versions (by default the portable ones, which the compiler
/// vectorises). Every build computes each value by the same operations in the
/// same order, so builds of one arithmetic give the same bits.
trait Kernels {
    /// How products are added to their sums.
    type A: Arith;

    /// [`tile_sums`] of 16 rows (four blocks) at `r0`, each output starting
    /// from `start[q]`, and with `TANH` the [`tanh`] of each sum.
    #[inline(always)]
    fn tile_sums_16<const TANH: bool>(start: [f64; TILE], w: &[f64], x: &[f64], st: usize, r0: usize, out: &mut [f64]) {
        let start = splat(|q| start[q]);
        tile_sums::<Self::A, true>(start, w, x, st, r0, out);
        tile_sums::<Self::A, true>(start, w, x, st, r0 + 2 * BLOCK, out);
        if TANH {
            for oq in out.chunks_exact_mut(st) {
                Self::tanh_slice(&mut oq[r0..r0 + 4 * BLOCK]);
            }
        }
    }

    /// `v ← tanh v` for every value of `t`.
    #[inline(always)]
    fn tanh_slice(t: &mut [f64]) {
        for v in t {
            *v = tanh::<Self::A>(*v);
        }
    }

    /// The rows of the tiles of `src` as [`Kernels::outer_sums_tiles`] takes
    /// them ([`rows_of_tiles`]).
    #[inline(always)]
    fn rows_of_tiles(src: &[f64], st: usize, used: usize, dst: &mut [[f64; TILE]]) {
        rows_of_tiles(src, st, used, dst);
    }

    /// [`outer_sums`] of every tile: `out` holds the tiles one after another,
    /// `b` their rows' values as [`Kernels::rows_of_tiles`] wrote them (row
    /// stride `st`), of which rows `0..used` count.
    #[inline(always)]
    fn outer_sums_tiles(out: &mut [f64], a: &[f64], st: usize, b: &[[f64; TILE]], used: usize) {
        outer_sums_from::<Self::A>(out, a, st, b, used, 0);
    }
}

impl Kernels for Plain {
    type A = Plain;
}

impl Kernels for Fused {
    type A = Fused;
}

/// The AVX-512 kernels of [`avx512`] where the CPU has AVX-512 F (the portable
/// ones elsewhere), with fused multiply-adds.
#[cfg(target_arch = "x86_64")]
struct Avx512;

#[cfg(target_arch = "x86_64")]
impl Kernels for Avx512 {
    type A = Fused;

    #[inline(always)]
    fn tile_sums_16<const TANH: bool>(start: [f64; TILE], w: &[f64], x: &[f64], st: usize, r0: usize, out: &mut [f64]) {
        if avx512::available() {
            // SAFETY: the CPU has AVX-512 F, checked just above.
            unsafe { avx512::tile_sums_16::<TANH>(start, w, x, st, r0, out) }
        } else {
            Fused::tile_sums_16::<TANH>(start, w, x, st, r0, out);
        }
    }

    #[inline(always)]
    fn tanh_slice(t: &mut [f64]) {
        if avx512::available() {
            // SAFETY: as above.
            unsafe { avx512::tanh_slice(t) }
        } else {
            Fused::tanh_slice(t);
        }
    }

    #[inline(always)]
    fn rows_of_tiles(src: &[f64], st: usize, used: usize, dst: &mut [[f64; TILE]]) {
        if avx512::available() {
            // SAFETY: as above.
            unsafe { avx512::rows_of_pairs(src, st, used, dst) }
        } else {
            rows_of_tiles(src, st, used, dst);
        }
    }

    /// The pairs of tiles that [`avx512::rows_of_pairs`] wrote together go to
    /// [`avx512::outer_sums`], a last odd tile (written as [`rows_of_tiles`]
    /// does) to the portable kernel.
    #[inline(always)]
    fn outer_sums_tiles(out: &mut [f64], a: &[f64], st: usize, b: &[[f64; TILE]], used: usize) {
        // SAFETY: as above.
        let done = if avx512::available() { unsafe { avx512::outer_sums(out, a, st, b, used) } } else { 0 };
        outer_sums_from::<Fused>(out, a, st, b, used, done);
    }
}

/// [`Kernels::outer_sums_tiles`] from tile `first` on, tile by tile.
#[inline(always)]
fn outer_sums_from<A: Arith>(out: &mut [f64], a: &[f64], st: usize, b: &[[f64; TILE]], used: usize, first: usize) {
    let tiles = b.len() / st;
    // By index, not `chunks_exact`: a tile of `V` has no values without features.
    let size = out.len() / tiles.max(1);
    for u in first..tiles {
        outer_sums::<A>(&mut out[u * size..(u + 1) * size], a, st, &b[u * st..u * st + used]);
    }
}

/// Runs a kernel compiled for AVX2 + FMA with fused multiply-adds when
/// [`fused_arithmetic`] says so, else compiled for the baseline target with
/// separate multiplies and adds. Each build is the same Rust code, so all CPUs
/// of one kind give bit-identical results.
macro_rules! dispatch {
    ($generic:ident, ($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn fused<K: Kernels<A = Fused>>($($arg: $ty),*) -> $ret {
            $generic::<K>($($arg),*)
        }

        fn dispatched($($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            if fused_arithmetic() {
                // SAFETY: the CPU supports AVX2 and FMA, checked just above.
                return unsafe {
                    if avx512::available() { fused::<Avx512>($($arg),*) } else { fused::<Fused>($($arg),*) }
                };
            }
            #[cfg(target_arch = "aarch64")]
            return $generic::<Fused>($($arg),*);
            #[allow(unreachable_code)]
            $generic::<Plain>($($arg),*)
        }
    };
}

/// Writes into `grad` (packed) the gradient of `scale · Σ_{k∈rows} w_k ℓ_k`
/// (`rows` at most `b.stride`), prefetching the rows `ahead` meanwhile.
fn gradient_rows(
    net: &Net<'_>,
    problem: &Problem<'_>,
    rows: &[usize],
    ahead: &[usize],
    scale: f64,
    b: &mut Rows,
    grad: &mut NetMut<'_>,
) {
    dispatch!(gradient_kernel, (net: &Net<'_>, problem: &Problem<'_>, rows: &[usize], ahead: &[usize], scale: f64, b: &mut Rows, grad: &mut NetMut<'_>) -> ());
    dispatched(net, problem, rows, ahead, scale, b, grad)
}

/// [`gradient_rows`] in the arithmetic `A`.
#[inline(always)]
fn gradient_kernel<K: Kernels>(
    net: &Net<'_>,
    problem: &Problem<'_>,
    rows: &[usize],
    ahead: &[usize],
    scale: f64,
    b: &mut Rows,
    grad: &mut NetMut<'_>,
) {
    let used = b.gather(problem.features(), rows.iter().copied());
    // The rows ahead: their pages looked up all at once (the lookups overlap),
    // then their lines spread over the forward pass (all at once, they held
    // up the loop that issued them until the memory answered).
    for &k in ahead {
        problem.prefetch_row_start(k);
    }
    let n = ahead.len();
    net.forward::<K>(b, used, |step, steps| {
        for &k in &ahead[step * n / steps..(step + 1) * n / steps] {
            problem.prefetch_row_rest(k);
        }
    });
    for (n, block) in rows.chunks(BLOCK).enumerate() {
        b.block_losses::<true>(problem, n * BLOCK, block.iter().copied(), scale);
    }
    net.backward::<K>(b, used, grad);
}

/// The rows `start..end` of `features` through the network, [`EVAL_ROWS`] at
/// a time: their scores into `scores` (row-major, `(end − start) × classes`)
/// if given, and with `problem` (whose features these are) the sum of their
/// loss terms `Σ_k w_k ℓ_k`, added row by row in row order (0 without).
fn evaluate_rows(
    net: &Net<'_>,
    features: Features<'_>,
    problem: Option<&Problem<'_>>,
    (start, end): (usize, usize),
    b: &mut Rows,
    scores: Option<&mut [f64]>,
) -> f64 {
    #[inline(always)]
    fn generic<K: Kernels>(
        net: &Net<'_>,
        features: Features<'_>,
        problem: Option<&Problem<'_>>,
        (start, end): (usize, usize),
        b: &mut Rows,
        mut scores: Option<&mut [f64]>,
    ) -> f64 {
        let (c, st) = (b.row_b.len(), b.stride);
        let mut sum = 0.0;
        for k0 in (start..end).step_by(st) {
            let k1 = (k0 + st).min(end);
            let used = b.gather(features, k0..k1);
            // The next step's rows load meanwhile (read in order, but the
            // CPU's own prefetching does not run far enough ahead).
            let next = k1..(k1 + st).min(end);
            net.forward::<K>(b, used, |step, steps| {
                let n = next.len();
                for k in next.start + step * n / steps..next.start + (step + 1) * n / steps {
                    features.prefetch_row(k);
                }
            });
            if let Some(out) = scores.as_deref_mut() {
                for (r, row) in out[(k0 - start) * c..(k1 - start) * c].chunks_exact_mut(c).enumerate() {
                    for (v, s) in row.iter_mut().zip(b.s.chunks_exact(st)) {
                        *v = s[r];
                    }
                }
            }
            let Some(problem) = problem else { continue };
            for r0 in (0..k1 - k0).step_by(BLOCK) {
                let block = k0 + r0..(k0 + r0 + BLOCK).min(k1);
                let n = block.len();
                // Row by row into the running sum, as the loss's summation order says.
                for loss in &b.block_losses::<false>(problem, r0, block, 1.0)[..n] {
                    sum += loss;
                }
            }
        }
        sum
    }
    dispatch!(generic, (net: &Net<'_>, features: Features<'_>, problem: Option<&Problem<'_>>, rows: (usize, usize), b: &mut Rows, scores: Option<&mut [f64]>) -> f64);
    dispatched(net, features, problem, (start, end), b, scores)
}

/// `1.5·2⁵²`: adding it rounds to an integer held in the low mantissa bits.
const ROUND: f64 = 6_755_399_441_055_744.0;
/// `ln 2` in two parts: `k · LN2_HI` is exact for the `k` of [`tanh`].
const LN2_HI: f64 = 6.931_471_803_691_238e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
/// `tanh` of larger magnitudes rounds to ±1.
const TANH_CLAMP: f64 = 20.0;
/// `1/n!` for `n = 13` down to 2: [`tanh`]'s Taylor series of `exp`.
const INV_FACTORIAL: [f64; 12] = [
    1.0 / 6_227_020_800.0,
    1.0 / 479_001_600.0,
    1.0 / 39_916_800.0,
    1.0 / 3_628_800.0,
    1.0 / 362_880.0,
    1.0 / 40_320.0,
    1.0 / 5_040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
];

/// `tanh x` to an absolute error below `4·10⁻¹⁶`, branch-free so that a loop over
/// the hidden units vectorises; `libm`'s `tanh` dominated the fit's time on
/// low-dimensional inputs.
///
/// `tanh |x| = (1 − e)/(1 + e)` with `e = exp(−2|x|)`, `|x|` clamped to 20
/// (`tanh 20` rounds to 1). `exp(y) = 2^k exp(r)` with `k = round(y / ln 2)`
/// obtained by the `1.5·2⁵²` rounding trick (whose low mantissa bits then hold
/// `k`), `r = y − k ln 2` split in two parts for precision, and `exp(r)` by its
/// Taylor series to degree 13 (truncation error `< 10⁻¹⁷` for `|r| ≤ ln 2 / 2`).
#[inline(always)]
fn tanh<A: Arith>(x: f64) -> f64 {
    let y = -2.0 * x.abs().min(TANH_CLAMP);
    let z = A::madd(y, std::f64::consts::LOG2_E, ROUND);
    let k = z - ROUND;
    let r = (y - k * LN2_HI) - k * LN2_LO;
    let mut p = INV_FACTORIAL[0];
    for &c in &INV_FACTORIAL[1..] {
        p = A::madd(p, r, c);
    }
    p = A::madd(p, r, 1.0);
    p = A::madd(p, r, 1.0);
    // k ∈ [−58, 0]: 2^k is a normal number; the low bits of z hold k in two's complement.
    let two_k = f64::from_bits(z.to_bits().wrapping_add(1023) << 52);
    let e = p * two_k;
    ((1.0 - e) / (1.0 + e)).copysign(x)
}

/// `s ← μ s + (1 − μ) g`, `θ ← θ − η s` element by element (module docs),
/// compiled for AVX2 where the CPU has it (the same operations, so the same
/// bits: there is no multiply-add to fuse).
fn momentum_update(theta: &mut [f64], s: &mut [f64], g: &[f64], step: f64, momentum: f64) {
    #[inline(always)]
    fn generic(theta: &mut [f64], s: &mut [f64], g: &[f64], step: f64, momentum: f64) {
        for ((p, s), &g) in theta.iter_mut().zip(s).zip(g) {
            *s = momentum * *s + (1.0 - momentum) * g;
            *p -= step * *s;
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn wide(theta: &mut [f64], s: &mut [f64], g: &[f64], step: f64, momentum: f64) {
        generic(theta, s, g, step, momentum);
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { wide(theta, s, g, step, momentum) };
    }
    generic(theta, s, g, step, momentum);
}

/// Preallocated state of minibatch SGD with momentum for one fit, on packed parameters.
struct Sgd {
    layout: Layout,
    chunk_rows: usize,
    /// `1 / w̄`, so the minibatch gradient estimates that of `L / Σ_k w_k`.
    inv_mean_weight: f64,
    /// One packed gradient per chunk, `chunks × packed_len`; chunk 0 receives the sum.
    grads: Vec<f64>,
    blocks: Vec<Rows>,
    /// The momentum step `s`.
    velocity: Vec<f64>,
}

impl Sgd {
    fn new(layout: Layout, minibatch: usize, problem: &Problem<'_>) -> Self {
        Self::with_chunk_rows(layout, minibatch, problem, layout.chunk_rows(minibatch))
    }

    fn with_chunk_rows(layout: Layout, minibatch: usize, problem: &Problem<'_>, chunk_rows: usize) -> Self {
        let chunks = minibatch.div_ceil(chunk_rows).max(1);
        let len = layout.packed_len();
        Self {
            layout,
            chunk_rows,
            inv_mean_weight: problem.rows() as f64 / problem.total_weight(),
            grads: vec![0.0; chunks * len],
            blocks: (0..chunks).map(|_| Rows::new(layout, chunk_rows)).collect(),
            velocity: vec![0.0; len],
        }
    }

    /// Writes into `self.grads[..packed_len]` the gradient of
    /// `scale · Σ_{k∈rows} w_k ℓ_k` at the packed parameters `q`; the chunks'
    /// gradients are summed in chunk order. The rows `ahead` (the next
    /// minibatch) are prefetched meanwhile, each chunk an equal share.
    fn gradient(&mut self, q: &[f64], problem: &Problem<'_>, rows: &[usize], ahead: &[usize], scale: f64) {
        let layout = self.layout;
        let len = layout.packed_len();
        let net = layout.net(q);
        let chunks = rows.len().div_ceil(self.chunk_rows);
        let share = ahead.len().div_ceil(chunks.max(1)).max(1);
        let work = |c: usize, grad: &mut [f64], block: &mut Rows, rows: &[usize]| {
            grad.fill(0.0);
            let ahead = ahead.get(c * share..ahead.len().min((c + 1) * share)).unwrap_or_default();
            gradient_rows(&net, problem, rows, ahead, scale, block, &mut layout.net_mut(grad));
        };
        let grads = &mut self.grads[..chunks * len];
        let blocks = &mut self.blocks[..chunks];
        if chunks == 1 {
            work(0, grads, &mut blocks[0], rows);
        } else {
            grads
                .par_chunks_mut(len)
                .zip(blocks.par_iter_mut().zip(rows.par_chunks(self.chunk_rows)))
                .enumerate()
                .for_each(|(c, (grad, (block, rows)))| work(c, grad, block, rows));
            let (total, rest) = grads.split_at_mut(len);
            for part in rest.chunks_exact(len) {
                for (t, p) in total.iter_mut().zip(part) {
                    *t += p;
                }
            }
        }
    }

    /// One momentum step on the minibatch `rows` (module docs).
    fn step(
        &mut self,
        q: &mut [f64],
        problem: &Problem<'_>,
        rows: &[usize],
        ahead: &[usize],
        step: f64,
        momentum: f64,
    ) {
        let scale = self.inv_mean_weight / rows.len() as f64;
        self.gradient(q, problem, rows, ahead, scale);
        let len = self.layout.packed_len();
        momentum_update(q, &mut self.velocity, &self.grads[..len], step, momentum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ModelRegistry, encode, fit_monotone, model_loss};

    /// A random problem: features with a constant last column, random labels,
    /// random biases with some −∞ entries (never on the label) if `hard`.
    struct Data {
        x: Vec<f64>,
        labels: Vec<usize>,
        bias: Vec<f64>,
        weights: Vec<f64>,
        rows: usize,
        dim: usize,
        classes: usize,
    }

    impl Data {
        fn random(rows: usize, dim: usize, classes: usize, hard: bool, seed: u64) -> Self {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut x = Vec::with_capacity(rows * dim);
            let mut labels = Vec::with_capacity(rows);
            let mut bias = Vec::with_capacity(rows * classes);
            for _ in 0..rows {
                for j in 0..dim {
                    x.push(if j + 1 == dim { 1.0 } else { rng.random_range(-1.0..1.0) });
                }
                let label = rng.random_range(0..classes);
                labels.push(label);
                for y in 0..classes {
                    let b = if hard && y != label && rng.random_bool(0.3) {
                        f64::NEG_INFINITY
                    } else {
                        rng.random_range(-2.0..2.0)
                    };
                    bias.push(b);
                }
            }
            let weights = (0..rows).map(|_| rng.random_range(0.0..2.0)).collect();
            Self { x, labels, bias, weights, rows, dim, classes }
        }

        /// The band problem of the doc example: label 1 iff |x − 0.5| < 0.25, on (x, 1).
        fn band(rows: usize) -> Self {
            let xs: Vec<f64> = (0..rows).map(|k| k as f64 / (rows - 1) as f64).collect();
            Self {
                x: xs.iter().flat_map(|&x| [x, 1.0]).collect(),
                labels: xs.iter().map(|&x| usize::from((x - 0.5).abs() < 0.25)).collect(),
                bias: vec![0.0; 2 * rows],
                weights: vec![1.0; rows],
                rows,
                dim: 2,
                classes: 2,
            }
        }

        fn problem(&self, weighted: bool) -> Problem<'_> {
            let f = Features::new(&self.x, self.rows, self.dim).unwrap();
            let w = weighted.then_some(self.weights.as_slice());
            Problem::new(f, &self.labels, &self.bias, self.classes, w).unwrap()
        }
    }

    fn small_oracle() -> MlpOracle {
        MlpOracle { hidden: 6, minibatch: 16, epochs: 3, ..MlpOracle::unary() }
    }

    fn fit(oracle: &MlpOracle, problem: &Problem<'_>, warm: Option<&dyn Model>, seed: u64) -> Box<dyn Model> {
        oracle.fit(problem, warm, FitContext { seed }).unwrap()
    }

    fn as_mlp(model: &dyn Model) -> &MlpModel {
        model.as_any().downcast_ref::<MlpModel>().unwrap()
    }

    /// The analytic gradient of the full loss against central differences.
    fn check_gradient(data: &Data, biases: bool, weighted: bool) {
        let problem = data.problem(weighted);
        let layout = Layout { dim: data.dim, hidden: 5, classes: data.classes, biases };
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut params = layout.init(1.0, &mut rng);
        for p in &mut params {
            *p += rng.random_range(-0.5..0.5);
        }
        // Several chunks of 3 rows (each a short, padded block), to exercise the reduction.
        let mut sgd = Sgd::with_chunk_rows(layout, data.rows, &problem, 3);
        let rows: Vec<usize> = (0..data.rows).collect();
        sgd.gradient(&layout.pack(&params), &problem, &rows, &[], 1.0);
        let packed = &sgd.grads[..layout.packed_len()];
        let analytic = layout.unpack(packed);
        // The padding hidden units receive no gradient.
        let mut used = vec![false; packed.len()];
        layout.for_each_index(|_, k| used[k] = true);
        assert!(packed.iter().zip(&used).all(|(g, &u)| u || *g == 0.0));
        let h = 1e-6;
        for i in 0..layout.len() {
            let mut p = params.clone();
            p[i] += h;
            let up = layout.loss(&layout.pack(&p), &problem);
            p[i] -= 2.0 * h;
            let down = layout.loss(&layout.pack(&p), &problem);
            let numeric = (up - down) / (2.0 * h);
            let err = (numeric - analytic[i]).abs();
            assert!(err <= 1e-6 * (1.0 + numeric.abs()), "parameter {i}: analytic {} numeric {numeric}", analytic[i]);
        }
    }

    #[test]
    fn mlp_tanh_matches_std() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut xs: Vec<f64> = (0..100_000).map(|_| rng.random_range(-25.0..25.0)).collect();
        xs.extend((0..100_000).map(|_| rng.random_range(-1.0..1.0) * 10f64.powi(rng.random_range(-20..0))));
        xs.extend([0.0, -0.0, 1e-300, -1e-300, 19.999, 20.0, 20.001, -40.0, 1e300, -1e300, f64::MAX, f64::MIN]);
        for x in xs {
            let exact = x.tanh();
            for (fast, kind) in [(tanh::<Plain>(x), "plain"), (tanh::<Fused>(x), "fused")] {
                assert!((fast - exact).abs() <= 4e-16, "{kind} tanh({x}) = {fast}, std {exact}");
                assert_eq!(fast.is_sign_negative(), exact.is_sign_negative(), "sign of {kind} tanh({x})");
                assert!(fast.abs() <= 1.0);
            }
        }
    }

    /// The minibatch gradient of the documented arithmetic, written plainly:
    /// rows in order, chunk by chunk (each chunk's sums from zero, the chunks'
    /// sums added in order), the bias gradients summed per block of `BLOCK`
    /// rows first (padding rows count as zeros), every product added to its sum
    /// by `A::madd`. Model layout.
    fn plain_gradient<A: Arith>(
        layout: Layout,
        p: &[f64],
        problem: &Problem<'_>,
        rows: &[usize],
        chunk_rows: usize,
        scale: f64,
    ) -> Vec<f64> {
        let (d, h, c) = (layout.dim, layout.hidden, layout.classes);
        let (v, hb, w, a) = (&p[layout.v()], &p[layout.hidden_bias()], &p[layout.w()], &p[layout.output_bias()]);
        let mut total = vec![0.0; layout.len()];
        for chunk in rows.chunks(chunk_rows) {
            let mut part = vec![0.0; layout.len()];
            for block in chunk.chunks(BLOCK) {
                let (mut a_lanes, mut c_lanes) = (vec![[0.0; BLOCK]; c], vec![[0.0; BLOCK]; h]);
                for (r, &k) in block.iter().enumerate() {
                    let x = problem.features().row(k);
                    let t: Vec<f64> = (0..h)
                        .map(|j| {
                            let mut z = hb.get(j).copied().unwrap_or(0.0);
                            for i in 0..d {
                                z = A::madd(v[i * h + j], x[i], z);
                            }
                            tanh::<A>(z)
                        })
                        .collect();
                    let s: Vec<f64> = (0..c)
                        .map(|y| {
                            let mut s = a.get(y).copied().unwrap_or(0.0);
                            for j in 0..h {
                                s = A::madd(w[y * h + j], t[j], s);
                            }
                            s
                        })
                        .collect();
                    let mut g = vec![0.0; c];
                    let mut bias = vec![0.0; c];
                    let bias = problem.bias_row(k, &mut bias);
                    crate::row_loss(&s, bias, problem.labels()[k], problem.weight(k) * scale, Some(&mut g));
                    for y in 0..c {
                        a_lanes[y][r] = g[y];
                        for j in 0..h {
                            let e = &mut part[layout.w().start + y * h + j];
                            *e = A::madd(t[j], g[y], *e);
                        }
                    }
                    for j in 0..h {
                        let mut dz = 0.0;
                        for y in 0..c {
                            dz = A::madd(w[y * h + j], g[y], dz);
                        }
                        dz *= 1.0 - t[j] * t[j];
                        c_lanes[j][r] = dz;
                        for i in 0..d {
                            part[i * h + j] = A::madd(x[i], dz, part[i * h + j]);
                        }
                    }
                }
                if layout.biases {
                    for (y, lanes) in a_lanes.iter().enumerate() {
                        part[layout.output_bias().start + y] += lanes.iter().sum::<f64>();
                    }
                    for (j, lanes) in c_lanes.iter().enumerate() {
                        part[layout.hidden_bias().start + j] += lanes.iter().sum::<f64>();
                    }
                }
            }
            for (t, q) in total.iter_mut().zip(&part) {
                *t += q;
            }
        }
        total
    }

    /// The blocked kernels compute exactly [`plain_gradient`]'s arithmetic (with
    /// fused multiply-adds where the kernels use them): bit for bit, whatever the chunk size, class tiles (6 classes: a tile and two
    /// single classes), padded hidden units, biases and weights.
    #[test]
    fn mlp_gradient_is_the_plain_arithmetic_bit_for_bit() {
        for (dim, hidden, classes, rows, chunk_rows, seed) in
            [(3, 5, 6, 37, 3, 1), (7, 9, 8, 50, 12, 2), (42, 17, 2, 61, 13, 3), (1, 4, 4, 9, 40, 4)]
        {
            let data = Data::random(rows, dim, classes, true, seed);
            for (biases, weighted) in [(false, false), (true, true)] {
                let problem = data.problem(weighted);
                let layout = Layout { dim, hidden, classes, biases };
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let mut params = layout.init(1.0, &mut rng);
                for p in &mut params {
                    *p += rng.random_range(-0.5..0.5);
                }
                let mut order: Vec<usize> = (0..rows).collect();
                order.shuffle(&mut rng);
                let mut sgd = Sgd::with_chunk_rows(layout, rows, &problem, chunk_rows);
                // Prefetching rows (some of them its own) changes nothing.
                sgd.gradient(&layout.pack(&params), &problem, &order, &order[rows / 3..], 0.37);
                let kernel = layout.unpack(&sgd.grads[..layout.packed_len()]);
                let plain = if fused_arithmetic() {
                    plain_gradient::<Fused>(layout, &params, &problem, &order, chunk_rows, 0.37)
                } else {
                    plain_gradient::<Plain>(layout, &params, &problem, &order, chunk_rows, 0.37)
                };
                for (i, (k, p)) in kernel.iter().zip(&plain).enumerate() {
                    assert_eq!(k.to_bits(), p.to_bits(), "{dim}×{hidden}×{classes}, parameter {i}: {k} vs {p}");
                }
                // Every build of the kernels, whichever the CPU runs (one chunk of all rows).
                fn one_chunk<K: Kernels>(
                    layout: Layout,
                    p: &[f64],
                    problem: &Problem<'_>,
                    order: &[usize],
                ) -> [Vec<f64>; 2] {
                    let mut block = Rows::new(layout, order.len());
                    let mut grad = vec![0.0; layout.packed_len()];
                    let (q, scale) = (layout.pack(p), 0.37);
                    gradient_kernel::<K>(
                        &layout.net(&q),
                        problem,
                        order,
                        &[],
                        scale,
                        &mut block,
                        &mut layout.net_mut(&mut grad),
                    );
                    [layout.unpack(&grad), plain_gradient::<K::A>(layout, p, problem, order, order.len(), scale)]
                }
                let mut builds = vec![
                    ("plain", one_chunk::<Plain>(layout, &params, &problem, &order)),
                    ("fused", one_chunk::<Fused>(layout, &params, &problem, &order)),
                ];
                #[cfg(target_arch = "x86_64")]
                if avx512::available() {
                    builds.push(("avx512", one_chunk::<Avx512>(layout, &params, &problem, &order)));
                }
                for (build, [kernel, plain]) in builds {
                    for (i, (k, p)) in kernel.iter().zip(&plain).enumerate() {
                        assert_eq!(k.to_bits(), p.to_bits(), "{build}, {dim}×{hidden}×{classes}, parameter {i}");
                    }
                }
            }
        }
    }

    /// The AVX-512 `tanh` gives the portable one's bits on every kind of value
    /// (NaN, ±∞, ±0, subnormals, beyond the clamp, the rounding edges) and
    /// every length of a slice's masked remainder; the products are checked
    /// by `mlp_gradient_is_the_plain_arithmetic_bit_for_bit`.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn mlp_wide_kernels_are_the_portable_ones_bit_for_bit() {
        if !avx512::available() {
            eprintln!("no AVX-512 F on this CPU: nothing to compare");
            return;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut values = vec![
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            f64::MIN_POSITIVE / 8.0,
            -f64::MIN_POSITIVE,
            1e-300,
            TANH_CLAMP,
            -TANH_CLAMP,
            TANH_CLAMP.next_up(),
            19.06,
            0.5 * std::f64::consts::LN_2,
            f64::MAX,
        ];
        for _ in 0..4000 {
            let scale: f64 = [1e-8, 0.1, 1.0, 4.0, 30.0][rng.random_range(0..5)];
            values.push(rng.random_range(-1.0..1.0) * scale);
        }
        for len in [0, 1, 7, 8, 9, 15, 16, 23, values.len()] {
            let mut wide = values[..len].to_vec();
            Avx512::tanh_slice(&mut wide);
            for (&x, w) in values.iter().zip(&wide) {
                let portable = tanh::<Fused>(x);
                assert_eq!(w.to_bits(), portable.to_bits(), "tanh({x:e}): {w:e} vs {portable:e} (length {len})");
            }
        }
    }

    #[test]
    fn mlp_gradient_matches_finite_differences() {
        let data = Data::random(20, 3, 3, false, 1);
        check_gradient(&data, false, false);
        check_gradient(&data, true, true);
    }

    #[test]
    fn mlp_gradient_matches_finite_differences_with_neg_inf_bias() {
        let data = Data::random(20, 3, 5, true, 2);
        assert!(data.bias.contains(&f64::NEG_INFINITY));
        check_gradient(&data, false, true);
        check_gradient(&data, true, false);
    }

    #[test]
    fn mlp_warm_start_never_increases_loss() {
        let data = Data::random(300, 3, 3, true, 3);
        let problem = data.problem(true);
        // A step size this large makes SGD diverge: the fit must fall back to the warm start.
        let wild = MlpOracle { step_size: 1e4, ..small_oracle() };
        let tame = small_oracle();
        let mut model = fit(&tame, &problem, None, 0);
        let mut loss = model_loss(model.as_ref(), &problem).unwrap();
        for round in 1..6 {
            let oracle = if round % 2 == 0 { &wild } else { &tame };
            let next = fit(oracle, &problem, Some(model.as_ref()), round);
            let next_loss = model_loss(next.as_ref(), &problem).unwrap();
            assert!(next_loss <= loss, "round {round}: {next_loss} > {loss}");
            if oracle == &wild {
                assert_eq!(as_mlp(next.as_ref()), as_mlp(model.as_ref()), "a diverged fit must return the warm start");
            }
            model = next;
            loss = next_loss;
        }
        let monotone = fit_monotone(&wild, &problem, Some(model.as_ref()), FitContext { seed: 9 }).unwrap();
        assert!(!monotone.rejected);
        assert_eq!(monotone.previous_loss, Some(monotone.loss));
    }

    #[test]
    fn mlp_halved_steps_find_progress_where_the_fixed_step_finds_none() {
        let data = Data::random(300, 3, 3, true, 3);
        let problem = data.problem(true);
        let tame = small_oracle();
        let warm = fit(&tame, &problem, None, 0);
        let warm_loss = model_loss(warm.as_ref(), &problem).unwrap();
        // At step 1e4 every epoch diverges: without halvings the call returns its warm start…
        let wild = MlpOracle { step_size: 1e4, ..small_oracle() };
        let stuck = fit(&wild, &problem, Some(warm.as_ref()), 1);
        assert_eq!(as_mlp(stuck.as_ref()), as_mlp(warm.as_ref()));
        // …with enough halvings (1e4 / 2^16 ≈ 0.15) it reaches a step that lowers the loss.
        let halving = MlpOracle { step_halvings: 20, ..wild.clone() };
        let moved = fit(&halving, &problem, Some(warm.as_ref()), 1);
        let moved_loss = model_loss(moved.as_ref(), &problem).unwrap();
        assert!(moved_loss < warm_loss, "{moved_loss} !< {warm_loss}");
        // Too few halvings to get there: still the warm start.
        let few = fit(&MlpOracle { step_halvings: 3, ..wild }, &problem, Some(warm.as_ref()), 1);
        assert_eq!(as_mlp(few.as_ref()), as_mlp(warm.as_ref()));
        // A call whose first attempt improves is the same with or without halvings, bit for bit,
        // and a cold start is never retried.
        let with = MlpOracle { step_halvings: 5, ..tame.clone() };
        assert_eq!(as_mlp(fit(&with, &problem, None, 4).as_ref()), as_mlp(fit(&tame, &problem, None, 4).as_ref()));
        let first = fit(&tame, &problem, Some(warm.as_ref()), 2);
        assert!(model_loss(first.as_ref(), &problem).unwrap() < warm_loss);
        assert_eq!(as_mlp(fit(&with, &problem, Some(warm.as_ref()), 2).as_ref()), as_mlp(first.as_ref()));
    }

    /// With kept scores the fit returns the model `fit` returns, bit for bit,
    /// leaves its scores (`Model::score`'s bits) and reports the losses
    /// `model_loss` gives: for a cold start, an improving warm start, a warm
    /// start whose every epoch diverges (the warm start comes back) and one
    /// rescued by halved steps.
    #[test]
    fn mlp_kept_scores_give_the_plain_fit_its_scores_and_losses() {
        let data = Data::random(300, 3, 3, true, 3);
        let problem = data.problem(true);
        let tame = small_oracle();
        let warm = fit(&tame, &problem, None, 0);
        let wild = MlpOracle { step_size: 1e4, ..small_oracle() };
        let rescued = MlpOracle { step_halvings: 20, ..wild.clone() };
        let two_epochs = MlpOracle { epochs: 2, ..small_oracle() };
        let cases: [(&MlpOracle, Option<&dyn Model>); 5] = [
            (&tame, None),
            (&tame, Some(warm.as_ref())),
            (&wild, Some(warm.as_ref())),
            (&rescued, Some(warm.as_ref())),
            (&two_epochs, Some(warm.as_ref())),
        ];
        let c = problem.classes();
        for (i, (oracle, start)) in cases.into_iter().enumerate() {
            let plain = fit(oracle, &problem, start, 7);
            let mut scores = vec![0.0; problem.rows() * c];
            if let Some(w) = start {
                w.score(problem.features(), &mut scores).unwrap();
            }
            let (kept, losses) = oracle.fit_scored(&problem, start, FitContext { seed: 7 }, &mut scores).unwrap();
            assert_eq!(as_mlp(kept.as_ref()), as_mlp(plain.as_ref()), "case {i}: model");
            let mut direct = vec![0.0; problem.rows() * c];
            plain.score(problem.features(), &mut direct).unwrap();
            assert!(scores.iter().zip(&direct).all(|(a, b)| a.to_bits() == b.to_bits()), "case {i}: scores");
            let loss = model_loss(plain.as_ref(), &problem).unwrap();
            assert_eq!(losses.loss.map(f64::to_bits), Some(loss.to_bits()), "case {i}: loss");
            let warm_loss = start.map(|w| model_loss(w, &problem).unwrap().to_bits());
            assert_eq!(losses.warm_loss.map(f64::to_bits), warm_loss, "case {i}: warm loss");
            let (_, without) = oracle.fit_with_losses(&problem, start, FitContext { seed: 7 }).unwrap();
            assert_eq!(without, losses, "case {i}: fit_with_losses");
        }
    }

    #[test]
    fn mlp_seed_determines_the_model() {
        let data = Data::random(200, 4, 3, false, 4);
        let problem = data.problem(false);
        let oracle = MlpOracle { minibatch: 64, ..small_oracle() };
        let a = fit(&oracle, &problem, None, 11);
        let b = fit(&oracle, &problem, None, 11);
        let c = fit(&oracle, &problem, None, 12);
        assert_eq!(as_mlp(a.as_ref()), as_mlp(b.as_ref()));
        assert_ne!(as_mlp(a.as_ref()), as_mlp(c.as_ref()));
        // Identical on a single thread: the parallel reduction is deterministic.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let d = pool.install(|| fit(&oracle, &problem, None, 11));
        assert_eq!(as_mlp(a.as_ref()), as_mlp(d.as_ref()));
        // The same for a warm start.
        let e = fit(&oracle, &problem, Some(a.as_ref()), 5);
        let f = pool.install(|| fit(&oracle, &problem, Some(a.as_ref()), 5));
        assert_eq!(as_mlp(e.as_ref()), as_mlp(f.as_ref()));
    }

    #[test]
    fn mlp_neg_inf_bias_never_gives_nan() {
        let data = Data::random(200, 3, 4, true, 5);
        let problem = data.problem(false);
        let model = fit(&MlpOracle { biases: true, ..small_oracle() }, &problem, None, 0);
        let mut scores = vec![0.0; data.rows * data.classes];
        model.score(problem.features(), &mut scores).unwrap();
        assert!(scores.iter().all(|s| s.is_finite()));
        assert!(as_mlp(model.as_ref()).params.iter().all(|p| p.is_finite()));
        assert!(model_loss(model.as_ref(), &problem).unwrap().is_finite());
    }

    #[test]
    fn mlp_learns_a_band_a_linear_model_cannot() {
        let data = Data::band(400);
        let problem = data.problem(false);
        let oracle = MlpOracle { hidden: 20, minibatch: 20, epochs: 60, ..MlpOracle::unary() };
        let model = fit(&oracle, &problem, None, 3);
        let loss = model_loss(model.as_ref(), &problem).unwrap() / data.rows as f64;
        // The best linear model on (x, 1) predicts the base rate: mean loss ≈ ln 2 ≈ 0.69.
        assert!(loss < 0.1, "mean loss {loss}");
        let mut scores = vec![0.0; 2 * data.rows];
        model.score(problem.features(), &mut scores).unwrap();
        let errors =
            (0..data.rows).filter(|&k| usize::from(scores[2 * k + 1] > scores[2 * k]) != data.labels[k]).count();
        assert!(errors <= data.rows / 50, "{errors} errors");
    }

    #[test]
    fn mlp_roundtrips_through_the_registry() {
        let data = Data::random(100, 3, 5, false, 6);
        let problem = data.problem(false);
        for biases in [false, true] {
            let model = fit(&MlpOracle { biases, ..small_oracle() }, &problem, None, 1);
            let loaded = ModelRegistry::with_builtin().load(KIND, &model.to_bytes().unwrap()).unwrap();
            assert_eq!(loaded.kind(), KIND);
            let mut a = vec![0.0; data.rows * data.classes];
            let mut b = vec![1.0; data.rows * data.classes];
            model.score(problem.features(), &mut a).unwrap();
            loaded.score(problem.features(), &mut b).unwrap();
            assert_eq!(a, b);
            assert_eq!(as_mlp(loaded.as_ref()).hidden_bias().len(), if biases { 6 } else { 0 });
        }
    }

    #[test]
    fn mlp_json_export_has_the_weights() {
        let data = Data::random(50, 3, 5, false, 12);
        let model = fit(&MlpOracle { biases: true, ..small_oracle() }, &data.problem(false), None, 1);
        let m = as_mlp(model.as_ref());
        let json = model.to_json().unwrap();
        assert_eq!(json["hidden"], 6);
        assert_eq!(json["V"].as_array().unwrap().len(), 6);
        assert_eq!(json["V"][4][2].as_f64().unwrap(), m.input_weights()[2 * 6 + 4]);
        assert_eq!(json["W"][3][5].as_f64().unwrap(), m.output_weights()[3 * 6 + 5]);
        assert_eq!(json["a"].as_array().unwrap().len(), 5);
    }

    #[test]
    fn mlp_scores_do_not_depend_on_the_block() {
        let data = Data::random(23, 3, 5, false, 13);
        let problem = data.problem(false);
        let model = fit(&MlpOracle { biases: true, ..small_oracle() }, &problem, None, 1);
        let mut all = vec![0.0; 23 * 5];
        model.score(problem.features(), &mut all).unwrap();
        for start in 1..2 * BLOCK + 1 {
            let part = problem.features().slice_rows(start, 23);
            let mut scores = vec![0.0; (23 - start) * 5];
            model.score(part, &mut scores).unwrap();
            assert_eq!(scores, all[start * 5..]);
        }
    }

    #[test]
    fn mlp_load_rejects_inconsistent_bytes() {
        let bad = MlpModel { layout: Layout { dim: 2, hidden: 3, classes: 2, biases: false }, params: vec![0.0; 5] };
        let bytes = encode(KIND, &bad).unwrap();
        assert!(matches!(load(&bytes), Err(OracleError::InvalidModel { .. })));
        let huge = MlpModel { layout: Layout { dim: usize::MAX, hidden: 3, classes: 2, biases: true }, params: vec![] };
        assert!(matches!(load(&encode(KIND, &huge).unwrap()), Err(OracleError::InvalidModel { .. })));
        assert!(matches!(load(&[1, 2, 3]), Err(OracleError::Codec { .. })));
    }

    #[test]
    fn mlp_invalid_hyper_parameters_are_typed_errors() {
        let data = Data::random(10, 2, 2, false, 7);
        let problem = data.problem(false);
        let cases: [(&str, MlpOracle); 9] = [
            ("hidden", MlpOracle { hidden: 0, ..MlpOracle::unary() }),
            ("step_size", MlpOracle { step_size: 0.0, ..MlpOracle::unary() }),
            ("step_size", MlpOracle { step_size: f64::NAN, ..MlpOracle::unary() }),
            ("momentum", MlpOracle { momentum: 1.0, ..MlpOracle::unary() }),
            ("momentum", MlpOracle { momentum: -0.1, ..MlpOracle::unary() }),
            ("minibatch", MlpOracle { minibatch: 0, ..MlpOracle::unary() }),
            ("epochs", MlpOracle { epochs: 0, ..MlpOracle::unary() }),
            ("init_scale", MlpOracle { init_scale: f64::INFINITY, ..MlpOracle::unary() }),
            ("step_halvings", MlpOracle { step_halvings: usize::MAX, ..MlpOracle::unary() }),
        ];
        for (expected, oracle) in cases {
            for err in [oracle.validate().unwrap_err(), oracle.fit(&problem, None, FitContext { seed: 0 }).unwrap_err()]
            {
                assert!(
                    matches!(err, OracleError::InvalidHyperParameter { name, .. } if name == expected),
                    "{expected}: {err}"
                );
            }
        }
        assert!(MlpOracle::unary().validate().is_ok());
        assert!(MlpOracle::pairwise().validate().is_ok());
    }

    #[test]
    fn mlp_shape_mismatches_are_typed_errors() {
        let data = Data::random(30, 3, 3, false, 8);
        let problem = data.problem(false);
        let model = fit(&small_oracle(), &problem, None, 0);

        let other = Data::random(30, 4, 3, false, 8);
        let err = small_oracle().fit(&other.problem(false), Some(model.as_ref()), FitContext { seed: 0 }).unwrap_err();
        assert!(matches!(err, OracleError::ModelMismatch { model_dim: 3, dim: 4, .. }), "{err}");
        let mut out = vec![0.0; 30 * 3];
        assert!(matches!(
            model.score(other.problem(false).features(), &mut out),
            Err(OracleError::ModelMismatch { .. })
        ));
        let mut short = vec![0.0; 30 * 3 - 1];
        assert!(matches!(
            model.score(problem.features(), &mut short),
            Err(OracleError::OutputShape { got: 89, expected: 90 })
        ));

        let wider = MlpOracle { hidden: 7, ..small_oracle() };
        let err = wider.fit(&problem, Some(model.as_ref()), FitContext { seed: 0 }).unwrap_err();
        assert!(matches!(err, OracleError::InvalidHyperParameter { name: "hidden", .. }), "{err}");
        let with_biases = MlpOracle { biases: true, ..small_oracle() };
        let err = with_biases.fit(&problem, Some(model.as_ref()), FitContext { seed: 0 }).unwrap_err();
        assert!(matches!(err, OracleError::InvalidHyperParameter { name: "biases", .. }), "{err}");

        let zero = crate::zero::ZeroModel { dim: 3, classes: 3 };
        let err = small_oracle().fit(&problem, Some(&zero), FitContext { seed: 0 }).unwrap_err();
        assert!(matches!(err, OracleError::WrongModelKind { .. }), "{err}");
    }

    #[test]
    fn mlp_loss_matches_model_loss_exactly() {
        let data = Data::random(9000, 3, 5, true, 9);
        let problem = data.problem(true);
        let model = fit(&small_oracle(), &problem, None, 2);
        let m = as_mlp(model.as_ref());
        assert_eq!(m.layout.loss(&m.layout.pack(&m.params), &problem), model_loss(model.as_ref(), &problem).unwrap());
    }

    #[test]
    fn mlp_zero_weights_return_the_start() {
        let data = Data::random(50, 3, 3, false, 10);
        let zeros = vec![0.0; data.rows];
        let f = Features::new(&data.x, data.rows, data.dim).unwrap();
        let problem = Problem::new(f, &data.labels, &data.bias, data.classes, Some(&zeros)).unwrap();
        let model = fit(&small_oracle(), &problem, None, 0);
        assert_eq!(model_loss(model.as_ref(), &problem).unwrap(), 0.0);
        assert!(as_mlp(model.as_ref()).output_weights().iter().all(|w| *w == 0.0));
    }
}
