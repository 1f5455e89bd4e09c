//! Typed errors of smoothed inference.

use factor_graph::GraphError;

/// Everything that can be wrong with the inputs of smoothed inference. Each
/// variant names the offending region, configuration, index or shape.
///
/// ```
/// let g = factor_graph::grid(1, 2, 2).unwrap();
/// let theta = vec![f64::NAN; g.total_configs()];
/// let err = smoothed_inference::InferenceProblem::uniform(&g, &theta, 1.0).unwrap_err();
/// println!("{err}"); // names the region and configuration
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InferenceError {
    /// `θ` does not have one entry per configuration of every region.
    #[error("theta has {got} entries, but the graph has {expected} configurations in total")]
    ThetaShape {
        /// `graph.total_configs()`.
        expected: usize,
        /// Length of the given `θ`.
        got: usize,
    },
    /// A potential is NaN or `+∞` (`−∞`, a hard constraint, is allowed).
    #[error("theta of region {region}, configuration {config} is {value}; potentials must be finite or -inf")]
    InvalidTheta {
        /// The region.
        region: usize,
        /// The configuration within the region.
        config: usize,
        /// The offending value.
        value: f64,
    },
    /// The number of entropy weights is not the number of factor types.
    #[error("got {got} entropy weights, but the graph has {expected} factor types")]
    WeightCount {
        /// `graph.factor_types().len()`.
        expected: usize,
        /// Number of weights given.
        got: usize,
    },
    /// An entropy weight `ε_t` is not a positive finite number.
    #[error("entropy weight of factor type {factor_type} is {value}; it must be positive and finite")]
    InvalidEpsilon {
        /// The factor type.
        factor_type: usize,
        /// The offending value.
        value: f64,
    },
    /// A message vector does not have one entry per child configuration of every edge.
    #[error("message vector has {got} entries, but the graph needs {expected}")]
    MessageShape {
        /// `graph.total_message_len()`.
        expected: usize,
        /// Length given.
        got: usize,
    },
    /// A message entry is NaN or infinite.
    #[error("message entry {index} is {value}; messages must be finite")]
    InvalidMessage {
        /// Index in the flat message vector.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// A region index beyond the graph.
    #[error("region {region} does not exist (the graph has {num_regions} regions)")]
    UnknownRegion {
        /// The index given.
        region: usize,
        /// Number of regions of the graph.
        num_regions: usize,
    },
    /// A star-update order names a region that does not exist or has no parents.
    #[error("invalid update order: {0}")]
    InvalidOrder(#[from] GraphError),
    /// Every configuration of a region has potential `−∞`: the model has no
    /// feasible labelling at all.
    #[error("region {region} has potential -inf in every configuration")]
    InfeasibleRegion {
        /// The region.
        region: usize,
    },
    /// A belief vector does not have one entry per configuration of every region.
    #[error("belief vector has {got} entries, but the graph has {expected} configurations")]
    BeliefShape {
        /// `graph.total_configs()`.
        expected: usize,
        /// Length given.
        got: usize,
    },
    /// Constrained decoding ([`crate::decoding::decode_feasible`]) found no
    /// labelling that every region allows: none exists, or the search ran
    /// out of its backtracking budget first.
    #[error("no labelling that every region allows was found (the search undid {backtracks} assignments): {}",
        if *exhausted { "the hard constraints rule out every labelling (the search tried them all)" }
        else { "the backtracking budget ran out; raise it" })]
    NoFeasibleLabeling {
        /// Assignments undone before giving up.
        backtracks: usize,
        /// Whether the search ran through every labelling (a proof that none
        /// is allowed) rather than out of its budget.
        exhausted: bool,
    },
    /// A labelling does not have one label per variable.
    #[error("the labelling has {got} labels, but the graph has {expected} variables")]
    LabelShape {
        /// `graph.num_variables()`.
        expected: usize,
        /// Labels given.
        got: usize,
    },
    /// A label beyond its variable's cardinality.
    #[error("variable {variable} has label {label}, but only {cardinality} labels")]
    InvalidLabel {
        /// The variable.
        variable: usize,
        /// The label given.
        label: usize,
        /// The variable's number of labels.
        cardinality: usize,
    },
    /// Decoding needs the singleton region of every variable.
    #[error("variable {variable} has no singleton region to decode from")]
    MissingSingleton {
        /// The variable.
        variable: usize,
    },
    /// `run_batch` got a different number of problems and message vectors.
    #[error("run_batch got {problems} problems but {messages} message vectors")]
    BatchSize {
        /// Number of problems.
        problems: usize,
        /// Number of message vectors.
        messages: usize,
    },
}
