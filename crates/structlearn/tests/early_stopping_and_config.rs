//! Early stopping on the validation set (best model kept, also across a
//! resume) and configuration files that reject unknown keys.

mod common;

use oracles::{ModelRegistry, Oracle};
use structlearn::oracle_config::builtin_oracle;
use structlearn::{
    CheckpointConfig, Dataset, EarlyStopping, Evaluate, Example, LearnError, PredictOptions, TrainConfig, Trainer,
};

fn linear() -> Vec<(String, Box<dyn Oracle>)> {
    vec![("unary".into(), builtin_oracle("linear").unwrap()), ("pairwise".into(), builtin_oracle("linear").unwrap())]
}

fn config(iterations: usize, patience: usize) -> TrainConfig {
    TrainConfig {
        learning_iterations: iterations,
        message_passing_iterations: 10,
        evaluate: Evaluate::EveryIteration,
        evaluate_train: false,
        predict: PredictOptions { iterations: 30, tolerance: Some(1e-6) },
        early_stopping: Some(EarlyStopping { patience, min_delta: 0.0 }),
        ..TrainConfig::default()
    }
}

/// The training images with every label flipped: the better the model fits
/// the training set, the worse it does here, so the validation error rises
/// from the first iteration on and early stopping must fire.
fn flipped(data: &Dataset) -> Dataset {
    let examples = data
        .examples()
        .iter()
        .enumerate()
        .map(|(k, ex)| {
            let flipped = ex.labels().map(|l| l.iter().map(|y| 1 - y).collect());
            Example::new(ex.name(), ex.graph().clone(), flipped, data.feature_blocks(k))
        })
        .collect();
    Dataset::new(data.factor_types().to_vec(), examples).unwrap()
}

fn model_bytes(outcome: &structlearn::TrainOutcome) -> Vec<u8> {
    outcome.model.to_bytes().unwrap()
}

#[test]
fn early_stopping_returns_the_best_iteration_and_stops_after_patience() {
    let data = common::denoising(3, 8, 8, 5);
    let adverse = flipped(&data);
    let outcome = Trainer::new(&data, linear(), config(20, 2)).unwrap().with_validation(&adverse).train().unwrap();
    let errors: Vec<f64> = outcome.history.iter().filter_map(|r| r.validation_error).collect();
    let best = outcome.best_iteration.unwrap();
    // The best iteration has the smallest error, and exactly `patience` iterations follow it.
    let min = errors.iter().copied().fold(f64::INFINITY, f64::min);
    assert_eq!(errors[best - 1], min, "{errors:?}");
    assert!(outcome.stopped_early, "{errors:?}");
    assert_eq!(errors.len(), best + 2, "{errors:?}");
    // The returned model is that iteration's: the same as a run stopped there.
    let mut plain = config(best, 1);
    plain.early_stopping = None;
    let short = Trainer::new(&data, linear(), plain).unwrap().with_validation(&adverse).train().unwrap();
    assert_eq!(model_bytes(&outcome), model_bytes(&short));
    assert!(!short.stopped_early && short.best_iteration.is_none());
}

#[test]
fn early_stopping_keeps_the_best_model_across_a_resume() {
    let data = common::denoising(3, 8, 8, 5);
    let adverse = flipped(&data);
    let whole = Trainer::new(&data, linear(), config(20, 3)).unwrap().with_validation(&adverse).train().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.ckpt");
    // First session: two iterations, checkpointed; second session resumes.
    let mut first = config(20, 3);
    first.checkpoint = Some(CheckpointConfig::new(path.clone()));
    first.learning_iterations = whole.best_iteration.unwrap() + 1;
    first.early_stopping = Some(EarlyStopping { patience: 3, min_delta: 0.0 });
    Trainer::new(&data, linear(), first).unwrap().with_validation(&adverse).train().unwrap();
    let mut second = config(20, 3);
    second.checkpoint = Some(CheckpointConfig::new(path.clone()));
    let mut trainer = Trainer::new(&data, linear(), second).unwrap().with_validation(&adverse);
    trainer.resume_from(&path, &ModelRegistry::with_builtin()).unwrap();
    // What an interrupted run keeps: the best model, restored from the checkpoint.
    assert_eq!(trainer.best_model().unwrap().to_bytes().unwrap(), model_bytes(&whole));
    let resumed = trainer.train().unwrap();
    assert_eq!(resumed.best_iteration, whole.best_iteration);
    assert_eq!(resumed.stopped_early, whole.stopped_early);
    assert_eq!(resumed.history.len(), whole.history.len());
    assert_eq!(model_bytes(&resumed), model_bytes(&whole));
}

#[test]
fn early_stopping_needs_a_validation_set_and_sane_settings() {
    let data = common::denoising(2, 5, 5, 1);
    let err = Trainer::new(&data, linear(), config(3, 1)).unwrap().train().unwrap_err();
    assert!(matches!(err, LearnError::InvalidSetting { name: "early_stopping", .. }), "{err}");
    assert!(err.to_string().contains("validation set"), "{err}");
    let mut bad = config(3, 0);
    assert!(Trainer::new(&data, linear(), bad.clone()).is_err());
    bad.early_stopping = Some(EarlyStopping { patience: 1, min_delta: f64::NAN });
    assert!(Trainer::new(&data, linear(), bad).is_err());
}

#[test]
fn unknown_configuration_keys_are_errors_at_every_level() {
    let ok: TrainConfig = serde_json::from_value(serde_json::json!({"epsilon": 0.2, "seed": 3})).unwrap();
    assert_eq!((ok.epsilon, ok.seed), (0.2, 3));
    for bad in [
        serde_json::json!({"learning_iteratons": 5}),
        serde_json::json!({"predict": {"iterations": 5, "tol": 1e-3}}),
        serde_json::json!({"checkpoint": {"path": "x", "every": 1, "often": true}}),
        serde_json::json!({"early_stopping": {"patience": 2, "delta": 0.1}}),
    ] {
        let err = serde_json::from_value::<TrainConfig>(bad.clone()).unwrap_err().to_string();
        assert!(err.contains("unknown field"), "{bad}: {err}");
    }
}

/// `evaluate_train_every = k`: the training error after every k-th iteration
/// and the last, the validation error after every one, and the training
/// errors that are computed equal those of a run that computes them all
/// (evaluation changes nothing that learning reads). 0 is refused.
#[test]
fn training_error_every_k_iterations() {
    let data = common::denoising(3, 8, 8, 5);
    let run = |every: usize| {
        let mut c = config(5, 1);
        c.early_stopping = None;
        c.evaluate_train = true;
        c.evaluate_train_every = every;
        c.warm_start_evaluation = false;
        Trainer::new(&data, linear(), c).unwrap().with_validation(&data).train().unwrap()
    };
    let errors = |o: &structlearn::TrainOutcome| -> Vec<(usize, Option<f64>, Option<f64>)> {
        o.history
            .iter()
            .filter(|r| r.validation_error.is_some())
            .map(|r| (r.iteration, r.train_error, r.validation_error))
            .collect()
    };
    let all = errors(&run(1));
    let some = errors(&run(2));
    assert_eq!(all.len(), 5);
    assert_eq!(some.iter().map(|e| e.0).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
    for ((i, tr_all, va_all), (_, tr, va)) in all.iter().zip(&some) {
        assert_eq!(va, va_all, "validation error of iteration {i}");
        if i % 2 == 0 || *i == 5 {
            assert_eq!(tr, tr_all, "training error of iteration {i}");
        } else {
            assert_eq!(*tr, None, "iteration {i} has a training error");
        }
    }
    let mut bad = config(5, 1);
    bad.evaluate_train_every = 0;
    match Trainer::new(&data, linear(), bad) {
        Err(err) => assert!(err.to_string().contains("evaluate_train_every"), "{err}"),
        Ok(_) => panic!("evaluate_train_every = 0 was accepted"),
    }
}
