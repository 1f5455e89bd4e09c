//! Constrained decoding against brute force on small random models with hard
//! constraints: the labelling is feasible whenever one exists, the local
//! search never lowers its score, and the ε = 0 bound is above every score —
//! with either label order ([`LabelOrder`]); the region order follows the
//! region potentials where the singletons tie, and finds the MAP labelling of
//! trees at small ε.

mod common;

use common::*;
use rand::RngExt;
use smoothed_inference::decoding::{
    DecodeOptions, LabelOrder, Search, decode_feasible, decode_feasible_from, improve, map_bound, score,
};
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
        // The region order, from θ̃ and from ln μ: as feasible, as bounded.
        let mut reparameterized = vec![0.0; g.total_configs()];
        problem.reparameterized(&messages, &mut reparameterized);
        let regions = DecodeOptions { label_order: LabelOrder::Regions, ..unlimited };
        let by_regions = decode_feasible_from(&g, &theta, &beliefs, &reparameterized, &regions).unwrap();
        for d in [&by_regions, &decode_feasible(&g, &theta, &beliefs, &regions).unwrap()] {
            assert!(d.score.is_finite(), "a feasible labelling exists, but {:?} is forbidden", d.labels);
            assert_eq!(d.score, score(&g, &theta, &d.labels));
            assert!(d.score <= best + 1e-9 * best.abs().max(1.0));
        }
        // Both orders: the better of the two labellings, the singleton's at a tie.
        let both = DecodeOptions { label_order: LabelOrder::Both, ..unlimited };
        let b = decode_feasible_from(&g, &theta, &beliefs, &reparameterized, &both).unwrap();
        assert_eq!(b.score, d.score.max(by_regions.score));
        assert_eq!(b.labels, if by_regions.score > d.score { &by_regions.labels } else { &d.labels }.clone());
        assert_eq!(b.backtracks, d.backtracks + by_regions.backtracks);
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
        // Random region scores for the region order: finite where θ is.
        let scores: Vec<f64> = theta.iter().enumerate().map(|(i, &t)| t + ((i * 7919) % 13) as f64 / 6.0).collect();
        // Tiny budgets and the large-region path (regions above 8
        // configurations checked only once fixed) as well as the default,
        // each with both label orders (the region order from ln μ and from
        // given scores).
        for (opts, from_scores) in [
            DecodeOptions::default(),
            DecodeOptions { max_backtracks: 2, ..DecodeOptions::default() },
            DecodeOptions { max_check_configs: 8, max_backtracks: 0, ..DecodeOptions::default() },
            DecodeOptions { max_check_configs: 8, max_backtracks: usize::MAX, ..DecodeOptions::default() },
        ]
        .into_iter()
        .flat_map(|o| {
            [
                (o, false),
                (DecodeOptions { label_order: LabelOrder::Regions, ..o }, false),
                (DecodeOptions { label_order: LabelOrder::Regions, ..o }, true),
                (DecodeOptions { label_order: LabelOrder::Both, ..o }, true),
            ]
        }) {
            let decoded = if from_scores {
                decode_feasible_from(&g, &theta, &beliefs, &scores, &opts)
            } else {
                decode_feasible(&g, &theta, &beliefs, &opts)
            };
            match decoded {
                Ok(d) => {
                    found += 1;
                    assert!(d.score.is_finite(), "reported success on a forbidden labelling {:?}", d.labels);
                    assert_eq!(d.score, score(&g, &theta, &d.labels));
                    assert!(d.score <= best + 1e-9 * best.abs().max(1.0));
                    // Both orders: each search within its own budget.
                    let searches = if opts.label_order == LabelOrder::Both { 2 } else { 1 };
                    assert!(d.backtracks <= opts.max_backtracks.saturating_mul(searches));
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
    assert!(found >= 4800 && gave_up >= 150, "found {found}, gave up {gave_up}");
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
        for (max_check_configs, label_order) in [
            (1 << 12, LabelOrder::Singleton),
            (8, LabelOrder::Singleton),
            (1 << 12, LabelOrder::Regions),
            (1 << 12, LabelOrder::Both),
        ] {
            let opts = DecodeOptions {
                max_backtracks: usize::MAX,
                max_check_configs,
                label_order,
                ..DecodeOptions::default()
            };
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
fn both_searches_return_the_argmax_where_nothing_is_forbidden_with_the_singleton_order() {
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

/// Two binary variables whose pair prefers them to differ (`θ = 3` on (0, 1)
/// and (1, 0)) and no singleton preference: by symmetry their beliefs tie at
/// every ε. The singleton order gives both the tie's first label, (0, 0),
/// which the pair scores 0; the region order, having assigned `y_0 = 0`,
/// ranks `y_1` by `θ̃_{01}(0, y_1) + θ̃_1(y_1)` and picks 1 (score 3). Also
/// on a triangle, where the pairs cannot all be satisfied (at most 2 of 3).
#[test]
fn the_region_order_follows_the_pairs_where_the_singletons_tie() {
    for n in [2usize, 3] {
        let scopes: Vec<factor_graph::Scope> = (0..n)
            .flat_map(|a| {
                (a + 1..n).map(move |b| factor_graph::Scope { variables: vec![a, b], factor_type: "p".into() })
            })
            .collect();
        let g = factor_graph::factors_with_singletons(vec![2; n], &scopes).unwrap();
        let mut theta = vec![0.0; g.total_configs()];
        for r in n..g.num_regions() {
            theta[g.config_range(r)].copy_from_slice(&[0.0, 3.0, 3.0, 0.0]);
        }
        let best = brute_force_max(&g, &theta);
        for eps in [1.0, 0.1] {
            let problem = InferenceProblem::new(&g, &theta, &vec![eps; g.factor_types().len()]).unwrap();
            let mut messages = Messages::zeros(&g);
            let run = RunOptions { iterations: 500, tolerance: Some(1e-10), order: None };
            problem.run(&mut messages, &run, &mut Workspace::new(&g)).unwrap();
            let beliefs = beliefs(&problem, &messages);
            for v in 0..n {
                let mu = &beliefs[g.config_range(g.singleton(v).unwrap())];
                assert!((mu[0] - mu[1]).abs() < 1e-9, "the singletons should tie: {mu:?}");
            }
            let mut reparameterized = vec![0.0; g.total_configs()];
            problem.reparameterized(&messages, &mut reparameterized);
            let opts = DecodeOptions { local_search_sweeps: 0, ..DecodeOptions::default() };
            let singleton = decode_feasible_from(&g, &theta, &beliefs, &reparameterized, &opts).unwrap();
            assert_eq!(singleton.labels, vec![0; n]);
            assert_eq!(singleton.score, 0.0);
            let opts = DecodeOptions { label_order: LabelOrder::Regions, ..opts };
            let regions = decode_feasible_from(&g, &theta, &beliefs, &reparameterized, &opts).unwrap();
            assert_eq!(regions.labels[..2], [0, 1], "ε = {eps}, n = {n}");
            assert_eq!(regions.score, best, "ε = {eps}, n = {n}: {:?}", regions.labels);
            // ln μ of the pair beliefs ranks the same at one ε (up to
            // rounding where θ̃ ties exactly: the triangle's last variable).
            let from_beliefs = decode_feasible(&g, &theta, &beliefs, &opts).unwrap();
            assert_eq!(from_beliefs.labels[..2], [0, 1]);
            assert_eq!(from_beliefs.score, best);
            // Both orders keep the region order's labelling, which scores more.
            let opts = DecodeOptions { label_order: LabelOrder::Both, ..opts };
            let both = decode_feasible_from(&g, &theta, &beliefs, &reparameterized, &opts).unwrap();
            assert_eq!(both.labels, regions.labels);
        }
    }
}

/// Every labelling's score, best first.
fn all_scores(g: &factor_graph::RegionGraph, theta: &[f64]) -> Vec<f64> {
    let n = g.num_variables();
    let total: usize = g.cardinalities().iter().product();
    let mut scores: Vec<f64> = (0..total)
        .map(|mut k| {
            let labels: Vec<usize> = (0..n)
                .map(|v| {
                    let y = k % g.cardinality(v);
                    k /= g.cardinality(v);
                    y
                })
                .collect();
            score(g, theta, &labels)
        })
        .collect();
    scores.sort_by(|a, b| b.total_cmp(a));
    scores
}

/// On trees (pairwise, random potentials, some `−∞`) the relaxation is tight;
/// at ε = 0.01 the region order, from `θ̃` and without the local search,
/// returns the MAP labelling wherever it is unique by a margin of 0.2.
#[test]
fn the_region_order_finds_the_map_labelling_of_trees_at_small_eps() {
    let mut rng = rng(41);
    let mut compared = 0;
    for model in 0..200 {
        let n = 3 + model % 5;
        let cards: Vec<usize> = (0..n).map(|_| rng.random_range(2..=3)).collect();
        let scopes: Vec<factor_graph::Scope> = (1..n)
            .map(|v| factor_graph::Scope { variables: vec![rng.random_range(0..v), v], factor_type: "p".into() })
            .collect();
        let g = factor_graph::factors_with_singletons(cards, &scopes).unwrap();
        let theta: Vec<f64> = (0..g.total_configs())
            .map(|i| {
                let pair = i >= g.config_range(n - 1).end;
                if pair && rng.random::<f64>() < 0.15 { f64::NEG_INFINITY } else { 4.0 * rng.random::<f64>() - 2.0 }
            })
            .collect();
        let scores = all_scores(&g, &theta);
        if !(scores[0].is_finite() && scores[0] - scores[1] > 0.2) {
            continue;
        }
        let Ok(problem) = InferenceProblem::new(&g, &theta, &vec![0.01; g.factor_types().len()]) else { continue };
        let mut messages = Messages::zeros(&g);
        let run = RunOptions { iterations: 2000, tolerance: Some(1e-9), order: None };
        if problem.run(&mut messages, &run, &mut Workspace::new(&g)).is_err() {
            continue;
        }
        let beliefs = beliefs(&problem, &messages);
        let mut reparameterized = vec![0.0; g.total_configs()];
        problem.reparameterized(&messages, &mut reparameterized);
        let opts =
            DecodeOptions { label_order: LabelOrder::Regions, local_search_sweeps: 0, ..DecodeOptions::default() };
        let d = decode_feasible_from(&g, &theta, &beliefs, &reparameterized, &opts).unwrap();
        assert_eq!(d.score, scores[0], "model {model}: {:?} is not the MAP labelling", d.labels);
        compared += 1;
    }
    assert!(compared >= 100, "only {compared} trees had a unique MAP labelling");
}
