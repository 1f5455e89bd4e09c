//! Oracles: fit a multiclass logistic loss with a fixed per-example bias,
//! warm-started, for any function class (Domke 2013, Theorem 4; docs/MATH.md §4–5).
//!
//! The contract ([`Oracle`], [`Model`], [`Problem`], L-BFGS, errors) is the
//! crate `structlearn-oracle-contract` (`oracle_contract`), re-exported here
//! whole ([`contract`], [`problem`], [`optim`]); a function-class crate needs
//! only that one. This crate adds the built-in classes and [`ModelRegistry`]. Built-in classes: [`zero`],
//! [`constant`], [`linear`], [`boosting`], [`mlp`], [`indexed`] (untied
//! linear functions, one per group) and [`fixed`] (a table that is never
//! learned, `−∞` allowed: hard constraints). [`step`] is the one-gradient-step
//! update of Hazan & Urtasun's learner for classes linear in their parameters.
//! A new function class is a crate that depends on `oracle_contract` (or on
//! this one) and implements [`Oracle`] and [`Model`].

pub mod boosting;
pub mod builtin;
pub mod constant;
pub mod fixed;
pub mod indexed;
pub mod linear;
pub mod mlp;
mod registry;
pub mod step;
pub mod zero;

#[doc(hidden)]
pub use oracle_contract::check_size;
pub use oracle_contract::{
    BiasRows, Collective, Features, FitContext, FitLosses, MAX_MAGNITUDE, MAX_VALUES, Model, ModelLoader, MonotoneFit,
    Oracle, OracleError, Problem, SingleProcess, ThreadRanks, check_model_shape, check_score_buffer, collective,
    contract, decode, downcast_model, downcast_warm, encode, fit_monotone, fit_monotone_scored, impl_model_plumbing,
    log_sum_exp, logistic_loss, model_loss, optim, problem, row_loss,
};
pub use registry::ModelRegistry;
