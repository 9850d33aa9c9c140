"""The engine's short paths do what its general paths do (issue #13: the per-op cost of eager mode).

``apply`` takes a short path for one or two tensors (or a tensor and a Python float) passed positionally to an op
with one output; the first-order reverse pass calls an op's rules directly (``Op.direct_rules``), switching numpy's
warnings off itself around the ``quiet`` ones. These tests pin what must not change there:

- values, gradients and recorded nodes equal the general path's (``_apply``, ``visit``), Python scalars included
  (signed zeros and NaN keep their own constants);
- numpy's error state: a quiet rule runs with warnings off, a plain rule and the sums of gradients with the
  user's state, and the user's state is back after a rule raises;
- errors keep their kind and wording (a failing rule names the op and inputs; a failing sum is numpy's error);
- a ``functools.wraps`` copy of a quiet wrapper is not taken for one;
- create_graph differentiates an op's output through its node even when the output tensor is gone;
- ``_node_for``'s inline one- and two-tensor cases equal its general computation (``_needs_of``), and the direct
  first-order walk equals the general ``visit`` bit for bit.
"""

from __future__ import annotations

import functools
import gc

import numpy as np
import pytest

import ops
import tape
from ops._numerics import quiet
from tape.errors import GradientError
from tape.recording import _apply


@pytest.fixture
def throwaway():
    """Register throwaway ops; unregister them afterwards."""
    names = []

    def make(name, **declaration):
        names.append(name)
        return tape.defop(name, family="test", **declaration)

    yield make
    for name in names:
        tape.unregister_op(name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("scalar", [1.01, -0.5, 0.0, -0.0, float("nan"), float("inf"), 3, True])
@pytest.mark.parametrize("scalar_first", [False, True])
def test_short_path_equals_the_general_path_with_scalars(dtype, scalar, scalar_first):
    data = np.array([[0.5, -1.5], [2.0, -0.0]], dtype=dtype)
    for op in (ops.mul, ops.add, ops.sub, ops.div):
        results = []
        for short in (True, False):
            x = tape.tensor(data, requires_grad=True)
            args = (scalar, x) if scalar_first else (x, scalar)
            y = op(*args) if short else _apply(op, args, {})
            y.backward(np.ones(y.shape, y.dtype))
            results.append((y.numpy(), x.grad.numpy(), y.grad_fn.needs, y.dtype))
        (v1, g1, n1, d1), (v2, g2, n2, d2) = results
        assert d1 == d2 == dtype
        np.testing.assert_array_equal(v1, v2)
        np.testing.assert_array_equal(np.signbit(v1), np.signbit(v2))
        np.testing.assert_array_equal(g1, g2)
        assert n1 == n2


def test_short_path_records_the_same_node_fields_as_the_general_path():
    x = tape.tensor(np.array([1.0, 2.0]), requires_grad=True)
    w = tape.tensor(np.array([3.0, 4.0]))
    for make in (lambda: ops.mul(x, w), lambda: _apply(ops.mul, (x, w), {})):
        y = make()
        node = y.grad_fn
        assert node.needs == [True, False]
        assert list(node.parents) == [None, None] and list(node.leaves) == [x, None]
        assert list(node.versions) == [0, 0] and list(node.inputs) == [x, w]
        assert node.out_id == y.id and node.op is ops.mul


def test_short_path_refuses_what_the_general_path_refuses():
    f32 = tape.tensor(np.ones(2, np.float32), requires_grad=True)
    f64 = tape.tensor(np.ones(2, np.float64))
    with pytest.raises(TypeError, match="floating inputs must share one dtype"):
        ops.mul(f32, f64)
    with pytest.raises(TypeError, match="expected a floating tensor"):
        ops.tanh(tape.tensor(np.array([1, 2])))  # the floats-only check still runs for integer input
    with pytest.raises(TypeError, match="expected a number tensor"):
        ops.neg(tape.tensor(np.array([True])))
    assert ops.mul(tape.tensor(np.array([2, 3])), 2.5).dtype == np.float32  # an int tensor and a float: _apply


def test_short_path_under_no_grad_and_watched_tensors():
    x = tape.tensor(np.array([1.0, 2.0]))
    with tape.no_grad():
        assert ops.mul(x, 2.0).grad_fn is None
    with tape.GradientTape() as t:
        t.watch(x)
        y = ops.sum(ops.mul(x, x))
    (gx,) = t.compute_gradients(y, [x])
    np.testing.assert_array_equal(np.asarray(gx), [2.0, 4.0])


def test_quiet_rules_are_quiet_plain_rules_and_sums_see_the_users_error_state(throwaway):
    def plain_rule(g, ans, a, b):
        return g / np.zeros_like(b)  # divides by zero: raises under the user's divide="raise"

    quiet_rule = quiet(lambda g, ans, a, b: g / np.zeros_like(a))
    op = throwaway("hot_mixed_quiet", inputs=("a", "b"), forward=lambda a, b: a * b, vjps=(quiet_rule, plain_rule))
    assert [q for _, q in op.direct_rules] == [True, False]
    a = tape.tensor(np.ones(2), requires_grad=True)
    b = tape.tensor(np.ones(2))
    with np.errstate(divide="raise"):
        op(a, b).backward(np.ones(2))  # only the quiet rule runs (b needs no gradient)
        assert np.all(np.isinf(a.grad.numpy()))
        b.requires_grad = True
        with pytest.raises(GradientError, match=r"hot_mixed_quiet.*\['a', 'b'\].*FloatingPointError"):
            op(a, b).backward(np.ones(2))
        with pytest.raises(FloatingPointError):
            np.divide(np.ones(1), np.zeros(1))  # the user's state is back after the failing rule


def test_summing_gradients_runs_with_the_users_error_state():
    x = tape.tensor(np.array([1.0], np.float32), requires_grad=True)
    y = ops.mul(x, 1.0)
    z = ops.mul(y, y)  # both of mul's quiet rules send to y's node: their sum overflows
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        z.backward(np.array([3e38], np.float32))


def test_a_functools_wraps_copy_of_a_quiet_wrapper_is_not_quiet(throwaway):
    wrapped = quiet(lambda g, ans, x: g * 2)

    @functools.wraps(wrapped)
    def rule(g, ans, x):  # carries the wrapper's attributes, but is not it
        return g * 3

    op = throwaway("hot_wraps_copy", inputs=("x",), forward=lambda x: x + 0, vjps=(rule,))
    assert op.direct_rules == ((rule, False),)
    x = tape.tensor(np.ones(2), requires_grad=True)
    op(x).backward(np.ones(2))
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_bad_rule_results_are_refused_on_the_short_path(throwaway):
    cases = {
        "none": (lambda g, ans, x: None, "returned None"),
        "shape": (lambda g, ans, x: g[:1], r"returned shape \(1,\)"),
        "dtype": (lambda g, ans, x: g.astype(np.float32), "dtype float32"),
        "raises": (lambda g, ans, x: 1 / 0, r"raised ZeroDivisionError"),
    }
    for name, (rule, message) in cases.items():
        op = throwaway(f"hot_bad_{name}", inputs=("x",), forward=lambda x: x + 0, vjps=(rule,))
        x = tape.tensor(np.ones(2), requires_grad=True)
        with pytest.raises(GradientError, match=message):
            op(x).backward(np.ones(2))
        assert x.grad is None  # nothing delivered from a node whose rules failed


def test_create_graph_through_an_output_that_is_gone():
    x = tape.tensor(np.array([0.3, -0.7]), requires_grad=True)
    y = ops.tanh(x)
    loss = ops.sum(ops.mul(y, y))
    del y
    gc.collect()
    (gx,) = tape.gradients(loss, [x], create_graph=True)
    ops.sum(gx).backward()
    t = np.tanh(np.array([0.3, -0.7]))
    np.testing.assert_allclose(gx.numpy(), 2 * t * (1 - t**2))
    np.testing.assert_allclose(x.grad.numpy(), 2 * (1 - t**2) * (1 - 3 * t**2))


@pytest.mark.parametrize("watch", [False, True])
def test_the_inline_node_cases_equal_the_general_computation(watch):
    """``_node_for`` works out one and two tensors of an all-differentiable op inline (shared tuples); ``_needs_of``
    is the general computation every other call takes. For every mix of inputs that need a gradient or not, leaves
    and non-leaves, fresh and reassigned versions, both give the same needs, parents, leaves and versions."""
    from tape.recording import _needs_of

    def make(kind):
        t = tape.tensor(np.array([1.5, -2.0]), requires_grad=kind != "constant")
        if kind == "inner":
            return ops.tanh(t)
        if kind == "bumped":
            t.data = np.array([0.5, 0.25])  # version 1
        return t

    kinds = ("constant", "leaf", "inner", "bumped")
    cases = [(a,) for a in kinds] + [(a, b) for a in kinds for b in kinds]
    for case in cases:
        with tape.GradientTape() as gt:
            tensors = [make(kind) for kind in case]
            if watch:
                gt.watch([t for t in tensors if not t.requires_grad])
            op = ops.tanh if len(tensors) == 1 else ops.mul
            out = op(*tensors)
            general = _needs_of(op, tensors, (), tape.state.STATE.watched)
        node = out.grad_fn
        if general is None:
            assert node is None, case
            continue
        needs, parents, leaves, versions = general
        assert node is not None, case
        assert (node.needs, list(node.parents), list(node.leaves), list(node.versions)) == (
            list(needs), list(parents), list(leaves), list(versions)
        ), case


def test_the_direct_reverse_walk_equals_the_general_visit():
    """``_first_order_walk`` steps nodes with direct rules inline; a tape-restricted pass (``compute_gradients``)
    takes the general ``visit`` for every node. Same gradients, bit for bit, over a chain with shared inputs,
    Python scalars, a leaf read twice and a node with several consumers."""
    data = np.random.default_rng(3).standard_normal((3, 4))
    grads = []
    for general in (False, True):
        x = tape.tensor(data, requires_grad=True)
        w = tape.tensor(data[::-1].copy(), requires_grad=True)
        with tape.GradientTape() as gt:
            h = ops.tanh(ops.add(ops.mul(x, 1.01), 0.1))
            y = ops.mul(h, w)
            loss = ops.sum(ops.mul(ops.sub(1.5, y), ops.exp(h)) + ops.mul(x, x))
        if general:
            grads.append([g.numpy() for g in gt.compute_gradients(loss, [x, w])])
        else:
            loss.backward()
            grads.append([x.grad.numpy(), w.grad.numpy()])
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)
