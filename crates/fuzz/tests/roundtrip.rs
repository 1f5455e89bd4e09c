//! Round trips of every file kind: save → load → save is byte-identical, and
//! loading any prefix of a valid file is a typed error, never a panic.

use std::path::Path;

use oracles::ModelRegistry;
use proptest::prelude::*;
use structlearn::{Dataset, StructuredModel, TrainConfig, Trainer};
use structlearn_fuzz::seeds;

fn registry() -> ModelRegistry {
    ModelRegistry::with_builtin()
}

/// Prefix lengths to try: all of a short file, a spread of a long one.
fn prefixes(len: usize) -> impl Iterator<Item = usize> {
    let step = (len / 200).max(1);
    (0..len).step_by(step).chain(len.saturating_sub(20)..len)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn model_files_round_trip_and_prefixes_fail(kind in 0usize..5, count in 2usize..5, h in 2usize..4, seed in 0u64..1000) {
        let data = seeds::dataset(count, h, 3, seed);
        let kind = seeds::MODEL_KINDS[kind];
        let bytes = seeds::model_file(&data, kind);
        let loaded = StructuredModel::from_bytes(&bytes, &registry(), Path::new("m")).unwrap();
        prop_assert_eq!(&loaded.to_bytes().unwrap(), &bytes);
        for n in prefixes(bytes.len()) {
            prop_assert!(StructuredModel::from_bytes(&bytes[..n], &registry(), Path::new("m")).is_err());
        }
    }

    #[test]
    fn data_set_files_round_trip_and_prefixes_fail(count in 1usize..5, h in 1usize..4, w in 1usize..4, seed in 0u64..1000) {
        let data = seeds::dataset(count, h, w, seed);
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in [("d.sld", seeds::dataset_binary(&data)), ("d.json", seeds::dataset_json(&data))] {
            let path = dir.path().join(name);
            let loaded = Dataset::from_bytes(&bytes, &path).unwrap();
            loaded.save(&path).unwrap();
            prop_assert_eq!(&std::fs::read(&path).unwrap(), &bytes);
            for n in prefixes(bytes.len()) {
                prop_assert!(Dataset::from_bytes(&bytes[..n], &path).is_err(), "{} prefix {}", name, n);
            }
        }
    }

    #[test]
    fn checkpoints_round_trip_and_prefixes_fail(u in 0usize..5, p in 0usize..5, seed in 0u64..1000) {
        let data = seeds::dataset(3, 2, 3, seed);
        let (u, p) = (seeds::MODEL_KINDS[u], seeds::MODEL_KINDS[p]);
        let dir = tempfile::tempdir().unwrap();
        let bytes = seeds::checkpoint(&data, u, p, seed, dir.path());
        let config = TrainConfig { learning_iterations: 1, ..seeds::quick_config(seed) };
        let mut trainer = Trainer::new(&data, seeds::oracles_for(u, p), config.clone()).unwrap();
        trainer.resume_from_bytes(&bytes, Path::new("c"), &registry()).unwrap();
        let again = dir.path().join("again.ckpt");
        trainer.save_checkpoint(&again).unwrap();
        prop_assert_eq!(&std::fs::read(&again).unwrap(), &bytes);
        for n in prefixes(bytes.len()) {
            let mut t = Trainer::new(&data, seeds::oracles_for(u, p), config.clone()).unwrap();
            prop_assert!(t.resume_from_bytes(&bytes[..n], Path::new("c"), &registry()).is_err());
        }
    }

    #[test]
    fn uai_files_round_trip_and_cut_tables_fail(which in 0usize..4) {
        let text = String::from_utf8(seeds::uai_files()[which].clone()).unwrap();
        let model = factor_graph::UaiModel::parse(&text).unwrap();
        let written = model.to_uai_string();
        let again = factor_graph::UaiModel::parse(&written).unwrap();
        prop_assert_eq!(&again, &model);
        prop_assert_eq!(again.to_uai_string(), written.clone());
        // Cut before the last token (an entry is missing): an error naming a line.
        let last = written.trim_end().rfind(char::is_whitespace).unwrap();
        for n in 0..=last {
            if written.as_bytes()[n].is_ascii_whitespace() || n == 0 {
                let err = factor_graph::UaiModel::parse(&written[..n]).unwrap_err();
                prop_assert!(err.to_string().contains("line"), "{}", err);
            }
        }
    }

    #[test]
    fn configurations_round_trip_and_prefixes_fail(which in 0usize..3) {
        let bytes = seeds::configs()[which].clone();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let config: TrainConfig = serde_json::from_value(v.get("train").cloned().unwrap_or(serde_json::json!({}))).unwrap();
        let text = serde_json::to_string(&config).unwrap();
        let back: TrainConfig = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(serde_json::to_string(&back).unwrap(), text.clone());
        for n in 0..text.len() {
            prop_assert!(serde_json::from_str::<TrainConfig>(&text[..n]).is_err());
        }
    }
}

#[test]
fn png_images_round_trip_and_prefixes_fail() {
    for bytes in seeds::images(image::ImageFormat::Png) {
        let img = datasets::image::decode_image(&bytes, Path::new("i.png")).unwrap();
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        assert_eq!(out.into_inner(), bytes);
        for n in prefixes(bytes.len()) {
            assert!(datasets::image::decode_image(&bytes[..n], Path::new("i.png")).is_err(), "prefix {n}");
        }
    }
    // JPEG is lossy: decode → encode → decode is stable in shape; prefixes fail.
    for bytes in seeds::images(image::ImageFormat::Jpeg) {
        let img = datasets::image::decode_image(&bytes, Path::new("i.jpg")).unwrap();
        assert!(img.width() > 0);
        for n in prefixes(bytes.len()) {
            assert!(datasets::image::decode_image(&bytes[..n], Path::new("i.jpg")).is_err(), "prefix {n}");
        }
    }
}
