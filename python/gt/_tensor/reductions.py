"""gt.Tensor reductions: sum, mean, max / min (and their arg forms), softmax.

dim (or NumPy's axis; giving both is a TypeError): None for every dimension,
an int, or a tuple of ints. keepdim (or keepdims) keeps reduced dimensions.
max and min: over one int dim, PyTorch's (values, indices) pair; over every
dim, several dims or `axis=`, the values only (NumPy's amax/amin). Given a
tensor or array instead of a dim they are elementwise, as PyTorch's
torch.max(a, b): maximum / minimum (arithmetic.py).
"""

import collections
import numbers

import numpy as np

from .args import dim_arg, dims_arg, keepdims_arg
from .base import TensorBase

# What max / min over one dim return, as torch.return_types.max does.
MinMax = collections.namedtuple("MinMax", ["values", "indices"], module=__package__)  # gt._tensor, where it has always been


class ReductionOps:
    """gt.Tensor's reductions (a mixin of core.Tensor)."""

    __slots__ = ()

    def sum(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        return self._wrap(self._c.sum(dims_arg(dim, axis, "sum"), keepdims_arg(keepdim, keepdims)))

    def mean(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        return self._wrap(self._c.mean(dims_arg(dim, axis, "mean"), keepdims_arg(keepdim, keepdims)))

    def max(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        return self._extreme("max", dim, keepdim, axis, keepdims)

    def min(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        return self._extreme("min", dim, keepdim, axis, keepdims)

    def _extreme(self, which, dim, keepdim, axis, keepdims):
        if isinstance(dim, (TensorBase, np.ndarray)):  # torch.max(a, b): elementwise
            return getattr(self, which + "imum")(dim)
        keep = keepdims_arg(keepdim, keepdims)
        if axis is None and isinstance(dim, numbers.Integral) and not isinstance(dim, bool):
            values = getattr(self._c, which)([int(dim)], keep)
            indices = getattr(self._c, "arg" + which)(int(dim), keep)
            return MinMax(self._wrap(values), self._wrap(indices))
        return self._wrap(getattr(self._c, which)(dims_arg(dim, axis, which), keep))

    def argmax(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """Positions (int64) of the first maximum along `dim`, or in the flattened tensor."""
        return self._wrap(self._c.argmax(dim_arg(dim, axis, "argmax"), keepdims_arg(keepdim, keepdims)))

    def argmin(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """Positions (int64) of the first minimum along `dim`, or in the flattened tensor."""
        return self._wrap(self._c.argmin(dim_arg(dim, axis, "argmin"), keepdims_arg(keepdim, keepdims)))

    def softmax(self, dim=None, *, axis=None):
        """Softmax along `dim` (or `axis`; the last dimension when neither is given)."""
        return self._wrap(self._c.softmax(dim_arg(dim, axis, "softmax", -1)))

    def log_softmax(self, dim=None, *, axis=None):
        """log(softmax) along `dim` (or `axis`; the last dimension when neither is given)."""
        return self._wrap(self._c.log_softmax(dim_arg(dim, axis, "log_softmax", -1)))
