"""The Python tensor surface against NumPy on the same inputs: creation,
dtypes, NumPy in/out, repr, conversions, module-level functions and sync.
Arithmetic is in test_tensor_arithmetic.py, reductions in
test_tensor_reductions.py, shape ops and indexing in test_tensor_shape_ops.py,
in-place ops in test_tensor_in_place.py."""

import numpy as np
import pytest

import gt
from ops_helpers import g


# ---- creation and dtypes ------------------------------------------------------


def test_creation_shapes_and_dtypes():
    assert gt.randn(2, 3).shape == (2, 3)
    assert gt.randn((2, 3)).shape == (2, 3)
    assert gt.randn([4]).dtype is gt.float32
    assert gt.rand(5, dtype=gt.float64).dtype is gt.float64
    assert gt.zeros(2, 2, dtype=gt.int32).dtype is gt.int32
    np.testing.assert_array_equal(gt.zeros(2, 3).numpy(), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(gt.ones(3, dtype=gt.int64).numpy(), np.ones(3, np.int64))
    np.testing.assert_array_equal(gt.full((2, 2), 7).numpy(), np.full((2, 2), 7))
    r = gt.rand(1000).numpy()
    assert r.min() >= 0 and r.max() < 1
    assert gt.randn(0, 3).shape == (0, 3)
    assert gt.randn(2, 3).ndim == 2 and gt.randn(2, 3).numel() == 6 and gt.randn(2, 3).size(1) == 3


def test_like_functions():
    x = gt.randn(2, 5, dtype=gt.float64)
    assert gt.zeros_like(x).shape == (2, 5) and gt.zeros_like(x).dtype is gt.float64
    np.testing.assert_array_equal(gt.ones_like(x).numpy(), np.ones((2, 5)))
    assert gt.ones_like(x, dtype=gt.int32).dtype is gt.int32
    assert gt.randn_like(x).shape == (2, 5)


def test_arange():
    np.testing.assert_array_equal(gt.arange(5).numpy(), np.arange(5))
    assert gt.arange(5).dtype is gt.int64
    np.testing.assert_allclose(gt.arange(0, 1, 0.25).numpy(), np.arange(0, 1, 0.25, dtype=np.float32))
    assert gt.arange(0, 1, 0.25).dtype is gt.float32
    np.testing.assert_array_equal(gt.arange(10, 0, -3).numpy(), np.arange(10, 0, -3))
    assert gt.arange(3, dtype=gt.float64).dtype is gt.float64


def test_tensor_from_python_data():
    assert gt.tensor([1, 2, 3]).dtype is gt.int64
    assert gt.tensor([1.0, 2.0]).dtype is gt.float32  # PyTorch's default float
    assert gt.tensor([True, False]).dtype is gt.bool
    assert gt.tensor(3.5).shape == () and gt.tensor(3.5).item() == 3.5
    assert gt.tensor([[1, 2], [3, 4]], dtype=gt.float64).dtype is gt.float64
    np.testing.assert_array_equal(gt.tensor([[1, 2], [3, 4]]).numpy(), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(gt.tensor([True, False]).numpy(), [True, False])
    assert gt.tensor(np.float64(2.0)).dtype is gt.float64
    assert gt.tensor(1, dtype="float32").dtype is gt.float32
    assert gt.tensor([1, 2], dtype=np.int32).dtype is gt.int32


@pytest.mark.parametrize("np_dtype,gt_dtype", [(np.float32, gt.float32), (np.float64, gt.float64),
                                                (np.int32, gt.int32), (np.int64, gt.int64), (np.bool_, gt.bool)])
def test_numpy_round_trip_every_dtype(rng, np_dtype, gt_dtype):
    a = (rng.standard_normal((3, 4)) * 10).astype(np_dtype)
    t = gt.from_numpy(a)
    assert t.dtype is gt_dtype
    assert t.shape == (3, 4)
    back = t.numpy()
    assert back.dtype == np.dtype(np_dtype)
    np.testing.assert_array_equal(back, a)
    np.testing.assert_array_equal(gt.tensor(a).numpy(), a)
    np.testing.assert_array_equal(np.asarray(t), a)


def test_from_numpy_non_contiguous_and_widened(rng):
    a = rng.standard_normal((4, 6))
    np.testing.assert_array_equal(gt.from_numpy(a.T).numpy(), a.T)
    np.testing.assert_array_equal(gt.from_numpy(a[:, ::2]).numpy(), a[:, ::2])
    assert gt.from_numpy(np.arange(3, dtype=np.uint8)).dtype is gt.int64
    assert gt.from_numpy(np.ones(3, dtype=np.float16)).dtype is gt.float32
    with pytest.raises(TypeError, match="complex"):
        gt.from_numpy(np.ones(3, dtype=np.complex64))
    with pytest.raises(TypeError, match="numpy.ndarray"):
        gt.from_numpy([1, 2])


def test_from_numpy_copies_once():
    a = np.arange(4, dtype=np.float32)
    t = gt.from_numpy(a)
    a[0] = 100  # gt holds its own copy
    assert t.numpy()[0] == 0


def test_numpy_returns_a_fresh_array_each_time():
    t = gt.ones(3)
    a = t.numpy()
    a[0] = 5
    assert t.numpy()[0] == 1


def test_item_and_conversions():
    assert gt.tensor([2.5]).item() == 2.5
    assert isinstance(gt.tensor(3).item(), int)
    assert isinstance(gt.tensor(True).item(), bool)
    assert float(gt.tensor(1.5)) == 1.5 and int(gt.tensor(7)) == 7
    assert bool(gt.tensor(1.0)) and not bool(gt.tensor(0.0))
    with pytest.raises(ValueError, match="expected 1"):
        gt.ones(2).item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(gt.ones(2))
    assert gt.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]


def test_repr_shows_values():
    assert repr(gt.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(gt.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(gt.tensor([1.0], dtype=gt.float64)) == "tensor([1.], dtype=gt.float64)"
    assert repr(gt.tensor([1.0], requires_grad=True)) == "tensor([1.], requires_grad=True)"
    assert repr(gt.tensor(2.0)) == "tensor(2.)"
    assert repr(gt.float32) == "gt.float32"


def test_to_dtype():
    x = gt.tensor([1.7, -2.2])
    np.testing.assert_array_equal(x.to(gt.int64).numpy(), [1, -2])
    assert x.double().dtype is gt.float64
    assert gt.tensor([1, 2]).float().dtype is gt.float32
    assert x.to(gt.float32) is x


def test_module_level_functions(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(gt.exp(g(a)).numpy(), np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(gt.matmul(g(a), g(a.T)).numpy(), a @ a.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gt.sum(g(a), 1).numpy(), a.sum(1), rtol=1e-5)


def test_remote_errors_and_sync():
    gt.sync()  # nothing pending
    x = gt.tensor([1.0, 2.0])
    y = x + 1
    gt.sync()
    np.testing.assert_array_equal(y.numpy(), [2, 3])
