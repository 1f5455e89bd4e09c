//! [`ModelRegistry`]: model loaders by kind name, with the built-in classes'.

use std::collections::BTreeMap;

use crate::{Model, ModelLoader, OracleError};

/// Maps model kinds to loaders. Function classes from other crates register
/// their own loader, so model files can hold them without editing this crate.
///
/// ```
/// use oracles::{Model, ModelRegistry};
/// let registry = ModelRegistry::with_builtin();
/// assert_eq!(
///     registry.kinds().collect::<Vec<_>>(),
///     ["boosting", "constant", "fixed", "indexed-linear", "linear", "mlp", "zero"]
/// );
/// let m = oracles::linear::LinearModel::zeros(2, 2);
/// let back = registry.load("linear", &m.to_bytes().unwrap()).unwrap();
/// assert_eq!(back.dim(), 2);
/// // Classes from other crates: registry.register("my-kind", my_crate::load)?
/// ```
#[derive(Debug, Clone, Default)]
pub struct ModelRegistry {
    loaders: BTreeMap<String, ModelLoader>,
}

impl ModelRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry with the built-in classes: zero, constant, linear, boosting, mlp,
    /// indexed-linear, fixed.
    pub fn with_builtin() -> Self {
        let mut r = Self::new();
        for class in crate::builtin::classes() {
            r.loaders.insert(class.kind.to_string(), class.loader);
        }
        r
    }

    /// Registers the loader for `kind`; errors if the kind is already registered.
    pub fn register(&mut self, kind: &str, loader: ModelLoader) -> Result<(), OracleError> {
        if self.loaders.contains_key(kind) {
            return Err(OracleError::DuplicateKind(kind.to_string()));
        }
        self.loaders.insert(kind.to_string(), loader);
        Ok(())
    }

    /// Loads a model of `kind` from its bytes.
    pub fn load(&self, kind: &str, bytes: &[u8]) -> Result<Box<dyn Model>, OracleError> {
        let loader = self.loaders.get(kind).ok_or_else(|| OracleError::UnknownKind(kind.to_string()))?;
        loader(bytes)
    }

    /// The registered kinds, sorted.
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.loaders.keys().map(String::as_str)
    }
}
