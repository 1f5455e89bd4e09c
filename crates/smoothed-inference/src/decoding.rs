//! Labellings from beliefs that respect hard constraints, a local search that
//! only raises their score, and the certificates of their quality
//! (docs/MATH.md §3).
//!
//! [`crate::decode`] takes each variable's most believed label on its own. Where
//! the relaxation is not tight, that combination can have `θ_α(y_α) = −∞` in
//! some region — probability 0. [`decode_feasible`] instead assigns the
//! variables one at a time, each its most believed label that the hard
//! constraints still allow, keeping every region able to complete the
//! assignment (*forward checking*: after each assignment every unassigned
//! variable loses the labels that some region containing it rules out given
//! the labels already assigned and still possible; the next variable is the
//! one with the fewest labels left, ties broken by confidence; an emptied
//! domain is a dead end at once, [`Search::ForwardChecking`]). At a dead end
//! it backtracks, within a budget; beyond it, it reports that no feasible
//! labelling was found rather than answering with a forbidden one.
//! [`Search::Static`] is the earlier, weaker search (a fixed order, most
//! confident variable first, each region checked on its own). How the
//! forward-checking search ranks a variable's labels is
//! [`DecodeOptions::label_order`]: by its singleton belief
//! ([`LabelOrder::Singleton`]), or by the ε = 0 bound on the labellings still
//! possible with that label, read from the region potentials of every region
//! containing the variable ([`LabelOrder::Regions`], which conditions on the
//! labels already assigned), or by both in turn, keeping the labelling that
//! scores more ([`LabelOrder::Both`]). [`improve`]
//! then changes one variable at a time to its best label given the others
//! (ICM), which never lowers the score `θ(y) = Σ_α θ_α(y_α)` ([`score`]).
//!
//! [`map_bound`] is the ε = 0 dual value `Σ_α max_{y_α} θ̃_α(y_α)` at the given
//! messages: since the messages cancel in `Σ_α θ̃_α(y_α) = Σ_α θ_α(y_α)`, it is
//! an upper bound on every labelling's score, so `map_bound − score` bounds how
//! far the labelling is from the best one.
//!
//! ```
//! use factor_graph::{Scope, factors_with_singletons};
//! use smoothed_inference::decoding::{DecodeOptions, decode_feasible, score};
//! // Two binary variables that may not both be 1, each believing 1 more likely.
//! let g = factors_with_singletons(vec![2, 2], &[Scope { variables: vec![0, 1], factor_type: "c".into() }]).unwrap();
//! let mut theta = vec![0.0; g.total_configs()];
//! theta[g.config_range(2).start + 3] = f64::NEG_INFINITY; // (1, 1) is forbidden
//! let mut beliefs = vec![0.0; g.total_configs()];
//! beliefs[g.config_range(0)].copy_from_slice(&[0.4, 0.6]);
//! beliefs[g.config_range(1)].copy_from_slice(&[0.1, 0.9]);
//! beliefs[g.config_range(2)].copy_from_slice(&[0.0, 0.5, 0.5, 0.0]);
//! let d = decode_feasible(&g, &theta, &beliefs, &DecodeOptions::default()).unwrap();
//! assert_eq!(d.labels, vec![0, 1]); // variable 1 is the more confident one
//! assert_eq!(score(&g, &theta, &d.labels), 0.0);
//! ```

use factor_graph::RegionGraph;

use crate::{InferenceError, InferenceProblem, Messages};

mod forward;

/// How [`decode_feasible`] searches for an allowed labelling.
///
/// Both are complete (given an unlimited budget they find an allowed
/// labelling whenever one exists) and never return a forbidden one; they
/// differ in how early they see a dead end, so in how much of the budget a
/// search needs. On models without `−∞` entries both return each variable's
/// most believed label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Search {
    /// Forward checking with the fewest-labels-left variable first (module
    /// docs): after each assignment the regions with `−∞` entries (up to
    /// [`DecodeOptions::max_check_configs`] configurations) remove the labels
    /// of unassigned variables that no allowed configuration still supports,
    /// until nothing changes; an emptied domain undoes the assignment at once.
    #[default]
    ForwardChecking,
    /// The search of earlier versions: a fixed order (largest singleton
    /// belief first), each label checked against the regions containing the
    /// variable alone. `structlearn`'s prediction keeps it so that its
    /// results (error rates of learned models with hard constraints) stay
    /// those of earlier versions.
    Static,
}

/// How the forward-checking search ranks the labels of the variable it
/// assigns next ([`DecodeOptions::label_order`]); [`Search::Static`] always
/// ranks by singleton beliefs.
///
/// Write `D_u` for the labels still in variable `u`'s domain (one label for an
/// assigned variable) and `s_α` for the region scores: the reparameterised
/// potentials `θ̃_α = θ_α + (messages)` given to [`decode_feasible_from`], or
/// `ln μ_α` of the beliefs for [`decode_feasible`] (at one `ε` for every
/// region `ε ln μ_α = θ̃_α − c_α`, a constant per region, so both rank alike;
/// `θ̃` does not underflow where small-ε beliefs round to 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LabelOrder {
    /// Most believed first: `μ_v(y)` of the variable's singleton region
    /// (ties to the smaller label). On a model without `−∞` entries the
    /// decoding is then each variable's most believed label.
    #[default]
    Singleton,
    /// Highest conditional bound first: label `y` of variable `v` is ranked by
    ///
    /// ```text
    /// r_v(y) = Σ_{α ∋ v} max { s_α(y_α) : y_α(v) = y, y_α(u) ∈ D_u for every u ∈ α }
    /// ```
    ///
    /// (ties by singleton belief, then the smaller label), computed when `v`
    /// is chosen. With `s = θ̃` this is, up to a constant in `y` (the regions
    /// without `v`), the ε = 0 dual bound `Σ_α max θ̃_α` restricted to the
    /// labellings the domains still allow with `y_v = y`: since
    /// `Σ_α θ̃_α(y_α) = θ(y)` for every labelling, no such labelling scores
    /// more, so the label with the most room is tried first (the sequential
    /// decoding of TRW-S, Kolmogorov 2006, is the pairwise case with only the
    /// assigned neighbours' pairs). Unlike the singleton order it sees which
    /// labels the already assigned variables' pair and higher regions favour
    /// (a frustrated pair whose singletons tie). Regions above
    /// [`DecodeOptions::max_check_configs`] configurations are left out of
    /// the sum.
    Regions,
    /// Both orders, each a search of its own (with its own
    /// [`DecodeOptions::max_backtracks`] budget) followed by [`improve`]; the
    /// labelling that scores more is returned (the singleton order's at a
    /// tie), so never less than either order's, for about twice the
    /// decoding's time. [`Decoded::backtracks`] counts both searches'.
    Both,
}

impl LabelOrder {
    /// The names [`LabelOrder`]'s `FromStr` reads and `Display` writes.
    pub const NAMES: [&'static str; 3] = ["singleton", "regions", "both"];
    /// The orders in declaration order, so that `ALL[i]` is named `NAMES[i]`.
    const ALL: [LabelOrder; 3] = [LabelOrder::Singleton, LabelOrder::Regions, LabelOrder::Both];
}

impl std::fmt::Display for LabelOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(Self::NAMES[*self as usize])
    }
}

impl std::str::FromStr for LabelOrder {
    type Err = String;

    /// `singleton`, `regions` or `both` ([`LabelOrder::NAMES`]).
    ///
    /// ```
    /// use smoothed_inference::decoding::LabelOrder;
    /// assert_eq!("regions".parse::<LabelOrder>(), Ok(LabelOrder::Regions));
    /// assert!("pairs".parse::<LabelOrder>().is_err());
    /// for name in LabelOrder::NAMES {
    ///     assert_eq!(name.parse::<LabelOrder>().unwrap().to_string(), name);
    /// }
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let known = Self::NAMES.iter().position(|&name| name == s);
        known
            .map(|i| Self::ALL[i])
            .ok_or_else(|| format!("unknown label order {s:?} (expected one of: {})", LabelOrder::NAMES.join(", ")))
    }
}

/// Settings of [`decode_feasible`].
///
/// ```
/// let opts = smoothed_inference::decoding::DecodeOptions::default();
/// assert!(opts.max_backtracks > 0 && opts.local_search_sweeps > 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeOptions {
    /// The most times the search may return to an earlier variable
    /// (backtrack) before it reports that it found no feasible labelling.
    pub max_backtracks: usize,
    /// Largest number of configurations of a region that forward checking
    /// enumerates; larger regions are checked once all their variables are
    /// assigned.
    pub max_check_configs: usize,
    /// Sweeps of the local search ([`improve`]) after decoding; 0 skips it.
    pub local_search_sweeps: usize,
    /// The search ([`Search::ForwardChecking`] by default).
    pub search: Search,
    /// How forward checking ranks a variable's labels
    /// ([`LabelOrder::Singleton`] by default; [`Search::Static`] ignores it).
    pub label_order: LabelOrder,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        Self {
            max_backtracks: 100_000,
            max_check_configs: 1 << 12,
            local_search_sweeps: 50,
            search: Search::ForwardChecking,
            label_order: LabelOrder::Singleton,
        }
    }
}

/// What [`decode_feasible`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// One label per variable; no region gives it `θ = −∞`.
    pub labels: Vec<usize>,
    /// `θ(y) = Σ_α θ_α(y_α)` ([`score`]), finite.
    pub score: f64,
    /// Assignments the search undid (with [`LabelOrder::Both`], both
    /// searches').
    pub backtracks: usize,
    /// Variables the local search changed (each change raised the score).
    pub improved: usize,
}

/// The score `θ(y) = Σ_α θ_α(y_α)` of a labelling; `−∞` when a region forbids it.
///
/// ```
/// let g = factor_graph::grid(1, 2, 2).unwrap();
/// let mut theta = vec![0.0; g.total_configs()];
/// theta[g.config_range(1).start + 1] = 2.0;
/// assert_eq!(smoothed_inference::decoding::score(&g, &theta, &[0, 1]), 2.0);
/// ```
pub fn score(graph: &RegionGraph, theta: &[f64], labels: &[usize]) -> f64 {
    (0..graph.num_regions()).map(|r| theta[graph.config_range(r).start + graph.config_of(r, labels)]).sum()
}

/// The ε = 0 dual value `Σ_α max_{y_α} θ̃_α(y_α)` at `messages`: an upper bound
/// on the score of every labelling (module docs); `−∞` proves that every
/// labelling is forbidden.
///
/// ```
/// use smoothed_inference::{InferenceProblem, Messages, RunOptions, Workspace};
/// use smoothed_inference::decoding::map_bound;
/// let g = factor_graph::grid(2, 2, 2).unwrap();
/// let theta: Vec<f64> = (0..g.total_configs()).map(|i| ((i * 7) % 5) as f64 - 2.0).collect();
/// let problem = InferenceProblem::new(&g, &theta, &[0.1, 0.1]).unwrap();
/// let mut messages = Messages::zeros(&g);
/// problem.run(&mut messages, &RunOptions { iterations: 100, tolerance: None, order: None }, &mut Workspace::new(&g)).unwrap();
/// let best = (0..16).map(|y| {
///     let labels: Vec<usize> = (0..4).map(|i| (y >> i) & 1).collect();
///     smoothed_inference::decoding::score(&g, &theta, &labels)
/// }).fold(f64::NEG_INFINITY, f64::max);
/// assert!(map_bound(&problem, &messages) >= best - 1e-9);
/// ```
pub fn map_bound(problem: &InferenceProblem<'_>, messages: &Messages) -> f64 {
    let g = problem.graph();
    let mut reparameterized = vec![0.0; g.total_configs()];
    problem.reparameterized(messages, &mut reparameterized);
    map_bound_of(g, &reparameterized)
}

/// [`map_bound`] from the reparameterised potentials `θ̃` themselves
/// ([`InferenceProblem::reparameterized`], flat per configuration), for a
/// caller that has them already: `Σ_α max_{y_α} θ̃_α(y_α)`.
///
/// # Panics
/// If `reparameterized` has fewer entries than the graph's configurations.
pub fn map_bound_of(graph: &RegionGraph, reparameterized: &[f64]) -> f64 {
    (0..graph.num_regions())
        .map(|r| reparameterized[graph.config_range(r)].iter().copied().fold(f64::NEG_INFINITY, f64::max))
        .sum()
}

/// A labelling's certificates ([`certify`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Certificate {
    /// `θ(ŷ)` ([`score`]); `−∞` when a region forbids the labelling.
    pub score: f64,
    /// The ε = 0 dual value at the messages ([`map_bound`]): no labelling
    /// scores more.
    pub bound: f64,
    /// `bound − score` (`+∞` for a forbidden labelling): how far, at most, the
    /// labelling is from the best one; 0 proves it optimal.
    pub gap: f64,
}

/// The score of `labels`, the ε = 0 bound at `messages` and their gap.
///
/// ```
/// use smoothed_inference::{InferenceProblem, Messages};
/// use smoothed_inference::decoding::certify;
/// let g = factor_graph::grid(1, 2, 2).unwrap();
/// let mut theta = vec![0.0; g.total_configs()];
/// theta[g.config_range(2).start + 3] = 1.0; // the pair rewards (1, 1)
/// let problem = InferenceProblem::new(&g, &theta, &[1.0, 1.0]).unwrap();
/// let c = certify(&problem, &Messages::zeros(&g), &[1, 1]).unwrap();
/// assert_eq!((c.score, c.bound, c.gap), (1.0, 1.0, 0.0));
/// assert!(certify(&problem, &Messages::zeros(&g), &[1, 2]).is_err()); // label 2 of a binary variable
/// ```
///
/// Errors: [`InferenceError::LabelShape`], [`InferenceError::InvalidLabel`],
/// [`InferenceError::MessageShape`] for a labelling or messages that do not
/// fit the problem's graph.
pub fn certify(
    problem: &InferenceProblem<'_>,
    messages: &Messages,
    labels: &[usize],
) -> Result<Certificate, InferenceError> {
    let g = problem.graph();
    if labels.len() != g.num_variables() {
        return Err(InferenceError::LabelShape { expected: g.num_variables(), got: labels.len() });
    }
    if let Some((variable, &label)) = labels.iter().enumerate().find(|&(v, &y)| y >= g.cardinality(v)) {
        return Err(InferenceError::InvalidLabel { variable, label, cardinality: g.cardinality(variable) });
    }
    if messages.len() != g.total_message_len() {
        return Err(InferenceError::MessageShape { expected: g.total_message_len(), got: messages.len() });
    }
    let score = score(g, problem.theta(), labels);
    let bound = map_bound(problem, messages);
    Ok(Certificate { score, bound, gap: bound - score })
}

/// The regions containing each variable.
fn regions_of_variables(graph: &RegionGraph) -> Vec<Vec<usize>> {
    let mut of = vec![Vec::new(); graph.num_variables()];
    for r in 0..graph.num_regions() {
        for &v in graph.region_variables(r) {
            of[v].push(r);
        }
    }
    of
}

/// Marks an unassigned variable in a partial labelling.
const UNASSIGNED: usize = usize::MAX;

/// Whether region `r` keeps a configuration of finite `θ` that agrees with the
/// assigned variables of `labels`; regions above `max_configs` are checked
/// only once fully assigned.
fn region_allows(graph: &RegionGraph, theta: &[f64], labels: &[usize], r: usize, max_configs: usize) -> bool {
    let vars = graph.region_variables(r);
    let theta = &theta[graph.config_range(r)];
    if vars.iter().all(|&v| labels[v] != UNASSIGNED) {
        return theta[graph.config_of(r, labels)] > f64::NEG_INFINITY;
    }
    if theta.len() > max_configs {
        return true;
    }
    let mut config = vec![0; vars.len()];
    theta.iter().enumerate().any(|(c, &t)| {
        t > f64::NEG_INFINITY && {
            graph.decode_config(r, c, &mut config);
            vars.iter().zip(&config).all(|(&v, &y)| labels[v] == UNASSIGNED || labels[v] == y)
        }
    })
}

/// A labelling that no region forbids, decoded from the beliefs (module docs):
/// each variable its most believed label that the search
/// ([`DecodeOptions::search`]) allows, with backtracking within
/// [`DecodeOptions::max_backtracks`] (each time the search returns to an
/// earlier variable counts one); then [`improve`] for
/// [`DecodeOptions::local_search_sweeps`] sweeps. With
/// [`LabelOrder::Regions`] the region scores are `ln μ_α` of `beliefs`
/// ([`decode_feasible_from`] takes `θ̃` instead).
///
/// Errors: [`InferenceError::BeliefShape`] / [`InferenceError::ThetaShape`] for
/// arrays of the wrong length, [`InferenceError::MissingSingleton`] for a
/// variable without a singleton region, [`InferenceError::NoFeasibleLabeling`]
/// when the search ends (every labelling is forbidden, or the budget ran out).
pub fn decode_feasible(
    graph: &RegionGraph,
    theta: &[f64],
    beliefs: &[f64],
    opts: &DecodeOptions,
) -> Result<Decoded, InferenceError> {
    decode_with(graph, theta, beliefs, None, opts)
}

/// [`decode_feasible`] whose [`LabelOrder::Regions`] ranks labels by the
/// reparameterised potentials `reparameterized` (`θ̃`, flat per configuration:
/// [`InferenceProblem::reparameterized`] at the messages the beliefs come
/// from) rather than by `ln μ_α`: the same order at one `ε` where no belief
/// rounds to 0, and the bound of [`LabelOrder::Regions`] exactly. With
/// [`LabelOrder::Singleton`] it is [`decode_feasible`].
///
/// ```
/// use factor_graph::{Scope, factors_with_singletons};
/// use smoothed_inference::decoding::{DecodeOptions, LabelOrder, decode_feasible_from};
/// // Two binary variables that prefer to differ; their singletons tie.
/// let g = factors_with_singletons(vec![2, 2], &[Scope { variables: vec![0, 1], factor_type: "p".into() }]).unwrap();
/// let mut theta = vec![0.0; g.total_configs()];
/// theta[g.config_range(2)].copy_from_slice(&[0.0, 3.0, 3.0, 0.0]);
/// let beliefs = vec![0.5; g.total_configs()];
/// let opts = DecodeOptions { local_search_sweeps: 0, ..DecodeOptions::default() };
/// let singleton = decode_feasible_from(&g, &theta, &beliefs, &theta, &opts).unwrap();
/// assert_eq!(singleton.labels, vec![0, 0]); // both most believed labels: the tie's first
/// let opts = DecodeOptions { label_order: LabelOrder::Regions, ..opts };
/// let regions = decode_feasible_from(&g, &theta, &beliefs, &theta, &opts).unwrap();
/// assert_eq!(regions.labels, vec![0, 1]); // the pair prefers y_1 = 1 once y_0 = 0
/// ```
///
/// Errors: those of [`decode_feasible`], and [`InferenceError::ThetaShape`]
/// for `reparameterized` of the wrong length.
pub fn decode_feasible_from(
    graph: &RegionGraph,
    theta: &[f64],
    beliefs: &[f64],
    reparameterized: &[f64],
    opts: &DecodeOptions,
) -> Result<Decoded, InferenceError> {
    if reparameterized.len() != graph.total_configs() {
        return Err(InferenceError::ThetaShape { expected: graph.total_configs(), got: reparameterized.len() });
    }
    decode_with(graph, theta, beliefs, Some(reparameterized), opts)
}

/// [`decode_feasible`] and [`decode_feasible_from`]: `reparameterized` is
/// `θ̃` when given.
fn decode_with(
    graph: &RegionGraph,
    theta: &[f64],
    beliefs: &[f64],
    reparameterized: Option<&[f64]>,
    opts: &DecodeOptions,
) -> Result<Decoded, InferenceError> {
    let total = graph.total_configs();
    if theta.len() != total {
        return Err(InferenceError::ThetaShape { expected: total, got: theta.len() });
    }
    if beliefs.len() != total {
        return Err(InferenceError::BeliefShape { expected: total, got: beliefs.len() });
    }
    let n = graph.num_variables();
    // Each variable's labels, most believed first, and its confidence.
    let mut candidates = Vec::with_capacity(n);
    let mut confidence = Vec::with_capacity(n);
    for variable in 0..n {
        let r = graph.singleton(variable).ok_or(InferenceError::MissingSingleton { variable })?;
        let mu = &beliefs[graph.config_range(r)];
        let mut order: Vec<usize> = (0..mu.len()).collect();
        // Stable: ties keep the smaller label first, as `decode` does. NaN sorts last.
        order.sort_by(|&a, &b| mu[b].partial_cmp(&mu[a]).unwrap_or(std::cmp::Ordering::Less));
        confidence.push(mu[order[0]]);
        candidates.push(order);
    }
    let regions = regions_of_variables(graph);
    // The region scores of `LabelOrder::Regions`: θ̃, or ln μ.
    let logs: Vec<f64>;
    let region_scores = match (opts.search, opts.label_order, reparameterized) {
        (Search::Static, ..) | (_, LabelOrder::Singleton, _) => None,
        (_, _, Some(t)) => Some(t),
        (_, _, None) => {
            logs = beliefs.iter().map(|&b| b.ln()).collect();
            Some(&logs[..])
        }
    };
    let decode_one = |region_scores: Option<&[f64]>| -> Result<Decoded, InferenceError> {
        let (mut labels, backtracks) = match opts.search {
            Search::ForwardChecking => {
                let settings = forward::Settings {
                    max_check_configs: opts.max_check_configs,
                    max_backtracks: opts.max_backtracks,
                    region_scores,
                };
                forward::search(graph, theta, beliefs, &regions, &candidates, &settings)?
            }
            Search::Static => static_search(graph, theta, &regions, &candidates, &confidence, opts)?,
        };
        // Both searches leave every region an allowed configuration; checked
        // again so that a forbidden labelling can never be reported as found.
        if score(graph, theta, &labels) == f64::NEG_INFINITY {
            return Err(InferenceError::NoFeasibleLabeling { backtracks, exhausted: false });
        }
        let improved = improve_with(graph, theta, &regions, &mut labels, opts.local_search_sweeps);
        let score = score(graph, theta, &labels);
        Ok(Decoded { labels, score, backtracks, improved })
    };
    if opts.label_order != LabelOrder::Both || region_scores.is_none() {
        return decode_one(region_scores);
    }
    // `LabelOrder::Both`: the singleton order, then the region order unless
    // the first proved that nothing is allowed; the higher score wins (the
    // singleton order's at a tie), backtracks counted over both.
    let first = decode_one(None);
    if matches!(first, Err(InferenceError::NoFeasibleLabeling { exhausted: true, .. })) {
        return first;
    }
    let second = decode_one(region_scores);
    match (first, second) {
        (Ok(a), Ok(b)) => {
            let backtracks = a.backtracks + b.backtracks;
            let best = if b.score > a.score { b } else { a };
            Ok(Decoded { backtracks, ..best })
        }
        (Ok(a), Err(_)) => Ok(a),
        (Err(_), Ok(b)) => Ok(b),
        // A proof that nothing is allowed (from either) before a budget that ran out.
        (Err(e), Err(f)) => {
            Err(if matches!(f, InferenceError::NoFeasibleLabeling { exhausted: true, .. }) { f } else { e })
        }
    }
}

/// [`Search::Static`]: variables in a fixed order, most confident first, each
/// given its most believed label that every region containing it still
/// allows ([`region_allows`]), with chronological backtracking. Returns the
/// labels and the backtracks.
fn static_search(
    graph: &RegionGraph,
    theta: &[f64],
    regions: &[Vec<usize>],
    candidates: &[Vec<usize>],
    confidence: &[f64],
    opts: &DecodeOptions,
) -> Result<(Vec<usize>, usize), InferenceError> {
    let n = graph.num_variables();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| confidence[b].partial_cmp(&confidence[a]).unwrap_or(std::cmp::Ordering::Less));
    let mut labels = vec![UNASSIGNED; n];
    // next[d]: the next candidate index to try for the variable at depth d.
    let mut next = vec![0usize; n];
    let (mut depth, mut backtracks) = (0usize, 0usize);
    while depth < n {
        let v = order[depth];
        let mut placed = false;
        while next[depth] < candidates[v].len() {
            let y = candidates[v][next[depth]];
            next[depth] += 1;
            labels[v] = y;
            if regions[v].iter().all(|&r| region_allows(graph, theta, &labels, r, opts.max_check_configs)) {
                placed = true;
                break;
            }
        }
        if placed {
            depth += 1;
            continue;
        }
        labels[v] = UNASSIGNED;
        next[depth] = 0;
        if depth == 0 || backtracks >= opts.max_backtracks {
            return Err(InferenceError::NoFeasibleLabeling { backtracks, exhausted: depth == 0 });
        }
        backtracks += 1;
        depth -= 1;
        labels[order[depth]] = UNASSIGNED;
    }
    Ok((labels, backtracks))
}

/// Iterated conditional modes: sweeps over the variables, setting each to the
/// label that maximises the score of the regions containing it given the
/// others, when that is strictly higher than its current one; stops after a
/// sweep without a change or after `sweeps`. The score `θ(y)` never falls, so
/// a feasible labelling stays feasible. Returns the number of changes.
///
/// ```
/// use smoothed_inference::decoding::{improve, score};
/// let g = factor_graph::grid(1, 3, 2).unwrap();
/// let mut theta = vec![0.0; g.total_configs()];
/// // Every pair rewards agreement; variable 0 prefers label 1.
/// for r in 3..g.num_regions() {
///     theta[g.config_range(r).start] = 1.0;
///     theta[g.config_range(r).start + 3] = 1.0;
/// }
/// theta[g.config_range(0).start + 1] = 0.5;
/// let mut labels = vec![1, 1, 0];
/// let before = score(&g, &theta, &labels);
/// improve(&g, &theta, &mut labels, 10);
/// assert!(score(&g, &theta, &labels) > before);
/// assert_eq!(labels, vec![1, 1, 1]);
/// ```
pub fn improve(graph: &RegionGraph, theta: &[f64], labels: &mut [usize], sweeps: usize) -> usize {
    improve_with(graph, theta, &regions_of_variables(graph), labels, sweeps)
}

/// [`improve`] with the regions of each variable given.
fn improve_with(
    graph: &RegionGraph,
    theta: &[f64],
    regions: &[Vec<usize>],
    labels: &mut [usize],
    sweeps: usize,
) -> usize {
    let local = |labels: &[usize], v: usize| -> f64 {
        regions[v].iter().map(|&r| theta[graph.config_range(r).start + graph.config_of(r, labels)]).sum()
    };
    let mut changes = 0;
    for _ in 0..sweeps {
        let mut changed = false;
        for v in 0..labels.len() {
            let current = labels[v];
            let (mut best, mut best_score) = (current, local(labels, v));
            for y in 0..graph.cardinality(v) {
                labels[v] = y;
                let s = local(labels, v);
                if s > best_score {
                    (best, best_score) = (y, s);
                }
            }
            labels[v] = best;
            if best != current {
                changed = true;
                changes += 1;
            }
        }
        if !changed {
            break;
        }
    }
    changes
}
