"""Numerics shared by the op families: ``quiet``, numpy's floating-point warnings off for one call.

Ops return inf/NaN silently where torch does (overflow, 0/0, log(0)); numpy would warn. Only the forwards and
rules where such values can arise are wrapped.
"""

import functools

import numpy as np

__all__ = ["quiet"]

try:  # numpy >= 2 keeps its floating-point error state in this context variable (np.errstate sets it)
    # numpy's stubs omit these private names, which numpy >= 2 defines at runtime (the ImportError fallback covers
    # a numpy without them)
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover -- another numpy: the public (slower) np.errstate decorator
    _extobj_contextvar = None


def quiet(fn):
    """``fn`` with numpy's floating-point warnings off: overflow, 0/0, log(0) give inf/NaN silently, as torch
    does. For the ops' forwards and rules where such values can arise (elementwise and reduce use it too).

    Setting numpy's context variable directly costs ~0.6 us a call against ~2 us for entering ``np.errstate``
    (which matters for small tensors on the hot path); it is what np.errstate does, and thread- and
    asyncio-safe like it. Other numpy versions use np.errstate's decorator."""
    if _extobj_contextvar is None:
        return functools.wraps(fn)(np.errstate(all="ignore")(fn))
    ignore = _make_extobj(all="ignore")
    setting, resetting = _extobj_contextvar.set, _extobj_contextvar.reset

    @functools.wraps(fn)
    def run(*args, **kwargs):
        token = setting(ignore)
        try:
            return fn(*args, **kwargs)
        finally:
            resetting(token)

    return run
