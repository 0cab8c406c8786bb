"""The deployment files under deploy/.

Kubernetes (deploy/kubernetes/*.yaml): every object validated offline
against the Kubernetes API's JSON schemas (the npm package kubernetes-models,
the ServiceMonitor against the Prometheus Operator's CRD; installed by
scripts/setup-npm.sh into build/npm), with a negative control showing that
the validation rejects broken objects; then the cross-object facts no schema
sees: the workers' --connect names the dispatcher Service and its port,
services select the right pods, scrape annotations and probes name the
metrics ports, the ServiceMonitor selects both Services, the rendezvous port
of the sharding stage is reachable, the ConfigMap's manifests pass
`gt validate`, and the key flags name files of the Secret gt-keys that each
pod mounts (the dispatcher's secret key only in its pod). Then the key
commands of deploy/README.md run with a stub kubectl that writes each Secret
into a directory, and a dispatcher and a worker started with the manifests'
flags on those files authenticate: the worker registers, a client with the
README's client Secret computes, one without keys is refused.

Slurm (deploy/slurm/gt.sbatch): run for real with stub `scontrol` / `srun`
(two "nodes", both this machine; srun runs its command here): a dispatcher
and two workers start with the job's keys, a training command computes a
sharded matmul on both workers and checks it against NumPy while a client
without keys is refused, the key files are private, and every process (and
the job's key directory, unless GT_KEY_DIR named it) is gone afterwards.
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
from conftest import bound_endpoints, first_log_line, run_python, stop_processes

REPO = pathlib.Path(__file__).resolve().parents[2]
DEPLOY_README = REPO / "deploy" / "README.md"
K8S_FILES = [REPO / "deploy" / "kubernetes" / "gt.yaml", REPO / "deploy" / "kubernetes" / "servicemonitor.yaml"]
SBATCH = REPO / "deploy" / "slurm" / "gt.sbatch"
VALIDATE = REPO / "tests" / "deploy" / "validate.cjs"
BIN_DIR = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))


# ---- loading the Kubernetes objects ---------------------------------------------------


@pytest.fixture(scope="module")
def npm_modules():
    """The directory scripts/setup-npm.sh installed the validation packages
    into (running it, which is a no-op when they are there already)."""
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("node/npm not installed: the Kubernetes schema validation needs them (scripts/setup-npm.sh)")
    modules = pathlib.Path(os.environ.get("GT_NPM_DIR", REPO / "build" / "npm"))
    setup = subprocess.run(["bash", str(REPO / "scripts" / "setup-npm.sh")], cwd=REPO, capture_output=True,
                           text=True, timeout=300, env={**os.environ, "GT_NPM_DIR": str(modules)})
    assert setup.returncode == 0, f"scripts/setup-npm.sh failed:\n{setup.stdout}\n{setup.stderr}"
    return modules


def validate(npm_modules, *files):
    """Runs tests/deploy/validate.cjs; returns (exit status, its JSON summary)."""
    out = subprocess.run(["node", str(VALIDATE), "--modules", str(npm_modules)] + [str(f) for f in files],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1), f"validate.cjs could not run (status {out.returncode}):\n{out.stderr}"
    return out.returncode, json.loads(out.stdout)


def load_documents(path):
    """Every non-empty YAML document of `path`: PyYAML when this interpreter
    has it (Debian's python3-yaml, which python3-torch pulls in), else the
    npm `yaml` package through node."""
    try:
        import yaml
    except ImportError:
        yaml = None
    if yaml is not None:
        with open(path) as f:
            return [d for d in yaml.safe_load_all(f) if d is not None]
    if not shutil.which("node"):
        pytest.skip("neither PyYAML nor node to parse the Kubernetes YAML")
    modules = pathlib.Path(os.environ.get("GT_NPM_DIR", REPO / "build" / "npm"))
    script = ("const r=require('module').createRequire(process.argv[1]+'/package.json');"
              "const Y=r('yaml');const fs=require('fs');"
              "console.log(JSON.stringify(Y.parseAllDocuments(fs.readFileSync(process.argv[2],'utf8'))"
              ".map(d=>d.toJS()).filter(d=>d!=null)))")
    out = subprocess.run(["node", "-e", script, str(modules), str(path)], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        pytest.skip(f"no PyYAML, and node could not parse YAML (run scripts/setup-npm.sh): {out.stderr}")
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def k8s():
    """{(kind, name): object} over deploy/kubernetes/*.yaml."""
    objects = {}
    for path in K8S_FILES:
        for obj in load_documents(path):
            key = (obj["kind"], obj["metadata"]["name"])
            assert key not in objects, f"{key} defined twice"
            objects[key] = obj
    return objects


def container(workload):
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, "one gt container per pod"
    return containers[0]


def flag(c, name):
    """The value after `name` in a container's args (flags are separate words)."""
    args = c["args"]
    assert args.count(name) == 1, f"{c['name']}: {name} given {args.count(name)} times in {args}"
    return args[args.index(name) + 1]


def port_number(c, port):
    """A probe's or Service's target port (a name or a number) as the container's number."""
    if isinstance(port, int):
        return port
    matches = [p["containerPort"] for p in c["ports"] if p.get("name") == port]
    assert len(matches) == 1, f"{c['name']} has no container port named {port!r}"
    return matches[0]


def is_subset(small, big):
    return all(big.get(k) == v for k, v in small.items())


# ---- schema validation ----------------------------------------------------------------


def test_kubernetes_objects_validate_against_the_api_schemas(npm_modules):
    status, summary = validate(npm_modules, *K8S_FILES)
    problems = [o for o in summary["objects"] if o["status"] != "valid"]
    assert status == 0 and not problems, json.dumps(problems, indent=1)
    kinds = sorted((o["kind"], o["name"]) for o in summary["objects"])
    # Every object of the files went through a schema: none left out.
    assert kinds == sorted([("ConfigMap", "gt-manifests"), ("Deployment", "gt-dispatcher"),
                            ("Service", "gt-dispatcher"), ("Service", "gt-worker"), ("StatefulSet", "gt-worker"),
                            ("ServiceMonitor", "gt")])


def test_schema_validation_rejects_broken_objects(npm_modules, k8s, tmp_path):
    # The negative control: the same objects with one wrong-typed field each
    # must come back invalid, naming the field, or the passing test above
    # would prove nothing.
    import copy

    broken = []
    sts = copy.deepcopy(k8s[("StatefulSet", "gt-worker")])
    sts["spec"]["replicas"] = "two"
    broken.append((sts, "spec/replicas must be integer"))
    dep = copy.deepcopy(k8s[("Deployment", "gt-dispatcher")])
    container(dep)["ports"][0]["containerPort"] = "zmq"
    broken.append((dep, "containerPort must be integer"))
    svc = copy.deepcopy(k8s[("Service", "gt-dispatcher")])
    svc["spec"]["ports"][0]["port"] = "5555"
    broken.append((svc, "spec/ports/0/port must be integer"))
    sm = copy.deepcopy(k8s[("ServiceMonitor", "gt")])
    sm["spec"]["endpoints"][0]["port"] = 9100  # a port NAME in the CRD
    broken.append((sm, "endpoints/0/port must be string"))
    # JSON is YAML: one document per file keeps the order obvious.
    files = []
    for i, (obj, _) in enumerate(broken):
        files.append(tmp_path / f"broken-{i}.yaml")
        files[-1].write_text(json.dumps(obj))
    status, summary = validate(npm_modules, *files)
    assert status == 1
    for (obj, expected), result in zip(broken, summary["objects"]):
        assert result["kind"] == obj["kind"] and result["status"] == "invalid", result
        assert expected in result["error"], result


# ---- cross-object consistency ---------------------------------------------------------


def test_workers_connect_to_the_dispatcher_service(k8s):
    worker = container(k8s[("StatefulSet", "gt-worker")])
    dispatcher = container(k8s[("Deployment", "gt-dispatcher")])
    host, port = flag(worker, "--connect").rsplit(":", 1)
    service = k8s[("Service", host)]  # KeyError: --connect names no Service
    ports = {p["port"]: p for p in service["spec"]["ports"]}
    assert int(port) in ports, f"Service {host} does not expose {port}"
    target = port_number(dispatcher, ports[int(port)]["targetPort"])
    # The dispatcher binds that port on every interface (a pod's loopback
    # takes no connection from other pods).
    assert flag(dispatcher, "--listen") == f"tcp://0.0.0.0:{target}"
    assert flag(dispatcher, "--metrics").startswith("0.0.0.0:")
    assert flag(worker, "--metrics").startswith("0.0.0.0:")


def test_services_select_their_pods(k8s):
    for workload_kind, name, service_name in [("Deployment", "gt-dispatcher", "gt-dispatcher"),
                                              ("StatefulSet", "gt-worker", "gt-worker")]:
        workload = k8s[(workload_kind, name)]
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert is_subset(workload["spec"]["selector"]["matchLabels"], labels)
        service = k8s[("Service", service_name)]
        assert is_subset(service["spec"]["selector"], labels), f"Service {service_name} selects no {name} pod"
        c = container(workload)
        for p in service["spec"]["ports"]:
            port_number(c, p["targetPort"])  # each Service port lands on a container port
    # The other workload's pods are not selected by mistake.
    assert not is_subset(k8s[("Service", "gt-worker")]["spec"]["selector"],
                         k8s[("Deployment", "gt-dispatcher")]["spec"]["template"]["metadata"]["labels"])
    sts = k8s[("StatefulSet", "gt-worker")]
    assert sts["spec"]["serviceName"] == "gt-worker"
    assert k8s[("Service", "gt-worker")]["spec"]["clusterIP"] == "None"  # headless
    assert k8s[("Deployment", "gt-dispatcher")]["spec"]["replicas"] == 1
    assert sts["spec"]["replicas"] == 2


def test_worker_ids_are_the_pod_names(k8s):
    worker = container(k8s[("StatefulSet", "gt-worker")])
    assert flag(worker, "--id") == "$(POD_NAME)"
    env = {e["name"]: e for e in worker["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


def test_scrape_annotations_and_probes_name_the_metrics_port(k8s):
    for kind, name in [("Deployment", "gt-dispatcher"), ("StatefulSet", "gt-worker")]:
        workload = k8s[(kind, name)]
        c = container(workload)
        notes = workload["spec"]["template"]["metadata"]["annotations"]
        assert notes["prometheus.io/scrape"] == "true"
        assert notes["prometheus.io/path"] == "/metrics"
        metrics = int(flag(c, "--metrics").rsplit(":", 1)[1])
        assert int(notes["prometheus.io/port"]) == metrics, f"{name}: annotation port is not the --metrics port"
        assert metrics in [p["containerPort"] for p in c["ports"]]
        for probe in ("readinessProbe", "livenessProbe"):
            get = c[probe]["httpGet"]
            assert get["path"] == "/metrics" and port_number(c, get["port"]) == metrics, f"{name}.{probe}"
        for part in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(c["resources"][part]), f"{name}: resources.{part}"


def test_servicemonitor_selects_both_services(k8s):
    monitor = k8s[("ServiceMonitor", "gt")]
    selector = monitor["spec"]["selector"]["matchLabels"]
    selected = [name for (kind, name), obj in k8s.items() if kind == "Service"
                and is_subset(selector, obj["metadata"].get("labels", {}))]
    assert sorted(selected) == ["gt-dispatcher", "gt-worker"]
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["path"] == "/metrics"
        for name in selected:
            names = [p["name"] for p in k8s[("Service", name)]["spec"]["ports"]]
            assert endpoint["port"] in names, f"Service {name} has no port named {endpoint['port']}"
    # gt's own instance label (the host id) must survive the scrape.
    assert all(e.get("honorLabels") for e in monitor["spec"]["endpoints"])


def manifests(k8s, tmp_path):
    """The ConfigMap's gt manifests, {key: file written under tmp_path}."""
    data = k8s[("ConfigMap", "gt-manifests")]["data"]
    files = {}
    for key, text in data.items():
        files[key] = tmp_path / key
        files[key].write_text(text)
    return files


def test_manifests_are_mounted_where_the_flags_say(k8s):
    for kind, name, key in [("Deployment", "gt-dispatcher", "dispatcher.yaml"),
                            ("StatefulSet", "gt-worker", "worker.yaml")]:
        spec = k8s[(kind, name)]["spec"]["template"]["spec"]
        c = container(k8s[(kind, name)])
        path = pathlib.PurePosixPath(flag(c, "--manifest"))
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        volume = {v["name"]: v for v in spec["volumes"]}[mounts[str(path.parent)]]
        assert volume["configMap"]["name"] == "gt-manifests"
        assert path.name == key and key in k8s[("ConfigMap", "gt-manifests")]["data"]


def test_rendezvous_port_is_exposed_and_threads_match_the_cpu_limit(k8s, tmp_path):
    files = manifests(k8s, tmp_path)
    [dispatcher_manifest] = load_documents(files["dispatcher.yaml"])
    sharding = [s for s in dispatcher_manifest["stages"] if s["plugin"] == "sharding"]
    assert len(sharding) == 1
    # Workers reach the rendezvous store at the host they --connect to (the
    # Service), so its port must be fixed and forwarded by the Service.
    port = sharding[0]["options"]["rendezvous_port"]
    assert port != 0
    service_ports = {p["port"]: p for p in k8s[("Service", "gt-dispatcher")]["spec"]["ports"]}
    assert port in service_ports
    assert port_number(container(k8s[("Deployment", "gt-dispatcher")]), service_ports[port]["targetPort"]) == port
    [worker_manifest] = load_documents(files["worker.yaml"])
    limit = container(k8s[("StatefulSet", "gt-worker")])["resources"]["limits"]["cpu"]
    assert worker_manifest["backend"]["options"]["intra_op_threads"] == int(limit)


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


def test_configmap_manifests_pass_gt_validate(k8s, tmp_path):
    gt_cli = BIN_DIR / "gt"
    if not gt_cli.exists():
        pytest.skip(f"gt not built in {BIN_DIR}")
    for key, path in manifests(k8s, tmp_path).items():
        out = subprocess.run([str(gt_cli), "validate", str(path)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, f"{key}:\n{out.stdout}{out.stderr}"
        assert ": ok (" + key.split(".")[0] in out.stdout


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
