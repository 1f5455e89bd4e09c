//! Peak memory of a learning iteration (issue: Stanford at full scale needed
//! 13.5 MiB per image). The pairwise type's `θ` (`rows × |Y|²`) is by far the
//! largest array; the fit's biases are written into its buffer (or, for a type
//! that keeps its scores there, computed row by row) and the refresh scores
//! into it in bounded groups, so a learning iteration must not allocate a
//! second or third array of that size. A counting global allocator measures
//! the bytes live at once.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use structlearn::oracle_config::oracle_from_json;
use structlearn::{Dataset, Evaluate, Example, FactorTypeInfo, FeatureBlock, TrainConfig, Trainer};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn note(delta: isize) {
    let now = LIVE.fetch_add(delta, Relaxed) + delta;
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Bytes allocated at the peak of one learning iteration beyond the trainer's
/// state, the trainer's state, and the size of the pairwise `θ`, with
/// `oracle` for both types.
fn extra_bytes(oracle: &serde_json::Value) -> (isize, isize, isize) {
    let (images, h, w, labels) = (96, 10, 10, 8);
    let graph = Arc::new(factor_graph::grid(h, w, labels).unwrap());
    let pairs = h * (w - 1) + (h - 1) * w;
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let examples = (0..images)
        .map(|k| {
            let truth: Vec<usize> = (0..h * w).map(|i| (i / w * labels / h + k) % labels).collect();
            let unary = truth.iter().flat_map(|&y| [y as f64 + rng.random_range(-2.0..2.0), 1.0]).collect();
            let pair = (0..pairs).flat_map(|_| [rng.random::<f64>(), 1.0]).collect();
            Example::new(
                format!("image {k}"),
                graph.clone(),
                Some(truth),
                vec![FeatureBlock { dim: 2, values: unary }, FeatureBlock { dim: 2, values: pair }],
            )
        })
        .collect();
    let data =
        Dataset::new(vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 2)], examples).unwrap();
    let oracles = vec![
        ("unary".into(), oracle_from_json(oracle).unwrap()),
        ("pairwise".into(), oracle_from_json(oracle).unwrap()),
    ];
    let config = TrainConfig { learning_iterations: 2, evaluate: Evaluate::Never, ..TrainConfig::default() };
    let empty = LIVE.load(Relaxed);
    let mut trainer = Trainer::new(&data, oracles, config).unwrap();
    let pair_theta_bytes = (images * pairs * labels * labels * 8) as isize;
    let before = LIVE.load(Relaxed);
    PEAK.store(before, Relaxed);
    let outcome = trainer.train().unwrap();
    let extra = PEAK.load(Relaxed) - before;
    assert!(outcome.history.last().unwrap().objective.is_finite());
    (extra, before - empty, pair_theta_bytes)
}

// One test, so that nothing else allocates while it counts.
#[test]
fn a_learning_iteration_holds_the_pairwise_potentials_once() {
    // A linear class is cheap to score, so θ is not stored: a fit reads the
    // biases from an array of their own while that holds at most 2^23 entries
    // (64 MiB; this test's pairwise type: 1.1M), row by row above. Beside it:
    // pooled features and buffers of one example per thread (inference
    // workspace, gathered θ, message offsets), small beside 96 examples' θ.
    let (extra, state, theta) = extra_bytes(&serde_json::json!({"kind": "linear"}));
    assert!(
        extra < theta + theta / 2,
        "linear: training allocated {extra} bytes beyond the trainer's state at its peak; the pairwise θ is \
         {theta} bytes"
    );
    // A linear class is cheap to score, so θ is not stored at all: the
    // trainer's state is the messages (a quarter of θ's size at 8 labels:
    // 2 × 8 of 64 entries per pair) and the pooled labels and regions.
    assert!(
        state < theta / 2,
        "linear: the trainer's state is {state} bytes, the pairwise θ {theta}: θ should not be stored"
    );
    // Boosting keeps the scores instead of θ between fits (θ is computed as it
    // is gathered); a fit computes the biases row by row from the messages,
    // so it holds no array of θ's size beside them (before, it stored the
    // biases: ≥ 1 × pair_theta_bytes more).
    // (A small subsample and few bins: the round's buffers are subsample ×
    // (3|Y|² + …) values and a node's histogram bins × dim × (|Y|² + 2), at
    // this small scale not negligible beside θ.)
    let spec = serde_json::json!({"kind": "boosting", "rounds": 2, "subsample": 500, "bins": 16});
    let (extra, state, theta) = extra_bytes(&spec);
    assert!(
        extra < theta / 2,
        "boosting: training allocated {extra} bytes beyond the trainer's state at its peak; the pairwise θ is \
         {theta} bytes"
    );
    // Boosting's scores are the one array of θ's size it keeps.
    assert!(state >= theta, "boosting: the trainer's state is {state} bytes, the pairwise θ {theta}");
}
