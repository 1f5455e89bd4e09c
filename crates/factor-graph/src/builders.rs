//! Ready-made region graphs: image grids and "factors plus singletons".

use crate::{GraphError, RegionGraph, RegionGraphBuilder};

/// Name of the singleton factor type made by the builders.
pub const UNARY: &str = "unary";
/// Name of the pair factor type made by [`grid`].
pub const PAIRWISE: &str = "pairwise";

/// Layout of a 4-connected `height × width` grid built by [`grid`].
///
/// Regions, in index order:
/// * `0 .. H·W`: the singleton of pixel `(r, c)` is region `r·W + c` (raster order);
/// * then the horizontal pairs `{(r, c), (r, c+1)}` in raster order of their left pixel;
/// * then the vertical pairs `{(r, c), (r+1, c)}` in raster order of their top pixel.
///
/// A pair's variables are (left, right) or (top, bottom), so its configuration
/// is `y_first · L + y_second`. Each pair is the parent of its two singletons.
///
/// ```
/// let layout = factor_graph::GridLayout { height: 2, width: 3 };
/// assert_eq!((layout.num_horizontal(), layout.num_vertical()), (4, 3));
/// assert_eq!(layout.pair_pixels(4), (0, 3)); // the first vertical pair
/// assert_eq!(layout.pair_region(0), 6); // pairs come after the 6 pixel singletons
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GridLayout {
    /// Rows `H`.
    pub height: usize,
    /// Columns `W`.
    pub width: usize,
}

impl GridLayout {
    /// Number of pixels `H·W`.
    pub fn num_pixels(&self) -> usize {
        self.height * self.width
    }

    /// Number of horizontal pairs `H·(W−1)`.
    pub fn num_horizontal(&self) -> usize {
        self.height * self.width.saturating_sub(1)
    }

    /// Number of vertical pairs `(H−1)·W`.
    pub fn num_vertical(&self) -> usize {
        self.height.saturating_sub(1) * self.width
    }

    /// Number of pairs.
    pub fn num_pairs(&self) -> usize {
        self.num_horizontal() + self.num_vertical()
    }

    /// The two pixels (raster indices) of pair `p` (`0 ≤ p < num_pairs`), in the
    /// pair region's variable order.
    pub fn pair_pixels(&self, p: usize) -> (usize, usize) {
        let nh = self.num_horizontal();
        if p < nh {
            let w1 = self.width - 1;
            let (r, c) = (p / w1, p % w1);
            let i = r * self.width + c;
            (i, i + 1)
        } else {
            let i = p - nh;
            (i, i + self.width)
        }
    }

    /// Region index of pair `p`.
    pub fn pair_region(&self, p: usize) -> usize {
        self.num_pixels() + p
    }

    /// The layout of a graph laid out exactly as [`grid`] builds one (pixel
    /// singletons in raster order, then horizontal, then vertical pairs), or
    /// `None`. A single row is reported as `1 × N`. Lets tools draw a labelling
    /// of grid-shaped examples as an image.
    ///
    /// ```
    /// use factor_graph::{GridLayout, grid};
    /// let g = grid(3, 4, 2).unwrap();
    /// assert_eq!(GridLayout::of(&g), Some(GridLayout { height: 3, width: 4 }));
    /// let chain = factor_graph::factors_with_singletons(
    ///     vec![2; 3],
    ///     &[factor_graph::Scope { variables: vec![0, 2], factor_type: "pair".into() }],
    /// ).unwrap();
    /// assert_eq!(GridLayout::of(&chain), None);
    /// ```
    pub fn of(graph: &RegionGraph) -> Option<GridLayout> {
        let n = graph.num_variables();
        (1..=n).filter(|h| n.is_multiple_of(*h)).map(|height| GridLayout { height, width: n / height }).find(|layout| {
            graph.num_regions() == n + layout.num_pairs()
                && (0..n).all(|i| graph.region_variables(i) == [i])
                && (0..layout.num_pairs()).all(|p| {
                    let (i, j) = layout.pair_pixels(p);
                    graph.region_variables(layout.pair_region(p)) == [i, j]
                })
        })
    }
}

/// A 4-connected `height × width` grid with `labels` labels per pixel and two
/// factor types, [`UNARY`] (index 0) and [`PAIRWISE`] (index 1); layout in [`GridLayout`].
///
/// ```
/// let g = factor_graph::grid(2, 3, 2).unwrap();
/// assert_eq!(g.num_regions(), 6 + 4 + 3);
/// assert_eq!(g.region_variables(6), &[0, 1]);   // first horizontal pair
/// assert_eq!(g.region_variables(10), &[0, 3]);  // first vertical pair
/// assert_eq!(g.parent_edges(4).len(), 3);       // pixel (1, 1): left, right, up
/// ```
pub fn grid(height: usize, width: usize, labels: usize) -> Result<RegionGraph, GraphError> {
    if height == 0 || width == 0 || labels == 0 {
        return Err(GraphError::EmptyGrid { height, width, labels });
    }
    let layout = GridLayout { height, width };
    let mut b = RegionGraphBuilder::new(vec![labels; layout.num_pixels()])?;
    let unary = b.add_factor_type(UNARY)?;
    let pairwise = b.add_factor_type(PAIRWISE)?;
    for i in 0..layout.num_pixels() {
        b.add_region(&[i], unary)?;
    }
    for p in 0..layout.num_pairs() {
        let (i, j) = layout.pair_pixels(p);
        let r = b.add_region(&[i, j], pairwise)?;
        b.add_edge(r, i)?;
        b.add_edge(r, j)?;
    }
    b.build()
}

/// A factor for [`factors_with_singletons`]: its scope and factor-type name.
///
/// ```
/// use factor_graph::{Scope, factors_with_singletons};
/// // Three binary variables, a pairwise and a third-order factor.
/// let scopes = [
///     Scope { variables: vec![0, 1], factor_type: "pair".into() },
///     Scope { variables: vec![0, 1, 2], factor_type: "triple".into() },
/// ];
/// let g = factors_with_singletons(vec![2, 2, 2], &scopes).unwrap();
/// assert_eq!(g.num_regions(), 3 + 2);
/// assert_eq!(g.factor_types(), ["unary", "pair", "triple"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// Variables, in configuration-index order.
    pub variables: Vec<usize>,
    /// Factor type name (types are declared in order of first appearance).
    pub factor_type: String,
}

/// One singleton region per variable (type [`UNARY`], regions `0..N`) plus one
/// region per scope (in order, from region `N` on), each the parent of its
/// variables' singletons. Scopes must have at least two variables and be distinct.
///
/// ```
/// use factor_graph::{factors_with_singletons, Scope};
/// let s = |v: &[usize], t: &str| Scope { variables: v.to_vec(), factor_type: t.into() };
/// let g = factors_with_singletons(vec![2, 2, 3], &[s(&[0, 1, 2], "triple"), s(&[1, 2], "pair")]).unwrap();
/// assert_eq!(g.factor_types(), &["unary", "triple", "pair"]);
/// assert_eq!(g.num_configs(3), 12);
/// assert_eq!(g.parent_edges(2).len(), 2);
/// ```
pub fn factors_with_singletons(cardinalities: Vec<usize>, scopes: &[Scope]) -> Result<RegionGraph, GraphError> {
    let n = cardinalities.len();
    let mut b = RegionGraphBuilder::new(cardinalities)?;
    let unary = b.add_factor_type(UNARY)?;
    for i in 0..n {
        b.add_region(&[i], unary)?;
    }
    for scope in scopes {
        let t = match b.factor_type(&scope.factor_type) {
            Some(t) => t,
            None => b.add_factor_type(&scope.factor_type)?,
        };
        let r = b.add_region(&scope.variables, t)?;
        for &v in &scope.variables {
            b.add_edge(r, v)?;
        }
    }
    b.build()
}
