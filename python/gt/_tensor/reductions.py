"""gt.Tensor reductions: sum, mean, var / std, norm, max / min (and their arg forms), softmax.

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

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, keepdims=None):
        """Variance over `dim` (None: every dim), divided by N - correction: `correction` 1 (or
        unbiased=True, the default) is Bessel's, 0 (unbiased=False) the biased variance."""
        if isinstance(dim, bool):  # x.var(False): PyTorch's var(unbiased) overload
            dim, unbiased = None, dim
        if unbiased is not None and correction is not None:
            raise TypeError("var: give unbiased or correction, not both")
        corr = int(correction) if correction is not None else (0 if unbiased is False else 1)
        return self._wrap(self._c.var(dims_arg(dim, axis, "var"), corr, keepdims_arg(keepdim, keepdims)))

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, keepdims=None):
        """The square root of var(...) (same arguments)."""
        return self.var(dim, unbiased, keepdim, correction=correction, axis=axis, keepdims=keepdims).sqrt()

    def norm(self, p="fro", dim=None, keepdim=False):
        """The p-norm over `dim` (None: every element): 'fro' / 2, 1, inf, -inf, 0 or any other number."""
        if p == "fro" or p == 2:
            return (self * self).sum(dim, keepdim).sqrt()
        if p == 1:
            return self.abs().sum(dim, keepdim)
        if p == float("inf"):
            return self.abs().max(axis=dim, keepdims=keepdim)  # axis=: the values only
        if p == float("-inf"):
            return self.abs().min(axis=dim, keepdims=keepdim)
        if p == 0:
            return (self != 0).to(self.dtype).sum(dim, keepdim)
        if isinstance(p, numbers.Real) and not isinstance(p, bool):
            return self.abs().pow(float(p)).sum(dim, keepdim).pow(1.0 / float(p))
        raise ValueError(f"norm: unsupported p {p!r}")

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
