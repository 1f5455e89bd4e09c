//! `cargo xtask reproduce denoising`: NIPS 2013 Table 1 (left) and Figs. 1–3
//! on the synthetic binary denoising data (docs/MATH.md §6.1).
//!
//! All 25 combinations of unary × pairwise function class are trained with
//! Algorithm 1 (`ε = 0.1`; each learning iteration: unary fit, 25
//! message-passing iterations, pairwise fit, 25 iterations) and evaluated on
//! the test images after every learning iteration.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use datasets::denoising::{DenoisingConfig, DenoisingData, generate};
use datasets::{LabelPalette, Raster};
use indicatif::MultiProgress;
use oracles::{Features, ModelRegistry, Oracle};
use structlearn::files::write_atomic;
use structlearn::oracle_config::oracle_from_json;
use structlearn::{Evaluate, LearnError, PredictOptions, StructuredModel, TrainConfig, Trainer};
use structlearn_cli::{ProgressMode, ProgressObserver, Verbosity, human_duration};

use structlearn_cli::plots::{self, CurveData, PlotImage};

/// The function classes, in the paper's order (rows and columns of Table 1).
pub const CLASSES: [&str; 5] = ["zero", "constant", "linear", "boosting", "mlp"];

/// Display names of [`CLASSES`].
const NAMES: [&str; 5] = ["Zero", "Const.", "Linear", "Boost.", "MLP"];

/// The paper's test errors (NIPS 2013 Table 1 left): rows unary, columns pairwise.
pub const PAPER: [[f64; 5]; 5] = [
    [0.502, 0.502, 0.502, 0.511, 0.502],
    [0.502, 0.502, 0.502, 0.510, 0.502],
    [0.444, 0.077, 0.059, 0.049, 0.034],
    [0.444, 0.034, 0.015, 0.009, 0.007],
    [0.445, 0.032, 0.015, 0.009, 0.008],
];

/// The paper's test error of a cell (NaN for an unknown class name).
fn paper_error(unary: &str, pairwise: &str) -> f64 {
    let index = |c: &str| CLASSES.iter().position(|k| *k == c);
    match (index(unary), index(pairwise)) {
        (Some(u), Some(p)) => PAPER[u][p],
        _ => f64::NAN,
    }
}

/// How big a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// A fast look (about 40 s here): the default's images, 5 learning iterations.
    Quick,
    /// The README's main command (under 3 minutes here): 8 + 8 images of 50×50 and 20
    /// learning iterations, enough for the table's shape.
    Default,
    /// The paper's scale.
    Full,
}

/// Options of [`reproduce`].
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
    /// Write the generated data sets into the output folder.
    pub save_data: bool,
    /// Prediction's message-passing iterations, overriding the preset.
    pub predict_iterations: Option<usize>,
    /// Progress on standard error (`--quiet`, `--verbose`).
    pub verbosity: Verbosity,
}

/// The settings behind a [`Scale`].
#[derive(Debug, Clone, serde::Serialize)]
struct Preset {
    name: &'static str,
    height: usize,
    width: usize,
    train: usize,
    test: usize,
    learning_iterations: usize,
    predict: PredictOptions,
    boosting_rounds: usize,
    mlp_epochs: usize,
    mlp_minibatch: usize,
}

fn preset(scale: Scale) -> Preset {
    let full = Preset {
        name: "full",
        height: 100,
        width: 100,
        train: 16,
        test: 16,
        learning_iterations: 40,
        // Evaluation messages persist across learning iterations
        // (`TrainConfig::warm_start_evaluation`), so 10 iterations per
        // evaluation accumulate to hundreds: strongly coupled 100×100 grids at
        // ε = 0.1 need ~300 iterations from zero to settle their decoding.
        predict: PredictOptions { iterations: 10, tolerance: Some(1e-4) },
        boosting_rounds: 10,
        mlp_epochs: 1,
        mlp_minibatch: 100,
    };
    let small =
        Preset { name: "default", height: 50, width: 50, train: 8, test: 8, learning_iterations: 20, ..full.clone() };
    match scale {
        Scale::Full => full,
        Scale::Default => small,
        Scale::Quick => Preset { name: "quick", learning_iterations: 5, ..small },
    }
}

/// The oracle of class `kind` for the unary (`pairwise = false`) or pairwise factors.
fn oracle(kind: &str, pairwise: bool, p: &Preset) -> Result<Box<dyn Oracle>, LearnError> {
    let spec = match kind {
        // The paper re-fits leaves without a ridge; λ = 1 keeps pure leaves finite
        // without slowing the one-feature problems (the oracle's default, 100, is
        // tuned for 42-feature problems).
        "boosting" => serde_json::json!({ "kind": kind, "rounds": p.boosting_rounds, "leaf_l2": 1.0 }),
        "mlp" => serde_json::json!({
            "kind": kind,
            "step_size": if pairwise { 0.05 } else { 0.25 },
            "epochs": p.mlp_epochs,
            "minibatch": p.mlp_minibatch,
        }),
        _ => serde_json::json!({ "kind": kind }),
    };
    oracle_from_json(&spec)
}

/// One trained cell.
#[derive(Debug, Clone)]
struct CellResult {
    seed: u64,
    unary: String,
    pairwise: String,
    train_error: f64,
    test_error: f64,
    seconds: f64,
    /// `(iteration, train error, test error, objective)`.
    curve: Vec<(usize, f64, f64, f64)>,
}

/// Runs the experiment and writes everything into the output folder.
pub fn reproduce(opts: &Options) -> Result<()> {
    let p = preset(opts.scale);
    let predict = PredictOptions { iterations: opts.predict_iterations.unwrap_or(p.predict.iterations), ..p.predict };
    let p = Preset { learning_iterations: opts.iterations.unwrap_or(p.learning_iterations), predict, ..p };
    if opts.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let out = opts.out.clone().unwrap_or_else(|| {
        let suffix = match opts.scale {
            Scale::Default => String::new(),
            _ => format!("-{}", p.name),
        };
        PathBuf::from(format!("target/reproduce/denoising{suffix}"))
    });
    std::fs::create_dir_all(out.join("models")).with_context(|| format!("creating {}", out.display()))?;
    let cells = selected_cells(&opts.cells)?;
    let seeds: Vec<u64> = (0..opts.seeds as u64).map(|s| opts.first_seed + s).collect();

    if opts.resume {
        check_same_preset(&out, &p)?;
    }
    let mut done: Vec<CellResult> = if opts.resume { read_previous(&out)? } else { Vec::new() };
    done.retain(|r| seeds.contains(&r.seed) && cells.contains(&(r.unary.clone(), r.pairwise.clone())));
    let todo: Vec<(u64, String, String)> = seeds
        .iter()
        .flat_map(|&s| cells.iter().map(move |(u, pw)| (s, u.clone(), pw.clone())))
        .filter(|(s, u, pw)| !done.iter().any(|r| r.seed == *s && &r.unary == u && &r.pairwise == pw))
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)) {
        eprintln!("warning: Ctrl-C will not stop cleanly: {e}");
    }
    let mode = opts.verbosity.mode();
    if opts.verbosity.normal() {
        eprintln!(
            "denoising ({}): {} train + {} test images of {}×{}, {} learning iterations, {} cells × {} seeds → {}",
            p.name,
            p.train,
            p.test,
            p.height,
            p.width,
            p.learning_iterations,
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
    write_run_info(&out, &p, opts, commit.as_deref(), seconds_before, true)?;
    let wall = Instant::now();
    let multi = MultiProgress::new();
    let total_cells = seeds.len() * cells.len();
    let overall = multi.add(mode.bar(total_cells as u64, "cells [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}"));
    overall.set_position(done.len() as u64);
    let done_before = done.len();
    let mut data_by_seed: BTreeMap<u64, DenoisingData> = BTreeMap::new();
    let mut interrupted = false;
    for (seed, u, pw) in &todo {
        if stop.load(Ordering::SeqCst) {
            interrupted = true;
            break;
        }
        if !data_by_seed.contains_key(seed) {
            let data = make_data(&p, *seed)?;
            if opts.save_data {
                data.train.save(&out.join(format!("train-seed{seed}.sld")))?;
                data.test.save(&out.join(format!("test-seed{seed}.sld")))?;
            }
            data_by_seed.insert(*seed, data);
        }
        let data = &data_by_seed[seed];
        overall.set_message(format!("seed {seed} {u}/{pw}"));
        let bar = multi.add(mode.bar(0, "{prefix:>20} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}"));
        let label = format!("cell {}/{total_cells} {u}/{pw} seed {seed}", done.len() + 1);
        let progress = ProgressObserver::with_bar(bar.clone(), &label, opts.verbosity);
        match run_cell(&p, data, *seed, u, pw, &stop, progress, &out) {
            Ok(result) => {
                if mode != ProgressMode::Off {
                    let finished_here = done.len() + 1 - done_before;
                    let elapsed = wall.elapsed().as_secs_f64();
                    let eta = elapsed / finished_here as f64 * (total_cells - done.len() - 1) as f64;
                    let line = format!(
                        "{label}: done in {}: train error {:.4}, test error {:.4} (paper {:.3}); {} elapsed, ETA {}",
                        human_duration(result.seconds),
                        result.train_error,
                        result.test_error,
                        paper_error(u, pw),
                        human_duration(elapsed),
                        human_duration(eta)
                    );
                    if mode == ProgressMode::Bar { multi.suspend(|| eprintln!("{line}")) } else { eprintln!("{line}") }
                }
                done.push(result);
                write_outputs(&out, &done, &seeds, &cells, &shares(&data_by_seed))?;
            }
            Err(e) if matches!(e.downcast_ref::<LearnError>(), Some(LearnError::Interrupted { .. })) => {
                interrupted = true;
                multi.remove(&bar);
                break;
            }
            Err(e) => return Err(e.context(format!("cell {u}/{pw}, seed {seed}"))),
        }
        multi.remove(&bar);
        overall.inc(1);
    }
    overall.finish_and_clear();
    let seconds = seconds_before + wall.elapsed().as_secs_f64();
    let first = seeds[0];
    if !data_by_seed.contains_key(&first) && !interrupted {
        data_by_seed.insert(first, make_data(&p, first)?);
    }
    write_outputs(&out, &done, &seeds, &cells, &shares(&data_by_seed))?;
    if let Some(data) = data_by_seed.get(&first) {
        write_figures(&out, &done, first, data, &p)?;
    }
    write_run_info(&out, &p, opts, commit.as_deref(), seconds, interrupted)?;
    println!("{}", std::fs::read_to_string(out.join("table.md")).unwrap_or_default());
    println!("wall-clock: {seconds:.1} s; outputs in {}", out.display());
    if interrupted {
        bail!("interrupted: finished cells are in {}; rerun with --resume to continue", out.display());
    }
    Ok(())
}

fn shares(data_by_seed: &BTreeMap<u64, DenoisingData>) -> BTreeMap<u64, f64> {
    data_by_seed.iter().map(|(&s, d)| (s, test_label_share(d))).collect()
}

fn make_data(p: &Preset, seed: u64) -> Result<DenoisingData> {
    let cfg = DenoisingConfig {
        height: p.height,
        width: p.width,
        train: p.train,
        test: p.test,
        seed,
        ..DenoisingConfig::default()
    };
    Ok(generate(&cfg)?)
}

fn selected_cells(filters: &[String]) -> Result<Vec<(String, String)>> {
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
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn run_cell(
    p: &Preset,
    data: &DenoisingData,
    seed: u64,
    unary: &str,
    pairwise: &str,
    stop: &Arc<AtomicBool>,
    progress: ProgressObserver,
    out: &Path,
) -> Result<CellResult> {
    let start = Instant::now();
    let oracles =
        vec![("unary".to_string(), oracle(unary, false, p)?), ("pairwise".to_string(), oracle(pairwise, true, p)?)];
    let config = TrainConfig {
        epsilon: 0.1,
        learning_iterations: p.learning_iterations,
        message_passing_iterations: 25,
        seed,
        predict: p.predict,
        evaluate: Evaluate::EveryIteration,
        evaluate_train: true,
        ..TrainConfig::default()
    };
    let mut trainer = Trainer::new(&data.train, oracles, config)?.with_validation(&data.test);
    trainer.add_observer(Box::new(progress));
    trainer.set_stop_flag(stop.clone());
    let outcome = trainer.train()?;
    let seconds = start.elapsed().as_secs_f64();
    let curve: Vec<(usize, f64, f64, f64)> = outcome
        .history
        .iter()
        .filter_map(|r| Some((r.iteration, r.train_error?, r.validation_error?, r.objective)))
        .collect();
    let &(_, train_error, test_error, _) = curve.last().context("no evaluation recorded")?;
    outcome.model.save(&model_path(out, seed, unary, pairwise))?;
    Ok(CellResult { seed, unary: unary.into(), pairwise: pairwise.into(), train_error, test_error, seconds, curve })
}

fn model_path(out: &Path, seed: u64, unary: &str, pairwise: &str) -> PathBuf {
    out.join("models").join(format!("seed{seed}-{unary}-{pairwise}.slm"))
}

/// Cells of an earlier (interrupted) run, from `results_by_seed.csv` and `curves.csv`.
fn read_previous(out: &Path) -> Result<Vec<CellResult>> {
    let Ok(text) = std::fs::read_to_string(out.join("results_by_seed.csv")) else {
        return Ok(Vec::new());
    };
    let curves = std::fs::read_to_string(out.join("curves.csv")).unwrap_or_default();
    let mut results = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 6 {
            bail!("{}: malformed line `{line}`", out.join("results_by_seed.csv").display());
        }
        let seed: u64 = f[0].parse()?;
        if !model_path(out, seed, f[1], f[2]).exists() {
            continue;
        }
        let curve = curves
            .lines()
            .skip(1)
            .filter_map(|l| {
                let c: Vec<&str> = l.split(',').collect();
                (c.len() == 7 && c[0] == f[0] && c[1] == f[1] && c[2] == f[2])
                    .then(|| Some((c[3].parse().ok()?, c[4].parse().ok()?, c[5].parse().ok()?, c[6].parse().ok()?)))?
            })
            .collect();
        results.push(CellResult {
            seed,
            unary: f[1].into(),
            pairwise: f[2].into(),
            train_error: f[3].parse()?,
            test_error: f[4].parse()?,
            seconds: f[5].parse()?,
            curve,
        });
    }
    Ok(results)
}

pub(crate) fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 { v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (m, var.sqrt())
}

/// Share of label-1 pixels in the test set of each seed's data.
fn test_label_share(data: &DenoisingData) -> f64 {
    let (ones, total) = (0..data.test.len())
        .filter_map(|k| data.test.labels(k).ok())
        .fold((0, 0), |(o, t), l| (o + l.iter().filter(|&&y| y == 1).count(), t + l.len()));
    if total == 0 { 0.0 } else { ones as f64 / total as f64 }
}

fn write_outputs(
    out: &Path,
    done: &[CellResult],
    seeds: &[u64],
    cells: &[(String, String)],
    shares: &BTreeMap<u64, f64>,
) -> Result<()> {
    let mut by_seed = String::from("seed,unary,pairwise,train_error,test_error,seconds\n");
    let mut curves = String::from("seed,unary,pairwise,iteration,train_error,test_error,objective\n");
    for r in done {
        let _ = writeln!(
            by_seed,
            "{},{},{},{},{},{:.3}",
            r.seed, r.unary, r.pairwise, r.train_error, r.test_error, r.seconds
        );
        for (i, tr, te, obj) in &r.curve {
            let _ = writeln!(curves, "{},{},{},{i},{tr},{te},{obj}", r.seed, r.unary, r.pairwise);
        }
    }
    write_atomic(&out.join("results_by_seed.csv"), by_seed.as_bytes())?;
    write_atomic(&out.join("curves.csv"), curves.as_bytes())?;

    let mut results = String::from("unary,pairwise,train_error,test_error,seconds\n");
    let mut stats: BTreeMap<(usize, usize), ((f64, f64), usize)> = BTreeMap::new();
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
        stats.insert((ui, pi), (te, rs.len()));
    }
    write_atomic(&out.join("results.csv"), results.as_bytes())?;

    let mut table = String::new();
    let _ = writeln!(
        table,
        "Test error, synthetic denoising (rows: unary class, columns: pairwise class); each cell: ours{} (paper, difference). {} seed(s).\n",
        if seeds.len() > 1 { " mean ± std" } else { "" },
        seeds.len()
    );
    let _ = writeln!(table, "| unary \\ pairwise | {} |", NAMES.join(" | "));
    let _ = writeln!(table, "|---|{}", "---|".repeat(NAMES.len()));
    for (ui, name) in NAMES.iter().enumerate() {
        let _ = write!(table, "| {name} |");
        for (pi, &paper) in PAPER[ui].iter().enumerate() {
            match stats.get(&(ui, pi)) {
                Some(((m, s), n)) => {
                    let ours = if *n > 1 { format!("{m:.3} ± {s:.3}") } else { format!("{m:.3}") };
                    let _ = write!(table, " {ours} ({paper:.3}, {:+.3}) |", m - paper);
                }
                None => {
                    let _ = write!(table, " – |");
                }
            }
        }
        let _ = writeln!(table);
    }
    let _ = writeln!(
        table,
        "\nErrors are those of the last learning iteration's evaluation, which is warm-started: it continues \
         message passing from the previous evaluation's messages. `structlearn eval` on a saved model \
         (models/) predicts from zero messages with its own --iterations budget; the two agree once message \
         passing has converged (eval reports how many examples reached its tolerance)."
    );
    if !shares.is_empty() {
        let list: Vec<String> = shares
            .iter()
            .map(|(seed, v)| {
                format!(
                    "{v:.3} (seed {seed}; 8/9 of it {:.3}, 8/9 of one minus it {:.3})",
                    v * 8.0 / 9.0,
                    (1.0 - v) * 8.0 / 9.0
                )
            })
            .collect();
        let _ = writeln!(
            table,
            "\nShare s of label-1 pixels in the test set: {}. Two rows and one column measure this \
             share, not learning. Zero and constant unaries see no input, so those models predict one \
             label everywhere and score s or 1 − s. Without pairwise terms (Zero column) only the 1/9 \
             of each class with φ < 0.1 or φ > 0.9 carries evidence, so a unary-only model trained on \
             clearly unbalanced data errs on 8/9 of the class the imbalance disfavours: 8/9·s or \
             8/9·(1 − s) (in between when the training set is nearly balanced). The paper's \
             0.502–0.511 and 0.444–0.445 are these values for a test set with s ≈ 0.5.",
            list.join("; ")
        );
    }
    write_atomic(&out.join("table.md"), table.as_bytes())?;
    Ok(())
}

fn write_figures(out: &Path, done: &[CellResult], seed: u64, data: &DenoisingData, p: &Preset) -> Result<()> {
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
                            train: r.curve.iter().map(|c| (c.0 as f64, c.1)).collect(),
                            test: r.curve.iter().map(|c| (c.0 as f64, c.2)).collect(),
                        })
                        .unwrap_or_default()
                })
                .collect()
        })
        .collect();
    plots::plot_error_curves(&out.join("fig2_error_curves.png"), &names, &names, &cells)?;

    // Fig. 1 and 3 use the diagonal cells: both factor types of one class.
    let registry = ModelRegistry::with_builtin();
    let mut classes = Vec::new();
    let mut unary = Vec::new();
    let mut pairwise = Vec::new();
    let mut diag: BTreeMap<&str, StructuredModel> = BTreeMap::new();
    for (c, name) in CLASSES.iter().zip(NAMES) {
        let path = model_path(out, seed, c, c);
        if !path.exists() {
            continue;
        }
        let model = StructuredModel::load(&path, &registry)?;
        let xs: Vec<f64> = (0..=100).map(|i| i as f64 / 100.0).collect();
        let u = energies(&model, 0, &xs)?;
        let v = energies(&model, 1, &xs)?;
        classes.push(name.to_string());
        unary.push(xs.iter().zip(&u).map(|(&x, e)| (x, [e[0], e[1]])).collect());
        pairwise.push(xs.iter().zip(&v).map(|(&x, e)| (x, [e[0], e[1], e[2], e[3]])).collect());
        diag.insert(c, model);
    }
    if !classes.is_empty() {
        plots::plot_learned_functions(&out.join("fig1_learned_functions.png"), &classes, &unary, &pairwise)?;
    }
    let shown: Vec<(&str, &str)> = [("linear", "Linear"), ("boosting", "Boosting"), ("mlp", "MLP")]
        .into_iter()
        .filter(|(c, _)| diag.contains_key(c))
        .collect();
    if !shown.is_empty() {
        let mut columns = vec!["Input".to_string(), "True".to_string()];
        columns.extend(shown.iter().map(|(_, n)| n.to_string()));
        let mut rows = Vec::new();
        for k in 0..3.min(data.test.len()) {
            let img = &data.test_images[k];
            let mut row =
                vec![PlotImage::Gray(img.noisy.clone()), PlotImage::Labels(img.truth.clone(), LabelPalette::binary())];
            for (c, _) in &shown {
                let pred = diag[c].predict_example(&data.test, k, &p.predict)?;
                row.push(PlotImage::Labels(Raster::new(p.height, p.width, pred.labels)?, LabelPalette::binary()));
            }
            rows.push(row);
        }
        plots::plot_predictions(&out.join("fig3_predictions.png"), &columns, &rows)?;
    }
    Ok(())
}

/// `ε g_t([x, 1], ·)` for every `x`: the learned energy of factor type `t`.
fn energies(model: &StructuredModel, t: usize, xs: &[f64]) -> Result<Vec<Vec<f64>>> {
    let phi: Vec<f64> = xs.iter().flat_map(|&x| [x, 1.0]).collect();
    let c = model.factor_types[t].classes;
    let mut out = vec![0.0; xs.len() * c];
    model.models[t].score(Features::new(&phi, xs.len(), 2)?, &mut out)?;
    let eps = model.epsilon[t];
    Ok(out.chunks(c).map(|r| r.iter().map(|g| eps * g).collect()).collect())
}

/// With `--resume`, refuses to mix cells trained under another preset (image
/// size, learning iterations, prediction budget, oracle budgets) into one table.
fn check_same_preset(out: &Path, p: &Preset) -> Result<()> {
    let path = out.join("run.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    let info: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))?;
    let now = serde_json::to_value(p)?;
    if info.get("preset") != Some(&now) {
        bail!(
            "--resume: {} was written with preset {}, this run's is {}; resume with the same options or use another --out",
            path.display(),
            info.get("preset").map_or("(none)".to_string(), |v| v.to_string()),
            now
        );
    }
    Ok(())
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
pub(crate) fn current_commit() -> Option<String> {
    let run = |args: &[&str]| std::process::Command::new("git").args(args).output().ok().filter(|o| o.status.success());
    let hash = String::from_utf8_lossy(&run(&["rev-parse", "--short", "HEAD"])?.stdout).trim().to_string();
    let dirty = run(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|o| !o.stdout.is_empty());
    Some(if dirty { format!("{hash}-dirty") } else { hash })
}

fn write_run_info(
    out: &Path,
    p: &Preset,
    opts: &Options,
    commit: Option<&str>,
    seconds: f64,
    interrupted: bool,
) -> Result<()> {
    let info = serde_json::json!({
        "command": typed_command(std::env::args()),
        "commit": commit,
        "preset": p,
        "seeds": opts.seeds,
        "first_seed": opts.first_seed,
        "cells": opts.cells,
        "wall_clock_seconds": seconds,
        "threads": rayon::current_num_threads(),
        "interrupted": interrupted,
        // false while the run is going on, and after an interruption or error.
        "finished": !interrupted,
    });
    write_atomic(&out.join("run.json"), serde_json::to_string_pretty(&info)?.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Options {
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
            verbosity: structlearn_cli::Verbosity::Quiet,
        }
    }

    #[test]
    fn resume_refuses_another_preset_and_accepts_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let quick = preset(Scale::Quick);
        // No run.json yet: nothing to compare with.
        check_same_preset(dir.path(), &quick).unwrap();
        write_run_info(dir.path(), &quick, &opts(), Some("abc"), 0.0, true).unwrap();
        check_same_preset(dir.path(), &quick).unwrap();
        let longer = Preset { learning_iterations: quick.learning_iterations + 1, ..quick.clone() };
        let err = check_same_preset(dir.path(), &longer).unwrap_err().to_string();
        assert!(err.contains("--resume") && err.contains("learning_iterations"), "{err}");
        assert!(check_same_preset(dir.path(), &preset(Scale::Full)).is_err());
        let info: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("run.json")).unwrap()).unwrap();
        assert_eq!(info["finished"], false);
        assert_eq!(info["commit"], "abc");
        std::fs::write(dir.path().join("run.json"), "not json").unwrap();
        assert!(check_same_preset(dir.path(), &quick).is_err());
    }

    #[test]
    fn run_json_records_the_typed_command() {
        let args = ["/x/target/debug/xtask", "reproduce", "--quick", "--out", "my dir"].map(String::from);
        assert_eq!(typed_command(args), "cargo xtask reproduce --quick --out 'my dir'");
    }

    #[test]
    fn resuming_a_finished_folder_keeps_its_time() {
        let dir = tempfile::tempdir().unwrap();
        let quick = preset(Scale::Quick);
        write_run_info(dir.path(), &quick, &opts(), Some("abc"), 42.5, false).unwrap();
        assert_eq!(previous_seconds(dir.path()), 42.5);
        assert_eq!(previous_seconds(&dir.path().join("missing")), 0.0);
    }

    #[test]
    fn cell_filters_are_checked() {
        assert_eq!(selected_cells(&[]).unwrap().len(), 25);
        assert_eq!(selected_cells(&["linear/mlp".into()]).unwrap(), vec![("linear".into(), "mlp".into())]);
        assert!(selected_cells(&["linear".into()]).is_err());
        assert!(selected_cells(&["linear/svm".into()]).is_err());
    }
}
