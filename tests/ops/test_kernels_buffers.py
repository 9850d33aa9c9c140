"""The kernels' reused output buffers (``ops._kernels.buffers``): an array is handed out again only when nothing
else can reach it -- not while a Tensor, a view, a saved value, a gradient or a buffer export holds it -- and
linear's products come from them, so a training step stops faulting fresh pages in every step."""

import gc

import numpy as np
import pytest
from page_faults import faults_per_step

import ops
import tape
from ops._kernels import buffers

SHAPE = (256, 128)  # 128 KiB of float32: kept


@pytest.fixture
def fresh(monkeypatch):
    """An empty set of kept arrays for the test (the process's own are back after)."""
    monkeypatch.setattr(buffers, "_KEPT", {})
    monkeypatch.setattr(buffers, "_kept_bytes", 0)


def test_an_array_comes_back_only_once_nothing_else_refers_to_it(fresh):
    a = buffers.empty(SHAPE, np.float32)
    first = id(a)
    held = [buffers.empty(SHAPE, np.float32)]
    assert id(held[0]) != first  # `a` is still referred to
    view = a.reshape(-1)
    del a
    assert id(buffers.empty(SHAPE, np.float32)) != first  # a view refers to its base
    exported = memoryview(view)
    del view
    assert id(buffers.empty(SHAPE, np.float32)) != first  # a buffer export refers to it
    del exported
    gc.collect()
    again = buffers.empty(SHAPE, np.float32)
    assert id(again) == first and again.flags.writeable and again.flags.c_contiguous


def test_a_tensor_and_its_saved_values_keep_the_array(fresh):
    """y's buffer is not handed out while y lives, nor while only the node that saved it does."""
    rng = np.random.default_rng(0)
    x = tape.tensor(rng.standard_normal((256, 64)), requires_grad=True)
    w = tape.tensor(rng.standard_normal((64, 64)), requires_grad=True)
    y = ops.linear(x, w)
    expected = x.data @ w.numpy().T
    z = ops.sin(y)  # sin saves its input y for the backward
    del y
    for _ in range(3):  # products of the same shape meanwhile: never into y's memory
        buffers.empty((256, 64), np.float64)[...] = np.nan
    z.backward(np.ones(z.shape))
    np.testing.assert_allclose(x.grad.numpy(), np.cos(expected) @ w.numpy(), rtol=1e-12)


def test_small_arrays_and_the_bounds_are_not_kept(fresh, monkeypatch):
    buffers.empty((4, 4), np.float32)
    assert buffers._KEPT == {}
    monkeypatch.setattr(buffers, "PER_SHAPE", 2)
    held = [buffers.empty(SHAPE, np.float32) for _ in range(4)]
    assert len(buffers._KEPT[(SHAPE, np.dtype(np.float32))]) == 2 and len({id(a) for a in held}) == 4


def test_linear_results_are_right_when_their_buffers_are_reused(fresh):
    """The same products in a loop (buffers reused from the second step on) equal numpy's, step after step."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((512, 64))
    w = rng.standard_normal((192, 64))
    b = rng.standard_normal(192)
    for step in range(3):
        xt, wt, bt = (tape.tensor(a * (step + 1), requires_grad=True) for a in (x, w, b))
        y = ops.linear(xt, wt, bt)
        g = rng.standard_normal(y.shape)
        y.backward(g)
        np.testing.assert_allclose(y.numpy(), (x * (step + 1)) @ (w * (step + 1)).T + b * (step + 1), rtol=1e-12)
        np.testing.assert_allclose(xt.grad.numpy(), g @ (w * (step + 1)), rtol=1e-12)
        np.testing.assert_allclose(wt.grad.numpy(), g.T @ (x * (step + 1)), rtol=1e-12)
    assert buffers._KEPT  # the products went through the kept buffers


_LINEARS_LOOP = """
import sys
import numpy as np
import ops, tape
from ops._kernels import buffers
if sys.argv[1] == "fresh":
    buffers.SMALLEST = 1 << 62  # nothing kept: every product a fresh allocation
rng = np.random.default_rng(3)
x = tape.tensor(rng.standard_normal((2048, 64)).astype(np.float32))
w1 = tape.tensor(rng.standard_normal((128, 64)).astype(np.float32), requires_grad=True)
w2 = tape.tensor(rng.standard_normal((64, 128)).astype(np.float32), requires_grad=True)

def step():
    w1.grad = w2.grad = None
    ops.linear(ops.linear(x, w1), w2).sum().backward()

"""


def test_a_training_loop_of_linears_stops_faulting_pages_in():
    """Each step allocates the same products (two linears forward, their input and weight gradients: ~2 MiB). In a
    fresh process with glibc's thresholds pinned, fresh products are faulted in again every step (480 minor page
    faults a step: glibc trims the top of its heap each time); kept, none are. (Run in the test process, the count
    depended on what earlier code had freed: 480 or 0 with tanh between the linears, whose output is fresh.)"""
    assert faults_per_step(_LINEARS_LOOP, "fresh", pinned_malloc=True) > 200  # the measure sees fresh products
    assert faults_per_step(_LINEARS_LOOP, "kept", pinned_malloc=True) < 50


def _row_ops_step(x, w, b, targets):
    """One step of the row ops on leaves made from ``x``, ``w``, ``b``: their values and gradients."""
    leaves = [tape.tensor(a, requires_grad=True) for a in (x, w, b)]
    xt, wt, bt = leaves
    h = ops.gelu(ops.layer_norm(xt, (x.shape[1],), wt, bt), approximate="tanh" if x.dtype == np.float64 else "none")
    loss = ops.cross_entropy(ops.log_softmax(ops.softmax(h, dim=-1) * 4.0, dim=-1), targets)
    loss.backward()
    return [loss.numpy().copy()] + [leaf.grad.numpy().copy() for leaf in leaves]


def test_row_ops_results_are_right_when_their_buffers_are_reused(fresh, monkeypatch):
    """softmax, log_softmax, layer_norm, gelu and cross_entropy give the same values and gradients, bit for bit, step
    after step with their buffers reused as with fresh arrays (nothing kept)."""
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((256, 96)), rng.standard_normal(96), rng.standard_normal(96)
    targets = rng.integers(0, 96, 256)
    reused = [_row_ops_step(x * (step + 1), w, b, targets) for step in range(3)]
    assert buffers._KEPT  # the row ops went through the kept buffers
    monkeypatch.setattr(buffers, "SMALLEST", 1 << 60)
    fresh_arrays = [_row_ops_step(x * (step + 1), w, b, targets) for step in range(3)]
    for got, expected in zip(reused, fresh_arrays):
        for a, e in zip(got, expected):
            assert np.array_equal(a, e)


_ROW_OPS_LOOP = """
import sys
import numpy as np
import ops, tape
from ops._kernels import buffers
if sys.argv[1] == "fresh":
    buffers.SMALLEST = 1 << 62
rng = np.random.default_rng(5)
x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((4096, 512), (512,), (512,)))
targets = rng.integers(0, 512, 4096)

def step():
    xt, wt, bt = (tape.tensor(a, requires_grad=True) for a in (x, w, b))
    h = ops.gelu(ops.layer_norm(xt, (512,), wt, bt))
    ops.cross_entropy(ops.log_softmax(ops.softmax(h, dim=-1) * 4.0, dim=-1), targets).backward()

"""


def test_a_training_loop_of_row_ops_stops_faulting_pages_in():
    """layer_norm, gelu, softmax, log_softmax and cross_entropy at 4096 x 512 float32 (8 MiB arrays): fresh, every
    step faults its outputs and gradients in again (5,600-6,900 minor page faults a step); kept, none (the ops'
    temporaries inside a step still come and go: with glibc's thresholds pinned low they are faulted in too)."""
    assert faults_per_step(_ROW_OPS_LOOP, "fresh", steps=5) > 1000  # the measure sees fresh arrays
    assert faults_per_step(_ROW_OPS_LOOP, "kept", steps=5) < 500
