//! The fixed function class: `g(φ, y) = t_y`, a table given by the user that
//! learning never changes, with `t_y = −∞` allowed for **forbidden**
//! configurations (docs/MATH.md §6.5: a hard constraint is a region whose
//! function is `log 0` on the labelings it forbids).
//!
//! The oracle ignores the problem's labels and biases and returns its table;
//! a warm start is returned unchanged as well, so the [`Oracle`] contract
//! (never a higher loss than the warm start) holds trivially.
//!
//! ```
//! use oracles::fixed::FixedOracle;
//! use oracles::{Features, FitContext, Oracle, Problem};
//! // Two binary variables that must agree: configurations 01 and 10 are forbidden.
//! let oracle = FixedOracle { table: vec![0.0; 4], forbidden: vec![1, 2] };
//! let x = [1.0];
//! let problem = Problem::new(Features::new(&x, 1, 1).unwrap(), &[3], &[0.0; 4], 4, None).unwrap();
//! let model = oracle.fit(&problem, None, FitContext { seed: 0 }).unwrap();
//! let mut s = [0.0; 4];
//! model.score(Features::new(&x, 1, 1).unwrap(), &mut s).unwrap();
//! assert_eq!(s, [0.0, f64::NEG_INFINITY, f64::NEG_INFINITY, 0.0]);
//! ```

use serde::{Deserialize, Serialize};

use crate::{FitContext, Model, Oracle, OracleError, Problem, check_model_shape, check_score_buffer, decode};

/// Registry name of [`FixedModel`].
pub const KIND: &str = "fixed";

/// The fixed oracle: its hyper-parameters are the function.
///
/// ```
/// use oracles::fixed::FixedOracle;
/// use oracles::Oracle;
/// assert!(FixedOracle { table: vec![0.0, 1.0], forbidden: vec![1] }.validate().is_ok());
/// assert!(FixedOracle { table: vec![0.0, 1.0], forbidden: vec![0, 1] }.validate().is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FixedOracle {
    /// `t_y` for every class (finite).
    pub table: Vec<f64>,
    /// Classes whose score is `−∞` (distinct, in range, not all of them).
    pub forbidden: Vec<usize>,
}

/// `g(φ, y) = t_y`, or `−∞` for a forbidden `y`; the features (dimension
/// `dim`) are ignored.
///
/// ```
/// use oracles::fixed::FixedModel;
/// let m = FixedModel::new(1, vec![0.5, 0.0], vec![1]).unwrap();
/// assert_eq!(m.scores(), vec![0.5, f64::NEG_INFINITY]);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixedModel {
    dim: usize,
    table: Vec<f64>,
    forbidden: Vec<usize>,
}

fn check_table(table: &[f64], forbidden: &[usize]) -> Result<(), OracleError> {
    let bad = |reason: String| OracleError::InvalidHyperParameter { name: "table", reason };
    if table.len() < 2 {
        return Err(bad(format!("{} entries; a table needs one per class (at least 2)", table.len())));
    }
    if let Some(y) = table.iter().position(|v| !v.is_finite()) {
        return Err(bad(format!("entry {y} is {}; use `forbidden` for -inf", table[y])));
    }
    if let Some(y) = table.iter().position(|v| v.abs() > crate::MAX_MAGNITUDE) {
        return Err(bad(format!("entry {y} is {}, beyond ±1e100 (MAX_MAGNITUDE), where scores overflow", table[y])));
    }
    let mut seen = vec![false; table.len()];
    for &y in forbidden {
        if y >= table.len() {
            return Err(OracleError::InvalidHyperParameter {
                name: "forbidden",
                reason: format!("class {y} is out of range 0..{}", table.len()),
            });
        }
        if std::mem::replace(&mut seen[y], true) {
            return Err(OracleError::InvalidHyperParameter {
                name: "forbidden",
                reason: format!("class {y} is listed twice"),
            });
        }
    }
    if seen.iter().all(|&s| s) {
        return Err(OracleError::InvalidHyperParameter {
            name: "forbidden",
            reason: "every class is forbidden: nothing is feasible".into(),
        });
    }
    Ok(())
}

impl FixedModel {
    /// A model for inputs of dimension `dim` with the finite table `t` and the
    /// forbidden classes.
    pub fn new(dim: usize, table: Vec<f64>, forbidden: Vec<usize>) -> Result<Self, OracleError> {
        check_table(&table, &forbidden)?;
        Ok(Self { dim, table, forbidden })
    }

    /// `t_y`, with `−∞` on the forbidden classes.
    pub fn scores(&self) -> Vec<f64> {
        let mut s = self.table.clone();
        for &y in &self.forbidden {
            s[y] = f64::NEG_INFINITY;
        }
        s
    }

    /// The forbidden classes.
    pub fn forbidden(&self) -> &[usize] {
        &self.forbidden
    }
}

impl FixedOracle {
    /// The model this oracle's fit returns for inputs of dimension `dim` and
    /// `classes` classes, without data (the table is the function; a learner
    /// that does not fit, such as the perceptrons, takes it from here).
    ///
    /// ```
    /// use oracles::fixed::FixedOracle;
    /// let oracle = FixedOracle { table: vec![0.5, 0.0], forbidden: vec![0] };
    /// assert_eq!(oracle.model(3, 2).unwrap().scores(), vec![f64::NEG_INFINITY, 0.0]);
    /// assert!(oracle.model(3, 4).is_err()); // a table of 2 classes for 4
    /// ```
    pub fn model(&self, dim: usize, classes: usize) -> Result<FixedModel, OracleError> {
        self.validate()?;
        if classes != self.table.len() {
            return Err(OracleError::ModelMismatch { model_dim: dim, model_classes: self.table.len(), dim, classes });
        }
        FixedModel::new(dim, self.table.clone(), self.forbidden.clone())
    }
}

impl Oracle for FixedOracle {
    fn kind(&self) -> &str {
        KIND
    }

    /// Fits over ranks are supported: nothing is learned from the rows.
    fn distributed(&self) -> bool {
        true
    }

    /// Scoring is a table lookup: potentials are recomputed, not stored.
    fn cheap_to_score(&self) -> bool {
        true
    }

    fn fixed_model(&self, dim: usize, classes: usize) -> Option<Result<Box<dyn Model>, OracleError>> {
        Some(self.model(dim, classes).map(|m| Box::new(m) as Box<dyn Model>))
    }

    fn validate(&self) -> Result<(), OracleError> {
        check_table(&self.table, &self.forbidden)
    }

    fn fit(
        &self,
        problem: &Problem<'_>,
        _warm: Option<&dyn Model>,
        _ctx: FitContext,
    ) -> Result<Box<dyn Model>, OracleError> {
        let model = self.model(problem.dim(), problem.classes())?;
        // A forbidden class that is some row's label makes the loss infinite.
        if let Some(row) = problem.labels().iter().position(|l| self.forbidden.contains(l)) {
            return Err(OracleError::ForbiddenLabel { row, label: problem.labels()[row] });
        }
        Ok(Box::new(model))
    }
}

impl Model for FixedModel {
    crate::impl_model_plumbing!(KIND, to_json);
    fn dim(&self) -> usize {
        self.dim
    }
    fn classes(&self) -> usize {
        self.table.len()
    }
    fn score(&self, features: crate::Features<'_>, out: &mut [f64]) -> Result<(), OracleError> {
        check_model_shape(self, features.dim(), self.table.len())?;
        check_score_buffer(features, self.table.len(), out)?;
        let s = self.scores();
        for row in out.chunks_mut(s.len()) {
            row.copy_from_slice(&s);
        }
        Ok(())
    }
}

/// Loader for the registry; re-validates the table.
///
/// ```
/// use oracles::Model;
/// let m = oracles::fixed::FixedModel::new(1, vec![0.0; 2], vec![0]).unwrap();
/// assert_eq!(oracles::fixed::load(&m.to_bytes().unwrap()).unwrap().kind(), "fixed");
/// ```
pub fn load(bytes: &[u8]) -> Result<Box<dyn Model>, OracleError> {
    let raw = decode::<FixedModel>(KIND, bytes)?;
    Ok(Box::new(FixedModel::new(raw.dim, raw.table, raw.forbidden)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelRegistry;

    #[test]
    fn invalid_tables_are_refused_with_the_reason() {
        for (table, forbidden, what) in [
            (vec![0.0], vec![], "at least 2"),
            (vec![0.0, f64::NAN], vec![], "entry 1"),
            (vec![0.0, 0.0], vec![2], "out of range"),
            (vec![0.0, 0.0], vec![1, 1], "twice"),
            (vec![0.0, 0.0], vec![0, 1], "every class"),
            (vec![0.0, 1e308], vec![], "beyond ±1e100"),
        ] {
            let e = FixedOracle { table, forbidden }.validate().unwrap_err().to_string();
            assert!(e.contains(what), "{e}");
        }
    }

    /// A row whose label is a forbidden class has an infinite loss: refused.
    #[test]
    fn a_forbidden_class_that_is_a_label_is_an_error() {
        let x = [1.0, 1.0];
        let f = crate::Features::new(&x, 2, 1).unwrap();
        let problem = crate::Problem::new(f, &[0, 1], &[0.0; 4], 2, None).unwrap();
        let oracle = FixedOracle { table: vec![0.0, 0.0], forbidden: vec![1] };
        let e = oracle.fit(&problem, None, crate::FitContext { seed: 0 }).unwrap_err();
        assert!(matches!(e, OracleError::ForbiddenLabel { row: 1, label: 1 }), "{e}");
    }

    #[test]
    fn round_trips_through_the_registry() {
        let m = FixedModel::new(3, vec![0.5, 0.0, -1.0], vec![1]).unwrap();
        let loaded = ModelRegistry::with_builtin().load(KIND, &m.to_bytes().unwrap()).unwrap();
        let x = [0.0; 6];
        let mut s = [0.0; 6];
        loaded.score(crate::Features::new(&x, 2, 3).unwrap(), &mut s).unwrap();
        assert_eq!(s, [0.5, f64::NEG_INFINITY, -1.0, 0.5, f64::NEG_INFINITY, -1.0]);
    }
}
