"""gt.distributed.checkpoint (PyTorch's DCP names) against the values it was given: saved by
the workers holding the pieces on 4 workers, loaded in a new process on 2 workers and on a
2 x 2 mesh, bit for bit, each tensor keeping the placement the loading program gave it; on the
embedded default and on a process cluster. Then the bad inputs: a path outside the
dispatcher's checkpoint_root, a worker that cannot write (the error names the worker and the
path), a missing or cut piece, a damaged or missing metadata file, shape and dtype mismatches
(each naming the tensor, the state dict left as it was), and a failed save leaving no metadata.
"""

import json
import os
import pathlib
import textwrap
import zlib

import numpy as np
import pytest

PRELUDE = r"""
import json, os, sys, time, zlib
import numpy as np
import gt
import gt.distributed.checkpoint as dcp
from gt.distributed.checkpoint.state_dict import get_state_dict
from gt.distributed import DeviceMesh, Shard, Replicate, distribute_tensor
from gt import _C

if ADDRESS:
    gt.connect(ADDRESS)
    deadline = time.monotonic() + 30
    while len([h for h in gt.debug.get_worker_stats().values() if h and h["host"] == "worker"]) < WORKERS:
        assert time.monotonic() < deadline, "workers did not register"
        time.sleep(0.1)


def arrays():
    rng = np.random.default_rng(7)
    return {"w": rng.standard_normal((8, 6)).astype(np.float32),
            "b": np.arange(5, dtype=np.int64) * 7 - 3,        # 5 rows over 4 workers: pieces 2, 2, 1
            "s": np.array(2.5),                                 # 0-d float64
            "mask": rng.standard_normal((4, 3)) > 0,
            "deep": {"v": rng.standard_normal((9, 2, 3)), "i": np.arange(6, dtype=np.int32).reshape(2, 3)}}


def flat(tree, prefix=""):
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(flat(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out


def placed(tree, mesh, placements, zero=False):
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out[k] = placed(v, mesh, placements, zero)
            continue
        a = np.zeros_like(v) if zero else np.array(v)  # (np.ascontiguousarray would make a 0-d array 1-d)
        p = placements.get(k, placements["*"])
        out[k] = distribute_tensor(gt.from_numpy(a), mesh, p(a.ndim) if callable(p) else p)
    return out


def layouts(tree):
    return {k: [list(x) if isinstance(x, (list, tuple)) else x for x in _C.layout(v._c)]
            for k, v in flat(tree).items() if isinstance(v, gt.Tensor)}
"""

SAVE_ON_4 = r"""
mesh = DeviceMesh([0, 1, 2, 3])
state = placed(arrays(), mesh, {"*": lambda nd: [Shard(0)] if nd else [Replicate()]})
state["step"] = 12
state["betas"] = (0.9, 0.999)
dcp.save(state, checkpoint_id=CKPT)
meta = json.loads(open(os.path.join(ROOT, CKPT, ".metadata")).read())
print(json.dumps({"pieces": {k: len(v["pieces"]) for k, v in meta["tensors"].items()},
                  "files": [p["file"] for v in meta["tensors"].values() for p in v["pieces"]]}))
"""

LOAD = r"""
state = placed(arrays(), MESH, PLACEMENTS, zero=True)
state["step"] = 0
state["betas"] = (0.0, 0.0)
before = layouts(state)
dcp.load(state, checkpoint_id=CKPT)
expected = flat(arrays())
equal = {k: bool(np.array_equal(v.numpy(), expected[k]) and v.numpy().dtype == expected[k].dtype)
         for k, v in flat(state).items() if k in expected}
print(json.dumps({"equal": equal, "same_layouts": layouts(state) == before, "step": state["step"],
                  "betas": list(state["betas"]), "betas_tuple": isinstance(state["betas"], tuple)}))
"""

ON_TWO = "MESH = DeviceMesh([0, 1])\nPLACEMENTS = {'*': lambda nd: [Shard(0)] if nd else [Replicate()]}\n"
ON_2X2 = ("MESH = DeviceMesh([[0, 1], [2, 3]])\n"
          "PLACEMENTS = {'w': [Shard(0), Shard(1)], 'b': [Replicate(), Shard(0)], 'mask': [Shard(1), Replicate()],\n"
          "              'v': [Shard(2), Shard(0)], 'i': [Shard(1), Shard(0)], 's': [Replicate(), Replicate()],\n"
          "              '*': [Replicate(), Replicate()]}\n")


def run(python, program, root, workers, ckpt="run1/step3", address=None, timeout=240):
    head = f"ADDRESS = {address!r}\nWORKERS = {workers}\nROOT = {str(root)!r}\nCKPT = {ckpt!r}\n"
    env = {"GT_WORKERS": str(workers), "GT_CHECKPOINT_ROOT": str(root)}
    r = python(head + PRELUDE + program, env=env, timeout=timeout)
    return r


def last_json(r):
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def check_loaded(out):
    assert out["equal"] and all(out["equal"].values()), out["equal"]
    assert len(out["equal"]) == 6
    assert out["same_layouts"], "a loaded tensor changed its placement"
    assert out["step"] == 12 and out["betas"] == [0.9, 0.999] and out["betas_tuple"]


def test_saved_on_four_workers_loads_on_two_and_on_a_2x2_mesh(python, tmp_path):
    saved = last_json(run(python, SAVE_ON_4, tmp_path, 4))
    # Shard(0) over 4 workers as torch.chunk: w 4 pieces, b 3 (2, 2, 1), deep.v 3 (3 each), a 0-d tensor one.
    assert saved["pieces"] == {"w": 4, "b": 3, "s": 1, "mask": 4, "deep.v": 3, "deep.i": 2}
    for f in saved["files"]:
        assert (tmp_path / "run1/step3" / f).is_file(), f"the metadata names {f}, which is not there"
    # The workers wrote the pieces as raw bytes: w's first piece is its first two rows, then the
    # trailer ("gtc1" and the CRC-32 of those bytes).
    first_w = (tmp_path / "run1/step3" / saved["files"][0]).read_bytes()
    assert len(first_w) == 2 * 6 * 4 + 8 and first_w[48:52] == b"gtc1"
    assert int.from_bytes(first_w[52:], "little") == zlib.crc32(first_w[:48])
    w = np.frombuffer(first_w[:48], dtype=np.float32).reshape(2, 6)
    rng = np.random.default_rng(7)
    assert np.array_equal(w, rng.standard_normal((8, 6)).astype(np.float32)[:2])
    check_loaded(last_json(run(python, ON_TWO + LOAD, tmp_path, 2)))
    check_loaded(last_json(run(python, ON_2X2 + LOAD, tmp_path, 4)))


def test_on_a_process_cluster(python, processes, tmp_path):
    with processes(workers=4, env={"GT_CHECKPOINT_ROOT": str(tmp_path)}) as port:
        last_json(run(python, SAVE_ON_4, tmp_path, 4, address=f"127.0.0.1:{port}"))
        check_loaded(last_json(run(python, ON_2X2 + LOAD, tmp_path, 4, address=f"127.0.0.1:{port}")))


BAD = r"""
mesh = DeviceMesh([0, 1, 2, 3])
state = placed(arrays(), mesh, {"*": lambda nd: [Shard(0)] if nd else [Replicate()]})
results = {}

def attempt(name, fn):
    try:
        fn()
        results[name] = "no error"
    except Exception as e:
        results[name] = type(e).__name__ + ": " + str(e)

attempt("etc", lambda: dcp.save(state, checkpoint_id="/etc/gt-evil"))
attempt("dotdot", lambda: dcp.save(state, checkpoint_id="../escape"))
open(os.path.join(ROOT, "blocker"), "w").write("a file where a directory would go")
attempt("unwritable", lambda: dcp.save(state, checkpoint_id="blocker/ck"))
results["unwritable_left_metadata"] = os.path.exists(os.path.join(ROOT, "blocker/ck/.metadata"))
attempt("no_metadata", lambda: dcp.load(state, checkpoint_id="nothing-here"))

dcp.save(state, checkpoint_id="good")
meta = json.loads(open(os.path.join(ROOT, "good/.metadata")).read())
target = placed(arrays(), DeviceMesh([0, 1]), {"*": lambda nd: [Shard(0)] if nd else [Replicate()]}, zero=True)
w_file = os.path.join(ROOT, "good", meta["tensors"]["w"]["pieces"][1]["file"])
whole = open(w_file, "rb").read()
flipped = bytearray(whole)
for at in (0, len(whole) // 3, len(whole) - 12):
    flipped[at] ^= 0x5A
open(w_file, "wb").write(bytes(flipped))
attempt("flipped", lambda: dcp.load(target, checkpoint_id="good"))
results["flipped_unchanged"] = all(not v.numpy().any() for v in flat(target).values())
open(w_file, "wb").write(whole[: len(whole) // 2])
attempt("cut", lambda: dcp.load(target, checkpoint_id="good"))
results["cut_unchanged"] = all(not v.numpy().any() for v in flat(target).values())
os.remove(w_file)
attempt("missing", lambda: dcp.load(target, checkpoint_id="good"))
results["missing_unchanged"] = all(not v.numpy().any() for v in flat(target).values())
open(w_file, "wb").write(whole)

wrong = placed(arrays(), DeviceMesh([0, 1]), {"*": [Replicate()]}, zero=True)
wrong["w"] = gt.zeros(8, 5)
wrong["deep"]["i"] = gt.zeros(2, 3, dtype=gt.int64)
wrong["extra"] = gt.zeros(2)
attempt("mismatch", lambda: dcp.load(wrong, checkpoint_id="good"))
results["mismatch_unchanged"] = all(not v.numpy().any() for v in flat(wrong).values())

text = open(os.path.join(ROOT, "good/.metadata"), "rb").read()
open(os.path.join(ROOT, "good/.metadata"), "wb").write(text[: len(text) // 2])
attempt("metadata_cut", lambda: dcp.load(target, checkpoint_id="good"))
flipped = bytearray(text)
for at in (0, len(text) // 3, len(text) - 2):
    flipped[at] ^= 0x5A
open(os.path.join(ROOT, "good/.metadata"), "wb").write(bytes(flipped))
attempt("metadata_flipped", lambda: dcp.load(target, checkpoint_id="good"))
print(json.dumps(results))
"""


def test_bad_inputs_are_clear_errors_and_leave_the_state_as_it_was(python, tmp_path):
    out = last_json(run(python, BAD, tmp_path, 4))
    for name in ("etc", "dotdot"):
        assert "outside the dispatcher's checkpoint_root" in out[name] and str(tmp_path) in out[name], out[name]
    assert not (pathlib.Path("/etc/gt-evil").exists())
    assert "worker" in out["unwritable"] and str(tmp_path / "blocker") in out["unwritable"], out["unwritable"]
    assert out["unwritable_left_metadata"] is False
    assert "no checkpoint metadata at" in out["no_metadata"] and "nothing-here" in out["no_metadata"]
    assert "holds" in out["cut"] and "expected" in out["cut"] and ".bin" in out["cut"], out["cut"]
    assert "worker" in out["cut"]
    assert "cannot read" in out["missing"] and ".bin" in out["missing"], out["missing"]
    assert "is damaged" in out["flipped"] and ".bin" in out["flipped"], out["flipped"]
    assert out["cut_unchanged"] and out["missing_unchanged"] and out["flipped_unchanged"]
    m = out["mismatch"]
    assert "w: the checkpoint's shape is [8, 6], the state dict's [8, 5]" in m, m
    assert "deep.i: the checkpoint holds int32, the state dict int64" in m, m
    assert "extra: not in the checkpoint" in m, m
    assert out["mismatch_unchanged"]
    for name in ("metadata_cut", "metadata_flipped"):
        assert "is not a gt checkpoint's metadata" in out[name], out[name]


MODEL = r"""
from gt.distributed.checkpoint.state_dict import set_state_dict
from gt.distributed import fully_shard

def build():
    return gt.nn.Sequential(gt.nn.Linear(6, 8), gt.nn.LayerNorm(8), gt.nn.ReLU(), gt.nn.Linear(8, 3))

x = np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32)
"""

SAVE_MODEL = r"""
model = fully_shard(build(), DeviceMesh([0, 1, 2, 3]))
model_sd, optim_sd = get_state_dict(model)
dcp.save({"model": model_sd, "step": 7}, checkpoint_id=CKPT)
np.savez(os.path.join(ROOT, "reference.npz"), **{k: v.numpy() for k, v in model_sd.items()})
print(json.dumps({"y": model(gt.from_numpy(x)).numpy().tolist(), "optim": optim_sd}))
"""

LOAD_MODEL = r"""
model = fully_shard(build(), MESH)  # another initialisation, another worker count
model_sd, _ = get_state_dict(model)
before = layouts(model_sd)
state = {"model": model_sd, "step": 0}
dcp.load(state, checkpoint_id=CKPT)
set_state_dict(model, model_state_dict=state["model"], optim_state_dict=None)
reference = np.load(os.path.join(ROOT, "reference.npz"))
sd = model.state_dict()
print(json.dumps({"y": model(gt.from_numpy(x)).numpy().tolist(), "step": state["step"],
                  "same": all(np.array_equal(sd[k].numpy(), reference[k]) for k in reference.files),
                  "keys": sorted(sd) == sorted(reference.files), "same_layouts": layouts(sd) == before}))
"""


def test_a_fully_sharded_model_resumes_on_another_worker_count(python, tmp_path):
    saved = last_json(run(python, MODEL + SAVE_MODEL, tmp_path, 4))
    assert saved["optim"] == {"state": {}, "param_groups": []}  # no optimizer given
    loaded = last_json(run(python, "MESH = DeviceMesh([0, 1])\n" + MODEL + LOAD_MODEL, tmp_path, 2))
    assert loaded["same"] and loaded["keys"] and loaded["same_layouts"] and loaded["step"] == 7
    np.testing.assert_allclose(loaded["y"], saved["y"], rtol=1e-6, atol=1e-6)


OPTIMIZER_LAYER = r"""
# A stand-in with PyTorch's optimizer interface (state_dict in PyTorch's layout), for the layer
# that renames parameters by their model keys; gt's optimizers gain state_dict() separately.
class Momentum:
    def __init__(self, params, lr):
        self.param_groups = [{"params": list(params), "lr": lr, "momentum": 0.9}]
        self.state = {}

    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                buf = self.state.setdefault(p, {"momentum_buffer": gt.zeros_like(p)})["momentum_buffer"]
                buf.mul_(0.9).add_(p.grad)
                with gt.no_grad():
                    p.add_(buf * -group["lr"])

    def state_dict(self):
        index = {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        return {"state": {index[id(p)]: dict(s) for p, s in self.state.items()},
                "param_groups": [{**{k: v for k, v in g.items() if k != "params"},
                                  "params": [index[id(p)] for p in g["params"]]} for g in self.param_groups]}

    def load_state_dict(self, sd):
        params = [p for g in self.param_groups for p in g["params"]]
        self.state = {params[i]: dict(s) for i, s in sd["state"].items()}
        for g, saved in zip(self.param_groups, sd["param_groups"]):
            g.update({k: v for k, v in saved.items() if k != "params"})

model = build()
opt = Momentum(model.parameters(), lr=0.1)
"""

OPT_SAVE = r"""
model_sd, optim_sd = get_state_dict(model, opt)   # no state yet: made by a step with lr 0
first = {k: v.numpy().tolist() for k, v in model.state_dict().items()}
names = sorted(optim_sd["state"])
for k, s in optim_sd["state"].items():
    s["momentum_buffer"].copy_(gt.full(tuple(s["momentum_buffer"].shape), float(len(k))))
dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=CKPT)
print(json.dumps({"names": names, "groups": optim_sd["param_groups"],
                  "unchanged": all(np.array_equal(model.state_dict()[k].numpy(), np.array(v)) for k, v in first.items())}))
"""

OPT_LOAD = r"""
model_sd, optim_sd = get_state_dict(model, opt)
state = {"model": model_sd, "optim": optim_sd}
dcp.load(state, checkpoint_id=CKPT)
from gt.distributed.checkpoint.state_dict import set_state_dict
set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
names = {id(p): n for n, p in model.named_parameters()}
print(json.dumps({n: float(opt.state[p]["momentum_buffer"].numpy().ravel()[0]) for p in opt.state for n in [names[id(p)]]}))
"""


def test_optimizer_state_is_named_by_model_keys_and_loads_in_place(python, tmp_path):
    saved = last_json(run(python, MODEL + OPTIMIZER_LAYER + OPT_SAVE, tmp_path, 4))
    assert saved["names"] == ["0.bias", "0.weight", "1.bias", "1.weight", "3.bias", "3.weight"]
    assert saved["groups"][0]["params"] == ["0.weight", "0.bias", "1.weight", "1.bias", "3.weight", "3.bias"]
    assert saved["unchanged"], "the lr-0 step that made the optimizer's state changed the model"
    loaded = last_json(run(python, MODEL + OPTIMIZER_LAYER + OPT_LOAD, tmp_path, 2))
    assert loaded == {name: float(len(name)) for name in saved["names"]}


ADAM = r"""
from gt.distributed.checkpoint.state_dict import set_state_dict
from gt.distributed import fully_shard

def build():
    model = gt.nn.Sequential(gt.nn.Linear(6, 8), gt.nn.ReLU(), gt.nn.Linear(8, 4))
    for name, value in model.state_dict().items():  # the same start in every process
        value.copy_(gt.from_numpy(np.random.default_rng(zlib.crc32(name.encode())).standard_normal(tuple(value.shape)).astype(np.float32) * 0.3))
    return model

def train(model, opt, steps):
    mesh_rows = len(MESH)
    for step in steps:
        rng = np.random.default_rng(step)
        x = distribute_tensor(gt.from_numpy(rng.standard_normal((8, 6)).astype(np.float32)), DeviceMesh(MESH), [Shard(0)])
        t = distribute_tensor(gt.from_numpy(rng.standard_normal((8, 4)).astype(np.float32)), DeviceMesh(MESH), [Shard(0)])
        opt.zero_grad()
        loss = ((model(x) - t) ** 2).mean()
        loss.backward()
        opt.step()

def weights(model):
    return {k: v.numpy().tolist() for k, v in model.state_dict().items()}
"""

ADAM_SAVE = r"""
model = fully_shard(build(), DeviceMesh(MESH))
opt = gt.optim.Adam(model.parameters(), lr=0.01)
train(model, opt, range(3))
model_sd, optim_sd = get_state_dict(model, opt)
dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=CKPT)
train(model, opt, range(3, 6))   # the uninterrupted run
print(json.dumps(weights(model)))
"""

ADAM_RESUME = r"""
model = fully_shard(build(), DeviceMesh(MESH))
opt = gt.optim.Adam(model.parameters(), lr=0.01)
model_sd, optim_sd = get_state_dict(model, opt)
state = {"model": model_sd, "optim": optim_sd}
dcp.load(state, checkpoint_id=CKPT)
set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
train(model, opt, range(3, 6))
print(json.dumps(weights(model)))
"""


def test_adam_resumes_on_two_workers_as_the_uninterrupted_run(python, tmp_path):
    uninterrupted = last_json(run(python, "MESH = [0, 1, 2, 3]\n" + ADAM + ADAM_SAVE, tmp_path, 4))
    resumed = last_json(run(python, "MESH = [0, 1]\n" + ADAM + ADAM_RESUME, tmp_path, 2))
    assert sorted(resumed) == sorted(uninterrupted)
    for k in uninterrupted:
        np.testing.assert_allclose(resumed[k], uninterrupted[k], rtol=1e-6, atol=1e-6, err_msg=k)


PENDING = r"""
a = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
s = distribute_tensor(gt.from_numpy(a), DeviceMesh([0, 1, 2, 3]), [Shard(1)]).sum(1)  # a pending sum (Partial)
kind = _C.layout(s._c)[2][0][0]
dcp.save({"s": s}, checkpoint_id=CKPT)
t = gt.zeros(4)
dcp.load({"s": t}, checkpoint_id=CKPT)
print(json.dumps({"partial": kind == _C.PARTIAL, "equal": bool(np.array_equal(t.numpy(), s.numpy())),
                  "close": float(np.abs(t.numpy() - a.sum(1)).max())}))
"""


def test_a_pending_sum_is_saved_as_its_value(python, tmp_path):
    out = last_json(run(python, PENDING, tmp_path, 4))
    assert out["partial"] and out["equal"] and out["close"] < 1e-5


def test_a_link_planted_at_the_temporary_name_is_not_followed(python, tmp_path):
    """The root may be shared (the default is under /tmp): a link planted where a worker writes its
    temporary file must not make the worker write through it. The embedded worker's pid names
    the temporary (path + '.tmp' + pid)."""
    victim = tmp_path / "victim.txt"
    victim.write_text("the victim's own text\n")
    root = tmp_path / "root"
    root.mkdir()
    program = textwrap.dedent(f"""
        import os
        import gt
        from gt import _C
        os.symlink({str(victim)!r}, os.path.join({str(root)!r}, "plan.tmp%d" % os.getpid()))
        _C.checkpoint_write_metadata("plan", "written by the plan\\n")
        _C.sync()
        gt.shutdown()
    """)
    r = python(program, env={"GT_WORKERS": "1", "GT_CHECKPOINT_ROOT": str(root)}, timeout=120)
    assert r.returncode == 0, r.stderr[-4000:]
    assert victim.read_text() == "the victim's own text\n"
    assert (root / "plan").read_text() == "written by the plan\n"
