"""Numerics shared by the op families: ``quiet``, numpy's floating-point warnings off for one call, and
``constant_values``, the one place a rule reads a Tensor's values.

Ops return inf/NaN silently where torch does (overflow, 0/0, log(0)); numpy would warn. Only the forwards and
rules where such values can arise are wrapped.
"""

import functools
from typing import Any

import numpy as np

from tape.state import NUMPY_QUIET, QUIET_MARK, numpy_errors_reset, numpy_errors_set
from tape.tensor_api import values_leave

__all__ = ["quiet", "constant_values"]


def constant_values(x) -> Any:  # an ndarray, or a numpy scalar given as one
    """The values of an array, or of a Tensor that a rule or composite on Tensors (create_graph) takes as a
    constant: index positions, argmax and tie masks, targets, counts. The one place ops read a Tensor's values:
    they are reported as leaving the graph, so tape.onnx.export (and ONNX Runtime's compile) refuses a tensor
    computed from its inputs -- a recorded backward would hold the example's values for every call -- instead of
    baking it."""
    if isinstance(x, np.ndarray | np.generic):
        return x
    values_leave(x, "a rule reading it as a constant")
    return np.asarray(x._data)


def quiet(fn):
    """``fn`` with numpy's floating-point warnings off: overflow, 0/0, log(0) give inf/NaN silently, as torch
    does. For the ops' forwards and rules where such values can arise (elementwise and reduce use it too).

    Setting numpy's context variable directly costs ~0.6 us a call against ~2 us for entering ``np.errstate``
    (which matters for small tensors on the hot path); it is what np.errstate does, and thread- and
    asyncio-safe like it. Other numpy versions use np.errstate's decorator.

    The wrapper carries ``(wrapper, fn)`` under ``QUIET_MARK`` (tape/state.py): when the engine calls a
    registered op's forward or rule, it makes the same switch itself around ``fn`` and skips the wrapper."""
    if numpy_errors_set is None:  # pragma: no cover -- a numpy without the context variable
        return functools.wraps(fn)(np.errstate(all="ignore")(fn))
    ignore, setting, resetting = NUMPY_QUIET, numpy_errors_set, numpy_errors_reset

    @functools.wraps(fn)
    def run(*args, **kwargs):
        token = setting(ignore)
        try:
            return fn(*args, **kwargs)
        finally:
            resetting(token)

    setattr(run, QUIET_MARK, (run, fn))  # the wrapper names itself: a copy by functools.wraps elsewhere does not count
    return run
