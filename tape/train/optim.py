"""Optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta), gradient clipping and a warmup + cosine
learning-rate schedule; torch's schedulers are in tape/train/schedules.py, re-exported here.

The update rules are PyTorch's (``torch.optim``, default ``foreach=False`` semantics), so a model moves
between the two with the same hyper-parameters and follows the same trajectory.

Parameters' arrays are read-only (see ``tape/tensors.py``): a step computes each new array in numpy and
assigns it with ``p.data = new`` under ``no_grad`` -- this bumps the parameter's version, so a backward
through a graph recorded before the step raises instead of returning a stale gradient. The optimizer's
own state (momentum buffers, moment estimates) are private, writable numpy arrays updated in place.

Parameters may be a list of tensors or, as in torch, a list of groups ``{"params": [...], "lr": ...}``
whose keys override the optimizer's defaults for that group (e.g. no weight decay on norms and biases).

``state_dict()`` of an optimizer or a schedule is flat -- {str: numeric numpy array} like a Module's -- so a
checkpoint stores it next to the model (``checkpoint.save(model, path, optimizer=..., schedule=...)``) and
training resumed from it continues bit for bit. ``load_state_dict`` checks everything (keys, parameter
counts, shapes, dtypes, hyper-parameter types) and changes nothing unless all of it fits.
"""

from __future__ import annotations

import math
import re
import sys

import numpy as np

from ..checks import require_bool
from ..state import no_grad
from ..tensors import Tensor, as_tensor

__all__ = [
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "RMSprop",
    "Adagrad",
    "Adadelta",
    "Adamax",
    "NAdam",
    "RAdam",
    "clip_grad_norm_",
    "clip_grad_value_",
    "WarmupCosineLR",
    "warmup_cosine_lr",
]


def _assign(p: Tensor, new: np.ndarray, state: dict) -> None:
    """``p.data = new`` -- without the copy when ``new`` is a fresh array of p's shape and dtype that owns its
    memory and that nothing else refers to (what the update rules return: not a state array, not the gradient,
    not a buffer a custom ``_update`` reuses; anything else is copied)."""
    if (
        type(new) is np.ndarray
        and sys.getrefcount(new) <= _FRESH
        and new.base is None
        and new.flags.owndata
        and new.shape == p.shape
        and new.dtype == p.dtype
    ):
        p._adopt(new)
    else:
        p.data = new


def _fresh_refcount() -> int:
    """The reference count ``_assign`` sees for an array only its call refers to, measured the same way."""

    def probe(p, new, state):
        return sys.getrefcount(new)

    return probe(None, np.empty(1), None)


_FRESH = _fresh_refcount()


class Optimizer:
    """Base class: holds the parameter groups, the per-parameter state and ``zero_grad``/``step``.

    A subclass declares its hyper-parameters in ``defaults`` and implements ``_update(p, grad, state,
    group) -> new array``; ``state`` is a dict private to that parameter (empty on the first step).
    ``_nonnegative`` names the hyper-parameters that must be >= 0 (checked by ``_check_group``).
    """

    _nonnegative: tuple[str, ...] = ("lr", "weight_decay")

    def __init__(self, params, defaults: dict):
        if isinstance(params, Tensor):
            raise TypeError(
                f"{type(self).__name__}: params must be an iterable of Tensors or of dicts, got a "
                f"single Tensor (wrap it in a list)"
            )
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.defaults = dict(defaults)
        self.param_groups: list[dict] = []
        for group in groups:
            self._add_group(type(self).__name__, group)
        self.state: dict[int, dict] = {}  # id(parameter) -> its private state
        self.steps_taken = 0

    def _torch_options(self, maximize, differentiable, **no_effect) -> dict:
        """The group option ``maximize`` (ascend: the gradient negated first, as torch's) from torch's keyword
        arguments; ``foreach``, ``fused`` and ``capturable`` choose among torch's kernels for the same update and
        change nothing here (one CPU path); ``differentiable=True`` is refused."""
        name = type(self).__name__
        if differentiable:
            raise ValueError(
                f"{name}: differentiable=True (an optimizer step that is itself differentiable) is not supported: "
                "minitape's steps run under no_grad"
            )
        for key, value in {"maximize": maximize, **no_effect}.items():
            if value is not None:
                require_bool(name, key, value)
        return {"maximize": bool(maximize)}

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters (torch's ``add_param_group``: options it leaves out take the optimizer's
        defaults), e.g. to train layers unfrozen mid-run. A group that is refused is not added."""
        if not isinstance(param_group, dict) or "params" not in param_group:
            raise TypeError(
                f"{type(self).__name__}.add_param_group: expected a dict with a 'params' entry, got "
                f"{type(param_group).__name__}"
            )
        self._add_group(f"{type(self).__name__}.add_param_group", param_group)

    def _add_group(self, where: str, group: dict) -> None:
        unknown = group.keys() - self.defaults.keys() - {"params"}
        if unknown:
            raise TypeError(
                f"{where}: unknown option(s) {sorted(unknown)} in a parameter group; accepted: {sorted(self.defaults)}"
            )
        plist = [group["params"]] if isinstance(group["params"], Tensor) else list(group["params"])
        seen = {id(p) for p in self.params}
        for p in plist:
            if not isinstance(p, Tensor):
                raise TypeError(f"{where}: parameters must be Tensors, got {type(p).__name__}")
            if not p.requires_grad or not p.is_leaf:
                raise ValueError(f"{where}: can only optimize leaf tensors with requires_grad=True (got {p!r})")
            if id(p) in seen:
                raise ValueError(
                    f"{where}: a parameter appears "
                    + ("in more than one group" if self.param_groups else "twice in the parameter list")
                )
            seen.add(id(p))
        full = {**self.defaults, **group, "params": plist}
        self._check_group(full)
        self.param_groups.append(full)

    def _check_group(self, group: dict) -> None:
        """Raise ValueError for hyper-parameters the update rule cannot use (checked at construction and when
        a state dict is loaded)."""
        for key in self._nonnegative:
            value = group.get(key, 0.0)
            if not value >= 0.0:
                raise ValueError(f"{type(self).__name__}: {key} must be >= 0, got {value}")

    def _state_layout(self, group: dict) -> dict[str, str]:
        """The entries a parameter's state holds once it has any, for a parameter of ``group``: name ->
        ``"count"`` (a non-negative int), ``"scalar"`` (a float32 0-D array) or ``"param"`` (an array of the
        parameter's shape and dtype)."""
        return {}

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

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients, so the next backward starts from zero (``zero_grads``)."""
        zero_grads(self.params, set_to_none)

    def step(self) -> None:
        """Update every parameter that has a gradient."""
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad._data
                    if grad.shape != p.shape or grad.dtype != p.dtype:
                        raise ValueError(
                            f"{type(self).__name__}.step: gradient of shape {grad.shape} {grad.dtype} "
                            f"for a parameter of shape {p.shape} {p.dtype}"
                        )
                    state = self.state.setdefault(id(p), {})
                    grad = -grad if group.get("maximize") else grad  # torch's: before weight decay and the rule
                    _assign(p, self._update(p._data, grad, state, group), state)
        self.steps_taken += 1

    def _update(self, p: np.ndarray, grad: np.ndarray, state: dict, group: dict) -> np.ndarray:
        raise NotImplementedError

    def _first_state(self, state: dict, p: np.ndarray, group: dict, fill: float = 0.0) -> None:
        """On a parameter's first step (``state`` empty), the entries of ``_state_layout``: counts 0, buffers of
        ``p``'s shape and dtype filled with ``fill``, scalars 1 (a float32 0-D array: torch's scalar state)."""
        if not state:
            for name, kind in self._state_layout(group).items():
                first = {"count": lambda: 0, "scalar": lambda: np.ones((), np.float32)}.get(kind)
                state[name] = first() if first else np.full_like(p, fill)

    # -- state ---------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything a resumed run needs, as {name: new numpy array} (a snapshot: later steps do not change it).

        Parameters are numbered 0, 1, ... in the order of ``param_groups`` (as torch does):
        ``steps_taken``; for each group g, ``param_groups.g.params`` (the numbers of its parameters) and
        ``param_groups.g.<hyper-parameter>``; for each parameter i with state, ``state.i.<entry>``.
        """
        out = {"steps_taken": np.array(self.steps_taken, dtype=np.int64)}
        first = 0
        for g, group in enumerate(self.param_groups):
            count = len(group["params"])
            out[f"param_groups.{g}.params"] = np.arange(first, first + count, dtype=np.int64)
            for name in self.defaults:
                out[f"param_groups.{g}.{name}"] = _hyper_to_array(group[name])
            first += count
        for i, p in enumerate(self.params):
            for name, value in self.state.get(id(p), {}).items():
                out[f"state.{i}.{name}"] = (
                    np.array(value, copy=True) if isinstance(value, np.ndarray) else np.array(value, dtype=np.int64)
                )
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what ``state_dict()`` returned -- hyper-parameters included, as in torch -- into this optimizer,
        built over parameters of the same shapes, dtypes, order and grouping. Every problem is reported at once
        (missing or unexpected keys, parameter or group counts, shapes, dtypes, hyper-parameter types); nothing
        changes unless everything fits. The arrays are copied: the optimizer's state stays private."""
        where = f"{type(self).__name__}.load_state_dict"
        arrays = _arrays_of(where, state_dict)
        problems: list[str] = []
        expected = ["steps_taken"]
        steps_taken = _count_from(arrays, "steps_taken", problems)
        new_groups = self._loaded_groups(arrays, problems, expected)
        new_state = self._loaded_state(new_groups, arrays, problems, expected)
        expected_set = set(expected)
        missing = [key for key in expected if key not in arrays]
        unexpected = [key for key in arrays if key not in expected_set]
        if missing:
            problems.insert(0, f"missing key(s): {_listing(missing)}")
        if unexpected:
            problems.insert(1 if missing else 0, f"unexpected key(s): {_listing(unexpected)}")
        if problems:
            raise ValueError(f"{where}: " + "; ".join(problems))
        assert steps_taken is not None  # a missing or malformed count was a problem above
        for group, new in zip(self.param_groups, new_groups):
            group.update((name, new[name]) for name in self.defaults)
        self.state = new_state
        self.steps_taken = steps_taken

    def _loaded_groups(self, arrays: dict, problems: list, expected: list) -> list[dict]:
        """``load_state_dict``'s parameter groups with the saved hyper-parameters (problems and the keys read are
        appended to ``problems`` and ``expected``)."""
        saved_groups = sum(1 for key in arrays if re.fullmatch(r"param_groups\.\d+\.params", key))
        if saved_groups != len(self.param_groups):
            problems.append(
                f"{len(self.param_groups)} parameter group(s) in the optimizer but {saved_groups} in the state dict"
            )
        new_groups, first = [], 0
        for g, group in enumerate(self.param_groups):
            count = len(group["params"])
            key = f"param_groups.{g}.params"
            expected.append(key)
            if key in arrays:
                problem = _group_numbering_problem(key, arrays[key], g, first, count)
                if problem:
                    problems.append(problem)
            first += count
            new, group_ok = dict(group), True
            for name in self.defaults:
                key = f"param_groups.{g}.{name}"
                expected.append(key)
                if key in arrays:
                    value, problem = _hyper_from_array(key, group[name], arrays[key])
                    if problem:
                        problems.append(problem)
                        group_ok = False
                    else:
                        new[name] = value
            if group_ok:
                try:
                    self._check_group(new)
                except ValueError as e:
                    problems.append(f"group {g}: {e}")
            new_groups.append(new)
        return new_groups

    def _loaded_state(self, new_groups: list, arrays: dict, problems: list, expected: list) -> dict:
        """``load_state_dict``'s per-parameter state (buffers and counts), keyed by parameter id."""
        new_state, i = {}, 0
        for group in new_groups:
            layout = self._state_layout(group)
            for p in group["params"]:
                keys = {name: f"state.{i}.{name}" for name in layout}
                if any(key in arrays for key in keys.values()):
                    expected.extend(keys.values())
                    entry = {}
                    for name, key in keys.items():
                        if key in arrays:
                            entry[name] = (
                                _count_from(arrays, key, problems)
                                if layout[name] == "count"
                                else _scalar_from(arrays[key], key, problems)
                                if layout[name] == "scalar"
                                else _buffer_from(arrays[key], key, p, problems)
                            )
                    new_state[id(p)] = entry
                i += 1
        return new_state


def _scalar_from(array: np.ndarray, key: str, problems: list[str]) -> np.ndarray | None:
    if array.shape != () or array.dtype != np.float32:
        problems.append(f"'{key}' must be a float32 scalar, got {_describe(array)}")
        return None
    return np.array(array, copy=True)


def _group_numbering_problem(key: str, saved, g: int, first: int, count: int) -> str | None:
    """What is wrong with a saved group's parameter numbers (they must be ``first`` .. ``first + count - 1``)."""
    if saved.ndim != 1 or saved.dtype.kind not in "iu":
        return f"'{key}' must be a 1-D array of parameter numbers, got {_describe(saved)}"
    if saved.size != count:
        return f"group {g} has {count} parameter(s) in the optimizer but {saved.size} in the state dict"
    if not np.array_equal(saved, np.arange(first, first + count)):
        return f"'{key}' must number the parameters {first} to {first + count - 1} in order, got {saved.tolist()}"
    return None


def _l2(grad: np.ndarray, p: np.ndarray, weight_decay: float) -> np.ndarray:
    """The gradient with torch's coupled (L2) weight decay ``weight_decay * p`` added."""
    return grad + weight_decay * p if weight_decay else grad


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum (heavy-ball or Nesterov), dampening and L2 weight
    decay, exactly as ``torch.optim.SGD``."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ):
        options = self._torch_options(maximize, differentiable, foreach=foreach, fused=fused)
        super().__init__(
            params,
            dict(
                lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov, **options
            ),
        )

    def _check_group(self, group):
        super()._check_group(group)
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: nesterov momentum needs momentum > 0 and dampening = 0")

    def _state_layout(self, group):
        return {"momentum_buffer": "param"} if group["momentum"] else {}

    def _update(self, p, grad, state, group):
        grad = _l2(grad, p, group["weight_decay"])
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


def _moments(grad: np.ndarray, m: np.ndarray, v: np.ndarray, beta1: float, beta2: float) -> None:
    """Adam's running moments in place: ``m`` towards ``grad`` by ``1 - beta1`` (torch's lerp), ``v`` towards
    ``grad**2`` by ``1 - beta2``."""
    m += (1 - beta1) * (grad - m)
    v *= beta2
    v += (1 - beta2) * grad * grad


class _AdamFamily(Optimizer):
    """What Adam, Adamax, NAdam and RAdam share: ``betas`` checked, ``eps``, L2 or decoupled weight decay."""

    _nonnegative = (*Optimizer._nonnegative, "eps")

    def _check_group(self, group):
        super()._check_group(group)
        betas = group["betas"] = tuple(group["betas"])
        if not (len(betas) == 2 and 0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"{type(self).__name__}: betas must be two numbers in [0, 1), got {betas}")

    def _decayed(self, p, grad, group):
        """(p, grad) after weight decay: decoupled (``p *= 1 - lr * wd``) or L2 (``grad += wd * p``)."""
        wd = group["weight_decay"]
        if wd and group.get("decoupled_weight_decay"):
            return p * (1 - group["lr"] * wd), grad
        return p, _l2(grad, p, wd)


class Adam(_AdamFamily):
    """Adam (Kingma & Ba 2015) with bias correction; ``weight_decay`` adds an L2 term to the gradient (as in
    ``torch.optim.Adam``); ``amsgrad`` keeps the running maximum of the second moment."""

    decoupled_weight_decay = False

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ):
        if decoupled_weight_decay:
            self.decoupled_weight_decay = True  # torch's Adam(decoupled_weight_decay=True) is AdamW
        options = self._torch_options(maximize, differentiable, foreach=foreach, capturable=capturable, fused=fused)
        Optimizer.__init__(
            self,
            params,
            dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, **options),
        )

    def _state_layout(self, group):
        layout = {"step": "count", "exp_avg": "param", "exp_avg_sq": "param"}
        if group["amsgrad"]:
            layout["max_exp_avg_sq"] = "param"
        return layout

    def _update(self, p, grad, state, group):
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if wd and self.decoupled_weight_decay:
            p = p * (1 - lr * wd)
        elif wd:
            grad = _l2(grad, p, wd)
        self._first_state(state, p, group)
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
        bias_correction1 = 1 - beta1**t
        bias_correction2_sqrt = math.sqrt(1 - beta2**t)
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

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ):
        super().__init__(
            params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, foreach=foreach,
            capturable=capturable, differentiable=differentiable, fused=fused,
        )  # fmt: skip


class Adamax(_AdamFamily):
    """Adamax as ``torch.optim.Adamax``: Adam with the infinity norm, ``u = max(beta2 * u, |g| + eps)``."""

    def __init__(
        self,
        params,
        lr: float = 2e-3,
        betas: tuple = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ):
        options = self._torch_options(maximize, differentiable, foreach=foreach, capturable=capturable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, **options))

    def _state_layout(self, group):
        return {"step": "count", "exp_avg": "param", "exp_inf": "param"}

    def _update(self, p, grad, state, group):
        (beta1, beta2), eps = group["betas"], group["eps"]
        p, grad = self._decayed(p, grad, group)
        self._first_state(state, p, group)
        state["step"] += 1
        m, u = state["exp_avg"], state["exp_inf"]
        m += (1 - beta1) * (grad - m)
        u *= beta2
        np.maximum(u, np.abs(grad) + eps, out=u)
        return p - group["lr"] / (1 - beta1 ** state["step"]) * (m / u)


class NAdam(_AdamFamily):
    """NAdam as ``torch.optim.NAdam``: Adam with Nesterov momentum and the momentum schedule
    ``mu_t = beta1 (1 - 0.5 * 0.96 ** (t * momentum_decay))``; ``mu_product`` is kept as torch keeps it, a float32
    scalar, so the trajectories agree."""

    def __init__(
        self,
        params,
        lr: float = 2e-3,
        betas: tuple = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ):
        options = self._torch_options(maximize, differentiable, foreach=foreach, capturable=capturable)
        super().__init__(
            params,
            dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                 decoupled_weight_decay=bool(decoupled_weight_decay), **options),
        )  # fmt: skip

    def _state_layout(self, group):
        return {"step": "count", "mu_product": "scalar", "exp_avg": "param", "exp_avg_sq": "param"}

    def _update(self, p, grad, state, group):
        lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["momentum_decay"]
        p, grad = self._decayed(p, grad, group)
        self._first_state(state, p, group)
        state["step"] += 1
        t = state["step"]
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * decay))
        state["mu_product"] = np.asarray(state["mu_product"] * np.float32(mu), np.float32)  # torch's float32 scalar
        product = float(state["mu_product"])
        m, v = state["exp_avg"], state["exp_avg_sq"]
        _moments(grad, m, v, beta1, beta2)
        denom = np.sqrt(v / (1 - beta2**t)) + eps
        step = (lr * (1.0 - mu) / (1.0 - product)) * (grad / denom)
        step += (lr * mu_next / (1.0 - product * mu_next)) * (m / denom)
        return p - step


class RAdam(_AdamFamily):
    """RAdam as ``torch.optim.RAdam``: Adam whose adaptive step is rectified by the variance of its length; while
    that length ``rho_t`` is <= 5 the step is the bias-corrected momentum alone."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ):
        options = self._torch_options(maximize, differentiable, foreach=foreach, capturable=capturable)
        super().__init__(
            params,
            dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                 decoupled_weight_decay=bool(decoupled_weight_decay), **options),
        )  # fmt: skip

    def _state_layout(self, group):
        return {"step": "count", "exp_avg": "param", "exp_avg_sq": "param"}

    def _update(self, p, grad, state, group):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        p, grad = self._decayed(p, grad, group)
        self._first_state(state, p, group)
        state["step"] += 1
        t = state["step"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        _moments(grad, m, v, beta1, beta2)
        correction2 = 1 - beta2**t
        corrected = m / (1 - beta1**t)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * t * (beta2**t) / correction2
        if rho_t <= 5.0:
            return p - corrected * lr
        rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
        return p - corrected * lr * (correction2**0.5 / (np.sqrt(v) + eps)) * rect


class RMSprop(Optimizer):
    """RMSprop as ``torch.optim.RMSprop``: a running mean of squared gradients (``alpha``), optionally centered
    (minus the squared running mean of gradients), with optional momentum and L2 weight decay."""

    _nonnegative = (*Optimizer._nonnegative, "alpha", "eps", "momentum")

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ):
        options = self._torch_options(maximize, differentiable, capturable=capturable, foreach=foreach)
        super().__init__(
            params,
            dict(
                lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum, centered=centered, **options
            ),
        )

    def _state_layout(self, group):
        layout = {"step": "count", "square_avg": "param"}
        if group["momentum"] > 0:
            layout["momentum_buffer"] = "param"
        if group["centered"]:
            layout["grad_avg"] = "param"
        return layout

    def _update(self, p, grad, state, group):
        alpha, eps, momentum = group["alpha"], group["eps"], group["momentum"]
        grad = _l2(grad, p, group["weight_decay"])
        self._first_state(state, p, group)
        state["step"] += 1
        square_avg = state["square_avg"]
        square_avg *= alpha
        square_avg += (1 - alpha) * grad * grad
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg += (1 - alpha) * (grad - grad_avg)  # torch's lerp_
            avg = np.sqrt(square_avg - grad_avg * grad_avg)
        else:
            avg = np.sqrt(square_avg)
        avg += eps
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf *= momentum
            buf += grad / avg
            return p - group["lr"] * buf
        return p - group["lr"] * (grad / avg)


class Adagrad(Optimizer):
    """Adagrad as ``torch.optim.Adagrad``: steps scaled by the root of the summed squared gradients, the
    learning rate decayed as ``lr / (1 + (step - 1) * lr_decay)``."""

    _nonnegative = (*Optimizer._nonnegative, "lr_decay", "initial_accumulator_value", "eps")

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ):
        options = self._torch_options(maximize, differentiable, foreach=foreach, fused=fused)
        super().__init__(
            params,
            dict(
                lr=lr,
                lr_decay=lr_decay,
                weight_decay=weight_decay,
                initial_accumulator_value=initial_accumulator_value,
                eps=eps,
                **options,
            ),
        )

    def _state_layout(self, group):
        return {"step": "count", "sum": "param"}

    def _update(self, p, grad, state, group):
        self._first_state(state, p, group, fill=group["initial_accumulator_value"])
        state["step"] += 1
        grad = _l2(grad, p, group["weight_decay"])
        clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
        state["sum"] += grad * grad
        return p - clr * (grad / (np.sqrt(state["sum"]) + group["eps"]))


class Adadelta(Optimizer):
    """Adadelta as ``torch.optim.Adadelta``: the step is the gradient scaled by the ratio of the root running means
    of squared updates and squared gradients (``rho``), times ``lr``; L2 ``weight_decay`` as torch's."""

    _nonnegative = (*Optimizer._nonnegative, "rho", "eps")

    def __init__(
        self,
        params,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ):
        if not rho <= 1.0:
            raise ValueError(f"Adadelta: invalid rho value: {rho} (expected 0 <= rho <= 1)")
        options = self._torch_options(maximize, differentiable, foreach=foreach, capturable=capturable)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, **options))

    def _state_layout(self, group):
        return {"step": "count", "square_avg": "param", "acc_delta": "param"}

    def _update(self, p, grad, state, group):
        rho, eps = group["rho"], group["eps"]
        self._first_state(state, p, group)
        state["step"] += 1
        grad = _l2(grad, p, group["weight_decay"])
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg *= rho
        square_avg += (1 - rho) * grad * grad
        delta = np.sqrt(acc_delta + eps) / np.sqrt(square_avg + eps) * grad
        acc_delta *= rho
        acc_delta += (1 - rho) * delta * delta
        return p - group["lr"] * delta


def zero_grads(params, set_to_none: bool = True) -> None:
    """``p.grad = None`` for every parameter (torch's default), or with ``set_to_none=False`` its gradient zeroed in
    place, as torch's (a parameter without a gradient keeps none; one computed with create_graph leaves its graph)."""
    for p in params:
        if set_to_none or p.grad is None:
            p.grad = None
        else:
            if p.grad._node is not None:
                p.grad = p.grad.detach()
            with no_grad():
                p.grad.zero_()


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False) -> Tensor:
    """Scale the gradients of ``parameters`` so that their joint ``norm_type``-norm is at most ``max_norm``.

    Returns the norm before clipping (a scalar Tensor of the gradients' dtype), as
    ``torch.nn.utils.clip_grad_norm_`` does, whose scaling it reproduces: every gradient is multiplied by
    ``min(1, max_norm / (norm + 1e-6))``. A non-finite norm is not special-cased, as in torch: an infinite
    norm scales by 0 (an infinite entry becomes NaN), a NaN norm makes every gradient NaN -- unless
    ``error_if_nonfinite=True``, which raises RuntimeError and leaves the gradients alone.

    ``norm_type`` is a number > 0 or ``inf``; the sum of powers is accumulated in float64 (torch computes a
    float32 gradient's powers in float32, so it can report inf for a norm that float32 holds).
    """
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    norm_type = float(norm_type)
    if not norm_type > 0:  # refuses 0, negative numbers, -inf and nan: none is a norm
        raise ValueError(f"clip_grad_norm_: argument 'norm_type' expected a number > 0 or inf, got {norm_type}")
    if not float(max_norm) >= 0:
        raise ValueError(f"clip_grad_norm_: argument 'max_norm' expected a number >= 0, got {max_norm}")
    grads = [p.grad._data for p in params if p.grad is not None]
    if not grads:
        return as_tensor(np.zeros((), dtype=np.float32))
    dtype = np.result_type(*grads)
    with np.errstate(all="ignore"):  # inf, nan and tiny scale factors are results here, not accidents
        if math.isinf(norm_type):
            total: np.floating | np.ndarray = np.max(
                np.array([np.max(np.abs(g), initial=0.0) for g in grads], dtype=np.float64)
            )
        else:
            powers = sum(np.sum(np.power(np.abs(g), norm_type, dtype=np.float64)) for g in grads)
            total = powers ** (1.0 / norm_type)
        total = np.asarray(total, dtype=dtype)
        if error_if_nonfinite and not np.isfinite(total):
            raise RuntimeError(
                f"clip_grad_norm_: the total norm of order {norm_type} for gradients from "
                f"`parameters` is non-finite ({total}), so it cannot be clipped. To disable this error "
                f"and scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`"
            )
        coef = np.minimum(dtype.type(float(max_norm)) / (total + dtype.type(1e-6)), dtype.type(1.0))  # keeps a nan
        with no_grad():
            for p in params:
                if p.grad is not None:  # in place, as torch's: the gradient tensors keep their identity
                    p.grad._adopt(p.grad._data * coef.astype(p.grad.dtype))
    return as_tensor(total)


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient of ``parameters`` into ``[-clip_value, clip_value]`` in place (torch's
    ``torch.nn.utils.clip_grad_value_``: ``Tensor.clamp_``, so a NaN entry stays NaN). ``foreach`` is accepted and
    changes nothing (one CPU path)."""
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    if not float(clip_value) >= 0:
        raise ValueError(f"clip_grad_value_: argument 'clip_value' expected a number >= 0, got {clip_value}")
    with no_grad():
        for p in params:
            if p.grad is not None:
                p.grad.clamp_(-float(clip_value), float(clip_value))


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
            raise ValueError(
                f"WarmupCosineLR: need 0 <= warmup_steps <= total_steps, got warmup_steps="
                f"{warmup_steps}, total_steps={total_steps}"
            )
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

    def state_dict(self) -> dict[str, np.ndarray]:
        """The schedule's position and settings: ``last_step``, ``warmup_steps``, ``total_steps``, ``min_lr``
        and ``base_lrs`` (one per parameter group)."""
        return {
            "last_step": np.array(self.last_step, dtype=np.int64),
            "warmup_steps": np.array(self.warmup_steps, dtype=np.int64),
            "total_steps": np.array(self.total_steps, dtype=np.int64),
            "min_lr": np.array(float(self.min_lr), dtype=np.float64),
            "base_lrs": np.array([float(lr) for lr in self.base_lrs], dtype=np.float64),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what ``state_dict()`` returned and set the optimizer's learning rates for that step. Every
        problem is reported at once; nothing changes unless everything fits."""
        where = "WarmupCosineLR.load_state_dict"
        arrays = _arrays_of(where, state_dict)
        names = ["last_step", "warmup_steps", "total_steps", "min_lr", "base_lrs"]
        problems = []
        missing = [name for name in names if name not in arrays]
        unexpected = [name for name in arrays if name not in names]
        if missing:
            problems.append(f"missing key(s): {_listing(missing)}")
        if unexpected:
            problems.append(f"unexpected key(s): {_listing(unexpected)}")
        counts = {name: _count_from(arrays, name, problems) for name in names[:3] if name in arrays}
        min_lr = base_lrs = None
        if "min_lr" in arrays:
            min_lr, problem = _hyper_from_array("min_lr", 0.0, arrays["min_lr"])
            problems += [problem] if problem else []
        if "base_lrs" in arrays:
            saved, groups = arrays["base_lrs"], len(self.optimizer.param_groups)
            if saved.ndim != 1 or saved.dtype.kind not in "fiu":
                problems.append(f"'base_lrs' must be a 1-D array of learning rates, got {_describe(saved)}")
            elif saved.size != groups:
                problems.append(
                    f"'base_lrs' has {saved.size} learning rate(s); the optimizer has {groups} parameter group(s)"
                )
            else:
                base_lrs = [float(lr) for lr in saved]
        if problems:
            raise ValueError(f"{where}: " + "; ".join(problems))
        last_step, warmup_steps, total_steps = (counts[n] for n in names[:3])
        # a missing or malformed entry was a problem above, so none of these is None here
        assert last_step is not None and warmup_steps is not None and total_steps is not None
        assert min_lr is not None and base_lrs is not None
        if not 0 <= warmup_steps <= total_steps:
            raise ValueError(
                f"{where}: need 0 <= warmup_steps <= total_steps, got warmup_steps={warmup_steps}, "
                f"total_steps={total_steps}"
            )
        self.last_step, self.warmup_steps, self.total_steps = last_step, warmup_steps, total_steps
        self.min_lr, self.base_lrs = min_lr, base_lrs
        self._apply()


# -- state dict helpers ------------------------------------------------------------------------------------------
def _arrays_of(where: str, state_dict) -> dict[str, np.ndarray]:
    if not isinstance(state_dict, dict):
        raise TypeError(
            f"{where}: argument 'state_dict' expected a dict of arrays (from state_dict()), got "
            f"{type(state_dict).__name__}"
        )
    return {key: value._data if isinstance(value, Tensor) else np.asarray(value) for key, value in state_dict.items()}


def _describe(array: np.ndarray) -> str:
    return f"shape {array.shape} dtype {array.dtype}"


def _listing(names: list[str], limit: int = 12) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def _hyper_to_array(value) -> np.ndarray:
    if isinstance(value, bool | np.bool_):
        return np.array(bool(value))
    if isinstance(value, tuple | list):
        return np.array([float(v) for v in value], dtype=np.float64)
    return np.array(float(value), dtype=np.float64)


def _hyper_from_array(key: str, like, array: np.ndarray):
    """(value of the type of ``like``, None) or (None, the problem)."""
    if isinstance(like, bool | np.bool_):
        if array.shape != () or array.dtype != np.bool_:
            return None, f"'{key}' must be a bool, got {_describe(array)}"
        return bool(array), None
    if array.dtype.kind not in "fiu":
        return None, f"'{key}' must be numeric, got {_describe(array)}"
    if isinstance(like, tuple | list):
        if array.shape != (len(like),):
            return None, f"'{key}' must be {len(like)} numbers, got {_describe(array)}"
        return tuple(float(v) for v in array), None
    if array.shape != ():
        return None, f"'{key}' must be one number, got {_describe(array)}"
    return float(array), None


def _count_from(arrays: dict, key: str, problems: list[str]) -> int | None:
    array = arrays.get(key)
    if array is None:
        return None
    if array.shape != () or array.dtype.kind not in "iu" or int(array) < 0:
        problems.append(f"'{key}' must be a non-negative integer, got {_describe(array)}")
        return None
    return int(array)


def _buffer_from(array: np.ndarray, key: str, p: Tensor, problems: list[str]) -> np.ndarray | None:
    if array.shape != p.shape:
        problems.append(f"'{key}' has shape {array.shape}; the parameter has shape {p.shape}")
    elif array.dtype != p.dtype:
        problems.append(
            f"'{key}' has dtype {array.dtype}; the parameter has dtype {p.dtype} (convert it explicitly; "
            f"minitape never casts silently)"
        )
    else:
        return np.array(array, copy=True, order="C")  # private and writable: the updates work in place on it
    return None


from .schedules import *  # noqa: E402, F403  -- torch's learning-rate schedulers (tape/train/schedules.py)
from .schedules import __all__ as _schedules  # noqa: E402

__all__ += _schedules
