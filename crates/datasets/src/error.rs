//! Typed errors of the generators, loaders and image helpers.

use factor_graph::GraphError;
use structlearn::LearnError;

/// Everything that can go wrong generating, loading or writing data.
///
/// ```
/// let err = datasets::Raster::new(2, 2, vec![0.0; 3]).unwrap_err();
/// println!("{err}");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// A generator setting is out of range.
    #[error("invalid setting `{field}`: {reason}")]
    InvalidConfig {
        /// The setting's name.
        field: &'static str,
        /// Why it is rejected (includes the value given).
        reason: String,
    },
    /// An array does not have the length its image shape asks for.
    #[error("{what}: expected {expected} values for a {height}×{width} image, got {got}")]
    ShapeMismatch {
        /// What was being built.
        what: &'static str,
        /// Rows.
        height: usize,
        /// Columns.
        width: usize,
        /// Values expected.
        expected: usize,
        /// Values given.
        got: usize,
    },
    /// A label has no colour in the palette.
    #[error("pixel {pixel}: label {label} is out of range (the palette has {classes} colours)")]
    LabelOutOfRange {
        /// Raster index of the pixel.
        pixel: usize,
        /// The label.
        label: usize,
        /// Number of labels allowed.
        classes: usize,
    },
    /// A colour of a label image is not in the palette.
    #[error("{image}: pixel ({row}, {col}) has colour {color:?}, which is not in the label palette")]
    UnknownColor {
        /// The file, or `label image` for an image in memory.
        image: String,
        /// Row.
        row: usize,
        /// Column.
        col: usize,
        /// The RGB colour found.
        color: [u8; 3],
    },
    /// An image is larger than the encoders (or `u32` sizes) allow, or empty.
    #[error("image size {height}×{width} is not supported: {reason}")]
    ImageSize {
        /// Rows.
        height: usize,
        /// Columns.
        width: usize,
        /// Why.
        reason: &'static str,
    },
    /// Reading or writing a file failed (missing file, permissions, full disk).
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// A file exists but is not a decodable image of a supported format (PNG, JPEG).
    #[error("{path}: cannot decode image: {reason}")]
    BadImage {
        /// The file.
        path: String,
        /// The decoder's message.
        reason: String,
    },
    /// Encoding an image failed.
    #[error("{path}: cannot encode image: {reason}")]
    Encode {
        /// The file.
        path: String,
        /// The encoder's message.
        reason: String,
    },
    /// Building a region graph failed.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The generated examples do not form a valid data set.
    #[error(transparent)]
    Dataset(#[from] LearnError),
}

impl DatasetError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        DatasetError::Io { path: path.display().to_string(), source }
    }

    pub(crate) fn config(field: &'static str, reason: impl Into<String>) -> Self {
        DatasetError::InvalidConfig { field, reason: reason.into() }
    }
}
