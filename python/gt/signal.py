"""Signal scopes: name a region of code so its tensors and ops follow that
signal's config (see gt.config).

    with gt.signal.context('forward_layer1'):
        x = gt.randn(100, 64)
        y = x @ w

    gt.signal.enter('layer1'); ...; gt.signal.exit('layer1')

    x_sharded = gt.signal.tensor(x, name='layer1')   # a copy placed by layer1's config

    @gt.signal.context('layer1', compile=True)      # a decorator: every call is a scope
    def layer(x): ...

Every instruction issued inside a scope carries the innermost signal name.
Scopes are per thread and nest. A scope's `backward` signal (given here or
by its config) is the one the gradient computation of ops recorded inside
it runs under: backward() computes their gradients in that signal's scope,
on its workers (pipeline parallelism). Opening a scope whose backward signal
has no registered config raises gt.Error naming the signal and the field.
`compile=True` (or `compile: true` in the signal's config) makes the scope a
compile unit: a compile stage replays it as one instruction from its first use.
"""

import threading

from . import _C
from . import config as _config

__all__ = ["context", "enter", "exit", "tensor", "current", "current_backward"]

_local = threading.local()


def _stack():
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


def _check(name, what):
    if not isinstance(name, str) or not name:
        raise TypeError(f"{what}: a signal name must be a non-empty str, got {name!r}")


def enter(name, backward=None, compile=False):
    """Opens scope `name` on this thread (close it with exit(name))."""
    _check(name, "signal.enter")
    if backward is not None:
        _check(backward, "signal.enter: backward")
    if not isinstance(compile, bool):
        raise TypeError(f"signal.enter: compile must be a bool, got {compile!r}")
    _C.signal_enter(name, compile=compile, backward=backward or "")
    _stack().append((name, backward))


def exit(name):
    """Closes scope `name`, which must be the innermost open one on this thread."""
    _check(name, "signal.exit")
    stack = _stack()
    if not stack:
        raise RuntimeError(f"signal.exit('{name}'): no signal scope is open")
    if stack[-1][0] != name:
        raise RuntimeError(f"signal.exit('{name}'): the innermost open scope is '{stack[-1][0]}'")
    _C.signal_exit(name)
    stack.pop()


class context:
    """`with gt.signal.context(name, backward=None, compile=False):` a scope
    for the block (also usable as a decorator)."""

    def __init__(self, name, backward=None, compile=False):
        _check(name, "signal.context")
        if backward is not None:
            _check(backward, "signal.context: backward")
        self.name = name
        self.backward = backward
        self.compile = compile

    def __enter__(self):
        enter(self.name, self.backward, self.compile)
        return self

    def __exit__(self, *exc):
        exit(self.name)
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with context(self.name, self.backward, self.compile):
                return fn(*args, **kwargs)
        return wrapper

    def __repr__(self):
        return f"gt.signal.context({self.name!r}, backward={self.backward!r}, compile={self.compile!r})"


def tensor(x, name, backward=None):
    """Copy-shards `x`: a new tensor with x's values, placed as signal `name`'s
    config places a tensor made in its scope (split on `shard.axis` over
    `shard.workers`, or a full copy on every live worker for `replicated:
    true`); `x` itself is left where it is. Without a config for `name` the
    copy is whole, like any tensor made in an unconfigured scope.

    The copy is made inside scope `name` (with `backward`, as for
    context(name, backward=...)): a zeros tensor of x's shape and dtype is
    created there, so the sharding stage places it per the config, and x's
    values are written into it (the stage cuts or copies x onto the shards).
    When `x` requires a gradient (and gradients are enabled) the write is an
    add of negative zeros instead, which leaves every value (signed zeros
    included) unchanged and is on the autograd tape: the copy's gradient
    flows back to `x`, computed in the `backward` signal's scope if given.

    Limit: a tensor made before this client's first signal config has no
    placement record at the sharding stage; copying it into placed shards is
    refused at the next sync point (the stage names the tensor), or, for the
    gradient path, the copy is made whole. Make such tensors after loading
    the configs.
    """
    from . import _tensor

    if not isinstance(x, _tensor.Tensor):
        raise TypeError(f"signal.tensor: expected a gt Tensor, got {type(x).__name__}")
    _check(name, "signal.tensor")
    with context(name, backward):
        if x.requires_grad and _C.is_grad_enabled():
            # The clone keeps the copy's tape entry a `clone` in the scope (as before).
            return (_tensor.full(list(x.shape), -0.0, dtype=x.dtype) + x).clone()
        out = _tensor.zeros(list(x.shape), dtype=x.dtype)
        out.copy_(x)
        return out


def current():
    """The innermost open signal on this thread, or None."""
    return _C.current_signal() or None


def current_backward():
    """The backward signal of the innermost open scope: the one given to
    context/enter, else its config's `backward`, else None."""
    stack = _stack()
    if not stack:
        return None
    name, backward = stack[-1]
    if backward is not None:
        return backward
    cfg = _config.get_config(name)
    return cfg.backward_signal if cfg is not None else None
