"""A dispatcher that does not trust its peers (issue 20, docs/SECURITY.md):
CURVE keys written by `gt keygen`, each connection's role given by the key
it proved (only a key on the workers list registers, only one on the
clients list opens a session), clear errors for a client without keys or
with a key nobody listed, and no unauthenticated listener on a
non-loopback address unless the operator says --insecure.

Real gt-dispatcher / gt-worker processes over TCP loopback (and the local
ipc socket beside it, which CURVE guards the same way); every client is a
fresh interpreter.
"""

import os
import pathlib
import stat
import subprocess
import time

import pytest

from conftest import stop_processes
from test_cluster import BIN_DIR, Cluster, clean_env, client, end_clients, read_line, require_services, run_client, tell

GT = BIN_DIR / "gt"

SUM_BODY = """
    a = gt.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = gt.from_numpy(np.ones((3, 2), dtype=np.float32))
    say(value=(a @ b).numpy().tolist())
"""
SUM_VALUE = [[3.0, 3.0], [12.0, 12.0]]

# Fails at its first sync point; prints the error (and how long it took).
REFUSED_BODY = """
    start = time.monotonic()
    try:
        gt.ones(2).sum().item()
        say(error=None, seconds=time.monotonic() - start)
    except Exception as e:
        say(error=str(e), seconds=time.monotonic() - start)
"""


def keygen(*names, cwd):
    return subprocess.run([str(GT), "keygen", *names], cwd=cwd, capture_output=True, text=True, timeout=30)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    require_services()
    d = tmp_path_factory.mktemp("keys")
    (d / "clients").mkdir()
    (d / "workers").mkdir()
    done = keygen("dispatcher", "workers/w0", "workers/w1", "clients/alice", "clients/bob", "stranger", cwd=d)
    assert done.returncode == 0, done.stderr
    return d


class SecureCluster(Cluster):
    def __init__(self, keys, workers=2, manifest=None):
        self.keys = keys
        extra = ["--manifest", str(manifest)] if manifest else []
        super().__init__(["--key", str(keys / "dispatcher.key"), "--client-keys", str(keys / "clients"),
                          "--worker-keys", str(keys / "workers"), *extra])
        for i in range(workers):
            self.add_worker(f"worker-{i}", key=keys / "workers" / f"w{i}.key")
            self.wait_for_workers(i + 1)

    def add_worker(self, name, key=None):
        argv = ["gt-worker", "--connect", self.endpoint, "--id", name, "--key", str(key),
                "--server-key", str(self.keys / "dispatcher.pub")]
        proc = subprocess.Popen([str(BIN_DIR / argv[0]), *argv[1:]], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        self.workers[name] = proc
        self.procs.append(proc)
        return proc

    def client_env(self, key, local_ipc="1"):
        env = {"GT_SERVER_KEY": str(self.keys / "dispatcher.pub"), "GT_LOCAL_IPC": local_ipc,
               "GT_CONNECT_TIMEOUT": "30"}
        if key:
            env["GT_CLIENT_KEY"] = str(key)
        return env


@pytest.fixture(scope="module")
def secure(keys):
    c = SecureCluster(keys)
    try:
        yield c
    finally:
        c.stop()


def test_keygen_writes_a_private_pair_and_never_overwrites(tmp_path):
    require_services()
    done = keygen("k", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    key, pub = (tmp_path / "k.key").read_text(), (tmp_path / "k.pub").read_text()
    assert stat.S_IMODE((tmp_path / "k.key").stat().st_mode) == 0o600
    public = [l.split(":", 1)[1].strip() for l in key.splitlines() if l.startswith("public-key:")]
    assert len(public) == 1 and len(public[0]) == 40
    assert f"public-key: {public[0]}" in pub and "secret-key" not in pub
    again = keygen("k", cwd=tmp_path)
    assert again.returncode != 0 and "never overwrites" in again.stderr
    assert (tmp_path / "k.key").read_text() == key


@pytest.mark.parametrize("local_ipc", ["1", "0"])
def test_a_listed_client_computes_over_curve(secure, local_ipc):
    out = run_client(secure.endpoint, SUM_BODY, env=secure.client_env(secure.keys / "clients" / "alice.key", local_ipc))
    assert out["value"] == SUM_VALUE


@pytest.mark.parametrize("local_ipc", ["1", "0"])
def test_a_client_without_keys_is_refused_at_once_naming_the_keys(secure, local_ipc):
    # GT_INSECURE: without it the client would take this user's default key set.
    out = run_client(secure.endpoint, REFUSED_BODY,
                     env=secure.client_env(None, local_ipc) | {"GT_SERVER_KEY": "", "GT_INSECURE": "1"})
    assert out["error"] and "requires CURVE keys" in out["error"], out
    assert out["seconds"] < 10, out  # the handshake's failure, not GT_CONNECT_TIMEOUT (30 s)


def test_a_key_on_no_list_is_refused(secure):
    out = run_client(secure.endpoint, REFUSED_BODY, env=secure.client_env(secure.keys / "stranger.key"))
    assert out["error"] and "refused this client's key" in out["error"], out
    assert out["seconds"] < 10, out


def test_a_worker_key_opens_no_client_session(secure):
    out = run_client(secure.endpoint, REFUSED_BODY, env=secure.client_env(secure.keys / "workers" / "w0.key"))
    assert out["error"] and "carries no client messages" in out["error"], out


def test_a_client_key_cannot_register_as_a_worker(secure):
    impostor = secure.add_worker("impostor", key=secure.keys / "clients" / "alice.key")
    try:
        out, _ = impostor.communicate(timeout=20)
    finally:
        if impostor.poll() is None:
            impostor.kill()
    assert impostor.returncode != 0
    assert "may not register as a worker" in out, out
    assert secure.workers_connected() == 2
    # The cluster serves its clients as before.
    out = run_client(secure.endpoint, SUM_BODY, env=secure.client_env(secure.keys / "clients" / "alice.key"))
    assert out["value"] == SUM_VALUE


def test_an_unlisted_worker_key_is_refused_and_the_worker_exits(secure):
    stranger = secure.add_worker("stranger", key=secure.keys / "stranger.key")
    try:
        out, _ = stranger.communicate(timeout=20)
    finally:
        stop_processes([stranger])
    assert stranger.returncode != 0
    assert "refused this worker's key" in out, out
    assert secure.workers_connected() == 2


def test_a_non_loopback_listen_takes_the_default_keys_or_says_insecure():
    require_services()
    # Without keys: this user's default key set (test_default_keys.py), so no refusal.
    keyed = subprocess.Popen([str(BIN_DIR / "gt-dispatcher"), "--listen", "tcp://0.0.0.0:0"],
                             env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        first = keyed.stdout.readline()
        assert "listening on tcp://0.0.0.0" in first and ", keys in " in first, first
    finally:
        stop_processes([keyed])
    accepted = subprocess.Popen([str(BIN_DIR / "gt-dispatcher"), "--listen", "tcp://0.0.0.0:0", "--insecure"],
                                env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # Said first, loudly, before the address it serves (issue 39).
        first = accepted.stdout.readline()
        assert first.startswith("gt-dispatcher: WARNING: INSECURE") and "tcp://0.0.0.0" in first, first
        assert "listening on" in accepted.stdout.readline()
    finally:
        stop_processes([accepted])


def test_incomplete_or_wrong_keys_are_named(keys, tmp_path):
    dispatcher = [str(BIN_DIR / "gt-dispatcher"), "--listen", "tcp://127.0.0.1:0"]

    def run(*args):
        return subprocess.run(dispatcher + list(args), env=clean_env(), capture_output=True, text=True, timeout=30)

    only_key = run("--key", str(keys / "dispatcher.key"))
    assert only_key.returncode == 2 and "needs both allow-lists" in only_key.stderr
    public_for_secret = run("--key", str(keys / "dispatcher.pub"), "--client-keys", str(keys / "clients"),
                            "--worker-keys", str(keys / "workers"))
    assert public_for_secret.returncode == 1 and "no secret-key line" in public_for_secret.stderr
    (tmp_path / "empty").mkdir()
    empty = run("--key", str(keys / "dispatcher.key"), "--client-keys", str(keys / "clients"),
                "--worker-keys", str(tmp_path / "empty"))
    assert empty.returncode == 1 and "holds no public keys" in empty.stderr
    (tmp_path / "bad.pub").write_text("public-key: not-a-key\n")
    bad = run("--key", str(keys / "dispatcher.key"), "--client-keys", str(tmp_path / "bad.pub"),
              "--worker-keys", str(keys / "workers"))
    assert bad.returncode == 1 and "bad.pub:1: not a 40-character Z85 CURVE key" in bad.stderr
    worker = subprocess.run([str(BIN_DIR / "gt-worker"), "--key", str(keys / "workers" / "w0.key")],
                            env=clean_env(), capture_output=True, text=True, timeout=30)
    assert worker.returncode == 2 and "missing server_key" in worker.stderr


def test_one_key_holds_at_most_max_sessions_per_key_sessions(keys, tmp_path):
    """The quotas are per session; a key's sessions are capped, so that one
    key cannot multiply its share by opening more."""
    manifest = tmp_path / "dispatcher.yaml"
    manifest.write_text("host: dispatcher\nlimits: {max_sessions_per_key: 2}\n")
    c = SecureCluster(keys, workers=1, manifest=manifest)
    alice, bob = keys / "clients" / "alice.key", keys / "clients" / "bob.key"
    holding = """
        say(value=gt.ones(2).sum().item())
        sys.stdin.readline()
    """
    held = []
    try:
        held = [client(c.endpoint, holding, env=c.client_env(alice)) for _ in range(2)]
        assert [read_line(p) for p in held] == [{"value": 2.0}] * 2
        third = run_client(c.endpoint, REFUSED_BODY, env=c.client_env(alice))
        assert third["error"] and "limits.max_sessions_per_key" in third["error"], third
        assert run_client(c.endpoint, SUM_BODY, env=c.client_env(bob))["value"] == SUM_VALUE  # another key
        done = held.pop()
        tell(done, "done")  # it exits, saying goodbye: its session ends
        assert done.wait(timeout=30) == 0
        again = run_client(c.endpoint, SUM_BODY, env=c.client_env(alice))
        assert again["value"] == SUM_VALUE, again
    finally:
        end_clients(*held)
        c.stop()
