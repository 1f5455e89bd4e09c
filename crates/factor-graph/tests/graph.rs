//! Region-graph construction, indexing and validation.

use factor_graph::{GraphError, RegionGraph, RegionGraphBuilder, Scope, factors_with_singletons, grid};
use proptest::prelude::*;

/// Labels of `vars` for configuration `idx`, by the documented convention (last fastest).
fn decode(idx: usize, vars: &[usize], cards: &[usize]) -> Vec<usize> {
    let mut out = vec![0; vars.len()];
    let mut rest = idx;
    for i in (0..vars.len()).rev() {
        out[i] = rest % cards[vars[i]];
        rest /= cards[vars[i]];
    }
    out
}

fn encode(labels: &[usize], vars: &[usize], cards: &[usize]) -> usize {
    labels.iter().zip(vars).fold(0, |acc, (&y, &v)| acc * cards[v] + y)
}

/// Every edge map agrees with decoding the parent configuration and re-encoding
/// the child's variables, independently of the precomputation.
fn assert_edge_maps(g: &RegionGraph) {
    for e in 0..g.num_edges() {
        let (p, c) = (g.edge_parent(e), g.edge_child(e));
        let pv = g.region_variables(p);
        let cv = g.region_variables(c);
        let map = g.edge_map(e);
        assert_eq!(map.len(), g.num_configs(p));
        for (pc, &mapped) in map.iter().enumerate() {
            let labels = decode(pc, pv, g.cardinalities());
            let child_labels: Vec<usize> = cv.iter().map(|v| labels[pv.iter().position(|w| w == v).unwrap()]).collect();
            assert_eq!(mapped as usize, encode(&child_labels, cv, g.cardinalities()), "edge {e} config {pc}");
        }
        assert_eq!(g.message_range(e).len(), g.num_configs(c));
        assert!(g.parent_edges(c).contains(&e));
        assert!(g.child_edges(p).contains(&e));
    }
}

#[test]
fn grid_layout_and_maps() {
    let g = grid(3, 4, 3).unwrap();
    assert_eq!(g.num_regions(), 12 + 3 * 3 + 2 * 4);
    assert_eq!(g.num_edges(), 2 * (9 + 8));
    assert_eq!(g.factor_types(), &["unary", "pairwise"]);
    assert_eq!(g.regions_of_type(0), (0..12).collect::<Vec<_>>().as_slice());
    // Interior pixel (1,1) = 5 has four parents; corner 0 has two.
    assert_eq!(g.parent_edges(5).len(), 4);
    assert_eq!(g.parent_edges(0).len(), 2);
    assert_eq!(g.default_update_order(), (0..12).collect::<Vec<_>>());
    assert_eq!(g.total_configs(), 12 * 3 + 17 * 9);
    assert_edge_maps(&g);
    // Pair {0,1}: config y0*3 + y1.
    let y = [2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(g.config_of(12, &y), 7);
    let mut out = [0; 2];
    g.decode_config(12, 7, &mut out);
    assert_eq!(out, [2, 1]);
}

#[test]
fn single_row_and_column_grids() {
    let g = grid(1, 5, 2).unwrap();
    assert_eq!(g.num_regions(), 5 + 4);
    let g = grid(5, 1, 2).unwrap();
    assert_eq!(g.num_regions(), 5 + 4);
    assert_eq!(g.region_variables(5), &[0, 1]);
    assert!(matches!(grid(0, 3, 2), Err(GraphError::EmptyGrid { .. })));
}

#[test]
fn multi_level_graph_with_permuted_variables() {
    let mut b = RegionGraphBuilder::new(vec![2, 3, 4]).unwrap();
    let t = b.add_factor_type("any").unwrap();
    let triple = b.add_region(&[2, 0, 1], t).unwrap();
    let pair = b.add_region(&[1, 2], t).unwrap();
    let s0 = b.add_region(&[0], t).unwrap();
    let s1 = b.add_region(&[1], t).unwrap();
    b.add_edge(triple, pair).unwrap();
    b.add_edge(triple, s0).unwrap();
    b.add_edge(pair, s1).unwrap();
    let g = b.build().unwrap();
    assert_edge_maps(&g);
    assert_eq!(g.default_update_order(), vec![pair, s0, s1]);
    assert_eq!(g.singleton(2), None);
    assert_eq!(g.singleton(1), Some(s1));
}

#[test]
fn validation_errors() {
    assert!(matches!(RegionGraphBuilder::new(vec![2, 0]), Err(GraphError::ZeroCardinality { variable: 1 })));
    let mut b = RegionGraphBuilder::new(vec![2, 2, 2]).unwrap();
    let t = b.add_factor_type("t").unwrap();
    assert!(matches!(b.add_factor_type("t"), Err(GraphError::DuplicateFactorType(_))));
    assert!(matches!(b.add_region(&[], t), Err(GraphError::EmptyRegion { .. })));
    assert!(matches!(b.add_region(&[3], t), Err(GraphError::UnknownVariable { variable: 3, .. })));
    assert!(matches!(b.add_region(&[1, 1], t), Err(GraphError::RepeatedVariable { variable: 1, .. })));
    assert!(matches!(b.add_region(&[0], 7), Err(GraphError::UnknownFactorType { .. })));
    let p = b.add_region(&[0, 1], t).unwrap();
    assert!(matches!(b.add_region(&[1, 0], t), Err(GraphError::DuplicateRegion { first: 0, .. })));
    let s2 = b.add_region(&[2], t).unwrap();
    let s0 = b.add_region(&[0], t).unwrap();
    assert!(matches!(b.add_edge(p, s2), Err(GraphError::NotSubset { .. })));
    assert!(matches!(b.add_edge(s0, p), Err(GraphError::NotSubset { .. })));
    assert!(matches!(b.add_edge(p, 9), Err(GraphError::UnknownRegion { region: 9, .. })));
    b.add_edge(p, s0).unwrap();
    assert!(matches!(b.add_edge(p, s0), Err(GraphError::DuplicateEdge { .. })));
    let msg = GraphError::NotSubset { parent: 0, child: 1, parent_vars: vec![0, 1], child_vars: vec![2] }.to_string();
    assert!(msg.contains("0 -> 1"), "{msg}");
    let g = b.build().unwrap();
    assert!(g.validate_order(&[s0]).is_ok());
    assert!(matches!(g.validate_order(&[p]), Err(GraphError::InvalidOrder(_))));
    assert!(matches!(g.validate_order(&[42]), Err(GraphError::InvalidOrder(_))));
}

#[test]
fn too_many_configurations_is_an_error() {
    let mut b = RegionGraphBuilder::new(vec![1 << 15; 3]).unwrap();
    let t = b.add_factor_type("t").unwrap();
    assert!(matches!(b.add_region(&[0, 1, 2], t), Err(GraphError::TooManyConfigurations { .. })));
}

#[test]
fn serde_round_trip_revalidates() {
    let s = |v: &[usize], t: &str| Scope { variables: v.to_vec(), factor_type: t.into() };
    let g = factors_with_singletons(vec![2, 3, 2], &[s(&[0, 1, 2], "triple"), s(&[2, 0], "pair")]).unwrap();
    let json = serde_json::to_string(&g).unwrap();
    let back: RegionGraph = serde_json::from_str(&json).unwrap();
    assert_eq!(back, g);
    let bytes = postcard::to_stdvec(&g).unwrap();
    let back: RegionGraph = postcard::from_bytes(&bytes).unwrap();
    assert_eq!(back, g);
    // A spec with an invalid edge is rejected on load, not trusted.
    let bad = json.replace("\"edges\":[[3,0]", "\"edges\":[[0,3]");
    assert_ne!(bad, json);
    assert!(serde_json::from_str::<RegionGraph>(&bad).is_err());
}

fn arb_graph() -> impl Strategy<Value = (Vec<usize>, Vec<Vec<usize>>)> {
    (2usize..6).prop_flat_map(|n| {
        let cards = proptest::collection::vec(1usize..4, n);
        let scopes =
            proptest::collection::vec(proptest::sample::subsequence((0..n).collect::<Vec<_>>(), 2..=n.min(4)), 0..5);
        (cards, scopes)
    })
}

proptest! {
    #[test]
    fn random_graphs_have_consistent_maps((cards, scopes) in arb_graph(), shuffle in any::<u64>()) {
        let mut seen = std::collections::HashSet::new();
        let scopes: Vec<Scope> = scopes
            .into_iter()
            .filter(|s| seen.insert(s.clone()))
            .enumerate()
            .map(|(i, mut v)| {
                // Permute the scope so regions do not always list variables in sorted order.
                let k = (shuffle as usize + i) % v.len();
                v.rotate_left(k);
                Scope { variables: v, factor_type: format!("t{}", i % 2) }
            })
            .collect();
        let g = factors_with_singletons(cards.clone(), &scopes).unwrap();
        assert_edge_maps(&g);
        let total: usize = (0..g.num_regions()).map(|r| g.num_configs(r)).sum();
        prop_assert_eq!(total, g.total_configs());
        for r in 0..g.num_regions() {
            for c in 0..g.num_configs(r) {
                let mut labels = vec![0; g.region_variables(r).len()];
                g.decode_config(r, c, &mut labels);
                let mut y = vec![0; cards.len()];
                for (&v, &l) in g.region_variables(r).iter().zip(&labels) {
                    y[v] = l;
                }
                prop_assert_eq!(g.config_of(r, &y), c);
            }
        }
    }
}

/// One region over 20 000 variables with a singleton child per variable: the
/// builder, the spec path and the edge maps used to be O(k²) in the width k
/// (a subset scan of the parent per edge, the parent's cardinalities and
/// strides recomputed per edge); now they are linear and this is instant.
#[test]
fn a_region_of_20000_variables_loads() {
    let k = 20_000;
    // Cardinality 1 everywhere except three variables, so the region has 12
    // configurations and the maps must skip the fixed variables correctly.
    let mut cards = vec![1; k];
    cards[7] = 2;
    cards[k / 2] = 3;
    cards[k - 1] = 2;
    let scopes = [Scope { variables: (0..k).rev().collect(), factor_type: "wide".into() }];
    let g = factors_with_singletons(cards.clone(), &scopes).unwrap();
    assert_eq!((g.num_regions(), g.num_edges()), (k + 1, k));
    assert_eq!(g.num_configs(k), 12);
    assert_eq!(g.spec().flat_len(), Some(k + 4 + 12 + k * 12 + (k + 4)));
    // Every edge map sends a configuration of the region to its child's label
    // (decoded once per configuration: `assert_edge_maps` is O(k²) here).
    let region_vars = g.region_variables(k);
    let labels: Vec<Vec<usize>> = (0..12).map(|pc| decode(pc, region_vars, &cards)).collect();
    for e in 0..k {
        let v = g.region_variables(g.edge_child(e))[0];
        // Edges follow the scope order (k−1, …, 0): edge e goes to variable
        // k−1−e, at position e of the region.
        assert_eq!((g.edge_parent(e), v), (k, k - 1 - e));
        let pos = e;
        let expect: Vec<u32> = labels.iter().map(|l| l[pos] as u32).collect();
        assert_eq!(g.edge_map(e), expect.as_slice(), "edge {e}");
        assert_eq!(g.parent_edges(v), &[e]);
    }
    assert_eq!(g.child_edges(k).len(), k);
    // The same graph through the validating spec path (as data set files load it).
    let again = RegionGraph::from_spec_within(g.spec().clone(), factor_graph::graph_budget(0)).unwrap();
    assert_eq!(again, g);
    // A child that is not a subset is still refused, naming both regions.
    let mut b = RegionGraphBuilder::new(vec![1; k + 1]).unwrap();
    let t = b.add_factor_type("t").unwrap();
    let wide = b.add_region(&(0..k).collect::<Vec<_>>(), t).unwrap();
    let outside = b.add_region(&[k], t).unwrap();
    assert!(matches!(b.add_edge(wide, outside), Err(GraphError::NotSubset { parent: 0, child: 1, .. })));
}

/// Edge maps of regions mixing fixed (cardinality 1) and free variables, in
/// several orders and with multi-variable children, agree with decoding and
/// re-encoding (the maps skip the fixed variables).
#[test]
fn edge_maps_skip_cardinality_one_variables() {
    let cards = vec![2, 1, 3, 1, 1, 2, 1];
    let mut b = RegionGraphBuilder::new(cards).unwrap();
    let t = b.add_factor_type("t").unwrap();
    let singletons: Vec<usize> = (0..7).map(|v| b.add_region(&[v], t).unwrap()).collect();
    let all = b.add_region(&[6, 0, 4, 2, 1, 5, 3], t).unwrap();
    let mid = b.add_region(&[1, 5, 2, 0], t).unwrap();
    let fixed = b.add_region(&[4, 1], t).unwrap();
    for c in [mid, fixed, singletons[2], singletons[1]] {
        b.add_edge(all, c).unwrap();
    }
    for v in [0, 1, 2, 5] {
        b.add_edge(mid, singletons[v]).unwrap();
    }
    b.add_edge(fixed, singletons[4]).unwrap();
    let g = b.build().unwrap();
    assert_eq!(g.num_configs(all), 12);
    assert_edge_maps(&g);
}

/// Zero propagation stops at its work limit with `Undecided`, and without any
/// `−∞` answers at once.
#[test]
fn zero_propagation_respects_its_work_limit() {
    use factor_graph::graph::ZeroPropagation;
    // A chain 0 - 1 - … - 9 of "equal" pairs, variable 0 forced to 0 and variable 9 to 1.
    let scopes: Vec<Scope> = (0..9).map(|i| Scope { variables: vec![i, i + 1], factor_type: "pair".into() }).collect();
    let g = factors_with_singletons(vec![2; 10], &scopes).unwrap();
    let mut theta = vec![0.0; g.total_configs()];
    for p in 10..19 {
        let r = g.config_range(p);
        theta[r.start + 1] = f64::NEG_INFINITY;
        theta[r.start + 2] = f64::NEG_INFINITY;
    }
    theta[g.config_range(0).start + 1] = f64::NEG_INFINITY;
    theta[g.config_range(9).start] = f64::NEG_INFINITY;
    assert!(matches!(g.propagate_zeros(&theta, usize::MAX), ZeroPropagation::Empty { .. }));
    assert_eq!(g.propagate_zeros(&theta, 20), ZeroPropagation::Undecided);
    theta[g.config_range(9).start] = 0.0;
    assert_eq!(g.propagate_zeros(&theta, usize::MAX), ZeroPropagation::Consistent);
    assert_eq!(g.propagate_zeros(&vec![0.0; g.total_configs()], 0), ZeroPropagation::Consistent);
}
