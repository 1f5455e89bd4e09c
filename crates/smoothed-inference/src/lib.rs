//! Entropy-smoothed, LP-relaxed inference on region graphs (docs/MATH.md §3; Domke
//! 2013, Eq. 8–10; chapter Thm 1.2–1.3): messages, beliefs, the dual
//! `A(λ, θ)`, star updates, message-passing runs and decoding.
//!
//! # The objective
//!
//! Every region `α` has potentials `θ(y_α)` (flat, `graph.config_range(α)`,
//! `−∞` allowed) and an entropy weight `ε_α > 0`, the weight of its factor
//! type (Hazan & Urtasun's counting numbers; one `ε` everywhere is the paper's
//! case). Messages `λ_α(y_β)` live on parent → child edges ([`Messages`]). The
//! reparameterised potentials, beliefs (Eq. 9) and dual (ch. Eq. 1.15) are
//!
//! ```text
//! θ̃_α(y_α) = θ(y_α) + Σ_{β child of α} λ_α(y_β) − Σ_{γ parent of α} λ_γ(y_α)
//! μ_α(y_α) ∝ exp(θ̃_α(y_α) / ε_α)
//! A(λ, θ)  = Σ_α ε_α log Σ_{y_α} exp(θ̃_α(y_α) / ε_α)
//! ```
//!
//! and `A(θ) = max_{μ ∈ M} θ·μ + Σ_α ε_α H(μ_α) = min_λ A(λ, θ)` (the proof of
//! ch. Thm 1.2 goes through region by region with `ε → ε_α`). Danskin:
//! `∂A/∂λ_α(y_β) = μ_{αβ}(y_β) − μ_β(y_β)`.
//!
//! # The weighted star update (derivation)
//!
//! Fix a child `ν` with parents `η ∈ P(ν)` and change all `λ_η(y_ν)` by
//! `δ_η(y_ν)` at once. Then `θ̃_η(y_η) += δ_η(y_ν)` (broadcast over the
//! configurations of `η` that agree with `y_ν`), `θ̃_ν(y_ν) −= Σ_η δ_η(y_ν)`,
//! and nothing else changes. Write `L_η(y_ν) = ε_η log Σ_{y_η ∼ y_ν}
//! exp(θ̃_η(y_η)/ε_η)` for the parent's log-marginal in potential units, so
//! `μ_{ην} ∝ exp(L_η/ε_η)`. The part of `A` that depends on `δ` is
//!
//! ```text
//! Σ_η ε_η log Σ_y exp((L_η(y) + δ_η(y)) / ε_η)  +  ε_ν log Σ_y exp((θ̃_ν(y) − Σ_η δ_η(y)) / ε_ν),
//! ```
//!
//! convex in `δ`. Its stationarity conditions are `μ'_{ην} = μ'_ν` for every
//! parent: all members of the star end with one distribution `m` over `y_ν`,
//! `L_η + δ_η = ε_η log m + c_η` and `θ̃_ν − Σ_η δ_η = ε_ν log m + c_ν`. Adding
//! these eliminates `δ`: with `E = ε_ν + Σ_η ε_η`,
//!
//! ```text
//! S(y)     = θ̃_ν(y) + Σ_η L_η(y)
//! log m(y) = S(y) / E
//! δ_η(y)   = ε_η log m(y) − L_η(y)          and then   θ̃'_ν = ε_ν log m.
//! ```
//!
//! In normalised log-beliefs (`log μ_ν = θ̃_ν/ε_ν − log Z_ν`,
//! `log μ_{ην} = L_η/ε_η − log Z_η`) this is
//! `log m = (ε_ν log μ_ν + Σ_η ε_η log μ_{ην}) / (ε_ν + Σ_η ε_η) + const`, a
//! weighted geometric mean, and `δ_η = ε_η (log m − log μ_{ην}) + const`. With
//! all weights equal to `ε` it is exactly Eq. 10 (ch. Eq. 1.16, whose `μ_{η'}`
//! means `μ_{η'ν}`), and the common result is the normalised geometric mean of
//! Thm 1.3 (ch. Eq. 1.17).
//!
//! **Constants.** Adding `c` to `δ_η` for all `y` changes `A` by
//! `ε_η·c/ε_η − ε_ν·c/ε_ν = 0` and no belief. We take all constants zero (the
//! unnormalised `S/E` above). Then every member of the star ends with the same
//! log-partition function `log Σ_y m(y)`, so at a fixed point of the schedule
//! `δ ≡ 0` exactly and the messages converge instead of drifting. (Normalising
//! `log m` to maximum 0 at every update would not: two children of one parent
//! normalise its table differently, and the two messages then drift apart by
//! a constant per sweep forever.)
//!
//! # Hard constraints (`θ = −∞`) and the clamp
//!
//! A star member can be `−∞` at a child value `y`: `θ̃_ν(y) = −∞`, or
//! `L_η(y) = −∞` when every configuration of `η` agreeing with `y` is
//! forbidden. Then `S(y) = −∞`, and exact minimisation needs `m(y) = 0`: messages
//! `−∞` from the finite parents and `+∞` on a `−∞` parent to drive a finite
//! child to zero. Instead, with `C = 700` (log-belief units; `e^{−700} ≈ 1e-304`
//! is still a normal `f64`):
//!
//! * `log m̂(y) = max(S(y)/E, max_y' S(y')/E − C)` — every value is floored;
//! * a parent with finite `L_η(y)` gets `δ_η(y) = ε_η log m̂(y) − L_η(y)`;
//! * parents with `L_η(y) = −∞` get `δ_η(y) = 0`, except the first of them,
//!   which absorbs what takes a finite child to `θ̃'_ν(y) = ε_ν log m̂(y)`;
//!   a child that is `−∞` at `y` stays `−∞`.
//!
//! Every message stays finite, and relative to the exact restricted minimum
//! (which by Hölder's inequality is ≤ the old `A`) the clamped update costs at
//! most `E·|Y_ν|·e^{−C}` in absolute terms: `A` does not increase beyond
//! rounding. If every `y` is impossible for some member (the star — hence the
//! local polytope — is infeasible), the update leaves everything unchanged. A
//! region whose `θ` is `−∞` everywhere is rejected up front
//! ([`InferenceError::InfeasibleRegion`]); a model whose constraints are only
//! jointly infeasible has `A(θ) = −∞`, and message passing then lowers
//! `A(λ, θ)` without bound while every number stays finite.
//!
//! # Implementation
//!
//! A [`Workspace`] caches `θ̃`; [`InferenceProblem::run`] computes it once from
//! `θ` and the messages and each star update then changes it incrementally
//! (`θ̃_η += δ_η` broadcast, `θ̃_ν −= Σ δ_η`), so a star update touches only the
//! star. All sums of exponentials are log-sum-exps against a maximum, so any
//! `ε` (tested down to `1e-3` and up to 10) neither overflows nor produces NaN.
//! Star updates at singleton children avoid the edge maps, binary ones work on
//! fixed eight-lane arrays, multi-label ones whose parents are plain pairs (a
//! grid's pixels) use `θ̃_α(y_ν, y_σ) = θ_α + λ_{αν}(y_ν) + λ_{ασ}(y_σ)`: the
//! marginal `L(y_ν) = λ_{αν}(y_ν) + ε log Σ_{y_σ} e^{θ_α/ε} e^{λ_{ασ}(y_σ)/ε}`
//! takes `|Y_σ|` exponentials and a small matrix–vector product with the fixed
//! `e^{θ_α/ε}` (built once per problem, row-shifted, with a log-domain
//! fallback for underflowing rows) instead of `|Y_α|` exponentials, and `exp`/`ln` are inlined branch-free kernels
//! (fdlibm's approximations, < 5e-16 relative error) that vectorise; on x86-64
//! the sweeps are compiled a second time for AVX2+FMA and chosen at run time.
//!
//! ```
//! use smoothed_inference::{decode, InferenceProblem, Messages, RunOptions, Workspace};
//! let g = factor_graph::grid(2, 3, 2).unwrap();
//! let mut theta = vec![0.0; g.total_configs()];
//! theta[g.config_range(0).start + 1] = 1.0; // pixel 0 prefers label 1
//! for p in 6..13 {
//!     let r = g.config_range(p);
//!     theta[r.start] = 0.5; // pairs prefer equal labels
//!     theta[r.start + 3] = 0.5;
//! }
//! let problem = InferenceProblem::uniform(&g, &theta, 0.1).unwrap();
//! let mut messages = Messages::zeros(&g);
//! let opts = RunOptions { iterations: 100, tolerance: Some(1e-10), order: None };
//! problem.run(&mut messages, &opts, &mut Workspace::new(&g)).unwrap();
//! let mut beliefs = vec![0.0; g.total_configs()];
//! problem.beliefs(&messages, &mut beliefs);
//! assert_eq!(decode(&g, &beliefs).unwrap(), vec![1; 6]);
//! ```

#![warn(missing_docs)]

mod batch;
pub mod decoding;
mod error;
mod messages;
mod problem;
// Only the AVX2 sweep pairs stars.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
mod schedule;
mod star;

pub use batch::{run_batch, with_thread_workspace};
pub use error::InferenceError;
pub use messages::Messages;
pub use problem::{InferenceProblem, ProblemPlan, RunOptions, RunReport, TOLERANCE_CHECK_EVERY, Workspace};

use factor_graph::RegionGraph;

/// The message part of the reparameterised potentials:
/// `out(y_α) = Σ_{β child of α} λ_α(y_β) − Σ_{γ parent of α} λ_γ(y_α)`, flat per
/// configuration, so that `θ̃ = θ + out` (docs/MATH.md §3). Divided by `ε` it is the
/// message part of the logistic-regression bias of Eq. 14 (docs/MATH.md §4).
///
/// # Panics
/// If `messages` do not fit the graph or `out.len() != graph.total_configs()`.
///
/// ```
/// use smoothed_inference::{Messages, message_offsets};
/// let g = factor_graph::grid(1, 2, 2).unwrap();
/// let mut out = vec![1.0; g.total_configs()];
/// message_offsets(&g, &Messages::zeros(&g), &mut out);
/// assert!(out.iter().all(|&v| v == 0.0)); // zero messages: no offset
/// ```
pub fn message_offsets(graph: &RegionGraph, messages: &Messages, out: &mut [f64]) {
    assert_eq!(messages.len(), graph.total_message_len(), "messages do not fit the graph");
    assert_eq!(out.len(), graph.total_configs(), "output must have one entry per configuration");
    out.fill(0.0);
    let lambda = messages.as_slice();
    for e in 0..graph.num_edges() {
        let msg = &lambda[graph.message_range(e)];
        let parent = &mut out[graph.config_range(graph.edge_parent(e))];
        for (v, &y) in parent.iter_mut().zip(graph.edge_map(e)) {
            *v += msg[y as usize];
        }
        let child = &mut out[graph.config_range(graph.edge_child(e))];
        for (v, &m) in child.iter_mut().zip(msg) {
            *v -= m;
        }
    }
}

/// [`message_offsets`] of one region `r` (`out.len() == graph.num_configs(r)`),
/// with the same operations in the same order (edges in increasing index), so
/// the same bits: for callers that need a region's offsets one at a time
/// without an array of the whole graph (Algorithm 1's biases computed per row).
///
/// # Panics
/// If `messages` do not fit the graph or `out` does not fit `r`.
///
/// ```
/// use smoothed_inference::{Messages, message_offsets, region_message_offsets};
/// let g = factor_graph::grid(2, 2, 2).unwrap();
/// let m = Messages::from_vec(&g, (0..g.total_message_len()).map(|i| i as f64).collect()).unwrap();
/// let mut all = vec![0.0; g.total_configs()];
/// message_offsets(&g, &m, &mut all);
/// for r in 0..g.num_regions() {
///     let mut one = vec![0.0; g.num_configs(r)];
///     region_message_offsets(&g, &m, r, &mut one);
///     assert_eq!(one, all[g.config_range(r)]);
/// }
/// ```
pub fn region_message_offsets(graph: &RegionGraph, messages: &Messages, r: usize, out: &mut [f64]) {
    assert_eq!(messages.len(), graph.total_message_len(), "messages do not fit the graph");
    assert_eq!(out.len(), graph.num_configs(r), "output must have one entry per configuration of the region");
    out.fill(0.0);
    let lambda = messages.as_slice();
    for (e, as_parent) in graph.edges_in_order(r) {
        let msg = &lambda[graph.message_range(e)];
        if as_parent {
            for (v, &y) in out.iter_mut().zip(graph.edge_map(e)) {
                *v += msg[y as usize];
            }
        } else {
            for (v, &m) in out.iter_mut().zip(msg) {
                *v -= m;
            }
        }
    }
}

/// Decoding (docs/MATH.md §3): `ŷ_i = argmax_{y_i} μ_i(y_i)` from the singleton beliefs
/// (flat per configuration, e.g. from [`InferenceProblem::beliefs`]); ties go
/// to the smallest label.
///
/// Errors: [`InferenceError::BeliefShape`] if `beliefs` does not have one entry
/// per configuration, [`InferenceError::MissingSingleton`] (naming the first
/// such variable) if some variable has no singleton region — marginalising a
/// larger region instead would be ambiguous before convergence, so the caller
/// decides.
///
/// ```
/// let g = factor_graph::grid(1, 2, 2).unwrap();
/// // Beliefs of pixel 0, pixel 1, then the pair (4 configurations).
/// let beliefs = [0.2, 0.8, 0.7, 0.3, 0.1, 0.1, 0.6, 0.2];
/// assert_eq!(smoothed_inference::decode(&g, &beliefs).unwrap(), vec![1, 0]);
/// ```
pub fn decode(graph: &RegionGraph, beliefs: &[f64]) -> Result<Vec<usize>, InferenceError> {
    if beliefs.len() != graph.total_configs() {
        return Err(InferenceError::BeliefShape { expected: graph.total_configs(), got: beliefs.len() });
    }
    (0..graph.num_variables())
        .map(|variable| {
            let r = graph.singleton(variable).ok_or(InferenceError::MissingSingleton { variable })?;
            Ok(first_argmax(&beliefs[graph.config_range(r)]))
        })
        .collect()
}

/// The first index of the largest value (0 when none is above `−∞`): how
/// [`decode`] picks a variable's label from its beliefs.
pub(crate) fn first_argmax(mu: &[f64]) -> usize {
    mu.iter().enumerate().fold((0, f64::NEG_INFINITY), |best, (y, &v)| if v > best.1 { (y, v) } else { best }).0
}
