import os
import shutil
from pathlib import Path

import pytest

from structlearn.datasets import make_denoising

ROOT = Path(__file__).resolve().parents[3]


def _cli():
    given = os.environ.get("STRUCTLEARN_CLI")
    if given:
        return given
    for profile in ("release", "debug"):
        p = ROOT / "target" / profile / "structlearn"
        if p.exists():
            return str(p)
    return shutil.which("structlearn")


@pytest.fixture(scope="session")
def cli():
    path = _cli()
    if path is None:
        if os.environ.get("STRUCTLEARN_REQUIRE_CLI"):
            pytest.fail("the structlearn command is not built (cargo build -p structlearn-cli) and STRUCTLEARN_REQUIRE_CLI is set")
        pytest.skip("the structlearn command is not built (cargo build -p structlearn-cli)")
    return path


@pytest.fixture(scope="session")
def grid_data():
    return make_denoising(32, 32, 6, 6, sigma=5.0, random_state=1)


@pytest.fixture(scope="session")
def graph_data():
    return make_denoising(32, 32, 6, 6, sigma=5.0, random_state=1, format="graph")


def make_chains(n_examples=10, n=6, seed=0):
    """Small chains (exact inference is possible): labels switch once, noisy features with a constant."""
    import numpy as np

    rng = np.random.RandomState(seed)
    X, Y = [], []
    for _ in range(n_examples):
        cut = rng.randint(1, n)
        y = (np.arange(n) >= cut).astype(np.int64)
        X.append((np.c_[y + 0.7 * rng.randn(n), np.ones(n)], np.c_[np.arange(n - 1), np.arange(1, n)]))
        Y.append(y)
    return X, Y


@pytest.fixture(scope="session")
def chain_data():
    return make_chains()
