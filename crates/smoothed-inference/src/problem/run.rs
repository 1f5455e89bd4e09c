//! Message passing to a budget or a tolerance ([`InferenceProblem::run`],
//! [`InferenceProblem::run_and_decode`]): its options, its report, and when
//! to check the tolerance.

use serde::{Deserialize, Serialize};

use super::beliefs::region_beliefs;
use super::dispatch::{dispatch_check, dispatch_sweep};
use super::{InferenceProblem, Workspace};
use crate::{InferenceError, Messages, first_argmax};

/// How often [`InferenceProblem::run`] checks its tolerance (see
/// [`RunOptions::tolerance`]).
pub const TOLERANCE_CHECK_EVERY: usize = 5;

/// Options of [`InferenceProblem::run`].
///
/// ```
/// use smoothed_inference::RunOptions;
/// // At most 1000 sweeps; stop once the largest violation is below 1e-9.
/// let opts = RunOptions { iterations: 1000, tolerance: Some(1e-9), order: None };
/// # drop(opts);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    /// Maximum number of message-passing iterations (each: star updates in the
    /// forward order, then in reverse; ch. §1.10).
    pub iterations: usize,
    /// Stop as soon as the largest marginalisation violation
    /// `max |μ_{αβ} − μ_β|` falls below this. It is checked after every
    /// [`TOLERANCE_CHECK_EVERY`]-th iteration before the last (a check costs
    /// somewhat less than one iteration on an 8-label grid; the report checks
    /// the final messages), so a run may go up to
    /// `TOLERANCE_CHECK_EVERY − 1` iterations past the point where the
    /// violation first dropped below the tolerance. Once two checks show the
    /// violation falling so slowly that, even at twice that geometric rate, it
    /// would not reach the tolerance before the last iteration, the run skips
    /// the remaining checks and does all its iterations.
    pub tolerance: Option<f64>,
    /// Forward order of child regions; `None` is `graph.default_update_order()`
    /// (raster order on grids).
    pub order: Option<Vec<usize>>,
}

impl Default for RunOptions {
    /// 25 iterations, no tolerance, default order: one message-passing phase of
    /// Algorithm 1 (docs/MATH.md §4).
    fn default() -> Self {
        Self { iterations: 25, tolerance: None, order: None }
    }
}

/// What [`InferenceProblem::run`] did.
///
/// ```
/// use smoothed_inference::{InferenceProblem, Messages, RunOptions, Workspace};
/// let g = factor_graph::grid(2, 2, 2).unwrap();
/// let theta = vec![0.5; g.total_configs()];
/// let p = InferenceProblem::uniform(&g, &theta, 1.0).unwrap();
/// let (mut m, mut ws) = (Messages::zeros(&g), Workspace::new(&g));
/// let report = p.run(&mut m, &RunOptions { iterations: 100, tolerance: Some(1e-10), order: None }, &mut ws).unwrap();
/// assert!(report.converged && report.max_violation < 1e-10);
/// assert!(report.iterations <= 100);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Iterations performed.
    pub iterations: usize,
    /// `A(λ, θ)` at the final messages (ch. Eq. 1.15).
    pub dual_value: f64,
    /// `max |μ_{αβ}(y_β) − μ_β(y_β)|` at the final messages.
    pub max_violation: f64,
    /// Whether a tolerance was given and the final violation is below it.
    pub converged: bool,
}

impl InferenceProblem<'_> {
    /// Message passing from the given messages: up to `opts.iterations`
    /// iterations (see [`InferenceProblem::iterate`]), stopping early once the
    /// largest marginalisation violation is below `opts.tolerance`. `A(λ, θ)`
    /// never increases. The reported dual value and violation are computed
    /// from the final messages.
    pub fn run(
        &self,
        messages: &mut Messages,
        opts: &RunOptions,
        ws: &mut Workspace,
    ) -> Result<RunReport, InferenceError> {
        let iterations = self.pass_messages(messages, opts, ws)?;
        // Report from a fresh θ̃, free of the rounding the incremental updates accumulate.
        let total = self.plan.sizes.total_configs;
        let lambda = messages.as_slice();
        let tt = &mut ws.tt[..total];
        self.refresh_all(lambda, tt);
        let regions = self.graph.num_regions();
        ws.parts.resize(ws.parts.len().max(regions), [0.0; 2]);
        let parts = &mut ws.parts[..regions];
        let (max_violation, dual_value) = self.violation_and_dual_of(tt, &mut ws.beliefs[..total], &mut ws.sums, parts);
        ws.last_beliefs = total;
        ws.last_parts = regions;
        ws.last_tt = total;
        let converged = opts.tolerance.is_some_and(|tol| max_violation < tol);
        Ok(RunReport { iterations, dual_value, max_violation, converged })
    }

    /// Message passing as [`Self::run`] does it (the same final messages, bit
    /// for bit), then the labelling [`crate::decode`] reads from the final
    /// beliefs, without the rest of the report: only the singleton regions'
    /// beliefs are computed (no dual value, no violation, nothing left in the
    /// workspace). For predictions whose report nobody reads, such as the
    /// error rates during learning. Returns the iterations done and the labels.
    ///
    /// ```
    /// use smoothed_inference::{InferenceProblem, Messages, RunOptions, Workspace, decode};
    /// let g = factor_graph::grid(3, 3, 2).unwrap();
    /// let theta: Vec<f64> = (0..g.total_configs()).map(|i| (i % 5) as f64 * 0.3).collect();
    /// let p = InferenceProblem::uniform(&g, &theta, 0.1).unwrap();
    /// let (mut a, mut b, mut ws) = (Messages::zeros(&g), Messages::zeros(&g), Workspace::new(&g));
    /// let opts = RunOptions { iterations: 20, tolerance: Some(1e-6), order: None };
    /// let (iterations, labels) = p.run_and_decode(&mut a, &opts, &mut ws).unwrap();
    /// let report = p.run(&mut b, &opts, &mut ws).unwrap();
    /// assert_eq!((iterations, labels), (report.iterations, decode(&g, ws.beliefs()).unwrap()));
    /// ```
    ///
    /// Errors: those of [`Self::run`], and [`InferenceError::MissingSingleton`]
    /// as [`crate::decode`] returns it.
    pub fn run_and_decode(
        &self,
        messages: &mut Messages,
        opts: &RunOptions,
        ws: &mut Workspace,
    ) -> Result<(usize, Vec<usize>), InferenceError> {
        let g = self.graph;
        let singletons = (0..g.num_variables())
            .map(|variable| g.singleton(variable).ok_or(InferenceError::MissingSingleton { variable }))
            .collect::<Result<Vec<_>, _>>()?;
        let iterations = self.pass_messages(messages, opts, ws)?;
        let lambda = messages.as_slice();
        let (t, mu) = (&mut ws.logm, &mut ws.sums);
        let labels = singletons
            .into_iter()
            .map(|r| {
                let len = g.num_configs(r);
                // θ̃ and the beliefs of r as the report's refresh and beliefs compute them.
                self.region_reparameterized(lambda, r, &mut t[..len]);
                region_beliefs(&t[..len], self.plan.region_eps[r], &mut mu[..len]);
                first_argmax(&mu[..len])
            })
            .collect();
        Ok((iterations, labels))
    }

    /// The message passing of [`Self::run`], without the report; returns the
    /// iterations done. Leaves `θ̃` in the workspace stale.
    pub(super) fn pass_messages(
        &self,
        messages: &mut Messages,
        opts: &RunOptions,
        ws: &mut Workspace,
    ) -> Result<usize, InferenceError> {
        messages.check(self.graph)?;
        let default_order;
        let order: &[usize] = match &opts.order {
            Some(order) => {
                self.graph.validate_order(order)?;
                order
            }
            None => {
                default_order = self.graph.default_update_order();
                &default_order
            }
        };
        ws.grow(self.plan.sizes);
        ws.beliefs.resize(ws.beliefs.len().max(self.plan.sizes.total_configs), 0.0);
        let total = self.plan.sizes.total_configs;
        let lambda = messages.as_mut_slice();
        let mut iterations = 0;
        {
            let (tt, mut bufs) = ws.split(total);
            self.refresh_for_sweeps(lambda, tt);
            if opts.tolerance.is_none() {
                dispatch_sweep(self, lambda, tt, &mut bufs, order, opts.iterations);
                iterations = opts.iterations;
            }
        }
        if let Some(tol) = opts.tolerance {
            let mut last_check: Option<(usize, f64)> = None;
            while iterations < opts.iterations {
                let (tt, mut bufs) = ws.split(total);
                dispatch_sweep(self, lambda, tt, &mut bufs, order, 1);
                iterations += 1;
                // The last iteration needs no check: the report below recomputes the violation.
                if iterations.is_multiple_of(TOLERANCE_CHECK_EVERY) && iterations < opts.iterations {
                    let stale = self.leaves_stale_parents();
                    if stale {
                        // The children's θ̃ afresh, as a full refresh would leave it
                        // (the sweeps go on from it, so this keeps their numbers).
                        self.refresh_children(lambda, &mut ws.tt[..total]);
                    }
                    let scratch = (&mut ws.e[..], &mut ws.sums[..]);
                    let v = dispatch_check(self, lambda, &ws.tt[..total], stale, &mut ws.beliefs[..total], scratch);
                    if v >= tol {
                        if out_of_reach(last_check, (iterations, v), tol, opts.iterations) {
                            // No check before the last iteration can succeed: sweep on without them.
                            let (tt, mut bufs) = ws.split(total);
                            dispatch_sweep(self, lambda, tt, &mut bufs, order, opts.iterations - iterations);
                            iterations = opts.iterations;
                        }
                        last_check = Some((iterations, v));
                        continue;
                    }
                    // Confirm on a fresh θ̃ (the incremental one carries rounding) so
                    // that an early stop always reports `converged`.
                    self.refresh_all(lambda, &mut ws.tt[..total]);
                    if self.violation_of(&ws.tt[..total], &mut ws.beliefs[..total], &mut ws.sums) < tol {
                        break;
                    }
                }
            }
        }
        ws.last_beliefs = 0;
        ws.last_parts = 0;
        ws.last_tt = 0;
        Ok(iterations)
    }
}

/// Whether the violation cannot fall below `tol` by the last iteration, judged
/// from two checks `(iteration, violation)`: only if it is falling, and too
/// slowly even at twice its observed geometric rate. Message passing
/// converges linearly (the violation shrinks by a roughly constant factor per
/// iteration), so the remaining checks of such a run would all fail.
pub(super) fn out_of_reach(
    previous: Option<(usize, f64)>,
    (k, v): (usize, f64),
    tol: f64,
    max_iterations: usize,
) -> bool {
    let Some((j, vj)) = previous else { return false };
    if !(v < vj && v > 0.0 && tol > 0.0) {
        return false;
    }
    // Iterations to get from v to tol at the observed rate (v/vj per k − j iterations).
    let needed = (k - j) as f64 * (tol / v).ln() / (v / vj).ln();
    k as f64 + 0.5 * needed >= max_iterations as f64
}
