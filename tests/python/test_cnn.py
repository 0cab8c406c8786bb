"""The convolutional layers (gt.nn.Conv2d, pooling, BatchNorm2d, Flatten and
their functional forms) against PyTorch in this process: the same inputs and
weights (torch's copied into gt's), outputs and gradients compared; and the
errors PyTorch raises for shapes it refuses."""

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


def _close(ours, theirs, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)


def _copy_params(ours, theirs):
    """torch module's parameters copied into the gt module's (same names)."""
    ours_params = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        with gt.no_grad():
            ours_params[name].copy_(_gt(p))


@pytest.mark.parametrize("options", [
    dict(),
    dict(stride=2, padding=1),
    dict(stride=(2, 1), padding=(0, 2), dilation=(2, 1)),
    dict(padding=1, groups=2),
    dict(padding="same", dilation=2),
    dict(bias=False, padding="valid"),
])
def test_conv2d_module_output_and_gradients_match_torch(options):
    torch.manual_seed(0)
    theirs = torch.nn.Conv2d(4, 6, 3, **options)
    ours = nn.Conv2d(4, 6, 3, **options)
    _copy_params(ours, theirs)
    x = torch.randn(3, 4, 9, 8, requires_grad=True)
    gx = _gt(x, requires_grad=True)
    out_t, out_g = theirs(x), ours(gx)
    assert tuple(out_g.shape) == tuple(out_t.shape)
    _close(out_g, out_t)
    g = torch.randn(out_t.shape)
    out_t.backward(g)
    out_g.backward(_gt(g))
    _close(gx.grad, x.grad)
    _close(ours.weight.grad, theirs.weight.grad, rtol=1e-4, atol=1e-4)
    if theirs.bias is not None:
        _close(ours.bias.grad, theirs.bias.grad, rtol=1e-4, atol=1e-4)


def test_conv2d_initialisation_has_torchs_shapes_and_bounds():
    gt.manual_seed(3)
    ours = nn.Conv2d(8, 16, (3, 5), groups=2)
    assert tuple(ours.weight.shape) == (16, 4, 3, 5) and tuple(ours.bias.shape) == (16,)
    fan_in = 4 * 3 * 5
    w = ours.weight.numpy()
    bound = 1 / math.sqrt(fan_in)  # kaiming_uniform_(a=sqrt(5)): gain sqrt(2 / 6), bound gain * sqrt(3 / fan_in)
    assert np.abs(w).max() <= bound + 1e-7 and np.abs(w).max() > 0.9 * bound
    assert np.abs(ours.bias.numpy()).max() <= bound + 1e-7
    assert ours.weight.requires_grad and ours.weight.is_leaf
    assert [n for n, _ in ours.named_parameters()] == ["weight", "bias"]


def test_functional_conv2d_one_sample_float64():
    x, w = torch.randn(3, 6, 6, dtype=torch.float64), torch.randn(2, 3, 2, 2, dtype=torch.float64)
    out = F.conv2d(_gt(x), _gt(w), stride=2)
    assert out.dtype == gt.float64
    _close(out, TF.conv2d(x, w, stride=2), rtol=1e-12, atol=1e-12)


def test_conv2d_errors_name_what_is_wrong():
    x = gt.randn(2, 3, 5, 5)
    with pytest.raises(gt.Error, match="input channels"):
        F.conv2d(x, gt.randn(4, 2, 3, 3))
    with pytest.raises(gt.Error, match="too small"):
        F.conv2d(x, gt.randn(4, 3, 7, 7))
    with pytest.raises(gt.Error, match="4-D"):
        F.conv2d(gt.randn(5, 5), gt.randn(4, 3, 3, 3))
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)


@pytest.mark.parametrize("make", [
    lambda: (torch.nn.MaxPool2d(2), nn.MaxPool2d(2)),
    lambda: (torch.nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)),
    lambda: (torch.nn.MaxPool2d((2, 3), dilation=2), nn.MaxPool2d((2, 3), dilation=2)),
    lambda: (torch.nn.AvgPool2d(2), nn.AvgPool2d(2)),
    lambda: (torch.nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
             nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)),
    lambda: (torch.nn.AdaptiveAvgPool2d((1, 1)), nn.AdaptiveAvgPool2d((1, 1))),
    lambda: (torch.nn.AdaptiveAvgPool2d((3, None)), nn.AdaptiveAvgPool2d((3, None))),
    lambda: (torch.nn.Flatten(), nn.Flatten()),
])
def test_pooling_and_flatten_modules_match_torch(make):
    theirs, ours = make()
    x = torch.randn(2, 3, 9, 10, requires_grad=True)
    gx = _gt(x, requires_grad=True)
    out_t, out_g = theirs(x), ours(gx)
    assert tuple(out_g.shape) == tuple(out_t.shape)
    _close(out_g, out_t)
    g = torch.randn(out_t.shape)
    out_t.backward(g)
    out_g.backward(_gt(g))
    _close(gx.grad, x.grad)


def test_max_pool2d_ties_route_the_gradient_to_the_first_maximum():
    x = torch.ones(1, 1, 4, 4, requires_grad=True)
    gx = _gt(x, requires_grad=True)
    F.max_pool2d(gx, 2).sum().backward()
    TF.max_pool2d(x, 2).sum().backward()
    _close(gx.grad, x.grad, rtol=0, atol=0)


def test_pool_padding_larger_than_half_the_kernel_is_refused():
    with pytest.raises(gt.Error, match="pad should be at most half"):
        F.max_pool2d(gt.randn(1, 1, 6, 6), 2, padding=2)


def test_batchnorm2d_train_then_eval_matches_torch():
    torch.manual_seed(1)
    theirs, ours = torch.nn.BatchNorm2d(3), nn.BatchNorm2d(3)
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 1.5)
        theirs.bias.uniform_(-0.5, 0.5)
    _copy_params(ours, theirs)
    assert sorted(n for n, _ in ours.named_buffers()) == ["num_batches_tracked", "running_mean", "running_var"]
    for step in range(3):
        x = torch.randn(4, 3, 5, 5) * (step + 1) + step
        xt = x.clone().requires_grad_()
        gx = _gt(x, requires_grad=True)
        out_t, out_g = theirs(xt), ours(gx)
        _close(out_g, out_t, rtol=1e-4, atol=1e-5)
        g = torch.randn(out_t.shape)
        out_t.backward(g)
        out_g.backward(_gt(g))
        _close(gx.grad, xt.grad, rtol=1e-3, atol=1e-4)
    _close(ours.weight.grad, theirs.weight.grad, rtol=1e-4, atol=1e-4)
    _close(ours.bias.grad, theirs.bias.grad, rtol=1e-4, atol=1e-4)
    _close(ours.running_mean, theirs.running_mean)
    _close(ours.running_var, theirs.running_var, rtol=1e-4)
    assert ours.num_batches_tracked.item() == 3 and ours.num_batches_tracked.dtype == gt.int64
    theirs.eval()
    ours.eval()
    x = torch.randn(2, 3, 4, 4)
    _close(ours(_gt(x)), theirs(x), rtol=1e-4, atol=1e-5)
    _close(ours.running_mean, theirs.running_mean)  # eval leaves them as they were


def test_batch_norm_functional_without_running_stats():
    x = torch.randn(6, 2, 3, 3)
    _close(F.batch_norm(_gt(x), None, None, training=True), TF.batch_norm(x, None, None, training=True), rtol=1e-4)


def test_small_cnn_forward_backward_matches_torch():
    torch.manual_seed(2)
    theirs = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                 torch.nn.Conv2d(4, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                 torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 5))
    ours = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 8, 3),
                         nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
    _copy_params(ours, theirs)
    x = torch.randn(4, 1, 10, 10)
    target = torch.tensor([0, 3, 1, 4])
    loss_t = TF.cross_entropy(theirs(x), target)
    loss_g = F.cross_entropy(ours(_gt(x)), gt.tensor(target.numpy()))
    np.testing.assert_allclose(loss_g.item(), loss_t.item(), rtol=1e-5)
    loss_t.backward()
    loss_g.backward()
    ours_grads = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        _close(ours_grads[name].grad, p.grad, rtol=1e-3, atol=1e-5)


def test_max_pool2d_backward_with_positions_kept_and_recomputed():
    """The worker keeps a recorded pooling's window positions for its backward (16 at most): twenty
    poolings before one backward take both paths, kept and found again, with torch's gradient."""
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    gx = _gt(x, requires_grad=True)
    theirs = sum(TF.max_pool2d(x * (i + 1), 2, padding=i % 2).sum() for i in range(20))
    ours = F.max_pool2d(gx * 1, 2).sum()
    for i in range(1, 20):
        ours = ours + F.max_pool2d(gx * (i + 1), 2, padding=i % 2).sum()
    theirs.backward()
    ours.backward()
    _close(gx.grad, x.grad, rtol=1e-5, atol=1e-5)
    with gt.no_grad():  # not recorded: nothing kept
        _close(F.max_pool2d(gx, 3), TF.max_pool2d(x, 3))
