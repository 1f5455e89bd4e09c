"""Any Python model as an energy: the Python oracle protocol and a reference implementation.

A Python oracle is any object with

``fit(features, labels, bias, warm_start, sample_weight) -> model``
    * ``features``: float64 ``(n, d)``, one row per region of the factor type (per node for
      ``unary``, per edge for ``pairwise``);
    * ``labels``: int64 ``(n,)``, each row's observed configuration ``y_k`` in ``0..C-1`` (for a
      pair: ``y_i * n_states + y_j``);
    * ``bias``: float64 ``(n, C)``, the fixed per-row bias ``b_k(y)`` that message passing computed
      (entries may be ``-inf``: ruled-out configurations);
    * ``warm_start``: the model this oracle returned at the previous learning iteration for this
      factor type, or None;
    * ``sample_weight``: float64 ``(n,)`` row weights ``w_k``, or None (all 1),

and the returned model has ``scores(features) -> (n, C)`` array: the energy ``g(φ, y)``. The fit
should lower the *biased logistic loss*

    L(g) = Σ_k w_k [ log Σ_y exp(g(φ_k, y) + b_k(y)) − g(φ_k, y_k) − b_k(y_k) ]

(plus the oracle's own regulariser, reported by an optional ``penalty(model) -> float``). Algorithm 1
calls ``fit`` once per factor type per learning iteration, between rounds of message passing; a fit
whose objective is higher than the warm start's is rejected and the warm start kept. The model must
be picklable: model files store it as its pickle (kind ``python``), so only Python can read them.
"""

from __future__ import annotations

import numpy as np


class LinearScores:
    """The model of :class:`SoftmaxRegression`: ``g(φ, y) = (W φ)_y``."""

    def __init__(self, coef):
        self.coef_ = np.asarray(coef, dtype=np.float64)

    def scores(self, features):
        """``features @ coef_.T``: ``(n, C)``."""
        return features @ self.coef_.T


def _objective(W, X, labels, bias, weights, l2):
    z = X @ W.T + bias
    m = np.max(z, axis=1, keepdims=True)
    p = np.exp(z - m)
    s = p.sum(axis=1, keepdims=True)
    lse = (m + np.log(s)).ravel()
    rows = np.arange(X.shape[0])
    loss = float(np.dot(weights, lse - z[rows, labels])) + 0.5 * l2 * float(np.sum(W * W))
    return loss, p / s


class SoftmaxRegression:
    """Linear softmax regression with a per-row bias, fitted by Newton's method — the function class
    of the built-in ``linear`` oracle (no intercept; features are used as given), in numpy.

    Parameters
    ----------
    l2 : float, default=0.0
        Ridge ``(l2 / 2) ‖W‖²`` (the built-in oracle's ``l2``).
    max_iter : int, default=50
        Most Newton steps per fit.
    tol : float, default=1e-10
        Stop once a step lowers the objective by less than ``tol`` relative to it.
    """

    def __init__(self, l2=0.0, max_iter=50, tol=1e-10):
        self.l2 = l2
        self.max_iter = max_iter
        self.tol = tol

    def fit(self, features, labels, bias, warm_start=None, sample_weight=None):
        """Minimise the biased logistic loss from ``warm_start``; returns a :class:`LinearScores`."""
        n, d = features.shape
        c = bias.shape[1]
        w = np.ones(n) if sample_weight is None else sample_weight
        W = np.zeros((c, d)) if warm_start is None else warm_start.coef_.copy()
        onehot = np.zeros((n, c))
        onehot[np.arange(n), labels] = 1.0
        f, p = _objective(W, features, labels, bias, w, self.l2)
        for _ in range(self.max_iter):
            g = ((p - onehot) * w[:, None]).T @ features + self.l2 * W
            # Hessian of the softmax loss: Σ_k w_k (diag(p_k) − p_k p_kᵀ) ⊗ x_k x_kᵀ.
            wp = p * w[:, None]
            H = np.einsum("kc,ki,kj->cij", wp, features, features)
            H = np.einsum("cd,cij->cidj", np.eye(c), H) - np.einsum("kc,ke,ki,kj->ciej", wp, p, features, features)
            H = H.reshape(c * d, c * d) + (self.l2 + 1e-9) * np.eye(c * d)
            step = np.linalg.lstsq(H, g.reshape(-1), rcond=None)[0].reshape(c, d)
            t = 1.0
            while t > 1e-8:
                trial = W - t * step
                ft, pt = _objective(trial, features, labels, bias, w, self.l2)
                if ft <= f - 1e-4 * t * float(np.sum(g * step)):
                    break
                t *= 0.5
            else:
                break
            done = f - ft <= self.tol * max(abs(f), 1.0)
            W, f, p = trial, ft, pt
            if done:
                break
        return LinearScores(W)

    def penalty(self, model):
        """The ridge term of ``model``."""
        return 0.5 * self.l2 * float(np.sum(model.coef_**2))
