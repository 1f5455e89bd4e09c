//! `cargo xtask fuzz`: structure-aware fuzzing of every loader (the
//! `structlearn-fuzz` crate), each target in supervised worker processes.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};

/// Arguments of `cargo xtask fuzz`.
#[derive(clap::Args)]
pub struct FuzzArgs {
    /// Only these targets, comma-separated (default: all): uai, model-zero,
    /// model-constant, model-linear, model-boosting, model-mlp,
    /// model-indexed-linear, model-fixed, dataset-binary, dataset-block, dataset-json,
    /// checkpoint, config, image-png, image-jpeg.
    #[arg(long, value_delimiter = ',')]
    target: Vec<String>,
    /// Inputs per target.
    #[arg(long, default_value_t = 10_000)]
    iterations: u64,
    /// Seed of the mutations (input i of a target depends on the seed and i only).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Memory limit per input, MiB (live bytes; a larger allocation aborts the input).
    #[arg(long, default_value_t = 256)]
    limit_mib: usize,
    /// An input running longer than this many seconds is a hang.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Output folder: crashes/ (each failing input and why) and summary.json.
    #[arg(long, default_value = "target/fuzz")]
    out: PathBuf,
}

/// Arguments of the hidden `fuzz-worker` subcommand the supervisor runs.
#[derive(clap::Args)]
pub struct WorkerArgs {
    #[arg(long)]
    target: String,
    #[arg(long)]
    seed: u64,
    #[arg(long)]
    start: u64,
    #[arg(long)]
    end: u64,
    #[arg(long)]
    limit: usize,
    #[arg(long)]
    out: PathBuf,
}

/// Runs the fuzz targets and fails if any input panicked, aborted, hung or broke an invariant.
pub fn fuzz(a: &FuzzArgs) -> Result<()> {
    let targets = structlearn_fuzz::targets();
    let names: Vec<_> = targets.iter().map(|t| t.name).collect();
    if let Some(unknown) = a.target.iter().find(|n| !names.contains(&n.as_str())) {
        bail!("unknown target `{unknown}`; targets: {}", names.join(", "));
    }
    let chosen: Vec<_> =
        targets.iter().filter(|t| a.target.is_empty() || a.target.iter().any(|n| n == t.name)).collect();
    let opts = structlearn_fuzz::Options {
        exe: std::env::current_exe()?,
        worker_args: vec!["fuzz-worker".into()],
        seed: a.seed,
        iterations: a.iterations,
        limit: a.limit_mib << 20,
        out: a.out.clone(),
        timeout: Duration::from_secs(a.timeout),
    };
    let mut all = Vec::new();
    for t in chosen {
        eprintln!("fuzzing {} ({} inputs)", t.name, a.iterations);
        all.push(structlearn_fuzz::supervise(t, &opts)?);
    }
    structlearn_fuzz::report(&a.out, &all, a.seed)?;
    let failures: u64 = all.iter().map(structlearn_fuzz::Stats::failures).sum();
    if failures > 0 {
        bail!("{failures} failing inputs; see {}", a.out.join("crashes").display());
    }
    Ok(())
}

/// The worker process of [`fuzz`].
pub fn worker(a: &WorkerArgs) -> Result<()> {
    Ok(structlearn_fuzz::worker(&a.target, a.seed, a.start, a.end, a.limit, &a.out)?)
}
