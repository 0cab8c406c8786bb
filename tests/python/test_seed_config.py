"""The predecessor's signal configs and signal API, unchanged (seed 000's
signal guide, seed 001's README): every config key loads and does what the
guide says, gt.signal.tensor copy-shards a tensor per a signal's config, and
the decorator form of gt.signal.context keeps compile=True.

Placement is checked on the embedded default with four workers (a fresh
interpreter: GT_WORKERS, GT_CONFIG and GT_COMPILE are read at start) through
the sharding stage's explain lines and every worker's live-tensor gauge;
values against NumPy.

What each key does now (SEED_KEYS below is the list the first test walks):
  shard            a mapping: tensors made in the scope are split; null: no shard
  shard.axis       the dimension split (negative counts from the end)
  shard.workers    worker indexes, in shard order; null or left out: every live
                   worker; [] is an error (leave it out for every worker)
  replicated       true: a full copy on every live worker (excludes shard)
  backward         the signal whose config backward() computes the scope's
                   gradients under (pipeline parallelism); null: none
  compile          true: the scope is a compile unit (with GT_COMPILE=1)
"""

import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gt

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

SEED_KEYS = {
    "shard": "split tensors made in the scope (null: no shard)",
    "shard.axis": "the dimension split; negative counts from the end",
    "shard.workers": "worker indexes in shard order; null or left out: every live worker",
    "replicated": "a full copy on every live worker",
    "backward": "the signal whose config the gradients use; null: none",
    "compile": "a compile unit (GT_COMPILE=1)",
}


def run(program, **env):
    full = dict(os.environ, GT_WORKERS="4", **env)
    full["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(gt.__file__)))] +
        [p for p in [os.environ.get("PYTHONPATH")] if p])
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(program)], env=full, cwd=str(REPO),
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


# ---- every key loads and reads as the guide says ---------------------------

ALL_KEYS_YAML = """
forward_layer1:
  shard:
    axis: 0                  # Shard batch dimension
    workers: [0, 1, 2, 3]    # Use workers 0-3
  backward: backward_layer1  # Different config for gradients
backward_layer1:
  shard: {axis: 0, workers: [0, 1, 2, 3]}
model_parallel:
  shard: {axis: 1, workers: [0, 1]}
from_the_end:
  shard: {axis: -1, workers: [1, 2]}
every_worker_null:
  shard: {axis: 0, workers: null}
every_worker_empty_value:
  shard:
    axis: 0
    workers:
every_worker_left_out:
  shard: {axis: 0}
params:
  replicated: true
hot_path:
  shard: {axis: 0, workers: [0, 1, 2, 3]}
  compile: true
explicit_nulls:
  shard: null
  backward: null
  replicated: false
  compile: false
"""


def test_seed_config_every_key_loads_with_its_meaning():
    got = gt.load_config_string(ALL_KEYS_YAML, "seed-keys")
    S, C = gt.ShardConfig, gt.SignalConfig
    want = {
        "forward_layer1": C(shard=S(0, [0, 1, 2, 3]), backward_signal="backward_layer1"),
        "backward_layer1": C(shard=S(0, [0, 1, 2, 3])),
        "model_parallel": C(shard=S(1, [0, 1])),
        "from_the_end": C(shard=S(-1, [1, 2])),
        # workers: null, an empty value, or no workers key: every live worker.
        "every_worker_null": C(shard=S(0, None)),
        "every_worker_empty_value": C(shard=S(0, None)),
        "every_worker_left_out": C(shard=S(0, None)),
        "params": C(replicated=True),
        "hot_path": C(shard=S(0, [0, 1, 2, 3]), compile=True),
        "explicit_nulls": C(),
    }
    assert got == want
    assert gt.configs() == want
    # The YAML spelling `backward` and the Python one `backward_signal` agree.
    assert gt.get_config("forward_layer1").backward == "backward_layer1"
    # Every key of the guide appears above.
    seen = set(re.findall(r"^\s+(shard|replicated|backward|compile):", ALL_KEYS_YAML, re.M))
    seen |= {"shard." + k for k in re.findall(r"\b(axis|workers):", ALL_KEYS_YAML)}
    assert seen == set(SEED_KEYS)


@pytest.mark.parametrize("path", ["config_sharding.yaml", "config_compile.yaml"])
def test_seed_config_example_files_load(path):
    names = gt.load_config(EXAMPLES / path)
    assert names and all(gt.get_config(n) is not None for n in names)


@pytest.mark.parametrize("text, problem", [
    ("s:\n  shard: {axis: 0, workers: []}\n", "s.shard.workers: expected at least one worker"),
    ("s:\n  shard: {axis: 0}\n  replicated: true\n", "shard and replicated: true exclude each other"),
    ("s:\n  shard: {axis: 0, worker: [0]}\n", "unknown key 'worker'"),
])
def test_seed_config_key_misuse_is_named(text, problem):
    with pytest.raises(gt.ConfigError) as e:
        gt.load_config_string(text, "bad")
    assert problem in str(e.value)


README_VIA_ENV = """
    import json, gt
    # Seed 001's README config, unchanged: forward_layer1's backward signal
    # (backward_layer1) is never defined. It loads; the scope that needs it
    # says so when it opens.
    with gt.signal.context("pipeline_stage_1"):
        x = gt.randn(8, 4)
    y = gt.signal.tensor(x, "pipeline_stage_1")
    try:
        with gt.signal.context("forward_layer1"):
            pass
        error = None
    except gt.Error as e:
        error = str(e)
    print(json.dumps({"equal": bool((y.numpy() == x.numpy()).all()), "error": error}))
"""


def test_seed_config_readme_config_loads_from_gt_config():
    res, _ = run(README_VIA_ENV, GT_CONFIG=str(REPO / "tests" / "python" / "configs" / "readme_config.yaml"))
    assert res["equal"]
    assert "signal 'forward_layer1': backward: unknown signal 'backward_layer1'" in res["error"]


# ---- gt.signal.tensor copy-shards per the config ----------------------------

SIGNAL_TENSOR = """
    import json, gt
    gt.load_config_string('''
    from_the_end:
      shard: {axis: -1, workers: [1, 2]}
    no_config_shard:
      shard: null
    ''')

    def live():
        hosts = gt.debug.get_worker_stats()
        return {k: next(s["value"] for s in h["samples"] if s["name"] == "gt_worker_live_tensors")
                for k, h in hosts.items() if h and h["host"] == "worker"}

    res = {"workers": len(live()), "copies": {}}
    for name in ["forward_layer1", "pipeline_stage_1", "model_parallel", "all_workers", "params",
                 "from_the_end", "no_config_shard"]:
        x = gt.randn(8, 6)                         # made outside any scope: whole on one worker
        xv = x.numpy()
        before = live()
        y = gt.signal.tensor(x, name=name)
        yv = y.numpy()
        after = live()
        res["copies"][name] = {"x": xv.tolist(), "y": yv.tolist(), "dtype": str(y.dtype),
                               "shape": list(y.shape), "x_live": x.numpy().tolist(),
                               "gained": sum(after[k] > before[k] for k in after)}
        del y

    # The gradient path: the copy is on the tape, its gradient computed under
    # the backward signal given to signal.tensor.
    w = gt.randn(8, 6, requires_grad=True)
    c = gt.signal.tensor(w, "forward_layer1", backward="pipeline_stage_1_bwd")
    ((c * c).sum()).backward()
    res["w"], res["w_grad"], res["c"] = w.numpy().tolist(), w.grad.numpy().tolist(), c.numpy().tolist()
    print(json.dumps(res))
"""

# signal -> what the sharding stage says the copy is (8 x 6 float32)
PLACED = {
    "forward_layer1": ("sharded(axis 0) on [0, 1, 2, 3] sizes [2, 2, 2, 2]", 4),
    "pipeline_stage_1": ("sharded(axis 0) on [0, 1] sizes [4, 4]", 2),
    "model_parallel": ("sharded(axis 1) on [0, 1] sizes [3, 3]", 2),
    "all_workers": ("sharded(axis 0) on [0, 1, 2, 3] sizes [2, 2, 2, 2]", 4),   # workers: null
    "params": ("replicated on [0, 1, 2, 3]", 4),
    "from_the_end": ("sharded(axis 1) on [1, 2] sizes [3, 3]", 2),               # axis: -1
    "no_config_shard": ("whole on 0", 1),
}


def test_seed_config_signal_tensor_copy_shards_per_config():
    res, explain = run(SIGNAL_TENSOR, GT_CONFIG=str(EXAMPLES / "config_sharding.yaml"), GT_EXPLAIN="1")
    assert res["workers"] == 4
    for name, (placement, workers) in PLACED.items():
        copy = res["copies"][name]
        # The copy: made in the scope, written with x's values, placed per the config.
        lines = [l for l in explain.splitlines() if f"[{name}]" in l and "copy_into" in l]
        assert len(lines) == 1, (name, explain[-3000:])
        assert lines[0].split(" -> ")[1].startswith(placement + ";"), lines[0]
        # Each worker of the placement holds one more live tensor (its shard or replica).
        assert copy["gained"] == workers, (name, copy)
        np.testing.assert_array_equal(np.array(copy["y"], np.float32), np.array(copy["x"], np.float32))
        assert copy["shape"] == [8, 6] and copy["dtype"] == "gt.float32"
        # The original is untouched.
        assert copy["x_live"] == copy["x"]
    # Gradient path: d/dw sum(c*c) = 2w, and c == w; the gradient ops ran under
    # the backward signal given, on its workers [2, 3].
    w = np.array(res["w"], np.float32)
    np.testing.assert_array_equal(np.array(res["c"], np.float32), w)
    np.testing.assert_allclose(np.array(res["w_grad"], np.float32), 2 * w, rtol=1e-6)
    add = [l for l in explain.splitlines() if "add #" in l and "[forward_layer1]" in l]
    assert add and add[-1].split(" -> ")[1].startswith("sharded(axis 0) on [0, 1, 2, 3]"), add


def test_seed_config_signal_tensor_rejects_non_tensor():
    with pytest.raises(TypeError, match="signal.tensor"):
        gt.signal.tensor(np.zeros(3), name="x")
    with pytest.raises(TypeError, match="signal.tensor"):
        gt.signal.tensor(gt.zeros(3), name="")


# ---- the decorator keeps compile=True ---------------------------------------

DECORATED = """
    import json, gt, numpy as np

    @gt.signal.context("by_option", compile=True)
    def layer(x, w):
        return (x @ w).tanh() * 0.5 + 1

    @gt.signal.context("hot_path")                # compile: true in config_compile.yaml
    def head(h, w):
        return (h @ w).relu().sum(1)

    w = gt.randn(8, 8, seed=1) * 0.3
    x = gt.randn(4, 8, seed=2)
    values = []
    for step in range(3):
        h = layer(x, w)
        y = head(h, w)
        values.append(y.tolist())
        del h, y
    hosts = [h for h in gt.debug.get_worker_stats().values() if h and h["host"] in ("client", "dispatcher")]
    print(json.dumps({"values": values, "x": x.numpy().tolist(), "w": w.numpy().tolist(),
                      # the client's compile stage, or the dispatcher's for a client that places tensors
                      "units_run": sum(h["units_run"] for h in hosts),
                      "cache_misses": sum(h["cache_misses"] for h in hosts),
                      "repr": repr(gt.signal.context("by_option", compile=True)),
                      "name": layer.__name__}))
"""


def test_seed_config_decorator_keeps_compile():
    env = dict(GT_CONFIG=str(EXAMPLES / "config_compile.yaml"), GT_HOTPATH_THRESHOLD="1000")
    compiled, _ = run(DECORATED, GT_COMPILE="1", **env)
    eager, _ = run(DECORATED, GT_COMPILE="0", **env)
    unconfigured, _ = run(DECORATED, GT_COMPILE="1", GT_HOTPATH_THRESHOLD="1000")
    # Two decorated functions, three calls each: six replays of two units, each
    # defined once (by the dispatcher's compile stage: this client places
    # tensors). Before the fix the decorator dropped compile=True, and only
    # hot_path's three calls were units.
    assert compiled["units_run"] == 6
    assert compiled["cache_misses"] == 2
    # Without the config only the decorator's compile=True makes units (in the client's stage).
    assert unconfigured["units_run"] == 3 and unconfigured["cache_misses"] == 1
    assert eager["units_run"] == 0
    assert compiled["name"] == "layer"
    assert "compile=True" in compiled["repr"]
    x, w = np.array(compiled["x"], np.float64), np.array(compiled["w"], np.float64)
    want = np.maximum((np.tanh(x @ w) * 0.5 + 1) @ w, 0).sum(1)
    for got_c, got_e, got_u in zip(compiled["values"], eager["values"], unconfigured["values"]):
        np.testing.assert_allclose(got_u, got_e, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got_c, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got_c, got_e, rtol=1e-6, atol=1e-6)
