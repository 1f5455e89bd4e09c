//! One example's inference problem (`θ`, entropy weights, region graph), the
//! reusable [`Workspace`], and the operations of docs/MATH.md §3 on them.

use factor_graph::RegionGraph;
use serde::{Deserialize, Serialize};

use crate::schedule::Schedule;
use crate::star::{self, Bufs};
use crate::{InferenceError, Messages, first_argmax};
use fastmath::{Arith, Plain, exp_nonpos, ln_pos};
use std::collections::HashMap;
use std::sync::Arc;

/// How the star update at a child region is computed (all give the same result
/// up to rounding; see [`crate::star`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StarKind {
    /// No parents: nothing to update.
    NoParents,
    /// Any child: marginals through `graph.edge_map`.
    General,
    /// Singleton child: marginals over strided fibres.
    Singleton,
    /// Binary singleton child with at most four 4-configuration parents.
    Binary,
    /// Singleton child whose parents are all pairs with exactly two singleton
    /// children (a grid's pixels): marginals from the parents' fixed
    /// exponentials and the sibling messages, without touching `θ̃` of the
    /// parents (see [`crate::star`]).
    Factored,
    /// [`StarKind::Factored`] with eight values at the child and every
    /// sibling and at most four parents (the Stanford grid).
    Factored8,
}

/// Where a child region lives and where its parent edges' plans are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChildPlan {
    /// First configuration of the child in flat per-configuration vectors.
    pub offset: usize,
    /// `|Y_ν|`.
    pub len: usize,
    /// `ε_ν`.
    pub eps: f64,
    /// `1/E`, `E = ε_ν + Σ_η ε_η` (the star's total weight).
    pub inv_total_eps: f64,
    /// `edges[first..end]` are the child's parent edges, in `graph.parent_edges` order.
    pub first: usize,
    /// End of the child's parent edges in `edges`.
    pub end: usize,
    /// Which implementation the star update uses.
    pub kind: StarKind,
}

/// Everything the star update needs about one parent → child edge.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EdgePlan {
    /// The edge index in the graph.
    pub edge: usize,
    /// First configuration of the parent in flat per-configuration vectors.
    pub parent_offset: usize,
    /// `|Y_η|`.
    pub parent_len: usize,
    /// First entry of the edge's message.
    pub message_offset: usize,
    /// For a singleton child: the stride of its variable in the parent's
    /// configuration index; 0 otherwise.
    pub stride: usize,
    /// `ε_η` of the parent.
    pub eps: f64,
    /// `1/ε_η`.
    pub inv_eps: f64,
    /// [`StarKind::Factored`] only: first entry of the message from the same
    /// parent to its other child (the sibling), else 0.
    pub sibling_offset: usize,
    /// [`StarKind::Factored`] only: the sibling's number of values, else 0.
    pub sibling_len: usize,
    /// [`StarKind::Factored`] only: the sibling's stride in the parent, else 0.
    pub sibling_stride: usize,
    /// [`StarKind::Factored`] only: where this edge's block starts in
    /// [`Factored::blocks`].
    pub block: usize,
}

/// A pair region of two binary variables, for the AVX-512 check
/// ([`Plan::binary_pairs`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PairCheck {
    /// First configuration of the pair.
    pub offset: usize,
    /// `1/ε` of the pair.
    pub inv_eps: f64,
    /// First configuration of the first variable's singleton (stride 2 in the pair).
    pub first: usize,
    /// First configuration of the second variable's singleton (stride 1).
    pub second: usize,
}

/// The fixed part of the factored star updates, built once per problem on
/// first use: per factored edge (parent pair `α`, child `ν`, sibling `σ`) a
/// block of `|Y_ν|` row maxima `M(y_ν) = max_{y_σ} θ_α` followed by
/// `E(y_σ, y_ν) = exp((θ_α(y_ν, y_σ) − M(y_ν))/ε_α)`, sibling-major.
#[derive(Debug, Clone, Default)]
pub(crate) struct Factored {
    pub blocks: Vec<f64>,
}

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

/// The part of an [`InferenceProblem`] that depends only on the region graph
/// and the entropy weights, not on `θ`: the star plans and the pairing of
/// the sweeps' stars.
#[derive(Debug)]
pub(crate) struct Plan {
    epsilon: Vec<f64>,
    region_eps: Vec<f64>,
    pub(crate) children: Vec<ChildPlan>,
    pub(crate) edges: Vec<EdgePlan>,
    /// Per edge: the child's stride in the parent ([`singleton_strides`]), 0
    /// when the child is not a single variable of the parent.
    edge_strides: Vec<usize>,
    sizes: Sizes,
    /// Whether some star is [`StarKind::Factored`].
    has_factored: bool,
    /// Whether every star with parents is factored: then no sweep reads a
    /// parent's `θ̃`, and only the children's needs refreshing before one.
    only_factored: bool,
    /// Whether some star is [`StarKind::Binary`] (then the AVX2 sweeps pair stars).
    has_binary: bool,
    /// When every region with children is a pair of two binary variables
    /// whose children are the two singletons (a binary grid): the pairs, for
    /// the AVX-512 check; else empty.
    pub(crate) binary_pairs: Vec<PairCheck>,
    /// The pairing of the first sweep order used (see [`crate::schedule`]).
    schedule: std::sync::OnceLock<Schedule>,
}

impl Plan {
    /// Validates the weights and builds the plan of `graph`.
    fn new(graph: &RegionGraph, epsilon: &[f64]) -> Result<Self, InferenceError> {
        let num_types = graph.factor_types().len();
        if epsilon.len() != num_types {
            return Err(InferenceError::WeightCount { expected: num_types, got: epsilon.len() });
        }
        if let Some((factor_type, &value)) = epsilon.iter().enumerate().find(|(_, e)| !(e.is_finite() && **e > 0.0)) {
            return Err(InferenceError::InvalidEpsilon { factor_type, value });
        }
        let region_eps: Vec<f64> = (0..graph.num_regions()).map(|r| epsilon[graph.region_type(r)]).collect();
        let edge_strides = singleton_strides(graph);
        let (children, edges) = plans(graph, &region_eps, &edge_strides);
        let has_factored = children.iter().any(|c| matches!(c.kind, StarKind::Factored | StarKind::Factored8));
        let has_binary = children.iter().any(|c| c.kind == StarKind::Binary);
        let only_factored =
            children.iter().all(|c| matches!(c.kind, StarKind::Factored | StarKind::Factored8 | StarKind::NoParents));
        let binary_pairs = binary_pairs(graph, &region_eps, &edge_strides);
        Ok(Self {
            epsilon: epsilon.to_vec(),
            binary_pairs,
            region_eps,
            children,
            edges,
            edge_strides,
            sizes: Sizes::of(graph),
            has_factored,
            only_factored,
            has_binary,
            schedule: std::sync::OnceLock::new(),
        })
    }
}

/// The part of inference problems that depends only on the region graph and
/// the entropy weights: built once and shared by every problem on that graph
/// ([`InferenceProblem::planned`]) instead of being rebuilt for each `θ` by
/// [`InferenceProblem::new`]. Worth it when many problems share one graph, as
/// the examples of a data set of one image size do (each learning iteration
/// builds a problem per example several times). Cheap to clone.
///
/// ```
/// use std::sync::Arc;
/// use smoothed_inference::{InferenceProblem, Messages, ProblemPlan, RunOptions, Workspace};
/// let plan = ProblemPlan::new(Arc::new(factor_graph::grid(3, 3, 2).unwrap()), &[0.1, 0.1]).unwrap();
/// let g = plan.graph();
/// let mut ws = Workspace::new(g);
/// for scale in [0.3, 0.6] {
///     let theta: Vec<f64> = (0..g.total_configs()).map(|i| (i % 5) as f64 * scale).collect();
///     let p = InferenceProblem::planned(&plan, &theta).unwrap();
///     // The same problem as `InferenceProblem::new(g, &theta, &[0.1, 0.1])`, bit for bit.
///     let report = p.run(&mut Messages::zeros(g), &RunOptions::default(), &mut ws).unwrap();
///     assert!(report.max_violation < 1e-3);
/// }
/// ```
#[derive(Debug, Clone)]
pub struct ProblemPlan {
    graph: Arc<RegionGraph>,
    plan: Arc<Plan>,
}

impl ProblemPlan {
    /// The plan of problems on `graph` with entropy weights `epsilon` (one
    /// positive finite weight per factor type of the graph, as
    /// [`InferenceProblem::new`] takes them).
    pub fn new(graph: Arc<RegionGraph>, epsilon: &[f64]) -> Result<Self, InferenceError> {
        let plan = Arc::new(Plan::new(&graph, epsilon)?);
        Ok(Self { graph, plan })
    }

    /// The region graph.
    pub fn graph(&self) -> &RegionGraph {
        &self.graph
    }

    /// The entropy weights, one per factor type.
    pub fn epsilon(&self) -> &[f64] {
        &self.plan.epsilon
    }
}

/// Scratch sizes a problem needs.
#[derive(Debug, Clone, Copy, Default)]
struct Sizes {
    total_configs: usize,
    max_star: usize,
    max_region: usize,
}

impl Sizes {
    fn of(graph: &RegionGraph) -> Self {
        let mut s = Sizes { total_configs: graph.total_configs(), ..Sizes::default() };
        for r in 0..graph.num_regions() {
            let len = graph.num_configs(r);
            s.max_region = s.max_region.max(len);
            s.max_star = s.max_star.max(len * graph.parent_edges(r).len());
        }
        s
    }
}

/// How often [`InferenceProblem::run`] checks its tolerance (see
/// [`RunOptions::tolerance`]).
pub const TOLERANCE_CHECK_EVERY: usize = 5;

/// Options of [`InferenceProblem::run`].
///
/// ```
/// use smoothed_inference::RunOptions;
/// // At most 1000 sweeps; stop once the largest violation is below 1e-9.
/// let opts = RunOptions { iterations: 1000, tolerance: Some(1e-9), order: None };
/// # drop(opts);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    /// Maximum number of message-passing iterations (each: star updates in the
    /// forward order, then in reverse; ch. §1.10).
    pub iterations: usize,
    /// Stop as soon as the largest marginalisation violation
    /// `max |μ_{αβ} − μ_β|` falls below this. It is checked after every
    /// [`TOLERANCE_CHECK_EVERY`]-th iteration before the last (a check costs
    /// somewhat less than one iteration on an 8-label grid; the report checks
    /// the final messages), so a run may go up to
    /// `TOLERANCE_CHECK_EVERY − 1` iterations past the point where the
    /// violation first dropped below the tolerance. Once two checks show the
    /// violation falling so slowly that, even at twice that geometric rate, it
    /// would not reach the tolerance before the last iteration, the run skips
    /// the remaining checks and does all its iterations.
    pub tolerance: Option<f64>,
    /// Forward order of child regions; `None` is `graph.default_update_order()`
    /// (raster order on grids).
    pub order: Option<Vec<usize>>,
}

impl Default for RunOptions {
    /// 25 iterations, no tolerance, default order: one message-passing phase of
    /// Algorithm 1 (docs/MATH.md §4).
    fn default() -> Self {
        Self { iterations: 25, tolerance: None, order: None }
    }
}

/// What [`InferenceProblem::run`] did.
///
/// ```
/// use smoothed_inference::{InferenceProblem, Messages, RunOptions, Workspace};
/// let g = factor_graph::grid(2, 2, 2).unwrap();
/// let theta = vec![0.5; g.total_configs()];
/// let p = InferenceProblem::uniform(&g, &theta, 1.0).unwrap();
/// let (mut m, mut ws) = (Messages::zeros(&g), Workspace::new(&g));
/// let report = p.run(&mut m, &RunOptions { iterations: 100, tolerance: Some(1e-10), order: None }, &mut ws).unwrap();
/// assert!(report.converged && report.max_violation < 1e-10);
/// assert!(report.iterations <= 100);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Iterations performed.
    pub iterations: usize,
    /// `A(λ, θ)` at the final messages (ch. Eq. 1.15).
    pub dual_value: f64,
    /// `max |μ_{αβ}(y_β) − μ_β(y_β)|` at the final messages.
    pub max_violation: f64,
    /// Whether a tolerance was given and the final violation is below it.
    pub converged: bool,
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

    /// The blocks of the factored star updates (empty when no star is
    /// factored or the fast paths are off), built on first use.
    pub(crate) fn factored_blocks(&self) -> &[f64] {
        if !(self.plan.has_factored && self.fast_paths) {
            return &[];
        }
        &self.factored.get_or_init(|| self.build_factored()).blocks
    }

    /// Whether sweeps leave some parents' `θ̃` stale (factored stars), so it
    /// must be refreshed before it is read.
    fn leaves_stale_parents(&self) -> bool {
        self.plan.has_factored && self.fast_paths
    }

    fn build_factored(&self) -> Factored {
        #[cfg(target_arch = "x86_64")]
        if simd::available() {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return unsafe { simd::build_factored(self) };
        }
        self.build_factored_with()
    }

    /// [`Self::build_factored`]'s work, `#[inline(always)]` so that the AVX2
    /// build vectorises it four wide. Plain arithmetic in both builds, so the
    /// blocks are the same bit for bit on every CPU.
    #[inline(always)]
    fn build_factored_with(&self) -> Factored {
        let factored =
            || self.plan.children.iter().filter(|c| matches!(c.kind, StarKind::Factored | StarKind::Factored8));
        let len = factored()
            .flat_map(|c| self.plan.edges[c.first..c.end].iter().map(move |ep| ep.block + c.len * (ep.sibling_len + 1)))
            .max()
            .unwrap_or(0);
        let mut blocks = vec![0.0; len];
        for cp in factored() {
            for ep in &self.plan.edges[cp.first..cp.end] {
                let (ly, lo) = (cp.len, ep.sibling_len);
                let (row_max, e) = blocks[ep.block..ep.block + ly * (lo + 1)].split_at_mut(ly);
                // E, sibling-major, first holds θ(y, b) itself.
                let theta = &self.theta[ep.parent_offset..ep.parent_offset + ep.parent_len];
                if ep.stride == 1 {
                    // The child is the pair's second variable: θ is already sibling-major.
                    e.copy_from_slice(theta);
                } else {
                    // The child is the first variable: transpose θ's rows into columns.
                    for (y, row) in theta.chunks_exact(lo).enumerate() {
                        for (col, &v) in e.chunks_exact_mut(ly).zip(row) {
                            col[y] = v;
                        }
                    }
                }
                row_max.fill(f64::NEG_INFINITY);
                for col in e.chunks_exact(ly) {
                    for (m, &v) in row_max.iter_mut().zip(col) {
                        *m = if v > *m { v } else { *m };
                    }
                }
                // An impossible row: all of its E are 0, so the star recomputes it exactly (−∞).
                for m in row_max.iter_mut() {
                    *m = if *m == f64::NEG_INFINITY { 0.0 } else { *m };
                }
                for col in e.chunks_exact_mut(ly) {
                    for (ev, &m) in col.iter_mut().zip(row_max.iter()) {
                        *ev = exp_nonpos::<Plain>((*ev - m) * ep.inv_eps);
                    }
                }
            }
        }
        Factored { blocks }
    }

    /// [`singleton_strides`] of edge `e`, from the plan.
    #[inline(always)]
    fn stride_of(&self, e: usize) -> Option<usize> {
        let stride = self.plan.edge_strides[e];
        (stride != 0).then_some(stride)
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

    /// Message passing from the given messages: up to `opts.iterations`
    /// iterations (see [`InferenceProblem::iterate`]), stopping early once the
    /// largest marginalisation violation is below `opts.tolerance`. `A(λ, θ)`
    /// never increases. The reported dual value and violation are computed
    /// from the final messages.
    pub fn run(
        &self,
        messages: &mut Messages,
        opts: &RunOptions,
        ws: &mut Workspace,
    ) -> Result<RunReport, InferenceError> {
        let iterations = self.pass_messages(messages, opts, ws)?;
        // Report from a fresh θ̃, free of the rounding the incremental updates accumulate.
        let total = self.plan.sizes.total_configs;
        let lambda = messages.as_slice();
        let tt = &mut ws.tt[..total];
        self.refresh_all(lambda, tt);
        let regions = self.graph.num_regions();
        ws.parts.resize(ws.parts.len().max(regions), [0.0; 2]);
        let parts = &mut ws.parts[..regions];
        let (max_violation, dual_value) = self.violation_and_dual_of(tt, &mut ws.beliefs[..total], &mut ws.sums, parts);
        ws.last_beliefs = total;
        ws.last_parts = regions;
        ws.last_tt = total;
        let converged = opts.tolerance.is_some_and(|tol| max_violation < tol);
        Ok(RunReport { iterations, dual_value, max_violation, converged })
    }

    /// Message passing as [`Self::run`] does it (the same final messages, bit
    /// for bit), then the labelling [`crate::decode`] reads from the final
    /// beliefs, without the rest of the report: only the singleton regions'
    /// beliefs are computed (no dual value, no violation, nothing left in the
    /// workspace). For predictions whose report nobody reads, such as the
    /// error rates during learning. Returns the iterations done and the labels.
    ///
    /// ```
    /// use smoothed_inference::{InferenceProblem, Messages, RunOptions, Workspace, decode};
    /// let g = factor_graph::grid(3, 3, 2).unwrap();
    /// let theta: Vec<f64> = (0..g.total_configs()).map(|i| (i % 5) as f64 * 0.3).collect();
    /// let p = InferenceProblem::uniform(&g, &theta, 0.1).unwrap();
    /// let (mut a, mut b, mut ws) = (Messages::zeros(&g), Messages::zeros(&g), Workspace::new(&g));
    /// let opts = RunOptions { iterations: 20, tolerance: Some(1e-6), order: None };
    /// let (iterations, labels) = p.run_and_decode(&mut a, &opts, &mut ws).unwrap();
    /// let report = p.run(&mut b, &opts, &mut ws).unwrap();
    /// assert_eq!((iterations, labels), (report.iterations, decode(&g, ws.beliefs()).unwrap()));
    /// ```
    ///
    /// Errors: those of [`Self::run`], and [`InferenceError::MissingSingleton`]
    /// as [`crate::decode`] returns it.
    pub fn run_and_decode(
        &self,
        messages: &mut Messages,
        opts: &RunOptions,
        ws: &mut Workspace,
    ) -> Result<(usize, Vec<usize>), InferenceError> {
        let g = self.graph;
        let singletons = (0..g.num_variables())
            .map(|variable| g.singleton(variable).ok_or(InferenceError::MissingSingleton { variable }))
            .collect::<Result<Vec<_>, _>>()?;
        let iterations = self.pass_messages(messages, opts, ws)?;
        let lambda = messages.as_slice();
        let (t, mu) = (&mut ws.logm, &mut ws.sums);
        let labels = singletons
            .into_iter()
            .map(|r| {
                let len = g.num_configs(r);
                // θ̃ and the beliefs of r as the report's refresh and beliefs compute them.
                self.region_reparameterized(lambda, r, &mut t[..len]);
                region_beliefs(&t[..len], self.plan.region_eps[r], &mut mu[..len]);
                first_argmax(&mu[..len])
            })
            .collect();
        Ok((iterations, labels))
    }

    /// The message passing of [`Self::run`], without the report; returns the
    /// iterations done. Leaves `θ̃` in the workspace stale.
    fn pass_messages(
        &self,
        messages: &mut Messages,
        opts: &RunOptions,
        ws: &mut Workspace,
    ) -> Result<usize, InferenceError> {
        messages.check(self.graph)?;
        let default_order;
        let order: &[usize] = match &opts.order {
            Some(order) => {
                self.graph.validate_order(order)?;
                order
            }
            None => {
                default_order = self.graph.default_update_order();
                &default_order
            }
        };
        ws.grow(self.plan.sizes);
        ws.beliefs.resize(ws.beliefs.len().max(self.plan.sizes.total_configs), 0.0);
        let total = self.plan.sizes.total_configs;
        let lambda = messages.as_mut_slice();
        let mut iterations = 0;
        {
            let (tt, mut bufs) = ws.split(total);
            self.refresh_for_sweeps(lambda, tt);
            if opts.tolerance.is_none() {
                dispatch_sweep(self, lambda, tt, &mut bufs, order, opts.iterations);
                iterations = opts.iterations;
            }
        }
        if let Some(tol) = opts.tolerance {
            let mut last_check: Option<(usize, f64)> = None;
            while iterations < opts.iterations {
                let (tt, mut bufs) = ws.split(total);
                dispatch_sweep(self, lambda, tt, &mut bufs, order, 1);
                iterations += 1;
                // The last iteration needs no check: the report below recomputes the violation.
                if iterations.is_multiple_of(TOLERANCE_CHECK_EVERY) && iterations < opts.iterations {
                    let stale = self.leaves_stale_parents();
                    if stale {
                        // The children's θ̃ afresh, as a full refresh would leave it
                        // (the sweeps go on from it, so this keeps their numbers).
                        self.refresh_children(lambda, &mut ws.tt[..total]);
                    }
                    let scratch = (&mut ws.e[..], &mut ws.sums[..]);
                    let v = dispatch_check(self, lambda, &ws.tt[..total], stale, &mut ws.beliefs[..total], scratch);
                    if v >= tol {
                        if out_of_reach(last_check, (iterations, v), tol, opts.iterations) {
                            // No check before the last iteration can succeed: sweep on without them.
                            let (tt, mut bufs) = ws.split(total);
                            dispatch_sweep(self, lambda, tt, &mut bufs, order, opts.iterations - iterations);
                            iterations = opts.iterations;
                        }
                        last_check = Some((iterations, v));
                        continue;
                    }
                    // Confirm on a fresh θ̃ (the incremental one carries rounding) so
                    // that an early stop always reports `converged`.
                    self.refresh_all(lambda, &mut ws.tt[..total]);
                    if self.violation_of(&ws.tt[..total], &mut ws.beliefs[..total], &mut ws.sums) < tol {
                        break;
                    }
                }
            }
        }
        ws.last_beliefs = 0;
        ws.last_parts = 0;
        ws.last_tt = 0;
        Ok(iterations)
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

    /// `tt = θ̃` from `θ` and the messages.
    fn refresh_all(&self, lambda: &[f64], tt: &mut [f64]) {
        tt.copy_from_slice(self.theta);
        #[cfg(target_arch = "x86_64")]
        if simd::available() {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            unsafe { simd::add_messages(self, lambda, tt) };
            return;
        }
        star::add_messages::<Plain>(self, lambda, tt);
    }

    /// `tt = θ̃` where the sweeps read it: everywhere, or, when every star is
    /// factored (none reads its parents' `θ̃`), at the stars' children only.
    fn refresh_for_sweeps(&self, lambda: &[f64], tt: &mut [f64]) {
        if self.leaves_stale_parents() && self.plan.only_factored {
            self.refresh_children(lambda, tt);
        } else {
            self.refresh_all(lambda, tt);
        }
    }

    /// For every star's child `ν` without children of its own (all of them
    /// when [`Self::leaves_stale_parents`]): `tt[ν] = θ̃_ν`, bit for bit what
    /// [`Self::refresh_all`] writes there.
    fn refresh_children(&self, lambda: &[f64], tt: &mut [f64]) {
        #[cfg(target_arch = "x86_64")]
        if simd::available() {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            unsafe { simd::refresh_children(self, lambda, tt) };
            return;
        }
        self.refresh_children_with(lambda, tt);
    }

    /// [`Self::refresh_children`]'s loop, inlined into its AVX2 build.
    #[inline(always)]
    fn refresh_children_with(&self, lambda: &[f64], tt: &mut [f64]) {
        for (r, cp) in self.plan.children.iter().enumerate() {
            if cp.first == cp.end || !self.graph.child_edges(r).is_empty() {
                continue;
            }
            let child = &mut tt[cp.offset..cp.offset + cp.len];
            child.copy_from_slice(&self.theta[cp.offset..cp.offset + cp.len]);
            for ep in &self.plan.edges[cp.first..cp.end] {
                for (c, &m) in child.iter_mut().zip(&lambda[ep.message_offset..ep.message_offset + cp.len]) {
                    *c -= m;
                }
            }
        }
    }

    /// `tt[config_range(r)] = θ̃_r` from `θ` and the messages.
    fn refresh_region(&self, lambda: &[f64], r: usize, tt: &mut [f64]) {
        self.region_reparameterized(lambda, r, &mut tt[self.graph.config_range(r)]);
    }

    /// `t = θ̃_r` (one entry per configuration of `r`) from `θ` and the messages.
    /// `#[inline(always)]`: the check builds it into its AVX2 pass.
    #[inline(always)]
    fn region_reparameterized(&self, lambda: &[f64], r: usize, t: &mut [f64]) {
        let g = self.graph;
        t.copy_from_slice(&self.theta[g.config_range(r)]);
        for &e in g.child_edges(r) {
            let msg = &lambda[g.message_range(e)];
            // Strided where the child is one variable: the same additions, no index map.
            match self.stride_of(e) {
                Some(stride) => star::apply_strided(t, stride, msg),
                None => t.iter_mut().zip(g.edge_map(e)).for_each(|(v, &y)| *v += msg[y as usize]),
            }
        }
        for &e in g.parent_edges(r) {
            for (v, &m) in t.iter_mut().zip(&lambda[g.message_range(e)]) {
                *v -= m;
            }
        }
    }

    fn dual_of(&self, tt: &[f64]) -> f64 {
        (0..self.graph.num_regions())
            .map(|r| {
                let t = &tt[self.graph.config_range(r)];
                let eps = self.plan.region_eps[r];
                let m = t.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
                let s: f64 = t.iter().map(|&v| exp_nonpos::<Plain>((v - m) / eps)).sum();
                m + eps * ln_pos::<Plain>(s)
            })
            .sum()
    }

    /// Writes the beliefs of `θ̃` into `out` and returns the dual value
    /// `Σ_α (m_α + ε_α log z_α)`, bit for bit what [`Self::dual_of`] computes
    /// (the same exponentials summed in the same order), from the same pass.
    /// With a non-empty `parts`, also `parts[r] = [m_r, z_r]` (the maximum of
    /// `θ̃_r` and `Σ exp((θ̃_r − m_r)/ε_r)`).
    fn beliefs_of(&self, tt: &[f64], out: &mut [f64], parts: &mut [[f64; 2]]) -> f64 {
        #[cfg(target_arch = "x86_64")]
        if simd::available() {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return unsafe { simd::beliefs_of(self, tt, out, parts) };
        }
        self.beliefs_with(tt, out, parts)
    }

    /// [`Self::beliefs_of`]'s work, `#[inline(always)]` so that the AVX2 build
    /// vectorises it four wide; Plain arithmetic and the same order of every
    /// sum in both builds, so the numbers are the same bit for bit.
    #[inline(always)]
    fn beliefs_with(&self, tt: &[f64], out: &mut [f64], parts: &mut [[f64; 2]]) -> f64 {
        let mut dual = 0.0;
        for r in 0..self.graph.num_regions() {
            let range = self.graph.config_range(r);
            let (t, mu) = (&tt[range.clone()], &mut out[range]);
            let eps = self.plan.region_eps[r];
            let (m, z) = region_beliefs(t, eps, mu);
            if let Some(part) = parts.get_mut(r) {
                *part = [m, z];
            }
            dual += m + eps * ln_pos::<Plain>(z);
        }
        dual
    }

    /// The largest marginalisation violation at `λ`, for the periodic checks
    /// of [`Self::run`]: the same quantity as [`Self::violation_of`] up to
    /// rounding, in one pass over the parent regions that writes only the
    /// children's beliefs (into `beliefs`). `tt` holds `θ̃` of every region,
    /// or, when `stale`, of every region that is a star's child; the parents'
    /// `θ̃` is then recomputed on the fly from `θ` and `λ`. `scratch` is two
    /// buffers of the largest region's size.
    #[inline(always)]
    fn check_violation<A: Arith>(
        &self,
        lambda: &[f64],
        tt: &[f64],
        stale: bool,
        beliefs: &mut [f64],
        scratch: (&mut [f64], &mut [f64]),
    ) -> f64 {
        let g = self.graph;
        let (t, marg) = scratch;
        self.child_beliefs::<A>(tt, beliefs);
        let mut worst = 0.0f64;
        for r in 0..g.num_regions() {
            let kids = g.child_edges(r);
            if kids.is_empty() {
                continue;
            }
            let range = g.config_range(r);
            let t = &mut t[..range.len()];
            if stale {
                self.region_reparameterized(lambda, r, t);
            } else {
                t.copy_from_slice(&tt[range]);
            }
            let inv_z = 1.0 / exp_in_place::<A>(t, 1.0 / self.plan.region_eps[r]);
            for &e in kids {
                let child = &beliefs[g.config_range(g.edge_child(e))];
                let m = &mut marg[..child.len()];
                match self.stride_of(e) {
                    Some(stride) => star::sum_strided(t, stride, m),
                    None => marginalise_region(g.edge_map(e), t, m),
                }
                for (&a, &b) in m.iter().zip(child) {
                    worst = worst.max((a * inv_z - b).abs());
                }
            }
        }
        worst
    }

    /// The first part of [`Self::check_violation`]: the beliefs of every
    /// star's child from its `θ̃`.
    #[inline(always)]
    fn child_beliefs<A: Arith>(&self, tt: &[f64], beliefs: &mut [f64]) {
        for cp in self.plan.children.iter().filter(|cp| cp.first < cp.end) {
            let range = cp.offset..cp.offset + cp.len;
            normalised_exp::<A>(&tt[range.clone()], 1.0 / cp.eps, &mut beliefs[range]);
        }
    }

    /// Largest marginalisation violation given `θ̃`; `beliefs` (total configs)
    /// and `marg` (largest region) are scratch.
    fn violation_of(&self, tt: &[f64], beliefs: &mut [f64], marg: &mut [f64]) -> f64 {
        self.violation_and_dual_of(tt, beliefs, marg, &mut []).0
    }

    /// [`Self::violation_of`] and the dual value (from the same exponentials).
    /// With a non-empty `parts`, also the log-partition parts of
    /// [`Self::beliefs_of`].
    fn violation_and_dual_of(
        &self,
        tt: &[f64],
        beliefs: &mut [f64],
        marg: &mut [f64],
        parts: &mut [[f64; 2]],
    ) -> (f64, f64) {
        let dual = self.beliefs_of(tt, beliefs, parts);
        #[cfg(target_arch = "x86_64")]
        if simd512::available() && !self.plan.binary_pairs.is_empty() {
            // SAFETY: the CPU supports AVX-512 F, AVX2 and FMA (checked just above).
            return (unsafe { simd512::report_binary(self, beliefs) }, dual);
        }
        let mut worst = 0.0f64;
        for e in 0..self.graph.num_edges() {
            let child = &beliefs[self.graph.config_range(self.graph.edge_child(e))];
            let m = &mut marg[..child.len()];
            match self.stride_of(e) {
                Some(stride) => {
                    star::sum_strided_in_order(&beliefs[self.graph.config_range(self.graph.edge_parent(e))], stride, m)
                }
                None => marginalise(self.graph, e, beliefs, m),
            }
            for (&a, &b) in m.iter().zip(child) {
                worst = worst.max((a - b).abs());
            }
        }
        (worst, dual)
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

/// Per edge `α → ν` with `ν` a single variable: its stride in `α`'s
/// configuration index (the product of the cardinalities after it), so that
/// the fibre of `y` is `{h·stride·|Y| + y·stride + r : r < stride}`; 0 for
/// the other edges.
///
/// Each parent's strides are computed once for all its edges (and a wide
/// parent's variable positions are looked up in a map), so a region of k
/// variables with k singleton children costs O(k), not O(k²).
fn singleton_strides(g: &RegionGraph) -> Vec<usize> {
    let mut out = vec![0; g.num_edges()];
    let mut strides = Vec::new();
    let mut position: HashMap<usize, usize> = HashMap::new();
    for p in 0..g.num_regions() {
        let edges = g.child_edges(p);
        if edges.is_empty() {
            continue;
        }
        let vars = g.region_variables(p);
        strides.clear();
        strides.resize(vars.len(), 1usize);
        for i in (0..vars.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * g.cardinality(vars[i + 1]);
        }
        let wide = vars.len() > 16;
        if wide {
            position.clear();
            position.extend(vars.iter().enumerate().map(|(i, &v)| (v, i)));
        }
        for &e in edges {
            let [v] = g.region_variables(g.edge_child(e)) else { continue };
            let i = if wide { position.get(v).copied() } else { vars.iter().position(|w| w == v) };
            if let Some(i) = i {
                out[e] = strides[i];
            }
        }
    }
    out
}

/// Whether the violation cannot fall below `tol` by the last iteration, judged
/// from two checks `(iteration, violation)`: only if it is falling, and too
/// slowly even at twice its observed geometric rate. Message passing
/// converges linearly (the violation shrinks by a roughly constant factor per
/// iteration), so the remaining checks of such a run would all fail.
fn out_of_reach(previous: Option<(usize, f64)>, (k, v): (usize, f64), tol: f64, max_iterations: usize) -> bool {
    let Some((j, vj)) = previous else { return false };
    if !(v < vj && v > 0.0 && tol > 0.0) {
        return false;
    }
    // Iterations to get from v to tol at the observed rate (v/vj per k − j iterations).
    let needed = (k - j) as f64 * (tol / v).ln() / (v / vj).ln();
    k as f64 + 0.5 * needed >= max_iterations as f64
}

/// `μ = exp((t − m)/ε) / z` of one region from its `θ̃` `t`, with `m = max t`
/// and `z = Σ exp((t − m)/ε)`; returns `(m, z)`. The one computation of
/// every belief the report and the decoder read.
#[inline(always)]
fn region_beliefs(t: &[f64], eps: f64, mu: &mut [f64]) -> (f64, f64) {
    // The maximum is exact in any order.
    let m = star::max_of(t);
    for (u, &v) in mu.iter_mut().zip(t) {
        *u = exp_nonpos::<Plain>((v - m) / eps);
    }
    let z: f64 = mu.iter().sum();
    for u in mu.iter_mut() {
        *u /= z;
    }
    (m, z)
}

/// `t ← exp((t − max t)·inv_eps)` in place; returns the sum (≥ 1 when some
/// entry is finite).
#[inline(always)]
fn exp_in_place<A: Arith>(t: &mut [f64], inv_eps: f64) -> f64 {
    let m = star::max_of(t);
    for v in t.iter_mut() {
        *v = exp_nonpos::<A>((*v - m) * inv_eps);
    }
    star::sum_of(t)
}

/// `out = softmax(t·inv_eps)`, `out.len() == t.len()`.
#[inline(always)]
fn normalised_exp<A: Arith>(t: &[f64], inv_eps: f64, out: &mut [f64]) {
    out.copy_from_slice(t);
    let inv_z = 1.0 / exp_in_place::<A>(out, inv_eps);
    for v in out.iter_mut() {
        *v *= inv_z;
    }
}

/// `out(y_β) = Σ_{y_α → y_β} values_α(y_α)` for edge `e = α → β`.
fn marginalise(graph: &RegionGraph, e: usize, values: &[f64], out: &mut [f64]) {
    marginalise_region(graph.edge_map(e), &values[graph.config_range(graph.edge_parent(e))], out);
}

/// `out(y_β) = Σ_{y_α: map[y_α] = y_β} parent(y_α)`, `parent` one region's values.
fn marginalise_region(map: &[u32], parent: &[f64], out: &mut [f64]) {
    out.fill(0.0);
    for (&v, &y) in parent.iter().zip(map) {
        out[y as usize] += v;
    }
}

/// Per-child star plans, grouped by child in region order (`strides` per
/// edge as [`Plan::edge_strides`]).
fn plans(graph: &RegionGraph, region_eps: &[f64], strides: &[usize]) -> (Vec<ChildPlan>, Vec<EdgePlan>) {
    let factored = factored_children(graph);
    let mut children = Vec::with_capacity(graph.num_regions());
    let mut edges = Vec::with_capacity(graph.num_edges());
    let mut block = 0;
    for r in 0..graph.num_regions() {
        let first = edges.len();
        let len = graph.num_configs(r);
        let singleton = match graph.region_variables(r) {
            [v] => Some(*v),
            _ => None,
        };
        for &e in graph.parent_edges(r) {
            let parent = graph.edge_parent(e);
            let stride = strides[e];
            let eps = region_eps[parent];
            let mut plan = EdgePlan {
                edge: e,
                parent_offset: graph.config_range(parent).start,
                parent_len: graph.num_configs(parent),
                message_offset: graph.message_range(e).start,
                stride,
                eps,
                inv_eps: 1.0 / eps,
                sibling_offset: 0,
                sibling_len: 0,
                sibling_stride: 0,
                block: 0,
            };
            if factored[r] {
                let sibling_edge = graph.child_edges(parent).iter().copied().find(|&s| s != e).expect("factored pair");
                let sibling = graph.edge_child(sibling_edge);
                plan.sibling_offset = graph.message_range(sibling_edge).start;
                plan.sibling_len = graph.num_configs(sibling);
                plan.sibling_stride = strides[sibling_edge];
                plan.block = block;
                block += len * (plan.sibling_len + 1);
            }
            edges.push(plan);
        }
        let star = &edges[first..];
        let kind = if star.is_empty() {
            StarKind::NoParents
        } else if singleton.is_none() || star.iter().any(|ep| ep.stride == 0) {
            StarKind::General
        } else if binary_star(graph, r) {
            StarKind::Binary
        } else if factored[r] && len == 8 && star.len() <= 4 && star.iter().all(|ep| ep.sibling_len == 8) {
            StarKind::Factored8
        } else if factored[r] {
            StarKind::Factored
        } else {
            StarKind::Singleton
        };
        let total_eps = star.iter().fold(region_eps[r], |e, ep| e + ep.eps);
        children.push(ChildPlan {
            offset: graph.config_range(r).start,
            len,
            eps: region_eps[r],
            inv_total_eps: 1.0 / total_eps,
            first,
            end: edges.len(),
            kind,
        });
    }
    (children, edges)
}

/// [`Plan::binary_pairs`]: every region with children as a [`PairCheck`],
/// or none unless all of them are pairs of two binary singletons.
fn binary_pairs(graph: &RegionGraph, region_eps: &[f64], strides: &[usize]) -> Vec<PairCheck> {
    let mut pairs = Vec::new();
    for (r, &eps) in region_eps.iter().enumerate() {
        let kids = graph.child_edges(r);
        if kids.is_empty() {
            continue;
        }
        let binary_kid = |stride: usize| {
            kids.iter()
                .find(|&&e| strides[e] == stride && graph.num_configs(graph.edge_child(e)) == 2)
                .map(|&e| graph.config_range(graph.edge_child(e)).start)
        };
        match (graph.num_configs(r), kids.len(), binary_kid(2), binary_kid(1)) {
            (4, 2, Some(first), Some(second)) => {
                pairs.push(PairCheck { offset: graph.config_range(r).start, inv_eps: 1.0 / eps, first, second })
            }
            _ => return Vec::new(),
        }
    }
    pairs
}

/// Whether region `r` gets the binary star update: two values, at most four
/// parents of four configurations each.
fn binary_star(graph: &RegionGraph, r: usize) -> bool {
    let parents = graph.parent_edges(r);
    graph.num_configs(r) == 2
        && parents.len() <= 4
        && parents.iter().all(|&e| graph.num_configs(graph.edge_parent(e)) == 4)
}

/// Which regions get [`StarKind::Factored`] star updates.
///
/// A candidate is a singleton region with parents, not binary-star shaped,
/// all of whose parents are pairs without parents of their own and with
/// exactly two children, the singletons of their two variables. Then a
/// parent's `θ̃` is `θ` plus its two children's messages, so its marginal can
/// be computed from fixed exponentials of `θ` and the sibling's message.
/// Factored stars do not keep `θ̃` of their parents up to date, so a pair may
/// only be a factored star's parent if its other child is factored too: the
/// candidates are pruned until that holds.
fn factored_children(graph: &RegionGraph) -> Vec<bool> {
    let singleton_of = |r: usize, v: usize| graph.region_variables(r) == [v];
    let pair_ok = |a: usize| {
        let vars = graph.region_variables(a);
        let kids = graph.child_edges(a);
        vars.len() == 2
            && graph.parent_edges(a).is_empty()
            && kids.len() == 2
            && vars.iter().all(|&v| kids.iter().any(|&e| singleton_of(graph.edge_child(e), v)))
    };
    let mut factored: Vec<bool> = (0..graph.num_regions())
        .map(|r| {
            let parents = graph.parent_edges(r);
            graph.region_variables(r).len() == 1
                && !parents.is_empty()
                && !binary_star(graph, r)
                && parents.iter().all(|&e| pair_ok(graph.edge_parent(e)))
        })
        .collect();
    loop {
        let mut changed = false;
        for r in 0..graph.num_regions() {
            if factored[r]
                && graph
                    .parent_edges(r)
                    .iter()
                    .any(|&e| graph.child_edges(graph.edge_parent(e)).iter().any(|&s| !factored[graph.edge_child(s)]))
            {
                factored[r] = false;
                changed = true;
            }
        }
        if !changed {
            return factored;
        }
    }
}

/// Runs `iterations` message-passing iterations with the best kernel this CPU has.
pub(crate) fn dispatch_sweep(
    p: &InferenceProblem<'_>,
    lambda: &mut [f64],
    tt: &mut [f64],
    bufs: &mut Bufs<'_>,
    order: &[usize],
    iterations: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if simd512::available() {
        // SAFETY: the CPU supports AVX-512 F, AVX2 and FMA (checked just above).
        unsafe { simd512::sweep(p, lambda, tt, bufs, order, iterations) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if simd::available() {
        // SAFETY: the CPU supports AVX2 and FMA (checked just above).
        unsafe { simd::sweep(p, lambda, tt, bufs, order, iterations) };
        return;
    }
    star::sweep::<Plain>(p, lambda, tt, bufs, order, iterations);
}

/// [`InferenceProblem::check_violation`] with the best kernel this CPU has.
fn dispatch_check(
    p: &InferenceProblem<'_>,
    lambda: &[f64],
    tt: &[f64],
    stale: bool,
    beliefs: &mut [f64],
    scratch: (&mut [f64], &mut [f64]),
) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if simd512::available() && !stale && !p.plan.binary_pairs.is_empty() {
        // SAFETY: the CPU supports AVX-512 F, AVX2 and FMA (checked just above).
        return unsafe { simd512::check_binary(p, tt, beliefs) };
    }
    #[cfg(target_arch = "x86_64")]
    if simd::available() {
        // SAFETY: the CPU supports AVX2 and FMA (checked just above).
        return unsafe { simd::check_violation(p, lambda, tt, stale, beliefs, scratch) };
    }
    p.check_violation::<Plain>(lambda, tt, stale, beliefs, scratch)
}

fn dispatch_single(p: &InferenceProblem<'_>, lambda: &mut [f64], tt: &mut [f64], bufs: &mut Bufs<'_>, child: usize) {
    #[cfg(target_arch = "x86_64")]
    if simd512::available() {
        // SAFETY: the CPU supports AVX-512 F, AVX2 and FMA (checked just above).
        unsafe { simd512::single(p, lambda, tt, bufs, child) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if simd::available() {
        // SAFETY: the CPU supports AVX2 and FMA (checked just above).
        unsafe { simd::single(p, lambda, tt, bufs, child) };
        return;
    }
    star::single::<Plain>(p, lambda, tt, bufs, child);
}

/// The sweeps compiled for AVX-512 F (with AVX2 and FMA): the binary and
/// 8-label stars on eight-lane registers, bit for bit the AVX2 ones.
#[cfg(target_arch = "x86_64")]
mod simd512 {
    use super::{Bufs, InferenceProblem};
    use crate::star::{self, Avx512};

    pub(super) fn available() -> bool {
        super::simd::available() && fastmath::x86::available_512()
    }

    /// The violation of [`InferenceProblem::violation_and_dual_of`] from the
    /// beliefs when the plan has [`super::Plan::binary_pairs`]: the same
    /// number, bit for bit, with the pairs two per register.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn report_binary(p: &InferenceProblem<'_>, beliefs: &[f64]) -> f64 {
        unsafe { star::report_binary_pairs(&p.plan.binary_pairs, beliefs) }
    }

    /// [`InferenceProblem::check_violation`] when `θ̃` is fresh everywhere and
    /// the plan has [`super::Plan::binary_pairs`]: the same number, bit for
    /// bit, with the pairs two per register.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn check_binary(p: &InferenceProblem<'_>, tt: &[f64], beliefs: &mut [f64]) -> f64 {
        p.child_beliefs::<fastmath::Fused>(tt, beliefs);
        unsafe { star::check_binary_pairs(&p.plan.binary_pairs, tt, beliefs) }
    }

    /// # Safety
    /// The CPU must support AVX-512 F, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn sweep(
        p: &InferenceProblem<'_>,
        lambda: &mut [f64],
        tt: &mut [f64],
        bufs: &mut Bufs<'_>,
        order: &[usize],
        iterations: usize,
    ) {
        star::sweep::<Avx512>(p, lambda, tt, bufs, order, iterations);
    }

    /// # Safety
    /// The CPU must support AVX-512 F, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn single(
        p: &InferenceProblem<'_>,
        lambda: &mut [f64],
        tt: &mut [f64],
        bufs: &mut Bufs<'_>,
        child: usize,
    ) {
        star::single::<Avx512>(p, lambda, tt, bufs, child);
    }
}

/// The same kernels compiled for AVX2 + FMA.
#[cfg(target_arch = "x86_64")]
mod simd {
    use super::{Bufs, InferenceProblem};
    use crate::star::{self, Avx2Fma};
    use fastmath::Fused;

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn beliefs_of(
        p: &InferenceProblem<'_>,
        tt: &[f64],
        out: &mut [f64],
        parts: &mut [[f64; 2]],
    ) -> f64 {
        p.beliefs_with(tt, out, parts)
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn build_factored(p: &InferenceProblem<'_>) -> super::Factored {
        p.build_factored_with()
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn check_violation(
        p: &InferenceProblem<'_>,
        lambda: &[f64],
        tt: &[f64],
        stale: bool,
        beliefs: &mut [f64],
        scratch: (&mut [f64], &mut [f64]),
    ) -> f64 {
        p.check_violation::<Fused>(lambda, tt, stale, beliefs, scratch)
    }

    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn add_messages(p: &InferenceProblem<'_>, lambda: &[f64], tt: &mut [f64]) {
        star::add_messages::<Avx2Fma>(p, lambda, tt);
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn refresh_children(p: &InferenceProblem<'_>, lambda: &[f64], tt: &mut [f64]) {
        p.refresh_children_with(lambda, tt);
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn sweep(
        p: &InferenceProblem<'_>,
        lambda: &mut [f64],
        tt: &mut [f64],
        bufs: &mut Bufs<'_>,
        order: &[usize],
        iterations: usize,
    ) {
        star::sweep::<Avx2Fma>(p, lambda, tt, bufs, order, iterations);
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn single(
        p: &InferenceProblem<'_>,
        lambda: &mut [f64],
        tt: &mut [f64],
        bufs: &mut Bufs<'_>,
        child: usize,
    ) {
        star::single::<Avx2Fma>(p, lambda, tt, bufs, child);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use factor_graph::{Scope, factors_with_singletons};
    use rand::{RngExt, SeedableRng};

    /// Singletons of four variables (2–4 values), a third-order factor and two
    /// pairs: a region graph that is neither a grid nor binary.
    fn general_graph() -> RegionGraph {
        let s = |v: &[usize], t: &str| Scope { variables: v.to_vec(), factor_type: t.into() };
        factors_with_singletons(vec![2, 3, 4, 2], &[s(&[0, 1, 2], "t"), s(&[3, 1], "p"), s(&[2, 3], "p")]).unwrap()
    }

    /// Potentials uniform in [−2, 2], each `−∞` with probability `hard`; every
    /// region's first configuration is 0, so the all-zero labelling is feasible.
    fn random_theta(g: &RegionGraph, rng: &mut rand_chacha::ChaCha8Rng, hard: f64) -> Vec<f64> {
        let mut theta: Vec<f64> = (0..g.total_configs())
            .map(|_| if rng.random::<f64>() < hard { f64::NEG_INFINITY } else { rng.random::<f64>() * 4.0 - 2.0 })
            .collect();
        for r in 0..g.num_regions() {
            theta[g.config_range(r).start] = 0.0;
        }
        theta
    }

    /// Which kernel each star gets: binary grids the binary kernel, the
    /// 8-label grid its fixed factored kernel, other multi-label grids the
    /// general factored one, and pixels of pairs that have a parent of their
    /// own (which cannot be factored) the singleton kernel.
    #[test]
    fn star_kinds_follow_the_graph() {
        let kinds = |g: &RegionGraph| {
            let theta = vec![0.0; g.total_configs()];
            let p = InferenceProblem::uniform(g, &theta, 1.0).unwrap();
            let singles = (0..g.num_regions()).filter(|&r| g.region_variables(r).len() == 1);
            singles.map(|r| p.plan.children[r].kind).collect::<Vec<_>>()
        };
        let all = |g: RegionGraph, kind: StarKind| assert!(kinds(&g).iter().all(|&k| k == kind), "{kind:?}");
        all(factor_graph::grid(4, 3, 2).unwrap(), StarKind::Binary);
        all(factor_graph::grid(4, 3, 8).unwrap(), StarKind::Factored8);
        all(factor_graph::grid(4, 3, 3).unwrap(), StarKind::Factored);
        // 3-label pairs {0,1}, {1,2} under a triple, {2,3} beside them: not
        // factored (the pairs have a parent), and so neither is 3 (its
        // sibling 2 is not).
        let mut b = factor_graph::RegionGraphBuilder::new(vec![3; 4]).unwrap();
        let (unary, pair, triple) =
            (b.add_factor_type("u").unwrap(), b.add_factor_type("p").unwrap(), b.add_factor_type("t").unwrap());
        let s: Vec<usize> = (0..4).map(|i| b.add_region(&[i], unary).unwrap()).collect();
        let mut pairs = Vec::new();
        for (u, v) in [(0, 1), (1, 2), (2, 3)] {
            let p = b.add_region(&[u, v], pair).unwrap();
            b.add_edge(p, s[u]).unwrap();
            b.add_edge(p, s[v]).unwrap();
            pairs.push(p);
        }
        let t = b.add_region(&[0, 1, 2], triple).unwrap();
        b.add_edge(t, pairs[0]).unwrap();
        b.add_edge(t, pairs[1]).unwrap();
        assert_eq!(kinds(&b.build().unwrap()), vec![StarKind::Singleton; 4]);
    }

    /// The periodic check's violation (one pass, parents' `θ̃` on the fly when
    /// stale) equals the reported one up to rounding: binary, factored
    /// (8-label, stale parents) and general graphs, with `−∞` potentials.
    #[test]
    fn check_violation_equals_max_violation() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let graphs = [
            factor_graph::grid(6, 7, 2).unwrap(),
            factor_graph::grid(5, 4, 8).unwrap(),
            factor_graph::grid(3, 4, 3).unwrap(),
            general_graph(),
        ];
        for g in &graphs {
            for hard in [0.0, 0.1] {
                let theta = random_theta(g, &mut rng, hard);
                let p = InferenceProblem::uniform(g, &theta, 0.2).unwrap();
                let (mut m, mut ws) = (Messages::zeros(g), Workspace::new(g));
                let order = g.default_update_order();
                for sweeps in 0..4 {
                    let expected = p.max_violation(&m);
                    let total = g.total_configs();
                    let stale = p.leaves_stale_parents();
                    let mut tt = vec![0.0; total];
                    p.refresh_all(m.as_slice(), &mut tt);
                    let mut beliefs = vec![0.0; total];
                    let scratch = (&mut ws.e[..], &mut ws.sums[..]);
                    let got = dispatch_check(&p, m.as_slice(), &tt, stale, &mut beliefs, scratch);
                    assert!((got - expected).abs() <= 1e-14, "after {sweeps} sweeps: {got} vs {expected}");
                    // The children's θ̃ as a full refresh writes it, bit for bit.
                    let mut children_only = vec![f64::NAN; total];
                    p.refresh_children(m.as_slice(), &mut children_only);
                    for (r, cp) in p.plan.children.iter().enumerate() {
                        if cp.first < cp.end && g.child_edges(r).is_empty() {
                            let range = cp.offset..cp.offset + cp.len;
                            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                            assert_eq!(bits(&children_only[range.clone()]), bits(&tt[range]));
                        }
                    }
                    if stale {
                        // Parents' θ̃ really recomputed: garbage there must not matter.
                        for cp in p.plan.children.iter().filter(|c| c.first < c.end) {
                            for ep in &p.plan.edges[cp.first..cp.end] {
                                tt[ep.parent_offset..ep.parent_offset + ep.parent_len].fill(f64::NAN);
                            }
                        }
                        let scratch = (&mut ws.e[..], &mut ws.sums[..]);
                        let again = dispatch_check(&p, m.as_slice(), &tt, stale, &mut beliefs, scratch);
                        assert_eq!(again.to_bits(), got.to_bits());
                    }
                    p.iterate(&mut m, &order, &mut ws);
                }
            }
        }
    }

    /// The report's beliefs (AVX2 build where available) and its violation
    /// (strided sums for singleton children) are bit for bit the portable,
    /// index-map computation.
    #[test]
    fn report_is_the_portable_computation_bit_for_bit() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let graphs = [factor_graph::grid(6, 7, 2).unwrap(), factor_graph::grid(5, 4, 8).unwrap(), general_graph()];
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for g in &graphs {
            let theta = random_theta(g, &mut rng, 0.1);
            let p = InferenceProblem::uniform(g, &theta, 0.05).unwrap();
            let (mut m, mut ws) = (Messages::zeros(g), Workspace::new(g));
            p.iterate(&mut m, &g.default_update_order(), &mut ws);
            let total = g.total_configs();
            let mut tt = vec![0.0; total];
            p.refresh_all(m.as_slice(), &mut tt);
            let (mut fast, mut portable) = (vec![0.0; total], vec![0.0; total]);
            let dual = p.beliefs_of(&tt, &mut fast, &mut []);
            let dual_portable = p.beliefs_with(&tt, &mut portable, &mut []);
            assert_eq!(dual.to_bits(), dual_portable.to_bits());
            assert_eq!(bits(&fast), bits(&portable));
            let (violation, _) = p.violation_and_dual_of(&tt, &mut fast, &mut vec![0.0; total], &mut []);
            let mut worst = 0.0f64;
            let mut marg = vec![0.0; total];
            for e in 0..g.num_edges() {
                let child = &portable[g.config_range(g.edge_child(e))];
                let mm = &mut marg[..child.len()];
                marginalise(g, e, &portable, mm);
                for (&a, &b) in mm.iter().zip(child) {
                    worst = worst.max((a - b).abs());
                }
            }
            assert_eq!(violation.to_bits(), worst.to_bits());
        }
    }

    /// The AVX-512 check of binary grids is the AVX2 check bit for bit
    /// (grids of odd and even pair counts, a chain, `−∞` potentials, several
    /// weights; after 0–3 sweeps), and only binary pair graphs get it.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn binary_pair_check_equals_the_avx2_check_bit_for_bit() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
        let chain = {
            let s =
                |v: &[usize]| Scope { variables: v.to_vec(), factor_type: if v.len() == 1 { "u" } else { "p" }.into() };
            // Pairs in both variable orders, so the first variable is sometimes the larger index.
            factors_with_singletons(vec![2; 5], &[s(&[0, 1]), s(&[2, 1]), s(&[2, 3]), s(&[4, 3])]).unwrap()
        };
        let graphs = [factor_graph::grid(6, 7, 2).unwrap(), factor_graph::grid(3, 4, 2).unwrap(), chain];
        for g in &graphs {
            for (hard, eps) in [(0.0, 0.2), (0.1, 0.05), (0.2, 1.0)] {
                let theta = random_theta(g, &mut rng, hard);
                let p = InferenceProblem::uniform(g, &theta, eps).unwrap();
                assert_eq!(
                    p.plan.binary_pairs.len(),
                    (0..g.num_regions()).filter(|&r| !g.child_edges(r).is_empty()).count()
                );
                if !(simd512::available()) {
                    continue;
                }
                let (mut m, mut ws) = (Messages::zeros(g), Workspace::new(g));
                let order = g.default_update_order();
                let total = g.total_configs();
                for sweeps in 0..4 {
                    let mut tt = vec![0.0; total];
                    p.refresh_all(m.as_slice(), &mut tt);
                    let (mut b512, mut b2) = (vec![0.0; total], vec![0.0; total]);
                    // SAFETY: AVX-512 F, AVX2 and FMA are available (checked above).
                    let fast = unsafe { simd512::check_binary(&p, &tt, &mut b512) };
                    let scratch = (&mut ws.e[..], &mut ws.sums[..]);
                    // SAFETY: as above.
                    let avx2 = unsafe { simd::check_violation(&p, m.as_slice(), &tt, false, &mut b2, scratch) };
                    assert_eq!(fast.to_bits(), avx2.to_bits(), "{fast} vs {avx2}");
                    // From zero messages the random potentials disagree somewhere.
                    assert!(sweeps > 0 || fast > 0.0);
                    p.iterate(&mut m, &order, &mut ws);
                }
            }
        }
        for g in [factor_graph::grid(3, 3, 3).unwrap(), factor_graph::grid(3, 3, 8).unwrap(), general_graph()] {
            let theta = vec![0.0; g.total_configs()];
            assert!(InferenceProblem::uniform(&g, &theta, 1.0).unwrap().plan.binary_pairs.is_empty());
        }
    }

    /// `run_and_decode` leaves the messages `run` leaves and returns the
    /// iterations it reports and the labels `decode` reads from its beliefs,
    /// bit for bit: binary and 8-label grids and a general graph, `−∞`
    /// potentials, budgets that stop early at the tolerance and that run out;
    /// and a graph without singletons is `decode`'s error before any work.
    #[test]
    fn run_and_decode_is_run_then_decode() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(21);
        let graphs = [factor_graph::grid(6, 5, 2).unwrap(), factor_graph::grid(4, 5, 8).unwrap(), general_graph()];
        let mut stopped_early = false;
        for g in &graphs {
            for (hard, eps, iterations, tolerance) in
                [(0.0, 0.5, 40, Some(1e-3)), (0.1, 0.05, 7, Some(1e-9)), (0.1, 0.2, 3, None)]
            {
                let theta = random_theta(g, &mut rng, hard);
                let p = InferenceProblem::uniform(g, &theta, eps).unwrap();
                let opts = RunOptions { iterations, tolerance, order: None };
                let (mut a, mut b, mut ws) = (Messages::zeros(g), Messages::zeros(g), Workspace::new(g));
                let (done, labels) = p.run_and_decode(&mut a, &opts, &mut ws).unwrap();
                let report = p.run(&mut b, &opts, &mut ws).unwrap();
                stopped_early |= report.iterations < iterations;
                assert_eq!(done, report.iterations);
                assert_eq!(labels, crate::decode(g, ws.beliefs()).unwrap());
                let bits = |m: &Messages| m.as_slice().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b));
            }
        }
        assert!(stopped_early);
        let mut b = factor_graph::RegionGraphBuilder::new(vec![2, 2]).unwrap();
        let t = b.add_factor_type("p").unwrap();
        b.add_region(&[0, 1], t).unwrap();
        let g = b.build().unwrap();
        let theta = vec![0.0; g.total_configs()];
        let p = InferenceProblem::uniform(&g, &theta, 1.0).unwrap();
        let (mut m, mut ws) = (Messages::zeros(&g), Workspace::new(&g));
        let err = p.run_and_decode(&mut m, &RunOptions::default(), &mut ws).unwrap_err();
        assert!(matches!(err, InferenceError::MissingSingleton { variable: 0 }), "{err:?}");
    }

    /// Problems on one shared [`ProblemPlan`] are the problems
    /// [`InferenceProblem::new`] builds, bit for bit: several `θ` on each plan
    /// (binary and 8-label grids, a general graph; `−∞` potentials), run with
    /// the default order (whose schedule the first problem builds and the
    /// others reuse, in threads at once) and with a shuffled one; and a plan
    /// checks `θ` and the weights as `new` does.
    #[test]
    fn shared_plans_give_the_problems_new_builds_bit_for_bit() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(13);
        let graphs = [factor_graph::grid(7, 6, 2).unwrap(), factor_graph::grid(5, 4, 8).unwrap(), general_graph()];
        let bits = |m: &Messages| m.as_slice().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for g in graphs {
            let eps: Vec<f64> = (0..g.factor_types().len()).map(|t| 0.05 + 0.1 * t as f64).collect();
            let mut shuffled = g.default_update_order();
            shuffled.reverse();
            shuffled.swap(0, 2);
            let thetas: Vec<Vec<f64>> = (0..4).map(|_| random_theta(&g, &mut rng, 0.1)).collect();
            let plan = ProblemPlan::new(Arc::new(g.clone()), &eps).unwrap();
            let run = |p: &InferenceProblem<'_>, order: &Option<Vec<usize>>| {
                let (mut m, mut ws) = (Messages::zeros(&g), Workspace::new(&g));
                let opts = RunOptions { iterations: 7, tolerance: Some(1e-9), order: order.clone() };
                let report = p.run(&mut m, &opts, &mut ws).unwrap();
                (bits(&m), report.dual_value.to_bits(), report.max_violation.to_bits(), ws.beliefs().to_vec())
            };
            for order in [None, Some(shuffled)] {
                let planned: Vec<_> = std::thread::scope(|s| {
                    let handles: Vec<_> = thetas
                        .iter()
                        .map(|theta| s.spawn(|| run(&InferenceProblem::planned(&plan, theta).unwrap(), &order)))
                        .collect();
                    handles.into_iter().map(|h| h.join().unwrap()).collect()
                });
                for (theta, got) in thetas.iter().zip(planned) {
                    let want = run(&InferenceProblem::new(&g, theta, &eps).unwrap(), &order);
                    assert_eq!(got.0, want.0);
                    assert_eq!((got.1, got.2), (want.1, want.2));
                    assert_eq!(
                        got.3.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                        want.3.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
                    );
                }
            }
            let mut bad = thetas[0].clone();
            bad[3] = f64::NAN;
            assert!(matches!(InferenceProblem::planned(&plan, &bad), Err(InferenceError::InvalidTheta { .. })));
            assert!(matches!(InferenceProblem::planned(&plan, &bad[1..]), Err(InferenceError::ThetaShape { .. })));
            let mut zero = eps.clone();
            zero[0] = 0.0;
            assert!(matches!(
                ProblemPlan::new(Arc::new(g.clone()), &zero),
                Err(InferenceError::InvalidEpsilon { factor_type: 0, .. })
            ));
            assert!(matches!(
                ProblemPlan::new(Arc::new(g.clone()), &eps[1..]),
                Err(InferenceError::WeightCount { .. })
            ));
            assert_eq!(plan.epsilon(), &eps[..]);
        }
    }

    /// The check schedule: skipped only when two checks show a falling
    /// violation that cannot reach the tolerance in time even twice as fast.
    #[test]
    fn checks_are_skipped_only_when_out_of_reach() {
        // 1e-2 → 5e-3 over 5 iterations: 1e-6 needs ≈ 61 more; at twice the rate ≈ 31.
        assert!(out_of_reach(Some((5, 1e-2)), (10, 5e-3), 1e-6, 25));
        assert!(!out_of_reach(Some((5, 1e-2)), (10, 5e-3), 1e-6, 200));
        // Fast enough: 1e-2 → 1e-4 in 5 iterations, 1e-6 ≈ 5 more.
        assert!(!out_of_reach(Some((5, 1e-2)), (10, 1e-4), 1e-6, 25));
        // One check, or a violation that is not falling: keep checking.
        assert!(!out_of_reach(None, (5, 1e-2), 1e-6, 25));
        assert!(!out_of_reach(Some((5, 1e-3)), (10, 2e-3), 1e-6, 25));
        // A run that converges still stops early and reports it (binary grid, weak coupling).
        let g = factor_graph::grid(8, 8, 2).unwrap();
        let theta: Vec<f64> = (0..g.total_configs()).map(|i| (i % 7) as f64 * 0.05).collect();
        let p = InferenceProblem::uniform(&g, &theta, 1.0).unwrap();
        let (mut m, mut ws) = (Messages::zeros(&g), Workspace::new(&g));
        let r = p.run(&mut m, &RunOptions { iterations: 500, tolerance: Some(1e-9), order: None }, &mut ws).unwrap();
        assert!(r.converged && r.iterations < 500 && r.iterations.is_multiple_of(TOLERANCE_CHECK_EVERY), "{r:?}");
    }

    /// The AVX2 and AVX-512 sweeps (binary and 8-label stars by intrinsics,
    /// independent binary ones in pairs, see `schedule.rs`) are bit for bit the portable
    /// kernels' sweep with fused multiply-adds in the given order: on binary
    /// and 8-label grids (also with `−∞` potentials, which hand stars to the
    /// portable kernels' rare paths), a grid in a shuffled order, an order with
    /// repeats, a chain, and a graph mixing binary stars with others.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn paired_avx2_sweeps_equal_the_portable_fused_sweeps_bit_for_bit() {
        use rand::seq::SliceRandom;
        if !simd::available() {
            return;
        }
        /// # Safety
        /// The CPU must support AVX2 and FMA.
        #[target_feature(enable = "avx2,fma")]
        unsafe fn fused(p: &InferenceProblem<'_>, lambda: &mut [f64], tt: &mut [f64], b: &mut Bufs<'_>, o: &[usize]) {
            star::sweep::<fastmath::Fused>(p, lambda, tt, b, o, 3);
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let s = |v: &[usize], t: &str| Scope { variables: v.to_vec(), factor_type: t.into() };
        let mixed = factors_with_singletons(
            vec![2, 2, 2, 3, 2, 2],
            &[s(&[0, 1], "p"), s(&[1, 2], "p"), s(&[2, 3], "p"), s(&[3, 4], "p"), s(&[4, 5], "p"), s(&[0, 5], "q")],
        )
        .unwrap();
        let chain =
            factors_with_singletons(vec![2; 9], &(0..8).map(|i| s(&[i, i + 1], "p")).collect::<Vec<_>>()).unwrap();
        let cases = [
            (factor_graph::grid(7, 9, 2).unwrap(), 0.0, false, false),
            (factor_graph::grid(23, 19, 2).unwrap(), 0.0, false, false),
            // Large enough for steps of four stars, some with impossible values.
            (factor_graph::grid(20, 17, 2).unwrap(), 0.05, false, false),
            (factor_graph::grid(6, 8, 2).unwrap(), 0.15, false, false),
            (factor_graph::grid(9, 7, 2).unwrap(), 0.0, true, false),
            (factor_graph::grid(5, 5, 2).unwrap(), 0.0, false, true),
            (chain, 0.0, false, false),
            (mixed, 0.05, false, false),
            (factor_graph::grid(6, 7, 8).unwrap(), 0.0, false, false),
            (factor_graph::grid(7, 5, 8).unwrap(), 0.2, true, false),
        ];
        for (g, hard, shuffle, repeat) in &cases {
            let theta = random_theta(g, &mut rng, *hard);
            let p = InferenceProblem::uniform(g, &theta, 0.1).unwrap();
            let mut order = g.default_update_order();
            if *shuffle {
                order.shuffle(&mut rng);
            }
            if *repeat {
                order.extend(order.clone().iter().rev().step_by(3));
            }
            let mut ws = Workspace::new(g);
            let (tt, mut bufs) = ws.split(g.total_configs());
            let mut reference = Messages::zeros(g);
            p.refresh_all(reference.as_slice(), tt);
            // SAFETY: the CPU supports AVX2 and FMA (checked above).
            unsafe { fused(&p, reference.as_mut_slice(), tt, &mut bufs, &order) };
            let reference_tt = tt.to_vec();
            for level in ["avx2", "avx512"] {
                if level == "avx512" && !simd512::available() {
                    continue;
                }
                let mut paired = Messages::zeros(g);
                p.refresh_all(paired.as_slice(), tt);
                // SAFETY: the CPU supports the features of the kernel called (checked above).
                unsafe {
                    match level {
                        "avx2" => simd::sweep(&p, paired.as_mut_slice(), tt, &mut bufs, &order, 3),
                        _ => simd512::sweep(&p, paired.as_mut_slice(), tt, &mut bufs, &order, 3),
                    }
                }
                for (a, b) in reference.as_slice().iter().zip(paired.as_slice()) {
                    assert_eq!(a.to_bits(), b.to_bits(), "{level}: messages {a} vs {b} ({} regions)", g.num_regions());
                }
                for (a, b) in reference_tt.iter().zip(tt.iter()) {
                    assert_eq!(a.to_bits(), b.to_bits(), "{level}: θ̃ {a} vs {b}");
                }
            }
        }
    }

    /// The portable build of the sweep (separate multiply and add) and the one
    /// chosen at run time (AVX2 + FMA where available) differ by rounding only.
    #[test]
    fn portable_and_dispatched_kernels_agree() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let graphs = [factor_graph::grid(5, 6, 2).unwrap(), factor_graph::grid(4, 3, 5).unwrap(), general_graph()];
        for g in &graphs {
            let theta = random_theta(g, &mut rng, 0.1);
            let p = InferenceProblem::uniform(g, &theta, 0.05).unwrap();
            let order = g.default_update_order();
            let mut ws = Workspace::new(g);
            let mut dispatched = Messages::zeros(g);
            let mut portable = Messages::zeros(g);
            let (tt, mut bufs) = ws.split(g.total_configs());
            p.refresh_all(portable.as_slice(), tt);
            star::sweep::<Plain>(&p, portable.as_mut_slice(), tt, &mut bufs, &order, 5);
            p.refresh_all(dispatched.as_slice(), tt);
            dispatch_sweep(&p, dispatched.as_mut_slice(), tt, &mut bufs, &order, 5);
            let scale = portable.as_slice().iter().fold(1.0f64, |a, v| a.max(v.abs()));
            for (a, b) in portable.as_slice().iter().zip(dispatched.as_slice()) {
                assert!((a - b).abs() <= 1e-12 * scale, "{a} vs {b}");
            }
        }
    }
}
