//! Regressions of a hostile-input review of the command line: values that
//! used to abort the process, hang it, or give a score for nothing now give
//! errors naming the option, the file and the limit.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{run, stderr};

/// Asserts `o` failed with a plain error (exit code 1, not a panic or an
/// abort) whose text contains every one of `parts`.
fn refused(o: &Output, parts: &[&str]) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.starts_with("error: ") && !e.contains("panicked"), "{e}");
    for p in parts {
        assert!(e.contains(p), "`{p}` missing from: {e}");
    }
}

/// A data set saved as `name` in `dir`.
fn data_file(dir: &Path, name: &str, data: &structlearn::Dataset) -> PathBuf {
    let path = dir.join(name);
    data.save(&path).unwrap();
    path
}

/// `structlearn train -q --data DATA --model MODEL` with `extra` options
/// (linear oracles and one learning iteration unless `extra` says otherwise).
fn train(data: &Path, model: &Path, extra: &[&str]) -> Output {
    run(&train_args(data, model, extra))
}

/// The arguments of [`train`].
fn train_args<'a>(data: &'a Path, model: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["train", "-q", "--data", data.to_str().unwrap(), "--model", model.to_str().unwrap()];
    args.extend(["--oracle", "unary=linear", "--oracle", "pairwise=linear", "--iterations", "1"]);
    args.extend(extra);
    args
}

/// A training set of 4 examples and a model trained on it.
fn train_model(dir: &Path) -> (PathBuf, PathBuf) {
    let data = data_file(dir, "train.sld", &structlearn_fuzz::seeds::dataset(4, 3, 4, 9));
    let model = dir.join("m.slm");
    let o = train(&data, &model, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    (data, model)
}

#[test]
fn thread_counts_far_beyond_the_machine_are_refused() {
    for n in ["100000", "18446744073709551615"] {
        let o = run(&["--threads", n, "infer", "missing.uai"]);
        refused(&o, &[&format!("--threads {n}"), "must be between 1 and"]);
    }
}

#[test]
fn sets_without_labelled_variables_are_not_perfect_scores() {
    let dir = tempfile::tempdir().unwrap();
    let (train_data, model) = train_model(dir.path());
    let mut unknown = structlearn_fuzz::seeds::dataset(2, 3, 4, 1);
    for k in 0..unknown.len() {
        let n = unknown.examples()[k].graph().num_variables();
        unknown.set_ignored(k, Some(vec![true; n])).unwrap();
    }
    let unknown = data_file(dir.path(), "unknown.sld", &unknown);
    let o = run(&["eval", "--model", model.to_str().unwrap(), "--data", unknown.to_str().unwrap()]);
    refused(&o, &["unknown.sld", "no labelled variables"]);
    let o =
        train(&train_data, &dir.path().join("t.slm"), &["--validation", unknown.to_str().unwrap(), "--patience", "2"]);
    refused(&o, &["validation set", "no labelled variables"]);
}

#[test]
fn configuration_files_get_the_command_lines_checks() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_file(dir.path(), "train.sld", &structlearn_fuzz::seeds::dataset(2, 3, 4, 9));
    let model = dir.path().join("m.slm");
    let config = dir.path().join("config.json");
    let train_with = |text: &str| {
        std::fs::write(&config, text).unwrap();
        train(&data, &model, &["--config", config.to_str().unwrap()])
    };
    for eps in ["1e-300", "1e300"] {
        let o = train_with(&format!(r#"{{"train": {{"epsilon": {eps}}}}}"#));
        refused(&o, &["epsilon", "between 1e-6 and 1e6"]);
    }
    let o = train_with(r#"{"train": {"type_epsilon": [["unary", 1e300]]}}"#);
    refused(&o, &["`type_epsilon` = 1e300 for factor type `unary`", "between 1e-6 and 1e6"]);
    let o = train_with(r#"{"oracles": [1, 2]}"#);
    refused(&o, &["config.json", "`oracles` must be an object"]);
    assert!(!model.exists());
}

#[test]
fn oversized_oracle_settings_are_errors_not_aborts() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_file(dir.path(), "train.sld", &structlearn_fuzz::seeds::dataset(2, 3, 4, 9));
    for (oracle, name) in [
        ("unary=mlp:hidden=100000000000", "hidden"),
        ("unary=linear:lbfgs.memory=1000000000000", "memory"),
        ("unary=indexed-linear:groups=100000000000", "groups"),
        ("unary=boosting:rounds=1000000000000", "rounds"),
        ("unary=mlp:epochs=1000000000000", "epochs"),
    ] {
        let o = train(&data, &dir.path().join("m.slm"), &["--oracle", oracle, "--oracle", "pairwise=zero"]);
        refused(&o, &[&format!("`{name}`")]);
    }
}

#[test]
fn folders_given_as_output_files_are_refused_before_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let (data, model) = train_model(dir.path());
    let folder = dir.path().to_str().unwrap();
    let o = run(&["eval", "--model", model.to_str().unwrap(), "--data", data.to_str().unwrap(), "--json", folder]);
    refused(&o, &["is a folder, not a file"]);
    assert!(o.stdout.is_empty(), "eval ran before refusing its output");
    let o = train(&data, &dir.path().join("t.slm"), &["--curve-png", folder]);
    refused(&o, &["is a folder, not a file"]);
    assert!(!dir.path().join("t.slm").exists());
}

#[test]
fn predict_image_checks_its_tolerance_like_the_other_commands() {
    for tol in ["nan", "0", "-1", "inf"] {
        let o = run(&["predict-image", "--model", "m", "--image", "i.png", "--output", "o.png", "--tolerance", tol]);
        assert_eq!(o.status.code(), Some(2), "--tolerance {tol}: {}", stderr(&o));
        assert!(stderr(&o).contains("tolerance (largest marginalisation violation)"), "{}", stderr(&o));
    }
}

/// `structlearn eval … | head -c 0`: a reader gone before the report is an
/// error, not `println!`'s panic.
#[cfg(unix)]
#[test]
fn eval_into_a_closed_standard_output_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let (data, model) = train_model(dir.path());
    let o =
        common::run_with_stdout_closed(&["eval", "--model", model.to_str().unwrap(), "--data", data.to_str().unwrap()]);
    refused(&o, &["writing the result to standard output"]);
}

#[test]
fn a_png_folder_that_is_a_file_is_refused_before_predicting() {
    let dir = tempfile::tempdir().unwrap();
    let (data, model) = train_model(dir.path());
    let file = dir.path().join("pngs");
    std::fs::write(&file, b"").unwrap();
    let output = dir.path().join("p.json");
    let o = run(&[
        "predict",
        "--model",
        model.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--png-dir",
        file.to_str().unwrap(),
    ]);
    refused(&o, &["--png-dir", "is a file, not a folder"]);
    assert!(!output.exists(), "predicted before checking --png-dir");
}

#[test]
fn an_output_that_is_also_an_input_or_another_output_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (data, model) = train_model(dir.path());
    let before = std::fs::read(&data).unwrap();
    let (m, d) = (model.to_str().unwrap(), data.to_str().unwrap());
    let o = run(&["predict", "--model", m, "--data", d, "--output", d]);
    refused(&o, &["given as --output and as --data", "choose another path"]);
    let o = run(&["eval", "--model", m, "--data", d, "--json", m]);
    refused(&o, &["given as --json and as --model"]);
    let o = train(&data, &data, &[]);
    refused(&o, &["given as --model and as --data"]);
    let other = dir.path().join("other.slm");
    let o = train(&data, &other, &["--checkpoint", other.to_str().unwrap()]);
    refused(&o, &["given as --checkpoint and as --model"]);
    assert_eq!(std::fs::read(&data).unwrap(), before, "the data set was overwritten");
    assert!(!other.exists());
}

#[test]
fn rayon_num_threads_far_beyond_the_machine_is_refused() {
    let o = std::process::Command::new(common::BIN)
        .args(["eval", "--model", "m.slm", "--data", "d.sld"])
        .env("RAYON_NUM_THREADS", "100000")
        .output()
        .unwrap();
    refused(&o, &["RAYON_NUM_THREADS=100000", "must be between 1 and"]);
}

/// A fit that runs long cannot be interrupted between learning iterations: a
/// second Ctrl-C ends the process at once (exit code 130).
#[cfg(unix)]
#[test]
fn a_second_ctrl_c_stops_at_once() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let data = data_file(dir.path(), "train.sld", &structlearn_fuzz::seeds::dataset(4, 3, 4, 9));
    let model = dir.path().join("m.slm");
    let mut child = std::process::Command::new(common::BIN)
        .args(["train", "--data", data.to_str().unwrap(), "--model", model.to_str().unwrap(), "--iterations", "1"])
        .args(["--oracle", "unary=mlp:epochs=1000000", "--oracle", "pairwise=linear"])
        .env("RAYON_NUM_THREADS", "1")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The first line comes once training has started (the handler is installed).
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    assert!(lines.next().unwrap().unwrap().starts_with("train:"));
    let interrupt = || {
        let pid = child.id().to_string();
        assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    };
    // The line is written just before the first step's check of the stop flag: give the child time to
    // pass it and enter the endless fit, or the first Ctrl-C alone stops it (a loaded machine did).
    std::thread::sleep(std::time::Duration::from_millis(500));
    interrupt();
    std::thread::sleep(std::time::Duration::from_millis(200));
    interrupt();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert_eq!(child.wait().unwrap().code(), Some(130), "{rest:?}");
    assert!(rest.iter().any(|l| l.contains("second Ctrl-C")), "{rest:?}");
    assert!(!model.exists());
}

/// A temporary directory where no file can be made is refused before the
/// first learning iteration, naming it and the two ways out — also without
/// warm-started evaluation (a boosted type's validation scores wait there);
/// with the evaluation messages in memory it is not needed.
#[test]
fn an_unusable_temporary_directory_is_refused_before_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_file(dir.path(), "train.sld", &structlearn_fuzz::seeds::dataset(4, 3, 4, 9));
    let model = dir.path().join("m.slm");
    let missing = dir.path().join("no-such-dir");
    let run_with_tmpdir =
        |extra: &[&str]| common::run_with_env(&train_args(&data, &model, extra), &[("TMPDIR", missing.as_os_str())]);
    let o = run_with_tmpdir(&[]);
    refused(&o, &[missing.to_str().unwrap(), "TMPDIR", "`evaluation_messages` to `memory`"]);
    assert!(!model.exists(), "no model from a refused run");
    let cold = dir.path().join("cold.json");
    std::fs::write(&cold, r#"{"train": {"warm_start_evaluation": false}}"#).unwrap();
    let o = run_with_tmpdir(&["--config", cold.to_str().unwrap()]);
    refused(&o, &[missing.to_str().unwrap(), "TMPDIR", "`evaluation_messages` to `memory`"]);
    let o = run_with_tmpdir(&["--evaluation-messages", "memory"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // An unknown store is a usage error (exit code 2) listing the names.
    let o = run_with_tmpdir(&["--evaluation-messages", "disk"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown evaluation message store `disk` (expected one of: memory, temp-file)"));
}
