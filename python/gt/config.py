"""Signal configs: how tensors and ops inside a named signal scope are placed.

A config comes from YAML (gt.load_config, or GT_CONFIG at import) or from
code (gt.register_config with SignalConfig / ShardConfig). The format:

    forward_layer1:
      shard:
        axis: 0                 # the dimension split across workers
        workers: [0, 1, 2, 3]   # worker indices
      backward: backward_layer1 # the config the gradient computation uses
      compile: true             # a compile boundary
    params:
      replicated: true          # a full copy on every worker

or with a device mesh and DTensor placements (gt.distributed), one per mesh axis:

    mesh: {workers: [0, 1, 2, 3], axes: [data]}
    batch:
      placements: [shard(0)]    # as shard: {axis: 0, workers: [0, 1, 2, 3]}
    params:
      placements: [replicate]   # a copy on each mesh worker

Configs are kept per process (so per client: one user's signal names never
reach another's). Every problem is reported at once, naming the signal and
the field (and, for YAML, the file and line).

YAML is read by the C++ client (gt::parse_config_string, through gt._C), the
one reader of signal configs, so its problems are worded the same from C++
and Python. The classes here check the Python values given to them.
"""

import threading

from . import _C

__all__ = ["ConfigError", "ShardConfig", "SignalConfig", "register_config", "load_config", "get_config",
           "configs", "clear_configs"]


class ConfigError(ValueError):
    """A config is malformed. `problems` lists each problem as 'where: what'."""

    def __init__(self, summary, problems):
        super().__init__(summary + ":\n  " + "\n  ".join(problems))
        self.problems = list(problems)


def _format(problems):
    return [f"{field}: {message}" for field, message in problems]


def _type_name(v):
    return "null" if v is None else type(v).__name__


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


class ShardConfig:
    """Split tensors along `axis` across the workers listed in `workers` (None: every worker)."""

    def __init__(self, axis=0, workers=None):
        self.axis = axis
        self.workers = list(workers) if isinstance(workers, (list, tuple, range)) else workers
        problems = self._problems("ShardConfig")
        if problems:
            raise ConfigError("invalid ShardConfig", _format(problems))

    def _problems(self, where):
        out = []
        if not _is_int(self.axis):
            out.append((f"{where}.axis", f"expected int, got {_type_name(self.axis)} {self.axis!r}"))
        if self.workers is not None:
            if not isinstance(self.workers, list):
                out.append((f"{where}.workers", f"expected a list of ints, got {_type_name(self.workers)} {self.workers!r}"))
            else:
                if not self.workers:
                    out.append((f"{where}.workers", "expected at least one worker"))
                for i, w in enumerate(self.workers):
                    if not _is_int(w):
                        out.append((f"{where}.workers[{i}]", f"expected int, got {_type_name(w)} {w!r}"))
                    elif w < 0:
                        out.append((f"{where}.workers[{i}]", f"worker index must be >= 0, got {w}"))
                ints = [w for w in self.workers if _is_int(w)]
                if len(set(ints)) != len(ints):
                    out.append((f"{where}.workers", f"lists a worker twice: {self.workers}"))
        return out

    def __eq__(self, other):
        return isinstance(other, ShardConfig) and (self.axis, self.workers) == (other.axis, other.workers)

    def __repr__(self):
        return f"ShardConfig(axis={self.axis!r}, workers={self.workers!r})"


class SignalConfig:
    """What a signal scope does: shard (a ShardConfig), or replicated; the
    signal whose config the backward pass uses; whether it is a compile
    boundary. `backward` is the YAML spelling of `backward_signal`."""

    def __init__(self, shard=None, backward_signal=None, compile=False, replicated=False, backward=None,
                 replicas=None, mesh=None, placements=None):
        problems = []
        if backward is not None and backward_signal is not None and backward != backward_signal:
            problems.append(f"SignalConfig: backward={backward!r} and backward_signal={backward_signal!r} disagree")
        self.shard = shard
        self.backward_signal = backward_signal if backward_signal is not None else backward
        self.compile = compile
        self.replicated = replicated
        self.replicas = list(replicas) if replicas else []  # with replicated: the workers holding a copy
        # Different placements per axis of a 2-D mesh: (rows, columns, workers, [dim or None per axis]),
        # and that gt.distributed.DeviceMesh (naming its axes for placements and records).
        self.mesh_layout = None
        self.mesh = None
        if placements is not None or mesh is not None:
            if shard is not None or replicated or replicas:
                raise ConfigError("invalid SignalConfig", ["SignalConfig: placements exclude shard and replicated"])
            self._place(mesh, placements)
        problems += _format(self._problems("SignalConfig"))
        if problems:
            raise ConfigError("invalid SignalConfig", problems)

    def _place(self, mesh, placements):
        """shard / replicated from DTensor placements on a gt.distributed.DeviceMesh (the C++ client's rule)."""
        from .distributed import DeviceMesh, _placement_pairs
        if not isinstance(mesh, DeviceMesh):
            raise ConfigError("invalid SignalConfig", [f"SignalConfig.mesh: expected a DeviceMesh, got {_type_name(mesh)}"])
        try:
            shard, replicated, replicas, layout = _C.signal_config(mesh._rows, list(mesh.mesh_dim_names), mesh._flat,
                                                                   _placement_pairs(list(placements or [])))
        except _C.Error as e:
            raise ConfigError("invalid SignalConfig", [f"SignalConfig.placements: {e}"]) from None
        self.shard = ShardConfig(axis=shard[0], workers=shard[1]) if shard is not None else None
        self.replicated, self.replicas = replicated, list(replicas)
        self.mesh_layout = _mesh_layout(layout)
        self.mesh = mesh if self.mesh_layout is not None else None

    @property
    def backward(self):
        return self.backward_signal

    def _problems(self, where):
        out = []
        if self.shard is not None:
            if isinstance(self.shard, ShardConfig):
                out += self.shard._problems(f"{where}.shard")
            else:
                out.append((f"{where}.shard", f"expected a ShardConfig, got {_type_name(self.shard)}"))
        if not isinstance(self.replicated, bool):
            out.append((f"{where}.replicated", f"expected bool, got {_type_name(self.replicated)} {self.replicated!r}"))
        elif self.replicated and self.shard is not None:
            out.append((where, "shard and replicated: true exclude each other"))
        if self.replicas and not self.replicated:
            out.append((f"{where}.replicas", "only with replicated=True"))
        for i, w in enumerate(self.replicas):
            if not isinstance(w, int) or isinstance(w, bool) or w < 0:
                out.append((f"{where}.replicas[{i}]", f"expected a worker index (int >= 0), got {w!r}"))
        if self.backward_signal is not None and (not isinstance(self.backward_signal, str) or not self.backward_signal):
            out.append((f"{where}.backward", f"expected a signal name (str), got "
                       f"{_type_name(self.backward_signal)} {self.backward_signal!r}"))
        if not isinstance(self.compile, bool):
            out.append((f"{where}.compile", f"expected bool, got {_type_name(self.compile)} {self.compile!r}"))
        return out

    def __eq__(self, other):
        return isinstance(other, SignalConfig) and (
            (self.shard, self.backward_signal, self.compile, self.replicated, self.replicas, self.mesh_layout)
            == (other.shard, other.backward_signal, other.compile, other.replicated, other.replicas,
                other.mesh_layout))

    def __repr__(self):
        replicas = f", replicas={self.replicas!r}" if self.replicas else ""
        mesh = ""
        if self.mesh_layout is not None:
            rows, columns, workers, dims = self.mesh_layout
            grid = [workers[i:i + columns] for i in range(0, rows * columns, columns)]
            mesh = f", mesh={grid!r}, placements={['Replicate()' if d is None else f'Shard({d})' for d in dims]!r}"
        return (f"SignalConfig(shard={self.shard!r}, backward_signal={self.backward_signal!r}, "
                f"compile={self.compile!r}, replicated={self.replicated!r}{replicas}{mesh})")


def _mesh_layout(layout):
    """(rows, columns, workers, [dim or None]) from the C++ client, with lists as lists (comparable)."""
    if layout is None:
        return None
    rows, columns, workers, dims = layout[:4]
    return rows, columns, list(workers), list(dims)


_lock = threading.Lock()
_registry = {}  # GUARDED_BY(_lock): signal name -> SignalConfig


def _check_name(name):
    if not isinstance(name, str) or not name:
        raise ConfigError("invalid signal name", [f"signal name: expected a non-empty str, got {_type_name(name)} {name!r}"])


def register_config(name, config):
    """Sets the config of signal `name` (replacing any earlier one)."""
    _check_name(name)
    if not isinstance(config, SignalConfig):
        raise ConfigError(f"invalid config for signal '{name}'",
                          [f"{name}: expected a SignalConfig, got {_type_name(config)}"])
    # Fields may have been changed since construction: check again, naming the signal.
    problems = config._problems(name)
    if problems:
        raise ConfigError(f"invalid config for signal '{name}'", _format(problems))
    with _lock:
        _send(name, config)
        _registry[name] = config


def _send(name, config):
    """Hands `config` to the C++ client, which sends it to the dispatcher."""
    shard = config.shard
    _C.register_config(name, shard.axis if shard is not None else None,
                       list(shard.workers or []) if shard is not None else [],
                       bool(config.replicated), config.backward_signal or "", bool(config.compile),
                       list(config.replicas), config.mesh_layout)


def get_config(name):
    """The config of signal `name`, or None."""
    with _lock:
        return _registry.get(name)


def configs():
    """Every registered config, by signal name."""
    with _lock:
        return dict(_registry)


def clear_configs():
    with _lock:
        _C.clear_configs()
        _registry.clear()


def _register_parsed(source, signals, problems):
    """Registers every config the C++ reader found, or none if it found a problem."""
    if problems:
        raise ConfigError(f"{source}: {len(problems)} problem{'s' if len(problems) != 1 else ''}", problems)
    found = {}
    for name, shard, replicated, backward, compile, replicas, mesh in signals:
        if shard is not None:
            axis, workers = shard
            shard = ShardConfig(axis=axis, workers=workers or None)  # no workers: every worker
        found[name] = SignalConfig(shard=shard, backward_signal=backward or None, compile=compile,
                                   replicated=replicated, replicas=replicas)
        found[name].mesh_layout = _mesh_layout(mesh)
        if mesh is not None:  # the file's mesh, so that tensors made in the scope name its axes
            from .distributed import DeviceMesh
            rows, columns, workers, _, names = mesh
            found[name].mesh = DeviceMesh([workers[i:i + columns] for i in range(0, rows * columns, columns)],
                                          tuple(names))
    with _lock:
        for name, config in found.items():
            _send(name, config)
        _registry.update(found)
    return found


def load_config(path):
    """Reads signal configs from a YAML file and registers them all.

    Nothing is registered if any signal has a problem; the ConfigError then
    lists every problem with its file, line and key path (text that is not
    YAML is such a problem). OSError if the file cannot be read. Returns the
    configs read, by signal name.
    """
    path = str(path)
    return _register_parsed(path, *_C.parse_config_file(path))


def load_config_string(text, source_name="<string>"):
    """load_config for YAML text."""
    return _register_parsed(source_name, *_C.parse_config_string(text, source_name))
