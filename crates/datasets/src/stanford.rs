//! The Stanford Background Dataset (Gould, Fulton & Koller, ICCV 2009), release
//! `iccv09Data`: 715 outdoor scenes, 8 classes plus unknown (docs/MATH.md §6.3;
//! docs/DATASETS.md for the download and the layout).
//!
//! Layout read, as the release ships it (the folder may also be called
//! `iccv09Data`, or be given directly):
//!
//! ```text
//! DATA_DIR/stanford_background/images/0000047.jpg …
//! DATA_DIR/stanford_background/labels/0000047.regions.txt …
//! ```
//!
//! A `.regions.txt` file is a whitespace-separated integer matrix with the
//! image's height and width, values `0..=7` ([`CLASSES`]) or `−1` (unknown).
//! Images are reduced by [`StanfordConfig::scale`] (20 % in the chapter):
//! colours by [`crate::photos::resize_rgb`], labels by majority vote
//! ([`crate::photos::reduce_labels`], unknown losing ties), so a reduced pixel
//! is unknown only where unknown source pixels are the strict majority.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::DatasetError;
use crate::image::{Raster, load_rgb};
use crate::photos::{
    SceneImage, check_reduced_size, find_dataset_dir, list_files, reduce_labels, reduced_size, require_file,
    resize_rgb, shown, stem_of,
};

/// Name in messages.
pub const NAME: &str = "Stanford Background";

/// Folder names searched under the data directory.
pub const FOLDERS: [&str; 2] = ["stanford_background", "iccv09Data"];

/// The expected layout, for error messages.
pub const LAYOUT: &str = "DATA_DIR/stanford_background/images/NNNNNNN.jpg and \
                          DATA_DIR/stanford_background/labels/NNNNNNN.regions.txt \
                          (folder also accepted as iccv09Data, or given directly)";

/// Where to get the data.
pub const DOWNLOAD: &str = "iccv09Data.tar.gz from the Stanford DAGS lab's scene data set page, \
                            http://dags.stanford.edu/projects/scenedataset.html";

/// The classes, in label order.
pub const CLASSES: [&str; 8] = ["sky", "tree", "road", "grass", "water", "building", "mountain", "foreground"];

/// Largest side accepted in a label file, to bound memory on hostile input.
pub const MAX_SIDE: usize = 1 << 14;

/// Settings of the Stanford Background loader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StanfordConfig {
    /// Reduction factor of both sides (0.2 in the chapter).
    pub scale: f64,
    /// Load only the first `limit` images (sorted by name); `None`: all.
    pub limit: Option<usize>,
}

impl Default for StanfordConfig {
    fn default() -> Self {
        Self { scale: 0.2, limit: None }
    }
}

/// The data set folder: `dir` itself if it holds `images/` and `labels/`, else
/// `dir/stanford_background` or `dir/iccv09Data`. `dir` defaults to
/// `$STRUCTLEARN_DATA_DIR`.
pub fn dataset_dir(dir: Option<&Path>) -> Result<PathBuf, DatasetError> {
    find_dataset_dir(dir, &FOLDERS, &["images", "labels"], NAME, LAYOUT, DOWNLOAD)
}

/// Loads every image with its label file, in name order, reduced by
/// `cfg.scale`, in parallel. A missing label file, a label matrix of the wrong
/// size, a label outside `−1..=7` and an undecodable JPEG are errors naming the file.
pub fn load(dir: &Path, cfg: &StanfordConfig) -> Result<Vec<SceneImage>, DatasetError> {
    if !(cfg.scale.is_finite() && cfg.scale > 0.0 && cfg.scale <= 1.0) {
        return Err(DatasetError::config("scale", format!("must be in (0, 1], got {}", cfg.scale)));
    }
    let mut names = list_files(&dir.join("images"), ".jpg", NAME, LAYOUT, DOWNLOAD)?;
    if let Some(limit) = cfg.limit {
        names.truncate(limit);
    }
    for name in &names {
        require_file(&label_path(dir, stem_of(name, ".jpg")), "label file", NAME, LAYOUT, DOWNLOAD)?;
    }
    names.par_iter().map(|name| load_one(dir, name, cfg.scale)).collect()
}

fn label_path(dir: &Path, stem: &str) -> PathBuf {
    dir.join("labels").join(format!("{stem}.regions.txt"))
}

fn load_one(dir: &Path, file: &str, scale: f64) -> Result<SceneImage, DatasetError> {
    let stem = stem_of(file, ".jpg");
    let image_path = dir.join("images").join(file);
    let rgb = load_rgb(&image_path)?;
    let (w, h) = rgb.dimensions();
    let (h, w) = (h as usize, w as usize);
    let labels = read_regions(&label_path(dir, stem), h, w)?;
    let (th, tw) = reduced_size(h, w, scale);
    check_reduced_size(&image_path, th, tw)?;
    let small = resize_rgb(&rgb, th, tw);
    let labels = reduce_labels(&labels, th, tw);
    Ok(SceneImage { name: stem.to_string(), height: th, width: tw, rgb: small.into_raw(), labels: labels.into_data() })
}

/// Reads a `.regions.txt` label matrix that must be `height × width` with
/// values in `−1..=7` (−1 becomes `None`). Errors name the file, and the line
/// and column of a bad value.
pub fn read_regions(path: &Path, height: usize, width: usize) -> Result<Raster<Option<u8>>, DatasetError> {
    let bad = |reason: String| DatasetError::Malformed { path: path.display().to_string(), reason };
    if height > MAX_SIDE || width > MAX_SIDE {
        return Err(bad(format!("image size {height}×{width} exceeds {MAX_SIDE} pixels per side")));
    }
    // Each label takes at most 3 bytes and a separator, so a larger file is
    // not this image's label matrix (and is not read into memory).
    let most = 8 * (height * width) as u64 + 4096;
    let len = std::fs::metadata(path).map_err(|e| DatasetError::io(path, e))?.len();
    if len > most {
        return Err(bad(format!("{len} bytes, more than a {height} × {width} label matrix can take ({most})")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidData => bad("not UTF-8 text".into()),
        _ => DatasetError::io(path, e),
    })?;
    let mut labels = Vec::with_capacity(height * width);
    let mut rows = 0;
    for (line_no, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        rows += 1;
        if rows > height {
            return Err(bad(format!("more than the image's {height} rows (line {})", line_no + 1)));
        }
        let before = labels.len();
        for (col, tok) in line.split_whitespace().enumerate() {
            let v: i64 = tok.parse().map_err(|_| {
                bad(format!("line {}, column {}: {} is not an integer", line_no + 1, col + 1, shown(tok)))
            })?;
            let label = match v {
                -1 => None,
                0..=7 => Some(v as u8),
                _ => return Err(bad(format!("line {}, column {}: label {v} is outside −1..=7", line_no + 1, col + 1))),
            };
            if col >= width {
                return Err(bad(format!("line {} has more than the image's {width} columns", line_no + 1)));
            }
            labels.push(label);
        }
        if labels.len() - before != width {
            return Err(bad(format!(
                "line {} has {} labels, the image is {width} pixels wide",
                line_no + 1,
                labels.len() - before
            )));
        }
    }
    if rows != height {
        return Err(bad(format!("{rows} rows of labels, the image has {height} rows")));
    }
    Raster::new(height, width, labels)
}
