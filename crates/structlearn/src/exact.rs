//! Exact decoding by enumeration for small graphs, and **constrained**
//! decoding: labelings that a hard constraint forbids (`θ_α(y_α) = −∞`,
//! docs/MATH.md §6.5) are never returned.
//!
//! * [`map_labeling`]: `argmax_y Σ_α θ_α(y_α)` over every labeling of the
//!   graph (`∏_i |Y_i| ≤` [`MAX_LABELINGS`]), skipping forbidden ones — the
//!   "inference" of Punyakanok et al.'s L+I and IBT.
//! * [`local_labeling`]: each variable's own best label from its singleton
//!   region alone — their LO prediction (may be forbidden).
//! * [`feasible_decode`]: decoding of smoothed beliefs that respects the
//!   constraints: the per-variable argmax of the singleton beliefs if it is
//!   feasible, otherwise the feasible labeling maximising `Σ_i log μ_i(y_i)`.
//!
//! ```
//! use factor_graph::{Scope, factors_with_singletons};
//! use structlearn::exact::map_labeling;
//! // Two binary variables with one pair region that forbids (1, 1).
//! let g = factors_with_singletons(vec![2, 2], &[Scope { variables: vec![0, 1], factor_type: "c".into() }]).unwrap();
//! let mut theta = vec![0.0; g.total_configs()];
//! theta[g.config_range(0).start + 1] = 1.0; // variable 0 prefers 1
//! theta[g.config_range(1).start + 1] = 2.0; // variable 1 prefers 1 more
//! theta[g.config_range(2).start + 3] = f64::NEG_INFINITY; // (1, 1) is forbidden
//! assert_eq!(map_labeling(&g, &theta, 0).unwrap(), vec![0, 1]);
//! ```

use factor_graph::RegionGraph;

use crate::LearnError;

/// Largest number of labelings [`map_labeling`] enumerates.
pub const MAX_LABELINGS: usize = 1 << 22;

/// Number of labelings of `graph`, saturating at `usize::MAX`.
///
/// ```
/// let g = factor_graph::grid(2, 2, 3).unwrap();
/// assert_eq!(structlearn::exact::labelings(&g), 81);
/// ```
pub fn labelings(graph: &RegionGraph) -> usize {
    graph.cardinalities().iter().fold(1usize, |a, &c| a.saturating_mul(c))
}

/// Score `Σ_α θ_α(y_α)` of a labeling (`−∞` if some region forbids it).
///
/// ```
/// let g = factor_graph::grid(1, 2, 2).unwrap();
/// let mut theta = vec![0.0; g.total_configs()];
/// theta[g.config_range(1).start + 1] = 2.0;
/// assert_eq!(structlearn::exact::score(&g, &theta, &[0, 1]), 2.0);
/// ```
pub fn score(graph: &RegionGraph, theta: &[f64], labels: &[usize]) -> f64 {
    smoothed_inference::decoding::score(graph, theta, labels)
}

/// Whether no region forbids the labeling (`θ_α(y_α) > −∞` everywhere).
///
/// ```
/// let g = factor_graph::grid(1, 2, 2).unwrap();
/// let mut theta = vec![0.0; g.total_configs()];
/// theta[g.config_range(2).start + 3] = f64::NEG_INFINITY; // the pair forbids (1, 1)
/// assert!(!structlearn::exact::is_feasible(&g, &theta, &[1, 1]));
/// assert!(structlearn::exact::is_feasible(&g, &theta, &[0, 1]));
/// ```
pub fn is_feasible(graph: &RegionGraph, theta: &[f64], labels: &[usize]) -> bool {
    (0..graph.num_regions())
        .all(|r| theta[graph.config_range(r).start + graph.config_of(r, labels)] > f64::NEG_INFINITY)
}

/// Calls `visit` on every feasible labeling with its score, in mixed-radix
/// order (last variable fastest). `example` names the example in errors.
fn for_each_feasible(
    graph: &RegionGraph,
    theta: &[f64],
    example: usize,
    mut visit: impl FnMut(&[usize], f64),
) -> Result<(), LearnError> {
    let total = labelings(graph);
    if total > MAX_LABELINGS {
        return Err(LearnError::TooManyLabelings { example, labelings: total, limit: MAX_LABELINGS });
    }
    let card = graph.cardinalities();
    let mut y = vec![0; card.len()];
    let mut any = false;
    for _ in 0..total {
        let s = score(graph, theta, &y);
        if s > f64::NEG_INFINITY {
            any = true;
            visit(&y, s);
        }
        for i in (0..y.len()).rev() {
            y[i] += 1;
            if y[i] < card[i] {
                break;
            }
            y[i] = 0;
        }
    }
    if any { Ok(()) } else { Err(LearnError::Infeasible { example }) }
}

/// The best feasible labeling `argmax_y Σ_α θ_α(y_α)` by enumeration; ties go
/// to the first in mixed-radix order. Errors: [`LearnError::TooManyLabelings`],
/// [`LearnError::Infeasible`].
///
/// ```
/// let g = factor_graph::grid(1, 3, 2).unwrap();
/// let mut theta = vec![0.0; g.total_configs()];
/// for v in 0..3 {
///     theta[g.config_range(v).start + 1] = 1.0; // every pixel prefers 1
/// }
/// theta[g.config_range(3).start + 3] = f64::NEG_INFINITY; // but pixels 0 and 1 may not both be 1
/// assert_eq!(structlearn::exact::map_labeling(&g, &theta, 0).unwrap(), vec![0, 1, 1]);
/// ```
pub fn map_labeling(graph: &RegionGraph, theta: &[f64], example: usize) -> Result<Vec<usize>, LearnError> {
    let mut best = (f64::NEG_INFINITY, Vec::new());
    for_each_feasible(graph, theta, example, |y, s| {
        if s > best.0 || best.1.is_empty() {
            best = (s, y.to_vec());
        }
    })?;
    Ok(best.1)
}

/// Each variable's best label by its singleton region's `θ` alone (ties: the
/// smallest label); constraints are ignored. Errors if a variable has no
/// singleton region.
///
/// ```
/// let g = factor_graph::grid(1, 2, 2).unwrap();
/// let mut theta = vec![0.0; g.total_configs()];
/// theta[g.config_range(0).start + 1] = 1.0;
/// theta[g.config_range(2).start + 2] = f64::NEG_INFINITY; // ignored: constraints play no role locally
/// assert_eq!(structlearn::exact::local_labeling(&g, &theta).unwrap(), vec![1, 0]);
/// ```
pub fn local_labeling(graph: &RegionGraph, theta: &[f64]) -> Result<Vec<usize>, LearnError> {
    (0..graph.num_variables())
        .map(|v| {
            let r = graph.singleton(v).ok_or_else(|| {
                LearnError::Config(format!("variable {v} has no singleton region to decide it locally"))
            })?;
            Ok(argmax(&theta[graph.config_range(r)]))
        })
        .collect()
}

fn argmax(v: &[f64]) -> usize {
    v.iter().enumerate().fold((0, f64::NEG_INFINITY), |b, (y, &x)| if x > b.1 { (y, x) } else { b }).0
}

/// Decodes smoothed beliefs (flat per configuration) without ever returning a
/// forbidden labeling: the per-variable argmax of the singleton beliefs if
/// `θ` allows it, else the feasible labeling with the largest
/// `Σ_i log μ_i(y_i)` (by enumeration).
///
/// ```
/// let g = factor_graph::grid(1, 2, 2).unwrap();
/// let mut theta = vec![0.0; g.total_configs()];
/// theta[g.config_range(2).start + 3] = f64::NEG_INFINITY; // (1, 1) forbidden
/// let mut beliefs = vec![0.0; g.total_configs()];
/// for v in 0..2 {
///     beliefs[g.config_range(v)].copy_from_slice(&[0.4, 0.6]); // each alone prefers 1
/// }
/// let y = structlearn::exact::feasible_decode(&g, &theta, &beliefs, 0).unwrap();
/// assert!(structlearn::exact::is_feasible(&g, &theta, &y));
/// ```
pub fn feasible_decode(
    graph: &RegionGraph,
    theta: &[f64],
    beliefs: &[f64],
    example: usize,
) -> Result<Vec<usize>, LearnError> {
    let greedy =
        smoothed_inference::decode(graph, beliefs).map_err(|source| LearnError::Inference { example, source })?;
    if is_feasible(graph, theta, &greedy) {
        return Ok(greedy);
    }
    let mut log_mu = vec![0.0; graph.total_configs()];
    for v in 0..graph.num_variables() {
        if let Some(r) = graph.singleton(v) {
            for c in graph.config_range(r) {
                log_mu[c] = beliefs[c].max(f64::MIN_POSITIVE).ln();
            }
        }
    }
    let mut best = (f64::NEG_INFINITY, Vec::new());
    for_each_feasible(graph, theta, example, |y, _| {
        let s: f64 = (0..graph.num_variables())
            .filter_map(|v| graph.singleton(v).map(|r| log_mu[graph.config_range(r).start + y[v]]))
            .sum();
        if s > best.0 || best.1.is_empty() {
            best = (s, y.to_vec());
        }
    })?;
    Ok(best.1)
}
