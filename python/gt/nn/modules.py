"""Layers and losses (gt.nn.Linear, ...), on the Module base class of module.py.

A Module's parameters, buffers and sub-modules are the ones PyTorch's would
be (see module.py); no registration call is needed beyond assignment:

    class MLP(Module):
        def __init__(self):
            super().__init__()
            self.fc1 = Linear(784, 256)
            self.fc2 = Linear(256, 10)

        def forward(self, x):
            return self.fc2(self.fc1(x).relu())
"""

from .. import _C
from .._tensor import Tensor, _next_seed, _wrap, tensor
from . import functional as F
from .module import Module

__all__ = ["Module", "Linear", "Sequential", "ModuleList", "Embedding", "LayerNorm", "Dropout", "ReLU", "GELU",
           "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Identity",
           "MSELoss", "BCELoss", "CrossEntropyLoss", "Parameter"]


def Parameter(data, requires_grad=True):
    """A leaf tensor sharing `data`'s remote data, requiring grad (PyTorch's nn.Parameter)."""
    if not isinstance(data, Tensor):
        data = tensor(data)
    return data.detach().requires_grad_(requires_grad)


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
        for name, p in (("weight", c.weight), ("bias", c.bias)):
            self.register_parameter(name, None if p is None else _wrap(p).requires_grad_(True))

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
