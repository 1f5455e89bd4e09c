//! `cargo xtask reproduce hazan-urtasun`: Hazan & Urtasun (NIPS 2010) §6 on
//! generated noisy binary shapes (docs/MATH.md §6.4), and the first
//! side-by-side wall-clock measurement of their primal-dual learner against
//! Algorithm 1 with the linear oracle.
//!
//! **Tables.** For each of the four shapes, both noise models, tied and untied
//! parameters and `ε_train ∈ {1, 0.5, 0.1, 0.01}`, the `hazan-urtasun` learner
//! trains on 40 corruptions (a fixed number of rounds) with Hazan & Urtasun's
//! ℓ2² regulariser (`p = 2`; see `Preset::c`); the 10 test
//! corruptions are then predicted with every `ε_pred ∈ {1, 0.5, 0.1, 0.01}`
//! (energies `θ = ε_train g` fixed, inference entropy weight `ε_pred`) and the
//! pixel error is recorded.
//!
//! **Unary check** (`--cell unary`, [`crate::hu_unary`]): why tied models
//! with bimodal noise fail — per-pixel rules of `x`, Algorithm 1 with `[x, 1]`
//! and with one-hot bins of `x`, on the same data.
//!
//! **Wall clock.** On one shape (disk, Gaussian noise, tied), for each `ε` of
//! the preset, both learners train on the same data with the same `ε` for the
//! same budget of *training* seconds (the sum of the steps' times: message
//! passing and fits / gradient steps; the objective and test-error
//! bookkeeping are not counted). The objective `R` after every step and the
//! test error (evaluated every few training seconds, warm-started messages)
//! are plotted against training seconds, and the times where the curves
//! cross are written to `crossings.md`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Result, bail};
use datasets::shapes::{Noise, Shape, ShapesConfig, Tying, generate, oracle_specs};
use smoothed_inference::{InferenceProblem, Messages, Workspace, decode};
use structlearn::files::write_atomic;
use structlearn::{
    Callback, Dataset, Evaluate, LearnError, LearnerKind, PredictOptions, StructuredModel, TrainConfig, TrainEvent,
    build_learner,
};

use crate::hu_unary::UnaryCheck;
use crate::runner::{Scale, chapter_config, current_commit, mean_std, with_full_cold_fits};
use reporting::plots::{Series, plot_lines};

/// The entropy weights of the tables (training and prediction).
pub const EPSILONS: [f64; 4] = [1.0, 0.5, 0.1, 0.01];

/// Options of [`reproduce`].
#[derive(Debug, Clone)]
pub struct Options {
    /// Size of the run.
    pub scale: Scale,
    /// Output folder.
    pub out: Option<PathBuf>,
    /// Seed of the data.
    pub seed: u64,
    /// Rounds of the table runs (overrides the preset).
    pub iterations: Option<usize>,
    /// Parts to run: `clock`, `tables` (empty: both).
    pub parts: Vec<String>,
}

#[derive(Debug, Clone, serde::Serialize)]
struct Preset {
    name: &'static str,
    size: usize,
    /// Training corruptions per shape in the wall-clock comparison.
    train: usize,
    /// Training corruptions per shape in the tables.
    table_train: usize,
    test: usize,
    shapes: Vec<Shape>,
    /// Rounds of the `hazan-urtasun` learner in the table runs.
    rounds: usize,
    /// `C` of Hazan & Urtasun's regulariser `(C/2)‖θ‖²` on the energy
    /// parameters (their Eq. 3 with `p = 2`; the paper does not print its
    /// value, 1 is the neutral choice) in the table runs. Our energies are
    /// `θ = ε W φ` and the learner's penalty of type `t` is `ε (λ/2)‖W‖²`
    /// (docs/MATH.md §6.4), so `(C/2)‖θ‖² = (C ε²/2)‖W‖²` is the oracle ridge
    /// `λ = C ε`. The wall-clock comparison is unpenalised (`λ = 0`).
    c: f64,
    /// Sizes of the `unary` part ([`crate::hu_unary`]).
    unary: UnaryCheck,
    /// Message-passing iterations per round.
    round_message_passing: usize,
    /// Prediction of the tables (from zero messages).
    predict: PredictOptions,
    /// The `ε` of the wall-clock comparison.
    clock_epsilons: Vec<f64>,
    /// Training seconds per learner and `ε` in the wall-clock comparison.
    clock_budget: f64,
}

fn preset(scale: Scale) -> Preset {
    let default = Preset {
        name: "default",
        size: 64,
        train: 40,
        // Scaled down from the paper's 40 so that the 64 table trainings fit a
        // shared 2-core machine in about half an hour; `--full` uses 40.
        table_train: 10,
        test: 10,
        shapes: Shape::ALL.to_vec(),
        rounds: 10,
        c: 1.0,
        unary: UnaryCheck { train: 40, algorithm1_iterations: 4, hazan_urtasun_rounds: 40 },
        round_message_passing: 2,
        predict: PredictOptions { iterations: 50, tolerance: Some(1e-4) },
        clock_epsilons: vec![1.0, 0.1],
        clock_budget: 60.0,
    };
    match scale {
        Scale::Quick => Preset {
            name: "quick",
            size: 32,
            train: 10,
            table_train: 10,
            test: 4,
            shapes: vec![Shape::Disk, Shape::Cross],
            rounds: 10,
            unary: UnaryCheck { train: 10, algorithm1_iterations: 2, hazan_urtasun_rounds: 10 },
            clock_budget: 8.0,
            ..default
        },
        Scale::Default => default,
        Scale::Full => Preset { name: "full", table_train: 40, rounds: 40, clock_budget: 300.0, ..default },
    }
}

/// One table cell: a trained model predicted at one `ε_pred`.
#[derive(Debug, Clone)]
struct Cell {
    shape: Shape,
    noise: Noise,
    tying: Tying,
    eps_train: f64,
    eps_pred: f64,
    test_error: f64,
    objective: f64,
    train_seconds: f64,
}

/// The oracle specifications with the ridge `"l2": l2` added (docs/MATH.md §6.4).
fn with_ridge(mut specs: Vec<(String, serde_json::Value)>, l2: f64) -> Vec<(String, serde_json::Value)> {
    for (_, spec) in &mut specs {
        spec["l2"] = serde_json::json!(l2);
    }
    specs
}

/// Pixel error of `model` on `data` with inference at entropy weight `eps`
/// (energies unchanged), from zero messages.
pub(crate) fn error_at(model: &StructuredModel, data: &Dataset, eps: f64, opts: &PredictOptions) -> Result<f64> {
    use rayon::prelude::*;
    let counts: Vec<(usize, usize)> = (0..data.len())
        .into_par_iter()
        .map(|k| -> Result<(usize, usize)> {
            let g = &data.examples()[k].graph();
            let theta = model.energies(data, k)?;
            let problem = InferenceProblem::uniform(g, &theta, eps)?;
            let mut m = Messages::zeros(g);
            let run = opts.run_options();
            problem.run(&mut m, &run, &mut Workspace::new(g))?;
            let mut beliefs = vec![0.0; g.total_configs()];
            problem.beliefs(&m, &mut beliefs);
            let y = decode(g, &beliefs)?;
            let truth = data.labels(k)?;
            Ok((y.iter().zip(truth).filter(|(a, b)| a != b).count(), truth.len()))
        })
        .collect::<Result<_>>()?;
    let (w, t) = counts.iter().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    Ok(w as f64 / t as f64)
}

/// Runs the experiment and writes everything into the output folder.
pub fn reproduce(opts: &Options) -> Result<()> {
    let mut p = preset(opts.scale);
    if let Some(r) = opts.iterations {
        if r == 0 {
            bail!("--iterations must be at least 1");
        }
        p.rounds = r;
    }
    let out = opts.out.clone().unwrap_or_else(|| {
        PathBuf::from(match opts.scale {
            Scale::Default => "target/reproduce/hazan-urtasun".to_string(),
            _ => format!("target/reproduce/hazan-urtasun-{}", p.name),
        })
    });
    crate::runner::create_folder(&out)?;
    let commit = current_commit();
    let start = Instant::now();
    let cfg = ShapesConfig { size: p.size, train: p.train, test: p.test, seed: opts.seed };
    eprintln!(
        "hazan-urtasun ({}): {} shapes of {}×{}, {} train ({} in the wall-clock comparison) / {} test corruptions, {} rounds → {}",
        p.name,
        p.shapes.len(),
        p.size,
        p.size,
        p.table_train,
        p.train,
        p.test,
        p.rounds,
        out.display()
    );

    for part in &opts.parts {
        if !["clock", "tables", "unary"].contains(&part.as_str()) {
            bail!("--cell {part}: hazan-urtasun has the parts `clock`, `tables` and `unary`");
        }
    }
    let run = |part: &str| opts.parts.is_empty() || opts.parts.iter().any(|x| x == part);
    if run("unary") {
        crate::hu_unary::check(&out, &cfg, &p.shapes, &p.unary, &p.predict)?;
    }
    let clock = if run("clock") { wall_clock(&out, &p, &cfg)? } else { serde_json::Value::Null };
    let clock_seconds = start.elapsed().as_secs_f64();
    let cfg = ShapesConfig { train: p.table_train, ..cfg };
    let shapes = if run("tables") { p.shapes.clone() } else { Vec::new() };

    let mut cells = Vec::new();
    for &shape in &shapes {
        for noise in Noise::ALL {
            for tying in Tying::ALL {
                let data = generate(&cfg, shape, noise, tying)?;
                for &eps_train in &EPSILONS {
                    let specs = with_ridge(with_full_cold_fits(oracle_specs(tying, p.size)), p.c * eps_train);
                    let t0 = Instant::now();
                    let config = TrainConfig {
                        epsilon: eps_train,
                        learning_iterations: p.rounds,
                        message_passing_iterations: p.round_message_passing,
                        evaluate: Evaluate::Never,
                        seed: opts.seed,
                        ..chapter_config()
                    };
                    let outcome = build_learner(LearnerKind::HazanUrtasun, &data.train, &specs, config)?.train()?;
                    let train_seconds = t0.elapsed().as_secs_f64();
                    let objective = outcome.history.last().map_or(f64::NAN, |r| r.objective);
                    for &eps_pred in &EPSILONS {
                        let test_error = error_at(&outcome.model, &data.test, eps_pred, &p.predict)?;
                        cells.push(Cell {
                            shape,
                            noise,
                            tying,
                            eps_train,
                            eps_pred,
                            test_error,
                            objective,
                            train_seconds,
                        });
                    }
                    let own = cells.last().map_or(f64::NAN, |_| {
                        cells.iter().rev().find(|c| c.eps_pred == eps_train).map_or(f64::NAN, |c| c.test_error)
                    });
                    // Written after every training, so an interrupted run keeps its finished cells.
                    write_tables(&out, &p, &cells)?;
                    eprintln!(
                        "  {} {} {} ε = {eps_train}: R = {objective:.4e}, test error {own:.4} (train {train_seconds:.1} s, total {:.0} s)",
                        shape.name(),
                        noise.name(),
                        tying.name(),
                        start.elapsed().as_secs_f64()
                    );
                }
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    if run("tables") {
        write_tables(&out, &p, &cells)?;
    }
    let info = serde_json::json!({
        "experiment": "hazan-urtasun",
        "parts": if opts.parts.is_empty() { vec!["unary".to_string(), "clock".to_string(), "tables".to_string()] } else { opts.parts.clone() },
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "commit": commit,
        "preset": p,
        "seed": opts.seed,
        "wall_clock_seconds": seconds,
        "wall_clock_comparison_seconds": clock_seconds,
        "threads": rayon::current_num_threads(),
        "crossings": clock,
    });
    let name =
        if opts.parts.is_empty() { "run.json".to_string() } else { format!("run-{}.json", opts.parts.join("-")) };
    write_atomic(&out.join(name), serde_json::to_string_pretty(&info)?.as_bytes())?;
    eprintln!("done in {seconds:.0} s: {}", out.display());
    Ok(())
}

fn write_tables(out: &Path, p: &Preset, cells: &[Cell]) -> Result<()> {
    let mut csv = String::from("shape,noise,tying,eps_train,eps_pred,test_error,objective,train_seconds\n");
    for c in cells {
        writeln!(
            csv,
            "{},{},{},{},{},{:.6},{:.6e},{:.3}",
            c.shape.name(),
            c.noise.name(),
            c.tying.name(),
            c.eps_train,
            c.eps_pred,
            c.test_error,
            c.objective,
            c.train_seconds
        )?;
    }
    write_atomic(&out.join("results.csv"), csv.as_bytes())?;
    let mean = |f: &dyn Fn(&Cell) -> bool| {
        let v: Vec<f64> = cells.iter().filter(|c| f(c)).map(|c| c.test_error).collect();
        mean_std(&v)
    };
    let mut md = format!(
        "Test pixel error (mean ± std over {} shapes), predicting with the training ε:\n\n| noise | tying | {} |\n|---|---|{}\n",
        p.shapes.len(),
        EPSILONS.iter().map(|e| format!("ε = {e}")).collect::<Vec<_>>().join(" | "),
        "---|".repeat(EPSILONS.len())
    );
    for noise in Noise::ALL {
        for tying in Tying::ALL {
            let row: Vec<String> = EPSILONS
                .iter()
                .map(|&e| {
                    let (m, s) =
                        mean(&|c: &Cell| c.noise == noise && c.tying == tying && c.eps_train == e && c.eps_pred == e);
                    format!("{m:.4} ± {s:.4}")
                })
                .collect();
            writeln!(md, "| {} | {} | {} |", noise.name(), tying.name(), row.join(" | "))?;
        }
    }
    for noise in Noise::ALL {
        for tying in Tying::ALL {
            writeln!(
                md,
                "\n{} noise, {}: test error by training ε (rows) and prediction ε (columns), mean over shapes\n\n| ε_train \\ ε_pred | {} |\n|---|{}",
                noise.name(),
                tying.name(),
                EPSILONS.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(" | "),
                "---|".repeat(EPSILONS.len())
            )?;
            for &et in &EPSILONS {
                let row: Vec<String> = EPSILONS
                    .iter()
                    .map(|&ep| {
                        let (m, _) = mean(&|c: &Cell| {
                            c.noise == noise && c.tying == tying && c.eps_train == et && c.eps_pred == ep
                        });
                        format!("{m:.4}")
                    })
                    .collect();
                writeln!(md, "| {et} | {} |", row.join(" | "))?;
            }
        }
    }
    writeln!(
        md,
        "\nPer shape (predicting with the training ε):\n\n| shape | noise | tying | {} |\n|---|---|---|{}",
        EPSILONS.iter().map(|e| format!("ε = {e}")).collect::<Vec<_>>().join(" | "),
        "---|".repeat(EPSILONS.len())
    )?;
    for &shape in &p.shapes {
        for noise in Noise::ALL {
            for tying in Tying::ALL {
                let row: Vec<String> = EPSILONS
                    .iter()
                    .map(|&e| {
                        let (m, _) = mean(&|c: &Cell| {
                            c.shape == shape
                                && c.noise == noise
                                && c.tying == tying
                                && c.eps_train == e
                                && c.eps_pred == e
                        });
                        format!("{m:.4}")
                    })
                    .collect();
                writeln!(md, "| {} | {} | {} | {} |", shape.name(), noise.name(), tying.name(), row.join(" | "))?;
            }
        }
    }
    write_atomic(&out.join("table.md"), md.as_bytes())?;
    Ok(())
}

/// What the wall-clock observer collects.
#[derive(Debug, Default, Clone)]
struct ClockCurve {
    /// `(training seconds, R)` after every step.
    objective: Vec<(f64, f64)>,
    /// `(training seconds, test error)` at evaluations.
    error: Vec<(f64, f64)>,
}

/// Trains `kind` for `budget` training seconds, recording its curves.
fn clock_run(
    kind: LearnerKind,
    train: &Dataset,
    test: &Dataset,
    specs: &[(String, serde_json::Value)],
    config: TrainConfig,
    budget: f64,
    predict: PredictOptions,
) -> Result<ClockCurve> {
    let curve = Arc::new(Mutex::new(ClockCurve::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut learner = build_learner(kind, train, specs, config)?;
    let (c, s) = (curve.clone(), stop.clone());
    let mut seconds = 0.0;
    let mut last_eval = f64::NEG_INFINITY;
    let mut messages: Vec<Messages> = test.examples().iter().map(|e| Messages::zeros(e.graph())).collect();
    let every = budget / 40.0;
    learner.add_observer(Box::new(Callback(move |event: &TrainEvent<'_>| -> Result<(), LearnError> {
        let mut curve = c.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match event {
            TrainEvent::Step(r) => {
                seconds += r.step_seconds;
                curve.objective.push((seconds, r.objective));
            }
            TrainEvent::IterationFinished { model, .. } => {
                if seconds - last_eval >= every || seconds >= budget {
                    last_eval = seconds;
                    let e = model.error_rate_from(test, &predict, &mut messages)?;
                    curve.error.push((seconds, e));
                }
                if seconds >= budget {
                    s.store(true, Ordering::SeqCst);
                }
            }
            _ => {}
        }
        Ok(())
    })));
    learner.set_stop_flag(stop);
    match learner.train() {
        Ok(_) | Err(LearnError::Interrupted { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let c = curve.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    Ok(c)
}

/// Times where the step functions `a(t)` and `b(t)` (value of the last point
/// at or before `t`) change order, over the times both are defined.
fn crossings(a: &[(f64, f64)], b: &[(f64, f64)]) -> Vec<(f64, &'static str)> {
    let at = |c: &[(f64, f64)], t: f64| c.iter().take_while(|p| p.0 <= t).last().map(|p| p.1);
    let mut times: Vec<f64> = a.iter().chain(b).map(|p| p.0).collect();
    times.sort_by(f64::total_cmp);
    let mut out = Vec::new();
    let mut last: Option<std::cmp::Ordering> = None;
    for t in times {
        let (Some(x), Some(y)) = (at(a, t), at(b, t)) else { continue };
        let ord = x.total_cmp(&y);
        if ord == std::cmp::Ordering::Equal {
            continue;
        }
        if let Some(prev) = last
            && prev != ord
        {
            out.push((t, if ord == std::cmp::Ordering::Less { "H&U below" } else { "Algorithm 1 below" }));
        }
        last = Some(ord);
    }
    out
}

/// The wall-clock comparison (module docs); returns the crossings as JSON.
fn wall_clock(out: &Path, p: &Preset, cfg: &ShapesConfig) -> Result<serde_json::Value> {
    let data = generate(cfg, Shape::Disk, Noise::Gaussian, Tying::Tied)?;
    let specs = with_full_cold_fits(oracle_specs(Tying::Tied, p.size));
    let predict = PredictOptions { iterations: 10, tolerance: Some(1e-4) };
    let mut csv = String::from("epsilon,learner,curve,train_seconds,value\n");
    let mut md = String::from(
        "Crossing points of the wall-clock comparison (disk, Gaussian noise, tied; training seconds, step functions):\n\n",
    );
    let mut json = Vec::new();
    for &eps in &p.clock_epsilons {
        let base = TrainConfig {
            epsilon: eps,
            learning_iterations: usize::MAX / 2,
            evaluate: Evaluate::Never,
            ..chapter_config()
        };
        let hu_config = TrainConfig { message_passing_iterations: p.round_message_passing, ..base.clone() };
        let hu =
            clock_run(LearnerKind::HazanUrtasun, &data.train, &data.test, &specs, hu_config, p.clock_budget, predict)?;
        let a1 = clock_run(LearnerKind::Algorithm1, &data.train, &data.test, &specs, base, p.clock_budget, predict)?;
        for (name, c) in [("hazan-urtasun", &hu), ("algorithm1", &a1)] {
            for (curve, pts) in [("objective", &c.objective), ("test_error", &c.error)] {
                for (t, v) in pts {
                    writeln!(csv, "{eps},{name},{curve},{t:.4},{v:.8e}")?;
                }
            }
        }
        let obj = crossings(&hu.objective, &a1.objective);
        let err = crossings(&hu.error, &a1.error);
        let fmt = |c: &[(f64, &str)]| {
            if c.is_empty() {
                "none".to_string()
            } else {
                c.iter().map(|(t, w)| format!("{t:.2} s ({w} after)")).collect::<Vec<_>>().join(", ")
            }
        };
        let last = |c: &[(f64, f64)]| c.last().map_or(f64::NAN, |p| p.1);
        writeln!(
            md,
            "* ε = {eps}: objective crossings: {}; test-error crossings: {}. At {:.0} s: R = {:.4e} (H&U) vs {:.4e} (Algorithm 1); test error {:.4} vs {:.4}.",
            fmt(&obj),
            fmt(&err),
            p.clock_budget,
            last(&hu.objective),
            last(&a1.objective),
            last(&hu.error),
            last(&a1.error)
        )?;
        json.push(serde_json::json!({
            "epsilon": eps,
            "objective": obj.iter().map(|(t, w)| serde_json::json!({"seconds": t, "after": w})).collect::<Vec<_>>(),
            "test_error": err.iter().map(|(t, w)| serde_json::json!({"seconds": t, "after": w})).collect::<Vec<_>>(),
        }));
        let series = |a: &[(f64, f64)], b: &[(f64, f64)]| {
            vec![
                Series { name: "Hazan–Urtasun".into(), points: a.to_vec(), dashed: false },
                Series { name: "Algorithm 1 (linear oracle)".into(), points: b.to_vec(), dashed: true },
            ]
        };
        plot_lines(
            &out.join(format!("clock-objective-eps-{eps}.png")),
            &format!("Training objective R vs training time (ε = {eps})"),
            ("training seconds", "R"),
            (false, true),
            &series(&hu.objective, &a1.objective),
        )?;
        plot_lines(
            &out.join(format!("clock-test-error-eps-{eps}.png")),
            &format!("Test pixel error vs training time (ε = {eps})"),
            ("training seconds", "test error"),
            (false, false),
            &series(&hu.error, &a1.error),
        )?;
        eprintln!("  wall clock ε = {eps}: {}", md.lines().last().unwrap_or_default());
    }
    write_atomic(&out.join("clock.csv"), csv.as_bytes())?;
    write_atomic(&out.join("crossings.md"), md.as_bytes())?;
    Ok(serde_json::Value::Array(json))
}
