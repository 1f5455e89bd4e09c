//! Project automation (rust-analyzer's xtask convention): `cargo xtask reproduce …`
//! runs the papers' experiments and writes tables and figures; `cargo xtask
//! bench-scale` times learning at Stanford Background's scale; `cargo xtask
//! test` runs every test: the Rust workspace's and the Python package's.

mod bench_scale;
mod fuzz;
mod oracle_fit;
mod test;

use experiments::{denoising, hazan_urtasun, images, punyakanok, runner};

/// Counts each fuzz input's memory (inactive outside `cargo xtask fuzz`).
#[global_allocator]
static ALLOC: structlearn_fuzz::LimitAlloc = structlearn_fuzz::LimitAlloc;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(name = "xtask", about = "Project automation: reproduce the papers' experiments")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs experiments of the papers and writes tables, CSVs and figures.
    /// Without an experiment, runs the default ones that need no downloads
    /// (for now: the synthetic denoising experiment).
    Reproduce {
        /// The experiment.
        experiment: Option<Experiment>,
        /// A smaller configuration for a fast look (see README).
        #[arg(long, conflicts_with = "full")]
        quick: bool,
        /// The paper's full scale (see README).
        #[arg(long)]
        full: bool,
        /// Output folder (default: target/reproduce/EXPERIMENT[-quick|-full]).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Repeat with this many seeds (horses, stanford: seed s also splits the images with split seed
        /// `split_seed + s`, unless `--set fixed_split=true`; punyakanok: trials, default 10; at most 100)
        /// and report mean ± std.
        #[arg(long)]
        seeds: Option<usize>,
        /// First seed (the seeds are SEED, SEED + 1, …; a list past the largest seed is refused).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Only these cells, as UNARY/PAIRWISE (repeatable), e.g. `--cell linear/boosting`;
        /// a cell given twice runs once; for hazan-urtasun the parts `clock`, `tables` or `unary`.
        #[arg(long = "cell", value_name = "UNARY/PAIRWISE")]
        cells: Vec<String>,
        /// Learning iterations (overrides the preset).
        #[arg(long)]
        iterations: Option<usize>,
        /// Skip cells already in the output folder's results (after an interruption).
        #[arg(long)]
        resume: bool,
        /// Also write the generated data sets (train-seedN.sld, test-seedN.sld) for the `structlearn` CLI.
        #[arg(long)]
        save_data: bool,
        /// Message-passing iterations of prediction (overrides the preset).
        #[arg(long)]
        predict_iterations: Option<usize>,
        /// Evaluate the training error after every this many learning iterations and after the last
        /// (overrides the preset; the test error is evaluated after every one).
        #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..))]
        train_error_every: Option<u64>,
        /// Print nothing but the table and errors (no progress).
        #[arg(long, short, conflicts_with = "verbose")]
        quiet: bool,
        /// Also print one line per step of every learning iteration.
        #[arg(long, short)]
        verbose: bool,
        /// Worker threads (default: one per core); results are bitwise
        /// reproducible for a given seed and thread count.
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Cells trained at the same time, each on threads / J of the worker threads (at least 1);
        /// default: one cell per thread for denoising, one at a time for horses and stanford.
        /// The results do not depend on it; cells keep little of the cores idle that way (a cell's
        /// serial parts: checkpoints, SGD epochs), at J times the memory.
        #[arg(long, value_name = "J", value_parser = clap::value_parser!(u64).range(1..))]
        jobs: Option<u64>,
        /// Folder holding the downloaded data sets (horses, stanford); default: $STRUCTLEARN_DATA_DIR.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Folder of the feature cache (horses, stanford; default target/reproduce/cache).
        #[arg(long)]
        cache_dir: Option<PathBuf>,
        /// Recompute the image features instead of using the cache.
        #[arg(long)]
        no_cache: bool,
        /// Take the finished cells of another output folder of the same preset
        /// (repeatable; e.g. cells run in parallel) instead of training them;
        /// cells of an older results version whose classes a later version
        /// changed are left out, named, and trained. Presets may differ in the extra settings
        /// (`oracles.KIND`) of oracle kinds a merged cell does not use. A cell
        /// whose model the folder lacks (committed results) is merged results-only:
        /// its errors, curve and per-class rows, left out of figures drawn from models.
        #[arg(long, value_name = "DIR")]
        merge: Vec<PathBuf>,
        /// With --merge: build the table, results.csv, curves and per_class.csv from the folders'
        /// results alone, without their models and without training or loading data; cells in no
        /// folder are left out and named. Writes into a fresh --out.
        #[arg(long, requires = "merge", conflicts_with = "resume")]
        results_only: bool,
        /// Override a setting of the horses/stanford preset (repeatable), e.g.
        /// `--set max_side=64`, `--set features.hog_cell=8`, `--set standardize=false`,
        /// `--set 'drop_unary=["hog"]'`, `--set oracles.linear.warm_max_iterations=null`;
        /// the keys are those of `preset` in run.json.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Times learning iterations of one cell on Stanford-shaped synthetic data
    /// (message passing, each oracle fit, the rest, peak RSS and heap).
    BenchScale {
        /// Training images.
        #[arg(long, default_value_t = 572)]
        images: usize,
        /// Image rows.
        #[arg(long, default_value_t = 48)]
        height: usize,
        /// Image columns.
        #[arg(long, default_value_t = 64)]
        width: usize,
        /// Labels per pixel.
        #[arg(long, default_value_t = 8)]
        labels: usize,
        /// Unary feature dimension (with the constant).
        #[arg(long, default_value_t = 42)]
        unary_dim: usize,
        /// Pair feature dimension (with the constant).
        #[arg(long, default_value_t = 3)]
        pair_dim: usize,
        /// Function classes as UNARY/PAIRWISE.
        #[arg(long, default_value = "linear/linear")]
        cell: String,
        /// Learning iterations to time.
        #[arg(long, default_value_t = 3)]
        iterations: usize,
        /// Message-passing tolerance per example; `none` runs every iteration.
        #[arg(long, default_value_t = format!("{}", structlearn::DEFAULT_MESSAGE_PASSING_TOLERANCE))]
        mp_tolerance: String,
        /// The linear oracle's L-BFGS budget per warm-started fit; `none` fits to convergence.
        #[arg(long, default_value_t = format!("{}", oracles::linear::DEFAULT_WARM_MAX_ITERATIONS))]
        warm_iterations: String,
        /// Seed of the data.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Also print the live and peak heap bytes after every step.
        #[arg(long)]
        trace_heap: bool,
        /// Write the data set instead of training: DIR/train.sld and, with
        /// `--test-images`, DIR/test.sld, for timing `structlearn train` as a
        /// user runs it.
        #[arg(long, value_name = "DIR")]
        save_data: Option<PathBuf>,
        /// Test images written by `--save-data`.
        #[arg(long, default_value_t = 143, requires = "save_data")]
        test_images: usize,
    },
    /// Cold fits of one built-in oracle on a problem stored as raw arrays
    /// (for comparisons with other libraries: `scripts/compare_peers.py`).
    OracleFit {
        /// Folder with `shape.txt`, `x.f64`, `labels.u32` and optionally `bias.f64`.
        dir: PathBuf,
        /// The oracle as JSON, e.g. `{"kind": "boosting", "rounds": 200}`.
        #[arg(long)]
        oracle: String,
        /// Fits to time; the median is reported.
        #[arg(long, default_value_t = 1)]
        repeat: usize,
        /// Seed of each fit.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Threads (default: all cores, or `RAYON_NUM_THREADS`).
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Every test: `cargo test --workspace`, then the Python package's pytest
    /// suite in a virtual environment under target/ (set up by this command).
    Test(test::TestArgs),
    /// Fuzzes every file loader with structure-aware mutations of valid files
    /// (docs/ROBUSTNESS.md); saves failing inputs and a summary.
    Fuzz(fuzz::FuzzArgs),
    /// One supervised fuzz worker (run by `fuzz`).
    #[command(hide = true)]
    FuzzWorker(fuzz::WorkerArgs),
}

/// Experiments `reproduce` knows.
#[derive(Clone, Copy, ValueEnum)]
enum Experiment {
    /// Synthetic binary denoising (NIPS 2013 Table 1 left, Figs. 1–3; docs/MATH.md §6.1).
    Denoising,
    /// Hazan & Urtasun 2010: noisy shapes, tied/untied, ε tables, wall clock vs Algorithm 1 (docs/MATH.md §6.4).
    HazanUrtasun,
    /// Punyakanok et al. 2005 Fig. 2: LO / L+I / IBT and smoothed L+I / IBT (docs/MATH.md §6.5).
    Punyakanok,
    /// Weizmann horses (NIPS 2013 Table 1 right; docs/MATH.md §6.2, docs/IMAGES.md); needs the data.
    Horses,
    /// Stanford Background (chapter Table 1.1; docs/MATH.md §6.3, docs/IMAGES.md); needs the data.
    Stanford,
}

/// The most seeds (punyakanok: trials) `reproduce --seeds` takes.
const MAX_SEEDS: usize = 100;

/// Refuses a `--seeds` count the experiment cannot take: more than
/// [`MAX_SEEDS`] (every seed's data sets are built before the first cell
/// trains, so a large count aborted on memory), or any for hazan-urtasun (one
/// seed; it used to ignore the option).
fn check_seeds(experiment: &Experiment, seeds: Option<usize>) -> Result<()> {
    let Some(n) = seeds else { return Ok(()) };
    anyhow::ensure!(
        n <= MAX_SEEDS,
        "--seeds {n}: at most {MAX_SEEDS} (each seed's data sets are held in memory for the whole run)"
    );
    anyhow::ensure!(
        !matches!(experiment, Experiment::HazanUrtasun),
        "--seeds does not apply to hazan-urtasun (it runs one seed: choose it with --seed)"
    );
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("{}", error_line(&e));
        std::process::exit(1);
    }
}

/// The line printed for a failed command: each cause once, as the CLI does
/// (typed errors such as `"{path}: {source}"` already show their source).
fn error_line(e: &anyhow::Error) -> String {
    format!("error: {}", structlearn_cli::error_text(e))
}

/// `none` or a value.
fn optional<T: std::str::FromStr>(flag: &str, text: &str) -> Result<Option<T>> {
    if text == "none" {
        return Ok(None);
    }
    text.parse().map(Some).map_err(|_| anyhow::anyhow!("--{flag}: expected a number or `none`, got `{text}`"))
}

fn run() -> Result<()> {
    let command = Cli::parse().command;
    // Without --threads, rayon sizes its pools from RAYON_NUM_THREADS.
    let threads_given =
        matches!(command, Command::OracleFit { threads: Some(_), .. } | Command::Reproduce { threads: Some(_), .. });
    if !threads_given {
        structlearn::threads::check_environment().map_err(anyhow::Error::msg)?;
    }
    match command {
        Command::BenchScale {
            images,
            height,
            width,
            labels,
            unary_dim,
            pair_dim,
            cell,
            iterations,
            mp_tolerance,
            warm_iterations,
            seed,
            trace_heap,
            save_data,
            test_images,
        } => bench_scale::run(&bench_scale::Options {
            scene: datasets::scene::SceneConfig {
                test: test_images,
                train: images,
                height,
                width,
                labels,
                unary_dim,
                pair_dim,
                seed,
                ..Default::default()
            },
            cell,
            iterations,
            mp_tolerance: optional("mp-tolerance", &mp_tolerance)?,
            warm_iterations: optional("warm-iterations", &warm_iterations)?,
            trace_heap,
            save_data,
        }),
        Command::OracleFit { dir, oracle, repeat, seed, threads } => {
            let opts = oracle_fit::Options { dir, oracle, repeat, seed };
            match threads {
                Some(n) => {
                    let n = structlearn::threads::checked_thread_count(n).map_err(anyhow::Error::msg)?;
                    rayon::ThreadPoolBuilder::new().num_threads(n).build()?.install(|| oracle_fit::run(&opts))
                }
                None => oracle_fit::run(&opts),
            }
        }
        Command::Test(a) => test::test(&a),
        Command::Fuzz(a) => fuzz::fuzz(&a),
        Command::FuzzWorker(a) => fuzz::worker(&a),
        Command::Reproduce {
            experiment,
            quick,
            full,
            out,
            seeds,
            seed,
            cells,
            iterations,
            resume,
            save_data,
            predict_iterations,
            train_error_every,
            quiet,
            verbose,
            threads,
            jobs,
            data_dir,
            cache_dir,
            no_cache,
            merge,
            results_only,
            set,
        } => {
            if let Some(n) = threads {
                let n = structlearn::threads::checked_thread_count(n).map_err(anyhow::Error::msg)?;
                rayon::ThreadPoolBuilder::new().num_threads(n).build_global()?;
            }
            let scale = if quick {
                runner::Scale::Quick
            } else if full {
                runner::Scale::Full
            } else {
                runner::Scale::Default
            };
            let grid = |out: Option<PathBuf>, cells: Vec<String>| runner::Options {
                scale,
                out,
                seeds: seeds.unwrap_or(1),
                first_seed: seed,
                cells,
                iterations,
                resume,
                save_data,
                predict_iterations,
                train_error_every: train_error_every.map(|k| k as usize),
                data_dir: data_dir.clone(),
                cache_dir: cache_dir.clone(),
                no_cache,
                verbosity: reporting::Verbosity::from_flags(quiet, verbose),
                merge: merge.clone(),
                results_only,
                jobs: jobs.map(|j| j as usize),
            };
            let experiment = experiment.unwrap_or(Experiment::Denoising);
            check_seeds(&experiment, seeds)?;
            anyhow::ensure!(
                set.is_empty() || matches!(experiment, Experiment::Horses | Experiment::Stanford),
                "--set applies to the horses and stanford experiments"
            );
            anyhow::ensure!(
                !results_only
                    || matches!(experiment, Experiment::Denoising | Experiment::Horses | Experiment::Stanford),
                "--results-only applies to the denoising, horses and stanford experiments"
            );
            match experiment {
                Experiment::Denoising => {
                    let opts = grid(out, cells);
                    runner::reproduce(&denoising::Denoising::new(&opts), &opts)
                }
                e @ (Experiment::Horses | Experiment::Stanford) => {
                    let which =
                        if matches!(e, Experiment::Horses) { images::Which::Horses } else { images::Which::Stanford };
                    let opts = grid(out, cells);
                    runner::reproduce(&images::Images::new(which, &opts, &set)?, &opts)
                }
                Experiment::HazanUrtasun => {
                    hazan_urtasun::reproduce(&hazan_urtasun::Options { scale, out, seed, iterations, parts: cells })
                }
                Experiment::Punyakanok => {
                    punyakanok::reproduce(&punyakanok::Options { scale, out, trials: seeds, first_seed: seed })
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_counts_are_bounded_and_hazan_urtasun_takes_none() {
        for e in [Experiment::Denoising, Experiment::Stanford, Experiment::Punyakanok] {
            check_seeds(&e, None).unwrap();
            check_seeds(&e, Some(MAX_SEEDS)).unwrap();
            for n in [MAX_SEEDS + 1, usize::MAX] {
                let err = check_seeds(&e, Some(n)).unwrap_err().to_string();
                assert!(err.contains(&format!("--seeds {n}: at most {MAX_SEEDS}")), "{err}");
            }
        }
        check_seeds(&Experiment::HazanUrtasun, None).unwrap();
        assert!(check_seeds(&Experiment::HazanUrtasun, Some(1)).unwrap_err().to_string().contains("--seed)"));
    }

    #[test]
    fn each_cause_is_printed_once() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied");
        let typed = datasets::DatasetError::Io { path: "rgb/horse001.jpg".into(), source: io };
        let e = anyhow::Error::new(typed).context("loading the horses");
        assert_eq!(format!("{e:#}").matches("permission denied").count(), 2, "the duplication this avoids");
        assert_eq!(error_line(&e), "error: loading the horses: rgb/horse001.jpg: permission denied");
    }
}
