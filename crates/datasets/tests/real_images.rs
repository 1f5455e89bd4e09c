//! The horse and Stanford Background loaders, the feature pipeline and a short
//! end-to-end training run, on a handful of real images when the data directory
//! is known (`STRUCTLEARN_DATA_DIR`, see docs/DATASETS.md) and on small generated
//! images in the official layout otherwise. Malformed files must give typed
//! errors naming the file.

use std::path::{Path, PathBuf};

use datasets::DatasetError;
use datasets::features::{FeatureConfig, PAIR_DIM, UNARY_DIM};
use datasets::photos::{
    DATA_DIR_ENV, PairTypes, Pipeline, SceneImage, Use, build_examples, compute_features, fit_standardizers,
};
use datasets::{horses, stanford};
use image::{GrayImage, ImageFormat, Luma, Rgb, RgbImage};
use structlearn::oracle_config::builtin_oracle;
use structlearn::{PredictOptions, TrainConfig, Trainer};

/// A data directory with 4 horses and 4 Stanford scenes in the releases' layouts:
/// horses whose mask (half size) is a white rectangle over a red body; scenes
/// with a blue sky band, green lower half and an unknown stripe.
fn generated(dir: &Path) -> PathBuf {
    let h = dir.join("weizmann_horse");
    std::fs::create_dir_all(h.join("rgb")).unwrap();
    std::fs::create_dir_all(h.join("figure_ground")).unwrap();
    for k in 1..=4u32 {
        let (w, ht) = (60 + 4 * k, 40 + 2 * k);
        let inside = |x: u32, y: u32| x > w / 4 && x < 3 * w / 4 && y > ht / 3 && y < 5 * ht / 6;
        let rgb = RgbImage::from_fn(w, ht, |x, y| if inside(x, y) { Rgb([200, 40, 30]) } else { Rgb([40, 120, 200]) });
        let mask = GrayImage::from_fn(w / 2, ht / 2, |x, y| Luma([if inside(2 * x, 2 * y) { 255 } else { 0 }]));
        rgb.save_with_format(h.join(format!("rgb/horse{k:03}.jpg")), ImageFormat::Jpeg).unwrap();
        mask.save_with_format(h.join(format!("figure_ground/horse{k:03}.jpg")), ImageFormat::Jpeg).unwrap();
    }
    let s = dir.join("stanford_background");
    std::fs::create_dir_all(s.join("images")).unwrap();
    std::fs::create_dir_all(s.join("labels")).unwrap();
    for k in 0..4u32 {
        let (w, ht) = (50 + 5 * k, 40);
        let label = |x: u32, y: u32| -> i32 {
            if x == 3 {
                -1
            } else if y < ht / 2 {
                0
            } else {
                3
            }
        };
        let rgb = RgbImage::from_fn(w, ht, |x, y| match label(x, y) {
            0 => Rgb([130, 180, 240]),
            3 => Rgb([40, 160, 40]),
            _ => Rgb([0, 0, 0]),
        });
        rgb.save_with_format(s.join(format!("images/{k:07}.jpg")), ImageFormat::Jpeg).unwrap();
        let text: String =
            (0..ht).map(|y| (0..w).map(|x| label(x, y).to_string()).collect::<Vec<_>>().join(" ") + "\n").collect();
        std::fs::write(s.join(format!("labels/{k:07}.regions.txt")), text).unwrap();
    }
    dir.to_path_buf()
}

/// The real data directory if set, else generated data in `tmp`.
fn data_dir(tmp: &Path) -> (PathBuf, bool) {
    match std::env::var_os(DATA_DIR_ENV).filter(|v| !v.is_empty()) {
        Some(d) => (PathBuf::from(d), true),
        None => (generated(tmp), false),
    }
}

fn check_features(images: &[SceneImage], classes: usize) -> datasets::photos::SceneData {
    let features = compute_features(images, &FeatureConfig::default()).unwrap();
    for (img, f) in images.iter().zip(&features) {
        let n = img.height * img.width;
        assert_eq!(f.unary.values.len(), n * UNARY_DIM);
        let pairs = img.height * (img.width - 1) + (img.height - 1) * img.width;
        assert_eq!(f.pair.values.len(), pairs * PAIR_DIM);
        assert!(f.unary.values.iter().chain(&f.pair.values).all(|v| v.is_finite()));
        // Position features are exact; RGB within [0, 1]; pair distance within [0, √3].
        let last = &f.unary.values[(n - 1) * UNARY_DIM..];
        assert_eq!((last[0], last[4], last[5]), (1.0, 1.0, 1.0));
        assert!(f.unary.values.chunks_exact(UNARY_DIM).all(|r| r[1..4].iter().all(|&c| (0.0..=1.0).contains(&c))));
        assert!(f.pair.values.chunks_exact(PAIR_DIM).all(|r| r[1] >= 0.0 && r[1] <= 3f64.sqrt() + 1e-12));
        assert!(img.labels.iter().flatten().all(|&l| usize::from(l) < classes));
    }
    datasets::photos::SceneData { images: images.to_vec(), features }
}

#[test]
fn horses_load_featurise_and_train_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, real) = data_dir(tmp.path());
    let dir = horses::dataset_dir(Some(&root)).unwrap();
    let images = horses::load(&dir, &horses::HorsesConfig { max_side: 24, limit: Some(4) }).unwrap();
    assert_eq!(images.len(), 4);
    for img in &images {
        assert_eq!(img.height.max(img.width), 24, "{}", img.name);
        assert!(img.labels.iter().all(Option::is_some));
        let horse = img.labels.iter().filter(|l| **l == Some(horses::HORSE)).count() as f64 / img.labels.len() as f64;
        // Horses cover 5–43 % of each image (generated ones about a third).
        assert!((0.03..0.6).contains(&horse), "{}: horse share {horse}", img.name);
    }
    assert_eq!(images[0].name, "horse001");
    let data = check_features(&images, 2);

    // Train linear/linear for two learning iterations on three images, test on the fourth.
    let std = fit_standardizers(&data.images[..3], &data.features[..3]).unwrap();
    let train =
        build_examples(&data.images[..3], data.features[..3].to_vec(), &std, 2, Use::Train, PairTypes::Shared).unwrap();
    let test =
        build_examples(&data.images[3..], data.features[3..].to_vec(), &std, 2, Use::Evaluate, PairTypes::Shared)
            .unwrap();
    let oracles = vec![
        ("unary".to_string(), builtin_oracle("linear").unwrap()),
        ("pairwise".to_string(), builtin_oracle("linear").unwrap()),
    ];
    let config = TrainConfig { learning_iterations: 2, ..TrainConfig::default() };
    let outcome = Trainer::new(&train, oracles, config).unwrap().with_validation(&test).train().unwrap();
    let last = outcome.history.last().unwrap();
    let train_error = last.train_error.unwrap();
    let share = |set: &structlearn::Dataset| {
        let (ones, n) = (0..set.len())
            .map(|k| set.labels(k).unwrap())
            .fold((0, 0), |(o, n), l| (o + l.iter().filter(|&&y| y == 1).count(), n + l.len()));
        ones as f64 / n as f64
    };
    // Better than predicting the majority class on the training images.
    let majority = share(&train).min(1.0 - share(&train));
    assert!(train_error < majority, "train error {train_error} vs majority-class error {majority} (real data: {real})");
    assert!(last.validation_error.unwrap() < 0.5);
}

#[test]
fn stanford_loads_with_unknown_pixels_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, real) = data_dir(tmp.path());
    let dir = stanford::dataset_dir(Some(&root)).unwrap();
    let images = stanford::load(&dir, &stanford::StanfordConfig { scale: 0.2, limit: Some(4) }).unwrap();
    assert_eq!(images.len(), 4);
    let data = check_features(&images, stanford::CLASSES.len());
    if !real {
        // 50–65 × 40 at 20 %: 10–13 × 8; the one-pixel unknown stripe of a
        // 5-pixel block is a minority and disappears.
        assert_eq!((images[0].height, images[0].width), (8, 10));
        assert!(images[0].labels.iter().all(Option::is_some));
        assert_eq!(images[0].labels[0], Some(0));
        assert_eq!(images[0].labels[7 * 10], Some(3));
    }
    let std = fit_standardizers(&data.images, &data.features).unwrap();
    let test = build_examples(&data.images, data.features.clone(), &std, 8, Use::Evaluate, PairTypes::Shared).unwrap();
    let train = build_examples(&data.images, data.features.clone(), &std, 8, Use::Train, PairTypes::Shared).unwrap();
    for (k, img) in images.iter().enumerate() {
        let unknown = img.labels.iter().filter(|l| l.is_none()).count();
        assert_eq!(train.examples()[k].graph().num_variables(), img.labelled());
        let ignored = test.ignored(k).map_or(0, |m| m.iter().filter(|&&x| x).count());
        assert_eq!(ignored, unknown);
    }
}

#[test]
fn full_resolution_unknown_pixels_become_ignored_variables() {
    let tmp = tempfile::tempdir().unwrap();
    let root = generated(tmp.path());
    let dir = stanford::dataset_dir(Some(&root)).unwrap();
    let images = stanford::load(&dir, &stanford::StanfordConfig { scale: 1.0, limit: Some(1) }).unwrap();
    let img = &images[0];
    assert_eq!(img.height * img.width - img.labelled(), 40, "column 3 of 40 rows is unknown");
    let data = check_features(&images, 8);
    let std = fit_standardizers(&data.images, &data.features).unwrap();
    let test = build_examples(&data.images, data.features.clone(), &std, 8, Use::Evaluate, PairTypes::Shared).unwrap();
    let train = build_examples(&data.images, data.features.clone(), &std, 8, Use::Train, PairTypes::Shared).unwrap();
    // A model that predicts label 0 everywhere: its error counts only the labelled pixels.
    let oracles = vec![
        ("unary".to_string(), builtin_oracle("constant").unwrap()),
        ("pairwise".to_string(), builtin_oracle("zero").unwrap()),
    ];
    let config = TrainConfig { learning_iterations: 1, ..TrainConfig::default() };
    let model = Trainer::new(&train, oracles, config).unwrap().train().unwrap().model;
    let err = model.error_rate(&test, &PredictOptions::default()).unwrap();
    let labels = test.labels(0).unwrap();
    let predicted = model.predict_example(&test, 0, &PredictOptions::default()).unwrap().labels;
    let (wrong, counted) = (0..labels.len())
        .filter(|&i| test.is_labelled(0, i))
        .fold((0, 0), |(w, n), i| (w + usize::from(predicted[i] != labels[i]), n + 1));
    assert_eq!(counted, img.labelled());
    assert!((err - wrong as f64 / counted as f64).abs() < 1e-15);
    // The training set with the full grid is refused: unknown labels would enter the loss.
    let oracles = vec![
        ("unary".to_string(), builtin_oracle("zero").unwrap()),
        ("pairwise".to_string(), builtin_oracle("zero").unwrap()),
    ];
    let refused = Trainer::new(&test, oracles, TrainConfig::default()).err().expect("must refuse");
    assert!(refused.to_string().contains("unknown"), "{refused}");
}

#[test]
fn malformed_files_are_typed_errors_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let root = generated(tmp.path());
    let s = root.join("stanford_background");
    let labels = s.join("labels/0000000.regions.txt");
    let good = std::fs::read_to_string(&labels).unwrap();
    let cfg = stanford::StanfordConfig { scale: 0.2, limit: None };
    let expect_malformed = |what: &str, needle: &str| {
        let err = stanford::load(&s, &cfg).unwrap_err();
        assert!(matches!(err, DatasetError::Malformed { .. }), "{what}: {err:?}");
        let msg = err.to_string();
        assert!(msg.contains("0000000.regions.txt") && msg.contains(needle), "{what}: {msg}");
    };
    // Wrong size: a row missing, a column missing.
    let rows: Vec<&str> = good.lines().collect();
    std::fs::write(&labels, rows[..rows.len() - 1].join("\n")).unwrap();
    expect_malformed("missing row", "rows");
    let short: Vec<String> = rows.iter().map(|r| r.rsplit_once(' ').unwrap().0.to_string()).collect();
    std::fs::write(&labels, short.join("\n")).unwrap();
    expect_malformed("short rows", "wide");
    // Out of range and not a number.
    std::fs::write(&labels, good.replacen('0', "9", 1)).unwrap();
    expect_malformed("label 9", "outside");
    std::fs::write(&labels, good.replacen('0', "x", 1)).unwrap();
    expect_malformed("token", "not an integer");
    std::fs::write(&labels, &good).unwrap();

    // A truncated JPEG.
    let jpg = s.join("images/0000001.jpg");
    let bytes = std::fs::read(&jpg).unwrap();
    std::fs::write(&jpg, &bytes[..bytes.len() / 3]).unwrap();
    let err = stanford::load(&s, &cfg).unwrap_err();
    assert!(matches!(err, DatasetError::BadImage { .. } | DatasetError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("0000001.jpg"), "{err}");
    std::fs::write(&jpg, &bytes).unwrap();

    // A missing label file and a missing mask.
    std::fs::remove_file(s.join("labels/0000002.regions.txt")).unwrap();
    let err = stanford::load(&s, &cfg).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, DatasetError::MissingData { .. }) && msg.contains("0000002.regions.txt"), "{msg}");
    assert!(msg.contains("dags.stanford.edu"), "{msg}");
    let h = root.join("weizmann_horse");
    std::fs::remove_file(h.join("figure_ground/horse002.jpg")).unwrap();
    let err = horses::load(&h, &horses::HorsesConfig::default()).unwrap_err();
    assert!(err.to_string().contains("horse002.jpg"), "{err}");

    // No data directory at all names the variable and the layout.
    let err = horses::dataset_dir(Some(&tmp.path().join("absent"))).unwrap_err().to_string();
    assert!(err.contains("STRUCTLEARN_DATA_DIR") && err.contains("figure_ground"), "{err}");
}

/// Regressions of a hostile-input review of the loaders.
#[test]
fn hostile_data_directories_are_refused_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let root = generated(tmp.path());
    let (h, s) = (root.join("weizmann_horse"), root.join("stanford_background"));
    let horses_cfg = horses::HorsesConfig::default();
    let stanford_cfg = stanford::StanfordConfig { scale: 0.2, limit: None };
    let message = |r: Result<Vec<SceneImage>, DatasetError>| r.unwrap_err().to_string();

    // A mask of another shape than its colour image (it used to be stretched to fit).
    let mask = h.join("figure_ground/horse003.jpg");
    let good_mask = std::fs::read(&mask).unwrap();
    GrayImage::new(40, 2).save_with_format(&mask, ImageFormat::Jpeg).unwrap();
    let msg = message(horses::load(&h, &horses_cfg));
    assert!(msg.contains("horse003.jpg") && msg.contains("aspect ratios"), "{msg}");
    std::fs::write(&mask, &good_mask).unwrap();
    // An enlargement beyond the largest side (it used to abort on the allocation).
    let msg = message(horses::load(&h, &horses::HorsesConfig { max_side: 100_000, limit: None }));
    assert!(msg.contains("max_side") && msg.contains("4096"), "{msg}");

    // A folder where a label file or an image should be: not "missing", and never read.
    let labels = s.join("labels/0000001.regions.txt");
    let good_labels = std::fs::read(&labels).unwrap();
    std::fs::remove_file(&labels).unwrap();
    std::fs::create_dir(&labels).unwrap();
    let err = stanford::load(&s, &stanford_cfg).unwrap_err();
    assert!(matches!(err, DatasetError::Malformed { .. }), "{err:?}");
    assert!(err.to_string().contains("0000001.regions.txt") && err.to_string().contains("not a regular file"));
    std::fs::remove_dir(&labels).unwrap();
    std::fs::write(&labels, &good_labels).unwrap();
    #[cfg(unix)]
    {
        // A pipe named like an image blocked the loader forever.
        let image = s.join("images/0000002.jpg");
        let good_image = std::fs::read(&image).unwrap();
        std::fs::remove_file(&image).unwrap();
        assert!(std::process::Command::new("mkfifo").arg(&image).status().unwrap().success());
        let msg = message(stanford::load(&s, &stanford_cfg));
        assert!(msg.contains("0000002.jpg") && msg.contains("not a regular file"), "{msg}");
        std::fs::remove_file(&image).unwrap();
        std::fs::write(&image, &good_image).unwrap();
    }

    // A label file far larger than its matrix is refused unread; long or
    // binary tokens are shown quoted and cut.
    let text = String::from_utf8(good_labels.clone()).unwrap();
    std::fs::write(&labels, text.replacen('0', &"7".repeat(100_000), 1)).unwrap();
    let msg = message(stanford::load(&s, &stanford_cfg));
    assert!(msg.contains("0000001.regions.txt") && msg.contains("bytes, more than"), "{msg}");
    std::fs::write(&labels, text.replacen('0', "\u{feff}0\0", 1)).unwrap();
    let msg = message(stanford::load(&s, &stanford_cfg));
    assert!(msg.contains(r#""\u{feff}0\0" is not an integer"#), "{msg}");
    std::fs::write(&labels, &good_labels).unwrap();

    // `.JPG` is a JPEG like `.jpg`; a name that is not UTF-8 is an error, not a skip.
    std::fs::rename(h.join("rgb/horse004.jpg"), h.join("rgb/horse004.JPG")).unwrap();
    std::fs::rename(h.join("figure_ground/horse004.jpg"), h.join("figure_ground/horse004.JPG")).unwrap();
    let images = horses::load(&h, &horses_cfg).unwrap();
    assert_eq!(
        images.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
        ["horse001", "horse002", "horse003", "horse004"]
    );
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let odd = s.join("images").join(std::ffi::OsStr::from_bytes(b"0\xff.jpg"));
        std::fs::write(&odd, b"x").unwrap();
        let msg = message(stanford::load(&s, &stanford_cfg));
        assert!(msg.contains("not UTF-8"), "{msg}");
        std::fs::remove_file(&odd).unwrap();
    }

    // Training images without a labelled pixel: said so, not "no rows to fit".
    let mut images = stanford::load(&s, &stanford_cfg).unwrap();
    images.iter_mut().for_each(|i| i.labels.iter_mut().for_each(|l| *l = None));
    let features = compute_features(&images, &FeatureConfig::default()).unwrap();
    let msg = fit_standardizers(&images, &features).unwrap_err().to_string();
    assert!(msg.contains("no labelled pixel"), "{msg}");
}

#[test]
fn a_pipeline_file_turns_a_photograph_into_the_training_features() {
    let tmp = tempfile::tempdir().unwrap();
    let root = generated(tmp.path());
    let dir = horses::dataset_dir(Some(&root)).unwrap();
    let images = horses::load(&dir, &horses::HorsesConfig { max_side: 20, limit: Some(2) }).unwrap();
    let data = check_features(&images, 2);
    let std = fit_standardizers(&data.images, &data.features).unwrap();
    let mut pipeline = Pipeline {
        dataset: "horses".into(),
        max_side: Some(20),
        scale: None,
        features: FeatureConfig::default(),
        standardizers: std.clone(),
        pair_types: PairTypes::Shared,
        classes: vec!["background".into(), "horse".into()],
        colors: vec![[0, 0, 0], [255, 255, 255]],
    };
    let path = tmp.path().join("features.json");
    pipeline.save(&path).unwrap();
    assert_eq!(Pipeline::load(&path).unwrap(), pipeline);
    // A file written before pairs could be typed by direction reads as shared.
    let mut old: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    old.as_object_mut().unwrap().remove("pair_types");
    std::fs::write(&path, old.to_string()).unwrap();
    assert_eq!(Pipeline::load(&path).unwrap(), pipeline);
    std::fs::write(&path, "{}").unwrap();
    assert!(matches!(Pipeline::load(&path), Err(DatasetError::Malformed { .. })));
    // The graph and every feature block of a photograph equal the training
    // example of the same reduced image, for both ways of typing pairs.
    let photo = images[0].rgb_image().unwrap();
    for pair_types in [PairTypes::Shared, PairTypes::ByDirection] {
        pipeline.pair_types = pair_types;
        let (set, small) = pipeline.dataset(&photo, "x").unwrap();
        assert_eq!((small.height() as usize, small.width() as usize), (images[0].height, images[0].width));
        let train = build_examples(&data.images, data.features.clone(), &std, 2, Use::Train, pair_types).unwrap();
        assert_eq!(set.factor_types(), train.factor_types());
        assert_eq!(set.examples()[0].graph(), train.examples()[0].graph());
        for (a, b) in set.feature_blocks(0).iter().zip(&train.feature_blocks(0)) {
            assert_eq!(a.values.len(), b.values.len());
            assert!(a.values.iter().zip(&b.values).all(|(x, y)| (x - y).abs() < 1e-9));
        }
    }
}
