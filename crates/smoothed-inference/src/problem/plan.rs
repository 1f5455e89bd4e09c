//! What an inference problem needs that depends only on the region graph and
//! the entropy weights, not on `θ`: the per-star plans (which kernel each star
//! update uses, where its edges' data live), built once per graph and shared
//! through a [`ProblemPlan`].

use factor_graph::RegionGraph;

#[cfg(doc)]
use super::InferenceProblem;
use crate::InferenceError;
use crate::schedule::Schedule;
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
///
/// The blocks are as large as `θ` of the factored pairs (72 numbers per
/// edge at 8 labels: 6.9 MB for a 64×48 grid, 44 MB for 160×120), and a
/// problem is built per example and step, so their buffer is recycled:
/// dropping a `Factored` leaves its buffer as the thread's spare, which the
/// next [`Factored::zeroed`] on that thread takes instead of allocating
/// (and fragmenting the heap with, or mapping and faulting in) a new one.
#[derive(Debug, Clone, Default)]
pub(crate) struct Factored {
    pub blocks: Vec<f64>,
}

thread_local! {
    /// The buffer of the last [`Factored`] dropped on this thread (the
    /// larger one, when two are dropped before one is taken).
    static SPARE_BLOCKS: std::cell::Cell<Vec<f64>> = const { std::cell::Cell::new(Vec::new()) };
}

impl Factored {
    /// `len` zeros, in this thread's spare buffer when it has one: the same
    /// contents as `vec![0.0; len]`.
    pub fn zeroed(len: usize) -> Self {
        let mut blocks = SPARE_BLOCKS.try_with(std::cell::Cell::take).unwrap_or_default();
        blocks.clear();
        blocks.resize(len, 0.0);
        Self { blocks }
    }
}

impl Drop for Factored {
    fn drop(&mut self) {
        let blocks = std::mem::take(&mut self.blocks);
        // During the thread's teardown the spare is gone: the buffer is freed.
        let _ = SPARE_BLOCKS.try_with(|spare| {
            let other = spare.take();
            spare.set(if other.capacity() > blocks.capacity() { other } else { blocks });
        });
    }
}

/// The part of an [`InferenceProblem`] that depends only on the region graph
/// and the entropy weights, not on `θ`: the star plans and the pairing of
/// the sweeps' stars.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(super) epsilon: Vec<f64>,
    pub(super) region_eps: Vec<f64>,
    pub(crate) children: Vec<ChildPlan>,
    pub(crate) edges: Vec<EdgePlan>,
    /// Per edge: the child's stride in the parent ([`singleton_strides`]), 0
    /// when the child is not a single variable of the parent.
    pub(super) edge_strides: Vec<usize>,
    pub(super) sizes: Sizes,
    /// Whether some star is [`StarKind::Factored`].
    pub(super) has_factored: bool,
    /// Whether every star with parents is factored: then no sweep reads a
    /// parent's `θ̃`, and only the children's needs refreshing before one.
    pub(super) only_factored: bool,
    /// Whether some star is [`StarKind::Binary`] (then the AVX2 sweeps pair stars).
    pub(super) has_binary: bool,
    /// When every region with children is a pair of two binary variables
    /// whose children are the two singletons (a binary grid): the pairs, for
    /// the AVX-512 check; else empty.
    pub(crate) binary_pairs: Vec<PairCheck>,
    /// The pairing of the first sweep order used (see [`crate::schedule`]).
    pub(super) schedule: std::sync::OnceLock<Schedule>,
}

impl Plan {
    /// Validates the weights and builds the plan of `graph`.
    pub(super) fn new(graph: &RegionGraph, epsilon: &[f64]) -> Result<Self, InferenceError> {
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
    pub(super) graph: Arc<RegionGraph>,
    pub(super) plan: Arc<Plan>,
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
pub(super) struct Sizes {
    pub(super) total_configs: usize,
    pub(super) max_star: usize,
    pub(super) max_region: usize,
}

impl Sizes {
    pub(super) fn of(graph: &RegionGraph) -> Self {
        let mut s = Sizes { total_configs: graph.total_configs(), ..Sizes::default() };
        for r in 0..graph.num_regions() {
            let len = graph.num_configs(r);
            s.max_region = s.max_region.max(len);
            s.max_star = s.max_star.max(len * graph.parent_edges(r).len());
        }
        s
    }
}

/// Per edge `α → ν` with `ν` a single variable: its stride in `α`'s
/// configuration index (the product of the cardinalities after it), so that
/// the fibre of `y` is `{h·stride·|Y| + y·stride + r : r < stride}`; 0 for
/// the other edges.
///
/// Each parent's strides are computed once for all its edges (and a wide
/// parent's variable positions are looked up in a map), so a region of k
/// variables with k singleton children costs O(k), not O(k²).
pub(super) fn singleton_strides(g: &RegionGraph) -> Vec<usize> {
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
