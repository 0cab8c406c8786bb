"""The keys of the Kubernetes deployment (deploy/kubernetes/*.yaml,
deploy/README.md): the key flags name files of the Secret gt-keys that each
pod mounts (the dispatcher's secret key only in its pod). Then the key
commands of deploy/README.md run with a stub kubectl that writes each Secret
into a directory, and a dispatcher and a worker started with the manifests'
flags on those files authenticate: the worker registers, a client with the
README's client Secret computes, one without keys is refused.
"""

import json
import os
import pathlib
import re
import subprocess
import textwrap
import time

import pytest

from conftest import bound_endpoints, first_log_line, run_python, stop_processes
from deploy_objects import BIN_DIR, DEPLOY_README, container, flag, manifests
# The module-scoped fixture this file's tests take.
from deploy_objects import k8s  # noqa: F401,F811


def mounted_secret_file(workload, path):
    """(Secret name, key in it, volume) of the file a container of `workload`
    sees at `path`, through its volumeMounts and the pod's secret volumes."""
    spec = workload["spec"]["template"]["spec"]
    c = container(workload)
    path = pathlib.PurePosixPath(path)
    mounts = {pathlib.PurePosixPath(m["mountPath"]): m for m in c["volumeMounts"]}
    assert path.parent in mounts, f"{c['name']}: nothing mounted at {path.parent} for {path}"
    mount = mounts[path.parent]
    assert mount.get("readOnly") is True, mount
    volume = {v["name"]: v for v in spec["volumes"]}[mount["name"]]
    assert "secret" in volume, f"{path} is not in a Secret volume: {volume}"
    items = {i["path"]: i["key"] for i in volume["secret"]["items"]}
    assert path.name in items, f"{path.name} is not projected from {volume['secret']['secretName']}"
    return volume["secret"]["secretName"], items[path.name], volume


# Which key of the Secret each host's key flag must name.
KEY_FLAGS = {("Deployment", "gt-dispatcher"): {"--key": "dispatcher.key", "--client-keys": "clients.pub",
                                               "--worker-keys": "workers.pub"},
             ("StatefulSet", "gt-worker"): {"--key": "worker.key", "--server-key": "dispatcher.pub"}}


def test_key_flags_name_the_gt_keys_secret_each_pod_mounts(k8s):
    for workload_key, flags in KEY_FLAGS.items():
        workload = k8s[workload_key]
        c = container(workload)
        assert "--insecure" not in c["args"], c["args"]
        seen_volumes = {}
        for name, key in flags.items():
            secret, got, volume = mounted_secret_file(workload, flag(c, name))
            assert (secret, got) == ("gt-keys", key), (workload_key, name, secret, got)
            seen_volumes[volume["name"]] = volume
        for volume in seen_volumes.values():
            # Owner read only, and nothing projected beyond what the flags
            # name: a worker never sees the dispatcher's secret key, nor the
            # dispatcher the workers'.
            mode = volume["secret"]["defaultMode"]
            assert mode & 0o077 == 0 and mode & 0o400, (workload_key, oct(mode))
            assert sorted(i["key"] for i in volume["secret"]["items"]) == sorted(flags.values()), volume
            assert all(i["key"] == i["path"] for i in volume["secret"]["items"]), volume
    # The Secret is mounted by the pods, not defined here: a key set is made
    # per installation (deploy/README.md).
    assert not [k for k in k8s if k[0] == "Secret"]


KUBECTL_STUB = """#!/usr/bin/env bash
# Stub kubectl: `create secret generic NAME [-n NS] --from-file=[KEY=]PATH...`
# writes each file to $SECRETS/NAME/KEY (as the Secret's data); `apply` is
# logged; anything else fails.
set -euo pipefail
if [ "$#" -ge 4 ] && [ "$1 $2 $3" = "create secret generic" ]; then
  dir=$SECRETS/$4
  shift 4
  [ ! -e "$dir" ] || { echo "stub kubectl: secret $dir exists" >&2; exit 1; }
  mkdir -p "$dir"
  while [ "$#" -gt 0 ]; do
    case "$1" in
      -n) shift 2 ;;
      --from-file=*=*) spec=${1#--from-file=}; cp -- "${spec#*=}" "$dir/${spec%%=*}"; shift ;;
      --from-file=*) file=${1#--from-file=}; cp -- "$file" "$dir/${file##*/}"; shift ;;
      *) echo "stub kubectl: unexpected word '$1'" >&2; exit 1 ;;
    esac
  done
elif [ "${1:-}" = apply ]; then
  echo "$*" >>"$SECRETS/applied"
else
  echo "stub kubectl: unexpected: $*" >&2
  exit 1
fi
"""


def readme_key_commands():
    """The bash block of deploy/README.md's Kubernetes section that makes the Secret gt-keys."""
    section = DEPLOY_README.read_text().split("## Kubernetes", 1)[1].split("\n## ", 1)[0]
    blocks = [b for b in re.findall(r"```bash\n(.*?)```", section, re.S) if "kubectl create secret generic gt-keys" in b]
    assert len(blocks) == 1, "deploy/README.md: no (or more than one) block making the Secret gt-keys"
    return blocks[0]


def pod_args(workload, secrets, replace):
    """The container's args with every file of a Secret volume replaced by
    the file written for it under `secrets`, and the values of the flags in
    `replace` ({flag: value}) replaced."""
    args = list(container(workload)["args"])
    for i in range(1, len(args)):
        if args[i - 1] in replace:
            args[i] = str(replace[args[i - 1]])
        elif args[i].startswith("/") and args[i - 1] in ("--key", "--client-keys", "--worker-keys", "--server-key"):
            secret, key, _ = mounted_secret_file(workload, args[i])
            args[i] = str(secrets / secret / key)
            assert pathlib.Path(args[i]).is_file(), f"the README's commands put no {key} in the Secret {secret}"
    return args


def test_readme_key_commands_make_a_secret_the_pods_authenticate_with(k8s, tmp_path):
    gt_cli = BIN_DIR / "gt"
    if not all((BIN_DIR / b).exists() for b in ("gt", "gt-dispatcher", "gt-worker")):
        pytest.skip(f"gt / gt-dispatcher / gt-worker not built in {BIN_DIR}")
    stubs, secrets, work = tmp_path / "stubs", tmp_path / "secrets", tmp_path / "work"
    for d in (stubs, secrets, work):
        d.mkdir()
    (stubs / "kubectl").write_text(KUBECTL_STUB)
    (stubs / "kubectl").chmod(0o755)
    (stubs / "gt").symlink_to(gt_cli)
    env = {**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ.get('PATH', '')}", "SECRETS": str(secrets)}
    made = subprocess.run(["bash", "-euo", "pipefail", "-c", readme_key_commands()], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stdout + made.stderr
    assert sorted(p.name for p in (secrets / "gt-keys").iterdir()) == sorted(
        ["dispatcher.key", "dispatcher.pub", "worker.key", "workers.pub", "clients.pub"])
    # The allow-lists hold public keys only.
    for name in ("workers.pub", "clients.pub", "dispatcher.pub"):
        assert "secret-key" not in (secrets / "gt-keys" / name).read_text(), name

    # The pods' flags, with the Secret's files, the ConfigMap's manifests (the
    # rendezvous store on a free port: 29500 may be taken here) and free ports.
    files = manifests(k8s, tmp_path)
    text = files["dispatcher.yaml"].read_text()
    assert "rendezvous_port: 29500" in text
    files["dispatcher.yaml"].write_text(text.replace("rendezvous_port: 29500", "rendezvous_port: 0"))
    # Port 0, read back from the dispatcher's first line: a port probed free
    # beforehand can be taken by a parallel test's process first.
    dispatcher_args = pod_args(k8s[("Deployment", "gt-dispatcher")], secrets, {
        "--listen": "tcp://0.0.0.0:0", "--metrics": "127.0.0.1:0", "--manifest": files["dispatcher.yaml"]})
    assert "--listen" in dispatcher_args and "tcp://0.0.0.0:0" in dispatcher_args  # keys allow 0.0.0.0
    host_env = {k: v for k, v in os.environ.items() if not k.startswith("GT_")}
    logs = {name: open(tmp_path / f"{name}.log", "w+") for name in ("dispatcher", "worker")}
    procs = []
    try:
        procs.append(subprocess.Popen([str(BIN_DIR / "gt-dispatcher"), *dispatcher_args], env=host_env,
                                      stdout=logs["dispatcher"], stderr=subprocess.STDOUT))
        listen, metrics = bound_endpoints(first_log_line(tmp_path / "dispatcher.log", procs[0]))
        assert listen and metrics, (tmp_path / "dispatcher.log").read_text()
        port, metrics_port = int(listen.rsplit(":", 1)[1]), int(metrics.rsplit(":", 1)[1])
        worker_args = pod_args(k8s[("StatefulSet", "gt-worker")], secrets, {
            "--connect": f"127.0.0.1:{port}", "--id": "gt-worker-0", "--metrics": "127.0.0.1:0",
            "--manifest": files["worker.yaml"]})
        procs.append(subprocess.Popen([str(BIN_DIR / "gt-worker"), *worker_args], env=host_env,
                                      stdout=logs["worker"], stderr=subprocess.STDOUT))

        def workers_connected():
            import urllib.request
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2).read().decode()
            except OSError:
                return 0
            return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith("gt_host_workers_connected"))

        deadline = time.monotonic() + 30
        while workers_connected() < 1:
            for p, name in zip(procs, logs):
                assert p.poll() is None, f"gt-{name} exited ({p.returncode}):\n{(tmp_path / f'{name}.log').read_text()}"
            assert time.monotonic() < deadline, (tmp_path / "dispatcher.log").read_text()
            time.sleep(0.1)

        code = textwrap.dedent(f"""
            import json, gt
            gt.connect("127.0.0.1:{port}")
            try:
                print(json.dumps({{"sum": (gt.ones(3) * 2).sum().item()}}))
            except Exception as e:
                print(json.dumps({{"error": str(e)}}))
            """)
        client = secrets / "gt-client-alice"
        keyed = run_python(code, env={"GT_CLIENT_KEY": str(client / "client.key"),
                                      "GT_SERVER_KEY": str(client / "dispatcher.pub"), "GT_CONNECT_TIMEOUT": "10"})
        assert keyed.returncode == 0, keyed.stderr
        assert json.loads(keyed.stdout.splitlines()[-1]) == {"sum": 6.0}, keyed.stdout
        keyless = run_python(code, env={"GT_CLIENT_KEY": "", "GT_SERVER_KEY": "", "GT_CONNECT_TIMEOUT": "10"})
        error = json.loads(keyless.stdout.splitlines()[-1]).get("error", "")
        assert "requires CURVE keys" in error, keyless.stdout + keyless.stderr
        for p in procs:
            assert p.poll() is None, p.args
    finally:
        stop_processes(procs[::-1])
        for f in logs.values():
            f.close()
