"""gt.debug.get_worker_stats() / print_worker_stats(): against the embedded
default in this process, and against real gt-dispatcher / gt-worker
processes whose dispatcher runs the hotpath and compile stages (a client in
a fresh interpreter, since a process connects once).
"""

import io
import json
import os
import textwrap

import numpy as np
import pytest

import gt
from conftest import CLUSTER_PROBES

DISPATCHER_MANIFEST = """\
host: dispatcher
id: dispatcher
heartbeat_interval_ms: 200
stages:
  - name: hotpath
    plugin: hotpath
    options: {threshold: 2}
  - name: compile
    plugin: compile
"""


def test_embedded_default_reports_the_dispatcher_then_every_worker():
    a = gt.randn(8, 8)
    (a @ a).sum().item()
    hosts = gt.debug.get_worker_stats()
    names = list(hosts)
    assert names[0] == "embedded-dispatcher"
    workers = int(os.environ.get("GT_WORKERS", "2"))
    assert sorted(names[1:]) == [f"embedded-worker-{i}" for i in range(workers)]
    dispatcher = hosts["embedded-dispatcher"]
    assert dispatcher["host"] == "dispatcher"
    assert dispatcher["stages"][-1] == "router"
    assert dispatcher["instructions"] > 0
    assert sum(h["instructions"] for h in list(hosts.values())[1:]) > 0
    received = [s for s in dispatcher["samples"] if s["name"] == "gt_stage_instructions_received_total"
                and s["labels"]["stage"] == dispatcher["stages"][0]]
    assert [s["value"] for s in received] == [dispatcher["instructions"]]


def test_print_worker_stats_has_a_line_per_host():
    gt.randn(4).sum().item()
    out = io.StringIO()
    gt.debug.print_worker_stats(file=out)
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:3] == ["host", "kind", "instructions"]
    hosts = gt.debug.get_worker_stats()
    assert [line.split()[0] for line in lines[1:1 + len(hosts)]] == list(hosts)


def test_a_non_positive_timeout_is_refused():
    with pytest.raises(ValueError, match="timeout"):
        gt.debug.get_worker_stats(timeout=0)


def test_hot_step_compiled_through_real_processes(python, processes, tmp_path):
    manifest = tmp_path / "dispatcher.yaml"
    manifest.write_text(DISPATCHER_MANIFEST)
    with processes(workers=1, dispatcher_manifest=manifest) as port:
        endpoint = f"tcp://127.0.0.1:{port}"
        # Each step frees its temporaries before its sync point: one hotpath
        # candidate per step, the same signature every time.
        code = textwrap.dedent(f"""\
            import io, json
            import gt
            gt.connect('{endpoint}')
            x = gt.randn(16, 8)
            w = gt.randn(8, 4)
            gt.sync()
            for _ in range(5):
                y = (x @ w).relu().sum()
                del y
                gt.sync()
            table = io.StringIO()
            gt.debug.print_worker_stats(file=table)
            print(json.dumps({{"stats": gt.debug.get_worker_stats(), "table": table.getvalue()}}))
            """)
        result = python(code, timeout=60)
        assert result.returncode == 0, result.stderr
        out = json.loads(result.stdout)
    stats = out["stats"]
    assert list(stats) == ["dispatcher", "worker-0"]
    d, w = stats["dispatcher"], stats["worker-0"]
    assert d["stages"] == ["hotpath", "compile", "router"]
    assert len(d["hot_sequences"]) == 1
    step = d["hot_sequences"][0]
    assert step["repetitions"] == 5
    assert step["length"] >= 4
    # Threshold 2: steps 2-5 were marked and each ran as one unit, defined once.
    assert d["units_run"] == 4
    assert d["cache_misses"] == 1
    assert d["cache_hits"] == d["units_run"] - d["cache_misses"]
    assert d["compiled"] == 4 * step["length"]
    assert w["unit_runs"] == 4
    assert w["unit_cache_misses"] == 1
    assert w["compile_seconds"] > 0
    assert sum(w["unit_instructions"].values()) == d["compiled"]
    table = out["table"]
    assert table.splitlines()[1].split()[:2] == ["dispatcher", "dispatcher"]
    assert f"dispatcher/hotpath  {step['id']}  length {step['length']}  x5" in table


def test_a_run_of_frees_travels_as_one_instruction_and_frees_every_tensor():
    # Half of a training step's instructions are frees, mostly in runs: the
    # client sends a run as one free naming every tensor.
    def figures():
        hosts = gt.debug.get_worker_stats()  # a sync point: the run goes out before it
        live = sum(s["value"] for h in hosts.values() if h and h["host"] == "worker"
                   for s in h["samples"] if s["name"] == "gt_worker_live_tensors")
        return hosts["embedded-dispatcher"]["instructions"], live

    xs = [gt.zeros(4) for _ in range(20)]
    instructions, live = figures()
    del xs
    after_instructions, after_live = figures()
    assert live - after_live == 20
    assert after_instructions - instructions == 2  # the one free, then the stats call's sync
    y = gt.ones(3)  # the stream goes on after a run of frees
    del y
    assert (gt.ones(2) * 2).sum().item() == 4.0


def test_a_run_of_frees_of_split_tensors_is_one_free_per_worker():
    # The sharding stage frees every piece a worker holds in one instruction.
    gt.register_config("frees-split", gt.SignalConfig(shard=gt.ShardConfig(axis=0, workers=[0, 1])))

    def per_worker():
        hosts = gt.debug.get_worker_stats()
        return {name: h["instructions"] for name, h in hosts.items() if h and h["host"] == "worker"}

    with gt.signal.context("frees-split"):
        xs = [gt.zeros(8, 4) for _ in range(6)]
    before = per_worker()
    del xs
    after = per_worker()
    grew = {name: after[name] - before[name] for name in after}
    # The two workers holding the pieces (which ones depends on the session's
    # earlier tests): one free and one sync each.
    assert sorted(grew.values())[-2:] == [2, 2] and sum(grew.values()) == 4, grew


CLIP_PROGRAM = """
import json
import time
import numpy as np
import gt
""" + CLUSTER_PROBES + """

def op_counts():
    return summed_by("gt_backend_op_seconds_count", "op")

def clip(make):
    params = [make(4, 3), make(3), make(2, 2)]
    sum((p * p).sum() for p in params).backward()
    before = op_counts()
    norm = gt.nn.utils.clip_grad_norm_(params, 0.1).item()
    after = op_counts()
    grads = np.concatenate([2 * p.detach().numpy().ravel() for p in params])
    clipped = np.concatenate([p.grad.numpy().ravel() for p in params])
    return {"grew": {op: after[op] - before.get(op, 0) for op in after}, "norm": norm,
            "want": float(np.linalg.norm(grads)), "clipped": float(np.linalg.norm(clipped))}

whole = clip(lambda *shape: gt.randn(*shape, requires_grad=True))
gt.register_config("copies", gt.SignalConfig(replicated=True))
def replicated(*shape):
    with gt.signal.context("copies"):
        return gt.randn(*shape, requires_grad=True)
placed = clip(replicated)
print(json.dumps({"whole": whole, "placed": placed}))
"""


SGD_PROGRAM = """
import json
import numpy as np
import gt
""" + CLUSTER_PROBES + """

def op_counts():
    return summed_by("gt_backend_op_seconds_count", "op")

params = [gt.randn(4, 3, requires_grad=True), gt.randn(3, requires_grad=True)]
sum((p * p * p).sum() for p in params).backward()
before_values = [p.detach().numpy() for p in params]
grads = [p.grad.numpy() for p in params]
optimizer = gt.optim.SGD(params, lr=0.1)
before = op_counts()
optimizer.step()
after = op_counts()
error = max(float(np.abs(p.detach().numpy() - (v - 0.1 * gr)).max()) for p, v, gr in zip(params, before_values, grads))
print(json.dumps({"grew": {op: after[op] - before.get(op, 0) for op in after}, "error": error}))
"""


def test_an_sgd_step_is_one_add_into_per_parameter(python):
    # PyTorch's p.add_(grad, alpha=-lr): no product, difference or copy_into
    # with two fresh tensors per parameter.
    r = python(SGD_PROGRAM, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    grew = {op: n for op, n in got["grew"].items() if n}
    assert grew == {"add_into": 2}, grew
    assert got["error"] < 1e-6, got


LOSS_PROGRAM = """
import json
import numpy as np
import torch
import gt
""" + CLUSTER_PROBES + """

def op_counts():
    return summed_by("gt_backend_op_seconds_count", "op")

rng = np.random.default_rng(0)
x, w = rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
targets = np.array([3, -100, 0, 4, 4, 1])

def step(lib, make):
    wt = make(w)
    loss = lib.nn.functional.cross_entropy(lib.nn.functional.relu(make(x) @ wt.t()), lib.tensor(targets))
    loss.backward()
    return float(loss.item()), wt.grad.numpy()

def gt_param(a):
    return gt.tensor(a, requires_grad=True)

def torch_param(a):
    return torch.tensor(a, requires_grad=True)

result = {}
for name in ("whole", "placing"):
    if name == "placing":  # a session that places tensors keeps the composite forms
        gt.register_config("copies", gt.SignalConfig(replicated=True))
        with gt.signal.context("copies"):
            gt.zeros(2)
    before = op_counts()
    loss, grad = step(gt, gt_param)
    after = op_counts()
    want_loss, want_grad = step(torch, torch_param)
    result[name] = {"grew": {op: after[op] - before.get(op, 0) for op in after if after[op] != before.get(op, 0)},
                    "loss_error": abs(loss - want_loss), "grad_error": float(np.abs(grad - want_grad).max())}
print(json.dumps(result))
"""


def test_cross_entropy_and_the_relu_gradient_are_one_op_each_way_and_equal_pytorchs(python):
    # LibTorch's own kernels (log_softmax + nll_loss, threshold_backward),
    # where the composites took about 25 ops and 2; a session that places
    # tensors keeps the composite cross entropy, with the same numbers.
    r = python(LOSS_PROGRAM, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    whole, placing = got["whole"]["grew"], got["placing"]["grew"]
    assert whole.get("cross_entropy") == 1 and whole.get("cross_entropy_backward") == 1, whole
    assert whole.get("relu_backward") == 1 and "gt" not in whole, whole
    assert not {"log_softmax", "gather", "scatter_add", "where", "eq"} & set(whole), whole
    # x @ w.t(), both needing gradients: three products (forward, G w, G^T x)
    # and two transposes (w.t() forward, G^T): w gets G^T x as it is, not
    # transposed for w.t() and back by the transpose's record (one more).
    assert whole.get("transpose") == 2 and whole.get("matmul") == 3, whole
    assert "cross_entropy" not in placing and placing.get("log_softmax") == 1 and placing.get("gather") == 1, placing
    for case in got.values():
        assert case["loss_error"] < 1e-5 and case["grad_error"] < 1e-5, got


INPLACE_PROGRAM = """
import json
import numpy as np
import gt

rng = np.random.default_rng(1)
def refused(change, loss_of):
    w = gt.tensor(rng.standard_normal((6, 4)).astype(np.float32), requires_grad=True)
    z, t = w * 1.0, gt.tensor(np.array([3, 1, 0, 2, 2, 1]))
    y = gt.tensor(rng.standard_normal((6, 4)).astype(np.float32))
    loss = loss_of(z, t, y)
    with gt.no_grad():
        change(z, t, y)
    try:
        loss.backward()
        return "no error"
    except gt.Error as e:
        return str(e)

ce = lambda z, t, y: gt.nn.functional.cross_entropy(z, t)
mse = lambda z, t, y: gt.nn.functional.mse_loss(z, y)
print(json.dumps({
    "ce_targets": refused(lambda z, t, y: t.fill_(0), ce),
    "ce_logits": refused(lambda z, t, y: z.add_(gt.ones(6, 4)), ce),
    "mse_target": refused(lambda z, t, y: y.mul_(gt.ones(4)), mse),
}))
"""


def test_the_fused_losses_refuse_a_backward_after_their_operands_changed_in_place(python):
    # Their backwards read logits and targets (input and target) again: a
    # change in between would give a silently wrong gradient.
    r = python(INPLACE_PROGRAM, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for case, message in got.items():
        assert "changed in place" in message, (case, message)
    assert "cross_entropy" in got["ce_targets"] and "mse_loss" in got["mse_target"], got


def test_clip_grad_norm_is_one_sum_of_squares_and_one_mul_into_per_gradient(python):
    # A fresh interpreter: a session that ever placed a tensor keeps the
    # per-gradient form (the sharding stage's strategies for split gradients).
    r = python(CLIP_PROGRAM, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    whole, placed = got["whole"], got["placed"]
    assert whole["grew"]["sum_of_squares"] == 1 and whole["grew"]["mul_into"] == 3, whole["grew"]
    assert whole["grew"]["mul"] <= 1 and whole["grew"]["copy_into"] == 0, whole["grew"]
    assert placed["grew"]["sum_of_squares"] == 0 and placed["grew"]["sum"] >= 3, placed["grew"]
    for case in (whole, placed):
        np.testing.assert_allclose(case["norm"], case["want"], rtol=1e-5)
        np.testing.assert_allclose(case["clipped"], 0.1, rtol=1e-4)
