import numpy as np
import pytest

import structlearn
from structlearn.datasets import make_denoising
from structlearn.oracles import SoftmaxRegression


def test_numpy_softmax_oracle_matches_the_builtin_linear_oracle():
    """A Python oracle of the linear function class, trained by Algorithm 1 on the denoising data,
    reaches the built-in linear oracle's test error within 0.005."""
    X, Y, Xt, Yt = make_denoising(50, 50, 8, 8, random_state=0)
    builtin = structlearn.GridCRF(max_iter=5).fit(X, Y)
    python = structlearn.GridCRF(max_iter=5, unary=SoftmaxRegression(), pairwise=SoftmaxRegression()).fit(X, Y)
    assert python.model_.kinds() == ["python", "python"]
    e_builtin, e_python = 1 - builtin.score(Xt, Yt), 1 - python.score(Xt, Yt)
    assert abs(e_builtin - e_python) <= 0.005, (e_builtin, e_python)
    # Not a model that ignores its input: better than predicting the majority label.
    flat = np.concatenate([y.ravel() for y in Yt])
    assert e_python < min(flat.mean(), 1 - flat.mean())


class Recording:
    """Checks what the protocol promises and counts the calls."""

    def __init__(self):
        self.calls = []

    def fit(self, features, labels, bias, warm_start, sample_weight):
        n, d = features.shape
        assert features.dtype == np.float64 and labels.dtype == np.int64 and bias.dtype == np.float64
        assert labels.shape == (n,) and bias.shape[0] == n and labels.max() < bias.shape[1]
        assert sample_weight is None or sample_weight.shape == (n,)
        self.calls.append((n, d, bias.shape[1], warm_start is not None))
        return SoftmaxRegression(max_iter=3).fit(features, labels, bias, warm_start, sample_weight)


def test_protocol_and_warm_start(chain_data):
    X, Y = chain_data
    unary, pairwise = Recording(), Recording()
    est = structlearn.GraphCRF(max_iter=3, unary=unary, pairwise=pairwise).fit(X, Y)
    assert [c[3] for c in unary.calls] == [False, True, True]
    assert unary.calls[0][1:3] == (2, 2) and pairwise.calls[0][1:3] == (1, 4)
    assert est.score(X, Y) > 0.6


def test_a_checkpoint_needs_builtin_oracles(chain_data, tmp_path):
    X, Y = chain_data
    est = structlearn.GraphCRF(max_iter=2, unary=SoftmaxRegression(l2=0.1), checkpoint=tmp_path / "run.ckpt")
    with pytest.raises(ValueError, match="Python oracle"):
        est.fit(X, Y)
    assert not (tmp_path / "run.ckpt").exists()


def test_python_oracle_with_builtin_and_pickle(chain_data, tmp_path):
    X, Y = chain_data
    est = structlearn.GraphCRF(max_iter=2, unary=SoftmaxRegression(l2=0.1), pairwise="linear").fit(X, Y)
    assert est.model_.kinds() == ["python", "linear"]
    est.save(tmp_path / "m.slm")
    back = structlearn.GraphCRF.load(tmp_path / "m.slm")
    assert [p.tolist() for p in back.predict(X)] == [p.tolist() for p in est.predict(X)]


class Raising:
    def fit(self, features, labels, bias, warm_start, sample_weight):
        raise ZeroDivisionError("inside the oracle")


class ReturnsNone:
    def fit(self, features, labels, bias, warm_start, sample_weight):
        return None


class WrongShape:
    def fit(self, features, labels, bias, warm_start, sample_weight):
        return self

    def scores(self, features):
        return np.zeros((features.shape[0], 1))


@pytest.mark.parametrize(
    "oracle, error, pattern",
    [
        (Raising(), ZeroDivisionError, "inside the oracle"),
        (ReturnsNone(), TypeError, "returned None"),
        (WrongShape(), ValueError, r"returned shape \(\d+, 1\), expected \(\d+, 2\)"),
    ],
)
def test_python_oracle_errors_propagate(chain_data, oracle, error, pattern):
    X, Y = chain_data
    with pytest.raises(error, match=pattern):
        structlearn.GraphCRF(max_iter=2, unary=oracle).fit(X, Y)
