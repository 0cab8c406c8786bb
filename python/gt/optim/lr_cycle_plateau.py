"""OneCycleLR and ReduceLROnPlateau (gt.optim.lr_scheduler re-exports both).

OneCycleLR computes each lr from its phase (no chaining); ReduceLROnPlateau
is not an LRScheduler (it steps on a metric), as in PyTorch 1.13.
"""

import math

from .lr_scheduler import LRScheduler, _per_group, _require_optimizer

__all__ = ["OneCycleLR", "ReduceLROnPlateau"]


def _positive_int(value, name):
    if not isinstance(value, int) or value <= 0:
        raise ValueError(f"Expected positive integer {name}, but got {value}")
    return value


class OneCycleLR(LRScheduler):
    """The 1cycle policy: lr rises from max_lr / div_factor to max_lr over the
    first pct_start of total_steps, then falls to initial_lr / final_div_factor
    (three_phase: back to initial_lr first); momentum (or Adam's beta1) moves
    the other way between max_momentum and base_momentum."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
                 final_div_factor=1e4, three_phase=False, last_epoch=-1, verbose=False):
        _require_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            self.total_steps = _positive_int(total_steps, "total_steps")
        elif epochs is not None and steps_per_epoch is not None:
            self.total_steps = _positive_int(epochs, "epochs") * _positive_int(steps_per_epoch, "steps_per_epoch")
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must by one of 'cos' or 'linear', instead got {anneal_strategy}")
        self.anneal_strategy = anneal_strategy
        self._schedule_phases = self._phases(pct_start, three_phase)
        if last_epoch == -1:
            for group, top in zip(optimizer.param_groups, _per_group("max_lr", optimizer, max_lr)):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            highs = _per_group("max_momentum", optimizer, max_momentum)
            lows = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for group, high, low in zip(optimizer.param_groups, highs, lows):
                    self._set_momentum(group, high)
                    group["max_momentum"], group["base_momentum"] = high, low
        super().__init__(optimizer, last_epoch, verbose)

    def _phases(self, pct_start, three_phase):
        """Each phase: its last step and the group keys it anneals between."""
        rise_end = float(pct_start * self.total_steps) - 1
        last = self.total_steps - 1
        if not three_phase:
            return [dict(end_step=rise_end, start_lr="initial_lr", end_lr="max_lr",
                         start_momentum="max_momentum", end_momentum="base_momentum"),
                    dict(end_step=last, start_lr="max_lr", end_lr="min_lr",
                         start_momentum="base_momentum", end_momentum="max_momentum")]
        return [dict(end_step=rise_end, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * self.total_steps) - 2, start_lr="max_lr", end_lr="initial_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum"),
                dict(end_step=last, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum")]

    def _anneal(self, start, end, pct):
        """From start (pct 0) to end (pct 1): half a cosine, or a line."""
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _set_momentum(self, group, value):
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step + 1} times. The specified number of total steps is "
                             f"{self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0
            for i, phase in enumerate(self._schedule_phases):
                if step <= phase["end_step"] or i == len(self._schedule_phases) - 1:
                    pct = (step - start_step) / (phase["end_step"] - start_step)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[phase["start_momentum"]],
                                                               group[phase["end_momentum"]], pct))
                    break
                start_step = phase["end_step"]
        return lrs


class ReduceLROnPlateau:
    """Multiplies each group's lr by `factor` once the metric passed to step()
    has not improved (by `threshold`, relative or absolute) for more than
    `patience` epochs; then waits `cooldown` epochs; never below min_lr."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8, verbose=False):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        _require_optimizer(optimizer)
        self.factor = factor
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)) and len(min_lr) != len(optimizer.param_groups):
            raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}")
        self.min_lrs = _per_group("min_lr", optimizer, min_lr)
        self.patience, self.cooldown, self.eps, self.verbose = patience, cooldown, eps, verbose
        self.last_epoch = 0
        self._check_mode(mode, threshold_mode)
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf  # where `best` starts
        self._reset()
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    @staticmethod
    def _check_mode(mode, threshold_mode):
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown!")

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def is_better(self, a, best):
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if self.threshold_mode == "rel" else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if self.threshold_mode == "rel" else a > best + self.threshold

    def step(self, metrics, epoch=None):
        """Takes this epoch's metric (a number or a one-element tensor)."""
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _reduce_lr(self):
        for i, group in enumerate(self.optimizer.param_groups):
            old = float(group["lr"])
            new = max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps:
                group["lr"] = new
                if self.verbose:
                    print(f"Epoch {self.last_epoch}: reducing learning rate of group {i} to {new:.4e}.")

    def get_last_lr(self):
        return self._last_lr

    def state_dict(self):
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._check_mode(self.mode, self.threshold_mode)
        self.mode_worse = math.inf if self.mode == "min" else -math.inf
