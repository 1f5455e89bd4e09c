//! Image helpers for grid data sets: per-pixel arrays ([`Raster`]), label maps
//! and their colours ([`LabelPalette`]), per-pixel and per-pair feature blocks
//! in the region order of [`factor_graph::grid`], and PNG/JPEG reading and
//! (atomic) PNG writing.
//!
//! Everything is row-major: pixel `(r, c)` of an `H × W` image is raster index
//! `r·W + c`, which is also its variable and singleton-region index in
//! [`factor_graph::grid`].
//!
//! ```
//! use datasets::{LabelPalette, Raster};
//! let labels = Raster::new(2, 3, vec![0, 1, 1, 0, 0, 1]).unwrap();
//! let png = LabelPalette::binary().to_image(&labels).unwrap();
//! assert_eq!(png.get_pixel(1, 0).0, [255, 255, 255]);
//! assert_eq!(LabelPalette::binary().from_image(&png).unwrap(), labels);
//! ```

use std::collections::{HashMap, HashSet};
use std::io::Cursor;
use std::path::Path;
use std::sync::Arc;

use ::image::{DynamicImage, GrayImage, ImageFormat, ImageReader, RgbImage};
use factor_graph::{GridLayout, RegionGraph};
use structlearn::FeatureBlock;

use crate::DatasetError;

/// A row-major `height × width` array of per-pixel values: a grayscale image
/// (`Raster<f64>`), a label map (`Raster<usize>`), one feature channel, ….
///
/// Invariant: `data.len() == height · width` (checked by [`Raster::new`]).
///
/// ```
/// use datasets::Raster;
/// let r = Raster::new(2, 3, vec![1, 2, 3, 4, 5, 6]).unwrap(); // row-major
/// assert_eq!(r.get(1, 0), Some(&4));
/// assert!(Raster::new(2, 3, vec![0; 5]).is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Raster<T> {
    height: usize,
    width: usize,
    data: Vec<T>,
}

impl<T> Raster<T> {
    /// Wraps row-major `data`; errors unless it holds `height · width` values.
    pub fn new(height: usize, width: usize, data: Vec<T>) -> Result<Self, DatasetError> {
        let expected = pixel_count(height, width)?;
        if data.len() != expected {
            return Err(DatasetError::ShapeMismatch { what: "raster", height, width, expected, got: data.len() });
        }
        Ok(Self { height, width, data })
    }

    /// Rows `H`.
    pub fn height(&self) -> usize {
        self.height
    }

    /// Columns `W`.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The grid layout of this image's shape.
    pub fn layout(&self) -> GridLayout {
        GridLayout { height: self.height, width: self.width }
    }

    /// The values in raster order.
    pub fn data(&self) -> &[T] {
        &self.data
    }

    /// The values in raster order, by value (e.g. a label map as `Vec<usize>`
    /// for [`structlearn::ExampleInfo::labels`]).
    pub fn into_data(self) -> Vec<T> {
        self.data
    }

    /// The value at row `r`, column `c`, if inside the image.
    pub fn get(&self, r: usize, c: usize) -> Option<&T> {
        if r < self.height && c < self.width { self.data.get(r * self.width + c) } else { None }
    }

    /// Whether `other` has the same shape.
    pub fn same_shape<U>(&self, other: &Raster<U>) -> bool {
        self.height == other.height && self.width == other.width
    }
}

impl<T: Clone> Raster<T> {
    /// An image with every pixel equal to `value`.
    pub fn filled(height: usize, width: usize, value: T) -> Result<Self, DatasetError> {
        let n = pixel_count(height, width)?;
        Ok(Self { height, width, data: vec![value; n] })
    }
}

fn pixel_count(height: usize, width: usize) -> Result<usize, DatasetError> {
    height.checked_mul(width).ok_or(DatasetError::ImageSize { height, width, reason: "height × width overflows" })
}

/// Converts an 8-bit grayscale image to values in `[0, 1]` (`v / 255`).
///
/// ```
/// let img = image::GrayImage::from_raw(2, 1, vec![0, 255]).unwrap();
/// let r = datasets::image::gray_to_raster(&img);
/// assert_eq!(r.data(), &[0.0, 1.0]);
/// ```
pub fn gray_to_raster(img: &GrayImage) -> Raster<f64> {
    let (w, h) = img.dimensions();
    let data = img.as_raw().iter().map(|&v| f64::from(v) / 255.0).collect();
    Raster { height: h as usize, width: w as usize, data }
}

/// The three channels of an RGB image as values in `[0, 1]`.
///
/// ```
/// let img = image::RgbImage::from_raw(1, 1, vec![255, 0, 51]).unwrap();
/// let [r, g, b] = datasets::image::rgb_to_rasters(&img);
/// assert_eq!((r.data()[0], g.data()[0], b.data()[0]), (1.0, 0.0, 0.2));
/// ```
pub fn rgb_to_rasters(img: &RgbImage) -> [Raster<f64>; 3] {
    let (w, h) = img.dimensions();
    let (height, width) = (h as usize, w as usize);
    let channel =
        |k: usize| Raster { height, width, data: img.pixels().map(|p| f64::from(p.0[k]) / 255.0).collect::<Vec<_>>() };
    [channel(0), channel(1), channel(2)]
}

/// A binary label map from a grayscale mask: label 1 where the pixel is
/// `≥ threshold`, else 0 (e.g. foreground masks stored as 0/255).
///
/// ```
/// let mask = image::GrayImage::from_raw(3, 1, vec![0, 127, 200]).unwrap();
/// assert_eq!(datasets::image::labels_from_mask(&mask, 128).data(), &[0, 0, 1]);
/// ```
pub fn labels_from_mask(img: &GrayImage, threshold: u8) -> Raster<usize> {
    let (w, h) = img.dimensions();
    let data = img.as_raw().iter().map(|&v| usize::from(v >= threshold)).collect();
    Raster { height: h as usize, width: w as usize, data }
}

/// Maps values linearly from `[lo, hi]` to gray levels `0..=255`, clamping
/// outside the range; NaN becomes 0. `lo == hi` maps everything to 0.
///
/// ```
/// let r = datasets::Raster::new(1, 3, vec![-1.0, 0.5, 2.0]).unwrap();
/// let img = datasets::image::raster_to_gray(&r, 0.0, 1.0).unwrap(); // clamped to [lo, hi]
/// assert_eq!(img.as_raw(), &[0, 128, 255]);
/// ```
pub fn raster_to_gray(raster: &Raster<f64>, lo: f64, hi: f64) -> Result<GrayImage, DatasetError> {
    let (w, h) = image_dims(raster.height, raster.width)?;
    let span = hi - lo;
    let data = raster
        .data
        .iter()
        .map(|&v| {
            let t = if span > 0.0 { ((v - lo) / span).clamp(0.0, 1.0) } else { 0.0 };
            // NaN survives clamp; `as u8` turns it into 0.
            (t * 255.0).round() as u8
        })
        .collect();
    GrayImage::from_raw(w, h, data).ok_or(DatasetError::ImageSize {
        height: raster.height,
        width: raster.width,
        reason: "buffer does not match the image size",
    })
}

fn image_dims(height: usize, width: usize) -> Result<(u32, u32), DatasetError> {
    if height == 0 || width == 0 {
        return Err(DatasetError::ImageSize { height, width, reason: "an image needs at least one pixel" });
    }
    match (u32::try_from(width), u32::try_from(height)) {
        (Ok(w), Ok(h)) => Ok((w, h)),
        _ => Err(DatasetError::ImageSize { height, width, reason: "sides must fit in 32 bits" }),
    }
}

/// Colours of the labels of a multi-class label map (label `l` ↦ `colors[l]`).
///
/// ```
/// use datasets::{LabelPalette, Raster};
/// let palette = LabelPalette::distinct(3).unwrap();
/// let labels = Raster::new(1, 3, vec![0, 1, 2]).unwrap();
/// let img = palette.to_image(&labels).unwrap();
/// assert_eq!(palette.from_image(&img).unwrap(), labels); // colours map back to labels
/// assert_eq!(LabelPalette::binary().color(1), Some([255, 255, 255]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelPalette {
    colors: Vec<[u8; 3]>,
}

/// The first colours of [`LabelPalette::distinct`]: black, white, then well
/// separated hues.
const BASE_COLORS: [[u8; 3]; 12] = [
    [0, 0, 0],
    [255, 255, 255],
    [31, 119, 180],
    [255, 127, 14],
    [44, 160, 44],
    [214, 39, 40],
    [148, 103, 189],
    [140, 86, 75],
    [227, 119, 194],
    [127, 127, 127],
    [188, 189, 34],
    [23, 190, 207],
];

impl LabelPalette {
    /// A palette with the given colours; they must be non-empty and distinct
    /// (so that a label image can be read back).
    pub fn new(colors: Vec<[u8; 3]>) -> Result<Self, DatasetError> {
        if colors.is_empty() {
            return Err(DatasetError::config("palette", "a palette needs at least one colour"));
        }
        let mut seen = HashMap::new();
        for (l, c) in colors.iter().enumerate() {
            if let Some(first) = seen.insert(*c, l) {
                return Err(DatasetError::config(
                    "palette",
                    format!("labels {first} and {l} have the same colour {c:?}"),
                ));
            }
        }
        Ok(Self { colors })
    }

    /// Black for label 0, white for label 1 (the paper's Fig. 3).
    pub fn binary() -> Self {
        Self { colors: BASE_COLORS[..2].to_vec() }
    }

    /// `classes` distinct colours: black, white, ten well separated hues, then
    /// further distinct colours of a fixed sequence. Errors above 2²⁴ classes
    /// (there are no more 8-bit RGB colours).
    pub fn distinct(classes: usize) -> Result<Self, DatasetError> {
        if classes > 1 << 24 {
            return Err(DatasetError::config("palette", format!("{classes} classes exceed the 2^24 RGB colours")));
        }
        let mut colors: Vec<[u8; 3]> = BASE_COLORS.iter().take(classes).copied().collect();
        let mut used: HashSet<[u8; 3]> = colors.iter().copied().collect();
        let mut push = |c: [u8; 3], colors: &mut Vec<[u8; 3]>| {
            if used.insert(c) {
                colors.push(c);
            }
        };
        // The hue sequence repeats colours eventually; past a generous budget,
        // count through the RGB cube so that the loop always ends.
        let budget = 8 * classes as u64 + 64;
        let mut k: u64 = 0;
        while colors.len() < classes {
            let c = if k < budget {
                sequence_color(k)
            } else {
                let [_, r, g, b] = ((k - budget) as u32).to_be_bytes();
                [r, g, b]
            };
            k += 1;
            push(c, &mut colors);
        }
        Ok(Self { colors })
    }

    /// Number of labels with a colour.
    pub fn len(&self) -> usize {
        self.colors.len()
    }

    /// Whether the palette has no colours (only `distinct(0)`).
    pub fn is_empty(&self) -> bool {
        self.colors.is_empty()
    }

    /// The colours, label order.
    pub fn colors(&self) -> &[[u8; 3]] {
        &self.colors
    }

    /// Colour of `label`, if it has one.
    pub fn color(&self, label: usize) -> Option<[u8; 3]> {
        self.colors.get(label).copied()
    }

    /// Label of `color`, if it is in the palette.
    pub fn label_of(&self, color: [u8; 3]) -> Option<usize> {
        self.colors.iter().position(|&c| c == color)
    }

    /// Paints a label map; errors on a label without a colour.
    pub fn to_image(&self, labels: &Raster<usize>) -> Result<RgbImage, DatasetError> {
        let (w, h) = image_dims(labels.height, labels.width)?;
        let mut data = Vec::with_capacity(labels.data.len() * 3);
        for (pixel, &label) in labels.data.iter().enumerate() {
            let c = self.color(label).ok_or(DatasetError::LabelOutOfRange { pixel, label, classes: self.len() })?;
            data.extend_from_slice(&c);
        }
        RgbImage::from_raw(w, h, data).ok_or(DatasetError::ImageSize {
            height: labels.height,
            width: labels.width,
            reason: "buffer does not match the image size",
        })
    }

    /// Reads a label map back from its colours; errors on a colour not in the palette.
    pub fn from_image(&self, img: &RgbImage) -> Result<Raster<usize>, DatasetError> {
        let lookup: HashMap<[u8; 3], usize> = self.colors.iter().enumerate().map(|(l, &c)| (c, l)).collect();
        let (w, h) = img.dimensions();
        let width = w as usize;
        let data = img
            .pixels()
            .enumerate()
            .map(|(i, p)| {
                lookup.get(&p.0).copied().ok_or(DatasetError::UnknownColor {
                    image: "label image".into(),
                    row: i / width.max(1),
                    col: i % width.max(1),
                    color: p.0,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Raster { height: h as usize, width, data })
    }
}

/// Colour `k` of an endless sequence: hue stepped by the golden ratio, with
/// alternating saturation/value so that neighbours in the sequence differ.
fn sequence_color(k: u64) -> [u8; 3] {
    let hue = (k as f64 * 0.618_033_988_749_895).fract() * 6.0;
    let (s, v) = match k % 3 {
        0 => (0.85, 0.95),
        1 => (0.55, 0.75),
        _ => (0.95, 0.55),
    };
    let c = v * s;
    let x = c * (1.0 - (hue % 2.0 - 1.0).abs());
    let (r, g, b) = match hue as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = v - c;
    let q = |t: f64| ((t + m) * 255.0).round() as u8;
    [q(r), q(g), q(b)]
}

/// Per-pixel feature rows for the singleton regions of a grid (rows in raster
/// order = the order of [`factor_graph::grid`]'s unary regions): row `i` is
/// `[channels[0][i], channels[1][i], …]`, followed by a constant `1.0` when
/// `constant` is set. All channels must have one shape.
///
/// ```
/// use datasets::{Raster, pixel_features};
/// let gray = Raster::new(1, 2, vec![0.25, 0.75]).unwrap();
/// let block = pixel_features(&[&gray], true).unwrap();
/// assert_eq!(block.dim, 2);
/// assert_eq!(block.values, vec![0.25, 1.0, 0.75, 1.0]);
/// ```
pub fn pixel_features(channels: &[&Raster<f64>], constant: bool) -> Result<FeatureBlock, DatasetError> {
    let Some(first) = channels.first() else {
        let reason = "at least one channel is needed to know the image size";
        return Err(DatasetError::config("channels", reason));
    };
    for ch in channels {
        if !ch.same_shape(first) {
            return Err(DatasetError::ShapeMismatch {
                what: "feature channel",
                height: first.height,
                width: first.width,
                expected: first.data.len(),
                got: ch.data.len(),
            });
        }
    }
    let dim = channels.len() + usize::from(constant);
    let mut values = Vec::with_capacity(first.data.len() * dim);
    for i in 0..first.data.len() {
        values.extend(channels.iter().map(|ch| ch.data[i]));
        if constant {
            values.push(1.0);
        }
    }
    Ok(FeatureBlock { dim, values })
}

/// Per-pair feature rows for the pair regions of a grid, in
/// [`GridLayout::pair_pixels`] order (horizontal pairs, then vertical pairs).
/// `feature(i, j, row)` fills the `dim` features of the pair over pixels `i`
/// (left/top) and `j` (right/bottom).
///
/// ```
/// use datasets::pair_features;
/// use factor_graph::GridLayout;
/// let gray = [0.0_f64, 0.5, 1.0, 1.0];
/// let layout = GridLayout { height: 2, width: 2 };
/// let block = pair_features(layout, 2, |i, j, row| {
///     row[0] = (gray[i] - gray[j]).abs();
///     row[1] = 1.0;
/// });
/// assert_eq!(block.values, vec![0.5, 1.0, 0.0, 1.0, 1.0, 1.0, 0.5, 1.0]);
/// ```
pub fn pair_features<F>(layout: GridLayout, dim: usize, mut feature: F) -> FeatureBlock
where
    F: FnMut(usize, usize, &mut [f64]),
{
    let pairs = layout.num_pairs();
    let mut values = vec![0.0; pairs * dim];
    if dim > 0 {
        for (p, row) in values.chunks_exact_mut(dim).enumerate() {
            let (i, j) = layout.pair_pixels(p);
            feature(i, j, row);
        }
    }
    FeatureBlock { dim, values }
}

/// Shares one grid region graph per image shape and label count, so that the
/// examples of a data set with many images of few sizes share graphs (as
/// [`structlearn::Dataset`] and its file format expect).
///
/// ```
/// let mut graphs = datasets::image::GridGraphs::new();
/// let a = graphs.get(10, 12, 2).unwrap();
/// let b = graphs.get(10, 12, 2).unwrap();
/// assert!(std::sync::Arc::ptr_eq(&a, &b)); // one graph per shape
/// assert_eq!(graphs.len(), 1);
/// ```
#[derive(Debug, Default)]
pub struct GridGraphs {
    graphs: HashMap<(usize, usize, usize), Arc<RegionGraph>>,
}

impl GridGraphs {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The [`factor_graph::grid`] of this shape, built on first use.
    pub fn get(&mut self, height: usize, width: usize, labels: usize) -> Result<Arc<RegionGraph>, DatasetError> {
        if let Some(g) = self.graphs.get(&(height, width, labels)) {
            return Ok(g.clone());
        }
        let g = Arc::new(factor_graph::grid(height, width, labels)?);
        self.graphs.insert((height, width, labels), g.clone());
        Ok(g)
    }

    /// Number of distinct graphs built so far.
    pub fn len(&self) -> usize {
        self.graphs.len()
    }

    /// Whether no graph has been built yet.
    pub fn is_empty(&self) -> bool {
        self.graphs.is_empty()
    }
}

/// Reads a PNG or JPEG file (format guessed from its contents). A missing or
/// unreadable file is [`DatasetError::Io`]; anything the decoders reject
/// (corrupt, truncated, another format, or dimensions needing more memory than
/// [`image_memory_limit`] allows for its size) is [`DatasetError::BadImage`].
///
/// ```
/// let err = datasets::image::load_image("no/such.png".as_ref()).unwrap_err();
/// println!("{err}"); // names the file
/// ```
pub fn load_image(path: &Path) -> Result<DynamicImage, DatasetError> {
    use std::io::Read as _;
    let bad = |reason: String| DatasetError::BadImage { path: path.display().to_string(), reason };
    let meta = std::fs::metadata(path).map_err(|e| DatasetError::io(path, e))?;
    // A folder, a pipe or a device: reading would fail late, block, or never end.
    if !meta.is_file() {
        return Err(bad("not a regular file (a folder, pipe or device)".into()));
    }
    if meta.len() > MAX_IMAGE_FILE_BYTES {
        return Err(bad(format!("{} bytes, more than the {MAX_IMAGE_FILE_BYTES} an image file may have", meta.len())));
    }
    // Read at most the limit even if the file grows meanwhile.
    let file = std::fs::File::open(path).map_err(|e| DatasetError::io(path, e))?;
    let mut bytes = Vec::new();
    std::io::Read::take(file, MAX_IMAGE_FILE_BYTES).read_to_end(&mut bytes).map_err(|e| DatasetError::io(path, e))?;
    decode_image(&bytes, path)
}

/// The largest image file [`load_image`] reads (256 MiB; a photograph of
/// these data sets is well under 1 MiB).
pub const MAX_IMAGE_FILE_BYTES: u64 = 256 << 20;

/// Decodes the bytes of a PNG or JPEG file like [`load_image`]; `source` names it in errors.
///
/// ```
/// let err = datasets::image::decode_image(b"\x89PNG\r\n\x1a\n", "cut.png".as_ref()).unwrap_err();
/// assert!(err.to_string().contains("cut.png"));
/// ```
pub fn decode_image(bytes: &[u8], source: &Path) -> Result<DynamicImage, DatasetError> {
    let bad = |reason: String| DatasetError::BadImage { path: source.display().to_string(), reason };
    let mut reader =
        ImageReader::new(Cursor::new(bytes)).with_guessed_format().map_err(|e| DatasetError::io(source, e))?;
    if reader.format().is_none() {
        return Err(bad("not a PNG or JPEG file (unrecognised contents)".into()));
    }
    if reader.format() == Some(ImageFormat::Jpeg) && !jpeg_has_end(bytes) {
        // The JPEG decoder fills a cut-off scan with grey instead of failing.
        return Err(bad("truncated JPEG: no end-of-image marker after the last scan".into()));
    }
    if reader.format() == Some(ImageFormat::Png) && !bytes.windows(8).any(|w| w == b"IEND\xAE\x42\x60\x82") {
        // The PNG decoder stops after the image data and never looks for the end chunk.
        return Err(bad("truncated PNG: no IEND chunk".into()));
    }
    let mut limits = ::image::Limits::default();
    limits.max_alloc = Some(image_memory_limit(bytes.len()) as u64);
    reader.limits(limits);
    reader.decode().map_err(|e| match e {
        ::image::ImageError::IoError(source_error) => DatasetError::io(source, source_error),
        other => bad(other.to_string()),
    })
}

/// Whether a JPEG stream has an end-of-image marker (`FF D9`) after its last
/// start-of-scan (`FF DA`); inside a scan `FF` is always followed by `00`, so
/// the marker cannot occur by accident, and an embedded thumbnail's end
/// marker comes before the main scan.
fn jpeg_has_end(bytes: &[u8]) -> bool {
    let last_scan = bytes.windows(2).rposition(|w| w == [0xFF, 0xDA]).unwrap_or(0);
    bytes[last_scan..].windows(2).any(|w| w == [0xFF, 0xD9])
}

/// Most bytes decoding an image file of `file_bytes` bytes may allocate:
/// 1100 per byte of the file (above zlib's largest expansion), at least 16 MiB
/// and at most 512 MiB, so a header declaring 60000 × 60000 pixels in a
/// hundred bytes is an error instead of gigabytes.
///
/// ```
/// assert_eq!(datasets::image::image_memory_limit(100), 16 << 20);
/// assert_eq!(datasets::image::image_memory_limit(usize::MAX), 512 << 20);
/// ```
pub fn image_memory_limit(file_bytes: usize) -> usize {
    file_bytes.saturating_mul(1100).clamp(16 << 20, 512 << 20)
}

/// [`load_image`] converted to 8-bit RGB.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("x.png");
/// let img = image::DynamicImage::ImageRgb8(image::RgbImage::from_raw(1, 1, vec![1, 2, 3]).unwrap());
/// datasets::image::write_png(&path, &img).unwrap();
/// assert_eq!(datasets::image::load_rgb(&path).unwrap().as_raw(), &[1, 2, 3]);
/// ```
pub fn load_rgb(path: &Path) -> Result<RgbImage, DatasetError> {
    Ok(load_image(path)?.to_rgb8())
}

/// [`load_image`] converted to 8-bit grayscale.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("g.png");
/// datasets::image::write_gray_png(&path, &datasets::Raster::new(1, 2, vec![0.0, 1.0]).unwrap(), 0.0, 1.0).unwrap();
/// assert_eq!(datasets::image::load_gray(&path).unwrap().as_raw(), &[0, 255]);
/// ```
pub fn load_gray(path: &Path) -> Result<GrayImage, DatasetError> {
    Ok(load_image(path)?.to_luma8())
}

/// Reads a label map stored as a colour image in `palette`'s colours (a lossless
/// format such as PNG; JPEG artefacts would give unknown colours).
///
/// ```
/// use datasets::{LabelPalette, Raster};
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("truth.png");
/// let palette = LabelPalette::distinct(4).unwrap();
/// let labels = Raster::new(1, 4, vec![3, 2, 1, 0]).unwrap();
/// datasets::image::write_label_png(&path, &labels, &palette).unwrap();
/// assert_eq!(datasets::image::load_label_map(&path, &palette).unwrap(), labels);
/// ```
pub fn load_label_map(path: &Path, palette: &LabelPalette) -> Result<Raster<usize>, DatasetError> {
    palette.from_image(&load_rgb(path)?).map_err(|e| match e {
        DatasetError::UnknownColor { row, col, color, .. } => {
            DatasetError::UnknownColor { image: path.display().to_string(), row, col, color }
        }
        other => other,
    })
}

/// Writes `img` as PNG atomically: encoded in memory, written to a temporary
/// file in the target's folder, then renamed over `path` (a reader never sees
/// a half-written file). Parent folders must exist.
///
/// ```
/// use datasets::{LabelPalette, Raster};
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("labels.png");
/// let labels = Raster::new(2, 2, vec![0, 1, 1, 0]).unwrap();
/// datasets::image::write_label_png(&path, &labels, &LabelPalette::binary()).unwrap();
/// let back = datasets::image::load_label_map(&path, &LabelPalette::binary()).unwrap();
/// assert_eq!(back, labels);
/// ```
pub fn write_png(path: &Path, img: &DynamicImage) -> Result<(), DatasetError> {
    let mut bytes = Vec::new();
    img.write_to(&mut Cursor::new(&mut bytes), ImageFormat::Png)
        .map_err(|e| DatasetError::Encode { path: path.display().to_string(), reason: e.to_string() })?;
    write_atomic(path, &bytes)
}

/// Writes a grayscale float image as PNG, mapping `[lo, hi]` to black…white
/// (see [`raster_to_gray`]).
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let noisy = datasets::Raster::new(2, 2, vec![0.0, 0.3, 0.6, 1.0]).unwrap();
/// datasets::image::write_gray_png(&dir.path().join("noisy.png"), &noisy, 0.0, 1.0).unwrap();
/// ```
pub fn write_gray_png(path: &Path, raster: &Raster<f64>, lo: f64, hi: f64) -> Result<(), DatasetError> {
    write_png(path, &DynamicImage::ImageLuma8(raster_to_gray(raster, lo, hi)?))
}

/// Writes a label map as an RGB PNG in `palette`'s colours.
///
/// ```
/// use datasets::{LabelPalette, Raster};
/// let dir = tempfile::tempdir().unwrap();
/// let labels = Raster::new(2, 2, vec![0, 1, 1, 0]).unwrap();
/// datasets::image::write_label_png(&dir.path().join("labels.png"), &labels, &LabelPalette::binary()).unwrap();
/// assert!(datasets::image::write_label_png(&dir.path().join("bad.png"), &Raster::new(1, 1, vec![5]).unwrap(), &LabelPalette::binary()).is_err());
/// ```
pub fn write_label_png(path: &Path, labels: &Raster<usize>, palette: &LabelPalette) -> Result<(), DatasetError> {
    write_png(path, &DynamicImage::ImageRgb8(palette.to_image(labels)?))
}

/// Writes `bytes` to `path` through a synced temporary file in the same folder
/// and a rename.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// datasets::image::write_atomic(&dir.path().join("f.bin"), &[1, 2, 3]).unwrap();
/// ```
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), DatasetError> {
    structlearn::files::write_atomic_io(path, bytes).map_err(|e| DatasetError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raster_rejects_wrong_length_and_indexes_row_major() {
        assert!(matches!(
            Raster::new(2, 3, vec![0u8; 5]),
            Err(DatasetError::ShapeMismatch { expected: 6, got: 5, .. })
        ));
        assert!(matches!(Raster::<u8>::filled(usize::MAX, 2, 0), Err(DatasetError::ImageSize { .. })));
        let r = Raster::new(2, 3, (0..6).collect()).unwrap();
        assert_eq!(r.get(1, 0), Some(&3));
        assert_eq!(r.get(0, 3), None);
        assert_eq!(r.get(2, 0), None);
        assert_eq!(r.layout().num_pairs(), 7);
    }

    #[test]
    fn palettes_are_distinct_and_round_trip() {
        assert!(LabelPalette::distinct(0).unwrap().is_empty());
        for classes in [1, 2, 8, 12, 40, 5000] {
            let p = LabelPalette::distinct(classes).unwrap();
            assert_eq!(p.len(), classes);
            assert!(LabelPalette::new(p.colors().to_vec()).is_ok(), "{classes} colours are not distinct");
        }
        assert!(LabelPalette::new(vec![]).is_err());
        assert!(LabelPalette::new(vec![[1, 2, 3], [1, 2, 3]]).is_err());
        assert!(LabelPalette::distinct((1 << 24) + 1).is_err());
        let p = LabelPalette::distinct(5).unwrap();
        let labels = Raster::new(2, 4, vec![0, 1, 2, 3, 4, 4, 3, 2]).unwrap();
        let img = p.to_image(&labels).unwrap();
        assert_eq!(p.from_image(&img).unwrap(), labels);
        let bad = Raster::new(1, 2, vec![0, 5]).unwrap();
        assert!(matches!(p.to_image(&bad), Err(DatasetError::LabelOutOfRange { pixel: 1, label: 5, classes: 5 })));
        let mut img = img;
        img.put_pixel(3, 1, ::image::Rgb([1, 2, 3]));
        assert!(matches!(p.from_image(&img), Err(DatasetError::UnknownColor { row: 1, col: 3, .. })));
    }

    #[test]
    fn gray_mapping_clamps_and_handles_nan() {
        let r = Raster::new(1, 5, vec![-1.0, 0.0, 0.5, 1.0, f64::NAN]).unwrap();
        let g = raster_to_gray(&r, 0.0, 1.0).unwrap();
        assert_eq!(g.as_raw(), &[0, 0, 128, 255, 0]);
        assert_eq!(raster_to_gray(&r, 1.0, 1.0).unwrap().as_raw(), &[0; 5]);
        assert!(raster_to_gray(&Raster::new(0, 3, vec![]).unwrap(), 0.0, 1.0).is_err());
        let back = gray_to_raster(&g);
        assert_eq!(back.data()[3], 1.0);
        assert_eq!(back.height(), 1);
    }

    #[test]
    fn pixel_and_pair_features_follow_the_grid_layout() {
        let layout = GridLayout { height: 3, width: 4 };
        let ramp = Raster::new(3, 4, (0..12).map(f64::from).collect()).unwrap();
        let twice = Raster::new(3, 4, (0..12).map(|v| 2.0 * f64::from(v)).collect()).unwrap();
        let block = pixel_features(&[&ramp, &twice], true).unwrap();
        assert_eq!(block.dim, 3);
        assert_eq!(&block.values[3 * 5..3 * 6], &[5.0, 10.0, 1.0]);
        let wrong = Raster::new(4, 3, vec![0.0; 12]).unwrap();
        assert!(matches!(pixel_features(&[&ramp, &wrong], false), Err(DatasetError::ShapeMismatch { .. })));
        assert!(pixel_features(&[], true).is_err());

        let pairs = pair_features(layout, 2, |i, j, row| {
            row[0] = i as f64;
            row[1] = j as f64;
        });
        let g = factor_graph::grid(3, 4, 2).unwrap();
        let pair_type = g.factor_type_index(factor_graph::PAIRWISE).unwrap();
        let regions = g.regions_of_type(pair_type);
        assert_eq!(regions.len() * 2, pairs.values.len());
        for (row, &region) in pairs.values.chunks_exact(2).zip(regions) {
            assert_eq!(g.region_variables(region), &[row[0] as usize, row[1] as usize]);
        }
    }

    #[test]
    fn grid_graphs_are_shared_per_shape() {
        let mut graphs = GridGraphs::new();
        let a = graphs.get(3, 4, 2).unwrap();
        let b = graphs.get(3, 4, 2).unwrap();
        let c = graphs.get(4, 3, 2).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(graphs.len(), 2);
        assert!(matches!(graphs.get(0, 3, 2), Err(DatasetError::Graph(_))));
    }

    #[test]
    fn png_round_trips_gray_and_labels() {
        let dir = tempfile::tempdir().unwrap();
        let gray = Raster::new(3, 5, (0..15).map(|v| f64::from(v) / 14.0).collect()).unwrap();
        let path = dir.path().join("gray.png");
        write_gray_png(&path, &gray, 0.0, 1.0).unwrap();
        let back = gray_to_raster(&load_gray(&path).unwrap());
        assert!(back.same_shape(&gray));
        for (a, b) in back.data().iter().zip(gray.data()) {
            assert!((a - b).abs() <= 0.5 / 255.0 + 1e-12, "{a} vs {b}");
        }

        let palette = LabelPalette::distinct(4).unwrap();
        let labels = Raster::new(2, 3, vec![3, 2, 1, 0, 1, 2]).unwrap();
        let path = dir.path().join("labels.png");
        write_label_png(&path, &labels, &palette).unwrap();
        assert_eq!(load_label_map(&path, &palette).unwrap(), labels);
        let mask = labels_from_mask(&load_gray(&dir.path().join("gray.png")).unwrap(), 128);
        // Gray levels round(255·v/14) for v = 0..15 reach 128 from v = 7 on.
        assert_eq!(mask.data().iter().sum::<usize>(), 8);
        // Only the target appears in the folder: the temporary file was renamed.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn loading_reports_missing_corrupt_and_foreign_files() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.png");
        assert!(matches!(load_image(&missing), Err(DatasetError::Io { .. })));
        let text = dir.path().join("notes.png");
        std::fs::write(&text, b"hello, not an image").unwrap();
        assert!(matches!(load_image(&text), Err(DatasetError::BadImage { .. })));
        let good = dir.path().join("good.png");
        write_gray_png(&good, &Raster::new(8, 8, vec![0.5; 64]).unwrap(), 0.0, 1.0).unwrap();
        let bytes = std::fs::read(&good).unwrap();
        let truncated = dir.path().join("truncated.png");
        std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
        let err = load_image(&truncated).unwrap_err();
        assert!(matches!(err, DatasetError::BadImage { .. } | DatasetError::Io { .. }), "{err}");
        assert!(err.to_string().contains("truncated.png"), "{err}");
        let palette = LabelPalette::binary();
        let err = load_label_map(&good, &palette).unwrap_err();
        assert!(matches!(&err, DatasetError::UnknownColor { image, .. } if image.ends_with("good.png")), "{err}");
        assert!(matches!(
            write_png(&dir.path().join("no/such/dir.png"), &DynamicImage::new_rgb8(1, 1)),
            Err(DatasetError::Io { .. })
        ));
    }
}
