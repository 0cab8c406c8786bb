"""What the multi-host tests (test_multihost*.py) share: the four network
namespaces standing in for hosts (fixture `hosts`, tests/python/netns.py), a
set of CURVE keys for them (fixture `keys`), and readers of what runs in a
namespace (its processes, their sockets) and what a client printed.
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import gt
import netns


REPO = pathlib.Path(__file__).resolve().parents[2]
BIN_DIR = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))
LAUNCH = REPO / "scripts" / "launch-cluster.sh"
# Every namespace has ports of its own: fixed numbers cannot clash with
# anything outside it.
PORT, METRICS_PORT, WORKER_METRICS_PORT = 5555, 9100, 9101
TOL = 1e-4


def _require():
    reason = netns.skip_reason()
    if reason:
        pytest.skip(f"multi-host test needs network namespaces: {reason}")
    if not all((BIN_DIR / b).exists() for b in ("gt", "gt-dispatcher", "gt-worker")):
        pytest.skip(f"gt / gt-dispatcher / gt-worker not built in {BIN_DIR}")


def _env(**extra):
    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(gt.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    for k in ("GT_LOCAL_IPC", "GT_EXPLAIN", "GT_AUTO_SHARD", "GT_VERBOSE", "GT_CONFIG", "GT_CLIENT_KEY",
              "GT_SERVER_KEY", "GT_CONNECT_TIMEOUT"):
        env.pop(k, None)
    env.update(extra)
    return env


def _wait_for(predicate, what, timeout=30.0, procs=()):
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"{what}: {p.args} exited with status {p.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.05)


def _read(path):
    return path.read_text() if path.exists() else ""


def _namespace_pids(hosts):
    """{namespace: ["PID COMMAND LINE", ...]} of every process in the namespaces, empty ones left out."""
    out = {}
    for h in hosts:
        r = subprocess.run(["ip", "netns", "pids", h.name], capture_output=True, text=True, timeout=10)
        pids = r.stdout.split()
        if pids:
            out[h.name] = [f"{p} {_cmdline(p)}" for p in pids]
    return out


def _cmdline(pid):
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "?"


def _tcp_sockets(host):
    """Every TCP socket in the namespace (`ss -t -a`), as [(local, peer, process)]."""
    r = subprocess.run(host.cmd("ss", "-H", "-n", "-p", "-t", "-a"), capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    out = []
    for line in r.stdout.splitlines():
        f = line.split()  # State Recv-Q Send-Q Local Peer [Process]
        if len(f) >= 5:
            out.append((f[3], f[4], f[5] if len(f) > 5 else ""))
    return out


def _unix_listeners(host):
    """`ss -x -l` lines of the namespace, as text."""
    r = subprocess.run(host.cmd("ss", "-H", "-n", "-p", "-x", "-l"), capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def _ip_of(endpoint):
    """'10.77.0.2:41000' / '[::ffff:10.77.0.2]:41000' -> '10.77.0.2'."""
    host = endpoint.rsplit(":", 1)[0].strip("[]")
    return host[7:] if host.startswith("::ffff:") else host


# Fails at its first sync point; prints the error.
REFUSED_CLIENT = textwrap.dedent('''
    import json, sys
    import gt
    gt.connect(sys.argv[1])
    try:
        print(json.dumps({"value": gt.ones(2).sum().item()}))
    except Exception as e:
        print(json.dumps({"error": str(e)}))
''')


def _refused(host, address, **env):
    """What a client in `host` with `env` (GT_CLIENT_KEY, ...) was told at its first sync point."""
    r = subprocess.run(host.cmd(sys.executable, "-c", REFUSED_CLIENT, address), capture_output=True, text=True,
                       env=_env(GT_CONNECT_TIMEOUT="20", **env), timeout=60)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.splitlines()[-1])


def _close(got, want, what):
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64),
                               rtol=TOL, atol=TOL, err_msg=what)


# ---- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hosts():
    _require()
    with netns.namespaces(4) as made:
        yield made
        left = _namespace_pids(made)
    assert not left, f"processes left in the namespaces after the tests: {left}"


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """A key set by `gt keygen`: dispatcher, workers/w0, workers/w1,
    clients/alice, and a stranger's pair on no list."""
    _require()
    d = tmp_path_factory.mktemp("keys")
    (d / "workers").mkdir()
    (d / "clients").mkdir()
    r = subprocess.run([str(BIN_DIR / "gt"), "keygen", "dispatcher", "workers/w0", "workers/w1", "clients/alice",
                        "stranger"], cwd=d, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return d
