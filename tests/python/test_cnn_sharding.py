"""The sharding stage's batch rule (ShardRule kBatch) for conv2d and the
poolings: a batch cut along dim 0 stays cut (each worker runs its own
samples, the weights copied to it), the weight's gradient is a pending sum
of the workers' parts, and every value equals the same program run whole
(one worker). Fresh interpreters on four embedded workers."""

import textwrap

PROGRAM = """
import contextlib, json
import numpy as np
import gt
import gt.nn.functional as F
from gt import ShardConfig, SignalConfig

SHARDED = {sharded}
if SHARDED:
    gt.register_config("batch", SignalConfig(shard=ShardConfig(axis=0, workers=[2, 0, 1])))
rng = np.random.default_rng(0)
x_np = rng.standard_normal((5, 3, 8, 8)).astype(np.float32)
with gt.signal.context("batch") if SHARDED else contextlib.nullcontext():
    x = gt.tensor(x_np)
x.requires_grad_(True)
w = gt.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), requires_grad=True)
b = gt.tensor(rng.standard_normal(4).astype(np.float32), requires_grad=True)
y = F.conv2d(x, w, b, padding=1)
p = F.max_pool2d(y, 2)
a = F.avg_pool2d(p, 2)
q = F.adaptive_avg_pool2d(a, 1)
out = {{"y": repr(y.placements), "p": repr(p.placements), "q": repr(q.placements)}}
q.sum().backward()
out["w_grad"] = repr(w.grad.placements)
out["values"] = [t.numpy().tolist() for t in (y, p, a, q, x.grad, w.grad, b.grad)]
print("RESULT " + json.dumps(out))
"""


def _run(python, sharded):
    r = python(textwrap.dedent(PROGRAM.format(sharded=sharded)), env={"GT_WORKERS": "4"}, timeout=120)
    assert r.returncode == 0, f"stdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-4000:]}"
    import json
    line = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")][0]
    return json.loads(line[len("RESULT "):])


def test_batch_cut_stays_cut_and_equals_the_whole_run(python):
    import numpy as np
    cut, whole = _run(python, True), _run(python, False)
    for name in ("y", "p", "q"):
        assert cut[name].startswith("[Shard(dim=0)]"), (name, cut[name])
        assert whole[name] != cut[name]
    assert cut["w_grad"] == "[Partial(sum)]", cut["w_grad"]  # each worker's part, summed when read
    for got, want in zip(cut["values"], whole["values"]):
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-5, atol=1e-5)
