"""What every part of gt.Tensor shares: the handle to the C++ tensor, and
turning a non-scalar operand (a Tensor, a NumPy array, a list) into one.

The Tensor's methods live in one mixin per concern (arithmetic.py,
reductions.py, shape.py, autograd.py, interop.py), joined in core.py. A mixin makes a
new Tensor with `self._wrap(c)` (core.Tensor's), so it need not import the
class it is part of.
"""

import numpy as np

from .. import _C
from .. import _dtype
from .args import ARRAY_TYPES


class TensorBase:
    """The state of a gt.Tensor: `_c`, the C++ client's tensor (gt._C.Tensor)."""

    __slots__ = ("_c", "__weakref__")
    # Mixed expressions (ndarray + Tensor) are gt ops: see interop.py's __array_ufunc__.
    __array_priority__ = 1000


def array_to_c(array, target):
    """A C++ tensor holding a copy of `array` (anything np.asarray takes) as gt dtype `target`."""
    array = np.asarray(array, dtype=target.numpy, order="C")  # (ascontiguousarray would make 0-d 1-d)
    return _C.from_numpy(array, list(array.shape), target._c)


def data_to_c(data, target):
    """A C++ tensor holding a copy of `data` (nested lists, NumPy arrays, scalars; not a gt Tensor).

    With `target` None: Python floats give float32, ints int64, bools bool;
    a NumPy array keeps its dtype.
    """
    if isinstance(data, np.ndarray):
        array = data
        if target is None:
            target = _dtype.for_numpy(array.dtype, "tensor")
    else:
        array = np.asarray(data)
        if target is None:
            if array.dtype == np.float64 and not isinstance(data, np.floating):
                target = _dtype.float32  # Python floats: PyTorch's default dtype
            else:
                target = _dtype.for_numpy(array.dtype, "tensor")
    return array_to_c(array, target)


def operand(x, like):
    """An operand that is not a Python scalar as a C++ tensor, or None if unsupported.

    Arrays and lists take `like`'s dtype when it is floating point.
    """
    if isinstance(x, TensorBase):
        return x._c
    if isinstance(x, ARRAY_TYPES):
        return data_to_c(x, like.dtype if like.dtype.is_floating_point else None)
    return None
