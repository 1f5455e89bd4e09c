//! Building the built-in oracles from names and JSON hyper-parameters (for
//! the command line and configuration files).
//!
//! A specification is a JSON object with `"kind"` (`zero`, `constant`,
//! `linear`, `boosting`, `mlp`, `indexed-linear`, `fixed`) and any hyper-parameters of that class; missing
//! ones take the class's defaults, unknown ones are an error. On the command
//! line the same is written `TYPE=KIND[:KEY=VALUE,...]` ([`parse_oracle_arg`]),
//! nested keys with dots (`lbfgs.max_iterations=50`).
//!
//! ```
//! let o = structlearn::oracle_config::oracle_from_json(&serde_json::json!({"kind": "boosting", "rounds": 5})).unwrap();
//! assert_eq!(o.kind(), "boosting");
//! assert!(structlearn::oracle_config::oracle_from_json(&serde_json::json!({"kind": "linear", "nope": 1})).is_err());
//! ```
//!
//! The specifications are read by an [`OracleRegistry`]: the functions here
//! use the built-in one ([`OracleRegistry::builtin`]); a program with
//! plug-in classes calls the same methods on its own registry. The settings
//! of every built-in class, their defaults and meanings are listed by
//! [`OracleRegistry::hyper_parameters`], printed by `structlearn train
//! --help` and tabulated in the guide (`docs/guide/oracles.md`, generated
//! from the registry and checked by a test).

use oracles::Oracle;
use serde_json::Value;

use crate::LearnError;
pub use crate::registry::HyperParameter;
use crate::registry::OracleRegistry;

/// A configuration file: `{"train": {TrainConfig fields}, "oracles": {"TYPE":
/// {"kind": ..., settings...}}}` (both keys optional; unknown keys at any
/// level are errors). `structlearn train --config` reads it; a program with
/// plug-in oracles reads it the same way and builds its learner with its own
/// registry ([`crate::build_learner_with`]).
///
/// ```
/// use structlearn::oracle_config::RunConfig;
/// let config = RunConfig::from_json(&serde_json::json!({
///     "train": {"learning_iterations": 5},
///     "oracles": {"unary": {"kind": "boosting", "rounds": 10}, "pairwise": {"kind": "linear"}}
/// }))
/// .unwrap();
/// assert_eq!(config.train.learning_iterations, 5);
/// assert_eq!(config.oracles.len(), 2); // one per factor type (sorted by name)
/// assert!(RunConfig::from_json(&serde_json::json!({"trian": {}})).is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    /// The learning settings.
    pub train: crate::TrainConfig,
    /// One oracle specification per factor type, sorted by type name.
    pub oracles: Vec<(String, Value)>,
}

impl RunConfig {
    /// Reads a configuration (type docs). The oracle specifications are
    /// checked when the learner builds them (by its registry).
    pub fn from_json(value: &Value) -> Result<Self, LearnError> {
        let obj =
            value.as_object().ok_or_else(|| LearnError::Config("the configuration must be a JSON object".into()))?;
        if let Some(k) = obj.keys().find(|k| *k != "train" && *k != "oracles") {
            return Err(LearnError::Config(format!("unknown key `{k}` (expected `train` and `oracles`)")));
        }
        let train = match obj.get("train") {
            Some(t) => serde_json::from_value(t.clone()).map_err(|e| LearnError::Config(format!("`train`: {e}")))?,
            None => crate::TrainConfig::default(),
        };
        let oracles = match obj.get("oracles") {
            None => Vec::new(),
            Some(Value::Object(o)) => o.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Some(other) => {
                return Err(LearnError::Config(format!(
                    "`oracles` must be an object {{\"FACTOR TYPE\": {{\"kind\": …}}}}, not {other}"
                )));
            }
        };
        Ok(Self { train, oracles })
    }
}

/// A built-in oracle with default hyper-parameters.
///
/// ```
/// let oracle = structlearn::oracle_config::builtin_oracle("boosting").unwrap();
/// assert_eq!(oracle.kind(), "boosting");
/// assert!(structlearn::oracle_config::builtin_oracle("forest").is_err());
/// ```
pub fn builtin_oracle(kind: &str) -> Result<Box<dyn Oracle>, LearnError> {
    oracle_from_json(&serde_json::json!({ "kind": kind }))
}

/// A built-in oracle from `{"kind": ..., hyper-parameters...}` (module docs).
///
/// ```
/// use structlearn::oracle_config::oracle_from_json;
/// let spec = serde_json::json!({"kind": "linear", "l2": 0.5, "lbfgs": {"max_iterations": 50}});
/// assert_eq!(oracle_from_json(&spec).unwrap().kind(), "linear");
/// assert!(oracle_from_json(&serde_json::json!({"kind": "linear", "l2": -1.0})).is_err()); // validated
/// ```
pub fn oracle_from_json(spec: &Value) -> Result<Box<dyn Oracle>, LearnError> {
    OracleRegistry::builtin().build(spec)
}

/// `spec` with every hyper-parameter spelled out (the defaults filled in,
/// numbers as the oracle reads them), so that two specifications of the same
/// oracle compare equal however they were written; errors as [`oracle_from_json`].
///
/// ```
/// use structlearn::oracle_config::resolved_spec;
/// let short = resolved_spec(&serde_json::json!({"kind": "boosting"})).unwrap();
/// let rounds = short["rounds"].clone();
/// let long = resolved_spec(&serde_json::json!({"kind": "boosting", "rounds": rounds})).unwrap();
/// assert_eq!(short, long);
/// assert_ne!(short, resolved_spec(&serde_json::json!({"kind": "boosting", "rounds": 3})).unwrap());
/// ```
pub fn resolved_spec(spec: &Value) -> Result<Value, LearnError> {
    OracleRegistry::builtin().resolve(spec).map(|(_, resolved)| resolved)
}

/// Parses a command-line oracle choice `TYPE=KIND[:KEY=VALUE,...]` into the
/// factor type and a JSON specification for [`oracle_from_json`]. Values are
/// JSON scalars (`20`, `0.5`, `true`), `none` (for optional limits) or bare
/// strings; dotted keys (`lbfgs.max_iterations=50`) set nested options.
///
/// ```
/// use structlearn::oracle_config::{oracle_from_json, parse_oracle_arg};
/// let (ty, spec) = parse_oracle_arg("unary=boosting:rounds=20,max_depth=4").unwrap();
/// assert_eq!(ty, "unary");
/// assert_eq!(spec, serde_json::json!({"kind": "boosting", "rounds": 20, "max_depth": 4}));
/// assert!(oracle_from_json(&spec).is_ok());
/// let (_, spec) = parse_oracle_arg("pairwise=linear:l2=0.5,lbfgs.max_iterations=50").unwrap();
/// assert_eq!(spec["lbfgs"]["max_iterations"], 50);
/// assert!(parse_oracle_arg("unary").is_err());
/// assert!(parse_oracle_arg("unary=boosting:rounds").is_err());
/// ```
pub fn parse_oracle_arg(text: &str) -> Result<(String, Value), LearnError> {
    let bad = |why: &str| LearnError::Config(format!("--oracle `{text}`: {why} (expected TYPE=KIND[:KEY=VALUE,...])"));
    let (factor_type, rest) = text.split_once('=').ok_or_else(|| bad("no `=`"))?;
    let (kind, params) = rest.split_once(':').unwrap_or((rest, ""));
    if factor_type.is_empty() || kind.is_empty() {
        return Err(bad("empty factor type or kind"));
    }
    let mut spec = serde_json::Map::new();
    spec.insert("kind".into(), Value::String(kind.into()));
    for pair in params.split(',').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').ok_or_else(|| bad(&format!("`{pair}` is not KEY=VALUE")))?;
        let value = match value {
            "none" | "null" => Value::Null,
            v => serde_json::from_str::<Value>(v)
                .ok()
                .filter(|v| !v.is_object() && !v.is_array())
                .unwrap_or_else(|| Value::String(v.into())),
        };
        let mut slot = &mut spec;
        let parts: Vec<&str> = key.split('.').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(bad(&format!("empty key in `{pair}`")));
        }
        for part in &parts[..parts.len() - 1] {
            let entry = slot.entry(part.to_string()).or_insert_with(|| Value::Object(Default::default()));
            slot = entry.as_object_mut().ok_or_else(|| bad(&format!("`{part}` is set twice")))?;
        }
        slot.insert(parts[parts.len() - 1].to_string(), value);
    }
    Ok((factor_type.to_string(), Value::Object(spec)))
}

/// One line of what a built-in kind is (for `--help`; empty for an unknown kind).
///
/// ```
/// assert!(structlearn::oracle_config::kind_summary("boosting").contains("trees"));
/// ```
pub fn kind_summary(kind: &str) -> &'static str {
    OracleRegistry::builtin().summary(kind).unwrap_or("")
}

/// The hyper-parameters of a built-in oracle kind with their defaults and
/// meanings (empty for `zero`; [`OracleRegistry::hyper_parameters`]).
///
/// ```
/// let hp = structlearn::oracle_config::hyper_parameters("boosting").unwrap();
/// let rounds = hp.iter().find(|h| h.name == "rounds").unwrap();
/// assert_eq!(rounds.default, 20);
/// assert!(hp.iter().any(|h| h.name == "leaf_lbfgs.max_iterations"));
/// ```
pub fn hyper_parameters(kind: &str) -> Result<Vec<HyperParameter>, LearnError> {
    OracleRegistry::builtin().hyper_parameters(kind)
}

/// The text `structlearn train --help` prints about oracles: every built-in
/// kind, its hyper-parameters, defaults and meanings.
///
/// ```
/// assert!(structlearn::oracle_config::oracle_help().contains("rounds [20]"));
/// ```
pub fn oracle_help() -> String {
    OracleRegistry::builtin().help()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hyper_parameter_has_a_meaning_and_builds_from_its_default() {
        // `fixed` takes arrays, which the command line does not write.
        for kind in OracleRegistry::builtin().kinds().filter(|&k| k != oracles::fixed::KIND) {
            for h in hyper_parameters(kind).unwrap() {
                assert!(!h.meaning.is_empty(), "{kind}.{} has no meaning in MEANINGS", h.name);
                // Setting the default explicitly on the command line is accepted.
                let (_, spec) = parse_oracle_arg(&format!("t={kind}:{}={}", h.name, h.default_text())).unwrap();
                oracle_from_json(&spec).unwrap_or_else(|e| panic!("{kind}.{}: {e}", h.name));
            }
        }
        assert!(hyper_parameters("nope").is_err());
    }

    #[test]
    fn command_line_values_reach_the_oracle_and_bad_ones_are_errors() {
        let (_, spec) = parse_oracle_arg("u=boosting:rounds=7,max_leaves=none,shrinkage=0.5").unwrap();
        assert_eq!(spec, serde_json::json!({"kind": "boosting", "rounds": 7, "max_leaves": null, "shrinkage": 0.5}));
        assert_eq!(oracle_from_json(&spec).unwrap().kind(), "boosting");
        // Values reach the oracle's validation: out-of-range ones are refused.
        for bad in [
            "u=boosting:rounds=0",
            "u=boosting:depth=4",
            "u=mlp:hidden=many",
            "=linear",
            "u=",
            "u=linear:lbfgs=3,lbfgs.memory=2",
        ] {
            let result = parse_oracle_arg(bad).and_then(|(_, s)| oracle_from_json(&s));
            assert!(result.is_err(), "{bad} was accepted");
        }
        assert!(oracle_help().contains("min_child_fraction [0.01]"));
    }
}
