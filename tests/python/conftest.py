"""Shared helpers for the gt Python tests.

The tests run against the embedded default (`import gt`; the first op
starts a dispatcher and workers inside the pytest process). Tests that
need a fresh process (env vars read at start, gpu_workers) run a
subprocess with the same interpreter and PYTHONPATH.
"""

import contextlib
import os
import pathlib
import re
import select
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib

import numpy as np
import pytest

import gt


@pytest.fixture
def rng(request):
    # A different, reproducible stream per test.
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def package_pythonpath():
    """A PYTHONPATH that finds the gt package this process imported first, by
    absolute path (a child's cwd may differ), then the caller's PYTHONPATH."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(gt.__file__)))
    return os.pathsep.join([package_root] + [p for p in [os.environ.get("PYTHONPATH")] if p])


def run_python(code, env=None, cwd=None, timeout=120):
    """Runs `code` in a fresh interpreter (this one, this PYTHONPATH); returns the CompletedProcess."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = package_pythonpath()
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], env=full_env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def python():
    return run_python


# Environment variables that change what a host or client runs. The processes
# a test starts get none of them from the caller (the ctest registration sets
# GT_WORKERS=4), only what the test sets.
HOST_SWITCHES = ("GT_COMPILE", "GT_INSTRUCTION_LOG", "GT_CONFIG", "GT_AUTO_SHARD", "GT_WORKERS", "GT_LOCAL_IPC",
                 "GT_CONNECT_TIMEOUT", "GT_WORKER_BATCH_SIZE", "GT_CLIENT_MANIFEST", "GT_EXPLAIN")


def clean_env(*, drop=HOST_SWITCHES, **extra):
    """The environment for a test's host or client process: this one without
    the variables in `drop`, finding this gt package (package_pythonpath),
    writing no bytecode, then `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = package_pythonpath()
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


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


def first_log_line(path, proc, timeout=30.0):
    """The first line a service `proc` wrote to its log file `path` (its
    bound addresses): waits for it, failing with the log when `proc` exits
    or `timeout` s pass first."""
    deadline = time.monotonic() + timeout
    while True:
        text = pathlib.Path(path).read_text(errors="replace")
        if "\n" in text:
            return text.split("\n", 1)[0]
        assert proc.poll() is None, f"{proc.args[0]} exited ({proc.returncode}) before announcing itself: {text!r}"
        assert time.monotonic() < deadline, f"{proc.args[0]} announced nothing within {timeout} s: {text!r}"
        time.sleep(0.02)


def bound_endpoints(line):
    """(listen endpoint or None, metrics host:port or None) from a service's
    first line: "... listening on tcp://H:P, ..., metrics on http://H:P/metrics".
    Services started on port 0 (never a port picked free beforehand, which a
    parallel test's process can take first) say there which ports they got."""
    listen = re.search(r"listening on (tcp://[^,\s]+)", line)
    metrics = re.search(r"metrics on http://([^/\s]+)/metrics", line)
    return (listen.group(1) if listen else None), (metrics.group(1) if metrics else None)


# What a service says when the port it was told is taken.
BIND_FAILED = "Address already in use"


def start_on_free_port(argv_for_port, log, env=None, attempts=5):
    """Popen(argv_for_port(port)), its output to the file `log`, on a port
    picked free; again on a fresh port while it says the port is taken (a
    parallel test's process took it between the pick and the bind). For
    services that must be told a port (`python -m gt.server -p`); returns
    (process, port) once it announced itself."""
    for attempt in range(attempts):
        port = _free_port()
        with open(log, "w") as out:
            proc = subprocess.Popen(argv_for_port(port), env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            line = first_log_line(log, proc)
        except AssertionError:
            line = pathlib.Path(log).read_text(errors="replace")
        if "listening on" in line:
            return proc, port
        stop_processes([proc])
        assert BIND_FAILED in line and attempt < attempts - 1, f"{proc.args} did not start: {line!r}"


def scrape_metrics(address):
    """{metric name: value summed over its series (labels dropped)} of the
    gt_ samples at http://address/metrics, or None when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        if line.startswith("gt_") and " " in line:
            name = line.split("{", 1)[0].split(" ", 1)[0]
            values[name] = values.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return values


def metric_value(address, name):
    """One metric of scrape_metrics(address); None when nothing answers or the host exports no `name`."""
    values = scrape_metrics(address)
    return None if values is None else values.get(name)


def workers_connected(address):
    """A dispatcher's gt_host_workers_connected, read from its /metrics at
    `address`; None when it does not answer (yet)."""
    value = metric_value(address, "gt_host_workers_connected")
    return None if value is None else int(value)


def logs_tail(logs, chars):
    """The last `chars` characters of each open log file in `logs` (flushed
    first), each under a line with its name: for assertion messages."""
    text = ""
    for log in logs:
        log.flush()
        text += f"--- {pathlib.Path(log.name).name}\n" + pathlib.Path(log.name).read_text()[-chars:]
    return text


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
    """Real gt-dispatcher and gt-worker processes (worker-0, worker-1, ...) on
    the TCP port of 127.0.0.1 the dispatcher bound (port 0, read back from its
    first line); yields the port, stops them on exit. Skips the test when the
    binaries are not built (GT_BIN_DIR, else build/bin). `env` is added to
    the processes' environment; with `log` (a path) their stdout and stderr
    go to that file, else to a temporary one."""
    repo = pathlib.Path(__file__).resolve().parents[2]
    bin_dir = pathlib.Path(os.environ.get("GT_BIN_DIR", repo / "build" / "bin"))
    dispatcher, worker = bin_dir / "gt-dispatcher", bin_dir / "gt-worker"
    if not (dispatcher.exists() and worker.exists()):
        pytest.skip(f"gt-dispatcher / gt-worker not built in {bin_dir}")
    manifest = ["--manifest", str(dispatcher_manifest)] if dispatcher_manifest else []
    with contextlib.ExitStack() as logs:
        if log:
            out = logs.enter_context(open(log, "w"))
        else:  # the dispatcher's first line must be read back
            out = logs.enter_context(tempfile.NamedTemporaryFile("w", prefix="gt-dispatcher-", suffix=".log"))
        quiet = {"stdout": out, "stderr": subprocess.STDOUT, "env": {**os.environ, **(env or {})}}
        procs = [subprocess.Popen([str(dispatcher), "--listen", "tcp://127.0.0.1:0"] + manifest, **quiet)]
        try:
            endpoint, _ = bound_endpoints(first_log_line(out.name, procs[0]))
            assert endpoint, "gt-dispatcher announced no tcp endpoint"
            for i in range(workers):
                procs.append(subprocess.Popen([str(worker), "--connect", endpoint, "--id", f"worker-{i}"], **quiet))
            time.sleep(0.5)
            yield int(endpoint.rsplit(":", 1)[1])
        finally:
            stop_processes(procs)


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
