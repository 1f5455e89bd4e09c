//! `cargo xtask reproduce punyakanok`: Punyakanok, Roth, Yih & Zimak (IJCAI
//! 2005) Fig. 2 — accuracy against the number of training examples for
//! `κ ∈ {0, 0.1, 1}` on their synthetic constrained-output data
//! (docs/MATH.md §6.5), for their three strategies and our two smoothed ones:
//!
//! | strategy | training | prediction |
//! |---|---|---|
//! | LO | local perceptrons (`perceptron-local`) | each output alone |
//! | L+I | local perceptrons | exact constrained MAP |
//! | IBT | structured perceptron with constrained MAP (`perceptron-global`) | exact constrained MAP |
//! | smoothed L+I | piecewise logistic (`piecewise`: Algorithm 1's first fit) | exact constrained MAP |
//! | smoothed IBT | Algorithm 1 (`algorithm1`, linear oracle, the constraint region in message passing) | exact constrained MAP |
//!
//! Accuracy is the fraction of correctly predicted outputs over the test set
//! (`results.csv` also has whole-labeling accuracy). Every trial draws a new
//! hypothesis, constraint set and data (seed = first seed + trial).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use datasets::punyakanok::{PunyakanokConfig, PunyakanokData, generate};
use rayon::prelude::*;
use serde::Serialize;
use structlearn::exact::{local_labeling, map_labeling};
use structlearn::files::write_atomic;
use structlearn::{Dataset, Evaluate, LearnerKind, StructuredModel, TrainConfig, build_learner};

use crate::runner::{CHAPTER_MESSAGE_PASSING, Scale, current_commit, mean_std};
use reporting::plots::{Series, plot_lines};

/// The strategies, in plotting order.
pub const STRATEGIES: [&str; 5] = ["LO", "L+I", "IBT", "smoothed L+I", "smoothed IBT"];

/// The hardness levels of the paper's Fig. 2 (a)–(c).
pub const KAPPAS: [f64; 3] = [0.0, 0.1, 1.0];

/// Options of [`reproduce`].
#[derive(Debug, Clone)]
pub struct Options {
    /// Size of the run.
    pub scale: Scale,
    /// Output folder.
    pub out: Option<PathBuf>,
    /// Trials (default: the preset's).
    pub trials: Option<usize>,
    /// Seed of the first trial.
    pub first_seed: u64,
}

#[derive(Debug, Clone, Serialize)]
struct Preset {
    name: &'static str,
    sizes: Vec<usize>,
    trials: usize,
    test: usize,
    dim: usize,
    /// Perceptron epochs at most (the paper: 100).
    epochs: usize,
    /// Learning iterations of smoothed IBT (Algorithm 1).
    smoothed_iterations: usize,
    /// Entropy weight of the smoothed learners.
    epsilon: f64,
}

fn preset(scale: Scale) -> Preset {
    let default = Preset {
        name: "default",
        sizes: vec![10, 20, 50, 100, 200, 500, 1000],
        trials: 10,
        test: 1000,
        dim: 10,
        epochs: 100,
        smoothed_iterations: 10,
        epsilon: 0.1,
    };
    match scale {
        Scale::Quick => Preset { name: "quick", sizes: vec![10, 50, 200], trials: 3, test: 300, ..default },
        Scale::Default => default,
        Scale::Full => Preset { name: "full", sizes: vec![10, 20, 50, 100, 200, 500, 1000, 2000, 5000], ..default },
    }
}

/// One (κ, trial, n, strategy) result.
#[derive(Debug, Clone)]
struct Point {
    kappa: f64,
    trial: usize,
    n: usize,
    strategy: &'static str,
    accuracy: f64,
    labeling_accuracy: f64,
    seconds: f64,
}

/// `(output accuracy, labeling accuracy)` of `decode` on the test set.
fn accuracy(test: &Dataset, decode: impl Fn(usize) -> Result<Vec<usize>>) -> Result<(f64, f64)> {
    let (mut right, mut total, mut whole) = (0, 0, 0);
    for k in 0..test.len() {
        let truth = test.labels(k)?;
        let y = decode(k)?;
        let r = y.iter().zip(truth).filter(|(a, b)| a == b).count();
        right += r;
        total += truth.len();
        whole += usize::from(r == truth.len());
    }
    Ok((right as f64 / total as f64, whole as f64 / test.len() as f64))
}

fn map_decoder(model: &StructuredModel, test: &Dataset) -> impl Fn(usize) -> Result<Vec<usize>> {
    move |k| {
        let theta = model.energies(test, k)?;
        Ok(map_labeling(test.examples()[k].graph(), &theta, k)?)
    }
}

/// Trains every strategy on the first `n` training examples of `data`.
fn run_size(p: &Preset, data: &PunyakanokData, kappa: f64, trial: usize, n: usize) -> Result<Vec<Point>> {
    let (types, mut examples) = data.train.clone().into_parts();
    examples.truncate(n);
    let train = Dataset::new(types, examples)?;
    let test = &data.test;
    let specs = crate::runner::with_full_cold_fits(vec![
        ("unary".to_string(), serde_json::json!({"kind": "linear"})),
        ("constraint".to_string(), data.constraint_oracle()),
    ]);
    let train_with = |kind: LearnerKind, iterations: usize| -> Result<(StructuredModel, f64)> {
        let t0 = Instant::now();
        let mut config =
            TrainConfig { evaluate: Evaluate::Never, learning_iterations: iterations, ..TrainConfig::default() };
        if kind.reads("epsilon") {
            config.epsilon = p.epsilon;
        }
        if kind.reads("message_passing_iterations") {
            config.message_passing_iterations = CHAPTER_MESSAGE_PASSING;
        }
        let model = build_learner(kind, &train, &specs, config)?.train()?.model;
        Ok((model, t0.elapsed().as_secs_f64()))
    };
    let point = |strategy, (accuracy, labeling_accuracy), seconds| Point {
        kappa,
        trial,
        n,
        strategy,
        accuracy,
        labeling_accuracy,
        seconds,
    };
    let mut out = Vec::new();
    let (local, s) = train_with(LearnerKind::PerceptronLocal, p.epochs)?;
    let local_decode = |k: usize| -> Result<Vec<usize>> {
        let theta = local.energies(test, k)?;
        Ok(local_labeling(test.examples()[k].graph(), &theta)?)
    };
    out.push(point("LO", accuracy(test, local_decode)?, s));
    out.push(point("L+I", accuracy(test, map_decoder(&local, test))?, s));
    let (global, s) = train_with(LearnerKind::PerceptronGlobal, p.epochs)?;
    out.push(point("IBT", accuracy(test, map_decoder(&global, test))?, s));
    let (piecewise, s) = train_with(LearnerKind::Piecewise, 1)?;
    out.push(point("smoothed L+I", accuracy(test, map_decoder(&piecewise, test))?, s));
    let (a1, s) = train_with(LearnerKind::Algorithm1, p.smoothed_iterations)?;
    out.push(point("smoothed IBT", accuracy(test, map_decoder(&a1, test))?, s));
    Ok(out)
}

/// Runs the experiment and writes everything into the output folder.
pub fn reproduce(opts: &Options) -> Result<()> {
    let mut p = preset(opts.scale);
    if let Some(t) = opts.trials {
        if t == 0 {
            bail!("--seeds (trials) must be at least 1");
        }
        p.trials = t;
    }
    let out = opts.out.clone().unwrap_or_else(|| {
        PathBuf::from(match opts.scale {
            Scale::Default => "target/reproduce/punyakanok".to_string(),
            _ => format!("target/reproduce/punyakanok-{}", p.name),
        })
    });
    crate::runner::create_folder(&out)?;
    let commit = current_commit();
    let start = Instant::now();
    eprintln!(
        "punyakanok ({}): κ ∈ {KAPPAS:?}, sizes {:?}, {} trials, {} test examples → {}",
        p.name,
        p.sizes,
        p.trials,
        p.test,
        out.display()
    );
    let max_n = *p.sizes.iter().max().context("no training sizes")?;
    let jobs: Vec<(f64, usize)> = KAPPAS.iter().flat_map(|&k| (0..p.trials).map(move |t| (k, t))).collect();
    let results: Vec<Vec<Point>> = jobs
        .par_iter()
        .with_max_len(1)
        .map(|&(kappa, trial)| -> Result<Vec<Point>> {
            let cfg = PunyakanokConfig {
                dim: p.dim,
                kappa,
                train: max_n,
                test: p.test,
                seed: opts.first_seed + trial as u64,
                ..PunyakanokConfig::default()
            };
            let data = generate(&cfg)?;
            let mut points = Vec::new();
            for &n in &p.sizes {
                points.extend(run_size(&p, &data, kappa, trial, n)?);
            }
            eprintln!("  κ = {kappa}, trial {trial} done ({:.0} s)", start.elapsed().as_secs_f64());
            Ok(points)
        })
        .collect::<Result<_>>()?;
    let points: Vec<Point> = results.into_iter().flatten().collect();
    let seconds = start.elapsed().as_secs_f64();
    write_outputs(&out, &p, &points)?;
    let info = serde_json::json!({
        "experiment": "punyakanok",
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "commit": commit,
        "preset": p,
        "first_seed": opts.first_seed,
        "wall_clock_seconds": seconds,
        "threads": rayon::current_num_threads(),
    });
    write_atomic(&out.join("run.json"), serde_json::to_string_pretty(&info)?.as_bytes())?;
    eprintln!("done in {seconds:.0} s: {}", out.display());
    Ok(())
}

fn write_outputs(out: &std::path::Path, p: &Preset, points: &[Point]) -> Result<()> {
    let mut raw = String::from("kappa,trial,n,strategy,accuracy,labeling_accuracy,train_seconds\n");
    for q in points {
        writeln!(
            raw,
            "{},{},{},{},{:.6},{:.6},{:.4}",
            q.kappa, q.trial, q.n, q.strategy, q.accuracy, q.labeling_accuracy, q.seconds
        )?;
    }
    write_atomic(&out.join("raw.csv"), raw.as_bytes())?;
    let mut csv = String::from(
        "kappa,n,strategy,accuracy_mean,accuracy_std,labeling_accuracy_mean,labeling_accuracy_std,trials\n",
    );
    let mut md = String::new();
    for &kappa in &KAPPAS {
        writeln!(md, "\n### κ = {kappa}\n")?;
        writeln!(md, "| n | {} |", STRATEGIES.join(" | "))?;
        writeln!(md, "|---|{}", "---|".repeat(STRATEGIES.len()))?;
        let mut series: Vec<Series> = Vec::new();
        for (si, &s) in STRATEGIES.iter().enumerate() {
            let mut pts = Vec::new();
            for &n in &p.sizes {
                let sel: Vec<&Point> =
                    points.iter().filter(|q| q.kappa == kappa && q.n == n && q.strategy == s).collect();
                if sel.is_empty() {
                    continue;
                }
                let (m, sd) = mean_std(&sel.iter().map(|q| q.accuracy).collect::<Vec<_>>());
                let (lm, lsd) = mean_std(&sel.iter().map(|q| q.labeling_accuracy).collect::<Vec<_>>());
                writeln!(csv, "{kappa},{n},{s},{m:.6},{sd:.6},{lm:.6},{lsd:.6},{}", sel.len())?;
                pts.push((n as f64, m));
            }
            series.push(Series { name: s.to_string(), points: pts, dashed: si >= 3 });
        }
        for &n in &p.sizes {
            let cells: Vec<String> = STRATEGIES
                .iter()
                .map(|&s| {
                    let v: Vec<f64> = points
                        .iter()
                        .filter(|q| q.kappa == kappa && q.n == n && q.strategy == s)
                        .map(|q| q.accuracy)
                        .collect();
                    let (m, sd) = mean_std(&v);
                    format!("{m:.3} ± {sd:.3}")
                })
                .collect();
            writeln!(md, "| {n} | {} |", cells.join(" | "))?;
        }
        let name = format!("accuracy-kappa-{kappa}.png");
        plot_lines(
            &out.join(&name),
            &format!("Punyakanok et al. synthetic data, κ = {kappa} (mean of {} trials)", p.trials),
            ("training examples", "accuracy (outputs)"),
            (true, false),
            &series,
        )?;
    }
    write_atomic(&out.join("results.csv"), csv.as_bytes())?;
    write_atomic(&out.join("table.md"), md.as_bytes())?;
    Ok(())
}
