"""A process cluster's client without a dispatcher, or with one that went
away or dropped it, and addresses, ports and timeouts that are wrong: each a
clear gt error naming what was wrong. Real processes over TCP loopback
(cluster_harness.py).
"""

import pathlib
import re
import signal
import socket
import subprocess
import time

from cluster_harness import (BIN_DIR, clean_env, client, cluster, end_clients, read_line, require_services, run_client,
                             tell)
from conftest import _free_port


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
        """, env={"GT_RECONNECT_GRACE": "0"})  # no ride-through (test_dispatcher_restart.py has that)
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
