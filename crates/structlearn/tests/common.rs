//! A tiny seeded denoising problem for the learner's tests (independent of the
//! `datasets` crate, which depends on this one).

use std::sync::Arc;

use factor_graph::{GridLayout, grid};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};

/// `count` binary `h × w` images: labels are blobs (a box-blurred random field
/// thresholded at its median), unary features `[noisy value, 1]`, pair features
/// `[noisy disagreement, 1]`, as in docs/MATH.md §6.1 but smaller.
pub fn denoising(count: usize, h: usize, w: usize, seed: u64) -> Dataset {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let graph = Arc::new(grid(h, w, 2).unwrap());
    let layout = GridLayout { height: h, width: w };
    let examples = (0..count)
        .map(|k| {
            let field: Vec<f64> = (0..h * w).map(|_| rng.random::<f64>()).collect();
            let blurred: Vec<f64> = (0..h * w)
                .map(|i| {
                    let (r, c) = ((i / w) as isize, (i % w) as isize);
                    let mut s = 0.0;
                    let mut n = 0.0;
                    for dr in -2..=2 {
                        for dc in -2..=2 {
                            let (rr, cc) = (r + dr, c + dc);
                            if rr >= 0 && cc >= 0 && (rr as usize) < h && (cc as usize) < w {
                                s += field[rr as usize * w + cc as usize];
                                n += 1.0;
                            }
                        }
                    }
                    s / n
                })
                .collect();
            let mut sorted = blurred.clone();
            sorted.sort_by(f64::total_cmp);
            let median = sorted[sorted.len() / 2];
            let labels: Vec<usize> = blurred.iter().map(|&b| usize::from(b > median)).collect();
            let unary: Vec<f64> = labels
                .iter()
                .flat_map(|&y| [if y == 0 { rng.random::<f64>() * 0.9 } else { 0.1 + rng.random::<f64>() * 0.9 }, 1.0])
                .collect();
            let pairwise: Vec<f64> = (0..layout.num_pairs())
                .flat_map(|p| {
                    let (i, j) = layout.pair_pixels(p);
                    let v = if labels[i] == labels[j] {
                        rng.random::<f64>() * 0.8
                    } else {
                        0.2 + rng.random::<f64>() * 0.8
                    };
                    [v, 1.0]
                })
                .collect();
            Example::new(
                format!("image{k}"),
                graph.clone(),
                Some(labels),
                vec![FeatureBlock { dim: 2, values: unary }, FeatureBlock { dim: 2, values: pairwise }],
            )
        })
        .collect();
    Dataset::new(vec![FactorTypeInfo::new("unary", 2), FactorTypeInfo::new("pairwise", 2)], examples).unwrap()
}
