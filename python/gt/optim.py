"""Optimizers (gt::nn::SGD and gt::nn::Adam, bound). step() updates every
parameter in place, on its worker; parameters without a grad are skipped."""

from . import _C
from ._tensor import Tensor

__all__ = ["SGD", "Adam", "AdamW"]


def _params(params, what):
    params = list(params)
    if not params:
        raise ValueError(f"{what}: got an empty parameter list")
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError(f"{what}: parameter {i} is a {type(p).__name__}, not a gt Tensor")
    return params


def _number(value, name, what, low=0.0, high=None):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: {name} must be a number, got {type(value).__name__}") from None
    if v < low or (high is not None and v >= high):
        bound = f"in [{low}, {high})" if high is not None else f">= {low}"
        raise ValueError(f"{what}: {name} must be {bound}, got {value}")
    return v


class SGD:
    """p -= lr * (grad + weight_decay * p), with momentum as PyTorch's SGD.

    The hyperparameters are fixed at construction.
    """

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0):
        self.params = _params(params, "SGD")
        self._hyper = {"lr": _number(lr, "lr", "SGD"), "momentum": _number(momentum, "momentum", "SGD"),
                       "weight_decay": _number(weight_decay, "weight_decay", "SGD")}
        self._c = _C.SGD([p._c for p in self.params], self.lr, self.momentum, self.weight_decay)

    lr = property(lambda self: self._hyper["lr"], doc="Fixed at construction.")
    momentum = property(lambda self: self._hyper["momentum"])
    weight_decay = property(lambda self: self._hyper["weight_decay"])

    def step(self):
        self._c.step()

    def zero_grad(self):
        """Sets every parameter's grad to None."""
        self._c.zero_grad()

    def __repr__(self):
        return f"SGD(lr={self.lr}, momentum={self.momentum}, weight_decay={self.weight_decay})"


class Adam:
    """Adam as PyTorch's (bias-corrected moments; L2 weight decay added to the grad).

    The hyperparameters are fixed at construction.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.params = _params(params, "Adam")
        b1, b2 = betas
        self._hyper = {"lr": _number(lr, "lr", "Adam"),
                       "betas": (_number(b1, "betas[0]", "Adam", 0.0, 1.0), _number(b2, "betas[1]", "Adam", 0.0, 1.0)),
                       "eps": _number(eps, "eps", "Adam"),
                       "weight_decay": _number(weight_decay, "weight_decay", "Adam")}
        self._c = _C.Adam([p._c for p in self.params], self.lr, self.betas[0], self.betas[1], self.eps,
                          self.weight_decay)

    lr = property(lambda self: self._hyper["lr"], doc="Fixed at construction.")
    betas = property(lambda self: self._hyper["betas"])
    eps = property(lambda self: self._hyper["eps"])
    weight_decay = property(lambda self: self._hyper["weight_decay"])

    def step(self):
        self._c.step()

    def zero_grad(self):
        """Sets every parameter's grad to None."""
        self._c.zero_grad()

    def __repr__(self):
        return f"Adam(lr={self.lr}, betas={self.betas}, eps={self.eps}, weight_decay={self.weight_decay})"


class AdamW(Adam):
    """Adam with decoupled weight decay (p *= 1 - lr * weight_decay each step), as PyTorch's AdamW.

    The hyperparameters are fixed at construction.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, lr, betas, eps, 0.0)
        self._hyper["weight_decay"] = _number(weight_decay, "weight_decay", "AdamW")
        self._c = _C.AdamW([p._c for p in self.params], self.lr, self.betas[0], self.betas[1], self.eps,
                           self.weight_decay)

    def __repr__(self):
        return f"AdamW(lr={self.lr}, betas={self.betas}, eps={self.eps}, weight_decay={self.weight_decay})"
