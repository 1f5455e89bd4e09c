//! `StructuredModel::predict_example_certified`: the same labels as
//! `predict_example`, and certificates that hold against every labelling of
//! tiny models, enumerated; `predict_example_annealed`'s likewise, and its
//! labellings the best ones where the gap proves it.

use std::sync::Arc;

use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock, PredictOptions, StructuredModel};

/// A 2 × 3 grid with `labels` labels, unary features `(x, 1)` and a constant
/// pairwise feature; linear energies from `seed`.
fn tiny(labels: usize, seed: u64) -> (Dataset, StructuredModel) {
    tiny_with(labels, seed, [0.5, 0.5])
}

/// [`tiny`] with the entropy weights `epsilon` (unary, pairwise).
fn tiny_with(labels: usize, seed: u64, epsilon: [f64; 2]) -> (Dataset, StructuredModel) {
    let graph = Arc::new(factor_graph::grid(2, 3, labels).unwrap());
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let unary: Vec<f64> = (0..6).flat_map(|_| [next(), 1.0]).collect();
    let pairs = graph.num_regions() - 6;
    let ex = Example::new(
        "x",
        graph,
        None,
        vec![FeatureBlock { dim: 2, values: unary }, FeatureBlock { dim: 1, values: vec![1.0; pairs] }],
    );
    let data =
        Dataset::new(vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)], vec![ex]).unwrap();
    let wu: Vec<f64> = (0..2 * labels).map(|_| 3.0 * next()).collect();
    // Strong, partly repulsive couplings: the relaxation is often not tight.
    let wp: Vec<f64> = (0..labels * labels).map(|_| 4.0 * next()).collect();
    let models: Vec<Box<dyn oracles::Model>> = vec![
        Box::new(oracles::linear::LinearModel::new(2, labels, wu).unwrap()),
        Box::new(oracles::linear::LinearModel::new(1, labels * labels, wp).unwrap()),
    ];
    let model = StructuredModel::new(data.factor_types().to_vec(), epsilon.to_vec(), models).unwrap();
    (data, model)
}

/// The best score over all labellings, enumerated.
fn best_score(g: &factor_graph::RegionGraph, theta: &[f64], labels: usize) -> f64 {
    let mut best = f64::NEG_INFINITY;
    let mut y = vec![0usize; g.num_variables()];
    'all: loop {
        best = best.max(smoothed_inference::decoding::score(g, theta, &y));
        for label in y.iter_mut() {
            *label += 1;
            if *label < labels {
                continue 'all;
            }
            *label = 0;
        }
        return best;
    }
}

#[test]
fn the_bound_is_above_every_labelling_and_the_labels_are_predict_s() {
    for seed in 0..20u64 {
        let labels = 2 + (seed % 2) as usize;
        let (data, model) = tiny(labels, seed);
        let g = data.examples()[0].graph().clone();
        let theta = model.energies(&data, 0).unwrap();
        let best = best_score(&g, &theta, labels);
        // The bound holds at any messages, converged or not.
        for iterations in [0, 2, 500] {
            let opts = PredictOptions { iterations, tolerance: Some(1e-9) };
            let (p, c) = model.predict_example_certified(&data, 0, &opts).unwrap();
            let plain = model.predict_example(&data, 0, &opts).unwrap();
            assert_eq!(p.labels, plain.labels);
            assert_eq!(p.beliefs, plain.beliefs);
            assert_eq!(c.score, smoothed_inference::decoding::score(&g, &theta, &p.labels));
            assert!(c.bound >= best - 1e-9 * best.abs().max(1.0), "seed {seed}: bound {} below {best}", c.bound);
            assert_eq!(c.gap, c.bound - c.score);
            assert!(c.gap >= -1e-9);
        }
    }
}

#[test]
fn annealed_labellings_are_certified_and_best_where_the_gap_is_zero() {
    let mut proven = 0;
    for seed in 0..20u64 {
        let labels = 2 + (seed % 2) as usize;
        // Different ε per factor type: each type is smoothed with its own.
        let (data, model) = tiny_with(labels, seed, [0.5, 0.2]);
        let g = data.examples()[0].graph().clone();
        let theta = model.energies(&data, 0).unwrap();
        let best = best_score(&g, &theta, labels);
        let tol = 1e-9 * best.abs().max(1.0);
        let opts = PredictOptions { iterations: 300, tolerance: Some(1e-9) };
        let (p, c) = model.predict_example_annealed(&data, 0, &opts, 0.01).unwrap();
        assert_eq!(c.score, smoothed_inference::decoding::score(&g, &theta, &p.labels));
        assert!(c.score <= best + tol && c.bound >= best - tol, "seed {seed}: {c:?} against {best}");
        assert_eq!(c.gap, c.bound - c.score);
        if c.gap <= 1e-6 {
            assert!((c.score - best).abs() <= 1e-6, "seed {seed}: gap {} but score {} < {best}", c.gap, c.score);
            proven += 1;
        }
        // The smoothed argmax at the model's ε never scores more than the annealed labelling.
        let plain = model.predict_example(&data, 0, &opts).unwrap();
        assert!(smoothed_inference::decoding::score(&g, &theta, &plain.labels) <= c.score + tol, "seed {seed}");
    }
    // Most of these small models' relaxations are tight once ε is small.
    assert!(proven >= 10, "only {proven} of 20 labellings proven best");
}

#[test]
fn one_annealing_stage_is_predict_s_message_passing() {
    for seed in 0..5u64 {
        let (data, model) = tiny_with(3, seed, [0.5, 0.2]);
        for iterations in [0, 3, 50] {
            let opts = PredictOptions { iterations, tolerance: None };
            let plain = model.predict_example(&data, 0, &opts).unwrap();
            // eps_min = 1: one stage, at the model's own ε per factor type.
            let (p, _) = model.predict_example_annealed(&data, 0, &opts, 1.0).unwrap();
            assert_eq!(p.beliefs, plain.beliefs, "seed {seed}, {iterations} iterations");
            assert_eq!(p.report, plain.report);
        }
    }
}

#[test]
fn annealing_refuses_a_last_epsilon_outside_zero_to_one() {
    let (data, model) = tiny(2, 0);
    for bad in [0.0, -1.0, 1.5, f64::NAN, f64::INFINITY] {
        let err = model.predict_example_annealed(&data, 0, &PredictOptions::default(), bad).unwrap_err().to_string();
        assert!(err.contains("eps_min") && err.contains("(0, 1]"), "{bad}: {err}");
    }
}
