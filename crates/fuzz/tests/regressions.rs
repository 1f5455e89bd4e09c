//! Regressions of issue 14's "Found" list, as crafted files: each loads to a
//! typed error (never a panic) within a memory limit enforced by the
//! allocator, which aborts this test on any allocation beyond it.

use std::path::Path;

use oracles::ModelRegistry;
use oracles::boosting::BoostingModel;
use serde_json::Value;
use structlearn::files::wrap_binary;
use structlearn::model::MODEL_MAGIC;
use structlearn::train::CHECKPOINT_MAGIC;
use structlearn::{ModelHeader, StructuredModel, Trainer};
use structlearn_fuzz::{CheckpointMirror, LimitAlloc, seeds};

#[global_allocator]
static ALLOC: LimitAlloc = LimitAlloc;

/// Runs `f` with at most 64 MiB live: a loader that asks for more aborts the test.
fn bounded<T>(f: impl FnOnce() -> T) -> T {
    structlearn_fuzz::arm(64 << 20);
    let out = f();
    let usage = structlearn_fuzz::disarm();
    assert!(usage.peak <= 64 << 20 && usage.refused == 0, "{usage:?}");
    out
}

/// A model file whose boosting parameters are `edit`ed as JSON.
fn boosting_file(edit: impl Fn(&mut Value)) -> Vec<u8> {
    let data = seeds::dataset(4, 3, 3, 2);
    let bytes = seeds::model_file(&data, "boosting");
    let body = structlearn_fuzz::targets::body(&bytes, MODEL_MAGIC).unwrap();
    let (header, mut params): (ModelHeader, Vec<Vec<u8>>) = postcard::from_bytes(body).unwrap();
    let model: BoostingModel = postcard::from_bytes(&params[0]).unwrap();
    let mut v = serde_json::to_value(&model).unwrap();
    edit(&mut v);
    let model: BoostingModel = serde_json::from_value(v).unwrap();
    params[0] = postcard::to_stdvec(&model).unwrap();
    wrap_binary(MODEL_MAGIC, &postcard::to_stdvec(&(header, params)).unwrap())
}

/// An edit of a boosting model's JSON form.
type Edit = Box<dyn Fn(&mut Value)>;

fn load_model(bytes: &[u8]) -> Result<StructuredModel, String> {
    bounded(|| {
        StructuredModel::from_bytes(bytes, &ModelRegistry::with_builtin(), Path::new("m.slm"))
            .map_err(|e| e.to_string())
    })
}

#[test]
fn inconsistent_boosting_tables_are_refused_with_the_broken_part_named() {
    // The unedited file loads.
    assert!(load_model(&boosting_file(|_| {})).is_ok());
    let cases: [(&str, Edit); 6] = [
        (
            "offsets decrease",
            Box::new(|v| {
                let o = v["node_offsets"].as_array_mut().unwrap();
                let n = o.len();
                o.swap(1, n - 2);
            }),
        ),
        ("outside the tree", Box::new(|v| v["left"][0] = Value::from(1000))),
        ("outside the tree", Box::new(|v| v["right"][0] = Value::from(-1000))),
        // Node 0's children both point at the same leaf: another leaf is never reached.
        (
            "is the child of",
            Box::new(|v| {
                let l = v["left"][0].clone();
                v["right"][0] = l;
            }),
        ),
        ("do not run from 0", Box::new(|v| v["leaf_offsets"][0] = Value::from(1))),
        // Found by the 1,000,000-input run: finite leaves whose sum over the trees is +inf.
        (
            "add up beyond",
            Box::new(|v| {
                for x in v["leaf_values"].as_array_mut().unwrap() {
                    *x = Value::from(1e308);
                }
            }),
        ),
    ];
    for (expected, edit) in cases {
        let err = load_model(&boosting_file(edit)).unwrap_err();
        assert!(err.contains("m.slm") && err.contains("inconsistent") && err.contains(expected), "{err}");
    }
}

#[test]
fn checkpoints_whose_counts_disagree_with_the_data_are_refused() {
    let data = seeds::dataset(4, 2, 3, 11);
    let dir = tempfile::tempdir().unwrap();
    let bytes = seeds::checkpoint(&data, "linear", "boosting", 0, dir.path());
    let body = structlearn_fuzz::targets::body(&bytes, CHECKPOINT_MAGIC).unwrap();
    let cp: CheckpointMirror = postcard::from_bytes(body).unwrap();
    let mut v = serde_json::to_value(&cp).unwrap();
    let edits: [(&str, usize); 4] = [("messages", 1), ("models", 1), ("train_eval_messages", 1), ("messages", 0)];
    for (field, drop) in edits {
        let mut edited = v.clone();
        let items = edited[field].as_array_mut().unwrap();
        items.truncate(items.len() - drop.min(items.len()));
        if drop == 0 {
            items.push(items[0].clone());
        }
        let cp: CheckpointMirror = serde_json::from_value(edited).unwrap();
        let file = wrap_binary(CHECKPOINT_MAGIC, &postcard::to_stdvec(&cp).unwrap());
        let mut trainer =
            Trainer::new(&data, seeds::oracles_for("linear", "boosting"), seeds::quick_config(0)).unwrap();
        let err = bounded(|| trainer.resume_from_bytes(&file, Path::new("c.ckpt"), &ModelRegistry::with_builtin()))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("c.ckpt: "), "{field}: {err}");
    }
    // Messages of the wrong length for one example.
    v["messages"][2].as_array_mut().unwrap().pop();
    let cp: CheckpointMirror = serde_json::from_value(v).unwrap();
    let file = wrap_binary(CHECKPOINT_MAGIC, &postcard::to_stdvec(&cp).unwrap());
    let mut trainer = Trainer::new(&data, seeds::oracles_for("linear", "boosting"), seeds::quick_config(0)).unwrap();
    let err = trainer.resume_from_bytes(&file, Path::new("c.ckpt"), &ModelRegistry::with_builtin()).unwrap_err();
    assert!(err.to_string().contains("messages of example 2"), "{err}");
}

#[test]
fn checkpoint_mirror_matches_the_real_format() {
    let data = seeds::dataset(4, 2, 3, 11);
    let dir = tempfile::tempdir().unwrap();
    let bytes = seeds::checkpoint(&data, "mlp", "constant", 0, dir.path());
    let body = structlearn_fuzz::targets::body(&bytes, CHECKPOINT_MAGIC).unwrap();
    let cp: CheckpointMirror = postcard::from_bytes(body).unwrap();
    assert_eq!(postcard::to_stdvec(&cp).unwrap(), body);
}

/// Tiny UAI files that declare gigabytes: a table of 2^28 entries (31 bytes),
/// three variables of 2^28 labels (the region graph alone would be 6 GiB), a
/// header of 2^40 variables.
#[test]
fn uai_files_cannot_ask_for_more_memory_than_they_hold() {
    let cases = [
        "MARKOV\n1\n268435456\n1\n1 0\n268435456\n",
        "MARKOV\n3\n268435456 268435456 268435456\n0\n",
        "MARKOV\n2\n16384 16384\n1\n2 0 1\n268435456\n1 2 3\n",
        "MARKOV\n1099511627776\n2 2\n",
        "MARKOV\n2\n2 2\n1099511627776\n2 0 1\n",
    ];
    for text in cases {
        assert!(text.len() < 90);
        let result = bounded(|| factor_graph::UaiModel::parse(text).and_then(|m| m.to_region_graph()));
        assert!(result.is_err(), "{text}");
    }
}

/// The empty scope is a constant factor: its logarithm adds to the dual value
/// (checked against the same model without it); a zero value is an error.
#[test]
fn empty_scope_uai_factors_are_constants() {
    let with = "MARKOV\n1\n2\n2\n0\n1 0\n1\n3\n2\n1 2\n";
    let without = "MARKOV\n1\n2\n1\n1 0\n2\n1 2\n";
    let a = factor_graph::UaiModel::parse(with).unwrap().to_region_graph().unwrap();
    let b = factor_graph::UaiModel::parse(without).unwrap().to_region_graph().unwrap();
    assert_eq!(a.constant, 3f64.ln());
    assert_eq!(a.theta, b.theta);
    let zero = "MARKOV\n1\n2\n2\n0\n1 0\n1\n0\n2\n1 2\n";
    let err = factor_graph::UaiModel::parse(zero).unwrap().to_region_graph().unwrap_err().to_string();
    assert!(err.contains("factor 0") && err.contains("empty scope"), "{err}");
}

/// Found by the smoke run: an indexed-linear model with no groups loaded, then
/// failed at its first score; it is refused on load.
#[test]
fn indexed_linear_models_without_groups_are_refused() {
    use oracles::indexed::IndexedLinearModel;
    let data = seeds::dataset(4, 2, 3, 11);
    let bytes = seeds::constructed_model_file(&data, "indexed-linear");
    assert!(load_model(&bytes).is_ok());
    let body = structlearn_fuzz::targets::body(&bytes, MODEL_MAGIC).unwrap();
    let (header, mut params): (ModelHeader, Vec<Vec<u8>>) = postcard::from_bytes(body).unwrap();
    let mut v = serde_json::to_value(postcard::from_bytes::<IndexedLinearModel>(&params[1]).unwrap()).unwrap();
    v["groups"] = Value::from(0);
    v["weights"] = Value::Array(Vec::new());
    params[1] = postcard::to_stdvec(&serde_json::from_value::<IndexedLinearModel>(v).unwrap()).unwrap();
    let file = wrap_binary(MODEL_MAGIC, &postcard::to_stdvec(&(header, params)).unwrap());
    let err = load_model(&file).unwrap_err();
    assert!(err.contains("m.slm") && err.contains("pairwise") && err.contains("0 groups"), "{err}");
}
