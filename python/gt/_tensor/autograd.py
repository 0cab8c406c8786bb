"""gt.Tensor's autograd surface: requires_grad, .grad, backward(), detach().
The tape itself is the C++ client's."""

import weakref

from .base import TensorBase, data_to_c

# Leaves with post-accumulate-grad hooks: id(tensor) -> (weakref to it, [hook]).
_grad_hooks = {}


def _grad_id(t):
    g = t._c.grad()
    return None if g is None else g.id()


def _watched():
    """(tensor, hooks, its grad's id) for every live leaf with hooks."""
    out = []
    for key, (ref, hooks) in list(_grad_hooks.items()):
        t = ref()
        if t is None:
            del _grad_hooks[key]
        else:
            out.append((t, hooks, _grad_id(t)))
    return out


class _HookHandle:
    def __init__(self, hooks, hook):
        self._hooks, self._hook = hooks, hook

    def remove(self):
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


class AutogradOps:
    """gt.Tensor's autograd methods (a mixin of core.Tensor)."""

    __slots__ = ()

    @property
    def requires_grad(self):
        return self._c.requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self._c.requires_grad_(bool(value))

    def requires_grad_(self, requires_grad=True):
        self._c.requires_grad_(bool(requires_grad))
        return self

    @property
    def is_leaf(self):
        return self._c.is_leaf

    @property
    def grad(self):
        """The accumulated gradient of a leaf (None until a backward() reaches it)."""
        g = self._c.grad()
        return None if g is None else self._wrap(g)

    @grad.setter
    def grad(self, value):
        if value is None:
            self._c.set_grad(None)
        elif isinstance(value, TensorBase):
            self._c.set_grad(value._c)
        else:
            raise TypeError(f"grad must be a gt Tensor or None, got {type(value).__name__}")

    def backward(self, gradient=None, retain_graph=False):
        """Accumulates d(self)/d(leaf) into every leaf's .grad.

        Without `gradient` this tensor must have one element; otherwise
        `gradient` (a tensor or array of this tensor's shape) seeds it.
        """
        g = None
        if gradient is not None:
            g = gradient._c if isinstance(gradient, TensorBase) else data_to_c(gradient, self.dtype)
        watched = _watched() if _grad_hooks else ()
        self._c.backward(g, bool(retain_graph))
        for t, hooks, before in watched:
            if _grad_id(t) not in (None, before):  # this backward gave it a new gradient
                for hook in list(hooks):
                    hook(t)

    def register_post_accumulate_grad_hook(self, hook):
        """Calls hook(self) after each backward() that gives this leaf a new .grad (PyTorch's
        register_post_accumulate_grad_hook; gt.distributed.fully_shard reshards gradients so).
        Returns a handle whose remove() unregisters it."""
        if not callable(hook):
            raise TypeError(f"register_post_accumulate_grad_hook: expected a callable, got {type(hook).__name__}")
        if not (self.requires_grad and self.is_leaf):
            raise RuntimeError("register_post_accumulate_grad_hook: only a leaf that requires grad has a .grad")
        entry = _grad_hooks.get(id(self))
        if entry is None or entry[0]() is not self:
            entry = (weakref.ref(self), [])
            _grad_hooks[id(self)] = entry
        entry[1].append(hook)
        return _HookHandle(entry[1], hook)

    def detach(self):
        return self._wrap(self._c.detach())

    @property
    def data(self):
        """The same remote data, detached from autograd."""
        return self._wrap(self._c.detach())
