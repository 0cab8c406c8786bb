"""gt.nn.Module against torch.nn.Module in this process: parameters and buffers
(frozen ones kept), state_dict keys and order, load_state_dict (strict and
not, errors leaving the model as it was), children / named_modules / apply /
train / eval; and the device plumbing: Tensor.device, to(), cpu(), cuda(),
model.to(), and tensors that pickle by value."""

import copy
import pathlib
import pickle
import sys

import numpy as np
import pytest
import torch

import gt

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "gpt"))
from model import build  # noqa: E402


def nested(lib):
    """The same nested model in gt or torch: Sequential, LayerNorm, Embedding, ModuleList, buffers."""
    nn = lib.nn

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(lib.ones(3))
            self.norm = nn.LayerNorm(3)
            self.register_buffer("running", lib.zeros(3))
            self.register_buffer("scratch", lib.zeros(2), persistent=False)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(5, 3)
            self.body = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 3))
            self.heads = nn.ModuleList([Head(), Head()])
            self.out = nn.Linear(3, 2, bias=False)
            self.register_buffer("steps", lib.zeros(1))

    return Net()


def copy_from_torch(ours, theirs):
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})


def test_state_dict_keys_and_order_are_pytorchs():
    ours, theirs = nested(gt), nested(torch)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert "heads.0.scratch" in dict(ours.named_buffers()) and "heads.0.scratch" not in ours.state_dict()
    config = dict(vocab=7, block_size=4, d_model=8, heads=2, layers=2)
    assert list(build(gt)(**config).state_dict()) == list(build(torch)(**config).state_dict())


def test_frozen_parameters_stay_in_parameters_and_state_dict():
    ours, theirs = nested(gt), nested(torch)
    for model in (ours, theirs):
        model.body[0].weight.requires_grad_(False)
        model.heads.requires_grad_(False)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert not ours.body[0].weight.requires_grad and not ours.heads[1].norm.bias.requires_grad
    assert ours.body[2].weight.requires_grad
    # gt's extension: a trainable tensor inside a plain list attribute stays a parameter once frozen.
    ours.extras = [gt.ones(3, requires_grad=True), gt.ones(2)]
    ours.extras[0].requires_grad_(False)
    assert "extras.0" in dict(ours.named_parameters()) and "extras.1" not in dict(ours.named_parameters())
    # A frozen name stays a parameter when a new tensor is assigned to it.
    ours.out.weight = gt.zeros(2, 3)
    assert "out.weight" in dict(ours.named_parameters())


def test_load_state_dict_from_torch_and_values():
    ours, theirs = nested(gt), nested(torch)
    with torch.no_grad():
        theirs.steps.fill_(3)
    result = ours.load_state_dict(theirs.state_dict())  # torch tensors, read through NumPy
    assert result == ([], []) and result.missing_keys == [] and result.unexpected_keys == []
    for name, value in theirs.state_dict().items():
        np.testing.assert_array_equal(ours.state_dict()[name].numpy(), value.numpy(), err_msg=name)


def test_load_state_dict_non_strict_reports_keys_as_torch():
    ours, theirs = nested(gt), nested(torch)
    partial = {k: v for k, v in theirs.state_dict().items() if not k.startswith("body.")}
    partial["extra.weight"] = torch.zeros(1)
    want = theirs.load_state_dict(partial, strict=False)
    got = ours.load_state_dict({k: v.numpy() for k, v in partial.items()}, strict=False)
    assert got.missing_keys == want.missing_keys and got.unexpected_keys == want.unexpected_keys
    assert type(got).__name__ == "IncompatibleKeys" and tuple(got) == (got.missing_keys, got.unexpected_keys)


def snapshot(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def assert_unchanged(model, before):
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[name], err_msg=name)


@pytest.mark.parametrize("break_it, message", [
    (lambda sd: sd.update({"body.0.weight": np.zeros((3, 3), np.float32)}),
     r"size mismatch for body\.0\.weight: copying a param with shape \[3, 3\] from checkpoint, "
     r"the shape in current model is \[4, 3\]"),
    (lambda sd: sd.update({"out.weight": np.zeros((2, 3), np.float64)}),
     r"dtype mismatch for out\.weight: the checkpoint has float64, the model float32"),
    (lambda sd: sd.pop("heads.1.running"), r'Missing key\(s\) in state_dict: "heads\.1\.running"'),
    (lambda sd: sd.update({"nope": np.zeros(1)}), r'Unexpected key\(s\) in state_dict: "nope"'),
])
def test_bad_state_dict_leaves_the_model_as_it_was(break_it, message):
    ours = nested(gt)
    before = snapshot(ours)
    state = {k: np.full(v.shape, 7, v.dtype) for k, v in before.items()}  # every good entry would change it
    break_it(state)
    with pytest.raises(RuntimeError, match=message):
        ours.load_state_dict(state)
    assert_unchanged(ours, before)


def test_children_modules_apply_train_eval_as_torch():
    ours, theirs = nested(gt), nested(torch)
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [type(m).__name__ for m in ours.children()] == [type(m).__name__ for m in theirs.children()]
    seen, tseen = [], []
    ours.apply(lambda m: seen.append(type(m).__name__))
    theirs.apply(lambda m: tseen.append(type(m).__name__))
    assert seen == tseen
    assert ours.eval() is ours and not any(m.training for m in ours.modules())
    assert ours.heads[1].norm.training is False
    ours.train()
    assert all(m.training for m in ours.modules())


def test_add_module_and_get_submodule():
    model = nested(gt)
    model.add_module("extra", gt.nn.Linear(2, 2))
    assert list(model.state_dict())[-2:] == ["extra.weight", "extra.bias"]
    assert model.get_submodule("heads.1.norm") is model.heads[1].norm and model.get_submodule("") is model
    with pytest.raises(AttributeError, match="no sub-module 'nope'"):
        model.get_submodule("heads.nope")
    with pytest.raises(TypeError, match="must be a Module"):
        model.add_module("bad", 3)


def test_module_to_device_and_dtype():
    model = nested(gt)
    assert model.to("cpu") is model and model.cuda() is model and model.cpu() is model
    assert model.to(torch.device("cpu")) is model and model.to(gt.device("gt")) is model
    with pytest.raises(ValueError, match="cannot place a tensor on cuda:1"):
        model.to("cuda:1")
    before = snapshot(model)
    model.to(gt.float64)
    assert all(p.dtype == gt.float64 for p in model.parameters())
    assert model.body[0].weight.requires_grad and model.body[0].weight.is_leaf
    np.testing.assert_array_equal(model.body[0].weight.numpy(), before["body.0.weight"].astype(np.float64))
    with pytest.raises(TypeError, match="floating point"):
        model.to(gt.int64)


def test_tensor_device_and_to():
    t = gt.randn(2, 3)
    assert t.device == gt.device("gt") and str(t.device) == "gt" and t.device.type == "gt"
    assert t.to("cpu") is t and t.cpu() is t and t.cuda() is t and t.to("cuda:0") is t
    assert t.to(torch.device("cpu")) is t and t.to(t.device) is t
    assert t.to("cpu", gt.float64).dtype == gt.float64
    assert t.to(device="cuda", dtype=torch.float64).dtype == gt.float64  # a torch dtype, matched by name
    assert t.to(gt.arange(3)).dtype == gt.int64 and t.to("float64").dtype == gt.float64
    c = t.to("cpu", copy=True)
    assert c is not t and np.array_equal(c.numpy(), t.numpy())
    for bad, message in (("cuda:1", "cannot place a tensor on cuda:1"), ("meta", "cannot move to the device 'meta'"),
                         ("banana", "unknown device 'banana'")):
        with pytest.raises(ValueError, match=message):
            t.to(bad)
    with pytest.raises(TypeError, match="neither a device"):
        t.to(3.5)


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64, gt.int64, gt.bool])
def test_tensors_pickle_by_value(dtype):
    t = (gt.randn(3, 2) * 4).to(dtype)
    back = pickle.loads(pickle.dumps(t))
    assert isinstance(back, gt.Tensor) and back.dtype == dtype and not back.requires_grad
    np.testing.assert_array_equal(back.numpy(), t.numpy())
    p = gt.randn(2, requires_grad=True)
    assert pickle.loads(pickle.dumps(p)).requires_grad
    assert pickle.loads(pickle.dumps(gt.tensor(3.5))).shape == ()
    with pytest.raises(RuntimeError, match="non-leaf"):
        pickle.dumps(p * 2)


def test_deepcopy_of_a_module_copies_values():
    model = nested(gt)
    twin = copy.deepcopy(model)
    assert list(twin.state_dict()) == list(model.state_dict())
    with gt.no_grad():
        twin.out.weight.copy_(0)
    assert np.abs(model.out.weight.numpy()).sum() > 0
