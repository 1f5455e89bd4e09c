//! Quantile bins of the input features, computed once per fit call, so that a
//! split search is a scan over at most 256 histogram bins (docs/MATH.md §5: split search
//! "by sorting … or histograms").
//!
//! Bin `b` of feature `f` holds the values `x` with exactly `b` thresholds below
//! them, `b = #{t ∈ thresholds_f : t < x}`. Thresholds are strictly increasing,
//! so `bin(x) ≤ j ⟺ x ≤ thresholds_f[j]`: a split found on bins is the split
//! `x ≤ thresholds_f[j]` on raw values, and the fitted model needs no bins.

use rayon::prelude::*;

use crate::Features;

/// Rows of the sample the thresholds are computed from (all rows if fewer).
pub(super) const BIN_SAMPLE_ROWS: usize = 50_000;

/// Rows per parallel task when binning all rows.
const BIN_CHUNK_ROWS: usize = 4096;

/// Per-feature thresholds, padded with `+∞` to `2^k − 1` entries so that a
/// bin is found by `k` branch-free halvings.
#[derive(Debug, Clone)]
pub(super) struct BinEdges {
    /// Padded thresholds of every feature, concatenated.
    padded: Vec<f64>,
    /// Start of each feature's padded thresholds in `padded` (`dim + 1` entries).
    offsets: Vec<usize>,
    /// Real (unpadded) threshold count of each feature; its bins are `0..=count`.
    counts: Vec<usize>,
}

impl BinEdges {
    /// Thresholds of every feature from the values of the `sample` rows, at most
    /// `max_bins` bins per feature (`2 ≤ max_bins ≤ 256`). A constant feature gets
    /// no threshold (one bin), so it is never split on.
    pub(super) fn fit(features: Features<'_>, sample: &[usize], max_bins: usize) -> Self {
        let per_feature: Vec<Vec<f64>> = (0..features.dim())
            .into_par_iter()
            .map(|f| {
                let mut values: Vec<f64> = sample.iter().map(|&k| features.row(k)[f]).collect();
                values.sort_unstable_by(f64::total_cmp);
                quantile_thresholds(&values, max_bins)
            })
            .collect();
        let mut padded = Vec::new();
        let mut offsets = vec![0];
        let mut counts = Vec::with_capacity(per_feature.len());
        for t in &per_feature {
            let width = (t.len() + 1).next_power_of_two() - 1;
            padded.extend_from_slice(t);
            padded.resize(padded.len() + width - t.len(), f64::INFINITY);
            offsets.push(padded.len());
            counts.push(t.len());
        }
        Self { padded, offsets, counts }
    }

    /// Number of bins of feature `f` (1 for a constant feature).
    pub(super) fn bins(&self, f: usize) -> usize {
        self.counts[f] + 1
    }

    /// The largest bin count over all features.
    pub(super) fn max_bins(&self) -> usize {
        self.counts.iter().map(|c| c + 1).max().unwrap_or(1)
    }

    /// Threshold `j` of feature `f`: bins `0..=j` hold exactly the values `≤` it.
    pub(super) fn threshold(&self, f: usize, j: usize) -> f64 {
        self.padded[self.offsets[f] + j]
    }

    /// Bin of value `x` of feature `f`.
    #[inline]
    pub(super) fn bin(&self, f: usize, x: f64) -> u8 {
        let t = &self.padded[self.offsets[f]..self.offsets[f + 1]];
        let mut step = t.len().div_ceil(2);
        let mut i = 0;
        while step > 0 {
            i += step * less(t[i + step - 1], x);
            step /= 2;
        }
        // At most 255 thresholds, hence at most 255 after the count.
        i as u8
    }

    /// Bins every row of `features` into `out` (row-major `rows × dim`).
    pub(super) fn bin_rows(&self, features: Features<'_>, out: &mut Vec<u8>) {
        let dim = features.dim();
        out.clear();
        out.resize(features.rows() * dim, 0);
        if dim == 0 {
            return;
        }
        out.par_chunks_mut(BIN_CHUNK_ROWS * dim).enumerate().for_each(|(chunk, bins)| {
            let x = &features.as_slice()[chunk * BIN_CHUNK_ROWS * dim..];
            for (b, x) in bins.chunks_mut(dim).zip(x.chunks(dim)) {
                for (f, (b, &x)) in b.iter_mut().zip(x).enumerate() {
                    *b = self.bin(f, x);
                }
            }
        });
    }
}

/// `1` if `t < x`, else `0`, without a branch (a compiled comparison becomes a
/// jump that mispredicts half the time in a binary search): the sign of `t − x`.
/// Exact for finite `x` and finite or `+∞` thresholds that are not `−0.0`
/// (`t − x` is zero only when `t = x`, and keeps its sign on overflow).
#[inline]
pub(super) fn less(t: f64, x: f64) -> usize {
    ((t - x).to_bits() >> 63) as usize
}

/// A threshold strictly between `a < b` (their midpoint, or `a` when the
/// midpoint rounds to `b`), so that `a` falls left and `b` right of it; never `−0.0`.
fn split_point(a: f64, b: f64) -> f64 {
    let mid = (0.5 * a + 0.5 * b).max(a);
    let t = if mid < b { mid } else { a };
    // −0.0 would break [`less`] for `x = +0.0`; `+0.0` splits the same values.
    if t == 0.0 { 0.0 } else { t }
}

/// Strictly increasing thresholds for the sorted `values`, at most `max_bins − 1`
/// of them. Every distinct value gets its own bin when there are at most
/// `max_bins` distinct values; otherwise bins are filled greedily to about equal
/// counts, and a value whose count alone reaches the target gets a bin of its own,
/// so ties never straddle a threshold.
fn quantile_thresholds(values: &[f64], max_bins: usize) -> Vec<f64> {
    let mut distinct: Vec<(f64, usize)> = Vec::new();
    for &v in values {
        match distinct.last_mut() {
            Some((last, count)) if *last == v => *count += 1,
            _ => distinct.push((v, 1)),
        }
    }
    let mut thresholds = Vec::new();
    if distinct.len() <= max_bins {
        thresholds.extend(distinct.windows(2).map(|w| split_point(w[0].0, w[1].0)));
        return thresholds;
    }
    let mut rest = values.len();
    let mut bins_left = max_bins;
    let mut filled = 0;
    for i in 0..distinct.len() - 1 {
        filled += distinct[i].1;
        let target = rest as f64 / bins_left as f64;
        if filled as f64 >= target || distinct[i + 1].1 as f64 >= target {
            thresholds.push(split_point(distinct[i].0, distinct[i + 1].0));
            rest -= filled;
            filled = 0;
            bins_left -= 1;
            if bins_left == 1 {
                break;
            }
        }
    }
    thresholds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edges_of(column: &[f64], max_bins: usize) -> BinEdges {
        let f = Features::new(column, column.len(), 1).unwrap();
        let sample: Vec<usize> = (0..column.len()).collect();
        BinEdges::fit(f, &sample, max_bins)
    }

    #[test]
    fn bins_agree_with_thresholds_on_raw_values() {
        let column: Vec<f64> = (0..1000).map(|i| ((i * 7919) % 1000) as f64 * 0.37 - 50.0).collect();
        for max_bins in [2, 3, 16, 255, 256] {
            let e = edges_of(&column, max_bins);
            assert!(e.bins(0) <= max_bins && e.bins(0) >= 2);
            for &x in &column {
                let b = e.bin(0, x) as usize;
                assert!(b < e.bins(0));
                for j in 0..e.bins(0) - 1 {
                    assert_eq!(b <= j, x <= e.threshold(0, j), "x {x} bin {b} threshold {j}");
                }
            }
        }
    }

    #[test]
    fn constant_feature_has_one_bin_and_ties_stay_together() {
        let e = edges_of(&[1.0; 50], 256);
        assert_eq!(e.bins(0), 1);
        assert_eq!(e.bin(0, 1.0), 0);
        // 90% zeros, then 400 distinct values: zero is one bin, the rest share the others.
        let mut column = vec![0.0; 3600];
        column.extend((1..=400).map(f64::from));
        let e = edges_of(&column, 16);
        assert!(e.bins(0) <= 16);
        assert_eq!(e.bin(0, 0.0), 0);
        assert_eq!(e.bin(0, 1.0), 1);
        assert!(e.bins(0) >= 10, "only {} bins", e.bins(0));
    }

    proptest::proptest! {
        #[test]
        fn bins_agree_with_thresholds_on_any_column(
            column in proptest::collection::vec(
                proptest::prop_oneof![-1e6..1e6f64, proptest::sample::select(vec![0.0, -0.0, 1.0, -2.5])],
                1..400,
            ),
            max_bins in 2usize..=256,
        ) {
            let e = edges_of(&column, max_bins);
            proptest::prop_assert!(e.bins(0) <= max_bins);
            for &x in &column {
                let b = e.bin(0, x) as usize;
                for j in 0..e.bins(0) - 1 {
                    proptest::prop_assert_eq!(b <= j, x <= e.threshold(0, j));
                }
            }
        }
    }

    #[test]
    fn few_distinct_values_get_one_bin_each() {
        let e = edges_of(&[3.0, 1.0, 2.0, 1.0, 3.0], 256);
        assert_eq!(e.bins(0), 3);
        assert_eq!([e.bin(0, 1.0), e.bin(0, 2.0), e.bin(0, 3.0)], [0, 1, 2]);
        assert_eq!(e.bin(0, -10.0), 0);
        assert_eq!(e.bin(0, 10.0), 2);
    }
}
