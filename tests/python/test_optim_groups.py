"""gt.optim's PyTorch surface (param_groups, add_param_group, zero_grad,
defaults, state) and every optimizer's steps against torch.optim in this process.

Every optimizer is compared to the bit (equal values, NaN where PyTorch has
NaN), options, groups and changed hyperparameters included: SGD's steps are
the ops PyTorch's are, which the worker runs with the same ATen kernels;
Adam and AdamW are one fused instruction that rounds as ATen's kernels do;
Adadelta, Adagrad and RMSprop use that instruction for each addcmul_ (which
ATen rounds once, a fused multiply-add), see gt/optim/adaptive.py.
"""

import numpy as np
import pytest
import torch

import gt

SHAPES = [(3, 4), (5,), (67,)]


def _make(lib, starts):
    if lib is gt:
        return [gt.tensor(s.copy(), requires_grad=True) for s in starts]
    return [torch.tensor(s.copy(), requires_grad=True) for s in starts]


def _train(name, rng, options=(), group_options=None, steps=5, dtype=np.float32, skip=None, between=None):
    """Trains gt and torch side by side; returns both parameter lists as NumPy arrays.

    group_options: one dict per group (each gets a parameter of every SHAPES entry);
    skip(step, i): parameter i gets no grad at that step; between(step, opt): changes
    to the groups after a step, applied to both optimizers.
    """
    group_options = group_options or [{}]
    starts = [rng.standard_normal(s).astype(dtype) for _ in group_options for s in SHAPES]
    grads = [[rng.standard_normal(s.shape).astype(dtype) for s in starts] for _ in range(steps)]
    result = []
    for lib, optim in ((gt, gt.optim), (torch, torch.optim)):
        params = _make(lib, starts)
        per_group = len(SHAPES)
        groups = [dict(params=params[k * per_group:(k + 1) * per_group], **o) for k, o in enumerate(group_options)]
        opt = getattr(optim, name)(groups, **dict(options))
        for step in range(steps):
            opt.zero_grad(set_to_none=True)
            terms = [(p * lib.tensor(g)).sum() for i, (p, g) in enumerate(zip(params, grads[step]))
                     if skip is None or not skip(step, i)]
            sum(terms[1:], terms[0]).backward()
            opt.step()
            if between is not None:
                between(step, opt)
        result.append([p.detach().numpy() if lib is torch else p.numpy() for p in params])
    return result


def _assert_same_bits(ours, theirs):
    for i, (a, b) in enumerate(zip(ours, theirs)):
        differ = ~((a == b) | (np.isnan(a) & np.isnan(b)))
        assert not differ.any(), f"parameter {i}: {int(differ.sum())} elements differ, first {a[differ][:3]} != " \
                                 f"{b[differ][:3]}"


EXACT = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.5, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.02, betas=(0.8, 0.99), maximize=True)),
    ("AdamW", dict(lr=0.01, amsgrad=True)),
    ("AdamW", dict(lr=0.03, weight_decay=0.2, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True)),
    ("Adagrad", dict()),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.05, initial_accumulator_value=0.3, eps=1e-8)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.01, alpha=0.9, momentum=0.8, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.02, momentum=0.5, maximize=True)),
    ("RMSprop", dict(lr=0.02, centered=True)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,options", EXACT, ids=[f"{n}-{i}" for i, (n, _) in enumerate(EXACT)])
def test_step_equals_torch_to_the_bit(rng, name, options, dtype):
    ours, theirs = _train(name, rng, options, dtype=dtype)
    _assert_same_bits(ours, theirs)


@pytest.mark.parametrize("name,options", [(n, o) for n, o in EXACT if "maximize" not in o],
                         ids=[f"{n}-{i}" for i, (n, o) in enumerate(EXACT) if "maximize" not in o])
def test_non_finite_values_as_torch(name, options):
    """inf and NaN parameters, a huge and a zero gradient, for one step and the next."""
    start = np.array([np.inf, np.nan, 1.5, -2.0, 0.25, 3.0, -np.inf], dtype=np.float32)
    grads = [np.array([1.0, 1.0, 1e30, 0.0, -1.0, 2.0, 0.5], dtype=np.float32),
             np.array([0.5, -1.0, 1.0, 1e-30, 0.0, np.inf, 1.0], dtype=np.float32)]
    result = []
    for lib, optim in ((gt, gt.optim), (torch, torch.optim)):
        p = _make(lib, [start])[0]
        opt = getattr(optim, name)([p], **options)
        for g in grads:
            opt.zero_grad()
            (p * lib.tensor(g)).sum().backward()
            opt.step()
        result.append([p.detach().numpy() if lib is torch else p.numpy()])
    _assert_same_bits(*result)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adadelta", "Adagrad", "RMSprop"])
def test_groups_with_their_own_options_and_lr_changed_between_steps(rng, name):
    """Two groups with different options; each group's lr (and another option) changed after every step."""
    first, second = {"lr": 0.05}, {"lr": 0.01, "weight_decay": 0.1}
    options = {"momentum": 0.9} if name in ("SGD", "RMSprop") else {}

    def between(step, opt):
        opt.param_groups[0]["lr"] *= 0.5
        opt.param_groups[1]["lr"] = 0.02 + 0.01 * step
        opt.param_groups[1]["weight_decay"] = 0.05 * step

    ours, theirs = _train(name, rng, dict(lr=0.1, **options) if name == "SGD" else options, [first, second],
                          between=between)
    _assert_same_bits(ours, theirs)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adagrad", "RMSprop"])
def test_parameters_without_grad_are_skipped_as_torch(rng, name):
    """A parameter with no grad at a step neither moves nor advances its own step count."""
    options = dict(lr=0.1, momentum=0.9) if name == "SGD" else {}
    ours, theirs = _train(name, rng, options, steps=6, skip=lambda step, i: (step + i) % 3 == 0)
    _assert_same_bits(ours, theirs)


def test_add_param_group_mid_training_equals_torch(rng):
    starts = [rng.standard_normal(4).astype(np.float32) for _ in range(2)]
    grads = [rng.standard_normal(4).astype(np.float32) for _ in range(4)]
    result = []
    for lib, optim in ((gt, gt.optim), (torch, torch.optim)):
        a, b = _make(lib, starts)
        opt = optim.Adam([a], lr=0.01)
        for step, g in enumerate(grads):
            if step == 2:
                opt.add_param_group({"params": b, "lr": 0.1, "amsgrad": True})
            opt.zero_grad()
            ((a * lib.tensor(g)).sum() + (b * lib.tensor(g)).sum()).backward()
            opt.step()
        result.append([t.detach().numpy() if lib is torch else t.numpy() for t in (a, b)])
        groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
        result.append(groups)
    _assert_same_bits(result[0], result[2])
    assert result[1] == result[3]


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adadelta", "Adagrad", "RMSprop"])
def test_defaults_and_group_keys_equal_torch(name):
    args = dict(lr=0.1) if name == "SGD" else {}
    ours = getattr(gt.optim, name)([gt.zeros(2, requires_grad=True)], **args)
    theirs = getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **args)
    assert ours.defaults == theirs.defaults
    strip = lambda g: {k: v for k, v in g.items() if k != "params"}  # noqa: E731
    assert [strip(g) for g in ours.param_groups] == [strip(g) for g in theirs.param_groups]
    assert isinstance(ours, gt.optim.Optimizer)


def test_zero_grad_sets_to_none_or_zeros():
    p = gt.tensor([1.0, 2.0], requires_grad=True)
    opt = gt.optim.SGD([p], lr=0.1)
    (p * 3.0).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert p.grad is not None and p.grad.numpy().tolist() == [0.0, 0.0]
    (p * 2.0).sum().backward()  # accumulates onto the zeros
    assert p.grad.numpy().tolist() == [2.0, 2.0]
    opt.zero_grad()
    assert p.grad is None


def test_state_holds_torch_keys_after_a_step(rng):
    expected = {"SGD": {"momentum_buffer"}, "Adam": {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
                "Adadelta": {"step", "square_avg", "acc_delta"}, "Adagrad": {"step", "sum"},
                "RMSprop": {"step", "square_avg", "momentum_buffer", "grad_avg"}}
    options = {"SGD": dict(lr=0.1, momentum=0.9), "Adam": dict(amsgrad=True),
               "RMSprop": dict(momentum=0.5, centered=True)}
    for name, keys in expected.items():
        for lib, optim in ((gt, gt.optim), (torch, torch.optim)):
            p = _make(lib, [np.ones(3, dtype=np.float32)])[0]
            opt = getattr(optim, name)([p], **options.get(name, {}))
            (p * 2.0).sum().backward()
            opt.step()
            assert set(opt.state[p]) == keys, (name, lib.__name__)


def test_group_errors_are_clear():
    p, q = gt.zeros(2, requires_grad=True), gt.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="more than one parameter group"):
        gt.optim.SGD([{"params": [p]}, {"params": [p, q]}], lr=0.1)
    with pytest.raises(ValueError, match="required optimization parameter lr"):
        gt.optim.SGD([p])
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        gt.optim.Adam([p], lr=-1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        gt.optim.AdamW([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov momentum requires"):
        gt.optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid rho value"):
        gt.optim.Adadelta([p], rho=1.5)
    with pytest.raises(TypeError, match="not a gt Tensor"):
        gt.optim.RMSprop([np.zeros(2)])
    with pytest.raises(TypeError, match="not a set"):
        gt.optim.Adagrad({p, q})
    with pytest.raises(ValueError, match="non-leaf"):
        gt.optim.SGD([p * 2.0], lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        gt.optim.Adam([])
    opt = gt.optim.SGD([p], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [q, p]})
    with pytest.raises(TypeError, match="must be a dict"):
        opt.add_param_group([q])
    assert len(opt.param_groups) == 1


def test_closure_loss_is_returned():
    p = gt.tensor([3.0], requires_grad=True)
    opt = gt.optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == 9.0 and p.item() == 3.0 - 0.25 * 6.0
