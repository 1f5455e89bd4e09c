#!/usr/bin/env python3
"""Cross-check `structlearn infer` against an independent convex solver (cvxpy).

Dev tool, not run in CI.  It generates random small UAI MARKOV models, runs the
Rust CLI on each, solves the same convex program with cvxpy (CLARABEL,
exponential cones) and compares the value and every belief.

The program (docs/MATH.md §2–3, module docs of crates/factor-graph/src/uai.rs):

    A(θ) = max_{μ ∈ M}  Σ_α θ_α·μ_α + ε Σ_α H(μ_α)      (+ Σ ln of empty-scope factors)

Regions: one singleton per variable, plus one region per *distinct scope* (as a
set) of ≥ 2 variables; single-variable factors merge into their singleton;
factors with the same scope (in any variable order) add; θ = ln(table value),
a zero entry is θ = −∞ and its μ entry is fixed to 0 (the variable is dropped).
M: every μ_α is a distribution and every factor region's marginal on each of its
variables equals that variable's singleton μ_i (edges factor→singleton only).
Every region, singletons included, has entropy weight ε.  The formulation here
is the primal, written from scratch with numpy/cvxpy; it shares no code or
algorithm with the Rust message passing (star updates on the dual).

Models (seeded, reproducible): triangles, 3×3 grids, 4-cycles, loops of
triples, random mixes of pairs/triples; cardinalities 2–4; random zero entries
(each table keeps a positive entry); duplicate scopes in permuted variable
order; single-variable factors; occasionally an empty-scope (constant) factor;
ε ∈ {0.05, 0.1, 0.5, 1, 2}.  Every model is checked for feasibility with an LP
(HiGHS) and rejected if the local polytope is empty.  The same LPs find entries
that are *implicitly* forced to zero (finite θ, but zero in every point of M);
their count is reported in column `imp0` (see --implicit-zeros).

Checks per model: |ΔA| = |dual_value − (cvxpy value + constant)|, max |Δμ| over
all singleton beliefs and every factor's beliefs in UAI table order (last scope
variable fastest, per that factor's own scope order, file order), and weak
duality (the Rust value A(λ, θ) may never be below the optimum A(θ)).  Also
shown: the Rust run's reported max_violation and iterations, the cvxpy status.

Slow convergence vs wrong answer: a Rust run that uses all --iterations without
reaching --tolerance is re-run with --retry-iterations (default 1e6).  Verdicts:
`ok` (agrees within --tol at --iterations), `SLOW` (agrees only after the re-run:
the star-update block-coordinate descent converges very slowly on some
near-deterministic frustrated loops at small ε; exit status 0 unless --strict),
`FAIL` (disagrees even after the re-run, or violates weak duality).

By default the interior-point solution is *polished* to machine precision: a
few damped Newton steps on the Lagrangian dual of the equality constraints
(restricted to the support found by the LPs), started from the cvxpy point (see
`polish`).  It only removes the ~1e-8 interior-point error (CLARABEL often
stops at `optimal_inaccurate` on these exponential-cone problems) so that the
1e-6 test is not limited by solver accuracy; column `|dA|cvx` always compares
against the raw cvxpy optimum, and `--no-polish` compares the raw cvxpy point.

Usage:
    pip install cvxpy numpy            # done automatically if missing
    CARGO_TARGET_DIR=/work/target-cvx cargo build --release -p structlearn
    python3 scripts/check_infer_cvxpy.py [--models 40] [--seed 1] \
        [--binary /work/target-cvx/release/structlearn] [--tol 1e-6] \
        [--iterations 20000] [--tolerance 1e-10] [--keep DIR] [--no-polish] \
        [--implicit-zeros allow|reject|only] [--retry-iterations 1000000] [--strict]
    python3 scripts/check_infer_cvxpy.py --uai FILE.uai ... --eps 0.05 0.1   # given models

Exit status 0 when no model FAILs (value and every belief within --tol),
1 otherwise, 2 on a usage or setup error.  Typical runtime: ~1–2 s per model
(mostly cvxpy compile + HiGHS LPs) plus Rust re-runs of slow models (~10–60 s
each for 1e6 iterations).  With --keep DIR the .uai files,
the Rust JSON and the reference beliefs (ref_*.json) are kept in DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings


def _ensure_deps():
    try:
        import cvxpy  # noqa: F401
        import numpy  # noqa: F401
    except ImportError:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "cvxpy", "numpy"])


_ensure_deps()

import cvxpy as cp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

EPSILONS = [0.05, 0.1, 0.5, 1.0, 2.0]
KINDS = ["triangle", "grid3x3", "cycle4", "triples", "random"]


# --------------------------------------------------------------------------- models


class Model:
    """A UAI MARKOV model: cardinalities and factors (scope tuple, flat table)."""

    def __init__(self, cards, factors):
        self.cards = list(cards)
        self.factors = [(tuple(s), np.asarray(t, dtype=float)) for s, t in factors]

    def to_uai(self) -> str:
        lines = ["MARKOV", str(len(self.cards)), " ".join(map(str, self.cards)), str(len(self.factors))]
        for s, _ in self.factors:
            lines.append(" ".join(map(str, [len(s), *s])))
        for _, t in self.factors:
            lines.append("")
            lines.append(str(len(t)))
            lines.append(" " + " ".join(repr(float(v)) for v in t))
        return "\n".join(lines) + "\n"

    @staticmethod
    def parse(text: str) -> "Model":
        toks = []
        for line in text.splitlines():
            toks += line.split("//")[0].split()
        assert toks[0].upper() in ("MARKOV", "BAYES")
        pos = 1
        n = int(toks[pos]); pos += 1
        cards = [int(x) for x in toks[pos:pos + n]]; pos += n
        nf = int(toks[pos]); pos += 1
        scopes = []
        for _ in range(nf):
            k = int(toks[pos]); pos += 1
            scopes.append(tuple(int(x) for x in toks[pos:pos + k])); pos += k
        factors = []
        for s in scopes:
            m = int(toks[pos]); pos += 1
            factors.append((s, [float(x) for x in toks[pos:pos + m]])); pos += m
        return Model(cards, factors)


def random_table(rng, size, zero_p, scale):
    t = np.exp(scale * rng.standard_normal(size))
    if zero_p > 0:
        z = rng.random(size) < zero_p
        if z.all():
            z[rng.integers(size)] = False
        t[z] = 0.0
    return t


def random_model(rng, kind):
    """One random model of the given structural kind (see module docs)."""
    if kind == "triangle":
        n, scopes = 3, [(0, 1), (1, 2), (0, 2)]
    elif kind == "grid3x3":
        n, scopes = 9, []
        for r in range(3):
            for c in range(3):
                v = 3 * r + c
                if c < 2:
                    scopes.append((v, v + 1))
                if r < 2:
                    scopes.append((v, v + 3))
    elif kind == "cycle4":
        n, scopes = 4, [(0, 1), (1, 2), (2, 3), (3, 0)]
    elif kind == "triples":
        n, scopes = 5, [(0, 1, 2), (2, 3, 4), (0, 4), (1, 3), (0, 1)]
    else:  # random
        n = int(rng.integers(4, 7))
        scopes = []
        for _ in range(int(rng.integers(n, 2 * n))):
            k = 2 if rng.random() < 0.7 else 3
            scopes.append(tuple(int(v) for v in rng.choice(n, size=k, replace=False)))
    cards = [int(c) for c in rng.integers(2, 5, size=n)]
    if kind == "grid3x3":  # keep the grid small enough to be quick
        cards = [int(c) for c in rng.integers(2, 4, size=n)]
    # random variable order inside each scope
    scopes = [tuple(int(v) for v in rng.permutation(s)) for s in scopes]
    zero_p = float(rng.choice([0.0, 0.05, 0.1, 0.2, 0.3]))
    scale = float(rng.choice([0.5, 1.0, 2.0, 3.0]))
    factors = []

    def size(s):
        return int(np.prod([cards[v] for v in s])) if s else 1

    for s in scopes:
        factors.append((s, random_table(rng, size(s), zero_p, scale)))
    # duplicate scopes in a different variable order
    for _ in range(int(rng.integers(0, 3))):
        s = scopes[int(rng.integers(len(scopes)))]
        perm = tuple(int(v) for v in rng.permutation(s))
        if len(s) > 1 and perm == s:
            perm = perm[::-1]
        factors.append((perm, random_table(rng, size(perm), zero_p, scale)))
    # single-variable factors (sometimes two on the same variable)
    for v in rng.choice(n, size=int(rng.integers(0, n + 1)), replace=True):
        factors.append(((int(v),), random_table(rng, cards[int(v)], zero_p / 2, scale)))
    # an empty-scope factor (constant) now and then
    if rng.random() < 0.3:
        factors.append(((), np.array([float(np.exp(rng.standard_normal()))])))
    order = rng.permutation(len(factors))
    return Model(cards, [factors[i] for i in order])


# ------------------------------------------------------------------ region graph


def region_table(cards, canon, scope, table):
    """Table given in `scope` order -> array in `canon` order (flat, last fastest)."""
    arr = np.asarray(table, dtype=float).reshape([cards[v] for v in scope])
    return np.transpose(arr, [scope.index(v) for v in canon]).reshape(-1)


def to_table_order(cards, canon, scope, flat):
    """Inverse of region_table: canon-ordered flat beliefs -> `scope` (UAI) order."""
    arr = np.asarray(flat).reshape([cards[v] for v in canon])
    return np.transpose(arr, [canon.index(v) for v in scope]).reshape(-1)


class Regions:
    """Singletons 0..N-1, then one region per distinct scope (set) of ≥ 2 variables."""

    def __init__(self, model: Model):
        cards = model.cards
        self.cards = cards
        self.vars = [(i,) for i in range(len(cards))]
        self.logtheta = [np.zeros(c) for c in cards]
        key_to_region = {}
        self.constant = 0.0
        self.factor_region = []
        for s, t in model.factors:
            with np.errstate(divide="ignore"):
                lt = np.log(np.asarray(t, dtype=float))
            if len(s) == 0:
                self.constant += float(lt[0])
                self.factor_region.append(None)
                continue
            if len(s) == 1:
                self.logtheta[s[0]] = self.logtheta[s[0]] + lt
                self.factor_region.append(s[0])
                continue
            key = frozenset(s)
            if key not in key_to_region:
                key_to_region[key] = len(self.vars)
                self.vars.append(tuple(s))
                self.logtheta.append(np.zeros(int(np.prod([cards[v] for v in s]))))
            r = key_to_region[key]
            self.logtheta[r] = self.logtheta[r] + region_table(cards, self.vars[r], s, lt)
            self.factor_region.append(r)
        self.n = len(cards)
        self.allowed = [np.isfinite(t) for t in self.logtheta]

    def marg_matrix(self, r, i):
        """Sparse (|Y_i| × |Y_r|) matrix: marginal of region r on variable i."""
        canon = self.vars[r]
        shape = [self.cards[v] for v in canon]
        digits = np.indices(shape).reshape(len(shape), -1)[canon.index(i)]
        m = digits.size
        return sp.csr_matrix((np.ones(m), (digits, np.arange(m))), shape=(self.cards[i], m))

    def edges(self):
        for r in range(self.n, len(self.vars)):
            for i in self.vars[r]:
                yield r, i


# ------------------------------------------------------- feasibility and support


def lp_support(R: Regions):
    """Supports of M (entries that are positive in some feasible point).

    Returns None if M is empty, else a list of boolean masks (per region).
    Repeatedly maximise Σ t_e, 0 ≤ t_e ≤ μ_e, t_e ≤ 1 over the entries not yet
    shown to be supportable; any entry with t_e > 0 is supportable; stop when
    the optimum is 0 (the rest are zero in every feasible point).
    """
    xs = [cp.Variable(int(a.sum()), nonneg=True) for a in R.allowed]
    cons = [cp.sum(x) == 1 for x in xs]
    for r, i in R.edges():
        cons.append(R.marg_matrix(r, i)[:, R.allowed[r]] @ xs[r] == R.marg_matrix(i, i)[:, R.allowed[i]] @ xs[i])
    prob = cp.Problem(cp.Minimize(0), cons)
    prob.solve(solver=cp.HIGHS)
    if prob.status != cp.OPTIMAL:
        return None
    known = [np.zeros(int(a.sum()), dtype=bool) for a in R.allowed]
    while True:
        ts, obj, extra = [], 0, []
        for r, x in enumerate(xs):
            un = np.flatnonzero(~known[r])
            if un.size:
                t = cp.Variable(un.size, nonneg=True)
                extra += [t <= x[un], t <= 1]
                obj = obj + cp.sum(t)
                ts.append((r, un, t))
        if not ts:
            break
        p = cp.Problem(cp.Maximize(obj), cons + extra)
        p.solve(solver=cp.HIGHS)
        if p.status != cp.OPTIMAL or p.value < 1e-9:
            break
        for r, un, t in ts:
            known[r][un[t.value > 1e-9]] = True
    masks = []
    for r, a in enumerate(R.allowed):
        m = np.zeros(a.size, dtype=bool)
        m[np.flatnonzero(a)[known[r]]] = True
        masks.append(m)
    return masks


# --------------------------------------------------------------------- the primal


def solve_primal(R: Regions, eps: float):
    """max Σ θ·μ + ε Σ H(μ_α) over M with cvxpy/CLARABEL.

    Returns (value, μ list, status, y): y stacks the equality constraints' dual
    values in the row order of `constraint_matrix` (used only to start `polish`).
    """
    xs = [cp.Variable(int(a.sum())) for a in R.allowed]
    obj = 0
    cons = []
    for r, x in enumerate(xs):
        obj = obj + R.logtheta[r][R.allowed[r]] @ x + eps * cp.sum(cp.entr(x))
        cons.append(cp.sum(x) == 1)
    for r, i in R.edges():
        cons.append(R.marg_matrix(r, i)[:, R.allowed[r]] @ xs[r] == R.marg_matrix(i, i)[:, R.allowed[i]] @ xs[i])
    prob = cp.Problem(cp.Maximize(obj), cons)
    warnings.filterwarnings("ignore", message="Solution may be inaccurate")
    kw = dict(tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12, tol_ktratio=1e-10, max_iter=500)
    try:
        prob.solve(solver=cp.CLARABEL, **kw)
    except cp.error.SolverError:
        prob.solve(solver=cp.SCS, eps=1e-9, max_iters=200000)
    mus = []
    for r, x in enumerate(xs):
        full = np.zeros(R.allowed[r].size)
        full[R.allowed[r]] = np.maximum(x.value, 0.0)
        mus.append(full)
    # prob.value re-evaluates entr at the returned point (−inf if an entry is a hair
    # below 0); the solver's own optimum is the meaningful number.
    y = np.concatenate([np.atleast_1d(np.asarray(c.dual_value, dtype=float)) for c in cons])
    return float(prob.solution.opt_val), mus, prob.status, y


def primal_value(R: Regions, eps: float, mus):
    v = 0.0
    for r, m in enumerate(mus):
        a = m > 0
        v += float(R.logtheta[r][a] @ m[a]) - eps * float(m[a] @ np.log(m[a]))
    return v


def constraint_matrix(R: Regions, support):
    """Dense A, b of the equality constraints (normalisation, marginalisation) over
    the stacked support entries, and the stacked θ and index bookkeeping."""
    offs, idx = [0], []
    for m in support:
        idx.append(np.flatnonzero(m))
        offs.append(offs[-1] + idx[-1].size)
    nv = offs[-1]
    rows, b = [], []
    for r in range(len(support)):
        row = np.zeros(nv)
        row[offs[r]:offs[r + 1]] = 1
        rows.append(row)
        b.append(1.0)
    for r, i in R.edges():
        Mr = R.marg_matrix(r, i).toarray()[:, idx[r]]
        Mi = R.marg_matrix(i, i).toarray()[:, idx[i]]
        for y in range(R.cards[i]):
            row = np.zeros(nv)
            row[offs[r]:offs[r + 1]] = Mr[y]
            row[offs[i]:offs[i + 1]] -= Mi[y]
            rows.append(row)
            b.append(0.0)
    theta = np.concatenate([R.logtheta[r][idx[r]] for r in range(len(support))])
    return np.array(rows), np.array(b), theta, offs, idx


def polish(R: Regions, eps: float, mus, support, y=None, steps=200):
    """Refine the interior-point solution to machine precision (Newton, log domain).

    The primal restricted to `support` (the entries positive somewhere in M) is
    max θ·μ − ε Σ μ log μ s.t. Aμ = b (A: normalisation and marginalisation
    rows).  Its Lagrangian dual, min_ν D(ν) = ε Σ_e exp((θ + Aᵀν)_e/ε − 1) − b·ν,
    is smooth and convex with μ(ν) = exp((θ + Aᵀν)/ε − 1), ∇D = Aμ − b and
    ∇²D = A diag(μ) Aᵀ / ε.  Start: the better (lower D) of ±(CLARABEL's dual
    values y) and ν fitted by least squares to the KKT condition
    ε(log μ + 1) = θ + Aᵀν on the cvxpy point's clearly positive entries (the
    fit alone can put tiny entries far off, which costs Newton ~1 step per unit
    of log-error); then damped Newton steps (least-squares solves: A has dependent rows)
    with a backtracking line search on D.  Being in the log domain, entries of
    size 1e-100 are no harder than entries of size 0.5.  This is a full-Newton
    method on all equality constraints at once, not the Rust block-coordinate
    star updates.  Returns (μ list, True), or (input, False) if the equality
    residual does not fall below 1e-13.
    """
    A, b, theta, offs, idx = constraint_matrix(R, support)
    x0 = np.concatenate([mus[r][idx[r]] for r in range(len(support))])
    good = x0 > 1e-7
    starts = [np.linalg.lstsq(A[:, good].T, eps * (np.log(x0[good]) + 1) - theta[good], rcond=None)[0]]
    if y is not None and y.shape == b.shape and np.all(np.isfinite(y)):
        starts += [y, -y]

    def evaluate(nu):
        z = np.minimum((theta + A.T @ nu) / eps - 1, 700.0)
        mu = np.exp(z)
        return mu, eps * mu.sum() - b @ nu

    nu, mu, dval = min(((v, *evaluate(v)) for v in starts), key=lambda t: t[2])
    for _ in range(steps):
        grad = A @ mu - b
        if np.max(np.abs(grad)) < 1e-15:
            break
        H = (A * mu) @ A.T / eps
        step, *_ = np.linalg.lstsq(H, -grad, rcond=1e-15)
        t = 1.0
        while t > 1e-12:
            mu2, d2 = evaluate(nu + t * step)
            if d2 <= dval + 1e-4 * t * (grad @ step) or abs(d2 - dval) <= 1e-15 * max(1.0, abs(dval)):
                break
            t /= 2
        if t <= 1e-12:
            break
        nu, mu, dval = nu + t * step, mu2, d2
    if not np.all(np.isfinite(mu)) or np.max(np.abs(A @ mu - b)) > 1e-13:
        return mus, False
    out = []
    for r in range(len(support)):
        full = np.zeros(support[r].size)
        full[idx[r]] = mu[offs[r]:offs[r + 1]]
        out.append(full)
    return out, True


# -------------------------------------------------------------------------- driver


def run_rust(binary, path, eps, iterations, tolerance, out):
    t0 = time.time()
    subprocess.run(
        [binary, "infer", path, "--eps", repr(eps), "--iterations", str(iterations),
         "--tolerance", repr(tolerance), "--output", out],
        check=True, capture_output=True, text=True)
    with open(out) as f:
        return json.load(f), time.time() - t0


def reference_outputs(model: Model, R: Regions, mus):
    variables = [mus[i] for i in range(R.n)]
    factors = []
    for (s, _), r in zip(model.factors, R.factor_region):
        if r is None:
            factors.append(np.array([1.0]))
        elif len(s) == 1:
            factors.append(mus[r])
        else:
            factors.append(to_table_order(R.cards, R.vars[r], s, mus[r]))
    return variables, factors


def compare(model, R, mus, value, rust):
    variables, factors = reference_outputs(model, R, mus)
    dA = abs(rust["dual_value"] - (value + R.constant))
    dmu = 0.0
    where = ""
    assert len(rust["variables"]) == len(variables) and len(rust["factors"]) == len(factors)
    for i, (a, b) in enumerate(zip(rust["variables"], variables)):
        d = float(np.max(np.abs(np.asarray(a) - b)))
        if d > dmu:
            dmu, where = d, f"var {i}"
    for f, (a, b) in enumerate(zip(rust["factors"], factors)):
        d = float(np.max(np.abs(np.asarray(a) - b)))
        if d > dmu:
            dmu, where = d, f"factor {f} {model.factors[f][0]}"
    return dA, dmu, where


def check_model(model: Model, eps, args, workdir, name):
    t_lp = time.time()
    R = Regions(model)
    support = lp_support(R)
    t_lp = time.time() - t_lp
    if support is None:
        return None
    implicit = int(sum(int(a.sum() - s.sum()) for a, s in zip(R.allowed, support)))
    uai = os.path.join(workdir, f"{name}.uai")
    with open(uai, "w") as f:
        f.write(model.to_uai())
    out = os.path.join(workdir, f"{name}.json")
    try:
        rust, rust_s = run_rust(args.binary, uai, eps, args.iterations, args.tolerance, out)
    except subprocess.CalledProcessError as e:
        return dict(name=name, eps=eps, error=f"structlearn failed: {e.stderr.strip()[:200]}")
    # Not converged within --iterations: also run with --retry-iterations so that
    # slow convergence can be told apart from a wrong answer.
    first = None
    if (rust["iterations"] >= args.iterations and rust["max_violation"] >= args.tolerance
            and args.retry_iterations > args.iterations):
        first = rust
        rust, more_s = run_rust(args.binary, uai, eps, args.retry_iterations, args.tolerance,
                                os.path.join(workdir, f"{name}.retry.json"))
        rust_s += more_s
    t0 = time.time()
    value, mus, status, y = solve_primal(R, eps)
    raw_value = value
    polished = False
    if not args.no_polish:
        pm, ok = polish(R, eps, mus, support, y)
        if ok:
            mus, polished = pm, True
            value = primal_value(R, eps, mus)
    ref_s = time.time() - t0 + t_lp
    dA, dmu, where = compare(model, R, mus, value, rust)
    first_dA, first_dmu = (compare(model, R, mus, value, first)[:2] if first else (dA, dmu))
    # Weak duality: the Rust value is A(λ, θ) ≥ A(θ) for every λ, so it may never lie
    # below the optimum, converged or not (beyond the reference's own accuracy).
    gap = min(r["dual_value"] for r in (rust, first or rust)) - (value + R.constant)
    if args.keep:
        v, fs = reference_outputs(model, R, mus)
        with open(os.path.join(workdir, f"ref_{name}.json"), "w") as f:
            json.dump({"value": value + R.constant, "cvxpy_value": raw_value + R.constant, "status": status,
                       "polished": polished, "variables": [x.tolist() for x in v],
                       "factors": [x.tolist() for x in fs]}, f)
    return dict(name=name, eps=eps, n=len(model.cards), nf=len(model.factors), nreg=len(R.vars),
                imp0=implicit, status=status, polished=polished, raw_dA=abs(rust["dual_value"] - raw_value - R.constant),
                dA=dA, dmu=dmu, where=where, viol=rust["max_violation"], iters=rust["iterations"],
                gap=gap, rust_s=rust_s, ref_s=ref_s, retried=first is not None, first_dA=first_dA, first_dmu=first_dmu,
                first_iters=(first or rust)["iterations"], first_viol=(first or rust)["max_violation"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--binary", default=os.environ.get("STRUCTLEARN_BIN", "/work/target-cvx/release/structlearn"))
    ap.add_argument("--iterations", type=int, default=20000)
    ap.add_argument("--tolerance", type=float, default=1e-10)
    ap.add_argument("--retry-iterations", type=int, default=1_000_000,
                    help="re-run models not converged within --iterations with this budget (0: never); "
                         "a model that agrees only after the re-run is reported SLOW")
    ap.add_argument("--strict", action="store_true", help="count SLOW models as failures")
    ap.add_argument("--tol", type=float, default=1e-6, help="agreement required for A and every belief")
    ap.add_argument("--keep", help="directory to keep .uai / .json files in")
    ap.add_argument("--no-polish", action="store_true", help="compare the raw cvxpy point (no Newton polish)")
    ap.add_argument("--implicit-zeros", choices=["allow", "reject", "only"], default="allow",
                    help="models with entries forced to 0 by the constraints (not by a zero table entry)")
    ap.add_argument("--uai", nargs="*", help="check these .uai files instead of random ones (with --eps)")
    ap.add_argument("--eps", type=float, nargs="*", help="ε for --uai files (default 0.05 0.1 0.5 1 2)")
    args = ap.parse_args()
    if not os.path.exists(args.binary):
        print(f"binary {args.binary} not found; build it with\n  CARGO_TARGET_DIR=/work/target-cvx cargo build "
              "--release -p structlearn-cli", file=sys.stderr)
        return 2
    workdir = args.keep or tempfile.mkdtemp(prefix="check_infer_")
    os.makedirs(workdir, exist_ok=True)
    t_start = time.time()
    rng = np.random.default_rng(args.seed)
    rows = []
    jobs = []
    if args.uai:
        for path in args.uai:
            with open(path) as f:
                m = Model.parse(f.read())
            for eps in args.eps or EPSILONS:
                jobs.append((os.path.splitext(os.path.basename(path))[0] + f"_eps{eps}", m, eps))
    k = 0
    rejected = 0
    while not args.uai and len(rows) < args.models:
        kind = KINDS[k % len(KINDS)]
        eps = EPSILONS[(k // len(KINDS)) % len(EPSILONS)]
        k += 1
        m = random_model(rng, kind)
        name = f"m{len(rows):03d}_{kind}"
        row = check_model(m, eps, args, workdir, name)
        if row is None or (args.implicit_zeros == "reject" and row["imp0"]) or (
                args.implicit_zeros == "only" and not row["imp0"]):
            rejected += 1
            continue
        rows.append(row)
    for name, m, eps in jobs:
        row = check_model(m, eps, args, workdir, name)
        if row is None:
            print(f"{name}: local polytope is empty (infeasible model)")
            continue
        rows.append(row)
    hdr = (f"{'model':<17}{'eps':>5}{'N':>3}{'F':>4}{'R':>4}{'imp0':>5} {'cvxpy':<9}{'pol':>3}"
           f"{'|dA|cvx':>9}{'|dA|':>9}{'|dmu|':>9}{'viol':>9}{'iters':>7}"
           f"{'|dA|re':>9}{'|dmu|re':>9}{'it re':>8}  verdict, worst at")
    print(hdr)
    print("-" * len(hdr))
    fails, slow = [], []
    for r in rows:
        if "error" in r:
            fails.append(r["name"])
            print(f"{r['name']:<17}{r['eps']:>5g}  FAIL: {r['error']}")
            continue
        ok_first = r["first_dA"] <= args.tol and r["first_dmu"] <= args.tol
        ok_final = r["dA"] <= args.tol and r["dmu"] <= args.tol
        verdict = "ok" if ok_first else ("SLOW" if ok_final and not args.strict else "FAIL")
        if r["gap"] < -1e-9:
            verdict = "FAIL(dual<opt)"
        (fails if verdict.startswith("FAIL") else slow if verdict == "SLOW" else []).append(r["name"])
        re = (f"{r['dA']:>9.1e}{r['dmu']:>9.1e}{r['iters']:>8}" if r["retried"] else f"{'':>9}{'':>9}{'':>8}")
        status = {"optimal": "optimal", "optimal_inaccurate": "opt_inacc"}.get(r["status"], r["status"])
        print(f"{r['name']:<17}{r['eps']:>5g}{r['n']:>3}{r['nf']:>4}{r['nreg']:>4}{r['imp0']:>5} {status:<9}"
              f"{'y' if r['polished'] else 'n':>3}{r['raw_dA']:>9.1e}{r['first_dA']:>9.1e}{r['first_dmu']:>9.1e}"
              f"{r['first_viol']:>9.1e}{r['first_iters']:>7}{re}  {verdict}, {r['where']}")
    print("-" * len(hdr))
    good = [r for r in rows if "error" not in r]
    if good:
        print(f"models: {len(rows)} (rejected while generating: {rejected} infeasible/filtered); "
              f"tolerance {args.tol:g}; Rust --iterations {args.iterations} --tolerance {args.tolerance:g}")
        print(f"  at --iterations: max |dA| = {max(r['first_dA'] for r in good):.2e}, "
              f"max |dmu| = {max(r['first_dmu'] for r in good):.2e}")
        print(f"  final (after re-runs of {sum(r['retried'] for r in good)} unconverged models with "
              f"--iterations {args.retry_iterations}): max |dA| = {max(r['dA'] for r in good):.2e}, "
              f"max |dmu| = {max(r['dmu'] for r in good):.2e}")
        print(f"  weak duality A(lambda) >= A(theta): min (rust - reference) = {min(r['gap'] for r in good):.1e}")
        print(f"  |dA| against the raw cvxpy optimum (no polish): max {max(r['raw_dA'] for r in good):.2e}; "
              f"polished {sum(r['polished'] for r in good)} of {len(good)}")
        print(f"time: total {time.time() - t_start:.1f}s, rust {sum(r['rust_s'] for r in good):.1f}s, "
              f"reference (LPs + cvxpy + polish) {sum(r['ref_s'] for r in good):.1f}s; files in {workdir}")
    if slow:
        print(f"SLOW (agree only after the re-run: slow convergence, not a wrong answer): {', '.join(slow)}")
    print("FAIL" if fails else "OK", f"({len(fails)} of {len(rows)} models beyond {args.tol:g}"
          f"{': ' + ', '.join(fails) if fails else ''})")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
