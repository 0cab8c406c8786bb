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

scripts/launch-cluster.sh on a hostfile of those namespaces is in
test_multihost_launch.py; the namespaces, keys and readers both use are in
multihost_env.py.

Needs root and iproute2; skipped, with the reason, where namespaces cannot
be made (netns.skip_reason()) or the services are not built (GT_BIN_DIR,
else build/bin).
"""

import json
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import stop_processes
from multihost_env import (BIN_DIR, METRICS_PORT, PORT, TOL, WORKER_METRICS_PORT, _close, _env, _ip_of, _read,
                           _refused, _tcp_sockets, _unix_listeners, _wait_for)
# The module-scoped fixtures this file's tests take.
from multihost_env import hosts, keys  # noqa: F401,F811


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
