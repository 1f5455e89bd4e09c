//! The regions of each factor type pooled over the training examples, their
//! potentials `θ = ε_t g_t + Δ` (or `g_t`'s scores), the message biases of
//! Eq. 14 and the gathering of an example's `θ` into a per-thread buffer.

use std::collections::HashMap;
use std::sync::Arc;

use oracles::{BiasRows, Features, Model};
use rayon::prelude::*;
use smoothed_inference::{InferenceProblem, Messages, with_thread_workspace};

use crate::discrepancy::Discrepancy;
use crate::model::{SCORES, THETA, spread_energies, with_buffer};
use crate::objective::loss_at;
use crate::{Dataset, LearnError};

/// The regions of one factor type pooled over all training examples, and
/// their potentials.
///
/// Arrays of [`Potentials`] are `rows × classes`, row `rows[k] + i` being the
/// `i`-th region of this type of example `k`. Message passing gathers an
/// example's `θ` into a per-thread buffer ([`with_theta`]).
#[derive(Debug)]
pub(super) struct Pooled {
    pub(super) labels: Vec<usize>,
    /// `rows[k]..rows[k+1]` are example `k`'s rows.
    pub(super) rows: Vec<usize>,
    /// Example `k`'s regions of this type, in row order: one list per
    /// distinct graph, shared by the examples on it.
    pub(super) regions: Vec<Arc<[usize]>>,
    pub(super) potentials: Potentials,
}

/// How a factor type's potentials are held between fits. Either way the
/// largest array of a pairwise type exists once between fits; during a fit
/// the oracle's biases (Eq. 14) reuse `θ`'s buffer, or take a second array
/// beside the scores (which the fit updates in place), never a third.
#[derive(Debug)]
pub(super) enum Potentials {
    /// `θ = ε_t g_t + Δ`. While type `t` is fitted the same buffer holds the
    /// oracle's biases, which are computed from the messages alone and
    /// replaced by the new `θ` right after the fit.
    Theta(Vec<f64>),
    /// `g_t`'s scores, for oracles that keep them current
    /// ([`oracles::Oracle::maintains_scores`]): fits continue from them instead of
    /// scoring the whole model, and `θ = ε_t g_t + Δ` is computed as an
    /// example's `θ` is gathered (the same expression, so the same bits).
    Scores(Vec<f64>),
    /// Nothing: `θ = ε_t g_t + Δ` is computed from the model each time an
    /// example's `θ` is gathered, for classes that are cheap to score
    /// ([`oracles::Oracle::cheap_to_score`]); fits read the biases row by
    /// row ([`MessageBias`]). A model scores each row on its own, so these
    /// are the bits the other two ways hold.
    Recomputed,
}

impl Pooled {
    /// `buffer` (laid out like `theta`) cut into one slice per example.
    pub(super) fn example_chunks<'b>(&self, classes: usize, buffer: &'b mut [f64]) -> Vec<&'b mut [f64]> {
        let mut chunks = Vec::with_capacity(self.regions.len());
        let mut rest = buffer;
        for k in 0..self.regions.len() {
            let (head, tail) = rest.split_at_mut((self.rows[k + 1] - self.rows[k]) * classes);
            chunks.push(head);
            rest = tail;
        }
        chunks
    }
}

/// Rows scored per model call when `θ` is refreshed: bounds the features
/// gathered for the call (and keeps rayon's chunks inside a call large).
pub(super) const SCORE_GROUP_ROWS: usize = 1 << 16;

/// Example `k`'s `θ` over its whole graph, gathered from the pooled types
/// (regions of no type keep 0); `θ = ε_t g + Δ` computed here for types that
/// hold scores ([`Potentials::Scores`]) or nothing ([`Potentials::Recomputed`]:
/// scored here, into a per-thread buffer).
fn gather_theta(theta: ThetaSource<'_>, k: usize, out: &mut Vec<f64>) -> Result<(), LearnError> {
    let ThetaSource { data, pooled, discrepancy, epsilon, models } = theta;
    let graph = &data.examples()[k].graph();
    out.clear();
    out.resize(graph.total_configs(), 0.0);
    for (t, p) in pooled.iter().enumerate() {
        let c = data.factor_types()[t].classes;
        let first = p.rows[k];
        match &p.potentials {
            Potentials::Theta(theta) => {
                for (i, &r) in p.regions[k].iter().enumerate() {
                    out[graph.config_range(r)].copy_from_slice(&theta[(first + i) * c..(first + i + 1) * c]);
                }
            }
            Potentials::Scores(g) => {
                let eps = epsilon[t];
                with_region_deltas(data, discrepancy, p, k, c, |i, r, delta| {
                    let g = &g[(first + i) * c..(first + i + 1) * c];
                    for ((o, &g), &d) in out[graph.config_range(r)].iter_mut().zip(g).zip(delta) {
                        *o = theta_entry(eps, g, d);
                    }
                });
            }
            Potentials::Recomputed => with_buffer(&SCORES, |g| {
                score_example(data, models[t].as_deref(), t, k, p.rows[k + 1] - first, g)?;
                let eps = epsilon[t];
                with_region_deltas(data, discrepancy, p, k, c, |i, r, delta| {
                    for ((o, &g), &d) in out[graph.config_range(r)].iter_mut().zip(&g[i * c..(i + 1) * c]).zip(delta) {
                        *o = theta_entry(eps, g, d);
                    }
                });
                Ok::<(), LearnError>(())
            })?,
        }
    }
    Ok(())
}

/// Example `k`'s energies `θ_α(y) = ε_t g_t(y)` (no `Δ`) into `out`, bit for
/// bit what [`crate::StructuredModel::energies`] gives for `models`: the
/// pooled scores where a type keeps them ([`Potentials::Scores`], the
/// model's own scores by the oracle contract, [`oracles::Oracle::fit_scored`]),
/// else scored from the model. For evaluating the training set without
/// scoring it again (boosting's scores cost a pass over every tree).
pub(super) fn gather_energies(theta: ThetaSource<'_>, k: usize, out: &mut Vec<f64>) -> Result<(), LearnError> {
    let ThetaSource { data, pooled, epsilon, models, .. } = theta;
    let graph = &data.examples()[k].graph();
    out.clear();
    out.resize(graph.total_configs(), 0.0);
    for (t, p) in pooled.iter().enumerate() {
        let (c, eps, first) = (data.factor_types()[t].classes, epsilon[t], p.rows[k]);
        let mut write = |g: &[f64]| spread_energies(graph, p.regions[k].iter().copied(), eps, c, g, out);
        match &p.potentials {
            Potentials::Scores(g) => write(&g[first * c..p.rows[k + 1] * c]),
            Potentials::Theta(_) | Potentials::Recomputed => with_buffer(&SCORES, |g| {
                score_example(data, models[t].as_deref(), t, k, p.rows[k + 1] - first, g)?;
                write(g);
                Ok::<(), LearnError>(())
            })?,
        }
    }
    Ok(())
}

/// `g_t`'s scores on the `rows` regions of type `t` of example `k` into
/// `out` (replacing its contents; zeros before the first fit, `model` `None`).
fn score_example(
    data: &Dataset,
    model: Option<&dyn Model>,
    t: usize,
    k: usize,
    rows: usize,
    out: &mut Vec<f64>,
) -> Result<(), LearnError> {
    let ft = &data.factor_types()[t];
    let block = data.features(k, t);
    out.clear();
    out.resize(rows * ft.classes, 0.0);
    if let Some(m) = model
        && rows > 0
    {
        let features = Features::new(block, rows, ft.dim).map_err(|e| crate::model::oracle_err(ft, e))?;
        m.score(features, out).map_err(|e| crate::model::oracle_err(ft, e))?;
    }
    Ok(())
}

/// `θ_α(y) = ε_t g_t(y) + Δ_α(y)`: the one expression both ways of holding
/// potentials ([`Potentials`]) evaluate, so they give the same bits.
#[inline(always)]
pub(super) fn theta_entry(eps: f64, g: f64, delta: f64) -> f64 {
    eps * g + delta
}

/// Calls `f(i, r, Δ_r)` for the `i`-th region `r` of example `k` in `pooled`
/// (one factor type of `c` configurations), with its discrepancy `Δ_r`.
pub(super) fn with_region_deltas(
    data: &Dataset,
    discrepancy: &dyn Discrepancy,
    pooled: &Pooled,
    k: usize,
    c: usize,
    mut f: impl FnMut(usize, usize, &[f64]),
) {
    let graph = &data.examples()[k].graph();
    let truth = data.examples()[k].labels().unwrap_or(&[]);
    let mut delta = vec![0.0; c];
    for (i, &r) in pooled.regions[k].iter().enumerate() {
        discrepancy.region(graph, r, truth, &mut delta);
        f(i, r, &delta);
    }
}

/// The biases `b^k_α(y) = (Δ_α(y) + message offsets) / ε_t` (Eq. 14) of one
/// factor type, from the messages: written for every pooled row at once
/// ([`MessageBias::fill`]) or for the blocks of pooled rows the oracle asks
/// for ([`BiasRows`]), both by [`MessageBias::write_example_rows`] — the
/// example found once per block, its regions walked in row order — so the
/// same bits.
#[derive(Debug)]
pub(super) struct MessageBias<'t> {
    pub(super) data: &'t Dataset,
    pub(super) pooled: &'t Pooled,
    pub(super) messages: &'t [Messages],
    pub(super) discrepancy: &'t dyn Discrepancy,
    pub(super) epsilon: f64,
}

impl MessageBias<'_> {
    /// Every pooled row (`classes` entries each) into `out`, laid out like
    /// the pooled rows; examples in parallel.
    pub(super) fn fill(&self, classes: usize, out: &mut [f64]) {
        self.pooled.example_chunks(classes, out).into_par_iter().enumerate().for_each(|(k, chunk)| {
            self.write_rows_dispatch(self.pooled.rows[k]..self.pooled.rows[k + 1], classes, chunk);
        });
    }

    /// Pooled rows `rows` (`classes` entries each, row-major) into `out`:
    /// [`MessageBias::write_example_rows`] compiled for AVX-512 F or AVX2
    /// (eight- or four-lane divisions; no fused multiply-adds, so the same
    /// bits) where the CPU has it.
    fn write_rows_dispatch(&self, rows: std::ops::Range<usize>, classes: usize, out: &mut [f64]) {
        // `write_example_rows` compiled with `$feature` enabled, called.
        #[cfg(target_arch = "x86_64")]
        macro_rules! compiled_for {
            ($feature:literal) => {{
                #[target_feature(enable = $feature)]
                unsafe fn kernel(
                    bias: &MessageBias<'_>,
                    rows: std::ops::Range<usize>,
                    classes: usize,
                    out: &mut [f64],
                ) {
                    bias.write_example_rows(rows, classes, out);
                }
                // SAFETY: the caller checked that the CPU has `$feature`.
                unsafe { kernel(self, rows, classes, out) }
            }};
        }
        #[cfg(target_arch = "x86_64")]
        if fastmath::x86::available_512() {
            return compiled_for!("avx512f");
        }
        #[cfg(target_arch = "x86_64")]
        if fastmath::x86::avx2() {
            return compiled_for!("avx2");
        }
        self.write_example_rows(rows, classes, out);
    }

    /// Pooled rows `rows` into `out` (`classes` entries each): per row, the
    /// message offsets of its region written into its slot with the
    /// operations of [`smoothed_inference::region_message_offsets`] in the
    /// same order ([`region_offsets`]), then `(Δ_α(y) + offset) / ε_t` —
    /// the division kept (a reciprocal would round differently). The example
    /// holding `rows.start` is found once; the rows may run over any number
    /// of examples.
    #[inline(always)]
    fn write_example_rows(&self, rows: std::ops::Range<usize>, classes: usize, out: &mut [f64]) {
        if rows.is_empty() {
            return;
        }
        let starts = &self.pooled.rows;
        assert!(rows.end <= *starts.last().expect("rows start at 0"), "bias rows out of range");
        assert_eq!(out.len(), rows.len() * classes, "bias rows must be rows × classes");
        // The example whose rows starts[k]..starts[k + 1] hold `rows.start`.
        let mut k = starts.partition_point(|&start| start <= rows.start) - 1;
        let mut stack = [0.0; 64];
        let mut heap = Vec::new();
        let delta: &mut [f64] = if classes <= stack.len() {
            &mut stack[..classes]
        } else {
            heap.resize(classes, 0.0);
            &mut heap
        };
        let mut maps = EdgeMaps::default();
        let mut slots = out.chunks_exact_mut(classes);
        let mut row = rows.start;
        while row < rows.end {
            let end = starts[k + 1].min(rows.end);
            let example = &self.data.examples()[k];
            let graph = example.graph();
            let truth = example.labels().unwrap_or(&[]);
            let lambda = self.messages[k].as_slice();
            assert_eq!(lambda.len(), graph.total_message_len(), "messages do not fit the graph");
            for &r in &self.pooled.regions[k][row - starts[k]..end - starts[k]] {
                let slot = slots.next().expect("one slot per row");
                self.discrepancy.region(graph, r, truth, delta);
                if let Some(product) = Product::of(graph, lambda, r, &mut maps) {
                    product.write_biases(delta, self.epsilon, slot);
                    continue;
                }
                region_offsets(graph, lambda, r, slot, &mut maps);
                for (b, &d) in slot.iter_mut().zip(delta.iter()) {
                    *b = (d + *b) / self.epsilon;
                }
            }
            row = end;
            k += 1;
        }
    }
}

impl BiasRows for MessageBias<'_> {
    fn write_row(&self, row: usize, out: &mut [f64]) {
        self.write_rows_dispatch(row..row + 1, out.len(), out);
    }

    fn write_rows(&self, rows: std::ops::Range<usize>, out: &mut [f64]) {
        if !rows.is_empty() {
            self.write_rows_dispatch(rows.clone(), out.len() / rows.len(), out);
        }
    }
}

/// How an edge map `map[parent configuration] = child configuration` reads
/// its message `λ` (of `m` entries), found once per interned map
/// ([`factor_graph::RegionGraph::edge_map`] hands out the same slice for
/// equal maps): the map of a pair to one of its variables is
/// `map[y] = ⌊y / s⌋ mod m`, which adds `λ` in whole runs (vector adds)
/// instead of one gathered entry at a time. Either way each entry gets the
/// same one addition, so the same bits.
#[derive(Debug, Clone, Copy, PartialEq)]
enum MapShape {
    /// `map[y] = y mod m`: `λ` added to each run of `m` entries.
    Cycle,
    /// `map[y] = ⌊y / s⌋ mod m` with `s > 1`: `λ(j)` added to runs of `s` entries.
    Runs(usize),
    /// Anything else: one gathered entry at a time.
    Gather,
}

impl MapShape {
    /// The shape of `map` reading a message of `m` entries.
    fn of(map: &[u32], m: usize) -> Self {
        let s = map.iter().position(|&y| y != 0).unwrap_or(map.len());
        if s == 0 || m == 0 || !map.len().is_multiple_of(s * m) {
            return MapShape::Gather;
        }
        // `⌊y / s⌋ mod m`, a run of `s` entries per digit, compared without
        // early exits (so the comparisons vectorise: shapes are found once per
        // block of rows the oracle asks for).
        let fits = if s == 1 {
            map.chunks_exact(m)
                .fold(true, |ok, cycle| ok & cycle.iter().zip(0u32..).fold(true, |ok, (&v, y)| ok & (v == y)))
        } else {
            map.chunks_exact(s)
                .zip((0..m as u32).cycle())
                .fold(true, |ok, (run, digit)| ok & run.iter().fold(true, |ok, &v| ok & (v == digit)))
        };
        if !fits {
            return MapShape::Gather;
        }
        if s == 1 { MapShape::Cycle } else { MapShape::Runs(s) }
    }
}

/// The shapes of the edge maps met so far in one call, by the map's address,
/// length and message length (a handful: the maps are interned per graph).
#[derive(Debug, Default)]
struct EdgeMaps {
    known: Vec<(*const u32, usize, usize, MapShape)>,
}

impl EdgeMaps {
    fn shape(&mut self, map: &[u32], m: usize) -> MapShape {
        let key = (map.as_ptr(), map.len(), m);
        if let Some(&(.., shape)) = self.known.iter().find(|&&(p, n, mm, _)| (p, n, mm) == key) {
            return shape;
        }
        let shape = MapShape::of(map, m);
        if self.known.len() < 16 {
            self.known.push((key.0, key.1, key.2, shape));
        }
        shape
    }
}

/// [`smoothed_inference::region_message_offsets`] of region `r` into `out`
/// (`graph.num_configs(r)` entries) from the flat messages `lambda`: `out`
/// zeroed, then edge by edge in increasing index — `+ λ_{r→β}(map(y))` for
/// an edge to a child, `− λ_{γ→r}(y)` for an edge from a parent — so each
/// entry gets the same operations in the same order, the same bits; edge maps
/// of a [`MapShape`] other than `Gather` add whole runs at once.
#[inline(always)]
fn region_offsets(graph: &factor_graph::RegionGraph, lambda: &[f64], r: usize, out: &mut [f64], maps: &mut EdgeMaps) {
    assert_eq!(out.len(), graph.num_configs(r), "one bias per configuration of the region");
    out.fill(0.0);
    for (e, as_parent) in graph.edges_in_order(r) {
        let msg = &lambda[graph.message_range(e)];
        if as_parent {
            let map = graph.edge_map(e);
            match maps.shape(map, msg.len()) {
                MapShape::Cycle => {
                    for run in out.chunks_exact_mut(msg.len()) {
                        for (v, &m) in run.iter_mut().zip(msg) {
                            *v += m;
                        }
                    }
                }
                MapShape::Runs(s) => {
                    for (run, &m) in out.chunks_exact_mut(s).zip(msg.iter().cycle()) {
                        for v in run {
                            *v += m;
                        }
                    }
                }
                MapShape::Gather => {
                    for (v, &y) in out.iter_mut().zip(map) {
                        *v += msg[y as usize];
                    }
                }
            }
        } else {
            for (v, &m) in out.iter_mut().zip(msg) {
                *v -= m;
            }
        }
    }
}

/// A region whose message offsets are its two child messages laid out as a
/// product, `y = j·s + i` reading `outer(j)` and `inner(i)` (a pair of a grid:
/// edge maps `⌊y / s⌋` and `y mod s`), and which has no parents. Its biases
/// are written in one pass, `(Δ(y) + ((0 + λ_outer) + λ_inner)) / ε_t`,
/// instead of a zeroed slot, a pass per edge and a pass for the division:
/// the operations of [`region_offsets`] and the division after it, so the
/// same bits. (`region_offsets` adds the edges in index order; with two terms
/// the order never shows: `(0 + a) + b` and `(0 + b) + a` are equal for all
/// `a`, `b`, signed zeros included.)
#[derive(Debug, Clone, Copy)]
struct Product<'m> {
    /// The message read by `⌊y / s⌋` (`Runs(s)`).
    outer: &'m [f64],
    /// The message read by `y mod s` (`Cycle`), `s` entries.
    inner: &'m [f64],
}

impl<'m> Product<'m> {
    /// Region `r`'s layout, if it is a product of its two child messages.
    #[inline(always)]
    fn of(graph: &factor_graph::RegionGraph, lambda: &'m [f64], r: usize, maps: &mut EdgeMaps) -> Option<Self> {
        let (&[e1, e2], []) = (graph.child_edges(r), graph.parent_edges(r)) else {
            return None;
        };
        let (m1, m2) = (&lambda[graph.message_range(e1)], &lambda[graph.message_range(e2)]);
        let (outer, inner) = match (maps.shape(graph.edge_map(e1), m1.len()), maps.shape(graph.edge_map(e2), m2.len()))
        {
            (MapShape::Runs(s), MapShape::Cycle) if s == m2.len() => (m1, m2),
            (MapShape::Cycle, MapShape::Runs(s)) if s == m1.len() => (m2, m1),
            _ => return None,
        };
        (outer.len() * inner.len() == graph.num_configs(r)).then_some(Product { outer, inner })
    }

    /// `slot(y) = (Δ(y) + ((0 + outer(⌊y / s⌋)) + inner(y mod s))) / ε` for
    /// every configuration `y`.
    #[inline(always)]
    fn write_biases(self, delta: &[f64], epsilon: f64, slot: &mut [f64]) {
        let s = self.inner.len();
        assert_eq!(slot.len(), self.outer.len() * s, "one bias per configuration of the region");
        for ((out, delta), &a) in slot.chunks_exact_mut(s).zip(delta.chunks_exact(s)).zip(self.outer) {
            for ((o, &d), &b) in out.iter_mut().zip(delta).zip(self.inner) {
                *o = (d + ((0.0 + a) + b)) / epsilon;
            }
        }
    }
}

/// Largest bias array (rows × classes, 64 MiB of `f64`) a fit of an oracle that
/// keeps its scores ([`oracles::Oracle::maintains_scores`]) and reads every
/// row's bias ([`oracles::Oracle::reads_every_bias`]) gets whole; larger ones
/// (a Stanford-scale pair type: 1.8 GB), and those of oracles that read a
/// subsample (boosting), are computed row by row.
pub(super) const DENSE_BIAS_ENTRIES: usize = 1 << 23;

/// What [`gather_theta`] reads.
#[derive(Clone, Copy)]
pub(super) struct ThetaSource<'t> {
    pub(super) data: &'t Dataset,
    pub(super) pooled: &'t [Pooled],
    pub(super) discrepancy: &'t dyn Discrepancy,
    pub(super) epsilon: &'t [f64],
    /// The current model of each type (`None` before its first fit), for
    /// [`Potentials::Recomputed`] types.
    pub(super) models: &'t [Option<Box<dyn Model>>],
}

/// Calls `f` with example `k`'s gathered `θ` (in a per-thread buffer).
pub(super) fn with_theta<R>(
    theta: ThetaSource<'_>,
    k: usize,
    f: impl FnOnce(&[f64]) -> Result<R, LearnError>,
) -> Result<R, LearnError> {
    with_buffer(&THETA, |buffer| {
        gather_theta(theta, k, buffer)?;
        f(buffer)
    })
}

/// [`loss_at`] in the thread's inference workspace.
pub(super) fn example_loss(problem: &InferenceProblem<'_>, messages: &Messages, truth: &[usize]) -> f64 {
    with_thread_workspace(|ws| loss_at(problem, messages, truth, ws))
}

/// Pools the regions of type `t` of every example (true configurations; `θ` is
/// set by the first refresh).
pub(super) fn pool(data: &Dataset, t: usize) -> Result<Pooled, LearnError> {
    let mut labels = Vec::new();
    let mut rows = vec![0];
    let mut regions = Vec::with_capacity(data.len());
    // Examples on one graph share its type map (`Dataset::region_types`), so its regions of type `t`.
    let mut shared: HashMap<*const usize, Arc<[usize]>> = HashMap::new();
    for (k, ex) in data.examples().iter().enumerate() {
        let truth = data.labels(k)?;
        let regs =
            shared.entry(data.region_types(k).as_ptr()).or_insert_with(|| data.regions_of_type(k, t).collect()).clone();
        labels.extend(regs.iter().map(|&r| ex.graph().config_of(r, truth)));
        rows.push(labels.len());
        regions.push(regs);
    }
    if labels.is_empty() {
        return Err(LearnError::Config(format!(
            "factor type `{}` has no regions in the training set",
            data.factor_types()[t].name
        )));
    }
    let theta = vec![0.0; labels.len() * data.factor_types()[t].classes];
    Ok(Pooled { labels, rows, regions, potentials: Potentials::Theta(theta) })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use factor_graph::{RegionGraph, RegionGraphBuilder};
    use oracles::BiasRows;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use smoothed_inference::{Messages, region_message_offsets};

    use super::{EdgeMaps, MapShape, MessageBias, Product, pool};
    use crate::discrepancy::{Discrepancy, Hamming};
    use crate::{Dataset, Example, FactorTypeInfo, FeatureBlock};

    /// A chain of `n` three-label variables: singletons, pairs `(i + 1, i)`
    /// (variables listed backwards), skip pairs `(i, i + 2)` and triples
    /// `(i, i + 1, i + 2)`, each triple the parent of its three pairs — maps
    /// of every [`MapShape`] (a triple's map to `(i, i + 2)` is a gather) and
    /// pairs with both parents and children.
    fn chain(n: usize) -> RegionGraph {
        let mut b = RegionGraphBuilder::new(vec![3; n]).unwrap();
        let (unary, pair, triple) = (
            b.add_factor_type("unary").unwrap(),
            b.add_factor_type("pair").unwrap(),
            b.add_factor_type("triple").unwrap(),
        );
        let singles: Vec<usize> = (0..n).map(|i| b.add_region(&[i], unary).unwrap()).collect();
        for i in 0..n.saturating_sub(1) {
            let p = b.add_region(&[i + 1, i], pair).unwrap();
            b.add_edge(p, singles[i]).unwrap();
            b.add_edge(p, singles[i + 1]).unwrap();
        }
        for i in 0..n.saturating_sub(2) {
            let p = b.add_region(&[i, i + 2], pair).unwrap();
            b.add_edge(p, singles[i]).unwrap();
            b.add_edge(p, singles[i + 2]).unwrap();
            let t = b.add_region(&[i, i + 1, i + 2], triple).unwrap();
            for vars in [[i + 1, i], [i, i + 2], [i + 1, i + 2]] {
                if let Some(c) = b.find_region(&vars) {
                    b.add_edge(t, c).unwrap();
                } else {
                    let c = b.add_region(&vars, pair).unwrap();
                    b.add_edge(c, singles[vars[0]]).unwrap();
                    b.add_edge(c, singles[vars[1]]).unwrap();
                    b.add_edge(t, c).unwrap();
                }
            }
        }
        b.build().unwrap()
    }

    /// Examples of unequal sizes (one with no pairs or triples at all),
    /// random labels, features and messages.
    fn data() -> (Dataset, Vec<Messages>) {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut examples = Vec::new();
        let mut messages = Vec::new();
        for (k, n) in [4usize, 1, 6, 3, 5].into_iter().enumerate() {
            let graph = Arc::new(chain(n));
            let labels: Vec<usize> = (0..n).map(|_| rng.random_range(0..3)).collect();
            let features = (0..3)
                .map(|t| {
                    let rows = (0..graph.num_regions()).filter(|&r| graph.region_type(r) == t).count();
                    FeatureBlock { dim: 1, values: (0..rows).map(|_| rng.random()).collect() }
                })
                .collect();
            let lambda = (0..graph.total_message_len()).map(|_| rng.random_range(-2.0..2.0)).collect();
            messages.push(Messages::from_vec(&graph, lambda).unwrap());
            examples.push(Example::new(format!("chain{k}"), graph, Some(labels), features));
        }
        let types = ["unary", "pair", "triple"].map(|name| FactorTypeInfo::new(name, 1)).to_vec();
        (Dataset::new(types, examples).unwrap(), messages)
    }

    /// Row `row` of type `t` as the row-by-row path computed it before the
    /// block path: `region_message_offsets`, then `(Δ + offset) / ε`.
    fn reference(data: &Dataset, messages: &[Messages], t: usize, epsilon: f64) -> Vec<f64> {
        let pooled = pool(data, t).unwrap();
        let mut out = Vec::new();
        for (k, regions) in pooled.regions.iter().enumerate() {
            let graph = data.examples()[k].graph();
            let truth = data.examples()[k].labels().unwrap();
            for &r in regions.iter() {
                let mut offsets = vec![0.0; graph.num_configs(r)];
                region_message_offsets(graph, &messages[k], r, &mut offsets);
                let mut row = vec![0.0; offsets.len()];
                Hamming.region(graph, r, truth, &mut row);
                for (b, o) in row.iter_mut().zip(&offsets) {
                    *b = (*b + o) / epsilon;
                }
                out.extend(row);
            }
        }
        out
    }

    fn bits(v: &[f64]) -> Vec<u64> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn block_rows_give_the_row_by_row_bits() {
        let (data, messages) = data();
        let epsilon = 0.1;
        for t in 0..3 {
            let pooled = pool(&data, t).unwrap();
            let c = data.factor_types()[t].classes;
            let n = pooled.labels.len();
            let bias =
                MessageBias { data: &data, pooled: &pooled, messages: &messages, discrepancy: &Hamming, epsilon };
            let want = bits(&reference(&data, &messages, t, epsilon));
            assert_eq!(want.len(), n * c);
            let mut all = vec![f64::NAN; n * c];
            bias.fill(c, &mut all);
            assert_eq!(bits(&all), want, "fill, type {t}");
            let mut row = vec![f64::NAN; c];
            for k in 0..n {
                bias.write_row(k, &mut row);
                assert_eq!(bits(&row), want[k * c..(k + 1) * c], "row {k} of type {t}");
            }
            // Every range: inside one example, across boundaries (and the
            // example without rows of this type), the whole set, empty.
            for start in 0..=n {
                for end in start..=n {
                    let mut out = vec![f64::NAN; (end - start) * c];
                    bias.write_rows(start..end, &mut out);
                    assert_eq!(bits(&out), want[start * c..end * c], "rows {start}..{end} of type {t}");
                }
            }
        }
        // The pair type's rows cross example boundaries at these starts.
        let pairs = pool(&data, 1).unwrap();
        assert_eq!(pairs.rows, [0, 5, 5, 14, 17, 24]);
    }

    /// Examples on one graph share one list of its regions of each type
    /// (the same `Arc`); an equal graph built apart gets its own; every list
    /// is the example's regions of that type in order.
    #[test]
    fn region_lists_are_shared_per_graph() {
        let (one, apart) = (Arc::new(chain(4)), Arc::new(chain(4)));
        let example = |k: usize, graph: &Arc<factor_graph::RegionGraph>| {
            let features = (0..3)
                .map(|t| {
                    let rows = (0..graph.num_regions()).filter(|&r| graph.region_type(r) == t).count();
                    FeatureBlock { dim: 1, values: vec![0.5; rows] }
                })
                .collect();
            Example::new(format!("e{k}"), graph.clone(), Some(vec![0; 4]), features)
        };
        let examples = vec![example(0, &one), example(1, &apart), example(2, &one), example(3, &one)];
        let types = ["unary", "pair", "triple"].map(|name| FactorTypeInfo::new(name, 1)).to_vec();
        let data = Dataset::new(types, examples).unwrap();
        for t in 0..3 {
            let pooled = pool(&data, t).unwrap();
            for (k, regions) in pooled.regions.iter().enumerate() {
                assert_eq!(**regions, data.regions_of_type(k, t).collect::<Vec<_>>()[..], "example {k}, type {t}");
            }
            let r = &pooled.regions;
            assert!(Arc::ptr_eq(&r[0], &r[2]) && Arc::ptr_eq(&r[0], &r[3]), "type {t}");
            assert!(!Arc::ptr_eq(&r[0], &r[1]), "type {t}");
        }
    }

    /// A pair with no parents, its child edges added in either order, over
    /// label counts that fill whole vectors or not, is written in one pass
    /// ([`Product`]) with the bits of the zeroed slot and a pass per edge
    /// (either edge order: the two sums agree, signed zeros included);
    /// messages hold ±0, subnormals and values far apart. A pair with a
    /// parent, and the parent, are not products.
    #[test]
    fn product_pairs_give_the_per_edge_bits() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let special = [0.0, -0.0, 5e-324, -1e-310, 1e300, -3.0];
        for (la, lb) in [(2, 3), (3, 2), (8, 8), (9, 4), (1, 5), (5, 1)] {
            for outer_edge_first in [true, false] {
                let mut b = RegionGraphBuilder::new(vec![la, lb, 2]).unwrap();
                let (unary, pair, triple) = (
                    b.add_factor_type("unary").unwrap(),
                    b.add_factor_type("pair").unwrap(),
                    b.add_factor_type("triple").unwrap(),
                );
                let singles: Vec<usize> = (0..3).map(|i| b.add_region(&[i], unary).unwrap()).collect();
                let p = b.add_region(&[0, 1], pair).unwrap();
                let edges = if outer_edge_first { [singles[0], singles[1]] } else { [singles[1], singles[0]] };
                for c in edges {
                    b.add_edge(p, c).unwrap();
                }
                let q = b.add_region(&[1, 2], pair).unwrap();
                b.add_edge(q, singles[1]).unwrap();
                b.add_edge(q, singles[2]).unwrap();
                let t = b.add_region(&[0, 1, 2], triple).unwrap();
                b.add_edge(t, q).unwrap();
                let g = b.build().unwrap();
                for draw in 0..20 {
                    let lambda: Vec<f64> = (0..g.total_message_len())
                        .map(|i| if draw % 2 == 0 { special[i % special.len()] } else { rng.random_range(-4.0..4.0) })
                        .collect();
                    let messages = Messages::from_vec(&g, lambda.clone()).unwrap();
                    let configs = g.num_configs(p);
                    let delta: Vec<f64> = (0..configs).map(|y| [0.0, -0.0, 1.0][(y + draw) % 3]).collect();
                    let mut want = vec![0.0; configs];
                    region_message_offsets(&g, &messages, p, &mut want);
                    for (w, &d) in want.iter_mut().zip(&delta) {
                        *w = (d + *w) / 0.3;
                    }
                    let mut maps = EdgeMaps::default();
                    let product = Product::of(&g, &lambda, p, &mut maps).expect("a pair of two children is a product");
                    let mut got = vec![f64::NAN; configs];
                    product.write_biases(&delta, 0.3, &mut got);
                    assert_eq!(bits(&got), bits(&want), "labels {la}×{lb}, outer edge first {outer_edge_first}");
                    assert!(Product::of(&g, &lambda, q, &mut maps).is_none(), "a pair with a parent");
                    assert!(Product::of(&g, &lambda, t, &mut maps).is_none(), "a region of one child");
                }
            }
        }
    }

    #[test]
    fn map_shapes() {
        let cycle: Vec<u32> = (0..12).map(|y| y % 3).collect();
        let runs: Vec<u32> = (0..12).map(|y| (y / 2) % 3).collect();
        assert_eq!(MapShape::of(&cycle, 3), MapShape::Cycle);
        assert_eq!(MapShape::of(&runs, 3), MapShape::Runs(2));
        assert_eq!(MapShape::of(&[0, 0, 0, 0], 1), MapShape::Runs(4));
        assert_eq!(MapShape::of(&[0, 1, 0, 1], 3), MapShape::Gather);
        assert_eq!(MapShape::of(&[0, 2, 1, 3], 4), MapShape::Gather);
        assert_eq!(MapShape::of(&[1, 0], 2), MapShape::Gather);
        // The chain's triple → skip pair map is a gather.
        let g = chain(3);
        let shapes: Vec<MapShape> =
            (0..g.num_edges()).map(|e| MapShape::of(g.edge_map(e), g.message_range(e).len())).collect();
        assert!(shapes.contains(&MapShape::Gather) && shapes.contains(&MapShape::Cycle));
        assert!(shapes.iter().any(|s| matches!(s, MapShape::Runs(_))));
    }
}
