"""Shape and indexing ops beyond the generated per-sample checks: joins of any number of tensors (one op,
sequence input), torch's advanced indexing (placement, accumulation, index immutability), the scatter ops,
second order through the scatters, zero-size shapes, the Tensor methods that route to shape ops, and bad
input (split and chunk, now ops of ops/movement.py, are tested in tests/ops/test_movement.py).

``sequence_op_check`` runs gradcheck, gradgradcheck and torch parity (values, gradients, double backward)
on a sequence-input op's samples (concat, stack; einsum in test_ops_linalg.py)."""

import numpy as np
import pytest
from oracle import LazyTorch

import ops
import tape
from tape import gradcheck
from tape.functional import gradients
from tape.gradcheck import gradgradcheck
from tape.tools.verify import op_samples

torch = LazyTorch()  # torch imported at first use: the module collects without torch


def leaf(*shape, seed=0, dtype=np.float64):
    return tape.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype), requires_grad=True)


def weighted_sum(outputs, seed=1):
    """sum_i sum(w_i * out_i) with fixed random weights: every output's gradient path is exercised."""
    rng = np.random.default_rng(seed)
    total = None
    for out in outputs:
        term = ops.sum(out * rng.standard_normal(out.shape))
        total = term if total is None else total + term
    return total


def torch_of(t, requires_grad=True):
    return torch.tensor(np.array(t.numpy()), requires_grad=requires_grad)


def assert_double_backward_matches_torch(fn, torch_fn, inputs, seed=5):
    """First and second derivatives of ``fn`` equal torch's: the gradients for a random cotangent u, and the
    gradients of <those gradients, v> with respect to the inputs and to u."""
    rng = np.random.default_rng(seed)
    out = fn(*inputs)
    u = tape.tensor(rng.standard_normal(out.shape), requires_grad=True)
    vs = [rng.standard_normal(t.shape) for t in inputs]
    first = gradients(out, inputs, [u], create_graph=True, allow_unused=True)
    inner = None
    for g, v in zip(first, vs):
        if g is not None:
            inner = ops.sum(g * v) if inner is None else inner + ops.sum(g * v)
    second = gradients(inner, list(inputs) + [u], allow_unused=True)

    refs = [torch_of(t) for t in inputs]
    expected = torch_fn(*refs)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-12, atol=1e-12)
    tu = torch.tensor(np.array(u.numpy()), requires_grad=True)
    t_first = torch.autograd.grad(expected, refs, tu, create_graph=True, allow_unused=True)
    t_inner = sum((g * torch.from_numpy(v)).sum() for g, v in zip(t_first, vs) if g is not None)
    t_second = torch.autograd.grad(t_inner, refs + [tu], allow_unused=True)
    for ours, theirs in zip(first, t_first):
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)
    for ours, theirs, shape in zip(second, t_second, [t.shape for t in inputs] + [out.shape]):
        a = np.zeros(shape) if ours is None else ours.numpy()
        b = np.zeros(shape) if theirs is None else theirs.numpy()
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


def sequence_op_check(op, sample, call):
    """gradcheck + gradgradcheck + torch parity of values, gradients and double backward, for one sample of
    an op whose tensors come as one sequence (``call(op, tensors, attrs)`` applies it)."""
    arrays = [np.asarray(a, dtype=np.float64) for a in sample.inputs[0]]

    def fn(*xs):
        return call(op, list(xs), sample.attrs)

    gradcheck(fn, [tape.tensor(a, requires_grad=True) for a in arrays])
    gradgradcheck(fn, [tape.tensor(a, requires_grad=True) for a in arrays])
    assert_double_backward_matches_torch(fn, lambda *ts: op.torch_ref(torch, list(ts), **sample.attrs),
                                         [tape.tensor(a, requires_grad=True) for a in arrays])
    for dtype in (np.float32,):
        out = fn(*[tape.tensor(a.astype(dtype)) for a in arrays])
        assert out.dtype == dtype


# -- concat / stack: one op, any number of tensors ---------------------------------------------------------
@pytest.mark.parametrize("name", ["concat", "stack"])
def test_joins_pass_first_and_second_order_checks_and_torch_parity_on_every_sample(name):
    op = tape.get_op(name)
    assert op.input_names == ("tensors",) and op.sequence == (True,)
    for sample in op_samples(op):
        sequence_op_check(op, sample, lambda op, tensors, attrs: op(tensors, **attrs))


@pytest.mark.parametrize("count", [1, 3, 9, 40])
@pytest.mark.parametrize("dim", [0, -1])
def test_concat_of_any_number_of_tensors_is_one_recorded_op_matching_torch(count, dim):
    tensors = [leaf(2, 1 + i % 3, seed=i) for i in range(count)] if dim == -1 else \
        [leaf(1 + i % 3, 2, seed=i) for i in range(count)]
    with tape.ExecutionTape() as recorded:
        out = ops.concat(tensors, dim=dim)
    assert [r.op_name for r in recorded.operations] == ["concat"]
    np.testing.assert_array_equal(out.numpy(), torch.cat([torch_of(t, False) for t in tensors], dim=dim).numpy())
    assert ops.cat is ops.concat
    gradcheck(lambda *ts: weighted_sum([ops.cat(list(ts), dim)]), tensors)


@pytest.mark.parametrize("count", [1, 3, 10, 24])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_stack_of_any_number_of_tensors_is_one_recorded_op_matching_torch(count, dim):
    tensors = [leaf(2, 3, seed=i) for i in range(count)]
    with tape.ExecutionTape() as recorded:
        out = ops.stack(tensors, dim=dim)
    assert [r.op_name for r in recorded.operations] == ["stack"]
    np.testing.assert_array_equal(out.numpy(), torch.stack([torch_of(t, False) for t in tensors], dim=dim).numpy())
    gradcheck(lambda *ts: weighted_sum([ops.stack(list(ts), dim)]), tensors)


def test_the_padded_slot_machinery_is_gone():
    for name in ("MAX_JOINED", "MAX_EINSUM_OPERANDS"):
        assert not hasattr(ops, name)
    assert tape.get_op("concat").signature == "concat(tensors, dim)"
    assert tape.get_op("stack").signature == "stack(tensors, dim)"


def test_concat_skips_1d_empty_tensors_and_joins_zero_size_ones_like_torch():
    a, b, e = leaf(2, 3), leaf(0, 3, seed=1), leaf(0, seed=2)
    for tensors, dim in (([a, b, a], 0), ([e, a, e], 1), ([e, e], 0), ([b, b], 1)):
        out = ops.concat(tensors, dim)
        expected = torch.cat([torch_of(t, False) for t in tensors], dim)
        assert out.shape == tuple(expected.shape)
        np.testing.assert_array_equal(out.numpy(), expected.numpy())
        ops.sum(out * 2.0).backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((2, 3), 6.0))  # twice in the first join, once in the second
    assert b.grad.shape == (0, 3) and e.grad.shape == (0,)


def test_same_tensor_joined_several_times_accumulates():
    x = leaf(3)
    ops.sum(ops.stack([x, x, x * 2.0])).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 4.0))


def test_numpy_concatenate_and_stack_on_tensors_record_the_join_ops_and_differentiate_twice():
    x, y = leaf(2, 3), leaf(1, 3, seed=1)
    assert_double_backward_matches_torch(lambda a, b: np.concatenate([a, b * b]) ** 2,
                                         lambda a, b: torch.cat([a, b * b]) ** 2, [x, y])
    assert_double_backward_matches_torch(lambda a, b: np.stack([a, a * b], axis=1) ** 3,
                                         lambda a, b: torch.stack([a, a * b], dim=1) ** 3, [x, leaf(2, 3, seed=3)])


# -- getitem: torch's advanced indexing ----------------------------------------------------------------------
def to_torch_index(index):
    if isinstance(index, tuple):
        return tuple(to_torch_index(i) for i in index)
    if isinstance(index, tape.Tensor):
        return torch.from_numpy(np.array(index.numpy()))
    if isinstance(index, np.ndarray):
        return torch.from_numpy(index)
    return index


Y = np.arange(120.0).reshape(2, 3, 4, 5)
INDEX_CASES = [
    ([0, 0, 1], "list of ints"),
    (((0, 0, 1),), "inner tuple"),
    (([1, 1, 0], slice(None), [1, 2, 2]), "arrays separated by a slice: their dim first"),
    ((0, slice(None), [1, 2]), "int then slice then list: int selects first (torch, not numpy)"),
    ((slice(None), 0, slice(None), [1, 2]), "slice, int, slice, list"),
    ((None, 0, slice(None), [1, 2]), "None then int"),
    ((0, Ellipsis, [1, 2]), "int, ellipsis, list"),
    ((np.array(0), slice(None), [1, 2]), "0-D array is an int"),
    ((slice(None), [0, 1], slice(None), 1), "list then int after a slice"),
    ((slice(None), [0, 1], None, 1), "list, None, int"),
    (([[0], [1]], slice(None), [1, 2]), "2-D list broadcasting"),
    ((0, [1, 2]), "int then adjacent list"),
    ((0, slice(None), np.array([True, False, True, True])), "int, slice, bool mask"),
    ((np.array([True, False]), slice(None), [1, 2]), "mask, slice, list"),
    ((slice(None), Y[0, :, :, 0] > 40), "2-D mask after a slice"),
    ((True,), "Python True adds a dim"),
    ((False, 1), "Python False: an empty dim"),
    (([0, 1], True), "list and True"),
    (([0, 1], slice(None), True), "list, slice, True"),
    ((np.array(True), 0), "0-D bool array"),
    (([-1, 0], slice(None), [-2]), "negative indices"),
    ((Ellipsis, [0, 1], 0), "ellipsis, list, int"),
    (([0, 1], Ellipsis, [0, -1]), "list, ellipsis, list"),
    (([0, 1], None, [1, 2]), "lists split by None"),
    ((slice(None), [0, 1], [1, 2]), "adjacent lists after a slice"),
    ((slice(1, None), [2, 0, 2], slice(None, None, 2), np.array(3)), "slices with step around list and 0-D"),
    (([],), "empty list"),
    (([], slice(None), []), "empty lists split by a slice"),
    ((Y[..., 0] > 50,), "3-D mask"),
    ((1, slice(None), Y[0, 0] > 50), "int then 2-D mask"),
    ((np.array([[1, 0], [1, 1]]), Ellipsis, None), "2-D array, ellipsis, None"),
    ((Ellipsis, False, np.array([[0], [9]]), slice(3, None)), "out-of-range position never read: no error"),
]


@pytest.mark.parametrize("index,label", INDEX_CASES, ids=[label for _, label in INDEX_CASES])
def test_advanced_indexing_places_dims_and_accumulates_exactly_like_torch(index, label):
    x = tape.tensor(Y / 7.0, requires_grad=True)
    out = x[index]
    reference = torch_of(x)
    expected = reference[to_torch_index(index)]
    assert out.shape == tuple(expected.shape), label
    np.testing.assert_array_equal(out.numpy(), expected.detach().numpy())
    g = np.random.default_rng(0).standard_normal(out.shape)
    out.backward(g)
    expected.backward(torch.from_numpy(g))
    np.testing.assert_allclose(x.grad.numpy(), reference.grad.numpy(), rtol=1e-12, atol=1e-12)


def random_item(rng, size, kind, ellipsis_taken):
    """One index item for a dim of ``size``: an int, slice, None, list, 0-D/2-D array, bool or Ellipsis."""
    if kind == 0:
        return int(rng.integers(-size, size))
    if kind == 1:
        return slice(int(rng.integers(0, size)), None, int(rng.integers(1, 3)))
    if kind == 2:
        return None
    if kind == 3:
        return [int(i) for i in rng.integers(-size, size, rng.integers(1, 4))]
    if kind == 4:
        return np.array(rng.integers(0, size))
    if kind == 5:
        return rng.integers(0, size, (2, 1))
    if kind == 6:
        return bool(rng.integers(0, 2))
    return slice(None) if kind == 7 or ellipsis_taken else Ellipsis


def random_index(rng, shape):
    """A random mix of ints, slices, None, Ellipsis, bools, lists and 0-D/2-D arrays for ``shape``."""
    index, dim = [], 0
    for _ in range(rng.integers(1, 5)):
        if dim >= len(shape):
            break
        item = random_item(rng, shape[dim], rng.integers(0, 9), any(i is Ellipsis for i in index))
        index.append(item)
        dim += item is not None and item is not Ellipsis and not isinstance(item, bool)
    return tuple(index)


def test_random_indices_match_torch_in_value_shape_gradient_and_error():
    rng = np.random.default_rng(1)
    data = rng.standard_normal((3, 4, 2, 5))
    compared = 0
    for _ in range(400):
        index = random_index(rng, data.shape)
        reference = torch.tensor(data, requires_grad=True)
        try:
            expected = reference[to_torch_index(tuple(torch.tensor(i) if isinstance(i, list) else i for i in index))]
        except (IndexError, RuntimeError):
            with pytest.raises(IndexError):
                tape.tensor(data)[index]
            continue
        x = tape.tensor(data, requires_grad=True)
        out = x[index]
        assert out.shape == tuple(expected.shape), index
        np.testing.assert_array_equal(out.numpy(), expected.detach().numpy())
        g = rng.standard_normal(out.shape)
        out.backward(g)
        expected.backward(torch.from_numpy(g))
        np.testing.assert_allclose(x.grad.numpy(), reference.grad.numpy(), rtol=1e-12, atol=1e-12, err_msg=str(index))
        compared += 1
    assert compared > 300


@pytest.mark.parametrize("index", [([1, 1, 0], slice(None), [1, 2, 2]), (0, slice(None), [1, 1]),
                                   (slice(None), Y[0, :, :, 0] > 40), [1, 1, 0], (Ellipsis, [0, 0], None, 1)])
def test_getitem_is_differentiable_twice_like_torch(index):
    x = tape.tensor(Y / 60.0, requires_grad=True)
    assert_double_backward_matches_torch(lambda t: t[index] ** 3, lambda t: t[to_torch_index(index)] ** 3, [x])


def test_a_repeated_list_position_gets_its_gradient_once_per_read():
    x = leaf(3, 2)
    ops.sum(x[[0, 0, 1]]).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2.0, 2.0], [1.0, 1.0], [0.0, 0.0]])
    y = leaf(4)
    ops.sum(y[(3, 3, 3, -1),]).backward()
    np.testing.assert_array_equal(y.grad.numpy(), [0.0, 0.0, 0.0, 4.0])


def test_tensor_indices_index_like_their_arrays_and_0d_int_tensors_select():
    x = tape.tensor(Y, requires_grad=True)
    rows = tape.tensor(np.array([1, 0, 1]))
    np.testing.assert_array_equal(x[rows, :, tape.tensor(np.array(2))].numpy(), Y[[1, 0, 1], :, 2])
    assert x[tape.tensor(np.array(1)), :, tape.tensor(np.array([0, 3]))].shape == (3, 2, 5)  # 0-D tensor = int
    mask = tape.tensor(Y[:, :, 0, 0] > 30)
    np.testing.assert_array_equal(x[mask].numpy(), Y[Y[:, :, 0, 0] > 30])


def test_a_recorded_index_cannot_change_afterwards():
    x = leaf(4, 3)
    index_array = np.array([0, 0, 2])
    index_tensor = tape.tensor(np.array([1, 1, 3]))
    index_list = [3, 3, 0]
    out = ops.sum(x[index_array] * 1.0) + ops.sum(x[index_tensor] * 10.0) + ops.sum(x[index_list] * 100.0)
    index_array[:] = 3  # refilling the buffer after the op was recorded
    index_tensor.data = np.array([2, 2, 2])  # a new value for the index tensor
    index_list[:] = [1, 1, 1]
    out.backward()
    np.testing.assert_array_equal(x.grad.numpy()[:, 0], [2.0 + 100.0, 20.0, 1.0, 10.0 + 200.0])
    with pytest.raises(ValueError):
        tape.tensor(np.arange(3)).numpy().__setitem__(0, 5)  # a tensor's array stays read-only


@pytest.mark.parametrize("index,error,words", [
    ((np.array([0.0, 1.0]),), IndexError, ("getitem", "dtype float64")),
    ((np.array([0, 1], np.uint8),), IndexError, ("getitem", "uint8")),
    ([[0, 1], [1, 2]], IndexError, ("getitem", "ambiguous", "tuple")),
    ([0, slice(None)], IndexError, ("getitem", "ambiguous")),
    ((slice(None, None, -1),), ValueError, ("getitem", "step", "flip")),
    ((slice(None), [0, 4]), IndexError, ("getitem", "out of bounds", "dimension 1", "size 4")),
    ((5,), IndexError, ("getitem", "does not fit", "(3, 4)")),
    ((np.ones(4, bool),), IndexError, ("getitem", "mask", "(4,)", "(3,)")),
    (([0, 1], [0, 1, 2]), IndexError, ("getitem", "broadcast")),
    ((0, 0, 0), IndexError, ("getitem", "too many")),
    ((Ellipsis, Ellipsis), IndexError, ("getitem", "ellipsis")),
    (("a",), IndexError, ("getitem", "str")),
])
def test_bad_indices_are_refused_naming_the_problem(index, error, words):
    x = tape.tensor(np.ones((3, 4)))
    with pytest.raises(error) as info:
        x[index]
    for word in words:
        assert word in str(info.value), f"{word!r} missing from: {info.value}"


# -- gather / index_select and their scatters --------------------------------------------------------------
def test_gather_and_index_select_accumulate_repeated_indices_like_torch():
    x = leaf(3, 4)
    index = np.array([[2, 2, 2, 0], [2, 1, 1, 1]])
    g = np.random.default_rng(3).standard_normal((2, 4))
    ops.gather(x, 0, index).backward(g)
    reference = torch_of(x)
    torch.gather(reference, 0, torch.from_numpy(index)).backward(torch.from_numpy(g))
    np.testing.assert_allclose(x.grad.numpy(), reference.grad.numpy())

    y = leaf(4, 2)
    ops.sum(ops.index_select(y, 0, np.array([3, 3, 3, 0]))).backward()
    np.testing.assert_array_equal(y.grad.numpy()[:, 0], [1.0, 0.0, 0.0, 3.0])


def t_index(*values):
    return torch.tensor(values)


@pytest.mark.parametrize("fn,torch_fn", [
    (lambda x: ops.gather(x, 1, np.array([[0, 0, 2], [1, 2, 2]])) ** 3,
     lambda x: torch.gather(x, 1, torch.tensor([[0, 0, 2], [1, 2, 2]])) ** 3),
    (lambda x: ops.index_select(x, 1, np.array([2, 0, 2, 2])) ** 3,
     lambda x: torch.index_select(x, 1, t_index(2, 0, 2, 2)) ** 3),
    (lambda x: ops.scatter_add(x * x, 1, np.array([[0, 0], [2, 0]]), x[:, :2] ** 2),
     lambda x: torch.scatter_add(x * x, 1, torch.tensor([[0, 0], [2, 0]]), x[:, :2] ** 2)),
    (lambda x: ops.index_add(x ** 2, 0, np.array([1, 1]), x * x, alpha=-0.5),
     lambda x: torch.index_add(x ** 2, 0, t_index(1, 1), x * x, alpha=-0.5)),
    (lambda x: ops.index_put(x ** 2, (np.array([0, 0, 1]), np.array([2, 2, 1])), x[0] ** 3, accumulate=True),
     lambda x: torch.index_put(x ** 2, (t_index(0, 0, 1), t_index(2, 2, 1)), x[0] ** 3, accumulate=True)),
    (lambda x: ops.index_put(x ** 2, (np.array([1, 0]),), x[1] ** 3),
     lambda x: torch.index_put(x ** 2, (t_index(1, 0),), x[1] ** 3)),
], ids=["gather", "index_select", "scatter_add", "index_add", "index_put accumulate", "index_put"])
def test_scatter_and_gather_ops_are_differentiable_twice_like_torch(fn, torch_fn):
    assert_double_backward_matches_torch(fn, torch_fn, [leaf(2, 3)])
    gradgradcheck(fn, [leaf(2, 3, seed=4)])


def test_scatter_add_gives_src_no_gradient_outside_the_index_block():
    x, src = leaf(4, 2), leaf(3, 2, seed=1)
    index = np.array([[1], [3]])  # reads only src[:2, :1]
    ops.sum(ops.scatter_add(x, 0, index, src) * 3.0).backward()
    np.testing.assert_array_equal(src.grad.numpy(), [[3.0, 0.0], [3.0, 0.0], [0.0, 0.0]])
    np.testing.assert_array_equal(x.grad.numpy(), np.full((4, 2), 3.0))
    gradgradcheck(lambda a, b: ops.scatter_add(a, 0, index, b) ** 2, [leaf(4, 2, seed=5), leaf(3, 2, seed=6)])


def test_the_first_order_backward_of_gather_like_ops_stays_on_arrays():
    """Without create_graph the rules run the numpy kernels: no Tensor (and no op) is made for the scatter."""
    x = leaf(3, 4)
    with tape.ExecutionTape() as recorded:
        out = ops.sum(ops.gather(x, 0, np.array([[0, 1, 2, 2]])) + ops.index_select(x, 0, np.array([1]))
                      + x[[0, 0]][:1])
        out.backward()
    assert "scatter_add" not in [r.op_name for r in recorded.operations]
    assert "index_add" not in [r.op_name for r in recorded.operations]
    assert "index_put" not in [r.op_name for r in recorded.operations]


def test_index_inputs_are_recorded_as_tensor_inputs_without_gradient():
    x = leaf(3, 4)
    index = tape.tensor(np.array([0, 2]))
    with tape.ExecutionTape() as recorded:
        out = ops.index_select(x, 1, index)
    assert [spec.id for spec in recorded.operations[0].inputs] == [x.id, index.id]
    for name in ("index_select", "gather"):
        assert tape.get_op(name).differentiable_inputs == ("input",)
    assert tape.get_op("scatter_add").differentiable_inputs == ("input", "src")
    assert tape.get_op("index_add").differentiable_inputs == ("input", "source")
    assert tape.get_op("index_put").input_names == ("input", "values")
    assert tape.get_op("masked_fill").differentiable_inputs == ("input", "value")  # value: torch's 0-D Tensor form
    assert out.shape == (3, 2)


# -- second order of the rearranging ops ---------------------------------------------------------------------
@pytest.mark.parametrize("fn,torch_fn", [
    (lambda x: ops.narrow(x, 1, 1, 2) ** 3, lambda x: torch.narrow(x, 1, 1, 2) ** 3),
    (lambda x: ops.pad(x, (1, -1, 2, 0), value=0.5) ** 3,
     lambda x: torch.nn.functional.pad(x, (1, -1, 2, 0), value=0.5) ** 3),
    (lambda x: ops.pad(x[None], (2, 1), mode="reflect") ** 3,
     lambda x: torch.nn.functional.pad(x[None], (2, 1), mode="reflect") ** 3),
    (lambda x: ops.pad(x[None], (3, 2, 1, 0), mode="replicate") ** 3,
     lambda x: torch.nn.functional.pad(x[None], (3, 2, 1, 0), mode="replicate") ** 3),
    (lambda x: ops.pad(x[None], (-1, 3), mode="circular") ** 3,
     lambda x: torch.nn.functional.pad(x[None], (-1, 3), mode="circular") ** 3),
    (lambda x: ops.repeat(x, (2, 1, 3)) ** 3, lambda x: x.repeat(2, 1, 3) ** 3),
], ids=["narrow", "pad constant", "pad reflect", "pad replicate", "pad circular", "repeat"])
def test_rearranging_ops_are_differentiable_twice_like_torch(fn, torch_fn):
    assert_double_backward_matches_torch(fn, torch_fn, [leaf(3, 4)])


# -- zero-size shapes ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn,torch_fn,shape", [
    (lambda x: ops.pad(x, (-3, 0)), lambda x: torch.nn.functional.pad(x, (-3, 0)), (2, 3)),
    (lambda x: ops.pad(x, (1, 1, 2, 0)), lambda x: torch.nn.functional.pad(x, (1, 1, 2, 0)), (0, 3)),
    (lambda x: ops.narrow(x, 0, 1, 0), lambda x: torch.narrow(x, 0, 1, 0), (3, 2)),
    (lambda x: ops.repeat(x, (0, 2)), lambda x: x.repeat(0, 2), (2, 2)),
    (lambda x: ops.expand(x, (0, 3)), lambda x: x.expand(0, 3), (1, 3)),
    (lambda x: x[[]], lambda x: x[[]], (3, 2)),
    (lambda x: x[:, [2, 2]], lambda x: x[:, [2, 2]], (0, 3)),
    (lambda x: ops.gather(x, 0, np.zeros((0, 3), np.int64)), lambda x: torch.gather(x, 0, torch.zeros(0, 3).long()),
     (2, 3)),
    (lambda x: ops.concat([x, x[:0]], 0), lambda x: torch.cat([x, x[:0]], 0), (2, 3)),
    (lambda x: ops.stack([x, x], 1), lambda x: torch.stack([x, x], 1), (0, 3)),
])
def test_zero_size_shapes_work_forward_and_backward_like_torch(fn, torch_fn, shape):
    x = leaf(*shape)
    out = fn(x)
    reference = torch_of(x)
    expected = torch_fn(reference)
    assert out.shape == tuple(expected.shape)
    g = np.ones(out.shape)
    out.backward(g)
    expected.backward(torch.from_numpy(g))
    assert x.grad.shape == x.shape
    np.testing.assert_array_equal(x.grad.numpy(), reference.grad.numpy())


# -- pad, repeat, masked_fill, tril/triu in float32 --------------------------------------------------------
@pytest.mark.parametrize("mode,pad", [("constant", (1, -1, 2, 0)), ("reflect", (2, 1)), ("replicate", (0, 3, 2, 1)),
                                      ("circular", (3, 1))])
def test_pad_float32_gradients_keep_dtype_and_match_torch(mode, pad):
    x = leaf(2, 3, 4, dtype=np.float32)
    out = ops.pad(x, pad, mode=mode)
    g = np.random.default_rng(4).standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    reference = torch_of(x)
    expected = torch.nn.functional.pad(reference, pad, mode=mode)
    expected.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(out.numpy(), expected.detach().numpy())
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.numpy(), reference.grad.numpy(), rtol=1e-6)


def test_repeat_takes_its_counts_as_one_tuple_list_or_int():
    x = leaf(2, 3)
    for out in (ops.repeat(x, (2, 1, 2)), ops.repeat(x, [2, 1, 2])):
        np.testing.assert_array_equal(out.numpy(), np.tile(x.numpy(), (2, 1, 2)))
    np.testing.assert_array_equal(ops.repeat(leaf(3), 2).numpy(), np.tile(leaf(3).numpy(), 2))
    assert tape.get_op("repeat").signature == "repeat(input, repeats)"
    gradcheck(lambda t: weighted_sum([ops.repeat(t, (3, 2))]), [x])


def test_masked_fill_broadcasts_the_mask_and_gives_no_gradient_where_filled():
    x = leaf(2, 3)
    mask = np.array([True, False, True])
    out = x.masked_fill(mask, -2.0)
    np.testing.assert_array_equal(out.numpy(), np.where(mask, -2.0, x.numpy()))
    ops.sum(out).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(~mask, (2, 3)).astype(float))
    assert ops.masked_fill(leaf(3, dtype=np.float32), mask, 1e-3).dtype == np.float32


# -- the Tensor methods route to these ops -----------------------------------------------------------------
def test_tensor_methods_use_the_shape_ops():
    x = leaf(2, 1, 3)
    a = x.numpy()
    np.testing.assert_array_equal(x.reshape(3, 2).numpy(), a.reshape(3, 2))
    np.testing.assert_array_equal(x.reshape((6,)).numpy(), a.reshape(6))
    np.testing.assert_array_equal(x.flatten(1).numpy(), a.reshape(2, 3))
    np.testing.assert_array_equal(x.transpose(0, 2).numpy(), a.transpose(2, 1, 0))
    np.testing.assert_array_equal(x.permute(2, 0, 1).numpy(), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(x.T.numpy(), a.T)
    assert x.squeeze().shape == (2, 3) and x.squeeze(1).shape == (2, 3) and x.squeeze(0).shape == (2, 1, 3)
    assert x.unsqueeze(-1).shape == (2, 1, 3, 1)
    assert x.expand(4, 2, 5, 3).shape == (4, 2, 5, 3) and x.expand((2, -1, 3)).shape == (2, 1, 3)
    assert ops.broadcast_to(x, (2, 4, 3)).shape == (2, 4, 3)
    np.testing.assert_array_equal(x[1, :, ::2].numpy(), a[1, :, ::2])


# -- bad input names the op and the argument ---------------------------------------------------------------
X = tape.tensor(np.ones((2, 3)))
I2 = np.zeros((2, 3), np.int64)


@pytest.mark.parametrize("call,error,words", [
    (lambda: ops.transpose(X, 0, 2), ValueError, ("transpose", "dim1")),
    (lambda: ops.squeeze(X, 2), ValueError, ("squeeze", "dim")),
    (lambda: ops.unsqueeze(X, -4), ValueError, ("unsqueeze", "dim")),
    (lambda: ops.flatten(X, 1, 0), ValueError, ("flatten", "start_dim")),
    (lambda: ops.permute(X, (0, 0)), ValueError, ("permute", "dims")),
    (lambda: ops.concat([X, X], dim=2), ValueError, ("concat", "dim")),
    (lambda: ops.stack([X, X], dim=-4), ValueError, ("stack", "dim")),
    (lambda: ops.narrow(X, 2, 0, 1), ValueError, ("narrow", "dim")),
    (lambda: ops.gather(X, 5, I2), ValueError, ("gather", "dim")),
    (lambda: ops.index_select(X, 1.5, np.zeros(2, np.int64)), TypeError, ("index_select", "dim")),
    (lambda: ops.split(X, 1, dim=3), ValueError, ("split", "dim")),
    (lambda: ops.reshape(X, (4, 2)), ValueError, ("reshape", "shape")),
    (lambda: ops.reshape(X, (2, "3")), TypeError, ("reshape", "shape")),
    (lambda: ops.expand(X, (3,)), ValueError, ("expand", "size")),
    (lambda: ops.expand(X, (4, 3)), ValueError, ("expand", "size")),
    (lambda: ops.expand(X, (-1, 2, 3)), ValueError, ("expand", "size")),
    (lambda: ops.concat([X, np.ones((3, 2))]), ValueError, ("concat", "tensors")),
    (lambda: ops.concat([X, np.ones(3)], dim=1), ValueError, ("concat", "tensors")),
    (lambda: ops.concat([]), ValueError, ("concat", "tensors")),
    (lambda: ops.concat(X), TypeError, ("concat", "tensors")),
    (lambda: ops.concat([np.ones(()), np.ones(())]), ValueError, ("concat", "tensors")),
    (lambda: ops.concat([X, np.ones((2, 3), np.int64)]), TypeError, ("concat", "tensors")),
    (lambda: ops.concat([X, None]), TypeError, ("concat", "tensors[1]")),
    (lambda: ops.stack([X, np.ones((2, 2))]), ValueError, ("stack", "tensors")),
    (lambda: ops.stack([]), ValueError, ("stack", "tensors")),
    (lambda: ops.split(X, [1, 2], dim=0), ValueError, ("split", "split_size_or_sections")),
    (lambda: ops.split(X, 0), ValueError, ("split", "split_size_or_sections")),
    (lambda: ops.chunk(X, 0), ValueError, ("chunk", "chunks")),
    (lambda: ops.narrow(X, 1, 2, 2), ValueError, ("narrow", "length")),
    (lambda: ops.narrow(X, 1, -4, 1), ValueError, ("narrow", "start")),
    (lambda: ops.gather(X, 0, np.zeros((2, 3))), TypeError, ("gather", "index")),
    (lambda: ops.gather(X, 0, np.zeros((2, 4), np.int64)), ValueError, ("gather", "index")),
    (lambda: ops.gather(X, 0, np.zeros(3, np.int64)), ValueError, ("gather", "index")),
    (lambda: ops.gather(X, 0, np.full((1, 1), 2)), IndexError, ("gather", "index")),
    (lambda: ops.gather(np.ones((2, 3)), 0, np.zeros((), np.int64)), ValueError, ("gather", "index", "2 dims")),
    (lambda: ops.index_select(X, 0, np.array([0.0, 1.0])), TypeError, ("index_select", "index")),
    (lambda: ops.index_select(X, 1, np.array([-1])), IndexError, ("index_select", "index")),
    (lambda: ops.index_select(X, 1, np.zeros((1, 1), np.int64)), ValueError, ("index_select", "index")),
    (lambda: ops.scatter_add(X, 0, I2, np.ones((1, 3))), ValueError, ("scatter_add", "src")),
    (lambda: ops.scatter_add(X, 1, np.zeros((3, 3), np.int64), np.ones((3, 3))), ValueError,
     ("scatter_add", "index")),
    (lambda: ops.scatter_add(X, 1, np.full((1, 1), 3), np.ones((1, 1))), IndexError,
     ("scatter_add", "index", "[0, 2]")),
    (lambda: ops.scatter_add(X, 0, I2, np.ones((2, 3), np.float32)), TypeError, ("scatter_add",)),
    (lambda: ops.scatter_add(X, 0, I2.astype(float), np.ones((2, 3))), TypeError, ("scatter_add", "index")),
    (lambda: ops.index_add(X, 0, np.array([0, 1]), np.ones((2, 1))), ValueError, ("index_add", "source", "(2, 3)")),
    (lambda: ops.index_add(X, 0, np.array([[0, 1]]), np.ones((2, 3))), ValueError, ("index_add", "index")),
    (lambda: ops.index_add(X, 0, np.array([2]), np.ones((1, 3))), IndexError, ("index_add", "index")),
    (lambda: ops.index_add(X, 0, np.array([1]), np.ones((1, 3)), alpha="2"), TypeError, ("index_add", "alpha")),
    (lambda: ops.index_put(X, (np.array([0, 0]),), np.ones(3)), ValueError, ("index_put", "indices", "accumulate")),
    (lambda: ops.index_put(X, (), np.ones(3)), ValueError, ("index_put", "indices")),
    (lambda: ops.index_put(X, (0,), np.ones(3)), TypeError, ("index_put", "indices")),
    (lambda: ops.index_put(X, np.array([0]), np.ones(3)), TypeError, ("index_put", "indices")),
    (lambda: ops.index_put(X, (np.array([0, 1]),), np.ones(2)), ValueError, ("index_put", "values", "(2, 3)")),
    (lambda: ops.index_put(X, (np.array([5]),), np.ones(3)), IndexError, ("index_put", "out of bounds")),
    (lambda: ops.masked_fill(X, np.ones((2, 3)), 0.0), TypeError, ("masked_fill", "mask")),
    (lambda: ops.masked_fill(X, np.ones((3, 3), bool), 0.0), ValueError, ("masked_fill", "mask")),
    (lambda: ops.masked_fill(X, np.ones(3, bool), tape.tensor(1.0, requires_grad=True)), TypeError,
     ("masked_fill", "value")),
    (lambda: ops.masked_fill(X, np.ones(3, bool), "big"), TypeError, ("masked_fill", "value")),
    (lambda: ops.pad(X, (1,)), ValueError, ("pad", "pad")),
    (lambda: ops.pad(X, (1, 1) * 3), ValueError, ("pad", "pad")),
    (lambda: ops.pad(X, (1, 1), mode="mirror"), ValueError, ("pad", "mode")),
    (lambda: ops.pad(X, (3, 0), mode="reflect"), ValueError, ("pad", "pad")),
    (lambda: ops.pad(X, (1, 1, 1, 1), mode="reflect"), ValueError, ("pad", "pad")),
    (lambda: ops.pad(X, (-2, -2)), ValueError, ("pad", "pad")),
    (lambda: ops.pad(X, (2, -4)), ValueError, ("pad", "pad", "cropping more")),
    (lambda: ops.pad(X, (-1, -2), mode="reflect"), ValueError, ("pad", "pad")),
    (lambda: ops.pad(np.ones((2, 0, 3)), (1, 1), mode="replicate"), ValueError, ("pad", "input", "batch")),
    (lambda: ops.tril(np.ones(3)), ValueError, ("tril", "input")),
    (lambda: ops.triu(X, 0.5), TypeError, ("triu", "diagonal")),
    (lambda: ops.repeat(X, 2), ValueError, ("repeat", "repeats")),
    (lambda: ops.repeat(X, (2, -1)), ValueError, ("repeat", "repeats")),
    (lambda: ops.repeat(X, 2, 1), TypeError, ("repeat",)),
])
def test_bad_input_is_refused_naming_op_and_argument(call, error, words):
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} missing from: {message}"


# -- issue #21: torch's other names and forms of the shape ops --------------------------------------------------
def test_torch_aliases_with_torchs_signature_are_the_same_op():
    assert ops.moveaxis is ops.movedim and ops.broadcast_to is ops.expand and ops.cat is ops.concat
    assert tape.get_op("expand").signature == "expand(input, size)"  # torch's keyword (Tensor.expand(size=...))
    assert ops.broadcast_to(leaf(3), size=(2, 3)).shape == (2, 3)
    with pytest.raises(TypeError, match="swapdims: missing required argument"):  # torch's both dims are required
        ops.swapdims(leaf(2, 3))
    assert ops.swapaxes(leaf(2, 3, 4), axis0=0, axis1=2).shape == (4, 3, 2)
    assert ops.concatenate([leaf(2), leaf(3)], axis=0).shape == (5,)


@pytest.mark.parametrize("shape,fn,torch_fn", [
    ((3, 4), lambda x: ops.select(x, 1, -1), lambda x: torch.select(x, 1, -1)),
    ((2, 3, 4), lambda x: ops.movedim(x, (0, 2), (2, 0)), lambda x: torch.movedim(x, (0, 2), (2, 0))),
    ((3, 4), lambda x: ops.unflatten(x, 1, (-1, 1)), lambda x: torch.unflatten(x, 1, (-1, 1))),
    ((3, 4), lambda x: ops.select_scatter(x, ops.sin(ops.select(x, 0, 1)), 0, 0),
     lambda x: torch.select_scatter(x, torch.sin(torch.select(x, 0, 1)), 0, 0)),
    ((3, 4), lambda x: ops.slice_scatter(x, ops.exp(x[:, 1:3]), 1, 0, 3, 2),
     lambda x: torch.slice_scatter(x, torch.exp(x[:, 1:3]), 1, 0, 3, 2)),
    ((3, 4), lambda x: ops.reshape_as(ops.expand_as(x[:1], x), x.T), lambda x: x[:1].expand_as(x).reshape_as(x.T)),
])
def test_new_shape_ops_are_differentiable_twice_like_torch(shape, fn, torch_fn):
    assert_double_backward_matches_torch(fn, torch_fn, [leaf(*shape)])


def test_view_as_gives_other_a_zero_gradient_as_torchs_none():
    x, other = leaf(2, 3), leaf(3, 2, seed=1)
    ops.sum(ops.view_as(x, other) * 2.0).backward()
    np.testing.assert_array_equal(other.grad.numpy(), np.zeros((3, 2)))
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 2.0))


def test_broadcast_tensors_keep_their_dtypes_and_sum_their_gradients_back(torch):
    a, b = leaf(2, 1, 3), leaf(4, 1, seed=1)
    outs = ops.broadcast_tensors(a, b)
    expected = torch.broadcast_tensors(torch_of(a, False), torch_of(b, False))
    assert [o.shape for o in outs] == [tuple(e.shape) for e in expected] == [(2, 4, 3)] * 2
    ops.sum(outs[0] * outs[1]).backward()
    ta, tb = torch_of(a), torch_of(b)
    ea, eb = torch.broadcast_tensors(ta, tb)
    (ea * eb).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-14)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-14)
    ints = ops.broadcast_tensors(tape.tensor(np.array([1, 2])), tape.tensor(np.ones((2, 1))))
    assert ints[0].dtype == np.int64 and ints[1].dtype == np.float64


def test_the_new_tensor_methods_are_the_ops(torch):
    t = torch.tensor(np.random.default_rng(0).standard_normal((2, 3)))
    x = tape.tensor(t.numpy().copy())
    index = tape.tensor(np.array([1, 0]))
    calls = [
        ("movedim", (0, 1)), ("moveaxis", (0, 1)), ("swapaxes", (0, 1)), ("swapdims", (0, 1)), ("ravel", ()),
        ("unflatten", (1, (3, 1))), ("select", (1, -1)), ("broadcast_to", ((2, 2, 3),)), ("fliplr", ()),
        ("flipud", ()), ("rot90", (1, (1, 0))), ("diff", ()), ("histc", (4,)), ("argwhere", ()),
    ]
    for name, args in calls:
        np.testing.assert_array_equal(getattr(x, name)(*args).numpy(), getattr(t, name)(*args).numpy(), err_msg=name)
    for name, args in (("tensor_split", (2, 1)), ("hsplit", ([1],)), ("vsplit", (2,))):
        for ours, theirs in zip(getattr(x, name)(*args), getattr(t, name)(*args)):
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    expected = t.index_fill(1, torch.tensor([1, 0]), 2.0)
    np.testing.assert_array_equal(x.index_fill(1, index, 2.0).numpy(), expected.numpy())
    np.testing.assert_array_equal(x.take(index).numpy(), t.take(torch.tensor([1, 0])).numpy())
    np.testing.assert_array_equal(x.kron(x).numpy(), t.kron(t).numpy())
    np.testing.assert_array_equal(x.view_as(x.T).numpy(), t.view_as(t.T).numpy())
    assert x.contiguous() is x


@pytest.mark.parametrize("call,error,words", [
    (lambda: ops.movedim(X, (0, 0), (1, 0)), ValueError, ("movedim", "source", "repeats")),
    (lambda: ops.movedim(X, 0, (1, 0)), ValueError, ("movedim", "source", "destination", "same number")),
    (lambda: ops.swapaxes(X, 0, 2), ValueError, ("swapaxes", "axis1")),
    (lambda: ops.unflatten(X, 1, (2, 2)), ValueError, ("unflatten", "sizes", "product is 3")),
    (lambda: ops.unflatten(X, 1, 3), TypeError, ("unflatten", "sizes", "sequence")),
    (lambda: ops.unflatten(X, 1, (-1, -1)), ValueError, ("unflatten", "sizes", "at most one -1")),
    (lambda: ops.select(X, 1, 3), IndexError, ("select", "index", "[-3, 2]")),
    (lambda: ops.select(X, 1, 1.0), TypeError, ("select", "index", "int")),
    (lambda: ops.select_scatter(X, tape.tensor(np.ones(2)), 0, 0), ValueError, ("select_scatter", "src", "(3,)")),
    (lambda: ops.slice_scatter(X, tape.tensor(np.ones((2, 2))), 1, step=0), ValueError, ("slice_scatter", "step")),
    (lambda: ops.slice_scatter(X, tape.tensor(np.ones((2, 2))), 1), ValueError, ("slice_scatter", "src", "(2, 3)")),
    (lambda: ops.view_as(X, tape.tensor(np.ones(5))), ValueError, ("view_as", "other", "6 elements")),
    (lambda: ops.expand_as(X, tape.tensor(np.ones((2, 2)))), ValueError, ("expand_as", "other")),
    (lambda: ops.broadcast_tensors(X, tape.tensor(np.ones(2))), ValueError, ("broadcast_tensors", "broadcastable")),
    (lambda: ops.concatenate([X, tape.tensor(np.ones((2, 2)))], axis=0), ValueError, ("concatenate", "tensors")),
])
def test_bad_input_to_the_new_shape_ops_names_op_and_argument(call, error, words):
    with pytest.raises(error) as info:
        call()
    for word in words:
        assert word in str(info.value), f"{word!r} missing from: {info.value}"
