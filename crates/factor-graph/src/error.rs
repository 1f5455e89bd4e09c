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
    /// A factor's table would have more entries than a region may have
    /// ([`crate::MAX_REGION_CONFIGS`]).
    #[error(
        "UAI line {line}: factor {factor}'s table would have {} entries (the product of the cardinalities of its {}), \
         more than the limit of {limit} entries per factor; reduce the cardinalities or split the factor",
        entries.map_or_else(|| "more than 2^128".to_string(), |e| e.to_string()),
        if *scope_len == 1 { "variable".to_string() } else { format!("{scope_len} variables") }
    )]
    TableTooLarge {
        /// 1-based line of the factor's scope declaration.
        line: usize,
        /// The factor (index in the file).
        factor: usize,
        /// Number of variables in its scope.
        scope_len: usize,
        /// Product of the scope's cardinalities (`None`: more than `u128::MAX`).
        entries: Option<u128>,
        /// The limit.
        limit: usize,
    },
    /// The zero entries of the model's factors leave no labelling of positive
    /// probability (found before inference, which would otherwise report a
    /// meaningless dual value).
    #[error("{}", infeasible_text(factors, cause))]
    Infeasible {
        /// The factors involved, as (index in the file, scope).
        factors: Vec<(usize, Vec<usize>)>,
        /// How the zeros rule every labelling out.
        cause: InfeasibleCause,
    },
    /// An error in a file: the file's path, then the error (see [`UaiError::in_file`]).
    #[error("{path}: {source}")]
    InFile {
        /// Path of the UAI file.
        path: String,
        /// What is wrong with it.
        #[source]
        source: Box<UaiError>,
    },
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

/// How the zero entries of a UAI model rule out every labelling ([`UaiError::Infeasible`]).
///
/// ```
/// use factor_graph::{InfeasibleCause, UaiError};
/// let err = UaiError::Infeasible { factors: vec![(0, vec![3])], cause: InfeasibleCause::AllZero };
/// assert!(err.to_string().starts_with("factor 0 (variable 3) is 0 in every entry"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InfeasibleCause {
    /// The factors are over the same variables (a factor over one variable
    /// shares it with the others over that variable) and have no
    /// configuration where every one of them is nonzero; with one factor,
    /// its table is all zeros.
    AllZero,
    /// Propagating the zero entries from factor to factor along shared
    /// variables leaves no possible configuration of these variables: the
    /// zeros of different factors contradict each other. The factors named
    /// are the ones over (one of) these variables.
    Propagation {
        /// The variables left without a possible configuration.
        variables: Vec<usize>,
    },
}

impl UaiError {
    /// The error with the path of the file it comes from, so that it names the
    /// file ([`UaiError::InFile`]). I/O errors and errors already in a file
    /// name it already and are returned unchanged.
    ///
    /// ```
    /// let err = factor_graph::UaiModel::parse("MARKOV\n2\n2 x\n").unwrap_err();
    /// let err = err.in_file(std::path::Path::new("model.uai"));
    /// assert!(err.to_string().starts_with("model.uai: UAI line 3: expected cardinality"));
    /// ```
    pub fn in_file(self, path: &std::path::Path) -> UaiError {
        match self {
            e @ (UaiError::Io { .. } | UaiError::InFile { .. }) => e,
            e => UaiError::InFile { path: path.display().to_string(), source: Box::new(e) },
        }
    }
}

/// `factor 0 (variables 0, 1)`, with at most 8 variables spelt out.
fn describe_factor(index: usize, scope: &[usize]) -> String {
    let shown: Vec<String> = scope.iter().take(8).map(usize::to_string).collect();
    match scope.len() {
        0 => format!("factor {index} (no variables)"),
        1 => format!("factor {index} (variable {})", shown[0]),
        n if n <= 8 => format!("factor {index} (variables {})", shown.join(", ")),
        n => format!("factor {index} (variables {}, …; {n} in all)", shown.join(", ")),
    }
}

/// `factors 0 (…), 1 (…) and 2 (…)`, with at most 6 factors spelt out.
fn describe_factors(factors: &[(usize, Vec<usize>)]) -> String {
    let mut names: Vec<String> = factors.iter().take(6).map(|(i, s)| describe_factor(*i, s)).collect();
    if factors.len() > 6 {
        names.push(format!("{} more", factors.len() - 6));
    }
    match names.len() {
        0 => "no factor".to_string(),
        1 => names.remove(0),
        _ => {
            // "factors 0 (…), 1 (…) and 2 (…)"
            let rest: Vec<&str> = names.iter().map(|n| n.strip_prefix("factor ").unwrap_or(n)).collect();
            let (last, init) = rest.split_last().unwrap_or((&"", &[]));
            format!("factors {} and {last}", init.join(", "))
        }
    }
}

fn describe_variables(variables: &[usize]) -> String {
    let shown: Vec<String> = variables.iter().take(8).map(usize::to_string).collect();
    match variables.len() {
        1 => format!("variable {}", shown[0]),
        n if n <= 8 => format!("variables {}", shown.join(", ")),
        n => format!("variables {}, … ({n} in all)", shown.join(", ")),
    }
}

fn infeasible_text(factors: &[(usize, Vec<usize>)], cause: &InfeasibleCause) -> String {
    const ALL_ZERO: &str = "so the model gives every labelling probability 0";
    match cause {
        InfeasibleCause::AllZero if factors.len() == 1 => format!(
            "{} is 0 in every entry of its table, {ALL_ZERO}; give some entry a positive value",
            describe_factor(factors[0].0, &factors[0].1)
        ),
        InfeasibleCause::AllZero => format!(
            "{} are over the same variables and no configuration is nonzero in all of them, {ALL_ZERO} \
             (their zero entries contradict each other); make some configuration nonzero in every one",
            describe_factors(factors)
        ),
        InfeasibleCause::Propagation { variables } => format!(
            "the zero entries of different factors contradict each other: following them from factor to factor \
             through shared variables rules out every {} of {} (in {}), {ALL_ZERO}; check the zero entries of these factors",
            if variables.len() == 1 { "label" } else { "configuration" },
            describe_variables(variables),
            describe_factors(factors)
        ),
    }
}
