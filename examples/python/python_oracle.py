"""Any Python model as an energy: a small numpy softmax regression trained by Algorithm 1.

An oracle is an object with fit(features, labels, bias, warm_start, sample_weight) returning a
model with scores(features) -> (n, n_classes). Algorithm 1 calls fit once per factor type per
learning iteration, between rounds of message passing, and the fit must lower the biased
logistic loss

    L(g) = sum_k w_k [ log sum_y exp(g(x_k, y) + b_k(y)) - g(x_k, y_k) - b_k(y_k) ]

(docs/guide/python.md). This one takes plain gradient steps, warm-started from its last model;
structlearn.oracles.SoftmaxRegression is the same function class fitted by Newton's method.
"""

import numpy as np

import structlearn
from structlearn.datasets import make_denoising


class Scores:
    def __init__(self, W):
        self.W = W

    def scores(self, features):
        return features @ self.W.T


class GradientSoftmax:
    def __init__(self, steps=100, learning_rate=1.0):
        self.steps = steps
        self.learning_rate = learning_rate

    def fit(self, features, labels, bias, warm_start, sample_weight):
        n, d = features.shape
        W = np.zeros((bias.shape[1], d)) if warm_start is None else warm_start.W.copy()
        w = np.ones(n) if sample_weight is None else sample_weight
        onehot = np.eye(bias.shape[1])[labels]
        for _ in range(self.steps):
            z = features @ W.T + bias
            p = np.exp(z - z.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            W -= self.learning_rate * (((p - onehot) * w[:, None]).T @ features) / w.sum()
        return Scores(W)


X_train, Y_train, X_test, Y_test = make_denoising(n_train=8, n_test=8, random_state=0)
builtin = structlearn.GridCRF(max_iter=5).fit(X_train, Y_train)
mine = structlearn.GridCRF(max_iter=5, unary=GradientSoftmax(), pairwise=GradientSoftmax(), verbose=1)
mine.fit(X_train, Y_train)
newton = structlearn.oracles.SoftmaxRegression()
reference = structlearn.GridCRF(max_iter=5, unary=newton, pairwise=newton).fit(X_train, Y_train)
print(f"built-in linear oracle:           test error {1 - builtin.score(X_test, Y_test):.4f}")
print(f"numpy gradient steps (this file): test error {1 - mine.score(X_test, Y_test):.4f}")
print(f"numpy Newton (oracles.SoftmaxRegression): test error {1 - reference.score(X_test, Y_test):.4f}")
