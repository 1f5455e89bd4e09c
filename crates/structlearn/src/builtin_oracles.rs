//! The built-in oracle classes, registered in [`OracleRegistry::with_builtin`]
//! exactly as a plug-in registers its own: one `register` call per class,
//! with what it is and what each of its settings means. A new built-in class
//! is its module in `oracles` plus one call here.

use oracles::{boosting, constant, fixed, indexed, linear, mlp, zero};

use crate::LearnError;
use crate::registry::{Meanings, OracleRegistry};

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

/// Registers every built-in class.
pub(crate) fn register(r: &mut OracleRegistry) -> Result<(), LearnError> {
    r.register::<zero::ZeroOracle>(
        zero::KIND,
        "g = 0: the factor type contributes nothing (no hyper-parameters)",
        &[],
    )?;
    r.register::<constant::ConstantOracle>(constant::KIND, "a per-class constant, fitted by L-BFGS", with_lbfgs![])?;
    r.register::<linear::LinearOracle>(
        linear::KIND,
        "multiclass logistic regression on the features, fitted by L-BFGS",
        with_lbfgs![
            "l2" => "ridge (λ/2)‖W‖² on the weights, ≥ 0",
            "warm_max_iterations" => "L-BFGS steps of a warm-started fit inside learning, ≥ 1 (null: full fits)",
        ],
    )?;
    r.register::<boosting::BoostingOracle>(
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
    )?;
    r.register::<mlp::MlpOracle>(
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
            ("step_halvings", "retries of a warm fit that lowered nothing, each from the warm start at half the step"),
        ],
    )?;
    r.register::<indexed::IndexedLinearOracle>(
        indexed::KIND,
        "untied linear functions: one per group, the group index being the last feature",
        with_lbfgs![
            "l2" => "ridge (λ/2)‖W‖² on every group's weights, ≥ 0",
            "groups" => "number of groups (the last feature is the group index; 0: from the data)",
        ],
    )?;
    r.register::<fixed::FixedOracle>(
        fixed::KIND,
        "a fixed table, −∞ on forbidden classes (hard constraints), never learned",
        &[
            ("table", "the score t_y of every class (finite; never learned)"),
            ("forbidden", "classes scored −∞: configurations a hard constraint forbids"),
        ],
    )
}
