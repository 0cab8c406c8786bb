"""gt.Tensor itself: its metadata, dtype conversion, and the sync points that
read its data. Its ops come from one mixin per concern (see base.py)."""

import numpy as np

from .. import _C
from .. import _dtype
from .args import as_index
from .arithmetic import ArithmeticOps
from .autograd import AutogradOps
from .base import TensorBase
from .device import DeviceOps
from .interop import NumpyInterop
from .placement import PlacementOps
from .reductions import ReductionOps
from .shape import ShapeOps


class Tensor(ArithmeticOps, ReductionOps, ShapeOps, AutogradOps, NumpyInterop, PlacementOps, DeviceOps, TensorBase):
    """A tensor whose data lives on gt workers (see the gt._tensor doc)."""

    __slots__ = ()

    def __init__(self, *args, **kwargs):
        raise TypeError("make tensors with gt.tensor, gt.from_numpy, gt.randn, gt.zeros, gt.ones, gt.arange, ...")

    @staticmethod
    def _wrap(c):
        """A new gt.Tensor for C++ tensor `c` (a gt._C.Tensor)."""
        t = Tensor.__new__(Tensor)
        t._c = c
        return t

    # ---- metadata ---------------------------------------------------------

    @property
    def shape(self):
        return self._c.shape

    def size(self, dim=None):
        shape = self._c.shape
        return shape if dim is None else shape[as_index(dim, "size")]

    @property
    def dtype(self):
        return _dtype.from_c(self._c.dtype)

    @property
    def ndim(self):
        return self._c.dim()

    def dim(self):
        return self._c.dim()

    def numel(self):
        return self._c.numel()

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def __len__(self):
        shape = self._c.shape
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    # ---- conversion -------------------------------------------------------

    def float(self):
        return self.to(_dtype.float32)

    def double(self):
        return self.to(_dtype.float64)

    def int(self):
        return self.to(_dtype.int32)

    def long(self):
        return self.to(_dtype.int64)

    def bool(self):
        return self.to(_dtype.bool_)

    # ---- data (sync points) ----------------------------------------------

    def numpy(self):
        """A new NumPy array holding this tensor's data (waits for it)."""
        return self._c.numpy()

    def tolist(self):
        return self._c.numpy().tolist()

    def item(self):
        n = self.numel()
        if n != 1:
            raise ValueError(f"item: tensor of shape {self.shape} has {n} elements, expected 1")
        return self._c.numpy().item()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(f"the truth value of a tensor of shape {self.shape} is ambiguous")
        return bool(self.item())

    def __repr__(self):
        body = np.array2string(self._c.numpy(), separator=", ", prefix="tensor(")
        extras = ""
        if self.dtype not in (_dtype.float32, _dtype.int64, _dtype.bool_):
            extras += f", dtype={self.dtype!r}"
        if self.requires_grad:
            extras += ", requires_grad=True"
        return f"tensor({body}{extras})"


# The class has always been gt._tensor.Tensor (the package re-exports it).
Tensor.__module__ = __package__

_wrap = Tensor._wrap
