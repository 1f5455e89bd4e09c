//! Helpers shared by the integration tests: random region graphs and
//! potentials, brute force, marginals, and an independent dual minimiser.
#![allow(dead_code)]

use factor_graph::{RegionGraph, RegionGraphBuilder, Scope, factors_with_singletons};
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use smoothed_inference::{InferenceProblem, Messages};

pub fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// `k ≤ n` distinct variables of `0..n`, in the order drawn (rejection:
/// a repeat is drawn again).
pub fn distinct_variables<R: Rng>(rng: &mut R, n: usize, k: usize) -> Vec<usize> {
    let mut vars: Vec<usize> = Vec::with_capacity(k);
    while vars.len() < k {
        let v = rng.random_range(0..n);
        if !vars.contains(&v) {
            vars.push(v);
        }
    }
    vars
}

/// A random "factors over singletons" graph: `n` variables with cardinalities
/// in `1..=max_card`, up to `factors` distinct scopes of 2 or 3 variables in
/// random order, factor types drawn from `types` names.
pub fn random_graph<R: Rng>(rng: &mut R, n: usize, max_card: usize, factors: usize, types: usize) -> RegionGraph {
    let cards: Vec<usize> = (0..n).map(|_| rng.random_range(1..=max_card)).collect();
    let mut scopes: Vec<Scope> = Vec::new();
    let mut seen: Vec<Vec<usize>> = Vec::new();
    for _ in 0..factors * 4 {
        if scopes.len() == factors || n < 2 {
            break;
        }
        let size = if n >= 3 && rng.random::<f64>() < 0.3 { 3 } else { 2 };
        let vars = distinct_variables(rng, n, size);
        let mut key = vars.clone();
        key.sort_unstable();
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let t = rng.random_range(0..types);
        scopes.push(Scope { variables: vars, factor_type: format!("type{t}") });
    }
    factors_with_singletons(cards, &scopes).expect("valid random graph")
}

/// A three-level graph: a triple over {0,1,2} is the parent of the pairs
/// {1,0} and {1,2}; those pairs and a pair {2,3} are parents of singletons.
/// Cardinalities 2, 3, 2, 3; types: unary, pair, triple.
pub fn three_level_graph() -> RegionGraph {
    let mut b = RegionGraphBuilder::new(vec![2, 3, 2, 3]).unwrap();
    let unary = b.add_factor_type("unary").unwrap();
    let pair = b.add_factor_type("pair").unwrap();
    let triple = b.add_factor_type("triple").unwrap();
    let s: Vec<usize> = (0..4).map(|i| b.add_region(&[i], unary).unwrap()).collect();
    let p01 = b.add_region(&[1, 0], pair).unwrap();
    let p12 = b.add_region(&[1, 2], pair).unwrap();
    let p23 = b.add_region(&[2, 3], pair).unwrap();
    let t = b.add_region(&[0, 1, 2], triple).unwrap();
    for (p, kids) in [(p01, [0, 1]), (p12, [1, 2]), (p23, [2, 3])] {
        for k in kids {
            b.add_edge(p, s[k]).unwrap();
        }
    }
    b.add_edge(t, p01).unwrap();
    b.add_edge(t, p12).unwrap();
    b.build().unwrap()
}

/// Random potentials in `[-scale, scale]`; with `forbid > 0`, that fraction of
/// entries is `−∞`, never on configurations consistent with one random full
/// labelling (so the model stays feasible).
pub fn random_theta<R: Rng>(rng: &mut R, g: &RegionGraph, scale: f64, forbid: f64) -> Vec<f64> {
    let keep: Vec<usize> = (0..g.num_variables()).map(|i| rng.random_range(0..g.cardinality(i))).collect();
    let mut theta = vec![0.0; g.total_configs()];
    for r in 0..g.num_regions() {
        let range = g.config_range(r);
        let kept = range.start + g.config_of(r, &keep);
        for i in range {
            theta[i] = if i != kept && rng.random::<f64>() < forbid {
                f64::NEG_INFINITY
            } else {
                scale * (2.0 * rng.random::<f64>() - 1.0)
            };
        }
    }
    theta
}

pub fn random_messages<R: Rng>(rng: &mut R, g: &RegionGraph, scale: f64) -> Messages {
    let v = (0..g.total_message_len()).map(|_| scale * (2.0 * rng.random::<f64>() - 1.0)).collect();
    Messages::from_vec(g, v).unwrap()
}

/// `μ_{αβ}` of edge `e` from flat beliefs.
pub fn parent_marginal(g: &RegionGraph, e: usize, beliefs: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; g.num_configs(g.edge_child(e))];
    for (&v, &y) in beliefs[g.config_range(g.edge_parent(e))].iter().zip(g.edge_map(e)) {
        out[y as usize] += v;
    }
    out
}

pub fn beliefs(p: &InferenceProblem, m: &Messages) -> Vec<f64> {
    let mut b = vec![0.0; p.graph().total_configs()];
    p.beliefs(m, &mut b);
    b
}

/// `max_y Σ_α θ_α(y_α)` by enumerating every labelling.
pub fn brute_force_max(g: &RegionGraph, theta: &[f64]) -> f64 {
    let n = g.num_variables();
    let mut y = vec![0usize; n];
    let mut best = f64::NEG_INFINITY;
    loop {
        let score: f64 = (0..g.num_regions()).map(|r| theta[g.config_range(r).start + g.config_of(r, &y)]).sum();
        best = best.max(score);
        let mut i = 0;
        loop {
            if i == n {
                return best;
            }
            y[i] += 1;
            if y[i] < g.cardinality(i) {
                break;
            }
            y[i] = 0;
            i += 1;
        }
    }
}

/// Independent minimisation of the smooth convex dual `A(λ, θ)` from zero
/// messages, using only `dual_value` and `dual_gradient`: damped Newton with a
/// central-difference Hessian of the gradient, a tiny ridge for the gauge
/// directions (per-edge constants around cycles leave A unchanged), a dense
/// Cholesky solve and backtracking. (Plain gradient descent needs millions of
/// steps to reach gradients of 1e-11 at ε ≈ 0.5.) Stops when the gradient's
/// largest entry is below `tol`.
pub fn newton_on_dual(p: &InferenceProblem, tol: f64, max_iter: usize) -> Messages {
    let g = p.graph();
    let n = g.total_message_len();
    let grad_at = |m: &[f64]| {
        let mut out = vec![0.0; n];
        p.dual_gradient(&Messages::from_vec(g, m.to_vec()).unwrap(), &mut out);
        out
    };
    let value_at = |m: &[f64]| p.dual_value(&Messages::from_vec(g, m.to_vec()).unwrap());
    let mut m = vec![0.0; n];
    for _ in 0..max_iter {
        let grad = grad_at(&m);
        if grad.iter().fold(0.0f64, |a, &v| a.max(v.abs())) < tol {
            return Messages::from_vec(g, m).unwrap();
        }
        let h = 1e-6;
        let mut hess = vec![0.0; n * n];
        for j in 0..n {
            let mut plus = m.clone();
            plus[j] += h;
            let mut minus = m.clone();
            minus[j] -= h;
            let (gp, gm) = (grad_at(&plus), grad_at(&minus));
            for i in 0..n {
                hess[i * n + j] = (gp[i] - gm[i]) / (2.0 * h);
            }
        }
        let ridge = 1e-10 * (1.0 + (0..n).map(|i| hess[i * n + i]).fold(0.0f64, f64::max));
        for i in 0..n {
            for j in 0..i {
                let s = 0.5 * (hess[i * n + j] + hess[j * n + i]);
                hess[i * n + j] = s;
                hess[j * n + i] = s;
            }
            hess[i * n + i] += ridge;
        }
        let dir = cholesky_solve(&mut hess, &grad, n);
        let a0 = value_at(&m);
        let slope: f64 = grad.iter().zip(&dir).map(|(a, b)| a * b).sum();
        let mut t = 1.0;
        loop {
            let trial: Vec<f64> = m.iter().zip(&dir).map(|(l, d)| l - t * d).collect();
            let a = value_at(&trial);
            if a <= a0 - 1e-4 * t * slope || (t == 1.0 && a <= a0 + 1e-14 * a0.abs()) || t < 1e-10 {
                m = trial;
                break;
            }
            t *= 0.5;
        }
    }
    panic!("Newton's method did not converge in {max_iter} iterations");
}

/// Solves `A x = b` for symmetric positive definite `A` (overwritten).
fn cholesky_solve(a: &mut [f64], b: &[f64], n: usize) -> Vec<f64> {
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= a[j * n + k] * a[j * n + k];
        }
        let d = d.max(1e-300).sqrt();
        a[j * n + j] = d;
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= a[i * n + k] * a[j * n + k];
            }
            a[i * n + j] = s / d;
        }
    }
    let mut y = b.to_vec();
    for i in 0..n {
        for k in 0..i {
            y[i] -= a[i * n + k] * y[k];
        }
        y[i] /= a[i * n + i];
    }
    for i in (0..n).rev() {
        for k in i + 1..n {
            y[i] -= a[k * n + i] * y[k];
        }
        y[i] /= a[i * n + i];
    }
    y
}

/// Whether every child value keeps some finite configuration in every star
/// member (then the dual optimum is finite).
pub fn supports_every_child_value(g: &RegionGraph, theta: &[f64]) -> bool {
    (0..g.num_edges()).all(|e| {
        let child = &theta[g.config_range(g.edge_child(e))];
        let mut support = vec![false; child.len()];
        for (&t, &y) in theta[g.config_range(g.edge_parent(e))].iter().zip(g.edge_map(e)) {
            support[y as usize] |= t.is_finite();
        }
        support.iter().zip(child).all(|(&s, c)| s && c.is_finite())
    })
}

pub fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0.0f64, |m, (x, y)| if x == y { m } else { m.max((x - y).abs()) })
}

pub fn all_finite(m: &Messages) -> bool {
    m.as_slice().iter().all(|v| v.is_finite())
}
