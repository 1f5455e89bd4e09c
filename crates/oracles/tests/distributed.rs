//! Fits over ranks (`Problem::distributed`, ranks as threads: `ThreadRanks`)
//! against one fit of the whole problem: every oracle that says it supports
//! ranks (`Oracle::distributed`) must give every rank the same model, bit for
//! bit, and the whole problem's model — bit for bit where the class adds its
//! sums in one process's order (linear, constant, zero, boosting), else to
//! 1e-9 relative (indexed-linear, mlp); its losses are the whole problem's.
//! The MLP and boosting are checked cold, warm and warm with kept scores,
//! over 2 and 3 ranks with very unequal blocks (a rank of one row, a rank
//! with fewer rows than a minibatch).

use oracles::constant::ConstantOracle;
use oracles::indexed::IndexedLinearOracle;
use oracles::linear::LinearOracle;
use oracles::zero::ZeroOracle;
use oracles::{
    Features, FitContext, Model, Oracle, Problem, ThreadRanks, fit_monotone, fit_monotone_scored, logistic_loss,
    model_loss,
};
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

/// What one rank (or one process) returns from a cold fit, a warm fit and a
/// warm `fit_monotone_scored` (kept scores): each model's scores on every
/// row, and the losses.
#[derive(Debug, Clone, PartialEq)]
struct Fits {
    cold: Vec<f64>,
    warm: Vec<f64>,
    scored: Vec<f64>,
    /// This rank's kept scores after the scored fit.
    kept: Vec<f64>,
    losses: [f64; 3],
}

/// Cold (seed 1), warm from it (seed 2) and warm with kept scores (seed 3),
/// on `problem` (rows `rows` of `data`).
fn three_fits(oracle: &dyn Oracle, data: &Data, problem: &Problem<'_>) -> Fits {
    let cold = fit_monotone(oracle, problem, None, FitContext { seed: 1 }).unwrap();
    let warm = fit_monotone(oracle, problem, Some(cold.model.as_ref()), FitContext { seed: 2 }).unwrap();
    let mut kept = vec![0.0; problem.rows() * problem.classes()];
    warm.model.score(problem.features(), &mut kept).unwrap();
    let scored =
        fit_monotone_scored(oracle, problem, Some(warm.model.as_ref()), FitContext { seed: 3 }, &mut kept).unwrap();
    Fits {
        cold: scores(cold.model.as_ref(), data),
        warm: scores(warm.model.as_ref(), data),
        scored: scores(scored.model.as_ref(), data),
        kept,
        losses: [cold.loss, warm.loss, scored.loss],
    }
}

/// [`three_fits`] on each rank of a group holding the blocks `blocks` of the rows.
fn three_fits_over(oracle: &dyn Oracle, data: &Data, blocks: &[std::ops::Range<usize>]) -> Vec<Fits> {
    std::thread::scope(|s| {
        let handles: Vec<_> = ThreadRanks::group(blocks.len())
            .into_iter()
            .zip(blocks)
            .map(|(c, rows)| {
                s.spawn(move || {
                    let problem = data.problem(rows.clone()).distributed(&c);
                    three_fits(oracle, data, &problem)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The largest relative difference between `a` and `b` (relative to the
/// larger magnitude, at least 1).
fn max_relative(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs() / x.abs().max(y.abs()).max(1.0)).fold(0.0, f64::max)
}

/// Splits of `rows` rows over 2 and 3 ranks: even blocks, very unequal
/// ones, and a rank holding fewer rows than a minibatch (or one row).
fn splits(rows: usize) -> Vec<Vec<std::ops::Range<usize>>> {
    vec![
        vec![0..rows / 2, rows / 2..rows],
        vec![0..5, 5..rows],
        (0..3).map(|r| oracles::collective::block(rows, r, 3)).collect(),
        vec![0..rows - 40, rows - 40..rows - 39, rows - 39..rows],
    ]
}

/// Every rank's fits equal rank 0's bit for bit, and the whole problem's
/// (bit for bit with `bitwise`, else to 1e-9 relative); returns the largest
/// relative difference seen.
fn check_against_one_process(oracle: &dyn Oracle, data: &Data, bitwise: bool) -> f64 {
    assert!(oracle.distributed(), "{}", oracle.kind());
    let whole = three_fits(oracle, data, &data.problem(0..data.rows));
    let c = data.classes;
    let mut worst = 0.0f64;
    for blocks in splits(data.rows) {
        let fits = three_fits_over(oracle, data, &blocks);
        for (r, (f, rows)) in fits.iter().zip(&blocks).enumerate() {
            let what = format!("{} over {blocks:?}: rank {r}", oracle.kind());
            let (mine, theirs) = (&fits[0], f);
            assert_eq!((&mine.cold, &mine.warm, &mine.scored), (&theirs.cold, &theirs.warm, &theirs.scored), "{what}");
            assert_eq!(mine.losses.map(f64::to_bits), theirs.losses.map(f64::to_bits), "{what}");
            // Kept scores are the returned model's own scores of the rank's rows.
            assert_eq!(f.kept, f.scored[rows.start * c..rows.end * c], "{what}: kept scores");
            for (a, b) in [(&f.cold, &whole.cold), (&f.warm, &whole.warm), (&f.scored, &whole.scored)] {
                if bitwise {
                    assert_eq!(a, b, "{what}: not one process's bits");
                }
                worst = worst.max(max_relative(a, b));
            }
            if bitwise {
                assert_eq!(f.losses.map(f64::to_bits), whole.losses.map(f64::to_bits), "{what}: losses");
            }
            worst = worst.max(max_relative(&f.losses, &whole.losses));
            assert!(worst <= 1e-9, "{what}: relative difference {worst:e} from one process");
        }
    }
    // One rank is one process: the same bits.
    let one = three_fits_over(oracle, data, std::slice::from_ref(&(0..data.rows)));
    assert_eq!(one[0], whole, "{}: one rank", oracle.kind());
    worst
}

#[test]
fn mlp_ranks_fit_the_whole_problem() {
    use oracles::mlp::MlpOracle;
    // 600 rows in minibatches of 32: 19 minibatches an epoch, the last short.
    let d = data(11, 600, 4, 3);
    let oracles = [
        MlpOracle { hidden: 6, minibatch: 32, epochs: 2, ..MlpOracle::unary() },
        MlpOracle { hidden: 5, minibatch: 32, epochs: 1, biases: true, step_halvings: 2, ..MlpOracle::pairwise() },
        // Minibatches larger than the problem (capped at every row).
        MlpOracle { hidden: 4, minibatch: 1000, epochs: 3, ..MlpOracle::unary() },
    ];
    for oracle in &oracles {
        let worst = check_against_one_process(oracle, &d, false);
        eprintln!("mlp {oracle:?}: largest relative difference from one process {worst:e}");
    }
}

#[test]
fn boosting_ranks_fit_the_whole_problem() {
    use oracles::boosting::{BoostingOracle, LeafValues, SplitGain, Trees};
    // 600 rows: subsamples of 250 (drawn over every rank's rows) and of all rows.
    let d = data(13, 600, 4, 3);
    let small = BoostingOracle {
        rounds: 3,
        subsample: 250,
        min_child_fraction: 0.05,
        min_split_fraction: 0.1,
        bins: 16,
        leaf_l2: 1.0,
        ..Default::default()
    };
    let oracles = [
        small,
        BoostingOracle { max_depth: Some(2), subsample: 10_000, ..small },
        BoostingOracle { split_gain: SplitGain::Newton, trees: Trees::PerClass, max_leaves: Some(4), ..small },
        BoostingOracle { leaf_values: LeafValues::Newton, split_gain: SplitGain::Newton, ..small },
    ];
    for oracle in &oracles {
        let worst = check_against_one_process(oracle, &d, true);
        eprintln!("boosting {oracle:?}: largest relative difference from one process {worst:e}");
    }
}

#[test]
fn boosting_bins_come_from_one_process_sample_of_every_rank_rows() {
    use oracles::boosting::BoostingOracle;
    // More rows than the 50,000 the bin thresholds are computed from: the
    // sample is drawn over every rank's rows and its values gathered.
    let d = data(17, 60_000, 3, 2);
    let oracle =
        BoostingOracle { rounds: 2, subsample: 400, bins: 64, leaf_l2: 1.0, max_depth: Some(3), ..Default::default() };
    check_against_one_process(&oracle, &d, true);
}

/// `model_loss` scores 4096 rows at a time instead of all of them at once:
/// its loss is `logistic_loss` of every row's scores, bit for bit, in one
/// process and over 2, 3 and 5 ranks (chunks split between ranks).
#[test]
fn model_loss_is_the_logistic_loss_of_all_the_scores_bit_for_bit() {
    let d = data(11, 9000, 4, 3);
    let whole_problem = d.problem(0..d.rows);
    let model = fit_monotone(&LinearOracle::default(), &whole_problem, None, FitContext { seed: 1 }).unwrap().model;
    let whole = logistic_loss(&whole_problem, &scores(model.as_ref(), &d), None);
    assert_eq!(model_loss(model.as_ref(), &whole_problem).unwrap().to_bits(), whole.to_bits());
    for ranks in [2, 3, 5] {
        let losses: Vec<f64> = std::thread::scope(|s| {
            let handles: Vec<_> = ThreadRanks::group(ranks)
                .into_iter()
                .map(|c| {
                    let (d, model) = (&d, model.as_ref());
                    s.spawn(move || {
                        let rows = oracles::collective::block(d.rows, oracles::Collective::rank(&c), ranks);
                        model_loss(model, &d.problem(rows).distributed(&c)).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(losses.iter().all(|l| l.to_bits() == whole.to_bits()), "{ranks} ranks: {losses:?} vs {whole}");
    }
}
