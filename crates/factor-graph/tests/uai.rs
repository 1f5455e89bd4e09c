//! UAI model format: parsing, errors, conversion and round trips.

use factor_graph::{UaiError, UaiFactor, UaiModel};
use proptest::prelude::*;

const EXAMPLE: &str = "MARKOV
3
2 2 3
4
1 0
2 0 1
2 1 2
2 2 1

2
 0.436 0.564

4
 0.128 0.872
 0.920 0.080

6
 0.210 0.333 0.457
 0.811 0.000 0.189

6
 1 2
 3 4
 5 6
";

#[test]
fn parse_and_convert() {
    let m = UaiModel::parse(EXAMPLE).unwrap();
    assert_eq!(m.cardinalities, vec![2, 2, 3]);
    assert_eq!(m.factors.len(), 4);
    let rm = m.to_region_graph().unwrap();
    let g = &rm.graph;
    // 3 singletons + regions {0,1} and {1,2}; the (2,1) factor merged into {1,2}.
    assert_eq!(g.num_regions(), 5);
    assert_eq!(g.factor_types(), &["unary", "factor"]);
    // Single-variable factor merged into the singleton of variable 0.
    assert_eq!(rm.placements[0].region, Some(0));
    assert!((rm.theta[g.config_range(0)][1] - 0.564f64.ln()).abs() < 1e-15);
    // Singleton without a factor: θ = 0.
    assert_eq!(&rm.theta[g.config_range(2)], &[0.0; 3]);
    // Region {1,2} in file order (1,2): entry (y1=1, y2=1) = 0.0 * table of (2,1) at (y2=1, y1=1) = 4.
    let r12 = rm.placements[2].region.unwrap();
    assert_eq!(rm.placements[3].region, Some(r12));
    let th = &rm.theta[g.config_range(r12)];
    assert_eq!(th[4], f64::NEG_INFINITY);
    // (y1=0, y2=2): 0.457 · (y2=2,y1=0 → index 4 of the (2,1) table = 5).
    assert!((th[2] - (0.457f64.ln() + 5f64.ln())).abs() < 1e-14);
    // The permuted factor's map sends its table index (y2=2, y1=0)=4 to region index 2.
    assert_eq!(rm.placements[3].map[4], 2);
}

#[test]
fn errors_name_line_and_expectation() {
    let cases: &[(&str, &str)] = &[
        ("", "network type"),
        ("FOO\n1\n2\n0\n", "line 1"),
        ("MARKOV\n2\n2 0\n", "cardinality"),
        ("MARKOV\n2\n2 2\n1\n2 0 5\n", "line 5"),
        ("MARKOV\n2\n2 2\n1\n2 0 0\n", "distinct"),
        ("MARKOV\n2\n2 2\n1\n2 0 1\n3\n1 2 3\n", "table size 4"),
        ("MARKOV\n2\n2 2\n1\n2 0 1\n4\n1 2 -3 4\n", "non-negative"),
        ("MARKOV\n2\n2 2\n1\n2 0 1\n4\n1 2 nan 4\n", "line 7"),
        ("MARKOV\n2\n2 2\n1\n2 0 1\n4\n1 2 3\n", "end of file"),
        ("MARKOV\n2\n2 2\n1\n2 0 1\n4\n1 2 3 4 5\n", "expected end of file"),
    ];
    for (text, needle) in cases {
        let err = UaiModel::parse(text).unwrap_err();
        assert!(matches!(err, UaiError::Parse { .. }), "{text:?}: {err}");
        assert!(err.to_string().contains(needle), "{text:?}: `{err}` lacks `{needle}`");
    }
}

#[test]
fn file_io_errors_are_typed() {
    let err = UaiModel::read(std::path::Path::new("/nonexistent/model.uai")).unwrap_err();
    assert!(matches!(err, UaiError::Io { .. }));
}

#[test]
fn region_graph_export_round_trip() {
    let m = UaiModel::parse(EXAMPLE).unwrap();
    let rm = m.to_region_graph().unwrap();
    let exported = UaiModel::from_region_graph(&rm.graph, &rm.theta);
    let rm2 = exported.to_region_graph().unwrap();
    assert_eq!(rm2.graph, rm.graph);
    for (a, b) in rm.theta.iter().zip(&rm2.theta) {
        assert!(a == b || (a - b).abs() < 1e-12, "{a} vs {b}");
    }
}

fn arb_model() -> impl Strategy<Value = UaiModel> {
    (1usize..5).prop_flat_map(|n| {
        let cards = proptest::collection::vec(1usize..4, n);
        cards.prop_flat_map(move |cards| {
            let scope = proptest::sample::subsequence((0..n).collect::<Vec<_>>(), 0..=n.min(3));
            let c2 = cards.clone();
            let factor = scope.prop_flat_map(move |scope| {
                let len: usize = scope.iter().map(|&v| c2[v]).product();
                let values = proptest::collection::vec(prop_oneof![Just(0.0), 0.0f64..10.0], len);
                (Just(scope), values).prop_map(|(scope, table)| UaiFactor { scope, table })
            });
            (Just(cards), proptest::collection::vec(factor, 0..5)).prop_map(|(cardinalities, factors)| UaiModel {
                network: Default::default(),
                cardinalities,
                factors,
            })
        })
    })
}

proptest! {
    #[test]
    fn read_write_read_round_trip(m in arb_model()) {
        let text = m.to_uai_string();
        let back = UaiModel::parse(&text).unwrap();
        prop_assert_eq!(&back, &m);
        prop_assert_eq!(UaiModel::parse(&back.to_uai_string()).unwrap(), m);
    }
}

/// A factor over 20 000 variables: parsing (the repeated-variable check) and
/// conversion (the table-to-region map) used to be O(k²) in the scope size.
#[test]
fn a_factor_over_20000_variables_loads() {
    let k = 20_000;
    let mut cards = vec!["1"; k];
    cards[3] = "2";
    cards[k - 2] = "3";
    let scope: Vec<String> = (0..k).rev().map(|v| v.to_string()).collect();
    let text = format!("MARKOV\n{k}\n{}\n1\n{k} {}\n6\n1 2 3 4 5 6\n", cards.join(" "), scope.join(" "));
    let m = UaiModel::parse(&text).unwrap();
    assert_eq!(m.factors[0].scope.len(), k);
    let rm = m.to_region_graph().unwrap();
    let g = &rm.graph;
    assert_eq!((g.num_regions(), g.num_edges()), (k + 1, k));
    let r = rm.placements[0].region.unwrap();
    assert_eq!(g.region_variables(r).len(), k);
    // Scope order (k−1, …, 0) is the region's order, so the table maps as is.
    assert_eq!(rm.placements[0].map, (0..6).collect::<Vec<_>>());
    let expect: Vec<f64> = (1..=6).map(|v| f64::from(v).ln()).collect();
    assert_eq!(&rm.theta[g.config_range(r)], expect.as_slice());
    // A repeated variable far into the scope is still refused.
    let repeated = format!("MARKOV\n{k}\n{}\n1\n3 5 {} 5\n1\n1\n", cards.join(" "), k - 1);
    assert!(UaiModel::parse(&repeated).unwrap_err().to_string().contains("distinct"));
}

/// A factor whose scope is a permutation of an earlier factor's, with fixed
/// (cardinality 1) variables in between, adds into the same region with its
/// entries in the right places.
#[test]
fn permuted_scopes_with_fixed_variables_map_correctly() {
    let text = "MARKOV\n4\n2 1 3 1\n2\n4 0 1 2 3\n4 3 2 1 0\n6\n1 1 1 1 1 1\n6\n1 2 3 4 5 6\n";
    let rm = UaiModel::parse(text).unwrap().to_region_graph().unwrap();
    let r = rm.placements[0].region.unwrap();
    assert_eq!(rm.placements[1].region, Some(r));
    // Table of factor 1 over (y2, y0) (fixed variables at 0): index y2·2 + y0;
    // region order (y0, y2): index y0·3 + y2.
    assert_eq!(rm.placements[1].map, vec![0, 3, 1, 4, 2, 5]);
    let th = &rm.theta[rm.graph.config_range(r)];
    for (y0, y2) in [(0, 0), (1, 0), (0, 2), (1, 2)] {
        let table = (y2 * 2 + y0 + 1) as f64;
        assert!((th[y0 * 3 + y2] - table.ln()).abs() < 1e-15);
    }
}

/// Errors of a UAI file read from disk name the file; a too-large table says
/// its size, the limit and the line; a too-large cardinality names the variable.
#[test]
fn file_errors_name_the_file_size_and_limit() {
    let path = std::env::temp_dir().join(format!("factor-graph-badtok-{}.uai", std::process::id()));
    std::fs::write(&path, "MARKOV\n2\n2 x\n").unwrap();
    let err = UaiModel::read(&path).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("{}: UAI line 3: expected cardinality (>= 1) of variable 1", path.display())),
        "{text}"
    );
    let UaiError::InFile { source, .. } = err else { panic!("not in a file: {text}") };
    assert!(matches!(*source, UaiError::Parse { line: 3, .. }));
    // Already named: unchanged.
    let io = UaiModel::read(std::path::Path::new("/nonexistent/m.uai")).unwrap_err();
    assert!(matches!(io.in_file(std::path::Path::new("x")), UaiError::Io { .. }));

    let err = UaiModel::parse("MARKOV\n1\n1000000000000\n1\n1 0\n1000000000000\n1\n").unwrap_err();
    assert!(
        matches!(err, UaiError::TableTooLarge { line: 5, factor: 0, entries: Some(1_000_000_000_000), .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("1000000000000 entries") && text.contains("268435456") && text.contains("line 5"), "{text}");
    let huge = "MARKOV\n3\n4294967296 4294967296 4294967296\n1\n3 0 1 2\n1\n1\n";
    let err = UaiModel::parse(huge).unwrap_err().to_string();
    assert!(err.contains("79228162514264337593543950336 entries") && err.contains("its 3 variables"), "{err}");

    let err = UaiModel::parse("MARKOV\n2\n2 300000000\n0\n").unwrap().to_region_graph().unwrap_err().to_string();
    assert!(err.contains("variable 1 has cardinality 300000000"), "{err}");
}

fn feasibility(text: &str) -> Result<(), UaiError> {
    let model = UaiModel::parse(text).unwrap();
    model.to_region_graph().unwrap().check_feasible(&model)
}

/// Zero entries that rule out every labelling are refused naming the file's
/// factors (and their variables), not internal region indices.
#[test]
fn infeasible_models_name_their_factors() {
    use factor_graph::InfeasibleCause;
    // One factor that is all zeros (the singleton region of variable 0).
    let err = feasibility("MARKOV\n2\n2 2\n1\n1 0\n2\n0 0\n").unwrap_err();
    assert!(
        matches!(&err, UaiError::Infeasible { factors, cause: InfeasibleCause::AllZero } if factors == &[(0, vec![0])])
    );
    assert!(err.to_string().starts_with("factor 0 (variable 0) is 0 in every entry of its table"), "{err}");
    // Two factors over the same variables (in two orders) with disjoint support.
    let err = feasibility("MARKOV\n2\n2 2\n2\n2 0 1\n2 1 0\n4\n1 0 0 0\n4\n0 0 0 1\n").unwrap_err();
    assert!(
        err.to_string().starts_with("factors 0 (variables 0, 1) and 1 (variables 1, 0) are over the same variables"),
        "{err}"
    );
    assert!(!err.to_string().contains("region"), "{err}");
    // Two one-variable factors on one variable, plus an innocent one.
    let err = feasibility("MARKOV\n2\n2 2\n3\n1 1\n1 0\n1 1\n2\n1 0\n2\n1 1\n2\n0 1\n").unwrap_err();
    assert!(matches!(&err, UaiError::Infeasible { factors, .. } if factors == &[(0, vec![1]), (2, vec![1])]), "{err}");
    // Jointly impossible through a shared variable: f(0,1) only (0,0), f(1,2) only (1,1).
    let err = feasibility("MARKOV\n3\n2 2 2\n2\n2 0 1\n2 1 2\n4\n1 0 0 0\n4\n0 0 0 1\n").unwrap_err();
    assert!(
        matches!(&err, UaiError::Infeasible { cause: InfeasibleCause::Propagation { variables }, factors }
            if variables == &[1] && factors == &[(0, vec![0, 1]), (1, vec![1, 2])]),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("every label of variable 1") && text.contains("probability 0"), "{text}");
    // A longer chain: y0 = 0 forced, each pair copies its label, the last pair wants 1.
    let chain = "MARKOV\n4\n2 2 2 2\n4\n1 0\n2 0 1\n2 1 2\n2 2 3\n2\n1 0\n4\n1 0 0 1\n4\n1 0 0 1\n4\n0 0 0 1\n";
    assert!(matches!(feasibility(chain), Err(UaiError::Infeasible { cause: InfeasibleCause::Propagation { .. }, .. })));
}

/// Models whose zeros leave some labelling possible are accepted, however
/// many configurations they forbid.
#[test]
fn feasible_models_with_hard_zeros_pass_the_check() {
    for text in [
        EXAMPLE,
        // The chain above with the last pair allowing (0, 0) too.
        "MARKOV\n4\n2 2 2 2\n4\n1 0\n2 0 1\n2 1 2\n2 2 3\n2\n1 0\n4\n1 0 0 1\n4\n1 0 0 1\n4\n1 0 0 1\n",
        // A frustrated cycle of "differ" constraints: no integral labelling,
        // but the local polytope is not empty (propagation is not complete).
        "MARKOV\n3\n2 2 2\n3\n2 0 1\n2 1 2\n2 0 2\n4\n0 1 1 0\n4\n0 1 1 0\n4\n0 1 1 0\n",
        // Only one configuration of a three-variable factor.
        "MARKOV\n3\n2 3 2\n1\n3 2 1 0\n12\n0 0 0 0 0 0 0 0 0 7 0 0\n",
    ] {
        feasibility(text).unwrap();
    }
}
