"""nll_loss / cross_entropy with PyTorch's options, the ops a PyTorch user
reaches for (var / std, norm, clamp, eye, randperm, view_as, type_as, ...),
nn.init and advanced indexing, each against PyTorch in this process."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import gt
import gt.nn.functional as F
from gt import nn


def _gt(t, requires_grad=False):
    return gt.tensor(t.detach().numpy().copy(), requires_grad=requires_grad)


def _close(ours, theirs, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(ours.numpy()), theirs.detach().numpy(), rtol=rtol, atol=atol)


# ---- losses ----------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_with_reduction_weight_and_ignore_index(reduction, weighted):
    torch.manual_seed(0)
    logits = torch.randn(7, 5, requires_grad=True)
    target = torch.tensor([0, 4, 2, -100, 1, 2, 3])
    weight = torch.rand(5) + 0.5 if weighted else None
    lp = TF.log_softmax(logits, 1)
    theirs = TF.nll_loss(lp, target, weight=weight, reduction=reduction)
    gl = _gt(logits, requires_grad=True)
    ours = F.nll_loss(F.log_softmax(gl, 1), gt.tensor(target.numpy()), weight=None if weight is None else _gt(weight),
                      reduction=reduction)
    _close(ours, theirs)
    g = torch.rand(theirs.shape)
    theirs.backward(g)
    ours.backward(_gt(g))
    _close(gl.grad, logits.grad)


def test_nll_loss_spatial_targets():
    lp = torch.randn(2, 3, 4, 5).log_softmax(1)
    target = torch.randint(0, 3, (2, 4, 5))
    for reduction in ("mean", "none"):
        _close(F.nll_loss(_gt(lp), gt.tensor(target.numpy()), reduction=reduction),
               TF.nll_loss(lp, target, reduction=reduction))


@pytest.mark.parametrize("options", [
    dict(), dict(reduction="sum"), dict(reduction="none"), dict(label_smoothing=0.1),
    dict(label_smoothing=0.2, reduction="sum"), dict(label_smoothing=0.3, reduction="none"),
    dict(ignore_index=2, label_smoothing=0.1), dict(weight="w", label_smoothing=0.15),
])
def test_cross_entropy_options_match_torch(options):
    torch.manual_seed(1)
    logits = torch.randn(6, 4, requires_grad=True)
    target = torch.tensor([0, 2, 3, 1, 2, 0])
    options = dict(options)
    ours_options = dict(options)
    if options.get("weight") == "w":
        options["weight"] = torch.tensor([0.5, 1.0, 2.0, 1.5])
        ours_options["weight"] = _gt(options["weight"])
    theirs = TF.cross_entropy(logits, target, **options)
    gl = _gt(logits, requires_grad=True)
    ours = F.cross_entropy(gl, gt.tensor(target.numpy()), **ours_options)
    _close(ours, theirs)
    g = torch.rand(theirs.shape)
    theirs.backward(g)
    ours.backward(_gt(g))
    _close(gl.grad, logits.grad)


def test_cross_entropy_with_class_probabilities():
    logits, probs = torch.randn(5, 3), torch.rand(5, 3).softmax(1)
    _close(F.cross_entropy(_gt(logits), _gt(probs), label_smoothing=0.1),
           TF.cross_entropy(logits, probs, label_smoothing=0.1))


def test_loss_argument_errors_as_torchs():
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        F.nll_loss(gt.randn(2, 3), gt.tensor([0, 1]), reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing must be between 0.0 and 1.0"):
        F.cross_entropy(gt.randn(2, 3), gt.tensor([0, 1]), label_smoothing=1.5)
    with pytest.raises(ValueError, match="batch_size"):
        F.nll_loss(gt.randn(2, 3), gt.tensor([0, 1, 2]))


def test_loss_modules():
    logits, target = torch.randn(4, 3), torch.tensor([2, 0, 1, 1])
    _close(nn.NLLLoss(reduction="sum")(_gt(logits), gt.tensor(target.numpy())),
           torch.nn.NLLLoss(reduction="sum")(logits, target))
    _close(nn.CrossEntropyLoss(label_smoothing=0.1)(_gt(logits), gt.tensor(target.numpy())),
           torch.nn.CrossEntropyLoss(label_smoothing=0.1)(logits, target))


# ---- the ops people reach for --------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda m, x: m.var(x), lambda m, x: m.var(x, 1), lambda m, x: m.var(x, (0, 2), keepdim=True),
    lambda m, x: m.var(x, 1, unbiased=False), lambda m, x: m.var(x, 1, correction=0),
    lambda m, x: m.std(x), lambda m, x: m.std(x, 0, keepdim=True), lambda m, x: m.std(x, (1, 2), unbiased=False),
    lambda m, x: m.norm(x), lambda m, x: x.norm(1, 1), lambda m, x: x.norm(float("inf"), 2),
    lambda m, x: x.norm(3, (0, 1)), lambda m, x: m.clamp(x, -0.5, 0.5), lambda m, x: x.clamp(min=0.1),
    lambda m, x: x.clip(max=0.2),
])
def test_statistics_norms_and_clamps_with_gradients(call):
    x = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    gx = _gt(x, requires_grad=True)
    theirs, ours = call(torch, x), call(gt, gx)
    assert tuple(ours.shape) == tuple(theirs.shape)
    _close(ours, theirs, rtol=1e-10, atol=1e-12)
    g = torch.rand(theirs.shape, dtype=torch.float64)
    theirs.backward(g)
    ours.backward(_gt(g))
    _close(gx.grad, x.grad, rtol=1e-10, atol=1e-12)


def test_eye_randperm_view_as_type_as_and_casts():
    np.testing.assert_array_equal(gt.eye(3).numpy(), torch.eye(3).numpy())
    np.testing.assert_array_equal(gt.eye(2, 4, dtype=gt.int64).numpy(), torch.eye(2, 4, dtype=torch.int64).numpy())
    perm = gt.randperm(10)
    assert perm.dtype == gt.int64 and sorted(perm.tolist()) == list(range(10))
    gt.manual_seed(5)
    first = gt.randperm(20).tolist()
    gt.manual_seed(5)
    assert gt.randperm(20).tolist() == first
    x = gt.arange(6)
    assert tuple(x.view_as(gt.zeros(2, 3)).shape) == (2, 3)
    assert x.type_as(gt.zeros(1)).dtype == gt.float32
    assert x.float().dtype == gt.float32 and x.float().long().dtype == gt.int64 and x.int().dtype == gt.int32


def test_argmax_keepdim_and_comparisons_are_bool():
    t = torch.randn(4, 5)
    g = _gt(t)
    np.testing.assert_array_equal(g.argmax(dim=1, keepdim=True).numpy(), t.argmax(dim=1, keepdim=True).numpy())
    np.testing.assert_array_equal(g.argmin(dim=0, keepdim=True).numpy(), t.argmin(dim=0, keepdim=True).numpy())
    for op in ("eq", "ne", "gt", "lt", "ge", "le"):
        ours, theirs = getattr(g, op)(0.1), getattr(t, op)(0.1)
        assert ours.dtype == gt.bool
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    pred = g.argmax(dim=1, keepdim=True)
    target = gt.tensor(t.argmax(1).numpy())
    assert pred.eq(target.view_as(pred)).sum().item() == 4


# ---- nn.init ---------------------------------------------------------------------------------


def test_init_functions_fill_in_place_with_torchs_bounds():
    w = gt.zeros(64, 32, requires_grad=True)
    assert nn.init.kaiming_uniform_(w, a=math.sqrt(5)) is w
    bound = torch.nn.init.calculate_gain("leaky_relu", math.sqrt(5)) * math.sqrt(3 / 32)
    assert 0.9 * bound < np.abs(w.numpy()).max() <= bound
    nn.init.xavier_uniform_(w)
    assert np.abs(w.numpy()).max() <= math.sqrt(6 / 96)
    nn.init.normal_(w, 2.0, 0.01)
    assert abs(w.numpy().mean() - 2.0) < 0.01
    nn.init.zeros_(w)
    assert not w.numpy().any()
    nn.init.ones_(w)
    assert (w.numpy() == 1.0).all()
    nn.init.constant_(w, 3.0)
    assert (w.numpy() == 3.0).all()
    nn.init.uniform_(w, -0.1, 0.1)
    assert np.abs(w.numpy()).max() <= 0.1
    assert nn.init.calculate_gain("relu") == torch.nn.init.calculate_gain("relu")
    assert nn.init.calculate_gain("tanh") == torch.nn.init.calculate_gain("tanh")
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(gt.zeros(3))


# ---- advanced indexing ------------------------------------------------------------------------


@pytest.mark.parametrize("key", [
    "mask", "row_mask", [0, 2], "int_matrix", "int_tensor", (slice(None), [3, 0]), (Ellipsis, [1]),
])
def test_advanced_indexing_reads_with_gradients(key):
    x = torch.randn(4, 5, requires_grad=True)
    if key == "mask":
        key_t = x.detach() > 0
        key_g = gt.tensor(key_t.numpy())
    elif key == "row_mask":
        key_t = torch.tensor([True, False, True, True])
        key_g = key_t.numpy()
    elif key == "int_matrix":
        key_t = torch.tensor([[1, -1], [0, 0]])
        key_g = key_t.numpy()
    elif key == "int_tensor":
        key_t = torch.tensor([3, -4, 1])
        key_g = gt.tensor(key_t.numpy())
    else:
        key_t = key_g = key
    gx = _gt(x, requires_grad=True)
    theirs, ours = x[key_t], gx[key_g]
    assert tuple(ours.shape) == tuple(theirs.shape)
    _close(ours, theirs)
    g = torch.rand(theirs.shape)
    theirs.backward(g)
    ours.backward(_gt(g))
    _close(gx.grad, x.grad)


def test_advanced_indexing_assignment():
    t = torch.randn(4, 5)
    g = _gt(t)
    t[t > 0] = 0
    g[g > 0] = 0
    _close(g, t)
    t[[0, 2]] = torch.arange(5, dtype=torch.float32)
    g[[0, 2]] = gt.arange(5, dtype=gt.float32)
    _close(g, t)
    idx = torch.tensor([1, 3])
    t[:, idx] = 7.5
    g[:, gt.tensor(idx.numpy())] = 7.5
    _close(g, t)
    t[t < -0.5] = torch.tensor(-1.0)
    g[g < -0.5] = gt.tensor(-1.0)
    _close(g, t)


def test_a_repeated_index_is_assigned_once_not_added_to():
    """x[[1, 1]] = 5 sets row 1 to 5 (PyTorch keeps the last write), through a list, negative
    positions naming the same row, and a tensor index; distinct rows are untouched."""
    for key in ([1, 1], [2, -1, 0], [0, 2, 0, 2]):
        t, g = torch.zeros(3, 2), gt.zeros(3, 2)
        t[key] = 5.0
        g[key] = 5.0
        _close(g, t)
    t, g = torch.zeros(3, 2), gt.zeros(3, 2)
    t[torch.tensor([1, 1])] = 7.0
    g[gt.tensor(np.array([1, 1]))] = 7.0
    _close(g, t)
    t, g = torch.zeros(3, 2), gt.zeros(3, 2)
    t[[1, 0, 1]] = torch.arange(6.0).reshape(3, 2)  # the last occurrence's row wins on the CPU
    g[[1, 0, 1]] = gt.tensor(np.arange(6.0, dtype=np.float32).reshape(3, 2))
    _close(g, t)


def test_advanced_index_errors():
    x = gt.randn(3, 4)
    with pytest.raises(IndexError, match="out of bounds"):
        x[[0, 3]]
    with pytest.raises(IndexError, match="does not match"):
        x[gt.tensor([True, False])]
    with pytest.raises(TypeError, match="one advanced index"):
        x[[0, 1], [1, 2]]
