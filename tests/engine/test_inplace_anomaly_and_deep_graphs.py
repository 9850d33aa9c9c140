"""Reliability promises of the engine: in-place safety, anomaly detection, memory release, deep graphs.

- In-place safety: tensor arrays are read-only; ``t.data = new`` bumps a version and a backward through
  an op that recorded the older version raises InPlaceModificationError.
- ``detect_anomaly()``: NaN/inf in a forward output or a backward result raises naming the op and the
  line of user code (this file) that recorded it.
- Memory: a backward without retain_graph frees the graph's saved arrays, so a 200-step training loop
  that keeps every loss tensor alive does not grow; the control run with retain_graph=True does.
- Depth: a 100,000-op chain and a 1,000-layer network run forward and backward (no recursion), with
  gradients checked against the closed form and against PyTorch.
"""

from __future__ import annotations

import gc
import inspect
import tracemalloc
import weakref

import numpy as np
import pytest
from oracle import require_torch

import ops
import tape


def _line_after() -> int:
    """The line number just after the caller's current line (where the op under test is called)."""
    return inspect.currentframe().f_back.f_lineno + 1


# -- in-place safety ----------------------------------------------------------------------------------------
def test_leaf_output_and_saved_arrays_are_read_only():
    source = np.array([0.5, 1.0, 2.0])
    x = tape.tensor(source, requires_grad=True)
    source[0] = 100.0  # tensor() copied: the leaf does not see later changes to the caller's array
    assert x.numpy()[0] == 0.5
    y = ops.exp(x)
    for array in (x.numpy(), y.numpy(), x.detach().numpy(), np.asarray(y.detach()), x.numpy()):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 0.0
    y.data += 1.0  # torch's .data: in place, outside the graph; exp's saved output keeps its values
    np.testing.assert_allclose(y.numpy(), np.exp([0.5, 1.0, 2.0]) + 1.0, rtol=1e-15)
    ops.sum(y).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, 1.0, 2.0]), rtol=1e-15)


def test_the_read_only_flag_cannot_be_switched_back_on():
    x = tape.tensor(np.ones(3), requires_grad=True)
    y = ops.exp(x)
    for array in (x.numpy(), y.numpy(), x.numpy()):
        with pytest.raises(ValueError):
            array.flags.writeable = True


def test_a_new_value_for_a_saved_leaf_makes_backward_raise_naming_the_op_and_input():
    x = tape.tensor(np.array([0.5, 1.0]), requires_grad=True)
    w = tape.tensor(np.array([2.0, 3.0]), requires_grad=True)
    loss = ops.sum(ops.mul(x, ops.tanh(w)))
    x.data = np.array([1.5, 2.5])
    with pytest.raises(tape.InPlaceModificationError, match=r"op 'mul': input 'a' .*version 0 -> 1"):
        loss.backward()


def test_updating_parameters_after_backward_then_recomputing_is_fine():
    w = tape.tensor(np.array([1.0, -1.0]), requires_grad=True)
    for _ in range(3):
        loss = ops.sum(ops.mul(w, w))
        loss.backward()
        w.data = w.numpy() - 0.25 * w.grad.numpy()  # the version bump is harmless: the next forward records it
        w.zero_grad()
    np.testing.assert_allclose(w.numpy(), np.array([1.0, -1.0]) * 0.5 ** 3, rtol=1e-15)


def test_a_new_value_for_a_saved_intermediate_makes_backward_raise():
    x = tape.tensor(np.array([0.5, 1.0]), requires_grad=True)
    y = ops.exp(x)
    loss = ops.sum(ops.mul(y, y))
    y.data = np.zeros(2)
    with pytest.raises(tape.InPlaceModificationError, match="op 'mul'"):
        loss.backward()


def test_a_new_value_for_a_saved_constant_makes_backward_raise():
    x = tape.tensor(np.array([0.5, 1.0]), requires_grad=True)
    w = tape.tensor(np.array([2.0, 3.0]))
    loss = ops.sum(ops.mul(x, w))
    w.data = np.zeros(2)
    with pytest.raises(tape.InPlaceModificationError, match="op 'mul': input 'b'"):
        loss.backward()


# -- anomaly detection --------------------------------------------------------------------------------------
def test_without_anomaly_detection_nan_flows_silently():
    x = tape.tensor(np.array([-1.0, 2.0]), requires_grad=True)
    with np.errstate(invalid="ignore"):
        loss = ops.sum(ops.log(x))
        loss.backward()
    assert np.isnan(loss.item())


def test_anomaly_in_a_forward_names_the_op_and_the_recording_line():
    x = tape.tensor(np.array([-1.0, 2.0]), requires_grad=True)
    with tape.detect_anomaly(), np.errstate(invalid="ignore"):
        y = ops.tanh(x)  # finite: passes
        with pytest.raises(tape.AnomalyError) as info:
            line = _line_after()
            ops.log(y)
    message = str(info.value)
    assert "op 'log'" in message and "NaN" in message and "from finite inputs" in message
    assert f"{__file__}:{line}" in message
    assert not tape.state.STATE.anomaly  # the context manager restored the switch


def test_anomaly_in_a_backward_names_the_op_and_the_recording_line():
    x = tape.tensor(np.array([0.0, 4.0]), requires_grad=True)
    with tape.detect_anomaly(), np.errstate(divide="ignore"):
        line = _line_after()
        root = ops.pow(x, 0.5)  # finite forward; d/dx x**0.5 = inf at 0
        loss = ops.sum(root)
        with pytest.raises(tape.AnomalyError) as info:
            loss.backward()
    message = str(info.value)
    assert "backward of op 'pow'" in message and "inf" in message and "input 'a'" in message
    assert f"{__file__}:{line}" in message


def test_anomaly_through_operators_reports_the_user_line_not_the_engine():
    x = tape.tensor(np.array([1.0, 0.0]), requires_grad=True)
    with tape.detect_anomaly(), np.errstate(divide="ignore"):
        with pytest.raises(tape.AnomalyError) as info:
            line = _line_after()
            _ = 1.0 / x  # Tensor.__rtruediv__ lives in tape/; the reported frame is this line
    assert "op 'div'" in str(info.value) and f"{__file__}:{line}" in str(info.value)


# -- memory -------------------------------------------------------------------------------------------------
def test_backward_releases_the_saved_arrays_of_a_graph_kept_alive():
    x = tape.tensor(np.random.default_rng(0).standard_normal((64, 64)), requires_grad=True)
    hidden = ops.exp(ops.tanh(x))
    array = hidden.numpy()
    saved = weakref.ref(array if array.base is None else array.base)  # the memory, not a view of it
    del array
    loss = ops.sum(ops.mul(hidden, hidden))
    del hidden
    gc.collect()
    assert saved() is not None  # the graph holds it for the backward
    loss.backward()
    gc.collect()
    assert saved() is None  # released although `loss` (and so the graph) is still alive


def _training_loop(steps: int, retain_graph: bool) -> tuple[int, int]:
    """A 2-layer MLP trained by SGD for ``steps`` steps, keeping every loss tensor (and so every graph)
    alive as a careless user logging losses would. Returns traced memory after step 10 and at the end."""
    rng = np.random.default_rng(0)
    w1 = tape.tensor(rng.standard_normal((32, 128)) * 0.1, requires_grad=True)
    w2 = tape.tensor(rng.standard_normal((128, 1)) * 0.1, requires_grad=True)
    inputs = rng.standard_normal((64, 32))
    targets = rng.standard_normal((64, 1))
    losses = []
    gc.collect()
    tracemalloc.start()
    try:
        early = 0
        for step in range(steps):
            hidden = ops.tanh(ops.matmul(tape.tensor(inputs), w1))  # 64 x 128 float64 = 64 KiB per array
            error = ops.sub(ops.matmul(hidden, w2), tape.tensor(targets))
            loss = ops.mean(ops.mul(error, error))
            loss.backward(retain_graph=retain_graph)
            for w in (w1, w2):
                w.data = w.numpy() - 0.05 * w.grad.numpy()
                w.zero_grad()
            losses.append(loss)
            if step == 10:
                gc.collect()
                early = tracemalloc.get_traced_memory()[0]
        gc.collect()
        late = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert losses[-1].item() < losses[0].item()  # it does train
    return early, late


def test_a_200_step_training_loop_keeping_its_losses_does_not_grow():
    early, late = _training_loop(200, retain_graph=False)
    growth_per_step = (late - early) / 190
    # what remains per step is the kept loss and its graph's bookkeeping (a few KiB); one saved 64 x 128
    # activation alone would be 64 KiB
    assert growth_per_step < 32 * 1024, f"memory grows by {growth_per_step:.0f} bytes per step"


def test_the_memory_measurement_sees_graphs_kept_by_retain_graph():
    early, late = _training_loop(60, retain_graph=True)
    growth_per_step = (late - early) / 50
    assert growth_per_step > 100_000, f"expected the retained graphs to show, got {growth_per_step:.0f} B/step"


# -- deep graphs --------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_100k_op_chain_runs_forward_and_backward_and_frees_without_recursion():
    x = tape.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    y = x
    for _ in range(50_000):
        y = ops.add(ops.mul(y, 1.00001), 1e-6)  # two ops per step: 100,000 ops
    loss = ops.sum(y)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 1.00001 ** 50_000), rtol=1e-10)
    del loss, y
    # a second chain dropped unreleased (no backward): deallocating it must not recurse either
    y = x
    for _ in range(100_000):
        y = ops.mul(y, 1.0)
    del y
    gc.collect()


def test_a_1000_layer_network_matches_torch():
    torch = require_torch()
    rng = np.random.default_rng(0)
    depth, width = 1000, 6
    weights = [np.eye(width) + rng.standard_normal((width, width)) * 0.05 for _ in range(depth)]
    x0 = rng.standard_normal((2, width))
    x = tape.tensor(x0, requires_grad=True)
    ws = [tape.tensor(w, requires_grad=True) for w in weights]
    h = x
    for w in ws:
        h = ops.tanh(ops.matmul(h, w))
    ops.sum(h).backward()

    tx = torch.tensor(x0, requires_grad=True)
    tws = [torch.tensor(w, requires_grad=True) for w in weights]
    th = tx
    for tw in tws:
        th = torch.tanh(th @ tw)
    th.sum().backward()
    np.testing.assert_allclose(h.numpy(), th.detach().numpy(), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-13)
    for k in (0, depth // 2, depth - 1):
        np.testing.assert_allclose(ws[k].grad.numpy(), tws[k].grad.numpy(), rtol=1e-9, atol=1e-13)
