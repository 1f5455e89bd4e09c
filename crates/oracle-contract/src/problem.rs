//! The biased multiclass logistic regression problem (docs/MATH.md §4, Eq. 11/13).
//!
//! For rows `k = 1..n` with features `φ_k ∈ R^d`, labels `y_k ∈ 0..C`, a fixed
//! per-row, per-class bias `b_k(y)` and optional weights `w_k ≥ 0`, an oracle
//! minimises over its function class
//!
//! ```text
//! L(g) = Σ_k w_k [ log Σ_y exp(g(φ_k, y) + b_k(y)) − g(φ_k, y_k) − b_k(y_k) ].
//! ```
//!
//! A bias of `−∞` marks a class that is impossible for that row (a hard
//! constraint); the bias of the row's own label must be finite.

use crate::{Collective, OracleError, SingleProcess};
use fastmath::{Plain, exp_nonpos, ln_pos};

/// A dense, row-major `rows × dim` feature matrix borrowed from the caller.
///
/// ```
/// let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
/// let f = oracles::Features::new(&x, 3, 2).unwrap(); // 3 rows of 2 features, row-major
/// assert_eq!(f.row(1), &[3.0, 4.0]);
/// assert!(oracles::Features::new(&x, 4, 2).is_err());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Features<'a> {
    data: &'a [f64],
    rows: usize,
    dim: usize,
}

impl<'a> Features<'a> {
    /// Wraps `data` as `rows × dim`, checking the length and that every value is finite.
    ///
    /// ```
    /// let f = oracles::Features::new(&[1.0, 2.0, 3.0, 4.0], 2, 2).unwrap();
    /// assert_eq!(f.row(1), &[3.0, 4.0]);
    /// assert!(oracles::Features::new(&[f64::NAN], 1, 1).is_err());
    /// ```
    pub fn new(data: &'a [f64], rows: usize, dim: usize) -> Result<Self, OracleError> {
        if rows.checked_mul(dim) != Some(data.len()) {
            return Err(OracleError::FeatureShape { len: data.len(), rows, dim });
        }
        if let Some(pos) = first_beyond_max_magnitude(data) {
            let (row, col, value) = (pos / dim.max(1), pos % dim.max(1), data[pos]);
            return Err(if value.is_finite() {
                OracleError::FeatureTooLarge { row, col, value }
            } else {
                OracleError::NonFiniteFeature { row, col, value }
            });
        }
        Ok(Self { data, rows, dim })
    }

    /// Number of rows `n`.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Features per row `d`.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Row `k`, i.e. `φ_k`.
    #[inline]
    pub fn row(&self, k: usize) -> &'a [f64] {
        &self.data[k * self.dim..(k + 1) * self.dim]
    }

    /// [`Problem::prefetch_row_start`] and [`Problem::prefetch_row_rest`] of
    /// the features alone: asks the CPU to start loading row `k` (a hint only).
    #[inline(always)]
    #[doc(hidden)]
    pub fn prefetch_row(&self, k: usize) {
        prefetch(self.row(k));
    }

    /// The whole row-major buffer.
    pub fn as_slice(&self) -> &'a [f64] {
        self.data
    }

    /// Rows `start..end` as a feature matrix of their own.
    ///
    /// # Panics
    /// If `start > end` or `end` exceeds [`Features::rows`] (like slicing).
    pub fn slice_rows(&self, start: usize, end: usize) -> Features<'a> {
        assert!(start <= end && end <= self.rows, "rows {start}..{end} of a matrix of {} rows", self.rows);
        Features { data: &self.data[start * self.dim..end * self.dim], rows: end - start, dim: self.dim }
    }
}

/// The position of the first value that is NaN or beyond ±[`crate::MAX_MAGNITUDE`]
/// (infinities included). Checked a block at a time without early exits,
/// so that the comparisons vectorise (a trainer wraps every example's rows
/// in every pass); the position is searched only in a block that fails.
fn first_beyond_max_magnitude(data: &[f64]) -> Option<usize> {
    const BLOCK: usize = 256;
    // `|v| <= MAX` is false for NaN as well.
    let fine = |v: &f64| v.abs() <= crate::MAX_MAGNITUDE;
    let (b, block) =
        data.chunks(BLOCK).enumerate().find(|(_, block)| !block.iter().fold(true, |ok, v| ok & fine(v)))?;
    block.iter().position(|v| !fine(v)).map(|i| b * BLOCK + i)
}

/// Biases computed row by row instead of stored: for problems whose
/// `rows × classes` bias array would be as large as the rest of the caller's
/// state (Algorithm 1's pairwise types), the caller derives `b_k(·)` on demand
/// from what it keeps anyway (the messages). See [`Problem::with_bias_rows`].
///
/// `write_row` must be a pure function of `k`: oracles may ask for a row any
/// number of times, from any thread, in any order.
///
/// ```
/// use oracles::{BiasRows, Features, Problem};
/// #[derive(Debug)]
/// struct Alternating; // b_k = (0, k mod 2)
/// impl BiasRows for Alternating {
///     fn write_row(&self, k: usize, out: &mut [f64]) {
///         out[0] = 0.0;
///         out[1] = (k % 2) as f64;
///     }
/// }
/// let x = [0.0; 3];
/// let p = Problem::with_bias_rows(Features::new(&x, 3, 1).unwrap(), &[0, 1, 1], &Alternating, 2, None).unwrap();
/// let mut scratch = [0.0; 2];
/// assert_eq!(p.bias_row(1, &mut scratch), &[0.0, 1.0]);
/// ```
pub trait BiasRows: Sync + std::fmt::Debug {
    /// Writes `b_k(y)` for every class `y` into `out` (`classes` entries).
    fn write_row(&self, k: usize, out: &mut [f64]);

    /// Writes rows `b_k(·)`, `k ∈ rows`, into `out` (row-major,
    /// `rows.len() × classes` entries): what [`Problem::bias_rows`] asks for,
    /// a block of rows at a time (the linear oracle: 16 rows per call). The
    /// default calls [`BiasRows::write_row`] per row; a source that can share
    /// work between neighbouring rows overrides it, and must then write the
    /// same bits as the row-by-row calls. Algorithm 1's source computes
    /// Eq. 14, `b^k_α(y) = (Δ_α(y) + message offsets) / ε_t`, for the pooled
    /// regions of one factor type: it finds the example of `rows.start` once
    /// and walks that example's regions in row order, instead of searching
    /// for each row's example.
    ///
    /// ```
    /// use oracles::BiasRows;
    /// #[derive(Debug)]
    /// struct Index; // b_k = (k, −k)
    /// impl BiasRows for Index {
    ///     fn write_row(&self, k: usize, out: &mut [f64]) {
    ///         out[0] = k as f64;
    ///         out[1] = -(k as f64);
    ///     }
    /// }
    /// let mut out = [0.0; 6];
    /// Index.write_rows(2..5, &mut out);
    /// assert_eq!(out, [2.0, -2.0, 3.0, -3.0, 4.0, -4.0]);
    /// ```
    fn write_rows(&self, rows: std::ops::Range<usize>, out: &mut [f64]) {
        if rows.is_empty() {
            return;
        }
        let classes = out.len() / rows.len();
        for (k, row) in rows.zip(out.chunks_exact_mut(classes)) {
            self.write_row(k, row);
        }
    }
}

/// Where a problem's biases come from.
#[derive(Debug, Clone, Copy)]
enum Bias<'a> {
    /// Row-major `rows × classes`.
    Dense(&'a [f64]),
    /// Computed per row.
    Rows(&'a dyn BiasRows),
}

/// One oracle problem: features, labels, bias and optional weights (see module docs).
///
/// ```
/// use oracles::{Features, Problem};
/// // Two rows, two classes; row 1 cannot take class 0 (bias −∞), row 0 counts twice.
/// let x = [0.5, 1.5];
/// let bias = [0.0, 0.0, f64::NEG_INFINITY, 0.0];
/// let p = Problem::new(Features::new(&x, 2, 1).unwrap(), &[0, 1], &bias, 2, Some(&[2.0, 1.0])).unwrap();
/// assert_eq!((p.rows(), p.classes(), p.total_weight()), (2, 2, 3.0));
/// assert_eq!(p.bias_row(1, &mut [0.0; 2]), &[f64::NEG_INFINITY, 0.0]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Problem<'a> {
    features: Features<'a>,
    labels: &'a [usize],
    bias: Bias<'a>,
    classes: usize,
    weights: Option<&'a [f64]>,
    /// The ranks this problem's rows are spread over ([`Problem::distributed`]).
    collective: &'a dyn Collective,
    /// `Σ_k w_k` over every rank's rows, when distributed.
    global_weight: Option<f64>,
    /// Rows on the ranks before this one, and on all ranks.
    row_offset: usize,
    global_rows: usize,
}

impl<'a> Problem<'a> {
    /// Validates and wraps a problem. `bias` is row-major `rows × classes`.
    ///
    /// Errors: no rows, fewer than two classes, label count or range, bias shape,
    /// NaN/+∞ bias, −∞ bias on a row's own label, weight count, negative or
    /// non-finite weights.
    ///
    /// ```
    /// use oracles::{Features, Problem};
    /// let x = [0.0, 1.0];
    /// let f = Features::new(&x, 2, 1).unwrap();
    /// let p = Problem::new(f, &[0, 1], &[0.0, f64::NEG_INFINITY, 0.0, 0.0], 2, None).unwrap();
    /// assert_eq!(p.rows(), 2);
    /// assert!(Problem::new(f, &[0, 2], &[0.0; 4], 2, None).is_err());
    /// ```
    pub fn new(
        features: Features<'a>,
        labels: &'a [usize],
        bias: &'a [f64],
        classes: usize,
        weights: Option<&'a [f64]>,
    ) -> Result<Self, OracleError> {
        let rows = features.rows();
        Self::check_shape(rows, labels, classes, weights)?;
        if bias.len() != rows * classes {
            return Err(OracleError::BiasShape { got: bias.len(), rows, classes });
        }
        for (row, b) in bias.chunks_exact(classes).enumerate() {
            check_bias_row(row, b, labels[row])?;
        }
        Ok(Self::from_parts(features, labels, Bias::Dense(bias), classes, weights))
    }

    /// Like [`Problem::new`], with biases computed row by row by `bias`
    /// instead of stored. Every row is computed once here to validate it (the
    /// same errors as [`Problem::new`]); oracles then compute rows as they
    /// need them ([`Problem::bias_row`]), so the problem holds no
    /// `rows × classes` array.
    pub fn with_bias_rows(
        features: Features<'a>,
        labels: &'a [usize],
        bias: &'a dyn BiasRows,
        classes: usize,
        weights: Option<&'a [f64]>,
    ) -> Result<Self, OracleError> {
        use rayon::prelude::*;
        let rows = features.rows();
        Self::check_shape(rows, labels, classes, weights)?;
        // The first invalid row, whatever the thread count.
        (0..rows.div_ceil(VALIDATE_ROWS))
            .into_par_iter()
            .map(|chunk| {
                let start = chunk * VALIDATE_ROWS;
                let end = (start + VALIDATE_ROWS).min(rows);
                let mut b = vec![0.0; (end - start) * classes];
                bias.write_rows(start..end, &mut b);
                for ((row, &label), b) in
                    labels.iter().enumerate().skip(start).take(VALIDATE_ROWS).zip(b.chunks_exact(classes))
                {
                    check_bias_row(row, b, label)?;
                }
                Ok(())
            })
            .collect::<Result<Vec<()>, OracleError>>()?;
        Ok(Self::from_parts(features, labels, Bias::Rows(bias), classes, weights))
    }

    /// A validated problem of one process.
    fn from_parts(
        features: Features<'a>,
        labels: &'a [usize],
        bias: Bias<'a>,
        classes: usize,
        weights: Option<&'a [f64]>,
    ) -> Self {
        let rows = features.rows();
        Self {
            features,
            labels,
            bias,
            classes,
            weights,
            collective: &SingleProcess,
            global_weight: None,
            row_offset: 0,
            global_rows: rows,
        }
    }

    /// This problem as rank `collective.rank()`'s share of one problem whose
    /// rows are spread over `collective`'s ranks: the loss an oracle fits is
    /// then `L = Σ_r L_r`, the sum over every rank's rows, and a fit that
    /// supports it ([`crate::Oracle::distributed`]) adds its partial sums
    /// with [`Problem::sum`] so that every rank returns the same model. A
    /// collective call (every rank must make it): the total weight is summed
    /// here.
    ///
    /// ```
    /// use oracle_contract::{Features, Problem, SingleProcess};
    /// let x = [0.0, 1.0];
    /// let p = Problem::new(Features::new(&x, 2, 1).unwrap(), &[0, 1], &[0.0; 4], 2, None).unwrap();
    /// let one = SingleProcess;
    /// let q = p.distributed(&one);
    /// assert_eq!((q.total_weight(), q.is_distributed()), (2.0, false));
    /// ```
    pub fn distributed(mut self, collective: &'a dyn Collective) -> Self {
        if collective.ranks() == 1 {
            return self;
        }
        let rows = collective.gather(&[self.rows() as f64]);
        self.row_offset = rows[..collective.rank()].iter().map(|&n| n as usize).sum();
        self.global_rows = rows.iter().map(|&n| n as usize).sum();
        self.collective = collective;
        self.global_weight = Some(match self.weights {
            // One process's sum of the weights, row after row.
            Some(w) => {
                self.chunk_partials(self.global_rows, 1, |rows, acc| w[rows].iter().for_each(|v| acc[0] += v))[0]
            }
            None => self.global_rows as f64,
        });
        self
    }

    /// The partial sums of the whole problem's rows — every rank's, in rank
    /// order — in chunks of `chunk` consecutive rows, as one process would
    /// chunk them: `width` numbers per chunk, concatenated in chunk order, on
    /// every rank. `accumulate(rows, acc)` adds this rank's rows `rows` (its
    /// own indices) into `acc` one row after the other. A chunk split between
    /// ranks is continued from the previous rank's accumulator (sent point to
    /// point), so every chunk's sum has the bits one process computes, and a
    /// caller that adds the chunks in order as one process does gets one
    /// process's result bit for bit. A collective call.
    ///
    /// ```
    /// use oracle_contract::{Features, Problem};
    /// let x = [0.0; 5];
    /// let p = Problem::new(Features::new(&x, 5, 1).unwrap(), &[0, 1, 0, 1, 1], &[0.0; 10], 2, None).unwrap();
    /// // One process: the labels summed in chunks of two rows.
    /// let sums = p.chunk_partials(2, 1, |rows, acc| rows.for_each(|k| acc[0] += p.labels()[k] as f64));
    /// assert_eq!(sums, [1.0, 1.0, 1.0]);
    /// ```
    pub fn chunk_partials<F>(&self, chunk: usize, width: usize, accumulate: F) -> Vec<f64>
    where
        F: Fn(std::ops::Range<usize>, &mut [f64]) + Sync,
    {
        use rayon::prelude::*;
        let chunk = chunk.max(1);
        let (start, end, total) = (self.row_offset, self.row_offset + self.rows(), self.global_rows);
        let (first, last) = (start / chunk, (end - 1) / chunk);
        let local = |j: usize| (j * chunk).max(start) - start..((j + 1) * chunk).min(end) - start;
        let ends_here = |j: usize| ((j + 1) * chunk).min(total) <= end;
        let continued = first * chunk < start; // chunk `first` began on the previous rank
        let fresh: Vec<usize> = (first..=last).filter(|&j| j * chunk >= start).collect();
        let mut partials: Vec<Vec<f64>> = fresh
            .par_iter()
            .map(|&j| {
                let mut acc = vec![0.0; width];
                accumulate(local(j), &mut acc);
                acc
            })
            .collect();
        let rank = self.collective.rank();
        // The last chunk continues on the next rank: send it before waiting for
        // the previous one, so that the ranks do not wait in a chain.
        let hand_on = !ends_here(last);
        if hand_on && !(continued && first == last) {
            self.collective.send(rank + 1, partials.pop().as_deref().unwrap_or_default());
        }
        let mut head = None;
        if continued {
            let mut acc = vec![0.0; width];
            self.collective.receive(rank - 1, &mut acc);
            accumulate(local(first), &mut acc);
            if hand_on && first == last {
                self.collective.send(rank + 1, &acc);
            } else {
                head = Some(acc);
            }
        }
        let mine: Vec<f64> = head.into_iter().chain(partials).flatten().collect();
        if self.collective.ranks() == 1 { mine } else { self.collective.gather(&mine) }
    }

    /// The ranks the rows are spread over ([`crate::SingleProcess`] unless
    /// [`Problem::distributed`]).
    pub fn collective(&self) -> &'a dyn Collective {
        self.collective
    }

    /// The number of rows on the ranks before this one: this rank's row `k`
    /// is row `row_offset() + k` of the whole problem (0 unless
    /// [`Problem::distributed`]).
    pub fn row_offset(&self) -> usize {
        self.row_offset
    }

    /// The number of rows of the whole problem, over every rank
    /// ([`Problem::rows`] unless [`Problem::distributed`]). Random choices
    /// that must be one process's (a permutation, a sample) are drawn over
    /// `0..global_rows()`, and each rank keeps the rows it holds.
    ///
    /// ```
    /// use oracle_contract::{Collective, Features, Problem, ThreadRanks};
    /// let x = [0.0; 5];
    /// let labels = [0, 1, 0, 1, 1];
    /// let offsets: Vec<(usize, usize)> = std::thread::scope(|s| {
    ///     let handles: Vec<_> = ThreadRanks::group(2)
    ///         .into_iter()
    ///         .map(|c| {
    ///             let (x, labels) = (&x, &labels);
    ///             s.spawn(move || {
    ///                 let rows = oracle_contract::collective::block(5, c.rank(), 2);
    ///                 let f = Features::new(&x[rows.clone()], rows.len(), 1).unwrap();
    ///                 let p = Problem::new(f, &labels[rows], &[0.0; 6][..2 * f.rows()], 2, None).unwrap();
    ///                 let p = p.distributed(&c);
    ///                 (p.row_offset(), p.global_rows())
    ///             })
    ///         })
    ///         .collect();
    ///     handles.into_iter().map(|h| h.join().unwrap()).collect()
    /// });
    /// assert_eq!(offsets, [(0, 5), (3, 5)]);
    /// ```
    pub fn global_rows(&self) -> usize {
        self.global_rows
    }

    /// Whether the rows are spread over more than one rank, so that sums over
    /// rows must be completed with [`Problem::sum`].
    pub fn is_distributed(&self) -> bool {
        self.collective.ranks() > 1
    }

    /// Adds `values` over the ranks ([`Collective::sum`]; nothing to do on
    /// one rank). A collective call.
    pub fn sum(&self, values: &mut [f64]) {
        if self.is_distributed() {
            self.collective.sum(values);
        }
    }

    /// The largest of `values` over the ranks ([`Collective::max`]). A
    /// collective call.
    pub fn max(&self, values: &mut [f64]) {
        if self.is_distributed() {
            self.collective.max(values);
        }
    }

    /// The checks both constructors share (everything but the bias values).
    fn check_shape(rows: usize, labels: &[usize], classes: usize, weights: Option<&[f64]>) -> Result<(), OracleError> {
        if rows == 0 {
            return Err(OracleError::Empty);
        }
        if classes < 2 {
            return Err(OracleError::TooFewClasses { classes });
        }
        if classes > crate::MAX_VALUES || rows.checked_mul(classes).is_none() {
            return Err(OracleError::TooManyClasses { classes, rows });
        }
        if labels.len() != rows {
            return Err(OracleError::LabelCount { got: labels.len(), rows });
        }
        if let Some(row) = labels.iter().position(|&l| l >= classes) {
            return Err(OracleError::LabelOutOfRange { row, label: labels[row], classes });
        }
        if let Some(w) = weights {
            if w.len() != rows {
                return Err(OracleError::WeightCount { got: w.len(), rows });
            }
            if let Some(row) = w.iter().position(|v| !v.is_finite() || *v < 0.0) {
                return Err(OracleError::InvalidWeight { row, value: w[row] });
            }
        }
        Ok(())
    }

    /// The feature matrix.
    pub fn features(&self) -> Features<'a> {
        self.features
    }

    /// Number of rows `n`.
    pub fn rows(&self) -> usize {
        self.features.rows()
    }

    /// Features per row `d`.
    pub fn dim(&self) -> usize {
        self.features.dim()
    }

    /// Number of classes `C`.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// Labels `y_k`.
    pub fn labels(&self) -> &'a [usize] {
        self.labels
    }

    /// The row-major `rows × classes` bias array, if the problem stores one
    /// (built by [`Problem::new`]); `None` for computed biases.
    pub fn dense_bias(&self) -> Option<&'a [f64]> {
        match self.bias {
            Bias::Dense(b) => Some(b),
            Bias::Rows(_) => None,
        }
    }

    /// Bias row `b_k(·)`: a slice of the stored array, or computed into
    /// `scratch` (at least `classes` entries) for [`Problem::with_bias_rows`].
    #[inline]
    pub fn bias_row<'s>(&'s self, k: usize, scratch: &'s mut [f64]) -> &'s [f64] {
        let c = self.classes;
        match self.bias {
            Bias::Dense(b) => &b[k * c..(k + 1) * c],
            Bias::Rows(rows) => {
                rows.write_row(k, &mut scratch[..c]);
                &scratch[..c]
            }
        }
    }

    /// Bias rows `rows` (row-major), like [`Problem::bias_row`]; `scratch`
    /// needs `rows.len() × classes` entries. Computed biases come from one
    /// [`BiasRows::write_rows`] call.
    pub fn bias_rows<'s>(&'s self, rows: std::ops::Range<usize>, scratch: &'s mut [f64]) -> &'s [f64] {
        let c = self.classes;
        match self.bias {
            Bias::Dense(b) => &b[rows.start * c..rows.end * c],
            Bias::Rows(source) => {
                let out = &mut scratch[..rows.len() * c];
                source.write_rows(rows, out);
                out
            }
        }
    }

    /// Asks the CPU to start loading the first line of row `k`'s features and
    /// its bias (when stored), label and weight into its (level-2) cache, for
    /// kernels that visit rows in a random order; [`Problem::prefetch_row_rest`]
    /// asks for the rest of its features. A hint only (no effect on any
    /// result; nothing on targets other than x86-64).
    ///
    /// Each of these first lines has the CPU look up its page, which is slow
    /// for rows spread over a large memory and holds up the prefetch until it
    /// is done; so a kernel issues them for many rows at once (the lookups
    /// overlap), and the rest spread over its work (all at once, they held
    /// up the kernel until the memory answered).
    #[inline(always)]
    #[doc(hidden)]
    pub fn prefetch_row_start(&self, k: usize) {
        prefetch(self.features.row(k).get(..1).unwrap_or_default());
        if let Bias::Dense(b) = self.bias {
            prefetch(&b[k * self.classes..(k + 1) * self.classes]);
        }
        prefetch(std::slice::from_ref(&self.labels[k]));
        if let Some(w) = self.weights {
            prefetch(std::slice::from_ref(&w[k]));
        }
    }

    /// The rest of row `k`'s features after [`Problem::prefetch_row_start`].
    #[inline(always)]
    #[doc(hidden)]
    pub fn prefetch_row_rest(&self, k: usize) {
        prefetch(self.features.row(k).get(1..).unwrap_or_default());
    }

    /// Weight `w_k` (1 when no weights were given).
    #[inline]
    pub fn weight(&self, k: usize) -> f64 {
        self.weights.map_or(1.0, |w| w[k])
    }

    /// The optional weight vector.
    pub fn weights(&self) -> Option<&'a [f64]> {
        self.weights
    }

    /// Sum of the weights (`n` when unweighted), over every rank's rows
    /// when the problem is [`Problem::distributed`].
    pub fn total_weight(&self) -> f64 {
        self.global_weight.unwrap_or_else(|| self.local_weight())
    }

    /// Sum of the weights of this rank's rows.
    fn local_weight(&self) -> f64 {
        self.weights.map_or(self.rows() as f64, |w| w.iter().sum())
    }
}

/// Prefetches the cache lines of `s` into the level-2 cache (x86-64; a no-op elsewhere).
#[inline(always)]
fn prefetch<T>(s: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};
        let bytes = std::mem::size_of_val(s);
        let p = s.as_ptr().cast::<i8>();
        // Every 64-byte line the slice touches: one address per line and its last byte.
        for offset in (0..bytes).step_by(64).chain(bytes.checked_sub(1)) {
            // SAFETY: SSE is part of every x86-64 CPU; a prefetch never
            // faults and reads nothing the program sees.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(offset)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = s;
}

/// Rows per parallel chunk when computed biases are validated.
const VALIDATE_ROWS: usize = 4096;

/// A bias row must not hold NaN or `+∞`, nor `−∞` on the row's own label.
fn check_bias_row(row: usize, b: &[f64], label: usize) -> Result<(), OracleError> {
    if let Some(class) =
        b.iter().position(|&v| v.is_nan() || (v.abs() > crate::MAX_MAGNITUDE && v != f64::NEG_INFINITY))
    {
        return Err(OracleError::InvalidBias { row, class, value: b[class] });
    }
    if b[label] == f64::NEG_INFINITY {
        return Err(OracleError::ImpossibleLabel { row, label });
    }
    Ok(())
}

/// `log Σ_y exp(v_y)`, stable; `−∞` when every entry is `−∞`.
///
/// ```
/// let v = [1000.0, 1000.0];
/// assert!((oracles::log_sum_exp(&v) - (1000.0 + 2f64.ln())).abs() < 1e-9); // no overflow
/// ```
#[inline]
pub fn log_sum_exp(v: &[f64]) -> f64 {
    let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

/// One row's loss `w [log Σ_y exp(s_y + b_y) − s_{y_k} − b_{y_k}]` and, if
/// `grad` is given, its gradient with respect to the scores,
/// `w [softmax(s + b)_y − 1{y = y_k}]` (zero on classes whose bias is −∞).
///
/// ```
/// let mut grad = [0.0; 2];
/// let loss = oracles::row_loss(&[0.0, 0.0], &[0.0, 0.0], 1, 1.0, Some(&mut grad));
/// assert!((loss - 2f64.ln()).abs() < 1e-12);
/// assert_eq!(grad, [0.5, -0.5]); // softmax minus one-hot
/// ```
///
/// # Panics
/// If `bias` (or `grad`) has another length than `scores`, or `label` is not
/// below it (a programming error: [`Problem`] checks its rows once).
#[inline]
pub fn row_loss(scores: &[f64], bias: &[f64], label: usize, weight: f64, grad: Option<&mut [f64]>) -> f64 {
    let c = scores.len();
    assert!(
        bias.len() == c && label < c && grad.as_ref().is_none_or(|g| g.len() == c),
        "row_loss: {c} scores, {} biases, label {label}",
        bias.len()
    );
    let mut m = f64::NEG_INFINITY;
    for y in 0..c {
        m = m.max(scores[y] + bias[y]);
    }
    let mut z = 0.0;
    let mut nan = false;
    for y in 0..c {
        let x = scores[y] + bias[y] - m;
        nan |= x.is_nan();
        z += exp_nonpos::<Plain>(x);
    }
    if nan || !m.is_finite() {
        // Non-finite scores: the C library's exp/ln propagate NaN and ∞ as before.
        return row_loss_libm(scores, bias, label, weight, grad);
    }
    // z ≥ 1 (the largest term is e^0).
    let lse = m + ln_pos::<Plain>(z);
    if let Some(g) = grad {
        for y in 0..c {
            let p = exp_nonpos::<Plain>(scores[y] + bias[y] - lse);
            g[y] = weight * (p - if y == label { 1.0 } else { 0.0 });
        }
    }
    weight * (lse - scores[label] - bias[label])
}

/// [`row_loss`] of up to `L` rows at once, one vector lane per row: lane `r`
/// holds row `r`'s scores `scores[y][r]`, biases `bias[y][r]`, label and
/// weight. Every lane performs [`row_loss`]'s operations in its order, so its
/// loss and gradient (`grad[y][r]`) are bit for bit [`row_loss`]'s for that
/// row (a lane with non-finite scores is handed to [`row_loss`] itself).
/// Only the first `rows` lanes are rows: the others return loss 0 and
/// gradient 0. Inlined, so that a kernel compiled for AVX2 runs it with AVX2.
#[inline(always)]
#[doc(hidden)]
pub fn row_losses<const L: usize>(
    scores: &[[f64; L]],
    bias: &[[f64; L]],
    labels: &[usize; L],
    weights: &[f64; L],
    rows: usize,
    mut grad: Option<&mut [[f64; L]]>,
) -> [f64; L] {
    let mut m = [f64::NEG_INFINITY; L];
    for (sy, by) in scores.iter().zip(bias) {
        for r in 0..L {
            m[r] = m[r].max(sy[r] + by[r]);
        }
    }
    let (mut z, mut nan) = ([0.0; L], [false; L]);
    for (sy, by) in scores.iter().zip(bias) {
        for r in 0..L {
            let x = sy[r] + by[r] - m[r];
            nan[r] |= x.is_nan();
            z[r] += exp_nonpos::<Plain>(x);
        }
    }
    let mut lse = [0.0; L];
    for r in 0..L {
        lse[r] = m[r] + ln_pos::<Plain>(z[r]);
    }
    if let Some(g) = grad.as_deref_mut() {
        for (y, ((gy, sy), by)) in g.iter_mut().zip(scores).zip(bias).enumerate() {
            for r in 0..L {
                let p = exp_nonpos::<Plain>(sy[r] + by[r] - lse[r]);
                gy[r] = weights[r] * (p - if y == labels[r] { 1.0 } else { 0.0 });
            }
        }
    }
    let mut loss = [0.0; L];
    for (r, l) in loss.iter_mut().enumerate() {
        let y = labels[r].min(scores.len() - 1);
        *l = weights[r] * (lse[r] - scores[y][r] - bias[y][r]);
    }
    for r in 0..L {
        if r >= rows {
            loss[r] = 0.0;
            grad.iter_mut().for_each(|g| g.iter_mut().for_each(|gy| gy[r] = 0.0));
        } else if nan[r] || !m[r].is_finite() {
            let row_s: Vec<f64> = scores.iter().map(|sy| sy[r]).collect();
            let row_b: Vec<f64> = bias.iter().map(|by| by[r]).collect();
            let mut row_g = vec![0.0; scores.len()];
            loss[r] = row_loss(&row_s, &row_b, labels[r], weights[r], Some(&mut row_g));
            if let Some(g) = grad.as_deref_mut() {
                g.iter_mut().zip(&row_g).for_each(|(gy, &v)| gy[r] = v);
            }
        }
    }
    loss
}

/// [`row_loss`] through the C library's `exp`/`ln`, for rows with non-finite
/// scores (so NaN and ∞ propagate into the loss exactly as IEEE arithmetic says).
#[cold]
fn row_loss_libm(scores: &[f64], bias: &[f64], label: usize, weight: f64, grad: Option<&mut [f64]>) -> f64 {
    let c = scores.len();
    let mut m = f64::NEG_INFINITY;
    for y in 0..c {
        m = m.max(scores[y] + bias[y]);
    }
    let mut z = 0.0;
    for y in 0..c {
        z += (scores[y] + bias[y] - m).exp();
    }
    let lse = m + z.ln();
    if let Some(g) = grad {
        for y in 0..c {
            let p = (scores[y] + bias[y] - lse).exp();
            g[y] = weight * (p - if y == label { 1.0 } else { 0.0 });
        }
    }
    weight * (lse - scores[label] - bias[label])
}

/// The total loss `L` (module docs) of row-major `scores` (`rows × classes`).
///
/// If `grad` is given it receives `∂L/∂scores`, row-major like `scores`.
/// Rows are processed in parallel; the sum is deterministic (fixed chunking).
///
/// ```
/// use oracles::{Features, Problem, logistic_loss};
/// let x = [0.0, 0.0];
/// let p = Problem::new(Features::new(&x, 2, 1).unwrap(), &[0, 1], &[0.0, f64::NEG_INFINITY, 0.0, 0.0], 2, None).unwrap();
/// // Row 0 can only be class 0 (bias −∞ on class 1): it costs nothing.
/// assert!((logistic_loss(&p, &[0.0; 4], None) - 2f64.ln()).abs() < 1e-12);
/// ```
///
/// On a [`Problem::distributed`] problem the loss is summed over the ranks
/// (a collective call); `grad` stays this rank's rows'.
///
/// # Panics
/// If `scores` (or `grad`) is not `rows × classes` long.
pub fn logistic_loss(problem: &Problem<'_>, scores: &[f64], grad: Option<&mut [f64]>) -> f64 {
    if problem.is_distributed() {
        distributed_logistic_loss(problem, scores, grad)
    } else {
        local_logistic_loss(problem, scores, grad)
    }
}

/// Rows per chunk of [`logistic_loss`]'s partial sums.
const LOSS_CHUNK: usize = 4096;

/// [`logistic_loss`] of a distributed problem: each row's loss as one
/// process computes it, added in one process's chunks and order
/// ([`Problem::chunk_partials`]), so the same bits.
fn distributed_logistic_loss(problem: &Problem<'_>, scores: &[f64], grad: Option<&mut [f64]>) -> f64 {
    use rayon::prelude::*;
    let c = problem.classes();
    assert_eq!(scores.len(), problem.rows() * c, "scores must be rows × classes");
    let mut losses = vec![0.0; problem.rows()];
    let row = |k: usize, g: Option<&mut [f64]>| {
        let mut b = vec![0.0; c];
        row_loss(&scores[k * c..(k + 1) * c], problem.bias_row(k, &mut b), problem.labels()[k], problem.weight(k), g)
    };
    match grad {
        Some(g) => {
            assert_eq!(g.len(), scores.len(), "gradient must be rows × classes");
            losses.par_iter_mut().zip(g.par_chunks_mut(c)).enumerate().for_each(|(k, (l, gr))| *l = row(k, Some(gr)));
        }
        None => losses.par_iter_mut().enumerate().for_each(|(k, l)| *l = row(k, None)),
    }
    let partials = problem.chunk_partials(LOSS_CHUNK, 1, |rows, acc| rows.for_each(|k| acc[0] += losses[k]));
    partials.iter().sum()
}

/// [`logistic_loss`] in one process.
fn local_logistic_loss(problem: &Problem<'_>, scores: &[f64], grad: Option<&mut [f64]>) -> f64 {
    use rayon::prelude::*;
    let c = problem.classes();
    let n = problem.rows();
    assert_eq!(scores.len(), n * c, "scores must be rows × classes");
    const CHUNK: usize = LOSS_CHUNK;
    match grad {
        Some(g) => {
            assert_eq!(g.len(), n * c, "gradient must be rows × classes");
            let partial: Vec<f64> = g
                .par_chunks_mut(CHUNK * c)
                .enumerate()
                .map(|(chunk, gc)| {
                    let start = chunk * CHUNK;
                    let mut sum = 0.0;
                    let mut b = vec![0.0; c];
                    for (i, gr) in gc.chunks_mut(c).enumerate() {
                        let k = start + i;
                        sum += row_loss(
                            &scores[k * c..(k + 1) * c],
                            problem.bias_row(k, &mut b),
                            problem.labels()[k],
                            problem.weight(k),
                            Some(gr),
                        );
                    }
                    sum
                })
                .collect();
            partial.iter().sum()
        }
        None => {
            let partial: Vec<f64> = (0..n.div_ceil(CHUNK))
                .into_par_iter()
                .map(|chunk| {
                    let rows = chunk * CHUNK..((chunk + 1) * CHUNK).min(n);
                    let mut sum = 0.0;
                    add_row_losses(problem, rows.clone(), &scores[rows.start * c..rows.end * c], &mut sum);
                    sum
                })
                .collect();
            partial.iter().sum()
        }
    }
}

/// Adds the losses of rows `rows`, whose scores are `scores`
/// (`rows.len() × classes`), to `sum` in row order: the inner loop of
/// [`logistic_loss`] without a gradient and of [`chunked_loss`].
fn add_row_losses(problem: &Problem<'_>, rows: std::ops::Range<usize>, scores: &[f64], sum: &mut f64) {
    let c = problem.classes();
    let mut b = vec![0.0; c];
    for (k, s) in rows.zip(scores.chunks_exact(c)) {
        *sum += row_loss(s, problem.bias_row(k, &mut b), problem.labels()[k], problem.weight(k), None);
    }
}

/// [`logistic_loss`] of the scores `score(rows, out)` writes for a range of
/// rows (`rows.len() × classes`), computed [`LOSS_CHUNK`] rows at a time:
/// the same chunks and order of addition as [`logistic_loss`] of all the
/// rows' scores, so the same bits, holding one chunk's scores per task
/// instead of every row's. If `score` fails, one of its errors is returned
/// (on a distributed problem every rank still takes part in the sums).
pub(crate) fn chunked_loss<F>(problem: &Problem<'_>, score: F) -> Result<f64, OracleError>
where
    F: Fn(std::ops::Range<usize>, &mut [f64]) -> Result<(), OracleError> + Sync,
{
    use rayon::prelude::*;
    let c = problem.classes();
    // Scores rows and adds their losses to `sum` in row order, as both paths of `logistic_loss` do.
    let add = |rows: std::ops::Range<usize>, sum: &mut f64| -> Result<(), OracleError> {
        let mut scores = vec![0.0; rows.len() * c];
        score(rows.clone(), &mut scores)?;
        add_row_losses(problem, rows, &scores, sum);
        Ok(())
    };
    if problem.is_distributed() {
        let failed = std::sync::OnceLock::new();
        let partials = problem.chunk_partials(LOSS_CHUNK, 1, |rows, acc| {
            if let Err(e) = add(rows, &mut acc[0]) {
                let _ = failed.set(e);
            }
        });
        return match failed.into_inner() {
            Some(e) => Err(e),
            None => Ok(partials.iter().sum()),
        };
    }
    let n = problem.rows();
    let partial: Vec<f64> = (0..n.div_ceil(LOSS_CHUNK))
        .into_par_iter()
        .map(|chunk| {
            let mut sum = 0.0;
            add(chunk * LOSS_CHUNK..((chunk + 1) * LOSS_CHUNK).min(n), &mut sum).map(|()| sum)
        })
        .collect::<Result<_, _>>()?;
    Ok(partial.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    #[should_panic(expected = "row_loss: 2 scores, 3 biases, label 1")]
    fn row_loss_of_mismatched_lengths_panics_with_the_lengths() {
        row_loss(&[0.0, 0.0], &[0.0; 3], 1, 1.0, None);
    }

    #[test]
    #[should_panic(expected = "row_loss: 2 scores, 2 biases, label 2")]
    fn row_loss_of_a_label_out_of_range_panics_with_it() {
        row_loss(&[0.0, 0.0], &[0.0; 2], 2, 1.0, None);
    }

    /// The block-wise check finds the first bad value wherever it sits (first,
    /// last, on either side of a block boundary, with another bad one after it) and
    /// which kind it is; values at ±MAX_MAGNITUDE and subnormals pass.
    #[test]
    fn features_name_their_first_bad_value_anywhere() {
        let (rows, dim) = (300, 7); // 2100 values: 8 full blocks and a partial one
        let mut x: Vec<f64> = (0..rows * dim).map(|i| (i as f64 * 0.37).sin()).collect();
        x[5] = crate::MAX_MAGNITUDE;
        x[6] = -crate::MAX_MAGNITUDE;
        x[7] = f64::MIN_POSITIVE / 2.0;
        assert!(Features::new(&x, rows, dim).is_ok());
        let bad = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1.5e100, -1.5e100];
        for pos in [0, 255, 256, 257, 1023, 1024, 2047, 2048, 2099] {
            for (j, &value) in bad.iter().enumerate() {
                let mut y = x.clone();
                y[pos] = value;
                if pos + 300 < y.len() {
                    y[pos + 300] = f64::NAN; // a later one is not the one named
                }
                let e = Features::new(&y, rows, dim).unwrap_err();
                let (row, col) = (pos / dim, pos % dim);
                let named = match e {
                    OracleError::NonFiniteFeature { row: r, col: c, value: v } => {
                        j < 3 && v.is_nan() == value.is_nan() && (r, c) == (row, col)
                    }
                    OracleError::FeatureTooLarge { row: r, col: c, value: v } => {
                        j >= 3 && v == value && (r, c) == (row, col)
                    }
                    _ => false,
                };
                assert!(named, "position {pos}, value {value}: {e}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "rows 1..4 of a matrix of 3 rows")]
    fn slicing_past_the_rows_panics_with_the_range() {
        Features::new(&[0.0; 6], 3, 2).unwrap().slice_rows(1, 4);
    }

    /// Every lane of [`row_losses`] is bit for bit [`row_loss`] of its row,
    /// including rows with −∞ biases, non-finite scores, and padding lanes.
    #[test]
    fn row_losses_are_row_loss_lane_by_lane() {
        const L: usize = 4;
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let special = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 800.0, -800.0, 0.0, -0.0];
        for classes in [2, 3, 8] {
            for case in 0..300 {
                let mut scores = vec![[0.0; L]; classes];
                let mut bias = vec![[0.0; L]; classes];
                let labels: [usize; L] = std::array::from_fn(|_| rng.random_range(0..classes));
                let weights: [f64; L] = std::array::from_fn(|_| rng.random_range(0.0..3.0));
                for y in 0..classes {
                    for r in 0..L {
                        scores[y][r] = if rng.random_bool(0.05) {
                            special[rng.random_range(0..special.len())]
                        } else {
                            rng.random_range(-30.0..30.0)
                        };
                        bias[y][r] = if y != labels[r] && rng.random_bool(0.2) {
                            f64::NEG_INFINITY
                        } else {
                            rng.random_range(-5.0..5.0)
                        };
                    }
                }
                let rows = case % (L + 1);
                let mut grad = vec![[f64::NAN; L]; classes];
                let losses = row_losses(&scores, &bias, &labels, &weights, rows, Some(&mut grad));
                let plain = row_losses(&scores, &bias, &labels, &weights, rows, None);
                for r in 0..L {
                    assert_eq!(plain[r].to_bits(), losses[r].to_bits());
                    if r >= rows {
                        assert_eq!(losses[r], 0.0);
                        assert!(grad.iter().all(|g| g[r] == 0.0));
                        continue;
                    }
                    let s: Vec<f64> = scores.iter().map(|sy| sy[r]).collect();
                    let b: Vec<f64> = bias.iter().map(|by| by[r]).collect();
                    let mut g = vec![0.0; classes];
                    let loss = row_loss(&s, &b, labels[r], weights[r], Some(&mut g));
                    assert_eq!(loss.to_bits(), losses[r].to_bits(), "loss of lane {r}: scores {s:?} bias {b:?}");
                    for y in 0..classes {
                        assert_eq!(g[y].to_bits(), grad[y][r].to_bits(), "gradient {y} of lane {r}: scores {s:?}");
                    }
                }
            }
        }
    }
}
