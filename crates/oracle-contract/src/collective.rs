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

use std::collections::{HashMap, VecDeque};
use std::fmt::Debug;
use std::sync::{Arc, Barrier, Condvar, Mutex};

/// A group of ranks that exchange vectors of numbers (what MPI provides).
///
/// Every rank must make the same collective calls ([`Collective::gather`],
/// [`Collective::sum`], [`Collective::max`]) in the same order: a rank that
/// skips one leaves the others waiting. Results must be the same bits on
/// every rank and from run to run: [`Collective::sum`] adds the ranks'
/// vectors in rank order, `((v_0 + v_1) + v_2) + …`, whatever the transport.
/// Implementations provide the gather and the point-to-point messages; the
/// sum and the maximum follow from the gather.
///
/// ```
/// use oracle_contract::{Collective, SingleProcess};
/// let one = SingleProcess;
/// let mut v = [1.0, 2.0];
/// one.sum(&mut v); // one rank: nothing to add
/// assert_eq!((v, one.rank(), one.ranks()), ([1.0, 2.0], 0, 1));
/// assert_eq!(one.gather(&[3.0]), [3.0]);
/// ```
pub trait Collective: Send + Sync + Debug {
    /// This process's rank, `0..ranks()`.
    fn rank(&self) -> usize;

    /// The number of ranks `R`.
    fn ranks(&self) -> usize;

    /// Every rank's `values` (their lengths may differ), concatenated in rank
    /// order, on every rank.
    fn gather(&self, values: &[f64]) -> Vec<f64>;

    /// Sends `values` to rank `to`, which takes them with
    /// [`Collective::receive`]; must not wait for that receive to start
    /// beyond what the transport needs to take the message.
    fn send(&self, to: usize, values: &[f64]);

    /// Takes the next message from rank `from` (sent with
    /// [`Collective::send`], of exactly `values.len()` numbers) into `values`,
    /// waiting for it.
    fn receive(&self, from: usize, values: &mut [f64]);

    /// Replaces `values` on every rank by the element-wise sum over ranks,
    /// `Σ_r values_r`, added in rank order. Every rank passes the same length.
    fn sum(&self, values: &mut [f64]) {
        combine(self, values, |a, b| a + b);
    }

    /// Replaces `values` on every rank by the element-wise maximum over ranks.
    fn max(&self, values: &mut [f64]) {
        combine(self, values, f64::max);
    }
}

/// Every rank's `values` combined element-wise by `op`, in rank order.
fn combine<C: Collective + ?Sized>(c: &C, values: &mut [f64], op: fn(f64, f64) -> f64) {
    if c.ranks() == 1 {
        return;
    }
    let all = c.gather(values);
    let n = values.len();
    assert_eq!(all.len(), n * c.ranks(), "ranks combined vectors of different lengths");
    values.copy_from_slice(&all[..n]);
    for block in all.chunks_exact(n.max(1)).skip(1) {
        for (v, &x) in values.iter_mut().zip(block) {
            *v = op(*v, x);
        }
    }
}

/// One rank: [`Collective::sum`] and [`Collective::max`] leave the values as
/// they are; there is no other rank to send to or receive from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SingleProcess;

impl Collective for SingleProcess {
    fn rank(&self) -> usize {
        0
    }
    fn ranks(&self) -> usize {
        1
    }
    fn gather(&self, values: &[f64]) -> Vec<f64> {
        values.to_vec()
    }
    /// # Panics
    /// Always: there is no other rank.
    fn send(&self, to: usize, _values: &[f64]) {
        panic!("one process has no rank {to} to send to");
    }
    /// # Panics
    /// Always: there is no other rank.
    fn receive(&self, from: usize, _values: &mut [f64]) {
        panic!("one process has no rank {from} to receive from");
    }
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

/// Messages sent but not yet received, by (from, to), oldest first.
type Mailboxes = HashMap<(usize, usize), VecDeque<Vec<f64>>>;

#[derive(Debug)]
struct Shared {
    ranks: usize,
    slots: Mutex<Vec<Vec<f64>>>,
    barrier: Barrier,
    /// Messages in flight, by (from, to), oldest first.
    mail: Mutex<Mailboxes>,
    arrived: Condvar,
}

impl ThreadRanks {
    /// Handles for ranks `0..ranks` of one group.
    ///
    /// # Panics
    /// If `ranks` is 0.
    pub fn group(ranks: usize) -> Vec<ThreadRanks> {
        assert!(ranks > 0, "a group needs at least one rank");
        let shared = Arc::new(Shared {
            ranks,
            slots: Mutex::new(vec![Vec::new(); ranks]),
            barrier: Barrier::new(ranks),
            mail: Mutex::new(HashMap::new()),
            arrived: Condvar::new(),
        });
        (0..ranks).map(|rank| ThreadRanks { rank, shared: shared.clone() }).collect()
    }
}

impl Collective for ThreadRanks {
    fn rank(&self) -> usize {
        self.rank
    }
    fn ranks(&self) -> usize {
        self.shared.ranks
    }
    fn gather(&self, values: &[f64]) -> Vec<f64> {
        self.shared.slots.lock().unwrap_or_else(|e| e.into_inner())[self.rank] = values.to_vec();
        self.shared.barrier.wait();
        let all = self.shared.slots.lock().unwrap_or_else(|e| e.into_inner()).concat();
        // Nobody writes a slot again before everybody has read them all.
        self.shared.barrier.wait();
        all
    }
    fn send(&self, to: usize, values: &[f64]) {
        let mut mail = self.shared.mail.lock().unwrap_or_else(|e| e.into_inner());
        mail.entry((self.rank, to)).or_default().push_back(values.to_vec());
        self.shared.arrived.notify_all();
    }
    fn receive(&self, from: usize, values: &mut [f64]) {
        let mut mail = self.shared.mail.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(message) = mail.get_mut(&(from, self.rank)).and_then(VecDeque::pop_front) {
                assert_eq!(
                    message.len(),
                    values.len(),
                    "rank {from} sent {} numbers, {} expected",
                    message.len(),
                    values.len()
                );
                values.copy_from_slice(&message);
                return;
            }
            mail = self.shared.arrived.wait(mail).unwrap_or_else(|e| e.into_inner());
        }
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
