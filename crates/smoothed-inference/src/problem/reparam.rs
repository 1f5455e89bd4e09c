//! The reparameterised potentials `θ̃` (refreshed from `θ` and the messages,
//! everywhere or where the sweeps read them) and the fixed blocks of the
//! factored star updates built from `θ`.

#[cfg(target_arch = "x86_64")]
use super::dispatch::simd;
#[cfg(doc)]
use super::plan::singleton_strides;
use super::{Factored, InferenceProblem, StarKind};
use crate::star;
use fastmath::{Plain, exp_nonpos};

impl InferenceProblem<'_> {
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
    pub(super) fn leaves_stale_parents(&self) -> bool {
        self.plan.has_factored && self.fast_paths
    }

    pub(super) fn build_factored(&self) -> Factored {
        #[cfg(target_arch = "x86_64")]
        if fastmath::x86::avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return unsafe { simd::build_factored(self) };
        }
        self.build_factored_with()
    }

    /// [`Self::build_factored`]'s work, `#[inline(always)]` so that the AVX2
    /// build vectorises it four wide. Plain arithmetic in both builds, so the
    /// blocks are the same bit for bit on every CPU.
    #[inline(always)]
    pub(super) fn build_factored_with(&self) -> Factored {
        let factored =
            || self.plan.children.iter().filter(|c| matches!(c.kind, StarKind::Factored | StarKind::Factored8));
        let len = factored()
            .flat_map(|c| self.plan.edges[c.first..c.end].iter().map(move |ep| ep.block + c.len * (ep.sibling_len + 1)))
            .max()
            .unwrap_or(0);
        let mut out = Factored::zeroed(len);
        let blocks = &mut out.blocks;
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
        out
    }

    /// [`singleton_strides`] of edge `e`, from the plan.
    #[inline(always)]
    pub(super) fn stride_of(&self, e: usize) -> Option<usize> {
        let stride = self.plan.edge_strides[e];
        (stride != 0).then_some(stride)
    }

    /// `tt = θ̃` from `θ` and the messages.
    pub(super) fn refresh_all(&self, lambda: &[f64], tt: &mut [f64]) {
        tt.copy_from_slice(self.theta);
        #[cfg(target_arch = "x86_64")]
        if fastmath::x86::avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            unsafe { simd::add_messages(self, lambda, tt) };
            return;
        }
        star::add_messages::<Plain>(self, lambda, tt);
    }

    /// `tt = θ̃` where the sweeps read it: everywhere, or, when every star is
    /// factored (none reads its parents' `θ̃`), at the stars' children only.
    pub(super) fn refresh_for_sweeps(&self, lambda: &[f64], tt: &mut [f64]) {
        if self.leaves_stale_parents() && self.plan.only_factored {
            self.refresh_children(lambda, tt);
        } else {
            self.refresh_all(lambda, tt);
        }
    }

    /// For every star's child `ν` without children of its own (all of them
    /// when [`Self::leaves_stale_parents`]): `tt[ν] = θ̃_ν`, bit for bit what
    /// [`Self::refresh_all`] writes there.
    pub(super) fn refresh_children(&self, lambda: &[f64], tt: &mut [f64]) {
        #[cfg(target_arch = "x86_64")]
        if fastmath::x86::avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            unsafe { simd::refresh_children(self, lambda, tt) };
            return;
        }
        self.refresh_children_with(lambda, tt);
    }

    /// [`Self::refresh_children`]'s loop, inlined into its AVX2 build.
    #[inline(always)]
    pub(super) fn refresh_children_with(&self, lambda: &[f64], tt: &mut [f64]) {
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
    pub(super) fn refresh_region(&self, lambda: &[f64], r: usize, tt: &mut [f64]) {
        self.region_reparameterized(lambda, r, &mut tt[self.graph.config_range(r)]);
    }

    /// `t = θ̃_r` (one entry per configuration of `r`) from `θ` and the messages.
    /// `#[inline(always)]`: the check builds it into its AVX2 pass.
    #[inline(always)]
    pub(super) fn region_reparameterized(&self, lambda: &[f64], r: usize, t: &mut [f64]) {
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
}
