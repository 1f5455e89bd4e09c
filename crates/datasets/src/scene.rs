//! A synthetic data set shaped like Stanford Background (docs/MATH.md §6.3) for
//! scale benchmarks: any number of images, image size, label count and
//! feature dimensions, generated in memory with no download.
//!
//! The default is the paper's largest experiment: 572 training images of
//! 64 × 48 pixels, 8 labels (so pair regions have 64 configurations), 42
//! unary and 3 pair features. The numbers of rows, classes and features the
//! learner and the oracles see are those of the real data; the values are
//! not (they only need to make a learnable, non-trivial problem).
//!
//! One image is made as follows:
//! 1. `segments` seed points with uniform positions and labels; every pixel
//!    takes the label of its nearest seed (a Voronoi "scene" of regions);
//! 2. unary features: feature `j < unary_dim − 1` of a pixel with label `y` is
//!    `c_{y j} + s·(u − ½)` with `u ~ U[0, 1)`, spread `s = 3`, where the class
//!    centres `c_{y j} ~ U[0, 1)` are drawn once per data set; the last
//!    feature is the constant 1;
//! 3. pair features for 4-neighbours: each of the first `pair_dim − 1` is
//!    `~ U[0, 0.8]` if both pixels have the same label and `~ U[0.2, 1]`
//!    otherwise (the denoising pair feature); the last is the constant 1.
//!
//! Image `k` of split `s` draws from its own ChaCha8 stream (`s · 2³² + k`,
//! train `s = 0`, test `s = 1`) and the class centres from stream `2³³`, so
//! the first `n` images are the same for any image count.
//!
//! ```
//! use datasets::scene::{SceneConfig, generate};
//! let cfg = SceneConfig { train: 2, test: 1, height: 6, width: 5, labels: 3, ..SceneConfig::default() };
//! let data = generate(&cfg).unwrap();
//! assert_eq!(data.train.len(), 2);
//! assert_eq!(data.train.factor_types()[1].classes, 9); // 3 × 3 pair configurations
//! assert_eq!(data.train.features(0, 0).len(), 6 * 5 * 42);
//! ```

use std::sync::Arc;

use factor_graph::{GridLayout, PAIRWISE, RegionGraph, UNARY};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};

use crate::DatasetError;
use crate::denoising::{MAX_IMAGES, MAX_PIXELS};

/// Spread of the unary features around their class centres (module docs).
const SPREAD: f64 = 3.0;

/// Settings of the generator; [`Default`] is the Stanford Background shape
/// (572 training and 143 test images of 64 × 48, 8 labels, 42 unary and 3
/// pair features), seed 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SceneConfig {
    /// Number of training images.
    pub train: usize,
    /// Number of test images.
    pub test: usize,
    /// Image rows.
    pub height: usize,
    /// Image columns.
    pub width: usize,
    /// Labels per pixel (pair regions have `labels²` configurations).
    pub labels: usize,
    /// Unary feature dimension, including the constant feature.
    pub unary_dim: usize,
    /// Pair feature dimension, including the constant feature.
    pub pair_dim: usize,
    /// Seed points (regions) per image.
    pub segments: usize,
    /// Seed of all random streams.
    pub seed: u64,
}

impl Default for SceneConfig {
    fn default() -> Self {
        Self {
            train: 572,
            test: 143,
            height: 48,
            width: 64,
            labels: 8,
            unary_dim: 42,
            pair_dim: 3,
            segments: 6,
            seed: 0,
        }
    }
}

impl SceneConfig {
    /// Checks the settings: at least 2 pixels and at most [`MAX_PIXELS`], at
    /// least 2 labels with `labels²` configurations of a pair representable,
    /// feature dimensions ≥ 1 (the constant), at least one segment, at most
    /// [`MAX_IMAGES`] per split.
    pub fn validate(&self) -> Result<(), DatasetError> {
        match self.height.checked_mul(self.width) {
            Some(n) if (2..=MAX_PIXELS).contains(&n) => {}
            _ => {
                return Err(DatasetError::config(
                    "height/width",
                    format!("{}×{} must have between 2 and {MAX_PIXELS} pixels", self.height, self.width),
                ));
            }
        }
        if self.labels < 2 || self.labels > u16::MAX as usize {
            return Err(DatasetError::config("labels", format!("must be in 2..=65535, got {}", self.labels)));
        }
        if self.unary_dim == 0 || self.pair_dim == 0 {
            return Err(DatasetError::config(
                "unary_dim/pair_dim",
                "feature dimensions include the constant: at least 1",
            ));
        }
        if self.unary_dim.checked_mul(self.labels).is_none() {
            return Err(DatasetError::config("unary_dim", "unary_dim × labels overflows"));
        }
        if self.segments == 0 {
            return Err(DatasetError::config("segments", "at least one segment per image"));
        }
        for (field, count) in [("train", self.train), ("test", self.test)] {
            if count > MAX_IMAGES {
                return Err(DatasetError::config(field, format!("{count} images exceed the limit of {MAX_IMAGES}")));
            }
        }
        Ok(())
    }

    /// The factor types: `unary` and `pairwise` with the configured dimensions.
    pub fn factor_types(&self) -> Vec<FactorTypeInfo> {
        vec![FactorTypeInfo::new(UNARY, self.unary_dim), FactorTypeInfo::new(PAIRWISE, self.pair_dim)]
    }
}

/// A generated scene data set.
#[derive(Debug, Clone)]
pub struct SceneData {
    /// The settings it was made from.
    pub config: SceneConfig,
    /// Training examples.
    pub train: Dataset,
    /// Test examples.
    pub test: Dataset,
}

/// Generates the training and test sets (module docs). The same config always
/// gives the same data.
pub fn generate(cfg: &SceneConfig) -> Result<SceneData, DatasetError> {
    cfg.validate()?;
    let graph = Arc::new(factor_graph::grid(cfg.height, cfg.width, cfg.labels)?);
    let mut centre_rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    centre_rng.set_stream(1 << 33);
    let centres: Vec<f64> = (0..cfg.labels * cfg.unary_dim).map(|_| centre_rng.random::<f64>()).collect();
    let split = |family: u64, count: usize, name: &str| -> Result<Dataset, DatasetError> {
        let examples = (0..count).map(|k| example(cfg, &graph, &centres, family, k, name)).collect();
        Ok(Dataset::new(cfg.factor_types(), examples)?)
    };
    Ok(SceneData { config: cfg.clone(), train: split(0, cfg.train, "train")?, test: split(1, cfg.test, "test")? })
}

fn example(cfg: &SceneConfig, graph: &Arc<RegionGraph>, centres: &[f64], family: u64, k: usize, name: &str) -> Example {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    rng.set_stream((family << 32) | k as u64);
    let layout = GridLayout { height: cfg.height, width: cfg.width };
    let seeds: Vec<(f64, f64, usize)> = (0..cfg.segments)
        .map(|_| {
            let r = rng.random::<f64>() * cfg.height as f64;
            let c = rng.random::<f64>() * cfg.width as f64;
            (r, c, rng.random_range(0..cfg.labels))
        })
        .collect();
    let labels: Vec<usize> = (0..layout.num_pixels())
        .map(|i| {
            let (r, c) = ((i / cfg.width) as f64, (i % cfg.width) as f64);
            let d2 = |s: &(f64, f64, usize)| (s.0 - r).powi(2) + (s.1 - c).powi(2);
            seeds.iter().min_by(|a, b| d2(a).total_cmp(&d2(b))).map_or(0, |s| s.2)
        })
        .collect();
    let d = cfg.unary_dim;
    let mut unary = Vec::with_capacity(labels.len() * d);
    for &y in &labels {
        for j in 0..d - 1 {
            unary.push(centres[y * d + j] + SPREAD * (rng.random::<f64>() - 0.5));
        }
        unary.push(1.0);
    }
    let pairwise = crate::image::pair_features(layout, cfg.pair_dim, |i, j, row| {
        let (lo, hi) = if labels[i] == labels[j] { (0.0, 0.8) } else { (0.2, 1.0) };
        let last = row.len() - 1;
        for v in &mut row[..last] {
            *v = lo + (hi - lo) * rng.random::<f64>();
        }
        row[last] = 1.0;
    });
    Example::new(
        format!("scene-{name}-{k:04}"),
        graph.clone(),
        Some(labels),
        vec![FeatureBlock { dim: d, values: unary }, pairwise],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> SceneConfig {
        SceneConfig {
            train: 3,
            test: 2,
            height: 7,
            width: 9,
            labels: 4,
            unary_dim: 5,
            pair_dim: 2,
            ..SceneConfig::default()
        }
    }

    #[test]
    fn shapes_follow_the_config() {
        let cfg = small();
        let data = generate(&cfg).unwrap();
        assert_eq!((data.train.len(), data.test.len()), (3, 2));
        let ft = data.train.factor_types();
        assert_eq!((ft[0].dim, ft[0].classes, ft[1].dim, ft[1].classes), (5, 4, 2, 16));
        let ex = &data.train.examples()[0];
        let pairs = 7 * 8 + 6 * 9;
        let (unary, pair) = (data.train.features(0, 0), data.train.features(0, 1));
        assert_eq!(unary.len(), 63 * 5);
        assert_eq!(pair.len(), pairs * 2);
        assert!(unary.chunks(5).all(|r| r[4] == 1.0));
        assert!(pair.chunks(2).all(|r| r[1] == 1.0 && (0.0..=1.0).contains(&r[0])));
        assert!(ex.labels().unwrap().iter().all(|&y| y < 4));
    }

    #[test]
    fn images_are_reproducible_and_independent_of_the_count() {
        let a = generate(&small()).unwrap();
        let b = generate(&SceneConfig { train: 5, ..small() }).unwrap();
        for k in 0..3 {
            assert_eq!(a.train.examples()[k].labels(), b.train.examples()[k].labels());
            assert_eq!(a.train.feature_blocks(k), b.train.feature_blocks(k));
        }
        let c = generate(&SceneConfig { seed: 1, ..small() }).unwrap();
        assert_ne!(a.train.feature_blocks(0), c.train.feature_blocks(0));
    }

    #[test]
    fn features_carry_the_labels() {
        // Pair feature 0 is lower on average for equal labels; unary features
        // are nearer their own class centre than the others on average.
        let cfg = SceneConfig { train: 4, height: 20, width: 20, segments: 8, ..small() };
        let data = generate(&cfg).unwrap();
        let layout = GridLayout { height: 20, width: 20 };
        let (mut same, mut diff) = (Vec::new(), Vec::new());
        for (k, ex) in data.train.examples().iter().enumerate() {
            let y = ex.labels().unwrap();
            for (p, row) in data.train.features(k, 1).chunks(2).enumerate() {
                let (i, j) = layout.pair_pixels(p);
                if y[i] == y[j] { same.push(row[0]) } else { diff.push(row[0]) }
            }
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        assert!(!diff.is_empty() && mean(&same) + 0.1 < mean(&diff), "{} vs {}", mean(&same), mean(&diff));
    }

    #[test]
    fn bad_settings_are_errors() {
        for cfg in [
            SceneConfig { labels: 1, ..small() },
            SceneConfig { unary_dim: 0, ..small() },
            SceneConfig { height: 1, width: 1, ..small() },
            SceneConfig { segments: 0, ..small() },
            SceneConfig { height: usize::MAX, width: 2, ..small() },
        ] {
            assert!(matches!(generate(&cfg), Err(DatasetError::InvalidConfig { .. })), "{cfg:?}");
        }
    }
}
