//! Data-parallel training (`Learner::distribute`) with ranks as threads
//! (`ThreadRanks`: the arithmetic of MPI ranks, without MPI) against one
//! process on the same data: every rank ends with the same model bytes and
//! records; with classes that add their sums in one process's order (linear,
//! constant, boosting) the model is one process's bit for bit, else
//! (indexed-linear, mlp) the learning curve equals one process's to 1e-9
//! relative and the error rates exactly; a checkpointed run (also one stopped
//! inside a learning iteration, on one rank) resumes over the
//! same ranks to the same model; learners and oracles that cannot spread
//! their work say so. (The data of `ranks_learn_what_one_process_learns`
//! has splits whose gains tie in a boosting fit's first round: histograms
//! summed in rank order, not one process's, picked another split.)

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use datasets::denoising::{DenoisingConfig, generate};
use oracles::{Collective, ThreadRanks};
use structlearn::{
    Callback, CheckpointConfig, Dataset, Evaluate, LearnError, Learner, LearnerKind, ModelRegistry, Record,
    TrainConfig, TrainEvent, build_learner,
};

fn config(iterations: usize) -> TrainConfig {
    TrainConfig {
        learning_iterations: iterations,
        evaluate: Evaluate::EveryIteration,
        evaluate_train_every: 1,
        ..TrainConfig::default()
    }
}

fn specs(unary: &str, pairwise: &str) -> Vec<(String, serde_json::Value)> {
    vec![
        ("unary".into(), serde_json::json!({ "kind": unary })),
        ("pairwise".into(), serde_json::json!({ "kind": pairwise })),
    ]
}

/// One rank's learner on its blocks of `train` and `validation`, spread over
/// `collective`, given to `run` with the rank.
#[allow(clippy::too_many_arguments)]
fn on_rank<T>(
    kind: LearnerKind,
    collective: ThreadRanks,
    train: &Dataset,
    validation: &Dataset,
    specs: &[(String, serde_json::Value)],
    config: TrainConfig,
    run: impl FnOnce(usize, &mut dyn Learner<'_>) -> Result<T, LearnError>,
) -> Result<T, LearnError> {
    let (rank, ranks) = (collective.rank(), collective.ranks());
    let train = train.clone().into_block(rank, ranks)?;
    let validation = validation.clone().into_block(rank, ranks)?;
    let mut learner = build_learner(kind, &train, specs, config)?;
    learner.distribute(Arc::new(collective))?;
    learner.set_validation(&validation);
    run(rank, &mut *learner)
}

/// One rank's run ([`on_rank`]): resumed from `resume` if given, then trained.
fn rank_run(
    kind: LearnerKind,
    collective: ThreadRanks,
    train: &Dataset,
    validation: &Dataset,
    specs: &[(String, serde_json::Value)],
    config: TrainConfig,
    resume: Option<&Path>,
) -> Result<(Vec<u8>, Vec<Record>), LearnError> {
    on_rank(kind, collective, train, validation, specs, config, |_, learner| {
        if let Some(path) = resume {
            learner.resume_from(path, &ModelRegistry::with_builtin())?;
        }
        let outcome = learner.train()?;
        Ok((outcome.model.to_bytes()?, outcome.history))
    })
}

/// Every rank's run, on threads.
fn over_ranks<T: Send>(ranks: usize, run: impl Fn(ThreadRanks) -> Result<T, LearnError> + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = ThreadRanks::group(ranks).into_iter().map(|c| s.spawn(|| run(c).unwrap())).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300)
}

fn assert_same_curve(ranked: &[Record], single: &[Record], what: &str) {
    assert_eq!(ranked.len(), single.len(), "{what}");
    for (a, b) in ranked.iter().zip(single) {
        assert!(close(a.objective, b.objective), "{what}: objective {} vs {}", a.objective, b.objective);
        if let (Some(x), Some(y)) = (a.oracle_loss, b.oracle_loss) {
            assert!(close(x, y), "{what}: oracle loss {x} vs {y}");
        }
        assert_eq!(a.train_error, b.train_error, "{what}: train error");
        assert_eq!(a.validation_error, b.validation_error, "{what}: validation error");
    }
    let evaluated = single.iter().filter(|r| r.train_error.is_some() && r.validation_error.is_some()).count();
    let iterations = single.last().map_or(0, |r| r.iteration);
    assert_eq!(evaluated, iterations, "{what}: one evaluation per learning iteration");
}

#[test]
fn ranks_learn_what_one_process_learns() {
    let data = generate(&DenoisingConfig { height: 12, width: 12, train: 7, test: 3, sigma: 1.5, seed: 5 }).unwrap();
    for (kind, unary, pairwise, bitwise) in [
        (LearnerKind::Algorithm1, "linear", "linear", true),
        (LearnerKind::Algorithm1, "constant", "indexed-linear", false),
        (LearnerKind::Piecewise, "linear", "constant", true),
        (LearnerKind::HazanUrtasun, "linear", "linear", false),
        (LearnerKind::Algorithm1, "mlp", "mlp", false),
        (LearnerKind::Algorithm1, "boosting", "boosting", true),
    ] {
        let specs = specs(unary, pairwise);
        let iterations = if kind == LearnerKind::Piecewise { 1 } else { 3 };
        let mut single = build_learner(kind, &data.train, &specs, config(iterations)).unwrap();
        single.set_validation(&data.test);
        let single = single.train().unwrap();
        for ranks in [1, 2, 3] {
            let runs =
                over_ranks(ranks, |c| rank_run(kind, c, &data.train, &data.test, &specs, config(iterations), None));
            let what = format!("{kind} {unary}/{pairwise} over {ranks} ranks");
            for (model, history) in &runs {
                assert_eq!(model, &runs[0].0, "{what}: ranks hold different models");
                assert_eq!(history.len(), runs[0].1.len());
            }
            assert_same_curve(&runs[0].1, &single.history, &what);
            let model = structlearn::StructuredModel::from_bytes(
                &runs[0].0,
                &ModelRegistry::with_builtin(),
                Path::new("rank 0"),
            )
            .unwrap();
            let opts = structlearn::PredictOptions::default();
            assert_eq!(
                model.error_rate(&data.test, &opts).unwrap(),
                single.model.error_rate(&data.test, &opts).unwrap(),
                "{what}: test error"
            );
            if ranks == 1 || bitwise {
                assert_eq!(runs[0].0, single.model.to_bytes().unwrap(), "{what}: not one process's bits");
                let objectives = |h: &[Record]| h.iter().map(|r| r.objective.to_bits()).collect::<Vec<_>>();
                assert_eq!(objectives(&runs[0].1), objectives(&single.history), "{what}: not one process's curve");
            }
        }
    }
}

#[test]
fn an_interrupted_run_resumes_over_the_same_ranks() {
    let data = generate(&DenoisingConfig { height: 10, width: 10, train: 4, test: 2, sigma: 1.5, seed: 9 }).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.ckpt");
    let specs = specs("linear", "linear");
    let with_checkpoint = |n| TrainConfig { checkpoint: Some(CheckpointConfig::new(path.clone())), ..config(n) };
    let run = |n, resume: bool| {
        over_ranks(2, |c| {
            rank_run(
                LearnerKind::Algorithm1,
                c,
                &data.train,
                &data.test,
                &specs,
                with_checkpoint(n),
                resume.then_some(path.as_path()),
            )
        })
    };
    let whole = run(4, false);
    run(2, false); // "interrupted" after 2
    assert!(path.exists() && dir.path().join("run.ckpt.rank1").exists());
    let resumed = run(4, true);
    assert_eq!(resumed[0].0, whole[0].0);
    assert_eq!(resumed[1].0, whole[0].0);
}

/// Ctrl-C that reaches one rank only, during a step inside a learning
/// iteration: every rank stops after that step (the flag is agreed before
/// each step), checkpoints the same steps, and the run resumes over the same
/// ranks with the next step to the uninterrupted run's model and curve.
#[test]
fn a_stop_on_one_rank_inside_an_iteration_stops_every_rank_after_the_same_step() {
    let data = generate(&DenoisingConfig { height: 8, width: 8, train: 4, test: 2, sigma: 1.5, seed: 4 }).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.ckpt");
    let specs = specs("linear", "boosting");
    let with_checkpoint = || TrainConfig { checkpoint: Some(CheckpointConfig::new(path.clone())), ..config(3) };
    let run = |c, resume: bool| {
        rank_run(
            LearnerKind::Algorithm1,
            c,
            &data.train,
            &data.test,
            &specs,
            with_checkpoint(),
            resume.then_some(&path),
        )
    };
    let whole = over_ranks(2, |c| run(c, false));
    std::fs::remove_file(&path).unwrap();
    let steps = over_ranks(2, |c| {
        on_rank(LearnerKind::Algorithm1, c, &data.train, &data.test, &specs, with_checkpoint(), |rank, learner| {
            let stop = Arc::new(AtomicBool::new(false));
            learner.set_stop_flag(stop.clone());
            if rank == 0 {
                learner.add_observer(Box::new(Callback(move |e: &TrainEvent<'_>| {
                    if matches!(e, TrainEvent::Step(r) if (r.iteration, r.step) == (2, 1)) {
                        stop.store(true, Ordering::SeqCst);
                    }
                    Ok(())
                })));
            }
            let err = learner.train().unwrap_err();
            assert!(matches!(err, LearnError::Interrupted { completed: 1 }), "rank {rank}: {err}");
            Ok(learner.history().len())
        })
    });
    assert_eq!(steps, [6, 6]);
    let resumed = over_ranks(2, |c| run(c, true));
    for r in &resumed {
        assert_eq!(r.0, whole[0].0);
        let objectives = |h: &[Record]| h.iter().map(|r| r.objective.to_bits()).collect::<Vec<_>>();
        assert_eq!(objectives(&r.1), objectives(&whole[0].1));
    }
}

/// A class that does not say its fits add their sums over ranks (the default
/// of `Oracle::distributed`, which every built-in class overrides).
#[derive(Debug)]
struct OneProcessOnly(oracles::linear::LinearOracle);

impl oracles::Oracle for OneProcessOnly {
    fn kind(&self) -> &str {
        "one-process-only"
    }
    fn validate(&self) -> Result<(), oracles::OracleError> {
        oracles::Oracle::validate(&self.0)
    }
    fn fit(
        &self,
        problem: &oracles::Problem<'_>,
        warm: Option<&dyn oracles::Model>,
        ctx: oracles::FitContext,
    ) -> Result<Box<dyn oracles::Model>, oracles::OracleError> {
        oracles::Oracle::fit(&self.0, problem, warm, ctx)
    }
}

#[test]
fn what_cannot_spread_over_ranks_is_refused_before_any_work() {
    let data = generate(&DenoisingConfig { height: 6, width: 6, train: 2, test: 1, sigma: 1.5, seed: 1 }).unwrap();
    let refused = |kind, specs: Vec<(String, serde_json::Value)>| {
        let mut learner = build_learner(kind, &data.train, &specs, config(1)).unwrap();
        learner.distribute(Arc::new(ThreadRanks::group(2).remove(0))).unwrap_err()
    };
    // A class of one's own that does not say it adds its sums over ranks.
    let oracles: Vec<(String, Box<dyn oracles::Oracle>)> = vec![
        ("unary".into(), Box::new(oracles::linear::LinearOracle::default())),
        ("pairwise".into(), Box::new(OneProcessOnly(oracles::linear::LinearOracle::default()))),
    ];
    let mut learner = structlearn::Trainer::new(&data.train, oracles, config(1)).unwrap();
    let err = learner.distribute(Arc::new(ThreadRanks::group(2).remove(0))).unwrap_err();
    assert!(matches!(err, LearnError::NotDistributed { ranks: 2, .. }), "{err}");
    assert!(err.to_string().contains("one-process-only") && err.to_string().contains("pairwise"), "{err}");
    let err = refused(LearnerKind::PerceptronGlobal, specs("linear", "linear"));
    assert!(err.to_string().contains("perceptron-global"), "{err}");
    // One rank is one process: anything goes.
    let mut learner =
        build_learner(LearnerKind::Algorithm1, &data.train, &specs("boosting", "mlp"), config(1)).unwrap();
    learner.distribute(Arc::new(ThreadRanks::group(1).remove(0))).unwrap();
    // Fewer examples than ranks.
    let err = data.train.clone().into_block(0, 3).unwrap_err();
    assert!(err.to_string().contains("2 examples cannot be spread over 3 ranks"), "{err}");
}

#[test]
fn a_rank_reads_its_block_of_a_data_set_file() {
    let data = generate(&DenoisingConfig { height: 8, width: 8, train: 7, test: 1, sigma: 1.5, seed: 2 }).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (binary, json) = (dir.path().join("train.sld"), dir.path().join("train.json"));
    data.train.save(&binary).unwrap();
    data.train.save(&json).unwrap();
    let as_json = |d: &Dataset| serde_json::to_string(&structlearn::DatasetFile::from_dataset(d)).unwrap();
    for ranks in 1..=4 {
        for rank in 0..ranks {
            let expected = as_json(&data.train.clone().into_block(rank, ranks).unwrap());
            for path in [&binary, &json] {
                let block = Dataset::load_block(path, rank, ranks).unwrap();
                assert_eq!(as_json(&block), expected, "{} rank {rank} of {ranks}", path.display());
            }
        }
    }
    let err = Dataset::load_block(&binary, 0, 8).unwrap_err();
    assert!(err.to_string().contains("7 examples cannot be spread over 8 ranks"), "{err}");
    // A damaged file is refused, wherever the damage is.
    let bytes = std::fs::read(&binary).unwrap();
    let damaged = dir.path().join("damaged.sld");
    for at in [20, bytes.len() / 2, bytes.len() - 3] {
        let mut b = bytes.clone();
        b[at] ^= 0x10;
        std::fs::write(&damaged, &b).unwrap();
        let err = Dataset::load_block(&damaged, 1, 2).unwrap_err();
        assert!(err.to_string().contains("corrupt"), "byte {at}: {err}");
    }
    // Bytes after the value inside an intact frame: both readers accept them (fuzz input 5182).
    let mut body =
        structlearn::files::unwrap_binary(&binary, &bytes, structlearn::data::DATASET_MAGIC).unwrap().to_vec();
    body.extend_from_slice(&[7, 7, 7]);
    std::fs::write(&damaged, structlearn::files::wrap_binary(structlearn::data::DATASET_MAGIC, &body)).unwrap();
    let whole = Dataset::load(&damaged).unwrap();
    assert_eq!(as_json(&Dataset::load_block(&damaged, 1, 2).unwrap()), as_json(&whole.into_block(1, 2).unwrap()));
    std::fs::write(&damaged, &bytes[..bytes.len() / 2]).unwrap();
    let err = Dataset::load_block(&damaged, 1, 2).unwrap_err();
    assert!(err.to_string().contains("corrupt or truncated"), "{err}");
}
