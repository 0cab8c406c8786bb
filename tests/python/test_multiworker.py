"""The signal guide's (seed 000) examples on four workers, each checked
against the same program run without a signal scope (one worker, whole
tensors): data parallel, model parallel, pipeline with the backward pass on
other workers, hybrid, distributed reductions, an MLP trained under a
data-parallel signal, and auto-sharding. The suite runs with GT_WORKERS=4
(the embedded default); placement is checked through the dispatcher's
explain log (GT_EXPLAIN=1) in a fresh process.
"""

import re

import numpy as np
import pytest

import gt
from gt import ShardConfig, SignalConfig
from gt.nn import Linear, Module, SGD


def close(got, want, tol=1e-4):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)


def dp_config():
    gt.register_config("data_parallel", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1, 2, 3])))


class MLP(Module):
    def __init__(self, sizes, seed):
        super().__init__()
        self.fc1 = Linear(sizes[0], sizes[1], seed=seed)
        self.fc2 = Linear(sizes[1], sizes[2], seed=seed + 1)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def grads_of(model):
    return [p.grad.numpy() for p in model.parameters()]


# ---- data parallel ------------------------------------------------------------------


def test_data_parallel_forward_backward_matches_one_worker(rng):
    dp_config()
    data = rng.standard_normal((128, 32)).astype(np.float32)
    target = rng.standard_normal((128, 4)).astype(np.float32)

    def run(signal):
        model = MLP((32, 16, 4), seed=3)
        with gt.signal.context(signal) if signal else _nothing():
            x = gt.tensor(data)
            y = gt.tensor(target)
            out = model(x)
            loss = ((out - y) ** 2).mean()
        loss.backward()
        return out.numpy(), loss.item(), grads_of(model)

    out, loss, grads = run("data_parallel")
    out1, loss1, grads1 = run(None)
    close(out, out1)
    close(loss, loss1)
    for g, g1 in zip(grads, grads1):
        close(g, g1)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ---- model parallel ------------------------------------------------------------------


def test_model_parallel_matches_one_worker(rng):
    gt.register_config("model_parallel", SignalConfig(shard=ShardConfig(axis=1, workers=[0, 1])))
    a = rng.standard_normal((24, 64)).astype(np.float32)
    w = rng.standard_normal((64, 32)).astype(np.float32)

    def run(signal):
        x = gt.tensor(a)
        with gt.signal.context(signal) if signal else _nothing():
            weight = gt.tensor(w, requires_grad=True)  # columns split over workers 0 and 1
            hidden = (x @ weight).tanh()
        loss = hidden.sum()
        loss.backward()
        return hidden.numpy(), weight.grad.numpy()

    h, g = run("model_parallel")
    h1, g1 = run(None)
    close(h, h1)
    close(g, g1)


# ---- pipeline: backward on other workers ----------------------------------------------


def pipeline_configs():
    gt.register_config("stage_1_backward", SignalConfig(shard=ShardConfig(axis=0, workers=[2, 3])))
    gt.register_config("stage_2_backward", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))
    gt.register_config("stage_1", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1]),
                                               backward_signal="stage_1_backward"))
    gt.register_config("stage_2", SignalConfig(shard=ShardConfig(axis=0, workers=[2, 3]),
                                               backward_signal="stage_2_backward"))


def test_pipeline_backward_on_other_workers_matches_one_worker(rng):
    pipeline_configs()
    data = rng.standard_normal((16, 8)).astype(np.float32)

    def run(staged):
        layer1, layer2 = Linear(8, 12, seed=5), Linear(12, 3, seed=6)
        with gt.signal.context("stage_1") if staged else _nothing():
            hidden1 = layer1(gt.tensor(data)).relu()
        with gt.signal.context("stage_2") if staged else _nothing():
            output = layer2(hidden1)
        loss = (output * output).mean()
        loss.backward()
        return loss.item(), grads_of(layer1) + grads_of(layer2)

    loss, grads = run(True)
    loss1, grads1 = run(False)
    close(loss, loss1)
    for g, g1 in zip(grads, grads1):
        close(g, g1)
    recorded = {e["signal"]: e["backward_signal"] for e in gt.debug.get_tape() if e["signal"]}
    assert recorded["stage_1"] == "stage_1_backward" and recorded["stage_2"] == "stage_2_backward"


def test_context_backward_argument_overrides_the_config(rng):
    gt.register_config("fwd", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1])))
    gt.register_config("bwd", SignalConfig(shard=ShardConfig(axis=0, workers=[2, 3])))
    data = rng.standard_normal((8, 4)).astype(np.float32)
    w = gt.tensor(rng.standard_normal((4, 2)).astype(np.float32), requires_grad=True)
    with gt.signal.context("fwd", backward="bwd"):
        assert gt.signal.current_backward() == "bwd"
        loss = (gt.tensor(data) @ w).sum()
    loss.backward()
    close(w.grad.numpy(), data.sum(0)[:, None].repeat(2, axis=1))
    entry = [e for e in gt.debug.get_tape() if e["output"] == loss._c.id()][0]
    assert entry["signal"] == "fwd" and entry["backward_signal"] == "bwd"


PIPELINE_PROGRAM = """
import gt
from gt import ShardConfig, SignalConfig
from gt.nn import Linear
gt.register_config("stage_1_backward", SignalConfig(shard=ShardConfig(axis=0, workers=[2, 3])))
gt.register_config("stage_1", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1]),
                                           backward_signal="stage_1_backward"))
layer = Linear(8, 4, seed=1)
with gt.signal.context("stage_1"):
    x = gt.randn(16, 8, seed=2)
    h = layer(x).tanh()
loss = h.sum()
loss.backward()
print(layer.weight.grad.numpy().sum())
gt.sync()
"""


def test_pipeline_gradient_ops_run_on_the_backward_workers(python):
    r = python(PIPELINE_PROGRAM, env={"GT_EXPLAIN": "1", "GT_WORKERS": "4"})
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("gt explain:")]
    forward = [l for l in lines if "[stage_1]" in l]
    backward = [l for l in lines if "[stage_1_backward]" in l]
    assert forward and backward, r.stderr
    for line in forward:  # every result on the forward workers
        assert re.search(r"-> (sharded\(axis \d\) on|replicated on|partial\(sum\) on|whole on) \[?0, 1\]|-> whole on [01];",
                         line), line
    for line in backward:  # every gradient op's result on the backward workers
        assert re.search(r"-> (sharded\(axis \d\) on \[2, 3\]|(replicated|partial\(sum\)) on \[2, 3\]|whole on [23];)",
                         line), line


# ---- hybrid ---------------------------------------------------------------------------


def test_hybrid_data_then_model_parallel_matches_one_worker(rng):
    gt.register_config("layer1_data_parallel", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1, 2, 3])))
    gt.register_config("layer2_model_parallel", SignalConfig(shard=ShardConfig(axis=1, workers=[0, 1])))
    data = rng.standard_normal((32, 16)).astype(np.float32)

    def run(hybrid):
        layer1, layer2 = Linear(16, 8, seed=7), Linear(8, 6, seed=8)
        with gt.signal.context("layer1_data_parallel") if hybrid else _nothing():
            hidden = layer1(gt.tensor(data)).relu()
        with gt.signal.context("layer2_model_parallel") if hybrid else _nothing():
            output = layer2(hidden)
        loss = output.abs().mean()
        loss.backward()
        return output.numpy(), grads_of(layer1) + grads_of(layer2)

    out, grads = run(True)
    out1, grads1 = run(False)
    close(out, out1)
    for g, g1 in zip(grads, grads1):
        close(g, g1)


# ---- reductions and matmul patterns -------------------------------------------------------


def test_distributed_reductions_and_matmul_patterns_match_one_worker(rng):
    dp_config()
    gt.register_config("both_sharded", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1, 2, 3])))
    a = rng.standard_normal((128, 64)).astype(np.float32)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    with gt.signal.context("data_parallel"):
        x = gt.tensor(a)
        total, avg = x.sum(), x.mean()
        col, rowmax, lo = x.sum(0), x.max(1).values, x.min()
        c = x @ gt.tensor(b)
    with gt.signal.context("both_sharded"):
        c2 = gt.tensor(a) @ gt.tensor(b)
    close(total.item(), a.sum(), 1e-3)
    close(avg.item(), a.mean())
    close(col.numpy(), a.sum(0))
    close(rowmax.numpy(), a.max(1))
    close(lo.item(), a.min())
    close(c.numpy(), a @ b, 1e-3)
    close(c2.numpy(), a @ b, 1e-3)
    close(c.t().numpy(), (a @ b).T, 1e-3)  # transpose of a sharded tensor


# ---- an MLP trained under a data-parallel signal ------------------------------------------


@pytest.mark.parametrize("replicated_params", [False, True])
def test_mlp_training_under_data_parallel_matches_unsharded_loss_curve(rng, replicated_params):
    dp_config()
    gt.register_config("params", SignalConfig(replicated=True))
    data = rng.standard_normal((64, 20)).astype(np.float32)
    target = (data[:, :3] * 0.5 + 0.1).astype(np.float32)

    def train(sharded):
        with gt.signal.context("params") if sharded and replicated_params else _nothing():
            model = MLP((20, 32, 3), seed=11)
        opt = SGD(model.parameters(), lr=0.05)
        losses = []
        for _ in range(20):
            with gt.signal.context("data_parallel") if sharded else _nothing():
                pred = model(gt.tensor(data))
                loss = ((pred - gt.tensor(target)) ** 2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        return np.array(losses), [p.numpy() for p in model.parameters()]

    losses, params = train(True)
    losses1, params1 = train(False)
    assert losses1[-1] < losses1[0]  # it learns
    np.testing.assert_allclose(losses, losses1, rtol=0, atol=1e-4)
    for p, p1 in zip(params, params1):
        close(p, p1)


# ---- errors and auto-sharding ------------------------------------------------------------------


def test_unknown_backward_signal_is_named_at_scope_use():
    gt.register_config("fwd_typo", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1]),
                                                backward_signal="bwd_tpyo"))
    with pytest.raises(gt.Error, match=r"signal 'fwd_typo': backward: unknown signal 'bwd_tpyo'"):
        with gt.signal.context("fwd_typo"):
            pass
    with pytest.raises(gt.Error, match=r"signal 'plain': backward: unknown signal 'nowhere'"):
        with gt.signal.context("plain", backward="nowhere"):
            pass
    assert gt.signal.current() is None


AUTO_SHARD_PROGRAM = """
import numpy as np
import gt
a = np.arange(24, dtype=np.float32).reshape(8, 3)
x = gt.tensor(a)        # 8 rows over 4 workers: sharded
y = gt.ones(5, 3)       # 5 rows: replicated
s = (x * 2).sum(0)
print("SUM", s.numpy().tolist(), float(y.sum().item()), float((x @ x.t()).sum().item()))
"""


def test_auto_shard(python):
    r = python(AUTO_SHARD_PROGRAM, env={"GT_AUTO_SHARD": "1", "GT_EXPLAIN": "1", "GT_WORKERS": "4"})
    assert r.returncode == 0, r.stderr
    a = np.arange(24, dtype=np.float32).reshape(8, 3)
    line = [l for l in r.stdout.splitlines() if l.startswith("SUM")][0]
    assert line == f"SUM {(a * 2).sum(0).tolist()} 15.0 {float((a @ a.T).sum())}"
    explain = r.stderr
    assert re.search(r"from_bytes #\d+: -> sharded\(axis 0\) on \[0, 1, 2, 3\] sizes \[2, 2, 2, 2\]", explain), explain
    assert re.search(r"ones #\d+: -> replicated on \[0, 1, 2, 3\]", explain), explain


DP_STEP_PROGRAM = """
import sys
import numpy as np
import gt
from gt import ShardConfig, SignalConfig
from gt.nn import Linear, SGD
gt.register_config("data_parallel", SignalConfig(shard=ShardConfig(axis=0, workers=[0, 1, 2, 3])))
gt.register_config("params", SignalConfig(replicated=True))
with gt.signal.context("params"):
    l1, l2 = Linear(20, 32, seed=1), Linear(32, 3, seed=2)
opt = SGD(l1.parameters() + l2.parameters(), lr=0.05)
data = np.random.default_rng(0).standard_normal((64, 20)).astype(np.float32)
gt.sync()
sys.stderr.write("=== step\\n")
sys.stderr.flush()
with gt.signal.context("data_parallel"):
    loss = ((l2(l1(gt.tensor(data)).relu()) - gt.tensor(data[:, :3])) ** 2).mean()
loss.backward()
opt.step()
print(loss.item())
"""


def test_data_parallel_step_all_reduces_gradients_and_never_gathers(python):
    # Replicated parameters, a batch split four ways: the forward is
    # shard-local, the weight and bias gradients are summed in one bucketed
    # all-reduce (the optimizer's settle), the SGD update (one add_into each) runs on every
    # replica, and no activation is ever gathered.
    r = python(DP_STEP_PROGRAM, env={"GT_EXPLAIN": "1", "GT_WORKERS": "4"})
    assert r.returncode == 0, r.stderr
    step = r.stderr.split("=== step", 1)[1]
    assert "all_gather" not in step, step
    assert len(re.findall(r"all_reduce\(sum\) \[0, 1, 2, 3\]", step)) == 2, step  # the loss; 2 weights and 2 biases
    assert len(re.findall(r"settle #\d+: -> replicated on \[0, 1, 2, 3\]; collectives: all_reduce", step)) == 1, step
    assert len(re.findall(r"add_into #\d+: replicated on \[0, 1, 2, 3\]", step)) == 4, step


def test_complete_example_of_the_signal_guide_matches_one_worker(rng):
    # Seed 000's complete example: forward_pass (backward: backward_pass) and
    # parameter_updates from training_config.yaml, trained a few steps.
    import pathlib
    gt.load_config(pathlib.Path(__file__).parent / "configs" / "training_config.yaml")
    X = rng.standard_normal((64, 784)).astype(np.float32)
    Y = rng.standard_normal((64, 10)).astype(np.float32)

    class Model(Module):
        def __init__(self):
            super().__init__()
            self.layer = Linear(784, 10, seed=4)

        def forward(self, x):
            return self.layer(x)

    def train(signals):
        model = Model()
        optimizer = SGD(model.parameters(), lr=0.01)
        X_train, y_train = gt.tensor(X), gt.tensor(Y)
        losses = []
        for _ in range(5):
            with gt.signal.context("forward_pass") if signals else _nothing():
                if signals:
                    X_train, y_train = gt.signal.tensor(X_train, "forward_pass"), gt.signal.tensor(y_train, "forward_pass")
                pred = model(X_train)
                loss = ((pred - y_train) ** 2).mean()
            loss.backward()
            with gt.signal.context("parameter_updates") if signals else _nothing():
                optimizer.step()
                optimizer.zero_grad()
            losses.append(loss.item())
        return np.array(losses), model.layer.weight.numpy()

    losses, weight = train(True)
    losses1, weight1 = train(False)
    np.testing.assert_allclose(losses, losses1, rtol=0, atol=1e-4)
    close(weight, weight1)
