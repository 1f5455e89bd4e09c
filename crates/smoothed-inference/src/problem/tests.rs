use super::dispatch::dispatch_check;
#[cfg(target_arch = "x86_64")]
use super::dispatch::{simd, simd512};
use super::run::out_of_reach;
use super::*;
use crate::star;
use factor_graph::{Scope, factors_with_singletons};
use fastmath::Plain;
use rand::{RngExt, SeedableRng};

/// Singletons of four variables (2–4 values), a third-order factor and two
/// pairs: a region graph that is neither a grid nor binary.
fn general_graph() -> RegionGraph {
    let s = |v: &[usize], t: &str| Scope { variables: v.to_vec(), factor_type: t.into() };
    factors_with_singletons(vec![2, 3, 4, 2], &[s(&[0, 1, 2], "t"), s(&[3, 1], "p"), s(&[2, 3], "p")]).unwrap()
}

/// Potentials uniform in [−2, 2], each `−∞` with probability `hard`; every
/// region's first configuration is 0, so the all-zero labelling is feasible.
fn random_theta(g: &RegionGraph, rng: &mut rand_chacha::ChaCha8Rng, hard: f64) -> Vec<f64> {
    let mut theta: Vec<f64> = (0..g.total_configs())
        .map(|_| if rng.random::<f64>() < hard { f64::NEG_INFINITY } else { rng.random::<f64>() * 4.0 - 2.0 })
        .collect();
    for r in 0..g.num_regions() {
        theta[g.config_range(r).start] = 0.0;
    }
    theta
}

/// Which kernel each star gets: binary grids the binary kernel, the
/// 8-label grid its fixed factored kernel, other multi-label grids the
/// general factored one, and pixels of pairs that have a parent of their
/// own (which cannot be factored) the singleton kernel.
#[test]
fn star_kinds_follow_the_graph() {
    let kinds = |g: &RegionGraph| {
        let theta = vec![0.0; g.total_configs()];
        let p = InferenceProblem::uniform(g, &theta, 1.0).unwrap();
        let singles = (0..g.num_regions()).filter(|&r| g.region_variables(r).len() == 1);
        singles.map(|r| p.plan.children[r].kind).collect::<Vec<_>>()
    };
    let all = |g: RegionGraph, kind: StarKind| assert!(kinds(&g).iter().all(|&k| k == kind), "{kind:?}");
    all(factor_graph::grid(4, 3, 2).unwrap(), StarKind::Binary);
    all(factor_graph::grid(4, 3, 8).unwrap(), StarKind::Factored8);
    all(factor_graph::grid(4, 3, 3).unwrap(), StarKind::Factored);
    // 3-label pairs {0,1}, {1,2} under a triple, {2,3} beside them: not
    // factored (the pairs have a parent), and so neither is 3 (its
    // sibling 2 is not).
    let mut b = factor_graph::RegionGraphBuilder::new(vec![3; 4]).unwrap();
    let (unary, pair, triple) =
        (b.add_factor_type("u").unwrap(), b.add_factor_type("p").unwrap(), b.add_factor_type("t").unwrap());
    let s: Vec<usize> = (0..4).map(|i| b.add_region(&[i], unary).unwrap()).collect();
    let mut pairs = Vec::new();
    for (u, v) in [(0, 1), (1, 2), (2, 3)] {
        let p = b.add_region(&[u, v], pair).unwrap();
        b.add_edge(p, s[u]).unwrap();
        b.add_edge(p, s[v]).unwrap();
        pairs.push(p);
    }
    let t = b.add_region(&[0, 1, 2], triple).unwrap();
    b.add_edge(t, pairs[0]).unwrap();
    b.add_edge(t, pairs[1]).unwrap();
    assert_eq!(kinds(&b.build().unwrap()), vec![StarKind::Singleton; 4]);
}

/// The periodic check's violation (one pass, parents' `θ̃` on the fly when
/// stale) equals the reported one up to rounding: binary, factored
/// (8-label, stale parents) and general graphs, with `−∞` potentials.
#[test]
fn check_violation_equals_max_violation() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let graphs = [
        factor_graph::grid(6, 7, 2).unwrap(),
        factor_graph::grid(5, 4, 8).unwrap(),
        factor_graph::grid(3, 4, 3).unwrap(),
        general_graph(),
    ];
    for g in &graphs {
        for hard in [0.0, 0.1] {
            let theta = random_theta(g, &mut rng, hard);
            let p = InferenceProblem::uniform(g, &theta, 0.2).unwrap();
            let (mut m, mut ws) = (Messages::zeros(g), Workspace::new(g));
            let order = g.default_update_order();
            for sweeps in 0..4 {
                let expected = p.max_violation(&m);
                let total = g.total_configs();
                let stale = p.leaves_stale_parents();
                let mut tt = vec![0.0; total];
                p.refresh_all(m.as_slice(), &mut tt);
                let mut beliefs = vec![0.0; total];
                let scratch = (&mut ws.e[..], &mut ws.sums[..]);
                let got = dispatch_check(&p, m.as_slice(), &tt, stale, &mut beliefs, scratch);
                assert!((got - expected).abs() <= 1e-14, "after {sweeps} sweeps: {got} vs {expected}");
                // The children's θ̃ as a full refresh writes it, bit for bit.
                let mut children_only = vec![f64::NAN; total];
                p.refresh_children(m.as_slice(), &mut children_only);
                for (r, cp) in p.plan.children.iter().enumerate() {
                    if cp.first < cp.end && g.child_edges(r).is_empty() {
                        let range = cp.offset..cp.offset + cp.len;
                        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&children_only[range.clone()]), bits(&tt[range]));
                    }
                }
                if stale {
                    // Parents' θ̃ really recomputed: garbage there must not matter.
                    for cp in p.plan.children.iter().filter(|c| c.first < c.end) {
                        for ep in &p.plan.edges[cp.first..cp.end] {
                            tt[ep.parent_offset..ep.parent_offset + ep.parent_len].fill(f64::NAN);
                        }
                    }
                    let scratch = (&mut ws.e[..], &mut ws.sums[..]);
                    let again = dispatch_check(&p, m.as_slice(), &tt, stale, &mut beliefs, scratch);
                    assert_eq!(again.to_bits(), got.to_bits());
                }
                p.iterate(&mut m, &order, &mut ws);
            }
        }
    }
}

/// The report's beliefs (AVX2 build where available) and its violation
/// (strided sums for singleton children) are bit for bit the portable,
/// index-map computation.
#[test]
fn report_is_the_portable_computation_bit_for_bit() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    let graphs = [factor_graph::grid(6, 7, 2).unwrap(), factor_graph::grid(5, 4, 8).unwrap(), general_graph()];
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for g in &graphs {
        let theta = random_theta(g, &mut rng, 0.1);
        let p = InferenceProblem::uniform(g, &theta, 0.05).unwrap();
        let (mut m, mut ws) = (Messages::zeros(g), Workspace::new(g));
        p.iterate(&mut m, &g.default_update_order(), &mut ws);
        let total = g.total_configs();
        let mut tt = vec![0.0; total];
        p.refresh_all(m.as_slice(), &mut tt);
        let (mut fast, mut portable) = (vec![0.0; total], vec![0.0; total]);
        let dual = p.beliefs_of(&tt, &mut fast, &mut []);
        let dual_portable = p.beliefs_with(&tt, &mut portable, &mut []);
        assert_eq!(dual.to_bits(), dual_portable.to_bits());
        assert_eq!(bits(&fast), bits(&portable));
        let (violation, _) = p.violation_and_dual_of(&tt, &mut fast, &mut vec![0.0; total], &mut []);
        let mut worst = 0.0f64;
        let mut marg = vec![0.0; total];
        for e in 0..g.num_edges() {
            let child = &portable[g.config_range(g.edge_child(e))];
            let mm = &mut marg[..child.len()];
            marginalise(g, e, &portable, mm);
            for (&a, &b) in mm.iter().zip(child) {
                worst = worst.max((a - b).abs());
            }
        }
        assert_eq!(violation.to_bits(), worst.to_bits());
    }
}

/// The AVX-512 check of binary grids is the AVX2 check bit for bit
/// (grids of odd and even pair counts, a chain, `−∞` potentials, several
/// weights; after 0–3 sweeps), and only binary pair graphs get it.
#[cfg(target_arch = "x86_64")]
#[test]
fn binary_pair_check_equals_the_avx2_check_bit_for_bit() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
    let chain = {
        let s = |v: &[usize]| Scope { variables: v.to_vec(), factor_type: if v.len() == 1 { "u" } else { "p" }.into() };
        // Pairs in both variable orders, so the first variable is sometimes the larger index.
        factors_with_singletons(vec![2; 5], &[s(&[0, 1]), s(&[2, 1]), s(&[2, 3]), s(&[4, 3])]).unwrap()
    };
    let graphs = [factor_graph::grid(6, 7, 2).unwrap(), factor_graph::grid(3, 4, 2).unwrap(), chain];
    for g in &graphs {
        for (hard, eps) in [(0.0, 0.2), (0.1, 0.05), (0.2, 1.0)] {
            let theta = random_theta(g, &mut rng, hard);
            let p = InferenceProblem::uniform(g, &theta, eps).unwrap();
            assert_eq!(
                p.plan.binary_pairs.len(),
                (0..g.num_regions()).filter(|&r| !g.child_edges(r).is_empty()).count()
            );
            if !fastmath::x86::avx512() {
                continue;
            }
            let (mut m, mut ws) = (Messages::zeros(g), Workspace::new(g));
            let order = g.default_update_order();
            let total = g.total_configs();
            for sweeps in 0..4 {
                let mut tt = vec![0.0; total];
                p.refresh_all(m.as_slice(), &mut tt);
                let (mut b512, mut b2) = (vec![0.0; total], vec![0.0; total]);
                // SAFETY: AVX-512 F, AVX2 and FMA are available (checked above).
                let fast = unsafe { simd512::check_binary(&p, &tt, &mut b512) };
                let scratch = (&mut ws.e[..], &mut ws.sums[..]);
                // SAFETY: as above.
                let avx2 = unsafe { simd::check_violation(&p, m.as_slice(), &tt, false, &mut b2, scratch) };
                assert_eq!(fast.to_bits(), avx2.to_bits(), "{fast} vs {avx2}");
                // From zero messages the random potentials disagree somewhere.
                assert!(sweeps > 0 || fast > 0.0);
                p.iterate(&mut m, &order, &mut ws);
            }
        }
    }
    for g in [factor_graph::grid(3, 3, 3).unwrap(), factor_graph::grid(3, 3, 8).unwrap(), general_graph()] {
        let theta = vec![0.0; g.total_configs()];
        assert!(InferenceProblem::uniform(&g, &theta, 1.0).unwrap().plan.binary_pairs.is_empty());
    }
}

/// `run_and_decode` leaves the messages `run` leaves and returns the
/// iterations it reports and the labels `decode` reads from its beliefs,
/// bit for bit: binary and 8-label grids and a general graph, `−∞`
/// potentials, budgets that stop early at the tolerance and that run out;
/// and a graph without singletons is `decode`'s error before any work.
#[test]
fn run_and_decode_is_run_then_decode() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(21);
    let graphs = [factor_graph::grid(6, 5, 2).unwrap(), factor_graph::grid(4, 5, 8).unwrap(), general_graph()];
    let mut stopped_early = false;
    for g in &graphs {
        for (hard, eps, iterations, tolerance) in
            [(0.0, 0.5, 40, Some(1e-3)), (0.1, 0.05, 7, Some(1e-9)), (0.1, 0.2, 3, None)]
        {
            let theta = random_theta(g, &mut rng, hard);
            let p = InferenceProblem::uniform(g, &theta, eps).unwrap();
            let opts = RunOptions { iterations, tolerance, order: None };
            let (mut a, mut b, mut ws) = (Messages::zeros(g), Messages::zeros(g), Workspace::new(g));
            let (done, labels) = p.run_and_decode(&mut a, &opts, &mut ws).unwrap();
            let report = p.run(&mut b, &opts, &mut ws).unwrap();
            stopped_early |= report.iterations < iterations;
            assert_eq!(done, report.iterations);
            assert_eq!(labels, crate::decode(g, ws.beliefs()).unwrap());
            let bits = |m: &Messages| m.as_slice().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a), bits(&b));
        }
    }
    assert!(stopped_early);
    let mut b = factor_graph::RegionGraphBuilder::new(vec![2, 2]).unwrap();
    let t = b.add_factor_type("p").unwrap();
    b.add_region(&[0, 1], t).unwrap();
    let g = b.build().unwrap();
    let theta = vec![0.0; g.total_configs()];
    let p = InferenceProblem::uniform(&g, &theta, 1.0).unwrap();
    let (mut m, mut ws) = (Messages::zeros(&g), Workspace::new(&g));
    let err = p.run_and_decode(&mut m, &RunOptions::default(), &mut ws).unwrap_err();
    assert!(matches!(err, InferenceError::MissingSingleton { variable: 0 }), "{err:?}");
}

/// Problems on one shared [`ProblemPlan`] are the problems
/// [`InferenceProblem::new`] builds, bit for bit: several `θ` on each plan
/// (binary and 8-label grids, a general graph; `−∞` potentials), run with
/// the default order (whose schedule the first problem builds and the
/// others reuse, in threads at once) and with a shuffled one; and a plan
/// checks `θ` and the weights as `new` does.
#[test]
fn shared_plans_give_the_problems_new_builds_bit_for_bit() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(13);
    let graphs = [factor_graph::grid(7, 6, 2).unwrap(), factor_graph::grid(5, 4, 8).unwrap(), general_graph()];
    let bits = |m: &Messages| m.as_slice().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for g in graphs {
        let eps: Vec<f64> = (0..g.factor_types().len()).map(|t| 0.05 + 0.1 * t as f64).collect();
        let mut shuffled = g.default_update_order();
        shuffled.reverse();
        shuffled.swap(0, 2);
        let thetas: Vec<Vec<f64>> = (0..4).map(|_| random_theta(&g, &mut rng, 0.1)).collect();
        let plan = ProblemPlan::new(Arc::new(g.clone()), &eps).unwrap();
        let run = |p: &InferenceProblem<'_>, order: &Option<Vec<usize>>| {
            let (mut m, mut ws) = (Messages::zeros(&g), Workspace::new(&g));
            let opts = RunOptions { iterations: 7, tolerance: Some(1e-9), order: order.clone() };
            let report = p.run(&mut m, &opts, &mut ws).unwrap();
            (bits(&m), report.dual_value.to_bits(), report.max_violation.to_bits(), ws.beliefs().to_vec())
        };
        for order in [None, Some(shuffled)] {
            let planned: Vec<_> = std::thread::scope(|s| {
                let handles: Vec<_> = thetas
                    .iter()
                    .map(|theta| s.spawn(|| run(&InferenceProblem::planned(&plan, theta).unwrap(), &order)))
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for (theta, got) in thetas.iter().zip(planned) {
                let want = run(&InferenceProblem::new(&g, theta, &eps).unwrap(), &order);
                assert_eq!(got.0, want.0);
                assert_eq!((got.1, got.2), (want.1, want.2));
                assert_eq!(
                    got.3.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    want.3.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
                );
            }
        }
        let mut bad = thetas[0].clone();
        bad[3] = f64::NAN;
        assert!(matches!(InferenceProblem::planned(&plan, &bad), Err(InferenceError::InvalidTheta { .. })));
        assert!(matches!(InferenceProblem::planned(&plan, &bad[1..]), Err(InferenceError::ThetaShape { .. })));
        let mut zero = eps.clone();
        zero[0] = 0.0;
        assert!(matches!(
            ProblemPlan::new(Arc::new(g.clone()), &zero),
            Err(InferenceError::InvalidEpsilon { factor_type: 0, .. })
        ));
        assert!(matches!(ProblemPlan::new(Arc::new(g.clone()), &eps[1..]), Err(InferenceError::WeightCount { .. })));
        assert_eq!(plan.epsilon(), &eps[..]);
    }
}

/// The check schedule: skipped only when two checks show a falling
/// violation that cannot reach the tolerance in time even twice as fast.
#[test]
fn checks_are_skipped_only_when_out_of_reach() {
    // 1e-2 → 5e-3 over 5 iterations: 1e-6 needs ≈ 61 more; at twice the rate ≈ 31.
    assert!(out_of_reach(Some((5, 1e-2)), (10, 5e-3), 1e-6, 25));
    assert!(!out_of_reach(Some((5, 1e-2)), (10, 5e-3), 1e-6, 200));
    // Fast enough: 1e-2 → 1e-4 in 5 iterations, 1e-6 ≈ 5 more.
    assert!(!out_of_reach(Some((5, 1e-2)), (10, 1e-4), 1e-6, 25));
    // One check, or a violation that is not falling: keep checking.
    assert!(!out_of_reach(None, (5, 1e-2), 1e-6, 25));
    assert!(!out_of_reach(Some((5, 1e-3)), (10, 2e-3), 1e-6, 25));
    // A run that converges still stops early and reports it (binary grid, weak coupling).
    let g = factor_graph::grid(8, 8, 2).unwrap();
    let theta: Vec<f64> = (0..g.total_configs()).map(|i| (i % 7) as f64 * 0.05).collect();
    let p = InferenceProblem::uniform(&g, &theta, 1.0).unwrap();
    let (mut m, mut ws) = (Messages::zeros(&g), Workspace::new(&g));
    let r = p.run(&mut m, &RunOptions { iterations: 500, tolerance: Some(1e-9), order: None }, &mut ws).unwrap();
    assert!(r.converged && r.iterations < 500 && r.iterations.is_multiple_of(TOLERANCE_CHECK_EVERY), "{r:?}");
}

/// The AVX2 and AVX-512 sweeps (binary and 8-label stars by intrinsics,
/// independent binary ones in pairs, see `schedule.rs`) are bit for bit the portable
/// kernels' sweep with fused multiply-adds in the given order: on binary
/// and 8-label grids (also with `−∞` potentials, which hand stars to the
/// portable kernels' rare paths), a grid in a shuffled order, an order with
/// repeats, a chain, and a graph mixing binary stars with others.
#[cfg(target_arch = "x86_64")]
#[test]
fn paired_avx2_sweeps_equal_the_portable_fused_sweeps_bit_for_bit() {
    use rand::seq::SliceRandom;
    if !fastmath::x86::avx2_fma() {
        return;
    }
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn fused(p: &InferenceProblem<'_>, lambda: &mut [f64], tt: &mut [f64], b: &mut Bufs<'_>, o: &[usize]) {
        star::sweep::<fastmath::Fused>(p, lambda, tt, b, o, 3);
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let s = |v: &[usize], t: &str| Scope { variables: v.to_vec(), factor_type: t.into() };
    let mixed = factors_with_singletons(
        vec![2, 2, 2, 3, 2, 2],
        &[s(&[0, 1], "p"), s(&[1, 2], "p"), s(&[2, 3], "p"), s(&[3, 4], "p"), s(&[4, 5], "p"), s(&[0, 5], "q")],
    )
    .unwrap();
    let chain = factors_with_singletons(vec![2; 9], &(0..8).map(|i| s(&[i, i + 1], "p")).collect::<Vec<_>>()).unwrap();
    let cases = [
        (factor_graph::grid(7, 9, 2).unwrap(), 0.0, false, false),
        (factor_graph::grid(23, 19, 2).unwrap(), 0.0, false, false),
        // Large enough for steps of four stars, some with impossible values.
        (factor_graph::grid(20, 17, 2).unwrap(), 0.05, false, false),
        (factor_graph::grid(6, 8, 2).unwrap(), 0.15, false, false),
        (factor_graph::grid(9, 7, 2).unwrap(), 0.0, true, false),
        (factor_graph::grid(5, 5, 2).unwrap(), 0.0, false, true),
        (chain, 0.0, false, false),
        (mixed, 0.05, false, false),
        (factor_graph::grid(6, 7, 8).unwrap(), 0.0, false, false),
        (factor_graph::grid(7, 5, 8).unwrap(), 0.2, true, false),
        // The AVX2 8-label kernel's phases over stars of two, three and four
        // parents in a shuffled order, and in an order with repeats.
        (factor_graph::grid(11, 9, 8).unwrap(), 0.0, true, false),
        (factor_graph::grid(10, 12, 8).unwrap(), 0.05, false, true),
    ];
    for (g, hard, shuffle, repeat) in &cases {
        let theta = random_theta(g, &mut rng, *hard);
        let p = InferenceProblem::uniform(g, &theta, 0.1).unwrap();
        let mut order = g.default_update_order();
        if *shuffle {
            order.shuffle(&mut rng);
        }
        if *repeat {
            order.extend(order.clone().iter().rev().step_by(3));
        }
        let mut ws = Workspace::new(g);
        let (tt, mut bufs) = ws.split(g.total_configs());
        let mut reference = Messages::zeros(g);
        p.refresh_all(reference.as_slice(), tt);
        // SAFETY: the CPU supports AVX2 and FMA (checked above).
        unsafe { fused(&p, reference.as_mut_slice(), tt, &mut bufs, &order) };
        let reference_tt = tt.to_vec();
        for level in ["avx2", "avx512"] {
            if level == "avx512" && !fastmath::x86::avx512() {
                continue;
            }
            let mut paired = Messages::zeros(g);
            p.refresh_all(paired.as_slice(), tt);
            // SAFETY: the CPU supports the features of the kernel called (checked above).
            unsafe {
                match level {
                    "avx2" => simd::sweep(&p, paired.as_mut_slice(), tt, &mut bufs, &order, 3),
                    _ => simd512::sweep(&p, paired.as_mut_slice(), tt, &mut bufs, &order, 3),
                }
            }
            for (a, b) in reference.as_slice().iter().zip(paired.as_slice()) {
                assert_eq!(a.to_bits(), b.to_bits(), "{level}: messages {a} vs {b} ({} regions)", g.num_regions());
            }
            for (a, b) in reference_tt.iter().zip(tt.iter()) {
                assert_eq!(a.to_bits(), b.to_bits(), "{level}: θ̃ {a} vs {b}");
            }
        }
    }
}

/// The portable build of the sweep (separate multiply and add) and the one
/// chosen at run time (AVX2 + FMA where available) differ by rounding only.
#[test]
fn portable_and_dispatched_kernels_agree() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let graphs = [factor_graph::grid(5, 6, 2).unwrap(), factor_graph::grid(4, 3, 5).unwrap(), general_graph()];
    for g in &graphs {
        let theta = random_theta(g, &mut rng, 0.1);
        let p = InferenceProblem::uniform(g, &theta, 0.05).unwrap();
        let order = g.default_update_order();
        let mut ws = Workspace::new(g);
        let mut dispatched = Messages::zeros(g);
        let mut portable = Messages::zeros(g);
        let (tt, mut bufs) = ws.split(g.total_configs());
        p.refresh_all(portable.as_slice(), tt);
        star::sweep::<Plain>(&p, portable.as_mut_slice(), tt, &mut bufs, &order, 5);
        p.refresh_all(dispatched.as_slice(), tt);
        dispatch_sweep(&p, dispatched.as_mut_slice(), tt, &mut bufs, &order, 5);
        let scale = portable.as_slice().iter().fold(1.0f64, |a, v| a.max(v.abs()));
        for (a, b) in portable.as_slice().iter().zip(dispatched.as_slice()) {
            assert!((a - b).abs() <= 1e-12 * scale, "{a} vs {b}");
        }
    }
}

/// The factored blocks are built in a recycled buffer (the spare a dropped
/// problem leaves on its thread): a problem built after a larger one, or
/// after one on another graph, gets the blocks a fresh thread builds for
/// it, bit for bit, and the spare's allocation is reused.
#[test]
fn recycled_factored_blocks_equal_fresh_ones() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let (big, small) = (factor_graph::grid(9, 7, 8).unwrap(), factor_graph::grid(4, 3, 3).unwrap());
    let (theta_big, theta_small) = (random_theta(&big, &mut rng, 0.1), random_theta(&small, &mut rng, 0.1));
    let fresh = |g: &RegionGraph, theta: &[f64]| {
        std::thread::scope(|s| {
            s.spawn(|| InferenceProblem::uniform(g, theta, 0.3).unwrap().factored_blocks().to_vec()).join().unwrap()
        })
    };
    let (want_big, want_small) = (fresh(&big, &theta_big), fresh(&small, &theta_small));
    assert!(!want_big.is_empty() && want_small.len() < want_big.len());
    let first = InferenceProblem::uniform(&big, &theta_big, 0.3).unwrap();
    assert_eq!(first.factored_blocks(), &want_big[..]);
    let address = first.factored_blocks().as_ptr();
    drop(first);
    // The small problem takes the big one's buffer: stale contents must not show.
    let second = InferenceProblem::uniform(&small, &theta_small, 0.3).unwrap();
    assert_eq!(second.factored_blocks(), &want_small[..]);
    assert_eq!(second.factored_blocks().as_ptr(), address, "the spare buffer was not reused");
    drop(second);
    let third = InferenceProblem::uniform(&big, &theta_big, 0.3).unwrap();
    assert_eq!(third.factored_blocks(), &want_big[..]);
}
