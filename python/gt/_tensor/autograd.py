"""gt.Tensor's autograd surface: requires_grad, .grad, backward(), detach().
The tape itself is the C++ client's."""

from .base import TensorBase, data_to_c


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
        self._c.backward(g, bool(retain_graph))

    def detach(self):
        return self._wrap(self._c.detach())

    @property
    def data(self):
        """The same remote data, detached from autograd."""
        return self._wrap(self._c.detach())
