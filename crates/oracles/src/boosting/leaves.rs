//! Leaf values of a grown tree (ch. §1.9.4, step 3): with the splits fixed, each
//! leaf's `C`-vector `v` minimises the logistic loss of its subsample rows,
//!
//! ```text
//! (1/W) Σ_{k ∈ leaf} w_k [ log Σ_y exp(z_k(y) + v_y) − z_k(y_k) − v_{y_k} ] + (λ / 2W) ‖v‖²,
//! ```
//!
//! where `z_k = s_k + b_k` (current ensemble scores plus bias) and `W = Σ w_k`.
//! Every row lies in exactly one leaf, so the joint re-fit separates into one
//! small L-BFGS problem per leaf. The ridge `λ` keeps the minimiser finite for a
//! leaf whose rows all have the same label; `1/W` makes the L-BFGS tolerances
//! per row. Classes whose bias is `−∞` on every row of a leaf get value 0.
//!
//! With `q_k = softmax(z_k)` and `ℓ_k = log Σ_y exp z_k(y) − z_k(y_k)` computed
//! once per round,
//! `log Σ_y exp(z_k(y) + v_y) − z_k(y_k) − v_{y_k} = ℓ_k + log Σ_y q_k(y) e^{v_y} − v_{y_k}`,
//! so an evaluation costs `C` exponentials per leaf and, for unit-weight rows, a
//! logarithm only every few dozen rows (of a running product of the sums).

use rayon::prelude::*;

use super::tree::stats_width;
use super::{SplitGain, chain};
use crate::optim::{LbfgsOptions, lbfgs_minimize};
use crate::{Collective, OracleError, Problem};

/// Least rows per parallel task in [`LeafData::gather`].
const GATHER_MIN_ROWS: usize = 512;

/// Below this `Σ_y q_k(y) e^{v_y − max v}` a row is evaluated from `z_k` directly.
const TINY_SUM: f64 = 1e-280;

/// The running product of row sums is turned into a logarithm below this, so that
/// times a sum above [`TINY_SUM`] it stays a normal number.
const PRODUCT_FLUSH: f64 = 1e-20;

/// The subsample rows of one round, as the leaf re-fit sees them.
#[derive(Debug)]
pub(super) struct LeafData {
    /// `z_k = s_k + b_k`, row-major `rows × C` (entries may be `−∞`).
    z: Vec<f64>,
    /// `q_k = softmax(z_k)`, row-major `rows × C`.
    q: Vec<f64>,
    /// `ℓ_k`: the row's loss at `v = 0`.
    loss: Vec<f64>,
    labels: Vec<usize>,
    weights: Vec<f64>,
    classes: usize,
}

impl LeafData {
    /// Buffers for `rows` subsample rows of `classes` classes.
    pub(super) fn new(rows: usize, classes: usize) -> Self {
        Self {
            z: vec![0.0; rows * classes],
            q: vec![0.0; rows * classes],
            loss: vec![0.0; rows],
            labels: vec![0; rows],
            weights: vec![0.0; rows],
            classes,
        }
    }

    /// Gathers the subsample rows `sub` of `problem` at their current scores
    /// `sub_scores` (row-major `|sub| × C`, row `r` for row `sub[r]`), and
    /// writes each row's `[w (q − e_y), w, 1]` into `stats` — with the Newton
    /// gain `[w (q − e_y), w q (1 − q), w, 1]` (see [`super::tree::Sample`]).
    /// With `target = Some(y)` only class `y`'s gradient (and Hessian) is
    /// written, the statistics a single-output tree of that class grows on
    /// ([`super::Trees::PerClass`]; `stats_width(1, …)` per row). Returns the
    /// subsample's loss.
    pub(super) fn gather(
        &mut self,
        problem: &Problem<'_>,
        sub_scores: &[f64],
        sub: &[usize],
        gain: SplitGain,
        target: Option<usize>,
        stats: &mut [f64],
    ) -> f64 {
        let c = self.classes;
        let weighted = problem.weights().is_some();
        let outputs = if target.is_some() { 1 } else { c };
        let width = stats_width(outputs, gain, weighted);
        // The classes whose statistics are written: all, or the target alone.
        let (first, last) = target.map_or((0, c), |y| (y, y + 1));
        (
            self.z.par_chunks_mut(c),
            self.q.par_chunks_mut(c),
            self.loss.par_iter_mut(),
            self.labels.par_iter_mut(),
            self.weights.par_iter_mut(),
            stats.par_chunks_mut(width),
            sub.par_iter().zip(sub_scores.par_chunks(c)),
        )
            .into_par_iter()
            .with_min_len(GATHER_MIN_ROWS)
            .for_each_init(
                || vec![0.0; c],
                |b, (z, q, loss, label, weight, st, (&k, s))| {
                    *label = problem.labels()[k];
                    *weight = problem.weight(k);
                    z.iter_mut().zip(s).zip(problem.bias_row(k, b)).for_each(|((z, s), b)| *z = s + b);
                    let max = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let mut sum = 0.0;
                    for (q, z) in q.iter_mut().zip(z.iter()) {
                        *q = (z - max).exp();
                        sum += *q;
                    }
                    q.iter_mut().for_each(|q| *q /= sum);
                    *loss = max + sum.ln() - z[*label];
                    let q = &q[first..last];
                    st[..outputs].iter_mut().zip(q).for_each(|(g, q)| *g = *weight * q);
                    if (first..last).contains(label) {
                        st[*label - first] -= *weight;
                    }
                    if gain == SplitGain::Newton {
                        st[outputs..2 * outputs].iter_mut().zip(q).for_each(|(h, q)| *h = *weight * q * (1.0 - q));
                    }
                    if weighted {
                        st[width - 2] = *weight;
                    }
                    st[width - 1] = 1.0;
                },
            );
        // Summed in row order, so the result does not depend on the thread count.
        let rows = sub.len();
        self.loss[..rows].iter().zip(&self.weights[..rows]).map(|(l, w)| w * l).sum()
    }

    /// The loss of the subsample rows `sub` at their scores `sub_scores` (laid
    /// out as for [`LeafData::gather`]); uses the loss buffer as scratch.
    pub(super) fn loss_at(&mut self, problem: &Problem<'_>, sub_scores: &[f64], sub: &[usize]) -> f64 {
        let c = self.classes;
        let rows = sub.par_iter().zip(sub_scores.par_chunks(c));
        self.loss.par_iter_mut().zip(rows).with_min_len(GATHER_MIN_ROWS).for_each_init(
            || vec![0.0; c],
            |b, (loss, (&k, s))| {
                *loss = crate::row_loss(s, problem.bias_row(k, b), problem.labels()[k], problem.weight(k), None);
            },
        );
        self.loss[..sub.len()].iter().sum()
    }

    /// The leaf objective (module docs) at `v` and its gradient into `grad`;
    /// `ev` is scratch of length `C`. With `ranks`, the leaf's rows are
    /// spread over them: its rows are in one process's order when taken rank
    /// after rank (every node keeps its rows in subsample order, which is
    /// the whole problem's row order, and each rank holds a block of it), so
    /// each rank continues the running sums (loss, product, weight,
    /// gradient: `C + 3` numbers, `buf` their scratch) from the previous
    /// rank's and the last rank's are shared ([`chain`]): every rank gets one
    /// process's value and gradient, bit for bit.
    #[allow(clippy::too_many_arguments)]
    fn objective_over(
        &self,
        ranks: Option<&dyn Collective>,
        rows: &[u32],
        l2: f64,
        v: &[f64],
        grad: &mut [f64],
        ev: &mut [f64],
        buf: &mut Vec<f64>,
    ) -> f64 {
        let Some(ranks) = ranks else { return self.objective(rows, l2, v, grad, ev) };
        buf.clear();
        buf.extend([0.0, 1.0, 0.0]);
        buf.resize(3 + grad.len(), 0.0);
        chain(ranks, buf, |acc| {
            let (state, g) = acc.split_at_mut(3);
            self.row_sums(rows, v, g, ev, state);
        });
        grad.copy_from_slice(&buf[3..]);
        finish_objective(buf[0] + buf[1].ln(), buf[2], l2, v, grad)
    }

    /// The leaf objective (module docs) at `v` and its gradient into `grad`;
    /// `ev` is scratch of length `C`.
    fn objective(&self, rows: &[u32], l2: f64, v: &[f64], grad: &mut [f64], ev: &mut [f64]) -> f64 {
        grad.fill(0.0);
        let mut state = [0.0, 1.0, 0.0];
        self.row_sums(rows, v, grad, ev, &mut state);
        let [loss, product, weight] = state;
        finish_objective(loss + product.ln(), weight, l2, v, grad)
    }

    /// Continues the objective's sums over the leaf's `rows` at `v`, row by
    /// row: `state` is `[loss, product, weight]` (`Σ w_k ℓ_k(v)` but for the
    /// logarithm of `product`, a running product of unit-weight rows' sums;
    /// `Σ w_k`), `grad` the gradient's sum. From `[0, 1, 0]` and zeros.
    fn row_sums(&self, rows: &[u32], v: &[f64], grad: &mut [f64], ev: &mut [f64], state: &mut [f64]) {
        let c = self.classes;
        let vmax = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        ev.iter_mut().zip(v).for_each(|(e, v)| *e = (v - vmax).exp());
        let [mut loss, mut product, mut weight] = [state[0], state[1], state[2]];
        // Σ ln(sum) over unit-weight rows as the log of a running product (each
        // `sum ≤ 1`, so it only shrinks): one logarithm per many rows.
        for &r in rows {
            let r = r as usize;
            let w = self.weights[r];
            if w == 0.0 {
                continue;
            }
            let label = self.labels[r];
            let q = &self.q[r * c..(r + 1) * c];
            let sum: f64 = q.iter().zip(ev.iter()).map(|(q, e)| q * e).sum();
            if sum > TINY_SUM {
                if w == 1.0 {
                    loss += self.loss[r] + vmax - v[label];
                    product *= sum;
                    if product < PRODUCT_FLUSH {
                        loss += product.ln();
                        product = 1.0;
                    }
                } else {
                    loss += w * (self.loss[r] + vmax + sum.ln() - v[label]);
                }
                let scale = w / sum;
                grad.iter_mut().zip(q.iter().zip(ev.iter())).for_each(|(g, (q, e))| *g += scale * q * e);
            } else {
                loss += w * self.exact_row(r, v, grad);
            }
            grad[label] -= w;
            weight += w;
        }
        state.copy_from_slice(&[loss, product, weight]);
    }

    /// Row `r`'s loss at `v` from `z` (when `q` underflows against `e^v`); adds
    /// `w softmax(z + v)` to `grad`.
    fn exact_row(&self, r: usize, v: &[f64], grad: &mut [f64]) -> f64 {
        let c = self.classes;
        let z = &self.z[r * c..(r + 1) * c];
        let max = z.iter().zip(v).map(|(z, v)| z + v).fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = z.iter().zip(v).map(|(z, v)| (z + v - max).exp()).sum();
        let w = self.weights[r];
        for ((g, z), v) in grad.iter_mut().zip(z).zip(v) {
            *g += w * (z + v - max).exp() / sum;
        }
        let label = self.labels[r];
        max + sum.ln() - z[label] - v[label]
    }

    /// One diagonal Newton step from `v = 0`:
    /// `v_y = −G_y / (H_yy + λ)` with `G, H` the gradient and diagonal Hessian
    /// of the leaf's loss (0 where `H_yy + λ = 0`). The classic gradient-boosting
    /// leaf value, used as the L-BFGS starting point.
    /// With `class` (a single-output tree of that class) only `v_class` is
    /// kept; the others are 0.
    /// With `ranks` (the leaf's rows spread over them), `G` and `H` are
    /// continued rank after rank in one process's row order ([`chain`], `2C`
    /// numbers): one process's values, bit for bit.
    pub(super) fn newton_leaf(
        &self,
        ranks: Option<&dyn Collective>,
        rows: &[u32],
        class: Option<usize>,
        l2: f64,
        out: &mut [f64],
        hess: &mut [f64],
    ) {
        let c = self.classes;
        out.fill(0.0);
        hess.fill(0.0);
        match ranks {
            None => self.newton_sums(rows, class, out, hess),
            Some(ranks) => {
                let mut sums = vec![0.0; 2 * c];
                chain(ranks, &mut sums, |acc| {
                    let (g, h) = acc.split_at_mut(c);
                    self.newton_sums(rows, class, g, h);
                });
                out.copy_from_slice(&sums[..c]);
                hess.copy_from_slice(&sums[c..]);
            }
        }
        for (v, h) in out.iter_mut().zip(hess.iter()) {
            let h = h + l2;
            *v = if h > 0.0 { -*v / h } else { 0.0 };
        }
    }

    /// Adds the leaf `rows`' gradient and diagonal Hessian sums (of `class`
    /// alone, with one) to `out` and `hess`, row by row.
    fn newton_sums(&self, rows: &[u32], class: Option<usize>, out: &mut [f64], hess: &mut [f64]) {
        let c = self.classes;
        let (first, last) = class.map_or((0, c), |y| (y, y + 1));
        for &r in rows {
            let r = r as usize;
            let w = self.weights[r];
            let q = &self.q[r * c + first..r * c + last];
            for (y, (&p, (g, h))) in
                (first..last).zip(q.iter().zip(out[first..last].iter_mut().zip(hess[first..last].iter_mut())))
            {
                *g += w * (p - if y == self.labels[r] { 1.0 } else { 0.0 });
                *h += w * p * (1.0 - p);
            }
        }
    }

    /// Re-fits the values of the leaf holding `rows` by L-BFGS (module docs),
    /// starting from the better of 0 and [`LeafData::newton_leaf`]; the result is
    /// never worse than `v = 0`. With `class` (a single-output tree of that
    /// class) only `v_class` is fitted and the others stay 0. With `ranks`,
    /// the leaf's rows are spread over them and every evaluation's sums are
    /// continued over the ranks in one process's order
    /// ([`LeafData::newton_leaf`], `objective_over`): every rank takes one
    /// process's L-BFGS steps.
    pub(super) fn refit_leaf(
        &self,
        ranks: Option<&dyn Collective>,
        rows: &[u32],
        class: Option<usize>,
        l2: f64,
        opts: &LbfgsOptions,
        out: &mut [f64],
    ) -> Result<(), OracleError> {
        let c = self.classes;
        let mut scratch = vec![0.0; 3 * c];
        let (grad, rest) = scratch.split_at_mut(c);
        let (ev, v) = rest.split_at_mut(c);
        let mut buf = Vec::new();
        self.newton_leaf(ranks, rows, class, l2, out, ev);
        v.fill(0.0);
        let at_zero = self.objective_over(ranks, rows, l2, v, grad, ev, &mut buf);
        let at_newton = self.objective_over(ranks, rows, l2, out, grad, ev, &mut buf);
        // Also falls back to 0 if the Newton point's objective is NaN.
        let newton_is_better = at_newton < at_zero;
        if !newton_is_better {
            out.fill(0.0);
        }
        match class {
            None => {
                lbfgs_minimize(|v, g| self.objective_over(ranks, rows, l2, v, g, ev, &mut buf), out, opts)?;
            }
            Some(y) => {
                let mut x = [out[y]];
                let one = |x: &[f64], g: &mut [f64]| {
                    v[y] = x[0];
                    let f = self.objective_over(ranks, rows, l2, v, grad, ev, &mut buf);
                    g[0] = grad[y];
                    f
                };
                lbfgs_minimize(one, &mut x, opts)?;
                out[y] = x[0];
            }
        }
        Ok(())
    }
}

/// The leaf objective from its sums over rows ([`LeafData::row_sums`]: `loss`,
/// `weight`, and the gradient in `grad`): the ridge added and everything
/// scaled by `1 / weight` (0, and the gradient left at 0, without weight).
fn finish_objective(loss: f64, weight: f64, l2: f64, v: &[f64], grad: &mut [f64]) -> f64 {
    if weight == 0.0 {
        return 0.0;
    }
    let scale = 1.0 / weight;
    let mut ridge = 0.0;
    for (g, vy) in grad.iter_mut().zip(v) {
        *g = scale * (*g + l2 * vy);
        ridge += vy * vy;
    }
    scale * (loss + 0.5 * l2 * ridge)
}
