//! What the command-line tests share: the binary, running it, its stderr.

#![allow(dead_code)] // each test binary uses its own part of it

use std::process::{Command, Output};

/// The `structlearn` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_structlearn");

/// Runs `structlearn ARGS` on two worker threads.
pub fn run(args: &[&str]) -> Output {
    run_with_env(args, &[])
}

/// [`run`] with these environment variables set as well.
pub fn run_with_env(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Output {
    let mut command = Command::new(BIN);
    command.args(args).env("RAYON_NUM_THREADS", "2");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().unwrap()
}

/// The standard error of a run, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `structlearn ARGS` with its standard output closed before it writes
/// (`structlearn … | head -c 0`).
#[cfg(unix)]
pub fn run_with_stdout_closed(args: &[&str]) -> Output {
    use std::process::Stdio;
    let mut child = Command::new(BIN).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}
