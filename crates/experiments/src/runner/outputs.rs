//! The output folder: results and curve CSVs, tables, figures, per-class
//! scores, `run.json`, and reading back what a previous run wrote.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use reporting::plots::{self, CurveData};
use structlearn::files::write_atomic;
use structlearn::metrics::ConfusionMatrix;
use structlearn::{PredictOptions, StructuredModel};

use super::*;

/// The text of `path`, or `None` when there is no such file. Any other
/// failure (a folder, an unreadable file, bytes that are not UTF-8) is an
/// error naming the file: a damaged results file must never pass for "no
/// results", or `--resume` would train its finished cells again and
/// overwrite them.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) if path.is_dir() => bail!("{}: is a folder, not a file", path.display()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    String::from_utf8(bytes).map(Some).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..valid].iter().filter(|&&b| b == b'\n').count() + 1;
        anyhow::anyhow!(
            "{}: line {line} is not UTF-8 text (byte {valid}); the file is damaged: restore it, or move the \
             folder aside to start afresh",
            path.display()
        )
    })
}

/// A value of a CSV field as shown in an error: at most 40 characters, with
/// control characters escaped.
pub(crate) fn shown(value: &str) -> String {
    let mut s: String = value.chars().take(40).flat_map(char::escape_debug).collect();
    if value.chars().count() > 40 {
        s.push('…');
    }
    s
}

/// One line of a CSV file the runner wrote, for errors naming the file, the
/// line and the field.
pub(crate) struct CsvLine<'a> {
    pub(crate) file: &'a Path,
    pub(crate) number: usize,
    pub(crate) fields: Vec<&'a str>,
    /// What to do about a bad field, ending its errors.
    pub(crate) fix: &'static str,
}

/// [`CsvLine::fix`] of the results files that `--resume` reads back.
pub(crate) const FIX_RESULTS_LINE: &str = "fix or delete the line (a deleted cell is trained again)";

impl<'a> CsvLine<'a> {
    /// The data lines of `text` (read from `file`), after a header that must
    /// start with `header`.
    pub(crate) fn all(file: &'a Path, text: &'a str, header: &str) -> Result<Vec<Self>> {
        let mut lines = text.lines();
        match lines.next() {
            Some(first) if first.starts_with(header) => {}
            first => bail!(
                "{}: line 1 is `{}`, expected the header `{header}…`; the file is damaged: restore it, or move the \
                 folder aside to start afresh",
                file.display(),
                shown(first.unwrap_or_default())
            ),
        }
        Ok(lines
            .enumerate()
            .map(|(i, l)| CsvLine { file, number: i + 2, fields: l.split(',').collect(), fix: FIX_RESULTS_LINE })
            .collect())
    }

    /// An error about field `name` of this line.
    pub(crate) fn error(&self, name: &str, why: impl std::fmt::Display) -> anyhow::Error {
        anyhow::anyhow!("{}: line {}, field `{name}`: {why}; {}", self.file.display(), self.number, self.fix)
    }

    /// Field `index`, called `name`, parsed.
    pub(crate) fn parse<T: std::str::FromStr>(&self, index: usize, name: &str, what: &str) -> Result<T> {
        let value = self.fields[index];
        value.parse().map_err(|_| self.error(name, format_args!("`{}` is not {what}", shown(value))))
    }

    /// Field `index`, called `name`: a number in `low..=high` (finite).
    pub(crate) fn number(&self, index: usize, name: &str, low: f64, high: f64) -> Result<f64> {
        let v: f64 = self.parse(index, name, "a number")?;
        if !v.is_finite() {
            return Err(self.error(name, format_args!("`{}` is not a finite number", shown(self.fields[index]))));
        }
        if !(low..=high).contains(&v) {
            let range = if high == f64::MAX { format!("at least {low}") } else { format!("in [{low}, {high}]") };
            return Err(self.error(name, format_args!("{v} is not {range}")));
        }
        Ok(v)
    }

    /// The `seed,unary,pairwise` fields that start every line.
    pub(crate) fn cell(&self) -> Result<(u64, String, String)> {
        let seed = self.parse(0, "seed", "a seed (a whole number from 0)")?;
        for (i, name) in [(1, "unary"), (2, "pairwise")] {
            if !CLASSES.contains(&self.fields[i]) {
                return Err(self
                    .error(name, format_args!("`{}` is not a class ({})", shown(self.fields[i]), CLASSES.join(", "))));
            }
        }
        Ok((seed, self.fields[1].to_string(), self.fields[2].to_string()))
    }
}

/// The header of `results_by_seed.csv` (without `peak_rss_mib`, which older runs lack).
pub(crate) const RESULTS_HEADER: &str = "seed,unary,pairwise,train_error,test_error,seconds";

/// Cells of an earlier (interrupted) run, from `results_by_seed.csv` and
/// `curves.csv` (those whose model is in `models/`). No file is no cells; a
/// file that cannot be read, or a line that is malformed or out of range
/// (errors outside [0, 1], negative or infinite seconds, a cell twice) is an
/// error naming the file, the line and the field.
/// Creates `dir` and its parents if needed; an error naming the path when it,
/// or a parent, is a file (the OS says only "File exists").
pub fn create_folder(dir: &Path) -> Result<()> {
    if let Some(file) = dir.ancestors().find(|a| a.is_file()) {
        bail!("{}: is a file, but {} needs it to be a folder; move it aside", file.display(), dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating the folder {}", dir.display()))
}

#[cfg(test)]
pub(crate) fn read_previous(out: &Path) -> Result<Vec<CellResult>> {
    Ok(read_results(out)?.into_iter().filter_map(|(r, model)| model.then_some(r)).collect())
}

/// Every cell of `out/results_by_seed.csv` with its curve (checked as
/// [`read_previous`] checks them), and whether its model is in `models/`.
pub(crate) fn read_results(out: &Path) -> Result<Vec<(CellResult, bool)>> {
    let results_path = out.join("results_by_seed.csv");
    let Some(text) = read_optional(&results_path)? else {
        return Ok(Vec::new());
    };
    let mut curves = read_curves(out)?;
    let mut results: Vec<(CellResult, bool)> = Vec::new();
    let mut lines_of: BTreeMap<(u64, String, String), usize> = BTreeMap::new();
    for line in CsvLine::all(&results_path, &text, RESULTS_HEADER)? {
        if line.fields.len() != 6 && line.fields.len() != 7 {
            bail!(
                "{}: line {}: malformed line `{}` ({} fields, expected {RESULTS_HEADER},peak_rss_mib); fix or \
                 delete the line (a deleted cell is trained again)",
                results_path.display(),
                line.number,
                shown(&line.fields.join(",")),
                line.fields.len()
            );
        }
        let key = line.cell()?;
        if let Some(first) = lines_of.insert(key.clone(), line.number) {
            bail!(
                "{}: line {} repeats seed {}, cell {}/{} of line {first}; delete one of the two lines",
                results_path.display(),
                line.number,
                key.0,
                key.1,
                key.2
            );
        }
        let train_error = line.number(3, "train_error", 0.0, 1.0)?;
        let test_error = line.number(4, "test_error", 0.0, 1.0)?;
        let seconds = line.number(5, "seconds", 0.0, f64::MAX)?;
        let peak_rss_mib = if line.fields.len() == 7 { line.number(6, "peak_rss_mib", 0.0, f64::MAX)? } else { 0.0 };
        let (seed, unary, pairwise) = key;
        let model = model_path(out, seed, &unary, &pairwise).exists();
        let curve = curves.remove(&(seed, unary.clone(), pairwise.clone())).unwrap_or_default();
        results
            .push((CellResult { seed, unary, pairwise, train_error, test_error, seconds, peak_rss_mib, curve }, model));
    }
    Ok(results)
}

/// The points of every cell in `out/curves.csv` (none without the file), in
/// the file's order; malformed lines are errors naming the file and the line.
pub(crate) fn read_curves(out: &Path) -> Result<BTreeMap<(u64, String, String), Vec<CurvePoint>>> {
    let path = out.join("curves.csv");
    let mut curves: BTreeMap<(u64, String, String), Vec<CurvePoint>> = BTreeMap::new();
    let Some(text) = read_optional(&path)? else {
        return Ok(curves);
    };
    for line in CsvLine::all(&path, &text, "seed,unary,pairwise,iteration,train_error,test_error,objective")? {
        if !(7..=9).contains(&line.fields.len()) {
            bail!(
                "{}: line {}: malformed line `{}` ({} fields, expected 7 to 9: {}); fix or delete the line",
                path.display(),
                line.number,
                shown(&line.fields.join(",")),
                line.fields.len(),
                CURVES_HEADER.trim_end()
            );
        }
        let key = line.cell()?;
        let point = CurvePoint::parse(&line)?;
        let points = curves.entry(key).or_default();
        if let Some(last) = points.last()
            && last.iteration >= point.iteration
        {
            return Err(line.error(
                "iteration",
                format_args!(
                    "iteration {} follows iteration {} of the same cell (each cell's iterations must increase)",
                    point.iteration, last.iteration
                ),
            ));
        }
        points.push(point);
    }
    Ok(curves)
}

/// Mean and sample standard deviation (0 for one value).
pub fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 { v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (m, var.sqrt())
}

/// Mean and standard deviation over seeds of one cell's errors.
pub(crate) struct CellStats {
    train: (f64, f64),
    test: (f64, f64),
    seeds: usize,
}

pub(crate) fn write_outputs<E: Experiment>(
    exp: &E,
    out: &Path,
    done: &[CellResult],
    seeds: &[u64],
    cells: &[(String, String)],
    data: &BTreeMap<u64, E::Data>,
    merge_note: &str,
) -> Result<()> {
    let mut by_seed = String::from("seed,unary,pairwise,train_error,test_error,seconds,peak_rss_mib\n");
    let mut curves = String::from(CURVES_HEADER);
    for r in done {
        let _ = writeln!(
            by_seed,
            "{},{},{},{},{},{:.3},{:.1}",
            r.seed, r.unary, r.pairwise, r.train_error, r.test_error, r.seconds, r.peak_rss_mib
        );
        for c in &r.curve {
            curves.push_str(&c.csv_line(r.seed, &r.unary, &r.pairwise));
        }
    }
    write_atomic(&out.join("results_by_seed.csv"), by_seed.as_bytes())?;
    write_atomic(&out.join("curves.csv"), curves.as_bytes())?;

    let mut results = String::from("unary,pairwise,train_error,test_error,seconds\n");
    let mut stats: BTreeMap<(usize, usize), CellStats> = BTreeMap::new();
    for (u, p) in cells {
        let rs: Vec<&CellResult> = done.iter().filter(|r| &r.unary == u && &r.pairwise == p).collect();
        if rs.is_empty() {
            continue;
        }
        let tr = mean_std(&rs.iter().map(|r| r.train_error).collect::<Vec<_>>());
        let te = mean_std(&rs.iter().map(|r| r.test_error).collect::<Vec<_>>());
        let secs = mean_std(&rs.iter().map(|r| r.seconds).collect::<Vec<_>>());
        let _ = writeln!(results, "{u},{p},{:.6},{:.6},{:.3}", tr.0, te.0, secs.0);
        let ui = CLASSES.iter().position(|c| c == u).unwrap_or(0);
        let pi = CLASSES.iter().position(|c| c == p).unwrap_or(0);
        stats.insert((ui, pi), CellStats { train: tr, test: te, seeds: rs.len() });
    }
    write_atomic(&out.join("results.csv"), results.as_bytes())?;

    let mut table = String::new();
    let spread = if seeds.len() > 1 { " mean ± std" } else { "" };
    let _ = writeln!(
        table,
        "{} (rows: unary class, columns: pairwise class); each cell: ours{spread} (paper, difference). {} seed(s).\n",
        exp.caption(),
        seeds.len()
    );
    let fmt = |(m, s): (f64, f64), n: usize| if n > 1 { format!("{m:.3} ± {s:.3}") } else { format!("{m:.3}") };
    let mut grid = |title: &str, paper: &PaperTable, pick: fn(&CellStats) -> (f64, f64)| {
        if !title.is_empty() {
            let _ = writeln!(table, "{title}\n");
        }
        let _ = writeln!(table, "| unary \\ pairwise | {} |", NAMES.join(" | "));
        let _ = writeln!(table, "|---|{}", "---|".repeat(NAMES.len()));
        for (ui, name) in NAMES.iter().enumerate() {
            let _ = write!(table, "| {name} |");
            for (pi, &paper) in paper[ui].iter().enumerate() {
                match stats.get(&(ui, pi)) {
                    Some(st) => {
                        let ms = pick(st);
                        let _ = write!(table, " {} ({paper:.3}, {:+.3}) |", fmt(ms, st.seeds), ms.0 - paper);
                    }
                    None => {
                        let _ = write!(table, " – |");
                    }
                }
            }
            let _ = writeln!(table);
        }
        let _ = writeln!(table);
    };
    match exp.paper_train() {
        Some(train) => {
            grid("**Test error**", exp.paper_test(), |s| s.test);
            grid("**Training error**", train, |s| s.train);
        }
        None => grid("", exp.paper_test(), |s| s.test),
    }
    let _ = writeln!(
        table,
        "Errors are those of the last learning iteration's evaluation, which is warm-started: it continues \
         message passing from the previous evaluation's messages. `structlearn eval` on a saved model \
         (models/) predicts from zero messages with its own --iterations budget; the two agree once message \
         passing has converged (eval reports how many examples reached its tolerance).\n"
    );
    let note = exp.table_note(data);
    if !note.is_empty() {
        let _ = writeln!(table, "{note}");
    }
    if !merge_note.is_empty() {
        if !note.is_empty() {
            table.push('\n');
        }
        let _ = writeln!(table, "{merge_note}");
    }
    write_atomic(&out.join("table.md"), format!("{}\n", table.trim_end()).as_bytes())?;
    plot_curves(out, done, seeds[0])?;
    Ok(())
}

pub(crate) fn plot_curves(out: &Path, done: &[CellResult], seed: u64) -> Result<()> {
    let names: Vec<String> = NAMES.iter().map(|s| s.to_string()).collect();
    let cells: Vec<Vec<CurveData>> = CLASSES
        .iter()
        .map(|u| {
            CLASSES
                .iter()
                .map(|pw| {
                    done.iter()
                        .find(|r| r.seed == seed && r.unary == *u && r.pairwise == *pw)
                        .map(|r| CurveData {
                            train: r.curve.iter().filter_map(|c| Some((c.iteration as f64, c.train_error?))).collect(),
                            test: r.curve.iter().map(|c| (c.iteration as f64, c.test_error)).collect(),
                        })
                        .unwrap_or_default()
                })
                .collect()
        })
        .collect();
    plots::plot_error_curves(&out.join("fig2_error_curves.png"), &names, &names, &cells)
}

/// The header line of `per_class.csv` for the class names `names`.
pub(crate) fn per_class_header(names: &[String]) -> String {
    let mut header = String::from("unary,pairwise,metric");
    for n in names {
        let _ = write!(header, ",{n}");
    }
    header.push_str(",mean,pixel_error\n");
    header
}

/// `per_class.csv`: per cell of `seed`, the test set's per-class accuracy and
/// IoU, mean class accuracy, mean IoU and pixel error, from a fresh prediction
/// (zero messages, `predict` budget ×10 to let strongly coupled models settle)
/// of the cell's model in `out/models` with `data`; for cells merged without
/// their model, the lines `carried` from their folder. Returns the cells left
/// out: results-only cells whose folder had no lines for them, and, without
/// `data` (`--results-only`), any other.
pub(crate) fn write_per_class<D: ExperimentData>(
    out: &Path,
    done: &[CellResult],
    seed: u64,
    data: Option<&D>,
    names: &[String],
    predict: &PredictOptions,
    carried: &Carried,
) -> Result<Vec<String>> {
    let registry = oracles::ModelRegistry::with_builtin();
    let predict = PredictOptions { iterations: predict.iterations * 10, ..*predict };
    let mut csv = per_class_header(names);
    let cell = |v: Option<f64>| v.map_or("nan".to_string(), |x| format!("{x:.4}"));
    let mut left_out = Vec::new();
    for r in done.iter().filter(|r| r.seed == seed) {
        if carried.is_results_only(seed, &r.unary, &r.pairwise) {
            match carried.per_class.get(&(r.unary.clone(), r.pairwise.clone())) {
                Some(lines) => lines.iter().for_each(|l| {
                    let _ = writeln!(csv, "{l}");
                }),
                None => left_out.push(format!("{}/{}", r.unary, r.pairwise)),
            }
            continue;
        }
        let Some(data) = data else {
            left_out.push(format!("{}/{}", r.unary, r.pairwise));
            continue;
        };
        let path = model_path(out, seed, &r.unary, &r.pairwise);
        let model = StructuredModel::load(&path, &registry)?;
        let predictions = model.predict(data.test(), &predict)?;
        let m = ConfusionMatrix::from_predictions(data.test(), &predictions)?;
        let error = m.error_rate();
        for (metric, values, mean) in
            [("accuracy", m.class_accuracy(), m.mean_class_accuracy()), ("iou", m.iou(), m.mean_iou())]
        {
            let _ = write!(csv, "{},{},{metric}", r.unary, r.pairwise);
            for v in values.iter().take(names.len()) {
                let _ = write!(csv, ",{}", cell(*v));
            }
            let _ = writeln!(csv, ",{},{error:.4}", cell(mean));
        }
    }
    write_atomic(&out.join("per_class.csv"), csv.as_bytes())?;
    Ok(left_out)
}

/// With `--resume`, refuses to mix cells trained under another preset (data,
/// learning iterations, prediction budget, oracle budgets) into one table.
/// A folder without `run.json` is accepted only when it holds no results and
/// no checkpoints: their preset cannot be checked.
pub fn check_same_preset(out: &Path, preset: &serde_json::Value) -> Result<()> {
    let Some(recorded) = recorded_preset(out)? else {
        let results = out.join("results_by_seed.csv");
        let checkpoints = std::fs::read_dir(out.join("checkpoints"))
            .map(|d| d.filter_map(|e| e.ok()).any(|e| e.path().extension().is_some_and(|x| x == "ckpt")))
            .unwrap_or(false);
        if results.exists() || checkpoints {
            bail!(
                "--resume: {} holds {} but no run.json, so the settings they were made with cannot be checked; \
                 rerun without --resume into another --out (or restore its run.json)",
                out.display(),
                if results.exists() { "results (results_by_seed.csv)" } else { "checkpoints (checkpoints/)" }
            );
        }
        return Ok(());
    };
    if let Some(info) = read_run_json(out)? {
        check_results_version(out, &info).context("--resume")?;
    }
    if !same_settings(&recorded, preset) {
        bail!(
            "--resume: {} was written with preset {}, this run's is {}; resume with the same options or use another --out",
            out.join("run.json").display(),
            if recorded.is_null() { "(none)".to_string() } else { recorded.to_string() },
            preset
        );
    }
    Ok(())
}

/// The preset recorded in `dir/run.json` (`Null` if it records none), or
/// `None` when there is no `run.json`; a `run.json` that cannot be read is an
/// error naming it.
pub(crate) fn recorded_preset(dir: &Path) -> Result<Option<serde_json::Value>> {
    Ok(read_run_json(dir)?.map(|info| info.get("preset").cloned().unwrap_or(serde_json::Value::Null)))
}

/// The paper's value of a cell (NaN for an unknown class name).
pub(crate) fn paper_error(paper: &PaperTable, unary: &str, pairwise: &str) -> f64 {
    let index = |c: &str| CLASSES.iter().position(|k| *k == c);
    match (index(unary), index(pairwise)) {
        (Some(u), Some(p)) => paper[u][p],
        _ => f64::NAN,
    }
}

/// Wall-clock seconds recorded in the folder's `run.json` (0 if none).
pub(crate) fn previous_seconds(out: &Path) -> f64 {
    std::fs::read_to_string(out.join("run.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("wall_clock_seconds")?.as_f64())
        .unwrap_or(0.0)
}

/// The command as a user types it (`cargo xtask reproduce --quick`), not the
/// machine-specific path of the xtask binary; arguments with spaces or shell
/// characters are single-quoted.
pub(crate) fn typed_command(args: impl IntoIterator<Item = String>) -> String {
    let quote = |a: String| {
        if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
            a
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    std::iter::once("cargo xtask".to_string()).chain(args.into_iter().skip(1).map(quote)).collect::<Vec<_>>().join(" ")
}

/// The short commit hash of the checkout this crate was built from, with
/// `-dirty` if tracked files differ from it: `HEAD` of the workspace the
/// binary's sources are in, whatever the working directory (a run started
/// from its output folder, outside the checkout, records it too; one started
/// inside another repository does not credit that one). `None` without git or
/// a checkout (a source tarball).
pub fn current_commit() -> Option<String> {
    commit_of(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")))
}

/// The short commit hash of `HEAD` of the git checkout at `dir`, with
/// `-dirty` if tracked files differ from it; `None` if `dir` is not in one.
pub(crate) fn commit_of(dir: &Path) -> Option<String> {
    let run = |args: &[&str]| {
        std::process::Command::new("git").arg("-C").arg(dir).args(args).output().ok().filter(|o| o.status.success())
    };
    let hash = String::from_utf8_lossy(&run(&["rev-parse", "--short", "HEAD"])?.stdout).trim().to_string();
    let dirty = run(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|o| !o.stdout.is_empty());
    Some(if dirty { format!("{hash}-dirty") } else { hash })
}

/// The contents of `run.json`.
#[derive(Clone, Copy)]
pub struct RunInfo<'a> {
    /// The preset's settings.
    pub preset: &'a serde_json::Value,
    /// The options.
    pub opts: &'a Options,
    /// The commit the run started from.
    pub commit: Option<&'a str>,
    /// Cells merged without their models, with the folders they came from.
    pub results_only: &'a [((u64, String, String), PathBuf)],
}

impl RunInfo<'_> {
    /// Writes `run.json` atomically with the finished cells' times and memory;
    /// `finished` is false while running and after an interruption.
    pub fn write(&self, out: &Path, done: &[CellResult], seconds: f64, interrupted: bool) -> Result<()> {
        let cells: Vec<serde_json::Value> = done
            .iter()
            .map(|r| {
                serde_json::json!({
                    "seed": r.seed, "unary": r.unary, "pairwise": r.pairwise,
                    "seconds": r.seconds, "peak_rss_mib": r.peak_rss_mib,
                    "seconds_per_learning_iteration": r.seconds / r.curve.len().max(1) as f64,
                })
            })
            .collect();
        let results_only: Vec<serde_json::Value> = self
            .results_only
            .iter()
            .map(|((seed, u, p), dir)| {
                serde_json::json!({ "seed": seed, "unary": u, "pairwise": p, "from": dir.display().to_string() })
            })
            .collect();
        let info = serde_json::json!({
            "command": typed_command(std::env::args()),
            "commit": self.commit,
            // RESULTS_VERSION: --merge and --resume refuse folders of another.
            "results_version": RESULTS_VERSION,
            // Cells merged without their models (--merge), none in models/.
            "results_only_cells": results_only,
            "preset": self.preset,
            "seeds": self.opts.seeds,
            "first_seed": self.opts.first_seed,
            "cells": self.opts.cells,
            "wall_clock_seconds": seconds,
            "threads": rayon::current_num_threads(),
            // Cells trained at once, each on threads / jobs threads (peak RSS is the process's).
            "jobs": self.opts.jobs,
            "peak_rss_mib": peak_rss_mib(),
            "cell_times": cells,
            "interrupted": interrupted,
            // false while the run is going on, and after an interruption or error.
            "finished": !interrupted,
        });
        write_atomic(&out.join("run.json"), serde_json::to_string_pretty(&info)?.as_bytes())?;
        Ok(())
    }
}
