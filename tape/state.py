"""Per-thread engine state: grad mode, anomaly mode, the recording tapes and the watched tensors.

Like PyTorch's grad mode and TensorFlow's tapes, every switch here belongs to the thread that set it:
``no_grad()`` in one thread never drops gradient terms in another, and two threads may each record on
their own ``GradientTape``. A new thread starts with grad mode on, anomaly mode off and no tapes.
"""

from __future__ import annotations

import contextlib
import threading

__all__ = ["STATE", "no_grad", "enable_grad", "is_grad_enabled", "detect_anomaly", "needs_grad"]


class _ThreadState(threading.local):
    def __init__(self):
        self.grad_enabled = True
        self.anomaly = False
        self.recording_tapes = []  # tapes of this thread whose is_recording is True, in start order
        self.watched = set()  # ids of tensors watched by a recording GradientTape of this thread


STATE = _ThreadState()


@contextlib.contextmanager
def _grad_mode(enabled: bool):
    state = STATE
    previous = state.grad_enabled
    state.grad_enabled = enabled
    try:
        yield
    finally:
        state.grad_enabled = previous


def no_grad():
    """Context manager: ops run but record nothing for the reverse pass (tapes still list them)."""
    return _grad_mode(False)


def enable_grad():
    """Context manager: re-enable recording inside a ``no_grad`` block."""
    return _grad_mode(True)


def is_grad_enabled() -> bool:
    return STATE.grad_enabled


@contextlib.contextmanager
def detect_anomaly():
    """Check every forward output and every backward result for NaN/inf; raise naming the op and the
    line of user code that recorded it."""
    state = STATE
    previous = state.anomaly
    state.anomaly = True
    try:
        yield
    finally:
        state.anomaly = previous


def needs_grad(t) -> bool:
    """Whether the reverse pass may want a gradient for tensor ``t``: it requires grad, or a recording
    GradientTape of this thread watches it."""
    if t._requires_grad:
        return True
    watched = STATE.watched
    return bool(watched) and t.id in watched
