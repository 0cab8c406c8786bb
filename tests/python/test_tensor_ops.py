"""Forward numerics of every tensor op against NumPy on the same inputs, and
the Python surface: creation, dtypes, operators with scalars on either side,
indexing, NumPy in/out, repr, in-place ops, errors."""

import numpy as np
import pytest

import gt

F32 = dict(rtol=1e-5, atol=1e-6)


def g(a):
    return gt.tensor(a)


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


# ---- elementwise arithmetic ---------------------------------------------------


@pytest.mark.parametrize("shape_a,shape_b", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3))])
def test_binary_ops_broadcast(rng, shape_a, shape_b):
    a = rng.standard_normal(shape_a).astype(np.float32)
    b = (rng.standard_normal(shape_b) + 3).astype(np.float32)
    ta, tb = g(a), g(b)
    np.testing.assert_allclose((ta + tb).numpy(), a + b, **F32)
    np.testing.assert_allclose((ta - tb).numpy(), a - b, **F32)
    np.testing.assert_allclose((ta * tb).numpy(), a * b, **F32)
    np.testing.assert_allclose((ta / tb).numpy(), a / b, **F32)


def test_scalar_forms_both_sides(rng):
    a = (rng.standard_normal((3, 4)) + 5).astype(np.float32)
    x = g(a)
    np.testing.assert_allclose((x + 2).numpy(), a + 2, **F32)
    np.testing.assert_allclose((2 + x).numpy(), 2 + a, **F32)
    np.testing.assert_allclose((x - 2).numpy(), a - 2, **F32)
    np.testing.assert_allclose((1 - x).numpy(), 1 - a, **F32)
    np.testing.assert_allclose((2 * x).numpy(), 2 * a, **F32)
    np.testing.assert_allclose((x * 0.5).numpy(), a * 0.5, **F32)
    np.testing.assert_allclose((x / 3).numpy(), a / 3, **F32)
    np.testing.assert_allclose((3 / x).numpy(), 3 / a, **F32)
    np.testing.assert_allclose((-x).numpy(), -a, **F32)
    np.testing.assert_allclose((+x).numpy(), a, **F32)
    np.testing.assert_allclose((x + np.float32(1.5)).numpy(), a + 1.5, **F32)
    np.testing.assert_allclose((x * np.int64(2)).numpy(), a * 2, **F32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scalar_operands_match_pytorch_bit_for_bit(dtype):
    # The worker makes a scalar in a floating tensor's dtype up front (ATen
    # would cast it in every call): the values must be PyTorch's exactly,
    # at rounding boundaries and overflow too.
    import torch
    a = np.array([0.1, 1e-8, 3.0, -2.5, 1e38, 16777217.0], dtype)
    x, t = g(a), torch.from_numpy(a)
    for s in (0.1, 3, 1e40, -0.0, 1e-45, 16777217, 2.5):
        for f in (lambda u: u + s, lambda u: s - u, lambda u: u * s, lambda u: u / s,
                  lambda u: u == s, lambda u: u > s, lambda u: u <= s):
            np.testing.assert_array_equal(f(x).numpy(), f(t).numpy(), err_msg=f"{dtype.__name__} scalar {s}")
        # PyTorch's `s / t` is t.reciprocal() * s (an ulp off true division); gt divides, as torch.div does
        np.testing.assert_array_equal((s / x).numpy(), (torch.tensor(s, dtype=t.dtype) / t).numpy())


def test_pow(rng):
    a = (rng.random((3, 4)) + 0.5).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    x, y = g(a), g(b)
    np.testing.assert_allclose((x ** 2).numpy(), a ** 2, **F32)
    np.testing.assert_allclose((x ** 0.5).numpy(), a ** 0.5, **F32)
    np.testing.assert_allclose((x ** y).numpy(), a ** b, rtol=1e-5)
    np.testing.assert_allclose((2 ** y).numpy(), 2 ** b, rtol=1e-5)
    np.testing.assert_allclose(x.pow(3).numpy(), a ** 3, rtol=1e-5)


def test_operands_from_numpy_and_lists(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((2, 3)).astype(np.float32)
    x = g(a)
    np.testing.assert_allclose((x + b).numpy(), a + b, **F32)
    r = b + x  # NumPy defers to gt
    assert isinstance(r, gt.Tensor)
    np.testing.assert_allclose(r.numpy(), a + b, **F32)
    np.testing.assert_allclose((x * [1, 2, 3]).numpy(), a * [1, 2, 3], **F32)
    np.testing.assert_allclose((b @ x.T).numpy(), b @ a.T, **F32)


def test_integer_arithmetic_follows_pytorch():
    a = gt.tensor([1, 2, 3, 4])
    b = gt.tensor([5, 6, 7, 8])
    assert (a + b).dtype is gt.int64
    np.testing.assert_array_equal((a + b).numpy(), [6, 8, 10, 12])
    assert (a * 2).dtype is gt.int64
    assert (a * 2.5).dtype is gt.float32
    assert (a / 2).dtype is gt.float32  # true division
    np.testing.assert_allclose((a / 2).numpy(), [0.5, 1, 1.5, 2])
    assert (gt.tensor([1.0], dtype=gt.float64) + a).dtype is gt.float64


def test_in_place_ops_refuse_a_result_their_tensor_cannot_hold_as_pytorch_does():
    """int64 += 1.5 used to truncate without a word; PyTorch refuses it, and
    so does gt now, naming both dtypes. Casts PyTorch allows still happen."""
    import torch

    def refusal(fn, make):
        try:
            fn(make())
        except (gt.Error, RuntimeError) as e:
            return str(e)
        return None

    ints, bools = (lambda: gt.tensor([1, 2])), (lambda: gt.from_numpy(np.array([True, False])))
    halves = gt.tensor([0.5, 0.5])
    cases = [
        ("+= 1.5", lambda t: t.__iadd__(1.5), ints, lambda: torch.tensor([1, 2]), "float32", "int64"),
        ("-= 0.5", lambda t: t.__isub__(0.5), ints, lambda: torch.tensor([1, 2]), "float32", "int64"),
        ("*= 2.5", lambda t: t.__imul__(2.5), ints, lambda: torch.tensor([1, 2]), "float32", "int64"),
        ("/= 2", lambda t: t.__itruediv__(2), ints, lambda: torch.tensor([1, 2]), "float32", "int64"),
        ("*= 2 (bool)", lambda t: t.__imul__(2), bools, lambda: torch.tensor([True, False]), "int64", "bool"),
    ]
    for name, fn, make, make_torch, result, into in cases:
        assert refusal(fn, make_torch) is not None, f"PyTorch allows {name}"
        assert refusal(fn, make) == f"{'/=' if name == '/= 2' else name.split()[0]}: result type {result} can't be " \
                                    f"cast to the desired output type {into}", name
    # A Python float is a float even when whole: PyTorch refuses int64 += 2.0 as it does 2.5.
    for fn in (lambda t: t.__iadd__(2.0), lambda t: t.__imul__(np.float32(2))):
        assert refusal(fn, lambda: torch.tensor([1, 2])) is not None
        assert "result type float32 can't be cast to the desired output type int64" in refusal(fn, ints)
    # A bool on a bool tensor keeps it bool (+= is or, *= is and); -= is refused, as in PyTorch.
    for fn in (lambda t: t.__iadd__(True), lambda t: t.__iadd__(False), lambda t: t.__imul__(True),
               lambda t: t.__imul__(False)):
        got, want = fn(bools()), fn(torch.tensor([True, False]))
        assert got.dtype is gt.bool, got.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert refusal(lambda t: t.__isub__(True), lambda: torch.tensor([True])) is not None
    assert "subtraction with a bool tensor is not supported" in refusal(lambda t: t.__isub__(True), bools)
    # A refused op leaves nothing behind to fail a later sync.
    b = bools()
    assert "subtraction with a bool tensor" in refusal(lambda t: t.__isub__(1), lambda: b)
    np.testing.assert_array_equal((gt.tensor([1.0]) * 2).numpy(), [2.0])
    # A float tensor operand, through add_ and mul_.
    for fn in (lambda t: t.add_(halves), lambda t: t.mul_(halves)):
        assert "result type float32 can't be cast to the desired output type int64" in refusal(fn, ints)
    # Casts PyTorch makes: an integer result into an integer tensor, anything into a float one.
    t = ints()
    t += 2
    t *= 3
    np.testing.assert_array_equal(t.numpy(), [9, 12])
    f = gt.tensor([1.0, 2.0])
    f += gt.tensor([1, 1])
    np.testing.assert_array_equal(f.numpy(), [2.0, 3.0])


def test_integer_scalars_without_an_exact_float64_are_refused_not_rounded():
    """A scalar travels as a float64: with an integer tensor, 2**53 + 1 would
    silently have been 2**53. A floating tensor rounds it anyway, as PyTorch's."""
    import torch
    x = gt.tensor([0])
    assert (x + 2 ** 53).numpy().tolist() == [2 ** 53]  # exact in a float64
    assert (x + 2 ** 62).numpy().tolist() == [2 ** 62]
    for fn in (lambda: x + (2 ** 53 + 1), lambda: x == 2 ** 53 + 1, lambda: x.fill_(2 ** 62 + 1),
               lambda: x * (2 ** 63 - 1), lambda: x - np.int64(-(2 ** 62) - 1), lambda: x + 10 ** 400):
        with pytest.raises(ValueError, match=r"has no exact float64.*make it a tensor"):
            fn()
    f = gt.tensor([1.0, 2.0])
    f += 2 ** 62
    want = torch.tensor([1.0, 2.0])
    want += 2 ** 62
    np.testing.assert_array_equal(f.numpy(), want.numpy())
    np.testing.assert_array_equal(gt.full((2,), 2 ** 60 + 1, dtype=gt.float32).numpy(),
                                  torch.full((2,), 2 ** 60 + 1, dtype=torch.float32).numpy())


def test_an_integer_tensor_to_a_negative_integer_power_is_refused_as_in_pytorch():
    import torch
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        torch.tensor([2]) ** -1
    with pytest.raises(gt.Error, match=r"pow: integers to negative integer powers are not allowed \(an int64 tensor"):
        gt.tensor([2]) ** -1
    np.testing.assert_allclose((gt.tensor([4]) ** -0.5).numpy(), (torch.tensor([4]) ** -0.5).numpy())
    np.testing.assert_array_equal((gt.tensor([2, 3]) ** 2).numpy(), [4, 9])
    with pytest.raises(gt.Error, match="integers to negative integer powers are not allowed"):
        gt.tensor([True, False]) ** -1
    # A float exponent makes a float result, as PyTorch's (the wire alone would read -1.0 as -1).
    for base, exponent in (([1, 2, 4], -1.0), ([True, False], -1.0), ([2, 3], 2.0), ([2, 3], np.float32(0.5))):
        got, want = gt.tensor(base) ** exponent, torch.tensor(base) ** exponent
        assert str(want.dtype) == "torch." + got.dtype.name, (base, exponent, got.dtype, want.dtype)
        np.testing.assert_allclose(got.numpy(), want.numpy())


def test_comparisons_are_bool_masks(rng):
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    x, y = g(a), g(b)
    for got, want in [(x > y, a > b), (x < y, a < b), (x >= y, a >= b), (x <= y, a <= b), (x == x, a == a),
                      (x > 0, a > 0), (0 < x, a > 0), (x <= 0.5, a <= 0.5), (x != y, a != b)]:
        assert got.dtype is gt.bool
        np.testing.assert_array_equal(got.numpy(), want)
    assert (gt.tensor([1.0], dtype=gt.float64) > 0).dtype is gt.bool
    assert not (x == None)  # noqa: E711 (falls back to identity)


@pytest.mark.parametrize("name,fn,domain", [
    ("exp", np.exp, "any"), ("log", np.log, "positive"), ("sqrt", np.sqrt, "positive"),
    ("relu", lambda v: np.maximum(v, 0), "any"), ("sigmoid", lambda v: 1 / (1 + np.exp(-v)), "any"),
    ("tanh", np.tanh, "any"), ("abs", np.abs, "any"), ("clone", lambda v: v, "any"), ("neg", np.negative, "any")])
def test_unary_ops(rng, name, fn, domain):
    a = rng.standard_normal((3, 5)).astype(np.float32)
    if domain == "positive":
        a = np.abs(a) + 0.1
    got = getattr(g(a), name)().numpy()
    np.testing.assert_allclose(got, fn(a.astype(np.float64)), rtol=1e-5, atol=1e-6)
    if hasattr(gt, name):  # the module-level form
        np.testing.assert_allclose(getattr(gt, name)(g(a)).numpy(), got)


def test_abs_operator():
    np.testing.assert_array_equal(abs(gt.tensor([-1.0, 2.0])).numpy(), [1, 2])


# ---- matmul -----------------------------------------------------------------


@pytest.mark.parametrize("shape_a,shape_b", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)),
                                              ((2, 1, 3, 4), (3, 4, 2)), ((4,), (4, 5)), ((3, 4), (4,)),
                                              ((4,), (4,))])
def test_matmul(rng, shape_a, shape_b):
    a = rng.standard_normal(shape_a).astype(np.float32)
    b = rng.standard_normal(shape_b).astype(np.float32)
    got = g(a) @ g(b)
    want = a @ b
    assert got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g(a).matmul(g(b)).numpy(), want, rtol=1e-5, atol=1e-5)


def test_matmul_shape_error_names_both_shapes():
    with pytest.raises(gt.Error, match=r"\[3, 4\] and \[5, 6\]"):
        gt.randn(3, 4) @ gt.randn(5, 6)


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


# ---- shape ops ----------------------------------------------------------------


def test_reshape_and_view(rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x = g(a)
    np.testing.assert_array_equal(x.reshape(6, 4).numpy(), a.reshape(6, 4))
    np.testing.assert_array_equal(x.reshape((4, -1)).numpy(), a.reshape(4, -1))
    np.testing.assert_array_equal(x.reshape([-1]).numpy(), a.reshape(-1))
    np.testing.assert_array_equal(x.view(2, 12).numpy(), a.reshape(2, 12))
    np.testing.assert_array_equal(x.flatten().numpy(), a.reshape(-1))
    np.testing.assert_array_equal(x.flatten(1).numpy(), a.reshape(2, 12))
    with pytest.raises(gt.Error, match="cannot view"):
        x.reshape(5, 5)


def test_transpose_permute_squeeze(rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x = g(a)
    np.testing.assert_array_equal(x.transpose(0, 2).numpy(), a.transpose(2, 1, 0))
    np.testing.assert_array_equal(x.transpose().numpy(), np.swapaxes(a, -1, -2))
    np.testing.assert_array_equal(x.T.numpy(), a.T)
    np.testing.assert_array_equal(x[0].T.numpy(), a[0].T)
    np.testing.assert_array_equal(x[0].t().numpy(), a[0].T)
    np.testing.assert_array_equal(x.permute(2, 0, 1).numpy(), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(x.permute((1, 2, 0)).numpy(), a.transpose(1, 2, 0))
    assert x.unsqueeze(1).shape == (2, 1, 3, 4)
    assert x.unsqueeze(-1).shape == (2, 3, 4, 1)
    y = g(a.reshape(2, 1, 3, 1, 4))
    assert y.squeeze().shape == (2, 3, 4)
    assert y.squeeze(1).shape == (2, 3, 1, 4)
    assert y.squeeze(0).shape == (2, 1, 3, 1, 4)


INDEX_CASES = [
    (1,), (-1,), (slice(1, 3),), (slice(None, None, 2),), (slice(None), 1), (Ellipsis, -1), (None,),
    (slice(None), None, slice(1, None)), (slice(-3, -1), slice(None, None, 2)), (1, 2, 3), (Ellipsis,),
    (slice(None), Ellipsis, None), (-2, Ellipsis, slice(1, 4, 2)), (slice(10, 20),), (slice(None, -10),),
    (slice(None), slice(None), slice(None, None, 3)), (None, 0, None),
]


@pytest.mark.parametrize("key", INDEX_CASES, ids=[repr(k) for k in INDEX_CASES])
def test_indexing_matches_numpy(rng, key):
    a = rng.standard_normal((4, 3, 5)).astype(np.float32)
    got = g(a)[key]
    want = a[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


def test_indexing_errors():
    x = gt.zeros(3, 4)
    with pytest.raises(IndexError, match="out of bounds"):
        x[3]
    with pytest.raises(IndexError, match="too many"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="ellipsis"):
        x[..., ...]
    with pytest.raises(ValueError, match="step"):
        x[::-1]
    # Advanced indices (test_losses_and_indexing.py): one, with full slices around it.
    with pytest.raises(IndexError, match="must be long, int, byte or bool"):
        x[gt.tensor([0.0, 1.0])]
    with pytest.raises(TypeError, match="one advanced index"):
        x[gt.tensor([0, 1]), 1:]
    with pytest.raises(TypeError, match="one advanced index"):
        x[gt.tensor([0, 1]), 1:] = 1.0


@pytest.mark.parametrize("key", INDEX_CASES, ids=[repr(k) for k in INDEX_CASES])
def test_item_assignment_matches_numpy(rng, key):
    a = rng.standard_normal((4, 3, 5)).astype(np.float32)
    x = g(a)
    part_shape = a[key].shape
    value = rng.standard_normal(part_shape).astype(np.float32)
    x[key] = value          # an array of the indexed part's shape
    a[key] = value
    np.testing.assert_array_equal(x.numpy(), a)
    x[key] = 2.5            # a scalar
    a[key] = 2.5
    np.testing.assert_array_equal(x.numpy(), a)


def test_item_assignment_broadcasts_and_is_seen_by_views(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    x = g(a)
    row = x[1]              # a view of x's data on its worker
    x[:, 1:3] = gt.tensor([7.0, 8.0])
    a[:, 1:3] = [7.0, 8.0]
    np.testing.assert_array_equal(x.numpy(), a)
    np.testing.assert_array_equal(row.numpy(), a[1])


def test_item_assignment_on_a_tensor_that_requires_grad_needs_no_grad():
    w = gt.zeros(3, requires_grad=True)
    with pytest.raises(gt.Error, match="in place"):
        w[0] = 1.0
    with gt.no_grad():
        w[0] = 1.0
    np.testing.assert_array_equal(w.detach().numpy(), [1, 0, 0])


def test_len_and_iteration(rng):
    a = rng.standard_normal((3, 2)).astype(np.float32)
    x = g(a)
    assert len(x) == 3
    rows = list(x)
    assert len(rows) == 3
    np.testing.assert_array_equal(rows[2].numpy(), a[2])
    with pytest.raises(TypeError):
        len(gt.tensor(1.0))


def test_cat_stack_split_chunk(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_array_equal(gt.cat([g(a), g(b)]).numpy(), np.concatenate([a, b]))
    np.testing.assert_array_equal(gt.cat([g(a), g(a)], dim=1).numpy(), np.concatenate([a, a], axis=1))
    np.testing.assert_array_equal(gt.stack([g(a), g(a)], dim=1).numpy(), np.stack([a, a], axis=1))
    c = rng.standard_normal((7, 2)).astype(np.float32)
    pieces = g(c).split(3)
    assert [p.shape for p in pieces] == [(3, 2), (3, 2), (1, 2)]
    np.testing.assert_array_equal(pieces[2].numpy(), c[6:])
    sections = g(c).split([2, 5])
    np.testing.assert_array_equal(sections[1].numpy(), c[2:])
    chunks = g(c).chunk(2)
    assert [p.shape for p in chunks] == [(4, 2), (3, 2)]
    cols = g(c).chunk(2, dim=1)
    np.testing.assert_array_equal(cols[1].numpy(), c[:, 1:])
    with pytest.raises(ValueError, match="add up"):
        g(c).split([2, 2])
    with pytest.raises(gt.Error, match="differ"):
        gt.cat([g(a), g(c)])


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
