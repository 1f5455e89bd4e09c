//! `cargo xtask bench-scale`: one cell of Algorithm 1 on the Stanford-shaped
//! synthetic data ([`datasets::scene`]), printing per learning iteration the
//! seconds spent in message passing, in each oracle fit and in everything
//! else (objective, θ refresh, bookkeeping), the process's CPU seconds (on a
//! shared machine wall-clock time mostly measures the other processes; CPU
//! seconds / threads is what the iteration takes on idle cores), and the peak
//! resident memory. Figures and how they were taken: docs/guide/performance.md.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use datasets::scene::{SceneConfig, generate};
use structlearn::oracle_config::oracle_from_json;
use structlearn::{Callback, Evaluate, TrainConfig, TrainEvent, Trainer};

use experiments::runner::CLASSES;

/// Options of [`run`].
#[derive(Debug, Clone)]
pub struct Options {
    /// The data set's shape.
    pub scene: SceneConfig,
    /// `UNARY/PAIRWISE` function classes.
    pub cell: String,
    /// Learning iterations to time.
    pub iterations: usize,
    /// [`TrainConfig::message_passing_tolerance`] (`None`: every iteration).
    pub mp_tolerance: Option<f64>,
    /// The linear oracle's warm-start budget (`None`: full fits).
    pub warm_iterations: Option<usize>,
    /// Print the live and peak heap after every step.
    pub trace_heap: bool,
    /// Write the data set (`train.sld`, and `test.sld` when the scene has
    /// test images) into this folder instead of training.
    pub save_data: Option<std::path::PathBuf>,
}

/// Times per step of one learning iteration.
#[derive(Debug, Default, Clone)]
struct IterationTimes {
    message_passing: f64,
    fits: Vec<(String, f64)>,
    steps: f64,
    objective: f64,
    violation: f64,
    cpu_start: f64,
}

/// Runs the benchmark and prints one line per learning iteration.
pub fn run(opts: &Options) -> Result<()> {
    let (unary, pairwise) = opts.cell.split_once('/').context("--cell must be UNARY/PAIRWISE")?;
    for kind in [unary, pairwise] {
        if !CLASSES.contains(&kind) {
            bail!("--cell `{}`: classes are {}", opts.cell, CLASSES.join(", "));
        }
    }
    let s = &opts.scene;
    // Count live heap bytes (no limit) beside the RSS: the RSS also holds what
    // the C allocator keeps after a free.
    structlearn_fuzz::arm(usize::MAX);
    let t0 = Instant::now();
    if let Some(dir) = &opts.save_data {
        let data = generate(s)?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        data.train.save(&dir.join("train.sld"))?;
        if s.test > 0 {
            data.test.save(&dir.join("test.sld"))?;
        }
        println!("wrote {} + {} images to {}", s.train, s.test, dir.display());
        return Ok(());
    }
    let data = generate(&SceneConfig { test: 0, ..s.clone() })?;
    println!(
        "bench-scale: {} images {}×{}, {} labels, unary dim {}, pair dim {}, cell {}, {} threads, \
         message-passing tolerance {:?}, linear warm budget {:?}",
        s.train,
        s.width,
        s.height,
        s.labels,
        s.unary_dim,
        s.pair_dim,
        opts.cell,
        rayon::current_num_threads(),
        opts.mp_tolerance,
        opts.warm_iterations,
    );
    println!("data generated in {:.1} s, peak RSS {}", t0.elapsed().as_secs_f64(), peak_rss());
    // The linear class's warm budget is a setting of this benchmark.
    let oracle = |kind: &str| {
        let mut spec = serde_json::json!({ "kind": kind });
        if kind == oracles::linear::KIND {
            spec["warm_max_iterations"] = serde_json::json!(opts.warm_iterations);
        }
        oracle_from_json(&spec)
    };
    let oracles = vec![("unary".to_string(), oracle(unary)?), ("pairwise".to_string(), oracle(pairwise)?)];
    let config = TrainConfig {
        learning_iterations: opts.iterations,
        message_passing_tolerance: opts.mp_tolerance,
        evaluate: Evaluate::Never,
        evaluate_train: false,
        ..TrainConfig::default()
    };
    let t_setup = Instant::now();
    let mut trainer = Trainer::new(&data.train, oracles, config)?;
    let trace_heap = opts.trace_heap;
    if trace_heap {
        println!("  after set-up: {}", heap());
    }
    println!("trainer set up in {:.1} s, peak RSS {}", t_setup.elapsed().as_secs_f64(), peak_rss());
    let current = Arc::new(Mutex::new((Instant::now(), IterationTimes::default())));
    let shared = current.clone();
    trainer.add_observer(Box::new(Callback(move |event: &TrainEvent<'_>| {
        let mut guard = shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (start, times) = &mut *guard;
        match event {
            TrainEvent::Started { .. } => {
                *start = Instant::now();
                times.cpu_start = cpu_seconds();
            }
            TrainEvent::Step(r) => {
                if trace_heap {
                    let what = format!("{} {}", r.phase, r.factor_type.as_deref().unwrap_or(""));
                    println!("  after {}: {}", what.trim_end(), heap());
                }
                times.steps += r.step_seconds;
                times.objective = r.objective;
                if r.phase == "fit" {
                    times.fits.push((r.factor_type.clone().unwrap_or_default(), r.step_seconds));
                } else {
                    times.message_passing += r.step_seconds;
                    times.violation = r.max_violation.unwrap_or(f64::NAN);
                }
            }
            TrainEvent::IterationFinished { iteration, .. } => {
                let total = start.elapsed().as_secs_f64();
                let fits: Vec<String> = times.fits.iter().map(|(t, s)| format!("fit {t} {s:.2} s")).collect();
                let cpu = cpu_seconds();
                println!(
                    "iteration {iteration}: total {total:.2} s = message passing {:.2} s + {} + rest {:.2} s; \
                     CPU {:.1} s; objective {:.6e}, max violation {:.2e}, peak RSS {}, {}",
                    times.message_passing,
                    fits.join(" + "),
                    total - times.steps,
                    cpu - times.cpu_start,
                    times.objective,
                    times.violation,
                    peak_rss(),
                    heap(),
                );
                *start = Instant::now();
                *times = IterationTimes { cpu_start: cpu, ..IterationTimes::default() };
            }
            _ => {}
        }
        Ok(())
    })));
    trainer.train()?;
    Ok(())
}

/// Heap bytes live now and at most so far (counted by the global allocator).
fn heap() -> String {
    let gib = |b: usize| b as f64 / f64::from(1u32 << 30);
    format!("heap live {:.3} GiB, peak {:.3} GiB", gib(structlearn_fuzz::live()), gib(structlearn_fuzz::usage().peak))
}

/// User + system CPU seconds of this process (Linux `/proc/self/stat`, 10 ms
/// ticks), NaN elsewhere.
pub(crate) fn cpu_seconds() -> f64 {
    let ticks = || -> Option<u64> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
        Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
    };
    ticks().map_or(f64::NAN, |t| t as f64 / 100.0)
}

/// The process's peak resident set size (`VmHWM` of `/proc/self/status`), or
/// "n/a" where that file does not exist.
fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                let kib: f64 = l.split_whitespace().nth(1)?.parse().ok()?;
                Some(format!("{:.2} GiB", kib / (1024.0 * 1024.0)))
            })
        })
        .unwrap_or_else(|| "n/a".to_string())
}
