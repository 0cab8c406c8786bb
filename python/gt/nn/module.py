"""gt.nn.Module, the base class of layers and models, with PyTorch's names and semantics.

Attributes are kept in the instance's __dict__ (so `vars(module)` shows them),
and the module remembers which of them are what, as PyTorch's _parameters,
_buffers and _modules do:

- a parameter: a leaf tensor that requires grad when it is assigned
  (`self.weight = gt.nn.Parameter(...)`), or one named by register_parameter.
  The name stays a parameter after `requires_grad_(False)` (a frozen weight
  is still in parameters() and state_dict()) and when another tensor is
  assigned to it; assigning something that is not a tensor (or None) ends it.
- a buffer: a tensor named by register_buffer (persistent=True: in state_dict).
- a sub-module: any Module attribute.

gt extension kept from the seeds: modules and parameters inside plain lists,
tuples and dicts held as attributes (`self.layers = [Linear(...), ...]`) are
found too, named `layers.0...`. A tensor in such a container counts as a
parameter if it was a trainable leaf when the container was assigned, or is
one now.

Order, as PyTorch's: a module's own parameters (then its buffers) before its
sub-modules', each sub-module in attribute order; a shared parameter or
module is listed once (state_dict() lists it under every name, as PyTorch's).
"""

import weakref

from .. import _dtype
from .._grad import no_grad
from .._tensor import Tensor
from . import _state

__all__ = ["Module"]

# Tensors found inside plain containers when they were assigned as trainable leaves: still
# parameters once frozen (a Tensor has __slots__, so this cannot be a flag on it). Keyed by id
# with weak references, not a WeakSet: a WeakSet compares members with ==, elementwise on tensors.
_contained_params = {}


def _is_trainable_leaf(value):
    return isinstance(value, Tensor) and value.requires_grad and value.is_leaf


def _was_contained_param(value):
    ref = _contained_params.get(id(value))
    return ref is not None and ref() is value


def _mark_contained(value):
    if _is_trainable_leaf(value):
        key = id(value)
        _contained_params[key] = weakref.ref(value, lambda _, key=key: _contained_params.pop(key, None))
    elif isinstance(value, (list, tuple)):
        for item in value:
            _mark_contained(item)
    elif isinstance(value, dict):
        for item in value.values():
            _mark_contained(item)


def _contents(value, path):
    """(dotted path, item) for the Modules and tensors inside a plain list / tuple / dict attribute."""
    items = enumerate(value) if isinstance(value, (list, tuple)) else value.items() if isinstance(value, dict) else ()
    for key, item in items:
        if isinstance(item, (Module, Tensor)):
            yield f"{path}.{key}", item
        elif isinstance(item, (list, tuple, dict)):
            yield from _contents(item, f"{path}.{key}")


class Module:
    """Base class of layers and models; subclasses define forward()."""

    def __init__(self):
        object.__setattr__(self, "_param_names", [])
        object.__setattr__(self, "_buffer_names", [])
        object.__setattr__(self, "_non_persistent", set())
        self.training = True

    # ---- registration ------------------------------------------------------

    def _registries(self):
        """(_param_names, _buffer_names, _non_persistent); made here for a subclass that forgot super().__init__()."""
        d = self.__dict__
        if "_param_names" not in d:
            d["_param_names"], d["_buffer_names"], d["_non_persistent"] = [], [], set()
        return d["_param_names"], d["_buffer_names"], d["_non_persistent"]

    def __setattr__(self, name, value):
        params, buffers, _ = self._registries()
        if name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign a {type(value).__name__} as buffer '{name}' "
                                "(a gt Tensor or None expected)")
        elif isinstance(value, Tensor) and (name in params or _is_trainable_leaf(value)):
            if name not in params:
                params.append(name)
        elif name in params and value is not None:
            params.remove(name)
        if isinstance(value, (list, tuple, dict)):
            _mark_contained(value)
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        params, buffers, non_persistent = self._registries()
        for names in (params, buffers):
            if name in names:
                names.remove(name)
        non_persistent.discard(name)
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        """Makes attribute `name` a parameter (a gt Tensor, or None for an absent one such as a bias)."""
        if param is not None and not isinstance(param, Tensor):
            raise TypeError(f"register_parameter: '{name}' must be a gt Tensor or None, got {type(param).__name__}")
        params, _, _ = self._registries()
        if name not in params:
            params.append(name)
        object.__setattr__(self, name, param)

    def register_buffer(self, name, tensor, persistent=True):
        """Keeps `tensor` (no gradient) as attribute `name`: a constant of the module, such as a causal
        mask or running statistics, listed by buffers(), not by parameters(); in state_dict() unless
        persistent=False. PyTorch's register_buffer."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: '{name}' must be a gt Tensor or None, got {type(tensor).__name__}")
        if tensor is not None and tensor.requires_grad:
            raise ValueError(f"register_buffer: '{name}' requires grad; a buffer is not trained (use a parameter)")
        params, buffers, non_persistent = self._registries()
        if name in params:
            raise KeyError(f"register_buffer: '{name}' is already a parameter")
        if name not in buffers:
            buffers.append(name)
        (non_persistent.discard if persistent else non_persistent.add)(name)
        object.__setattr__(self, name, tensor)

    def add_module(self, name, module):
        """Makes `module` (a Module or None) the sub-module `name`, as attribute assignment does."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: '{name}' must be a Module or None, got {type(module).__name__}")
        setattr(self, name, module)

    register_module = add_module

    def get_submodule(self, target):
        """The sub-module at dotted path `target` ('' is this module), as PyTorch's get_submodule."""
        module = self
        for part in target.split(".") if target else []:
            found = dict(module.named_children()).get(part)
            if found is None:
                raise AttributeError(f"{type(module).__name__} has no sub-module '{part}' (looking up '{target}')")
            module = found
        return module

    def _own_parameters(self):
        """(name, tensor) for this module's own parameters (not its sub-modules'), None ones skipped."""
        params, buffers, _ = self._registries()
        for name in params:
            value = self.__dict__.get(name)
            if value is not None:
                yield name, value
        for name, value in vars(self).items():
            if isinstance(value, (list, tuple, dict)) and name not in buffers:
                for path, item in _contents(value, name):
                    if isinstance(item, Tensor) and (_is_trainable_leaf(item) or _was_contained_param(item)):
                        yield path, item

    def _own_buffers(self, persistent_only=False):
        _, buffers, non_persistent = self._registries()
        for name in buffers:
            value = self.__dict__.get(name)
            if value is not None and not (persistent_only and name in non_persistent):
                yield name, value

    # ---- traversal ------------------------------------------------------------

    def named_children(self):
        """(name, module) for each immediate sub-module (once each), in attribute order."""
        seen = set()
        for name, value in vars(self).items():
            found = [(name, value)] if isinstance(value, Module) else \
                [(p, m) for p, m in _contents(value, name) if isinstance(m, Module)]
            for path, module in found:
                if id(module) not in seen:
                    seen.add(id(module))
                    yield path, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted name, module) for this module (named `prefix`) and every sub-module, depth first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self.named_children():
            yield from child.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def _named_members(self, members, prefix, recurse, remove_duplicate):
        seen = []
        modules = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for path, module in modules:
            for name, value in members(module):
                if remove_duplicate:
                    if any(value is s or value._c.is_same(s._c) for s in seen):
                        continue
                    seen.append(value)
                yield (f"{path}.{name}" if path else name), value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, parameter) pairs, e.g. ('fc1.weight', ...), each parameter once."""
        return self._named_members(Module._own_parameters, prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        """Every parameter (each once). A list (PyTorch's is a generator; both iterate alike)."""
        return [p for _, p in self.named_parameters(recurse=recurse)]

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, buffer) for every registered buffer of this module and its sub-modules."""
        return self._named_members(Module._own_buffers, prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        return [b for _, b in self.named_buffers(recurse=recurse)]

    def apply(self, fn):
        """Calls fn(module) on every sub-module (children first), then on this one; returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---- modes and gradients --------------------------------------------------

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def train(self, mode=True):
        """Sets `training` on this module and every sub-module (Dropout and BatchNorm read it)."""
        if not isinstance(mode, bool):
            raise ValueError(f"train: mode must be a bool, got {type(mode).__name__}")
        for module in self.modules():
            module.training = mode
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Sets requires_grad on every parameter; frozen ones stay parameters (and in state_dict())."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Drops every parameter's grad (set_to_none=False: fills it with zeros instead)."""
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                with no_grad():
                    p.grad.copy_(0)

    # ---- placement and dtype ------------------------------------------------

    def to(self, *args, **kwargs):
        """model.to(device) / .to(dtype) / .to(device, dtype), as Tensor.to reads them (see
        gt._tensor.device): a device gt's workers can honour leaves everything where it is; a
        dtype converts every floating-point parameter and buffer (each replaced by a converted
        copy that keeps requires_grad, so make optimizers afterwards). Returns self."""
        from .._tensor.device import parse_to_args
        _, dtype, _ = parse_to_args("Module.to", args, kwargs)
        if dtype is not None:
            if not dtype.is_floating_point:
                raise TypeError(f"Module.to only takes floating point dtypes, got {dtype!r}")
            self._convert_floats(dtype)
        return self

    def cuda(self, device=None):
        """Accepted where the workers decide the device (see Tensor.cuda); returns self."""
        return self.to("cuda" if device is None else device)

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to(dtype=_dtype.float32)

    def double(self):
        return self.to(dtype=_dtype.float64)

    def _convert_floats(self, dtype):
        for module in self.modules():
            params, buffers, _ = module._registries()
            for name in params + buffers:
                value = module.__dict__.get(name)
                if value is not None and value.is_floating_point() and value.dtype != dtype:
                    converted = value.detach().to(dtype).requires_grad_(value.requires_grad)
                    object.__setattr__(module, name, converted)

    # ---- state --------------------------------------------------------------------

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """An OrderedDict {dotted name: tensor} of every parameter and persistent buffer, with
        PyTorch's key names and order. Values share the remote data (detached unless keep_vars);
        gt.save writes it, numpy() copies it."""
        return _state.state_dict(self, destination, prefix, keep_vars)

    def load_state_dict(self, state_dict, strict=True):
        """Copies the values of `state_dict` (gt tensors, NumPy arrays, or anything np.asarray reads,
        such as CPU torch tensors) into the parameters and buffers, in place. Every key, shape and
        dtype is checked before anything is copied: on any error (a RuntimeError listing each
        problem, as PyTorch's) the module is left as it was. strict=False skips missing and
        unexpected keys. Returns (missing_keys, unexpected_keys), a named tuple as PyTorch's."""
        return _state.load_state_dict(self, state_dict, strict)

    # ---- pickling and printing -------------------------------------------------------

    def __repr__(self):
        children = list(self.named_children())
        if not children:
            return f"{type(self).__name__}({self.extra_repr()})"
        lines = [f"{type(self).__name__}("]
        for name, m in children:
            lines.append("  (" + name + "): " + repr(m).replace("\n", "\n  "))
        lines.append(")")
        return "\n".join(lines)

    def extra_repr(self):
        return ""

