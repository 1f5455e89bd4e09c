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
//!   [`RESULTS_VERSION`], wall-clock, threads, peak RSS, whether it finished,
//!   cells merged without their models).
//!
//! `--merge` takes finished cells from other folders of the same preset and
//! results version, with their models or, where a folder has none (committed
//! results), results-only: errors, curve and per-class rows, left out of the
//! figures drawn from models; `--results-only` merges without training,
//! models or data (`docs/guide/reproducing.md`, "Merging folders").
//!
//! An experiment supplies its data, its oracles, its paper table and any
//! figures of its own through [`Experiment`].

use std::collections::BTreeMap;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use factor_graph::UNARY;
use indicatif::MultiProgress;
use oracles::Oracle;
use reporting::{ProgressMode, ProgressObserver, Verbosity, human_duration};
use structlearn::{CheckpointConfig, Dataset, Evaluate, LearnError, PredictOptions, Step, TrainConfig, Trainer};

mod merge;
mod outputs;
#[cfg(test)]
pub(crate) mod tests;

use merge::*;
use outputs::CsvLine;
pub use outputs::*;

/// The function classes, in the papers' order (rows and columns of the tables).
pub const CLASSES: [&str; 5] = ["zero", "constant", "linear", "boosting", "mlp"];

/// Display names of [`CLASSES`].
pub const NAMES: [&str; 5] = ["Zero", "Const.", "Linear", "Boost.", "MLP"];

/// A 5 × 5 table of the paper: rows unary class, columns pairwise class.
pub type PaperTable = [[f64; 5]; 5];

/// The version of the results: `run.json` records it (`results_version`).
/// `--merge` takes a cell of a folder of an older version only where no
/// later version changed it ([`RESULTS_CHANGES`]) and leaves the
/// others out, naming them (a training run trains them again); `--resume`
/// refuses a folder of another version. So one table never mixes cells
/// whose numbers the code would no longer reproduce.
///
/// **The rule**: bump it in the commit that changes any bit of any result of
/// any experiment (an error, a curve point, an objective, a model), whatever
/// the reason: a fix, a new default, another order of floating-point
/// operations, and say in [`RESULTS_CHANGES`] which cells changed.
/// Changes that keep every result bit for bit (speed, memory, outputs that
/// only report, new options off by default) keep it. When in doubt, run a
/// `--quick` denoising cell before and after and compare `curves.csv` and
/// the model bytes.
///
/// Version 1: every commit from the first committed results (`docs/results/`)
/// up to the one that introduced this constant kept the results bit for bit.
pub const RESULTS_VERSION: u64 = 3;

/// A results version after the first and the cells it changed: a cell
/// (experiment, seed, unary/pairwise) is changed when its experiment is
/// among `experiments` (every experiment when empty), its seed is at least
/// `from_seed`, and `classes` names its unary or its pairwise class (`"*"`:
/// every class).
#[derive(Debug, Clone, Copy)]
pub struct ResultsChange {
    /// The version that made the change.
    pub version: u64,
    /// Function classes whose cells changed (`"*"`: all).
    pub classes: &'static [&'static str],
    /// Experiments ([`Experiment::name`]) whose cells changed (empty: all).
    pub experiments: &'static [&'static str],
    /// The first seed whose cells changed.
    pub from_seed: u64,
}

impl ResultsChange {
    /// Whether it changed cell `unary`/`pairwise` of `seed` of `experiment`.
    fn changed(&self, experiment: &str, seed: u64, unary: &str, pairwise: &str) -> bool {
        (self.experiments.is_empty() || self.experiments.contains(&experiment))
            && seed >= self.from_seed
            && self.classes.iter().any(|c| *c == "*" || *c == unary || *c == pairwise)
    }
}

/// Each results version after the first with the cells it changed: a cell
/// of version `v` is still reproduced by this code when no entry after `v`
/// changed it ([`ResultsChange`]).
///
/// ```
/// let last = experiments::runner::RESULTS_CHANGES.last().unwrap();
/// assert_eq!(last.version, experiments::runner::RESULTS_VERSION);
/// ```
pub const RESULTS_CHANGES: &[ResultsChange] = &[
    // 2: the constant class stops warm fits after 10 L-BFGS steps, like the
    // linear class (it fitted every call to convergence).
    ResultsChange { version: 2, classes: &["constant"], experiments: &[], from_seed: 0 },
    // 3: seed s of the image experiments splits the images with split seed
    // `split_seed + s` (every seed used `split_seed`); seed 0 is unchanged.
    ResultsChange { version: 3, classes: &["*"], experiments: &["horses", "stanford"], from_seed: 1 },
];

/// Whether cell `unary`/`pairwise` of `seed` of `experiment` written by
/// code of results version `version` has the numbers this code gives
/// ([`RESULTS_CHANGES`]).
pub(crate) fn cell_reproduced(version: u64, experiment: &str, seed: u64, unary: &str, pairwise: &str) -> bool {
    version <= RESULTS_VERSION
        && RESULTS_CHANGES.iter().filter(|c| c.version > version).all(|c| !c.changed(experiment, seed, unary, pairwise))
}

/// The results version of a folder whose `run.json` has no
/// `results_version` (written before the field existed): 1, the version of
/// every commit before it. It stays 1 when [`RESULTS_VERSION`] is bumped.
/// Some of those commits changed results uncounted (`fc5db63`, `aa0c23d`,
/// `77f3acd`), so such a folder is merged on trust, with a note.
pub const UNRECORDED_RESULTS_VERSION: u64 = 1;

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
    /// Build the outputs from the `--merge` folders' results alone: no cell
    /// is trained, no model copied, no data loaded; outputs that need models
    /// or data are not written (and the run says so).
    pub results_only: bool,
    /// Cells trained at the same time, each with `threads / jobs` threads (at
    /// least 1); the results are the same for any split. `None`: the
    /// experiment's [`Experiment::default_jobs`].
    pub jobs: Option<usize>,
}

/// Message-passing iterations after each fit in the chapter's experiments
/// (Algorithm 1 as Domke ran it), whatever the library's default
/// ([`structlearn::DEFAULT_MESSAGE_PASSING_ITERATIONS`]).
pub const CHAPTER_MESSAGE_PASSING: usize = 25;

/// The learning settings of the experiments' message-passing learners: the
/// library's defaults with the chapter's [`CHAPTER_MESSAGE_PASSING`]
/// message-passing iterations after each fit, so that `reproduce` gives the
/// committed tables bit for bit whatever the library's default. (Learners
/// that pass no messages, the perceptrons, refuse the setting: punyakanok
/// sets it only where [`structlearn::LearnerKind::reads`] it.)
///
/// ```
/// let config = experiments::runner::chapter_config();
/// assert_eq!(config.message_passing_iterations, 25);
/// assert_eq!(config.changed_settings(), ["message_passing_iterations"]);
/// ```
pub fn chapter_config() -> TrainConfig {
    TrainConfig { message_passing_iterations: CHAPTER_MESSAGE_PASSING, ..TrainConfig::default() }
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
    /// Message-passing iterations after each fit
    /// ([`structlearn::TrainConfig::message_passing_iterations`]): the
    /// chapter's [`CHAPTER_MESSAGE_PASSING`] unless the run sets another
    /// (horses, stanford: `--set message_passing_iterations=N`).
    pub message_passing_iterations: usize,
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
pub(crate) const UNKNOWN_REJECTED: &str = "unknown";

/// The header of `curves.csv`.
pub(crate) const CURVES_HEADER: &str =
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
    let out = opts
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("target/reproduce/{}{}", exp.name(), opts.scale.suffix())));
    let cells = selected_cells(&opts.cells)?;
    let seeds = seed_list(opts.first_seed, opts.seeds)?;
    let preset = exp.preset();
    if opts.results_only {
        return merge_results_only(exp, opts, &out, &preset, &seeds, &cells);
    }
    create_folder(&out.join("models"))?;
    let class_names = exp.class_names();
    let (mut done, todo, carried) =
        pending_cells(exp.name(), opts, &out, &preset, &seeds, &cells, class_names.as_deref())?;
    let merge_note = carried.note(class_names.is_some());

    let stop = Arc::new(AtomicBool::new(false));
    if let Err(e) = structlearn_cli::stop_on_ctrl_c(stop.clone()) {
        eprintln!("warning: Ctrl-C will not stop cleanly: {e}");
    }
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
    let info = RunInfo { preset: &preset, opts, commit: commit.as_deref(), results_only: &carried.results_only };
    info.write(&out, &done, seconds_before, true)?;
    let wall = Instant::now();
    let mut data_by_seed: BTreeMap<u64, E::Data> = BTreeMap::new();
    for seed in todo.iter().map(|t| t.0).collect::<std::collections::BTreeSet<_>>() {
        let data = exp.data(seed)?;
        if opts.save_data {
            exp.save_data(&out, seed, &data)?;
        }
        data_by_seed.insert(seed, data);
    }
    let run = CellRun {
        exp,
        opts,
        out: &out,
        seeds: &seeds,
        cells: &cells,
        info: &info,
        merge_note: &merge_note,
        seconds_before,
        wall,
    };
    let mut interrupted = run.train_cells(todo, &mut done, &data_by_seed, &stop)?;
    interrupted |= stop.load(Ordering::SeqCst) && done.len() < seeds.len() * cells.len();
    let seconds = seconds_before + wall.elapsed().as_secs_f64();
    let first = seeds[0];
    if !data_by_seed.contains_key(&first) && !interrupted {
        // No cell of the first seed was trained: its data is loaded only for
        // the outputs drawn from it (per-class scores, figures, table note).
        let data = exp.data(first).with_context(|| {
            format!(
                "loading the data of seed {first} for per_class.csv, the figures and the table's note (its cells were \
                 all merged or resumed; --results-only merges without the data)"
            )
        })?;
        data_by_seed.insert(first, data);
    }
    write_outputs(exp, &out, &done, &seeds, &cells, &data_by_seed, &merge_note)?;
    if let Some(data) = data_by_seed.get(&first) {
        if let Some(names) = &class_names {
            let left_out = write_per_class(&out, &done, first, Some(data), names, &exp.budget().predict, &carried)?;
            if !left_out.is_empty() {
                eprintln!(
                    "note: per_class.csv leaves out {} (merged without their models from folders without their \
                     per-class rows)",
                    left_out.join(", ")
                );
            }
        }
        exp.figures(&out, &done, first, data)?;
        if !carried.results_only.is_empty() {
            eprintln!(
                "note: figures drawn from models leave out the {} cell(s) merged without their models (table.md \
                 lists them)",
                carried.results_only.len()
            );
        }
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

/// The cells already finished (`--resume`: read back from `out`; `--merge`:
/// taken from other folders) and those left to train, as (seed, unary,
/// pairwise), in the run's order, and what results-only cells carry.
#[allow(clippy::type_complexity)]
fn pending_cells(
    experiment: &str,
    opts: &Options,
    out: &Path,
    preset: &serde_json::Value,
    seeds: &[u64],
    cells: &[(String, String)],
    class_names: Option<&[String]>,
) -> Result<(Vec<CellResult>, Vec<(u64, String, String)>, Carried)> {
    let mut carried = Carried::default();
    let mut done: Vec<CellResult> = Vec::new();
    if opts.resume {
        check_same_preset(out, preset)?;
        done = resumed_cells(out, seeds[0], class_names, &mut carried)?;
    }
    done.retain(|r| seeds.contains(&r.seed) && cells.contains(&(r.unary.clone(), r.pairwise.clone())));
    carried.results_only.retain(|((s, u, p), _)| seeds.contains(s) && cells.contains(&(u.clone(), p.clone())));
    let into = MergeInto { experiment, out, preset, seeds, cells, class_names, models: true };
    for dir in &opts.merge {
        merge_cells(dir, &into, &mut done, &mut carried)?;
    }
    let todo = seeds
        .iter()
        .flat_map(|&s| cells.iter().map(move |(u, pw)| (s, u.clone(), pw.clone())))
        .filter(|(s, u, pw)| !done.iter().any(|r| r.seed == *s && &r.unary == u && &r.pairwise == pw))
        .collect();
    Ok((done, todo, carried))
}

/// The finished cells of `out` for `--resume`: those with a model, and those
/// its `run.json` lists as merged without their models (`results_only_cells`),
/// with their `per_class.csv` lines when `out` reported `first_seed`.
fn resumed_cells(
    out: &Path,
    first_seed: u64,
    class_names: Option<&[String]>,
    carried: &mut Carried,
) -> Result<Vec<CellResult>> {
    let info = read_run_json(out)?.unwrap_or_default();
    let listed: Vec<(CellKey, PathBuf)> = info
        .get("results_only_cells")
        .and_then(serde_json::Value::as_array)
        .map(|cells| {
            cells
                .iter()
                .filter_map(|c| {
                    let key = (
                        c.get("seed")?.as_u64()?,
                        c.get("unary")?.as_str()?.into(),
                        c.get("pairwise")?.as_str()?.into(),
                    );
                    Some((key, PathBuf::from(c.get("from")?.as_str()?)))
                })
                .collect()
        })
        .unwrap_or_default();
    let same_first = info.get("first_seed").and_then(serde_json::Value::as_u64) == Some(first_seed);
    let per_class = match class_names {
        Some(names) if same_first && !listed.is_empty() => read_per_class(out, names)?,
        _ => BTreeMap::new(),
    };
    let mut done = Vec::new();
    for (r, has_model) in read_results(out)? {
        let key = (r.seed, r.unary.clone(), r.pairwise.clone());
        if !has_model {
            let Some((_, from)) = listed.iter().find(|(k, _)| *k == key) else { continue };
            if let Some(lines) = per_class.get(&(r.unary.clone(), r.pairwise.clone()))
                && r.seed == first_seed
            {
                carried.per_class.insert((r.unary.clone(), r.pairwise.clone()), lines.clone());
            }
            carried.results_only.push((key, from.clone()));
        }
        done.push(r);
    }
    Ok(done)
}

/// `--results-only`: the outputs of the cells of the `--merge` folders
/// (results, curves, table, error curves, `per_class.csv` rows the folders
/// have), without training, models or data; cells in no folder are left out
/// and named. Writes into a fresh folder only: figures of an earlier run
/// there would contradict the merged table.
fn merge_results_only<E: Experiment>(
    exp: &E,
    opts: &Options,
    out: &Path,
    preset: &serde_json::Value,
    seeds: &[u64],
    cells: &[(String, String)],
) -> Result<()> {
    if opts.merge.is_empty() {
        bail!("--results-only merges the results of --merge folders: give at least one --merge DIR");
    }
    if opts.resume {
        bail!("--results-only writes a fresh folder: merge again from the source folders instead of --resume");
    }
    for earlier in ["run.json", "results_by_seed.csv", "models"] {
        if out.join(earlier).exists() {
            bail!(
                "--results-only: {} already holds a run ({earlier}); merging writes a fresh folder (figures and \
                 models of an earlier run would contradict the merged table): use another --out",
                out.display()
            );
        }
    }
    let class_names = exp.class_names();
    let into = MergeInto {
        experiment: exp.name(),
        out,
        preset,
        seeds,
        cells,
        class_names: class_names.as_deref(),
        models: false,
    };
    let mut done = Vec::new();
    let mut carried = Carried::default();
    for dir in &opts.merge {
        merge_cells(dir, &into, &mut done, &mut carried)?;
    }
    if done.is_empty() {
        bail!("--results-only: the --merge folders hold none of the selected cells and seeds");
    }
    // Only now: a refused merge leaves no folder behind.
    create_folder(out)?;
    // The order of a run of all the cells: by seed, then in the order of the cells.
    done.sort_by_key(|r| (r.seed, cells.iter().position(|c| c.0 == r.unary && c.1 == r.pairwise)));
    let missing: Vec<String> = seeds
        .iter()
        .flat_map(|&s| cells.iter().map(move |(u, p)| (s, u, p)))
        .filter(|(s, u, p)| !done.iter().any(|r| r.seed == *s && &r.unary == *u && &r.pairwise == *p))
        .map(|(s, u, p)| format!("{u}/{p} (seed {s})"))
        .collect();
    let mut note = carried.note(class_names.is_some());
    note.push_str(
        " No data was loaded (--results-only): notes computed from the data are in the source folders' table.md.",
    );
    if !missing.is_empty() {
        note.push_str(&format!(" Not in any merged folder: {}.", missing.join(", ")));
        eprintln!("note: {} cell(s) are in no --merge folder and left out: {}", missing.len(), missing.join(", "));
    }
    write_outputs(exp, out, &done, seeds, cells, &BTreeMap::new(), &note)?;
    if let Some(names) = &class_names {
        let left_out = write_per_class::<E::Data>(out, &done, seeds[0], None, names, &exp.budget().predict, &carried)?;
        if !left_out.is_empty() {
            eprintln!("note: per_class.csv leaves out {} (their folders have no per-class rows)", left_out.join(", "));
        }
    }
    eprintln!(
        "note: --results-only writes no models and none of the figures drawn from models or data \
         (fig1_learned_functions.png, fig3_predictions.png, legend.md, split files); fig2_error_curves.png is drawn \
         from curves.csv"
    );
    // The merged cells' own times are in results_by_seed.csv; the merge's is not a training time.
    let commit = current_commit();
    let info = RunInfo { preset, opts, commit: commit.as_deref(), results_only: &carried.results_only };
    info.write(out, &done, 0.0, false)?;
    println!("{}", std::fs::read_to_string(out.join("table.md")).unwrap_or_default());
    println!("outputs in {}", out.display());
    Ok(())
}

/// What every cell of one `reproduce` run shares.
struct CellRun<'r, E> {
    exp: &'r E,
    opts: &'r Options,
    out: &'r Path,
    seeds: &'r [u64],
    cells: &'r [(String, String)],
    info: &'r RunInfo<'r>,
    /// The table's note on cells merged without their models.
    merge_note: &'r str,
    /// Seconds of earlier sessions of this folder (`--resume`).
    seconds_before: f64,
    /// When this session started.
    wall: Instant,
}

impl<E: Experiment + Sync> CellRun<'_, E>
where
    E::Data: Sync,
{
    /// Trains the cells of `todo`, `jobs` at a time, each on its own pool of
    /// threads, adding each finished one to `done` and rewriting the outputs;
    /// returns whether a cell was interrupted (Ctrl-C). The results do not
    /// depend on the number of threads, so neither do the outputs.
    fn train_cells(
        &self,
        mut todo: Vec<(u64, String, String)>,
        done: &mut Vec<CellResult>,
        data_by_seed: &BTreeMap<u64, E::Data>,
        stop: &Arc<AtomicBool>,
    ) -> Result<bool> {
        let (exp, opts, out, cells) = (self.exp, self.opts, self.out, self.cells);
        let budget = exp.budget();
        let mode = opts.verbosity.mode();
        let multi = MultiProgress::new();
        let total_cells = self.seeds.len() * cells.len();
        let overall = multi.add(mode.bar(total_cells as u64, "cells [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}"));
        overall.set_position(done.len() as u64);
        let done_before = done.len();
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
                let (next, multi, todo, budget) = (&next, &multi, &todo, &budget);
                scope.spawn(move || {
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        if i >= todo.len() || stop.load(Ordering::SeqCst) {
                            return;
                        }
                        let (seed, u, pw) = &todo[i];
                        let bar =
                            multi.add(mode.bar(0, "{prefix:>20} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}"));
                        let label = format!("cell {}/{total_cells} {u}/{pw} seed {seed}", done_before + i + 1);
                        let progress = ProgressObserver::with_bar(bar.clone(), &label, opts.verbosity);
                        let data = &data_by_seed[seed];
                        let result = pool
                            .install(|| run_cell(exp, budget, data, (*seed, u, pw), stop, progress, out, opts.resume));
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
                            let elapsed = self.wall.elapsed().as_secs_f64();
                            let eta = elapsed / finished_here as f64 * (total_cells - done.len() - 1) as f64;
                            let line = format!(
                                "{label}: done in {}: train error {:.4}, test error {:.4} (paper {:.3}); {} elapsed, \
                                 ETA {}",
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
                        let seconds = self.seconds_before + self.wall.elapsed().as_secs_f64();
                        let written = write_outputs(exp, out, done, self.seeds, cells, data_by_seed, self.merge_note)
                            .and_then(|()| self.info.write(out, done, seconds, true));
                        if let Err(e) = written {
                            stop.store(true, Ordering::SeqCst);
                            failure.get_or_insert(e);
                        }
                    }
                    Err(e) if matches!(e.downcast_ref::<LearnError>(), Some(LearnError::Interrupted { .. })) => {
                        interrupted = true;
                    }
                    Err(e) => {
                        // The other cells stop after their current step (checkpointed).
                        stop.store(true, Ordering::SeqCst);
                        failure.get_or_insert(e.context(format!("cell {u}/{pw}, seed {seed}")));
                    }
                }
            }
        });
        overall.finish_and_clear();
        match failure {
            Some(e) => Err(e),
            None => Ok(interrupted),
        }
    }
}

/// The budget of a class that has one, as settings over the class's
/// defaults, and the preset keys that set it (for error messages).
pub struct ClassBudget {
    /// The class.
    pub kind: &'static str,
    /// The preset keys that set it, as `--set` lists them.
    pub preset_keys: &'static str,
    /// Its settings.
    pub settings: serde_json::Value,
}

/// The papers' budgets for the unary (`pairwise = false`) or pairwise
/// factors: boosting's rounds; the MLP's epochs, minibatch and step size
/// (0.25 unary, 0.05 pairwise, as in both papers); the linear class's first
/// fit run to convergence ([`with_full_cold_fits`]).
pub fn class_budgets(
    boosting_rounds: usize,
    mlp_epochs: usize,
    mlp_minibatch: usize,
    pairwise: bool,
) -> [ClassBudget; 3] {
    [
        ClassBudget { kind: "linear", preset_keys: "", settings: full_cold_fit() },
        ClassBudget {
            kind: "boosting",
            preset_keys: "boosting_rounds, ",
            settings: serde_json::json!({ "rounds": boosting_rounds }),
        },
        ClassBudget {
            kind: "mlp",
            preset_keys: "mlp_epochs, mlp_minibatch, ",
            settings: serde_json::json!({
                "step_size": if pairwise { 0.05 } else { 0.25 },
                "epochs": mlp_epochs,
                "minibatch": mlp_minibatch,
            }),
        },
    ]
}

/// The linear class's setting every experiment runs with: fits without a
/// warm start (the first learning iteration's) run to the L-BFGS tolerances,
/// as every committed table was trained, not to the class's default budget
/// ([`oracles::linear::DEFAULT_COLD_MAX_ITERATIONS`] steps), so that
/// `reproduce` gives their numbers bit for bit. `--set
/// oracles.linear.cold_max_iterations=30` runs an image experiment with the
/// default.
pub fn full_cold_fit() -> serde_json::Value {
    serde_json::json!({ COLD_BUDGET: null })
}

/// The linear class's setting of its budget for fits from `W = 0`.
const COLD_BUDGET: &str = "cold_max_iterations";

/// `specs` (factor type, oracle specification) with [`full_cold_fit`] laid
/// over every `linear` one that does not set `cold_max_iterations` itself.
///
/// ```
/// let specs = vec![("unary".to_string(), serde_json::json!({"kind": "linear"}))];
/// let specs = experiments::runner::with_full_cold_fits(specs);
/// assert_eq!(specs[0].1, serde_json::json!({"kind": "linear", "cold_max_iterations": null}));
/// ```
pub fn with_full_cold_fits(mut specs: Vec<(String, serde_json::Value)>) -> Vec<(String, serde_json::Value)> {
    for (_, spec) in &mut specs {
        if let Some(spec) = spec.as_object_mut().filter(|s| s.get("kind").and_then(|k| k.as_str()) == Some("linear")) {
            spec.entry(COLD_BUDGET).or_insert(serde_json::Value::Null);
        }
    }
    specs
}

/// The budget of `kind` among `budgets`, if it has one.
pub fn budget_of<'b>(budgets: &'b [ClassBudget], kind: &str) -> Option<&'b ClassBudget> {
    budgets.iter().find(|b| b.kind == kind)
}

/// The oracle of class `kind`: the class by name from the registry, with each
/// of `settings` (JSON objects) laid over its defaults in turn.
pub fn class_oracle(kind: &str, settings: &[Option<&serde_json::Value>]) -> Result<Box<dyn Oracle>, LearnError> {
    let mut spec = serde_json::Map::from_iter([("kind".to_string(), serde_json::json!(kind))]);
    for layer in settings.iter().flatten() {
        if let serde_json::Value::Object(layer) = layer {
            spec.extend(layer.clone());
        }
    }
    structlearn::oracle_config::oracle_from_json(&serde_json::Value::Object(spec))
}

/// A cell's cost relative to the others, for the order of `--jobs`: every
/// pairwise term couples the images (message passing no longer stops early)
/// and MLP fits are the slowest (the full denoising table's times, in
/// quarters of a zero/zero cell).
pub(crate) fn expected_cost(unary: &str, pairwise: &str) -> u32 {
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
        ("message_passing_iterations", budget.message_passing_iterations),
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

/// Inside a learning iteration a cell also checkpoints after a step once this
/// many seconds have passed since its last checkpoint (steps of the 50 %
/// Stanford cells take up to an hour; a result changes nowhere).
const CHECKPOINT_WITHIN_SECONDS: f64 = 600.0;

/// Trains one cell. The trainer checkpoints after every
/// [`Budget::checkpoint_every`]-th learning iteration, inside one every
/// [`CHECKPOINT_WITHIN_SECONDS`], and when Ctrl-C stops it (after its step),
/// so an interrupted cell continues with `--resume` from its last finished
/// step (a killed session: from its last checkpoint), with the same
/// result as an uninterrupted run; the checkpoint is removed once the cell's
/// model is saved.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_cell<E: Experiment>(
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
    let config = TrainConfig {
        schedule: exp.schedule(budget.message_passing_iterations),
        epsilon: 0.1,
        learning_iterations: budget.learning_iterations,
        message_passing_iterations: budget.message_passing_iterations,
        seed,
        predict: budget.predict,
        evaluate: Evaluate::EveryIteration,
        evaluate_train: true,
        evaluate_train_every: budget.train_error_every,
        checkpoint: Some(CheckpointConfig {
            every: budget.checkpoint_every,
            within_iteration_seconds: Some(CHECKPOINT_WITHIN_SECONDS),
            ..CheckpointConfig::new(checkpoint_path(out, seed, unary, pairwise))
        }),
        ..chapter_config()
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
