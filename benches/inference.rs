//! Smoothed inference benchmarks (`cargo bench --bench inference`).
//!
//! * `star_update/*`: one message-passing iteration (`iterate`: refresh of the
//!   cached θ̃, then 2·H·W star updates, forward and reverse) on a 100×100
//!   binary grid and a 64×48 grid with 8 labels, single thread. Throughput is
//!   in star updates, so criterion's "elem/s" inverts to time per star update.
//!   `*_general` is the same with the specialised paths disabled.
//! * `star_update_cpu/*`: the same iteration timed in process CPU time
//!   (`/proc/self/stat`, Linux; wall clock elsewhere), for shared machines where
//!   wall-clock time mostly measures other processes. Flat sampling with long
//!   samples keeps the 10 ms accounting tick negligible.
//! * `batch/*`: 16 binary 100×100 examples × 25 iterations through `run_batch`
//!   on rayon pools of 1 and 2 threads.
//!
//! Potentials are random but shaped like the denoising experiment (docs/MATH.md §6.1):
//! unary scores in [−1, 1], pairwise scores favouring equal labels; ε = 0.1.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use factor_graph::RegionGraph;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use smoothed_inference::{InferenceProblem, Messages, RunOptions, Workspace, run_batch};

const EPS: f64 = 0.1;

fn potentials(g: &RegionGraph, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut theta = vec![0.0; g.total_configs()];
    for r in 0..g.num_regions() {
        let vars = g.region_variables(r);
        let labels = g.cardinality(vars[0]);
        for (c, t) in theta[g.config_range(r)].iter_mut().enumerate() {
            *t = if vars.len() == 1 {
                2.0 * rng.random::<f64>() - 1.0
            } else if c / labels == c % labels {
                rng.random::<f64>()
            } else {
                0.3 * rng.random::<f64>()
            };
        }
    }
    theta
}

/// User + system CPU time of this process (Linux `/proc/self/stat`, ticks of 10 ms).
fn process_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(10 * ticks))
}

fn bench_iterate_cpu(c: &mut Criterion, name: &str, g: &RegionGraph) {
    let theta = potentials(g, 1);
    let p = InferenceProblem::uniform(g, &theta, EPS).expect("valid problem");
    let order = g.default_update_order();
    let mut m = Messages::zeros(g);
    let mut ws = Workspace::new(g);
    let mut group = c.benchmark_group("star_update_cpu");
    group.throughput(Throughput::Elements(2 * order.len() as u64));
    group.sampling_mode(SamplingMode::Flat).sample_size(20).measurement_time(Duration::from_secs(20));
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let (cpu0, wall0) = (process_cpu_time(), Instant::now());
            for _ in 0..iters {
                p.iterate(black_box(&mut m), &order, &mut ws);
            }
            match (cpu0, process_cpu_time()) {
                (Some(a), Some(b)) => b.saturating_sub(a),
                _ => wall0.elapsed(),
            }
        })
    });
    group.finish();
}

fn bench_iterate(c: &mut Criterion, name: &str, g: &RegionGraph, fast_paths: bool) {
    let theta = potentials(g, 1);
    let p = InferenceProblem::uniform(g, &theta, EPS).expect("valid problem").with_fast_paths(fast_paths);
    let order = g.default_update_order();
    let mut m = Messages::zeros(g);
    let mut ws = Workspace::new(g);
    for _ in 0..5 {
        p.iterate(&mut m, &order, &mut ws);
    }
    let mut group = c.benchmark_group("star_update");
    group.throughput(Throughput::Elements(2 * order.len() as u64));
    group.bench_function(name, |b| b.iter(|| p.iterate(black_box(&mut m), &order, &mut ws)));
    group.finish();
}

fn star_updates(c: &mut Criterion) {
    let binary = factor_graph::grid(100, 100, 2).expect("grid");
    let labels8 = factor_graph::grid(64, 48, 8).expect("grid");
    bench_iterate(c, "binary_100x100", &binary, true);
    bench_iterate(c, "labels8_64x48", &labels8, true);
    bench_iterate(c, "binary_100x100_general", &binary, false);
    bench_iterate(c, "labels8_64x48_general", &labels8, false);
    bench_iterate_cpu(c, "binary_100x100", &binary);
    bench_iterate_cpu(c, "labels8_64x48", &labels8);
}

fn batch(c: &mut Criterion) {
    let g = factor_graph::grid(100, 100, 2).expect("grid");
    let thetas: Vec<Vec<f64>> = (0..16).map(|k| potentials(&g, 100 + k)).collect();
    let problems: Vec<InferenceProblem> =
        thetas.iter().map(|t| InferenceProblem::uniform(&g, t, EPS).expect("valid problem")).collect();
    let opts = RunOptions { iterations: 25, tolerance: None, order: None };
    let start = vec![Messages::zeros(&g); problems.len()];
    let mut group = c.benchmark_group("batch");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(20));
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("thread pool");
        group.bench_function(format!("16x100x100x25_threads{threads}"), |b| {
            b.iter_batched(
                || start.clone(),
                |mut messages| pool.install(|| run_batch(&problems, &mut messages, &opts).expect("valid batch")),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, star_updates, batch);
criterion_main!(benches);
