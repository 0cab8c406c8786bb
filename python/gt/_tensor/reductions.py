"""gt.Tensor reductions: sum, mean, max / min (and their arg forms), softmax.

dim (or axis): None for every dimension, an int, or a tuple of ints.
max and min: over one int dim, PyTorch's (values, indices) pair; over every
dim, several dims or `axis=`, the values only (NumPy's amax/amin).
"""

import collections
import numbers

from .args import as_index, dims_arg, keepdims_arg

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
        keep = keepdims_arg(keepdim, keepdims)
        if axis is None and isinstance(dim, numbers.Integral) and not isinstance(dim, bool):
            values = getattr(self._c, which)([int(dim)], keep)
            indices = getattr(self._c, "arg" + which)(int(dim), keep)
            return MinMax(self._wrap(values), self._wrap(indices))
        return self._wrap(getattr(self._c, which)(dims_arg(dim, axis, which), keep))

    def argmax(self, dim=None, keepdim=False):
        """Positions (int64) of the first maximum along `dim`, or in the flattened tensor."""
        return self._wrap(self._c.argmax(None if dim is None else as_index(dim, "argmax"), bool(keepdim)))

    def argmin(self, dim=None, keepdim=False):
        """Positions (int64) of the first minimum along `dim`, or in the flattened tensor."""
        return self._wrap(self._c.argmin(None if dim is None else as_index(dim, "argmin"), bool(keepdim)))

    def softmax(self, dim=-1):
        return self._wrap(self._c.softmax(as_index(dim, "softmax")))

    def log_softmax(self, dim=-1):
        return self._wrap(self._c.log_softmax(as_index(dim, "log_softmax")))
