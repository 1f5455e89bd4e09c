//! Building the built-in oracles from names and JSON hyper-parameters (for
//! the command line and configuration files).
//!
//! A specification is a JSON object with `"kind"` (`zero`, `constant`,
//! `linear`, `boosting`, `mlp`, `indexed-linear`, `fixed`) and any hyper-parameters of that class; missing
//! ones take the class's defaults, unknown ones are an error.
//!
//! ```
//! let o = structlearn::oracle_config::oracle_from_json(&serde_json::json!({"kind": "boosting", "rounds": 5})).unwrap();
//! assert_eq!(o.kind(), "boosting");
//! assert!(structlearn::oracle_config::oracle_from_json(&serde_json::json!({"kind": "linear", "nope": 1})).is_err());
//! ```

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
pub fn builtin_oracle(kind: &str) -> Result<Box<dyn Oracle>, LearnError> {
    oracle_from_json(&serde_json::json!({ "kind": kind }))
}

/// A built-in oracle from `{"kind": ..., hyper-parameters...}` (module docs).
pub fn oracle_from_json(spec: &Value) -> Result<Box<dyn Oracle>, LearnError> {
    let obj =
        spec.as_object().ok_or_else(|| LearnError::Config(format!("oracle specification {spec} is not an object")))?;
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .ok_or_else(|| LearnError::Config(format!("oracle specification {spec} has no \"kind\"")))?;
    let mut params = obj.clone();
    params.remove("kind");
    let oracle: Box<dyn Oracle> = match kind {
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
    Ok(oracle)
}

fn build<O: Oracle + Default + Serialize + DeserializeOwned + 'static>(
    kind: &str,
    params: serde_json::Map<String, Value>,
    unit: bool,
) -> Result<Box<dyn Oracle>, LearnError> {
    if unit {
        if let Some(key) = params.keys().next() {
            return Err(LearnError::Config(format!("oracle `{kind}` has no hyper-parameter `{key}`")));
        }
        return Ok(Box::new(O::default()));
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
    Ok(Box::new(oracle))
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
