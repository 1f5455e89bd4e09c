//! Issue 14 regressions of the command line: bad numbers rejected naming the
//! option, the polish reports what it reached, no lost work, errors that name
//! the file and show each cause once.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{BIN, run, stderr};

/// A small training set and its file.
fn data_file(dir: &Path, name: &str, count: usize) -> PathBuf {
    let path = dir.join(name);
    structlearn_fuzz::seeds::dataset(count, 3, 4, 9).save(&path).unwrap();
    path
}

#[test]
fn bad_numbers_are_rejected_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let uai = dir.path().join("m.uai");
    std::fs::write(&uai, "MARKOV\n2\n2 2\n1\n2 0 1\n4\n1 2 3 4\n").unwrap();
    let uai = uai.to_str().unwrap();
    for eps in ["-1", "1e308", "nan", "inf", "0", "1e-300"] {
        let o = run(&["infer", uai, "--eps", eps]);
        let e = stderr(&o);
        assert!(!o.status.success(), "--eps {eps} accepted");
        assert!(e.contains("--eps") && e.contains("entropy weight ε"), "--eps {eps}: {e}");
        assert!(!e.contains("tip:"), "--eps {eps}: {e}");
    }
    for tol in ["nan", "0", "-1e-4", "inf"] {
        for cmd in [&["infer", uai][..], &["eval", "--model", "m", "--data", "d"][..]] {
            let mut args = cmd.to_vec();
            args.extend(["--tolerance", tol]);
            let o = run(&args);
            assert!(!o.status.success() && stderr(&o).contains("tolerance"), "{args:?}: {}", stderr(&o));
        }
    }
    let o = run(&["infer", uai, "--eps", "0.5", "--tolerance", "1e-6"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn the_dual_polish_reports_the_violation_reached_and_warns_above_the_tolerance() {
    let uai = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slow_cycle4.uai");
    let uai = uai.to_str().unwrap();
    let o = run(&["infer", uai, "--eps", "0.1", "--iterations", "3", "--polish", "1", "--tolerance", "1e-12"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("warning") && e.contains("above --tolerance"), "{e}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["converged"], serde_json::json!(false));
    let reached: f64 = v["max_violation"].as_f64().unwrap();
    assert!(e.contains(&format!("{reached:.3e}")), "{e} vs {reached}");
    // No tolerance: the polish reports what it reached, unless --quiet; a warning is never quiet.
    let o = run(&["infer", uai, "--eps", "0.1", "--iterations", "3", "--polish", "50"]);
    assert!(stderr(&o).contains("dual polish reached"), "{}", stderr(&o));
    let o = run(&["infer", uai, "--eps", "0.1", "--iterations", "3", "--polish", "50", "-q"]);
    assert!(o.status.success() && stderr(&o).is_empty(), "{}", stderr(&o));
    let o = run(&["infer", uai, "--eps", "0.1", "--iterations", "3", "--polish", "1", "--tolerance", "1e-12", "-q"]);
    assert!(stderr(&o).contains("warning"), "{}", stderr(&o));
    // Met tolerance: no warning.
    let o = run(&["infer", uai, "--eps", "0.1", "--iterations", "200", "--tolerance", "1e-6"]);
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["converged"], serde_json::json!(true));
}

#[test]
fn empty_scope_factors_add_their_constant_or_fail_when_zero() {
    let dir = tempfile::tempdir().unwrap();
    let with = dir.path().join("with.uai");
    let without = dir.path().join("without.uai");
    let zero = dir.path().join("zero.uai");
    std::fs::write(&with, "MARKOV\n1\n2\n2\n0\n1 0\n1\n3\n2\n1 2\n").unwrap();
    std::fs::write(&without, "MARKOV\n1\n2\n1\n1 0\n2\n1 2\n").unwrap();
    std::fs::write(&zero, "MARKOV\n1\n2\n2\n0\n1 0\n1\n0\n2\n1 2\n").unwrap();
    let dual = |p: &Path| {
        let o = run(&["infer", p.to_str().unwrap(), "--tolerance", "1e-9"]);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["dual_value"].as_f64().unwrap()
    };
    assert!((dual(&with) - dual(&without) - 3f64.ln()).abs() < 1e-12);
    let o = run(&["infer", zero.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("empty scope"), "{}", stderr(&o));
}

#[test]
fn errors_show_each_cause_once_and_name_the_set() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_file(dir.path(), "train.sld", 2);
    let model = dir.path().join("m.slm");
    let (d, m) = (data.to_str().unwrap(), model.to_str().unwrap());
    let o =
        run(&["train", "--data", "missing.sld", "--model", m, "--oracle", "unary=zero", "--oracle", "pairwise=zero"]);
    let e = stderr(&o);
    assert_eq!(e.matches("No such file").count(), 1, "{e}");
    assert!(e.starts_with("error: training set: missing.sld: "), "{e}");
    let o = run(&["train", "--data", d, "--validation", "nope.sld", "--model", m, "--oracle", "unary=zero"]);
    assert!(stderr(&o).starts_with("error: validation set: nope.sld: "), "{}", stderr(&o));
    // Corrupt bytes vs another version, with the file named.
    let mut bytes = std::fs::read(&data).unwrap();
    let corrupt = dir.path().join("corrupt.sld");
    bytes[20] ^= 1;
    std::fs::write(&corrupt, &bytes).unwrap();
    let o = run(&["eval", "--model", m, "--data", corrupt.to_str().unwrap()]);
    assert!(!o.status.success());
    bytes[20] ^= 1;
    bytes[7] = 9;
    let newer = dir.path().join("newer.sld");
    std::fs::write(&newer, &bytes).unwrap();
    let args =
        |p: &Path| vec!["train".to_string(), "--data".into(), p.to_str().unwrap().into(), "--model".into(), m.into()];
    let o = Command::new(BIN).args(args(&corrupt)).output().unwrap();
    assert!(stderr(&o).contains("corrupt.sld: corrupt or truncated"), "{}", stderr(&o));
    let o = Command::new(BIN).args(args(&newer)).output().unwrap();
    assert!(stderr(&o).contains("newer.sld: format version 9 is not supported"), "{}", stderr(&o));
}

#[test]
fn outputs_are_checked_before_training_and_ctrl_c_keeps_the_finished_model() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_file(dir.path(), "train.sld", 6);
    let d = data.to_str().unwrap();
    let bad = dir.path().join("no/such/dir/m.slm");
    let curve = dir.path().join("c.csv");
    let o = run(&[
        "train",
        "--data",
        d,
        "--model",
        bad.to_str().unwrap(),
        "--curve",
        curve.to_str().unwrap(),
        "--oracle",
        "unary=linear",
        "--oracle",
        "pairwise=linear",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains(bad.to_str().unwrap()), "{}", stderr(&o));
    assert!(!curve.exists(), "training started before the model path was checked");
    // Ctrl-C (SIGINT) without --checkpoint: the last finished iteration's model is kept.
    #[cfg(unix)]
    {
        let model = dir.path().join("m.slm");
        let child = Command::new(BIN)
            .args([
                "train",
                "--data",
                d,
                "--model",
                model.to_str().unwrap(),
                "--curve",
                curve.to_str().unwrap(),
                "--iterations",
                "100000",
                "--oracle",
                "unary=boosting",
                "--oracle",
                "pairwise=linear",
            ])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        while std::fs::read_to_string(&curve).map_or(0, |c| c.lines().count()) < 6 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
        assert!(kill.success());
        let out = child.wait_with_output().unwrap();
        let e = stderr(&out);
        assert!(!out.status.success());
        assert!(e.contains("interrupted after learning iteration") && e.contains("saved to"), "{e}");
        let loaded = structlearn::StructuredModel::load(&model, &oracles::ModelRegistry::with_builtin()).unwrap();
        assert_eq!(loaded.factor_types().len(), 2);
    }
}

#[test]
fn resuming_with_other_oracles_or_settings_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_file(dir.path(), "train.sld", 2);
    let (model, ckpt) = (dir.path().join("m.slm"), dir.path().join("c.ckpt"));
    let (data, model, ckpt_arg) = (data.to_str().unwrap(), model.to_str().unwrap(), ckpt.to_str().unwrap());
    let train = |iterations: &str, pairwise: &str, extra: &[&str]| {
        let mut a =
            vec!["train", "--data", data, "--model", model, "--checkpoint", ckpt_arg, "--iterations", iterations];
        a.extend(["--oracle", "unary=linear", "--oracle", pairwise]);
        a.extend(extra);
        run(&a)
    };
    let o = train("1", "pairwise=constant", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (pairwise, extra, difference) in [
        ("pairwise=linear", &[][..], "oracles.pairwise.kind: checkpoint \"constant\", now \"linear\""),
        ("pairwise=constant", &["--eps", "0.5"][..], "train.epsilon: checkpoint 0.1, now 0.5"),
    ] {
        let o = train("2", pairwise, &[extra, &["--resume"]].concat());
        let e = stderr(&o);
        assert!(!o.status.success() && e.contains(difference) && e.contains("without --resume"), "{e}");
    }
    // The same oracles and settings, more iterations: resumed.
    let o = train("2", "pairwise=constant", &["--resume"]);
    assert!(o.status.success() && stderr(&o).contains("resumed after learning iteration 1"), "{}", stderr(&o));
}

#[test]
fn a_resumed_curve_continues_the_one_written_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_file(dir.path(), "train.sld", 2);
    let (model, curve, ckpt) = (dir.path().join("m.slm"), dir.path().join("c.csv"), dir.path().join("c.ckpt"));
    let args = |iterations: &str, resume: bool| {
        let mut a: Vec<String> = ["train", "--data", data.to_str().unwrap(), "--model", model.to_str().unwrap()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(
            ["--curve", curve.to_str().unwrap(), "--checkpoint", ckpt.to_str().unwrap(), "--iterations", iterations]
                .map(String::from),
        );
        a.extend(["--oracle", "unary=linear", "--oracle", "pairwise=constant"].map(String::from));
        if resume {
            a.push("--resume".into());
        }
        a
    };
    let o = Command::new(BIN).args(args("2", false)).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let first = std::fs::read_to_string(&curve).unwrap();
    let o = Command::new(BIN).args(args("4", true)).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let second = std::fs::read_to_string(&curve).unwrap();
    assert!(second.starts_with(&first), "the resumed run rewrote the curve:\n{first}\n---\n{second}");
    let iterations: Vec<&str> = second.lines().skip(1).map(|l| l.split(',').next().unwrap()).collect();
    assert_eq!(iterations, ["1", "1", "1", "1", "2", "2", "2", "2", "3", "3", "3", "3", "4", "4", "4", "4"]);
}
