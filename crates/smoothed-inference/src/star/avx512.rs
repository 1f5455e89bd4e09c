//! The binary and 8-label star updates of [`super::avx2`] on AVX-512
//! registers: a star's eight lanes (four parents × two child values, or eight
//! child values) are one register, so each exponential and logarithm is one
//! eight-lane evaluation instead of two four-lane ones. The same operations
//! in the same order as the portable kernels, so the same bits (tested in
//! `problem/tests.rs`). Binary lanes: `j + 4y` (parent `j`, child value `y`).

// As in `avx2.rs`: `unsafe fn`s whose one precondition is AVX-512 F (and the
// AVX2 + FMA every such CPU has), inlined into the sweep compiled for them.
#![allow(unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::*;

use fastmath::x86::{exp_nonpos_8, ln_pos_8};

use super::avx2::child_major;
use super::{Bufs, CLAMP, Kernel};
use crate::problem::{ChildPlan, EdgePlan, PairCheck};

/// A binary star with its marginals computed, nothing written yet.
struct Prepared {
    /// Each parent's configurations, child-major (zeros for a missing parent).
    p: [__m256d; 4],
    /// `ε` of parent `j` in lanes `j` and `j + 4` (0 for a missing parent).
    eps: __m512d,
    /// Marginals `L_j(y)` in lane `j + 4y`.
    l: __m512d,
    /// The child's `θ̃`.
    c: __m128d,
}

#[inline(always)]
unsafe fn prepare(cp: ChildPlan, edges: &[EdgePlan], tt: &[f64]) -> Prepared {
    let mut p = [_mm256_setzero_pd(); 4];
    let (mut e, mut i) = ([0.0; 4], [1.0; 4]);
    for (j, ep) in edges.iter().enumerate().take(4) {
        let t = &tt[ep.parent_offset..ep.parent_offset + 4];
        p[j] = child_major(_mm256_loadu_pd(t.as_ptr()), ep.stride);
        (e[j], i[j]) = (ep.eps, ep.inv_eps);
    }
    let eps = _mm512_setr_pd(e[0], e[1], e[2], e[3], e[0], e[1], e[2], e[3]);
    let inv = _mm512_setr_pd(i[0], i[1], i[2], i[3], i[0], i[1], i[2], i[3]);
    let q01 = _mm512_insertf64x4::<1>(_mm512_castpd256_pd512(p[0]), p[1]);
    let q23 = _mm512_insertf64x4::<1>(_mm512_castpd256_pd512(p[2]), p[3]);
    // a(j, y) = P_j[2y], b(j, y) = P_j[2y + 1]; lane j + 4y.
    let a = _mm512_permutex2var_pd(q01, _mm512_setr_epi64(0, 4, 8, 12, 2, 6, 10, 14), q23);
    let b = _mm512_permutex2var_pd(q01, _mm512_setr_epi64(1, 5, 9, 13, 3, 7, 11, 15), q23);
    let hi = _mm512_max_pd(b, a);
    let lo = _mm512_min_pd(a, b);
    let e = exp_nonpos_8(_mm512_mul_pd(_mm512_sub_pd(lo, hi), inv));
    let v = _mm512_fmadd_pd(eps, ln_pos_8(_mm512_add_pd(_mm512_set1_pd(1.0), e)), hi);
    let neg_inf = _mm512_set1_pd(f64::NEG_INFINITY);
    let l = _mm512_mask_blend_pd(_mm512_cmp_pd_mask::<_CMP_EQ_OQ>(hi, neg_inf), v, neg_inf);
    let child = &tt[cp.offset..cp.offset + 2];
    Prepared { p, eps, l, c: _mm_loadu_pd(child.as_ptr()) }
}

#[inline(always)]
unsafe fn finite(s: &Prepared) -> bool {
    let neg_inf = _mm512_set1_pd(f64::NEG_INFINITY);
    _mm512_cmp_pd_mask::<_CMP_NGT_UQ>(s.l, neg_inf) == 0
        && _mm_movemask_pd(_mm_cmp_pd::<_CMP_NGT_UQ>(s.c, _mm_set1_pd(f64::NEG_INFINITY))) == 0
}

#[inline(always)]
unsafe fn finish(cp: ChildPlan, edges: &[EdgePlan], s: Prepared, lambda: &mut [f64], tt: &mut [f64]) {
    // [L0(0), L0(1), L1(0), L1(1), L2(0), L2(1), L3(0), L3(1)]
    let by_parent = _mm512_permutexvar_pd(_mm512_setr_epi64(0, 4, 1, 5, 2, 6, 3, 7), s.l);
    let (l01, l23) = (_mm512_castpd512_pd256(by_parent), _mm512_extractf64x4_pd::<1>(by_parent));
    let (x, y) = (_mm256_castpd256_pd128(l01), _mm256_extractf128_pd::<1>(l01));
    let (z, w) = (_mm256_castpd256_pd128(l23), _mm256_extractf128_pd::<1>(l23));
    // Per child value: (c + L_0) + ((L_1 + L_2) + L_3), as the portable kernel.
    let sum = _mm_add_pd(_mm_add_pd(s.c, x), _mm_add_pd(_mm_add_pd(y, z), w));
    let m = _mm_mul_pd(sum, _mm_set1_pd(cp.inv_total_eps));
    let floor = _mm_sub_pd(_mm_max_pd(m, _mm_permute_pd::<0b01>(m)), _mm_set1_pd(CLAMP));
    let logm = _mm_max_pd(m, floor);
    let logm8 = _mm512_permutexvar_pd(_mm512_setr_epi64(0, 0, 0, 0, 1, 1, 1, 1), _mm512_castpd128_pd512(logm));
    let d = _mm512_fmsub_pd(s.eps, logm8, s.l);
    // (d_0 + d_1) + (d_2 + d_3) per child value, in lanes 0 and 4.
    let t = _mm512_add_pd(d, _mm512_permutexvar_pd(_mm512_setr_epi64(1, 0, 3, 2, 5, 4, 7, 6), d));
    let u = _mm512_add_pd(t, _mm512_permutexvar_pd(_mm512_setr_epi64(2, 3, 0, 1, 6, 7, 4, 5), t));
    let dsum = _mm512_castpd512_pd128(_mm512_permutexvar_pd(_mm512_setr_epi64(0, 4, 0, 4, 0, 4, 0, 4), u));
    let child = &mut tt[cp.offset..cp.offset + 2];
    _mm_storeu_pd(child.as_mut_ptr(), _mm_sub_pd(s.c, dsum));
    for (j, ep) in edges.iter().enumerate().take(4) {
        let j = j as i64;
        // [d_j(0), d_j(0), d_j(1), d_j(1)]
        let dj = _mm512_castpd512_pd256(_mm512_permutexvar_pd(_mm512_setr_epi64(j, j, j + 4, j + 4, 0, 0, 0, 0), d));
        let t = &mut tt[ep.parent_offset..ep.parent_offset + 4];
        _mm256_storeu_pd(t.as_mut_ptr(), child_major(_mm256_add_pd(s.p[j as usize], dj), ep.stride));
        let msg = &mut lambda[ep.message_offset..ep.message_offset + 2];
        let dm = _mm256_castpd256_pd128(_mm256_permute4x64_pd::<0b11_10_10_00>(dj));
        _mm_storeu_pd(msg.as_mut_ptr(), _mm_add_pd(_mm_loadu_pd(msg.as_ptr()), dm));
    }
}

binary_entry_points!();

/// [`super::avx2::factored8_star`] on AVX-512 registers: a row of eight
/// values is one register.
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
    let zero = _mm512_setzero_pd();
    let tiny = _mm512_set1_pd(super::TINY_SUM);
    let n = edges.len();
    let mut l = [zero; 4];
    let mut rare = 0u8;
    for (ep, lj) in edges.iter().zip(l.iter_mut()) {
        let own = &lambda[ep.message_offset..ep.message_offset + N];
        let sib = _mm512_loadu_pd(lambda[ep.sibling_offset..ep.sibling_offset + N].as_ptr());
        // super::max_of's order: four lanes over the two halves, then the lanes in turn.
        let halves = (_mm512_castpd512_pd256(sib), _mm512_extractf64x4_pd::<1>(sib));
        let lanes: [f64; 4] =
            std::mem::transmute(_mm256_max_pd(halves.1, _mm256_max_pd(halves.0, _mm256_set1_pd(f64::NEG_INFINITY))));
        let mu = lanes.iter().fold(f64::NEG_INFINITY, |m, &v| if v > m { v } else { m });
        let mu8 = _mm512_set1_pd(mu);
        let w = exp_nonpos_8(_mm512_mul_pd(_mm512_sub_pd(sib, mu8), _mm512_set1_pd(ep.inv_eps)));
        let blk = &blocks[ep.block..ep.block + N * (N + 1)];
        let e = |k: usize| _mm512_loadu_pd(blk.as_ptr().add(N + N * k));
        let b = |k: i64| _mm512_permutexvar_pd(_mm512_set1_epi64(k), w);
        let a0 = _mm512_fmadd_pd(b(4), e(4), _mm512_fmadd_pd(b(0), e(0), zero));
        let a1 = _mm512_fmadd_pd(b(5), e(5), _mm512_fmadd_pd(b(1), e(1), zero));
        let a2 = _mm512_fmadd_pd(b(6), e(6), _mm512_fmadd_pd(b(2), e(2), zero));
        let a3 = _mm512_fmadd_pd(b(7), e(7), _mm512_fmadd_pd(b(3), e(3), zero));
        let s = _mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3));
        rare |= _mm512_cmp_pd_mask::<_CMP_LT_OQ>(s, tiny);
        let base = _mm512_add_pd(_mm512_add_pd(_mm512_loadu_pd(own.as_ptr()), _mm512_loadu_pd(blk.as_ptr())), mu8);
        *lj = _mm512_fmadd_pd(_mm512_set1_pd(ep.eps), ln_pos_8(s), base);
    }
    let c = _mm512_loadu_pd(tt[cp.offset..cp.offset + N].as_ptr());
    rare |= _mm512_cmp_pd_mask::<_CMP_NGT_UQ>(c, _mm512_set1_pd(f64::NEG_INFINITY));
    if rare != 0 {
        super::factored8_star::<A>(theta, blocks, cp, edges, lambda, tt, bufs);
        return;
    }
    let mut s = c;
    for &lj in &l[..n] {
        s = _mm512_add_pd(s, lj);
    }
    let logm = _mm512_mul_pd(s, _mm512_set1_pd(cp.inv_total_eps));
    // The largest log m (any order: the floor below is the same).
    let floor = _mm512_set1_pd(_mm512_reduce_max_pd(logm) - CLAMP);
    let logm = _mm512_max_pd(logm, floor);
    let mut sum = zero;
    let mut d = [zero; 4];
    for ((ep, &lj), dj) in edges.iter().zip(&l).zip(d.iter_mut()) {
        *dj = _mm512_fmsub_pd(_mm512_set1_pd(ep.eps), logm, lj);
        sum = _mm512_add_pd(sum, *dj);
    }
    _mm512_storeu_pd(tt[cp.offset..cp.offset + N].as_mut_ptr(), _mm512_sub_pd(c, sum));
    for (ep, &dj) in edges.iter().zip(&d) {
        let m = lambda[ep.message_offset..ep.message_offset + N].as_mut_ptr();
        _mm512_storeu_pd(m, _mm512_add_pd(_mm512_loadu_pd(m), dj));
    }
}

/// `max` over `pairs` of the lanes `$of` computes for two pairs `$a`, `$b` at
/// a time (the last pair twice when their number is odd); like `f64::max`, a
/// NaN lane is ignored. A macro, not a function taking a closure: a closure
/// is compiled without the caller's target features unless inlined, and the
/// intrinsics in it would then be calls.
macro_rules! max_over_pairs {
    ($pairs:expr, |$a:ident, $b:ident| $of:expr) => {{
        let mut worst = _mm512_setzero_pd();
        let mut twos = $pairs.chunks_exact(2);
        for two in &mut twos {
            let ($a, $b) = (&two[0], &two[1]);
            worst = _mm512_max_pd($of, worst);
        }
        if let [last] = twos.remainder() {
            let ($a, $b) = (last, last);
            worst = _mm512_max_pd($of, worst);
        }
        _mm512_reduce_max_pd(worst)
    }};
}

/// The largest violation `max |μ_{αν} − μ_ν|` over the binary pairs of
/// [`crate::problem::Plan`]'s `binary_pairs`, from `θ̃` of the pairs and the
/// children's beliefs: bit for bit what the check's region loop computes
/// for them with [`fastmath::Fused`] arithmetic (the same operations; the
/// sums of four and two added in the same order), two pairs per register.
#[inline(always)]
pub(crate) unsafe fn check_binary_pairs(pairs: &[PairCheck], tt: &[f64], beliefs: &[f64]) -> f64 {
    max_over_pairs!(pairs, |a, b| check_two(a, b, tt, beliefs))
}

/// [`check_binary_pairs`]' lanes of pairs `a` and `b`.
#[inline(always)]
unsafe fn check_two(a: &PairCheck, b: &PairCheck, tt: &[f64], beliefs: &[f64]) -> __m512d {
    let t = load_pairs(tt, a, b);
    // Each pair's maximum in all four of its lanes (exact in any order).
    let m = _mm512_max_pd(t, _mm512_permutex_pd::<0b10_11_00_01>(t));
    let m = _mm512_max_pd(m, _mm512_permutex_pd::<0b01_00_11_10>(m));
    let inv_eps = _mm512_insertf64x4::<1>(_mm512_set1_pd(a.inv_eps), _mm256_set1_pd(b.inv_eps));
    let e = exp_nonpos_8(_mm512_mul_pd(_mm512_sub_pd(t, m), inv_eps));
    let (first, second) = variable_sums(e);
    let z = _mm512_add_pd(first, _mm512_permutex_pd::<0b01_00_11_10>(first));
    let inv_z = _mm512_div_pd(_mm512_set1_pd(1.0), z);
    differences(_mm512_mul_pd(marginals(first, second), inv_z), a, b, beliefs)
}

/// The largest violation over the binary pairs from the beliefs of every
/// region (normalised), as the report computes it edge by edge: bit for bit
/// (each marginal the sum of two beliefs, in configuration order).
#[inline(always)]
pub(crate) unsafe fn report_binary_pairs(pairs: &[PairCheck], beliefs: &[f64]) -> f64 {
    max_over_pairs!(pairs, |a, b| {
        let (first, second) = variable_sums(load_pairs(beliefs, a, b));
        differences(marginals(first, second), a, b, beliefs)
    })
}

/// The four configurations of pair `a` (lanes 0–3) and of `b` (lanes 4–7) from `values`.
#[inline(always)]
unsafe fn load_pairs(values: &[f64], a: &PairCheck, b: &PairCheck) -> __m512d {
    let lo = _mm256_loadu_pd(values[a.offset..a.offset + 4].as_ptr());
    let hi = _mm256_loadu_pd(values[b.offset..b.offset + 4].as_ptr());
    _mm512_insertf64x4::<1>(_mm512_castpd256_pd512(lo), hi)
}

/// Configuration `y1·2 + y2`: `[v0 + v1, ·, v2 + v3, ·]` are the first
/// variable's sums, `[v0 + v2, v1 + v3, ·, ·]` the second's (per pair).
#[inline(always)]
unsafe fn variable_sums(v: __m512d) -> (__m512d, __m512d) {
    let first = _mm512_add_pd(v, _mm512_permutex_pd::<0b10_11_00_01>(v));
    let second = _mm512_add_pd(v, _mm512_permutex_pd::<0b01_00_11_10>(v));
    (first, second)
}

/// Per pair: the first variable's two sums, then the second's.
#[inline(always)]
unsafe fn marginals(first: __m512d, second: __m512d) -> __m512d {
    _mm512_permutex2var_pd(first, _mm512_setr_epi64(0, 2, 8, 9, 4, 6, 12, 13), second)
}

/// The beliefs of pair `p`'s first variable, then of its second.
#[inline(always)]
unsafe fn children(p: &PairCheck, beliefs: &[f64]) -> __m256d {
    let first = _mm_loadu_pd(beliefs[p.first..p.first + 2].as_ptr());
    let second = _mm_loadu_pd(beliefs[p.second..p.second + 2].as_ptr());
    _mm256_insertf128_pd::<1>(_mm256_castpd128_pd256(first), second)
}

/// `|marginal − μ_ν|` lane by lane, the children's beliefs in [`marginals`]' order.
#[inline(always)]
unsafe fn differences(marginals: __m512d, a: &PairCheck, b: &PairCheck, beliefs: &[f64]) -> __m512d {
    let child = _mm512_insertf64x4::<1>(_mm512_castpd256_pd512(children(a, beliefs)), children(b, beliefs));
    let d = _mm512_sub_pd(marginals, child);
    _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(d), _mm512_set1_epi64(i64::MAX)))
}
