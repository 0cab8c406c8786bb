"""Reductions against NumPy and PyTorch on the same inputs: sum / mean /
max / min over dims, their dtypes, softmax, argmax / argmin, max / min over
one dim with indices."""

import numpy as np
import pytest

import gt
from ops_helpers import g

# ---- reductions ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), (-1, False), ((0, 2), False),
                                         ((0, 2), True), ((), False)])
def test_reductions(rng, name, dim, keepdim):
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    x = g(a)
    np_fn = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[name]
    np_axis = None if dim in (None, ()) else dim
    want = np_fn(a.astype(np.float64), axis=np_axis, keepdims=keepdim)
    got = getattr(x, name)(dim, keepdim)
    if isinstance(got, gt.MinMax):  # max/min over one int dim, as in PyTorch
        np.testing.assert_array_equal(got.indices.numpy(),
                                      (np.argmax if name == "max" else np.argmin)(a, axis=dim) if not keepdim else
                                      np.expand_dims((np.argmax if name == "max" else np.argmin)(a, axis=dim), dim))
        got = got.values
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    # The NumPy spellings.
    got2 = getattr(x, name)(axis=dim, keepdims=keepdim)
    np.testing.assert_allclose(got2.numpy(), want, rtol=1e-5, atol=1e-5)
    got3 = getattr(x, name)(dim=dim, keepdim=keepdim)
    got3 = got3.values if isinstance(got3, gt.MinMax) else got3
    np.testing.assert_allclose(got3.numpy(), want, rtol=1e-5, atol=1e-5)


def test_reduction_dtypes():
    assert gt.tensor([1, 2, 3]).sum().dtype is gt.int64
    assert gt.tensor([1, 2, 3]).sum().item() == 6
    assert gt.tensor([1, 5, 3]).max().item() == 5
    with pytest.raises(gt.Error, match="floating"):
        gt.tensor([1, 2, 3]).mean()
    with pytest.raises(TypeError, match="not both"):
        gt.ones(2).sum(dim=0, axis=0)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax(rng, dim):
    a = rng.standard_normal((3, 4)).astype(np.float64)
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    sm = e / e.sum(axis=dim, keepdims=True)
    np.testing.assert_allclose(g(a).softmax(dim).numpy(), sm, rtol=1e-10)
    np.testing.assert_allclose(g(a).log_softmax(dim).numpy(), np.log(sm), rtol=1e-10)


def test_argmax_argmin_match_numpy(rng):
    a = rng.standard_normal((4, 5, 3)).astype(np.float32)
    x = g(a)
    for dim in (0, 1, -1):
        np.testing.assert_array_equal(x.argmax(dim).numpy(), a.argmax(dim))
        np.testing.assert_array_equal(x.argmin(dim).numpy(), a.argmin(dim))
    assert x.argmax(1, keepdim=True).shape == (4, 1, 3)
    assert x.argmax().item() == a.argmax() and x.argmin().item() == a.argmin()
    assert x.argmax(0).dtype == gt.int64
    # Accuracy, as a classifier computes it.
    labels = g(a[:, :, 0].argmax(1))
    assert (x[:, :, 0].argmax(1) == labels).float().mean().item() == 1.0


def test_max_min_over_one_dim_return_values_and_indices_like_pytorch(rng):
    a = rng.standard_normal((4, 5)).astype(np.float32)
    x = g(a)
    values, indices = x.max(1)
    np.testing.assert_array_equal(values.numpy(), a.max(1))
    np.testing.assert_array_equal(indices.numpy(), a.argmax(1))
    r = x.min(0, keepdim=True)
    assert r.values.shape == (1, 5) and r.indices.shape == (1, 5)
    np.testing.assert_array_equal(r.indices.numpy()[0], a.argmin(0))
    # Every dim, several dims or axis=: the values only (NumPy's amax).
    assert x.max().item() == a.max()
    np.testing.assert_array_equal(x.max(axis=1).numpy(), a.max(1))
    np.testing.assert_array_equal(x.max((0, 1)).numpy(), a.max((0, 1)))
    # The values still carry a gradient.
    w = gt.from_numpy(a, requires_grad=True)
    w.max(1).values.sum().backward()
    want = np.zeros_like(a)
    want[np.arange(4), a.argmax(1)] = 1
    np.testing.assert_array_equal(w.grad.numpy(), want)
