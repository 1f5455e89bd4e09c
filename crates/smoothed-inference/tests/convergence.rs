//! Message passing to convergence: Theorem 1 bounds on trees, agreement with an
//! independent minimiser of the dual, hard constraints, extreme ε, fast paths,
//! batches.

mod common;

use common::*;
use factor_graph::{RegionGraph, RegionGraphBuilder, Scope, factors_with_singletons};
use rand::RngExt;
use smoothed_inference::{InferenceProblem, Messages, RunOptions, Workspace, run_batch};

fn converge(p: &InferenceProblem, tol: f64) -> (Messages, smoothed_inference::RunReport) {
    let g = p.graph();
    let mut m = Messages::zeros(g);
    let opts = RunOptions { iterations: 20_000, tolerance: Some(tol), order: None };
    let report = p.run(&mut m, &opts, &mut Workspace::new(g)).unwrap();
    assert!(report.converged, "no convergence: {report:?}");
    (m, report)
}

fn scope(v: &[usize], t: &str) -> Scope {
    Scope { variables: v.to_vec(), factor_type: t.into() }
}

/// Tree-structured region graphs: a chain, a star, and a tree with a triple
/// region (mixed cardinalities).
fn trees() -> Vec<RegionGraph> {
    vec![
        factors_with_singletons(
            vec![2, 3, 2, 4, 2],
            &[scope(&[0, 1], "p"), scope(&[1, 2], "p"), scope(&[3, 2], "p"), scope(&[3, 4], "p")],
        )
        .unwrap(),
        factors_with_singletons(
            vec![3, 2, 2, 3, 2],
            &[scope(&[0, 1], "p"), scope(&[2, 0], "p"), scope(&[0, 3], "q"), scope(&[4, 0], "q")],
        )
        .unwrap(),
        factors_with_singletons(
            vec![2, 3, 2, 2, 3, 2],
            &[scope(&[0, 1, 2], "t"), scope(&[2, 3], "p"), scope(&[1, 4], "p"), scope(&[5, 4], "p")],
        )
        .unwrap(),
    ]
}

/// Theorem 1 (docs/MATH.md §2): at convergence on a tree the LP relaxation is tight, so
/// `max_y θ(y) ≤ A ≤ max_y θ(y) + Σ_α ε_α log|Y_α|`, with the maximum by
/// enumeration; also with hard constraints.
#[test]
fn tree_dual_is_within_theorem_1_bounds() {
    let mut r = rng(21);
    for g in trees() {
        for (eps, forbid) in [(1.0, 0.0), (0.1, 0.0), (0.01, 0.2), (0.3, 0.3)] {
            let theta = random_theta(&mut r, &g, 2.0, forbid);
            let p = InferenceProblem::uniform(&g, &theta, eps).unwrap();
            let (_, report) = converge(&p, 1e-9);
            let best = brute_force_max(&g, &theta);
            let h_max: f64 = (0..g.num_regions()).map(|a| (g.num_configs(a) as f64).ln()).sum();
            assert!(best <= report.dual_value + 1e-9, "A = {} below max θ = {best}", report.dual_value);
            assert!(report.dual_value <= best + eps * h_max + 1e-9, "A = {} above the bound", report.dual_value);
        }
    }
}

/// Small loopy graphs with mixed cardinalities, triples, a three-level graph
/// and −∞ entries: the converged A and beliefs equal those of an independent
/// minimiser of the smooth convex dual (damped Newton, written in the test
/// helpers, using only `dual_value` and `dual_gradient`) to 1e-8.
#[test]
fn converged_dual_matches_an_independent_minimiser() {
    let mut r = rng(22);
    let mut graphs = vec![
        factors_with_singletons(
            vec![2, 3, 2, 3],
            &[
                scope(&[0, 1], "p"),
                scope(&[1, 2], "p"),
                scope(&[2, 3], "p"),
                scope(&[3, 0], "p"),
                scope(&[0, 2, 3], "t"),
            ],
        )
        .unwrap(),
        three_level_graph(),
        factor_graph::grid(2, 2, 3).unwrap(),
    ];
    graphs.push(random_graph(&mut r, 4, 3, 5, 2));
    for g in graphs {
        for forbid in [0.0, 0.15] {
            let theta = loop {
                let theta = random_theta(&mut r, &g, 1.5, forbid);
                if supports_every_child_value(&g, &theta) {
                    break theta;
                }
            };
            assert_eq!(forbid > 0.0, theta.iter().any(|t| t.is_infinite()));
            let eps: Vec<f64> = (0..g.factor_types().len()).map(|_| 0.2 + r.random::<f64>()).collect();
            let p = InferenceProblem::new(&g, &theta, &eps).unwrap();
            let (m, report) = converge(&p, 1e-13);
            let gd = newton_on_dual(&p, 1e-12, 200);
            let a_gd = p.dual_value(&gd);
            assert!(
                (report.dual_value - a_gd).abs() < 1e-8,
                "A: message passing {} vs Newton {a_gd}",
                report.dual_value
            );
            let d = max_abs_diff(&beliefs(&p, &m), &beliefs(&p, &gd));
            assert!(d < 1e-8, "beliefs differ by {d}");
        }
    }
}

/// Zero table entries (θ = −∞, as from a UAI file) on a loopy graph: messages
/// stay finite, A never increases, message passing converges and forbidden
/// configurations get belief exactly 0.
#[test]
fn zero_table_entries_stay_finite_and_converge() {
    let mut r = rng(23);
    for g in [factor_graph::grid(3, 4, 3).unwrap(), random_graph(&mut r, 6, 3, 8, 2)] {
        let theta = random_theta(&mut r, &g, 2.0, 0.4);
        for eps in [1.0, 0.1, 0.01] {
            let p = InferenceProblem::uniform(&g, &theta, eps).unwrap();
            let mut m = Messages::zeros(&g);
            let mut ws = Workspace::new(&g);
            let mut a = p.dual_value(&m);
            let order = g.default_update_order();
            for _ in 0..300 {
                p.iterate(&mut m, &order, &mut ws);
                assert!(all_finite(&m));
                let a_new = p.dual_value(&m);
                assert!(a_new <= a + 1e-12 * a.abs().max(1.0), "A increased from {a} to {a_new}");
                a = a_new;
            }
            let b = beliefs(&p, &m);
            for (i, &t) in theta.iter().enumerate() {
                if t == f64::NEG_INFINITY {
                    assert_eq!(b[i], 0.0);
                }
            }
            assert!(b.iter().all(|v| v.is_finite()));
            assert!(p.max_violation(&m) < 1e-6, "violation {}", p.max_violation(&m));
        }
    }
}

/// A 5-variable constraint region (Punyakanok et al., docs/MATH.md §6.5) whose
/// forbidden labelings are −∞: half of the 32 labelings, chosen so that
/// variable 0 can never be 1 (the clamp must engage: a child value becomes
/// impossible). Every star update keeps messages finite and A non-increasing;
/// at convergence μ_0(1) is (numerically) zero and the singletons agree with
/// the big region.
#[test]
fn five_variable_constraint_region_forbidding_half_the_labelings() {
    let mut r = rng(24);
    let mut b = RegionGraphBuilder::new(vec![2; 5]).unwrap();
    let unary = b.add_factor_type("unary").unwrap();
    let constraint = b.add_factor_type("constraint").unwrap();
    for i in 0..5 {
        b.add_region(&[i], unary).unwrap();
    }
    let big = b.add_region(&[0, 1, 2, 3, 4], constraint).unwrap();
    for i in 0..5 {
        b.add_edge(big, i).unwrap();
    }
    let g = b.build().unwrap();
    for (case, eps) in [(0, 1.0), (1, 0.1), (2, 1e-3), (3, 0.1)] {
        let mut theta = vec![0.0; g.total_configs()];
        for i in 0..5 {
            for y in 0..2 {
                theta[g.config_range(i).start + y] = 3.0 * (2.0 * r.random::<f64>() - 1.0);
            }
        }
        // Configuration index: variable 0 is the most significant bit.
        let start = g.config_range(big).start;
        for c in 0..32 {
            let forbidden = if case == 3 { (c * 7 + 3) % 32 < 16 && c != 5 } else { c >= 16 };
            theta[start + c] = if forbidden { f64::NEG_INFINITY } else { 0.0 };
        }
        let p = InferenceProblem::new(&g, &theta, &[eps, eps]).unwrap();
        let mut m = Messages::zeros(&g);
        let mut ws = Workspace::new(&g);
        let mut a = p.dual_value(&m);
        for step in 0..200 {
            p.star_update(&mut m, step % 5, &mut ws).unwrap();
            assert!(all_finite(&m), "non-finite message after step {step}");
            let a_new = p.dual_value(&m);
            assert!(a_new.is_finite());
            assert!(a_new <= a + 1e-12 * a.abs().max(1.0), "A increased from {a} to {a_new} at step {step}");
            a = a_new;
        }
        let bel = beliefs(&p, &m);
        assert!(bel.iter().all(|v| v.is_finite()));
        if case != 3 {
            assert!(bel[g.config_range(0).start + 1] < 1e-200, "μ_0(1) = {}", bel[g.config_range(0).start + 1]);
        }
        for e in 0..g.num_edges() {
            let d = max_abs_diff(&parent_marginal(&g, e, &bel), &bel[g.config_range(g.edge_child(e))]);
            assert!(d < 1e-9, "edge {e} violates marginalisation by {d}");
        }
        // One region over all variables: the relaxation is exact, A(θ) ≥ max θ.
        let best = brute_force_max(&g, &theta);
        let h_max: f64 = (0..g.num_regions()).map(|a| (g.num_configs(a) as f64).ln()).sum();
        assert!(best <= a + 1e-9 && a <= best + eps * h_max + 1e-9, "A = {a}, max θ = {best}");
    }
}

/// ε from 10 down to 1e-3 with potentials of size up to 10: no overflow, no
/// NaN, A finite and non-increasing over iterations.
#[test]
fn extreme_epsilons_neither_overflow_nor_produce_nan() {
    let mut r = rng(25);
    let g = factor_graph::grid(5, 6, 3).unwrap();
    let g2 = three_level_graph();
    for graph in [&g, &g2] {
        for scale in [0.5, 10.0] {
            let theta = random_theta(&mut r, graph, scale, 0.1);
            for eps in [10.0, 1.0, 0.1, 0.01, 1e-3] {
                let p = InferenceProblem::uniform(graph, &theta, eps).unwrap();
                let mut m = Messages::zeros(graph);
                let mut ws = Workspace::default();
                let mut a = p.dual_value(&m);
                for _ in 0..30 {
                    p.iterate(&mut m, &graph.default_update_order(), &mut ws);
                    assert!(all_finite(&m));
                    let a_new = p.dual_value(&m);
                    assert!(a_new.is_finite() && a_new <= a + 1e-12 * a.abs().max(1.0), "ε = {eps}: {a} -> {a_new}");
                    a = a_new;
                }
                assert!(beliefs(&p, &m).iter().all(|v| v.is_finite() && *v >= 0.0));
            }
        }
    }
}

/// The specialised star updates (binary grid, singleton children) give the
/// general edge-map path's results on random θ, with and without −∞ entries,
/// for binary and 8-label grids, and singleton children of triples.
#[test]
fn fast_paths_equal_the_general_path() {
    let mut r = rng(26);
    let graphs = [
        factor_graph::grid(6, 7, 2).unwrap(),
        factor_graph::grid(4, 5, 8).unwrap(),
        random_graph(&mut r, 6, 4, 8, 2),
        three_level_graph(),
    ];
    for g in &graphs {
        for (eps, forbid) in [(1.0, 0.0), (0.05, 0.0), (0.3, 0.2), (1e-3, 0.1)] {
            let theta = random_theta(&mut r, g, 2.0, forbid);
            let fast = InferenceProblem::uniform(g, &theta, eps).unwrap();
            let general = InferenceProblem::uniform(g, &theta, eps).unwrap().with_fast_paths(false);
            let (mut mf, mut mg) = (Messages::zeros(g), Messages::zeros(g));
            let mut ws = Workspace::new(g);
            for _ in 0..10 {
                fast.iterate(&mut mf, &g.default_update_order(), &mut ws);
                general.iterate(&mut mg, &g.default_update_order(), &mut ws);
            }
            let scale = mg.as_slice().iter().fold(1.0f64, |a, v| a.max(v.abs()));
            let d = max_abs_diff(mf.as_slice(), mg.as_slice());
            assert!(d <= 1e-12 * scale, "ε = {eps}, forbid = {forbid}: paths differ by {d} (scale {scale})");
            let (af, ag) = (fast.dual_value(&mf), general.dual_value(&mg));
            assert!((af - ag).abs() <= 1e-12 * af.abs().max(1.0));
        }
    }
}

/// `run` stops as soon as the tolerance is met and reports the values at the
/// final messages; zero iterations report the starting point.
#[test]
fn run_reports_and_stops_at_tolerance() {
    let mut r = rng(27);
    let g = factor_graph::grid(4, 4, 3).unwrap();
    let theta = random_theta(&mut r, &g, 1.0, 0.0);
    let p = InferenceProblem::uniform(&g, &theta, 0.5).unwrap();
    let mut ws = Workspace::default();

    let mut m = Messages::zeros(&g);
    let zero = p.run(&mut m, &RunOptions { iterations: 0, tolerance: None, order: None }, &mut ws).unwrap();
    assert_eq!(zero.iterations, 0);
    assert_eq!(m, Messages::zeros(&g));
    assert!((zero.dual_value - p.dual_value(&m)).abs() < 1e-12);
    assert!(!zero.converged);

    let report =
        p.run(&mut m, &RunOptions { iterations: 10_000, tolerance: Some(1e-8), order: None }, &mut ws).unwrap();
    assert!(report.converged && report.iterations < 10_000 && report.iterations > 1);
    assert!(report.max_violation < 1e-8);
    assert!((report.max_violation - p.max_violation(&m)).abs() < 1e-15);
    assert!((report.dual_value - p.dual_value(&m)).abs() < 1e-12 * report.dual_value.abs());
    assert!(report.dual_value < zero.dual_value);

    // A reversed order converges to the same optimum (the dual is strictly convex in the beliefs).
    let mut order = g.default_update_order();
    order.reverse();
    let mut m2 = Messages::zeros(&g);
    let opts = RunOptions { iterations: 10_000, tolerance: Some(1e-10), order: Some(order) };
    let r2 = p.run(&mut m2, &opts, &mut ws).unwrap();
    assert!((r2.dual_value - report.dual_value).abs() < 1e-7);
}

/// One region's offsets equal its slice of the whole graph's, bit for bit —
/// also where a region's edges to parents and to children interleave in index
/// order (the edges below are added so that they do, and so that a merge
/// taking either list first would sum in a different order).
#[test]
fn region_message_offsets_equal_the_whole_graph_slice_bit_for_bit() {
    let mut r = rng(29);
    let interleaved = {
        let mut b = RegionGraphBuilder::new(vec![2, 3, 2, 3]).unwrap();
        let t = b.add_factor_type("t").unwrap();
        let s: Vec<usize> = (0..4).map(|i| b.add_region(&[i], t).unwrap()).collect();
        let p01 = b.add_region(&[0, 1], t).unwrap();
        let p12 = b.add_region(&[1, 2], t).unwrap();
        let top = b.add_region(&[0, 1, 2], t).unwrap();
        let p23 = b.add_region(&[2, 3], t).unwrap();
        b.add_edge(p01, s[0]).unwrap();
        b.add_edge(top, p01).unwrap();
        b.add_edge(p01, s[1]).unwrap();
        b.add_edge(p12, s[2]).unwrap();
        b.add_edge(top, p12).unwrap();
        b.add_edge(p12, s[1]).unwrap();
        b.add_edge(p23, s[3]).unwrap();
        b.add_edge(p23, s[2]).unwrap();
        b.build().unwrap()
    };
    for g in [three_level_graph(), interleaved, factor_graph::grid(3, 4, 3).unwrap()] {
        for scale in [1.0, 1e6] {
            let m = random_messages(&mut r, &g, scale);
            let mut all = vec![0.0; g.total_configs()];
            smoothed_inference::message_offsets(&g, &m, &mut all);
            for region in 0..g.num_regions() {
                let mut one = vec![f64::NAN; g.num_configs(region)];
                smoothed_inference::region_message_offsets(&g, &m, region, &mut one);
                let want = &all[g.config_range(region)];
                assert!(
                    one.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "region {region}: {one:?} vs {want:?}"
                );
            }
        }
    }
}

/// `θ̃ = θ + message_offsets`, as `reparameterized` returns it.
#[test]
fn message_offsets_give_the_reparameterisation() {
    let mut r = rng(28);
    let g = three_level_graph();
    let theta = random_theta(&mut r, &g, 1.0, 0.2);
    let p = InferenceProblem::uniform(&g, &theta, 0.3).unwrap();
    let m = random_messages(&mut r, &g, 1.0);
    let mut off = vec![0.0; g.total_configs()];
    smoothed_inference::message_offsets(&g, &m, &mut off);
    let mut tt = vec![0.0; g.total_configs()];
    p.reparameterized(&m, &mut tt);
    for i in 0..tt.len() {
        let want = theta[i] + off[i];
        assert!(want == tt[i] || (want - tt[i]).abs() < 1e-12, "config {i}: {want} vs {}", tt[i]);
    }
    // Hand-checked entry: pair region {1,0} (region 4) receives nothing from children
    // other than its singletons' messages and gives to the triple.
    let pair = 4;
    let e_in: Vec<usize> = g.child_edges(pair).to_vec();
    let e_out: Vec<usize> = g.parent_edges(pair).to_vec();
    let config = 4; // y_1 = 2, y_0 = 0
    let mut want = 0.0;
    for &e in &e_in {
        want += m.as_slice()[g.message_range(e).start + g.edge_map(e)[config] as usize];
    }
    for &e in &e_out {
        want -= m.as_slice()[g.message_range(e).start + config];
    }
    assert!((off[g.config_range(pair).start + config] - want).abs() < 1e-15);
}

/// `run_batch` gives exactly the sequential runs, on the global pool and on
/// pools of one and two threads.
#[test]
fn run_batch_equals_sequential_runs_exactly() {
    let mut r = rng(29);
    let g = factor_graph::grid(8, 9, 2).unwrap();
    let thetas: Vec<Vec<f64>> = (0..7).map(|_| random_theta(&mut r, &g, 1.0, 0.05)).collect();
    let problems: Vec<InferenceProblem> =
        thetas.iter().map(|t| InferenceProblem::uniform(&g, t, 0.1).unwrap()).collect();
    let start: Vec<Messages> = (0..7).map(|_| random_messages(&mut r, &g, 0.5)).collect();
    let opts = RunOptions { iterations: 7, tolerance: Some(1e-30), order: None };
    let mut sequential = start.clone();
    let mut ws = Workspace::default();
    let want: Vec<_> =
        problems.iter().zip(sequential.iter_mut()).map(|(p, m)| p.run(m, &opts, &mut ws).unwrap()).collect();
    for threads in [0, 1, 2] {
        let mut batch = start.clone();
        let got = if threads == 0 {
            run_batch(&problems, &mut batch, &opts).unwrap()
        } else {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| run_batch(&problems, &mut batch, &opts)).unwrap()
        };
        assert_eq!(got, want);
        assert_eq!(batch, sequential);
    }
}

/// The factored star update (singleton children of plain pairs, docs/MATH.md
/// §3) equals the general path on graphs that mix cardinalities (2, 3, 5, 8),
/// with `−∞` entries and potentials so steep at small `ε` that whole rows of
/// the precomputed exponentials underflow (the log-domain fallback), through
/// `run` with a tolerance (which must refresh the stale parent potentials
/// before each check).
#[test]
fn factored_stars_equal_the_general_path_through_run() {
    let mut r = rng(28);
    let s = |v: &[usize]| Scope { variables: v.to_vec(), factor_type: "pair".into() };
    let mixed = factors_with_singletons(
        vec![2, 3, 5, 8, 8, 3],
        &[s(&[0, 1]), s(&[1, 2]), s(&[2, 3]), s(&[3, 4]), s(&[4, 5]), s(&[5, 0]), s(&[1, 4])],
    )
    .unwrap();
    let graphs = [
        factor_graph::grid(5, 4, 8).unwrap(),
        factor_graph::grid(3, 4, 3).unwrap(),
        factor_graph::grid(5, 6, 2).unwrap(),
        mixed,
    ];
    for g in &graphs {
        for (eps, scale, forbid) in [(1.0, 2.0, 0.0), (0.05, 60.0, 0.0), (0.1, 3.0, 0.3), (2.0, 0.5, 0.1)] {
            let theta = random_theta(&mut r, g, scale, forbid);
            let eps_types = vec![eps; g.factor_types().len()];
            let fast = InferenceProblem::new(g, &theta, &eps_types).unwrap();
            let general = InferenceProblem::new(g, &theta, &eps_types).unwrap().with_fast_paths(false);
            let opts = RunOptions { iterations: 40, tolerance: Some(1e-9), order: None };
            let (mut mf, mut mg) = (Messages::zeros(g), Messages::zeros(g));
            let mut ws = Workspace::new(g);
            let rf = fast.run(&mut mf, &opts, &mut ws).unwrap();
            let rg = general.run(&mut mg, &opts, &mut ws).unwrap();
            let scale_m = mg.as_slice().iter().fold(1.0f64, |a, v| a.max(v.abs()));
            let d = max_abs_diff(mf.as_slice(), mg.as_slice());
            assert!(d <= 1e-12 * scale_m, "ε = {eps}, scale = {scale}: messages differ by {d} (scale {scale_m})");
            assert_eq!(rf.iterations, rg.iterations, "ε = {eps}, scale = {scale}");
            assert!((rf.dual_value - rg.dual_value).abs() <= 1e-12 * rg.dual_value.abs().max(1.0));
            assert!(
                (rf.max_violation - rg.max_violation).abs() <= 1e-10,
                "{} vs {}",
                rf.max_violation,
                rg.max_violation
            );
            let (bf, bg) = (beliefs(&fast, &mf), beliefs(&general, &mg));
            assert!(max_abs_diff(&bf, &bg) <= 1e-12, "beliefs differ by {}", max_abs_diff(&bf, &bg));
        }
    }
}

/// A graph with several kinds of star: binary pixels (the binary kernel, which
/// reads and writes its parents' `θ̃`), some of them under pairs that have a
/// triple above them, beside a 3-label triangle (factored: its stars leave
/// their parents' `θ̃` stale). Every sweep must start from the right `θ̃` for
/// all of them.
#[test]
fn binary_and_factored_stars_in_one_graph_equal_the_general_path() {
    let mut r = rng(29);
    let mut b = RegionGraphBuilder::new(vec![2, 2, 2, 2, 3, 3, 3, 2, 2]).unwrap();
    let unary = b.add_factor_type("unary").unwrap();
    let pair = b.add_factor_type("pair").unwrap();
    let triple = b.add_factor_type("triple").unwrap();
    let s: Vec<usize> = (0..9).map(|i| b.add_region(&[i], unary).unwrap()).collect();
    let mut pairs = Vec::new();
    for (u, v) in [(0, 1), (1, 2), (2, 3), (4, 5), (5, 6), (6, 4), (7, 8)] {
        let p = b.add_region(&[u, v], pair).unwrap();
        b.add_edge(p, s[u]).unwrap();
        b.add_edge(p, s[v]).unwrap();
        pairs.push(p);
    }
    let t = b.add_region(&[0, 1, 2], triple).unwrap();
    b.add_edge(t, pairs[0]).unwrap();
    b.add_edge(t, pairs[1]).unwrap();
    let g = b.build().unwrap();
    for tolerance in [None, Some(1e-9)] {
        for (eps, scale, forbid) in [(1.0, 2.0, 0.0), (0.1, 3.0, 0.2)] {
            let theta = random_theta(&mut r, &g, scale, forbid);
            let eps_types = vec![eps; g.factor_types().len()];
            let fast = InferenceProblem::new(&g, &theta, &eps_types).unwrap();
            let general = InferenceProblem::new(&g, &theta, &eps_types).unwrap().with_fast_paths(false);
            let opts = RunOptions { iterations: 30, tolerance, order: None };
            let (mut mf, mut mg) = (Messages::zeros(&g), Messages::zeros(&g));
            // A workspace that held another problem's potentials before.
            let mut ws = Workspace::new(&g);
            general.run(&mut Messages::zeros(&g), &opts, &mut ws).unwrap();
            let rf = fast.run(&mut mf, &opts, &mut ws).unwrap();
            let rg = general.run(&mut mg, &opts, &mut Workspace::new(&g)).unwrap();
            let d = max_abs_diff(mf.as_slice(), mg.as_slice());
            assert!(d <= 1e-10, "{tolerance:?}, ε = {eps}: messages differ by {d}");
            assert!((rf.dual_value - rg.dual_value).abs() <= 1e-10 * rg.dual_value.abs().max(1.0));
            let mut m = Messages::zeros(&g);
            let mut ws = Workspace::new(&g);
            for _ in 0..3 {
                fast.iterate(&mut m, &g.default_update_order(), &mut ws);
            }
            let mut mg = Messages::zeros(&g);
            let mut wg = Workspace::new(&g);
            for _ in 0..3 {
                general.iterate(&mut mg, &g.default_update_order(), &mut wg);
            }
            let d = max_abs_diff(m.as_slice(), mg.as_slice());
            assert!(d <= 1e-10, "iterate, ε = {eps}: messages differ by {d}");
        }
    }
}
