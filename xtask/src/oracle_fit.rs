//! `cargo xtask oracle-fit DIR --oracle JSON`: cold fits of one built-in
//! oracle on a biased logistic-regression problem stored as raw arrays, for
//! side-by-side comparisons with other libraries (`scripts/compare_peers.py`
//! writes the problems, runs the peers on the same rows, and calls this).
//!
//! `DIR` holds `shape.txt` (`rows dim classes`), `x.f64` (`rows × dim`),
//! `labels.u32` (`rows`) and optionally `bias.f64` (`rows × classes`; zero
//! when absent), little-endian and row-major. Each file's size is checked
//! against the shape before it is read. Prints one JSON line: the wall-clock
//! and CPU seconds of each fit (the problem is loaded before the clock
//! starts) and the training loss `L = Σ_k [log Σ_y e^{g_k(y)+b_k(y)} − g_k(y_k) − b_k(y_k)]`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use oracles::{Features, FitContext, Problem, model_loss};
use structlearn::oracle_config::oracle_from_json;

/// Options of [`run`].
#[derive(Debug, Clone)]
pub struct Options {
    /// The problem's folder.
    pub dir: PathBuf,
    /// The oracle as JSON (`{"kind": "linear", ...}`).
    pub oracle: String,
    /// Fits to time (the median and all times are printed).
    pub repeat: usize,
    /// Seed of each fit.
    pub seed: u64,
}

/// The most zero biases (`rows × classes`, 2 GiB of `f64`) created for a
/// problem without `bias.f64`; every other array's size is that of its file.
const MAX_ZERO_BIAS: usize = 1 << 28;

/// The most fits `--repeat` asks for.
const MAX_REPEAT: usize = 1000;

/// A problem read from raw arrays.
struct RawProblem {
    rows: usize,
    dim: usize,
    classes: usize,
    x: Vec<f64>,
    labels: Vec<usize>,
    bias: Vec<f64>,
}

fn read_array(path: &Path, count: usize, width: usize) -> Result<Vec<u8>> {
    let want = count.checked_mul(width).context("shape too large")?;
    let len = std::fs::metadata(path).with_context(|| format!("{}: cannot read", path.display()))?.len();
    if len != want as u64 {
        bail!("{}: {len} bytes, but shape.txt implies {want} ({count} values of {width} bytes)", path.display());
    }
    std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))
}

fn f64s(bytes: &[u8]) -> Vec<f64> {
    bytes.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes"))).collect()
}

fn load(dir: &Path) -> Result<RawProblem> {
    let shape_path = dir.join("shape.txt");
    let shape = std::fs::read_to_string(&shape_path)
        .with_context(|| format!("{}: cannot read (expected `rows dim classes`)", shape_path.display()))?;
    let numbers: Vec<usize> = shape
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("{}: expected three whole numbers `rows dim classes`", shape_path.display()))?;
    let [rows, dim, classes] = numbers[..] else {
        bail!("{}: expected three numbers `rows dim classes`, found {}", shape_path.display(), numbers.len());
    };
    let too_large =
        |what: &str| format!("{}: {rows} × {what} values overflow this machine's sizes", shape_path.display());
    // Labels are u32, so no problem stored here has more classes.
    if classes > 1 << 32 {
        bail!("{}: {classes} classes, but labels.u32 holds labels below 2^32", shape_path.display());
    }
    let x = f64s(&read_array(&dir.join("x.f64"), rows.checked_mul(dim).with_context(|| too_large("dim"))?, 8)?);
    let labels = read_array(&dir.join("labels.u32"), rows, 4)?
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
        .collect();
    let bias_path = dir.join("bias.f64");
    let entries = rows.checked_mul(classes).with_context(|| too_large("classes"))?;
    let bias = if bias_path.exists() {
        f64s(&read_array(&bias_path, entries, 8)?)
    } else {
        // Zero biases are not in a file, so their size is bounded here instead.
        if entries > MAX_ZERO_BIAS {
            bail!(
                "{}: {rows} rows × {classes} classes is more than the {MAX_ZERO_BIAS} zero biases created without a \
                 bias.f64; write the biases to bias.f64 (rows × classes little-endian f64)",
                shape_path.display()
            );
        }
        vec![0.0; entries]
    };
    Ok(RawProblem { rows, dim, classes, x, labels, bias })
}

/// Loads the problem, fits `repeat` times and prints the JSON line.
pub fn run(opts: &Options) -> Result<()> {
    let spec: serde_json::Value =
        serde_json::from_str(&opts.oracle).with_context(|| format!("--oracle `{}` is not JSON", opts.oracle))?;
    let oracle = oracle_from_json(&spec)?;
    if !(1..=MAX_REPEAT).contains(&opts.repeat) {
        bail!("--repeat {}: must be between 1 and {MAX_REPEAT}", opts.repeat);
    }
    let raw = load(&opts.dir)?;
    let features =
        Features::new(&raw.x, raw.rows, raw.dim).with_context(|| opts.dir.join("x.f64").display().to_string())?;
    let problem = Problem::new(features, &raw.labels, &raw.bias, raw.classes, None)
        .with_context(|| format!("{}: not a valid problem", opts.dir.display()))?;
    let mut wall = Vec::with_capacity(opts.repeat);
    let mut cpu = Vec::with_capacity(opts.repeat);
    let mut loss = f64::NAN;
    for _ in 0..opts.repeat {
        let (t0, c0) = (Instant::now(), crate::bench_scale::cpu_seconds());
        let model = oracle.fit(&problem, None, FitContext { seed: opts.seed })?;
        wall.push(t0.elapsed().as_secs_f64());
        cpu.push(crate::bench_scale::cpu_seconds() - c0);
        loss = model_loss(model.as_ref(), &problem)?;
    }
    let median = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    };
    let line = serde_json::json!({
        "oracle": spec,
        "rows": raw.rows,
        "dim": raw.dim,
        "classes": raw.classes,
        "threads": rayon::current_num_threads(),
        "seconds": median(&wall),
        "cpu_seconds": median(&cpu),
        "all_seconds": wall,
        "loss": loss,
        "loss_per_row": loss / raw.rows as f64,
    });
    println!("{line}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, bytes: &[u8]) {
        std::fs::write(dir.join(name), bytes).unwrap();
    }

    #[test]
    fn loads_a_dumped_problem_and_refuses_files_of_the_wrong_size() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "shape.txt", b"3 2 2\n");
        let x: Vec<u8> = [0.0f64, 1.0, 1.0, 1.0, 2.0, 1.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        write(dir.path(), "x.f64", &x);
        write(dir.path(), "labels.u32", &[0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]);
        let p = load(dir.path()).unwrap();
        assert_eq!((p.rows, p.dim, p.classes), (3, 2, 2));
        assert_eq!(p.labels, vec![0, 1, 1]);
        assert_eq!(p.bias, vec![0.0; 6]);
        run(&Options { dir: dir.path().into(), oracle: r#"{"kind":"linear"}"#.into(), repeat: 1, seed: 0 }).unwrap();
        write(dir.path(), "bias.f64", &[0; 8]);
        let err = load(dir.path()).err().unwrap().to_string();
        assert!(err.contains("bias.f64") && err.contains("48"), "{err}");
        write(dir.path(), "shape.txt", b"4 2 2\n");
        let err = load(dir.path()).err().unwrap().to_string();
        assert!(err.contains("x.f64") && err.contains("64"), "{err}");
        write(dir.path(), "shape.txt", b"4 2\n");
        assert!(load(dir.path()).is_err());
    }

    #[test]
    fn shapes_that_would_allocate_beyond_the_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let x: Vec<u8> = [0.5f64, 1.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        write(dir.path(), "x.f64", &x);
        write(dir.path(), "labels.u32", &[0; 8]);
        // Classes beyond the u32 labels, zero biases beyond the limit, a product that overflows.
        for (shape, expected) in [
            ("2 1 1000000000000", "labels below 2^32"),
            ("2 1 4294967296", "zero biases"),
            ("2 1 9223372036854775808", "labels below 2^32"),
        ] {
            write(dir.path(), "shape.txt", shape.as_bytes());
            let err = load(dir.path()).err().unwrap().to_string();
            assert!(err.contains("shape.txt") && err.contains(expected), "{shape}: {err}");
        }
        write(dir.path(), "shape.txt", b"2 1 2");
        let opts = |repeat| Options { dir: dir.path().into(), oracle: r#"{"kind":"linear"}"#.into(), repeat, seed: 0 };
        for repeat in [0, MAX_REPEAT + 1] {
            assert!(run(&opts(repeat)).unwrap_err().to_string().contains("--repeat"));
        }
    }
}
