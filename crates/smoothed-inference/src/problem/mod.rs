//! One example's inference problem (`θ`, entropy weights, region graph), the
//! reusable [`Workspace`], and the operations of docs/MATH.md §3 on them.
//!
//! One file per job: this one holds the public [`InferenceProblem`] API and
//! the [`Workspace`]; `plan.rs` what depends only on the graph and the
//! weights ([`ProblemPlan`], the star plans); `run.rs` message passing with
//! its options and report; `reparam.rs` the reparameterised potentials `θ̃`
//! and the factored stars' fixed blocks; `beliefs.rs` the beliefs, the dual
//! value and the violations read from `θ̃`; `dispatch.rs` the choice of
//! kernel build for this CPU and the `#[target_feature]` builds; `tests.rs`
//! the tests.

use factor_graph::RegionGraph;

use crate::schedule::Schedule;
use crate::star::Bufs;
use crate::{InferenceError, Messages};
use std::sync::Arc;

mod beliefs;
mod dispatch;
mod plan;
mod reparam;
mod run;
#[cfg(test)]
mod tests;

pub use plan::ProblemPlan;
pub use run::{RunOptions, RunReport, TOLERANCE_CHECK_EVERY};

pub(crate) use dispatch::dispatch_sweep;
#[cfg(target_arch = "x86_64")]
pub(crate) use plan::PairCheck;
pub(crate) use plan::{ChildPlan, EdgePlan, Factored, Plan, StarKind};

use beliefs::marginalise;
use dispatch::dispatch_single;
use plan::Sizes;

/// The smoothed inference problem of one example: `A(θ) = min_λ A(λ, θ)` with
/// per-factor-type entropy weights (ch. Thm 1.2, Eq. 1.15; docs/MATH.md §3).
///
/// Borrows the graph and the potentials `θ` (flat, `graph.config_range(α)` per
/// region, `−∞` allowed for hard constraints); the entropy weights are one `ε_t`
/// per factor type, region `α` using the weight of its type. Construction
/// validates everything once; the operations then cannot fail on the problem.
///
/// ```
/// use smoothed_inference::{InferenceProblem, Messages, RunOptions, Workspace};
/// let g = factor_graph::grid(3, 3, 2).unwrap();
/// let theta: Vec<f64> = (0..g.total_configs()).map(|i| (i % 5) as f64 * 0.3).collect();
/// let p = InferenceProblem::new(&g, &theta, &[0.1, 0.1]).unwrap();
/// let mut m = Messages::zeros(&g);
/// let mut ws = Workspace::new(&g);
/// let a0 = p.dual_value(&m);
/// let report = p.run(&mut m, &RunOptions { iterations: 200, tolerance: Some(1e-9), order: None }, &mut ws).unwrap();
/// assert!(report.converged && report.dual_value <= a0);
/// ```
#[derive(Debug, Clone)]
pub struct InferenceProblem<'a> {
    pub(crate) graph: &'a RegionGraph,
    pub(crate) theta: &'a [f64],
    /// What depends only on the graph and the weights (shared through a
    /// [`ProblemPlan`], or built by [`InferenceProblem::new`]).
    pub(crate) plan: Arc<Plan>,
    pub(crate) fast_paths: bool,
    factored: std::sync::OnceLock<Factored>,
}

/// Reusable scratch memory of inference: the cached reparameterised potentials
/// `θ̃` and per-star buffers. One per thread; it grows to fit any problem it is
/// used with, so it can be reused across examples and graphs.
///
/// ```
/// // One per thread, reused across examples of the same shape.
/// let g = factor_graph::grid(4, 4, 3).unwrap();
/// let ws = smoothed_inference::Workspace::new(&g);
/// # drop(ws);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Workspace {
    tt: Vec<f64>,
    l: Vec<f64>,
    d: Vec<f64>,
    logm: Vec<f64>,
    sums: Vec<f64>,
    e: Vec<f64>,
    beliefs: Vec<f64>,
    /// Length of the beliefs the last [`InferenceProblem::run`] left in `beliefs`.
    last_beliefs: usize,
    /// Per region `[m_r, z_r]` of the last run's report (see [`Workspace::log_partitions`]).
    parts: Vec<[f64; 2]>,
    /// Regions in `parts`.
    last_parts: usize,
    /// Length of `tt` that holds the last report's `θ̃` (0 once a sweep outside
    /// [`InferenceProblem::run`] has changed it).
    last_tt: usize,
}

impl Workspace {
    /// A workspace sized for `graph` (any graph works; it grows when needed).
    pub fn new(graph: &RegionGraph) -> Self {
        let mut ws = Self::default();
        ws.grow(Sizes::of(graph));
        ws
    }

    /// The beliefs `μ` (flat per configuration, as [`InferenceProblem::beliefs`]
    /// writes them) at the final messages of the last
    /// [`InferenceProblem::run`] with this workspace, which computes them for its
    /// report anyway; empty before any run.
    ///
    /// ```
    /// use smoothed_inference::{InferenceProblem, Messages, RunOptions, Workspace};
    /// let g = factor_graph::grid(2, 2, 2).unwrap();
    /// let theta: Vec<f64> = (0..g.total_configs()).map(|i| (i % 3) as f64).collect();
    /// let p = InferenceProblem::uniform(&g, &theta, 0.5).unwrap();
    /// let (mut m, mut ws) = (Messages::zeros(&g), Workspace::new(&g));
    /// p.run(&mut m, &RunOptions::default(), &mut ws).unwrap();
    /// let mut again = vec![0.0; g.total_configs()];
    /// p.beliefs(&m, &mut again);
    /// assert_eq!(ws.beliefs(), &again[..]);
    /// ```
    pub fn beliefs(&self) -> &[f64] {
        &self.beliefs[..self.last_beliefs]
    }

    /// After [`InferenceProblem::run`] or [`InferenceProblem::log_partitions`]:
    /// per region `r`, `[m_r, z_r]` with `m_r = max_y θ̃_r(y)` and
    /// `z_r = Σ_y exp((θ̃_r(y) − m_r)/ε_r) ≥ 1` at the final messages, so that
    /// `m_r + ε_r ln z_r` is the region's term of the dual `A(λ, θ)` (ch. Eq.
    /// 1.15), split so that differences such as `A(λ, θ) − θ(y)` can be summed
    /// without cancellation; empty before. `θ̃` itself is
    /// [`Workspace::reparameterized`].
    pub fn log_partitions(&self) -> &[[f64; 2]] {
        &self.parts[..self.last_parts]
    }

    /// After [`InferenceProblem::run`] or [`InferenceProblem::log_partitions`]:
    /// the reparameterised potentials `θ̃` at the final messages, flat per
    /// configuration (what [`InferenceProblem::reparameterized`] writes).
    pub fn reparameterized(&self) -> &[f64] {
        &self.tt[..self.last_tt]
    }

    fn grow(&mut self, s: Sizes) {
        let fit = |v: &mut Vec<f64>, n: usize| {
            if v.len() < n {
                v.resize(n, 0.0);
            }
        };
        fit(&mut self.tt, s.total_configs);
        fit(&mut self.l, s.max_star);
        fit(&mut self.d, s.max_star);
        fit(&mut self.logm, s.max_region);
        fit(&mut self.sums, s.max_region);
        fit(&mut self.e, s.max_region);
    }

    fn split(&mut self, total_configs: usize) -> (&mut [f64], Bufs<'_>) {
        (
            &mut self.tt[..total_configs],
            Bufs { l: &mut self.l, d: &mut self.d, logm: &mut self.logm, sums: &mut self.sums, e: &mut self.e },
        )
    }
}

impl<'a> InferenceProblem<'a> {
    /// Validates and builds a problem: `θ` must have `graph.total_configs()`
    /// entries, none NaN or `+∞`, and every region a finite one; `epsilon` one
    /// positive finite weight per factor type of the graph.
    pub fn new(graph: &'a RegionGraph, theta: &'a [f64], epsilon: &[f64]) -> Result<Self, InferenceError> {
        check_theta(graph, theta)?;
        Ok(Self::with_plan(graph, theta, Arc::new(Plan::new(graph, epsilon)?)))
    }

    /// The problem of potentials `θ` on a [`ProblemPlan`]'s graph and weights:
    /// [`InferenceProblem::new`] without rebuilding what the plan holds (same
    /// validation of `θ`, same results bit for bit).
    pub fn planned(plan: &'a ProblemPlan, theta: &'a [f64]) -> Result<Self, InferenceError> {
        check_theta(&plan.graph, theta)?;
        Ok(Self::with_plan(&plan.graph, theta, Arc::clone(&plan.plan)))
    }

    fn with_plan(graph: &'a RegionGraph, theta: &'a [f64], plan: Arc<Plan>) -> Self {
        Self { graph, theta, plan, fast_paths: true, factored: std::sync::OnceLock::new() }
    }

    /// [`InferenceProblem::new`] with the same weight `ε` for every factor type
    /// (the paper's single `ε`, docs/MATH.md §3).
    pub fn uniform(graph: &'a RegionGraph, theta: &'a [f64], epsilon: f64) -> Result<Self, InferenceError> {
        Self::new(graph, theta, &vec![epsilon; graph.factor_types().len()])
    }

    /// Enables (default) or disables the specialised star updates for singleton
    /// and binary children; disabled, every star update goes through the
    /// general edge-map path. Results agree to rounding; this exists to
    /// cross-check and benchmark the paths.
    pub fn with_fast_paths(mut self, enabled: bool) -> Self {
        self.fast_paths = enabled;
        self
    }

    /// Whether sweeps with the AVX2 kernels update independent binary stars
    /// in pairs ([`crate::schedule`]).
    pub(crate) fn pairs_binary_stars(&self) -> bool {
        self.plan.has_binary && self.fast_paths
    }

    /// The pairing of `order`'s half-sweeps: built on first use and kept for
    /// that order; `None` for another order (the caller builds its own).
    pub(crate) fn schedule_for(&self, order: &[usize]) -> Option<&Schedule> {
        let s = self.plan.schedule.get_or_init(|| Schedule::build(self, order));
        (s.order == order).then_some(s)
    }

    /// The region graph.
    pub fn graph(&self) -> &'a RegionGraph {
        self.graph
    }

    /// The potentials `θ` (flat, per configuration).
    pub fn theta(&self) -> &'a [f64] {
        self.theta
    }

    /// The entropy weights, one per factor type.
    pub fn epsilon(&self) -> &[f64] {
        &self.plan.epsilon
    }

    /// `ε_α` of region `r` (the weight of its factor type). Panics if `r` is not a region.
    pub fn region_epsilon(&self, r: usize) -> f64 {
        self.plan.region_eps[r]
    }

    /// One star update (Eq. 10, ch. Thm 1.3; weighted form in the crate docs) at
    /// region `child`: all messages `λ_η(y_ν)` from its parents `η` change at
    /// once so that every parent's marginal equals the child's belief, both
    /// becoming the normalised weighted geometric mean of the old ones. An exact
    /// block-coordinate minimisation of `A(λ, θ)` (up to the `−∞` clamp of the
    /// crate docs). A region without parents is left alone.
    ///
    /// Reads `θ̃` of the star afresh from `θ` and `messages`, so it is valid at
    /// any time; the messages are assumed finite (as [`Messages`] keeps them).
    pub fn star_update(&self, messages: &mut Messages, child: usize, ws: &mut Workspace) -> Result<(), InferenceError> {
        let num_regions = self.graph.num_regions();
        if child >= num_regions {
            return Err(InferenceError::UnknownRegion { region: child, num_regions });
        }
        self.check_len(messages)?;
        ws.grow(self.plan.sizes);
        ws.last_tt = 0;
        let (tt, mut bufs) = ws.split(self.plan.sizes.total_configs);
        let lambda = messages.as_mut_slice();
        self.refresh_region(lambda, child, tt);
        for &e in self.graph.parent_edges(child) {
            self.refresh_region(lambda, self.graph.edge_parent(e), tt);
        }
        dispatch_single(self, lambda, tt, &mut bufs, child);
        Ok(())
    }

    /// One message-passing iteration (ch. §1.10): star updates at every region
    /// of `order`, then at every region of `order` reversed.
    ///
    /// # Panics
    /// If `messages` do not fit the graph or `order` names a region that does
    /// not exist; validate with [`Messages::check`] and
    /// `graph.validate_order(order)` first, or use [`InferenceProblem::run`],
    /// which returns errors instead.
    pub fn iterate(&self, messages: &mut Messages, order: &[usize], ws: &mut Workspace) {
        assert_eq!(messages.len(), self.graph.total_message_len(), "messages do not fit the graph");
        ws.grow(self.plan.sizes);
        ws.last_tt = 0;
        let (tt, mut bufs) = ws.split(self.plan.sizes.total_configs);
        self.refresh_for_sweeps(messages.as_slice(), tt);
        dispatch_sweep(self, messages.as_mut_slice(), tt, &mut bufs, order, 1);
    }

    /// What the report of [`Self::run`] leaves in the workspace, at `messages`
    /// and without message passing: `θ̃` ([`Workspace::reparameterized`]), the
    /// log-partition parts ([`Workspace::log_partitions`]) and the beliefs
    /// ([`Workspace::beliefs`]), bit for bit. Returns the dual value `A(λ, θ)`.
    ///
    /// ```
    /// use smoothed_inference::{InferenceProblem, Messages, Workspace};
    /// let g = factor_graph::grid(2, 3, 2).unwrap();
    /// let theta: Vec<f64> = (0..g.total_configs()).map(|i| (i % 4) as f64 * 0.5).collect();
    /// let p = InferenceProblem::uniform(&g, &theta, 0.5).unwrap();
    /// let (m, mut ws) = (Messages::zeros(&g), Workspace::new(&g));
    /// let dual = p.log_partitions(&m, &mut ws).unwrap();
    /// let sum: f64 = ws.log_partitions().iter().map(|[m, z]| m + 0.5 * z.ln()).sum();
    /// assert!((dual - sum).abs() < 1e-12 * dual.abs());
    /// ```
    pub fn log_partitions(&self, messages: &Messages, ws: &mut Workspace) -> Result<f64, InferenceError> {
        messages.check(self.graph)?;
        ws.grow(self.plan.sizes);
        let total = self.plan.sizes.total_configs;
        let regions = self.graph.num_regions();
        ws.beliefs.resize(ws.beliefs.len().max(total), 0.0);
        ws.parts.resize(ws.parts.len().max(regions), [0.0; 2]);
        let tt = &mut ws.tt[..total];
        self.refresh_all(messages.as_slice(), tt);
        let dual = self.beliefs_of(tt, &mut ws.beliefs[..total], &mut ws.parts[..regions]);
        ws.last_beliefs = total;
        ws.last_parts = regions;
        ws.last_tt = total;
        Ok(dual)
    }

    /// The dual objective `A(λ, θ) = Σ_α ε_α log Σ_{y_α} exp(θ̃_α(y_α)/ε_α)`
    /// (ch. Eq. 1.15 with per-region weights). `A(λ, θ) ≥ A(θ)` for all `λ`.
    ///
    /// # Panics
    /// If `messages` do not fit the graph.
    pub fn dual_value(&self, messages: &Messages) -> f64 {
        let mut tt = vec![0.0; self.plan.sizes.total_configs];
        self.reparameterized(messages, &mut tt);
        self.dual_of(&tt)
    }

    /// The reparameterised potentials
    /// `θ̃_α(y_α) = θ(y_α) + Σ_{β child of α} λ_α(y_β) − Σ_{γ parent of α} λ_γ(y_α)`
    /// (docs/MATH.md §3; the exponent of ch. Eq. 1.14), flat per configuration.
    ///
    /// # Panics
    /// If `messages` do not fit the graph or `out.len() != graph.total_configs()`.
    pub fn reparameterized(&self, messages: &Messages, out: &mut [f64]) {
        assert_eq!(messages.len(), self.graph.total_message_len(), "messages do not fit the graph");
        assert_eq!(out.len(), self.plan.sizes.total_configs, "output must have one entry per configuration");
        self.refresh_all(messages.as_slice(), out);
    }

    /// The normalised beliefs `μ_α(y_α) ∝ exp(θ̃_α(y_α)/ε_α)` of every region
    /// (Eq. 9, ch. Eq. 1.14), flat per configuration.
    ///
    /// # Panics
    /// If `messages` do not fit the graph or `out.len() != graph.total_configs()`.
    pub fn beliefs(&self, messages: &Messages, out: &mut [f64]) {
        let mut tt = vec![0.0; self.plan.sizes.total_configs];
        self.reparameterized(messages, &mut tt);
        assert_eq!(out.len(), tt.len(), "output must have one entry per configuration");
        self.beliefs_of(&tt, out, &mut []);
    }

    /// The largest marginalisation violation `max |μ_{αβ}(y_β) − μ_β(y_β)|` over
    /// all edges and child configurations (docs/MATH.md §3 convergence measure); 0 at the
    /// optimum of the dual.
    ///
    /// # Panics
    /// If `messages` do not fit the graph.
    pub fn max_violation(&self, messages: &Messages) -> f64 {
        let total = self.plan.sizes.total_configs;
        let mut tt = vec![0.0; total];
        self.reparameterized(messages, &mut tt);
        let mut beliefs = vec![0.0; total];
        let mut marg = vec![0.0; self.plan.sizes.max_region];
        self.violation_of(&tt, &mut beliefs, &mut marg)
    }

    /// The gradient of the dual (Danskin; ch. §1.5):
    /// `∂A/∂λ_α(y_β) = μ_{αβ}(y_β) − μ_β(y_β)`, flat like the messages.
    ///
    /// # Panics
    /// If `messages` do not fit the graph or `out.len() != graph.total_message_len()`.
    pub fn dual_gradient(&self, messages: &Messages, out: &mut [f64]) {
        assert_eq!(out.len(), self.graph.total_message_len(), "output must have one entry per message entry");
        let total = self.plan.sizes.total_configs;
        let mut beliefs = vec![0.0; total];
        self.beliefs(messages, &mut beliefs);
        for e in 0..self.graph.num_edges() {
            let out_e = &mut out[self.graph.message_range(e)];
            marginalise(self.graph, e, &beliefs, out_e);
            let child = &beliefs[self.graph.config_range(self.graph.edge_child(e))];
            for (g, &c) in out_e.iter_mut().zip(child) {
                *g -= c;
            }
        }
    }

    fn check_len(&self, messages: &Messages) -> Result<(), InferenceError> {
        let expected = self.graph.total_message_len();
        if messages.len() == expected {
            Ok(())
        } else {
            Err(InferenceError::MessageShape { expected, got: messages.len() })
        }
    }
}

/// `θ` must have `graph.total_configs()` entries, none NaN or `+∞`, and every
/// region a finite one.
fn check_theta(graph: &RegionGraph, theta: &[f64]) -> Result<(), InferenceError> {
    let expected = graph.total_configs();
    if theta.len() != expected {
        return Err(InferenceError::ThetaShape { expected, got: theta.len() });
    }
    for region in 0..graph.num_regions() {
        let t = &theta[graph.config_range(region)];
        if let Some((i, &value)) = t.iter().enumerate().find(|(_, v)| v.is_nan() || **v == f64::INFINITY) {
            return Err(InferenceError::InvalidTheta { region, config: i, value });
        }
        if !t.iter().any(|v| v.is_finite()) {
            return Err(InferenceError::InfeasibleRegion { region });
        }
    }
    Ok(())
}
