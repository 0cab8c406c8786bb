"""Which bytes each worker writes or reads: pieces of a tensor as boxes of its
global shape, and the plan text the workers carry out (core/include/gt/checkpoint_plan.h).

A box is (offsets, sizes), one value per dim. A layout is what `_C.layout`
answers: (workers row-major, mesh shape, [(kind, dim)] per mesh axis, shard sizes).
"""

import math

from .. import _C


def _chunk(length, parts, coord):
    """(start, size) of piece `coord` of `length` split `parts` ways as torch.chunk does."""
    chunk = -(-length // parts) if length > 0 else 0
    start = min(coord * chunk, length)
    return start, max(0, min(chunk, length - start))


def pieces(shape, layout):
    """[(piece index, offsets, sizes)] of every piece a tensor of `shape` laid out as `layout` has,
    in the order of its workers (a replicated tensor's pieces are each whole)."""
    workers, mesh_shape, pairs, shard_sizes = layout
    shape = list(shape)
    if any(kind == _C.PARTIAL for kind, _ in pairs):
        raise ValueError("a pending sum (Partial) has no pieces to save: settle it first")
    if len(mesh_shape) == 1:
        kind, dim = pairs[0]
        if kind != _C.SHARD:
            return [(r, [0] * len(shape), list(shape)) for r in range(len(workers))]
        out, start = [], 0
        for r, size in enumerate(shard_sizes):
            offsets, sizes = [0] * len(shape), list(shape)
            offsets[dim], sizes[dim] = start, size
            out.append((r, offsets, sizes))
            start += size
        return out
    rows, columns = mesh_shape
    out = []
    for r in range(len(workers)):
        coords = (r // columns, r % columns)
        offsets, sizes = [0] * len(shape), list(shape)
        for axis, (kind, dim) in enumerate(pairs):
            if kind == _C.SHARD:
                dim %= len(shape)
                offsets[dim], sizes[dim] = _chunk(shape[dim], mesh_shape[axis], coords[axis])
        out.append((r, offsets, sizes))
    return out


def distinct(all_pieces):
    """The pieces worth writing: each box once (a replica's copy is not written twice), none empty."""
    seen, out = set(), []
    for r, offsets, sizes in all_pieces:
        key = (tuple(offsets), tuple(sizes))
        if key in seen or math.prod(sizes) == 0:
            continue
        seen.add(key)
        out.append((r, offsets, sizes))
    return out


def _check_path(path):
    if "\n" in path:
        raise ValueError(f"a checkpoint path may not hold a newline: {path!r}")
    return path


def write_line(piece, path):
    return f"write {piece} {_check_path(path)}\n"


def read_lines(piece, offsets, sizes, saved, path_of):
    """The read lines that fill piece `piece` (the box offsets/sizes) from the saved pieces `saved`
    (dicts with offsets, sizes, file), and the number of elements they cover."""
    lines, covered = [], 0
    for s in saved:
        low = [max(a, b) for a, b in zip(offsets, s["offsets"])]
        high = [min(a + n, b + m) for a, n, b, m in zip(offsets, sizes, s["offsets"], s["sizes"])]
        if any(h <= lo for lo, h in zip(low, high)):
            continue
        box = [h - lo for lo, h in zip(low, high)]
        fields = [piece, len(box), *s["sizes"], *[lo - b for lo, b in zip(low, s["offsets"])],
                  *[lo - a for lo, a in zip(low, offsets)], *box]
        lines.append("read " + " ".join(str(v) for v in fields) + " " + _check_path(path_of(s["file"])) + "\n")
        covered += math.prod(box)
    return lines, covered
