//! A function class written outside `crates/oracles` plugs into training,
//! prediction and model files through the public contract alone (issue 3).
//!
//! The class is `HistogramOracle` of `examples/oracle_crate.rs`: `g(φ, y) =
//! table[bin(φ_j)][y]`, a piecewise-constant function of one feature column,
//! each bin's class scores fitted by the crate's L-BFGS on the biased logistic
//! loss of the rows falling in it.

use std::sync::Arc;

use factor_graph::{GridLayout, grid};
use oracles::{ModelRegistry, Oracle};
use structlearn::oracle_config::RunConfig;
use structlearn::{
    Dataset, Evaluate, Example, FactorTypeInfo, FeatureBlock, LearnerKind, OracleRegistry, PredictOptions,
    StructuredModel, TrainConfig, Trainer, build_learner_with,
};

/// The class of `examples/oracle_crate.rs` (its `main` is not used here).
#[path = "../examples/oracle_crate.rs"]
#[allow(dead_code)]
mod oracle_crate;
use oracle_crate::{HistogramOracle, KIND, load, register};

/// Binary blobs on a grid with the paper's noisy unary feature and an
/// informative pair feature.
fn data(seed: u64, count: usize) -> Dataset {
    let (h, w) = (10, 10);
    let graph = Arc::new(grid(h, w, 2).unwrap());
    let layout = GridLayout { height: h, width: w };
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut uniform = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let examples = (0..count)
        .map(|k| {
            let (cr, cc, rad) = (uniform() * 10.0, uniform() * 10.0, 2.0 + uniform() * 3.0);
            let labels: Vec<usize> = (0..h * w)
                .map(|i| usize::from((((i / w) as f64 - cr).powi(2) + ((i % w) as f64 - cc).powi(2)).sqrt() < rad))
                .collect();
            let unary: Vec<f64> = labels
                .iter()
                .flat_map(|&y| [if y == 0 { 0.9 * uniform() } else { 0.1 + 0.9 * uniform() }, 1.0])
                .collect();
            let pair = (0..layout.num_pairs()).flat_map(|p| {
                let (i, j) = layout.pair_pixels(p);
                [if labels[i] == labels[j] { 0.8 * uniform() } else { 0.2 + 0.8 * uniform() }, 1.0]
            });
            let pair: Vec<f64> = pair.collect();
            Example::new(
                format!("blob{k}"),
                graph.clone(),
                Some(labels.clone()),
                vec![FeatureBlock { dim: 2, values: unary }, FeatureBlock { dim: 2, values: pair }],
            )
        })
        .collect();
    Dataset::new(vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 2)], examples).unwrap()
}

#[test]
fn an_oracle_from_another_crate_trains_predicts_and_round_trips() {
    let train = data(1, 6);
    let oracles: Vec<(String, Box<dyn Oracle>)> = vec![
        ("unary".into(), Box::new(HistogramOracle { column: 0, bins: 8 })),
        ("pairwise".into(), Box::new(HistogramOracle { column: 0, bins: 8 })),
    ];
    let config = TrainConfig { learning_iterations: 8, evaluate: Evaluate::EveryIteration, ..TrainConfig::default() };
    let mut trainer = Trainer::new(&train, oracles, config).unwrap();
    let r0 = trainer.objective().unwrap();
    let outcome = trainer.train().unwrap();
    let last = outcome.history.last().unwrap();
    assert!(last.objective < 0.75 * r0, "R {r0} -> {}", last.objective);
    let errors: Vec<f64> = outcome.history.iter().filter_map(|r| r.train_error).collect();
    assert!(errors.last() < errors.first(), "train error did not fall: {errors:?}");
    assert!(outcome.history.windows(2).all(|w| w[1].objective <= w[0].objective + 1e-9), "R rose");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("histogram.slm");
    outcome.model.save(&path).unwrap();
    // The built-in registry does not know the class: a typed error names it.
    let err = StructuredModel::load(&path, &ModelRegistry::with_builtin()).unwrap_err();
    assert!(err.to_string().contains("histogram"), "{err}");
    let mut registry = ModelRegistry::with_builtin();
    registry.register(KIND, load).unwrap();
    assert!(registry.register(KIND, load).is_err());
    let loaded = StructuredModel::load(&path, &registry).unwrap();
    let test = data(2, 3);
    let opts = PredictOptions::default();
    let (a, b) = (outcome.model.predict(&test, &opts).unwrap(), loaded.predict(&test, &opts).unwrap());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.labels, y.labels);
        assert_eq!(x.beliefs, y.beliefs);
    }
}

#[test]
fn invalid_plugin_hyper_parameters_are_rejected_before_training() {
    let train = data(3, 2);
    let oracles: Vec<(String, Box<dyn Oracle>)> = vec![
        ("unary".into(), Box::new(HistogramOracle { column: 0, bins: 0 })),
        ("pairwise".into(), Box::new(HistogramOracle { column: 0, bins: 4 })),
    ];
    let err = Trainer::new(&train, oracles, TrainConfig::default()).err().unwrap();
    assert!(err.to_string().contains("bins"), "{err}");
}

/// Registered by name, the class is built from a JSON configuration by the
/// same code as the built-ins (`RunConfig`, the registry, `build_learner_with`:
/// what `structlearn train --config` runs) and trains to the same bits as the
/// oracle constructed by hand; learners that cannot use it say so by name.
#[test]
fn a_registered_oracle_is_chosen_by_name_from_a_json_config() {
    let train = data(4, 4);
    let (mut oracles, mut models) = (OracleRegistry::with_builtin(), ModelRegistry::with_builtin());
    let config = RunConfig::from_json(&serde_json::json!({
        "train": {"learning_iterations": 3, "seed": 2},
        "oracles": {"unary": {"kind": "histogram", "bins": 6}, "pairwise": {"kind": "linear", "l2": 0.1}}
    }))
    .unwrap();
    // Unknown before registration: the error names the kind and the ones known.
    let err = build_learner_with(LearnerKind::Algorithm1, &train, &config.oracles, config.train.clone(), &oracles)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("unknown oracle kind `histogram`") && err.contains("boosting"), "{err}");
    register(&mut oracles, &mut models).unwrap();
    assert!(register(&mut oracles, &mut models).is_err(), "registered twice");
    // Its settings are listed with their meanings, like the built-ins'.
    let settings = oracles.hyper_parameters(KIND).unwrap();
    assert!(settings.iter().any(|h| h.name == "bins" && h.default == 10 && !h.meaning.is_empty()));
    let bad = serde_json::json!({"kind": "histogram", "bins": 6, "colum": 1});
    assert!(oracles.build(&bad).err().unwrap().to_string().contains("colum"));

    let by_name = build_learner_with(LearnerKind::Algorithm1, &train, &config.oracles, config.train.clone(), &oracles)
        .unwrap()
        .train()
        .unwrap();
    let by_hand: Vec<(String, Box<dyn Oracle>)> = vec![
        ("unary".into(), Box::new(HistogramOracle { column: 0, bins: 6 })),
        ("pairwise".into(), Box::new(oracles::linear::LinearOracle { l2: 0.1, ..Default::default() })),
    ];
    let direct = Trainer::new(&train, by_hand, config.train.clone()).unwrap().train().unwrap();
    assert_eq!(by_name.model.to_bytes().unwrap(), direct.model.to_bytes().unwrap());
    // The model file loads through the plug-in's loader.
    let back =
        StructuredModel::from_bytes(&by_name.model.to_bytes().unwrap(), &models, std::path::Path::new("m")).unwrap();
    assert_eq!(back.to_bytes().unwrap(), direct.model.to_bytes().unwrap());
    // The perceptrons learn linear classes only, and say which class they were given.
    let err = build_learner_with(LearnerKind::PerceptronLocal, &train, &config.oracles, config.train, &oracles)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("histogram"), "{err}");
}
