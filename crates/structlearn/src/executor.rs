//! The run loop every learner shares (argmin's Executor / Solver split):
//! a learner supplies the steps of one learning iteration ([`Solver`]); the
//! [`Executor`] owns everything around them.
//!
//! The executor runs learning iterations until `learning_iterations`, the
//! learner's convergence ([`Solver::converged`]), early stopping
//! ([`TrainConfig::early_stopping`]), the stop flag (Ctrl-C) or an observer
//! ([`Observer::stop_requested`]) ends them. After each step it evaluates on
//! the schedule of [`TrainConfig::evaluate`] and reports the step's
//! [`Record`] to the observers; after each learning iteration it keeps the
//! best validation model, writes the checkpoint
//! ([`TrainConfig::checkpoint`]) and the model file
//! ([`Executor::save_model_to`]) atomically, so a killed process keeps
//! every finished iteration's model, and `--checkpoint` resumes it exactly.
//! Inside a learning iteration it also checkpoints after a step once
//! [`crate::CheckpointConfig::within_iteration_seconds`] have passed since the last
//! write, and the stop flag is obeyed between steps, so a run whose steps
//! take hours keeps every finished step; a resumed run continues with the
//! next step of that iteration.
//!
//! ```
//! # use std::sync::Arc;
//! # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
//! # let graph = Arc::new(factor_graph::grid(2, 2, 2).unwrap());
//! # let ex = |labels: Vec<usize>, x: [f64; 4]| Example::new(
//! #     "x",
//! #     graph.clone(),
//! #     Some(labels),
//! #     vec![FeatureBlock { dim: 2, values: x.iter().flat_map(|&v| [v, 1.0]).collect() }, FeatureBlock { dim: 1, values: vec![1.0; 4] }],
//! # );
//! # let data = Dataset::new(vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)],
//! #     vec![ex(vec![0, 1, 0, 1], [0.1, 0.9, 0.2, 0.8]), ex(vec![1, 1, 0, 0], [0.9, 0.7, 0.1, 0.3])]).unwrap();
//! use structlearn::{Callback, Observer, TrainConfig, TrainEvent, Trainer};
//! use structlearn::executor::StopReason;
//! use structlearn::oracle_config::builtin_oracle;
//! /// Asks to stop (without an error) once the objective is below a target.
//! struct StopBelow(f64, bool);
//! impl Observer for StopBelow {
//!     fn observe(&mut self, event: &TrainEvent<'_>) -> Result<(), structlearn::LearnError> {
//!         if let TrainEvent::Step(r) = event {
//!             self.1 |= r.objective < self.0;
//!         }
//!         Ok(())
//!     }
//!     fn stop_requested(&self) -> bool {
//!         self.1
//!     }
//! }
//! let oracles = vec![("unary".into(), builtin_oracle("linear").unwrap()), ("pairwise".into(), builtin_oracle("linear").unwrap())];
//! let mut trainer = Trainer::new(&data, oracles, TrainConfig { learning_iterations: 50, ..TrainConfig::default() }).unwrap();
//! trainer.add_observer(Box::new(StopBelow(1.0, false)));
//! let outcome = trainer.train().unwrap();
//! assert_eq!(outcome.stop_reason, StopReason::Observer);
//! assert!(outcome.history.len() < 50 * 4);
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use oracles::{Collective, ModelRegistry, SingleProcess};

use crate::early_stopping::{BestValidation, Verdict};
use crate::observer::{Observer, Record, TrainEvent};
use crate::train::TrainOutcome;
use crate::{Dataset, Evaluate, LearnError, Learner, StructuredModel, TrainConfig};

/// One learner's part of training: the steps of a learning iteration, its
/// model, its evaluation and the state a checkpoint must hold. Everything
/// else — the loop, stopping, evaluation schedule, early stopping,
/// checkpoints and resume, observers — is the [`Executor`]'s.
///
/// A new learner implements this trait and is run by
/// `Executor::for_solver(my_solver)`, which also makes it a [`Learner`].
pub trait Solver<'a> {
    /// The learner's name (as on the command line: `algorithm1`, …; a new
    /// learner picks its own).
    fn name(&self) -> &str;
    /// The settings shared by every learner (validated when the solver was
    /// built: [`TrainConfig::validate`]).
    fn config(&self) -> &TrainConfig;
    /// Steps of one learning iteration (≥ 1).
    fn steps_per_iteration(&self) -> usize;
    /// Attaches the validation (or test) set that [`Solver::evaluate`] reports on.
    fn set_validation(&mut self, validation: &'a Dataset);
    /// The validation set, if attached.
    fn validation(&self) -> Option<&'a Dataset>;
    /// Runs step `step` (from 0) of learning iteration `iteration` (from 1)
    /// and returns its record (phase, objective, …; the executor fills in the
    /// errors and times). `history` holds every record before it.
    fn step(&mut self, iteration: usize, step: usize, history: &[Record]) -> Result<Record, LearnError>;
    /// Whether nothing is left to learn (the perceptron after an epoch
    /// without mistakes); the default is `false`.
    fn converged(&self) -> bool {
        false
    }
    /// The prediction error of the current model on the training set (if
    /// `with_train`) and on the validation set (if attached).
    fn evaluate(&mut self, with_train: bool) -> Result<(Option<f64>, Option<f64>), LearnError>;
    /// The current model.
    fn model(&self) -> Result<StructuredModel, LearnError>;
    /// Writes the learner's state and `run` to `path`, atomically. It may be
    /// called after any step, also inside a learning iteration (`run.history`
    /// then ends with that iteration's first steps): the state must be all
    /// that the next step needs.
    fn save_checkpoint(&self, path: &Path, run: &RunState) -> Result<(), LearnError>;
    /// Spreads the work over `collective`'s ranks, each holding its share of
    /// the training (and validation) examples ([`Learner::distribute`]). The
    /// default refuses ([`LearnError::NotDistributed`]).
    fn distribute(&mut self, collective: Arc<dyn Collective>) -> Result<(), LearnError> {
        Err(LearnError::NotDistributed {
            what: format!("the {} learner", self.name()),
            ranks: collective.ranks(),
            reason: "it does not spread its steps over ranks; use algorithm1, piecewise or hazan-urtasun",
        })
    }
    /// The ranks the work is spread over ([`SingleProcess`] unless
    /// [`Solver::distribute`] was called).
    fn collective(&self) -> &dyn Collective {
        &SingleProcess
    }
    /// Restores a checkpoint written by [`Solver::save_checkpoint`] of the same
    /// learner from its bytes (`path` names it in errors); returns the run state
    /// it held. Refuses a checkpoint of another learner, data set or settings.
    fn resume_from_bytes(
        &mut self,
        bytes: &[u8],
        path: &Path,
        registry: &ModelRegistry,
    ) -> Result<RunState, LearnError>;
}

/// What the executor keeps of a run (and a checkpoint holds beside the
/// learner's state).
#[derive(Debug, Clone, Default)]
pub struct RunState {
    /// Learning iterations finished.
    pub completed: usize,
    /// Every step's record so far.
    pub history: Vec<Record>,
    /// Seconds spent in earlier runs of this training (before a resume).
    pub elapsed_seconds: f64,
    /// With early stopping: the best validation iteration's model so far.
    pub best_model: Option<StructuredModel>,
}

impl RunState {
    /// Steps of learning iteration `completed + 1` already run: the records
    /// after the last finished iteration's (0 at an iteration boundary).
    ///
    /// ```
    /// use structlearn::{Record, RunState};
    /// let history = vec![Record::new(1, 0, "fit"), Record::new(1, 1, "message-passing"), Record::new(2, 0, "fit")];
    /// let run = RunState { completed: 1, history, ..RunState::default() };
    /// assert_eq!(run.steps_into_next(), 1);
    /// ```
    pub fn steps_into_next(&self) -> usize {
        self.history.iter().rev().take_while(|r| r.iteration > self.completed).count()
    }

    /// The records of the finished learning iterations.
    fn finished_history(&self) -> &[Record] {
        &self.history[..self.history.len() - self.steps_into_next()]
    }

    /// Refuses a state whose history does not fit `completed` and `steps`
    /// per iteration (a damaged or foreign checkpoint): records of later
    /// iterations than the next one, or a next iteration with all its steps.
    fn check(&self, steps: usize, path: &Path) -> Result<(), LearnError> {
        let next = self.history.iter().filter(|r| r.iteration > self.completed);
        if next.clone().any(|r| r.iteration != self.completed + 1) || next.count() >= steps {
            return Err(LearnError::bad_file(
                path,
                format!(
                    "the checkpoint's curve does not fit its {} finished learning iterations of {steps} steps \
                     (records of a later iteration, or a whole unfinished one): the file is damaged",
                    self.completed
                ),
            ));
        }
        Ok(())
    }
}

/// Why training ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Every learning iteration ran.
    Completed,
    /// The learner had nothing left to learn ([`Solver::converged`]).
    Converged,
    /// The validation error stopped improving ([`TrainConfig::early_stopping`]).
    EarlyStopping,
    /// An observer asked to stop ([`Observer::stop_requested`]).
    Observer,
}

/// Runs a [`Solver`] (module docs). [`crate::Trainer`] is the executor of
/// Algorithm 1; [`crate::build_learner`] returns executors of every learner.
pub struct Executor<'a, S> {
    solver: S,
    observers: Vec<Box<dyn Observer + Send + 'a>>,
    stop: Option<Arc<AtomicBool>>,
    run: RunState,
    model_path: Option<PathBuf>,
}

impl<'a, S: Solver<'a>> Executor<'a, S> {
    /// The executor of `solver`, before its first learning iteration.
    pub fn for_solver(solver: S) -> Self {
        Self { solver, observers: Vec::new(), stop: None, run: RunState::default(), model_path: None }
    }

    /// The learner.
    pub fn solver(&self) -> &S {
        &self.solver
    }

    /// The learner, to change before training starts.
    pub(crate) fn solver_mut(&mut self) -> &mut S {
        &mut self.solver
    }

    /// Also reports prediction error on this (validation or test) set.
    pub fn with_validation(mut self, validation: &'a Dataset) -> Self {
        self.solver.set_validation(validation);
        self
    }

    /// Adds an observer.
    pub fn add_observer(&mut self, observer: Box<dyn Observer + Send + 'a>) {
        self.observers.push(observer);
    }

    /// A flag that, once set, stops training after the current step (after
    /// writing the checkpoint, if configured).
    pub fn set_stop_flag(&mut self, stop: Arc<AtomicBool>) {
        self.stop = Some(stop);
    }

    /// Writes the model to `path` (atomically) after every learning
    /// iteration: the last iteration's, or with early stopping the best
    /// validation iteration's — what training would return if it ended there.
    pub fn save_model_to(&mut self, path: &Path) {
        self.model_path = Some(path.to_path_buf());
    }

    /// Learning iterations completed so far.
    pub fn completed_iterations(&self) -> usize {
        self.run.completed
    }

    /// With early stopping: the best validation iteration's model so far
    /// (restored by a resume too); what an interrupted run should keep.
    pub fn best_model(&self) -> Option<&StructuredModel> {
        self.run.best_model.as_ref()
    }

    /// The records so far.
    pub fn history(&self) -> &[Record] {
        &self.run.history
    }

    /// The current model.
    pub fn model(&self) -> Result<StructuredModel, LearnError> {
        self.solver.model()
    }

    /// Writes the learner's state and the run so far atomically (over
    /// several ranks, each rank to its own file: [`rank_file`]).
    pub fn save_checkpoint(&self, path: &Path) -> Result<(), LearnError> {
        self.solver.save_checkpoint(&rank_file(path, self.solver.collective()), &self.run)
    }

    /// Restores a checkpoint written by [`Executor::save_checkpoint`] of the
    /// same learner, training set and seed; `train` then continues from it.
    /// Attach the validation set first, so that its state is restored too.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
    /// # let graph = Arc::new(factor_graph::grid(2, 2, 2).unwrap());
    /// # let ex = |labels: Vec<usize>, x: [f64; 4]| Example::new(
    /// #     "x",
    /// #     graph.clone(),
    /// #     Some(labels),
    /// #     vec![FeatureBlock { dim: 2, values: x.iter().flat_map(|&v| [v, 1.0]).collect() }, FeatureBlock { dim: 1, values: vec![1.0; 4] }],
    /// # );
    /// # let data = Dataset::new(vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)],
    /// #     vec![ex(vec![0, 1, 0, 1], [0.1, 0.9, 0.2, 0.8]), ex(vec![1, 1, 0, 0], [0.9, 0.7, 0.1, 0.3])]).unwrap();
    /// use oracles::ModelRegistry;
    /// use structlearn::oracle_config::builtin_oracle;
    /// use structlearn::{CheckpointConfig, TrainConfig, Trainer};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("run.ckpt");
    /// let oracles = || vec![("unary".into(), builtin_oracle("linear").unwrap()), ("pairwise".into(), builtin_oracle("linear").unwrap())];
    /// let config = |n| TrainConfig {
    ///     learning_iterations: n,
    ///     checkpoint: Some(CheckpointConfig::new(path.clone())),
    ///     ..TrainConfig::default()
    /// };
    /// let whole = Trainer::new(&data, oracles(), config(4)).unwrap().train().unwrap();
    /// Trainer::new(&data, oracles(), config(2)).unwrap().train().unwrap(); // "interrupted" after 2
    /// let mut trainer = Trainer::new(&data, oracles(), config(4)).unwrap();
    /// trainer.resume_from(&path, &ModelRegistry::with_builtin()).unwrap();
    /// let resumed = trainer.train().unwrap();
    /// assert_eq!(resumed.model.to_bytes().unwrap(), whole.model.to_bytes().unwrap());
    /// ```
    pub fn resume_from(&mut self, path: &Path, registry: &ModelRegistry) -> Result<(), LearnError> {
        let path = rank_file(path, self.solver.collective());
        let bytes = std::fs::read(&path).map_err(|e| LearnError::io(&path, e))?;
        self.resume_from_bytes(&bytes, &path, registry)
    }

    /// [`Executor::resume_from`] on the bytes of a checkpoint file; `path`
    /// names it in errors.
    pub fn resume_from_bytes(&mut self, bytes: &[u8], path: &Path, registry: &ModelRegistry) -> Result<(), LearnError> {
        let run = self.solver.resume_from_bytes(bytes, path, registry)?;
        run.check(self.solver.steps_per_iteration(), path)?;
        // Every rank must resume after the same step (a run stopped while
        // the ranks were writing their files is not resumable).
        let collective = self.solver.collective();
        if collective.ranks() > 1 {
            let steps = run.history.len() as f64;
            let mut range = [steps, -steps];
            collective.max(&mut range);
            if range[0] != -range[1] {
                return Err(LearnError::Ranks(format!(
                    "the ranks' checkpoint files hold between {} and {} steps ({} on rank {}: {}); the run cannot \
                     resume from them",
                    -range[1],
                    range[0],
                    run.history.len(),
                    collective.rank(),
                    path.display()
                )));
            }
        }
        self.run = run;
        Ok(())
    }

    /// Spreads training over `collective`'s ranks ([`Learner::distribute`]).
    pub fn distribute(&mut self, collective: Arc<dyn Collective>) -> Result<(), LearnError> {
        self.solver.distribute(collective)
    }

    fn emit(&mut self, event: &TrainEvent<'_>) -> Result<(), LearnError> {
        for o in &mut self.observers {
            o.observe(event)?;
        }
        Ok(())
    }

    /// Checks the validation set against the model before any work.
    fn check_validation(&self) -> Result<(), LearnError> {
        let config = self.solver.config();
        if config.early_stopping.is_some() && (self.solver.validation().is_none() || config.evaluate == Evaluate::Never)
        {
            return Err(LearnError::InvalidSetting {
                name: "early_stopping",
                value: "set".into(),
                allowed: "only with a validation set and evaluation (evaluate is not `never`)",
            });
        }
        let Some(v) = self.solver.validation() else { return Ok(()) };
        let model = self.solver.model()?;
        let check = || {
            model.check_dataset(v)?;
            (0..v.len()).try_for_each(|k| v.labels(k).map(|_| ()))?;
            if v.labelled_variables() == 0 {
                return Err(LearnError::Config(
                    "it has no labelled variables (no examples, or every label unknown), so its error is undefined"
                        .into(),
                ));
            }
            Ok(())
        };
        check().map_err(|e| LearnError::Validation(Box::new(e)))
    }

    /// Saves a checkpoint of the run so far with the time spent so far
    /// (`start`: when this call of [`Executor::train`] began) and tells the
    /// observers.
    fn checkpoint(&mut self, path: &Path, start: Instant) -> Result<(), LearnError> {
        self.run.elapsed_seconds += start.elapsed().as_secs_f64();
        let saved = self.solver.save_checkpoint(&rank_file(path, self.solver.collective()), &self.run);
        self.run.elapsed_seconds -= start.elapsed().as_secs_f64();
        saved?;
        let (iteration, steps) = (self.run.completed, self.run.steps_into_next());
        self.emit(&TrainEvent::Checkpointed { iteration, steps, path })
    }

    /// Whether the stop flag is set (on any rank).
    fn stop_requested(&self) -> bool {
        let stop = self.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst));
        on_any_rank(self.solver.collective(), stop)
    }

    /// Runs the remaining learning iterations (all of them, or those after a
    /// resumed checkpoint, starting with the rest of its unfinished
    /// iteration). Returns [`LearnError::Interrupted`] if the stop flag was
    /// set (after checkpointing, if configured).
    pub fn train(&mut self) -> Result<TrainOutcome, LearnError> {
        self.check_validation()?;
        let config = self.solver.config().clone();
        let mut best =
            config.early_stopping.map(|rule| BestValidation::from_history(rule, self.run.finished_history()));
        let mut stop_reason = StopReason::Completed;
        let start = Instant::now();
        let total = config.learning_iterations;
        let steps = self.solver.steps_per_iteration();
        self.emit(&TrainEvent::Started {
            total_iterations: total,
            steps_per_iteration: steps,
            completed: self.run.completed,
        })?;
        // The records (steps) whose state is in the checkpoint file, and when it was written.
        let mut checkpointed = self.run.history.len();
        let mut written = Instant::now();
        while self.run.completed < total {
            let first_step = self.run.steps_into_next();
            if first_step == 0 && self.solver.converged() {
                stop_reason = StopReason::Converged;
                break;
            }
            let iteration = self.run.completed + 1;
            for s in first_step..steps {
                if self.stop_requested() {
                    // Stopped between checkpoints: keep the finished steps too.
                    if let Some(c) = &config.checkpoint
                        && checkpointed < self.run.history.len()
                    {
                        self.checkpoint(&c.path, start)?;
                    }
                    return Err(LearnError::Interrupted { completed: self.run.completed });
                }
                // Agreed over the ranks (their clocks differ), so that their files hold the same steps.
                if s > first_step
                    && let Some(c) = &config.checkpoint
                    && let Some(t) = c.within_iteration_seconds
                    && on_any_rank(self.solver.collective(), written.elapsed().as_secs_f64() >= t)
                {
                    self.checkpoint(&c.path, start)?;
                    (checkpointed, written) = (self.run.history.len(), Instant::now());
                }
                let t0 = Instant::now();
                let mut record = self.solver.step(iteration, s, &self.run.history)?;
                record.step_seconds = t0.elapsed().as_secs_f64();
                let evaluate = match config.evaluate {
                    Evaluate::EveryStep => true,
                    Evaluate::EveryIteration => s + 1 == steps,
                    Evaluate::Never => false,
                };
                if evaluate {
                    let with_train =
                        config.evaluates_train_at(iteration) || (self.solver.converged() && config.evaluate_train);
                    let (tr, va) = self.solver.evaluate(with_train)?;
                    record.train_error = tr;
                    record.validation_error = va;
                }
                record.elapsed_seconds = self.run.elapsed_seconds + start.elapsed().as_secs_f64();
                self.run.history.push(record.clone());
                self.emit(&TrainEvent::Step(&record))?;
            }
            self.run.completed = iteration;
            let model = self.solver.model()?;
            self.emit(&TrainEvent::IterationFinished { iteration, model: &model })?;
            let verdict =
                best.as_mut().map(|b| b.update(iteration, self.run.history.last().and_then(|r| r.validation_error)));
            if verdict == Some(Verdict::Improved) {
                self.run.best_model = Some(model.clone());
            }
            if let Some(path) = &self.model_path
                && self.solver.collective().rank() == 0
            {
                self.run.best_model.as_ref().unwrap_or(&model).save(path)?;
            }
            let observer_stop =
                on_any_rank(self.solver.collective(), self.observers.iter().any(|o| o.stop_requested()));
            if let Some(c) = &config.checkpoint
                && (iteration.is_multiple_of(c.every) || iteration == total || observer_stop)
            {
                self.checkpoint(&c.path, start)?;
                (checkpointed, written) = (self.run.history.len(), Instant::now());
            }
            if verdict == Some(Verdict::Stop) && iteration < total {
                stop_reason = StopReason::EarlyStopping;
                break;
            }
            if observer_stop && iteration < total {
                stop_reason = StopReason::Observer;
                break;
            }
        }
        self.emit(&TrainEvent::Finished)?;
        let model = match &self.run.best_model {
            Some(m) => m.clone(),
            None => self.solver.model()?,
        };
        Ok(TrainOutcome {
            model,
            best_iteration: best.and_then(|b| b.best()).map(|(i, _)| i),
            stopped_early: stop_reason == StopReason::EarlyStopping,
            stop_reason,
            history: self.run.history.clone(),
        })
    }
}

/// Whether `flag` is set on any rank (a collective call over several ranks):
/// the ranks stop together or not at all (Ctrl-C reaches them at different
/// moments).
fn on_any_rank(collective: &dyn Collective, flag: bool) -> bool {
    let mut any = [f64::from(u8::from(flag))];
    collective.max(&mut any);
    any[0] > 0.0
}

/// The checkpoint file of this rank: `path` itself on rank 0 (and in one
/// process), `path` with `.rank<r>` appended on rank `r ≥ 1`, which holds
/// that rank's messages (the models and history are the same on every rank).
///
/// ```
/// use std::path::Path;
/// use structlearn::executor::rank_file;
/// let ranks = oracles::ThreadRanks::group(2);
/// assert_eq!(rank_file(Path::new("run.ckpt"), &ranks[0]), Path::new("run.ckpt"));
/// assert_eq!(rank_file(Path::new("run.ckpt"), &ranks[1]), Path::new("run.ckpt.rank1"));
/// ```
pub fn rank_file(path: &Path, collective: &dyn Collective) -> PathBuf {
    match collective.rank() {
        0 => path.to_path_buf(),
        r => {
            let mut name = path.as_os_str().to_owned();
            name.push(format!(".rank{r}"));
            PathBuf::from(name)
        }
    }
}

impl<'a, S: Solver<'a>> Learner<'a> for Executor<'a, S> {
    fn name(&self) -> &str {
        self.solver.name()
    }
    fn set_validation(&mut self, validation: &'a Dataset) {
        self.solver.set_validation(validation);
    }
    fn add_observer(&mut self, observer: Box<dyn Observer + Send + 'a>) {
        Executor::add_observer(self, observer);
    }
    fn set_stop_flag(&mut self, stop: Arc<AtomicBool>) {
        Executor::set_stop_flag(self, stop);
    }
    fn completed_iterations(&self) -> usize {
        Executor::completed_iterations(self)
    }
    fn steps_into_next(&self) -> usize {
        self.run.steps_into_next()
    }
    fn save_model_to(&mut self, path: &Path) {
        Executor::save_model_to(self, path);
    }
    fn train(&mut self) -> Result<TrainOutcome, LearnError> {
        Executor::train(self)
    }
    fn model(&self) -> Result<StructuredModel, LearnError> {
        self.solver.model()
    }
    fn best_model(&self) -> Option<&StructuredModel> {
        Executor::best_model(self)
    }
    fn history(&self) -> &[Record] {
        Executor::history(self)
    }
    fn save_checkpoint(&self, path: &Path) -> Result<(), LearnError> {
        Executor::save_checkpoint(self, path)
    }
    fn resume_from(&mut self, path: &Path, registry: &ModelRegistry) -> Result<(), LearnError> {
        Executor::resume_from(self, path, registry)
    }
    fn distribute(&mut self, collective: Arc<dyn Collective>) -> Result<(), LearnError> {
        Executor::distribute(self, collective)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(completed: usize, steps: &[(usize, usize)]) -> RunState {
        let history = steps.iter().map(|&(i, s)| Record::new(i, s, "fit")).collect();
        RunState { completed, history, ..RunState::default() }
    }

    #[test]
    fn a_checkpoint_history_must_fit_its_finished_iterations() {
        let path = Path::new("run.ckpt");
        let whole = [(1, 0), (1, 1)];
        assert_eq!(run(1, &whole).steps_into_next(), 0);
        assert!(run(1, &whole).check(2, path).is_ok());
        let inside = [(1, 0), (1, 1), (2, 0)];
        assert_eq!(run(1, &inside).steps_into_next(), 1);
        assert_eq!(run(1, &inside).finished_history().len(), 2);
        assert!(run(1, &inside).check(2, path).is_ok());
        // A record of a later iteration than the next, or a whole unfinished iteration.
        for (completed, bad) in [(1, &[(1, 0), (1, 1), (3, 0)][..]), (0, &whole[..])] {
            let err = run(completed, bad).check(2, path).unwrap_err().to_string();
            assert!(err.starts_with("run.ckpt") && err.contains("damaged"), "{err}");
        }
    }
}
