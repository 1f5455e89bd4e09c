//! Oracles: fit a multiclass logistic loss with a fixed per-example bias,
//! warm-started, for any function class (Domke 2013, Theorem 4; docs/MATH.md §4–5).
//!
//! The contract lives in [`contract`] ([`Oracle`], [`Model`], [`ModelRegistry`]);
//! the problem and its loss in [`problem`]. Built-in classes: [`zero`],
//! [`constant`], [`linear`], [`boosting`], [`mlp`], [`indexed`] (untied
//! linear functions, one per group) and [`fixed`] (a table that is never
//! learned, `−∞` allowed: hard constraints). [`step`] is the one-gradient-step
//! update of Hazan & Urtasun's learner for classes linear in their parameters.
//! A new function class is a crate that depends on this one and implements
//! [`Oracle`] and [`Model`].

pub mod boosting;
pub mod constant;
pub mod contract;
mod error;
pub mod fixed;
pub mod indexed;
pub mod linear;
pub mod mlp;
pub mod optim;
pub mod problem;
pub mod step;
pub mod zero;

pub use contract::{
    FitContext, FitLosses, Model, ModelLoader, ModelRegistry, MonotoneFit, Oracle, check_model_shape,
    check_score_buffer, decode, downcast_model, downcast_warm, encode, fit_monotone, fit_monotone_scored, model_loss,
};
pub use error::{MAX_MAGNITUDE, MAX_VALUES, OracleError};
pub use problem::{BiasRows, Features, Problem, log_sum_exp, logistic_loss, row_loss};

/// Loaders of the built-in model kinds, for [`ModelRegistry::with_builtin`].
pub(crate) fn builtin_loaders() -> Vec<(&'static str, ModelLoader)> {
    vec![
        (zero::KIND, zero::load),
        (constant::KIND, constant::load),
        (linear::KIND, linear::load),
        (boosting::KIND, boosting::load),
        (mlp::KIND, mlp::load),
        (indexed::KIND, indexed::load),
        (fixed::KIND, fixed::load),
    ]
}
