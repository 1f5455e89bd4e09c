//! The builds of the kernels ([`Kernels`]: portable with separate or fused
//! multiply-adds, and with the AVX-512 kernels) and the choice among them for
//! this CPU ([`fused_arithmetic`] and the `dispatch!` macro).

use fastmath::{Arith, Fused, Plain};

#[cfg(target_arch = "x86_64")]
use super::avx512;
#[cfg(doc)]
use super::kernels::outer_sums;
use super::kernels::{outer_sums_from, rows_of_tiles, splat, tanh, tile_sums};
use super::{BLOCK, TILE};

/// Whether the kernels use fused multiply-adds ([`fastmath::Fused`]): on
/// x86-64 CPUs with AVX2 and FMA (every x86-64 CPU since 2013–2015) and on
/// AArch64 (FMA is part of the base architecture); elsewhere separate
/// multiplies and adds ([`Plain`]). The two differ in the last bits, so a fit's
/// model depends on which of the two the CPU runs, and on nothing else about it.
pub fn fused_arithmetic() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        fastmath::x86::avx2_fma()
    }
    #[cfg(target_arch = "aarch64")]
    {
        true
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// One build of the kernels: its arithmetic, and the loops that have
/// hand-vectorised versions (by default the portable ones, which the compiler
/// vectorises). Every build computes each value by the same operations in the
/// same order, so builds of one arithmetic give the same bits.
pub(super) trait Kernels {
    /// How products are added to their sums.
    type A: Arith;

    /// [`tile_sums`] of 16 rows (four blocks) at `r0`, each output starting
    /// from `start[q]`, and with `TANH` the [`tanh`] of each sum.
    #[inline(always)]
    fn tile_sums_16<const TANH: bool>(start: [f64; TILE], w: &[f64], x: &[f64], st: usize, r0: usize, out: &mut [f64]) {
        let start = splat(|q| start[q]);
        tile_sums::<Self::A, true>(start, w, x, st, r0, out);
        tile_sums::<Self::A, true>(start, w, x, st, r0 + 2 * BLOCK, out);
        if TANH {
            for oq in out.chunks_exact_mut(st) {
                Self::tanh_slice(&mut oq[r0..r0 + 4 * BLOCK]);
            }
        }
    }

    /// `v ← tanh v` for every value of `t`.
    #[inline(always)]
    fn tanh_slice(t: &mut [f64]) {
        for v in t {
            *v = tanh::<Self::A>(*v);
        }
    }

    /// The rows of the tiles of `src` as [`Kernels::outer_sums_tiles`] takes
    /// them ([`rows_of_tiles`]).
    #[inline(always)]
    fn rows_of_tiles(src: &[f64], st: usize, used: usize, dst: &mut [[f64; TILE]]) {
        rows_of_tiles(src, st, used, dst);
    }

    /// [`outer_sums`] of every tile: `out` holds the tiles one after another,
    /// `b` their rows' values as [`Kernels::rows_of_tiles`] wrote them (row
    /// stride `st`), of which rows `0..used` count.
    #[inline(always)]
    fn outer_sums_tiles(out: &mut [f64], a: &[f64], st: usize, b: &[[f64; TILE]], used: usize) {
        outer_sums_from::<Self::A>(out, a, st, b, used, 0);
    }
}

impl Kernels for Plain {
    type A = Plain;
}

impl Kernels for Fused {
    type A = Fused;
}

/// The AVX-512 kernels of [`avx512`] where the CPU has AVX-512 F (the portable
/// ones elsewhere), with fused multiply-adds.
#[cfg(target_arch = "x86_64")]
pub(super) struct Avx512;

#[cfg(target_arch = "x86_64")]
impl Kernels for Avx512 {
    type A = Fused;

    #[inline(always)]
    fn tile_sums_16<const TANH: bool>(start: [f64; TILE], w: &[f64], x: &[f64], st: usize, r0: usize, out: &mut [f64]) {
        if fastmath::x86::avx512() {
            // SAFETY: the CPU has AVX-512 F, checked just above.
            unsafe { avx512::tile_sums_16::<TANH>(start, w, x, st, r0, out) }
        } else {
            Fused::tile_sums_16::<TANH>(start, w, x, st, r0, out);
        }
    }

    #[inline(always)]
    fn tanh_slice(t: &mut [f64]) {
        if fastmath::x86::avx512() {
            // SAFETY: as above.
            unsafe { avx512::tanh_slice(t) }
        } else {
            Fused::tanh_slice(t);
        }
    }

    #[inline(always)]
    fn rows_of_tiles(src: &[f64], st: usize, used: usize, dst: &mut [[f64; TILE]]) {
        if fastmath::x86::avx512() {
            // SAFETY: as above.
            unsafe { avx512::rows_of_pairs(src, st, used, dst) }
        } else {
            rows_of_tiles(src, st, used, dst);
        }
    }

    /// The pairs of tiles that [`avx512::rows_of_pairs`] wrote together go to
    /// [`avx512::outer_sums`], a last odd tile (written as [`rows_of_tiles`]
    /// does) to the portable kernel.
    #[inline(always)]
    fn outer_sums_tiles(out: &mut [f64], a: &[f64], st: usize, b: &[[f64; TILE]], used: usize) {
        // SAFETY: as above.
        let done = if fastmath::x86::avx512() { unsafe { avx512::outer_sums(out, a, st, b, used) } } else { 0 };
        outer_sums_from::<Fused>(out, a, st, b, used, done);
    }
}

/// Runs a kernel compiled for AVX2 + FMA with fused multiply-adds when
/// [`fused_arithmetic`] says so, else compiled for the baseline target with
/// separate multiplies and adds. Each build is the same Rust code, so all CPUs
/// of one kind give bit-identical results. It names what it uses by full
/// path, so it expands in any module of `mlp`.
macro_rules! dispatch {
    ($generic:ident, ($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn fused<K: $crate::mlp::dispatch::Kernels<A = ::fastmath::Fused>>($($arg: $ty),*) -> $ret {
            $generic::<K>($($arg),*)
        }

        fn dispatched($($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            if $crate::mlp::dispatch::fused_arithmetic() {
                // SAFETY: the CPU supports AVX2 and FMA, checked just above.
                return unsafe {
                    if ::fastmath::x86::avx512() {
                        fused::<$crate::mlp::dispatch::Avx512>($($arg),*)
                    } else {
                        fused::<::fastmath::Fused>($($arg),*)
                    }
                };
            }
            #[cfg(target_arch = "aarch64")]
            return $generic::<::fastmath::Fused>($($arg),*);
            #[allow(unreachable_code)]
            $generic::<::fastmath::Plain>($($arg),*)
        }
    };
}
pub(super) use dispatch;
