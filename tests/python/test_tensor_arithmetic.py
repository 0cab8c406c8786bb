"""Elementwise arithmetic and matmul against NumPy (and PyTorch where it
defines the rule) on the same inputs: broadcasting, scalars on either side,
integer arithmetic and its refusals, comparisons, unary ops."""

import numpy as np
import pytest

import gt
from ops_helpers import F32, g

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
