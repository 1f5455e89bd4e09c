//! The oracle: its hyper-parameters ([`MlpOracle`]), their validation, and
//! the fit (epochs of minibatch SGD from a warm or cold start, keeping the
//! best parameters seen; module docs).

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::layout::Layout;
use super::model::MlpModel;
use super::sgd::Sgd;
use super::{KIND, MAX_EPOCHS, MAX_STEP_HALVINGS, PAIRWISE_STEP_SIZE, UNARY_STEP_SIZE};
use crate::{
    FitContext, FitLosses, Model, Oracle, OracleError, Problem, check_model_shape, check_score_buffer, downcast_warm,
};

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
#[serde(default, deny_unknown_fields)]
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

    /// Over ranks, each minibatch is the one a single process draws (the
    /// permutation is over the whole problem's rows), each rank computes
    /// its rows' share of the gradient, and the shares are summed; the
    /// epochs' losses are the whole problem's. The same model to about
    /// 1e-9 relative, not bit for bit: a minibatch's rows are added per
    /// rank, then over ranks in rank order.
    fn distributed(&self) -> bool {
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
        crate::check_size(
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
            // Over ranks, the permutation and minibatches are one process's,
            // over the whole problem's rows (`Sgd::epoch`).
            let rows = problem.global_rows();
            let mut sgd = Sgd::new(layout, self.minibatch.min(rows), problem);
            let mut order: Vec<usize> = (0..rows).collect();
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
                    sgd.epoch(&mut params, problem, &order, self.minibatch, step, self.momentum);
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
