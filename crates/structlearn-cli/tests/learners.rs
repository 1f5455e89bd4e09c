//! `structlearn train --learner …`: every learner trains from the same data
//! file and writes a model file; bad choices are clear errors.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock, StructuredModel};

fn write_data(dir: &Path) {
    let graph = Arc::new(factor_graph::grid(3, 3, 2).unwrap());
    let layout = factor_graph::GridLayout { height: 3, width: 3 };
    let image = |k: usize| {
        let labels: Vec<usize> = (0..9).map(|i| usize::from((i + k).is_multiple_of(3))).collect();
        let unary =
            labels.iter().enumerate().flat_map(|(i, &y)| [y as f64 * 0.6 + (i % 4) as f64 * 0.1, 1.0]).collect();
        let pair = (0..layout.num_pairs()).map(|_| 1.0).collect();
        Example::new(
            format!("img{k}"),
            graph.clone(),
            Some(labels),
            vec![FeatureBlock { dim: 2, values: unary }, FeatureBlock { dim: 1, values: pair }],
        )
    };
    let types = vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 1)];
    Dataset::new(types, vec![image(0), image(1)]).unwrap().save(&dir.join("train.sld")).unwrap();
}

fn train(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["train", "--data", "train.sld", "--model", "m.slm", "--oracle", "unary=linear"];
    args.extend_from_slice(&["--oracle", "pairwise=linear", "--quiet"]);
    args.extend_from_slice(extra);
    Command::new(env!("CARGO_BIN_EXE_structlearn")).current_dir(dir).args(&args).output().unwrap()
}

#[test]
fn every_learner_trains_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path());
    for learner in ["algorithm1", "hazan-urtasun", "piecewise", "perceptron-local"] {
        let _ = std::fs::remove_file(dir.path().join("m.slm"));
        // Piecewise runs one learning iteration; the perceptrons read no ε.
        let iterations = if learner == "piecewise" { "1" } else { "3" };
        let mut args = vec!["--learner", learner, "--iterations", iterations];
        if !learner.starts_with("perceptron") {
            args.extend(["--type-eps", "pairwise=0.05"]);
        }
        let out = train(dir.path(), &args);
        assert!(out.status.success(), "{learner}: {}", String::from_utf8_lossy(&out.stderr));
        let header = StructuredModel::read_header(&dir.path().join("m.slm")).unwrap();
        let eps: Vec<f64> = header.factor_types.iter().map(|t| t.epsilon).collect();
        // The perceptron's energies are unscaled (ε = 1); the smoothed learners keep ε_t.
        let expected = if learner.starts_with("perceptron") { vec![1.0, 1.0] } else { vec![0.1, 0.05] };
        assert_eq!(eps, expected, "{learner}");
    }
}

#[test]
fn bad_learner_choices_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path());
    let err = |out: Output| String::from_utf8_lossy(&out.stderr).into_owned();
    let e = err(train(dir.path(), &["--learner", "nope"]));
    assert!(e.contains("unknown learner `nope`") && e.contains("hazan-urtasun"), "{e}");
    // Exact inference over a 3×3 grid's 512 labelings is fine, but H&U refuses non-linear energies.
    let out = Command::new(env!("CARGO_BIN_EXE_structlearn"))
        .current_dir(dir.path())
        .args(["train", "--data", "train.sld", "--model", "m.slm", "--oracle", "unary=boosting"])
        .args(["--oracle", "pairwise=linear", "--learner", "hazan-urtasun", "--quiet"])
        .output()
        .unwrap();
    let e = err(out);
    assert!(e.contains("linear energies") && e.contains("boosting"), "{e}");
    let e = err(train(dir.path(), &["--type-eps", "pairwise"]));
    assert!(e.contains("TYPE=EPS"), "{e}");
    // A setting the learner would ignore is refused, naming setting and learner.
    let e = err(train(dir.path(), &["--learner", "perceptron-global", "--eps", "0.5"]));
    assert!(e.contains("`epsilon` is not used by the perceptron-global learner"), "{e}");
    let e = err(train(dir.path(), &["--learner", "piecewise", "--iterations", "3"]));
    assert!(e.contains("`learning_iterations` is not used by the piecewise learner"), "{e}");
}
