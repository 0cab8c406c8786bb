"""Shared helpers for the gt Python tests.

The tests run against the embedded default (`import gt`; the first op
starts a dispatcher and workers inside the pytest process). Tests that
need a fresh process (env vars read at start, gpu_workers) run a
subprocess with the same interpreter and PYTHONPATH.
"""

import contextlib
import os
import pathlib
import select
import socket
import subprocess
import sys
import time
import zlib

import numpy as np
import pytest

import gt


@pytest.fixture
def rng(request):
    # A different, reproducible stream per test.
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def run_python(code, env=None, cwd=None, timeout=120):
    """Runs `code` in a fresh interpreter (this one, this PYTHONPATH); returns the CompletedProcess."""
    full_env = dict(os.environ)
    # The gt package this process imported, by absolute path (cwd may change).
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(gt.__file__)))
    full_env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], env=full_env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def python():
    return run_python


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def next_output_line(proc, timeout):
    """The next line `proc` writes to its stdout pipe (without the newline),
    None when none comes within `timeout` s, "" at its end.

    Reads the pipe's descriptor itself and keeps what follows the line for
    the next call: a select() on the pipe cannot see lines that a buffered
    readline() already took in along with an earlier one, so two lines
    arriving together would leave the second unseen until the timeout."""
    fd = proc.stdout.fileno()
    pending = getattr(proc, "_unread_output", b"")
    deadline = time.monotonic() + timeout
    while b"\n" not in pending:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            proc._unread_output = pending
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            proc._unread_output = b""
            return pending.decode()
        pending += chunk
    line, proc._unread_output = pending.split(b"\n", 1)
    return line.decode()


def stop_processes(procs):
    """Asks every process to stop (SIGTERM, in the given order), then waits,
    killing one that has not stopped within 10 s."""
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@contextlib.contextmanager
def process_cluster(workers=1, dispatcher_manifest=None, env=None, log=None):
    """Real gt-dispatcher and gt-worker processes (worker-0, worker-1, ...) on a
    free TCP port of 127.0.0.1; yields the port, stops them on exit. Skips the
    test when the binaries are not built (GT_BIN_DIR, else build/bin).
    `env` is added to the processes' environment; with `log` (a path) their
    stdout and stderr go to that file, else nowhere."""
    repo = pathlib.Path(__file__).resolve().parents[2]
    bin_dir = pathlib.Path(os.environ.get("GT_BIN_DIR", repo / "build" / "bin"))
    dispatcher, worker = bin_dir / "gt-dispatcher", bin_dir / "gt-worker"
    if not (dispatcher.exists() and worker.exists()):
        pytest.skip(f"gt-dispatcher / gt-worker not built in {bin_dir}")
    port = _free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    manifest = ["--manifest", str(dispatcher_manifest)] if dispatcher_manifest else []
    out = open(log, "w") if log else subprocess.DEVNULL
    quiet = {"stdout": out, "stderr": subprocess.STDOUT, "env": {**os.environ, **(env or {})}}
    procs = [subprocess.Popen([str(dispatcher), "--listen", endpoint] + manifest, **quiet)]
    try:
        for i in range(workers):
            procs.append(subprocess.Popen([str(worker), "--connect", endpoint, "--id", f"worker-{i}"], **quiet))
        time.sleep(0.5)
        yield port
    finally:
        stop_processes(procs)
        if log:
            out.close()


@pytest.fixture
def processes():
    """process_cluster, for tests that start real hosts."""
    return process_cluster


# Program text for a test's client process (it needs `import time` and `import gt`):
# worker_counts(), per worker its collectives by kind (gt_collectives_total) and its
# instruction count, from the workers' metrics; delta(after, before) of two of them; and
# wait_for_workers(n), until n workers have registered; summed_by(metric, label), one
# worker metric summed over the workers by a label's value.
CLUSTER_PROBES = r"""
def summed_by(metric, label):
    totals = {}
    for h in gt.debug.get_worker_stats().values():
        if h and h["host"] == "worker":
            for s in h["samples"]:
                if s["name"] == metric:
                    totals[s["labels"][label]] = totals.get(s["labels"][label], 0) + s["value"]
    return totals


def worker_counts():
    counts = {}
    for name, h in gt.debug.get_worker_stats().items():
        if h is None or h["host"] != "worker":
            continue
        c = {s["labels"]["collective"]: s["value"] for s in h["samples"] if s["name"] == "gt_collectives_total"}
        c["instructions"] = h["instructions"]
        counts[name] = c
    return counts


def delta(after, before):
    return {w: {k: v - before.get(w, {}).get(k, 0) for k, v in c.items()} for w, c in after.items()}


def wait_for_workers(n):
    deadline = time.monotonic() + 30
    while len(worker_counts()) < n:
        assert time.monotonic() < deadline, f"{n} workers did not register"
        time.sleep(0.1)
"""


def run_on_cluster(python, processes, cluster, program, workers=4, timeout=240):
    """Runs `program` in a fresh client process on an embedded cluster of `workers` workers
    (cluster "embedded") or on a process cluster of as many gt-worker processes ("processes");
    the program finds ADDRESS (None, or the dispatcher's "127.0.0.1:PORT") defined and prints one
    JSON line last, which is returned parsed."""
    import json

    def run(address, env):
        r = python(f"ADDRESS = {address!r}\n" + program, env=env, timeout=timeout)
        assert r.returncode == 0, r.stderr[-4000:]
        return json.loads(r.stdout.strip().splitlines()[-1])
    if cluster == "embedded":
        return run(None, {"GT_WORKERS": str(workers)})
    with processes(workers=workers) as port:
        return run(f"127.0.0.1:{port}", None)


@pytest.fixture(autouse=True)
def _clean_state():
    yield
    gt.clear_configs()
    gt.set_grad_enabled(True)
