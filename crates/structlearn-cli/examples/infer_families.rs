//! Measures `structlearn infer`'s labellings on seeded model families
//! (`datasets::uai_families`): pedigrees with deterministic inheritance,
//! pairwise and ternary CSPs with a planted solution, frustrated grids.
//!
//! For every model it runs the given `structlearn` binary once at the default
//! ε and once with `--anneal`, and compares three labellings:
//!
//! * **argmax**: each variable's most believed label on its own (what
//!   `structlearn infer` reported before the decoding module: `decode`), read
//!   from the default run's beliefs;
//! * **feasible**: the default run's `labels` (`decode_feasible` + ICM);
//! * **anneal**: the `--anneal` run's `labels`.
//!
//! ```sh
//! cargo build --release -p structlearn-cli --example infer_families
//! target/release/examples/infer_families --bin target/release/structlearn --out /tmp/families --seed 0 --count 10
//! ```
//!
//! It writes the models (`DIR/FAMILY-SEED.uai`) and the runs' JSON next to
//! them, and prints a Markdown table: per family and labelling, how many
//! labellings have probability 0 (`θ = −∞`), how many models got none (the
//! search gave up), the mean `θ(ŷ)` and certified gap `bound − θ(ŷ)` over the
//! models where it is feasible, the mean `θ(ŷ)` over the models where all
//! three are (the same models for every row), and the mean wall-clock time of
//! the run (argmax and feasible read the same default run).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Parser;
use datasets::uai_families::{CspConfig, GridConfig, PedigreeConfig, csp, frustrated_grid, pedigree};
use factor_graph::UaiModel;

#[derive(Parser)]
struct Args {
    /// The `structlearn` binary to measure.
    #[arg(long)]
    bin: PathBuf,
    /// Folder for the models and the runs' JSON (created).
    #[arg(long)]
    out: PathBuf,
    /// First seed; model `i` of a family uses `seed + i`.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Models per family.
    #[arg(long, default_value_t = 10)]
    count: u64,
    /// An extra argument for the `--anneal` runs only (repeatable, e.g.
    /// `--anneal-arg=--eps-min --anneal-arg=0.001`).
    #[arg(long = "anneal-arg", allow_hyphen_values = true)]
    anneal_args: Vec<String>,
    /// Extra arguments for every `infer` run (e.g. `-- --eps 0.1`).
    #[arg(last = true)]
    infer_args: Vec<String>,
}

/// One labelling's figures on one model.
#[derive(Default, Clone, Copy)]
struct Figures {
    score: f64,
    bound: f64,
}

fn run_infer(
    bin: &Path,
    model: &Path,
    json: &Path,
    extra: &[String],
    anneal: Option<&[String]>,
) -> Result<(serde_json::Value, f64)> {
    let mut cmd = Command::new(bin);
    cmd.arg("infer").arg(model).arg("--output").arg(json).arg("--quiet").args(extra);
    if let Some(anneal_args) = anneal {
        cmd.arg("--anneal").args(anneal_args);
    }
    let start = Instant::now();
    let out = cmd.env("RAYON_NUM_THREADS", "1").output().context("running structlearn")?;
    let seconds = start.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!("{} failed: {}", model.display(), String::from_utf8_lossy(&out.stderr));
    }
    let value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json)?)?;
    Ok((value, seconds))
}

fn score_of(model: &UaiModel, labels: &[usize]) -> Result<f64> {
    let m = model.to_region_graph()?;
    let s: f64 =
        (0..m.graph.num_regions()).map(|r| m.theta[m.graph.config_range(r).start + m.graph.config_of(r, labels)]).sum();
    Ok(s + m.constant)
}

fn labels_of(v: &serde_json::Value) -> Option<Vec<usize>> {
    v["labels"].as_array().map(|a| a.iter().map(|x| x.as_u64().unwrap_or(0) as usize).collect())
}

/// Each variable's most believed label, ties to the smaller (as `decode`).
fn argmax_of(v: &serde_json::Value) -> Vec<usize> {
    v["variables"]
        .as_array()
        .map(|vars| {
            vars.iter()
                .map(|b| {
                    let b: Vec<f64> =
                        b.as_array().map_or_else(Vec::new, |a| a.iter().filter_map(|x| x.as_f64()).collect());
                    (0..b.len()).fold(0, |best, y| if b[y] > b[best] { y } else { best })
                })
                .collect()
        })
        .unwrap_or_default()
}

fn main() -> Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.out)?;
    type Family = (&'static str, Box<dyn Fn(u64) -> UaiModel>);
    let families: Vec<Family> = vec![
        ("pedigree", Box::new(|s| pedigree(&PedigreeConfig::default(), s).0)),
        ("csp-pairwise", Box::new(|s| csp(&CspConfig::default(), s).0)),
        (
            "csp-ternary",
            Box::new(|s| {
                csp(&CspConfig { variables: 30, labels: 2, constraints: 40, arity: 3, zero_probability: 0.4 }, s).0
            }),
        ),
        ("frustrated-grid", Box::new(|s| frustrated_grid(&GridConfig::default(), s))),
    ];
    println!(
        "| family | labelling | probability 0 | none found | mean θ(ŷ) | mean gap | mean θ(ŷ), all three feasible | mean time (s) |\n|---|---|---|---|---|---|---|---|"
    );
    for (name, make) in &families {
        // Per method: figures per model, None where there is no finite score.
        let mut rows: [Vec<Option<Figures>>; 3] = Default::default();
        // Per method: models where no labelling was reported.
        let mut none = [0usize; 3];
        let mut times: [Vec<f64>; 2] = Default::default();
        for i in 0..args.count {
            let seed = args.seed + i;
            let model = make(seed);
            let path = args.out.join(format!("{name}-{seed}.uai"));
            model.write(&path)?;
            let (plain, t_plain) = run_infer(&args.bin, &path, &path.with_extension("json"), &args.infer_args, None)?;
            let (annealed, t_anneal) = run_infer(
                &args.bin,
                &path,
                &path.with_extension("anneal.json"),
                &args.infer_args,
                Some(&args.anneal_args),
            )?;
            let figures = |labels: Option<Vec<usize>>, v: &serde_json::Value| -> Result<Option<Figures>> {
                let Some(labels) = labels else { return Ok(None) };
                let score = score_of(&model, &labels)?;
                let bound = v["bound"].as_f64().unwrap_or(f64::NAN);
                Ok(score.is_finite().then_some(Figures { score, bound }))
            };
            times[0].push(t_plain);
            times[1].push(t_anneal);
            rows[0].push(figures(Some(argmax_of(&plain)), &plain)?);
            rows[1].push(figures(labels_of(&plain), &plain)?);
            rows[2].push(figures(labels_of(&annealed), &annealed)?);
            none[1] += usize::from(labels_of(&plain).is_none());
            none[2] += usize::from(labels_of(&annealed).is_none());
        }
        // "common": the models where all three labellings are feasible, so
        // that the rows average the same models.
        let common: Vec<usize> = (0..args.count as usize).filter(|&i| rows.iter().all(|r| r[i].is_some())).collect();
        let methods = ["argmax (before)", "feasible + ICM", "feasible + ICM, --anneal"];
        for ((method, row), none) in methods.iter().zip(&rows).zip(none) {
            let feasible: Vec<Figures> = row.iter().flatten().copied().collect();
            let mean_of = |xs: &mut dyn Iterator<Item = f64>| -> String {
                let (sum, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
                if n == 0 { "—".to_string() } else { format!("{:.2}", sum / n as f64) }
            };
            // Time over every model (the run is the same whether or not its
            // labelling is feasible); argmax and feasible share the default run.
            let times = if method.contains("anneal") { &times[1] } else { &times[0] };
            let seconds = times.iter().sum::<f64>() / times.len().max(1) as f64;
            println!(
                "| {name} | {method} | {}/{n} | {none}/{n} | {} | {} | {} | {seconds:.3} |",
                row.len() - feasible.len() - none,
                mean_of(&mut feasible.iter().map(|f| f.score)),
                mean_of(&mut feasible.iter().map(|f| f.bound - f.score)),
                mean_of(&mut common.iter().filter_map(|&i| row[i]).map(|f| f.score)),
                n = row.len(),
            );
        }
        eprintln!("{name}: {} of {} models have all three labellings feasible", common.len(), args.count);
    }
    Ok(())
}
