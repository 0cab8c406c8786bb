"""Module.state_dict() and Module.load_state_dict(), as PyTorch's (see gt.nn.Module)."""

import collections

import numpy as np

from .. import _dtype
from .._grad import no_grad
from .._tensor import Tensor, tensor

IncompatibleKeys = collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])
IncompatibleKeys.__doc__ = ("What load_state_dict(strict=False) skipped: keys the module has and the dict "
                            "lacks, and the reverse.")


def state_dict(module, destination=None, prefix="", keep_vars=False):
    """PyTorch's order: a module's own parameters, then its persistent buffers, then each child's."""
    if destination is None:
        destination = collections.OrderedDict()
    for name, value in list(module._own_parameters()) + list(module._own_buffers(persistent_only=True)):
        destination[prefix + name] = value if keep_vars else value.detach()
    for name, child in module.named_children():
        state_dict(child, destination, f"{prefix}{name}.", keep_vars)
    return destination


def _as_array(value):
    """`value` (not a gt tensor) as a NumPy array; a torch tensor is read through np.asarray."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, maybe requiring grad
        value = value.detach().cpu()
    return np.asarray(value)


def _source(name, value, target):
    """`value` as a gt tensor to copy into `target`, or the text of why it cannot be."""
    want = tuple(target.shape)
    if isinstance(value, Tensor):
        shape, dtype = tuple(value.shape), value.dtype
    else:
        try:
            array = _as_array(value)
        except Exception as error:  # noqa: BLE001 - any unreadable value is reported by name
            return None, f"value for {name} is a {type(value).__name__} that NumPy cannot read ({error})"
        shape = tuple(array.shape)
        typed = hasattr(value, "dtype")  # arrays and tensors keep their dtype; lists and numbers take the target's
        try:
            dtype = _dtype.resolve(array.dtype) if typed else target.dtype
        except TypeError:
            return None, f"dtype mismatch for {name}: the checkpoint has {array.dtype}, the model {target.dtype.name}"
    if shape != want:
        return None, (f"size mismatch for {name}: copying a param with shape {list(shape)} from checkpoint, "
                      f"the shape in current model is {list(want)}")
    if dtype != target.dtype:
        return None, f"dtype mismatch for {name}: the checkpoint has {dtype.name}, the model {target.dtype.name}"
    return (value if isinstance(value, Tensor) else tensor(array, dtype=target.dtype)), None


def load_state_dict(module, state, strict=True):
    """Validates every entry (keys, shapes, dtypes) and uploads the non-gt values first; copies only
    when nothing is wrong, so an error leaves the module as it was."""
    if not isinstance(state, collections.abc.Mapping):
        raise TypeError(f"load_state_dict: expected a dict of tensors, got {type(state).__name__}")
    targets = state_dict(module, keep_vars=True)
    missing = [k for k in targets if k not in state]
    unexpected = [k for k in state if k not in targets]
    errors, sources = [], {}
    for name, target in targets.items():
        if name in state:
            source, error = _source(name, state[name], target)
            if error:
                errors.append(error)
            else:
                sources[name] = source
    if strict and unexpected:
        errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
    if strict and missing:
        errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
    if errors:
        raise RuntimeError(f"Error(s) in loading state_dict for {type(module).__name__}:\n\t" + "\n\t".join(errors))
    with no_grad():
        for name, source in sources.items():
            targets[name].copy_(source)
    return IncompatibleKeys(missing, unexpected)
