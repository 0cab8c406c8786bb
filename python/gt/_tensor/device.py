"""Where a gt.Tensor is, in PyTorch's words: `t.device`, `t.to(...)`, `.cpu()`, `.cuda()`, and
pickling (a mixin of core.Tensor).

What a device means in gt: a tensor's data lives on gt's workers, in the pool
the dispatcher manages; the workers (their backend and the signal configs,
gt.signal and gt.distributed) decide which machine and which accelerator
hold it, not the tensor's user. So every gt tensor is on the one device
`gt.device("gt")`, and the device names a PyTorch program passes around mean:

- "gt", "cpu", "cuda", "cuda:0" and gt.device / torch.device objects of those
  kinds: "wherever gt's workers keep it". t.to("cpu"), t.cuda(),
  model.to(device) return the tensor (module) unchanged, without a copy, so a
  PyTorch script written for either device runs unchanged. (To read data
  into this process, use t.numpy() or t.tolist(), as after .cpu() in PyTorch.)
- any other device ("cuda:1", "meta", "mps", "xla", ...) cannot be honoured:
  a ValueError saying why. gt does not let a client pin a tensor to one GPU;
  choose workers with gt.signal or gt.distributed instead.
"""

import numpy as np

from .. import _dtype
from .base import TensorBase

# Device kinds accepted as "where the workers keep it", and the indices each accepts.
_KEPT = {"gt": (None, 0), "cpu": (None, 0), "cuda": (None, 0)}
_KNOWN_ELSEWHERE = ("meta", "mps", "xla", "xpu", "hip", "vulkan", "ipu", "mkldnn", "opengl", "opencl", "ideep",
                    "ort", "lazy", "hpu", "ve", "fpga", "msnpu")


class device:
    """A device as PyTorch names one (`type`, `index`); gt tensors report gt.device("gt")."""

    __slots__ = ("type", "index")

    def __init__(self, spec, index=None):
        if isinstance(spec, device):
            spec, index = spec.type, spec.index if index is None else index
        if not isinstance(spec, str):
            raise TypeError(f"gt.device: expected a device name such as 'cpu', 'cuda' or 'gt', got {spec!r}")
        kind, _, suffix = spec.partition(":")
        if suffix:
            if index is not None or not suffix.isdigit():
                raise ValueError(f"gt.device: invalid device string {spec!r}")
            index = int(suffix)
        if not kind or not kind.isidentifier():
            raise ValueError(f"gt.device: invalid device string {spec!r}")
        self.type, self.index = kind, index

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except (TypeError, ValueError):
                return False
        if isinstance(other, device):
            return (self.type, self.index) == (other.type, other.index)
        return NotImplemented

    def __hash__(self):
        return hash((self.type, self.index))

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        return f"device(type={self.type!r}" + ("" if self.index is None else f", index={self.index}") + ")"

    def __reduce__(self):
        return (device, (self.type, self.index))


GT_DEVICE = device("gt")


def as_device(spec, what):
    """`spec` (a str, gt.device or torch.device) checked to be one gt's workers can honour."""
    try:
        dev = device(str(spec)) if not isinstance(spec, device) else spec
    except (TypeError, ValueError) as error:
        raise ValueError(f"{what}: {error}") from None
    if dev.type in _KEPT and dev.index in _KEPT[dev.type]:
        return dev
    if dev.type in _KEPT:
        raise ValueError(f"{what}: gt cannot place a tensor on {dev}: gt's workers decide which accelerator holds "
                         "its data (choose workers with gt.signal or gt.distributed); 'cuda' or 'cpu' keeps it "
                         "where it is")
    known = dev.type in _KNOWN_ELSEWHERE
    raise ValueError(f"{what}: gt tensors live on gt's workers and cannot move to {'the ' if known else ''}"
                     f"{'device ' if known else 'unknown device '}{str(dev)!r}; "
                     "'gt', 'cpu' and 'cuda' are accepted and keep it where it is")


def _is_device_like(x):
    return isinstance(x, device) or type(x).__name__ == "device"  # gt.device or torch.device


def _torch_dtype(x):
    """The gt dtype of a torch dtype (matched by name, torch is not imported), else None."""
    if type(x).__name__ == "dtype" and str(x).startswith("torch."):
        return _dtype.resolve(str(x)[len("torch."):])
    return None


def _as_dtype(spec, what):
    torch_match = _torch_dtype(spec)
    return torch_match if torch_match is not None else _dtype.resolve(spec)


def parse_to_args(what, args, kwargs):
    """(device or None, gt dtype or None, copy) from PyTorch's to() forms: to(device), to(dtype),
    to(device, dtype), to(tensor), to(device=..., dtype=..., non_blocking=..., copy=...)."""
    kwargs = dict(kwargs)
    dev, dt = kwargs.pop("device", None), kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    copy = bool(kwargs.pop("copy", False))
    if kwargs:
        raise TypeError(f"{what}: unexpected keyword argument(s) {', '.join(sorted(kwargs))}")
    args = list(args)
    if args and isinstance(args[0], TensorBase):  # to(other_tensor): its dtype
        dt = args.pop(0).dtype
    for arg in args:
        if isinstance(arg, bool):  # to(dtype, non_blocking, copy) positional flags
            continue
        if _is_device_like(arg):
            dev = arg
        elif isinstance(arg, str):
            try:
                dt = _as_dtype(arg, what)
            except TypeError:
                dev = arg  # not a dtype name: read as a device (an unknown one is refused there)
        elif arg is not None:
            try:
                dt = _as_dtype(arg, what)
            except TypeError:
                raise TypeError(f"{what}: {arg!r} is neither a device ('gt', 'cpu', 'cuda') nor a gt dtype "
                                "(gt.float32, gt.float64, gt.int32, gt.int64, gt.bool)") from None
    if dev is not None:
        dev = as_device(dev, what)
    if dt is not None:
        dt = _as_dtype(dt, what)
    return dev, dt, copy


def _rebuild(array, requires_grad):
    from .creation import tensor
    return tensor(array).requires_grad_(requires_grad)


class DeviceOps:
    """t.device, t.to, t.cpu(), t.cuda(), and pickling (a mixin of core.Tensor)."""

    __slots__ = ()

    @property
    def device(self):
        """gt.device("gt"): the data lives on gt's workers (see gt._tensor.device)."""
        return GT_DEVICE

    @property
    def is_cuda(self):
        return False

    def to(self, *args, **kwargs):
        """t.to(dtype), t.to(device), t.to(device, dtype), t.to(other), with keywords as PyTorch's.

        A device keeps the tensor where it is (see gt._tensor.device); a dtype gives a converted copy
        (made with an in-place copy, so not recorded for autograd). Returns self when nothing changes
        (copy=True: a clone)."""
        _, target, copy = parse_to_args("to", args, kwargs)
        if target is None or target is self.dtype:
            return self.clone() if copy else self
        if self.requires_grad:
            raise RuntimeError("to: converting a tensor that requires grad is not differentiable in gt; "
                               "detach() it first")
        from .. import _C
        out = self._wrap(_C.zeros(list(self.shape), target._c))
        out._c.copy_(self._c)
        return out

    def cpu(self):
        """This tensor (gt keeps data on its workers; numpy() reads it here). See gt._tensor.device."""
        return self

    def cuda(self, device=None, non_blocking=False):
        """This tensor, where the workers keep it; refuses a device index gt cannot honour."""
        as_device("cuda" if device is None else device if not isinstance(device, int) else f"cuda:{device}", "cuda")
        return self

    def __reduce_ex__(self, protocol):
        """Pickled by value, as PyTorch's tensors: the data (fetched once), dtype and requires_grad."""
        if self.requires_grad and not self.is_leaf:
            raise RuntimeError("pickle: refusing to pickle a non-leaf tensor that requires grad "
                               "(detach() it first, as PyTorch asks)")
        return (_rebuild, (np.asarray(self.numpy(), order="C"), bool(self.requires_grad)))
