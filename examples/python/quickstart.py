import structlearn
from structlearn.datasets import make_denoising

# 8 + 8 noisy 50×50 binary images: X items are (image (50, 50, 2), pair features), Y label maps.
X_train, Y_train, X_test, Y_test = make_denoising(n_train=8, n_test=8, random_state=0)
crf = structlearn.GridCRF(unary="boosting", pairwise="linear", max_iter=5)
crf.fit(X_train, Y_train)
labels = crf.predict(X_test)                      # one (50, 50) label map per image
beliefs = crf.predict_marginals(X_test)           # (50, 50, 2) smoothed LP beliefs per image
print(f"test error {1 - crf.score(X_test, Y_test):.3f}; {labels[0].shape} labels, {beliefs[0].shape} beliefs")
crf.save("denoising.slm")                         # `structlearn predict --model denoising.slm ...` reads it
