"""Movement ops beyond the generated per-sample checks: the ops with a variable number of outputs (split, chunk,
unbind, meshgrid: values, first and second derivatives against torch in float64, outputs that get no gradient,
the zero-output cases the generated checks cannot join), torch's edge cases (empty dims, offsets past the edge,
overlapping windows, per-entry repeats), repeats frozen when recorded, the numpy interop route to flip, and bad
input refused with errors naming the op and the argument."""

import numpy as np
import pytest

import ops
import tape
from ops import movement
from tape import gradcheck
from tape.functional import gradients
from tape.gradcheck import gradgradcheck


def leaf(*shape, seed=0):
    return tape.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def weights(outputs, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(o.shape) for o in outputs]


def weighted_sum(outputs, ws):
    """sum_i sum(w_i * out_i): every output's gradient path is exercised (None for no outputs)."""
    total = None
    for out, w in zip(outputs, ws):
        term = ops.sum(out * w)
        total = term if total is None else total + term
    return total


def check_against_torch(torch, fn, torch_fn, inputs, seed=3):
    """``fn`` (a tuple of Tensors from Tensors) against ``torch_fn``: every output's values, the gradients of
    a weighted sum of the outputs, and the gradients of <those gradients, v> (second order), in float64;
    plus gradcheck and gradgradcheck of the weighted sum."""
    outs = fn(*inputs)
    refs = [torch.tensor(np.array(t.numpy()), requires_grad=True) for t in inputs]
    expected = torch_fn(*refs)
    assert len(outs) == len(expected)
    for ours, theirs in zip(outs, expected):
        assert ours.shape == tuple(theirs.shape)
        np.testing.assert_array_equal(ours.numpy(), theirs.detach().numpy())
    if not outs:
        return
    ws = weights(outs, seed)
    total = weighted_sum(outs, ws)
    t_total = sum((o * torch.from_numpy(w)).sum() for o, w in zip(expected, ws))
    first = gradients(total, list(inputs), create_graph=True, allow_unused=True)
    t_first = torch.autograd.grad(t_total, refs, create_graph=True, allow_unused=True)
    for ours, theirs, t in zip(first, t_first, inputs):
        a = np.zeros(t.shape) if ours is None else ours.numpy()
        b = np.zeros(t.shape) if theirs is None else theirs.detach().numpy()
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    gradcheck(lambda *xs: weighted_sum(fn(*xs), ws), list(inputs))
    gradgradcheck(lambda *xs: ops.concat([ops.reshape(o, (-1,)) for o in fn(*xs)], 0), list(inputs))


# -- split / chunk / unbind --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "shape,sizes,dim",
    [
        ((5, 4), 2, 0),
        ((5, 4), [1, 3, 1], 0),
        ((3, 5), 3, -1),
        ((3, 5), (4, 0, 1), -1),
        ((2, 3), 10, 1),
        ((2, 3), [0, 3, 0], 1),
        ((0, 3), 2, 0),
        ((0, 3), 0, 0),
        ((2, 0, 3), [0, 0], -2),
        ((0, 3), [], 0),
        ((5, 5), (4, 0, 1), -1),
        ((6,), [0, 2, 0, 4], 0),
    ],
)
def test_split_matches_torch_in_values_and_two_orders_of_gradients(torch, shape, sizes, dim):
    check_against_torch(
        torch, lambda t: movement.split(t, sizes, dim), lambda t: torch.split(t, sizes, dim), [leaf(*shape)]
    )


@pytest.mark.parametrize(
    "shape,chunks,dim",
    [
        ((5, 2), 4, 0),
        ((6,), 4, 0),
        ((2, 3), 5, -1),
        ((7, 2), 1, 0),
        ((10,), 4, 0),
        ((0, 3), 2, 0),
        ((2, 0), 3, 1),
        ((3, 4), 2, -2),
        ((2, 5), 4, -1),
        ((2, 6), 4, -1),
    ],
)
def test_chunk_matches_torch_including_fewer_chunks_and_empty_dims(torch, shape, chunks, dim):
    check_against_torch(
        torch, lambda t: movement.chunk(t, chunks, dim), lambda t: torch.chunk(t, chunks, dim), [leaf(*shape)]
    )


def test_chunk_of_an_empty_dim_gives_as_many_empty_pieces_as_asked(torch):
    pieces = movement.chunk(leaf(0, 3), 4)
    assert [p.shape for p in pieces] == [(0, 3)] * 4 == [tuple(p.shape) for p in torch.chunk(torch.zeros(0, 3), 4)]


@pytest.mark.parametrize(
    "shape,dim", [((2, 3), 0), ((2, 3), -1), ((2, 3, 4), 1), ((1, 3), 0), ((3, 0), 0), ((0, 3), 0)]
)
def test_unbind_matches_torch_in_values_and_two_orders_of_gradients(torch, shape, dim):
    check_against_torch(torch, lambda t: movement.unbind(t, dim), lambda t: torch.unbind(t, dim), [leaf(*shape)])


def test_zero_output_cases_return_an_empty_tuple_and_record_nothing_to_differentiate(torch):
    """unbind of an empty dim and split of an empty dim into ``[]`` have no outputs (as torch): the generated
    checks join an op's outputs, so these cases are checked here."""
    x = leaf(0, 3)
    assert movement.unbind(x) == () == torch.unbind(torch.zeros(0, 3))
    assert movement.unbind(x, -2) == ()
    assert movement.split(x, [], 0) == () == tuple(torch.split(torch.zeros(0, 3), [], 0))
    assert movement.split(leaf(3, 0), [], 1) == ()
    assert x.grad is None


def test_zero_output_cases_can_be_recorded_on_an_execution_tape():
    x = leaf(0, 3)
    with tape.ExecutionTape() as recorded:
        movement.unbind(x)
        movement.split(x, [], 0)
    assert [r.op_name for r in recorded.operations] == ["unbind", "split"]


def test_split_pieces_used_twice_accumulate():
    x = leaf(4, 3)
    a, b = movement.split(x, 2)
    (ops.sum(a * a) + ops.sum(a) + ops.sum(b)).backward()
    expected = np.ones((4, 3))
    expected[:2] += 2 * x.numpy()[:2]
    np.testing.assert_allclose(x.grad.numpy(), expected)


@pytest.mark.parametrize(
    "fn,torch_fn,used",
    [
        (lambda t: movement.split(t, [1, 2, 1], 1), lambda torch, t: torch.split(t, [1, 2, 1], 1), [1]),
        (lambda t: movement.split(t, 3, 0), lambda torch, t: torch.split(t, 3, 0), [0]),
        (lambda t: movement.chunk(t, 3, 0), lambda torch, t: torch.chunk(t, 3, 0), [0, 2]),
        (lambda t: movement.unbind(t, 1), lambda torch, t: torch.unbind(t, 1), [3]),
        (lambda t: movement.unbind(t, 0), lambda torch, t: torch.unbind(t, 0), [0, 4]),
    ],
)
def test_pieces_that_get_no_gradient_count_as_zeros_in_both_orders(torch, fn, torch_fn, used):
    """Only some outputs reach the loss: the others' gradients are zeros of their shape, in the first order
    and in the create_graph backward (whose gradient is differentiated again)."""
    x = leaf(5, 4)
    outs = fn(x)
    ws = weights(outs)
    total = ops.sum(ops.stack([ops.sum(outs[k] * outs[k] * ws[k]) for k in used]))
    (first,) = gradients(total, [x], create_graph=True)
    (second,) = gradients(ops.sum(first * first), [x])
    t = torch.tensor(np.array(x.numpy()), requires_grad=True)
    t_outs = torch_fn(torch, t)
    t_total = sum((t_outs[k] * t_outs[k] * torch.from_numpy(ws[k])).sum() for k in used)
    (t_first,) = torch.autograd.grad(t_total, [t], create_graph=True)
    (t_second,) = torch.autograd.grad((t_first * t_first).sum(), [t])
    np.testing.assert_allclose(first.numpy(), t_first.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(second.numpy(), t_second.numpy(), rtol=1e-12, atol=1e-12)


def test_each_is_one_recorded_op_with_one_backward():
    """One application records one op (not one per piece), and its backward returns one gradient."""
    x = leaf(4, 3)
    with tape.ExecutionTape() as recorded:
        pieces = movement.split(x, [1, 3])
        rows = movement.unbind(x, 1)
        grids = movement.meshgrid(leaf(2), leaf(3, seed=1))
    assert [r.op_name for r in recorded.operations] == ["split", "unbind", "meshgrid"]
    assert (len(pieces), len(rows), len(grids)) == (2, 3, 2)
    replayed = recorded.replay({x: np.ones((4, 3))})
    np.testing.assert_array_equal(replayed[rows[2].id], np.ones(4))


def test_integer_inputs_are_cut_without_gradients(torch):
    x = np.arange(12).reshape(3, 4)
    tx = torch.from_numpy(x)
    cases = [
        (movement.split(x, [1, 3], 1), torch.split(tx, [1, 3], 1)),
        (movement.chunk(x, 2), torch.chunk(tx, 2)),
        (movement.unbind(x, 1), torch.unbind(tx, 1)),
        (movement.meshgrid(x[0], x[1], indexing="xy"), torch.meshgrid(tx[0], tx[1], indexing="xy")),
    ]
    for ours, theirs in cases:
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert a.dtype == np.int64 and not a.requires_grad
            np.testing.assert_array_equal(a.numpy(), b.numpy())


# -- meshgrid ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "shapes", [[(2,), (3,)], [(2,), (3,), (4,)], [(3,)], [(), (3,)], [(), ()], [(0,), (3,)], [(2,), (1,), (3,)]]
)
@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_matches_torch_in_values_and_two_orders_of_gradients(torch, shapes, indexing):
    inputs = [leaf(*s, seed=i) for i, s in enumerate(shapes)]
    check_against_torch(
        torch,
        lambda *ts: movement.meshgrid(*ts, indexing=indexing),
        lambda *ts: torch.meshgrid(*ts, indexing=indexing),
        inputs,
    )


def test_meshgrid_inputs_whose_grid_gets_no_gradient_get_zeros(torch):
    a, b, c = leaf(2), leaf(3, seed=1), leaf(4, seed=2)
    ga, gb, gc = gradients(ops.sum(movement.meshgrid(a, b, c, indexing="xy")[1] ** 2), [a, b, c])
    ta, tb, tc = (torch.tensor(np.array(t.numpy()), requires_grad=True) for t in (a, b, c))
    (torch.meshgrid(ta, tb, tc, indexing="xy")[1] ** 2).sum().backward()
    np.testing.assert_array_equal(ga.numpy(), np.zeros(2))
    np.testing.assert_allclose(gb.numpy(), tb.grad.numpy(), rtol=1e-14)
    np.testing.assert_array_equal(gc.numpy(), np.zeros(4))


def test_meshgrid_takes_one_list_and_defaults_to_ij(torch):
    a, b = leaf(2), leaf(3, seed=1)
    for ours, theirs in zip(
        movement.meshgrid([a, b]),
        torch.meshgrid([torch.from_numpy(np.array(a.numpy())), torch.from_numpy(np.array(b.numpy()))], indexing="ij"),
    ):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


# -- registered ops: torch's edge cases --------------------------------------------------------------------
def test_roll_with_a_repeated_dim_adds_the_shifts_and_flattened_roll_keeps_the_shape(torch):
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(
        ops.roll(x, (1, 2), (1, 1)).numpy(), torch.roll(torch.from_numpy(x), (1, 2), (1, 1)).numpy()
    )
    np.testing.assert_array_equal(ops.roll(x, -5).numpy(), torch.roll(torch.from_numpy(x), -5).numpy())


def test_unfold_copy_adds_overlapping_window_gradients(torch):
    x = leaf(2, 7)
    out = ops.unfold_copy(x, 1, 3, 2)
    u = np.random.default_rng(2).standard_normal(out.shape)
    out.backward(u)
    t = torch.tensor(np.array(x.numpy()), requires_grad=True)
    t.unfold(1, 3, 2).backward(torch.from_numpy(u))
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-14)


@pytest.mark.parametrize("dims,size,step", [((9,), 3, 1), ((9,), 3, 4), ((2, 9), 8, 1), ((4, 5), 1, 1)])
def test_unfold_copy_both_backward_paths_agree_with_torch(torch, dims, size, step):
    """The array backward adds window by window (few windows) or offset by offset (many): both give torch's
    gradient; the Tensor backward (index_add) differentiates again."""
    x = leaf(*dims)
    u = np.random.default_rng(4).standard_normal(ops.unfold_copy(x, -1, size, step).shape)
    ops.unfold_copy(x, -1, size, step).backward(u)
    t = torch.tensor(np.array(x.numpy()), requires_grad=True)
    t.unfold(-1, size, step).backward(torch.from_numpy(u))
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-14)
    gradcheck(lambda t: ops.unfold_copy(t, -1, size, step), [x])
    gradgradcheck(lambda t: ops.unfold_copy(t, -1, size, step), [x])


def test_repeat_interleave_repeats_may_be_a_tensor_and_are_frozen_when_recorded(torch):
    x = leaf(3, 2)
    counts = np.array([2, 0, 1])
    out = ops.repeat_interleave(x, counts, dim=0)
    counts[:] = [0, 0, 3]  # refilling the buffer after the call cannot move the recorded gradient
    out.backward(np.ones(out.shape))
    np.testing.assert_array_equal(x.grad.numpy(), [[2, 2], [0, 0], [1, 1]])
    y = ops.repeat_interleave(x, tape.tensor(np.array([1, 2, 3])), 0)
    np.testing.assert_array_equal(
        y.numpy(), torch.repeat_interleave(torch.from_numpy(np.array(x.numpy())), torch.tensor([1, 2, 3]), 0).numpy()
    )


def test_diag_and_diag_embed_and_diagonal_are_each_others_adjoint(torch):
    x = leaf(2, 3)
    embedded = ops.diag_embed(x, -1, 0, 2)
    np.testing.assert_array_equal(ops.diagonal(embedded, -1, 0, 2).numpy(), x.numpy())
    expected = torch.diag_embed(torch.from_numpy(np.array(x.numpy())), -1, 0, 2)
    np.testing.assert_array_equal(embedded.numpy(), expected.numpy())
    v = leaf(3)
    np.testing.assert_array_equal(ops.diag(ops.diag(v, 2), 2).numpy(), v.numpy())


def test_integer_inputs_move_without_gradients(torch):
    x = np.arange(12).reshape(3, 4)
    tx = torch.from_numpy(x)
    cases = [
        (ops.flip(x, (0,)), torch.flip(tx, (0,))),
        (ops.roll(x, 1, 1), torch.roll(tx, 1, 1)),
        (ops.tile(x, (2, 1)), torch.tile(tx, (2, 1))),
        (ops.repeat_interleave(x, 2, 1), torch.repeat_interleave(tx, 2, 1)),
        (ops.diagonal(x, 1), torch.diagonal(tx, 1)),
        (ops.diag_embed(x), torch.diag_embed(tx)),
        (ops.diag(x, -1), torch.diag(tx, -1)),
        (ops.unfold_copy(x, 1, 2, 1), tx.unfold(1, 2, 1)),
    ]
    for ours, theirs in cases:
        assert ours.dtype == np.int64 and not ours.requires_grad
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_numpy_flip_on_a_tensor_records_flip():
    x = leaf(2, 3)
    with tape.ExecutionTape() as recorded:
        y = np.flip(x, 1)
    assert [r.op_name for r in recorded.operations] == ["flip"]
    np.testing.assert_array_equal(y.numpy(), np.flip(x.numpy(), 1))


# -- bad input ---------------------------------------------------------------------------------------------
X = np.zeros((2, 3))


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda: ops.flip(X, (0, -2)), ValueError, r"flip: argument 'dims' expected distinct dims"),
        (lambda: ops.flip(X, None), TypeError, r"flip: argument 'dims' expected an int or a sequence of ints"),
        (lambda: ops.flip(X, (2,)), ValueError, r"flip: argument 'dims' expected a dim in \[-2, 1\]"),
        (lambda: ops.roll(X, (1, 2)), ValueError, r"roll: argument 'shifts' expected one shift when dims is None"),
        (lambda: ops.roll(X, (1, 2), 0), ValueError, r"roll: arguments 'shifts' and 'dims' expected the same length"),
        (lambda: ops.roll(np.zeros(()), 1, 0), ValueError, r"roll: argument 'dims' expected None for a 0-D input"),
        (lambda: ops.roll(X, 1.5), TypeError, r"roll: argument 'shifts' expected an int"),
        (lambda: ops.tile(X, (2, -1)), ValueError, r"tile: argument 'dims' expected non-negative counts"),
        (lambda: ops.repeat_interleave(X, -1), ValueError, r"repeat_interleave: argument 'repeats' expected a non-neg"),
        (
            lambda: ops.repeat_interleave(X, np.array([1.0, 2.0]), 0),
            TypeError,
            r"repeat_interleave: argument 'repeats' expected an int or an integer tensor, got dtype float64",
        ),
        (
            lambda: ops.repeat_interleave(X, np.array([1, 2]), 1),
            ValueError,
            r"repeat_interleave: argument 'repeats' expected a 0-D tensor or a 1-D tensor of length 1 or 3",
        ),
        (lambda: ops.repeat_interleave(X, np.array([1, -2]), 0), ValueError, r"expected non-negative counts"),
        (lambda: ops.repeat_interleave(X, [1, 2], 0), TypeError, r"expected an int or an integer tensor, got list"),
        (
            lambda: ops.repeat_interleave(X, 2, 0, output_size=5),
            ValueError,
            r"repeat_interleave: argument 'output_size' expected 4",
        ),
        (lambda: ops.repeat_interleave(np.zeros(()), 2, 0), ValueError, r"argument 'dim' expected None for a 0-D"),
        (lambda: ops.diagonal(X, 0, 1, -1), ValueError, r"diagonal: arguments 'dim1' and 'dim2' expected two diff"),
        (lambda: ops.diagonal(np.zeros(3)), ValueError, r"diagonal: argument 'dim2' expected a dim in \[-1, 0\]"),
        (lambda: ops.diagonal(X, True), TypeError, r"diagonal: argument 'offset' expected an int"),
        (lambda: ops.diag_embed(X, 0, 0, 3), ValueError, r"diag_embed: argument 'dim2' expected a dim in \[-3, 2\]"),
        (
            lambda: ops.diag_embed(
                np.zeros(()),
            ),
            ValueError,
            r"diag_embed: argument 'dim1' expected a dim in \[-1, 0\]",
        ),
        (lambda: ops.diag(np.zeros((2, 2, 2))), ValueError, r"diag: argument 'input' expected a 1-D or 2-D tensor"),
        (lambda: ops.diag(np.zeros(())), ValueError, r"diag: argument 'input' expected a 1-D or 2-D tensor"),
        (lambda: ops.unfold_copy(X, 1, 4, 1), ValueError, r"unfold_copy: argument 'size' expected at most 3"),
        (lambda: ops.unfold_copy(X, 1, 2, 0), ValueError, r"unfold_copy: argument 'step' expected a positive step"),
        (lambda: ops.unfold_copy(X, 1, -1, 1), ValueError, r"unfold_copy: argument 'size' expected a non-negative"),
        (lambda: ops.unfold_copy(X, 2, 1, 1), ValueError, r"unfold_copy: argument 'dimension' expected a dim in"),
        (
            lambda: ops.unfold_copy(np.zeros(()), 0, 2, 1),
            ValueError,
            r"unfold_copy: argument 'size' expected at most 1",
        ),
        (
            lambda: movement.split(np.zeros(()), 1),
            ValueError,
            r"split: argument 'tensor' expected a tensor with at least",
        ),
        (lambda: movement.split(X, 0, 1), ValueError, r"split: argument 'split_size_or_sections' expected a positive"),
        (lambda: movement.split(X, -1, 1), ValueError, r"split: argument 'split_size_or_sections' expected a positive"),
        (lambda: movement.split(X, [1, 1], 1), ValueError, r"expected non-negative sizes adding up to 3"),
        (lambda: movement.split(X, [1, 2], 2), ValueError, r"split: argument 'dim' expected a dim in \[-2, 1\]"),
        (lambda: movement.split(X, [], 1), ValueError, r"expected non-negative sizes adding up to 3 .*got \[\]"),
        (lambda: movement.split(X, [2, -1, 2], 1), ValueError, r"expected non-negative sizes adding up to 3"),
        (lambda: movement.split(X, 1.5), TypeError, r"split: argument 'split_size_or_sections' expected an int"),
        (lambda: movement.chunk(X, 2, 2), ValueError, r"chunk: argument 'dim' expected a dim in \[-2, 1\]"),
        (lambda: movement.unbind(X, -3), ValueError, r"unbind: argument 'dim' expected a dim in \[-2, 1\]"),
        (lambda: movement.meshgrid([np.zeros(2)], indexing=None), ValueError, r"expected 'ij' or 'xy', got None"),
        (lambda: movement.chunk(X, 0), ValueError, r"chunk: argument 'chunks' expected a positive int, got 0"),
        (lambda: movement.chunk(X, 2.0), TypeError, r"chunk: argument 'chunks' expected an int"),
        (
            lambda: movement.chunk(np.zeros(()), 1),
            ValueError,
            r"chunk: argument 'input' expected a tensor with at least",
        ),
        (
            lambda: movement.unbind(np.zeros(())),
            ValueError,
            r"unbind: argument 'input' expected a tensor with at least",
        ),
        (lambda: movement.meshgrid(), ValueError, r"meshgrid: argument 'tensors' expected at least one tensor"),
        (lambda: movement.meshgrid(np.zeros(2), X), ValueError, r"meshgrid: argument 'tensors' expected 0-D or 1-D"),
        (lambda: movement.meshgrid(np.zeros(2), indexing="ji"), ValueError, r"expected 'ij' or 'xy', got 'ji'"),
        (lambda: movement.meshgrid(np.zeros(2), np.zeros(2, np.float32)), TypeError, r"meshgrid: .* one dtype"),
    ],
)
def test_bad_input_is_refused_naming_the_op_and_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- issue #21: the rest of torch's movement ops ----------------------------------------------------------------
def test_vander_equals_torch_vander_itself(torch):
    """The generated parity runs on vander's definition in torch ops (torch.vander's own backward raises in 2.13,
    an in-place cumprod); its values are checked against torch.vander here, integer input included."""
    x = np.array([0.5, -1.25, 2.0, 0.0])
    for N, increasing in ((None, False), (2, True), (6, False), (0, True)):
        expected = torch.vander(torch.from_numpy(x), N, increasing).numpy()
        np.testing.assert_allclose(ops.vander(tape.tensor(x), N, increasing).numpy(), expected, rtol=1e-15)
    ints = ops.vander(tape.tensor(np.array([1, 2, 3])), 3)
    assert ints.dtype == np.int64
    np.testing.assert_array_equal(ints.numpy(), torch.vander(torch.tensor([1, 2, 3]), 3).numpy())
    with pytest.raises(RuntimeError):  # the reason the parity oracle is torch.pow, not torch.vander
        torch.vander(torch.tensor([1.0, 2.0], requires_grad=True)).sum().backward()


def test_vander_gradient_at_zero_is_the_exact_derivative():
    x = tape.tensor(np.array([0.0, 1.5, -2.0]), requires_grad=True)
    ops.sum(ops.vander(x, 4)).backward()  # d/dx (x^3 + x^2 + x + 1) = 3x^2 + 2x + 1: 1 at 0, not NaN
    np.testing.assert_allclose(x.grad.numpy(), 3 * x.numpy()**2 + 2 * x.numpy() + 1, rtol=1e-14)


@pytest.mark.parametrize("cuts", [[3, 1], [-2, 4], [4, 4, 1], [0, 6, 2]])
def test_tensor_split_pieces_after_a_backward_cut_overlap_and_add_their_gradients(torch, cuts):
    x = leaf(6, 2)
    check_against_torch(torch, lambda t: ops.tensor_split(t, cuts), lambda t: torch.tensor_split(t, cuts), [x])


@pytest.mark.parametrize("name", ["hsplit", "vsplit", "dsplit"])
def test_rank_splits_cut_the_dim_torch_cuts_and_need_even_sections(torch, name):
    x = leaf(2, 4, 6)
    check_against_torch(torch, lambda t: getattr(ops, name)(t, 2), lambda t: getattr(torch, name)(t, 2), [x])
    check_against_torch(torch, lambda t: getattr(ops, name)(t, [1, 3]), lambda t: getattr(torch, name)(t, [1, 3]), [x])
    with pytest.raises(ValueError, match=f"{name}: argument 'indices_or_sections' expected a positive number of "
                                         "sections dividing"):
        getattr(ops, name)(leaf(3, 3, 3), 2)


def test_atleast_gives_a_tensor_for_one_tensor_and_a_tuple_for_several(torch):
    a, b = tape.tensor(np.array(1.5)), tape.tensor(np.ones(3))
    one = ops.atleast_2d(a)
    assert isinstance(one, tape.Tensor) and one.shape == (1, 1)
    several = ops.atleast_3d(a, b)
    assert isinstance(several, tuple) and [t.shape for t in several] == [(1, 1, 1), (1, 3, 1)]
    assert [tuple(t.shape) for t in torch.atleast_3d(torch.tensor(1.5), torch.ones(3))] == [(1, 1, 1), (1, 3, 1)]
    assert ops.atleast_1d([b]).shape == (3,)  # torch gives a 1-tuple here; the call cannot tell [b] from b


def test_stacks_join_like_torch_and_row_stack_is_vstack(torch):
    assert ops.row_stack is ops.vstack
    parts = [leaf(3), leaf(3, seed=1), leaf(2, 3, seed=2)]
    for name in ("vstack", "column_stack"):
        ts = parts[:2] if name == "column_stack" else parts
        check_against_torch(torch, lambda *t, name=name: (getattr(ops, name)(list(t)),),
                            lambda *t, name=name: (getattr(torch, name)(list(t)),), ts)


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda: ops.rot90(leaf(2, 3), 1, (0, 0)), ValueError, r"rot90: argument 'dims' expected two different dims"),
        (lambda: ops.rot90(leaf(2, 3), 1, (0,)), ValueError, r"rot90: argument 'dims' expected 2 dims"),
        (lambda: ops.fliplr(leaf(3)), ValueError, r"fliplr: argument 'input' expected a tensor with at least 2 dims"),
        (lambda: ops.block_diag(leaf(2, 2), leaf(1, 1, 1)), ValueError, r"block_diag: .* 0-D, 1-D or 2-D tensors"),
        (lambda: ops.kron(leaf(2), tape.tensor(np.ones(2, np.int64))), TypeError, r"kron: argument 'other' expected"),
        (lambda: ops.combinations(leaf(2, 2)), ValueError, r"combinations: argument 'input' expected a 1-D tensor"),
        (lambda: ops.combinations(leaf(3), -1), ValueError, r"combinations: argument 'r' expected an int >= 0, got -1"),
        (lambda: ops.cartesian_prod(leaf(2), leaf(2, 2)), ValueError, r"meshgrid: argument 'tensors' expected 0-D"),
        (lambda: ops.tensor_split(leaf(3), 0), ValueError, r"tensor_split: argument 'indices_or_sections' expected"),
        (lambda: ops.tensor_split(leaf(3), 1.5), TypeError, r"tensor_split: argument 'indices_or_sections' expected"),
        (lambda: ops.vstack([]), ValueError, r"vstack: argument 'tensors' expected at least one tensor"),
        (lambda: ops.hstack([leaf(2, 3), leaf(3, 3)]), ValueError, r"hstack: argument 'tensors' expected the same"),
        (lambda: ops.vander(leaf(2, 2)), ValueError, r"vander: argument 'x' expected a 1-D tensor"),
        (lambda: ops.diagonal_scatter(leaf(3, 3), leaf(2)), ValueError, r"diagonal_scatter: argument 'src' expected"),
    ],
)
def test_bad_input_to_the_new_movement_ops_names_op_and_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()
