//! Branch-free descent of one tree.
//!
//! Leaves become absorbing nodes (a threshold every value satisfies, both
//! children pointing to themselves), so every row takes exactly `depth` steps;
//! rows are walked [`LANES`] at a time in lockstep, so their dependency chains
//! (node → feature → child) overlap instead of mispredicting each turn.
//!
//! Over binned rows, a tree that splits on one feature only (common when the other
//! features are constant, as with `[value, 1]` unary features) is a table from
//! that feature's bin to the leaf.

/// Rows descended together by [`Descent::leaves`].
const LANES: usize = 8;

/// A row entry: a raw feature (`f64`) or a bin (`u8`).
pub(super) trait Value: Copy + PartialOrd {
    /// Number of distinct values when small enough to tabulate (bins), else 0.
    const TABLE: usize;
    /// The `i`-th value, `i < TABLE`.
    fn nth(i: usize) -> Self;
    /// The position of `self` among the values, when `TABLE > 0`.
    fn position(self) -> usize;
}

impl Value for u8 {
    const TABLE: usize = 256;
    fn nth(i: usize) -> Self {
        i as u8
    }
    fn position(self) -> usize {
        usize::from(self)
    }
}

impl Value for f64 {
    const TABLE: usize = 0;
    fn nth(_: usize) -> Self {
        0.0
    }
    fn position(self) -> usize {
        0
    }
}

/// One node of a [`Descent`]: go to `child[0]` if `row[feature] ≤ threshold`, else `child[1]`.
#[derive(Debug, Clone, Copy)]
struct Step<T> {
    threshold: T,
    feature: u32,
    child: [u32; 2],
}

/// A tree compiled for branch-free descent over rows of `T`.
#[derive(Debug, Clone)]
pub(super) struct Descent<T> {
    steps: Vec<Step<T>>,
    internal: usize,
    depth: usize,
    /// For a tree on one feature with tabulated values: that feature …
    single: Option<usize>,
    /// … and the leaf of each of its values.
    table: Vec<u32>,
}

impl<T: Value> Descent<T> {
    /// An empty descent, to be filled by [`Descent::compile`].
    pub(super) fn new() -> Self {
        Self { steps: Vec::new(), internal: 0, depth: 0, single: None, table: Vec::new() }
    }

    /// Compiles a tree in the model's encoding (children `c ≥ 0` internal, `c < 0`
    /// leaf `!c`; children after their parents) with `leaves` leaves; `top` is a
    /// value no row entry exceeds (`+∞`, `u8::MAX`).
    pub(super) fn compile(
        &mut self,
        feature: &[u32],
        threshold: impl Fn(usize) -> T,
        left: &[i32],
        right: &[i32],
        leaves: usize,
        top: T,
    ) {
        let internal = feature.len();
        let index = |c: i32| if c >= 0 { c as u32 } else { (internal + !c as usize) as u32 };
        self.steps.clear();
        self.steps.extend((0..internal).map(|n| Step {
            threshold: threshold(n),
            feature: feature[n],
            child: [index(left[n]), index(right[n])],
        }));
        self.steps.extend((0..leaves).map(|l| {
            let me = (internal + l) as u32;
            Step { threshold: top, feature: 0, child: [me, me] }
        }));
        self.internal = internal;
        // Children come after their parents, so one forward pass finds every depth.
        let mut depth = vec![0usize; internal + leaves];
        for n in 0..internal {
            for c in self.steps[n].child {
                depth[c as usize] = depth[n] + 1;
            }
        }
        self.depth = depth[internal..].iter().copied().max().unwrap_or(0);

        self.single = None;
        self.table.clear();
        if T::TABLE > 0 && internal > 0 && feature.iter().all(|&f| f == feature[0]) {
            self.single = Some(feature[0] as usize);
            for i in 0..T::TABLE {
                let leaf = self.walk(|_| T::nth(i));
                self.table.push(leaf as u32);
            }
        }
    }

    /// The leaf reached with feature values `x(feature)`.
    #[inline]
    pub(super) fn walk(&self, x: impl Fn(usize) -> T) -> usize {
        let mut n = 0;
        for _ in 0..self.depth {
            let s = &self.steps[n];
            n = s.child[usize::from(x(s.feature as usize) > s.threshold)] as usize;
        }
        n - self.internal
    }

    /// The leaf of each row of `rows` (row-major, `width` values per row) into
    /// `out`, one entry per row.
    pub(super) fn leaves(&self, rows: &[T], width: usize, out: &mut [u32]) {
        if self.depth == 0 {
            out.fill(0);
            return;
        }
        if let Some(f) = self.single {
            for (k, o) in out.iter_mut().enumerate() {
                *o = self.table[rows[k * width + f].position()];
            }
            return;
        }
        let mut groups = out.chunks_exact_mut(LANES);
        let mut start = 0;
        for group in &mut groups {
            let row: [&[T]; LANES] = std::array::from_fn(|i| &rows[(start + i) * width..(start + i + 1) * width]);
            let mut n = [0usize; LANES];
            for _ in 0..self.depth {
                for i in 0..LANES {
                    let s = &self.steps[n[i]];
                    n[i] = s.child[usize::from(row[i][s.feature as usize] > s.threshold)] as usize;
                }
            }
            for (o, n) in group.iter_mut().zip(n) {
                *o = (n - self.internal) as u32;
            }
            start += LANES;
        }
        for (i, o) in groups.into_remainder().iter_mut().enumerate() {
            let row = &rows[(start + i) * width..(start + i + 1) * width];
            *o = self.walk(|f| row[f]) as u32;
        }
    }
}
