//! Measures `structlearn infer`'s labellings on seeded model families
//! (`datasets::uai_families`): pedigrees with deterministic inheritance,
//! pairwise and ternary CSPs with a planted solution, frustrated grids.
//!
//! For every model and every label order of `--label-order` (default
//! `singleton,regions,both`, `structlearn infer --label-order`) it runs the given
//! `structlearn` binary once at the default ε and once with `--anneal`, and
//! compares the labellings:
//!
//! * **argmax**: each variable's most believed label on its own (what
//!   `structlearn infer` reported before the decoding module: `decode`), read
//!   from the first order's default run's beliefs (the label order changes
//!   the decoding only, not the messages);
//! * **forward checking + ICM (ORDER)**: the default run's `labels`
//!   (`decode_feasible` + ICM);
//! * **…, --anneal**: the `--anneal` run's `labels`.
//!
//! ```sh
//! cargo build --release -p structlearn-cli --example infer_families
//! target/release/examples/infer_families --bin target/release/structlearn --out /tmp/families --seed 0 --count 10
//! ```
//!
//! It writes the models (`DIR/FAMILY-SEED.uai`) and the runs' JSON next to
//! them, and prints two Markdown tables. The first: per family and
//! labelling, how many labellings have probability 0 (`θ = −∞`), how many
//! models got none (the search gave up), the mean `θ(ŷ)` and certified gap
//! `bound − θ(ŷ)` over the models where it is feasible, the mean `θ(ŷ)` over
//! the models where all rows' labellings are (the same models for every
//! row), the mean wall-clock time of the run (argmax and the default
//! decoding read the same run) and the backtracks of the reported decoding
//! (total over the models; the largest in brackets). The second, with more
//! than one order: per family, run and order after the first, on how many
//! models its labelling scores more than, as much as, and less than the
//! first order's.

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
    /// The label orders to compare (`infer --label-order`), comma-separated.
    #[arg(long = "label-order", value_delimiter = ',', default_values_t = ["singleton".to_string(), "regions".to_string(), "both".to_string()])]
    label_orders: Vec<String>,
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

/// One row of the first table: a labelling per model.
struct Row {
    name: String,
    /// Per model: the figures, `None` where there is no finite score.
    figures: Vec<Option<Figures>>,
    /// Models where no labelling was reported.
    none: usize,
    /// Per model: the run's wall-clock seconds.
    times: Vec<f64>,
    /// Per model: the reported decoding's backtracks (`None` for argmax or
    /// when none was reported).
    backtracks: Vec<Option<u64>>,
}

fn backtracks_of(v: &serde_json::Value) -> Option<u64> {
    v["decoding"]["backtracks"].as_u64()
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
    if args.label_orders.is_empty() {
        bail!("--label-order needs at least one order");
    }
    let mut tables = String::from(
        "| family | labelling | probability 0 | none found | mean θ(ŷ) | mean gap | mean θ(ŷ), all rows feasible | mean time (s) | backtracks (largest) |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut versus = String::new();
    if args.label_orders.len() > 1 {
        versus = format!(
            "| family | run | order | scores more than {a} | equal | scores less |\n|---|---|---|---|---|---|\n",
            a = args.label_orders[0]
        );
    }
    for (name, make) in &families {
        // Rows: argmax, then per order the default and the --anneal run.
        let mut rows = vec![Row { name: "argmax".into(), figures: vec![], none: 0, times: vec![], backtracks: vec![] }];
        for order in &args.label_orders {
            for run in ["", ", --anneal"] {
                rows.push(Row {
                    name: format!("forward checking + ICM ({order}){run}"),
                    figures: vec![],
                    none: 0,
                    times: vec![],
                    backtracks: vec![],
                });
            }
        }
        for i in 0..args.count {
            let seed = args.seed + i;
            let model = make(seed);
            let path = args.out.join(format!("{name}-{seed}.uai"));
            model.write(&path)?;
            let figures = |labels: Option<Vec<usize>>, v: &serde_json::Value| -> Result<Option<Figures>> {
                let Some(labels) = labels else { return Ok(None) };
                let score = score_of(&model, &labels)?;
                let bound = v["bound"].as_f64().unwrap_or(f64::NAN);
                Ok(score.is_finite().then_some(Figures { score, bound }))
            };
            for (k, order) in args.label_orders.iter().enumerate() {
                let mut extra = args.infer_args.clone();
                extra.extend(["--label-order".to_string(), order.clone()]);
                let (plain, t_plain) =
                    run_infer(&args.bin, &path, &path.with_extension(format!("{order}.json")), &extra, None)?;
                let (annealed, t_anneal) = run_infer(
                    &args.bin,
                    &path,
                    &path.with_extension(format!("{order}.anneal.json")),
                    &extra,
                    Some(&args.anneal_args),
                )?;
                if k == 0 {
                    let argmax = &mut rows[0];
                    argmax.figures.push(figures(Some(argmax_of(&plain)), &plain)?);
                    argmax.times.push(t_plain);
                    argmax.backtracks.push(None);
                }
                for (row, (v, t)) in
                    rows[1 + 2 * k..3 + 2 * k].iter_mut().zip([(&plain, t_plain), (&annealed, t_anneal)])
                {
                    row.figures.push(figures(labels_of(v), v)?);
                    row.none += usize::from(labels_of(v).is_none());
                    row.times.push(t);
                    row.backtracks.push(backtracks_of(v));
                }
            }
        }
        // "common": the models where every row's labelling is feasible, so
        // that the rows average the same models.
        let common: Vec<usize> =
            (0..args.count as usize).filter(|&i| rows.iter().all(|r| r.figures[i].is_some())).collect();
        for row in &rows {
            let feasible: Vec<Figures> = row.figures.iter().flatten().copied().collect();
            let mean_of = |xs: &mut dyn Iterator<Item = f64>| -> String {
                let (sum, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
                if n == 0 { "—".to_string() } else { format!("{:.2}", sum / n as f64) }
            };
            // Time over every model (the run is the same whether or not its
            // labelling is feasible).
            let seconds = row.times.iter().sum::<f64>() / row.times.len().max(1) as f64;
            let backtracks: Vec<u64> = row.backtracks.iter().flatten().copied().collect();
            let backtracks = if backtracks.is_empty() {
                "—".to_string()
            } else {
                format!("{} ({})", backtracks.iter().sum::<u64>(), backtracks.iter().max().unwrap_or(&0))
            };
            let n = row.figures.len();
            tables.push_str(&format!(
                "| {name} | {} | {}/{n} | {}/{n} | {} | {} | {} | {seconds:.3} | {backtracks} |\n",
                row.name,
                n - feasible.len() - row.none,
                row.none,
                mean_of(&mut feasible.iter().map(|f| f.score)),
                mean_of(&mut feasible.iter().map(|f| f.bound - f.score)),
                mean_of(&mut common.iter().filter_map(|&i| row.figures[i]).map(|f| f.score)),
            ));
        }
        for (k, order) in args.label_orders.iter().enumerate().skip(1) {
            for (j, run) in ["single ε", "--anneal"].iter().enumerate() {
                let (a, b) = (&rows[1 + j], &rows[1 + 2 * k + j]);
                let (mut more, mut equal, mut less) = (0, 0, 0);
                for (x, y) in a.figures.iter().zip(&b.figures) {
                    let (x, y) = (x.map_or(f64::NEG_INFINITY, |f| f.score), y.map_or(f64::NEG_INFINITY, |f| f.score));
                    // Scores of one labelling agree to rounding; closer than
                    // 1e-9 relative counts as equal.
                    if x == y || (x - y).abs() <= 1e-9 * x.abs().max(1.0) {
                        equal += 1;
                    } else if y > x {
                        more += 1;
                    } else {
                        less += 1;
                    }
                }
                versus.push_str(&format!("| {name} | {run} | {order} | {more} | {equal} | {less} |\n"));
            }
        }
        eprintln!("{name}: {} of {} models have every row's labelling feasible", common.len(), args.count);
    }
    println!("{tables}");
    if !versus.is_empty() {
        println!("{versus}");
    }
    Ok(())
}
