//! Models and optimiser memories beyond `oracles::MAX_VALUES` are refused
//! with a typed error naming the hyper-parameter, before anything is
//! allocated (a typo such as `hidden = 100000000000` used to abort the
//! process on a failed allocation).

use oracles::indexed::IndexedLinearModel;
use oracles::linear::LinearOracle;
use oracles::mlp::MlpOracle;
use oracles::optim::{LbfgsOptions, lbfgs_minimize};
use oracles::{Features, FitContext, MAX_VALUES, Oracle, OracleError, Problem};

fn refused_naming<T: std::fmt::Debug>(result: Result<T, OracleError>, expected: &str) {
    match result {
        Err(OracleError::InvalidHyperParameter { name, reason }) => {
            assert_eq!(name, expected, "{reason}");
            assert!(reason.contains(&MAX_VALUES.to_string()), "{reason}");
        }
        other => panic!("{expected}: {other:?}"),
    }
}

#[test]
fn oversized_models_and_memories_are_refused_before_allocating() {
    let x = [0.5, 1.0, -0.5, 1.0];
    let problem = Problem::new(Features::new(&x, 2, 2).unwrap(), &[0, 1], &[0.0; 4], 2, None).unwrap();
    let ctx = FitContext { seed: 0 };
    refused_naming(MlpOracle { hidden: 1 << 40, ..Default::default() }.fit(&problem, None, ctx), "hidden");
    refused_naming(MlpOracle { hidden: usize::MAX, ..Default::default() }.fit(&problem, None, ctx), "hidden");
    refused_naming(IndexedLinearModel::zeros(3, 1 << 40, 2), "groups");
    // 2 × memory × parameters values of L-BFGS memory.
    let opts = LbfgsOptions { memory: 1000, ..Default::default() };
    let mut big = vec![1.0; 1 << 18];
    refused_naming(
        lbfgs_minimize(
            |x, g| {
                x.iter()
                    .zip(g)
                    .map(|(x, g)| {
                        *g = 2.0 * x;
                        x * x
                    })
                    .sum()
            },
            &mut big,
            &opts,
        ),
        "memory",
    );
    // A linear model over more weights than the limit (2^9 features × 2^20 classes).
    let (dim, classes) = (1 << 9, 1 << 20);
    let x = vec![0.0; dim];
    let bias = vec![0.0; classes];
    let problem = Problem::new(Features::new(&x, 1, dim).unwrap(), &[0], &bias, classes, None).unwrap();
    refused_naming(LinearOracle::default().fit(&problem, None, ctx), "classes");
    // Within the limits the same settings fit.
    assert!(MlpOracle { hidden: 3, ..Default::default() }.fit(&problem_small(), None, ctx).is_ok());
}

fn problem_small() -> Problem<'static> {
    static X: [f64; 4] = [0.5, 1.0, -0.5, 1.0];
    Problem::new(Features::new(&X, 2, 2).unwrap(), &[0, 1], &[0.0; 4], 2, None).unwrap()
}
