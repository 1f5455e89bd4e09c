//! The native module `structlearn._core` of the Python package `structlearn`.
//!
//! The estimators (`structlearn.GraphCRF`, `structlearn.GridCRF`) are pure
//! Python (`python/structlearn/`): they validate the user's arrays, with
//! errors that name the argument, the example and the expected shape, and
//! call this module, which does the work with the `structlearn` library:
//!
//! * [`PyDataset`] (`_core.Dataset`): a [`structlearn::Dataset`] built from
//!   numpy arrays (one feature matrix per factor type, one scope matrix per
//!   non-unary type), read from or written to `.sld` / `.json` files;
//! * [`PyModel`] (`_core.Model`): a [`structlearn::StructuredModel`]: predict,
//!   beliefs, the model file's bytes (`.slm`, the same bytes as the CLI's);
//! * `train` ([`train::train`]): any learner of [`structlearn::LearnerKind`], with oracles from
//!   the registry by specification or Python objects ([`pyoracle`]), the GIL
//!   released, Ctrl-C polled between steps;
//! * [`denoising`]: the synthetic denoising data of NIPS 2013 §5.1.
//!
//! Nothing here changes a numerical result: the library does all the
//! computation, so a model trained from Python has the bytes the command
//! line writes for the same data and settings.

pub mod convert;
pub mod pyoracle;
pub mod train;

use pyo3::prelude::*;

pub use convert::{PyDataset, PyModel};

/// `structlearn._core.denoising(height, width, train, test, sigma, seed)`:
/// the synthetic denoising data (`datasets::denoising`), as a training and a
/// test [`PyDataset`] — the data `cargo xtask reproduce` uses.
#[pyfunction]
#[pyo3(signature = (height, width, train, test, sigma, seed))]
pub fn denoising(
    py: Python<'_>,
    height: usize,
    width: usize,
    train: usize,
    test: usize,
    sigma: f64,
    seed: u64,
) -> PyResult<(PyDataset, PyDataset)> {
    let config = datasets::denoising::DenoisingConfig { height, width, train, test, sigma, seed };
    let data = py
        .detach(|| datasets::denoising::generate(&config))
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    Ok((PyDataset::new(data.train), PyDataset::new(data.test)))
}

/// `structlearn._core.scene(train, test, height, width, labels, unary_dim,
/// pair_dim, seed)`: Stanford-Background-shaped synthetic scenes
/// (`datasets::scene`, what `cargo xtask bench-scale` trains on), as a
/// training and a test [`PyDataset`].
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn scene(
    py: Python<'_>,
    train: usize,
    test: usize,
    height: usize,
    width: usize,
    labels: usize,
    unary_dim: usize,
    pair_dim: usize,
    seed: u64,
) -> PyResult<(PyDataset, PyDataset)> {
    let config = datasets::scene::SceneConfig {
        train,
        test,
        height,
        width,
        labels,
        unary_dim,
        pair_dim,
        seed,
        ..Default::default()
    };
    let data = py
        .detach(|| datasets::scene::generate(&config))
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    Ok((PyDataset::new(data.train), PyDataset::new(data.test)))
}

/// The module: classes `Dataset`, `Model`; functions `train`, `denoising`,
/// `scene`, `oracle_kinds`, `infer_uai`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDataset>()?;
    m.add_class::<PyModel>()?;
    m.add_function(wrap_pyfunction!(train::train, m)?)?;
    m.add_function(wrap_pyfunction!(denoising, m)?)?;
    m.add_function(wrap_pyfunction!(scene, m)?)?;
    m.add_function(wrap_pyfunction!(convert::oracle_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(convert::ignored_settings, m)?)?;
    m.add_function(wrap_pyfunction!(convert::default_train_config, m)?)?;
    m.add_function(wrap_pyfunction!(convert::infer_uai, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
