//! Constrained decoding against brute force on small random models with hard
//! constraints: the labelling is feasible whenever one exists, the local
//! search never lowers its score, and the ε = 0 bound is above every score.

mod common;

use common::*;
use rand::RngExt;
use smoothed_inference::decoding::{DecodeOptions, decode_feasible, improve, map_bound, score};
use smoothed_inference::{InferenceError, InferenceProblem, Messages, RunOptions, Workspace, decode};

#[test]
fn decoded_labellings_are_feasible_and_certified_by_the_bound() {
    let mut rng = rng(11);
    let (mut plain_forbidden, mut models) = (0, 0);
    for _ in 0..300 {
        let n = 3 + models % 5;
        let g = random_graph(&mut rng, n, 3, 8, 2);
        // Half the configurations forbidden, but one labelling kept feasible.
        let theta = random_theta(&mut rng, &g, 2.0, 0.5);
        let eps = vec![0.2; g.factor_types().len()];
        let Ok(problem) = InferenceProblem::new(&g, &theta, &eps) else { continue };
        let mut messages = Messages::zeros(&g);
        let opts = RunOptions { iterations: 50, tolerance: None, order: None };
        if problem.run(&mut messages, &opts, &mut Workspace::new(&g)).is_err() {
            continue;
        }
        models += 1;
        let beliefs = beliefs(&problem, &messages);
        let best = brute_force_max(&g, &theta);
        assert!(best.is_finite());
        let plain = decode(&g, &beliefs).unwrap();
        if score(&g, &theta, &plain) == f64::NEG_INFINITY {
            plain_forbidden += 1;
        }
        let unlimited = DecodeOptions { max_backtracks: usize::MAX, ..DecodeOptions::default() };
        let d = decode_feasible(&g, &theta, &beliefs, &unlimited).unwrap();
        assert!(d.score.is_finite(), "a feasible labelling exists, but {:?} is forbidden", d.labels);
        assert_eq!(d.score, score(&g, &theta, &d.labels));
        assert!(d.score <= best + 1e-9 * best.abs().max(1.0));
        let bound = map_bound(&problem, &messages);
        assert!(bound >= best - 1e-9 * best.abs().max(1.0), "bound {bound} below the best score {best}");
        // Without the local search the score is not higher; the search only raises it.
        let raw =
            decode_feasible(&g, &theta, &beliefs, &DecodeOptions { local_search_sweeps: 0, ..unlimited }).unwrap();
        assert!(raw.score <= d.score);
        let mut labels = raw.labels.clone();
        improve(&g, &theta, &mut labels, 100);
        assert!(score(&g, &theta, &labels) >= raw.score);
        // Beliefs far from converged (random): their argmaxes are often
        // forbidden; the constrained decoding still finds a feasible labelling.
        let noisy: Vec<f64> = (0..g.total_configs()).map(|_| rng.random::<f64>()).collect();
        if score(&g, &theta, &decode(&g, &noisy).unwrap()) == f64::NEG_INFINITY {
            plain_forbidden += 1;
        }
        let d = decode_feasible(&g, &theta, &noisy, &unlimited).unwrap();
        assert!(d.score.is_finite() && d.score <= best + 1e-9 * best.abs().max(1.0));
    }
    assert!(models >= 200, "only {models} models ran");
    // The constraint path is exercised: independent argmaxes were often forbidden.
    assert!(plain_forbidden >= 10, "the plain decoding was forbidden on only {plain_forbidden} of {models} models");
}

#[test]
fn no_feasible_labelling_is_an_error_not_an_answer() {
    // Two binary variables whose pair forbids every configuration.
    let g = factor_graph::factors_with_singletons(
        vec![2, 2],
        &[factor_graph::Scope { variables: vec![0, 1], factor_type: "c".into() }],
    )
    .unwrap();
    let mut theta = vec![0.0; g.total_configs()];
    theta[g.config_range(2)].fill(f64::NEG_INFINITY);
    let beliefs = vec![0.5; g.total_configs()];
    let err = decode_feasible(&g, &theta, &beliefs, &DecodeOptions::default()).unwrap_err();
    assert!(matches!(err, InferenceError::NoFeasibleLabeling { exhausted: true, .. }), "{err}");
    // A budget of zero backtracks gives up at the first dead end.
    theta[g.config_range(2).start] = 0.0; // only (0, 0) allowed
    let mut beliefs = vec![0.0; g.total_configs()];
    beliefs[g.config_range(0)].copy_from_slice(&[0.3, 0.7]);
    beliefs[g.config_range(1)].copy_from_slice(&[0.4, 0.6]);
    let found = decode_feasible(&g, &theta, &beliefs, &DecodeOptions::default()).unwrap();
    assert_eq!(found.labels, vec![0, 0]);
    // Forward checking alone finds it: variable 0 = 1 leaves the pair no allowed configuration.
    assert_eq!(found.backtracks, 0);
    assert!(decode_feasible(&g, &theta, &beliefs[..3], &DecodeOptions::default()).is_err());
}
