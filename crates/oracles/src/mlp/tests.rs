use fastmath::{Arith, Fused, Plain};
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[cfg(target_arch = "x86_64")]
use super::dispatch::Avx512;
use super::dispatch::Kernels;
#[cfg(target_arch = "x86_64")]
use super::kernels::TANH_CLAMP;
use super::kernels::tanh;
use super::layout::Layout;
use super::passes::{Rows, gradient_kernel};
use super::sgd::Sgd;
use super::*;
use crate::{
    Features, FitContext, Model, ModelRegistry, Oracle, OracleError, Problem, encode, fit_monotone, model_loss,
};

/// A random problem: features with a constant last column, random labels,
/// random biases with some −∞ entries (never on the label) if `hard`.
struct Data {
    x: Vec<f64>,
    labels: Vec<usize>,
    bias: Vec<f64>,
    weights: Vec<f64>,
    rows: usize,
    dim: usize,
    classes: usize,
}

impl Data {
    fn random(rows: usize, dim: usize, classes: usize, hard: bool, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut x = Vec::with_capacity(rows * dim);
        let mut labels = Vec::with_capacity(rows);
        let mut bias = Vec::with_capacity(rows * classes);
        for _ in 0..rows {
            for j in 0..dim {
                x.push(if j + 1 == dim { 1.0 } else { rng.random_range(-1.0..1.0) });
            }
            let label = rng.random_range(0..classes);
            labels.push(label);
            for y in 0..classes {
                let b = if hard && y != label && rng.random_bool(0.3) {
                    f64::NEG_INFINITY
                } else {
                    rng.random_range(-2.0..2.0)
                };
                bias.push(b);
            }
        }
        let weights = (0..rows).map(|_| rng.random_range(0.0..2.0)).collect();
        Self { x, labels, bias, weights, rows, dim, classes }
    }

    /// The band problem of the doc example: label 1 iff |x − 0.5| < 0.25, on (x, 1).
    fn band(rows: usize) -> Self {
        let xs: Vec<f64> = (0..rows).map(|k| k as f64 / (rows - 1) as f64).collect();
        Self {
            x: xs.iter().flat_map(|&x| [x, 1.0]).collect(),
            labels: xs.iter().map(|&x| usize::from((x - 0.5).abs() < 0.25)).collect(),
            bias: vec![0.0; 2 * rows],
            weights: vec![1.0; rows],
            rows,
            dim: 2,
            classes: 2,
        }
    }

    fn problem(&self, weighted: bool) -> Problem<'_> {
        let f = Features::new(&self.x, self.rows, self.dim).unwrap();
        let w = weighted.then_some(self.weights.as_slice());
        Problem::new(f, &self.labels, &self.bias, self.classes, w).unwrap()
    }
}

fn small_oracle() -> MlpOracle {
    MlpOracle { hidden: 6, minibatch: 16, epochs: 3, ..MlpOracle::unary() }
}

fn fit(oracle: &MlpOracle, problem: &Problem<'_>, warm: Option<&dyn Model>, seed: u64) -> Box<dyn Model> {
    oracle.fit(problem, warm, FitContext { seed }).unwrap()
}

fn as_mlp(model: &dyn Model) -> &MlpModel {
    model.as_any().downcast_ref::<MlpModel>().unwrap()
}

/// The analytic gradient of the full loss against central differences.
fn check_gradient(data: &Data, biases: bool, weighted: bool) {
    let problem = data.problem(weighted);
    let layout = Layout { dim: data.dim, hidden: 5, classes: data.classes, biases };
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut params = layout.init(1.0, &mut rng);
    for p in &mut params {
        *p += rng.random_range(-0.5..0.5);
    }
    // Several chunks of 3 rows (each a short, padded block), to exercise the reduction.
    let mut sgd = Sgd::with_chunk_rows(layout, data.rows, &problem, 3);
    let rows: Vec<usize> = (0..data.rows).collect();
    sgd.gradient(&layout.pack(&params), &problem, &rows, &[], 1.0);
    let packed = &sgd.grads[..layout.packed_len()];
    let analytic = layout.unpack(packed);
    // The padding hidden units receive no gradient.
    let mut used = vec![false; packed.len()];
    layout.for_each_index(|_, k| used[k] = true);
    assert!(packed.iter().zip(&used).all(|(g, &u)| u || *g == 0.0));
    let h = 1e-6;
    for i in 0..layout.len() {
        let mut p = params.clone();
        p[i] += h;
        let up = layout.loss(&layout.pack(&p), &problem);
        p[i] -= 2.0 * h;
        let down = layout.loss(&layout.pack(&p), &problem);
        let numeric = (up - down) / (2.0 * h);
        let err = (numeric - analytic[i]).abs();
        assert!(err <= 1e-6 * (1.0 + numeric.abs()), "parameter {i}: analytic {} numeric {numeric}", analytic[i]);
    }
}

#[test]
fn mlp_tanh_matches_std() {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let mut xs: Vec<f64> = (0..100_000).map(|_| rng.random_range(-25.0..25.0)).collect();
    xs.extend((0..100_000).map(|_| rng.random_range(-1.0..1.0) * 10f64.powi(rng.random_range(-20..0))));
    xs.extend([0.0, -0.0, 1e-300, -1e-300, 19.999, 20.0, 20.001, -40.0, 1e300, -1e300, f64::MAX, f64::MIN]);
    for x in xs {
        let exact = x.tanh();
        for (fast, kind) in [(tanh::<Plain>(x), "plain"), (tanh::<Fused>(x), "fused")] {
            assert!((fast - exact).abs() <= 4e-16, "{kind} tanh({x}) = {fast}, std {exact}");
            assert_eq!(fast.is_sign_negative(), exact.is_sign_negative(), "sign of {kind} tanh({x})");
            assert!(fast.abs() <= 1.0);
        }
    }
}

/// The minibatch gradient of the documented arithmetic, written plainly:
/// rows in order, chunk by chunk (each chunk's sums from zero, the chunks'
/// sums added in order), the bias gradients summed per block of `BLOCK`
/// rows first (padding rows count as zeros), every product added to its sum
/// by `A::madd`. Model layout.
fn plain_gradient<A: Arith>(
    layout: Layout,
    p: &[f64],
    problem: &Problem<'_>,
    rows: &[usize],
    chunk_rows: usize,
    scale: f64,
) -> Vec<f64> {
    let (d, h, c) = (layout.dim, layout.hidden, layout.classes);
    let (v, hb, w, a) = (&p[layout.v()], &p[layout.hidden_bias()], &p[layout.w()], &p[layout.output_bias()]);
    let mut total = vec![0.0; layout.len()];
    for chunk in rows.chunks(chunk_rows) {
        let mut part = vec![0.0; layout.len()];
        for block in chunk.chunks(BLOCK) {
            let (mut a_lanes, mut c_lanes) = (vec![[0.0; BLOCK]; c], vec![[0.0; BLOCK]; h]);
            for (r, &k) in block.iter().enumerate() {
                let x = problem.features().row(k);
                let t: Vec<f64> = (0..h)
                    .map(|j| {
                        let mut z = hb.get(j).copied().unwrap_or(0.0);
                        for i in 0..d {
                            z = A::madd(v[i * h + j], x[i], z);
                        }
                        tanh::<A>(z)
                    })
                    .collect();
                let s: Vec<f64> = (0..c)
                    .map(|y| {
                        let mut s = a.get(y).copied().unwrap_or(0.0);
                        for j in 0..h {
                            s = A::madd(w[y * h + j], t[j], s);
                        }
                        s
                    })
                    .collect();
                let mut g = vec![0.0; c];
                let mut bias = vec![0.0; c];
                let bias = problem.bias_row(k, &mut bias);
                crate::row_loss(&s, bias, problem.labels()[k], problem.weight(k) * scale, Some(&mut g));
                for y in 0..c {
                    a_lanes[y][r] = g[y];
                    for j in 0..h {
                        let e = &mut part[layout.w().start + y * h + j];
                        *e = A::madd(t[j], g[y], *e);
                    }
                }
                for j in 0..h {
                    let mut dz = 0.0;
                    for y in 0..c {
                        dz = A::madd(w[y * h + j], g[y], dz);
                    }
                    dz *= 1.0 - t[j] * t[j];
                    c_lanes[j][r] = dz;
                    for i in 0..d {
                        part[i * h + j] = A::madd(x[i], dz, part[i * h + j]);
                    }
                }
            }
            if layout.biases {
                for (y, lanes) in a_lanes.iter().enumerate() {
                    part[layout.output_bias().start + y] += lanes.iter().sum::<f64>();
                }
                for (j, lanes) in c_lanes.iter().enumerate() {
                    part[layout.hidden_bias().start + j] += lanes.iter().sum::<f64>();
                }
            }
        }
        for (t, q) in total.iter_mut().zip(&part) {
            *t += q;
        }
    }
    total
}

/// The blocked kernels compute exactly [`plain_gradient`]'s arithmetic (with
/// fused multiply-adds where the kernels use them): bit for bit, whatever the chunk size, class tiles (6 classes: a tile and two
/// single classes), padded hidden units, biases and weights.
#[test]
fn mlp_gradient_is_the_plain_arithmetic_bit_for_bit() {
    for (dim, hidden, classes, rows, chunk_rows, seed) in [
        (3, 5, 6, 37, 3, 1),
        (7, 9, 8, 50, 12, 2),
        (42, 17, 2, 61, 13, 3),
        (1, 4, 4, 9, 40, 4),
        (42, 100, 8, 70, 16, 5),
    ] {
        let data = Data::random(rows, dim, classes, true, seed);
        for (biases, weighted) in [(false, false), (true, true)] {
            let problem = data.problem(weighted);
            let layout = Layout { dim, hidden, classes, biases };
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut params = layout.init(1.0, &mut rng);
            for p in &mut params {
                *p += rng.random_range(-0.5..0.5);
            }
            let mut order: Vec<usize> = (0..rows).collect();
            order.shuffle(&mut rng);
            let mut sgd = Sgd::with_chunk_rows(layout, rows, &problem, chunk_rows);
            // Prefetching rows (some of them its own) changes nothing.
            sgd.gradient(&layout.pack(&params), &problem, &order, &order[rows / 3..], 0.37);
            let kernel = layout.unpack(&sgd.grads[..layout.packed_len()]);
            let plain = if fused_arithmetic() {
                plain_gradient::<Fused>(layout, &params, &problem, &order, chunk_rows, 0.37)
            } else {
                plain_gradient::<Plain>(layout, &params, &problem, &order, chunk_rows, 0.37)
            };
            for (i, (k, p)) in kernel.iter().zip(&plain).enumerate() {
                assert_eq!(k.to_bits(), p.to_bits(), "{dim}×{hidden}×{classes}, parameter {i}: {k} vs {p}");
            }
            // Every build of the kernels, whichever the CPU runs (one chunk of all rows).
            fn one_chunk<K: Kernels>(
                layout: Layout,
                p: &[f64],
                problem: &Problem<'_>,
                order: &[usize],
            ) -> [Vec<f64>; 2] {
                let mut block = Rows::new(layout, order.len());
                let mut grad = vec![0.0; layout.packed_len()];
                let (q, scale) = (layout.pack(p), 0.37);
                gradient_kernel::<K>(
                    &layout.net(&q),
                    problem,
                    order,
                    &[],
                    scale,
                    &mut block,
                    &mut layout.net_mut(&mut grad),
                );
                [layout.unpack(&grad), plain_gradient::<K::A>(layout, p, problem, order, order.len(), scale)]
            }
            let mut builds = vec![
                ("plain", one_chunk::<Plain>(layout, &params, &problem, &order)),
                ("fused", one_chunk::<Fused>(layout, &params, &problem, &order)),
            ];
            #[cfg(target_arch = "x86_64")]
            if fastmath::x86::avx512() {
                builds.push(("avx512", one_chunk::<Avx512>(layout, &params, &problem, &order)));
            }
            for (build, [kernel, plain]) in builds {
                for (i, (k, p)) in kernel.iter().zip(&plain).enumerate() {
                    assert_eq!(k.to_bits(), p.to_bits(), "{build}, {dim}×{hidden}×{classes}, parameter {i}");
                }
            }
        }
    }
}

/// The AVX-512 `tanh` gives the portable one's bits on every kind of value
/// (NaN, ±∞, ±0, subnormals, beyond the clamp, the rounding edges) and
/// every length of a slice's masked remainder; the products are checked
/// by `mlp_gradient_is_the_plain_arithmetic_bit_for_bit`.
#[cfg(target_arch = "x86_64")]
#[test]
fn mlp_wide_kernels_are_the_portable_ones_bit_for_bit() {
    if !fastmath::x86::avx512() {
        eprintln!("no AVX-512 F on this CPU: nothing to compare");
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut values = vec![
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        f64::MIN_POSITIVE / 8.0,
        -f64::MIN_POSITIVE,
        1e-300,
        TANH_CLAMP,
        -TANH_CLAMP,
        TANH_CLAMP.next_up(),
        19.06,
        0.5 * std::f64::consts::LN_2,
        f64::MAX,
    ];
    for _ in 0..4000 {
        let scale: f64 = [1e-8, 0.1, 1.0, 4.0, 30.0][rng.random_range(0..5)];
        values.push(rng.random_range(-1.0..1.0) * scale);
    }
    for len in [0, 1, 7, 8, 9, 15, 16, 23, values.len()] {
        let mut wide = values[..len].to_vec();
        Avx512::tanh_slice(&mut wide);
        for (&x, w) in values.iter().zip(&wide) {
            let portable = tanh::<Fused>(x);
            assert_eq!(w.to_bits(), portable.to_bits(), "tanh({x:e}): {w:e} vs {portable:e} (length {len})");
        }
    }
}

#[test]
fn mlp_gradient_matches_finite_differences() {
    let data = Data::random(20, 3, 3, false, 1);
    check_gradient(&data, false, false);
    check_gradient(&data, true, true);
}

#[test]
fn mlp_gradient_matches_finite_differences_with_neg_inf_bias() {
    let data = Data::random(20, 3, 5, true, 2);
    assert!(data.bias.contains(&f64::NEG_INFINITY));
    check_gradient(&data, false, true);
    check_gradient(&data, true, false);
}

#[test]
fn mlp_warm_start_never_increases_loss() {
    let data = Data::random(300, 3, 3, true, 3);
    let problem = data.problem(true);
    // A step size this large makes SGD diverge: the fit must fall back to the warm start.
    let wild = MlpOracle { step_size: 1e4, ..small_oracle() };
    let tame = small_oracle();
    let mut model = fit(&tame, &problem, None, 0);
    let mut loss = model_loss(model.as_ref(), &problem).unwrap();
    for round in 1..6 {
        let oracle = if round % 2 == 0 { &wild } else { &tame };
        let next = fit(oracle, &problem, Some(model.as_ref()), round);
        let next_loss = model_loss(next.as_ref(), &problem).unwrap();
        assert!(next_loss <= loss, "round {round}: {next_loss} > {loss}");
        if oracle == &wild {
            assert_eq!(as_mlp(next.as_ref()), as_mlp(model.as_ref()), "a diverged fit must return the warm start");
        }
        model = next;
        loss = next_loss;
    }
    let monotone = fit_monotone(&wild, &problem, Some(model.as_ref()), FitContext { seed: 9 }).unwrap();
    assert!(!monotone.rejected);
    assert_eq!(monotone.previous_loss, Some(monotone.loss));
}

#[test]
fn mlp_halved_steps_find_progress_where_the_fixed_step_finds_none() {
    let data = Data::random(300, 3, 3, true, 3);
    let problem = data.problem(true);
    let tame = small_oracle();
    let warm = fit(&tame, &problem, None, 0);
    let warm_loss = model_loss(warm.as_ref(), &problem).unwrap();
    // At step 1e4 every epoch diverges: without halvings the call returns its warm start…
    let wild = MlpOracle { step_size: 1e4, ..small_oracle() };
    let stuck = fit(&wild, &problem, Some(warm.as_ref()), 1);
    assert_eq!(as_mlp(stuck.as_ref()), as_mlp(warm.as_ref()));
    // …with enough halvings (1e4 / 2^16 ≈ 0.15) it reaches a step that lowers the loss.
    let halving = MlpOracle { step_halvings: 20, ..wild.clone() };
    let moved = fit(&halving, &problem, Some(warm.as_ref()), 1);
    let moved_loss = model_loss(moved.as_ref(), &problem).unwrap();
    assert!(moved_loss < warm_loss, "{moved_loss} !< {warm_loss}");
    // Too few halvings to get there: still the warm start.
    let few = fit(&MlpOracle { step_halvings: 3, ..wild }, &problem, Some(warm.as_ref()), 1);
    assert_eq!(as_mlp(few.as_ref()), as_mlp(warm.as_ref()));
    // A call whose first attempt improves is the same with or without halvings, bit for bit,
    // and a cold start is never retried.
    let with = MlpOracle { step_halvings: 5, ..tame.clone() };
    assert_eq!(as_mlp(fit(&with, &problem, None, 4).as_ref()), as_mlp(fit(&tame, &problem, None, 4).as_ref()));
    let first = fit(&tame, &problem, Some(warm.as_ref()), 2);
    assert!(model_loss(first.as_ref(), &problem).unwrap() < warm_loss);
    assert_eq!(as_mlp(fit(&with, &problem, Some(warm.as_ref()), 2).as_ref()), as_mlp(first.as_ref()));
}

/// With kept scores the fit returns the model `fit` returns, bit for bit,
/// leaves its scores (`Model::score`'s bits) and reports the losses
/// `model_loss` gives: for a cold start, an improving warm start, a warm
/// start whose every epoch diverges (the warm start comes back) and one
/// rescued by halved steps.
#[test]
fn mlp_kept_scores_give_the_plain_fit_its_scores_and_losses() {
    let data = Data::random(300, 3, 3, true, 3);
    let problem = data.problem(true);
    let tame = small_oracle();
    let warm = fit(&tame, &problem, None, 0);
    let wild = MlpOracle { step_size: 1e4, ..small_oracle() };
    let rescued = MlpOracle { step_halvings: 20, ..wild.clone() };
    let two_epochs = MlpOracle { epochs: 2, ..small_oracle() };
    let cases: [(&MlpOracle, Option<&dyn Model>); 5] = [
        (&tame, None),
        (&tame, Some(warm.as_ref())),
        (&wild, Some(warm.as_ref())),
        (&rescued, Some(warm.as_ref())),
        (&two_epochs, Some(warm.as_ref())),
    ];
    let c = problem.classes();
    for (i, (oracle, start)) in cases.into_iter().enumerate() {
        let plain = fit(oracle, &problem, start, 7);
        let mut scores = vec![0.0; problem.rows() * c];
        if let Some(w) = start {
            w.score(problem.features(), &mut scores).unwrap();
        }
        let (kept, losses) = oracle.fit_scored(&problem, start, FitContext { seed: 7 }, &mut scores).unwrap();
        assert_eq!(as_mlp(kept.as_ref()), as_mlp(plain.as_ref()), "case {i}: model");
        let mut direct = vec![0.0; problem.rows() * c];
        plain.score(problem.features(), &mut direct).unwrap();
        assert!(scores.iter().zip(&direct).all(|(a, b)| a.to_bits() == b.to_bits()), "case {i}: scores");
        let loss = model_loss(plain.as_ref(), &problem).unwrap();
        assert_eq!(losses.loss.map(f64::to_bits), Some(loss.to_bits()), "case {i}: loss");
        let warm_loss = start.map(|w| model_loss(w, &problem).unwrap().to_bits());
        assert_eq!(losses.warm_loss.map(f64::to_bits), warm_loss, "case {i}: warm loss");
        let (_, without) = oracle.fit_with_losses(&problem, start, FitContext { seed: 7 }).unwrap();
        assert_eq!(without, losses, "case {i}: fit_with_losses");
    }
}

#[test]
fn mlp_seed_determines_the_model() {
    let data = Data::random(200, 4, 3, false, 4);
    let problem = data.problem(false);
    let oracle = MlpOracle { minibatch: 64, ..small_oracle() };
    let a = fit(&oracle, &problem, None, 11);
    let b = fit(&oracle, &problem, None, 11);
    let c = fit(&oracle, &problem, None, 12);
    assert_eq!(as_mlp(a.as_ref()), as_mlp(b.as_ref()));
    assert_ne!(as_mlp(a.as_ref()), as_mlp(c.as_ref()));
    // Identical on a single thread: the parallel reduction is deterministic.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let d = pool.install(|| fit(&oracle, &problem, None, 11));
    assert_eq!(as_mlp(a.as_ref()), as_mlp(d.as_ref()));
    // The same for a warm start.
    let e = fit(&oracle, &problem, Some(a.as_ref()), 5);
    let f = pool.install(|| fit(&oracle, &problem, Some(a.as_ref()), 5));
    assert_eq!(as_mlp(e.as_ref()), as_mlp(f.as_ref()));
}

#[test]
fn mlp_neg_inf_bias_never_gives_nan() {
    let data = Data::random(200, 3, 4, true, 5);
    let problem = data.problem(false);
    let model = fit(&MlpOracle { biases: true, ..small_oracle() }, &problem, None, 0);
    let mut scores = vec![0.0; data.rows * data.classes];
    model.score(problem.features(), &mut scores).unwrap();
    assert!(scores.iter().all(|s| s.is_finite()));
    assert!(as_mlp(model.as_ref()).params.iter().all(|p| p.is_finite()));
    assert!(model_loss(model.as_ref(), &problem).unwrap().is_finite());
}

#[test]
fn mlp_learns_a_band_a_linear_model_cannot() {
    let data = Data::band(400);
    let problem = data.problem(false);
    let oracle = MlpOracle { hidden: 20, minibatch: 20, epochs: 60, ..MlpOracle::unary() };
    let model = fit(&oracle, &problem, None, 3);
    let loss = model_loss(model.as_ref(), &problem).unwrap() / data.rows as f64;
    // The best linear model on (x, 1) predicts the base rate: mean loss ≈ ln 2 ≈ 0.69.
    assert!(loss < 0.1, "mean loss {loss}");
    let mut scores = vec![0.0; 2 * data.rows];
    model.score(problem.features(), &mut scores).unwrap();
    let errors = (0..data.rows).filter(|&k| usize::from(scores[2 * k + 1] > scores[2 * k]) != data.labels[k]).count();
    assert!(errors <= data.rows / 50, "{errors} errors");
}

#[test]
fn mlp_roundtrips_through_the_registry() {
    let data = Data::random(100, 3, 5, false, 6);
    let problem = data.problem(false);
    for biases in [false, true] {
        let model = fit(&MlpOracle { biases, ..small_oracle() }, &problem, None, 1);
        let loaded = ModelRegistry::with_builtin().load(KIND, &model.to_bytes().unwrap()).unwrap();
        assert_eq!(loaded.kind(), KIND);
        let mut a = vec![0.0; data.rows * data.classes];
        let mut b = vec![1.0; data.rows * data.classes];
        model.score(problem.features(), &mut a).unwrap();
        loaded.score(problem.features(), &mut b).unwrap();
        assert_eq!(a, b);
        assert_eq!(as_mlp(loaded.as_ref()).hidden_bias().len(), if biases { 6 } else { 0 });
    }
}

#[test]
fn mlp_json_export_has_the_weights() {
    let data = Data::random(50, 3, 5, false, 12);
    let model = fit(&MlpOracle { biases: true, ..small_oracle() }, &data.problem(false), None, 1);
    let m = as_mlp(model.as_ref());
    let json = model.to_json().unwrap();
    assert_eq!(json["hidden"], 6);
    assert_eq!(json["V"].as_array().unwrap().len(), 6);
    assert_eq!(json["V"][4][2].as_f64().unwrap(), m.input_weights()[2 * 6 + 4]);
    assert_eq!(json["W"][3][5].as_f64().unwrap(), m.output_weights()[3 * 6 + 5]);
    assert_eq!(json["a"].as_array().unwrap().len(), 5);
}

#[test]
fn mlp_scores_do_not_depend_on_the_block() {
    let data = Data::random(23, 3, 5, false, 13);
    let problem = data.problem(false);
    let model = fit(&MlpOracle { biases: true, ..small_oracle() }, &problem, None, 1);
    let mut all = vec![0.0; 23 * 5];
    model.score(problem.features(), &mut all).unwrap();
    for start in 1..2 * BLOCK + 1 {
        let part = problem.features().slice_rows(start, 23);
        let mut scores = vec![0.0; (23 - start) * 5];
        model.score(part, &mut scores).unwrap();
        assert_eq!(scores, all[start * 5..]);
    }
}

#[test]
fn mlp_load_rejects_inconsistent_bytes() {
    let bad = MlpModel { layout: Layout { dim: 2, hidden: 3, classes: 2, biases: false }, params: vec![0.0; 5] };
    let bytes = encode(KIND, &bad).unwrap();
    assert!(matches!(load(&bytes), Err(OracleError::InvalidModel { .. })));
    let huge = MlpModel { layout: Layout { dim: usize::MAX, hidden: 3, classes: 2, biases: true }, params: vec![] };
    assert!(matches!(load(&encode(KIND, &huge).unwrap()), Err(OracleError::InvalidModel { .. })));
    assert!(matches!(load(&[1, 2, 3]), Err(OracleError::Codec { .. })));
}

#[test]
fn mlp_invalid_hyper_parameters_are_typed_errors() {
    let data = Data::random(10, 2, 2, false, 7);
    let problem = data.problem(false);
    let cases: [(&str, MlpOracle); 9] = [
        ("hidden", MlpOracle { hidden: 0, ..MlpOracle::unary() }),
        ("step_size", MlpOracle { step_size: 0.0, ..MlpOracle::unary() }),
        ("step_size", MlpOracle { step_size: f64::NAN, ..MlpOracle::unary() }),
        ("momentum", MlpOracle { momentum: 1.0, ..MlpOracle::unary() }),
        ("momentum", MlpOracle { momentum: -0.1, ..MlpOracle::unary() }),
        ("minibatch", MlpOracle { minibatch: 0, ..MlpOracle::unary() }),
        ("epochs", MlpOracle { epochs: 0, ..MlpOracle::unary() }),
        ("init_scale", MlpOracle { init_scale: f64::INFINITY, ..MlpOracle::unary() }),
        ("step_halvings", MlpOracle { step_halvings: usize::MAX, ..MlpOracle::unary() }),
    ];
    for (expected, oracle) in cases {
        for err in [oracle.validate().unwrap_err(), oracle.fit(&problem, None, FitContext { seed: 0 }).unwrap_err()] {
            assert!(
                matches!(err, OracleError::InvalidHyperParameter { name, .. } if name == expected),
                "{expected}: {err}"
            );
        }
    }
    assert!(MlpOracle::unary().validate().is_ok());
    assert!(MlpOracle::pairwise().validate().is_ok());
}

#[test]
fn mlp_shape_mismatches_are_typed_errors() {
    let data = Data::random(30, 3, 3, false, 8);
    let problem = data.problem(false);
    let model = fit(&small_oracle(), &problem, None, 0);

    let other = Data::random(30, 4, 3, false, 8);
    let err = small_oracle().fit(&other.problem(false), Some(model.as_ref()), FitContext { seed: 0 }).unwrap_err();
    assert!(matches!(err, OracleError::ModelMismatch { model_dim: 3, dim: 4, .. }), "{err}");
    let mut out = vec![0.0; 30 * 3];
    assert!(matches!(model.score(other.problem(false).features(), &mut out), Err(OracleError::ModelMismatch { .. })));
    let mut short = vec![0.0; 30 * 3 - 1];
    assert!(matches!(
        model.score(problem.features(), &mut short),
        Err(OracleError::OutputShape { got: 89, expected: 90 })
    ));

    let wider = MlpOracle { hidden: 7, ..small_oracle() };
    let err = wider.fit(&problem, Some(model.as_ref()), FitContext { seed: 0 }).unwrap_err();
    assert!(matches!(err, OracleError::InvalidHyperParameter { name: "hidden", .. }), "{err}");
    let with_biases = MlpOracle { biases: true, ..small_oracle() };
    let err = with_biases.fit(&problem, Some(model.as_ref()), FitContext { seed: 0 }).unwrap_err();
    assert!(matches!(err, OracleError::InvalidHyperParameter { name: "biases", .. }), "{err}");

    let zero = crate::zero::ZeroModel { dim: 3, classes: 3 };
    let err = small_oracle().fit(&problem, Some(&zero), FitContext { seed: 0 }).unwrap_err();
    assert!(matches!(err, OracleError::WrongModelKind { .. }), "{err}");
}

#[test]
fn mlp_loss_matches_model_loss_exactly() {
    let data = Data::random(9000, 3, 5, true, 9);
    let problem = data.problem(true);
    let model = fit(&small_oracle(), &problem, None, 2);
    let m = as_mlp(model.as_ref());
    assert_eq!(m.layout.loss(&m.layout.pack(&m.params), &problem), model_loss(model.as_ref(), &problem).unwrap());
}

#[test]
fn mlp_zero_weights_return_the_start() {
    let data = Data::random(50, 3, 3, false, 10);
    let zeros = vec![0.0; data.rows];
    let f = Features::new(&data.x, data.rows, data.dim).unwrap();
    let problem = Problem::new(f, &data.labels, &data.bias, data.classes, Some(&zeros)).unwrap();
    let model = fit(&small_oracle(), &problem, None, 0);
    assert_eq!(model_loss(model.as_ref(), &problem).unwrap(), 0.0);
    assert!(as_mlp(model.as_ref()).output_weights().iter().all(|w| *w == 0.0));
}
