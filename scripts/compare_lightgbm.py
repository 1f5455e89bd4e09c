#!/usr/bin/env python3
"""Compare LightGBM with the boosting oracle on a denoising-like oracle problem.

Dev tool, not run in CI. Needs `pip install lightgbm numpy`.

The problem is biased multiclass logistic regression (docs/MATH.md §4), drawn like
`denoising_like` in `benches/oracles.rs` (the `boosting` group's first shape is
160,000 rows, 2 classes, margin 10): features [u, 1.0] with u ~ U(0, 1); label
floor(C · clamp(u + U(-0.15, 0.15), 0, 1)); bias b_k(y) = margin · [y != y_k] +
U(-2, 2), passed to LightGBM as `init_score`. NumPy draws its own rows, so the
data are the same distribution, not the same rows; `--load DIR` reads rows
written by `--dump` (x.f64 rows × dim, labels.u32, bias.f64 rows × classes,
little-endian, row-major, and shape.txt "rows dim classes"), so any problem
dumped in that format can be compared.

LightGBM is run as close to the chapter's boosting (§1.9.4) as its options allow:
200 rounds, learning rate 0.25, bagging of 10,000 rows per round
(bagging_fraction = 10000/n, bagging_freq = 1), min_data_in_leaf = 1% of
10,000, one thread. Differences that remain: LightGBM grows one tree per class
per round (31 leaves by default) with Newton leaf values; the oracle grows one
multi-output tree per round and re-fits its leaves by L-BFGS.

Prints the wall and CPU time of `lightgbm.train` (the Dataset, i.e. LightGBM's
binning, is built before the clock starts) and the full-data training loss
L = Σ_k [logsumexp(s_k + b_k) − s_k(y_k) − b_k(y_k)] (and per row).

    python3 scripts/compare_lightgbm.py [--rows 160000] [--classes 2] [--margin 10]
        [--rounds 200] [--threads 1] [--seed 0] [--lambda-l2 0] [--curve] [--dump DIR | --load DIR]
"""

import argparse
import os
import time

import numpy as np


def denoising_like(rows, classes, margin, seed):
    rng = np.random.default_rng(seed)
    u = rng.random(rows)
    noisy = np.clip(u + rng.uniform(-0.15, 0.15, rows), 0.0, 1.0 - 1e-12)
    labels = (noisy * classes).astype(np.int64)
    x = np.column_stack([u, np.ones(rows)])
    wrong = np.arange(classes)[None, :] != labels[:, None]
    bias = margin * wrong + rng.uniform(-2.0, 2.0, (rows, classes))
    return x, labels, bias


def loss(scores, bias, labels):
    z = scores + bias
    m = z.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(z - m).sum(axis=1))
    return float((lse - z[np.arange(len(labels)), labels]).sum())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=160_000)
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--margin", type=float, default=10.0, help="bias added to the wrong labels (Δ/ε)")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--subsample", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lambda-l2", type=float, default=0.0, help="LightGBM's leaf ridge (its default 0)")
    ap.add_argument("--curve", action="store_true", help="also print the loss after 1, 5, 10, 20, 50, 100, ... rounds")
    ap.add_argument("--dump", help="write the generated rows to this directory")
    ap.add_argument("--load", help="read rows written by --dump (or by the Rust side) from this directory")
    args = ap.parse_args()

    import lightgbm as lgb

    if args.load:
        rows, dim, classes = map(int, open(os.path.join(args.load, "shape.txt")).read().split())
        x = np.fromfile(os.path.join(args.load, "x.f64"), dtype="<f8").reshape(rows, dim)
        labels = np.fromfile(os.path.join(args.load, "labels.u32"), dtype="<u4").astype(np.int64)
        bias = np.fromfile(os.path.join(args.load, "bias.f64"), dtype="<f8").reshape(rows, classes)
    else:
        x, labels, bias = denoising_like(args.rows, args.classes, args.margin, args.seed)
        rows, classes = args.rows, args.classes
    if args.dump:
        os.makedirs(args.dump, exist_ok=True)
        x.astype("<f8").tofile(os.path.join(args.dump, "x.f64"))
        labels.astype("<u4").tofile(os.path.join(args.dump, "labels.u32"))
        bias.astype("<f8").tofile(os.path.join(args.dump, "bias.f64"))
        with open(os.path.join(args.dump, "shape.txt"), "w") as f:
            f.write(f"{rows} {x.shape[1]} {classes}\n")

    params = {
        "objective": "multiclass",
        "num_class": classes,
        "learning_rate": 0.25,
        "bagging_fraction": min(1.0, args.subsample / rows),
        "bagging_freq": 1,
        "bagging_seed": args.seed,
        "min_data_in_leaf": max(1, round(0.01 * min(args.subsample, rows))),
        "lambda_l2": args.lambda_l2,
        "num_threads": args.threads,
        "verbosity": -1,
        "deterministic": True,
    }
    data = lgb.Dataset(x, label=labels, init_score=bias, free_raw_data=False)
    data.construct()
    wall, cpu = time.perf_counter(), time.process_time()
    booster = lgb.train(params, data, num_boost_round=args.rounds)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    # raw_score excludes init_score: add the bias back for the oracle's loss.
    scores = booster.predict(x, raw_score=True).reshape(rows, classes)
    zero = loss(np.zeros_like(bias), bias, labels)
    fitted = loss(scores, bias, labels)
    print(f"lightgbm {lgb.__version__}: {rows} rows x {x.shape[1]} features, {classes} classes, {args.rounds} rounds, "
          f"{args.threads} thread(s)")
    print(f"  train: {wall:.3f} s wall, {cpu:.3f} s cpu")
    print(f"  loss:  {fitted:.2f} (per row {fitted / rows:.5f}); bias only {zero:.2f} (per row {zero / rows:.5f})")
    if args.curve:
        marks = [r for r in (1, 5, 10, 20, 50, 100, 200, 500, 1000) if r <= args.rounds]
        curve = []
        for r in marks:
            s = booster.predict(x, raw_score=True, num_iteration=r).reshape(rows, classes)
            curve.append(f"{r}: {loss(s, bias, labels) / rows:.5f}")
        print("  loss per row by round: " + ", ".join(curve))


if __name__ == "__main__":
    main()
