"""PyTorch / NumPy conventions where users expect them (issue 16, item 8):
dim= and axis=, split's argument names, dtype equality with NumPy, NumPy
functions on gt tensors, gt.nn's functions, max / min's PyTorch forms. Each
case runs the same inputs through gt and in-process PyTorch or NumPy."""

import numpy as np
import pytest
import torch

import gt

F32 = dict(rtol=1e-5, atol=1e-6)


@pytest.fixture
def x(rng):
    return rng.standard_normal((3, 4, 5)).astype(np.float32)


def close(gt_tensor, expected):
    assert isinstance(gt_tensor, gt.Tensor), type(gt_tensor)
    expected = expected.numpy() if isinstance(expected, torch.Tensor) else np.asarray(expected)
    assert gt_tensor.shape == expected.shape
    np.testing.assert_allclose(gt_tensor.numpy(), expected, **F32)


# ---- dim= and axis= -------------------------------------------------------------


@pytest.mark.parametrize("op", ["sum", "mean"])
@pytest.mark.parametrize("d", [0, -1, (0, 2)])
def test_reductions_take_dim_or_axis(x, op, d):
    t, ref = gt.tensor(x), torch.tensor(x)
    close(getattr(t, op)(dim=d), getattr(ref, op)(dim=d))
    close(getattr(t, op)(axis=d), getattr(np, op)(x, axis=d))
    close(getattr(t, op)(axis=d, keepdims=True), getattr(np, op)(x, axis=d, keepdims=True))
    close(getattr(t, op)(d, keepdim=True), getattr(ref, op)(d, keepdim=True))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reductions_take_dim_or_axis(x, op):
    t, ref = gt.tensor(x), torch.tensor(x)
    for d in (0, 1, -1):
        close(getattr(t, op)(dim=d), getattr(ref, op)(dim=d))
        close(getattr(t, op)(axis=d), getattr(np, op)(x, axis=d))
        close(getattr(t, op)(d, keepdim=True), getattr(ref, op)(d, keepdim=True))
        close(getattr(t, op)(axis=d, keepdims=True), getattr(np, op)(x, axis=d, keepdims=True))
    close(getattr(t, op)(), getattr(ref, op)())


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_takes_dim_or_axis(x, op):
    t, ref = gt.tensor(x), torch.tensor(x)
    for d in (0, 1, -1):
        close(getattr(t, op)(dim=d), getattr(ref, op)(dim=d))
        close(getattr(t, op)(axis=d), getattr(ref, op)(d))
        close(getattr(gt.nn.functional, op)(t, axis=d), getattr(torch.nn.functional, op)(ref, dim=d))
        close(getattr(gt, op)(t, d), getattr(torch, op)(ref, d))
    close(getattr(t, op)(), getattr(ref, op)(-1))


def test_dim_and_axis_together_is_an_error(x):
    t = gt.tensor(x)
    calls = [lambda: t.sum(dim=0, axis=0), lambda: t.mean(dim=0, axis=1), lambda: t.max(dim=0, axis=0),
             lambda: t.min(dim=0, axis=0), lambda: t.argmax(dim=0, axis=0), lambda: t.argmin(dim=0, axis=0),
             lambda: t.softmax(dim=0, axis=0), lambda: t.log_softmax(dim=0, axis=0),
             lambda: gt.cat([t, t], dim=0, axis=0), lambda: gt.stack([t, t], dim=0, axis=0),
             lambda: t.split(1, dim=0, axis=0)]
    for call in calls:
        with pytest.raises(TypeError, match="dim or axis"):
            call()


def test_cat_and_stack_take_dim_or_axis(x, rng):
    y = rng.standard_normal((3, 4, 5)).astype(np.float32)
    a, b = gt.tensor(x), gt.tensor(y)
    ta, tb = torch.tensor(x), torch.tensor(y)
    close(gt.cat([a, b]), torch.cat([ta, tb]))
    for d in (0, 1, -1):
        close(gt.cat([a, b], d), torch.cat([ta, tb], d))
        close(gt.cat([a, b], dim=d), torch.cat([ta, tb], dim=d))
        close(gt.cat([a, b], axis=d), np.concatenate([x, y], axis=d))
        close(gt.stack([a, b], dim=d), torch.stack([ta, tb], dim=d))
        close(gt.stack([a, b], axis=d), np.stack([x, y], axis=d))
    close(gt.stack((a, b)), np.stack([x, y]))


def test_split_argument_names(x):
    t, ref = gt.tensor(x), torch.tensor(x)

    def same(pieces, expected):
        assert isinstance(pieces, tuple) and len(pieces) == len(expected)
        for p, e in zip(pieces, expected):
            close(p, e)

    same(t.split(2), ref.split(2))
    same(t.split(2, 1), ref.split(2, 1))
    same(t.split(split_size=2, dim=2), ref.split(split_size=2, dim=2))
    same(t.split(split_size_or_sections=[1, 3], dim=1), ref.split([1, 3], dim=1))
    same(t.split([2, 3], axis=-1), np.split(x, [2], axis=-1))
    same(t.split(4, axis=1), ref.split(4, 1))
    same(gt.split(t, 2, dim=1), torch.split(ref, 2, dim=1))
    with pytest.raises(TypeError, match="exactly one"):
        t.split()
    with pytest.raises(TypeError, match="exactly one"):
        t.split(2, split_size=2)


# ---- max / min: PyTorch's forms -------------------------------------------------


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_pytorch_forms(x, op):
    t, ref = gt.tensor(x), torch.tensor(x)
    close(getattr(t, op)(), getattr(ref, op)())
    close(getattr(gt, op)(t), getattr(torch, op)(ref))
    for args, kwargs in [((1,), {}), ((-1,), {}), ((1,), {"keepdim": True}), ((), {"dim": 0}),
                         ((), {"dim": 2, "keepdim": True}), ((0, True), {})]:
        got, want = getattr(t, op)(*args, **kwargs), getattr(ref, op)(*args, **kwargs)
        assert isinstance(got, gt.MinMax) and isinstance(got, tuple)
        close(got.values, want.values)
        close(got.indices, want.indices)
        values, indices = got  # unpacks as PyTorch's pair does
        close(values, want[0])
        close(indices, want[1])
        assert got.indices.dtype == gt.int64
    # NumPy's axis= gives the values only, as np.max does.
    close(getattr(t, op)(axis=1), getattr(np, op)(x, axis=1))
    close(getattr(t, op)(axis=(0, 2), keepdims=True), getattr(np, op)(x, axis=(0, 2), keepdims=True))


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_elementwise_as_pytorch(op, rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    a[1, :] = b  # ties
    a[0, 0], b[2] = np.nan, np.nan  # NaN wins either way, as in PyTorch
    want = getattr(torch, op)(torch.tensor(a), torch.tensor(b))
    close(getattr(gt.tensor(a), op)(gt.tensor(b)), want)
    close(getattr(gt, op)(gt.tensor(a), gt.tensor(b)), want)
    close(getattr(gt.tensor(a), op[:3])(gt.tensor(b)), want)  # t.max(other): torch.max(a, b)
    close(getattr(gt, op[:3])(gt.tensor(a), b), want)  # an array operand too
    # PyTorch's promotion: int32 with float64 is float64; int64 with int32 stays int64.
    i = np.arange(-3, 3, dtype=np.int32).reshape(2, 3)
    f = rng.standard_normal((2, 3))
    got = getattr(gt, op)(gt.tensor(i), gt.tensor(f))
    assert got.dtype is gt.float64
    close(got, getattr(torch, op)(torch.tensor(i), torch.tensor(f)))
    j = np.array([[0], [-1]], dtype=np.int64)
    got = getattr(gt, op)(gt.tensor(j), gt.tensor(i))
    assert got.dtype is gt.int64
    close(got, getattr(torch, op)(torch.tensor(j), torch.tensor(i)))
    with pytest.raises(TypeError, match="must be a Tensor"):
        getattr(gt.tensor(a), op)(2.0)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_gradients_as_pytorch(op):
    a = np.array([[1.0, 5.0, 2.0], [3.0, 3.0, -1.0]])
    b = np.array([2.0, 3.0, 2.0])  # ties at [0, 2] and [1, 1]: the gradient is split
    ga, gb = gt.tensor(a, requires_grad=True), gt.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (getattr(gt, op)(ga, gb) * gt.tensor([1.0, 2.0, 3.0])).sum().backward()
    (getattr(torch, op)(ta, tb) * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    close(ga.grad, ta.grad)
    close(gb.grad, tb.grad)


# ---- dtypes -----------------------------------------------------------------------


@pytest.mark.parametrize("g, n", [(gt.float32, np.float32), (gt.float64, np.float64), (gt.int32, np.int32),
                                  (gt.int64, np.int64), (gt.bool, np.bool_)])
def test_dtype_equals_numpy_dtypes_and_names(g, n):
    name = np.dtype(n).name
    assert g == n and n == g
    assert g == np.dtype(n) and np.dtype(n) == g
    assert g == name and name == g
    assert not (g != n) and not (g != name)
    assert hash(g) == hash(np.dtype(n))
    assert np.dtype(n) in {g} and g in {np.dtype(n): 1}
    assert np.dtype(g) == np.dtype(n)
    assert np.zeros(2, dtype=g).dtype == np.dtype(n)
    assert gt.zeros(2, dtype=g).dtype == n
    assert gt.zeros(2, dtype=g).numpy().dtype == g
    for other in (gt.float32, gt.float64, gt.int32, gt.int64, gt.bool):
        assert (g == other) == (g is other)
    for other in (np.float16, np.uint8, np.dtype("complex64"), "float16", "f4", "int8"):
        assert g != other


def test_dtype_is_not_equal_to_python_types_or_aliases():
    # np.dtype('float') is float64 while gt.resolve('float') is float32: aliases compare unequal.
    assert gt.float32 != float and gt.float32 != "float" and gt.int64 != int and gt.bool != bool
    assert gt.float32 != torch.float32 and gt.float32 != 3 and gt.float32 != None  # noqa: E711
    assert gt.float32.dtype == np.dtype("float32")
    assert gt.tensor([1.0]).dtype == gt.tensor(np.ones(1, np.float32)).dtype == np.float32


# ---- NumPy functions on gt tensors ------------------------------------------------


def test_asarray_fetches_the_data(x):
    t = gt.tensor(x)
    a = np.asarray(t)
    assert isinstance(a, np.ndarray) and a.dtype == np.float32
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(np.array(t, dtype=np.float64), x.astype(np.float64))
    np.testing.assert_array_equal(np.asarray(torch.tensor(x)), a)  # as PyTorch's CPU tensors


def test_numpy_functions_return_numpy_results(x):
    t = gt.tensor(x)
    cases = [
        (np.mean, (), {}), (np.sum, (), {"axis": 0}), (np.max, (), {"axis": 1}), (np.min, (), {}),
        (np.argmax, (), {"axis": -1}), (np.std, (), {}), (np.mean, (), {"axis": (0, 2), "keepdims": True}),
        (np.transpose, (), {}), (np.cumsum, (), {"axis": 1}),
    ]
    for fn, args, kwargs in cases:
        got, want = fn(t, *args, **kwargs), fn(x, *args, **kwargs)
        assert isinstance(got, (np.ndarray, np.generic)), (fn, type(got))
        np.testing.assert_allclose(got, want, **F32)
    got = np.concatenate([t, x, t], axis=1)
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, np.concatenate([x, x, x], axis=1))
    assert np.allclose(t, x) and np.array_equal(t, x)
    np.testing.assert_allclose(t, x)


def test_ufuncs_gt_has_run_as_gt_ops(x, rng):
    y = rng.standard_normal((3, 4, 5)).astype(np.float32)
    t, u = gt.tensor(x), gt.tensor(y)
    tp = gt.tensor(np.abs(x) + 0.5)
    ref, ref_u = torch.tensor(x), torch.tensor(y)
    close(np.exp(t), np.exp(ref))
    close(np.log(tp), np.log(torch.tensor(np.abs(x) + 0.5)))
    close(np.sqrt(tp), np.sqrt(np.abs(x) + 0.5))
    close(np.tanh(t), np.tanh(ref))
    close(np.negative(t), -x)
    close(np.abs(t), np.abs(x))
    close(np.add(t, 1), np.add(ref, 1))
    close(np.add(1, t), 1 + x)
    close(np.multiply(t, u), ref * ref_u)
    close(np.subtract(y, t), y - x)
    close(np.divide(t, 2.0), x / 2)
    close(np.power(tp, 2), (np.abs(x) + 0.5) ** 2)
    close(y + t, y + x)  # ndarray on the left: still a gt op (t.__radd__)
    close(y - t, y - x)
    close(y * t, y * x)
    close(y / tp, y / (np.abs(x) + 0.5))
    close(np.float32(2) * t, 2 * x)
    close(np.ones((5, 2), np.float32) @ gt.ones(2, 3), np.full((5, 3), 2, np.float32))
    assert (y > t).dtype is gt.bool and np.array_equal((y > t).numpy(), y > x)  # bool masks, as PyTorch's
    assert np.array_equal(np.less(t, 0).numpy(), x < 0)
    # They are gt ops: recorded for autograd, gradients as PyTorch's.
    w = gt.tensor(x, requires_grad=True)
    (np.exp(w) + y * w).sum().backward()
    rw = torch.tensor(x, requires_grad=True)
    (torch.exp(rw) + torch.tensor(y) * rw).sum().backward()
    close(w.grad, rw.grad)


def test_other_ufuncs_run_in_numpy_and_return_gt_tensors(x):
    t, ref = gt.tensor(x), torch.tensor(x)
    for fn in (np.sin, np.cos, np.floor, np.square):
        close(fn(t), fn(ref))
    close(np.maximum(t, 0.5), np.maximum(ref, 0.5))
    close(np.isnan(t), np.isnan(x))
    assert np.isnan(t).dtype == gt.bool
    frac, whole = np.modf(t)
    close(frac, np.modf(x)[0])
    close(whole, np.modf(x)[1])
    # Ufunc methods and out= stay in NumPy.
    r = np.add.reduce(t, axis=0)
    assert isinstance(r, np.ndarray)
    np.testing.assert_allclose(r, np.add.reduce(x, axis=0), **F32)
    out = np.empty_like(x)
    assert np.exp(t, out=out) is out
    np.testing.assert_allclose(out, np.exp(x), **F32)
    with pytest.raises(TypeError):
        np.exp(x, out=gt.tensor(x))


# ---- gt.nn's functions --------------------------------------------------------------


def test_nn_functions_under_both_names(rng):
    logits = rng.standard_normal((6, 4)).astype(np.float32)
    target = rng.standard_normal((6, 4)).astype(np.float32)
    probs = rng.uniform(0.05, 0.95, (6, 4)).astype(np.float32)
    labels = rng.integers(0, 4, 6)
    weight = rng.standard_normal((3, 4)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    tf = torch.nn.functional
    for ns in (gt.nn, gt.nn.functional):
        close(ns.mse_loss(gt.tensor(logits), gt.tensor(target)), tf.mse_loss(torch.tensor(logits),
                                                                               torch.tensor(target)))
        close(ns.binary_cross_entropy(gt.tensor(probs), gt.tensor(target > 0).float()),
              tf.binary_cross_entropy(torch.tensor(probs), torch.tensor(target > 0).float()))
        close(ns.cross_entropy(gt.tensor(logits), gt.tensor(labels)),
              tf.cross_entropy(torch.tensor(logits), torch.tensor(labels)))
        close(ns.linear(gt.tensor(logits), gt.tensor(weight), gt.tensor(bias)),
              tf.linear(torch.tensor(logits), torch.tensor(weight), torch.tensor(bias)))
        for name in ("relu", "sigmoid", "tanh"):
            close(getattr(ns, name)(gt.tensor(logits)), getattr(torch, name)(torch.tensor(logits)))
        close(ns.softmax(gt.tensor(logits), dim=0), tf.softmax(torch.tensor(logits), dim=0))
        close(ns.log_softmax(gt.tensor(logits), 1), tf.log_softmax(torch.tensor(logits), 1))
    for name in gt.nn.functional.__all__:
        assert getattr(gt.nn, name) is getattr(gt.nn.functional, name)
        assert name in gt.nn.__all__
    import gt.nn.functional as F  # the PyTorch spelling
    assert F is gt.nn.functional
