"""Reliability: grad mode, anomaly mode, recording tapes and watched tensors are per thread.

Barriers force the interleavings that used to go wrong: ``no_grad()`` in one thread dropping gradient terms
in another, overlapping ``no_grad()`` blocks leaving grad mode off for the process, two threads crashing on
their own GradientTapes.
"""

import threading

import numpy as np
from threads import run_in_threads

import ops
import tape


def test_no_grad_in_one_thread_does_not_drop_gradients_in_another():
    barrier = threading.Barrier(2, timeout=30)
    x = tape.tensor(np.arange(3.0), requires_grad=True, dtype=np.float64)
    result = {}

    def quiet():
        with tape.no_grad():
            barrier.wait()  # the other thread computes while this one is inside no_grad
            barrier.wait()

    def train():
        barrier.wait()
        y = (x * x).sum()
        result["grad_fn"] = y.grad_fn
        barrier.wait()

    run_in_threads(quiet, train)
    assert result["grad_fn"] is not None


def test_overlapping_no_grad_blocks_restore_grad_mode_everywhere():
    barrier = threading.Barrier(2, timeout=30)

    def block(first):
        def run():
            if first:
                with tape.no_grad():
                    barrier.wait()  # both inside
                    barrier.wait()  # the other leaves first
                barrier.wait()
            else:
                with tape.no_grad():
                    barrier.wait()
                barrier.wait()
                barrier.wait()
            assert tape.is_grad_enabled()
        return run

    run_in_threads(block(True), block(False))
    assert tape.is_grad_enabled()


def test_a_new_thread_starts_with_grad_mode_on_and_no_tapes():
    seen = {}
    with tape.no_grad(), tape.ExecutionTape():
        t = threading.Thread(target=lambda: seen.update(grad=tape.is_grad_enabled(),
                                                         tapes=len(tape.state.STATE.recording_tapes)))
        t.start()
        t.join()
    assert seen == {"grad": True, "tapes": 0}


def _train_alone(seed, steps, barrier=None):
    rng = np.random.default_rng(seed)
    w = tape.tensor(rng.standard_normal((4, 3)), requires_grad=True, dtype=np.float64)
    x = rng.standard_normal((5, 4))
    grads = []
    for _ in range(steps):
        with tape.GradientTape() as t:
            if barrier is not None:
                barrier.wait()  # both threads record at the same time
            loss = (ops.tanh(ops.matmul(x, w)) ** 2).mean()
            if barrier is not None:
                barrier.wait()
        g = t.compute_gradients(loss, [w])[0]
        grads.append(g.numpy().copy())
        w = tape.tensor(w.numpy() - 0.1 * g.numpy(), requires_grad=True, dtype=np.float64)
    return grads


def test_two_threads_training_with_gradient_tapes_get_what_each_gets_alone():
    alone = [_train_alone(1, 5), _train_alone(2, 5)]
    barrier = threading.Barrier(2, timeout=30)
    together = {}
    run_in_threads(lambda: together.update(a=_train_alone(1, 5, barrier)),
                    lambda: together.update(b=_train_alone(2, 5, barrier)))
    for mine, theirs in zip(alone, (together["a"], together["b"])):
        for g1, g2 in zip(mine, theirs):
            np.testing.assert_array_equal(g1, g2)


def test_watch_in_one_thread_does_not_make_another_threads_tensor_differentiable():
    barrier = threading.Barrier(2, timeout=30)
    x = tape.tensor(np.ones(3), dtype=np.float64)
    seen = {}

    def watcher():
        with tape.GradientTape() as t:
            t.watch(x)
            barrier.wait()
            barrier.wait()

    def other():
        barrier.wait()
        seen["node"] = ops.exp(x).grad_fn
        barrier.wait()

    run_in_threads(watcher, other)
    assert seen["node"] is None


def test_anomaly_mode_is_per_thread():
    barrier = threading.Barrier(2, timeout=30)
    seen = {}

    def detecting():
        with tape.detect_anomaly():
            barrier.wait()
            barrier.wait()

    def plain():
        barrier.wait()
        seen["out"] = ops.log(tape.tensor(np.array([-1.0]))).numpy().copy()  # NaN, no AnomalyError here
        barrier.wait()

    run_in_threads(detecting, plain)
    assert np.isnan(seen["out"]).all()
