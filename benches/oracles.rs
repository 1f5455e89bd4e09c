//! Oracle benchmarks: time per cold-started fit of a biased logistic regression
//! problem (docs/MATH.md §4, Eq. 11/13) for each function class.
//!
//! Layout: [`Shape::generate`] builds the seeded synthetic problems every group
//! shares and [`bench_shape`] times one oracle on one shape; each oracle then has
//! one `fn` (one criterion group), registered in `criterion_group!` at the
//! bottom. Data are generated, and the loss reached is printed once per shape,
//! only for the benchmarks criterion's filter selects.
//!
//! Run one group with `cargo bench --bench oracles -- linear`.

use std::cell::OnceCell;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use oracles::boosting::BoostingOracle;
use oracles::linear::LinearOracle;
use oracles::mlp::MlpOracle;
use oracles::{Features, FitContext, Oracle, Problem, model_loss};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The size of a synthetic problem and the seed it is generated from.
#[derive(Debug, Clone, Copy)]
struct Shape {
    seed: u64,
    rows: usize,
    dim: usize,
    classes: usize,
}

/// An owned synthetic oracle problem (see [`Shape::generate`]).
struct Synthetic {
    features: Vec<f64>,
    labels: Vec<usize>,
    bias: Vec<f64>,
    shape: Shape,
}

impl Shape {
    /// The benchmark id, `rows x dim x classes`.
    fn name(&self) -> String {
        format!("{}x{}x{}", self.rows, self.dim, self.classes)
    }

    /// A seeded problem: `dim − 1` features uniform in [−1.7, 1.7] (about unit
    /// variance) then a constant 1; a random bias `b_k(y) ~ U[−2, 2]` with 5% of
    /// the entries of classes `y > 0` set to −∞ (impossible classes); labels drawn
    /// from `softmax(W* φ + b)` for a random `W*` scaled so that scores have about
    /// unit spread.
    fn generate(self) -> Synthetic {
        let Shape { seed, rows, dim, classes } = self;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let spread = 1.0 / (dim as f64).sqrt();
        let truth: Vec<f64> = (0..classes * dim).map(|_| rng.random_range(-1.7..1.7) * spread).collect();
        let mut features = vec![1.0; rows * dim];
        let mut bias = vec![0.0; rows * classes];
        let mut labels = vec![0; rows];
        let mut prob = vec![0.0; classes];
        for k in 0..rows {
            let x = &mut features[k * dim..(k + 1) * dim];
            x[..dim - 1].iter_mut().for_each(|v| *v = rng.random_range(-1.7..1.7));
            let b = &mut bias[k * classes..(k + 1) * classes];
            for (y, p) in prob.iter_mut().enumerate() {
                b[y] =
                    if y > 0 && rng.random::<f64>() < 0.05 { f64::NEG_INFINITY } else { rng.random_range(-2.0..2.0) };
                let score: f64 = (0..dim).map(|j| truth[y * dim + j] * x[j]).sum();
                *p = (score + b[y]).exp();
            }
            let mut u = rng.random::<f64>() * prob.iter().sum::<f64>();
            for (y, &p) in prob.iter().enumerate() {
                if p > 0.0 {
                    labels[k] = y;
                    if u < p {
                        break;
                    }
                    u -= p;
                }
            }
        }
        Synthetic { features, labels, bias, shape: self }
    }
}

impl Synthetic {
    fn problem(&self) -> Problem<'_> {
        let Shape { rows, dim, classes, .. } = self.shape;
        let features = Features::new(&self.features, rows, dim).expect("synthetic features are finite");
        Problem::new(features, &self.labels, &self.bias, classes, None).expect("synthetic problem is valid")
    }
}

/// Fits once and prints the loss per row reached, so that timings can be read next
/// to what the fit achieved.
fn report_fit(group: &str, data: &Synthetic, oracle: &dyn Oracle) {
    let problem = data.problem();
    let start = Instant::now();
    let model = oracle.fit(&problem, None, FitContext { seed: 0 }).expect("fit succeeds");
    let elapsed = start.elapsed();
    let loss = model_loss(model.as_ref(), &problem).expect("model fits the problem");
    let per_row = loss / data.shape.rows as f64;
    println!("{group}/{}: loss per row {per_row:.6} (one fit: {elapsed:.2?})", data.shape.name());
}

/// Times cold-started fits of `oracle` on `shape` within `group` (named `group_name`).
fn bench_shape(group: &mut BenchmarkGroup<'_, WallTime>, group_name: &str, oracle: &dyn Oracle, shape: Shape) {
    let data = OnceCell::new();
    group.bench_function(BenchmarkId::from_parameter(shape.name()), |b| {
        let data = data.get_or_init(|| {
            let data = shape.generate();
            report_fit(group_name, &data, oracle);
            data
        });
        let problem = data.problem();
        b.iter(|| oracle.fit(&problem, None, FitContext { seed: 0 }).expect("fit succeeds"))
    });
}

/// The linear oracle (batch L-BFGS from `W = 0` to its default tolerances,
/// without the 30-step budget of the first fit inside learning) on binary and 4-class sizes
/// of the synthetic experiment and a Stanford-Background-sized unary problem
/// (42 features, 8 classes).
fn linear(c: &mut Criterion) {
    let mut group = c.benchmark_group("linear");
    group.sampling_mode(SamplingMode::Flat).sample_size(10);
    let oracle = LinearOracle::default().full_fit();
    group.measurement_time(Duration::from_secs(10));
    bench_shape(&mut group, "linear", &oracle, Shape { seed: 1, rows: 160_000, dim: 2, classes: 2 });
    bench_shape(&mut group, "linear", &oracle, Shape { seed: 2, rows: 320_000, dim: 2, classes: 4 });
    group.measurement_time(Duration::from_secs(120));
    bench_shape(&mut group, "linear", &oracle, Shape { seed: 3, rows: 1_760_000, dim: 42, classes: 8 });
    group.finish();
}

/// A denoising-like problem of `dim = 2` (NIPS §8, synthetic denoising): features
/// `[u, 1]` with `u ~ U[0, 1]`; label `⌊C · clamp(u + U[−0.15, 0.15])⌋`, so labels
/// follow the value with some overlap; bias `b_k(y) = margin · [y ≠ y_k] + U[−2, 2]`
/// (`margin = Δ/ε = 10` mimics a unary factor in the first learning iteration,
/// `0` a pairwise one, whose Δ is zero).
fn denoising_like(shape: Shape, margin: f64) -> Synthetic {
    let Shape { seed, rows, dim, classes } = shape;
    assert_eq!(dim, 2, "denoising-like problems have one value and a constant");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut features = Vec::with_capacity(rows * 2);
    let mut labels = Vec::with_capacity(rows);
    let mut bias = Vec::with_capacity(rows * classes);
    for _ in 0..rows {
        let u: f64 = rng.random();
        features.extend([u, 1.0]);
        let noisy = (u + rng.random_range(-0.15..0.15)).clamp(0.0, 1.0 - 1e-12);
        let label = (noisy * classes as f64) as usize;
        labels.push(label);
        bias.extend((0..classes).map(|y| if y == label { 0.0 } else { margin } + rng.random_range(-2.0..2.0)));
    }
    Synthetic { features, labels, bias, shape }
}

/// The MLP oracle (minibatch SGD with momentum, docs/MATH.md §5) with its defaults: 100
/// hidden units, minibatch 100, one epoch per fit, step 0.25 on the unary-like
/// binary problem and 0.05 on the pairwise-like 4-class one ([`denoising_like`]),
/// and step 0.25 on the Stanford-Background-sized unary problem of
/// [`Shape::generate`]. One fit is one epoch plus one full-loss evaluation.
fn mlp(c: &mut Criterion) {
    let mut group = c.benchmark_group("mlp");
    group.sampling_mode(SamplingMode::Flat).sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    for (shape, margin, oracle) in [
        (Shape { seed: 11, rows: 160_000, dim: 2, classes: 2 }, 10.0, MlpOracle::unary()),
        (Shape { seed: 12, rows: 320_000, dim: 2, classes: 4 }, 0.0, MlpOracle::pairwise()),
    ] {
        let data = OnceCell::new();
        group.bench_function(BenchmarkId::from_parameter(shape.name()), |b| {
            let data = data.get_or_init(|| {
                let data = denoising_like(shape, margin);
                report_fit("mlp", &data, &oracle);
                data
            });
            let problem = data.problem();
            b.iter(|| oracle.fit(&problem, None, FitContext { seed: 0 }).expect("fit succeeds"))
        });
    }
    group.measurement_time(Duration::from_secs(120));
    bench_shape(&mut group, "mlp", &MlpOracle::unary(), Shape { seed: 3, rows: 1_760_000, dim: 42, classes: 8 });
    group.finish();
}

/// Times cold-started fits of `oracle` on the [`denoising_like`] problem of `shape`
/// and `margin` within `group` (named `group_name`).
fn bench_denoising_like(
    group: &mut BenchmarkGroup<'_, WallTime>,
    group_name: &str,
    oracle: &dyn Oracle,
    shape: Shape,
    margin: f64,
) {
    let data = OnceCell::new();
    group.bench_function(BenchmarkId::from_parameter(shape.name()), |b| {
        let data = data.get_or_init(|| {
            let data = denoising_like(shape, margin);
            report_fit(group_name, &data, oracle);
            data
        });
        let problem = data.problem();
        b.iter(|| oracle.fit(&problem, None, FitContext { seed: 0 }).expect("fit succeeds"))
    });
}

/// The boosting oracle (ch. §1.9.4) with its defaults except 200 rounds per fit,
/// the chapter's full run from scratch, on the MLP group's problems: the
/// unary-like binary and pairwise-like 4-class [`denoising_like`] ones and the
/// Stanford-Background-sized unary problem of [`Shape::generate`].
///
/// For comparison with LightGBM on the same kind of problem see
/// `scripts/compare_lightgbm.py`. Set `RAYON_NUM_THREADS` to fix the thread count.
fn boosting(c: &mut Criterion) {
    let mut group = c.benchmark_group("boosting");
    group.sampling_mode(SamplingMode::Flat).sample_size(10);
    let oracle = BoostingOracle { rounds: 200, ..BoostingOracle::default() };
    group.measurement_time(Duration::from_secs(30));
    bench_denoising_like(&mut group, "boosting", &oracle, Shape { seed: 11, rows: 160_000, dim: 2, classes: 2 }, 10.0);
    bench_denoising_like(&mut group, "boosting", &oracle, Shape { seed: 12, rows: 320_000, dim: 2, classes: 4 }, 0.0);
    group.measurement_time(Duration::from_secs(240));
    bench_shape(&mut group, "boosting", &oracle, Shape { seed: 3, rows: 1_760_000, dim: 42, classes: 8 });
    group.finish();
}

/// The machine's GEMM bound at the MLP's own shapes: on the 400000 × 42 × 8
/// problem of [`Shape::generate`], one cold MLP fit of the papers' unary
/// network (`mlp_gemm_bound/mlp_fit`: one epoch of minibatches of 100 rows,
/// then one full-loss evaluation) against the dense matrix products of the
/// same epoch through `matrixmultiply` (`mlp_gemm_bound/products`; the GEMM
/// nalgebra calls for matrices this size, AVX2/FMA chosen at run time), one
/// thread. Per minibatch `B` (100 consecutive rows, not gathered), with `H` =
/// 100 hidden units: `Z = X_B Vᵀ`, `S = Z Wᵀ`, `∂T = G W`, `∂W += Gᵀ Z`, `∂V
/// += ∂Zᵀ X_B` (`G` stands in for `∂ℓ/∂S`, `∂T` for `∂Z`: no `tanh`, loss or
/// update); then the evaluation's `Z` and `S` over all rows, 4096 at a time.
/// The ratio of the two medians is how far the MLP is from the products alone.
fn mlp_gemm_bound(c: &mut Criterion) {
    let shape = Shape { seed: 3, rows: 400_000, dim: 42, classes: 8 };
    let mut group = c.benchmark_group("mlp_gemm_bound");
    group.sampling_mode(SamplingMode::Flat).sample_size(10).measurement_time(Duration::from_secs(20));
    let data = OnceCell::new();
    let data = || {
        data.get_or_init(|| {
            let data = shape.generate();
            report_fit("mlp_gemm_bound", &data, &MlpOracle::unary());
            data
        })
    };
    let oracle = MlpOracle::unary();
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a one-thread pool");
    group.bench_function(BenchmarkId::new("mlp_fit", shape.name()), |b| {
        let problem = data().problem();
        b.iter(|| one_thread.install(|| oracle.fit(&problem, None, FitContext { seed: 0 }).expect("fit succeeds")))
    });
    group.bench_function(BenchmarkId::new("products", shape.name()), |b| {
        let x = &data().features;
        b.iter(|| epoch_products(x, shape.dim, oracle.hidden, shape.classes, oracle.minibatch))
    });
    group.finish();
}

/// The matrix products of one MLP epoch and its evaluation ([`mlp_gemm_bound`]);
/// returns a value of the results so that none is optimised away.
fn epoch_products(x: &[f64], d: usize, h: usize, c: usize, batch: usize) -> f64 {
    /// `C = A B + beta C` for `A` (m × k) and `B` (k × n) given by their (row,
    /// column) strides and a row-major `C` (m × n).
    #[allow(clippy::too_many_arguments)]
    fn gemm(
        m: usize,
        k: usize,
        n: usize,
        a: &[f64],
        a_strides: (usize, usize),
        b: &[f64],
        b_strides: (usize, usize),
        beta: f64,
        out: &mut [f64],
    ) {
        assert!(a.len() > (m - 1) * a_strides.0 + (k - 1) * a_strides.1);
        assert!(b.len() > (k - 1) * b_strides.0 + (n - 1) * b_strides.1 && out.len() >= m * n);
        let s = |v: usize| isize::try_from(v).expect("stride fits isize");
        // SAFETY: the asserts above keep every element the strides reach inside the slices.
        unsafe {
            matrixmultiply::dgemm(
                m,
                k,
                n,
                1.0,
                a.as_ptr(),
                s(a_strides.0),
                s(a_strides.1),
                b.as_ptr(),
                s(b_strides.0),
                s(b_strides.1),
                beta,
                out.as_mut_ptr(),
                s(n),
                1,
            );
        }
    }
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let v: Vec<f64> = (0..h * d).map(|_| rng.random_range(-0.1..0.1)).collect();
    let w: Vec<f64> = (0..c * h).map(|_| rng.random_range(-0.1..0.1)).collect();
    let (mut z, mut s, mut dz) = (vec![0.0; batch * h], vec![0.0; batch * c], vec![0.0; batch * h]);
    let (mut dv, mut dw) = (vec![0.0; h * d], vec![0.0; c * h]);
    for xb in x.chunks_exact(batch * d) {
        gemm(batch, d, h, xb, (d, 1), &v, (1, d), 0.0, &mut z);
        gemm(batch, h, c, &z, (h, 1), &w, (1, h), 0.0, &mut s);
        gemm(batch, c, h, &s, (c, 1), &w, (h, 1), 0.0, &mut dz);
        gemm(c, batch, h, &s, (1, c), &z, (h, 1), 1.0, &mut dw);
        gemm(h, batch, d, &dz, (1, h), xb, (d, 1), 1.0, &mut dv);
    }
    const EVAL: usize = 4096;
    let (mut ze, mut se) = (vec![0.0; EVAL * h], vec![0.0; EVAL * c]);
    let mut total = 0.0;
    for xb in x.chunks(EVAL * d) {
        let m = xb.len() / d;
        gemm(m, d, h, xb, (d, 1), &v, (1, d), 0.0, &mut ze);
        gemm(m, h, c, &ze, (h, 1), &w, (1, h), 0.0, &mut se);
        total += se[0];
    }
    total + dv[0] + dw[0]
}

criterion_group!(benches, linear, mlp, boosting, mlp_gemm_bound);
criterion_main!(benches);
