//! `mpirun -n R structlearn train …` against one process (docs/guide/scaling.md):
//! the same model file byte for byte and the same curve (but for the
//! wall-clock columns) with linear, constant and boosting energies, over 2
//! and 3 ranks; with MLP energies over 2 ranks, the same curve and model
//! energies to 1e-9 relative and the same error counts; a learner that
//! cannot spread its work is refused on every rank with an error naming the
//! rank, and the run ends (no hang); a build without the `mpi` feature
//! refuses to train alone in each of R processes.

use std::path::Path;
use std::process::Command;

use datasets::denoising::{DenoisingConfig, generate};

const BIN: &str = env!("CARGO_BIN_EXE_structlearn");

/// The denoising data of a tiny run, written to `dir`.
fn write_data(dir: &Path) {
    let data = generate(&DenoisingConfig { height: 12, width: 12, train: 7, test: 3, sigma: 1.5, seed: 5 }).unwrap();
    data.train.save(&dir.join("train.sld")).unwrap();
    data.test.save(&dir.join("test.sld")).unwrap();
}

fn train_args<'a>(model: &'a str, curve: &'a str, unary: &'a str, pairwise: &'a str) -> Vec<String> {
    [
        "train",
        "-q",
        "--data",
        "train.sld",
        "--validation",
        "test.sld",
        "--model",
        model,
        "--curve",
        curve,
        "--oracle",
        &format!("unary={unary}"),
        "--oracle",
        &format!("pairwise={pairwise}"),
        "--iterations",
        "3",
        "--train-error-every",
        "1",
        "--threads",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[cfg(feature = "mpi")]
fn mpirun(dir: &Path, ranks: usize, args: &[String]) -> std::process::Output {
    Command::new("mpirun")
        .current_dir(dir)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--oversubscribe", "-n", &ranks.to_string(), BIN])
        .args(args)
        .output()
        .expect("mpirun (Debian: openmpi-bin) on the PATH")
}

/// The curve without its wall-clock columns.
#[cfg(feature = "mpi")]
fn curve(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split(',').take(10).collect::<Vec<_>>().join(","))
        .collect()
}

#[cfg(feature = "mpi")]
#[test]
fn ranks_write_one_process_model_and_curve() {
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path());
    for (unary, pairwise) in [("linear", "linear"), ("linear", "constant"), ("boosting", "boosting")] {
        let args = train_args("one.slm", "one.csv", unary, pairwise);
        let out = Command::new(BIN).current_dir(dir.path()).args(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        for ranks in [2, 3] {
            let out = mpirun(dir.path(), ranks, &train_args("r.slm", "r.csv", unary, pairwise));
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let what = format!("{unary}/{pairwise} over {ranks} ranks");
            let read = |f: &str| std::fs::read(dir.path().join(f)).unwrap();
            assert_eq!(read("one.slm"), read("r.slm"), "{what}: model file");
            assert_eq!(curve(&dir.path().join("one.csv")), curve(&dir.path().join("r.csv")), "{what}: curve");
        }
    }
}

/// `a` and `b` within 1e-9 relative (of the larger magnitude, at least 1e-300).
#[cfg(feature = "mpi")]
fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300)
}

#[cfg(feature = "mpi")]
#[test]
fn ranks_learn_one_process_mlp_to_the_tolerance() {
    use structlearn::{Dataset, ModelRegistry, StructuredModel};
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path());
    let train = Dataset::load(&dir.path().join("train.sld")).unwrap();
    for (unary, pairwise) in [("mlp", "mlp"), ("boosting", "mlp")] {
        let args = train_args("one.slm", "one.csv", unary, pairwise);
        let out = Command::new(BIN).current_dir(dir.path()).args(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let out = mpirun(dir.path(), 2, &train_args("r.slm", "r.csv", unary, pairwise));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let what = format!("{unary}/{pairwise} over 2 ranks");
        let (one, two) = (curve(&dir.path().join("one.csv")), curve(&dir.path().join("r.csv")));
        assert_eq!(one.len(), two.len(), "{what}: curve length");
        let header: Vec<&str> = one[0].split(',').collect();
        for (a, b) in one.iter().zip(&two) {
            for ((x, y), column) in a.split(',').zip(b.split(',')).zip(&header) {
                match (x.parse::<f64>(), y.parse::<f64>()) {
                    // Message passing's largest violation ends at rounding level (≈ 1e-15), where
                    // relative differences mean nothing: absolute, against its tolerance of 1e-4.
                    (Ok(x), Ok(y)) if *column == "max_violation" => {
                        assert!((x - y).abs() <= 1e-9, "{what}: curve {a} vs {b}")
                    }
                    (Ok(x), Ok(y)) => assert!(close(x, y), "{what}: curve {a} vs {b}"),
                    _ => assert_eq!(x, y, "{what}: curve {a} vs {b}"),
                }
            }
        }
        let registry = ModelRegistry::with_builtin();
        let one = StructuredModel::load(&dir.path().join("one.slm"), &registry).unwrap();
        let two = StructuredModel::load(&dir.path().join("r.slm"), &registry).unwrap();
        assert_eq!(one.epsilon(), two.epsilon(), "{what}");
        for k in 0..train.len() {
            let (a, b) = (one.energies(&train, k).unwrap(), two.energies(&train, k).unwrap());
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(&b) {
                assert!(close(*x, *y) || (x.abs() < 1e-300 && y.abs() < 1e-300), "{what}: example {k}: {x} vs {y}");
            }
        }
    }
}

#[cfg(feature = "mpi")]
#[test]
fn a_learner_that_cannot_spread_its_work_ends_the_run_on_every_rank() {
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path());
    let mut args = train_args("b.slm", "b.csv", "linear", "linear");
    args.extend(["--learner".to_string(), "perceptron-global".to_string()]);
    let out = mpirun(dir.path(), 2, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("of 2: the perceptron-global learner cannot train over 2 ranks"), "{stderr}");
    assert!(!dir.path().join("b.slm").exists(), "no partial model");
    // More ranks than examples.
    let out = mpirun(dir.path(), 8, &train_args("b.slm", "b.csv", "linear", "linear"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("7 examples cannot be spread over 8 ranks"), "{stderr}");
}

#[cfg(not(feature = "mpi"))]
#[test]
fn a_build_without_mpi_refuses_to_run_as_one_of_several_ranks() {
    // Open MPI's mpirun, and Slurm's srun (with any MPI plugin).
    for launcher in ["OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"] {
        let dir = tempfile::tempdir().unwrap();
        write_data(dir.path());
        let out = Command::new(BIN)
            .current_dir(dir.path())
            .env(launcher, "2")
            .args(train_args("m.slm", "m.csv", "linear", "linear"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains("built without MPI"), "{launcher}: {stderr}");
        assert!(!dir.path().join("m.slm").exists());
    }
}

/// A launcher that says 2 processes while MPI sees one (`srun --mpi=none`):
/// an error, not two processes each training alone.
#[cfg(feature = "mpi")]
#[test]
fn a_launcher_without_mpi_support_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path());
    let out = Command::new(BIN)
        .current_dir(dir.path())
        .env("SLURM_STEP_NUM_TASKS", "2")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(train_args("m.slm", "m.csv", "linear", "linear"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("one of 2 processes, but MPI sees 1"), "{stderr}");
    assert!(!dir.path().join("m.slm").exists());
}
