"""What a compiled step's trace (tape/compile.py) asks off its hot path: whether a call would raise on its concrete
integer inputs (indices, targets: values eager's forward checks) before the other inputs have values -- fn must stop
where eager stops --, in words, how a call differs from the plan (for recompile=False's error), and the warning for a
step no plan can replay."""

import warnings

import numpy as np

from .recording import forward_arrays

__all__ = ["fails", "difference", "unplanned"]


def fails(op, arrays, attrs, values, seq_lens) -> bool:
    """``arrays``: per tensor input its array, None, or (shape, dtype) for one without values yet (shown to the op as
    zeros). Only a call given an integer array is tried. A failure the real values would not give costs speed only:
    the caller runs the call eagerly. An op that may draw (``rng``/``generator``) is not tried: it would draw."""
    if not any(type(a) is np.ndarray and a.dtype.kind in "iu" for a in (*arrays, *(values or ()))):
        return False
    if "rng" in op.param_index or "generator" in op.param_index:
        return False
    shown = [np.broadcast_to(np.zeros((), a[1]), a[0]) if type(a) is tuple else a for a in arrays]
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            forward_arrays(op, shown, attrs, None if values is None else list(values), seq_lens)
    except Exception:  # noqa: BLE001 -- eager then raises (or, on the real values, does not) in its own words
        return True
    return False


def difference(key, call) -> str:
    """How a traced call's ``key`` differs from the plan's ``call``."""
    if call is None or key is None:
        return "the plan has no op there" if call is None else "it reads a tensor with a graph made outside fn"
    names = ("the op", "its sequence lengths", "its attributes", "its tensor inputs", "grad mode")
    found = (f"{n} differ: {a!r} now, {b!r} in the plan" for n, a, b in zip(names, key, call.key) if a != b)
    return next(found, "a tape records it or anomaly mode is on, which always run eagerly")


def unplanned(fn, why: str | None, plan=None, plans=()) -> None:
    """Warn (once per fn and reason, by the warnings module's own registry) that no plan can replay ``fn``'s step:
    every call runs eagerly -- eager's numbers, none of compile's speed. ``why``: the reason ``_build`` gave, else
    None; a new ``plan`` with the very calls of one already kept shows the other reason: this call could have
    replayed it but fn made it run eagerly part-way (it read a value it computed), as it will on every call."""
    if why is None and plan is not None and any(_same_calls(plan, p) for p in plans):
        why = (
            "fn reads the values of a tensor it computed on every call (tape.gradients or backward inside fn, "
            ".item(), .numpy(), a bool of a tensor), which runs the rest of the call eagerly"
        )
    if why is not None:
        name = getattr(fn, "__qualname__", type(fn).__name__)
        warnings.warn(
            f"tape.compile: no plan can replay {name}: {why}, so every call runs eagerly (eager's results, no "
            "speed-up; docs/compile.md)",
            RuntimeWarning,
            stacklevel=3,
        )


def _same_calls(a, b) -> bool:
    return len(a.calls) == len(b.calls) and all(x.key == y.key for x, y in zip(a.calls, b.calls))
