"""Functions over gt tensors used by layers and losses (gt::nn's losses, bound),
under PyTorch's torch.nn.functional names. gt.nn re-exports them all
(gt.nn.mse_loss is gt.nn.functional.mse_loss)."""

import math

from .. import _C
from .._tensor import Tensor, _wrap, tensor

__all__ = ["mse_loss", "binary_cross_entropy", "cross_entropy", "linear", "relu", "gelu", "sigmoid", "tanh", "softmax",
           "log_softmax", "embedding", "layer_norm", "dropout", "scaled_dot_product_attention"]


def _t(x, what, like=None):
    if isinstance(x, Tensor):
        return x._c
    try:
        dtype = like.dtype if like is not None and like.dtype.is_floating_point else None
        return tensor(x, dtype=dtype)._c
    except TypeError:
        raise TypeError(f"{what}: expected a gt Tensor, got {type(x).__name__}") from None


def mse_loss(input, target):
    """Mean of (input - target)^2."""
    return _wrap(_C.mse_loss(_t(input, "mse_loss"), _t(target, "mse_loss", input)))


def binary_cross_entropy(input, target):
    """Mean of -(t log p + (1 - t) log(1 - p)) for probabilities p; logs clamped at -100."""
    return _wrap(_C.binary_cross_entropy(_t(input, "binary_cross_entropy"),
                                         _t(target, "binary_cross_entropy", input)))


def cross_entropy(input, target, ignore_index=-100):
    """Mean over the batch of -log_softmax(input)[i, target[i]]; `target` holds class indices (int32/int64);
    rows whose target is `ignore_index` are left out of the sum and the count."""
    return _wrap(_C.cross_entropy(_t(input, "cross_entropy"), _t(target, "cross_entropy"), int(ignore_index)))


def linear(input, weight, bias=None):
    """input @ weight^T + bias, weight being (out_features, in_features)."""
    out = input @ weight.t()
    return out if bias is None else out + bias


def relu(x):
    return x.relu()


def gelu(input, approximate="none"):
    """x * Phi(x), Phi the standard normal CDF, in the exact erf form (PyTorch's default)."""
    if approximate != "none":
        raise ValueError(f"gelu: only approximate='none' (the exact erf form) is supported, got {approximate!r}")
    return _wrap(_C.gelu(_t(input, "gelu")))


def embedding(input, weight):
    """weight's rows at the int indices `input` (any shape): shape input.shape + (embedding_dim,)."""
    return _wrap(_C.embedding(_t(input, "embedding"), _t(weight, "embedding")))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalized over the trailing dims `normalized_shape` (mean 0, biased variance 1), then * weight + bias."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(input.shape[len(input.shape) - len(shape):]) != shape:
        raise ValueError(f"layer_norm: normalized_shape {shape} does not end the input's shape {tuple(input.shape)}")
    return _wrap(_C.layer_norm(_t(input, "layer_norm"), len(shape), None if weight is None else weight._c,
                               None if bias is None else bias._c, float(eps)))


def dropout(input, p=0.5, training=True, seed=None):
    """Zeroes each element with probability p and scales the rest by 1/(1-p) when training; else the input.
    The mask comes from `seed`, else the sequence gt.manual_seed set, else the workers' generators."""
    from .._tensor import _next_seed
    return _wrap(_C.dropout(_t(input, "dropout"), float(p), bool(training), _next_seed() if seed is None else int(seed)))


def sigmoid(x):
    return x.sigmoid()


def tanh(x):
    return x.tanh()


def softmax(x, dim=None, *, axis=None):
    return x.softmax(dim, axis=axis)


def log_softmax(x, dim=None, *, axis=None):
    return x.log_softmax(dim, axis=axis)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """softmax(query @ key^T * scale + mask) @ value over the last two dims (any leading dims),
    as torch.nn.functional.scaled_dot_product_attention: `scale` defaults to 1/sqrt(E);
    `is_causal` hides the keys after each query (the upper triangle, diagonal excluded);
    `attn_mask` is a bool mask (true: take part) or a float one added to the scores;
    `dropout_p` drops attention weights (training only: pass 0.0 in eval)."""
    from .._tensor import ones
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal=True, not both")
    scores = (query @ key.transpose(-2, -1)) * (1.0 / math.sqrt(E) if scale is None else float(scale))
    if is_causal:
        scores = scores.masked_fill(ones(L, S).tril() == 0, float("-inf"))
    elif attn_mask is not None:
        scores = scores.masked_fill(attn_mask == 0, float("-inf")) if attn_mask.dtype.name == "bool" else scores + attn_mask
    weights = scores.softmax(-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return weights @ value
