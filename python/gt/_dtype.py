"""gt element types and their NumPy counterparts."""

import numpy as np

from . import _C


class dtype:
    """An element type of gt tensors (gt.float32, gt.float64, gt.int32, gt.int64, gt.bool).

    Equality: a gt dtype equals itself, its NumPy dtype in either spelling
    (np.float32, np.dtype('float32'); gt.bool: np.bool_) and its name as a string
    ('float32', 'bool'; not the aliases 'float', 'double', ... that
    gt.resolve takes, since NumPy reads 'float' as float64). Python types (float,
    int, bool) and torch dtypes are not equal to it.

    Hashing: hash(gt.float32) == hash(np.dtype('float32')), so gt and NumPy dtype
    objects find each other as dict keys and set members. NumPy's scalar types
    (np.float32) and strings hash differently from their np.dtype, and Python
    lets an object have one hash only: gt.float32 == 'float32' holds, but
    'float32' in {gt.float32} is False (use gt.float32 in {...} with dtype
    objects, or compare with ==).

    `.dtype` is the NumPy dtype, so NumPy takes a gt dtype wherever it takes a
    dtype: np.zeros(3, dtype=gt.float32), np.dtype(gt.int64).
    """

    __slots__ = ("name", "_c", "numpy")

    def __init__(self, name, c_dtype, numpy_dtype):
        self.name = name
        self._c = c_dtype
        self.numpy = np.dtype(numpy_dtype)

    @property
    def is_floating_point(self):
        return self.numpy.kind == "f"

    @property
    def dtype(self):
        """The NumPy dtype (what np.dtype(gt_dtype) reads)."""
        return self.numpy

    def __eq__(self, other):
        if isinstance(other, dtype):
            return other is self
        if isinstance(other, str):
            return other == self.name
        if isinstance(other, np.dtype) or (isinstance(other, type) and issubclass(other, np.generic)):
            return np.dtype(other) == self.numpy
        return NotImplemented

    def __hash__(self):
        return hash(self.numpy)

    def __repr__(self):
        return "gt." + self.name

    def __reduce__(self):
        return (from_name, (self.name,))


float32 = dtype("float32", _C.DType.float32, np.float32)
float64 = dtype("float64", _C.DType.float64, np.float64)
int32 = dtype("int32", _C.DType.int32, np.int32)
int64 = dtype("int64", _C.DType.int64, np.int64)
bool_ = dtype("bool", _C.DType.bool, np.bool_)

_ALL = (float32, float64, int32, int64, bool_)
_BY_C = {d._c: d for d in _ALL}
_BY_NAME = {d.name: d for d in _ALL}
_BY_NAME.update({"float": float32, "double": float64, "int": int32, "long": int64})
_BY_NUMPY = {d.numpy: d for d in _ALL}


def from_name(name):
    return _BY_NAME[name]


def from_c(c_dtype):
    return _BY_C[c_dtype]


def resolve(spec):
    """A gt dtype from a gt dtype, a NumPy dtype / scalar type, or a name; None stays None."""
    if spec is None or isinstance(spec, dtype):
        return spec
    if isinstance(spec, str) and spec in _BY_NAME:
        return _BY_NAME[spec]
    if spec is float:
        return float32
    if spec is int:
        return int64
    if spec is bool:
        return bool_
    try:
        np_dtype = np.dtype(spec)
    except TypeError:
        np_dtype = None
    if np_dtype is not None and np_dtype in _BY_NUMPY:
        return _BY_NUMPY[np_dtype]
    raise TypeError(f"gt has no dtype {spec!r} (use gt.float32, gt.float64, gt.int32, gt.int64 or gt.bool)")


def for_numpy(np_dtype, what):
    """The gt dtype holding a NumPy array of `np_dtype`, widening the types gt lacks.

    float16 becomes float32; int8, int16, uint8, uint16 and uint32 become int64.
    Anything else without a gt counterpart (uint64, complex, strings, objects)
    is a TypeError naming `what`.
    """
    np_dtype = np.dtype(np_dtype)
    if np_dtype in _BY_NUMPY:
        return _BY_NUMPY[np_dtype]
    if np_dtype == np.float16:
        return float32
    if np_dtype.kind in "iu" and np_dtype.itemsize <= 4 and np_dtype != np.uint64:
        return int64
    raise TypeError(f"{what}: NumPy dtype {np_dtype} has no gt counterpart "
                    "(gt holds float32, float64, int32, int64 and bool)")
