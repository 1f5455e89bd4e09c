//! Sums over processes: how one oracle fit runs over rows held by several
//! ranks (data-parallel learning, docs/guide/scaling.md).
//!
//! With the training examples partitioned over `R` ranks, every loss an
//! oracle computes is a sum over rows, `L = Σ_r L_r`, and so is its gradient.
//! A fit that adds its per-rank partial sums with [`Collective::sum`] at each
//! evaluation sees the loss and gradient of the whole problem on every rank;
//! a deterministic optimiser (L-BFGS) then takes the same steps everywhere and
//! every rank ends with the same model, without gathering any row.
//!
//! [`SingleProcess`] (one rank, sums are no-ops) is what a
//! [`crate::Problem`] uses unless given another; [`ThreadRanks`] runs ranks
//! as threads of one process (for tests and examples); structlearn's `mpi`
//! feature provides MPI ranks.

use std::fmt::Debug;
use std::sync::{Arc, Barrier, Mutex};

/// A group of ranks that add vectors together (MPI's all-reduce).
///
/// Every rank must make the same calls in the same order with vectors of the
/// same length (a collective operation): a rank that skips one leaves the
/// others waiting. The result must be the same bits on every rank, and the
/// same from run to run: implementations add the ranks' vectors in rank
/// order, `((v_0 + v_1) + v_2) + …`, whatever the transport.
///
/// ```
/// use oracle_contract::{Collective, SingleProcess};
/// let one = SingleProcess;
/// let mut v = [1.0, 2.0];
/// one.sum(&mut v); // one rank: nothing to add
/// assert_eq!((v, one.rank(), one.ranks()), ([1.0, 2.0], 0, 1));
/// ```
pub trait Collective: Send + Sync + Debug {
    /// This process's rank, `0..ranks()`.
    fn rank(&self) -> usize;

    /// The number of ranks `R`.
    fn ranks(&self) -> usize;

    /// Replaces `values` on every rank by the element-wise sum over ranks,
    /// `Σ_r values_r`, added in rank order.
    fn sum(&self, values: &mut [f64]);

    /// Replaces `values` on every rank by the element-wise maximum over ranks.
    fn max(&self, values: &mut [f64]);
}

/// One rank: [`Collective::sum`] and [`Collective::max`] leave the values as
/// they are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SingleProcess;

impl Collective for SingleProcess {
    fn rank(&self) -> usize {
        0
    }
    fn ranks(&self) -> usize {
        1
    }
    fn sum(&self, _values: &mut [f64]) {}
    fn max(&self, _values: &mut [f64]) {}
}

/// `R` ranks as threads of one process: [`ThreadRanks::group`] returns one
/// handle per rank, each to be moved to its own thread. The same arithmetic
/// as MPI ranks (sums in rank order), without MPI: how the distributed code
/// paths are tested in every build.
///
/// ```
/// use oracle_contract::{Collective, ThreadRanks};
/// let ranks = ThreadRanks::group(3);
/// let sums: Vec<Vec<f64>> = std::thread::scope(|s| {
///     let handles: Vec<_> = ranks
///         .into_iter()
///         .map(|c| s.spawn(move || {
///             let mut v = vec![c.rank() as f64, 1.0];
///             c.sum(&mut v);
///             v
///         }))
///         .collect();
///     handles.into_iter().map(|h| h.join().unwrap()).collect()
/// });
/// assert!(sums.iter().all(|v| v == &[3.0, 3.0])); // 0 + 1 + 2, 1 + 1 + 1
/// ```
#[derive(Debug, Clone)]
pub struct ThreadRanks {
    rank: usize,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    slots: Mutex<Vec<Vec<f64>>>,
    barrier: Barrier,
}

impl ThreadRanks {
    /// Handles for ranks `0..ranks` of one group.
    ///
    /// # Panics
    /// If `ranks` is 0.
    pub fn group(ranks: usize) -> Vec<ThreadRanks> {
        assert!(ranks > 0, "a group needs at least one rank");
        let shared = Arc::new(Shared { slots: Mutex::new(vec![Vec::new(); ranks]), barrier: Barrier::new(ranks) });
        (0..ranks).map(|rank| ThreadRanks { rank, shared: shared.clone() }).collect()
    }

    /// Every rank's `values`, in rank order, combined by `op` into `values`.
    fn combine(&self, values: &mut [f64], op: fn(f64, f64) -> f64) {
        self.shared.slots.lock().unwrap_or_else(|e| e.into_inner())[self.rank] = values.to_vec();
        self.shared.barrier.wait();
        {
            let slots = self.shared.slots.lock().unwrap_or_else(|e| e.into_inner());
            assert!(slots.iter().all(|s| s.len() == values.len()), "ranks reduced vectors of different lengths");
            values.copy_from_slice(&slots[0]);
            for slot in &slots[1..] {
                for (v, &x) in values.iter_mut().zip(slot) {
                    *v = op(*v, x);
                }
            }
        }
        // Nobody writes a slot again before everybody has read them all.
        self.shared.barrier.wait();
    }
}

impl Collective for ThreadRanks {
    fn rank(&self) -> usize {
        self.rank
    }
    fn ranks(&self) -> usize {
        self.shared.barrier_len()
    }
    fn sum(&self, values: &mut [f64]) {
        self.combine(values, |a, b| a + b);
    }
    fn max(&self, values: &mut [f64]) {
        self.combine(values, f64::max);
    }
}

impl Shared {
    fn barrier_len(&self) -> usize {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// The rows `[start, end)` of `n` items that rank `rank` of `ranks` holds:
/// contiguous blocks in rank order, the first `n mod R` one item longer, so
/// that the ranks' rows concatenated in rank order are the original order.
///
/// ```
/// use oracle_contract::collective::block;
/// assert_eq!((0..3).map(|r| block(10, r, 3)).collect::<Vec<_>>(), [0..4, 4..7, 7..10]);
/// ```
pub fn block(n: usize, rank: usize, ranks: usize) -> std::ops::Range<usize> {
    let (base, extra) = (n / ranks, n % ranks);
    let start = rank * base + rank.min(extra);
    start..start + base + usize::from(rank < extra)
}
