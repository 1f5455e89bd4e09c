//! Typed errors of the learner, prediction and files.

use factor_graph::{GraphError, UaiError};
use oracles::OracleError;
use smoothed_inference::InferenceError;

/// Everything that can go wrong in training, prediction, datasets and model files.
///
/// ```
/// use structlearn::{Dataset, LearnError};
/// match Dataset::load("no/such/file.sld".as_ref()) {
///     Err(LearnError::Io { path, .. }) => assert!(path.ends_with("file.sld")),
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Debug, thiserror::Error)]
pub enum LearnError {
    /// A training set without examples.
    #[error("empty data set: there are no examples")]
    EmptyDataset,
    /// A data set that declares no factor types.
    #[error("the data set declares no factor types")]
    NoFactorTypes,
    /// An example's graph uses a factor type the data set/model does not declare.
    #[error("example {example}: region {region} has factor type `{factor_type}`, which the model does not declare")]
    UnknownFactorType {
        /// Example index.
        example: usize,
        /// Region index in the example's graph.
        region: usize,
        /// The type's name.
        factor_type: String,
    },
    /// A variable of an example has no singleton region: the learner decodes and
    /// scores every variable from its own region's beliefs.
    #[error(
        "example {example}: variable {variable} has no singleton region (a region over it alone); every variable needs one to be decoded and scored"
    )]
    MissingSingleton {
        /// Example index.
        example: usize,
        /// The variable.
        variable: usize,
    },
    /// A region's number of configurations differs from its factor type's classes.
    #[error(
        "example {example}: region {region} of type `{factor_type}` has {got} configurations, but the type has {expected} classes"
    )]
    ClassesMismatch {
        /// Example index.
        example: usize,
        /// Region index.
        region: usize,
        /// Type name.
        factor_type: String,
        /// Classes of the type.
        expected: usize,
        /// Configurations of the region.
        got: usize,
    },
    /// A feature block's dimension differs from the factor type's.
    #[error(
        "example {example}: features of type `{factor_type}` have dimension {got}, but the type has dimension {expected}"
    )]
    FeatureDim {
        /// Example index.
        example: usize,
        /// Type name.
        factor_type: String,
        /// The type's dimension.
        expected: usize,
        /// The block's dimension.
        got: usize,
    },
    /// A feature block's length is not (regions of the type) × dim.
    #[error(
        "example {example}: features of type `{factor_type}` hold {got} values, expected {regions} regions × {dim}"
    )]
    FeatureLength {
        /// Example index.
        example: usize,
        /// Type name.
        factor_type: String,
        /// Regions of that type in the example.
        regions: usize,
        /// Dimension.
        dim: usize,
        /// Values given.
        got: usize,
    },
    /// An example has the wrong number of feature blocks.
    #[error("example {example}: {got} feature blocks, but the data set has {expected} factor types")]
    FeatureBlocks {
        /// Example index.
        example: usize,
        /// Types declared.
        expected: usize,
        /// Blocks given.
        got: usize,
    },
    /// A NaN or infinite feature.
    #[error("example {example}: feature {col} of region {region} (type `{factor_type}`) is not finite: {value}")]
    NonFiniteFeature {
        /// Example index.
        example: usize,
        /// Type name.
        factor_type: String,
        /// Region index in the graph.
        region: usize,
        /// Feature column.
        col: usize,
        /// The value.
        value: f64,
    },
    /// A finite feature so large that scores computed from it overflow
    /// (beyond [`crate::data::MAX_FEATURE_MAGNITUDE`]).
    #[error(
        "example {example}: feature {col} of region {region} (type `{factor_type}`) is {value:e}, beyond \
         ±{limit:e}: scores of features this large overflow; rescale or standardise the features"
    )]
    FeatureTooLarge {
        /// Example index.
        example: usize,
        /// Type name.
        factor_type: String,
        /// Region index in the graph.
        region: usize,
        /// Feature column.
        col: usize,
        /// The value.
        value: f64,
        /// The largest magnitude accepted.
        limit: f64,
    },
    /// Labels of the wrong length.
    #[error("example {example}: {got} labels for {expected} variables")]
    LabelCount {
        /// Example index.
        example: usize,
        /// Variables of the graph.
        expected: usize,
        /// Labels given.
        got: usize,
    },
    /// A label outside its variable's range.
    #[error("example {example}: label {label} of variable {variable} is out of range 0..{cardinality}")]
    LabelOutOfRange {
        /// Example index.
        example: usize,
        /// Variable.
        variable: usize,
        /// Label.
        label: usize,
        /// Cardinality of the variable.
        cardinality: usize,
    },
    /// Training needs labels on every example.
    #[error("example {example} has no labels; training and evaluation need them")]
    MissingLabels {
        /// Example index.
        example: usize,
    },
    /// A factor type has no oracle, or an oracle names no type.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An oracle specification is refused by its registry
    /// ([`crate::OracleRegistry`]): not an object, no or an unknown kind, an
    /// unknown setting, or a value of the wrong type or out of its range.
    #[error("invalid oracle specification: {reason}")]
    OracleSpec {
        /// The kind, when the specification names a registered one.
        kind: Option<String>,
        /// The setting at fault, when one is (dotted for nested ones).
        setting: Option<String>,
        /// What is wrong, with the allowed values where they are known.
        reason: String,
    },
    /// A setting is out of its allowed range ([`crate::TrainConfig::validate`]).
    #[error("invalid setting `{name}` = {value}: must be {allowed}")]
    InvalidSetting {
        /// The setting (dotted for nested ones: `checkpoint.every`).
        name: &'static str,
        /// Its value.
        value: String,
        /// What is allowed.
        allowed: &'static str,
    },
    /// A setting or an oracle names a factor type the data set does not have.
    #[error("`{setting}` names unknown factor type `{name}` (the data set has: {})", known.join(", "))]
    UnknownTypeName {
        /// Where the name was given: `type_epsilon`, `schedule`, `oracles`.
        setting: &'static str,
        /// The name given.
        name: String,
        /// The data set's factor types.
        known: Vec<String>,
    },
    /// A factor type of the data set has no oracle.
    #[error("factor type `{factor_type}` has no oracle")]
    MissingOracle {
        /// The factor type.
        factor_type: String,
    },
    /// Two oracles are given for one factor type.
    #[error("two oracles are given for factor type `{factor_type}`")]
    DuplicateOracle {
        /// The factor type.
        factor_type: String,
    },
    /// No learner has this name ([`crate::LearnerKind::ALL`]).
    #[error("unknown learner `{name}` (known: {})", crate::LearnerKind::ALL.map(|k| k.name()).join(", "))]
    UnknownLearner {
        /// The name given.
        name: String,
    },
    /// The learner cannot learn with this oracle class (the perceptrons and
    /// Hazan–Urtasun learn linear energies only).
    #[error("the {learner} learner cannot use oracle `{kind}` for factor type `{factor_type}` (use {allowed})")]
    UnsupportedOracle {
        /// The learner.
        learner: crate::LearnerKind,
        /// The factor type.
        factor_type: String,
        /// The oracle's kind.
        kind: String,
        /// The kinds it can use.
        allowed: &'static str,
    },
    /// Training over several ranks ([`crate::Learner::distribute`]) with a
    /// learner or an oracle class that cannot spread its work over ranks.
    #[error("{what} cannot train over {ranks} ranks ({reason})")]
    NotDistributed {
        /// The learner, or the oracle class and its factor type.
        what: String,
        /// The number of ranks asked for.
        ranks: usize,
        /// What it would need.
        reason: &'static str,
    },
    /// The ranks of a data-parallel run cannot go on together: fewer
    /// examples than ranks, a rank out of range, checkpoint files of the ranks
    /// that hold different iterations.
    #[error("{0}")]
    Ranks(String),
    /// A setting of [`crate::TrainConfig`] differs from its default but the
    /// learner does not read it ([`crate::LearnerKind::ignored_settings`]),
    /// e.g. `epsilon` for a perceptron: refused rather than silently ignored.
    #[error("setting `{name}` is not used by the {learner} learner ({reason}); leave it at its default")]
    UnusedSetting {
        /// The learner.
        learner: crate::LearnerKind,
        /// The setting, as named in configuration files.
        name: &'static str,
        /// Why the learner does not read it.
        reason: &'static str,
    },
    /// The model and the data disagree (types, dimensions, classes).
    #[error("model does not match the data: {0}")]
    ModelMismatch(String),
    /// An oracle failed.
    #[error("oracle for factor type `{factor_type}`: {source}")]
    Oracle {
        /// Type whose oracle failed.
        factor_type: String,
        /// The oracle error.
        #[source]
        source: OracleError,
    },
    /// Inference failed.
    #[error("inference on example {example}: {source}")]
    Inference {
        /// Example index.
        example: usize,
        /// The inference error.
        #[source]
        source: InferenceError,
    },
    /// Invalid graph.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// Invalid UAI file.
    #[error(transparent)]
    Uai(#[from] UaiError),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// One file given for two jobs on a command line, one of them written: the
    /// write would destroy the other (or one output would replace another).
    #[error("{path}: given as {role} and as {other}; writing {role} would replace it; choose another path")]
    SamePath {
        /// The path, as given for `role`.
        path: String,
        /// The option that writes it, e.g. `--output`.
        role: String,
        /// The other option that names the same file, e.g. `--data`.
        other: String,
    },
    /// A file is not of the expected format, of another version, or corrupt.
    #[error("{path}: {reason}")]
    BadFile {
        /// The path (or a description of the source).
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// An error in the contents of a file (not its bytes), e.g. a label out of
    /// range in a data set file: the file, then the error.
    #[error("{path}: {error}")]
    InFile {
        /// The file.
        path: String,
        /// What is wrong in it.
        error: Box<LearnError>,
    },
    /// An error on the validation set during training (its examples are
    /// numbered within the validation set).
    #[error("validation set: {0}")]
    Validation(Box<LearnError>),
    /// Training was interrupted by the caller (e.g. Ctrl-C); the last checkpoint is intact.
    #[error("training interrupted after learning iteration {completed}")]
    Interrupted {
        /// Learning iterations completed.
        completed: usize,
    },
    /// Exact inference by enumeration was asked for a graph with too many labelings.
    #[error(
        "example {example}: exact inference would enumerate {} labelings (limit {limit}); use smoothed inference for graphs this large",
        saturated_count(*.labelings)
    )]
    TooManyLabelings {
        /// Example index.
        example: usize,
        /// Labelings of the graph (saturating).
        labelings: usize,
        /// The limit.
        limit: usize,
    },
    /// Every labeling of an example is forbidden by its hard constraints (`θ = −∞`).
    #[error("example {example}: every labeling is forbidden by a hard constraint (θ = -inf)")]
    Infeasible {
        /// Example index.
        example: usize,
    },
}

impl LearnError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        LearnError::Io { path: path.display().to_string(), source }
    }
    pub(crate) fn bad_file(path: &std::path::Path, reason: impl Into<String>) -> Self {
        LearnError::BadFile { path: path.display().to_string(), reason: reason.into() }
    }
}

/// A count that saturates at `usize::MAX` (as [`crate::exact::labelings`]),
/// written so that a saturated one does not read as exact.
fn saturated_count(n: usize) -> String {
    if n == usize::MAX { format!("at least {n}") } else { n.to_string() }
}
