"""Fair sharing of the workers (issue 38): a light client is not queued behind a heavy
neighbour, weights split compute time, collectives of different clients never wait on each
other, new clients go to the least loaded worker, and bad `clients:` entries are named.

Real gt-dispatcher / gt-worker processes over TCP loopback; every client is a fresh
interpreter. Timings are asserted with bounds loose enough for a loaded CI machine.
"""

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import CLUSTER_PROBES
from test_cluster import BIN_DIR, clean_env, client, read_line, require_services, run_client, tell
from test_security import SecureCluster, keys  # noqa: F401 (keys: the module's key fixture)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import fair_share_bench as bench  # noqa: E402


def worker_samples(metric):
    """Program text: {instance: {client label: value}} of a per-client worker metric."""
    return f"""
def per_client(metric={metric!r}):
    out = {{}}
    for name, h in gt.debug.get_worker_stats().items():
        if h and h["host"] == "worker":
            out[name] = {{s["labels"]["client"]: s["value"] for s in h["samples"] if s["name"] == metric}}
    return out
"""


def test_a_light_client_waits_for_a_heavy_op_not_the_heavy_queue(processes):
    """The issue's scenario on one worker: before fair queueing the light client's
    p99 was the heavy client's whole queue (40 matmuls); now it is about one matmul.
    Asserted: p99 under half the queue's time, a bound a FIFO worker cannot meet."""
    with processes(workers=1) as port:
        endpoint = f"127.0.0.1:{port}"
        light, heavy = bench.light_next_to_heavy(endpoint, light_iters=60, heavy_seconds=600)
    queue_ms = 40 * heavy["op_ms"]
    assert heavy["rounds"] >= 2, heavy
    assert light["p99_ms"] < 0.5 * queue_ms, (light, heavy)


def test_weights_two_to_one_split_compute_two_to_one(keys, tmp_path):  # noqa: F811
    """alice (weight 2) and bob (weight 1) both keep a worker busy: the worker's
    per-client compute counters grow 2:1 (within 15 %) while both run."""
    manifest = tmp_path / "dispatcher.yaml"
    manifest.write_text("host: dispatcher\nclients:\n"
                        f"  - {{key: {keys / 'clients' / 'alice.pub'}, weight: 2}}\n"
                        f"  - {{key: {keys / 'clients' / 'bob.pub'}, weight: 1}}\n")
    c = SecureCluster(keys, workers=1, manifest=manifest)
    heavy = []
    try:
        env_of = {who: c.client_env(keys / "clients" / f"{who}.key") for who in ("alice", "bob")}
        with tempfile.TemporaryDirectory() as d:
            stop = os.path.join(d, "stop")
            heavy = [bench.client(bench.HEAVY, c.endpoint, 600, 40, stop, env=clean_env(**env_of[who]))
                     for who in ("alice", "bob")]
            time.sleep(4)  # both connected, made their tensors and keep the worker busy
            split = run_client(c.endpoint, worker_samples("gt_worker_client_compute_seconds_total") + """
first = per_client()["worker-0"]
time.sleep(8)
last = per_client()["worker-0"]
say(alice=last["alice"] - first["alice"], bob=last["bob"] - first["bob"])
""", env=env_of["alice"], timeout=120)
            open(stop, "w").close()
            results = [bench.result(p) for p in heavy]
    finally:
        for p in heavy:
            if p.poll() is None:
                p.kill()
        c.stop()
    assert split["bob"] > 1.0, split  # both were running throughout
    assert 2 * 0.85 <= split["alice"] / split["bob"] <= 2 * 1.15, (split, results)


SHARDED_STEPS = int(os.environ.get("GT_FAIR_STEPS", "1000"))

SHARDED = CLUSTER_PROBES + r"""
gt.register_config("dp", gt.SignalConfig(shard=gt.ShardConfig(axis=0, workers=[0, 1])))
rng = np.random.default_rng(SEED)
x, w = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 8)).astype(np.float32)
want = float((x.astype(np.float64) @ w).sum())
before = worker_counts()
with gt.signal.context("dp"):
    X, W = gt.tensor(x), gt.tensor(w)
    for step in range(STEPS):
        got = (X @ W * float(step % 5 + 1)).sum().item()
        assert abs(got - want * (step % 5 + 1)) < 1e-3 * max(1.0, abs(want)) * 5, (step, got, want)
after = worker_counts()
say(collectives=delta(after, before))
"""


def test_two_sharded_clients_and_a_heavy_one_never_wait_on_each_others_collectives():
    """Two clients whose sharded ops need collectives between the same two workers, and
    a heavy client beside them, under fair queueing: every step finishes with numpy's
    numbers (a worker inside one client's all-reduce while its peer ran another's would
    hang here). Collectives run in arrival order on every worker (fair_queue.h)."""
    require_services()
    from test_cluster import cluster
    with cluster(workers=2) as c, tempfile.TemporaryDirectory() as d:
        stop = os.path.join(d, "stop")
        heavy = bench.client(bench.HEAVY, c.endpoint, 900, 40, stop, env=clean_env())
        try:
            time.sleep(2)
            sharded = [client(c.endpoint, f"SEED = {seed}\nSTEPS = {SHARDED_STEPS}\n" + SHARDED)
                       for seed in (1, 2)]
            outs = [p.communicate(timeout=900) for p in sharded]
        finally:
            open(stop, "w").close()
        heavy_result = bench.result(heavy)
    for p, (out, err) in zip(sharded, outs):
        assert p.returncode == 0, err[-3000:]
        collectives = json.loads(out.strip().splitlines()[-1])["collectives"]
        ran = {worker: sum(v for k, v in counts.items() if k != "instructions") for worker, counts in collectives.items()}
        assert all(n >= SHARDED_STEPS for n in ran.values()) and len(ran) == 2, collectives
    assert heavy_result["rounds"] >= 1


def test_a_new_client_goes_to_the_idle_worker():
    """Worker-0 is busy with a heavy client's queue and worker-1 holds a small client's
    tensor; round robin would put the next client on worker-0, load puts it on worker-1
    (the queued instructions each worker reports in its heartbeats)."""
    require_services()
    from test_cluster import cluster
    with cluster(workers=2) as c, tempfile.TemporaryDirectory() as d:
        stop = os.path.join(d, "stop")
        heavy = bench.client(bench.HEAVY, c.endpoint, 600, 40, stop, env=clean_env())
        small = None
        try:
            # The heavy client's tensors are on worker-0 (both idle: round robin's first);
            # the small client waits until that worker reports a queue before it makes one.
            small = client(c.endpoint, """
def queued(worker):
    h = gt.debug.get_worker_stats().get(worker) or {"samples": []}
    return sum(s["value"] for s in h["samples"] if s["name"] == "gt_worker_queued_instructions")
deadline = time.monotonic() + 120
while queued("worker-0") <= 0:
    assert time.monotonic() < deadline, "the heavy client never queued on worker-0"
    time.sleep(0.05)
x = gt.ones(4)
say(value=x.sum().item())
sys.stdin.readline()
""")
            assert read_line(small) == {"value": 4.0}
            time.sleep(1.5)  # a heartbeat reported worker-0's queue
            got = run_client(c.endpoint, worker_samples("gt_worker_client_instructions_total") + """
before = {w: set(labels) for w, labels in per_client().items()}
a = gt.from_numpy(np.arange(16, dtype=np.float32))
value = float((a * 2).sum().item())
after = {w: set(labels) for w, labels in per_client().items()}
say(value=value, new={w: sorted(after[w] - before.get(w, set())) for w in after},
    before={w: sorted(v) for w, v in before.items()})
""")
        finally:
            open(stop, "w").close()
            if small:
                tell(small, "done")
                small.wait(timeout=30)
        bench.result(heavy)
    assert got["value"] == 240.0
    assert got["new"]["worker-1"] and not got["new"]["worker-0"], got


def start_dispatcher(manifest, *args):
    return subprocess.run([str(BIN_DIR / "gt-dispatcher"), "--listen", "tcp://127.0.0.1:0", "--manifest",
                           str(manifest), *args], capture_output=True, text=True, timeout=30, env=clean_env())


@pytest.mark.parametrize("weight", ["0", "-1", "nan", "heavy"])
def test_a_weight_that_is_not_a_positive_number_is_named_with_its_line(keys, tmp_path, weight):  # noqa: F811
    manifest = tmp_path / "dispatcher.yaml"
    manifest.write_text("host: dispatcher\nclients:\n"
                        f"  - key: {keys / 'clients' / 'alice.pub'}\n"
                        f"    weight: {weight}\n")
    done = start_dispatcher(manifest, "--key", str(keys / "dispatcher.key"), "--client-keys",
                            str(keys / "clients"), "--worker-keys", str(keys / "workers"))
    assert done.returncode != 0
    assert f"dispatcher.yaml:4: clients[0].weight: a weight is a positive number, got '{weight}'" in done.stderr, \
        done.stderr


def test_a_client_entry_naming_an_unknown_key_is_named_with_its_line(keys, tmp_path):  # noqa: F811
    manifest = tmp_path / "dispatcher.yaml"
    manifest.write_text("host: dispatcher\nclients:\n"
                        f"  - {{key: {keys / 'clients' / 'alice.pub'}, weight: 2}}\n"
                        f"  - {{key: {keys / 'stranger.pub'}, weight: 1}}\n")
    done = start_dispatcher(manifest, "--key", str(keys / "dispatcher.key"), "--client-keys",
                            str(keys / "clients"), "--worker-keys", str(keys / "workers"))
    assert done.returncode != 0
    assert "dispatcher.yaml:4: clients[1].key:" in done.stderr and "stranger.pub" in done.stderr \
        and "not a key on the security.clients allow-list" in done.stderr, done.stderr
    without_keys = start_dispatcher(manifest, "--insecure")  # no flags at all would mean this user's key set
    assert without_keys.returncode != 0
    assert "dispatcher.yaml:3: clients: client shares need CURVE keys" in without_keys.stderr, without_keys.stderr


def test_a_client_over_its_compute_quota_is_refused_naming_the_limit(tmp_path):
    """limits.max_compute_seconds_per_minute: once a session used that much compute on
    a worker within a minute, its computing instructions there are refused with
    resource_exhausted naming the limit; what it already has can still be fetched."""
    require_services()
    from test_cluster import cluster
    manifest = tmp_path / "dispatcher.yaml"
    manifest.write_text("host: dispatcher\nlimits: {max_compute_seconds_per_minute: 0.5}\n")
    with cluster(workers=1, dispatcher_args=["--manifest", str(manifest)]) as c:
        got = run_client(c.endpoint, """
rng = np.random.default_rng(3)
a = gt.from_numpy(rng.standard_normal((512, 512)).astype(np.float32))
kept = (a * 2).numpy()
error, rounds = None, 0
while error is None and rounds < 400:
    try:
        [a @ a for _ in range(10)][-1].sum().item()
    except Exception as e:
        error = str(e)
    rounds += 1
say(error=error, rounds=rounds, still=bool(np.allclose(a.numpy() * 2, kept)))
""", timeout=300)
    assert got["error"] and "limits.max_compute_seconds_per_minute = 0.5" in got["error"], got
    assert "resource" in got["error"].lower() or "exhausted" in got["error"].lower() or "over its limit" in got["error"]
    assert got["still"], got
