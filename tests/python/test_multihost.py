"""gt across hosts: real gt-dispatcher / gt-worker processes in four Linux
network namespaces (tests/python/netns.py), each its own host with its own
non-loopback address on one bridge:

    A 10.77.0.1  gt-dispatcher (no --manifest: the embedded default's stages,
                 sharding included), listening on tcp://10.77.0.1:5555
    B 10.77.0.2  gt-worker --id worker-0     C 10.77.0.3  gt-worker --id worker-1
    D 10.77.0.4  the client: gt.connect("10.77.0.1:5555")

A dispatcher on a non-loopback address needs CURVE keys (docs/SECURITY.md):
`gt keygen` makes a set in a temporary directory, the dispatcher gets --key
and the clients/ and workers/ allow-lists, each worker its own --key and
--server-key, the client GT_CLIENT_KEY and GT_SERVER_KEY.

The client runs the signal guide's data-parallel, model-parallel and pipeline
examples and an MLP trained under a data-parallel signal on workers [0, 1],
each against the same program without a signal scope (numerics within 1e-4),
and reads, around each, every host's figures (gt.debug.get_worker_stats())
and each worker's /metrics over HTTP at its namespace address. Asserted:
both workers ran ops (matmuls) of each sharded program while one worker ran
all of the unsharded one; the data-parallel programs all-reduce on both
workers; the pipeline's stages and backward stages ran where their signals
say (the dispatcher's GT_EXPLAIN lines); the workers' Gloo connections run
between 10.77.0.2 and 10.77.0.3 directly; the dispatcher saw each worker
register from its namespace address; no gt process listens on or talks to a
loopback address, and the dispatcher binds no local ipc socket; a client
without keys, and one whose key is on no list, are refused naming why.

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

import numpy as np
import pytest

import gt
import netns
from conftest import stop_processes

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


# ---- the client program, run in namespace D ------------------------------------------------

CLIENT = textwrap.dedent('''
    import json, re, sys, urllib.request
    import numpy as np
    import gt
    from gt import ShardConfig, SignalConfig
    from gt.nn import Linear, Module, SGD

    address, worker_metrics = sys.argv[1], sys.argv[2:]
    gt.connect(address)
    rng = np.random.default_rng(1234)


    class nothing:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False


    def scope(name):
        return gt.signal.context(name) if name else nothing()


    class MLP(Module):
        def __init__(self, sizes, seed):
            super().__init__()
            self.fc1 = Linear(sizes[0], sizes[1], seed=seed)
            self.fc2 = Linear(sizes[1], sizes[2], seed=seed + 1)

        def forward(self, x):
            return self.fc2(self.fc1(x).relu())


    def grads_of(model):
        return [p.grad.numpy().tolist() for p in model.parameters()]


    def figures():
        """Per worker: instructions, backend op counts by op, collectives by kind."""
        out = {}
        for name, h in gt.debug.get_worker_stats(timeout=5).items():
            if h is None:
                out[name] = None
                continue
            if h["host"] != "worker":
                continue
            ops = {s["labels"]["op"]: s["value"] for s in h["samples"]
                   if s["name"] == "gt_backend_op_seconds_count"}
            coll = {s["labels"]["collective"]: s["value"] for s in h["samples"]
                    if s["name"] == "gt_collectives_total"}
            out[name] = {"instructions": h["instructions"], "ops": ops, "collectives": coll}
        return out


    def delta(after, before):
        out = {}
        for name, a in after.items():
            b = before.get(name)
            out[name] = {
                "instructions": a["instructions"] - b["instructions"],
                "ops": {k: v - b["ops"].get(k, 0) for k, v in a["ops"].items() if v - b["ops"].get(k, 0)},
                "collectives": {k: v - b["collectives"].get(k, 0) for k, v in a["collectives"].items()},
            }
        return out


    def measured(fn, signal):
        gt.sync()
        before = figures()
        result = fn(signal)
        gt.sync()
        return result, delta(figures(), before)


    examples = {}


    def example(name, fn, signal):
        sharded, work = measured(fn, signal)
        whole, whole_work = measured(fn, None)
        examples[name] = {"sharded": sharded, "whole": whole, "work": work, "whole_work": whole_work}


    # -- the signal guide's data parallel: an MLP's forward and backward, batch split over 0, 1
    gt.register_config("data_parallel", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))
    data = rng.standard_normal((128, 32)).astype(np.float32)
    target = rng.standard_normal((128, 4)).astype(np.float32)


    def data_parallel(signal):
        model = MLP((32, 16, 4), seed=3)
        with scope(signal):
            x, y = gt.tensor(data), gt.tensor(target)
            out = model(x)
            loss = ((out - y) ** 2).mean()
        loss.backward()
        return {"out": out.numpy().tolist(), "loss": loss.item(), "grads": grads_of(model)}


    example("data_parallel", data_parallel, "data_parallel")

    # -- model parallel: a weight's columns split over 0, 1
    gt.register_config("model_parallel", SignalConfig(shard=ShardConfig(axis=1, workers=[0, 1])))
    a = rng.standard_normal((24, 64)).astype(np.float32)
    w = rng.standard_normal((64, 32)).astype(np.float32)


    def model_parallel(signal):
        x = gt.tensor(a)
        with scope(signal):
            weight = gt.tensor(w, requires_grad=True)
            hidden = (x @ weight).tanh()
        loss = hidden.sum()
        loss.backward()
        return {"hidden": hidden.numpy().tolist(), "grad": weight.grad.numpy().tolist()}


    example("model_parallel", model_parallel, "model_parallel")

    # -- pipeline: stage 1 on worker 0, stage 2 on worker 1, each backward on the other
    gt.register_config("stage_1_backward", SignalConfig(shard=ShardConfig(axis=0, workers=[1])))
    gt.register_config("stage_2_backward", SignalConfig(shard=ShardConfig(axis=0, workers=[0])))
    gt.register_config("stage_1", SignalConfig(shard=ShardConfig(axis=0, workers=[0]),
                                               backward_signal="stage_1_backward"))
    gt.register_config("stage_2", SignalConfig(shard=ShardConfig(axis=0, workers=[1]),
                                               backward_signal="stage_2_backward"))
    pdata = rng.standard_normal((16, 8)).astype(np.float32)


    def pipeline(staged):
        layer1, layer2 = Linear(8, 12, seed=5), Linear(12, 3, seed=6)
        with scope("stage_1" if staged else None):
            hidden1 = layer1(gt.tensor(pdata)).relu()
        with scope("stage_2" if staged else None):
            output = layer2(hidden1)
        loss = (output * output).mean()
        loss.backward()
        return {"loss": loss.item(), "grads": grads_of(layer1) + grads_of(layer2)}


    example("pipeline", pipeline, True)

    # -- an MLP trained under a data-parallel signal, parameters replicated on 0, 1
    gt.register_config("params", SignalConfig(replicated=True))
    tdata = rng.standard_normal((64, 20)).astype(np.float32)
    ttarget = (tdata[:, :3] * 0.5 + 0.1).astype(np.float32)


    def train(signal):
        with scope("params" if signal else None):
            model = MLP((20, 32, 3), seed=11)
        opt = SGD(model.parameters(), lr=0.05)
        losses = []
        for _ in range(10):
            with scope(signal):
                pred = model(gt.tensor(tdata))
                loss = ((pred - gt.tensor(ttarget)) ** 2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        return {"losses": losses, "params": [p.numpy().tolist() for p in model.parameters()]}


    example("training", train, "data_parallel")

    # -- each worker's /metrics over HTTP at its own address, next to the same
    # figures through the dispatcher (nothing runs between the two reads)
    gt.sync()
    stats = figures()
    scraped = {}
    for endpoint in worker_metrics:
        text = urllib.request.urlopen(f"http://{endpoint}/metrics", timeout=5).read().decode()
        instance = set(re.findall(r'^gt_collectives_total{[^}]*instance="([^"]+)"', text, re.M))
        coll = {m[0]: float(m[1]) for m in re.findall(
            r'^gt_collectives_total{[^}]*collective="([^"]+)"[^}]*} (\\S+)', text, re.M)}
        scraped[endpoint] = {"instances": sorted(instance), "collectives": coll}
    print(json.dumps({"examples": examples, "stats": stats, "scraped": scraped}))
''')


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


@pytest.fixture(scope="class")
def cluster(hosts, keys, tmp_path_factory):
    """Dispatcher in A, worker-0 in B, worker-1 in C (started one after the
    other, so that their indexes are 0 and 1), the client run once in D;
    yields what the client printed, the hosts' logs, the sockets seen while
    everything was still up, and what clients without a listed key were told."""
    a, b, c, d = hosts
    logs = tmp_path_factory.mktemp("multihost")
    address = f"{a.address}:{PORT}"
    procs = []
    files = []

    def start(host, name, argv, **env):
        log = open(logs / f"{name}.log", "w")
        files.append(log)
        procs.append(subprocess.Popen(host.cmd(*argv), stdout=log, stderr=subprocess.STDOUT, env=_env(**env)))
        return logs / f"{name}.log"

    try:
        dlog = start(a, "dispatcher",
                     [BIN_DIR / "gt-dispatcher", "--listen", f"tcp://{address}", "--metrics",
                      f"{a.address}:{METRICS_PORT}", "--key", keys / "dispatcher.key", "--client-keys",
                      keys / "clients", "--worker-keys", keys / "workers"], GT_DEBUG_DISPATCHER="1", GT_EXPLAIN="1")
        _wait_for(lambda: "listening on" in _read(dlog), "the dispatcher listening", procs=procs)
        wlogs = {}
        for i, host in enumerate([b, c]):
            wlogs[f"worker-{i}"] = start(host, f"worker-{i}",
                                         [BIN_DIR / "gt-worker", "--connect", address, "--id", f"worker-{i}",
                                          "--metrics", f"{host.address}:{WORKER_METRICS_PORT}",
                                          "--key", keys / "workers" / f"w{i}.key",
                                          "--server-key", keys / "dispatcher.pub"])
            _wait_for(lambda: f"worker worker-{i} registered as #" in _read(dlog), f"worker-{i} registering",
                      procs=procs)
        worker_metrics = [f"{h.address}:{WORKER_METRICS_PORT}" for h in (b, c)]
        client_keys = {"GT_CLIENT_KEY": str(keys / "clients" / "alice.key"),
                       "GT_SERVER_KEY": str(keys / "dispatcher.pub")}
        r = subprocess.run(d.cmd(sys.executable, "-c", CLIENT, address, *worker_metrics), capture_output=True,
                           text=True, env=_env(**client_keys), timeout=120)
        assert r.returncode == 0, f"client failed:\n{r.stderr[-4000:]}\ndispatcher log:\n{_read(dlog)[-3000:]}"
        sockets = {h.name: {"tcp": _tcp_sockets(h), "unix": _unix_listeners(h)} for h in hosts}
        refused = {"no keys": _refused(d, address),
                   "a stranger's key": _refused(d, address, GT_CLIENT_KEY=str(keys / "stranger.key"),
                                                GT_SERVER_KEY=str(keys / "dispatcher.pub"))}
        for p in procs:
            assert p.poll() is None, f"{p.args} exited with status {p.returncode} during the run"
        yield {"out": json.loads(r.stdout), "dispatcher_log": dlog, "worker_logs": wlogs, "sockets": sockets,
               "client_stderr": r.stderr, "refused": refused}
    finally:
        stop_processes(procs[1:])  # workers first, so that each says goodbye
        stop_processes(procs[:1])
        for f in files:
            f.close()


# ---- a cluster started by hand -----------------------------------------------------------


class TestNamespacesAsHosts:
    @pytest.mark.parametrize("name", ["data_parallel", "model_parallel", "pipeline", "training"])
    def test_sharded_program_matches_the_unsharded_one(self, cluster, name):
        ex = cluster["out"]["examples"][name]
        sharded, whole = ex["sharded"], ex["whole"]
        assert sorted(sharded) == sorted(whole)
        for key in sharded:
            if key in ("grads", "params"):  # one array per parameter, of different shapes
                assert len(sharded[key]) == len(whole[key])
                for i, (g, g1) in enumerate(zip(sharded[key], whole[key])):
                    _close(g, g1, f"{name} {key}[{i}]")
            elif key == "losses":
                np.testing.assert_allclose(sharded[key], whole[key], rtol=0, atol=TOL, err_msg=f"{name} {key}")
            else:
                _close(sharded[key], whole[key], f"{name} {key}")
        if name == "training":
            assert whole["losses"][-1] < whole["losses"][0], whole["losses"]  # it learns

    @pytest.mark.parametrize("name", ["data_parallel", "model_parallel", "pipeline", "training"])
    def test_both_workers_ran_the_sharded_program_one_the_unsharded(self, cluster, name):
        ex = cluster["out"]["examples"][name]
        work, whole_work = ex["work"], ex["whole_work"]
        assert sorted(work) == ["worker-0", "worker-1"], work
        for worker, w in work.items():
            assert w["instructions"] > 0 and w["ops"].get("matmul", 0) > 0, (name, worker, w)
        # Without a signal every tensor lives on the client's one default
        # worker: the other ran no matmul, and nothing was exchanged.
        ran = [worker for worker, w in whole_work.items() if w["ops"].get("matmul", 0) > 0]
        assert len(ran) == 1, whole_work
        for worker, w in whole_work.items():
            assert sum(w["collectives"].values()) == 0, (name, worker, w)

    @pytest.mark.parametrize("name", ["data_parallel", "training"])
    def test_data_parallel_all_reduces_on_both_workers(self, cluster, name):
        for worker, w in cluster["out"]["examples"][name]["work"].items():
            assert w["collectives"]["all_reduce"] > 0, (name, worker, w)
        if name == "training":
            # Every step all-reduces the loss, and the four gradients (2
            # weights, 2 biases) together in one bucket (the optimizer's
            # settle); the parameters are replicated: no activation is gathered.
            for worker, w in cluster["out"]["examples"][name]["work"].items():
                assert w["collectives"]["all_reduce"] == 10 * 2 and w["collectives"]["all_gather"] == 0, (worker, w)

    def test_pipeline_stages_and_backward_stages_ran_where_their_signals_say(self, cluster):
        explain = [l for l in _read(cluster["dispatcher_log"]).splitlines() if l.startswith("gt explain:")]
        where = {"stage_1": "0", "stage_2": "1", "stage_1_backward": "1", "stage_2_backward": "0"}
        for signal_name, worker in where.items():
            lines = [l for l in explain if f"[{signal_name}]" in l]
            assert lines, f"no explain line for [{signal_name}]"
            for line in lines:
                assert re.search(rf"-> (whole on {worker}\b|sharded\(axis \d\) on \[{worker}\]|replicated on "
                                 rf"\[{worker}\]|partial\(sum\) on \[{worker}\])", line), line

    def test_http_metrics_at_the_worker_addresses_match_the_stats(self, cluster, hosts):
        out = cluster["out"]
        for i, host in enumerate(hosts[1:3]):
            scraped = out["scraped"][f"{host.address}:{WORKER_METRICS_PORT}"]
            assert scraped["instances"] == [f"worker-{i}"]
            assert scraped["collectives"] == out["stats"][f"worker-{i}"]["collectives"]
            assert scraped["collectives"]["all_reduce"] > 0

    def test_workers_registered_from_their_namespace_addresses(self, cluster, hosts):
        log = _read(cluster["dispatcher_log"])
        for i, host in enumerate(hosts[1:3]):
            assert re.search(rf"worker worker-{i} registered as #{i} from {re.escape(host.address)}\b", log), log
            wlog = _read(cluster["worker_logs"][f"worker-{i}"])
            assert f"connecting to tcp://{hosts[0].address}:{PORT}" in wlog and "local ipc" not in wlog, wlog
            assert f"metrics on http://{host.address}:{WORKER_METRICS_PORT}/metrics" in wlog, wlog

    def test_collectives_run_worker_to_worker_between_the_namespace_addresses(self, cluster, hosts):
        a, b, c, _ = hosts
        tcp = cluster["sockets"]
        # Worker-0's established connections to worker-1's address (Gloo's
        # pairs; the dispatcher is on neither end), and the same seen from C.
        pairs_b = [(l, p) for l, p, proc in tcp[b.name]["tcp"] if "gt-worker" in proc and _ip_of(l) == b.address
                   and _ip_of(p) == c.address]
        pairs_c = [(l, p) for l, p, proc in tcp[c.name]["tcp"] if "gt-worker" in proc and _ip_of(l) == c.address
                   and _ip_of(p) == b.address]
        assert pairs_b and pairs_c, tcp
        assert sorted(pairs_b) == sorted((p, l) for l, p in pairs_c)
        # Each worker's other connections go to the dispatcher's address: its
        # ZeroMQ port and the sharding stage's rendezvous store, which the
        # dispatcher announces at its own (listen) address.
        dispatcher_ports = {l.rsplit(":", 1)[1] for l, p, proc in tcp[a.name]["tcp"]
                            if "gt-dispatcher" in proc and p.endswith(":*")}
        for host in (b, c):
            connected = [p for l, p, proc in tcp[host.name]["tcp"] if "gt-worker" in proc and not p.endswith(":*")]
            assert {_ip_of(p) for p in connected} <= {a.address, b.address, c.address}, (host.name, connected)
            to_dispatcher = {p.rsplit(":", 1)[1] for p in connected if _ip_of(p) == a.address}
            store = to_dispatcher - {str(PORT)}
            assert str(PORT) in to_dispatcher and store and store <= dispatcher_ports, \
                (host.name, to_dispatcher, dispatcher_ports)

    def test_clients_without_a_listed_key_are_refused(self, cluster):
        refused = cluster["refused"]
        assert "requires CURVE keys" in refused["no keys"].get("error", ""), refused
        assert "refused this client's key" in refused["a stranger's key"].get("error", ""), refused

    def test_nothing_listens_on_or_talks_to_loopback(self, cluster, hosts):
        for host in hosts:
            for local, peer, proc in cluster["sockets"][host.name]["tcp"]:
                if "gt-" not in proc:
                    continue
                for end in (local, peer):
                    assert not _ip_of(end).startswith("127.") and _ip_of(end) != "::1", (host.name, local, peer, proc)
            # A dispatcher on a loopback or wildcard port would also bind a
            # local ipc socket; on its namespace address it must not.
            unix = [line for line in cluster["sockets"][host.name]["unix"] if '"gt-' in line]
            assert not unix, (host.name, unix)
        listeners = [(h.name, l, proc) for h in hosts for l, p, proc in cluster["sockets"][h.name]["tcp"]
                     if "gt-" in proc and p.endswith(":*")]
        assert any(name == hosts[0].name and l == f"{hosts[0].address}:{PORT}" for name, l, proc in listeners), \
            listeners


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
        r = subprocess.run(["shellcheck", "-S", "warning", str(LAUNCH)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout

