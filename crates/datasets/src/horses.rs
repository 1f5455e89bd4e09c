//! The Weizmann Horse Database (Borenstein & Ullman, ECCV 2002/2004): 328
//! side views of horses with figure/ground masks (docs/MATH.md §6.2;
//! docs/DATASETS.md for the download and the layout).
//!
//! Layout read, as the original release ships it (the folder may also be
//! called `weizmann_horse_db`, or be given directly):
//!
//! ```text
//! DATA_DIR/weizmann_horse/rgb/horse001.jpg … horse328.jpg
//! DATA_DIR/weizmann_horse/figure_ground/horse001.jpg …   (mask, horse = white)
//! ```
//!
//! Each image becomes a binary label map (1 = horse) at the model's resolution:
//! the mask is thresholded at 128 (it is a JPEG with artefacts) at its own
//! size; in most images the mask is smaller than the colour image (same aspect
//! ratio within 3 %), and the colour image is brought to the mask's grid. Both
//! are then reduced so that the longer side has [`HorsesConfig::max_side`]
//! pixels: colours by [`crate::photos::resize_rgb`] (area-weighted triangle
//! filter), labels by majority vote ([`crate::photos::reduce_labels`]).

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::DatasetError;
use crate::image::{Raster, load_gray, load_rgb};
use crate::photos::{
    MAX_REDUCED_SIDE, SceneImage, check_reduced_size, find_dataset_dir, list_files, reduce_labels, reduced_size,
    require_file, resize_rgb, scale_for_max_side, stem_of,
};

/// Name in messages.
pub const NAME: &str = "Weizmann horses";

/// Folder names searched under the data directory.
pub const FOLDERS: [&str; 2] = ["weizmann_horse", "weizmann_horse_db"];

/// The expected layout, for error messages.
pub const LAYOUT: &str = "DATA_DIR/weizmann_horse/rgb/horseNNN.jpg and DATA_DIR/weizmann_horse/figure_ground/horseNNN.jpg \
                          (folder also accepted as weizmann_horse_db, or given directly)";

/// Where to get the data.
pub const DOWNLOAD: &str = "the Weizmann Horse Database (weizmann_horse_db) from Eran Borenstein's page, \
                            historically http://www.msri.org/people/members/eranb/";

/// Largest relative difference between the aspect ratios of a colour image
/// and its mask (the data set's pairs agree within 3 %).
pub const MAX_ASPECT_MISMATCH: f64 = 0.1;

/// Label of the horse pixels (background is 0).
pub const HORSE: u8 = 1;

/// Mask threshold: a mask pixel `≥ 128` is horse.
pub const MASK_THRESHOLD: u8 = 128;

/// Settings of the horse loader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HorsesConfig {
    /// Longer side of every reduced image, in pixels.
    pub max_side: usize,
    /// Load only the first `limit` images (sorted by name); `None`: all.
    pub limit: Option<usize>,
}

impl Default for HorsesConfig {
    fn default() -> Self {
        Self { max_side: 32, limit: None }
    }
}

/// The data set folder: `dir` itself if it holds `rgb/` and `figure_ground/`,
/// else `dir/weizmann_horse` or `dir/weizmann_horse_db`. `dir` defaults to
/// `$STRUCTLEARN_DATA_DIR`.
pub fn dataset_dir(dir: Option<&Path>) -> Result<PathBuf, DatasetError> {
    find_dataset_dir(dir, &FOLDERS, &["rgb", "figure_ground"], NAME, LAYOUT, DOWNLOAD)
}

/// Loads every image with a mask, in name order, reduced to `cfg.max_side`, in
/// parallel. Missing masks, undecodable JPEGs and empty folders are errors
/// naming the file.
pub fn load(dir: &Path, cfg: &HorsesConfig) -> Result<Vec<SceneImage>, DatasetError> {
    if !(2..=MAX_REDUCED_SIDE).contains(&cfg.max_side) {
        return Err(DatasetError::config(
            "max_side",
            format!("must be between 2 and {MAX_REDUCED_SIDE}, got {}", cfg.max_side),
        ));
    }
    let mut names = list_files(&dir.join("rgb"), ".jpg", NAME, LAYOUT, DOWNLOAD)?;
    if let Some(limit) = cfg.limit {
        names.truncate(limit);
    }
    for name in &names {
        require_file(&dir.join("figure_ground").join(name), "mask", NAME, LAYOUT, DOWNLOAD)?;
    }
    names.par_iter().map(|name| load_one(dir, name, cfg.max_side)).collect()
}

fn load_one(dir: &Path, file: &str, max_side: usize) -> Result<SceneImage, DatasetError> {
    let mask_path = dir.join("figure_ground").join(file);
    let mask = load_gray(&mask_path)?;
    let rgb = load_rgb(&dir.join("rgb").join(file))?;
    let (mw, mh) = mask.dimensions();
    let (mh, mw) = (mh as usize, mw as usize);
    // Real pairs differ in size but not in shape (aspect ratios within 3 %);
    // a mask of another shape belongs to another image or is damaged.
    let (ratio, mask_ratio) = (rgb.width() as f64 / rgb.height() as f64, mw as f64 / mh as f64);
    if (ratio / mask_ratio - 1.0).abs() > MAX_ASPECT_MISMATCH {
        return Err(DatasetError::Malformed {
            path: mask_path.display().to_string(),
            reason: format!(
                "the mask is {mw}×{mh} (width × height), the colour image {}×{}: their aspect ratios differ by \
                 more than {} %, so the mask does not belong to the image",
                rgb.width(),
                rgb.height(),
                MAX_ASPECT_MISMATCH * 100.0
            ),
        });
    }
    let labels = Raster::new(mh, mw, mask.as_raw().iter().map(|&v| Some(u8::from(v >= MASK_THRESHOLD))).collect())?;
    let (h, w) = reduced_size(mh, mw, scale_for_max_side(mh, mw, max_side));
    check_reduced_size(&mask_path, h, w)?;
    // Resizing the colour image to the mask's grid and then reducing it equals
    // (up to the filter's rounding) reducing it straight to the target grid.
    let small = resize_rgb(&rgb, h, w);
    let labels = reduce_labels(&labels, h, w);
    let name = stem_of(file, ".jpg").to_string();
    Ok(SceneImage { name, height: h, width: w, rgb: small.into_raw(), labels: labels.into_data() })
}
