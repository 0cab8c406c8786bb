"""gt.distributed.checkpoint.state_dict: PyTorch's get_state_dict / set_state_dict.

The model's state dict is Module.state_dict(); an optimizer's is its state_dict() in
PyTorch's layout with parameters named by their model keys instead of their indexes (as
PyTorch's get_state_dict does), so a checkpoint survives a change of parameter order. Before
its first step an optimizer has no state to load into: get_state_dict makes it (a step with
zero gradients and learning rate 0, as PyTorch does), so that dcp.load can fill it in place.
"""

__all__ = ["get_state_dict", "set_state_dict", "get_model_state_dict", "set_model_state_dict",
           "get_optimizer_state_dict", "set_optimizer_state_dict"]


def _optimizers(optimizers):
    if optimizers is None:
        return []
    return list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]


def _names(model):
    """{id(parameter): its key in the model's state dict}."""
    return {id(p): name for name, p in model.named_parameters()}


def _params(optimizer):
    return [p for group in optimizer.param_groups for p in group["params"]]


def _require_state_dict(optimizer):
    if not hasattr(optimizer, "state_dict") or not hasattr(optimizer, "load_state_dict"):
        raise TypeError(f"{type(optimizer).__name__} has no state_dict()/load_state_dict()")


def _init_state(optimizer):
    """One step with zero gradients and lr 0 where the optimizer has no state yet (PyTorch's way)."""
    if getattr(optimizer, "state", None):
        return
    import gt
    params = _params(optimizer)
    grads = [p.grad for p in params]
    lrs = [group["lr"] for group in optimizer.param_groups]
    for p in params:
        if p.grad is None:
            p.grad = gt.zeros_like(p)
    for group in optimizer.param_groups:
        group["lr"] = 0.0
    try:
        optimizer.step()
    finally:
        for group, lr in zip(optimizer.param_groups, lrs):
            group["lr"] = lr
        for p, g in zip(params, grads):
            p.grad = g


def get_model_state_dict(model, *, submodules=None, options=None):
    del submodules, options
    return model.state_dict()


def set_model_state_dict(model, model_state_dict, *, options=None):
    strict = getattr(options, "strict", True)
    return model.load_state_dict(model_state_dict, strict=strict)


def get_optimizer_state_dict(model, optimizers, *, submodules=None, options=None):
    del submodules, options
    names = _names(model)
    out = {"state": {}, "param_groups": []}
    for optimizer in _optimizers(optimizers):
        _require_state_dict(optimizer)
        _init_state(optimizer)
        sd = optimizer.state_dict()
        keys = [names.get(id(p), f"param{i}") for i, p in enumerate(_params(optimizer))]
        for index, state in sd["state"].items():
            out["state"][keys[index]] = state
        for group in sd["param_groups"]:
            out["param_groups"].append({**group, "params": [keys[i] for i in group["params"]]})
    return out


def set_optimizer_state_dict(model, optimizers, optim_state_dict, *, options=None):
    del options
    names = _names(model)
    groups = list(optim_state_dict["param_groups"])
    for optimizer in _optimizers(optimizers):
        _require_state_dict(optimizer)
        keys = [names.get(id(p), f"param{i}") for i, p in enumerate(_params(optimizer))]
        index = {key: i for i, key in enumerate(keys)}
        mine = groups[:len(optimizer.param_groups)]
        groups = groups[len(optimizer.param_groups):]
        state = {index[k]: v for k, v in optim_state_dict["state"].items() if k in index}
        optimizer.load_state_dict({"state": state,
                                   "param_groups": [{**g, "params": [index[k] for k in g["params"]]} for g in mine]})


def get_state_dict(model, optimizers=None, *, submodules=None, options=None):
    """(model state dict, optimizer state dict), as torch.distributed.checkpoint.state_dict's."""
    return (get_model_state_dict(model, submodules=submodules, options=options),
            get_optimizer_state_dict(model, optimizers, submodules=submodules, options=options))


def set_state_dict(model, optimizers=None, *, model_state_dict, optim_state_dict, options=None):
    """Loads both into the model and optimizers (PyTorch's set_state_dict); returns the model's
    missing and unexpected keys."""
    result = set_model_state_dict(model, model_state_dict, options=options)
    if optimizers is not None:
        set_optimizer_state_dict(model, optimizers, optim_state_dict, options=options)
    return result
