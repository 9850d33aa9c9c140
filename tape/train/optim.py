"""Optimizers (SGD, Adam, AdamW), gradient-norm clipping and a warmup + cosine learning-rate schedule.

The update rules are PyTorch's (``torch.optim``, default ``foreach=False`` semantics), so a model moves
between the two with the same hyper-parameters and follows the same trajectory.

Parameters' arrays are read-only (see ``tape/tensors.py``): a step computes each new array in numpy and
assigns it with ``p.data = new`` under ``no_grad`` -- this bumps the parameter's version, so a backward
through a graph recorded before the step raises instead of returning a stale gradient. The optimizer's
own state (momentum buffers, moment estimates) are private, writable numpy arrays updated in place.

Parameters may be a list of tensors or, as in torch, a list of groups ``{"params": [...], "lr": ...}``
whose keys override the optimizer's defaults for that group (e.g. no weight decay on norms and biases).
"""

from __future__ import annotations

import math

import numpy as np

from ..recording import no_grad
from ..tensors import Tensor, as_tensor

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "clip_grad_norm_", "WarmupCosineLR", "warmup_cosine_lr"]


class Optimizer:
    """Base class: holds the parameter groups, the per-parameter state and ``zero_grad``/``step``.

    A subclass declares its hyper-parameters in ``defaults`` and implements ``_update(p, grad, state,
    group) -> new array``; ``state`` is a dict private to that parameter (empty on the first step).
    """

    def __init__(self, params, defaults: dict):
        if isinstance(params, Tensor):
            raise TypeError(f"{type(self).__name__}: params must be an iterable of Tensors or of dicts, got a "
                            f"single Tensor (wrap it in a list)")
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.defaults = dict(defaults)
        self.param_groups: list[dict] = []
        seen: set[int] = set()
        for group in groups:
            unknown = group.keys() - defaults.keys() - {"params"}
            if unknown:
                raise TypeError(f"{type(self).__name__}: unknown option(s) {sorted(unknown)} in a parameter group; "
                                f"accepted: {sorted(defaults)}")
            plist = [group["params"]] if isinstance(group["params"], Tensor) else list(group["params"])
            for p in plist:
                if not isinstance(p, Tensor):
                    raise TypeError(f"{type(self).__name__}: parameters must be Tensors, got {type(p).__name__}")
                if not p.requires_grad or not p.is_leaf:
                    raise ValueError(f"{type(self).__name__}: can only optimize leaf tensors with requires_grad=True "
                                     f"(got {p!r})")
                if id(p) in seen:
                    raise ValueError(f"{type(self).__name__}: a parameter appears twice in the parameter list")
                seen.add(id(p))
            self.param_groups.append({**defaults, **group, "params": plist})
        for group in self.param_groups:
            self._check_group(group)
        self.state: dict[int, dict] = {}  # id(parameter) -> its private state
        self.steps_taken = 0

    def _check_group(self, group: dict) -> None:
        if not group["lr"] >= 0.0:
            raise ValueError(f"{type(self).__name__}: lr must be >= 0, got {group['lr']}")
        if not group.get("weight_decay", 0.0) >= 0.0:
            raise ValueError(f"{type(self).__name__}: weight_decay must be >= 0, got {group['weight_decay']}")

    @property
    def params(self) -> list[Tensor]:
        return [p for group in self.param_groups for p in group["params"]]

    @property
    def lr(self) -> float:
        """The learning rate of the first group (setting it sets every group's)."""
        return self.param_groups[0]["lr"]

    @lr.setter
    def lr(self, value: float) -> None:
        for group in self.param_groups:
            group["lr"] = value

    def zero_grad(self) -> None:
        """Forget the gradients (``p.grad = None``), so the next backward starts from zero."""
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        """Update every parameter that has a gradient."""
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad.data
                    if grad.shape != p.shape or grad.dtype != p.dtype:
                        raise ValueError(f"{type(self).__name__}.step: gradient of shape {grad.shape} {grad.dtype} "
                                         f"for a parameter of shape {p.shape} {p.dtype}")
                    p.data = self._update(p.data, grad, self.state.setdefault(id(p), {}), group)
        self.steps_taken += 1

    def _update(self, p: np.ndarray, grad: np.ndarray, state: dict, group: dict) -> np.ndarray:
        raise NotImplementedError


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum (heavy-ball or Nesterov), dampening and L2 weight
    decay, exactly as ``torch.optim.SGD``."""

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov momentum needs momentum > 0 and dampening = 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov))

    def _update(self, p, grad, state, group):
        if group["weight_decay"]:
            grad = grad + group["weight_decay"] * p
        momentum = group["momentum"]
        if momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = np.array(grad, copy=True)
            else:
                buf *= momentum
                buf += (1 - group["dampening"]) * grad
            grad = grad + momentum * buf if group["nesterov"] else buf
        return p - group["lr"] * grad


class Adam(Optimizer):
    """Adam (Kingma & Ba 2015) with bias correction; ``weight_decay`` adds an L2 term to the gradient (as in
    ``torch.optim.Adam``); ``amsgrad`` keeps the running maximum of the second moment."""

    decoupled_weight_decay = False

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False):
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"{type(self).__name__}: betas must be in [0, 1), got {betas}")
        if not eps >= 0.0:
            raise ValueError(f"{type(self).__name__}: eps must be >= 0, got {eps}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad))

    def _update(self, p, grad, state, group):
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if wd:
            if self.decoupled_weight_decay:
                p = p * (1 - lr * wd)
            else:
                grad = grad + wd * p
        if not state:
            state["step"] = 0
            state["exp_avg"] = np.zeros_like(p)
            state["exp_avg_sq"] = np.zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = np.zeros_like(p)
        state["step"] += 1
        t = state["step"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        # in place on the private state and on one scratch array, which becomes the new parameter
        scratch = np.multiply(grad, grad, out=np.empty_like(grad))  # out=: a 0-D parameter stays an array
        scratch *= 1 - beta2
        v *= beta2
        v += scratch
        np.multiply(grad, 1 - beta1, out=scratch)
        m *= beta1
        m += scratch
        if group["amsgrad"]:
            np.maximum(state["max_exp_avg_sq"], v, out=state["max_exp_avg_sq"])
            v = state["max_exp_avg_sq"]
        bias_correction1 = 1 - beta1 ** t
        bias_correction2_sqrt = math.sqrt(1 - beta2 ** t)
        denom = np.sqrt(v, out=scratch)
        denom /= bias_correction2_sqrt
        denom += eps
        step = np.divide(m, denom, out=denom)
        step *= lr / bias_correction1
        return np.subtract(p, step, out=step)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019): ``p *= 1 - lr * weight_decay`` before
    the Adam step, as ``torch.optim.AdamW`` (whose default weight_decay is 0.01)."""

    decoupled_weight_decay = True

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False) -> Tensor:
    """Scale the gradients of ``parameters`` so that their joint ``norm_type``-norm is at most ``max_norm``.

    Returns the norm before clipping (a scalar Tensor), as ``torch.nn.utils.clip_grad_norm_`` does, whose
    scaling it reproduces: every gradient is multiplied by ``min(1, max_norm / (norm + 1e-6))``.
    """
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    grads = [p.grad.data for p in params if p.grad is not None]
    if not grads:
        return as_tensor(np.zeros((), dtype=np.float32))
    dtype = grads[0].dtype
    norm_type = float(norm_type)
    if math.isinf(norm_type):
        total = max(np.max(np.abs(g)) for g in grads)
    else:
        total = sum(np.sum(np.abs(g) ** norm_type, dtype=np.float64) for g in grads) ** (1.0 / norm_type)
    total = dtype.type(total)
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(f"clip_grad_norm_: the total {norm_type}-norm of the gradients is {total}; set "
                           f"error_if_nonfinite=False to clip anyway")
    coef = dtype.type(min(1.0, float(max_norm) / (float(total) + 1e-6)))
    for p in params:
        if p.grad is not None:
            p.grad = as_tensor(p.grad.data * coef)
    return as_tensor(np.asarray(total, dtype=dtype))


def warmup_cosine_lr(step: int, base_lr: float, warmup_steps: int, total_steps: int, min_lr: float = 0.0) -> float:
    """The learning rate at ``step`` (0-based): linear warmup ``base_lr * (step + 1) / warmup_steps`` over the
    first ``warmup_steps`` steps, then a half cosine from ``base_lr`` down to ``min_lr`` at ``total_steps``
    (and ``min_lr`` after it)."""
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + math.cos(math.pi * progress))


class WarmupCosineLR:
    """Drives an optimizer's learning rate with ``warmup_cosine_lr``. Call ``step()`` after each
    ``optimizer.step()`` (as with torch's schedulers); each group's lr at construction is its base lr."""

    def __init__(self, optimizer: Optimizer, warmup_steps: int, total_steps: int, min_lr: float = 0.0):
        if warmup_steps < 0 or total_steps < warmup_steps:
            raise ValueError(f"WarmupCosineLR: need 0 <= warmup_steps <= total_steps, got warmup_steps="
                             f"{warmup_steps}, total_steps={total_steps}")
        self.optimizer = optimizer
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.min_lr = min_lr
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
        self.last_step = 0
        self._apply()

    def _apply(self) -> None:
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = warmup_cosine_lr(self.last_step, base, self.warmup_steps, self.total_steps, self.min_lr)

    def step(self) -> None:
        self.last_step += 1
        self._apply()

    def get_last_lr(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]
