"""The Kubernetes objects under deploy/kubernetes/ (deploy/kubernetes/*.yaml).

Every object validated offline against the Kubernetes API's JSON schemas (the
npm package kubernetes-models, the ServiceMonitor against the Prometheus
Operator's CRD; installed by scripts/setup-npm.sh into build/npm), with a
negative control showing that the validation rejects broken objects; then the
cross-object facts no schema sees: the workers' --connect names the dispatcher
Service and its port, services select the right pods, scrape annotations and
probes name the metrics ports, the ServiceMonitor selects both Services, the
rendezvous port of the sharding stage is reachable, the ConfigMap's manifests
pass `gt validate`.

The keys (test_deploy_keys.py) and Slurm (test_deploy_slurm.py) have files
of their own; the shared loaders are in deploy_objects.py.
"""

import json
import pathlib
import subprocess

import pytest

from deploy_objects import (BIN_DIR, K8S_FILES, container, flag, is_subset, load_documents, manifests, port_number,
                            validate)
# The module-scoped fixtures this file's tests take.
from deploy_objects import k8s, npm_modules  # noqa: F401,F811


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


# ---- riding through a dispatcher pod restart (docs/CLUSTER.md, "When the dispatcher restarts") ----


def _secret_file(workload, path):
    """(Secret name, key) that the file `path` of the workload's container comes from; fails if it is
    not mounted from a Secret (an emptyDir or a key made at start would differ after a restart)."""
    spec = workload["spec"]["template"]["spec"]
    path = pathlib.PurePosixPath(path)
    mounts = {m["mountPath"]: m["name"] for m in container(workload)["volumeMounts"]}
    volume = {v["name"]: v for v in spec["volumes"]}[mounts[str(path.parent)]]
    assert "secret" in volume, f"{path} is not on a Secret volume: {volume}"
    [item] = [i for i in volume["secret"]["items"] if i["path"] == path.name]
    return volume["secret"]["secretName"], item["key"]


def test_workers_and_clients_ride_through_a_dispatcher_pod_restart(k8s, tmp_path):
    deployment = k8s[("Deployment", "gt-dispatcher")]
    dispatcher = container(deployment)
    workers = k8s[("StatefulSet", "gt-worker")]
    worker = container(workers)
    # The pod is restarted or replaced by its Deployment, never run twice at once (the workers would
    # split between two dispatchers), and the pod template leaves restartPolicy at Always.
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    assert deployment["spec"]["template"]["spec"].get("restartPolicy", "Always") == "Always"
    # A stable address: a ClusterIP Service (a headless one would resolve to the old pod's IP).
    service = k8s[("Service", "gt-dispatcher")]["spec"]
    assert service.get("type", "ClusterIP") == "ClusterIP" and service.get("clusterIP") != "None"
    assert flag(worker, "--connect").split(":")[0] == "gt-dispatcher"
    # The same keys after a restart: the dispatcher's key pair comes from the Secret, and the
    # workers check it against that Secret's dispatcher.pub.
    key_secret, key_name = _secret_file(deployment, flag(dispatcher, "--key"))
    pub_secret, pub_name = _secret_file(workers, flag(worker, "--server-key"))
    assert key_secret == pub_secret and (key_name, pub_name) == ("dispatcher.key", "dispatcher.pub")
    # Workers keep their tensors long enough for a rescheduled pod, and stay up (not CrashLoopBackOff)
    # if it never comes; the dispatcher keeps unclaimed sessions as long as the workers do.
    grace_s = float(flag(worker, "--reconnect-grace"))
    assert grace_s >= 60
    assert flag(worker, "--after-grace") == "wait"
    [dispatcher_manifest] = load_documents(manifests(k8s, tmp_path)["dispatcher.yaml"])
    assert dispatcher_manifest["reconnect_grace_ms"] == grace_s * 1000
    # A RESUME waits longer for the workers than it takes them to be routed to the new pod.
    ready = dispatcher["readinessProbe"]
    assert ready["periodSeconds"] <= 2 and ready["initialDelaySeconds"] <= 2
    assert dispatcher_manifest["resume_wait_ms"] >= 1000 * (ready["initialDelaySeconds"] + ready["periodSeconds"])
    # The clients are told to wait as long (the file's header, which docs/CLUSTER.md points to).
    header = K8S_FILES[0].read_text().split("\n---", 1)[0]
    assert f"GT_RECONNECT_GRACE={int(grace_s)}" in header
