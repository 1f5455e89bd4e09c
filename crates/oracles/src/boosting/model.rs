//! The boosted ensemble `g(φ, y) = Σ_t ν·t(φ)_y` with its trees in flat arrays.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::KIND;
use super::bins::{BinEdges, less};
use super::descent::Descent;
use super::tree::GrownTree;
use crate::{Features, Model, OracleError, check_model_shape, check_score_buffer};

/// Most rows per parallel task when scoring. A task walks all trees over its
/// rows, so its features stay in the L1 cache (about [`SCORE_CHUNK_BYTES`]) while
/// every tree is applied to them.
const SCORE_CHUNK_ROWS: usize = 256;

/// Feature bytes per scoring task (fewer rows for wide features).
const SCORE_CHUNK_BYTES: usize = 16 * 1024;

/// A fitted boosting ensemble `g(φ, y) = Σ_t ν·t(φ)_y` (ch. §1.9.4): a sum of
/// multi-output regression trees whose leaves hold `C`-vectors already multiplied
/// by the shrinkage `ν`.
///
/// Storage is flat: tree `t` owns internal nodes `node_offsets[t]..node_offsets[t+1]`
/// and leaves `leaf_offsets[t]..leaf_offsets[t+1]`. An internal node sends `φ`
/// left when `φ[feature] ≤ threshold`; a child `c ≥ 0` is the tree's internal node
/// `c`, a child `c < 0` its leaf `!c`; a tree without internal nodes is one leaf.
/// The invariants are checked when a model is loaded, so scoring never indexes
/// out of bounds or loops.
///
/// ```
/// use oracles::{Features, FitContext, Oracle, Problem};
/// let x: Vec<f64> = (0..40).map(|i| i as f64).collect();
/// let labels: Vec<usize> = (0..40).map(|i| usize::from(i >= 20)).collect();
/// let bias = vec![0.0; 80];
/// let p = Problem::new(Features::new(&x, 40, 1).unwrap(), &labels, &bias, 2, None).unwrap();
/// let oracle = oracles::boosting::BoostingOracle { rounds: 3, ..Default::default() };
/// let model = oracle.fit(&p, None, FitContext { seed: 0 }).unwrap();
/// let trees = model.as_any().downcast_ref::<oracles::boosting::BoostingModel>().unwrap().trees();
/// assert_eq!(trees, 3); // one tree per round, each leaf holding a score per class
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoostingModel {
    pub(super) dim: usize,
    pub(super) classes: usize,
    pub(super) node_offsets: Vec<u32>,
    pub(super) leaf_offsets: Vec<u32>,
    pub(super) feature: Vec<u32>,
    pub(super) threshold: Vec<f64>,
    pub(super) left: Vec<i32>,
    pub(super) right: Vec<i32>,
    /// `leaves × C`, row-major, shrinkage included.
    pub(super) leaf_values: Vec<f64>,
    /// Subsample rows each leaf was fitted on (a diagnostic, like a tree's "cover").
    pub(super) leaf_rows: Vec<u32>,
}

impl BoostingModel {
    /// The empty ensemble (`g = 0`) for `dim` features and `classes` classes.
    pub fn empty(dim: usize, classes: usize) -> Self {
        Self {
            dim,
            classes,
            node_offsets: vec![0],
            leaf_offsets: vec![0],
            feature: Vec::new(),
            threshold: Vec::new(),
            left: Vec::new(),
            right: Vec::new(),
            leaf_values: Vec::new(),
            leaf_rows: Vec::new(),
        }
    }

    /// Number of trees (boosting rounds done so far, over all fit calls).
    pub fn trees(&self) -> usize {
        self.node_offsets.len() - 1
    }

    /// Number of leaves of tree `t` (`None` past the last tree).
    pub fn tree_leaves(&self, t: usize) -> Option<usize> {
        (t < self.trees()).then(|| (self.leaf_offsets[t + 1] - self.leaf_offsets[t]) as usize)
    }

    /// Subsample rows each leaf of tree `t` was fitted on (`None` past the last tree).
    pub fn tree_leaf_rows(&self, t: usize) -> Option<&[u32]> {
        (t < self.trees()).then(|| &self.leaf_rows[self.leaf_offsets[t] as usize..self.leaf_offsets[t + 1] as usize])
    }

    /// Appends a grown tree whose leaf values (`leaves × C`, shrinkage included)
    /// are `values`; split bins become raw thresholds of `edges`.
    pub(super) fn push_tree(&mut self, tree: &GrownTree, edges: &BinEdges, values: &[f64]) {
        for n in 0..tree.feature.len() {
            let f = tree.feature[n];
            self.feature.push(f);
            self.threshold.push(edges.threshold(f as usize, usize::from(tree.split_bin[n])));
            self.left.push(tree.left[n]);
            self.right.push(tree.right[n]);
        }
        self.leaf_values.extend_from_slice(values);
        self.leaf_rows.extend(tree.leaf_counts.iter().map(|&n| n as u32));
        self.node_offsets.push(self.feature.len() as u32);
        self.leaf_offsets.push(self.leaf_rows.len() as u32);
    }

    /// Tree `t` compiled for branch-free descent.
    fn descent(&self, t: usize) -> Descent<f64> {
        let (n0, n1) = (self.node_offsets[t] as usize, self.node_offsets[t + 1] as usize);
        let leaves = (self.leaf_offsets[t + 1] - self.leaf_offsets[t]) as usize;
        let mut d = Descent::new();
        d.compile(
            &self.feature[n0..n1],
            |n| self.threshold[n0 + n],
            &self.left[n0..n1],
            &self.right[n0..n1],
            leaves,
            f64::INFINITY,
        );
        d
    }

    /// The ensemble as a step function of one feature, when every split of every
    /// tree is on that feature (as with `[value, 1]` features): scoring a row is
    /// then one search over the merged thresholds instead of one descent per tree.
    /// `None` if the trees split on different features.
    fn step_function(&self) -> Option<StepFunction> {
        let feature = self.feature.first().map_or(0, |&f| f as usize);
        if self.feature.iter().any(|&f| f as usize != feature) {
            return None;
        }
        let c = self.classes;
        // −0.0 splits like +0.0 and would break `less`.
        let normal = |t: f64| if t == 0.0 { 0.0 } else { t };
        let mut thresholds: Vec<f64> = self.threshold.iter().map(|&t| normal(t)).collect();
        thresholds.sort_unstable_by(f64::total_cmp);
        thresholds.dedup();
        let intervals = thresholds.len() + 1;
        // A value in interval i (i thresholds below it): thresholds[i], or +∞ in the last.
        let representative = |i: usize| thresholds.get(i).copied().unwrap_or(f64::INFINITY);
        let mut values = vec![0.0; intervals * c];
        let mut own = Vec::new();
        for t in 0..self.trees() {
            let descent = self.descent(t);
            let (n0, n1) = (self.node_offsets[t] as usize, self.node_offsets[t + 1] as usize);
            own.clear();
            own.extend(self.threshold[n0..n1].iter().map(|&t| normal(t)));
            own.sort_unstable_by(f64::total_cmp);
            let leaves = &self.leaf_values[self.leaf_offsets[t] as usize * c..self.leaf_offsets[t + 1] as usize * c];
            // Tree t is constant between its own thresholds; walk it once per own interval.
            let mut j = 0;
            let mut leaf = descent.walk(|_| own.first().copied().unwrap_or(f64::INFINITY));
            for (i, v) in values.chunks_mut(c).enumerate() {
                let x = representative(i);
                if j < own.len() && own[j] < x {
                    while j < own.len() && own[j] < x {
                        j += 1;
                    }
                    let x_own = own.get(j).copied().unwrap_or(f64::INFINITY);
                    leaf = descent.walk(|_| x_own);
                }
                v.iter_mut().zip(&leaves[leaf * c..(leaf + 1) * c]).for_each(|(v, l)| *v += l);
            }
        }
        let width = intervals.next_power_of_two() - 1;
        thresholds.resize(width, f64::INFINITY);
        Some(StepFunction { feature, thresholds, values })
    }

    /// Checks the storage invariants (type docs): offsets start at 0, never
    /// decrease and end at the table lengths; every tree has one more leaf than
    /// internal nodes; children point forward and stay inside their tree; every
    /// internal node but the root and every leaf is the child of exactly one
    /// node (so all are reached); features exist; values are finite and no
    /// score (a sum of one leaf per tree) can overflow. A model
    /// read from bytes that breaks one is [`OracleError::InvalidModel`] naming it.
    pub(super) fn check(&self) -> Result<(), OracleError> {
        let bad = |reason: String| OracleError::InvalidModel { kind: KIND.to_string(), reason };
        let nodes = self.feature.len();
        let leaves = self.leaf_rows.len();
        if self.classes == 0 {
            return Err(bad("0 classes".into()));
        }
        if self.threshold.len() != nodes || self.left.len() != nodes || self.right.len() != nodes {
            return Err(bad(format!(
                "{nodes} split features but {} thresholds, {} left and {} right children",
                self.threshold.len(),
                self.left.len(),
                self.right.len()
            )));
        }
        if Some(self.leaf_values.len()) != leaves.checked_mul(self.classes) {
            return Err(bad(format!(
                "{} leaf values for {leaves} leaves × {} classes",
                self.leaf_values.len(),
                self.classes
            )));
        }
        if self.node_offsets.len() != self.leaf_offsets.len() || self.node_offsets.is_empty() {
            return Err(bad(format!(
                "{} node offsets and {} leaf offsets (one more than the trees each)",
                self.node_offsets.len(),
                self.leaf_offsets.len()
            )));
        }
        for (what, offsets, total) in [("node", &self.node_offsets, nodes), ("leaf", &self.leaf_offsets, leaves)] {
            if offsets[0] != 0 || offsets.last().map(|&n| n as usize) != Some(total) {
                return Err(bad(format!("{what} offsets do not run from 0 to {total}")));
            }
            if let Some(t) = offsets.windows(2).position(|w| w[1] < w[0]) {
                return Err(bad(format!("{what} offsets decrease at tree {t}")));
            }
        }
        if let Some(i) = self.leaf_values.iter().position(|v| !v.is_finite()) {
            return Err(bad(format!("leaf value {i} is {}", self.leaf_values[i])));
        }
        if let Some(n) = self.threshold.iter().position(|v| v.is_nan()) {
            return Err(bad(format!("threshold of node {n} is NaN")));
        }
        // A score adds one leaf per tree: bounded by the sum of each tree's largest |value|.
        let bound: f64 = (0..self.trees())
            .map(|t| {
                let values = &self.leaf_values
                    [self.leaf_offsets[t] as usize * self.classes..self.leaf_offsets[t + 1] as usize * self.classes];
                values.iter().fold(0.0f64, |m, v| m.max(v.abs()))
            })
            .sum();
        if !bound.is_finite() {
            return Err(bad("the leaf values of the trees add up beyond the largest double".into()));
        }
        let mut referenced = Vec::new();
        for t in 0..self.trees() {
            let (n0, n1) = (self.node_offsets[t] as usize, self.node_offsets[t + 1] as usize);
            let (l0, l1) = (self.leaf_offsets[t] as usize, self.leaf_offsets[t + 1] as usize);
            let (internal, tree_leaves) = (n1 - n0, l1 - l0);
            let tree = |reason: String| bad(format!("tree {t}: {reason}"));
            // A binary tree has one more leaf than internal nodes.
            if tree_leaves != internal + 1 {
                return Err(tree(format!("{internal} internal nodes but {tree_leaves} leaves")));
            }
            // References to internal nodes 0..internal, then to leaves.
            referenced.clear();
            referenced.resize(internal + tree_leaves, 0u8);
            for n in 0..internal {
                if self.feature[n0 + n] as usize >= self.dim {
                    return Err(tree(format!("node {n} splits on feature {} of {}", self.feature[n0 + n], self.dim)));
                }
                for child in [self.left[n0 + n], self.right[n0 + n]] {
                    // Children point forward (no cycles) and stay inside the tree.
                    let slot = if child >= 0 {
                        let c = child as usize;
                        (c > n && c < internal).then_some(c)
                    } else {
                        let l = !child as usize;
                        (l < tree_leaves).then_some(internal + l)
                    };
                    let slot = slot.ok_or_else(|| tree(format!("node {n} has child {child} outside the tree")))?;
                    referenced[slot] = referenced[slot].saturating_add(1);
                }
            }
            // Slot 0 is the root: node 0, or the one leaf of a tree without nodes.
            for (slot, &count) in referenced.iter().enumerate() {
                let expected = u8::from(slot != 0);
                if count != expected {
                    let what =
                        if slot < internal { format!("node {slot}") } else { format!("leaf {}", slot - internal) };
                    return Err(tree(format!("{what} is the child of {count} nodes (expected {expected})")));
                }
            }
        }
        Ok(())
    }
}

/// A one-feature ensemble as a step function ([`BoostingModel::step_function`]).
#[derive(Debug)]
struct StepFunction {
    feature: usize,
    /// Sorted distinct thresholds, padded with `+∞` to `2^k − 1` entries.
    thresholds: Vec<f64>,
    /// The ensemble's `C` scores on each interval (`i` thresholds below the value).
    values: Vec<f64>,
}

impl StepFunction {
    /// The interval of `x`: how many thresholds are below it.
    #[inline]
    fn interval(&self, x: f64) -> usize {
        let mut step = self.thresholds.len().div_ceil(2);
        let mut i = 0;
        while step > 0 {
            i += step * less(self.thresholds[i + step - 1], x);
            step /= 2;
        }
        i
    }
}

impl BoostingModel {
    /// Adds trees `trees`' leaf values to every row's scores in `out`
    /// (row-major `rows × classes`; zeroed first if `from_zero`), tree after
    /// tree in order: from zero and with every tree, [`Model::score`]'s
    /// `g = Σ_t f_t` as a left fold. Rows in chunks of about
    /// [`SCORE_CHUNK_BYTES`] of features, in parallel.
    fn add_trees(&self, trees: std::ops::Range<usize>, features: Features<'_>, out: &mut [f64], from_zero: bool) {
        let c = self.classes;
        let descents: Vec<Descent<f64>> = trees.clone().map(|t| self.descent(t)).collect();
        let chunk_rows = (SCORE_CHUNK_BYTES / (8 * self.dim.max(1))).clamp(8, SCORE_CHUNK_ROWS);
        out.par_chunks_mut(chunk_rows * c).enumerate().for_each(|(chunk, o)| {
            if from_zero {
                o.fill(0.0);
            }
            let start = chunk * chunk_rows;
            let rows = o.len() / c;
            let x = features.slice_rows(start, start + rows);
            let mut leaf = [0u32; SCORE_CHUNK_ROWS];
            for (t, descent) in trees.clone().zip(&descents) {
                let values =
                    &self.leaf_values[self.leaf_offsets[t] as usize * c..self.leaf_offsets[t + 1] as usize * c];
                descent.leaves(x.as_slice(), self.dim, &mut leaf[..rows]);
                for (o, &l) in o.chunks_mut(c).zip(&leaf) {
                    let l = l as usize;
                    o.iter_mut().zip(&values[l * c..(l + 1) * c]).for_each(|(o, v)| *o += v);
                }
            }
        });
    }

    /// Whether this ensemble's first trees are `previous`'s, to the bit (so
    /// that its scores are `previous`'s plus those of the trees after them).
    fn grows_from(&self, previous: &BoostingModel) -> bool {
        let (trees, c) = (previous.trees(), self.classes);
        if (self.dim, c) != (previous.dim, previous.classes) || trees > self.trees() {
            return false;
        }
        let (nodes, leaves) = (previous.node_offsets[trees] as usize, previous.leaf_offsets[trees] as usize);
        let same_bits =
            |a: &[f64], b: &[f64]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        self.node_offsets[..=trees] == previous.node_offsets[..]
            && self.leaf_offsets[..=trees] == previous.leaf_offsets[..]
            && self.feature[..nodes] == previous.feature[..]
            && same_bits(&self.threshold[..nodes], &previous.threshold)
            && self.left[..nodes] == previous.left[..]
            && self.right[..nodes] == previous.right[..]
            && same_bits(&self.leaf_values[..leaves * c], &previous.leaf_values)
    }
}

impl Model for BoostingModel {
    crate::impl_model_plumbing!(KIND);

    fn dim(&self) -> usize {
        self.dim
    }

    fn classes(&self) -> usize {
        self.classes
    }

    /// Continues `previous`'s scores when this ensemble grew from it
    /// (its first trees are `previous`'s, bit for bit): only the trees after
    /// them are walked, and the scores equal [`Model::score`]'s bit for bit
    /// (either way a left fold over the trees from zero).
    fn score_continuing(
        &self,
        previous: &dyn Model,
        features: Features<'_>,
        out: &mut [f64],
    ) -> Result<bool, OracleError> {
        let Some(previous) = previous.as_any().downcast_ref::<BoostingModel>() else {
            return Ok(false);
        };
        if !self.grows_from(previous) {
            return Ok(false);
        }
        check_model_shape(self, features.dim(), self.classes)?;
        check_score_buffer(features, self.classes, out)?;
        self.add_trees(previous.trees()..self.trees(), features, out, false);
        Ok(true)
    }

    fn score(&self, features: Features<'_>, out: &mut [f64]) -> Result<(), OracleError> {
        check_model_shape(self, features.dim(), self.classes)?;
        check_score_buffer(features, self.classes, out)?;
        let c = self.classes;
        if let Some(step) = self.step_function() {
            out.par_chunks_mut(SCORE_CHUNK_ROWS * c).enumerate().for_each(|(chunk, o)| {
                let start = chunk * SCORE_CHUNK_ROWS;
                for (k, o) in o.chunks_mut(c).enumerate() {
                    let i = if self.dim == 0 { 0 } else { step.interval(features.row(start + k)[step.feature]) };
                    o.copy_from_slice(&step.values[i * c..(i + 1) * c]);
                }
            });
            return Ok(());
        }
        self.add_trees(0..self.trees(), features, out, true);
        Ok(())
    }
}
