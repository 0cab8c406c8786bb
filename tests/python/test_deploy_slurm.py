"""The Slurm batch script (deploy/slurm/gt.sbatch), run for real with stub
`scontrol` / `srun` (two "nodes", both this machine; srun runs its command
here): a dispatcher and two workers start with the job's keys, a training
command computes a sharded matmul on both workers and checks it against NumPy
while a client without keys is refused, the key files are private, and every
process (and the job's key directory, unless GT_KEY_DIR named it) is gone
afterwards.
"""

import json
import os
import pathlib
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time

import pytest

import gt
from conftest import run_python
from deploy_objects import BIN_DIR, REPO, SBATCH


# ---- Slurm ----------------------------------------------------------------------------


def test_sbatch_script_is_valid_bash():
    out = subprocess.run(["bash", "-n", str(SBATCH)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    if shutil.which("shellcheck"):
        # Warnings and errors only (its infos include the trap handlers it cannot see called).
        out = subprocess.run(["shellcheck", "-S", "warning", str(SBATCH), str(REPO / "scripts" / "setup-npm.sh")],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stdout


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


TRAIN = textwrap.dedent("""\
    # The user's training command: connects where gt.sbatch says, runs a
    # matmul sharded over both workers, checks it against NumPy, and reports
    # what the dispatcher and the workers say, the job's key files and their
    # modes, and what a client without the keys was told.
    import json, os, subprocess, sys, urllib.request
    import numpy as np
    import gt
    from gt import ShardConfig, SignalConfig

    key_dir = os.path.dirname(os.environ["GT_SERVER_KEY"])
    modes = {os.path.relpath(os.path.join(d, n), key_dir): oct(os.stat(os.path.join(d, n)).st_mode & 0o777)
             for d, dirs, names in os.walk(key_dir) for n in [""] + names}
    keyless_env = {k: v for k, v in os.environ.items() if k not in ("GT_CLIENT_KEY", "GT_SERVER_KEY")}
    keyless = subprocess.run([sys.executable, "-c", "import gt, os; gt.connect(os.environ['GT_ADDRESS']); "
                              "gt.ones(2).sum().item()"], env=dict(keyless_env, GT_CONNECT_TIMEOUT="10"),
                             capture_output=True, text=True, timeout=60)

    gt.connect(os.environ["GT_ADDRESS"])
    gt.register_config("dp", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))
    rng = np.random.default_rng(7)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    with gt.signal.context("dp"):
        y = gt.tensor(a) @ gt.tensor(b)
    error = float(np.max(np.abs(y.numpy() - a @ b)))
    stats = gt.debug.get_worker_stats()
    matmuls = {host: sum(s["value"] for s in h["samples"]
                         if s["name"] == "gt_backend_op_seconds_count" and s["labels"].get("op") == "matmul")
               for host, h in stats.items() if h["host"] == "worker"}
    text = urllib.request.urlopen("http://" + os.environ["GT_METRICS_ADDRESS"] + "/metrics", timeout=5).read().decode()
    connected = sum(float(line.split()[-1]) for line in text.splitlines()
                    if line.startswith("gt_host_workers_connected"))
    with open(sys.argv[1], "w") as f:
        json.dump({"error": error, "matmuls": matmuls, "workers_connected": connected,
                   "client_key": os.environ["GT_CLIENT_KEY"], "server_key": os.environ["GT_SERVER_KEY"],
                   "modes": modes, "keyless_status": keyless.returncode, "keyless_stderr": keyless.stderr}, f)
    """)


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def run_sbatch(tmp_path, args=(), env=None, timeout=90, while_running=None):
    """Runs gt.sbatch with stub scontrol/srun (nodes `localhost` and
    `127.0.0.1`) in its own process group; returns (CompletedProcess, srun
    calls, ports). `while_running(proc, log)` is called once it started.
    Asserts that nothing of that group outlives the script."""
    if not (BIN_DIR / "gt-dispatcher").exists() or not (BIN_DIR / "gt-worker").exists():
        pytest.skip(f"gt-dispatcher / gt-worker not built in {BIN_DIR}")
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    (stubs / "scontrol").write_text(textwrap.dedent("""\
        #!/usr/bin/env bash
        # Stub: two nodes, both this machine.
        [ "$1 $2" = "show hostnames" ] || { echo "stub scontrol: unexpected: $*" >&2; exit 1; }
        printf 'localhost\\n127.0.0.1\\n'
        """))
    (stubs / "srun").write_text(textwrap.dedent("""\
        #!/usr/bin/env bash
        # Stub: logs its words, drops the Slurm flags (--flag=value), runs the command here.
        printf '%s\\n' "$*" >> "$SRUN_LOG"
        while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do shift; done
        exec "$@"
        """))
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    port, metrics_port = free_ports(2)
    srun_log = tmp_path / "srun.log"
    # $HOME, where the job's keys go by default, in this test's directory.
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("SLURM_", "GT_")) or k in ("GT_BIN_DIR",)}
    full_env.update({
        "PATH": f"{stubs}{os.pathsep}{os.environ.get('PATH', '')}",
        "SRUN_LOG": str(srun_log),
        "HOME": str(home),
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NODELIST": "node[01-02]",
        "SLURM_NNODES": "2",
        "GT_BIN_DIR": str(BIN_DIR),
        "GT_PORT": str(port),
        "GT_METRICS_PORT": str(metrics_port),
        # Both "nodes" are this machine: fixed worker metrics ports would collide.
        "GT_WORKER_METRICS_PORT": "0",
        "GT_WAIT_S": "30",
        "PYTHONPATH": os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(os.path.abspath(gt.__file__))),
                                                   os.environ.get("PYTHONPATH")] if p),
    })
    full_env.update(env or {})
    # Output to a file, not a pipe: a step the script failed to stop would
    # hold a pipe open, and reading it would wait for that step, not the script.
    log = tmp_path / "sbatch.out"
    with open(log, "w") as out_file:
        proc = subprocess.Popen(["bash", str(SBATCH), *args], cwd=tmp_path, env=full_env, stdout=out_file,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        if while_running:
            while_running(proc, log)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"gt.sbatch still running after {timeout}s:\n{log.read_text()}")
        # The script stops its steps itself before it exits: give the last one
        # a moment to be reaped, then nothing of its process group may be left.
        deadline = time.monotonic() + 5
        while group_alive(proc.pid):
            if time.monotonic() > deadline:
                pytest.fail(f"processes of gt.sbatch outlived it:\n{log.read_text()}")
            time.sleep(0.1)
    finally:
        # Whatever failed above: nothing this test started stays behind.
        if group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    out = log.read_text()
    calls = srun_log.read_text().splitlines() if srun_log.exists() else []
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, ""), calls, (port, metrics_port)


def printed_client_variables(out):
    """GT_ADDRESS, GT_CLIENT_KEY, GT_SERVER_KEY as gt.sbatch printed them."""
    m = re.search(r"^gt\.sbatch: +GT_ADDRESS=(\S+) GT_CLIENT_KEY=(\S+) GT_SERVER_KEY=(\S+)$", out, re.M)
    assert m, out
    return m.groups()


def test_sbatch_runs_a_cluster_and_the_training_command(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    result_file = tmp_path / "result.json"
    done, calls, (port, metrics_port) = run_sbatch(tmp_path, [sys.executable, "train.py", str(result_file)])
    assert done.returncode == 0, done.stdout
    result = json.loads(result_file.read_text())
    assert result["workers_connected"] == 2, done.stdout
    # The job's keys: a private directory of its own under $HOME/.gt/keys,
    # the secret halves readable by the owner only, the client's pair in the
    # clients/ allow-list directory; printed next to the address, given to
    # the training command, and removed when the job ended.
    key_dir = pathlib.Path(result["server_key"]).parent
    assert key_dir.parent == tmp_path / "home" / ".gt" / "keys" and key_dir.name.startswith("job-4242."), key_dir
    assert result["client_key"] == str(key_dir / "clients" / "client.key")
    assert result["modes"] == {".": "0o700", "dispatcher.key": "0o600", "dispatcher.pub": "0o644",
                               "worker.key": "0o600", "worker.pub": "0o644", "clients": "0o700",
                               "clients/client.key": "0o600", "clients/client.pub": "0o644"}, result["modes"]
    assert printed_client_variables(done.stdout) == (f"localhost:{port}", result["client_key"], result["server_key"])
    assert not key_dir.exists()
    assert stat.S_IMODE((tmp_path / "home" / ".gt" / "keys").stat().st_mode) == 0o700
    # ... and the dispatcher takes only those keys: a client without them is refused.
    assert result["keyless_status"] != 0 and "requires CURVE keys" in result["keyless_stderr"], result
    assert result["error"] < 1e-3
    # Sharded on axis 0 over both: each worker ran its half of the matmul.
    assert sorted(result["matmuls"]) == ["worker-0", "worker-1"]
    assert all(n >= 1 for n in result["matmuls"].values()), result
    # The dispatcher on the first node, on every interface; one worker step
    # per node, worker-0 on the first, all connecting to the first node.
    steps = srun_steps(calls)
    assert sorted(steps) == ["dispatcher", "worker-0", "worker-1"], calls
    assert "--nodelist=localhost" in steps["dispatcher"]
    assert f"--listen tcp://0.0.0.0:{port} --metrics 0.0.0.0:{metrics_port}" in steps["dispatcher"]
    assert (f"--key {key_dir}/dispatcher.key --client-keys {key_dir}/clients --worker-keys {key_dir}/worker.pub"
            in steps["dispatcher"]), calls
    for i, node in enumerate(["localhost", "127.0.0.1"]):
        assert f"--nodelist={node}" in steps[f"worker-{i}"] and "--overlap" in steps[f"worker-{i}"], calls
        assert f"gt-worker --connect localhost:{port} --id worker-{i}" in steps[f"worker-{i}"], calls
        assert f"--key {key_dir}/worker.key --server-key {key_dir}/dispatcher.pub" in steps[f"worker-{i}"], calls
    assert "gt.sbatch: 2 workers registered" in done.stdout
    assert "training command exited with status 0" in done.stdout


def srun_steps(calls):
    """The stub srun's logged calls as {"dispatcher" | "worker-N": words}
    (the background steps log in whatever order they start)."""
    steps = {}
    for call in calls:
        words = call.split()
        name = "dispatcher" if any(w.endswith("/gt-dispatcher") for w in words) else words[words.index("--id") + 1]
        assert name not in steps, calls
        steps[name] = call
    return steps


def test_sbatch_one_worker_per_gpu_and_the_commands_status(tmp_path):
    # --gpus-per-node=2 (Slurm sets SLURM_GPUS_PER_NODE, with or without a
    # type): two workers per node, each its own step bound to one GPU and
    # half the node's CPUs, ids in node order. The command comes from
    # GT_TRAIN_CMD and fails: the job fails with its status, and still stops
    # the cluster (run_sbatch checks that nothing is left).
    done, calls, _ = run_sbatch(tmp_path, env={"SLURM_GPUS_PER_NODE": "h100:2", "SLURM_CPUS_ON_NODE": "16",
                                               "GT_TRAIN_CMD": 'test -n "$GT_ADDRESS" && test -f "$GT_CLIENT_KEY" '
                                                               '&& test -f "$GT_SERVER_KEY" && exit 3'})
    assert done.returncode == 3, done.stdout
    # A failed job removes its keys too.
    assert list((tmp_path / "home" / ".gt" / "keys").iterdir()) == []
    assert "gt.sbatch: 4 workers registered" in done.stdout
    assert "training command exited with status 3" in done.stdout
    steps = srun_steps(calls)
    assert sorted(steps) == ["dispatcher", "worker-0", "worker-1", "worker-2", "worker-3"], calls
    for i in range(4):
        node = "localhost" if i < 2 else "127.0.0.1"
        assert f"--nodelist={node}" in steps[f"worker-{i}"], calls
        assert "--exact --gpus-per-task=1 --cpus-per-task=8" in steps[f"worker-{i}"], calls


def test_sbatch_without_a_command_serves_until_cancelled(tmp_path):
    # No command: the cluster serves until the job ends. scancel and the
    # time limit end it with SIGTERM to the script, which must stop every
    # step and exit 143. The keys are in the user's GT_KEY_DIR (given as a
    # relative path, not there yet), which already holds the dispatcher's
    # pair: that pair is used, the missing ones are made, and all are kept.
    key_dir = tmp_path / "my-keys"
    key_dir.mkdir(mode=0o700)
    made = subprocess.run([str(BIN_DIR / "gt"), "keygen", str(key_dir / "dispatcher")], capture_output=True,
                          text=True, timeout=30)
    assert made.returncode == 0, made.stderr
    dispatcher_pub = (key_dir / "dispatcher.pub").read_text()
    served = {}

    def cancel_once_serving(proc, log):
        deadline = time.monotonic() + 30
        while "serving on" not in log.read_text():
            assert proc.poll() is None, f"gt.sbatch exited while it should serve:\n{log.read_text()}"
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        # A client elsewhere, with the printed variables, computes.
        address, client_key, server_key = printed_client_variables(log.read_text())
        served["client"] = run_python(
            f"import gt; gt.connect({address!r}); print((gt.ones(4) * 3).sum().item())",
            env={"GT_CLIENT_KEY": client_key, "GT_SERVER_KEY": server_key, "GT_CONNECT_TIMEOUT": "10"}, timeout=60)
        proc.send_signal(signal.SIGTERM)

    done, calls, _ = run_sbatch(tmp_path, while_running=cancel_once_serving, env={"GT_KEY_DIR": "my-keys"})
    assert done.returncode == 143, done.stdout
    assert served["client"].returncode == 0 and served["client"].stdout.split()[-1] == "12.0", served["client"].stderr
    _, client_key, server_key = printed_client_variables(done.stdout)
    assert (client_key, server_key) == (str(key_dir / "clients" / "client.key"), str(key_dir / "dispatcher.pub"))
    assert (key_dir / "dispatcher.pub").read_text() == dispatcher_pub
    for name in ("dispatcher.key", "worker.key", "clients/client.key"):
        assert stat.S_IMODE((key_dir / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE((key_dir / "clients").stat().st_mode) == 0o700
    assert f"--key {key_dir}/dispatcher.key" in srun_steps(calls)["dispatcher"], calls
    assert list((tmp_path / "home").iterdir()) == []  # nothing made in $HOME
    assert "2 workers registered" in done.stdout and len(srun_steps(calls)) == 3
    # Stopped gracefully (SIGTERM reached them), not killed.
    for host in ("gt-worker worker-0", "gt-worker worker-1", "gt-dispatcher dispatcher"):
        assert f"{host} stopped" in done.stdout, done.stdout


def test_sbatch_fails_fast_when_a_step_dies(tmp_path):
    # A worker binary that exits at once: the script must not wait GT_WAIT_S
    # for registrations that cannot come.
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    os.symlink(BIN_DIR / "gt-dispatcher", fake_bin / "gt-dispatcher")
    os.symlink(BIN_DIR / "gt", fake_bin / "gt")
    (fake_bin / "gt-worker").write_text("#!/bin/sh\necho 'fake gt-worker: exiting' >&2\nexit 1\n")
    (fake_bin / "gt-worker").chmod(0o755)
    start = time.monotonic()
    done, _, _ = run_sbatch(tmp_path, ["true"], env={"GT_BIN_DIR": str(fake_bin)})
    assert done.returncode == 1, done.stdout
    assert "exited before every worker registered" in done.stdout
    assert time.monotonic() - start < 20


def test_sbatch_without_gt_for_the_keys_fails_naming_it(tmp_path):
    # No gt to make the keys with: the job fails before it starts any step,
    # saying why, and leaves no key directory behind.
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for name in ("gt-dispatcher", "gt-worker"):
        os.symlink(BIN_DIR / name, fake_bin / name)
    done, calls, _ = run_sbatch(tmp_path, ["true"], env={"GT_BIN_DIR": str(fake_bin)})
    assert done.returncode == 1, done.stdout
    assert f"{fake_bin}/gt keygen failed" in done.stdout, done.stdout
    assert calls == []
    assert list((tmp_path / "home" / ".gt" / "keys").iterdir()) == []
