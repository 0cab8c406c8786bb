"""Local ipc (README "Running a cluster"): a gt-dispatcher listening on a
loopback or IPv4-wildcard tcp port P also binds /tmp/gt-dispatcher-<netns>-P.sock, and
`gt.connect("localhost:P")` / `gt-worker --connect tcp://127.0.0.1:P` use it
when a dispatcher of this user listens there; GT_LOCAL_IPC=0 keeps tcp; a stale
socket file is reclaimed by the next dispatcher and never breaks the tcp
fallback. Real processes; the endpoint used is read from the client's
GT_DEBUG_CLIENT `connected to` line and the worker's `connecting to` line.
Skipped when the services are not built, as conftest.process_cluster is.
"""

import contextlib
import json
import os
import pathlib
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import BIND_FAILED, _free_port, stop_processes
from test_launch import BIN_DIR, _module_env

CLIENT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import gt
    gt.connect(sys.argv[1])
    a = gt.from_numpy(np.arange(6, dtype="float32").reshape(2, 3))
    print(json.dumps({"sum": (a * 2 + 1).sum().item()}))
""")


def sock_path(port):
    return pathlib.Path(f"/tmp/gt-dispatcher-{os.stat('/proc/self/ns/net').st_ino}-{port}.sock")


def _wait_for_line(path, text, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = path.read_text() if path.exists() else ""
        if text in content:
            return content
        if BIND_FAILED in content:
            raise PortTaken(content)
        time.sleep(0.05)
    raise AssertionError(f"no {text!r} in {path}: {path.read_text() if path.exists() else ''}")


class PortTaken(Exception):
    """The dispatcher could not bind the port picked for it: another process
    took it between the pick and the bind."""


def on_free_port(body, attempts=5):
    """body(port) on a port picked free; again on a fresh one while the
    dispatcher finds it taken. These tests must know the port before the
    dispatcher starts (its socket file is named after it), so the services'
    port 0 cannot serve them."""
    for attempt in range(attempts):
        try:
            return body(_free_port())
        except PortTaken:
            if attempt == attempts - 1:
                raise


@contextlib.contextmanager
def server(tmp_path, port, env=None, worker_endpoint=None, worker_env=None):
    """`python -m gt.server -p PORT` (the README's way: every interface) with
    `env` and, with `worker_endpoint`, one gt-worker told to connect there
    once the dispatcher listens (with `worker_env`, else `env`). Yields
    (dispatcher log, worker log)."""
    if not ((BIN_DIR / "gt-dispatcher").exists() and (BIN_DIR / "gt-worker").exists()):
        pytest.skip(f"gt-dispatcher / gt-worker not built in {BIN_DIR}")
    full_env = dict(_module_env(), **(env or {}))
    dlog, wlog = tmp_path / f"dispatcher-{port}.log", tmp_path / f"worker-{port}.log"
    procs = []
    try:
        with open(dlog, "w") as out:
            procs.append(subprocess.Popen([sys.executable, "-m", "gt.server", "-p", str(port)], env=full_env,
                                          stdout=out, stderr=subprocess.STDOUT))
        _wait_for_line(dlog, "listening on")
        if worker_endpoint:
            with open(wlog, "w") as out:
                procs.append(subprocess.Popen([str(BIN_DIR / "gt-worker"), "--connect", worker_endpoint, "--id",
                                               "worker-0"], env=dict(_module_env(), **(worker_env or env or {})), stdout=out, stderr=subprocess.STDOUT))
            _wait_for_line(wlog, "connecting to")
        yield dlog, wlog
    finally:
        stop_processes(procs)


def run_client(address, env=None):
    """CLIENT against `address` with GT_DEBUG_CLIENT=1; checks its result and
    returns its one `connected to` line."""
    out = subprocess.run([sys.executable, "-c", CLIENT, address],
                         env=dict(_module_env(), GT_DEBUG_CLIENT="1", **(env or {})), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"sum": 36.0}
    connected = [line for line in out.stderr.splitlines() if "gt:client" in line and "connected to" in line]
    assert len(connected) == 1, out.stderr
    return connected[0]


def stale_socket(path):
    """A socket file that nothing listens on, as a killed dispatcher leaves.
    One already there (left by an earlier killed dispatcher on this port,
    which is free) is just as dead: it is replaced."""
    path.unlink(missing_ok=True)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()
    assert path.is_socket()


def listening(path):
    """Whether a process accepts connections on the unix socket at `path`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
            return True
        except (FileNotFoundError, ConnectionRefusedError):
            return False


def test_localhost_client_and_worker_use_the_dispatchers_ipc_socket(tmp_path):
    def run(port):
        with server(tmp_path, port, worker_endpoint=f"tcp://127.0.0.1:{port}") as (dlog, wlog):
            assert f"local ipc on ipc://{sock_path(port)}" in dlog.read_text()
            assert sock_path(port).is_socket()
            assert f"connecting to ipc://{sock_path(port)} (local ipc for tcp://127.0.0.1:{port})" in wlog.read_text()
            for address in (f"localhost:{port}", f"127.0.0.1:{port}"):
                line = run_client(address)
                assert f"connected to ipc://{sock_path(port)} (local ipc for {address})" in line
        # A graceful stop removes the socket file.
        assert not sock_path(port).exists()

    on_free_port(run)


def test_opt_out_and_explicit_endpoints_stay_as_given(tmp_path):
    def run(port):
        with server(tmp_path, port, worker_endpoint=f"tcp://127.0.0.1:{port}"):
            assert run_client(f"localhost:{port}",
                              env={"GT_LOCAL_IPC": "0"}).endswith(f"connected to tcp://localhost:{port}")
            assert run_client(f"tcp://127.0.0.1:{port}").endswith(f"connected to tcp://127.0.0.1:{port}")
            assert run_client(f"ipc://{sock_path(port)}").endswith(f"connected to ipc://{sock_path(port)}")

    def run_opted_out(port):
        # The opt-out on the services: no socket, the worker keeps tcp.
        with server(tmp_path, port, env={"GT_LOCAL_IPC": "off"},
                    worker_endpoint=f"tcp://127.0.0.1:{port}") as (dlog, wlog):
            # A socket file left there by an earlier dispatcher killed on this
            # port may exist; none listens on it.
            assert "local ipc" not in dlog.read_text() and not listening(sock_path(port))
            assert f"connecting to tcp://127.0.0.1:{port}" in wlog.read_text()
            assert run_client(f"localhost:{port}").endswith(f"connected to tcp://localhost:{port}")

    on_free_port(run)
    on_free_port(run_opted_out)


def test_a_stale_socket_falls_back_to_tcp_and_is_reclaimed(tmp_path):
    def run(port):
        stale_socket(sock_path(port))
        try:
            # A dispatcher that binds no ipc (the opt-out on it only): the worker
            # and the client find the dead socket and keep tcp; the file stays.
            with server(tmp_path, port, env={"GT_LOCAL_IPC": "0"}, worker_endpoint=f"tcp://127.0.0.1:{port}",
                        worker_env={"GT_LOCAL_IPC": "1"}) as (_, wlog):
                assert f"connecting to tcp://127.0.0.1:{port}" in wlog.read_text()
                assert run_client(f"localhost:{port}").endswith(f"connected to tcp://localhost:{port}")
            assert sock_path(port).is_socket()
            # A dispatcher with local ipc on replaces the dead one's socket.
            with server(tmp_path, port, worker_endpoint=f"tcp://localhost:{port}") as (dlog, wlog):
                assert f"local ipc on ipc://{sock_path(port)}" in dlog.read_text()
                assert f"connecting to ipc://{sock_path(port)}" in wlog.read_text()
                assert f"connected to ipc://{sock_path(port)}" in run_client(f"localhost:{port}")
        finally:
            with contextlib.suppress(FileNotFoundError):
                sock_path(port).unlink()

    on_free_port(run)


def test_a_socket_in_use_or_of_another_user_is_left_alone(tmp_path):
    def run(port):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(sock_path(port)))
        listener.listen(1)
        try:
            with server(tmp_path, port) as (dlog, _):
                text = _wait_for_line(dlog, "no local ipc endpoint")
                assert "is in use by another process" in text and "local ipc on" not in text
                probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                probe.connect(str(sock_path(port)))  # still the listener's
                probe.close()
        finally:
            listener.close()
            sock_path(port).unlink()

    def run_other_users(port):
        stale_socket(sock_path(port))
        os.chown(sock_path(port), 65534, 65534)
        try:
            with server(tmp_path, port, worker_endpoint=f"tcp://127.0.0.1:{port}") as (dlog, wlog):
                text = _wait_for_line(dlog, "no local ipc endpoint")
                assert "not a socket of this user" in text
                assert f"connecting to tcp://127.0.0.1:{port}" in wlog.read_text()
                assert run_client(f"localhost:{port}").endswith(f"connected to tcp://localhost:{port}")
            assert sock_path(port).is_socket()
        finally:
            sock_path(port).unlink()

    on_free_port(run)
    if os.geteuid() == 0:  # handing a file to another user needs root
        on_free_port(run_other_users)
