//! Typed errors, decoding, and property tests over random region graphs.

mod common;

use common::*;
use factor_graph::{GraphError, Scope, factors_with_singletons};
use proptest::prelude::*;
use smoothed_inference::{InferenceError, InferenceProblem, Messages, RunOptions, Workspace, decode, run_batch};

#[test]
fn invalid_inputs_give_typed_errors() {
    let g = factor_graph::grid(2, 2, 2).unwrap();
    let n = g.total_configs();
    let theta = vec![0.0; n];

    let short = vec![0.0; n - 1];
    assert_eq!(
        InferenceProblem::uniform(&g, &short, 1.0).unwrap_err(),
        InferenceError::ThetaShape { expected: n, got: n - 1 }
    );

    for bad in [f64::NAN, f64::INFINITY] {
        let mut t = theta.clone();
        let region = 5; // the second pair
        t[g.config_range(region).start + 2] = bad;
        match InferenceProblem::uniform(&g, &t, 1.0).unwrap_err() {
            InferenceError::InvalidTheta { region: r, config: 2, value } => {
                assert_eq!(r, region);
                assert!(value.is_nan() || value == f64::INFINITY);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    let mut t = theta.clone();
    for i in g.config_range(3) {
        t[i] = f64::NEG_INFINITY;
    }
    assert_eq!(InferenceProblem::uniform(&g, &t, 1.0).unwrap_err(), InferenceError::InfeasibleRegion { region: 3 });

    assert_eq!(
        InferenceProblem::new(&g, &theta, &[1.0]).unwrap_err(),
        InferenceError::WeightCount { expected: 2, got: 1 }
    );
    for (bad, ty) in [(0.0, 1), (-1.0, 0), (f64::INFINITY, 1)] {
        let mut eps = [1.0, 1.0];
        eps[ty] = bad;
        assert_eq!(
            InferenceProblem::new(&g, &theta, &eps).unwrap_err(),
            InferenceError::InvalidEpsilon { factor_type: ty, value: bad }
        );
    }
    assert!(matches!(
        InferenceProblem::new(&g, &theta, &[1.0, f64::NAN]).unwrap_err(),
        InferenceError::InvalidEpsilon { factor_type: 1, .. }
    ));

    let p = InferenceProblem::uniform(&g, &theta, 1.0).unwrap();
    let mut ws = Workspace::default();
    let mut m = Messages::zeros(&g);
    let nr = g.num_regions();
    assert_eq!(
        p.star_update(&mut m, nr, &mut ws).unwrap_err(),
        InferenceError::UnknownRegion { region: nr, num_regions: nr }
    );

    let total = g.total_message_len();
    assert_eq!(
        Messages::from_vec(&g, vec![0.0; total + 1]).unwrap_err(),
        InferenceError::MessageShape { expected: total, got: total + 1 }
    );
    let mut bad = vec![0.0; total];
    bad[3] = f64::NAN;
    assert!(matches!(Messages::from_vec(&g, bad).unwrap_err(), InferenceError::InvalidMessage { index: 3, .. }));

    let other = factor_graph::grid(3, 2, 2).unwrap();
    let mut wrong = Messages::zeros(&other);
    let expected = InferenceError::MessageShape { expected: total, got: other.total_message_len() };
    assert_eq!(p.star_update(&mut wrong, 0, &mut ws).unwrap_err(), expected);
    assert_eq!(p.run(&mut wrong, &RunOptions::default(), &mut ws).unwrap_err(), expected);

    m.as_mut_slice()[0] = f64::INFINITY;
    assert!(matches!(
        p.run(&mut m, &RunOptions::default(), &mut ws).unwrap_err(),
        InferenceError::InvalidMessage { index: 0, .. }
    ));
    m.reset();

    let opts = RunOptions { order: Some(vec![0, 4]), ..RunOptions::default() };
    assert!(matches!(
        p.run(&mut m, &opts, &mut ws).unwrap_err(),
        InferenceError::InvalidOrder(GraphError::InvalidOrder(ref s)) if s.contains("region 4")
    ));
    let opts = RunOptions { order: Some(vec![99]), ..RunOptions::default() };
    assert!(matches!(p.run(&mut m, &opts, &mut ws).unwrap_err(), InferenceError::InvalidOrder(_)));

    assert_eq!(
        run_batch(std::slice::from_ref(&p), &mut [], &RunOptions::default()).unwrap_err(),
        InferenceError::BatchSize { problems: 1, messages: 0 }
    );
    let mut batch = vec![Messages::zeros(&g), wrong.clone()];
    assert!(run_batch(&[p.clone(), p.clone()], &mut batch, &RunOptions::default()).is_err());
    assert_eq!(batch[0], Messages::zeros(&g), "nothing runs when validation fails");

    assert_eq!(decode(&g, &[0.5; 3]).unwrap_err(), InferenceError::BeliefShape { expected: n, got: 3 });
    // A graph without a singleton for variable 2.
    let s = |v: &[usize]| Scope { variables: v.to_vec(), factor_type: "p".into() };
    let g2 = factors_with_singletons(vec![2, 2], &[s(&[0, 1])]).unwrap();
    assert!(decode(&g2, &vec![0.5; g2.total_configs()]).is_ok());
    let mut b = factor_graph::RegionGraphBuilder::new(vec![2, 2, 2]).unwrap();
    let t = b.add_factor_type("t").unwrap();
    b.add_region(&[0], t).unwrap();
    b.add_region(&[1], t).unwrap();
    b.add_region(&[1, 2], t).unwrap();
    let g3 = b.build().unwrap();
    assert_eq!(
        decode(&g3, &vec![0.25; g3.total_configs()]).unwrap_err(),
        InferenceError::MissingSingleton { variable: 2 }
    );

    // Error messages name the offending index.
    let msg = InferenceError::InvalidTheta { region: 7, config: 3, value: f64::NAN }.to_string();
    assert!(msg.contains("region 7") && msg.contains("configuration 3"), "{msg}");
}

#[test]
fn decode_takes_the_argmax_of_singleton_beliefs() {
    let g = factor_graph::grid(1, 3, 3).unwrap();
    let mut beliefs = vec![0.0; g.total_configs()];
    for (i, y) in [2usize, 0, 1].iter().enumerate() {
        let range = g.config_range(i);
        for (k, v) in beliefs[range].iter_mut().enumerate() {
            *v = if k == *y { 0.6 } else { 0.2 };
        }
    }
    assert_eq!(decode(&g, &beliefs).unwrap(), vec![2, 0, 1]);
    // Ties go to the smallest label.
    beliefs[g.config_range(1)].copy_from_slice(&[0.4, 0.4, 0.2]);
    assert_eq!(decode(&g, &beliefs).unwrap(), vec![2, 0, 1]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random factor graphs (random scopes of 2–3 variables, cardinalities
    /// 1–4, several factor types), random per-type weights and ε in [1e-3, 10],
    /// random hard constraints: after every star update the messages are
    /// finite, A has not increased, and every parent's marginal equals the
    /// child's belief.
    #[test]
    fn star_updates_on_random_graphs(
        seed in any::<u64>(),
        n in 2usize..6,
        factors in 1usize..7,
        log_eps in -3.0f64..1.0,
        spread in 0.0f64..1.0,
        forbid in prop_oneof![Just(0.0), 0.0f64..0.4],
        scale in 0.1f64..5.0,
    ) {
        let mut r = rng(seed);
        let g = random_graph(&mut r, n, 4, factors, 3);
        let types = g.factor_types().len();
        let eps: Vec<f64> = (0..types)
            .map(|t| (10f64.powf(log_eps) * (1.0 + 3.0 * spread * t as f64)).clamp(1e-3, 10.0))
            .collect();
        let theta = random_theta(&mut r, &g, scale, forbid);
        let p = InferenceProblem::new(&g, &theta, &eps).unwrap();
        let mut m = random_messages(&mut r, &g, scale);
        let mut ws = Workspace::default();
        let mut a = p.dual_value(&m);
        let order = g.default_update_order();
        for step in 0..3 * order.len() {
            let child = order[step % order.len()];
            p.star_update(&mut m, child, &mut ws).unwrap();
            prop_assert!(all_finite(&m));
            let a_new = p.dual_value(&m);
            prop_assert!(a_new.is_finite());
            prop_assert!(a_new <= a + 1e-12 * a.abs().max(1.0), "A increased from {} to {}", a, a_new);
            a = a_new;
            let b = beliefs(&p, &m);
            prop_assert!(b.iter().all(|v| v.is_finite()));
            for &e in g.parent_edges(child) {
                let d = max_abs_diff(&parent_marginal(&g, e, &b), &b[g.config_range(child)]);
                prop_assert!(d < 1e-12, "edge {} violates marginalisation by {}", e, d);
            }
        }
    }
}

/// A region over 20 000 variables (three of them free, the rest of
/// cardinality 1) with a singleton child per variable: building the problem
/// used to take O(k²) (the child's stride looked up by scanning the parent per
/// edge). Fixed variables change no belief, so the beliefs must be those of
/// the same model over the three free variables alone.
#[test]
fn a_region_of_20000_variables_matches_its_free_variables() {
    use rand::RngExt;
    let k = 20_000;
    let free = [7, k / 2, k - 1];
    let mut cards = vec![1; k];
    for (&v, c) in free.iter().zip([2, 3, 2]) {
        cards[v] = c;
    }
    let wide_graph =
        factors_with_singletons(cards, &[Scope { variables: (0..k).collect(), factor_type: "wide".into() }]).unwrap();
    let small_graph =
        factors_with_singletons(vec![2, 3, 2], &[Scope { variables: vec![0, 1, 2], factor_type: "wide".into() }])
            .unwrap();
    let mut r = rng(5);
    let region_theta: Vec<f64> = (0..12).map(|_| r.random_range(-2.0..2.0)).collect();
    let single_theta: Vec<Vec<f64>> =
        [2, 3, 2].iter().map(|&c| (0..c).map(|_| r.random_range(-2.0..2.0)).collect()).collect();
    let solve = |g: &factor_graph::RegionGraph, region: usize, vars: &[usize]| {
        let mut theta = vec![0.0; g.total_configs()];
        theta[g.config_range(region)].copy_from_slice(&region_theta);
        for (&v, t) in vars.iter().zip(&single_theta) {
            theta[g.config_range(v)].copy_from_slice(t);
        }
        let problem = InferenceProblem::uniform(g, &theta, 0.7).unwrap();
        let mut messages = Messages::zeros(g);
        let opts = RunOptions { iterations: 500, tolerance: Some(1e-11), order: None };
        let report = problem.run(&mut messages, &opts, &mut Workspace::new(g)).unwrap();
        assert!(report.converged, "{report:?}");
        let mut beliefs = vec![0.0; g.total_configs()];
        problem.beliefs(&messages, &mut beliefs);
        let mut out: Vec<f64> = beliefs[g.config_range(region)].to_vec();
        for &v in vars {
            out.extend_from_slice(&beliefs[g.config_range(v)]);
        }
        (out, beliefs)
    };
    let (wide, wide_beliefs) = solve(&wide_graph, k, &free);
    let (small, _) = solve(&small_graph, 3, &[0, 1, 2]);
    // A fixed variable's singleton believes its one label.
    assert_eq!(wide_beliefs[wide_graph.config_range(3)], [1.0]);
    for (i, (w, s)) in wide.iter().zip(&small).enumerate() {
        assert!((w - s).abs() < 1e-8, "belief {i}: {w} vs {s}");
    }
}
