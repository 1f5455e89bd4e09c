//! Regressions of issue 14 in the learner: features of dimension 0, data set
//! sizes against the bytes of the file, error text, file modes.

mod common;

#[cfg(unix)]
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use oracles::ModelRegistry;
use structlearn::oracle_config::oracle_from_json;
use structlearn::{
    Dataset, DatasetFile, Evaluate, Example, FactorTypeInfo, FeatureBlock, LearnError, PredictOptions, Step,
    StructuredModel, TrainConfig, Trainer,
};

/// `common::denoising` with the pairwise type's features replaced by none
/// (dimension 0): a valid data set whose pairwise factors are pure biases.
fn dim0_pairwise(count: usize) -> Dataset {
    let data = common::denoising(count, 4, 4, 3);
    let examples = data
        .examples()
        .iter()
        .enumerate()
        .map(|(k, ex)| {
            let unary = FeatureBlock { dim: 2, values: data.features(k, 0).to_vec() };
            let features = vec![unary, FeatureBlock { dim: 0, values: Vec::new() }];
            Example::new(ex.name(), ex.graph().clone(), ex.labels().map(<[usize]>::to_vec), features)
        })
        .collect();
    Dataset::new(vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 0)], examples).unwrap()
}

#[test]
fn dimension_zero_features_train_predict_and_evaluate_with_every_oracle() {
    let data = dim0_pairwise(2);
    let dir = tempfile::tempdir().unwrap();
    for kind in ["zero", "constant", "linear", "boosting", "mlp"] {
        let spec = match kind {
            "boosting" => serde_json::json!({"kind": kind, "rounds": 2}),
            "mlp" => serde_json::json!({"kind": kind, "epochs": 1, "hidden": 2}),
            _ => serde_json::json!({ "kind": kind }),
        };
        let oracles = vec![
            ("unary".to_string(), oracle_from_json(&serde_json::json!({"kind": "linear"})).unwrap()),
            ("pairwise".to_string(), oracle_from_json(&spec).unwrap()),
        ];
        let config = TrainConfig {
            learning_iterations: 2,
            message_passing_iterations: 3,
            evaluate: Evaluate::EveryIteration,
            ..TrainConfig::default()
        };
        let mut trainer = Trainer::new(&data, oracles, config).unwrap();
        let outcome = trainer.train().unwrap_or_else(|e| panic!("{kind}: {e}"));
        let opts = PredictOptions { iterations: 20, tolerance: Some(1e-4) };
        let predictions = outcome.model.predict(&data, &opts).unwrap();
        assert_eq!(predictions.len(), data.len());
        let error = outcome.model.error_rate(&data, &opts).unwrap();
        assert!((0.0..=1.0).contains(&error));
        // The model file of a dimension-0 type loads back and predicts the same labels.
        let path = dir.path().join(format!("{kind}.slm"));
        outcome.model.save(&path).unwrap();
        let loaded =
            StructuredModel::load(&path, &ModelRegistry::with_builtin()).unwrap_or_else(|e| panic!("{kind}: {e}"));
        let again = loaded.predict(&data, &opts).unwrap();
        for (a, b) in predictions.iter().zip(&again) {
            assert_eq!(a.labels, b.labels, "{kind}");
        }
    }
}

/// A data set file whose graph declares variables of 2^27 labels in a few
/// bytes: refused by the graph budget, before any large allocation.
#[test]
fn data_set_graphs_are_bounded_by_the_bytes_of_the_file() {
    let data = common::denoising(1, 2, 2, 1);
    let mut file = DatasetFile::from_dataset(&data);
    file.graphs[0].cardinalities = vec![1 << 13; 4];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.sld");
    let body = postcard::to_stdvec(&file).unwrap();
    std::fs::write(&path, structlearn::files::wrap_binary(structlearn::data::DATASET_MAGIC, &body)).unwrap();
    let bytes = std::fs::metadata(&path).unwrap().len();
    assert!(bytes < 1000, "{bytes}");
    let err = Dataset::load(&path).unwrap_err().to_string();
    assert!(err.contains("huge.sld") && err.contains("flat entries"), "{err}");
    // The same graph built without a budget is only limited per region.
    let spec = file.graphs[0].clone();
    assert!(spec.flat_len().unwrap() > factor_graph::graph_budget(bytes as usize));
}

/// Postcard lengths larger than the bytes left fail when the bytes run out;
/// the decoder never reserves what a length declares up front.
#[test]
fn declared_lengths_beyond_the_file_are_typed_errors() {
    let data = common::denoising(2, 3, 3, 1);
    let body = postcard::to_stdvec(&DatasetFile::from_dataset(&data)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lengths.sld");
    // Every position where a varint of 2^62 can replace one byte.
    for at in (0..body.len()).step_by(7) {
        let mut b = body[..at].to_vec();
        b.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f]);
        b.extend_from_slice(&body[at + 1..]);
        std::fs::write(&path, structlearn::files::wrap_binary(structlearn::data::DATASET_MAGIC, &b)).unwrap();
        if let Err(e) = Dataset::load(&path) {
            assert!(e.to_string().contains("lengths.sld"), "{e}");
        }
    }
}

#[test]
fn content_errors_name_the_file_and_corrupt_bodies_say_so() {
    let data = common::denoising(1, 2, 2, 1);
    let mut file = DatasetFile::from_dataset(&data);
    file.examples[0].labels = Some(vec![0, 1, 7, 0]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("labels.json");
    std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
    let err = Dataset::load(&path).unwrap_err();
    assert!(matches!(&err, LearnError::InFile { error, .. } if matches!(**error, LearnError::LabelOutOfRange { .. })));
    assert_eq!(err.to_string(), format!("{}: example 0: label 7 of variable 2 is out of range 0..2", path.display()));
    // A body that passes its checksum but does not decode is called what it is.
    let path = dir.path().join("body.sld");
    std::fs::write(&path, structlearn::files::wrap_binary(structlearn::data::DATASET_MAGIC, &[1, 2, 3])).unwrap();
    let err = Dataset::load(&path).unwrap_err().to_string();
    assert!(err.contains("body.sld") && err.contains("incompatible build"), "{err}");
}

#[test]
fn atomic_writes_follow_the_umask_and_hide_temporary_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.bin");
    structlearn::files::write_atomic(&path, b"abc").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"abc");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"x").unwrap();
        let expected = std::fs::metadata(&plain).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, expected, "atomic writes get the mode of any new file");
    }
    // Nothing else is left in the folder.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // A failed write names the target, not a temporary file.
    let missing = dir.path().join("no/such/folder/out.bin");
    let err = structlearn::files::write_atomic(&missing, b"abc").unwrap_err().to_string();
    assert!(err.starts_with(&missing.display().to_string()) && !err.contains(".out.bin."), "{err}");
    let err = structlearn::files::check_writable(&missing).unwrap_err().to_string();
    assert!(err.contains("does not exist (create it first)"), "{err}");
    assert!(structlearn::files::check_writable(dir.path()).is_err());
    assert!(structlearn::files::check_writable(&path).is_ok());
    assert!(!Path::new(&dir.path().join(".out.bin.probe")).exists());
}

/// An atomic write through a symbolic link writes the file it points to (even
/// one not written yet) and keeps the link; a pipe or device is refused, not
/// replaced by a plain file.
#[cfg(unix)]
#[test]
fn atomic_writes_go_through_links_and_refuse_pipes() {
    let dir = tempfile::tempdir().unwrap();
    let (target, link) = (dir.path().join("target.json"), dir.path().join("link.json"));
    std::os::unix::fs::symlink("target.json", &link).unwrap();
    for contents in [&b"first"[..], b"second"] {
        structlearn::files::check_writable(&link).unwrap();
        structlearn::files::write_atomic(&link, contents).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), contents);
    }
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for err in [
        structlearn::files::write_atomic(&fifo, b"x").unwrap_err().to_string(),
        structlearn::files::check_writable(&fifo).unwrap_err().to_string(),
    ] {
        assert!(err.contains("fifo") && err.contains("not a regular file"), "{err}");
    }
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    let err = structlearn::files::write_atomic(Path::new("/dev/null"), b"x").unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
}

/// Errors on the validation set during training say so.
#[test]
fn validation_errors_are_labelled() {
    let train = common::denoising(2, 3, 3, 1);
    let other = dim0_pairwise(1);
    let oracles = vec![
        ("unary".to_string(), oracle_from_json(&serde_json::json!({"kind": "linear"})).unwrap()),
        ("pairwise".to_string(), oracle_from_json(&serde_json::json!({"kind": "linear"})).unwrap()),
    ];
    let config = TrainConfig { learning_iterations: 1, ..TrainConfig::default() };
    let mut trainer = Trainer::new(&train, oracles, config).unwrap().with_validation(&other);
    let err = trainer.train().unwrap_err();
    assert!(matches!(err, LearnError::Validation(_)), "{err}");
    assert!(err.to_string().starts_with("validation set: "), "{err}");
}

#[test]
fn predicting_one_example_of_foreign_data_is_an_error_not_a_panic() {
    let data = common::denoising(2, 4, 4, 3);
    let oracles = vec![
        ("unary".to_string(), oracle_from_json(&serde_json::json!({"kind": "linear"})).unwrap()),
        ("pairwise".to_string(), oracle_from_json(&serde_json::json!({"kind": "constant"})).unwrap()),
    ];
    let config = TrainConfig { learning_iterations: 1, message_passing_iterations: 2, ..TrainConfig::default() };
    let model = Trainer::new(&data, oracles, config).unwrap().train().unwrap().model;
    let opts = PredictOptions { iterations: 5, tolerance: None };
    assert!(model.predict_example(&data, 1, &opts).is_ok());
    // Example index past the end.
    assert!(matches!(model.predict_example(&data, 2, &opts), Err(LearnError::Config(_))));
    // Data with one factor type fewer than the model (e.g. a pipeline that
    // types pairs differently from the one the model was trained with).
    let unary_only: Vec<Example> = data
        .examples()
        .iter()
        .enumerate()
        .map(|(k, ex)| {
            let graph = std::sync::Arc::new(factor_graph::factors_with_singletons(vec![2; 16], &[]).unwrap());
            let unary = FeatureBlock { dim: 2, values: data.features(k, 0).to_vec() };
            Example::new(ex.name(), graph, ex.labels().map(<[usize]>::to_vec), vec![unary])
        })
        .collect();
    let foreign = Dataset::new(vec![FactorTypeInfo::new("unary", 2)], unary_only).unwrap();
    assert!(matches!(model.predict_example(&foreign, 0, &opts), Err(LearnError::ModelMismatch(_))));
    assert!(matches!(model.energies(&foreign, 0), Err(LearnError::ModelMismatch(_))));
    assert!(matches!(model.type_scores(&foreign, 0, 1), Err(LearnError::ModelMismatch(_))));
    // Models and data sets are checked once, by their constructors (their
    // fields are private): one model too few, or a NaN ε, is refused there.
    let mut models: Vec<_> = model.models().iter().map(|m| m.clone_model()).collect();
    let types = model.factor_types().to_vec();
    assert!(matches!(
        StructuredModel::new(
            types.clone(),
            vec![f64::NAN, 0.1],
            model.models().iter().map(|m| m.clone_model()).collect()
        ),
        Err(LearnError::Config(_))
    ));
    models.pop();
    assert!(matches!(StructuredModel::new(types, model.epsilon().to_vec(), models), Err(LearnError::Config(_))));
}

#[test]
fn a_schedule_without_a_fit_step_is_refused_not_trained_to_a_zero_model() {
    let data = common::denoising(2, 3, 3, 1);
    let oracles = || {
        vec![
            ("unary".to_string(), oracle_from_json(&serde_json::json!({"kind": "linear"})).unwrap()),
            ("pairwise".to_string(), oracle_from_json(&serde_json::json!({"kind": "linear"})).unwrap()),
        ]
    };
    let only_messages = TrainConfig {
        schedule: Some(vec![Step::MessagePassing { iterations: 3 }]),
        learning_iterations: 1,
        ..TrainConfig::default()
    };
    let err = Trainer::new(&data, oracles(), only_messages).err().expect("refused");
    assert!(matches!(err, LearnError::InvalidSetting { name: "schedule", .. }), "{err}");
    assert!(err.to_string().contains("without a `fit` step"), "{err}");
    // One fit step is enough.
    let one_fit = TrainConfig {
        schedule: Some(vec![Step::MessagePassing { iterations: 3 }, Step::Fit { factor_type: "unary".into() }]),
        learning_iterations: 1,
        ..TrainConfig::default()
    };
    assert!(Trainer::new(&data, oracles(), one_fit).is_ok());
}

#[test]
fn a_variable_without_a_singleton_region_is_refused_when_the_data_set_is_built() {
    // Two binary variables, one pair region and a singleton for variable 0 only.
    let mut b = factor_graph::RegionGraphBuilder::new(vec![2, 2]).unwrap();
    let (unary, pair) = (b.add_factor_type("unary").unwrap(), b.add_factor_type("pairwise").unwrap());
    b.add_region(&[0], unary).unwrap();
    b.add_region(&[0, 1], pair).unwrap();
    let graph = std::sync::Arc::new(b.build().unwrap());
    let example = Example::new(
        "x",
        graph,
        Some(vec![0, 1]),
        vec![FeatureBlock { dim: 1, values: vec![1.0] }, FeatureBlock { dim: 1, values: vec![1.0] }],
    );
    let types = vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)];
    let err = Dataset::new(types, vec![example]).unwrap_err();
    assert!(matches!(err, LearnError::MissingSingleton { example: 0, variable: 1 }), "{err}");
    assert!(err.to_string().contains("variable 1 has no singleton region"), "{err}");
}
