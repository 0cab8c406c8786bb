"""The deployment files under deploy/.

Kubernetes (deploy/kubernetes/*.yaml): every object validated offline
against the Kubernetes API's JSON schemas (the npm package kubernetes-models,
the ServiceMonitor against the Prometheus Operator's CRD; installed by
scripts/setup-npm.sh into build/npm), with a negative control showing that
the validation rejects broken objects; then the cross-object facts no schema
sees: the workers' --connect names the dispatcher Service and its port,
services select the right pods, scrape annotations and probes name the
metrics ports, the ServiceMonitor selects both Services, the rendezvous port
of the sharding stage is reachable, and the ConfigMap's manifests pass
`gt validate`.

Slurm (deploy/slurm/gt.sbatch): run for real with stub `scontrol` / `srun`
(two "nodes", both this machine; srun runs its command here): a dispatcher
and two workers start, a training command computes a sharded matmul on both
workers and checks it against NumPy, and every process is gone afterwards.
"""

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

import gt

REPO = pathlib.Path(__file__).resolve().parents[2]
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
    # what the dispatcher and the workers say.
    import json, os, sys, urllib.request
    import numpy as np
    import gt
    from gt import ShardConfig, SignalConfig

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
        json.dump({"error": error, "matmuls": matmuls, "workers_connected": connected}, f)
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
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("SLURM_", "GT_")) or k in ("GT_BIN_DIR",)}
    full_env.update({
        "PATH": f"{stubs}{os.pathsep}{os.environ.get('PATH', '')}",
        "SRUN_LOG": str(srun_log),
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


def test_sbatch_runs_a_cluster_and_the_training_command(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    result_file = tmp_path / "result.json"
    done, calls, (port, metrics_port) = run_sbatch(tmp_path, [sys.executable, "train.py", str(result_file)])
    assert done.returncode == 0, done.stdout
    result = json.loads(result_file.read_text())
    assert result["workers_connected"] == 2, done.stdout
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
    for i, node in enumerate(["localhost", "127.0.0.1"]):
        assert f"--nodelist={node}" in steps[f"worker-{i}"] and "--overlap" in steps[f"worker-{i}"], calls
        assert f"gt-worker --connect localhost:{port} --id worker-{i}" in steps[f"worker-{i}"], calls
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
                                               "GT_TRAIN_CMD": 'test -n "$GT_ADDRESS" && exit 3'})
    assert done.returncode == 3, done.stdout
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
    # step and exit 143.
    def cancel_once_serving(proc, log):
        deadline = time.monotonic() + 30
        while "serving on" not in log.read_text():
            assert proc.poll() is None, f"gt.sbatch exited while it should serve:\n{log.read_text()}"
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)

    done, calls, _ = run_sbatch(tmp_path, while_running=cancel_once_serving)
    assert done.returncode == 143, done.stdout
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
    (fake_bin / "gt-worker").write_text("#!/bin/sh\necho 'fake gt-worker: exiting' >&2\nexit 1\n")
    (fake_bin / "gt-worker").chmod(0o755)
    start = time.monotonic()
    done, _, _ = run_sbatch(tmp_path, ["true"], env={"GT_BIN_DIR": str(fake_bin)})
    assert done.returncode == 1, done.stdout
    assert "exited before every worker registered" in done.stdout
    assert time.monotonic() - start < 20
