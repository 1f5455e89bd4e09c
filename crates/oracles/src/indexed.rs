//! The indexed linear function class: one linear function per **group**,
//! `g(φ, y) = (W_{φ_last} φ_{<last})_y`, where the last feature of a row is its
//! group index (an integer `0 ≤ i < groups`) and the others are the inputs.
//!
//! This is how a structured model gets **untied** parameters (Hazan & Urtasun
//! 2010; docs/MATH.md §6.4) without one factor type per region: the features
//! of every region carry the region's position as the group index, so each
//! vertex (or edge) of a grid has its own weights while the data set, the
//! pooled oracle problems and the learners stay the same. With one group it
//! is the [`crate::linear`] class.
//!
//! The oracle ([`IndexedLinearOracle`]) minimises, like the linear one,
//! `J(W) = L(W) + (λ/2)‖W‖²` by L-BFGS, warm-started; the groups are
//! independent problems solved jointly. A row whose index is not an integer
//! in range is an [`OracleError::GroupIndex`] error.
//!
//! ```
//! use oracles::indexed::IndexedLinearModel;
//! use oracles::{Features, Model};
//! // Two groups, one input feature plus the index, two classes.
//! let m = IndexedLinearModel::new(2, 2, 2, vec![1.0, -1.0, 5.0, 0.0]).unwrap();
//! let x = [2.0, 0.0, 2.0, 1.0]; // rows (input 2, group 0) and (input 2, group 1)
//! let mut s = [0.0; 4];
//! m.score(Features::new(&x, 2, 2).unwrap(), &mut s).unwrap();
//! assert_eq!(s, [2.0, -2.0, 10.0, 0.0]);
//! ```

use serde::{Deserialize, Serialize};

use crate::optim::{LbfgsOptions, LbfgsReport, lbfgs_minimize};
use crate::step::{LinearInParameters, penalised_loss, ridge};
use crate::{
    Features, FitContext, Model, Oracle, OracleError, Problem, check_model_shape, check_score_buffer, decode,
    downcast_model, downcast_warm,
};

/// Registry name of [`IndexedLinearModel`].
pub const KIND: &str = "indexed-linear";

/// The indexed linear oracle: L-BFGS on `J(W)` (module docs).
///
/// ```
/// use oracles::indexed::IndexedLinearOracle;
/// use oracles::{Features, FitContext, Oracle, Problem};
/// // Rows [input, group]: group 0 says label = [input > 0], group 1 the opposite.
/// let x = [1.0, 0.0, -1.0, 0.0, 1.0, 1.0, -1.0, 1.0];
/// let p = Problem::new(Features::new(&x, 4, 2).unwrap(), &[1, 0, 0, 1], &[0.0; 8], 2, None).unwrap();
/// let oracle = IndexedLinearOracle { l2: 0.1, ..Default::default() };
/// let m = oracle.fit(&p, None, FitContext { seed: 0 }).unwrap();
/// let mut s = [0.0; 8];
/// m.score(Features::new(&x, 4, 2).unwrap(), &mut s).unwrap();
/// assert!(s[1] > s[0] && s[4] > s[5]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexedLinearOracle {
    /// Settings of the L-BFGS minimiser (it sees `J / Σ_k w_k`).
    pub lbfgs: LbfgsOptions,
    /// Coefficient `λ ≥ 0` of the penalty `(λ/2)‖W‖²`.
    pub l2: f64,
    /// Number of groups; 0 takes `1 + the largest index` of the first problem.
    pub groups: usize,
}

impl Default for IndexedLinearOracle {
    /// Default L-BFGS settings, no penalty, groups from the data.
    fn default() -> Self {
        Self { lbfgs: LbfgsOptions::default(), l2: 0.0, groups: 0 }
    }
}

/// `g(φ, y) = (W_i φ_{<d−1})_y` with `i = φ_{d−1}`; `W` is stored
/// group-major, then class-major: entry `((i·C + y)·(d−1) + j)`.
///
/// ```
/// use oracles::indexed::IndexedLinearModel;
/// let m = IndexedLinearModel::zeros(3, 4, 2).unwrap(); // 2 inputs + index, 4 groups, 2 classes
/// assert_eq!(m.groups(), 4);
/// assert_eq!(m.group_weights(3, 1), &[0.0, 0.0]);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexedLinearModel {
    dim: usize,
    groups: usize,
    classes: usize,
    weights: Vec<f64>,
}

/// The group of a row: its last feature, an integer in `0..groups`.
fn group_of(row: &[f64], k: usize, groups: usize) -> Result<usize, OracleError> {
    let v = row.last().copied().unwrap_or(f64::NAN);
    if v >= 0.0 && v.fract() == 0.0 && v < groups as f64 {
        Ok(v as usize)
    } else {
        Err(OracleError::GroupIndex { row: k, value: v, groups })
    }
}

/// `1 +` the largest group index of `features` (checked to be integers ≥ 0).
///
/// ```
/// use oracles::Features;
/// let x = [0.5, 0.0, 0.5, 2.0];
/// assert_eq!(oracles::indexed::groups_in(Features::new(&x, 2, 2).unwrap()).unwrap(), 3);
/// ```
pub fn groups_in(features: Features<'_>) -> Result<usize, OracleError> {
    let mut most = 0;
    for k in 0..features.rows() {
        most = most.max(group_of(features.row(k), k, usize::MAX)? + 1);
    }
    Ok(most)
}

impl IndexedLinearModel {
    /// A model for rows of `dim` features (the last one the group index), with
    /// `weights` of length `groups · classes · (dim − 1)`, all finite.
    pub fn new(dim: usize, groups: usize, classes: usize, weights: Vec<f64>) -> Result<Self, OracleError> {
        if dim == 0 {
            return Err(OracleError::InvalidHyperParameter {
                name: "dim",
                reason: "an indexed model needs at least the group-index feature".into(),
            });
        }
        let expected = groups.checked_mul(classes).and_then(|n| n.checked_mul(dim - 1));
        if expected != Some(weights.len()) {
            return Err(OracleError::InvalidHyperParameter {
                name: "weights",
                reason: format!(
                    "{} values for {groups} groups × {classes} classes × {} inputs",
                    weights.len(),
                    dim - 1
                ),
            });
        }
        if let Some(i) = weights.iter().position(|v| !v.is_finite()) {
            return Err(OracleError::InvalidHyperParameter {
                name: "weights",
                reason: format!("weight {i} is {}", weights[i]),
            });
        }
        Ok(Self { dim, groups, classes, weights })
    }

    /// All weights zero (the cold start).
    pub fn zeros(dim: usize, groups: usize, classes: usize) -> Result<Self, OracleError> {
        let n = crate::check_size(
            "groups",
            groups.checked_mul(classes).and_then(|n| n.checked_mul(dim.saturating_sub(1))),
            &format!("{groups} groups × {classes} classes × {} features", dim.saturating_sub(1)),
        )?;
        Self::new(dim, groups, classes, vec![0.0; n])
    }

    /// Number of groups.
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// The weights of group `i`, class `y` (length `dim − 1`).
    pub fn group_weights(&self, i: usize, y: usize) -> &[f64] {
        let d = self.dim - 1;
        &self.weights[(i * self.classes + y) * d..(i * self.classes + y + 1) * d]
    }
}

impl LinearInParameters for IndexedLinearModel {
    fn parameters(&self) -> &[f64] {
        &self.weights
    }

    fn with_parameters(&self, parameters: Vec<f64>) -> Result<Self, OracleError> {
        Self::new(self.dim, self.groups, self.classes, parameters)
    }

    fn scores_with(&self, parameters: &[f64], features: Features<'_>, out: &mut [f64]) -> Result<(), OracleError> {
        check_model_shape(self, features.dim(), self.classes)?;
        check_score_buffer(features, self.classes, out)?;
        let (c, d) = (self.classes, self.dim - 1);
        for (k, scores) in out.chunks_mut(c.max(1)).enumerate().take(features.rows()) {
            let row = features.row(k);
            let base = group_of(row, k, self.groups)? * c;
            for (y, s) in scores.iter_mut().enumerate() {
                let w = &parameters[(base + y) * d..(base + y + 1) * d];
                *s = w.iter().zip(&row[..d]).map(|(a, b)| a * b).sum();
            }
        }
        Ok(())
    }

    fn add_gradient(&self, features: Features<'_>, dscores: &[f64], grad: &mut [f64]) -> Result<(), OracleError> {
        let (c, d) = (self.classes, self.dim - 1);
        for k in 0..features.rows() {
            let row = features.row(k);
            let base = group_of(row, k, self.groups)? * c;
            for y in 0..c {
                let g = dscores[k * c + y];
                if g != 0.0 {
                    for (w, x) in grad[(base + y) * d..(base + y + 1) * d].iter_mut().zip(&row[..d]) {
                        *w += g * x;
                    }
                }
            }
        }
        Ok(())
    }
}

impl IndexedLinearOracle {
    /// The cold start for `problem`: zeros with the configured (or inferred) groups.
    pub fn cold_start(&self, problem: &Problem<'_>) -> Result<IndexedLinearModel, OracleError> {
        let groups = if self.groups == 0 {
            // The largest group index over every rank's rows.
            let mut most = [groups_in(problem.features())? as f64];
            problem.max(&mut most);
            most[0] as usize
        } else {
            self.groups
        };
        IndexedLinearModel::zeros(problem.dim(), groups, problem.classes())
    }

    /// Fits `W` warm-started from `warm` (else from 0) and reports the L-BFGS
    /// run; returns `warm` unchanged if the fit would raise `J = L + (λ/2)‖W‖²`.
    pub fn fit_indexed(
        &self,
        problem: &Problem<'_>,
        warm: Option<&IndexedLinearModel>,
    ) -> Result<(IndexedLinearModel, LbfgsReport), OracleError> {
        self.validate()?;
        let start = match warm {
            Some(m) => {
                check_model_shape(m, problem.dim(), problem.classes())?;
                m.clone()
            }
            None => self.cold_start(problem)?,
        };
        let total = problem.total_weight();
        let scale = if total > 0.0 { 1.0 / total } else { 1.0 };
        let mut w = start.weights.clone();
        let mut failure = None;
        let report = lbfgs_minimize(
            |x, g| match penalised_loss(problem, &start, x, self.l2, Some(g)) {
                Ok(v) => {
                    g.iter_mut().for_each(|v| *v *= scale);
                    v * scale
                }
                Err(e) => {
                    failure = Some(e);
                    f64::NAN
                }
            },
            &mut w,
            &self.lbfgs,
        );
        if let Some(e) = failure {
            return Err(e);
        }
        let report = report?;
        let fitted = start.with_parameters(w)?;
        if warm.is_some()
            && penalised_loss(problem, &fitted, fitted.parameters(), self.l2, None)?
                > penalised_loss(problem, &start, start.parameters(), self.l2, None)?
        {
            return Ok((start, report));
        }
        Ok((fitted, report))
    }
}

impl Oracle for IndexedLinearOracle {
    fn kind(&self) -> &str {
        KIND
    }

    /// Fits over ranks are supported: loss and gradient are summed over the ranks at every L-BFGS evaluation, the group count is the largest over the ranks.
    fn distributed(&self) -> bool {
        true
    }

    /// Scoring is one dot product per class: potentials are recomputed, not stored.
    fn cheap_to_score(&self) -> bool {
        true
    }

    /// Full-batch fits read every row's bias in every evaluation.
    fn reads_every_bias(&self) -> bool {
        true
    }

    fn gradient_step(&self) -> Option<Box<dyn Oracle>> {
        Some(Box::new(crate::step::GradientStepOracle::indexed(self)))
    }

    fn validate(&self) -> Result<(), OracleError> {
        self.lbfgs.validate()?;
        if !(self.l2.is_finite() && self.l2 >= 0.0) {
            return Err(OracleError::InvalidHyperParameter {
                name: "l2",
                reason: format!("must be finite and >= 0, got {}", self.l2),
            });
        }
        Ok(())
    }

    fn penalty(&self, model: &dyn Model) -> Result<f64, OracleError> {
        Ok(ridge(self.l2, downcast_model::<IndexedLinearModel>(model, KIND)?.parameters()))
    }

    fn fit(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        _ctx: FitContext,
    ) -> Result<Box<dyn Model>, OracleError> {
        let warm = downcast_warm::<IndexedLinearModel>(warm, KIND)?;
        Ok(Box::new(self.fit_indexed(problem, warm)?.0))
    }
}

impl Model for IndexedLinearModel {
    crate::impl_model_plumbing!(KIND, to_json);
    fn dim(&self) -> usize {
        self.dim
    }
    fn classes(&self) -> usize {
        self.classes
    }
    fn score(&self, features: Features<'_>, out: &mut [f64]) -> Result<(), OracleError> {
        self.scores_with(&self.weights, features, out)
    }
}

/// Loader for the registry; checks the shape and finiteness of `W`.
///
/// ```
/// use oracles::Model;
/// let m = oracles::indexed::IndexedLinearModel::zeros(2, 3, 2).unwrap();
/// assert_eq!(oracles::indexed::load(&m.to_bytes().unwrap()).unwrap().kind(), "indexed-linear");
/// ```
pub fn load(bytes: &[u8]) -> Result<Box<dyn Model>, OracleError> {
    let raw = decode::<IndexedLinearModel>(KIND, bytes)?;
    if raw.groups == 0 || raw.dim == 0 {
        // No row could name a group (found by `cargo xtask fuzz`): refuse it here, not at the first score.
        return Err(OracleError::InvalidModel {
            kind: KIND.to_string(),
            reason: format!(
                "{} groups and {} features (at least 1 group and the group-index feature)",
                raw.groups, raw.dim
            ),
        });
    }
    Ok(Box::new(IndexedLinearModel::new(raw.dim, raw.groups, raw.classes, raw.weights)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelRegistry;
    use crate::linear::{LinearModel, LinearOracle};

    /// Rows of two groups; group 1's rows are group 0's with the labels swapped.
    fn two_group_data() -> (Vec<f64>, Vec<usize>) {
        let mut x = Vec::new();
        let mut labels = Vec::new();
        for i in 0..40 {
            let a = (i as f64 * 0.37).sin();
            let y = usize::from(a + 0.3 * (i as f64 * 1.3).cos() > 0.0);
            for g in 0..2 {
                x.extend_from_slice(&[a, 1.0, g as f64]);
                labels.push(if g == 0 { y } else { 1 - y });
            }
        }
        (x, labels)
    }

    #[test]
    fn groups_are_independent_linear_problems() {
        let (x, labels) = two_group_data();
        let bias = vec![0.0; labels.len() * 2];
        let f = Features::new(&x, labels.len(), 3).unwrap();
        let p = Problem::new(f, &labels, &bias, 2, None).unwrap();
        let oracle = IndexedLinearOracle { l2: 0.1, ..Default::default() };
        let (m, _) = oracle.fit_indexed(&p, None).unwrap();
        assert_eq!(m.groups(), 2);
        // Group 0 alone, fitted by the linear oracle on the inputs (without the index).
        let rows: Vec<usize> = (0..labels.len()).filter(|k| k % 2 == 0).collect();
        let x0: Vec<f64> = rows.iter().flat_map(|&k| x[k * 3..k * 3 + 2].to_vec()).collect();
        let l0: Vec<usize> = rows.iter().map(|&k| labels[k]).collect();
        let b0 = vec![0.0; l0.len() * 2];
        let p0 = Problem::new(Features::new(&x0, l0.len(), 2).unwrap(), &l0, &b0, 2, None).unwrap();
        let lin = LinearOracle { l2: 0.1, ..Default::default() };
        let (m0, _): (LinearModel, _) = lin.fit_linear(&p0, None).unwrap();
        for y in 0..2 {
            for (a, b) in m.group_weights(0, y).iter().zip(m0.class_weights(y)) {
                assert!((a - b).abs() < 1e-4, "{a} vs {b}");
            }
        }
        // Group 1 has the opposite labels: its weights are group 0's with the classes swapped.
        for (a, b) in m.group_weights(1, 0).iter().zip(m.group_weights(0, 1)) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
    }

    #[test]
    fn bad_group_indices_are_typed_errors() {
        let m = IndexedLinearModel::zeros(2, 3, 2).unwrap();
        let mut s = [0.0; 2];
        for v in [3.0, -1.0, 0.5] {
            let x = [1.0, v];
            let e = m.score(Features::new(&x, 1, 2).unwrap(), &mut s).unwrap_err();
            assert!(matches!(e, OracleError::GroupIndex { row: 0, groups: 3, .. }), "{e}");
        }
    }

    #[test]
    fn round_trips_through_the_registry() {
        let m = IndexedLinearModel::new(2, 2, 2, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let loaded = ModelRegistry::with_builtin().load(KIND, &m.to_bytes().unwrap()).unwrap();
        let x = [1.0, 1.0];
        let (mut a, mut b) = ([0.0; 2], [0.0; 2]);
        m.score(Features::new(&x, 1, 2).unwrap(), &mut a).unwrap();
        loaded.score(Features::new(&x, 1, 2).unwrap(), &mut b).unwrap();
        assert_eq!(a, b);
        assert_eq!(a, [3.0, 4.0]);
    }
}
