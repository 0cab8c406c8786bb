"""A process cluster behaves as the embedded default does (issue 15): the
same stages by default, sharding across real gt-worker processes, a clear
error naming a stage the dispatcher does not run, and a worker killed mid-run
(SIGKILL) reported within 2 s to the clients that had tensors on it, naming
the worker and the tensors, while another client goes on undisturbed and a
replacement worker under the same id takes new tensors.

Every client is a fresh interpreter (a process connects once); the cluster
is real gt-dispatcher / gt-worker processes (or `gt cluster`) over TCP
loopback. Skipped when the services are not built (GT_BIN_DIR, else
build/bin). The harness is cluster_harness.py (other test modules import it
from here); a worker lost mid-run is in test_cluster_worker_loss.py, no
dispatcher or bad addresses in test_cluster_connection.py.
"""

import os
import subprocess
import tempfile
import textwrap

import pytest

from conftest import bound_endpoints, first_log_line, stop_processes

# Other test modules import these from here.
from cluster_harness import (  # noqa: F401
    BIN_DIR, REPO, Cluster, PRELUDE, clean_env, client, cluster, end_clients, read_line, require_services, run_client,
    tell)

# ---- the same stages as the embedded default -------------------------------------------


EMBEDDED_STAGES = """
    a = gt.randn(4, 4)
    a.sum().item()
    say(stages=next(h for h in gt.debug.get_worker_stats().values() if h["host"] == "dispatcher")["stages"])
"""


@pytest.mark.parametrize("compile_flag", [None, "1"])
def test_gt_dispatcher_runs_the_embedded_defaults_stages(compile_flag):
    env = {"GT_COMPILE": compile_flag} if compile_flag else {}
    # The embedded default of a fresh interpreter (no gt.connect: ENDPOINT None).
    embedded = run_client(None, EMBEDDED_STAGES, env=dict(env, GT_WORKERS="1"))["stages"]
    assert "sharding" in embedded and embedded[-1] == "router"
    assert ("compile" in embedded) == (compile_flag == "1")
    with cluster(workers=1, env=env) as c:
        served = run_client(c.endpoint, "wait_for_workers(['worker-0'])\n" + textwrap.dedent(EMBEDDED_STAGES))
    assert served["stages"] == embedded


def test_gt_cluster_shards_a_signal_config_across_its_workers():
    """The issue's first report: `gt cluster --workers 2` and a data-parallel
    config on workers [0, 1] ran every op on one worker. Now both workers
    run the sharded matmul, and the numbers are numpy's."""
    require_services()
    # Port 0: the dispatcher binds a free one, which `gt cluster`'s first
    # line names (and its workers connect to).
    log = tempfile.NamedTemporaryFile("w+", prefix="gt-cluster-", suffix=".log", delete=False)
    proc = subprocess.Popen([str(BIN_DIR / "gt"), "cluster", "--workers", "2", "--listen", "tcp://127.0.0.1:0"],
                            env=clean_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        endpoint, _ = bound_endpoints(first_log_line(log.name, proc))
        assert endpoint and not endpoint.endswith(":0"), endpoint
        got = run_client(endpoint, """
            wait_for_workers(["worker-0", "worker-1"])
            gt.register_config("data_parallel", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))
            rng = np.random.default_rng(5)
            x, w = rng.standard_normal((64, 32), dtype=np.float32), rng.standard_normal((32, 8), dtype=np.float32)
            before = instructions()
            with gt.signal.context("data_parallel"):
                y = (gt.tensor(x) @ gt.tensor(w)).relu()
            got = y.numpy()
            after = instructions()
            say(error=float(np.abs(got - np.maximum(x @ w, 0)).max()),
                ran={k: after[k] - before.get(k, 0) for k in after})
        """)
    finally:
        stop_processes([proc])
        log.close()
        os.unlink(log.name)
    assert got["error"] < 1e-4
    assert sorted(got["ran"]) == ["worker-0", "worker-1"]
    # Each worker ran its shard's matmul and relu (and the placement before
    # them), not only a heartbeat's worth.
    assert all(n >= 3 for n in got["ran"].values()), got["ran"]


# ---- a stage the dispatcher does not run ----------------------------------------------


def test_a_placing_config_on_a_dispatcher_without_sharding_names_the_stage(tmp_path):
    manifest = tmp_path / "bare.yaml"
    manifest.write_text("host: dispatcher\nid: bare\nstages: []\n")
    with cluster(workers=2, dispatcher_args=["--manifest", str(manifest)]) as c:
        p = client(c.endpoint, """
            wait_for_workers(["worker-0", "worker-1"])
            gt.register_config("data_parallel", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))
            with gt.signal.context("data_parallel"):
                y = gt.tensor(np.ones((8, 4), np.float32)) * 2
            try:
                y.sum().item()
                say(error=None)
            except gt.Error as e:
                say(error=str(e))
            # The client goes on: an unplaced program still runs.
            say(after=(gt.tensor(np.ones(3, np.float32)) + 1).sum().item())
        """)
        said, after = read_line(p), read_line(p)
        p.wait(timeout=30)
    assert after == {"after": 6.0}
    assert said["error"] is not None, "the config was silently ignored"
    assert "signal 'data_parallel'" in said["error"]
    assert "needs the sharding stage" in said["error"]
    assert "dispatcher 'bare'" in said["error"]


COMPILE_SCOPE = """
    wait_for_workers(["worker-0", "worker-1"])
    # A config that places tensors: compiling is left to the dispatcher.
    gt.register_config("data_parallel", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))
    w = gt.randn(8, 8, seed=1) * 0.3
    with gt.signal.context("data_parallel"):
        x = gt.randn(4, 8, seed=2)
    try:
        for step in range(3):
            with gt.signal.context("step", compile=True):
                y = (x @ w).tanh().sum()
            value = y.item()
        say(error=None, value=value)
    except gt.Error as e:
        say(error=str(e))
"""


def test_a_required_compile_scope_on_a_dispatcher_without_compile_names_the_stage():
    # The dispatcher runs its default stages without GT_COMPILE: no compile stage.
    with cluster(workers=2) as c:
        got = run_client(c.endpoint, COMPILE_SCOPE, env={"GT_COMPILE": "1"})
    assert got["error"] is not None, "GT_COMPILE=1 and the compile scope was silently run eagerly"
    assert "compile scope 'step'" in got["error"]
    assert "needs the compile stage" in got["error"]


def test_a_compile_scope_runs_where_the_dispatcher_compiles_and_as_a_hint_elsewhere():
    with cluster(workers=2, env={"GT_COMPILE": "1"}) as c:
        compiled = run_client(c.endpoint, COMPILE_SCOPE, env={"GT_COMPILE": "1"})
    with cluster(workers=2) as c:
        hinted = run_client(c.endpoint, COMPILE_SCOPE)  # GT_COMPILE unset: a hint, eager here
        eager = run_client(c.endpoint, COMPILE_SCOPE, env={"GT_COMPILE": "0"})
    assert compiled["error"] is None and hinted["error"] is None and eager["error"] is None
    assert abs(compiled["value"] - eager["value"]) < 1e-5
    assert abs(hinted["value"] - eager["value"]) < 1e-5
