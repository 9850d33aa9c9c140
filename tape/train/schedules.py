"""torch's learning-rate schedulers (``torch.optim.lr_scheduler``), with torch's own recursive ("chainable")
formulas so the floats match, torch's ``initial_lr`` rule (every scheduler of one optimizer starts from the lr the
first one found, so they chain and compose: ``SequentialLR``, ``ChainedScheduler``), and their state dicts as flat
numeric arrays (``ReduceLROnPlateau`` included). Stepping with an explicit epoch (``step(epoch)``, deprecated in
torch) uses each scheduler's closed form, as torch's does; ``SequentialLR`` relies on it at its milestones."""

from __future__ import annotations

import bisect
import math

import numpy as np

from ..checks import integer
from ..tensors import Tensor
from .optim import Optimizer, _arrays_of, _count_from, _describe, _hyper_from_array, _listing

__all__ = [
    "LRScheduler",
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "LambdaLR",
    "MultiplicativeLR",
    "ConstantLR",
    "LinearLR",
    "PolynomialLR",
    "CosineAnnealingWarmRestarts",
    "SequentialLR",
    "ChainedScheduler",
    "OneCycleLR",
    "ReduceLROnPlateau",
]


class LRScheduler:
    """Base of torch's schedulers: ``base_lrs`` are the groups' ``initial_lr`` (set to their lr by the first
    scheduler of the optimizer, as torch's); construction takes the first step (epoch 0), then call ``step()``
    after each ``optimizer.step()``. Subclasses give ``_lrs()``, the new lr of every group at ``last_epoch`` from
    the current ones -- torch's recursive formulas, so the floats match -- and ``_closed_form()`` where torch has
    one (the lr at any epoch from the base lrs: ``step(epoch)``)."""

    def __init__(self, optimizer: Optimizer):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: expected an Optimizer, got {type(optimizer).__name__}")
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = -1
        self.step()

    def _lrs(self) -> list[float]:
        raise NotImplementedError

    def _closed_form(self) -> list[float] | None:
        return None

    def step(self, epoch=None) -> None:
        """The next epoch's lrs; ``step(epoch)`` jumps to ``epoch`` (torch's deprecated form: the closed form
        where the scheduler has one, else its formula at that epoch)."""
        if epoch is None:
            self.last_epoch += 1
            lrs = self._lrs()
        else:
            self.last_epoch = epoch
            lrs = self._closed_form() or self._lrs()
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr

    def get_last_lr(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, np.ndarray]:
        """``last_epoch``, ``base_lrs`` and the groups' current ``lrs`` (flat numeric arrays)."""
        return {
            "last_epoch": np.array(self.last_epoch, dtype=np.int64),
            "base_lrs": np.array(self.base_lrs, dtype=np.float64),
            "lrs": np.array(self.get_last_lr(), dtype=np.float64),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        where = f"{type(self).__name__}.load_state_dict"
        arrays = _arrays_of(where, state_dict)
        groups = len(self.optimizer.param_groups)
        if set(arrays) != {"last_epoch", "base_lrs", "lrs"}:
            raise ValueError(f"{where}: expected the keys last_epoch, base_lrs, lrs, got {_listing(sorted(arrays))}")
        for key in ("base_lrs", "lrs"):
            if arrays[key].shape != (groups,):
                raise ValueError(f"{where}: '{key}' must hold {groups} learning rate(s), got {_describe(arrays[key])}")
        epoch = arrays["last_epoch"]
        if epoch.shape != () or epoch.dtype.kind not in "iu" or int(epoch) < -1:  # -1: not started (SequentialLR's)
            raise ValueError(f"{where}: 'last_epoch' must be an integer >= -1, got {_describe(epoch)}")
        self.last_epoch, self.base_lrs = int(epoch), [float(v) for v in arrays["base_lrs"]]
        for group, lr in zip(self.optimizer.param_groups, arrays["lrs"]):
            group["lr"] = float(lr)


class StepLR(LRScheduler):
    """lr times ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer)

    def _lrs(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self.get_last_lr()
        return [lr * self.gamma for lr in self.get_last_lr()]

    def _closed_form(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr times ``gamma`` at each milestone epoch (a repeated milestone counts again, as torch's Counter)."""

    def __init__(self, optimizer: Optimizer, milestones, gamma: float = 0.1):
        self.milestones = sorted(int(m) for m in milestones)
        self.gamma = gamma
        super().__init__(optimizer)

    def _lrs(self):
        count = self.milestones.count(self.last_epoch)
        return [lr * self.gamma**count for lr in self.get_last_lr()] if count else self.get_last_lr()

    def _closed_form(self):
        return [base * self.gamma ** bisect.bisect_right(self.milestones, self.last_epoch) for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    def __init__(self, optimizer: Optimizer, gamma: float):
        self.gamma = gamma
        super().__init__(optimizer)

    def _lrs(self):
        return self.get_last_lr() if self.last_epoch == 0 else [lr * self.gamma for lr in self.get_last_lr()]

    def _closed_form(self):
        return [base * self.gamma**self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """A cosine from each base lr down to ``eta_min`` over ``T_max`` epochs (and back up, periodically)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0):  # noqa: N803 -- torch's name
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer)

    def _lrs(self):
        e, t, low = self.last_epoch, self.T_max, self.eta_min
        if e == 0:
            return self.get_last_lr()
        if (e - 1 - t) % (2 * t) == 0:
            return [
                lr + (base - low) * (1 - math.cos(math.pi / t)) / 2
                for lr, base in zip(self.get_last_lr(), self.base_lrs)
            ]
        ratio = (1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t))
        return [ratio * (lr - low) + low for lr in self.get_last_lr()]

    def _closed_form(self):
        cosine = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]


class LambdaLR(LRScheduler):
    """lr = base lr times ``lr_lambda(epoch)`` (one function, or one per group)."""

    def __init__(self, optimizer: Optimizer, lr_lambda):
        groups = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, list | tuple) else [lr_lambda] * groups
        if len(self.lr_lambdas) != groups:
            raise ValueError(f"LambdaLR: expected {groups} lr_lambdas (one per group), got {len(self.lr_lambdas)}")
        super().__init__(optimizer)

    def _lrs(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


def _per_group(name: str, optimizer: Optimizer, value) -> list:
    """One value per parameter group: a list or tuple as given (its length checked), else the value repeated."""
    groups = len(optimizer.param_groups)
    values = list(value) if isinstance(value, list | tuple) else [value] * groups
    if len(values) != groups:
        raise ValueError(f"{name}: expected {groups} values (one per parameter group), got {len(values)}")
    return values


class MultiplicativeLR(LRScheduler):
    """lr times ``lr_lambda(epoch)`` at every step after the first (one function, or one per group)."""

    def __init__(self, optimizer: Optimizer, lr_lambda):
        self.lr_lambdas = _per_group("MultiplicativeLR", optimizer, lr_lambda)
        super().__init__(optimizer)

    def _lrs(self):
        if self.last_epoch > 0:
            return [lr * fn(self.last_epoch) for fn, lr in zip(self.lr_lambdas, self.get_last_lr())]
        return self.get_last_lr()


class ConstantLR(LRScheduler):
    """lr times ``factor`` until epoch ``total_iters``, then the base lr again."""

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5):
        if not 0 <= factor <= 1:
            raise ValueError(f"ConstantLR: argument 'factor' expected a number in [0, 1], got {factor}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer)

    def _lrs(self):
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self.get_last_lr()]
        if self.last_epoch != self.total_iters:
            return self.get_last_lr()
        return [lr * (1.0 / self.factor) for lr in self.get_last_lr()]

    def _closed_form(self):
        factor = self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor)
        return [base * factor for base in self.base_lrs]


class LinearLR(LRScheduler):
    """lr times a factor moving linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` epochs (a
    warmup, with SequentialLR)."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5):  # fmt: skip
        if not 0 < start_factor <= 1:
            raise ValueError(f"LinearLR: argument 'start_factor' expected a number in (0, 1], got {start_factor}")
        if not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: argument 'end_factor' expected a number in [0, 1], got {end_factor}")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer)

    def _lrs(self):
        e, start, end = self.last_epoch, self.start_factor, self.end_factor
        if e == 0:
            return [lr * start for lr in self.get_last_lr()]
        if e > self.total_iters:
            return self.get_last_lr()
        ratio = 1.0 + (end - start) / (self.total_iters * start + (e - 1) * (end - start))
        return [lr * ratio for lr in self.get_last_lr()]

    def _closed_form(self):
        progress = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (self.start_factor + (self.end_factor - self.start_factor) * progress) for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr decayed by ``(1 - epoch / total_iters) ** power`` down to 0 at ``total_iters``."""

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer)

    def _lrs(self):
        e, t = self.last_epoch, self.total_iters
        if e == 0 or e > t:
            return self.get_last_lr()
        decay = ((1.0 - e / t) / (1.0 - (e - 1) / t)) ** self.power
        return [lr * decay for lr in self.get_last_lr()]

    def _closed_form(self):
        return [base * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
                for base in self.base_lrs]  # fmt: skip


class CosineAnnealingWarmRestarts(LRScheduler):
    """A cosine from each base lr down to ``eta_min`` over ``T_0`` epochs, restarting; each period ``T_mult``
    times the last. ``step(epoch)`` takes fractional epochs (``epoch + i / iters``), as torch's."""

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0):  # noqa: N803
        self.T_0 = self.T_i = integer("CosineAnnealingWarmRestarts", "T_0", T_0, at_least=1)
        self.T_mult = integer("CosineAnnealingWarmRestarts", "T_mult", T_mult, at_least=1)
        self.eta_min, self.T_cur = eta_min, -1
        super().__init__(optimizer)

    def step(self, epoch=None) -> None:
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur, self.T_i = self.T_cur - self.T_i, self.T_i * self.T_mult
        elif epoch < 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: expected a non-negative epoch, got {epoch}")
        elif epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult**n
        else:
            self.T_i, self.T_cur = self.T_0, epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self._lrs()):
            group["lr"] = lr

    def _lrs(self):
        cosine = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]


class _Composite(LRScheduler):
    """A scheduler made of others (SequentialLR, ChainedScheduler): its state dict holds theirs under
    ``schedulers.<i>.``, with its own ``last_epoch``."""

    _schedulers: list

    def state_dict(self) -> dict[str, np.ndarray]:
        out = {"last_epoch": np.array(self.last_epoch, dtype=np.int64)}
        for i, scheduler in enumerate(self._schedulers):
            out.update({f"schedulers.{i}.{k}": v for k, v in scheduler.state_dict().items()})
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        where = f"{type(self).__name__}.load_state_dict"
        arrays = _arrays_of(where, state_dict)
        problems: list[str] = []
        last_epoch = _count_from(arrays, "last_epoch", problems)
        if last_epoch is None:
            raise ValueError(f"{where}: " + ("; ".join(problems) or "missing key(s): last_epoch"))
        for i, scheduler in enumerate(self._schedulers):
            prefix = f"schedulers.{i}."
            scheduler.load_state_dict({k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)})
        self.last_epoch = last_epoch


def _same_optimizer(name: str, schedulers: list, optimizer: Optimizer | None) -> Optimizer:
    if not schedulers:
        raise ValueError(f"{name}: expected at least one scheduler")
    chosen: Optimizer = schedulers[0].optimizer if optimizer is None else optimizer
    for k, scheduler in enumerate(schedulers):
        if isinstance(scheduler, ReduceLROnPlateau) or getattr(scheduler, "optimizer", None) is not chosen:
            raise ValueError(
                f"{name}: scheduler {k} ({type(scheduler).__name__}) must be an LRScheduler of the same optimizer"
            )
    return chosen


class SequentialLR(_Composite):
    """``schedulers[k]`` from ``milestones[k - 1]`` on (each restarted at its epoch 0 there), as torch's."""

    def __init__(self, optimizer: Optimizer, schedulers, milestones):
        self._schedulers, self._milestones = list(schedulers), [int(m) for m in milestones]
        self.optimizer = _same_optimizer("SequentialLR", self._schedulers, optimizer)
        if len(self._milestones) != len(self._schedulers) - 1:
            raise ValueError(
                f"SequentialLR: expected {len(self._schedulers) - 1} milestone(s) for {len(self._schedulers)} "
                f"schedulers, got {len(self._milestones)}"
            )
        self.base_lrs = [group["initial_lr"] for group in self.optimizer.param_groups]
        self.last_epoch = 0
        for group in self.optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for scheduler in self._schedulers:  # undo the step each took at construction
            scheduler.last_epoch -= 1
        self._schedulers[0].step()

    def step(self, epoch=None) -> None:
        if epoch is not None:
            raise ValueError("SequentialLR.step: takes no epoch")
        self.last_epoch += 1
        k = bisect.bisect_right(self._milestones, self.last_epoch)
        if k > 0 and self._milestones[k - 1] == self.last_epoch:
            self._schedulers[k].step(0)
        else:
            self._schedulers[k].step()


class ChainedScheduler(_Composite):
    """Every scheduler stepped in turn at each step (their factors compose on the groups' lrs), as torch's."""

    def __init__(self, schedulers, optimizer: Optimizer | None = None):
        self._schedulers = list(schedulers)
        self.optimizer = _same_optimizer("ChainedScheduler", self._schedulers, optimizer)
        self.base_lrs = [group.get("initial_lr", group["lr"]) for group in self.optimizer.param_groups]
        self.last_epoch = 0

    def step(self, epoch=None) -> None:
        if epoch is not None:
            raise ValueError("ChainedScheduler.step: takes no epoch")
        self.last_epoch += 1
        for scheduler in self._schedulers:
            scheduler.step()


class OneCycleLR(LRScheduler):
    """torch's one-cycle policy: from ``max_lr / div_factor`` up to ``max_lr`` over ``pct_start`` of the steps,
    then down to ``initial / final_div_factor`` (cosine or linear); with ``cycle_momentum`` the momentum (SGD) or
    beta1 (Adam) moves the opposite way between ``max_momentum`` and ``base_momentum``."""

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr,
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float = 0.85,
        max_momentum: float = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
    ):
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
            total_steps = epochs * steps_per_epoch
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self.total_steps, self.anneal_strategy, self.cycle_momentum = total_steps, anneal_strategy, cycle_momentum
        groups = optimizer.param_groups
        max_lrs = list(max_lr) if isinstance(max_lr, list | tuple) else [max_lr] * len(groups)
        self.initial_lrs = [m / div_factor for m in max_lrs]
        self.max_lrs, self.min_lrs = max_lrs, [i / final_div_factor for i in self.initial_lrs]
        up = float(pct_start * total_steps) - 1
        top, bottom = max_momentum, base_momentum
        # (end step, start lr, end lr, start momentum, end momentum), torch's phases
        self.phases = [(up, "initial", "max", top, bottom), (total_steps - 1, "max", "min", bottom, top)]
        if three_phase:
            self.phases = [
                (up, "initial", "max", top, bottom),
                (2 * up, "max", "initial", bottom, top),
                (total_steps - 1, "initial", "min", top, top),
            ]
        self.use_beta1 = "betas" in optimizer.defaults
        if cycle_momentum and not self.use_beta1 and "momentum" not in optimizer.defaults:
            raise ValueError("OneCycleLR: cycle_momentum needs an optimizer with momentum or betas")
        for group, lr in zip(groups, self.initial_lrs):
            group["lr"] = group["initial_lr"] = lr  # torch's OneCycleLR sets initial_lr itself
        super().__init__(optimizer)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _lrs(self):
        if self.last_epoch > self.total_steps:
            raise ValueError(f"OneCycleLR: stepped {self.last_epoch} times; total_steps is {self.total_steps}")
        lrs = []
        for k, group in enumerate(self.optimizer.param_groups):
            values = {"initial": self.initial_lrs[k], "max": self.max_lrs[k], "min": self.min_lrs[k]}
            start_step = 0.0
            for i, (end_step, start, end, momentum_start, momentum_end) in enumerate(self.phases):
                if self.last_epoch <= end_step or i == len(self.phases) - 1:
                    pct = (self.last_epoch - start_step) / (end_step - start_step)
                    lrs.append(self._anneal(values[start], values[end], pct))
                    momentum = self._anneal(momentum_start, momentum_end, pct)
                    break
                start_step = end_step
            if self.cycle_momentum:
                if self.use_beta1:
                    group["betas"] = (momentum, *group["betas"][1:])
                else:
                    group["momentum"] = momentum
        return lrs


class ReduceLROnPlateau:
    """Divide the lr by ``1 / factor`` once the metric passed to ``step(metric)`` has not improved for more than
    ``patience`` epochs (torch's rules: relative or absolute ``threshold``, ``cooldown``, ``min_lr``, ``eps``)."""

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr=0.0,
        eps: float = 1e-8,
    ):
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be < 1, got {factor}")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError(
                f"ReduceLROnPlateau: mode must be 'min'/'max' and threshold_mode 'rel'/'abs', got "
                f"{mode!r}, {threshold_mode!r}"
            )
        self.optimizer, self.mode, self.factor, self.patience = optimizer, mode, factor, patience
        self.threshold, self.threshold_mode, self.cooldown, self.eps = threshold, threshold_mode, cooldown, eps
        groups = len(optimizer.param_groups)
        self.min_lrs = list(min_lr) if isinstance(min_lr, list | tuple) else [min_lr] * groups
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs, self.cooldown_counter, self.last_epoch = 0, 0, 0

    def _is_better(self, a: float) -> bool:
        best, t = self.best, self.threshold
        if self.mode == "min":
            return a < (best * (1 - t) if self.threshold_mode == "rel" else best - t)
        return a > (best * (t + 1) if self.threshold_mode == "rel" else best + t)

    def step(self, metrics) -> None:
        current = float(metrics.item() if isinstance(metrics, Tensor) else metrics)
        self.last_epoch += 1
        if self._is_better(current):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, low in zip(self.optimizer.param_groups, self.min_lrs):
                old = float(group["lr"])
                new = max(old * self.factor, low)
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0

    def get_last_lr(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    _COUNTS = ("num_bad_epochs", "cooldown_counter", "last_epoch")

    def state_dict(self) -> dict[str, np.ndarray]:
        """What decides the next reduction: the ``best`` metric so far, the ``num_bad_epochs``,
        ``cooldown_counter`` and ``last_epoch`` counts, and the groups' current ``lrs`` (flat numeric arrays; the
        settings are the constructor's)."""
        return {
            "best": np.array(float(self.best), dtype=np.float64),
            **{name: np.array(getattr(self, name), dtype=np.int64) for name in self._COUNTS},
            "lrs": np.array(self.get_last_lr(), dtype=np.float64),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what ``state_dict()`` returned (and set the groups' lrs); nothing changes unless all fits."""
        where = "ReduceLROnPlateau.load_state_dict"
        arrays = _arrays_of(where, state_dict)
        names = {"best", "lrs", *self._COUNTS}
        if set(arrays) != names:
            raise ValueError(f"{where}: expected the keys {_listing(sorted(names))}, got {_listing(sorted(arrays))}")
        groups = len(self.optimizer.param_groups)
        if arrays["lrs"].shape != (groups,):
            raise ValueError(f"{where}: 'lrs' must hold {groups} learning rate(s), got {_describe(arrays['lrs'])}")
        problems: list[str] = []
        best, problem = _hyper_from_array("best", 0.0, arrays["best"])
        problems += [problem] if problem else []
        counts = [_count_from(arrays, name, problems) for name in self._COUNTS]
        if problems:
            raise ValueError(f"{where}: " + "; ".join(problems))
        bad, cooldown, epoch = counts
        assert best is not None and bad is not None and cooldown is not None and epoch is not None  # else a problem
        self.best, self.num_bad_epochs, self.cooldown_counter, self.last_epoch = best, bad, cooldown, epoch
        for group, lr in zip(self.optimizer.param_groups, arrays["lrs"]):
            group["lr"] = float(lr)
