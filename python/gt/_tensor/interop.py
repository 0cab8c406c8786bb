"""NumPy on gt tensors: np.asarray(t), ufuncs (np.exp(t), ndarray + t) and
NumPy's other functions (np.mean(t), np.sum(t, axis=0), np.concatenate).

- np.asarray(t) / np.array(t) read the data through __array__: a sync point.
- A ufunc called on gt tensors returns a gt tensor, as a ufunc on a PyTorch
  tensor returns a PyTorch tensor. The ones gt has (the operators + - * / **
  and @, the comparisons, negative, positive, absolute, exp, log, sqrt, tanh)
  run as gt ops: no sync, recorded for autograd, and `ndarray + t` stays the
  gt op `t.__radd__(ndarray)`. Comparisons give bool masks, as the
  operators do. Any other ufunc (np.sin, np.maximum, np.floor_divide, ...)
  runs in NumPy on the fetched data (a sync point) and its result is uploaded
  as a new tensor, not recorded for autograd.
- A ufunc with out= or where=, or a ufunc method (np.add.reduce, ...), runs in
  NumPy on the fetched data and returns NumPy's result; a gt tensor as out= is
  refused (TypeError).
- Every other NumPy function (np.mean, np.sum(t, axis=0), np.max,
  np.concatenate, np.allclose, ...) fetches the gt tensors among its arguments
  and returns NumPy's result, as np.mean on a CPU PyTorch tensor converts it
  through __array__. Use the tensor's own methods (t.mean(), t.sum(axis=0))
  to keep the work and the result on the workers.
"""

import numpy as np

from .base import TensorBase, data_to_c

# ufunc -> (method when a gt tensor is the first input, reflected method when only a later one is).
_BINARY = {
    np.add: ("__add__", "__radd__"),
    np.subtract: ("__sub__", "__rsub__"),
    np.multiply: ("__mul__", "__rmul__"),
    np.true_divide: ("__truediv__", "__rtruediv__"),
    np.power: ("__pow__", "__rpow__"),
    np.matmul: ("__matmul__", "__rmatmul__"),
    np.greater: ("__gt__", "__lt__"),
    np.less: ("__lt__", "__gt__"),
    np.greater_equal: ("__ge__", "__le__"),
    np.less_equal: ("__le__", "__ge__"),
    np.equal: ("__eq__", "__eq__"),
    np.not_equal: ("__ne__", "__ne__"),
}
_UNARY = {
    np.negative: "__neg__",
    np.positive: "__pos__",
    np.absolute: "abs",
    np.exp: "exp",
    np.log: "log",
    np.sqrt: "sqrt",
    np.tanh: "tanh",
}


def _fetched(x):
    """`x` with every gt tensor in it (also inside lists and tuples) replaced by its data."""
    if isinstance(x, TensorBase):
        return np.asarray(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_fetched(v) for v in x)
    return x


def _as_gt(ufunc, inputs):
    """The gt op computing `ufunc(*inputs)`, or NotImplemented when gt has none."""
    if len(inputs) == 1 and ufunc in _UNARY:
        return getattr(inputs[0], _UNARY[ufunc])()
    if len(inputs) == 2 and ufunc in _BINARY:
        forward, reflected = _BINARY[ufunc]
        a, b = inputs
        return getattr(a, forward)(b) if isinstance(a, TensorBase) else getattr(b, reflected)(a)
    return NotImplemented


class NumpyInterop:
    """How NumPy treats a gt.Tensor (a mixin of core.Tensor; see the module doc)."""

    __slots__ = ()

    def __array__(self, dtype=None, copy=None):
        a = self._c.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if any(isinstance(o, TensorBase) for o in kwargs.get("out", ())):
            return NotImplemented
        if method != "__call__" or kwargs:
            return getattr(ufunc, method)(*_fetched(inputs), **_fetched(kwargs))
        result = _as_gt(ufunc, inputs)
        if result is not NotImplemented:
            return result
        result = ufunc(*_fetched(inputs))
        if isinstance(result, tuple):
            return tuple(self._upload(r) for r in result)
        return self._upload(result)

    def __array_function__(self, func, types, args, kwargs):
        return func(*_fetched(args), **{k: _fetched(v) for k, v in kwargs.items()})

    def _upload(self, result):
        """A new gt tensor holding NumPy's `result` (its dtype kept, or widened as gt.tensor does)."""
        return self._wrap(data_to_c(np.asarray(result), None))
