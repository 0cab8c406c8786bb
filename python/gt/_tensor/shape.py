"""gt.Tensor shape and movement ops: reshape, transpose / permute, squeeze,
split / chunk, and basic indexing (each index a select / slice / unsqueeze,
a view of the tensor on its worker), and advanced indexing (advanced_index.py)."""

from . import advanced_index
from .args import as_index, dim_arg, shape_args
from .base import TensorBase


def _index(x, what):
    if isinstance(x, TensorBase):
        return x._c
    raise TypeError(f"{what}: expected a gt Tensor, got {type(x).__name__}")


class ShapeOps:
    """gt.Tensor's shape and indexing methods (a mixin of core.Tensor)."""

    __slots__ = ()

    def reshape(self, *shape):
        return self._wrap(self._c.reshape(shape_args(shape, "reshape")))

    def view(self, *shape):
        return self._wrap(self._c.reshape(shape_args(shape, "view")))

    def flatten(self, start_dim=0, end_dim=-1):
        shape = list(self.shape)
        if not shape:
            return self.reshape(1)
        n = len(shape)
        s, e = as_index(start_dim, "flatten") % n, as_index(end_dim, "flatten") % n
        if s > e:
            raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
        return self.reshape(shape[:s] + [-1] + shape[e + 1:]) if s < e else self

    def unsqueeze(self, dim):
        return self._wrap(self._c.unsqueeze(as_index(dim, "unsqueeze")))

    def squeeze(self, dim=None):
        return self._wrap(self._c.squeeze(None if dim is None else as_index(dim, "squeeze")))

    def transpose(self, *dims):
        """transpose() swaps the last two dimensions; transpose(d0, d1) swaps d0 and d1."""
        if not dims:
            return self._wrap(self._c.t())
        if len(dims) != 2:
            raise TypeError(f"transpose: expects no dims or two dims, got {len(dims)}")
        return self._wrap(self._c.transpose(as_index(dims[0], "transpose"), as_index(dims[1], "transpose")))

    def t(self):
        return self._wrap(self._c.t())

    # ---- indexing by an int32/int64 index tensor (PyTorch's names; the add forms out of place) ----

    def index_select(self, dim, index):
        return self._wrap(self._c.index_select(as_index(dim, "index_select"), _index(index, "index_select")))

    def index_add(self, dim, index, source):
        return self._wrap(self._c.index_add(as_index(dim, "index_add"), _index(index, "index_add"),
                                            _index(source, "index_add")))

    def gather(self, dim, index):
        return self._wrap(self._c.gather(as_index(dim, "gather"), _index(index, "gather")))

    def scatter_add(self, dim, index, src):
        return self._wrap(self._c.scatter_add(as_index(dim, "scatter_add"), _index(index, "scatter_add"),
                                              _index(src, "scatter_add")))

    @property
    def T(self):
        """Every dimension reversed (a 2-D tensor's transpose; 0-d and 1-d tensors unchanged)."""
        n = self.ndim
        if n < 2:
            return self
        if n == 2:
            return self._wrap(self._c.t())
        return self._wrap(self._c.permute(list(range(n - 1, -1, -1))))

    @property
    def mT(self):
        return self._wrap(self._c.t())

    def permute(self, *dims):
        return self._wrap(self._c.permute(shape_args(dims, "permute")))

    def split(self, split_size_or_sections=None, dim=None, *, axis=None, split_size=None):
        """Pieces of `split_size` along `dim` (the last may be smaller), or of the
        sizes listed in `split_size_or_sections`; `dim` (or `axis`) defaults to 0."""
        if (split_size_or_sections is None) == (split_size is None):
            raise TypeError("split: give split_size_or_sections or split_size, exactly one")
        if split_size is not None:
            split_size_or_sections = split_size
        dim = dim_arg(dim, axis, "split", 0)
        if isinstance(split_size_or_sections, (list, tuple)):
            sizes = [as_index(s, "split") for s in split_size_or_sections]
            total = self.shape[dim] if self.ndim else 0
            if sum(sizes) != total or any(s < 0 for s in sizes):
                raise ValueError(f"split: sections {sizes} do not add up to dim {dim} of size {total}")
            pieces, start = [], 0
            for s in sizes:
                pieces.append(self._wrap(self._c.slice(dim, start, start + s, 1)))
                start += s
            return tuple(pieces)
        return tuple(self._wrap(p) for p in self._c.split(as_index(split_size_or_sections, "split"), dim))

    def chunk(self, chunks, dim=0):
        return tuple(self._wrap(p) for p in self._c.chunk(as_index(chunks, "chunk"), as_index(dim, "chunk")))

    def __getitem__(self, key):
        """Basic indexing: ints (negative count from the end), slices with a
        positive step, None (a new dimension of size 1) and one Ellipsis,
        decomposed into select / slice / unsqueeze; or one advanced index
        (advanced_index.py)."""
        if not isinstance(key, tuple):
            key = (key,)
        if any(advanced_index.is_advanced(k) for k in key):
            return advanced_index.get(self, key)
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
                step = 1 if k.step is None else as_index(k.step, "slice step")
                if step <= 0:
                    raise ValueError("step must be greater than zero")
                start = None if k.start is None else as_index(k.start, "slice start")
                stop = None if k.stop is None else as_index(k.stop, "slice stop")
                if not (start is None and stop is None and step == 1):
                    out = out.slice(dim, start, stop, step)
                dim += 1
            else:
                i = as_index(k, "index")
                size = out.shape[dim]
                if not -size <= i < size:
                    raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")
                out = out.select(dim, i)
        return self._wrap(out)

    def __setitem__(self, key, value):
        """`x[key] = value` for the basic indices __getitem__ takes: `value` (a
        tensor, array or scalar that broadcasts to the indexed part) is written
        into x's data in place; x[key] is a view of x on its worker. An advanced key (an index list,
        integer tensor or bool mask: advanced_index.py) writes the selected elements."""
        if any(advanced_index.is_advanced(k) for k in (key if isinstance(key, tuple) else (key,))):
            advanced_index.set(self, key, value)
            return
        self[key].copy_(value)

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))
