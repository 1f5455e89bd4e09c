//! The fuzz targets: one per loader, each with its seeds, its structure-aware
//! mutation and the checks run on every input.

use std::path::Path;

use oracles::{Features, ModelRegistry};
use rand::{Rng, RngExt, SeedableRng};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use structlearn::data::DATASET_MAGIC;
use structlearn::files::{unwrap_binary, wrap_binary};
use structlearn::model::MODEL_MAGIC;
use structlearn::train::CHECKPOINT_MAGIC;
use structlearn::{Dataset, DatasetFile, ModelHeader, Record, StructuredModel, Trainer};

use crate::mutate::{mutate_bytes, mutate_json, mutate_png, mutate_tokens};
use crate::seeds;

/// What a loader made of an input that did not panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Loaded (and every check on the loaded value passed).
    Accepted,
    /// Refused with a typed error (its message).
    Rejected(String),
    /// Loaded, but a check on the result failed: re-saving it does not load
    /// back identically, or the first use fails unexpectedly.
    Invariant(String),
}

/// How inputs of a target are shaped, which decides the mutations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Whitespace-separated tokens (UAI).
    Tokens,
    /// JSON text.
    Json,
    /// `magic ‖ postcard body ‖ checksum` of a model file.
    Model,
    /// The same framing around a data set.
    Dataset,
    /// The same framing around a checkpoint.
    Checkpoint,
    /// PNG chunks.
    Png,
    /// Other bytes (JPEG).
    Bytes,
}

/// The checkpoint body as `structlearn::train` writes it, field for field
/// (postcard is positional). `checkpoint_mirror_matches_the_real_format`
/// (tests) keeps the two in step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckpointMirror {
    seed: u64,
    examples: usize,
    factor_types: Vec<String>,
    completed: usize,
    models: Vec<Option<(String, Vec<u8>)>>,
    messages: Vec<Vec<f64>>,
    history: Vec<Record>,
    elapsed_seconds: f64,
    train_eval_messages: Vec<Vec<f64>>,
    validation_eval_messages: Vec<Vec<f64>>,
    best_model: Option<Vec<u8>>,
}

/// Shared state of the targets: the data the loaders are checked against.
struct Context {
    data: Dataset,
    registry: ModelRegistry,
}

/// One loader under test.
pub struct Target {
    /// Name on the command line.
    pub name: &'static str,
    /// Valid inputs the mutations start from.
    pub seeds: Vec<Vec<u8>>,
    shape: Shape,
}

/// Every target, with its seeds (built in code; takes a second or two).
pub fn targets() -> Vec<Target> {
    let data = seeds::dataset(4, 2, 3, 11);
    let dir = std::env::temp_dir().join(format!("structlearn-fuzz-seeds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary folder for checkpoint seeds");
    let checkpoints = vec![
        seeds::checkpoint(&data, "linear", "boosting", 0, &dir),
        seeds::checkpoint(&data, "mlp", "constant", 0, &dir),
        seeds::checkpoint(&data, "zero", "linear", 0, &dir),
    ];
    let _ = std::fs::remove_dir_all(&dir);
    let mut all = vec![Target { name: "uai", seeds: seeds::uai_files(), shape: Shape::Tokens }];
    for kind in seeds::MODEL_KINDS {
        let name: &'static str = match kind {
            "zero" => "model-zero",
            "constant" => "model-constant",
            "linear" => "model-linear",
            "boosting" => "model-boosting",
            _ => "model-mlp",
        };
        all.push(Target { name, seeds: vec![seeds::model_file(&data, kind)], shape: Shape::Model });
    }
    all.push(Target {
        name: "model-indexed-linear",
        seeds: vec![seeds::constructed_model_file(&data, "indexed-linear")],
        shape: Shape::Model,
    });
    all.push(Target {
        name: "model-fixed",
        seeds: vec![seeds::constructed_model_file(&data, "fixed")],
        shape: Shape::Model,
    });
    let other = seeds::dataset(3, 3, 2, 5);
    all.extend([
        Target {
            name: "dataset-binary",
            seeds: vec![seeds::dataset_binary(&data), seeds::dataset_binary(&other)],
            shape: Shape::Dataset,
        },
        Target {
            name: "dataset-block",
            seeds: vec![seeds::dataset_binary(&data), seeds::dataset_binary(&other)],
            shape: Shape::Dataset,
        },
        Target {
            name: "dataset-json",
            seeds: vec![seeds::dataset_json(&data), seeds::dataset_json(&other)],
            shape: Shape::Json,
        },
        Target { name: "checkpoint", seeds: checkpoints, shape: Shape::Checkpoint },
        Target { name: "config", seeds: seeds::configs(), shape: Shape::Json },
        Target { name: "image-png", seeds: seeds::images(image::ImageFormat::Png), shape: Shape::Png },
        Target { name: "image-jpeg", seeds: seeds::images(image::ImageFormat::Jpeg), shape: Shape::Bytes },
    ]);
    all
}

/// Mutates through the typed structure: postcard → JSON tree → mutation →
/// postcard, so sizes, counts and values change while the encoding stays valid.
fn typed<T: Serialize + DeserializeOwned>(rng: &mut impl Rng, body: &[u8], ops: usize) -> Option<Vec<u8>> {
    let value: T = postcard::from_bytes(body).ok()?;
    let mut tree = serde_json::to_value(&value).ok()?;
    for _ in 0..ops {
        mutate_json(rng, &mut tree);
    }
    let value: T = serde_json::from_value(tree).ok()?;
    postcard::to_stdvec(&value).ok()
}

/// Typed mutation of one model kind's parameter bytes.
fn typed_params(rng: &mut impl Rng, kind: &str, bytes: &[u8]) -> Option<Vec<u8>> {
    use oracles::fixed::FixedModel;
    use oracles::indexed::IndexedLinearModel;
    use oracles::{
        boosting::BoostingModel, constant::ConstantModel, linear::LinearModel, mlp::MlpModel, zero::ZeroModel,
    };
    match kind {
        "zero" => typed::<ZeroModel>(rng, bytes, 1),
        "constant" => typed::<ConstantModel>(rng, bytes, 1),
        "linear" => typed::<LinearModel>(rng, bytes, 1),
        "boosting" => typed::<BoostingModel>(rng, bytes, 1),
        "mlp" => typed::<MlpModel>(rng, bytes, 1),
        "indexed-linear" => typed::<IndexedLinearModel>(rng, bytes, 1),
        "fixed" => typed::<FixedModel>(rng, bytes, 1),
        _ => None,
    }
}

/// Typed mutation of a model body, sometimes inside one type's parameters.
fn mutate_model_body(rng: &mut impl Rng, body: &[u8]) -> Option<Vec<u8>> {
    let (header, mut params): (ModelHeader, Vec<Vec<u8>>) = postcard::from_bytes(body).ok()?;
    if rng.random() && !params.is_empty() {
        let t = rng.random_range(0..params.len());
        let kind = header.factor_types.get(t).map_or("", |h| h.kind.as_str());
        params[t] = typed_params(rng, kind, &params[t])?;
        return postcard::to_stdvec(&(header, params)).ok();
    }
    let ops = rng.random_range(1..=2);
    typed::<(ModelHeader, Vec<Vec<u8>>)>(rng, body, ops)
}

/// Typed mutation of a checkpoint body, sometimes inside a model's parameters.
fn mutate_checkpoint_body(rng: &mut impl Rng, body: &[u8]) -> Option<Vec<u8>> {
    let mut cp: CheckpointMirror = postcard::from_bytes(body).ok()?;
    if rng.random() {
        let n = cp.models.len();
        if let Some(Some((kind, bytes))) = (n > 0).then(|| rng.random_range(0..n)).and_then(|i| cp.models.get_mut(i)) {
            *bytes = typed_params(rng, kind, bytes)?;
            return postcard::to_stdvec(&cp).ok();
        }
    }
    let ops = rng.random_range(1..=2);
    typed::<CheckpointMirror>(rng, body, ops)
}

impl Target {
    /// Input `index` of a run with `seed`: a seed file with one to four
    /// mutations, chosen by a generator seeded from `(seed, target, index)` alone,
    /// so any input can be regenerated from its index.
    pub fn input(&self, seed: u64, index: u64) -> Vec<u8> {
        let name_hash = structlearn::files::fnv1a(self.name.as_bytes());
        let mut rng =
            rand_chacha::ChaCha8Rng::seed_from_u64(structlearn::mix_seed(seed ^ name_hash, index as usize, 0));
        let mut data = self.seeds[rng.random_range(0..self.seeds.len())].clone();
        let rounds = rng.random_range(1..=4);
        for _ in 0..rounds {
            data = self.mutate_once(&mut rng, data);
        }
        data
    }

    fn mutate_once(&self, rng: &mut impl Rng, mut data: Vec<u8>) -> Vec<u8> {
        let framed = match self.shape {
            Shape::Model => Some(MODEL_MAGIC),
            Shape::Dataset => Some(DATASET_MAGIC),
            Shape::Checkpoint => Some(CHECKPOINT_MAGIC),
            _ => None,
        };
        if let Some(magic) = framed {
            // 10%: raw bytes (magic, version, checksum too); else a valid frame.
            if rng.random_range(0..10) == 0 || data.len() < 16 {
                mutate_bytes(rng, &mut data, &self.seeds);
                return data;
            }
            let body = &data[8..data.len() - 8];
            let ops = rng.random_range(1..=3);
            let typed = match rng.random_range(0..5) {
                0 | 1 => None,
                _ => match self.shape {
                    Shape::Model => mutate_model_body(rng, body),
                    Shape::Dataset => typed::<DatasetFile>(rng, body, ops),
                    _ => mutate_checkpoint_body(rng, body),
                },
            };
            let body = typed.unwrap_or_else(|| {
                let mut b = body.to_vec();
                mutate_bytes(rng, &mut b, &[]);
                b
            });
            return wrap_binary(magic, &body);
        }
        match self.shape {
            Shape::Tokens => {
                if rng.random_range(0..8) == 0 {
                    mutate_bytes(rng, &mut data, &self.seeds);
                    data
                } else {
                    mutate_tokens(rng, &String::from_utf8_lossy(&data)).into_bytes()
                }
            }
            Shape::Json => match serde_json::from_slice::<Value>(&data) {
                Ok(mut tree) if rng.random_range(0..6) != 0 => {
                    mutate_json(rng, &mut tree);
                    serde_json::to_vec(&tree).unwrap_or(data)
                }
                _ => {
                    mutate_bytes(rng, &mut data, &self.seeds);
                    data
                }
            },
            Shape::Png if rng.random_range(0..4) != 0 => {
                mutate_png(rng, &mut data);
                data
            }
            _ => {
                mutate_bytes(rng, &mut data, &self.seeds);
                data
            }
        }
    }
}

thread_local! {
    static CONTEXT: Context = Context { data: seeds::dataset(4, 2, 3, 11), registry: ModelRegistry::with_builtin() };
    static TRAINER: std::cell::RefCell<Trainer<'static>> = {
        // The trainer borrows its data for its whole life: one leaked data set per thread.
        let data: &'static Dataset = Box::leak(Box::new(seeds::dataset(4, 2, 3, 11)));
        let trainer = Trainer::new(data, seeds::oracles_for("linear", "boosting"), seeds::quick_config(0));
        std::cell::RefCell::new(trainer.expect("the seed data trains"))
    };
}

/// Scores a few rows of zeros with every type's model (no NaN, no +∞), when the buffers are
/// small (a model with millions of classes is only ever scored against a data
/// set whose regions have that many configurations, which bounds the buffer).
fn first_scores(model: &StructuredModel) -> Result<(), String> {
    for (m, ft) in model.models().iter().zip(model.factor_types()) {
        let (dim, classes) = (m.dim(), m.classes());
        if dim > 1 << 12 || classes > 1 << 12 {
            continue;
        }
        let rows = 3;
        // Zeros: a valid group index for the indexed class, a plain input for the others.
        let x = vec![0.0; rows * dim];
        let mut out = vec![0.0; rows * classes];
        let features = Features::new(&x, rows, dim).map_err(|e| format!("features for `{}`: {e}", ft.name))?;
        m.score(features, &mut out).map_err(|e| format!("first score of `{}` failed: {e}", ft.name))?;
        // −∞ is a hard constraint (the fixed class's forbidden configurations); NaN and +∞ are never valid.
        if let Some(v) = out.iter().find(|v| v.is_nan() || **v == f64::INFINITY) {
            return Err(format!("first score of `{}` is {v}", ft.name));
        }
    }
    Ok(())
}

impl Target {
    /// Runs the loader on `bytes` and checks what it returns.
    pub fn run(&self, bytes: &[u8]) -> Outcome {
        CONTEXT.with(|cx| self.run_in(cx, bytes))
    }

    fn run_in(&self, cx: &Context, bytes: &[u8]) -> Outcome {
        let path = Path::new("fuzz-input");
        match self.shape {
            Shape::Tokens => {
                let text = String::from_utf8_lossy(bytes);
                match factor_graph::UaiModel::parse(&text).and_then(|m| m.to_region_graph().map(|r| (m, r))) {
                    Err(e) => Outcome::Rejected(e.to_string()),
                    Ok((m, r)) => {
                        let again = factor_graph::UaiModel::parse(&m.to_uai_string());
                        if again.as_ref().ok() != Some(&m) {
                            return Outcome::Invariant(format!("written UAI text does not parse back: {again:?}"));
                        }
                        if r.theta.len() != r.graph.total_configs() || !r.constant.is_finite() {
                            return Outcome::Invariant("converted potentials do not fit the graph".into());
                        }
                        Outcome::Accepted
                    }
                }
            }
            Shape::Model => match StructuredModel::from_bytes(bytes, &cx.registry, path) {
                Err(e) => Outcome::Rejected(e.to_string()),
                Ok(model) => {
                    if let Err(e) = first_scores(&model) {
                        return Outcome::Invariant(e);
                    }
                    resave(&model.to_bytes().map_err(|e| e.to_string()), |b| {
                        StructuredModel::from_bytes(b, &cx.registry, path)
                            .and_then(|m| m.to_bytes())
                            .map_err(|e| e.to_string())
                    })
                }
            },
            Shape::Dataset if self.name == "dataset-block" => blocks_agree(bytes),
            Shape::Dataset => match Dataset::from_bytes(bytes, path) {
                Err(e) => Outcome::Rejected(e.to_string()),
                Ok(data) => dataset_round_trip(&data),
            },
            Shape::Json if self.name == "dataset-json" => {
                match Dataset::from_bytes(bytes, Path::new("fuzz-input.json")) {
                    Err(e) => Outcome::Rejected(e.to_string()),
                    Ok(data) => dataset_round_trip(&data),
                }
            }
            Shape::Json => match config(cx, bytes) {
                Err(e) => Outcome::Rejected(e),
                Ok(()) => Outcome::Accepted,
            },
            Shape::Checkpoint => TRAINER.with_borrow_mut(|trainer| {
                // One trainer for all inputs: a resume replaces all its state.
                match trainer.resume_from_bytes(bytes, path, &cx.registry) {
                    Err(e) => Outcome::Rejected(e.to_string()),
                    Ok(()) => match trainer.model() {
                        Ok(_) => Outcome::Accepted,
                        Err(e) => Outcome::Rejected(e.to_string()),
                    },
                }
            }),
            Shape::Png | Shape::Bytes => match datasets::image::decode_image(bytes, path) {
                Err(e) => Outcome::Rejected(e.to_string()),
                Ok(img) => {
                    let rgb = img.to_rgb8();
                    let labels = datasets::image::labels_from_mask(&img.to_luma8(), 128);
                    if labels.height() != rgb.height() as usize || labels.width() != rgb.width() as usize {
                        return Outcome::Invariant("label map and image differ in shape".into());
                    }
                    Outcome::Accepted
                }
            },
        }
    }
}

/// `Dataset::load_block` (the streamed reader of one rank's block) against
/// the whole file's loader, for 2 ranks: where the file loads, each rank's
/// block loads and equals the loaded set's block (or both refuse fewer
/// examples than ranks); where it does not, some rank refuses its block (a
/// rank validates only its own examples).
fn blocks_agree(bytes: &[u8]) -> Outcome {
    thread_local! {
        static FILE: std::path::PathBuf = std::env::temp_dir()
            .join(format!("structlearn-fuzz-block-{}-{:?}.sld", std::process::id(), std::thread::current().id()));
    }
    FILE.with(|file| {
        if let Err(e) = std::fs::write(file, bytes) {
            return Outcome::Invariant(format!("cannot write {}: {e}", file.display()));
        }
        let whole = Dataset::from_bytes(bytes, Path::new("fuzz-input"));
        let blocks: Vec<_> = (0..2).map(|r| Dataset::load_block(file, r, 2)).collect();
        let as_bytes = |d: &Dataset| postcard::to_stdvec(&DatasetFile::from_dataset(d)).ok();
        match whole {
            Err(e) if blocks.iter().all(Result::is_ok) => {
                Outcome::Invariant(format!("the file is refused ({e}) but every rank accepts its block"))
            }
            Err(e) => Outcome::Rejected(e.to_string()),
            Ok(data) => {
                for (r, block) in blocks.iter().enumerate() {
                    let expected = data.clone().into_block(r, 2);
                    match (block, &expected) {
                        (Ok(b), Ok(e)) if as_bytes(b) == as_bytes(e) => {}
                        (Err(_), Err(_)) => {}
                        (b, e) => {
                            return Outcome::Invariant(format!(
                                "rank {r}: load_block gives {:?}, the loaded set's block {:?}",
                                b.as_ref().map(Dataset::len).map_err(ToString::to_string),
                                e.as_ref().map(Dataset::len).map_err(ToString::to_string)
                            ));
                        }
                    }
                }
                Outcome::Accepted
            }
        }
    })
}

/// A loaded data set saved again must load back and save to the same bytes.
fn dataset_round_trip(data: &Dataset) -> Outcome {
    let once = postcard::to_stdvec(&DatasetFile::from_dataset(data)).map(|b| wrap_binary(DATASET_MAGIC, &b));
    resave(&once.map_err(|e| e.to_string()), |b| {
        let again = Dataset::from_bytes(b, Path::new("resaved")).map_err(|e| e.to_string())?;
        postcard::to_stdvec(&DatasetFile::from_dataset(&again))
            .map(|b| wrap_binary(DATASET_MAGIC, &b))
            .map_err(|e| e.to_string())
    })
}

/// `save(load(saved)) == saved` for a value that loaded once.
fn resave(saved: &Result<Vec<u8>, String>, reload: impl Fn(&[u8]) -> Result<Vec<u8>, String>) -> Outcome {
    match saved {
        Err(e) => Outcome::Invariant(format!("a loaded value cannot be saved: {e}")),
        Ok(bytes) => match reload(bytes) {
            Ok(again) if &again == bytes => Outcome::Accepted,
            Ok(_) => Outcome::Invariant("save → load → save is not byte-identical".into()),
            Err(e) => Outcome::Invariant(format!("a re-saved value does not load: {e}")),
        },
    }
}

/// A training configuration as `structlearn train --config` reads it, checked
/// by building a trainer on the seed data (no training).
fn config(cx: &Context, bytes: &[u8]) -> Result<(), String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let obj = v.as_object().ok_or("not an object")?;
    let config: structlearn::TrainConfig = match obj.get("train") {
        Some(t) => serde_json::from_value(t.clone()).map_err(|e| e.to_string())?,
        None => structlearn::TrainConfig::default(),
    };
    let specs = obj.get("oracles").and_then(Value::as_object).ok_or("no oracles")?;
    let oracles = specs
        .iter()
        .map(|(t, spec)| Ok((t.clone(), structlearn::oracle_config::oracle_from_json(spec)?)))
        .collect::<Result<Vec<_>, structlearn::LearnError>>()
        .map_err(|e| e.to_string())?;
    Trainer::new(&cx.data, oracles, config).map(|_| ()).map_err(|e| e.to_string())
}

/// The body of a framed file, if its frame is intact (for tests).
pub fn body<'a>(bytes: &'a [u8], magic: &[u8; 8]) -> Option<&'a [u8]> {
    unwrap_binary(Path::new("x"), bytes, magic).ok()
}
