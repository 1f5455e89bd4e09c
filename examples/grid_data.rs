//! Train on your own grid data: images you already have as label maps and
//! per-pixel measurements become a `Dataset` of 4-connected grids; train a
//! boosted-tree unary and a linear pairwise energy, evaluate, save the model
//! and draw a predicted label map.
//!
//! Run with `cargo run --release --example grid_data`.

use std::sync::Arc;

use factor_graph::{GridLayout, grid};
use structlearn::oracle_config::{oracle_from_json, parse_oracle_arg};
use structlearn::{
    ConfusionMatrix, Dataset, Example, FactorTypeInfo, FeatureBlock, PredictOptions, StructuredModel, TrainConfig,
    Trainer,
};

/// Your data: per image, a label map (here: a disc) and a noisy measurement
/// per pixel. Replace this by your loader.
fn my_images(count: usize, seed: u64) -> Vec<(Vec<usize>, Vec<f64>)> {
    let (h, w) = (24, 24);
    let mut s = seed;
    let mut uniform = move || {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..count)
        .map(|_| {
            let (cr, cc, rad) = (6.0 + 12.0 * uniform(), 6.0 + 12.0 * uniform(), 4.0 + 4.0 * uniform());
            let labels: Vec<usize> = (0..h * w)
                .map(|i| usize::from((((i / w) as f64 - cr).powi(2) + ((i % w) as f64 - cc).powi(2)).sqrt() < rad))
                .collect();
            let measured = labels.iter().map(|&y| y as f64 + 1.2 * (uniform() - 0.5)).collect();
            (labels, measured)
        })
        .collect()
}

/// One `Example` per image: unary features `[measurement, 1]` per pixel, pair
/// features `[|difference of measurements|, 1]` per neighbouring pair, in the
/// region order of `factor_graph::grid` (see `GridLayout`).
fn to_dataset(images: &[(Vec<usize>, Vec<f64>)], h: usize, w: usize) -> Result<Dataset, Box<dyn std::error::Error>> {
    let graph = Arc::new(grid(h, w, 2)?); // shared by every image of this size
    let layout = GridLayout { height: h, width: w };
    let examples = images
        .iter()
        .enumerate()
        .map(|(k, (labels, measured))| {
            let unary = measured.iter().flat_map(|&x| [x, 1.0]).collect();
            let pair = (0..layout.num_pairs())
                .flat_map(|p| {
                    let (i, j) = layout.pair_pixels(p);
                    [(measured[i] - measured[j]).abs(), 1.0]
                })
                .collect();
            Example::new(
                format!("image{k}"),
                graph.clone(),
                Some(labels.clone()),
                vec![FeatureBlock { dim: 2, values: unary }, FeatureBlock { dim: 2, values: pair }],
            )
        })
        .collect();
    Ok(Dataset::new(vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 2)], examples)?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let train = to_dataset(&my_images(12, 1), 24, 24)?;
    let test = to_dataset(&my_images(6, 2), 24, 24)?;
    // The same specifications as `structlearn train --oracle ...`.
    let oracles = ["unary=boosting:rounds=10,leaf_l2=1", "pairwise=linear"]
        .iter()
        .map(|arg| {
            let (factor_type, spec) = parse_oracle_arg(arg)?;
            Ok((factor_type, oracle_from_json(&spec)?))
        })
        .collect::<Result<Vec<_>, structlearn::LearnError>>()?;
    let config = TrainConfig { learning_iterations: 8, ..TrainConfig::default() };
    let mut trainer = Trainer::new(&train, oracles, config)?.with_validation(&test);
    let outcome = trainer.train()?;
    for r in outcome.history.iter().filter(|r| r.validation_error.is_some()) {
        println!(
            "iteration {}: objective {:.1}, train error {:.4}, test error {:.4}",
            r.iteration,
            r.objective,
            r.train_error.unwrap_or(f64::NAN),
            r.validation_error.unwrap_or(f64::NAN)
        );
    }

    let predictions = outcome.model.predict(&test, &PredictOptions { iterations: 500, tolerance: Some(1e-4) })?;
    let metrics = ConfusionMatrix::from_predictions(&test, &predictions)?;
    println!(
        "converged test error {:.4}, mean IoU {:.4}, confusion {:?}",
        metrics.error_rate(),
        metrics.mean_iou().unwrap_or(f64::NAN),
        metrics.rows()
    );

    let dir = std::env::temp_dir().join("structlearn-grid-example");
    std::fs::create_dir_all(&dir)?;
    outcome.model.save(&dir.join("model.slm"))?;
    let reloaded = StructuredModel::load(&dir.join("model.slm"), &oracles::ModelRegistry::with_builtin())?;
    assert_eq!(reloaded.predict_example(&test, 0, &PredictOptions::default())?.labels.len(), 24 * 24);
    let labels = datasets::Raster::new(24, 24, predictions[0].labels.clone())?;
    datasets::image::write_label_png(&dir.join("image0.png"), &labels, &datasets::LabelPalette::binary())?;
    println!("wrote {} and {}", dir.join("model.slm").display(), dir.join("image0.png").display());
    Ok(())
}
