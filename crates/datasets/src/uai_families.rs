//! Seeded UAI models for measuring MAP decoding (`structlearn infer`) on
//! what makes it hard: hard constraints (zero table entries) and frustration.
//!
//! * [`pedigree`]: genetic-linkage-like pedigrees: each individual's paternal
//!   and maternal allele, a selector per inherited allele, deterministic
//!   inheritance tables (the child's allele *is* the selected parental allele:
//!   0/1 entries), allele frequencies for the founders and genotype
//!   observations (error-free, so zero entries too, for about half the
//!   individuals) drawn from a planted inheritance;
//! * [`csp`]: weighted CSPs: random scopes of a given arity, each table entry
//!   0 with a given probability except at the planted labelling's
//!   configuration, the others `exp(N(0, 1))`;
//! * [`frustrated_grid`]: Ising/Potts grids with couplings of random sign
//!   (frustrated cycles), no zeros.
//!
//! Every model with zeros has a planted labelling of positive probability,
//! returned with it.
//!
//! ```
//! let (model, planted) = datasets::uai_families::csp(&datasets::uai_families::CspConfig::default(), 7);
//! let m = model.to_region_graph().unwrap();
//! let score: f64 = (0..m.graph.num_regions())
//!     .map(|r| m.theta[m.graph.config_range(r).start + m.graph.config_of(r, &planted)])
//!     .sum();
//! assert!(score.is_finite());
//! ```

use factor_graph::{UaiFactor, UaiModel, UaiNetwork};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let v: f64 = rng.random::<f64>();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// Settings of [`csp`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CspConfig {
    /// Variables.
    pub variables: usize,
    /// Labels per variable.
    pub labels: usize,
    /// Constraints (factors).
    pub constraints: usize,
    /// Variables per constraint (2: pairwise).
    pub arity: usize,
    /// Probability that a table entry (other than the planted one) is 0.
    pub zero_probability: f64,
}

impl Default for CspConfig {
    fn default() -> Self {
        Self { variables: 40, labels: 3, constraints: 100, arity: 2, zero_probability: 0.2 }
    }
}

/// A random weighted CSP with a planted feasible labelling (module docs);
/// returns the model and the planted labelling. Every variable also has a
/// unary factor `exp(N(0, 1))`.
pub fn csp(cfg: &CspConfig, seed: u64) -> (UaiModel, Vec<usize>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (n, d) = (cfg.variables.max(1), cfg.labels.max(1));
    let arity = cfg.arity.clamp(1, n);
    let planted: Vec<usize> = (0..n).map(|_| rng.random_range(0..d)).collect();
    let mut factors: Vec<UaiFactor> =
        (0..n).map(|v| UaiFactor { scope: vec![v], table: (0..d).map(|_| normal(&mut rng).exp()).collect() }).collect();
    for _ in 0..cfg.constraints {
        let mut scope: Vec<usize> = Vec::with_capacity(arity);
        while scope.len() < arity {
            let v = rng.random_range(0..n);
            if !scope.contains(&v) {
                scope.push(v);
            }
        }
        let planted_index = scope.iter().fold(0, |acc, &v| acc * d + planted[v]);
        let table = (0..d.pow(arity as u32))
            .map(|k| {
                if k != planted_index && rng.random::<f64>() < cfg.zero_probability {
                    0.0
                } else {
                    normal(&mut rng).exp()
                }
            })
            .collect();
        factors.push(UaiFactor { scope, table });
    }
    (UaiModel { network: UaiNetwork::Markov, cardinalities: vec![d; n], factors }, planted)
}

/// Settings of [`pedigree`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PedigreeConfig {
    /// Individuals without parents in the pedigree.
    pub founders: usize,
    /// Individuals with two parents (each a random earlier male and female).
    pub children: usize,
    /// Alleles of the marker.
    pub alleles: usize,
    /// Probability that an individual's genotype is observed (error-free).
    pub typed: f64,
}

impl Default for PedigreeConfig {
    fn default() -> Self {
        Self { founders: 8, children: 24, alleles: 4, typed: 0.5 }
    }
}

/// A pedigree as a MARKOV network (module docs). Variables: for individual
/// `i`, `2i` its paternal and `2i + 1` its maternal allele (`alleles` labels);
/// then per child two binary selectors (which of the father's, the mother's
/// alleles it inherited). Returns the model and the planted labelling.
pub fn pedigree(cfg: &PedigreeConfig, seed: u64) -> (UaiModel, Vec<usize>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let founders = cfg.founders.max(2);
    let people = founders + cfg.children;
    let k = cfg.alleles.max(2);
    let mut cards = vec![k; 2 * people];
    cards.extend(std::iter::repeat_n(2, 2 * cfg.children));
    let mut planted = vec![0usize; cards.len()];
    let freq: Vec<f64> = (0..k).map(|_| 0.2 + rng.random::<f64>()).collect();
    let total: f64 = freq.iter().sum();
    let freq: Vec<f64> = freq.iter().map(|f| f / total).collect();
    let mut factors = Vec::new();
    // Founders: allele frequencies; the planted alleles drawn from them.
    for i in 0..founders {
        for a in [2 * i, 2 * i + 1] {
            factors.push(UaiFactor { scope: vec![a], table: freq.clone() });
            let mut u = rng.random::<f64>();
            planted[a] = freq
                .iter()
                .position(|&f| {
                    u -= f;
                    u < 0.0
                })
                .unwrap_or(k - 1);
        }
    }
    // Odd individuals are male, even female: a child's father is an odd
    // earlier individual, its mother an even one.
    for c in 0..cfg.children {
        let i = founders + c;
        let pick = |rng: &mut ChaCha8Rng, parity: usize| loop {
            let p = rng.random_range(0..i);
            if p % 2 == parity {
                break p;
            }
        };
        let (father, mother) = (pick(&mut rng, 1), pick(&mut rng, 0));
        for (side, parent) in [(0, father), (1, mother)] {
            let selector = 2 * people + 2 * c + side;
            let child_allele = 2 * i + side;
            let s = rng.random_range(0..2);
            planted[selector] = s;
            planted[child_allele] = planted[2 * parent + s];
            // The selector is fair; the inheritance table is deterministic.
            factors.push(UaiFactor { scope: vec![selector], table: vec![0.5, 0.5] });
            let mut table = Vec::with_capacity(k * k * 2 * k);
            for pat in 0..k {
                for mat in 0..k {
                    for sel in 0..2 {
                        let inherited = if sel == 0 { pat } else { mat };
                        table.extend((0..k).map(|a| if a == inherited { 1.0 } else { 0.0 }));
                    }
                }
            }
            factors.push(UaiFactor { scope: vec![2 * parent, 2 * parent + 1, selector, child_allele], table });
        }
    }
    // Error-free genotype observations: the unordered pair of alleles.
    for i in 0..people {
        if rng.random::<f64>() < cfg.typed {
            let (a, b) = (planted[2 * i], planted[2 * i + 1]);
            let table = (0..k * k)
                .map(|t| {
                    let (x, y) = (t / k, t % k);
                    if (x == a && y == b) || (x == b && y == a) { 1.0 } else { 0.0 }
                })
                .collect();
            factors.push(UaiFactor { scope: vec![2 * i, 2 * i + 1], table });
        }
    }
    (UaiModel { network: UaiNetwork::Markov, cardinalities: cards, factors }, planted)
}

/// Settings of [`frustrated_grid`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GridConfig {
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// Labels (2: Ising).
    pub labels: usize,
    /// Standard deviation of the couplings (the unaries' is 1).
    pub coupling: f64,
}

impl Default for GridConfig {
    fn default() -> Self {
        Self { height: 10, width: 10, labels: 2, coupling: 2.0 }
    }
}

/// A grid with unaries `exp(N(0, 1))` and Potts couplings `w ~ N(0, coupling²)`
/// (agreement scores `w`, so negative `w` is repulsive and cycles are frustrated).
pub fn frustrated_grid(cfg: &GridConfig, seed: u64) -> UaiModel {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (h, w, d) = (cfg.height.max(1), cfg.width.max(1), cfg.labels.max(2));
    let id = |r: usize, c: usize| r * w + c;
    let mut factors: Vec<UaiFactor> = (0..h * w)
        .map(|v| UaiFactor { scope: vec![v], table: (0..d).map(|_| normal(&mut rng).exp()).collect() })
        .collect();
    for r in 0..h {
        for c in 0..w {
            for (rr, cc) in [(r, c + 1), (r + 1, c)] {
                if rr < h && cc < w {
                    let wgt = cfg.coupling * normal(&mut rng);
                    let table = (0..d * d).map(|t| if t / d == t % d { wgt.exp() } else { 1.0 }).collect();
                    factors.push(UaiFactor { scope: vec![id(r, c), id(rr, cc)], table });
                }
            }
        }
    }
    UaiModel { network: UaiNetwork::Markov, cardinalities: vec![d; h * w], factors }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(model: &UaiModel, y: &[usize]) -> f64 {
        let m = model.to_region_graph().unwrap();
        (0..m.graph.num_regions()).map(|r| m.theta[m.graph.config_range(r).start + m.graph.config_of(r, y)]).sum()
    }

    #[test]
    fn planted_labellings_are_feasible_and_zeros_are_present() {
        for seed in 0..5 {
            let (p, y) = pedigree(&PedigreeConfig::default(), seed);
            assert!(score(&p, &y).is_finite());
            assert!(p.factors.iter().any(|f| f.table.contains(&0.0)));
            for arity in [2, 3] {
                let (c, y) = csp(&CspConfig { arity, ..Default::default() }, seed);
                assert!(score(&c, &y).is_finite());
                assert!(c.factors.iter().any(|f| f.table.contains(&0.0)));
            }
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_model() {
        assert_eq!(csp(&CspConfig::default(), 3), csp(&CspConfig::default(), 3));
        assert_eq!(pedigree(&PedigreeConfig::default(), 3), pedigree(&PedigreeConfig::default(), 3));
        assert_eq!(frustrated_grid(&GridConfig::default(), 3), frustrated_grid(&GridConfig::default(), 3));
        assert_ne!(csp(&CspConfig::default(), 3), csp(&CspConfig::default(), 4));
        // Frustrated: some couplings repel.
        let g = frustrated_grid(&GridConfig::default(), 0);
        assert!(g.factors.iter().filter(|f| f.scope.len() == 2).any(|f| f.table[0] < 1.0));
    }
}
