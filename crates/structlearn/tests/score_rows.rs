//! The trainer refreshes `θ` by scoring rows in groups of whole examples, not
//! all pooled rows at once; that is exact only because every built-in model
//! scores each row on its own, bit for bit, wherever the row sits in the call.

use oracles::{Features, FitContext, Problem};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use structlearn::oracle_config::builtin_oracle;

#[test]
fn every_builtin_model_scores_a_row_independently_of_the_rest_of_the_call() {
    let (n, d, c) = (3001, 5, 4);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let x: Vec<f64> = (0..n * d).map(|_| rng.random_range(-2.0..2.0)).collect();
    let labels: Vec<usize> =
        (0..n).map(|k| usize::from(x[k * d] > 0.0) + 2 * usize::from(x[k * d + 1] > 0.5)).collect();
    let bias: Vec<f64> = (0..n * c).map(|_| rng.random_range(-0.5..0.5)).collect();
    let problem = Problem::new(Features::new(&x, n, d).unwrap(), &labels, &bias, c, None).unwrap();
    for kind in ["linear", "mlp", "boosting", "constant", "zero"] {
        let model = builtin_oracle(kind).unwrap().fit(&problem, None, FitContext { seed: 3 }).unwrap();
        let mut whole = vec![0.0; n * c];
        model.score(problem.features(), &mut whole).unwrap();
        // Cut points that move rows across SIMD lanes, blocks and rayon chunks.
        let cuts = [0, 1, 6, 37, 64, 1000, 1001, 2049, n];
        for w in cuts.windows(2) {
            let (a, b) = (w[0], w[1]);
            let part = Features::new(&x[a * d..b * d], b - a, d).unwrap();
            let mut scores = vec![0.0; (b - a) * c];
            model.score(part, &mut scores).unwrap();
            for (i, (s, t)) in scores.iter().zip(&whole[a * c..b * c]).enumerate() {
                assert_eq!(
                    s.to_bits(),
                    t.to_bits(),
                    "{kind}: row {} class {} scored alone in {a}..{b}",
                    a + i / c,
                    i % c
                );
            }
        }
        assert!(whole.iter().all(|v| v.is_finite()), "{kind}");
    }
}
