"""scripts/launch-cluster.sh across hosts: four Linux network namespaces
(tests/python/netns.py; multihost_env.py has the layout and the keys), A the
dispatcher only, a worker in B and in C, the client in D.

Then scripts/launch-cluster.sh on a hostfile of those namespaces (A
dispatcher only, a worker in B and in C): a client in D runs a sharded
matmul on the two workers it started with the keys the script made and
printed (GT_CLIENT_KEY, GT_SERVER_KEY), a client without them is refused,
and the cluster is stopped by
`launch-cluster.sh stop` (--exec-via netns), by SIGINT to the script, as
Ctrl-C (its ssh path, with a stand-in ssh that runs the remote command line
in the namespace), and by `stop` after the script was SIGKILLed
(GT_LAUNCH_EXEC); each time no process is left in any namespace and the pid
files (and, over ssh, the key files it copied to the hosts; its temporary
key directory here) are gone. With --insecure it runs without keys, and a
client without keys computes. A worker that cannot start fails the script
at once.

Needs root and iproute2; skipped, with the reason, where namespaces cannot
be made (netns.skip_reason()) or the services are not built (GT_BIN_DIR,
else build/bin).
"""


import json
import os
import pathlib
import re
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time

from conftest import stop_processes
from multihost_env import (BIN_DIR, LAUNCH, TOL, _cmdline, _env, _namespace_pids, _read, _refused, _wait_for)
# The module-scoped fixtures this file's tests take.
from multihost_env import hosts, keys  # noqa: F401,F811


# ---- scripts/launch-cluster.sh --exec-via netns ------------------------------------------------------

LAUNCH_CLIENT = textwrap.dedent('''
    import json, sys
    import numpy as np
    import gt
    from gt import ShardConfig, SignalConfig
    gt.connect(sys.argv[1])
    gt.register_config("dp", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))
    a = np.arange(64 * 8, dtype=np.float32).reshape(64, 8) / 100
    b = np.linspace(-1, 1, 8 * 5, dtype=np.float32).reshape(8, 5)
    with gt.signal.context("dp"):
        c = gt.tensor(a) @ gt.tensor(b)
        total = c.sum()  # a pending sum: all-reduced when its value is fetched
    total = total.item()
    got = c.numpy()
    err = float(np.abs(got - a @ b).max())
    hosts = {k: h for k, h in gt.debug.get_worker_stats(timeout=5).items() if h is None or h["host"] == "worker"}
    work = {k: {"matmul": sum(s["value"] for s in h["samples"] if s["name"] == "gt_backend_op_seconds_count"
                              and s["labels"]["op"] == "matmul"),
                "all_reduce": sum(s["value"] for s in h["samples"] if s["name"] == "gt_collectives_total"
                                  and s["labels"]["collective"] == "all_reduce")} if h else None
            for k, h in hosts.items()}
    print(json.dumps({"err": err, "total": total, "want_total": float((a @ b).sum()), "work": work}))
''')


# Stands in for ssh: runs the remote command line as ssh would (one string,
# to the remote user's shell), in the namespace named as the host.
SSH_STUB = """#!/usr/bin/env bash
host=$1
shift
exec ip netns exec "$host" bash -c "$*"
"""


def _launch(hosts, tmp_path, name, via=("--exec-via", "netns"), env=None, extra=()):
    """Starts launch-cluster.sh on a hostfile of the namespaces (A: dispatcher
    only, B and C: a worker each), commands run `via` those options (and
    `env`), `extra` options added; returns (process, command prefix for
    `stop`, run dir, the gt.connect address, the printed client variables
    {GT_CLIENT_KEY, GT_SERVER_KEY}, output file) once it printed its
    gt.connect line."""
    a, b, c, _ = hosts
    hostfile = tmp_path / f"{name}.hosts"
    hostfile.write_text(textwrap.dedent(f"""\
        # the dispatcher's namespace first; it runs no worker
        {a.name} addr={a.address} workers=0

        {b.name} addr={b.address}   # one worker
        {c.name} slots=1 addr={c.address}
        """))
    run_dir = tmp_path / f"{name}-run"
    run_dir.mkdir()
    out = tmp_path / f"{name}.out"
    common = [*via, "--run-dir", str(run_dir)]
    with open(out, "w") as f:
        proc = subprocess.Popen(["bash", str(LAUNCH), *common, *extra, "--bin-dir", str(BIN_DIR), "--log-dir",
                                 str(tmp_path / f"{name}-logs"), "--wait", "60", str(hostfile)],
                                stdout=f, stderr=subprocess.STDOUT, env=_env(TMPDIR=str(tmp_path), **(env or {})))
    try:
        line = _wait_for(lambda: re.search(r'^gt\.connect\("([^"]+)"\)$', _read(out), re.M), "launch-cluster.sh "
                         "printing its gt.connect line", timeout=60, procs=[proc])
    except AssertionError as e:
        stop_processes([proc])
        raise AssertionError(f"{e}\n{_read(out)}") from None
    stop = ["bash", str(LAUNCH), "stop", *common, str(hostfile)]
    client_vars = dict(re.findall(r"^export (GT_CLIENT_KEY|GT_SERVER_KEY)=(\S+)$", _read(out), re.M))
    return proc, stop, run_dir, line.group(1), client_vars, out


def _check_launched_cluster(hosts, address, client_vars):
    """A client in D with `client_vars` runs a sharded matmul on both
    workers; with keys, one without them is refused."""
    a, b, c, d = hosts
    assert address == f"{a.address}:5555"
    r = subprocess.run(d.cmd(sys.executable, "-c", LAUNCH_CLIENT, address), capture_output=True, text=True,
                       env=_env(**client_vars), timeout=60)
    assert r.returncode == 0, r.stderr[-4000:]
    out = json.loads(r.stdout)
    assert out["err"] < TOL
    assert abs(out["total"] - out["want_total"]) < 1e-3
    # Worker ids are HOST-K; both ran the matmul and took part in the sum's all-reduce.
    assert sorted(out["work"]) == [f"{b.name}-0", f"{c.name}-0"], out["work"]
    for worker, w in out["work"].items():
        assert w["matmul"] > 0 and w["all_reduce"] > 0, (worker, w)
    if client_vars:
        error = _refused(d, address).get("error", "")
        assert "requires CURVE keys" in error, error


def _key_set(client_vars):
    """The launcher's key directory (from the printed variables), checked: a
    private directory with the script's layout, every .key of mode 0600."""
    assert sorted(client_vars) == ["GT_CLIENT_KEY", "GT_SERVER_KEY"], client_vars
    key_dir = pathlib.Path(client_vars["GT_SERVER_KEY"]).parent
    assert client_vars == {"GT_CLIENT_KEY": str(key_dir / "clients" / "client.key"),
                           "GT_SERVER_KEY": str(key_dir / "dispatcher.pub")}
    for d in (key_dir, key_dir / "clients", key_dir / "workers"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    keys = sorted(str(f.relative_to(key_dir)) for f in key_dir.rglob("*.key"))
    for f in keys:
        assert stat.S_IMODE((key_dir / f).stat().st_mode) == 0o600, f
    return key_dir, keys


def _process_args(hosts):
    """{"gt-dispatcher" | "gt-worker": [argv, ...]} of the gt processes in the namespaces."""
    out = {}
    for pids in _namespace_pids(hosts).values():
        for line in pids:
            argv = _cmdline(line.split(" ", 1)[0]).split()
            if argv and argv[0].rsplit("/", 1)[-1].startswith("gt-"):
                out.setdefault(argv[0].rsplit("/", 1)[-1], []).append(argv)
    return out


def _flag(argv, name):
    assert argv.count(name) == 1, (name, argv)
    return argv[argv.index(name) + 1]


def _assert_all_gone(hosts, run_dir):
    # The script has exited: nothing it started may be left, in any namespace.
    left = _namespace_pids(hosts)
    assert not left, left
    assert not list(run_dir.iterdir()), list(run_dir.iterdir())  # the pid files are removed


def _gt_processes(hosts):
    return sorted(p.split(" ", 2)[1].rsplit("/", 1)[-1] for pids in _namespace_pids(hosts).values() for p in pids)


def test_launch_cluster_in_namespaces_then_stop(hosts, tmp_path):
    proc, stop, run_dir, address, client_vars, out = _launch(hosts, tmp_path, "stop")
    try:
        assert len(list(run_dir.glob("gt-launch-5555-*.pid"))) == 3
        assert _gt_processes(hosts) == ["gt-dispatcher", "gt-worker", "gt-worker"]
        # A temporary key directory here (TMPDIR), used where it is (the
        # namespaces share this file system): one pair per worker host.
        key_dir, keys = _key_set(client_vars)
        assert key_dir.parent == tmp_path and key_dir.name.startswith("gt-launch-keys."), key_dir
        b, c = hosts[1:3]
        assert keys == ["clients/client.key", "dispatcher.key", f"workers/{b.name}.key", f"workers/{c.name}.key"]
        args = _process_args(hosts)
        [dispatcher] = args["gt-dispatcher"]
        assert [_flag(dispatcher, f) for f in ("--key", "--client-keys", "--worker-keys")] == [
            str(key_dir / "dispatcher.key"), str(key_dir / "clients"), str(key_dir / "workers")]
        assert "--insecure" not in dispatcher
        assert sorted((_flag(w, "--key"), _flag(w, "--server-key")) for w in args["gt-worker"]) == [
            (str(key_dir / "workers" / f"{h.name}.key"), str(key_dir / "dispatcher.pub")) for h in (b, c)]
        _check_launched_cluster(hosts, address, client_vars)
        r = subprocess.run(stop, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        stopped = sorted(re.findall(r"^launch-cluster: stopping (\S+) \(pid \d+\)$", r.stderr, re.M))
        assert stopped == sorted(["dispatcher", f"{hosts[1].name}-0", f"{hosts[2].name}-0"]), r.stderr
        assert proc.wait(timeout=30) == 0, _read(out)  # the dispatcher ended: so does the script
    finally:
        stop_processes([proc])
    _assert_all_gone(hosts, run_dir)
    assert "the dispatcher ended (status 0)" in _read(out), _read(out)
    assert not key_dir.exists()  # the temporary keys went with the cluster


def test_launch_cluster_over_ssh_stops_everything_on_ctrl_c(hosts, tmp_path):
    ssh = tmp_path / "ssh"
    ssh.write_text(SSH_STUB)
    ssh.chmod(0o755)
    proc, stop, run_dir, address, client_vars, out = _launch(hosts, tmp_path, "sigint", via=("--ssh", str(ssh)))
    try:
        # Over ssh every host got its files, copied through the ssh command
        # into RUN_DIR/gt-launch-PORT-keys (here one directory: the
        # namespaces share the file system): the dispatcher its key and the
        # allow-lists, each worker host its key and the dispatcher's .pub.
        key_dir, _ = _key_set(client_vars)
        b, c = hosts[1:3]
        remote = run_dir / "gt-launch-5555-keys"
        assert stat.S_IMODE(remote.stat().st_mode) == 0o700
        assert sorted(f.name for f in remote.iterdir()) == sorted(
            ["dispatcher.key", "clients.pub", "workers.pub", "dispatcher.pub", f"worker-{b.name}.key",
             f"worker-{c.name}.key"])
        for f in remote.iterdir():
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
        assert (remote / "dispatcher.key").read_text() == (key_dir / "dispatcher.key").read_text()
        assert (remote / f"worker-{b.name}.key").read_text() == (key_dir / "workers" / f"{b.name}.key").read_text()
        assert (remote / "workers.pub").read_text().count("public-key:") == 2
        assert (remote / "clients.pub").read_text() == (key_dir / "clients" / "client.pub").read_text()
        args = _process_args(hosts)
        [dispatcher] = args["gt-dispatcher"]
        assert [_flag(dispatcher, f) for f in ("--key", "--client-keys", "--worker-keys")] == [
            str(remote / "dispatcher.key"), str(remote / "clients.pub"), str(remote / "workers.pub")]
        assert sorted(_flag(w, "--key") for w in args["gt-worker"]) == [
            str(remote / f"worker-{h.name}.key") for h in (b, c)]
        assert {_flag(w, "--server-key") for w in args["gt-worker"]} == {str(remote / "dispatcher.pub")}
        _check_launched_cluster(hosts, address, client_vars)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130, _read(out)
    finally:
        stop_processes([proc])
    _assert_all_gone(hosts, run_dir)  # the copied keys too
    assert "stopping 3 processes" in _read(out), _read(out)
    assert not key_dir.exists()


def test_stop_ends_a_cluster_whose_launcher_was_killed(hosts, tmp_path):
    # GT_LAUNCH_EXEC instead of --exec-via; SIGKILL leaves the launcher no
    # chance to stop anything: `stop` finds the processes by their pid files.
    # The keys in a --key-dir of the user's, which already holds a client
    # key pair of theirs: it is used, the missing pairs are made, and all is
    # kept after the cluster is gone.
    via_env = {"GT_LAUNCH_EXEC": "ip netns exec"}
    my_keys = tmp_path / "my-keys"
    my_keys.mkdir(mode=0o700)
    (my_keys / "clients").mkdir(mode=0o700)
    r = subprocess.run([str(BIN_DIR / "gt"), "keygen", str(my_keys / "clients" / "client")], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    client_pub = (my_keys / "clients" / "client.pub").read_text()
    proc, stop, run_dir, address, client_vars, out = _launch(hosts, tmp_path, "killed", via=(), env=via_env,
                                                             extra=("--key-dir", str(my_keys)))
    assert _key_set(client_vars)[0] == my_keys
    _check_launched_cluster(hosts, address, client_vars)
    proc.kill()
    proc.wait()
    try:
        assert _gt_processes(hosts) == ["gt-dispatcher", "gt-worker", "gt-worker"]
    finally:
        r = subprocess.run(stop, capture_output=True, text=True, timeout=60, env=_env(**via_env))
    assert r.returncode == 0, r.stderr
    _assert_all_gone(hosts, run_dir)
    b, c = hosts[1:3]
    assert _key_set(client_vars)[1] == ["clients/client.key", "dispatcher.key", f"workers/{b.name}.key",
                                        f"workers/{c.name}.key"]
    assert (my_keys / "clients" / "client.pub").read_text() == client_pub


def test_launch_cluster_insecure_runs_without_keys(hosts, tmp_path):
    proc, stop, run_dir, address, client_vars, out = _launch(hosts, tmp_path, "insecure", extra=("--insecure",))
    try:
        assert client_vars == {}, _read(out)
        assert "--insecure: no keys" in _read(out)
        args = _process_args(hosts)
        [dispatcher] = args["gt-dispatcher"]
        assert "--insecure" in dispatcher and "--key" not in dispatcher, dispatcher
        assert all("--key" not in w and "--server-key" not in w for w in args["gt-worker"]), args
        _check_launched_cluster(hosts, address, {})  # a client without keys computes
        r = subprocess.run(stop, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert proc.wait(timeout=30) == 0, _read(out)
    finally:
        stop_processes([proc])
    _assert_all_gone(hosts, run_dir)
    assert not list(tmp_path.glob("gt-launch-keys.*"))


def test_launch_cluster_fails_fast_when_a_worker_cannot_start(hosts, tmp_path):
    a, b = hosts[:2]
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"{a.name} addr={a.address} workers=0\n{b.name} addr={b.address}\n")
    started = time.monotonic()
    r = subprocess.run(["bash", str(LAUNCH), "--exec-via", "netns", "--bin-dir", str(BIN_DIR), "--run-dir",
                        str(tmp_path), "--worker-manifest", str(tmp_path / "missing.yaml"), str(hostfile)],
                       capture_output=True, text=True, env=_env(TMPDIR=str(tmp_path)), timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert time.monotonic() - started < 20  # not the registration timeout (120 s)
    assert f"{b.name}-0 on {b.name} exited before every worker registered (0 of 1)" in r.stderr, r.stderr
    assert "gt.connect" not in r.stdout
    assert not _namespace_pids(hosts)
    assert not list(tmp_path.glob("*.pid"))
    assert not list(tmp_path.glob("gt-launch-keys.*"))  # its temporary keys removed on failure too


def test_launch_cluster_key_options_are_checked_before_anything_starts(tmp_path):
    # Neither needs namespaces: nothing runs on a host before the keys exist.
    hostfile = tmp_path / "ns.hosts"
    hostfile.write_text("ns-a addr=10.77.0.1 workers=0\nns-b addr=10.77.0.2\n")
    r = subprocess.run(["bash", str(LAUNCH), "--exec-via", "netns", "--insecure", "--key-dir", str(tmp_path / "k"),
                        str(hostfile)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--insecure and --key-dir" in r.stderr, r.stderr
    r = subprocess.run(["bash", str(LAUNCH), "--exec-via", "netns", "--gt", str(tmp_path / "no-gt"), str(hostfile)],
                       capture_output=True, text=True, timeout=30, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert r.returncode == 1 and f"--gt {tmp_path / 'no-gt'}: no such command here" in r.stderr, r.stderr
    assert "dispatcher on" not in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ns.hosts"]  # its temporary key directory removed


def test_launch_cluster_refuses_a_namespace_without_its_address(tmp_path):
    hostfile = tmp_path / "bad.hosts"
    hostfile.write_text("ns-a addr=10.77.0.1 workers=0\nns-b workers=2\n")
    r = subprocess.run(["bash", str(LAUNCH), "--exec-via", "netns", str(hostfile)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 1
    assert f"{hostfile}:2: 'ns-b' needs addr=ADDRESS" in r.stderr, r.stderr


def test_launch_cluster_script_is_valid_bash():
    r = subprocess.run(["bash", "-n", str(LAUNCH)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["bash", str(LAUNCH), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "HOSTFILE" in r.stdout and "--exec-via" in r.stdout
    if shutil.which("shellcheck"):
        # -a: also the parts it sources (scripts/lib/launch-cluster/, found through scripts/.shellcheckrc).
        r = subprocess.run(["shellcheck", "-a", "-S", "warning", str(LAUNCH)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout
