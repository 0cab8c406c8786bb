"""Adadelta, Adagrad and RMSprop, as torch.optim's single-tensor steps.

Each is composed of gt ops the worker runs with ATen's kernels, in
PyTorch's order, so that each rounds as PyTorch's does. PyTorch's
addcmul_ (self + value * t1 * t2) has no gt op, and ATen's AVX2 kernel
rounds it once (a fused multiply-add): where it follows a decay
(acc.mul_(rho).addcmul_(t, t, value=1 - rho), Adadelta's and RMSprop's
averages), it is exactly the second-moment update of the fused Adam
instruction, which rounds as ATen does, so that instruction makes it (on
scratch copies for the parameter and first moment it also moves). Centered
RMSprop's square_avg.addcmul(grad_avg, grad_avg, value=-1) is the same
update with beta2 = 2 on half of square_avg (exact: halving and doubling
are), and Adagrad's sum.addcmul_(grad, grad) that on minus half of sum,
negated. So every step equals PyTorch's to the bit
(tests/python/test_optim_groups.py), but for an accumulator small enough
that halving it loses bits (below 2^-125 in float32).
"""

from .. import _C
from .optimizer import Optimizer
from .sgd_adam import _check_at_least, _with_weight_decay, _zeros_like

__all__ = ["Adadelta", "Adagrad", "RMSprop"]


def _decay_add_square_(acc, t, decay):
    """acc.mul_(decay).addcmul_(t, t, value=1 - decay) rounded as ATen rounds it: the
    fused Adam instruction's second-moment update of acc (lr 0; its parameter and
    first moment are scratch copies of t, whose new values are not used)."""
    _C.adam_step_(t.clone()._c, t._c, t.clone()._c, acc._c, 0.0, 0.0, decay, 1.0, 0.0, 1.0, 1.0, False)


def _minus_square(acc, t, sign=1.0):
    """sign * acc - t * t as a new tensor, rounded once as ATen's addcmul: the update
    above with decay 2 (1 - decay = -1) applied to sign * acc / 2 (exact, away from
    subnormals)."""
    half = acc * (0.5 * sign)
    _decay_add_square_(half, t, 2.0)
    return half


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
            _decay_add_square_(square_avg, g, rho)
            std = (square_avg + eps).sqrt()
            delta = (acc_delta + eps).sqrt() / std * g
            _decay_add_square_(acc_delta, delta, rho)
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
            # sum.addcmul_(g, g): -(-sum - g * g), each negation exact
            state["sum"].copy_(-_minus_square(state["sum"], g, sign=-1.0))
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
            _decay_add_square_(square_avg, g, alpha)
            if group["centered"]:
                grad_avg = state["grad_avg"]
                grad_avg.mul_(alpha)
                grad_avg.add_(g, alpha=1 - alpha)
                avg = _minus_square(square_avg, grad_avg).sqrt()
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
