"""gt.distributed on four workers: every change of layout against NumPy,
the collectives each one takes (from the client's record and from the
workers' gt_collectives_total, which must agree), ops and gradients through
distributed tensors, and the errors of impossible requests. Each scenario
runs in a fresh client process, on the embedded default (GT_WORKERS=4) and
on a process cluster (a gt-dispatcher and four gt-worker processes)."""

import json

import numpy as np
import pytest

import gt
from gt.distributed import DeviceMesh, Partial, Replicate, Shard

PROGRAM = r"""
import json, time
import numpy as np
import gt
from gt.distributed import DeviceMesh, Shard, Replicate, Partial, distribute_tensor, record

if ADDRESS:
    gt.connect(ADDRESS)


def metric_counts():
    counts = {}
    for name, h in gt.debug.get_worker_stats().items():
        if h is None or h["host"] != "worker":
            continue
        for s in h["samples"]:
            if s["name"] == "gt_collectives_total":
                kind = s["labels"]["collective"]
                counts[kind] = counts.get(kind, 0) + s["value"]
    return counts


deadline = time.monotonic() + 30
while len([h for h in gt.debug.get_worker_stats().values() if h and h["host"] == "worker"]) < 4:
    assert time.monotonic() < deadline, "four workers did not register"
    time.sleep(0.1)

out = {"transitions": [], "errors": {}}


def step(name, fn, expected):
    before = metric_counts()
    with record() as r:
        t = fn()
    after = metric_counts()  # a sync point: t is made
    value = t.numpy()  # (a split tensor's fetch gathers it: not part of the change)
    members = {}
    for c in r:
        members[c.kind] = members.get(c.kind, 0) + len(c.workers)
    out["transitions"].append({
        "name": name, "equal": bool(np.array_equal(value, expected)),
        "placements": repr(t.placements), "workers": t.device_mesh.workers,
        "collectives": [c.name for c in r], "record_members": members,
        "metric_members": {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)},
        "sources_here": all(c.source.startswith("<string>:") for c in r)})
    return t


a = np.arange(60, dtype=np.float32).reshape(10, 6)
mesh = DeviceMesh([0, 1, 2, 3], ("data",))
x = gt.from_numpy(a)
rows = step("whole->Shard(0)", lambda: gt.distributed.distribute_tensor(x, mesh, [Shard(0)]), a)
cols = step("Shard(0)->Shard(1)", lambda: rows.redistribute(mesh, [Shard(1)]), a)
rep = step("Shard(0)->Replicate", lambda: rows.redistribute(mesh, [Replicate()]), a)
step("Replicate->Shard(0)", lambda: rep.redistribute(mesh, [Shard(0)]), a)
step("Shard(0)->Shard(0)", lambda: rows.redistribute(mesh, [Shard(0)]), a)
step("Shard(-1)", lambda: rows.redistribute(mesh, [Shard(-1)]), a)
step("Shard(1)->full_tensor", lambda: cols.full_tensor(), a)
pair = step("Shard(0) on [1, 3]", lambda: rows.redistribute(DeviceMesh([1, 3]), [Shard(0)]), a)
step("[1, 3]->[0, 2]", lambda: pair.redistribute(DeviceMesh([0, 2]), [Shard(0)]), a)
grid = DeviceMesh([[0, 1], [2, 3]], ("data", "model"))
step("2-D [Shard(0), Shard(0)]", lambda: gt.distributed.distribute_tensor(x, grid, [Shard(0), Shard(0)]), a)
step("2-D [Replicate(), Replicate()]", lambda: gt.distributed.distribute_tensor(x, grid, [Replicate(), Replicate()]), a)
# A placement per mesh axis: collectives within the groups along one axis (columns [0, 2], [1, 3] for
# "data"; rows [0, 1], [2, 3] for "model"); a copy cut along an axis is sliced where it lives.
s0r = step("2-D whole->[Shard(0), Replicate()]", lambda: distribute_tensor(x, grid, [Shard(0), Replicate()]), a)
rs1 = step("2-D [Shard(0), Replicate()]->[Replicate(), Shard(1)]", lambda: s0r.redistribute(grid, [Replicate(), Shard(1)]), a)
s0s1 = step("2-D [Replicate(), Shard(1)]->[Shard(0), Shard(1)]", lambda: rs1.redistribute(grid, [Shard(0), Shard(1)]), a)
s1s0 = step("2-D [Shard(0), Shard(1)]->[Shard(1), Shard(0)]", lambda: s0s1.redistribute(grid, [Shard(1), Shard(0)]), a)
step("2-D [Shard(1), Shard(0)]->1-D Shard(0)", lambda: s1s0.redistribute(mesh, [Shard(0)]), a)
step("1-D Shard(0)->2-D [Shard(0), Shard(1)]", lambda: rows.redistribute(grid, [Shard(0), Shard(1)]), a)
step("2-D [Shard(0), Shard(1)]->full_tensor", lambda: s0s1.full_tensor(), a)
step("2-D [Shard(-1), Replicate()]", lambda: s0r.redistribute(grid, [Shard(-1), Replicate()]), a)
# A pending sum along "model" (a contraction over the dim it cuts; integers, so exact).
wi = np.arange(24, dtype=np.float32).reshape(6, 4) - 10
w_rows = distribute_tensor(gt.from_numpy(wi), grid, [Replicate(), Shard(0)])
out["pending_2d"] = repr((s0s1 @ w_rows).placements)
# (the matmul inside the step: the record names the source of the op that made the sum it reduces)
step("2-D [Shard(0), Partial()]->[Shard(0), Shard(1)]",
     lambda: (s0s1 @ w_rows).redistribute(grid, [Shard(0), Shard(1)]), a @ wi)
step("2-D [Shard(0), Partial()]->[Shard(0), Replicate()]",
     lambda: (s0s1 @ w_rows).redistribute(grid, [Shard(0), Replicate()]), a @ wi)
out["shard_sizes"] = list(gt._C.layout(rows._c)[3])

# Ops follow the placement: a split batch times replicated weights stays split, with no collective.
b = np.random.default_rng(1).standard_normal((8, 4)).astype(np.float32)
w = np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32)
xb = gt.distributed.distribute_tensor(gt.from_numpy(b), mesh, [Shard(0)])
wr = gt.distributed.distribute_tensor(gt.from_numpy(w), mesh, [Replicate()])
with record() as r:
    y = xb @ wr
    total = y.sum(0)  # over the split batch: a pending sum, nothing sent yet
    twice = total * 2  # linear in it: still pending
out["ops"] = {"y": repr(y.placements), "total": repr(total.placements), "twice": repr(twice.placements),
              "collectives": [c.name for c in r]}
with record() as r:
    split = twice.redistribute(mesh, [Shard(0)])  # a reduce-scatter: each worker keeps its piece of the sum
    used = total.relu()  # needs the value: one all-reduce, after which total is a copy on each worker
    again = total.relu()
out["ops"].update({"split": repr(split.placements), "split_workers": split.device_mesh.workers,
                   "total_after": repr(total.placements), "later": [c.name for c in r]})
# A contraction over a split dim, uneven pieces: [10, 8] split on columns @ [8, 3] split on rows.
left = np.random.default_rng(3).standard_normal((10, 8)).astype(np.float32)
right = np.random.default_rng(4).standard_normal((8, 3)).astype(np.float32)
product = (distribute_tensor(gt.from_numpy(left), mesh, [Shard(1)]) @
           distribute_tensor(gt.from_numpy(right), mesh, [Shard(0)]))
with record() as r:
    rows4 = product.redistribute(mesh, [Shard(0)])  # 10 rows: pieces of 3, 3, 3, 1
out["ops"].update({"product": repr(product.placements), "rows4": [c.name for c in r],
                   "rows4_sizes": list(gt._C.layout(rows4._c)[3]),
                   "rows4_ok": bool(np.allclose(rows4.numpy(), left @ right, atol=1e-4))})
yv, tv, sv = y.numpy(), total.numpy(), split.numpy()
out["ops"].update({"y_ok": bool(np.allclose(yv, b @ w, atol=1e-5)),
                   "total_ok": bool(np.allclose(tv, (b @ w).sum(0), atol=1e-5)),
                   "split_ok": bool(np.allclose(sv, 2 * (b @ w).sum(0), atol=1e-5))})

# Gradients pass through a redistribute.
xg = gt.from_numpy(b).requires_grad_()
loss = (gt.distributed.distribute_tensor(xg, mesh, [Shard(0)]) ** 2).sum()
loss.backward()
out["grad_ok"] = bool(np.allclose(xg.grad.numpy(), 2 * b, atol=1e-5))

# A data-parallel SGD step: the record against the metrics, by phase.
gt.register_config("batch", gt.SignalConfig(shard=gt.ShardConfig(axis=0, workers=[0, 1, 2, 3])))
gt.register_config("params", gt.SignalConfig(replicated=True))
with gt.signal.context("params"):
    w1 = gt.randn(4, 8).requires_grad_()
    w2 = gt.randn(8, 2).requires_grad_()
with gt.signal.context("batch"):
    xs = gt.randn(16, 4)
    ts = gt.randn(16, 2)
before = metric_counts()
with record() as r:
    pred = (xs @ w1).relu() @ w2
    mse = ((pred - ts) ** 2).mean()
    mse.backward()
    with gt.no_grad():
        for p in (w1, w2):
            p -= 0.1 * p.grad
    mse.item()
after = metric_counts()
members = {}
for c in r:
    members[c.kind] = members.get(c.kind, 0) + len(c.workers)
out["dp"] = {"totals": {f"{ph}/{k}": v[0] for (ph, k), v in r.totals().items()},
             "record_members": members,
             "metric_members": {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)},
             "table": r.table()}


def error_of(fn):
    try:
        fn()
    except gt.Error as e:
        return str(e)
    return None


out["errors"]["partial"] = error_of(lambda: gt.distributed.distribute_tensor(x, mesh, [Partial()]))
out["errors"]["short_2d"] = error_of(
    lambda: gt.distributed.distribute_tensor(gt.ones(1, 6), grid, [Shard(0), Replicate()]).numpy())
out["errors"]["count"] = error_of(lambda: gt.distributed.distribute_tensor(x, mesh, [Shard(0), Shard(1)]))
out["errors"]["dim"] = error_of(lambda: gt.distributed.distribute_tensor(x, mesh, [Shard(2)]))
out["errors"]["not_live"] = error_of(lambda: gt.distributed.distribute_tensor(x, DeviceMesh([0, 9]), [Shard(0)]).numpy())
out["after_error_ok"] = bool(np.array_equal(rows.numpy(), a))
print(json.dumps(out))
"""


def run(python, address=None, env=None):
    r = python(f"ADDRESS = {address!r}\n" + PROGRAM, env=env, timeout=240)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


# name: (placements, mesh workers, collectives)
EXPECTED = {
    "whole->Shard(0)": ("[Shard(dim=0)]", [0, 1, 2, 3], ["broadcast"]),
    "Shard(0)->Shard(1)": ("[Shard(dim=1)]", [0, 1, 2], ["all_gather"]),  # 6 columns: torch.chunk gives 3
    "Shard(0)->Replicate": ("[Replicate()]", [0, 1, 2, 3], ["all_gather"]),
    "Replicate->Shard(0)": ("[Shard(dim=0)]", [0, 1, 2, 3], []),
    "Shard(0)->Shard(0)": ("[Shard(dim=0)]", [0, 1, 2, 3], []),
    "Shard(-1)": ("[Shard(dim=1)]", [0, 1, 2], ["all_gather"]),
    "Shard(1)->full_tensor": ("[Replicate()]", [0], ["all_gather"]),
    "Shard(0) on [1, 3]": ("[Shard(dim=0)]", [1, 3], ["all_gather"]),  # gathered on 0..3: 1 and 3 hold it
    "[1, 3]->[0, 2]": ("[Shard(dim=0)]", [0, 2], ["all_gather", "broadcast"]),  # gathered on 1, 3, sent to 0, 2
    # 10 rows cut unevenly over four workers: not DTensor's axis-by-axis cut, so reported 1-D
    "2-D [Shard(0), Shard(0)]": ("[Shard(dim=0)]", [0, 1, 2, 3], ["broadcast"]),
    # one placement per mesh axis, as DTensor's (issue 40)
    "2-D [Replicate(), Replicate()]": ("[Replicate(), Replicate()]", [[0, 1], [2, 3]], ["broadcast"]),
    "2-D whole->[Shard(0), Replicate()]": ("[Shard(dim=0), Replicate()]", [[0, 1], [2, 3]], ["broadcast"]),
    # gathered along "data" (two groups), sliced along "model"
    "2-D [Shard(0), Replicate()]->[Replicate(), Shard(1)]": ("[Replicate(), Shard(dim=1)]", [[0, 1], [2, 3]],
                                                              ["all_gather"] * 2),
    "2-D [Replicate(), Shard(1)]->[Shard(0), Shard(1)]": ("[Shard(dim=0), Shard(dim=1)]", [[0, 1], [2, 3]], []),
    "2-D [Shard(0), Shard(1)]->[Shard(1), Shard(0)]": ("[Shard(dim=1), Shard(dim=0)]", [[0, 1], [2, 3]],
                                                        ["all_gather"] * 4),
    "2-D [Shard(1), Shard(0)]->1-D Shard(0)": ("[Shard(dim=0)]", [0, 1, 2, 3], ["all_gather"] * 4),
    "1-D Shard(0)->2-D [Shard(0), Shard(1)]": ("[Shard(dim=0), Shard(dim=1)]", [[0, 1], [2, 3]], ["all_gather"]),
    "2-D [Shard(0), Shard(1)]->full_tensor": ("[Replicate()]", [0], ["all_gather"] * 4),
    "2-D [Shard(-1), Replicate()]": ("[Shard(dim=1), Replicate()]", [[0, 1], [2, 3]], ["all_gather"] * 2),
    # summed within each mesh row: cut as it is summed, or a copy on each
    "2-D [Shard(0), Partial()]->[Shard(0), Shard(1)]": ("[Shard(dim=0), Shard(dim=1)]", [[0, 1], [2, 3]],
                                                         ["reduce_scatter"] * 2),
    "2-D [Shard(0), Partial()]->[Shard(0), Replicate()]": ("[Shard(dim=0), Replicate()]", [[0, 1], [2, 3]],
                                                           ["all_reduce(sum)"] * 2),
}


def check(got):
    names = [t["name"] for t in got["transitions"]]
    assert names == list(EXPECTED)
    for t in got["transitions"]:
        placements, workers, collectives = EXPECTED[t["name"]]
        assert t["equal"], t
        assert t["placements"] == placements, t
        assert t["workers"] == workers, t
        assert t["collectives"] == collectives, t
        # The client's record and the workers' counters see the same collectives (one count per member).
        assert t["record_members"] == t["metric_members"], t
        assert t["sources_here"], t
    assert got["shard_sizes"] == [3, 3, 3, 1]
    ops = got["ops"]
    assert ops["y"] == "[Shard(dim=0)]" and ops["total"] == "[Partial(sum)]" and ops["twice"] == "[Partial(sum)]", ops
    assert ops["collectives"] == [], ops
    assert ops["split"] == "[Shard(dim=0)]" and ops["split_workers"] == [0, 1, 2, 3], ops
    assert ops["later"] == ["reduce_scatter", "all_reduce(sum)"], ops
    assert ops["total_after"] == "[Replicate()]", ops
    assert ops["y_ok"] and ops["total_ok"] and ops["split_ok"], ops
    assert ops["product"] == "[Partial(sum)]" and ops["rows4"] == ["reduce_scatter"], ops
    assert ops["rows4_sizes"] == [3, 3, 3, 1] and ops["rows4_ok"], ops
    assert got["grad_ok"]
    dp = got["dp"]
    assert dp["record_members"] == dp["metric_members"], dp
    # Forward: the mean over the split batch. Backward: one per parameter's gradient (the weight
    # gradients contract over the split batch). (The record also shows a broadcast in the backward:
    # the mean's gradient is made whole and sent to the shards.)
    totals = dp["totals"]
    assert totals["forward/all_reduce(sum)"] == 1 and totals["backward/all_reduce(sum)"] == 2, dp["table"]
    assert "all_gather" not in str(totals), dp["table"]
    assert "<string>:" in dp["table"] and "pattern:" in dp["table"], dp["table"]
    errors = got["errors"]
    assert "Partial() cannot be asked for" in errors["partial"], errors
    assert got["pending_2d"] == "[Shard(dim=0), Partial(sum)]", got["pending_2d"]
    assert errors["short_2d"] and "does not give a piece to each" in errors["short_2d"], errors
    assert "one placement per mesh axis" in errors["count"], errors
    assert "out of range" in errors["dim"], errors
    assert errors["not_live"] and "worker 9 is not a live worker" in errors["not_live"], errors
    assert got["after_error_ok"]


def test_distributed_embedded(python):
    check(run(python, env={"GT_WORKERS": "4"}))


def test_distributed_process_cluster(python, processes):
    with processes(workers=4) as port:
        check(run(python, address=f"127.0.0.1:{port}"))


def test_placements_compare_and_print():
    assert Shard(0) == Shard(0) and Shard(0) != Shard(1) and Shard(1) != Replicate()
    assert Replicate() == Replicate() and Partial() == Partial() and Partial() != Replicate()
    assert [repr(p) for p in (Shard(1), Replicate(), Partial())] == ["Shard(dim=1)", "Replicate()", "Partial(sum)"]
    assert len({Shard(0), Shard(0), Replicate()}) == 2
    assert Shard(0).is_shard() and Shard(0).is_shard(0) and not Shard(0).is_shard(1) and Replicate().is_replicate()


def test_meshes():
    grid = DeviceMesh([[0, 1], [2, 3]], ("data", "model"))
    assert grid.shape == (2, 2) and grid.ndim == 2 and grid.size() == 4 and grid.size("model") == 2
    assert grid.groups(0) == [[0, 2], [1, 3]] and grid.groups(1) == [[0, 1], [2, 3]]
    assert repr(grid) == "DeviceMesh([[0, 1], [2, 3]], axes=(data, model))"
    line = DeviceMesh([3, 1])
    assert line.shape == (2,) and line.workers == [3, 1] and line == DeviceMesh([3, 1])
    with pytest.raises(gt.Error, match="appears twice"):
        DeviceMesh([0, 0])
    with pytest.raises(gt.Error, match="rows of different lengths"):
        DeviceMesh([[0, 1], [2]], ("a", "b"))
    with pytest.raises(gt.Error, match="negative worker index"):
        DeviceMesh([-1])
    with pytest.raises(gt.Error, match="used twice"):
        DeviceMesh([[0, 1], [2, 3]], ("a", "a"))
    with pytest.raises(ValueError, match="axis names"):
        DeviceMesh([0, 1], ("a", "b"))
    with pytest.raises(TypeError):
        DeviceMesh([0.5])


CONFIG_YAML = """
mesh:
  workers: [[0, 1], [2, 3]]
  axes: [data, model]
batch:
  placements: [shard(0), shard(0)]
params:
  placements: [replicate, replicate]
"""


def test_yaml_placements_on_a_mesh_become_signal_configs():
    found = gt.load_config_string(CONFIG_YAML, "mesh.yaml")
    assert set(found) == {"batch", "params"}  # `mesh` names no signal
    assert gt.get_config("batch") == gt.SignalConfig(shard=gt.ShardConfig(axis=0, workers=[0, 1, 2, 3]))
    assert gt.get_config("params") == gt.SignalConfig(replicated=True, replicas=[0, 1, 2, 3])
    with gt.signal.context("batch"):
        x = gt.randn(8, 3)
    assert x.placements == [Shard(0)] and x.device_mesh.workers == [0, 1, 2, 3]
    # A copy on the mesh's workers only, through the same config path.
    line = DeviceMesh([1, 3], ("pair",))
    gt.register_config("pair", gt.SignalConfig(mesh=line, placements=[Replicate()]))
    assert gt.get_config("pair") == gt.SignalConfig(replicated=True, replicas=[1, 3])
    with gt.signal.context("pair"):
        y = gt.ones(2, 2)
    assert y.placements == [Replicate()] and y.device_mesh.workers == [1, 3]
    assert y.numpy().tolist() == [[1.0, 1.0], [1.0, 1.0]]


@pytest.mark.parametrize("text, problem", [
    ("a:\n  placements: [shard(0)]\n", "mesh.yaml:2: a.placements: placements need the file's mesh: section"),
    ("mesh: {workers: [0, 1]}\na:\n  placements: [shard(0)]\n  replicated: true\n",
     "a.placements: placements exclude shard and replicated"),
    ("mesh: {workers: [0, 1]}\na:\n  placements: [shard(0), shard(1)]\n", "expected one placement per mesh axis (1), got 2"),
    ("mesh: {workers: [0, 1]}\na:\n  placements: [shard(x)]\n", "a.placements[0]: expected shard(DIM) or replicate"),
    ("mesh: {workers: [0, 1]}\na:\n  placements: [partial]\n", "a.placements[0]: partial cannot be asked for"),
    ("mesh: {workers: [0, 0]}\n", "mesh.yaml:1: mesh: DeviceMesh: worker 0 appears twice"),
    ("mesh: {workers: [0, -1]}\n", "mesh.workers[1]: worker index -1 is out of range"),
    ("mesh: {workers: [0, 1], shape: 2}\n", "mesh.shape: unknown key 'shape' (known: workers, axes)"),
    ("mesh: [0, 1]\n", "mesh: the file's device mesh (mesh names no signal): expected a mapping with keys workers, axes"),
    ("mesh: {workers: []}\n", "mesh.workers: expected a non-empty list of worker indexes"),
])
def test_yaml_placement_problems_name_the_line_and_field(text, problem):
    with pytest.raises(gt.ConfigError) as e:
        gt.load_config_string(text, "mesh.yaml")
    assert any(problem in p for p in e.value.problems), e.value.problems
    assert gt.get_config("a") is None


def test_python_signal_config_placements_follow_the_same_rules():
    mesh = DeviceMesh([0, 1, 2, 3])
    assert gt.SignalConfig(mesh=mesh, placements=[Shard(-1)]).shard == gt.ShardConfig(axis=-1, workers=[0, 1, 2, 3])
    with pytest.raises(gt.ConfigError, match="placements exclude shard and replicated"):
        gt.SignalConfig(replicated=True, mesh=mesh, placements=[Replicate()])
    mixed = gt.SignalConfig(mesh=DeviceMesh([[0, 1], [2, 3]], ("a", "b")), placements=[Shard(0), Replicate()])
    assert mixed.shard is None and not mixed.replicated and mixed.mesh_layout == (2, 2, [0, 1, 2, 3], [0, None])
    assert "placements=['Shard(0)', 'Replicate()']" in repr(mixed)
    with pytest.raises(gt.ConfigError, match="replicas"):
        gt.register_config("r", gt.SignalConfig(replicas=[0]))


def _pending(b):
    """sum over a split dim: a pending sum (Partial) on four workers."""
    p = gt.distributed.distribute_tensor(gt.from_numpy(b), DeviceMesh([0, 1, 2, 3]), [Shard(0)]).sum(0)
    assert p.placements == [Partial()]
    return p


def test_a_view_of_a_pending_sum_still_shares_data_with_its_base():
    # Found by review: each was summed on its own, so a write into one no longer reached the other.
    b = np.random.default_rng(5).standard_normal((8, 2, 2)).astype(np.float32)
    p = _pending(b)
    v = p.reshape(4)
    assert v.placements == [Partial()]
    p += 1
    np.testing.assert_allclose(v.numpy(), b.sum(0).reshape(4) + 1, rtol=1e-5, atol=1e-5)
    q = _pending(b)
    w = q[0].transpose(0, 0)  # a view of a view
    row = q[0]
    row += 1
    np.testing.assert_allclose(q.numpy(), b.sum(0) + np.array([[1, 1], [0, 0]]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w.numpy(), b.sum(0)[0] + 1, rtol=1e-5, atol=1e-5)


def test_a_pending_sum_scaled_by_a_non_finite_number_is_summed_first():
    b = np.zeros((8, 3), np.float32)
    b[0] = 2  # one worker's addend is 2, the others' 0
    np.testing.assert_array_equal((_pending(b) * float("inf")).numpy(), np.full(3, np.inf, np.float32))
    np.testing.assert_array_equal((_pending(b) / 0.0).numpy(), np.full(3, np.inf, np.float32))


def test_yaml_shard_dim_is_decimal():
    with pytest.raises(gt.ConfigError) as e:
        gt.load_config_string("mesh: {workers: [0, 1]}\na:\n  placements: [shard(0x1)]\n", "m.yaml")
    assert any("expected shard(DIM) or replicate" in p for p in e.value.problems), e.value.problems


def test_layout_queries_and_recordings_reach_no_worker():
    # The dispatcher answers them from its sharding stage's records: no
    # worker gets an instruction for a layout query, nor for a recording's
    # start or end (each worker's instruction count stays as it was).
    def per_worker():
        hosts = gt.debug.get_worker_stats()  # a sync point: what went before has reached the workers
        return {name: h["instructions"] for name, h in hosts.items() if h and h["host"] == "worker"}

    b = np.arange(32, dtype=np.float32).reshape(8, 4)
    split = gt.distributed.distribute_tensor(gt.from_numpy(b), DeviceMesh([0, 1, 2, 3]), [Shard(0)])
    mesh = gt.distributed.distribute_tensor(gt.from_numpy(b), DeviceMesh([[0, 1], [2, 3]], ("a", "b")),
                                            [Shard(0), Replicate()])
    pending = split.sum(0)
    before = per_worker()
    assert len(before) == 4
    assert split.placements == [Shard(0)]
    assert mesh.placements == [Shard(0), Replicate()] and mesh.device_mesh.workers == [[0, 1], [2, 3]]
    assert pending.placements == [Partial()]
    with gt.distributed.record() as r:
        pass
    assert r.records == []
    assert per_worker() == before
    np.testing.assert_array_equal(pending.numpy(), b.sum(0))  # the data is where the layout says
