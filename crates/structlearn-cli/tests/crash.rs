//! Crash safety: `structlearn train` killed with SIGKILL at random points and
//! restarted with `--resume` loses at most the learning iteration in progress
//! (Algorithm 1 with `--checkpoint-within 0`: at most the step in progress)
//! and ends with the model and curve of an uninterrupted run, bit for bit —
//! for Algorithm 1 and for the perceptrons, whose checkpoints, resume and
//! model saving come from the shared run loop (`structlearn::Executor`).
//!
//! The default run kills it at 5 random points; `STRUCTLEARN_CRASH_KILLS=20`
//! (or more) runs the acceptance version.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

const BIN: &str = env!("CARGO_BIN_EXE_structlearn");

struct Run {
    model: PathBuf,
    curve: PathBuf,
    checkpoint: PathBuf,
    /// The learner, oracles and iterations.
    args: Vec<String>,
}

impl Run {
    fn new(dir: &Path, args: &[&str]) -> Self {
        Self {
            model: dir.join("m.slm"),
            curve: dir.join("curve.csv"),
            checkpoint: dir.join("train.ckpt"),
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    fn command(&self, data: &Path, resume: bool) -> Command {
        let mut c = Command::new(BIN);
        c.args(["train", "--data", data.to_str().unwrap(), "--seed", "5"])
            .args(&self.args)
            .arg("--model")
            .arg(&self.model)
            .arg("--curve")
            .arg(&self.curve)
            .arg("--checkpoint")
            .arg(&self.checkpoint)
            .env("RAYON_NUM_THREADS", "2")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if resume {
            c.arg("--resume");
        }
        c
    }

    /// The curve without its two timing columns (which differ between any two runs).
    fn curve_without_times(&self) -> Vec<String> {
        std::fs::read_to_string(&self.curve)
            .unwrap()
            .lines()
            .map(|l| l.rsplitn(3, ',').nth(2).unwrap().to_string())
            .collect()
    }

    /// Learning iterations whose every step is in the curve.
    fn finished_in_curve(&self, steps: usize) -> usize {
        let text = std::fs::read_to_string(&self.curve).unwrap_or_default();
        let rows: Vec<(usize, usize)> = text
            .lines()
            .skip(1)
            .filter_map(|l| {
                let mut f = l.split(',');
                Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
            })
            .collect();
        rows.iter().filter(|&&(_, s)| s + 1 == steps).map(|&(i, _)| i).max().unwrap_or(0)
    }
}

#[test]
fn sigkill_at_random_points_then_resume_ends_bitwise_identical() {
    let data = structlearn_fuzz::seeds::dataset(8, 5, 6, 4);
    // Checkpoints inside the learning iterations too: a kill loses at most the step in progress.
    let args =
        ["--iterations", "8", "--checkpoint-within", "0", "--oracle", "unary=boosting", "--oracle", "pairwise=linear"];
    // fit + message passing for each of the two types
    kill_and_resume(&data, &args, 4);
}

/// The local perceptron, one epoch per learning iteration, on data it cannot
/// separate (so that it never stops early).
#[test]
fn the_local_perceptron_resumes_bitwise_after_sigkill() {
    let args = ["--learner", "perceptron-local", "--iterations", "300", "--oracle", "unary=linear"];
    kill_and_resume(&inseparable(12, 5, 6), &[&args[..], &["--oracle", "pairwise=linear"]].concat(), 1);
}

/// The structured perceptron (exact MAP by enumeration: small images).
#[test]
fn the_global_perceptron_resumes_bitwise_after_sigkill() {
    let args = ["--learner", "perceptron-global", "--iterations", "150", "--oracle", "unary=linear"];
    kill_and_resume(&inseparable(12, 2, 4), &[&args[..], &["--oracle", "pairwise=linear"]].concat(), 1);
}

/// Binary images whose features do not determine their labels.
fn inseparable(count: usize, h: usize, w: usize) -> structlearn::Dataset {
    use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let layout = factor_graph::GridLayout { height: h, width: w };
    let graph = Arc::new(factor_graph::grid(h, w, 2).unwrap());
    let examples = (0..count)
        .map(|k| {
            Example::new(
                format!("noise{k}"),
                graph.clone(),
                Some((0..h * w).map(|_| rng.random_range(0..2)).collect()),
                vec![
                    FeatureBlock { dim: 2, values: (0..h * w).flat_map(|_| [rng.random::<f64>(), 1.0]).collect() },
                    FeatureBlock { dim: 1, values: (0..layout.num_pairs()).map(|_| rng.random::<f64>()).collect() },
                ],
            )
        })
        .collect();
    Dataset::new(vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)], examples).unwrap()
}

/// Trains on `data` with `args` once uninterrupted and once killed with
/// SIGKILL at random points and resumed each time (`steps` per learning
/// iteration); the two must end with the same model and curve bits. The
/// default run kills 5 times; `STRUCTLEARN_CRASH_KILLS` sets it.
fn kill_and_resume(data: &structlearn::Dataset, args: &[&str], steps: usize) {
    let kills: usize = std::env::var("STRUCTLEARN_CRASH_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train.sld");
    data.save(&path).unwrap();
    let data = path;

    let reference = Run::new(&dir.path().join("reference").tap_mkdir(), args);
    let t0 = Instant::now();
    let out = reference.command(&data, false).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let duration = t0.elapsed();

    let crashed = Run::new(&dir.path().join("crashed").tap_mkdir(), args);
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    let mut killed = 0;
    let mut attempts = 0;
    // Iterations finished (all steps in the curve) when the last kill landed.
    let mut finished_at_kill: Option<usize> = None;
    let mut lost = Vec::new();
    // Checks the resume point a run reports against the progress before the kill.
    let mut check_resume = |stderr: &str, finished_at_kill: &mut Option<usize>| {
        let resumed = stderr.lines().find_map(|l| {
            l.strip_prefix("resumed after learning iteration ")?.split(' ').next()?.parse::<usize>().ok()
        });
        if let (Some(finished), Some(resumed)) = (*finished_at_kill, resumed) {
            assert!(resumed + 1 >= finished, "finished {finished} iterations, resumed after {resumed}");
            lost.push(finished - resumed.min(finished));
            *finished_at_kill = None;
        }
    };
    while killed < kills {
        attempts += 1;
        assert!(attempts < kills * 20, "could not land {kills} kills inside training");
        let mut child = crashed.command(&data, true).spawn().unwrap();
        std::thread::sleep(duration.mul_f64(rng.random_range(0.02..0.9)));
        if child.try_wait().unwrap().is_some() {
            // Finished before the kill: start over for the remaining kill points.
            let out = child.wait_with_output().unwrap();
            check_resume(&String::from_utf8_lossy(&out.stderr), &mut finished_at_kill);
            for f in [&crashed.checkpoint, &crashed.curve, &crashed.model] {
                let _ = std::fs::remove_file(f);
            }
            continue;
        }
        child.kill().unwrap(); // SIGKILL
        let out = child.wait_with_output().unwrap();
        if out.status.success() {
            // It finished between the check above and the kill (a resumed run
            // has little left to do): as when it finished before the kill.
            check_resume(&String::from_utf8_lossy(&out.stderr), &mut finished_at_kill);
            for f in [&crashed.checkpoint, &crashed.curve, &crashed.model] {
                let _ = std::fs::remove_file(f);
            }
            continue;
        }
        check_resume(&String::from_utf8_lossy(&out.stderr), &mut finished_at_kill);
        killed += 1;
        finished_at_kill = Some(crashed.finished_in_curve(steps));
    }
    // Run to the end from the last checkpoint.
    let out = crashed.command(&data, true).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    check_resume(&stderr, &mut finished_at_kill);
    assert_eq!(std::fs::read(&crashed.model).unwrap(), std::fs::read(&reference.model).unwrap(), "models differ");
    assert_eq!(crashed.curve_without_times(), reference.curve_without_times(), "curves differ");
    eprintln!(
        "{args:?}: {killed} SIGKILLs in {attempts} runs; learning iterations lost per kill: {lost:?}; uninterrupted \
         run {duration:?}"
    );
}

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}

impl TapMkdir for PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}
