use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::zero::ZeroModel;
use crate::{Features, ModelRegistry, fit_monotone, fit_monotone_scored, logistic_loss, model_loss};

/// Rows with features `[U(0,1), 1.0, U(0,1), …]` (a constant column on purpose),
/// labels mostly `⌊C·x₀⌋` with 20% noise, and random biases (`−∞` on some
/// non-label classes when `impossible`).
struct Data {
    x: Vec<f64>,
    labels: Vec<usize>,
    bias: Vec<f64>,
    n: usize,
    d: usize,
    c: usize,
}

impl Data {
    fn new(n: usize, d: usize, c: usize, seed: u64, impossible: bool) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut x = Vec::with_capacity(n * d);
        let mut labels = Vec::with_capacity(n);
        let mut bias = Vec::with_capacity(n * c);
        for _ in 0..n {
            let x0: f64 = rng.random();
            x.push(x0);
            for f in 1..d {
                x.push(if f == 1 { 1.0 } else { rng.random() });
            }
            let label =
                if rng.random::<f64>() < 0.2 { rng.random_range(0..c) } else { ((x0 * c as f64) as usize).min(c - 1) };
            labels.push(label);
            for y in 0..c {
                let b = rng.random_range(-1.0..1.0);
                bias.push(if impossible && y != label && rng.random::<f64>() < 0.3 { f64::NEG_INFINITY } else { b });
            }
        }
        Self { x, labels, bias, n, d, c }
    }

    fn problem(&self) -> Problem<'_> {
        Problem::new(Features::new(&self.x, self.n, self.d).unwrap(), &self.labels, &self.bias, self.c, None).unwrap()
    }
}

fn full(rounds: usize) -> BoostingOracle {
    BoostingOracle { rounds, subsample: usize::MAX, ..Default::default() }
}

/// Training loss after every round of one fit call.
fn losses(oracle: &BoostingOracle, p: &Problem<'_>, warm: Option<&BoostingModel>, seed: u64) -> Vec<f64> {
    let mut out = Vec::new();
    oracle.fit_observed(p, warm, FitContext { seed }, &mut |r| out.push(logistic_loss(p, r.scores, None))).unwrap();
    out
}

fn zero_loss(p: &Problem<'_>) -> f64 {
    logistic_loss(p, &vec![0.0; p.rows() * p.classes()], None)
}

#[test]
fn training_loss_decreases_every_round_on_the_full_problem() {
    let data = Data::new(2000, 4, 3, 1, false);
    let p = data.problem();
    let l = losses(&full(15), &p, None, 7);
    let start = zero_loss(&p);
    assert!(l[0] < start, "first round {} vs {start}", l[0]);
    for w in l.windows(2) {
        assert!(w[1] <= w[0], "loss rose from {} to {}", w[0], w[1]);
    }
    assert!(l[14] < 0.85 * start, "only {start} -> {}", l[14]);
}

#[test]
fn subsample_loss_never_increases_and_training_loss_falls_with_subsampling() {
    let data = Data::new(3000, 4, 3, 2, false);
    let p = data.problem();
    let oracle = BoostingOracle { rounds: 20, subsample: 400, ..Default::default() };
    let mut reports = Vec::new();
    oracle
        .fit_observed(&p, None, FitContext { seed: 3 }, &mut |r| {
            reports.push((r.subsample_rows, r.subsample_loss_before, r.subsample_loss_after));
            assert!(r.scores.iter().all(|s| s.is_finite()));
        })
        .unwrap();
    for &(rows, before, after) in &reports {
        assert_eq!(rows, 400);
        assert!(after <= before, "subsample loss rose from {before} to {after}");
    }
    let model = oracle.fit_observed(&p, None, FitContext { seed: 3 }, &mut |_| {}).unwrap();
    assert!(model_loss(&model, &p).unwrap() < 0.9 * zero_loss(&p));
}

#[test]
fn lbfgs_leaf_refit_beats_newton_leaves() {
    let data = Data::new(2000, 4, 4, 4, false);
    let p = data.problem();
    // ν = 1 and a negligible ridge: the re-fit minimises the round's loss over the
    // leaf values of the same tree, so it must beat the one-step Newton leaves,
    // from the empty ensemble and from warm starts alike.
    let one_step = BoostingOracle { shrinkage: 1.0, leaf_l2: 1e-6, ..full(1) };
    let mut warm: Option<BoostingModel> = None;
    for call in 0..3 {
        let ctx = FitContext { seed: call };
        let grow = |leaf_values| {
            let oracle = BoostingOracle { leaf_values, ..one_step };
            let mut scores = vec![0.0; p.rows() * p.classes()];
            let start = oracle.start(&p, warm.as_ref(), &mut scores, true).unwrap();
            oracle.boost(&p, start, &mut scores, ctx, None).unwrap()
        };
        let (refit, newton) = (grow(LeafValues::Refit), grow(LeafValues::Newton));
        assert_eq!(refit.feature, newton.feature, "same splits");
        let (lr, ln) = (model_loss(&refit, &p).unwrap(), model_loss(&newton, &p).unwrap());
        assert!(lr < ln - 1e-3 * ln, "call {call}: re-fit {lr} vs Newton {ln}");
        warm = Some(full(3).fit_observed(&p, warm.as_ref(), ctx, &mut |_| {}).unwrap());
    }
}

#[test]
fn warm_start_continues_the_ensemble_and_never_increases_the_loss() {
    let data = Data::new(2000, 3, 3, 6, false);
    let p = data.problem();
    let oracle = full(5);
    let first = oracle.fit_observed(&p, None, FitContext { seed: 1 }, &mut |_| {}).unwrap();
    let before = model_loss(&first, &p).unwrap();
    let l = losses(&oracle, &p, Some(&first), 2);
    assert!(l.iter().all(|&x| x <= before), "{before} then {l:?}");
    let second = oracle.fit(&p, Some(&first), FitContext { seed: 2 }).unwrap();
    let second = second.as_any().downcast_ref::<BoostingModel>().unwrap();
    assert_eq!(second.trees(), 10);
    let nodes = first.feature.len();
    let leaves = first.leaf_values.len();
    assert_eq!(second.feature[..nodes], first.feature[..]);
    assert_eq!(second.threshold[..nodes], first.threshold[..]);
    assert_eq!(second.leaf_values[..leaves], first.leaf_values[..]);
    assert_eq!(model_loss(second, &p).unwrap(), *l.last().unwrap());
    let fit = fit_monotone(&oracle, &p, Some(second), FitContext { seed: 3 }).unwrap();
    assert!(!fit.rejected && fit.loss <= fit.previous_loss.unwrap());
}

#[test]
fn same_seed_gives_the_same_model_and_another_seed_another_subsample() {
    let data = Data::new(3000, 4, 3, 8, false);
    let p = data.problem();
    let oracle = BoostingOracle { rounds: 4, subsample: 500, ..Default::default() };
    let fit = |seed, threads| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| oracle.fit_observed(&p, None, FitContext { seed }, &mut |_| {}).unwrap())
    };
    let a = fit(11, 1);
    assert_eq!(a, fit(11, 2), "thread count must not change the model");
    assert_ne!(a, fit(12, 1));

    let draw = |seed| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut out = Vec::new();
        draw_subsample(&mut rng, 3000, 500, &mut out);
        out
    };
    let (s11, s12) = (draw(11), draw(12));
    assert_eq!(s11, draw(11));
    assert_ne!(s11, s12);
    assert_eq!(s11.len(), 500);
    assert!(s11.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
}

#[test]
fn negative_infinite_biases_never_produce_nan() {
    let mut data = Data::new(1500, 3, 4, 9, true);
    // Class 3 impossible for every row whose label is not 3.
    for k in 0..data.n {
        if data.labels[k] != 3 {
            data.bias[k * 4 + 3] = f64::NEG_INFINITY;
        }
    }
    let p = data.problem();
    for oracle in [full(8), BoostingOracle { rounds: 8, subsample: 300, ..Default::default() }] {
        let mut all_finite = true;
        let model = oracle
            .fit_observed(&p, None, FitContext { seed: 1 }, &mut |r| {
                all_finite &= r.scores.iter().all(|s| s.is_finite());
                all_finite &= r.subsample_loss_after.is_finite();
            })
            .unwrap();
        assert!(all_finite);
        assert!(model.leaf_values.iter().all(|v| v.is_finite()));
        let loss = model_loss(&model, &p).unwrap();
        assert!(loss.is_finite() && loss < zero_loss(&p));
    }
}

#[test]
fn leaves_respect_the_split_constraints() {
    let data = Data::new(3000, 5, 3, 10, false);
    let p = data.problem();
    let oracle = BoostingOracle {
        rounds: 6,
        subsample: 1000,
        min_child_fraction: 0.05,
        min_split_fraction: 0.12,
        ..Default::default()
    };
    let model = oracle.fit_observed(&p, None, FitContext { seed: 2 }, &mut |_| {}).unwrap();
    for t in 0..model.trees() {
        let rows = model.tree_leaf_rows(t).unwrap();
        assert!(rows.len() > 1, "tree {t} did not split");
        assert!(rows.iter().all(|&r| r >= 50), "tree {t}: {rows:?}");
        assert_eq!(rows.iter().sum::<u32>(), 1000);
        // Every internal node held at least min_split = 120 rows.
        let (n0, l0) = (model.node_offsets[t] as usize, model.leaf_offsets[t] as usize);
        let n1 = model.node_offsets[t + 1] as usize;
        let subtree = |node: i32| {
            let mut stack = vec![node];
            let mut sum = 0;
            while let Some(c) = stack.pop() {
                if c < 0 {
                    sum += model.leaf_rows[l0 + !c as usize];
                } else {
                    stack.extend([model.left[n0 + c as usize], model.right[n0 + c as usize]]);
                }
            }
            sum
        };
        for node in 0..(n1 - n0) as i32 {
            assert!(subtree(node) >= 120, "tree {t} node {node}");
        }
    }
    let limited = BoostingOracle { max_depth: Some(2), ..oracle };
    let model = limited.fit_observed(&p, None, FitContext { seed: 2 }, &mut |_| {}).unwrap();
    assert!((0..model.trees()).all(|t| model.tree_leaves(t).unwrap() <= 4));
    let limited = BoostingOracle { max_leaves: Some(3), ..oracle };
    let model = limited.fit_observed(&p, None, FitContext { seed: 2 }, &mut |_| {}).unwrap();
    assert!((0..model.trees()).all(|t| model.tree_leaves(t).unwrap() == 3));
}

#[test]
fn a_problem_one_tree_can_solve_reaches_a_low_loss() {
    // Labels are a step function of an integer feature; also a constant and a noise feature.
    let n = 1200;
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut x = Vec::new();
    let mut labels = Vec::new();
    for k in 0..n {
        let v = (k % 20) as f64;
        x.extend([rng.random::<f64>(), 1.0, v]);
        labels.push(if v < 5.0 {
            0
        } else if v <= 11.0 {
            1
        } else {
            2
        });
    }
    let bias = vec![0.0; n * 3];
    let p = Problem::new(Features::new(&x, n, 3).unwrap(), &labels, &bias, 3, None).unwrap();
    let oracle = BoostingOracle { leaf_l2: 1.0, ..full(30) };
    let model = oracle.fit_observed(&p, None, FitContext { seed: 0 }, &mut |_| {}).unwrap();
    let loss = model_loss(&model, &p).unwrap() / n as f64;
    assert!(loss < 1e-3, "mean loss {loss}");
    let mut scores = vec![0.0; n * 3];
    model.score(p.features(), &mut scores).unwrap();
    for (k, s) in scores.chunks(3).enumerate() {
        let best = (0..3).max_by(|&a, &b| s[a].total_cmp(&s[b])).unwrap();
        assert_eq!(best, labels[k], "row {k}");
    }
}

#[test]
fn constant_features_give_constant_trees() {
    let n = 500;
    let x = vec![1.0; n * 2];
    let labels: Vec<usize> = (0..n).map(|k| usize::from(k % 4 == 0)).collect();
    let bias = vec![0.0; n * 2];
    let p = Problem::new(Features::new(&x, n, 2).unwrap(), &labels, &bias, 2, None).unwrap();
    let model = full(20).fit_observed(&p, None, FitContext { seed: 0 }, &mut |_| {}).unwrap();
    assert!(model.feature.is_empty(), "no split on constant features");
    assert!((0..20).all(|t| model.tree_leaves(t) == Some(1)));
    // The optimum is the constant log-odds log(1/3) between the classes.
    let mut s = vec![0.0; n * 2];
    model.score(p.features(), &mut s).unwrap();
    assert!(((s[1] - s[0]) - (1.0f64 / 3.0).ln()).abs() < 0.05, "{:?}", &s[..2]);
}

#[test]
fn incremental_scores_equal_scoring_and_save_load_round_trips() {
    // Multi-feature trees (lockstep descent over bins) and, with `[u, 1]` features,
    // one-feature trees (bin → leaf table); the model scores raw features.
    let mut one_feature = Data::new(1500, 2, 3, 15, true);
    assert!(one_feature.x.chunks(2).all(|r| r[1] == 1.0));
    one_feature.x.chunks_mut(2).enumerate().for_each(|(k, r)| r[0] = (k % 37) as f64 * 0.5 - 3.0);
    for data in [Data::new(1500, 4, 3, 12, true), one_feature] {
        let p = data.problem();
        let oracle = BoostingOracle { rounds: 6, subsample: 700, ..Default::default() };
        let mut last = Vec::new();
        let model = oracle.fit_observed(&p, None, FitContext { seed: 4 }, &mut |r| last = r.scores.to_vec()).unwrap();
        let mut scores = vec![0.0; data.n * 3];
        model.score(p.features(), &mut scores).unwrap();
        assert_eq!(scores, last);

        let bytes = model.to_bytes().unwrap();
        let loaded = ModelRegistry::with_builtin().load(KIND, &bytes).unwrap();
        assert_eq!(loaded.kind(), KIND);
        assert_eq!((loaded.dim(), loaded.classes()), (data.d, 3));
        let mut again = vec![0.0; data.n * 3];
        loaded.score(p.features(), &mut again).unwrap();
        assert_eq!(scores, again);
        assert_eq!(loaded.as_any().downcast_ref::<BoostingModel>(), Some(&model));
    }
}

/// Scores continued from a warm start's (and from any prefix of the
/// ensemble, the empty one included) equal scoring the grown model afresh bit
/// for bit, for multi-feature trees and for one-feature models (scored by a
/// step table); a model that did not grow from `previous` (another seed, a
/// changed leaf, more trees than this one, another kind) is refused and
/// `out` left alone.
#[test]
fn continued_scores_equal_scoring_afresh_bit_for_bit() {
    let mut one_feature = Data::new(900, 2, 3, 15, true);
    one_feature.x.chunks_mut(2).enumerate().for_each(|(k, r)| r[0] = (k % 37) as f64 * 0.5 - 3.0);
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for data in [Data::new(900, 4, 3, 12, true), one_feature] {
        let p = data.problem();
        let oracle = BoostingOracle { rounds: 3, subsample: 500, ..Default::default() };
        let first = oracle.fit(&p, None, FitContext { seed: 4 }).unwrap();
        let first = first.as_any().downcast_ref::<BoostingModel>().unwrap().clone();
        let grown = oracle.fit(&p, Some(&first), FitContext { seed: 5 }).unwrap();
        let grown = grown.as_any().downcast_ref::<BoostingModel>().unwrap().clone();
        assert_eq!(grown.trees(), 6);
        let mut afresh = vec![0.0; data.n * 3];
        grown.score(p.features(), &mut afresh).unwrap();
        for t in 0..=6 {
            let previous = first_trees(&grown, t);
            let mut scores = vec![0.0; data.n * 3];
            previous.score(p.features(), &mut scores).unwrap();
            assert!(grown.score_continuing(&previous, p.features(), &mut scores).unwrap(), "from {t} trees");
            assert_eq!(bits(&scores), bits(&afresh), "from {t} trees");
        }
        let other = oracle.fit(&p, None, FitContext { seed: 6 }).unwrap();
        let mut changed = first.clone();
        changed.leaf_values[0] = f64::from_bits(changed.leaf_values[0].to_bits() ^ 1);
        let zero = ZeroModel { dim: data.d, classes: 3 };
        let not_grown: [&dyn Model; 4] = [other.as_ref(), &changed, &grown, &zero];
        for (i, previous) in not_grown.into_iter().enumerate() {
            let mut scores = vec![7.0; data.n * 3];
            let model = if i == 2 { &first } else { &grown };
            assert!(!model.score_continuing(previous, p.features(), &mut scores).unwrap(), "case {i}");
            assert!(scores.iter().all(|&v| v == 7.0), "case {i}");
        }
    }
}

/// A model of no features (single-leaf trees: a constant per class, scored by
/// the step table) continues to the bits of scoring afresh too.
#[test]
fn continued_scores_without_features_equal_scoring_afresh() {
    let data = Data::new(300, 1, 4, 21, false);
    let p = Problem::new(Features::new(&[], data.n, 0).unwrap(), &data.labels, &data.bias, data.c, None).unwrap();
    let oracle = BoostingOracle { rounds: 2, ..Default::default() };
    let first = oracle.fit(&p, None, FitContext { seed: 1 }).unwrap();
    let grown = oracle.fit(&p, Some(first.as_ref()), FitContext { seed: 2 }).unwrap();
    let (mut continued, mut afresh) = (vec![0.0; data.n * data.c], vec![0.0; data.n * data.c]);
    first.score(p.features(), &mut continued).unwrap();
    assert!(grown.score_continuing(first.as_ref(), p.features(), &mut continued).unwrap());
    grown.score(p.features(), &mut afresh).unwrap();
    assert!(afresh.iter().any(|&v| v != 0.0));
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&continued), bits(&afresh));
}

#[test]
fn scored_fits_keep_the_scores_and_equal_plain_fits_bit_for_bit() {
    // A chain of warm-started calls given the scores (never scoring the
    // ensemble) against the same chain scoring it: same models, same losses,
    // and the kept scores are what the model scores, on multi-feature trees and
    // on one-feature ones (scored as a step function).
    let mut one_feature = Data::new(1500, 2, 3, 16, true);
    one_feature.x.chunks_mut(2).enumerate().for_each(|(k, r)| r[0] = (k % 41) as f64 * 0.25 - 2.0);
    // (With 1500 rows and 600 per round the pending trees are added to every
    // row once there are 3: mid-call with 5 rounds, every round per class.)
    let per_class = BoostingOracle { rounds: 3, subsample: 600, trees: Trees::PerClass, ..Default::default() };
    let multi_output = BoostingOracle { rounds: 5, subsample: 600, ..Default::default() };
    for (data, oracle) in [
        (Data::new(1500, 4, 3, 17, true), multi_output),
        (one_feature, multi_output),
        (Data::new(1500, 4, 3, 18, true), per_class),
    ] {
        let p = data.problem();
        assert!(oracle.maintains_scores());
        let mut scores = vec![0.0; data.n * 3];
        let mut plain: Option<Box<dyn Model>> = None;
        let mut scored: Option<Box<dyn Model>> = None;
        for call in 0..4 {
            let ctx = FitContext { seed: call };
            let a = fit_monotone(&oracle, &p, plain.as_deref(), ctx).unwrap();
            let b = fit_monotone_scored(&oracle, &p, scored.as_deref(), ctx, &mut scores).unwrap();
            let (ma, mb) = (
                a.model.as_any().downcast_ref::<BoostingModel>().unwrap(),
                b.model.as_any().downcast_ref::<BoostingModel>().unwrap(),
            );
            assert_eq!(ma, mb, "call {call}");
            assert_eq!(a.loss.to_bits(), b.loss.to_bits());
            assert_eq!(a.previous_loss.map(f64::to_bits), b.previous_loss.map(f64::to_bits));
            assert_eq!(b.loss.to_bits(), model_loss(mb, &p).unwrap().to_bits());
            let mut direct = vec![0.0; data.n * 3];
            mb.score(p.features(), &mut direct).unwrap();
            assert!(scores.iter().zip(&direct).all(|(s, d)| s.to_bits() == d.to_bits()), "call {call}");
            // Adding every tree to every row after each round (what an observer
            // sees) grows the same trees as adding them once at the end.
            let warm = plain.as_ref().map(|m| m.as_any().downcast_ref::<BoostingModel>().unwrap());
            let eager = oracle.fit_observed(&p, warm, ctx, &mut |_| {}).unwrap();
            if !a.rejected {
                assert_eq!(&eager, ma, "call {call}");
            }
            (plain, scored) = (Some(a.model), Some(b.model));
        }
    }
}

#[test]
fn invalid_hyper_parameters_are_typed_errors() {
    let d = BoostingOracle::default();
    assert!(d.validate().is_ok());
    let cases = [
        ("rounds", BoostingOracle { rounds: 0, ..d }),
        ("shrinkage", BoostingOracle { shrinkage: 0.0, ..d }),
        ("shrinkage", BoostingOracle { shrinkage: 1.5, ..d }),
        ("shrinkage", BoostingOracle { shrinkage: f64::NAN, ..d }),
        ("subsample", BoostingOracle { subsample: 0, ..d }),
        ("min_child_fraction", BoostingOracle { min_child_fraction: 0.6, ..d }),
        ("min_child_fraction", BoostingOracle { min_child_fraction: -0.1, ..d }),
        ("min_split_fraction", BoostingOracle { min_split_fraction: f64::NAN, ..d }),
        ("max_depth", BoostingOracle { max_depth: Some(0), ..d }),
        ("max_leaves", BoostingOracle { max_leaves: Some(1), ..d }),
        ("bins", BoostingOracle { bins: 1, ..d }),
        ("bins", BoostingOracle { bins: 257, ..d }),
        ("leaf_l2", BoostingOracle { leaf_l2: -1.0, ..d }),
        ("leaf_l2", BoostingOracle { leaf_l2: f64::INFINITY, ..d }),
        ("memory", BoostingOracle { leaf_lbfgs: LbfgsOptions { memory: 0, ..d.leaf_lbfgs }, ..d }),
    ];
    let data = Data::new(50, 2, 2, 0, false);
    let p = data.problem();
    for (name, oracle) in cases {
        match oracle.validate() {
            Err(OracleError::InvalidHyperParameter { name: got, .. }) => assert_eq!(got, name),
            other => panic!("{name}: {other:?}"),
        }
        assert!(matches!(oracle.fit(&p, None, FitContext { seed: 0 }), Err(OracleError::InvalidHyperParameter { .. })));
    }
}

#[test]
fn shape_mismatches_and_bad_bytes_are_typed_errors() {
    let data = Data::new(300, 3, 3, 13, false);
    let p = data.problem();
    let oracle = full(2);
    let model = oracle.fit_observed(&p, None, FitContext { seed: 0 }, &mut |_| {}).unwrap();

    let other = Data::new(300, 2, 3, 13, false);
    let q = other.problem();
    assert!(matches!(oracle.fit(&q, Some(&model), FitContext { seed: 0 }), Err(OracleError::ModelMismatch { .. })));
    let mut out = vec![0.0; 300 * 3];
    assert!(matches!(model.score(q.features(), &mut out), Err(OracleError::ModelMismatch { .. })));
    let mut short = vec![0.0; 10];
    assert!(matches!(model.score(p.features(), &mut short), Err(OracleError::OutputShape { .. })));
    let zero = ZeroModel { dim: 3, classes: 3 };
    assert!(matches!(oracle.fit(&p, Some(&zero), FitContext { seed: 0 }), Err(OracleError::WrongModelKind { .. })));

    assert!(matches!(load(&[1, 2, 3]), Err(OracleError::Codec { .. })));
    let mut broken = model.clone();
    if let Some(first) = broken.left.first_mut() {
        *first = 0; // a node pointing at itself
    }
    broken.feature.push(0); // and a node count that disagrees with the offsets
    assert!(matches!(load(&broken.to_bytes().unwrap()), Err(OracleError::InvalidModel { .. })));
    let mut far = model.clone();
    far.feature[0] = 3;
    assert!(matches!(load(&far.to_bytes().unwrap()), Err(OracleError::InvalidModel { .. })));
}

#[test]
fn weighted_rows_are_fitted_and_zero_weights_ignored() {
    let data = Data::new(1000, 3, 3, 14, false);
    let weights: Vec<f64> = (0..1000).map(|k| if k % 10 == 0 { 0.0 } else { 1.0 + (k % 3) as f64 }).collect();
    let f = Features::new(&data.x, 1000, 3).unwrap();
    let p = Problem::new(f, &data.labels, &data.bias, 3, Some(&weights)).unwrap();
    let l = losses(&full(8), &p, None, 0);
    assert!(l.windows(2).all(|w| w[1] <= w[0]));
    assert!(l[7] < 0.9 * zero_loss(&p));
}

/// The best single split of `rows` statistics under `gain`, by enumerating every
/// (feature, bin) threshold and scoring both children from the rows directly:
/// `(feature, bin)` of the largest gain, first on ties.
fn brute_force_split(
    sample: &Sample<'_>,
    dim: usize,
    c: usize,
    gain: SplitGain,
    l2: f64,
    min_child: usize,
) -> Option<(usize, usize)> {
    let (bins, stats, rows) = (sample.bins, sample.stats, sample.rows);
    let width = tree::stats_width(c, gain, true);
    let term = |members: &[usize]| {
        let sum = |j: usize| members.iter().map(|&r| stats[r * width + j]).sum::<f64>();
        match gain {
            SplitGain::LeastSquares => (0..c).map(|y| sum(y).powi(2)).sum::<f64>() / sum(width - 2),
            SplitGain::Newton => (0..c).map(|y| sum(y).powi(2) / (sum(c + y) + l2)).sum(),
        }
    };
    let all: Vec<usize> = (0..rows).collect();
    let parent = term(&all);
    let mut best: Option<(usize, usize, f64)> = None;
    for f in 0..dim {
        let column = &bins[f * rows..(f + 1) * rows];
        let max_bin = *column.iter().max().unwrap() as usize;
        for j in 0..max_bin {
            let (left, right): (Vec<usize>, Vec<usize>) = all.iter().partition(|&&r| column[r] as usize <= j);
            if left.len() < min_child || right.len() < min_child {
                continue;
            }
            let g = term(&left) + term(&right) - parent;
            if g > 1e-9 && best.is_none_or(|b| g > b.2 + 1e-9) {
                best = Some((f, j, g));
            }
        }
    }
    best.map(|(f, j, _)| (f, j))
}

#[test]
fn the_first_split_maximises_each_gain_as_computed_from_the_rows() {
    // Three features of 12 bins each, statistics with small and large
    // curvatures; the tree's root split must be the brute-force argmax of the
    // chosen gain. Over several seeds the two gains must also disagree at least
    // once, or this test could not tell them apart.
    let (rows, dim, c, l2, min_child) = (240, 3, 4, 4.0, 5);
    let mut disagreements = 0;
    for seed in 0..8 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let x: Vec<f64> = (0..rows * dim).map(|_| rng.random_range(0..12) as f64).collect();
        let features = Features::new(&x, rows, dim).unwrap();
        let edges = bins::BinEdges::fit(features, &(0..rows).collect::<Vec<_>>(), 256);
        let mut row_bins = Vec::new();
        edges.bin_rows(features, &mut row_bins);
        let mut column_bins = vec![0u8; rows * dim];
        for r in 0..rows {
            for f in 0..dim {
                column_bins[f * rows + r] = row_bins[r * dim + f];
            }
        }
        // Per row: a softmax q of random scores (sharper on some rows), a label
        // and a weight w, as `LeafData::gather` writes them.
        let mut newton = Vec::new();
        for r in 0..rows {
            // Curvature tied to a feature: rows with x₁ ≥ 6 are nearly certain.
            let sharp = if x[r * dim + 1] >= 6.0 { 8.0 } else { 0.5 };
            let z: Vec<f64> = (0..c).map(|_| sharp * rng.random_range(-1.0..1.0)).collect();
            let total: f64 = z.iter().map(|v| v.exp()).sum();
            let q: Vec<f64> = z.iter().map(|v| v.exp() / total).collect();
            let (label, w) = (rng.random_range(0..c), rng.random_range(0.5..2.0));
            newton.extend((0..c).map(|y| w * (q[y] - f64::from(u8::from(y == label)))));
            newton.extend(q.iter().map(|q| w * q * (1.0 - q)));
            newton.extend([w, 1.0]);
        }
        let least_squares: Vec<f64> = newton
            .chunks(2 * c + 2)
            .flat_map(|s| s[..c].iter().chain(&s[2 * c..]).copied().collect::<Vec<_>>())
            .collect();
        let limits = TreeLimits { min_child, min_split: 2 * min_child, max_depth: 1, max_leaves: usize::MAX };
        let mut chosen = Vec::new();
        for (gain, stats) in [(SplitGain::LeastSquares, &least_squares), (SplitGain::Newton, &newton)] {
            let mut builder = TreeBuilder::new(&edges, dim, c, gain, true, l2);
            let sample = Sample { bins: &column_bins, stats, rows, ranks: None };
            builder.grow(&sample, &limits);
            let tree = &builder.tree;
            let got = tree.feature.first().map(|&f| (f as usize, tree.split_bin[0] as usize));
            let expected = brute_force_split(&sample, dim, c, gain, l2, min_child);
            assert_eq!(got, expected, "seed {seed}, {gain:?}");
            chosen.push(got);
        }
        disagreements += usize::from(chosen[0] != chosen[1]);
    }
    assert!(disagreements > 0, "the two gains chose the same split on every seed");
}

#[test]
fn unit_weights_give_the_unweighted_model_bit_for_bit() {
    // Without weights the statistics carry no weight column (a node's weight
    // is its count); with weights all 1 they do. The sums are the same
    // numbers, so every tree, leaf value and score must be too.
    let data = Data::new(3000, 3, 4, 5, true);
    let ones = vec![1.0; data.n];
    let weighted =
        Problem::new(Features::new(&data.x, data.n, data.d).unwrap(), &data.labels, &data.bias, data.c, Some(&ones))
            .unwrap();
    let unweighted = data.problem();
    for trees in [Trees::MultiOutput, Trees::PerClass] {
        for split_gain in [SplitGain::LeastSquares, SplitGain::Newton] {
            let oracle = BoostingOracle { trees, split_gain, subsample: 1000, ..full(4) };
            let fit = |p: &Problem<'_>| oracle.fit(p, None, FitContext { seed: 3 }).unwrap();
            let (a, b) = (fit(&unweighted), fit(&weighted));
            let mut scores = [vec![0.0; data.n * data.c], vec![0.0; data.n * data.c]];
            a.score(unweighted.features(), &mut scores[0]).unwrap();
            b.score(unweighted.features(), &mut scores[1]).unwrap();
            assert!(
                scores[0].iter().zip(&scores[1]).all(|(x, y)| x.to_bits() == y.to_bits()),
                "{trees:?} {split_gain:?}"
            );
            assert_eq!(a.to_bytes().unwrap(), b.to_bytes().unwrap(), "{trees:?} {split_gain:?}");
        }
    }
}

#[test]
fn newton_gain_keeps_the_guarantees_and_fits_at_least_as_well_here() {
    // The round guarantees do not depend on the split criterion: on the full
    // problem the training loss falls every round; warm starts continue.
    let data = Data::new(2000, 4, 3, 1, true);
    let p = data.problem();
    let newton = BoostingOracle { split_gain: SplitGain::Newton, ..full(15) };
    let l = losses(&newton, &p, None, 7);
    let start = zero_loss(&p);
    assert!(l[0] < start);
    for w in l.windows(2) {
        assert!(w[1] <= w[0], "loss rose from {} to {}", w[0], w[1]);
    }
    let ls = losses(&full(15), &p, None, 7);
    assert!(l[14] <= ls[14] * 1.001, "newton {} vs least squares {}", l[14], ls[14]);
    let first = newton.fit_observed(&p, None, FitContext { seed: 1 }, &mut |_| {}).unwrap();
    let second = newton.fit_observed(&p, Some(&first), FitContext { seed: 2 }, &mut |_| {}).unwrap();
    assert_eq!(second.trees(), 30);
    assert!(model_loss(&second, &p).unwrap() < model_loss(&first, &p).unwrap());
}

#[test]
fn split_gain_reads_from_json_and_defaults_to_the_chapters() {
    let default: BoostingOracle =
        serde_json::from_value(serde_json::to_value(BoostingOracle::default()).unwrap()).unwrap();
    assert_eq!(default.split_gain, SplitGain::LeastSquares);
    let mut value = serde_json::to_value(BoostingOracle::default()).unwrap();
    value.as_object_mut().unwrap().remove("split_gain");
    let old: BoostingOracle = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(old, BoostingOracle::default(), "settings written before the option still read");
    value["split_gain"] = "newton".into();
    let newton: BoostingOracle = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(newton.split_gain, SplitGain::Newton);
    value["split_gain"] = "gini".into();
    assert!(serde_json::from_value::<BoostingOracle>(value).is_err());
}

#[test]
fn gathered_statistics_are_the_weighted_gradients_and_hessians() {
    let data = Data::new(50, 2, 3, 9, true);
    let weights: Vec<f64> = (0..50).map(|k| 0.5 + (k % 4) as f64).collect();
    let p = Problem::new(Features::new(&data.x, 50, 2).unwrap(), &data.labels, &data.bias, 3, Some(&weights)).unwrap();
    let sub: Vec<usize> = (0..50).step_by(3).collect();
    let scores: Vec<f64> = (0..sub.len() * 3).map(|i| ((i * 7) % 5) as f64 * 0.3 - 0.6).collect();
    for gain in [SplitGain::LeastSquares, SplitGain::Newton] {
        let width = tree::stats_width(3, gain, true);
        let mut stats = vec![f64::NAN; sub.len() * width];
        let mut leaf_data = leaves::LeafData::new(sub.len(), 3);
        leaf_data.gather(&p, &scores, &sub, gain, None, &mut stats);
        for (r, &k) in sub.iter().enumerate() {
            let z: Vec<f64> = (0..3).map(|y| scores[r * 3 + y] + data.bias[k * 3 + y]).collect();
            let total: f64 = z.iter().map(|v| v.exp()).sum();
            let w = weights[k];
            let st = &stats[r * width..(r + 1) * width];
            for y in 0..3 {
                let q = z[y].exp() / total;
                let g = w * (q - f64::from(u8::from(y == data.labels[k])));
                assert!((st[y] - g).abs() < 1e-12, "gradient row {k} class {y}");
                if gain == SplitGain::Newton {
                    assert!((st[3 + y] - w * q * (1.0 - q)).abs() < 1e-12, "hessian row {k} class {y}");
                }
            }
            assert_eq!(&st[width - 2..], &[w, 1.0]);
        }
    }
}

#[test]
fn per_class_trees_fit_one_class_each_and_keep_the_guarantees() {
    // On the full problem: C trees per round, each with values in one class
    // only (class y's tree at position y of its round), and the training loss
    // falls every round; warm starts continue; with either gain.
    let data = Data::new(1500, 4, 3, 2, true);
    let p = data.problem();
    for gain in [SplitGain::LeastSquares, SplitGain::Newton] {
        let oracle = BoostingOracle { trees: Trees::PerClass, split_gain: gain, leaf_l2: 1.0, ..full(6) };
        let l = losses(&oracle, &p, None, 3);
        assert!(l[0] < zero_loss(&p), "{gain:?}");
        for w in l.windows(2) {
            assert!(w[1] <= w[0], "{gain:?}: loss rose from {} to {}", w[0], w[1]);
        }
        let model = oracle.fit_observed(&p, None, FitContext { seed: 3 }, &mut |_| {}).unwrap();
        assert_eq!(model.trees(), 6 * 3);
        for t in 0..model.trees() {
            let values = tree_values(&model, t);
            let class = t % 3;
            assert!(values.chunks(3).all(|v| (0..3).all(|y| y == class || v[y] == 0.0)), "tree {t}: {values:?}");
            assert!(values.chunks(3).any(|v| v[class] != 0.0), "tree {t} fits nothing");
        }
        let second = oracle.fit_observed(&p, Some(&model), FitContext { seed: 4 }, &mut |_| {}).unwrap();
        assert_eq!(second.trees(), 36);
        assert!(model_loss(&second, &p).unwrap() < model_loss(&model, &p).unwrap());
    }
    // Every tree, not only every round, lowers the loss on the full problem:
    // each class's tree is fitted at the scores that include the trees before
    // it. (Fitted at the round's starting scores, two classes' trees would
    // both make the same correction: with ν = 1 the second overshoots.)
    let two = Data::new(1500, 3, 2, 6, false);
    let p2 = two.problem();
    let oracle = BoostingOracle { trees: Trees::PerClass, shrinkage: 1.0, leaf_l2: 1e-3, ..full(3) };
    let model = oracle.fit_observed(&p2, None, FitContext { seed: 1 }, &mut |_| {}).unwrap();
    let prefix_losses: Vec<f64> =
        (0..=model.trees()).map(|t| model_loss(&first_trees(&model, t), &p2).unwrap()).collect();
    for (t, w) in prefix_losses.windows(2).enumerate() {
        assert!(w[1] <= w[0] * (1.0 + 1e-12), "tree {t} raised the loss from {} to {}", w[0], w[1]);
    }
    // With a proper subsample, the subsample loss never rises in a round.
    let oracle = BoostingOracle { trees: Trees::PerClass, subsample: 300, leaf_l2: 1.0, ..full(8) };
    oracle
        .fit_observed(&p, None, FitContext { seed: 5 }, &mut |r| {
            assert!(r.subsample_loss_after <= r.subsample_loss_before, "round {}", r.round);
        })
        .unwrap();
}

#[test]
fn a_class_tree_splits_where_that_class_gains_most() {
    // Class 0 is x₀ > 0.75, class 1 is x₀ ≤ 0.75 and x₁ > 0.75, class 2 the
    // rest; x₂ is noise. With one split per tree, class 0's tree must split x₀
    // and class 1's x₁ (each on its own gradients; another class's would
    // choose the other feature), whichever the gain.
    let (n, d) = (1200, 3);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let x: Vec<f64> = (0..n * d).map(|_| rng.random::<f64>()).collect();
    let labels: Vec<usize> = (0..n)
        .map(|k| match (x[k * d] > 0.75, x[k * d + 1] > 0.75) {
            (true, _) => 0,
            (false, true) => 1,
            _ => 2,
        })
        .collect();
    let bias = vec![0.0; n * 3];
    let p = Problem::new(Features::new(&x, n, d).unwrap(), &labels, &bias, 3, None).unwrap();
    for gain in [SplitGain::LeastSquares, SplitGain::Newton] {
        let oracle =
            BoostingOracle { trees: Trees::PerClass, split_gain: gain, max_depth: Some(1), leaf_l2: 1.0, ..full(1) };
        let model = oracle.fit_observed(&p, None, FitContext { seed: 0 }, &mut |_| {}).unwrap();
        assert_eq!(root_feature(&model, 0), Some(0), "{gain:?}: class 0 splits x0");
        assert_eq!(root_feature(&model, 1), Some(1), "{gain:?}: class 1 splits x1");
    }
}

#[test]
fn class_statistics_are_one_column_of_the_gathered_ones() {
    // `gather` with a target class writes exactly that class's column of the
    // all-class statistics (same bits), and returns the same loss.
    let data = Data::new(60, 2, 3, 4, true);
    let unit = data.problem();
    let weights: Vec<f64> = (0..60).map(|k| 0.25 + (k % 3) as f64).collect();
    let weighted =
        Problem::new(Features::new(&data.x, 60, 2).unwrap(), &data.labels, &data.bias, 3, Some(&weights)).unwrap();
    let sub: Vec<usize> = (0..60).step_by(2).collect();
    let scores: Vec<f64> = (0..sub.len() * 3).map(|i| ((i * 5) % 7) as f64 * 0.2 - 0.5).collect();
    for (p, is_weighted) in [(&unit, false), (&weighted, true)] {
        for gain in [SplitGain::LeastSquares, SplitGain::Newton] {
            let c = 3;
            let width = tree::stats_width(c, gain, is_weighted);
            let mut all = vec![f64::NAN; sub.len() * width];
            let mut leaf_data = leaves::LeafData::new(sub.len(), c);
            let loss = leaf_data.gather(p, &scores, &sub, gain, None, &mut all);
            let narrow = tree::stats_width(1, gain, is_weighted);
            let tail = if is_weighted { 2 } else { 1 };
            for y in 0..c {
                let mut one = vec![f64::NAN; sub.len() * narrow];
                assert_eq!(leaf_data.gather(p, &scores, &sub, gain, Some(y), &mut one).to_bits(), loss.to_bits());
                for r in 0..sub.len() {
                    let row = &all[r * width..(r + 1) * width];
                    let mut want = vec![row[y]];
                    if gain == SplitGain::Newton {
                        want.push(row[c + y]);
                    }
                    want.extend(&row[width - tail..]);
                    let got = &one[r * narrow..(r + 1) * narrow];
                    assert!(
                        got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{gain:?} weighted {is_weighted} class {y} row {r}: {got:?} vs {want:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn trees_read_from_json_and_default_to_one_multi_output_tree() {
    let mut value = serde_json::to_value(BoostingOracle::default()).unwrap();
    assert_eq!(value["trees"], "multi-output");
    value.as_object_mut().unwrap().remove("trees");
    let old: BoostingOracle = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(old, BoostingOracle::default(), "settings written before the option still read");
    value["trees"] = "per-class".into();
    assert_eq!(serde_json::from_value::<BoostingOracle>(value.clone()).unwrap().trees, Trees::PerClass);
    value["trees"] = "forest".into();
    assert!(serde_json::from_value::<BoostingOracle>(value).is_err());
}

/// Leaf values of tree `t` (`leaves × C`).
fn tree_values(model: &BoostingModel, t: usize) -> &[f64] {
    let c = model.classes;
    &model.leaf_values[model.leaf_offsets[t] as usize * c..model.leaf_offsets[t + 1] as usize * c]
}

/// The feature of tree `t`'s root split (`None` for a single leaf).
fn root_feature(model: &BoostingModel, t: usize) -> Option<u32> {
    let (first, end) = (model.node_offsets[t] as usize, model.node_offsets[t + 1] as usize);
    (end > first).then(|| model.feature[first])
}

/// The ensemble of `model`'s first `t` trees.
fn first_trees(model: &BoostingModel, t: usize) -> BoostingModel {
    let c = model.classes;
    let (nodes, leaves) = (model.node_offsets[t] as usize, model.leaf_offsets[t] as usize);
    BoostingModel {
        dim: model.dim,
        classes: c,
        node_offsets: model.node_offsets[..=t].to_vec(),
        leaf_offsets: model.leaf_offsets[..=t].to_vec(),
        feature: model.feature[..nodes].to_vec(),
        threshold: model.threshold[..nodes].to_vec(),
        left: model.left[..nodes].to_vec(),
        right: model.right[..nodes].to_vec(),
        leaf_values: model.leaf_values[..leaves * c].to_vec(),
        leaf_rows: model.leaf_rows[..leaves].to_vec(),
    }
}

#[test]
fn newton_leaves_are_one_step_minus_g_over_h_plus_lambda() {
    // One round on every row: each leaf of class y's tree holds
    // ν · (−Σ (q(y) − 1{y = label}) / (Σ q(y)(1 − q(y)) + λ)) over its rows, q the
    // softmax at the scores before that tree (the bias, then the bias plus the
    // trees before it), whichever gain chose the splits.
    let data = Data::new(800, 3, 3, 21, false);
    let p = data.problem();
    let (nu, l2) = (0.5, 3.0);
    for (trees, gain) in [(Trees::PerClass, SplitGain::Newton), (Trees::PerClass, SplitGain::LeastSquares)] {
        let oracle = BoostingOracle {
            trees,
            split_gain: gain,
            leaf_values: LeafValues::Newton,
            shrinkage: nu,
            leaf_l2: l2,
            ..full(1)
        };
        let model = oracle.fit_observed(&p, None, FitContext { seed: 0 }, &mut |_| {}).unwrap();
        assert_eq!(model.trees(), 3);
        for y in 0..3 {
            let mut before = vec![0.0; 800 * 3];
            first_trees(&model, y).score(p.features(), &mut before).unwrap();
            let mut after = vec![0.0; 800 * 3];
            first_trees(&model, y + 1).score(p.features(), &mut after).unwrap();
            // Rows grouped by the value class y's tree gave them: one group per leaf.
            let mut groups: Vec<(f64, f64, f64)> = Vec::new();
            for k in 0..800 {
                let z: Vec<f64> = (0..3).map(|j| before[k * 3 + j] + data.bias[k * 3 + j]).collect();
                let total: f64 = z.iter().map(|v| v.exp()).sum();
                let q = z[y].exp() / total;
                let value = after[k * 3 + y] - before[k * 3 + y];
                let g = q - f64::from(u8::from(data.labels[k] == y));
                match groups.iter_mut().find(|(v, _, _)| *v == value) {
                    Some((_, sg, sh)) => {
                        *sg += g;
                        *sh += q * (1.0 - q);
                    }
                    None => groups.push((value, g, q * (1.0 - q))),
                }
            }
            assert!(groups.len() >= 2, "class {y}: the tree split");
            for (value, g, h) in groups {
                let want = nu * (-g / (h + l2));
                assert!((value - want).abs() <= 1e-9 * want.abs().max(1e-3), "class {y}: {value} vs {want}");
            }
        }
    }
}
