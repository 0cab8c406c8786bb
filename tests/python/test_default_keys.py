"""Keys by default (issue 39 item 4, docs/SECURITY.md "Keys by default"):
`gt cluster`, `python -m gt.server` and `gt-dispatcher` without key flags
authenticate with their user's key set (made once, in a directory only that
user can read), their workers and that user's clients find it by themselves,
another local user is refused in the handshake, and `--insecure` opts out
loudly.

Real processes. Each test has its own XDG_CONFIG_HOME, so it makes a fresh
key set; the one for a second local user runs as root only (it creates the
user with useradd and runs its client and worker under that user's id).
"""

import json
import os
import pathlib
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap

import pytest

from conftest import bound_endpoints, first_log_line, next_output_line, start_on_free_port, stop_processes
from cluster_harness import BIN_DIR, FIRST_SYNC_ERROR, PRELUDE, clean_env, require_services, run_client

PAIRS = ("dispatcher", "worker", "client")
SUM_BODY = """
    wait_for_workers(["worker-0"])
    say(value=gt.ones(3).sum().item())
"""
ALL_THREE_BODY = """
    wait_for_workers(["worker-0", "worker-1", "worker-2"])
    say(value=gt.ones(3).sum().item())
"""


@pytest.fixture
def config_home():
    """A fresh XDG_CONFIG_HOME outside pytest's private tmp root (mode 0755,
    so that only the key set's own modes keep a second user out)."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="gt-keys-test-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def key_dir(config_home):
    return config_home / "gt" / "keys"


def owner_env(config_home, **extra):
    return {"XDG_CONFIG_HOME": str(config_home), "GT_CONNECT_TIMEOUT": "30", **extra}


def mode(path):
    return stat.S_IMODE(path.lstat().st_mode)


def assert_private_key_set(keys):
    assert mode(keys) == 0o700, oct(mode(keys))
    names = sorted(p.name for p in keys.iterdir())
    assert names == sorted(f"{p}{ext}" for p in PAIRS for ext in (".key", ".pub")), names
    for p in keys.iterdir():
        assert p.stat().st_uid == os.geteuid() and mode(p) == 0o600, (p, oct(mode(p)))
    # Nothing left of the staging directory it was made in.
    assert [p.name for p in keys.parent.iterdir()] == ["keys"]


def key_bytes(keys):
    return {p.name: p.read_bytes() for p in keys.iterdir()}


def start_gt_cluster(config_home, *args):
    """`gt cluster -n 1` on a free loopback port; (process, its first line)."""
    proc = subprocess.Popen([str(BIN_DIR / "gt"), "cluster", "-n", "1", "--listen", "tcp://127.0.0.1:0", *args],
                            env=clean_env(**owner_env(config_home)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    first = next_output_line(proc, 60)
    if not first or "listening on" not in first:
        stop_processes([proc])
        raise AssertionError(f"gt cluster did not start: {first!r}")
    return proc, first


def test_gt_cluster_without_key_flags_serves_its_owner_and_refuses_keyless_peers(config_home):
    require_services()
    proc, first = start_gt_cluster(config_home)
    try:
        keys = key_dir(config_home)
        # The first line names the key set; it is private.
        assert f", keys in {keys}" in first, first
        assert_private_key_set(keys)
        endpoint, _ = bound_endpoints(first)
        for local_ipc in ("1", "0"):  # the ipc socket beside the port is guarded the same way
            out = run_client(endpoint, SUM_BODY, env=owner_env(config_home, GT_LOCAL_IPC=local_ipc))
            assert out["value"] == 3.0
        keyless = run_client(endpoint, FIRST_SYNC_ERROR, env=owner_env(config_home, GT_INSECURE="1"))
        assert keyless["error"] and "requires CURVE keys" in keyless["error"], keyless
    finally:
        stop_processes([proc])


def test_a_dispatcher_and_workers_started_at_once_make_one_key_set_and_reuse_it(config_home):
    require_services()
    endpoint = f"ipc://{config_home}/d.sock"
    env = clean_env(**owner_env(config_home))
    log = config_home / "dispatcher.log"

    def start_all():
        with open(log, "w") as out:
            d = subprocess.Popen([str(BIN_DIR / "gt-dispatcher"), "--listen", endpoint, "--metrics", "127.0.0.1:0"],
                                 env=env, stdout=out, stderr=subprocess.STDOUT)
        # Concurrent first starts: whoever renames its key set into place first wins, the others read it.
        ws = [subprocess.Popen([str(BIN_DIR / "gt-worker"), "--connect", endpoint, "--id", f"worker-{i}"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT) for i in range(3)]
        return [d] + ws

    procs = start_all()
    try:
        first = first_log_line(log, procs[0])
        assert f", keys in {key_dir(config_home)}" in first, first
        out = run_client(endpoint, ALL_THREE_BODY, env=owner_env(config_home))
        assert out["value"] == 3.0
    finally:
        stop_processes(procs)
    assert_private_key_set(key_dir(config_home))
    made = key_bytes(key_dir(config_home))
    procs = start_all()  # again: the same set, not a new one
    try:
        first_log_line(log, procs[0])
        assert run_client(endpoint, ALL_THREE_BODY, env=owner_env(config_home))["value"] == 3.0
    finally:
        stop_processes(procs)
    assert key_bytes(key_dir(config_home)) == made


def test_python_m_gt_server_takes_the_default_keys(config_home, tmp_path):
    require_services()
    env = clean_env(**owner_env(config_home))
    server, port = start_on_free_port(lambda p: [sys.executable, "-m", "gt.server", "-p", str(p)],
                                      tmp_path / "server.log", env=env)
    worker = subprocess.Popen([sys.executable, "-m", "gt.worker", "-p", str(port), "--id", "worker-0"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        assert f", keys in {key_dir(config_home)}" in first_log_line(tmp_path / "server.log", server)
        assert run_client(f"localhost:{port}", SUM_BODY, env=owner_env(config_home))["value"] == 3.0
    finally:
        stop_processes([worker, server])


def test_a_key_set_others_could_read_is_refused_naming_the_fix(config_home):
    require_services()
    env = clean_env(**owner_env(config_home))
    dispatcher = [str(BIN_DIR / "gt-dispatcher"), "--listen", "tcp://127.0.0.1:0"]
    made = subprocess.Popen(dispatcher, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert "keys in" in made.stdout.readline()
    finally:
        stop_processes([made])
    keys = key_dir(config_home)
    keys.chmod(0o750)
    refused = subprocess.run(dispatcher, env=env, capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2, refused
    assert f"{keys} has mode 0750" in refused.stderr and f"chmod 700 {keys}" in refused.stderr, refused.stderr
    keys.chmod(0o700)
    (keys / "worker.key").chmod(0o644)
    worker = subprocess.run([str(BIN_DIR / "gt-worker"), "--connect", "tcp://127.0.0.1:1"], env=env,
                            capture_output=True, text=True, timeout=30)
    assert worker.returncode == 2 and f"{keys}/worker.key has mode 0644" in worker.stderr, worker.stderr


def test_insecure_is_said_loudly_and_takes_no_keys(config_home, tmp_path):
    require_services()
    manifest = tmp_path / "insecure.yaml"
    manifest.write_text("host: dispatcher\nlisten: tcp://127.0.0.1:5555\nsecurity: {insecure: true}\n")
    env = clean_env(**owner_env(config_home))
    done = subprocess.run([str(BIN_DIR / "gt"), "validate", str(manifest)], env=env, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0 and "WARNING: INSECURE" in done.stdout, done.stdout
    assert "every user of this machine" in done.stdout, done.stdout
    proc = subprocess.Popen([str(BIN_DIR / "gt"), "cluster", "-n", "1", "--listen", "tcp://127.0.0.1:0", "--insecure"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = next_output_line(proc, 60)
        # Its first line (stderr, before the address on stdout) is the warning.
        warning = proc.stderr.readline().decode()
        assert warning.startswith("gt-dispatcher: WARNING: INSECURE") and "every user of this machine" in warning
        assert "keys in" not in first, first
        endpoint, _ = bound_endpoints(first)
        assert not (config_home / "gt").exists()  # no key set made
        out = run_client(endpoint, SUM_BODY, env=owner_env(config_home, GT_INSECURE="1"))
        assert out["value"] == 3.0
        # A client that did not opt out uses its keys, and the keyless dispatcher cannot take them.
        keyed = run_client(endpoint, FIRST_SYNC_ERROR, env=owner_env(config_home, GT_CONNECT_TIMEOUT="5"))
        assert keyed["error"], keyed
    finally:
        stop_processes([proc])


# ---- a second local user ---------------------------------------------------------------


@pytest.fixture(scope="module")
def stranger():
    """(uid, gid, home) of a second local user made for these tests."""
    if os.geteuid() != 0:
        pytest.skip("making a second local user needs root (useradd); run as root to test the refusal")
    if not shutil.which("useradd") or not shutil.which("userdel"):
        pytest.skip("useradd/userdel not installed: cannot make a second local user")
    name = f"gtkeys{os.getpid()}"
    made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"useradd {name} failed: {made.stderr.strip()}")
    try:
        entry = pwd.getpwnam(name)
        home = pathlib.Path(tempfile.mkdtemp(prefix="gt-stranger-"))
        os.chown(home, entry.pw_uid, entry.pw_gid)
        probe = as_user(entry.pw_uid, entry.pw_gid, home, [sys.executable, "-c", "import gt"], {})
        try:
            if probe.returncode != 0:
                pytest.skip(f"user {name} cannot import gt from this build: {probe.stderr.strip()[-300:]}")
            yield entry.pw_uid, entry.pw_gid, home
        finally:
            shutil.rmtree(home, ignore_errors=True)
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def as_user(uid, gid, home, argv, env, timeout=120):
    """subprocess.run of `argv` as user `uid`, HOME `home`, with `env` over the test's."""
    full = clean_env(HOME=str(home))
    full.pop("XDG_CONFIG_HOME", None)  # the owner's, when the test runner set one
    full.update(env)
    return subprocess.run(argv, env=full, cwd=home, user=uid, group=gid, extra_groups=[], capture_output=True,
                          text=True, timeout=timeout)


def stranger_client(stranger, endpoint, env):
    """FIRST_SYNC_ERROR's JSON line, run as the second user with `env`."""
    code = f"ENDPOINT = {endpoint!r}\n" + PRELUDE + textwrap.dedent(FIRST_SYNC_ERROR)
    done = as_user(*stranger, [sys.executable, "-c", code], {"GT_CONNECT_TIMEOUT": "30", **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_another_local_user_is_refused_by_a_default_gt_cluster(config_home, stranger):
    require_services()
    proc, first = start_gt_cluster(config_home)
    try:
        endpoint, _ = bound_endpoints(first)
        keys = key_dir(config_home)
        # Without keys, with its own default key set, with the owner's files named: refused each time.
        keyless = stranger_client(stranger, endpoint, {"GT_INSECURE": "1", "GT_LOCAL_IPC": "0"})
        assert keyless["error"] and "requires CURVE keys" in keyless["error"], keyless
        own = stranger_client(stranger, endpoint, {"GT_LOCAL_IPC": "0"})
        # Its own set names its own dispatcher.pub, so the handshake fails before any list is read.
        assert own["error"] and "the handshake failed" in own["error"], own
        assert (stranger[2] / ".config" / "gt" / "keys" / "client.key").exists()  # its own set, not the owner's
        # Even knowing the dispatcher's public key, its own key is on no list of this dispatcher.
        known = stranger[2] / "owners-dispatcher.pub"
        shutil.copy(keys / "dispatcher.pub", known)
        os.chown(known, stranger[0], stranger[1])
        listed = stranger_client(stranger, endpoint, {
            "GT_CLIENT_KEY": str(stranger[2] / ".config" / "gt" / "keys" / "client.key"), "GT_SERVER_KEY": str(known),
            "GT_LOCAL_IPC": "0"})
        assert listed["error"] and "refused this client's key" in listed["error"], listed
        taken = stranger_client(stranger, endpoint, {"GT_CLIENT_KEY": str(keys / "client.key"),
                                                     "GT_SERVER_KEY": str(keys / "dispatcher.pub"),
                                                     "GT_LOCAL_IPC": "0"})
        assert taken["error"] and "Permission denied" in taken["error"], taken
        pointed = stranger_client(stranger, endpoint, {"XDG_CONFIG_HOME": str(config_home), "GT_LOCAL_IPC": "0"})
        assert pointed["error"] and "cannot read the default key set" in pointed["error"], pointed
        # Its worker is refused too, and the owner's cluster serves on.
        worker = as_user(*stranger, [str(BIN_DIR / "gt-worker"), "--connect", endpoint, "--id", "intruder"],
                         {"GT_LOCAL_IPC": "0"}, timeout=60)
        assert worker.returncode != 0 and "the handshake failed" in worker.stderr, worker
        assert run_client(endpoint, SUM_BODY, env=owner_env(config_home))["value"] == 3.0
    finally:
        stop_processes([proc])
