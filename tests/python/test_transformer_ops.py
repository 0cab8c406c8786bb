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
    cond = x > 0.2  # bool, in both
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
    assert gt.where(mask, i, 7).dtype is gt.int64     # an int scalar keeps an int tensor's type
    np.testing.assert_array_equal(gt.where(mask, i, 7).numpy(), [1, 7, 3])
    # A fractional one promotes it, as PyTorch does (it used to be truncated to 0).
    import torch
    for got, want in ((gt.where(mask, i, 0.5), torch.where(torch.tensor([True, False, True]), torch.tensor([1, 2, 3]), 0.5)),
                      (gt.where(mask, 2.5, i), torch.where(torch.tensor([True, False, True]), 2.5, torch.tensor([1, 2, 3])))):
        assert got.dtype is gt.float32 and want.dtype == torch.float32
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    # masked_fill keeps the tensor's dtype, as PyTorch's.
    filled = i.masked_fill(gt.tensor([True, False, False]), 0.5)
    assert filled.dtype is gt.int64
    np.testing.assert_array_equal(filled.numpy(),
                                  torch.tensor([1, 2, 3]).masked_fill(torch.tensor([True, False, False]), 0.5).numpy())
    flags = gt.tensor([True, False, False]).masked_fill(gt.tensor([False, True, True]), 0.5)
    assert flags.dtype is gt.bool
    np.testing.assert_array_equal(flags.numpy(), [True, True, True])
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


def test_indexing_matches_pytorch_with_gradients(rng):
    a = rng.standard_normal((5, 3))
    x, t = both(a, requires_grad=True)
    rows = np.array([2, 0, 2, 4])
    picked, tpicked = x.index_select(0, gt.tensor(rows)), t.index_select(0, torch.from_numpy(rows))
    close(picked, tpicked)
    cols = np.array([[1, 0, 2], [2, 2, 0], [0, 1, 1], [1, 1, 1], [2, 0, 0]])
    got, tgot = gt.gather(x, 1, gt.tensor(cols)), torch.gather(t, 1, torch.from_numpy(cols))
    close(got, tgot)
    ((picked * picked).sum() + got.exp().sum()).backward()
    ((tpicked * tpicked).sum() + tgot.exp().sum()).backward()
    close(x.grad, t.grad)  # repeated rows and columns accumulate
    with pytest.raises(gt.Error, match="int32 or int64"):
        x.index_select(0, gt.tensor([0.0, 1.0]))
    with pytest.raises(gt.Error):
        x.index_select(0, gt.tensor([7])).numpy()  # out of range: the worker's error


def test_embedding_layer_norm_and_dropout_modules(rng):
    gt.manual_seed(3)
    emb = gt.nn.Embedding(10, 4)
    temb = torch.nn.Embedding(10, 4).double()
    ln, tln = gt.nn.LayerNorm(4), torch.nn.LayerNorm(4).double()
    with torch.no_grad():
        temb.weight.copy_(torch.from_numpy(emb.weight.numpy().astype(np.float64)))
    emb.weight = gt.nn.Parameter(gt.from_numpy(temb.weight.detach().numpy()))
    ln.weight = gt.nn.Parameter(gt.from_numpy(rng.standard_normal(4)))
    ln.bias = gt.nn.Parameter(gt.from_numpy(rng.standard_normal(4)))
    with torch.no_grad():
        tln.weight.copy_(torch.from_numpy(ln.weight.numpy()))
        tln.bias.copy_(torch.from_numpy(ln.bias.numpy()))
    ids = np.array([[1, 7, 7], [0, 9, 1]])
    y = ln(emb(gt.tensor(ids)))
    ty = tln(temb(torch.from_numpy(ids)))
    assert y.shape == (2, 3, 4)
    close(y, ty)
    (y * y * y).sum().backward()
    (ty * ty * ty).sum().backward()
    close(emb.weight.grad, temb.weight.grad)
    close(ln.weight.grad, tln.weight.grad)
    close(ln.bias.grad, tln.bias.grad)
    drop = gt.nn.Dropout(0.5)
    ones = gt.ones(1000)
    kept = drop(ones).numpy()
    assert set(np.unique(kept)) <= {0.0, 2.0} and 300 < (kept == 2.0).sum() < 700
    drop.eval()
    np.testing.assert_array_equal(drop(ones).numpy(), np.ones(1000))


def test_module_names_equal_pytorchs():
    class Block(gt.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = gt.nn.LayerNorm(8)
            self.fc = gt.nn.Linear(8, 8)

    class TBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(8)
            self.fc = torch.nn.Linear(8, 8)

    class Model(gt.nn.Module):
        def __init__(self, block):
            super().__init__()
            self.wte = gt.nn.Embedding(16, 8)
            self.blocks = gt.nn.ModuleList([block() for _ in range(2)])

    class TModel(torch.nn.Module):
        def __init__(self, block):
            super().__init__()
            self.wte = torch.nn.Embedding(16, 8)
            self.blocks = torch.nn.ModuleList([block() for _ in range(2)])

    ours = [(n, tuple(p.shape)) for n, p in Model(Block).named_parameters()]
    theirs = [(n, tuple(p.shape)) for n, p in TModel(TBlock).named_parameters()]
    assert ours == theirs
    assert len(Model(Block).blocks) == 2


def test_cross_entropy_with_ignore_index_matches_pytorch(rng):
    a = rng.standard_normal((6, 5))
    x, t = both(a, requires_grad=True)
    targets = np.array([1, -100, 4, 0, -100, 4])
    loss = gt.nn.functional.cross_entropy(x, gt.tensor(targets))
    tloss = torch.nn.functional.cross_entropy(t, torch.from_numpy(targets))
    assert abs(loss.item() - tloss.item()) < 1e-6
    loss.backward()
    tloss.backward()
    close(x.grad, t.grad)
    same = gt.nn.CrossEntropyLoss(ignore_index=4)(x, gt.tensor(np.array([1, 4, 4, 0, 2, 3])))
    tsame = torch.nn.CrossEntropyLoss(ignore_index=4)(t, torch.tensor([1, 4, 4, 0, 2, 3]))
    assert abs(same.item() - tsame.item()) < 1e-6


def torch_sdpa(q, k, v, attn_mask=None, is_causal=False):
    """PyTorch 2's scaled_dot_product_attention as its documentation defines it (LibTorch 1.13 has none)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        attn_mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:
        scores = scores + attn_mask
    return scores.softmax(-1) @ v


@pytest.mark.parametrize("mask", ["causal", "bool", "float", None])
def test_scaled_dot_product_attention_matches_pytorch(rng, mask):
    q, k, v = (rng.standard_normal((2, 3, 5, 4)).astype(np.float32) for _ in range(3))
    keep = rng.random((5, 5)) > 0.3
    np.fill_diagonal(keep, True)  # every query sees one key at least
    add = rng.standard_normal((5, 5)).astype(np.float32)
    kwargs = {"causal": ({"is_causal": True}, {"is_causal": True}),
              "bool": ({"attn_mask": gt.tensor(keep)}, {"attn_mask": torch.from_numpy(keep)}),
              "float": ({"attn_mask": gt.tensor(add)}, {"attn_mask": torch.from_numpy(add)}),
              None: ({}, {})}[mask]
    gq, gk, gv = (gt.tensor(a, requires_grad=True) for a in (q, k, v))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    ours = gt.nn.functional.scaled_dot_product_attention(gq, gk, gv, **kwargs[0])
    theirs = torch_sdpa(tq, tk, tv, **kwargs[1])
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-5)
    (ours * gt.tensor(v)).sum().backward()
    (theirs * torch.from_numpy(v)).sum().backward()
    for g, t in ((gq, tq), (gk, tk), (gv, tv)):
        np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_comparisons_give_bool_masks_as_pytorch(rng):
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    x, y = gt.tensor(a), gt.tensor(b)
    t, u = torch.from_numpy(a), torch.from_numpy(b)
    for ours, theirs in ((x > y, t > u), (x <= 0.1, t <= 0.1), (x == x, t == t), (x != y, t != u),
                         (~(x > 0), ~(t > 0)), ((x > 0) & (y > 0), (t > 0) & (u > 0)),
                         ((x > 1) | (x < -1), (t > 1) | (t < -1))):
        assert ours.dtype is gt.bool
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    # A mask times floats is float; its sum counts (int64), as in PyTorch.
    assert ((x > 0) * x).dtype is gt.float32
    np.testing.assert_allclose(((x > 0) * x).numpy(), ((t > 0) * t).numpy())
    assert (x > 0).sum().dtype is gt.int64 and (x > 0).sum().item() == int((t > 0).sum())
    np.testing.assert_array_equal(x.masked_fill(x > y, 0.0).numpy(), t.masked_fill(t > u, 0.0).numpy())
    with pytest.raises(TypeError, match="bool tensors"):
        ~x
    with pytest.raises(TypeError, match="between bool tensors"):
        (x > 0) & x
