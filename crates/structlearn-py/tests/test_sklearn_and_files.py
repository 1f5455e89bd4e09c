import json
import pickle
import subprocess

import numpy as np
import pytest

import structlearn


def test_get_set_params_clone():
    sklearn = pytest.importorskip("sklearn")
    from sklearn.base import clone

    est = structlearn.GraphCRF(eps=0.5, unary={"kind": "boosting", "rounds": 3})
    params = est.get_params()
    assert params["eps"] == 0.5 and params["unary"] == {"kind": "boosting", "rounds": 3}
    twin = clone(est)
    assert twin is not est and twin.get_params() == params and not hasattr(twin, "model_")
    assert est.set_params(eps=2.0) is est and est.eps == 2.0
    with pytest.raises(ValueError, match="invalid parameter"):
        est.set_params(epsilon=1.0)
    assert "eps=2.0" in repr(est)


def test_grid_search_over_eps(graph_data):
    pytest.importorskip("sklearn")
    from sklearn.model_selection import GridSearchCV

    X, Y, _, _ = graph_data
    search = GridSearchCV(structlearn.GraphCRF(max_iter=2), {"eps": [0.1, 1.0]}, cv=2)
    search.fit(X, Y)
    assert search.best_params_["eps"] in (0.1, 1.0)
    assert len(search.cv_results_["mean_test_score"]) == 2
    assert 0 < search.score(X, Y) <= 1


def test_pickle_and_joblib_round_trip(grid_data, tmp_path):
    X, Y, Xt, _ = grid_data
    est = structlearn.GridCRF(max_iter=2).fit(X, Y)
    back = pickle.loads(pickle.dumps(est))
    assert back.model_bytes_ == est.model_bytes_ and back.history_ == est.history_
    assert all((a == b).all() for a, b in zip(back.predict(Xt), est.predict(Xt)))
    joblib = pytest.importorskip("joblib")
    joblib.dump(est, tmp_path / "m.joblib")
    assert joblib.load(tmp_path / "m.joblib").model_bytes_ == est.model_bytes_


def test_not_fitted():
    with pytest.raises((AttributeError, ValueError)):
        structlearn.GraphCRF().predict([(np.zeros((2, 1)), [[0, 1]])])


@pytest.mark.parametrize("kind", ["grid", "graph"])
def test_same_model_bytes_as_the_cli(kind, grid_data, graph_data, tmp_path, cli):
    X, Y, Xt, Yt = grid_data if kind == "grid" else graph_data
    Est = structlearn.GridCRF if kind == "grid" else structlearn.GraphCRF
    settings = [
        (dict(), ["--oracle", "unary=linear", "--oracle", "pairwise=linear"]),
        (
            dict(unary={"kind": "boosting", "rounds": 4, "max_depth": 2}, eps=0.5, random_state=7, max_iter=3),
            ["--oracle", "unary=boosting:rounds=4,max_depth=2", "--oracle", "pairwise=linear", "--eps", "0.5",
             "--seed", "7", "--iterations", "3"],
        ),
        (
            dict(learner="hazan-urtasun", max_iter=2),
            ["--learner", "hazan-urtasun", "--iterations", "2", "--oracle", "unary=linear", "--oracle", "pairwise=linear"],
        ),
    ]
    for i, (params, args) in enumerate(settings):
        est = Est(n_jobs=2, **params)
        est.save_dataset(tmp_path / "train.sld", X, Y)
        est.fit(X, Y)
        out = tmp_path / f"cli{i}.slm"
        subprocess.run(
            [cli, "--threads", "2", "-q", "train", "--data", str(tmp_path / "train.sld"), "--model", str(out), *args],
            check=True,
        )
        assert out.read_bytes() == est.model_bytes_, params
        # And the other way: the CLI's model predicts from Python as the CLI does.
        est.save_dataset(tmp_path / "test.sld", Xt, Yt)
        subprocess.run(
            [cli, "-q", "predict", "--model", str(out), "--data", str(tmp_path / "test.sld"), "--output",
             str(tmp_path / "pred.json")],
            check=True,
        )
        cli_labels = [p["labels"] for p in json.loads((tmp_path / "pred.json").read_text())["predictions"]]
        loaded = Est.load(out)
        assert [np.ravel(p).tolist() for p in loaded.predict(Xt)] == cli_labels


def test_save_load_model_and_dataset(grid_data, tmp_path):
    X, Y, Xt, Yt = grid_data
    est = structlearn.GridCRF(max_iter=2).fit(X, Y)
    est.save(tmp_path / "m.slm")
    assert (tmp_path / "m.slm").read_bytes() == est.model_bytes_
    back = structlearn.GridCRF.load(tmp_path / "m.slm")
    assert back.n_states_ == 2 and back.score(Xt, Yt) == est.score(Xt, Yt)
    est.save_dataset(tmp_path / "d.sld", Xt, Yt)
    X2, Y2 = structlearn.load_dataset(tmp_path / "d.sld", format="grid")
    assert all((a[0] == b[0]).all() and (a[1] == b[1]).all() for a, b in zip(X2, Xt))
    assert all((a == b).all() for a, b in zip(Y2, Yt))
    Xg, Yg = structlearn.load_dataset(tmp_path / "d.sld")
    assert len(Xg[0]) == 3 and Xg[0][1].shape[1] == 2
    with pytest.raises(ValueError, match="features"):
        structlearn.GraphCRF.load(tmp_path / "m.slm").predict([(np.zeros((2, 5)), [[0, 1]])])
    with pytest.raises(OSError):
        structlearn.GridCRF.load(tmp_path / "missing.slm")


def test_infer_uai(tmp_path):
    (tmp_path / "m.uai").write_text("MARKOV\n2\n2 2\n2\n1 0\n2 0 1\n2\n0.2 0.8\n4\n1 0.1 0.1 1\n")
    out = structlearn.infer_uai(tmp_path / "m.uai", eps=0.01)
    assert out["labels"].tolist() == [1, 1]
    assert np.allclose([b.sum() for b in out["beliefs"]], 1.0)
    assert out["score"] <= out["bound"] + 1e-9 and out["gap"] >= -1e-9


def test_infer_uai_respects_hard_zeros_and_evidence(tmp_path):
    """A 3-cycle whose pair tables forbid equal labels (3 labels, so only permutations are allowed) and a
    unary preference: the labelling must be allowed, equal the enumerated best, and follow the evidence;
    score <= bound. Evidence of probability 0 and evidence for another model are errors."""
    import itertools

    pair = "9\n0 1 1\n1 0 1\n1 1 0\n"
    text = "MARKOV\n3\n3 3 3\n4\n1 0\n2 0 1\n2 1 2\n2 0 2\n3\n0.7 0.2 0.1\n" + pair * 3
    (tmp_path / "c.uai").write_text(text)
    unary = [0.7, 0.2, 0.1]
    # Every allowed labelling (a permutation) scores log unary[y0]; the best ones start with 0.
    allowed = [list(y) for y in itertools.permutations(range(3))]
    out = structlearn.infer_uai(tmp_path / "c.uai", eps=0.05)
    assert out["labels"].tolist() in allowed and out["labels"][0] == 0
    assert np.isclose(out["score"], np.log(max(unary))) and out["score"] <= out["bound"] + 1e-9
    (tmp_path / "c.evid").write_text("1\n0 2\n")
    clamped = structlearn.infer_uai(tmp_path / "c.uai", eps=0.05, evidence=tmp_path / "c.evid")
    assert clamped["labels"].tolist() in allowed and clamped["labels"][0] == 2
    assert np.isclose(clamped["score"], np.log(unary[2]))
    (tmp_path / "bad.evid").write_text("1\n5 0\n")
    with pytest.raises(ValueError, match="5"):
        structlearn.infer_uai(tmp_path / "c.uai", evidence=tmp_path / "bad.evid")
    (tmp_path / "zero.evid").write_text("2\n0 1\n1 1\n")
    with pytest.raises(ValueError, match="evidence"):
        structlearn.infer_uai(tmp_path / "c.uai", evidence=tmp_path / "zero.evid")


# A model whose decoding must backtrack: A (variable 0) strongly prefers 1, and with A = 1 three
# ternary factors demand B != C, C != D, B != D (impossible for binary variables).
ODD_CYCLE_UNDER_A = (
    "MARKOV\n4\n2 2 2 2\n4\n1 0\n3 0 1 2\n3 0 2 3\n3 0 1 3\n"
    "2\n1 20\n8\n1 1 1 1 0 1 1 0\n8\n1 1 1 1 0 1 1 0\n8\n1 1 1 1 0 1 1 0\n"
)


def test_infer_uai_is_the_cli_pipeline_with_anneal_and_decoding_settings(tmp_path, cli):
    """anneal / eps_min / label_order / decode_restarts / max_backtracks are the command line's options: the same
    labels, score, bound and per-stage figures as `structlearn infer` with them."""
    import json
    import subprocess

    grid = ["MARKOV", "4", "2 2 2 2", "8", "1 0", "1 1", "1 2", "1 3", "2 0 1", "2 1 3", "2 3 2", "2 2 0"]
    tables = ["2\n1 2.5", "2\n3 1", "2\n1 1.5", "2\n2 1"] + ["4\n0.2 3 3 0.2", "4\n3 0.2 0.2 3"] * 2
    (tmp_path / "g.uai").write_text("\n".join(grid) + "\n" + "\n".join(tables) + "\n")
    for kwargs, flags in [
        ({}, []),
        ({"anneal": True}, ["--anneal"]),
        ({"anneal": True, "eps_min": 0.1, "eps": 0.8}, ["--anneal", "--eps-min", "0.1", "--eps", "0.8"]),
        ({"label_order": "regions"}, ["--label-order", "regions"]),
        ({"label_order": "singleton", "anneal": True}, ["--label-order", "singleton", "--anneal"]),
    ]:
        out = structlearn.infer_uai(tmp_path / "g.uai", tol=None, **kwargs)
        run = subprocess.run(
            [cli, "infer", str(tmp_path / "g.uai"), "-q", *flags], check=True, capture_output=True, text=True
        )
        want = json.loads(run.stdout)
        assert out["labels"].tolist() == want["labels"]
        for key in ["score", "bound", "gap", "dual_value", "max_violation"]:
            assert out[key] == want[key], key
        if kwargs.get("anneal"):
            assert [s["eps"] for s in out["anneal"]] == [s["eps"] for s in want["anneal"]]
            assert [s["bound"] for s in out["anneal"]] == [s["bound"] for s in want["anneal"]]
            assert out["anneal_best_stage"] == want["anneal_best_stage"]
        else:
            assert "anneal" not in out
    (tmp_path / "odd.uai").write_text(ODD_CYCLE_UNDER_A)
    assert structlearn.infer_uai(tmp_path / "odd.uai")["labels"].tolist()[0] == 0
    assert structlearn.infer_uai(tmp_path / "odd.uai", max_backtracks=0)["labels"] is None
    found = structlearn.infer_uai(tmp_path / "odd.uai", max_backtracks=0, decode_restarts=100)
    assert found["labels"] is not None and np.isfinite(found["score"])


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"eps": -1.0}, "eps"),
        ({"eps": "x"}, "eps"),
        ({"eps_min": 0.1}, "eps_min"),
        ({"anneal": True, "eps_min": 0.0}, "eps_min"),
        ({"decode_restarts": -1}, "decode_restarts"),
        ({"max_backtracks": 1.5}, "max_backtracks"),
        ({"max_backtracks": None}, "max_backtracks"),
        ({"polish": -3}, "polish"),
        ({"label_order": "pairs"}, "label_order"),
        ({"iterations": "many"}, "iterations"),
        ({"tol": 0.0}, "tol"),
    ],
)
def test_infer_uai_names_the_bad_argument(tmp_path, kwargs, name):
    (tmp_path / "odd.uai").write_text(ODD_CYCLE_UNDER_A)
    with pytest.raises(ValueError, match=f"^{name}: "):
        structlearn.infer_uai(tmp_path / "odd.uai", **kwargs)


def test_readme_quick_start_is_the_example_and_prints_what_the_readme_says(tmp_path):
    """The README's Python snippet is examples/python/quickstart.py verbatim, and running it prints
    the output the README shows."""
    import re
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    readme = (root / "README.md").read_text()
    example = (root / "examples/python/quickstart.py").read_text()
    assert f"```python\n{example}```" in readme
    shown = re.search(r"## Python in brief.*?```text\n(.*?)```", readme, re.S).group(1)
    run = subprocess.run([sys.executable, str(root / "examples/python/quickstart.py")], cwd=tmp_path,
                         capture_output=True, text=True, check=True)
    assert run.stdout == shown
    assert (tmp_path / "denoising.slm").exists()
