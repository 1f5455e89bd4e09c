//! Any Python model as an energy: a Python object behind the oracle contract.
//!
//! A Python oracle is an object with a method
//!
//! ```text
//! fit(features, labels, bias, warm_start, sample_weight) -> model
//! ```
//!
//! * `features`: float64 `(n, d)`, one row per region of the factor type;
//! * `labels`: int64 `(n,)`, each row's observed configuration `y_k` in `0..C`;
//! * `bias`: float64 `(n, C)`, the fixed per-row bias `b_k(y)` (may hold −inf:
//!   configurations ruled out);
//! * `warm_start`: the model this oracle returned last time for this factor
//!   type (None on the first call);
//! * `sample_weight`: float64 `(n,)` row weights `w_k`, or None (all 1),
//!
//! returning a model object with `scores(features) -> (n, C)` array, the
//! function `g(φ, y)`. The fit should lower the biased logistic loss
//!
//! ```text
//! L(g) = Σ_k w_k [ log Σ_y exp(g(φ_k, y) + b_k(y)) − g(φ_k, y_k) − b_k(y_k) ]
//! ```
//!
//! (plus the oracle's own penalty, if it defines `penalty(model) -> float`):
//! a fit whose objective is higher than the warm start's is rejected and the
//! warm start kept (the library's `fit_monotone`). The model is saved in model
//! files as its pickle (kind `python`), so the command line cannot load it.
//!
//! Errors raised by the Python code are kept and re-raised by `train` as they
//! are (the library sees an [`OracleError::InvalidModel`]).

use std::any::Any;
use std::sync::{Arc, Mutex};

use numpy::prelude::*;
use numpy::{PyArray1, PyReadonlyArray2};
use oracles::{FitContext, Model, Oracle, OracleError, Problem, check_score_buffer};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The oracle and model kind of Python classes.
pub const KIND: &str = "python";

/// Where the first Python exception raised during training is kept.
pub type ErrorSlot = Arc<Mutex<Option<PyErr>>>;

fn keep(slot: Option<&ErrorSlot>, py: Python<'_>, e: PyErr, what: &str) -> OracleError {
    let text = format!("{what}: {}", e.value(py));
    if let Some(slot) = slot
        && let Ok(mut s) = slot.lock()
        && s.is_none()
    {
        *s = Some(e);
    }
    OracleError::InvalidModel { kind: KIND.into(), reason: text }
}

/// A Python oracle object (module docs).
pub struct PyOracle {
    object: Py<PyAny>,
    errors: ErrorSlot,
}

impl PyOracle {
    /// Wraps `object`; Python exceptions go to `errors`.
    pub fn new(object: Py<PyAny>, errors: ErrorSlot) -> Self {
        Self { object, errors }
    }
}

impl std::fmt::Debug for PyOracle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PyOracle")
    }
}

fn matrix<'py>(py: Python<'py>, values: &[f64], rows: usize, cols: usize) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyArray1::from_slice(py, values).reshape([rows, cols])?.into_any())
}

impl Oracle for PyOracle {
    fn kind(&self) -> &str {
        KIND
    }

    fn validate(&self) -> Result<(), OracleError> {
        Ok(())
    }

    fn fit(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        _ctx: FitContext,
    ) -> Result<Box<dyn Model>, OracleError> {
        let (rows, dim, classes) = (problem.rows(), problem.dim(), problem.classes());
        let mut scratch = vec![0.0; rows * classes];
        let bias = problem.bias_rows(0..rows, &mut scratch).to_vec();
        let warm = match warm {
            None => None,
            Some(m) => Some(oracles::downcast_model::<PyModel>(m, KIND)?),
        };
        Python::attach(|py| {
            let run = || -> PyResult<Py<PyAny>> {
                let x = matrix(py, problem.features().as_slice(), rows, dim)?;
                let y = PyArray1::from_vec(py, problem.labels().iter().map(|&l| l as i64).collect());
                let b = matrix(py, &bias, rows, classes)?;
                let w = problem.weights().map(|w| PyArray1::from_slice(py, w));
                let warm = warm.map(|m| m.object.clone_ref(py));
                let model = self.object.bind(py).call_method1("fit", (x, y, b, warm, w))?;
                if model.is_none() {
                    return Err(pyo3::exceptions::PyTypeError::new_err(
                        "the Python oracle's fit returned None: it must return the fitted model (an object with scores(features))",
                    ));
                }
                Ok(model.unbind())
            };
            let object = run().map_err(|e| keep(Some(&self.errors), py, e, "Python oracle fit"))?;
            Ok(Box::new(PyModel { object, dim, classes, errors: Some(self.errors.clone()) }) as Box<dyn Model>)
        })
    }

    fn penalty(&self, model: &dyn Model) -> Result<f64, OracleError> {
        let model = oracles::downcast_model::<PyModel>(model, KIND)?;
        Python::attach(|py| {
            let o = self.object.bind(py);
            let run = || -> PyResult<f64> {
                if !o.hasattr("penalty")? {
                    return Ok(0.0);
                }
                o.call_method1("penalty", (model.object.clone_ref(py),))?.extract()
            };
            run().map_err(|e| keep(Some(&self.errors), py, e, "Python oracle penalty"))
        })
    }
}

/// A fitted Python model: `scores(features) -> (n, C)`.
pub struct PyModel {
    object: Py<PyAny>,
    dim: usize,
    classes: usize,
    errors: Option<ErrorSlot>,
}

impl std::fmt::Debug for PyModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PyModel({} features, {} classes)", self.dim, self.classes)
    }
}

impl Model for PyModel {
    fn kind(&self) -> &str {
        KIND
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn classes(&self) -> usize {
        self.classes
    }

    fn score(&self, features: oracles::Features<'_>, out: &mut [f64]) -> Result<(), OracleError> {
        check_score_buffer(features, self.classes, out)?;
        if features.dim() != self.dim {
            return Err(OracleError::ModelMismatch {
                model_dim: self.dim,
                model_classes: self.classes,
                dim: features.dim(),
                classes: self.classes,
            });
        }
        let rows = features.rows();
        Python::attach(|py| {
            let mut run = || -> PyResult<()> {
                let x = matrix(py, features.as_slice(), rows, self.dim)?;
                let s = self.object.bind(py).call_method1("scores", (x,))?;
                let np = py.import("numpy")?;
                let s = np.call_method1("ascontiguousarray", (s, "float64"))?;
                let s: PyReadonlyArray2<'_, f64> = s.extract().map_err(|_| {
                    pyo3::exceptions::PyValueError::new_err(format!(
                        "the Python model's scores(features) must return a 2-d array of shape ({rows}, {})",
                        self.classes
                    ))
                })?;
                let view = s.as_array();
                if view.dim() != (rows, self.classes) {
                    return Err(pyo3::exceptions::PyValueError::new_err(format!(
                        "the Python model's scores(features) returned shape ({}, {}), expected ({rows}, {})",
                        view.nrows(),
                        view.ncols(),
                        self.classes
                    )));
                }
                for (o, &v) in out.iter_mut().zip(view.iter()) {
                    if !v.is_finite() {
                        return Err(pyo3::exceptions::PyValueError::new_err(format!(
                            "the Python model's scores(features) returned a non-finite value {v}"
                        )));
                    }
                    *o = v;
                }
                Ok(())
            };
            run().map_err(|e| keep(self.errors.as_ref(), py, e, "Python model scores"))
        })
    }

    /// `dim` and `classes` (u64 little-endian each), then the pickle of the object.
    fn to_bytes(&self) -> Result<Vec<u8>, OracleError> {
        Python::attach(|py| {
            let run = || -> PyResult<Vec<u8>> {
                let pickled = py.import("pickle")?.call_method1("dumps", (self.object.bind(py),))?;
                let pickled = pickled.cast::<PyBytes>()?.as_bytes().to_vec();
                let mut bytes = Vec::with_capacity(16 + pickled.len());
                bytes.extend_from_slice(&(self.dim as u64).to_le_bytes());
                bytes.extend_from_slice(&(self.classes as u64).to_le_bytes());
                bytes.extend_from_slice(&pickled);
                Ok(bytes)
            };
            run().map_err(|e| keep(self.errors.as_ref(), py, e, "pickling the Python model"))
        })
    }

    fn clone_model(&self) -> Box<dyn Model> {
        Python::attach(|py| {
            Box::new(PyModel {
                object: self.object.clone_ref(py),
                dim: self.dim,
                classes: self.classes,
                errors: self.errors.clone(),
            })
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The loader of kind `python` (what [`PyModel::to_bytes`] writes).
pub fn load_model(bytes: &[u8]) -> Result<Box<dyn Model>, OracleError> {
    let bad = |reason: String| OracleError::InvalidModel { kind: KIND.into(), reason };
    if bytes.len() < 16 {
        return Err(bad(format!("{} bytes, at least 16 expected", bytes.len())));
    }
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[i..i + 8]);
        usize::try_from(u64::from_le_bytes(w)).map_err(|_| bad("dimension out of range".into()))
    };
    let (dim, classes) = (word(0)?, word(8)?);
    Python::attach(|py| {
        let object = py
            .import("pickle")
            .and_then(|p| p.call_method1("loads", (PyBytes::new(py, &bytes[16..]),)))
            .map_err(|e| bad(format!("unpickling the Python model: {}", e.value(py))))?;
        Ok(Box::new(PyModel { object: object.unbind(), dim, classes, errors: None }) as Box<dyn Model>)
    })
}
