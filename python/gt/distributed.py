"""gt.distributed: device meshes and placements with PyTorch DTensor's names,
and a report of what a training step communicates.

    mesh = gt.distributed.DeviceMesh([0, 1, 2, 3], ("data",))
    x = gt.distributed.distribute_tensor(gt.randn(8, 4), mesh, [Shard(0)])
    x.placements                       # [Shard(dim=0)]
    y = x.redistribute(mesh, [Replicate()])   # an all-gather on the workers

    with gt.distributed.record() as r:
        train_step()
    print(r.table())                   # every collective: kind, axis, bytes, source line

Semantics, limits and the collectives each change of layout takes are the
C++ client's (client/include/gt/distributed.h): 1-D and 2-D meshes, with
any Shard / Replicate placement per axis; Partial() is what a contraction
or a sum over a split dim makes (a pending sum), never asked for.
"""

import contextlib
import dataclasses
import os
import sys
import weakref

from . import _C
from ._tensor import Tensor

__all__ = ["DeviceMesh", "Placement", "Shard", "Replicate", "Partial", "distribute_tensor", "fully_shard", "record",
           "explain", "CollectiveRecord", "Recording"]


class Placement:
    """A tensor's placement along one mesh axis."""

    __slots__ = ()

    def is_shard(self, dim=None):
        return False

    def is_replicate(self):
        return False

    def is_partial(self):
        return False


class Shard(Placement):
    """Split along `dim` over the mesh axis (torch.chunk sizes)."""

    __slots__ = ("dim",)

    def __init__(self, dim):
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise TypeError(f"Shard: dim must be an int, got {type(dim).__name__}")
        self.dim = dim

    def is_shard(self, dim=None):
        return dim is None or dim == self.dim

    def __eq__(self, other):
        return isinstance(other, Shard) and other.dim == self.dim

    def __hash__(self):
        return hash(("Shard", self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"


class Replicate(Placement):
    """A full copy on every worker of the mesh axis."""

    __slots__ = ()

    def is_replicate(self):
        return True

    def __eq__(self, other):
        return isinstance(other, Replicate)

    def __hash__(self):
        return hash("Replicate")

    def __repr__(self):
        return "Replicate()"


class Partial(Placement):
    """A pending sum over the mesh axis: each worker holds an addend. A matmul contracting a split dim,
    or a sum over one, makes it; an op that needs the value all-reduces it (once: the tensor is then
    Replicate()), redistributing it to Shard(d) reduce-scatters it, and adding two alike, scaling or
    negating keeps it pending. It cannot be asked for with distribute_tensor."""

    __slots__ = ("reduce_op",)

    def __init__(self, reduce_op="sum"):
        if reduce_op != "sum":
            raise ValueError(f"Partial: only 'sum' is supported, got {reduce_op!r}")
        self.reduce_op = reduce_op

    def is_partial(self):
        return True

    def __eq__(self, other):
        return isinstance(other, Partial)

    def __hash__(self):
        return hash("Partial")

    def __repr__(self):
        return "Partial(sum)"


_meshes = []  # weak references to every DeviceMesh made, oldest first: names for axes and layouts
_tensor_meshes = {}  # id(tensor) -> (weak reference to it, the mesh distribute_tensor laid it out on)


def _live_meshes():
    """The meshes still alive, oldest first."""
    _meshes[:] = [r for r in _meshes if r() is not None]
    return [m for m in (r() for r in _meshes) if m is not None]


def _remember_mesh(tensor, mesh):
    """`tensor` was laid out on `mesh`: its device_mesh names the axes as `mesh` does."""
    key = id(tensor)
    _tensor_meshes[key] = (weakref.ref(tensor, lambda _: _tensor_meshes.pop(key, None)), mesh)
    return tensor


class DeviceMesh:
    """Worker indexes on named axes: a list (1-D) or a list of equal rows (2-D).

    DeviceMesh([0, 1, 2, 3], ("data",)); DeviceMesh([[0, 1], [2, 3]], ("data", "model")).
    """

    def __init__(self, workers, mesh_dim_names=None, _register=True):
        rows = [list(r) for r in workers] if workers and isinstance(workers[0], (list, tuple)) else None
        flat = rows is None
        if flat:
            rows = [list(workers)]
        for row in rows:
            for w in row:
                if not isinstance(w, int) or isinstance(w, bool):
                    raise TypeError(f"DeviceMesh: worker indexes must be ints, got {w!r}")
        if mesh_dim_names is None:
            mesh_dim_names = ("workers",) if flat else ("dim0", "dim1")
        names = tuple(mesh_dim_names)
        if len(names) != (1 if flat else 2):
            raise ValueError(f"DeviceMesh: {len(names)} axis names for a {1 if flat else 2}-D mesh")
        self._description = _C.check_mesh(rows, list(names), flat)  # gt.Error for a bad mesh
        self._rows = rows
        self._flat = flat
        self.mesh_dim_names = names
        if _register:
            _meshes.append(weakref.ref(self))

    @property
    def shape(self):
        return (len(self._rows[0]),) if self._flat else (len(self._rows), len(self._rows[0]))

    @property
    def ndim(self):
        return len(self.shape)

    def size(self, mesh_dim=None):
        """Workers along `mesh_dim` (an index or a name); all of them with None."""
        if mesh_dim is None:
            return len(self._rows) * len(self._rows[0])
        if isinstance(mesh_dim, str):
            mesh_dim = self.mesh_dim_names.index(mesh_dim)
        return self.shape[mesh_dim]

    @property
    def workers(self):
        """The worker indexes, as given (a list, or a list of rows)."""
        return list(self._rows[0]) if self._flat else [list(r) for r in self._rows]

    def groups(self, mesh_dim):
        """The worker groups along `mesh_dim`: the sets of workers a collective over that axis joins."""
        if self._flat:
            return [list(self._rows[0])]
        if mesh_dim == 1:
            return [list(r) for r in self._rows]
        return [[r[c] for r in self._rows] for c in range(len(self._rows[0]))]

    def __eq__(self, other):
        return isinstance(other, DeviceMesh) and other._rows == self._rows and \
            other.mesh_dim_names == self.mesh_dim_names

    def __hash__(self):
        return hash((str(self._rows), self.mesh_dim_names))

    def __repr__(self):
        return self._description


def _placement_pairs(placements):
    """(kind, dim) pairs for the extension, the kinds its layout codec's (_C.SHARD, _C.REPLICATE, _C.PARTIAL)."""
    pairs = []
    for p in placements:
        if isinstance(p, Shard):
            pairs.append((_C.SHARD, p.dim))
        elif isinstance(p, Replicate):
            pairs.append((_C.REPLICATE, 0))
        elif isinstance(p, Partial):
            pairs.append((_C.PARTIAL, 0))
        else:
            raise TypeError(f"expected Shard, Replicate or Partial placements, got {p!r}")
    return pairs


def distribute_tensor(tensor, device_mesh, placements):
    """A copy of `tensor` laid out on `device_mesh` by `placements`, one per mesh axis (DTensor's
    distribute_tensor). The dispatcher moves the data: a broadcast and local slices to split a whole
    tensor, an all-gather to assemble a split one. Differentiable (the gradient passes through)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"distribute_tensor: expected a gt Tensor, got {type(tensor).__name__}")
    if not isinstance(device_mesh, DeviceMesh):
        raise TypeError(f"distribute_tensor: expected a DeviceMesh, got {type(device_mesh).__name__}")
    pairs = _placement_pairs(list(placements))
    return _remember_mesh(tensor._wrap(_C.redistribute(tensor._c, device_mesh._rows, list(device_mesh.mesh_dim_names),
                                                       device_mesh._flat, pairs)), device_mesh)


def fully_shard(module, mesh):
    """FSDP / ZeRO-3 over a 1-D mesh: every parameter of `module` (and its sub-modules) is replaced by
    a copy split along dim 0 over `mesh` (a 0-d one is copied to every worker), buffers are copied to
    every worker, and each parameter's gradient is split like it after every backward(), so an
    optimizer made afterwards keeps its state split alike and updates each piece where it lives.
    Feed it batches split along dim 0 over the same mesh (data parallel).

    What moves: an op needing a whole weight (a matmul) all-gathers it, in the forward and again
    in the backward; a weight's gradient, a sum over the split batch, is left pending (Partial) by
    the backward, and the hook's redistribute reduce-scatters it into the parameter's pieces.
    Returns `module`."""
    from .nn import Module
    if not isinstance(module, Module):
        raise TypeError(f"fully_shard: expected a gt.nn.Module, got {type(module).__name__}")
    if not isinstance(mesh, DeviceMesh) or mesh.ndim != 1:
        raise ValueError(f"fully_shard: expected a 1-D DeviceMesh, got {mesh!r}")
    params = {id(p) for p in module.parameters()}
    buffers = {id(b) for b in module.buffers()}
    for _, owner in module.named_modules():
        for name, value in list(vars(owner).items()):
            if not isinstance(value, Tensor):
                continue
            if id(value) in params:
                placements = [Shard(0)] if value.ndim else [Replicate()]
                sharded = distribute_tensor(value.detach(), mesh, placements).requires_grad_()
                sharded.register_post_accumulate_grad_hook(
                    lambda p, placements=placements: setattr(p, "grad", p.grad.redistribute(mesh, placements)))
                setattr(owner, name, sharded)
            elif id(value) in buffers:
                setattr(owner, name, distribute_tensor(value, mesh, [Replicate()]))
    return module


def _placement(kind, dim):
    """The placement an extension (kind, dim) pair names."""
    return Shard(dim) if kind == _C.SHARD else Partial() if kind == _C.PARTIAL else Replicate()


def _layout(tensor):
    """(DeviceMesh of the workers holding `tensor`, [placement per mesh axis]) from the dispatcher. A
    2-D layout names its axes as the mesh `tensor` was distributed on does, else as the newest mesh
    made here with the same rows."""
    workers, shape, pairs, sizes = _C.layout(tensor._c)
    placements = [_placement(kind, dim) for kind, dim in pairs]
    own = _tensor_meshes.get(id(tensor))
    own_mesh = own[1] if own and own[0]() is tensor else None
    candidates = ([own_mesh] if own_mesh else []) + _live_meshes()[::-1]
    if len(shape) == 1:
        # The dispatcher keeps a layout alike on both axes of a 2-D mesh (all copies, all pending
        # sums, or one dim cut over every worker in row-major order) as one axis. DTensor names it
        # on the mesh it was laid out on, one placement per mesh axis: [Replicate(), Replicate()].
        # An uneven cut is left 1-D: DTensor cuts [Shard(d), Shard(d)] axis by axis, which an
        # uneven flat cut is not.
        # The mesh is the tensor's own (distribute_tensor, redistribute), else the live ones of
        # those workers (newest first) when none of them is 1-D.
        flat = list(workers)
        meshes = [m for m in candidates if [w for r in m._rows for w in r] == flat]
        if meshes and meshes[0] is not own_mesh and any(m._flat for m in meshes):
            meshes = []
        even = not isinstance(placements[0], Shard) or len(set(sizes)) == 1
        if meshes and not meshes[0]._flat and len(placements) == 1 and even:
            return meshes[0], placements * 2
        return DeviceMesh(flat, _register=False), placements
    rows = [list(workers[i:i + shape[1]]) for i in range(0, len(workers), shape[1])]
    named = next((m for m in candidates if not m._flat and m._rows == rows), None)
    return DeviceMesh(rows, named.mesh_dim_names if named else None, _register=False), placements


# ---- what a step communicates ---------------------------------------------------


@dataclasses.dataclass
class CollectiveRecord:
    """One collective the dispatcher ran for an op of this client."""
    kind: str          # "all_reduce", "all_gather", "broadcast"
    reduce: str        # all_reduce: "sum", "max" or "min"; else ""
    workers: list      # the members, in rank order
    bytes: int         # the bytes of the whole tensor reduced, gathered or broadcast
    op: str            # the op that made what it moves ("matmul", "sum", "redistribute", ...)
    phase: str         # "backward" (that op was issued by backward()) or "forward" (anything else)
    source: str        # "file.py:LINE" of the user code that issued that op
    axis: str          # the mesh axis (a DeviceMesh's name) or signal whose workers it joined; "" if none
    seq: int           # the sequence number of the op it ran for, in this client's stream
    needed_by: str = ""  # a pending sum (Partial) reduced later: "op at file:LINE" of the op that needed it

    @property
    def name(self):
        return f"{self.kind}({self.reduce})" if self.reduce else self.kind


class Recording:
    """The collectives of a recorded block (gt.distributed.record), as data and as a table."""

    def __init__(self):
        self.records = []

    def __iter__(self):
        return iter(self.records)

    def __len__(self):
        return len(self.records)

    def totals(self):
        """{(phase, collective name): (count, bytes)}."""
        out = {}
        for r in self.records:
            count, size = out.get((r.phase, r.name), (0, 0))
            out[(r.phase, r.name)] = (count + 1, size + r.bytes)
        return out

    def count(self, kind=None, phase=None, ops=None):
        return sum(1 for r in self.records if (kind is None or r.kind == kind) and (phase is None or r.phase == phase)
                   and (ops is None or r.op in ops))

    def pattern(self):
        """The gradient-synchronisation pattern the records imply, in words (seed 003's patterns:
        data-parallel gradient all-reduce, FSDP weight all-gathers and gradient reduce-scatters,
        tensor-parallel all-reduce per block). A record's phase is that of the op that made what it
        moves, so a gradient summed when the optimizer needs it counts as the backward's. Collectives
        along more than one mesh axis, or along an axis of a 2-D mesh, are read per axis: "along 'model': tensor
        parallel ... | along 'data': data parallel ..."."""
        if not self.records:
            return "no communication: every op ran where its operands were"
        on_grid = {name for m in _live_meshes() if not m._flat for name in m.mesh_dim_names}
        axes = list(dict.fromkeys(r.axis for r in self.records if r.axis in on_grid))
        if axes:
            parts = []
            for axis in axes + [""]:
                subset = Recording()
                subset.records = [r for r in self.records if (r.axis == axis if axis else r.axis not in axes)]
                if subset.records:
                    parts.append((f"along {axis!r}" if axis else "elsewhere") + ": " + subset._one_pattern())
            return " | ".join(parts)
        return self._one_pattern()

    def _one_pattern(self):
        """pattern() of records read together."""
        contraction = ("matmul",)
        gathered = self.count("all_gather", "forward", contraction)
        regathered = self.count("all_gather", "backward", contraction)
        scattered = self.count("reduce_scatter", "backward")
        forward_partials = self.count("all_reduce", "forward", contraction)
        backward_partials = self.count("all_reduce", "backward")
        lines = []
        if gathered and (scattered or backward_partials):
            lines.append(f"fully sharded (FSDP / ZeRO-3): {gathered} weights all-gathered for the forward and "
                         f"{regathered} for the backward; gradients reduce-scattered ({scattered}) or all-reduced "
                         f"({backward_partials})")
        elif forward_partials:
            lines.append(f"tensor parallel: {forward_partials} all-reduces of split contractions in the forward "
                         f"(one per row-parallel block), {backward_partials} in the backward")
        elif backward_partials or scattered:
            lines.append(f"data parallel: {backward_partials} gradient all-reduces"
                         + (f" and {scattered} reduce-scatters" if scattered else "")
                         + " (parameters replicated, the batch split)")
        reductions = self.count("all_reduce", "forward") - forward_partials
        if reductions:
            lines.append(f"{reductions} all-reduces of reductions (sum, mean, max) over a split dim in the forward")
        moves = self.count("broadcast") + self.count("all_gather") - gathered - regathered
        if moves:
            lines.append(f"{moves} broadcasts or all-gathers moving tensors (layout changes, whole tensors meeting "
                         "split ones)")
        return "; ".join(lines)

    def table(self):
        """Every collective, then totals per phase and kind, as text."""
        rows = [("#", "phase", "collective", "axis", "workers", "bytes", "op", "source", "needed by")]
        for i, r in enumerate(self.records):
            rows.append((str(i), r.phase, r.name, r.axis or "-", str(r.workers), str(r.bytes), r.op, r.source or "-",
                         r.needed_by or "-"))
        widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
        lines.append("")
        total_count = total_bytes = 0
        for (phase, name), (count, size) in sorted(self.totals().items()):
            lines.append(f"{phase:9} {name:16} {count:6} x  {size:12} bytes")
            total_count += count
            total_bytes += size
        lines.append(f"{'total':9} {'':16} {total_count:6} x  {total_bytes:12} bytes")
        lines.append("pattern: " + self.pattern())
        return "\n".join(lines)

    def __repr__(self):
        return f"Recording({len(self.records)} collectives)"


_package_dir = os.path.dirname(os.path.abspath(__file__))


def _caller_source():
    """file:line of the innermost frame outside the gt package."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_package_dir):
        frame = frame.f_back
    if frame is None:
        return ""
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def _axis_of(workers, signal):
    members = sorted(workers)
    for mesh in _live_meshes():
        for d, name in enumerate(mesh.mesh_dim_names):
            if any(sorted(g) == members for g in mesh.groups(d)):
                return name
    return signal


@contextlib.contextmanager
def record():
    """Records every collective the dispatcher runs for this client's ops inside the block; yields a
    Recording, filled when the block ends (a sync point)."""
    recording = Recording()
    _C.set_source_hook(_caller_source)
    _C.start_recording()
    try:
        yield recording
    finally:
        try:
            raw = _C.stop_recording()
        finally:
            _C.set_source_hook(None)
        recording.records = [
            CollectiveRecord(kind=d["kind"], reduce=d["reduce"], workers=list(d["workers"]), bytes=d["bytes"],
                             op=d["op"], phase="backward" if d["backward"] else "forward", source=d["source"],
                             axis=_axis_of(d["workers"], d["signal"]), seq=d["seq"], needed_by=d["needed_by"])
            for d in raw]


def explain(step_fn, *args, **kwargs):
    """Runs `step_fn(*args, **kwargs)` once under record() and returns the Recording."""
    with record() as r:
        step_fn(*args, **kwargs)
    return r


# ---- gt.distributed.checkpoint ------------------------------------------------------
# PyTorch's torch.distributed.checkpoint lives in its own package; importing it here, and
# naming it in sys.modules, makes `import gt.distributed.checkpoint as dcp` and
# `from gt.distributed.checkpoint.state_dict import get_state_dict` work.
from . import distributed_checkpoint as checkpoint  # noqa: E402

sys.modules[__name__ + ".checkpoint"] = checkpoint
sys.modules[__name__ + ".checkpoint.state_dict"] = checkpoint.state_dict
