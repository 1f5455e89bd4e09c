import os
import signal
import subprocess
import sys
import time

import pytest

SCRIPT = r"""
import signal, sys, time
# Python's own Ctrl-C handler even if SIGINT was inherited ignored (a job started with `&` by a
# non-interactive shell ignores it, and Python then installs no handler).
signal.signal(signal.SIGINT, signal.default_int_handler)
import structlearn
from structlearn.datasets import make_denoising
X, Y, _, _ = make_denoising(40, 40, 6, 1, sigma=5.0)
def cb(record):
    print("iteration", record["iteration"], time.time(), flush=True)
est = structlearn.GridCRF(max_iter=100000, unary={"kind": "boosting", "rounds": 30}, callback=cb, n_jobs=1)
try:
    est.fit(X, Y)
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", time.time(), est.n_iter_, len(est.history_), flush=True)
    print("predicted", est.predict(X[:1])[0].shape, flush=True)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_raises_keyboard_interrupt_and_keeps_the_last_iteration():
    p = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    while True:
        line = p.stdout.readline()
        assert line, f"the child ended early: {p.stderr.read()}"
        lines.append(line.split())
        if line.startswith("iteration 2"):
            break
    step = float(lines[1][2]) - float(lines[0][2])  # one learning iteration's time
    sent = time.time()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    rest = [l.split() for l in out.splitlines()]
    done = [l for l in rest if l[0] == "interrupted"]
    assert done, out + err
    _, at, n_iter, n_history = done[0]
    # Within one step (an iteration has two: the unary and the pairwise fit), plus slack for a loaded machine.
    assert float(at) - sent < step + 2.0
    finished = [int(l[1]) for l in lines + rest if l[0] == "iteration"]
    assert int(n_iter) == int(n_history) == max(finished) >= 2
    assert rest[-1][0] == "predicted"


CHECKPOINTED = r"""
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
import structlearn
from structlearn.datasets import make_denoising
X, Y, _, _ = make_denoising(40, 40, 6, 1, sigma=5.0)
cb = lambda record: print("iteration", record["iteration"], flush=True)
est = structlearn.GridCRF(max_iter=8, unary={"kind": "boosting", "rounds": 30}, n_jobs=1, callback=cb,
                          checkpoint=sys.argv[1])
try:
    est.fit(X, Y)
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", est.n_iter_, flush=True)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_with_a_checkpoint_then_fit_again_gives_the_uninterrupted_model(tmp_path):
    import structlearn
    from structlearn.datasets import make_denoising

    path = tmp_path / "run.ckpt"
    p = subprocess.Popen([sys.executable, "-c", CHECKPOINTED, str(path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    while True:
        line = p.stdout.readline()
        assert line, f"the child ended early: {p.stderr.read()}"
        if line.startswith("iteration 2"):
            break
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0 and ("interrupted" in out or "finished" in out), out + err
    assert path.is_file()
    X, Y, _, _ = make_denoising(40, 40, 6, 1, sigma=5.0)
    kw = dict(max_iter=8, unary={"kind": "boosting", "rounds": 30}, n_jobs=1)
    seen = []
    resumed = structlearn.GridCRF(checkpoint=path, callback=seen.append, **kw).fit(X, Y)
    full = structlearn.GridCRF(**kw).fit(X, Y)
    assert resumed.model_bytes_ == full.model_bytes_
    assert [r["objective"] for r in resumed.history_] == [r["objective"] for r in full.history_]
    # The callback gets each iteration after the resume with all its steps, even
    # when the checkpoint was written inside one (after its unary fit).
    steps = lambda r: [(s["step"], s["objective"]) for s in r["steps"]]
    assert seen and [steps(r) for r in seen] == [steps(r) for r in full.history_[-len(seen):]]
