"""gt.Tensor arithmetic: operators (with a scalar, array or tensor on either
side), comparisons, elementwise functions and the in-place forms."""

import numpy as np

from .. import _C, _dtype
from .args import is_scalar, scalar_value
from .base import TensorBase, data_to_c, operand


def _binary(a, b, method):
    if is_scalar(b):
        return a._wrap(getattr(a._c, method)(scalar_value(b, dtype=a.dtype)))
    c = operand(b, a)
    if c is None:
        return NotImplemented
    return a._wrap(getattr(a._c, method)(c))


def _reflected(a, b, scalar_method, tensor_method):
    """b (op) a, for b that is not a gt Tensor."""
    if is_scalar(b):
        return a._wrap(getattr(a._c, scalar_method)(scalar_value(b, dtype=a.dtype)))
    c = operand(b, a)
    if c is None:
        return NotImplemented
    return a._wrap(getattr(c, tensor_method)(a._c))


def _tensor_operand(other, like, what):
    """`other` (a tensor or an array) as a C++ tensor; a Python scalar is a
    TypeError, as in PyTorch's maximum / minimum."""
    c = operand(other, like)
    if c is None:
        raise TypeError(f"{what}(): argument 'other' must be a Tensor or an array, not {type(other).__name__}")
    return c


_SYMBOLS = {"iadd": "+=", "isub": "-=", "imul": "*="}


def _inplace_scalar_kept_type(t, o, method):
    """PyTorch's reading of a Python scalar in place on an integer or bool
    tensor `t`, which a float64 on the wire cannot carry: a float (2.0 too)
    makes a float result, refused; a bool on a bool tensor keeps it bool
    (+= is or, *= is and). True when done here; -= is left to the op, which
    refuses a bool operand."""
    what = _SYMBOLS[method]
    if isinstance(o, (float, np.floating)):
        _C.check_in_place_cast(_dtype.float32._c, t.dtype._c, what)  # raises gt.Error
    if t.dtype is _dtype.bool_ and isinstance(o, (bool, np.bool_)) and method != "isub":  # -=: the op refuses it
        if (method == "iadd") == bool(o):
            t._c.fill_(1.0 if o else 0.0)
        return True
    return False


class ArithmeticOps:
    """gt.Tensor's arithmetic methods (a mixin of core.Tensor)."""

    __slots__ = ()

    # ---- arithmetic -------------------------------------------------------
    # + - * / @ test for a tensor operand before _binary and call the
    # extension's tensor-only form (`add_tensor`: one pybind11 overload): a
    # loop of `x = x + y` spent a third of its client thread in _binary's
    # checks for scalars and arrays and in pybind11's failed scalar overload.

    def __add__(self, o):
        if isinstance(o, TensorBase):  # the common case first
            return self._wrap(self._c.add_tensor(o._c))
        return _binary(self, o, "add")

    def __sub__(self, o):
        if isinstance(o, TensorBase):  # the common case first
            return self._wrap(self._c.sub_tensor(o._c))
        return _binary(self, o, "sub")

    def __mul__(self, o):
        if isinstance(o, TensorBase):  # the common case first
            return self._wrap(self._c.mul_tensor(o._c))
        return _binary(self, o, "mul")

    def __truediv__(self, o):
        if isinstance(o, TensorBase):  # the common case first
            return self._wrap(self._c.div_tensor(o._c))
        return _binary(self, o, "div")

    def __radd__(self, o):
        return _reflected(self, o, "radd", "add")

    def __rsub__(self, o):
        return _reflected(self, o, "rsub", "sub")

    def __rmul__(self, o):
        return _reflected(self, o, "rmul", "mul")

    def __rtruediv__(self, o):
        return _reflected(self, o, "rdiv", "div")

    def __pow__(self, exponent):
        # A float exponent makes a float result of an integer or bool tensor, as
        # in PyTorch (int ** 2.0 is float32; bool ** -1.0 has inf), though the
        # wire's float64 reads 2.0 as the int 2.
        if isinstance(exponent, (float, np.floating)) and not self.dtype.is_floating_point:
            return self.to(_dtype.float32).__pow__(exponent)
        return _binary(self, exponent, "pow")

    def __rpow__(self, base):
        if is_scalar(base):
            like = self.dtype if self.dtype.is_floating_point else None
            return self._wrap(data_to_c(base, like).pow(self._c))
        c = operand(base, self)
        if c is None:
            return NotImplemented
        return self._wrap(c.pow(self._c))

    def pow(self, exponent):
        return self.__pow__(exponent)

    def __matmul__(self, o):
        if isinstance(o, TensorBase):
            return self._wrap(self._c.matmul(o._c))
        c = operand(o, self)
        if c is None:
            return NotImplemented
        return self._wrap(self._c.matmul(c))

    def __rmatmul__(self, o):
        c = operand(o, self)
        if c is None:
            return NotImplemented
        return self._wrap(c.matmul(self._c))

    def matmul(self, o):
        return self.__matmul__(o)

    def add(self, o):
        return self.__add__(o)

    def sub(self, o):
        return self.__sub__(o)

    def mul(self, o):
        return self.__mul__(o)

    def div(self, o):
        return self.__truediv__(o)

    def __neg__(self):
        return self._wrap(self._c.neg())

    def __pos__(self):
        return self

    def __abs__(self):
        return self._wrap(self._c.abs())

    def neg(self):
        return self._wrap(self._c.neg())

    # ---- comparisons --------------------------------------------------------
    # A bool mask, as PyTorch's; ~, & and | combine masks.

    def __gt__(self, o):
        return _binary(self, o, "gt")

    def __lt__(self, o):
        return _binary(self, o, "lt")

    def __ge__(self, o):
        return _binary(self, o, "ge")

    def __le__(self, o):
        return _binary(self, o, "le")

    def __eq__(self, o):
        return _binary(self, o, "eq")

    def __ne__(self, o):
        eq = _binary(self, o, "eq")
        return eq if eq is NotImplemented else eq == 0

    def _mask_pair(self, o, what):
        if self.dtype.name != "bool" or getattr(getattr(o, "dtype", None), "name", None) != "bool":
            raise TypeError(f"{what}: gt supports it between bool tensors (masks) only")

    def __invert__(self):
        """Logical not of a bool mask."""
        if self.dtype.name != "bool":
            raise TypeError("~: gt supports it on bool tensors (masks) only")
        return self == 0

    def __and__(self, o):
        self._mask_pair(o, "&")
        return self * o  # bool * bool is bool: logical and

    def __or__(self, o):
        self._mask_pair(o, "|")
        return self + o  # bool + bool is bool: logical or

    # Tensors are hashable by identity (as in PyTorch), though == is elementwise.
    __hash__ = object.__hash__

    def gt(self, o):
        return self.__gt__(o)

    def lt(self, o):
        return self.__lt__(o)

    def ge(self, o):
        return self.__ge__(o)

    def le(self, o):
        return self.__le__(o)

    def eq(self, o):
        return self.__eq__(o)

    def ne(self, o):
        return self.__ne__(o)

    # ---- elementwise functions -------------------------------------------

    def exp(self):
        return self._wrap(self._c.exp())

    def log(self):
        return self._wrap(self._c.log())

    def sqrt(self):
        return self._wrap(self._c.sqrt())

    def relu(self):
        return self._wrap(self._c.relu())

    def sigmoid(self):
        return self._wrap(self._c.sigmoid())

    def tanh(self):
        return self._wrap(self._c.tanh())

    def abs(self):
        return self._wrap(self._c.abs())

    def clone(self):
        return self._wrap(self._c.clone())

    def erf(self):
        return self._wrap(self._c.erf())

    def maximum(self, other):
        """The larger of self and other elementwise, broadcasting (torch.maximum): NaN where either is NaN."""
        return self._wrap(self._c.maximum(_tensor_operand(other, self, "maximum")))

    def minimum(self, other):
        """The smaller of self and other elementwise, broadcasting (torch.minimum): NaN where either is NaN."""
        return self._wrap(self._c.minimum(_tensor_operand(other, self, "minimum")))

    def clamp(self, min=None, max=None):
        """Each element held within [min, max] (numbers or tensors, broadcasting; torch.clamp): the
        gradient passes where the element was kept, NaN stays NaN."""
        if min is None and max is None:
            raise ValueError("torch.clamp: At least one of 'min' or 'max' must not be None")
        from .creation import where
        out = self
        if min is not None:
            out = where(out < min, min, out)
        if max is not None:
            out = where(out > max, max, out)
        return out

    clip = clamp

    def view_as(self, other):
        """This tensor in other's shape (a reshape)."""
        return self.reshape(*other.shape)

    def type_as(self, other):
        """This tensor converted to other's dtype."""
        return self.to(other.dtype)

    def tril(self, diagonal=0):
        """The lower triangle of the last two dims from `diagonal` on, zeros elsewhere (torch.tril)."""
        return self._wrap(self._c.tril(int(diagonal)))

    def triu(self, diagonal=0):
        """The upper triangle of the last two dims from `diagonal` on, zeros elsewhere (torch.triu)."""
        return self._wrap(self._c.triu(int(diagonal)))

    def masked_fill(self, mask, value):
        """`value` where `mask` is true (a bool tensor or a nonzero mask; broadcast), self elsewhere."""
        c = operand(mask, self)
        if c is None:
            raise TypeError(f"masked_fill: expected a tensor mask, got {type(mask).__name__}")
        if not is_scalar(value):
            raise TypeError(f"masked_fill: expected a number as the value, got {type(value).__name__}")
        return self._wrap(self._c.masked_fill(c, scalar_value(value, "masked_fill", self.dtype)))

    # ---- in place ---------------------------------------------------------

    def _inplace(self, o, method):
        if is_scalar(o):
            if not self.dtype.is_floating_point and _inplace_scalar_kept_type(self, o, method):
                return self
            getattr(self._c, method)(scalar_value(o, dtype=self.dtype))
            return self
        c = operand(o, self)
        if c is None:
            return NotImplemented
        getattr(self._c, method)(c)
        return self

    def __iadd__(self, o):
        return self._inplace(o, "iadd")

    def __isub__(self, o):
        return self._inplace(o, "isub")

    def __imul__(self, o):
        return self._inplace(o, "imul")

    def __itruediv__(self, o):
        q = self / o
        if q is NotImplemented:
            return q
        self._c.assign_result_(q._c, "/=")
        return self

    def add_(self, o, *, alpha=1):
        """self += alpha * o in place (torch.Tensor.add_); one op when `o` is a tensor of this dtype."""
        if not is_scalar(alpha):
            raise TypeError(f"add_: expected a number as alpha, got {type(alpha).__name__}")
        if alpha == 1:
            if self.__iadd__(o) is NotImplemented:
                raise TypeError(f"add_: cannot add {type(o).__name__}")
            return self
        if is_scalar(o):
            return self.__iadd__(o * alpha)
        c = operand(o, self)
        if c is None:
            raise TypeError(f"add_: cannot add {type(o).__name__}")
        self._c.add_(c, float(alpha))
        return self

    def sub_(self, o, *, alpha=1):
        """self -= alpha * o in place (torch.Tensor.sub_)."""
        if not is_scalar(alpha):
            raise TypeError(f"sub_: expected a number as alpha, got {type(alpha).__name__}")
        return self.add_(o, alpha=-alpha)

    def mul_(self, o):
        return self.__imul__(o)

    def div_(self, o):
        return self.__itruediv__(o)

    def copy_(self, src):
        """Overwrites this tensor's data with `src` (a tensor, array or scalar broadcasting to its shape)."""
        if is_scalar(src):
            self._c.fill_(scalar_value(src, "copy_", self.dtype))
            return self
        c = operand(src, self)
        if c is None:
            raise TypeError(f"copy_: cannot copy from {type(src).__name__}")
        self._c.copy_(c)
        return self

    def fill_(self, value):
        self._c.fill_(scalar_value(value, "fill_", self.dtype))
        return self

    def zero_(self):
        self._c.fill_(0.0)
        return self
