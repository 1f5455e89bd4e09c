//! Data sets: examples with their own region graphs, labels and per-region
//! features grouped by factor type (docs/MATH.md §1), and the data set file format.
//!
//! A [`Dataset`] declares its factor types (name, feature dimension). Every
//! example's graph names its factor types too; they are matched **by name**.
//! For every factor type `t` an example carries one [`FeatureBlock`]: a
//! row-major matrix whose rows are the regions of type `t` in the graph's
//! region order (`graph.regions_of_type(t)`), `φ^k_α ∈ R^{d_t}`.
//!
//! A [`Dataset`] holds each type's features in one array, the examples' rows
//! one after another ([`Dataset::features`], [`Dataset::type_features`]): the
//! oracle of a type fits on that array as it is, without a pooled copy (at
//! Stanford Background's shape the unary features are 336 bytes per pixel).
//!
//! # File format
//!
//! * JSON (`.json`): [`DatasetFile`] with `"format": "structlearn-dataset"` and
//!   `"version": 2`; graphs are listed once under `"graphs"` (as region-graph
//!   specs: cardinalities, factor types, regions, edges) and examples refer to
//!   them by index, so a thousand images of one size share one graph.
//! * Binary (any other extension, conventionally `.sld`): the 8 bytes
//!   `SLDATA\0\x02`, then the same [`DatasetFile`] encoded with postcard, then
//!   an 8-byte FNV-1a checksum of the body.
//!
//! ```
//! use std::sync::Arc;
//! use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
//! let graph = Arc::new(factor_graph::grid(1, 2, 2).unwrap());
//! let ex = Example::new(
//!     "tiny",
//!     graph,
//!     Some(vec![0, 1]),
//!     vec![
//!         FeatureBlock { dim: 2, values: vec![0.1, 1.0, 0.9, 1.0] },
//!     FeatureBlock { dim: 1, values: vec![1.0] },
//!     ],
//! );
//! let types = vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)];
//! let data = Dataset::new(types, vec![ex]).unwrap();
//! assert_eq!(data.factor_types()[0].classes, 2);
//! assert_eq!(data.factor_types()[1].classes, 4);
//! ```

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use factor_graph::{RegionGraph, RegionGraphSpec};
use serde::{Deserialize, Serialize};

use crate::LearnError;

/// A factor type of a data set/model: parameters are shared by all its regions.
///
/// ```
/// let t = structlearn::FactorTypeInfo::new("unary", 2);
/// assert_eq!((t.name.as_str(), t.dim, t.classes), ("unary", 2, 0)); // classes: filled in by Dataset::new
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactorTypeInfo {
    /// Name, matched against the graphs' factor-type names.
    pub name: String,
    /// Feature dimension `d_t`.
    pub dim: usize,
    /// Number of configurations `|Y_α|` of every region of the type (the
    /// oracle's classes); filled in by [`Dataset::new`] from the graphs.
    #[serde(default)]
    pub classes: usize,
}

impl FactorTypeInfo {
    /// A type with its name and feature dimension (classes inferred later).
    pub fn new(name: &str, dim: usize) -> Self {
        Self { name: name.to_string(), dim, classes: 0 }
    }
}

/// Row-major features of the regions of one factor type in one example.
///
/// ```
/// // Two regions with features [0.1, 1] and [0.9, 1].
/// let block = structlearn::FeatureBlock { dim: 2, values: vec![0.1, 1.0, 0.9, 1.0] };
/// assert_eq!(block.values.chunks(block.dim).nth(1), Some(&[0.9, 1.0][..]));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureBlock {
    /// Features per region.
    pub dim: usize,
    /// `rows × dim` values, rows in the graph's region order for that type.
    pub values: Vec<f64>,
}

/// One structured example `x^k` (with its labelling `y^k` when known).
///
/// ```
/// use std::sync::Arc;
/// use structlearn::{Example, FeatureBlock};
/// // A 1 × 3 image: three pixels, two neighbouring pairs.
/// let graph = Arc::new(factor_graph::grid(1, 3, 2).unwrap());
/// let ex = Example::new(
///     "strip",
///     graph,
///     Some(vec![0, 1, 1]),
///     vec![
///         FeatureBlock { dim: 1, values: vec![0.2, 0.7, 0.9] }, // one row per pixel
///     FeatureBlock { dim: 1, values: vec![1.0, 1.0] },      // one row per pair
///     ],
/// );
/// assert_eq!(ex.graph().num_variables(), 3); // name, graph, labels: its ExampleInfo's
/// ```
#[derive(Debug, Clone)]
pub struct Example {
    info: ExampleInfo,
    features: Vec<FeatureBlock>,
}

/// An example is its [`ExampleInfo`] (name, graph, labels) and its features.
impl std::ops::Deref for Example {
    type Target = ExampleInfo;
    fn deref(&self) -> &ExampleInfo {
        &self.info
    }
}

impl Example {
    /// An example named `name` (for messages and outputs, e.g. the image
    /// file) on `graph` (shared between examples of one shape), with its
    /// labels `y^k_i` per variable if known and one feature block per factor
    /// type of the data set, in the data set's type order. It is checked
    /// against the factor types, once, by [`Dataset::new`].
    pub fn new(
        name: impl Into<String>,
        graph: Arc<RegionGraph>,
        labels: Option<Vec<usize>>,
        features: Vec<FeatureBlock>,
    ) -> Self {
        Self { info: ExampleInfo { name: name.into(), graph, labels }, features }
    }

    /// The name, graph, labels and feature blocks, by value.
    pub fn into_parts(self) -> (String, Arc<RegionGraph>, Option<Vec<usize>>, Vec<FeatureBlock>) {
        let ExampleInfo { name, graph, labels } = self.info;
        (name, graph, labels, self.features)
    }
}

/// An example as a [`Dataset`] holds it: its name, graph and labels; its
/// features are the data set's ([`Dataset::features`]), which keeps each
/// factor type's rows of all examples in one array.
#[derive(Debug, Clone)]
pub struct ExampleInfo {
    name: String,
    graph: Arc<RegionGraph>,
    labels: Option<Vec<usize>>,
}

impl ExampleInfo {
    /// The example's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The example's region graph.
    pub fn graph(&self) -> &Arc<RegionGraph> {
        &self.graph
    }

    /// `y^k_i` per variable, if known.
    pub fn labels(&self) -> Option<&[usize]> {
        self.labels.as_deref()
    }
}

/// A validated set of examples over a common list of factor types.
///
/// ```
/// use std::sync::Arc;
/// use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
/// let graph = Arc::new(factor_graph::grid(2, 2, 2).unwrap());
/// let example = |labels: Vec<usize>| Example::new(
///     "square",
///     graph.clone(),
///     Some(labels),
///     vec![FeatureBlock { dim: 1, values: vec![0.5; 4] }, FeatureBlock { dim: 1, values: vec![1.0; 4] }],
/// );
/// let types = vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)];
/// let data = Dataset::new(types, vec![example(vec![0, 1, 0, 1]), example(vec![1, 1, 0, 0])]).unwrap();
/// assert_eq!((data.len(), data.num_variables()), (2, 8));
/// assert_eq!(data.labels(1).unwrap(), &[1, 1, 0, 0]);
/// // Files: binary (.sld) or JSON (.json), written atomically.
/// let dir = tempfile::tempdir().unwrap();
/// data.save(&dir.path().join("data.sld")).unwrap();
/// let back = Dataset::load(&dir.path().join("data.sld")).unwrap();
/// assert_eq!(back.examples()[0].labels(), data.examples()[0].labels());
/// ```
#[derive(Debug, Clone)]
pub struct Dataset {
    /// The factor types, with `classes` filled in.
    factor_types: Vec<FactorTypeInfo>,
    /// The examples, without their features (in `features`).
    examples: Vec<ExampleInfo>,
    /// Per factor type, every example's feature rows.
    features: Vec<TypeFeatures>,
    /// For every example, for every region: the data set's factor-type index.
    region_types: Vec<Arc<Vec<usize>>>,
    /// For every example, its unknown-label mask, if any ([`Dataset::set_ignored`]).
    ignored: Vec<Option<Vec<bool>>>,
}

impl Dataset {
    /// Validates examples against the factor types: every graph's types are
    /// declared, all regions of a type have the same number of configurations,
    /// feature blocks have the declared dimension and one row per region,
    /// features are finite, labels are in range. Errors name the example and region.
    pub fn new(mut factor_types: Vec<FactorTypeInfo>, mut examples: Vec<Example>) -> Result<Self, LearnError> {
        if factor_types.is_empty() {
            return Err(LearnError::NoFactorTypes);
        }
        let mut names = HashMap::new();
        for (t, ft) in factor_types.iter().enumerate() {
            if names.insert(ft.name.clone(), t).is_some() {
                return Err(LearnError::Config(format!("factor type `{}` is declared twice", ft.name)));
            }
        }
        let mut classes: Vec<Option<usize>> =
            factor_types.iter().map(|f| (f.classes > 0).then_some(f.classes)).collect();
        let mut region_types = Vec::with_capacity(examples.len());
        let mut cache: HashMap<*const RegionGraph, Arc<Vec<usize>>> = HashMap::new();
        for (k, ex) in examples.iter().enumerate() {
            let g = &ex.graph;
            let key = Arc::as_ptr(g);
            let types = match cache.get(&key) {
                Some(t) => t.clone(),
                None => {
                    if let Some(variable) = (0..g.num_variables()).find(|&v| g.singleton(v).is_none()) {
                        return Err(LearnError::MissingSingleton { example: k, variable });
                    }
                    let mut map = Vec::with_capacity(g.num_regions());
                    for r in 0..g.num_regions() {
                        let name = &g.factor_types()[g.region_type(r)];
                        let t = *names.get(name).ok_or_else(|| LearnError::UnknownFactorType {
                            example: k,
                            region: r,
                            factor_type: name.clone(),
                        })?;
                        let c = g.num_configs(r);
                        match classes[t] {
                            None => classes[t] = Some(c),
                            Some(expected) if expected != c => {
                                return Err(LearnError::ClassesMismatch {
                                    example: k,
                                    region: r,
                                    factor_type: name.clone(),
                                    expected,
                                    got: c,
                                });
                            }
                            Some(_) => {}
                        }
                        map.push(t);
                    }
                    let map = Arc::new(map);
                    cache.insert(key, map.clone());
                    map
                }
            };
            if ex.features.len() != factor_types.len() {
                return Err(LearnError::FeatureBlocks {
                    example: k,
                    expected: factor_types.len(),
                    got: ex.features.len(),
                });
            }
            let mut rows_of_type = vec![Vec::new(); factor_types.len()];
            for (r, &t) in types.iter().enumerate() {
                rows_of_type[t].push(r);
            }
            for (t, (block, ft)) in ex.features.iter().zip(&factor_types).enumerate() {
                if block.dim != ft.dim {
                    return Err(LearnError::FeatureDim {
                        example: k,
                        factor_type: ft.name.clone(),
                        expected: ft.dim,
                        got: block.dim,
                    });
                }
                let regions = rows_of_type[t].len();
                if regions.checked_mul(ft.dim) != Some(block.values.len()) {
                    return Err(LearnError::FeatureLength {
                        example: k,
                        factor_type: ft.name.clone(),
                        regions,
                        dim: ft.dim,
                        got: block.values.len(),
                    });
                }
                let acceptable = |v: &f64| v.is_finite() && v.abs() <= MAX_FEATURE_MAGNITUDE;
                if let Some(pos) = block.values.iter().position(|v| !acceptable(v)) {
                    let (factor_type, value) = (ft.name.clone(), block.values[pos]);
                    let (region, col) = (rows_of_type[t][pos / ft.dim.max(1)], pos % ft.dim.max(1));
                    return Err(if value.is_finite() {
                        LearnError::FeatureTooLarge {
                            example: k,
                            factor_type,
                            region,
                            col,
                            value,
                            limit: MAX_FEATURE_MAGNITUDE,
                        }
                    } else {
                        LearnError::NonFiniteFeature { example: k, factor_type, region, col, value }
                    });
                }
            }
            if let Some(labels) = &ex.labels {
                check_labels(k, labels, g)?;
            }
            region_types.push(types);
        }
        for (ft, c) in factor_types.iter_mut().zip(classes) {
            ft.classes = c.unwrap_or(ft.classes);
        }
        let ignored = vec![None; examples.len()];
        let features = TypeFeatures::pool(&factor_types, &region_types, &mut examples);
        let examples = examples.into_iter().map(|ex| ex.info).collect();
        Ok(Self { factor_types, examples, features, region_types, ignored })
    }

    /// Marks the variables of example `k` whose label is unknown (`mask[i]`
    /// true for an unknown `y_i`, e.g. pixels labelled −1 in Stanford
    /// Background; `None` clears the mark). Their entry in the labels is a
    /// placeholder that every error count skips ([`crate::StructuredModel::error_rate`],
    /// [`crate::metrics::ConfusionMatrix::from_labelings`]); prediction still
    /// infers them. A training set must not have any: they would enter the
    /// loss, so [`crate::Trainer::new`] refuses them — train on the graph of the
    /// labelled variables instead (the image loaders of the `datasets` crate do).
    /// Errors unless `mask` has one entry per variable of the example.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
    /// # let graph = Arc::new(factor_graph::grid(1, 3, 2).unwrap());
    /// # let ex = Example::new(
    /// #     "a",
    /// #     graph,
    /// #     Some(vec![0, 1, 0]),
    /// #     vec![FeatureBlock { dim: 1, values: vec![0.0; 3] }, FeatureBlock { dim: 1, values: vec![1.0; 2] }],
    /// # );
    /// # let mut data = Dataset::new(vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)], vec![ex]).unwrap();
    /// data.set_ignored(0, Some(vec![false, true, false])).unwrap(); // y_1 is unknown
    /// assert!(data.is_labelled(0, 0) && !data.is_labelled(0, 1));
    /// assert!(data.set_ignored(0, Some(vec![true])).is_err());
    /// ```
    pub fn set_ignored(&mut self, k: usize, mask: Option<Vec<bool>>) -> Result<(), LearnError> {
        let n = self.example(k)?.graph.num_variables();
        if let Some(m) = &mask
            && m.len() != n
        {
            return Err(LearnError::Config(format!(
                "example {k}: the unknown-label mask has {} entries for {n} variables",
                m.len()
            )));
        }
        self.ignored[k] = mask;
        Ok(())
    }

    /// The unknown-label mask of example `k`, if it has one ([`Dataset::set_ignored`]).
    pub fn ignored(&self, k: usize) -> Option<&[bool]> {
        self.ignored.get(k)?.as_deref()
    }

    /// Whether variable `i` of example `k` has a known label (counts in errors).
    pub fn is_labelled(&self, k: usize, i: usize) -> bool {
        self.ignored(k).is_none_or(|m| !m[i])
    }

    /// Number of variables with a known label, over the examples that have
    /// labels: what an error rate on this set divides by.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
    /// let graph = Arc::new(factor_graph::grid(1, 2, 2).unwrap());
    /// let example = Example::new(
    ///     "pair",
    ///     graph,
    ///     Some(vec![0, 1]),
    ///     vec![FeatureBlock { dim: 1, values: vec![1.0; 2] }, FeatureBlock { dim: 1, values: vec![1.0] }],
    /// );
    /// let types = vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)];
    /// let mut data = Dataset::new(types, vec![example.clone(), example]).unwrap();
    /// assert_eq!(data.labelled_variables(), 4);
    /// data.set_ignored(0, Some(vec![true, false])).unwrap();
    /// data.set_ignored(1, Some(vec![true, true])).unwrap();
    /// assert_eq!(data.labelled_variables(), 1);
    /// ```
    pub fn labelled_variables(&self) -> usize {
        (0..self.len())
            .filter(|&k| self.examples[k].labels.is_some())
            .map(|k| (0..self.examples[k].graph.num_variables()).filter(|&i| self.is_labelled(k, i)).count())
            .sum()
    }

    /// Number of examples.
    pub fn len(&self) -> usize {
        self.examples.len()
    }

    /// Whether there are no examples.
    pub fn is_empty(&self) -> bool {
        self.examples.is_empty()
    }

    /// The data set's factor-type index of every region of example `k`.
    pub fn region_types(&self, k: usize) -> &[usize] {
        &self.region_types[k]
    }

    /// Regions of example `k` whose data-set factor type is `t`, in region order
    /// (the row order of its feature block `t`).
    pub fn regions_of_type(&self, k: usize, t: usize) -> impl Iterator<Item = usize> + '_ {
        self.region_types[k].iter().enumerate().filter(move |&(_, &rt)| rt == t).map(|(r, _)| r)
    }

    /// Index of the factor type called `name`.
    pub fn factor_type_index(&self, name: &str) -> Option<usize> {
        self.factor_types.iter().position(|f| f.name == name)
    }

    /// The error for a factor type name that `setting` gives and this data set lacks.
    pub(crate) fn unknown_factor_type(&self, setting: &'static str, name: &str) -> LearnError {
        let known = self.factor_types.iter().map(|f| f.name.clone()).collect();
        LearnError::UnknownTypeName { setting, name: name.to_string(), known }
    }

    /// The factor types, with `classes` filled in.
    pub fn factor_types(&self) -> &[FactorTypeInfo] {
        &self.factor_types
    }

    /// The examples: name, graph and labels. Their features are the data
    /// set's ([`Dataset::features`]).
    pub fn examples(&self) -> &[ExampleInfo] {
        &self.examples
    }

    /// Example `k`'s features of factor type `t`: `rows × dim` values, row
    /// `i` the features `φ^k_α` of its `i`-th region of that type
    /// ([`Dataset::regions_of_type`]).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
    /// let graph = Arc::new(factor_graph::grid(1, 2, 2).unwrap());
    /// let ex = |x: f64| Example::new("a", graph.clone(), None,
    ///     vec![FeatureBlock { dim: 1, values: vec![x, -x] }, FeatureBlock { dim: 1, values: vec![1.0] }]);
    /// let types = vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)];
    /// let data = Dataset::new(types, vec![ex(0.5), ex(2.0)]).unwrap();
    /// assert_eq!(data.features(1, 0), &[2.0, -2.0]);
    /// assert_eq!(data.type_features(0, 0..2), &[0.5, -0.5, 2.0, -2.0]); // one array per type
    /// ```
    ///
    /// # Panics
    /// If `k ≥ len()` or `t` is not a factor type of the data set.
    pub fn features(&self, k: usize, t: usize) -> &[f64] {
        self.type_features(t, k..k + 1)
    }

    /// The features of type `t` of the examples `examples`, their rows one
    /// after another in example order: a slice of the one array the data set
    /// holds for the type ([`Dataset::features`] is one example's part).
    ///
    /// # Panics
    /// If the range is not within `0..len()` or `t` is not a factor type of
    /// the data set.
    pub fn type_features(&self, t: usize, examples: std::ops::Range<usize>) -> &[f64] {
        let f = &self.features[t];
        &f.values[f.starts[examples.start] * f.dim..f.starts[examples.end] * f.dim]
    }

    /// Rows of type `t` (regions of that type) over the examples `examples`.
    ///
    /// # Panics
    /// As [`Dataset::type_features`].
    pub fn type_rows(&self, t: usize, examples: std::ops::Range<usize>) -> usize {
        let f = &self.features[t];
        f.starts[examples.end] - f.starts[examples.start]
    }

    /// The factor types and the examples with their feature blocks, by value
    /// (to build another data set from them with [`Dataset::new`]).
    pub fn into_parts(self) -> (Vec<FactorTypeInfo>, Vec<Example>) {
        let blocks: Vec<Vec<FeatureBlock>> = (0..self.examples.len()).map(|k| self.feature_blocks(k)).collect();
        let examples =
            self.examples.into_iter().zip(blocks).map(|(info, features)| Example { info, features }).collect();
        (self.factor_types, examples)
    }

    /// Example `k`'s features as one block per factor type, by value (to
    /// build an [`Example`] from it).
    ///
    /// # Panics
    /// If `k ≥ len()`.
    pub fn feature_blocks(&self, k: usize) -> Vec<FeatureBlock> {
        self.features
            .iter()
            .enumerate()
            .map(|(t, f)| FeatureBlock { dim: f.dim, values: self.features(k, t).to_vec() })
            .collect()
    }

    /// Rank `rank`'s block of the examples when they are spread over `ranks`
    /// ranks ([`oracles::collective::block`]: contiguous, in order, the
    /// first `n mod R` blocks one example longer), keeping nothing else — for
    /// data-parallel training ([`crate::Learner::distribute`]). Errors if
    /// `rank ≥ ranks` or there are fewer examples than ranks (a rank without
    /// examples has nothing to learn from).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
    /// # let graph = Arc::new(factor_graph::grid(1, 2, 2).unwrap());
    /// # let ex = |name: &str| Example::new(name, graph.clone(), Some(vec![0, 1]),
    /// #     vec![FeatureBlock { dim: 1, values: vec![0.0; 2] }, FeatureBlock { dim: 1, values: vec![1.0] }]);
    /// let types = vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)];
    /// let data = Dataset::new(types, vec![ex("a"), ex("b"), ex("c")]).unwrap();
    /// let second = data.clone().into_block(1, 2).unwrap();
    /// assert_eq!(second.examples()[0].name(), "c"); // rank 0 holds a and b
    /// assert!(data.into_block(0, 4).is_err());
    /// ```
    pub fn into_block(mut self, rank: usize, ranks: usize) -> Result<Dataset, LearnError> {
        let n = self.examples.len();
        if rank >= ranks {
            return Err(LearnError::Ranks(format!("rank {rank} of {ranks}")));
        }
        if n < ranks {
            return Err(LearnError::Ranks(format!(
                "{n} examples cannot be spread over {ranks} ranks (every rank needs one)"
            )));
        }
        let block = oracles::collective::block(n, rank, ranks);
        self.examples.truncate(block.end);
        self.examples.drain(..block.start);
        self.region_types.truncate(block.end);
        self.region_types.drain(..block.start);
        self.ignored.truncate(block.end);
        self.ignored.drain(..block.start);
        for f in &mut self.features {
            f.keep(block.clone());
        }
        Ok(self)
    }

    /// Example `k`, or an error naming it and the data set's size.
    pub fn example(&self, k: usize) -> Result<&ExampleInfo, LearnError> {
        let n = self.examples.len();
        self.examples
            .get(k)
            .ok_or_else(|| LearnError::Config(format!("example {k} asked of a data set of {n} examples")))
    }

    /// Labels of example `k` (checked by [`Dataset::new`]), or an error
    /// naming it: it has none, or the index is past the end.
    pub fn labels(&self, k: usize) -> Result<&[usize], LearnError> {
        self.example(k)?.labels.as_deref().ok_or(LearnError::MissingLabels { example: k })
    }

    /// Total number of labelled variables (pixels) over all examples.
    pub fn num_variables(&self) -> usize {
        self.examples.iter().map(|e| e.graph.num_variables()).sum()
    }

    /// Reads a data set file (JSON for `.json`, binary otherwise; module docs).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("data.json");
    /// std::fs::write(&path, r#"{"format": "structlearn-dataset", "version": 1,
    ///   "factor_types": [{"name": "unary", "dim": 1}],
    ///   "graphs": [{"cardinalities": [2, 2], "factor_types": ["unary"],
    ///               "regions": [{"variables": [0], "factor_type": 0}, {"variables": [1], "factor_type": 0}], "edges": []}],
    ///   "examples": [{"name": "a", "graph": 0, "labels": [0, 1], "features": [{"dim": 1, "values": [0.2, 0.8]}]}]}"#).unwrap();
    /// let data = structlearn::Dataset::load(&path).unwrap();
    /// assert_eq!((data.len(), data.num_variables()), (1, 2));
    /// ```
    pub fn load(path: &Path) -> Result<Self, LearnError> {
        let bytes = std::fs::read(path).map_err(|e| LearnError::io(path, e))?;
        let size = bytes.len();
        let file = Self::decode(&bytes, path)?;
        // The examples are validated and pooled without the file's bytes beside them.
        drop(bytes);
        file.into_dataset_from(size, path)
    }

    /// Reads a data set from the bytes of a file (JSON if `source` ends in
    /// `.json`, binary otherwise); `source` names it in errors.
    ///
    /// Memory stays bounded by the bytes given: every declared length is read
    /// element by element (a length the bytes cannot hold fails when they run
    /// out), and the region graphs together may need at most
    /// [`factor_graph::graph_budget`] flat entries; beyond that the file is
    /// refused ([`factor_graph::GraphError::TooLarge`]).
    pub fn from_bytes(bytes: &[u8], source: &Path) -> Result<Self, LearnError> {
        Self::decode(bytes, source)?.into_dataset_from(bytes.len(), source)
    }

    /// The [`DatasetFile`] in the bytes of a file ([`Dataset::from_bytes`]).
    fn decode(bytes: &[u8], source: &Path) -> Result<DatasetFile, LearnError> {
        Ok(if is_json(source) {
            serde_json::from_slice(bytes)
                .map_err(|e| LearnError::bad_file(source, format!("invalid JSON data set: {e}")))?
        } else {
            let corrupt = |e: postcard::Error| {
                LearnError::bad_file(
                    source,
                    format!(
                        "the data set body does not decode although its checksum matches \
                         (written by an incompatible build?): {e}"
                    ),
                )
            };
            if bytes.get(..8) == Some(&DATASET_MAGIC_V1[..]) {
                let body = crate::files::unwrap_binary(source, bytes, DATASET_MAGIC_V1)?;
                postcard::from_bytes::<DatasetFileV1>(body).map_err(corrupt)?.upgrade()
            } else {
                let body = crate::files::unwrap_binary(source, bytes, DATASET_MAGIC)?;
                postcard::from_bytes(body).map_err(corrupt)?
            }
        })
    }

    /// Writes the data set atomically (JSON for `.json`, binary otherwise).
    pub fn save(&self, path: &Path) -> Result<(), LearnError> {
        let file = DatasetFile::from_dataset(self);
        let bytes = if is_json(path) {
            serde_json::to_vec(&file).map_err(|e| LearnError::bad_file(path, e.to_string()))?
        } else {
            let body = postcard::to_stdvec(&file).map_err(|e| LearnError::bad_file(path, e.to_string()))?;
            crate::files::wrap_binary(DATASET_MAGIC, &body)
        };
        crate::files::write_atomic(path, &bytes)
    }
}

/// One factor type's features over a data set's examples: example `k`'s
/// rows are `starts[k]..starts[k + 1]`, row `i` the values
/// `values[i·dim..(i + 1)·dim]`.
#[derive(Debug, Clone)]
struct TypeFeatures {
    dim: usize,
    values: Vec<f64>,
    /// Row offsets, one per example and one past the last.
    starts: Vec<usize>,
}

impl TypeFeatures {
    /// Moves the validated examples' feature blocks into one array per type,
    /// type after type, freeing each example's block once it is copied, so
    /// that the features exist about once throughout (their blocks are left
    /// empty).
    fn pool(types: &[FactorTypeInfo], region_types: &[Arc<Vec<usize>>], examples: &mut [Example]) -> Vec<Self> {
        types
            .iter()
            .enumerate()
            .map(|(t, ft)| {
                let mut starts = Vec::with_capacity(examples.len() + 1);
                starts.push(0);
                for types in region_types {
                    let rows = types.iter().filter(|&&rt| rt == t).count();
                    starts.push(starts.last().copied().unwrap_or(0) + rows);
                }
                let mut values = Vec::with_capacity(starts.last().copied().unwrap_or(0) * ft.dim);
                for ex in examples.iter_mut() {
                    values.extend_from_slice(&std::mem::take(&mut ex.features[t].values));
                }
                TypeFeatures { dim: ft.dim, values, starts }
            })
            .collect()
    }

    /// Keeps the rows of the examples `block` only.
    fn keep(&mut self, block: std::ops::Range<usize>) {
        let (first, last) = (self.starts[block.start], self.starts[block.end]);
        self.values = self.values[first * self.dim..last * self.dim].to_vec();
        self.starts = self.starts[block.start..=block.end].iter().map(|s| s - first).collect();
    }
}

/// The labels of example `k` fit its graph: one per variable, each below its
/// variable's cardinality (the first offending variable is named).
fn check_labels(k: usize, labels: &[usize], graph: &RegionGraph) -> Result<(), LearnError> {
    let cardinalities = graph.cardinalities();
    if labels.len() != cardinalities.len() {
        return Err(LearnError::LabelCount { example: k, expected: cardinalities.len(), got: labels.len() });
    }
    match labels.iter().zip(cardinalities).position(|(l, c)| l >= c) {
        Some(variable) => Err(LearnError::LabelOutOfRange {
            example: k,
            variable,
            label: labels[variable],
            cardinality: cardinalities[variable],
        }),
        None => Ok(()),
    }
}

pub(crate) fn is_json(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// The largest feature magnitude a data set may hold. Scores are sums of
/// products of features with parameters, so features near `f64::MAX` (say
/// 1e308) overflow them to ±∞ or NaN, which surfaced deep inside inference or
/// an oracle's optimiser; beyond this bound (which leaves a factor of 1e200
/// for the parameters) a data set is refused up front, naming the feature.
///
/// ```
/// assert!(structlearn::data::MAX_FEATURE_MAGNITUDE < f64::MAX.sqrt());
/// ```
pub const MAX_FEATURE_MAGNITUDE: f64 = oracles::MAX_MAGNITUDE;

/// Magic bytes of binary data set files (the last byte is the format version).
pub const DATASET_MAGIC: &[u8; 8] = b"SLDATA\0\x02";

/// Magic bytes of version-1 binary data set files (no ignored-variable masks),
/// which are still read.
pub(crate) const DATASET_MAGIC_V1: &[u8; 8] = b"SLDATA\0\x01";

/// Version of the data set file format (2 added [`ExampleRecord::ignored`];
/// version 1 files are still read).
pub const DATASET_VERSION: u32 = 2;

/// A version-1 binary data set (examples without `ignored`).
#[derive(Deserialize)]
struct DatasetFileV1 {
    format: String,
    #[allow(dead_code)] // read for the field order; the magic bytes carry the version
    version: u32,
    factor_types: Vec<FactorTypeInfo>,
    graphs: Vec<RegionGraphSpec>,
    examples: Vec<ExampleRecordV1>,
}

#[derive(Deserialize)]
struct ExampleRecordV1 {
    name: String,
    graph: usize,
    labels: Option<Vec<usize>>,
    features: Vec<FeatureBlock>,
}

impl DatasetFileV1 {
    fn upgrade(self) -> DatasetFile {
        let examples = self
            .examples
            .into_iter()
            .map(|r| ExampleRecord {
                name: r.name,
                graph: r.graph,
                labels: r.labels,
                features: r.features,
                ignored: None,
            })
            .collect();
        DatasetFile {
            format: self.format,
            version: DATASET_VERSION,
            factor_types: self.factor_types,
            graphs: self.graphs,
            examples,
        }
    }
}

/// The serialised form of a [`Dataset`] (see module docs).
///
/// ```
/// # use std::sync::Arc;
/// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
/// # let graph = Arc::new(factor_graph::grid(1, 2, 2).unwrap());
/// # let ex = Example::new(
/// #     "a",
/// #     graph,
/// #     None,
/// #     vec![FeatureBlock { dim: 1, values: vec![0.0; 2] }, FeatureBlock { dim: 1, values: vec![1.0] }],
/// # );
/// # let data = Dataset::new(vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)], vec![ex]).unwrap();
/// use structlearn::DatasetFile;
/// let file = DatasetFile::from_dataset(&data);
/// let json = serde_json::to_string(&file).unwrap(); // what a .json data set holds
/// let back: DatasetFile = serde_json::from_str(&json).unwrap();
/// assert_eq!(back.into_dataset().unwrap().len(), 1);
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DatasetFile {
    /// Always `"structlearn-dataset"`.
    pub format: String,
    /// [`DATASET_VERSION`].
    pub version: u32,
    /// Factor types (name, dim; classes optional).
    pub factor_types: Vec<FactorTypeInfo>,
    /// Distinct region graphs.
    pub graphs: Vec<RegionGraphSpec>,
    /// Examples referring to `graphs` by index.
    pub examples: Vec<ExampleRecord>,
}

/// One example in a [`DatasetFile`].
///
/// ```
/// let record: structlearn::ExampleRecord = serde_json::from_value(serde_json::json!({
///     "name": "a", "graph": 0, "labels": [0, 1],
///     "features": [{"dim": 1, "values": [0.2, 0.8]}, {"dim": 1, "values": [1.0]}]
/// })).unwrap();
/// assert_eq!(record.graph, 0);
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExampleRecord {
    /// Name.
    pub name: String,
    /// Index into [`DatasetFile::graphs`].
    pub graph: usize,
    /// Labels, if known.
    pub labels: Option<Vec<usize>>,
    /// Feature blocks, one per factor type in [`DatasetFile::factor_types`] order.
    pub features: Vec<FeatureBlock>,
    /// Unknown labels ([`Dataset::ignored`]); absent in JSON means none.
    #[serde(default)]
    pub ignored: Option<Vec<bool>>,
}

impl DatasetFile {
    /// The file form of a data set, sharing identical graphs.
    pub fn from_dataset(data: &Dataset) -> Self {
        let mut graphs = Vec::new();
        let mut index: HashMap<*const RegionGraph, usize> = HashMap::new();
        let examples = data
            .examples
            .iter()
            .enumerate()
            .map(|(k, ex)| {
                let g = *index.entry(Arc::as_ptr(&ex.graph)).or_insert_with(|| {
                    graphs.push(ex.graph.spec().clone());
                    graphs.len() - 1
                });
                ExampleRecord {
                    name: ex.name.clone(),
                    graph: g,
                    labels: ex.labels.clone(),
                    features: data.feature_blocks(k),
                    ignored: data.ignored(k).map(<[bool]>::to_vec),
                }
            })
            .collect();
        Self {
            format: "structlearn-dataset".into(),
            version: DATASET_VERSION,
            factor_types: data.factor_types.clone(),
            graphs,
            examples,
        }
    }

    /// [`DatasetFile::into_dataset_within`] the budget of a file of
    /// `file_bytes` bytes, errors naming the file `source`.
    pub(crate) fn into_dataset_from(self, file_bytes: usize, source: &Path) -> Result<Dataset, LearnError> {
        self.into_dataset_within(factor_graph::graph_budget(file_bytes)).map_err(|e| match e {
            LearnError::BadFile { reason, .. } => LearnError::bad_file(source, reason),
            LearnError::Graph(g) => LearnError::bad_file(source, g.to_string()),
            other => LearnError::InFile { path: source.display().to_string(), error: Box::new(other) },
        })
    }

    /// Validates and builds the data set.
    pub fn into_dataset(self) -> Result<Dataset, LearnError> {
        self.into_dataset_within(usize::MAX)
    }

    /// [`DatasetFile::into_dataset`], refusing graphs whose flat arrays
    /// together exceed `graph_budget` entries (see [`factor_graph::graph_budget`]).
    pub fn into_dataset_within(self, graph_budget: usize) -> Result<Dataset, LearnError> {
        let src = Path::new("data set");
        if self.format != "structlearn-dataset" {
            return Err(LearnError::bad_file(
                src,
                format!("format is `{}`, expected `structlearn-dataset`", self.format),
            ));
        }
        if self.version != DATASET_VERSION && self.version != 1 {
            return Err(LearnError::bad_file(
                src,
                format!(
                    "data set format version {} is not supported (this build reads {DATASET_VERSION})",
                    self.version
                ),
            ));
        }
        let mut budget = graph_budget;
        let graphs = self
            .graphs
            .into_iter()
            .map(|s| {
                let g = RegionGraph::from_spec_within(s, budget)?;
                budget -= g.spec().flat_len().unwrap_or(budget);
                Ok(Arc::new(g))
            })
            .collect::<Result<Vec<_>, LearnError>>()?;
        let mut masks = Vec::with_capacity(self.examples.len());
        let examples = self
            .examples
            .into_iter()
            .enumerate()
            .map(|(k, r)| {
                let graph = graphs.get(r.graph).cloned().ok_or_else(|| {
                    LearnError::bad_file(src, format!("example {k} refers to graph {} of {}", r.graph, graphs.len()))
                })?;
                masks.push(r.ignored);
                Ok(Example::new(r.name, graph, r.labels, r.features))
            })
            .collect::<Result<Vec<_>, LearnError>>()?;
        let types = self.factor_types.into_iter().map(|f| FactorTypeInfo { classes: 0, ..f }).collect();
        let mut data = Dataset::new(types, examples)?;
        for (k, mask) in masks.into_iter().enumerate() {
            data.set_ignored(k, mask)?;
        }
        Ok(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three examples on graphs of two shapes, features numbered so that
    /// every value says where it came from (example, type, position).
    fn numbered() -> (Vec<FactorTypeInfo>, Vec<Example>) {
        let shapes = [Arc::new(factor_graph::grid(1, 3, 2).unwrap()), Arc::new(factor_graph::grid(2, 2, 2).unwrap())];
        let examples = (0..3)
            .map(|k| {
                let graph = shapes[k % 2].clone();
                let rows = [graph.num_variables(), graph.num_regions() - graph.num_variables()];
                let features = (0..2)
                    .map(|t| {
                        let values = (0..rows[t] * (t + 1)).map(|i| (100 * k + 10 * t + i) as f64).collect();
                        FeatureBlock { dim: t + 1, values }
                    })
                    .collect();
                Example::new(format!("e{k}"), graph, None, features)
            })
            .collect();
        (vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 2)], examples)
    }

    #[test]
    fn one_array_per_type_holds_every_example_in_order() {
        let (types, examples) = numbered();
        let data = Dataset::new(types.clone(), examples.clone()).unwrap();
        for (k, ex) in examples.iter().enumerate() {
            for t in 0..2 {
                assert_eq!(data.features(k, t), &ex.features[t].values[..], "example {k}, type {t}");
                assert_eq!(data.type_rows(t, k..k + 1), data.regions_of_type(k, t).count());
            }
        }
        let all: Vec<f64> = examples.iter().flat_map(|e| e.features[1].values.clone()).collect();
        assert_eq!(data.type_features(1, 0..3), &all[..]);
        assert_eq!(data.type_features(0, 1..3).len(), data.type_rows(0, 1..3));
        // Whole examples come back as they went in.
        let (_, back) = data.clone().into_parts();
        for (a, b) in back.iter().zip(&examples) {
            assert_eq!((&a.name, &a.features), (&b.name, &b.features));
        }
        // A rank's block keeps its examples' rows only.
        let block = data.into_block(1, 2).unwrap();
        assert_eq!(block.len(), 1);
        assert_eq!(block.feature_blocks(0), examples[2].features);
    }
}
