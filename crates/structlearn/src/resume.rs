//! The settings a checkpoint's run was made with (`FILE.settings.json` beside
//! the checkpoint `FILE`), so that a resumed run continues only the training
//! that wrote it: the learner, every factor type's oracle with all its
//! hyper-parameters, and the settings of Algorithm 1 except those a resumed
//! run may change ([`MAY_CHANGE`]). The checkpoint itself checks the seed,
//! the examples, the factor types, the oracle kinds and the schedule; it does
//! not hold the oracles' hyper-parameters. `structlearn train --checkpoint`
//! and the Python estimators' `checkpoint` both record and check them here.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::{LearnError, LearnerKind, OracleRegistry, TrainConfig};

/// Settings a resumed run may change: they do not alter what the finished
/// learning iterations computed (`evaluation_messages` only where the same
/// numbers are kept).
pub const MAY_CHANGE: [&str; 4] = ["learning_iterations", "checkpoint", "early_stopping", "evaluation_messages"];

/// The settings file beside `checkpoint`: its name with `.settings.json` added.
///
/// ```
/// let p = structlearn::resume::settings_path(std::path::Path::new("runs/a.ckpt"));
/// assert_eq!(p, std::path::Path::new("runs/a.ckpt.settings.json"));
/// ```
pub fn settings_path(checkpoint: &Path) -> PathBuf {
    let mut name = checkpoint.as_os_str().to_owned();
    name.push(".settings.json");
    PathBuf::from(name)
}

/// The settings a run must share with the run whose checkpoint it resumes
/// (module docs): `{"learner", "train", "oracles": {TYPE: resolved spec}}`.
/// Oracle specifications are resolved by `registry` (defaults filled in), so
/// `linear` and `linear:l2=<its default>` are the same setting.
///
/// ```
/// use structlearn::resume::resume_settings;
/// use structlearn::{LearnerKind, OracleRegistry, TrainConfig};
/// let spec = |s: &str| vec![("unary".to_string(), serde_json::json!({"kind": s}))];
/// let (config, registry) = (TrainConfig::default(), OracleRegistry::builtin());
/// let a = resume_settings(LearnerKind::Algorithm1, &config, &spec("linear"), registry).unwrap();
/// // More learning iterations may follow; another oracle may not.
/// let longer = TrainConfig { learning_iterations: 50, ..config.clone() };
/// assert_eq!(a, resume_settings(LearnerKind::Algorithm1, &longer, &spec("linear"), registry).unwrap());
/// assert_ne!(a, resume_settings(LearnerKind::Algorithm1, &config, &spec("mlp"), registry).unwrap());
/// ```
pub fn resume_settings(
    kind: LearnerKind,
    config: &TrainConfig,
    specs: &[(String, Value)],
    registry: &OracleRegistry,
) -> Result<Value, LearnError> {
    let mut train =
        serde_json::to_value(config).map_err(|e| LearnError::Config(format!("the training settings as JSON: {e}")))?;
    if let Value::Object(map) = &mut train {
        for key in MAY_CHANGE {
            map.remove(key);
        }
    }
    let mut oracles = Map::new();
    for (factor_type, spec) in specs {
        let (_, resolved) =
            registry.resolve(spec).map_err(|e| LearnError::Config(format!("oracle of `{factor_type}`: {e}")))?;
        oracles.insert(factor_type.clone(), resolved);
    }
    Ok(serde_json::json!({ "learner": kind.to_string(), "train": train, "oracles": oracles }))
}

/// Before a run that may resume from `checkpoint`: if it resumes (`resuming`),
/// checks this run's `settings` against those recorded beside the checkpoint
/// (an error lists every difference and ends with `advice`, what the caller
/// may change or do instead); otherwise records `settings` there (atomically)
/// for a later resume. A checkpoint without a settings file (written by an
/// older version) is resumed unchecked: the `Ok` value is then a warning to
/// show.
///
/// ```
/// use structlearn::resume::{check_or_record_settings, settings_path};
/// let dir = tempfile::tempdir().unwrap();
/// let ckpt = dir.path().join("run.ckpt");
/// let settings = |eps: f64| serde_json::json!({"train": {"epsilon": eps}});
/// check_or_record_settings(&ckpt, false, &settings(0.1), "").unwrap();
/// assert!(settings_path(&ckpt).is_file());
/// assert_eq!(check_or_record_settings(&ckpt, true, &settings(0.1), "").unwrap(), None);
/// let err = check_or_record_settings(&ckpt, true, &settings(0.5), "start afresh").unwrap_err().to_string();
/// assert!(err.contains("train.epsilon: checkpoint 0.1, now 0.5") && err.ends_with("start afresh"), "{err}");
/// ```
pub fn check_or_record_settings(
    checkpoint: &Path,
    resuming: bool,
    settings: &Value,
    advice: &str,
) -> Result<Option<String>, LearnError> {
    let path = settings_path(checkpoint);
    if !resuming {
        let text = serde_json::to_vec_pretty(settings)
            .map_err(|e| LearnError::Config(format!("the settings as JSON: {e}")))?;
        return crate::files::write_atomic(&path, &text).map(|()| None);
    }
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Some(format!(
                "{} has no settings file beside it ({}, written by an older version?): this run's oracles and \
                 settings cannot be checked against those it was written with",
                checkpoint.display(),
                path.display()
            )));
        }
        Err(e) => return Err(LearnError::io(&path, e)),
    };
    let recorded: Value = serde_json::from_slice(&bytes).map_err(|e| {
        LearnError::bad_file(&path, format!("is not valid JSON ({e}); delete it and the checkpoint to start afresh"))
    })?;
    let mut differences = Vec::new();
    differ(&recorded, settings, "", &mut differences);
    if !differences.is_empty() {
        return Err(LearnError::Config(format!(
            "{} was written with other settings than this run's ({}); {advice}",
            checkpoint.display(),
            differences.join("; ")
        )));
    }
    Ok(None)
}

/// Appends to `out` one line per leaf where `recorded` and `now` differ,
/// named by its dotted path.
fn differ(recorded: &Value, now: &Value, path: &str, out: &mut Vec<String>) {
    match (recorded, now) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))).collect();
            keys.sort();
            for key in keys {
                let sub = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => differ(x, y, &sub, out),
                    (x, y) => out.push(format!("{sub}: checkpoint {}, now {}", shown(x), shown(y))),
                }
            }
        }
        (a, b) if a != b => out.push(format!("{path}: checkpoint {a}, now {b}")),
        _ => {}
    }
}

/// A value of [`differ`], or "unset".
fn shown(v: Option<&Value>) -> String {
    v.map_or_else(|| "unset".into(), Value::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(rounds: u64, epsilon: f64) -> Value {
        let config = TrainConfig { epsilon, ..TrainConfig::default() };
        let specs = vec![
            ("unary".to_string(), serde_json::json!({"kind": "boosting", "rounds": rounds})),
            ("pairwise".to_string(), serde_json::json!({"kind": "constant"})),
        ];
        resume_settings(LearnerKind::Algorithm1, &config, &specs, OracleRegistry::builtin()).unwrap()
    }

    #[test]
    fn a_resumed_run_must_have_the_recorded_settings() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("run.ckpt");
        // Without a settings file (an older checkpoint): resumed, unchecked, with a warning.
        let warning = check_or_record_settings(&ckpt, true, &settings(10, 0.1), "").unwrap().unwrap();
        assert!(warning.contains("no settings file"), "{warning}");
        check_or_record_settings(&ckpt, false, &settings(10, 0.1), "").unwrap();
        assert!(settings_path(&ckpt).is_file());
        assert_eq!(check_or_record_settings(&ckpt, true, &settings(10, 0.1), "").unwrap(), None);
        let err = check_or_record_settings(&ckpt, true, &settings(20, 0.5), "start afresh").unwrap_err().to_string();
        assert!(err.contains("oracles.unary.rounds: checkpoint 10, now 20"), "{err}");
        assert!(err.contains("train.epsilon: checkpoint 0.1, now 0.5"), "{err}");
        assert!(err.contains(&ckpt.display().to_string()) && err.ends_with("start afresh"), "{err}");
        // A corrupt settings file is an error that names it.
        std::fs::write(settings_path(&ckpt), b"{not json").unwrap();
        let err = check_or_record_settings(&ckpt, true, &settings(10, 0.1), "").unwrap_err().to_string();
        assert!(err.contains("settings.json") && err.contains("is not valid JSON"), "{err}");
    }

    #[test]
    fn differences_name_added_and_removed_keys() {
        let (a, b) = (serde_json::json!({"x": {"y": 1}, "gone": true}), serde_json::json!({"x": {"y": 1}, "new": 2}));
        let mut out = Vec::new();
        differ(&a, &b, "", &mut out);
        assert_eq!(out, ["gone: checkpoint true, now unset", "new: checkpoint unset, now 2"]);
    }
}
