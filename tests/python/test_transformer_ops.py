"""A transformer's building blocks (issue 17), against PyTorch in this same
process (Debian's python3-torch, the LibTorch the workers run): erf and the
exact GELU, where / masked_fill (with -inf, as attention masks use), tril /
triu, and a causal self-attention head built from them with batched matmul,
forward values and every gradient within 1e-5.
"""

import math

import numpy as np
import pytest
import torch

import gt


def both(a, requires_grad=False):
    """The same float64 data as a gt tensor and a torch tensor."""
    return (gt.from_numpy(a, requires_grad=requires_grad),
            torch.from_numpy(a.copy()).requires_grad_(requires_grad))


def close(x, t, tol=1e-5):
    np.testing.assert_allclose(x.numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def test_erf_and_gelu_match_pytorch(rng):
    a = rng.standard_normal((4, 6)) * 2
    x, t = both(a, requires_grad=True)
    close(gt.erf(x), torch.erf(t))
    y, u = gt.nn.functional.gelu(x), torch.nn.functional.gelu(t)
    close(y, u)
    close(gt.nn.GELU()(x), torch.nn.GELU()(t))
    (y * y).sum().backward()
    (u * u).sum().backward()
    close(x.grad, t.grad)
    with pytest.raises(ValueError, match="approximate"):
        gt.nn.functional.gelu(x, approximate="tanh")


def test_where_and_masked_fill_match_pytorch(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    x, t = both(a, requires_grad=True)
    y, u = both(b, requires_grad=True)
    cond = x > 0.2  # gt: a 0/1 mask; torch: bool
    tcond = t > 0.2
    close(gt.where(cond, x, y), torch.where(tcond, t, u))
    close(gt.where(cond, 0.5, x), torch.where(tcond, 0.5, t))
    close(gt.where(cond, x, -1.0), torch.where(tcond, t, -1.0))
    filled, tfilled = x.masked_fill(cond, float("-inf")), t.masked_fill(tcond, float("-inf"))
    assert np.isneginf(filled.numpy()).sum() == int(tcond.sum())
    close(filled, tfilled)
    loss = (gt.where(cond, x * 2, y) * gt.where(cond, 1.0, x)).sum()
    tloss = (torch.where(tcond, t * 2, u) * torch.where(tcond, 1.0, t)).sum()
    loss.backward()
    tloss.backward()
    close(x.grad, t.grad)
    close(y.grad, u.grad)


def test_where_types_and_errors():
    i = gt.tensor([1, 2, 3])
    f = gt.tensor([0.5, 1.5, 2.5], dtype=gt.float64)
    mask = gt.tensor([1.0, 0.0, 1.0])
    assert gt.where(mask, i, f).dtype is gt.float64  # promoted, as torch.where
    assert gt.where(mask, i, 7).dtype is gt.int64     # a scalar takes the tensor's type
    np.testing.assert_array_equal(gt.where(mask, i, 7).numpy(), [1, 7, 3])
    with pytest.raises(gt.Error, match="cannot be broadcast"):
        gt.where(gt.ones(2), gt.ones(3), gt.ones(3))
    with pytest.raises(TypeError, match="at least one"):
        gt.where(mask, 1.0, 2.0)


def test_tril_triu_match_pytorch(rng):
    a = rng.standard_normal((2, 5, 5))
    x, t = both(a, requires_grad=True)
    for k in (-1, 0, 2):
        close(x.tril(k), t.tril(k))
        close(gt.triu(x, k), torch.triu(t, k))
    (x.tril() * x).sum().backward()
    (t.tril() * t).sum().backward()
    close(x.grad, t.grad)
    with pytest.raises(gt.Error, match="at least 2 dimensions"):
        gt.ones(4).tril()


def causal_attention(q, k, v, where, tril, ones, neg_inf):
    """softmax(q k^T / sqrt(d) masked causally) v over (batch, heads, T, d)."""
    T, d = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(d))
    future = 1 - tril(ones(T, T))  # 1 above the diagonal
    return where(future, neg_inf, scores).softmax(-1) @ v


def test_a_causal_attention_head_matches_pytorch(rng):
    shape = (2, 3, 6, 4)  # batch, heads, T, head dim
    qs = [both(rng.standard_normal(shape), requires_grad=True) for _ in range(3)]
    (q, tq), (k, tk), (v, tv) = qs
    out = causal_attention(q, k, v, gt.where, gt.tril, lambda *s: gt.ones(*s, dtype=gt.float64), float("-inf"))
    tout = causal_attention(tq, tk, tv, lambda c, a, b: torch.where(c.bool(), a, b), torch.tril,
                            lambda *s: torch.ones(*s, dtype=torch.float64), float("-inf"))
    close(out, tout)
    # The first position attends only to itself.
    close(out[:, :, 0, :], tv[:, :, 0, :])
    w = rng.standard_normal(shape)
    (out * gt.from_numpy(w)).sum().backward()
    (tout * torch.from_numpy(w)).sum().backward()
    for (x, t) in qs:
        close(x.grad, t.grad)
