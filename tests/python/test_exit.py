"""A script that ends with work pending exits cleanly (issue 40, item 1):
status 0, nothing on stderr, no hang, whatever was queued when it ended.

Before, `import gt; a = gt.randn(2); gt.sync(); b = gt.rand(2) * 2` ended in
a segfault and `m = gt.nn.Linear(4, 2); m.weight.numpy(); m2 = ...` hung:
exit() destroyed LibTorch's lazily made statics while an embedded worker was
still inside at::rand. Now gt's atexit hook ends the session (the queued ops
sent, the hosts' threads joined) before the interpreter finalizes, and the
C++ client's own exit guard does the same for a program that never ran
Python's atexit hooks.

Every case is a fresh interpreter, run several times (the failure was
frequent but not certain), embedded and connected to a `gt cluster`.
"""

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

import gt
from conftest import bound_endpoints, first_log_line, stop_processes

BIN_DIR = os.environ.get("GT_BIN_DIR", "")
RUNS = 3
TIMEOUT = 120  # seconds: generous, the machine may be loaded; a hang is forever

SHARD_CONFIG = """
data_parallel:
  shard: {axis: 0, workers: [0, 1]}
"""

# name -> (program, extra environment)
CASES = {
    "creation": ("a = gt.randn(2); gt.sync(); b = gt.rand(2) * 2", {}),
    "arithmetic": ("x = gt.randn(256, 256)\nfor _ in range(50):\n    x = (x @ x).tanh() + 1", {}),
    "linear": ("m = gt.nn.Linear(4, 2); m.weight.numpy(); m2 = gt.nn.Linear(4, 2)", {}),
    "backward": ("w = gt.randn(64, 64, requires_grad=True)\n((w @ w).tanh().sum()).backward()", {}),
    "compile": ("import numpy as np\n"
                "x, w = gt.tensor(np.ones((16, 8), np.float32)), gt.zeros(8, 1, requires_grad=True)\n"
                "for _ in range(12):\n"
                "    loss = ((x @ w - 1) ** 2).mean(); loss.backward()\n"
                "    with gt.no_grad():\n"
                "        w -= 0.1 * w.grad\n"
                "    w.grad = None", {"GT_COMPILE": "1"}),
    "sharded_scope": ("with gt.signal.context('data_parallel'):\n"
                      "    y = (gt.randn(64, 32) @ gt.randn(32, 8)).relu()\n"
                      "z = y.sum()", {"GT_WORKERS": "2", "GT_CONFIG": SHARD_CONFIG}),
    # PyTorch in the same interpreter: finalized after gt's hosts stopped.
    "with_torch": ("import torch\nt = torch.ones(3)\nb = gt.rand(2) * 2", {}),
    # Without gt's atexit hook: the C++ client's exit guard ends the session.
    "no_python_hook": ("import atexit; atexit.unregister(gt._shutdown_at_exit)\n"
                       "m = gt.nn.Linear(4, 2); m.weight.numpy(); m2 = gt.nn.Linear(4, 2)", {}),
}


def run_fresh(program, env, config_path, address=None):
    full = dict(os.environ)
    full.pop("GT_CONFIG", None)
    full.update(env)
    if env.get("GT_CONFIG") == SHARD_CONFIG:  # the file holding it
        full["GT_CONFIG"] = config_path
    head = "import gt\n" + (f"gt.connect({address!r})\n" if address else "")
    return subprocess.run([sys.executable, "-c", head + textwrap.dedent(program)], env=full,
                          capture_output=True, text=True, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def config_path():
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(SHARD_CONFIG)
    yield f.name
    os.unlink(f.name)


def assert_clean_exits(name, program, env, config_path, address=None):
    for run in range(RUNS):
        try:
            out = run_fresh(program, env, config_path, address)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name} (run {run}): hung at exit for {TIMEOUT} s")
        assert out.returncode == 0, f"{name} (run {run}): status {out.returncode}\n{out.stderr[-3000:]}"
        assert out.stderr == "", f"{name} (run {run}): stderr\n{out.stderr[-3000:]}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_embedded_exit_with_work_pending_is_clean(name, config_path):
    program, env = CASES[name]
    if name == "with_torch":
        pytest.importorskip("torch")
    assert_clean_exits(name, program, env, config_path)


def test_explicit_shutdown_then_exit_is_clean(config_path):
    assert_clean_exits("shutdown", "b = gt.rand(2) * 2\ngt.shutdown()\nc = b", {}, config_path)


def test_connected_exit_with_work_pending_is_clean(config_path):
    gt_bin = os.path.join(BIN_DIR, "gt")
    if not os.path.exists(gt_bin):
        pytest.skip(f"gt not built in {BIN_DIR!r}")
    log = tempfile.NamedTemporaryFile("w+", prefix="gt-exit-cluster-", suffix=".log", delete=False)
    proc = subprocess.Popen([gt_bin, "cluster", "--workers", "2", "--listen", "tcp://127.0.0.1:0"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        endpoint, _ = bound_endpoints(first_log_line(log.name, proc))
        assert endpoint, "gt cluster announced no endpoint"
        for name in ["creation", "arithmetic", "linear", "backward", "sharded_scope", "no_python_hook"]:
            program, env = CASES[name]
            assert_clean_exits(name + " (connected)", program, env, config_path, address=endpoint)
        assert proc.poll() is None, "the cluster ended with its clients"
    finally:
        stop_processes([proc])
        log.close()
        os.unlink(log.name)
