//! The regions of each factor type pooled over the training examples, their
//! potentials `θ = ε_t g_t + Δ` (or `g_t`'s scores), the message biases of
//! Eq. 14 and the per-thread buffers an example's `θ` is gathered into.

use oracles::{BiasRows, Features, Model};
use rayon::prelude::*;
use smoothed_inference::{InferenceProblem, Messages, region_message_offsets, with_thread_workspace};

use crate::discrepancy::Discrepancy;
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
    /// Example `k`'s regions of this type, in row order.
    pub(super) regions: Vec<Vec<usize>>,
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
    /// ([`Oracle::maintains_scores`]): fits continue from them instead of
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
/// factor type, from the messages, region by region
/// (`region_message_offsets`): written for every pooled row at once
/// ([`MessageBias::fill`]) or computed one pooled row at a time for the
/// oracle ([`BiasRows`]).
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
            for (&r, row) in self.pooled.regions[k].iter().zip(chunk.chunks_exact_mut(classes)) {
                self.write_region(k, r, row);
            }
        });
    }

    /// The biases of region `r` of example `k`.
    fn write_region(&self, k: usize, r: usize, out: &mut [f64]) {
        let graph = &self.data.examples()[k].graph();
        let truth = self.data.examples()[k].labels().unwrap_or(&[]);
        with_buffer(&SCRATCH, |offsets| {
            offsets.resize(out.len(), 0.0);
            region_message_offsets(graph, &self.messages[k], r, offsets);
            self.discrepancy.region(graph, r, truth, out);
            for (out, &o) in out.iter_mut().zip(offsets.iter()) {
                *out = (*out + o) / self.epsilon;
            }
        });
    }
}

impl BiasRows for MessageBias<'_> {
    fn write_row(&self, row: usize, out: &mut [f64]) {
        let rows = &self.pooled.rows;
        // The example whose rows rows[k]..rows[k + 1] hold `row`.
        let k = rows.partition_point(|&start| start <= row) - 1;
        self.write_region(k, self.pooled.regions[k][row - rows[k]], out);
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

type Buffer = std::cell::RefCell<Vec<f64>>;

thread_local! {
    /// An example's gathered `θ` ([`with_theta`]).
    static THETA: Buffer = const { Buffer::new(Vec::new()) };
    /// Per-example scratch of the graph's size (message offsets, `θ̃`).
    static SCRATCH: Buffer = const { Buffer::new(Vec::new()) };
    /// An example's scores of one type ([`Potentials::Recomputed`]).
    static SCORES: Buffer = const { Buffer::new(Vec::new()) };
}

/// Calls `f` with one of this thread's buffers: examples of one size then
/// reuse it instead of allocating (and fragmenting the heap with) an array
/// of a graph's configurations each.
fn with_buffer<R>(key: &'static std::thread::LocalKey<Buffer>, f: impl FnOnce(&mut Vec<f64>) -> R) -> R {
    key.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => f(&mut buffer),
        // Re-entered on this thread (a rayon task stolen inside `f`): a fresh buffer.
        Err(_) => f(&mut Vec::new()),
    })
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
    for (k, ex) in data.examples().iter().enumerate() {
        let truth = data.labels(k)?;
        let regs: Vec<usize> = data.regions_of_type(k, t).collect();
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
