//! The zero function class: `g(φ, y) = 0`. Nothing to fit; the structured
//! model is then driven by the other factor types alone.

use serde::{Deserialize, Serialize};

use crate::{FitContext, Model, Oracle, OracleError, Problem, check_score_buffer, decode};

/// Registry name of [`ZeroModel`].
pub const KIND: &str = "zero";

/// The zero oracle (no hyper-parameters).
///
/// ```
/// use oracles::{Features, FitContext, Oracle, Problem};
/// let x = [1.0, 2.0];
/// let p = Problem::new(Features::new(&x, 2, 1).unwrap(), &[0, 1], &[0.0; 4], 2, None).unwrap();
/// let m = oracles::zero::ZeroOracle.fit(&p, None, FitContext { seed: 0 }).unwrap();
/// assert_eq!(m.kind(), "zero"); // scores 0 for every class: the factor type is switched off
/// ```
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct ZeroOracle;

/// `g(φ, y) = 0` for inputs of dimension `dim` and `classes` outputs.
///
/// ```
/// use oracles::Model;
/// let m = oracles::zero::ZeroModel { dim: 2, classes: 4 };
/// let mut out = [1.0; 4];
/// m.score(oracles::Features::new(&[0.5, 0.5], 1, 2).unwrap(), &mut out).unwrap();
/// assert_eq!(out, [0.0; 4]);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZeroModel {
    /// Input dimension `d`.
    pub dim: usize,
    /// Number of classes `C`.
    pub classes: usize,
}

impl Oracle for ZeroOracle {
    fn kind(&self) -> &str {
        KIND
    }

    /// Fits over ranks are supported: nothing is learned from the rows.
    fn distributed(&self) -> bool {
        true
    }

    /// Scoring is zeros: potentials are recomputed, not stored.
    fn cheap_to_score(&self) -> bool {
        true
    }

    fn fixed_model(&self, dim: usize, classes: usize) -> Option<Result<Box<dyn Model>, OracleError>> {
        Some(Ok(Box::new(ZeroModel { dim, classes })))
    }

    fn validate(&self) -> Result<(), OracleError> {
        Ok(())
    }

    fn fit(
        &self,
        problem: &Problem<'_>,
        _warm: Option<&dyn Model>,
        _ctx: FitContext,
    ) -> Result<Box<dyn Model>, OracleError> {
        Ok(Box::new(ZeroModel { dim: problem.dim(), classes: problem.classes() }))
    }
}

impl Model for ZeroModel {
    crate::impl_model_plumbing!(KIND, to_json);
    fn dim(&self) -> usize {
        self.dim
    }
    fn classes(&self) -> usize {
        self.classes
    }
    fn score(&self, features: crate::Features<'_>, out: &mut [f64]) -> Result<(), OracleError> {
        crate::check_model_shape(self, features.dim(), self.classes)?;
        check_score_buffer(features, self.classes, out)?;
        out.fill(0.0);
        Ok(())
    }
}

/// Loader for the registry.
///
/// ```
/// use oracles::Model;
/// let m = oracles::zero::ZeroModel { dim: 2, classes: 4 };
/// assert_eq!(oracles::zero::load(&m.to_bytes().unwrap()).unwrap().classes(), 4);
/// ```
pub fn load(bytes: &[u8]) -> Result<Box<dyn Model>, OracleError> {
    Ok(Box::new(decode::<ZeroModel>(KIND, bytes)?))
}
