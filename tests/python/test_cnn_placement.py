"""conv2d and the poolings beyond one worker's eager path: the sharding
stage's batch rule (ShardRule kBatch: a batch cut along dim 0 stays cut,
each worker running its own samples with the weights copied to it, the
weight's gradient a pending sum of the workers' parts), every value equal
to the same program run whole; and the same ops inside a compiled unit,
equal to eager. Fresh interpreters (four embedded workers / GT_COMPILE)."""

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


COMPILED = """
import json
import gt
import gt.nn.functional as F
x = gt.randn(4, 2, 9, 9, seed=1)
w = gt.randn(3, 2, 3, 3, seed=2)
b = gt.randn(3, seed=3)
values = []
for step in range(3):
    with gt.signal.context("cnn_step", compile=True):
        y = F.adaptive_avg_pool2d(F.avg_pool2d(F.max_pool2d(F.conv2d(x, w, b, padding=1).relu(), 2), 2), 1)
        v = y.var((0, 1))
    values.extend(y.reshape(-1).tolist() + v.reshape(-1).tolist())
    del y, v
stats = [h for h in gt.debug.get_worker_stats().values() if h["host"] == "client"]
print("RESULT " + json.dumps({"values": values, "units_run": stats[0]["units_run"] if stats else 0}))
"""


def test_conv_and_pooling_in_a_compile_scope_match_eager(python):
    """A compiled unit interprets conv2d, the poolings and var (no TorchScript symbol): same values."""
    import json
    import numpy as np
    results = {}
    for flag in ("0", "1"):
        r = python(COMPILED, env={"GT_COMPILE": flag, "GT_WORKERS": "1", "GT_HOTPATH_THRESHOLD": "1000"}, timeout=120)
        assert r.returncode == 0, r.stderr[-4000:]
        results[flag] = json.loads([l for l in r.stdout.splitlines() if l.startswith("RESULT ")][0][7:])
    assert results["0"]["units_run"] == 0 and results["1"]["units_run"] == 3
    np.testing.assert_allclose(results["1"]["values"], results["0"]["values"], rtol=1e-6, atol=1e-6)
