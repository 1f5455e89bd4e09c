//! The linear function class `g(φ, y) = (W φ)_y` (docs/MATH.md §5), `W ∈ R^{C×d}`,
//! fitted by batch L-BFGS on the biased logistic loss (Eq. 11/13, see
//! [`crate::problem`]), warm-started from the previous `W`.
//!
//! No intercept is added: the features are used as given. Problems that want a
//! per-class offset include a constant feature (the experiments append a 1 to
//! every feature vector, docs/MATH.md §6), so the model never adds parameters the caller
//! did not ask for.
//!
//! The oracle minimises
//!
//! ```text
//! J(W) = L(W) + (λ/2) ‖W‖²_F,      L(W) = Σ_k w_k [ lse(W φ_k + b_k) − (W φ_k)_{y_k} − b_k(y_k) ],
//! ∇_W L = Σ_k w_k (softmax(W φ_k + b_k) − e_{y_k}) φ_kᵀ,
//! ```
//!
//! with `λ = l2` (default 0). The optimiser sees `J / Σ_k w_k`, so that the
//! gradient tolerance of [`LbfgsOptions`] is per unit of example weight and does
//! not tighten as the problem grows. Without a penalty the optimum of a separable
//! problem lies at infinity; the iteration limit and the relative-decrease
//! tolerance then end the fit.
//!
//! `L` and `∇L` are computed in parallel over fixed chunks of rows whose partial
//! sums are added in chunk order, so a fit gives bit-identical results for any
//! number of threads; no allocation happens per evaluation.

use fastmath::{Plain, exp_nonpos, ln_pos};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::optim::{LbfgsOptions, LbfgsReport, lbfgs_minimize};
use crate::step::ridge;
use crate::{
    FitContext, FitLosses, Model, Oracle, OracleError, Problem, check_model_shape, check_score_buffer, decode,
    downcast_model, downcast_warm, row_loss,
};

/// Registry name of [`LinearModel`].
pub const KIND: &str = "linear";

/// Rows per parallel chunk. Equal to the chunk of [`crate::logistic_loss`], so
/// that [`LinearObjective::loss`] and [`crate::model_loss`] add the same partial
/// sums in the same order and agree bit for bit.
const CHUNK_ROWS: usize = 4096;

/// Default [`LinearOracle::warm_max_iterations`]: inside learning each call
/// starts from the previous `W` on a problem whose biases moved only by one
/// round of message passing, so a few quasi-Newton steps follow the optimum;
/// running every call to convergence (up to 200 steps) spent most of a
/// Stanford-scale learning iteration on fits that barely change the model
/// (docs/guide/performance.md).
pub const DEFAULT_WARM_MAX_ITERATIONS: usize = 10;

/// Default [`LinearOracle::cold_max_iterations`]: inside learning the fit
/// from `W = 0` is the first learning iteration's, on the biases of one round
/// of message passing from zero, which the next iterations' warm fits follow
/// anyway. At Stanford's scale the pairwise one came within 1.5·10⁻⁵ of the
/// converged loss in this many steps, in 16 s against 76 s to the tolerances
/// (docs/guide/performance.md, "Cold fits on a budget").
pub const DEFAULT_COLD_MAX_ITERATIONS: usize = 30;

/// The linear oracle: batch L-BFGS on `J(W)` (module docs).
///
/// ```
/// use oracles::{Features, FitContext, Oracle, Problem};
/// let oracle = oracles::linear::LinearOracle { l2: 0.1, ..Default::default() };
/// let x = [0.0, 1.0, 1.0, 1.0];
/// let p = Problem::new(Features::new(&x, 2, 2).unwrap(), &[0, 1], &[0.0; 4], 2, None).unwrap();
/// let model = oracle.fit(&p, None, FitContext { seed: 0 }).unwrap();
/// assert_eq!(model.kind(), "linear");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinearOracle {
    /// Settings of the L-BFGS minimiser (every fit stops at these limits, or
    /// earlier at its budget below).
    pub lbfgs: LbfgsOptions,
    /// Coefficient `λ ≥ 0` of the penalty `(λ/2) ‖W‖²_F` added to the summed loss `L`.
    pub l2: f64,
    /// Most L-BFGS iterations of a warm-started fit (the per-call budget inside
    /// learning), at most `lbfgs.max_iterations`; `None` fits every call to the
    /// tolerances of `lbfgs` (the full fit). Default
    /// [`DEFAULT_WARM_MAX_ITERATIONS`].
    #[serde(default = "default_warm_max_iterations")]
    pub warm_max_iterations: Option<usize>,
    /// Most L-BFGS iterations of a fit without a warm start (from `W = 0`:
    /// inside learning, the first learning iteration's fit, which the warm
    /// fits of later iterations refine), at most `lbfgs.max_iterations`;
    /// `None` runs it to the tolerances of `lbfgs`. Default
    /// [`DEFAULT_COLD_MAX_ITERATIONS`]; [`LinearOracle::full_fit`] for a
    /// one-off logistic regression run to convergence.
    #[serde(default = "default_cold_max_iterations")]
    pub cold_max_iterations: Option<usize>,
}

/// The L-BFGS settings of one fit of a class with step budgets (linear,
/// constant): `lbfgs` with at most `warm_max_iterations` steps when the fit is
/// `warm`-started, at most `cold_max_iterations` when it is not.
pub(crate) fn budgeted(
    lbfgs: LbfgsOptions,
    warm_max_iterations: Option<usize>,
    cold_max_iterations: Option<usize>,
    warm: bool,
) -> LbfgsOptions {
    match if warm { warm_max_iterations } else { cold_max_iterations } {
        Some(budget) => LbfgsOptions { max_iterations: lbfgs.max_iterations.min(budget), ..lbfgs },
        None => lbfgs,
    }
}

/// Checks a step budget (`warm_max_iterations`, `cold_max_iterations`): at
/// least 1, or `None` for full fits.
pub(crate) fn check_budget(name: &'static str, budget: Option<usize>) -> Result<(), OracleError> {
    if budget == Some(0) {
        return Err(OracleError::InvalidHyperParameter {
            name,
            reason: "must be at least 1 (or null for full fits)".to_string(),
        });
    }
    Ok(())
}

fn default_warm_max_iterations() -> Option<usize> {
    Some(DEFAULT_WARM_MAX_ITERATIONS)
}

fn default_cold_max_iterations() -> Option<usize> {
    Some(DEFAULT_COLD_MAX_ITERATIONS)
}

impl Default for LinearOracle {
    /// Default L-BFGS settings, no penalty, the default warm- and cold-start budgets.
    fn default() -> Self {
        Self {
            lbfgs: LbfgsOptions::default(),
            l2: 0.0,
            warm_max_iterations: default_warm_max_iterations(),
            cold_max_iterations: default_cold_max_iterations(),
        }
    }
}

/// `g(φ, y) = (W φ)_y` with `W` stored row-major, one row of `d` weights per class.
///
/// ```
/// use oracles::Model;
/// // g(φ, y) = Σ_j φ_j W[j][y]: 2 features × 2 classes, row-major.
/// let m = oracles::linear::LinearModel::new(2, 2, vec![1.0, 0.0, 0.0, 2.0]).unwrap();
/// let mut out = [0.0; 2];
/// m.score(oracles::Features::new(&[3.0, 4.0], 1, 2).unwrap(), &mut out).unwrap();
/// assert_eq!(out, [3.0, 8.0]);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinearModel {
    dim: usize,
    classes: usize,
    weights: Vec<f64>,
}

impl LinearModel {
    /// A model from row-major `weights` (`classes × dim`, all finite).
    ///
    /// ```
    /// let m = oracles::linear::LinearModel::new(2, 2, vec![1.0, 0.0, 0.0, 1.0]).unwrap();
    /// assert_eq!(m.class_weights(1), &[0.0, 1.0]);
    /// assert!(oracles::linear::LinearModel::new(2, 2, vec![1.0]).is_err());
    /// ```
    pub fn new(dim: usize, classes: usize, weights: Vec<f64>) -> Result<Self, OracleError> {
        if dim.checked_mul(classes) != Some(weights.len()) {
            return Err(OracleError::InvalidHyperParameter {
                name: "weights",
                reason: format!("{} values for {classes} classes × {dim} features", weights.len()),
            });
        }
        if let Some(i) = weights.iter().position(|v| !v.is_finite()) {
            return Err(OracleError::InvalidHyperParameter {
                name: "weights",
                reason: format!("weight ({}, {}) is {}", i / dim.max(1), i % dim.max(1), weights[i]),
            });
        }
        Ok(Self { dim, classes, weights })
    }

    /// `W = 0`: every class scores 0, the cold start of the oracle.
    pub fn zeros(dim: usize, classes: usize) -> Self {
        Self { dim, classes, weights: vec![0.0; dim * classes] }
    }

    /// Row-major `W` (`classes × dim`).
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// Row `y` of `W`, the weights of class `y`.
    pub fn class_weights(&self, y: usize) -> &[f64] {
        &self.weights[y * self.dim..(y + 1) * self.dim]
    }
}

impl LinearOracle {
    /// The same oracle fitting every call to the tolerances of `lbfgs` (no
    /// warm- or cold-start budget).
    ///
    /// ```
    /// let full = oracles::linear::LinearOracle::default().full_fit();
    /// assert_eq!((full.warm_max_iterations, full.cold_max_iterations), (None, None));
    /// ```
    pub fn full_fit(self) -> Self {
        Self { warm_max_iterations: None, cold_max_iterations: None, ..self }
    }

    /// Fits `W` (warm-started from `warm`, else from 0) and reports the L-BFGS run.
    ///
    /// The returned model's objective `J = L + (λ/2)‖W‖²` is never above
    /// `warm`'s (the [`Oracle`] contract): if rounding or an iteration limit
    /// left `J` higher, `warm` is returned unchanged. With `λ > 0`, `L` itself
    /// may rise (the fit shrinks an over-fitted warm start).
    pub fn fit_linear(
        &self,
        problem: &Problem<'_>,
        warm: Option<&LinearModel>,
    ) -> Result<(LinearModel, LbfgsReport), OracleError> {
        let (model, report, _) = self.fit_linear_with_losses(problem, warm)?;
        Ok((model, report))
    }

    /// [`LinearOracle::fit_linear`], also returning the losses `L` of the result
    /// and of `warm`, bit for bit what [`crate::model_loss`] computes (the
    /// objective adds the same partial sums in the same order), taken from the
    /// L-BFGS evaluations instead of two more passes over the data.
    fn fit_linear_with_losses(
        &self,
        problem: &Problem<'_>,
        warm: Option<&LinearModel>,
    ) -> Result<(LinearModel, LbfgsReport, FitLosses), OracleError> {
        self.validate()?;
        let (d, c) = (problem.dim(), problem.classes());
        crate::check_size("classes", d.checked_mul(c), &format!("weights for {d} features × {c} classes"))?;
        let start = match warm {
            Some(m) => {
                check_model_shape(m, d, c)?;
                m.clone()
            }
            None => LinearModel::zeros(d, c),
        };
        let features = problem.features();
        let mut objective = LinearObjective::new(problem, d, move |k| features.row(k), self.l2);
        let mut weights = start.weights.clone();
        let opts = budgeted(self.lbfgs, self.warm_max_iterations, self.cold_max_iterations, warm.is_some());
        // Every evaluated point with its unpenalised loss: the start is the first,
        // the returned point one of them (L-BFGS returns an evaluated point).
        let mut evaluated: Vec<(Vec<f64>, f64)> = Vec::new();
        let report = lbfgs_minimize(
            |w, g| {
                let (scaled, loss) = objective.scaled_with_loss(w, g);
                evaluated.push((w.to_vec(), loss));
                scaled
            },
            &mut weights,
            &opts,
        )?;
        let loss_at = |w: &[f64]| evaluated.iter().rev().find(|(x, _)| x.as_slice() == w).map(|&(_, l)| l);
        let (start_loss, end_loss) = (loss_at(&start.weights), loss_at(&weights));
        let losses = FitLosses { loss: end_loss, warm_loss: if warm.is_some() { start_loss } else { None } };
        if warm.is_some() {
            let (end, begin) = match (end_loss, start_loss) {
                (Some(end), Some(begin)) => (end, begin),
                _ => (objective.loss(&weights, None), objective.loss(&start.weights, None)),
            };
            let worse = end + ridge(self.l2, &weights) > begin + ridge(self.l2, &start.weights);
            if worse {
                return Ok((start, report, FitLosses { loss: losses.warm_loss, ..losses }));
            }
        }
        Ok((LinearModel { dim: d, classes: c, weights }, report, losses))
    }
}

impl Oracle for LinearOracle {
    fn kind(&self) -> &str {
        KIND
    }

    /// Fits over ranks are supported: loss and gradient are summed over the ranks at every L-BFGS evaluation.
    fn distributed(&self) -> bool {
        true
    }

    /// Scoring is one dot product per class: potentials are recomputed, not stored.
    fn cheap_to_score(&self) -> bool {
        true
    }

    /// Full-batch fits read every row's bias in every evaluation.
    fn reads_every_bias(&self) -> bool {
        true
    }

    fn gradient_step(&self) -> Option<Box<dyn Oracle>> {
        Some(Box::new(crate::step::GradientStepOracle::linear(self)))
    }

    fn is_linear(&self) -> bool {
        true
    }

    fn validate(&self) -> Result<(), OracleError> {
        self.lbfgs.validate()?;
        check_budget("warm_max_iterations", self.warm_max_iterations)?;
        check_budget("cold_max_iterations", self.cold_max_iterations)?;
        if !(self.l2.is_finite() && self.l2 >= 0.0) {
            return Err(OracleError::InvalidHyperParameter {
                name: "l2",
                reason: format!("must be finite and >= 0, got {}", self.l2),
            });
        }
        Ok(())
    }

    fn penalty(&self, model: &dyn Model) -> Result<f64, OracleError> {
        Ok(ridge(self.l2, downcast_model::<LinearModel>(model, KIND)?.weights()))
    }

    fn fit(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        _ctx: FitContext,
    ) -> Result<Box<dyn Model>, OracleError> {
        let warm = downcast_warm::<LinearModel>(warm, KIND)?;
        Ok(Box::new(self.fit_linear(problem, warm)?.0))
    }

    fn fit_with_losses(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        _ctx: FitContext,
    ) -> Result<(Box<dyn Model>, FitLosses), OracleError> {
        let warm = downcast_warm::<LinearModel>(warm, KIND)?;
        let (model, _, losses) = self.fit_linear_with_losses(problem, warm)?;
        Ok((Box::new(model), losses))
    }
}

impl Model for LinearModel {
    crate::impl_model_plumbing!(KIND, to_json);
    fn dim(&self) -> usize {
        self.dim
    }
    fn classes(&self) -> usize {
        self.classes
    }
    fn score(&self, features: crate::Features<'_>, out: &mut [f64]) -> Result<(), OracleError> {
        check_model_shape(self, features.dim(), self.classes)?;
        check_score_buffer(features, self.classes, out)?;
        let (c, d) = (self.classes, self.dim);
        if c == 0 {
            return Ok(());
        }
        out.par_chunks_mut(CHUNK_ROWS * c).enumerate().for_each(|(chunk, block)| {
            for (i, scores) in block.chunks_mut(c).enumerate() {
                linear_scores(&self.weights, d, features.row(chunk * CHUNK_ROWS + i), scores);
            }
        });
        Ok(())
    }
}

/// Loader for the registry; checks the shape and finiteness of `W`.
///
/// ```
/// use oracles::Model;
/// let m = oracles::linear::LinearModel::zeros(2, 2);
/// assert_eq!(oracles::linear::load(&m.to_bytes().unwrap()).unwrap().kind(), "linear");
/// ```
pub fn load(bytes: &[u8]) -> Result<Box<dyn Model>, OracleError> {
    let raw = decode::<LinearModel>(KIND, bytes)?;
    Ok(Box::new(LinearModel::new(raw.dim, raw.classes, raw.weights)?))
}

/// `J(W)` and its gradient for a linear scorer over per-row inputs `φ(k) ∈ R^d`
/// (module docs). The constant class uses it with `φ(k) = [1]`.
///
/// Holds one partial-sum slot per chunk of [`CHUNK_ROWS`] rows, laid out as
/// `[L_chunk, (∇_W L_chunk)ᵀ (d·C), scores (C), row buffer (C)]`, and `Wᵀ`, all
/// allocated once. Working on `Wᵀ` (feature-major) makes the per-row loops run
/// over the classes contiguously; each score and each gradient entry is still
/// summed over the same terms in the same order as [`LinearModel::score`] and a
/// row-by-row accumulation would, so the values do not depend on the layout.
pub(crate) struct LinearObjective<'a, 'p, P> {
    problem: &'p Problem<'a>,
    dim: usize,
    phi: P,
    l2: f64,
    /// `1 / Σ_k w_k` (1 when every weight is 0).
    inv_scale: f64,
    transposed: Vec<f64>,
    partials: Vec<f64>,
}

impl<'a, 'p, P: Fn(usize) -> &'a [f64] + Sync> LinearObjective<'a, 'p, P> {
    /// Buffers for `problem` with inputs `phi(k)` of length `dim` and penalty `l2`.
    pub(crate) fn new(problem: &'p Problem<'a>, dim: usize, phi: P, l2: f64) -> Self {
        let total = problem.total_weight();
        let inv_scale = if total > 0.0 { 1.0 / total } else { 1.0 };
        let chunks = problem.rows().div_ceil(CHUNK_ROWS);
        let stride = Self::stride(problem.classes(), dim);
        let transposed = vec![0.0; problem.classes() * dim];
        Self { problem, dim, phi, l2, inv_scale, transposed, partials: vec![0.0; chunks * stride] }
    }

    fn stride(classes: usize, dim: usize) -> usize {
        1 + classes * dim + 3 * classes * SOFTMAX_BLOCK
    }

    /// The unpenalised loss `L(W)`; with `grad`, also `∇_W L` (row-major like `W`).
    pub(crate) fn loss(&mut self, w: &[f64], grad: Option<&mut [f64]>) -> f64 {
        let (c, d) = (self.problem.classes(), self.dim);
        let n = self.problem.rows();
        for (y, wy) in w.chunks_exact(d.max(1)).enumerate().take(c) {
            for (j, &v) in wy.iter().enumerate() {
                self.transposed[j * c + y] = v;
            }
        }
        if self.problem.is_distributed() {
            return self.distributed_loss(grad);
        }
        let want_grad = grad.is_some();
        let (problem, phi, wt) = (self.problem, &self.phi, &self.transposed[..]);
        self.partials.par_chunks_mut(Self::stride(c, d)).enumerate().for_each(|(chunk, part)| {
            let (value, rest) = part.split_at_mut(1);
            let (gt, rest) = rest.split_at_mut(c * d);
            let rows = chunk * CHUNK_ROWS..((chunk + 1) * CHUNK_ROWS).min(n);
            value[0] = if want_grad {
                gt.fill(0.0);
                chunk_loss_and_gradient(problem, phi, wt, rows, gt, rest, 0.0)
            } else {
                chunk_loss(problem, phi, wt, rows, rest, 0.0)
            };
        });
        let stride = Self::stride(c, d);
        let mut total = 0.0;
        match grad {
            Some(grad) => {
                grad.fill(0.0);
                for part in self.partials.chunks(stride) {
                    total += part[0];
                    for (j, gj) in part[1..1 + c * d].chunks_exact(c).enumerate() {
                        for (y, &v) in gj.iter().enumerate() {
                            grad[y * d + j] += v;
                        }
                    }
                }
            }
            None => self.partials.chunks(stride).for_each(|part| total += part[0]),
        }
        total
    }

    /// [`LinearObjective::loss`] of a distributed problem (at the weights
    /// already in `transposed`): the chunks of one process
    /// ([`Problem::chunk_partials`], chunks split between ranks continued
    /// from the previous rank's sums) added in its order, so the same bits.
    fn distributed_loss(&mut self, grad: Option<&mut [f64]>) -> f64 {
        let (c, d) = (self.problem.classes(), self.dim);
        let want_grad = grad.is_some();
        let (problem, phi, wt) = (self.problem, &self.phi, &self.transposed[..]);
        let width = if want_grad { 1 + c * d } else { 1 };
        let partials = problem.chunk_partials(CHUNK_ROWS, width, |rows, acc| {
            let mut scratch = vec![0.0; 3 * SOFTMAX_BLOCK * c];
            let (value, gt) = acc.split_at_mut(1);
            value[0] = if want_grad {
                chunk_loss_and_gradient(problem, phi, wt, rows, gt, &mut scratch, value[0])
            } else {
                chunk_loss(problem, phi, wt, rows, &mut scratch, value[0])
            };
        });
        // Added as `loss` adds its chunks.
        let mut total = 0.0;
        match grad {
            Some(grad) => {
                grad.fill(0.0);
                for part in partials.chunks(width) {
                    total += part[0];
                    for (j, gj) in part[1..].chunks_exact(c).enumerate() {
                        for (y, &v) in gj.iter().enumerate() {
                            grad[y * d + j] += v;
                        }
                    }
                }
            }
            None => partials.chunks(width).for_each(|part| total += part[0]),
        }
        total
    }

    /// `J(W) / Σ_k w_k` and its gradient: what the optimiser minimises.
    pub(crate) fn scaled(&mut self, w: &[f64], grad: &mut [f64]) -> f64 {
        self.scaled_with_loss(w, grad).0
    }

    /// [`LinearObjective::scaled`] and the unpenalised loss `L(W)` it came from.
    pub(crate) fn scaled_with_loss(&mut self, w: &[f64], grad: &mut [f64]) -> (f64, f64) {
        let loss = self.loss(w, Some(grad));
        let mut penalty = 0.0;
        for (g, wi) in grad.iter_mut().zip(w) {
            penalty += wi * wi;
            *g = (*g + self.l2 * wi) * self.inv_scale;
        }
        ((loss + 0.5 * self.l2 * penalty) * self.inv_scale, loss)
    }
}

/// Rows per block of [`chunk_loss_and_gradient`]: their exponentials and
/// logarithms are taken in one flat loop each, which vectorises.
const SOFTMAX_BLOCK: usize = 16;

/// `Σ_k w_k ℓ_k` over `rows` with `gt += Σ_k ∇_s ℓ_k ⊗ φ(k)` (feature-major
/// `d × C`), for scores `Wᵀ φ(k)` (`wt` feature-major). Rows go in blocks of
/// [`SOFTMAX_BLOCK`]: scores, shifted exponents, one vectorised `exp` pass, sums,
/// one vectorised `ln` pass, then each row's loss and gradient. Every value is
/// computed with exactly the operations of the row-by-row kernel this replaced
/// (kept as the reference in the tests; rows with non-finite scores go through
/// [`row_loss`]), in the same order, so the result is bit for bit the
/// row-by-row one; on x86-64 with AVX-512 F (AVX2) the same code runs eight
/// (four) lanes wide (no fused multiply-adds, so no bit changes). `scratch` holds
/// `3 · SOFTMAX_BLOCK · C` values (the third block for computed biases).
fn chunk_loss_and_gradient<'a, P: Fn(usize) -> &'a [f64]>(
    problem: &Problem<'_>,
    phi: &P,
    wt: &[f64],
    rows: std::ops::Range<usize>,
    gt: &mut [f64],
    scratch: &mut [f64],
    sum: f64,
) -> f64 {
    // `chunk_generic` compiled with `$feature` enabled, called: one build per
    // vector width, the same code (no fused multiply-adds), so the same bits.
    #[cfg(target_arch = "x86_64")]
    macro_rules! compiled_for {
        ($feature:literal) => {{
            #[target_feature(enable = $feature)]
            unsafe fn kernel<'a, P: Fn(usize) -> &'a [f64]>(
                problem: &Problem<'_>,
                phi: &P,
                wt: &[f64],
                rows: std::ops::Range<usize>,
                gt: &mut [f64],
                scratch: &mut [f64],
                sum: f64,
            ) -> f64 {
                chunk_generic(problem, phi, wt, rows, gt, scratch, sum)
            }
            // SAFETY: the caller checked that the CPU has `$feature`.
            unsafe { kernel(problem, phi, wt, rows, gt, scratch, sum) }
        }};
    }
    #[cfg(target_arch = "x86_64")]
    if fastmath::x86::available_512() {
        return compiled_for!("avx512f");
    }
    #[cfg(target_arch = "x86_64")]
    if fastmath::x86::avx2() {
        return compiled_for!("avx2");
    }
    chunk_generic(problem, phi, wt, rows, gt, scratch, sum)
}

/// The loss alone of `rows` added to `sum`, row by row in order, the biases
/// fetched [`SOFTMAX_BLOCK`] rows at a time ([`Problem::bias_rows`]: one call
/// per block when they are computed). `scratch` holds
/// `(1 + SOFTMAX_BLOCK) · C` values.
fn chunk_loss<'a, P: Fn(usize) -> &'a [f64]>(
    problem: &Problem<'_>,
    phi: &P,
    wt: &[f64],
    rows: std::ops::Range<usize>,
    scratch: &mut [f64],
    mut sum: f64,
) -> f64 {
    let c = problem.classes();
    let (scores, rest) = scratch.split_at_mut(c);
    let bias_scratch = &mut rest[..SOFTMAX_BLOCK * c];
    let mut start = rows.start;
    while start < rows.end {
        let block = start..(start + SOFTMAX_BLOCK).min(rows.end);
        let bias = problem.bias_rows(block.clone(), bias_scratch);
        for (k, b) in block.clone().zip(bias.chunks_exact(c)) {
            block_scores(wt, phi(k), scores);
            sum += row_loss(scores, b, problem.labels()[k], problem.weight(k), None);
        }
        start = block.end;
    }
    sum
}

#[inline(always)]
fn chunk_generic<'a, P: Fn(usize) -> &'a [f64]>(
    problem: &Problem<'_>,
    phi: &P,
    wt: &[f64],
    rows: std::ops::Range<usize>,
    gt: &mut [f64],
    scratch: &mut [f64],
    mut sum: f64,
) -> f64 {
    let c = problem.classes();
    let (scores, rest) = scratch.split_at_mut(SOFTMAX_BLOCK * c);
    let (exps, bias_scratch) = rest.split_at_mut(SOFTMAX_BLOCK * c);
    let mut start = rows.start;
    while start < rows.end {
        let nb = (rows.end - start).min(SOFTMAX_BLOCK);
        let block = start..start + nb;
        let (s, e) = (&mut scores[..nb * c], &mut exps[..nb * c]);
        let bias = problem.bias_rows(block.clone(), bias_scratch);
        // Scores of the whole block, feature by feature: each score is still summed
        // over the features in order, but consecutive updates go to different
        // accumulators, so they do not wait on each other.
        let mut xs: [&[f64]; SOFTMAX_BLOCK] = [&[]; SOFTMAX_BLOCK];
        for (x, k) in xs.iter_mut().zip(block.clone()) {
            *x = phi(k);
        }
        for (si, x) in s.chunks_exact_mut(c).zip(&xs) {
            block_scores(wt, x, si);
        }
        let mut m = [f64::NEG_INFINITY; SOFTMAX_BLOCK];
        let mut bad = [false; SOFTMAX_BLOCK];
        for i in 0..nb {
            let (si, bi, ei) = (&s[i * c..(i + 1) * c], &bias[i * c..(i + 1) * c], &mut e[i * c..(i + 1) * c]);
            for (v, b) in si.iter().zip(bi) {
                m[i] = m[i].max(v + b);
            }
            let mut nan = false;
            for ((x, v), b) in ei.iter_mut().zip(si.iter()).zip(bi) {
                *x = v + b - m[i];
                nan |= x.is_nan();
            }
            bad[i] = nan || !m[i].is_finite();
        }
        for x in e.iter_mut() {
            *x = exp_nonpos::<Plain>(*x);
        }
        let mut z = [1.0; SOFTMAX_BLOCK];
        for (zi, ei) in z.iter_mut().zip(e.chunks_exact(c)) {
            let mut sum = 0.0;
            for &g in ei {
                sum += g;
            }
            *zi = sum;
        }
        let mut lz = z;
        for l in lz[..nb].iter_mut() {
            *l = ln_pos::<Plain>(*l);
        }
        for (i, k) in block.enumerate() {
            let (si, bi, ei) = (&s[i * c..(i + 1) * c], &bias[i * c..(i + 1) * c], &mut e[i * c..(i + 1) * c]);
            let (label, weight) = (problem.labels()[k], problem.weight(k));
            sum += if bad[i] {
                // Non-finite scores: propagate NaN/∞ through the C library as before.
                row_loss(si, bi, label, weight, Some(ei))
            } else {
                let scale = weight / z[i];
                for g in ei.iter_mut() {
                    *g *= scale;
                }
                ei[label] -= weight;
                weight * (m[i] + lz[i] - si[label] - bi[label])
            };
        }
        block_gradient(&xs[..nb], e, gt);
        start += nb;
    }
    sum
}

/// Accumulator lanes of [`block_scores`] and [`block_gradient`] (held in registers).
const LANES: usize = 8;

/// `scores = Wᵀ x` for feature-major `wt` (`d × C`), each score summed over the
/// features in order from 0 like [`linear_scores`], with [`LANES`] classes at a
/// time accumulated in registers rather than in memory.
#[inline(always)]
fn block_scores(wt: &[f64], x: &[f64], scores: &mut [f64]) {
    let c = scores.len();
    let mut y0 = 0;
    while y0 + LANES <= c {
        let mut acc = [0.0; LANES];
        for (j, &xj) in x.iter().enumerate() {
            let w = &wt[j * c + y0..j * c + y0 + LANES];
            for l in 0..LANES {
                acc[l] += w[l] * xj;
            }
        }
        scores[y0..y0 + LANES].copy_from_slice(&acc);
        y0 += LANES;
    }
    for (y, s) in scores.iter_mut().enumerate().skip(y0) {
        let mut acc = 0.0;
        for (j, &xj) in x.iter().enumerate() {
            acc += wt[j * c + y] * xj;
        }
        *s = acc;
    }
}

/// `gt[j][y] += Σ_i grads[i][y] · xs[i][j]`, the rows added one after the other
/// in order (as a row-by-row accumulation would), [`LANES`] classes at a time in
/// registers. `grads` holds the block's rows of `C` values.
#[inline(always)]
fn block_gradient(xs: &[&[f64]], grads: &[f64], gt: &mut [f64]) {
    let c = grads.len() / xs.len().max(1);
    for (j, gj) in gt.chunks_exact_mut(c).enumerate() {
        let mut y0 = 0;
        while y0 + LANES <= c {
            let mut acc = [0.0; LANES];
            acc.copy_from_slice(&gj[y0..y0 + LANES]);
            for (x, g) in xs.iter().zip(grads.chunks_exact(c)) {
                let xj = x[j];
                let g = &g[y0..y0 + LANES];
                for l in 0..LANES {
                    acc[l] += g[l] * xj;
                }
            }
            gj[y0..y0 + LANES].copy_from_slice(&acc);
            y0 += LANES;
        }
        for (y, v) in gj.iter_mut().enumerate().skip(y0) {
            let mut acc = *v;
            for (x, g) in xs.iter().zip(grads.chunks_exact(c)) {
                acc += g[y] * x[j];
            }
            *v = acc;
        }
    }
}

/// `scores = W x` for row-major `W` (`scores.len() × d`). Each score is summed over
/// the features in order, as [`LinearObjective::loss`] does (scoring and fitting
/// must agree bit for bit); the classes are interleaved so that their sums are
/// independent chains the CPU overlaps.
#[inline]
fn linear_scores(w: &[f64], d: usize, x: &[f64], scores: &mut [f64]) {
    scores.fill(0.0);
    for (j, &xj) in x.iter().enumerate() {
        for (y, s) in scores.iter_mut().enumerate() {
            *s += w[y * d + j] * xj;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{Features, ModelRegistry, encode, model_loss};
    use proptest::prelude::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use rand_distr::StandardNormal;

    /// An owned random problem: features with a constant last column, labels drawn
    /// from `softmax(W* φ + b)`, Gaussian biases with a fraction set to −∞.
    #[derive(Debug, Clone)]
    pub(crate) struct Data {
        pub x: Vec<f64>,
        pub labels: Vec<usize>,
        pub bias: Vec<f64>,
        pub weights: Option<Vec<f64>>,
        pub n: usize,
        pub d: usize,
        pub c: usize,
    }

    impl Data {
        pub(crate) fn random(seed: u64, n: usize, d: usize, c: usize, neg_inf: f64, weighted: bool) -> Self {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let truth: Vec<f64> = (0..c * d).map(|_| rng.sample::<f64, _>(StandardNormal)).collect();
            let mut x = vec![0.0; n * d];
            let mut bias = vec![0.0; n * c];
            let mut labels = vec![0; n];
            let mut s = vec![0.0; c];
            for k in 0..n {
                for j in 0..d {
                    x[k * d + j] = if j + 1 == d { 1.0 } else { rng.sample(StandardNormal) };
                }
                for y in 0..c {
                    bias[k * c + y] = if y > 0 && rng.random::<f64>() < neg_inf {
                        f64::NEG_INFINITY
                    } else {
                        rng.sample::<f64, _>(StandardNormal)
                    };
                    s[y] = bias[k * c + y];
                    for j in 0..d {
                        s[y] += truth[y * d + j] * x[k * d + j];
                    }
                }
                let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = s.iter().map(|v| (v - m).exp()).sum();
                let mut u = rng.random::<f64>() * z;
                labels[k] = 0;
                for (y, v) in s.iter().enumerate() {
                    let p = (v - m).exp();
                    if p > 0.0 {
                        labels[k] = y;
                        if u < p {
                            break;
                        }
                        u -= p;
                    }
                }
            }
            let weights = weighted.then(|| (0..n).map(|_| rng.random_range(0.0..2.0)).collect());
            Self { x, labels, bias, weights, n, d, c }
        }

        pub(crate) fn problem(&self) -> Problem<'_> {
            let f = Features::new(&self.x, self.n, self.d).unwrap();
            Problem::new(f, &self.labels, &self.bias, self.c, self.weights.as_deref()).unwrap()
        }
    }

    /// `J(W)` and its gradient written out independently of [`LinearObjective`]
    /// (per-row softmax, no chunking), for the reference solvers below.
    fn reference_objective(data: &Data, w: &[f64], l2: f64, grad: &mut [f64]) -> f64 {
        let (d, c) = (data.d, data.c);
        grad.iter_mut().zip(w).for_each(|(g, wi)| *g = l2 * wi);
        let mut total = 0.5 * l2 * w.iter().map(|v| v * v).sum::<f64>();
        for k in 0..data.n {
            let wk = data.weights.as_ref().map_or(1.0, |v| v[k]);
            let phi = &data.x[k * d..(k + 1) * d];
            let a: Vec<f64> =
                (0..c).map(|y| (0..d).map(|j| w[y * d + j] * phi[j]).sum::<f64>() + data.bias[k * c + y]).collect();
            let m = a.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = a.iter().map(|v| (v - m).exp()).sum();
            total += wk * (m + z.ln() - a[data.labels[k]]);
            for y in 0..c {
                let r = (a[y] - m).exp() / z - f64::from(u8::from(y == data.labels[k]));
                for j in 0..d {
                    grad[y * d + j] += wk * r * phi[j];
                }
            }
        }
        total
    }

    /// Solves `A x = b` by Gaussian elimination with partial pivoting (`A` row-major `m × m`).
    fn solve(mut a: Vec<f64>, mut b: Vec<f64>) -> Vec<f64> {
        let m = b.len();
        for col in 0..m {
            let piv = (col..m).max_by(|&i, &j| a[i * m + col].abs().total_cmp(&a[j * m + col].abs())).unwrap();
            for j in 0..m {
                a.swap(col * m + j, piv * m + j);
            }
            b.swap(col, piv);
            for i in col + 1..m {
                let f = a[i * m + col] / a[col * m + col];
                for j in col..m {
                    a[i * m + j] -= f * a[col * m + j];
                }
                b[i] -= f * b[col];
            }
        }
        let mut x = vec![0.0; m];
        for i in (0..m).rev() {
            let s: f64 = (i + 1..m).map(|j| a[i * m + j] * x[j]).sum();
            x[i] = (b[i] - s) / a[i * m + i];
        }
        x
    }

    /// Damped Newton's method on `J(W)`. With `l2 = 0` the last class's weights
    /// are held at 0 (the loss only sees differences between classes), which makes
    /// the Hessian non-singular on non-separable data.
    fn newton(data: &Data, l2: f64) -> Vec<f64> {
        let (d, c) = (data.d, data.c);
        let free = if l2 > 0.0 { c } else { c - 1 };
        let p = free * d;
        let mut w = vec![0.0; c * d];
        let mut g = vec![0.0; c * d];
        for _ in 0..100 {
            let f = reference_objective(data, &w, l2, &mut g);
            if g[..p].iter().map(|v| v * v).sum::<f64>().sqrt() < 1e-11 * data.n as f64 {
                break;
            }
            let mut h = vec![0.0; p * p];
            for i in 0..p {
                h[i * p + i] = l2;
            }
            for k in 0..data.n {
                let wk = data.weights.as_ref().map_or(1.0, |v| v[k]);
                let phi = &data.x[k * d..(k + 1) * d];
                let a: Vec<f64> =
                    (0..c).map(|y| (0..d).map(|j| w[y * d + j] * phi[j]).sum::<f64>() + data.bias[k * c + y]).collect();
                let m = a.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = a.iter().map(|v| (v - m).exp()).sum();
                let pr: Vec<f64> = a.iter().map(|v| (v - m).exp() / z).collect();
                for y in 0..free {
                    for y2 in 0..free {
                        let cov = f64::from(u8::from(y == y2)) * pr[y] - pr[y] * pr[y2];
                        for i in 0..d {
                            for j in 0..d {
                                h[(y * d + i) * p + y2 * d + j] += wk * cov * phi[i] * phi[j];
                            }
                        }
                    }
                }
            }
            let step = solve(h, g[..p].iter().map(|v| -v).collect());
            let mut t = 1.0;
            loop {
                let trial: Vec<f64> = (0..c * d).map(|i| if i < p { w[i] + t * step[i] } else { w[i] }).collect();
                if reference_objective(data, &trial, l2, &mut vec![0.0; c * d]) <= f || t < 1e-10 {
                    w = trial;
                    break;
                }
                t *= 0.5;
            }
        }
        w
    }

    fn tight() -> LinearOracle {
        LinearOracle {
            lbfgs: LbfgsOptions { gradient_tolerance: 1e-10, relative_decrease_tolerance: 0.0, ..Default::default() },
            l2: 0.0,
            warm_max_iterations: None,
            cold_max_iterations: None,
        }
    }

    fn ctx() -> FitContext {
        FitContext { seed: 7 }
    }

    #[test]
    fn gradient_matches_finite_differences() {
        for (seed, l2, weighted) in [(1, 0.0, false), (2, 0.7, true), (3, 0.0, true)] {
            let data = Data::random(seed, 40, 3, 4, 0.3, weighted);
            let problem = data.problem();
            let features = problem.features();
            let mut objective = LinearObjective::new(&problem, 3, move |k| features.row(k), l2);
            let mut rng = ChaCha8Rng::seed_from_u64(seed + 100);
            let w: Vec<f64> = (0..12).map(|_| rng.random_range(-1.0..1.0)).collect();
            let mut g = vec![0.0; 12];
            objective.scaled(&w, &mut g);
            let mut scratch = vec![0.0; 12];
            for i in 0..12 {
                let h = 1e-6;
                let (mut plus, mut minus) = (w.clone(), w.clone());
                plus[i] += h;
                minus[i] -= h;
                let fd = (objective.scaled(&plus, &mut scratch) - objective.scaled(&minus, &mut scratch)) / (2.0 * h);
                assert!((fd - g[i]).abs() < 1e-7 * (1.0 + g[i].abs()), "seed {seed} coord {i}: {fd} vs {}", g[i]);
            }
            // The engine's unscaled gradient equals the independent formula.
            let mut reference = vec![0.0; 12];
            let value = reference_objective(&data, &w, 0.0, &mut reference);
            let mut unscaled = vec![0.0; 12];
            assert!((objective.loss(&w, Some(&mut unscaled)) - value).abs() < 1e-10 * value);
            for (a, b) in unscaled.iter().zip(&reference) {
                assert!((a - b).abs() < 1e-10 * (1.0 + b.abs()));
            }
        }
    }

    #[test]
    fn reaches_a_stationary_point_and_agrees_with_newton() {
        for (seed, l2, weighted) in [(11, 0.0, false), (12, 0.0, true), (13, 2.0, false), (14, 0.5, true)] {
            let data = Data::random(seed, 300, 3, 3, 0.0, weighted);
            let problem = data.problem();
            let oracle = LinearOracle { l2, ..tight() };
            let (model, report) = oracle.fit_linear(&problem, None).unwrap();
            let w = model.weights();
            // Stationary: the independently computed gradient of J / Σw vanishes.
            let mut g = vec![0.0; w.len()];
            let j_fit = reference_objective(&data, w, l2, &mut g);
            let gnorm = g.iter().map(|v| v * v).sum::<f64>().sqrt() / problem.total_weight();
            assert!(gnorm < 1e-8, "seed {seed}: gradient {gnorm}, {report:?}");
            let reference = newton(&data, l2);
            let j_newton = reference_objective(&data, &reference, l2, &mut g);
            assert!((j_fit - j_newton).abs() <= 1e-9 * j_newton, "seed {seed}: {j_fit} vs {j_newton}");
            let (d, c) = (data.d, data.c);
            for y in 0..c {
                for j in 0..d {
                    // Without a penalty only differences to the last class are identified.
                    let anchor = |v: &[f64]| if l2 > 0.0 { 0.0 } else { v[(c - 1) * d + j] };
                    let a = w[y * d + j] - anchor(w);
                    let b = reference[y * d + j] - anchor(&reference);
                    assert!((a - b).abs() < 1e-5, "seed {seed} W[{y},{j}]: {a} vs {b}");
                }
            }
        }
    }

    /// The row-by-row kernel the blocked one replaced: [`row_loss`] with its
    /// gradient written to `grad`, evaluating each `exp` once
    /// (the hot path of every fit). The loss is computed with exactly the operations
    /// of [`row_loss`], so fitting and [`crate::model_loss`] agree bit for bit; the
    /// gradient `w (e_y / z − 1{y = y_k})` differs from it only by rounding.
    fn row_loss_and_gradient(scores: &[f64], bias: &[f64], label: usize, weight: f64, grad: &mut [f64]) -> f64 {
        let mut m = f64::NEG_INFINITY;
        for (s, b) in scores.iter().zip(bias) {
            m = m.max(s + b);
        }
        let mut z = 0.0;
        let mut nan = false;
        for ((g, s), b) in grad.iter_mut().zip(scores).zip(bias) {
            let x = s + b - m;
            nan |= x.is_nan();
            *g = exp_nonpos::<Plain>(x);
        }
        if nan || !m.is_finite() {
            // Non-finite scores: propagate NaN/∞ through the C library as before.
            return crate::problem::row_loss(scores, bias, label, weight, Some(grad));
        }
        for &g in grad.iter() {
            z += g;
        }
        let scale = weight / z;
        for g in grad.iter_mut() {
            *g *= scale;
        }
        grad[label] -= weight;
        weight * (m + ln_pos::<Plain>(z) - scores[label] - bias[label])
    }

    /// `L` and `∇L` accumulated row by row, chunk by chunk, with the old kernel.
    fn row_by_row(data: &Data, w: &[f64]) -> (f64, Vec<f64>) {
        let (n, d, c) = (data.n, data.d, data.c);
        let (mut total, mut grad) = (0.0, vec![0.0; c * d]);
        let (mut scores, mut g) = (vec![0.0; c], vec![0.0; c]);
        for chunk in 0..n.div_ceil(CHUNK_ROWS) {
            let (mut sum, mut gt) = (0.0, vec![0.0; d * c]);
            for k in chunk * CHUNK_ROWS..((chunk + 1) * CHUNK_ROWS).min(n) {
                let x = &data.x[k * d..(k + 1) * d];
                linear_scores(w, d, x, &mut scores);
                let weight = data.weights.as_ref().map_or(1.0, |v| v[k]);
                sum += row_loss_and_gradient(&scores, &data.bias[k * c..(k + 1) * c], data.labels[k], weight, &mut g);
                for (j, &xj) in x.iter().enumerate() {
                    for y in 0..c {
                        gt[j * c + y] += g[y] * xj;
                    }
                }
            }
            total += sum;
            for j in 0..d {
                for y in 0..c {
                    grad[y * d + j] += gt[j * c + y];
                }
            }
        }
        (total, grad)
    }

    #[test]
    fn blocked_kernel_equals_the_row_by_row_one_bit_for_bit() {
        // Class counts below, at and above the 8 register lanes, row counts with
        // block and chunk tails, −∞ biases, weights, and rows whose scores overflow.
        for (seed, n, d, c) in
            [(1, 37, 3, 2), (2, CHUNK_ROWS + 21, 5, 8), (3, 2 * CHUNK_ROWS + 3, 4, 11), (4, 15, 42, 3)]
        {
            for weighted in [false, true] {
                let mut data = Data::random(seed, n, d, c, 0.2, weighted);
                data.bias[7 * c + (data.labels[7] + 1) % c] = f64::NEG_INFINITY;
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let mut w: Vec<f64> = (0..c * d).map(|_| rng.random_range(-2.0..2.0)).collect();
                let (want, want_grad) = row_by_row(&data, &w);
                let problem = data.problem();
                let mut objective = LinearObjective::new(&problem, d, |k| problem.features().row(k), 0.0);
                let mut grad = vec![0.0; c * d];
                let got = objective.loss(&w, Some(&mut grad));
                assert_eq!(got.to_bits(), want.to_bits(), "seed {seed}: loss {got} vs {want}");
                for (i, (a, b)) in grad.iter().zip(&want_grad).enumerate() {
                    assert_eq!(a.to_bits(), b.to_bits(), "seed {seed} weighted {weighted}: gradient {i}: {a} vs {b}");
                }
                // Huge weights: scores of ±1e308 make some rows non-finite (the C-library path).
                w[0] = 1e308;
                let (want, want_grad) = row_by_row(&data, &w);
                let got = objective.loss(&w, Some(&mut grad));
                assert_eq!(got.to_bits(), want.to_bits(), "seed {seed}: overflowing loss {got} vs {want}");
                assert!(grad.iter().zip(&want_grad).all(|(a, b)| a.to_bits() == b.to_bits()), "seed {seed}");
            }
        }
    }

    #[test]
    fn zero_bias_two_classes_is_plain_logistic_regression() {
        // Plain (binary, sigmoid) logistic regression solved by Newton's method on
        // w = W₁ − W₀: minimise Σ_k log(1 + exp(−s_k wᵀφ_k)), s_k = ±1.
        let mut data = Data::random(21, 200, 3, 2, 0.0, false);
        data.bias.fill(0.0);
        let (n, d) = (data.n, data.d);
        let mut w = vec![0.0; d];
        for _ in 0..50 {
            let mut g = vec![0.0; d];
            let mut h = vec![0.0; d * d];
            for k in 0..n {
                let phi = &data.x[k * d..(k + 1) * d];
                let sign = if data.labels[k] == 1 { 1.0 } else { -1.0 };
                let m = sign * (0..d).map(|j| w[j] * phi[j]).sum::<f64>();
                let sig = 1.0 / (1.0 + m.exp()); // σ(−m)
                for i in 0..d {
                    g[i] -= sign * sig * phi[i];
                    for j in 0..d {
                        h[i * d + j] += sig * (1.0 - sig) * phi[i] * phi[j];
                    }
                }
            }
            let step = solve(h, g.iter().map(|v| -v).collect());
            w.iter_mut().zip(&step).for_each(|(a, b)| *a += b);
        }
        let problem = data.problem();
        let (model, _) = tight().fit_linear(&problem, None).unwrap();
        let (w0, w1) = (model.class_weights(0), model.class_weights(1));
        for (j, expected) in w.iter().enumerate() {
            let diff = w1[j] - w0[j];
            assert!((diff - expected).abs() < 1e-6, "feature {j}: {diff} vs {expected}");
            // From W = 0 the gradient's class rows sum to zero, so W₀ = −W₁.
            assert!((w0[j] + w1[j]).abs() < 1e-12);
        }
    }

    #[test]
    fn engine_loss_equals_model_loss_bit_for_bit() {
        let data = Data::random(31, 3 * CHUNK_ROWS + 17, 2, 3, 0.2, true);
        let problem = data.problem();
        let features = problem.features();
        let mut objective = LinearObjective::new(&problem, 2, move |k| features.row(k), 0.0);
        let model = LinearModel::new(2, 3, vec![0.3, -1.0, 2.0, 0.5, -0.25, 0.125]).unwrap();
        assert_eq!(objective.loss(model.weights(), None), model_loss(&model, &problem).unwrap());
        let mut g = vec![0.0; 6];
        assert_eq!(objective.loss(model.weights(), Some(&mut g)), model_loss(&model, &problem).unwrap());
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count_or_seed() {
        let data = Data::random(41, 2 * CHUNK_ROWS + 5, 3, 3, 0.1, true);
        let problem = data.problem();
        let oracle = LinearOracle {
            lbfgs: LbfgsOptions { max_iterations: 20, ..Default::default() },
            l2: 0.1,
            ..Default::default()
        };
        let fit_with = |threads: usize, seed: u64| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| oracle.fit(&problem, None, FitContext { seed }).unwrap().to_bytes().unwrap())
        };
        let reference = fit_with(1, 1);
        assert_eq!(fit_with(3, 1), reference);
        assert_eq!(fit_with(2, 1), reference);
        assert_eq!(fit_with(2, 99), reference);
    }

    #[test]
    fn penalised_fit_from_the_unpenalised_optimum_reaches_the_penalised_one() {
        // From the unpenalised optimum any shrinkage raises L but lowers
        // J = L + (λ/2)‖W‖²: the warm fit (through `fit_monotone`, as the
        // learners call it) must move to the penalised optimum, not stall at
        // its warm start because L rose.
        let data = Data::random(45, 150, 3, 3, 0.0, false);
        let problem = data.problem();
        let (optimum, _) = tight().fit_linear(&problem, None).unwrap();
        let penalised = LinearOracle { l2: 10.0, ..tight() }.full_fit();
        let fit = crate::fit_monotone(&penalised, &problem, Some(&optimum), ctx()).unwrap();
        assert!(!fit.rejected);
        let warm = fit.model.as_any().downcast_ref::<LinearModel>().unwrap();
        let (cold, _) = penalised.fit_linear(&problem, None).unwrap();
        let j = |m: &LinearModel| model_loss(m, &problem).unwrap() + ridge(10.0, m.weights());
        assert!((j(warm) - j(&cold)).abs() <= 1e-9 * j(&cold), "warm J = {}, cold J = {}", j(warm), j(&cold));
        assert!(j(warm) < j(&optimum) && fit.loss > model_loss(&optimum, &problem).unwrap());
        assert_eq!(fit.penalty, ridge(10.0, warm.weights()));
        let norm = |m: &LinearModel| m.weights().iter().map(|v| v * v).sum::<f64>();
        assert!(norm(warm) < norm(&optimum));
    }

    #[test]
    fn negative_infinite_biases_never_produce_nan() {
        let mut data = Data::random(51, 200, 3, 4, 0.5, false);
        // Class 3 is impossible everywhere: its gradient is 0, its weights stay put.
        for k in 0..data.n {
            data.bias[k * 4 + 3] = f64::NEG_INFINITY;
            if data.labels[k] == 3 {
                data.labels[k] = 0;
                data.bias[k * 4] = 0.0;
            }
        }
        let problem = data.problem();
        let (cold, report) = tight().fit_linear(&problem, None).unwrap();
        assert!(report.value.is_finite() && report.gradient_norm.is_finite());
        assert!(cold.weights().iter().all(|v| v.is_finite()));
        assert_eq!(cold.class_weights(3), &[0.0; 3]);
        let warm = LinearModel::new(3, 4, (0..12).map(|i| i as f64 - 6.0).collect()).unwrap();
        let (fit, _) = tight().fit_linear(&problem, Some(&warm)).unwrap();
        assert!(fit.weights().iter().all(|v| v.is_finite()));
        assert_eq!(fit.class_weights(3), warm.class_weights(3));
        let loss = model_loss(&fit, &problem).unwrap();
        assert!(loss.is_finite() && loss <= model_loss(&warm, &problem).unwrap());
        let mut scores = vec![0.0; 200 * 4];
        fit.score(problem.features(), &mut scores).unwrap();
        assert!(scores.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn save_load_gives_identical_scores() {
        let data = Data::random(61, 100, 3, 3, 0.2, false);
        let problem = data.problem();
        let model = LinearOracle::default().fit(&problem, None, ctx()).unwrap();
        let loaded = ModelRegistry::with_builtin().load(model.kind(), &model.to_bytes().unwrap()).unwrap();
        assert_eq!(loaded.kind(), KIND);
        let (mut a, mut b) = (vec![0.0; 300], vec![0.0; 300]);
        model.score(problem.features(), &mut a).unwrap();
        loaded.score(problem.features(), &mut b).unwrap();
        assert_eq!(a, b);
        let json = model.to_json().unwrap();
        assert_eq!(json["classes"], 3);
        assert_eq!(json["weights"].as_array().unwrap().len(), 9);
        // Corrupt files are typed errors, not panics.
        let bad = encode(KIND, &LinearModel { dim: 2, classes: 2, weights: vec![1.0] }).unwrap();
        assert!(matches!(load(&bad), Err(OracleError::InvalidHyperParameter { name: "weights", .. })));
        let nan = encode(KIND, &LinearModel { dim: 1, classes: 2, weights: vec![1.0, f64::NAN] }).unwrap();
        assert!(load(&nan).is_err());
        assert!(matches!(load(&[0xff, 0xff]), Err(OracleError::Codec { .. })));
    }

    #[test]
    fn bad_input_gives_typed_errors() {
        let x = [0.5, 1.0, -0.5, 1.0];
        let f = Features::new(&x, 2, 2).unwrap();
        assert!(matches!(Features::new(&x, 3, 2), Err(OracleError::FeatureShape { .. })));
        assert!(matches!(Features::new(&[0.0, f64::NAN], 1, 2), Err(OracleError::NonFiniteFeature { col: 1, .. })));
        assert!(matches!(Problem::new(f, &[0, 2], &[0.0; 4], 2, None), Err(OracleError::LabelOutOfRange { .. })));
        assert!(matches!(Problem::new(f, &[0, 1], &[0.0; 3], 2, None), Err(OracleError::BiasShape { .. })));
        for bad in [f64::INFINITY, f64::NAN] {
            let bias = [0.0, bad, 0.0, 0.0];
            assert!(matches!(Problem::new(f, &[0, 1], &bias, 2, None), Err(OracleError::InvalidBias { .. })));
        }
        let empty = Features::new(&[], 0, 2).unwrap();
        assert!(matches!(Problem::new(empty, &[], &[], 2, None), Err(OracleError::Empty)));
        assert!(matches!(Problem::new(f, &[0, 0], &[0.0; 2], 1, None), Err(OracleError::TooFewClasses { .. })));
        // Values that overflow scores, or swallow every other term, are refused.
        let e = Features::new(&[1.0, 1e300], 1, 2).unwrap_err();
        assert!(matches!(e, OracleError::FeatureTooLarge { col: 1, .. }), "{e}");
        let bias = [0.0, 1e308, 0.0, 0.0];
        assert!(matches!(Problem::new(f, &[0, 1], &bias, 2, None), Err(OracleError::InvalidBias { class: 1, .. })));
        assert!(Problem::new(f, &[0, 1], &[0.0, -1e100, f64::NEG_INFINITY, 0.0], 2, None).is_ok());
        // rows × classes wrapped to 0 (an empty bias passed), then fits panicked on capacity.
        for classes in [1 << 63, crate::MAX_VALUES + 1] {
            let too_many = Problem::new(f, &[0, 0], &[], classes, None);
            assert!(matches!(too_many, Err(OracleError::TooManyClasses { .. })), "{classes}");
            assert!(crate::check_score_buffer(f, 1 << 63, &[]).is_err());
        }

        let problem = Problem::new(f, &[0, 1], &[0.0; 4], 2, None).unwrap();
        let invalid = [
            ("memory", LinearOracle { lbfgs: LbfgsOptions { memory: 0, ..Default::default() }, ..Default::default() }),
            (
                "max_iterations",
                LinearOracle { lbfgs: LbfgsOptions { max_iterations: 0, ..Default::default() }, ..Default::default() },
            ),
            ("warm_max_iterations", LinearOracle { warm_max_iterations: Some(0), ..Default::default() }),
            ("cold_max_iterations", LinearOracle { cold_max_iterations: Some(0), ..Default::default() }),
            ("l2", LinearOracle { l2: -1.0, ..Default::default() }),
            ("l2", LinearOracle { l2: f64::NAN, ..Default::default() }),
            ("l2", LinearOracle { l2: f64::INFINITY, ..Default::default() }),
        ];
        for (expected, oracle) in invalid {
            match oracle.fit(&problem, None, ctx()) {
                Err(OracleError::InvalidHyperParameter { name, .. }) => assert_eq!(name, expected),
                other => panic!("{expected}: {other:?}"),
            }
        }
        let oracle = LinearOracle::default();
        let wrong_shape = LinearModel::zeros(3, 2);
        assert!(matches!(oracle.fit(&problem, Some(&wrong_shape), ctx()), Err(OracleError::ModelMismatch { .. })));
        let zero = crate::zero::ZeroModel { dim: 2, classes: 2 };
        assert!(matches!(oracle.fit(&problem, Some(&zero), ctx()), Err(OracleError::WrongModelKind { .. })));
        let model = LinearModel::zeros(2, 2);
        assert!(matches!(
            model.score(Features::new(&x, 1, 4).unwrap(), &mut [0.0; 2]),
            Err(OracleError::ModelMismatch { .. })
        ));
        assert!(matches!(model.score(f, &mut [0.0; 3]), Err(OracleError::OutputShape { got: 3, expected: 4 })));
    }

    /// A cold fit stops after `cold_max_iterations` steps: the model and the
    /// report are those of the same fit with `lbfgs.max_iterations` at the
    /// budget, bit for bit (a prefix of the full fit's L-BFGS path), and a
    /// warm fit is untouched by the cold budget.
    #[test]
    fn the_cold_budget_caps_only_fits_without_a_warm_start() {
        let data = Data::random(7, 400, 5, 4, 0.2, true);
        let problem = data.problem();
        let full = tight().full_fit();
        let (full_model, full_report, _) = full.fit_linear_with_losses(&problem, None).unwrap();
        assert!(full_report.iterations > 6, "the full fit takes {} steps", full_report.iterations);
        let capped = LinearOracle { cold_max_iterations: Some(5), ..full };
        let by_max = LinearOracle { lbfgs: LbfgsOptions { max_iterations: 5, ..full.lbfgs }, ..full };
        let (a, report_a, _) = capped.fit_linear_with_losses(&problem, None).unwrap();
        let (b, report_b, _) = by_max.fit_linear_with_losses(&problem, None).unwrap();
        assert_eq!(report_a.iterations, 5);
        assert_eq!(format!("{report_a:?}"), format!("{report_b:?}"));
        let bits = |m: &LinearModel| m.weights().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b));
        assert_ne!(bits(&a), bits(&full_model));
        // Warm-started from the capped fit: the same model with or without the cold budget.
        let (warm_a, _, _) = capped.fit_linear_with_losses(&problem, Some(&a)).unwrap();
        let (warm_full, _, _) = full.fit_linear_with_losses(&problem, Some(&a)).unwrap();
        assert_eq!(bits(&warm_a), bits(&warm_full));
        // The default's budget, and the setting in JSON: missing is the default, null a full fit.
        assert_eq!(LinearOracle::default().cold_max_iterations, Some(DEFAULT_COLD_MAX_ITERATIONS));
        let parsed: LinearOracle = serde_json::from_str(r#"{"cold_max_iterations": null}"#).unwrap();
        assert_eq!((parsed.cold_max_iterations, parsed.warm_max_iterations), (None, Some(DEFAULT_WARM_MAX_ITERATIONS)));
        let parsed: LinearOracle = serde_json::from_str("{}").unwrap();
        assert_eq!(parsed, LinearOracle::default());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Warm-started fits never increase `J = L + (λ/2)‖W‖²` (any penalty, any
        /// iteration budget, any warm start), and never produce non-finite weights.
        #[test]
        fn warm_starts_never_increase_the_objective(
            seed in 0u64..1000,
            n in 1usize..30,
            d in 1usize..4,
            c in 2usize..5,
            neg_inf in 0.0f64..0.6,
            l2 in prop_oneof![Just(0.0), 0.0f64..5.0],
            iterations in 1usize..6,
            scale in 0.0f64..5.0,
        ) {
            let data = Data::random(seed, n, d, c, neg_inf, seed % 2 == 0);
            let problem = data.problem();
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xabc);
            let warm = LinearModel::new(d, c, (0..c * d).map(|_| scale * rng.random_range(-1.0..1.0)).collect()).unwrap();
            let oracle = LinearOracle {
                lbfgs: LbfgsOptions { max_iterations: iterations, ..Default::default() },
                l2,
                warm_max_iterations: Some(iterations.div_ceil(2)),
                cold_max_iterations: None,
            };
            let (fit, losses) = oracle.fit_with_losses(&problem, Some(&warm), ctx()).unwrap();
            let before = model_loss(&warm, &problem).unwrap();
            let after = model_loss(fit.as_ref(), &problem).unwrap();
            let fitted = fit.as_any().downcast_ref::<LinearModel>().unwrap();
            let (jb, ja) = (before + ridge(l2, warm.weights()), after + ridge(l2, fitted.weights()));
            prop_assert!(ja <= jb, "{} > {}", ja, jb);
            prop_assert_eq!(oracle.penalty(fit.as_ref()).unwrap(), ridge(l2, fitted.weights()));
            // The losses the fit reports are model_loss's, bit for bit.
            prop_assert_eq!(losses.warm_loss.map(f64::to_bits), Some(before.to_bits()));
            prop_assert_eq!(losses.loss.map(f64::to_bits), Some(after.to_bits()));
            let fit = fit.as_any().downcast_ref::<LinearModel>().unwrap();
            prop_assert!(fit.weights().iter().all(|v| v.is_finite()));
        }
    }
}
