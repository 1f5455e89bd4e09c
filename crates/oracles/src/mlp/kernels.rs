//! The portable building blocks of the passes: sums over tiles of weights
//! and blocks of rows, the backward pass's outer-product sums and `∂ℓ/∂t`,
//! and a vectorisable `tanh`. Generic over the arithmetic ([`Arith`]), so one
//! source gives the build with fused multiply-adds and the one without.

use fastmath::Arith;

#[cfg(doc)]
use super::dispatch::Kernels;
use super::{BLOCK, OUTER, TILE};

/// `a[at..at + L]` as an array (one vector of lanes).
#[inline(always)]
pub(super) fn lanes<const L: usize>(a: &[f64], at: usize) -> [f64; L] {
    *<&[f64; L]>::try_from(&a[at..at + L]).expect("a slice of L values")
}

/// `out[q][r] = start[q][r] + Σ_i w[i][q] · x[i][r]` (`i` in order) for one tile
/// of `TILE` outputs and the block of rows at `r0` — and, if `PAIR`, the next
/// block too: `w` holds the tile's weights input by input, `x` and `out` are
/// value-major with row stride `st`. (The two blocks' sums are two named
/// arrays: held in one array of blocks, they are not kept in registers.)
#[inline(always)]
pub(super) fn tile_sums<A: Arith, const PAIR: bool>(
    start: [[f64; BLOCK]; TILE],
    w: &[f64],
    x: &[f64],
    st: usize,
    r0: usize,
    out: &mut [f64],
) {
    let r1 = r0 + BLOCK;
    let (mut a0, mut a1) = (start, start);
    for (wi, xi) in w.chunks_exact(TILE).zip(x.chunks_exact(st)) {
        add_products::<A>(&mut a0, wi, &lanes(xi, r0));
        if PAIR {
            add_products::<A>(&mut a1, wi, &lanes(xi, r1));
        }
    }
    for (oq, (s0, s1)) in out.chunks_exact_mut(st).zip(a0.iter().zip(&a1)) {
        oq[r0..r1].copy_from_slice(s0);
        if PAIR {
            oq[r1..r1 + BLOCK].copy_from_slice(s1);
        }
    }
}

/// `[[v(q); BLOCK]; TILE]`: each of a tile's starting values in every row's lane.
#[inline(always)]
pub(super) fn splat(v: impl Fn(usize) -> f64) -> [[f64; BLOCK]; TILE] {
    let mut out = [[0.0; BLOCK]; TILE];
    for (q, oq) in out.iter_mut().enumerate() {
        *oq = [v(q); BLOCK];
    }
    out
}

/// `acc[q][r] += w[q] · x[r]`: one weight tile's products with a block of rows.
#[inline(always)]
pub(super) fn add_products<A: Arith>(acc: &mut [[f64; BLOCK]; TILE], w: &[f64], x: &[f64; BLOCK]) {
    for (aq, &wq) in acc.iter_mut().zip(w) {
        for r in 0..BLOCK {
            aq[r] = A::madd(wq, x[r], aq[r]);
        }
    }
}

/// Rows `0..used` of the `TILE`-row tiles of the value-major `src` written row
/// by row into `dst` (`[tile][row]`).
#[inline(always)]
pub(super) fn rows_of_tiles(src: &[f64], st: usize, used: usize, dst: &mut [[f64; TILE]]) {
    for (tile, out) in src.chunks_exact(TILE * st).zip(dst.chunks_exact_mut(st)) {
        for (r, o) in out[..used].iter_mut().enumerate() {
            for (k, ok) in o.iter_mut().enumerate() {
                *ok = tile[k * st + r];
            }
        }
    }
}

/// Outer-product sums of the backward pass: for every group `m` of `out`
/// (`TILE` values each) and the matching row `a[m]` of the value-major `a`,
/// `out[m][k] += a[m][r] · b[r][k]` for `r = 0, 1, …` in turn — the same
/// operations, in the same order, as adding the rows' products one row at a
/// time, but with the sums held in registers across the rows.
#[inline(always)]
pub(super) fn outer_sums<A: Arith>(out: &mut [f64], a: &[f64], st: usize, b: &[[f64; TILE]]) {
    let mut outs = out.chunks_exact_mut(OUTER * TILE);
    let mut rows = a.chunks_exact(OUTER * st);
    for (o, a) in (&mut outs).zip(&mut rows) {
        outer_sum::<A, OUTER>(o, a, st, b);
    }
    for (o, a) in outs.into_remainder().chunks_exact_mut(TILE).zip(rows.remainder().chunks_exact(st)) {
        outer_sum::<A, 1>(o, a, st, b);
    }
}

/// [`outer_sums`] of `M` groups.
#[inline(always)]
pub(super) fn outer_sum<A: Arith, const M: usize>(out: &mut [f64], a: &[f64], st: usize, b: &[[f64; TILE]]) {
    let n = b.len();
    // Loops, not `std::array::from_fn`: that is not always inlined, and a call
    // leaves the AVX2 build of the kernel.
    let mut rows: [&[f64]; M] = [&[]; M];
    let mut acc = [[0.0; TILE]; M];
    for (m, (row, am)) in rows.iter_mut().zip(&mut acc).enumerate() {
        *row = &a[m * st..m * st + n];
        *am = lanes(out, m * TILE);
    }
    let a = rows;
    for (r, br) in b.iter().enumerate() {
        for m in 0..M {
            let am = a[m][r];
            for k in 0..TILE {
                acc[m][k] = A::madd(am, br[k], acc[m][k]);
            }
        }
    }
    for (o, am) in out.chunks_exact_mut(TILE).zip(&acc) {
        o.copy_from_slice(am);
    }
}

/// `dz[h][r] = (Σ_y w[y][h] · g[y][r]) · (1 − t[h][r]²)` (`y` in order) for
/// two hidden units `h` and the `L` rows at `r0`: `g`, `t` and `dz` value-major
/// with row stride `st`.
#[inline(always)]
pub(super) fn dz_rows<A: Arith, const L: usize>(
    w: &[[f64; 2]],
    g: &[f64],
    st: usize,
    r0: usize,
    t: &[f64],
    dz: &mut [f64],
) {
    let (mut a0, mut a1) = ([0.0; L], [0.0; L]);
    for (y, &[w0, w1]) in w.iter().enumerate() {
        let gy = lanes::<L>(g, y * st + r0);
        for r in 0..L {
            a0[r] = A::madd(w0, gy[r], a0[r]);
            a1[r] = A::madd(w1, gy[r], a1[r]);
        }
    }
    for (h, acc) in [a0, a1].iter().enumerate() {
        let t = lanes::<L>(t, h * st + r0);
        let dz: &mut [f64; L] = (&mut dz[h * st + r0..h * st + r0 + L]).try_into().expect("L rows");
        for r in 0..L {
            dz[r] = acc[r] * (1.0 - t[r] * t[r]);
        }
    }
}

/// [`Kernels::outer_sums_tiles`] from tile `first` on, tile by tile.
#[inline(always)]
pub(super) fn outer_sums_from<A: Arith>(
    out: &mut [f64],
    a: &[f64],
    st: usize,
    b: &[[f64; TILE]],
    used: usize,
    first: usize,
) {
    let tiles = b.len() / st;
    // By index, not `chunks_exact`: a tile of `V` has no values without features.
    let size = out.len() / tiles.max(1);
    for u in first..tiles {
        outer_sums::<A>(&mut out[u * size..(u + 1) * size], a, st, &b[u * st..u * st + used]);
    }
}

/// `1.5·2⁵²`: adding it rounds to an integer held in the low mantissa bits.
pub(super) const ROUND: f64 = 6_755_399_441_055_744.0;
/// `ln 2` in two parts: `k · LN2_HI` is exact for the `k` of [`tanh`].
pub(super) const LN2_HI: f64 = 6.931_471_803_691_238e-1;
pub(super) const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
/// `tanh` of larger magnitudes rounds to ±1.
pub(super) const TANH_CLAMP: f64 = 20.0;
/// `1/n!` for `n = 13` down to 2: [`tanh`]'s Taylor series of `exp`.
pub(super) const INV_FACTORIAL: [f64; 12] = [
    1.0 / 6_227_020_800.0,
    1.0 / 479_001_600.0,
    1.0 / 39_916_800.0,
    1.0 / 3_628_800.0,
    1.0 / 362_880.0,
    1.0 / 40_320.0,
    1.0 / 5_040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
];

/// `tanh x` to an absolute error below `4·10⁻¹⁶`, branch-free so that a loop over
/// the hidden units vectorises; `libm`'s `tanh` dominated the fit's time on
/// low-dimensional inputs.
///
/// `tanh |x| = (1 − e)/(1 + e)` with `e = exp(−2|x|)`, `|x|` clamped to 20
/// (`tanh 20` rounds to 1). `exp(y) = 2^k exp(r)` with `k = round(y / ln 2)`
/// obtained by the `1.5·2⁵²` rounding trick (whose low mantissa bits then hold
/// `k`), `r = y − k ln 2` split in two parts for precision, and `exp(r)` by its
/// Taylor series to degree 13 (truncation error `< 10⁻¹⁷` for `|r| ≤ ln 2 / 2`).
#[inline(always)]
pub(super) fn tanh<A: Arith>(x: f64) -> f64 {
    let y = -2.0 * x.abs().min(TANH_CLAMP);
    let z = A::madd(y, std::f64::consts::LOG2_E, ROUND);
    let k = z - ROUND;
    let r = (y - k * LN2_HI) - k * LN2_LO;
    let mut p = INV_FACTORIAL[0];
    for &c in &INV_FACTORIAL[1..] {
        p = A::madd(p, r, c);
    }
    p = A::madd(p, r, 1.0);
    p = A::madd(p, r, 1.0);
    // k ∈ [−58, 0]: 2^k is a normal number; the low bits of z hold k in two's complement.
    let two_k = f64::from_bits(z.to_bits().wrapping_add(1023) << 52);
    let e = p * two_k;
    ((1.0 - e) / (1.0 + e)).copysign(x)
}
