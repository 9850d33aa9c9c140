"""The arrays the kernels own and reuse, in two kinds:

- ``empty(shape, dtype)``: a kernel's output (a Tensor's data, a gradient), ``np.empty`` that hands back one of
  its own earlier arrays of that shape and dtype once its reference count shows nothing else refers to it. At
  most ``PER_SHAPE`` arrays per shape and dtype and ``KEPT_BYTES`` in all; arrays below ``SMALLEST`` bytes are
  not kept.
- ``Scratch()``: a kernel's temporaries (column matrices, score tiles, a block's passes), one array per name and
  dtype per thread, reused by the thread's later requests while the thread and the object live; two threads
  never share one. The kernel holds one per call (attention, flat blocks) or one for the process (conv).
  ``SCRATCH_BYTES`` bounds what one thread keeps in one object.

Why they are kept, and the measurements behind each kernel's choice: docs/kernels.md.
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np

__all__ = ["empty", "Scratch", "SMALLEST", "PER_SHAPE", "KEPT_BYTES", "SCRATCH_BYTES"]

SMALLEST = 64 << 10  # bytes: smaller arrays are not kept
PER_SHAPE = 16  # arrays kept per (shape, dtype)
KEPT_BYTES = 64 << 20  # bytes kept in all
SCRATCH_BYTES = 32 << 20  # bytes one thread keeps in one Scratch; a larger array is made for its one use

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


class Scratch:
    """A kernel's temporaries (column matrices, score tiles, a block's passes): ``scratch(name, shape, dtype)`` is
    the calling thread's array ``name`` of that dtype -- the one its last request got when it is large enough
    (its contents are the caller's until that thread's next request of the name), else a new one. Threads never
    share an array. An array lives while both its thread and this object do: a kernel holds one object per call
    or one for the process (docs/kernels.md). Past ``SCRATCH_BYTES`` on one thread the least recently used arrays
    are dropped (whoever still uses one keeps it by its reference), and a larger array is made for its one use."""

    def __init__(self):
        self.local = threading.local()  # .arrays: this thread's _ThreadArrays

    def __call__(self, name: str, shape: tuple[int, ...], dtype, zeros=None) -> np.ndarray:
        """The calling thread's C-contiguous ``shape`` array ``name`` of ``dtype``, contents arbitrary -- except with
        ``zeros`` (a hashable description of which entries the caller writes): every other entry is 0, the array
        being zeroed whenever (shape, zeros) differs from its last request's."""
        try:
            arrays = self.local.arrays
        except AttributeError:
            arrays = self.local.arrays = _ThreadArrays()
        return arrays.get((name, dtype), shape, zeros)


class _ThreadArrays:
    """One thread's arrays of a ``Scratch``: (name, dtype) -> [flat array, (shape, zeros) of the request it is
    zeroed for or None, the last view handed out], least recently used first."""

    def __init__(self):
        self.arrays: dict[tuple, list] = {}
        self.nbytes = 0

    def get(self, key: tuple, shape: tuple[int, ...], zeros) -> np.ndarray:
        written = None if zeros is None else (shape, zeros)  # what the zeros are known for
        entry = self.arrays.pop(key, None)
        if entry is not None and entry[2].shape == shape and entry[1] == written:  # the last request's again
            self.arrays[key] = entry
            return entry[2]
        if entry is not None:
            self.nbytes -= entry[0].nbytes
        size = math.prod(shape)
        if entry is None or entry[0].size < size:
            entry = None  # the old array goes before the new one comes (unless the caller still holds it)
            entry = [(np.empty if zeros is None else np.zeros)(max(size, 1), key[1]), written, None]
        elif written is not None and entry[1] != written:
            entry[0][:size] = 0
            entry[1] = written
        else:
            entry[1] = written  # None: the caller may write anywhere, so no entry is known to be 0 any more
        entry[2] = entry[0][:size].reshape(shape)
        self.keep(key, entry)
        return entry[2]

    def keep(self, key: tuple, entry: list) -> None:
        """Keep ``entry`` as the most recently used, dropping the least recently used ones while the total
        would exceed ``SCRATCH_BYTES``; an array larger than that is not kept."""
        nbytes = entry[0].nbytes
        if nbytes > SCRATCH_BYTES:
            return
        while self.arrays and self.nbytes + nbytes > SCRATCH_BYTES:
            self.nbytes -= self.arrays.pop(next(iter(self.arrays)))[0].nbytes
        self.arrays[key] = entry
        self.nbytes += nbytes
