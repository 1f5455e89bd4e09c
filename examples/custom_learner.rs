//! Write a learner of your own: supply the steps of one learning iteration
//! (a [`Solver`]) and let the [`Executor`] run it — it brings the stopping
//! rule, the evaluation schedule, early stopping, checkpoints and exact
//! resume, Ctrl-C, observers and the model file written after every
//! learning iteration, as for the built-in learners.
//!
//! The learner here, `Independent`, is the baseline without inference: each
//! learning iteration fits every factor type's oracle once, warm-started, on
//! its regions alone (the true configurations, no message biases), i.e.
//! independent multiclass logistic regressions per factor type. It works
//! with any oracle, built-in or registered.
//!
//! Run with `cargo run --release --example custom_learner`; the test
//! `tests/custom_learner.rs` checks it resumes bit for bit.

use std::path::Path;

use oracles::{Features, FitContext, Model, ModelRegistry, Oracle, Problem, fit_monotone};
use serde::{Deserialize, Serialize};
use structlearn::files::{unwrap_binary, write_binary_atomic};
use structlearn::{
    Dataset, Executor, LearnError, PredictOptions, Record, RunState, Solver, StructuredModel, TrainConfig, mix_seed,
};

/// Independent logistic regressions per factor type (module docs).
pub struct Independent<'a> {
    train: &'a Dataset,
    validation: Option<&'a Dataset>,
    config: TrainConfig,
    oracles: Vec<Box<dyn Oracle>>,
    models: Vec<Option<Box<dyn Model>>>,
}

impl<'a> Independent<'a> {
    /// One oracle per factor type, in the data set's type order; `config` is
    /// checked once, here.
    pub fn new(train: &'a Dataset, oracles: Vec<Box<dyn Oracle>>, config: TrainConfig) -> Result<Self, LearnError> {
        config.validate()?;
        if oracles.len() != train.factor_types().len() {
            return Err(LearnError::Config(format!(
                "{} oracles for {} factor types",
                oracles.len(),
                train.factor_types().len()
            )));
        }
        for (k, _) in train.examples().iter().enumerate() {
            train.labels(k)?;
        }
        let models = oracles.iter().map(|_| None).collect();
        Ok(Self { train, validation: None, config, oracles, models })
    }

    /// The pooled problem of factor type `t`: every region of that type of
    /// every example, labelled with its true configuration.
    fn fit(&mut self, t: usize, seed: u64) -> Result<f64, LearnError> {
        let ft = &self.train.factor_types()[t];
        let (mut features, mut labels) = (Vec::new(), Vec::new());
        for (k, ex) in self.train.examples().iter().enumerate() {
            features.extend_from_slice(self.train.features(k, t));
            let truth = self.train.labels(k)?;
            labels.extend(self.train.regions_of_type(k, t).map(|r| ex.graph().config_of(r, truth)));
        }
        let err = |e: oracles::OracleError| LearnError::Config(format!("factor type `{}`: {e}", ft.name));
        let bias = vec![0.0; labels.len() * ft.classes];
        let features = Features::new(&features, labels.len(), ft.dim).map_err(err)?;
        let problem = Problem::new(features, &labels, &bias, ft.classes, None).map_err(err)?;
        let fit = fit_monotone(self.oracles[t].as_ref(), &problem, self.models[t].as_deref(), FitContext { seed })
            .map_err(err)?;
        self.models[t] = Some(fit.model);
        Ok(fit.loss)
    }
}

impl<'a> Solver<'a> for Independent<'a> {
    fn name(&self) -> &str {
        "independent"
    }
    fn config(&self) -> &TrainConfig {
        &self.config
    }
    /// One fit per factor type.
    fn steps_per_iteration(&self) -> usize {
        self.oracles.len()
    }
    fn set_validation(&mut self, validation: &'a Dataset) {
        self.validation = Some(validation);
    }
    fn validation(&self) -> Option<&'a Dataset> {
        self.validation
    }
    fn step(&mut self, iteration: usize, step: usize, _: &[Record]) -> Result<Record, LearnError> {
        let loss = self.fit(step, mix_seed(self.config.seed, iteration, step))?;
        Ok(Record {
            factor_type: Some(self.train.factor_types()[step].name.clone()),
            // What this learner lowers: each type's oracle loss.
            objective: loss,
            oracle_loss: Some(loss),
            ..Record::new(iteration, step, "fit")
        })
    }
    fn evaluate(&mut self, with_train: bool) -> Result<(Option<f64>, Option<f64>), LearnError> {
        let (model, opts) = (self.model()?, PredictOptions::default());
        let train = if with_train { Some(model.error_rate(self.train, &opts)?) } else { None };
        Ok((train, self.validation.map(|v| model.error_rate(v, &opts)).transpose()?))
    }
    fn model(&self) -> Result<StructuredModel, LearnError> {
        let models = self
            .models
            .iter()
            .zip(self.train.factor_types())
            .map(|(m, ft)| match m {
                Some(m) => m.clone_model(),
                None => Box::new(oracles::zero::ZeroModel { dim: ft.dim, classes: ft.classes }),
            })
            .collect();
        StructuredModel::new(self.train.factor_types().to_vec(), vec![1.0; self.models.len()], models)
    }
    fn save_checkpoint(&self, path: &Path, run: &RunState) -> Result<(), LearnError> {
        let models = self
            .models
            .iter()
            .map(|m| m.as_ref().map(|m| Ok((m.kind().to_string(), m.to_bytes()?))).transpose())
            .collect::<Result<Vec<_>, oracles::OracleError>>()
            .map_err(|e| LearnError::Config(e.to_string()))?;
        let best_model = run.best_model.as_ref().map(StructuredModel::to_bytes).transpose()?;
        let body = Checkpoint {
            completed: run.completed,
            history: run.history.clone(),
            elapsed_seconds: run.elapsed_seconds,
            models,
            best_model,
        };
        write_binary_atomic(path, MAGIC, |w| postcard::to_io(&body, w).map(drop).map_err(std::io::Error::other))
    }
    fn resume_from_bytes(
        &mut self,
        bytes: &[u8],
        path: &Path,
        registry: &ModelRegistry,
    ) -> Result<RunState, LearnError> {
        let bad = |why: String| LearnError::Config(format!("{}: {why}", path.display()));
        let cp: Checkpoint =
            postcard::from_bytes(unwrap_binary(path, bytes, MAGIC)?).map_err(|e| bad(e.to_string()))?;
        if cp.models.len() != self.models.len() {
            return Err(bad("a checkpoint of another data set".into()));
        }
        self.models = cp
            .models
            .into_iter()
            .map(|m| m.map(|(kind, bytes)| registry.load(&kind, &bytes)).transpose())
            .collect::<Result<_, _>>()
            .map_err(|e| bad(e.to_string()))?;
        let best_model = cp.best_model.map(|b| StructuredModel::from_bytes(&b, registry, path)).transpose()?;
        Ok(RunState { completed: cp.completed, history: cp.history, elapsed_seconds: cp.elapsed_seconds, best_model })
    }
}

/// Magic bytes of this learner's checkpoint files.
const MAGIC: &[u8; 8] = b"INDEPCK\x01";

/// What a checkpoint holds: the models so far and the run.
#[derive(Serialize, Deserialize)]
struct Checkpoint {
    completed: usize,
    history: Vec<Record>,
    elapsed_seconds: f64,
    models: Vec<Option<(String, Vec<u8>)>>,
    best_model: Option<Vec<u8>>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cfg = datasets::denoising::DenoisingConfig { height: 30, width: 30, train: 6, test: 4, ..Default::default() };
    let data = datasets::denoising::generate(&cfg)?;
    let registry = structlearn::OracleRegistry::builtin();
    let oracles = vec![
        registry.build(&serde_json::json!({"kind": "boosting", "rounds": 5}))?,
        registry.build(&serde_json::json!({"kind": "linear"}))?,
    ];
    let config = TrainConfig { learning_iterations: 4, ..TrainConfig::default() };
    // The executor makes it a learner like the built-in ones: checkpoints, observers, early stopping…
    let mut learner = Executor::for_solver(Independent::new(&data.train, oracles, config)?).with_validation(&data.test);
    let outcome = learner.train()?;
    for r in outcome.history.iter().filter(|r| r.validation_error.is_some()) {
        println!("iteration {}: test error {:.4}", r.iteration, r.validation_error.unwrap_or(f64::NAN));
    }
    Ok(())
}
