"""gt.save / gt.load: PyTorch's own checkpoint format (torch.save's zip archive).

    gt.save({"model": model.state_dict(), "step": 100}, "ckpt.pt")
    state = gt.load("ckpt.pt")            # gt tensors, placed like gt.from_numpy
    torch.load("ckpt.pt")                 # PyTorch reads the same file

What is written: nested dicts (keys all str or all int), lists and tuples of
gt tensors, NumPy arrays, Python numbers, strings and None. LibTorch's
torch::jit::Pickler (what torch::pickle_save uses) writes the structure from
each tensor's shape and dtype alone; then each tensor's data is fetched from
its worker once (numpy()), when its record is written by LibTorch's
PyTorchStreamWriter (torch.save's archive writer), from that array without
another copy, and dropped: the client holds one tensor's bytes at a time. This
runs in the separate extension gt._serialize. A path is written to a temporary name
in the same folder and renamed when complete, so a failed save never leaves a
file that looks whole.

What is read: a torch.save file (zip format, PyTorch >= 1.6's default), or
one gt.save wrote. The archive's records are read by LibTorch's
PyTorchStreamReader one at a time, each when a tensor is made from it (a
path is not read whole), and each record's CRC-32 is checked against the
archive's directory. LibTorch's own unpickler (torch::pickle_load) cannot
decode what Python's torch.save writes (the OrderedDict of a state_dict, a
one-item dict, nn.Parameter), so the pickle is decoded by Python's pickle
with an allow-list: tensors, parameters, OrderedDict and PyTorch's list
helpers; anything else (arbitrary classes, code) is refused, as
torch.load(weights_only=True) does. Tensors become gt tensors as
gt.from_numpy makes them (float16 and small integer types widened), keeping
requires_grad.
"""

import collections
import io
import math
import os
import pickle
import zipfile
import zlib

import numpy as np

from . import _C
from ._tensor import Tensor, from_numpy
from ._tensor.device import as_device

__all__ = ["save", "load"]


class _TensorRecord:
    """What gt._serialize writes as a tensor: its shape, NumPy dtype and requires_grad, known
    without its data, and fetch(), which gives the data (a C-contiguous array) when its turn to be
    written comes, so the client holds one tensor's bytes at a time."""

    __slots__ = ("source", "shape", "dtype", "requires_grad")

    def __init__(self, source, requires_grad):
        self.source, self.requires_grad = source, requires_grad
        self.shape, self.dtype = tuple(source.shape), np.dtype(source.dtype)

    def fetch(self):
        data = self.source.numpy() if isinstance(self.source, Tensor) else self.source
        return np.asarray(data, order="C")  # (ascontiguousarray would make a 0-d array 1-d)


def _extension():
    try:
        from . import _serialize
    except ImportError as error:
        raise ImportError(f"gt.save / gt.load need the extension gt._serialize (built with gt, linking LibTorch): "
                          f"{error}") from None
    return _serialize


def _records(obj, seen):
    """`obj` with each gt tensor and NumPy array replaced by a _TensorRecord (one per object, so a
    tensor saved under two keys, such as tied weights, is one storage in the file, as torch.save's)."""
    if isinstance(obj, (Tensor, np.ndarray)):
        if id(obj) not in seen:
            if isinstance(obj, Tensor) and obj.requires_grad and not obj.is_leaf:
                raise RuntimeError("gt.save: refusing to save a non-leaf tensor that requires grad (detach() it first)")
            seen[id(obj)] = (obj, _TensorRecord(obj, isinstance(obj, Tensor) and bool(obj.requires_grad)))
        return seen[id(obj)][1]
    if isinstance(obj, dict):
        return {k: _records(v, seen) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        items = [_records(v, seen) for v in obj]
        return items if isinstance(obj, list) else tuple(items)
    return obj


def save(obj, f):
    """Writes `obj` to `f` (a path, or a binary file object) in PyTorch's checkpoint format."""
    records = _records(obj, {})
    serialize = _extension()
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        if not os.path.isdir(os.path.dirname(path) or "."):
            raise FileNotFoundError(f"gt.save: no such directory: {os.path.dirname(path)} (saving {path})")
        temporary = os.path.join(os.path.dirname(path) or ".", f".{os.path.basename(path)}.tmp-{os.getpid()}")
        try:
            with open(temporary, "wb") as out:
                serialize.write(records, out.write, _TensorRecord)
            os.replace(temporary, path)
        finally:
            if os.path.exists(temporary):
                os.remove(temporary)
    else:
        if not hasattr(f, "write"):
            raise TypeError(f"gt.save: f must be a path or a binary file object, got {type(f).__name__}")
        serialize.write(records, f.write, _TensorRecord)


# ---- load -------------------------------------------------------------------------

_STORAGE_DTYPES = {"FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
                   "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16,
                   "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_}


class _Storage:
    """A storage of the archive, read only when a tensor is made from it (pickle's memo keeps
    every persistent object to the end of the load, so it must not hold the bytes)."""

    __slots__ = ("dtype", "record", "numel")

    def __init__(self, dtype, record=None, numel=0):
        self.dtype, self.record, self.numel = dtype, record, numel


def _list_helper(items, *_):
    return list(items)


class _CheckpointUnpickler(pickle.Unpickler):
    """Python's unpickler over a checkpoint's data.pkl, making gt tensors of its storages."""

    def __init__(self, data, read, name):
        super().__init__(io.BytesIO(data))
        self._read, self._name = read, name

    def find_class(self, module, name):
        allowed = {
            ("collections", "OrderedDict"): collections.OrderedDict,
            ("torch._utils", "_rebuild_tensor_v2"): self._rebuild_tensor,
            ("torch._utils", "_rebuild_parameter"): self._rebuild_parameter,
            ("torch", "Size"): tuple,
            ("torch.jit._pickle", "restore_type_tag"): lambda value, _type: value,
        }
        for helper in ("build_intlist", "build_doublelist", "build_boollist", "build_tensorlist"):
            allowed[("torch.jit._pickle", helper)] = _list_helper
        if (module, name) in allowed:
            return allowed[(module, name)]
        if module == "torch" and name in _STORAGE_DTYPES:
            return _Storage(_STORAGE_DTYPES[name])
        raise pickle.UnpicklingError(f"gt.load: {self._name} holds a {module}.{name}, which gt.load does not read "
                                     "(it reads tensors, numbers, strings, None and dicts, lists and tuples of them)")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _Storage)):
            raise pickle.UnpicklingError(f"gt.load: {self._name}: a storage of an unknown kind ({pid!r:.80})")
        _, kind, key, _location, numel = pid
        return _Storage(kind.dtype, f"data/{key}", int(numel))

    def _storage_data(self, storage):
        raw = self._read(storage.record)
        need = storage.numel * np.dtype(storage.dtype).itemsize
        if raw.size < need:
            raise pickle.UnpicklingError(f"gt.load: {self._name}: tensor data '{storage.record}' holds {raw.size} "
                                         f"bytes, {need} expected")
        return raw[:need].view(storage.dtype)

    def _rebuild_tensor(self, storage, offset, size, stride, requires_grad=False, _hooks=None, _metadata=None):
        size, stride = tuple(size), tuple(stride)
        end = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if all(size) else offset
        if offset < 0 or end > storage.numel or any(s < 0 for s in stride):
            raise pickle.UnpicklingError(f"gt.load: {self._name}: a tensor of shape {list(size)} lies outside its "
                                         f"data ({storage.numel} elements)")
        if math.prod(size) > max(storage.numel, 1):
            # An expanded view (a stride 0) would be materialised here: a file of a few
            # hundred bytes could ask for terabytes. PyTorch keeps such views lazily.
            raise pickle.UnpicklingError(f"gt.load: {self._name}: a tensor of shape {list(size)} has more elements "
                                         f"than its data ({storage.numel}); save a contiguous copy instead")
        data = self._storage_data(storage)
        view = np.lib.stride_tricks.as_strided(data[offset:], size, [s * data.itemsize for s in stride])
        return from_numpy(np.asarray(view, order="C"), requires_grad=bool(requires_grad))

    @staticmethod
    def _rebuild_parameter(data, requires_grad, _hooks=None):
        return data.requires_grad_(bool(requires_grad)) if isinstance(data, Tensor) else data


def _directory_crcs(source, name):
    """{record name: CRC-32} from the archive's directory (LibTorch's reader does not check them)."""
    try:
        with zipfile.ZipFile(source) as archive:
            return {info.filename.split("/", 1)[-1]: info.CRC for info in archive.infolist()}
    except zipfile.BadZipFile as error:
        raise ValueError(f"gt.load: {name} is not a readable PyTorch checkpoint ({error})") from None


def _record_reader(archive, crcs, name):
    """read(record): its bytes from LibTorch's reader, checked against the directory's CRC-32."""
    def read(record):
        if record not in crcs:
            raise pickle.UnpicklingError(f"gt.load: {name}: the archive lacks tensor data '{record}'")
        try:
            data = archive.read(record)
        except ValueError as error:
            raise ValueError(f"gt.load: {name}: record '{record}' cannot be read: {_first_line(error)}") from None
        if zlib.crc32(data) != crcs[record]:
            raise ValueError(f"gt.load: {name}: record '{record}' is corrupted (its CRC-32 does not match)")
        return data
    return read


def _first_line(error):
    return str(error).strip().splitlines()[0] if str(error).strip() else "unreadable"


def load(f, map_location=None, weights_only=None):
    """The object saved in `f` (a path, or a binary file object), with gt tensors for its tensors.

    map_location: PyTorch's argument, taken where it means "wherever gt keeps tensors" ('cpu',
    'cuda', a gt.device or torch.device; see gt._tensor.device); a mapping or a function is refused.
    weights_only: accepted for PyTorch's scripts; gt.load never runs a checkpoint's code anyway."""
    if map_location is not None:
        if callable(map_location) or isinstance(map_location, dict):
            raise TypeError("gt.load: map_location takes a device only; gt places loaded tensors as "
                            "gt.from_numpy does")
        as_device(map_location, "gt.load")
    if weights_only is False:
        raise ValueError("gt.load: weights_only=False (running a checkpoint's own classes) is not supported")
    serialize = _extension()
    if isinstance(f, (str, os.PathLike)):
        name = os.fspath(f)
        if not os.path.isfile(name):
            raise FileNotFoundError(f"gt.load: no such checkpoint file: {name}")
        source, crc_source = name, name
    else:
        if not hasattr(f, "read"):
            raise TypeError(f"gt.load: f must be a path or a binary file object, got {type(f).__name__}")
        name = getattr(f, "name", "<file object>")
        source = f.read()
        crc_source = io.BytesIO(source)
    try:
        archive = serialize.Archive(source)
        archive.names()
    except ValueError as error:
        raise ValueError(f"gt.load: {name} is not a readable PyTorch checkpoint (zip format): "
                         f"{_first_line(error)}") from None
    read = _record_reader(archive, _directory_crcs(crc_source, name), name)
    try:
        pickled = read("data.pkl").tobytes()
    except pickle.UnpicklingError:
        raise ValueError(f"gt.load: {name} has no data.pkl record: not a torch.save / gt.save checkpoint") from None
    try:
        return _CheckpointUnpickler(pickled, read, name).load()
    except Exception as error:  # noqa: BLE001 - a damaged pickle fails in many ways; each is reported by file
        if str(error).startswith("gt.load") or isinstance(error, _C.Error):
            raise
        raise ValueError(f"gt.load: {name}: its data.pkl is damaged ({type(error).__name__}: {error})") from None
