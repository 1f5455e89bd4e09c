//! `structlearn infer` on models whose zero entries rule out every labelling
//! (an error naming the file and the factors, never a dual value and labels),
//! on feasible models with hard zeros (inference as usual), and UAI errors
//! that name the file.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{BIN, stderr};

fn infer(path: &Path, extra: &[&str]) -> Output {
    Command::new(BIN).arg("infer").arg(path).args(extra).env("RAYON_NUM_THREADS", "1").output().unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The hostile-input review's `infeasible.uai`: f(0,1) allows only (0,0) and
/// f(1,2) only (1,1). `infer` printed a dual value of −1.1e15 (ln 2 with
/// `--polish 0`), beliefs, labels (0, 0, 1) of probability 0 and exit code 0;
/// with `--tolerance` it advised raising `--polish`, which cannot help.
#[test]
fn jointly_impossible_zeros_are_an_error_naming_the_file_and_factors() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "infeasible.uai", "MARKOV\n3\n2 2 2\n2\n2 0 1\n2 1 2\n4\n1 0 0 0\n4\n0 0 0 1\n");
    for extra in [&[][..], &["--polish", "0"], &["--tolerance", "1e-4"], &["--iterations", "0", "--polish", "0"]] {
        let o = infer(&path, extra);
        let e = stderr(&o);
        assert!(!o.status.success(), "{extra:?} accepted: {e}");
        assert!(o.stdout.is_empty(), "{extra:?}: output printed");
        assert!(e.starts_with(&format!("error: {}: ", path.display())), "{extra:?}: {e}");
        assert!(
            e.contains("factors 0 (variables 0, 1) and 1 (variables 1, 2)")
                && e.contains("every labelling probability 0")
                && e.contains("contradict each other"),
            "{extra:?}: {e}"
        );
        assert!(!e.contains("raise --polish") && !e.contains("region"), "{extra:?}: {e}");
    }
}

/// Zeros that contradict each other only in the weights, not in any single
/// label (zero propagation cannot see it): x0+x1+x2 = 1, x0+x1+x3 = 2 and
/// x2 = x3. The local polytope is empty, the dual unbounded below; message
/// passing itself proves that no labelling has positive probability, with
/// and without the polish.
#[test]
fn contradictions_only_message_passing_sees_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "counting.uai",
        "MARKOV\n4\n2 2 2 2\n3\n3 0 1 2\n3 0 1 3\n2 2 3\n8\n0 1 1 0 1 0 0 0\n8\n0 0 0 1 0 1 1 0\n4\n1 0 0 1\n",
    );
    for extra in [&[][..], &["--polish", "0"], &["--tolerance", "1e-6"], &["--iterations", "5", "--polish", "5"]] {
        let o = infer(&path, extra);
        let e = stderr(&o);
        assert!(!o.status.success(), "{extra:?} accepted: {e}");
        assert!(
            e.starts_with(&format!("error: {}: the model gives every labelling probability 0", path.display()))
                && e.contains("message passing proves it"),
            "{extra:?}: {e}"
        );
        assert!(!e.contains("raise --polish"), "{extra:?}: {e}");
    }
}

/// The review's `allzero.uai` and `conflict.uai` said "region 0/2 has
/// potential -inf in every configuration": internal regions of the converted
/// graph. They now name the file and its factors.
#[test]
fn all_zero_factors_are_named_by_their_index_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let allzero = write(dir.path(), "allzero.uai", "MARKOV\n2\n2 2\n1\n1 0\n2\n0 0\n");
    let e = stderr(&infer(&allzero, &[]));
    assert_eq!(
        e.trim_end(),
        format!(
            "error: {}: factor 0 (variable 0) is 0 in every entry of its table, so the model gives every labelling \
             probability 0; give some entry a positive value",
            allzero.display()
        )
    );
    let conflict = write(dir.path(), "conflict.uai", "MARKOV\n2\n2 2\n2\n2 0 1\n2 1 0\n4\n1 0 0 0\n4\n0 0 0 1\n");
    let e = stderr(&infer(&conflict, &[]));
    assert!(
        e.starts_with(&format!(
            "error: {}: factors 0 (variables 0, 1) and 1 (variables 1, 0) are over the same variables",
            conflict.display()
        )),
        "{e}"
    );
    assert!(!e.contains("region"), "{e}");
}

/// Feasible models with hard zeros infer as before: zeros that force labels
/// along a chain, and a model whose message passing has not converged, which
/// keeps the usual warning (no infeasibility error).
#[test]
fn feasible_models_with_hard_zeros_infer_as_usual() {
    let dir = tempfile::tempdir().unwrap();
    // y0 = 0 forced; each pair copies its label; the last pair allows (0,0) and (1,1).
    let chain = write(
        dir.path(),
        "chain.uai",
        "MARKOV\n4\n2 2 2 2\n4\n1 0\n2 0 1\n2 1 2\n2 2 3\n2\n1 0\n4\n1 0 0 1\n4\n2 0 0 1\n4\n1 0 0 3\n",
    );
    let o = infer(&chain, &["--eps", "0.1", "--tolerance", "1e-9"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["labels"], serde_json::json!([0, 0, 0, 0]));
    assert!(v["dual_value"].as_f64().unwrap().is_finite());
    // The labelling's own score, below the ε = 0 bound the messages certify.
    let (score, bound) = (v["score"].as_f64().unwrap(), v["bound"].as_f64().unwrap());
    assert!(score.is_finite() && bound >= score - 1e-9 * score.abs().max(1.0), "{v}");
    assert_eq!(v["gap"].as_f64().unwrap(), bound - score);
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    // Not converged: the usual warning, exit code 0.
    let slow = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slow_cycle4.uai")).unwrap();
    let slow = write(dir.path(), "slow_zeros.uai", &slow.replacen("4.351310933531843", "0", 1));
    let o = infer(&slow, &["--eps", "0.1", "--iterations", "3", "--polish", "1", "--tolerance", "1e-12"]);
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(e.contains("warning") && e.contains("above --tolerance") && e.contains("raise --polish"), "{e}");
    let o = infer(&slow, &["--eps", "0.1", "--iterations", "2", "--polish", "0"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A frustrated cycle of "differ" constraints over three binary variables
/// has no labelling of positive probability, but its LP relaxation is
/// feasible (each pair half (0,1), half (1,0)), so message passing cannot
/// prove it: the relaxation's result is printed, and the constrained
/// decoding, trying every labelling, reports that none is allowed — never a
/// forbidden labelling.
#[test]
fn no_labelling_is_reported_where_the_model_forbids_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "odd_cycle.uai",
        "MARKOV\n3\n2 2 2\n3\n2 0 1\n2 1 2\n2 0 2\n4\n0 1 1 0\n4\n0 1 1 0\n4\n0 1 1 0\n",
    );
    let o = infer(&path, &["--tolerance", "1e-9"]);
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(e.contains("the hard constraints rule out every labelling"), "{e}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["labels"].is_null() && v["score"].is_null() && v["gap"].is_null(), "{v}");
    assert!(v["bound"].as_f64().is_some() && v["decoding"]["error"].is_string(), "{v}");
}

/// Every UAI parse error names the file; a too-large table gives its size and the limit.
#[test]
fn uai_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "badtok.uai", "MARKOV\n2\n2 x\n");
    assert_eq!(
        stderr(&infer(&bad, &[])).trim_end(),
        format!("error: {}: UAI line 3: expected cardinality (>= 1) of variable 1, found `x`", bad.display())
    );
    let big = write(dir.path(), "bigcard_factor.uai", "MARKOV\n1\n1000000000000\n1\n1 0\n1000000000000\n1\n");
    assert_eq!(
        stderr(&infer(&big, &[])).trim_end(),
        format!(
            "error: {}: UAI line 5: factor 0's table would have 1000000000000 entries (the product of the \
             cardinalities of its variable), more than the limit of 268435456 entries per factor; reduce the \
             cardinalities or split the factor",
            big.display()
        )
    );
}

/// `infer m.uai | head -c 10`: standard output closed early is an error, not
/// a panic ("failed printing to stdout: Broken pipe").
#[cfg(unix)]
#[test]
fn a_closed_standard_output_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    // Enough variables that the JSON exceeds a pipe's buffer.
    let n = 20_000;
    let cards = vec!["2"; n].join(" ");
    let path = write(dir.path(), "big.uai", &format!("MARKOV\n{n}\n{cards}\n0\n"));
    let o = common::run_with_stdout_closed(&["infer", path.to_str().unwrap(), "--iterations", "0", "--polish", "0"]);
    let e = stderr(&o);
    assert!(!e.contains("panicked"), "{e}");
    assert!(!o.status.success() && e.contains("writing the result to standard output"), "{e}");
}
