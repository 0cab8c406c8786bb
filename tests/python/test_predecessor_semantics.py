"""The predecessor's and DTensor's exact semantics (issue 40, item 7).

- The predecessor's examples/config_sharding.yaml (its signals, keys and
  values: tests/python/configs/predecessor_config_sharding.yaml) loads; its
  `shard: {axis: 0, workers: null, replicated: true}` is a full copy on every
  live worker, as gt's own top-level `replicated: true` is.
- On a 2-D mesh, `placements` has one entry per mesh axis, as DTensor's
  always has: `y.redistribute(mesh, [Replicate(), Replicate()]).placements`
  is `[Replicate(), Replicate()]` and `y.device_mesh` is that mesh.
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gt

HERE = pathlib.Path(__file__).resolve().parent
PREDECESSOR = HERE / "configs" / "predecessor_config_sharding.yaml"


def run(program, **env):
    full = dict(os.environ, GT_WORKERS="4")
    full.pop("GT_CONFIG", None)
    full.update(env)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(program)], env=full, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def test_predecessor_config_file_loads_with_its_meaning():
    S, C = gt.ShardConfig, gt.SignalConfig
    got = gt.load_config(PREDECESSOR)
    assert got == {
        "forward_layer1": C(shard=S(0, [0, 1, 2, 3]), backward_signal="backward_layer1"),
        "backward_layer1": C(shard=S(0, [0, 1, 2, 3])),
        "pipeline_stage_1": C(shard=S(0, [0, 1]), backward_signal="pipeline_stage_1_bwd"),
        "pipeline_stage_1_bwd": C(shard=S(0, [2, 3])),
        "pipeline_stage_2": C(shard=S(0, [2, 3]), backward_signal="pipeline_stage_2_bwd"),
        "pipeline_stage_2_bwd": C(shard=S(0, [0, 1])),
        "replicated_weights": C(replicated=True),  # every live worker: replicas left empty
        "feature_parallel": C(shard=S(1, [0, 1])),
    }
    assert gt.get_config("replicated_weights").shard is None


@pytest.mark.parametrize("text, want", [
    # Named workers hold the copies.
    ("r:\n  shard: {workers: [1, 2], replicated: true}\n", gt.SignalConfig(replicated=True, replicas=[1, 2])),
    # replicated: false is the shard it sits in.
    ("r:\n  shard: {axis: 1, workers: [0, 1], replicated: false}\n",
     gt.SignalConfig(shard=gt.ShardConfig(1, [0, 1]))),
    # Both spellings at once agree.
    ("r:\n  shard: {replicated: true}\n  replicated: true\n", gt.SignalConfig(replicated=True)),
])
def test_replicated_inside_shard(text, want):
    assert gt.load_config_string(text, "r") == {"r": want}


@pytest.mark.parametrize("text, problem", [
    ("r:\n  shard: {axis: 1, workers: null, replicated: true}\n",
     "r.shard.replicated: replicated: true keeps whole copies, so axis 1"),
    ("r:\n  shard: {replicated: yes please}\n", "r.shard.replicated: expected bool"),
    ("r:\n  shard: {axis: 0, replicate: true}\n", "unknown key 'replicate' (known: axis, workers, replicated)"),
])
def test_replicated_inside_shard_misuse_is_named(text, problem):
    with pytest.raises(gt.ConfigError) as e:
        gt.load_config_string(text, "bad")
    assert problem in str(e.value)


PLACE_REPLICATED = """
    import json
    import numpy as np
    import gt

    def live():
        hosts = gt.debug.get_worker_stats()
        return {k: next(s["value"] for s in h["samples"] if s["name"] == "gt_worker_live_tensors")
                for k, h in hosts.items() if h and h["host"] == "worker"}

    x = gt.tensor(np.arange(24, dtype=np.float32).reshape(4, 6))
    before = live()
    y = gt.signal.tensor(x, name="replicated_weights")   # a copy placed per the config
    z = y * 2
    after = live()
    print(json.dumps({"workers": len(after), "gained": sum(after[k] > before[k] for k in after),
                      "z": z.numpy().tolist()}))
"""


def test_predecessor_replicated_scope_copies_to_every_worker():
    res, explain = run(PLACE_REPLICATED, GT_CONFIG=str(PREDECESSOR), GT_EXPLAIN="1")
    assert res["workers"] == 4
    made = [line for line in explain.splitlines() if "[replicated_weights]" in line and "copy_into" in line]
    assert made and " -> replicated on [0, 1, 2, 3]" in made[0], explain[-3000:]
    assert res["gained"] == 4, res  # a copy on each worker
    np.testing.assert_array_equal(np.array(res["z"], np.float32), np.arange(24, dtype=np.float32).reshape(4, 6) * 2)


MESH_PLACEMENTS = """
    import json
    import numpy as np
    import gt
    from gt.distributed import DeviceMesh, Partial, Replicate, Shard, distribute_tensor

    mesh = DeviceMesh([[0, 1], [2, 3]], ("data", "model"))
    R, S0, S1 = Replicate(), Shard(0), Shard(1)
    a = np.arange(8 * 8, dtype=np.float32).reshape(8, 8)  # even cuts (see distributed._layout)
    out = {}
    x = distribute_tensor(gt.from_numpy(a), mesh, [S0, R])
    y = x.redistribute(mesh, [R, R])
    out["issue"] = [repr(y.placements), y.device_mesh == mesh, bool(np.array_equal(y.numpy(), a))]
    for target in ([R, R], [S0, R], [R, S1], [S0, S1], [S1, S0], [S0, S0], [S1, S1]):
        z = x.redistribute(mesh, target)
        out[repr(target)] = [repr(z.placements), z.device_mesh.ndim, bool(np.array_equal(z.numpy(), a))]
    # An op on the mesh tensor: DTensor keeps the mesh, one placement per axis.
    out["op"] = [repr((y * 2).placements), (y * 2).device_mesh.ndim]
    # A 1-D mesh of the same workers keeps one placement.
    line = DeviceMesh([0, 1, 2, 3])
    out["line"] = repr(x.redistribute(line, [R]).placements)
    print(json.dumps(out))
"""


def test_placements_on_a_2d_mesh_have_one_entry_per_mesh_axis():
    res, _ = run(MESH_PLACEMENTS)
    assert res.pop("issue") == ["[Replicate(), Replicate()]", True, True]
    assert res.pop("op") == ["[Replicate(), Replicate()]", 2]
    assert res.pop("line") == "[Replicate()]"
    for target, (placements, ndim, equal) in res.items():
        assert placements == target and ndim == 2 and equal, (target, placements, ndim, equal)
