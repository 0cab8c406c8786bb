"""The seed's launch commands as real processes: `python -m gt.server -p PORT`
starts gt-dispatcher, `python -m gt.worker --host HOST -p PORT` a gt-worker
that joins it, and a client's `gt.connect("localhost:PORT")` uses them. Also
the usage errors of both commands. Skipped when the services are not built
(GT_BIN_DIR, else build/bin), as conftest.process_cluster is.
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

import gt
from conftest import run_python, start_on_free_port, stop_processes

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN_DIR = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))


def _module_env():
    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(gt.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    env["GT_BIN_DIR"] = str(BIN_DIR)
    return env


def run_module(module, *args, timeout=30):
    """`python -m module args...`, to completion; returns the CompletedProcess."""
    return subprocess.run([sys.executable, "-m", module, *args], env=_module_env(), capture_output=True, text=True,
                          timeout=timeout)


@contextlib.contextmanager
def python_cluster(workers=2, server_args=(), worker_env=None):
    """`python -m gt.server -p PORT` and `workers` x `python -m gt.worker --host
    localhost -p PORT` on a free port; yields the port, stops every process
    it started on exit (SIGTERM, then SIGKILL after 10 s)."""
    if not ((BIN_DIR / "gt-dispatcher").exists() and (BIN_DIR / "gt-worker").exists()):
        pytest.skip(f"gt-dispatcher / gt-worker not built in {BIN_DIR}")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.STDOUT}
    procs = []
    log = tempfile.NamedTemporaryFile(prefix="gt-server-", suffix=".log")
    try:
        server, port = start_on_free_port(
            lambda port: [sys.executable, "-m", "gt.server", "-p", str(port), "--host", "127.0.0.1", *server_args],
            log.name, env=_module_env())
        procs.append(server)
        for i in range(workers):
            env = dict(_module_env(), **(worker_env or {}))
            procs.append(subprocess.Popen([sys.executable, "-m", "gt.worker", "--host", "localhost", "-p", str(port),
                                           "--id", f"worker-{i}"], env=env, **quiet))
        time.sleep(0.5)
        for p in procs:
            assert p.poll() is None, f"{p.args} exited with {p.returncode}"
        yield port
    finally:
        stop_processes(procs)
        log.close()


# Waits until `workers` workers have registered (they start concurrently with
# the client), so that the stats below name them all.
WAIT_FOR_WORKERS = textwrap.dedent("""
    import time
    def wait_for_workers(n, timeout=30.0):
        deadline = time.monotonic() + timeout
        while True:
            hosts = gt.debug.get_worker_stats()
            live = [k for k, h in hosts.items() if h is not None and h["host"] == "worker"]
            if len(live) >= n or time.monotonic() > deadline:
                return sorted(live)
            time.sleep(0.1)
""")


def test_unknown_flags_are_usage_errors():
    for module in ("gt.server", "gt.worker"):
        out = run_module(module, "--no-such-flag")
        assert out.returncode == 2, (module, out.stdout, out.stderr)
        assert "usage: python -m " + module in out.stderr
        assert "unrecognized arguments: --no-such-flag" in out.stderr
    out = run_module("gt.server", "-p", "70000")
    assert out.returncode == 2 and "not a TCP port" in out.stderr


def test_help_lists_the_seed_flags():
    server = run_module("gt.server", "--help")
    worker = run_module("gt.worker", "--help")
    assert server.returncode == 0 and worker.returncode == 0
    assert "-p PORT, --port PORT" in server.stdout
    assert "--host HOST" in worker.stdout and "-p PORT, --port PORT" in worker.stdout


def test_flags_become_the_services_flags():
    from gt import server, worker
    assert server.build_args(["-p", "12345"]) == ["--listen", "tcp://127.0.0.1:12345"]
    assert server.build_args(["--host", "0.0.0.0", "--key", "d.key", "--client-keys", "c", "--worker-keys", "w"]) == [
        "--listen", "tcp://0.0.0.0:5555", "--key", "d.key", "--client-keys", "c", "--worker-keys", "w"]
    assert server.build_args(["--host", "10.0.0.1", "--insecure"]) == ["--listen", "tcp://10.0.0.1:5555", "--insecure"]
    assert worker.build_args(["--id", "w", "--key", "w.key", "--server-key", "d.pub"]) == [
        "--connect", "tcp://localhost:5555", "--id", "w", "--key", "w.key", "--server-key", "d.pub"]
    assert server.build_args(["-p", "1", "--host", "127.0.0.1", "--manifest", "d.yaml", "--metrics", ":9100"]) == [
        "--listen", "tcp://127.0.0.1:1", "--manifest", "d.yaml", "--metrics", ":9100"]
    assert worker.build_args(["--host", "h", "-p", "7", "--id", "w"]) == ["--connect", "tcp://h:7", "--id", "w"]
    assert worker.build_args(["-p", "7"])[:3] == ["--connect", "tcp://localhost:7", "--id"]


def test_gt_bin_dir_comes_first(tmp_path, monkeypatch):
    from gt import _launch
    fake = tmp_path / "gt-worker"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("GT_BIN_DIR", str(tmp_path))
    assert _launch.find_service("gt-worker") == str(fake)
    with pytest.raises(FileNotFoundError, match="gt-nothing not found"):
        _launch.find_service("gt-nothing")


def test_client_connects_to_server_and_two_workers():
    with python_cluster(workers=2) as port:
        code = "import json, gt\n" + WAIT_FOR_WORKERS + textwrap.dedent(f"""
            gt.connect("localhost:{port}")
            workers = wait_for_workers(2)
            a = gt.from_numpy(__import__("numpy").arange(6, dtype="float32").reshape(2, 3))
            print(json.dumps({{"workers": workers, "sum": (a * 2 + 1).sum().item()}}))
        """)
        out = run_python(code, timeout=60)
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout.strip().splitlines()[-1])
        assert got == {"workers": ["worker-0", "worker-1"], "sum": 36.0}
