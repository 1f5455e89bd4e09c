//! `cargo xtask test`: every test of the project in one command — the Rust
//! workspace's (`cargo test --workspace`), the MPI tests where MPI is
//! installed (`mpirun` on the PATH: `cargo test -p structlearn-cli --features
//! mpi --test mpi`, real `mpirun -n 2` and `-n 3` runs), then the Python package's pytest
//! suite in a virtual environment under `target/` that this command sets up
//! (numpy, pytest, maturin, scikit-learn and joblib from PyPI, then
//! `pip install ./crates/structlearn-py`, which builds the extension).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Arguments of `cargo xtask test`.
#[derive(clap::Args)]
pub struct TestArgs {
    /// Skip `cargo test --workspace` (run only the Python suite).
    #[arg(long)]
    pub python_only: bool,
    /// Skip the Python suite (run only `cargo test --workspace`).
    #[arg(long, conflicts_with = "python_only")]
    pub rust_only: bool,
    /// The Python interpreter that creates the virtual environment (≥ 3.9).
    #[arg(long, default_value = "python3")]
    pub python: String,
    /// Extra arguments for pytest (e.g. `-k bytes`).
    #[arg(last = true)]
    pub pytest_args: Vec<String>,
}

fn run(what: &str, cmd: &mut Command) -> Result<()> {
    eprintln!("xtask test: {what}");
    let status = cmd.status().with_context(|| format!("{what}: could not start {:?}", cmd.get_program()))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// The workspace root (the parent of `xtask/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Whether an MPI launcher answers `mpirun --version`.
fn mpi_installed() -> bool {
    Command::new("mpirun").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Runs the Rust tests, then the Python suite (module docs).
pub fn test(args: &TestArgs) -> Result<()> {
    let root = root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    if !args.python_only {
        run("cargo test --workspace", Command::new(&cargo).args(["test", "--workspace"]).current_dir(&root))?;
        if mpi_installed() {
            run(
                "cargo test -p structlearn-cli --features mpi --test mpi",
                Command::new(&cargo)
                    .args(["test", "-p", "structlearn-cli", "--features", "mpi", "--test", "mpi"])
                    .current_dir(&root),
            )?;
        } else {
            eprintln!(
                "xtask test: MPI tests skipped: no `mpirun` on the PATH (Debian: apt-get install openmpi-bin \
                 libopenmpi-dev libclang-dev)"
            );
        }
    }
    if args.rust_only {
        return Ok(());
    }
    // The command line the byte-identity tests compare against.
    run(
        "cargo build -p structlearn-cli",
        Command::new(&cargo).args(["build", "-p", "structlearn-cli"]).current_dir(&root),
    )?;
    let cli = root.join("target/debug/structlearn");
    let venv = root.join("target/pyenv");
    let bin = venv.join(if cfg!(windows) { "Scripts" } else { "bin" });
    let python = bin.join(if cfg!(windows) { "python.exe" } else { "python" });
    if !python.exists() {
        run(
            "creating the virtual environment target/pyenv",
            Command::new(&args.python).arg("-m").arg("venv").arg(&venv),
        )?;
    }
    run(
        "pip install numpy pytest maturin scikit-learn joblib",
        Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "numpy",
            "pytest",
            "maturin>=1.9.4",
            "scikit-learn",
            "joblib",
        ]),
    )?;
    run(
        "pip install ./crates/structlearn-py",
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--force-reinstall", "--no-deps"])
            .arg(root.join("crates/structlearn-py"))
            .current_dir(&root),
    )?;
    run(
        "pytest crates/structlearn-py/tests",
        Command::new(&python)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(root.join("crates/structlearn-py/tests"))
            .args(&args.pytest_args)
            .env("STRUCTLEARN_CLI", &cli)
            .env("STRUCTLEARN_REQUIRE_CLI", "1")
            .current_dir(&root),
    )
}
