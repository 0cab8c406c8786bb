"""Python idiom in gt.Tensor arguments: scalars, ints, varargs shapes, reduction dims."""

import operator

import numpy as np

# Python and NumPy scalars that ops take as scalars (no tensor is made).
SCALAR_TYPES = (int, float, np.integer, np.floating, np.bool_)
# Inputs that become a tensor when met as an operand.
ARRAY_TYPES = (np.ndarray, list, tuple)


def is_scalar(x):
    return isinstance(x, SCALAR_TYPES)


# A scalar operand travels as a float64 (wire.proto's `scalar`), which holds
# every integer only up to 2**53 in magnitude.
_EXACT_INTEGERS = 2 ** 53


def scalar_value(x, what="a scalar operand"):
    """`x` as the float64 gt sends; ValueError for an integer a float64 cannot
    hold exactly (rounding it would give another number without a word)."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) and abs(int(x)) > _EXACT_INTEGERS:
        raise ValueError(f"{what}: the integer {int(x)} is beyond 2**53 in magnitude, where a float64 (how gt sends "
                         f"a scalar) is not exact; make it a tensor: gt.tensor([{int(x)}], dtype=gt.int64)")
    return float(x)


def as_index(x, what):
    """`x` as a Python int (ints and NumPy integers; not bools, not floats)."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{what}: expected an int, got bool")
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{what}: expected an int, got {type(x).__name__}") from None


def shape_args(args, what):
    """A shape given as varargs (2, 3) or one sequence ((2, 3) or [2, 3])."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    return [as_index(s, what) for s in args]


def dims_arg(dim, axis, what):
    """Reduction axes from dim= or axis= (None: every dimension)."""
    if dim is not None and axis is not None:
        raise TypeError(f"{what}: give dim or axis, not both")
    d = dim if dim is not None else axis
    if d is None:
        return []
    if isinstance(d, (tuple, list)):
        return [as_index(a, what) for a in d]
    return [as_index(d, what)]


def dim_arg(dim, axis, what, default=None):
    """One dimension from PyTorch's dim= or NumPy's axis= (`default` when neither is given)."""
    if dim is not None and axis is not None:
        raise TypeError(f"{what}: give dim or axis, not both")
    d = dim if dim is not None else axis
    return default if d is None else as_index(d, what)


def keepdims_arg(keepdim, keepdims):
    return bool(keepdim if keepdims is None else keepdims)
