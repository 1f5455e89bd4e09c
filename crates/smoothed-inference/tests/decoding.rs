//! Constrained decoding against brute force on small random models with hard
//! constraints: the labelling is feasible whenever one exists, the local
//! search never lowers its score, and the ε = 0 bound is above every score.

mod common;

use common::*;
use rand::RngExt;
use smoothed_inference::decoding::{DecodeOptions, Search, decode_feasible, improve, map_bound, score};
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

/// A random model of `n` variables (cardinalities 2–4) and `factors` scopes
/// of 2–4 variables, `forbid` of each table's entries `−∞` except the planted
/// labelling's (when `planted`), with singletons; returns graph and `θ`.
fn planted_csp(
    rng: &mut impl rand::Rng,
    n: usize,
    factors: usize,
    forbid: f64,
    planted: bool,
) -> (factor_graph::RegionGraph, Vec<f64>) {
    let cards: Vec<usize> = (0..n).map(|_| rng.random_range(2..=4)).collect();
    let mut scopes = Vec::new();
    let mut seen = std::collections::HashSet::new();
    while scopes.len() < factors {
        let arity = rng.random_range(2..=4usize.min(n));
        let vars = distinct_variables(rng, n, arity);
        let mut key = vars.clone();
        key.sort_unstable();
        if seen.insert(key) {
            scopes.push(factor_graph::Scope { variables: vars, factor_type: format!("a{arity}") });
        }
    }
    let g = factor_graph::factors_with_singletons(cards.clone(), &scopes).unwrap();
    let keep: Vec<usize> = cards.iter().map(|&c| rng.random_range(0..c)).collect();
    let mut theta = vec![0.0; g.total_configs()];
    for r in 0..g.num_regions() {
        let range = g.config_range(r);
        let kept = range.start + g.config_of(r, &keep);
        let singleton = g.region_variables(r).len() == 1;
        for i in range {
            let spared = singleton || (planted && i == kept);
            theta[i] = if !spared && rng.random::<f64>() < forbid {
                f64::NEG_INFINITY
            } else {
                2.0 * rng.random::<f64>() - 1.0
            };
        }
    }
    (g, theta)
}

/// Random normalised singleton beliefs (the pairs' and larger regions' are not read).
fn random_beliefs(rng: &mut impl rand::Rng, g: &factor_graph::RegionGraph) -> Vec<f64> {
    let mut b: Vec<f64> = (0..g.total_configs()).map(|_| rng.random::<f64>()).collect();
    for v in 0..g.num_variables() {
        let r = g.singleton(v).unwrap();
        let total: f64 = b[g.config_range(r)].iter().sum();
        b[g.config_range(r)].iter_mut().for_each(|x| *x /= total);
    }
    b
}

#[test]
fn forward_checking_on_planted_csps_with_many_zeros_never_reports_a_forbidden_labelling() {
    let mut rng = rng(37);
    let (mut found, mut gave_up) = (0, 0);
    for model in 0..400 {
        let n = 4 + model % 6;
        // Up to 80 % of every table forbidden, higher-order scopes included.
        let forbid = 0.5 + 0.3 * rng.random::<f64>();
        let (g, theta) = planted_csp(&mut rng, n, n + 2, forbid, true);
        let best = brute_force_max(&g, &theta);
        assert!(best.is_finite());
        let beliefs = random_beliefs(&mut rng, &g);
        // Tiny budgets and the large-region path (regions above 8
        // configurations checked only once fixed) as well as the default.
        for opts in [
            DecodeOptions::default(),
            DecodeOptions { max_backtracks: 2, ..DecodeOptions::default() },
            DecodeOptions { max_check_configs: 8, max_backtracks: 0, ..DecodeOptions::default() },
            DecodeOptions { max_check_configs: 8, max_backtracks: usize::MAX, ..DecodeOptions::default() },
        ] {
            match decode_feasible(&g, &theta, &beliefs, &opts) {
                Ok(d) => {
                    found += 1;
                    assert!(d.score.is_finite(), "reported success on a forbidden labelling {:?}", d.labels);
                    assert_eq!(d.score, score(&g, &theta, &d.labels));
                    assert!(d.score <= best + 1e-9 * best.abs().max(1.0));
                    assert!(d.backtracks <= opts.max_backtracks);
                }
                Err(InferenceError::NoFeasibleLabeling { exhausted, backtracks }) => {
                    // A planted labelling exists: never a claimed proof of
                    // infeasibility, and only when the budget ran out.
                    assert!(!exhausted, "claimed that no labelling is allowed; one is planted");
                    assert!(backtracks >= opts.max_backtracks);
                    assert!(opts.max_backtracks < usize::MAX);
                    gave_up += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    // The two generous budgets always succeed (checked above: unlimited never
    // gives up), and the tiny ones are exercised both ways.
    assert!(found >= 1200 && gave_up >= 50, "found {found}, gave up {gave_up}");
}

#[test]
fn forward_checking_proves_infeasibility_exactly_when_no_labelling_is_allowed() {
    let mut rng = rng(38);
    let (mut infeasible, mut feasible) = (0, 0);
    for model in 0..400 {
        let n = 3 + model % 5;
        // No planted labelling: many of these models allow nothing.
        let (g, theta) = planted_csp(&mut rng, n, n + 1, 0.55, false);
        let best = brute_force_max(&g, &theta);
        let beliefs = random_beliefs(&mut rng, &g);
        for max_check_configs in [1 << 12, 8] {
            let opts = DecodeOptions { max_backtracks: usize::MAX, max_check_configs, ..DecodeOptions::default() };
            match decode_feasible(&g, &theta, &beliefs, &opts) {
                Ok(d) => {
                    assert!(best.is_finite() && d.score.is_finite());
                    assert!(d.score <= best + 1e-9 * best.abs().max(1.0));
                    feasible += 1;
                }
                Err(InferenceError::NoFeasibleLabeling { exhausted: true, .. }) => {
                    assert_eq!(best, f64::NEG_INFINITY, "a labelling scoring {best} exists");
                    infeasible += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    assert!(infeasible >= 100 && feasible >= 100, "{infeasible} infeasible, {feasible} feasible");
}

#[test]
fn both_searches_return_the_argmax_where_nothing_is_forbidden() {
    let mut rng = rng(39);
    for model in 0..100 {
        let n = 3 + model % 6;
        let (g, theta) = planted_csp(&mut rng, n, n, 0.0, true);
        let beliefs = random_beliefs(&mut rng, &g);
        let argmax = decode(&g, &beliefs).unwrap();
        for search in [Search::ForwardChecking, Search::Static] {
            let opts = DecodeOptions { search, local_search_sweeps: 0, ..DecodeOptions::default() };
            let d = decode_feasible(&g, &theta, &beliefs, &opts).unwrap();
            assert_eq!(d.labels, argmax);
            assert_eq!(d.backtracks, 0);
        }
    }
}

/// A chain of equalities `x_0 = x_1 = … = x_k` whose last variable may not
/// take label 1, while every belief favours 1 and `m` free binary variables
/// sit between `x_0` and the rest in order of confidence. The static search
/// assigns `x_0 = 1`, then the free variables, and meets the dead end only at
/// `x_k`: it must undo all `2^m` labellings of the free variables before it
/// reaches `x_0` again. Forward checking removes label 1 from the whole chain
/// before the first assignment.
#[test]
fn forward_checking_solves_at_once_what_the_static_search_gives_up_on() {
    let (k, m) = (6, 20);
    let n = 1 + m + k;
    // Variable 0 is x_0, 1..=m are free, m+1..=m+k are x_1..x_k.
    let chain: Vec<usize> = std::iter::once(0).chain(m + 1..n).collect();
    let scopes: Vec<factor_graph::Scope> = chain
        .windows(2)
        .map(|w| factor_graph::Scope { variables: vec![w[0], w[1]], factor_type: "equal".into() })
        .collect();
    let g = factor_graph::factors_with_singletons(vec![2; n], &scopes).unwrap();
    let mut theta = vec![0.0; g.total_configs()];
    for r in n..g.num_regions() {
        let start = g.config_range(r).start;
        theta[start + 1] = f64::NEG_INFINITY; // (0, 1)
        theta[start + 2] = f64::NEG_INFINITY; // (1, 0)
    }
    theta[g.config_range(g.singleton(n - 1).unwrap()).start + 1] = f64::NEG_INFINITY;
    let mut beliefs = vec![0.0; g.total_configs()];
    for v in 0..n {
        let p = if v == 0 {
            0.9
        } else if v <= m {
            0.8
        } else {
            0.7
        };
        beliefs[g.config_range(g.singleton(v).unwrap())].copy_from_slice(&[1.0 - p, p]);
    }
    let opts = DecodeOptions { local_search_sweeps: 0, ..DecodeOptions::default() };
    let static_search = decode_feasible(&g, &theta, &beliefs, &DecodeOptions { search: Search::Static, ..opts });
    assert!(
        matches!(static_search, Err(InferenceError::NoFeasibleLabeling { exhausted: false, backtracks: 100_000 })),
        "{static_search:?}"
    );
    let d = decode_feasible(&g, &theta, &beliefs, &opts).unwrap();
    assert_eq!(d.backtracks, 0);
    assert!(d.labels[..1].iter().chain(&d.labels[m + 1..]).all(|&y| y == 0));
    assert!(d.labels[1..=m].iter().all(|&y| y == 1), "the free variables keep their most believed label");
    assert!(d.score.is_finite());
}
