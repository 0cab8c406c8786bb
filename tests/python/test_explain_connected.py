"""GT_EXPLAIN with a separate cluster (issue 40, item 6): the placement lines
come from the dispatcher's sharding stage, so GT_EXPLAIN=1 set where the
dispatcher starts (here `gt cluster`) prints them there, and a client that
sets it says at once where it must be set instead of silently doing nothing."""

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

from conftest import bound_endpoints, first_log_line, stop_processes

BIN_DIR = os.environ.get("GT_BIN_DIR", "")

CLIENT = """
    import numpy as np
    import gt
    import time
    gt.connect({endpoint!r})
    deadline = time.monotonic() + 60
    while sum(1 for h in gt.debug.get_worker_stats().values() if h and h["host"] == "worker") < 2:
        assert time.monotonic() < deadline, "the cluster's workers never registered"
        time.sleep(0.1)
    gt.register_config("data_parallel", gt.SignalConfig(shard=gt.ShardConfig(axis=0, workers=[0, 1])))
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    with gt.signal.context("data_parallel"):
        y = (gt.tensor(x) @ gt.tensor(x.T)).relu()
    assert np.allclose(y.numpy(), np.maximum(x @ x.T, 0))
    print("ok")
"""


def client(endpoint, **env):
    full = {k: v for k, v in os.environ.items() if k not in ("GT_EXPLAIN", "GT_CONFIG")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(CLIENT.format(endpoint=endpoint))], env=full,
                          capture_output=True, text=True, timeout=120)


def test_explain_is_set_where_the_dispatcher_runs_and_a_client_says_so():
    gt_bin = os.path.join(BIN_DIR, "gt")
    if not os.path.exists(gt_bin):
        pytest.skip(f"gt not built in {BIN_DIR!r}")
    log = tempfile.NamedTemporaryFile("w+", prefix="gt-explain-cluster-", suffix=".log", delete=False)
    proc = subprocess.Popen([gt_bin, "cluster", "--workers", "2", "--listen", "tcp://127.0.0.1:0"],
                            env={**os.environ, "GT_EXPLAIN": "1"}, stdout=log, stderr=subprocess.STDOUT)
    try:
        endpoint, _ = bound_endpoints(first_log_line(log.name, proc))
        assert endpoint, "gt cluster announced no endpoint"
        quiet = client(endpoint)
        assert quiet.returncode == 0 and quiet.stdout.strip() == "ok", quiet.stderr
        assert quiet.stderr == ""
        told = client(endpoint, GT_EXPLAIN="1")
        assert told.returncode == 0 and told.stdout.strip() == "ok", told.stderr
        assert f"GT_EXPLAIN=1 has no effect in a client of the dispatcher at {endpoint}" in told.stderr, told.stderr
        assert "Set GT_EXPLAIN=1 where the dispatcher starts" in told.stderr
        assert "gt explain:" not in told.stderr
    finally:
        stop_processes([proc])
        log.seek(0)
        cluster_output = log.read()
        log.close()
        os.unlink(log.name)
    # Where it was set, the cluster's dispatcher explained the sharded matmul.
    explained = [line for line in cluster_output.splitlines() if "gt explain:" in line]
    assert any("matmul" in line and "[data_parallel]" in line for line in explained), cluster_output[-3000:]
