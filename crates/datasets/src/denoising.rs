//! The synthetic binary denoising data set of NIPS §8 (docs/MATH.md §6.1).
//!
//! One image is made as follows:
//! 1. every pixel `u_i ~ U[0, 1]`;
//! 2. `u` is blurred with a Gaussian of standard deviation `σ` (10 pixels in
//!    the paper) — see [`gaussian_blur`] for the border rule;
//! 3. `y_i = 1` where the blurred value is `≥ 0.5` (the blurred image's mean),
//!    else `0`: smooth blobs with about half the pixels in each class;
//! 4. unary features `φ_i = [a_i, 1]` with `a_i ~ U[0, 0.9]` if `y_i = 0` and
//!    `a_i ~ U[0.1, 1]` if `y_i = 1`;
//! 5. pair features for 4-neighbours `φ_ij = [b_ij, 1]` with `b_ij ~ U[0, 0.8]`
//!    if `y_i = y_j` and `b_ij ~ U[0.2, 1]` otherwise.
//!
//! # Random streams
//!
//! Image `k` of split `s` draws from its own ChaCha8 stream: the generator is
//! seeded with [`DenoisingConfig::seed`] and its stream number is
//! `s · 2³² + k` (train `s = 0`, test `s = 1`). Images are therefore independent
//! of each other and of the number of images: the test set does not change when
//! the number of training images does, and the first `n` training images are the
//! same for every `train ≥ n`. Within an image the draws come in a fixed order —
//! the `H·W` pixels of step 1 (raster order), the `H·W` unary features (raster
//! order), then the pair features in [`GridLayout::pair_pixels`] order —, each a
//! 53-bit uniform `t ∈ [0, 1)` mapped to `lo + (hi − lo)·t`.
//!
//! ```
//! use datasets::denoising::{DenoisingConfig, generate};
//! let cfg = DenoisingConfig { height: 20, width: 30, train: 2, test: 1, ..DenoisingConfig::default() };
//! let data = generate(&cfg).unwrap();
//! assert_eq!(data.train.len(), 2);
//! assert_eq!(data.test.factor_types()[1].classes, 4); // pair configurations
//! assert_eq!(data.train.features(0, 0).len(), 20 * 30 * 2); // [φ_i, 1] per pixel
//! ```

use std::sync::Arc;

use factor_graph::{GridLayout, PAIRWISE, RegionGraph, UNARY};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};

use crate::DatasetError;
use crate::image::Raster;

/// Largest image (in pixels) the generator accepts, to fail fast on typos
/// rather than exhaust memory.
pub const MAX_PIXELS: usize = 1 << 24;

/// Most images per split: image `k` uses random stream `split · 2³² + k`.
pub const MAX_IMAGES: usize = u32::MAX as usize;

/// Half-width of the truncated Gaussian kernel, in standard deviations.
pub const KERNEL_RADIUS_SIGMAS: f64 = 4.0;

/// Settings of the denoising generator; [`Default`] is the paper's setting
/// (16 training and 16 test images of 100 × 100, `σ = 10`), seed 0.
///
/// ```
/// use datasets::denoising::{DenoisingConfig, generate};
/// let cfg = DenoisingConfig { height: 20, width: 30, train: 2, test: 1, seed: 3, ..DenoisingConfig::default() };
/// let data = generate(&cfg).unwrap();
/// assert_eq!((data.train.len(), data.test.len()), (2, 1));
/// assert_eq!(data.train.examples()[0].graph().num_variables(), 20 * 30);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DenoisingConfig {
    /// Image rows.
    pub height: usize,
    /// Image columns.
    pub width: usize,
    /// Number of training images.
    pub train: usize,
    /// Number of test images.
    pub test: usize,
    /// Standard deviation of the Gaussian blur, in pixels.
    pub sigma: f64,
    /// Seed of all random streams.
    pub seed: u64,
}

impl Default for DenoisingConfig {
    fn default() -> Self {
        Self { height: 100, width: 100, train: 16, test: 16, sigma: 10.0, seed: 0 }
    }
}

impl DenoisingConfig {
    /// Checks the settings: at least two pixels (so that there is a pair), at
    /// most [`MAX_PIXELS`], at most [`MAX_IMAGES`] per split, and a finite
    /// positive `sigma`. Zero images in a split are allowed (that data set is
    /// then empty).
    pub fn validate(&self) -> Result<(), DatasetError> {
        if self.height == 0 || self.width == 0 {
            return Err(DatasetError::config(
                "height/width",
                format!("an image needs at least one row and column, got {}×{}", self.height, self.width),
            ));
        }
        match self.height.checked_mul(self.width) {
            Some(n) if n < 2 => {
                return Err(DatasetError::config("height/width", "a 1×1 image has no pairs; use at least 2 pixels"));
            }
            Some(n) if n <= MAX_PIXELS => {}
            _ => {
                return Err(DatasetError::config(
                    "height/width",
                    format!("{}×{} exceeds the limit of {MAX_PIXELS} pixels", self.height, self.width),
                ));
            }
        }
        for (field, count) in [("train", self.train), ("test", self.test)] {
            if count > MAX_IMAGES {
                return Err(DatasetError::config(field, format!("{count} images exceed the limit of {MAX_IMAGES}")));
            }
        }
        if !(self.sigma.is_finite() && self.sigma > 0.0) {
            return Err(DatasetError::config("sigma", format!("must be finite and positive, got {}", self.sigma)));
        }
        Ok(())
    }

    /// The grid layout of the images.
    pub fn layout(&self) -> GridLayout {
        GridLayout { height: self.height, width: self.width }
    }
}

/// Which data set an image belongs to; selects its random stream.
///
/// ```
/// use datasets::denoising::{DenoisingConfig, generate};
/// let data = generate(&DenoisingConfig { height: 5, width: 5, train: 1, test: 1, ..Default::default() }).unwrap();
/// assert_eq!(data.test_images[0].name, "denoising-test-000");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Split {
    /// Training images (stream family 0).
    Train,
    /// Test images (stream family 1).
    Test,
}

impl Split {
    fn name(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Test => "test",
        }
    }
}

/// One generated image in plain form, for plotting and inspection.
///
/// ```
/// let data = datasets::denoising::generate(&datasets::denoising::DenoisingConfig {
///     height: 4, width: 6, train: 1, test: 1, ..Default::default()
/// }).unwrap();
/// let img = &data.train_images[0];
/// assert!(img.truth.data().iter().all(|&y| y <= 1) && img.noisy.width() == 6);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct DenoisingImage {
    /// The example's name, e.g. `denoising-test-003`.
    pub name: String,
    /// The noisy input: the non-constant unary feature `a_i` of every pixel.
    pub noisy: Raster<f64>,
    /// The true labels `y_i ∈ {0, 1}`.
    pub truth: Raster<usize>,
}

/// A generated denoising data set.
///
/// ```
/// let data = datasets::denoising::generate(&datasets::denoising::DenoisingConfig {
///     height: 10, width: 10, train: 1, test: 1, ..Default::default()
/// }).unwrap();
/// // `train` / `test` are `structlearn::Dataset`s; the images are kept for plotting.
/// let img = &data.test_images[0];
/// assert_eq!((img.noisy.height(), img.truth.width()), (10, 10));
/// ```
#[derive(Debug, Clone)]
pub struct DenoisingData {
    /// The settings it was made from.
    pub config: DenoisingConfig,
    /// The 4-connected binary grid shared by every example (also in each
    /// example's `graph`).
    pub graph: Arc<RegionGraph>,
    /// Training examples, factor types `unary` (dim 2) and `pairwise` (dim 2).
    pub train: Dataset,
    /// Test examples, same types.
    pub test: Dataset,
    /// The training images, in example order.
    pub train_images: Vec<DenoisingImage>,
    /// The test images, in example order.
    pub test_images: Vec<DenoisingImage>,
}

/// Generates the training and test sets (module docs for the recipe and the
/// random streams). The same config always gives the same data.
///
/// ```
/// use datasets::denoising::{DenoisingConfig, generate};
/// let cfg = DenoisingConfig { height: 8, width: 8, train: 1, test: 1, ..DenoisingConfig::default() };
/// // Same seed, same images, bit for bit.
/// assert_eq!(generate(&cfg).unwrap().train_images, generate(&cfg).unwrap().train_images);
/// ```
pub fn generate(cfg: &DenoisingConfig) -> Result<DenoisingData, DatasetError> {
    cfg.validate()?;
    let graph = Arc::new(factor_graph::grid(cfg.height, cfg.width, 2)?);
    let kernel = gaussian_kernel(cfg.sigma, cfg.height.max(cfg.width) - 1)?;
    let split = |split: Split, count: usize| -> Result<(Dataset, Vec<DenoisingImage>), DatasetError> {
        let mut examples = Vec::new();
        let mut images = Vec::new();
        for k in 0..count {
            let (ex, img) = generate_example(cfg, &kernel, split, k, &graph)?;
            examples.push(ex);
            images.push(img);
        }
        Ok((Dataset::new(factor_types(), examples)?, images))
    };
    let (train, train_images) = split(Split::Train, cfg.train)?;
    let (test, test_images) = split(Split::Test, cfg.test)?;
    Ok(DenoisingData { config: cfg.clone(), graph, train, test, train_images, test_images })
}

/// The factor types of the data set: `unary` and `pairwise`, both of dimension 2.
///
/// ```
/// let types = datasets::denoising::factor_types();
/// assert_eq!((types[0].name.as_str(), types[1].dim), ("unary", 2));
/// ```
pub fn factor_types() -> Vec<FactorTypeInfo> {
    vec![FactorTypeInfo::new(UNARY, 2), FactorTypeInfo::new(PAIRWISE, 2)]
}

/// The random stream of image `index` of `split`.
fn image_rng(seed: u64, split: Split, index: usize) -> ChaCha8Rng {
    let family: u64 = match split {
        Split::Train => 0,
        Split::Test => 1,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // `validate` keeps `index` ≤ MAX_IMAGES < 2³², so families never overlap.
    rng.set_stream((family << 32) | index as u64);
    rng
}

fn uniform(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * rng.random::<f64>()
}

fn generate_example(
    cfg: &DenoisingConfig,
    kernel: &[f64],
    split: Split,
    index: usize,
    graph: &Arc<RegionGraph>,
) -> Result<(Example, DenoisingImage), DatasetError> {
    let layout = cfg.layout();
    let n = layout.num_pixels();
    let mut rng = image_rng(cfg.seed, split, index);
    let base = Raster::new(cfg.height, cfg.width, (0..n).map(|_| rng.random::<f64>()).collect())?;
    let blurred = blur_with_kernel(&base, kernel)?;
    let labels: Vec<usize> = blurred.data().iter().map(|&v| usize::from(v >= 0.5)).collect();

    let mut unary = Vec::with_capacity(2 * n);
    let mut noisy = Vec::with_capacity(n);
    for &y in &labels {
        let a = if y == 0 { uniform(&mut rng, 0.0, 0.9) } else { uniform(&mut rng, 0.1, 1.0) };
        noisy.push(a);
        unary.extend_from_slice(&[a, 1.0]);
    }
    let pairwise = crate::image::pair_features(layout, 2, |i, j, row| {
        row[0] = if labels[i] == labels[j] { uniform(&mut rng, 0.0, 0.8) } else { uniform(&mut rng, 0.2, 1.0) };
        row[1] = 1.0;
    });

    let name = format!("denoising-{}-{index:03}", split.name());
    let image = DenoisingImage {
        name: name.clone(),
        noisy: Raster::new(cfg.height, cfg.width, noisy)?,
        truth: Raster::new(cfg.height, cfg.width, labels.clone())?,
    };
    let example =
        Example::new(name, graph.clone(), Some(labels), vec![FeatureBlock { dim: 2, values: unary }, pairwise]);
    Ok((example, image))
}

/// The normalised 1-D Gaussian kernel `k[d] ∝ exp(−d²/2σ²)` for
/// `d = −R..=R`, `R = min(⌈4σ⌉, max_radius)` (index `d + R`). Taps beyond
/// `max_radius` could never reach another pixel of an image whose longer side
/// is `max_radius + 1`, so capping keeps huge `σ` cheap without changing results.
///
/// ```
/// let k = datasets::denoising::gaussian_kernel(1.0, 10).unwrap();
/// assert!((k.iter().sum::<f64>() - 1.0).abs() < 1e-12);
/// ```
pub fn gaussian_kernel(sigma: f64, max_radius: usize) -> Result<Vec<f64>, DatasetError> {
    if !(sigma.is_finite() && sigma > 0.0) {
        return Err(DatasetError::config("sigma", format!("must be finite and positive, got {sigma}")));
    }
    let full = (KERNEL_RADIUS_SIGMAS * sigma).ceil();
    let radius = if full < max_radius as f64 { full as usize } else { max_radius };
    let taps: Vec<f64> = (0..=2 * radius)
        .map(|i| {
            let d = i as f64 - radius as f64;
            (-d * d / (2.0 * sigma * sigma)).exp()
        })
        .collect();
    let total: f64 = taps.iter().sum();
    Ok(taps.into_iter().map(|t| t / total).collect())
}

/// Gaussian blur with standard deviation `sigma` (pixels).
///
/// **Border rule: truncated, renormalised kernel.** The kernel is cut at
/// `±⌈4σ⌉` (mass lost < 10⁻⁴) and, at every pixel, only the taps that fall
/// inside the image are used, divided by their total weight. The result is
/// thus a weighted *average* of image pixels everywhere — a constant image
/// stays constant, and for i.i.d. `U[0, 1]` pixels every output pixel,
/// corners included, has mean exactly 0.5, so thresholding at 0.5 is unbiased
/// up to the border. Zero padding would darken the border (mean 0.25 at a
/// corner for σ ≪ image) and paint a frame of label 0; mirroring keeps the mean
/// but reuses pixels, forcing blobs to be symmetric about the border. The
/// price of renormalising is more variance at the border (fewer pixels are
/// averaged), i.e. slightly less smooth labels there; that mirrors what a
/// camera crop of a larger smooth scene would show. Since the image domain is
/// a rectangle and the kernel separable, renormalising each 1-D pass by its
/// in-image mass equals renormalising the 2-D kernel.
///
/// ```
/// use datasets::Raster;
/// let flat = Raster::filled(5, 5, 0.3).unwrap();
/// let blurred = datasets::denoising::gaussian_blur(&flat, 2.0).unwrap();
/// assert!(blurred.data().iter().all(|v| (v - 0.3).abs() < 1e-12)); // constants stay constant
/// ```
pub fn gaussian_blur(image: &Raster<f64>, sigma: f64) -> Result<Raster<f64>, DatasetError> {
    let longer = image.height().max(image.width());
    let kernel = gaussian_kernel(sigma, longer.saturating_sub(1))?;
    blur_with_kernel(image, &kernel)
}

/// Separable, renormalised blur (see [`gaussian_blur`]); `kernel` has odd length.
fn blur_with_kernel(image: &Raster<f64>, kernel: &[f64]) -> Result<Raster<f64>, DatasetError> {
    let (h, w) = (image.height(), image.width());
    let mut rows = vec![0.0; h * w];
    for (src, dst) in image.data().chunks_exact(w.max(1)).zip(rows.chunks_exact_mut(w.max(1))) {
        blur_line(src, 1, dst, 1, w, kernel);
    }
    let mut out = vec![0.0; h * w];
    for c in 0..w {
        blur_line(&rows[c..], w, &mut out[c..], w, h, kernel);
    }
    Raster::new(h, w, out)
}

/// 1-D renormalised convolution of the `len` values `src[0], src[stride], …`
/// into `dst` with the same stride.
fn blur_line(src: &[f64], src_stride: usize, dst: &mut [f64], dst_stride: usize, len: usize, kernel: &[f64]) {
    let radius = kernel.len() / 2;
    for x in 0..len {
        let lo = x.saturating_sub(radius);
        let hi = (x + radius).min(len - 1);
        let (mut acc, mut mass) = (0.0, 0.0);
        for t in lo..=hi {
            let k = kernel[t + radius - x];
            acc += k * src[t * src_stride];
            mass += k;
        }
        dst[x * dst_stride] = acc / mass;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(seed: u64) -> DenoisingConfig {
        DenoisingConfig { height: 40, width: 50, train: 3, test: 2, sigma: 4.0, seed }
    }

    fn feature_bits(data: &Dataset) -> Vec<u64> {
        (0..data.len())
            .flat_map(|k| {
                (0..data.factor_types().len()).flat_map(move |t| data.features(k, t).iter().map(|v| v.to_bits()))
            })
            .collect()
    }

    fn labels(data: &Dataset) -> Vec<usize> {
        data.examples().iter().flat_map(|e| e.labels().unwrap_or_default().iter().copied()).collect()
    }

    #[test]
    fn same_seed_gives_identical_data_and_different_seed_differs() {
        let a = generate(&small(7)).unwrap();
        let b = generate(&small(7)).unwrap();
        let c = generate(&small(8)).unwrap();
        for (x, y) in [(&a.train, &b.train), (&a.test, &b.test)] {
            assert_eq!(feature_bits(x), feature_bits(y));
            assert_eq!(labels(x), labels(y));
        }
        assert_eq!(a.train_images, b.train_images);
        assert_ne!(feature_bits(&a.train), feature_bits(&c.train));
        assert_ne!(labels(&a.test), labels(&c.test));
        // Train and test come from different streams.
        assert_ne!(a.train_images[0].noisy, a.test_images[0].noisy);
        assert_ne!(a.train_images[0].noisy, a.train_images[1].noisy);
    }

    #[test]
    fn test_set_does_not_depend_on_the_number_of_training_images() {
        let few = generate(&DenoisingConfig { train: 1, ..small(3) }).unwrap();
        let many = generate(&DenoisingConfig { train: 5, ..small(3) }).unwrap();
        let none = generate(&DenoisingConfig { train: 0, ..small(3) }).unwrap();
        assert_eq!(feature_bits(&few.test), feature_bits(&many.test));
        assert_eq!(feature_bits(&none.test), feature_bits(&many.test));
        assert_eq!(labels(&few.test), labels(&many.test));
        assert!(none.train.is_empty());
        // Training image k is the same whatever the number of training images.
        assert_eq!(few.train_images[0], many.train_images[0]);
    }

    #[test]
    fn datasets_validate_and_share_one_graph() {
        let data = generate(&small(1)).unwrap();
        for set in [&data.train, &data.test] {
            let types: Vec<_> = set.factor_types().iter().map(|t| (t.name.as_str(), t.dim, t.classes)).collect();
            assert_eq!(types, vec![("unary", 2, 2), ("pairwise", 2, 4)]);
            for ex in set.examples() {
                assert!(Arc::ptr_eq(ex.graph(), &data.graph));
            }
            // Re-validating from scratch passes too.
            assert!(Dataset::new(factor_types(), set.clone().into_parts().1).is_ok());
        }
        assert_eq!(data.train.examples()[2].name(), "denoising-train-002");
        assert_eq!(data.test_images[1].name, "denoising-test-001");
    }

    #[test]
    fn paper_sized_labels_are_balanced_blobs() {
        let data = generate(&DenoisingConfig { seed: 11, ..DenoisingConfig::default() }).unwrap();
        let layout = data.config.layout();
        let (mut ones, mut pixels, mut agree, mut pairs) = (0usize, 0usize, 0usize, 0usize);
        for img in data.train_images.iter().chain(&data.test_images) {
            let y = img.truth.data();
            ones += y.iter().sum::<usize>();
            pixels += y.len();
            for p in 0..layout.num_pairs() {
                let (i, j) = layout.pair_pixels(p);
                agree += usize::from(y[i] == y[j]);
                pairs += 1;
            }
        }
        // σ = 10 blobs are large: one image's fraction of ones has sd ≈ 0.13,
        // the mean of 32 images ≈ 0.023, so 0.08 is ~3.5 sd.
        let balance = ones as f64 / pixels as f64;
        let agreement = agree as f64 / pairs as f64;
        assert!((balance - 0.5).abs() < 0.08, "fraction of ones {balance}");
        assert!(agreement > 0.95, "neighbour agreement {agreement}");
        // Blobs, not a single region: both labels in most images.
        let mixed = data.train_images.iter().filter(|i| i.truth.data().contains(&0) && i.truth.data().contains(&1));
        assert!(mixed.count() >= 12, "most images should hold both labels");
    }

    #[test]
    fn features_have_the_conditional_distributions_of_the_recipe() {
        let data =
            generate(&DenoisingConfig { height: 60, width: 60, train: 8, test: 0, sigma: 6.0, seed: 5 }).unwrap();
        let layout = data.config.layout();
        let mut unary = [(0.0, 0usize); 2];
        let mut pair = [(0.0, 0usize); 2]; // [same, different]
        for (k, (ex, img)) in data.train.examples().iter().zip(&data.train_images).enumerate() {
            let y = ex.labels().unwrap_or_default();
            for (i, row) in data.train.features(k, 0).chunks_exact(2).enumerate() {
                let a = row[0];
                assert_eq!(row[1], 1.0);
                assert_eq!(img.noisy.data()[i], a);
                if y[i] == 0 {
                    assert!((0.0..0.9).contains(&a), "pixel {i}, y=0, a={a}");
                } else {
                    assert!((0.1..1.0).contains(&a), "pixel {i}, y=1, a={a}");
                }
                unary[y[i]].0 += a;
                unary[y[i]].1 += 1;
            }
            for (p, row) in data.train.features(k, 1).chunks_exact(2).enumerate() {
                let (i, j) = layout.pair_pixels(p);
                let b = row[0];
                assert_eq!(row[1], 1.0);
                let differ = usize::from(y[i] != y[j]);
                if differ == 1 {
                    assert!((0.2..1.0).contains(&b), "pair {p} ({i},{j}) differs, b={b}");
                } else {
                    assert!((0.0..0.8).contains(&b), "pair {p} ({i},{j}) agrees, b={b}");
                }
                pair[differ].0 += b;
                pair[differ].1 += 1;
            }
        }
        let mean = |(s, n): (f64, usize)| s / n as f64;
        assert!((mean(unary[0]) - 0.45).abs() < 0.01, "E[a|y=0] = {}", mean(unary[0]));
        assert!((mean(unary[1]) - 0.55).abs() < 0.01, "E[a|y=1] = {}", mean(unary[1]));
        assert!((mean(pair[0]) - 0.4).abs() < 0.01, "E[b|same] = {}", mean(pair[0]));
        assert!(pair[1].1 > 500, "only {} disagreeing pairs", pair[1].1);
        assert!((mean(pair[1]) - 0.6).abs() < 0.03, "E[b|different] = {}", mean(pair[1]));
    }

    #[test]
    fn blur_keeps_constants_and_the_mean_at_the_border() {
        let flat = Raster::filled(7, 9, 0.3).unwrap();
        for v in gaussian_blur(&flat, 3.0).unwrap().data() {
            assert!((v - 0.3).abs() < 1e-12, "{v}");
        }
        // A single bright pixel spreads symmetrically and keeps its peak in place.
        let mut spike = vec![0.0; 21 * 21];
        spike[10 * 21 + 10] = 1.0;
        let blurred = gaussian_blur(&Raster::new(21, 21, spike).unwrap(), 2.0).unwrap();
        let at = |r: usize, c: usize| blurred.data()[r * 21 + c];
        assert!((at(10, 7) - at(10, 13)).abs() < 1e-15 && (at(7, 10) - at(13, 10)).abs() < 1e-15);
        assert!((at(10, 7) - at(7, 10)).abs() < 1e-15 && at(10, 10) > at(10, 11));

        // Blurred U[0,1] noise has mean 0.5 at the border as in the middle.
        let (h, w) = (60, 60);
        let (mut border, mut nb, mut corner, mut centre) = (0.0, 0usize, 0.0, 0.0);
        let images = 40;
        for k in 0..images {
            let mut rng = image_rng(99, Split::Train, k);
            let img = Raster::new(h, w, (0..h * w).map(|_| rng.random::<f64>()).collect()).unwrap();
            let b = gaussian_blur(&img, 10.0).unwrap();
            for r in 0..h {
                for c in 0..w {
                    if r == 0 || c == 0 || r == h - 1 || c == w - 1 {
                        border += b.data()[r * w + c];
                        nb += 1;
                    }
                }
            }
            corner += b.data()[0] + b.data()[w - 1] + b.data()[(h - 1) * w] + b.data()[h * w - 1];
            centre += b.data()[(h / 2) * w + w / 2];
        }
        let border = border / nb as f64;
        let corner = corner / (4 * images) as f64;
        let centre = centre / images as f64;
        assert!((border - 0.5).abs() < 0.005, "border mean {border}");
        assert!((corner - 0.5).abs() < 0.01, "corner mean {corner}");
        assert!((centre - 0.5).abs() < 0.01, "centre mean {centre}");
    }

    #[test]
    fn kernel_is_normalised_truncated_and_capped() {
        let k = gaussian_kernel(10.0, 1000).unwrap();
        assert_eq!(k.len(), 81);
        assert!((k.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(k[40] > k[39] && (k[0] - k[80]).abs() < 1e-18);
        assert_eq!(gaussian_kernel(1e9, 99).unwrap().len(), 199);
        assert_eq!(gaussian_kernel(1e-9, 99).unwrap(), vec![0.0, 1.0, 0.0]);
        assert!(gaussian_kernel(0.0, 10).is_err());
        assert!(gaussian_kernel(f64::NAN, 10).is_err());
    }

    #[test]
    fn invalid_configs_are_rejected_with_the_field_named() {
        let field = |cfg: DenoisingConfig| match generate(&cfg) {
            Err(DatasetError::InvalidConfig { field, .. }) => field,
            other => panic!("expected InvalidConfig, got {other:?}"),
        };
        let base = small(0);
        assert_eq!(field(DenoisingConfig { height: 0, ..base.clone() }), "height/width");
        assert_eq!(field(DenoisingConfig { height: 1, width: 1, ..base.clone() }), "height/width");
        assert_eq!(field(DenoisingConfig { height: usize::MAX, width: 3, ..base.clone() }), "height/width");
        assert_eq!(field(DenoisingConfig { height: 5000, width: 5000, ..base.clone() }), "height/width");
        assert_eq!(field(DenoisingConfig { sigma: -1.0, ..base.clone() }), "sigma");
        assert_eq!(field(DenoisingConfig { test: usize::MAX, ..base.clone() }), "test");
        assert_eq!(field(DenoisingConfig { sigma: f64::INFINITY, ..base.clone() }), "sigma");
        // A one-row image is fine: it has horizontal pairs.
        let strip = generate(&DenoisingConfig { height: 1, width: 10, ..base }).unwrap();
        assert_eq!(strip.train.factor_types()[1].classes, 4);
    }

    #[test]
    fn config_round_trips_through_serde_with_defaults() {
        let cfg: DenoisingConfig = serde_json::from_str(r#"{"seed": 4, "train": 2}"#).unwrap();
        assert_eq!(cfg, DenoisingConfig { seed: 4, train: 2, ..DenoisingConfig::default() });
        assert!(serde_json::from_str::<DenoisingConfig>(r#"{"sigmaa": 3}"#).is_err());
    }
}
