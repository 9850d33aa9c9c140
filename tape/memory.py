"""The process's memory policy: one documented opt-in, never taken by minitape itself.

``keep_freed_memory()`` asks glibc's malloc to keep freed memory for reuse (no mmap per large array, no trimming
of the heap) instead of returning it to the OS, so a training loop that allocates the same large temporaries
every step stops faulting their pages in again (the tiny GPT step of benchmarks/bench_train_step.py took ~2,100
minor page faults per step without it, before the kernels kept their GEMM outputs: ops/_kernels/buffers.py). It
changes the allocator of the whole process, for every library in it, which is why it is the caller's choice: call
it once at the start of a training script.
"""

from __future__ import annotations

import ctypes

__all__ = ["keep_freed_memory"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def keep_freed_memory(largest_array: int = 64 << 20, kept: int = 512 << 20) -> bool:
    """Opt-in: glibc's malloc serves arrays up to ``largest_array`` bytes from its heap instead of a fresh mmap
    each, and returns freed memory to the OS only beyond ``kept`` bytes free at the top of the heap. For the
    whole process, until it exits. Returns False (and changes nothing) where the C library is not glibc."""
    if not (0 < largest_array <= kept <= 2**31 - 1):
        raise ValueError(
            f"keep_freed_memory: arguments expected 0 < largest_array <= kept <= 2**31 - 1 bytes, "
            f"got largest_array={largest_array}, kept={kept}"
        )
    try:
        libc = ctypes.CDLL(None)  # the symbols already loaded in this process: its C library's among them
    except OSError:  # Windows
        return False
    if not hasattr(libc, "mallopt") or not hasattr(libc, "gnu_get_libc_version"):
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, largest_array)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, kept))
