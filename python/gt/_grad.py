"""Grad mode: whether ops on tensors that require grad are recorded (per thread)."""

import functools

from . import _C


def is_grad_enabled():
    return _C.is_grad_enabled()


class _GradMode:
    """Sets grad mode for a `with` block or a decorated function, then restores it."""

    _mode = True

    def __init__(self):
        self._saved = []

    def __enter__(self):
        self._saved.append(_C.is_grad_enabled())
        _C.set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        _C.set_grad_enabled(self._saved.pop())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """`with gt.no_grad():` (or `@gt.no_grad()`): nothing inside is recorded for autograd."""

    _mode = False


class enable_grad(_GradMode):
    """Turns recording back on inside a no_grad block."""

    _mode = True


class set_grad_enabled:
    """`gt.set_grad_enabled(False)` sets grad mode now; used with `with`, it is restored at the end."""

    def __init__(self, mode):
        self._previous = _C.is_grad_enabled()
        _C.set_grad_enabled(bool(mode))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C.set_grad_enabled(self._previous)
        return False
