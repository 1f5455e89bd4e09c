//! Files written by an earlier release still load and mean the same thing.
//!
//! `tests/data/format-v1/` was written by the 0.1 code (commit 666bf84, before
//! the learning layer's redesign): a data set of four 3 × 4 grids with three
//! labels, as `.sld` and `.json`, five models of different oracle kinds
//! trained on it (`.slm`), and their predictions (labels and beliefs, JSON).
//! Loading them must give the same data, the same model bytes when saved
//! again, and the same predictions to the bit.

use std::path::{Path, PathBuf};

use oracles::ModelRegistry;
use structlearn::{Dataset, DatasetFile, PredictOptions, StructuredModel};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/format-v1")
}

const MODELS: [&str; 5] =
    ["zero-constant.slm", "linear-linear.slm", "boosting-mlp.slm", "mlp-boosting.slm", "linear-l2-zero.slm"];

#[test]
fn data_set_files_of_format_v1_load_and_agree() {
    let binary = Dataset::load(&dir().join("data.sld")).unwrap();
    let json = Dataset::load(&dir().join("data.json")).unwrap();
    assert_eq!(binary.len(), 4);
    assert_eq!(
        serde_json::to_value(DatasetFile::from_dataset(&binary)).unwrap(),
        serde_json::to_value(DatasetFile::from_dataset(&json)).unwrap()
    );
    // Saving again writes the same bytes: the format did not move.
    let out = tempfile::tempdir().unwrap();
    binary.save(&out.path().join("again.sld")).unwrap();
    assert_eq!(std::fs::read(out.path().join("again.sld")).unwrap(), std::fs::read(dir().join("data.sld")).unwrap());
}

#[test]
fn model_files_of_format_v1_load_save_and_predict_bit_for_bit() {
    let data = Dataset::load(&dir().join("data.sld")).unwrap();
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("predictions.json")).unwrap()).unwrap();
    let registry = ModelRegistry::with_builtin();
    let out = tempfile::tempdir().unwrap();
    for name in MODELS {
        let path = dir().join(name);
        let model = StructuredModel::load(&path, &registry).unwrap();
        model.save(&out.path().join(name)).unwrap();
        assert_eq!(std::fs::read(out.path().join(name)).unwrap(), std::fs::read(&path).unwrap(), "{name}");
        let predictions = model.predict(&data, &PredictOptions::default()).unwrap();
        for (k, p) in predictions.iter().enumerate() {
            let labels: Vec<usize> = serde_json::from_value(expected[name]["labels"][k].clone()).unwrap();
            let beliefs: Vec<f64> = serde_json::from_value(expected[name]["beliefs"][k].clone()).unwrap();
            assert_eq!(p.labels, labels, "{name}, example {k}");
            assert!(
                p.beliefs.iter().zip(&beliefs).all(|(a, b)| a.to_bits() == b.to_bits())
                    && p.beliefs.len() == beliefs.len(),
                "{name}, example {k}: beliefs differ"
            );
        }
    }
}
