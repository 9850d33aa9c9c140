"""The kernels' runtime: BLAS threads chosen by GEMM size (``runtime.blas_for``, the measured crossover) and the
GEMMs of linear and matmul running under it."""

import math

import numpy as np
import pytest
import threadpoolctl

import ops
import tape
from ops._kernels import runtime


def blas_threads():
    return [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def two_blas_threads():
    """numpy's BLAS at two threads during the test, restored after."""
    if runtime.single_threaded_blas() is None:
        pytest.skip("no BLAS whose thread count threadpoolctl can switch")
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        yield runtime.single_threaded_blas()


@pytest.fixture
def crossover(monkeypatch):
    """Set the measured crossover (operations) for the test; the cached measurement is back after."""

    def set_to(flops):
        monkeypatch.setattr(runtime, "_CROSSOVER", [flops])

    return set_to


def test_the_pool_keeps_to_the_threads_the_user_gave_blas(two_blas_threads, monkeypatch):
    """A user who limits numpy's BLAS to one thread (OMP_NUM_THREADS=1, threadpoolctl) gets single-threaded
    kernels: the pool's default width is BLAS's thread count, not the CPU count (it used to be the CPU count)."""
    import threading
    import time

    monkeypatch.setattr(runtime, "cpu_count", lambda: 4)

    def threads_used():
        seen = set()
        def work(worker, item):
            seen.add((worker, threading.get_ident()))
            time.sleep(0.02)  # long enough that every worker takes an item

        runtime.run(list(range(8)), work)
        return seen

    assert len(threads_used()) == 2  # two BLAS threads, four CPUs: two workers
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        assert runtime.threads() == 1
        assert threads_used() == {(0, threading.get_ident())}  # in order, on the calling thread
    with runtime.single_threaded_blas():  # inside a block: no pool of its own
        assert runtime.threads() == 1


def test_small_gemms_run_single_threaded_and_large_ones_keep_the_threads(two_blas_threads, crossover):
    crossover(1e6)
    with runtime.blas_for(1e6 - 1):
        assert set(blas_threads()) == {1}
    assert 2 in blas_threads()
    with runtime.blas_for(1e6):
        assert 2 in blas_threads()


def test_the_crossover_is_measured_once_and_not_cached_while_it_cannot_be(two_blas_threads, monkeypatch):
    monkeypatch.setattr(runtime, "_CROSSOVER", [])
    with two_blas_threads:  # inside a guard (a worker of run): nothing to measure against
        assert runtime.gemm_crossover() == math.inf
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        assert runtime.gemm_crossover() == 0.0  # one thread anyway: never limit
    assert runtime._CROSSOVER == []
    measured = runtime.gemm_crossover()
    assert measured > 0 and runtime._CROSSOVER == [measured]
    assert 2 in blas_threads()  # the measurement restored the thread count


def test_linear_runs_its_three_gemms_by_size(monkeypatch):
    seen = []
    guard = runtime.blas_for

    def spy(flops):
        seen.append(flops)
        return guard(flops)

    monkeypatch.setattr(runtime, "blas_for", spy)
    rng = np.random.default_rng(0)
    x = tape.tensor(rng.standard_normal((4, 8, 6)), requires_grad=True)
    w = tape.tensor(rng.standard_normal((5, 6)), requires_grad=True)
    ops.linear(x, w).sum().backward()
    assert sorted(seen) == [2 * 32 * 6 * 5] * 3


def test_matmul_by_a_matrix_runs_its_gemms_by_size(monkeypatch):
    seen = []
    guard = runtime.blas_for
    monkeypatch.setattr(runtime, "blas_for", lambda flops: (seen.append(flops), guard(flops))[1])
    rng = np.random.default_rng(1)
    a = tape.tensor(rng.standard_normal((3, 4, 6)), requires_grad=True)
    b = tape.tensor(rng.standard_normal((6, 5)), requires_grad=True)
    ops.matmul(a, b).sum().backward()
    assert sorted(seen) == [2 * 12 * 6 * 5] * 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_with_one_thread_agrees_with_blas_threads(two_blas_threads, crossover, dtype):
    """Equal up to the summation order: OpenBLAS's threaded float32 GEMM may round differently from its
    one-thread GEMM (seen on the Haswell kernel, ~6e-5 relative on sums of 512 products; the SkylakeX kernel
    gave the same bits)."""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(s).astype(dtype) for s in ((16, 32, 64), (256, 64), (256,))]
    g = rng.standard_normal((16, 32, 256)).astype(dtype)

    def run():
        leaves = [tape.tensor(a, requires_grad=True) for a in arrays]
        out = ops.linear(*leaves)
        out.backward(tape.tensor(g))
        return [out.numpy()] + [t.grad.numpy() for t in leaves]

    crossover(math.inf)
    single = run()
    crossover(0.0)
    threaded = run()
    expected = np.einsum("bik,ok->bio", arrays[0].astype(np.float64), arrays[1].astype(np.float64)) + arrays[2]
    np.testing.assert_allclose(single[0], expected, rtol=1e-4 if dtype == np.float32 else 1e-12, atol=1e-4)
    for ours, theirs in zip(single, threaded):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4 if dtype == np.float32 else 1e-13, atol=1e-4)


def test_batched_matmul_runs_its_gemms_by_the_size_of_one(monkeypatch):
    seen = []
    guard = runtime.blas_for
    monkeypatch.setattr(runtime, "blas_for", lambda flops: (seen.append(flops), guard(flops))[1])
    rng = np.random.default_rng(3)
    a = tape.tensor(rng.standard_normal((3, 4, 6)), requires_grad=True)
    b = tape.tensor(rng.standard_normal((3, 6, 5)), requires_grad=True)
    out = ops.matmul(a, b)
    out.sum().backward()
    assert sorted(seen) == [2 * 4 * 6 * 5] * 3
    np.testing.assert_allclose(out.numpy(), np.einsum("bik,bkj->bij", a.numpy(), b.numpy()), rtol=1e-12)


KEEP_FREED_MEMORY_CHILD = """
import resource, sys
import numpy as np
import tape
if sys.argv[1] == "on":
    assert tape.keep_freed_memory()
def step():  # like a training step: many large temporaries live at once, all freed at its end
    live = [np.ones((512, 256), np.float32) for _ in range(16)]  # 512 KiB each: above glibc's mmap threshold
    return float(sum(a[0, 0] for a in live))
for _ in range(3):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 50)
"""


def test_keep_freed_memory_stops_the_page_faults_of_repeated_large_temporaries():
    """In a child process (it changes the allocator of the whole process): 16 fresh 0.5 MiB arrays each step fault
    their pages in with glibc's defaults and not at all once freed memory is kept."""
    import os
    import subprocess
    import sys

    if not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None:
        pytest.skip("glibc only")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))

    def faults(mode):
        run = subprocess.run([sys.executable, "-c", KEEP_FREED_MEMORY_CHILD, mode], env=env, capture_output=True)
        assert run.returncode == 0, run.stderr.decode()
        return float(run.stdout)

    default, kept = faults("off"), faults("on")
    assert default > 100 and kept < 5, (default, kept)


def test_keep_freed_memory_rejects_sizes_it_cannot_set():
    with pytest.raises(ValueError, match="keep_freed_memory: arguments expected .* got largest_array=0"):
        tape.keep_freed_memory(largest_array=0)
    with pytest.raises(ValueError, match="largest_array=2048, kept=1024"):
        tape.keep_freed_memory(largest_array=2048, kept=1024)


@pytest.mark.parametrize(
    "num_weights, shape, padding_idx",
    [(16, (16, 32), None), (16, (16, 32), 3), (1000, (4, 8), None), (5, (3,), -1), (4, (), None), (4, (0, 3), None)],
)
def test_embedding_weight_gradient_sums_the_rows_of_repeated_indices(num_weights, shape, padding_idx):
    """The weight gradient (grouped rows summed by reduceat) against a float64 scatter-add."""
    from ops.embedding import _embedding_dense_backward

    rng = np.random.default_rng(4)
    indices = rng.integers(0, num_weights, shape)
    g = rng.standard_normal(shape + (6,)).astype(np.float32)
    expected = np.zeros((num_weights, 6))
    np.add.at(expected, indices.reshape(-1), g.reshape(-1, 6).astype(np.float64))
    if padding_idx is not None:
        expected[padding_idx] = 0
    ours = _embedding_dense_backward(g, indices, num_weights, padding_idx)
    assert ours.dtype == np.float32 and ours.shape == (num_weights, 6)
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)
