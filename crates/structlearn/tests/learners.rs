//! The learners behind one interface: Hazan & Urtasun's primal-dual learner
//! and Algorithm 1 with the linear oracle reach the same optimum of the same
//! convex objective; the perceptrons and constrained decoding.

mod common;

use std::sync::Arc;

use factor_graph::{Scope, factors_with_singletons};
use oracles::linear::LinearModel;
use proptest::prelude::*;
use serde_json::json;
use smoothed_inference::{InferenceProblem, Messages, RunOptions, Workspace};
use structlearn::exact::{feasible_decode, is_feasible, labelings, map_labeling, score};
use structlearn::{
    CheckpointConfig, Dataset, EarlyStopping, Evaluate, EvaluationMessages, Example, FactorTypeInfo, FeatureBlock,
    LearnError, LearnerKind, PredictOptions, Step, StructuredModel, TrainConfig, build_learner,
};

/// Four 4×4 images whose second half repeats the first half's features with
/// other labels: the data are not separable, so the objective has a finite
/// minimiser (unique up to the softmax's common shift, which no method moves).
fn conflicting_data() -> Dataset {
    let a = common::denoising(2, 4, 4, 11);
    let b = common::denoising(2, 4, 4, 12);
    let mut examples = a.clone().into_parts().1;
    for (k, (ea, eb)) in a.examples().iter().zip(b.examples()).enumerate() {
        let name = format!("{}-relabelled", ea.name());
        examples.push(Example::new(name, ea.graph().clone(), eb.labels().map(<[usize]>::to_vec), a.feature_blocks(k)));
    }
    Dataset::new(a.factor_types().to_vec(), examples).unwrap()
}

fn linear_specs(data: &Dataset) -> Vec<(String, serde_json::Value)> {
    let tight = json!({"kind": "linear", "lbfgs": {"gradient_tolerance": 1e-12, "relative_decrease_tolerance": 0.0, "max_iterations": 500}});
    data.factor_types().iter().map(|f| (f.name.clone(), tight.clone())).collect()
}

fn weights(model: &StructuredModel, t: usize) -> Vec<f64> {
    model.models()[t].as_any().downcast_ref::<LinearModel>().unwrap().weights().to_vec()
}

/// `J(W) = Σ_k [min_λ A(λ, θ^k(W)) − θ^k(y^k)]` with `θ = ε W φ + Δ`, the
/// inner minimum by message passing run to a violation of 1e-11.
fn objective_at(data: &Dataset, eps: f64, w: &[Vec<f64>]) -> f64 {
    let mut total = 0.0;
    for (k, ex) in data.examples().iter().enumerate() {
        let g = &ex.graph();
        let truth = ex.labels().unwrap();
        let mut theta = vec![0.0; g.total_configs()];
        for (t, ft) in data.factor_types().iter().enumerate() {
            for (row, r) in data.regions_of_type(k, t).enumerate() {
                let phi = &data.features(k, t)[row * ft.dim..(row + 1) * ft.dim];
                let vars = g.region_variables(r);
                for (y, th) in theta[g.config_range(r)].iter_mut().enumerate() {
                    let s: f64 = w[t][y * ft.dim..(y + 1) * ft.dim].iter().zip(phi).map(|(a, b)| a * b).sum();
                    let delta = if vars.len() == 1 && y != truth[vars[0]] { 1.0 } else { 0.0 };
                    *th = eps * s + delta;
                }
            }
        }
        let problem = InferenceProblem::uniform(g, &theta, eps).unwrap();
        let mut m = Messages::zeros(g);
        let opts = RunOptions { iterations: 20_000, tolerance: Some(1e-11), order: None };
        problem.run(&mut m, &opts, &mut Workspace::new(g)).unwrap();
        total += problem.dual_value(&m) - score(g, &theta, truth);
    }
    total
}

/// The acceptance test of the Hazan–Urtasun learner: on a convex problem
/// (linear energies, Hamming loss augmentation, same ε, same data) it and
/// Algorithm 1 with the linear oracle reach the same objective to 1e-6
/// (relative) and the same class-difference weights to 1e-3; and the common
/// optimum is checked independently: `J(W)` re-evaluated with fully converged
/// inference agrees, and its central-difference gradient vanishes.
#[test]
fn hazan_urtasun_and_algorithm1_reach_the_same_optimum() {
    let data = conflicting_data();
    let eps = 0.5;
    let specs = linear_specs(&data);
    let quiet = |iterations: usize, mp: usize| TrainConfig {
        epsilon: eps,
        learning_iterations: iterations,
        message_passing_iterations: mp,
        evaluate: Evaluate::Never,
        ..TrainConfig::default()
    };
    let a1 = build_learner(LearnerKind::Algorithm1, &data, &specs, quiet(1500, 2)).unwrap().train().unwrap();
    let hu = build_learner(LearnerKind::HazanUrtasun, &data, &specs, quiet(3000, 2)).unwrap().train().unwrap();
    // Both are monotone descent methods on R.
    for h in [&a1.history, &hu.history] {
        assert!(h.windows(2).all(|w| w[1].objective <= w[0].objective + 1e-9 * w[0].objective.abs()));
    }
    let (ra, rh) = (a1.history.last().unwrap().objective, hu.history.last().unwrap().objective);
    assert!((ra - rh).abs() <= 1e-6 * ra, "Algorithm 1 R = {ra}, Hazan–Urtasun R = {rh}");
    let wa: Vec<Vec<f64>> = (0..2).map(|t| weights(&a1.model, t)).collect();
    let wh: Vec<Vec<f64>> = (0..2).map(|t| weights(&hu.model, t)).collect();
    for t in 0..2 {
        let (ft, c) = (&data.factor_types()[t], data.factor_types()[t].classes);
        for y in 1..c {
            for j in 0..ft.dim {
                let da = wa[t][y * ft.dim + j] - wa[t][j];
                let dh = wh[t][y * ft.dim + j] - wh[t][j];
                assert!((da - dh).abs() < 1e-3 * (1.0 + da.abs()), "type {t} class {y} feature {j}: {da} vs {dh}");
            }
        }
    }
    // Independent check of optimality.
    let j0 = objective_at(&data, eps, &wa);
    assert!((j0 - ra).abs() < 1e-7 * ra, "re-evaluated J = {j0}, Algorithm 1 reported {ra}");
    let h = 1e-4;
    for t in 0..2 {
        for i in 0..wa[t].len() {
            let mut plus = wa.clone();
            let mut minus = wa.clone();
            plus[t][i] += h;
            minus[t][i] -= h;
            let fd = (objective_at(&data, eps, &plus) - objective_at(&data, eps, &minus)) / (2.0 * h);
            assert!(fd.abs() < 1e-4, "∂J/∂W[{t}][{i}] = {fd} at the optimum");
            assert!(objective_at(&data, eps, &plus) >= j0 - 1e-9 && objective_at(&data, eps, &minus) >= j0 - 1e-9);
        }
    }
}

/// ε from 1 down to 0.01: the primal-dual learner stays finite and monotone.
#[test]
fn hazan_urtasun_is_finite_and_monotone_from_eps_1_to_0_01() {
    let data = common::denoising(2, 5, 5, 3);
    let specs = linear_specs(&data);
    for eps in [1.0, 0.5, 0.1, 0.01] {
        let config = TrainConfig {
            epsilon: eps,
            learning_iterations: 30,
            message_passing_iterations: 3,
            evaluate: Evaluate::EveryIteration,
            ..TrainConfig::default()
        };
        let out = build_learner(LearnerKind::HazanUrtasun, &data, &specs, config).unwrap().train().unwrap();
        for w in out.history.windows(2) {
            assert!(w[1].objective.is_finite() && w[1].objective >= -1e-9, "ε = {eps}: R = {}", w[1].objective);
            assert!(w[1].objective <= w[0].objective + 1e-9 * w[0].objective.abs(), "ε = {eps}: R went up");
        }
        let first = out.history.first().unwrap().objective;
        let last = out.history.last().unwrap();
        assert!(last.objective < 0.9 * first, "ε = {eps}: R {first} → {}", last.objective);
        // Better than chance on median-split labels (the tied linear model is weak at ε = 1).
        assert!(last.train_error.unwrap() < 0.4, "ε = {eps}: train error {:?}", last.train_error);
        for t in 0..2 {
            assert!(weights(&out.model, t).iter().all(|v| v.is_finite()));
        }
    }
}

/// Per-factor-type entropy weights reach the learner and the model file.
#[test]
fn type_epsilon_is_used_by_every_smoothed_learner() {
    let data = common::denoising(1, 4, 4, 5);
    let specs = linear_specs(&data);
    for kind in [LearnerKind::Algorithm1, LearnerKind::HazanUrtasun, LearnerKind::Piecewise] {
        let config = TrainConfig {
            epsilon: 0.5,
            type_epsilon: vec![("pairwise".into(), 0.05)],
            learning_iterations: if kind == LearnerKind::Piecewise { 1 } else { 2 },
            evaluate: Evaluate::Never,
            ..TrainConfig::default()
        };
        let model = build_learner(kind, &data, &specs, config).unwrap().train().unwrap().model;
        assert_eq!(model.epsilon(), vec![0.5, 0.05], "{kind}");
    }
}

#[test]
fn learner_choice_is_validated() {
    let data = common::denoising(1, 3, 3, 1);
    assert!("nope".parse::<LearnerKind>().unwrap_err().to_string().contains("hazan-urtasun"));
    for k in LearnerKind::ALL {
        assert_eq!(k.name().parse::<LearnerKind>().unwrap(), k);
    }
    let boosting: Vec<_> = data.factor_types().iter().map(|f| (f.name.clone(), json!({"kind": "boosting"}))).collect();
    let config = TrainConfig::default;
    let e = build_learner(LearnerKind::HazanUrtasun, &data, &boosting, config()).err().unwrap().to_string();
    assert!(e.contains("linear energies") && e.contains("boosting"), "{e}");
    let e = build_learner(LearnerKind::PerceptronGlobal, &data, &boosting, config()).err().unwrap().to_string();
    assert!(e.contains("boosting"), "{e}");
    let mut scheduled = config();
    scheduled.schedule = Some(vec![]);
    assert!(build_learner(LearnerKind::Piecewise, &data, &linear_specs(&data), scheduled).is_err());
}

/// A configuration that differs from the default in setting `name` alone.
fn changed(name: &str) -> TrainConfig {
    let d = TrainConfig::default();
    match name {
        "epsilon" => TrainConfig { epsilon: 0.5, ..d },
        "type_epsilon" => TrainConfig { type_epsilon: vec![("unary".into(), 0.5)], ..d },
        "learning_iterations" => TrainConfig { learning_iterations: 3, ..d },
        "schedule" => TrainConfig { schedule: Some(vec![Step::Fit { factor_type: "unary".into() }]), ..d },
        "message_passing_iterations" => TrainConfig { message_passing_iterations: 7, ..d },
        "message_passing_tolerance" => TrainConfig { message_passing_tolerance: None, ..d },
        "seed" => TrainConfig { seed: 9, ..d },
        "predict" => TrainConfig { predict: PredictOptions { iterations: 3, ..d.predict }, ..d },
        "evaluate" => TrainConfig { evaluate: Evaluate::Never, ..d },
        "evaluate_train" => TrainConfig { evaluate_train: false, ..d },
        "evaluate_train_every" => TrainConfig { evaluate_train_every: 2, ..d },
        "warm_start_evaluation" => TrainConfig { warm_start_evaluation: false, ..d },
        "evaluation_messages" => TrainConfig { evaluation_messages: EvaluationMessages::Memory, ..d },
        "checkpoint" => TrainConfig { checkpoint: Some(CheckpointConfig::new("unused.ckpt")), ..d },
        "early_stopping" => TrainConfig { early_stopping: Some(EarlyStopping { patience: 2, min_delta: 0.0 }), ..d },
        other => panic!("no such setting {other}"),
    }
}

/// Each learner refuses exactly the changed settings it does not read, by
/// name, before any work; the settings it reads are accepted.
#[test]
fn a_setting_a_learner_ignores_is_refused() {
    let data = common::denoising(1, 3, 3, 1);
    let specs = linear_specs(&data);
    let names = [
        "epsilon",
        "type_epsilon",
        "learning_iterations",
        "schedule",
        "message_passing_iterations",
        "message_passing_tolerance",
        "seed",
        "predict",
        "evaluate",
        "evaluate_train",
        "evaluate_train_every",
        "warm_start_evaluation",
        "evaluation_messages",
        "checkpoint",
        "early_stopping",
    ];
    for name in names {
        assert_eq!(changed(name).changed_settings(), [name]);
    }
    assert!(TrainConfig::default().changed_settings().is_empty());
    for kind in LearnerKind::ALL {
        for name in names {
            let ignored = !kind.reads(name);
            match build_learner(kind, &data, &specs, changed(name)) {
                Err(LearnError::UnusedSetting { learner, name: refused, .. }) => {
                    assert!(ignored, "{kind} refused `{name}`, which it reads");
                    assert_eq!((learner, refused), (kind, name));
                }
                other => assert!(!ignored, "{kind} accepted `{name}`, which it ignores: {:?}", other.err()),
            }
        }
    }
    let one = TrainConfig { learning_iterations: 1, ..TrainConfig::default() };
    assert!(build_learner(LearnerKind::Piecewise, &data, &specs, one).is_ok());
    let e = build_learner(LearnerKind::PerceptronGlobal, &data, &specs, changed("epsilon")).err().unwrap().to_string();
    assert!(e.contains("`epsilon`") && e.contains("perceptron-global"), "{e}");
}

/// A checkpointed Hazan–Urtasun run resumes exactly (it is Algorithm 1's trainer).
#[test]
fn hazan_urtasun_resumes_exactly() {
    let data = common::denoising(2, 4, 4, 8);
    let specs = linear_specs(&data);
    let dir = tempfile::tempdir().unwrap();
    let config = |n: usize| TrainConfig {
        learning_iterations: n,
        message_passing_iterations: 2,
        evaluate: Evaluate::Never,
        ..TrainConfig::default()
    };
    let full = build_learner(LearnerKind::HazanUrtasun, &data, &specs, config(8)).unwrap().train().unwrap();
    let path = dir.path().join("hu.ckpt");
    let mut first = build_learner(LearnerKind::HazanUrtasun, &data, &specs, config(3)).unwrap();
    first.train().unwrap();
    first.save_checkpoint(&path).unwrap();
    let mut second = build_learner(LearnerKind::HazanUrtasun, &data, &specs, config(8)).unwrap();
    second.resume_from(&path, &oracles::ModelRegistry::with_builtin()).unwrap();
    let resumed = second.train().unwrap();
    assert_eq!(full.history.last().unwrap().objective, resumed.history.last().unwrap().objective);
    assert_eq!(weights(&full.model, 0), weights(&resumed.model, 0));
}

/// A 5-variable binary problem with one constraint region over all five.
fn constrained_graph() -> Arc<factor_graph::RegionGraph> {
    Arc::new(
        factors_with_singletons(vec![2; 5], &[Scope { variables: (0..5).collect(), factor_type: "constraint".into() }])
            .unwrap(),
    )
}

fn constrained_theta(g: &factor_graph::RegionGraph, unary: &[f64], forbidden: &[bool]) -> Vec<f64> {
    let mut theta = vec![0.0; g.total_configs()];
    for v in 0..5 {
        theta[g.config_range(v).start + 1] = unary[v];
    }
    let c = g.config_range(5);
    for (i, &f) in forbidden.iter().enumerate() {
        if f {
            theta[c.start + i] = f64::NEG_INFINITY;
        }
    }
    theta
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Constrained decoding never returns a forbidden labeling: exact MAP is
    /// feasible and optimal among feasible labelings (brute force), and the
    /// decoding of smoothed beliefs (any ε) is feasible too.
    #[test]
    fn constrained_decoding_never_returns_a_forbidden_labeling(
        unary in proptest::collection::vec(-5.0f64..5.0, 5),
        forbidden in proptest::collection::vec(any::<bool>(), 32),
        eps in prop_oneof![Just(1.0), Just(0.1), Just(0.01)],
        iterations in 0usize..20,
    ) {
        prop_assume!(forbidden.iter().any(|f| !f));
        let g = constrained_graph();
        let theta = constrained_theta(&g, &unary, &forbidden);
        let y = map_labeling(&g, &theta, 0).unwrap();
        prop_assert!(is_feasible(&g, &theta, &y));
        let best = score(&g, &theta, &y);
        for i in 0..labelings(&g) {
            let other: Vec<usize> = (0..5).map(|v| (i >> (4 - v)) & 1).collect();
            prop_assert!(score(&g, &theta, &other) <= best);
        }
        let problem = InferenceProblem::uniform(&g, &theta, eps).unwrap();
        let mut m = Messages::zeros(&g);
        problem.run(&mut m, &RunOptions { iterations, tolerance: None, order: None }, &mut Workspace::new(&g)).unwrap();
        let mut beliefs = vec![0.0; g.total_configs()];
        problem.beliefs(&m, &mut beliefs);
        let d = feasible_decode(&g, &theta, &beliefs, 0).unwrap();
        prop_assert!(is_feasible(&g, &theta, &d), "decoded {:?}", d);
    }
}

#[test]
fn infeasible_and_oversized_graphs_are_typed_errors() {
    let g = constrained_graph();
    let theta = constrained_theta(&g, &[0.0; 5], &[true; 32]);
    assert!(matches!(map_labeling(&g, &theta, 3), Err(structlearn::LearnError::Infeasible { example: 3 })));
    let big = factor_graph::grid(6, 5, 2).unwrap();
    let theta = vec![0.0; big.total_configs()];
    let err = map_labeling(&big, &theta, 0).unwrap_err();
    assert!(matches!(err, structlearn::LearnError::TooManyLabelings { .. }));
    assert!(err.to_string().contains("enumerate 1073741824 labelings"), "{err}");
    // 2^80 labelings saturate the count: the message does not pass it off as exact.
    let huge = factor_graph::grid(8, 10, 2).unwrap();
    let err = map_labeling(&huge, &vec![0.0; huge.total_configs()], 0).unwrap_err();
    assert!(err.to_string().contains(&format!("enumerate at least {} labelings", usize::MAX)), "{err}");
}

/// Constrained data: labels are the best feasible labeling of random local
/// scores (a labelling is forbidden where it has an odd number of ones),
/// features are the local scores themselves; a linear unary type and the
/// constraint as a fixed type.
fn constrained_data() -> (Dataset, Vec<(String, serde_json::Value)>) {
    let g = constrained_graph();
    let forbidden: Vec<bool> = (0..32).map(|i: usize| i.count_ones() % 2 == 1).collect();
    let mut examples = Vec::new();
    let mut seed = 7u64;
    let mut next = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    for k in 0..40 {
        let x: Vec<f64> = (0..5).map(|_| next()).collect();
        let theta = constrained_theta(&g, &x.iter().map(|v| 2.0 * v).collect::<Vec<_>>(), &forbidden);
        let labels = map_labeling(&g, &theta, k).unwrap();
        // Local features: [x_i in block i (5 blocks), 1 in block i]: one weight vector per output.
        let unary: Vec<f64> = (0..5)
            .flat_map(|i| {
                let mut row = vec![0.0; 10];
                row[2 * i] = x[i];
                row[2 * i + 1] = 1.0;
                row
            })
            .collect();
        examples.push(Example::new(
            format!("e{k}"),
            g.clone(),
            Some(labels),
            vec![FeatureBlock { dim: 10, values: unary }, FeatureBlock { dim: 1, values: vec![1.0] }],
        ));
    }
    let data =
        Dataset::new(vec![FactorTypeInfo::new("unary", 10), FactorTypeInfo::new("constraint", 1)], examples).unwrap();
    let forbidden_idx: Vec<usize> = (0..32).filter(|&i| forbidden[i]).collect();
    let specs = vec![
        ("unary".to_string(), json!({"kind": "linear"})),
        ("constraint".to_string(), json!({"kind": "fixed", "table": vec![0.0; 32], "forbidden": forbidden_idx})),
    ];
    (data, specs)
}

/// The global perceptron (with the constraint in training) learns the
/// constrained data; the local one ignores the constraint; both return models
/// whose constrained predictions are feasible.
#[test]
fn perceptrons_learn_and_predict_feasible_labelings() {
    let (data, specs) = constrained_data();
    let g = constrained_graph();
    let config = TrainConfig { learning_iterations: 100, ..TrainConfig::default() };
    let global = build_learner(LearnerKind::PerceptronGlobal, &data, &specs, config.clone()).unwrap().train().unwrap();
    let last = global.history.last().unwrap();
    assert_eq!(last.objective, 0.0, "IBT separates globally separable data (mistakes in the last epoch)");
    assert_eq!(last.train_error, Some(0.0));
    let local = build_learner(LearnerKind::PerceptronLocal, &data, &specs, config).unwrap().train().unwrap();
    for model in [&global.model, &local.model] {
        for k in 0..data.len() {
            let theta = model.energies(&data, k).unwrap();
            let y = map_labeling(&g, &theta, k).unwrap();
            assert!(is_feasible(&g, &theta, &y));
        }
    }
    // The smoothed learners train on the same constrained data (the fixed type
    // keeps −∞ on forbidden labelings) and predict feasible labelings.
    for (kind, iterations) in [(LearnerKind::Piecewise, 1), (LearnerKind::Algorithm1, 3)] {
        let smooth =
            TrainConfig { learning_iterations: iterations, evaluate: Evaluate::Never, ..TrainConfig::default() };
        let out = build_learner(kind, &data, &specs, smooth).unwrap().train().unwrap();
        assert!(out.history.iter().all(|r| r.objective.is_finite()), "{kind}");
        for k in 0..data.len() {
            let p = out.model.predict_example(&data, k, &PredictOptions::default()).unwrap();
            let theta = out.model.energies(&data, k).unwrap();
            assert!(is_feasible(&g, &theta, &feasible_decode(&g, &theta, &p.beliefs, k).unwrap()));
        }
    }
}

/// Error rates decode only the singleton beliefs unless their argmax is
/// forbidden; then they decode as a prediction does, from every region's
/// beliefs. On the constrained data, with a model whose beliefs favour
/// forbidden labellings for some examples, the error rate (from zero and
/// warm-started) counts exactly the labels the predictions report.
#[test]
fn error_rates_count_the_labels_predictions_report() {
    let (data, specs) = constrained_data();
    let config = TrainConfig { learning_iterations: 2, evaluate: Evaluate::Never, ..TrainConfig::default() };
    let model = build_learner(LearnerKind::Algorithm1, &data, &specs, config).unwrap().train().unwrap().model;
    let mut fell_back = 0;
    // No iterations (the unaries' argmax, often of odd parity) and a few.
    for opts in
        [PredictOptions { iterations: 0, tolerance: None }, PredictOptions { iterations: 3, tolerance: Some(1e-4) }]
    {
        let (mut wrong, mut total) = (0, 0);
        for k in 0..data.len() {
            let p = model.predict_example(&data, k, &opts).unwrap();
            let truth = data.labels(k).unwrap();
            wrong += p.labels.iter().zip(truth).filter(|(a, b)| a != b).count();
            total += truth.len();
            let argmax = smoothed_inference::decode(data.examples()[k].graph(), &p.beliefs).unwrap();
            fell_back += usize::from(p.labels != argmax);
        }
        let expected = wrong as f64 / total as f64;
        assert_eq!(model.error_rate(&data, &opts).unwrap(), expected);
        // Warm-started from zero messages: the same counts, and the messages left where predictions leave them.
        let mut messages: Vec<Messages> = data.examples().iter().map(|ex| Messages::zeros(ex.graph())).collect();
        assert_eq!(model.error_rate_from(&data, &opts, &mut messages).unwrap(), expected);
        for (k, m) in messages.iter().enumerate() {
            let mut again = Messages::zeros(data.examples()[k].graph());
            model.predict_example_from(&data, k, &opts, &mut again).unwrap();
            assert_eq!(m, &again);
        }
    }
    assert!(fell_back > 0, "no example's beliefs favour a forbidden labelling");
}

/// Untied energies (one `indexed-linear` function per pixel and per pair) on
/// noisy copies of one labelling: every pixel's own bias separates the
/// training set, so without a penalty the weights grow without bound.
fn untied_separable_data() -> (Dataset, Vec<(String, serde_json::Value)>) {
    let base = common::denoising(4, 6, 6, 21);
    let labels = base.examples()[0].labels().map(<[usize]>::to_vec);
    let examples: Vec<Example> = base
        .examples()
        .iter()
        .enumerate()
        .map(|(k, ex)| {
            let unary: Vec<f64> =
                base.features(k, 0).chunks(2).enumerate().flat_map(|(i, r)| [r[0], 1.0, i as f64]).collect();
            let pairwise: Vec<f64> = (0..base.features(k, 1).len() / 2).flat_map(|e| [1.0, e as f64]).collect();
            let features = vec![FeatureBlock { dim: 3, values: unary }, FeatureBlock { dim: 2, values: pairwise }];
            Example::new(ex.name(), ex.graph().clone(), labels.clone(), features)
        })
        .collect();
    let types = vec![FactorTypeInfo::new("unary", 3), FactorTypeInfo::new("pairwise", 2)];
    let data = Dataset::new(types, examples).unwrap();
    let specs = data.factor_types().iter().map(|f| (f.name.clone(), json!({"kind": "indexed-linear"}))).collect();
    (data, specs)
}

/// `R ≥ 0` exactly (docs/MATH.md §4), also on separable data at ε = 0.01
/// where the unpenalised weights become very large and `A(λ, θ)` and
/// `θ(y^k)` nearly cancel: the reported objective never goes below zero.
#[test]
fn objective_stays_non_negative_on_separable_untied_data() {
    let (data, specs) = untied_separable_data();
    for eps in [0.1, 0.01] {
        let config = TrainConfig {
            epsilon: eps,
            learning_iterations: 10,
            message_passing_iterations: 2,
            evaluate: Evaluate::Never,
            ..TrainConfig::default()
        };
        let out = build_learner(LearnerKind::HazanUrtasun, &data, &specs, config).unwrap().train().unwrap();
        for r in &out.history {
            assert!(r.objective >= 0.0, "ε = {eps}, iteration {} step {}: R = {:e}", r.iteration, r.step, r.objective);
        }
    }
}

/// The ridge of Hazan & Urtasun's objective (`"l2"` of the oracle, docs/MATH.md
/// §6.4) keeps the untied weights bounded on separable data at ε = 0.01, and
/// the learner descends the penalised objective `R + Σ_t ε_t (λ/2)‖W_t‖²`
/// monotonically (its gradient steps shrink weights, which raises `R`: they
/// are accepted because the oracle objective compared includes the penalty).
#[test]
fn ridge_bounds_untied_weights_and_the_penalised_objective_falls() {
    let (data, plain) = untied_separable_data();
    let eps = 0.01;
    let largest = |model: &StructuredModel| {
        model.models()[0]
            .as_any()
            .downcast_ref::<oracles::indexed::IndexedLinearModel>()
            .unwrap()
            .parameters()
            .iter()
            .fold(0.0f64, |m, v| m.max(v.abs()))
    };
    let config = TrainConfig {
        epsilon: eps,
        learning_iterations: 40,
        message_passing_iterations: 2,
        evaluate: Evaluate::Never,
        ..TrainConfig::default()
    };
    use oracles::step::LinearInParameters;
    let free = build_learner(LearnerKind::HazanUrtasun, &data, &plain, config.clone()).unwrap().train().unwrap();
    let l2 = 1.0;
    // As on the command line: `--oracle unary=indexed-linear:l2=1`.
    let specs: Vec<_> = plain
        .iter()
        .map(|(t, _)| structlearn::oracle_config::parse_oracle_arg(&format!("{t}=indexed-linear:l2={l2}")).unwrap())
        .collect();
    assert_eq!(specs[0].1, json!({"kind": "indexed-linear", "l2": 1}));
    let mut learner = build_learner(LearnerKind::HazanUrtasun, &data, &specs, config).unwrap();
    let ridge = learner.train().unwrap();
    for w in ridge.history.windows(2) {
        assert!(w[1].objective >= 0.0);
        assert!(w[1].objective <= w[0].objective * (1.0 + 1e-12), "{} → {}", w[0].objective, w[1].objective);
    }
    // Some step shrank the weights: a rejected-forever ridge would never accept one.
    assert!(ridge.history.iter().any(|r| r.rejected == Some(false) && r.iteration > 1));
    let (big, small) = (largest(&free.model), largest(&ridge.model));
    assert!(big > 1e3 && small < 0.1 * big, "largest unary weight: {big} without a ridge, {small} with");
    // The reported value is R plus the penalties of the final functions.
    let total: f64 = ridge
        .model
        .models()
        .iter()
        .map(|m| {
            let w = m.as_any().downcast_ref::<oracles::indexed::IndexedLinearModel>().unwrap();
            eps * oracles::step::ridge(l2, w.parameters())
        })
        .sum();
    let last = ridge.history.last().unwrap().objective;
    assert!(last > total && total > 0.0, "objective {last}, penalties {total}");
}

/// A fixed constraint table that forbids class 0 (the dummy row the
/// perceptron fits it on used to be labelled 0, and the fixed oracle refuses a
/// forbidden label): both perceptrons build and train (Punyakanok's experiment
/// draws such constraint sets for half its seeds).
#[test]
fn perceptrons_take_a_constraint_that_forbids_class_zero() {
    use structlearn::{Executor, OracleRegistry, Perceptron, PerceptronMode};
    let graph = Arc::new(
        factors_with_singletons(vec![2, 2], &[Scope { variables: vec![0, 1], factor_type: "constraint".into() }])
            .unwrap(),
    );
    let ex = |y: Vec<usize>, a: f64, b: f64| {
        Example::new(
            "e",
            graph.clone(),
            Some(y),
            vec![
                FeatureBlock { dim: 4, values: vec![a, 1.0, 0.0, 0.0, 0.0, 0.0, b, 1.0] },
                FeatureBlock { dim: 1, values: vec![1.0] },
            ],
        )
    };
    // Labelings (1, 0), (0, 1), (1, 1): never (0, 0), which the constraint forbids.
    let examples = vec![ex(vec![1, 0], 1.0, -1.0), ex(vec![0, 1], -1.0, 1.0), ex(vec![1, 1], 1.0, 1.0)];
    let data =
        Dataset::new(vec![FactorTypeInfo::new("unary", 4), FactorTypeInfo::new("constraint", 1)], examples).unwrap();
    let specs = [
        ("unary".to_string(), json!({"kind": "linear"})),
        ("constraint".to_string(), json!({"kind": "fixed", "table": [0.0, 0.0, 0.0, 0.0], "forbidden": [0]})),
    ];
    for mode in [PerceptronMode::Local, PerceptronMode::Global] {
        let config = TrainConfig { learning_iterations: 3, ..TrainConfig::default() };
        let oracles = specs.iter().map(|(t, s)| (t.clone(), OracleRegistry::builtin().build(s).unwrap())).collect();
        let perceptron = Perceptron::new(&data, oracles, mode, config).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        Executor::for_solver(perceptron).train().unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    }
}

/// A prediction never reports a labelling the model forbids: three binary
/// variables with symmetric beliefs (every singleton ½, ½) whose most believed
/// labels, all 0 by the smallest-label tie rule, break "0 and 1 differ"; the
/// prediction is an allowed labelling instead, and the error rate counts it.
#[test]
fn predictions_respect_hard_constraints_where_the_beliefs_argmax_does_not() {
    use oracles::fixed::FixedModel;
    use oracles::zero::ZeroModel;
    let scope = |a: usize, b: usize, t: &str| Scope { variables: vec![a, b], factor_type: t.into() };
    let graph = Arc::new(
        factors_with_singletons(vec![2, 2, 2], &[scope(0, 1, "differ"), scope(1, 2, "differ"), scope(0, 2, "equal")])
            .unwrap(),
    );
    let one = |n: usize| FeatureBlock { dim: 1, values: vec![1.0; n] };
    let example = Example::new("cycle", graph.clone(), Some(vec![0, 1, 0]), vec![one(3), one(2), one(1)]);
    let types =
        vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("differ", 1), FactorTypeInfo::new("equal", 1)];
    let data = Dataset::new(types.clone(), vec![example]).unwrap();
    let models: Vec<Box<dyn oracles::Model>> = vec![
        Box::new(ZeroModel { dim: 1, classes: 2 }),
        Box::new(FixedModel::new(1, vec![0.0; 4], vec![0, 3]).unwrap()),
        Box::new(FixedModel::new(1, vec![0.0; 4], vec![1, 2]).unwrap()),
    ];
    let model = StructuredModel::new(data.factor_types().to_vec(), vec![1.0; 3], models).unwrap();
    let p = model.predict_example(&data, 0, &PredictOptions::default()).unwrap();
    let theta = model.energies(&data, 0).unwrap();
    // The beliefs' own argmax is forbidden …
    let argmax = smoothed_inference::decode(&graph, &p.beliefs).unwrap();
    assert_eq!(argmax, vec![0, 0, 0]);
    assert!(!is_feasible(&graph, &theta, &argmax));
    // … the prediction is not.
    assert!(is_feasible(&graph, &theta, &p.labels), "{:?}", p.labels);
    assert_eq!(model.predict(&data, &PredictOptions::default()).unwrap()[0].labels, p.labels);
    let expected = p.labels.iter().zip([0, 1, 0]).filter(|(a, b)| **a != *b).count() as f64 / 3.0;
    assert_eq!(model.error_rate(&data, &PredictOptions::default()).unwrap(), expected);
}
