"""Every bad input is a ValueError or TypeError naming the argument, the example and what was expected."""

import numpy as np
import pytest

import structlearn


def good(n=4, f=2):
    return (np.ones((n, f)), np.c_[np.arange(n - 1), np.arange(1, n)])


Y_OK = [np.array([0, 1, 0, 1])] * 2


@pytest.mark.parametrize(
    "X, Y, error, pattern",
    [
        ([], [], ValueError, r"X: the list is empty"),
        (None, Y_OK, TypeError, r"X: expected a list"),
        ([good(), np.ones((4, 2))], Y_OK, TypeError, r"X\[1\]: expected a tuple"),
        ([good(), (np.ones((4, 3)), good()[1])], Y_OK, ValueError, r"X\[1\]\[0\] \(node_features\): expected shape \(4, 2\)"),
        ([good(), (np.ones(4), good()[1])], Y_OK, ValueError, r"X\[1\]\[0\].*2-d"),
        ([good(), (np.array([["a", "b"]] * 4), good()[1])], Y_OK, TypeError, r"X\[1\]\[0\].*numeric"),
        ([good(), (np.full((4, 2), np.nan), good()[1])], Y_OK, ValueError, r"X\[1\]\[0\].*nan.*finite"),
        ([good(), (np.full((4, 2), np.inf), good()[1])], Y_OK, ValueError, r"X\[1\]\[0\].*inf"),
        ([good(), (np.ones((4, 2)), [[0, 4]])], Y_OK, ValueError, r"X\[1\]\[1\] \(edges\): edge 0 is \(0, 4\).*0\.\.3"),
        ([good(), (np.ones((4, 2)), [[-1, 2]])], Y_OK, ValueError, r"X\[1\]\[1\] \(edges\).*out|0\.\.3"),
        ([good(), (np.ones((4, 2)), [[1, 1]])], Y_OK, ValueError, r"X\[1\]\[1\] \(edges\): edge 0 is a self-loop"),
        ([good(), (np.ones((4, 2)), [[0, 1], [1, 0]])], Y_OK, ValueError, r"X\[1\]\[1\].*more than once"),
        ([good(), (np.ones((4, 2)), [[0.0, 1.0]])], Y_OK, TypeError, r"X\[1\]\[1\] \(edges\): expected integers"),
        ([good(), (np.ones((4, 2)), [[0, 1, 2]])], Y_OK, ValueError, r"X\[1\]\[1\].*\(n_edges, 2\)"),
        ([good(), (*good(), np.ones((3, 1)))], Y_OK, ValueError, r"X\[1\]: has 3 parts but X\[0\] has 2"),
        ([(*good(), np.ones((3, 1))), (*good(), np.ones((2, 1)))], Y_OK, ValueError, r"X\[1\]\[2\] \(edge_features\): expected 3 rows"),
        ([good(), good()], [np.array([0, 1, 0])] * 2, ValueError, r"Y\[0\]: expected 4 labels"),
        ([good(), good()], [np.array([0, 1, 0, 1])], ValueError, r"Y: 1 label arrays for 2 examples"),
        ([good(), good()], [np.array([0, 1, 0, 1.0])] * 2, TypeError, r"Y\[0\]: expected integer labels"),
        ([good(), good()], [np.array([0, 1, 0, -2])] * 2, ValueError, r"Y\[0\]: label -2"),
        ([good(), good()], [np.array([-1, -1, -1, -1])] * 2, ValueError, r"Y: fewer than two distinct labels"),
    ],
)
def test_bad_training_input(X, Y, error, pattern):
    with pytest.raises(error, match=pattern):
        structlearn.GraphCRF(max_iter=1).fit(X, Y)


def test_labels_out_of_range_with_n_states():
    with pytest.raises(ValueError, match=r"Y\[1\]: label 2 is out of range 0\.\.1"):
        structlearn.GraphCRF(n_states=2, max_iter=1).fit([good(), good()], [np.array([0, 1, 0, 1]), np.array([0, 2, 0, 1])])


def test_bad_grid_input():
    img = np.ones((3, 3, 2))
    y = np.zeros((3, 3), dtype=int)
    y[0, 0] = 1
    with pytest.raises(ValueError, match=r"Y\[0\]: expected a label map of shape \(3, 3\)"):
        structlearn.GridCRF(max_iter=1).fit([img], [np.zeros((3, 4), dtype=int)])
    with pytest.raises(ValueError, match=r"X\[0\]: expected an image of shape \(H, W, n_features\)"):
        structlearn.GridCRF(max_iter=1).fit([np.ones(3)], [y])
    with pytest.raises(ValueError, match=r"X\[0\]\[1\] \(edge_features\): expected 12 rows"):
        structlearn.GridCRF(max_iter=1).fit([(img, np.ones((5, 1)))], [y])
    with pytest.raises(ValueError, match="edge_features"):
        structlearn.GridCRF(max_iter=1, edge_features="sobel").fit([img], [y])


@pytest.mark.parametrize(
    "params, error, pattern",
    [
        (dict(eps=0.0), ValueError, "eps"),
        (dict(eps="big"), TypeError, "eps"),
        (dict(message_passing_iterations=0), ValueError, "message_passing_iterations"),
        (dict(learner="sgd"), ValueError, "learner"),
        (dict(unary=3), TypeError, "unary"),
        (dict(unary={"rounds": 3}), ValueError, "unary"),
        (dict(n_jobs=0), ValueError, "n_jobs|thread"),
        (dict(random_state=-1), ValueError, "random_state"),
        (dict(random_state="x"), TypeError, "random_state"),
        (dict(callback=3), TypeError, "callback"),
    ],
)
def test_bad_settings(params, error, pattern):
    y = np.array([0, 1, 0, 1])
    with pytest.raises(error, match=pattern):
        structlearn.GraphCRF(max_iter=1, **params).fit([good()], [y])


def test_non_contiguous_and_read_only_arrays_are_accepted():
    rng = np.random.RandomState(0)
    big = rng.rand(8, 6)
    feats = big[::2, ::3]  # non-contiguous view (4, 2)
    assert not feats.flags["C_CONTIGUOUS"]
    edges = np.c_[np.arange(3), np.arange(1, 4)]
    edges.setflags(write=False)
    feats_ro = np.array(feats)
    feats_ro.setflags(write=False)
    y = np.array([0, 1, 1, 0], dtype=np.int32)
    est = structlearn.GraphCRF(max_iter=1).fit([(feats, edges), (feats_ro, edges.T.copy().T)], [y, y])
    assert est.predict([(feats, edges)])[0].shape == (4,)


def test_predict_checks_against_the_fitted_shapes():
    est = structlearn.GraphCRF(max_iter=1).fit([good()], [np.array([0, 1, 0, 1])])
    with pytest.raises(ValueError, match=r"X\[0\]\[0\] \(node_features\): expected shape \(4, 2\)"):
        est.predict([good(4, 3)])
    with pytest.raises(ValueError, match=r"X\[0\]\[2\] \(edge_features\): expected shape \(3, 1\)"):
        est.predict([(*good(), np.ones((3, 2)))])
