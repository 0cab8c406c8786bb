"""The process-cluster harness the test_cluster*.py files (and others:
test_quotas.py, test_fair_share.py, test_rendezvous_store.py import it through
test_cluster.py) share: a real gt-dispatcher with named gt-worker processes
over TCP loopback, the client programs' prelude, and fresh client
interpreters to run against it.
"""

import contextlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from conftest import bound_endpoints, first_log_line, next_output_line, stop_processes, workers_connected
from conftest import clean_env as scrubbed_env

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN_DIR = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))

# The switches kept out of these tests' processes: seven of conftest.HOST_SWITCHES
# (the other three reach them from the caller, as they always have).
HARNESS_SWITCHES = ("GT_COMPILE", "GT_INSTRUCTION_LOG", "GT_CONFIG", "GT_AUTO_SHARD", "GT_WORKERS", "GT_LOCAL_IPC",
                    "GT_CONNECT_TIMEOUT")


def clean_env(**extra):
    """conftest.clean_env without HARNESS_SWITCHES, then `extra`."""
    return scrubbed_env(drop=HARNESS_SWITCHES, **extra)


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
        """The dispatcher's gt_host_workers_connected (None before it serves)."""
        return workers_connected(self.metrics)

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

# A client body: one small op's sync point, then its error (None when the op
# ran) and the seconds the error took to come.
FIRST_SYNC_ERROR = """
    start = time.monotonic()
    try:
        gt.ones(2).sum().item()
        say(error=None)
    except gt.Error as e:
        say(error=str(e), seconds=time.monotonic() - start)
"""


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
