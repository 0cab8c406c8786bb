"""What a stranger or a careless operator meets (issue 39, docs/SECURITY.md):
a keyless gt-worker against a dispatcher with keys fails at once naming the
keys, gt-worker stops on its first SIGTERM, an address where nothing speaks
ZeroMQ is named so, `gt validate` says what gt-dispatcher does with a
manifest's keys (this user's default set, or --insecure's warning), and a peer's malformed messages cannot fill the dispatcher's log.

Real gt-dispatcher / gt-worker processes; hostile peers are raw ZeroMQ
(tests/python/raw_zmq.py) or plain sockets.
"""

import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

import raw_zmq
from conftest import stop_processes
from cluster_harness import BIN_DIR, FIRST_SYNC_ERROR, Cluster, clean_env, require_services, run_client
from test_security import SecureCluster, keys  # noqa: F401  (the module's key fixture)

GT = BIN_DIR / "gt"


@pytest.fixture(scope="module")
def secure(keys):  # noqa: F811
    c = SecureCluster(keys, workers=1)
    try:
        yield c
    finally:
        c.stop()


def start_worker(endpoint, *args, env=None):
    return subprocess.Popen([str(BIN_DIR / "gt-worker"), "--connect", endpoint, *args], env=env or clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


class ClosingListener:
    """A TCP port that accepts every connection and closes it at once, saying
    nothing (a forwarded port with no backend); or, with `silent`, keeps it
    open and says nothing."""

    def __init__(self, silent=False):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held = []
        self.silent = silent
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.silent:
                self.held.append(conn)
            else:
                conn.close()

    def close(self):
        self.sock.close()


# ---- issue 39 item 5 -----------------------------------------------------------------


def test_a_keyless_worker_against_a_dispatcher_with_keys_fails_naming_them(secure):
    for local_ipc in ("1", "0"):
        # --insecure: without it the worker would take this user's default key set.
        worker = start_worker(secure.endpoint, "--id", "keyless", "--insecure", env=clean_env(GT_LOCAL_IPC=local_ipc))
        try:
            out, _ = worker.communicate(timeout=30)
        finally:
            stop_processes([worker])
        assert worker.returncode != 0, out
        assert "requires CURVE keys (--key, --server-key)" in out, out
    assert secure.workers_connected() == 1


def test_a_worker_stops_on_the_first_sigterm():
    require_services()
    # Waiting on a handshake that never completes: the goodbye it sends
    # must not hold the signal up.
    silent = ClosingListener(silent=True)
    try:
        worker = start_worker(f"tcp://127.0.0.1:{silent.port}")
        assert "connecting to" in worker.stdout.readline()
        time.sleep(1)
        started = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=20)
        assert worker.returncode == 0 and "stopped" in out, out
        assert time.monotonic() - started < 15
    finally:
        silent.close()
    # Registered with a dispatcher.
    c = Cluster()
    try:
        c.add_worker("w0")
        c.wait_for_workers(1)
        w = c.workers["w0"]
        w.send_signal(signal.SIGTERM)
        assert w.wait(timeout=20) == 0
    finally:
        c.stop()


def test_an_address_where_nothing_speaks_zeromq_is_named_so():
    require_services()
    closing = ClosingListener()
    try:
        out = run_client(f"127.0.0.1:{closing.port}", FIRST_SYNC_ERROR,
                         env={"GT_CONNECT_TIMEOUT": "20", "GT_LOCAL_IPC": "0"})
    finally:
        closing.close()
    assert out["error"] and "nothing there answered" in out["error"], out
    assert "CURVE" not in out["error"], out
    assert out["seconds"] < 15, out  # the verdict, not the connect timeout


def test_validate_says_what_the_dispatcher_does_and_warns_on_insecure(tmp_path):
    require_services()
    exposed = tmp_path / "exposed.yaml"
    exposed.write_text("host: dispatcher\nlisten: tcp://0.0.0.0:5555\n")
    done = subprocess.run([str(GT), "validate", str(exposed)], env=clean_env(), capture_output=True, text=True,
                          timeout=30)
    # Without keys gt-dispatcher takes this user's default key set, wherever it listens.
    assert done.returncode == 0 and "this user's key set in" in done.stdout, done.stdout
    opted_out = tmp_path / "insecure.yaml"
    opted_out.write_text("host: dispatcher\nlisten: tcp://0.0.0.0:5555\nsecurity: {insecure: true}\n")
    done = subprocess.run([str(GT), "validate", str(opted_out)], env=clean_env(), capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0 and "WARNING: INSECURE" in done.stdout and ": ok (" in done.stdout, done.stdout
    loopback = tmp_path / "loopback.yaml"
    loopback.write_text("host: dispatcher\nlisten: tcp://127.0.0.1:5555\n")
    done = subprocess.run([str(GT), "validate", str(loopback)], env=clean_env(), capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0 and "WARNING" not in done.stdout and "key set" in done.stdout, done.stdout


# ---- issue 39 item 3: the log ----------------------------------------------------------


def scrape(metrics, name):
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5) as r:
        text = r.read().decode()
    found = re.search(rf"^{name}{{[^}}]*}} ([0-9.e+]+)$", text, re.M)
    return float(found.group(1)) if found else None


def test_invalid_utf8_messages_do_not_fill_the_dispatchers_log(tmp_path):
    require_services()
    log = tmp_path / "dispatcher.log"
    c = Cluster(dispatcher_log=log)
    try:
        c.add_worker("w0")
        c.wait_for_workers(1)
        before = log.stat().st_size
        # An authenticated client (the default key set, as the dispatcher's): keys bound who may talk, not how.
        peer = raw_zmq.Dealer(c.endpoint, curve=raw_zmq.default_client_keys(c.env))
        bad = raw_zmq.envelope(raw_zmq.HELLO, name=b"\xff\xfe not utf-8")
        try:
            for _ in range(20000):
                peer.send(bad)
            time.sleep(1)
        finally:
            peer.close()
        deadline = time.monotonic() + 60
        while scrape(c.metrics, "gt_host_malformed_messages_total") < 20000:
            assert c.procs[0].poll() is None, log.read_text()
            assert time.monotonic() < deadline, scrape(c.metrics, "gt_host_malformed_messages_total")
            time.sleep(0.2)
        grown = log.stat().st_size - before
        text = log.read_text(errors="replace")
        assert "invalid UTF-8" in text, text  # said, with its peer, a few times
        print(f"log grew {grown} bytes for 20,000 invalid messages")
        assert grown <= 4096, (grown, text[-2000:])
        assert scrape(c.metrics, "gt_log_lines_suppressed_total") >= 19900
        # The dispatcher is up and serves a client as before.
        out = run_client(c.endpoint, "    say(value=gt.ones(3).sum().item())\n")
        assert out["value"] == 3.0
    finally:
        c.stop()
