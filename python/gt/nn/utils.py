"""gt.nn.utils: gradient clipping (PyTorch's torch.nn.utils names)."""

from .. import _C
from .._tensor import Tensor, _wrap

__all__ = ["clip_grad_norm_"]


def clip_grad_norm_(parameters, max_norm):
    """Scales the parameters' grads in place so that their joint L2 norm is at most max_norm
    (by max_norm / (norm + 1e-6)); returns that norm before clipping as a 0-d tensor (no sync)."""
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return _wrap(_C.clip_grad_norm_([p._c for p in params], float(max_norm)))
