//! Typed errors of region-graph construction and model I/O.

/// Errors building or validating a region graph.
///
/// ```
/// let err = factor_graph::grid(0, 3, 2).unwrap_err();
/// assert!(matches!(err, factor_graph::GraphError::EmptyGrid { height: 0, .. }));
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GraphError {
    /// A variable has cardinality 0.
    #[error("variable {variable} has cardinality 0; every variable needs at least one label")]
    ZeroCardinality {
        /// The variable.
        variable: usize,
    },
    /// A region mentions a variable that does not exist.
    #[error("region {region} mentions variable {variable}, but there are only {num_variables} variables")]
    UnknownVariable {
        /// The region (index in insertion order).
        region: usize,
        /// The variable named.
        variable: usize,
        /// Number of variables of the graph.
        num_variables: usize,
    },
    /// A region with no variables.
    #[error("region {region} has no variables")]
    EmptyRegion {
        /// The region.
        region: usize,
    },
    /// A region names a variable twice.
    #[error("region {region} names variable {variable} twice")]
    RepeatedVariable {
        /// The region.
        region: usize,
        /// The repeated variable.
        variable: usize,
    },
    /// Two regions over the same set of variables.
    #[error("regions {first} and {second} have the same variables {variables:?}")]
    DuplicateRegion {
        /// The earlier region.
        first: usize,
        /// The later region.
        second: usize,
        /// Their (sorted) variables.
        variables: Vec<usize>,
    },
    /// A region refers to a factor type that was never declared.
    #[error("region {region} has factor type {factor_type}, but only {num_types} types are declared")]
    UnknownFactorType {
        /// The region.
        region: usize,
        /// The type index given.
        factor_type: usize,
        /// Declared types.
        num_types: usize,
    },
    /// Two factor types with one name.
    #[error("factor type `{0}` is declared twice")]
    DuplicateFactorType(String),
    /// An edge names a region that does not exist.
    #[error("edge {parent} -> {child} names region {region}, but there are only {num_regions} regions")]
    UnknownRegion {
        /// Parent named by the edge.
        parent: usize,
        /// Child named by the edge.
        child: usize,
        /// The unknown one.
        region: usize,
        /// Number of regions.
        num_regions: usize,
    },
    /// The child of an edge is not a strict subset of its parent.
    #[error(
        "edge {parent} -> {child}: child variables {child_vars:?} are not a strict subset of parent variables {parent_vars:?}"
    )]
    NotSubset {
        /// Parent region.
        parent: usize,
        /// Child region.
        child: usize,
        /// Parent's variables.
        parent_vars: Vec<usize>,
        /// Child's variables.
        child_vars: Vec<usize>,
    },
    /// The same parent → child edge twice.
    #[error("edge {parent} -> {child} is given twice")]
    DuplicateEdge {
        /// Parent region.
        parent: usize,
        /// Child region.
        child: usize,
    },
    /// A region has more configurations than can be indexed.
    #[error("region {region} has too many configurations (product of cardinalities overflows or exceeds {limit})")]
    TooManyConfigurations {
        /// The region.
        region: usize,
        /// The limit.
        limit: usize,
    },
    /// The graph's flat arrays (configurations, edge maps, messages) would
    /// exceed what its source may ask for ([`crate::graph::graph_budget`]).
    #[error(
        "the region graph needs {} flat entries (configurations, edge maps and messages), more than the limit of {limit} for its source; reduce the cardinalities or regions",
        entries.map_or_else(|| "more than usize::MAX".to_string(), |e| e.to_string())
    )]
    TooLarge {
        /// Entries needed (`None`: more than `usize::MAX`).
        entries: Option<usize>,
        /// The limit.
        limit: usize,
    },
    /// A grid with zero height, width or labels.
    #[error("grid must have height, width and labels >= 1 (got {height}×{width} with {labels} labels)")]
    EmptyGrid {
        /// Height.
        height: usize,
        /// Width.
        width: usize,
        /// Labels.
        labels: usize,
    },
    /// A message-passing order names a region without parents, or is malformed.
    #[error("invalid update order: {0}")]
    InvalidOrder(String),
}

/// Errors reading or writing the UAI model format.
///
/// ```
/// let err = factor_graph::UaiModel::parse("BAYES\n").unwrap_err();
/// println!("{err}"); // names the line and what was expected
/// ```
#[derive(Debug, thiserror::Error)]
pub enum UaiError {
    /// The text does not follow the format; names the line and what was expected.
    #[error("UAI line {line}: expected {expected}, found {found}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What the parser expected.
        expected: String,
        /// What it found (`end of file` at the end).
        found: String,
    },
    /// The model is syntactically valid but inconsistent.
    #[error("UAI model: {0}")]
    Invalid(String),
    /// The model's regions do not form a valid region graph.
    #[error("UAI model: {0}")]
    Graph(#[from] GraphError),
    /// Reading or writing the file failed.
    #[error("UAI file {path}: {source}")]
    Io {
        /// Path involved.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
