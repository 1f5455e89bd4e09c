//! UAI evidence files (both layouts, every typed error with its line), BAYES
//! tables (the row-sum warning), clamping, and the `.MAP` / `.MAR` result
//! formats read back.

use factor_graph::{
    EvidenceError, UaiEvidence, UaiModel, UaiNetwork, UaiWarning, format_map, format_mar, parse_map, parse_mar,
};

const CARDS: [usize; 4] = [2, 3, 2, 4];

#[test]
fn both_layouts_give_the_same_observations() {
    let new = UaiEvidence::parse("2 1 2 3 0\n", &CARDS).unwrap();
    let old = UaiEvidence::parse("1\n2 1 2 3 0\n", &CARDS).unwrap();
    assert_eq!(new.observed, vec![(1, 2), (3, 0)]);
    assert_eq!(old, new);
    // A first number of 1 in the one-line layout: one observation.
    assert_eq!(UaiEvidence::parse("1 3 3", &CARDS).unwrap().observed, vec![(3, 3)]);
    assert_eq!(UaiEvidence::parse("1\n1 3 3", &CARDS).unwrap().observed, vec![(3, 3)]);
    // Nothing observed, in both layouts (and an empty line at the end).
    assert!(UaiEvidence::parse("0\n", &CARDS).unwrap().observed.is_empty());
    assert!(UaiEvidence::parse("1\n0\n\n", &CARDS).unwrap().observed.is_empty());
}

#[test]
fn bad_evidence_is_a_typed_error_naming_line_and_item() {
    let err = |text: &str| UaiEvidence::parse(text, &CARDS).unwrap_err();
    match err("2\n0 1\n1 3\n") {
        EvidenceError::ValueOutOfRange { line: 3, variable: 1, value: 3, cardinality: 3 } => {}
        e => panic!("{e:?}"),
    }
    match err("2\n0 1\n4 0\n") {
        e @ EvidenceError::VariableOutOfRange { line: 3, variable: 4, num_variables: 4 } => {
            assert!(e.to_string().contains("another model"), "{e}")
        }
        e => panic!("{e:?}"),
    }
    match err("3\n0 1\n2 0\n0 0\n") {
        e @ EvidenceError::ObservedTwice { line: 4, variable: 0, first_line: 2 } => {
            assert!(e.to_string().contains("observed twice"), "{e}")
        }
        e => panic!("{e:?}"),
    }
    match err("3 0 1 2 0\n") {
        EvidenceError::Parse { line: 1, found, .. } => assert_eq!(found, "end of file"),
        e => panic!("{e:?}"),
    }
    match err("2 0 x 2 0") {
        EvidenceError::Parse { line: 1, found, expected } => {
            assert_eq!(found, "`x`");
            assert!(expected.contains("value of variable 0"), "{expected}");
        }
        e => panic!("{e:?}"),
    }
    match err("1 0 1\n\n2 0\n") {
        EvidenceError::Trailing { line: 3, observed: 1, found } => assert_eq!(found, "2"),
        e => panic!("{e:?}"),
    }
    match err("-1 0 1") {
        EvidenceError::Parse { line: 1, .. } => {}
        e => panic!("{e:?}"),
    }
    assert!(matches!(err(""), EvidenceError::Parse { .. }));
}

#[test]
fn reading_names_the_file() {
    let dir = tempfile_dir();
    let path = dir.join("m.evid");
    std::fs::write(&path, "1\n0 7\n").unwrap();
    let e = UaiEvidence::read(&path, &CARDS).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}: evidence line 2: variable 0", path.display())), "{e}");
    let e = UaiEvidence::read(&dir.join("missing.evid"), &CARDS).unwrap_err();
    assert!(matches!(e, EvidenceError::Io { .. }));
    std::fs::remove_dir_all(dir).unwrap();
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("fg-evidence-{}-{:?}", std::process::id(), std::thread::current().id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Clamping keeps the score of every labelling that agrees with the evidence
/// and forbids every other.
#[test]
fn clamping_forbids_exactly_the_labellings_that_disagree() {
    let model = UaiModel::parse("MARKOV\n3\n2 3 2\n2\n2 0 1\n2 1 2\n6\n1 2 3 4 5 6\n6\n1 0 2 1 3 1\n").unwrap();
    let plain = model.to_region_graph().unwrap();
    let mut clamped = plain.clone();
    let evidence = UaiEvidence::parse("1 1 2", &model.cardinalities).unwrap();
    evidence.clamp(&mut clamped);
    let score = |m: &factor_graph::UaiRegionModel, y: &[usize]| -> f64 {
        (0..m.graph.num_regions()).map(|r| m.theta[m.graph.config_range(r).start + m.graph.config_of(r, y)]).sum()
    };
    for a in 0..2 {
        for b in 0..3 {
            for c in 0..2 {
                let y = [a, b, c];
                let s = score(&clamped, &y);
                if b == 2 { assert_eq!(s, score(&plain, &y)) } else { assert_eq!(s, f64::NEG_INFINITY) }
            }
        }
    }
}

const BAYES: &str = "BAYES\n2\n2 2\n2\n1 0\n2 0 1\n2\n0.3 0.7\n4\n0.9 0.1 0.2 0.8\n";

#[test]
fn bayes_files_parse_as_tables_and_warn_only_about_rows_not_summing_to_one() {
    let (m, warnings) = UaiModel::parse_with_warnings(BAYES).unwrap();
    assert_eq!(m.network, UaiNetwork::Bayes);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(UaiModel::parse(&m.to_uai_string()).unwrap(), m);
    // Row 1 of factor 1 (parent value 1) sums to 0.9: a warning, not an error.
    let bad = BAYES.replace("0.2 0.8", "0.2 0.7");
    let (m2, warnings) = UaiModel::parse_with_warnings(&bad).unwrap();
    assert_eq!(warnings.len(), 1);
    match &warnings[0] {
        w @ UaiWarning::CptNotNormalized { line: 9, factor: 1, child: 1, rows: 2, bad_rows: 1, first_row: 1, sum } => {
            assert!((sum - 0.9).abs() < 1e-12);
            assert!(w.to_string().contains("factor 1 (child variable 1)"), "{w}");
        }
        w => panic!("{w:?}"),
    }
    assert_eq!(m2.cpt_warnings().len(), 1);
    assert!(m2.to_region_graph().is_ok());
    // Within 1e-6 is fine; a MARKOV file with the same tables is never checked.
    assert!(UaiModel::parse_with_warnings(&BAYES.replace("0.2 0.8", "0.2 0.8000005")).unwrap().1.is_empty());
    assert!(UaiModel::parse_with_warnings(&bad.replace("BAYES", "MARKOV")).unwrap().1.is_empty());
}

/// The child is the last variable of the scope: a table over (child, parent)
/// written with the parent last is not a CPT of the first variable.
#[test]
fn the_child_is_the_last_variable_of_the_scope() {
    // P(x1 | x0) with rows over x1: fine.
    let ok = "BAYES\n2\n2 3\n2\n1 0\n2 0 1\n2\n0.5 0.5\n6\n0.2 0.3 0.5 0.1 0.1 0.8\n";
    assert!(UaiModel::parse_with_warnings(ok).unwrap().1.is_empty());
    // The same numbers read as rows over x0 (scope 1 0) sum to 0.5, 0.8, 0.2, 0.9 ...
    let swapped = ok.replace("2 0 1", "2 1 0");
    let w = UaiModel::parse_with_warnings(&swapped).unwrap().1;
    assert!(matches!(w[..], [UaiWarning::CptNotNormalized { child: 0, rows: 3, bad_rows: 3, .. }]), "{w:?}");
}

#[test]
fn map_and_mar_read_back_what_was_written() {
    let labels = vec![0, 3, 1, 0, 2];
    assert_eq!(parse_map(&format_map(&labels)).unwrap(), labels);
    assert_eq!(parse_map(&format_map(&[])).unwrap(), Vec::<usize>::new());
    let marginals = vec![vec![0.1, 0.9], vec![1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0], vec![1.0], vec![0.0, 1e-300, 1.0]];
    assert_eq!(parse_mar(&format_mar(&marginals)).unwrap(), marginals);
    for bad in ["MAR\n2 1 1.0\n", "MAP\n1 0\n", "MAR\n1 2 0.5 0.5 7\n", "MAR\n1 2 0.5 x\n", ""] {
        assert!(parse_mar(bad).is_err(), "{bad:?}");
    }
    for bad in ["MAP\n2 0\n", "MAP\n1 0 0\n", "MAR\n1 0\n", "MAP\n1 -1\n"] {
        assert!(parse_map(bad).is_err(), "{bad:?}");
    }
}

/// Evidence equals removing the observed variables by hand: a loopy model
/// over x0 ∈ {0,1}, x1 ∈ {0,1,2}, x2 ∈ {0,1}, x3 ∈ {0,1} with pairwise,
/// ternary and unary factors, x1 = 2 and x3 = 0 observed, against the model
/// over (x0, x2) with those values substituted into every factor by hand.
/// Every labelling agreeing with the evidence has the same score (up to the
/// constant of the factors that became constants), every other −∞.
#[test]
fn evidence_equals_the_hand_conditioned_model_by_enumeration() {
    let full = UaiModel::parse(
        "MARKOV\n4\n2 3 2 2\n4\n2 0 1\n3 1 2 3\n1 3\n2 0 2\n\
         6\n1 2 3 4 5 6\n12\n1 0 2 3 1 1 0 4 5 2 2 1\n2\n0.5 2\n4\n3 1 0 2\n",
    )
    .unwrap();
    // x1 = 2, x3 = 0: f0(x0, 2) = [3, 6]; f1(2, x2, 0) = [5, 2]; f2(0) = 0.5 (a constant); f3 unchanged.
    let conditioned =
        UaiModel::parse("MARKOV\n2\n2 2\n4\n1 0\n1 1\n0\n2 0 1\n2\n3 6\n2\n5 2\n1\n0.5\n4\n3 1 0 2\n").unwrap();
    let evidence = UaiEvidence::parse("2 1 2 3 0", &full.cardinalities).unwrap();
    let mut clamped = full.to_region_graph().unwrap();
    evidence.clamp(&mut clamped);
    let small = conditioned.to_region_graph().unwrap();
    let score = |m: &factor_graph::UaiRegionModel, y: &[usize]| -> f64 {
        m.constant
            + (0..m.graph.num_regions())
                .map(|r| m.theta[m.graph.config_range(r).start + m.graph.config_of(r, y)])
                .sum::<f64>()
    };
    let (mut best_full, mut best_small) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
    let mut feasible = 0;
    for k in 0..2 * 3 * 2 * 2 {
        let y = [k % 2, (k / 2) % 3, (k / 6) % 2, k / 12];
        let s = score(&clamped, &y);
        if y[1] == 2 && y[3] == 0 {
            let expected = score(&small, &[y[0], y[2]]);
            assert!(s == expected || (s - expected).abs() < 1e-12, "{y:?}: {s} vs {expected}");
            feasible += usize::from(s.is_finite());
        } else {
            assert_eq!(s, f64::NEG_INFINITY, "{y:?}");
        }
        best_full = best_full.max(s);
    }
    for k in 0..4 {
        best_small = best_small.max(score(&small, &[k % 2, k / 2]));
    }
    assert_eq!(feasible, 3); // f3(1, 0) = 0 forbids one of the four
    assert!((best_full - best_small).abs() < 1e-12);
}

/// A BAYES file's tables are its CPTs: `exp θ(y)` is the joint probability,
/// so it sums to 1 over all labellings (enumeration), and over the labellings
/// that agree with evidence to the evidence's probability.
#[test]
fn a_bayes_network_is_its_joint_distribution() {
    // A → C ← B (a v-structure: one factor over three variables), C → D.
    let text = "BAYES\n4\n2 2 3 2\n4\n1 0\n1 1\n3 0 1 2\n2 2 3\n\
                2\n0.3 0.7\n2\n0.6 0.4\n12\n0.2 0.3 0.5 1 0 0 0.1 0.1 0.8 0.3 0.3 0.4\n6\n0.9 0.1 0.5 0.5 0.2 0.8\n";
    let (model, warnings) = UaiModel::parse_with_warnings(text).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let m = model.to_region_graph().unwrap();
    let mut clamped = m.clone();
    UaiEvidence::parse("1 3 1", &model.cardinalities).unwrap().clamp(&mut clamped);
    let joint = |m: &factor_graph::UaiRegionModel, y: &[usize]| -> f64 {
        (m.constant
            + (0..m.graph.num_regions())
                .map(|r| m.theta[m.graph.config_range(r).start + m.graph.config_of(r, y)])
                .sum::<f64>())
        .exp()
    };
    let (mut total, mut with_evidence, mut p_d1) = (0.0, 0.0, 0.0);
    for k in 0..24 {
        let y = [k % 2, (k / 2) % 2, (k / 4) % 3, k / 12];
        let p = joint(&m, &y);
        // The product of the CPT entries, by hand.
        let pa = [0.3, 0.7][y[0]];
        let pb = [0.6, 0.4][y[1]];
        let pc = [0.2, 0.3, 0.5, 1.0, 0.0, 0.0, 0.1, 0.1, 0.8, 0.3, 0.3, 0.4][(y[0] * 2 + y[1]) * 3 + y[2]];
        let pd = [0.9, 0.1, 0.5, 0.5, 0.2, 0.8][y[2] * 2 + y[3]];
        assert!((p - pa * pb * pc * pd).abs() < 1e-12, "{y:?}");
        total += p;
        with_evidence += joint(&clamped, &y);
        if y[3] == 1 {
            p_d1 += p;
        }
    }
    assert!((total - 1.0).abs() < 1e-12, "{total}");
    assert!((with_evidence - p_d1).abs() < 1e-12 && p_d1 > 0.0);
}

/// The layout is the one whose counts match the file's length: trailing or
/// missing numbers are errors of the one-line layout, never a silently
/// different reading.
#[test]
fn the_layout_follows_the_counts() {
    match UaiEvidence::parse("1 0 1 2", &CARDS).unwrap_err() {
        EvidenceError::Trailing { observed: 1, found, .. } => assert_eq!(found, "2"),
        e => panic!("{e:?}"),
    }
    // Two samples cannot be expressed: read as 2 observations, (1, 1) and
    // (0, 1), and a trailing number.
    assert!(matches!(
        UaiEvidence::parse("2\n1 1 0\n1 1 1\n", &CARDS).unwrap_err(),
        EvidenceError::Trailing { line: 3, observed: 2, .. }
    ));
    assert_eq!(UaiEvidence::parse("1\n1 0 1\n", &CARDS).unwrap().observed, vec![(0, 1)]);
    assert_eq!(UaiEvidence::parse("1 1 0", &CARDS).unwrap().observed, vec![(1, 0)]);
}
