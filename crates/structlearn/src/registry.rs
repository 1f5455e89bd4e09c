//! The oracle registry: oracle constructors by kind name, beside
//! [`oracles::ModelRegistry`] (which loads the models they produce).
//!
//! A specification `{"kind": K, settings…}` (a configuration file, `--oracle
//! TYPE=K:KEY=VALUE`, the Python package) is turned into an oracle by the
//! constructor registered under `K`; missing settings take the class's
//! defaults, unknown ones are errors, and the oracle's
//! [`Oracle::validate`] runs before any work. The built-in classes are
//! registered exactly as a plug-in is ([`OracleRegistry::with_builtin`]), so
//! every learner, the command line and programs built on the library can
//! choose a plug-in oracle by name.
//!
//! ```
//! use structlearn::registry::OracleRegistry;
//! let registry = OracleRegistry::with_builtin();
//! let oracle = registry.build(&serde_json::json!({"kind": "boosting", "rounds": 5})).unwrap();
//! assert_eq!(oracle.kind(), "boosting");
//! let err = registry.build(&serde_json::json!({"kind": "boosting", "round": 5})).unwrap_err();
//! assert!(err.to_string().contains("round"));
//! ```

use std::sync::OnceLock;

use oracles::Oracle;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::LearnError;

pub use oracles::builtin::Meanings;

/// A constructor: the settings of a specification without `"kind"` → the
/// oracle and its settings spelled out (defaults filled in).
pub type OracleConstructor =
    Box<dyn Fn(Map<String, Value>) -> Result<(Box<dyn Oracle>, Value), LearnError> + Send + Sync>;

/// One registered kind.
struct Entry {
    kind: String,
    summary: &'static str,
    meanings: Meanings,
    /// The settings' defaults (`{}` for a class without settings).
    defaults: Value,
    construct: OracleConstructor,
}

/// Oracle constructors by kind name (module docs).
///
/// ```
/// use structlearn::registry::OracleRegistry;
/// let mut registry = OracleRegistry::with_builtin();
/// // A plug-in class registers itself with its settings' meanings (here: the linear class under a new name).
/// registry
///     .register::<oracles::linear::LinearOracle>("my-linear", "a linear class", &[("l2", "ridge")])
///     .unwrap();
/// assert!(registry.kinds().any(|k| k == "my-linear"));
/// assert!(registry.register::<oracles::linear::LinearOracle>("linear", "again", &[]).is_err());
/// ```
#[derive(Default)]
pub struct OracleRegistry {
    entries: Vec<Entry>,
}

impl std::fmt::Debug for OracleRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OracleRegistry").field("kinds", &self.kinds().collect::<Vec<_>>()).finish()
    }
}

impl OracleRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in classes (`zero`, `constant`, `linear`, `boosting`, `mlp`,
    /// `indexed-linear`, `fixed`), from their one list,
    /// [`oracles::builtin::classes`], by the same code as a plug-in's.
    pub fn with_builtin() -> Self {
        let mut registry = Self::new();
        for class in oracles::builtin::classes() {
            registry
                .register_built(class.kind, class.summary, class.meanings, (class.defaults)(), class.build)
                .expect("the built-in kinds are distinct");
        }
        registry
    }

    /// The built-in registry, built once.
    pub fn builtin() -> &'static Self {
        static BUILTIN: OnceLock<OracleRegistry> = OnceLock::new();
        BUILTIN.get_or_init(Self::with_builtin)
    }

    /// Registers the class `O` under `kind`: its settings are `O`'s serde
    /// fields over `O::default()` (a class that serialises to no object has
    /// no settings), `summary` says in one line what it is, `meanings` what
    /// each setting does (used by [`OracleRegistry::hyper_parameters`], the
    /// command line's help and the guide's table). Errors if `kind` is taken.
    pub fn register<O>(&mut self, kind: &str, summary: &'static str, meanings: Meanings) -> Result<(), LearnError>
    where
        O: Oracle + Default + Serialize + DeserializeOwned + 'static,
    {
        self.register_built(kind, summary, meanings, oracles::builtin::defaults::<O>(), oracles::builtin::build::<O>)
    }

    /// Registers a class given by its default settings and its builder (the
    /// settings over the defaults, unknown keys refused).
    fn register_built(
        &mut self,
        kind: &str,
        summary: &'static str,
        meanings: Meanings,
        defaults: Map<String, Value>,
        build: oracles::builtin::Build,
    ) -> Result<(), LearnError> {
        let owned = kind.to_string();
        let template = defaults.clone();
        let construct: OracleConstructor = Box::new(move |params| merged(&owned, &template, params, build));
        self.register_constructor(kind, summary, meanings, Value::Object(defaults), construct)
    }

    /// Registers a constructor of its own under `kind` (for classes whose
    /// settings are not a serde struct over defaults); `defaults` lists the
    /// settings (an object) for help and documentation.
    pub fn register_constructor(
        &mut self,
        kind: &str,
        summary: &'static str,
        meanings: Meanings,
        defaults: Value,
        construct: OracleConstructor,
    ) -> Result<(), LearnError> {
        if self.entry(kind).is_some() {
            return Err(LearnError::Config(format!("oracle kind `{kind}` is registered twice")));
        }
        self.entries.push(Entry { kind: kind.to_string(), summary, meanings, defaults, construct });
        Ok(())
    }

    /// The registered kinds, in registration order.
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.kind.as_str())
    }

    fn entry(&self, kind: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.kind == kind)
    }

    fn entry_or_err(&self, kind: &str) -> Result<&Entry, LearnError> {
        self.entry(kind).ok_or_else(|| {
            spec_error(
                None,
                None,
                format!("unknown oracle kind `{kind}` (registered: {})", self.kinds().collect::<Vec<_>>().join(", ")),
            )
        })
    }

    /// The oracle of `{"kind": ..., settings...}`, validated.
    pub fn build(&self, spec: &Value) -> Result<Box<dyn Oracle>, LearnError> {
        self.resolve(spec).map(|(oracle, _)| oracle)
    }

    /// The oracle of `spec` and `spec` with every setting spelled out
    /// (defaults filled in, numbers as the oracle reads them), so that two
    /// specifications of the same oracle compare equal however they were
    /// written.
    pub fn resolve(&self, spec: &Value) -> Result<(Box<dyn Oracle>, Value), LearnError> {
        let obj = spec
            .as_object()
            .ok_or_else(|| spec_error(None, None, format!("oracle specification {spec} is not an object")))?;
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .ok_or_else(|| spec_error(None, None, format!("oracle specification {spec} has no \"kind\"")))?;
        let entry = self.entry_or_err(kind)?;
        let mut params = obj.clone();
        params.remove("kind");
        let (oracle, mut resolved) = (entry.construct)(params)?;
        oracle.validate().map_err(|e| {
            let setting = match &e {
                oracles::OracleError::InvalidHyperParameter { name, .. } => Some(name.to_string()),
                _ => None,
            };
            spec_error(Some(kind), setting, format!("oracle `{kind}`: {e}"))
        })?;
        if let Value::Object(map) = &mut resolved {
            map.insert("kind".into(), kind.into());
        }
        Ok((oracle, resolved))
    }

    /// One line of what `kind` is.
    pub fn summary(&self, kind: &str) -> Result<&'static str, LearnError> {
        self.entry_or_err(kind).map(|e| e.summary)
    }

    /// The settings of `kind` with their defaults and meanings, nested keys
    /// flattened with dots.
    ///
    /// ```
    /// let hp = structlearn::registry::OracleRegistry::builtin().hyper_parameters("boosting").unwrap();
    /// assert_eq!(hp.iter().find(|h| h.name == "rounds").unwrap().default, 20);
    /// assert!(hp.iter().any(|h| h.name == "leaf_lbfgs.max_iterations"));
    /// ```
    pub fn hyper_parameters(&self, kind: &str) -> Result<Vec<HyperParameter>, LearnError> {
        let entry = self.entry_or_err(kind)?;
        let mut out = Vec::new();
        flatten(entry.meanings, "", &entry.defaults, &mut out);
        Ok(out)
    }

    /// The table of every registered kind's settings (Markdown: kind, key,
    /// default, meaning) — the guide's table, checked against this by a test.
    pub fn markdown_table(&self) -> String {
        let mut text = String::from("| kind | setting | default | meaning |\n|---|---|---|---|\n");
        for e in &self.entries {
            let settings = self.hyper_parameters(&e.kind).unwrap_or_default();
            if settings.is_empty() {
                text += &format!("| `{}` | — | — | {} |\n", e.kind, e.summary);
            }
            for h in settings {
                text += &format!(
                    "| `{}` | `{}` | `{}` | {} |\n",
                    e.kind,
                    h.name,
                    h.default_text(),
                    h.meaning.replace('|', "\\|")
                );
            }
        }
        text
    }

    /// What `structlearn train --help` prints about oracles: every kind, its
    /// settings, defaults and meanings.
    pub fn help(&self) -> String {
        let mut text = String::from(
            "Oracles: --oracle TYPE=KIND[:KEY=VALUE,...], e.g. --oracle unary=boosting:rounds=20,max_depth=4 \
             (values: numbers, true/false, none; nested keys with dots). Kinds, hyper-parameters [default]:\n",
        );
        for e in &self.entries {
            text += &format!("\n  {}: {}\n", e.kind, e.summary);
            for h in self.hyper_parameters(&e.kind).unwrap_or_default() {
                text += &format!("      {} [{}]  {}\n", h.name, h.default_text(), h.meaning);
            }
        }
        text
    }
}

/// One setting of a registered oracle.
///
/// ```
/// for h in structlearn::registry::OracleRegistry::builtin().hyper_parameters("linear").unwrap() {
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

impl HyperParameter {
    /// The default as the command line writes it (`none` for no value).
    pub fn default_text(&self) -> String {
        if self.default.is_null() { "none".to_string() } else { self.default.to_string() }
    }
}

fn flatten(meanings: Meanings, prefix: &str, value: &Value, out: &mut Vec<HyperParameter>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                flatten(meanings, &if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") }, v, out);
            }
        }
        v => {
            let leaf = prefix.rsplit('.').next().unwrap_or(prefix);
            let nested = prefix.contains('.');
            let meaning = meanings
                .iter()
                .find(|(key, _)| *key == prefix || (nested && key.strip_prefix("*.") == Some(leaf)))
                .map_or("", |m| m.1);
            out.push(HyperParameter { name: prefix.to_string(), default: v.clone(), meaning });
        }
    }
}

/// `build` applied to `params` over `defaults` (unknown keys refused), and
/// the settings as the oracle reads them (`{}` for a class without settings).
fn merged(
    kind: &str,
    defaults: &Map<String, Value>,
    params: Map<String, Value>,
    build: oracles::builtin::Build,
) -> Result<(Box<dyn Oracle>, Value), LearnError> {
    let mut merged = defaults.clone();
    if merged.is_empty()
        && let Some(key) = params.keys().next()
    {
        return Err(spec_error(
            Some(kind),
            Some(key.clone()),
            format!("oracle `{kind}` has no hyper-parameter `{key}`"),
        ));
    }
    for (key, value) in params {
        match merged.get_mut(&key) {
            Some(slot) => merge(slot, value, kind, &key)?,
            None => {
                let known: Vec<&String> = merged.keys().collect();
                return Err(spec_error(
                    Some(kind),
                    Some(key.clone()),
                    format!("oracle `{kind}` has no hyper-parameter `{key}` (known: {known:?})"),
                ));
            }
        }
    }
    build(Value::Object(merged))
        .map_err(|e| spec_error(Some(kind), None, format!("oracle `{kind}`: invalid hyper-parameters: {e}")))
}

/// [`LearnError::OracleSpec`].
fn spec_error(kind: Option<&str>, setting: Option<String>, reason: String) -> LearnError {
    LearnError::OracleSpec { kind: kind.map(str::to_string), setting, reason }
}

/// Overlays `value` on `slot`, recursing into nested objects (e.g. L-BFGS options).
fn merge(slot: &mut Value, value: Value, kind: &str, path: &str) -> Result<(), LearnError> {
    match (slot, value) {
        (Value::Object(dst), Value::Object(src)) => {
            for (k, v) in src {
                let sub = format!("{path}.{k}");
                match dst.get_mut(&k) {
                    Some(s) => merge(s, v, kind, &sub)?,
                    None => {
                        let reason = format!("oracle `{kind}` has no hyper-parameter `{sub}`");
                        return Err(spec_error(Some(kind), Some(sub), reason));
                    }
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

#[cfg(test)]
mod tests {
    use oracles::builtin::BuiltinOracle;

    use super::*;

    /// The registry and the typed settings read every built-in specification
    /// into the same settings, refuse the same unknown keys, and know the same
    /// kinds.
    #[test]
    fn the_registry_and_the_typed_settings_agree_on_every_builtin_class() {
        let registry = OracleRegistry::builtin();
        let kinds: Vec<&str> = registry.kinds().collect();
        assert_eq!(kinds, oracles::builtin::classes().map(|c| c.kind));
        for kind in kinds {
            let mut spec = serde_json::json!({ "kind": kind });
            if kind == oracles::fixed::KIND {
                spec = serde_json::json!({ "kind": kind, "table": [0.5, 0.0], "forbidden": [1] });
            }
            // One setting off its default where the class has one.
            if let Some(h) = registry.hyper_parameters(kind).unwrap().iter().find(|h| h.default.is_u64()) {
                let mut slot = &mut spec;
                let parts: Vec<&str> = h.name.split('.').collect();
                for part in &parts[..parts.len() - 1] {
                    slot = slot.as_object_mut().unwrap().entry(part.to_string()).or_insert(serde_json::json!({}));
                }
                let default = h.default.as_u64().unwrap();
                slot[parts[parts.len() - 1]] = serde_json::json!(if default > 2 { default - 1 } else { default + 1 });
            }
            let (_, resolved) = registry.resolve(&spec).unwrap();
            let typed: BuiltinOracle = serde_json::from_value(spec.clone()).unwrap();
            assert_eq!(typed.kind(), kind);
            assert_eq!(serde_json::to_value(&typed).unwrap(), resolved, "{kind}");
            assert!(typed.into_oracle().is_ok(), "{kind}");
            spec["no_such_setting"] = serde_json::json!(1);
            assert!(serde_json::from_value::<BuiltinOracle>(spec.clone()).is_err(), "{kind}");
            let err = registry.build(&spec).unwrap_err();
            assert!(
                matches!(&err, LearnError::OracleSpec { kind: Some(k), setting: Some(s), .. } if k == kind && s == "no_such_setting"),
                "{err:?}"
            );
        }
    }

    /// Refusals name the kind and the setting: out of range, unknown kind.
    #[test]
    fn refused_specifications_name_the_kind_and_the_setting() {
        let registry = OracleRegistry::builtin();
        let err = registry.build(&serde_json::json!({"kind": "boosting", "rounds": 0})).unwrap_err();
        assert!(
            matches!(&err, LearnError::OracleSpec { kind: Some(k), setting: Some(s), .. } if k == "boosting" && s == "rounds"),
            "{err:?}"
        );
        let err = registry.build(&serde_json::json!({"kind": "linear", "lbfgs": {"memry": 3}})).unwrap_err();
        assert!(matches!(&err, LearnError::OracleSpec { setting: Some(s), .. } if s == "lbfgs.memry"), "{err:?}");
        let err = registry.build(&serde_json::json!({"kind": "forest"})).unwrap_err();
        assert!(matches!(&err, LearnError::OracleSpec { kind: None, .. }) && err.to_string().contains("forest"));
    }
}
