"""A process cluster behaves as the embedded default does (issue 15): the
same stages by default, sharding across real gt-worker processes, a clear
error naming a stage the dispatcher does not run, and a worker killed mid-run
(SIGKILL) reported within 2 s to the clients that had tensors on it, naming
the worker and the tensors, while another client goes on undisturbed and a
replacement worker under the same id takes new tensors.

Every client is a fresh interpreter (a process connects once); the cluster
is real gt-dispatcher / gt-worker processes (or `gt cluster`) over TCP
loopback. Skipped when the services are not built (GT_BIN_DIR, else
build/bin).
"""

import contextlib
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request

import pytest

import gt
from conftest import _free_port, bound_endpoints, first_log_line, next_output_line, stop_processes

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN_DIR = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))

# Environment variables that change what a host or client runs: the tests
# set what they need and nothing leaks in from the caller.
HOST_SWITCHES = ("GT_COMPILE", "GT_INSTRUCTION_LOG", "GT_CONFIG", "GT_AUTO_SHARD", "GT_WORKERS", "GT_LOCAL_IPC",
                 "GT_CONNECT_TIMEOUT")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in HOST_SWITCHES}
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(gt.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    env.update(extra)
    return env


def require_services():
    if not ((BIN_DIR / "gt-dispatcher").exists() and (BIN_DIR / "gt-worker").exists() and (BIN_DIR / "gt").exists()):
        pytest.skip(f"gt, gt-dispatcher, gt-worker not built in {BIN_DIR}")


class Cluster:
    """A gt-dispatcher and named gt-worker processes on the TCP port of
    127.0.0.1 the dispatcher bound, each a Popen the test may kill or add
    to. Workers join one at a time (each registered, as the dispatcher's
    /metrics says, before the next starts), so worker-i has index i."""

    def __init__(self, dispatcher_args=(), env=None, dispatcher_log=None):
        self.env = clean_env(**(env or {}))
        self.workers = {}
        self.log = (open(dispatcher_log, "w") if dispatcher_log else
                    tempfile.NamedTemporaryFile("w", prefix="gt-dispatcher-", suffix=".log"))
        # Ports 0, read back from the dispatcher's first line (conftest.bound_endpoints).
        self.procs = [self._spawn(["gt-dispatcher", "--listen", "tcp://127.0.0.1:0", "--metrics", "127.0.0.1:0",
                                   *dispatcher_args], out=self.log)]
        try:
            self.endpoint, self.metrics = bound_endpoints(first_log_line(self.log.name, self.procs[0]))
            assert self.endpoint and self.metrics, "gt-dispatcher announced no endpoint or metrics address"
        except BaseException:
            self.stop()
            raise

    def workers_connected(self):
        """The dispatcher's gt_host_workers_connected, scraped over HTTP (None before it serves)."""
        try:
            with urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("gt_host_workers_connected{"):
                return int(float(line.rsplit(" ", 1)[1]))
        return None

    def wait_for_workers(self, n, timeout=30.0):
        deadline = time.monotonic() + timeout
        while self.workers_connected() != n:
            assert time.monotonic() < deadline, f"{self.workers_connected()} workers registered, expected {n}"
            time.sleep(0.05)

    def _spawn(self, argv, out=None):
        return subprocess.Popen([str(BIN_DIR / argv[0]), *argv[1:]], env=self.env,
                                stdout=out or subprocess.DEVNULL, stderr=subprocess.STDOUT)

    def add_worker(self, name):
        self.workers[name] = self._spawn(["gt-worker", "--connect", self.endpoint, "--id", name])
        self.procs.append(self.workers[name])
        return self.workers[name]

    def stop(self):
        stop_processes([p for p in reversed(self.procs) if p.poll() is None])
        self.log.close()


@contextlib.contextmanager
def cluster(workers=2, dispatcher_args=(), env=None, dispatcher_log=None):
    require_services()
    c = Cluster(dispatcher_args, env, dispatcher_log)
    try:
        for i in range(workers):
            c.add_worker(f"worker-{i}")
            c.wait_for_workers(i + 1)
        yield c
    finally:
        c.stop()


# The start of every client program: connect, wait for `n` live workers
# (they start concurrently with the client), and a few helpers.
PRELUDE = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np
    import gt
    from gt import ShardConfig, SignalConfig

    if ENDPOINT:  # else the embedded default
        gt.connect(ENDPOINT)

    def live_workers():
        return sorted(k for k, h in gt.debug.get_worker_stats().items() if h is not None and h["host"] == "worker")

    def wait_for_workers(names, timeout=30.0):
        deadline = time.monotonic() + timeout
        while sorted(names) != live_workers():
            if time.monotonic() > deadline:
                raise SystemExit(f"workers {live_workers()} registered, expected {sorted(names)}")
            time.sleep(0.1)

    def instructions():
        return {k: h["instructions"] for k, h in gt.debug.get_worker_stats().items()
                if h is not None and h["host"] == "worker"}

    def say(**what):
        print(json.dumps(what), flush=True)
""")


def client(endpoint, body, env=None):
    """Starts a client program (PRELUDE + body) with pipes on stdin and stdout."""
    code = f"ENDPOINT = {endpoint!r}\n" + PRELUDE + textwrap.dedent(body)
    return subprocess.Popen([sys.executable, "-c", code], env=clean_env(**(env or {})), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_client(endpoint, body, env=None, timeout=120):
    """Runs a client program to completion; returns its last JSON line."""
    p = client(endpoint, body, env)
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, f"client failed ({p.returncode}):\n{err}"
    return json.loads(out.strip().splitlines()[-1])


def read_line(proc, timeout=60.0):
    """The next JSON line a client prints (its stderr on failure)."""
    line = next_output_line(proc, timeout)
    if line is None:
        proc.kill()
        raise AssertionError(f"client said nothing for {timeout} s:\n{proc.stderr.read()}")
    if not line:
        proc.wait()
        raise AssertionError(f"client exited ({proc.returncode}):\n{proc.stderr.read()}")
    return json.loads(line)


def end_clients(*procs):
    """Kills the client programs still running (a failed test's), and reaps them all."""
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def tell(proc, word):
    proc.stdin.write(word + "\n")
    proc.stdin.flush()


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


# ---- a worker killed mid-run -----------------------------------------------------------

# Client A: data parallel on workers 0 and 1, long matmul chains until an
# error comes; then the lost tensor used again; then, once told the
# replacement is up, new sharded tensors.
AFFECTED = """
    wait_for_workers(["worker-0", "worker-1"])
    gt.register_config("data_parallel", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))
    rng = np.random.default_rng(1)
    w_np = (rng.standard_normal((512, 512)) / 24).astype(np.float32)
    with gt.signal.context("data_parallel"):
        x = gt.tensor(rng.standard_normal((1024, 512)).astype(np.float32))
        w = gt.tensor(w_np)
    x.sum().item()
    say(state="running", x=x._c.id())  # its id, as errors name it (%N)
    error = None
    deadline = time.time() + 60
    while error is None and time.time() < deadline:
        try:
            with gt.signal.context("data_parallel"):
                y = x
                for _ in range(8):
                    y = (y @ w).tanh()
            y.sum().item()
        except gt.Error as e:
            error = str(e)
    say(state="lost", error=error, at=time.time())
    try:
        (x + 1).sum().item()
        reuse = None
    except gt.Error as e:
        reuse = str(e)
    say(state="reused", error=reuse)
    sys.stdin.readline()  # the replacement has started
    wait_for_workers(["worker-0", "worker-1"])
    before = instructions()
    # Both sharded on rows: the matmul all-gathers w2, a collective between
    # worker-0 and the new worker-1.
    w2_np = rng.standard_normal((512, 8)).astype(np.float32)
    with gt.signal.context("data_parallel"):
        z = gt.tensor(np.ones((16, 512), np.float32)) @ gt.tensor(w2_np)
    got = z.numpy()
    after = instructions()
    say(state="replaced", error=float(np.abs(got - np.ones((16, 512), np.float32) @ w2_np).max()),
        ran={k: after[k] - before.get(k, 0) for k in after})
"""

# Client B: its tensors only on worker index 0 (worker-0, which joined
# first); computes and checks until told to stop.
UNAFFECTED = """
    wait_for_workers(["worker-0", "worker-1"])
    gt.register_config("on_worker_0", SignalConfig(shard=ShardConfig(axis=0, workers=[0])))
    with gt.signal.context("on_worker_0"):
        a = gt.tensor(np.arange(64, dtype=np.float32).reshape(8, 8))
    say(state="running")
    ok_times, errors = [], []
    import select
    while not select.select([sys.stdin], [], [], 0)[0]:
        try:
            with gt.signal.context("on_worker_0"):
                b = (a @ a + 1).sum()
            value = b.item()
            want = float((np.arange(64).reshape(8, 8) @ np.arange(64).reshape(8, 8) + 1).sum())
            if value != want:
                errors.append(f"wrong value {value} != {want}")
            ok_times.append(time.time())
        except gt.Error as e:
            errors.append(str(e))
        time.sleep(0.01)
    say(state="done", errors=errors, ok_times=ok_times)
"""


def test_a_killed_worker_is_reported_to_its_clients_only_and_can_be_replaced():
    with cluster(workers=2) as c:
        a = client(c.endpoint, AFFECTED)
        b = client(c.endpoint, UNAFFECTED)
        try:
            started = read_line(a)
            assert started["state"] == "running"
            assert read_line(b)["state"] == "running"
            time.sleep(0.5)  # inside A's matmul chains
            c.workers["worker-1"].send_signal(signal.SIGKILL)
            killed_at = time.time()
            c.workers["worker-1"].wait()

            lost = read_line(a)
            assert lost["state"] == "lost" and lost["error"] is not None, lost
            assert lost["at"] - killed_at < 2.0, f"error {lost['at'] - killed_at:.2f} s after the kill"
            assert "worker-1" in lost["error"] and "lost" in lost["error"], lost["error"]
            # x, sharded over both workers, is named as the client knows it.
            assert re.search(rf"gone: .*%{started['x']}\b", lost["error"]), lost["error"]
            assert "shard(s)" not in lost["error"], lost["error"]
            reused = read_line(a)
            assert reused["error"] is not None, "a tensor lost with its worker was used without error"
            assert f"operand %{started['x']} was lost with worker worker-1" in reused["error"], reused["error"]

            c.add_worker("worker-1")  # the replacement, under the same id
            tell(a, "replaced")
            replaced = read_line(a)
            assert replaced["error"] < 1e-3
            # The new worker-1 (counters from zero) ran its share of the new tensors.
            assert replaced["ran"].get("worker-1", 0) >= 2 and replaced["ran"].get("worker-0", 0) >= 2, replaced

            # B needs time after the kill to show that it went on (the steps
            # above can take less than the half second checked below).
            time.sleep(max(0.0, killed_at + 1.5 - time.time()))
            tell(b, "stop")
            done = read_line(b)
        finally:
            end_clients(a, b)
    assert done["errors"] == [], done["errors"][:3]
    # B kept computing through the loss and after it.
    assert any(t > killed_at + 0.5 for t in done["ok_times"]), "client B made no progress after the kill"
    assert any(t < killed_at for t in done["ok_times"])


# Client A: x sharded on workers 0 and 1, no collective yet; told to go, its
# sum is the first collective of workers 0 and 1, which form a Gloo group.
FORMING = """
    wait_for_workers(["worker-0", "worker-1"])
    gt.register_config("data_parallel", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))
    with gt.signal.context("data_parallel"):
        x = gt.tensor(np.ones((8, 4), np.float32))
    gt.sync()
    say(state="ready")
    sys.stdin.readline()
    try:
        x.sum().item()
        say(error=None)
    except gt.Error as e:
        say(error=str(e), at=time.time())
"""


def test_a_worker_lost_while_a_group_forms_with_it_holds_nobody():
    """Worker 1 hangs (SIGSTOP) just as worker 0 starts forming a collective
    group with it, then dies: worker 0 stops waiting for it at once, instead
    of holding every client on it for the collective timeout (60 s)."""
    with cluster(workers=2) as c:
        a = client(c.endpoint, FORMING)
        b = client(c.endpoint, UNAFFECTED)
        try:
            assert read_line(a) == {"state": "ready"}
            assert read_line(b)["state"] == "running"
            c.workers["worker-1"].send_signal(signal.SIGSTOP)
            tell(a, "go")
            go_at = time.time()
            time.sleep(1.5)  # worker 0 is waiting for worker 1 in the rendezvous store
            c.workers["worker-1"].send_signal(signal.SIGKILL)
            killed_at = time.time()
            c.workers["worker-1"].wait()
            got = read_line(a)
            time.sleep(1.0)
            tell(b, "stop")
            done = read_line(b)
        finally:
            end_clients(a, b)
    assert got["error"] is not None and "worker-1" in got["error"], got
    assert got["at"] - killed_at < 2.0, f"error {got['at'] - killed_at:.2f} s after the kill"
    assert done["errors"] == [], done["errors"][:3]
    # Worker 0 was held forming the group (so B was too) until the kill...
    assert not any(go_at + 0.7 < t < killed_at for t in done["ok_times"]), "worker 0 never waited for worker 1"
    # ...and let go at once after it.
    assert any(killed_at < t < killed_at + 3.0 for t in done["ok_times"]), "client B was held after the kill"


def test_a_worker_registering_under_a_silent_ones_id_replaces_it(tmp_path):
    """A restart the dispatcher has not noticed (the old process hung, its
    connection still open, far from its heartbeat timeout): the new
    registration takes the index, and configs naming workers [0, 1] keep
    working."""
    manifest = tmp_path / "dispatcher.yaml"
    manifest.write_text("host: dispatcher\nstages: [{name: sharding, plugin: sharding}]\nheartbeat_timeout_ms: 120000\n")
    log = tmp_path / "dispatcher.log"
    with cluster(workers=2, dispatcher_args=["--manifest", str(manifest)], dispatcher_log=log) as c:
        hung = c.workers["worker-1"]
        hung.send_signal(signal.SIGSTOP)
        time.sleep(1.5)  # two heartbeats (500 ms) missed
        try:
            c.add_worker("worker-1")
            got = run_client(c.endpoint, """
                wait_for_workers(["worker-0", "worker-1"])
                gt.register_config("data_parallel", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))
                before = instructions()
                with gt.signal.context("data_parallel"):
                    y = gt.tensor(np.ones((8, 4), np.float32)) * 3
                total = y.sum().item()
                after = instructions()
                say(total=total, workers=live_workers(), ran={k: after[k] - before.get(k, 0) for k in after})
            """, timeout=60)
        finally:
            hung.send_signal(signal.SIGCONT)
    assert got["total"] == 96.0
    assert got["workers"] == ["worker-0", "worker-1"], "one worker-1, the new one"
    assert got["ran"]["worker-1"] >= 2, got["ran"]
    assert "worker worker-1 lost (replaced by a new registration under its id)" in log.read_text()


def test_two_live_workers_may_share_an_id():
    """gt-worker without --id is "worker": a second one does not push out
    the first, which keeps heartbeating."""
    with cluster(workers=0) as c:
        c.add_worker("worker")
        c.wait_for_workers(1)
        c.add_worker("worker")
        c.wait_for_workers(2)
        time.sleep(1.5)
        assert c.workers_connected() == 2


# ---- no dispatcher, or one that went away ----------------------------------------------


def test_a_sync_point_without_a_dispatcher_fails_naming_the_address():
    port = _free_port()  # nothing listens there
    started = time.monotonic()
    got = run_client(f"localhost:{port}", """
        try:
            (gt.tensor(np.ones(3, np.float32)) + 1).sum().item()
            say(error=None)
        except gt.Error as e:
            say(error=str(e))
    """, env={"GT_CONNECT_TIMEOUT": "1"}, timeout=60)
    assert time.monotonic() - started < 30
    assert got["error"] == (f"gt: no dispatcher answers at localhost:{port} (tcp://localhost:{port}): "
                            "not connected within 1 s (GT_CONNECT_TIMEOUT)")


def test_a_dispatcher_that_goes_away_mid_run_fails_the_next_sync():
    with cluster(workers=1) as c:
        p = client(c.endpoint, """
            wait_for_workers(["worker-0"])
            a = gt.tensor(np.ones(3, np.float32))
            say(value=(a + 1).sum().item())
            sys.stdin.readline()  # the dispatcher is gone
            started = time.monotonic()
            errors = []
            for _ in range(2):  # the second sync fails at once too: the session has no dispatcher
                try:
                    (a + 2).sum().item()
                    errors.append(None)
                except gt.Error as e:
                    errors.append(str(e))
            say(errors=errors, waited=time.monotonic() - started)
        """)
        try:
            assert read_line(p) == {"value": 6.0}
            c.procs[0].send_signal(signal.SIGKILL)
            c.procs[0].wait()
            # A killed dispatcher leaves its local ipc socket file behind (the
            # next one on the port would replace it): not in /tmp for good.
            ipc = re.search(r"local ipc on ipc://([^,\s]+)", pathlib.Path(c.log.name).read_text())
            if ipc:
                pathlib.Path(ipc.group(1)).unlink(missing_ok=True)
            tell(p, "gone")
            got = read_line(p)
        finally:
            end_clients(p)
    assert got["errors"] == [f"gt: lost the dispatcher at {c.endpoint}: its connection closed"] * 2, got
    assert got["waited"] < 5


def test_a_client_dropped_for_silence_is_told_its_session_closed(tmp_path):
    """A client paused past the heartbeat timeout (SIGSTOP: a debugger, a
    swapped-out laptop) has been dropped and its tensors freed; when it
    resumes, every sync names that, not a protocol error about HELLO."""
    manifest = tmp_path / "dispatcher.yaml"
    manifest.write_text("host: dispatcher\nheartbeat_timeout_ms: 1000\nstages: [{name: sharding, plugin: sharding}]\n")
    with cluster(workers=1, dispatcher_args=["--manifest", str(manifest)]) as c:
        p = client(c.endpoint, """
            wait_for_workers(["worker-0"])
            a = gt.tensor(np.ones(3, np.float32))
            say(value=(a + 1).sum().item())
            sys.stdin.readline()  # resumed after the pause
            errors = []
            for _ in range(2):
                try:
                    (a + 2).sum().item()
                    errors.append(None)
                except gt.Error as e:
                    errors.append(str(e))
            say(errors=errors)
        """)
        try:
            assert read_line(p) == {"value": 6.0}
            p.send_signal(signal.SIGSTOP)
            time.sleep(4)  # twice the timeout, and more
            p.send_signal(signal.SIGCONT)
            tell(p, "resumed")
            got = read_line(p)
        finally:
            end_clients(p)
    assert len(got["errors"]) == 2 and all(got["errors"]), got
    for error in got["errors"]:
        assert "session was closed" in error and "no heartbeat for 2000 ms" in error, got
        assert "connect again" in error and "HELLO" not in error, got


def test_a_port_out_of_range_is_refused_not_wrapped():
    """ZeroMQ keeps a port's low 16 bits: 99999 would have been 34463, and a
    mistyped port would have reached whatever listens there."""
    require_services()
    listen = ["--listen", "tcp://127.0.0.1:0"]
    for argv, says in (
            (["gt-dispatcher", "--listen", "tcp://127.0.0.1:99999"], "the port must be a number from 0 to 65535 (or *)"),
            (["gt-worker", "--connect", "tcp://127.0.0.1:70000"], "the port must be a number from 0 to 65535 (or *)"),
            (["gt", "cluster", "--listen", "tcp://127.0.0.1:99999"], "the port must be a number from 0 to 65535 (or *)"),
            (["gt-dispatcher", *listen, "--metrics", "127.0.0.1:99999"], "cannot serve metrics on 127.0.0.1:99999: "
                                                                         "the port must be a number from 0 to 65535"),
            (["gt-worker", "--metrics", "127.0.0.1:65536"], "cannot serve metrics on 127.0.0.1:65536: "
                                                            "the port must be a number from 0 to 65535"),
            (["gt-dispatcher", *listen, "--discovery", "127.0.0.1:99999"], "discovery address '127.0.0.1:99999': "
                                                                           "the port must be a number from 0 to 65535")):
        out = subprocess.run([str(BIN_DIR / argv[0]), *argv[1:]], env=clean_env(), capture_output=True, text=True,
                             timeout=60)
        assert out.returncode != 0, argv
        port = argv[-1].rsplit(":", 1)[1]
        assert f"{says}, not '{port}'" in out.stderr, (argv, out.stderr)
    got = run_client(None, """
        try:
            gt.connect("localhost:99999")
            say(error=None)
        except gt.Error as e:
            say(error=str(e))
    """)
    assert got["error"] == ("gt::connect: tcp://localhost:99999: the port must be a number from 0 to 65535 (or *), "
                            "not '99999'")


def test_gt_cluster_fails_when_one_of_its_processes_ends_by_itself():
    """Its worker's metrics port would be 65536: that worker exits at once,
    and `gt cluster` stops the rest and says so with its exit status."""
    require_services()
    out = subprocess.run([str(BIN_DIR / "gt"), "cluster", "--workers", "1", "--listen", "tcp://127.0.0.1:0",
                          "--metrics-port", "65535"], env=clean_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    assert "cannot serve metrics on 127.0.0.1:65536" in out.stderr, out.stderr
    assert "exited; stopping the cluster" in out.stderr, out.stderr


def test_a_malformed_address_is_a_gt_error_naming_it_at_connect():
    """Not ZeroMQ's bare "Invalid argument" (a RuntimeError) at the first op."""
    got = run_client(None, """
        errors = {}
        for address in ["localhost", "tcp://", "foo://bar", "ipc://", "localhost:5555x"]:
            try:
                gt.connect(address)
                errors[address] = None
            except gt.Error as e:
                errors[address] = str(e)
        say(errors=errors)
    """)
    assert got["errors"] == {
        "localhost": "gt::connect: 'tcp://localhost': expected tcp://HOST:PORT (a host, then a port)",
        "tcp://": "gt::connect: 'tcp://': expected tcp://HOST:PORT (a host, then a port)",
        "foo://bar": "gt::connect: 'foo://bar': expected tcp://HOST:PORT, HOST:PORT, ipc://PATH or inproc://NAME",
        "ipc://": "gt::connect: 'ipc://': the endpoint names no socket file",
        "localhost:5555x": "gt::connect: tcp://localhost:5555x: the port must be a number from 0 to 65535 (or *), "
                           "not '5555x'",
    }


def test_a_host_that_cannot_serve_its_metrics_does_not_start_without_them():
    """A Prometheus target that silently never appears is worse than a host
    that says why it will not start."""
    require_services()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = "127.0.0.1:%d" % taken.getsockname()[1]
        for argv in (["gt-dispatcher", "--listen", "tcp://127.0.0.1:0", "--metrics", address],
                     ["gt-worker", "--metrics", address]):
            out = subprocess.run([str(BIN_DIR / argv[0]), *argv[1:]], env=clean_env(), capture_output=True,
                                 text=True, timeout=60)
            assert out.returncode == 1, (argv, out.stdout, out.stderr)
            assert f"cannot serve metrics on {address}: cannot listen there" in out.stderr, out.stderr
            assert "listening on" not in out.stdout and "connecting to" not in out.stdout, out.stdout


def test_a_bad_connect_timeout_is_named():
    got = run_client(f"localhost:{_free_port()}", """
        try:
            gt.tensor(np.ones(3, np.float32)).sum().item()
            say(error=None)
        except gt.Error as e:
            say(error=str(e))
    """, env={"GT_CONNECT_TIMEOUT": "5s"})
    assert got["error"] == "gt: GT_CONNECT_TIMEOUT: expected seconds from 0 (wait forever) to 86400, got '5s'"
