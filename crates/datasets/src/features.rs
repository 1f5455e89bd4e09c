//! Per-pixel and per-pair features of natural images for grid models
//! (docs/MATH.md §6.2–6.3; docs/DATASETS.md "Image features").
//!
//! Unary features of pixel `(r, c)` of an `H × W` image ([`UNARY_DIM`] = 42, in
//! this order):
//!
//! | columns | feature |
//! |---|---|
//! | 0 | constant `1` |
//! | 1–3 | red, green, blue in `[0, 1]` |
//! | 4 | vertical position `r / (H − 1)` (0 when `H = 1`) |
//! | 5 | horizontal position `c / (W − 1)` (0 when `W = 1`) |
//! | 6–41 | HOG: 2 × 2 cells × 9 orientation bins ([`hog`]) |
//!
//! Pair features of a 4-neighbour pair `(i, j)` ([`PAIR_DIM`] = 3): constant `1`,
//! the Euclidean distance of the two pixels' RGB (values in `[0, 1]`, so at most
//! `√3`), and the Sobel edge response across the pair ([`sobel`]): the mean of
//! `|G_x|` at `i` and `j` for a horizontal pair, of `|G_y|` for a vertical one.
//!
//! All features are computed on the image at the resolution of the model (images
//! are reduced first). [`Standardizer`] then rescales every non-constant column
//! with training-set statistics.
//!
//! ```
//! use datasets::features::{FeatureConfig, image_features, UNARY_DIM, PAIR_DIM};
//! let img = image::RgbImage::from_fn(6, 4, |x, _| image::Rgb([40 * x as u8, 0, 0]));
//! let (unary, pair) = image_features(&img, &FeatureConfig::default()).unwrap();
//! assert_eq!(unary.values.len(), 4 * 6 * UNARY_DIM);
//! assert_eq!(pair.values.len(), (4 * 5 + 3 * 6) * PAIR_DIM);
//! assert_eq!(unary.values[UNARY_DIM * 7 + 5], 0.2); // pixel (1, 1): column 1 of 0..=5
//! ```

use ::image::RgbImage;
use factor_graph::GridLayout;
use serde::{Deserialize, Serialize};
use structlearn::FeatureBlock;

use crate::DatasetError;
use crate::image::Raster;

/// Unary feature dimension: constant, RGB, position, 36 HOG values.
pub const UNARY_DIM: usize = 1 + 3 + 2 + HOG_DIM;

/// Pair feature dimension: constant, RGB distance, Sobel response.
pub const PAIR_DIM: usize = 3;

/// Orientation bins of [`hog`].
pub const HOG_BINS: usize = 9;

/// HOG values per pixel: 2 × 2 cells × [`HOG_BINS`].
pub const HOG_DIM: usize = 4 * HOG_BINS;

/// Column of the first HOG value in the unary features.
pub const HOG_OFFSET: usize = 6;

/// Settings of the feature pipeline; part of every cache key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureConfig {
    /// Side of one HOG cell, in pixels of the reduced image.
    pub hog_cell: usize,
    /// `ε` of the HOG block normalisation `v / √(‖v‖² + ε²)` (gradient units:
    /// intensities in `[0, 1]`, one pixel apart).
    pub hog_epsilon: f64,
    /// Clipping threshold of L2-Hys normalisation (Dalal & Triggs: 0.2).
    pub hog_clip: f64,
}

impl Default for FeatureConfig {
    fn default() -> Self {
        Self { hog_cell: 4, hog_epsilon: 0.1, hog_clip: 0.2 }
    }
}

impl FeatureConfig {
    /// Checks that the cell side is at least 1 and the constants are finite and positive.
    pub fn validate(&self) -> Result<(), DatasetError> {
        if self.hog_cell == 0 || self.hog_cell > 1 << 16 {
            return Err(DatasetError::config("hog_cell", format!("must be in 1..=65536, got {}", self.hog_cell)));
        }
        if !(self.hog_epsilon.is_finite() && self.hog_epsilon > 0.0) {
            return Err(DatasetError::config(
                "hog_epsilon",
                format!("must be finite and > 0, got {}", self.hog_epsilon),
            ));
        }
        if !(self.hog_clip.is_finite() && self.hog_clip > 0.0) {
            return Err(DatasetError::config("hog_clip", format!("must be finite and > 0, got {}", self.hog_clip)));
        }
        Ok(())
    }
}

/// Luma `0.299 R + 0.587 G + 0.114 B` of every pixel, in `[0, 1]`.
pub fn gray(img: &RgbImage) -> Raster<f64> {
    let (w, h) = img.dimensions();
    let data = img
        .pixels()
        .map(|p| (0.299 * f64::from(p.0[0]) + 0.587 * f64::from(p.0[1]) + 0.114 * f64::from(p.0[2])) / 255.0)
        .collect();
    Raster::new(h as usize, w as usize, data).expect("the pixel count matches the image size")
}

/// Value at `(r, c)` with coordinates clamped into the image (replicated border).
fn at_clamped(img: &Raster<f64>, r: isize, c: isize) -> f64 {
    let rr = r.clamp(0, img.height() as isize - 1) as usize;
    let cc = c.clamp(0, img.width() as isize - 1) as usize;
    img.data()[rr * img.width() + cc]
}

/// Sobel derivatives `(G_x, G_y)` of a gray image, divided by 8 so that a unit
/// step edge gives `0.5` on each of the two pixels beside it. Borders are
/// replicated. `G_x` grows to the right, `G_y` downwards.
pub fn sobel(img: &Raster<f64>) -> (Raster<f64>, Raster<f64>) {
    let (h, w) = (img.height(), img.width());
    let mut gx = vec![0.0; h * w];
    let mut gy = vec![0.0; h * w];
    for r in 0..h as isize {
        for c in 0..w as isize {
            let p = |dr: isize, dc: isize| at_clamped(img, r + dr, c + dc);
            let x = (p(-1, 1) + 2.0 * p(0, 1) + p(1, 1)) - (p(-1, -1) + 2.0 * p(0, -1) + p(1, -1));
            let y = (p(1, -1) + 2.0 * p(1, 0) + p(1, 1)) - (p(-1, -1) + 2.0 * p(-1, 0) + p(-1, 1));
            let i = r as usize * w + c as usize;
            gx[i] = x / 8.0;
            gy[i] = y / 8.0;
        }
    }
    let make = |d| Raster::new(h, w, d).expect("sizes match");
    (make(gx), make(gy))
}

/// Per-pixel HOG descriptors (Dalal & Triggs 2005, adapted to dense per-pixel use).
///
/// * Gradients: centred differences `[−1, 0, 1]` of the luma image, borders replicated;
///   magnitude `m = √(g_x² + g_y²)`, unsigned orientation `θ = atan2(g_y, g_x) mod π`.
/// * Orientation binning: 9 bins with centres `0°, 20°, …, 160°`; each pixel votes
///   `m` split linearly between the two nearest centres (wrapping at 180°), so a
///   horizontal gradient (a vertical edge) votes into bin 0 only.
/// * Cells: the four `s × s` cells (`s` = [`FeatureConfig::hog_cell`]) whose common
///   corner is the top-left corner of the pixel: rows `r−s..r` and `r..r+s`,
///   columns `c−s..c` and `c..c+s`, in the order top-left, top-right, bottom-left,
///   bottom-right; parts outside the image count nothing. Cell histograms are sums
///   (box filter over integral images; no spatial interpolation).
/// * Block normalisation: L2-Hys over the 36 values, `v ← v / √(‖v‖² + ε²)`, clip at
///   [`FeatureConfig::hog_clip`], normalise again the same way.
///
/// Returns `H·W` rows of [`HOG_DIM`] values in raster order.
pub fn hog(img: &Raster<f64>, cfg: &FeatureConfig) -> Result<Vec<[f64; HOG_DIM]>, DatasetError> {
    cfg.validate()?;
    let (h, w) = (img.height(), img.width());
    // Integral images of the votes: integral[b][(r)(w+1) + c] = Σ votes of bin b above-left of (r, c).
    let stride = w + 1;
    let mut integral = vec![vec![0.0; (h + 1) * stride]; HOG_BINS];
    let bin_width = std::f64::consts::PI / HOG_BINS as f64;
    for r in 0..h {
        let mut row_sums = [0.0; HOG_BINS];
        for c in 0..w {
            let (ri, ci) = (r as isize, c as isize);
            let gx = at_clamped(img, ri, ci + 1) - at_clamped(img, ri, ci - 1);
            let gy = at_clamped(img, ri + 1, ci) - at_clamped(img, ri - 1, ci);
            let m = gx.hypot(gy);
            if m > 0.0 {
                let theta = gy.atan2(gx).rem_euclid(std::f64::consts::PI);
                let pos = theta / bin_width;
                let lo = pos.floor();
                let frac = pos - lo;
                let b0 = (lo as usize) % HOG_BINS;
                let b1 = (b0 + 1) % HOG_BINS;
                row_sums[b0] += m * (1.0 - frac);
                row_sums[b1] += m * frac;
            }
            for (b, ii) in integral.iter_mut().enumerate() {
                ii[(r + 1) * stride + c + 1] = ii[r * stride + c + 1] + row_sums[b];
            }
        }
    }
    let s = cfg.hog_cell as isize;
    let box_sum = |ii: &[f64], r0: isize, r1: isize, c0: isize, c1: isize| {
        let r0 = r0.clamp(0, h as isize) as usize;
        let r1 = r1.clamp(0, h as isize) as usize;
        let c0 = c0.clamp(0, w as isize) as usize;
        let c1 = c1.clamp(0, w as isize) as usize;
        if r1 <= r0 || c1 <= c0 {
            return 0.0;
        }
        ii[r1 * stride + c1] - ii[r0 * stride + c1] - ii[r1 * stride + c0] + ii[r0 * stride + c0]
    };
    let eps2 = cfg.hog_epsilon * cfg.hog_epsilon;
    let normalise = |v: &mut [f64; HOG_DIM]| {
        let norm = (v.iter().map(|x| x * x).sum::<f64>() + eps2).sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
    };
    let mut out = Vec::with_capacity(h * w);
    for r in 0..h as isize {
        for c in 0..w as isize {
            let mut v = [0.0; HOG_DIM];
            let cells = [(r - s, r, c - s, c), (r - s, r, c, c + s), (r, r + s, c - s, c), (r, r + s, c, c + s)];
            for (k, &(r0, r1, c0, c1)) in cells.iter().enumerate() {
                for (b, ii) in integral.iter().enumerate() {
                    v[k * HOG_BINS + b] = box_sum(ii, r0, r1, c0, c1);
                }
            }
            normalise(&mut v);
            v.iter_mut().for_each(|x| *x = x.min(cfg.hog_clip));
            normalise(&mut v);
            out.push(v);
        }
    }
    Ok(out)
}

/// The unary ([`UNARY_DIM`]) and pair ([`PAIR_DIM`]) feature blocks of an image
/// for [`factor_graph::grid`] (module docs for the columns), unstandardised.
pub fn image_features(img: &RgbImage, cfg: &FeatureConfig) -> Result<(FeatureBlock, FeatureBlock), DatasetError> {
    let (w, h) = img.dimensions();
    let (h, w) = (h as usize, w as usize);
    if h == 0 || w == 0 {
        return Err(DatasetError::ImageSize { height: h, width: w, reason: "an image needs at least one pixel" });
    }
    let luma = gray(img);
    let hogs = hog(&luma, cfg)?;
    let (gx, gy) = sobel(&luma);
    let rgb: Vec<[f64; 3]> = img.pixels().map(|p| p.0.map(|v| f64::from(v) / 255.0)).collect();
    let pos = |i: usize, n: usize| if n > 1 { i as f64 / (n - 1) as f64 } else { 0.0 };
    let mut unary = Vec::with_capacity(h * w * UNARY_DIM);
    for i in 0..h * w {
        unary.push(1.0);
        unary.extend_from_slice(&rgb[i]);
        unary.push(pos(i / w, h));
        unary.push(pos(i % w, w));
        unary.extend_from_slice(&hogs[i]);
    }
    let layout = GridLayout { height: h, width: w };
    let pair = crate::image::pair_features(layout, PAIR_DIM, |i, j, row| {
        let d2: f64 = rgb[i].iter().zip(&rgb[j]).map(|(a, b)| (a - b) * (a - b)).sum();
        // Horizontal pairs have j = i + 1 (and come first); vertical ones j = i + W.
        let g = if j == i + 1 && i % w != w - 1 { &gx } else { &gy };
        row[0] = 1.0;
        row[1] = d2.sqrt();
        row[2] = 0.5 * (g.data()[i].abs() + g.data()[j].abs());
    });
    Ok((FeatureBlock { dim: UNARY_DIM, values: unary }, pair))
}

/// Per-column affine standardisation `x ↦ (x − mean) / std` fitted on training
/// features; columns with zero spread (the constant) are left unchanged
/// (`mean = 0`, `std = 1`). Saved with the results and the model so that
/// prediction on new images applies the same map.
///
/// ```
/// use datasets::features::Standardizer;
/// use structlearn::FeatureBlock;
/// let block = FeatureBlock { dim: 2, values: vec![1.0, 0.0, 1.0, 2.0] };
/// let s = Standardizer::fit(2, [&block]).unwrap();
/// let mut b = block.clone();
/// s.apply(&mut b).unwrap();
/// assert_eq!(b.values, vec![1.0, -1.0, 1.0, 1.0]);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Standardizer {
    /// Column means.
    pub mean: Vec<f64>,
    /// Column standard deviations (population), 1 for constant columns.
    pub std: Vec<f64>,
}

impl Standardizer {
    /// Fits means and standard deviations of `dim` columns over all rows of `blocks`.
    pub fn fit<'a>(dim: usize, blocks: impl IntoIterator<Item = &'a FeatureBlock>) -> Result<Self, DatasetError> {
        let blocks: Vec<&FeatureBlock> = blocks.into_iter().collect();
        if let Some(b) = blocks.iter().find(|b| b.dim != dim) {
            return Err(DatasetError::config("features", format!("block of dimension {} for {dim}", b.dim)));
        }
        Self::fit_rows(dim, || blocks.iter().flat_map(|b| b.values.chunks_exact(dim.max(1))))
    }

    /// [`Standardizer::fit`] over the rows `rows()` yields (each of `dim`
    /// values), without copying them into blocks: `rows` is called twice, once
    /// for the means and once for the deviations, and must yield the same rows
    /// both times.
    ///
    /// ```
    /// use datasets::features::Standardizer;
    /// let table = [[1.0, 5.0], [3.0, 5.0], [100.0, 0.0]];
    /// // Only the first two rows, straight from the table.
    /// let s = Standardizer::fit_rows(2, || table[..2].iter().map(|r| r.as_slice())).unwrap();
    /// assert_eq!((s.mean, s.std), (vec![2.0, 0.0], vec![1.0, 1.0]));
    /// ```
    pub fn fit_rows<'a, I: Iterator<Item = &'a [f64]>>(dim: usize, rows: impl Fn() -> I) -> Result<Self, DatasetError> {
        let mut n = 0usize;
        let mut sum = vec![0.0; dim];
        let mut sq = vec![0.0; dim];
        for row in rows() {
            n += 1;
            for (k, &v) in row.iter().enumerate() {
                sum[k] += v;
            }
        }
        if n == 0 {
            return Err(DatasetError::config("features", "no rows to fit the standardisation on"));
        }
        let mean: Vec<f64> = sum.iter().map(|s| s / n as f64).collect();
        for row in rows() {
            for (k, &v) in row.iter().enumerate() {
                sq[k] += (v - mean[k]) * (v - mean[k]);
            }
        }
        let std: Vec<f64> = sq.iter().map(|s| (s / n as f64).sqrt()).collect();
        let (mean, std) = mean
            .iter()
            .zip(&std)
            .map(|(&m, &s)| if s > 1e-12 * m.abs().max(1.0) { (m, s) } else { (0.0, 1.0) })
            .unzip();
        Ok(Self { mean, std })
    }

    /// Checks what [`Standardizer::fit`] guarantees: `dim` means and as many
    /// standard deviations, the means finite, the deviations finite and > 0
    /// (`what` names the standardisation in the error).
    ///
    /// ```
    /// use datasets::features::Standardizer;
    /// let s = Standardizer { mean: vec![0.0, 1.0], std: vec![1.0, 2.0] };
    /// assert!(s.validate(2, "unary").is_ok());
    /// assert!(Standardizer { std: vec![1.0], ..s.clone() }.validate(2, "unary").is_err());
    /// assert!(Standardizer { std: vec![1.0, -2.0], ..s }.validate(2, "unary").is_err());
    /// ```
    pub fn validate(&self, dim: usize, what: &str) -> Result<(), DatasetError> {
        if self.mean.len() != dim || self.std.len() != dim {
            return Err(DatasetError::config(
                "standardizers",
                format!(
                    "{what}: {} means and {} standard deviations for {dim} features",
                    self.mean.len(),
                    self.std.len()
                ),
            ));
        }
        if let Some(k) = self.mean.iter().position(|m| !m.is_finite()) {
            return Err(DatasetError::config("standardizers", format!("{what}: mean {k} is {}", self.mean[k])));
        }
        if let Some(k) = self.std.iter().position(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(DatasetError::config(
                "standardizers",
                format!("{what}: standard deviation {k} is {}; it must be finite and > 0", self.std[k]),
            ));
        }
        Ok(())
    }

    /// Standardises a block in place.
    pub fn apply(&self, block: &mut FeatureBlock) -> Result<(), DatasetError> {
        if block.dim != self.mean.len() {
            return Err(DatasetError::config(
                "features",
                format!("block of dimension {} for a standardisation of {}", block.dim, self.mean.len()),
            ));
        }
        for row in block.values.chunks_exact_mut(block.dim.max(1)) {
            for ((v, m), s) in row.iter_mut().zip(&self.mean).zip(&self.std) {
                *v = (*v - m) / s;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `h × w` image, black left of column `edge`, white from it on.
    fn vertical_edge(h: u32, w: u32, edge: u32) -> RgbImage {
        RgbImage::from_fn(w, h, |x, _| if x < edge { ::image::Rgb([0, 0, 0]) } else { ::image::Rgb([255, 255, 255]) })
    }

    #[test]
    fn position_features_are_exact() {
        let img = RgbImage::new(7, 5);
        let (u, _) = image_features(&img, &FeatureConfig::default()).unwrap();
        for r in 0..5 {
            for c in 0..7 {
                let row = &u.values[(r * 7 + c) * UNARY_DIM..][..UNARY_DIM];
                assert_eq!(row[0], 1.0);
                assert_eq!(row[4], r as f64 / 4.0);
                assert_eq!(row[5], c as f64 / 6.0);
            }
        }
        let line = RgbImage::new(3, 1);
        let (u, _) = image_features(&line, &FeatureConfig::default()).unwrap();
        assert_eq!(u.values[UNARY_DIM * 2 + 4], 0.0);
        assert_eq!(u.values[UNARY_DIM * 2 + 5], 1.0);
    }

    #[test]
    fn sobel_responds_across_a_vertical_edge_only() {
        let img = vertical_edge(6, 8, 4);
        let (gx, gy) = sobel(&gray(&img));
        for r in 0..6 {
            for c in 0..8 {
                let expect = if c == 3 || c == 4 { 0.5 } else { 0.0 };
                assert!((gx.data()[r * 8 + c] - expect).abs() < 1e-12, "({r},{c})");
                assert!(gy.data()[r * 8 + c].abs() < 1e-12);
            }
        }
        let (_, pair) = image_features(&img, &FeatureConfig::default()).unwrap();
        let layout = GridLayout { height: 6, width: 8 };
        for (p, row) in pair.values.chunks_exact(PAIR_DIM).enumerate() {
            let (i, j) = layout.pair_pixels(p);
            assert_eq!(row[0], 1.0);
            let across = (i % 8, j % 8) == (3, 4);
            // RGB distance: white vs black is √3; equal colours 0.
            let expected_distance = if across { 3f64.sqrt() } else { 0.0 };
            assert!((row[1] - expected_distance).abs() < 1e-12, "pair {p} ({i},{j})");
            let expected_sobel = if j == i + 1 {
                match (i % 8, j % 8) {
                    (3, 4) => 0.5,
                    (2, 3) | (4, 5) => 0.25,
                    _ => 0.0,
                }
            } else {
                0.0
            };
            assert!((row[2] - expected_sobel).abs() < 1e-12, "pair {p} ({i},{j}): {}", row[2]);
        }
    }

    #[test]
    fn hog_of_a_vertical_edge_votes_in_bin_zero_of_the_cells_that_see_it() {
        let cfg = FeatureConfig { hog_cell: 2, ..FeatureConfig::default() };
        let img = vertical_edge(10, 10, 5);
        let h = hog(&gray(&img), &cfg).unwrap();
        // Centred differences are non-zero at columns 4 and 5 (value 1, horizontal gradient).
        // Pixel (5, 5): left cells cover columns 3..5, right cells 5..7; both see one edge column.
        let v = h[5 * 10 + 5];
        for cell in 0..4 {
            for b in 0..HOG_BINS {
                let x = v[cell * HOG_BINS + b];
                if b == 0 {
                    assert!(x > 0.3, "cell {cell} bin 0 = {x}");
                } else {
                    assert_eq!(x, 0.0, "cell {cell} bin {b}");
                }
            }
        }
        // Far from the edge nothing is seen.
        assert!(h[5 * 10 + 1].iter().all(|&x| x == 0.0));
        // Pixel (5, 3): only the right cells (columns 3..5) contain column 4.
        let v = h[5 * 10 + 3];
        assert_eq!(v[0], 0.0);
        assert!(v[HOG_BINS] > 0.0 && v[3 * HOG_BINS] > 0.0);
    }

    #[test]
    fn hog_orientation_interpolates_between_bin_centres() {
        // A horizontal edge: vertical gradient, θ = 90°, half-way between bins 4 (80°) and 5 (100°).
        let img = RgbImage::from_fn(10, 10, |_, y| if y < 5 { ::image::Rgb([0; 3]) } else { ::image::Rgb([255; 3]) });
        let cfg = FeatureConfig { hog_cell: 2, ..FeatureConfig::default() };
        let v = hog(&gray(&img), &cfg).unwrap()[5 * 10 + 5];
        assert!((v[4] - v[5]).abs() < 1e-12 && v[4] > 0.0);
        assert!(v.iter().enumerate().all(|(k, &x)| k % HOG_BINS == 4 || k % HOG_BINS == 5 || x == 0.0));
        // A 45° ramp: every vote at 45°, 3/4 into bin 2 (40°) and 1/4 into bin 3 (60°)
        // (no clipping, which would flatten the ratio).
        let ramp = Raster::new(12, 12, (0..144).map(|i| ((i / 12) + (i % 12)) as f64 / 30.0).collect()).unwrap();
        let v = hog(&ramp, &FeatureConfig { hog_clip: 1.0, ..cfg.clone() }).unwrap()[6 * 12 + 6];
        assert!((v[2] - 3.0 * v[3]).abs() < 1e-12 && v[2] > 0.0, "{v:?}");
        let norm: f64 = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!(norm <= 1.0 + 1e-12);
    }

    #[test]
    fn standardizer_centres_scales_and_keeps_the_constant() {
        let a = FeatureBlock { dim: 3, values: vec![1.0, 2.0, 10.0, 1.0, 4.0, 10.0] };
        let b = FeatureBlock { dim: 3, values: vec![1.0, 6.0, 10.0] };
        let s = Standardizer::fit(3, [&a, &b]).unwrap();
        assert_eq!(s.mean, vec![0.0, 4.0, 0.0]);
        assert_eq!(s.std[0], 1.0);
        assert!((s.std[1] - (8.0f64 / 3.0).sqrt()).abs() < 1e-12);
        let mut c = a.clone();
        s.apply(&mut c).unwrap();
        assert_eq!(c.values[0], 1.0);
        assert_eq!(c.values[2], 10.0);
        assert!((c.values[1] + c.values[4] + (6.0 - 4.0) / s.std[1]).abs() < 1e-12);
        assert!(Standardizer::fit(2, [&a]).is_err());
        assert!(s.apply(&mut FeatureBlock { dim: 2, values: vec![] }).is_err());
    }

    #[test]
    fn bad_settings_are_rejected() {
        let img = Raster::new(2, 2, vec![0.0; 4]).unwrap();
        assert!(hog(&img, &FeatureConfig { hog_cell: 0, ..FeatureConfig::default() }).is_err());
        assert!(hog(&img, &FeatureConfig { hog_epsilon: f64::NAN, ..FeatureConfig::default() }).is_err());
        assert!(image_features(&RgbImage::new(0, 3), &FeatureConfig::default()).is_err());
    }
}
