//! `--merge`: taking finished cells from other output folders of the same preset.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use factor_graph::UNARY;

use structlearn::StructuredModel;
use structlearn::files::write_atomic;

use super::*;

/// A cell as (seed, unary, pairwise).
pub(crate) type CellKey = (u64, String, String);

/// What a run carries over from the folders its cells were merged from
/// without their models (results-only cells).
#[derive(Debug, Default)]
pub(crate) struct Carried {
    /// Cells taken without their model, and the folder each came from.
    pub(crate) results_only: Vec<(CellKey, PathBuf)>,
    /// The `per_class.csv` lines of results-only cells of the run's first
    /// seed, as their folder wrote them (accuracy, then IoU), by cell.
    pub(crate) per_class: BTreeMap<(String, String), Vec<String>>,
}

impl Carried {
    /// Whether cell `unary`/`pairwise` of `seed` was merged without its model.
    pub(crate) fn is_results_only(&self, seed: u64, unary: &str, pairwise: &str) -> bool {
        self.results_only.iter().any(|((s, u, p), _)| *s == seed && u == unary && p == pairwise)
    }

    /// The table's note on results-only cells (empty without any): which
    /// they are, where they came from, and what is missing for them.
    pub(crate) fn note(&self, per_class: bool) -> String {
        if self.results_only.is_empty() {
            return String::new();
        }
        let mut by_folder: BTreeMap<&Path, Vec<String>> = BTreeMap::new();
        for ((seed, u, p), dir) in &self.results_only {
            by_folder.entry(dir).or_default().push(format!("{u}/{p} (seed {seed})"));
        }
        let list: Vec<String> =
            by_folder.iter().map(|(dir, cells)| format!("{} from `{}`", cells.join(", "), dir.display())).collect();
        let mut note = format!(
            "Merged without their models (results only; errors, curves and times as their folders recorded them): \
             {}. Their models are not in models/, so figures drawn from models leave them out",
            list.join("; ")
        );
        if per_class {
            note.push_str(
                ", and their per_class.csv rows are copied from their folders' per_class.csv (cells whose folder \
                 has none are missing from it)",
            );
        }
        note.push('.');
        note
    }
}

/// Where and how `--merge` folders are merged.
pub(crate) struct MergeInto<'a> {
    /// The experiment ([`Experiment::name`]).
    pub(crate) experiment: &'a str,
    /// The output folder.
    pub(crate) out: &'a Path,
    /// This run's preset.
    pub(crate) preset: &'a serde_json::Value,
    /// This run's seeds (the first is the one `per_class.csv` reports).
    pub(crate) seeds: &'a [u64],
    /// This run's cells.
    pub(crate) cells: &'a [(String, String)],
    /// The experiment's class names (`per_class.csv`), if it reports them.
    pub(crate) class_names: Option<&'a [String]>,
    /// Copy the models of cells that have one (`false`: `--results-only`).
    pub(crate) models: bool,
}

/// Adds the finished cells of another run's folder `dir` that `done` lacks:
/// same results version ([`RESULTS_VERSION`]) and the same settings for the
/// cell (checked: [`preset_for_cell`], [`same_settings`]). A cell's model is
/// checked and copied into `into.out` when `into.models` and the folder has
/// it; otherwise the cell is merged results-only (its errors, curve and
/// time) into `carried`, with its `per_class.csv` lines when `dir` has them
/// for this run's first seed.
pub(crate) fn merge_cells(
    dir: &Path,
    into: &MergeInto<'_>,
    done: &mut Vec<CellResult>,
    carried: &mut Carried,
) -> Result<()> {
    let context = || format!("--merge {}", dir.display());
    let Some(info) = read_run_json(dir).with_context(context)? else {
        bail!("--merge {}: no run.json there (not an output folder of `reproduce`)", dir.display());
    };
    let version = results_version(dir, &info).with_context(context)?;
    let theirs = info.get("preset").cloned().unwrap_or(serde_json::Value::Null);
    // per_class.csv describes the first seed of the run that wrote it.
    let their_first_seed = info.get("first_seed").and_then(serde_json::Value::as_u64);
    let mut per_class = None;
    let mut outdated = Vec::new();
    let before = done.len();
    for (r, has_model) in read_results(dir).with_context(context)? {
        let wanted = into.seeds.contains(&r.seed) && into.cells.contains(&(r.unary.clone(), r.pairwise.clone()));
        let have = done.iter().any(|d| d.seed == r.seed && d.unary == r.unary && d.pairwise == r.pairwise);
        if !wanted || have {
            continue;
        }
        if !cell_reproduced(version, into.experiment, r.seed, &r.unary, &r.pairwise) {
            outdated.push(format!("{}/{} (seed {})", r.unary, r.pairwise, r.seed));
            continue;
        }
        let (mine, other) =
            (preset_for_cell(into.preset, &r.unary, &r.pairwise), preset_for_cell(&theirs, &r.unary, &r.pairwise));
        if !same_settings(&mine, &other) {
            bail!(
                "--merge {}: cell {}/{} was trained with other settings ({}); its preset is {other}, this run's is \
                 {mine}; merge only cells of the same settings",
                dir.display(),
                r.unary,
                r.pairwise,
                setting_differences(&other, &mine, "").join(", ")
            );
        }
        let target = model_path(into.out, r.seed, &r.unary, &r.pairwise);
        if into.models && has_model {
            let source = model_path(dir, r.seed, &r.unary, &r.pairwise);
            let bytes = check_model(&source, &r.unary, &r.pairwise).with_context(|| {
                format!("--merge {}: cell {}/{}, seed {}", dir.display(), r.unary, r.pairwise, r.seed)
            })?;
            write_atomic(&target, &bytes)?;
        } else {
            if into.models && target.exists() {
                bail!(
                    "--merge {}: cell {}/{}, seed {} has no model there, but {} holds one (of an earlier run), \
                     which figures would take for the merged cell's; move it aside or use another --out",
                    dir.display(),
                    r.unary,
                    r.pairwise,
                    r.seed,
                    target.display()
                );
            }
            if let Some(names) = into.class_names
                && Some(r.seed) == into.seeds.first().copied()
                && their_first_seed == Some(r.seed)
            {
                if per_class.is_none() {
                    per_class = Some(read_per_class(dir, names).with_context(context)?);
                }
                if let Some(lines) = per_class.as_ref().and_then(|p| p.get(&(r.unary.clone(), r.pairwise.clone()))) {
                    carried.per_class.insert((r.unary.clone(), r.pairwise.clone()), lines.clone());
                }
            }
            carried.results_only.push(((r.seed, r.unary.clone(), r.pairwise.clone()), dir.to_path_buf()));
        }
        done.push(r);
    }
    let merged = done.len() - before;
    if merged > 0 && info.get("results_version").is_none() {
        eprintln!(
            "note: --merge {}: its run.json records no results version (written before versions were \
             counted), so its {merged} cell(s) count as version {UNRECORDED_RESULTS_VERSION}; some commits \
             before then changed results uncounted (docs/guide/reproducing.md, merging folders), so they \
             may differ from what this code gives",
            dir.display()
        );
    }
    if !outdated.is_empty() {
        eprintln!(
            "note: --merge {}: {} cell(s) left out, of results version {version}, whose numbers \
             this code (version {RESULTS_VERSION}) no longer gives: {}",
            dir.display(),
            outdated.len(),
            outdated.join(", ")
        );
    }
    Ok(())
}

/// `dir/run.json` as JSON, or `None` when there is none; a file that cannot
/// be read or is not JSON is an error naming it.
pub(crate) fn read_run_json(dir: &Path) -> Result<Option<serde_json::Value>> {
    let path = dir.join("run.json");
    let Some(text) = read_optional(&path)? else {
        return Ok(None);
    };
    let info = serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))?;
    Ok(Some(info))
}

/// The results version a `run.json` records ([`UNRECORDED_RESULTS_VERSION`]
/// without the field); one that is not a whole number, or newer than this
/// code's [`RESULTS_VERSION`], is an error naming the file.
pub(crate) fn results_version(dir: &Path, info: &serde_json::Value) -> Result<u64> {
    let path = dir.join("run.json");
    let version = match info.get("results_version") {
        None => UNRECORDED_RESULTS_VERSION,
        Some(v) => v.as_u64().with_context(|| {
            format!("{}: `results_version` is `{}`, not a whole number", path.display(), shown(&v.to_string()))
        })?,
    };
    if version > RESULTS_VERSION {
        bail!(
            "{} was written by code of results version {version}, newer than this code's ({RESULTS_VERSION}): \
             its numbers would not be reproduced by this build; use the newer build",
            dir.display()
        );
    }
    Ok(version)
}

/// For `--resume`: refuses a folder of another results version than
/// [`RESULTS_VERSION`], naming the folder and both versions (its unchanged
/// cells can be taken with `--merge` into a new folder instead).
pub(crate) fn check_results_version(dir: &Path, info: &serde_json::Value) -> Result<()> {
    let version = results_version(dir, info)?;
    if version != RESULTS_VERSION {
        bail!(
            "{} was written by code of results version {version}{}, this code's is {RESULTS_VERSION}: some of its \
             numbers would not be reproduced now, so it is not continued; `--merge {}` into another --out takes \
             the cells this code still reproduces and trains the others",
            dir.display(),
            if info.get("results_version").is_none() { " (run.json has no results_version)" } else { "" },
            dir.display()
        );
    }
    Ok(())
}

/// The lines of `dir/per_class.csv` by cell (none without the file), for
/// the class names `names`: the header must list them, each line must be a
/// cell's `accuracy` or `iou` with a number in [0, 1] or `nan` per class and
/// for the mean, and a pixel error; anything else is an error naming the
/// file, the line and the field. The lines are kept as written.
pub(crate) fn read_per_class(dir: &Path, names: &[String]) -> Result<BTreeMap<(String, String), Vec<String>>> {
    let path = dir.join("per_class.csv");
    let mut rows: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let Some(text) = read_optional(&path)? else {
        return Ok(rows);
    };
    let header = per_class_header(names);
    let header = header.trim_end();
    if text.lines().next() != Some(header) {
        bail!(
            "{}: line 1 is `{}`, expected the header `{header}` (the classes of this experiment)",
            path.display(),
            shown(text.lines().next().unwrap_or_default())
        );
    }
    let fields = 3 + names.len() + 2;
    for (mut line, raw) in CsvLine::all(&path, &text, header)?.into_iter().zip(text.lines().skip(1)) {
        line.fix = "fix or delete the line (a cell without its lines is left out of the merged per_class.csv)";
        if line.fields.len() != fields {
            bail!(
                "{}: line {}: malformed line `{}` ({} fields, expected {fields}: {header})",
                path.display(),
                line.number,
                shown(raw),
                line.fields.len()
            );
        }
        for (i, name) in [(0, "unary"), (1, "pairwise")] {
            if !CLASSES.contains(&line.fields[i]) {
                return Err(line
                    .error(name, format_args!("`{}` is not a class ({})", shown(line.fields[i]), CLASSES.join(", "))));
            }
        }
        let metric = line.fields[2];
        let cell = (line.fields[0].to_string(), line.fields[1].to_string());
        // Each cell has an accuracy line, then an iou line.
        let have = rows.get(&cell).map_or(0, Vec::len);
        if have >= 2 || metric != ["accuracy", "iou"][have] {
            let needs = ["`accuracy`", "`iou`"].get(have).copied().unwrap_or("no more lines");
            return Err(line
                .error("metric", format_args!("`{}` where cell {}/{} needs {needs}", shown(metric), cell.0, cell.1)));
        }
        for (i, name) in names.iter().map(String::as_str).chain(["mean"]).enumerate() {
            if !line.fields[3 + i].eq_ignore_ascii_case("nan") {
                line.number(3 + i, name, 0.0, 1.0)?;
            }
        }
        line.number(fields - 1, "pixel_error", 0.0, 1.0)?;
        rows.entry(cell).or_default().push(raw.to_string());
    }
    if let Some(((u, p), _)) = rows.iter().find(|(_, l)| l.len() != 2) {
        bail!("{}: cell {u}/{p} has an `accuracy` line but no `iou` line", path.display());
    }
    Ok(rows)
}

/// The bytes of the model file `path` of cell `unary`/`pairwise`, once they
/// load (checksum, body) and the unary factor type holds a `unary` model and
/// every other type a `pairwise` one; errors name `path`.
pub(crate) fn check_model(path: &Path, unary: &str, pairwise: &str) -> Result<Vec<u8>> {
    if path.is_dir() {
        bail!("{}: is a folder, not a model file", path.display());
    }
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let model = StructuredModel::from_bytes(&bytes, &oracles::ModelRegistry::with_builtin(), path)?;
    for (ft, m) in model.factor_types().iter().zip(model.models()) {
        let expected = if ft.name == UNARY { unary } else { pairwise };
        if m.kind() != expected {
            bail!(
                "{}: factor type `{}` holds a model of kind `{}`, but cell {unary}/{pairwise} fits it with `{expected}`; \
                 the file belongs to another cell",
                path.display(),
                ft.name,
                m.kind()
            );
        }
    }
    Ok(bytes)
}

/// Whether two recorded presets hold the same settings: as JSON, except that
/// numbers compare by value (`10` written by `--set` equals the preset's `10.0`).
pub(crate) fn same_settings(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_settings(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_settings(v, w)))
        }
        _ => a == b,
    }
}

/// The settings in which presets `theirs` and `mine` differ, as
/// `key: theirs → mine` (`(none)` for a missing key), nested keys joined by `.`.
pub(crate) fn setting_differences(theirs: &serde_json::Value, mine: &serde_json::Value, prefix: &str) -> Vec<String> {
    use serde_json::Value;
    match (theirs, mine) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter()
                .flat_map(|k| {
                    let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    match (a.get(k), b.get(k)) {
                        (Some(x), Some(y)) => setting_differences(x, y, &path),
                        (x, y) => {
                            let show = |v: Option<&Value>| v.map_or("(none)".to_string(), Value::to_string);
                            vec![format!("{path}: {} → {}", show(x), show(y))]
                        }
                    }
                })
                .collect()
        }
        _ if same_settings(theirs, mine) => Vec::new(),
        _ => vec![format!("{}: {theirs} → {mine}", if prefix.is_empty() { "preset" } else { prefix })],
    }
}

/// `preset` as far as it concerns the cell `unary`/`pairwise`: without the
/// extra hyper-parameters (`oracles`) of kinds the cell does not use, so that
/// cells of runs whose presets differ only there may be merged.
pub(crate) fn preset_for_cell(preset: &serde_json::Value, unary: &str, pairwise: &str) -> serde_json::Value {
    let mut p = preset.clone();
    if let Some(map) = p.as_object_mut() {
        if let Some(serde_json::Value::Object(oracles)) = map.get_mut("oracles") {
            oracles.retain(|kind, _| kind == unary || kind == pairwise);
        }
        // An empty map is not recorded at all (`Experiment::preset`).
        if map.get("oracles").and_then(serde_json::Value::as_object).is_some_and(serde_json::Map::is_empty) {
            map.remove("oracles");
        }
    }
    p
}
