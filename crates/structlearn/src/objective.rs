//! The training objective `R = Σ_k [A(λ^k, θ^k) − θ^k(y^k)]` (docs/MATH.md §4),
//! computed so that rounding cannot make it negative.
//!
//! `A(λ, θ) = Σ_α ε_α log Σ_{y_α} exp(θ̃_α(y_α)/ε_α)` and the score of the
//! true labelling `θ(y^k) = Σ_α θ_α(y^k_α)` are both large when the energies
//! are (on separable data without a penalty the weights grow without bound),
//! while their difference `R` is small: subtracting the two sums cancels
//! almost every digit, and the result can come out below zero although
//! `R ≥ 0` exactly. The messages cancel along a consistent labelling
//! (`Σ_α θ̃_α(y^k_α) = Σ_α θ_α(y^k_α)`: every message enters one region with
//! `+` and one with `−` at the same configuration), so
//!
//! ```text
//! R_k = Σ_α ε_α log Σ_{y_α} exp((θ̃_α(y_α) − θ̃_α(y^k_α)) / ε_α),
//! ```
//!
//! a sum of per-region terms that are each `≥ 0` in floating point too (the
//! term of `y^k_α` is `exp(0) = 1`, so the logarithm is of a number `≥ 1`, and
//! the shift `max_y (θ̃_α(y) − θ̃_α(y^k_α)) ≥ 0`). They are added with
//! Neumaier's compensated summation ([`NeumaierSum`]). Each term is also
//! `ε_t` times the oracle's row loss of that region (docs/MATH.md §4), so
//! `R = Σ_t ε_t L_t` region by region.
//!
//! Cost: one pass computing `θ̃` and a log-sum-exp per region, where the
//! subtraction needed only the dual value the run reports. Measured on a
//! 64×64 binary grid (median of 200, machine load ≈ 6.5): 0.72 ms, against
//! 3.05 ms for the 2 message-passing iterations of a Hazan–Urtasun round
//! and 0.05 ms for the old score of the truth — about 2–5 % of a whole
//! round on the shapes data (14–38 ms per image there), about 2 % of
//! Algorithm 1's 25-iteration message-passing steps.

use fastmath::{Plain, ln_pos};
use smoothed_inference::{InferenceProblem, Messages, Workspace};

/// Neumaier's compensated sum (Kahan–Babuška): the rounding error of every
/// addition is carried in a second accumulator, so the result is as accurate
/// as if it were summed in about twice the precision, whatever the order and
/// magnitudes of the terms.
///
/// ```
/// use structlearn::objective::NeumaierSum;
/// let terms = [1.0, 1e100, 1.0, -1e100];
/// assert_eq!(terms.iter().sum::<f64>(), 0.0); // naive: both 1s are lost
/// assert_eq!(terms.iter().copied().collect::<NeumaierSum>().value(), 2.0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NeumaierSum {
    sum: f64,
    compensation: f64,
}

impl NeumaierSum {
    /// Zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `x`.
    pub fn add(&mut self, x: f64) {
        let t = self.sum + x;
        self.compensation += if self.sum.abs() >= x.abs() { (self.sum - t) + x } else { (x - t) + self.sum };
        self.sum = t;
    }

    /// The compensated total.
    pub fn value(&self) -> f64 {
        self.sum + self.compensation
    }
}

impl FromIterator<f64> for NeumaierSum {
    fn from_iter<I: IntoIterator<Item = f64>>(iter: I) -> Self {
        let mut s = Self::new();
        iter.into_iter().for_each(|x| s.add(x));
        s
    }
}

/// `A(λ, θ) − θ(y)` of one example as a sum of non-negative per-region terms
/// (module docs), for messages `messages` and the labelling `truth` (one label
/// per variable; it must have finite potential in every region). `ws` is the
/// scratch of the pass ([`InferenceProblem::log_partitions`]); the result is
/// [`loss_from_workspace`] after it.
///
/// # Panics
/// If `messages` do not fit the problem's graph.
///
/// ```
/// use smoothed_inference::{InferenceProblem, Messages, RunOptions, Workspace};
/// use structlearn::objective::loss_at;
/// let g = factor_graph::grid(2, 2, 2).unwrap();
/// // Huge energies favouring the truth [0, 1, 0, 1]: A(λ, θ) and θ(y) are ~1e12.
/// let truth = [0, 1, 0, 1];
/// let theta: Vec<f64> = (0..g.num_regions())
///     .flat_map(|r| {
///         let own = g.config_of(r, &truth);
///         (0..g.config_range(r).len()).map(move |c| if c == own { 1e12 } else { 0.0 })
///     })
///     .collect();
/// let p = InferenceProblem::uniform(&g, &theta, 0.01).unwrap();
/// let (mut m, mut ws) = (Messages::zeros(&g), Workspace::new(&g));
/// p.run(&mut m, &RunOptions { iterations: 5, tolerance: None, order: None }, &mut ws).unwrap();
/// let r = loss_at(&p, &m, &truth, &mut ws);
/// assert!(r >= 0.0 && r < 1e-9);
/// ```
pub fn loss_at(problem: &InferenceProblem<'_>, messages: &Messages, truth: &[usize], ws: &mut Workspace) -> f64 {
    problem.log_partitions(messages, ws).expect("messages fit the graph");
    loss_from_workspace(problem, ws, truth)
}

/// [`loss_at`] from what the last [`InferenceProblem::run`] (or
/// [`InferenceProblem::log_partitions`]) of `problem` left in `ws`, without
/// another pass: per region `(m_r − θ̃_r(y)) + ε_r ln z_r`, both parts ≥ 0
/// (`m_r` is the largest `θ̃_r`, `z_r ≥ 1`; see [`Workspace::log_partitions`]).
///
/// # Panics
/// If `ws` holds no report of a problem with this graph.
pub fn loss_from_workspace(problem: &InferenceProblem<'_>, ws: &Workspace, truth: &[usize]) -> f64 {
    let graph = problem.graph();
    let (tt, parts) = (ws.reparameterized(), ws.log_partitions());
    assert!(
        tt.len() == graph.total_configs() && parts.len() == graph.num_regions(),
        "the workspace holds no report of this graph"
    );
    let mut total = NeumaierSum::new();
    for (r, &[m, z]) in parts.iter().enumerate() {
        let own = tt[graph.config_range(r).start + graph.config_of(r, truth)];
        total.add((m - own) + problem.region_epsilon(r) * ln_pos::<Plain>(z));
    }
    total.value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use smoothed_inference::RunOptions;

    /// Away from cancellation the per-region form equals `A(λ, θ) − θ(y)`.
    #[test]
    fn equals_dual_value_minus_truth_score() {
        let g = factor_graph::grid(3, 4, 3).unwrap();
        let theta: Vec<f64> = (0..g.total_configs()).map(|i| ((i * 37 % 11) as f64 - 5.0) * 0.3).collect();
        let truth: Vec<usize> = (0..12).map(|i| i % 3).collect();
        for eps in [1.0, 0.1, 0.01] {
            let p = InferenceProblem::uniform(&g, &theta, eps).unwrap();
            let mut m = Messages::zeros(&g);
            p.run(&mut m, &RunOptions { iterations: 7, tolerance: None, order: None }, &mut Workspace::new(&g))
                .unwrap();
            let score: f64 =
                (0..g.num_regions()).map(|r| theta[g.config_range(r).start + g.config_of(r, &truth)]).sum();
            let direct = p.dual_value(&m) - score;
            let ours = loss_at(&p, &m, &truth, &mut Workspace::new(&g));
            assert!((ours - direct).abs() <= 1e-10 * direct.abs(), "ε = {eps}: {ours} vs {direct}");
        }
    }

    /// The loss read off a run's report is bit for bit the loss of a separate
    /// pass at the run's final messages (so the objective recorded after a
    /// message-passing step is the one `Trainer::objective` computes).
    #[test]
    fn loss_from_the_report_equals_a_separate_pass() {
        for (g, eps) in [(factor_graph::grid(4, 5, 2).unwrap(), 0.1), (factor_graph::grid(3, 4, 8).unwrap(), 0.3)] {
            let theta: Vec<f64> = (0..g.total_configs()).map(|i| ((i * 37 % 11) as f64 - 5.0) * 0.3).collect();
            let truth: Vec<usize> = (0..g.num_variables()).map(|i| i % g.cardinality(i)).collect();
            let p = InferenceProblem::uniform(&g, &theta, eps).unwrap();
            let (mut m, mut ws) = (Messages::zeros(&g), Workspace::new(&g));
            p.run(&mut m, &RunOptions { iterations: 6, tolerance: Some(1e-8), order: None }, &mut ws).unwrap();
            let from_report = loss_from_workspace(&p, &ws, &truth);
            let separate = loss_at(&p, &m, &truth, &mut Workspace::new(&g));
            assert_eq!(from_report.to_bits(), separate.to_bits());
        }
    }
}
