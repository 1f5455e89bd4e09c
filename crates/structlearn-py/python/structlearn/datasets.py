"""Data sets: the synthetic denoising data of NIPS 2013 §5.1, as estimator inputs."""

from __future__ import annotations

from . import _core


def make_denoising(height=50, width=50, n_train=8, n_test=8, sigma=10.0, random_state=0, format="grid"):
    """Noisy binary images (the data of ``cargo xtask reproduce``, bit for bit).

    Each image is blurred uniform noise thresholded at 0.5 (the labels); a pixel's features are
    ``[a, 1]`` with ``a`` uniform noise around its label, a pair's ``[u, 1]`` with ``u`` lower for
    equal labels.

    Parameters
    ----------
    height, width : int
        Image size.
    n_train, n_test : int
        Numbers of images.
    sigma : float
        Blur (pixels).
    random_state : int
        Seed.
    format : {'grid', 'graph'}
        ``'grid'``: ``X`` items are ``(image (H, W, 2), edge_features (n_pairs, 2))`` for :class:`GridCRF`;
        ``'graph'``: ``(node_features, edges, edge_features)`` for :class:`GraphCRF`.

    Returns
    -------
    X_train, Y_train, X_test, Y_test
    """
    train, test = _core.denoising(int(height), int(width), int(n_train), int(n_test), float(sigma), int(random_state))
    return (*_to_estimator_format(train, format), *_to_estimator_format(test, format))


def make_scene(n_train=572, n_test=143, height=48, width=64, n_states=8, n_features=42, n_edge_features=3,
               random_state=0, format="graph"):
    """Stanford-Background-shaped synthetic scenes (what ``cargo xtask bench-scale`` trains on).

    Returns
    -------
    X_train, Y_train, X_test, Y_test
        In ``format`` (``'graph'`` for :class:`GraphCRF`, ``'grid'`` for :class:`GridCRF`).
    """
    train, test = _core.scene(int(n_train), int(n_test), int(height), int(width), int(n_states), int(n_features),
                              int(n_edge_features), int(random_state))
    return (*_to_estimator_format(train, format), *_to_estimator_format(test, format))


def _to_estimator_format(data, format):
    if format not in ("graph", "grid"):
        raise ValueError(f"format: {format!r} is not 'graph' or 'grid'")
    names = [t[0] for t in data.factor_types()]
    if names != ["unary", "pairwise"]:
        raise ValueError(f"the data set's factor types are {names}; the estimators need ['unary', 'pairwise']")
    X, Y = [], []
    for k, ex in enumerate(data.to_examples()):
        nodes, pair = ex["features"]
        if format == "grid":
            if ex["grid"] is None:
                raise ValueError(f"example {k} ({ex['name']}) is not a 4-connected grid; use format='graph'")
            h, w = ex["grid"]
            X.append((nodes.reshape(h, w, -1), pair))
            Y.append(None if ex["labels"] is None else ex["labels"].reshape(h, w))
        else:
            X.append((nodes, ex["scopes"][0], pair))
            Y.append(ex["labels"])
    return X, Y
