//! The `structlearn` binary as a user runs it, with standard error captured
//! (not a terminal): progress lines, the outputs of train / eval / predict /
//! infer, and configuration errors.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};

/// Four 6 × 6 binary images (a bright square on a dark background, noisy
/// unary feature), split 2 / 2 into train and validation files.
fn write_data(dir: &Path) {
    let graph = Arc::new(factor_graph::grid(6, 6, 2).unwrap());
    let layout = factor_graph::GridLayout { height: 6, width: 6 };
    let image = |k: usize| {
        let labels: Vec<usize> = (0..36).map(|i| usize::from((i / 6 + k) % 6 < 3 && (i % 6) < 4)).collect();
        let unary = labels
            .iter()
            .enumerate()
            .flat_map(|(i, &y)| [y as f64 * 0.6 + ((i * 7 + k) % 5) as f64 * 0.1, 1.0])
            .collect();
        let pair = (0..layout.num_pairs()).flat_map(|_| [1.0]).collect();
        Example::new(
            format!("img{k}"),
            graph.clone(),
            Some(labels),
            vec![FeatureBlock { dim: 2, values: unary }, FeatureBlock { dim: 1, values: pair }],
        )
    };
    let types = || vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)];
    Dataset::new(types(), vec![image(0), image(1)]).unwrap().save(&dir.join("train.sld")).unwrap();
    Dataset::new(types(), vec![image(2), image(3)]).unwrap().save(&dir.join("valid.sld")).unwrap();
}

/// The labels of example `name` of `dir/valid.sld`.
fn truth_of(dir: &Path, name: &str) -> Vec<u64> {
    let data = Dataset::load(&dir.join("valid.sld")).unwrap();
    let k = data.examples().iter().position(|e| e.name() == name).unwrap();
    data.labels(k).unwrap().iter().map(|&y| y as u64).collect()
}

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_structlearn")).current_dir(dir).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn train_prints_a_line_per_iteration_and_writes_model_curve_and_png() {
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path());
    let out = run(
        dir.path(),
        &[
            "train",
            "--data",
            "train.sld",
            "--validation",
            "valid.sld",
            "--oracle",
            "unary=boosting:rounds=3,max_depth=2,leaf_l2=1",
            "--oracle",
            "pairwise=linear",
            "--iterations",
            "3",
            "--model",
            "m.slm",
            "--curve",
            "c.csv",
            "--curve-png",
            "c.png",
            "--threads",
            "2",
        ],
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    // The validation error after every iteration; the training error (by
    // default after every fifth and the last) here after the third.
    for i in 1..=3 {
        let line = err.lines().find(|l| l.starts_with(&format!("train: iteration {i}/3: objective R = "))).unwrap();
        assert!(line.contains("validation error") && line.contains("ETA"), "{line}");
        assert_eq!(line.contains("train error"), i == 3, "{line}");
    }
    assert!(err.contains("wrote m.slm"), "{err}");
    assert!(dir.path().join("m.slm").exists() && dir.path().join("c.csv").exists());
    let png = std::fs::read(dir.path().join("c.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");

    // --quiet: nothing on standard error; --verbose: a line per step.
    let quiet = run(
        dir.path(),
        &[
            "--quiet",
            "train",
            "--data",
            "train.sld",
            "--iterations",
            "1",
            "--model",
            "q.slm",
            "--oracle",
            "unary=linear",
            "--oracle",
            "pairwise=constant",
        ],
    );
    assert!(quiet.status.success() && quiet.stderr.is_empty(), "{}", text(&quiet.stderr));
    let verbose = run(
        dir.path(),
        &[
            "train",
            "-v",
            "--data",
            "train.sld",
            "--iterations",
            "1",
            "--model",
            "v.slm",
            "--oracle",
            "unary=linear",
            "--oracle",
            "pairwise=constant",
        ],
    );
    let err = text(&verbose.stderr);
    assert!(
        err.contains("step 0: fit `unary`: oracle loss") && err.contains("message passing: largest violation"),
        "{err}"
    );
}

#[test]
fn eval_reports_metrics_as_text_and_json_and_predict_writes_label_maps() {
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path());
    let train = run(
        dir.path(),
        &[
            "-q",
            "train",
            "--data",
            "train.sld",
            "--iterations",
            "2",
            "--model",
            "m.slm",
            "--oracle",
            "unary=linear",
            "--oracle",
            "pairwise=linear",
        ],
    );
    assert!(train.status.success(), "{}", text(&train.stderr));

    let eval = run(dir.path(), &["eval", "--model", "m.slm", "--data", "valid.sld", "--json", "e.json"]);
    let stdout = text(&eval.stdout);
    assert!(eval.status.success(), "{}", text(&eval.stderr));
    assert!(stdout.contains("mean IoU") && stdout.contains("confusion matrix"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("e.json")).unwrap()).unwrap();
    let confusion = json["confusion"].as_array().unwrap();
    let total: u64 = confusion.iter().flat_map(|r| r.as_array().unwrap()).map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(total, 72);
    let wrong = total - confusion[0][0].as_u64().unwrap() - confusion[1][1].as_u64().unwrap();
    assert!((json["error"].as_f64().unwrap() - wrong as f64 / 72.0).abs() < 1e-12);
    assert_eq!(json["examples"], 2);

    let predict = run(
        dir.path(),
        &["predict", "--model", "m.slm", "--data", "valid.sld", "--output", "p.json", "--png-dir", "maps"],
    );
    let err = text(&predict.stderr);
    assert!(predict.status.success(), "{err}");
    assert!(err.contains("predicted 2 examples (72 variables)") && err.contains("labels present: error"), "{err}");
    assert!(err.contains("wrote p.json") && err.contains("wrote 2 label-map PNGs"), "{err}");
    let map = image_size(&dir.path().join("maps").join("0000-img2.png"));
    assert_eq!(map, (6, 6));

    // --certificates adds score, bound and gap to each prediction, nothing else.
    let certified = run(
        dir.path(),
        &["predict", "--model", "m.slm", "--data", "valid.sld", "--output", "c.json", "--certificates"],
    );
    assert!(certified.status.success(), "{}", text(&certified.stderr));
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(f)).unwrap()).unwrap()
    };
    let (plain, with) = (read("p.json"), read("c.json"));
    let (plain, with) = (plain["predictions"].as_array().unwrap(), with["predictions"].as_array().unwrap());
    assert_eq!(plain.len(), 2);
    for (p, c) in plain.iter().zip(with) {
        assert!(p.get("score").is_none() && p.get("bound").is_none() && p.get("gap").is_none(), "{p}");
        let mut stripped = c.clone();
        for key in ["score", "bound", "gap"] {
            stripped.as_object_mut().unwrap().remove(key);
        }
        assert_eq!(&stripped, p);
        let (score, bound, gap) =
            (c["score"].as_f64().unwrap(), c["bound"].as_f64().unwrap(), c["gap"].as_f64().unwrap());
        assert!(bound >= score - 1e-9 && (gap - (bound - score)).abs() <= 1e-12 * bound.abs().max(1.0), "{c}");
    }

    // --anneal: the ε → 0 labellings, certified; eval counts their errors.
    let annealed = run(
        dir.path(),
        &["predict", "--model", "m.slm", "--data", "valid.sld", "--output", "a.json", "--anneal", "--certificates"],
    );
    assert!(annealed.status.success(), "{}", text(&annealed.stderr));
    let annealed = read("a.json");
    let mut wrong = 0;
    for (a, c) in annealed["predictions"].as_array().unwrap().iter().zip(with) {
        let (score, bound) = (a["score"].as_f64().unwrap(), a["bound"].as_f64().unwrap());
        // The best stage scores at least the first, whose bound is no lower than the lowest.
        assert!(score >= c["score"].as_f64().unwrap() - 1e-9 && bound >= score - 1e-9, "{a} against {c}");
        let labels: Vec<u64> = a["labels"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        let truth = truth_of(dir.path(), a["name"].as_str().unwrap());
        wrong += labels.iter().zip(&truth).filter(|(x, y)| x != y).count();
    }
    let eval = run(dir.path(), &["eval", "--model", "m.slm", "--data", "valid.sld", "--anneal", "--json", "ea.json"]);
    assert!(eval.status.success(), "{}", text(&eval.stderr));
    assert!(text(&eval.stdout).contains("ε → 0 labellings"), "{}", text(&eval.stdout));
    let json = read("ea.json");
    assert!((json["error"].as_f64().unwrap() - wrong as f64 / 72.0).abs() < 1e-12, "{json}");
    assert_eq!(json["predict"]["anneal_eps_min"], 0.01);
    for (args, expected) in [
        (&["--anneal", "--eps-min", "0"][..], "(0, 1]"),
        (&["--anneal", "--eps-min", "1.5"][..], "(0, 1]"),
        (&["--eps-min", "0.1"][..], "--anneal"),
    ] {
        let out = run(dir.path(), &[&["eval", "--model", "m.slm", "--data", "valid.sld"][..], args].concat());
        assert!(!out.status.success() && text(&out.stderr).contains(expected), "{args:?}: {}", text(&out.stderr));
    }
}

/// Width and height from a PNG's IHDR chunk.
fn image_size(path: &Path) -> (u32, u32) {
    let b = std::fs::read(path).unwrap();
    let be = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    (be(16), be(20))
}

#[test]
fn unknown_keys_in_the_train_configuration_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path());
    std::fs::write(dir.path().join("c.json"), r#"{"train": {"learning_iteratons": 3}}"#).unwrap();
    let out = run(dir.path(), &["train", "--data", "train.sld", "--model", "m.slm", "--config", "c.json"]);
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("unknown field `learning_iteratons`") && err.contains("c.json"), "{err}");
    let out =
        run(dir.path(), &["train", "--data", "train.sld", "--model", "m.slm", "--oracle", "unary=boosting:depth=4"]);
    assert!(text(&out.stderr).contains("no hyper-parameter `depth`"), "{}", text(&out.stderr));
}

#[test]
fn infer_writes_the_decoded_labelling_and_says_what_the_beliefs_are() {
    let dir = tempfile::tempdir().unwrap();
    // Two binary variables that prefer to disagree; variable 0 prefers label 1.
    std::fs::write(dir.path().join("m.uai"), "MARKOV\n2\n2 2\n2\n1 0\n2 0 1\n\n2\n0.2 0.8\n\n4\n1 5 5 1\n").unwrap();
    let out = run(dir.path(), &["infer", "m.uai", "--eps", "0.1", "--tolerance", "1e-9"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["labels"], serde_json::json!([1, 0]));
    assert!(json["beliefs_are"].as_str().unwrap().contains("not exact marginals"));
}
