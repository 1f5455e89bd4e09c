//! Noisy binary shapes for Hazan & Urtasun's denoising experiment (NIPS 2010
//! §6; docs/MATH.md §6.4). Their four 64×64 base images are not available, so
//! four distinct shapes are drawn here ([`Shape`]); each is corrupted many
//! times and every corruption is one example whose labels are the clean shape.
//!
//! Noise models (per pixel, independent), with `y ∈ {0, 1}` the clean label:
//!
//! * [`Noise::Gaussian`]: `x = y + N(0, σ²)`, `σ = 0.6` (thresholding at 0.5
//!   misclassifies about 20% of the pixels);
//! * [`Noise::Bimodal`]: a mixture of two Gaussians with equal weights per
//!   class, `y = 0`: `N(0.08, 0.03²)` / `N(0.46, 0.03²)`, `y = 1`:
//!   `N(0.55, 0.02²)` / `N(0.42, 0.10²)` — one mode of each class sits between
//!   the other class's modes, so no threshold on `x` separates the classes
//!   (the values follow the bimodal noise of Kumar & Hebert's data, which
//!   Hazan & Urtasun used).
//!
//! Models ([`Tying`]): node potentials from the pixel value, Ising-type edges
//! with a bias only.
//!
//! * `Tied`: unary features `[x_i, 1]`, pair features `[1]` (two factor types,
//!   4 + 4 parameters with the linear class);
//! * `Untied`: unary `[x_i, 1, i]` and pair `[1, e]`, whose last feature is
//!   the pixel / pair index — the group of the `indexed-linear` class, so
//!   every vertex and every edge has its own parameters
//!   (`4·H·W + 4·#pairs` in all).
//!
//! Random streams: image `k` of split `s` (train 0, test 1) of shape `j`
//! and noise `n` draws from ChaCha8 stream `((4j + 2n + s) << 32) | k` of
//! the seed.
//!
//! ```
//! use datasets::shapes::{Noise, Shape, ShapesConfig, Tying, generate};
//! let cfg = ShapesConfig { size: 16, train: 2, test: 1, ..ShapesConfig::default() };
//! let d = generate(&cfg, Shape::Ring, Noise::Bimodal, Tying::Untied).unwrap();
//! assert_eq!(d.train.len(), 2);
//! assert_eq!(d.train.factor_types()[0].dim, 3); // [x, 1, pixel index]
//! ```

use std::sync::Arc;

use factor_graph::{GridLayout, PAIRWISE, UNARY};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};

use crate::DatasetError;
use crate::image::Raster;

/// The four base shapes.
///
/// ```
/// let disk = datasets::shapes::Shape::Disk.render(16).unwrap();
/// assert_eq!(disk.data()[8 * 16 + 8], 1); // the centre is foreground
/// assert_eq!(disk.data()[0], 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// A filled disk in the centre.
    Disk,
    /// A square frame (ring) with a hole.
    Ring,
    /// A plus sign.
    Cross,
    /// A filled triangle.
    Triangle,
}

impl Shape {
    /// All four, in order.
    pub const ALL: [Shape; 4] = [Shape::Disk, Shape::Ring, Shape::Cross, Shape::Triangle];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Disk => "disk",
            Shape::Ring => "ring",
            Shape::Cross => "cross",
            Shape::Triangle => "triangle",
        }
    }

    /// The clean binary image of side `size` (1 = foreground).
    pub fn render(self, size: usize) -> Result<Raster<usize>, DatasetError> {
        let s = size as f64;
        let data = (0..size * size)
            .map(|i| {
                // Pixel centre in [0, 1]².
                let (r, c) = (((i / size) as f64 + 0.5) / s, ((i % size) as f64 + 0.5) / s);
                let inside = match self {
                    Shape::Disk => (r - 0.5).powi(2) + (c - 0.5).powi(2) <= 0.32f64.powi(2),
                    Shape::Ring => {
                        let m = (r - 0.5).abs().max((c - 0.5).abs());
                        (0.2..=0.4).contains(&m)
                    }
                    Shape::Cross => {
                        ((r - 0.5).abs() <= 0.1 && (c - 0.5).abs() <= 0.4)
                            || ((c - 0.5).abs() <= 0.1 && (r - 0.5).abs() <= 0.4)
                    }
                    Shape::Triangle => (0.15..=0.85).contains(&r) && (c - 0.5).abs() <= 0.5 * (r - 0.15) / 0.7 * 0.8,
                };
                usize::from(inside)
            })
            .collect();
        Raster::new(size, size, data)
    }
}

/// The noise models (module docs).
///
/// ```
/// assert_eq!(datasets::shapes::Noise::Bimodal.name(), "bimodal");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Noise {
    /// `x = y + N(0, 0.6²)`.
    Gaussian,
    /// A two-Gaussian mixture per class.
    Bimodal,
}

impl Noise {
    /// Both, in order.
    pub const ALL: [Noise; 2] = [Noise::Gaussian, Noise::Bimodal];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Noise::Gaussian => "gaussian",
            Noise::Bimodal => "bimodal",
        }
    }

    fn sample(self, y: usize, rng: &mut ChaCha8Rng) -> f64 {
        let z = normal(rng);
        match self {
            Noise::Gaussian => y as f64 + 0.6 * z,
            Noise::Bimodal => {
                let first = rng.random::<f64>() < 0.5;
                let (mu, sd) = match (y, first) {
                    (0, true) => (0.08, 0.03),
                    (0, false) => (0.46, 0.03),
                    (_, true) => (0.55, 0.02),
                    (_, false) => (0.42, 0.10),
                };
                mu + sd * z
            }
        }
    }
}

/// Shared or per-region parameters (module docs).
///
/// ```
/// use datasets::shapes::{Tying, factor_types};
/// assert_eq!(factor_types(Tying::Untied)[0].dim, 3); // [x, 1, pixel index]
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tying {
    /// One function per factor type.
    Tied,
    /// One function per vertex and per edge (the `indexed-linear` class).
    Untied,
}

impl Tying {
    /// Both, in order.
    pub const ALL: [Tying; 2] = [Tying::Tied, Tying::Untied];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Tying::Tied => "tied",
            Tying::Untied => "untied",
        }
    }
}

/// Sizes and seed; [`Default`] is the paper's: 64×64, 40 training and 10 test
/// corruptions per shape, seed 0.
///
/// ```
/// let cfg = datasets::shapes::ShapesConfig::default();
/// assert_eq!((cfg.size, cfg.train, cfg.test), (64, 40, 10));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShapesConfig {
    /// Image side in pixels (4 to 1024).
    pub size: usize,
    /// Training corruptions.
    pub train: usize,
    /// Test corruptions.
    pub test: usize,
    /// Seed.
    pub seed: u64,
}

impl Default for ShapesConfig {
    fn default() -> Self {
        Self { size: 64, train: 40, test: 10, seed: 0 }
    }
}

/// The data of one (shape, noise, tying).
///
/// ```
/// use datasets::shapes::{Noise, Shape, ShapesConfig, Tying, generate};
/// let d = generate(&ShapesConfig { size: 8, train: 1, test: 2, seed: 0 }, Shape::Disk, Noise::Gaussian, Tying::Tied).unwrap();
/// assert_eq!(d.test_noisy.len(), 2);
/// assert_eq!(d.train.examples()[0].labels(), Some(d.clean.data()));
/// ```
#[derive(Debug, Clone)]
pub struct ShapesData {
    /// Training corruptions.
    pub train: Dataset,
    /// Test corruptions.
    pub test: Dataset,
    /// The clean shape.
    pub clean: Raster<usize>,
    /// The noisy values of the test images.
    pub test_noisy: Vec<Raster<f64>>,
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u: f64 = rng.random();
    let v: f64 = rng.random();
    (-2.0 * (1.0 - u).ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// The factor types of a tying (`unary`, `pairwise`).
///
/// ```
/// let t = datasets::shapes::factor_types(datasets::shapes::Tying::Tied);
/// assert_eq!((t[0].dim, t[1].dim), (2, 1));
/// ```
pub fn factor_types(tying: Tying) -> Vec<FactorTypeInfo> {
    match tying {
        Tying::Tied => vec![FactorTypeInfo::new(UNARY, 2), FactorTypeInfo::new(PAIRWISE, 1)],
        Tying::Untied => vec![FactorTypeInfo::new(UNARY, 3), FactorTypeInfo::new(PAIRWISE, 2)],
    }
}

/// Oracle specifications of the linear energies of a tying: `linear` (tied) or
/// `indexed-linear` with one group per pixel / pair (untied).
///
/// ```
/// let specs = datasets::shapes::oracle_specs(datasets::shapes::Tying::Untied, 8);
/// assert_eq!(specs[0].1["groups"], 64);
/// assert_eq!(specs[1].1["groups"], 112);
/// ```
pub fn oracle_specs(tying: Tying, size: usize) -> Vec<(String, serde_json::Value)> {
    let layout = GridLayout { height: size, width: size };
    match tying {
        Tying::Tied => {
            [UNARY, PAIRWISE].iter().map(|t| (t.to_string(), serde_json::json!({"kind": "linear"}))).collect()
        }
        Tying::Untied => vec![
            (UNARY.into(), serde_json::json!({"kind": "indexed-linear", "groups": layout.num_pixels()})),
            (PAIRWISE.into(), serde_json::json!({"kind": "indexed-linear", "groups": layout.num_pairs()})),
        ],
    }
}

/// Generates the training and test corruptions of `shape` (module docs).
///
/// ```
/// use datasets::shapes::{Noise, Shape, ShapesConfig, Tying, generate};
/// let d = generate(&ShapesConfig { size: 8, train: 2, test: 1, seed: 0 }, Shape::Cross, Noise::Bimodal, Tying::Tied).unwrap();
/// assert_eq!(d.train.len(), 2);
/// ```
pub fn generate(cfg: &ShapesConfig, shape: Shape, noise: Noise, tying: Tying) -> Result<ShapesData, DatasetError> {
    if !(4..=1024).contains(&cfg.size) {
        return Err(DatasetError::config("size", format!("{} pixels; use 4 to 1024", cfg.size)));
    }
    if cfg.train == 0 || cfg.test == 0 || cfg.train.max(cfg.test) as u64 >= 1 << 32 {
        return Err(DatasetError::config("train/test", "both need 1 to 2³² − 1 images"));
    }
    let size = cfg.size;
    let layout = GridLayout { height: size, width: size };
    let graph = Arc::new(factor_graph::grid(size, size, 2)?);
    let clean = shape.render(size)?;
    let j = Shape::ALL.iter().position(|&s| s == shape).unwrap_or(0) as u64;
    let n = Noise::ALL.iter().position(|&s| s == noise).unwrap_or(0) as u64;
    // Pair features: the bias feature 1, and for untied models the pair's index.
    let mut pairwise = crate::image::pair_features(layout, factor_types(tying)[1].dim, |_, _, row| row[0] = 1.0);
    if tying == Tying::Untied {
        for (e, row) in pairwise.values.chunks_exact_mut(2).enumerate() {
            row[1] = e as f64;
        }
    }
    let split = |s: u64, count: usize| -> Result<(Dataset, Vec<Raster<f64>>), DatasetError> {
        let mut examples = Vec::with_capacity(count);
        let mut noisy_images = Vec::with_capacity(count);
        for k in 0..count {
            let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
            rng.set_stream(((4 * j + 2 * n + s) << 32) | k as u64);
            let noisy: Vec<f64> = clean.data().iter().map(|&y| noise.sample(y, &mut rng)).collect();
            let unary: Vec<f64> = noisy
                .iter()
                .enumerate()
                .flat_map(|(i, &x)| match tying {
                    Tying::Tied => vec![x, 1.0],
                    Tying::Untied => vec![x, 1.0, i as f64],
                })
                .collect();
            examples.push(Example::new(
                format!("{}-{}-{}-{k:02}", shape.name(), noise.name(), if s == 0 { "train" } else { "test" }),
                graph.clone(),
                Some(clean.data().to_vec()),
                vec![FeatureBlock { dim: factor_types(tying)[0].dim, values: unary }, pairwise.clone()],
            ));
            noisy_images.push(Raster::new(size, size, noisy)?);
        }
        Ok((Dataset::new(factor_types(tying), examples)?, noisy_images))
    };
    let (train, _) = split(0, cfg.train)?;
    let (test, test_noisy) = split(1, cfg.test)?;
    Ok(ShapesData { train, test, clean, test_noisy })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_distinct_and_non_trivial() {
        let imgs: Vec<Raster<usize>> = Shape::ALL.iter().map(|s| s.render(64).unwrap()).collect();
        for (a, img) in imgs.iter().enumerate() {
            let fg = img.data().iter().sum::<usize>() as f64 / 4096.0;
            assert!((0.1..0.6).contains(&fg), "{:?}: foreground share {fg}", Shape::ALL[a]);
            for other in &imgs[a + 1..] {
                let diff = img.data().iter().zip(other.data()).filter(|(x, y)| x != y).count();
                assert!(diff > 400, "shapes differ in only {diff} pixels");
            }
        }
    }

    #[test]
    fn noise_levels_are_as_documented() {
        let cfg = ShapesConfig { size: 64, train: 4, test: 1, seed: 3 };
        for noise in Noise::ALL {
            let d = generate(&cfg, Shape::Disk, noise, Tying::Tied).unwrap();
            let (mut wrong, mut total) = (0, 0);
            for (k, ex) in d.train.examples().iter().enumerate() {
                for (i, &y) in ex.labels().unwrap().iter().enumerate() {
                    wrong += usize::from((d.train.features(k, 0)[2 * i] > 0.5) != (y == 1));
                    total += 1;
                }
            }
            let rate = wrong as f64 / total as f64;
            match noise {
                Noise::Gaussian => assert!((0.17..0.23).contains(&rate), "threshold error {rate}"),
                Noise::Bimodal => assert!(rate > 0.1, "threshold error {rate}"),
            }
        }
    }

    #[test]
    fn untied_features_carry_the_region_index() {
        let cfg = ShapesConfig { size: 8, train: 1, test: 1, seed: 0 };
        let d = generate(&cfg, Shape::Cross, Noise::Gaussian, Tying::Untied).unwrap();
        let (unary, pair) = (d.train.features(0, 0), d.train.features(0, 1));
        assert_eq!(unary[3 * 5 + 2], 5.0);
        assert_eq!(pair[2 * 7 + 1], 7.0);
        let tied = generate(&cfg, Shape::Cross, Noise::Gaussian, Tying::Tied).unwrap();
        assert_eq!(tied.train.features(0, 0)[2 * 5], unary[3 * 5]);
    }
}
