//! Structured learning with any function class (Domke 2013, Algorithm 1;
//! docs/MATH.md §4).
//!
//! * [`data`]: data sets of examples with region graphs, labels and features,
//!   and their file format.
//! * [`train`]: Algorithm 1 ([`Algorithm1`], run as [`Trainer`]).
//! * [`executor`]: the run loop every learner shares ([`Executor`], [`Solver`]):
//!   stopping, evaluation, early stopping, checkpoints, observers ([`observer`]).
//! * [`registry`]: oracle constructors by kind name ([`OracleRegistry`]).
//! * [`model`]: the learned [`StructuredModel`], prediction and model files.
//! * [`discrepancy`]: the loss-augmentation `Δ` (Hamming by default).
//! * [`learner`]: the [`Learner`] interface and the choice of learner
//!   ([`LearnerKind`]: Algorithm 1, Hazan & Urtasun, piecewise, perceptrons).
//! * [`exact`]: exact and constrained decoding by enumeration (small graphs).
//! * [`metrics`]: error rate, per-class accuracy, confusion matrix, mean IoU.

pub mod data;
mod data_block;
pub mod discrepancy;
pub mod early_stopping;
mod error;
pub mod exact;
pub mod executor;
pub mod files;
pub mod infer;
pub mod learner;
pub mod metrics;
pub mod model;
pub mod mpi;
pub mod objective;
pub mod observer;
pub mod oracle_config;
pub mod perceptron;
pub mod registry;
pub mod resume;
pub mod threads;
pub mod train;

pub use data::{Dataset, DatasetFile, Example, ExampleInfo, ExampleRecord, FactorTypeInfo, FeatureBlock};
pub use discrepancy::{Discrepancy, Hamming, NoDiscrepancy};
pub use early_stopping::EarlyStopping;
pub use error::LearnError;
pub use executor::{Executor, RunState, Solver, StopReason};
pub use learner::{Learner, LearnerKind, build_learner, build_learner_with};
pub use metrics::{ConfusionMatrix, MetricsReport};
pub use model::{ModelHeader, ModelTypeHeader, PredictOptions, Prediction, StructuredModel};
pub use observer::{Callback, CsvCurveWriter, JsonLinesWriter, Observer, Record, TrainEvent};
pub use oracles::ModelRegistry;
pub use perceptron::{Perceptron, PerceptronMode};
pub use registry::OracleRegistry;
pub use train::{
    Algorithm1, CheckpointConfig, DEFAULT_LEARNING_ITERATIONS, DEFAULT_MESSAGE_PASSING_ITERATIONS,
    DEFAULT_MESSAGE_PASSING_TOLERANCE, Evaluate, EvaluationMessages, Step, TrainConfig, TrainOutcome, Trainer,
    mix_seed,
};
