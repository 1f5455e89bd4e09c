//! `StructuredModel::predict_example_certified`: the same labels as
//! `predict_example`, and certificates that hold against every labelling of
//! tiny models, enumerated.

use std::sync::Arc;

use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock, PredictOptions, StructuredModel};

/// A 2 × 3 grid with `labels` labels, unary features `(x, 1)` and a constant
/// pairwise feature; linear energies from `seed`.
fn tiny(labels: usize, seed: u64) -> (Dataset, StructuredModel) {
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
    let model = StructuredModel::new(data.factor_types().to_vec(), vec![0.5, 0.5], models).unwrap();
    (data, model)
}

#[test]
fn the_bound_is_above_every_labelling_and_the_labels_are_predict_s() {
    for seed in 0..20u64 {
        let labels = 2 + (seed % 2) as usize;
        let (data, model) = tiny(labels, seed);
        let g = data.examples()[0].graph().clone();
        let theta = model.energies(&data, 0).unwrap();
        // The best score over all labellings.
        let mut best = f64::NEG_INFINITY;
        let mut y = vec![0usize; g.num_variables()];
        'all: loop {
            best = best.max(smoothed_inference::decoding::score(&g, &theta, &y));
            for label in y.iter_mut() {
                *label += 1;
                if *label < labels {
                    continue 'all;
                }
                *label = 0;
            }
            break;
        }
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
