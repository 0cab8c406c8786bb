"""Advanced indexing of gt tensors: one index list, integer tensor or bool
mask in a key whose other entries are full slices (x[mask], x[[0, 2]],
x[:, idx], x[idx] = v, x[mask] = 0), as index_select along that dim (so
reading has a gradient) and, for assignment, an index_add of the change.

A bool mask's positions depend on its values: it is fetched (a sync point,
as PyTorch's nonzero is on a GPU). Integer indices stay where they are; a
negative one counts from the end."""

import numpy as np

from .base import TensorBase


def is_advanced(k):
    return isinstance(k, (TensorBase, np.ndarray, list)) or isinstance(k, (bool, np.bool_))


def _refuse(why):
    raise TypeError("gt tensors take one advanced index (an index list, an integer tensor or a bool mask) "
                    f"with only full slices (:) and ... around it; {why}")


def _locate(key, ndim):
    """(dim the advanced index starts at, the index) for a key with exactly one advanced entry."""
    advanced = [i for i, k in enumerate(key) if is_advanced(k)]
    if len(advanced) != 1:
        _refuse(f"got {len(advanced)} advanced entries")
    at = advanced[0]
    for i, k in enumerate(key):
        if i != at and k is not Ellipsis and not (isinstance(k, slice) and k == slice(None)):
            _refuse(f"got {k!r} beside it")
    if any(k is Ellipsis for k in key[:at]):
        index = key[at]
        width = np.ndim(index) if not isinstance(index, TensorBase) else index.ndim
        is_mask = _is_mask(index)
        after = len(key) - at - 1 - sum(1 for k in key[at + 1:] if k is Ellipsis)
        return ndim - after - (width if is_mask else 1), index
    return at, key[at]


def _is_mask(index):
    if isinstance(index, (bool, np.bool_)):
        return True
    if isinstance(index, TensorBase):
        return index.dtype.name == "bool"
    return np.asarray(index).dtype == np.bool_


def _positions(x, dim, index):
    """(positions along the flattened span, span shape, shape the selection adds) for `index` at `dim`."""
    from .creation import from_numpy, where
    shape = list(x.shape)
    if _is_mask(index):
        mask = index.numpy() if isinstance(index, TensorBase) else np.asarray(index, dtype=np.bool_)
        span = list(mask.shape)
        if shape[dim:dim + len(span)] != span:
            raise IndexError(f"The shape of the mask {tuple(span)} at index {dim} does not match the shape of the "
                             f"indexed tensor {tuple(shape)}")
        flat = np.flatnonzero(mask.reshape(-1)).astype(np.int64)
        return from_numpy(flat), span, [len(flat)]
    size = shape[dim]
    if isinstance(index, TensorBase):
        if index.dtype.is_floating_point:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        flat = index.reshape(-1)
        return where(flat < 0, flat + size, flat), [size], list(index.shape)
    values = np.asarray(index)
    if values.size and not np.issubdtype(values.dtype, np.integer):
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    values = values.astype(np.int64)
    bad = values[(values < -size) | (values >= size)]
    if bad.size:
        raise IndexError(f"index {int(bad[0])} is out of bounds for dimension {dim} with size {size}")
    return from_numpy(np.where(values < 0, values + size, values).reshape(-1)), [size], list(values.shape)


def _parts(x, key):
    if not isinstance(key, tuple):
        key = (key,)
    dim, index = _locate(key, x.ndim)
    if isinstance(index, (bool, np.bool_)):  # x[True]: a new dim of size 1 (x[False]: of size 0)
        return None, dim, index
    positions, span, added = _positions(x, dim, index)
    shape = list(x.shape)
    rows = 1
    for s in span:
        rows *= s
    flat_shape = shape[:dim] + [rows] + shape[dim + len(span):]
    out_shape = shape[:dim] + added + shape[dim + len(span):]
    return (positions, flat_shape, out_shape), dim, index


def get(x, key):
    parts, dim, index = _parts(x, key)
    if parts is None:
        out = x.unsqueeze(dim)
        return out if index else out[tuple([slice(None)] * dim + [slice(0, 0)])]
    positions, flat_shape, out_shape = parts
    picked = x.reshape(*flat_shape).index_select(dim, positions)
    return picked.reshape(*out_shape)


def set(x, key, value):
    """x[key] = value in x's data: the selection's change (value - x[key]) added at its positions."""
    from .creation import tensor, zeros
    parts, dim, index = _parts(x, key)
    if parts is None:
        if index:
            x.copy_(value)
        return
    positions, flat_shape, out_shape = parts
    flat = x.reshape(*flat_shape)
    selected = flat.index_select(dim, positions)
    current = selected.reshape(*out_shape)
    if np.isscalar(value):
        value = value if x.dtype.is_floating_point else int(value)  # cast as PyTorch does
    elif not isinstance(value, TensorBase):
        value = tensor(value, dtype=x.dtype)
    elif value.dtype is not x.dtype:
        value = value.to(x.dtype)
    change = value - current
    if list(change.shape) != out_shape:  # a value that broadcasts to the selection
        change = change + zeros(*out_shape, dtype=x.dtype)
    change = change.reshape(*selected.shape)
    keep = _last_of_each(index, positions, flat_shape[dim])
    if keep is not None:  # a repeated position is assigned once (the last), not added to twice
        from .creation import from_numpy
        kept = from_numpy(keep)
        positions, change = positions.index_select(0, kept), change.index_select(dim, kept)
    x.copy_(flat.index_add(dim, positions, change).reshape(*x.shape))


def _last_of_each(index, positions, size):
    """Where `positions` repeats one, the offsets of each position's last occurrence
    (as PyTorch's index_put_ on the CPU keeps); None when none repeats. A mask never
    repeats; a list is checked here; a tensor index is read (a sync point)."""
    if _is_mask(index):
        return None
    if isinstance(index, TensorBase):
        values = positions.numpy()
    else:
        values = np.asarray(index, dtype=np.int64).reshape(-1)
        values = np.where(values < 0, values + size, values)
    if np.unique(values).size == values.size:
        return None
    _, first_from_end = np.unique(values[::-1], return_index=True)
    return np.sort(values.size - 1 - first_from_end).astype(np.int64)
