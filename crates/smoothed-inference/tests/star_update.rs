//! Properties of a single star update (Eq. 10, ch. Thm 1.3, weighted form)
//! and of the dual's gradient.

mod common;

use common::*;
use factor_graph::RegionGraph;
use rand::RngExt;
use smoothed_inference::{InferenceProblem, Messages, Workspace};

/// Graphs of every shape the tests care about: factors over singletons with
/// pairs and triples (mixed cardinalities), a three-level graph (pairs whose
/// parent is a triple), and small grids (binary and 3 labels).
fn test_graphs() -> Vec<RegionGraph> {
    let mut r = rng(7);
    let mut graphs: Vec<RegionGraph> = (0..6).map(|_| random_graph(&mut r, 5, 3, 6, 2)).collect();
    graphs.push(three_level_graph());
    graphs.push(factor_graph::grid(3, 3, 2).unwrap());
    graphs.push(factor_graph::grid(2, 3, 3).unwrap());
    graphs
}

fn random_weights<R: rand::Rng>(rng: &mut R, g: &RegionGraph, lo: f64, hi: f64) -> Vec<f64> {
    (0..g.factor_types().len()).map(|_| lo * (hi / lo).powf(rng.random::<f64>())).collect()
}

/// After a star update at ν every parent's marginal equals ν's belief (to
/// 1e-12), and that common distribution is the normalised weighted geometric
/// mean of the old child belief and old parent marginals (Thm 1.3 / Eq. 1.17
/// with weights ε_ν, ε_η).
#[test]
fn star_update_makes_parents_agree_with_the_weighted_geometric_mean() {
    let mut r = rng(11);
    let mut checked = 0;
    for g in test_graphs() {
        for trial in 0..3 {
            let theta = random_theta(&mut r, &g, 2.0, 0.0);
            let eps = random_weights(&mut r, &g, 0.2, 3.0);
            let p = InferenceProblem::new(&g, &theta, &eps).unwrap();
            let mut m = random_messages(&mut r, &g, 1.0 + trial as f64);
            let mut ws = Workspace::new(&g);
            for child in 0..g.num_regions() {
                let parents = g.parent_edges(child);
                if parents.is_empty() {
                    continue;
                }
                let old = beliefs(&p, &m);
                let ev = p.region_epsilon(child);
                let mut log_mean: Vec<f64> = old[g.config_range(child)].iter().map(|&mu| ev * mu.ln()).collect();
                let mut total = ev;
                for &e in parents {
                    let en = p.region_epsilon(g.edge_parent(e));
                    total += en;
                    for (lm, mu) in log_mean.iter_mut().zip(parent_marginal(&g, e, &old)) {
                        *lm += en * mu.ln();
                    }
                }
                let mean: Vec<f64> = log_mean.iter().map(|v| (v / total).exp()).collect();
                let z: f64 = mean.iter().sum();
                let mean: Vec<f64> = mean.iter().map(|v| v / z).collect();

                p.star_update(&mut m, child, &mut ws).unwrap();
                let new = beliefs(&p, &m);
                let child_belief = &new[g.config_range(child)];
                assert!(max_abs_diff(child_belief, &mean) < 1e-12, "child belief is not the weighted mean");
                for &e in parents {
                    let d = max_abs_diff(&parent_marginal(&g, e, &new), child_belief);
                    assert!(d < 1e-12, "edge {e}: parent marginal differs from child belief by {d}");
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 100);
}

/// With one ε everywhere the update is Eq. 10 literally: compute
/// `δ_η = ε/(1+N)(log μ_ν + Σ log μ_{η'ν}) − ε log μ_{ην}` from normalised
/// beliefs; the implementation's message change may differ from it only by a
/// constant per edge (which changes neither beliefs nor A).
#[test]
fn equal_weights_reduce_to_eq10() {
    let mut r = rng(12);
    for g in test_graphs() {
        let theta = random_theta(&mut r, &g, 1.5, 0.0);
        let eps = 0.7;
        let p = InferenceProblem::uniform(&g, &theta, eps).unwrap();
        let mut m = random_messages(&mut r, &g, 1.0);
        let mut ws = Workspace::new(&g);
        for child in g.default_update_order() {
            let old = beliefs(&p, &m);
            let parents = g.parent_edges(child);
            let n = parents.len() as f64;
            let mut sum_log: Vec<f64> = old[g.config_range(child)].iter().map(|mu| mu.ln()).collect();
            for &e in parents {
                for (s, mu) in sum_log.iter_mut().zip(parent_marginal(&g, e, &old)) {
                    *s += mu.ln();
                }
            }
            let before = m.clone();
            p.star_update(&mut m, child, &mut ws).unwrap();
            for &e in parents {
                let marg = parent_marginal(&g, e, &old);
                let range = g.message_range(e);
                let diffs: Vec<f64> = range
                    .clone()
                    .enumerate()
                    .map(|(y, i)| {
                        let eq10 = eps / (1.0 + n) * sum_log[y] - eps * marg[y].ln();
                        (m.as_slice()[i] - before.as_slice()[i]) - eq10
                    })
                    .collect();
                let spread = diffs.iter().fold(0.0f64, |a, &d| a.max((d - diffs[0]).abs()));
                assert!(spread < 1e-11, "edge {e}: message change differs from Eq. 10 by a non-constant ({spread})");
            }
        }
    }
}

/// `A(λ, θ)` never increases across star updates (random graphs, random
/// starting messages, random child order, many steps, hard constraints).
#[test]
fn dual_never_increases_across_star_updates() {
    let mut r = rng(13);
    for g in test_graphs() {
        for forbid in [0.0, 0.25] {
            let theta = random_theta(&mut r, &g, 3.0, forbid);
            let eps = random_weights(&mut r, &g, 0.05, 5.0);
            let p = InferenceProblem::new(&g, &theta, &eps).unwrap();
            let mut m = random_messages(&mut r, &g, 2.0);
            let mut ws = Workspace::default();
            let mut a = p.dual_value(&m);
            for _ in 0..200 {
                let child = r.random_range(0..g.num_regions());
                p.star_update(&mut m, child, &mut ws).unwrap();
                let a_new = p.dual_value(&m);
                assert!(a_new <= a + 1e-12 * a.abs().max(1.0), "A increased from {a} to {a_new}");
                assert!(all_finite(&m));
                a = a_new;
            }
        }
    }
}

/// Danskin's gradient `μ_{αβ} − μ_β` against central finite differences of A.
#[test]
fn dual_gradient_matches_finite_differences() {
    let mut r = rng(14);
    for g in test_graphs() {
        let theta = random_theta(&mut r, &g, 1.0, 0.1);
        let eps = random_weights(&mut r, &g, 0.3, 2.0);
        let p = InferenceProblem::new(&g, &theta, &eps).unwrap();
        let m = random_messages(&mut r, &g, 0.5);
        let mut grad = vec![0.0; g.total_message_len()];
        p.dual_gradient(&m, &mut grad);
        let h = 1e-5;
        for (i, &analytic) in grad.iter().enumerate() {
            let mut plus = m.clone();
            plus.as_mut_slice()[i] += h;
            let mut minus = m.clone();
            minus.as_mut_slice()[i] -= h;
            let fd = (p.dual_value(&plus) - p.dual_value(&minus)) / (2.0 * h);
            assert!((fd - analytic).abs() < 1e-7, "entry {i}: gradient {analytic} vs finite difference {fd}");
        }
    }
}

/// `new` with every type's weight equal to ε is exactly `uniform(ε)`, and
/// scaling θ and all weights by c scales messages and A by c (the update is
/// homogeneous of degree one).
#[test]
fn equal_per_type_weights_match_uniform_and_scaling_is_homogeneous() {
    let mut r = rng(15);
    for g in test_graphs() {
        let theta = random_theta(&mut r, &g, 1.0, 0.1);
        let types = g.factor_types().len();
        let a = InferenceProblem::new(&g, &theta, &vec![0.3; types]).unwrap();
        let b = InferenceProblem::uniform(&g, &theta, 0.3).unwrap();
        let (mut ma, mut mb) = (Messages::zeros(&g), Messages::zeros(&g));
        let mut ws = Workspace::default();
        for _ in 0..3 {
            a.iterate(&mut ma, &g.default_update_order(), &mut ws);
            b.iterate(&mut mb, &g.default_update_order(), &mut ws);
        }
        assert_eq!(ma, mb);

        let eps: Vec<f64> = (0..types).map(|t| 0.2 + 0.3 * t as f64).collect();
        let c = 4.0;
        let theta_c: Vec<f64> = theta.iter().map(|v| c * v).collect();
        let eps_c: Vec<f64> = eps.iter().map(|v| c * v).collect();
        let p1 = InferenceProblem::new(&g, &theta, &eps).unwrap();
        let pc = InferenceProblem::new(&g, &theta_c, &eps_c).unwrap();
        let (mut m1, mut mc) = (Messages::zeros(&g), Messages::zeros(&g));
        for _ in 0..3 {
            p1.iterate(&mut m1, &g.default_update_order(), &mut ws);
            pc.iterate(&mut mc, &g.default_update_order(), &mut ws);
        }
        let scaled: Vec<f64> = m1.as_slice().iter().map(|v| c * v).collect();
        assert!(max_abs_diff(&scaled, mc.as_slice()) < 1e-10);
        assert!((c * p1.dual_value(&m1) - pc.dual_value(&mc)).abs() < 1e-10);
    }
}

/// The public star update reads θ̃ afresh, so it agrees with the same update
/// done inside `iterate` (which uses the incrementally cached θ̃).
#[test]
fn star_update_agrees_with_iterate() {
    let mut r = rng(16);
    for g in test_graphs() {
        let theta = random_theta(&mut r, &g, 1.0, 0.0);
        let p = InferenceProblem::uniform(&g, &theta, 0.5).unwrap();
        let order = g.default_update_order();
        let mut a = random_messages(&mut r, &g, 1.0);
        let mut b = a.clone();
        let mut ws = Workspace::new(&g);
        p.iterate(&mut a, &order, &mut ws);
        for &c in order.iter().chain(order.iter().rev()) {
            p.star_update(&mut b, c, &mut ws).unwrap();
        }
        assert!(max_abs_diff(a.as_slice(), b.as_slice()) < 1e-11);
    }
}
