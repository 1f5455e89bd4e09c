//! The built-in classes, listed once: what each is, what its settings mean,
//! how to build it from its settings and how to load its models. Both
//! registries are made from this list (`ModelRegistry::with_builtin` here,
//! `structlearn::OracleRegistry::with_builtin`), so a new built-in class is its
//! module plus one entry in [`classes`].

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{ModelLoader, Oracle, boosting, constant, fixed, indexed, linear, mlp, zero};

/// What each setting of a class means, by key (nested keys with dots; `*.leaf`
/// applies to the leaf `leaf` of every nested block).
pub type Meanings = &'static [(&'static str, &'static str)];

/// Builds an oracle from its complete settings (JSON, as its serde form) and
/// returns them as the oracle reads them.
pub type Build = fn(serde_json::Value) -> Result<(Box<dyn Oracle>, serde_json::Value), serde_json::Error>;

/// One built-in class.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinClass {
    /// Its kind name (in specifications and model files).
    pub kind: &'static str,
    /// What it is, in one line.
    pub summary: &'static str,
    /// What its settings mean.
    pub meanings: Meanings,
    /// Its default settings (empty for a class without settings).
    pub defaults: fn() -> serde_json::Map<String, serde_json::Value>,
    /// Its oracle from settings.
    pub build: Build,
    /// Its models' loader.
    pub loader: ModelLoader,
}

/// The class `O`'s entry.
const fn class<O: Oracle + Default + Serialize + DeserializeOwned + 'static>(
    kind: &'static str,
    summary: &'static str,
    meanings: Meanings,
    loader: ModelLoader,
) -> BuiltinClass {
    BuiltinClass { kind, summary, meanings, defaults: defaults::<O>, build: build::<O>, loader }
}

/// `O::default()`'s settings (empty if it has none).
pub fn defaults<O: Default + Serialize>() -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(O::default()) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    }
}

/// `O` from its settings, and the settings as `O` reads them.
pub fn build<O: Oracle + Default + Serialize + DeserializeOwned + 'static>(
    settings: serde_json::Value,
) -> Result<(Box<dyn Oracle>, serde_json::Value), serde_json::Error> {
    if settings.as_object().is_some_and(serde_json::Map::is_empty) && defaults::<O>().is_empty() {
        return Ok((Box::new(O::default()), serde_json::Value::Object(serde_json::Map::new())));
    }
    let oracle: O = serde_json::from_value(settings)?;
    let resolved = serde_json::to_value(&oracle)?;
    Ok((Box::new(oracle), resolved))
}

/// `meanings` followed by those of the nested L-BFGS block (`lbfgs.*`,
/// `leaf_lbfgs.*`) every class with one shares, as one `'static` list.
macro_rules! with_lbfgs {
    ($($key:expr => $meaning:expr),* $(,)?) => {{
        const MEANINGS: Meanings = &[
            $(($key, $meaning),)*
            ("*.max_iterations", "L-BFGS: most accepted steps, ≥ 1"),
            ("*.memory", "L-BFGS: curvature pairs kept, ≥ 1"),
            ("*.gradient_tolerance", "L-BFGS: stop once ‖∇‖ ≤ this"),
            ("*.relative_decrease_tolerance", "L-BFGS: stop once a step gains ≤ this × max(|f|, 1)"),
        ];
        MEANINGS
    }};
}

/// Meaning of the warm-start budget the L-BFGS classes share.
const WARM_MAX_ITERATIONS: &str = "L-BFGS steps of a warm-started fit inside learning, ≥ 1 (null: full fits)";

/// Every built-in class, in the order `--help` and the guide list them.
pub fn classes() -> [BuiltinClass; 7] {
    [
        class::<zero::ZeroOracle>(
            zero::KIND,
            "g = 0: the factor type contributes nothing (no hyper-parameters)",
            &[],
            zero::load,
        ),
        class::<constant::ConstantOracle>(
            constant::KIND,
            "a per-class constant, fitted by L-BFGS",
            with_lbfgs!["warm_max_iterations" => WARM_MAX_ITERATIONS],
            constant::load,
        ),
        class::<linear::LinearOracle>(
            linear::KIND,
            "multiclass logistic regression on the features, fitted by L-BFGS",
            with_lbfgs![
                "l2" => "ridge (λ/2)‖W‖² on the weights, ≥ 0",
                "warm_max_iterations" => WARM_MAX_ITERATIONS,
                "cold_max_iterations" => "L-BFGS steps of a fit from W = 0 (inside learning, the first iteration's), ≥ 1 (null: to the tolerances)",
            ],
            linear::load,
        ),
        class::<boosting::BoostingOracle>(
            boosting::KIND,
            "gradient-boosted regression trees (multiclass logistic loss)",
            with_lbfgs![
                "rounds" => "trees added per fit (the ensemble grows across learning iterations), ≥ 1",
                "shrinkage" => "step length ν of each tree, in (0, 1]",
                "subsample" => "rows drawn per round (all when fewer), ≥ 1",
                "min_child_fraction" => "least fraction of the subsample in each child of a split, in [0, 0.5]",
                "min_split_fraction" => "nodes holding less than this fraction are not split, in [0, 1]",
                "max_depth" => "most levels below the root (none: only the fractions limit), ≥ 1",
                "max_leaves" => "most leaves per tree, best splits first (none: no limit), ≥ 2",
                "bins" => "histogram bins per feature, in 2..=256",
                "leaf_l2" => "ridge λ on each leaf's values in the re-fit (and in the Newton gain), ≥ 0",
                "split_gain" => "split criterion: least-squares (the chapter's ‖G‖²/W) or newton (Σ G²/(H + λ))",
                "trees" => "per round: one multi-output tree (the chapter's) or one tree per-class (NIPS, LightGBM)",
                "leaf_values" => "refit (L-BFGS on the leaf's rows, the chapter's) or newton (one step −G/(H + λ), LightGBM's)",
            ],
            boosting::load,
        ),
        class::<mlp::MlpOracle>(
            mlp::KIND,
            "a one-hidden-layer perceptron trained by momentum SGD",
            &[
                ("hidden", "hidden units"),
                ("step_size", "momentum-SGD step size (papers: 0.25 unary, 0.05 pairwise)"),
                ("momentum", "momentum μ in [0, 1)"),
                ("minibatch", "rows per minibatch (capped at the rows)"),
                ("epochs", "passes over the data per fit"),
                ("init_scale", "standard deviation of a cold-start input weight, times 1/√d"),
                ("biases", "add hidden and output biases"),
                (
                    "step_halvings",
                    "retries of a warm fit that lowered nothing, each from the warm start at half the step",
                ),
            ],
            mlp::load,
        ),
        class::<indexed::IndexedLinearOracle>(
            indexed::KIND,
            "untied linear functions: one per group, the group index being the last feature",
            with_lbfgs![
                "l2" => "ridge (λ/2)‖W‖² on every group's weights, ≥ 0",
                "groups" => "number of groups (the last feature is the group index; 0: from the data)",
            ],
            indexed::load,
        ),
        class::<fixed::FixedOracle>(
            fixed::KIND,
            "a fixed table, −∞ on forbidden classes (hard constraints), never learned",
            &[
                ("table", "the score t_y of every class (finite; never learned)"),
                ("forbidden", "classes scored −∞: configurations a hard constraint forbids"),
            ],
            fixed::load,
        ),
    ]
}

/// The settings of a built-in class, typed: the form a program writes them in
/// (a specification `{"kind": "boosting", "rounds": 10}` reads as
/// `BuiltinOracle::Boosting(BoostingOracle { rounds: 10, ..Default::default() })`:
/// missing settings take their defaults, unknown ones are errors). The
/// registry reads the same specifications into the same oracles; a test
/// keeps the two in step.
///
/// ```
/// use oracles::boosting::BoostingOracle;
/// use oracles::builtin::BuiltinOracle;
/// let typed = BuiltinOracle::Boosting(BoostingOracle { rounds: 10, ..Default::default() });
/// let read: BuiltinOracle = serde_json::from_value(serde_json::json!({"kind": "boosting", "rounds": 10})).unwrap();
/// assert_eq!(read, typed);
/// assert!(serde_json::from_value::<BuiltinOracle>(serde_json::json!({"kind": "boosting", "round": 10})).is_err());
/// let oracle = typed.into_oracle().unwrap(); // validated
/// assert_eq!(oracle.kind(), "boosting");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum BuiltinOracle {
    /// [`zero::ZeroOracle`] (no settings).
    Zero(NoSettings),
    /// [`constant::ConstantOracle`].
    Constant(constant::ConstantOracle),
    /// [`linear::LinearOracle`].
    Linear(linear::LinearOracle),
    /// [`boosting::BoostingOracle`].
    Boosting(boosting::BoostingOracle),
    /// [`mlp::MlpOracle`].
    Mlp(mlp::MlpOracle),
    /// [`indexed::IndexedLinearOracle`].
    IndexedLinear(indexed::IndexedLinearOracle),
    /// [`fixed::FixedOracle`].
    Fixed(fixed::FixedOracle),
}

/// The settings of a class that has none (any key is an error).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoSettings {}

impl BuiltinOracle {
    /// The class's kind name.
    pub fn kind(&self) -> &'static str {
        match self {
            BuiltinOracle::Zero(_) => zero::KIND,
            BuiltinOracle::Constant(_) => constant::KIND,
            BuiltinOracle::Linear(_) => linear::KIND,
            BuiltinOracle::Boosting(_) => boosting::KIND,
            BuiltinOracle::Mlp(_) => mlp::KIND,
            BuiltinOracle::IndexedLinear(_) => indexed::KIND,
            BuiltinOracle::Fixed(_) => fixed::KIND,
        }
    }

    /// The oracle, its settings validated ([`Oracle::validate`]).
    pub fn into_oracle(self) -> Result<Box<dyn Oracle>, crate::OracleError> {
        let oracle: Box<dyn Oracle> = match self {
            BuiltinOracle::Zero(_) => Box::new(zero::ZeroOracle),
            BuiltinOracle::Constant(o) => Box::new(o),
            BuiltinOracle::Linear(o) => Box::new(o),
            BuiltinOracle::Boosting(o) => Box::new(o),
            BuiltinOracle::Mlp(o) => Box::new(o),
            BuiltinOracle::IndexedLinear(o) => Box::new(o),
            BuiltinOracle::Fixed(o) => Box::new(o),
        };
        oracle.validate()?;
        Ok(oracle)
    }
}
