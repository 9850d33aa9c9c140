"""Per-thread engine state: grad mode, anomaly mode, the recording tapes and the watched tensors.

Like PyTorch's grad mode and TensorFlow's tapes, every switch here belongs to the thread that set it:
``no_grad()`` in one thread never drops gradient terms in another, and two threads may each record on
their own ``GradientTape``. A new thread starts with grad mode on, anomaly mode off and no tapes.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["STATE", "no_grad", "enable_grad", "is_grad_enabled", "detect_anomaly", "needs_grad", "QUIET_MARK"]


class _ThreadState(threading.local):
    def __init__(self):
        self.grad_enabled = True
        self.anomaly = False
        self.recording_tapes = []  # tapes of this thread whose is_recording is True, in start order
        self.watched = set()  # ids of tensors watched by a recording GradientTape of this thread
        self.tracer = None  # the trace of a compiled step running in this thread (tape/compile.py), if any


STATE = _ThreadState()


@contextlib.contextmanager
def _switch(name: str, value: bool):
    """This thread's switch ``name`` set to ``value`` inside the block, restored after it."""
    previous = getattr(STATE, name)
    setattr(STATE, name, value)
    try:
        yield
    finally:
        setattr(STATE, name, previous)


def _switch_or_decorate(where: str, name: str, value: bool, func):
    """``_switch(name, value)``, or ``func`` run inside it (the bare decorator form ``@no_grad``)."""
    if func is not None and not callable(func):
        raise TypeError(f"{where}: expected a function to decorate (or no argument), got {type(func).__name__}")
    return _switch(name, value) if func is None else _switch(name, value)(func)


def no_grad(func: Callable | None = None):
    """Context manager: ops run but record nothing for the reverse pass (tapes still list them). Also a decorator,
    called or bare (``@no_grad()`` / ``@no_grad``), as torch's."""
    return _switch_or_decorate("no_grad", "grad_enabled", False, func)


def enable_grad(func: Callable | None = None):
    """Context manager: re-enable recording inside a ``no_grad`` block. Also a decorator, called or bare."""
    return _switch_or_decorate("enable_grad", "grad_enabled", True, func)


def is_grad_enabled() -> bool:
    return STATE.grad_enabled


def detect_anomaly():
    """Context manager: check every forward output and every backward result for NaN/inf; raise naming the op and
    the line of user code that recorded it."""
    return _switch("anomaly", True)


def needs_grad(t) -> bool:
    """Whether the reverse pass may want a gradient for tensor ``t``: it requires grad, or a recording
    GradientTape of this thread watches it."""
    if t._requires_grad:
        return True
    watched = STATE.watched
    return bool(watched) and t.id in watched


# -- numpy's floating-point warnings, off for the ops' ``quiet`` forwards and rules ----------------------------------
# ``ops._numerics.quiet`` marks its wrapper with ``(wrapper, function)`` under QUIET_MARK (naming itself: a
# functools.wraps copy is not taken for it); the hot paths call the function between their own
# ``numpy_errors_set(NUMPY_QUIET)`` / ``numpy_errors_reset(token)``: np.errstate's context variable, one frame fewer.
QUIET_MARK = "__minitape_quiet__"
NUMPY_QUIET: Any
numpy_errors_set: Callable[[Any], Any]
numpy_errors_reset: Callable[[Any], None]
try:  # numpy >= 2 keeps its floating-point error state in this context variable (np.errstate sets it)
    # numpy's stubs omit these private names, which numpy >= 2 defines at runtime
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover -- another numpy: ``quiet`` uses np.errstate and marks nothing
    NUMPY_QUIET = None
    numpy_errors_set = numpy_errors_reset = None  # type: ignore[assignment]
else:
    NUMPY_QUIET = _make_extobj(all="ignore")
    numpy_errors_set, numpy_errors_reset = _extobj_contextvar.set, _extobj_contextvar.reset


def unwrapped(fn) -> tuple:
    """``(the function a quiet wrapper runs, True)`` when ``fn`` is such a wrapper, else ``(fn, False)``: what the hot
    paths call, switching numpy's warnings off themselves around a quiet one."""
    mark = getattr(fn, QUIET_MARK, None)
    return (mark[1], True) if type(mark) is tuple and len(mark) == 2 and mark[0] is fn else (fn, False)
