//! Fits over ranks (`Problem::distributed`, ranks as threads: `ThreadRanks`)
//! against one fit of the whole problem: every oracle that says it supports
//! ranks (`Oracle::distributed`) must give every rank the same model, bit for
//! bit, and the whole problem's model — bit for bit where the class adds its
//! sums in one process's order (linear, constant, zero), else to 1e-9
//! relative (indexed-linear); its losses are the whole problem's.

use oracles::constant::ConstantOracle;
use oracles::indexed::IndexedLinearOracle;
use oracles::linear::LinearOracle;
use oracles::zero::ZeroOracle;
use oracles::{Features, FitContext, Model, Oracle, Problem, ThreadRanks, fit_monotone, logistic_loss};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

struct Data {
    x: Vec<f64>,
    labels: Vec<usize>,
    bias: Vec<f64>,
    weights: Vec<f64>,
    rows: usize,
    dim: usize,
    classes: usize,
}

/// Random rows; the last feature a group index 0..3 (for the indexed class).
fn data(seed: u64, rows: usize, dim: usize, classes: usize) -> Data {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut x = Vec::with_capacity(rows * dim);
    for _ in 0..rows {
        for _ in 0..dim - 1 {
            x.push(rng.random_range(-1.0..1.0));
        }
        x.push(rng.random_range(0..3) as f64);
    }
    let labels = (0..rows).map(|_| rng.random_range(0..classes)).collect();
    let bias = (0..rows * classes).map(|_| rng.random_range(-0.5..0.5)).collect();
    let weights = (0..rows).map(|_| rng.random_range(0.5..1.5)).collect();
    Data { x, labels, bias, weights, rows, dim, classes }
}

impl Data {
    /// Rows `range` as a problem.
    fn problem(&self, range: std::ops::Range<usize>) -> Problem<'_> {
        let (d, c) = (self.dim, self.classes);
        Problem::new(
            Features::new(&self.x[range.start * d..range.end * d], range.len(), d).unwrap(),
            &self.labels[range.clone()],
            &self.bias[range.start * c..range.end * c],
            c,
            Some(&self.weights[range]),
        )
        .unwrap()
    }
}

/// The model of each of `ranks` ranks fitting its block of rows (twice: cold, then warm), and each one's loss.
fn fit_over_ranks(oracle: &dyn Oracle, data: &Data, ranks: usize) -> Vec<(Vec<f64>, f64)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = ThreadRanks::group(ranks)
            .into_iter()
            .map(|c| {
                s.spawn(move || {
                    let rows = oracles::collective::block(data.rows, oracles::Collective::rank(&c), ranks);
                    let problem = data.problem(rows).distributed(&c);
                    let first = fit_monotone(oracle, &problem, None, FitContext { seed: 1 }).unwrap();
                    let second =
                        fit_monotone(oracle, &problem, Some(first.model.as_ref()), FitContext { seed: 2 }).unwrap();
                    (scores(second.model.as_ref(), data), second.loss)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// A model's scores on every row (how models are compared whatever their parameters).
fn scores(model: &dyn Model, data: &Data) -> Vec<f64> {
    let mut out = vec![0.0; data.rows * data.classes];
    model.score(Features::new(&data.x, data.rows, data.dim).unwrap(), &mut out).unwrap();
    out
}

fn assert_close(a: &[f64], b: &[f64], what: &str) {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0), "{what}: entry {i}: {x} vs {y}");
    }
}

#[test]
fn ranks_fit_the_whole_problem() {
    // 9000 rows: chunks of 4096 rows split between ranks, and (5 ranks) ranks inside one chunk.
    let d = data(7, 9000, 4, 3);
    let whole_problem = d.problem(0..d.rows);
    let oracles: Vec<(Box<dyn Oracle>, bool)> = vec![
        (Box::new(LinearOracle::default()), true),
        (Box::new(LinearOracle { l2: 0.5, ..Default::default() }), true),
        (Box::new(ConstantOracle::default()), true),
        (Box::new(IndexedLinearOracle::default()), false),
        (Box::new(ZeroOracle), true),
        (LinearOracle::default().gradient_step().unwrap(), false),
    ];
    for (oracle, bitwise) in &oracles {
        assert!(oracle.distributed(), "{}", oracle.kind());
        let first = fit_monotone(oracle.as_ref(), &whole_problem, None, FitContext { seed: 1 }).unwrap();
        let whole =
            fit_monotone(oracle.as_ref(), &whole_problem, Some(first.model.as_ref()), FitContext { seed: 2 }).unwrap();
        let whole_scores = scores(whole.model.as_ref(), &d);
        for ranks in [1, 2, 3, 5] {
            let per_rank = fit_over_ranks(oracle.as_ref(), &d, ranks);
            for (r, (s, loss)) in per_rank.iter().enumerate() {
                assert_eq!(s, &per_rank[0].0, "{} with {ranks} ranks: rank {r} differs from rank 0", oracle.kind());
                assert_eq!(loss.to_bits(), per_rank[0].1.to_bits());
                assert_close(s, &whole_scores, &format!("{} over {ranks} ranks", oracle.kind()));
                assert_close(&[*loss], &[whole.loss], "loss");
                if *bitwise {
                    assert_eq!(s, &whole_scores, "{} over {ranks} ranks: not one process's bits", oracle.kind());
                    assert_eq!(loss.to_bits(), whole.loss.to_bits());
                }
            }
            if ranks == 1 {
                // One rank is one process: the same bits.
                assert_eq!(per_rank[0].0, whole_scores);
            }
        }
    }
}

#[test]
fn the_loss_of_a_distributed_problem_is_the_sum_over_ranks() {
    let d = data(3, 9001, 3, 4);
    let zero = vec![0.0; d.rows * d.classes];
    let whole = logistic_loss(&d.problem(0..d.rows), &zero, None);
    let losses: Vec<f64> = std::thread::scope(|s| {
        let handles: Vec<_> = ThreadRanks::group(2)
            .into_iter()
            .map(|c| {
                let (d, zero) = (&d, &zero);
                s.spawn(move || {
                    let rows = oracles::collective::block(d.rows, oracles::Collective::rank(&c), 2);
                    let p = d.problem(rows.clone()).distributed(&c);
                    assert_close(&[p.total_weight()], &[d.weights.iter().sum::<f64>()], "total weight");
                    logistic_loss(&p, &zero[rows.start * d.classes..rows.end * d.classes], None)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(losses, [whole, whole], "one process's bits on every rank");
}

#[test]
fn classes_that_cannot_spread_a_fit_say_so() {
    assert!(!oracles::boosting::BoostingOracle::default().distributed());
    assert!(!oracles::mlp::MlpOracle::default().distributed());
}
