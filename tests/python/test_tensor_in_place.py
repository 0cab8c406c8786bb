"""In-place ops against NumPy and PyTorch on the same inputs: the same tensor
changes, writes go through views, results cast as PyTorch casts them."""

import numpy as np
import pytest

import gt
from ops_helpers import F32, g

# ---- in place -----------------------------------------------------------------


def test_in_place_ops_change_the_same_tensor(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    x = g(a)
    alias = x
    x -= 1
    assert x is alias
    x += g(np.ones((2, 3), np.float32))
    x *= 2
    x /= 4
    np.testing.assert_allclose(alias.numpy(), a * 2 / 4, **F32)
    x.zero_()
    np.testing.assert_array_equal(alias.numpy(), np.zeros((2, 3)))
    x.fill_(3)
    np.testing.assert_array_equal(x.numpy(), np.full((2, 3), 3))
    x.copy_(g(a))
    np.testing.assert_array_equal(x.numpy(), a)
    x.copy_(np.arange(3, dtype=np.float32))  # broadcasts
    np.testing.assert_array_equal(x.numpy(), np.tile(np.arange(3), (2, 1)))
    x.add_(1).mul_(2)
    np.testing.assert_array_equal(x.numpy(), np.tile(np.arange(3) + 1, (2, 1)) * 2)
    with pytest.raises(gt.Error, match="broadcast"):
        x.copy_(gt.zeros(5))


def test_in_place_mul_by_a_tensor_writes_through_views_and_casts_as_pytorch_does(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    f = rng.standard_normal(4).astype(np.float32)
    x = g(a)
    row = x[1]
    row *= g(f)  # one mul_into of the view: the base sees it
    want = a.copy()
    want[1] *= f
    np.testing.assert_allclose(x.numpy(), want, **F32)
    x.mul_(g(f[:1]))  # broadcast
    np.testing.assert_allclose(x.numpy(), want * f[0], **F32)
    n = gt.tensor(np.arange(6, dtype=np.int64).reshape(2, 3))
    n *= gt.tensor([1, 2, 3], dtype=gt.int32)  # another dtype: the product cast back
    assert n.dtype == gt.int64
    np.testing.assert_array_equal(n.numpy(), np.arange(6).reshape(2, 3) * [1, 2, 3])
    with pytest.raises(gt.Error, match="result type float32 can't be cast to the desired output type int64"):
        n *= g(np.full(3, 1.5, np.float32))  # refused, as PyTorch does
    np.testing.assert_array_equal(n.numpy(), np.arange(6).reshape(2, 3) * [1, 2, 3])  # and left alone
    with pytest.raises(gt.Error, match="broadcast"):
        x.mul_(g(np.ones(5, np.float32)))


def test_in_place_add_and_sub_with_alpha_write_through_views_and_cast_as_pytorch_does(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    f = rng.standard_normal(4).astype(np.float32)
    x = g(a)
    want = a.copy()
    x.add_(g(f), alpha=0.5)  # one add_into, the addend broadcast
    want += 0.5 * f
    np.testing.assert_allclose(x.numpy(), want, **F32)
    row = x[2]
    row.sub_(g(f), alpha=2)  # of a view: the base sees it
    want[2] -= 2 * f
    np.testing.assert_allclose(x.numpy(), want, **F32)
    x -= g(f)
    x += g(a)
    want += a - f
    np.testing.assert_allclose(x.numpy(), want, **F32)
    x.add_(3, alpha=2)  # a number: x + 6
    np.testing.assert_allclose(x.numpy(), want + 6, **F32)
    n = gt.tensor(np.arange(6, dtype=np.int64).reshape(2, 3))
    n += gt.tensor([1, 2, 3], dtype=gt.int32)  # another dtype: the sum cast back
    assert n.dtype == gt.int64
    np.testing.assert_array_equal(n.numpy(), np.arange(6).reshape(2, 3) + [1, 2, 3])
    with pytest.raises(gt.Error, match="result type float32 can't be cast to the desired output type int64"):
        n += g(np.full(3, 1.5, np.float32))  # refused, as PyTorch does
    with pytest.raises(gt.Error, match="add_: addend of shape \\[5\\] does not broadcast"):
        x.add_(g(np.ones(5, np.float32)), alpha=2)
    with pytest.raises(TypeError, match="alpha"):
        x.add_(g(f), alpha="2")
    with pytest.raises(TypeError, match="cannot add str"):
        x.add_("a")
    with pytest.raises(gt.Error, match="alpha must be an integer"):
        n.add_(gt.tensor(np.ones(3, np.int64)), alpha=0.5)  # as PyTorch, at the call
    b = gt.tensor(np.array([True, False, False]))
    b += gt.tensor(np.array([True, True, False]))  # a logical or
    np.testing.assert_array_equal(b.numpy(), [True, True, False])
    with pytest.raises(gt.Error, match="bool"):  # a difference of bools is refused, as PyTorch's
        b -= gt.tensor(np.array([True, False, False]))
        b.numpy()
