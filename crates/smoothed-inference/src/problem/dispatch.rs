//! Which build of the kernels runs: the best this CPU has (AVX-512 F with
//! AVX2 and FMA, AVX2 with FMA, or the portable one, as
//! [`fastmath::x86::avx512`] and [`fastmath::x86::avx2_fma`] detect them),
//! and the builds themselves, thin `#[target_feature]` wrappers around the
//! same Rust code.

use super::InferenceProblem;
use crate::star::{self, Bufs};
use fastmath::Plain;

/// Runs `iterations` message-passing iterations with the best kernel this CPU has.
pub(crate) fn dispatch_sweep(
    p: &InferenceProblem<'_>,
    lambda: &mut [f64],
    tt: &mut [f64],
    bufs: &mut Bufs<'_>,
    order: &[usize],
    iterations: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if fastmath::x86::avx512() {
        // SAFETY: the CPU supports AVX-512 F, AVX2 and FMA (checked just above).
        unsafe { simd512::sweep(p, lambda, tt, bufs, order, iterations) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if fastmath::x86::avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked just above).
        unsafe { simd::sweep(p, lambda, tt, bufs, order, iterations) };
        return;
    }
    star::sweep::<Plain>(p, lambda, tt, bufs, order, iterations);
}

/// [`InferenceProblem::check_violation`] with the best kernel this CPU has.
pub(super) fn dispatch_check(
    p: &InferenceProblem<'_>,
    lambda: &[f64],
    tt: &[f64],
    stale: bool,
    beliefs: &mut [f64],
    scratch: (&mut [f64], &mut [f64]),
) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if fastmath::x86::avx512() && !stale && !p.plan.binary_pairs.is_empty() {
        // SAFETY: the CPU supports AVX-512 F, AVX2 and FMA (checked just above).
        return unsafe { simd512::check_binary(p, tt, beliefs) };
    }
    #[cfg(target_arch = "x86_64")]
    if fastmath::x86::avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked just above).
        return unsafe { simd::check_violation(p, lambda, tt, stale, beliefs, scratch) };
    }
    p.check_violation::<Plain>(lambda, tt, stale, beliefs, scratch)
}

pub(super) fn dispatch_single(
    p: &InferenceProblem<'_>,
    lambda: &mut [f64],
    tt: &mut [f64],
    bufs: &mut Bufs<'_>,
    child: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if fastmath::x86::avx512() {
        // SAFETY: the CPU supports AVX-512 F, AVX2 and FMA (checked just above).
        unsafe { simd512::single(p, lambda, tt, bufs, child) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if fastmath::x86::avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked just above).
        unsafe { simd::single(p, lambda, tt, bufs, child) };
        return;
    }
    star::single::<Plain>(p, lambda, tt, bufs, child);
}

/// The sweeps compiled for AVX-512 F (with AVX2 and FMA): the binary and
/// 8-label stars on eight-lane registers, bit for bit the AVX2 ones.
#[cfg(target_arch = "x86_64")]
pub(super) mod simd512 {
    use super::{Bufs, InferenceProblem};
    use crate::star::{self, Avx512};

    /// The violation of [`InferenceProblem::violation_and_dual_of`] from the
    /// beliefs when the plan has [`crate::problem::Plan::binary_pairs`]: the same
    /// number, bit for bit, with the pairs two per register.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(in crate::problem) unsafe fn report_binary(p: &InferenceProblem<'_>, beliefs: &[f64]) -> f64 {
        unsafe { star::report_binary_pairs(&p.plan.binary_pairs, beliefs) }
    }

    /// [`InferenceProblem::check_violation`] when `θ̃` is fresh everywhere and
    /// the plan has [`crate::problem::Plan::binary_pairs`]: the same number, bit for
    /// bit, with the pairs two per register.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(in crate::problem) unsafe fn check_binary(p: &InferenceProblem<'_>, tt: &[f64], beliefs: &mut [f64]) -> f64 {
        p.child_beliefs::<fastmath::Fused>(tt, beliefs);
        unsafe { star::check_binary_pairs(&p.plan.binary_pairs, tt, beliefs) }
    }

    /// # Safety
    /// The CPU must support AVX-512 F, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(in crate::problem) unsafe fn sweep(
        p: &InferenceProblem<'_>,
        lambda: &mut [f64],
        tt: &mut [f64],
        bufs: &mut Bufs<'_>,
        order: &[usize],
        iterations: usize,
    ) {
        star::sweep::<Avx512>(p, lambda, tt, bufs, order, iterations);
    }

    /// # Safety
    /// The CPU must support AVX-512 F, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(in crate::problem) unsafe fn single(
        p: &InferenceProblem<'_>,
        lambda: &mut [f64],
        tt: &mut [f64],
        bufs: &mut Bufs<'_>,
        child: usize,
    ) {
        star::single::<Avx512>(p, lambda, tt, bufs, child);
    }
}

/// The same kernels compiled for AVX2 + FMA.
#[cfg(target_arch = "x86_64")]
pub(super) mod simd {
    use super::{Bufs, InferenceProblem};
    use crate::star::{self, Avx2Fma};
    use fastmath::Fused;

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(in crate::problem) unsafe fn beliefs_of(
        p: &InferenceProblem<'_>,
        tt: &[f64],
        out: &mut [f64],
        parts: &mut [[f64; 2]],
    ) -> f64 {
        p.beliefs_with(tt, out, parts)
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(in crate::problem) unsafe fn build_factored(p: &InferenceProblem<'_>) -> crate::problem::Factored {
        p.build_factored_with()
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(in crate::problem) unsafe fn check_violation(
        p: &InferenceProblem<'_>,
        lambda: &[f64],
        tt: &[f64],
        stale: bool,
        beliefs: &mut [f64],
        scratch: (&mut [f64], &mut [f64]),
    ) -> f64 {
        p.check_violation::<Fused>(lambda, tt, stale, beliefs, scratch)
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(in crate::problem) unsafe fn add_messages(p: &InferenceProblem<'_>, lambda: &[f64], tt: &mut [f64]) {
        star::add_messages::<Avx2Fma>(p, lambda, tt);
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(in crate::problem) unsafe fn refresh_children(p: &InferenceProblem<'_>, lambda: &[f64], tt: &mut [f64]) {
        p.refresh_children_with(lambda, tt);
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(in crate::problem) unsafe fn sweep(
        p: &InferenceProblem<'_>,
        lambda: &mut [f64],
        tt: &mut [f64],
        bufs: &mut Bufs<'_>,
        order: &[usize],
        iterations: usize,
    ) {
        star::sweep::<Avx2Fma>(p, lambda, tt, bufs, order, iterations);
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(in crate::problem) unsafe fn single(
        p: &InferenceProblem<'_>,
        lambda: &mut [f64],
        tt: &mut [f64],
        bufs: &mut Bufs<'_>,
        child: usize,
    ) {
        star::single::<Avx2Fma>(p, lambda, tt, bufs, child);
    }
}
