"""Functions over gt tensors used by layers and losses (gt::nn's losses, bound),
under PyTorch's torch.nn.functional names. gt.nn re-exports them all
(gt.nn.mse_loss is gt.nn.functional.mse_loss)."""

import math

from .. import _C
from .._tensor import Tensor, _wrap, tensor

__all__ = ["mse_loss", "binary_cross_entropy", "cross_entropy", "nll_loss", "linear", "relu", "gelu", "sigmoid", "tanh",
           "softmax", "log_softmax", "embedding", "layer_norm", "dropout", "scaled_dot_product_attention", "conv2d",
           "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "batch_norm"]


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


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """-log_softmax(input)[i, target[i]] per row (`input` [N, C], `target` class indices int32/int64 [N]),
    reduced by `reduction` ('mean' over the rows not ignored, weighted by `weight` [C] when given; 'sum';
    'none'); rows whose target is `ignore_index` count for nothing. `label_smoothing` mixes in the uniform
    distribution over the classes. A floating `target` of the input's shape holds class probabilities."""
    _check_reduction(reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if isinstance(target, Tensor) and target.dtype.is_floating_point and tuple(target.shape) == tuple(input.shape):
        return _cross_entropy_probabilities(input, target, weight, reduction, label_smoothing)
    if weight is None and reduction == "mean" and label_smoothing == 0.0 and input.ndim == 2:
        # one fused op each way
        return _wrap(_C.cross_entropy(_t(input, "cross_entropy"), _t(target, "cross_entropy"), int(ignore_index)))
    log_probs = log_softmax(input, 1)
    loss = nll_loss(log_probs, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing == 0.0:
        return loss
    # PyTorch's: (1 - e) * nll + e / C * (the negated sum of the log-probabilities, reduced alike)
    classes = input.shape[1]
    kept = target != ignore_index
    per_row = (log_probs * weight).sum(1) if weight is not None else log_probs.sum(1)
    smooth = (-per_row).masked_fill(~kept, 0.0)
    if reduction == "sum":
        smooth = smooth.sum()
    elif reduction == "mean":
        total = weight.index_select(0, target.masked_fill(~kept, 0)).masked_fill(~kept, 0.0).sum() \
            if weight is not None else kept.sum()
        smooth = smooth.sum() / total
    return loss * (1.0 - label_smoothing) + smooth * (label_smoothing / classes)


def _cross_entropy_probabilities(input, target, weight, reduction, label_smoothing):
    classes = input.shape[1]
    if label_smoothing > 0.0:
        target = target * (1.0 - label_smoothing) + label_smoothing / classes
    log_probs = log_softmax(input, 1)
    if weight is not None:
        log_probs = log_probs * weight
    per_row = -(log_probs * target).sum(1)
    if reduction == "none":
        return per_row
    return per_row.sum() if reduction == "sum" else per_row.sum() / input.shape[0]


def _check_reduction(reduction, what):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """-input[i, target[i]] per row (`input` [N, C] log-probabilities, `target` [N] class indices; also
    [N, C, d...] with [N, d...]), weighted by `weight` [C] when given, reduced by `reduction`: 'mean' (the
    weighted mean over the rows not ignored), 'sum' or 'none'; rows whose target is `ignore_index` count for
    nothing."""
    _check_reduction(reduction, "nll_loss")
    if not isinstance(target, Tensor) or target.dtype.is_floating_point or target.dtype.name == "bool":
        raise TypeError("nll_loss: target must be a gt Tensor of class indices (int32 or int64)")
    if input.ndim > 2:  # [N, C, d...]: the classes moved last, every position a row
        dims = [0] + list(range(2, input.ndim)) + [1]
        input = input.permute(*dims).reshape(-1, input.shape[1])
        rows_shape, target = target.shape, target.reshape(-1)
    else:
        rows_shape = None
    if input.ndim != 2 or target.ndim != 1 or target.shape[0] != input.shape[0]:
        raise ValueError(f"Expected input batch_size ({input.shape[0] if input.ndim else 1}) to match target "
                         f"batch_size ({target.shape[0] if target.ndim else 1}).")
    dropped = target == ignore_index
    picked = input.gather(1, target.masked_fill(dropped, 0).unsqueeze(1)).squeeze(1)
    if weight is None:  # the fewest ops: a dropped row's loss is 0 and it is not counted
        losses, rows_weight = -picked.masked_fill(dropped, 0.0), None
    else:
        rows_weight = weight.index_select(0, target.masked_fill(dropped, 0)).masked_fill(dropped, 0.0)
        losses = -(picked * rows_weight)
    if reduction == "none":
        return losses if rows_shape is None else losses.reshape(*rows_shape)
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / ((~dropped).sum() if rows_weight is None else rows_weight.sum())


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


def _pair(value, what):
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{what}: expected an int or a pair, got {value!r}")
        return [int(value[0]), int(value[1])]
    return [int(value), int(value)]


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation) of [N, C_in, H, W] (or [C_in, H, W]) with weight
    [C_out, C_in / groups, kH, kW]; `padding` an int, a pair, 'valid' (none) or 'same' (stride 1)."""
    stride, dilation = _pair(stride, "conv2d stride"), _pair(dilation, "conv2d dilation")
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0, 0]
        elif padding == "same":
            if stride != [1, 1]:
                raise ValueError("padding='same' is not supported for strided convolutions")
            total = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
            if any(t % 2 for t in total):
                raise ValueError("conv2d: padding='same' with an even total padding per side only in gt "
                                 f"(kernel {tuple(weight.shape[2:])}, dilation {tuple(dilation)})")
            padding = [t // 2 for t in total]
        else:
            raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
    return _wrap(_C.conv2d(_t(input, "conv2d"), _t(weight, "conv2d"), None if bias is None else _t(bias, "conv2d"),
                           stride, _pair(padding, "conv2d padding"), dilation, int(groups)))


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The maximum of each kH x kW window (`stride` defaults to the kernel size; padding counts as -inf)."""
    if return_indices:
        raise ValueError("max_pool2d: return_indices=True is not supported by gt")
    kernel = _pair(kernel_size, "max_pool2d kernel_size")
    stride = kernel if stride is None or stride == [] or stride == () else _pair(stride, "max_pool2d stride")
    return _wrap(_C.max_pool2d(_t(input, "max_pool2d"), kernel, stride, _pair(padding, "max_pool2d padding"),
                               _pair(dilation, "max_pool2d dilation"), bool(ceil_mode)))


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """The mean of each kH x kW window (`stride` defaults to the kernel size)."""
    if divisor_override is not None:
        raise ValueError("avg_pool2d: divisor_override is not supported by gt")
    kernel = _pair(kernel_size, "avg_pool2d kernel_size")
    stride = kernel if stride is None or stride == [] or stride == () else _pair(stride, "avg_pool2d stride")
    return _wrap(_C.avg_pool2d(_t(input, "avg_pool2d"), kernel, stride, _pair(padding, "avg_pool2d padding"),
                               bool(ceil_mode), bool(count_include_pad)))


def adaptive_avg_pool2d(input, output_size):
    """Means over windows that divide H x W into `output_size` (an int, or a pair; None keeps that dim)."""
    size = list(output_size) if isinstance(output_size, (tuple, list)) else [output_size, output_size]
    if len(size) != 2:
        raise ValueError(f"adaptive_avg_pool2d: output_size must be an int or a pair, got {output_size!r}")
    size = [input.shape[-2 + i] if s is None else int(s) for i, s in enumerate(size)]
    return _wrap(_C.adaptive_avg_pool2d(_t(input, "adaptive_avg_pool2d"), size))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Per channel (dim 1): (x - mean) / sqrt(var + eps) * weight + bias. Training: the batch's mean and
    biased variance, and running_mean / running_var (when given) moved toward the batch's mean and
    unbiased variance by `momentum`, in place; else the running statistics."""
    from .._grad import no_grad
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected at least 2 dims, got input of shape {tuple(input.shape)}")
    channels = input.shape[1]
    shape = [1, channels] + [1] * (input.ndim - 2)
    if training:
        dims = [0] + list(range(2, input.ndim))
        count = input.numel() // channels
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{tuple(input.shape)}")
        mean = input.mean(dims, keepdim=True)
        var = input.var(dims, correction=0, keepdim=True)
        out = (input - mean) / (var + eps).sqrt()
        if running_mean is not None and running_var is not None:
            with no_grad():
                running_mean.mul_(1.0 - momentum)
                running_mean.add_(mean.detach().reshape(channels), alpha=momentum)
                running_var.mul_(1.0 - momentum)
                running_var.add_(var.detach().reshape(channels), alpha=momentum * count / (count - 1))
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: eval mode (training=False) needs running_mean and running_var")
        out = (input - running_mean.reshape(*shape)) / (running_var.reshape(*shape) + eps).sqrt()
    if weight is not None:
        out = out * weight.reshape(*shape)
    if bias is not None:
        out = out + bias.reshape(*shape)
    return out
