//! Variables with unknown labels (`Dataset::set_ignored`, e.g. Stanford Background's
//! −1 pixels): skipped by every error count, refused in training sets, kept by
//! the data set files (format version 2; version 1 files still load).

mod common;

use oracles::Oracle;
use structlearn::oracle_config::builtin_oracle;
use structlearn::{Dataset, DatasetFile, LearnError, PredictOptions, TrainConfig, Trainer};

fn oracles(kind: &str) -> Vec<(String, Box<dyn Oracle>)> {
    vec![("unary".into(), builtin_oracle(kind).unwrap()), ("pairwise".into(), builtin_oracle(kind).unwrap())]
}

#[test]
fn error_counts_skip_ignored_variables() {
    let train = common::denoising(3, 6, 7, 1);
    let mut test = common::denoising(2, 6, 7, 2);
    let config = TrainConfig { learning_iterations: 2, ..TrainConfig::default() };
    let model = Trainer::new(&train, oracles("linear"), config).unwrap().train().unwrap().model;
    let opts = PredictOptions { iterations: 100, tolerance: Some(1e-6) };
    let predictions = model.predict(&test, &opts).unwrap();
    // Ignore every wrongly predicted variable of example 0 and the first 5 of example 1.
    let mut total_wrong = 0;
    let mut masks = Vec::new();
    for (k, p) in predictions.iter().enumerate() {
        let truth = test.labels(k).unwrap().to_vec();
        let mask: Vec<bool> = (0..truth.len()).map(|i| if k == 0 { p.labels[i] != truth[i] } else { i < 5 }).collect();
        if k == 1 {
            total_wrong += (5..truth.len()).filter(|&i| p.labels[i] != truth[i]).count();
        }
        masks.push(mask);
    }
    for (k, mask) in masks.into_iter().enumerate() {
        test.set_ignored(k, Some(mask)).unwrap();
    }
    let counted: usize = (0..test.len()).map(|k| (0..42).filter(|&i| test.is_labelled(k, i)).count()).sum();
    let err = model.error_rate(&test, &opts).unwrap();
    assert!((err - total_wrong as f64 / counted as f64).abs() < 1e-15, "{err} vs {total_wrong}/{counted}");

    // The confusion matrix skips them too.
    let cm =
        structlearn::metrics::ConfusionMatrix::from_predictions(&test, &model.predict(&test, &opts).unwrap()).unwrap();
    assert_eq!(cm.total() as usize, counted);
    assert!((cm.error_rate() - err).abs() < 1e-15);
    // A mask of the wrong length, or for a missing example, is refused.
    assert!(matches!(test.set_ignored(0, Some(vec![false; 3])), Err(LearnError::Config(_))));
    assert!(test.set_ignored(5, None).is_err());
}

#[test]
fn training_sets_with_unknown_labels_are_refused() {
    let mut train = common::denoising(2, 4, 4, 3);
    train.set_ignored(1, Some((0..16).map(|i| i == 7).collect())).unwrap();
    let err = Trainer::new(&train, oracles("zero"), TrainConfig::default()).err().expect("must refuse");
    let msg = err.to_string();
    assert!(msg.contains("training example 1") && msg.contains("variable 7"), "{msg}");
    // An all-false mask is fine.
    train.set_ignored(1, Some(vec![false; 16])).unwrap();
    assert!(Trainer::new(&train, oracles("zero"), TrainConfig::default()).is_ok());
}

#[test]
fn files_keep_masks_and_version_1_files_still_load() {
    let mut data = common::denoising(2, 3, 4, 4);
    data.set_ignored(0, Some((0..12).map(|i| i % 5 == 0).collect())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for name in ["d.json", "d.sld"] {
        let path = dir.path().join(name);
        data.save(&path).unwrap();
        let back = Dataset::load(&path).unwrap();
        assert_eq!(back.ignored(0), data.ignored(0), "{name}");
        assert_eq!(back.ignored(1), None, "{name}");
    }
    // JSON without the field (version 1) reads as no mask.
    let mut json: serde_json::Value = serde_json::to_value(DatasetFile::from_dataset(&data)).unwrap();
    json["version"] = 1.into();
    for ex in json["examples"].as_array_mut().unwrap() {
        ex.as_object_mut().unwrap().remove("ignored");
    }
    let path = dir.path().join("v1.json");
    std::fs::write(&path, json.to_string()).unwrap();
    let back = Dataset::load(&path).unwrap();
    assert!((0..back.len()).all(|k| back.ignored(k).is_none()));
    assert_eq!(back.examples()[1].labels(), data.examples()[1].labels());

    // A version-1 binary file: the same body without the field, old magic bytes.
    #[derive(serde::Serialize)]
    struct V1Example<'a> {
        name: &'a str,
        graph: usize,
        labels: &'a Option<Vec<usize>>,
        features: &'a [structlearn::FeatureBlock],
    }
    #[derive(serde::Serialize)]
    struct V1File<'a> {
        format: &'a str,
        version: u32,
        factor_types: &'a [structlearn::FactorTypeInfo],
        graphs: Vec<factor_graph::RegionGraphSpec>,
        examples: Vec<V1Example<'a>>,
    }
    let file = DatasetFile::from_dataset(&data);
    let v1 = V1File {
        format: &file.format,
        version: 1,
        factor_types: &file.factor_types,
        graphs: file.graphs.clone(),
        examples: file
            .examples
            .iter()
            .map(|e| V1Example { name: &e.name, graph: e.graph, labels: &e.labels, features: &e.features })
            .collect(),
    };
    let body = postcard::to_stdvec(&v1).unwrap();
    let path = dir.path().join("v1.sld");
    std::fs::write(&path, structlearn::files::wrap_binary(b"SLDATA\0\x01", &body)).unwrap();
    let back = Dataset::load(&path).unwrap();
    assert_eq!(back.len(), 2);
    assert!((0..back.len()).all(|k| back.ignored(k).is_none()));
    assert_eq!(back.feature_blocks(0), data.feature_blocks(0));
}
