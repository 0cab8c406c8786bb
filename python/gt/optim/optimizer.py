"""The optimizer base class: parameter groups, per-parameter state, zero_grad,
step's frame, and state_dict()/load_state_dict() in PyTorch's layout.

A subclass names its defaults and implements `_update(group, params, grads)`,
the update of the parameters of one group that have a gradient; step() calls
it under no_grad after the gradients are settled together (one collective
for data-parallel copies, not one per parameter).
"""

import copy
import warnings

import numpy as np

from .. import _C
from .._grad import enable_grad, no_grad
from .._tensor import Tensor, tensor

__all__ = ["Optimizer", "required"]


class _Required:
    """The default of a hyperparameter every group must give (SGD's lr)."""

    def __repr__(self):
        return "<required parameter>"


required = _Required()


def _as_param_list(params, what):
    """`params` (a tensor or an ordered iterable of them) as a list of leaf gt Tensors."""
    if isinstance(params, Tensor):
        return [params]
    if isinstance(params, (set, frozenset)):
        raise TypeError(f"{what}: parameters need to be an ordered collection (a list), not a set, "
                        "whose order changes between runs")
    params = list(params)
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"{what}: optimizer can only optimize gt Tensors, but one of the params is a "
                            f"{type(p).__name__} (not a gt Tensor)")
        if not p.is_leaf:
            raise ValueError(f"{what}: can't optimize a non-leaf Tensor")
    return params


def _number_of(value, what):
    """A saved `step` (a number, a 0-d gt/NumPy/torch tensor) as a Python float."""
    if isinstance(value, Tensor):
        return float(value.item())
    try:
        return float(np.asarray(value).reshape(()))
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a number or a one-element tensor, got {type(value).__name__}") from None


class Optimizer:
    """PyTorch's Optimizer surface over gt tensors.

    `param_groups` is a list of dicts ("params" plus every hyperparameter);
    their values may be changed between steps (an lr schedule) and the next
    step uses them. `state` maps a parameter to its state dict (moment
    estimates as gt tensors laid out like the parameter; a step count as a
    Python number, so reading it is no sync point: state_dict() gives it the
    type PyTorch's does).
    """

    # Whether PyTorch 1.13 keeps this optimizer's per-parameter step as a
    # tensor (Adam, AdamW, Adagrad) or as a number (Adadelta, RMSprop).
    _step_is_tensor = False

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = {}  # gt Tensors hash by identity
        self.param_groups = []
        name = type(self).__name__
        if isinstance(params, Tensor):
            raise TypeError(f"{name}: params should be an iterable of gt Tensors or dicts, got a Tensor")
        groups = list(_as_param_list(params, name) if isinstance(params, (set, frozenset)) else params)
        if not groups:
            raise ValueError(f"{name}: optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    # ---- groups -----------------------------------------------------------

    def add_param_group(self, param_group):
        """Adds a group: a dict with "params" and any hyperparameters (the others from `defaults`)."""
        name = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(f"{name}: a param group must be a dict, got {type(param_group).__name__}")
        group = dict(param_group)
        group["params"] = _as_param_list(group.get("params", []), name)
        for key, default in self.defaults.items():
            if default is required and key not in group:
                raise ValueError(f"{name}: parameter group didn't specify a value of required "
                                 f"optimization parameter {key}")
            group.setdefault(key, default)
        ids = [id(p) for p in group["params"]]
        if len(set(ids)) != len(ids):
            warnings.warn(f"{name}: a parameter group holds the same parameter more than once; "
                          "each occurrence is updated", stacklevel=3)
        taken = {id(p) for g in self.param_groups for p in g["params"]}
        if taken & set(ids):
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        self._check_group(group)
        self.param_groups.append(group)
        self._group_added(group)

    def _check_group(self, group):
        """Raises ValueError for a hyperparameter out of range (each optimizer's own checks)."""

    def _group_added(self, group):
        """Called after a group joins (Adagrad fills its state here, as PyTorch's does)."""

    @property
    def params(self):
        """Every parameter, group by group (gt's older optimizers had this list)."""
        return [p for group in self.param_groups for p in group["params"]]

    # ---- the step ---------------------------------------------------------

    def zero_grad(self, set_to_none=True):
        """Drops every parameter's grad (set_to_none) or fills it with zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                else:
                    g = p.grad
                    if g is not None:
                        g.zero_()

    def step(self, closure=None):
        """One update of every parameter that has a grad; returns closure()'s loss when given."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        everything = [p._c for group in self.param_groups for p in group["params"]]
        with no_grad():
            _C.settle_gradients(everything)
            for group in self.param_groups:
                params, grads = [], []
                for p in group["params"]:
                    g = p.grad
                    if g is not None:
                        params.append(p)
                        grads.append(-g if group.get("maximize", False) else g)
                if params:
                    self._update(group, params, grads)
        return loss

    def _update(self, group, params, grads):
        raise NotImplementedError

    # ---- state dicts ------------------------------------------------------

    def state_dict(self):
        """{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}, as PyTorch's.

        Parameters are numbered in group order; state tensors are the
        optimizer's own (not copies, as in PyTorch); a tensor step is a new
        0-d float32 gt tensor.
        """
        index, groups, start = {}, [], 0
        for group in self.param_groups:
            for i, p in enumerate(group["params"], start):  # a repeated parameter keeps its first index
                index.setdefault(id(p), i)
            start += len(group["params"])
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state and index[id(p)] not in state:
                    state[index[id(p)]] = self._packed_state(self.state[p])
        return {"state": state, "param_groups": groups}

    def _packed_state(self, entry):
        packed = dict(entry)
        if "step" in packed and self._step_is_tensor:
            packed["step"] = tensor(float(packed["step"]))
        return packed

    def load_state_dict(self, state_dict):
        """Takes the state and hyperparameters of `state_dict` (from state_dict(), or PyTorch's).

        The groups must match this optimizer's in number and size. State
        tensors may be gt tensors, NumPy arrays or anything NumPy reads (a
        torch tensor on the CPU); each is copied into a new tensor laid out
        like its parameter. Nothing changes unless all of it loads.
        """
        name = type(self).__name__
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError(f"{name}.load_state_dict: expected a dict with 'state' and 'param_groups'")
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"{name}.load_state_dict: loaded state dict has a different number of parameter "
                             f"groups ({len(saved_groups)}) than the optimizer ({len(self.param_groups)})")
        by_index = {}
        for i, (ours, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if len(saved["params"]) != len(ours["params"]):
                raise ValueError(f"{name}.load_state_dict: loaded state dict contains a parameter group that "
                                 f"doesn't match the size of optimizer's group: group {i} has "
                                 f"{len(saved['params'])} parameters saved, {len(ours['params'])} here")
            by_index.update(zip(saved["params"], ours["params"]))
        state = {}
        for key, entry in state_dict["state"].items():
            if key not in by_index:
                raise ValueError(f"{name}.load_state_dict: state for parameter {key!r}, which no saved group lists")
            state[by_index[key]] = self._unpacked_state(entry, by_index[key], f"{name}.load_state_dict: state[{key!r}]")
        groups = []
        for ours, saved in zip(self.param_groups, saved_groups):
            group = copy.deepcopy({k: v for k, v in saved.items() if k != "params"})
            for key, default in self.defaults.items():  # an older state dict may lack newer options
                group.setdefault(key, ours.get(key, default))
            group["params"] = ours["params"]
            self._check_group(group)
            groups.append(group)
        self.state, self.param_groups = state, groups

    def _unpacked_state(self, entry, param, what):
        if not isinstance(entry, dict):
            raise TypeError(f"{what} must be a dict, got {type(entry).__name__}")
        out = {}
        for key, value in entry.items():
            if key == "step":
                out[key] = _number_of(value, f"{what}['step']")
            elif value is None or isinstance(value, (int, float)):
                out[key] = value
            else:
                out[key] = _like_param(value, param, f"{what}[{key!r}]")
        return out

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {key}: {group[key]}" for key in sorted(group) if key != "params"]
        return "\n".join(lines) + "\n)"


def _like_param(value, param, what):
    """A new tensor laid out like `param` (its placement, its dtype) holding `value`."""
    shape = tuple(value.shape) if isinstance(value, Tensor) else np.shape(value)
    if tuple(shape) != tuple(param.shape):
        raise ValueError(f"{what} has shape {tuple(shape)}, but its parameter has shape {tuple(param.shape)}")
    out = param.detach().clone()
    out.copy_(value if isinstance(value, Tensor) else np.asarray(value))
    return out
