//! `fit_monotone_scored` on an oracle whose fit is always worse than its warm
//! start: the fit is rejected, and the scores it leaves are the warm start's
//! again (the default `fit_scored` had overwritten them with the new model's).

use oracles::linear::LinearModel;
use oracles::{Features, FitContext, Model, Oracle, OracleError, Problem, fit_monotone_scored, model_loss};

/// Always returns the same badly wrong linear model.
#[derive(Debug)]
struct Worse;

impl Oracle for Worse {
    fn kind(&self) -> &str {
        "linear"
    }
    fn validate(&self) -> Result<(), OracleError> {
        Ok(())
    }
    fn fit(&self, p: &Problem<'_>, _: Option<&dyn Model>, _: FitContext) -> Result<Box<dyn Model>, OracleError> {
        Ok(Box::new(LinearModel::new(p.dim(), p.classes(), vec![-5.0, 5.0])?))
    }
}

#[test]
fn a_rejected_fit_leaves_the_warm_start_scores() {
    let x = [0.0, 1.0, 2.0, 3.0];
    let p = Problem::new(Features::new(&x, 4, 1).unwrap(), &[0, 0, 1, 1], &[0.0; 8], 2, None).unwrap();
    let warm = LinearModel::new(1, 2, vec![-0.5, 0.5]).unwrap();
    let mut warm_scores = vec![0.0; 8];
    warm.score(p.features(), &mut warm_scores).unwrap();
    let mut scores = warm_scores.clone();
    let fit = fit_monotone_scored(&Worse, &p, Some(&warm), FitContext { seed: 0 }, &mut scores).unwrap();
    assert!(fit.rejected);
    assert_eq!(fit.loss, model_loss(&warm, &p).unwrap());
    assert_eq!(scores, warm_scores);

    // Accepted from nothing: the scores are the new model's.
    let mut scores = vec![0.0; 8];
    let fit = fit_monotone_scored(&Worse, &p, None, FitContext { seed: 0 }, &mut scores).unwrap();
    assert!(!fit.rejected);
    let mut direct = vec![0.0; 8];
    fit.model.score(p.features(), &mut direct).unwrap();
    assert_eq!(scores, direct);
    assert_eq!(fit.loss, model_loss(fit.model.as_ref(), &p).unwrap());

    // A buffer of the wrong length is a typed error, not a panic.
    let err = fit_monotone_scored(&Worse, &p, None, FitContext { seed: 0 }, &mut [0.0; 7]).unwrap_err();
    assert!(matches!(err, OracleError::OutputShape { got: 7, expected: 8 }), "{err}");
}
