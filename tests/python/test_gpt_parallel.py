"""The example GPT (examples/gpt/model.py) trained on two workers, data
parallel and Megatron-style tensor parallel, against the same training on
one worker (whole tensors), on the embedded default and on a process
cluster (gt-dispatcher and two gt-worker processes).

Each run is a fresh client process that trains the one-worker reference
first, then the parallel model from the same initial weights on the same
batches, and reports the losses, the final parameters and, for each
phase of each step, every worker's instruction and collective counts
(gt_collectives_total, read from the workers' metrics). The tests assert
the numbers agree and that the work ran where the parallelism puts it:

- data parallel (the batch split in two, parameters replicated): the
  forward and backward run on both workers; the forward's only collectives
  are the loss's two all-reduces (its sum and its count); each parameter's
  gradient, a pending sum, is all-reduced once (when first needed: in the
  backward or at clip_grad_norm_) and nothing is gathered;
- tensor parallel (query/key/value and the first MLP linear split by
  output features, the attention output projection and the second MLP
  linear by input features, so each worker holds half the heads): one
  all-reduce per attention block and one per MLP block in the forward and
  again in the backward (the query, key and value input gradients summed
  as pending sums first), and nothing gathered or broadcast.
"""

import json
import pathlib

import numpy as np
import pytest

from conftest import CLUSTER_PROBES

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "gpt"
LAYERS = 2

PROGRAM = r"""
import json, sys, time
import numpy as np
import gt
from gt import ShardConfig, SignalConfig
sys.path.insert(0, EXAMPLES)
from model import build

if ADDRESS:
    gt.connect(ADDRESS)
GPT = build(gt)
VOCAB, BLOCK, D, HEADS, BATCH, STEPS = 16, 8, 16, 4, 4, 3
rng = np.random.default_rng(7)
batches = [rng.integers(0, VOCAB, (BATCH, BLOCK + 1)) for _ in range(STEPS)]


""" + CLUSTER_PROBES + r"""
wait_for_workers(2)


def train(model, place, record):
    opt = gt.optim.AdamW(model.parameters(), lr=1e-2)
    losses, phases = [], []
    for b in batches:
        idx, targets = place(b[:, :-1]), place(b[:, 1:])
        before = worker_counts() if record else None
        loss = model.loss(idx, targets)
        forward = worker_counts() if record else None
        loss.backward()
        backward = worker_counts() if record else None
        gt.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        if record:
            done = worker_counts()
            phases.append({"forward": delta(forward, before), "backward": delta(backward, forward),
                           "step": delta(done, backward)})
    return losses, phases


def values(model):
    return {n: p.numpy().tolist() for n, p in model.named_parameters()}


gt.manual_seed(0)
reference = GPT(VOCAB, BLOCK, D, HEADS, LAYERS)
initial = {n: p.numpy() for n, p in reference.named_parameters()}
ref_losses, _ = train(reference, lambda a: gt.tensor(a), False)

gt.register_config("replicated", SignalConfig(replicated=True))  # on every worker: both
gt.register_config("batch", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))
gt.register_config("columns", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))  # output features
gt.register_config("rows", SignalConfig(shard=ShardConfig(axis=1, workers=[0, 1])))     # input features
PLAN = {"dp": {}, "tp": {"query.weight": "columns", "key.weight": "columns", "value.weight": "columns",
                         "fc.weight": "columns", "fc.bias": "columns",
                         "proj.weight": "rows", "out.weight": "rows"}}[MODE]


def placed(name, value):
    signal = next((s for suffix, s in PLAN.items() if name.endswith(suffix)), "replicated")
    with gt.signal.context(signal):
        return gt.tensor(value).requires_grad_()


with gt.signal.context("replicated"):  # buffers (the causal mask, the positions) included
    model = GPT(VOCAB, BLOCK, D, HEADS, LAYERS)
modules = dict(model.named_modules())
for name in initial:
    owner, _, attr = name.rpartition(".")
    setattr(modules[owner], attr, placed(name, initial[name]))
batch_signal = "batch" if MODE == "dp" else "replicated"


def place(a):
    with gt.signal.context(batch_signal):
        return gt.tensor(a)


losses, phases = train(model, place, True)
print(json.dumps({"reference": {"losses": ref_losses, "params": values(reference)},
                  "parallel": {"losses": losses, "params": values(model)}, "phases": phases}))
"""


def run(python, mode, address=None, env=None):
    code = f"EXAMPLES = {str(EXAMPLES)!r}\nMODE = {mode!r}\nADDRESS = {address!r}\nLAYERS = {LAYERS}\n" + PROGRAM
    r = python(code, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def assert_same_training(got):
    ref, par = got["reference"], got["parallel"]
    np.testing.assert_allclose(par["losses"], ref["losses"], rtol=1e-4, atol=1e-4)
    assert ref["params"].keys() == par["params"].keys()
    for name in ref["params"]:
        np.testing.assert_allclose(par["params"][name], ref["params"][name], rtol=1e-4, atol=1e-4, err_msg=name)


def two_workers(phase):
    """The two workers that ran the phase (by instructions), and the counts of each."""
    busy = {w: c for w, c in phase.items() if c["instructions"] > 0}
    assert len(busy) == 2, phase
    return list(busy.values())


def assert_data_parallel(phases, parameters):
    # Forward: the loss's two reductions over the split batch. Each of the 31 gradients is a pending
    # sum over the split batch (the position embedding's too: an index_add of one into zeros at
    # positions both workers hold), and all are summed in one bucketed all-reduce when
    # clip_grad_norm_ settles them (as DDP buckets gradients), where each took its own before.
    for step in phases:
        for phase in ("forward", "backward", "step"):
            for counts in two_workers(step[phase]):
                assert counts["all_gather"] == 0 and counts["broadcast"] == 0, (phase, counts)
                assert counts["reduce_scatter"] == 0, (phase, counts)
                assert counts["instructions"] > 50, (phase, counts)
        for forward, backward, done in zip(*(two_workers(step[p]) for p in ("forward", "backward", "step"))):
            assert forward["all_reduce"] == 2, forward
            assert backward["all_reduce"] == 0 and done["all_reduce"] == 1, (backward, done, parameters)


def assert_tensor_parallel(phases, parameters):
    # Forward: one per attention block and one per MLP block (their row-parallel linears' partial
    # sums). Backward: one per attention block (the query, key and value linears' input gradients,
    # pending sums, added before their one all-reduce) and one per MLP block (fc's). The step's are
    # clip_grad_norm_'s sums of squares over the cut gradients.
    for step in phases:
        for phase, all_reduces in (("forward", 2 * LAYERS), ("backward", 2 * LAYERS)):
            for counts in two_workers(step[phase]):
                assert counts["all_reduce"] == all_reduces, (phase, counts)
                assert counts["all_gather"] == 0 and counts["broadcast"] == 0, (phase, counts)
                assert counts["instructions"] > 50, (phase, counts)
        for counts in two_workers(step["step"]):
            assert counts["all_gather"] == 0 and counts["broadcast"] == 0, counts


@pytest.mark.parametrize("mode", ["dp", "tp"])
def test_gpt_trains_on_two_workers_as_on_one_embedded(python, mode):
    got = run(python, mode, env={"GT_WORKERS": "2"})
    assert_same_training(got)
    # 31 parameters: 2 embeddings, 13 per block, the final norm's 2, the head
    assert len(got["reference"]["params"]) == 2 + 13 * LAYERS + 3
    (assert_data_parallel if mode == "dp" else assert_tensor_parallel)(got["phases"], len(got["reference"]["params"]))


@pytest.mark.parametrize("mode", ["dp", "tp"])
def test_gpt_trains_on_two_workers_as_on_one_process_cluster(python, processes, mode):
    with processes(workers=2) as port:
        got = run(python, mode, address=f"127.0.0.1:{port}")
    assert_same_training(got)
    # 31 parameters: 2 embeddings, 13 per block, the final norm's 2, the head
    assert len(got["reference"]["params"]) == 2 + 13 * LAYERS + 3
    (assert_data_parallel if mode == "dp" else assert_tensor_parallel)(got["phases"], len(got["reference"]["params"]))
