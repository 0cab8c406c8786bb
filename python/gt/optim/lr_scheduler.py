"""Learning-rate schedules over a gt optimizer's param_groups, with PyTorch 1.13's
constructors, step(), get_last_lr(), last_epoch and state_dict().

A schedule writes each group's "lr" when it steps (once at construction,
then after each optimizer.step()); the optimizer's next step uses it. The
chained forms multiply the group's current lr as PyTorch's do, in the same
floating-point order, so the sequences equal torch.optim.lr_scheduler's
step for step (tests/python/test_lr_scheduler.py).
"""

import math
import types
from bisect import bisect_right
from collections import Counter

from .optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
           "ExponentialLR", "PolynomialLR", "SequentialLR", "ChainedScheduler", "CosineAnnealingLR", "OneCycleLR",
           "ReduceLROnPlateau"]


def _require_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer (a gt.optim optimizer)")


def _per_group(name, optimizer, value):
    """`value` for each group: a list/tuple of one per group, or one for all."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"expected {len(optimizer.param_groups)} values for {name}, got {len(value)}")
        return list(value)
    return [value] * len(optimizer.param_groups)


class LRScheduler:
    """The base: `base_lrs` from each group's "initial_lr" (set from its lr
    when last_epoch is -1, required when resuming), one step at construction."""

    def __init__(self, optimizer, last_epoch=-1, verbose=False):
        _require_optimizer(optimizer)
        self.optimizer = optimizer
        for i, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming an optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.verbose = verbose
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self.step()

    def _group_lrs(self):
        return [group["lr"] for group in self.optimizer.param_groups]

    def get_lr(self):
        """The lrs for last_epoch, from the groups' current lrs (the chained form)."""
        raise NotImplementedError

    def get_last_lr(self):
        """The lrs the last step set, one per group."""
        return self._last_lr

    def step(self, epoch=None):
        """Advances one epoch (or, deprecated in PyTorch, jumps to `epoch` by the closed form)."""
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed_form = getattr(self, "_closed_form_lr", None)
            values = closed_form() if closed_form is not None else self.get_lr()
        for i, (group, lr) in enumerate(zip(self.optimizer.param_groups, values)):
            group["lr"] = lr
            if self.verbose:
                print(f"Adjusting learning rate of group {i} to {lr:.4e}.")
        self._last_lr = self._group_lrs()

    def state_dict(self):
        """Everything but the optimizer (PyTorch's layout)."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


_LRScheduler = LRScheduler  # PyTorch 1.13's name


class _PerGroupFunctions(LRScheduler):
    """A schedule driven by lr_lambda: one function, or one per group. Its state
    dict saves each lambda that is a callable object as its __dict__ (functions as None)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1, verbose=False):
        _require_optimizer(optimizer)
        self.optimizer = optimizer
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        super().__init__(optimizer, last_epoch, verbose)

    def state_dict(self):
        out = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "lr_lambdas")}
        out["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
                             for fn in self.lr_lambdas]
        return out

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        saved = state.pop("lr_lambdas", [])
        self.__dict__.update(state)
        for fn, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                fn.__dict__.update(attributes)


class LambdaLR(_PerGroupFunctions):
    """lr = initial_lr * lr_lambda(epoch)."""

    def get_lr(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_PerGroupFunctions):
    """lr *= lr_lambda(epoch) at every epoch after the first."""

    def get_lr(self):
        if self.last_epoch == 0:
            return self._group_lrs()
        return [lr * fn(self.last_epoch) for fn, lr in zip(self.lr_lambdas, self._group_lrs())]


class StepLR(LRScheduler):
    """lr *= gamma every step_size epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1, verbose=False):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._group_lrs()
        return [lr * self.gamma for lr in self._group_lrs()]

    def _closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr *= gamma at each milestone (twice at a milestone given twice)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1, verbose=False):
        self.milestones, self.gamma = Counter(milestones), gamma
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        times = self.milestones.get(self.last_epoch, 0)
        if times == 0:
            return self._group_lrs()
        return [lr * self.gamma ** times for lr in self._group_lrs()]

    def _closed_form_lr(self):
        passed = bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma ** passed for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr * factor until total_iters epochs have passed, then lr."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1, verbose=False):
        if not 0 <= factor <= 1.0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._group_lrs()]
        if self.last_epoch != self.total_iters:
            return self._group_lrs()
        return [lr * (1.0 / self.factor) for lr in self._group_lrs()]

    def _closed_form_lr(self):
        reached = self.last_epoch >= self.total_iters
        return [base * (self.factor + reached * (1 - self.factor)) for base in self.base_lrs]


class LinearLR(LRScheduler):
    """The factor on lr goes linearly from start_factor to end_factor over total_iters epochs."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1, verbose=False):
        if not 0 <= start_factor <= 1.0:
            raise ValueError("Starting multiplicative factor expected to be between 0 and 1.")
        if not 0 <= end_factor <= 1.0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in self._group_lrs()]
        if self.last_epoch > self.total_iters:
            return self._group_lrs()
        span = self.end_factor - self.start_factor
        # the ratio of this epoch's factor to the previous one's
        ratio = 1.0 + span / (self.total_iters * self.start_factor + (self.last_epoch - 1) * span)
        return [lr * ratio for lr in self._group_lrs()]

    def _closed_form_lr(self):
        done = min(self.total_iters, self.last_epoch)
        return [base * (self.start_factor + (self.end_factor - self.start_factor) * done / self.total_iters)
                for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr *= gamma every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1, verbose=False):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        if self.last_epoch == 0:
            return self._group_lrs()
        return [lr * self.gamma for lr in self._group_lrs()]

    def _closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr falls as (1 - epoch / total_iters) ** power to 0 over total_iters epochs."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1, verbose=False):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        epoch, total = self.last_epoch, self.total_iters
        if epoch == 0 or epoch > total:
            return self._group_lrs()
        factor = ((1.0 - epoch / total) / (1.0 - (epoch - 1) / total)) ** self.power
        return [lr * factor for lr in self._group_lrs()]

    def _closed_form_lr(self):
        done = min(self.total_iters, self.last_epoch)
        return [base * (1.0 - done / self.total_iters) ** self.power for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr follows half a cosine from initial_lr down to eta_min over T_max epochs
    (then back up), in PyTorch's chained form."""

    def __init__(self, optimizer, T_max, eta_min=0, last_epoch=-1, verbose=False):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        epoch, t_max, low = self.last_epoch, self.T_max, self.eta_min
        if epoch == 0:
            return self._group_lrs()
        if self._step_count == 1 and epoch > 0:  # resumed: the closed form once
            return [low + (base - low) * (1 + math.cos(epoch * math.pi / t_max)) / 2 for base in self.base_lrs]
        if (epoch - 1 - t_max) % (2 * t_max) == 0:  # at the bottom: the step that turns back up
            return [lr + (base - low) * (1 - math.cos(math.pi / t_max)) / 2
                    for base, lr in zip(self.base_lrs, self._group_lrs())]
        ratio = (1 + math.cos(math.pi * epoch / t_max)) / (1 + math.cos(math.pi * (epoch - 1) / t_max))
        return [ratio * (lr - low) + low for lr in self._group_lrs()]

    def _closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class SequentialLR(LRScheduler):
    """Runs schedulers[0] until milestones[0], then schedulers[1] (restarted at epoch 0), and so on."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1, verbose=False):
        for i, scheduler in enumerate(schedulers):
            if scheduler.optimizer is not optimizer:
                raise ValueError("Sequential Schedulers expects all schedulers to belong to the same optimizer, but "
                                 f"got schedulers at index {i} to be different than the optimizer passed in.")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got number of schedulers {len(schedulers)} and the "
                             f"number of milestones to be equal to {len(milestones)}")
        self._schedulers, self._milestones = list(schedulers), list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        self.verbose = verbose
        # Undo what constructing the schedulers did, then start the first one again.
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for scheduler in self._schedulers:
            scheduler.last_epoch -= 1
        self._schedulers[0]._initial_step()
        self._last_lr = self._schedulers[0].get_last_lr()

    def step(self):
        self.last_epoch += 1
        index = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler.step(0)  # restarted: its closed form at epoch 0
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self):
        out = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "_schedulers")}
        out["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return out

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        saved = state.pop("_schedulers")
        self.__dict__.update(state)
        for scheduler, entry in zip(self._schedulers, saved):
            scheduler.load_state_dict(entry)


class ChainedScheduler(LRScheduler):
    """Steps every scheduler given (of one optimizer) at each step, their factors multiplying."""

    def __init__(self, schedulers):
        for i, scheduler in enumerate(schedulers):
            if scheduler.optimizer is not schedulers[0].optimizer:
                raise ValueError("ChainedScheduler expects all schedulers to belong to the same optimizer, but "
                                 f"got schedulers at index 0 and {i} to be different")
        self._schedulers = list(schedulers)
        self.optimizer = self._schedulers[0].optimizer
        self._last_lr = self._group_lrs()

    def step(self):
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = self._group_lrs()

    state_dict = SequentialLR.state_dict
    load_state_dict = SequentialLR.load_state_dict


# Defined there, on the base above; importable from here as in PyTorch.
from .lr_cycle_plateau import OneCycleLR, ReduceLROnPlateau  # noqa: E402
