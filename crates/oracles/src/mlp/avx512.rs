//! The MLP's heaviest loops on AVX-512 registers (eight rows or eight weights
//! per register instead of four): the forward products of 16 rows
//! ([`tile_sums_16`]), the backward pass's outer-product sums over pairs or
//! quadruples of tiles ([`outer_sums`], reading the rows of pairs of tiles
//! that [`rows_of_pairs`] writes together) and `tanh` ([`tanh_slice`]). Each
//! computes every value by the same operations, in the same order, as the
//! portable kernels of `kernels.rs` with fused multiply-adds, so it gives the same
//! bits (tests `mlp_gradient_is_the_plain_arithmetic_bit_for_bit` and
//! `mlp_wide_kernels_are_the_portable_ones_bit_for_bit`). Each is a safe
//! function compiled for AVX-512 F, called only after
//! [`fastmath::x86::avx512`] (AVX-512 F, and AVX2 + FMA, which every AVX-512
//! CPU has; the portable kernels these stand in for need them).

use std::arch::x86_64::*;

use super::TILE;
use super::kernels::{INV_FACTORIAL, LN2_HI, LN2_LO, ROUND, TANH_CLAMP};

/// `super::kernels::tanh::<Fused>` of eight lanes.
#[inline]
#[target_feature(enable = "avx512f")]
fn tanh_8(x: __m512d) -> __m512d {
    let sign = _mm512_set1_epi64(i64::MIN);
    let y = _mm512_mul_pd(_mm512_set1_pd(-2.0), _mm512_min_pd(_mm512_abs_pd(x), _mm512_set1_pd(TANH_CLAMP)));
    let round = _mm512_set1_pd(ROUND);
    let z = _mm512_fmadd_pd(y, _mm512_set1_pd(std::f64::consts::LOG2_E), round);
    let k = _mm512_sub_pd(z, round);
    let r = _mm512_sub_pd(
        _mm512_sub_pd(y, _mm512_mul_pd(k, _mm512_set1_pd(LN2_HI))),
        _mm512_mul_pd(k, _mm512_set1_pd(LN2_LO)),
    );
    let mut p = _mm512_set1_pd(INV_FACTORIAL[0]);
    for &c in &INV_FACTORIAL[1..] {
        p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(c));
    }
    let one = _mm512_set1_pd(1.0);
    p = _mm512_fmadd_pd(p, r, one);
    p = _mm512_fmadd_pd(p, r, one);
    let two_k = _mm512_slli_epi64::<52>(_mm512_add_epi64(_mm512_castpd_si512(z), _mm512_set1_epi64(1023)));
    let e = _mm512_mul_pd(p, _mm512_castsi512_pd(two_k));
    let q = _mm512_castpd_si512(_mm512_div_pd(_mm512_sub_pd(one, e), _mm512_add_pd(one, e)));
    // copysign: the magnitude of q, the sign of x.
    let signed = _mm512_or_si512(_mm512_andnot_si512(sign, q), _mm512_and_si512(sign, _mm512_castpd_si512(x)));
    _mm512_castsi512_pd(signed)
}

/// `v ← tanh v` for every value of `t`, eight at a time.
#[target_feature(enable = "avx512f")]
pub(super) fn tanh_slice(t: &mut [f64]) {
    let mut chunks = t.chunks_exact_mut(8);
    for c in &mut chunks {
        let c: &mut [f64; 8] = c.try_into().expect("chunks of 8");
        // SAFETY: `c` is eight values.
        unsafe { _mm512_storeu_pd(c.as_mut_ptr(), tanh_8(_mm512_loadu_pd(c.as_ptr()))) };
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let mask: __mmask8 = (1u8 << rest.len()) - 1;
        // SAFETY: the mask covers the `rest.len() < 8` values of `rest` only.
        unsafe {
            let v = _mm512_maskz_loadu_pd(mask, rest.as_ptr());
            _mm512_mask_storeu_pd(rest.as_mut_ptr(), mask, tanh_8(v));
        }
    }
}

/// `super::kernels::tile_sums` of 16 rows (four blocks) at `r0`: `out[q][r] = start[q] +
/// Σ_i w[i][q] · x[i][r]` (`i` in order) for one tile of [`TILE`] outputs,
/// two registers of eight rows per output (eight independent sums in flight),
/// and with `TANH` their `tanh` (its division then overlaps the next call's products).
#[target_feature(enable = "avx512f")]
pub(super) fn tile_sums_16<const TANH: bool>(
    start: [f64; TILE],
    w: &[f64],
    x: &[f64],
    st: usize,
    r0: usize,
    out: &mut [f64],
) {
    let mut acc = [[_mm512_setzero_pd(); 2]; TILE];
    for (aq, &s) in acc.iter_mut().zip(&start) {
        *aq = [_mm512_set1_pd(s); 2];
    }
    for (wi, xi) in w.chunks_exact(TILE).zip(x.chunks_exact(st)) {
        let xs: &[f64; 16] = xi[r0..r0 + 16].try_into().expect("16 rows");
        // SAFETY: `xs` is 16 values.
        let (x0, x1) = unsafe { (_mm512_loadu_pd(xs.as_ptr()), _mm512_loadu_pd(xs.as_ptr().add(8))) };
        // Index loops: iterator adapters are not always inlined into a
        // function compiled for other target features than theirs.
        for q in 0..TILE {
            let wv = _mm512_set1_pd(wi[q]);
            acc[q][0] = _mm512_fmadd_pd(wv, x0, acc[q][0]);
            acc[q][1] = _mm512_fmadd_pd(wv, x1, acc[q][1]);
        }
    }
    if TANH {
        for aq in &mut acc {
            *aq = [tanh_8(aq[0]), tanh_8(aq[1])];
        }
    }
    for (oq, aq) in out.chunks_exact_mut(st).zip(&acc) {
        let os: &mut [f64; 16] = (&mut oq[r0..r0 + 16]).try_into().expect("16 rows");
        // SAFETY: `os` is 16 values.
        unsafe {
            _mm512_storeu_pd(os.as_mut_ptr(), aq[0]);
            _mm512_storeu_pd(os.as_mut_ptr().add(8), aq[1]);
        }
    }
}

/// Rows of `out` whose sums one pass of [`outer_sums`] holds in registers.
const M: usize = 8;

/// The rows `0..used` of the `TILE`-row tiles of the value-major `src`, as
/// `super::kernels::rows_of_tiles` writes them but pairs of tiles `(2p, 2p + 1)` row
/// by row together: row `r` of pair `p` is the entries `2p · st + 2r` (tile
/// `2p`) and `2p · st + 2r + 1` (tile `2p + 1`), eight contiguous values for
/// [`outer_sums`]. A last odd tile is written as `super::kernels::rows_of_tiles` does.
#[target_feature(enable = "avx512f")]
pub(super) fn rows_of_pairs(src: &[f64], st: usize, used: usize, dst: &mut [[f64; TILE]]) {
    let tiles = dst.len() / st;
    for p in 0..tiles / 2 {
        let pair = &src[2 * p * TILE * st..(2 * p + 2) * TILE * st];
        let out = &mut dst[2 * p * st..2 * p * st + 2 * used];
        for (r, o) in out.chunks_exact_mut(2).enumerate() {
            for (k, v) in o.as_flattened_mut().iter_mut().enumerate() {
                *v = pair[k * st + r];
            }
        }
    }
    if tiles % 2 == 1 {
        let t = tiles - 1;
        super::kernels::rows_of_tiles(
            &src[t * TILE * st..(t + 1) * TILE * st],
            st,
            used,
            &mut dst[t * st..(t + 1) * st],
        );
    }
}

/// `super::kernels::outer_sums` for every tile at once: `out` holds the tiles one after
/// another (`n` rows of [`TILE`] values each), `b` their rows' values as
/// [`rows_of_pairs`] writes them (row stride `st`), `a` the `n` value-major
/// rows; `out[u][m][k] += a[m][r] · b[u][r][k]` for `r = 0..used` in turn.
/// Tiles are taken four at a time (one register per pair of tiles' `TILE`
/// values), then two; a last odd tile is left to the caller, whose count of
/// tiles done this returns.
#[target_feature(enable = "avx512f")]
pub(super) fn outer_sums(out: &mut [f64], a: &[f64], st: usize, b: &[[f64; TILE]], used: usize) -> usize {
    let tiles = b.len() / st;
    let n = out.len() / (tiles * TILE).max(1);
    assert!(out.len() == n * tiles * TILE && a.len() >= n * st && used <= st, "outer_sums: inconsistent sizes");
    let mut o = Outer { out, a, st, b, n, used };
    let mut u = 0;
    while u + 4 <= tiles {
        outer_rows::<2>(&mut o, u);
        u += 4;
    }
    if u + 2 <= tiles {
        outer_rows::<1>(&mut o, u);
        u += 2;
    }
    u
}

/// The arguments of [`outer_sums`], and `n`, the rows of `out` per tile.
struct Outer<'a> {
    out: &'a mut [f64],
    a: &'a [f64],
    st: usize,
    b: &'a [[f64; TILE]],
    n: usize,
    used: usize,
}

/// Tiles `u..u + 2P` of [`outer_sums`], [`M`] rows of `out` at a time, then
/// the rest in one pass.
#[inline]
#[target_feature(enable = "avx512f")]
fn outer_rows<const P: usize>(o: &mut Outer<'_>, u: usize) {
    let mut m0 = 0;
    while m0 + M <= o.n {
        outer_block::<P, M>(o, u, m0);
        m0 += M;
    }
    // Each arm calls its block directly: a `match` that picks one of these
    // `#[target_feature]` functions as a value and calls it afterwards needs
    // Rust 1.93 (the common type of the arms is an `unsafe fn` pointer
    // before), and the workspace's minimum is 1.89.
    match o.n - m0 {
        1 => outer_block::<P, 1>(o, u, m0),
        2 => outer_block::<P, 2>(o, u, m0),
        3 => outer_block::<P, 3>(o, u, m0),
        4 => outer_block::<P, 4>(o, u, m0),
        5 => outer_block::<P, 5>(o, u, m0),
        6 => outer_block::<P, 6>(o, u, m0),
        7 => outer_block::<P, 7>(o, u, m0),
        _ => {}
    }
}

/// Rows `m0..m0 + R` of tiles `u..u + 2P` of [`outer_sums`]: the `R · P`
/// sums, each a register of two tiles' `TILE` values, stay in registers over
/// all rows `r`.
#[inline]
#[target_feature(enable = "avx512f")]
fn outer_block<const P: usize, const R: usize>(o: &mut Outer<'_>, u: usize, m0: usize) {
    let Outer { ref mut out, a, st, b, n, used } = *o;
    let tile = n * TILE;
    // The rows of tiles `u + 2p` and `u + 2p + 1` ([`rows_of_pairs`]): two
    // entries per row.
    let mut bt: [&[[f64; TILE]]; P] = [&[]; P];
    for (p, bp) in bt.iter_mut().enumerate() {
        let t = u + 2 * p;
        *bp = &b[t * st..t * st + 2 * used];
    }
    let mut rows: [&[f64]; R] = [&[]; R];
    for (m, row) in rows.iter_mut().enumerate() {
        *row = &a[(m0 + m) * st..(m0 + m) * st + used];
    }
    let half = |v: &[f64]| -> __m256d {
        let v: &[f64; TILE] = v.try_into().expect("a tile row");
        // SAFETY: `v` is four values.
        unsafe { _mm256_loadu_pd(v.as_ptr()) }
    };
    let mut acc = [[_mm512_setzero_pd(); P]; R];
    for (m, am) in acc.iter_mut().enumerate() {
        for (p, amp) in am.iter_mut().enumerate() {
            let at = |h: usize| (u + 2 * p + h) * tile + (m0 + m) * TILE;
            let (lo, hi) = (half(&out[at(0)..at(0) + TILE]), half(&out[at(1)..at(1) + TILE]));
            *amp = _mm512_insertf64x4::<1>(_mm512_castpd256_pd512(lo), hi);
        }
    }
    // Index loops, as in `tile_sums_16`.
    for r in 0..used {
        let mut bv = [_mm512_setzero_pd(); P];
        for p in 0..P {
            let row: &[[f64; TILE]; 2] = bt[p][2 * r..2 * r + 2].try_into().expect("a row of two tiles");
            // SAFETY: `row` is eight values, contiguous.
            bv[p] = unsafe { _mm512_loadu_pd(row.as_ptr().cast::<f64>()) };
        }
        for m in 0..R {
            let av = _mm512_set1_pd(rows[m][r]);
            for p in 0..P {
                acc[m][p] = _mm512_fmadd_pd(av, bv[p], acc[m][p]);
            }
        }
    }
    for (m, am) in acc.iter().enumerate() {
        for (p, &amp) in am.iter().enumerate() {
            let mut lanes = [0.0; 2 * TILE];
            // SAFETY: `lanes` is eight values.
            unsafe { _mm512_storeu_pd(lanes.as_mut_ptr(), amp) };
            for h in 0..2 {
                let at = (u + 2 * p + h) * tile + (m0 + m) * TILE;
                out[at..at + TILE].copy_from_slice(&lanes[h * TILE..(h + 1) * TILE]);
            }
        }
    }
}
