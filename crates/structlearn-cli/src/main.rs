//! The `structlearn` command line: inference on UAI models, and training,
//! prediction and evaluation on data set files (see `structlearn --help`).

mod report;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result, bail};
use clap::builder::TypedValueParser as _;
use clap::{Parser, Subcommand};
use factor_graph::{UaiEvidence, UaiModel};
use oracles::ModelRegistry;
use smoothed_inference::decoding::{DecodeOptions, LabelOrder};
use structlearn::files::write_atomic;
use structlearn::infer::{InferError, InferNote, InferOptions, infer_region_model};
use structlearn::oracle_config::{RunConfig, oracle_help, parse_oracle_arg};
use structlearn::resume::{check_or_record_settings, resume_settings};
use structlearn::{
    CheckpointConfig, ConfusionMatrix, CsvCurveWriter, Dataset, EarlyStopping, LearnerKind, PredictOptions,
    StructuredModel, TrainConfig, build_learner,
};
use structlearn_cli::{
    ProgressObserver, Verbosity, error_text, parse_eps, parse_eps_factor, parse_seconds, parse_tolerance,
};

#[derive(Parser)]
#[command(name = "structlearn", version, about = "Structured learning with any function class (Domke 2013)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Print only results and errors: no progress, no notes.
    #[arg(long, short, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Also print a line per step of every learning iteration (oracle loss,
    /// message-passing violation).
    #[arg(long, short, global = true)]
    verbose: bool,
    /// Worker threads for parallel work over examples (default: one per
    /// core). Training is bitwise reproducible for a given seed and thread count.
    #[arg(long, global = true, value_name = "N")]
    threads: Option<usize>,
}

#[derive(Subcommand)]
enum Command {
    /// Entropy-smoothed LP inference on a UAI model (MARKOV or BAYES):
    /// writes the dual value, the largest marginalisation violation, a
    /// labelling with its certificates and all beliefs as JSON.
    ///
    /// The beliefs are the ε-smoothed LP-relaxation beliefs (pseudo-marginals
    /// of the optimum of the smoothed dual, docs/MATH.md §3), not the model's
    /// exact marginals; they approach an LP-relaxed MAP solution as ε → 0.
    /// "labels" is decoded from the beliefs respecting the model's zeros, then
    /// improved by local search; "score" is its log-probability (up to the
    /// normalisation), "bound" an upper bound on every labelling's, "gap" the
    /// difference.
    Infer(Box<InferArgs>),
    /// Trains a model on a data set file (Algorithm 1 unless `--learner` says otherwise).
    #[command(after_long_help = oracle_help())]
    Train(Box<TrainArgs>),
    /// Predicts labels and writes them (and optionally beliefs) as JSON, and
    /// label maps of grid-shaped examples as PNG (--png-dir). Prints what it
    /// did, and the error if the data set has labels.
    Predict {
        /// Model file.
        #[arg(long)]
        model: PathBuf,
        /// Data set file (labels not needed).
        #[arg(long)]
        data: PathBuf,
        /// Output JSON file.
        #[arg(long)]
        output: PathBuf,
        /// Message-passing iterations.
        #[arg(long, default_value_t = PredictOptions::default().iterations)]
        iterations: usize,
        /// Stop once the largest violation is below this.
        #[arg(long, default_value_t = 1e-4, allow_hyphen_values = true, value_parser = parse_tolerance)]
        tolerance: f64,
        /// Also write the singleton beliefs.
        #[arg(long)]
        beliefs: bool,
        /// Also write one PNG label map per grid-shaped example into this folder.
        #[arg(long, value_name = "DIR")]
        png_dir: Option<PathBuf>,
        /// Also write each labelling's certificates, as `infer` does: "score"
        /// (θ(ŷ) under the model's energies θ = ε g), "bound" (the ε = 0
        /// dual bound at the final messages: no labelling scores more) and
        /// "gap" (bound − score). The labels are the same with or without it.
        #[arg(long)]
        certificates: bool,
        #[command(flatten)]
        anneal: AnnealArgs,
    },
    /// Segments a photograph (JPEG or PNG) with a model trained by `cargo xtask
    /// reproduce horses|stanford`: reduces and featurises it as in training and
    /// writes the label map as a PNG in the classes' colours.
    PredictImage(PredictImageArgs),
    /// Evaluates a model on a labelled data set: error rate (fraction of
    /// misclassified variables), per-class accuracy, confusion matrix and mean
    /// IoU, as text and (--json) JSON.
    ///
    /// Prediction starts message passing from zero messages and runs up to
    /// --iterations. The errors reported during training (and in `cargo xtask
    /// reproduce`'s tables) use warm-started evaluation: each evaluation
    /// continues from the previous one's messages, so small budgets add up over
    /// learning iterations. On strongly coupled models the same budget from
    /// zero may stop before message passing has settled, giving a different
    /// number; eval reports how many examples reached the tolerance — raise
    /// --iterations until all do to get the converged error.
    Eval {
        /// Model file.
        #[arg(long)]
        model: PathBuf,
        /// Labelled data set file.
        #[arg(long)]
        data: PathBuf,
        /// Message-passing iterations.
        #[arg(long, default_value_t = PredictOptions::default().iterations)]
        iterations: usize,
        /// Stop once the largest violation is below this.
        #[arg(long, default_value_t = 1e-4, allow_hyphen_values = true, value_parser = parse_tolerance)]
        tolerance: f64,
        /// Also write the metrics as JSON to this file.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        #[command(flatten)]
        anneal: AnnealArgs,
    },
}

/// `predict`'s and `eval`'s choice of labelling.
#[derive(clap::Args)]
struct AnnealArgs {
    /// Label by the ε → 0 labelling (a MAP estimate, as `infer --anneal`)
    /// instead of the beliefs' argmax at the model's ε: ε halved from the
    /// model's down to --eps-min times it, messages warm-started,
    /// --iterations per stage; each stage's labelling decoded and raised by
    /// local search, the best-scoring one kept (with predict --certificates,
    /// gap 0 proves it a MAP labelling; predict --beliefs are the last
    /// stage's).
    #[arg(long)]
    anneal: bool,
    /// With --anneal: the last stage's ε as a multiple of the model's.
    #[arg(long, default_value_t = 0.01, requires = "anneal", value_parser = parse_eps_factor)]
    eps_min: f64,
}

impl AnnealArgs {
    /// The last stage's ε factor with `--anneal`, else `None`.
    fn eps_min(&self) -> Option<f64> {
        self.anneal.then_some(self.eps_min)
    }
}

#[derive(clap::Args)]
struct PredictImageArgs {
    /// Model file (e.g. target/reproduce/horses/models/seed0-mlp-mlp.slm).
    #[arg(long)]
    model: PathBuf,
    /// The photograph.
    #[arg(long)]
    image: PathBuf,
    /// Output label-map PNG.
    #[arg(long)]
    output: PathBuf,
    /// Feature pipeline (reduction, features, standardisation, class colours);
    /// default: features.json beside the model.
    #[arg(long)]
    pipeline: Option<PathBuf>,
    /// Write the label map at the photograph's size (nearest neighbour) instead
    /// of the model's reduced resolution.
    #[arg(long)]
    original_size: bool,
    /// Message-passing iterations.
    #[arg(long, default_value_t = 300)]
    iterations: usize,
    /// Stop once the largest violation is below this.
    #[arg(long, default_value_t = 1e-4, allow_hyphen_values = true, value_parser = parse_tolerance)]
    tolerance: f64,
}

fn predict_image(args: PredictImageArgs) -> Result<()> {
    let pipeline_path = match args.pipeline {
        Some(p) => p,
        None => args.model.with_file_name("features.json"),
    };
    let pipeline = datasets::photos::Pipeline::load(&pipeline_path)
        .context("reading the feature pipeline (give it with --pipeline)")?;
    let model = StructuredModel::load(&args.model, &ModelRegistry::with_builtin())?;
    structlearn::files::check_distinct(
        &[("--model", &args.model), ("--image", &args.image), ("the feature pipeline", &pipeline_path)],
        &[("--output", &args.output)],
    )?;
    structlearn::files::check_writable(&args.output)?;
    let photo = datasets::image::load_rgb(&args.image)?;
    let name = args.image.file_stem().map_or("image".into(), |s| s.to_string_lossy().into_owned());
    let (data, small) = pipeline.dataset(&photo, &name)?;
    model.check_dataset(&data).with_context(|| {
        format!(
            "the pipeline {} does not build the graphs the model {} was trained on; give the features.json \
             written beside the model (--pipeline)",
            pipeline_path.display(),
            args.model.display()
        )
    })?;
    let opts = PredictOptions { iterations: args.iterations, tolerance: Some(args.tolerance) };
    let prediction = model.predict_example(&data, 0, &opts)?;
    let (h, w) = (small.height() as usize, small.width() as usize);
    let mut labels = datasets::Raster::new(h, w, prediction.labels)?;
    if args.original_size {
        let (pw, ph) = photo.dimensions();
        let (ph, pw) = (ph as usize, pw as usize);
        let data = (0..ph * pw).map(|i| labels.data()[((i / pw) * h / ph) * w + (i % pw) * w / pw]).collect();
        labels = datasets::Raster::new(ph, pw, data)?;
    }
    datasets::image::write_label_png(&args.output, &labels, &pipeline.palette()?)?;
    let mut counts = vec![0usize; pipeline.classes.len()];
    labels.data().iter().for_each(|&l| counts[l] += 1);
    let shares: Vec<String> = pipeline
        .classes
        .iter()
        .zip(&counts)
        .map(|(c, &n)| format!("{c} {:.3}", n as f64 / labels.data().len() as f64))
        .collect();
    print_stdout(&format!(
        "{}: {}×{} label map ({}; {} message-passing iterations, violation {:.2e}) → {}\n",
        args.image.display(),
        labels.height(),
        labels.width(),
        shares.join(", "),
        prediction.report.iterations,
        prediction.report.max_violation,
        args.output.display()
    ))
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("error: {}", error_text(&e));
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    let verbosity = Verbosity::from_flags(cli.quiet, cli.verbose);
    if let Some(n) = cli.threads {
        let n = structlearn::threads::checked_thread_count(n).map_err(anyhow::Error::msg)?;
        rayon::ThreadPoolBuilder::new().num_threads(n).build_global().context("--threads: starting the thread pool")?;
    } else {
        structlearn::threads::check_environment().map_err(anyhow::Error::msg)?;
    }
    match cli.command {
        Command::Infer(args) => infer(&args, verbosity),
        Command::Train(args) => train(*args, verbosity),
        Command::PredictImage(args) => predict_image(args),
        Command::Predict { model, data, output, iterations, tolerance, beliefs, png_dir, certificates, anneal } => {
            let anneal = anneal.eps_min();
            structlearn::files::check_distinct(&[("--model", &model), ("--data", &data)], &[("--output", &output)])?;
            let model_path = model;
            let model = StructuredModel::load(&model_path, &ModelRegistry::with_builtin())?;
            let data_path = data;
            let data = Dataset::load(&data_path)?;
            structlearn::files::check_writable(&output)?;
            if let Some(dir) = &png_dir {
                report::prepare_png_dir(dir)?;
            }
            let opts = PredictOptions { iterations, tolerance: Some(tolerance) };
            let start = std::time::Instant::now();
            let context = || format!("predicting {} with {}", data_path.display(), model_path.display());
            let (predictions, certified) = if certificates {
                let both = report::predict_all_certified(&model, &data, &opts, anneal, "predict", verbosity, beliefs)
                    .with_context(context)?;
                let (p, c): (Vec<_>, Vec<_>) = both.into_iter().unzip();
                (p, Some(c))
            } else {
                (
                    report::predict_all(&model, &data, &opts, anneal, "predict", verbosity, beliefs)
                        .with_context(context)?,
                    None,
                )
            };
            let out: Vec<serde_json::Value> = predictions
                .iter()
                .zip(data.examples())
                .enumerate()
                .map(|(k, (p, ex))| {
                    let mut v = serde_json::json!({
                        "name": ex.name(), "labels": p.labels,
                        "iterations": p.report.iterations, "max_violation": p.report.max_violation,
                    });
                    if beliefs {
                        v["beliefs"] = serde_json::json!(singleton_beliefs(ex.graph(), &p.beliefs));
                    }
                    if let Some(c) = certified.as_ref().map(|c| &c[k]) {
                        // A prediction's labelling is never forbidden, so its score is finite.
                        v["score"] = serde_json::json!(c.score.is_finite().then_some(c.score));
                        v["bound"] = serde_json::json!(c.bound);
                        v["gap"] = serde_json::json!(c.gap.is_finite().then_some(c.gap));
                    }
                    v
                })
                .collect();
            write_json(&output, &serde_json::json!({ "predictions": out }))?;
            let pngs = png_dir.as_deref().map(|d| report::write_label_pngs(d, &data, &predictions)).transpose()?;
            if verbosity.normal() {
                let (converged, worst) = report::convergence(&predictions);
                eprintln!(
                    "predicted {} examples ({} variables) of {} with {} in {}; {converged} reached the tolerance (largest violation {worst:.2e})",
                    data.len(),
                    data.num_variables(),
                    data_path.display(),
                    model_path.display(),
                    structlearn_cli::human_duration(start.elapsed().as_secs_f64())
                );
                if (0..data.len()).all(|k| data.labels(k).is_ok()) && data.labelled_variables() > 0 {
                    let m = ConfusionMatrix::from_predictions(&data, &predictions)?;
                    eprintln!(
                        "labels present: error {:.6}, mean IoU {}",
                        m.error_rate(),
                        m.mean_iou().map_or("-".into(), |v| format!("{v:.4}"))
                    );
                }
                eprintln!("wrote {}", output.display());
                if let (Some(dir), Some((files, skipped))) = (&png_dir, &pngs) {
                    eprintln!(
                        "wrote {} label-map PNGs into {}{}",
                        files.len(),
                        dir.display(),
                        if *skipped > 0 {
                            format!(" ({skipped} examples are not grid-shaped: no PNG)")
                        } else {
                            String::new()
                        }
                    );
                }
            }
            Ok(())
        }
        Command::Eval { model, data, iterations, tolerance, json, anneal } => {
            let anneal = anneal.eps_min();
            if let Some(json) = &json {
                structlearn::files::check_distinct(&[("--model", &model), ("--data", &data)], &[("--json", json)])?;
                structlearn::files::check_writable(json)?;
            }
            let model_path = model;
            let model = StructuredModel::load(&model_path, &ModelRegistry::with_builtin())?;
            let data_path = data;
            let data = Dataset::load(&data_path)?;
            for k in 0..data.len() {
                data.labels(k).with_context(|| data_path.display().to_string())?;
            }
            if data.labelled_variables() == 0 {
                bail!(
                    "{}: no labelled variables (no examples, or every label unknown): there is nothing to evaluate",
                    data_path.display()
                );
            }
            let opts = PredictOptions { iterations, tolerance: Some(tolerance) };
            let predictions = report::predict_all(&model, &data, &opts, anneal, "eval", verbosity, false)
                .with_context(|| format!("evaluating {} on {}", model_path.display(), data_path.display()))?;
            let metrics = ConfusionMatrix::from_predictions(&data, &predictions)?.report();
            let (converged, worst) = report::convergence(&predictions);
            print_stdout(&format!(
                "{}{} examples; {}: {converged} of {} reached the tolerance {tolerance:e} (largest violation {worst:.2e})\n",
                report::metrics_text(&metrics),
                data.len(),
                match anneal {
                    Some(e) => format!(
                        "ε → 0 labellings (ε halved from the model's to {e} times it, up to {iterations} iterations per stage; the last stage's convergence)"
                    ),
                    None => format!("message passing from zero messages, up to {iterations} iterations"),
                },
                data.len()
            ))?;
            if verbosity.normal() && converged < data.len() && anneal.is_none() {
                eprintln!(
                    "note: not every example converged, so this error can differ from the one reported during training \
                     (which continues each evaluation from the previous one's messages); raise --iterations until all examples reach the tolerance"
                );
            }
            if let Some(path) = json {
                let mut value = serde_json::to_value(&metrics)?;
                value["examples"] = data.len().into();
                value["converged_examples"] = converged.into();
                value["max_violation"] = worst.into();
                value["predict"] =
                    serde_json::json!({ "iterations": iterations, "tolerance": tolerance, "start": "zero messages" });
                if let Some(e) = anneal {
                    value["predict"]["anneal_eps_min"] = e.into();
                }
                write_json(&path, &value)?;
            }
            Ok(())
        }
    }
}

fn singleton_beliefs(graph: &factor_graph::RegionGraph, beliefs: &[f64]) -> Vec<Vec<f64>> {
    (0..graph.num_variables())
        .map(|v| graph.singleton(v).map_or_else(Vec::new, |r| beliefs[graph.config_range(r)].to_vec()))
        .collect()
}

fn write_json(path: &Path, value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    write_atomic(path, text.as_bytes())?;
    Ok(())
}

fn infer(args: &InferArgs, verbosity: Verbosity) -> Result<()> {
    let path = args.model.as_path();
    let mut inputs = vec![("the model", path)];
    if let Some(e) = &args.evidence {
        inputs.push(("--evidence", e.as_path()));
    }
    let outputs: Vec<(&str, &Path)> = [
        ("--output", args.output.as_deref()),
        ("--output-map", args.output_map.as_deref()),
        ("--output-mar", args.output_mar.as_deref()),
    ]
    .into_iter()
    .filter_map(|(name, p)| p.map(|p| (name, p)))
    .collect();
    structlearn::files::check_distinct(&inputs, &outputs)?;
    for (_, out) in &outputs {
        structlearn::files::check_writable(out)?;
    }
    let (uai, warnings) = UaiModel::read_with_warnings(path)?;
    for w in &warnings {
        eprintln!("warning: {}: {w}", path.display());
    }
    let mut m = uai.to_region_graph().map_err(|e| e.in_file(path))?;
    let evidence = match &args.evidence {
        Some(e) => Some(UaiEvidence::read(e, &uai.cardinalities)?),
        None => None,
    };
    if let Some(e) = &evidence {
        e.clamp(&mut m);
    }
    // Zero entries that rule out every labelling, named by the file's factors
    // (inference would minimise an unbounded dual and print meaningless numbers).
    m.check_feasible(&uai).map_err(|e| match &args.evidence {
        Some(ev) => anyhow::anyhow!("{}: with the evidence of {}: {e}", path.display(), ev.display()),
        None => e.in_file(path).into(),
    })?;
    let g = &m.graph;
    let options = InferOptions {
        eps: args.eps,
        iterations: args.iterations,
        tolerance: args.tolerance,
        polish: args.polish,
        anneal: args.anneal,
        eps_min: args.eps_min,
        max_backtracks: args.max_backtracks,
        decode_restarts: args.decode_restarts,
        label_order: args.label_order,
    };
    let mut notes = |note: &InferNote| match note {
        InferNote::PolishStoppedEarly(e) => eprintln!("warning: dual polish stopped early: {e}"),
        InferNote::Polished { max_violation, tolerance, converged } => match tolerance {
            Some(t) if !converged => eprintln!(
                "warning: the dual polish stopped at a largest violation of {max_violation:.3e}, above --tolerance {t:e}; \
                 the beliefs are not marginalisation-consistent to that tolerance (raise --polish or --iterations)"
            ),
            _ if verbosity.normal() => eprintln!("dual polish reached a largest violation of {max_violation:.3e}"),
            _ => {}
        },
        InferNote::Stage { eps, dual_value, bound, score } => {
            if args.anneal && verbosity.normal() {
                eprintln!(
                    "anneal: ε = {eps:e}: dual {dual_value:.6e}, bound {bound:.6e}, score {}",
                    score.map_or_else(|| "none".to_string(), |s| format!("{s:.6e}"))
                );
            }
        }
    };
    let outcome = infer_region_model(&m, &options, &mut notes).map_err(|e| match e {
        InferError::Infeasible { bound, least_score } => anyhow::anyhow!(
            "{}: the model gives every labelling probability 0{}: zero entries of different factors contradict each other \
             (message passing proves it: a labelling of positive probability would have to score at most {:.6e} \
             and at least {:.6e}); check the factors' zero entries",
            path.display(),
            if args.evidence.is_some() { " with this evidence" } else { "" },
            bound,
            least_score
        ),
        InferError::Problem(e) => anyhow::Error::new(e).context(path.display().to_string()),
        InferError::Run(e) => e.into(),
        e => anyhow::anyhow!("{}: {e}", path.display()),
    })?;
    let stages = &outcome.stages;
    let best = outcome.best;
    let last = outcome.last();
    let eps = last.eps;
    let report = &last.report;
    let beliefs = &outcome.beliefs;
    // Every stage's bound is valid: the lowest is reported.
    let bound = outcome.bound;
    let chosen = outcome.chosen();
    let (labels, score) = match chosen {
        Ok(d) => (Some(&d.labels), Some(d.score + m.constant)),
        Err(e) => {
            let hint = match e {
                smoothed_inference::InferenceError::NoFeasibleLabeling { exhausted: false, .. } => {
                    " with --max-backtracks, or retry with --decode-restarts"
                }
                _ => "",
            };
            eprintln!("warning: {}: {e}{hint}; no labelling is reported", path.display());
            (None, None)
        }
    };
    let factors: Vec<Vec<f64>> = m
        .placements
        .iter()
        .map(|p| match p.region {
            Some(r) => {
                let start = g.config_range(r).start;
                p.map.iter().map(|&c| beliefs[start + c]).collect()
            }
            None => vec![1.0],
        })
        .collect();
    let variables = singleton_beliefs(g, beliefs);
    let mut value = serde_json::json!({
        "dual_value": report.dual_value + m.constant,
        "max_violation": report.max_violation,
        // Whether the requested tolerance was met (null without one).
        "converged": args.tolerance.map(|_| report.converged),
        "iterations": report.iterations,
        "beliefs_are": format!("ε-smoothed LP-relaxation beliefs at ε = {eps} (pseudo-marginals), not exact marginals"),
        "labels": labels,
        // log of the labelling's unnormalised probability, and the ε = 0 dual
        // bound every labelling's is below: gap 0 proves the labelling optimal.
        "score": score,
        "bound": bound,
        "gap": score.map(|s| bound - s),
        "decoding": match chosen {
            Ok(d) => serde_json::json!({"backtracks": d.backtracks, "improved_by_local_search": d.improved}),
            Err(e) => serde_json::json!({"error": e.to_string()}),
        },
        "variables": variables,
        "factors": factors,
    });
    if let Some(e) = &evidence {
        value["evidence"] = serde_json::json!(e.observed);
    }
    if args.anneal {
        value["anneal"] = serde_json::json!(
            stages
                .iter()
                .map(|s| serde_json::json!({
                    "eps": s.eps,
                    "iterations": s.report.iterations,
                    "dual_value": s.report.dual_value + m.constant,
                    "max_violation": s.report.max_violation,
                    "bound": s.bound,
                    "score": s.decoded.as_ref().ok().map(|d| d.score + m.constant),
                }))
                .collect::<Vec<_>>()
        );
        value["anneal_best_stage"] = serde_json::json!(best);
    }
    match &args.output {
        Some(p) => write_json(p, &value)?,
        None => print_stdout(&format!("{}\n", serde_json::to_string_pretty(&value)?))?,
    }
    if let Some(p) = &args.output_mar {
        write_atomic(p, factor_graph::format_mar(&variables).as_bytes())?;
    }
    if let Some(p) = &args.output_map {
        let Some(labels) = labels else {
            bail!("{}: no labelling was found, so {} is not written", path.display(), p.display());
        };
        write_atomic(p, factor_graph::format_map(labels).as_bytes())?;
    }
    Ok(())
}

/// Writes `text` to standard output; an error, not `println!`'s panic, when
/// the reader has gone (`structlearn infer m.uai | head`).
fn print_stdout(text: &str) -> Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).context("writing the result to standard output")
}

/// Arguments of `structlearn infer`.
#[derive(clap::Args)]
struct InferArgs {
    /// The UAI model file (MARKOV or BAYES).
    model: PathBuf,
    /// Entropy weight ε (between 1e-6 and 1e6); with --anneal, the first stage's.
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true, value_parser = parse_eps)]
    eps: f64,
    /// Largest number of message-passing iterations (with --anneal: per stage).
    #[arg(long, default_value_t = 1000)]
    iterations: usize,
    /// Stop once the largest marginalisation violation is below this.
    #[arg(long, allow_hyphen_values = true, value_parser = parse_tolerance)]
    tolerance: Option<f64>,
    /// If star updates end above the tolerance (or no tolerance is given),
    /// this many L-BFGS iterations on the smooth dual A(λ) (Danskin gradient)
    /// follow; they never increase A. 0 disables. With --anneal: per stage.
    #[arg(long, default_value_t = 2000)]
    polish: usize,
    /// UAI evidence file (.evid): the observed variables are clamped to their
    /// values (every other label gets θ = −∞).
    #[arg(long, value_name = "FILE")]
    evidence: Option<PathBuf>,
    /// ε schedule: ε halved from --eps down to --eps-min, messages warm-started
    /// from one stage to the next, --iterations and --polish per stage; the
    /// best labelling and the lowest bound of all stages are reported.
    #[arg(long)]
    anneal: bool,
    /// The most times the constrained decoding may return to an earlier
    /// variable before it reports that it found no labelling the model allows.
    #[arg(long, value_name = "N", default_value_t = DecodeOptions::default().max_backtracks)]
    max_backtracks: usize,
    /// When the decoding's budget runs out, this many more attempts, each
    /// with the beliefs perturbed (seeded, reproducible) and its own budget.
    #[arg(long, value_name = "N", default_value_t = 0)]
    decode_restarts: usize,
    /// How the decoding ranks the labels of the variable it assigns next:
    /// `singleton` (its most believed label first), `regions` (the label with
    /// the highest ε = 0 bound Σ max θ̃ over the regions containing the
    /// variable, given the labels already assigned, first) or `both` (a search
    /// with each, the labelling that scores more kept).
    #[arg(long, value_name = "ORDER", default_value_t = InferOptions::default().label_order,
          value_parser = clap::builder::PossibleValuesParser::new(LabelOrder::NAMES)
              .try_map(|s| s.parse::<LabelOrder>()))]
    label_order: LabelOrder,
    /// With --anneal: the last ε (default: --eps / 100).
    #[arg(long, allow_hyphen_values = true, value_parser = parse_eps, requires = "anneal")]
    eps_min: Option<f64>,
    /// Output JSON file (standard output if omitted).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Also write the labelling in the UAI `.MAP` result format.
    #[arg(long, value_name = "FILE")]
    output_map: Option<PathBuf>,
    /// Also write the singleton beliefs in the UAI `.MAR` result format.
    #[arg(long, value_name = "FILE")]
    output_mar: Option<PathBuf>,
}

/// Arguments of `structlearn train`.
#[derive(clap::Args)]
struct TrainArgs {
    /// Training data set (.json or binary .sld).
    #[arg(long)]
    data: PathBuf,
    /// Where to write the model file.
    #[arg(long)]
    model: PathBuf,
    /// Oracle per factor type, as TYPE=KIND[:KEY=VALUE,...] (kinds: zero,
    /// constant, linear, boosting, mlp; hyper-parameters and defaults: see
    /// --help); repeatable. Overrides the configuration file.
    #[arg(long = "oracle", value_name = "TYPE=KIND[:KEY=VALUE,...]")]
    oracles: Vec<String>,
    /// JSON configuration: {"train": {TrainConfig fields}, "oracles": {"TYPE": {"kind": ..., params}}}.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Validation/test data set: its error is reported every learning iteration.
    #[arg(long)]
    validation: Option<PathBuf>,
    /// Number of learning iterations (overrides the configuration).
    #[arg(long)]
    iterations: Option<usize>,
    /// Entropy weight ε, between 1e-6 and 1e6 (overrides the configuration).
    #[arg(long, allow_hyphen_values = true, value_parser = parse_eps)]
    eps: Option<f64>,
    /// Entropy weight of one factor type, as TYPE=EPS (repeatable; overrides `--eps` for that type).
    #[arg(long = "type-eps", value_name = "TYPE=EPS")]
    type_eps: Vec<String>,
    /// The learner: algorithm1, hazan-urtasun (linear energies, one gradient step per
    /// round), piecewise, perceptron-local, perceptron-global.
    #[arg(long, default_value = "algorithm1")]
    learner: String,
    /// Seed (overrides the configuration).
    #[arg(long)]
    seed: Option<u64>,
    /// Write the learning curve (one row per step) to this CSV file.
    #[arg(long)]
    curve: Option<PathBuf>,
    /// Draw the learning curve (objective; train and validation error) as a PNG.
    #[arg(long, value_name = "FILE")]
    curve_png: Option<PathBuf>,
    /// The training error after every K learning iterations and after the
    /// last (default 5: it costs a prediction of every training example; the
    /// validation error comes after every iteration). Overrides the
    /// configuration.
    #[arg(long, value_name = "K")]
    train_error_every: Option<usize>,
    /// Where warm-started evaluation keeps each example's messages (and
    /// boosted types' validation scores) between evaluations: `temp-file`
    /// (default; an unnamed file in $TMPDIR, read and written one example at
    /// a time) or `memory` (as many bytes as the learner's messages). The
    /// same numbers either way. Overrides the configuration.
    #[arg(long, value_name = "WHERE")]
    evaluation_messages: Option<structlearn::EvaluationMessages>,
    /// Early stopping: stop once the validation error has not improved for
    /// this many learning iterations, and save the best iteration's model
    /// (needs --validation).
    #[arg(long, value_name = "N", requires = "validation")]
    patience: Option<usize>,
    /// With --patience: least decrease of the validation error that counts as an improvement.
    #[arg(long, default_value_t = 0.0, requires = "patience", allow_hyphen_values = true)]
    min_delta: f64,
    /// Checkpoint file, written after every learning iteration; the run's
    /// learner, oracles and settings go beside it (FILE.settings.json).
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// With --checkpoint: also write it after a step inside a learning
    /// iteration once this many seconds have passed since the last write
    /// (for runs whose steps take long; 0: after every step).
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0, value_parser = parse_seconds, requires = "checkpoint")]
    checkpoint_within: f64,
    /// Resume from the checkpoint file if it exists, with the learner, oracles
    /// and settings it was written with (checked; only --iterations, --patience
    /// and --min-delta may change, and --evaluation-messages, which changes no number).
    #[arg(long, requires = "checkpoint")]
    resume: bool,
}

/// `structlearn train`: in one process, or as one rank of an MPI run
/// (`mpirun -n R structlearn train …`), where an error on any rank ends all.
fn train(a: TrainArgs, verbosity: Verbosity) -> Result<()> {
    let ranks = structlearn_cli::ranks::Ranks::start()?;
    match train_on(a, verbosity, &ranks) {
        Err(e) => ranks.fail(e),
        Ok(()) => Ok(()),
    }
}

/// Rank `ranks.rank()`'s training: it loads its block of the examples;
/// rank 0 alone checks and writes the output files and reports progress.
fn train_on(a: TrainArgs, verbosity: Verbosity, ranks: &structlearn_cli::ranks::Ranks) -> Result<()> {
    let root = ranks.is_root();
    let verbosity = if root { verbosity } else { Verbosity::Quiet };
    let inputs = [
        Some(("--data", &a.data)),
        a.validation.as_ref().map(|p| ("--validation", p)),
        a.config.as_ref().map(|p| ("--config", p)),
    ];
    let outputs = [
        Some(("--model", &a.model)),
        a.checkpoint.as_ref().map(|p| ("--checkpoint", p)),
        a.curve.as_ref().map(|p| ("--curve", p)),
        a.curve_png.as_ref().map(|p| ("--curve-png", p)),
    ];
    fn paths<'a>(list: &[Option<(&'static str, &'a PathBuf)>]) -> Vec<(&'static str, &'a Path)> {
        list.iter().flatten().map(|&(role, p)| (role, p.as_path())).collect()
    }
    structlearn::files::check_distinct(&paths(&inputs), &paths(&outputs))?;
    // Over R ranks, each reads and keeps its block of the examples.
    let load = |path: &Path| {
        if ranks.count() == 1 { Dataset::load(path) } else { Dataset::load_block(path, ranks.rank(), ranks.count()) }
    };
    let data = load(&a.data).context("training set")?;
    let validation = a.validation.as_deref().map(load).transpose().context("validation set")?;
    // Outputs are checked before any learning iteration, not found unwritable after the last.
    for out in [Some(&a.model), a.checkpoint.as_ref(), a.curve.as_ref(), a.curve_png.as_ref()].into_iter().flatten() {
        if root {
            structlearn::files::check_writable(out)?;
        }
    }
    let (mut config, mut oracle_specs) = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            let v: serde_json::Value =
                serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", p.display()))?;
            let file = RunConfig::from_json(&v).with_context(|| p.display().to_string())?;
            (file.train, file.oracles)
        }
        None => (TrainConfig::default(), Vec::new()),
    };
    for o in &a.oracles {
        let (t, spec) = parse_oracle_arg(o)?;
        oracle_specs.retain(|(name, _)| *name != t);
        oracle_specs.push((t, spec));
    }
    if let Some(patience) = a.patience {
        config.early_stopping = Some(EarlyStopping { patience, min_delta: a.min_delta });
    }
    if let Some(i) = a.iterations {
        config.learning_iterations = i;
    }
    if let Some(k) = a.train_error_every {
        config.evaluate_train_every = k;
    }
    if let Some(e) = a.evaluation_messages {
        config.evaluation_messages = e;
    }
    if let Some(e) = a.eps {
        config.epsilon = e;
    }
    for te in &a.type_eps {
        let (t, e) = te.split_once('=').with_context(|| format!("--type-eps `{te}` is not TYPE=EPS"))?;
        let e = parse_eps(e).map_err(anyhow::Error::msg).with_context(|| format!("--type-eps `{te}`"))?;
        config.type_epsilon.push((t.to_string(), e));
    }
    let kind: LearnerKind = a.learner.parse()?;
    if let Some(s) = a.seed {
        config.seed = s;
    }
    if let Some(c) = &a.checkpoint {
        config.checkpoint =
            Some(CheckpointConfig { within_iteration_seconds: Some(a.checkpoint_within), ..CheckpointConfig::new(c) });
    }
    let settings = resume_settings(kind, &config, &oracle_specs, structlearn::OracleRegistry::builtin())?;
    let mut trainer = build_learner(kind, &data, &oracle_specs, config)?;
    if ranks.count() > 1 {
        trainer.distribute(ranks.collective())?;
    }
    if let Some(v) = &validation {
        trainer.set_validation(v);
    }
    let resuming = a.resume && a.checkpoint.as_deref().is_some_and(Path::exists);
    if let Some(c) = &a.checkpoint
        && root
    {
        let advice = "resume with the same learner, oracles and training settings (only --iterations, --patience, \
                      --min-delta and --evaluation-messages may change), or start afresh without --resume";
        if let Some(warning) = check_or_record_settings(c, resuming, &settings, advice)? {
            eprintln!("warning: {warning}");
        }
    }
    let mut resumed = false;
    if resuming && let Some(c) = a.checkpoint.as_deref() {
        trainer.resume_from(c, &ModelRegistry::with_builtin())?;
        resumed = true;
        if verbosity.normal() {
            let completed = trainer.completed_iterations();
            match trainer.steps_into_next() {
                0 => eprintln!("resumed after learning iteration {completed}"),
                s => eprintln!("resumed after learning iteration {completed} and {s} steps of the next"),
            }
        }
    }
    trainer.add_observer(Box::new(ProgressObserver::new("train", verbosity)));
    if let Some(c) = a.curve.as_ref().filter(|_| root) {
        // A resumed run keeps the curve of the steps its checkpoint holds.
        let curve = if resumed { CsvCurveWriter::resume(c, trainer.history())? } else { CsvCurveWriter::create(c)? };
        trainer.add_observer(Box::new(curve));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    // Ctrl-C: finish the current step, checkpoint, and stop (a second one: stop at once).
    if let Err(e) = structlearn_cli::stop_on_ctrl_c(flag) {
        eprintln!("warning: Ctrl-C will not stop training cleanly: {e}");
    }
    trainer.set_stop_flag(stop);
    // Every finished learning iteration's model is on disk, also without --checkpoint.
    trainer.save_model_to(&a.model);
    let outcome = match trainer.train() {
        Err(structlearn::LearnError::Interrupted { completed }) if completed > 0 && !root => {
            // Rank 0 keeps the model and says so.
            let _ = completed;
            return Ok(());
        }
        Err(structlearn::LearnError::Interrupted { completed }) if completed > 0 => {
            // Keep the model of the last finished learning iteration (with
            // early stopping: of the best validation iteration so far). Stopped
            // inside an iteration, the learner's model is part-way through the
            // next one: the file written at the end of `completed` stands.
            let inside = trainer.steps_into_next() > 0;
            match trainer.best_model() {
                Some(best) => best.save(&a.model)?,
                None if !inside => trainer.model()?.save(&a.model)?,
                None => {}
            }
            bail!(
                "interrupted after learning iteration {completed}: its model is saved to {}{}",
                a.model.display(),
                if a.checkpoint.is_some() { "; run again with --resume to continue" } else { "" }
            );
        }
        other => other?,
    };
    if !root {
        return Ok(());
    }
    outcome.model.save(&a.model)?;
    if let Some(path) = &a.curve_png {
        report::write_curve_png(path, &format!("structlearn train: {}", a.data.display()), &outcome.history)?;
    }
    if verbosity.normal() {
        if let Some(last) = outcome.history.last() {
            eprintln!(
                "objective R = {:.6e}; train error {}; validation error {}",
                last.objective,
                last.train_error.map_or("-".into(), |e| format!("{e:.4}")),
                last.validation_error.map_or("-".into(), |e| format!("{e:.4}"))
            );
        }
        if let Some(best) = outcome.best_iteration {
            let stopped = if outcome.stopped_early { "stopped early; " } else { "" };
            eprintln!("early stopping: {stopped}the model is the one of iteration {best} (best validation error)");
        }
        eprintln!("wrote {}", a.model.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use factor_graph::UaiModel;
    use smoothed_inference::{InferenceProblem, Messages, RunOptions, Workspace};
    use structlearn::infer::{infeasibility_certificate, polish_dual};

    /// The certificate of `infer`'s infeasibility check never fires on a
    /// feasible model, whether message passing has converged or not (here
    /// with hard zeros, after every one of the first 30 iterations and after
    /// the polish), and fires on a model whose zeros contradict each other
    /// only through the weights (x0+x1+x2 = 1, x0+x1+x3 = 2, x2 = x3).
    #[test]
    fn the_infeasibility_certificate_has_no_false_positives() {
        let text = include_str!("../tests/slow_cycle4.uai").replacen("4.351310933531843", "0", 1);
        let infeasible =
            "MARKOV\n4\n2 2 2 2\n3\n3 0 1 2\n3 0 1 3\n2 2 3\n8\n0 1 1 0 1 0 0 0\n8\n0 0 0 1 0 1 1 0\n4\n1 0 0 1\n";
        for (text, feasible) in [(text.as_str(), true), (infeasible, false)] {
            let m = UaiModel::parse(text).unwrap().to_region_graph().unwrap();
            for eps in [0.01, 0.1, 1.0] {
                let eps = vec![eps; m.graph.factor_types().len()];
                let problem = InferenceProblem::new(&m.graph, &m.theta, &eps).unwrap();
                let mut messages = Messages::zeros(&m.graph);
                let mut ws = Workspace::new(&m.graph);
                let opts = RunOptions { iterations: 1, tolerance: None, order: None };
                let mut found = false;
                for _ in 0..30 {
                    problem.run(&mut messages, &opts, &mut ws).unwrap();
                    found |= infeasibility_certificate(&problem, &messages).is_some();
                }
                polish_dual(&problem, &mut messages, 200, None, &mut |_| {}).unwrap();
                found |= infeasibility_certificate(&problem, &messages).is_some();
                assert_eq!(found, !feasible, "feasible {feasible}, eps {eps:?}");
            }
        }
    }

    /// A 4-cycle on which star updates crawl (found by scripts/check_infer_cvxpy.py):
    /// after 200 iterations the violation is still ~1e-4; the dual polish must
    /// lower A (never raise it) and cut the violation by orders of magnitude.
    #[test]
    fn dual_polish_finishes_slow_star_updates_and_never_raises_a() {
        let text = include_str!("../tests/slow_cycle4.uai");
        let m = UaiModel::parse(text).unwrap().to_region_graph().unwrap();
        let eps = vec![0.1; m.graph.factor_types().len()];
        let problem = InferenceProblem::new(&m.graph, &m.theta, &eps).unwrap();
        let mut messages = Messages::zeros(&m.graph);
        let mut ws = Workspace::new(&m.graph);
        let star =
            problem.run(&mut messages, &RunOptions { iterations: 200, tolerance: None, order: None }, &mut ws).unwrap();
        let polished = polish_dual(&problem, &mut messages, 2000, Some(1e-10), &mut |_| {}).unwrap();
        assert!(polished.dual_value <= star.dual_value, "{} > {}", polished.dual_value, star.dual_value);
        assert!(polished.max_violation < 1e-7, "violation {}", polished.max_violation);
        assert!(star.max_violation > 100.0 * polished.max_violation);
        // The polished point is a fixed point of the star updates too.
        let again =
            problem.run(&mut messages, &RunOptions { iterations: 5, tolerance: None, order: None }, &mut ws).unwrap();
        assert!((again.dual_value - polished.dual_value).abs() < 1e-9);
    }
}
