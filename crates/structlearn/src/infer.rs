//! MAP-style inference on a UAI model with certificates: the pipeline that
//! `structlearn infer` and Python's `structlearn.infer_uai` share
//! (docs/inference.md, "Labellings and their certificates").
//!
//! [`infer_region_model`] runs, per ε stage ([`anneal_schedule`] with
//! [`InferOptions::anneal`], else one stage at [`InferOptions::eps`]): star
//! updates from the previous stage's messages, the dual polish
//! ([`polish_dual`]) where they did not converge, the checks that the model
//! allows some labelling ([`infeasibility_certificate`]), the constrained
//! decoding with restarts ([`decode_with_restarts`]) and the ε = 0 bound.
//! The reported labelling is the best-scoring stage's, the bound the lowest
//! stage's (every stage's is valid). It lives here rather than in
//! `smoothed-inference` because the polish uses the L-BFGS of
//! `oracles::optim`.
//!
//! ```
//! use structlearn::infer::{InferOptions, infer_region_model};
//! // Two binary variables that may not both be 1, each preferring 1.
//! let text = "MARKOV\n2\n2 2\n3\n1 0\n1 1\n2 0 1\n2\n1 2\n2\n1 3\n4\n1 1 1 0\n";
//! let m = factor_graph::UaiModel::parse(text).unwrap().to_region_graph().unwrap();
//! let out = infer_region_model(&m, &InferOptions { anneal: true, ..InferOptions::default() }, &mut |_| {}).unwrap();
//! let chosen = out.chosen().as_ref().unwrap();
//! assert_eq!(chosen.labels, vec![0, 1]); // 1·3 beats 2·1
//! assert!(out.bound >= chosen.score + m.constant - 1e-9);
//! ```

use factor_graph::{RegionGraph, UaiRegionModel};
use smoothed_inference::decoding::{DecodeOptions, Decoded, LabelOrder, decode_feasible_from, map_bound_of};
use smoothed_inference::{InferenceError, InferenceProblem, Messages, RunOptions, RunReport, Workspace};

use crate::train::EPSILON_RANGE;

/// Default floor of the schedule as a fraction of the start value:
/// [`InferOptions::eps_min`] defaults to `ANNEAL_FLOOR_RATIO × eps` (7
/// halvings, then the floor; see docs/inference.md for the measurement
/// behind it).
pub const ANNEAL_FLOOR_RATIO: f64 = 0.01;

/// The ε values of an annealed run: `start`, then halved while above `floor`,
/// ending at `floor` (once; a floor at or above `start` gives `[start]`).
///
/// ```
/// use structlearn::infer::anneal_schedule;
/// assert_eq!(anneal_schedule(1.0, 0.2), vec![1.0, 0.5, 0.25, 0.2]);
/// assert_eq!(anneal_schedule(1.0, 0.25), vec![1.0, 0.5, 0.25]);
/// assert_eq!(anneal_schedule(0.1, 0.5), vec![0.1]);
/// ```
pub fn anneal_schedule(start: f64, floor: f64) -> Vec<f64> {
    let mut eps = vec![start];
    let mut e = start;
    // At most 64 stages: halving reaches any floor ≥ 1e-6 from ≤ 1e6 in 40.
    while e > floor && eps.len() < 64 {
        e = (e / 2.0).max(floor);
        eps.push(e);
    }
    eps
}

/// Settings of [`infer_region_model`]; the defaults are `structlearn infer`'s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InferOptions {
    /// Entropy weight ε (with `anneal`, the first stage's), in
    /// [`EPSILON_RANGE`].
    pub eps: f64,
    /// Largest number of message-passing iterations (per stage).
    pub iterations: usize,
    /// Stop once the largest marginalisation violation is below this.
    pub tolerance: Option<f64>,
    /// L-BFGS iterations of the dual polish after unconverged star updates
    /// (per stage); 0 disables it.
    pub polish: usize,
    /// The ε schedule: ε halved from `eps` to `eps_min`, messages
    /// warm-started from one stage to the next.
    pub anneal: bool,
    /// With `anneal`: the last ε (default `eps × ANNEAL_FLOOR_RATIO`, at
    /// least the smallest allowed ε).
    pub eps_min: Option<f64>,
    /// The constrained decoding's budget ([`DecodeOptions::max_backtracks`]).
    pub max_backtracks: usize,
    /// Attempts with perturbed beliefs after a decoding whose budget ran out
    /// ([`decode_with_restarts`]).
    pub decode_restarts: usize,
    /// How the decoding ranks a variable's labels
    /// ([`DecodeOptions::label_order`]): by singleton beliefs, by the bound
    /// `r_v(y) = Σ_{α ∋ v} max θ̃_α` over the configurations the domains
    /// still allow, read from the stage's reparameterised potentials `θ̃`
    /// ([`LabelOrder::Regions`]), or both, keeping the labelling that scores
    /// more ([`LabelOrder::Both`], the default: on the measured families
    /// neither order alone is better on every model, and the second search
    /// costs little next to message passing; docs/inference.md, "Measurement:
    /// label orders").
    pub label_order: LabelOrder,
}

impl Default for InferOptions {
    fn default() -> Self {
        Self {
            eps: 1.0,
            iterations: 1000,
            tolerance: None,
            polish: 2000,
            anneal: false,
            eps_min: None,
            max_backtracks: DecodeOptions::default().max_backtracks,
            decode_restarts: 0,
            label_order: LabelOrder::Both,
        }
    }
}

impl InferOptions {
    /// The ε of every stage.
    pub fn schedule(&self) -> Vec<f64> {
        if self.anneal {
            anneal_schedule(self.eps, self.eps_min.unwrap_or((self.eps * ANNEAL_FLOOR_RATIO).max(EPSILON_RANGE.0)))
        } else {
            vec![self.eps]
        }
    }

    /// Checks the settings: ε and `eps_min` in [`EPSILON_RANGE`], a
    /// tolerance that is a positive number, `eps_min` only with `anneal`.
    ///
    /// ```
    /// use structlearn::infer::{InferError, InferOptions};
    /// let bad = InferOptions { eps: -1.0, ..InferOptions::default() };
    /// assert!(matches!(bad.validate(), Err(InferError::InvalidOption { name: "eps", .. })));
    /// ```
    pub fn validate(&self) -> Result<(), InferError> {
        let (lo, hi) = EPSILON_RANGE;
        let eps_ok = |e: f64| e.is_finite() && (lo..=hi).contains(&e);
        if !eps_ok(self.eps) {
            return Err(InferError::invalid("eps", format!("{} is not a number between {lo:e} and {hi:e}", self.eps)));
        }
        if let Some(e) = self.eps_min {
            if !eps_ok(e) {
                return Err(InferError::invalid("eps_min", format!("{e} is not a number between {lo:e} and {hi:e}")));
            }
            if !self.anneal {
                return Err(InferError::invalid("eps_min", "is the floor of the ε schedule: it needs anneal".into()));
            }
        }
        if let Some(t) = self.tolerance
            && !(t.is_finite() && t > 0.0)
        {
            return Err(InferError::invalid("tolerance", format!("{t} is not a positive number")));
        }
        Ok(())
    }
}

/// What can stop [`infer_region_model`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InferError {
    /// A setting out of range ([`InferOptions::validate`]).
    #[error("{name}: {message}")]
    InvalidOption {
        /// The setting, as [`InferOptions`] names it.
        name: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The inference problem could not be built from the model.
    #[error(transparent)]
    Problem(InferenceError),
    /// Message passing or the polish refused its inputs.
    #[error(transparent)]
    Run(InferenceError),
    /// The smoothed dual value is not finite.
    #[error("the smoothed dual value is {value} (the model may give every labelling probability 0)")]
    DualNotFinite {
        /// The dual value.
        value: f64,
    },
    /// The messages prove that every labelling has probability 0
    /// ([`infeasibility_certificate`]).
    #[error(
        "the model gives every labelling probability 0: zero entries of different factors contradict each other \
         (message passing proves it: a labelling of positive probability would have to score at most {bound:.6e} \
         and at least {least_score:.6e}); check the factors' zero entries"
    )]
    Infeasible {
        /// `Σ_α max θ̃_α` over the configurations with finite `θ`.
        bound: f64,
        /// `Σ_α min θ_α` over the configurations with finite `θ`.
        least_score: f64,
    },
}

impl InferError {
    fn invalid(name: &'static str, message: String) -> Self {
        Self::InvalidOption { name, message }
    }
}

/// What [`infer_region_model`] reports while it runs, for the caller to
/// print or ignore.
#[derive(Debug, Clone, PartialEq)]
pub enum InferNote {
    /// The polish's line search failed; the best point found is kept.
    PolishStoppedEarly(String),
    /// A stage's star updates did not converge and the polish ran.
    Polished {
        /// The largest violation after the polish.
        max_violation: f64,
        /// The tolerance asked for.
        tolerance: Option<f64>,
        /// Whether the polish reached it.
        converged: bool,
    },
    /// A stage is done (after its decoding).
    Stage {
        /// Its ε.
        eps: f64,
        /// Its dual value, with the model's constant.
        dual_value: f64,
        /// Its ε = 0 bound, with the model's constant.
        bound: f64,
        /// Its labelling's score, with the model's constant (`None`: none found).
        score: Option<f64>,
    },
}

/// One ε stage of [`infer_region_model`]: what its messages certify and
/// decode to.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// The stage's ε.
    pub eps: f64,
    /// Message passing (and polish) at this ε; dual value without the
    /// model's constant.
    pub report: RunReport,
    /// The ε = 0 bound at the stage's final messages, with the model's
    /// constant added.
    pub bound: f64,
    /// The stage's labelling (its `score` without the model's constant).
    pub decoded: Result<Decoded, InferenceError>,
}

/// What [`infer_region_model`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct InferOutcome {
    /// Every stage, in schedule order (one without annealing).
    pub stages: Vec<Stage>,
    /// The stage whose labelling scores best (the first of equals), or
    /// `None` if no stage found one.
    pub best: Option<usize>,
    /// The lowest stage bound, with the model's constant: no labelling scores more.
    pub bound: f64,
    /// The last stage's beliefs, flat per configuration.
    pub beliefs: Vec<f64>,
}

impl InferOutcome {
    /// The reported labelling: the best stage's, or, if no stage found one,
    /// the last stage's error.
    pub fn chosen(&self) -> &Result<Decoded, InferenceError> {
        &self.stages[self.best.unwrap_or(self.stages.len() - 1)].decoded
    }

    /// The last stage.
    pub fn last(&self) -> &Stage {
        &self.stages[self.stages.len() - 1]
    }
}

/// The pipeline of `structlearn infer` on a model (module docs), evidence
/// already clamped and `check_feasible` passed; `notes` hears what happens.
///
/// Errors: [`InferError::InvalidOption`] for settings out of range, the
/// others as their variants say.
pub fn infer_region_model(
    m: &UaiRegionModel,
    opts: &InferOptions,
    notes: &mut dyn FnMut(&InferNote),
) -> Result<InferOutcome, InferError> {
    let weights = vec![1.0; m.graph.factor_types().len()];
    infer_energies(&m.graph, &m.theta, m.constant, &weights, opts, notes)
}

/// [`infer_region_model`] on a graph and its energies `θ` (plus a constant
/// added to every score), with an entropy weight per factor type: a stage at
/// `ε` smooths the regions of type `t` with `ε · weights[t]`, so
/// [`InferOptions::eps`] and [`InferOptions::eps_min`] are multiples of the
/// weights (a trained model's per-type ε: `eps = 1` is its own smoothing,
/// [`StructuredModel::predict_example_annealed`](crate::StructuredModel::predict_example_annealed)).
/// Stages, bound and scores are in `θ`'s units whatever the weights.
///
/// ```
/// use structlearn::infer::{InferOptions, infer_energies};
/// // Two binary pixels: y0 = y1 scores 2, else 0.
/// let g = factor_graph::grid(1, 2, 2).unwrap();
/// let mut theta = vec![0.0; g.total_configs()];
/// let pair = 2; // after the two pixels' regions
/// assert_eq!(g.region_variables(pair), &[0, 1]);
/// theta[g.config_range(pair)].copy_from_slice(&[2.0, 0.0, 0.0, 2.0]);
/// theta[g.config_range(0)][1] = 0.5; // variable 0 prefers label 1
/// let opts = InferOptions { eps: 1.0, anneal: true, eps_min: Some(1e-3), ..InferOptions::default() };
/// let out = infer_energies(&g, &theta, 0.0, &[0.1, 0.1], &opts, &mut |_| {}).unwrap();
/// let chosen = out.chosen().as_ref().unwrap();
/// assert_eq!(chosen.labels, vec![1, 1]);
/// assert!((chosen.score - 2.5).abs() < 1e-12 && out.bound >= chosen.score - 1e-9);
/// assert_eq!(out.stages[0].eps, 1.0); // a multiple of the weights
/// ```
///
/// Errors: as [`infer_region_model`]'s; weights that are not positive
/// numbers, or one per factor type, are [`InferError::Problem`].
pub fn infer_energies(
    g: &RegionGraph,
    theta: &[f64],
    constant: f64,
    weights: &[f64],
    opts: &InferOptions,
    notes: &mut dyn FnMut(&InferNote),
) -> Result<InferOutcome, InferError> {
    opts.validate()?;
    let schedule = opts.schedule();
    let mut messages = Messages::zeros(g);
    let mut ws = Workspace::new(g);
    let mut beliefs = vec![0.0; g.total_configs()];
    let mut stages: Vec<Stage> = Vec::with_capacity(schedule.len());
    let mut best: Option<usize> = None;
    let decode_options = DecodeOptions {
        max_backtracks: opts.max_backtracks,
        label_order: opts.label_order,
        ..DecodeOptions::default()
    };
    let mut reparameterized = vec![0.0; g.total_configs()];
    for &eps in &schedule {
        let eps_types: Vec<f64> = weights.iter().map(|w| eps * w).collect();
        let problem = InferenceProblem::new(g, theta, &eps_types).map_err(InferError::Problem)?;
        // Messages carry over: each stage starts from the previous one's.
        let report = solve_at(&problem, &mut messages, opts, &mut ws, notes)?;
        problem.beliefs(&messages, &mut beliefs);
        // Each variable's most believed label on its own can be a labelling the
        // model forbids where the relaxation is not tight: decode respecting the
        // zeros instead, then raise the score by local search (decoding module docs).
        // θ̃ once per stage: the region order's scores and the ε = 0 bound.
        problem.reparameterized(&messages, &mut reparameterized);
        let decoded = decode_with_restarts(g, theta, &beliefs, &reparameterized, &decode_options, opts.decode_restarts);
        let bound = map_bound_of(g, &reparameterized) + constant;
        notes(&InferNote::Stage {
            eps,
            dual_value: report.dual_value + constant,
            bound,
            score: decoded.as_ref().ok().map(|d| d.score + constant),
        });
        if let Ok(d) = &decoded
            && best.is_none_or(|b| stages[b].decoded.as_ref().is_ok_and(|bd| d.score > bd.score))
        {
            best = Some(stages.len());
        }
        stages.push(Stage { eps, report, bound, decoded });
    }
    // Every stage's bound is valid: the lowest is reported.
    let bound = stages.iter().map(|s| s.bound).fold(f64::INFINITY, f64::min);
    Ok(InferOutcome { stages, best, bound, beliefs })
}

/// Star updates from the given messages, then the dual polish if they did
/// not converge, then the checks that the model is not infeasible.
fn solve_at(
    problem: &InferenceProblem<'_>,
    messages: &mut Messages,
    opts: &InferOptions,
    ws: &mut Workspace,
    notes: &mut dyn FnMut(&InferNote),
) -> Result<RunReport, InferError> {
    let (iterations, tolerance, polish) = (opts.iterations, opts.tolerance, opts.polish);
    let mut report =
        problem.run(messages, &RunOptions { iterations, tolerance, order: None }, ws).map_err(InferError::Run)?;
    let polished = !report.converged && polish > 0;
    if polished {
        let star_iterations = report.iterations;
        report = polish_dual(problem, messages, polish, tolerance, notes).map_err(InferError::Run)?;
        report.iterations = star_iterations;
    }
    if !report.dual_value.is_finite() {
        return Err(InferError::DualNotFinite { value: report.dual_value });
    }
    if let Some((bound, least_score)) = infeasibility_certificate(problem, messages) {
        return Err(InferError::Infeasible { bound, least_score });
    }
    if polished {
        notes(&InferNote::Polished { max_violation: report.max_violation, tolerance, converged: report.converged });
    }
    Ok(report)
}

/// [`decode_feasible_from`] (`reparameterized`: `θ̃` at the messages of
/// `beliefs`, read by [`LabelOrder::Regions`]), and when its budget runs
/// out, up to `restarts` more attempts with the beliefs multiplied by seeded
/// factors in [0.5, 1.5) (a different order of the variables, and of the
/// labels the ranking nearly ties).
pub fn decode_with_restarts(
    g: &factor_graph::RegionGraph,
    theta: &[f64],
    beliefs: &[f64],
    reparameterized: &[f64],
    opts: &DecodeOptions,
    restarts: usize,
) -> Result<Decoded, InferenceError> {
    let first = decode_feasible_from(g, theta, beliefs, reparameterized, opts);
    if !matches!(first, Err(InferenceError::NoFeasibleLabeling { exhausted: false, .. })) {
        return first;
    }
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut noisy = beliefs.to_vec();
    for _ in 0..restarts {
        for (x, &b) in noisy.iter_mut().zip(beliefs) {
            // splitmix64
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            *x = b * (0.5 + (z >> 11) as f64 / (1u64 << 53) as f64);
        }
        if let Ok(d) = decode_feasible_from(g, theta, &noisy, reparameterized, opts) {
            return Ok(d);
        }
    }
    first
}

/// Whether the messages prove that every labelling has probability 0:
/// `Some((bound, least_score))` if so.
///
/// For a labelling `y` whose configurations all have finite `θ`, the messages
/// cancel in `Σ_α θ̃_α(y_α) = Σ_α θ_α(y_α)` (docs/MATH.md §3), so its score is
/// at most `bound = Σ_α max θ̃_α` (over finite-θ configurations) and at least
/// `least_score = Σ_α min θ_α`. `bound < least_score` (by more than rounding
/// could explain: 1e-9 of the magnitudes involved) leaves no such labelling.
/// This is what happens when the zeros of different factors contradict each
/// other in a way zero propagation does not see: the dual `A ≥ bound` is then
/// unbounded below and message passing drives it towards −∞. A feasible model
/// never passes the test, converged or not.
pub fn infeasibility_certificate(problem: &InferenceProblem<'_>, messages: &Messages) -> Option<(f64, f64)> {
    let g = problem.graph();
    let theta = problem.theta();
    let mut tt = vec![0.0; g.total_configs()];
    problem.reparameterized(messages, &mut tt);
    let (mut bound, mut least_score, mut scale) = (0.0f64, 0.0f64, 1.0f64);
    for r in 0..g.num_regions() {
        let range = g.config_range(r);
        let (mut hi, mut lo, mut size) = (f64::NEG_INFINITY, f64::INFINITY, 0.0f64);
        for (&t, &reparameterized) in theta[range.clone()].iter().zip(&tt[range]) {
            if t.is_finite() {
                hi = hi.max(reparameterized);
                lo = lo.min(t);
                size = size.max(t.abs()).max(reparameterized.abs());
            }
        }
        bound += hi;
        least_score += lo;
        scale += size;
    }
    scale += 2.0 * messages.as_slice().iter().fold(0.0f64, |acc, &v| acc + v.abs());
    (bound.is_finite() && least_score.is_finite() && bound < least_score - 1e-9 * scale).then_some((bound, least_score))
}

/// Minimises the smooth convex dual `A(λ, θ)` over the messages by L-BFGS from
/// the current messages (gradient `μ_{αβ} − μ_β`, docs/MATH.md §3). Block-coordinate star
/// updates can crawl along flat valleys on small, strongly coupled loops; a
/// quasi-Newton method does not. The optimiser never returns a point with a
/// larger `A`, and non-finite trial points are backtracked from. A failed
/// line search keeps the best point found and is told to `notes`
/// ([`InferNote::PolishStoppedEarly`]).
pub fn polish_dual(
    problem: &InferenceProblem<'_>,
    messages: &mut Messages,
    iterations: usize,
    tolerance: Option<f64>,
    notes: &mut dyn FnMut(&InferNote),
) -> Result<RunReport, InferenceError> {
    let g = problem.graph();
    let mut lambda = messages.as_slice().to_vec();
    let mut trial = messages.clone();
    let opts = oracles::optim::LbfgsOptions {
        max_iterations: iterations,
        memory: 20,
        gradient_tolerance: tolerance.map_or(1e-12, |t| t * 1e-3),
        relative_decrease_tolerance: 0.0,
    };
    let report = oracles::optim::lbfgs_minimize(
        |x, grad| {
            trial.as_mut_slice().copy_from_slice(x);
            if x.iter().any(|v| !v.is_finite()) {
                return f64::INFINITY;
            }
            problem.dual_gradient(&trial, grad);
            problem.dual_value(&trial)
        },
        &mut lambda,
        &opts,
    );
    // A failed line search still leaves the best point found in `lambda`.
    if let Err(e) = report {
        notes(&InferNote::PolishStoppedEarly(e.to_string()));
    }
    *messages = Messages::from_vec(g, lambda)?;
    let max_violation = problem.max_violation(messages);
    Ok(RunReport {
        iterations: 0,
        dual_value: problem.dual_value(messages),
        max_violation,
        converged: tolerance.is_some_and(|t| max_violation < t),
    })
}
