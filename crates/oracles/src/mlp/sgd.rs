//! Minibatch SGD with momentum on the packed parameters: the preallocated
//! state of one fit ([`Sgd`]), the parallel, deterministic minibatch
//! gradient and the momentum update.

use rayon::prelude::*;

use super::layout::Layout;
use super::passes::{Rows, gradient_rows};
use crate::Problem;

/// `s ← μ s + (1 − μ) g`, `θ ← θ − η s` element by element (module docs),
/// compiled for AVX2 where the CPU has it (the same operations, so the same
/// bits: there is no multiply-add to fuse).
fn momentum_update(theta: &mut [f64], s: &mut [f64], g: &[f64], step: f64, momentum: f64) {
    #[inline(always)]
    fn generic(theta: &mut [f64], s: &mut [f64], g: &[f64], step: f64, momentum: f64) {
        for ((p, s), &g) in theta.iter_mut().zip(s).zip(g) {
            *s = momentum * *s + (1.0 - momentum) * g;
            *p -= step * *s;
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn wide(theta: &mut [f64], s: &mut [f64], g: &[f64], step: f64, momentum: f64) {
        generic(theta, s, g, step, momentum);
    }
    #[cfg(target_arch = "x86_64")]
    if fastmath::x86::avx2() {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { wide(theta, s, g, step, momentum) };
    }
    generic(theta, s, g, step, momentum);
}

/// Preallocated state of minibatch SGD with momentum for one fit, on packed parameters.
pub(super) struct Sgd {
    pub(super) layout: Layout,
    pub(super) chunk_rows: usize,
    /// `1 / w̄`, so the minibatch gradient estimates that of `L / Σ_k w_k`
    /// (`w̄` over the whole problem's rows, every rank's).
    pub(super) inv_mean_weight: f64,
    /// One packed gradient per chunk, `chunks × packed_len`; chunk 0 receives the sum.
    pub(super) grads: Vec<f64>,
    pub(super) blocks: Vec<Rows>,
    /// The momentum step `s`.
    pub(super) velocity: Vec<f64>,
}

impl Sgd {
    pub(super) fn new(layout: Layout, minibatch: usize, problem: &Problem<'_>) -> Self {
        Self::with_chunk_rows(layout, minibatch, problem, layout.chunk_rows(minibatch))
    }

    pub(super) fn with_chunk_rows(layout: Layout, minibatch: usize, problem: &Problem<'_>, chunk_rows: usize) -> Self {
        let chunks = minibatch.div_ceil(chunk_rows).max(1);
        let len = layout.packed_len();
        Self {
            layout,
            chunk_rows,
            inv_mean_weight: problem.global_rows() as f64 / problem.total_weight(),
            grads: vec![0.0; chunks * len],
            blocks: (0..chunks).map(|_| Rows::new(layout, chunk_rows)).collect(),
            velocity: vec![0.0; len],
        }
    }

    /// Writes into `self.grads[..packed_len]` the gradient of
    /// `scale · Σ_{k∈rows} w_k ℓ_k` at the packed parameters `q`; the chunks'
    /// gradients are summed in chunk order (zero without rows). The rows
    /// `ahead` (the next minibatch) are prefetched meanwhile, each chunk an
    /// equal share.
    pub(super) fn gradient(&mut self, q: &[f64], problem: &Problem<'_>, rows: &[usize], ahead: &[usize], scale: f64) {
        let layout = self.layout;
        let len = layout.packed_len();
        if rows.is_empty() {
            // A rank holding none of the minibatch's rows adds nothing.
            self.grads[..len].fill(0.0);
            return;
        }
        let net = layout.net(q);
        let chunks = rows.len().div_ceil(self.chunk_rows);
        let share = ahead.len().div_ceil(chunks.max(1)).max(1);
        let work = |c: usize, grad: &mut [f64], block: &mut Rows, rows: &[usize]| {
            grad.fill(0.0);
            let ahead = ahead.get(c * share..ahead.len().min((c + 1) * share)).unwrap_or_default();
            gradient_rows(&net, problem, rows, ahead, scale, block, &mut layout.net_mut(grad));
        };
        let grads = &mut self.grads[..chunks * len];
        let blocks = &mut self.blocks[..chunks];
        if chunks == 1 {
            work(0, grads, &mut blocks[0], rows);
        } else {
            grads
                .par_chunks_mut(len)
                .zip(blocks.par_iter_mut().zip(rows.par_chunks(self.chunk_rows)))
                .enumerate()
                .for_each(|(c, (grad, (block, rows)))| work(c, grad, block, rows));
            let (total, rest) = grads.split_at_mut(len);
            for part in rest.chunks_exact(len) {
                for (t, p) in total.iter_mut().zip(part) {
                    *t += p;
                }
            }
        }
    }

    /// One momentum step on a minibatch of `batch` rows of the whole
    /// problem, of which this rank holds `rows` (its own indices; all of
    /// them in one process): the rank's gradient is summed over the ranks
    /// ([`Problem::sum`], one vector of [`Layout::packed_len`] numbers; no
    /// sum in one process), so every rank takes the same step.
    #[allow(clippy::too_many_arguments)]
    fn step(
        &mut self,
        q: &mut [f64],
        problem: &Problem<'_>,
        rows: &[usize],
        batch: usize,
        ahead: &[usize],
        step: f64,
        momentum: f64,
    ) {
        let scale = self.inv_mean_weight / batch as f64;
        self.gradient(q, problem, rows, ahead, scale);
        let len = self.layout.packed_len();
        problem.sum(&mut self.grads[..len]);
        momentum_update(q, &mut self.velocity, &self.grads[..len], step, momentum);
    }

    /// One epoch over a permutation `order` of the whole problem's rows
    /// (`0..`[`Problem::global_rows`]) in minibatches of `minibatch` rows, as
    /// one process runs it: each rank computes the gradient of the
    /// minibatch's rows it holds (in the minibatch's order) and the ranks'
    /// gradients are summed ([`Sgd::step`]). The next minibatch's rows (a
    /// random sample) load while one is computed.
    pub(super) fn epoch(
        &mut self,
        q: &mut [f64],
        problem: &Problem<'_>,
        order: &[usize],
        minibatch: usize,
        step: f64,
        momentum: f64,
    ) {
        let (offset, n) = (problem.row_offset(), problem.rows());
        let mine = |batch: &[usize], out: &mut Vec<usize>| {
            out.clear();
            out.extend(batch.iter().filter_map(|&k| k.checked_sub(offset).filter(|&k| k < n)));
        };
        let (mut rows, mut ahead) = (Vec::with_capacity(minibatch), Vec::with_capacity(minibatch));
        let mut batches = order.chunks(minibatch).peekable();
        if let Some(first) = batches.peek() {
            mine(first, &mut ahead);
        }
        while let Some(batch) = batches.next() {
            std::mem::swap(&mut rows, &mut ahead);
            mine(batches.peek().copied().unwrap_or_default(), &mut ahead);
            self.step(q, problem, &rows, batch.len(), &ahead, step, momentum);
        }
    }
}
