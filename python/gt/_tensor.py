"""gt.Tensor and the functions that create tensors.

A Tensor is a handle to a tensor that lives on a gt worker: every operation
returns at once with the result's shape and dtype already known (a mismatch
raises right there), and only reading data (numpy(), item(), repr) waits.
This module turns Python idiom (operators with scalars on either side,
indexing, varargs shapes, NumPy inputs) into calls on the C++ client.
"""

import collections
import numbers
import operator
import threading

import numpy as np

from . import _C
from . import _dtype
from ._dtype import float32, int64

# What max / min over one dim return, as torch.return_types.max does.
MinMax = collections.namedtuple("MinMax", ["values", "indices"])

# Python and NumPy scalars that ops take as scalars (no tensor is made).
_SCALAR_TYPES = (int, float, np.integer, np.floating, np.bool_)
# Inputs that become a tensor when met as an operand.
_ARRAY_TYPES = (np.ndarray, list, tuple)


def _wrap(c):
    t = Tensor.__new__(Tensor)
    t._c = c
    return t


def _is_scalar(x):
    return isinstance(x, _SCALAR_TYPES)


def _index(x, what):
    """`x` as a Python int (ints and NumPy integers; not bools, not floats)."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{what}: expected an int, got bool")
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{what}: expected an int, got {type(x).__name__}") from None


def _shape_args(args, what):
    """A shape given as varargs (2, 3) or one sequence ((2, 3) or [2, 3])."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    return [_index(s, what) for s in args]


def _dims_arg(dim, axis, what):
    """Reduction axes from dim= or axis= (None: every dimension)."""
    if dim is not None and axis is not None:
        raise TypeError(f"{what}: give dim or axis, not both")
    d = dim if dim is not None else axis
    if d is None:
        return []
    if isinstance(d, (tuple, list)):
        return [_index(a, what) for a in d]
    return [_index(d, what)]


def _keepdims_arg(keepdim, keepdims):
    return bool(keepdim if keepdims is None else keepdims)


def _operand(x, like):
    """An operand that is not a Python scalar as a C++ tensor, or None if unsupported."""
    if isinstance(x, Tensor):
        return x._c
    if isinstance(x, _ARRAY_TYPES):
        return tensor(x, dtype=like.dtype if like.dtype.is_floating_point else None)._c
    return None


def _binary(a, b, method):
    if _is_scalar(b):
        return _wrap(getattr(a._c, method)(float(b)))
    c = _operand(b, a)
    if c is None:
        return NotImplemented
    return _wrap(getattr(a._c, method)(c))


def _reflected(a, b, scalar_method, tensor_method):
    """b (op) a, for b that is not a gt Tensor."""
    if _is_scalar(b):
        return _wrap(getattr(a._c, scalar_method)(float(b)))
    c = _operand(b, a)
    if c is None:
        return NotImplemented
    return _wrap(getattr(c, tensor_method)(a._c))


def _compare(a, b, method):
    if _is_scalar(b):
        return _wrap(getattr(a._c, method)(float(b)))
    c = _operand(b, a)
    if c is None:
        return NotImplemented
    return _wrap(getattr(a._c, method)(c))


class Tensor:
    """A tensor whose data lives on gt workers (see the module doc)."""

    __slots__ = ("_c", "__weakref__")
    # NumPy leaves mixed expressions (ndarray + Tensor) to the Tensor's methods.
    __array_ufunc__ = None
    __array_priority__ = 1000

    def __init__(self, *args, **kwargs):
        raise TypeError("make tensors with gt.tensor, gt.from_numpy, gt.randn, gt.zeros, gt.ones, gt.arange, ...")

    # ---- metadata ---------------------------------------------------------

    @property
    def shape(self):
        return self._c.shape

    def size(self, dim=None):
        shape = self._c.shape
        return shape if dim is None else shape[_index(dim, "size")]

    @property
    def dtype(self):
        return _dtype.from_c(self._c.dtype)

    @property
    def ndim(self):
        return self._c.dim()

    def dim(self):
        return self._c.dim()

    def numel(self):
        return self._c.numel()

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def __len__(self):
        shape = self._c.shape
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    # ---- arithmetic -------------------------------------------------------

    def __add__(self, o):
        return _binary(self, o, "add")

    def __sub__(self, o):
        return _binary(self, o, "sub")

    def __mul__(self, o):
        return _binary(self, o, "mul")

    def __truediv__(self, o):
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
        return _binary(self, exponent, "pow")

    def __rpow__(self, base):
        if _is_scalar(base):
            like = self.dtype if self.dtype.is_floating_point else None
            return _wrap(tensor(base, dtype=like)._c.pow(self._c))
        c = _operand(base, self)
        if c is None:
            return NotImplemented
        return _wrap(c.pow(self._c))

    def pow(self, exponent):
        return self.__pow__(exponent)

    def __matmul__(self, o):
        c = _operand(o, self)
        if c is None:
            return NotImplemented
        return _wrap(self._c.matmul(c))

    def __rmatmul__(self, o):
        c = _operand(o, self)
        if c is None:
            return NotImplemented
        return _wrap(c.matmul(self._c))

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
        return _wrap(self._c.neg())

    def __pos__(self):
        return self

    def __abs__(self):
        return _wrap(self._c.abs())

    def neg(self):
        return _wrap(self._c.neg())

    # Comparisons give a float mask (1.0 / 0.0) of the promoted floating type.
    def __gt__(self, o):
        return _compare(self, o, "gt")

    def __lt__(self, o):
        return _compare(self, o, "lt")

    def __ge__(self, o):
        return _compare(self, o, "ge")

    def __le__(self, o):
        return _compare(self, o, "le")

    def __eq__(self, o):
        return _compare(self, o, "eq")

    def __ne__(self, o):
        eq = _compare(self, o, "eq")
        return eq if eq is NotImplemented else 1 - eq

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
        return _wrap(self._c.exp())

    def log(self):
        return _wrap(self._c.log())

    def sqrt(self):
        return _wrap(self._c.sqrt())

    def relu(self):
        return _wrap(self._c.relu())

    def sigmoid(self):
        return _wrap(self._c.sigmoid())

    def tanh(self):
        return _wrap(self._c.tanh())

    def abs(self):
        return _wrap(self._c.abs())

    def clone(self):
        return _wrap(self._c.clone())

    # ---- reductions -------------------------------------------------------
    # dim (or axis): None for every dimension, an int, or a tuple of ints.
    # max and min: over one int dim, PyTorch's (values, indices) pair; over
    # every dim, several dims or `axis=`, the values only (NumPy's amax/amin).

    def sum(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        return _wrap(self._c.sum(_dims_arg(dim, axis, "sum"), _keepdims_arg(keepdim, keepdims)))

    def mean(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        return _wrap(self._c.mean(_dims_arg(dim, axis, "mean"), _keepdims_arg(keepdim, keepdims)))

    def max(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        return self._extreme("max", dim, keepdim, axis, keepdims)

    def min(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        return self._extreme("min", dim, keepdim, axis, keepdims)

    def _extreme(self, which, dim, keepdim, axis, keepdims):
        keep = _keepdims_arg(keepdim, keepdims)
        if axis is None and isinstance(dim, numbers.Integral) and not isinstance(dim, bool):
            values = getattr(self._c, which)([int(dim)], keep)
            indices = getattr(self._c, "arg" + which)(int(dim), keep)
            return MinMax(_wrap(values), _wrap(indices))
        return _wrap(getattr(self._c, which)(_dims_arg(dim, axis, which), keep))

    def argmax(self, dim=None, keepdim=False):
        """Positions (int64) of the first maximum along `dim`, or in the flattened tensor."""
        return _wrap(self._c.argmax(None if dim is None else _index(dim, "argmax"), bool(keepdim)))

    def argmin(self, dim=None, keepdim=False):
        """Positions (int64) of the first minimum along `dim`, or in the flattened tensor."""
        return _wrap(self._c.argmin(None if dim is None else _index(dim, "argmin"), bool(keepdim)))

    def softmax(self, dim=-1):
        return _wrap(self._c.softmax(_index(dim, "softmax")))

    def log_softmax(self, dim=-1):
        return _wrap(self._c.log_softmax(_index(dim, "log_softmax")))

    # ---- shape ------------------------------------------------------------

    def reshape(self, *shape):
        return _wrap(self._c.reshape(_shape_args(shape, "reshape")))

    def view(self, *shape):
        return _wrap(self._c.reshape(_shape_args(shape, "view")))

    def flatten(self, start_dim=0, end_dim=-1):
        shape = list(self.shape)
        if not shape:
            return self.reshape(1)
        n = len(shape)
        s, e = _index(start_dim, "flatten") % n, _index(end_dim, "flatten") % n
        if s > e:
            raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
        return self.reshape(shape[:s] + [-1] + shape[e + 1:]) if s < e else self

    def unsqueeze(self, dim):
        return _wrap(self._c.unsqueeze(_index(dim, "unsqueeze")))

    def squeeze(self, dim=None):
        return _wrap(self._c.squeeze(None if dim is None else _index(dim, "squeeze")))

    def transpose(self, *dims):
        """transpose() swaps the last two dimensions; transpose(d0, d1) swaps d0 and d1."""
        if not dims:
            return _wrap(self._c.t())
        if len(dims) != 2:
            raise TypeError(f"transpose: expects no dims or two dims, got {len(dims)}")
        return _wrap(self._c.transpose(_index(dims[0], "transpose"), _index(dims[1], "transpose")))

    def t(self):
        return _wrap(self._c.t())

    @property
    def T(self):
        """Every dimension reversed (a 2-D tensor's transpose; 0-d and 1-d tensors unchanged)."""
        n = self.ndim
        if n < 2:
            return self
        if n == 2:
            return _wrap(self._c.t())
        return _wrap(self._c.permute(list(range(n - 1, -1, -1))))

    @property
    def mT(self):
        return _wrap(self._c.t())

    def permute(self, *dims):
        return _wrap(self._c.permute(_shape_args(dims, "permute")))

    def split(self, split_size_or_sections, dim=0):
        dim = _index(dim, "split")
        if isinstance(split_size_or_sections, (list, tuple)):
            sizes = [_index(s, "split") for s in split_size_or_sections]
            total = self.shape[dim] if self.ndim else 0
            if sum(sizes) != total or any(s < 0 for s in sizes):
                raise ValueError(f"split: sections {sizes} do not add up to dim {dim} of size {total}")
            pieces, start = [], 0
            for s in sizes:
                pieces.append(_wrap(self._c.slice(dim, start, start + s, 1)))
                start += s
            return tuple(pieces)
        return tuple(_wrap(p) for p in self._c.split(_index(split_size_or_sections, "split"), dim))

    def chunk(self, chunks, dim=0):
        return tuple(_wrap(p) for p in self._c.chunk(_index(chunks, "chunk"), _index(dim, "chunk")))

    def __getitem__(self, key):
        """Basic indexing: ints (negative count from the end), slices with a
        positive step, None (a new dimension of size 1) and one Ellipsis,
        decomposed into select / slice / unsqueeze."""
        if not isinstance(key, tuple):
            key = (key,)
        ndim = self.ndim
        ellipses = sum(1 for k in key if k is Ellipsis)
        if ellipses > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
        if consumed > ndim:
            raise IndexError(f"too many indices for tensor of dimension {ndim}")
        if ellipses:
            at = next(i for i, k in enumerate(key) if k is Ellipsis)
            key = key[:at] + (slice(None),) * (ndim - consumed) + key[at + 1:]
        out, dim = self._c, 0
        for k in key:
            if k is None:
                out = out.unsqueeze(dim)
                dim += 1
            elif isinstance(k, slice):
                step = 1 if k.step is None else _index(k.step, "slice step")
                if step <= 0:
                    raise ValueError("step must be greater than zero")
                start = None if k.start is None else _index(k.start, "slice start")
                stop = None if k.stop is None else _index(k.stop, "slice stop")
                if not (start is None and stop is None and step == 1):
                    out = out.slice(dim, start, stop, step)
                dim += 1
            elif isinstance(k, (Tensor, np.ndarray, list, bool, np.bool_)):
                raise TypeError("gt tensors take basic indices only (int, slice, None, ...); "
                                f"got {type(k).__name__}")
            else:
                i = _index(k, "index")
                size = out.shape[dim]
                if not -size <= i < size:
                    raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")
                out = out.select(dim, i)
        return _wrap(out)

    def __setitem__(self, key, value):
        """`x[key] = value` for the basic indices __getitem__ takes: `value` (a
        tensor, array or scalar that broadcasts to the indexed part) is written
        into x's data in place; x[key] is a view of x on its worker."""
        self[key].copy_(value)

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # ---- in place ---------------------------------------------------------

    def _inplace(self, o, method):
        if _is_scalar(o):
            getattr(self._c, method)(float(o))
            return self
        c = _operand(o, self)
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
        self._c.copy_(q._c)
        return self

    def add_(self, o):
        return self.__iadd__(o)

    def sub_(self, o):
        return self.__isub__(o)

    def mul_(self, o):
        return self.__imul__(o)

    def div_(self, o):
        return self.__itruediv__(o)

    def copy_(self, src):
        """Overwrites this tensor's data with `src` (a tensor, array or scalar broadcasting to its shape)."""
        if _is_scalar(src):
            self._c.fill_(float(src))
            return self
        c = _operand(src, self)
        if c is None:
            raise TypeError(f"copy_: cannot copy from {type(src).__name__}")
        self._c.copy_(c)
        return self

    def fill_(self, value):
        self._c.fill_(float(value))
        return self

    def zero_(self):
        self._c.fill_(0.0)
        return self

    # ---- conversion -------------------------------------------------------

    def to(self, dtype):
        """A copy converted to `dtype` (made with an in-place copy, so not recorded for autograd)."""
        target = _dtype.resolve(dtype)
        if target is self.dtype:
            return self
        if self.requires_grad:
            raise RuntimeError("to: converting a tensor that requires grad is not differentiable in gt; "
                               "detach() it first")
        out = zeros(self.shape, dtype=target)
        out._c.copy_(self._c)
        return out

    def float(self):
        return self.to(_dtype.float32)

    def double(self):
        return self.to(_dtype.float64)

    def int(self):
        return self.to(_dtype.int32)

    def long(self):
        return self.to(_dtype.int64)

    def bool(self):
        return self.to(_dtype.bool_)

    # ---- data (sync points) ----------------------------------------------

    def numpy(self):
        """A new NumPy array holding this tensor's data (waits for it)."""
        return self._c.numpy()

    def __array__(self, dtype=None, copy=None):
        a = self._c.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def tolist(self):
        return self._c.numpy().tolist()

    def item(self):
        n = self.numel()
        if n != 1:
            raise ValueError(f"item: tensor of shape {self.shape} has {n} elements, expected 1")
        return self._c.numpy().item()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(f"the truth value of a tensor of shape {self.shape} is ambiguous")
        return bool(self.item())

    def __repr__(self):
        body = np.array2string(self._c.numpy(), separator=", ", prefix="tensor(")
        extras = ""
        if self.dtype not in (float32, int64, _dtype.bool_):
            extras += f", dtype={self.dtype!r}"
        if self.requires_grad:
            extras += ", requires_grad=True"
        return f"tensor({body}{extras})"

    # ---- autograd ---------------------------------------------------------

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
        return None if g is None else _wrap(g)

    @grad.setter
    def grad(self, value):
        if value is None:
            self._c.set_grad(None)
        elif isinstance(value, Tensor):
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
            g = gradient._c if isinstance(gradient, Tensor) else tensor(gradient, dtype=self.dtype)._c
        self._c.backward(g, bool(retain_graph))

    def detach(self):
        return _wrap(self._c.detach())

    @property
    def data(self):
        """The same remote data, detached from autograd."""
        return _wrap(self._c.detach())


# ---- creation -------------------------------------------------------------

_seed_lock = threading.Lock()
_seed = {"base": None, "count": 0}  # GUARDED_BY(_seed_lock)


def manual_seed(seed):
    """Makes later randn/rand/Linear calls without an explicit seed reproducible.

    Each call then draws the next seed of a sequence starting from `seed`;
    without it they use the workers' own generators.
    """
    with _seed_lock:
        _seed["base"] = _index(seed, "manual_seed")
        _seed["count"] = 0


def _next_seed():
    with _seed_lock:
        if _seed["base"] is None:
            return 0
        _seed["count"] += 1
        base, count = _seed["base"], _seed["count"]
    # splitmix64 of (base, count): distinct, well-mixed, never 0 (0 means "the worker's generator").
    z = (base * 0x9E3779B97F4A7C15 + count * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    z ^= z >> 31
    return z or 1


def _finish(t, requires_grad):
    if requires_grad:
        t._c.requires_grad_(True)
    return t


def _default_dtype(dtype):
    d = _dtype.resolve(dtype)
    return float32 if d is None else d


def from_numpy(array, requires_grad=False):
    """A tensor holding a copy of a NumPy array (its dtype kept; see gt._dtype.for_numpy)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    target = _dtype.for_numpy(array.dtype, "from_numpy")
    return _finish(_from_array(array, target), requires_grad)


def _from_array(array, target):
    array = np.asarray(array, dtype=target.numpy, order="C")  # (ascontiguousarray would make 0-d 1-d)
    return _wrap(_C.from_numpy(array, list(array.shape), target._c))


def tensor(data, dtype=None, requires_grad=False):
    """A tensor holding a copy of `data` (nested lists, NumPy arrays, scalars, or a gt Tensor).

    Without `dtype`: Python floats give float32, ints int64, bools bool; a
    NumPy array keeps its dtype.
    """
    target = _dtype.resolve(dtype)
    if isinstance(data, Tensor):
        out = data.detach().clone()
        if target is not None and target is not out.dtype:
            out = out.to(target)
        return _finish(out, requires_grad)
    if isinstance(data, np.ndarray):
        array = data
        if target is None:
            target = _dtype.for_numpy(array.dtype, "tensor")
    else:
        array = np.asarray(data)
        if target is None:
            if array.dtype == np.float64 and not isinstance(data, np.floating):
                target = float32  # Python floats: PyTorch's default dtype
            else:
                target = _dtype.for_numpy(array.dtype, "tensor")
    return _finish(_from_array(array, target), requires_grad)


def randn(*shape, dtype=None, requires_grad=False, seed=None):
    """Standard normal samples of the given shape (varargs or one sequence)."""
    s = _shape_args(shape, "randn")
    c = _C.randn(s, _default_dtype(dtype)._c, _next_seed() if seed is None else _index(seed, "randn"))
    return _finish(_wrap(c), requires_grad)


def rand(*shape, dtype=None, requires_grad=False, seed=None):
    """Uniform samples in [0, 1) of the given shape."""
    s = _shape_args(shape, "rand")
    c = _C.rand(s, _default_dtype(dtype)._c, _next_seed() if seed is None else _index(seed, "rand"))
    return _finish(_wrap(c), requires_grad)


def zeros(*shape, dtype=None, requires_grad=False):
    return _finish(_wrap(_C.zeros(_shape_args(shape, "zeros"), _default_dtype(dtype)._c)), requires_grad)


def ones(*shape, dtype=None, requires_grad=False):
    return _finish(_wrap(_C.ones(_shape_args(shape, "ones"), _default_dtype(dtype)._c)), requires_grad)


def full(shape, fill_value, dtype=None, requires_grad=False):
    if dtype is None and isinstance(fill_value, (bool, np.bool_)):
        dtype = _dtype.bool_
    elif dtype is None and isinstance(fill_value, (int, np.integer)):
        dtype = int64
    t = zeros(shape, dtype=dtype)
    t._c.fill_(float(fill_value))
    return _finish(t, requires_grad)


def _like(t, dtype):
    if not isinstance(t, Tensor):
        raise TypeError(f"expected a gt Tensor, got {type(t).__name__}")
    return list(t.shape), (t.dtype if dtype is None else _dtype.resolve(dtype))


def zeros_like(t, dtype=None, requires_grad=False):
    shape, d = _like(t, dtype)
    return zeros(shape, dtype=d, requires_grad=requires_grad)


def ones_like(t, dtype=None, requires_grad=False):
    shape, d = _like(t, dtype)
    return ones(shape, dtype=d, requires_grad=requires_grad)


def randn_like(t, dtype=None, requires_grad=False):
    shape, d = _like(t, dtype)
    return randn(shape, dtype=d, requires_grad=requires_grad)


def rand_like(t, dtype=None, requires_grad=False):
    shape, d = _like(t, dtype)
    return rand(shape, dtype=d, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad=False):
    """Values start, start+step, ... below end (arange(n) is 0..n-1); int64 when all bounds are ints."""
    if end is None:
        start, end = 0, start
    target = _dtype.resolve(dtype)
    if target is None:
        ints = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (start, end, step))
        target = int64 if ints else float32
    for name, v in (("start", start), ("end", end), ("step", step)):
        if not isinstance(v, numbers.Real):
            raise TypeError(f"arange: {name} must be a number, got {type(v).__name__}")
    return _finish(_wrap(_C.arange(float(start), float(end), float(step), target._c)), requires_grad)


def _tensors(tensors, what):
    out = []
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}: expected gt Tensors, got {type(t).__name__}")
        out.append(t._c)
    if not out:
        raise ValueError(f"{what}: expected a non-empty sequence of tensors")
    return out


def cat(tensors, dim=0):
    """Joins tensors along an existing dimension."""
    return _wrap(_C.cat(_tensors(tensors, "cat"), _index(dim, "cat")))


def stack(tensors, dim=0):
    """Joins tensors along a new dimension."""
    d = _index(dim, "stack")
    return _wrap(_C.cat([c.unsqueeze(d) for c in _tensors(tensors, "stack")], d))
