"""Input checks: every bad input is a ``ValueError`` or ``TypeError`` that names
the argument, the example index and the expected shape or range."""

from __future__ import annotations

import numbers

import numpy as np


def _describe(value):
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    return f"{type(value).__name__}"


def as_list(value, name, what):
    """A non-empty list of examples (list, tuple or array along axis 0)."""
    if isinstance(value, (str, bytes, dict)) or value is None:
        raise TypeError(f"{name}: expected a list of {what}, got {_describe(value)}")
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{name}: expected a list of {what}, got {_describe(value)}") from None
    if not items:
        raise ValueError(f"{name}: the list is empty; at least one example ({what}) is needed")
    return items


def float_matrix(value, where, cols=None, cols_like=None):
    """A C-contiguous float64 copy of a finite 2-d numeric array."""
    arr = np.asarray(value)
    if arr.dtype == object or not (arr.dtype.kind in "biuf"):
        raise TypeError(f"{where}: expected a numeric array, got {_describe(arr)}")
    if arr.ndim != 2:
        expected = f"(n, {cols})" if cols is not None else "(n, n_features)"
        raise ValueError(f"{where}: expected a 2-d array of shape {expected}, got shape {arr.shape}")
    if cols is not None and arr.shape[1] != cols:
        like = f" like {cols_like}" if cols_like else ""
        raise ValueError(
            f"{where}: expected shape ({arr.shape[0]}, {cols}){like} (every example must have the same number "
            f"of features), got {arr.shape}"
        )
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(f"{where}: entry {tuple(int(i) for i in bad)} is {arr[tuple(bad)]}; features must be finite")
    return arr


def int_array(value, where, ndim):
    """A C-contiguous int64 copy of an integer array."""
    arr = np.asarray(value)
    if arr.size == 0 and arr.dtype.kind == "f":
        arr = arr.astype(np.int64)
    if arr.dtype == object or arr.dtype.kind not in "biu":
        raise TypeError(f"{where}: expected integers, got {_describe(arr)}")
    if arr.ndim != ndim:
        raise ValueError(f"{where}: expected a {ndim}-d array, got shape {arr.shape}")
    return np.ascontiguousarray(arr, dtype=np.int64)


def check_edges(edges, n_nodes, where):
    """Edges as int64 ``(m, 2)``: in range, no self-loops, no repeated pair."""
    arr = np.asarray(edges)
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    arr = int_array(arr, where, 2)
    if arr.shape[1] != 2:
        raise ValueError(f"{where}: expected shape (n_edges, 2), got {arr.shape}")
    bad = np.flatnonzero((arr < 0).any(axis=1) | (arr >= n_nodes).any(axis=1))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{where}: edge {i} is {tuple(int(v) for v in arr[i])}; node indices must be in 0..{n_nodes - 1} "
            f"(the example has {n_nodes} nodes)"
        )
    loops = np.flatnonzero(arr[:, 0] == arr[:, 1])
    if loops.size:
        i = int(loops[0])
        raise ValueError(f"{where}: edge {i} is a self-loop ({int(arr[i, 0])}, {int(arr[i, 1])})")
    key = np.sort(arr, axis=1)
    _, first, counts = np.unique(key, axis=0, return_index=True, return_counts=True)
    if (counts > 1).any():
        pair = key[first[np.argmax(counts > 1)]]
        raise ValueError(f"{where}: the edge {tuple(int(v) for v in pair)} is given more than once")
    return arr


def check_labels(value, n, where, n_states=None):
    """Labels as int64 ``(n,)`` in ``-1..n_states-1`` (−1: unknown)."""
    arr = np.asarray(value)
    if arr.dtype.kind == "f" and arr.size and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        raise TypeError(f"{where}: expected integer labels, got dtype {arr.dtype} (convert with .astype(int))")
    arr = int_array(arr, where, arr.ndim if arr.ndim else 1).reshape(-1)
    if arr.shape[0] != n:
        raise ValueError(f"{where}: expected {n} labels (one per node), got {arr.shape[0]}")
    if (arr < -1).any():
        raise ValueError(f"{where}: label {int(arr[arr < -1][0])} is out of range (−1 means unknown; labels are ≥ 0)")
    if n_states is not None and (arr >= n_states).any():
        raise ValueError(
            f"{where}: label {int(arr[arr >= n_states][0])} is out of range 0..{n_states - 1} (n_states={n_states})"
        )
    return arr


def seed_of(random_state):
    """An int seed from ``random_state`` (None → 0: runs are reproducible by default)."""
    if random_state is None:
        return 0
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1))
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0 or random_state >= 2**64:
            raise ValueError(f"random_state: {random_state} is out of range 0..2**64-1")
        return int(random_state)
    raise TypeError(f"random_state: expected None, an int or a numpy RandomState/Generator, got {_describe(random_state)}")


def positive_number(value, name, integer=False, minimum=None, allow_none=False):
    if value is None and allow_none:
        return None
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name}: expected {'an int' if integer else 'a number'}, got {_describe(value)}")
    if not np.isfinite(value):
        raise ValueError(f"{name}: {value} is not a finite number")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}: {value} is out of range (at least {minimum})")
    return int(value) if integer else float(value)
