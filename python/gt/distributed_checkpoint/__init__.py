"""gt.distributed.checkpoint: PyTorch's torch.distributed.checkpoint (DCP) for gt.

    import gt.distributed.checkpoint as dcp
    dcp.save(model.state_dict(), checkpoint_id="run1/step100")
    ...
    state = model.state_dict()          # the loading program's tensors, placed as it places them
    dcp.load(state, checkpoint_id="run1/step100")   # filled in place, resharded

Each worker writes the pieces it holds to files under DIR (= checkpoint_id) itself, in
parallel, and a load has each worker read only the byte ranges its own pieces need, whatever
the worker count or mesh the checkpoint was saved with. No tensor byte passes through this
process or the dispatcher. DIR is relative to the dispatcher's `checkpoint_root` option (or
absolute inside it; anything else is refused), and every worker must reach it: on several
machines, a shared filesystem. The format and its limits: docs/CHECKPOINTS.md.
"""

import json
import math
import os
import uuid

from .. import _C
from .._tensor import Tensor
from . import _plan
from . import state_dict  # noqa: F401  (gt.distributed.checkpoint.state_dict)

__all__ = ["save", "load", "state_dict"]

METADATA = ".metadata"
FORMAT = "gt-distributed-checkpoint"


def _leaves(obj, prefix=""):
    """(key, container, index, value) for every leaf of nested dicts and lists; a tuple is a leaf."""
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, list):
        items = enumerate(obj)
    else:
        raise TypeError(f"a state dict is nested dicts and lists, not {type(obj).__name__}")
    for k, v in items:
        key = f"{prefix}{k}"
        if isinstance(v, (dict, list)):
            yield from _leaves(v, key + ".")
        else:
            yield key, obj, k, v


def _json_value(key, value):
    """A non-tensor leaf as the metadata keeps it (a tuple tagged, to come back a tuple)."""
    if isinstance(value, tuple):
        return {"tuple": [_json_value(key, v) for v in value]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"dcp.save: {key} is a {type(value).__name__}; a state dict holds gt tensors, "
                    f"numbers, strings, None and tuples of them")


def _from_json(value):
    if isinstance(value, dict) and "tuple" in value:
        return tuple(_from_json(v) for v in value["tuple"])
    return value


def _file_name(index, key, piece):
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in key)[:80]
    return f"{index:05d}-{safe}.{piece}.bin"


def _whole_placed(tensor):
    """`tensor`, or a copy with its pending sums (Partial) summed: those have no pieces of their own."""
    layout = _C.layout(tensor._c)
    if not any(kind == _C.PARTIAL for kind, _ in layout[2]):
        return tensor, layout
    from .. import distributed as gd
    mesh, placements = gd._layout(tensor)
    placed = [gd.Replicate() if p.is_partial() else p for p in placements]
    settled = tensor.redistribute(mesh, placed)
    return settled, _C.layout(settled._c)


def save(state_dict, *, checkpoint_id, storage_writer=None, planner=None, process_group=None, no_dist=False):
    """Writes `state_dict` (nested dicts and lists of gt tensors and plain values) to the
    directory `checkpoint_id`: each tensor's pieces by the workers holding them, then the
    metadata, last, so that a checkpoint whose metadata is there is whole. Returns the metadata
    (a dict). The extra arguments are DCP's and are accepted for its signature only."""
    del storage_writer, planner, process_group, no_dist
    directory = os.fspath(checkpoint_id)
    save_id = uuid.uuid4().hex[:12]
    tensors, objects = {}, {}
    keep = []  # settled copies of pending sums, alive until their pieces are written
    for index, (key, _, _, value) in enumerate(_leaves(state_dict)):
        if not isinstance(value, Tensor):
            objects[key] = _json_value(key, value)
            continue
        placed, layout = _whole_placed(value)
        keep.append(placed)
        entry = {"dtype": value.dtype.name, "shape": list(value.shape), "placement": _describe(layout), "pieces": []}
        plan = ""
        for piece, offsets, sizes in _plan.distinct(_plan.pieces(value.shape, layout)):
            name = f"pieces-{save_id}/{_file_name(index, key, piece)}"
            entry["pieces"].append({"file": name, "offsets": offsets, "sizes": sizes})
            plan += _plan.write_line(piece, os.path.join(directory, name))
        if plan:
            _C.checkpoint_write(placed._c, plan)
        tensors[key] = entry
    _C.sync()  # every piece is on disk (or its error raised) before the metadata names it
    metadata = {"format": FORMAT, "version": 1, "save_id": save_id, "tensors": tensors, "objects": objects}
    _C.checkpoint_write_metadata(os.path.join(directory, METADATA), json.dumps(metadata, indent=1))
    _C.sync()
    return metadata


def _describe(layout):
    workers, mesh_shape, pairs, _ = layout
    names = {_C.SHARD: "Shard", _C.REPLICATE: "Replicate", _C.PARTIAL: "Partial"}
    placements = ", ".join(f"{names[k]}({d})" if k == _C.SHARD else f"{names[k]}()" for k, d in pairs)
    return f"[{placements}] on mesh {list(mesh_shape)} of workers {list(workers)}"


def read_metadata(checkpoint_id):
    """The metadata of the checkpoint in `checkpoint_id` (a dict), read by a worker."""
    path = os.path.join(os.fspath(checkpoint_id), METADATA)
    text = _C.checkpoint_read_metadata(path)
    try:
        metadata = json.loads(text)
    except ValueError as e:
        raise RuntimeError(f"{path} is not a gt checkpoint's metadata: {e}") from None
    found = metadata.get("format") if isinstance(metadata, dict) else type(metadata).__name__
    if found != FORMAT:
        raise RuntimeError(f"{path} is not a gt checkpoint's metadata (found {found!r}, not {FORMAT!r})")
    return metadata


def _check(key, value, entry, path):
    """Why `value` cannot take the saved tensor `entry`, or None."""
    if entry is None:
        return f"{key}: not in the checkpoint {path}"
    if entry["dtype"] != value.dtype.name:
        return f"{key}: the checkpoint holds {entry['dtype']}, the state dict {value.dtype.name}"
    if list(entry["shape"]) != list(value.shape):
        return f"{key}: the checkpoint's shape is {list(entry['shape'])}, the state dict's {list(value.shape)}"
    return None


def load(state_dict, *, checkpoint_id, storage_reader=None, planner=None, process_group=None, no_dist=False):
    """Fills `state_dict` in place from the checkpoint in `checkpoint_id`: every gt tensor keeps
    its placement (the saved pieces are resharded to it, each worker reading only the byte ranges
    its own pieces need), every other leaf is replaced by the saved value. Every key of
    `state_dict` must be in the checkpoint with the same dtype and shape (keys only in the
    checkpoint are ignored, as DCP does). The tensors are read into temporaries first: on any
    error nothing in `state_dict` has changed."""
    del storage_reader, planner, process_group, no_dist
    directory = os.fspath(checkpoint_id)
    metadata = read_metadata(directory)
    saved, objects = metadata.get("tensors", {}), metadata.get("objects", {})
    leaves = list(_leaves(state_dict))
    problems = []
    for key, _, _, value in leaves:
        if isinstance(value, Tensor):
            problem = _check(key, value, saved.get(key), directory)
        else:
            problem = None if key in objects else f"{key}: not in the checkpoint {directory}"
        if problem:
            problems.append(problem)
    if problems:
        raise RuntimeError("dcp.load: the checkpoint does not match the state dict:\n  " + "\n  ".join(problems))
    from .._grad import no_grad
    filled = []
    with no_grad():
        for key, container, index, value in leaves:
            if isinstance(value, Tensor):
                filled.append((value, _read_into_copy(key, value, saved[key], directory)))
    _C.sync()  # every piece read (or its error raised): only now is anything replaced
    with no_grad():
        for value, temporary in filled:
            value.copy_(temporary)
    for key, container, index, value in leaves:
        if not isinstance(value, Tensor):
            container[index] = _from_json(objects[key])
    return None


def _read_into_copy(key, value, entry, directory):
    """A copy of `value` placed as it is, its pieces queued to be filled from the checkpoint."""
    temporary = value.detach().clone()
    layout = _C.layout(temporary._c)
    plan = ""
    for piece, offsets, sizes in _plan.pieces(value.shape, layout):
        lines, covered = _plan.read_lines(piece, offsets, sizes, entry["pieces"],
                                          lambda name: os.path.join(directory, name))
        if covered != math.prod(sizes):
            raise RuntimeError(f"dcp.load: {key}: the checkpoint's pieces cover {covered} of the "
                               f"{math.prod(sizes)} elements piece {piece} needs ({directory} is damaged)")
        plan += "".join(lines)
    if plan:
        _C.checkpoint_read(temporary._c, plan)
    return temporary
