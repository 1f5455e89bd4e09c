//! `--merge`: taking finished cells from other output folders of the same preset.

use std::path::Path;

use anyhow::{Context, Result, bail};
use factor_graph::UNARY;

use structlearn::StructuredModel;
use structlearn::files::write_atomic;

use super::*;

/// Adds the finished cells of another run's folder `dir` (same preset, checked)
/// that `done` lacks, copying their models into `out`.
pub(crate) fn merge_cells(
    dir: &Path,
    out: &Path,
    preset: &serde_json::Value,
    seeds: &[u64],
    cells: &[(String, String)],
    done: &mut Vec<CellResult>,
) -> Result<()> {
    let Some(theirs) = recorded_preset(dir).with_context(|| format!("--merge {}", dir.display()))? else {
        bail!("--merge {}: no run.json there (not an output folder of `reproduce`)", dir.display());
    };
    for r in read_previous(dir).with_context(|| format!("--merge {}", dir.display()))? {
        let wanted = seeds.contains(&r.seed) && cells.contains(&(r.unary.clone(), r.pairwise.clone()));
        let have = done.iter().any(|d| d.seed == r.seed && d.unary == r.unary && d.pairwise == r.pairwise);
        if wanted && !have {
            let (mine, other) =
                (preset_for_cell(preset, &r.unary, &r.pairwise), preset_for_cell(&theirs, &r.unary, &r.pairwise));
            if !same_settings(&mine, &other) {
                bail!(
                    "--merge {}: cell {}/{} was trained with preset {other}, this run's is {mine}; merge only \
                     cells of the same settings",
                    dir.display(),
                    r.unary,
                    r.pairwise
                );
            }
            let source = model_path(dir, r.seed, &r.unary, &r.pairwise);
            let bytes = check_model(&source, &r.unary, &r.pairwise).with_context(|| {
                format!("--merge {}: cell {}/{}, seed {}", dir.display(), r.unary, r.pairwise, r.seed)
            })?;
            write_atomic(&model_path(out, r.seed, &r.unary, &r.pairwise), &bytes)?;
            done.push(r);
        }
    }
    Ok(())
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
