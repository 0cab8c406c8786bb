"""gt.optim.lr_scheduler against torch.optim.lr_scheduler (PyTorch 1.13) in this process.

Each schedule is built on a gt optimizer and on a torch optimizer with the
same groups and stepped side by side; the learning rates (get_last_lr() and
every group's "lr", and the momentum OneCycleLR cycles) must be equal as
floats, step for step: the chained forms multiply in PyTorch's order.
"""

import math
import warnings

import pytest
import torch

import gt

STEPS = 50


def _pair(optimizer="SGD", lrs=(0.1,), **options):
    """A gt and a torch optimizer with one group per lr (two parameters each)."""
    ours = [{"params": [gt.zeros(2, requires_grad=True) for _ in range(2)], "lr": lr} for lr in lrs]
    theirs = [{"params": [torch.zeros(2, requires_grad=True) for _ in range(2)], "lr": lr} for lr in lrs]
    return getattr(gt.optim, optimizer)(ours, **options), getattr(torch.optim, optimizer)(theirs, **options)


def _snapshot(scheduler, optimizer):
    keys = ("lr", "momentum", "betas")
    groups = [{k: g[k] for k in keys if k in g} for g in optimizer.param_groups]
    if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):  # no get_last_lr() in 1.13
        return [g["lr"] for g in optimizer.param_groups], groups
    return list(scheduler.get_last_lr()), groups


def _run_both(make, ours_opt, theirs_opt, steps=STEPS, metrics=None):
    ours, theirs = make(gt.optim.lr_scheduler, ours_opt), make(torch.optim.lr_scheduler, theirs_opt)
    got, want = [_snapshot(ours, ours_opt)], [_snapshot(theirs, theirs_opt)]
    for i in range(steps):
        ours_opt.step()
        theirs_opt.step()
        if metrics is None:
            ours.step()
            theirs.step()
        else:
            ours.step(metrics[i])
            theirs.step(metrics[i])
        got.append(_snapshot(ours, ours_opt))
        want.append(_snapshot(theirs, theirs_opt))
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"step {i}: gt {g} != torch {w}"
    return ours, theirs


SCHEDULES = {
    "StepLR": lambda m, o: m.StepLR(o, step_size=7, gamma=0.5),
    "StepLR_default_gamma": lambda m, o: m.StepLR(o, 3),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[5, 12, 12, 30], gamma=0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.93),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=12),
    "CosineAnnealingLR_eta_min": lambda m, o: m.CosineAnnealingLR(o, T_max=20, eta_min=0.003),
    "LambdaLR": lambda m, o: m.LambdaLR(o, lambda epoch: 0.97 ** epoch / (1 + epoch % 4)),
    "LambdaLR_per_group": lambda m, o: m.LambdaLR(o, [lambda e: 1 / (e + 1), lambda e: 0.5 + 0.01 * e][:len(
        o.param_groups)]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lambda epoch: 0.9 if epoch % 3 else 1.05),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=30),
    "PolynomialLR_power": lambda m, o: m.PolynomialLR(o, total_iters=40, power=2.5),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler([m.ExponentialLR(o, gamma=0.97),
                                                         m.StepLR(o, step_size=6, gamma=0.5)]),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=17),
    "LinearLR_default": lambda m, o: m.LinearLR(o),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.4, total_iters=9),
    "OneCycleLR_cos": lambda m, o: m.OneCycleLR(o, max_lr=0.8, total_steps=STEPS + 1),
    "OneCycleLR_linear_three_phase": lambda m, o: m.OneCycleLR(o, max_lr=[0.5, 0.9][:len(o.param_groups)],
                                                               epochs=5, steps_per_epoch=11, pct_start=0.25,
                                                               anneal_strategy="linear", three_phase=True),
    "SequentialLR": lambda m, o: m.SequentialLR(o, [m.LinearLR(o, start_factor=0.1, total_iters=8),
                                                    m.ExponentialLR(o, gamma=0.9)], milestones=[8]),
    "SequentialLR_three": lambda m, o: m.SequentialLR(o, [m.ConstantLR(o, factor=0.5, total_iters=4),
                                                          m.CosineAnnealingLR(o, T_max=10),
                                                          m.StepLR(o, step_size=5, gamma=0.5)],
                                                      milestones=[6, 25]),
}


@pytest.mark.parametrize("groups", [(0.1,), (0.1, 0.025)], ids=["one_group", "two_groups"])
@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_equals_torch(name, groups):
    ours_opt, theirs_opt = _pair("SGD", groups, momentum=0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's SequentialLR warns that step(0) is deprecated
        _run_both(SCHEDULES[name], ours_opt, theirs_opt)


def test_one_cycle_cycles_adam_beta1_as_torch():
    ours_opt, theirs_opt = _pair("Adam", (0.01, 0.002))
    _run_both(lambda m, o: m.OneCycleLR(o, max_lr=0.05, total_steps=STEPS), ours_opt, theirs_opt, steps=STEPS - 1)


def test_one_cycle_past_total_steps_raises_as_torch():
    messages = []
    for module, opt in zip((gt.optim.lr_scheduler, torch.optim.lr_scheduler), _pair("SGD", (0.1,), momentum=0.9)):
        schedule = module.OneCycleLR(opt, max_lr=1.0, total_steps=5)
        for _ in range(5):
            opt.step()
            schedule.step()
        with pytest.raises(ValueError) as error:
            schedule.step()
        messages.append(str(error.value))
    assert messages[0] == messages[1] == "Tried to step 7 times. The specified number of total steps is 5"


@pytest.mark.parametrize("mode,threshold_mode", [("min", "rel"), ("min", "abs"), ("max", "rel"), ("max", "abs")])
def test_reduce_on_plateau_equals_torch(mode, threshold_mode):
    # A metric that improves, stalls, improves a little, stalls: reductions, cooldown, the floor.
    metrics = [1.0 / (1 + i) if i < 10 else 0.09 + 0.001 * math.sin(i) for i in range(STEPS)]
    if mode == "max":
        metrics = [-m for m in metrics]
    ours_opt, theirs_opt = _pair("SGD", (0.1, 0.05))
    make = lambda m, o: m.ReduceLROnPlateau(o, mode=mode, factor=0.5, patience=3, threshold=1e-3,  # noqa: E731
                                            threshold_mode=threshold_mode, cooldown=2, min_lr=[0.01, 0.001])
    ours, theirs = _run_both(make, ours_opt, theirs_opt, metrics=metrics)
    assert ours.num_bad_epochs == theirs.num_bad_epochs and ours.best == theirs.best
    assert ours.last_epoch == theirs.last_epoch == STEPS


@pytest.mark.parametrize("name", ["StepLR", "CosineAnnealingLR", "OneCycleLR_cos", "SequentialLR", "LinearLR",
                                  "ChainedScheduler", "MultiplicativeLR", "PolynomialLR"])
def test_state_dict_resumes_the_sequence(name):
    """A schedule rebuilt on a fresh optimizer and given state_dict() continues as the uninterrupted one."""
    make = SCHEDULES[name]
    whole_opt, _ = _pair("SGD", (0.1, 0.02), momentum=0.9)
    whole = make(gt.optim.lr_scheduler, whole_opt)
    for _ in range(20):
        whole_opt.step()
        whole.step()
    saved_sched, saved_opt = whole.state_dict(), whole_opt.state_dict()
    assert saved_sched.get("last_epoch", 20) == 20 and "optimizer" not in saved_sched  # Chained has none
    resumed_opt, _ = _pair("SGD", (0.1, 0.02), momentum=0.9)
    resumed = make(gt.optim.lr_scheduler, resumed_opt)
    resumed_opt.load_state_dict(saved_opt)
    resumed.load_state_dict(saved_sched)
    for _ in range(STEPS - 21):
        for opt, sched in ((whole_opt, whole), (resumed_opt, resumed)):
            opt.step()
            sched.step()
        assert resumed.get_last_lr() == whole.get_last_lr()
        assert [g["lr"] for g in resumed_opt.param_groups] == [g["lr"] for g in whole_opt.param_groups]


def test_scheduler_state_dict_loads_torch_state():
    ours_opt, theirs_opt = _pair("SGD", (0.1,))
    ours = gt.optim.lr_scheduler.CosineAnnealingLR(ours_opt, T_max=10)
    theirs = torch.optim.lr_scheduler.CosineAnnealingLR(theirs_opt, T_max=10)
    for _ in range(4):
        theirs_opt.step()
        theirs.step()
    ours.load_state_dict(theirs.state_dict())
    ours_opt.param_groups[0]["lr"] = theirs_opt.param_groups[0]["lr"]
    for _ in range(10):
        theirs_opt.step()
        theirs.step()
        ours_opt.step()
        ours.step()
        assert ours.get_last_lr() == theirs.get_last_lr()


def test_resuming_without_initial_lr_is_a_clear_error():
    opt, _ = _pair("SGD", (0.1,))
    with pytest.raises(KeyError, match="initial_lr"):
        gt.optim.lr_scheduler.StepLR(opt, step_size=2, last_epoch=5)


def test_bad_arguments_raise_as_torch():
    opt, _ = _pair("SGD", (0.1, 0.2))
    sched = gt.optim.lr_scheduler
    with pytest.raises(TypeError, match="not an Optimizer"):
        sched.StepLR(object(), 3)
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        sched.LambdaLR(opt, [lambda e: 1.0])
    with pytest.raises(ValueError, match="between 0 and 1"):
        sched.LinearLR(opt, start_factor=1.5)
    with pytest.raises(ValueError, match="total_steps OR"):
        sched.OneCycleLR(opt, max_lr=1.0)
    with pytest.raises(ValueError, match="positive integer total_steps"):
        sched.OneCycleLR(opt, max_lr=1.0, total_steps=0)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        sched.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="mode sideways is unknown"):
        sched.ReduceLROnPlateau(opt, mode="sideways")
    with pytest.raises(ValueError, match="one more than the number of milestone"):
        sched.SequentialLR(opt, [sched.StepLR(opt, 2)], milestones=[3])
    no_momentum = gt.optim.Adagrad([gt.zeros(1, requires_grad=True)])
    with pytest.raises(ValueError, match="must support momentum"):
        sched.OneCycleLR(no_momentum, max_lr=1.0, total_steps=10)


def test_lr_set_by_a_scheduler_drives_the_step():
    """The optimizer's next step uses the lr the schedule wrote: plain SGD moves p by -lr * grad."""
    p = gt.zeros(1, requires_grad=True)
    opt = gt.optim.SGD([p], lr=1.0)
    sched = gt.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    expected = 0.0
    for lr in (1.0, 0.5, 0.25):
        opt.zero_grad()
        (p * 1.0).sum().backward()
        opt.step()
        sched.step()
        expected -= lr
        assert p.item() == expected
