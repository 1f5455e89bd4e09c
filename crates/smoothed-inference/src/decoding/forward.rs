//! The forward-checking search of [`super::decode_feasible`]
//! ([`super::Search::ForwardChecking`]).
//!
//! Every variable keeps a *domain*: the labels not yet ruled out. A region
//! with a `−∞` entry and at most `max_check_configs` configurations is kept
//! *arc consistent*: every label left in the domain of one of its variables
//! has a *support*, a configuration of finite `θ` whose labels are all still
//! in their variables' domains. Assigning a variable shrinks its domain to one
//! label; the regions containing it then drop the labels of the other
//! variables that lost every support, those variables' other regions are
//! checked in turn, and so on until nothing changes (a queue of regions).
//! A domain that becomes empty is a dead end, found at the assignment that
//! causes it rather than when the search reaches the variable. Larger regions
//! with `−∞` entries are checked once all their variables have one label
//! left; regions without `−∞` entries never rule anything out and are
//! skipped.
//!
//! The next variable is the one with the fewest labels left (a variable with
//! one label is never branched on), ties broken by confidence (its most
//! believed remaining label's belief) and then by index; it tries its
//! remaining labels most believed first, or, with region scores
//! ([`super::LabelOrder::Regions`]), highest `r_v(y)` first, ranked once
//! when the variable is chosen (backtracking to it restores the domains the
//! ranking saw). Removals go on a trail, so undoing an assignment restores
//! exactly the domains before it.
//!
//! Every removal is sound (no labelling consistent with the assignments uses
//! the removed label), so a search that runs out of labels at the first
//! variable proves that no labelling is allowed; one that assigns every
//! variable leaves each region a configuration of finite `θ`.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use factor_graph::RegionGraph;

use crate::InferenceError;

/// What the search needs to know of each region.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Check {
    /// No `−∞` entry: never rules anything out.
    None,
    /// Kept arc consistent.
    Supports,
    /// Too large to enumerate: checked once its variables have one label each.
    WhenFixed,
}

/// The labels still allowed for each variable, with the trail of removals.
struct Domains {
    /// Where variable `v`'s labels start in `alive`.
    offset: Vec<usize>,
    alive: Vec<bool>,
    size: Vec<usize>,
    /// `(variable, label)` of every removal, in order.
    trail: Vec<(usize, usize)>,
}

impl Domains {
    fn new(graph: &RegionGraph) -> Self {
        let mut offset = Vec::with_capacity(graph.num_variables() + 1);
        let mut total = 0;
        for v in 0..graph.num_variables() {
            offset.push(total);
            total += graph.cardinality(v);
        }
        offset.push(total);
        Self { offset, alive: vec![true; total], size: graph.cardinalities().to_vec(), trail: Vec::new() }
    }

    #[inline]
    fn contains(&self, v: usize, y: usize) -> bool {
        self.alive[self.offset[v] + y]
    }

    fn remove(&mut self, v: usize, y: usize) {
        debug_assert!(self.contains(v, y));
        self.alive[self.offset[v] + y] = false;
        self.size[v] -= 1;
        self.trail.push((v, y));
    }

    /// The only label left to `v` (its size is 1).
    fn only(&self, v: usize) -> usize {
        let labels = &self.alive[self.offset[v]..self.offset[v + 1]];
        labels.iter().position(|&a| a).unwrap_or(0)
    }

    /// Restores every removal after `mark`; `restored` gets their variables.
    fn undo_to(&mut self, mark: usize, restored: &mut Vec<usize>) {
        while self.trail.len() > mark {
            let Some((v, y)) = self.trail.pop() else { break };
            self.alive[self.offset[v] + y] = true;
            self.size[v] += 1;
            restored.push(v);
        }
    }
}

/// A candidate for the next variable; the greatest is chosen.
#[derive(Clone, Copy)]
struct Entry {
    size: usize,
    confidence: f64,
    variable: usize,
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .size
            .cmp(&self.size)
            .then(self.confidence.total_cmp(&other.confidence))
            .then(other.variable.cmp(&self.variable))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

/// One assigned variable of the search.
struct Frame {
    variable: usize,
    /// The trail's length before the assignment.
    mark: usize,
    /// The next index into the variable's labels to try.
    next: usize,
    /// Its labels in the order to try them, when ranked by region scores
    /// (else the candidates, most believed first).
    ranked: Option<Vec<usize>>,
}

/// The settings of [`search`].
pub(super) struct Settings<'a> {
    /// [`super::DecodeOptions::max_check_configs`].
    pub max_check_configs: usize,
    /// [`super::DecodeOptions::max_backtracks`].
    pub max_backtracks: usize,
    /// The region scores `s_α` of [`super::LabelOrder::Regions`] (flat per
    /// configuration; NaN read as −∞), or `None` for the singleton order.
    pub region_scores: Option<&'a [f64]>,
}

/// The search's state.
struct Search<'a> {
    graph: &'a RegionGraph,
    theta: &'a [f64],
    regions: &'a [Vec<usize>],
    /// Each variable's labels, most believed first.
    candidates: &'a [Vec<usize>],
    /// Each label's singleton belief, NaN read as −∞.
    belief: Vec<f64>,
    check: Vec<Check>,
    domains: Domains,
    queue: Vec<usize>,
    queued: Vec<bool>,
    /// A variable that has a frame (is being assigned or is assigned).
    assigned: Vec<bool>,
    heap: BinaryHeap<Entry>,
    /// Scratch: one region's configuration, and its supported labels.
    config: Vec<usize>,
    supported: Vec<bool>,
    start: Vec<usize>,
    /// Scratch: a full labelling for [`Check::WhenFixed`] regions.
    fixed: Vec<usize>,
    max_check_configs: usize,
}

impl Search<'_> {
    /// The most believed label `v` has left (−∞ if none).
    fn confidence(&self, v: usize) -> f64 {
        self.candidates[v]
            .iter()
            .find(|&&y| self.domains.contains(v, y))
            .map_or(f64::NEG_INFINITY, |&y| self.belief[self.domains.offset[v] + y])
    }

    /// Records `v`'s current key for the choice of the next variable.
    fn push(&mut self, v: usize) {
        if !self.assigned[v] && self.domains.size[v] > 1 {
            self.heap.push(Entry { size: self.domains.size[v], confidence: self.confidence(v), variable: v });
        }
    }

    /// The next variable to branch on, or `None` once every variable without
    /// a frame has one label left.
    fn select(&mut self) -> Option<usize> {
        while let Some(e) = self.heap.pop() {
            let v = e.variable;
            if !self.assigned[v]
                && self.domains.size[v] == e.size
                && e.size > 1
                && self.confidence(v).to_bits() == e.confidence.to_bits()
            {
                return Some(v);
            }
        }
        None
    }

    fn enqueue_regions_of(&mut self, v: usize, except: usize) {
        for &r in &self.regions[v] {
            if r != except && self.check[r] != Check::None && !self.queued[r] {
                self.queued[r] = true;
                self.queue.push(r);
            }
        }
    }

    /// Makes the queued regions consistent; false at a dead end (a region
    /// without an allowed configuration, or an empty domain).
    fn propagate(&mut self) -> bool {
        while let Some(r) = self.queue.pop() {
            self.queued[r] = false;
            if !self.revise(r) {
                for &q in &self.queue {
                    self.queued[q] = false;
                }
                self.queue.clear();
                return false;
            }
        }
        true
    }

    /// Removes the labels of region `r`'s variables that no allowed
    /// configuration supports; false at a dead end.
    fn revise(&mut self, r: usize) -> bool {
        let (graph, theta) = (self.graph, self.theta);
        let vars = graph.region_variables(r);
        let theta = &theta[graph.config_range(r)];
        if self.check[r] == Check::WhenFixed {
            if vars.iter().any(|&v| self.domains.size[v] != 1) {
                return true;
            }
            for &v in vars {
                self.fixed[v] = self.domains.only(v);
            }
            return theta[graph.config_of(r, &self.fixed)] > f64::NEG_INFINITY;
        }
        let arity = vars.len();
        // supported[start[i] + y]: label y of the region's i-th variable.
        let mut start = std::mem::take(&mut self.start);
        start.clear();
        let mut total = 0;
        for &v in vars {
            start.push(total);
            total += graph.cardinality(v);
        }
        self.supported.clear();
        self.supported.resize(total, false);
        if self.config.len() < arity {
            self.config.resize(arity, 0);
        }
        let mut any = false;
        for (c, &t) in theta.iter().enumerate() {
            if t == f64::NEG_INFINITY || t.is_nan() {
                continue;
            }
            graph.decode_config(r, c, &mut self.config[..arity]);
            if vars.iter().zip(&self.config).all(|(&v, &y)| self.domains.contains(v, y)) {
                any = true;
                for (i, &y) in self.config[..arity].iter().enumerate() {
                    self.supported[start[i] + y] = true;
                }
            }
        }
        let consistent = any && self.remove_unsupported(r, &start);
        self.start = start;
        consistent
    }

    /// The second half of [`Self::revise`]: removes the labels `supported`
    /// does not mark; false if a domain becomes empty.
    fn remove_unsupported(&mut self, r: usize, start: &[usize]) -> bool {
        let graph = self.graph;
        let vars = graph.region_variables(r);
        for (i, &v) in vars.iter().enumerate() {
            let mut changed = false;
            for y in 0..graph.cardinality(v) {
                if self.domains.contains(v, y) && !self.supported[start[i] + y] {
                    self.domains.remove(v, y);
                    changed = true;
                }
            }
            if changed {
                if self.domains.size[v] == 0 {
                    return false;
                }
                self.enqueue_regions_of(v, r);
                self.push(v);
            }
        }
        true
    }

    /// Undoes every removal after `mark` and re-offers the variables whose
    /// domains grew.
    fn undo_to(&mut self, mark: usize) {
        let mut restored = Vec::new();
        self.domains.undo_to(mark, &mut restored);
        restored.sort_unstable();
        restored.dedup();
        for v in restored {
            self.push(v);
        }
    }

    /// `v`'s labels still in its domain, highest
    /// `r_v(y) = Σ_{α ∋ v} max { s_α(y_α) : y_α(v) = y, y_α ⊂ domains }` first
    /// ([`super::LabelOrder::Regions`]; regions above `max_check_configs`
    /// left out, configurations with `θ = −∞` never counted), ties in the
    /// candidates' order (most believed first).
    fn rank_by_regions(&mut self, v: usize, scores: &[f64]) -> Vec<usize> {
        let (graph, theta) = (self.graph, self.theta);
        let card = graph.cardinality(v);
        let mut total = vec![0.0f64; card];
        let mut best = vec![f64::NEG_INFINITY; card];
        for &r in &self.regions[v] {
            let range = graph.config_range(r);
            if range.len() > self.max_check_configs {
                continue;
            }
            let vars = graph.region_variables(r);
            let arity = vars.len();
            let Some(at) = vars.iter().position(|&u| u == v) else { continue };
            if self.config.len() < arity {
                self.config.resize(arity, 0);
            }
            best.fill(f64::NEG_INFINITY);
            for c in 0..range.len() {
                let t = theta[range.start + c];
                if t == f64::NEG_INFINITY || t.is_nan() {
                    continue;
                }
                graph.decode_config(r, c, &mut self.config[..arity]);
                if vars.iter().zip(&self.config).all(|(&u, &y)| self.domains.contains(u, y)) {
                    let s = scores[range.start + c];
                    let y = self.config[at];
                    if s > best[y] {
                        best[y] = s;
                    }
                }
            }
            for (t, &b) in total.iter_mut().zip(&best) {
                *t += b;
            }
        }
        let mut ranked: Vec<usize> =
            self.candidates[v].iter().copied().filter(|&y| self.domains.contains(v, y)).collect();
        // Stable: equal bounds keep the candidates' order.
        ranked.sort_by(|&a, &b| total[b].total_cmp(&total[a]));
        ranked
    }

    /// Assigns `y` to `v` (its frame exists) and propagates; false at a dead end.
    fn assign(&mut self, v: usize, y: usize) -> bool {
        let mut changed = false;
        for other in 0..self.graph.cardinality(v) {
            if other != y && self.domains.contains(v, other) {
                self.domains.remove(v, other);
                changed = true;
            }
        }
        if changed {
            self.enqueue_regions_of(v, usize::MAX);
        }
        self.propagate()
    }
}

/// The forward-checking search (module docs): a labelling that every region
/// allows, or [`InferenceError::NoFeasibleLabeling`].
pub(super) fn search(
    graph: &RegionGraph,
    theta: &[f64],
    beliefs: &[f64],
    regions: &[Vec<usize>],
    candidates: &[Vec<usize>],
    settings: &Settings<'_>,
) -> Result<(Vec<usize>, usize), InferenceError> {
    let Settings { max_check_configs, max_backtracks, region_scores } = *settings;
    let n = graph.num_variables();
    let check: Vec<Check> = (0..graph.num_regions())
        .map(|r| {
            let t = &theta[graph.config_range(r)];
            if t.iter().all(|&x| x > f64::NEG_INFINITY) {
                Check::None
            } else if t.len() > max_check_configs {
                Check::WhenFixed
            } else {
                Check::Supports
            }
        })
        .collect();
    let domains = Domains::new(graph);
    let mut belief = vec![f64::NEG_INFINITY; domains.alive.len()];
    for v in 0..n {
        // Callers checked that every variable has a singleton region.
        if let Some(r) = graph.singleton(v) {
            for (b, &mu) in
                belief[domains.offset[v]..domains.offset[v + 1]].iter_mut().zip(&beliefs[graph.config_range(r)])
            {
                *b = if mu.is_nan() { f64::NEG_INFINITY } else { mu };
            }
        }
    }
    let mut s = Search {
        graph,
        theta,
        regions,
        candidates,
        belief,
        queued: vec![false; graph.num_regions()],
        queue: Vec::new(),
        domains,
        assigned: vec![false; n],
        heap: BinaryHeap::with_capacity(n),
        config: Vec::new(),
        supported: Vec::new(),
        start: Vec::new(),
        fixed: vec![0; n],
        check,
        max_check_configs,
    };
    // Every constraining region once, before any assignment.
    for r in (0..graph.num_regions()).rev() {
        if s.check[r] != Check::None {
            s.queued[r] = true;
            s.queue.push(r);
        }
    }
    if !s.propagate() {
        return Err(InferenceError::NoFeasibleLabeling { backtracks: 0, exhausted: true });
    }
    for v in 0..n {
        s.push(v);
    }
    let mut frames: Vec<Frame> = Vec::new();
    let mut backtracks = 0usize;
    while let Some(v) = s.select() {
        s.assigned[v] = true;
        let ranked = region_scores.map(|scores| s.rank_by_regions(v, scores));
        frames.push(Frame { variable: v, mark: s.domains.trail.len(), next: 0, ranked });
        // Try the top frame's labels until one propagates, backtracking
        // through the frames where none is left.
        loop {
            let Some(frame) = frames.last_mut() else {
                return Err(InferenceError::NoFeasibleLabeling { backtracks, exhausted: true });
            };
            let (v, mark) = (frame.variable, frame.mark);
            let order = frame.ranked.as_deref().unwrap_or(&candidates[v]);
            let mut label = None;
            while frame.next < order.len() {
                let y = order[frame.next];
                frame.next += 1;
                if s.domains.contains(v, y) {
                    label = Some(y);
                    break;
                }
            }
            if let Some(y) = label {
                if s.assign(v, y) {
                    break;
                }
                s.undo_to(mark);
                continue;
            }
            // No label of `v` is left: undo the assignment before it.
            frames.pop();
            s.assigned[v] = false;
            s.push(v);
            if frames.is_empty() {
                return Err(InferenceError::NoFeasibleLabeling { backtracks, exhausted: true });
            }
            if backtracks >= max_backtracks {
                return Err(InferenceError::NoFeasibleLabeling { backtracks, exhausted: false });
            }
            backtracks += 1;
            let parent = frames.last().map_or(0, |f| f.mark);
            s.undo_to(parent);
        }
    }
    // Every variable now has exactly one label left.
    let labels: Vec<usize> = (0..n).map(|v| s.domains.only(v)).collect();
    Ok((labels, backtracks))
}
