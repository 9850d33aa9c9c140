"""Reliability: memory stays flat over many steps, whether a step uses backward() or a GradientTape.

A non-persistent GradientTape used to keep every saved array alive for as long as the caller kept the loss.
"""

import gc
import tracemalloc

import numpy as np
import pytest

import ops
import tape


def _step(w, use_tape, keep):
    x = np.ones((64, 64))
    if use_tape:
        with tape.GradientTape() as t:
            loss = ops.tanh(ops.matmul(x, w)).sum()
        t.compute_gradients(loss, [w])
    else:
        loss = ops.tanh(ops.matmul(x, w)).sum()
        loss.backward()
        w.grad = None
    keep.append(loss)  # the caller keeps its losses (a common logging pattern)


@pytest.mark.parametrize("use_tape", [False, True], ids=["backward", "GradientTape"])
def test_memory_is_flat_over_500_steps(use_tape):
    w = tape.tensor(np.full((64, 64), 0.01), requires_grad=True, dtype=np.float64)
    keep = []
    for _ in range(20):
        _step(w, use_tape, keep)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(500):
            _step(w, use_tape, keep)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # each step's saved arrays are 3 x 32 KiB; kept, 500 steps would hold ~48 MiB. The loss tensors and
    # their (freed) nodes themselves take well under 2 KiB a step.
    assert grown < 2 * 1024 * 1024, f"grew by {grown / 2**20:.1f} MiB over 500 steps"
