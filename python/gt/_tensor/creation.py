"""Functions that make gt Tensors: from data (tensor, from_numpy), random
(randn, rand, and manual_seed for their seeds), constant (zeros, ones, full,
arange, the *_like forms), and joined (cat, stack)."""

import numbers
import threading

import numpy as np

from .. import _C
from .. import _dtype
from .args import as_index, dim_arg, is_scalar, scalar_value, shape_args
from .base import array_to_c, data_to_c
from .core import Tensor, _wrap

_seed_lock = threading.Lock()
_seed = {"base": None, "count": 0}  # GUARDED_BY(_seed_lock)


def manual_seed(seed):
    """Makes later randn/rand/Linear calls without an explicit seed reproducible.

    Each call then draws the next seed of a sequence starting from `seed`;
    without it they use the workers' own generators.
    """
    with _seed_lock:
        _seed["base"] = as_index(seed, "manual_seed")
        _seed["count"] = 0


def _next_seed():
    with _seed_lock:
        if _seed["base"] is None:
            return 0
        _seed["count"] += 1
        base, count = _seed["base"], _seed["count"]
    # splitmix64 of (base, count): distinct, well-mixed, never 0 (0 means "the worker's generator").
    z = (base * 0x9E3779B97F4A7C15 + count * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    z ^= z >> 31
    return z or 1


def _finish(t, requires_grad):
    if requires_grad:
        t._c.requires_grad_(True)
    return t


def _default_dtype(dtype):
    d = _dtype.resolve(dtype)
    return _dtype.float32 if d is None else d


def from_numpy(array, requires_grad=False):
    """A tensor holding a copy of a NumPy array (its dtype kept; see gt._dtype.for_numpy)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    target = _dtype.for_numpy(array.dtype, "from_numpy")
    return _finish(_wrap(array_to_c(array, target)), requires_grad)


def tensor(data, dtype=None, requires_grad=False):
    """A tensor holding a copy of `data` (nested lists, NumPy arrays, scalars, or a gt Tensor).

    Without `dtype`: Python floats give float32, ints int64, bools bool; a
    NumPy array keeps its dtype.
    """
    target = _dtype.resolve(dtype)
    if isinstance(data, Tensor):
        out = data.detach().clone()
        if target is not None and target is not out.dtype:
            out = out.to(target)
        return _finish(out, requires_grad)
    return _finish(_wrap(data_to_c(data, target)), requires_grad)


def randn(*shape, dtype=None, requires_grad=False, seed=None):
    """Standard normal samples of the given shape (varargs or one sequence)."""
    s = shape_args(shape, "randn")
    c = _C.randn(s, _default_dtype(dtype)._c, _next_seed() if seed is None else as_index(seed, "randn"))
    return _finish(_wrap(c), requires_grad)


def rand(*shape, dtype=None, requires_grad=False, seed=None):
    """Uniform samples in [0, 1) of the given shape."""
    s = shape_args(shape, "rand")
    c = _C.rand(s, _default_dtype(dtype)._c, _next_seed() if seed is None else as_index(seed, "rand"))
    return _finish(_wrap(c), requires_grad)


def zeros(*shape, dtype=None, requires_grad=False):
    return _finish(_wrap(_C.zeros(shape_args(shape, "zeros"), _default_dtype(dtype)._c)), requires_grad)


def ones(*shape, dtype=None, requires_grad=False):
    return _finish(_wrap(_C.ones(shape_args(shape, "ones"), _default_dtype(dtype)._c)), requires_grad)


def full(shape, fill_value, dtype=None, requires_grad=False):
    if dtype is None and isinstance(fill_value, (bool, np.bool_)):
        dtype = _dtype.bool_
    elif dtype is None and isinstance(fill_value, (int, np.integer)):
        dtype = _dtype.int64
    t = zeros(shape, dtype=dtype)
    t._c.fill_(scalar_value(fill_value, "full", t.dtype))
    return _finish(t, requires_grad)


def _like(t, dtype):
    if not isinstance(t, Tensor):
        raise TypeError(f"expected a gt Tensor, got {type(t).__name__}")
    return list(t.shape), (t.dtype if dtype is None else _dtype.resolve(dtype))


def zeros_like(t, dtype=None, requires_grad=False):
    shape, d = _like(t, dtype)
    return zeros(shape, dtype=d, requires_grad=requires_grad)


def ones_like(t, dtype=None, requires_grad=False):
    shape, d = _like(t, dtype)
    return ones(shape, dtype=d, requires_grad=requires_grad)


def randn_like(t, dtype=None, requires_grad=False):
    shape, d = _like(t, dtype)
    return randn(shape, dtype=d, requires_grad=requires_grad)


def rand_like(t, dtype=None, requires_grad=False):
    shape, d = _like(t, dtype)
    return rand(shape, dtype=d, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad=False):
    """Values start, start+step, ... below end (arange(n) is 0..n-1); int64 when all bounds are ints."""
    if end is None:
        start, end = 0, start
    target = _dtype.resolve(dtype)
    if target is None:
        ints = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (start, end, step))
        target = _dtype.int64 if ints else _dtype.float32
    for name, v in (("start", start), ("end", end), ("step", step)):
        if not isinstance(v, numbers.Real):
            raise TypeError(f"arange: {name} must be a number, got {type(v).__name__}")
    return _finish(_wrap(_C.arange(float(start), float(end), float(step), target._c)), requires_grad)


def _tensors(tensors, what):
    out = []
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}: expected gt Tensors, got {type(t).__name__}")
        out.append(t._c)
    if not out:
        raise ValueError(f"{what}: expected a non-empty sequence of tensors")
    return out


def cat(tensors, dim=None, *, axis=None):
    """Joins tensors along an existing dimension, `dim` (or NumPy's `axis`; 0 when neither is given)."""
    return _wrap(_C.cat(_tensors(tensors, "cat"), dim_arg(dim, axis, "cat", 0)))


def where(condition, input, other):
    """`input` where `condition` is true (a bool tensor or a nonzero mask), `other` elsewhere, broadcast
    together (torch.where). Either value may be a Python number."""
    if not isinstance(condition, Tensor):
        raise TypeError(f"where: expected a gt Tensor condition, got {type(condition).__name__}")
    if is_scalar(input) and is_scalar(other):
        raise TypeError("where: at least one of input and other must be a tensor")
    if is_scalar(input):
        return _wrap(_C.where(condition._c, scalar_value(input, "where"), _operand(other, "where")))
    if is_scalar(other):
        return _wrap(_C.where(condition._c, _operand(input, "where"), scalar_value(other, "where")))
    return _wrap(_C.where(condition._c, _operand(input, "where"), _operand(other, "where")))


def _operand(x, what):
    if isinstance(x, Tensor):
        return x._c
    raise TypeError(f"{what}: expected a gt Tensor or a number, got {type(x).__name__}")


def tril(x, diagonal=0):
    return x.tril(diagonal)


def triu(x, diagonal=0):
    return x.triu(diagonal)


def stack(tensors, dim=None, *, axis=None):
    """Joins tensors along a new dimension, `dim` (or NumPy's `axis`; 0 when neither is given)."""
    d = dim_arg(dim, axis, "stack", 0)
    return _wrap(_C.cat([c.unsqueeze(d) for c in _tensors(tensors, "stack")], d))


def eye(n, m=None, dtype=None, requires_grad=False):
    """The n x m identity (ones on the diagonal), m defaulting to n."""
    n = as_index(n, "eye")
    m = n if m is None else as_index(m, "eye")
    if n < 0 or m < 0:
        raise RuntimeError(f"n and m must be non-negative, got n={n}, m={m}")
    mask = arange(n).unsqueeze(1) == arange(m).unsqueeze(0)
    target = _default_dtype(dtype)
    out = _wrap(_C.zeros([n, m], target._c))
    out._c.copy_(mask._c)
    return _finish(out, requires_grad)


def randperm(n, dtype=None, requires_grad=False, seed=None):
    """A random permutation of 0..n-1 (int64 by default). Drawn on the client from `seed`, else the
    sequence gt.manual_seed set (reproducible), else fresh entropy, and sent."""
    n = as_index(n, "randperm")
    if n < 0:
        raise RuntimeError(f"randperm: n must be non-negative, got {n}")
    if seed is None:
        seed = _next_seed()
    rng = np.random.default_rng(None if seed == 0 else seed)
    target = _dtype.int64 if dtype is None else _dtype.resolve(dtype)
    return _finish(from_numpy(rng.permutation(n).astype(_C.numpy_dtype(target._c))), requires_grad)
