//! Potentials recomputed from the model ([`oracles::Oracle::cheap_to_score`]:
//! linear, constant, zero, …) instead of stored for every region and
//! configuration give the run the stored ones give, bit for bit: the same
//! objectives, errors and model bytes.

mod common;

use oracles::linear::LinearOracle;
use oracles::{FitContext, FitLosses, Model, Oracle, OracleError, Problem};
use structlearn::{Evaluate, TrainConfig, Trainer};

/// The linear oracle, but not cheap to score: the trainer stores its `θ`.
#[derive(Debug)]
struct Stored(LinearOracle);

impl Oracle for Stored {
    fn kind(&self) -> &str {
        self.0.kind()
    }
    fn validate(&self) -> Result<(), OracleError> {
        self.0.validate()
    }
    fn fit(&self, p: &Problem<'_>, warm: Option<&dyn Model>, ctx: FitContext) -> Result<Box<dyn Model>, OracleError> {
        self.0.fit(p, warm, ctx)
    }
    fn penalty(&self, model: &dyn Model) -> Result<f64, OracleError> {
        self.0.penalty(model)
    }
    fn fit_with_losses(
        &self,
        p: &Problem<'_>,
        warm: Option<&dyn Model>,
        ctx: FitContext,
    ) -> Result<(Box<dyn Model>, FitLosses), OracleError> {
        self.0.fit_with_losses(p, warm, ctx)
    }
}

#[test]
fn recomputed_potentials_give_the_stored_ones_run_bit_for_bit() {
    let data = common::denoising(4, 6, 7, 3);
    let config = TrainConfig { learning_iterations: 4, evaluate: Evaluate::EveryStep, ..TrainConfig::default() };
    let run = |stored: bool| {
        let oracle = |l2: f64| -> Box<dyn Oracle> {
            let linear = LinearOracle { l2, ..LinearOracle::default() };
            if stored { Box::new(Stored(linear)) } else { Box::new(linear) }
        };
        assert_eq!(oracle(0.0).cheap_to_score(), !stored);
        let oracles = vec![("unary".to_string(), oracle(0.0)), ("pairwise".to_string(), oracle(0.01))];
        let outcome = Trainer::new(&data, oracles, config.clone()).unwrap().with_validation(&data).train().unwrap();
        let curve: Vec<_> = outcome
            .history
            .iter()
            .map(|r| (r.objective.to_bits(), r.train_error.map(f64::to_bits), r.validation_error.map(f64::to_bits)))
            .collect();
        (curve, outcome.model.to_bytes().unwrap())
    };
    let (recomputed, stored) = (run(false), run(true));
    assert_eq!(recomputed.0.len(), 16);
    assert_eq!(recomputed.0, stored.0, "objective and error curves");
    assert_eq!(recomputed.1, stored.1, "model bytes");
}
