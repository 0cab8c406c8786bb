"""Optimizer.state_dict() / load_state_dict(): PyTorch's layout, exact resumption,
and state dicts carried between gt and PyTorch (through NumPy).

A resumed optimizer must take exactly (to the bit) the steps the
uninterrupted one takes, and so must a gt optimizer continuing from a
PyTorch optimizer's state and the reverse (every gt optimizer's step
equals PyTorch's to the bit, see test_optim_groups.py).
"""

import json

import numpy as np
import pytest
import torch

import gt

SHAPES = [(3, 4), (5,)]
CASES = [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ("Adadelta", dict(lr=0.5)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
]
IDS = [name for name, _ in CASES]


def _data(rng, steps):
    starts = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(steps)]
    return starts, grads


def _gt_params(values):
    return [gt.tensor(np.array(v), requires_grad=True) for v in values]


def _torch_params(values):
    return [torch.tensor(np.array(v), requires_grad=True) for v in values]


def _groups(params, lib):
    # Two groups, the second with its own lr, so indices run across groups.
    return [{"params": params[:1]}, {"params": params[1:], "lr": 0.03}]


def _steps(lib, opt, params, grads):
    for g in grads:
        opt.zero_grad()
        terms = [(p * lib.tensor(x)).sum() for p, x in zip(params, g)]
        (terms[0] + terms[1]).backward()
        opt.step()


def _values(params):
    return [p.detach().numpy().copy() if isinstance(p, torch.Tensor) else p.numpy() for p in params]


def _to_numpy(state_dict):
    """A state dict with every tensor (gt or torch) as a NumPy array: what a file would hold."""
    def convert(v):
        if isinstance(v, gt.Tensor):
            return v.numpy()
        if isinstance(v, torch.Tensor):
            return v.detach().numpy().copy()
        return v
    return {"state": {i: {k: convert(v) for k, v in s.items()} for i, s in state_dict["state"].items()},
            "param_groups": [dict(g) for g in state_dict["param_groups"]]}


def _same_bits(ours, theirs):
    for a, b in zip(ours, theirs):
        assert np.array_equal(a, b), f"{a.ravel()[:4]} != {b.ravel()[:4]}"


@pytest.mark.parametrize("through_numpy", [False, True], ids=["tensors", "numpy"])
@pytest.mark.parametrize("name,options", CASES, ids=IDS)
def test_resumed_optimizer_steps_as_the_uninterrupted_one(rng, name, options, through_numpy):
    starts, grads = _data(rng, 6)
    make = getattr(gt.optim, name)
    whole = _gt_params(starts)
    whole_opt = make(_groups(whole, gt), **options)
    _steps(gt, whole_opt, whole, grads)

    first = _gt_params(starts)
    first_opt = make(_groups(first, gt), **options)
    _steps(gt, first_opt, first, grads[:3])
    saved = first_opt.state_dict()
    if through_numpy:
        saved = _to_numpy(saved)
    resumed = _gt_params(_values(first))
    resumed_opt = make(_groups(resumed, gt), **options)
    resumed_opt.load_state_dict(saved)
    _steps(gt, resumed_opt, resumed, grads[3:])
    _same_bits(_values(resumed), _values(whole))


@pytest.mark.parametrize("name,options", CASES, ids=IDS)
def test_state_dict_layout_equals_torch(rng, name, options):
    starts, grads = _data(rng, 2)
    ours_params, theirs_params = _gt_params(starts), _torch_params(starts)
    ours = getattr(gt.optim, name)(_groups(ours_params, gt), **options)
    theirs = getattr(torch.optim, name)(_groups(theirs_params, torch), **options)
    _steps(gt, ours, ours_params, grads)
    _steps(torch, theirs, theirs_params, grads)
    mine, reference = ours.state_dict(), theirs.state_dict()
    assert mine["param_groups"] == reference["param_groups"]  # hyperparameters and [0], [1] indices
    assert sorted(mine["state"]) == sorted(reference["state"]) == [0, 1]
    for index, entry in reference["state"].items():
        assert sorted(mine["state"][index]) == sorted(entry)
        for key, value in entry.items():
            got = mine["state"][index][key]
            if isinstance(value, torch.Tensor):
                assert isinstance(got, gt.Tensor), key
                assert got.shape == tuple(value.shape) and got.dtype.name == str(value.dtype).replace("torch.", "")
                assert np.array_equal(got.numpy(), value.numpy()), key
            else:
                assert type(got) is type(value) and got == value, key


@pytest.mark.parametrize("name,options", CASES, ids=IDS)
def test_torch_state_dict_loads_into_gt_and_back(rng, name, options):
    starts, grads = _data(rng, 6)
    # torch trains 3 steps; gt takes its state (and its parameters) and continues.
    theirs_params = _torch_params(starts)
    theirs = getattr(torch.optim, name)(_groups(theirs_params, torch), **options)
    _steps(torch, theirs, theirs_params, grads[:3])
    ours_params = _gt_params(_values(theirs_params))
    ours = getattr(gt.optim, name)(_groups(ours_params, gt), **options)
    ours.load_state_dict(_to_numpy(theirs.state_dict()))
    _steps(torch, theirs, theirs_params, grads[3:])
    _steps(gt, ours, ours_params, grads[3:])
    _same_bits(_values(ours_params), _values(theirs_params))

    # and gt's state dict, as torch tensors, into a fresh torch optimizer.
    back_params = _torch_params(_values(ours_params))
    back = getattr(torch.optim, name)(_groups(back_params, torch), **options)
    converted = _to_numpy(ours.state_dict())
    for entry in converted["state"].values():
        for key, value in entry.items():
            if isinstance(value, np.ndarray):
                entry[key] = torch.from_numpy(value)
    back.load_state_dict(converted)
    again = _gt_params(_values(ours_params))
    again_opt = getattr(gt.optim, name)(_groups(again, gt), **options)
    again_opt.load_state_dict(ours.state_dict())
    extra = _data(rng, 2)[1]
    _steps(torch, back, back_params, extra)
    _steps(gt, again_opt, again, extra)
    _same_bits(_values(again), _values(back_params))


def test_loaded_hyperparameters_replace_the_groups():
    p = gt.zeros(2, requires_grad=True)
    opt = gt.optim.SGD([p], lr=0.1, momentum=0.5)
    opt.load_state_dict({"state": {}, "param_groups": [dict(opt.state_dict()["param_groups"][0], lr=0.7)]})
    assert opt.param_groups[0]["lr"] == 0.7 and opt.param_groups[0]["params"][0] is p
    # A group saved without newer options (maximize, foreach, ...) keeps this optimizer's.
    opt.load_state_dict({"state": {}, "param_groups": [{"lr": 0.2, "momentum": 0.9, "dampening": 0,
                                                        "weight_decay": 0, "nesterov": False, "params": [0]}]})
    assert opt.param_groups[0]["maximize"] is False and opt.param_groups[0]["momentum"] == 0.9


def test_mismatched_state_dicts_are_clear_errors_and_change_nothing(rng):
    starts, grads = _data(rng, 2)
    params = _gt_params(starts)
    opt = gt.optim.Adam(_groups(params, gt), lr=0.01)
    _steps(gt, opt, params, grads)
    good = opt.state_dict()
    before = {i: {k: (v.numpy() if isinstance(v, gt.Tensor) else v) for k, v in s.items()}
              for i, s in _to_numpy(good)["state"].items()}

    one_group = {"state": {}, "param_groups": [dict(good["param_groups"][0], params=[0, 1])]}
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(one_group)
    wrong_size = _to_numpy(good)
    wrong_size["param_groups"][1]["params"] = [1, 2]
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        opt.load_state_dict(wrong_size)
    wrong_shape = _to_numpy(good)
    wrong_shape["state"][1]["exp_avg"] = np.zeros(4, dtype=np.float32)
    with pytest.raises(ValueError, match=r"state\[1\]\['exp_avg'\] has shape \(4,\), but its parameter has shape "
                                         r"\(5,\)"):
        opt.load_state_dict(wrong_shape)
    stray = _to_numpy(good)
    stray["state"][7] = stray["state"][0]
    with pytest.raises(ValueError, match="state for parameter 7"):
        opt.load_state_dict(stray)
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        opt.load_state_dict({"param_groups": []})
    after = opt.state_dict()
    for i, entry in before.items():
        for key, value in entry.items():
            got = after["state"][i][key]
            assert np.array_equal(got.numpy() if isinstance(got, gt.Tensor) else got, value)
    assert [g["lr"] for g in opt.param_groups] == [0.01, 0.03]


def test_step_is_kept_as_torch_keeps_it():
    for name, tensor_step in (("Adam", True), ("AdamW", True), ("Adagrad", True), ("Adadelta", False),
                              ("RMSprop", False)):
        p = gt.ones(3, requires_grad=True)
        opt = getattr(gt.optim, name)([p])
        for _ in range(2):
            (p * 2.0).sum().backward()
            opt.step()
        step = opt.state_dict()["state"][0]["step"]
        if tensor_step:
            assert isinstance(step, gt.Tensor) and step.shape == () and step.dtype == gt.float32
            assert step.item() == 2.0
        else:
            assert type(step) is int and step == 2


SHARDED_PROGRAM = r"""
import json
import numpy as np
import gt
from gt.distributed import DeviceMesh, Shard, distribute_tensor, fully_shard

mesh = DeviceMesh([0, 1, 2, 3], ("fsdp",))
rng = np.random.default_rng(3)
W, B = rng.standard_normal((8, 6)).astype(np.float32), rng.standard_normal(8).astype(np.float32)
batches = [rng.standard_normal((4, 6)).astype(np.float32) for _ in range(6)]


def model(weight, bias):
    m = gt.nn.Linear(6, 8)
    m.load_state_dict({"weight": weight, "bias": bias})
    return fully_shard(m, mesh)


def train(m, opt, xs):
    for x in xs:
        loss = (m(distribute_tensor(gt.tensor(x), mesh, [Shard(0)])) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()


def numpy_state(sd):
    return {"state": {i: {k: (v.numpy() if isinstance(v, gt.Tensor) else v) for k, v in s.items()}
                      for i, s in sd["state"].items()}, "param_groups": sd["param_groups"]}


whole = model(W, B)
whole_opt = gt.optim.Adam(whole.parameters(), lr=0.01, amsgrad=True)
train(whole, whole_opt, batches)

first = model(W, B)
first_opt = gt.optim.Adam(first.parameters(), lr=0.01, amsgrad=True)
train(first, first_opt, batches[:3])
saved = first_opt.state_dict()
saved_layouts = [repr(saved["state"][i]["exp_avg"].placements) for i in (0, 1)]
resumed = model(first.weight.numpy(), first.bias.numpy())
resumed_opt = gt.optim.Adam(resumed.parameters(), lr=0.01, amsgrad=True)
resumed_opt.load_state_dict(numpy_state(saved))
loaded_layouts = [repr(resumed_opt.state[p]["max_exp_avg_sq"].placements) for p in resumed.parameters()]
train(resumed, resumed_opt, batches[3:])
print(json.dumps({"saved_layouts": saved_layouts, "loaded_layouts": loaded_layouts,
                  "same": [bool(np.array_equal(a.numpy(), b.numpy()))
                           for a, b in zip(resumed.parameters(), whole.parameters())]}))
"""


def test_sharded_optimizer_state_round_trips_through_numpy(python):
    """FSDP on four workers: the state stays split like its parameter, also when loaded from
    NumPy arrays, and the resumed steps equal the uninterrupted ones to the bit."""
    r = python(SHARDED_PROGRAM, env={"GT_WORKERS": "4"}, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["saved_layouts"] == got["loaded_layouts"] == ["[Shard(dim=0)]"] * 2, got
    assert got["same"] == [True, True], got
