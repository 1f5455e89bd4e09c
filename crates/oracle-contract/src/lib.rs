//! The oracle contract (Domke 2013, Theorem 4; docs/MATH.md §4–5): what a
//! function class provides so that structured learning can use it.
//!
//! * [`Oracle`]: fits a multiclass logistic loss with a fixed per-row bias,
//!   `L(g) = Σ_k w_k [log Σ_y exp(g(φ_k, y) + b_k(y)) − g(φ_k, y_k) − b_k(y_k)]`,
//!   warm-started from its previous model, never returning a worse one
//!   ([`fit_monotone`]).
//! * [`Model`]: a fitted function `g(φ, y)` that scores rows of features
//!   into a caller-owned buffer and saves itself ([`encode`], [`decode`]).
//! * [`Problem`]: the features, labels, biases (stored or computed per row,
//!   [`BiasRows`]) and weights of one fit, validated on construction.
//! * [`optim`]: L-BFGS with a strong-Wolfe line search, for classes fitted
//!   by smooth minimisation; [`OracleError`]: typed errors.
//!
//! A function class of one's own is a crate that depends on this one (not on
//! the built-in classes of `structlearn-oracles`, which re-exports all of it)
//! and implements [`Oracle`] and [`Model`]; structlearn's `OracleRegistry`
//! then chooses it by name.

pub mod collective;
pub mod contract;
mod error;
pub mod optim;
pub mod problem;

pub use collective::{Collective, SingleProcess, ThreadRanks};
pub use contract::{
    FitContext, FitLosses, Model, ModelLoader, MonotoneFit, Oracle, check_model_shape, check_score_buffer, decode,
    downcast_model, downcast_warm, encode, fit_monotone, fit_monotone_scored, model_loss,
};
#[doc(hidden)]
pub use error::check_size;
pub use error::{MAX_MAGNITUDE, MAX_VALUES, OracleError};
pub use problem::{BiasRows, Features, Problem, log_sum_exp, logistic_loss, row_loss};
