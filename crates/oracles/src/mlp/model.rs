//! The fitted network ([`MlpModel`]): its parameters, scoring, JSON export
//! and loading.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::MlpOracle;
use super::layout::Layout;
use super::passes::{Rows, evaluate_rows};
use super::{EVAL_CHUNK, EVAL_ROWS, KIND};
use crate::{Features, Model, OracleError, check_model_shape, check_score_buffer, decode};

/// A fitted MLP `g(φ, y) = (W tanh(V φ + c) + a)_y` (`c`, `a` absent unless
/// fitted with [`MlpOracle::biases`]).
///
/// ```
/// use oracles::{Features, FitContext, Oracle, Problem};
/// let oracle = oracles::mlp::MlpOracle { hidden: 4, epochs: 5, ..Default::default() };
/// let x = [0.0, 1.0, 0.2, 1.0, 0.8, 1.0, 1.0, 1.0];
/// let p = Problem::new(Features::new(&x, 4, 2).unwrap(), &[0, 0, 1, 1], &[0.0; 8], 2, None).unwrap();
/// let model = oracle.fit(&p, None, FitContext { seed: 7 }).unwrap();
/// let mlp = model.as_any().downcast_ref::<oracles::mlp::MlpModel>().unwrap();
/// assert_eq!(mlp.hidden(), 4);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlpModel {
    pub(super) layout: Layout,
    pub(super) params: Vec<f64>,
}

impl MlpModel {
    /// Hidden units `H`.
    pub fn hidden(&self) -> usize {
        self.layout.hidden
    }

    /// Whether the model has the hidden and output biases `c`, `a`.
    pub fn has_biases(&self) -> bool {
        self.layout.biases
    }

    /// Input weights `V`, stored input-major: entry `i · H + j` is `V_{j,i}`.
    pub fn input_weights(&self) -> &[f64] {
        &self.params[self.layout.v()]
    }

    /// Hidden bias `c` (`H` values; empty without biases).
    pub fn hidden_bias(&self) -> &[f64] {
        &self.params[self.layout.hidden_bias()]
    }

    /// Output weights `W`, row-major `C × H`: entry `y · H + j` is `W_{y,j}`.
    pub fn output_weights(&self) -> &[f64] {
        &self.params[self.layout.w()]
    }

    /// Output bias `a` (`C` values; empty without biases).
    pub fn output_bias(&self) -> &[f64] {
        &self.params[self.layout.output_bias()]
    }
}

impl Model for MlpModel {
    crate::impl_model_plumbing!(KIND);

    fn dim(&self) -> usize {
        self.layout.dim
    }

    fn classes(&self) -> usize {
        self.layout.classes
    }

    fn score(&self, features: Features<'_>, out: &mut [f64]) -> Result<(), OracleError> {
        check_model_shape(self, features.dim(), self.layout.classes)?;
        check_score_buffer(features, self.layout.classes, out)?;
        let c = self.layout.classes;
        let packed = self.layout.pack(&self.params);
        let net = self.layout.net(&packed);
        out.par_chunks_mut(EVAL_CHUNK * c).enumerate().for_each(|(chunk, out)| {
            let mut block = Rows::new(self.layout, EVAL_ROWS);
            let start = chunk * EVAL_CHUNK;
            evaluate_rows(&net, features, None, (start, start + out.len() / c), &mut block, Some(out), 0.0);
        });
        Ok(())
    }

    /// `{dim, classes, hidden, V (H × d), c, W (C × H), a}`, weights as nested rows
    /// (`c`, `a` empty without biases).
    fn to_json(&self) -> Option<serde_json::Value> {
        let (d, h) = (self.layout.dim, self.layout.hidden);
        let v: Vec<Vec<f64>> = (0..h).map(|j| (0..d).map(|i| self.input_weights()[i * h + j]).collect()).collect();
        let w: Vec<&[f64]> = self.output_weights().chunks_exact(h).collect();
        Some(serde_json::json!({
            "dim": d,
            "classes": self.layout.classes,
            "hidden": h,
            "V": v,
            "c": self.hidden_bias(),
            "W": w,
            "a": self.output_bias(),
        }))
    }
}

/// Loader for the registry: decodes an [`MlpModel`] and checks that its
/// parameter vector matches its shape and is finite.
///
/// ```
/// use oracles::{Features, FitContext, Model, Oracle, Problem};
/// let x = [0.0, 1.0];
/// let p = Problem::new(Features::new(&x, 2, 1).unwrap(), &[0, 1], &[0.0; 4], 2, None).unwrap();
/// let m = oracles::mlp::MlpOracle { hidden: 2, ..Default::default() }.fit(&p, None, FitContext { seed: 0 }).unwrap();
/// assert_eq!(oracles::mlp::load(&m.to_bytes().unwrap()).unwrap().kind(), "mlp");
/// ```
pub fn load(bytes: &[u8]) -> Result<Box<dyn Model>, OracleError> {
    let model = decode::<MlpModel>(KIND, bytes)?;
    let l = model.layout;
    let consistent = l.hidden > 0
        && l.classes >= 2
        && l.checked_len() == Some(model.params.len())
        && model.params.iter().all(|p| p.is_finite());
    if !consistent {
        return Err(OracleError::InvalidModel {
            kind: KIND.to_string(),
            reason: format!(
                "{} parameters (all finite: {}) for {} features, {} hidden units and {} classes",
                model.params.len(),
                model.params.iter().all(|p| p.is_finite()),
                l.dim,
                l.hidden,
                l.classes
            ),
        });
    }
    // |tanh| ≤ 1, so a score is at most Σ_j |W_yj| + |a_y|: that must stay finite.
    let w = model.output_weights();
    let bound = (0..l.classes).fold(0.0f64, |m, y| {
        let row: f64 = w[y * l.hidden..(y + 1) * l.hidden].iter().map(|v| v.abs()).sum();
        m.max(row + model.output_bias().get(y).map_or(0.0, |a| a.abs()))
    });
    if !bound.is_finite() {
        return Err(OracleError::InvalidModel {
            kind: KIND.to_string(),
            reason: "the output weights add up beyond the largest double".into(),
        });
    }
    Ok(Box::new(model))
}
