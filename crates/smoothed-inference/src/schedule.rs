//! Pairs and fours of independent binary star updates.
//!
//! Two star updates that share no region commute exactly: neither reads a
//! message or a `θ̃` the other writes. So any order of a sweep's stars that
//! keeps every two *overlapping* stars in their sweep order gives the sweep's
//! results bit for bit. On a binary grid one star update is a long chain of
//! dependent operations (exponentials, logarithms, the combine) and
//! consecutive stars in reading order share a pair, so the core runs one chain
//! at a time; [`Schedule`] reorders each half-sweep so that two or four
//! independent binary stars can be updated together (`star::avx2::binary_pair`,
//! `binary_quad`) and their chains overlap. On a grid in reading order it walks
//! four rows at once, each a pixel or two behind the one above (fours are
//! 7–13 % faster than pairs on a 100 × 100 grid; docs/guide/performance.md).

use crate::problem::{InferenceProblem, StarKind};

/// One step of a scheduled half-sweep: one star update (by child region), or
/// two or four binary ones that share no region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    One(usize),
    Two(usize, usize),
    Four(usize, usize, usize, usize),
}

/// A sweep order and its two halves (the order, then the order reversed) as
/// steps.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    pub order: Vec<usize>,
    pub forward: Vec<Step>,
    pub backward: Vec<Step>,
}

impl Schedule {
    pub fn build(p: &InferenceProblem<'_>, order: &[usize]) -> Self {
        let reversed: Vec<usize> = order.iter().rev().copied().collect();
        Schedule { order: order.to_vec(), forward: steps(p, order), backward: steps(p, &reversed) }
    }
}

/// How far past the partner cursor a pairing looks (three grid rows of 100 and more:
/// a step of four on a grid reaches three rows below its first star).
const LOOK_AHEAD: usize = 512;

/// After a search that found no partner, how many stars go unpaired before
/// the next search (bounds the cost on orders without independent stars, such
/// as a chain in order, to `LOOK_AHEAD / BACK_OFF` checks per star).
const BACK_OFF: usize = 16;

/// The stars of `seq` as steps: always the earliest pending star, paired when
/// it is binary with a later binary star that is *ready*, i.e. the earliest
/// pending star of every region it touches (its child and its parents); a
/// ready star shares no region with the earliest pending one, whose own
/// regions it would otherwise wait for. The search for partners starts after
/// the last partner (on a grid the next one is the next pixel of the row
/// below) and looks at most [`LOOK_AHEAD`] stars ahead; after a search that
/// fails the next [`BACK_OFF`] stars go alone, so building costs a few
/// operations per star.
fn steps(p: &InferenceProblem<'_>, seq: &[usize]) -> Vec<Step> {
    let g = p.graph;
    let n_regions = g.num_regions();
    // The regions of each position's star (child, then parents), flat (CSR).
    let mut bounds = Vec::with_capacity(seq.len() + 1);
    let mut regions: Vec<u32> = Vec::with_capacity(5 * seq.len());
    bounds.push(0);
    for &c in seq {
        let cp = p.plan.children[c];
        regions.push(c as u32);
        regions.extend(p.plan.edges[cp.first..cp.end].iter().map(|ep| g.edge_parent(ep.edge) as u32));
        bounds.push(regions.len());
    }
    let star = |i: usize| &regions[bounds[i]..bounds[i + 1]];
    // Per region, the positions in `seq` of the stars that touch it, in order (CSR).
    let mut start = vec![0u32; n_regions + 1];
    for &r in &regions {
        start[r as usize + 1] += 1;
    }
    for r in 0..n_regions {
        start[r + 1] += start[r];
    }
    // head[r]: index into `touching` of region r's earliest pending star.
    let mut head: Vec<u32> = start[..n_regions].to_vec();
    let mut touching = vec![0u32; regions.len()];
    for i in 0..seq.len() {
        for &r in star(i) {
            touching[head[r as usize] as usize] = i as u32;
            head[r as usize] += 1;
        }
    }
    head.copy_from_slice(&start[..n_regions]);
    let binary = |i: usize| p.plan.children[seq[i]].kind == StarKind::Binary;
    let ready = |head: &[u32], t: usize| star(t).iter().all(|&r| touching[head[r as usize] as usize] == t as u32);
    let mut done = vec![false; seq.len()];
    let mut out = Vec::with_capacity(seq.len());
    let (mut first, mut cursor, mut next_search) = (0, 0, 0);
    while first < seq.len() {
        let s = first;
        // Up to three partners, all ready before any of the step is done: a
        // region's next star is unique, so ready stars share no region.
        let mut partners = [0usize; 3];
        let mut found = 0;
        if binary(s) && s >= next_search {
            cursor = cursor.max(s + 1);
            let end = (cursor + LOOK_AHEAD).min(seq.len());
            for t in (cursor..end).filter(|&t| !done[t] && binary(t) && ready(&head, t)).take(3) {
                partners[found] = t;
                found += 1;
            }
            match found {
                0 => next_search = s + BACK_OFF,
                _ => cursor = partners[0] + 1,
            }
        }
        for &i in std::iter::once(&s).chain(&partners[..found]) {
            for &r in star(i) {
                head[r as usize] += 1;
            }
            done[i] = true;
        }
        match found {
            0 => out.push(Step::One(seq[s])),
            1 => out.push(Step::Two(seq[s], seq[partners[0]])),
            // Three: a pair, then the third alone (it was ready too), so that
            // the walk reaches a fourth row and later steps can hold four.
            2 => out.extend([Step::Two(seq[s], seq[partners[0]]), Step::One(seq[partners[1]])]),
            _ => out.push(Step::Four(seq[s], seq[partners[0]], seq[partners[1]], seq[partners[2]])),
        }
        while first < seq.len() && done[first] {
            first += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use factor_graph::{RegionGraph, Scope, factors_with_singletons};
    use rand::SeedableRng;
    use rand::seq::SliceRandom;

    /// Every star of `seq` once; overlapping stars in `seq`'s order; the two
    /// stars of a pair binary and without a common region.
    fn check(g: &RegionGraph, p: &InferenceProblem<'_>, seq: &[usize], steps: &[Step]) {
        let regions = |c: usize| -> Vec<usize> {
            let mut r: Vec<usize> = g.parent_edges(c).iter().map(|&e| g.edge_parent(e)).collect();
            r.push(c);
            r
        };
        let group = |stars: &[usize]| -> Vec<usize> {
            for (i, &a) in stars.iter().enumerate() {
                assert_eq!(p.plan.children[a].kind, StarKind::Binary);
                for &b in &stars[i + 1..] {
                    assert!(regions(a).iter().all(|r| !regions(b).contains(r)), "stars {a}, {b} of a step overlap");
                }
            }
            stars.to_vec()
        };
        let flat: Vec<usize> = steps
            .iter()
            .flat_map(|s| match *s {
                Step::One(a) => vec![a],
                Step::Two(a, b) => group(&[a, b]),
                Step::Four(a, b, c, d) => group(&[a, b, c, d]),
            })
            .collect();
        let mut sorted_flat = flat.clone();
        let mut sorted_seq = seq.to_vec();
        sorted_flat.sort_unstable();
        sorted_seq.sort_unstable();
        assert_eq!(sorted_flat, sorted_seq, "not every star once");
        // Per region, the stars touching it in executed order = in `seq` order.
        for r in 0..g.num_regions() {
            let of = |v: &[usize]| v.iter().copied().filter(|&c| regions(c).contains(&r)).collect::<Vec<_>>();
            assert_eq!(of(&flat), of(seq), "region {r}");
        }
    }

    #[test]
    fn schedules_keep_overlapping_stars_in_order_and_pair_a_grid() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let s = |v: &[usize], t: &str| Scope { variables: v.to_vec(), factor_type: t.into() };
        let chain =
            factors_with_singletons(vec![2; 12], &(0..11).map(|i| s(&[i, i + 1], "p")).collect::<Vec<_>>()).unwrap();
        let mixed = factors_with_singletons(
            vec![2, 3, 2, 2],
            &[s(&[0, 1], "p"), s(&[1, 2], "p"), s(&[2, 3], "p"), s(&[0, 3], "p")],
        )
        .unwrap();
        for g in [factor_graph::grid(12, 30, 2).unwrap(), factor_graph::grid(4, 5, 3).unwrap(), chain, mixed] {
            let theta = vec![0.0; g.total_configs()];
            let p = InferenceProblem::uniform(&g, &theta, 0.1).unwrap();
            let order = g.default_update_order();
            let mut shuffled = order.clone();
            shuffled.shuffle(&mut rng);
            let mut repeated = order.clone();
            repeated.extend(order.iter().rev().step_by(2));
            for seq in [&order, &shuffled, &repeated] {
                let sched = Schedule::build(&p, seq);
                check(&g, &p, seq, &sched.forward);
                let reversed: Vec<usize> = seq.iter().rev().copied().collect();
                check(&g, &p, &reversed, &sched.backward);
            }
        }
        // Binary grids in reading order: the walk takes four rows at once, each
        // a pixel or two behind the one above; alone are only the first
        // BACK_OFF stars (the first has no partner), a star as each of the
        // first rows joins the walk, and the last row's end. On 12 × 30, 288 of
        // 360 stars are updated four at a time; on 100 × 100, 9928 of 10000.
        for ((h, w), least_in_fours) in [((12, 30), 0.75), ((100, 100), 0.99)] {
            let g = factor_graph::grid(h, w, 2).unwrap();
            let theta = vec![0.0; g.total_configs()];
            let p = InferenceProblem::uniform(&g, &theta, 0.1).unwrap();
            let sched = Schedule::build(&p, &g.default_update_order());
            for half in [&sched.forward, &sched.backward] {
                let singles = half.iter().filter(|s| matches!(s, Step::One(_))).count();
                let in_fours = 4 * half.iter().filter(|s| matches!(s, Step::Four(..))).count();
                assert!(singles <= 2 * BACK_OFF + 4, "{h} x {w}: {singles} stars alone");
                assert!(in_fours as f64 >= least_in_fours * (h * w) as f64, "{h} x {w}: {in_fours} in fours");
            }
        }
    }
}
