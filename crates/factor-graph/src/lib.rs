//! What a structured model is: variables, regions, the parent → child region
//! graph, factor types for parameter tying, grid builders and UAI model I/O
//! (docs/MATH.md §1). Depends on nothing else of the project.
//!
//! The one configuration-indexing convention of the project (last variable
//! fastest) and the flat storage layout are documented in [`graph`].

mod builders;
mod error;
pub mod evidence;
pub mod graph;
pub mod uai;
pub mod uai_results;

pub use builders::{GridLayout, PAIRWISE, Scope, UNARY, factors_with_singletons, grid};
pub use error::{GraphError, InfeasibleCause, UaiError};
pub use evidence::{EvidenceError, UaiEvidence};
pub use graph::{
    MAX_REGION_CONFIGS, MIN_GRAPH_BUDGET, RegionGraph, RegionGraphBuilder, RegionGraphSpec, RegionSpec, graph_budget,
};
pub use uai::{
    CPT_TOLERANCE, FactorPlacement, UAI_FACTOR_TYPE, UaiFactor, UaiModel, UaiNetwork, UaiRegionModel, UaiWarning,
};
pub use uai_results::{format_map, format_mar, parse_map, parse_mar};
