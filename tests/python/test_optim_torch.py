"""gt's Adam and AdamW against torch.optim in this process, to the bit.

The worker updates a parameter in one pass (plugins/torch/fused_kernels.cc,
AdamUpdate) instead of ATen's seven kernels, rounding each step as the
kernel it replaces rounds on this CPU. A tolerance would hide a rounding
that differs (a fused multiply-add where ATen has two roundings, or the
reverse), so the comparison is exact: equal values, NaN where PyTorch has
NaN.
"""

import math

import numpy as np
import pytest
import torch

import gt


def _train(gt_cls, torch_cls, start, grads, **options):
    ours = gt.tensor(start.copy(), requires_grad=True)
    theirs = torch.tensor(start.copy(), requires_grad=True)
    ours_opt, theirs_opt = gt_cls([ours], **options), torch_cls([theirs], **options)
    for g in grads:
        ours_opt.zero_grad()
        theirs_opt.zero_grad()
        (ours * gt.tensor(g)).sum().backward()  # the gradient is g itself
        (theirs * torch.tensor(g)).sum().backward()
        ours_opt.step()
        theirs_opt.step()
    return ours.numpy(), theirs.detach().numpy()


def _assert_same_bits(ours, theirs):
    differ = ~((ours == theirs) | (np.isnan(ours) & np.isnan(theirs)))
    assert not differ.any(), (f"{int(differ.sum())} of {differ.size} elements differ from PyTorch, "
                              f"first at {np.flatnonzero(differ)[:5]}: {ours[differ][:5]} != {theirs[differ][:5]}")


# 67 elements: whole vectors and a tail; 70000: more than one parallel grain.
@pytest.mark.parametrize("size", [5, 67, 70000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_adam_equals_torch_to_the_bit(rng, name, weight_decay, dtype, size):
    start = rng.standard_normal(size).astype(dtype)
    grads = [rng.standard_normal(size).astype(dtype) for _ in range(4)]
    ours, theirs = _train(getattr(gt.optim, name), getattr(torch.optim, name), start, grads, lr=0.05,
                          weight_decay=weight_decay)
    _assert_same_bits(ours, theirs)


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_adam_non_finite_values_as_torch(rng, name):
    # inf and NaN parameters, a huge and a zero gradient; with weight decay
    # 0 an infinite learning rate must not multiply p by 1 - inf * 0.
    start = np.array([math.inf, math.nan, 1.5, -2.0, 0.25, 3.0], dtype=np.float32)
    grads = [np.array([1.0, 1.0, 1e30, 0.0, -1.0, 2.0], dtype=np.float32)]
    for lr, weight_decay in [(0.05, 0.1), (math.inf, 0.0)]:
        ours, theirs = _train(getattr(gt.optim, name), getattr(torch.optim, name), start, grads, lr=lr,
                              weight_decay=weight_decay)
        _assert_same_bits(ours, theirs)
