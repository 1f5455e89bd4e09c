use super::*;
use structlearn::StructuredModel;

#[test]
fn folders_that_are_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("models");
    std::fs::write(&file, b"").unwrap();
    for target in [file.clone(), file.join("checkpoints")] {
        let err = create_folder(&target).unwrap_err().to_string();
        assert!(err.contains(&file.display().to_string()) && err.contains("is a file"), "{err}");
    }
    create_folder(&dir.path().join("a/b")).unwrap();
    assert!(dir.path().join("a/b").is_dir());
}

/// A small model of cell `unary`/`pairwise` (each type's model fitted by
/// that class's oracle on a tiny problem), saved where the cell's model lives.
fn write_model(dir: &Path, seed: u64, unary: &str, pairwise: &str) {
    let fit = |kind: &str| {
        let x = [0.0, 1.0, 2.0, 3.0];
        let features = oracles::Features::new(&x, 4, 1).unwrap();
        let (labels, bias) = ([0, 0, 1, 1], [0.0; 8]);
        let problem = oracles::Problem::new(features, &labels, &bias, 2, None).unwrap();
        structlearn::oracle_config::oracle_from_json(&serde_json::json!({ "kind": kind }))
            .unwrap()
            .fit(&problem, None, oracles::FitContext { seed: 0 })
            .unwrap()
    };
    let types = ["unary", "pairwise"]
        .map(|t| structlearn::FactorTypeInfo { classes: 2, ..structlearn::FactorTypeInfo::new(t, 1) });
    let model = StructuredModel::new(types.to_vec(), vec![1.0, 1.0], vec![fit(unary), fit(pairwise)]).unwrap();
    std::fs::create_dir_all(dir.join("models")).unwrap();
    model.save(&model_path(dir, seed, unary, pairwise)).unwrap();
}

/// `merge_cells` as a run with models merges: copying models, no per-class rows.
fn merge_models(
    dir: &Path,
    out: &Path,
    preset: &serde_json::Value,
    seeds: &[u64],
    cells: &[(String, String)],
    done: &mut Vec<CellResult>,
) -> Result<()> {
    let into = MergeInto { experiment: "quick", out, preset, seeds, cells, class_names: None, models: true };
    merge_cells(dir, &into, done, &mut Carried::default())
}

/// What `--merge` into `out` needs for seed 0 of `cells` of the "quick" experiment.
fn quick_into<'a>(
    out: &'a Path,
    preset: &'a serde_json::Value,
    cells: &'a [(String, String)],
    class_names: Option<&'a [String]>,
    models: bool,
) -> MergeInto<'a> {
    MergeInto { experiment: "quick", out, preset, seeds: &[0], cells, class_names, models }
}

pub(crate) fn opts() -> Options {
    Options {
        scale: Scale::Quick,
        out: None,
        seeds: 1,
        first_seed: 0,
        cells: Vec::new(),
        iterations: None,
        resume: true,
        save_data: false,
        predict_iterations: None,
        train_error_every: None,
        data_dir: None,
        cache_dir: None,
        no_cache: false,
        verbosity: Verbosity::Quiet,
        merge: Vec::new(),
        results_only: false,
        jobs: Some(1),
    }
}

/// Cells trained two at a time give the outputs of one at a time: the
/// same models, results, curves and table, in the same order.
#[test]
fn cells_in_parallel_give_the_outputs_of_cells_in_turn() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for (dir, jobs) in dirs.iter().zip([1, 2]) {
        let o = Options {
            out: Some(dir.path().to_path_buf()),
            cells: ["linear/linear", "zero/zero", "constant/mlp"].map(String::from).to_vec(),
            iterations: Some(2),
            resume: false,
            jobs: Some(jobs),
            ..opts()
        };
        reproduce(&crate::denoising::Denoising::new(&o), &o).unwrap();
    }
    let read = |d: &tempfile::TempDir, f: &str| std::fs::read_to_string(d.path().join(f)).unwrap();
    // Every field but the times (seconds, elapsed, peak memory).
    let fields = |text: String, keep: usize| -> Vec<String> {
        text.lines().map(|l| l.split(',').take(keep).collect::<Vec<_>>().join(",")).collect()
    };
    assert_eq!(fields(read(&dirs[0], "results.csv"), 4), fields(read(&dirs[1], "results.csv"), 4));
    assert_eq!(fields(read(&dirs[0], "curves.csv"), 7), fields(read(&dirs[1], "curves.csv"), 7));
    assert_eq!(read(&dirs[0], "table.md"), read(&dirs[1], "table.md"));
    let cells: Vec<String> = fields(read(&dirs[1], "results_by_seed.csv"), 3).into_iter().skip(1).collect();
    assert_eq!(cells, ["0,linear,linear", "0,zero,zero", "0,constant,mlp"]);
    for cell in ["linear-linear", "zero-zero", "constant-mlp"] {
        let model = |d: &tempfile::TempDir| std::fs::read(d.path().join(format!("models/seed0-{cell}.slm"))).unwrap();
        assert_eq!(model(&dirs[0]), model(&dirs[1]), "{cell}");
    }
}

#[test]
fn run_json_records_the_typed_command() {
    let args = ["/x/target/debug/xtask", "reproduce", "--quick", "--out", "my dir"].map(String::from);
    assert_eq!(typed_command(args), "cargo xtask reproduce --quick --out 'my dir'");
}

/// `commit_of` names the checkout's `HEAD`, marks changed tracked files
/// `-dirty`, and is `None` outside a checkout, whatever the working directory.
#[test]
fn the_commit_is_that_of_the_checkout_asked_about() {
    let git = |dir: &Path, args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
    };
    let outside = tempfile::tempdir().unwrap();
    if git(outside.path(), &["--version"]).is_none() {
        eprintln!("skipped: no git");
        return;
    }
    // (Unless the temporary directory is itself inside a checkout.)
    if git(outside.path(), &["rev-parse", "--git-dir"]).is_none() {
        assert_eq!(commit_of(outside.path()), None, "not a checkout");
    }
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    git(r, &["init", "-q"]).unwrap();
    std::fs::write(r.join("a.txt"), "1").unwrap();
    git(r, &["add", "a.txt"]).unwrap();
    git(r, &["commit", "-q", "-m", "one"]).unwrap();
    let head = String::from_utf8(git(r, &["rev-parse", "--short", "HEAD"]).unwrap().stdout).unwrap();
    assert_eq!(commit_of(r).as_deref(), Some(head.trim()));
    std::fs::write(r.join("a.txt"), "2").unwrap();
    assert_eq!(commit_of(r), Some(format!("{}-dirty", head.trim())));
    // Untracked files do not make it dirty.
    std::fs::write(r.join("a.txt"), "1").unwrap();
    std::fs::write(r.join("b.txt"), "new").unwrap();
    assert_eq!(commit_of(r).as_deref(), Some(head.trim()));
}

#[test]
fn resuming_a_finished_folder_keeps_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let quick = serde_json::json!({ "name": "quick" });
    let o = opts();
    RunInfo { preset: &quick, opts: &o, commit: Some("abc"), results_only: &[] }
        .write(dir.path(), &[], 42.5, false)
        .unwrap();
    assert_eq!(previous_seconds(dir.path()), 42.5);
    assert_eq!(previous_seconds(&dir.path().join("missing")), 0.0);
}

#[test]
fn resume_refuses_another_preset_and_accepts_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let quick = serde_json::json!({ "name": "quick", "learning_iterations": 5 });
    // No run.json yet: nothing to compare with.
    check_same_preset(dir.path(), &quick).unwrap();
    let o = opts();
    RunInfo { preset: &quick, opts: &o, commit: Some("abc"), results_only: &[] }
        .write(dir.path(), &[], 0.0, true)
        .unwrap();
    check_same_preset(dir.path(), &quick).unwrap();
    // The same number written as an integer or a float is the same setting.
    check_same_preset(dir.path(), &serde_json::json!({ "name": "quick", "learning_iterations": 5.0 })).unwrap();
    let longer = serde_json::json!({ "name": "quick", "learning_iterations": 6 });
    let err = check_same_preset(dir.path(), &longer).unwrap_err().to_string();
    assert!(err.contains("--resume") && err.contains("learning_iterations"), "{err}");
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("run.json")).unwrap()).unwrap();
    assert_eq!(info["finished"], false);
    assert_eq!(info["commit"], "abc");
    std::fs::write(dir.path().join("run.json"), "not json").unwrap();
    assert!(check_same_preset(dir.path(), &quick).is_err());
}

#[test]
fn curves_name_the_rejected_fits_of_each_iteration_and_read_older_files() {
    let record = |iteration: usize, phase: &str, factor_type: Option<&str>, rejected: Option<bool>, eval: bool| {
        structlearn::Record {
            iteration,
            step: 0,
            phase: phase.into(),
            factor_type: factor_type.map(str::to_string),
            objective: 10.0 - iteration as f64,
            oracle_loss: None,
            rejected,
            max_violation: None,
            // Iteration 2 evaluates the test set alone.
            train_error: (eval && iteration != 2).then_some(0.5),
            validation_error: eval.then_some(0.6),
            step_seconds: 1.0,
            elapsed_seconds: iteration as f64,
        }
    };
    let history = [
        record(1, "fit", Some("unary"), Some(false), false),
        record(1, "fit", Some("pairwise"), Some(true), false),
        record(1, "message-passing", None, None, true),
        record(2, "fit", Some("unary"), Some(true), false),
        record(2, "fit", Some("pairwise"), Some(true), false),
        record(2, "message-passing", None, None, true),
        record(3, "fit", Some("unary"), Some(false), false),
        record(3, "message-passing", None, None, true),
    ];
    let curve = CurvePoint::from_history(&history);
    let rejected: Vec<String> = curve.iter().map(CurvePoint::rejected_field).collect();
    assert_eq!(rejected, ["pairwise", "unary;pairwise", ""]);
    assert_eq!(curve.iter().map(|c| c.iteration).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(curve.iter().map(|c| c.train_error).collect::<Vec<_>>(), [Some(0.5), None, Some(0.5)]);

    // What write_outputs writes reads back; older files have no rejected_fits or elapsed_seconds.
    let dir = tempfile::tempdir().unwrap();
    let cell = CellResult {
        seed: 0,
        unary: "linear".into(),
        pairwise: "linear".into(),
        train_error: 0.5,
        test_error: 0.6,
        seconds: 3.0,
        peak_rss_mib: 1.0,
        curve: curve.clone(),
    };
    std::fs::create_dir_all(dir.path().join("models")).unwrap();
    std::fs::write(model_path(dir.path(), 0, "linear", "linear"), b"model").unwrap();
    let mut csv = String::from(CURVES_HEADER);
    for c in &curve {
        csv.push_str(&c.csv_line(0, "linear", "linear"));
    }
    assert!(csv.contains("\n0,linear,linear,2,,0.6,"), "{csv}");
    // A cell of an older run beside it.
    csv.push_str("0,zero,zero,1,0.8,0.9,5.5,2.000\n0,zero,zero,2,0.8,0.9,5.5\n");
    std::fs::write(dir.path().join("curves.csv"), csv).unwrap();
    std::fs::write(
        dir.path().join("results_by_seed.csv"),
        "seed,unary,pairwise,train_error,test_error,seconds,peak_rss_mib\n0,linear,linear,0.5,0.6,3,1\n0,zero,zero,0.8,0.9,4\n",
    )
    .unwrap();
    std::fs::write(model_path(dir.path(), 0, "zero", "zero"), b"model").unwrap();
    let previous = read_previous(dir.path()).unwrap();
    assert_eq!(previous[0], cell);
    let old = &previous[1].curve;
    assert_eq!(old.len(), 2);
    assert_eq!((old[0].elapsed_seconds, old[0].rejected_fits.clone()), (2.0, None));
    assert!(old[1].elapsed_seconds.is_nan());
    assert_eq!(old[1].rejected_field(), "unknown");
}

#[test]
fn merged_cells_need_the_same_settings_for_the_kinds_they_use() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (
        // As recorded: without the key when no oracle has extra settings.
        serde_json::json!({ "name": "full" }),
        serde_json::json!({ "name": "full", "oracles": { "boosting": { "leaf_l2": 1.0 } } }),
    );
    let o = opts();
    RunInfo { preset: &old, opts: &o, commit: Some("abc"), results_only: &[] }
        .write(dir.path(), &[], 0.0, true)
        .unwrap();
    std::fs::write(
        dir.path().join("results_by_seed.csv"),
        "seed,unary,pairwise,train_error,test_error,seconds\n0,linear,linear,0.2,0.3,10\n0,boosting,boosting,0.3,0.3,10\n",
    )
    .unwrap();
    for cell in ["linear", "boosting"] {
        write_model(dir.path(), 0, cell, cell);
    }
    let out = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(out.path().join("models")).unwrap();
    let cell = |u: &str, p: &str| vec![(u.to_string(), p.to_string())];
    // linear/linear does not use the boosting setting that differs: merged.
    let mut done = Vec::new();
    merge_models(dir.path(), out.path(), &new, &[0], &cell("linear", "linear"), &mut done).unwrap();
    assert_eq!(done.len(), 1);
    assert!(model_path(out.path(), 0, "linear", "linear").is_file());
    // boosting/boosting does: refused, naming the cell.
    let mut done = Vec::new();
    let err = merge_models(dir.path(), out.path(), &new, &[0], &cell("boosting", "boosting"), &mut done).unwrap_err();
    assert!(err.to_string().contains("boosting/boosting") && done.is_empty(), "{err}");
    // The same settings: merged.
    merge_models(dir.path(), out.path(), &old, &[0], &cell("boosting", "boosting"), &mut done).unwrap();
    assert_eq!(done.len(), 1);
}

#[test]
fn cell_filters_are_checked() {
    assert_eq!(selected_cells(&[]).unwrap().len(), 25);
    assert_eq!(selected_cells(&["linear/mlp".into()]).unwrap(), vec![("linear".into(), "mlp".into())]);
    assert!(selected_cells(&["linear".into()]).is_err());
    assert!(selected_cells(&["linear/svm".into()]).is_err());
}

/// A cell given twice runs once (it used to train twice and write two
/// rows, which the table showed as a spread over one seed).
#[test]
fn a_repeated_cell_runs_once() {
    let cells = selected_cells(&["zero/zero", "linear/mlp", "zero/zero"].map(String::from)).unwrap();
    let pair = |u: &str, p: &str| (u.to_string(), p.to_string());
    assert_eq!(cells, vec![pair("zero", "zero"), pair("linear", "mlp")]);
}

/// Seeds past u64::MAX are refused instead of wrapping around to seed 0.
#[test]
fn seeds_past_the_largest_are_refused() {
    assert_eq!(seed_list(5, 3).unwrap(), [5, 6, 7]);
    assert_eq!(seed_list(u64::MAX, 1).unwrap(), [u64::MAX]);
    assert_eq!(seed_list(u64::MAX - 1, 2).unwrap(), [u64::MAX - 1, u64::MAX]);
    let err = seed_list(u64::MAX, 2).unwrap_err().to_string();
    assert!(
        err.contains("--seed 18446744073709551615 with --seeds 2") && err.contains("--seed 18446744073709551614"),
        "{err}"
    );
}

/// The header and a good line of `results_by_seed.csv`.
const GOOD_RESULTS: &str =
    "seed,unary,pairwise,train_error,test_error,seconds,peak_rss_mib\n0,linear,linear,0.5,0.6,3,1\n";

/// `read_previous` of a folder whose `results_by_seed.csv` is `results`
/// (with a model for every cell), as an error message.
fn previous_error(results: &str, curves: Option<&str>) -> String {
    let dir = tempfile::tempdir().unwrap();
    for (u, p) in [("linear", "linear"), ("zero", "zero")] {
        write_model(dir.path(), 0, u, p);
    }
    std::fs::write(dir.path().join("results_by_seed.csv"), results).unwrap();
    if let Some(curves) = curves {
        std::fs::write(dir.path().join("curves.csv"), curves).unwrap();
    }
    let err = read_previous(dir.path()).expect_err(results).to_string();
    let file =
        if curves.is_some() && !err.contains("results_by_seed.csv") { "curves.csv" } else { "results_by_seed.csv" };
    assert!(err.starts_with(&dir.path().join(file).display().to_string()), "{err}");
    err
}

/// Values read back for --resume and --merge are checked: parse errors
/// and values out of range name the file, the line and the field, and a
/// cell twice is refused (before, NaN, inf, negative errors and
/// duplicate rows reached the tables, and parse errors were bare).
#[test]
fn previous_results_are_checked_naming_file_line_and_field() {
    for (line, says) in [
        ("0,zero,zero,abc0.31,0.3,1,1", "line 3, field `train_error`: `abc0.31` is not a number"),
        ("x0,zero,zero,0.3,0.3,1,1", "line 3, field `seed`: `x0` is not a seed"),
        ("-1,zero,zero,0.3,0.3,1,1", "line 3, field `seed`"),
        ("0,zero,svm,0.3,0.3,1,1", "line 3, field `pairwise`: `svm` is not a class"),
        ("0,zero,zero,NaN,0.3,1,1", "line 3, field `train_error`: `NaN` is not a finite number"),
        ("0,zero,zero,0.3,inf,1,1", "line 3, field `test_error`: `inf` is not a finite number"),
        ("0,zero,zero,5.3,0.3,1,1", "line 3, field `train_error`: 5.3 is not in [0, 1]"),
        ("0,zero,zero,0.3,-7.3,1,1", "line 3, field `test_error`: -7.3 is not in [0, 1]"),
        ("0,zero,zero,0.3,0.3,-2,1", "line 3, field `seconds`: -2 is not at least 0"),
        ("0,zero,zero,0.3,0.3,1,-1", "line 3, field `peak_rss_mib`: -1 is not at least 0"),
        ("0,zero,zero,0.3", "line 3: malformed line"),
        ("0,linear,linear,0.9,0.9,3,1", "line 3 repeats seed 0, cell linear/linear of line 2"),
    ] {
        let err = previous_error(&format!("{GOOD_RESULTS}{line}\n"), None);
        assert!(err.contains(says), "{line}: {err}");
    }
    // Long or binary values are shortened and escaped.
    let err = previous_error(&format!("{GOOD_RESULTS}0,zero,zero,{}\u{1},0.3,1,1\n", "7".repeat(1000)), None);
    assert!(err.len() < 400 && err.contains('…'), "{err}");
    let err = previous_error("seed,unary\n", None);
    assert!(err.contains("line 1") && err.contains("header"), "{err}");
}

/// Only a missing `results_by_seed.csv` means "no results"; a file that
/// cannot be read is an error naming it (before, it was taken for no
/// results and the finished cells were trained again and overwritten).
#[test]
fn an_unreadable_results_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    assert!(read_previous(dir.path()).unwrap().is_empty());
    let results = dir.path().join("results_by_seed.csv");
    std::fs::write(&results, [GOOD_RESULTS.as_bytes(), b"\xff\xfe\n"].concat()).unwrap();
    let err = read_previous(dir.path()).unwrap_err().to_string();
    assert!(err.contains("results_by_seed.csv: line 3 is not UTF-8"), "{err}");
    std::fs::remove_file(&results).unwrap();
    std::fs::create_dir(&results).unwrap();
    let err = read_previous(dir.path()).unwrap_err().to_string();
    assert!(err.contains("results_by_seed.csv: is a folder, not a file"), "{err}");
    // The same for curves.csv and run.json.
    std::fs::remove_dir(&results).unwrap();
    std::fs::write(&results, GOOD_RESULTS).unwrap();
    std::fs::write(dir.path().join("curves.csv"), b"\xff").unwrap();
    let err = read_previous(dir.path()).unwrap_err().to_string();
    assert!(err.contains("curves.csv: line 1 is not UTF-8"), "{err}");
    std::fs::create_dir(dir.path().join("run.json")).unwrap();
    let err = recorded_preset(dir.path()).unwrap_err().to_string();
    assert!(err.contains("run.json: is a folder, not a file"), "{err}");
}

/// Malformed `curves.csv` lines are errors naming the file and the line
/// (before, they were dropped, and the rewritten file lost them).
#[test]
fn malformed_curve_lines_are_refused() {
    let results = format!("{GOOD_RESULTS}0,zero,zero,0.3,0.3,1,1\n");
    let header = CURVES_HEADER;
    for (line, says) in [
        ("0,zero,zero,one,0.5,0.6,2.0,1.000,", "line 3, field `iteration`: `one` is not a learning iteration"),
        ("0,zero,zero,0,0.5,0.6,2.0,1.000,", "line 3, field `iteration`: 0 is not a learning iteration"),
        ("0,zero,zero,2,x,0.6,2.0,1.000,", "line 3, field `train_error`: `x` is not a number"),
        ("0,zero,zero,2,0.5,1.6,2.0,1.000,", "line 3, field `test_error`: 1.6 is not in [0, 1]"),
        ("0,zero,zero,2,0.5,0.6,inf,1.000,", "line 3, field `objective`: `inf` is not a finite number"),
        ("0,zero,zero,2,0.5,0.6,2.0,-1,", "line 3, field `elapsed_seconds`: -1 is not at least 0"),
        ("0,zero,zero,2", "line 3: malformed line"),
        ("0,zero,zera,2,0.5,0.6,2.0,1.000,", "line 3, field `pairwise`: `zera` is not a class"),
        ("0,linear,linear,1,0.5,0.6,2.0,1.000,", "line 3, field `iteration`: iteration 1 follows iteration 1"),
    ] {
        let curves = format!("{header}0,linear,linear,1,0.5,0.6,2.0,1.000,\n{line}\n");
        let err = previous_error(&results, Some(&curves));
        assert!(err.contains("curves.csv") && err.contains(says), "{line}: {err}");
    }
}

/// `--resume` refuses a folder with results or checkpoints but no
/// `run.json` (their preset cannot be checked), naming the folder;
/// before, their cells were adopted whatever preset made them.
#[test]
fn resume_refuses_results_without_run_json() {
    let dir = tempfile::tempdir().unwrap();
    let quick = serde_json::json!({ "name": "quick" });
    check_same_preset(dir.path(), &quick).unwrap();
    std::fs::write(dir.path().join("results_by_seed.csv"), GOOD_RESULTS).unwrap();
    let err = check_same_preset(dir.path(), &quick).unwrap_err().to_string();
    assert!(err.contains(&format!("{} holds results", dir.path().display())) && err.contains("no run.json"), "{err}");
    std::fs::remove_file(dir.path().join("results_by_seed.csv")).unwrap();
    std::fs::create_dir(dir.path().join("checkpoints")).unwrap();
    check_same_preset(dir.path(), &quick).unwrap();
    std::fs::write(checkpoint_path(dir.path(), 0, "zero", "zero"), b"x").unwrap();
    let err = check_same_preset(dir.path(), &quick).unwrap_err().to_string();
    assert!(err.contains("holds checkpoints"), "{err}");
}

/// `--merge` loads a model before copying it: a corrupt model, or one of
/// another cell, is refused naming the source file (before, it was copied
/// and the later error named the copy).
#[test]
fn merge_checks_models_before_copying_them() {
    let dir = tempfile::tempdir().unwrap();
    let quick = serde_json::json!({ "name": "quick" });
    let o = opts();
    RunInfo { preset: &quick, opts: &o, commit: Some("abc"), results_only: &[] }
        .write(dir.path(), &[], 0.0, true)
        .unwrap();
    std::fs::write(
        dir.path().join("results_by_seed.csv"),
        "seed,unary,pairwise,train_error,test_error,seconds\n0,zero,zero,0.3,0.3,1\n0,linear,linear,0.2,0.2,1\n",
    )
    .unwrap();
    write_model(dir.path(), 0, "zero", "zero");
    // The linear/linear file holds a zero/zero model.
    write_model(dir.path(), 0, "zero", "zero");
    std::fs::rename(model_path(dir.path(), 0, "zero", "zero"), model_path(dir.path(), 0, "linear", "linear")).unwrap();
    write_model(dir.path(), 0, "zero", "zero");
    let source = model_path(dir.path(), 0, "zero", "zero");
    let bytes = std::fs::read(&source).unwrap();
    std::fs::write(&source, &bytes[..30]).unwrap();
    let out = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(out.path().join("models")).unwrap();
    let cell = |u: &str, p: &str| vec![(u.to_string(), p.to_string())];
    let merge = |cells: &[(String, String)]| {
        merge_models(dir.path(), out.path(), &quick, &[0], cells, &mut Vec::new()).map_err(|e| format!("{e:#}"))
    };
    let err = merge(&cell("zero", "zero")).unwrap_err();
    assert!(err.contains(&source.display().to_string()) && err.contains("--merge"), "{err}");
    assert!(!model_path(out.path(), 0, "zero", "zero").exists(), "the corrupt model was copied");
    let err = merge(&cell("linear", "linear")).unwrap_err();
    assert!(err.contains("holds a model of kind `zero`, but cell linear/linear fits it with `linear`"), "{err}");
    // A good model is copied.
    write_model(dir.path(), 0, "zero", "zero");
    merge(&cell("zero", "zero")).unwrap();
    assert_eq!(std::fs::read(model_path(out.path(), 0, "zero", "zero")).unwrap(), std::fs::read(&source).unwrap());
}

/// The lines of `dir/file` with each line's first `keep` fields (every field
/// but the times when `keep` stops before them).
fn fields_of(dir: &Path, file: &str, keep: usize) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()));
    text.lines().map(|l| l.split(',').take(keep).collect::<Vec<_>>().join(",")).collect()
}

/// `table.md` up to the note computed from the data (which a results-only
/// merge does not load).
fn table_grid(dir: &Path) -> String {
    let table = std::fs::read_to_string(dir.join("table.md")).unwrap();
    table.split("Errors are those").next().unwrap().to_string()
}

/// Seeds 0 and 1 of two cells run in one folder, and seed 0 and seed 1 run
/// in two folders merged results-only (without their models, which are
/// deleted, and without loading data), give the same results, curves, table
/// (mean ± std over the two seeds) and error curves, but for the times.
#[test]
fn a_results_only_merge_gives_the_outputs_of_one_run() {
    let run = |dir: &Path, first_seed: u64, seeds: usize| {
        let o = Options {
            out: Some(dir.to_path_buf()),
            cells: ["linear/linear", "zero/zero"].map(String::from).to_vec(),
            iterations: Some(2),
            resume: false,
            first_seed,
            seeds,
            ..opts()
        };
        reproduce(&crate::denoising::Denoising::new(&o), &o).unwrap();
    };
    let (one, part0, part1) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run(one.path(), 0, 2);
    run(part0.path(), 0, 1);
    run(part1.path(), 1, 1);
    for part in [&part0, &part1] {
        std::fs::remove_dir_all(part.path().join("models")).unwrap();
    }
    let merged = tempfile::tempdir().unwrap();
    let out = merged.path().join("merged");
    let o = Options {
        out: Some(out.clone()),
        cells: ["linear/linear", "zero/zero"].map(String::from).to_vec(),
        iterations: Some(2),
        resume: false,
        seeds: 2,
        merge: vec![part1.path().to_path_buf(), part0.path().to_path_buf()],
        results_only: true,
        ..opts()
    };
    reproduce(&crate::denoising::Denoising::new(&o), &o).unwrap();
    assert_eq!(fields_of(one.path(), "results.csv", 4), fields_of(&out, "results.csv", 4));
    assert_eq!(fields_of(one.path(), "results_by_seed.csv", 5), fields_of(&out, "results_by_seed.csv", 5));
    assert_eq!(fields_of(one.path(), "curves.csv", 7), fields_of(&out, "curves.csv", 7));
    let grid = table_grid(&out);
    assert_eq!(table_grid(one.path()), grid);
    assert!(grid.contains(" ± ") && grid.contains("2 seed(s)"), "{grid}");
    assert!(out.join("fig2_error_curves.png").is_file());
    assert!(!out.join("models").exists() && !out.join("fig3_predictions.png").exists());
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(table.contains("Merged without their models") && table.contains("No data was loaded"), "{table}");
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(info["results_version"], RESULTS_VERSION);
    assert_eq!(info["results_only_cells"].as_array().unwrap().len(), 4);
    // A fresh folder only; a cell in no folder is named.
    let err = reproduce(&crate::denoising::Denoising::new(&o), &o).unwrap_err().to_string();
    assert!(err.contains("already holds a run"), "{err}");
    let o = Options { out: Some(merged.path().join("more")), seeds: 3, ..o };
    reproduce(&crate::denoising::Denoising::new(&o), &o).unwrap();
    let table = std::fs::read_to_string(merged.path().join("more/table.md")).unwrap();
    assert!(table.contains("Not in any merged folder: linear/linear (seed 2), zero/zero (seed 2)."), "{table}");

    // A run that trains a cell and merges the model-less ones: their results
    // are kept, the figures drawn from models leave them out, and --resume
    // without --merge keeps them instead of training them.
    let trained = merged.path().join("trained");
    let o = Options {
        out: Some(trained.clone()),
        cells: ["linear/linear", "zero/zero", "constant/constant"].map(String::from).to_vec(),
        iterations: Some(2),
        resume: false,
        merge: vec![part0.path().to_path_buf()],
        ..opts()
    };
    reproduce(&crate::denoising::Denoising::new(&o), &o).unwrap();
    let by_seed = fields_of(&trained, "results_by_seed.csv", 5);
    assert_eq!(by_seed[1..3], fields_of(one.path(), "results_by_seed.csv", 5)[1..3]);
    assert!(by_seed[3].starts_with("0,constant,constant,"), "{by_seed:?}");
    assert!(model_path(&trained, 0, "constant", "constant").is_file());
    assert!(!model_path(&trained, 0, "linear", "linear").exists());
    let table = std::fs::read_to_string(trained.join("table.md")).unwrap();
    assert!(table.contains("linear/linear (seed 0), zero/zero (seed 0) from"), "{table}");
    let o = Options { merge: Vec::new(), resume: true, ..o };
    reproduce(&crate::denoising::Denoising::new(&o), &o).unwrap();
    assert_eq!(fields_of(&trained, "results_by_seed.csv", 5), by_seed);
    assert!(!model_path(&trained, 0, "linear", "linear").exists(), "trained again");
}

/// A folder written with another preset (for the cell's kinds), a newer
/// results version, or a version that is not a number, is refused naming
/// the folder, the cell or the versions; `--resume` refuses any other
/// version; a folder without the field counts as version 1.
#[test]
fn merge_refuses_another_preset_or_results_version() {
    let dir = tempfile::tempdir().unwrap();
    let quick = serde_json::json!({ "name": "quick", "learning_iterations": 5 });
    let o = opts();
    RunInfo { preset: &quick, opts: &o, commit: None, results_only: &[] }.write(dir.path(), &[], 0.0, false).unwrap();
    std::fs::write(dir.path().join("results_by_seed.csv"), GOOD_RESULTS).unwrap();
    let out = tempfile::tempdir().unwrap();
    let cells = vec![("linear".to_string(), "linear".to_string())];
    let merge = |preset: &serde_json::Value| {
        let into = quick_into(out.path(), preset, &cells, None, false);
        let mut done = Vec::new();
        merge_cells(dir.path(), &into, &mut done, &mut Carried::default()).map(|()| done).map_err(|e| format!("{e:#}"))
    };
    assert_eq!(merge(&quick).unwrap().len(), 1);
    let longer = serde_json::json!({ "name": "quick", "learning_iterations": 6 });
    let err = merge(&longer).unwrap_err();
    assert!(err.contains(&dir.path().display().to_string()) && err.contains("cell linear/linear"), "{err}");
    assert!(err.contains("(learning_iterations: 5 → 6)"), "{err}");
    let run_json = dir.path().join("run.json");
    let mut info: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&run_json).unwrap()).unwrap();
    for (version, says) in [
        (serde_json::json!(RESULTS_VERSION + 1), format!("results version {}", RESULTS_VERSION + 1)),
        (serde_json::json!("1"), "not a whole number".to_string()),
    ] {
        info["results_version"] = version;
        std::fs::write(&run_json, info.to_string()).unwrap();
        let err = merge(&quick).unwrap_err();
        assert!(err.contains(&dir.path().display().to_string()) && err.contains(&says), "{err}");
        assert!(!err.contains("  "), "one space between words: {err}");
        // --resume checks it too.
        let err = check_same_preset(dir.path(), &quick).unwrap_err().to_string();
        assert!(err.contains("--resume"), "{err}");
    }
    // An older version: merged (linear/linear is changed by no later
    // version), but not resumed.
    info["results_version"] = serde_json::json!(1);
    std::fs::write(&run_json, info.to_string()).unwrap();
    assert_eq!(merge(&quick).unwrap().len(), 1);
    let err = format!("{:#}", check_same_preset(dir.path(), &quick).unwrap_err());
    assert!(err.contains("results version 1") && err.contains("--merge"), "{err}");
    assert!(!err.contains("  "), "one space between words: {err}");
    // Written before the field existed: version 1.
    info.as_object_mut().unwrap().remove("results_version");
    std::fs::write(&run_json, info.to_string()).unwrap();
    assert_eq!(UNRECORDED_RESULTS_VERSION, 1);
    assert_eq!(merge(&quick).unwrap().len(), 1);
}

/// `--merge` leaves out the cells of an older folder whose classes a later
/// results version changed ([`RESULTS_CHANGES`]) and takes the others;
/// the cells left out are trained again (they stay in the to-do list).
#[test]
fn merge_leaves_out_cells_a_later_results_version_changed() {
    let reproduced = |version, unary, pairwise| cell_reproduced(version, "quick", 0, unary, pairwise);
    assert!(!reproduced(1, "constant", "linear") && !reproduced(1, "zero", "constant"));
    assert!(reproduced(1, "linear", "mlp") && reproduced(2, "constant", "constant"));
    assert!(!reproduced(RESULTS_VERSION + 1, "zero", "zero"));
    // Version 3 moved the split of the image experiments' seeds from 1 on.
    assert!(cell_reproduced(2, "horses", 0, "linear", "linear") && cell_reproduced(2, "denoising", 1, "mlp", "mlp"));
    assert!(!cell_reproduced(2, "horses", 1, "linear", "linear") && !cell_reproduced(2, "stanford", 2, "zero", "zero"));
    assert!(cell_reproduced(3, "stanford", 2, "zero", "zero"));
    let dir = tempfile::tempdir().unwrap();
    let quick = serde_json::json!({ "name": "quick" });
    let o = opts();
    RunInfo { preset: &quick, opts: &o, commit: None, results_only: &[] }.write(dir.path(), &[], 0.0, false).unwrap();
    let run_json = dir.path().join("run.json");
    let mut info: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&run_json).unwrap()).unwrap();
    info["results_version"] = serde_json::json!(1);
    std::fs::write(&run_json, info.to_string()).unwrap();
    std::fs::write(
        dir.path().join("results_by_seed.csv"),
        format!("{GOOD_RESULTS}0,constant,constant,0.5,0.6,3,1\n0,linear,constant,0.5,0.6,3,1\n"),
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let cells: Vec<(String, String)> = [("linear", "linear"), ("constant", "constant"), ("linear", "constant")]
        .iter()
        .map(|(u, p)| (u.to_string(), p.to_string()))
        .collect();
    let into = quick_into(out.path(), &quick, &cells, None, false);
    let mut done = Vec::new();
    merge_cells(dir.path(), &into, &mut done, &mut Carried::default()).unwrap();
    let merged: Vec<(&str, &str)> = done.iter().map(|r| (r.unary.as_str(), r.pairwise.as_str())).collect();
    assert_eq!(merged, [("linear", "linear")]);

    // A horses folder of version 2: seed 1 was trained on seed 0's split.
    info["results_version"] = serde_json::json!(2);
    std::fs::write(&run_json, info.to_string()).unwrap();
    std::fs::write(dir.path().join("results_by_seed.csv"), format!("{GOOD_RESULTS}1,linear,linear,0.5,0.6,3,1\n"))
        .unwrap();
    for (experiment, seeds) in [("horses", vec![(0, true), (1, false)]), ("denoising", vec![(0, true), (1, true)])] {
        let into = MergeInto { experiment, seeds: &[0, 1], ..into };
        let mut done = Vec::new();
        merge_cells(dir.path(), &into, &mut done, &mut Carried::default()).unwrap();
        let merged: Vec<(u64, bool)> = [0, 1].iter().map(|&s| (s, done.iter().any(|r| r.seed == s))).collect();
        assert_eq!(merged, seeds, "{experiment}");
    }
}

/// A cell merged without its model keeps its per-class rows (those of its
/// folder's `per_class.csv`, for the run's first seed), whether the run
/// trains other cells or merges results only, and `--resume` keeps it;
/// malformed per-class lines are errors naming the file, line and field.
#[test]
fn a_results_only_cell_keeps_its_per_class_rows() {
    let names = vec!["sky".to_string(), "tree".to_string()];
    let dir = tempfile::tempdir().unwrap();
    let quick = serde_json::json!({ "name": "quick" });
    let o = opts();
    RunInfo { preset: &quick, opts: &o, commit: None, results_only: &[] }.write(dir.path(), &[], 0.0, false).unwrap();
    std::fs::write(dir.path().join("results_by_seed.csv"), format!("{GOOD_RESULTS}0,zero,zero,0.8,0.9,4,1\n")).unwrap();
    let per_class = "unary,pairwise,metric,sky,tree,mean,pixel_error\n\
                     linear,linear,accuracy,0.9000,nan,0.9000,0.6000\nlinear,linear,iou,0.5000,0.1000,0.3000,0.6000\n";
    std::fs::write(dir.path().join("per_class.csv"), per_class).unwrap();
    let cells = vec![("linear".to_string(), "linear".to_string()), ("zero".to_string(), "zero".to_string())];
    let out = tempfile::tempdir().unwrap();
    for models in [false, true] {
        let into = quick_into(out.path(), &quick, &cells, Some(&names), models);
        let (mut done, mut carried) = (Vec::new(), Carried::default());
        merge_cells(dir.path(), &into, &mut done, &mut carried).unwrap();
        assert_eq!(done.len(), 2);
        assert!(carried.is_results_only(0, "linear", "linear") && carried.is_results_only(0, "zero", "zero"));
        let predict = PredictOptions::default();
        let left_out = write_per_class::<datasets::denoising::DenoisingData>(
            out.path(),
            &done,
            0,
            None,
            &names,
            &predict,
            &carried,
        )
        .unwrap();
        assert_eq!(left_out, ["zero/zero"]);
        assert_eq!(std::fs::read_to_string(out.path().join("per_class.csv")).unwrap(), per_class);
        assert!(carried.note(true).contains("linear/linear (seed 0), zero/zero (seed 0) from"));
        // --resume of the merged folder keeps both cells and the rows.
        let merged = tempfile::tempdir().unwrap();
        std::fs::copy(out.path().join("per_class.csv"), merged.path().join("per_class.csv")).unwrap();
        std::fs::copy(dir.path().join("results_by_seed.csv"), merged.path().join("results_by_seed.csv")).unwrap();
        RunInfo { preset: &quick, opts: &o, commit: None, results_only: &carried.results_only }
            .write(merged.path(), &done, 0.0, false)
            .unwrap();
        let mut again = Carried::default();
        let resumed = resumed_cells(merged.path(), 0, Some(&names), &mut again).unwrap();
        assert_eq!(resumed, done);
        assert_eq!(again.per_class, carried.per_class);
        // Without the run.json list, a cell without its model is trained again.
        RunInfo { preset: &quick, opts: &o, commit: None, results_only: &[] }
            .write(merged.path(), &[], 0.0, false)
            .unwrap();
        assert!(resumed_cells(merged.path(), 0, Some(&names), &mut Carried::default()).unwrap().is_empty());
    }
    for (line, says) in [
        ("linear,linear,accuracy,0.9,1.5,0.9,0.6", "line 2, field `tree`: 1.5 is not in [0, 1]"),
        (
            "linear,linear,iou,0.9,0.5,0.9,0.6",
            "line 2, field `metric`: `iou` where cell linear/linear needs `accuracy`",
        ),
        ("linear,svm,accuracy,0.9,0.5,0.9,0.6", "line 2, field `pairwise`: `svm` is not a class"),
        ("linear,linear,accuracy,0.9", "line 2: malformed line"),
        (
            "linear,linear,accuracy,0.9,0.5,0.9,0.6\nlinear,linear,iou,0.9,0.5,0.9,0.6\nlinear,linear,iou,0.9,0.5,0.9,0.6",
            "line 4, field `metric`: `iou` where cell linear/linear needs no more lines",
        ),
    ] {
        std::fs::write(
            dir.path().join("per_class.csv"),
            format!("unary,pairwise,metric,sky,tree,mean,pixel_error\n{line}\n"),
        )
        .unwrap();
        let err = format!("{:#}", read_per_class(dir.path(), &names).unwrap_err());
        assert!(err.contains("per_class.csv") && err.contains(says), "{line}: {err}");
        assert!(!err.contains("trained again"), "{line}: {err}");
    }
    let err = format!("{:#}", read_per_class(dir.path(), &["sky".to_string()]).unwrap_err());
    assert!(err.contains("expected the header `unary,pairwise,metric,sky,mean,pixel_error`"), "{err}");
}
