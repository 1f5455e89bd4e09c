//! The experiment runner shared by every `cargo xtask reproduce` experiment:
//! the 5 × 5 grid of (unary class, pairwise class) cells trained with
//! Algorithm 1 and evaluated after every learning iteration; cell selection,
//! seeds, progress bars, Ctrl-C (finished cells are kept), `--resume`, and the
//! outputs:
//!
//! * `results.csv` (mean over seeds), `results_by_seed.csv` (one line per cell
//!   and seed, with seconds and the process's peak RSS after the cell);
//! * `curves.csv` (train/test error, objective, elapsed seconds and the factor
//!   types whose fit was rejected, per learning iteration) and
//!   `fig2_error_curves.png`;
//! * `table.md`: ours beside the paper's values and the differences;
//! * `per_class.csv` (experiments with named classes): per-class accuracy and
//!   IoU, and mean IoU, of every cell on the test set;
//! * `models/` (one model per cell) and `run.json` (command, commit, preset,
//!   wall-clock, threads, peak RSS, whether it finished).
//!
//! An experiment supplies its data, its oracles, its paper table and any
//! figures of its own through [`Experiment`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use factor_graph::UNARY;
use indicatif::MultiProgress;
use oracles::Oracle;
use reporting::plots::{self, CurveData};
use reporting::{ProgressMode, ProgressObserver, Verbosity, human_duration};
use structlearn::files::write_atomic;
use structlearn::metrics::ConfusionMatrix;
use structlearn::{
    CheckpointConfig, Dataset, Evaluate, LearnError, PredictOptions, Step, StructuredModel, TrainConfig, Trainer,
};

/// The function classes, in the papers' order (rows and columns of the tables).
pub const CLASSES: [&str; 5] = ["zero", "constant", "linear", "boosting", "mlp"];

/// Display names of [`CLASSES`].
pub const NAMES: [&str; 5] = ["Zero", "Const.", "Linear", "Boost.", "MLP"];

/// A 5 × 5 table of the paper: rows unary class, columns pairwise class.
pub type PaperTable = [[f64; 5]; 5];

/// How big a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// A fast look.
    Quick,
    /// The README's main command.
    Default,
    /// The paper's scale.
    Full,
}

impl Scale {
    /// `""`, `"-quick"` or `"-full"`: the suffix of the default output folder.
    fn suffix(self) -> &'static str {
        match self {
            Scale::Quick => "-quick",
            Scale::Default => "",
            Scale::Full => "-full",
        }
    }
}

/// Options common to every experiment (the `reproduce` command line).
#[derive(Debug, Clone)]
pub struct Options {
    /// Size of the run.
    pub scale: Scale,
    /// Output folder.
    pub out: Option<PathBuf>,
    /// Number of seeds.
    pub seeds: usize,
    /// First seed.
    pub first_seed: u64,
    /// Cells to run (`UNARY/PAIRWISE`); empty: all 25.
    pub cells: Vec<String>,
    /// Learning iterations, overriding the preset.
    pub iterations: Option<usize>,
    /// Skip cells already in the output folder.
    pub resume: bool,
    /// Write the data sets into the output folder.
    pub save_data: bool,
    /// Prediction's message-passing iterations, overriding the preset.
    pub predict_iterations: Option<usize>,
    /// [`Budget::train_error_every`], overriding the preset.
    pub train_error_every: Option<usize>,
    /// Folder of the downloaded data sets (real-image experiments).
    pub data_dir: Option<PathBuf>,
    /// Folder of the feature cache (real-image experiments); `None`: the default.
    pub cache_dir: Option<PathBuf>,
    /// Disable the feature cache.
    pub no_cache: bool,
    /// Progress on standard error (`--quiet`, `--verbose`).
    pub verbosity: Verbosity,
    /// Output folders of other runs of the same preset (e.g. disjoint cells run
    /// in parallel): their finished cells are copied in instead of trained.
    pub merge: Vec<PathBuf>,
    /// Cells trained at the same time, each with `threads / jobs` threads (at
    /// least 1); the results are the same for any split. `None`: the
    /// experiment's [`Experiment::default_jobs`].
    pub jobs: Option<usize>,
}

/// The learning budget of a run (part of every preset).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Budget {
    /// Learning iterations of Algorithm 1.
    pub learning_iterations: usize,
    /// Prediction options of each evaluation (warm-started across iterations).
    pub predict: PredictOptions,
    /// The training error is evaluated after every this many learning
    /// iterations and after the last (the test error after every one):
    /// [`structlearn::TrainConfig::evaluate_train_every`].
    pub train_error_every: usize,
    /// Checkpoint after every this many learning iterations (and after the
    /// last, and when interrupted): more than 1 where an iteration takes about
    /// as long as writing the checkpoint's messages.
    pub checkpoint_every: usize,
}

/// The training and test sets of one seed, with anything an experiment keeps
/// beside them (images for figures, statistics).
pub trait ExperimentData {
    /// The training set.
    fn train(&self) -> &Dataset;
    /// The test set.
    fn test(&self) -> &Dataset;
}

/// What an experiment supplies to the runner.
pub trait Experiment {
    /// Its data for one seed.
    type Data: ExperimentData;

    /// Short name, used for the default output folder (`target/reproduce/NAME`).
    fn name(&self) -> &'static str;
    /// The preset's settings as JSON: written to `run.json`, and `--resume`
    /// refuses a folder written under other settings.
    fn preset(&self) -> serde_json::Value;
    /// Learning iterations and prediction options.
    fn budget(&self) -> Budget;
    /// One line describing the run (data sizes, iterations).
    fn describe(&self) -> String;
    /// Loads or generates the data of `seed`.
    fn data(&self, seed: u64) -> Result<Self::Data>;
    /// The oracle of class `kind` for the unary (`pairwise = false`) or pairwise factors.
    fn oracle(&self, kind: &str, pairwise: bool) -> Result<Box<dyn Oracle>, LearnError>;
    /// The steps of a learning iteration, given the message-passing sweeps
    /// after each fit; `None`: the trainer's default (fit each factor type in
    /// turn, each followed by message passing).
    fn schedule(&self, _message_passing: usize) -> Option<Vec<Step>> {
        None
    }
    /// The paper's test errors.
    fn paper_test(&self) -> &PaperTable;
    /// The paper's training errors, if it reports them.
    fn paper_train(&self) -> Option<&PaperTable> {
        None
    }
    /// The table's caption (what is compared).
    fn caption(&self) -> String;
    /// Text appended below the table (may use the data of the seeds run so far).
    fn table_note(&self, _data: &BTreeMap<u64, Self::Data>) -> String {
        String::new()
    }
    /// Class names for per-class accuracy and IoU on the test set; `None`: not reported.
    fn class_names(&self) -> Option<Vec<String>> {
        None
    }
    /// Cells trained at once without `--jobs`: one at a time on all the
    /// threads (cells that need much memory), unless overridden.
    fn default_jobs(&self, _threads: usize) -> usize {
        1
    }
    /// Writes the data sets of `seed` into `out` (`--save-data`).
    fn save_data(&self, out: &Path, seed: u64, data: &Self::Data) -> Result<()> {
        data.train().save(&out.join(format!("train-seed{seed}.sld")))?;
        data.test().save(&out.join(format!("test-seed{seed}.sld")))?;
        Ok(())
    }
    /// Writes the experiment's own figures and files (after the run, for the
    /// first seed; `done` holds every finished cell).
    fn figures(&self, out: &Path, done: &[CellResult], seed: u64, data: &Self::Data) -> Result<()>;
}

/// One trained cell.
#[derive(Debug, Clone, PartialEq)]
pub struct CellResult {
    /// Seed.
    pub seed: u64,
    /// Unary function class.
    pub unary: String,
    /// Pairwise function class.
    pub pairwise: String,
    /// Final training error.
    pub train_error: f64,
    /// Final test error.
    pub test_error: f64,
    /// Wall-clock seconds of the cell (training and evaluation).
    pub seconds: f64,
    /// Peak resident set size of the process after the cell, MiB (0 if unknown).
    pub peak_rss_mib: f64,
    /// One point per evaluated learning iteration.
    pub curve: Vec<CurvePoint>,
}

/// One evaluated learning iteration of a cell: a line of `curves.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct CurvePoint {
    /// Learning iteration, from 1.
    pub iteration: usize,
    /// Training error after the iteration; `None` at iterations that
    /// evaluate the test set alone ([`Budget::train_error_every`]).
    pub train_error: Option<f64>,
    /// Test error after the iteration.
    pub test_error: f64,
    /// Training objective `R` after the iteration.
    pub objective: f64,
    /// Seconds since the cell started (NaN when read from a file without them).
    pub elapsed_seconds: f64,
    /// Factor types whose fit in this iteration was rejected (it did not
    /// lower the oracle's objective, so the previous model was kept), in
    /// schedule order; `None` when read from a `curves.csv` written before
    /// the column existed.
    pub rejected_fits: Option<Vec<String>>,
}

impl CurvePoint {
    /// The points of a training history: one per evaluated iteration, with
    /// that iteration's rejected fits.
    fn from_history(history: &[structlearn::Record]) -> Vec<Self> {
        history
            .iter()
            .filter_map(|r| {
                let rejected = history
                    .iter()
                    .filter(|h| h.iteration == r.iteration && h.rejected == Some(true))
                    .filter_map(|h| h.factor_type.clone())
                    .collect();
                Some(Self {
                    iteration: r.iteration,
                    train_error: r.train_error,
                    test_error: r.validation_error?,
                    objective: r.objective,
                    elapsed_seconds: r.elapsed_seconds,
                    rejected_fits: Some(rejected),
                })
            })
            .collect()
    }

    /// The `rejected_fits` field of `curves.csv`: type names joined by `;`
    /// (empty: none rejected), `unknown` for older runs.
    fn rejected_field(&self) -> String {
        self.rejected_fits.as_ref().map_or_else(|| UNKNOWN_REJECTED.to_string(), |names| names.join(";"))
    }

    /// The point's line of `curves.csv` (with its newline) for a cell.
    fn csv_line(&self, seed: u64, unary: &str, pairwise: &str) -> String {
        format!(
            "{seed},{unary},{pairwise},{},{},{},{},{:.3},{}\n",
            self.iteration,
            self.train_error.map_or_else(String::new, |e| e.to_string()),
            self.test_error,
            self.objective,
            self.elapsed_seconds,
            self.rejected_field()
        )
    }

    /// A `curves.csv` line after its `seed,unary,pairwise` fields (7, 8 or
    /// 9 fields in all: files of older runs lack the last one or two); a
    /// field that does not parse or is out of range is an error naming the
    /// file, the line and the field.
    fn parse(line: &CsvLine<'_>) -> Result<Self> {
        let fields = &line.fields;
        let rejected_fits = match fields.get(8) {
            None => None,
            Some(&f) if f == UNKNOWN_REJECTED => None,
            Some(&f) => Some(f.split(';').filter(|n| !n.is_empty()).map(str::to_string).collect()),
        };
        let iteration: usize = line.parse(3, "iteration", "a learning iteration (a whole number from 1)")?;
        if iteration == 0 {
            return Err(line.error("iteration", "0 is not a learning iteration (they count from 1)"));
        }
        Ok(Self {
            iteration,
            train_error: match fields[4] {
                "" => None,
                _ => Some(line.number(4, "train_error", 0.0, 1.0)?),
            },
            test_error: line.number(5, "test_error", 0.0, 1.0)?,
            objective: line.number(6, "objective", f64::MIN, f64::MAX)?,
            // NaN: a point of an older run, which did not record the time.
            elapsed_seconds: match fields.get(7) {
                None => f64::NAN,
                Some(v) if v.eq_ignore_ascii_case("nan") => f64::NAN,
                Some(_) => line.number(7, "elapsed_seconds", 0.0, f64::MAX)?,
            },
            rejected_fits,
        })
    }
}

/// `curves.csv`'s `rejected_fits` of a run that did not record them.
const UNKNOWN_REJECTED: &str = "unknown";

/// The header of `curves.csv`.
const CURVES_HEADER: &str =
    "seed,unary,pairwise,iteration,train_error,test_error,objective,elapsed_seconds,rejected_fits\n";

/// The model file of a cell.
pub fn model_path(out: &Path, seed: u64, unary: &str, pairwise: &str) -> PathBuf {
    out.join("models").join(format!("seed{seed}-{unary}-{pairwise}.slm"))
}

/// Runs the selected cells of an experiment and writes everything into the output folder.
pub fn reproduce<E: Experiment + Sync>(exp: &E, opts: &Options) -> Result<()>
where
    E::Data: Sync,
{
    if opts.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    // Settings that the trainer would check only when their cell starts
    // (hours into a full run): checked before any data is loaded.
    check_settings(exp)?;
    // The jobs actually used, as run.json records them.
    let opts = &Options {
        jobs: Some(opts.jobs.unwrap_or_else(|| exp.default_jobs(rayon::current_num_threads()))),
        ..opts.clone()
    };
    let budget = exp.budget();
    let out = opts
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("target/reproduce/{}{}", exp.name(), opts.scale.suffix())));
    create_folder(&out.join("models"))?;
    let cells = selected_cells(&opts.cells)?;
    let seeds = seed_list(opts.first_seed, opts.seeds)?;
    let preset = exp.preset();

    if opts.resume {
        check_same_preset(&out, &preset)?;
    }
    let mut done: Vec<CellResult> = if opts.resume { read_previous(&out)? } else { Vec::new() };
    done.retain(|r| seeds.contains(&r.seed) && cells.contains(&(r.unary.clone(), r.pairwise.clone())));
    for dir in &opts.merge {
        merge_cells(dir, &out, &preset, &seeds, &cells, &mut done)?;
    }
    let mut todo: Vec<(u64, String, String)> = seeds
        .iter()
        .flat_map(|&s| cells.iter().map(move |(u, pw)| (s, u.clone(), pw.clone())))
        .filter(|(s, u, pw)| !done.iter().any(|r| r.seed == *s && &r.unary == u && &r.pairwise == pw))
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    if let Err(e) = structlearn_cli::stop_on_ctrl_c(flag) {
        eprintln!("warning: Ctrl-C will not stop cleanly: {e}");
    }
    let mode = opts.verbosity.mode();
    if opts.verbosity.normal() {
        eprintln!(
            "{}: {}, {} cells × {} seeds → {}",
            exp.name(),
            exp.describe(),
            cells.len(),
            seeds.len(),
            out.display()
        );
    }
    // The commit is taken before training: later commits made while a long
    // run is going on must not be credited with its results.
    let commit = current_commit();
    // Written again at the end; until then it marks the folder as unfinished
    // and lets `--resume` check that it continues with the same preset.
    // A resumed run adds its time to the earlier sessions' (a finished folder
    // resumed with nothing left to do keeps its time).
    let seconds_before = if opts.resume { previous_seconds(&out) } else { 0.0 };
    let info = RunInfo { preset: &preset, opts, commit: commit.as_deref() };
    info.write(&out, &done, seconds_before, true)?;
    let wall = Instant::now();
    let multi = MultiProgress::new();
    let total_cells = seeds.len() * cells.len();
    let overall = multi.add(mode.bar(total_cells as u64, "cells [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}"));
    overall.set_position(done.len() as u64);
    let done_before = done.len();
    let mut data_by_seed: BTreeMap<u64, E::Data> = BTreeMap::new();
    for seed in todo.iter().map(|t| t.0).collect::<std::collections::BTreeSet<_>>() {
        let data = exp.data(seed)?;
        if opts.save_data {
            exp.save_data(&out, seed, &data)?;
        }
        data_by_seed.insert(seed, data);
    }
    // `jobs` cells at a time, each on its own pool of threads; the results do
    // not depend on the number of threads, so neither do the outputs.
    let jobs = opts.jobs.unwrap_or(1).clamp(1, todo.len().max(1));
    if jobs > 1 {
        // Longest first, so that the last cells to finish, while other jobs
        // have nothing left to start, are short ones.
        todo.sort_by_key(|(seed, u, pw)| (std::cmp::Reverse(expected_cost(u, pw)), *seed));
    }
    let threads_per_job = (rayon::current_num_threads() / jobs).max(1);
    let pools = (0..jobs)
        .map(|_| rayon::ThreadPoolBuilder::new().num_threads(threads_per_job).build())
        .collect::<Result<Vec<_>, _>>()?;
    let next = AtomicUsize::new(0);
    let mut interrupted = false;
    let mut failure = None;
    std::thread::scope(|scope| {
        let (sender, finished) = std::sync::mpsc::channel();
        for pool in &pools {
            let sender = sender.clone();
            let (next, stop, multi, data_by_seed, todo, budget, out) =
                (&next, &stop, &multi, &data_by_seed, &todo, &budget, &out);
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= todo.len() || stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let (seed, u, pw) = &todo[i];
                    let bar = multi.add(mode.bar(0, "{prefix:>20} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}"));
                    let label = format!("cell {}/{total_cells} {u}/{pw} seed {seed}", done_before + i + 1);
                    let progress = ProgressObserver::with_bar(bar.clone(), &label, opts.verbosity);
                    let data = &data_by_seed[seed];
                    let result =
                        pool.install(|| run_cell(exp, budget, data, (*seed, u, pw), stop, progress, out, opts.resume));
                    multi.remove(&bar);
                    let failed = result.is_err();
                    if sender.send((i, result.map(|r| (r, label)))).is_err() || failed {
                        return;
                    }
                }
            });
        }
        drop(sender);
        for (i, result) in finished {
            let (seed, u, pw) = &todo[i];
            match result {
                Ok((result, label)) => {
                    if mode != ProgressMode::Off {
                        let finished_here = done.len() + 1 - done_before;
                        let elapsed = wall.elapsed().as_secs_f64();
                        let eta = elapsed / finished_here as f64 * (total_cells - done.len() - 1) as f64;
                        let line = format!(
                            "{label}: done in {}: train error {:.4}, test error {:.4} (paper {:.3}); {} elapsed, ETA {}",
                            human_duration(result.seconds),
                            result.train_error,
                            result.test_error,
                            paper_error(exp.paper_test(), u, pw),
                            human_duration(elapsed),
                            human_duration(eta)
                        );
                        if mode == ProgressMode::Bar {
                            multi.suspend(|| eprintln!("{line}"))
                        } else {
                            eprintln!("{line}")
                        }
                    }
                    done.push(result);
                    // Cells finish in any order; the outputs list them in the run's order.
                    done.sort_by_key(|r| (r.seed, cells.iter().position(|c| c.0 == r.unary && c.1 == r.pairwise)));
                    overall.inc(1);
                    let written = write_outputs(exp, &out, &done, &seeds, &cells, &data_by_seed)
                        .and_then(|()| info.write(&out, &done, seconds_before + wall.elapsed().as_secs_f64(), true));
                    if let Err(e) = written {
                        stop.store(true, Ordering::SeqCst);
                        failure.get_or_insert(e);
                    }
                }
                Err(e) if matches!(e.downcast_ref::<LearnError>(), Some(LearnError::Interrupted { .. })) => {
                    interrupted = true;
                }
                Err(e) => {
                    // The other cells stop after their current learning iteration (checkpointed).
                    stop.store(true, Ordering::SeqCst);
                    failure.get_or_insert(e.context(format!("cell {u}/{pw}, seed {seed}")));
                }
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    interrupted |= stop.load(Ordering::SeqCst) && done.len() < total_cells;
    overall.finish_and_clear();
    let seconds = seconds_before + wall.elapsed().as_secs_f64();
    let first = seeds[0];
    if !data_by_seed.contains_key(&first) && !interrupted {
        data_by_seed.insert(first, exp.data(first)?);
    }
    write_outputs(exp, &out, &done, &seeds, &cells, &data_by_seed)?;
    if let Some(data) = data_by_seed.get(&first) {
        if let Some(names) = exp.class_names() {
            write_per_class(&out, &done, first, data, &names, &budget.predict)?;
        }
        exp.figures(&out, &done, first, data)?;
    }
    info.write(&out, &done, seconds, interrupted)?;
    println!("{}", std::fs::read_to_string(out.join("table.md")).unwrap_or_default());
    println!("wall-clock: {seconds:.1} s; outputs in {}", out.display());
    if interrupted {
        bail!(
            "interrupted: finished cells are in {} (each interrupted cell keeps a checkpoint of its last finished \
             learning iteration); rerun with --resume to continue",
            out.display()
        );
    }
    Ok(())
}

/// A cell's cost relative to the others, for the order of `--jobs`: every
/// pairwise term couples the images (message passing no longer stops early)
/// and MLP fits are the slowest (the full denoising table's times, in
/// quarters of a zero/zero cell).
fn expected_cost(unary: &str, pairwise: &str) -> u32 {
    const PAIRWISE: [(&str, u32); 2] = [("zero", 4), ("mlp", 11)];
    const UNARY: [(&str, u32); 2] = [("mlp", 2), ("boosting", 1)];
    let cost =
        |table: &[(&str, u32)], kind: &str, other: u32| table.iter().find(|(k, _)| *k == kind).map_or(other, |c| c.1);
    cost(&PAIRWISE, pairwise, 7) + cost(&UNARY, unary, 0)
}

/// The seeds `first, first + 1, …` (`count` of them); refuses a list that
/// would run past `u64::MAX` instead of wrapping around to seed 0.
pub fn seed_list(first: u64, count: usize) -> Result<Vec<u64>> {
    let last = u64::try_from(count).ok().and_then(|n| first.checked_add(n.checked_sub(1)?));
    if last.is_none() {
        bail!(
            "--seed {first} with --seeds {count}: the last seed would be past {} (the largest seed); use --seed {} \
             or less, or fewer --seeds",
            u64::MAX,
            u64::MAX - (count.max(1) as u64 - 1)
        );
    }
    Ok((0..count as u64).map(|s| first + s).collect())
}

/// Refuses, before any data is loaded or cell trained, settings that the
/// trainer would check only when a cell starts: the learning budget and the
/// oracle of every class in both roles (boosting rounds, MLP epochs and
/// minibatch, extra oracle settings), whichever cells are selected.
pub fn check_settings<E: Experiment>(exp: &E) -> Result<()> {
    let budget = exp.budget();
    for (name, value) in [
        ("learning_iterations", budget.learning_iterations),
        ("train_error_every", budget.train_error_every),
        ("checkpoint_every", budget.checkpoint_every),
        ("predict.iterations", budget.predict.iterations),
    ] {
        if value == 0 {
            bail!("invalid setting `{name}`: 0; it must be at least 1");
        }
    }
    if let Some(tol) = budget.predict.tolerance
        && !(tol > 0.0 && tol.is_finite())
    {
        bail!("invalid setting `predict.tolerance`: {tol}; it must be a finite number > 0 (or null: none)");
    }
    for kind in CLASSES {
        for (pairwise, role) in [(false, "unary"), (true, "pairwise")] {
            exp.oracle(kind, pairwise)
                .with_context(|| format!("invalid settings of the {kind} oracle (as {role} oracle)"))?;
        }
    }
    Ok(())
}

/// The cells of `--cell` filters (all 25 without filters), in the order
/// given; a cell named twice is run once (the first mention counts).
pub fn selected_cells(filters: &[String]) -> Result<Vec<(String, String)>> {
    let all: Vec<(String, String)> =
        CLASSES.iter().flat_map(|u| CLASSES.iter().map(move |p| (u.to_string(), p.to_string()))).collect();
    if filters.is_empty() {
        return Ok(all);
    }
    filters
        .iter()
        .map(|f| {
            let (u, p) = f.split_once('/').with_context(|| format!("--cell `{f}` is not UNARY/PAIRWISE"))?;
            if !CLASSES.contains(&u) || !CLASSES.contains(&p) {
                bail!("--cell `{f}`: classes are {}", CLASSES.join(", "));
            }
            Ok((u.to_string(), p.to_string()))
        })
        .try_fold(Vec::new(), |mut cells, cell: Result<(String, String)>| {
            let cell = cell?;
            if !cells.contains(&cell) {
                cells.push(cell);
            }
            Ok(cells)
        })
}

/// Where a cell's per-iteration checkpoint lives while it trains.
pub fn checkpoint_path(out: &Path, seed: u64, unary: &str, pairwise: &str) -> PathBuf {
    out.join("checkpoints").join(format!("seed{seed}-{unary}-{pairwise}.ckpt"))
}

/// Trains one cell. The trainer checkpoints after every
/// [`Budget::checkpoint_every`]-th learning iteration and when Ctrl-C stops it,
/// so an interrupted cell continues with `--resume` from its last finished
/// iteration (a killed session: from its last checkpoint), with the same
/// result as an uninterrupted run; the checkpoint is removed once the cell's
/// model is saved.
#[allow(clippy::too_many_arguments)]
fn run_cell<E: Experiment>(
    exp: &E,
    budget: &Budget,
    data: &E::Data,
    (seed, unary, pairwise): (u64, &str, &str),
    stop: &Arc<AtomicBool>,
    progress: ProgressObserver,
    out: &Path,
    resume: bool,
) -> Result<CellResult> {
    let start = Instant::now();
    // The unary type gets the unary oracle, every other type (pairwise, or the
    // image data sets' horizontal and vertical pairs) one of the pairwise kind.
    let types: Vec<String> = data.train().factor_types().iter().map(|t| t.name.clone()).collect();
    let oracles = types
        .iter()
        .map(|t| Ok((t.clone(), if t == UNARY { exp.oracle(unary, false)? } else { exp.oracle(pairwise, true)? })))
        .collect::<Result<Vec<_>, LearnError>>()?;
    // The chapter's message passing after each fit.
    const SWEEPS: usize = 25;
    let config = TrainConfig {
        schedule: exp.schedule(SWEEPS),
        epsilon: 0.1,
        learning_iterations: budget.learning_iterations,
        message_passing_iterations: SWEEPS,
        seed,
        predict: budget.predict,
        evaluate: Evaluate::EveryIteration,
        evaluate_train: true,
        evaluate_train_every: budget.train_error_every,
        checkpoint: Some(CheckpointConfig {
            path: checkpoint_path(out, seed, unary, pairwise),
            every: budget.checkpoint_every,
        }),
        ..TrainConfig::default()
    };
    let checkpoint = checkpoint_path(out, seed, unary, pairwise);
    if let Some(dir) = checkpoint.parent() {
        create_folder(dir)?;
    }
    let mut trainer = Trainer::new(data.train(), oracles, config)?.with_validation(data.test());
    if resume && checkpoint.is_file() {
        trainer.resume_from(&checkpoint, &oracles::ModelRegistry::with_builtin())?;
    }
    trainer.add_observer(Box::new(progress));
    trainer.set_stop_flag(stop.clone());
    let outcome = trainer.train()?;
    // Includes the time of earlier sessions when the cell was resumed.
    let seconds = outcome.history.last().map_or(0.0, |r| r.elapsed_seconds).max(start.elapsed().as_secs_f64());
    let curve = CurvePoint::from_history(&outcome.history);
    let last = curve.last().context("no evaluation recorded")?;
    let train_error = last.train_error.context("the last evaluation has no training error")?;
    let test_error = last.test_error;
    outcome.model.save(&model_path(out, seed, unary, pairwise))?;
    if checkpoint.is_file() {
        std::fs::remove_file(&checkpoint)?;
    }
    Ok(CellResult {
        seed,
        unary: unary.into(),
        pairwise: pairwise.into(),
        train_error,
        test_error,
        seconds,
        peak_rss_mib: peak_rss_mib().unwrap_or(0.0),
        curve,
    })
}

/// The process's peak resident set size in MiB (`VmHWM` of `/proc/self/status`; Linux only).
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Adds the finished cells of another run's folder `dir` (same preset, checked)
/// that `done` lacks, copying their models into `out`.
fn merge_cells(
    dir: &Path,
    out: &Path,
    preset: &serde_json::Value,
    seeds: &[u64],
    cells: &[(String, String)],
    done: &mut Vec<CellResult>,
) -> Result<()> {
    let Some(theirs) = recorded_preset(dir).with_context(|| format!("--merge {}", dir.display()))? else {
        bail!("--merge {}: no run.json there (not an output folder of `reproduce`)", dir.display());
    };
    for r in read_previous(dir).with_context(|| format!("--merge {}", dir.display()))? {
        let wanted = seeds.contains(&r.seed) && cells.contains(&(r.unary.clone(), r.pairwise.clone()));
        let have = done.iter().any(|d| d.seed == r.seed && d.unary == r.unary && d.pairwise == r.pairwise);
        if wanted && !have {
            let (mine, other) =
                (preset_for_cell(preset, &r.unary, &r.pairwise), preset_for_cell(&theirs, &r.unary, &r.pairwise));
            if !same_settings(&mine, &other) {
                bail!(
                    "--merge {}: cell {}/{} was trained with preset {other}, this run's is {mine}; merge only \
                     cells of the same settings",
                    dir.display(),
                    r.unary,
                    r.pairwise
                );
            }
            let source = model_path(dir, r.seed, &r.unary, &r.pairwise);
            let bytes = check_model(&source, &r.unary, &r.pairwise).with_context(|| {
                format!("--merge {}: cell {}/{}, seed {}", dir.display(), r.unary, r.pairwise, r.seed)
            })?;
            write_atomic(&model_path(out, r.seed, &r.unary, &r.pairwise), &bytes)?;
            done.push(r);
        }
    }
    Ok(())
}

/// The bytes of the model file `path` of cell `unary`/`pairwise`, once they
/// load (checksum, body) and the unary factor type holds a `unary` model and
/// every other type a `pairwise` one; errors name `path`.
fn check_model(path: &Path, unary: &str, pairwise: &str) -> Result<Vec<u8>> {
    if path.is_dir() {
        bail!("{}: is a folder, not a model file", path.display());
    }
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let model = StructuredModel::from_bytes(&bytes, &oracles::ModelRegistry::with_builtin(), path)?;
    for (ft, m) in model.factor_types().iter().zip(model.models()) {
        let expected = if ft.name == UNARY { unary } else { pairwise };
        if m.kind() != expected {
            bail!(
                "{}: factor type `{}` holds a model of kind `{}`, but cell {unary}/{pairwise} fits it with `{expected}`; \
                 the file belongs to another cell",
                path.display(),
                ft.name,
                m.kind()
            );
        }
    }
    Ok(bytes)
}

/// Whether two recorded presets hold the same settings: as JSON, except that
/// numbers compare by value (`10` written by `--set` equals the preset's `10.0`).
fn same_settings(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_settings(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_settings(v, w)))
        }
        _ => a == b,
    }
}

/// `preset` as far as it concerns the cell `unary`/`pairwise`: without the
/// extra hyper-parameters (`oracles`) of kinds the cell does not use, so that
/// cells of runs whose presets differ only there may be merged.
fn preset_for_cell(preset: &serde_json::Value, unary: &str, pairwise: &str) -> serde_json::Value {
    let mut p = preset.clone();
    if let Some(map) = p.as_object_mut() {
        if let Some(serde_json::Value::Object(oracles)) = map.get_mut("oracles") {
            oracles.retain(|kind, _| kind == unary || kind == pairwise);
        }
        // An empty map is not recorded at all (`Experiment::preset`).
        if map.get("oracles").and_then(serde_json::Value::as_object).is_some_and(serde_json::Map::is_empty) {
            map.remove("oracles");
        }
    }
    p
}

/// The text of `path`, or `None` when there is no such file. Any other
/// failure (a folder, an unreadable file, bytes that are not UTF-8) is an
/// error naming the file: a damaged results file must never pass for "no
/// results", or `--resume` would train its finished cells again and
/// overwrite them.
fn read_optional(path: &Path) -> Result<Option<String>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) if path.is_dir() => bail!("{}: is a folder, not a file", path.display()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    String::from_utf8(bytes).map(Some).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..valid].iter().filter(|&&b| b == b'\n').count() + 1;
        anyhow::anyhow!(
            "{}: line {line} is not UTF-8 text (byte {valid}); the file is damaged: restore it, or move the \
             folder aside to start afresh",
            path.display()
        )
    })
}

/// A value of a CSV field as shown in an error: at most 40 characters, with
/// control characters escaped.
fn shown(value: &str) -> String {
    let mut s: String = value.chars().take(40).flat_map(char::escape_debug).collect();
    if value.chars().count() > 40 {
        s.push('…');
    }
    s
}

/// One line of a CSV file the runner wrote, for errors naming the file, the
/// line and the field.
struct CsvLine<'a> {
    file: &'a Path,
    number: usize,
    fields: Vec<&'a str>,
}

impl<'a> CsvLine<'a> {
    /// The data lines of `text` (read from `file`), after a header that must
    /// start with `header`.
    fn all(file: &'a Path, text: &'a str, header: &str) -> Result<Vec<Self>> {
        let mut lines = text.lines();
        match lines.next() {
            Some(first) if first.starts_with(header) => {}
            first => bail!(
                "{}: line 1 is `{}`, expected the header `{header}…`; the file is damaged: restore it, or move the \
                 folder aside to start afresh",
                file.display(),
                shown(first.unwrap_or_default())
            ),
        }
        Ok(lines.enumerate().map(|(i, l)| CsvLine { file, number: i + 2, fields: l.split(',').collect() }).collect())
    }

    /// An error about field `name` of this line.
    fn error(&self, name: &str, why: impl std::fmt::Display) -> anyhow::Error {
        anyhow::anyhow!(
            "{}: line {}, field `{name}`: {why}; fix or delete the line (a deleted cell is trained again)",
            self.file.display(),
            self.number
        )
    }

    /// Field `index`, called `name`, parsed.
    fn parse<T: std::str::FromStr>(&self, index: usize, name: &str, what: &str) -> Result<T> {
        let value = self.fields[index];
        value.parse().map_err(|_| self.error(name, format_args!("`{}` is not {what}", shown(value))))
    }

    /// Field `index`, called `name`: a number in `low..=high` (finite).
    fn number(&self, index: usize, name: &str, low: f64, high: f64) -> Result<f64> {
        let v: f64 = self.parse(index, name, "a number")?;
        if !v.is_finite() {
            return Err(self.error(name, format_args!("`{}` is not a finite number", shown(self.fields[index]))));
        }
        if !(low..=high).contains(&v) {
            let range = if high == f64::MAX { format!("at least {low}") } else { format!("in [{low}, {high}]") };
            return Err(self.error(name, format_args!("{v} is not {range}")));
        }
        Ok(v)
    }

    /// The `seed,unary,pairwise` fields that start every line.
    fn cell(&self) -> Result<(u64, String, String)> {
        let seed = self.parse(0, "seed", "a seed (a whole number from 0)")?;
        for (i, name) in [(1, "unary"), (2, "pairwise")] {
            if !CLASSES.contains(&self.fields[i]) {
                return Err(self
                    .error(name, format_args!("`{}` is not a class ({})", shown(self.fields[i]), CLASSES.join(", "))));
            }
        }
        Ok((seed, self.fields[1].to_string(), self.fields[2].to_string()))
    }
}

/// The header of `results_by_seed.csv` (without `peak_rss_mib`, which older runs lack).
const RESULTS_HEADER: &str = "seed,unary,pairwise,train_error,test_error,seconds";

/// Cells of an earlier (interrupted) run, from `results_by_seed.csv` and
/// `curves.csv` (those whose model is in `models/`). No file is no cells; a
/// file that cannot be read, or a line that is malformed or out of range
/// (errors outside [0, 1], negative or infinite seconds, a cell twice) is an
/// error naming the file, the line and the field.
/// Creates `dir` and its parents if needed; an error naming the path when it,
/// or a parent, is a file (the OS says only "File exists").
pub fn create_folder(dir: &Path) -> Result<()> {
    if let Some(file) = dir.ancestors().find(|a| a.is_file()) {
        bail!("{}: is a file, but {} needs it to be a folder; move it aside", file.display(), dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating the folder {}", dir.display()))
}

fn read_previous(out: &Path) -> Result<Vec<CellResult>> {
    let results_path = out.join("results_by_seed.csv");
    let Some(text) = read_optional(&results_path)? else {
        return Ok(Vec::new());
    };
    let mut curves = read_curves(out)?;
    let mut results: Vec<CellResult> = Vec::new();
    let mut lines_of: BTreeMap<(u64, String, String), usize> = BTreeMap::new();
    for line in CsvLine::all(&results_path, &text, RESULTS_HEADER)? {
        if line.fields.len() != 6 && line.fields.len() != 7 {
            bail!(
                "{}: line {}: malformed line `{}` ({} fields, expected {RESULTS_HEADER},peak_rss_mib); fix or \
                 delete the line (a deleted cell is trained again)",
                results_path.display(),
                line.number,
                shown(&line.fields.join(",")),
                line.fields.len()
            );
        }
        let key = line.cell()?;
        if let Some(first) = lines_of.insert(key.clone(), line.number) {
            bail!(
                "{}: line {} repeats seed {}, cell {}/{} of line {first}; delete one of the two lines",
                results_path.display(),
                line.number,
                key.0,
                key.1,
                key.2
            );
        }
        let train_error = line.number(3, "train_error", 0.0, 1.0)?;
        let test_error = line.number(4, "test_error", 0.0, 1.0)?;
        let seconds = line.number(5, "seconds", 0.0, f64::MAX)?;
        let peak_rss_mib = if line.fields.len() == 7 { line.number(6, "peak_rss_mib", 0.0, f64::MAX)? } else { 0.0 };
        let (seed, unary, pairwise) = key;
        if !model_path(out, seed, &unary, &pairwise).exists() {
            continue;
        }
        let curve = curves.remove(&(seed, unary.clone(), pairwise.clone())).unwrap_or_default();
        results.push(CellResult { seed, unary, pairwise, train_error, test_error, seconds, peak_rss_mib, curve });
    }
    Ok(results)
}

/// The points of every cell in `out/curves.csv` (none without the file), in
/// the file's order; malformed lines are errors naming the file and the line.
fn read_curves(out: &Path) -> Result<BTreeMap<(u64, String, String), Vec<CurvePoint>>> {
    let path = out.join("curves.csv");
    let mut curves: BTreeMap<(u64, String, String), Vec<CurvePoint>> = BTreeMap::new();
    let Some(text) = read_optional(&path)? else {
        return Ok(curves);
    };
    for line in CsvLine::all(&path, &text, "seed,unary,pairwise,iteration,train_error,test_error,objective")? {
        if !(7..=9).contains(&line.fields.len()) {
            bail!(
                "{}: line {}: malformed line `{}` ({} fields, expected 7 to 9: {}); fix or delete the line",
                path.display(),
                line.number,
                shown(&line.fields.join(",")),
                line.fields.len(),
                CURVES_HEADER.trim_end()
            );
        }
        let key = line.cell()?;
        let point = CurvePoint::parse(&line)?;
        let points = curves.entry(key).or_default();
        if let Some(last) = points.last()
            && last.iteration >= point.iteration
        {
            return Err(line.error(
                "iteration",
                format_args!(
                    "iteration {} follows iteration {} of the same cell (each cell's iterations must increase)",
                    point.iteration, last.iteration
                ),
            ));
        }
        points.push(point);
    }
    Ok(curves)
}

/// Mean and sample standard deviation (0 for one value).
pub fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 { v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (m, var.sqrt())
}

/// Mean and standard deviation over seeds of one cell's errors.
struct CellStats {
    train: (f64, f64),
    test: (f64, f64),
    seeds: usize,
}

fn write_outputs<E: Experiment>(
    exp: &E,
    out: &Path,
    done: &[CellResult],
    seeds: &[u64],
    cells: &[(String, String)],
    data: &BTreeMap<u64, E::Data>,
) -> Result<()> {
    let mut by_seed = String::from("seed,unary,pairwise,train_error,test_error,seconds,peak_rss_mib\n");
    let mut curves = String::from(CURVES_HEADER);
    for r in done {
        let _ = writeln!(
            by_seed,
            "{},{},{},{},{},{:.3},{:.1}",
            r.seed, r.unary, r.pairwise, r.train_error, r.test_error, r.seconds, r.peak_rss_mib
        );
        for c in &r.curve {
            curves.push_str(&c.csv_line(r.seed, &r.unary, &r.pairwise));
        }
    }
    write_atomic(&out.join("results_by_seed.csv"), by_seed.as_bytes())?;
    write_atomic(&out.join("curves.csv"), curves.as_bytes())?;

    let mut results = String::from("unary,pairwise,train_error,test_error,seconds\n");
    let mut stats: BTreeMap<(usize, usize), CellStats> = BTreeMap::new();
    for (u, p) in cells {
        let rs: Vec<&CellResult> = done.iter().filter(|r| &r.unary == u && &r.pairwise == p).collect();
        if rs.is_empty() {
            continue;
        }
        let tr = mean_std(&rs.iter().map(|r| r.train_error).collect::<Vec<_>>());
        let te = mean_std(&rs.iter().map(|r| r.test_error).collect::<Vec<_>>());
        let secs = mean_std(&rs.iter().map(|r| r.seconds).collect::<Vec<_>>());
        let _ = writeln!(results, "{u},{p},{:.6},{:.6},{:.3}", tr.0, te.0, secs.0);
        let ui = CLASSES.iter().position(|c| c == u).unwrap_or(0);
        let pi = CLASSES.iter().position(|c| c == p).unwrap_or(0);
        stats.insert((ui, pi), CellStats { train: tr, test: te, seeds: rs.len() });
    }
    write_atomic(&out.join("results.csv"), results.as_bytes())?;

    let mut table = String::new();
    let spread = if seeds.len() > 1 { " mean ± std" } else { "" };
    let _ = writeln!(
        table,
        "{} (rows: unary class, columns: pairwise class); each cell: ours{spread} (paper, difference). {} seed(s).\n",
        exp.caption(),
        seeds.len()
    );
    let fmt = |(m, s): (f64, f64), n: usize| if n > 1 { format!("{m:.3} ± {s:.3}") } else { format!("{m:.3}") };
    let mut grid = |title: &str, paper: &PaperTable, pick: fn(&CellStats) -> (f64, f64)| {
        if !title.is_empty() {
            let _ = writeln!(table, "{title}\n");
        }
        let _ = writeln!(table, "| unary \\ pairwise | {} |", NAMES.join(" | "));
        let _ = writeln!(table, "|---|{}", "---|".repeat(NAMES.len()));
        for (ui, name) in NAMES.iter().enumerate() {
            let _ = write!(table, "| {name} |");
            for (pi, &paper) in paper[ui].iter().enumerate() {
                match stats.get(&(ui, pi)) {
                    Some(st) => {
                        let ms = pick(st);
                        let _ = write!(table, " {} ({paper:.3}, {:+.3}) |", fmt(ms, st.seeds), ms.0 - paper);
                    }
                    None => {
                        let _ = write!(table, " – |");
                    }
                }
            }
            let _ = writeln!(table);
        }
        let _ = writeln!(table);
    };
    match exp.paper_train() {
        Some(train) => {
            grid("**Test error**", exp.paper_test(), |s| s.test);
            grid("**Training error**", train, |s| s.train);
        }
        None => grid("", exp.paper_test(), |s| s.test),
    }
    let _ = writeln!(
        table,
        "Errors are those of the last learning iteration's evaluation, which is warm-started: it continues \
         message passing from the previous evaluation's messages. `structlearn eval` on a saved model \
         (models/) predicts from zero messages with its own --iterations budget; the two agree once message \
         passing has converged (eval reports how many examples reached its tolerance).\n"
    );
    let note = exp.table_note(data);
    if !note.is_empty() {
        let _ = writeln!(table, "{note}");
    }
    write_atomic(&out.join("table.md"), table.trim_end().as_bytes())?;
    plot_curves(out, done, seeds[0])?;
    Ok(())
}

fn plot_curves(out: &Path, done: &[CellResult], seed: u64) -> Result<()> {
    let names: Vec<String> = NAMES.iter().map(|s| s.to_string()).collect();
    let cells: Vec<Vec<CurveData>> = CLASSES
        .iter()
        .map(|u| {
            CLASSES
                .iter()
                .map(|pw| {
                    done.iter()
                        .find(|r| r.seed == seed && r.unary == *u && r.pairwise == *pw)
                        .map(|r| CurveData {
                            train: r.curve.iter().filter_map(|c| Some((c.iteration as f64, c.train_error?))).collect(),
                            test: r.curve.iter().map(|c| (c.iteration as f64, c.test_error)).collect(),
                        })
                        .unwrap_or_default()
                })
                .collect()
        })
        .collect();
    plots::plot_error_curves(&out.join("fig2_error_curves.png"), &names, &names, &cells)
}

/// `per_class.csv`: per cell of `seed`, the test set's per-class accuracy and
/// IoU, mean class accuracy, mean IoU and pixel error, from a fresh prediction
/// (zero messages, `predict` budget ×10 to let strongly coupled models settle).
fn write_per_class<D: ExperimentData>(
    out: &Path,
    done: &[CellResult],
    seed: u64,
    data: &D,
    names: &[String],
    predict: &PredictOptions,
) -> Result<()> {
    let registry = oracles::ModelRegistry::with_builtin();
    let predict = PredictOptions { iterations: predict.iterations * 10, ..*predict };
    let mut csv = String::from("unary,pairwise,metric");
    for n in names {
        let _ = write!(csv, ",{n}");
    }
    csv.push_str(",mean,pixel_error\n");
    let cell = |v: Option<f64>| v.map_or("nan".to_string(), |x| format!("{x:.4}"));
    for r in done.iter().filter(|r| r.seed == seed) {
        let path = model_path(out, seed, &r.unary, &r.pairwise);
        let model = StructuredModel::load(&path, &registry)?;
        let predictions = model.predict(data.test(), &predict)?;
        let m = ConfusionMatrix::from_predictions(data.test(), &predictions)?;
        let error = m.error_rate();
        for (metric, values, mean) in
            [("accuracy", m.class_accuracy(), m.mean_class_accuracy()), ("iou", m.iou(), m.mean_iou())]
        {
            let _ = write!(csv, "{},{},{metric}", r.unary, r.pairwise);
            for v in values.iter().take(names.len()) {
                let _ = write!(csv, ",{}", cell(*v));
            }
            let _ = writeln!(csv, ",{},{error:.4}", cell(mean));
        }
    }
    write_atomic(&out.join("per_class.csv"), csv.as_bytes())?;
    Ok(())
}

/// With `--resume`, refuses to mix cells trained under another preset (data,
/// learning iterations, prediction budget, oracle budgets) into one table.
/// A folder without `run.json` is accepted only when it holds no results and
/// no checkpoints: their preset cannot be checked.
pub fn check_same_preset(out: &Path, preset: &serde_json::Value) -> Result<()> {
    let Some(recorded) = recorded_preset(out)? else {
        let results = out.join("results_by_seed.csv");
        let checkpoints = std::fs::read_dir(out.join("checkpoints"))
            .map(|d| d.filter_map(|e| e.ok()).any(|e| e.path().extension().is_some_and(|x| x == "ckpt")))
            .unwrap_or(false);
        if results.exists() || checkpoints {
            bail!(
                "--resume: {} holds {} but no run.json, so the settings they were made with cannot be checked; \
                 rerun without --resume into another --out (or restore its run.json)",
                out.display(),
                if results.exists() { "results (results_by_seed.csv)" } else { "checkpoints (checkpoints/)" }
            );
        }
        return Ok(());
    };
    if !same_settings(&recorded, preset) {
        bail!(
            "--resume: {} was written with preset {}, this run's is {}; resume with the same options or use another --out",
            out.join("run.json").display(),
            if recorded.is_null() { "(none)".to_string() } else { recorded.to_string() },
            preset
        );
    }
    Ok(())
}

/// The preset recorded in `dir/run.json` (`Null` if it records none), or
/// `None` when there is no `run.json`; a `run.json` that cannot be read is an
/// error naming it.
fn recorded_preset(dir: &Path) -> Result<Option<serde_json::Value>> {
    let path = dir.join("run.json");
    let Some(text) = read_optional(&path)? else {
        return Ok(None);
    };
    let info: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))?;
    Ok(Some(info.get("preset").cloned().unwrap_or(serde_json::Value::Null)))
}

/// The paper's value of a cell (NaN for an unknown class name).
fn paper_error(paper: &PaperTable, unary: &str, pairwise: &str) -> f64 {
    let index = |c: &str| CLASSES.iter().position(|k| *k == c);
    match (index(unary), index(pairwise)) {
        (Some(u), Some(p)) => paper[u][p],
        _ => f64::NAN,
    }
}

/// Wall-clock seconds recorded in the folder's `run.json` (0 if none).
fn previous_seconds(out: &Path) -> f64 {
    std::fs::read_to_string(out.join("run.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("wall_clock_seconds")?.as_f64())
        .unwrap_or(0.0)
}

/// The command as a user types it (`cargo xtask reproduce --quick`), not the
/// machine-specific path of the xtask binary; arguments with spaces or shell
/// characters are single-quoted.
fn typed_command(args: impl IntoIterator<Item = String>) -> String {
    let quote = |a: String| {
        if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
            a
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    std::iter::once("cargo xtask".to_string()).chain(args.into_iter().skip(1).map(quote)).collect::<Vec<_>>().join(" ")
}

/// The short commit hash of `HEAD`, with `-dirty` if tracked files differ from it.
pub fn current_commit() -> Option<String> {
    let run = |args: &[&str]| std::process::Command::new("git").args(args).output().ok().filter(|o| o.status.success());
    let hash = String::from_utf8_lossy(&run(&["rev-parse", "--short", "HEAD"])?.stdout).trim().to_string();
    let dirty = run(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|o| !o.stdout.is_empty());
    Some(if dirty { format!("{hash}-dirty") } else { hash })
}

/// The contents of `run.json`.
#[derive(Clone, Copy)]
pub struct RunInfo<'a> {
    /// The preset's settings.
    pub preset: &'a serde_json::Value,
    /// The options.
    pub opts: &'a Options,
    /// The commit the run started from.
    pub commit: Option<&'a str>,
}

impl RunInfo<'_> {
    /// Writes `run.json` atomically with the finished cells' times and memory;
    /// `finished` is false while running and after an interruption.
    pub fn write(&self, out: &Path, done: &[CellResult], seconds: f64, interrupted: bool) -> Result<()> {
        let cells: Vec<serde_json::Value> = done
            .iter()
            .map(|r| {
                serde_json::json!({
                    "seed": r.seed, "unary": r.unary, "pairwise": r.pairwise,
                    "seconds": r.seconds, "peak_rss_mib": r.peak_rss_mib,
                    "seconds_per_learning_iteration": r.seconds / r.curve.len().max(1) as f64,
                })
            })
            .collect();
        let info = serde_json::json!({
            "command": typed_command(std::env::args()),
            "commit": self.commit,
            "preset": self.preset,
            "seeds": self.opts.seeds,
            "first_seed": self.opts.first_seed,
            "cells": self.opts.cells,
            "wall_clock_seconds": seconds,
            "threads": rayon::current_num_threads(),
            // Cells trained at once, each on threads / jobs threads (peak RSS is the process's).
            "jobs": self.opts.jobs,
            "peak_rss_mib": peak_rss_mib(),
            "cell_times": cells,
            "interrupted": interrupted,
            // false while the run is going on, and after an interruption or error.
            "finished": !interrupted,
        });
        write_atomic(&out.join("run.json"), serde_json::to_string_pretty(&info)?.as_bytes())?;
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn folders_that_are_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("models");
        std::fs::write(&file, b"").unwrap();
        for target in [file.clone(), file.join("checkpoints")] {
            let err = create_folder(&target).unwrap_err().to_string();
            assert!(err.contains(&file.display().to_string()) && err.contains("is a file"), "{err}");
        }
        create_folder(&dir.path().join("a/b")).unwrap();
        assert!(dir.path().join("a/b").is_dir());
    }

    /// A small model of cell `unary`/`pairwise` (each type's model fitted by
    /// that class's oracle on a tiny problem), saved where the cell's model lives.
    fn write_model(dir: &Path, seed: u64, unary: &str, pairwise: &str) {
        let fit = |kind: &str| {
            let x = [0.0, 1.0, 2.0, 3.0];
            let features = oracles::Features::new(&x, 4, 1).unwrap();
            let (labels, bias) = ([0, 0, 1, 1], [0.0; 8]);
            let problem = oracles::Problem::new(features, &labels, &bias, 2, None).unwrap();
            structlearn::oracle_config::oracle_from_json(&serde_json::json!({ "kind": kind }))
                .unwrap()
                .fit(&problem, None, oracles::FitContext { seed: 0 })
                .unwrap()
        };
        let types = ["unary", "pairwise"]
            .map(|t| structlearn::FactorTypeInfo { classes: 2, ..structlearn::FactorTypeInfo::new(t, 1) });
        let model = StructuredModel::new(types.to_vec(), vec![1.0, 1.0], vec![fit(unary), fit(pairwise)]).unwrap();
        std::fs::create_dir_all(dir.join("models")).unwrap();
        model.save(&model_path(dir, seed, unary, pairwise)).unwrap();
    }

    pub(crate) fn opts() -> Options {
        Options {
            scale: Scale::Quick,
            out: None,
            seeds: 1,
            first_seed: 0,
            cells: Vec::new(),
            iterations: None,
            resume: true,
            save_data: false,
            predict_iterations: None,
            train_error_every: None,
            data_dir: None,
            cache_dir: None,
            no_cache: false,
            verbosity: Verbosity::Quiet,
            merge: Vec::new(),
            jobs: Some(1),
        }
    }

    /// Cells trained two at a time give the outputs of one at a time: the
    /// same models, results, curves and table, in the same order.
    #[test]
    fn cells_in_parallel_give_the_outputs_of_cells_in_turn() {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        for (dir, jobs) in dirs.iter().zip([1, 2]) {
            let o = Options {
                out: Some(dir.path().to_path_buf()),
                cells: ["linear/linear", "zero/zero", "constant/mlp"].map(String::from).to_vec(),
                iterations: Some(2),
                resume: false,
                jobs: Some(jobs),
                ..opts()
            };
            reproduce(&crate::denoising::Denoising::new(&o), &o).unwrap();
        }
        let read = |d: &tempfile::TempDir, f: &str| std::fs::read_to_string(d.path().join(f)).unwrap();
        // Every field but the times (seconds, elapsed, peak memory).
        let fields = |text: String, keep: usize| -> Vec<String> {
            text.lines().map(|l| l.split(',').take(keep).collect::<Vec<_>>().join(",")).collect()
        };
        assert_eq!(fields(read(&dirs[0], "results.csv"), 4), fields(read(&dirs[1], "results.csv"), 4));
        assert_eq!(fields(read(&dirs[0], "curves.csv"), 7), fields(read(&dirs[1], "curves.csv"), 7));
        assert_eq!(read(&dirs[0], "table.md"), read(&dirs[1], "table.md"));
        let cells: Vec<String> = fields(read(&dirs[1], "results_by_seed.csv"), 3).into_iter().skip(1).collect();
        assert_eq!(cells, ["0,linear,linear", "0,zero,zero", "0,constant,mlp"]);
        for cell in ["linear-linear", "zero-zero", "constant-mlp"] {
            let model =
                |d: &tempfile::TempDir| std::fs::read(d.path().join(format!("models/seed0-{cell}.slm"))).unwrap();
            assert_eq!(model(&dirs[0]), model(&dirs[1]), "{cell}");
        }
    }

    #[test]
    fn run_json_records_the_typed_command() {
        let args = ["/x/target/debug/xtask", "reproduce", "--quick", "--out", "my dir"].map(String::from);
        assert_eq!(typed_command(args), "cargo xtask reproduce --quick --out 'my dir'");
    }

    #[test]
    fn resuming_a_finished_folder_keeps_its_time() {
        let dir = tempfile::tempdir().unwrap();
        let quick = serde_json::json!({ "name": "quick" });
        let o = opts();
        RunInfo { preset: &quick, opts: &o, commit: Some("abc") }.write(dir.path(), &[], 42.5, false).unwrap();
        assert_eq!(previous_seconds(dir.path()), 42.5);
        assert_eq!(previous_seconds(&dir.path().join("missing")), 0.0);
    }

    #[test]
    fn resume_refuses_another_preset_and_accepts_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let quick = serde_json::json!({ "name": "quick", "learning_iterations": 5 });
        // No run.json yet: nothing to compare with.
        check_same_preset(dir.path(), &quick).unwrap();
        let o = opts();
        RunInfo { preset: &quick, opts: &o, commit: Some("abc") }.write(dir.path(), &[], 0.0, true).unwrap();
        check_same_preset(dir.path(), &quick).unwrap();
        // The same number written as an integer or a float is the same setting.
        check_same_preset(dir.path(), &serde_json::json!({ "name": "quick", "learning_iterations": 5.0 })).unwrap();
        let longer = serde_json::json!({ "name": "quick", "learning_iterations": 6 });
        let err = check_same_preset(dir.path(), &longer).unwrap_err().to_string();
        assert!(err.contains("--resume") && err.contains("learning_iterations"), "{err}");
        let info: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("run.json")).unwrap()).unwrap();
        assert_eq!(info["finished"], false);
        assert_eq!(info["commit"], "abc");
        std::fs::write(dir.path().join("run.json"), "not json").unwrap();
        assert!(check_same_preset(dir.path(), &quick).is_err());
    }

    #[test]
    fn curves_name_the_rejected_fits_of_each_iteration_and_read_older_files() {
        let record = |iteration: usize, phase: &str, factor_type: Option<&str>, rejected: Option<bool>, eval: bool| {
            structlearn::Record {
                iteration,
                step: 0,
                phase: phase.into(),
                factor_type: factor_type.map(str::to_string),
                objective: 10.0 - iteration as f64,
                oracle_loss: None,
                rejected,
                max_violation: None,
                // Iteration 2 evaluates the test set alone.
                train_error: (eval && iteration != 2).then_some(0.5),
                validation_error: eval.then_some(0.6),
                step_seconds: 1.0,
                elapsed_seconds: iteration as f64,
            }
        };
        let history = [
            record(1, "fit", Some("unary"), Some(false), false),
            record(1, "fit", Some("pairwise"), Some(true), false),
            record(1, "message-passing", None, None, true),
            record(2, "fit", Some("unary"), Some(true), false),
            record(2, "fit", Some("pairwise"), Some(true), false),
            record(2, "message-passing", None, None, true),
            record(3, "fit", Some("unary"), Some(false), false),
            record(3, "message-passing", None, None, true),
        ];
        let curve = CurvePoint::from_history(&history);
        let rejected: Vec<String> = curve.iter().map(CurvePoint::rejected_field).collect();
        assert_eq!(rejected, ["pairwise", "unary;pairwise", ""]);
        assert_eq!(curve.iter().map(|c| c.iteration).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(curve.iter().map(|c| c.train_error).collect::<Vec<_>>(), [Some(0.5), None, Some(0.5)]);

        // What write_outputs writes reads back; older files have no rejected_fits or elapsed_seconds.
        let dir = tempfile::tempdir().unwrap();
        let cell = CellResult {
            seed: 0,
            unary: "linear".into(),
            pairwise: "linear".into(),
            train_error: 0.5,
            test_error: 0.6,
            seconds: 3.0,
            peak_rss_mib: 1.0,
            curve: curve.clone(),
        };
        std::fs::create_dir_all(dir.path().join("models")).unwrap();
        std::fs::write(model_path(dir.path(), 0, "linear", "linear"), b"model").unwrap();
        let mut csv = String::from(CURVES_HEADER);
        for c in &curve {
            csv.push_str(&c.csv_line(0, "linear", "linear"));
        }
        assert!(csv.contains("\n0,linear,linear,2,,0.6,"), "{csv}");
        // A cell of an older run beside it.
        csv.push_str("0,zero,zero,1,0.8,0.9,5.5,2.000\n0,zero,zero,2,0.8,0.9,5.5\n");
        std::fs::write(dir.path().join("curves.csv"), csv).unwrap();
        std::fs::write(
            dir.path().join("results_by_seed.csv"),
            "seed,unary,pairwise,train_error,test_error,seconds,peak_rss_mib\n0,linear,linear,0.5,0.6,3,1\n0,zero,zero,0.8,0.9,4\n",
        )
        .unwrap();
        std::fs::write(model_path(dir.path(), 0, "zero", "zero"), b"model").unwrap();
        let previous = read_previous(dir.path()).unwrap();
        assert_eq!(previous[0], cell);
        let old = &previous[1].curve;
        assert_eq!(old.len(), 2);
        assert_eq!((old[0].elapsed_seconds, old[0].rejected_fits.clone()), (2.0, None));
        assert!(old[1].elapsed_seconds.is_nan());
        assert_eq!(old[1].rejected_field(), "unknown");
    }

    #[test]
    fn merged_cells_need_the_same_settings_for_the_kinds_they_use() {
        let dir = tempfile::tempdir().unwrap();
        let (old, new) = (
            // As recorded: without the key when no oracle has extra settings.
            serde_json::json!({ "name": "full" }),
            serde_json::json!({ "name": "full", "oracles": { "boosting": { "leaf_l2": 1.0 } } }),
        );
        let o = opts();
        RunInfo { preset: &old, opts: &o, commit: Some("abc") }.write(dir.path(), &[], 0.0, true).unwrap();
        std::fs::write(
            dir.path().join("results_by_seed.csv"),
            "seed,unary,pairwise,train_error,test_error,seconds\n0,linear,linear,0.2,0.3,10\n0,boosting,boosting,0.3,0.3,10\n",
        )
        .unwrap();
        for cell in ["linear", "boosting"] {
            write_model(dir.path(), 0, cell, cell);
        }
        let out = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(out.path().join("models")).unwrap();
        let cell = |u: &str, p: &str| vec![(u.to_string(), p.to_string())];
        // linear/linear does not use the boosting setting that differs: merged.
        let mut done = Vec::new();
        merge_cells(dir.path(), out.path(), &new, &[0], &cell("linear", "linear"), &mut done).unwrap();
        assert_eq!(done.len(), 1);
        assert!(model_path(out.path(), 0, "linear", "linear").is_file());
        // boosting/boosting does: refused, naming the cell.
        let mut done = Vec::new();
        let err =
            merge_cells(dir.path(), out.path(), &new, &[0], &cell("boosting", "boosting"), &mut done).unwrap_err();
        assert!(err.to_string().contains("boosting/boosting") && done.is_empty(), "{err}");
        // The same settings: merged.
        merge_cells(dir.path(), out.path(), &old, &[0], &cell("boosting", "boosting"), &mut done).unwrap();
        assert_eq!(done.len(), 1);
    }

    #[test]
    fn cell_filters_are_checked() {
        assert_eq!(selected_cells(&[]).unwrap().len(), 25);
        assert_eq!(selected_cells(&["linear/mlp".into()]).unwrap(), vec![("linear".into(), "mlp".into())]);
        assert!(selected_cells(&["linear".into()]).is_err());
        assert!(selected_cells(&["linear/svm".into()]).is_err());
    }

    /// A cell given twice runs once (it used to train twice and write two
    /// rows, which the table showed as a spread over one seed).
    #[test]
    fn a_repeated_cell_runs_once() {
        let cells = selected_cells(&["zero/zero", "linear/mlp", "zero/zero"].map(String::from)).unwrap();
        let pair = |u: &str, p: &str| (u.to_string(), p.to_string());
        assert_eq!(cells, vec![pair("zero", "zero"), pair("linear", "mlp")]);
    }

    /// Seeds past u64::MAX are refused instead of wrapping around to seed 0.
    #[test]
    fn seeds_past_the_largest_are_refused() {
        assert_eq!(seed_list(5, 3).unwrap(), [5, 6, 7]);
        assert_eq!(seed_list(u64::MAX, 1).unwrap(), [u64::MAX]);
        assert_eq!(seed_list(u64::MAX - 1, 2).unwrap(), [u64::MAX - 1, u64::MAX]);
        let err = seed_list(u64::MAX, 2).unwrap_err().to_string();
        assert!(
            err.contains("--seed 18446744073709551615 with --seeds 2") && err.contains("--seed 18446744073709551614"),
            "{err}"
        );
    }

    /// The header and a good line of `results_by_seed.csv`.
    const GOOD_RESULTS: &str =
        "seed,unary,pairwise,train_error,test_error,seconds,peak_rss_mib\n0,linear,linear,0.5,0.6,3,1\n";

    /// `read_previous` of a folder whose `results_by_seed.csv` is `results`
    /// (with a model for every cell), as an error message.
    fn previous_error(results: &str, curves: Option<&str>) -> String {
        let dir = tempfile::tempdir().unwrap();
        for (u, p) in [("linear", "linear"), ("zero", "zero")] {
            write_model(dir.path(), 0, u, p);
        }
        std::fs::write(dir.path().join("results_by_seed.csv"), results).unwrap();
        if let Some(curves) = curves {
            std::fs::write(dir.path().join("curves.csv"), curves).unwrap();
        }
        let err = read_previous(dir.path()).expect_err(results).to_string();
        let file =
            if curves.is_some() && !err.contains("results_by_seed.csv") { "curves.csv" } else { "results_by_seed.csv" };
        assert!(err.starts_with(&dir.path().join(file).display().to_string()), "{err}");
        err
    }

    /// Values read back for --resume and --merge are checked: parse errors
    /// and values out of range name the file, the line and the field, and a
    /// cell twice is refused (before, NaN, inf, negative errors and
    /// duplicate rows reached the tables, and parse errors were bare).
    #[test]
    fn previous_results_are_checked_naming_file_line_and_field() {
        for (line, says) in [
            ("0,zero,zero,abc0.31,0.3,1,1", "line 3, field `train_error`: `abc0.31` is not a number"),
            ("x0,zero,zero,0.3,0.3,1,1", "line 3, field `seed`: `x0` is not a seed"),
            ("-1,zero,zero,0.3,0.3,1,1", "line 3, field `seed`"),
            ("0,zero,svm,0.3,0.3,1,1", "line 3, field `pairwise`: `svm` is not a class"),
            ("0,zero,zero,NaN,0.3,1,1", "line 3, field `train_error`: `NaN` is not a finite number"),
            ("0,zero,zero,0.3,inf,1,1", "line 3, field `test_error`: `inf` is not a finite number"),
            ("0,zero,zero,5.3,0.3,1,1", "line 3, field `train_error`: 5.3 is not in [0, 1]"),
            ("0,zero,zero,0.3,-7.3,1,1", "line 3, field `test_error`: -7.3 is not in [0, 1]"),
            ("0,zero,zero,0.3,0.3,-2,1", "line 3, field `seconds`: -2 is not at least 0"),
            ("0,zero,zero,0.3,0.3,1,-1", "line 3, field `peak_rss_mib`: -1 is not at least 0"),
            ("0,zero,zero,0.3", "line 3: malformed line"),
            ("0,linear,linear,0.9,0.9,3,1", "line 3 repeats seed 0, cell linear/linear of line 2"),
        ] {
            let err = previous_error(&format!("{GOOD_RESULTS}{line}\n"), None);
            assert!(err.contains(says), "{line}: {err}");
        }
        // Long or binary values are shortened and escaped.
        let err = previous_error(&format!("{GOOD_RESULTS}0,zero,zero,{}\u{1},0.3,1,1\n", "7".repeat(1000)), None);
        assert!(err.len() < 400 && err.contains('…'), "{err}");
        let err = previous_error("seed,unary\n", None);
        assert!(err.contains("line 1") && err.contains("header"), "{err}");
    }

    /// Only a missing `results_by_seed.csv` means "no results"; a file that
    /// cannot be read is an error naming it (before, it was taken for no
    /// results and the finished cells were trained again and overwritten).
    #[test]
    fn an_unreadable_results_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_previous(dir.path()).unwrap().is_empty());
        let results = dir.path().join("results_by_seed.csv");
        std::fs::write(&results, [GOOD_RESULTS.as_bytes(), b"\xff\xfe\n"].concat()).unwrap();
        let err = read_previous(dir.path()).unwrap_err().to_string();
        assert!(err.contains("results_by_seed.csv: line 3 is not UTF-8"), "{err}");
        std::fs::remove_file(&results).unwrap();
        std::fs::create_dir(&results).unwrap();
        let err = read_previous(dir.path()).unwrap_err().to_string();
        assert!(err.contains("results_by_seed.csv: is a folder, not a file"), "{err}");
        // The same for curves.csv and run.json.
        std::fs::remove_dir(&results).unwrap();
        std::fs::write(&results, GOOD_RESULTS).unwrap();
        std::fs::write(dir.path().join("curves.csv"), b"\xff").unwrap();
        let err = read_previous(dir.path()).unwrap_err().to_string();
        assert!(err.contains("curves.csv: line 1 is not UTF-8"), "{err}");
        std::fs::create_dir(dir.path().join("run.json")).unwrap();
        let err = recorded_preset(dir.path()).unwrap_err().to_string();
        assert!(err.contains("run.json: is a folder, not a file"), "{err}");
    }

    /// Malformed `curves.csv` lines are errors naming the file and the line
    /// (before, they were dropped, and the rewritten file lost them).
    #[test]
    fn malformed_curve_lines_are_refused() {
        let results = format!("{GOOD_RESULTS}0,zero,zero,0.3,0.3,1,1\n");
        let header = CURVES_HEADER;
        for (line, says) in [
            ("0,zero,zero,one,0.5,0.6,2.0,1.000,", "line 3, field `iteration`: `one` is not a learning iteration"),
            ("0,zero,zero,0,0.5,0.6,2.0,1.000,", "line 3, field `iteration`: 0 is not a learning iteration"),
            ("0,zero,zero,2,x,0.6,2.0,1.000,", "line 3, field `train_error`: `x` is not a number"),
            ("0,zero,zero,2,0.5,1.6,2.0,1.000,", "line 3, field `test_error`: 1.6 is not in [0, 1]"),
            ("0,zero,zero,2,0.5,0.6,inf,1.000,", "line 3, field `objective`: `inf` is not a finite number"),
            ("0,zero,zero,2,0.5,0.6,2.0,-1,", "line 3, field `elapsed_seconds`: -1 is not at least 0"),
            ("0,zero,zero,2", "line 3: malformed line"),
            ("0,zero,zera,2,0.5,0.6,2.0,1.000,", "line 3, field `pairwise`: `zera` is not a class"),
            ("0,linear,linear,1,0.5,0.6,2.0,1.000,", "line 3, field `iteration`: iteration 1 follows iteration 1"),
        ] {
            let curves = format!("{header}0,linear,linear,1,0.5,0.6,2.0,1.000,\n{line}\n");
            let err = previous_error(&results, Some(&curves));
            assert!(err.contains("curves.csv") && err.contains(says), "{line}: {err}");
        }
    }

    /// `--resume` refuses a folder with results or checkpoints but no
    /// `run.json` (their preset cannot be checked), naming the folder;
    /// before, their cells were adopted whatever preset made them.
    #[test]
    fn resume_refuses_results_without_run_json() {
        let dir = tempfile::tempdir().unwrap();
        let quick = serde_json::json!({ "name": "quick" });
        check_same_preset(dir.path(), &quick).unwrap();
        std::fs::write(dir.path().join("results_by_seed.csv"), GOOD_RESULTS).unwrap();
        let err = check_same_preset(dir.path(), &quick).unwrap_err().to_string();
        assert!(
            err.contains(&format!("{} holds results", dir.path().display())) && err.contains("no run.json"),
            "{err}"
        );
        std::fs::remove_file(dir.path().join("results_by_seed.csv")).unwrap();
        std::fs::create_dir(dir.path().join("checkpoints")).unwrap();
        check_same_preset(dir.path(), &quick).unwrap();
        std::fs::write(checkpoint_path(dir.path(), 0, "zero", "zero"), b"x").unwrap();
        let err = check_same_preset(dir.path(), &quick).unwrap_err().to_string();
        assert!(err.contains("holds checkpoints"), "{err}");
    }

    /// `--merge` loads a model before copying it: a corrupt model, or one of
    /// another cell, is refused naming the source file (before, it was copied
    /// and the later error named the copy).
    #[test]
    fn merge_checks_models_before_copying_them() {
        let dir = tempfile::tempdir().unwrap();
        let quick = serde_json::json!({ "name": "quick" });
        let o = opts();
        RunInfo { preset: &quick, opts: &o, commit: Some("abc") }.write(dir.path(), &[], 0.0, true).unwrap();
        std::fs::write(
            dir.path().join("results_by_seed.csv"),
            "seed,unary,pairwise,train_error,test_error,seconds\n0,zero,zero,0.3,0.3,1\n0,linear,linear,0.2,0.2,1\n",
        )
        .unwrap();
        write_model(dir.path(), 0, "zero", "zero");
        // The linear/linear file holds a zero/zero model.
        write_model(dir.path(), 0, "zero", "zero");
        std::fs::rename(model_path(dir.path(), 0, "zero", "zero"), model_path(dir.path(), 0, "linear", "linear"))
            .unwrap();
        write_model(dir.path(), 0, "zero", "zero");
        let source = model_path(dir.path(), 0, "zero", "zero");
        let bytes = std::fs::read(&source).unwrap();
        std::fs::write(&source, &bytes[..30]).unwrap();
        let out = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(out.path().join("models")).unwrap();
        let cell = |u: &str, p: &str| vec![(u.to_string(), p.to_string())];
        let merge = |cells: &[(String, String)]| {
            merge_cells(dir.path(), out.path(), &quick, &[0], cells, &mut Vec::new()).map_err(|e| format!("{e:#}"))
        };
        let err = merge(&cell("zero", "zero")).unwrap_err();
        assert!(err.contains(&source.display().to_string()) && err.contains("--merge"), "{err}");
        assert!(!model_path(out.path(), 0, "zero", "zero").exists(), "the corrupt model was copied");
        let err = merge(&cell("linear", "linear")).unwrap_err();
        assert!(err.contains("holds a model of kind `zero`, but cell linear/linear fits it with `linear`"), "{err}");
        // A good model is copied.
        write_model(dir.path(), 0, "zero", "zero");
        merge(&cell("zero", "zero")).unwrap();
        assert_eq!(std::fs::read(model_path(out.path(), 0, "zero", "zero")).unwrap(), std::fs::read(&source).unwrap());
    }
}
