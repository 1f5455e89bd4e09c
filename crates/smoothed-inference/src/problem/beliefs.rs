//! What is read from `θ̃`: the beliefs, the dual value `A(λ, θ)` and the
//! marginalisation violations (the report's, and the cheaper periodic check
//! of [`InferenceProblem::run`]).

use factor_graph::RegionGraph;

use super::InferenceProblem;
#[cfg(target_arch = "x86_64")]
use super::dispatch::{simd, simd512};
use crate::star;
use fastmath::{Arith, Plain, exp_nonpos, ln_pos};

impl InferenceProblem<'_> {
    pub(super) fn dual_of(&self, tt: &[f64]) -> f64 {
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
    pub(super) fn beliefs_of(&self, tt: &[f64], out: &mut [f64], parts: &mut [[f64; 2]]) -> f64 {
        #[cfg(target_arch = "x86_64")]
        if fastmath::x86::avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return unsafe { simd::beliefs_of(self, tt, out, parts) };
        }
        self.beliefs_with(tt, out, parts)
    }

    /// [`Self::beliefs_of`]'s work, `#[inline(always)]` so that the AVX2 build
    /// vectorises it four wide; Plain arithmetic and the same order of every
    /// sum in both builds, so the numbers are the same bit for bit.
    #[inline(always)]
    pub(super) fn beliefs_with(&self, tt: &[f64], out: &mut [f64], parts: &mut [[f64; 2]]) -> f64 {
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
    pub(super) fn check_violation<A: Arith>(
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
    pub(super) fn child_beliefs<A: Arith>(&self, tt: &[f64], beliefs: &mut [f64]) {
        for cp in self.plan.children.iter().filter(|cp| cp.first < cp.end) {
            let range = cp.offset..cp.offset + cp.len;
            normalised_exp::<A>(&tt[range.clone()], 1.0 / cp.eps, &mut beliefs[range]);
        }
    }

    /// Largest marginalisation violation given `θ̃`; `beliefs` (total configs)
    /// and `marg` (largest region) are scratch.
    pub(super) fn violation_of(&self, tt: &[f64], beliefs: &mut [f64], marg: &mut [f64]) -> f64 {
        self.violation_and_dual_of(tt, beliefs, marg, &mut []).0
    }

    /// [`Self::violation_of`] and the dual value (from the same exponentials).
    /// With a non-empty `parts`, also the log-partition parts of
    /// [`Self::beliefs_of`].
    pub(super) fn violation_and_dual_of(
        &self,
        tt: &[f64],
        beliefs: &mut [f64],
        marg: &mut [f64],
        parts: &mut [[f64; 2]],
    ) -> (f64, f64) {
        let dual = self.beliefs_of(tt, beliefs, parts);
        #[cfg(target_arch = "x86_64")]
        if fastmath::x86::avx512() && !self.plan.binary_pairs.is_empty() {
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

/// `μ = exp((t − m)/ε) / z` of one region from its `θ̃` `t`, with `m = max t`
/// and `z = Σ exp((t − m)/ε)`; returns `(m, z)`. The one computation of
/// every belief the report and the decoder read.
#[inline(always)]
pub(super) fn region_beliefs(t: &[f64], eps: f64, mu: &mut [f64]) -> (f64, f64) {
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
pub(super) fn exp_in_place<A: Arith>(t: &mut [f64], inv_eps: f64) -> f64 {
    let m = star::max_of(t);
    for v in t.iter_mut() {
        *v = exp_nonpos::<A>((*v - m) * inv_eps);
    }
    star::sum_of(t)
}

/// `out = softmax(t·inv_eps)`, `out.len() == t.len()`.
#[inline(always)]
pub(super) fn normalised_exp<A: Arith>(t: &[f64], inv_eps: f64, out: &mut [f64]) {
    out.copy_from_slice(t);
    let inv_z = 1.0 / exp_in_place::<A>(out, inv_eps);
    for v in out.iter_mut() {
        *v *= inv_z;
    }
}

/// `out(y_β) = Σ_{y_α → y_β} values_α(y_α)` for edge `e = α → β`.
pub(super) fn marginalise(graph: &RegionGraph, e: usize, values: &[f64], out: &mut [f64]) {
    marginalise_region(graph.edge_map(e), &values[graph.config_range(graph.edge_parent(e))], out);
}

/// `out(y_β) = Σ_{y_α: map[y_α] = y_β} parent(y_α)`, `parent` one region's values.
pub(super) fn marginalise_region(map: &[u32], parent: &[f64], out: &mut [f64]) {
    out.fill(0.0);
    for (&v, &y) in parent.iter().zip(map) {
        out[y as usize] += v;
    }
}
