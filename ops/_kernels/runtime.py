"""The process runtime the kernels share: a worker pool that runs independent blocks on threads, and a guard
that makes numpy's BLAS single-threaded while it does.

``run(items, work, workers)`` calls ``work(worker, item)`` for every item on ``workers`` threads (None = the
CPUs this process may use). numpy releases the GIL inside BLAS calls and ufuncs, so each thread keeps a core
busy; BLAS runs single-threaded meanwhile -- its own per-call threading is what the pool replaces, and on a
busy machine it waits on descheduled threads. The pool is created once and grows when a call asks for more
threads. Each worker runs in a copy of the caller's context, so context variables (such as the attention
kernels' tuning) read the same inside a block as in the caller.

The BLAS guard uses threadpoolctl rather than calling into OpenBLAS through ctypes: it is a maintained library
that finds whichever BLAS numpy actually loaded (OpenBLAS under any of its symbol prefixes, MKL, BLIS, on any
platform) and knows how to switch each one's thread count; the ctypes lookup it replaces only recognised
OpenBLAS builds listed in Linux's /proc/self/maps. Without a BLAS whose thread count can be switched, ``run``
runs the blocks in order on the calling thread.
"""

from __future__ import annotations

import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["run", "cpu_count", "single_threaded_blas"]


def run(items, work, workers=None):
    """Call ``work(worker, item)`` for every item, on ``workers`` threads (None: ``cpu_count()``) each taking the
    next item as it frees up, with BLAS single-threaded meanwhile; in order on this thread when one worker
    suffices or no BLAS can be switched. ``worker`` is the thread's index in [0, workers)."""
    workers = min(workers or cpu_count(), len(items))
    blas = single_threaded_blas() if workers > 1 else None
    if blas is None:
        for item in items:
            work(0, item)
        return
    queue = iter(items)
    lock = threading.Lock()

    def loop(worker):
        while True:
            with lock:
                item = next(queue, None)
            if item is None:
                return
            work(worker, item)

    with blas:
        pool = _pool(workers)
        futures = [pool.submit(contextvars.copy_context().run, loop, w) for w in range(workers)]
        for f in futures:
            f.result()


def cpu_count():
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


_POOL = None
_POOL_LOCK = threading.Lock()


def _pool(workers):
    """The shared pool, replaced by a larger one when it has fewer than ``workers`` threads."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._max_workers < workers:
            _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="minitape-kernels")
        return _POOL


class _SingleThreadedBlas:
    """Context manager: the BLAS libraries threadpoolctl found run single-threaded inside, their thread counts
    are restored after. Nested and concurrent uses are counted: the first one in limits, the last one out
    restores (a plain ``threadpool_limits`` per caller would let two overlapping callers restore out of order
    and leave BLAS at one thread)."""

    def __init__(self, controller):
        self.controller = controller
        self.lock = threading.Lock()
        self.depth = 0
        self.limiter: Any = None  # threadpoolctl's limiter while inside (threadpoolctl ships no types)

    def __enter__(self):
        with self.lock:
            if self.depth == 0:
                self.limiter = self.controller.limit(limits=1)
            self.depth += 1
        return self

    def __exit__(self, *exc):
        with self.lock:
            self.depth -= 1
            if self.depth == 0:
                self.limiter.restore_original_limits()
                self.limiter = None
        return False


# [the _SingleThreadedBlas, or None when no BLAS was found], looked up once
_BLAS: list[_SingleThreadedBlas | None] = []
_BLAS_LOCK = threading.Lock()


def single_threaded_blas():
    """The guard for the BLAS libraries loaded in this process (numpy's among them), or None if there is none.
    Looked up on first use, when numpy has long loaded its BLAS; threadpoolctl is imported only then."""
    with _BLAS_LOCK:
        if not _BLAS:
            from threadpoolctl import ThreadpoolController

            blas = ThreadpoolController().select(user_api="blas")
            _BLAS.append(_SingleThreadedBlas(blas) if blas.lib_controllers else None)
        return _BLAS[0]
