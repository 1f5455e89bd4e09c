//! What `predict`, `eval` and `train` print and write besides their main
//! output: progress over examples, metrics as text, label-map PNGs and the
//! learning-curve PNG.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use factor_graph::GridLayout;
use rayon::prelude::*;
use reporting::plots::{CurveData, plot_learning_curve};
use reporting::{ItemProgress, Verbosity};
use smoothed_inference::decoding::Certificate;
use structlearn::{Dataset, MetricsReport, PredictOptions, Prediction, Record, StructuredModel};

/// Predicts every example in parallel, with progress over examples. Unless
/// `keep_beliefs`, each prediction's beliefs (64 numbers per pair at 8
/// labels) are dropped as soon as its labels are decoded, so that memory
/// holds the labels of the whole set, not its beliefs.
///
/// With `anneal: Some(eps_min)` each labelling is the ε → 0 one
/// ([`StructuredModel::predict_example_annealed`], `opts` per stage) instead
/// of the beliefs' argmax at the model's ε.
pub fn predict_all(
    model: &StructuredModel,
    data: &Dataset,
    opts: &PredictOptions,
    anneal: Option<f64>,
    label: &str,
    verbosity: Verbosity,
    keep_beliefs: bool,
) -> Result<Vec<Prediction>> {
    each_example(model, data, label, verbosity, |k| {
        let p = match anneal {
            Some(eps_min) => model.predict_example_annealed(data, k, opts, eps_min)?.0,
            None => model.predict_example(data, k, opts)?,
        };
        Ok(lean(p, keep_beliefs))
    })
}

/// [`predict_all`] with each labelling's certificates
/// ([`StructuredModel::predict_example_certified`], or the annealed
/// prediction's): the same predictions.
pub fn predict_all_certified(
    model: &StructuredModel,
    data: &Dataset,
    opts: &PredictOptions,
    anneal: Option<f64>,
    label: &str,
    verbosity: Verbosity,
    keep_beliefs: bool,
) -> Result<Vec<(Prediction, Certificate)>> {
    each_example(model, data, label, verbosity, |k| {
        let (p, c) = match anneal {
            Some(eps_min) => model.predict_example_annealed(data, k, opts, eps_min)?,
            None => model.predict_example_certified(data, k, opts)?,
        };
        Ok((lean(p, keep_beliefs), c))
    })
}

/// `p`, without its beliefs unless `keep_beliefs`.
fn lean(p: Prediction, keep_beliefs: bool) -> Prediction {
    if keep_beliefs { p } else { Prediction { beliefs: Vec::new(), ..p } }
}

/// `predict(k)` for every example in parallel, with progress over examples.
fn each_example<T: Send>(
    model: &StructuredModel,
    data: &Dataset,
    label: &str,
    verbosity: Verbosity,
    predict: impl Fn(usize) -> Result<T, structlearn::LearnError> + Sync,
) -> Result<Vec<T>> {
    model.check_dataset(data)?;
    let progress = ItemProgress::new(label, "examples", data.len(), verbosity);
    let predictions = (0..data.len())
        .into_par_iter()
        .with_max_len(1)
        .map(|k| {
            let p = predict(k);
            progress.inc();
            p
        })
        .collect::<Result<Vec<_>, _>>()?;
    progress.finish();
    Ok(predictions)
}

/// How many predictions reached the tolerance, and the largest violation.
pub fn convergence(predictions: &[Prediction]) -> (usize, f64) {
    let converged = predictions.iter().filter(|p| p.report.converged).count();
    let worst = predictions.iter().map(|p| p.report.max_violation).fold(0.0, f64::max);
    (converged, worst)
}

/// The metrics as an aligned text table (per class: support, accuracy, IoU;
/// then the confusion matrix, rows = true class, columns = predicted).
pub fn metrics_text(r: &MetricsReport) -> String {
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "error {:.6} (accuracy {:.6}) on {} variables; mean class accuracy {}, mean IoU {}",
        r.error,
        r.accuracy,
        r.variables,
        opt(r.mean_class_accuracy),
        opt(r.mean_iou)
    );
    let _ = writeln!(s, "{:>7} {:>10} {:>10} {:>9} {:>8}", "class", "support", "predicted", "accuracy", "IoU");
    for c in &r.per_class {
        let _ = writeln!(
            s,
            "{:>7} {:>10} {:>10} {:>9} {:>8}",
            c.class,
            c.support,
            c.predicted,
            opt(c.accuracy),
            opt(c.iou)
        );
    }
    let width = r.confusion.iter().flatten().map(|v| v.to_string().len()).max().unwrap_or(1).max(4);
    let _ = writeln!(s, "confusion matrix (rows: true class, columns: predicted class)");
    let _ = write!(s, "{:>7}", "");
    for c in 0..r.confusion.len() {
        let _ = write!(s, " {c:>width$}");
    }
    let _ = writeln!(s);
    for (t, row) in r.confusion.iter().enumerate() {
        let _ = write!(s, "{t:>7}");
        for v in row {
            let _ = write!(s, " {v:>width$}");
        }
        let _ = writeln!(s);
    }
    s
}

/// Creates `dir` for [`write_label_pngs`] if needed and checks, before any
/// prediction, that it is a folder that accepts new files.
pub fn prepare_png_dir(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!("--png-dir {}: is a file, not a folder", dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("--png-dir {}: creating the folder", dir.display()))?;
    structlearn::files::check_writable(&dir.join("label-map.png"))
        .with_context(|| format!("--png-dir {}: the folder does not accept new files", dir.display()))?;
    Ok(())
}

/// Writes one PNG label map per grid-shaped example into `dir` (created if
/// needed): two classes black/white, more a fixed distinct palette. Returns
/// the files written and the number of examples skipped (not grid-shaped).
pub fn write_label_pngs(dir: &Path, data: &Dataset, predictions: &[Prediction]) -> Result<(Vec<PathBuf>, usize)> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let classes = data.examples().iter().flat_map(|e| e.graph().cardinalities().iter().copied()).max().unwrap_or(2);
    let palette =
        if classes <= 2 { datasets::LabelPalette::binary() } else { datasets::LabelPalette::distinct(classes)? };
    let mut written = Vec::new();
    let mut skipped = 0;
    for (k, (ex, p)) in data.examples().iter().zip(predictions).enumerate() {
        let Some(layout) = GridLayout::of(ex.graph()) else {
            skipped += 1;
            continue;
        };
        let raster = datasets::Raster::new(layout.height, layout.width, p.labels.clone())?;
        let img = palette.to_image(&raster)?;
        let path = dir.join(format!("{:04}-{}.png", k, file_stem(ex.name())));
        datasets::image::write_png(&path, &image::DynamicImage::ImageRgb8(img))?;
        written.push(path);
    }
    Ok((written, skipped))
}

/// A file-name-safe version of an example name.
fn file_stem(name: &str) -> String {
    let stem: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .take(60)
        .collect();
    if stem.is_empty() { "example".into() } else { stem }
}

/// Draws a training history as the learning-curve PNG: objective per step,
/// train / validation error per evaluation, against (fractional) learning
/// iterations.
pub fn write_curve_png(path: &Path, title: &str, history: &[Record]) -> Result<()> {
    let steps = history.iter().map(|r| r.step + 1).max().unwrap_or(1) as f64;
    let x = |r: &Record| (r.iteration - 1) as f64 + (r.step + 1) as f64 / steps;
    let objective: Vec<(f64, f64)> = history.iter().map(|r| (x(r), r.objective)).collect();
    let errors = CurveData {
        train: history.iter().filter_map(|r| Some((x(r), r.train_error?))).collect(),
        test: history.iter().filter_map(|r| Some((x(r), r.validation_error?))).collect(),
    };
    plot_learning_curve(path, title, &objective, &errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_text_shows_every_number() {
        let mut m = structlearn::ConfusionMatrix::new(2);
        m.add_labels(&[0, 0, 1, 1], &[0, 1, 1, 1]).unwrap();
        let text = metrics_text(&m.report());
        assert!(text.contains("error 0.250000"), "{text}");
        assert!(text.contains("mean IoU 0.5833"), "{text}");
        assert!(text.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["0", "1", "1"]), "{text}");
        assert!(text.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["1", "0", "2"]), "{text}");
    }

    #[test]
    fn file_stems_are_safe() {
        assert_eq!(file_stem("a/b c.png"), "a_b_c_png");
        assert_eq!(file_stem(""), "example");
    }
}
