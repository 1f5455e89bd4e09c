//! The forward and backward passes over a chunk of rows held value-major
//! ([`Rows`]), the row losses between them, and the two entry points that
//! run them in the best kernel build for this CPU: the gradient of a
//! minibatch chunk ([`gradient_rows`]) and the scores and loss of a range
//! of rows ([`evaluate_rows`]).

use fastmath::Arith;

#[cfg(doc)]
use super::EVAL_ROWS;
use super::dispatch::{Kernels, dispatch};
use super::kernels::{dz_rows, lanes, splat, tile_sums};
use super::layout::{Layout, Net, NetMut};
use super::{BLOCK, TILE};
use crate::{Features, Problem, problem::row_losses};

/// Scratch for up to `stride` rows. Each array is value-major: entry
/// `j · stride + r` holds value `j` (input, hidden unit or class) of row `r`,
/// so the values of consecutive rows are contiguous (the forward pass's vector
/// lanes) and each value's row is one contiguous slice (the backward pass's sums).
pub(super) struct Rows {
    /// Rows the arrays hold, whole blocks of [`BLOCK`].
    pub(super) stride: usize,
    /// Inputs `φ` (zero in the padding rows of a short last block).
    pub(super) x: Vec<f64>,
    /// Hidden activations `t = tanh(V φ + c)`.
    pub(super) t: Vec<f64>,
    /// Scores `s = W t + a`.
    pub(super) s: Vec<f64>,
    /// `∂ℓ/∂s` (zero in padding rows).
    pub(super) g: Vec<f64>,
    /// `∂ℓ/∂t`, then `∂ℓ/∂(V φ + c)`.
    pub(super) dz: Vec<f64>,
    /// `g` of the tiled classes row by row: `[class tile][row]`, `TILE` classes each.
    pub(super) g_rows: Vec<[f64; TILE]>,
    /// `dz` row by row: `[hidden tile][row]`, `TILE` units each.
    pub(super) dz_rows: Vec<[f64; TILE]>,
    /// One block's scores, biases and `∂ℓ/∂s` as [`row_losses`] takes them
    /// (`[class]`, one lane per row).
    pub(super) s_block: Vec<Lanes>,
    pub(super) b_block: Vec<Lanes>,
    pub(super) g_block: Vec<Lanes>,
    /// One row's (computed) bias.
    pub(super) row_b: Vec<f64>,
    /// Two columns of `W` (two hidden units' weights in every class).
    pub(super) w_cols: Vec<[f64; 2]>,
}

/// One value per row of a block.
pub(super) type Lanes = [f64; BLOCK];

impl Rows {
    /// Scratch for `rows` rows (rounded up to whole blocks).
    pub(super) fn new(layout: Layout, rows: usize) -> Self {
        let (hp, c) = (layout.padded_hidden(), layout.classes);
        let stride = rows.max(1).div_ceil(BLOCK) * BLOCK;
        Self {
            stride,
            x: vec![0.0; layout.dim * stride],
            t: vec![0.0; hp * stride],
            s: vec![0.0; c * stride],
            g: vec![0.0; c * stride],
            dz: vec![0.0; hp * stride],
            g_rows: vec![[0.0; TILE]; layout.tiled_classes() / TILE * stride],
            dz_rows: vec![[0.0; TILE]; hp / TILE * stride],
            s_block: vec![[0.0; BLOCK]; c],
            b_block: vec![[0.0; BLOCK]; c],
            g_block: vec![[0.0; BLOCK]; c],
            row_b: vec![0.0; c],
            w_cols: vec![[0.0; 2]; c],
        }
    }

    /// Loads rows `rows` (at most `stride`) into the columns of `x` and zeroes
    /// the padding up to a whole block; returns the columns in use.
    #[inline(always)]
    pub(super) fn gather(&mut self, features: Features<'_>, rows: impl ExactSizeIterator<Item = usize>) -> usize {
        let (n, st) = (rows.len(), self.stride);
        let used = n.div_ceil(BLOCK) * BLOCK;
        for (r, k) in rows.enumerate() {
            for (xi, &v) in self.x.chunks_exact_mut(st).zip(features.row(k)) {
                xi[r] = v;
            }
        }
        for xi in self.x.chunks_exact_mut(st) {
            xi[n..used].fill(0.0);
        }
        used
    }

    /// The loss terms `scale · w_k ℓ_k` of the block of columns at `r0`, which
    /// holds rows `rows` (at most [`BLOCK`]; [`row_losses`] lane by lane), and
    /// with `GRAD` their gradients `∂/∂s` in the block's columns of `g` (zero
    /// in padding columns).
    #[inline(always)]
    pub(super) fn block_losses<const GRAD: bool>(
        &mut self,
        problem: &Problem<'_>,
        r0: usize,
        rows: impl ExactSizeIterator<Item = usize>,
        scale: f64,
    ) -> Lanes {
        let st = self.stride;
        for (sb, sy) in self.s_block.iter_mut().zip(self.s.chunks_exact(st)) {
            *sb = lanes(sy, r0);
        }
        let n = rows.len();
        let (mut labels, mut weights) = ([0; BLOCK], [0.0; BLOCK]);
        for (r, k) in rows.enumerate() {
            for (bb, &v) in self.b_block.iter_mut().zip(problem.bias_row(k, &mut self.row_b)) {
                bb[r] = v;
            }
            (labels[r], weights[r]) = (problem.labels()[k], problem.weight(k) * scale);
        }
        for bb in &mut self.b_block {
            bb[n..].fill(0.0);
        }
        let grad = if GRAD { Some(self.g_block.as_mut_slice()) } else { None };
        let losses = row_losses(&self.s_block, &self.b_block, &labels, &weights, n, grad);
        if GRAD {
            for (gy, gb) in self.g.chunks_exact_mut(st).zip(&self.g_block) {
                gy[r0..r0 + BLOCK].copy_from_slice(gb);
            }
        }
        losses
    }
}

impl Net<'_> {
    /// Where `W[y][j]` (class `y`, hidden unit `j`) is in the packed `w`: in
    /// tile `y / TILE` at `j · TILE + y % TILE` for the tiled classes, in
    /// class-major rows after them for the others.
    #[inline(always)]
    pub(super) fn w_index(&self, y: usize, j: usize) -> usize {
        if y < self.tiled {
            (y / TILE) * self.hp * TILE + j * TILE + y % TILE
        } else {
            self.tiled * self.hp + (y - self.tiled) * self.hp + j
        }
    }

    /// Forward pass of rows `0..used` (whole blocks): `t = tanh(V φ + c)`,
    /// `s = W t + a`, 16 rows (four blocks) at a time, then a pair of blocks
    /// and a last block. Each row is computed by the same sequence of
    /// operations whatever the other rows hold, so a row's scores do not
    /// depend on the rows beside it.
    ///
    /// Groups of 16 rows take their hidden units' `tanh` while the sums are
    /// in registers; the rows after them, in a pass of their own. The caller's
    /// `ahead(step, steps)` runs at `steps` points spread over the pass (after
    /// each tile of hidden units of each group), `step = 0..steps`.
    #[inline(always)]
    pub(super) fn forward<K: Kernels>(&self, b: &mut Rows, used: usize, mut ahead: impl FnMut(usize, usize)) {
        const WIDE: usize = 4 * BLOCK;
        let wide = used / WIDE * WIDE;
        let pairs = wide + (used - wide) / (2 * BLOCK) * (2 * BLOCK);
        let (st, tiles) = (b.stride, self.hp / TILE);
        let steps = wide / WIDE * tiles;
        for (group, r0) in (0..wide).step_by(WIDE).enumerate() {
            for (u, tu) in b.t.chunks_exact_mut(TILE * st).enumerate() {
                K::tile_sums_16::<true>(self.hidden_start(u), self.hidden_tile(u), &b.x, st, r0, tu);
                ahead(group * tiles + u, steps);
            }
        }
        if steps == 0 {
            ahead(0, 1);
        }
        if wide < pairs {
            self.hidden_sums::<K::A, true>(b, wide);
        }
        if pairs < used {
            self.hidden_sums::<K::A, false>(b, pairs);
        }
        for tj in b.t.chunks_exact_mut(st) {
            K::tanh_slice(&mut tj[wide..used]);
        }
        for r0 in (0..wide).step_by(WIDE) {
            self.output_sums_16::<K>(b, r0);
        }
        if wide < pairs {
            self.output_sums::<K::A, true>(b, wide);
        }
        if pairs < used {
            self.output_sums::<K::A, false>(b, pairs);
        }
    }

    /// The starting values `c` of the hidden units of tile `u` (zeros without biases).
    #[inline(always)]
    pub(super) fn hidden_start(&self, u: usize) -> [f64; TILE] {
        match self.c.get(u * TILE..(u + 1) * TILE) {
            Some(c) => lanes(c, 0),
            None => [0.0; TILE],
        }
    }

    /// The weights of `V` of the hidden units of tile `u`, input by input.
    #[inline(always)]
    pub(super) fn hidden_tile(&self, u: usize) -> &[f64] {
        // By index, not `chunks_exact(dim · TILE)`: with 0 features the tile has no weights.
        let tile_v = self.dim * TILE;
        &self.v[u * tile_v..(u + 1) * tile_v]
    }

    /// `t = V φ + c` (before the tanh) of the block of rows at `r0` and, if
    /// `PAIR`, of the next block too, each block a vector of [`BLOCK`] lanes
    /// ([`tile_sums`] per tile of hidden units).
    #[inline(always)]
    pub(super) fn hidden_sums<A: Arith, const PAIR: bool>(&self, b: &mut Rows, r0: usize) {
        let st = b.stride;
        for (u, tu) in b.t.chunks_exact_mut(TILE * st).enumerate() {
            let start = self.hidden_start(u);
            tile_sums::<A, PAIR>(splat(|q| start[q]), self.hidden_tile(u), &b.x, st, r0, tu);
        }
    }

    /// `s = W t + a` of the block of rows at `r0` and, if `PAIR`, of the next
    /// (as [`Net::hidden_sums`]).
    #[inline(always)]
    pub(super) fn output_sums<A: Arith, const PAIR: bool>(&self, b: &mut Rows, r0: usize) {
        let (st, hp) = (b.stride, self.hp);
        let (w_tiled, s_tiled) = (&self.w[..self.tiled * hp], &mut b.s[..self.tiled * st]);
        for (g, (wg, sg)) in w_tiled.chunks_exact(hp * TILE).zip(s_tiled.chunks_exact_mut(TILE * st)).enumerate() {
            let start = self.output_start(g);
            tile_sums::<A, PAIR>(splat(|k| start[k]), wg, &b.t, st, r0, sg);
        }
        self.single_output_sums::<A, PAIR>(b, r0);
    }

    /// [`Net::output_sums`] of the 16 rows at `r0` ([`Kernels::tile_sums_16`]).
    #[inline(always)]
    pub(super) fn output_sums_16<K: Kernels>(&self, b: &mut Rows, r0: usize) {
        let (st, hp) = (b.stride, self.hp);
        let (w_tiled, s_tiled) = (&self.w[..self.tiled * hp], &mut b.s[..self.tiled * st]);
        for (g, (wg, sg)) in w_tiled.chunks_exact(hp * TILE).zip(s_tiled.chunks_exact_mut(TILE * st)).enumerate() {
            K::tile_sums_16::<false>(self.output_start(g), wg, &b.t, st, r0, sg);
        }
        self.single_output_sums::<K::A, true>(b, r0);
        self.single_output_sums::<K::A, true>(b, r0 + 2 * BLOCK);
    }

    /// The starting values `a` of the classes of tile `g` (zeros without biases).
    #[inline(always)]
    pub(super) fn output_start(&self, g: usize) -> [f64; TILE] {
        let mut start = [0.0; TILE];
        for (k, s) in start.iter_mut().enumerate() {
            *s = self.a.get(g * TILE + k).copied().unwrap_or(0.0);
        }
        start
    }

    /// The scores of the classes beyond the whole tiles, one by one, of the
    /// block of rows at `r0` and, if `PAIR`, of the next.
    #[inline(always)]
    pub(super) fn single_output_sums<A: Arith, const PAIR: bool>(&self, b: &mut Rows, r0: usize) {
        let (st, hp) = (b.stride, self.hp);
        let r1 = r0 + BLOCK;
        let bias = |y: usize| self.a.get(y).copied().unwrap_or(0.0);
        let w_single = &self.w[self.tiled * hp..];
        let s_single = &mut b.s[self.tiled * st..];
        for (y, (wy, sy)) in w_single.chunks_exact(hp).zip(s_single.chunks_exact_mut(st)).enumerate() {
            let (mut a0, mut a1) = ([bias(self.tiled + y); BLOCK], [bias(self.tiled + y); BLOCK]);
            for (&wj, tj) in wy.iter().zip(b.t.chunks_exact(st)) {
                let (t0, t1) = (lanes::<BLOCK>(tj, r0), lanes::<BLOCK>(tj, if PAIR { r1 } else { r0 }));
                for r in 0..BLOCK {
                    a0[r] = A::madd(wj, t0[r], a0[r]);
                    if PAIR {
                        a1[r] = A::madd(wj, t1[r], a1[r]);
                    }
                }
            }
            sy[r0..r1].copy_from_slice(&a0);
            if PAIR {
                sy[r1..r1 + BLOCK].copy_from_slice(&a1);
            }
        }
    }

    /// Backward pass of rows `0..used` after [`Net::forward`], with `b.g =
    /// ∂ℓ/∂s`: adds the gradient of the rows' loss to `grad`. Every gradient
    /// entry receives its rows' terms one row at a time in row order; the
    /// biases' terms are summed per block of [`BLOCK`] rows first.
    #[inline(always)]
    pub(super) fn backward<K: Kernels>(&self, b: &mut Rows, used: usize, grad: &mut NetMut<'_>) {
        let (st, hp) = (b.stride, self.hp);
        for (ay, gy) in grad.a.iter_mut().zip(b.g.chunks_exact(st)) {
            for block in gy[..used].chunks_exact(BLOCK) {
                *ay += block.iter().sum::<f64>();
            }
        }
        // dz = ∂ℓ/∂(Vφ + c) = Wᵀ g ⊙ (1 − t²): per pair of hidden units (`hp`
        // is even), their columns of `W` in class order, then four blocks of
        // rows at a time (eight sums in flight per lane), each row's terms in
        // class order, then the factor.
        let wide = used / (4 * BLOCK) * (4 * BLOCK);
        for j in (0..hp).step_by(2) {
            for (y, wy) in b.w_cols.iter_mut().enumerate() {
                *wy = [self.w[self.w_index(y, j)], self.w[self.w_index(y, j + 1)]];
            }
            let (dz, t) = (&mut b.dz[j * st..(j + 2) * st], &b.t[j * st..(j + 2) * st]);
            for r0 in (0..wide).step_by(4 * BLOCK) {
                dz_rows::<K::A, { 4 * BLOCK }>(&b.w_cols, &b.g, st, r0, t, dz);
            }
            for r0 in (wide..used).step_by(BLOCK) {
                dz_rows::<K::A, BLOCK>(&b.w_cols, &b.g, st, r0, t, dz);
            }
        }
        // ∂ℓ/∂W: the tiled classes through their rows, the others one by one.
        let (gw_tiled, gw_single) = grad.w.split_at_mut(self.tiled * hp);
        let (g_tiled, g_single) = b.g.split_at(self.tiled * st);
        K::rows_of_tiles(g_tiled, st, used, &mut b.g_rows);
        K::outer_sums_tiles(gw_tiled, &b.t, st, &b.g_rows, used);
        for (gwy, gy) in gw_single.chunks_exact_mut(hp).zip(g_single.chunks_exact(st)) {
            for (gwj, tj) in gwy.iter_mut().zip(b.t.chunks_exact(st)) {
                for (&t, &gv) in tj[..used].iter().zip(&gy[..used]) {
                    *gwj = K::A::madd(t, gv, *gwj);
                }
            }
        }
        for (cj, dzj) in grad.c.iter_mut().zip(b.dz.chunks_exact(st)) {
            for block in dzj[..used].chunks_exact(BLOCK) {
                *cj += block.iter().sum::<f64>();
            }
        }
        K::rows_of_tiles(&b.dz, st, used, &mut b.dz_rows);
        K::outer_sums_tiles(grad.v, &b.x, st, &b.dz_rows, used);
    }
}

/// Writes into `grad` (packed) the gradient of `scale · Σ_{k∈rows} w_k ℓ_k`
/// (`rows` at most `b.stride`), prefetching the rows `ahead` meanwhile.
pub(super) fn gradient_rows(
    net: &Net<'_>,
    problem: &Problem<'_>,
    rows: &[usize],
    ahead: &[usize],
    scale: f64,
    b: &mut Rows,
    grad: &mut NetMut<'_>,
) {
    dispatch!(gradient_kernel, (net: &Net<'_>, problem: &Problem<'_>, rows: &[usize], ahead: &[usize], scale: f64, b: &mut Rows, grad: &mut NetMut<'_>) -> ());
    dispatched(net, problem, rows, ahead, scale, b, grad)
}

/// [`gradient_rows`] in the arithmetic `A`.
#[inline(always)]
pub(super) fn gradient_kernel<K: Kernels>(
    net: &Net<'_>,
    problem: &Problem<'_>,
    rows: &[usize],
    ahead: &[usize],
    scale: f64,
    b: &mut Rows,
    grad: &mut NetMut<'_>,
) {
    let used = b.gather(problem.features(), rows.iter().copied());
    // The rows ahead: their pages looked up all at once (the lookups overlap),
    // then their lines spread over the forward pass (all at once, they held
    // up the loop that issued them until the memory answered).
    for &k in ahead {
        problem.prefetch_row_start(k);
    }
    let n = ahead.len();
    net.forward::<K>(b, used, |step, steps| {
        for &k in &ahead[step * n / steps..(step + 1) * n / steps] {
            problem.prefetch_row_rest(k);
        }
    });
    for (n, block) in rows.chunks(BLOCK).enumerate() {
        b.block_losses::<true>(problem, n * BLOCK, block.iter().copied(), scale);
    }
    net.backward::<K>(b, used, grad);
}

/// The rows `start..end` of `features` through the network, [`EVAL_ROWS`] at
/// a time: their scores into `scores` (row-major, `(end − start) × classes`)
/// if given, and with `problem` (whose features these are) `sum` plus their
/// loss terms `Σ_k w_k ℓ_k`, added onto it row by row in row order (`sum`
/// without), so that a sum over rows may continue from another call's.
pub(super) fn evaluate_rows(
    net: &Net<'_>,
    features: Features<'_>,
    problem: Option<&Problem<'_>>,
    (start, end): (usize, usize),
    b: &mut Rows,
    scores: Option<&mut [f64]>,
    sum: f64,
) -> f64 {
    #[inline(always)]
    fn generic<K: Kernels>(
        net: &Net<'_>,
        features: Features<'_>,
        problem: Option<&Problem<'_>>,
        (start, end): (usize, usize),
        b: &mut Rows,
        mut scores: Option<&mut [f64]>,
        mut sum: f64,
    ) -> f64 {
        let (c, st) = (b.row_b.len(), b.stride);
        for k0 in (start..end).step_by(st) {
            let k1 = (k0 + st).min(end);
            let used = b.gather(features, k0..k1);
            // The next step's rows load meanwhile (read in order, but the
            // CPU's own prefetching does not run far enough ahead).
            let next = k1..(k1 + st).min(end);
            net.forward::<K>(b, used, |step, steps| {
                let n = next.len();
                for k in next.start + step * n / steps..next.start + (step + 1) * n / steps {
                    features.prefetch_row(k);
                }
            });
            if let Some(out) = scores.as_deref_mut() {
                for (r, row) in out[(k0 - start) * c..(k1 - start) * c].chunks_exact_mut(c).enumerate() {
                    for (v, s) in row.iter_mut().zip(b.s.chunks_exact(st)) {
                        *v = s[r];
                    }
                }
            }
            let Some(problem) = problem else { continue };
            for r0 in (0..k1 - k0).step_by(BLOCK) {
                let block = k0 + r0..(k0 + r0 + BLOCK).min(k1);
                let n = block.len();
                // Row by row into the running sum, as the loss's summation order says.
                for loss in &b.block_losses::<false>(problem, r0, block, 1.0)[..n] {
                    sum += loss;
                }
            }
        }
        sum
    }
    dispatch!(generic, (net: &Net<'_>, features: Features<'_>, problem: Option<&Problem<'_>>, rows: (usize, usize), b: &mut Rows, scores: Option<&mut [f64]>, sum: f64) -> f64);
    dispatched(net, features, problem, (start, end), b, scores, sum)
}
