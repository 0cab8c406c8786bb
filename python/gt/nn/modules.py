"""Modules: objects that hold parameters and compute a forward pass.

A Module's parameters are found from its attributes, in the order they were
first assigned: every leaf Tensor that requires grad, every sub-Module's
parameters (recursively), and the same inside lists, tuples and dicts.
No registration call is needed:

    class MLP(Module):
        def __init__(self):
            super().__init__()
            self.fc1 = Linear(784, 256)
            self.fc2 = Linear(256, 10)

        def forward(self, x):
            return self.fc2(self.fc1(x).relu())
"""

from .. import _C
from .._grad import no_grad
from .._tensor import Tensor, _next_seed, _wrap, tensor
from . import functional as F

__all__ = ["Module", "Linear", "Sequential", "ModuleList", "Embedding", "LayerNorm", "Dropout", "ReLU", "GELU",
           "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Identity",
           "MSELoss", "BCELoss", "CrossEntropyLoss", "Parameter"]


def Parameter(data, requires_grad=True):
    """A leaf tensor sharing `data`'s remote data, requiring grad (PyTorch's nn.Parameter)."""
    if not isinstance(data, Tensor):
        data = tensor(data)
    return data.detach().requires_grad_(requires_grad)


def _walk(value, path, seen_tensors, seen_modules):
    """(dotted name, Tensor) for every parameter reachable from `value`."""
    if isinstance(value, Tensor):
        if value.requires_grad and value.is_leaf and not any(value._c.is_same(s) for s in seen_tensors):
            seen_tensors.append(value._c)
            yield path, value
    elif isinstance(value, Module):
        if id(value) in seen_modules:
            return
        seen_modules.add(id(value))
        for name, attr in vars(value).items():
            yield from _walk(attr, f"{path}.{name}" if path else name, seen_tensors, seen_modules)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}.{i}", seen_tensors, seen_modules)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}", seen_tensors, seen_modules)


def _submodules(value, path, seen):
    if isinstance(value, Module):
        if id(value) in seen:
            return
        seen.add(id(value))
        yield path, value
        for name, attr in vars(value).items():
            yield from _submodules(attr, f"{path}.{name}" if path else name, seen)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _submodules(item, f"{path}.{i}", seen)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _submodules(item, f"{path}.{key}", seen)


class Module:
    """Base class of layers and models; subclasses define forward()."""

    def __init__(self):
        self.training = True

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def named_parameters(self, prefix=""):
        """(dotted name, parameter) pairs, e.g. ('fc1.weight', ...), each parameter once."""
        for name, p in _walk(self, "", [], set()):
            yield (f"{prefix}.{name}" if prefix else name), p

    def parameters(self):
        """Every parameter (each once), in attribute assignment order."""
        return [p for _, p in self.named_parameters()]

    def register_buffer(self, name, tensor):
        """Keeps `tensor` (no gradient) as attribute `name`: a constant of the
        module, such as a causal mask, made once with it rather than at each
        forward (so it is placed where the module's parameters are); listed
        by named_buffers(), not by parameters(). PyTorch's register_buffer."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: '{name}' must be a gt Tensor or None, got {type(tensor).__name__}")
        if tensor is not None and tensor.requires_grad:
            raise ValueError(f"register_buffer: '{name}' requires grad; a buffer is not trained (use a parameter)")
        setattr(self, name, tensor)
        names = self.__dict__.setdefault("_buffer_names", [])
        if name not in names:
            names.append(name)

    def named_buffers(self):
        """(dotted name, buffer) for every registered buffer of this module and its sub-modules."""
        for path, m in self.named_modules():
            for name in m.__dict__.get("_buffer_names", []):
                if getattr(m, name) is not None:
                    yield (f"{path}.{name}" if path else name), getattr(m, name)

    def buffers(self):
        return [b for _, b in self.named_buffers()]

    def named_modules(self):
        """(dotted name, module) for this module ('') and every sub-module."""
        return list(_submodules(self, "", set()))

    def modules(self):
        return [m for _, m in self.named_modules()]

    def children(self):
        return [m for name, m in self.named_modules() if name and "." not in name]

    def zero_grad(self):
        """Sets every parameter's grad to None."""
        for p in self.parameters():
            p.grad = None

    def train(self, mode=True):
        """Marks the module and its sub-modules as training (no layer here behaves differently)."""
        for m in self.modules():
            m.training = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    def state_dict(self):
        """{name: detached parameter} (same remote data; numpy() it to keep a copy)."""
        return {name: p.detach() for name, p in self.named_parameters()}

    def load_state_dict(self, state):
        """Copies values (tensors or arrays of the same shapes) into the parameters, in place."""
        params = dict(self.named_parameters())
        missing = [n for n in params if n not in state]
        unexpected = [n for n in state if n not in params]
        if missing or unexpected:
            raise KeyError(f"load_state_dict: missing {missing}, unexpected {unexpected}")
        with no_grad():
            for name, p in params.items():
                value = state[name]
                value = value if isinstance(value, Tensor) else tensor(value, dtype=p.dtype)
                if tuple(value.shape) != tuple(p.shape):
                    raise ValueError(f"load_state_dict: {name} has shape {p.shape}, got {value.shape}")
                p.copy_(value)

    def __repr__(self):
        children = [(n, m) for n, m in self.named_modules() if n and "." not in n]
        if not children:
            return f"{type(self).__name__}({self.extra_repr()})"
        lines = [f"{type(self).__name__}("]
        for name, m in children:
            lines.append("  (" + name + "): " + repr(m).replace("\n", "\n  "))
        lines.append(")")
        return "\n".join(lines)

    def extra_repr(self):
        return ""


class Linear(Module):
    """y = x @ weight^T + bias, weight (out_features, in_features).

    Weight and bias start uniform in [-1/sqrt(in_features), 1/sqrt(in_features)],
    as in PyTorch (made by gt::nn::Linear). `seed` fixes them; without it the
    sequence set by gt.manual_seed is used, else the workers' generators.
    """

    def __init__(self, in_features, out_features, bias=True, seed=None):
        super().__init__()
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        c = _C.Linear(self.in_features, self.out_features, bool(bias), _next_seed() if seed is None else int(seed))
        self.weight = _wrap(c.weight)
        self.bias = _wrap(c.bias) if c.bias is not None else None
        for p in (self.weight, self.bias):
            if p is not None and not p.requires_grad:
                p.requires_grad_(True)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class _Numbered(Module):
    """Sub-modules held as attributes '0', '1', ... (named so in named_parameters(), as PyTorch's)."""

    def _layers(self):
        return [v for k, v in vars(self).items() if k.isdigit()]

    def __getitem__(self, i):
        return self._layers()[i]

    def __len__(self):
        return len(self._layers())

    def __iter__(self):
        return iter(self._layers())


class Sequential(_Numbered):
    """Applies its modules in order; named '0', '1', ... in named_parameters()."""

    def __init__(self, *modules):
        super().__init__()
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(f"Sequential: argument {i} is a {type(m).__name__}, not a Module")
            setattr(self, str(i), m)

    def forward(self, x):
        for m in self._layers():
            x = m(x)
        return x


class ReLU(Module):
    def forward(self, x):
        return x.relu()


class Embedding(Module):
    """A lookup table: weight (num_embeddings, embedding_dim), initialized N(0, 1) as in PyTorch."""

    def __init__(self, num_embeddings, embedding_dim, seed=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        from .._tensor import randn
        self.weight = Parameter(randn(self.num_embeddings, self.embedding_dim, seed=seed))

    def forward(self, input):
        return F.embedding(input, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LayerNorm(Module):
    """Normalizes the trailing `normalized_shape` dims; weight ones and bias zeros (elementwise_affine)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = float(eps)
        from .._tensor import ones, zeros
        self.weight = Parameter(ones(*self.normalized_shape)) if elementwise_affine else None
        self.bias = Parameter(zeros(*self.normalized_shape)) if elementwise_affine else None

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class Dropout(Module):
    """F.dropout in training mode (module.train()), the identity in eval mode (module.eval())."""

    def __init__(self, p=0.5):
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = float(p)

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class ModuleList(_Numbered):
    """A list of modules, named '0', '1', ... in named_parameters() (as PyTorch's)."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList: expected a Module, got {type(module).__name__}")
        setattr(self, str(len(self)), module)
        return self


class GELU(Module):
    """The exact (erf) GELU, as torch.nn.GELU()."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate != "none":
            raise ValueError(f"GELU: only approximate='none' (the exact erf form) is supported, got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x)


class Sigmoid(Module):
    def forward(self, x):
        return x.sigmoid()


class Tanh(Module):
    def forward(self, x):
        return x.tanh()


class Identity(Module):
    def forward(self, x):
        return x


class Softmax(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x.softmax(self.dim)


class LogSoftmax(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x.log_softmax(self.dim)


class MSELoss(Module):
    def forward(self, input, target):
        return F.mse_loss(input, target)


class BCELoss(Module):
    def forward(self, input, target):
        return F.binary_cross_entropy(input, target)


class CrossEntropyLoss(Module):
    def __init__(self, ignore_index=-100):
        super().__init__()
        self.ignore_index = int(ignore_index)

    def forward(self, input, target):
        return F.cross_entropy(input, target, ignore_index=self.ignore_index)
