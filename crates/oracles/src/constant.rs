//! The constant function class `g(φ, y) = t_y` (docs/MATH.md §5): a table over the
//! classes that ignores the features — the linear class on a single constant
//! feature, fitted the same way (L-BFGS on the biased logistic loss, Eq. 11/13,
//! warm-started from the previous table, with the linear class's budget of
//! [`DEFAULT_WARM_MAX_ITERATIONS`] steps per warm fit).
//!
//! The oracle minimises `L(t) = Σ_k w_k [ lse(t + b_k) − t_{y_k} − b_k(y_k) ]`,
//! whose gradient is `Σ_k w_k (softmax(t + b_k) − e_{y_k})`. `L` is unchanged by
//! adding one number to every `t_y`, and that gradient sums to zero over `y`, so
//! the fit never moves `Σ_y t_y` away from its warm start (0 for a cold start).
//! A class that is possible but never observed has its entry driven towards
//! `−∞`; the iteration limit and the relative-decrease tolerance end the fit.

use serde::{Deserialize, Serialize};

use crate::linear::{DEFAULT_WARM_MAX_ITERATIONS, LinearObjective, budgeted, check_budget};
use crate::optim::{LbfgsOptions, LbfgsReport, lbfgs_minimize};
use crate::{FitContext, Model, Oracle, OracleError, Problem, check_model_shape, check_score_buffer, decode};

/// Registry name of [`ConstantModel`].
pub const KIND: &str = "constant";

/// The constant feature `φ = [1]` the table multiplies.
static ONE: [f64; 1] = [1.0];

/// The constant oracle: L-BFGS on `L(t)` (module docs).
///
/// ```
/// use oracles::{Features, FitContext, Oracle, Problem};
/// // g(φ, y) = c_y: fits the (biased) class frequencies.
/// let x = [0.0; 4];
/// let p = Problem::new(Features::new(&x, 4, 1).unwrap(), &[0, 1, 1, 1], &[0.0; 8], 2, None).unwrap();
/// let model = oracles::constant::ConstantOracle::default().fit(&p, None, FitContext { seed: 0 }).unwrap();
/// let mut s = [0.0; 2];
/// model.score(Features::new(&[0.0], 1, 1).unwrap(), &mut s).unwrap();
/// assert!((s[1] - s[0] - 3f64.ln()).abs() < 1e-4); // log odds 3 : 1
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConstantOracle {
    /// Settings of the L-BFGS minimiser (it sees `L / Σ_k w_k`; a cold fit
    /// runs to these limits).
    pub lbfgs: LbfgsOptions,
    /// Most L-BFGS iterations of a warm-started fit (the per-call budget
    /// inside learning), at most `lbfgs.max_iterations`; `None` fits every
    /// call to the tolerances of `lbfgs`. Default
    /// [`DEFAULT_WARM_MAX_ITERATIONS`], as for the linear class: inside
    /// learning each call starts from the previous table on biases moved by
    /// one round of message passing, and fits to the tolerances made a
    /// learning iteration of the Stanford constant/constant cell 9× as long
    /// as one of zero/zero (docs/guide/performance.md).
    pub warm_max_iterations: Option<usize>,
}

impl Default for ConstantOracle {
    /// Default L-BFGS settings and the default warm-start budget.
    fn default() -> Self {
        Self { lbfgs: LbfgsOptions::default(), warm_max_iterations: Some(DEFAULT_WARM_MAX_ITERATIONS) }
    }
}

/// `g(φ, y) = t_y` for inputs of dimension `dim` (ignored) and `classes` outputs.
///
/// ```
/// use oracles::Model;
/// let m = oracles::constant::ConstantModel::new(3, vec![0.0, 1.0]).unwrap();
/// assert_eq!((m.dim(), m.classes()), (3, 2));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConstantModel {
    dim: usize,
    table: Vec<f64>,
}

impl ConstantModel {
    /// A model with the table `t` (one finite entry per class) for inputs of dimension `dim`.
    ///
    /// ```
    /// let m = oracles::constant::ConstantModel::new(3, vec![0.5, -0.5]).unwrap();
    /// assert_eq!(m.table(), &[0.5, -0.5]);
    /// assert!(oracles::constant::ConstantModel::new(3, vec![f64::NAN, 0.0]).is_err());
    /// ```
    pub fn new(dim: usize, table: Vec<f64>) -> Result<Self, OracleError> {
        if let Some(y) = table.iter().position(|v| !v.is_finite()) {
            return Err(OracleError::InvalidHyperParameter {
                name: "table",
                reason: format!("entry {y} is {}", table[y]),
            });
        }
        Ok(Self { dim, table })
    }

    /// `t = 0`, the cold start of the oracle.
    pub fn zeros(dim: usize, classes: usize) -> Self {
        Self { dim, table: vec![0.0; classes] }
    }

    /// The table `t_y`.
    pub fn table(&self) -> &[f64] {
        &self.table
    }
}

impl ConstantOracle {
    /// The same oracle fitting every call to convergence (no warm-start budget).
    ///
    /// ```
    /// let full = oracles::constant::ConstantOracle::default().full_fit();
    /// assert_eq!(full.warm_max_iterations, None);
    /// ```
    pub fn full_fit(self) -> Self {
        Self { warm_max_iterations: None, ..self }
    }

    /// Fits the table (warm-started from `warm`, else from 0) and reports the L-BFGS
    /// run. The returned model's loss is never above `warm`'s.
    pub fn fit_constant(
        &self,
        problem: &Problem<'_>,
        warm: Option<&ConstantModel>,
    ) -> Result<(ConstantModel, LbfgsReport), OracleError> {
        self.validate()?;
        let start = match warm {
            Some(m) => {
                check_model_shape(m, problem.dim(), problem.classes())?;
                m.clone()
            }
            None => ConstantModel::zeros(problem.dim(), problem.classes()),
        };
        let mut objective = LinearObjective::new(problem, 1, |_| &ONE[..], 0.0);
        let mut table = start.table.clone();
        let opts = budgeted(self.lbfgs, self.warm_max_iterations, None, warm.is_some());
        let report = lbfgs_minimize(|t, g| objective.scaled(t, g), &mut table, &opts)?;
        if warm.is_some() && objective.loss(&table, None) > objective.loss(&start.table, None) {
            return Ok((start, report));
        }
        Ok((ConstantModel { dim: problem.dim(), table }, report))
    }
}

impl Oracle for ConstantOracle {
    fn kind(&self) -> &str {
        KIND
    }

    /// Fits over ranks are supported: the table's loss and gradient are summed over the ranks at every L-BFGS evaluation.
    fn distributed(&self) -> bool {
        true
    }

    /// Scoring is one score per class: potentials are recomputed, not stored.
    fn cheap_to_score(&self) -> bool {
        true
    }

    /// Full-batch fits read every row's bias in every evaluation.
    fn reads_every_bias(&self) -> bool {
        true
    }

    fn validate(&self) -> Result<(), OracleError> {
        self.lbfgs.validate()?;
        check_budget("warm_max_iterations", self.warm_max_iterations)
    }

    fn fit(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        _ctx: FitContext,
    ) -> Result<Box<dyn Model>, OracleError> {
        let warm = crate::downcast_warm::<ConstantModel>(warm, KIND)?;
        Ok(Box::new(self.fit_constant(problem, warm)?.0))
    }
}

impl Model for ConstantModel {
    crate::impl_model_plumbing!(KIND, to_json);
    fn dim(&self) -> usize {
        self.dim
    }
    fn classes(&self) -> usize {
        self.table.len()
    }
    fn score(&self, features: crate::Features<'_>, out: &mut [f64]) -> Result<(), OracleError> {
        check_model_shape(self, features.dim(), self.classes())?;
        check_score_buffer(features, self.classes(), out)?;
        if !self.table.is_empty() {
            out.chunks_mut(self.table.len()).for_each(|row| row.copy_from_slice(&self.table));
        }
        Ok(())
    }
}

/// Loader for the registry; checks that the table is finite.
///
/// ```
/// use oracles::Model;
/// let m = oracles::constant::ConstantModel::new(1, vec![0.0, 1.0]).unwrap();
/// assert_eq!(oracles::constant::load(&m.to_bytes().unwrap()).unwrap().kind(), "constant");
/// ```
pub fn load(bytes: &[u8]) -> Result<Box<dyn Model>, OracleError> {
    let raw = decode::<ConstantModel>(KIND, bytes)?;
    Ok(Box::new(ConstantModel::new(raw.dim, raw.table)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linear::tests::Data;
    use crate::{Features, ModelRegistry, encode, model_loss};
    use proptest::prelude::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn tight() -> ConstantOracle {
        ConstantOracle {
            lbfgs: LbfgsOptions { gradient_tolerance: 1e-10, relative_decrease_tolerance: 0.0, ..Default::default() },
            warm_max_iterations: None,
        }
    }

    fn ctx() -> FitContext {
        FitContext { seed: 3 }
    }

    /// Rows whose bias is the true log-probability `log p_k(y)` of their label
    /// distribution, one copy per possible label weighted by `p_k(y)`: the expected
    /// label counts then match the biased model exactly, so `t = const` is optimal.
    struct CalibratedRows {
        x: Vec<f64>,
        labels: Vec<usize>,
        bias: Vec<f64>,
        weights: Vec<f64>,
    }

    fn calibrated(seed: u64, base_rows: usize, c: usize) -> CalibratedRows {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut out = CalibratedRows { x: vec![], labels: vec![], bias: vec![], weights: vec![] };
        for k in 0..base_rows {
            let mut p: Vec<f64> =
                (0..c).map(|y| if k % 3 == 0 && y == c - 1 { 0.0 } else { rng.random_range(0.05..1.0) }).collect();
            let z: f64 = p.iter().sum();
            p.iter_mut().for_each(|v| *v /= z);
            for (y, &py) in p.iter().enumerate().filter(|(_, py)| **py > 0.0) {
                out.x.push(rng.random_range(-1.0..1.0));
                out.labels.push(y);
                out.bias.extend(p.iter().map(|v| v.ln()));
                out.weights.push(py);
            }
        }
        out
    }

    #[test]
    fn true_log_odds_bias_gives_a_constant_table() {
        let c = 4;
        let rows = calibrated(1, 50, c);
        let n = rows.labels.len();
        let f = Features::new(&rows.x, n, 1).unwrap();
        let problem = Problem::new(f, &rows.labels, &rows.bias, c, Some(&rows.weights)).unwrap();
        let (cold, report) = tight().fit_constant(&problem, None).unwrap();
        assert!(cold.table().iter().all(|t| t.abs() < 1e-9), "{:?} {report:?}", cold.table());
        // From any warm start the table returns to a constant (its mean is preserved).
        let warm = ConstantModel::new(1, vec![2.0, -1.0, 0.5, 3.5]).unwrap();
        let (fit, _) = tight().fit_constant(&problem, Some(&warm)).unwrap();
        for t in fit.table() {
            assert!((t - 1.25).abs() < 1e-6, "{:?}", fit.table());
        }
    }

    #[test]
    fn zero_bias_matches_weighted_label_frequencies() {
        let mut data = Data::random(2, 400, 2, 3, 0.0, true);
        data.bias.fill(0.0);
        let problem = data.problem();
        let (fit, report) = tight().fit_constant(&problem, None).unwrap();
        assert!(report.converged, "{report:?}");
        let w = data.weights.as_ref().unwrap();
        let total: f64 = w.iter().sum();
        let z: f64 = fit.table().iter().map(|t| t.exp()).sum();
        for y in 0..3 {
            let freq: f64 = (0..data.n).filter(|&k| data.labels[k] == y).map(|k| w[k]).sum::<f64>() / total;
            assert!((fit.table()[y].exp() / z - freq).abs() < 1e-8, "class {y}");
        }
        assert!(fit.table().iter().sum::<f64>().abs() < 1e-12, "the sum stays at its cold start 0");
    }

    #[test]
    fn negative_infinite_biases_and_unseen_classes_stay_finite() {
        let mut data = Data::random(4, 300, 2, 4, 0.4, false);
        for k in 0..data.n {
            data.bias[k * 4 + 3] = f64::NEG_INFINITY; // impossible everywhere
            if data.labels[k] >= 2 {
                data.labels[k] = 0; // class 2 possible on some rows but never observed
                data.bias[k * 4] = 0.0;
            }
        }
        let problem = data.problem();
        let (fit, report) = ConstantOracle::default().fit_constant(&problem, None).unwrap();
        assert!(report.value.is_finite());
        assert!(fit.table().iter().all(|t| t.is_finite()), "{:?}", fit.table());
        assert_eq!(fit.table()[3], 0.0);
        assert!(fit.table()[2] < fit.table()[0].min(fit.table()[1]) - 3.0, "{:?}", fit.table());
        assert!(model_loss(&fit, &problem).unwrap().is_finite());
    }

    #[test]
    fn save_load_and_determinism() {
        let data = Data::random(5, 100, 2, 3, 0.2, false);
        let problem = data.problem();
        let model = ConstantOracle::default().fit(&problem, None, ctx()).unwrap();
        let again = ConstantOracle::default().fit(&problem, None, ctx()).unwrap();
        assert_eq!(model.to_bytes().unwrap(), again.to_bytes().unwrap());
        let loaded = ModelRegistry::with_builtin().load(KIND, &model.to_bytes().unwrap()).unwrap();
        let (mut a, mut b) = (vec![0.0; 300], vec![0.0; 300]);
        model.score(problem.features(), &mut a).unwrap();
        loaded.score(problem.features(), &mut b).unwrap();
        assert_eq!(a, b);
        assert_eq!(&a[3..6], loaded.as_any().downcast_ref::<ConstantModel>().unwrap().table());
        assert_eq!(model.to_json().unwrap()["table"].as_array().unwrap().len(), 3);
        let bad = encode(KIND, &ConstantModel { dim: 1, table: vec![f64::INFINITY, 0.0] }).unwrap();
        assert!(matches!(load(&bad), Err(OracleError::InvalidHyperParameter { name: "table", .. })));
        assert!(matches!(load(&[0xff]), Err(OracleError::Codec { .. })));
    }

    /// A warm fit stops at the budget, a cold one or a full fit is not
    /// limited by it; the budgeted fit still never raises the loss.
    #[test]
    fn warm_fits_stop_at_the_budget() {
        let labels: Vec<usize> = (0..40).map(|k| k % 2).collect();
        let x = vec![0.0; labels.len()];
        let biases = vec![0.0; 3 * labels.len()];
        let problem = Problem::new(Features::new(&x, labels.len(), 1).unwrap(), &labels, &biases, 3, None).unwrap();
        let oracle = ConstantOracle::default();
        let (cold, report) = oracle.fit_constant(&problem, None).unwrap();
        assert!(report.iterations > DEFAULT_WARM_MAX_ITERATIONS, "{report:?}");
        assert!(cold.table()[2] < cold.table()[0] - 5.0, "{:?}", cold.table());
        // A start far from the optimum, as when the biases have moved.
        let start = ConstantModel::zeros(1, 3);
        let (warm, report) = oracle.fit_constant(&problem, Some(&start)).unwrap();
        assert!(report.iterations <= DEFAULT_WARM_MAX_ITERATIONS, "{report:?}");
        assert!(model_loss(&warm, &problem).unwrap() < model_loss(&start, &problem).unwrap());
        let (_, report) = oracle.full_fit().fit_constant(&problem, Some(&start)).unwrap();
        assert!(report.iterations > DEFAULT_WARM_MAX_ITERATIONS, "{report:?}");
    }

    #[test]
    fn bad_input_gives_typed_errors() {
        let data = Data::random(6, 10, 2, 3, 0.0, false);
        let problem = data.problem();
        let bad = ConstantOracle { lbfgs: LbfgsOptions { memory: 0, ..Default::default() }, ..Default::default() };
        assert!(matches!(
            bad.fit(&problem, None, ctx()),
            Err(OracleError::InvalidHyperParameter { name: "memory", .. })
        ));
        let bad = ConstantOracle { warm_max_iterations: Some(0), ..Default::default() };
        assert!(matches!(
            bad.fit(&problem, None, ctx()),
            Err(OracleError::InvalidHyperParameter { name: "warm_max_iterations", .. })
        ));
        let oracle = ConstantOracle::default();
        let wrong = ConstantModel::zeros(2, 4);
        assert!(matches!(oracle.fit(&problem, Some(&wrong), ctx()), Err(OracleError::ModelMismatch { .. })));
        let linear = crate::linear::LinearModel::zeros(2, 3);
        assert!(matches!(oracle.fit(&problem, Some(&linear), ctx()), Err(OracleError::WrongModelKind { .. })));
        let model = ConstantModel::zeros(2, 3);
        assert!(matches!(model.score(problem.features(), &mut [0.0; 5]), Err(OracleError::OutputShape { .. })));
        let f3 = Features::new(&[0.0; 3], 1, 3).unwrap();
        assert!(matches!(model.score(f3, &mut [0.0; 3]), Err(OracleError::ModelMismatch { .. })));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Warm-started fits never increase the loss and stay finite.
        #[test]
        fn warm_starts_never_increase_the_loss(
            seed in 0u64..1000,
            n in 1usize..30,
            c in 2usize..6,
            neg_inf in 0.0f64..0.6,
            iterations in 1usize..6,
            scale in 0.0f64..10.0,
        ) {
            let data = Data::random(seed, n, 2, c, neg_inf, seed % 2 == 1);
            let problem = data.problem();
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let warm = ConstantModel::new(2, (0..c).map(|_| scale * rng.random_range(-1.0..1.0)).collect()).unwrap();
            let oracle = ConstantOracle {
                lbfgs: LbfgsOptions { max_iterations: iterations, ..Default::default() },
                ..Default::default()
            };
            let fit = oracle.fit(&problem, Some(&warm), ctx()).unwrap();
            let after = model_loss(fit.as_ref(), &problem).unwrap();
            prop_assert!(after <= model_loss(&warm, &problem).unwrap());
            prop_assert!(after.is_finite());
        }
    }
}
