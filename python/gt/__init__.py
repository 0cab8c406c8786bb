"""gt: PyTorch-like tensors whose data lives on a shared pool of gt workers.

    import gt
    a = gt.randn(1000, 1000)
    b = gt.randn(1000, 1000)
    c = a @ b                  # returns at once; runs on a worker
    result = c.data.numpy()    # waits for the data

With nothing configured, the first op starts the embedded default (a
dispatcher and gt.gpu_workers(n) workers, default 2 or GT_WORKERS, inside
this process). gt.connect("host:port") uses a running dispatcher instead;
both must be called before the first op. GT_CONFIG names a signal config
file loaded at import; GT_INSTRUCTION_LOG makes the embedded dispatcher log
every instruction it receives.

An op that fails on a worker is reported at the next sync point (numpy(),
item(), repr, gt.sync()) as gt.Error, naming the op.
"""

import atexit as _atexit

from . import _C, _dtype
from ._C import Error
from ._dtype import dtype, float32, float64, int32, int64
from ._grad import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from ._tensor import (MinMax, Tensor, arange, cat, eye, from_numpy, full, manual_seed, ones, ones_like, rand, rand_like,
                      randn, randn_like, randperm, stack, tensor, tril, triu, where, zeros, zeros_like)
from . import config, debug, distributed, nn, optim, signal
from ._tensor.device import device
from .serialization import load, save
from .config import (ConfigError, ShardConfig, SignalConfig, clear_configs, configs, get_config, load_config,
                     load_config_string, register_config)

bool = _dtype.bool_  # gt.bool, as torch.bool (shadows the builtin only as gt.bool)

__all__ = [
    "Error", "Tensor", "MinMax", "dtype", "float32", "float64", "int32", "int64", "bool",
    "tensor", "from_numpy", "randn", "rand", "zeros", "ones", "full", "arange", "zeros_like", "ones_like",
    "randn_like", "rand_like", "cat", "stack", "where", "tril", "triu", "manual_seed",
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
    "connect", "gpu_workers", "workers", "sync", "shutdown",
    "ConfigError", "ShardConfig", "SignalConfig", "register_config", "load_config", "load_config_string",
    "get_config", "configs", "clear_configs",
    "config", "debug", "nn", "optim", "signal", "device", "save", "load",
    "matmul", "exp", "log", "sqrt", "relu", "sigmoid", "tanh", "abs", "erf", "sum", "mean", "max", "min", "maximum",
    "minimum", "softmax", "log_softmax", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "clone", "detach",
    "split", "chunk", "flatten", "index_select", "gather", "var", "std", "norm", "clamp", "clip", "argmax", "argmin",
    "eye", "randperm",
]


def connect(address):
    """Uses the dispatcher at `address` ('host:port', or a tcp:// / ipc:// endpoint). Call before the first op.
    A sync point raises gt.Error naming the address when no connection to it came within
    GT_CONNECT_TIMEOUT seconds (default 5; 0: wait forever), and at once, from then on, when the
    connection closed."""
    _C.connect(str(address))


def gpu_workers(n):
    """Sets the number of workers of the embedded default. Call before the first op."""
    _C.workers(int(n))


workers = gpu_workers


def sync():
    """Waits for every queued op; raises gt.Error for any that failed."""
    _C.sync()


def shutdown():
    """Ends the session now (normally done at exit). Tensors still alive become unusable."""
    _C.shutdown()


# Module-level forms of the common tensor methods (gt.exp(x), gt.matmul(a, b), ...).
def matmul(a, b):
    return a @ b


def _method(name):
    def fn(x, *args, **kwargs):
        return getattr(x, name)(*args, **kwargs)
    fn.__name__ = name
    fn.__doc__ = f"x.{name}(...)"
    return fn


for _name in ("exp", "log", "sqrt", "relu", "sigmoid", "tanh", "abs", "erf", "sum", "mean", "max", "min", "maximum",
              "minimum", "softmax", "log_softmax", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "clone",
              "detach", "split", "chunk", "flatten", "index_select", "gather", "var", "std", "norm", "clamp", "clip",
              "argmax", "argmin"):
    globals()[_name] = _method(_name)
del _name



def _shutdown_at_exit():
    # Python's atexit runs before the interpreter finalizes: the queued ops are
    # sent, the embedded hosts' threads stop and are joined here, so no worker
    # is still inside LibTorch while Python (and PyTorch, when imported) tear
    # down. _C.shutdown waits without the GIL.
    _C.shutdown()


_atexit.register(_shutdown_at_exit)

_env_config = _C._setting("GT_CONFIG")  # gt/settings.h: the one list of GT_* variables
if _env_config:
    load_config(_env_config)
del _env_config
