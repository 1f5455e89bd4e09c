//! Induction of one multi-output regression tree on the gradient vectors of a
//! subsample (ch. §1.9.4, step 2): greedy least-squares splits on the
//! `C`-dimensional vectors `g_k`, found on histograms of binned features.
//!
//! For a node with weighted gradient sum `G = Σ_k w_k g̃_k` and weight
//! `W = Σ_k w_k` (`g̃_k` the unweighted gradient), the best constant fit is
//! `G / W` and it lowers the squared error by `‖G‖² / W`; a split into
//! children `L`, `R` therefore gains `‖G_L‖²/W_L + ‖G_R‖²/W_R − ‖G‖²/W`
//! (with unit weights: `Σ_children ‖Σ g‖² / count`, the chapter's criterion).
//!
//! With the Newton gain ([`super::SplitGain::Newton`]) the rows also carry
//! their diagonal Hessians `h_k(y) = w_k q_k(y)(1 − q_k(y))`; a node's best
//! diagonal Newton step `v_y = −G_y/(H_y + λ)` lowers the second-order model
//! of the loss (with the leaf ridge `(λ/2)‖v‖²`) by `½ Σ_y G_y²/(H_y + λ)`, so a
//! split gains `Σ_y [G_{L,y}²/(H_{L,y} + λ) + G_{R,y}²/(H_{R,y} + λ) − G_y²/(H_y + λ)]`
//! (the ½ dropped): XGBoost's and LightGBM's criterion, summed over the outputs
//! of one multi-output tree.
//!
//! Constraints (ch.): a split must leave at least `min_child` rows in each
//! child, and a node with fewer than `min_split` rows is not split. Nodes are
//! split best gain first, so an optional leaf budget keeps the best splits;
//! without one the tree equals the recursive one.

use rayon::prelude::*;

use super::bins::BinEdges;
use super::{SplitGain, chain};
use crate::Collective;

/// Below this many (row, feature) pairs a histogram is built on one thread.
const PARALLEL_HISTOGRAM_WORK: usize = 16_384;

/// The subsample of one round as the tree sees it.
pub(super) struct Sample<'a> {
    /// Binned features, column-major `dim × rows`.
    pub bins: &'a [u8],
    /// Per row `[w g̃(0), …, w g̃(C−1), (h(0), …, h(C−1),) (w,) 1]`
    /// ([`stats_width`] values): the weighted gradient, with the Newton gain
    /// the weighted diagonal Hessian, the weight (only for a weighted problem:
    /// with unit weights a node's weight is its count) and a count, so one
    /// histogram update is one slice add.
    pub stats: &'a [f64],
    /// Rows of the subsample (this rank's, when distributed).
    pub rows: usize,
    /// The ranks holding the rest of the subsample, when the rows are spread
    /// over several (`None` in one process): the root's totals and each
    /// node's histogram are then continued rank after rank in one process's
    /// row order (`chain`), so that every rank holds one process's sums bit
    /// for bit and grows one process's tree.
    pub ranks: Option<&'a dyn Collective>,
}

/// Values per row of [`Sample::stats`] for `classes` outputs under `gain`,
/// with a weight column if the problem is `weighted`.
pub(super) fn stats_width(classes: usize, gain: SplitGain, weighted: bool) -> usize {
    let count = 1 + usize::from(weighted);
    match gain {
        SplitGain::LeastSquares => classes + count,
        SplitGain::Newton => 2 * classes + count,
    }
}

/// Split constraints in rows of the subsample.
#[derive(Debug, Clone, Copy)]
pub(super) struct TreeLimits {
    /// Least rows in each child of a split.
    pub min_child: usize,
    /// Least rows in a node for it to be split.
    pub min_split: usize,
    /// Most levels below the root (`usize::MAX`: none): a node at depth `d` may be
    /// split only if `d < max_depth`.
    pub max_depth: usize,
    /// Most leaves (`usize::MAX`: none).
    pub max_leaves: usize,
}

/// A grown tree: internal nodes as flat arrays and the subsample rows of each leaf.
///
/// Children are encoded as in the model: `c ≥ 0` is internal node `c`, `c < 0` is
/// leaf `!c`. A tree without internal nodes is the single leaf 0.
#[derive(Debug, Default)]
pub(super) struct GrownTree {
    /// Split feature of each internal node.
    pub feature: Vec<u32>,
    /// Split bin of each internal node: rows with `bin ≤ split_bin` go left.
    pub split_bin: Vec<u8>,
    /// Left child of each internal node.
    pub left: Vec<i32>,
    /// Right child of each internal node.
    pub right: Vec<i32>,
    /// Subsample rows grouped by leaf; leaf `l` holds `order[leaf_ranges[l]]`.
    pub order: Vec<u32>,
    /// `(start, end)` of each leaf in `order`.
    pub leaf_ranges: Vec<(usize, usize)>,
    /// Subsample rows of each leaf, over every rank (`end − start` in one process).
    pub leaf_counts: Vec<usize>,
}

/// Where a pending leaf hangs in the tree.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Root,
    Left(usize),
    Right(usize),
}

/// The best split of a node.
#[derive(Debug, Clone, Copy)]
struct Split {
    feature: usize,
    bin: usize,
    gain: f64,
}

/// A node while the tree grows: a leaf, possibly to be split later.
#[derive(Debug)]
struct Pending {
    start: usize,
    end: usize,
    depth: usize,
    slot: Slot,
    /// Its best split and its histogram, kept while it may still be split.
    split: Option<(Split, Vec<f64>)>,
    /// Whether it has been split (then it is an internal node, not a leaf).
    internal: bool,
}

/// Grows trees, reusing its buffers from one round to the next.
#[derive(Debug)]
pub(super) struct TreeBuilder {
    classes: usize,
    gain: SplitGain,
    /// The ridge `λ` of the Newton gain.
    l2: f64,
    /// Values per row of the statistics ([`stats_width`]): `C` gradients,
    /// `C` Hessians with the Newton gain, a weight if weighted, and a count.
    stride: usize,
    /// Where a node's weight is in its statistics: the count's column when
    /// the problem has unit weights (the two sums are the same numbers).
    weight_column: usize,
    /// Bins of each feature.
    bins: Vec<usize>,
    /// Values per feature block of a histogram: `max_bins × stride`.
    feature_stride: usize,
    /// Features with at least two bins (the others cannot be split on).
    active: usize,
    pool: Vec<Vec<f64>>,
    pending: Vec<Pending>,
    /// `stride` totals (as in [`Sample::stats`]) of each pending node.
    totals: Vec<f64>,
    scratch: Vec<u32>,
    /// The statistics of a node's rows in the node's row order (see
    /// [`TreeBuilder::build_histogram`]).
    ordered: Vec<f64>,
    left_sum: Vec<f64>,
    /// The tree of the last [`TreeBuilder::grow`].
    pub tree: GrownTree,
}

impl TreeBuilder {
    /// A builder for `classes` outputs over features binned by `edges`, scoring
    /// splits by `gain` (with ridge `l2` for the Newton gain), on statistics
    /// with a weight column if `weighted` ([`stats_width`]).
    pub(super) fn new(edges: &BinEdges, dim: usize, classes: usize, gain: SplitGain, weighted: bool, l2: f64) -> Self {
        let bins: Vec<usize> = (0..dim).map(|f| edges.bins(f)).collect();
        let active = bins.iter().filter(|&&b| b > 1).count();
        let stride = stats_width(classes, gain, weighted);
        Self {
            classes,
            gain,
            l2,
            stride,
            weight_column: if weighted { stride - 2 } else { stride - 1 },
            feature_stride: edges.max_bins() * stride,
            bins,
            active,
            pool: Vec::new(),
            pending: Vec::new(),
            totals: Vec::new(),
            scratch: Vec::new(),
            ordered: Vec::new(),
            left_sum: vec![0.0; stride],
            tree: GrownTree::default(),
        }
    }

    /// Grows a tree on `sample` under `limits` into [`TreeBuilder::tree`].
    pub(super) fn grow(&mut self, sample: &Sample<'_>, limits: &TreeLimits) {
        let stride = self.stride;
        let tree = &mut self.tree;
        tree.feature.clear();
        tree.split_bin.clear();
        tree.left.clear();
        tree.right.clear();
        tree.leaf_ranges.clear();
        tree.leaf_counts.clear();
        tree.order.clear();
        tree.order.extend(0..sample.rows as u32);
        self.pending.clear();
        self.totals.clear();
        self.totals.resize(stride, 0.0);
        let totals = &mut self.totals;
        let add_rows = |totals: &mut [f64]| {
            for s in sample.stats.chunks(stride) {
                totals.iter_mut().zip(s).for_each(|(t, v)| *t += v);
            }
        };
        match sample.ranks {
            None => add_rows(totals),
            Some(ranks) => chain(ranks, totals, add_rows),
        }
        self.push_pending(sample, limits, 0, sample.rows, 0, Slot::Root, None);

        let mut leaves = 1;
        while leaves < limits.max_leaves {
            let mut best: Option<(usize, f64)> = None;
            for (i, p) in self.pending.iter().enumerate() {
                if let Some((s, _)) = &p.split
                    && best.is_none_or(|(_, g)| s.gain > g)
                {
                    best = Some((i, s.gain));
                }
            }
            let Some((i, _)) = best else { break };
            self.split_node(sample, limits, i);
            leaves += 1;
        }

        for (i, p) in self.pending.iter_mut().enumerate() {
            if let Some((_, h)) = p.split.take() {
                self.pool.push(h);
            }
            if p.internal {
                continue;
            }
            let leaf = !(self.tree.leaf_ranges.len() as i32);
            match p.slot {
                Slot::Root => {}
                Slot::Left(n) => self.tree.left[n] = leaf,
                Slot::Right(n) => self.tree.right[n] = leaf,
            }
            self.tree.leaf_ranges.push((p.start, p.end));
            let count = node_count(sample, &self.totals, stride, i, p.start, p.end);
            self.tree.leaf_counts.push(count);
        }
    }

    /// Splits pending node `i` on its best split, creating its two children.
    fn split_node(&mut self, sample: &Sample<'_>, limits: &TreeLimits, i: usize) {
        let stride = self.stride;
        let (start, end, depth, slot) = {
            let p = &self.pending[i];
            (p.start, p.end, p.depth, p.slot)
        };
        let Some((split, mut parent_hist)) = self.pending[i].split.take() else { return };
        self.pending[i].internal = true;

        // Stable partition of the node's rows: bin ≤ split bin goes left.
        let column = &sample.bins[split.feature * sample.rows..(split.feature + 1) * sample.rows];
        let rows = &mut self.tree.order[start..end];
        self.scratch.clear();
        let mut mid = start;
        for k in 0..rows.len() {
            let r = rows[k];
            if column[r as usize] as usize <= split.bin {
                rows[mid - start] = r;
                mid += 1;
            } else {
                self.scratch.push(r);
            }
        }
        rows[mid - start..].copy_from_slice(&self.scratch);

        let node = self.tree.feature.len();
        self.tree.feature.push(split.feature as u32);
        self.tree.split_bin.push(split.bin as u8);
        self.tree.left.push(0);
        self.tree.right.push(0);
        match slot {
            Slot::Root => {}
            Slot::Left(n) => self.tree.left[n] = node as i32,
            Slot::Right(n) => self.tree.right[n] = node as i32,
        }

        // The children's totals: the split feature's bins up to the split bin, and the rest.
        let block = &parent_hist[split.feature * self.feature_stride..];
        self.left_sum.fill(0.0);
        for h in block[..(split.bin + 1) * stride].chunks(stride) {
            self.left_sum.iter_mut().zip(h).for_each(|(l, h)| *l += h);
        }
        let parent_totals = i * stride;
        for j in 0..stride {
            let right = self.totals[parent_totals + j] - self.left_sum[j];
            self.totals.push(self.left_sum[j]);
            self.left_sum[j] = right;
        }
        self.totals.extend_from_slice(&self.left_sum);

        // Histogram of the smaller child by a pass over its rows; the larger
        // child's by subtraction from the parent's. (Sizes over every rank:
        // the children's totals, the last two pushed.)
        let children = self.totals.len() / stride - 2;
        let left_count = node_count(sample, &self.totals, stride, children, start, mid);
        let right_count = node_count(sample, &self.totals, stride, children + 1, mid, end);
        let left_small = left_count <= right_count;
        let (small, small_count, large_count) =
            if left_small { ((start, mid), left_count, right_count) } else { ((mid, end), right_count, left_count) };
        let splittable = |n: usize| n >= limits.min_split && n >= 2 * limits.min_child && depth + 1 < limits.max_depth;
        let small_splittable = splittable(small_count);
        let large_splittable = splittable(large_count);
        let mut small_hist = None;
        let mut large_hist = None;
        if small_splittable || large_splittable {
            let mut h = self.take_histogram();
            self.node_histogram(sample, small.0..small.1, &mut h);
            if large_splittable {
                self.subtract(&mut parent_hist, &h);
                large_hist = Some(parent_hist);
            } else {
                self.pool.push(parent_hist);
            }
            if small_splittable {
                small_hist = Some(h);
            } else {
                self.pool.push(h);
            }
        } else {
            self.pool.push(parent_hist);
        }
        let (left_hist, right_hist) = if left_small { (small_hist, large_hist) } else { (large_hist, small_hist) };
        self.push_pending(sample, limits, start, mid, depth + 1, Slot::Left(node), left_hist);
        self.push_pending(sample, limits, mid, end, depth + 1, Slot::Right(node), right_hist);
    }

    /// A histogram buffer from the pool (or a new one).
    fn take_histogram(&mut self) -> Vec<f64> {
        let mut h = self.pool.pop().unwrap_or_default();
        h.resize(self.bins.len() * self.feature_stride, 0.0);
        h
    }

    /// Adds a pending leaf over `order[start..end]`, whose totals were pushed last
    /// onto `totals`, with its best split if it may be split. `hist` is its
    /// histogram when known (built here otherwise).
    #[allow(clippy::too_many_arguments)]
    fn push_pending(
        &mut self,
        sample: &Sample<'_>,
        limits: &TreeLimits,
        start: usize,
        end: usize,
        depth: usize,
        slot: Slot,
        hist: Option<Vec<f64>>,
    ) {
        let index = self.pending.len();
        let n = node_count(sample, &self.totals, self.stride, index, start, end);
        let may_split =
            self.active > 0 && n >= limits.min_split && n >= 2 * limits.min_child && depth < limits.max_depth;
        let mut split = None;
        if may_split {
            let h = match hist {
                Some(h) => h,
                None => {
                    let mut h = self.take_histogram();
                    self.node_histogram(sample, start..end, &mut h);
                    h
                }
            };
            match self.best_split(&h, index, limits) {
                Some(s) => split = Some((s, h)),
                None => self.pool.push(h),
            }
        } else if let Some(h) = hist {
            self.pool.push(h);
        }
        self.pending.push(Pending { start, end, depth, slot, split, internal: false });
    }

    /// Histogram of the node over `tree.order[range]`: per feature and bin, the
    /// sums of [`Sample::stats`], each bin's rows added in the node's row order.
    /// The rows' statistics are first copied out in that order, so that each
    /// feature's pass reads them in sequence instead of at random once per
    /// feature (LightGBM's "ordered gradients"). With `fresh`, the bins in
    /// use start at 0; without, the rows are added to the sums `hist` holds.
    fn build_histogram(&mut self, sample: &Sample<'_>, range: std::ops::Range<usize>, hist: &mut [f64], fresh: bool) {
        let stride = self.stride;
        let rows = &self.tree.order[range];
        self.ordered.clear();
        for &r in rows {
            let r = r as usize;
            self.ordered.extend_from_slice(&sample.stats[r * stride..(r + 1) * stride]);
        }
        let ordered = &self.ordered;
        let fill = |(f, block): (usize, &mut [f64])| {
            let bins = self.bins[f];
            if bins < 2 {
                return;
            }
            let block = &mut block[..bins * stride];
            if fresh {
                block.fill(0.0);
            }
            let column = &sample.bins[f * sample.rows..(f + 1) * sample.rows];
            match stride {
                // One output: Newton's `[g, h, (w,) 1]`, least squares' `[g, (w,) 1]`.
                4 => accumulate::<4>(block, column, rows, ordered),
                3 => accumulate::<3>(block, column, rows, ordered),
                2 => accumulate::<2>(block, column, rows, ordered),
                _ => {
                    for (&r, s) in rows.iter().zip(ordered.chunks_exact(stride)) {
                        let b = column[r as usize] as usize;
                        block[b * stride..(b + 1) * stride].iter_mut().zip(s).for_each(|(h, v)| *h += v);
                    }
                }
            }
        };
        if rows.len() * self.active >= PARALLEL_HISTOGRAM_WORK {
            hist.par_chunks_mut(self.feature_stride).enumerate().for_each(fill);
        } else {
            hist.chunks_mut(self.feature_stride).enumerate().for_each(fill);
        }
    }

    /// The histogram of the node over `tree.order[range]`
    /// ([`TreeBuilder::build_histogram`]); over ranks, the whole node's:
    /// each rank continues the previous rank's histogram with its rows and
    /// the last one's is shared (`chain`, of the bins in use of the features
    /// with at least two, `Σ_f bins_f × stride` numbers), one process's
    /// histogram bit for bit.
    fn node_histogram(&mut self, sample: &Sample<'_>, range: std::ops::Range<usize>, hist: &mut [f64]) {
        let Some(ranks) = sample.ranks else {
            return self.build_histogram(sample, range, hist, true);
        };
        let stride = self.stride;
        let feature_stride = self.feature_stride;
        let bins = self.bins.clone();
        let used = |f: usize| if bins[f] > 1 { bins[f] * stride } else { 0 };
        let mut packed = vec![0.0; (0..bins.len()).map(used).sum()];
        chain(ranks, &mut packed, |acc| {
            copy_used(hist, feature_stride, &used, acc, true);
            self.build_histogram(sample, range, hist, false);
            copy_used(hist, feature_stride, &used, acc, false);
        });
        copy_used(hist, feature_stride, &used, &mut packed, true);
    }

    /// `parent −= child`, over the bins in use.
    fn subtract(&self, parent: &mut [f64], child: &[f64]) {
        let stride = self.stride;
        for (f, (p, c)) in parent.chunks_mut(self.feature_stride).zip(child.chunks(self.feature_stride)).enumerate() {
            let used = self.bins[f] * stride;
            if self.bins[f] > 1 {
                p[..used].iter_mut().zip(&c[..used]).for_each(|(p, c)| *p -= c);
            }
        }
    }

    /// The split of largest gain (first one on ties) allowed by `limits`, for
    /// pending node `index` with histogram `hist`; `None` if no split gains.
    fn best_split(&mut self, hist: &[f64], index: usize, limits: &TreeLimits) -> Option<Split> {
        let c = self.classes;
        let stride = self.stride;
        let (w, n) = (self.weight_column, stride - 1);
        let total = &self.totals[index * stride..(index + 1) * stride];
        let (weight, count) = (total[w], total[n]);
        let min_child = limits.min_child as f64;
        let (gain_kind, l2) = (self.gain, self.l2);
        // What fitting a node gains: the decrease of the squared error (least
        // squares) or twice that of the loss's second-order model (Newton);
        // `stats(j)` is the node's `j`-th total.
        let term = |stats: &dyn Fn(usize) -> f64, weight: f64| match gain_kind {
            SplitGain::LeastSquares => (0..c).map(|y| stats(y) * stats(y)).sum::<f64>() / weight,
            SplitGain::Newton => newton_term(c, l2, stats),
        };
        let parent_term = if weight > 0.0 { term(&|j| total[j], weight) } else { 0.0 };
        let mut best: Option<Split> = None;
        if c == 1 {
            let scan = SingleScan { weight, count, min_child, parent_term, gain: gain_kind, l2, weight_column: w };
            for (f, block) in hist.chunks(self.feature_stride).enumerate() {
                let bins = self.bins[f];
                if bins >= 2 {
                    match stride {
                        4 => scan.feature::<4>(f, &block[..bins * 4], total, &mut best),
                        3 => scan.feature::<3>(f, &block[..bins * 3], total, &mut best),
                        _ => scan.feature::<2>(f, &block[..bins * 2], total, &mut best),
                    }
                }
            }
            return best;
        }
        for (f, block) in hist.chunks(self.feature_stride).enumerate() {
            let bins = self.bins[f];
            if bins < 2 {
                continue;
            }
            self.left_sum.fill(0.0);
            for j in 0..bins - 1 {
                let h = &block[j * stride..(j + 1) * stride];
                // An empty bin leaves the partition of the previous threshold.
                if h[n] == 0.0 {
                    continue;
                }
                self.left_sum.iter_mut().zip(h).for_each(|(l, h)| *l += h);
                let left_count = self.left_sum[n];
                if left_count < min_child {
                    continue;
                }
                if count - left_count < min_child {
                    break;
                }
                let left_weight = self.left_sum[w];
                let right_weight = weight - left_weight;
                if left_weight <= 0.0 || right_weight <= 0.0 {
                    continue;
                }
                let left = &self.left_sum;
                let (left_term, right_term) = match gain_kind {
                    // The chapter's criterion in one pass over the classes.
                    SplitGain::LeastSquares => {
                        let (mut left_sq, mut right_sq) = (0.0, 0.0);
                        for (t, l) in total[..c].iter().zip(&left[..c]) {
                            left_sq += l * l;
                            right_sq += (t - l) * (t - l);
                        }
                        (left_sq / left_weight, right_sq / right_weight)
                    }
                    // Generic, not through `term`'s `dyn Fn`: this runs for every bin.
                    SplitGain::Newton => (newton_term(c, l2, |j| left[j]), newton_term(c, l2, |j| total[j] - left[j])),
                };
                let gain = left_term + right_term - parent_term;
                // Rounding leaves a gain of ±ε·terms when no split helps.
                if gain > 1e-12 * (left_term + right_term) && best.is_none_or(|b| gain > b.gain) {
                    best = Some(Split { feature: f, bin: j, gain });
                }
            }
        }
        best
    }
}

/// The split search of a single-output tree's node ([`TreeBuilder::best_split`]
/// with one class): the same sums, gains and comparisons, with a bin's `S`
/// statistics (`[g, (h,) (w,) 1]`) and their running left sums in registers
/// instead of the general loop's buffer, whose store and reload each bin
/// lengthened the loop-carried chain of additions.
struct SingleScan {
    weight: f64,
    count: f64,
    min_child: f64,
    parent_term: f64,
    gain: SplitGain,
    l2: f64,
    weight_column: usize,
}

impl SingleScan {
    /// Scans the thresholds of feature `f` (histogram `block`, `S` values per
    /// bin; node totals `total`), updating `best` like the general loop.
    #[inline(always)]
    fn feature<const S: usize>(&self, f: usize, block: &[f64], total: &[f64], best: &mut Option<Split>) {
        let (bins, _) = block.as_chunks::<S>();
        let total: [f64; S] = std::array::from_fn(|k| total[k]);
        let (n, w) = (S - 1, self.weight_column);
        let mut left = [0.0f64; S];
        for (j, h) in bins[..bins.len() - 1].iter().enumerate() {
            // An empty bin leaves the partition of the previous threshold.
            if h[n] == 0.0 {
                continue;
            }
            for k in 0..S {
                left[k] += h[k];
            }
            let left_count = left[n];
            if left_count < self.min_child {
                continue;
            }
            if self.count - left_count < self.min_child {
                break;
            }
            let left_weight = left[w];
            let right_weight = self.weight - left_weight;
            if left_weight <= 0.0 || right_weight <= 0.0 {
                continue;
            }
            let (left_term, right_term) = match self.gain {
                SplitGain::LeastSquares => {
                    let right = total[0] - left[0];
                    (left[0] * left[0] / left_weight, right * right / right_weight)
                }
                SplitGain::Newton => {
                    (newton_term(1, self.l2, |k| left[k]), newton_term(1, self.l2, |k| total[k] - left[k]))
                }
            };
            let gain = left_term + right_term - self.parent_term;
            // Rounding leaves a gain of ±ε·terms when no split helps.
            if gain > 1e-12 * (left_term + right_term) && best.is_none_or(|b| gain > b.gain) {
                *best = Some(Split { feature: f, bin: j, gain });
            }
        }
    }
}

/// Adds each row's `S` statistics (`ordered`, in the order of `rows`) to the
/// bin of `block` its `column` entry names: the general loop of
/// [`TreeBuilder::build_histogram`] with the stride a constant, so a row's
/// update is one fixed-size add (the same additions in the same order).
#[inline(always)]
fn accumulate<const S: usize>(block: &mut [f64], column: &[u8], rows: &[u32], ordered: &[f64]) {
    let (block, _) = block.as_chunks_mut::<S>();
    let (ordered, _) = ordered.as_chunks::<S>();
    for (&r, s) in rows.iter().zip(ordered) {
        let h = &mut block[usize::from(column[r as usize])];
        for k in 0..S {
            h[k] += s[k];
        }
    }
}

/// Copies the bins in use (`used(f)` values of feature `f`'s block of
/// `feature_stride`) between a histogram and their packed sequence: into
/// `hist` with `unpack`, else into `packed`.
fn copy_used(hist: &mut [f64], feature_stride: usize, used: &dyn Fn(usize) -> usize, packed: &mut [f64], unpack: bool) {
    let mut at = 0;
    for (f, block) in hist.chunks_mut(feature_stride).enumerate() {
        let n = used(f);
        let (h, p) = (&mut block[..n], &mut packed[at..at + n]);
        if unpack {
            h.copy_from_slice(p)
        } else {
            p.copy_from_slice(h)
        }
        at += n;
    }
}

/// Rows of pending node `index` (rows `start..end` of the tree's order): over
/// every rank, from its totals' count column, when the subsample is spread
/// over ranks; `end − start` in one process (the same number).
fn node_count(sample: &Sample<'_>, totals: &[f64], stride: usize, index: usize, start: usize, end: usize) -> usize {
    match sample.ranks {
        // A sum of ones: exact.
        Some(_) => totals[(index + 1) * stride - 1] as usize,
        None => end - start,
    }
}

/// The Newton gain term `Σ_y G_y² / (H_y + λ)` of a node whose `j`-th total
/// is `stats(j)` (`G` the first `c`, `H` the next `c`; a class with
/// `H_y + λ ≤ 0` adds nothing).
#[inline(always)]
fn newton_term(c: usize, l2: f64, stats: impl Fn(usize) -> f64) -> f64 {
    (0..c)
        .map(|y| {
            let h = stats(c + y) + l2;
            if h > 0.0 { stats(y) * stats(y) / h } else { 0.0 }
        })
        .sum()
}
