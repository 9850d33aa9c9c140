"""The process runtime the kernels share: a worker pool that runs independent blocks on threads, and a guard
that makes numpy's BLAS single-threaded while it does.

- ``run(items, work, workers)``: ``work(worker, item)`` for every item on the pool's threads (``worker``: an index
  of this call only), BLAS single-threaded meanwhile; in order on the calling thread when one worker suffices or
  no BLAS can be switched (threadpoolctl finds it). ``threads()``: the threads the kernels may use.
- ``single_threaded_blas()``: the guard, counted across nested and concurrent users.
- ``blas_for(flops)``: the context one GEMM runs in -- BLAS single-threaded below ``gemm_crossover()``, the size
  from which BLAS's own threads win, measured once per process at first use.
- ``best_seconds``: the one timing loop of the kernels' measured-at-first-use choices.

Why a pool rather than BLAS's threads, threadpoolctl, and how the crossover is measured: docs/kernels.md.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tape.checks import integer

__all__ = [
    "run",
    "threads",
    "set_threads",
    "best_seconds",
    "cpu_count",
    "single_threaded_blas",
    "blas_for",
    "gemm_crossover",
]


def run(items, work, workers=None):
    """Call ``work(worker, item)`` for every item, on ``workers`` threads (None: ``threads()``) each taking the
    next item as it frees up, with BLAS single-threaded meanwhile; in order on this thread when one worker
    suffices or no BLAS can be switched. ``worker`` is the thread's index in [0, workers)."""
    workers = min(workers or threads(), len(items))
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


def threads() -> int:
    """The threads the kernels may use: the CPUs this process may run on, capped by the thread count numpy's BLAS
    has now -- the user's budget (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, threadpoolctl's limits; 1 inside
    ``single_threaded_blas``, so a block never starts a pool of its own). 1 without a BLAS that can be switched."""
    blas = single_threaded_blas()
    return 1 if blas is None else max(1, min(cpu_count(), blas.threads()))


def set_threads(n: int) -> None:
    """Let numpy's BLAS (every library threadpoolctl finds) and so the kernels (``threads()``) use ``n`` threads
    (``torch.set_num_threads``). Inside ``single_threaded_blas`` the count applies when the last user leaves."""
    n = integer("set_num_threads", "int", n, at_least=1)
    blas = single_threaded_blas()
    if blas is not None:
        blas.set_threads(n)


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
        self.libraries = list(controller.lib_controllers)  # threadpoolctl's per-library controllers
        self.lock = threading.Lock()
        self.depth = 0
        self.saved: list[int] = []  # each library's thread count before the first user came in

    def threads(self) -> int:
        """The most threads any of the libraries runs with now."""
        return max(lib.num_threads for lib in self.libraries)

    def set_threads(self, n: int) -> None:
        """Every library's thread count set to ``n`` now, or when the last single-threaded user leaves."""
        with self.lock:
            if self.depth:
                self.saved = [n] * len(self.libraries)
            else:
                for lib in self.libraries:
                    lib.set_num_threads(n)

    def __enter__(self):
        with self.lock:
            if self.depth == 0:
                self.saved = [lib.num_threads for lib in self.libraries]
                for lib in self.libraries:
                    lib.set_num_threads(1)
            self.depth += 1
        return self

    def __exit__(self, *exc):
        with self.lock:
            self.depth -= 1
            if self.depth == 0:
                for lib, threads in zip(self.libraries, self.saved):
                    lib.set_num_threads(threads)
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


_NO_GUARD = contextlib.nullcontext()


def blas_for(flops):
    """The context a GEMM of ``flops`` operations (2 m k n) runs in: BLAS single-threaded below
    ``gemm_crossover()``, nothing changed at or above it."""
    if flops >= gemm_crossover():
        return _NO_GUARD
    return single_threaded_blas() or _NO_GUARD


_CROSSOVER: list[float] = []  # [the measured crossover], once
_CROSSOVER_LOCK = threading.Lock()
_SIDES = (16, 32, 64, 128, 256)  # n of the measured m x n x n GEMMs (m = 8n): 65 KFLOP to 268 MFLOP


def gemm_crossover() -> float:
    """The GEMM size (2 m k n operations) from which BLAS's own threads beat one thread on this machine,
    measured at first use and cached; above the largest size measured when one thread won throughout. 0 (never
    limit) while BLAS runs one thread anyway or cannot be switched."""
    with _CROSSOVER_LOCK:
        if _CROSSOVER:
            return _CROSSOVER[0]
        guard = single_threaded_blas()
        if guard is not None and guard.depth:
            return math.inf  # inside a guard (a worker of ``run``): BLAS is single-threaded anyway; measure later
        if guard is None or guard.threads() <= 1:
            return 0.0  # not cached: BLAS may be given threads later
        _CROSSOVER.append(_measure_crossover(guard))
        return _CROSSOVER[0]


def best_seconds(runs, reps: int, warmup: int = 0) -> list[float]:
    """The fastest of ``reps`` timed calls of each function in ``runs``, in seconds. The calls alternate (each
    round calls every function once), so all of them see the same load; the first ``warmup`` rounds are not
    counted (first calls, pages touched). The one timing loop of the kernels' measured-at-first-use choices."""
    best = [math.inf] * len(runs)
    for round_ in range(warmup + reps):
        for i, run in enumerate(runs):
            start = time.perf_counter()
            run()
            if round_ >= warmup:
                best[i] = min(best[i], time.perf_counter() - start)
    return best


def _single_threaded(guard, fn):
    def run():
        with guard:
            fn()

    return run


def _measure_crossover(guard) -> float:
    """The smallest measured size from which the threads win by 20% on two sizes in a row (one win alone may
    be noise on a busy machine), each the best of 5 runs a side: a crossover measured too low by chance costs
    far more than one too high -- on a loaded 2-core machine an unguarded 2-thread GEMM of the tiny GPT's took
    5-20 ms against 0.3 ms on one thread (best of 3 let that happen in about one process in six)."""
    rng = np.random.default_rng(0)
    wins = []
    for n in _SIDES:
        a = rng.standard_normal((8 * n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        a @ b  # warm-up: BLAS's threads started, pages touched
        product = functools.partial(np.matmul, a, b)
        threaded, single = best_seconds([product, _single_threaded(guard, product)], reps=5)
        wins.append(threaded < 0.8 * single)
        if wins[-2:] == [True, True]:
            return 2.0 * 8 * (n // 2) ** 3
    return 2 * 2.0 * 8 * _SIDES[-1] ** 3
