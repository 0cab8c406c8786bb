"""SGD, Adam and AdamW, each step equal to torch.optim's (single-tensor) to the bit.

SGD is made of the ops PyTorch's step is made of (add with alpha, mul_,
clone), which the worker runs with the same ATen kernels. Adam and AdamW
update each parameter with one fused worker instruction (adam_step_,
plugins/torch/fused_kernels.cc) that rounds as ATen's seven kernels do;
AMSGrad, which that instruction lacks, lets it update the moments (on a
scratch copy of the parameter) and finishes with the ops PyTorch uses.
"""

import math

from .. import _C
from .optimizer import Optimizer, required

__all__ = ["SGD", "Adam", "AdamW"]


def _check_at_least(value, what, low=0.0):
    if not value >= low:  # NaN fails too
        raise ValueError(f"Invalid {what}: {value}")


def _with_weight_decay(grad, param, weight_decay):
    """grad + weight_decay * param as PyTorch's grad.add(param, alpha=weight_decay) rounds it."""
    if weight_decay == 0:
        return grad
    out = grad.clone()
    out.add_(param, alpha=weight_decay)
    return out


def _zeros_like(p):
    """Zeros laid out like parameter `p` (its placement under signal configs too)."""
    return p.detach().clone().zero_()


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov momentum,
    L2 weight decay and maximize, as torch.optim.SGD. State: "momentum_buffer"."""

    def __init__(self, params, lr=required, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def _check_group(self, group):
        if group["lr"] is not required:
            _check_at_least(group["lr"], "learning rate")
        _check_at_least(group["momentum"], "momentum value")
        _check_at_least(group["weight_decay"], "weight_decay value")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if group.get("differentiable"):
            raise ValueError("SGD: differentiable=True is not supported by gt")

    def _update(self, group, params, grads):
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        for p, g in zip(params, grads):
            d_p = _with_weight_decay(g, p, group["weight_decay"])
            state = self.state.setdefault(p, {})
            buf = state.get("momentum_buffer")
            if momentum != 0:
                if buf is None:
                    buf = d_p.detach().clone()
                else:
                    buf.mul_(momentum)
                    buf.add_(d_p, alpha=1 - dampening)
                # Nesterov: d_p.add(buf, alpha=momentum), rounded as PyTorch's.
                d_p = _with_weight_decay(d_p, buf, momentum) if group["nesterov"] else buf
            state["momentum_buffer"] = buf
            p.add_(d_p, alpha=-lr)


class Adam(Optimizer):
    """Adam as torch.optim.Adam (L2 weight decay joins the gradient; amsgrad;
    maximize). State: "step", "exp_avg", "exp_avg_sq" (and "max_exp_avg_sq")."""

    _step_is_tensor = True
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=False):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def _check_group(self, group):
        _check_at_least(group["lr"], "learning rate")
        _check_at_least(group["eps"], "epsilon value")
        betas = group["betas"]
        for i in (0, 1):
            if not 0.0 <= betas[i] < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]} (betas must be in [0, 1))")
        _check_at_least(group["weight_decay"], "weight_decay value")
        for flag in ("capturable", "differentiable", "fused"):
            if group.get(flag):
                raise ValueError(f"{type(self).__name__}: {flag}=True is not supported by gt")

    def _update(self, group, params, grads):
        lr, (beta1, beta2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        for p, g in zip(params, grads):
            state = self.state.setdefault(p, {})
            if not state:
                state["step"] = 0.0
                state["exp_avg"], state["exp_avg_sq"] = _zeros_like(p), _zeros_like(p)
                if group["amsgrad"]:
                    state["max_exp_avg_sq"] = _zeros_like(p)
            state["step"] += 1
            step = state["step"]
            correction1, correction2 = 1 - beta1 ** step, 1 - beta2 ** step
            if not group["amsgrad"]:
                _C.adam_step_(p._c, g._c, state["exp_avg"]._c, state["exp_avg_sq"]._c, lr, beta1, beta2, eps,
                              weight_decay, correction1, correction2, self._decoupled)
                continue
            # The fused step on a scratch copy moves the moments exactly as
            # PyTorch's mul_/add_/addcmul_ do (decoupled decay does not touch them).
            scratch = p.detach().clone()
            _C.adam_step_(scratch._c, g._c, state["exp_avg"]._c, state["exp_avg_sq"]._c, lr, beta1, beta2, eps,
                          0.0 if self._decoupled else weight_decay, correction1, correction2, False)
            if self._decoupled:
                p.mul_(1 - lr * weight_decay)
            peak = state["max_exp_avg_sq"]
            peak.copy_(peak.maximum(state["exp_avg_sq"]))
            denom = peak.sqrt() / math.sqrt(correction2)
            denom += eps
            # addcdiv_(exp_avg, denom, value=-step_size): (value * exp_avg) / denom, then added.
            p += (state["exp_avg"] * (-(lr / correction1))) / denom


class AdamW(Adam):
    """Adam with decoupled weight decay (p *= 1 - lr * weight_decay first), as torch.optim.AdamW."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, foreach=foreach,
                        maximize=maximize, capturable=capturable)
        Optimizer.__init__(self, params, defaults)
