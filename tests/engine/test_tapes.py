"""Execution and gradient tapes: recording, nesting, replay, prune, copy, DAG export."""

import numpy as np
import pytest

import ops
import tape
from tape import STUB, defop


def leaf(shape, seed=0):
    return tape.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def test_execution_tape_records_every_application_in_order():
    x = tape.tensor(np.ones((2, 3)))  # nothing requires grad: still recorded
    t = tape.ExecutionTape()
    assert not t.is_recording
    t.start_recording()
    y = ops.exp(x)
    z = (y * 2).sum(dim=1)
    t.stop_recording()
    ops.exp(x)  # not recorded
    names = [rec.op_name for rec in t.operations]
    assert names == ["exp", "mul", "sum"]
    assert [rec.index for rec in t.operations] == [0, 1, 2]
    exp_rec, mul_rec, sum_rec = t.operations
    assert exp_rec.inputs[0].id == x.id and exp_rec.output.id == y.id
    assert exp_rec.output.shape == (2, 3) and exp_rec.output.dtype == np.float64
    assert mul_rec.inputs[0].id == y.id
    assert sum_rec.attributes == {"dim": 1, "keepdim": False, "dtype": None} and sum_rec.output.id == z.id


def test_with_block_pushes_records_and_pops():
    x = leaf((2,))
    with tape.ExecutionTape() as outer:
        assert tape.tape_stack.current() is outer
        a = x * 2
        with tape.GradientTape() as inner:
            assert tape.tape_stack.current() is inner
            b = ops.exp(a)
        c = b + 1
    assert tape.tape_stack.current() is None and not outer.is_recording
    assert [r.op_name for r in outer.operations] == ["mul", "exp", "add"]
    assert [r.op_name for r in inner.operations] == ["exp"]
    assert c.grad_fn is not None


def test_tape_stack_pops_innermost_first():
    stack = tape.TapeStack()
    a, b = tape.ExecutionTape(), tape.ExecutionTape()
    stack.push(a)
    stack.push(b)
    with pytest.raises(RuntimeError, match="innermost"):
        stack.pop(a)
    assert stack.pop() is b and stack.current() is a and len(stack) == 1


def test_gradient_tape_returns_gradients_in_source_order():
    x, w = leaf((3,)), leaf((3,), seed=1)
    with tape.GradientTape() as t:
        y = (ops.exp(x) * w).sum()
    gw, gx = t.compute_gradients(y, [w, x])
    np.testing.assert_allclose(gw.numpy(), np.exp(x.numpy()))
    np.testing.assert_allclose(gx.numpy(), np.exp(x.numpy()) * w.numpy())
    assert x.grad is None  # compute_gradients does not touch .grad


def test_gradient_tape_watch_makes_constants_differentiable():
    x = tape.tensor(np.array([1.0, 2.0]))
    with tape.GradientTape() as t:
        t.watch(x)
        y = (x * x).sum()
    np.testing.assert_allclose(t.compute_gradients(y, x).numpy(), [2.0, 4.0])
    z = (x * x).sum()  # outside the tape x is a constant again
    assert z.grad_fn is None


def test_unconnected_sources_get_none_or_zeros_when_asked():
    x, unused = leaf((2,)), leaf((3,), seed=1)
    with tape.GradientTape(persistent=True) as t:
        y = (x * 2).sum()
    gx, gu = t.compute_gradients(y, [x, unused])
    assert gu is None
    _, gz = t.compute_gradients(y, [x, unused], unconnected="zero")
    np.testing.assert_array_equal(gz.numpy(), np.zeros(3))


def test_non_persistent_tape_can_be_used_once():
    x = leaf((2,))
    with tape.GradientTape() as t:
        y = ops.exp(x).sum()
    t.compute_gradients(y, x)
    with pytest.raises(RuntimeError, match="persistent=True"):
        t.compute_gradients(y, x)


def test_persistent_tape_gives_gradients_of_several_targets():
    x = leaf((2,))
    with tape.GradientTape(persistent=True) as t:
        y = ops.exp(x).sum()
        z = (x * x).sum()
    np.testing.assert_allclose(t.compute_gradients(y, x).numpy(), np.exp(x.numpy()))
    np.testing.assert_allclose(t.compute_gradients(z, x).numpy(), 2 * x.numpy())
    np.testing.assert_allclose(t.compute_gradients([y, z], x).numpy(), np.exp(x.numpy()) + 2 * x.numpy())


def test_gradient_with_respect_to_an_intermediate_tensor():
    x = leaf((3,))
    with tape.GradientTape() as t:
        h = ops.exp(x)
        y = (h * h).sum()
    gh, gx = t.compute_gradients(y, [h, x])
    np.testing.assert_allclose(gh.numpy(), 2 * h.numpy())
    np.testing.assert_allclose(gx.numpy(), 2 * h.numpy() * h.numpy())


def test_ops_run_while_the_tape_is_stopped_count_as_constants():
    x = leaf((2,))
    with tape.GradientTape() as t:
        a = x * 3
        t.stop_recording()
        b = a * a  # not on the tape
        t.start_recording()
        y = (b + a).sum()
    # d y / d x through the recorded path only: y = b + a with b treated as a constant
    np.testing.assert_allclose(t.compute_gradients(y, x).numpy(), np.full(2, 3.0))


def test_nested_gradient_tapes_differentiate_independently():
    x = leaf((2,))
    with tape.GradientTape() as outer:
        with tape.GradientTape() as inner:
            y = ops.exp(x).sum()
        z = y * 2
    np.testing.assert_allclose(inner.compute_gradients(y, x).numpy(), np.exp(x.numpy()))
    np.testing.assert_allclose(outer.compute_gradients(z, x).numpy(), 2 * np.exp(x.numpy()))


def test_compute_gradients_of_a_non_scalar_target_needs_its_gradient():
    x = leaf((2,))
    with tape.GradientTape(persistent=True) as t:
        y = x * 3
    with pytest.raises(RuntimeError, match="shape"):
        t.compute_gradients(y, x)
    np.testing.assert_allclose(t.compute_gradients(y, x, output_gradients=np.array([1.0, 2.0])).numpy(), [3.0, 6.0])


def test_replay_reproduces_outputs_on_new_inputs():
    x, w = leaf((3, 4)), leaf((4, 2), seed=1)
    with tape.ExecutionTape() as t:
        h = ops.tanh(x @ w)
        y = (h * h).mean(dim=0)
    again = t.replay()
    np.testing.assert_allclose(again[y.id], y.numpy())
    new_x = np.random.default_rng(5).standard_normal((3, 4))
    replayed = t.replay({x: new_x})
    np.testing.assert_allclose(replayed[y.id], (np.tanh(new_x @ w.numpy()) ** 2).mean(axis=0))
    np.testing.assert_allclose(replayed[h.id], np.tanh(new_x @ w.numpy()))


def test_replay_errors_are_loud():
    x = leaf((2,))
    with tape.ExecutionTape() as t:
        y = ops.exp(x)
    with pytest.raises(tape.ReplayError, match="not an input"):
        t.replay({y.id: np.zeros(2)})
    pruned = t.prune([y])
    assert len(pruned) == 1


def test_replay_of_an_op_no_longer_registered_raises():
    temp = defop("temp_op", family="test", inputs=("x",), forward=np.negative, vjps=(lambda g, ans, x: -g,))
    try:
        x = leaf((2,))
        with tape.ExecutionTape() as t:
            temp(x)
    finally:
        tape.unregister_op("temp_op")
    with pytest.raises(tape.ReplayError, match="temp_op.*no longer registered"):
        t.replay()


def test_prune_drops_dead_ops_and_keeps_gradients_right():
    x = leaf((3,))
    with tape.GradientTape(persistent=True) as t:
        a = ops.exp(x)
        dead = ops.tanh(a) * 5  # noqa: F841  -- nothing below uses it
        y = (a * x).sum()
    pruned = t.prune([y])
    assert [r.op_name for r in pruned.operations] == ["exp", "mul", "sum"]
    assert [r.op_name for r in t.operations] == ["exp", "tanh", "mul", "mul", "sum"]  # original untouched
    expected = np.exp(x.numpy()) * x.numpy() + np.exp(x.numpy())
    np.testing.assert_allclose(pruned.compute_gradients(y, x).numpy(), expected)
    np.testing.assert_allclose(pruned.replay({x: np.zeros(3)})[y.id], 0.0)


def test_copy_is_independent():
    x = leaf((2,))
    with tape.ExecutionTape() as t:
        ops.exp(x)
    c = t.copy()
    with t:
        ops.tanh(x)
    assert len(c) == 1 and len(t) == 2 and not c.is_recording


def test_dag_edges_follow_data_flow_not_recording_order():
    x, w = leaf((2, 2)), leaf((2, 2), seed=1)
    with tape.ExecutionTape() as t:
        a = ops.exp(x)  # 0
        b = ops.tanh(w)  # 1 (independent of 0)
        c = a @ b  # 2 reads 0 and 1
        d = ops.exp(a)  # 3 reads 0 only
        (c + d).sum()  # 4 reads 2 and 3; 5 sums
    graph = t.to_graph()
    assert sorted((p, c_) for p, c_, _ in graph.edges) == [(0, 2), (0, 3), (1, 2), (2, 4), (3, 4), (4, 5)]
    assert set(graph.inputs) == {x.id, w.id}
    assert sorted(graph.input_edges) == sorted([(x.id, 0), (w.id, 1)])


def test_to_dot_shows_ops_shapes_edges_and_stubs_stand_out():
    stubby = defop("stubby", family="test", inputs=("x",), forward=np.negative, vjps=(STUB,))
    try:
        x = tape.tensor(np.ones((2, 3)), requires_grad=True, name="x")
        with tape.ExecutionTape() as t:
            stubby(ops.exp(x))
        dot = t.to_dot()
    finally:
        tape.unregister_op("stubby")
    assert dot.startswith("digraph")
    assert 'label="exp\\nfloat64[2, 3]"' in dot
    assert "stubby" in dot and "BACKWARD STUB: x" in dot and "#fecaca" in dot
    assert "op0 -> op1" in dot and f"t{x.id} -> op0" in dot


def test_render_writes_an_svg(tmp_path, graphviz_dot):
    x = leaf((2,))
    with tape.ExecutionTape() as t:
        ops.exp(x * 2)
    path = t.render(str(tmp_path / "graph.svg"))
    assert open(path).read().lstrip().startswith(("<?xml", "<svg"))


def test_replay_runs_eagerly_inside_a_compiled_step():
    """replay runs each recorded op through eager's bind_call + run_op: inside a compiled step's fn it neither enters
    the step's trace (which made every call of the step re-record) nor drops the step's own recording."""
    a = tape.tensor(np.array([0.5, -1.0, 2.0]))
    with tape.ExecutionTape() as recorded:
        b = ops.tanh(a)
    w = tape.tensor(np.array([0.3, -0.2, 0.1]), requires_grad=True)
    replayed = []

    def fn(x):
        replayed.append(recorded.replay({a: x.numpy()})[b.id])
        h = ops.mul(w, x)
        return ops.sum(ops.mul(h, h))

    step = tape.compile(fn, [w])
    for k in range(3):
        x = np.array([1.0, 2.0, -3.0]) * (k + 1)
        w.grad = None
        loss, (grad,) = step(tape.tensor(x))
        np.testing.assert_array_equal(replayed[-1], np.tanh(x))
        assert loss.item() == np.sum((w.numpy() * x) ** 2)
        np.testing.assert_array_equal(grad.numpy(), 2 * (w.numpy() * x) * x)
    assert (step.records, step.replays) == (1, 2)
