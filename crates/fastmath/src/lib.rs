//! Branch-free `exp` and `ln` for the hot loops of smoothed inference (the
//! star update, beliefs, the dual) and of the oracles (softmax rows).
//!
//! `f64::exp`/`f64::ln` are opaque calls into the C library, so loops over
//! them cannot be vectorised. These versions are plain arithmetic and bit
//! manipulation, `#[inline(always)]`, so a loop of them compiles to SIMD code,
//! and with [`Fused`] arithmetic inside a function compiled for AVX2+FMA they
//! use fused multiply-adds. Accuracy: about 1 ulp (relative error below
//! 5e-16, checked against the C library in the tests).
//!
//! ```
//! use fastmath::{exp_nonpos, ln_pos, Plain};
//! // ln Σ exp over a row, against its maximum, vectorisable:
//! let row = [0.5f64, -1.0, 2.0, 0.0];
//! let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
//! let z: f64 = row.iter().map(|&v| exp_nonpos::<Plain>(v - m)).sum();
//! let lse = m + ln_pos::<Plain>(z);
//! let exact = row.iter().map(|v| v.exp()).sum::<f64>().ln();
//! assert!((lse - exact).abs() < 1e-15 * exact.abs());
//! ```

#![warn(missing_docs)]

/// How a multiply-add `a·b + c` is evaluated; monomorphised twice so that the
/// same code compiles with and without hardware FMA.
pub trait Arith: Copy {
    /// `a·b + c`.
    fn madd(a: f64, b: f64, c: f64) -> f64;
}

/// Separate multiply and add (any CPU).
#[derive(Debug, Clone, Copy)]
pub struct Plain;

impl Arith for Plain {
    #[inline(always)]
    fn madd(a: f64, b: f64, c: f64) -> f64 {
        a * b + c
    }
}

/// Fused multiply-add; only used inside functions compiled with the `fma`
/// target feature (elsewhere `mul_add` would be a slow library call).
#[derive(Debug, Clone, Copy)]
pub struct Fused;

impl Arith for Fused {
    #[inline(always)]
    fn madd(a: f64, b: f64, c: f64) -> f64 {
        a.mul_add(b, c)
    }
}

/// Below this `exp` returns exactly 0 (avoids subnormals, which are slow and
/// meaningless next to the normalising sums they are added to).
pub const EXP_FLUSH: f64 = -708.0;

const LOG2_E: f64 = std::f64::consts::LOG2_E;
/// `1.5·2^52`: adding it rounds to an integer held in the low mantissa bits.
const SHIFTER: f64 = 6_755_399_441_055_744.0;
/// Cody–Waite split of `ln 2` (the high part has trailing zero bits, so `k·LN2_HI` is exact).
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
// fdlibm's minimax coefficients (exact bit patterns) of the rational approximation of e^r,
// |r| ≤ ln2/2: c = r − r²·P(r²), e^r = 1 + r + r·c/(2 − c) (error < 1 ulp).
// The division runs on its own port, so this is faster than a degree-13
// polynomial of the same accuracy.
const P1: f64 = f64::from_bits(0x3fc5_5555_5555_553e);
const P2: f64 = f64::from_bits(0xbf66_c16c_16be_bd93);
const P3: f64 = f64::from_bits(0x3f11_566a_af25_de2c);
const P4: f64 = f64::from_bits(0xbebb_bd41_c5d2_6bf1);
const P5: f64 = f64::from_bits(0x3e66_3769_72be_a4d0);

/// `e^x` for `x ≤ 0` (`−∞` gives 0; results below `e^-708` are flushed to 0).
/// Also accurate for `0 < x < 709`. NaN in, 0 out: callers select such lanes
/// away.
#[inline(always)]
pub fn exp_nonpos<A: Arith>(x: f64) -> f64 {
    let xc = if x < EXP_FLUSH { EXP_FLUSH } else { x };
    let t = A::madd(xc, LOG2_E, SHIFTER);
    let kf = t - SHIFTER;
    let r = A::madd(kf, -LN2_HI, xc);
    let r = A::madd(kf, -LN2_LO, r);
    let rr = r * r;
    let c = A::madd(-rr, A::madd(rr, A::madd(rr, A::madd(rr, A::madd(rr, P5, P4), P3), P2), P1), r);
    let p = 1.0 + (r + r * c / (2.0 - c));
    // t's bit pattern is SHIFTER's plus k; move k + 1023 into the exponent field.
    let k = t.to_bits().wrapping_sub(SHIFTER.to_bits());
    let scale = f64::from_bits(k.wrapping_add(1023) << 52);
    // Flush with a bit mask, not a select: LLVM turns a select around this much
    // arithmetic into a branch, which stops vectorisation.
    let keep = u64::from(x >= EXP_FLUSH).wrapping_neg();
    f64::from_bits((p * scale).to_bits() & keep)
}

/// Bit pattern of `√½`: mantissas are reduced into `[√½, √2)`.
const SQRT_HALF_BITS: u64 = 0x3fe6_a09e_667f_3bcd;
// fdlibm's minimax coefficients (exact bit patterns) for (ln(1+f) − 2s)/s in s², s = f/(2+f).
const LG1: f64 = f64::from_bits(0x3fe5_5555_5555_5593);
const LG2: f64 = f64::from_bits(0x3fd9_9999_9997_fa04);
const LG3: f64 = f64::from_bits(0x3fd2_4924_9422_9359);
const LG4: f64 = f64::from_bits(0x3fcc_71c5_1d8e_78af);
const LG5: f64 = f64::from_bits(0x3fc7_4664_96cb_03de);
const LG6: f64 = f64::from_bits(0x3fc3_9a09_d078_c69f);
const LG7: f64 = f64::from_bits(0x3fc2_f112_df3e_5244);

/// `ln z` for positive, normal, finite `z` (other inputs give garbage that
/// callers select away).
///
/// Only unsigned 64-bit shifts and adds and no integer → float conversion, so
/// that it vectorises with AVX2 (which has neither 64-bit arithmetic shifts
/// nor 64-bit integer conversions): the exponent is read with a bias that keeps
/// it positive, and turned into a float through the mantissa of `2^52`.
#[inline(always)]
pub fn ln_pos<A: Arith>(z: f64) -> f64 {
    const BIAS: u64 = 1024;
    const TWO52_BITS: u64 = 0x4330_0000_0000_0000;
    let bits = z.to_bits();
    // (exponent of z relative to √½) + BIAS, in 2..=2048 for normal z.
    let biased = bits.wrapping_sub(SQRT_HALF_BITS).wrapping_add(BIAS << 52) >> 52;
    let k_shift = biased.wrapping_sub(BIAS) << 52;
    let m = f64::from_bits(bits.wrapping_sub(k_shift));
    let kf = f64::from_bits(TWO52_BITS | biased) - (4_503_599_627_370_496.0 + BIAS as f64);
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z2 = s * s;
    let w = z2 * z2;
    let t1 = w * A::madd(w, A::madd(w, LG6, LG4), LG2);
    let t2 = z2 * A::madd(w, A::madd(w, A::madd(w, LG7, LG5), LG3), LG1);
    let r = t2 + t1;
    let hfsq = 0.5 * f * f;
    A::madd(kf, LN2_HI, -((hfsq - A::madd(s, hfsq + r, kf * LN2_LO)) - f))
}

/// [`exp_nonpos`] and [`ln_pos`] on four lanes of AVX2 registers and eight
/// of AVX-512 ones, for kernels written with `std::arch` intrinsics. Each is the same sequence of
/// operations as the scalar function with [`Fused`] arithmetic, so every lane
/// is bit for bit what the scalar function returns for it (tested).
///
/// Also the workspace's one CPU-feature detection: one function per level
/// of kernels ([`x86::avx2`], [`x86::avx2_fma`], [`x86::avx512`]), each a
/// single load of a value detected once per process. A kernel compiled with
/// `#[target_feature(enable = ...)]` is called only after the level of
/// exactly those features said yes.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::*;
    use std::arch::x86_64::*;
    use std::sync::atomic::{AtomicU8, Ordering};

    /// The detected levels, one bit each, and [`DETECTED`] once they are.
    static LEVELS: AtomicU8 = AtomicU8::new(0);
    const DETECTED: u8 = 1 << 7;
    const AVX2: u8 = 1;
    const AVX2_FMA: u8 = 1 << 1;
    const AVX512F: u8 = 1 << 2;
    const AVX512_AVX2_FMA: u8 = 1 << 3;

    /// The level bits, detected on first use. Threads racing on the first
    /// use detect the same bits, so a relaxed store and load suffice.
    #[inline]
    fn levels() -> u8 {
        let levels = LEVELS.load(Ordering::Relaxed);
        if levels & DETECTED != 0 { levels } else { detect() }
    }

    #[cold]
    fn detect() -> u8 {
        use std::arch::is_x86_feature_detected as has;
        let (avx2, fma, avx512f) = (has!("avx2"), has!("fma"), has!("avx512f"));
        let bit = |on: bool, bit: u8| if on { bit } else { 0 };
        let levels = DETECTED
            | bit(avx2, AVX2)
            | bit(avx2 && fma, AVX2_FMA)
            | bit(avx512f, AVX512F)
            | bit(avx512f && avx2 && fma, AVX512_AVX2_FMA);
        LEVELS.store(levels, Ordering::Relaxed);
        levels
    }

    /// Whether this CPU has AVX2 (kernels compiled with
    /// `#[target_feature(enable = "avx2")]`: four lanes, no fused multiply-adds).
    #[inline]
    pub fn avx2() -> bool {
        levels() & AVX2 != 0
    }

    /// Whether this CPU has AVX2 and FMA (kernels compiled with
    /// `#[target_feature(enable = "avx2,fma")]`, and the four-lane functions
    /// of this module).
    #[inline]
    pub fn avx2_fma() -> bool {
        levels() & AVX2_FMA != 0
    }

    /// Whether this CPU has AVX-512 F, AVX2 and FMA (kernels compiled with
    /// `#[target_feature(enable = "avx512f,avx2,fma")]`, or with `avx512f`
    /// alone next to [`avx2_fma`] ones; every AVX-512 CPU has AVX2 and FMA).
    #[inline]
    pub fn avx512() -> bool {
        levels() & AVX512_AVX2_FMA != 0
    }

    /// Whether this CPU runs the functions of this module (AVX2 and FMA):
    /// [`avx2_fma`].
    #[inline]
    pub fn available() -> bool {
        avx2_fma()
    }

    /// [`exp_nonpos`]`::<Fused>` on each lane.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA ([`available`]).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub fn exp_nonpos_4(x: __m256d) -> __m256d {
        let flush = _mm256_set1_pd(EXP_FLUSH);
        let shifter = _mm256_set1_pd(SHIFTER);
        // x < EXP_FLUSH ? EXP_FLUSH : x (NaN lanes are masked off below).
        let xc = _mm256_max_pd(x, flush);
        let t = _mm256_fmadd_pd(xc, _mm256_set1_pd(LOG2_E), shifter);
        let kf = _mm256_sub_pd(t, shifter);
        let r = _mm256_fmadd_pd(kf, _mm256_set1_pd(-LN2_HI), xc);
        let r = _mm256_fmadd_pd(kf, _mm256_set1_pd(-LN2_LO), r);
        let rr = _mm256_mul_pd(r, r);
        let poly = _mm256_fmadd_pd(rr, _mm256_set1_pd(P5), _mm256_set1_pd(P4));
        let poly = _mm256_fmadd_pd(rr, poly, _mm256_set1_pd(P3));
        let poly = _mm256_fmadd_pd(rr, poly, _mm256_set1_pd(P2));
        let poly = _mm256_fmadd_pd(rr, poly, _mm256_set1_pd(P1));
        let c = _mm256_fnmadd_pd(rr, poly, r);
        let q = _mm256_div_pd(_mm256_mul_pd(r, c), _mm256_sub_pd(_mm256_set1_pd(2.0), c));
        let p = _mm256_add_pd(_mm256_set1_pd(1.0), _mm256_add_pd(r, q));
        let k = _mm256_sub_epi64(_mm256_castpd_si256(t), _mm256_castpd_si256(shifter));
        let scale = _mm256_slli_epi64::<52>(_mm256_add_epi64(k, _mm256_set1_epi64x(1023)));
        let keep = _mm256_cmp_pd::<_CMP_GE_OQ>(x, flush);
        _mm256_and_pd(_mm256_mul_pd(p, _mm256_castsi256_pd(scale)), keep)
    }

    /// [`ln_pos`]`::<Fused>` on each lane.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA ([`available`]).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub fn ln_pos_4(z: __m256d) -> __m256d {
        const BIAS: i64 = 1024;
        let bits = _mm256_castpd_si256(z);
        let shifted = _mm256_add_epi64(
            _mm256_sub_epi64(bits, _mm256_set1_epi64x(SQRT_HALF_BITS as i64)),
            _mm256_set1_epi64x(BIAS << 52),
        );
        let biased = _mm256_srli_epi64::<52>(shifted);
        let k_shift = _mm256_slli_epi64::<52>(_mm256_sub_epi64(biased, _mm256_set1_epi64x(BIAS)));
        let m = _mm256_castsi256_pd(_mm256_sub_epi64(bits, k_shift));
        let two52 = _mm256_castsi256_pd(_mm256_or_si256(_mm256_set1_epi64x(0x4330_0000_0000_0000), biased));
        let kf = _mm256_sub_pd(two52, _mm256_set1_pd(4_503_599_627_370_496.0 + BIAS as f64));
        let one = _mm256_set1_pd(1.0);
        let f = _mm256_sub_pd(m, one);
        let s = _mm256_div_pd(f, _mm256_add_pd(_mm256_set1_pd(2.0), f));
        let z2 = _mm256_mul_pd(s, s);
        let w = _mm256_mul_pd(z2, z2);
        let t1 = _mm256_fmadd_pd(w, _mm256_set1_pd(LG6), _mm256_set1_pd(LG4));
        let t1 = _mm256_mul_pd(w, _mm256_fmadd_pd(w, t1, _mm256_set1_pd(LG2)));
        let t2 = _mm256_fmadd_pd(w, _mm256_set1_pd(LG7), _mm256_set1_pd(LG5));
        let t2 = _mm256_fmadd_pd(w, t2, _mm256_set1_pd(LG3));
        let t2 = _mm256_mul_pd(z2, _mm256_fmadd_pd(w, t2, _mm256_set1_pd(LG1)));
        let r = _mm256_add_pd(t2, t1);
        let hfsq = _mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(0.5), f), f);
        let inner = _mm256_fmadd_pd(s, _mm256_add_pd(hfsq, r), _mm256_mul_pd(kf, _mm256_set1_pd(LN2_LO)));
        let neg = _mm256_sub_pd(_mm256_sub_pd(hfsq, inner), f);
        // −neg: flip the sign bit (exact, as the scalar negation).
        let minus = _mm256_xor_pd(neg, _mm256_set1_pd(-0.0));
        _mm256_fmadd_pd(kf, _mm256_set1_pd(LN2_HI), minus)
    }

    /// Whether this CPU runs the eight-lane functions (AVX-512 F).
    #[inline]
    pub fn available_512() -> bool {
        levels() & AVX512F != 0
    }

    /// [`exp_nonpos`]`::<Fused>` on each of eight lanes.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F ([`available_512`]).
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub fn exp_nonpos_8(x: __m512d) -> __m512d {
        let flush = _mm512_set1_pd(EXP_FLUSH);
        let shifter = _mm512_set1_pd(SHIFTER);
        let xc = _mm512_max_pd(x, flush);
        let t = _mm512_fmadd_pd(xc, _mm512_set1_pd(LOG2_E), shifter);
        let kf = _mm512_sub_pd(t, shifter);
        let r = _mm512_fmadd_pd(kf, _mm512_set1_pd(-LN2_HI), xc);
        let r = _mm512_fmadd_pd(kf, _mm512_set1_pd(-LN2_LO), r);
        let rr = _mm512_mul_pd(r, r);
        let poly = _mm512_fmadd_pd(rr, _mm512_set1_pd(P5), _mm512_set1_pd(P4));
        let poly = _mm512_fmadd_pd(rr, poly, _mm512_set1_pd(P3));
        let poly = _mm512_fmadd_pd(rr, poly, _mm512_set1_pd(P2));
        let poly = _mm512_fmadd_pd(rr, poly, _mm512_set1_pd(P1));
        let c = _mm512_fnmadd_pd(rr, poly, r);
        let q = _mm512_div_pd(_mm512_mul_pd(r, c), _mm512_sub_pd(_mm512_set1_pd(2.0), c));
        let p = _mm512_add_pd(_mm512_set1_pd(1.0), _mm512_add_pd(r, q));
        let k = _mm512_sub_epi64(_mm512_castpd_si512(t), _mm512_castpd_si512(shifter));
        let scale = _mm512_slli_epi64::<52>(_mm512_add_epi64(k, _mm512_set1_epi64(1023)));
        let keep = _mm512_cmp_pd_mask::<_CMP_GE_OQ>(x, flush);
        _mm512_maskz_mov_pd(keep, _mm512_mul_pd(p, _mm512_castsi512_pd(scale)))
    }

    /// [`ln_pos`]`::<Fused>` on each of eight lanes.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F ([`available_512`]).
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub fn ln_pos_8(z: __m512d) -> __m512d {
        const BIAS: i64 = 1024;
        let bits = _mm512_castpd_si512(z);
        let shifted = _mm512_add_epi64(
            _mm512_sub_epi64(bits, _mm512_set1_epi64(SQRT_HALF_BITS as i64)),
            _mm512_set1_epi64(BIAS << 52),
        );
        let biased = _mm512_srli_epi64::<52>(shifted);
        let k_shift = _mm512_slli_epi64::<52>(_mm512_sub_epi64(biased, _mm512_set1_epi64(BIAS)));
        let m = _mm512_castsi512_pd(_mm512_sub_epi64(bits, k_shift));
        let two52 = _mm512_castsi512_pd(_mm512_or_si512(_mm512_set1_epi64(0x4330_0000_0000_0000), biased));
        let kf = _mm512_sub_pd(two52, _mm512_set1_pd(4_503_599_627_370_496.0 + BIAS as f64));
        let f = _mm512_sub_pd(m, _mm512_set1_pd(1.0));
        let s = _mm512_div_pd(f, _mm512_add_pd(_mm512_set1_pd(2.0), f));
        let z2 = _mm512_mul_pd(s, s);
        let w = _mm512_mul_pd(z2, z2);
        let t1 = _mm512_fmadd_pd(w, _mm512_set1_pd(LG6), _mm512_set1_pd(LG4));
        let t1 = _mm512_mul_pd(w, _mm512_fmadd_pd(w, t1, _mm512_set1_pd(LG2)));
        let t2 = _mm512_fmadd_pd(w, _mm512_set1_pd(LG7), _mm512_set1_pd(LG5));
        let t2 = _mm512_fmadd_pd(w, t2, _mm512_set1_pd(LG3));
        let t2 = _mm512_mul_pd(z2, _mm512_fmadd_pd(w, t2, _mm512_set1_pd(LG1)));
        let r = _mm512_add_pd(t2, t1);
        let hfsq = _mm512_mul_pd(_mm512_mul_pd(_mm512_set1_pd(0.5), f), f);
        let inner = _mm512_fmadd_pd(s, _mm512_add_pd(hfsq, r), _mm512_mul_pd(kf, _mm512_set1_pd(LN2_LO)));
        let neg = _mm512_sub_pd(_mm512_sub_pd(hfsq, inner), f);
        let minus = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(neg), _mm512_set1_epi64(i64::MIN)));
        _mm512_fmadd_pd(kf, _mm512_set1_pd(LN2_HI), minus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(a: f64, b: f64) -> f64 {
        if a == b { 0.0 } else { (a - b).abs() / b.abs().max(f64::MIN_POSITIVE) }
    }

    fn check_exp<A: Arith>() {
        let mut worst = 0.0f64;
        let mut x = -707.9;
        while x <= 0.0 {
            worst = worst.max(rel(exp_nonpos::<A>(x), x.exp()));
            x += 0.01234;
        }
        for x in [0.0, -1e-300, -1e-17, -0.3465, -0.3466, -std::f64::consts::LN_2, -1.0, -2.0, -700.0, -707.99] {
            worst = worst.max(rel(exp_nonpos::<A>(x), x.exp()));
        }
        assert!(worst < 5e-16, "exp worst relative error {worst}");
        assert_eq!(exp_nonpos::<A>(0.0), 1.0);
        assert_eq!(exp_nonpos::<A>(f64::NEG_INFINITY), 0.0);
        assert_eq!(exp_nonpos::<A>(-709.0), 0.0);
        assert!(rel(exp_nonpos::<A>(3.5), 3.5f64.exp()) < 1e-15);
    }

    fn check_ln<A: Arith>() {
        let mut z = 1e-300;
        while z < 1e300 {
            assert!(rel(ln_pos::<A>(z), z.ln()) < 5e-16, "ln({z})");
            z *= 1.0137;
        }
        let mut z = 0.5;
        while z < 2.5 {
            assert!(rel(ln_pos::<A>(z), z.ln()) < 5e-16, "ln({z}) = {} vs {}", ln_pos::<A>(z), z.ln());
            z += 0.000_713;
        }
        assert_eq!(ln_pos::<A>(1.0), 0.0);
    }

    #[test]
    fn exp_matches_libm() {
        check_exp::<Plain>();
        check_exp::<Fused>();
    }

    /// The four-lane versions are bit for bit the scalar ones, on ordinary
    /// arguments and on the edges (flush, −∞, NaN, tiny and huge `z`).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn four_lanes_equal_the_scalar_functions_bit_for_bit() {
        if !x86::available() {
            return;
        }
        let mut xs: Vec<f64> = (0..20_000).map(|i| -720.0 + i as f64 * 0.036_137).collect();
        xs.extend([0.0, -0.0, -1e-300, -708.0, -708.000_001, -707.999, f64::NEG_INFINITY, f64::NAN, 3.5]);
        let mut zs: Vec<f64> = (0..20_000).map(|i| 1e-300 * 1.035f64.powi(i)).collect();
        zs.extend([
            1.0,
            0.5,
            2.0,
            f64::MIN_POSITIVE,
            f64::MAX,
            std::f64::consts::FRAC_1_SQRT_2,
            std::f64::consts::SQRT_2,
        ]);
        use std::arch::x86_64::__m256d;
        type F4 = fn(__m256d) -> __m256d;
        let lanes = |v: &[f64], f: F4| -> Vec<f64> {
            v.chunks(4)
                .flat_map(|c| {
                    let mut a = [1.0; 4];
                    a[..c.len()].copy_from_slice(c);
                    // SAFETY: AVX2 and FMA are available (checked above); both types are four f64.
                    let out = unsafe {
                        std::mem::transmute::<__m256d, [f64; 4]>(f(std::mem::transmute::<[f64; 4], __m256d>(a)))
                    };
                    out[..c.len()].to_vec()
                })
                .collect()
        };
        // SAFETY (both): AVX2 and FMA are available (checked above).
        let exp4 = lanes(&xs, |x| unsafe { x86::exp_nonpos_4(x) });
        let ln4 = lanes(&zs, |z| unsafe { x86::ln_pos_4(z) });
        if x86::available_512() {
            use std::arch::x86_64::__m512d;
            type F8 = fn(__m512d) -> __m512d;
            let lanes8 = |v: &[f64], f: F8| -> Vec<f64> {
                v.chunks(8)
                    .flat_map(|c| {
                        let mut a = [1.0; 8];
                        a[..c.len()].copy_from_slice(c);
                        // SAFETY: AVX-512 F is available (checked above); both types are eight f64.
                        let out = unsafe {
                            std::mem::transmute::<__m512d, [f64; 8]>(f(std::mem::transmute::<[f64; 8], __m512d>(a)))
                        };
                        out[..c.len()].to_vec()
                    })
                    .collect()
            };
            // SAFETY (both): AVX-512 F is available (checked above).
            let exp8 = lanes8(&xs, |x| unsafe { x86::exp_nonpos_8(x) });
            let ln8 = lanes8(&zs, |z| unsafe { x86::ln_pos_8(z) });
            assert!(exp8.iter().zip(&exp4).all(|(a, b)| a.to_bits() == b.to_bits()), "exp, 8 lanes");
            assert!(ln8.iter().zip(&ln4).all(|(a, b)| a.to_bits() == b.to_bits()), "ln, 8 lanes");
        }
        for (&x, &v) in xs.iter().zip(&exp4) {
            assert_eq!(v.to_bits(), exp_nonpos::<Fused>(x).to_bits(), "exp({x})");
        }
        for (&z, &v) in zs.iter().zip(&ln4) {
            assert_eq!(v.to_bits(), ln_pos::<Fused>(z).to_bits(), "ln({z})");
        }
    }

    /// The cached levels are what `is_x86_feature_detected!` says, on the
    /// first use and after.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn levels_are_the_detected_features() {
        use std::arch::is_x86_feature_detected as has;
        for _ in 0..2 {
            assert_eq!(x86::avx2(), has!("avx2"));
            assert_eq!(x86::avx2_fma(), has!("avx2") && has!("fma"));
            assert_eq!(x86::avx512(), has!("avx512f") && has!("avx2") && has!("fma"));
            assert_eq!(x86::available(), x86::avx2_fma());
            assert_eq!(x86::available_512(), has!("avx512f"));
        }
    }

    #[test]
    fn ln_matches_libm() {
        check_ln::<Plain>();
        check_ln::<Fused>();
    }
}
