"""Grid segmentation of synthetic images with structlearn.GridCRF.

Images are made here (no download): each is a few random rectangles of 3 classes, observed as a
noisy 3-channel image. Pair features are built from the images (edge_features='difference':
[1, |x_i - x_j|] per channel), so label changes are cheap where the image changes.

    pip install ./crates/structlearn-py
    python examples/python/grid_segmentation.py
"""

import numpy as np

import structlearn


def make_images(n, size=32, classes=3, seed=0):
    rng = np.random.RandomState(seed)
    colours = rng.rand(classes, 3)
    X, Y = [], []
    for _ in range(n):
        y = np.zeros((size, size), dtype=np.int64)
        for c in range(1, classes):
            for _ in range(2):
                r, s = rng.randint(0, size - 8, size=2)
                h, w = rng.randint(6, 16, size=2)
                y[r : r + h, s : s + w] = c
        image = colours[y] + 0.35 * rng.randn(size, size, 3)
        X.append(np.concatenate([image, np.ones((size, size, 1))], axis=2))  # a constant: per-class offsets
        Y.append(y)
    return X, Y


X_train, Y_train = make_images(20, seed=0)
X_test, Y_test = make_images(10, seed=1)
for name, pairwise in (("no pairwise energy", "zero"), ("linear pairwise", "linear")):
    crf = structlearn.GridCRF(unary="linear", pairwise=pairwise, eps=1.0, max_iter=10, random_state=0)
    crf.fit(X_train, Y_train, X_val=X_test, Y_val=Y_test)
    print(f"{name:>20}: test error {1 - crf.score(X_test, Y_test):.3f} "
          f"(validation error by iteration: {[round(r['validation_error'], 3) for r in crf.history_]})")
