"""GraphCRF.fit / predict against `structlearn train` / `predict` on the same Stanford-shaped data.

    python scripts/bench_python_overhead.py target/release/structlearn [N_IMAGES [REPEATS]]

Needs the package (pip install ./crates/structlearn-py) and a release build of the CLI
(cargo build --release -p structlearn-cli). Linear/linear, 2 learning iterations, 2 threads on
both sides; each repeat times the CLI, then the estimator, and checks the model bytes are equal.
Writes scene.sld, cli.slm and pred.json into the current folder.
"""

import os
import subprocess
import sys
import time

import structlearn
from structlearn.datasets import make_scene

cli = sys.argv[1]
n_images = int(sys.argv[2]) if len(sys.argv) > 2 else 572
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 1
X, Y, _, _ = make_scene(n_train=n_images, n_test=1)
est = structlearn.GraphCRF(max_iter=2, n_jobs=2)
est.save_dataset("scene.sld", X, Y)


def timed(args):
    t = time.perf_counter()
    subprocess.run([cli, "--threads", "2", "-q", *args], check=True)
    return time.perf_counter() - t


for rep in range(repeats):
    train = ["train", "--data", "scene.sld", "--model", "cli.slm", "--iterations", "2"]
    tc = timed(train + ["--oracle", "unary=linear", "--oracle", "pairwise=linear"])
    t = time.perf_counter()
    est.fit(X, Y)
    tp = time.perf_counter() - t
    same = open("cli.slm", "rb").read() == est.model_bytes_
    cp = timed(["predict", "--model", "cli.slm", "--data", "scene.sld", "--output", "pred.json"])
    t = time.perf_counter()
    est.predict(X)
    pp = time.perf_counter() - t
    print(
        f"{n_images} images, repeat {rep}: train CLI {tc:.2f} s, GraphCRF.fit {tp:.2f} s ({100 * (tp / tc - 1):+.1f}%), "
        f"same bytes {same}; predict CLI {cp:.2f} s, GraphCRF.predict {pp:.2f} s ({100 * (pp / cp - 1):+.1f}%); "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
