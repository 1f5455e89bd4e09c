//! Data sets for the experiments (docs/MATH.md §6): generators and image helpers that
//! produce [`structlearn::Dataset`]s over [`factor_graph::grid`] region graphs.
//!
//! * [`denoising`]: the seeded synthetic binary denoising data of NIPS §8 (docs/MATH.md §6.1);
//! * [`punyakanok`]: Punyakanok et al.'s constrained-output data (docs/MATH.md §6.5);
//! * [`shapes`]: noisy binary shapes, tied and untied, for Hazan & Urtasun's
//!   experiment (docs/MATH.md §6.4);
//! * [`image`]: per-pixel arrays, label maps and palettes, per-pixel and per-pair
//!   feature blocks in grid region order, PNG/JPEG reading and atomic PNG writing;
//! * [`horses`] and [`stanford`]: loaders of the Weizmann horses and Stanford
//!   Background data sets (docs/MATH.md §6.2–6.3), which share [`photos`]
//!   (reduction, examples with unknown labels, splits, the feature cache, the
//!   prediction pipeline) and [`features`] (RGB, position, HOG, Sobel;
//!   standardisation);
//! * [`scene`]: a seeded synthetic data set of Stanford Background's shape
//!   (any image count, size, label count and feature dimensions) for scale benchmarks;
//! * [`uai_families`]: seeded UAI models (pedigrees, CSPs with planted
//!   solutions, frustrated grids) for measuring MAP decoding.
//!
//! Errors are [`DatasetError`] values; no function panics on bad input.

pub mod denoising;
mod error;
pub mod features;
pub mod horses;
pub mod image;
pub mod photos;
pub mod punyakanok;
pub mod scene;
pub mod shapes;
pub mod stanford;
pub mod uai_families;

pub use crate::denoising::{DenoisingConfig, DenoisingData, DenoisingImage};
pub use crate::error::DatasetError;
pub use crate::image::{GridGraphs, LabelPalette, Raster, pair_features, pixel_features};
