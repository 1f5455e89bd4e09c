//! A learner written only as "one learning iteration" (`examples/custom_learner.rs`)
//! gets checkpoints, exact resume, early stopping and observers from the
//! shared run loop (`structlearn::Executor`).

use oracles::ModelRegistry;
use structlearn::{CheckpointConfig, EarlyStopping, Executor, Learner, OracleRegistry, TrainConfig, TrainEvent};

#[path = "../examples/custom_learner.rs"]
#[allow(dead_code)]
mod custom_learner;
use custom_learner::Independent;

fn data() -> datasets::denoising::DenoisingData {
    let cfg = datasets::denoising::DenoisingConfig { height: 12, width: 12, train: 3, test: 2, ..Default::default() };
    datasets::denoising::generate(&cfg).unwrap()
}

fn oracles() -> Vec<Box<dyn oracles::Oracle>> {
    let registry = OracleRegistry::builtin();
    vec![
        registry.build(&serde_json::json!({"kind": "boosting", "rounds": 3, "subsample": 200})).unwrap(),
        registry.build(&serde_json::json!({"kind": "mlp", "hidden": 4})).unwrap(),
    ]
}

#[test]
fn a_custom_learner_checkpoints_and_resumes_bit_for_bit() {
    let data = data();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.ckpt");
    let config = |n| TrainConfig {
        learning_iterations: n,
        seed: 3,
        checkpoint: Some(CheckpointConfig::new(path.clone())),
        // The training error after every iteration: the 2-iteration run
        // evaluates it after its last one, which the 4-iteration run would
        // otherwise skip (by default it comes after every fifth and the last).
        evaluate_train_every: 1,
        ..TrainConfig::default()
    };
    let whole = Executor::for_solver(Independent::new(&data.train, oracles(), config(4)).unwrap()).train().unwrap();
    // "Interrupted" after two learning iterations, then resumed to four.
    Executor::for_solver(Independent::new(&data.train, oracles(), config(2)).unwrap()).train().unwrap();
    let mut resumed = Executor::for_solver(Independent::new(&data.train, oracles(), config(4)).unwrap());
    resumed.resume_from(&path, &ModelRegistry::with_builtin()).unwrap();
    assert_eq!(resumed.completed_iterations(), 2);
    let resumed = resumed.train().unwrap();
    assert_eq!(resumed.model.to_bytes().unwrap(), whole.model.to_bytes().unwrap());
    let strip = |h: &[structlearn::Record]| {
        h.iter().map(|r| (r.iteration, r.step, r.objective.to_bits(), r.train_error)).collect::<Vec<_>>()
    };
    assert_eq!(strip(&resumed.history), strip(&whole.history));
    // Each fit is warm-started and monotone: the oracles' losses never rise.
    for t in 0..2 {
        let losses: Vec<f64> = whole.history.iter().filter(|r| r.step == t).map(|r| r.objective).collect();
        assert!(losses.windows(2).all(|w| w[1] <= w[0]), "type {t}: {losses:?}");
    }
}

/// The training images with every label flipped: the better the fit, the
/// worse the error here, so early stopping must fire.
fn flipped(data: &structlearn::Dataset) -> structlearn::Dataset {
    let examples = data
        .examples()
        .iter()
        .enumerate()
        .map(|(k, ex)| {
            let labels = ex.labels().map(|l| l.iter().map(|y| 1 - y).collect());
            structlearn::Example::new(ex.name(), ex.graph().clone(), labels, data.feature_blocks(k))
        })
        .collect();
    structlearn::Dataset::new(data.factor_types().to_vec(), examples).unwrap()
}

#[test]
fn a_custom_learner_gets_early_stopping_the_model_file_and_observers() {
    let data = data();
    let validation = flipped(&data.train);
    let dir = tempfile::tempdir().unwrap();
    let model_path = dir.path().join("m.slm");
    let config = TrainConfig {
        learning_iterations: 30,
        early_stopping: Some(EarlyStopping { patience: 2, min_delta: 0.0 }),
        ..TrainConfig::default()
    };
    let mut learner: Box<dyn Learner<'_> + '_> =
        Box::new(Executor::for_solver(Independent::new(&data.train, oracles(), config).unwrap()));
    learner.set_validation(&validation);
    learner.save_model_to(&model_path);
    let mut iterations = 0;
    learner.add_observer(Box::new(structlearn::Callback(|e: &TrainEvent<'_>| {
        if let TrainEvent::IterationFinished { .. } = e {
            iterations += 1;
        }
        Ok(())
    })));
    assert_eq!(learner.name(), "independent");
    let outcome = learner.train().unwrap();
    let best = outcome.best_iteration.unwrap();
    assert!(outcome.stopped_early && best < 30, "best {best}");
    // The file holds the best validation iteration's model: what train returned.
    assert_eq!(std::fs::read(&model_path).unwrap(), outcome.model.to_bytes().unwrap());
    drop(learner);
    assert_eq!(iterations, outcome.history.last().unwrap().iteration);
}
