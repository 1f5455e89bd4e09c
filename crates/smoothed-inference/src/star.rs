//! The star update (Eq. 10 / ch. Thm 1.3, weighted form derived in the crate
//! docs) on the cached reparameterised potentials `θ̃`, and the sweeps built
//! from it.
//!
//! Everything here is `#[inline(always)]` and generic over [`Arith`] so that
//! [`sweep`] and [`single`] are compiled twice: for any x86-64/other CPU, and
//! (on x86-64) inside a function with the `avx2,fma` target features, chosen at
//! run time. The marginals have four implementations with identical results
//! up to rounding: a general one through `graph.edge_map(e)`, one for singleton
//! children (fibres are strided runs, no index map), one for binary
//! singleton children with at most four 4-configuration parents (the binary
//! grid), which works on fixed eight-lane arrays, and a factored one for
//! singleton children of plain pairs (multi-label grids), which takes `|Y|`
//! exponentials per parent instead of `|Y|²` ([`factored_star`]). On x86-64
//! the binary and 8-label kernels are also written with AVX2 + FMA and
//! AVX-512 intrinsics ([`avx2`], [`avx512`], bit for bit the portable kernels
//! with fused multiply-adds), and those sweeps update independent binary stars
//! two at a time ([`crate::schedule`]).

use crate::problem::{ChildPlan, EdgePlan, InferenceProblem, StarKind};
use fastmath::{Arith, Plain, exp_nonpos, ln_pos};

#[cfg(target_arch = "x86_64")]
use crate::schedule::{Schedule, Step};

/// The binary star's entry points of an intrinsics module ([`avx2`],
/// [`avx512`]) from its `prepare` (load a star's parents and compute its
/// marginals, writing nothing), `finite` and `finish` (combine and write).
#[cfg(target_arch = "x86_64")]
macro_rules! binary_entry_points {
    () => {
        /// [`super::binary_star`] (at most four binary pair parents of a
        /// binary child); with a `−∞` anywhere it hands the star to the
        /// portable kernel, whose general combine handles impossible values.
        #[inline(always)]
        pub(super) unsafe fn binary_star<A: Kernel>(
            cp: ChildPlan,
            edges: &[EdgePlan],
            lambda: &mut [f64],
            tt: &mut [f64],
            bufs: &mut Bufs<'_>,
        ) {
            let s = prepare(cp, edges, tt);
            if finite(&s) {
                finish(cp, edges, s, lambda, tt);
            } else {
                super::binary_star::<A>(cp, edges, lambda, tt, bufs);
            }
        }

        /// Two binary stars that share no region, updated together: their
        /// results are those of [`binary_star`] on each, in either order
        /// (neither reads what the other writes), and their two long
        /// dependency chains (exponentials, logarithms, combine) overlap in
        /// the core instead of following each other.
        #[inline(always)]
        pub(super) unsafe fn binary_pair<A: Kernel>(
            a: (ChildPlan, &[EdgePlan]),
            b: (ChildPlan, &[EdgePlan]),
            lambda: &mut [f64],
            tt: &mut [f64],
            bufs: &mut Bufs<'_>,
        ) {
            let sa = prepare(a.0, a.1, tt);
            let sb = prepare(b.0, b.1, tt);
            if finite(&sa) && finite(&sb) {
                finish(a.0, a.1, sa, lambda, tt);
                finish(b.0, b.1, sb, lambda, tt);
            } else {
                binary_star::<A>(a.0, a.1, lambda, tt, bufs);
                binary_star::<A>(b.0, b.1, lambda, tt, bufs);
            }
        }

        /// Four binary stars that share no region, updated together like
        /// [`binary_pair`]: four chains in flight instead of two.
        #[inline(always)]
        pub(super) unsafe fn binary_quad<A: Kernel>(
            stars: [(ChildPlan, &[EdgePlan]); 4],
            lambda: &mut [f64],
            tt: &mut [f64],
            bufs: &mut Bufs<'_>,
        ) {
            // Written out, not through closures, so that all is inlined into
            // the function compiled for the kernels' target features.
            let [a, b, c, d] = stars;
            let sa = prepare(a.0, a.1, tt);
            let sb = prepare(b.0, b.1, tt);
            let sc = prepare(c.0, c.1, tt);
            let sd = prepare(d.0, d.1, tt);
            if finite(&sa) && finite(&sb) && finite(&sc) && finite(&sd) {
                finish(a.0, a.1, sa, lambda, tt);
                finish(b.0, b.1, sb, lambda, tt);
                finish(c.0, c.1, sc, lambda, tt);
                finish(d.0, d.1, sd, lambda, tt);
            } else {
                for (cp, edges) in stars {
                    binary_star::<A>(cp, edges, lambda, tt, bufs);
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
pub(crate) use avx512::{check_binary_pairs, report_binary_pairs};

/// The arithmetic of a sweep ([`Arith`]) and which intrinsics kernels the
/// function it runs in is compiled for (the binary and 8-label stars have
/// AVX2 + FMA and AVX-512 ones).
pub(crate) trait Kernel: Arith {
    /// `true` for [`Intrinsics`] (both builds).
    const AVX2_FMA: bool;
    /// `true` only for [`Avx512`].
    const AVX512: bool = false;
}

impl Kernel for Plain {
    const AVX2_FMA: bool = false;
}

/// The portable kernels with fused multiply-adds, unpaired: what the
/// intrinsics sweeps must equal bit for bit (tests).
impl Kernel for fastmath::Fused {
    const AVX2_FMA: bool = false;
}

/// Fused multiply-adds (as [`fastmath::Fused`]) in functions compiled with
/// AVX2 and FMA, and with AVX-512 F too when `AVX512`: only instantiated there
/// (`problem/dispatch.rs`'s `simd` and `simd512` modules), which is what makes the
/// intrinsics of [`avx2`] and [`avx512`] safe to call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Intrinsics<const AVX512: bool>;

/// The AVX2 + FMA build's kernel.
pub(crate) type Avx2Fma = Intrinsics<false>;
/// The AVX-512 build's kernel.
pub(crate) type Avx512 = Intrinsics<true>;

impl<const AVX512: bool> Arith for Intrinsics<AVX512> {
    #[inline(always)]
    fn madd(a: f64, b: f64, c: f64) -> f64 {
        a.mul_add(b, c)
    }
}

impl<const W: bool> Kernel for Intrinsics<W> {
    const AVX2_FMA: bool = true;
    const AVX512: bool = W;
}

const NEG_INF: f64 = f64::NEG_INFINITY;

/// Floor of a log-belief below the largest one of the same child, in
/// log-belief units (`e^-700 ≈ 1e-304`, still a normal `f64`): the clamp that
/// keeps messages finite when a child value is impossible (see crate docs).
pub(crate) const CLAMP: f64 = 700.0;

/// A fibre sum below this (all of its terms far below the parent's maximum)
/// is recomputed against the fibre's own maximum, so no term that matters was
/// flushed to zero by [`exp_nonpos`].
const TINY_SUM: f64 = 1e-280;

/// Scratch slices of a [`crate::Workspace`], each at least as long as the
/// largest star of the problem needs.
pub(crate) struct Bufs<'a> {
    /// Parent marginals `L_η(y_ν)`, parent-major (`j·|Y_ν| + y`).
    pub l: &'a mut [f64],
    /// Message changes `δ_η(y_ν)`, same layout.
    pub d: &'a mut [f64],
    /// `log m(y_ν)`.
    pub logm: &'a mut [f64],
    /// Fibre sums / maxima, one per child configuration.
    pub sums: &'a mut [f64],
    /// Exponentials of one parent's configurations.
    pub e: &'a mut [f64],
}

/// Star updates at every region of `order`, then at every region of `order`
/// reversed (one message-passing iteration, ch. §1.10), `iterations` times.
#[inline(always)]
pub(crate) fn sweep<A: Kernel>(
    p: &InferenceProblem<'_>,
    lambda: &mut [f64],
    tt: &mut [f64],
    bufs: &mut Bufs<'_>,
    order: &[usize],
    iterations: usize,
) {
    let blocks = p.factored_blocks();
    #[cfg(target_arch = "x86_64")]
    if A::AVX2_FMA && p.pairs_binary_stars() {
        let own;
        let schedule = match p.schedule_for(order) {
            Some(s) => s,
            None => {
                own = Schedule::build(p, order);
                &own
            }
        };
        for _ in 0..iterations {
            for half in [&schedule.forward, &schedule.backward] {
                for &step in half {
                    match step {
                        Step::One(r) => star::<A>(p, blocks, r, lambda, tt, bufs),
                        Step::Two(a, b) => {
                            let (ca, cb) = (p.plan.children[a], p.plan.children[b]);
                            let (ea, eb) = (&p.plan.edges[ca.first..ca.end], &p.plan.edges[cb.first..cb.end]);
                            // SAFETY: `Avx512` (AVX512) and `Avx2Fma` (AVX2_FMA) are only
                            // instantiated in functions compiled for those features.
                            unsafe {
                                if A::AVX512 {
                                    avx512::binary_pair::<A>((ca, ea), (cb, eb), lambda, tt, bufs)
                                } else {
                                    avx2::binary_pair::<A>((ca, ea), (cb, eb), lambda, tt, bufs)
                                }
                            };
                        }
                        Step::Four(a, b, c, d) => {
                            let group = [a, b, c, d].map(|r| {
                                let cp = p.plan.children[r];
                                (cp, &p.plan.edges[cp.first..cp.end])
                            });
                            // SAFETY: as for `Step::Two`.
                            unsafe {
                                if A::AVX512 {
                                    avx512::binary_quad::<A>(group, lambda, tt, bufs)
                                } else {
                                    avx2::binary_quad::<A>(group, lambda, tt, bufs)
                                }
                            };
                        }
                    }
                }
            }
        }
        return;
    }
    for _ in 0..iterations {
        for &r in order {
            star::<A>(p, blocks, r, lambda, tt, bufs);
        }
        for &r in order.iter().rev() {
            star::<A>(p, blocks, r, lambda, tt, bufs);
        }
    }
}

/// One star update at `child`.
#[inline(always)]
pub(crate) fn single<A: Kernel>(
    p: &InferenceProblem<'_>,
    lambda: &mut [f64],
    tt: &mut [f64],
    bufs: &mut Bufs<'_>,
    child: usize,
) {
    star::<A>(p, p.factored_blocks(), child, lambda, tt, bufs);
}

#[inline(always)]
fn star<A: Kernel>(
    p: &InferenceProblem<'_>,
    blocks: &[f64],
    child: usize,
    lambda: &mut [f64],
    tt: &mut [f64],
    bufs: &mut Bufs<'_>,
) {
    let cp = p.plan.children[child];
    let edges = &p.plan.edges[cp.first..cp.end];
    match cp.kind {
        StarKind::NoParents => {}
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Avx512` is only instantiated in functions compiled with AVX-512 F, AVX2 and FMA.
        StarKind::Binary if p.fast_paths && A::AVX512 => unsafe {
            avx512::binary_star::<A>(cp, edges, lambda, tt, bufs)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Avx2Fma` is only instantiated in functions compiled with AVX2 and FMA.
        StarKind::Binary if p.fast_paths && A::AVX2_FMA => unsafe {
            avx2::binary_star::<A>(cp, edges, lambda, tt, bufs)
        },
        StarKind::Binary if p.fast_paths => binary_star::<A>(cp, edges, lambda, tt, bufs),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Avx512` is only instantiated in functions compiled with AVX-512 F, AVX2 and FMA.
        StarKind::Factored8 if p.fast_paths && A::AVX512 => unsafe {
            avx512::factored8_star::<A>(p.theta, blocks, cp, edges, lambda, tt, bufs)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Avx2Fma` is only instantiated in functions compiled with AVX2 and FMA.
        StarKind::Factored8 if p.fast_paths && A::AVX2_FMA => unsafe {
            avx2::factored8_star::<A>(p.theta, blocks, cp, edges, lambda, tt, bufs)
        },
        StarKind::Factored8 if p.fast_paths => factored8_star::<A>(p.theta, blocks, cp, edges, lambda, tt, bufs),
        StarKind::Factored if p.fast_paths => factored_star::<A>(p.theta, blocks, cp, edges, lambda, tt, bufs),
        StarKind::Singleton if p.fast_paths => singleton_star::<A>(cp, edges, lambda, tt, bufs),
        _ => general_star::<A>(p, cp, edges, lambda, tt, bufs),
    }
}

#[inline(always)]
fn general_star<A: Arith>(
    p: &InferenceProblem<'_>,
    cp: ChildPlan,
    edges: &[EdgePlan],
    lambda: &mut [f64],
    tt: &mut [f64],
    bufs: &mut Bufs<'_>,
) {
    let ly = cp.len;
    let n = edges.len();
    let l = &mut bufs.l[..n * ly];
    for (ep, lj) in edges.iter().zip(l.chunks_exact_mut(ly)) {
        let t = &tt[ep.parent_offset..ep.parent_offset + ep.parent_len];
        let map = p.graph.edge_map(ep.edge);
        marginal_general::<A>(t, map, ep.eps, ep.inv_eps, lj, &mut bufs.sums[..ly], &mut bufs.e[..ep.parent_len]);
    }
    let d = &mut bufs.d[..n * ly];
    let child_tt = &mut tt[cp.offset..cp.offset + ly];
    if !combine::<A>(child_tt, cp, edges, l, d, &mut bufs.logm[..ly]) {
        return;
    }
    for (ep, dj) in edges.iter().zip(d.chunks_exact(ly)) {
        apply_general(&mut tt[ep.parent_offset..ep.parent_offset + ep.parent_len], p.graph.edge_map(ep.edge), dj);
        add_assign(&mut lambda[ep.message_offset..ep.message_offset + ly], dj);
    }
}

#[inline(always)]
fn singleton_star<A: Arith>(
    cp: ChildPlan,
    edges: &[EdgePlan],
    lambda: &mut [f64],
    tt: &mut [f64],
    bufs: &mut Bufs<'_>,
) {
    let ly = cp.len;
    let n = edges.len();
    let l = &mut bufs.l[..n * ly];
    for (ep, lj) in edges.iter().zip(l.chunks_exact_mut(ly)) {
        let t = &tt[ep.parent_offset..ep.parent_offset + ep.parent_len];
        marginal_strided::<A>(t, ep.stride, ep.eps, ep.inv_eps, lj, &mut bufs.sums[..ly], &mut bufs.e[..ep.parent_len]);
    }
    let d = &mut bufs.d[..n * ly];
    let child_tt = &mut tt[cp.offset..cp.offset + ly];
    if !combine::<A>(child_tt, cp, edges, l, d, &mut bufs.logm[..ly]) {
        return;
    }
    for (ep, dj) in edges.iter().zip(d.chunks_exact(ly)) {
        apply_strided(&mut tt[ep.parent_offset..ep.parent_offset + ep.parent_len], ep.stride, dj);
        add_assign(&mut lambda[ep.message_offset..ep.message_offset + ly], dj);
    }
}

/// Singleton child whose parents are factored pairs (see
/// [`crate::problem::StarKind::Factored`]). With `σ` the parent's other child,
/// `θ̃_α(y_ν, y_σ) = θ_α(y_ν, y_σ) + λ_{αν}(y_ν) + λ_{ασ}(y_σ)`, so the marginal
///
/// `L(y_ν) = λ_{αν}(y_ν) + M(y_ν) + μ + ε log Σ_{y_σ} E(y_σ, y_ν) w(y_σ)`,
/// `w(y_σ) = exp((λ_{ασ}(y_σ) − μ)/ε)`, `μ = max λ_{ασ}`,
///
/// with `M` and `E` precomputed from `θ` ([`crate::problem::Factored`]): `|Y_σ|`
/// exponentials and a small matrix–vector product per parent instead of
/// `|Y_α|` exponentials. A sum below `TINY_SUM` (its terms flushed or nearly
/// so) is recomputed in the log domain from `θ`. Only the messages and the
/// child's `θ̃` change; the parents' `θ̃` is left stale (every reader refreshes
/// it first).
#[inline(always)]
fn factored_star<A: Arith>(
    theta: &[f64],
    blocks: &[f64],
    cp: ChildPlan,
    edges: &[EdgePlan],
    lambda: &mut [f64],
    tt: &mut [f64],
    bufs: &mut Bufs<'_>,
) {
    let ly = cp.len;
    let n = edges.len();
    let l = &mut bufs.l[..n * ly];
    let sums = &mut bufs.sums[..ly];
    for (ep, lj) in edges.iter().zip(l.chunks_exact_mut(ly)) {
        let lo = ep.sibling_len;
        let own = &lambda[ep.message_offset..ep.message_offset + ly];
        let sib = &lambda[ep.sibling_offset..ep.sibling_offset + lo];
        let mu = max_of(sib);
        let w = &mut bufs.e[..lo];
        for (wv, &v) in w.iter_mut().zip(sib) {
            *wv = exp_nonpos::<A>((v - mu) * ep.inv_eps);
        }
        let (row_max, e) = blocks[ep.block..ep.block + ly * (lo + 1)].split_at(ly);
        sums.fill(0.0);
        for (&wv, col) in w.iter().zip(e.chunks_exact(ly)) {
            for (s, &ev) in sums.iter_mut().zip(col) {
                *s = A::madd(wv, ev, *s);
            }
        }
        let mut tiny = false;
        for (((lv, &s), &m), &o) in lj.iter_mut().zip(sums.iter()).zip(row_max).zip(own) {
            *lv = A::madd(ep.eps, ln_pos::<A>(s), (o + m) + mu);
            tiny |= s < TINY_SUM;
        }
        if tiny {
            for (y, (lv, &s)) in lj.iter_mut().zip(sums.iter()).enumerate() {
                if s < TINY_SUM {
                    *lv = own[y] + pair_fibre_exact::<A>(theta, ep, y, sib);
                }
            }
        }
    }
    let d = &mut bufs.d[..n * ly];
    let child_tt = &mut tt[cp.offset..cp.offset + ly];
    if !combine::<A>(child_tt, cp, edges, l, d, &mut bufs.logm[..ly]) {
        return;
    }
    for (ep, dj) in edges.iter().zip(d.chunks_exact(ly)) {
        add_assign(&mut lambda[ep.message_offset..ep.message_offset + ly], dj);
    }
}

/// [`factored_star`] for the 8-label grid: eight-valued child and siblings, at
/// most four parents, everything on fixed eight-lane arrays (straight-line SIMD
/// code, no loop set-up per parent). The sums over parents run in the same
/// order as [`combine`]'s, so only the marginals' rounding differs from the
/// general path. With a `−∞` anywhere the general [`combine`] takes over.
#[inline(always)]
fn factored8_star<A: Arith>(
    theta: &[f64],
    blocks: &[f64],
    cp: ChildPlan,
    edges: &[EdgePlan],
    lambda: &mut [f64],
    tt: &mut [f64],
    bufs: &mut Bufs<'_>,
) {
    const N: usize = 8;
    let n = edges.len();
    let mut l = [[0.0; N]; 4];
    let mut finite = true;
    for (ep, lj) in edges.iter().zip(l.iter_mut()) {
        let own: &[f64; N] = lambda[ep.message_offset..ep.message_offset + N].try_into().expect("8 labels");
        let sib: &[f64; N] = lambda[ep.sibling_offset..ep.sibling_offset + N].try_into().expect("8 labels");
        let mu = max_of(sib);
        let mut w = [0.0; N];
        for (wv, &v) in w.iter_mut().zip(sib) {
            *wv = exp_nonpos::<A>((v - mu) * ep.inv_eps);
        }
        let blk: &[f64; N * (N + 1)] = blocks[ep.block..ep.block + N * (N + 1)].try_into().expect("8 labels");
        let (row_max, e) = blk.split_at(N);
        let (mut a0, mut a1, mut a2, mut a3) = ([0.0; N], [0.0; N], [0.0; N], [0.0; N]);
        for q in 0..2 {
            let eq = &e[32 * q..32 * q + 32];
            for y in 0..N {
                a0[y] = A::madd(w[4 * q], eq[y], a0[y]);
                a1[y] = A::madd(w[4 * q + 1], eq[N + y], a1[y]);
                a2[y] = A::madd(w[4 * q + 2], eq[2 * N + y], a2[y]);
                a3[y] = A::madd(w[4 * q + 3], eq[3 * N + y], a3[y]);
            }
        }
        let mut tiny = false;
        for y in 0..N {
            let s = (a0[y] + a1[y]) + (a2[y] + a3[y]);
            lj[y] = A::madd(ep.eps, ln_pos::<A>(s), (own[y] + row_max[y]) + mu);
            tiny |= s < TINY_SUM;
        }
        if tiny {
            for (y, lv) in lj.iter_mut().enumerate() {
                let s = (a0[y] + a1[y]) + (a2[y] + a3[y]);
                if s < TINY_SUM {
                    *lv = own[y] + pair_fibre_exact::<A>(theta, ep, y, sib);
                    finite &= *lv > NEG_INF;
                }
            }
        }
    }
    let child: &mut [f64; N] = (&mut tt[cp.offset..cp.offset + N]).try_into().expect("8 labels");
    for &c in child.iter() {
        finite &= c > NEG_INF;
    }
    let mut d = [[0.0; N]; 4];
    if finite {
        let mut logm = [0.0; N];
        let mut max = NEG_INF;
        for y in 0..N {
            let mut s = child[y];
            for lj in &l[..n] {
                s += lj[y];
            }
            logm[y] = s * cp.inv_total_eps;
            max = if logm[y] > max { logm[y] } else { max };
        }
        let floor = max - CLAMP;
        for v in &mut logm {
            *v = if *v < floor { floor } else { *v };
        }
        let mut sum = [0.0; N];
        for ((ep, lj), dj) in edges.iter().zip(&l).zip(d.iter_mut()) {
            for y in 0..N {
                dj[y] = A::madd(ep.eps, logm[y], -lj[y]);
                sum[y] += dj[y];
            }
        }
        for y in 0..N {
            child[y] -= sum[y];
        }
    } else {
        let lb = &mut bufs.l[..n * N];
        for (chunk, lj) in lb.chunks_exact_mut(N).zip(&l) {
            chunk.copy_from_slice(lj);
        }
        let db = &mut bufs.d[..n * N];
        if !combine::<A>(child, cp, edges, lb, db, &mut bufs.logm[..N]) {
            return;
        }
        for (chunk, dj) in db.chunks_exact(N).zip(d.iter_mut()) {
            dj.copy_from_slice(chunk);
        }
    }
    for (ep, dj) in edges.iter().zip(&d) {
        add_assign(&mut lambda[ep.message_offset..ep.message_offset + N], dj);
    }
}

/// `ε log Σ_{y_σ} exp((θ_α(y, y_σ) + λ_{ασ}(y_σ))/ε)` against its own maximum
/// (the rare path of [`factored_star`]; `−∞` when every term is).
#[inline(never)]
fn pair_fibre_exact<A: Arith>(theta: &[f64], ep: &EdgePlan, y: usize, sib: &[f64]) -> f64 {
    let t = |b: usize| theta[ep.parent_offset + y * ep.stride + b * ep.sibling_stride] + sib[b];
    let m = (0..sib.len()).map(t).fold(NEG_INF, |m, v| if v > m { v } else { m });
    if m == NEG_INF {
        return NEG_INF;
    }
    let s: f64 = (0..sib.len()).map(|b| exp_nonpos::<A>((t(b) - m) * ep.inv_eps)).sum();
    A::madd(ep.eps, ln_pos::<A>(s), m)
}

/// Binary singleton child, at most four parents of four configurations each;
/// lane `2j + y` holds parent `j`, child value `y`. Unused lanes are padded so
/// that they contribute exact zeros. The marginals are computed exactly as in
/// [`marginal_general`]; the sums over parents are tree-shaped (shorter
/// dependency chains between consecutive stars, which share a pair), so the
/// result equals [`general_star`]'s up to rounding. With a `−∞` anywhere the
/// marginals are handed to the general [`combine`].
#[inline(always)]
fn binary_star<A: Arith>(cp: ChildPlan, edges: &[EdgePlan], lambda: &mut [f64], tt: &mut [f64], bufs: &mut Bufs<'_>) {
    let n = edges.len();
    let mut a = [0.0; 8];
    let mut b = [0.0; 8];
    let mut eps = [0.0; 8];
    let mut inv = [1.0; 8];
    for (j, ep) in edges.iter().enumerate().take(4) {
        let t = &tt[ep.parent_offset..ep.parent_offset + 4];
        // Fibre of y: {y·s, y·s + o} with s the child's stride (1 or 2) and o = 3 − s.
        let (s, o) = if ep.stride == 2 { (2, 1) } else { (1, 2) };
        a[2 * j] = t[0];
        b[2 * j] = t[o];
        a[2 * j + 1] = t[s];
        b[2 * j + 1] = t[s + o];
        eps[2 * j] = ep.eps;
        eps[2 * j + 1] = ep.eps;
        inv[2 * j] = ep.inv_eps;
        inv[2 * j + 1] = ep.inv_eps;
    }
    let mut l = [0.0; 8];
    for q in 0..8 {
        let (hi, lo) = if b[q] > a[q] { (b[q], a[q]) } else { (a[q], b[q]) };
        let e = exp_nonpos::<A>((lo - hi) * inv[q]);
        let v = A::madd(eps[q], ln_pos::<A>(1.0 + e), hi);
        l[q] = if hi == NEG_INF { NEG_INF } else { v };
    }
    let c0 = tt[cp.offset];
    let c1 = tt[cp.offset + 1];
    let mut finite = (c0 > NEG_INF) & (c1 > NEG_INF);
    for &v in &l {
        finite &= v > NEG_INF;
    }
    let mut d = [0.0; 8];
    if finite {
        let inv_e = cp.inv_total_eps;
        // Tree-shaped sums: shorter dependency chains than the general path's
        // sequential ones (same values up to rounding).
        let s0 = (c0 + l[0]) + ((l[2] + l[4]) + l[6]);
        let s1 = (c1 + l[1]) + ((l[3] + l[5]) + l[7]);
        let (m0, m1) = (s0 * inv_e, s1 * inv_e);
        let floor = m0.max(m1) - CLAMP;
        let logm = [if m0 < floor { floor } else { m0 }, if m1 < floor { floor } else { m1 }];
        for q in 0..8 {
            d[q] = A::madd(eps[q], logm[q & 1], -l[q]);
        }
        let d0 = (d[0] + d[2]) + (d[4] + d[6]);
        let d1 = (d[1] + d[3]) + (d[5] + d[7]);
        tt[cp.offset] = c0 - d0;
        tt[cp.offset + 1] = c1 - d1;
    } else {
        let lb = &mut bufs.l[..2 * n];
        lb.copy_from_slice(&l[..2 * n]);
        let db = &mut bufs.d[..2 * n];
        if !combine::<A>(&mut tt[cp.offset..cp.offset + 2], cp, edges, lb, db, &mut bufs.logm[..2]) {
            return;
        }
        d[..2 * n].copy_from_slice(db);
    }
    for (j, ep) in edges.iter().enumerate().take(4) {
        let (s, o) = if ep.stride == 2 { (2, 1) } else { (1, 2) };
        let t = &mut tt[ep.parent_offset..ep.parent_offset + 4];
        t[0] += d[2 * j];
        t[o] += d[2 * j];
        t[s] += d[2 * j + 1];
        t[s + o] += d[2 * j + 1];
        let m = &mut lambda[ep.message_offset..ep.message_offset + 2];
        m[0] += d[2 * j];
        m[1] += d[2 * j + 1];
    }
}

/// Steps 2–4 of the star update (crate docs): from the parent marginals `l`
/// (parent-major) and the child's `θ̃_ν` compute `log m`, the message changes
/// `d`, and the child's new `θ̃_ν` (written in place). Returns `false`, and
/// changes nothing, when every child value is impossible for some member of
/// the star (then no finite update exists).
#[inline(always)]
fn combine<A: Arith>(
    child: &mut [f64],
    cp: ChildPlan,
    edges: &[EdgePlan],
    l: &[f64],
    d: &mut [f64],
    logm: &mut [f64],
) -> bool {
    let ly = child.len();
    let (eps_c, inv_e) = (cp.eps, cp.inv_total_eps);
    let mut max = NEG_INF;
    for (y, lm) in logm.iter_mut().enumerate() {
        let mut s = child[y];
        for lj in l.chunks_exact(ly) {
            s += lj[y];
        }
        let v = s * inv_e;
        *lm = v;
        if v > max {
            max = v;
        }
    }
    if max == NEG_INF {
        return false;
    }
    let floor = max - CLAMP;
    for lm in logm.iter_mut() {
        if *lm < floor {
            *lm = floor;
        }
    }
    let mut blocked = false;
    for ((ep, lj), dj) in edges.iter().zip(l.chunks_exact(ly)).zip(d.chunks_exact_mut(ly)) {
        for ((dv, &lv), &lm) in dj.iter_mut().zip(lj).zip(logm.iter()) {
            *dv = if lv == NEG_INF {
                blocked = true;
                0.0
            } else {
                A::madd(ep.eps, lm, -lv)
            };
        }
    }
    for y in 0..ly {
        let c = child[y];
        if c == NEG_INF {
            continue;
        }
        let mut sum = 0.0;
        for dj in d.chunks_exact(ly) {
            sum += dj[y];
        }
        let absorber = if blocked { l.chunks_exact(ly).position(|lj| lj[y] == NEG_INF) } else { None };
        match absorber {
            // A parent that cannot put mass on y absorbs what takes the child to the floor.
            Some(j) => {
                let target = eps_c * logm[y];
                d[j * ly + y] = c - target - sum;
                child[y] = target;
            }
            None => child[y] = c - sum,
        }
    }
    true
}

/// `L(y) = ε log Σ_{p: map[p]=y} exp(t[p]/ε)`, each fibre against its own maximum.
#[inline(always)]
fn marginal_general<A: Arith>(
    t: &[f64],
    map: &[u32],
    eps: f64,
    inv_eps: f64,
    l: &mut [f64],
    sums: &mut [f64],
    e: &mut [f64],
) {
    l.fill(NEG_INF);
    for (&tp, &y) in t.iter().zip(map) {
        let m = &mut l[y as usize];
        if tp > *m {
            *m = tp;
        }
    }
    for ((ev, &tp), &y) in e.iter_mut().zip(t).zip(map) {
        *ev = if tp == NEG_INF { NEG_INF } else { (tp - l[y as usize]) * inv_eps };
    }
    for ev in e.iter_mut() {
        *ev = exp_nonpos::<A>(*ev);
    }
    sums.fill(0.0);
    for (&ev, &y) in e.iter().zip(map) {
        sums[y as usize] += ev;
    }
    for (lv, &s) in l.iter_mut().zip(sums.iter()) {
        if *lv != NEG_INF {
            *lv = A::madd(eps, ln_pos::<A>(s), *lv);
        }
    }
}

/// The marginal onto a singleton child whose variable has stride `stride` in
/// the parent: fibre `y` is `{h·stride·|Y| + y·stride + r : h, r < stride}`.
/// Exponentials are taken against the parent's maximum in one vectorisable
/// pass; a fibre whose sum is tiny is redone against its own maximum.
#[inline(always)]
fn marginal_strided<A: Arith>(
    t: &[f64],
    stride: usize,
    eps: f64,
    inv_eps: f64,
    l: &mut [f64],
    sums: &mut [f64],
    e: &mut [f64],
) {
    let ly = l.len();
    let m = max_of(t);
    if m == NEG_INF {
        l.fill(NEG_INF);
        return;
    }
    for (ev, &tp) in e.iter_mut().zip(t) {
        *ev = exp_nonpos::<A>((tp - m) * inv_eps);
    }
    sum_strided(e, stride, sums);
    for (y, (lv, &s)) in l.iter_mut().zip(sums.iter()).enumerate() {
        *lv = if s >= TINY_SUM {
            A::madd(eps, ln_pos::<A>(s), m)
        } else {
            fibre_exact::<A>(t, stride, ly, y, eps, inv_eps)
        };
    }
}

/// `sums(y) = Σ` of `e` over the fibre of `y` (see [`marginal_strided`]),
/// `sums.len() = |Y|`: the marginal onto a singleton child of stride `stride`.
/// Runs of a fibre are summed four lanes wide.
#[inline(always)]
pub(crate) fn sum_strided(e: &[f64], stride: usize, sums: &mut [f64]) {
    sum_strided_by(e, stride, sums, |s, run| s + sum_of(run));
}

/// [`sum_strided`] with each fibre added in configuration order, so the sums
/// are bit for bit those of an index-map marginalisation.
#[inline(always)]
pub(crate) fn sum_strided_in_order(e: &[f64], stride: usize, sums: &mut [f64]) {
    sum_strided_by(e, stride, sums, |s, run| run.iter().fold(s, |a, &v| a + v));
}

/// The loop of [`sum_strided`]: `add_run(s, run)` adds one run of `stride`
/// consecutive configurations of a fibre to its sum `s`.
#[inline(always)]
fn sum_strided_by(e: &[f64], stride: usize, sums: &mut [f64], add_run: impl Fn(f64, &[f64]) -> f64) {
    let ly = sums.len();
    sums.fill(0.0);
    if stride == 1 {
        for block in e.chunks_exact(ly) {
            for (s, &v) in sums.iter_mut().zip(block) {
                *s += v;
            }
        }
    } else {
        for block in e.chunks_exact(stride * ly) {
            for (s, run) in sums.iter_mut().zip(block.chunks_exact(stride)) {
                *s = add_run(*s, run);
            }
        }
    }
}

/// One fibre of [`marginal_strided`] against its own maximum (rare path).
#[inline(never)]
fn fibre_exact<A: Arith>(t: &[f64], stride: usize, ly: usize, y: usize, eps: f64, inv_eps: f64) -> f64 {
    let fibre = || t.chunks_exact(stride * ly).flat_map(move |b| &b[y * stride..(y + 1) * stride]);
    let m = fibre().fold(NEG_INF, |m, &v| if v > m { v } else { m });
    if m == NEG_INF {
        return NEG_INF;
    }
    let s: f64 = fibre().map(|&v| exp_nonpos::<A>((v - m) * inv_eps)).sum();
    A::madd(eps, ln_pos::<A>(s), m)
}

/// `t[p] += d[map[p]]`: broadcast a message change over the parent's configurations.
#[inline(always)]
fn apply_general(t: &mut [f64], map: &[u32], d: &[f64]) {
    for (tp, &y) in t.iter_mut().zip(map) {
        *tp += d[y as usize];
    }
}

/// [`apply_general`] for a singleton child of stride `stride` (see [`marginal_strided`]).
#[inline(always)]
pub(crate) fn apply_strided(t: &mut [f64], stride: usize, d: &[f64]) {
    let ly = d.len();
    if stride == 1 {
        for block in t.chunks_exact_mut(ly) {
            add_assign(block, d);
        }
    } else {
        for block in t.chunks_exact_mut(stride * ly) {
            for (run, &dv) in block.chunks_exact_mut(stride).zip(d) {
                for v in run {
                    *v += dv;
                }
            }
        }
    }
}

#[inline(always)]
fn add_assign(a: &mut [f64], b: &[f64]) {
    for (x, &y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// Maximum with four independent lanes (vectorisable; `f64::max` folds are not).
#[inline(always)]
pub(crate) fn max_of(t: &[f64]) -> f64 {
    let mut lanes = [NEG_INF; 4];
    let chunks = t.chunks_exact(4);
    let rest = chunks.remainder();
    for c in chunks {
        for (m, &v) in lanes.iter_mut().zip(c) {
            *m = if v > *m { v } else { *m };
        }
    }
    lanes.iter().chain(rest).fold(NEG_INF, |m, &v| if v > m { v } else { m })
}

/// Sum with four independent lanes (vectorisable).
#[inline(always)]
pub(crate) fn sum_of(run: &[f64]) -> f64 {
    let mut lanes = [0.0; 4];
    let chunks = run.chunks_exact(4);
    let rest = chunks.remainder();
    for c in chunks {
        for (s, &v) in lanes.iter_mut().zip(c) {
            *s += v;
        }
    }
    (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]) + rest.iter().sum::<f64>()
}

/// Adds the message offsets to `tt` (which holds `θ` on entry), edge by edge in
/// star order: `θ̃_parent += λ` broadcast through the edge, `θ̃_child −= λ`.
#[inline(always)]
pub(crate) fn add_messages<A: Kernel>(p: &InferenceProblem<'_>, lambda: &[f64], tt: &mut [f64]) {
    for cp in &p.plan.children {
        let edges = &p.plan.edges[cp.first..cp.end];
        #[cfg(target_arch = "x86_64")]
        if cp.kind == StarKind::Binary && A::AVX2_FMA {
            // SAFETY: `Avx2Fma` and `Avx512` are only instantiated in functions compiled with AVX2 and FMA.
            unsafe { avx2::add_binary_messages(cp, edges, lambda, tt) };
            continue;
        }
        if cp.kind == StarKind::Binary {
            // The common binary grid: the same additions as below, without the loops.
            for ep in edges {
                let (m0, m1) = (lambda[ep.message_offset], lambda[ep.message_offset + 1]);
                let (s, o) = if ep.stride == 2 { (2, 1) } else { (1, 2) };
                let t = &mut tt[ep.parent_offset..ep.parent_offset + 4];
                t[0] += m0;
                t[o] += m0;
                t[s] += m1;
                t[s + o] += m1;
                tt[cp.offset] -= m0;
                tt[cp.offset + 1] -= m1;
            }
            continue;
        }
        for ep in edges {
            let msg = &lambda[ep.message_offset..ep.message_offset + cp.len];
            let parent = &mut tt[ep.parent_offset..ep.parent_offset + ep.parent_len];
            if ep.stride > 0 {
                apply_strided(parent, ep.stride, msg);
            } else {
                apply_general(parent, p.graph.edge_map(ep.edge), msg);
            }
            for (c, &v) in tt[cp.offset..cp.offset + cp.len].iter_mut().zip(msg) {
                *c -= v;
            }
        }
    }
}
