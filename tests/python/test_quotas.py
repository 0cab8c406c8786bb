"""Per-client quotas on a shared cluster (issue 20): live tensors and
in-flight instructions at the dispatcher (manifest `limits:`), resident
bytes at each worker (torch backend option max_client_mib). Past a quota a
client's instruction fails with resource_exhausted at its next sync point,
names the limit, stores nothing and leaves every other client undisturbed;
the limits and refusals are metrics. A program that never syncs stays under
max_inflight: the client waits for a sync on its own (backpressure).

Real gt-dispatcher / gt-worker processes over TCP loopback; each client is a
fresh interpreter.
"""

import textwrap
import time
import urllib.request

import pytest

import subprocess

from conftest import bound_endpoints, next_output_line
from test_cluster import Cluster, client, end_clients, read_line, require_services, run_client, tell


def scrape(address, name, **labels):
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as r:
        text = r.read().decode()
    total = None
    for line in text.splitlines():
        if not line.startswith(name + "{") or not all(f'{k}="{v}"' in line for k, v in labels.items()):
            continue
        total = (total or 0) + float(line.rsplit(" ", 1)[1])
    return total


class QuotaCluster(Cluster):
    """A dispatcher with `limits` (and the sharding stage) and `workers`
    workers with max_client_mib; the first worker's metrics at
    worker_metrics."""

    def __init__(self, tmp_path, limits, worker_mib, workers=1, env=None):
        dispatcher = tmp_path / "dispatcher.yaml"
        dispatcher.write_text(textwrap.dedent(f"""\
            host: dispatcher
            limits: {limits}
            stages:
              - {{name: sharding, plugin: sharding}}
        """))
        self.worker_manifest = tmp_path / "worker.yaml"
        self.worker_manifest.write_text(textwrap.dedent(f"""\
            host: worker
            backend:
              plugin: torch
              options: {{max_client_mib: {worker_mib}}}
        """))
        super().__init__(["--manifest", str(dispatcher)], env=env)
        for i in range(workers):
            # Port 0, read back from the worker's first line: a port picked
            # free beforehand can be taken by a parallel test's process
            # before the worker binds it (the worker then serves no metrics,
            # and the scrapes below would read someone else's).
            metrics = ["--metrics", "127.0.0.1:0"] if i == 0 else []
            self.workers[f"worker-{i}"] = self._spawn(["gt-worker", "--connect", self.endpoint, "--id", f"worker-{i}",
                                                       "--manifest", str(self.worker_manifest), *metrics],
                                                      out=subprocess.PIPE if i == 0 else None)
            self.procs.append(self.workers[f"worker-{i}"])
            if i == 0:
                line = next_output_line(self.workers["worker-0"], 30) or ""
                _, self.worker_metrics = bound_endpoints(line)
                assert self.worker_metrics, f"gt-worker announced no metrics endpoint: {line!r}"
            self.wait_for_workers(i + 1)


@pytest.fixture
def quota_cluster(tmp_path):
    require_services()
    c = QuotaCluster(tmp_path, "{max_live_tensors: 8, max_inflight: 50}", worker_mib=1)
    try:
        yield c
    finally:
        c.stop()


# attempt(fn): fn's value, or the message and code of the error it raised.
CATCH = """
    def attempt(fn):
        try:
            return {"value": fn(), "error": None}
        except Exception as e:
            return {"value": None, "error": str(e), "code": getattr(e, "code", None)}
"""


def with_catch(body):
    return textwrap.dedent(CATCH) + textwrap.dedent(body)


def test_live_tensors_past_the_limit_are_refused_and_others_go_on(quota_cluster):
    c = quota_cluster
    holder = client(c.endpoint, with_catch("""
        kept = [gt.from_numpy(np.full(2, i, dtype=np.float32)) for i in range(8)]
        say(**attempt(lambda: float(kept[7].sum().item())))  # the sum's result is a ninth tensor
        more = gt.ones(2)
        say(**attempt(lambda: more.numpy().tolist()))
        del kept[:4]
        again = gt.ones(2) * 3
        say(**attempt(lambda: again.numpy().tolist()))
        sys.stdin.readline()
    """))
    try:
        first = read_line(holder)
        assert first["error"] and "limits.max_live_tensors = 8" in first["error"], first
        assert first["code"] == "resource_exhausted", first
        refused = read_line(holder)
        assert refused["error"] and "limits.max_live_tensors = 8" in refused["error"], refused
        # Freed tensors make room: the same client goes on.
        assert read_line(holder) == {"value": [3.0, 3.0], "error": None}
        # Another client has its own quota, untouched by the first's.
        other = run_client(c.endpoint, """
            xs = [gt.ones(3) * i for i in range(3)]
            say(value=[x.sum().item() for x in xs])
        """)
        assert other["value"] == [0.0, 3.0, 6.0]
        assert scrape(c.metrics, "gt_client_limit", resource="live_tensors") == 8
        assert scrape(c.metrics, "gt_client_limit_refusals_total", resource="live_tensors") >= 2
        tell(holder, "done")
    finally:
        end_clients(holder)


def test_a_sync_raises_the_first_failed_op_wherever_it_failed(quota_cluster):
    """A worker's error for an early op and the dispatcher's own refusal of a
    later one meet in one sync: the first op the client issued is raised
    (the dispatcher's errors used to come first whatever their order)."""
    got = run_client(quota_cluster.endpoint, with_catch("""
        x = gt.tensor([1.0, 2.0, 3.0])
        bad = x.index_select(0, gt.tensor([5]))   # fails on the worker: index 5 of 3
        kept = [gt.zeros(2) for _ in range(8)]    # the eighth is a ninth live tensor: the dispatcher refuses it
        say(**attempt(gt.sync))
    """))
    assert got["error"] and got["error"].startswith("gt: index_select #"), got
    assert "(and " in got["error"] and "more failed ops)" in got["error"], got


def test_instructions_in_flight_past_the_limit_are_refused_until_a_sync(quota_cluster):
    c = quota_cluster
    out = run_client(c.endpoint, with_catch("""
        a = gt.ones(1)
        def unsynced(n):
            global a
            for _ in range(n):
                a = a + 1
            return a.item()
        first = attempt(lambda: unsynced(100))   # 100 adds, no sync: past 50 in flight
        a = gt.ones(1)
        second = attempt(lambda: unsynced(20))   # the sync answered everything: room again
        say(first=first, second=second)
    """))
    assert out["first"]["error"] and "limits.max_inflight = 50" in out["first"]["error"], out
    assert out["first"]["code"] == "resource_exhausted", out
    assert out["second"] == {"value": 21.0, "error": None}, out
    assert scrape(c.metrics, "gt_client_limit_refusals_total", resource="inflight") >= 1


def test_a_program_that_never_syncs_stays_under_the_default_limit(tmp_path):
    require_services()
    # A limit above the client's own window (32768): the client syncs by itself before reaching it.
    c = QuotaCluster(tmp_path, "{max_inflight: 40000}", worker_mib=0)
    try:
        out = run_client(c.endpoint, """
            a = gt.zeros(1)
            for _ in range(50000):
                a = a + 1
            say(value=a.item())
        """, timeout=300)
        assert out["value"] == 50000.0
        assert scrape(c.metrics, "gt_client_limit_refusals_total", resource="inflight") == 0
    finally:
        c.stop()


def test_resident_bytes_past_the_workers_limit_are_refused_before_allocating(quota_cluster):
    c = quota_cluster
    out = run_client(c.endpoint, with_catch("""
        huge = attempt(lambda: gt.zeros(1000000, 1000000).sum().item())   # 4 TB: refused, never allocated
        small = gt.zeros(300, 300)                                        # 360 KB: fits in 1 MiB
        fits = attempt(lambda: (small @ small).sum().item())               # 720 KB
        big = attempt(lambda: gt.ones(500, 500).sum().item())              # +1 MB beside small: over
        after = attempt(lambda: (small + 1).sum().item())                  # the client goes on
        say(huge=huge, fits=fits, big=big, after=after)
    """))
    assert out["huge"]["error"] and "max_client_mib" in out["huge"]["error"], out
    assert out["huge"]["code"] == "resource_exhausted", out
    assert out["fits"] == {"value": 0.0, "error": None}, out
    assert out["big"]["error"] and "over its limit of 1 MiB" in out["big"]["error"], out
    assert out["after"] == {"value": 90000.0, "error": None}, out
    assert scrape(c.worker_metrics, "gt_client_limit", resource="resident_bytes") == 1 << 20
    assert scrape(c.worker_metrics, "gt_client_limit_refusals_total", resource="resident_bytes") >= 2
    # Nothing of the refused ops stayed behind once the client left.
    deadline = time.monotonic() + 10
    while scrape(c.worker_metrics, "gt_worker_live_tensors") != 0:
        assert time.monotonic() < deadline, scrape(c.worker_metrics, "gt_worker_live_tensors")
        time.sleep(0.1)


def test_a_sharded_program_is_counted_by_its_own_instructions_and_refused_whole(tmp_path):
    """The quotas count what the client sent, not the pieces and collectives
    the sharding stage makes of it: a sharded loop under max_inflight runs,
    and past it the client's op is refused before the stage splits it, so
    no collective has a member missing (its peers would wait in Gloo for
    the collective timeout, holding every client on those workers)."""
    require_services()
    c = QuotaCluster(tmp_path, "{max_inflight: 40}", worker_mib=0, workers=2)
    try:
        out = run_client(c.endpoint, with_catch("""
            wait_for_workers(["worker-0", "worker-1"])
            gt.register_config("dp", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))
            rng = np.random.default_rng(3)
            x_np = rng.standard_normal((8, 4), dtype=np.float32)
            w_np = rng.standard_normal((4, 4), dtype=np.float32)
            with gt.signal.context("dp"):
                x = gt.tensor(x_np)
            w = gt.tensor(w_np)
            x.sum().item()
            def under(n):   # n sharded adds and frees: 4n pieces on the workers, 2n of the client's
                y = x
                with gt.signal.context("dp"):
                    for _ in range(n):
                        y = y + 1
                return float(np.abs(y.numpy() - (x_np + n)).max())
            def over(n):    # sharded matmul + sum: each a collective across both workers
                s = None
                with gt.signal.context("dp"):
                    for _ in range(n):
                        s = (x @ w).sum()
                return s.item()
            start = time.monotonic()
            first = attempt(lambda: under(15))
            second = attempt(lambda: over(200))
            third = attempt(lambda: over(3))
            say(first=first, second=second, third=third, seconds=time.monotonic() - start,
                expected=float((x_np @ w_np).sum()))
        """))
        assert out["first"]["error"] is None and out["first"]["value"] < 1e-5, out
        assert out["second"]["error"] and "limits.max_inflight = 40" in out["second"]["error"], out
        assert out["second"]["code"] == "resource_exhausted", out
        assert out["third"]["error"] is None and abs(out["third"]["value"] - out["expected"]) < 1e-3, out
        # Nobody waited out a collective timeout (60 s) for a refused member.
        assert out["seconds"] < 30, out
        assert scrape(c.metrics, "gt_client_limit_refusals_total", resource="inflight") >= 1
        # The work was sharded: worker 0 took part in collectives.
        assert scrape(c.worker_metrics, "gt_collectives_total") > 0
    finally:
        c.stop()


def test_a_compiled_units_allocations_count_against_the_memory_quota(quota_cluster):
    """A unit's body (GT_COMPILE: the client compiles a scope into one
    run_unit) allocates on the worker like the ops it stands for: the run
    is refused before it runs when its body would take the client past
    max_client_mib."""
    c = quota_cluster
    out = run_client(c.endpoint, with_catch("""
        tries = []
        for step in range(3):
            with gt.signal.context("step", compile=True):
                z = (gt.zeros(2048, 2048) + 1).sum()   # 16 MiB inside the unit, over 1 MiB
            tries.append(attempt(lambda: z.item()))
        small = []
        for step in range(3):
            with gt.signal.context("small", compile=True):
                s = (gt.ones(16, 16) * 2).sum()
            small.append(attempt(lambda: s.item()))
        say(tries=tries, small=small)
    """), env={"GT_COMPILE": "1"})
    first = out["tries"][0]
    assert first["code"] == "resource_exhausted" and "max_client_mib" in first["error"], out
    assert "run_unit" in first["error"], out  # the compiled path was taken, and refused
    assert all(t["value"] is None for t in out["tries"]), out  # (the later ones name the first)
    assert all(t == {"value": 512.0, "error": None} for t in out["small"]), out


def test_a_broadcast_is_refused_before_it_allocates(quota_cluster):
    """ones(N, 1) * ones(1, N) is small in, large out: the worker works the
    result's size out from the shapes and refuses it unallocated."""
    c = quota_cluster
    out = run_client(c.endpoint, with_catch("""
        a, b = gt.ones(16384, 1), gt.ones(1, 16384)
        wide = attempt(lambda: (a * b).sum().item())       # 1 GiB result under a 1 MiB limit
        mm = attempt(lambda: (a @ b).sum().item())         # the same through matmul
        fine = attempt(lambda: (a[:8] * b[:, :8]).sum().item())
        say(wide=wide, mm=mm, fine=fine)
    """))
    for key in ("wide", "mm"):
        assert out[key]["error"] and "max_client_mib" in out[key]["error"], out
        # Refused by the inferred size, not after allocating.
        assert "would hold 1024.1 MiB (1073872896 bytes)" in out[key]["error"], out
    assert out["fine"] == {"value": 64.0, "error": None}, out
