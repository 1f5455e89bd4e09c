//! Biases computed row by row (`Problem::with_bias_rows`) against the same
//! biases stored (`Problem::new`): every oracle must fit the same model bit for
//! bit, the losses must agree bit for bit, and validation must give the same
//! typed errors. (Algorithm 1 computes the biases of a type that keeps its
//! scores — boosting — from the messages instead of storing a second
//! `rows × classes` array.)

use oracles::boosting::{BoostingOracle, SplitGain, Trees};
use oracles::constant::ConstantOracle;
use oracles::linear::LinearOracle;
use oracles::mlp::MlpOracle;
use oracles::step::{GradientStepOracle, StepClass};
use oracles::zero::ZeroOracle;
use oracles::{
    BiasRows, Features, FitContext, Oracle, OracleError, Problem, fit_monotone, fit_monotone_scored, logistic_loss,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Rows of a stored array, handed out one at a time.
#[derive(Debug)]
struct Stored {
    bias: Vec<f64>,
    classes: usize,
}

impl BiasRows for Stored {
    fn write_row(&self, k: usize, out: &mut [f64]) {
        out.copy_from_slice(&self.bias[k * self.classes..(k + 1) * self.classes]);
    }
}

struct Data {
    x: Vec<f64>,
    labels: Vec<usize>,
    bias: Vec<f64>,
    weights: Vec<f64>,
    rows: usize,
    dim: usize,
}

/// Labels that depend on the features, biases of either sign (some `−∞`,
/// never on a row's label) and uneven weights.
fn data(seed: u64, rows: usize, dim: usize, classes: usize) -> Data {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let x: Vec<f64> = (0..rows * dim).map(|_| rng.random_range(-2.0..2.0)).collect();
    let labels: Vec<usize> = (0..rows)
        .map(|k| {
            let v = x[k * dim] + rng.random_range(-0.5..0.5);
            ((v + 2.0) / 4.0 * classes as f64).clamp(0.0, classes as f64 - 1.0) as usize
        })
        .collect();
    let mut bias: Vec<f64> = (0..rows * classes).map(|_| rng.random_range(-3.0..3.0)).collect();
    for (k, &y) in labels.iter().enumerate() {
        let other = (y + 1 + rng.random_range(0..classes - 1)) % classes;
        if rng.random_range(0.0..1.0) < 0.1 {
            bias[k * classes + other] = f64::NEG_INFINITY;
        }
    }
    let weights = (0..rows).map(|_| rng.random_range(0.5..2.0)).collect();
    Data { x, labels, bias, weights, rows, dim }
}

fn oracles() -> Vec<(&'static str, Box<dyn Oracle>)> {
    let boosting = BoostingOracle { rounds: 4, subsample: 300, ..BoostingOracle::default() };
    vec![
        ("zero", Box::new(ZeroOracle)),
        ("constant", Box::new(ConstantOracle::default())),
        ("linear", Box::new(LinearOracle::default())),
        ("mlp", Box::new(MlpOracle { hidden: 8, epochs: 2, minibatch: 50, ..MlpOracle::default() })),
        ("boosting", Box::new(boosting)),
        ("boosting-newton", Box::new(BoostingOracle { split_gain: SplitGain::Newton, ..boosting })),
        ("boosting-per-class", Box::new(BoostingOracle { trees: Trees::PerClass, ..boosting })),
        ("gradient-step", Box::new(GradientStepOracle { class: StepClass::Linear, l2: 0.1, max_line_search: 20 })),
    ]
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn every_oracle_fits_the_same_model_from_computed_biases() {
    for (rows, dim, classes) in [(500, 3, 4), (1200, 2, 2)] {
        let d = data(rows as u64, rows, dim, classes);
        let source = Stored { bias: d.bias.clone(), classes };
        let features = Features::new(&d.x, d.rows, d.dim).unwrap();
        let dense = Problem::new(features, &d.labels, &d.bias, classes, Some(&d.weights)).unwrap();
        let computed = Problem::with_bias_rows(features, &d.labels, &source, classes, Some(&d.weights)).unwrap();
        assert!(dense.dense_bias().is_some() && computed.dense_bias().is_none());

        let scores: Vec<f64> = (0..rows * classes).map(|i| (i % 7) as f64 * 0.3 - 1.0).collect();
        let (mut g1, mut g2) = (vec![0.0; rows * classes], vec![0.0; rows * classes]);
        let l1 = logistic_loss(&dense, &scores, Some(&mut g1));
        let l2 = logistic_loss(&computed, &scores, Some(&mut g2));
        assert_eq!(l1.to_bits(), l2.to_bits());
        assert_eq!(bits(&g1), bits(&g2));
        assert_eq!(logistic_loss(&computed, &scores, None).to_bits(), l1.to_bits());

        for (name, oracle) in oracles() {
            let ctx = FitContext { seed: 3 };
            let cold = [&dense, &computed].map(|p| fit_monotone(oracle.as_ref(), p, None, ctx).unwrap());
            let warm = [&dense, &computed]
                .map(|p| fit_monotone(oracle.as_ref(), p, Some(cold[0].model.as_ref()), ctx).unwrap());
            for fits in [&cold, &warm] {
                let mut s = [vec![0.0; rows * classes], vec![0.0; rows * classes]];
                for (fit, s) in fits.iter().zip(&mut s) {
                    fit.model.score(features, s).unwrap();
                }
                assert_eq!(bits(&s[0]), bits(&s[1]), "{name} ({rows}×{dim}×{classes}): scores differ");
                assert_eq!(fits[0].loss.to_bits(), fits[1].loss.to_bits(), "{name}: losses differ");
            }
            // An oracle that keeps the scores (boosting) continues from them.
            if oracle.maintains_scores() {
                let mut s = [vec![0.0; rows * classes], vec![0.0; rows * classes]];
                for (p, s) in [&dense, &computed].into_iter().zip(&mut s) {
                    cold[0].model.score(features, s).unwrap();
                    fit_monotone_scored(oracle.as_ref(), p, Some(cold[0].model.as_ref()), ctx, s).unwrap();
                }
                assert_eq!(bits(&s[0]), bits(&s[1]), "{name}: kept scores differ");
            }
        }
    }
}

#[test]
fn computed_biases_are_validated_like_stored_ones() {
    let d = data(7, 50, 2, 3);
    let features = Features::new(&d.x, d.rows, d.dim).unwrap();
    let label = d.labels[20];
    let cases: [(usize, f64, &str); 3] = [
        ((label + 1) % 3, f64::NAN, "InvalidBias"),
        ((label + 2) % 3, f64::INFINITY, "InvalidBias"),
        (label, f64::NEG_INFINITY, "ImpossibleLabel"),
    ];
    for (class, value, kind) in cases {
        let mut bias = d.bias.clone();
        bias[20 * 3 + class] = value;
        // A later bad row too: the first one is reported.
        bias[45 * 3 + d.labels[45]] = f64::NAN;
        let stored = Problem::new(features, &d.labels, &bias, 3, None).unwrap_err();
        let source = Stored { bias, classes: 3 };
        let computed = Problem::with_bias_rows(features, &d.labels, &source, 3, None).unwrap_err();
        assert_eq!(format!("{stored:?}"), format!("{computed:?}"));
        assert!(format!("{computed:?}").starts_with(kind), "{computed:?}");
        assert!(matches!(
            computed,
            OracleError::InvalidBias { row: 20, .. } | OracleError::ImpossibleLabel { row: 20, .. }
        ));
    }
    // The shape checks come first, as for stored biases.
    let source = Stored { bias: d.bias.clone(), classes: 3 };
    let err = Problem::with_bias_rows(features, &d.labels[..49], &source, 3, None).unwrap_err();
    assert!(matches!(err, OracleError::LabelCount { got: 49, rows: 50 }), "{err}");
}
