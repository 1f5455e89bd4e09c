//! One gradient step instead of a fit: the parameter update of Hazan &
//! Urtasun's primal-dual learner (NIPS 2010; docs/MATH.md §6.4) for function
//! classes whose scores are linear in their parameters.
//!
//! With the messages fixed, the structured objective restricted to one factor
//! type is `ε_t J(p)` with the oracle's biased logistic loss
//! `J(p) = L(p) + (λ/2)‖p‖²` (docs/MATH.md §4), so a step on `J` is a step on
//! the learner's objective. [`gradient_step`] takes **one** step along
//! `−∇J(p)` with the step size that minimises `J` on that line:
//!
//! ```text
//! G = ∇J(p),   d_k = scores of row k under parameters G,
//! φ(η) = J(p − η G) = Σ_k w_k [lse(s_k − η d_k + b_k) − (s_k − η d_k)_{y_k} − b_k(y_k)] + (λ/2)‖p − η G‖²,
//! φ'(η) = Σ_k w_k [(d_k)_{y_k} − E_{q_k(η)} d_k] − λ G·(p − η G),
//! φ''(η) = Σ_k w_k Var_{q_k(η)}(d_k) + λ ‖G‖²,       q_k(η) = softmax(s_k − η d_k + b_k).
//! ```
//!
//! `φ` is convex, so a safeguarded Newton iteration on `φ'(η) = 0` (bisection
//! or doubling when a Newton step leaves the bracket) finds the minimiser (to
//! `|φ'(η)| ≤ 10⁻⁹ |φ'(0)|`, or after `max_line_search` iterations); each
//! trial costs `O(rows × classes)` because the scores move along the fixed
//! direction `d`. Hazan & Urtasun "choose the step size to guarantee a descent
//! on the objective"; the exact minimiser along the gradient is the largest
//! such guarantee and needs no tuning. The step is accepted only if
//! `J(p − ηG) ≤ J(p)` (it is halved up to 30 times otherwise), so an oracle
//! built on it never returns a worse model than its warm start. No step is
//! taken once `‖∇J‖ ≤ 10⁻⁹ Σ_k w_k` ([`GRADIENT_TOLERANCE`]).

use serde::{Deserialize, Serialize};

use crate::indexed::{IndexedLinearModel, IndexedLinearOracle};
use crate::linear::{LinearModel, LinearOracle};
use crate::{
    Features, FitContext, Model, Oracle, OracleError, Problem, check_model_shape, check_score_buffer, downcast_model,
    downcast_warm, logistic_loss,
};

/// A model whose scores are a linear function of its parameter vector `p`:
/// `s_{k,y} = Σ_i p_i ∂s_{k,y}/∂p_i`.
///
/// ```
/// use oracles::linear::LinearModel;
/// use oracles::step::LinearInParameters;
/// use oracles::Features;
/// let m = LinearModel::new(1, 2, vec![1.0, -1.0]).unwrap();
/// let mut s = [0.0; 2];
/// m.scores_with(&[2.0, 0.0], Features::new(&[3.0], 1, 1).unwrap(), &mut s).unwrap();
/// assert_eq!(s, [6.0, 0.0]);
/// assert_eq!(m.parameters(), &[1.0, -1.0]);
/// ```
pub trait LinearInParameters: Model + Clone + Sized {
    /// The parameter vector `p`.
    fn parameters(&self) -> &[f64];
    /// The same model with parameters `p` (same length, finite).
    fn with_parameters(&self, parameters: Vec<f64>) -> Result<Self, OracleError>;
    /// Scores of `features` (row-major, `rows × classes`) under `parameters`.
    fn scores_with(&self, parameters: &[f64], features: Features<'_>, out: &mut [f64]) -> Result<(), OracleError>;
    /// `grad += Σ_{k,y} dscores_{k,y} ∂s_{k,y}/∂p`.
    fn add_gradient(&self, features: Features<'_>, dscores: &[f64], grad: &mut [f64]) -> Result<(), OracleError>;
}

impl LinearInParameters for LinearModel {
    fn parameters(&self) -> &[f64] {
        self.weights()
    }

    fn with_parameters(&self, parameters: Vec<f64>) -> Result<Self, OracleError> {
        LinearModel::new(self.dim(), self.classes(), parameters)
    }

    fn scores_with(&self, parameters: &[f64], features: Features<'_>, out: &mut [f64]) -> Result<(), OracleError> {
        check_model_shape(self, features.dim(), self.classes())?;
        check_score_buffer(features, self.classes(), out)?;
        let (c, d) = (self.classes(), self.dim());
        for (k, scores) in out.chunks_mut(c.max(1)).enumerate().take(features.rows()) {
            let row = features.row(k);
            for (y, s) in scores.iter_mut().enumerate() {
                *s = parameters[y * d..(y + 1) * d].iter().zip(row).map(|(a, b)| a * b).sum();
            }
        }
        Ok(())
    }

    fn add_gradient(&self, features: Features<'_>, dscores: &[f64], grad: &mut [f64]) -> Result<(), OracleError> {
        let (c, d) = (self.classes(), self.dim());
        for k in 0..features.rows() {
            let row = features.row(k);
            for y in 0..c {
                let g = dscores[k * c + y];
                if g != 0.0 {
                    for (w, x) in grad[y * d..(y + 1) * d].iter_mut().zip(row) {
                        *w += g * x;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The ridge penalty `(λ/2)‖p‖²` of the linear classes (what
/// [`crate::Oracle::penalty`] returns for them, bit for bit the term
/// [`penalised_loss`] adds).
///
/// ```
/// assert_eq!(oracles::step::ridge(2.0, &[1.0, -3.0]), 10.0);
/// ```
pub fn ridge(l2: f64, parameters: &[f64]) -> f64 {
    0.5 * l2 * parameters.iter().map(|v| v * v).sum::<f64>()
}

/// `J(p) = L(p) + (λ/2)‖p‖²` of `model`'s class at `parameters`; with `grad`,
/// also `∇J` (overwritten).
///
/// ```
/// use oracles::linear::LinearModel;
/// use oracles::step::penalised_loss;
/// use oracles::{Features, Problem};
/// let p = Problem::new(Features::new(&[1.0], 1, 1).unwrap(), &[0], &[0.0; 2], 2, None).unwrap();
/// let m = LinearModel::zeros(1, 2);
/// let mut g = [0.0; 2];
/// let j = penalised_loss(&p, &m, &[0.0, 0.0], 1.0, Some(&mut g)).unwrap();
/// assert!((j - 2f64.ln()).abs() < 1e-12 && (g[0] + 0.5).abs() < 1e-12);
/// ```
pub fn penalised_loss<M: LinearInParameters>(
    problem: &Problem<'_>,
    model: &M,
    parameters: &[f64],
    l2: f64,
    grad: Option<&mut [f64]>,
) -> Result<f64, OracleError> {
    let c = problem.classes();
    let mut scores = vec![0.0; problem.rows() * c];
    model.scores_with(parameters, problem.features(), &mut scores)?;
    let penalty = ridge(l2, parameters);
    Ok(match grad {
        None => logistic_loss(problem, &scores, None) + penalty,
        Some(g) => {
            let mut dscores = vec![0.0; scores.len()];
            let loss = logistic_loss(problem, &scores, Some(&mut dscores));
            if problem.is_distributed() {
                // This rank's rows' gradient, summed over the ranks, then the penalty's.
                g.fill(0.0);
                model.add_gradient(problem.features(), &dscores, g)?;
                problem.sum(g);
                for (gi, &p) in g.iter_mut().zip(parameters) {
                    *gi += l2 * p;
                }
            } else {
                for (gi, &p) in g.iter_mut().zip(parameters) {
                    *gi = l2 * p;
                }
                model.add_gradient(problem.features(), &dscores, g)?;
            }
            loss + penalty
        }
    })
}

/// What one [`gradient_step`] did.
///
/// ```
/// use oracles::linear::LinearModel;
/// use oracles::{Features, Problem};
/// let p = Problem::new(Features::new(&[1.0, -1.0], 2, 1).unwrap(), &[0, 1], &[0.0; 4], 2, None).unwrap();
/// let (_, report) = oracles::step::gradient_step(&p, &LinearModel::zeros(1, 2), 0.1, 30).unwrap();
/// assert!(report.step > 0.0 && report.after < report.before);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepReport {
    /// The step size `η` taken (0: no step).
    pub step: f64,
    /// `J` before the step.
    pub before: f64,
    /// `J` after the step (`≤ before`).
    pub after: f64,
    /// Newton / bisection iterations of the line search.
    pub line_search_iterations: usize,
    /// `‖∇J‖` before the step.
    pub gradient_norm: f64,
}

/// No step is taken once `‖∇J‖ ≤` this times the problem's total example weight.
pub const GRADIENT_TOLERANCE: f64 = 1e-9;

/// `(φ(η), φ'(η), φ''(η))` along the direction (module docs).
fn line(problem: &Problem<'_>, s: &[f64], d: &[f64], p: &[f64], g: &[f64], l2: f64, eta: f64) -> (f64, f64, f64) {
    let c = problem.classes();
    let (mut f, mut df, mut ddf) = (0.0, 0.0, 0.0);
    let mut v = vec![0.0; c];
    let mut b = vec![0.0; c];
    for k in 0..problem.rows() {
        let w = problem.weight(k);
        if w == 0.0 {
            continue;
        }
        let (sk, dk, bk) = (&s[k * c..(k + 1) * c], &d[k * c..(k + 1) * c], problem.bias_row(k, &mut b));
        let mut m = f64::NEG_INFINITY;
        for y in 0..c {
            v[y] = sk[y] - eta * dk[y] + bk[y];
            m = m.max(v[y]);
        }
        let mut z = 0.0;
        let (mut e1, mut e2) = (0.0, 0.0);
        for y in 0..c {
            // exp(< −700) is below 1e-304: skip it (libm's underflow path is slow).
            let x = v[y] - m;
            let q = if x > -700.0 { x.exp() } else { 0.0 };
            z += q;
            e1 += q * dk[y];
            e2 += q * dk[y] * dk[y];
        }
        let (e1, e2) = (e1 / z, e2 / z);
        let label = problem.labels()[k];
        f += w * (m + z.ln() - v[label]);
        df += w * (dk[label] - e1);
        ddf += w * (e2 - e1 * e1).max(0.0);
    }
    if problem.is_distributed() {
        // Every rank's rows, added in rank order (a collective call).
        let mut sums = [f, df, ddf];
        problem.sum(&mut sums);
        [f, df, ddf] = sums;
    }
    let (gg, gp, pp) =
        g.iter().zip(p).fold((0.0, 0.0, 0.0), |a, (gi, pi)| (a.0 + gi * gi, a.1 + gi * pi, a.2 + pi * pi));
    f += 0.5 * l2 * (pp - 2.0 * eta * gp + eta * eta * gg);
    df += l2 * (eta * gg - gp);
    ddf += l2 * gg;
    (f, df, ddf)
}

/// One step along `−∇J` with the exact line minimiser (module docs); the
/// returned model's `J` is never above `model`'s.
///
/// ```
/// use oracles::linear::LinearModel;
/// use oracles::{Features, Problem};
/// let p = Problem::new(Features::new(&[1.0, -1.0], 2, 1).unwrap(), &[0, 1], &[0.0; 4], 2, None).unwrap();
/// let mut m = LinearModel::zeros(1, 2);
/// for _ in 0..5 {
///     m = oracles::step::gradient_step(&p, &m, 0.1, 30).unwrap().0;
/// }
/// assert!(m.class_weights(0)[0] > m.class_weights(1)[0]);
/// ```
pub fn gradient_step<M: LinearInParameters>(
    problem: &Problem<'_>,
    model: &M,
    l2: f64,
    max_line_search: usize,
) -> Result<(M, StepReport), OracleError> {
    check_model_shape(model, problem.dim(), problem.classes())?;
    let p = model.parameters();
    let mut g = vec![0.0; p.len()];
    let before = penalised_loss(problem, model, p, l2, Some(&mut g))?;
    let gradient_norm = g.iter().map(|v| v * v).sum::<f64>().sqrt();
    let none = StepReport { step: 0.0, before, after: before, line_search_iterations: 0, gradient_norm };
    // Converged (per unit of example weight, like the L-BFGS tolerance): on a
    // separable problem the loss only tends to zero, and steps at rounding level
    // would cost a full line search each.
    let converged = gradient_norm <= GRADIENT_TOLERANCE * problem.total_weight().max(1.0);
    if converged || !(gradient_norm.is_finite() && before.is_finite()) {
        return Ok((model.clone(), none));
    }
    let n = problem.rows() * problem.classes();
    let (mut s, mut d) = (vec![0.0; n], vec![0.0; n]);
    model.scores_with(p, problem.features(), &mut s)?;
    model.scores_with(&g, problem.features(), &mut d)?;
    let at = |eta: f64| line(problem, &s, &d, p, &g, l2, eta);
    // Safeguarded Newton on φ'(η) = 0; φ'(0) = −‖G‖² < 0.
    let (_, d0, dd0) = at(0.0);
    let (mut lo, mut hi) = (0.0, f64::INFINITY);
    let mut eta = if dd0 > 0.0 { -d0 / dd0 } else { 1.0 / gradient_norm };
    let mut iterations = 0;
    while iterations < max_line_search {
        iterations += 1;
        let (_, d1, dd1) = at(eta);
        if !d1.is_finite() {
            hi = eta;
        } else if d1 < 0.0 {
            lo = eta;
        } else {
            hi = eta;
        }
        // Done when the slope is a 1e-9 fraction of the initial one (on separable
        // data the line has no minimiser and the slope only tends to zero).
        if d1.is_finite() && d1.abs() <= 1e-9 * d0.abs() {
            break;
        }
        let newton = if d1.is_finite() && dd1 > 0.0 { eta - d1 / dd1 } else { f64::NAN };
        eta = if newton > lo && newton < hi {
            newton
        } else if hi.is_finite() {
            0.5 * (lo + hi)
        } else {
            2.0 * eta.max(lo)
        };
        if hi.is_finite() && hi - lo <= 1e-15 * hi {
            break;
        }
    }
    // Accept only a decrease (rounding can spoil the last Newton iterate).
    for _ in 0..30 {
        let (f, _, _) = at(eta);
        if f <= before {
            let params: Vec<f64> = p.iter().zip(&g).map(|(pi, gi)| pi - eta * gi).collect();
            if params.iter().all(|v| v.is_finite()) {
                let stepped = model.with_parameters(params)?;
                let after = penalised_loss(problem, &stepped, stepped.parameters(), l2, None)?;
                if after <= before {
                    return Ok((
                        stepped,
                        StepReport { step: eta, before, after, line_search_iterations: iterations, gradient_norm },
                    ));
                }
            }
        }
        eta *= 0.5;
    }
    Ok((model.clone(), StepReport { line_search_iterations: iterations, ..none }))
}

/// Which class [`GradientStepOracle`] steps.
///
/// ```
/// use oracles::step::{GradientStepOracle, StepClass};
/// use oracles::Oracle;
/// let o = GradientStepOracle { class: StepClass::IndexedLinear { groups: 4 }, l2: 0.0, max_line_search: 30 };
/// assert_eq!(o.kind(), "indexed-linear");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "class")]
pub enum StepClass {
    /// [`LinearModel`] (kind `linear`).
    Linear,
    /// [`IndexedLinearModel`] (kind `indexed-linear`); 0 groups: from the data.
    IndexedLinear {
        /// Number of groups.
        groups: usize,
    },
}

/// An oracle that takes one [`gradient_step`] on `J` from its warm start (from
/// zero without one) instead of fitting: Hazan & Urtasun's parameter update.
/// Its models are ordinary linear / indexed-linear models, so they are saved,
/// loaded and predicted with like any others.
///
/// ```
/// use oracles::step::GradientStepOracle;
/// use oracles::{Features, FitContext, Oracle, Problem};
/// let o = GradientStepOracle::linear(&oracles::linear::LinearOracle::default());
/// let p = Problem::new(Features::new(&[1.0, -1.0], 2, 1).unwrap(), &[0, 1], &[0.0; 4], 2, None).unwrap();
/// let one = o.fit(&p, None, FitContext { seed: 0 }).unwrap();
/// let two = o.fit(&p, Some(one.as_ref()), FitContext { seed: 0 }).unwrap();
/// assert!(oracles::model_loss(two.as_ref(), &p).unwrap() <= oracles::model_loss(one.as_ref(), &p).unwrap());
/// // Any oracle offers its step version, if it has one (`Oracle::gradient_step`).
/// assert!(oracles::boosting::BoostingOracle::default().gradient_step().is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GradientStepOracle {
    /// The function class.
    pub class: StepClass,
    /// Coefficient `λ ≥ 0` of `(λ/2)‖p‖²` in `J`.
    pub l2: f64,
    /// Most Newton / bisection iterations of the line search (≥ 1).
    pub max_line_search: usize,
}

impl GradientStepOracle {
    /// The step oracle equivalent to a linear oracle.
    pub fn linear(oracle: &LinearOracle) -> Self {
        Self { class: StepClass::Linear, l2: oracle.l2, max_line_search: 30 }
    }

    /// The step oracle equivalent to an indexed linear oracle.
    pub fn indexed(oracle: &IndexedLinearOracle) -> Self {
        Self { class: StepClass::IndexedLinear { groups: oracle.groups }, l2: oracle.l2, max_line_search: 30 }
    }
}

impl Oracle for GradientStepOracle {
    /// Steps over ranks are supported: the loss, gradient and line-search sums
    /// are added over the ranks (in rank order: close to one process's, not
    /// its bits).
    fn distributed(&self) -> bool {
        true
    }

    fn kind(&self) -> &str {
        match self.class {
            StepClass::Linear => crate::linear::KIND,
            StepClass::IndexedLinear { .. } => crate::indexed::KIND,
        }
    }

    fn validate(&self) -> Result<(), OracleError> {
        if !(self.l2.is_finite() && self.l2 >= 0.0) {
            return Err(OracleError::InvalidHyperParameter {
                name: "l2",
                reason: format!("must be finite and >= 0, got {}", self.l2),
            });
        }
        if self.max_line_search == 0 {
            return Err(OracleError::InvalidHyperParameter {
                name: "max_line_search",
                reason: "must be at least 1".into(),
            });
        }
        Ok(())
    }

    fn penalty(&self, model: &dyn Model) -> Result<f64, OracleError> {
        Ok(match self.class {
            StepClass::Linear => ridge(self.l2, downcast_model::<LinearModel>(model, crate::linear::KIND)?.weights()),
            StepClass::IndexedLinear { .. } => {
                ridge(self.l2, downcast_model::<IndexedLinearModel>(model, crate::indexed::KIND)?.parameters())
            }
        })
    }

    fn fit(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        _ctx: FitContext,
    ) -> Result<Box<dyn Model>, OracleError> {
        self.validate()?;
        let (d, c) = (problem.dim(), problem.classes());
        Ok(match self.class {
            StepClass::Linear => {
                let start = downcast_warm::<LinearModel>(warm, crate::linear::KIND)?
                    .cloned()
                    .unwrap_or_else(|| LinearModel::zeros(d, c));
                Box::new(gradient_step(problem, &start, self.l2, self.max_line_search)?.0)
            }
            StepClass::IndexedLinear { groups } => {
                let start = match downcast_warm::<IndexedLinearModel>(warm, crate::indexed::KIND)? {
                    Some(m) => m.clone(),
                    None => IndexedLinearOracle { groups, ..Default::default() }.cold_start(problem)?,
                };
                Box::new(gradient_step(problem, &start, self.l2, self.max_line_search)?.0)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem_data() -> (Vec<f64>, Vec<usize>, Vec<f64>) {
        let mut x = Vec::new();
        let mut labels = Vec::new();
        let mut bias = Vec::new();
        for i in 0..60 {
            let a = (i as f64 * 0.71).sin();
            let b = (i as f64 * 0.13).cos();
            x.extend_from_slice(&[a, b, 1.0]);
            labels.push(((a + 0.5 * b + 0.4 * (i as f64 * 2.1).sin()) > 0.0) as usize + usize::from(i % 7 == 0));
            bias.extend_from_slice(&[0.1 * b, 0.0, if i % 5 == 0 { f64::NEG_INFINITY } else { -0.2 }]);
        }
        for (k, l) in labels.iter_mut().enumerate() {
            if bias[k * 3 + *l] == f64::NEG_INFINITY {
                *l = 0;
            }
        }
        (x, labels, bias)
    }

    /// The line search lands where `φ'(η) = 0`: checked by finite differences
    /// of `J` along the gradient, and repeated steps approach the L-BFGS optimum.
    #[test]
    fn exact_line_search_and_convergence_to_the_lbfgs_optimum() {
        let (x, labels, bias) = problem_data();
        let f = Features::new(&x, labels.len(), 3).unwrap();
        let p = Problem::new(f, &labels, &bias, 3, None).unwrap();
        let l2 = 0.5;
        let mut m = LinearModel::zeros(3, 3);
        let (m1, r) = gradient_step(&p, &m, l2, 50).unwrap();
        assert!(r.step > 0.0 && r.after < r.before);
        // φ(η ± h) ≥ φ(η): η minimises J on the line.
        let mut g = vec![0.0; 9];
        penalised_loss(&p, &m, m.parameters(), l2, Some(&mut g)).unwrap();
        for h in [1e-3, -1e-3] {
            let q: Vec<f64> = m.parameters().iter().zip(&g).map(|(a, b)| a - (r.step + h) * b).collect();
            let v = penalised_loss(&p, &m, &q, l2, None).unwrap();
            assert!(v >= r.after - 1e-12, "{v} < {}", r.after);
        }
        m = m1;
        for _ in 0..3000 {
            m = gradient_step(&p, &m, l2, 50).unwrap().0;
        }
        let lin = LinearOracle {
            l2,
            lbfgs: crate::optim::LbfgsOptions { gradient_tolerance: 1e-12, ..Default::default() },
            ..Default::default()
        };
        let (best, _) = lin.fit_linear(&p, None).unwrap();
        let jb = penalised_loss(&p, &best, best.parameters(), l2, None).unwrap();
        let js = penalised_loss(&p, &m, m.parameters(), l2, None).unwrap();
        assert!((js - jb).abs() <= 1e-8 * jb.abs(), "{js} vs {jb}");
        for (a, b) in m.parameters().iter().zip(best.parameters()) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
    }

    /// The analytic gradient of `J` matches central differences (linear and indexed classes).
    #[test]
    fn penalised_gradient_matches_finite_differences() {
        let (x, labels, bias) = problem_data();
        let f = Features::new(&x, labels.len(), 3).unwrap();
        let p = Problem::new(f, &labels, &bias, 3, None).unwrap();
        let lin = LinearModel::new(3, 3, (0..9).map(|i| 0.1 * i as f64 - 0.3).collect()).unwrap();
        // The indexed class reads the constant 1 as group 1 of 2 (inputs a, b).
        let idx = IndexedLinearModel::new(3, 2, 3, (0..12).map(|i| 0.05 * i as f64 - 0.2).collect()).unwrap();
        fn check<M: LinearInParameters>(p: &Problem<'_>, m: &M) {
            let w = m.parameters().to_vec();
            let mut g = vec![0.0; w.len()];
            penalised_loss(p, m, &w, 0.3, Some(&mut g)).unwrap();
            for i in 0..w.len() {
                let (mut a, mut b) = (w.clone(), w.clone());
                a[i] += 1e-6;
                b[i] -= 1e-6;
                let fd = (penalised_loss(p, m, &a, 0.3, None).unwrap() - penalised_loss(p, m, &b, 0.3, None).unwrap())
                    / 2e-6;
                assert!((fd - g[i]).abs() < 1e-5 * (1.0 + fd.abs()), "coordinate {i}: {fd} vs {}", g[i]);
            }
        }
        check(&p, &lin);
        check(&p, &idx);
    }

    /// With a ridge, one step from an over-fitted warm start lowers `J` but
    /// raises `L`; the learners accept steps through [`crate::fit_monotone`],
    /// which must compare `J` (it compared `L` and rejected every such step,
    /// so the weights never shrank). Repeated steps reach the penalised optimum.
    #[test]
    fn steps_through_fit_monotone_reach_the_penalised_optimum_from_an_overfitted_start() {
        let (x, labels, bias) = problem_data();
        let f = Features::new(&x, labels.len(), 3).unwrap();
        let p = Problem::new(f, &labels, &bias, 3, None).unwrap();
        let tight = crate::optim::LbfgsOptions { gradient_tolerance: 1e-12, ..Default::default() };
        let lin = |l2| LinearOracle { l2, lbfgs: tight, ..Default::default() }.full_fit();
        let (overfitted, _) = lin(0.0).fit_linear(&p, None).unwrap();
        let l2 = 5.0;
        let (best, _) = lin(l2).fit_linear(&p, None).unwrap();
        let oracle = GradientStepOracle::linear(&lin(l2));
        let mut m: Box<dyn Model> = Box::new(overfitted.clone());
        let first = crate::fit_monotone(&oracle, &p, Some(m.as_ref()), FitContext { seed: 0 }).unwrap();
        assert!(!first.rejected, "a step that lowers J was rejected");
        assert!(first.objective() < first.previous_objective().unwrap());
        assert!(first.loss > first.previous_loss.unwrap(), "this step shrinks W, so L rises");
        for _ in 0..2000 {
            m = crate::fit_monotone(&oracle, &p, Some(m.as_ref()), FitContext { seed: 0 }).unwrap().model;
        }
        let m = m.as_any().downcast_ref::<LinearModel>().unwrap();
        let jb = penalised_loss(&p, &best, best.parameters(), l2, None).unwrap();
        let js = penalised_loss(&p, m, m.parameters(), l2, None).unwrap();
        assert!((js - jb).abs() <= 1e-8 * jb, "{js} vs {jb}");
        assert_eq!(oracle.penalty(m).unwrap(), ridge(l2, m.parameters()));
        let idx = GradientStepOracle { class: StepClass::IndexedLinear { groups: 1 }, l2, max_line_search: 30 };
        assert!(idx.penalty(m).is_err(), "a linear model is not of the indexed class");
    }

    #[test]
    fn a_step_never_raises_j_and_the_oracle_warm_starts() {
        let (x, labels, bias) = problem_data();
        let f = Features::new(&x, labels.len(), 3).unwrap();
        let p = Problem::new(f, &labels, &bias, 3, None).unwrap();
        let o = GradientStepOracle::linear(&LinearOracle::default());
        let mut warm: Option<Box<dyn Model>> = None;
        let mut last = f64::INFINITY;
        for _ in 0..20 {
            let m = o.fit(&p, warm.as_deref(), FitContext { seed: 0 }).unwrap();
            let l = crate::model_loss(m.as_ref(), &p).unwrap();
            assert!(l <= last);
            last = l;
            warm = Some(m);
        }
        assert!(GradientStepOracle { max_line_search: 0, ..o }.validate().is_err());
    }
}
