//! The discrepancy `Δ(y^k, y) = Σ_α Δ_α(y^k_α, y_α)` of the loss-augmented
//! parameters (docs/MATH.md §2, Eq. 5): `θ^k(y_α) = f_α(x^k, y_α) + Δ_α(y^k_α, y_α)`.

use std::fmt::Debug;

use factor_graph::RegionGraph;

/// A decomposable discrepancy: one table `Δ_α(y^k_α, ·)` per region.
///
/// ```
/// use factor_graph::RegionGraph;
/// use structlearn::Discrepancy;
/// /// Hamming loss that counts errors on label 1 twice (e.g. a rare foreground).
/// #[derive(Debug)]
/// struct Weighted;
/// impl Discrepancy for Weighted {
///     fn region(&self, graph: &RegionGraph, region: usize, truth: &[usize], out: &mut [f64]) {
///         out.fill(0.0);
///         if let [v] = graph.region_variables(region) {
///             for (y, o) in out.iter_mut().enumerate() {
///                 if y != truth[*v] {
///                     *o = if truth[*v] == 1 { 2.0 } else { 1.0 };
///                 }
///             }
///         }
///     }
/// }
/// // Trainer::new(&data, oracles, config)?.with_discrepancy(Box::new(Weighted))?
/// let g = factor_graph::grid(1, 2, 2).unwrap();
/// let mut out = [0.0; 2];
/// Weighted.region(&g, 1, &[0, 1], &mut out);
/// assert_eq!(out, [2.0, 0.0]);
/// ```
pub trait Discrepancy: Send + Sync + Debug {
    /// Writes `Δ_α(y^k_α, y_α)` for every configuration `y_α` of `region` into
    /// `out` (length `graph.num_configs(region)`), given the true labelling
    /// `truth` of all variables. Values must be finite and `Δ_α(y^k_α, y^k_α) = 0`.
    fn region(&self, graph: &RegionGraph, region: usize, truth: &[usize], out: &mut [f64]);
}

/// Hamming distance placed on the singleton regions (docs/MATH.md §2):
/// `Δ_i(y^k_i, y_i) = [y_i ≠ y^k_i]`, zero on larger regions. Variables without
/// a singleton region contribute nothing.
///
/// ```
/// use structlearn::{Discrepancy, Hamming};
/// let g = factor_graph::grid(1, 2, 2).unwrap();
/// let mut out = [0.0; 2];
/// Hamming.region(&g, 0, &[1, 0], &mut out); // pixel 0, true label 1
/// assert_eq!(out, [1.0, 0.0]);
/// let mut pair = [9.0; 4];
/// Hamming.region(&g, 2, &[1, 0], &mut pair); // the pair region: no loss
/// assert_eq!(pair, [0.0; 4]);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Hamming;

impl Discrepancy for Hamming {
    fn region(&self, graph: &RegionGraph, region: usize, truth: &[usize], out: &mut [f64]) {
        let vars = graph.region_variables(region);
        if vars.len() == 1 {
            let t = truth[vars[0]];
            for (y, o) in out.iter_mut().enumerate() {
                *o = if y == t { 0.0 } else { 1.0 };
            }
        } else {
            out.fill(0.0);
        }
    }
}

/// The zero discrepancy: no loss augmentation (a smoothed CRF-like objective).
///
/// ```
/// use structlearn::{Discrepancy, NoDiscrepancy};
/// let g = factor_graph::grid(1, 2, 2).unwrap();
/// let mut out = [9.0; 2];
/// NoDiscrepancy.region(&g, 0, &[1, 0], &mut out);
/// assert_eq!(out, [0.0, 0.0]);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDiscrepancy;

impl Discrepancy for NoDiscrepancy {
    fn region(&self, _graph: &RegionGraph, _region: usize, _truth: &[usize], out: &mut [f64]) {
        out.fill(0.0);
    }
}
