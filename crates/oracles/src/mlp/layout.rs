//! Where the parameters are: the model's flat layout, the *packed* layout the
//! kernels work on (tiles contiguous, hidden units padded to whole tiles) and
//! the views of it ([`Net`], [`NetMut`]); the cold-start draw, the full loss
//! and the size of a minibatch chunk, which depend on the layout only.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::passes::{Rows, evaluate_rows};
use super::{BLOCK, CHUNK_WORK, EVAL_CHUNK, EVAL_ROWS, MIN_CHUNK_ROWS, TILE};
#[cfg(doc)]
use crate::Model;
use crate::Problem;

/// Shape of the model's flat parameter vector `[V (input-major), c, W (row-major), a]`
/// and of the *packed* vector the kernels work on (see [`Layout::pack`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Layout {
    pub(super) dim: usize,
    pub(super) hidden: usize,
    pub(super) classes: usize,
    pub(super) biases: bool,
}

impl Layout {
    pub(super) fn bias_len(&self, n: usize) -> usize {
        if self.biases { n } else { 0 }
    }

    pub(super) fn v(&self) -> std::ops::Range<usize> {
        0..self.dim * self.hidden
    }

    pub(super) fn hidden_bias(&self) -> std::ops::Range<usize> {
        let s = self.v().end;
        s..s + self.bias_len(self.hidden)
    }

    pub(super) fn w(&self) -> std::ops::Range<usize> {
        let s = self.hidden_bias().end;
        s..s + self.classes * self.hidden
    }

    pub(super) fn output_bias(&self) -> std::ops::Range<usize> {
        let s = self.w().end;
        s..s + self.bias_len(self.classes)
    }

    pub(super) fn len(&self) -> usize {
        self.output_bias().end
    }

    /// [`Layout::len`] without overflow, for untrusted (decoded) layouts.
    pub(super) fn checked_len(&self) -> Option<usize> {
        let v = self.dim.checked_mul(self.hidden)?;
        let w = self.classes.checked_mul(self.hidden)?;
        v.checked_add(w)?.checked_add(self.bias_len(self.hidden))?.checked_add(self.bias_len(self.classes))
    }

    /// Hidden units rounded up to whole tiles; the padding units have zero
    /// weights in and out, so they stay exactly zero during SGD.
    pub(super) fn padded_hidden(&self) -> usize {
        self.hidden.div_ceil(TILE) * TILE
    }

    /// Classes in whole tiles of `W`; the remaining `classes % TILE` rows of `W`
    /// are stored one by one.
    pub(super) fn tiled_classes(&self) -> usize {
        self.classes / TILE * TILE
    }

    pub(super) fn packed_len(&self) -> usize {
        let hp = self.padded_hidden();
        (self.dim + self.classes) * hp + self.bias_len(hp) + self.bias_len(self.classes)
    }

    /// Calls `f(model index, packed index)` for every parameter. The packed
    /// layout is `[V, c, W, a]` with `V` as tiles of [`TILE`] hidden units, each
    /// `dim × TILE`; `c` padded to whole tiles; `W` as groups of [`TILE`] classes,
    /// each `H_padded × TILE`, then single classes, each `H_padded`; and `a`.
    pub(super) fn for_each_index(&self, mut f: impl FnMut(usize, usize)) {
        let (d, h, hp, c) = (self.dim, self.hidden, self.padded_hidden(), self.classes);
        for j in 0..h {
            for i in 0..d {
                f(i * h + j, (j / TILE * d + i) * TILE + j % TILE);
            }
        }
        let (model_c, packed_c) = (d * h, d * hp);
        for j in 0..self.bias_len(h) {
            f(model_c + j, packed_c + j);
        }
        let (model_w, packed_w) = (model_c + self.bias_len(h), packed_c + self.bias_len(hp));
        for y in 0..c {
            let (group, k) = if y < self.tiled_classes() { (y / TILE * TILE, TILE) } else { (y, 1) };
            for j in 0..h {
                f(model_w + y * h + j, packed_w + group * hp + j * k + (y - group));
            }
        }
        let (model_a, packed_a) = (model_w + c * h, packed_w + c * hp);
        for y in 0..self.bias_len(c) {
            f(model_a + y, packed_a + y);
        }
    }

    /// The kernels' layout of the model parameters `p` (see [`Layout::for_each_index`]).
    pub(super) fn pack(&self, p: &[f64]) -> Vec<f64> {
        let mut q = vec![0.0; self.packed_len()];
        self.for_each_index(|m, k| q[k] = p[m]);
        q
    }

    /// The model parameters of the packed vector `q` (the padding is dropped).
    pub(super) fn unpack(&self, q: &[f64]) -> Vec<f64> {
        let mut p = vec![0.0; self.len()];
        self.for_each_index(|m, k| p[m] = q[k]);
        p
    }

    pub(super) fn packed_ranges(&self) -> [usize; 3] {
        let hp = self.padded_hidden();
        let v = self.dim * hp;
        let c = v + self.bias_len(hp);
        [v, c, c + self.classes * hp]
    }

    /// Views of a packed parameter vector.
    pub(super) fn net<'a>(&self, q: &'a [f64]) -> Net<'a> {
        let [v_end, c_end, w_end] = self.packed_ranges();
        Net {
            dim: self.dim,
            hp: self.padded_hidden(),
            tiled: self.tiled_classes(),
            v: &q[..v_end],
            c: &q[v_end..c_end],
            w: &q[c_end..w_end],
            a: &q[w_end..],
        }
    }

    /// Mutable views of a packed vector, e.g. a gradient.
    pub(super) fn net_mut<'a>(&self, q: &'a mut [f64]) -> NetMut<'a> {
        let [v_end, c_end, w_end] = self.packed_ranges();
        let (v, rest) = q.split_at_mut(v_end);
        let (c, rest) = rest.split_at_mut(c_end - v_end);
        let (w, a) = rest.split_at_mut(w_end - c_end);
        NetMut { v, c, w, a }
    }

    /// Cold-start model parameters: `V, c ~ N(0, scale²/d)`, `W = a = 0`.
    pub(super) fn init(&self, scale: f64, rng: &mut ChaCha8Rng) -> Vec<f64> {
        let mut p = vec![0.0; self.len()];
        let sd = scale / (self.dim.max(1) as f64).sqrt();
        for x in &mut p[self.v().start..self.hidden_bias().end] {
            *x = sd * rng.sample::<f64, _>(StandardNormal);
        }
        p
    }

    /// The loss `L` of the packed parameters `q` on `problem`, in parallel over
    /// rows with the chunking and summation order of [`crate::logistic_loss`].
    /// On a [`Problem::distributed`] problem, the whole problem's loss with
    /// one process's chunks and order ([`Problem::chunk_partials`]), so the
    /// bits of [`crate::logistic_loss`] of the same scores (a collective call).
    pub(super) fn loss(&self, q: &[f64], problem: &Problem<'_>) -> f64 {
        let net = self.net(q);
        if problem.is_distributed() {
            let partials = problem.chunk_partials(EVAL_CHUNK, 1, |rows, acc| {
                let mut block = Rows::new(*self, EVAL_ROWS);
                let rows = (rows.start, rows.end);
                acc[0] = evaluate_rows(&net, problem.features(), Some(problem), rows, &mut block, None, acc[0]);
            });
            return partials.iter().sum();
        }
        let n = problem.rows();
        let partial: Vec<f64> = (0..n.div_ceil(EVAL_CHUNK))
            .into_par_iter()
            .map(|chunk| {
                let mut block = Rows::new(*self, EVAL_ROWS);
                let rows = (chunk * EVAL_CHUNK, ((chunk + 1) * EVAL_CHUNK).min(n));
                evaluate_rows(&net, problem.features(), Some(problem), rows, &mut block, None, 0.0)
            })
            .collect();
        partial.iter().sum()
    }

    /// [`Self::loss`], also writing every row's scores into `scores`
    /// (`rows × classes`, bit for bit what [`Model::score`] writes). On a
    /// distributed problem the scores are written first and their loss is
    /// [`crate::logistic_loss`]'s (the same bits as [`Self::loss`]).
    pub(super) fn loss_scored(&self, q: &[f64], problem: &Problem<'_>, scores: &mut [f64]) -> f64 {
        let net = self.net(q);
        let c = problem.classes();
        if problem.is_distributed() {
            scores.par_chunks_mut(EVAL_CHUNK * c).enumerate().for_each(|(chunk, out)| {
                let mut block = Rows::new(*self, EVAL_ROWS);
                let start = chunk * EVAL_CHUNK;
                evaluate_rows(
                    &net,
                    problem.features(),
                    None,
                    (start, start + out.len() / c),
                    &mut block,
                    Some(out),
                    0.0,
                );
            });
            return crate::logistic_loss(problem, scores, None);
        }
        let partial: Vec<f64> = scores
            .par_chunks_mut(EVAL_CHUNK * c)
            .enumerate()
            .map(|(chunk, out)| {
                let mut block = Rows::new(*self, EVAL_ROWS);
                let start = chunk * EVAL_CHUNK;
                let rows = (start, start + out.len() / c);
                evaluate_rows(&net, problem.features(), Some(problem), rows, &mut block, Some(out), 0.0)
            })
            .collect();
        partial.iter().sum()
    }

    /// Rows per parallel minibatch chunk, whole blocks: a function of the shapes
    /// and the minibatch size only, so the gradient's summation order does not
    /// depend on the number of threads.
    pub(super) fn chunk_rows(&self, minibatch: usize) -> usize {
        // Multiply-adds per row of forward + backward, and ~20 for one tanh.
        let work = self.padded_hidden() * (2 * self.dim + 3 * self.classes + 20);
        let most = (CHUNK_WORK / work.max(1)).max(MIN_CHUNK_ROWS);
        // As many chunks as that needs, of equal size (whole blocks).
        minibatch.div_ceil(minibatch.div_ceil(most).max(1)).div_ceil(BLOCK) * BLOCK
    }
}

/// Packed parameters (see [`Layout::for_each_index`]); `c`, `a` empty without biases.
pub(super) struct Net<'a> {
    pub(super) dim: usize,
    /// Padded hidden units.
    pub(super) hp: usize,
    /// Classes in whole tiles of `W`.
    pub(super) tiled: usize,
    pub(super) v: &'a [f64],
    pub(super) c: &'a [f64],
    pub(super) w: &'a [f64],
    pub(super) a: &'a [f64],
}

/// Mutable packed parameter blocks, e.g. of a gradient.
pub(super) struct NetMut<'a> {
    pub(super) v: &'a mut [f64],
    pub(super) c: &'a mut [f64],
    pub(super) w: &'a mut [f64],
    pub(super) a: &'a mut [f64],
}
