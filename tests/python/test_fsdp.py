"""gt.distributed.fully_shard: the example GPT trained FSDP-style on four
workers (every parameter split along dim 0, the batch split along dim 0,
AdamW updating each piece where it lives) equals the same training on one
worker for five steps, on the embedded default and on a process cluster.
The record of a step and the workers' metrics show where the work ran:
weights all-gathered in the forward, every gradient reduce-scattered into
the pieces of its parameter, nothing else holding a whole parameter."""

import json
import pathlib

import pytest

from conftest import CLUSTER_PROBES
from test_gpt_parallel import assert_same_training

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "gpt"

PROGRAM = r"""
import json, sys, time
import numpy as np
import gt
from gt.distributed import DeviceMesh, Shard, Replicate, distribute_tensor, fully_shard, record
sys.path.insert(0, EXAMPLES)
from model import build
""" + CLUSTER_PROBES + r"""
if ADDRESS:
    gt.connect(ADDRESS)
GPT = build(gt)
VOCAB, BLOCK, D, HEADS, LAYERS, BATCH, STEPS = 16, 8, 16, 4, 2, 8, 5
rng = np.random.default_rng(11)
batches = [rng.integers(0, VOCAB, (BATCH, BLOCK + 1)) for _ in range(STEPS)]
deadline = time.monotonic() + 30
while len([h for h in gt.debug.get_worker_stats().values() if h and h["host"] == "worker"]) < 4:
    assert time.monotonic() < deadline, "four workers did not register"
    time.sleep(0.1)


def collectives():
    return summed_by("gt_collectives_total", "collective")


def train(model, place, recorded):
    opt = gt.optim.AdamW(model.parameters(), lr=1e-2)
    losses, report = [], None
    for i, b in enumerate(batches):
        idx, targets = place(b[:, :-1]), place(b[:, 1:])
        if i == recorded:
            before = collectives()
            with record() as r:
                loss = model.loss(idx, targets)
                loss.backward()
                opt.step()
                opt.zero_grad()
                losses.append(loss.item())
            after = collectives()
            members = {}
            for c in r:
                members[c.kind] = members.get(c.kind, 0) + len(c.workers)
            report = {"totals": {f"{ph}/{k}": v[0] for (ph, k), v in r.totals().items()},
                      "forward_weight_gathers": r.count("all_gather", "forward", ("matmul",)),
                      "record_members": members,
                      "metric_members": {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)},
                      "pattern": r.pattern()}
        else:
            loss = model.loss(idx, targets)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
    return losses, report


gt.manual_seed(0)
reference = GPT(VOCAB, BLOCK, D, HEADS, LAYERS)
initial = {n: p.numpy() for n, p in reference.state_dict().items()}  # buffers included
ref_losses, _ = train(reference, lambda a: gt.tensor(a), None)

mesh = DeviceMesh([0, 1, 2, 3], ("fsdp",))
model = GPT(VOCAB, BLOCK, D, HEADS, LAYERS)
model.load_state_dict(initial)
fully_shard(model, mesh)
layouts = {n: [repr(p.placements), p.device_mesh.workers] for n, p in model.named_parameters()}
losses, report = train(model, lambda a: distribute_tensor(gt.tensor(a), mesh, [Shard(0)]), 2)
print(json.dumps({"reference": {"losses": ref_losses, "params": {n: p.numpy().tolist() for n, p in reference.named_parameters()}},
                  "parallel": {"losses": losses, "params": {n: p.numpy().tolist() for n, p in model.named_parameters()}},
                  "layouts": layouts, "report": report}))
"""


def run(python, address=None, env=None):
    code = f"EXAMPLES = {str(EXAMPLES)!r}\nADDRESS = {address!r}\n" + PROGRAM
    r = python(code, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def check(got):
    assert_same_training(got)  # losses and parameters within 1e-4 of one worker's    # Every parameter split along dim 0 over the mesh (a dim shorter than 4 over fewer workers).
    for name, (placements, workers) in got["layouts"].items():
        assert placements == "[Shard(dim=0)]", (name, placements)
        assert workers == [0, 1, 2, 3], (name, workers)
    report = got["report"]
    assert report["record_members"] == report["metric_members"], report
    # Split weights gathered for the forward's matmuls (per layer q, k, v, fc, out and the head, 11 here;
    # the attention projection's matmul gathers its input instead, which costs the same bytes here).
    assert report["forward_weight_gathers"] >= 11, report
    # The 31 parameters' gradients, pending sums over the split batch, reduce-scattered into their
    # pieces by the hook; the position embedding's too (an index_add of a pending sum into zeros, at
    # positions every worker holds, stays a pending sum). Nothing all-reduced.
    assert report["totals"].get("backward/reduce_scatter", 0) == 31, report["totals"]
    assert report["totals"].get("backward/all_reduce(sum)", 0) == 0, report["totals"]
    assert report["pattern"].startswith("fully sharded (FSDP / ZeRO-3)"), report


def test_fsdp_gpt_equals_one_worker_embedded(python):
    check(run(python, env={"GT_WORKERS": "4"}))


def test_fsdp_gpt_equals_one_worker_process_cluster(python, processes):
    with processes(workers=4) as port:
        check(run(python, address=f"127.0.0.1:{port}"))


def test_post_accumulate_grad_hook_runs_after_each_backward_that_reaches_the_leaf():
    import gt
    w = gt.tensor([1.0, 2.0]).requires_grad_()
    other = gt.tensor([3.0]).requires_grad_()
    seen = []
    handle = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.numpy().tolist()))
    (w * w).sum().backward()
    assert seen == [[2.0, 4.0]]
    (other * 2).sum().backward()  # does not reach w: no call
    assert seen == [[2.0, 4.0]]
    w.grad = None
    (w * 3).sum().backward()
    assert seen == [[2.0, 4.0], [3.0, 3.0]]
    handle.remove()
    w.grad = None
    (w * 3).sum().backward()
    assert len(seen) == 2
    with pytest.raises(RuntimeError, match="only a leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda p: None)
    with pytest.raises(TypeError):
        w.register_post_accumulate_grad_hook(3)
