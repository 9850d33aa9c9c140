"""In place through the engine (issue #31), against torch: the idioms PyTorch programs use train as they do in torch,
a changed saved value raises, views share memory exactly where torch's do, and the training stack writes in place."""

import numpy as np
import pytest
from oracle import LazyTorch

import ops
import tape
from ops._inplace import TORCH_VIEWS
from tape import nn, optim
from tape.registry import get_op
from tape.tools.verify import op_samples, sample_tensors

torch = LazyTorch()  # torch imported at first use: the module collects without torch


def _linear_data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((32, 3))
    return x, x @ np.array([1.5, -2.0, 0.5]) + 0.3


def test_the_tutorial_loop_trains_as_torchs():
    """PyTorch's own tutorial update: ``with no_grad(): w -= lr * w.grad; w.grad.zero_()``."""
    x, y = _linear_data()
    w, b = tape.tensor(np.zeros(3), requires_grad=True), tape.tensor(np.zeros(()), requires_grad=True)
    tw, tb = (
        torch.zeros(3, dtype=torch.float64, requires_grad=True),
        torch.zeros((), dtype=torch.float64, requires_grad=True),
    )
    identities = (id(w), id(b))
    losses = []
    for m, (W, B, X, Y) in (
        (tape, (w, b, tape.tensor(x), tape.tensor(y))),
        (torch, (tw, tb, torch.tensor(x), torch.tensor(y))),
    ):
        run = []
        for _ in range(50):
            loss = ((X @ W + B - Y) ** 2).mean()
            loss.backward()
            with m.no_grad():
                W -= 0.1 * W.grad
                B -= 0.1 * B.grad
                W.grad.zero_()
                B.grad.zero_()
            run.append(loss.item())
        losses.append(run)
    assert (id(w), id(b)) == identities
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-12)
    assert losses[0][-1] < 1e-2 * losses[0][0]
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-12)


def test_p_data_updates_and_an_optimizer_built_before_a_cast_trains():
    x, y = _linear_data(1)
    model = nn.Linear(3, 1)
    opt = optim.SGD(model.parameters(), lr=0.1)
    weight = model.weight
    model.double()  # torch keeps the Parameter objects: the optimizer built before it still holds them
    assert model.weight is weight and weight.dtype == np.float64
    X, Y = tape.tensor(x), tape.tensor(y[:, None])
    first = None
    for _ in range(30):
        opt.zero_grad()
        loss = ops.mse_loss(model(X), Y)
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
    assert loss.item() < 0.05 * first
    before = model.bias.numpy().copy()
    with tape.no_grad():
        for p in model.parameters():
            p.data -= 0.5 * p.grad  # the old idiom on .data, in place
    np.testing.assert_allclose(model.bias.numpy(), before - 0.5 * model.bias.grad.numpy())


def test_state_dict_values_alias_the_module():
    model, other = nn.Linear(3, 2), nn.Linear(3, 2)
    sd = model.state_dict()
    for k, v in other.state_dict().items():
        sd[k].copy_(v)  # how minGPT loads pretrained weights
    for k, v in other.state_dict().items():
        np.testing.assert_array_equal(model.state_dict()[k].numpy(), v.numpy())
    opt = optim.SGD(model.parameters(), lr=1.0)
    model(tape.ones(1, 3)).sum().backward()
    opt.step()
    np.testing.assert_array_equal(sd["weight"].numpy(), model.weight.numpy())  # as torch's: it sees the step


def test_batchnorm_running_statistics_change_in_place_as_torchs():
    rng = np.random.default_rng(2)
    ours, theirs = nn.BatchNorm1d(3, dtype=np.float64), torch.nn.BatchNorm1d(3).double()
    buffers = (ours.running_mean, ours.running_var, ours.num_batches_tracked)
    sd = ours.state_dict()
    for _ in range(3):
        x = rng.standard_normal((8, 3))
        ours(tape.tensor(x))
        theirs(torch.tensor(x))
    assert (ours.running_mean, ours.running_var, ours.num_batches_tracked) == buffers
    np.testing.assert_allclose(sd["running_mean"].numpy(), theirs.running_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(sd["running_var"].numpy(), theirs.running_var.numpy(), rtol=1e-12)
    assert int(sd["num_batches_tracked"].item()) == 3


def test_zero_grad_keeping_tensors_and_clip_grad_norm_write_in_place():
    model = nn.Linear(3, 2)
    model(tape.ones(4, 3)).sum().backward()
    grads = [p.grad for p in model.parameters()]
    optim.clip_grad_norm_(model.parameters(), 0.1)
    assert [p.grad for p in model.parameters()] == grads
    total = np.sqrt(sum((g.numpy() ** 2).sum() for g in grads))
    assert abs(total - 0.1) < 1e-6
    model.zero_grad(set_to_none=False)
    assert all(p.grad is g and not g.numpy().any() for p, g in zip(model.parameters(), grads))


def test_a_changed_saved_value_raises_naming_the_op():
    x = tape.tensor(np.array([0.5, 1.5]), requires_grad=True)
    h = x * 2
    y = h * h  # saves h
    h.add_(1.0)
    with pytest.raises(tape.InPlaceModificationError, match="op 'mul'.*modified in place"):
        y.sum().backward()
    # through .data too, where torch lets it through silently
    w = tape.tensor(np.array([1.0, 2.0]), requires_grad=True)
    z = (w * w).sum()
    w.data.mul_(3.0)
    with pytest.raises(tape.InPlaceModificationError, match="op 'mul'"):
        z.backward()


def test_nonleaf_history_moves_onto_the_inplace_node():
    x = tape.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    y = x * 2
    y.add_(1.0)
    assert y.grad_fn.op.name == "add"
    y.mul_(x)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * np.array([1.0, 2.0, 3.0]) + 1)


def _view_cases():
    cases = []
    for name in TORCH_VIEWS:
        op = get_op(name)
        for i, sample in enumerate(op_samples(op)):
            if op.torch_ref is not None and sample.torch and not isinstance(sample.inputs[0], list | tuple):
                cases.append(pytest.param(op, sample, id=f"{name}-{i}"))
    return cases


@pytest.mark.parametrize("op,sample", _view_cases())
def test_outputs_share_memory_exactly_where_torchs_views_do(op, sample):
    """A write into an output reaches the input in minitape exactly when it does in torch."""
    tensors = sample_tensors(op, sample)
    tensors = [t.detach() if isinstance(t, tape.Tensor) else t for t in tensors]
    out = op(**dict(zip(op.input_names, tensors)), **sample.attrs)
    theirs_in = [torch.tensor(t.numpy()) if isinstance(t, tape.Tensor) else t for t in tensors]
    expected = op.torch_ref(torch, *theirs_in, **sample.attrs)
    outs = out if isinstance(out, tuple) else (out,)
    exp = tuple(expected) if isinstance(expected, tuple | list) else (expected,)
    for o, e in zip(outs, exp):
        if o.numel() == 0 or any(s == 0 for s in o.numpy().strides) and o.numel() > 1:
            continue  # nothing to write / expanded: writes are refused on both sides
        torch_shares = e.numel() > 0 and e.untyped_storage().data_ptr() == theirs_in[0].untyped_storage().data_ptr()
        ours_shares = np.shares_memory(o.numpy(), tensors[0].numpy())
        assert ours_shares == torch_shares, (op.name, sample.label)
        if ours_shares:
            before = tensors[0].numpy().copy()
            o.add_(1.0)
            assert not np.array_equal(before, tensors[0].numpy())
            assert tensors[0]._version == o._version


def test_a_write_through_a_view_under_autograd_is_refused_not_diverged():
    x = tape.tensor(np.ones(3), requires_grad=True)
    h = x * 2
    with pytest.raises(RuntimeError, match="is a view sharing memory.*torch rebuilds"):
        h[0:2].mul_(3.0)
    with pytest.raises(RuntimeError, match="view sharing memory"):
        h.reshape(3, 1).add_(tape.tensor(np.ones((3, 1)), requires_grad=True))
    with tape.no_grad():
        h[0:2].mul_(3.0)  # under no_grad, as torch: the values change, the history stays
    np.testing.assert_array_equal(h.numpy(), [6.0, 6.0, 2.0])


def test_a_gradient_tape_records_inplace_ops_and_an_execution_tape_refuses_them():
    x = tape.tensor(np.array([1.0, 2.0]))
    with tape.GradientTape() as t:
        t.watch(x)
        y = x * 3
        y.add_(x)
        y.mul_(y)
        loss = y.sum()
    (g,) = t.compute_gradients(loss, [x])
    np.testing.assert_allclose(g.numpy(), 2 * 4 * x.numpy() * 4)
    with tape.ExecutionTape():
        z = x * 2
        with pytest.raises(RuntimeError, match="ExecutionTape is recording"):
            z.add_(1.0)


def test_a_compiled_step_with_inplace_ops_equals_eager():
    rng = np.random.default_rng(4)
    w = tape.tensor(rng.standard_normal((3, 3)), requires_grad=True)

    def fn(x):
        h = x @ w
        h[:, 0] = 0.0
        h.mul_(2.0)
        return (h * h).sum()

    step = tape.compile(fn, [w])
    for _ in range(4):
        x = tape.tensor(rng.standard_normal((5, 3)))
        loss, (g,) = step(x)
        w.grad = None
        eager = fn(x)
        eager.backward()
        assert loss.item() == eager.item()
        np.testing.assert_array_equal(g.numpy(), w.grad.numpy())
        w.grad = None
    assert step.replays == 0  # an in-place op makes every call run eagerly (docs/compile.md)


def test_a_view_read_around_a_write_into_its_base_raises_at_backward_never_stale():
    """``h[0] = f(h[1])``: minitape's ops save their inputs, so f's backward raises naming f when h changed after f
    read the view (torch raises too where f saved it, and computes where f saved only its output: stricter, never
    silent); a use of the view recorded after the write would need torch's regenerated history and raises too."""
    x = tape.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    h = x * 2
    h[0] = h[1].exp()
    with pytest.raises(tape.InPlaceModificationError, match="op 'exp'"):
        (h * h).sum().backward()
    h = x * 2
    v = h[1]
    h.mul_(x)
    with pytest.raises(tape.InPlaceModificationError, match="view_changed_by_an_inplace_write"):
        v.sum().backward()
    h = x * 2
    h[0] = h[1].detach().exp()  # what to write instead: the read as a constant, or clone() it first
    (h * h).sum().backward()


def test_functional_batch_norm_in_training_with_running_statistics_warns_that_it_does_not_update_them():
    x = tape.tensor(np.random.default_rng(0).standard_normal((4, 3)))
    mean, var = tape.zeros(3, dtype=np.float64), tape.ones(3, dtype=np.float64)
    with pytest.warns(UserWarning, match="does not update them"):
        ops.batch_norm(x, mean, var, training=True)
    np.testing.assert_array_equal(mean.numpy(), np.zeros(3))  # as the warning says
