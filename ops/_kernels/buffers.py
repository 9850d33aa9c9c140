"""Output buffers the kernels own and reuse: ``empty(shape, dtype)`` is ``np.empty`` that hands back one of its own
earlier arrays of that shape and dtype once nothing else refers to it.

A training step allocates the same large arrays every step (the linears' outputs and gradients). Allocated
fresh, glibc's malloc returns them to the OS when the step frees them (it trims the top of its heap once about
twice its largest recent array lies free there) and the next step faults every page in again: the tiny GPT step
of benchmarks/bench_train_step.py took over 1,000 minor page faults a step so. Kept here, they stay mapped and
the next step writes into them. This does not change malloc's settings (``tape.keep_freed_memory`` is the
process-wide opt-in that does): only arrays made by ``empty`` are kept.

An array is handed out again only when its reference count shows that only this module holds it: any Tensor,
view (a view refers to its base), saved value, gradient, buffer export or user variable that can still reach the
memory holds a reference, so no one can see the array being overwritten. Arrays below ``SMALLEST`` bytes are
not kept (malloc reuses small chunks without faults anyway); at most ``PER_SHAPE`` arrays are kept per shape and
dtype and ``KEPT_BYTES`` in all, so the memory kept is bounded: past those, ``empty`` allocates as numpy does.
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np

__all__ = ["empty", "SMALLEST", "PER_SHAPE", "KEPT_BYTES"]

SMALLEST = 64 << 10  # bytes: smaller arrays are not kept
PER_SHAPE = 16  # arrays kept per (shape, dtype)
KEPT_BYTES = 64 << 20  # bytes kept in all

_KEPT: dict[tuple, list[np.ndarray]] = {}
_LOCK = threading.Lock()
_kept_bytes = 0


def _unreferenced(kept: list, free: int) -> np.ndarray | None:
    """The first array of ``kept`` that only ``kept`` refers to (its reference count is ``free``), or None."""
    for array in kept:
        if sys.getrefcount(array) <= free:
            return array
    return None


def _free_count() -> int:
    """The reference count ``_unreferenced`` sees for an array only its list holds (the list's reference, the
    loop's and the call's argument: 3 on CPython 3.11), measured the same way rather than assumed."""
    counts = []
    probe = [np.empty(0)]
    for array in probe:
        counts.append(sys.getrefcount(array))
    return counts[0]


_FREE = _free_count()


def empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """A writable C-contiguous array of ``shape`` (a tuple of ints) and ``dtype``, contents arbitrary: one this
    module made before that nothing else refers to any more, or a new one (kept for reuse when large enough and
    within the bounds)."""
    global _kept_bytes
    dtype = np.dtype(dtype)
    nbytes = dtype.itemsize * math.prod(shape)
    if nbytes < SMALLEST:
        return np.empty(shape, dtype)
    key = (shape, dtype)
    with _LOCK:
        kept = _KEPT.setdefault(key, [])
        array = _unreferenced(kept, _FREE)
        if array is not None:
            array.setflags(write=True)  # a Tensor froze it; it owns its memory, and no one else sees it now
            return array
        array = np.empty(shape, dtype)
        if len(kept) < PER_SHAPE and _kept_bytes + nbytes <= KEPT_BYTES:
            kept.append(array)
            _kept_bytes += nbytes
        return array
