"""The kernels' scratch (``ops._kernels.buffers.Scratch``) and the kernels that use it: one array per name and
dtype per thread, handed back to the same thread's next request, never to another thread nor another Scratch;
``zeros`` keeps the entries a caller does not write at 0; a thread's total stays within ``SCRATCH_BYTES``. Two
user threads running the same kernels at once (SDPA's tiles, softmax's blocks, conv2d's columns, gelu's flat
blocks) each get the result they get alone."""

import threading

import numpy as np
import pytest
from threads import run_in_threads

import ops
import tape
from ops._kernels import buffers, flash, rowwise
from ops._kernels import conv as conv_kernels


def in_thread(fn):
    """fn() on a new thread, its result (or its exception raised here)."""
    box = {}

    def run():
        try:
            box["result"] = fn()
        except BaseException as e:  # noqa: BLE001 -- raised below
            box["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    if "error" in box:
        raise box["error"]
    return box["result"]


def test_a_thread_gets_its_array_back_and_no_other_thread_or_scratch_does():
    scratch = buffers.Scratch()
    a = scratch("a", (4, 8), np.float32)
    assert a.shape == (4, 8) and a.dtype == np.float32 and a.flags.c_contiguous and a.flags.writeable
    assert np.shares_memory(scratch("a", (2, 16), np.float32), a)  # same size: the same memory
    assert np.shares_memory(scratch("a", (3,), np.float32), a)  # smaller: a part of it
    assert not np.shares_memory(scratch("b", (4, 8), np.float32), a)  # another name
    assert not np.shares_memory(scratch("a", (4, 8), np.float64), a)  # another dtype
    assert not np.shares_memory(in_thread(lambda: scratch("a", (4, 8), np.float32)), a)  # another thread
    assert not np.shares_memory(buffers.Scratch()("a", (4, 8), np.float32), a)  # another Scratch's
    bigger = scratch("a", (5, 8), np.float32)  # larger: a new array, handed back from now on
    assert bigger.shape == (5, 8) and np.shares_memory(scratch("a", (5, 8), np.float32), bigger)


def test_zeros_hold_for_the_entries_the_caller_does_not_write():
    """With ``zeros``, every entry the caller has not written since the array was zeroed for that request is 0:
    the same request keeps what the caller wrote (it writes it again), another one or a request without
    ``zeros`` in between zeroes it again."""
    scratch = buffers.Scratch()
    a = scratch("z", (3, 4), np.float64, zeros="diagonal")
    assert not a.any()
    np.fill_diagonal(a, 7.0)
    again = scratch("z", (3, 4), np.float64, zeros="diagonal")
    assert np.shares_memory(again, a) and np.array_equal(again, np.eye(3, 4) * 7)
    assert not scratch("z", (3, 4), np.float64, zeros="first row").any()  # another layout
    scratch("z", (3, 4), np.float64)[...] = 5.0  # no zeros asked: the caller may write anywhere
    assert not scratch("z", (3, 4), np.float64, zeros="first row").any()
    scratch("z", (3, 4), np.float64, zeros="first row")[0] = 1.0
    smaller = scratch("z", (2, 4), np.float64, zeros="first row")  # the same key for another shape
    assert np.shares_memory(smaller, a) and not smaller.any()


def test_a_threads_scratch_stays_within_its_bound(monkeypatch):
    """Past ``SCRATCH_BYTES`` the least recently used arrays are dropped; an array larger than the bound is
    made for its one use and not kept."""
    monkeypatch.setattr(buffers, "SCRATCH_BYTES", 1000)
    scratch = buffers.Scratch()
    a = scratch("a", (50,), np.float64)  # 400 bytes
    b = scratch("b", (50,), np.float64)
    assert np.shares_memory(scratch("a", (50,), np.float64), a)  # a: used last
    kept = scratch.local.arrays  # this thread's
    scratch("c", (50,), np.float64)  # 1200 bytes in all: b, the least recently used, goes
    assert kept.nbytes == 800 and [name for name, _ in kept.arrays] == ["a", "c"]
    assert not np.shares_memory(scratch("b", (50,), np.float64), b)  # a new b; a goes
    assert kept.nbytes == 800 and [name for name, _ in kept.arrays] == ["c", "b"]
    huge = scratch("huge", (200,), np.float64)  # 1600 bytes: never kept
    assert not np.shares_memory(scratch("huge", (200,), np.float64), huge)
    assert kept.nbytes == 800 and "huge" not in [name for name, _ in kept.arrays]


# -- two user threads in the same kernels at once -----------------------------------------------------------
def case(inputs, upstream, ours, theirs):
    """(step, torch_step): each runs its framework's forward ``ours(*tensors)`` / ``theirs(torch, *tensors)`` on
    fresh leaves of the ``inputs`` arrays and the backward of ``upstream``: [output, input gradients]."""

    def step():
        leaves = [tape.tensor(a, requires_grad=True) for a in inputs]
        y = ours(*leaves)
        y.backward(upstream)
        return [y.numpy()] + [t.grad.numpy() for t in leaves]

    def torch_step(torch):
        leaves = [torch.tensor(a, requires_grad=True) for a in inputs]
        y = theirs(torch, *leaves)
        y.backward(torch.from_numpy(upstream))
        return [y.detach().numpy()] + [t.grad.numpy() for t in leaves]

    return step, torch_step


def sdpa(rng, workers):
    def ours(q, k, v):
        with flash.tuning(whole_problem_scores=0, block_rows=64, block_keys=64, workers=workers):
            return ops.scaled_dot_product_attention(q, k, v, is_causal=True)

    def theirs(torch, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    shape = (1, 2, 256, 32)
    return case([rng.standard_normal(shape) for _ in "qkv"], rng.standard_normal(shape), ours, theirs)


def softmax(rng):
    x = rng.standard_normal((64, 300))
    return case([x], rng.standard_normal(x.shape), lambda x: ops.softmax(x, dim=-1), lambda t, x: t.softmax(x, -1))


def conv2d(rng):
    x, w = rng.standard_normal((3, 4, 12, 10)), rng.standard_normal((5, 4, 3, 3))
    return case(
        [x, w],
        rng.standard_normal((3, 5, 12, 10)),
        lambda x, w: ops.conv2d(x, w, padding=1),
        lambda torch, x, w: torch.nn.functional.conv2d(x, w, padding=1),
    )


def gelu(rng):
    x = rng.standard_normal(5 * rowwise.flat_block_elements() + 7)  # float64 tanh gelu: flat blocks, 4 scratch arrays
    return case(
        [x],
        rng.standard_normal(x.shape),
        lambda x: ops.gelu(x, approximate="tanh"),
        lambda torch, x: torch.nn.functional.gelu(x, approximate="tanh"),
    )


KERNELS = {
    "sdpa tiles, one worker": lambda rng: sdpa(rng, 1),
    "sdpa tiles, pool": lambda rng: sdpa(rng, 2),
    "softmax blocks": softmax,
    "conv2d columns, bands": conv2d,
    "gelu flat blocks": gelu,
}


@pytest.fixture
def many_blocks(monkeypatch):
    """Each call cut into many blocks run on the calling thread (conv2d in bands of rows, softmax in blocks of a
    few rows, gelu's flat blocks in order), so that both threads are inside the kernels most of the time."""
    monkeypatch.setattr(conv_kernels, "BLOCK_BYTES", 1 << 10)
    monkeypatch.setattr(conv_kernels, "_workers", lambda flops: 1)
    monkeypatch.setattr(rowwise, "BLOCK_ELEMENTS", 1 << 11)
    monkeypatch.setattr(rowwise, "POOL_BLOCKS", 1 << 30)


@pytest.mark.parametrize("kernel", KERNELS)
def test_two_threads_in_the_same_kernel_each_get_their_own_result(torch, many_blocks, kernel):
    """Each thread runs its own problem 8 times while the other runs its own: every result is bit for bit the
    one the problem gives alone (which is torch's, within float64 rounding), whatever the other thread's
    kernels wrote into their scratch meanwhile. With the pool (``workers=2``) the tiles' gradient additions
    may come in another order: there within 1e-12."""
    steps = [KERNELS[kernel](np.random.default_rng(seed)) for seed in (1, 2)]
    alone = [step() for step, _ in steps]
    for (_, torch_step), ours in zip(steps, alone):
        for a, e in zip(ours, torch_step(torch)):
            np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-12)
    barrier = threading.Barrier(2, timeout=30)
    seen: list[list] = [[], []]

    def worker(i):
        barrier.wait()
        for _ in range(8):
            seen[i].append(steps[i][0]())

    run_in_threads(lambda: worker(0), lambda: worker(1))
    exact = "pool" not in kernel
    for i in range(2):
        assert len(seen[i]) == 8
        for results in seen[i]:
            for a, e in zip(results, alone[i]):
                if exact:
                    assert np.array_equal(a, e), f"{kernel}, thread {i}: max diff {np.max(np.abs(a - e))}"
                else:
                    np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-14)
