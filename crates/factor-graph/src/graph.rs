//! The region graph (docs/MATH.md §1; chapter Fig. 1.2).
//!
//! # Configuration indexing
//!
//! A configuration `y_α` of a region `α` with variables `(v_0, …, v_{m−1})` (in
//! the order the region was declared) is the mixed-radix integer
//!
//! ```text
//! index(y_α) = Σ_i y_{v_i} · s_i,   s_{m−1} = 1,   s_i = s_{i+1} · |Y_{v_{i+1}}|,
//! ```
//!
//! i.e. the **last variable changes fastest** (row-major), the table order of
//! the UAI format. Every per-region array of the project (potentials `θ_α`,
//! beliefs `μ_α`, features' classes) uses it.
//!
//! # Flat storage
//!
//! All regions' configurations are laid end to end: region `α` owns
//! `config_range(α)` of any flat per-configuration vector (`θ`, beliefs). Every
//! parent → child edge owns `message_range(e)` (one entry per child
//! configuration) of a flat message vector, and a precomputed map
//! `edge_map(e)[parent configuration] = child configuration`, so inference
//! runs over flat arrays without index arithmetic in its hot loops.

use std::collections::HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::GraphError;

/// Largest number of configurations of one region.
pub const MAX_REGION_CONFIGS: usize = 1 << 28;

/// Flat entries a region graph read from a file may have whatever its size
/// (see [`graph_budget`]).
pub const MIN_GRAPH_BUDGET: usize = 1 << 22;

/// The largest [`RegionGraphSpec::flat_len`] a loader accepts from a file of
/// `file_bytes` bytes: `2^22 + 4096 · file_bytes`.
///
/// A spec's few bytes can describe a graph of gigabytes (one region over ten
/// variables of 2^28 labels each is a line of text), so loaders bound the graph
/// they build by what the file holds. The ratio admits every practical model —
/// a grid with 16 labels needs about 800 entries per pixel against the tens of
/// bytes its file spends on that pixel — and refuses declared sizes that no
/// file of that length could use.
///
/// ```
/// assert_eq!(factor_graph::graph::graph_budget(0), 1 << 22);
/// assert_eq!(factor_graph::graph::graph_budget(usize::MAX), usize::MAX);
/// ```
pub fn graph_budget(file_bytes: usize) -> usize {
    MIN_GRAPH_BUDGET.saturating_add(file_bytes.saturating_mul(4096))
}

/// A region as declared: its variables (order defines the configuration index)
/// and its factor type.
///
/// ```
/// let spec = factor_graph::RegionSpec { variables: vec![0, 1], factor_type: 1 };
/// assert_eq!(spec.variables.len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionSpec {
    /// Variables of the region, in configuration-index order (last fastest).
    pub variables: Vec<usize>,
    /// Index of the region's factor type (parameter tying).
    pub factor_type: usize,
}

/// Everything that defines a region graph; the serialised form of [`RegionGraph`].
///
/// ```
/// use factor_graph::{RegionGraph, RegionGraphSpec};
/// let g = factor_graph::grid(1, 2, 2).unwrap();
/// let spec: RegionGraphSpec = g.spec().clone(); // what data set files store
/// assert_eq!(spec.edges, vec![(2, 0), (2, 1)]);
/// let back = RegionGraph::from_spec(spec).unwrap(); // validated again
/// assert_eq!(back.num_regions(), 3);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionGraphSpec {
    /// `|Y_i|` for every variable `i`.
    pub cardinalities: Vec<usize>,
    /// Names of the factor types; regions refer to them by index.
    pub factor_types: Vec<String>,
    /// The regions, in index order.
    pub regions: Vec<RegionSpec>,
    /// Parent → child edges `(parent, child)`, in index order.
    pub edges: Vec<(usize, usize)>,
}

/// Incremental, validating construction of a [`RegionGraph`].
///
/// ```
/// use factor_graph::RegionGraphBuilder;
/// let mut b = RegionGraphBuilder::new(vec![2, 3]).unwrap();
/// let unary = b.add_factor_type("unary").unwrap();
/// let pair = b.add_factor_type("pairwise").unwrap();
/// let s0 = b.add_region(&[0], unary).unwrap();
/// let s1 = b.add_region(&[1], unary).unwrap();
/// let p = b.add_region(&[0, 1], pair).unwrap();
/// b.add_edge(p, s0).unwrap();
/// b.add_edge(p, s1).unwrap();
/// assert!(b.add_edge(s0, p).is_err()); // a child must be a strict subset
/// let g = b.build().unwrap();
/// assert_eq!(g.num_configs(p), 6);
/// ```
#[derive(Debug, Clone)]
pub struct RegionGraphBuilder {
    spec: RegionGraphSpec,
    by_variables: HashMap<Vec<usize>, usize>,
    /// Each region's variables, sorted: an edge's subset test is a binary
    /// search per child variable, not a scan of the parent per child variable
    /// (which made a region of k variables and its k singleton children O(k²)).
    sorted_variables: Vec<Vec<usize>>,
    edge_set: HashMap<(usize, usize), usize>,
}

impl RegionGraphBuilder {
    /// Starts a graph over variables with the given cardinalities (each ≥ 1).
    pub fn new(cardinalities: Vec<usize>) -> Result<Self, GraphError> {
        if let Some(variable) = cardinalities.iter().position(|&c| c == 0) {
            return Err(GraphError::ZeroCardinality { variable });
        }
        Ok(Self {
            spec: RegionGraphSpec { cardinalities, factor_types: Vec::new(), regions: Vec::new(), edges: Vec::new() },
            by_variables: HashMap::new(),
            sorted_variables: Vec::new(),
            edge_set: HashMap::new(),
        })
    }

    /// Declares a factor type and returns its index.
    pub fn add_factor_type(&mut self, name: &str) -> Result<usize, GraphError> {
        if self.spec.factor_types.iter().any(|t| t == name) {
            return Err(GraphError::DuplicateFactorType(name.to_string()));
        }
        self.spec.factor_types.push(name.to_string());
        Ok(self.spec.factor_types.len() - 1)
    }

    /// Index of the factor type called `name`, if declared.
    pub fn factor_type(&self, name: &str) -> Option<usize> {
        self.spec.factor_types.iter().position(|t| t == name)
    }

    /// Adds a region over `variables` (their order fixes the configuration
    /// index) of type `factor_type`, and returns its index.
    pub fn add_region(&mut self, variables: &[usize], factor_type: usize) -> Result<usize, GraphError> {
        let region = self.spec.regions.len();
        let n = self.spec.cardinalities.len();
        if variables.is_empty() {
            return Err(GraphError::EmptyRegion { region });
        }
        if let Some(&variable) = variables.iter().find(|&&v| v >= n) {
            return Err(GraphError::UnknownVariable { region, variable, num_variables: n });
        }
        if factor_type >= self.spec.factor_types.len() {
            return Err(GraphError::UnknownFactorType { region, factor_type, num_types: self.spec.factor_types.len() });
        }
        let mut sorted = variables.to_vec();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(GraphError::RepeatedVariable { region, variable: w[0] });
        }
        let mut configs = 1usize;
        for &v in variables {
            configs = configs
                .checked_mul(self.spec.cardinalities[v])
                .filter(|&c| c <= MAX_REGION_CONFIGS)
                .ok_or(GraphError::TooManyConfigurations { region, limit: MAX_REGION_CONFIGS })?;
        }
        if let Some(&first) = self.by_variables.get(&sorted) {
            return Err(GraphError::DuplicateRegion { first, second: region, variables: sorted });
        }
        self.by_variables.insert(sorted.clone(), region);
        self.sorted_variables.push(sorted);
        self.spec.regions.push(RegionSpec { variables: variables.to_vec(), factor_type });
        Ok(region)
    }

    /// The region over exactly this set of variables (any order), if any.
    pub fn find_region(&self, variables: &[usize]) -> Option<usize> {
        let mut sorted = variables.to_vec();
        sorted.sort_unstable();
        self.by_variables.get(&sorted).copied()
    }

    /// Adds the edge `parent → child`; the child's variables must be a strict
    /// subset of the parent's. (Strict inclusion also rules out cycles.)
    pub fn add_edge(&mut self, parent: usize, child: usize) -> Result<(), GraphError> {
        let num_regions = self.spec.regions.len();
        for region in [parent, child] {
            if region >= num_regions {
                return Err(GraphError::UnknownRegion { parent, child, region, num_regions });
            }
        }
        let sorted_parent = &self.sorted_variables[parent];
        let cv = &self.spec.regions[child].variables;
        if cv.len() >= sorted_parent.len() || !cv.iter().all(|v| sorted_parent.binary_search(v).is_ok()) {
            let parent_vars = self.spec.regions[parent].variables.clone();
            return Err(GraphError::NotSubset { parent, child, parent_vars, child_vars: cv.clone() });
        }
        if self.edge_set.contains_key(&(parent, child)) {
            return Err(GraphError::DuplicateEdge { parent, child });
        }
        self.edge_set.insert((parent, child), self.spec.edges.len());
        self.spec.edges.push((parent, child));
        Ok(())
    }

    /// Number of regions added so far.
    pub fn num_regions(&self) -> usize {
        self.spec.regions.len()
    }

    /// Finishes the graph: precomputes offsets, adjacency and edge maps.
    pub fn build(self) -> Result<RegionGraph, GraphError> {
        self.build_within(usize::MAX)
    }

    /// [`RegionGraphBuilder::build`], refusing a graph whose flat arrays would
    /// exceed `max_flat_len` entries ([`RegionGraphSpec::flat_len`]).
    pub fn build_within(self, max_flat_len: usize) -> Result<RegionGraph, GraphError> {
        check_flat_len(&self.spec, max_flat_len)?;
        Ok(RegionGraph::precompute(self.spec))
    }
}

/// A validated region graph with flat, precomputed indexing (see module docs).
///
/// ```
/// // A 1 × 2 grid: two pixel singletons (regions 0, 1) and their pair (region 2).
/// let g = factor_graph::grid(1, 2, 3).unwrap();
/// assert_eq!((g.num_variables(), g.num_regions(), g.num_edges()), (2, 3, 2));
/// assert_eq!(g.region_variables(2), &[0, 1]);
/// assert_eq!(g.num_configs(2), 9);
/// // Flat per-configuration storage: region 2 follows the two singletons.
/// assert_eq!(g.config_range(2), 6..15);
/// // Configuration index: last variable fastest.
/// assert_eq!(g.config_of(2, &[1, 2]), 1 * 3 + 2);
/// let mut y = [0; 2];
/// g.decode_config(2, 5, &mut y);
/// assert_eq!(y, [1, 2]);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RegionGraphSpec", into = "RegionGraphSpec")]
pub struct RegionGraph {
    spec: RegionGraphSpec,
    var_offsets: Vec<usize>,
    region_vars: Vec<usize>,
    config_offsets: Vec<usize>,
    edge_parent: Vec<usize>,
    edge_child: Vec<usize>,
    /// Start of each edge's map in `edge_maps` (length: the parent's
    /// configurations); identical maps share their entries.
    map_starts: Vec<usize>,
    edge_maps: Vec<u32>,
    message_offsets: Vec<usize>,
    parent_start: Vec<usize>,
    parent_edges: Vec<usize>,
    child_start: Vec<usize>,
    child_edges: Vec<usize>,
    singletons: Vec<Option<usize>>,
    type_regions: Vec<Vec<usize>>,
}

impl TryFrom<RegionGraphSpec> for RegionGraph {
    type Error = GraphError;
    fn try_from(spec: RegionGraphSpec) -> Result<Self, GraphError> {
        Self::from_spec(spec)
    }
}

impl From<RegionGraph> for RegionGraphSpec {
    fn from(g: RegionGraph) -> Self {
        g.spec
    }
}

impl RegionGraphSpec {
    /// Entries of the flat arrays the graph built from this spec holds:
    /// `Σ_α |Y_α|` (configurations) plus, per edge `α → β`, `|Y_α|` (its edge
    /// map) and `|Y_β|` (its message). `None` if a region names an unknown
    /// variable or the sum overflows. This is what building the graph and
    /// running inference on it allocate, up to a small constant factor.
    ///
    /// ```
    /// let g = factor_graph::grid(2, 2, 3).unwrap();
    /// // 4 pixels × 3 + 4 pairs × 9 configurations; 8 edges × (9 + 3).
    /// assert_eq!(g.spec().flat_len(), Some(12 + 36 + 8 * 12));
    /// ```
    pub fn flat_len(&self) -> Option<usize> {
        // Each region's count once (O(its variables)), then O(1) per edge.
        let configs = self
            .regions
            .iter()
            .map(|r| r.variables.iter().try_fold(1usize, |acc, &v| acc.checked_mul(*self.cardinalities.get(v)?)))
            .collect::<Option<Vec<usize>>>()?;
        let mut total = configs.iter().try_fold(0usize, |acc, &c| acc.checked_add(c))?;
        for &(p, c) in &self.edges {
            total = total.checked_add(*configs.get(p)?)?.checked_add(*configs.get(c)?)?;
        }
        Some(total)
    }
}

impl RegionGraph {
    /// Validates a spec (the same checks as [`RegionGraphBuilder`]) and builds the graph.
    pub fn from_spec(spec: RegionGraphSpec) -> Result<Self, GraphError> {
        Self::from_spec_within(spec, usize::MAX)
    }

    /// [`RegionGraph::from_spec`], refusing a graph whose
    /// [`RegionGraphSpec::flat_len`] exceeds `max_flat_len` before allocating
    /// it ([`GraphError::TooLarge`]); loaders pass [`graph_budget`] of the file.
    pub fn from_spec_within(spec: RegionGraphSpec, max_flat_len: usize) -> Result<Self, GraphError> {
        let mut b = RegionGraphBuilder::new(spec.cardinalities.clone())?;
        for name in &spec.factor_types {
            b.add_factor_type(name)?;
        }
        for r in &spec.regions {
            b.add_region(&r.variables, r.factor_type)?;
        }
        for &(p, c) in &spec.edges {
            b.add_edge(p, c)?;
        }
        check_flat_len(&b.spec, max_flat_len)?;
        Ok(Self::precompute(b.spec))
    }

    fn precompute(spec: RegionGraphSpec) -> Self {
        let nr = spec.regions.len();
        let mut var_offsets = vec![0];
        let mut region_vars = Vec::new();
        let mut config_offsets = vec![0];
        let mut singletons = vec![None; spec.cardinalities.len()];
        let mut type_regions = vec![Vec::new(); spec.factor_types.len()];
        for (r, region) in spec.regions.iter().enumerate() {
            region_vars.extend_from_slice(&region.variables);
            var_offsets.push(region_vars.len());
            let configs: usize = region.variables.iter().map(|&v| spec.cardinalities[v]).product();
            config_offsets.push(config_offsets[r] + configs);
            if region.variables.len() == 1 {
                singletons[region.variables[0]] = Some(r);
            }
            type_regions[region.factor_type].push(r);
        }
        let ne = spec.edges.len();
        let mut edge_parent = Vec::with_capacity(ne);
        let mut edge_child = Vec::with_capacity(ne);
        let mut map_starts = Vec::with_capacity(ne);
        let mut message_offsets = vec![0];
        let mut edge_maps = Vec::new();
        // Identical maps are stored once (a grid has two: one per position of
        // the child in its pair), which keeps the graph small for many labels.
        let mut interned: HashMap<Vec<u32>, usize> = HashMap::new();
        let mut map = Vec::new();
        // A parent's variables with more than one label, as (variable,
        // cardinality). Variables of cardinality 1 are always at label 0 and
        // move no index, and there are at most 28 others (a region has at most
        // 2^28 configurations), so an edge costs O(its child's variables + its
        // parent's configurations). For a wide parent the list is computed
        // once and kept for all its edges: a region of k variables with k
        // singleton children costs O(k), not O(k²).
        let moving_of = |p: usize| {
            spec.regions[p].variables.iter().map(|&v| (v, spec.cardinalities[v])).filter(|&(_, card)| card > 1)
        };
        let mut wide: HashMap<usize, Vec<(usize, usize)>> = HashMap::new();
        let mut narrow = Vec::new();
        let mut digits = Vec::new();
        let mut counter = Vec::new();
        for &(p, c) in &spec.edges {
            edge_parent.push(p);
            edge_child.push(c);
            let cv = &spec.regions[c].variables;
            let parent_moving = if spec.regions[p].variables.len() > 16 {
                &*wide.entry(p).or_insert_with(|| moving_of(p).collect())
            } else {
                narrow.clear();
                narrow.extend(moving_of(p));
                &narrow
            };
            // Stride, in the child's index, of each moving parent variable (0 if absent).
            let child_strides = strides(cv, &spec.cardinalities);
            digits.clear();
            digits.extend(
                parent_moving
                    .iter()
                    .map(|&(v, card)| (card, cv.iter().position(|&w| w == v).map_or(0, |j| child_strides[j]))),
            );
            counter.clear();
            counter.resize(digits.len(), 0usize);
            let mut child_index = 0usize;
            let parent_configs = config_offsets[p + 1] - config_offsets[p];
            map.clear();
            for _ in 0..parent_configs {
                map.push(child_index as u32);
                // Increment the mixed-radix counter, last digit fastest.
                for (i, &(card, contrib)) in digits.iter().enumerate().rev() {
                    counter[i] += 1;
                    child_index += contrib;
                    if counter[i] < card {
                        break;
                    }
                    child_index -= contrib * card;
                    counter[i] = 0;
                }
            }
            let start = match interned.get(map.as_slice()) {
                Some(&start) => start,
                None => {
                    let start = edge_maps.len();
                    edge_maps.extend_from_slice(&map);
                    interned.insert(map.clone(), start);
                    start
                }
            };
            map_starts.push(start);
            let child_configs = config_offsets[c + 1] - config_offsets[c];
            message_offsets.push(message_offsets.last().copied().unwrap_or(0) + child_configs);
        }
        let (parent_start, parent_edges) = csr(nr, edge_child.iter().copied());
        let (child_start, child_edges) = csr(nr, edge_parent.iter().copied());
        Self {
            spec,
            var_offsets,
            region_vars,
            config_offsets,
            edge_parent,
            edge_child,
            map_starts,
            edge_maps,
            message_offsets,
            parent_start,
            parent_edges,
            child_start,
            child_edges,
            singletons,
            type_regions,
        }
    }

    /// The defining spec (variables, types, regions, edges).
    pub fn spec(&self) -> &RegionGraphSpec {
        &self.spec
    }

    /// Number of variables `N`.
    pub fn num_variables(&self) -> usize {
        self.spec.cardinalities.len()
    }

    /// `|Y_i|` of variable `i`.
    pub fn cardinality(&self, variable: usize) -> usize {
        self.spec.cardinalities[variable]
    }

    /// All cardinalities.
    pub fn cardinalities(&self) -> &[usize] {
        &self.spec.cardinalities
    }

    /// Names of the factor types.
    pub fn factor_types(&self) -> &[String] {
        &self.spec.factor_types
    }

    /// Index of the factor type called `name`.
    pub fn factor_type_index(&self, name: &str) -> Option<usize> {
        self.spec.factor_types.iter().position(|t| t == name)
    }

    /// Number of regions.
    pub fn num_regions(&self) -> usize {
        self.spec.regions.len()
    }

    /// Variables of region `r`, in configuration-index order.
    pub fn region_variables(&self, r: usize) -> &[usize] {
        &self.region_vars[self.var_offsets[r]..self.var_offsets[r + 1]]
    }

    /// Factor type of region `r`.
    pub fn region_type(&self, r: usize) -> usize {
        self.spec.regions[r].factor_type
    }

    /// Regions of factor type `t`, in index order.
    pub fn regions_of_type(&self, t: usize) -> &[usize] {
        &self.type_regions[t]
    }

    /// `|Y_α|`, the number of configurations of region `r`.
    pub fn num_configs(&self, r: usize) -> usize {
        self.config_offsets[r + 1] - self.config_offsets[r]
    }

    /// Where region `r`'s configurations live in a flat per-configuration vector.
    #[inline]
    pub fn config_range(&self, r: usize) -> Range<usize> {
        self.config_offsets[r]..self.config_offsets[r + 1]
    }

    /// Length of a flat per-configuration vector (`θ`, beliefs): `Σ_α |Y_α|`.
    pub fn total_configs(&self) -> usize {
        *self.config_offsets.last().unwrap_or(&0)
    }

    /// Number of parent → child edges.
    pub fn num_edges(&self) -> usize {
        self.edge_parent.len()
    }

    /// Parent region of edge `e`.
    #[inline]
    pub fn edge_parent(&self, e: usize) -> usize {
        self.edge_parent[e]
    }

    /// Child region of edge `e`.
    #[inline]
    pub fn edge_child(&self, e: usize) -> usize {
        self.edge_child[e]
    }

    /// `map[parent configuration] = child configuration` for edge `e`.
    #[inline]
    pub fn edge_map(&self, e: usize) -> &[u32] {
        let start = self.map_starts[e];
        &self.edge_maps[start..start + self.num_configs(self.edge_parent[e])]
    }

    /// Where edge `e`'s message `λ_α(y_β)` lives in a flat message vector.
    #[inline]
    pub fn message_range(&self, e: usize) -> Range<usize> {
        self.message_offsets[e]..self.message_offsets[e + 1]
    }

    /// Length of a flat message vector: `Σ_{α→β} |Y_β|`.
    pub fn total_message_len(&self) -> usize {
        *self.message_offsets.last().unwrap_or(&0)
    }

    /// Edges `γ → r` into region `r` from its parents.
    #[inline]
    pub fn parent_edges(&self, r: usize) -> &[usize] {
        &self.parent_edges[self.parent_start[r]..self.parent_start[r + 1]]
    }

    /// Edges `r → β` from region `r` to its children.
    #[inline]
    pub fn child_edges(&self, r: usize) -> &[usize] {
        &self.child_edges[self.child_start[r]..self.child_start[r + 1]]
    }

    /// Every edge of region `r` in increasing edge index, each with whether
    /// `r` is its parent (`true`: an edge `r → β` of [`RegionGraph::child_edges`])
    /// or its child (`false`: `γ → r` of [`RegionGraph::parent_edges`]): the
    /// order in which sums over a region's messages add them, so that every
    /// such sum has the same bits.
    ///
    /// ```
    /// let g = factor_graph::grid(1, 2, 2).unwrap(); // two singletons and their pair
    /// let pair = (0..g.num_regions()).find(|&r| g.region_variables(r).len() == 2).unwrap();
    /// let edges: Vec<(usize, bool)> = g.edges_in_order(pair).collect();
    /// assert_eq!(edges.len(), 2);
    /// assert!(edges.iter().all(|&(_, as_parent)| as_parent));
    /// assert!(edges.windows(2).all(|w| w[0].0 < w[1].0));
    /// ```
    #[inline]
    pub fn edges_in_order(&self, r: usize) -> impl Iterator<Item = (usize, bool)> + '_ {
        // Both lists ascend, so merging them visits r's edges in index order.
        let (mut down, mut up) = (self.child_edges(r).iter().peekable(), self.parent_edges(r).iter().peekable());
        std::iter::from_fn(move || {
            let as_parent = match (down.peek(), up.peek()) {
                (Some(&&d), Some(&&u)) => d < u,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => return None,
            };
            let e = if as_parent { down.next() } else { up.next() };
            e.map(|&e| (e, as_parent))
        })
    }

    /// The singleton region `{i}` of variable `i`, if the graph has one.
    pub fn singleton(&self, variable: usize) -> Option<usize> {
        self.singletons[variable]
    }

    /// Regions that have at least one parent, in index order: the default
    /// forward order of star updates (raster order for grids).
    pub fn default_update_order(&self) -> Vec<usize> {
        (0..self.num_regions()).filter(|&r| !self.parent_edges(r).is_empty()).collect()
    }

    /// Checks a star-update order: every entry must be a region with parents.
    pub fn validate_order(&self, order: &[usize]) -> Result<(), GraphError> {
        for &r in order {
            if r >= self.num_regions() {
                return Err(GraphError::InvalidOrder(format!("region {r} does not exist")));
            }
            if self.parent_edges(r).is_empty() {
                return Err(GraphError::InvalidOrder(format!("region {r} has no parents")));
            }
        }
        Ok(())
    }

    /// Configuration index of region `r` under a full labelling `y` of all
    /// variables (see module docs). Panics if `y` is shorter than the variables.
    pub fn config_of(&self, r: usize, y: &[usize]) -> usize {
        self.region_variables(r).iter().fold(0, |acc, &v| acc * self.cardinality(v) + y[v])
    }

    /// The labels of region `r`'s variables in configuration `config`, written
    /// into `out` (one per region variable).
    pub fn decode_config(&self, r: usize, mut config: usize, out: &mut [usize]) {
        let vars = self.region_variables(r);
        for (i, &v) in vars.iter().enumerate().rev() {
            let c = self.cardinality(v);
            out[i] = config % c;
            config /= c;
        }
    }
}

/// What [`RegionGraph::propagate_zeros`] found.
///
/// ```
/// # use factor_graph::graph::ZeroPropagation;
/// assert_ne!(ZeroPropagation::Consistent, ZeroPropagation::Empty { region: 0 });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZeroPropagation {
    /// No region was left without a possible configuration. This does not
    /// prove that some labelling has every `θ` finite (propagation is sound,
    /// not complete).
    Consistent,
    /// Region `region` was left with no possible configuration: every
    /// labelling has `θ = −∞` in some region (probability 0).
    Empty {
        /// The first region found without a possible configuration.
        region: usize,
    },
    /// The work limit was reached before either was found.
    Undecided,
}

impl RegionGraph {
    /// Propagates the forbidden configurations (`θ = −∞`) along the edges
    /// until nothing changes (arc consistency): a parent configuration is
    /// forbidden if the child configuration it maps to is, and a child
    /// configuration if every parent configuration mapping to it is.
    ///
    /// A labelling whose configurations all have finite `θ` keeps them all,
    /// so [`ZeroPropagation::Empty`] proves that every labelling has
    /// probability 0 — and that the local polytope is empty, so the smoothed
    /// dual is unbounded below and inference cannot give a meaningful result.
    /// Each edge visit costs its parent's plus its child's configurations;
    /// past `max_work` of those the answer is [`ZeroPropagation::Undecided`].
    /// Without any `−∞` the answer is [`ZeroPropagation::Consistent`] after
    /// one scan of `theta`. Panics if `theta` is not `total_configs()` long.
    ///
    /// ```
    /// use factor_graph::graph::ZeroPropagation;
    /// // Pairs (0, 1) and (1, 2) over binary variables: the first allows only
    /// // y1 = 0, the second only y1 = 1.
    /// let g = factor_graph::grid(1, 3, 2).unwrap();
    /// let mut theta = vec![0.0; g.total_configs()];
    /// let (a, b) = (g.config_range(3), g.config_range(4));
    /// for y in 0..4 {
    ///     theta[a.start + y] = if y % 2 == 0 { 0.0 } else { f64::NEG_INFINITY }; // y1 = 0 only
    ///     theta[b.start + y] = if y / 2 == 1 { 0.0 } else { f64::NEG_INFINITY }; // y1 = 1 only
    /// }
    /// assert!(matches!(g.propagate_zeros(&theta, usize::MAX), ZeroPropagation::Empty { .. }));
    /// theta[b.start] = 0.0; // (y1, y2) = (0, 0) allowed again
    /// assert_eq!(g.propagate_zeros(&theta, usize::MAX), ZeroPropagation::Consistent);
    /// ```
    pub fn propagate_zeros(&self, theta: &[f64], max_work: usize) -> ZeroPropagation {
        assert_eq!(theta.len(), self.total_configs(), "one θ per configuration");
        if !theta.contains(&f64::NEG_INFINITY) {
            return ZeroPropagation::Consistent;
        }
        let mut allowed: Vec<bool> = theta.iter().map(|&t| t != f64::NEG_INFINITY).collect();
        let mut left: Vec<usize> =
            (0..self.num_regions()).map(|r| allowed[self.config_range(r)].iter().filter(|&&a| a).count()).collect();
        if let Some(region) = left.iter().position(|&n| n == 0) {
            return ZeroPropagation::Empty { region };
        }
        let mut queue: std::collections::VecDeque<usize> = (0..self.num_edges()).collect();
        let mut queued = vec![true; self.num_edges()];
        let mut support = Vec::new();
        let mut work = 0usize;
        while let Some(e) = queue.pop_front() {
            queued[e] = false;
            let (p, c) = (self.edge_parent(e), self.edge_child(e));
            let (pr, cr) = (self.config_range(p), self.config_range(c));
            work = work.saturating_add(pr.len() + cr.len());
            if work > max_work {
                return ZeroPropagation::Undecided;
            }
            let map = self.edge_map(e);
            support.clear();
            support.resize(cr.len(), false);
            for (i, &m) in map.iter().enumerate() {
                if allowed[pr.start + i] {
                    support[m as usize] = true;
                }
            }
            let mut child_changed = false;
            for (y, &s) in support.iter().enumerate() {
                if !s && allowed[cr.start + y] {
                    allowed[cr.start + y] = false;
                    left[c] -= 1;
                    child_changed = true;
                }
            }
            if left[c] == 0 {
                return ZeroPropagation::Empty { region: c };
            }
            let mut parent_changed = false;
            for (i, &m) in map.iter().enumerate() {
                if allowed[pr.start + i] && !allowed[cr.start + m as usize] {
                    allowed[pr.start + i] = false;
                    left[p] -= 1;
                    parent_changed = true;
                }
            }
            if left[p] == 0 {
                return ZeroPropagation::Empty { region: p };
            }
            for (r, changed) in [(c, child_changed), (p, parent_changed)] {
                if changed {
                    for &f in self.parent_edges(r).iter().chain(self.child_edges(r)) {
                        if f != e && !queued[f] {
                            queued[f] = true;
                            queue.push_back(f);
                        }
                    }
                }
            }
        }
        ZeroPropagation::Consistent
    }
}

fn check_flat_len(spec: &RegionGraphSpec, limit: usize) -> Result<(), GraphError> {
    match spec.flat_len() {
        Some(entries) if entries <= limit => Ok(()),
        entries => Err(GraphError::TooLarge { entries, limit }),
    }
}

/// Strides of each variable of `vars` in the mixed-radix index (last fastest).
///
/// ```
/// // Variables 0 and 2 of cardinalities [2, 5, 3]: last variable fastest.
/// assert_eq!(factor_graph::graph::strides(&[0, 2], &[2, 5, 3]), vec![3, 1]);
/// ```
pub fn strides(vars: &[usize], cardinalities: &[usize]) -> Vec<usize> {
    let mut s = vec![1; vars.len()];
    for i in (0..vars.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * cardinalities[vars[i + 1]];
    }
    s
}

fn csr(n: usize, keys: impl Iterator<Item = usize> + Clone) -> (Vec<usize>, Vec<usize>) {
    let mut start = vec![0; n + 1];
    for k in keys.clone() {
        start[k + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut items = vec![0; start[n]];
    for (e, k) in keys.enumerate() {
        items[fill[k]] = e;
        fill[k] += 1;
    }
    (start, items)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Identical edge maps are stored once, and every edge's map still sends
    /// each parent configuration to the child configuration of the same
    /// variable values.
    #[test]
    fn edge_maps_are_shared_and_correct() {
        let g = crate::grid(6, 7, 8).unwrap();
        // One map per position of the child in its pair.
        assert_eq!(g.edge_maps.len(), 2 * 64);
        let mut three = RegionGraphBuilder::new(vec![2, 3, 4]).unwrap();
        let t = three.add_factor_type("t").unwrap();
        let s: Vec<usize> = (0..3).map(|v| three.add_region(&[v], t).unwrap()).collect();
        let p01 = three.add_region(&[0, 1], t).unwrap();
        let p12 = three.add_region(&[1, 2], t).unwrap();
        let all = three.add_region(&[0, 1, 2], t).unwrap();
        for (p, c) in [(p01, s[0]), (p01, s[1]), (p12, s[1]), (p12, s[2]), (all, p01), (all, p12), (all, s[1])] {
            three.add_edge(p, c).unwrap();
        }
        for g in [g, three.build().unwrap()] {
            for e in 0..g.num_edges() {
                let (p, c) = (g.edge_parent(e), g.edge_child(e));
                let pv = g.region_variables(p).to_vec();
                let mut yp = vec![0; pv.len()];
                let mut y = vec![0; g.num_variables()];
                let map = g.edge_map(e);
                assert_eq!(map.len(), g.num_configs(p));
                for (i, &m) in map.iter().enumerate() {
                    g.decode_config(p, i, &mut yp);
                    for (&v, &l) in pv.iter().zip(&yp) {
                        y[v] = l;
                    }
                    assert_eq!(m as usize, g.config_of(c, &y), "edge {e}, parent configuration {i}");
                }
            }
        }
    }
}
