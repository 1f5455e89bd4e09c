//! Bring your own region graph: sequences with three labels, where a
//! third-order energy over `(y_i, y_{i+1}, y_{i+2})` captures a pattern that
//! pairs cannot. Regions on three levels — triples, the pairs they contain,
//! singletons — built with `RegionGraphBuilder`; one factor type per level,
//! each with its own oracle.
//!
//! Run with `cargo run --release --example region_graph`.

use std::sync::Arc;

use factor_graph::{RegionGraph, RegionGraphBuilder};
use structlearn::oracle_config::builtin_oracle;
use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock, PredictOptions, TrainConfig, Trainer};

const LABELS: usize = 3;

/// A chain of `n` variables: singletons (type `unary`), pairs `{i, i+1}`
/// (type `pair`, parents of their singletons) and triples `{i, i+1, i+2}`
/// (type `triple`, parents of their two pairs).
fn chain(n: usize) -> Result<RegionGraph, factor_graph::GraphError> {
    let mut b = RegionGraphBuilder::new(vec![LABELS; n])?;
    let (unary, pair, triple) = (b.add_factor_type("unary")?, b.add_factor_type("pair")?, b.add_factor_type("triple")?);
    for i in 0..n {
        b.add_region(&[i], unary)?;
    }
    let pairs: Vec<usize> = (0..n - 1)
        .map(|i| {
            let r = b.add_region(&[i, i + 1], pair)?;
            b.add_edge(r, i)?; // singleton region i is region index i
            b.add_edge(r, i + 1)?;
            Ok(r)
        })
        .collect::<Result<_, factor_graph::GraphError>>()?;
    for i in 0..n - 2 {
        let r = b.add_region(&[i, i + 1, i + 2], triple)?;
        b.add_edge(r, pairs[i])?;
        b.add_edge(r, pairs[i + 1])?;
    }
    b.build()
}

/// Sequences that cycle 0 → 1 → 2 → 0, each label held for exactly two
/// steps (so the next label depends on the last two), observed through noise.
fn sequences(count: usize, n: usize, seed: u64, graph: &Arc<RegionGraph>) -> Result<Dataset, structlearn::LearnError> {
    let mut s = seed;
    let mut uniform = move || {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let examples = (0..count)
        .map(|k| {
            let offset = (uniform() * 6.0) as usize;
            let labels: Vec<usize> = (0..n).map(|i| ((i + offset) / 2) % LABELS).collect();
            // Per variable: a noisy one-hot observation of the label, and a constant.
            let unary = labels
                .iter()
                .flat_map(|&y| {
                    let mut row: Vec<f64> =
                        (0..LABELS).map(|c| f64::from(u8::from(c == y)) + 1.6 * uniform()).collect();
                    row.push(1.0);
                    row
                })
                .collect();
            let constant = |rows: usize| FeatureBlock { dim: 1, values: vec![1.0; rows] };
            Example::new(
                format!("seq{k}"),
                graph.clone(),
                Some(labels),
                vec![FeatureBlock { dim: LABELS + 1, values: unary }, constant(n - 1), constant(n - 2)],
            )
        })
        .collect();
    let types = vec![
        FactorTypeInfo::new("unary", LABELS + 1),
        FactorTypeInfo::new("pair", 1),
        FactorTypeInfo::new("triple", 1),
    ];
    Dataset::new(types, examples)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = 30;
    let graph = Arc::new(chain(n)?);
    println!("{} regions on 3 levels over {n} variables", graph.num_regions());
    let train = sequences(20, n, 1, &graph)?;
    let test = sequences(10, n, 2, &graph)?;
    let predict = PredictOptions { iterations: 300, tolerance: Some(1e-5) };
    for with_triples in [false, true] {
        let triple = if with_triples { "linear" } else { "zero" };
        let oracles = vec![
            ("unary".to_string(), builtin_oracle("linear")?),
            ("pair".to_string(), builtin_oracle("linear")?),
            ("triple".to_string(), builtin_oracle(triple)?),
        ];
        let config = TrainConfig { learning_iterations: 10, predict, ..TrainConfig::default() };
        let outcome = Trainer::new(&train, oracles, config)?.train()?;
        let error = outcome.model.error_rate(&test, &predict)?;
        println!("triple energies {triple:>6}: test error {error:.4}");
        if with_triples {
            let p = outcome.model.predict_example(&test, 0, &predict)?;
            let show = |l: &[usize]| l.iter().map(|y| char::from(b'0' + *y as u8)).collect::<String>();
            println!("true      {}", show(test.labels(0)?));
            println!("predicted {}", show(&p.labels));
        }
    }
    Ok(())
}
