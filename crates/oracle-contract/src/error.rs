//! Typed errors of the oracle crate.

/// Everything that can go wrong when building a problem, validating
/// hyper-parameters, fitting, scoring or loading a model.
///
/// ```
/// let err = oracles::Features::new(&[1.0], 2, 1).unwrap_err();
/// println!("{err}");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    /// The feature buffer does not hold `rows × dim` values.
    #[error("feature matrix has {len} values, expected {rows} rows × {dim} features")]
    FeatureShape {
        /// Values in the buffer.
        len: usize,
        /// Rows requested.
        rows: usize,
        /// Features per row requested.
        dim: usize,
    },
    /// A feature is NaN or ±∞.
    #[error("feature ({row}, {col}) is not finite: {value}")]
    NonFiniteFeature {
        /// Row of the offending value.
        row: usize,
        /// Column of the offending value.
        col: usize,
        /// The value itself.
        value: f64,
    },
    /// A feature beyond ±[`MAX_MAGNITUDE`]: scores would overflow.
    #[error(
        "feature ({row}, {col}) is {value}, beyond ±1e100 (MAX_MAGNITUDE), where scores overflow; rescale the features"
    )]
    FeatureTooLarge {
        /// Row of the offending value.
        row: usize,
        /// Column of the offending value.
        col: usize,
        /// The value itself.
        value: f64,
    },
    /// A problem without rows.
    #[error("empty problem: there are no rows to fit")]
    Empty,
    /// Fewer than two classes: logistic regression is meaningless.
    #[error("{classes} classes: at least 2 are needed")]
    TooFewClasses {
        /// Number of classes given.
        classes: usize,
    },
    /// More classes than an oracle can hold one row of scores for, or so many
    /// that `rows × classes` (the problem's scores and biases) overflows.
    #[error("{classes} classes for {rows} rows: at most {MAX_VALUES} classes, and rows × classes must not overflow")]
    TooManyClasses {
        /// Number of classes given.
        classes: usize,
        /// Number of rows.
        rows: usize,
    },
    /// The label vector's length differs from the number of rows.
    #[error("{got} labels for {rows} rows")]
    LabelCount {
        /// Labels given.
        got: usize,
        /// Rows of the feature matrix.
        rows: usize,
    },
    /// A label is not in `0..classes`.
    #[error("label {label} of row {row} is out of range 0..{classes}")]
    LabelOutOfRange {
        /// Row of the offending label.
        row: usize,
        /// The label.
        label: usize,
        /// Number of classes.
        classes: usize,
    },
    /// The bias buffer does not hold `rows × classes` values.
    #[error("bias has {got} values, expected {rows} rows × {classes} classes")]
    BiasShape {
        /// Values given.
        got: usize,
        /// Rows of the problem.
        rows: usize,
        /// Classes of the problem.
        classes: usize,
    },
    /// A bias is NaN or +∞ (−∞ is allowed: an impossible class).
    #[error("bias ({row}, {class}) is {value}; only finite values within ±1e100 (MAX_MAGNITUDE) or -inf are allowed")]
    InvalidBias {
        /// Row of the offending bias.
        row: usize,
        /// Class of the offending bias.
        class: usize,
        /// The value.
        value: f64,
    },
    /// The bias of a row's own label is −∞: the observed label is impossible
    /// and the loss is +∞ whatever the model.
    #[error("bias of the observed label {label} of row {row} is -inf: that label is impossible")]
    ImpossibleLabel {
        /// Row.
        row: usize,
        /// Its label.
        label: usize,
    },
    /// A row's label is a class the fixed oracle forbids: its loss is +∞.
    #[error(
        "the label {label} of row {row} is a forbidden class of the fixed table, so its loss is infinite; remove \
             the class from `forbidden` or correct the labels"
    )]
    ForbiddenLabel {
        /// Row.
        row: usize,
        /// Its label.
        label: usize,
    },
    /// The weight vector's length differs from the number of rows.
    #[error("{got} example weights for {rows} rows")]
    WeightCount {
        /// Weights given.
        got: usize,
        /// Rows of the problem.
        rows: usize,
    },
    /// A weight is negative, NaN or infinite.
    #[error("weight of row {row} is {value}; weights must be finite and >= 0")]
    InvalidWeight {
        /// Row.
        row: usize,
        /// The weight.
        value: f64,
    },
    /// A hyper-parameter is outside its valid range.
    #[error("invalid hyper-parameter `{name}`: {reason}")]
    InvalidHyperParameter {
        /// Name of the hyper-parameter.
        name: &'static str,
        /// Why it is invalid.
        reason: String,
    },
    /// A model and a problem (or feature matrix) disagree on shape.
    #[error("model expects {model_dim} features and {model_classes} classes, got {dim} features and {classes} classes")]
    ModelMismatch {
        /// Features the model was fitted on.
        model_dim: usize,
        /// Classes the model scores.
        model_classes: usize,
        /// Features offered.
        dim: usize,
        /// Classes asked for.
        classes: usize,
    },
    /// The warm-start model is of another function class than the oracle.
    #[error("warm-start model is of kind `{found}`, but the oracle fits `{expected}`")]
    WrongModelKind {
        /// Kind the oracle fits.
        expected: String,
        /// Kind of the model offered.
        found: String,
    },
    /// The caller's score buffer has the wrong length.
    #[error("score buffer has {got} values, expected {expected}")]
    OutputShape {
        /// Length given.
        got: usize,
        /// Length needed (`rows × classes`).
        expected: usize,
    },
    /// A model file names a kind that no loader is registered for.
    #[error("unknown model kind `{0}` (register its loader in the ModelRegistry)")]
    UnknownKind(String),
    /// Two loaders registered for one kind.
    #[error("model kind `{0}` is registered twice")]
    DuplicateKind(String),
    /// Model bytes could not be encoded or decoded.
    #[error("model of kind `{kind}` could not be (de)serialised: {source}")]
    Codec {
        /// Kind of the model.
        kind: String,
        /// The underlying postcard error.
        #[source]
        source: postcard::Error,
    },
    /// Model bytes decode but describe an impossible model (e.g. a tree whose
    /// child lies outside it): written by another version or a faulty writer.
    #[error("model of kind `{kind}` is inconsistent: {reason}")]
    InvalidModel {
        /// Kind of the model.
        kind: String,
        /// Which part breaks which invariant.
        reason: String,
    },
    /// The numerical optimiser failed (e.g. non-finite loss).
    #[error("optimiser failed: {0}")]
    Optimizer(String),
    /// The group-index feature (the last one) of an indexed linear model's
    /// row is not an integer in `0..groups`.
    #[error("row {row}: group index (last feature) is {value}; it must be {}", group_range(*groups))]
    GroupIndex {
        /// Row.
        row: usize,
        /// The value of its last feature.
        value: f64,
        /// Groups of the model.
        groups: usize,
    },
}

/// What a group index must be: an integer in `0..groups`, or (`groups` =
/// `usize::MAX`: counting the groups of a problem) any whole number ≥ 0.
fn group_range(groups: usize) -> String {
    if groups == usize::MAX { "a whole number ≥ 0".into() } else { format!("an integer in 0..{groups}") }
}

/// The most `f64` values an oracle allocates for one model's parameters or
/// its optimiser's memory: 2^28 (2 GiB). A larger size comes from a typo in
/// a hyper-parameter (or a problem far beyond this library's scale), and is
/// refused before anything is allocated instead of aborting the process.
pub const MAX_VALUES: usize = 1 << 28;

/// The largest magnitude of a feature, a finite bias or a fixed table entry an
/// oracle accepts. Scores are sums of products of features with parameters
/// (plus biases), so values near `f64::MAX` (say 1e308) overflow them to ±∞ or
/// NaN, or swallow every other term (a loss of 0 for a bias of 1e308); below
/// this bound a factor of 1e200 is left for the parameters.
///
/// ```
/// assert!(oracles::MAX_MAGNITUDE < f64::MAX.sqrt());
/// ```
pub const MAX_MAGNITUDE: f64 = 1e100;

/// `count` (`None` when computing it overflowed) if it is at most
/// [`MAX_VALUES`]; else an invalid hyper-parameter `name`, saying that `what`
/// would need `count` values.
#[doc(hidden)]
pub fn check_size(name: &'static str, count: Option<usize>, what: &str) -> Result<usize, OracleError> {
    match count {
        Some(n) if n <= MAX_VALUES => Ok(n),
        _ => Err(OracleError::InvalidHyperParameter {
            name,
            reason: format!(
                "{what} would need {} values, more than the {MAX_VALUES} (2 GiB) an oracle allocates",
                count.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string())
            ),
        }),
    }
}
