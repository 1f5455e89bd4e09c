//! Labelled natural images as grid data sets: reduction to the model's
//! resolution, features ([`crate::features`]), standardisation, splits and the
//! on-disk feature cache shared by the horse and Stanford Background loaders.
//!
//! A [`SceneImage`] is an RGB image with a label per pixel, where a label may be
//! unknown (`None`, Stanford Background's −1). [`build_examples`] turns images
//! into [`structlearn::Example`]s over [`factor_graph::grid`] graphs:
//!
//! * a fully labelled image becomes the grid of its shape;
//! * an image with unknown pixels becomes, for **training**, the grid restricted
//!   to its labelled pixels ([`labelled_subgrid`]: variables are the labelled
//!   pixels in raster order, pairs those 4-neighbour pairs whose two pixels are
//!   labelled), so unknown pixels take no part in the loss, the oracle problems
//!   or the objective, and the learner's objective stays exactly docs/MATH.md
//!   §4's for that graph; for **evaluation** it stays the full grid (prediction
//!   must not know which pixels are unlabelled) with the unknown pixels listed in
//!   [`structlearn::Example::ignored`], which every error count skips.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ::image::RgbImage;
use ::image::imageops::{FilterType, resize};
use factor_graph::{GridLayout, PAIRWISE, RegionGraph, RegionGraphBuilder, UNARY};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};

use crate::DatasetError;
use crate::features::{FeatureConfig, PAIR_DIM, Standardizer, UNARY_DIM, image_features};
use crate::image::{GridGraphs, Raster};

/// An RGB image with one label per pixel (`None`: unknown), at model resolution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SceneImage {
    /// Name (the file stem, e.g. `horse001` or `0000047`).
    pub name: String,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// RGB bytes, row-major, 3 per pixel.
    pub rgb: Vec<u8>,
    /// Label per pixel in raster order, `None` where unknown.
    pub labels: Vec<Option<u8>>,
}

impl SceneImage {
    /// The image as an [`RgbImage`].
    pub fn rgb_image(&self) -> Result<RgbImage, DatasetError> {
        let err = DatasetError::ImageSize { height: self.height, width: self.width, reason: "RGB buffer size" };
        let (w, h) = (
            u32::try_from(self.width).map_err(|_| err_size(self))?,
            u32::try_from(self.height).map_err(|_| err_size(self))?,
        );
        RgbImage::from_raw(w, h, self.rgb.clone()).ok_or(err)
    }

    /// The label map with unknown pixels as `unknown` (e.g. for painting).
    pub fn label_raster(&self, unknown: usize) -> Result<Raster<usize>, DatasetError> {
        Raster::new(self.height, self.width, self.labels.iter().map(|l| l.map_or(unknown, usize::from)).collect())
    }

    /// Number of labelled pixels.
    pub fn labelled(&self) -> usize {
        self.labels.iter().filter(|l| l.is_some()).count()
    }
}

fn err_size(img: &SceneImage) -> DatasetError {
    DatasetError::ImageSize { height: img.height, width: img.width, reason: "sides must fit in 32 bits" }
}

/// The target size of an image of `height × width` reduced by `scale`
/// (`round(scale · side)`, at least 2 pixels per side).
pub fn reduced_size(height: usize, width: usize, scale: f64) -> (usize, usize) {
    let side = |s: usize| ((s as f64 * scale).round() as usize).max(2);
    (side(height), side(width))
}

/// The scale that makes the longer side of `height × width` equal `max_side`.
pub fn scale_for_max_side(height: usize, width: usize, max_side: usize) -> f64 {
    max_side as f64 / height.max(width).max(1) as f64
}

/// Resizes an RGB image to `height × width` with a triangle (bilinear) filter
/// whose support grows with the reduction factor, i.e. an area-weighted average
/// when shrinking (`image::imageops::resize` with `FilterType::Triangle`).
pub fn resize_rgb(img: &RgbImage, height: usize, width: usize) -> RgbImage {
    resize(img, width as u32, height as u32, FilterType::Triangle)
}

/// Reduces a label map to `height × width` by majority vote: target pixel
/// `(r, c)` covers source rows `⌊r·H/h⌋ .. ⌊(r+1)·H/h⌋` (at least one) and the
/// same for columns, and takes the most frequent label there, unknown counted as
/// one more label; ties go to the smallest label, and unknown loses every tie.
pub fn reduce_labels(labels: &Raster<Option<u8>>, height: usize, width: usize) -> Raster<Option<u8>> {
    let (sh, sw) = (labels.height(), labels.width());
    let span = |i: usize, n: usize, src: usize| {
        let a = i * src / n;
        let b = ((i + 1) * src / n).max(a + 1).min(src);
        a..b
    };
    let mut out = Vec::with_capacity(height * width);
    let mut counts = [0usize; 257];
    for r in 0..height {
        let rows = span(r, height, sh);
        for c in 0..width {
            let cols = span(c, width, sw);
            counts.fill(0);
            for rr in rows.clone() {
                for cc in cols.clone() {
                    let l = labels.data()[rr * sw + cc];
                    counts[l.map_or(256, usize::from)] += 1;
                }
            }
            let (best, n) =
                counts[..256].iter().enumerate().fold((0, 0), |acc, (l, &n)| if n > acc.1 { (l, n) } else { acc });
            out.push(if n >= counts[256] && n > 0 { Some(best as u8) } else { None });
        }
    }
    Raster::new(height, width, out).expect("sizes match")
}

/// A 4-connected grid restricted to the pixels where `keep` is true: one
/// variable per kept pixel (raster order), its singleton (type [`UNARY`]), and
/// a pair (type [`PAIRWISE`]) for every horizontal, then vertical 4-neighbour
/// pair of kept pixels, in the order of [`GridLayout::pair_pixels`]. Returns
/// the graph, the kept pixels and the kept pair indices (into
/// [`GridLayout::pair_pixels`]), so features can be selected to match.
pub fn labelled_subgrid(
    layout: GridLayout,
    keep: &[bool],
    labels: usize,
) -> Result<(RegionGraph, Vec<usize>, Vec<usize>), DatasetError> {
    let pixels: Vec<usize> = (0..layout.num_pixels()).filter(|&i| keep[i]).collect();
    let mut var = vec![usize::MAX; layout.num_pixels()];
    for (v, &i) in pixels.iter().enumerate() {
        var[i] = v;
    }
    let mut b = RegionGraphBuilder::new(vec![labels; pixels.len()])?;
    let unary = b.add_factor_type(UNARY)?;
    let pairwise = b.add_factor_type(PAIRWISE)?;
    for v in 0..pixels.len() {
        b.add_region(&[v], unary)?;
    }
    let mut pairs = Vec::new();
    for p in 0..layout.num_pairs() {
        let (i, j) = layout.pair_pixels(p);
        if keep[i] && keep[j] {
            let r = b.add_region(&[var[i], var[j]], pairwise)?;
            b.add_edge(r, var[i])?;
            b.add_edge(r, var[j])?;
            pairs.push(p);
        }
    }
    Ok((b.build()?, pixels, pairs))
}

/// Features of one image before standardisation: the full grid's unary and pair
/// blocks ([`crate::features::image_features`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageFeatures {
    /// Unary rows (`H·W × UNARY_DIM`).
    pub unary: FeatureBlock,
    /// Pair rows (`pairs × PAIR_DIM`).
    pub pair: FeatureBlock,
}

/// Computes the features of every image, in parallel (rayon), in image order.
pub fn compute_features(images: &[SceneImage], cfg: &FeatureConfig) -> Result<Vec<ImageFeatures>, DatasetError> {
    images
        .par_iter()
        .map(|img| {
            let (unary, pair) = image_features(&img.rgb_image()?, cfg)?;
            Ok(ImageFeatures { unary, pair })
        })
        .collect()
}

/// The factor types of the image data sets: `unary` ([`UNARY_DIM`]) and `pairwise` ([`PAIR_DIM`]).
pub fn factor_types() -> Vec<FactorTypeInfo> {
    vec![FactorTypeInfo::new(UNARY, UNARY_DIM), FactorTypeInfo::new(PAIRWISE, PAIR_DIM)]
}

/// Fits the standardisation of both factor types on the rows of `features`
/// (normally the training images'; only labelled regions are used when
/// `images` has unknown pixels, as in training).
pub fn fit_standardizers(images: &[SceneImage], features: &[ImageFeatures]) -> Result<[Standardizer; 2], DatasetError> {
    let mut unary = Vec::new();
    let mut pair = Vec::new();
    for (img, f) in images.iter().zip(features) {
        let keep: Vec<bool> = img.labels.iter().map(Option::is_some).collect();
        let layout = GridLayout { height: img.height, width: img.width };
        let (u, p) = select_rows(f, &keep, layout);
        unary.push(u);
        pair.push(p);
    }
    Ok([Standardizer::fit(UNARY_DIM, &unary)?, Standardizer::fit(PAIR_DIM, &pair)?])
}

/// The rows of the labelled pixels and of the pairs between them.
fn select_rows(f: &ImageFeatures, keep: &[bool], layout: GridLayout) -> (FeatureBlock, FeatureBlock) {
    if keep.iter().all(|&k| k) {
        return (f.unary.clone(), f.pair.clone());
    }
    let mut unary = Vec::new();
    for (i, row) in f.unary.values.chunks_exact(UNARY_DIM).enumerate() {
        if keep[i] {
            unary.extend_from_slice(row);
        }
    }
    let mut pair = Vec::new();
    for (p, row) in f.pair.values.chunks_exact(PAIR_DIM).enumerate() {
        let (i, j) = layout.pair_pixels(p);
        if keep[i] && keep[j] {
            pair.extend_from_slice(row);
        }
    }
    (FeatureBlock { dim: UNARY_DIM, values: unary }, FeatureBlock { dim: PAIR_DIM, values: pair })
}

/// How images with unknown pixels become examples (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Training: the grid of the labelled pixels only.
    Train,
    /// Evaluation: the full grid, unknown pixels in [`Example::ignored`].
    Evaluate,
}

/// Builds a data set from images, their features and the standardisation
/// (module docs for unknown pixels). Images of one shape share one graph.
pub fn build_examples(
    images: &[SceneImage],
    features: &[ImageFeatures],
    standardizers: &[Standardizer; 2],
    classes: usize,
    usage: Use,
) -> Result<Dataset, DatasetError> {
    let mut graphs = GridGraphs::new();
    let mut examples = Vec::with_capacity(images.len());
    for (img, f) in images.iter().zip(features) {
        let layout = GridLayout { height: img.height, width: img.width };
        let keep: Vec<bool> = img.labels.iter().map(Option::is_some).collect();
        let complete = keep.iter().all(|&k| k);
        let (graph, labels, mut unary, mut pair, ignored) = if complete || usage == Use::Evaluate {
            let labels: Vec<usize> = img.labels.iter().map(|l| l.map_or(0, usize::from)).collect();
            let ignored = (!complete).then(|| keep.iter().map(|k| !k).collect());
            (graphs.get(img.height, img.width, classes)?, labels, f.unary.clone(), f.pair.clone(), ignored)
        } else {
            let (graph, pixels, _) = labelled_subgrid(layout, &keep, classes)?;
            let labels = pixels.iter().map(|&i| img.labels[i].map_or(0, usize::from)).collect();
            let (u, p) = select_rows(f, &keep, layout);
            (Arc::new(graph), labels, u, p, None)
        };
        standardizers[0].apply(&mut unary)?;
        standardizers[1].apply(&mut pair)?;
        examples.push(Example {
            name: img.name.clone(),
            graph,
            labels: Some(labels),
            features: vec![unary, pair],
            ignored,
        });
    }
    Ok(Dataset::new(factor_types(), examples)?)
}

/// Splits `names` into `train` training names and the rest, by a seeded
/// shuffle (ChaCha8 seeded with `seed`, Fisher–Yates); each part is returned in
/// sorted order. The same names and seed always give the same split.
pub fn random_split(names: &[String], train: usize, seed: u64) -> Result<(Vec<String>, Vec<String>), DatasetError> {
    if train > names.len() {
        return Err(DatasetError::config("train", format!("{train} training images of {} available", names.len())));
    }
    let mut sorted = names.to_vec();
    sorted.sort();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    sorted.shuffle(&mut rng);
    let mut test = sorted.split_off(train);
    sorted.sort();
    test.sort();
    Ok((sorted, test))
}

/// Keeps the images named in `names`, in that order; errors on a name without image.
pub fn select<'a>(images: &'a [SceneImage], names: &[String]) -> Result<Vec<&'a SceneImage>, DatasetError> {
    let index: HashMap<&str, &SceneImage> = images.iter().map(|i| (i.name.as_str(), i)).collect();
    names
        .iter()
        .map(|n| index.get(n.as_str()).copied().ok_or_else(|| DatasetError::config("split", format!("no image `{n}`"))))
        .collect()
}

/// Environment variable naming the data directory when no `--data-dir` is given.
pub const DATA_DIR_ENV: &str = "STRUCTLEARN_DATA_DIR";

/// The data directory: `dir` if given, else `$STRUCTLEARN_DATA_DIR`, if set.
pub fn data_dir(dir: Option<&Path>) -> Option<PathBuf> {
    dir.map(Path::to_path_buf).or_else(|| std::env::var_os(DATA_DIR_ENV).filter(|v| !v.is_empty()).map(PathBuf::from))
}

/// The folder of one data set: `dir` (or [`DATA_DIR_ENV`]) itself if it holds
/// every folder of `required`, else its first sub-folder from `folders` that
/// does. The error names what was looked for, the layout and the download.
pub fn find_dataset_dir(
    dir: Option<&Path>,
    folders: &[&str],
    required: &[&str],
    dataset: &'static str,
    layout: &'static str,
    download: &'static str,
) -> Result<PathBuf, DatasetError> {
    let missing = |missing: String| DatasetError::MissingData { dataset, missing, layout, download };
    let Some(root) = data_dir(dir) else {
        return Err(missing(format!("no data directory given (neither --data-dir nor {DATA_DIR_ENV} is set)")));
    };
    if !root.is_dir() {
        return Err(missing(format!("data directory {}", root.display())));
    }
    let complete = |d: &Path| required.iter().all(|r| d.join(r).is_dir());
    if complete(&root) {
        return Ok(root);
    }
    for f in folders {
        let d = root.join(f);
        if d.is_dir() {
            if let Some(r) = required.iter().find(|r| !d.join(r).is_dir()) {
                return Err(missing(format!("folder {}", d.join(r).display())));
            }
            return Ok(d);
        }
    }
    Err(missing(format!("folder {} (or {})", root.join(folders[0]).display(), folders[1..].join(", "))))
}

/// The names of the files in `dir` ending in `suffix` (case-sensitive), sorted;
/// an empty or unreadable folder is [`DatasetError::MissingData`].
pub fn list_files(
    dir: &Path,
    suffix: &str,
    dataset: &'static str,
    layout: &'static str,
    download: &'static str,
) -> Result<Vec<String>, DatasetError> {
    let entries = std::fs::read_dir(dir).map_err(|e| DatasetError::io(dir, e))?;
    let mut names = Vec::new();
    for e in entries {
        let e = e.map_err(|e| DatasetError::io(dir, e))?;
        if let Some(name) = e.file_name().to_str()
            && name.ends_with(suffix)
        {
            names.push(name.to_string());
        }
    }
    if names.is_empty() {
        return Err(DatasetError::MissingData {
            dataset,
            missing: format!("*{suffix} files in {}", dir.display()),
            layout,
            download,
        });
    }
    names.sort();
    Ok(names)
}

/// Images with their unstandardised features, as stored in the feature cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SceneData {
    /// The reduced images.
    pub images: Vec<SceneImage>,
    /// Their features, same order.
    pub features: Vec<ImageFeatures>,
}

/// Magic bytes of feature-cache files (last byte: version).
const CACHE_MAGIC: &[u8; 8] = b"SLFCACH\x01";

/// A cache key over the data set's files (relative name, size and modification
/// time of every file under `dirs`) and the settings (any serialisable value,
/// e.g. resolution and [`FeatureConfig`]): FNV-1a 64 of their description.
/// Editing, adding or removing a data file, or changing a setting, changes it.
pub fn cache_key(root: &Path, dirs: &[&str], settings: &impl Serialize) -> Result<u64, DatasetError> {
    let mut text = serde_json::to_string(settings).map_err(|e| DatasetError::config("settings", e.to_string()))?;
    text.push_str(concat!("\nstructlearn-datasets ", env!("CARGO_PKG_VERSION"), "\n"));
    for d in dirs {
        let dir = root.join(d);
        let mut files: Vec<(String, u64, u128)> = Vec::new();
        for e in std::fs::read_dir(&dir).map_err(|e| DatasetError::io(&dir, e))? {
            let e = e.map_err(|e| DatasetError::io(&dir, e))?;
            let meta = e.metadata().map_err(|err| DatasetError::io(&e.path(), err))?;
            let mtime = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            files.push((e.file_name().to_string_lossy().into_owned(), meta.len(), mtime.map_or(0, |t| t.as_nanos())));
        }
        files.sort();
        for (name, len, mtime) in files {
            text.push_str(&format!("{d}/{name} {len} {mtime}\n"));
        }
    }
    Ok(structlearn::files::fnv1a(text.as_bytes()))
}

/// Returns the cached [`SceneData`] of `key` from `cache_dir` if present and
/// intact, else computes it with `compute` and stores it there (atomically;
/// `cache_dir` is created). `None` disables the cache. The second return value
/// says whether the cache was used. A corrupt cache file is recomputed and
/// overwritten, never trusted.
pub fn cached<F>(
    cache_dir: Option<&Path>,
    prefix: &str,
    key: u64,
    compute: F,
) -> Result<(SceneData, bool), DatasetError>
where
    F: FnOnce() -> Result<SceneData, DatasetError>,
{
    let Some(dir) = cache_dir else {
        return Ok((compute()?, false));
    };
    let path = dir.join(format!("{prefix}-{key:016x}.bin"));
    if let Ok(bytes) = std::fs::read(&path)
        && let Ok(body) = structlearn::files::unwrap_binary(&path, &bytes, CACHE_MAGIC)
        && let Ok(data) = postcard::from_bytes::<SceneData>(body)
    {
        return Ok((data, true));
    }
    let data = compute()?;
    std::fs::create_dir_all(dir).map_err(|e| DatasetError::io(dir, e))?;
    let body = postcard::to_stdvec(&data).map_err(|e| DatasetError::config("cache", e.to_string()))?;
    crate::image::write_atomic(&path, &structlearn::files::wrap_binary(CACHE_MAGIC, &body))?;
    Ok((data, false))
}
