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
//! # Hyper-parameters of the built-in oracles
//!
//! ([`hyper_parameters`] lists them with their defaults at run time;
//! `structlearn train --help` prints them.)
//!
//! | kind | key | default | meaning |
//! |---|---|---|---|
//! | `zero` | — | — | `g = 0`: the factor type contributes nothing |
//! | `constant` | `lbfgs.*` | see below | a per-class constant, fitted by L-BFGS |
//! | `linear` | `l2` | 0 | ridge `(λ/2)‖W‖²` on the weights |
//! | `linear` | `warm_max_iterations` | 10 | L-BFGS steps of a warm-started fit (null: to convergence) |
//! | `linear` | `lbfgs.*` | see below | L-BFGS of the logistic loss |
//! | `indexed-linear` | `l2` | 0 | ridge `(λ/2)‖W‖²` on every group's weights |
//! | `indexed-linear` | `groups` | 0 | number of groups (0: from the data) |
//! | `indexed-linear` | `lbfgs.*` | see below | L-BFGS of the logistic loss |
//! | `boosting` | `rounds` | 20 | trees added per fit (the ensemble grows across learning iterations) |
//! | `boosting` | `shrinkage` | 0.25 | step length ν of each tree, in (0, 1] |
//! | `boosting` | `subsample` | 10000 | rows drawn per round |
//! | `boosting` | `min_child_fraction` | 0.01 | least fraction of the subsample in each child of a split |
//! | `boosting` | `min_split_fraction` | 0.025 | nodes with less than this fraction are not split |
//! | `boosting` | `max_depth` | none | most levels below the root |
//! | `boosting` | `max_leaves` | none | most leaves per tree |
//! | `boosting` | `bins` | 256 | histogram bins per feature, 2..=256 |
//! | `boosting` | `leaf_l2` | 100 | ridge on leaf values in the re-fit |
//! | `boosting` | `leaf_lbfgs.*` | 50 iterations, rel. decrease 1e-9 | L-BFGS of the leaf re-fit |
//! | `boosting` | `split_gain` | `least-squares` | split criterion: `least-squares` (the chapter's) or `newton` |
//! | `boosting` | `trees` | `multi-output` | per round one `multi-output` tree (the chapter's) or one tree `per-class` (the NIPS paper's, LightGBM's) |
//! | `boosting` | `leaf_values` | `refit` | leaf values by L-BFGS `refit` (the chapter's) or one `newton` step −G/(H + λ) (LightGBM's) |
//! | `mlp` | `hidden` | 100 | hidden units |
//! | `mlp` | `step_size` | 0.25 | momentum-SGD step size (papers: 0.25 unary, 0.05 pairwise) |
//! | `mlp` | `momentum` | 0.9 | momentum in [0, 1) |
//! | `mlp` | `minibatch` | 100 | rows per minibatch |
//! | `mlp` | `epochs` | 1 | passes over the data per fit |
//! | `mlp` | `init_scale` | 1 | cold-start weight scale (times 1/√d) |
//! | `mlp` | `biases` | false | hidden and output biases |
//! | `mlp` | `step_halvings` | 0 | retries of a warm fit that found nothing better, each at half the step |
//! | L-BFGS | `max_iterations` | 200 | most accepted steps |
//! | L-BFGS | `memory` | 10 | curvature pairs kept |
//! | L-BFGS | `gradient_tolerance` | 1e-6 | stop when ‖∇‖ is below this |
//! | L-BFGS | `relative_decrease_tolerance` | 1e-10 | stop when a step gains less than this, relatively |

use oracles::Oracle;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::LearnError;

/// Names of the built-in function classes.
pub const BUILTIN_KINDS: [&str; 6] = ["zero", "constant", "linear", "boosting", "mlp", "indexed-linear"];

/// The kind of the fixed class (a table with `−∞` for forbidden
/// configurations, never learned), which needs its table as a parameter.
pub const FIXED_KIND: &str = oracles::fixed::KIND;

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
    resolve(spec).map(|(oracle, _)| oracle)
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
    resolve(spec).map(|(_, resolved)| resolved)
}

/// The oracle of `spec` and its [`resolved_spec`].
fn resolve(spec: &Value) -> Result<(Box<dyn Oracle>, Value), LearnError> {
    let obj =
        spec.as_object().ok_or_else(|| LearnError::Config(format!("oracle specification {spec} is not an object")))?;
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .ok_or_else(|| LearnError::Config(format!("oracle specification {spec} has no \"kind\"")))?;
    let mut params = obj.clone();
    params.remove("kind");
    let (oracle, mut resolved): (Box<dyn Oracle>, Value) = match kind {
        "zero" => build::<oracles::zero::ZeroOracle>(kind, params, true)?,
        "constant" => build::<oracles::constant::ConstantOracle>(kind, params, false)?,
        "linear" => build::<oracles::linear::LinearOracle>(kind, params, false)?,
        "boosting" => build::<oracles::boosting::BoostingOracle>(kind, params, false)?,
        "mlp" => build::<oracles::mlp::MlpOracle>(kind, params, false)?,
        "indexed-linear" => build::<oracles::indexed::IndexedLinearOracle>(kind, params, false)?,
        FIXED_KIND => build::<oracles::fixed::FixedOracle>(kind, params, false)?,
        other => {
            return Err(LearnError::Config(format!(
                "unknown oracle kind `{other}` (built-in: {}, {FIXED_KIND})",
                BUILTIN_KINDS.join(", ")
            )));
        }
    };
    oracle.validate().map_err(|e| LearnError::Config(format!("oracle `{kind}`: {e}")))?;
    if let Value::Object(map) = &mut resolved {
        map.insert("kind".into(), kind.into());
    }
    Ok((oracle, resolved))
}

/// The oracle `O` with `params` over its defaults, and its hyper-parameters
/// as JSON (`{}` for a `unit` class, which has none).
fn build<O: Oracle + Default + Serialize + DeserializeOwned + 'static>(
    kind: &str,
    params: serde_json::Map<String, Value>,
    unit: bool,
) -> Result<(Box<dyn Oracle>, Value), LearnError> {
    if unit {
        if let Some(key) = params.keys().next() {
            return Err(LearnError::Config(format!("oracle `{kind}` has no hyper-parameter `{key}`")));
        }
        return Ok((Box::new(O::default()), Value::Object(serde_json::Map::new())));
    }
    let mut merged = match serde_json::to_value(O::default()) {
        Ok(Value::Object(m)) => m,
        _ => return Err(LearnError::Config(format!("oracle `{kind}` has no JSON hyper-parameters"))),
    };
    for (key, value) in params {
        match merged.get_mut(&key) {
            Some(slot) => merge(slot, value, kind, &key)?,
            None => {
                let known: Vec<&String> = merged.keys().collect();
                return Err(LearnError::Config(format!(
                    "oracle `{kind}` has no hyper-parameter `{key}` (known: {known:?})"
                )));
            }
        }
    }
    let oracle: O = serde_json::from_value(Value::Object(merged))
        .map_err(|e| LearnError::Config(format!("oracle `{kind}`: invalid hyper-parameters: {e}")))?;
    let resolved = serde_json::to_value(&oracle)
        .map_err(|e| LearnError::Config(format!("oracle `{kind}`: hyper-parameters not representable: {e}")))?;
    Ok((Box::new(oracle), resolved))
}

/// Overlays `value` on `slot`, recursing into nested objects (e.g. L-BFGS options).
fn merge(slot: &mut Value, value: Value, kind: &str, path: &str) -> Result<(), LearnError> {
    match (slot, value) {
        (Value::Object(dst), Value::Object(src)) => {
            for (k, v) in src {
                let sub = format!("{path}.{k}");
                match dst.get_mut(&k) {
                    Some(s) => merge(s, v, kind, &sub)?,
                    None => return Err(LearnError::Config(format!("oracle `{kind}` has no hyper-parameter `{sub}`"))),
                }
            }
            Ok(())
        }
        (slot, value) => {
            *slot = value;
            Ok(())
        }
    }
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

/// One hyper-parameter of a built-in oracle.
///
/// ```
/// for h in structlearn::oracle_config::hyper_parameters("linear").unwrap() {
///     println!("{} [{}]: {}", h.name, h.default, h.meaning);
/// }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct HyperParameter {
    /// Key, nested keys joined with dots (`lbfgs.max_iterations`).
    pub name: String,
    /// The default value.
    pub default: Value,
    /// What it does.
    pub meaning: &'static str,
}

/// What each built-in hyper-parameter means, by kind and key (`*` = any kind
/// with that nested L-BFGS block).
const MEANINGS: &[(&str, &str, &str)] = &[
    ("linear", "l2", "ridge (λ/2)‖W‖² on the weights, ≥ 0"),
    ("linear", "warm_max_iterations", "L-BFGS steps of a warm-started fit inside learning, ≥ 1 (null: full fits)"),
    ("indexed-linear", "l2", "ridge (λ/2)‖W‖² on every group's weights, ≥ 0"),
    ("indexed-linear", "groups", "number of groups (the last feature is the group index; 0: from the data)"),
    ("fixed", "table", "the score t_y of every class (finite; never learned)"),
    ("fixed", "forbidden", "classes scored −∞: configurations a hard constraint forbids"),
    ("boosting", "rounds", "trees added per fit (the ensemble grows across learning iterations), ≥ 1"),
    ("boosting", "shrinkage", "step length ν of each tree, in (0, 1]"),
    ("boosting", "subsample", "rows drawn per round (all when fewer), ≥ 1"),
    ("boosting", "min_child_fraction", "least fraction of the subsample in each child of a split, in [0, 0.5]"),
    ("boosting", "min_split_fraction", "nodes holding less than this fraction are not split, in [0, 1]"),
    ("boosting", "max_depth", "most levels below the root (none: only the fractions limit), ≥ 1"),
    ("boosting", "max_leaves", "most leaves per tree, best splits first (none: no limit), ≥ 2"),
    ("boosting", "bins", "histogram bins per feature, in 2..=256"),
    ("boosting", "leaf_l2", "ridge λ on each leaf's values in the re-fit (and in the Newton gain), ≥ 0"),
    ("boosting", "split_gain", "split criterion: least-squares (the chapter's ‖G‖²/W) or newton (Σ G²/(H + λ))"),
    ("boosting", "trees", "per round: one multi-output tree (the chapter's) or one tree per-class (NIPS, LightGBM)"),
    (
        "boosting",
        "leaf_values",
        "refit (L-BFGS on the leaf's rows, the chapter's) or newton (one step −G/(H + λ), LightGBM's)",
    ),
    ("mlp", "hidden", "hidden units"),
    ("mlp", "step_size", "momentum-SGD step size (papers: 0.25 unary, 0.05 pairwise)"),
    ("mlp", "momentum", "momentum μ in [0, 1)"),
    ("mlp", "minibatch", "rows per minibatch (capped at the rows)"),
    ("mlp", "epochs", "passes over the data per fit"),
    ("mlp", "init_scale", "standard deviation of a cold-start input weight, times 1/√d"),
    ("mlp", "biases", "add hidden and output biases"),
    ("mlp", "step_halvings", "retries of a warm fit that lowered nothing, each from the warm start at half the step"),
    ("*", "max_iterations", "L-BFGS: most accepted steps, ≥ 1"),
    ("*", "memory", "L-BFGS: curvature pairs kept, ≥ 1"),
    ("*", "gradient_tolerance", "L-BFGS: stop once ‖∇‖ ≤ this"),
    ("*", "relative_decrease_tolerance", "L-BFGS: stop once a step gains ≤ this × max(|f|, 1)"),
];

/// One line of what a built-in kind is (for `--help`).
///
/// ```
/// assert!(structlearn::oracle_config::kind_summary("boosting").contains("trees"));
/// ```
pub fn kind_summary(kind: &str) -> &'static str {
    match kind {
        "zero" => "g = 0: the factor type contributes nothing (no hyper-parameters)",
        "constant" => "a per-class constant, fitted by L-BFGS",
        "linear" => "multiclass logistic regression on the features, fitted by L-BFGS",
        "boosting" => "gradient-boosted regression trees (multiclass logistic loss)",
        "mlp" => "a one-hidden-layer perceptron trained by momentum SGD",
        "indexed-linear" => "untied linear functions: one per group, the group index being the last feature",
        "fixed" => "a fixed table, −∞ on forbidden classes (hard constraints), never learned",
        _ => "",
    }
}

/// The hyper-parameters of a built-in oracle kind with their defaults and
/// meanings (empty for `zero`).
///
/// ```
/// let hp = structlearn::oracle_config::hyper_parameters("boosting").unwrap();
/// let rounds = hp.iter().find(|h| h.name == "rounds").unwrap();
/// assert_eq!(rounds.default, 20);
/// assert!(hp.iter().any(|h| h.name == "leaf_lbfgs.max_iterations"));
/// ```
pub fn hyper_parameters(kind: &str) -> Result<Vec<HyperParameter>, LearnError> {
    let defaults = match kind {
        "zero" => return Ok(Vec::new()),
        "constant" => serde_json::to_value(oracles::constant::ConstantOracle::default()),
        "linear" => serde_json::to_value(oracles::linear::LinearOracle::default()),
        "boosting" => serde_json::to_value(oracles::boosting::BoostingOracle::default()),
        "mlp" => serde_json::to_value(oracles::mlp::MlpOracle::default()),
        "indexed-linear" => serde_json::to_value(oracles::indexed::IndexedLinearOracle::default()),
        "fixed" => serde_json::to_value(oracles::fixed::FixedOracle::default()),
        other => {
            return Err(LearnError::Config(format!(
                "unknown oracle kind `{other}` (built-in: {})",
                BUILTIN_KINDS.join(", ")
            )));
        }
    }
    .map_err(|e| LearnError::Config(format!("oracle `{kind}`: {e}")))?;
    let mut out = Vec::new();
    flatten(kind, "", &defaults, &mut out);
    Ok(out)
}

fn flatten(kind: &str, prefix: &str, value: &Value, out: &mut Vec<HyperParameter>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                flatten(kind, &if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") }, v, out);
            }
        }
        v => {
            let leaf = prefix.rsplit('.').next().unwrap_or(prefix);
            let nested = prefix.contains('.');
            let meaning = MEANINGS
                .iter()
                .find(|(k, key, _)| *key == leaf && (*k == kind || (nested && *k == "*")))
                .map_or("", |m| m.2);
            out.push(HyperParameter { name: prefix.to_string(), default: v.clone(), meaning });
        }
    }
}

/// The text `structlearn train --help` prints about oracles: every built-in
/// kind, its hyper-parameters, defaults and meanings.
///
/// ```
/// assert!(structlearn::oracle_config::oracle_help().contains("rounds [20]"));
/// ```
pub fn oracle_help() -> String {
    let mut text = String::from(
        "Oracles: --oracle TYPE=KIND[:KEY=VALUE,...], e.g. --oracle unary=boosting:rounds=20,max_depth=4 \
         (values: numbers, true/false, none; nested keys with dots). Kinds, hyper-parameters [default]:\n",
    );
    for kind in BUILTIN_KINDS {
        text += &format!("\n  {kind}: {}\n", kind_summary(kind));
        for h in hyper_parameters(kind).unwrap_or_default() {
            let default = if h.default.is_null() { "none".to_string() } else { h.default.to_string() };
            text += &format!("      {} [{default}]  {}\n", h.name, h.meaning);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hyper_parameter_has_a_meaning_and_builds_from_its_default() {
        for kind in BUILTIN_KINDS {
            for h in hyper_parameters(kind).unwrap() {
                assert!(!h.meaning.is_empty(), "{kind}.{} has no meaning in MEANINGS", h.name);
                // Setting the default explicitly on the command line is accepted.
                let value = if h.default.is_null() { "none".to_string() } else { h.default.to_string() };
                let (_, spec) = parse_oracle_arg(&format!("t={kind}:{}={value}", h.name)).unwrap();
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
