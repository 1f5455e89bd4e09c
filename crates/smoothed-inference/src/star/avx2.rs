//! The binary and 8-label star updates ([`super::binary_star`],
//! [`super::factored8_star`]), their pairs and the binary refresh of `θ̃`
//! written with AVX2 + FMA intrinsics: the same operations on every lane, in
//! the same order, so the results are bit for bit those of the portable
//! kernels with [`fastmath::Fused`] arithmetic (tested in `problem/tests.rs`). The
//! portable binary kernel builds its eight lanes from scalar loads and stores
//! (a stride-dependent branch per parent, then vector reloads); here each
//! parent's four configurations are one load, one permutation and one store.
//!
//! Lanes: parent `j`'s configurations `t` are put child-major,
//! `P_j = [θ̃(y=0, ·), θ̃(y=1, ·)]` (a parent whose child is its second
//! variable has `t1` and `t2` swapped), so fibre `y` of parent `j` is
//! `(P_j[2y], P_j[2y+1])`. Two parents share a register:
//! `A = [a(j,0), a(k,0), a(j,1), a(k,1)]` and `B` likewise with the fibres'
//! second members.

// Every function here is an `unsafe fn` whose one precondition is the CPU's
// AVX2 and FMA, and `#[inline(always)]` (not `#[target_feature]`, which
// cannot be) so that the whole kernel inlines into the sweep, compiled with
// those features, and the constants of the exponentials and logarithms are
// loaded once per sweep; the intrinsics in their bodies need nothing more.
#![allow(unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::*;

use fastmath::x86::{exp_nonpos_4, ln_pos_4};

use super::{Bufs, CLAMP, Kernel};
use crate::problem::{ChildPlan, EdgePlan};

/// One parent: its configurations child-major, `ε` and `1/ε`; zeros (and
/// `1/ε = 1`) for a missing parent, which then contributes exact zeros.
#[derive(Clone, Copy)]
struct Parent {
    p: __m256d,
    eps: f64,
    inv_eps: f64,
}

/// `[t0, t2, t1, t3]` when the child is the parent's second variable (stride 1).
#[inline(always)]
pub(super) unsafe fn child_major(t: __m256d, stride: usize) -> __m256d {
    if stride == 2 { t } else { _mm256_permute4x64_pd::<0b11_01_10_00>(t) }
}

#[inline(always)]
unsafe fn load(tt: &[f64], ep: &EdgePlan) -> Parent {
    let t = &tt[ep.parent_offset..ep.parent_offset + 4];
    // SAFETY: `t` holds four values.
    let raw = unsafe { _mm256_loadu_pd(t.as_ptr()) };
    Parent { p: child_major(raw, ep.stride), eps: ep.eps, inv_eps: ep.inv_eps }
}

const NONE: Parent =
    Parent { p: unsafe { std::mem::transmute::<[f64; 4], __m256d>([0.0; 4]) }, eps: 0.0, inv_eps: 1.0 };

/// Marginals `L` of two parents, lanes `[L_j(0), L_k(0), L_j(1), L_k(1)]`:
/// `L = hi + ε ln(1 + exp((lo − hi)/ε))`, `−∞` when `hi` is.
#[inline(always)]
unsafe fn marginals(j: Parent, k: Parent) -> __m256d {
    let a = _mm256_unpacklo_pd(j.p, k.p);
    let b = _mm256_unpackhi_pd(j.p, k.p);
    let eps = _mm256_setr_pd(j.eps, k.eps, j.eps, k.eps);
    let inv = _mm256_setr_pd(j.inv_eps, k.inv_eps, j.inv_eps, k.inv_eps);
    // hi = b > a ? b : a, lo = b > a ? a : b (as the portable kernel).
    let hi = _mm256_max_pd(b, a);
    let lo = _mm256_min_pd(a, b);
    let e = exp_nonpos_4(_mm256_mul_pd(_mm256_sub_pd(lo, hi), inv));
    let v = _mm256_fmadd_pd(eps, ln_pos_4(_mm256_add_pd(_mm256_set1_pd(1.0), e)), hi);
    let neg_inf = _mm256_set1_pd(f64::NEG_INFINITY);
    _mm256_blendv_pd(v, neg_inf, _mm256_cmp_pd::<_CMP_EQ_OQ>(hi, neg_inf))
}

/// Adds parent `j`'s change (`d = [d(0), d(0), d(1), d(1)]` child-major) to its
/// `θ̃` and `[d(0), d(1)]` to its message.
#[inline(always)]
unsafe fn write_back(tt: &mut [f64], lambda: &mut [f64], ep: &EdgePlan, p: __m256d, d: __m256d) {
    let t = &mut tt[ep.parent_offset..ep.parent_offset + 4];
    // SAFETY: `t` holds four values; the permutation of `child_major` is its own inverse.
    unsafe { _mm256_storeu_pd(t.as_mut_ptr(), child_major(_mm256_add_pd(p, d), ep.stride)) };
    let m = &mut lambda[ep.message_offset..ep.message_offset + 2];
    let dm = _mm256_castpd256_pd128(_mm256_permute4x64_pd::<0b11_10_10_00>(d));
    // SAFETY: `m` holds two values.
    unsafe { _mm_storeu_pd(m.as_mut_ptr(), _mm_add_pd(_mm_loadu_pd(m.as_ptr()), dm)) };
}

/// [`super::add_messages`] at a binary star: each parent's `θ̃` gains its
/// message, the child's loses it (the same additions, parent by parent).
#[inline(always)]
pub(super) unsafe fn add_binary_messages(cp: &ChildPlan, edges: &[EdgePlan], lambda: &[f64], tt: &mut [f64]) {
    let mut c = _mm_loadu_pd(tt[cp.offset..cp.offset + 2].as_ptr());
    for ep in edges {
        let m = _mm_loadu_pd(lambda[ep.message_offset..ep.message_offset + 2].as_ptr());
        // [m0, m0, m1, m1] child-major, back to the parent's layout.
        let m4 = _mm256_permute4x64_pd::<0b01_01_00_00>(_mm256_castpd128_pd256(m));
        let t = tt[ep.parent_offset..ep.parent_offset + 4].as_mut_ptr();
        _mm256_storeu_pd(t, _mm256_add_pd(_mm256_loadu_pd(t), child_major(m4, ep.stride)));
        c = _mm_sub_pd(c, m);
    }
    _mm_storeu_pd(tt[cp.offset..cp.offset + 2].as_mut_ptr(), c);
}

/// A binary star with its marginals computed, nothing written yet.
struct Prepared {
    parents: [Parent; 4],
    /// `[L_0(0), L_1(0), L_0(1), L_1(1)]`.
    l01: __m256d,
    /// `[L_2(0), L_3(0), L_2(1), L_3(1)]`.
    l23: __m256d,
    /// The child's `θ̃`.
    c: __m128d,
}

#[inline(always)]
unsafe fn prepare(cp: ChildPlan, edges: &[EdgePlan], tt: &[f64]) -> Prepared {
    let n = edges.len();
    let get = |j: usize| if j < n { load(tt, &edges[j]) } else { NONE };
    let parents = [get(0), get(1), get(2), get(3)];
    let l01 = marginals(parents[0], parents[1]);
    let l23 = marginals(parents[2], parents[3]);
    let child = &tt[cp.offset..cp.offset + 2];
    // SAFETY: `child` holds two values.
    let c = unsafe { _mm_loadu_pd(child.as_ptr()) };
    Prepared { parents, l01, l23, c }
}

/// Whether every marginal and the child's `θ̃` are above `−∞` (and not NaN).
#[inline(always)]
unsafe fn finite(s: &Prepared) -> bool {
    let neg_inf = _mm256_set1_pd(f64::NEG_INFINITY);
    let any = _mm256_or_pd(_mm256_cmp_pd::<_CMP_NGT_UQ>(s.l01, neg_inf), _mm256_cmp_pd::<_CMP_NGT_UQ>(s.l23, neg_inf));
    let child = _mm_cmp_pd::<_CMP_NGT_UQ>(s.c, _mm256_castpd256_pd128(neg_inf));
    _mm256_movemask_pd(any) == 0 && _mm_movemask_pd(child) == 0
}

/// Steps 2–4 of the star update on a prepared star with finite marginals.
#[inline(always)]
unsafe fn finish(cp: ChildPlan, edges: &[EdgePlan], s: Prepared, lambda: &mut [f64], tt: &mut [f64]) {
    let [p0, p1, p2, p3] = s.parents;
    // Per child value: (c + L_0) + ((L_1 + L_2) + L_3), as the portable kernel.
    let l01s = _mm256_permute4x64_pd::<0b11_01_10_00>(s.l01); // [L0(0), L0(1), L1(0), L1(1)]
    let l23s = _mm256_permute4x64_pd::<0b11_01_10_00>(s.l23); // [L2(0), L2(1), L3(0), L3(1)]
    let (x, y) = (_mm256_castpd256_pd128(l01s), _mm256_extractf128_pd::<1>(l01s));
    let (z, w) = (_mm256_castpd256_pd128(l23s), _mm256_extractf128_pd::<1>(l23s));
    let sum = _mm_add_pd(_mm_add_pd(s.c, x), _mm_add_pd(_mm_add_pd(y, z), w));
    let m = _mm_mul_pd(sum, _mm_set1_pd(cp.inv_total_eps));
    let floor = _mm_sub_pd(_mm_max_pd(m, _mm_permute_pd::<0b01>(m)), _mm_set1_pd(CLAMP));
    let logm = _mm_max_pd(m, floor);
    // [logm(0), logm(0), logm(1), logm(1)]
    let logm4 = _mm256_permute4x64_pd::<0b01_01_00_00>(_mm256_castpd128_pd256(logm));
    let d01 = _mm256_fmsub_pd(_mm256_setr_pd(p0.eps, p1.eps, p0.eps, p1.eps), logm4, s.l01);
    let d23 = _mm256_fmsub_pd(_mm256_setr_pd(p2.eps, p3.eps, p2.eps, p3.eps), logm4, s.l23);
    // (d_0 + d_1) + (d_2 + d_3) per child value.
    let h = _mm256_hadd_pd(d01, d23);
    let h = _mm256_hadd_pd(h, h); // [d(0), d(0), d(1), d(1)]
    let dsum = _mm256_castpd256_pd128(_mm256_permute4x64_pd::<0b11_10_10_00>(h));
    let child = &mut tt[cp.offset..cp.offset + 2];
    // SAFETY: `child` holds two values.
    unsafe { _mm_storeu_pd(child.as_mut_ptr(), _mm_sub_pd(s.c, dsum)) };
    let parts = [
        (p0.p, _mm256_permute_pd::<0b0000>(d01)),
        (p1.p, _mm256_permute_pd::<0b1111>(d01)),
        (p2.p, _mm256_permute_pd::<0b0000>(d23)),
        (p3.p, _mm256_permute_pd::<0b1111>(d23)),
    ];
    for (ep, (p, d)) in edges.iter().zip(parts) {
        write_back(tt, lambda, ep, p, d);
    }
}

binary_entry_points!();

/// [`super::factored8_star`] (an eight-valued child of at most four factored
/// pairs with eight-valued siblings): per parent two four-lane exponentials of
/// the sibling's message, the 8 × 8 product with the block of fixed
/// exponentials, two four-lane logarithms; the same operations in the same
/// order as the portable kernel, so the same bits. A fibre sum below
/// `TINY_SUM` or an impossible child value hands the star to the portable
/// kernel (its exact rare paths).
///
/// Written phase by phase over the parents (all exponentials, then all
/// products, then all logarithms), not parent by parent: each parent's
/// exponential → product → logarithm chain is long, and with sixteen
/// registers a parent's code is too long for the core to overlap the next
/// parent's chain with it (AVX-512 halves the code, so it does there). Phase
/// by phase, the eight exponentials and the eight logarithms of a star are
/// independent chains side by side. Each lane's operations are unchanged.
#[inline(always)]
pub(super) unsafe fn factored8_star<A: Kernel>(
    theta: &[f64],
    blocks: &[f64],
    cp: ChildPlan,
    edges: &[EdgePlan],
    lambda: &mut [f64],
    tt: &mut [f64],
    bufs: &mut Bufs<'_>,
) {
    const N: usize = 8;
    let neg_inf = _mm256_set1_pd(f64::NEG_INFINITY);
    let zero = _mm256_setzero_pd();
    let tiny = _mm256_set1_pd(super::TINY_SUM);
    let n = edges.len();
    // Phase 1: each sibling message's maximum and exponentials.
    let mut mus = [zero; 4];
    let mut w = [[zero; 2]; 4];
    for ((ep, mu4), wj) in edges.iter().zip(mus.iter_mut()).zip(w.iter_mut()) {
        let sib = &lambda[ep.sibling_offset..ep.sibling_offset + N];
        let (s0, s1) = (_mm256_loadu_pd(sib.as_ptr()), _mm256_loadu_pd(sib.as_ptr().add(4)));
        // super::max_of's order: four lanes over the two halves, then the lanes in turn.
        let lanes: [f64; 4] = std::mem::transmute(_mm256_max_pd(s1, _mm256_max_pd(s0, neg_inf)));
        let mu = lanes.iter().fold(f64::NEG_INFINITY, |m, &v| if v > m { v } else { m });
        let inv = _mm256_set1_pd(ep.inv_eps);
        *mu4 = _mm256_set1_pd(mu);
        wj[0] = exp_nonpos_4(_mm256_mul_pd(_mm256_sub_pd(s0, *mu4), inv));
        wj[1] = exp_nonpos_4(_mm256_mul_pd(_mm256_sub_pd(s1, *mu4), inv));
    }
    // Phase 2: the fibre sums, the 8 × 8 products with the fixed blocks.
    let mut sums = [[zero; 2]; 4];
    let mut rare = 0;
    for ((ep, wj), sj) in edges.iter().zip(&w).zip(sums.iter_mut()) {
        let blk = &blocks[ep.block..ep.block + N * (N + 1)];
        let e = |k: usize, h: usize| _mm256_loadu_pd(blk.as_ptr().add(N + N * k + 4 * h));
        let (w0, w1) = (wj[0], wj[1]);
        let (b0, b1, b2, b3) = (
            _mm256_permute4x64_pd::<0x00>(w0),
            _mm256_permute4x64_pd::<0x55>(w0),
            _mm256_permute4x64_pd::<0xAA>(w0),
            _mm256_permute4x64_pd::<0xFF>(w0),
        );
        let (b4, b5, b6, b7) = (
            _mm256_permute4x64_pd::<0x00>(w1),
            _mm256_permute4x64_pd::<0x55>(w1),
            _mm256_permute4x64_pd::<0xAA>(w1),
            _mm256_permute4x64_pd::<0xFF>(w1),
        );
        for (h, out) in sj.iter_mut().enumerate() {
            let a0 = _mm256_fmadd_pd(b4, e(4, h), _mm256_fmadd_pd(b0, e(0, h), zero));
            let a1 = _mm256_fmadd_pd(b5, e(5, h), _mm256_fmadd_pd(b1, e(1, h), zero));
            let a2 = _mm256_fmadd_pd(b6, e(6, h), _mm256_fmadd_pd(b2, e(2, h), zero));
            let a3 = _mm256_fmadd_pd(b7, e(7, h), _mm256_fmadd_pd(b3, e(3, h), zero));
            let s = _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3));
            rare |= _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LT_OQ>(s, tiny));
            *out = s;
        }
    }
    // Phase 3: the marginals, L = (own + M) + μ + ε ln s.
    let mut l = [[zero; 2]; 4];
    for (((ep, sj), mu4), lj) in edges.iter().zip(&sums).zip(&mus).zip(l.iter_mut()) {
        let own = &lambda[ep.message_offset..ep.message_offset + N];
        let blk = &blocks[ep.block..ep.block + N * (N + 1)];
        for (h, out) in lj.iter_mut().enumerate() {
            let row_max = _mm256_loadu_pd(blk.as_ptr().add(4 * h));
            let base = _mm256_add_pd(_mm256_add_pd(_mm256_loadu_pd(own.as_ptr().add(4 * h)), row_max), *mu4);
            *out = _mm256_fmadd_pd(_mm256_set1_pd(ep.eps), ln_pos_4(sj[h]), base);
        }
    }
    let child = &tt[cp.offset..cp.offset + N];
    let c = [_mm256_loadu_pd(child.as_ptr()), _mm256_loadu_pd(child.as_ptr().add(4))];
    for &ch in &c {
        rare |= _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_NGT_UQ>(ch, neg_inf));
    }
    if rare != 0 {
        super::factored8_star::<A>(theta, blocks, cp, edges, lambda, tt, bufs);
        return;
    }
    let inv_e = _mm256_set1_pd(cp.inv_total_eps);
    let mut logm = [zero; 2];
    for (h, lm) in logm.iter_mut().enumerate() {
        let mut s = c[h];
        for lj in &l[..n] {
            s = _mm256_add_pd(s, lj[h]);
        }
        *lm = _mm256_mul_pd(s, inv_e);
    }
    // The largest log m (any order: the floor below is the same).
    let m = _mm256_max_pd(logm[0], logm[1]);
    let m = _mm256_max_pd(m, _mm256_permute4x64_pd::<0b01_00_11_10>(m));
    let m = _mm256_max_pd(m, _mm256_permute_pd::<0b0101>(m));
    let floor = _mm256_sub_pd(m, _mm256_set1_pd(CLAMP));
    for lm in &mut logm {
        *lm = _mm256_max_pd(*lm, floor);
    }
    let mut sum = [zero; 2];
    let mut d = [[zero; 2]; 4];
    for ((ep, lj), dj) in edges.iter().zip(&l).zip(d.iter_mut()) {
        let eps = _mm256_set1_pd(ep.eps);
        for h in 0..2 {
            dj[h] = _mm256_fmsub_pd(eps, logm[h], lj[h]);
            sum[h] = _mm256_add_pd(sum[h], dj[h]);
        }
    }
    let child = &mut tt[cp.offset..cp.offset + N];
    for h in 0..2 {
        _mm256_storeu_pd(child.as_mut_ptr().add(4 * h), _mm256_sub_pd(c[h], sum[h]));
    }
    for (ep, dj) in edges.iter().zip(&d) {
        let m = &mut lambda[ep.message_offset..ep.message_offset + N];
        for (h, &dv) in dj.iter().enumerate() {
            let p = m.as_mut_ptr().add(4 * h);
            _mm256_storeu_pd(p, _mm256_add_pd(_mm256_loadu_pd(p), dv));
        }
    }
}
