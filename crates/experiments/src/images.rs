//! `cargo xtask reproduce horses` (NIPS 2013 Table 1 right) and
//! `cargo xtask reproduce stanford` (chapter Table 1.1) on the real image data
//! sets (docs/MATH.md §6.2–6.3, docs/DATASETS.md), with the runner shared by every
//! experiment ([`crate::runner`]).
//!
//! Images are loaded from `--data-dir` (or `STRUCTLEARN_DATA_DIR`), reduced,
//! featurised and cached (`target/reproduce/cache` unless `--cache-dir`/`--no-cache`),
//! split (written as `split-train.txt` / `split-test.txt` in the output folder),
//! standardised with training statistics (written as `features.json`, which
//! `structlearn predict-image` reads beside a model), and trained cell by cell.
//! Besides the runner's outputs, `fig3_predictions.png` shows test images, their
//! truth and the diagonal cells' predictions with a class-colour legend
//! (`legend.md`), and `per_class.csv` the per-class accuracy and IoU.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use datasets::features::{FeatureConfig, HOG_OFFSET, PAIR_DIM, Standardizer, UNARY_DIM};
use datasets::photos::{
    ImageFeatures, PairTypes, Pipeline, SceneData, SceneImage, Use, build_examples, cache_key, cached,
    compute_features, fit_standardizers, random_split,
};
use datasets::{LabelPalette, horses, stanford};
use oracles::{ModelRegistry, Oracle};
use structlearn::files::write_atomic;
use structlearn::{Dataset, LearnError, PredictOptions, Step, StructuredModel};

use crate::runner::{
    Budget, CHAPTER_MESSAGE_PASSING, CellResult, Experiment, ExperimentData, Options, PaperTable, Scale, budget_of,
    class_budgets, class_oracle, model_path,
};
use reporting::plots::{self, PlotImage};

/// NIPS 2013 Table 1 (right), Weizmann horses: test errors, rows unary, columns pairwise.
pub const PAPER_HORSES: PaperTable = [
    [0.246, 0.246, 0.247, 0.244, 0.245],
    [0.246, 0.246, 0.247, 0.244, 0.245],
    [0.185, 0.185, 0.168, 0.154, 0.156],
    [0.103, 0.098, 0.092, 0.084, 0.086],
    [0.096, 0.094, 0.087, 0.080, 0.081],
];

/// Chapter Table 1.1, Stanford Background: test errors.
pub const PAPER_STANFORD_TEST: PaperTable = [
    [0.863, 0.673, 0.593, 0.483, 0.518],
    [0.793, 0.673, 0.593, 0.485, 0.518],
    [0.345, 0.329, 0.304, 0.296, 0.296],
    [0.331, 0.304, 0.296, 0.287, 0.284],
    [0.310, 0.281, 0.280, 0.271, 0.272],
];

/// Chapter Table 1.1, Stanford Background: training errors.
pub const PAPER_STANFORD_TRAIN: PaperTable = [
    [0.853, 0.641, 0.553, 0.470, 0.497],
    [0.769, 0.640, 0.553, 0.470, 0.497],
    [0.322, 0.304, 0.283, 0.272, 0.272],
    [0.289, 0.259, 0.249, 0.239, 0.239],
    [0.262, 0.226, 0.216, 0.210, 0.209],
];

/// Which data set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Which {
    /// Weizmann horses.
    Horses,
    /// Stanford Background.
    Stanford,
}

/// The settings of a run: data, resolution, split, features, learning and
/// oracle budgets. Every field can be overridden with `--set KEY=VALUE`
/// ([`Preset::set`]); the whole preset is recorded in `run.json`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Preset {
    name: String,
    dataset: Which,
    /// Horses: longer side of the reduced images.
    max_side: Option<usize>,
    /// Stanford: reduction factor.
    scale: Option<f64>,
    /// Images used (first in name order; `None`: all) before the split.
    images: Option<usize>,
    train: usize,
    split_seed: u64,
    /// Every seed splits the images with `split_seed` (`true`: the seeds vary
    /// only the randomness of training, the MLP's initialisation and
    /// minibatches and boosting's seeds, as in results version 2) or seed `s`
    /// with `split_seed + s` (`false`, the default; not recorded then).
    #[serde(default)]
    fixed_split: bool,
    features: FeatureConfig,
    /// Standardise the features with training statistics (`false`: raw values).
    standardize: bool,
    /// Unary feature groups set to zero before training (ablations): any of
    /// `rgb`, `position`, `hog`.
    drop_unary: Vec<FeatureGroup>,
    /// One pair type for both directions (`shared`) or one per direction
    /// (`by-direction`: `horizontal` and `vertical`, each fitted by the cell's
    /// pairwise oracle kind).
    #[serde(default)]
    pair_types: PairTypes,
    learning_iterations: usize,
    /// [`Budget::train_error_every`] (not recorded when 1, as in runs
    /// from before the setting existed).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    train_error_every: usize,
    /// [`Budget::message_passing_iterations`] (not recorded in `run.json`
    /// when the chapter's 25, as in runs from before the setting existed).
    #[serde(default = "chapter_message_passing")]
    message_passing_iterations: usize,
    predict: PredictOptions,
    boosting_rounds: usize,
    mlp_epochs: usize,
    mlp_minibatch: usize,
    /// Extra hyper-parameters per oracle kind, laid over the preset's (e.g.
    /// `linear.warm_max_iterations`; `structlearn train --help` lists them).
    oracles: BTreeMap<String, serde_json::Value>,
}

fn one() -> usize {
    1
}

fn is_one(k: &usize) -> bool {
    *k == 1
}

fn chapter_message_passing() -> usize {
    CHAPTER_MESSAGE_PASSING
}

/// A group of unary feature columns (docs/IMAGES.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum FeatureGroup {
    /// Columns 1–3.
    Rgb,
    /// Columns 4–5.
    Position,
    /// Columns 6–41.
    Hog,
}

impl FeatureGroup {
    fn columns(self) -> std::ops::Range<usize> {
        match self {
            FeatureGroup::Rgb => 1..4,
            FeatureGroup::Position => 4..HOG_OFFSET,
            FeatureGroup::Hog => HOG_OFFSET..UNARY_DIM,
        }
    }
}

/// Sets the unary columns of `groups` to zero in every image's features.
fn drop_unary(features: &mut [ImageFeatures], groups: &[FeatureGroup]) {
    for f in features {
        for row in f.unary.values.chunks_exact_mut(UNARY_DIM) {
            for group in groups {
                row[group.columns()].fill(0.0);
            }
        }
    }
}

impl Preset {
    /// Overrides one setting: `key` is a dotted path into the preset as
    /// recorded in `run.json` (`max_side`, `features.hog_cell`,
    /// `oracles.linear.warm_max_iterations`, …), `value` JSON (`64`, `false`,
    /// `null`, `["hog"]`) or else a plain string.
    fn set(self, assignment: &str) -> Result<Self> {
        let (key, text) = assignment
            .split_once('=')
            .with_context(|| format!("--set {assignment}: expected KEY=VALUE, e.g. max_side=64"))?;
        anyhow::ensure!(key != "dataset", "--set dataset: choose the data set with the experiment's name instead");
        let value: serde_json::Value =
            serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_string()));
        let mut json = serde_json::to_value(&self)?;
        let mut slot = &mut json;
        let parts: Vec<&str> = key.split('.').collect();
        for (depth, part) in parts.iter().enumerate() {
            // Only the per-kind oracle maps may gain new keys (the oracle checks them).
            let open = parts[0] == "oracles" && depth >= 1;
            let serde_json::Value::Object(map) = slot else {
                anyhow::bail!("--set {key}: `{}` is not a group of settings", parts[..depth].join("."));
            };
            if !map.contains_key(*part) {
                anyhow::ensure!(
                    open,
                    "--set {key}: no setting `{part}` (known here: {})",
                    map.keys().cloned().collect::<Vec<_>>().join(", ")
                );
                map.insert(part.to_string(), serde_json::json!({}));
            }
            slot = map.get_mut(*part).expect("present");
        }
        *slot = value;
        serde_json::from_value(json).with_context(|| format!("--set {assignment}"))
    }
}

impl Preset {
    /// Refuses settings that would be ignored or contradict each other: the
    /// resolution setting of the other data set (horses are reduced to a
    /// longer side of `max_side` pixels, Stanford by the factor `scale`),
    /// a missing or out-of-range resolution, and per-kind oracle settings
    /// that are not a group of settings (`oracles.linear=5`).
    fn validate(&self) -> Result<()> {
        let max = datasets::photos::MAX_REDUCED_SIDE;
        match self.dataset {
            Which::Horses => {
                anyhow::ensure!(
                    self.scale.is_none(),
                    "--set scale: horses are reduced to a longer side of max_side pixels, not by a scale factor \
                     (that is Stanford's setting); remove the --set scale and use --set max_side=N (2..={max})"
                );
                match self.max_side {
                    None => anyhow::bail!(
                        "--set max_side=null: horses need the longer side of the reduced images; give --set \
                         max_side=N (2..={max}) or leave it at the preset's"
                    ),
                    Some(m) if !(2..=max).contains(&m) => anyhow::bail!(
                        "--set max_side={m}: the longer side must be in 2..={max} pixels (the feature pipeline's \
                         limit, which `structlearn predict-image` also applies)"
                    ),
                    Some(_) => {}
                }
            }
            Which::Stanford => {
                anyhow::ensure!(
                    self.max_side.is_none(),
                    "--set max_side: Stanford images are reduced by a scale factor, not to a longer side (that is \
                     the horses' setting); remove the --set max_side and use --set scale=F (0 < F ≤ 1)"
                );
                match self.scale {
                    None => anyhow::bail!(
                        "--set scale=null: Stanford needs the reduction factor; give --set scale=F (0 < F ≤ 1) or \
                         leave it at the preset's"
                    ),
                    Some(f) if !(f > 0.0 && f <= 1.0) => {
                        anyhow::bail!("--set scale={f}: the reduction factor must be in (0, 1]")
                    }
                    Some(_) => {}
                }
            }
        }
        for (kind, settings) in &self.oracles {
            anyhow::ensure!(
                settings.is_object(),
                "--set oracles.{kind}={settings}: the settings of an oracle kind are a group of named \
                 hyper-parameters, e.g. --set oracles.{kind}.l2=0.5 (`structlearn train --help` lists them)"
            );
        }
        Ok(())
    }
}

fn preset(which: Which, scale: Scale) -> Preset {
    let common = Preset {
        name: "full".into(),
        dataset: which,
        max_side: None,
        scale: None,
        images: None,
        train: 0,
        split_seed: 0,
        fixed_split: false,
        features: FeatureConfig::default(),
        standardize: true,
        drop_unary: Vec::new(),
        pair_types: PairTypes::Shared,
        learning_iterations: 25,
        train_error_every: 1,
        message_passing_iterations: CHAPTER_MESSAGE_PASSING,
        predict: PredictOptions { iterations: 10, tolerance: Some(1e-4) },
        boosting_rounds: 10,
        mlp_epochs: 1,
        mlp_minibatch: 100,
        oracles: BTreeMap::new(),
    };
    let full = match which {
        // 328 images: 200 train / 128 test; longer side 32 pixels, 15 learning
        // iterations: all 25 cells in about an hour on one core (docs/results/horses).
        // HOG cells of 2 pixels (Stanford keeps 4 on its 64×48 images): with
        // 4-pixel cells each pixel's HOG window covers a quarter of the image
        // and the linear row falls 0.013–0.032 below the paper; with 2 all 25
        // cells are within ±0.02, mean |difference| of the learned rows 0.007
        // against 0.009 (docs/results/horses, hog-cell4/ and ablations/).
        Which::Horses => Preset {
            max_side: Some(32),
            train: 200,
            learning_iterations: 15,
            features: FeatureConfig { hog_cell: 2, ..FeatureConfig::default() },
            ..common
        },
        // The chapter: 572 / 143 at 20 %, 25 learning iterations. Boosting
        // re-fits its leaves with a ridge of 10 (the chapter: none; the
        // oracle's default, 100, held the cell back, and with 1 the fits stop
        // lowering the objective after 11 iterations: docs/results/stanford).
        // A warm MLP fit that lowers nothing retries at half the step, up to
        // 3 times (with the papers' fixed step alone mlp/mlp stalls at SGD's
        // noise floor: training error 0.244 against the chapter's 0.209; 0.222 with it).
        Which::Stanford => Preset {
            scale: Some(0.2),
            train: 572,
            oracles: BTreeMap::from([
                ("boosting".to_string(), serde_json::json!({ "leaf_l2": 10.0 })),
                ("mlp".to_string(), serde_json::json!({ "step_halvings": 3 })),
            ]),
            ..common
        },
    };
    match scale {
        Scale::Full => full,
        Scale::Default => match which {
            Which::Horses => {
                Preset { name: "default".into(), images: Some(120), train: 80, learning_iterations: 10, ..full }
            }
            Which::Stanford => {
                Preset { name: "default".into(), images: Some(150), train: 100, learning_iterations: 10, ..full }
            }
        },
        Scale::Quick => Preset {
            name: "quick".into(),
            images: Some(36),
            train: 24,
            learning_iterations: 3,
            max_side: full.max_side.map(|_| 24),
            ..full
        },
    }
}

/// A real-image experiment under a preset.
pub struct Images {
    p: Preset,
    data_dir: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
}

impl Images {
    /// The experiment on `which` at `opts.scale`, with the options' overrides
    /// and the `--set KEY=VALUE` assignments `set` (`Preset::set`).
    pub fn new(which: Which, opts: &Options, set: &[String]) -> Result<Self> {
        let mut p = preset(which, opts.scale);
        p.predict.iterations = opts.predict_iterations.unwrap_or(p.predict.iterations);
        p.learning_iterations = opts.iterations.unwrap_or(p.learning_iterations);
        p.train_error_every = opts.train_error_every.unwrap_or(p.train_error_every);
        for assignment in set {
            p = p.set(assignment)?;
        }
        p.validate()?;
        p.features.validate()?;
        let cache_dir = if opts.no_cache {
            None
        } else {
            Some(opts.cache_dir.clone().unwrap_or_else(|| PathBuf::from("target/reproduce/cache")))
        };
        let exp = Self { p, data_dir: opts.data_dir.clone(), cache_dir };
        // Unknown oracle hyper-parameters, and budgets the oracles refuse
        // (boosting_rounds=0, mlp_epochs=0, …), are refused now, not when the
        // first cell of that class starts: of every class, whichever cells run.
        for kind in exp.p.oracles.keys().map(String::as_str).chain(crate::runner::CLASSES) {
            for pairwise in [false, true] {
                exp.oracle(kind, pairwise).with_context(|| {
                    let budgets = class_budgets(exp.p.boosting_rounds, exp.p.mlp_epochs, exp.p.mlp_minibatch, pairwise);
                    let budget = budget_of(&budgets, kind).map_or("", |b| b.preset_keys);
                    format!("the {kind} oracle's settings (--set {budget}oracles.{kind}.…)")
                })?;
            }
        }
        Ok(exp)
    }

    fn classes(&self) -> usize {
        match self.p.dataset {
            Which::Horses => 2,
            Which::Stanford => stanford::CLASSES.len(),
        }
    }

    fn class_list(&self) -> Vec<String> {
        match self.p.dataset {
            Which::Horses => vec!["background".into(), "horse".into()],
            Which::Stanford => stanford::CLASSES.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// Loads (or reads from the cache) every image of the preset with its features.
    /// The seed that splits the images for the run's seed `seed`: the
    /// preset's `split_seed` + `seed` (results version 3; seed 0 keeps the
    /// preset's split), so `--seeds N` repeats a cell on N splits; with
    /// `fixed_split` the preset's `split_seed` for every seed.
    fn split_seed(&self, seed: u64) -> Result<u64> {
        if self.p.fixed_split {
            return Ok(self.p.split_seed);
        }
        self.p.split_seed.checked_add(seed).with_context(|| {
            format!("split seed {} + seed {seed} is past the largest seed; use smaller seeds", self.p.split_seed)
        })
    }

    fn load(&self) -> Result<SceneData> {
        let start = Instant::now();
        let (root, dirs, prefix) = match self.p.dataset {
            Which::Horses => (horses::dataset_dir(self.data_dir.as_deref())?, ["rgb", "figure_ground"], "horses"),
            Which::Stanford => (stanford::dataset_dir(self.data_dir.as_deref())?, ["images", "labels"], "stanford"),
        };
        let settings = serde_json::json!({
            "dataset": self.p.dataset, "max_side": self.p.max_side, "scale": self.p.scale,
            "images": self.p.images, "features": self.p.features,
        });
        let key = cache_key(&root, &dirs, &settings)?;
        let (data, hit) = cached(self.cache_dir.as_deref(), prefix, key, || {
            let images = match self.p.dataset {
                Which::Horses => horses::load(
                    &root,
                    &horses::HorsesConfig { max_side: self.p.max_side.unwrap_or(32), limit: self.p.images },
                )?,
                Which::Stanford => stanford::load(
                    &root,
                    &stanford::StanfordConfig { scale: self.p.scale.unwrap_or(0.2), limit: self.p.images },
                )?,
            };
            let features = compute_features(&images, &self.p.features)?;
            Ok(SceneData { images, features })
        })?;
        eprintln!(
            "{} images {} in {:.1} s",
            data.images.len(),
            if hit { "read from the feature cache" } else { "loaded and featurised" },
            start.elapsed().as_secs_f64()
        );
        Ok(data)
    }

    /// One split in words: its sizes, the error of predicting the test set's
    /// most frequent class everywhere, and the test set's class shares.
    fn describe_split(&self, d: &ImageData) -> String {
        let mut counts = vec![0usize; self.classes()];
        for k in 0..d.test.len() {
            for (i, &y) in d.test.labels(k).unwrap_or_default().iter().enumerate() {
                if d.test.is_labelled(k, i) && y < counts.len() {
                    counts[y] += 1;
                }
            }
        }
        let total = counts.iter().sum::<usize>().max(1) as f64;
        let shares: Vec<f64> = counts.iter().map(|&c| c as f64 / total).collect();
        let majority = shares.iter().copied().fold(0.0, f64::max);
        format!(
            "{} training and {} test images ({} and {} labelled pixels). Error of predicting the most \
             frequent class everywhere on the test set: {:.3}. Class shares in the test set: {}.",
            d.train.len(),
            d.test.len(),
            d.train.labelled_variables(),
            d.test.labelled_variables(),
            1.0 - majority,
            self.class_list().iter().zip(&shares).map(|(n, s)| format!("{n} {s:.3}")).collect::<Vec<_>>().join(", ")
        )
    }
}

/// The data of one run: standardised training and test sets, the test images
/// (for figures), the split and the standardisation.
pub struct ImageData {
    train: Dataset,
    test: Dataset,
    test_images: Vec<SceneImage>,
    train_names: Vec<String>,
    test_names: Vec<String>,
    standardizers: [Standardizer; 2],
    /// The seed the images were split with ([`Images::split_seed`]).
    split_seed: u64,
}

impl ExperimentData for ImageData {
    fn train(&self) -> &Dataset {
        &self.train
    }

    fn test(&self) -> &Dataset {
        &self.test
    }
}

/// Colours of the label maps: black background / white horse; Stanford classes
/// in natural colours; unknown pixels (index = number of classes) mid gray.
fn palette(which: Which) -> LabelPalette {
    let colors = match which {
        Which::Horses => vec![[0, 0, 0], [255, 255, 255], [128, 128, 128]],
        Which::Stanford => vec![
            [135, 206, 235], // sky
            [34, 139, 34],   // tree
            [90, 90, 90],    // road
            [124, 252, 0],   // grass
            [0, 0, 200],     // water
            [178, 34, 34],   // building
            [139, 90, 43],   // mountain
            [255, 215, 0],   // foreground
            [255, 255, 255], // unknown
        ],
    };
    LabelPalette::new(colors).expect("the colours are distinct")
}

impl Experiment for Images {
    type Data = ImageData;

    fn name(&self) -> &'static str {
        match self.p.dataset {
            Which::Horses => "horses",
            Which::Stanford => "stanford",
        }
    }

    fn preset(&self) -> serde_json::Value {
        let mut json = serde_json::to_value(&self.p).unwrap_or_default();
        // The ablation settings are recorded only when changed (from these
        // defaults), so that folders written before they existed still `--resume`.
        if let Some(map) = json.as_object_mut() {
            use serde_json::json;
            let defaults = [
                ("standardize", json!(true)),
                ("drop_unary", json!([])),
                ("pair_types", json!("shared")),
                ("oracles", json!({})),
                ("fixed_split", json!(false)),
                ("message_passing_iterations", json!(CHAPTER_MESSAGE_PASSING)),
            ];
            for (key, default) in defaults {
                if map.get(key) == Some(&default) {
                    map.remove(key);
                }
            }
        }
        json
    }

    fn budget(&self) -> Budget {
        Budget {
            learning_iterations: self.p.learning_iterations,
            predict: self.p.predict,
            train_error_every: self.p.train_error_every,
            message_passing_iterations: self.p.message_passing_iterations,
            checkpoint_every: 1,
        }
    }

    fn describe(&self) -> String {
        let p = &self.p;
        let res = match (p.max_side, p.scale) {
            (Some(m), _) => format!("longer side {m} px"),
            (_, Some(s)) => format!("{:.0} % resolution", 100.0 * s),
            _ => String::new(),
        };
        let split = if p.fixed_split { "for every seed" } else { "+ the run's seed" };
        format!(
            "{}: {} training images (split seed {} {split}), {res}, {} learning iterations",
            p.name, p.train, p.split_seed, p.learning_iterations
        )
    }

    fn data(&self, seed: u64) -> Result<ImageData> {
        let split_seed = self.split_seed(seed)?;
        let SceneData { images, features } = self.load()?;
        let names: Vec<String> = images.iter().map(|i| i.name.clone()).collect();
        let (train_names, test_names) = random_split(&names, self.p.train, split_seed)?;
        // Each image and its features move to their side of the split (in
        // loading order): at Stanford's size the features are 0.8 GB, and the
        // data set is built without copying them.
        let train_set: std::collections::HashSet<&str> = train_names.iter().map(String::as_str).collect();
        let test_set: std::collections::HashSet<&str> = test_names.iter().map(String::as_str).collect();
        let (mut train_images, mut train_features, mut test_images, mut test_features) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (image, f) in images.into_iter().zip(features) {
            if train_set.contains(image.name.as_str()) {
                train_images.push(image);
                train_features.push(f);
            } else if test_set.contains(image.name.as_str()) {
                test_images.push(image);
                test_features.push(f);
            }
        }
        drop_unary(&mut train_features, &self.p.drop_unary);
        drop_unary(&mut test_features, &self.p.drop_unary);
        let standardizers = if self.p.standardize {
            fit_standardizers(&train_images, &train_features)?
        } else {
            let identity = |dim| Standardizer { mean: vec![0.0; dim], std: vec![1.0; dim] };
            [identity(UNARY_DIM), identity(PAIR_DIM)]
        };
        let classes = self.classes();
        let train =
            build_examples(&train_images, train_features, &standardizers, classes, Use::Train, self.p.pair_types)?;
        let test =
            build_examples(&test_images, test_features, &standardizers, classes, Use::Evaluate, self.p.pair_types)?;
        Ok(ImageData { train, test, test_images, train_names, test_names, standardizers, split_seed })
    }

    /// The oracle of class `kind` for the unary (`pairwise = false`) or
    /// pairwise factors: the class by name, with the preset's budgets of it
    /// and then its `oracles.KIND` settings.
    fn oracle(&self, kind: &str, pairwise: bool) -> Result<Box<dyn Oracle>, LearnError> {
        let budgets = class_budgets(self.p.boosting_rounds, self.p.mlp_epochs, self.p.mlp_minibatch, pairwise);
        class_oracle(kind, &[budget_of(&budgets, kind).map(|b| &b.settings), self.p.oracles.get(kind)])
    }

    fn schedule(&self, message_passing: usize) -> Option<Vec<Step>> {
        self.p.pair_types.schedule(message_passing)
    }

    fn paper_test(&self) -> &PaperTable {
        match self.p.dataset {
            Which::Horses => &PAPER_HORSES,
            Which::Stanford => &PAPER_STANFORD_TEST,
        }
    }

    fn paper_train(&self) -> Option<&PaperTable> {
        match self.p.dataset {
            Which::Horses => None,
            Which::Stanford => Some(&PAPER_STANFORD_TRAIN),
        }
    }

    fn caption(&self) -> String {
        match self.p.dataset {
            Which::Horses => "Test error (fraction of pixels), Weizmann horses, NIPS 2013 Table 1 right".into(),
            Which::Stanford => "Pixel error (unknown pixels excluded), Stanford Background, chapter Table 1.1".into(),
        }
    }

    /// Each seed's split: its sizes, the error of predicting the test set's
    /// most frequent class, and the test set's class shares (one line per
    /// seed when the seeds split the images differently).
    fn table_note(&self, data: &BTreeMap<u64, ImageData>) -> String {
        let Some((_, first)) = data.iter().next() else { return String::new() };
        if data.len() == 1 {
            format!("Split seed {}: {}", first.split_seed, self.describe_split(first))
        } else if self.p.fixed_split {
            format!("Every seed splits the images with split seed {}: {}", first.split_seed, self.describe_split(first))
        } else {
            let mut note = format!("Seed s splits the images with split seed {} + s:\n", self.p.split_seed);
            for (seed, d) in data {
                note += &format!("\n* seed {seed} (split seed {}): {}", d.split_seed, self.describe_split(d));
            }
            note
        }
    }

    fn class_names(&self) -> Option<Vec<String>> {
        Some(self.class_list())
    }

    fn figures(&self, out: &Path, _done: &[CellResult], seed: u64, data: &ImageData) -> Result<()> {
        let list = |names: &[String]| names.iter().map(|n| format!("{n}\n")).collect::<String>();
        write_atomic(&out.join("split-train.txt"), list(&data.train_names).as_bytes())?;
        write_atomic(&out.join("split-test.txt"), list(&data.test_names).as_bytes())?;
        let pal = palette(self.p.dataset);
        let pipeline = Pipeline {
            dataset: self.name().into(),
            max_side: self.p.max_side,
            scale: self.p.scale,
            features: self.p.features.clone(),
            standardizers: data.standardizers.clone(),
            pair_types: self.p.pair_types,
            classes: self.class_list(),
            colors: pal.colors()[..self.classes()].to_vec(),
        };
        if self.p.drop_unary.is_empty() {
            pipeline.save(&out.join("models").join("features.json"))?;
        } else {
            // `structlearn predict-image` would feed the dropped columns to the models.
            eprintln!("models/features.json not written: the models were trained with unary columns dropped");
        }
        // Unknown pixels (Stanford's −1) are painted with the colour after the classes'.
        let mut entries = self.class_list();
        if self.p.dataset == Which::Stanford {
            entries.push("unknown".into());
        }
        let legend: Vec<(String, [u8; 3])> =
            entries.into_iter().enumerate().map(|(l, n)| (n, pal.color(l).unwrap_or([0, 0, 0]))).collect();
        let mut table = String::from("| label | class | colour (RGB) |\n|---|---|---|\n");
        for (l, (name, c)) in legend.iter().enumerate() {
            table += &format!("| {l} | {name} | {c:?} |\n");
        }
        write_atomic(&out.join("legend.md"), table.as_bytes())?;

        // Fig. 3: test images, truth and the diagonal cells' predictions.
        let registry = ModelRegistry::with_builtin();
        let mut shown = Vec::new();
        for c in ["linear", "boosting", "mlp"] {
            let path = model_path(out, seed, c, c);
            if path.exists() {
                shown.push((c, StructuredModel::load(&path, &registry)?));
            }
        }
        let mut columns = vec!["Input".to_string(), "Truth".to_string()];
        columns.extend(shown.iter().map(|(c, _)| c.to_string()));
        let opts = PredictOptions { iterations: self.p.predict.iterations * 10, ..self.p.predict };
        let unknown = self.classes();
        let mut rows = Vec::new();
        for (k, img) in data.test_images.iter().enumerate().take(4) {
            let rgb = img.rgb_image()?;
            let mut row = vec![PlotImage::Rgb(rgb), PlotImage::Labels(img.label_raster(unknown)?, pal.clone())];
            for (_, model) in &shown {
                let pred = model.predict_example(&data.test, k, &opts)?;
                row.push(PlotImage::Labels(datasets::Raster::new(img.height, img.width, pred.labels)?, pal.clone()));
            }
            rows.push(row);
        }
        if !rows.is_empty() {
            plots::plot_predictions_with_legend(&out.join("fig3_predictions.png"), &columns, &rows, &legend)
                .context("writing fig3_predictions.png")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn horses(set: &[&str]) -> Result<Images> {
        let mut p = preset(Which::Horses, Scale::Full);
        for a in set {
            p = p.set(a)?;
        }
        Ok(Images { p, data_dir: None, cache_dir: None })
    }

    #[test]
    fn set_overrides_nested_settings_and_refuses_unknown_ones() {
        let e = horses(&["max_side=64", "features.hog_cell=8", "standardize=false", r#"drop_unary=["hog","rgb"]"#])
            .unwrap();
        assert_eq!((e.p.max_side, e.p.features.hog_cell, e.p.standardize), (Some(64), 8, false));
        assert_eq!(e.p.drop_unary, [FeatureGroup::Hog, FeatureGroup::Rgb]);
        for (bad, says) in [
            ("max_sid=3", "no setting `max_sid`"),
            ("features.hog=3", "no setting `hog`"),
            ("max_side", "KEY=VALUE"),
            ("max_side=big", "max_side"),
            (r#"drop_unary=["colour"]"#, "colour"),
            ("dataset=stanford", "dataset"),
        ] {
            let err = horses(&[bad]).err().unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(format!("{err:#}").contains(says), "{bad}: {err:#}");
        }
    }

    #[test]
    fn oracle_settings_reach_the_oracle_and_typos_are_refused() {
        let e = horses(&["oracles.linear.lbfgs.max_iterations=5", "oracles.boosting.rounds=3"]).unwrap();
        assert_eq!(e.p.oracles["linear"], serde_json::json!({ "lbfgs": { "max_iterations": 5 } }));
        let linear = format!("{:?}", e.oracle("linear", false).unwrap());
        assert!(linear.contains("max_iterations: 5,"), "{linear}");
        let boosting = format!("{:?}", e.oracle("boosting", true).unwrap());
        assert!(boosting.contains("rounds: 3,"), "{boosting}");
        let bad = horses(&["oracles.linear.lbfgs.max_iter=5"]).unwrap();
        assert!(bad.oracle("linear", false).err().unwrap().to_string().contains("max_iter"));
    }

    /// The experiments' linear fits from `W = 0` run to convergence, as the
    /// committed tables were trained (the class's default caps them), in both
    /// roles; a preset can ask for the default budget.
    #[test]
    fn linear_cold_fits_run_to_convergence_unless_set() {
        let e = horses(&[]).unwrap();
        for pairwise in [false, true] {
            let linear = format!("{:?}", e.oracle("linear", pairwise).unwrap());
            assert!(linear.contains("cold_max_iterations: None"), "{linear}");
        }
        let e = horses(&["oracles.linear.cold_max_iterations=30"]).unwrap();
        let linear = format!("{:?}", e.oracle("linear", true).unwrap());
        assert!(linear.contains("cold_max_iterations: Some(30)"), "{linear}");
        // Denoising builds its oracles from the same budgets.
        let budgets = class_budgets(10, 1, 64, true);
        let linear = class_oracle("linear", &[budget_of(&budgets, "linear").map(|b| &b.settings)]).unwrap();
        assert!(format!("{linear:?}").contains("cold_max_iterations: None"));
    }

    /// Oracle budgets are checked before the first cell, for every class
    /// (before, `boosting_rounds=0` failed when the boosting cell started,
    /// after the earlier cells had trained).
    #[test]
    fn oracle_budgets_are_refused_up_front() {
        let o = crate::runner::tests::opts();
        for (set, says) in [
            ("boosting_rounds=0", "rounds"),
            ("mlp_epochs=0", "epochs"),
            ("mlp_minibatch=0", "minibatch"),
            ("oracles.constant.foo=1", "foo"),
        ] {
            let err = format!("{:#}", Images::new(Which::Horses, &o, &[set.to_string()]).err().unwrap());
            assert!(err.contains(says), "{set}: {err}");
            // The runner checks any experiment the same way before loading data.
            let exp = horses(&[set]).unwrap();
            let err = format!("{:#}", crate::runner::check_settings(&exp).unwrap_err());
            assert!(err.contains(says), "{set}: {err}");
        }
        crate::runner::check_settings(&horses(&[]).unwrap()).unwrap();
        // Learning budgets too.
        for set in ["learning_iterations=0", "message_passing_iterations=0"] {
            let err = format!("{:#}", crate::runner::check_settings(&horses(&[set]).unwrap()).unwrap_err());
            assert!(err.contains(set.trim_end_matches("=0")) && err.contains("at least 1"), "{set}: {err}");
        }
    }

    /// Settings that would be ignored or contradict the data set are refused.
    #[test]
    fn ignored_or_contradictory_settings_are_refused() {
        let o = crate::runner::tests::opts();
        for (which, set, says) in [
            (Which::Stanford, "max_side=64", "Stanford images are reduced by a scale factor"),
            (Which::Horses, "scale=0.5", "horses are reduced to a longer side of max_side pixels"),
            (Which::Horses, "max_side=null", "--set max_side=null: horses need"),
            (Which::Horses, "max_side=100000", "2..=4096"),
            (Which::Stanford, "scale=null", "--set scale=null: Stanford needs"),
            (Which::Stanford, "scale=1.5", "(0, 1]"),
            (Which::Horses, "oracles.linear=5", "--set oracles.linear=5: the settings of an oracle kind are a group"),
            (Which::Horses, r#"oracles.linear="l2=0.5""#, "--set oracles.linear=\"l2=0.5\""),
            (Which::Horses, r#"oracles={"linear":[1]}"#, "oracles.linear=[1]"),
        ] {
            let err = format!("{:#}", Images::new(which, &o, &[set.to_string()]).err().expect(set));
            assert!(err.contains(says), "{set}: {err}");
        }
        for (which, set) in [(Which::Horses, "max_side=64"), (Which::Stanford, "scale=0.5")] {
            Images::new(which, &o, &[set.to_string()]).unwrap();
        }
    }

    #[test]
    fn dropped_groups_are_zero_and_the_rest_untouched() {
        let block = |rows| structlearn::FeatureBlock { dim: UNARY_DIM, values: vec![1.0; rows * UNARY_DIM] };
        let pair = structlearn::FeatureBlock { dim: PAIR_DIM, values: vec![1.0; PAIR_DIM] };
        let mut f =
            vec![ImageFeatures { unary: block(2), pair: pair.clone() }, ImageFeatures { unary: block(1), pair }];
        drop_unary(&mut f, &[FeatureGroup::Hog, FeatureGroup::Rgb]);
        for row in f.iter().flat_map(|f| f.unary.values.chunks_exact(UNARY_DIM)) {
            let kept: Vec<usize> = (0..UNARY_DIM).filter(|&j| row[j] != 0.0).collect();
            assert_eq!(kept, [0, 4, 5], "constant and position stay");
        }
        assert!(f.iter().all(|f| f.pair.values.iter().all(|&v| v == 1.0)));
    }

    /// Seed s splits the images with split seed `split_seed + s`: seed 0
    /// keeps the preset's split (the committed tables), the other seeds
    /// split otherwise, and a sum past the largest seed is refused; with
    /// `fixed_split` every seed keeps the preset's split.
    #[test]
    fn each_seed_splits_the_images_with_its_own_split_seed() {
        use image::{ImageFormat, Luma, Rgb, RgbImage};
        let tmp = tempfile::tempdir().unwrap();
        let h = tmp.path().join("weizmann_horse");
        for sub in ["rgb", "figure_ground"] {
            std::fs::create_dir_all(h.join(sub)).unwrap();
        }
        for k in 1..=8u32 {
            let inside = |x: u32, y: u32| x > 4 + k && x < 24 && y > 6 && y < 18;
            let rgb =
                RgbImage::from_fn(32, 24, |x, y| if inside(x, y) { Rgb([200, 40, 30]) } else { Rgb([40, 120, 200]) });
            let mask = image::GrayImage::from_fn(32, 24, |x, y| Luma([if inside(x, y) { 255 } else { 0 }]));
            rgb.save_with_format(h.join(format!("rgb/horse{k:03}.jpg")), ImageFormat::Jpeg).unwrap();
            mask.save_with_format(h.join(format!("figure_ground/horse{k:03}.jpg")), ImageFormat::Jpeg).unwrap();
        }
        let exp = |set: &[&str]| {
            let mut e = horses(&["train=5", "max_side=16"]).unwrap();
            for a in set {
                e.p = e.p.clone().set(a).unwrap();
            }
            e.data_dir = Some(tmp.path().to_path_buf());
            e
        };
        let e = exp(&[]);
        let names: Vec<String> = (1..=8).map(|k| format!("horse{k:03}")).collect();
        let data: BTreeMap<u64, ImageData> = (0..3).map(|seed| (seed, e.data(seed).unwrap())).collect();
        for (&seed, d) in &data {
            assert_eq!((d.split_seed, d.train.len(), d.test.len()), (seed, 5, 3));
        }
        // The table's note describes every seed's split, each by its own test set.
        let note = e.table_note(&data);
        for (seed, d) in &data {
            let line = format!("* seed {seed} (split seed {seed}): {}", e.describe_split(d));
            assert!(note.contains(&line), "{note}");
        }
        assert!(e.describe_split(&data[&0]).starts_with("5 training and 3 test images"));
        let splits: Vec<(Vec<String>, Vec<String>)> =
            data.into_values().map(|d| (d.train_names, d.test_names)).collect();
        assert_eq!(splits[0], random_split(&names, 5, 0).unwrap(), "seed 0 keeps the preset's split");
        assert_eq!(splits[2], random_split(&names, 5, 2).unwrap());
        assert!(splits[1] != splits[0] && splits[2] != splits[0], "seeds 1 and 2 split otherwise");
        // The preset's split seed is the base.
        assert_eq!(exp(&["split_seed=1"]).data(1).unwrap().train_names, splits[2].0);
        let err = format!("{:#}", exp(&["split_seed=18446744073709551615"]).data(1).err().unwrap());
        assert!(err.contains("past the largest seed"), "{err}");
        // `fixed_split`: every seed keeps the preset's split.
        let fixed = exp(&["fixed_split=true", "split_seed=2"]);
        for seed in 0..3 {
            let d = fixed.data(seed).unwrap();
            assert_eq!((d.split_seed, &d.train_names), (2, &splits[2].0), "seed {seed}");
        }
    }

    #[test]
    fn unchanged_ablation_settings_stay_out_of_run_json() {
        let plain = horses(&[]).unwrap().preset();
        for key in ["standardize", "drop_unary", "pair_types", "oracles", "fixed_split", "message_passing_iterations"] {
            assert!(plain.get(key).is_none(), "{key} recorded at its default");
        }
        assert_eq!(horses(&[]).unwrap().budget().message_passing_iterations, CHAPTER_MESSAGE_PASSING);
        let set = [
            "standardize=false",
            "oracles.linear.l2=0.5",
            "pair_types=by-direction",
            "fixed_split=true",
            "message_passing_iterations=15",
        ];
        let changed = horses(&set).unwrap();
        assert_eq!(changed.budget().message_passing_iterations, 15);
        let changed = changed.preset();
        assert_eq!(changed["message_passing_iterations"], 15);
        assert_eq!(changed["standardize"], false);
        assert_eq!(changed["pair_types"], "by-direction");
        assert_eq!(changed["oracles"]["linear"]["l2"], 0.5);
        assert_eq!(changed["fixed_split"], true);
    }
}
