"""Python idiom in gt.Tensor arguments: scalars, ints, varargs shapes, reduction dims."""

import operator

import numpy as np

# Python and NumPy scalars that ops take as scalars (no tensor is made).
SCALAR_TYPES = (int, float, np.integer, np.floating, np.bool_)
# Inputs that become a tensor when met as an operand.
ARRAY_TYPES = (np.ndarray, list, tuple)


def is_scalar(x):
    return isinstance(x, SCALAR_TYPES)


def _exact_in_float64(i):
    try:
        return int(float(i)) == i
    except OverflowError:
        return False


# A scalar operand travels as a float64 (wire.proto's `scalar`).
def scalar_value(x, what="a scalar operand", dtype=None):
    """`x` as the float64 gt sends. ValueError for an integer that float64
    does not hold exactly when the tensor (of `dtype`) is an integer one:
    rounded, it would give another number without a word. A floating tensor
    rounds it anyway, as PyTorch's does."""
    if (isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))
            and not (dtype is not None and dtype.is_floating_point) and not _exact_in_float64(int(x))):
        raise ValueError(f"{what}: the integer {int(x)} has no exact float64, which is how gt sends a scalar; "
                         f"make it a tensor: gt.tensor([{int(x)}], dtype=gt.int64)")
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
