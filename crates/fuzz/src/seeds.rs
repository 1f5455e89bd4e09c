//! Valid files of every kind, built in code: the seeds the mutations start
//! from, and the inputs of the round-trip properties.

use std::path::Path;
use std::sync::Arc;

use factor_graph::{GridLayout, UaiModel, grid};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use structlearn::oracle_config::builtin_oracle;
use structlearn::{Dataset, DatasetFile, Example, FactorTypeInfo, FeatureBlock, StructuredModel, TrainConfig, Trainer};

/// The built-in model kinds (one fuzz target each).
pub const MODEL_KINDS: [&str; 5] = ["zero", "constant", "linear", "boosting", "mlp"];

/// A small denoising-like data set: `count` binary images of two shapes
/// (`h × w` and `w × h`), unary features `[value, 1]`, pairwise `[difference]`
/// (dimension 1), labels on every example.
pub fn dataset(count: usize, h: usize, w: usize, seed: u64) -> Dataset {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let shapes = [(h, w), (w, h)].map(|(h, w)| (GridLayout { height: h, width: w }, Arc::new(grid(h, w, 2).unwrap())));
    let examples = (0..count)
        .map(|k| {
            let (layout, graph) = &shapes[k % 2];
            let labels: Vec<usize> = (0..layout.num_pixels()).map(|_| rng.random_range(0..2)).collect();
            let value = |y: usize, rng: &mut ChaCha8Rng| y as f64 * 0.6 + rng.random::<f64>() * 0.4;
            let unary: Vec<f64> = labels.iter().flat_map(|&y| [value(y, &mut rng), 1.0]).collect();
            let pairwise: Vec<f64> = (0..layout.num_pairs())
                .map(|p| {
                    let (i, j) = layout.pair_pixels(p);
                    (unary[2 * i] - unary[2 * j]).abs()
                })
                .collect();
            Example::new(
                format!("image{k}"),
                graph.clone(),
                Some(labels),
                vec![FeatureBlock { dim: 2, values: unary }, FeatureBlock { dim: 1, values: pairwise }],
            )
        })
        .collect();
    Dataset::new(vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)], examples).unwrap()
}

/// A configuration that trains the seeds' models quickly.
pub fn quick_config(seed: u64) -> TrainConfig {
    TrainConfig { learning_iterations: 2, message_passing_iterations: 3, seed, ..TrainConfig::default() }
}

/// Small hyper-parameters per kind, so seeds train in milliseconds.
pub fn quick_oracle(kind: &str) -> Box<dyn oracles::Oracle> {
    let spec = match kind {
        "boosting" => serde_json::json!({ "kind": kind, "rounds": 3, "max_leaves": 4 }),
        "mlp" => serde_json::json!({ "kind": kind, "hidden": 3, "epochs": 2 }),
        _ => serde_json::json!({ "kind": kind }),
    };
    structlearn::oracle_config::oracle_from_json(&spec).unwrap_or_else(|_| builtin_oracle(kind).unwrap())
}

/// The oracles of `data`'s two types: `unary` and `pairwise` of these kinds.
pub fn oracles_for(unary: &str, pairwise: &str) -> Vec<(String, Box<dyn oracles::Oracle>)> {
    vec![("unary".into(), quick_oracle(unary)), ("pairwise".into(), quick_oracle(pairwise))]
}

/// A trained model whose two factor types use `kind`.
pub fn model(data: &Dataset, kind: &str) -> StructuredModel {
    let mut trainer = Trainer::new(data, oracles_for(kind, kind), quick_config(1)).unwrap();
    trainer.train().unwrap().model
}

/// The binary model file of a model of `kind`.
pub fn model_file(data: &Dataset, kind: &str) -> Vec<u8> {
    model(data, kind).to_bytes().unwrap()
}

/// Model files of the classes that are built, not trained, here: an
/// indexed-linear model (three groups; the last feature is the group index)
/// and a fixed table with a forbidden configuration, for `data`'s two types.
pub fn constructed_model_file(data: &Dataset, kind: &str) -> Vec<u8> {
    use oracles::Model;
    let models: Vec<Box<dyn Model>> = data
        .factor_types()
        .iter()
        .map(|ft| -> Box<dyn Model> {
            let c = ft.classes;
            match kind {
                "indexed-linear" => {
                    let groups = 3;
                    let weights =
                        (0..groups * ft.dim.saturating_sub(1) * c).map(|i| (i % 7) as f64 * 0.1 - 0.3).collect();
                    Box::new(oracles::indexed::IndexedLinearModel::new(ft.dim, groups, c, weights).unwrap())
                }
                _ => Box::new(
                    oracles::fixed::FixedModel::new(ft.dim, (0..c).map(|y| y as f64 * 0.5).collect(), vec![c - 1])
                        .unwrap(),
                ),
            }
        })
        .collect();
    let eps = vec![0.5; models.len()];
    StructuredModel::new(data.factor_types().to_vec(), eps, models).unwrap().to_bytes().unwrap()
}

/// A binary data set file.
pub fn dataset_binary(data: &Dataset) -> Vec<u8> {
    let body = postcard::to_stdvec(&DatasetFile::from_dataset(data)).unwrap();
    structlearn::files::wrap_binary(structlearn::data::DATASET_MAGIC, &body)
}

/// A JSON data set file.
pub fn dataset_json(data: &Dataset) -> Vec<u8> {
    serde_json::to_vec(&DatasetFile::from_dataset(data)).unwrap()
}

/// A checkpoint after one learning iteration of `data` with these kinds, for
/// a trainer with [`quick_config`]`(seed)`.
pub fn checkpoint(data: &Dataset, unary: &str, pairwise: &str, seed: u64, dir: &Path) -> Vec<u8> {
    let path = dir.join(format!("{unary}-{pairwise}-{seed}.ckpt"));
    let config = TrainConfig { learning_iterations: 1, ..quick_config(seed) };
    let mut trainer = Trainer::new(data, oracles_for(unary, pairwise), config).unwrap();
    trainer.train().unwrap();
    trainer.save_checkpoint(&path).unwrap();
    std::fs::read(&path).unwrap()
}

/// Training configurations as the command line reads them.
pub fn configs() -> Vec<Vec<u8>> {
    [
        serde_json::json!({"train": {"epsilon": 0.1, "learning_iterations": 3, "seed": 7},
            "oracles": {"unary": {"kind": "boosting", "rounds": 5, "bins": 16}, "pairwise": {"kind": "linear"}}}),
        serde_json::json!({"train": {"type_epsilon": [["unary", 0.5]], "evaluate": "every-step",
            "schedule": [{"fit": {"factor_type": "unary"}}, {"message-passing": {"iterations": 3}},
                         {"fit": {"factor_type": "pairwise"}}],
            "predict": {"iterations": 10, "tolerance": 1e-3}, "checkpoint": {"path": "x.ckpt", "every": 2}},
            "oracles": {"unary": {"kind": "mlp", "hidden": 4}, "pairwise": {"kind": "constant"}}}),
        serde_json::json!({"oracles": {"unary": {"kind": "zero"}, "pairwise": {"kind": "boosting"}}}),
    ]
    .iter()
    .map(|v| serde_json::to_vec_pretty(v).unwrap())
    .collect()
}

/// UAI files: the format's example, a grid from the converter, a Bayes
/// network, comments, an empty-scope constant and a zero entry.
pub fn uai_files() -> Vec<Vec<u8>> {
    let example = "MARKOV\n3\n2 2 3\n4\n1 0\n2 0 1\n2 1 2\n2 2 1\n\n2\n 0.436 0.564\n\n4\n 0.128 0.872\n 0.920 0.080\n\n6\n 0.210 0.333 0.457\n 0.811 0.000 0.189\n\n6\n 1 2\n 3 4\n 5 6\n";
    let g = grid(2, 2, 3).unwrap();
    let theta: Vec<f64> = (0..g.total_configs()).map(|i| (i % 5) as f64 * 0.25 - 0.5).collect();
    let exported = UaiModel::from_region_graph(&g, &theta).to_uai_string();
    let bayes = "BAYES\n2\n2 2\n2\n1 0\n2 0 1\n2\n0.3 0.7\n4\n0.9 0.1 0.2 0.8\n";
    let comments = "MARKOV // a comment\n2\n2 2 // cards\n2\n0\n2 1 0\n1\n2.5\n4\n1 2 3 4\n";
    [example, exported.as_str(), bayes, comments].iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// Small PNG (gray, RGB, label map) or JPEG images.
pub fn images(format: image::ImageFormat) -> Vec<Vec<u8>> {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let rgb = image::RgbImage::from_fn(7, 5, |_, _| image::Rgb([rng.random(), rng.random(), rng.random()]));
    let gray = image::GrayImage::from_fn(6, 4, |x, y| image::Luma([((x * 40 + y * 7) % 256) as u8]));
    let labels = image::RgbImage::from_fn(5, 5, |x, y| {
        if (x + y) % 2 == 0 { image::Rgb([0, 0, 0]) } else { image::Rgb([255, 255, 255]) }
    });
    let encode = |img: image::DynamicImage| {
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, format).unwrap();
        out.into_inner()
    };
    let mut files = vec![encode(rgb.into()), encode(labels.into())];
    if format == image::ImageFormat::Png {
        files.push(encode(gray.into()));
    }
    files
}
