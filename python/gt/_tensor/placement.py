"""Where a gt.Tensor's pieces live, with PyTorch DTensor's names:
`placements`, `device_mesh`, `redistribute`, `full_tensor` (see gt.distributed)."""

from .. import _C


class PlacementOps:
    __slots__ = ()

    @property
    def placements(self):
        """The tensor's placements, one per axis of its `device_mesh` (asks the dispatcher: a sync point)."""
        from ..distributed import _layout
        return _layout(self)[1]

    @property
    def device_mesh(self):
        """The workers holding the tensor's pieces: the mesh it was laid out on, else a 1-D DeviceMesh
        (a whole tensor: one worker)."""
        from ..distributed import _layout
        return _layout(self)[0]

    def redistribute(self, device_mesh=None, placements=None):
        """A copy laid out on `device_mesh` by `placements` (DTensor.redistribute); either defaults to the
        tensor's own. The dispatcher performs the collectives the change needs."""
        from ..distributed import distribute_tensor, _layout
        if device_mesh is None or placements is None:
            mesh, own = _layout(self)
            device_mesh = mesh if device_mesh is None else device_mesh
            placements = own if placements is None else placements
        return distribute_tensor(self, device_mesh, placements)

    def full_tensor(self):
        """The whole tensor, on the first worker holding a piece of it (DTensor.full_tensor)."""
        return self._wrap(_C.full_tensor(self._c))
