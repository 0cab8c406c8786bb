"""Adadelta, Adagrad and RMSprop, as torch.optim's single-tensor steps.

Each is composed of gt ops the worker runs with ATen's kernels, in
PyTorch's order. Every op but one rounds as PyTorch's does: addcmul_
(self + value * t1 * t2), which has no gt op, is a product and an add
here, two roundings where ATen's AVX2 kernel fuses them into one. So these
match PyTorch to within a few units in the last place per step
(tests/python/test_optim_groups.py compares to 1e-6 relative), not to the
bit; addcdiv_ ((value * t1) / t2, then added) is composed exactly.
"""

from .optimizer import Optimizer
from .sgd_adam import _check_at_least, _with_weight_decay, _zeros_like

__all__ = ["Adadelta", "Adagrad", "RMSprop"]


def _add_scaled_square_(acc, t, value):
    """acc.addcmul_(t, t, value=value), as (value * t) * t added to acc."""
    acc += (t * value) * t


class Adadelta(Optimizer):
    """Adadelta (Zeiler 2012) as torch.optim.Adadelta. State: "step" (a number),
    "square_avg", "acc_delta"."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, maximize=False):
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize, foreach=foreach)
        super().__init__(params, defaults)

    def _check_group(self, group):
        _check_at_least(group["lr"], "learning rate")
        if not 0.0 <= group["rho"] <= 1.0:
            raise ValueError(f"Invalid rho value: {group['rho']}")
        _check_at_least(group["eps"], "epsilon value")
        _check_at_least(group["weight_decay"], "weight_decay value")

    def _update(self, group, params, grads):
        rho, eps = group["rho"], group["eps"]
        for p, g in zip(params, grads):
            state = self.state.setdefault(p, {})
            if not state:
                state.update(step=0, square_avg=_zeros_like(p), acc_delta=_zeros_like(p))
            state["step"] += 1
            g = _with_weight_decay(g, p, group["weight_decay"])
            square_avg, acc_delta = state["square_avg"], state["acc_delta"]
            square_avg.mul_(rho)
            _add_scaled_square_(square_avg, g, 1 - rho)
            std = (square_avg + eps).sqrt()
            delta = (acc_delta + eps).sqrt() / std * g
            acc_delta.mul_(rho)
            _add_scaled_square_(acc_delta, delta, 1 - rho)
            p.add_(delta, alpha=-group["lr"])


class Adagrad(Optimizer):
    """Adagrad as torch.optim.Adagrad (lr_decay, initial_accumulator_value).
    State, made for every parameter at construction as PyTorch's: "step"
    (a tensor in state_dict()), "sum"."""

    _step_is_tensor = True

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False):
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group):
        _check_at_least(group["lr"], "learning rate")
        _check_at_least(group["lr_decay"], "lr_decay value")
        _check_at_least(group["weight_decay"], "weight_decay value")
        _check_at_least(group["initial_accumulator_value"], "initial_accumulator_value value")
        _check_at_least(group["eps"], "epsilon value")

    def _group_added(self, group):
        for p in group["params"]:
            self._initial_state(p, group)

    def _initial_state(self, p, group):
        state = self.state.setdefault(p, {})
        if not state:
            state["step"] = 0.0
            state["sum"] = p.detach().clone().fill_(group["initial_accumulator_value"])
        return state

    def _update(self, group, params, grads):
        for p, g in zip(params, grads):
            state = self._initial_state(p, group)
            state["step"] += 1
            g = _with_weight_decay(g, p, group["weight_decay"])
            clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
            _add_scaled_square_(state["sum"], g, 1)
            std = state["sum"].sqrt()
            std += group["eps"]
            p += (g * -clr) / std  # addcdiv_(g, std, value=-clr)


class RMSprop(Optimizer):
    """RMSprop as torch.optim.RMSprop (alpha, eps, momentum, centered, weight
    decay). State: "step" (a number), "square_avg", and "momentum_buffer"
    (momentum > 0) and "grad_avg" (centered)."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 foreach=None, maximize=False, differentiable=False):
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def _check_group(self, group):
        _check_at_least(group["lr"], "learning rate")
        _check_at_least(group["eps"], "epsilon value")
        _check_at_least(group["momentum"], "momentum value")
        _check_at_least(group["weight_decay"], "weight_decay value")
        _check_at_least(group["alpha"], "alpha value")
        if group.get("differentiable"):
            raise ValueError("RMSprop: differentiable=True is not supported by gt")

    def _update(self, group, params, grads):
        alpha, momentum = group["alpha"], group["momentum"]
        for p, g in zip(params, grads):
            state = self.state.setdefault(p, {})
            if not state:
                state.update(step=0, square_avg=_zeros_like(p))
                if momentum > 0:
                    state["momentum_buffer"] = _zeros_like(p)
                if group["centered"]:
                    state["grad_avg"] = _zeros_like(p)
            state["step"] += 1
            g = _with_weight_decay(g, p, group["weight_decay"])
            square_avg = state["square_avg"]
            square_avg.mul_(alpha)
            _add_scaled_square_(square_avg, g, 1 - alpha)
            if group["centered"]:
                grad_avg = state["grad_avg"]
                grad_avg.mul_(alpha)
                grad_avg.add_(g, alpha=1 - alpha)
                avg = (square_avg - grad_avg * grad_avg).sqrt()
            else:
                avg = square_avg.sqrt()
            avg += group["eps"]
            if momentum > 0:
                buf = state["momentum_buffer"]
                buf.mul_(momentum)
                buf += g / avg  # addcdiv_(g, avg), value 1
                p.add_(buf, alpha=-group["lr"])
            else:
                p += (g * -group["lr"]) / avg  # addcdiv_(g, avg, value=-lr)
