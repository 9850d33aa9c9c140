"""Shape ops beyond the generated per-sample checks: multi-output helpers (split, chunk), joins of many
tensors, the Tensor methods that route to shape ops, gradient accumulation, and bad input."""

import numpy as np
import pytest
import torch

import ops
import tape
from tape import gradcheck


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


# -- split / chunk -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("sizes,dim", [(2, 0), ([1, 3, 1], 0), (3, -1), ([4, 0, 1], -1), (10, 1)])
def test_split_matches_torch_and_every_piece_sends_its_gradient_back(sizes, dim):
    x = leaf(5, 5)
    pieces = ops.split(x, sizes, dim)
    expected = torch.split(torch.from_numpy(np.array(x.data)), sizes, dim)
    assert len(pieces) == len(expected)
    for ours, theirs in zip(pieces, expected):
        np.testing.assert_array_equal(ours.data, theirs.numpy())
    gradcheck(lambda t: weighted_sum(ops.split(t, sizes, dim)), [x])


@pytest.mark.parametrize("length,chunks", [(5, 4), (6, 4), (3, 5), (7, 1)])
def test_chunk_matches_torch_including_fewer_chunks_than_asked(length, chunks):
    x = leaf(2, length)
    pieces = ops.chunk(x, chunks, dim=-1)
    expected = torch.chunk(torch.from_numpy(np.array(x.data)), chunks, dim=-1)
    assert [p.shape for p in pieces] == [tuple(e.shape) for e in expected]
    gradcheck(lambda t: weighted_sum(ops.chunk(t, chunks, dim=-1)), [x])


def test_split_pieces_used_twice_accumulate():
    x = leaf(4, 3)
    a, b = ops.split(x, 2)
    (ops.sum(a * a) + ops.sum(a) + ops.sum(b)).backward()
    expected = np.ones((4, 3))
    expected[:2] += 2 * x.data[:2]
    np.testing.assert_allclose(x.grad.data, expected)


# -- concat / stack with many tensors ----------------------------------------------------------------------
@pytest.mark.parametrize("count", [3, ops.MAX_JOINED, ops.MAX_JOINED + 1, 2 * ops.MAX_JOINED + 3])
@pytest.mark.parametrize("dim", [0, -1])
def test_concat_of_many_tensors_matches_numpy_with_gradients(count, dim):
    tensors = [leaf(2, 1 + i % 3, seed=i) for i in range(count)] if dim == -1 else \
        [leaf(1 + i % 3, 2, seed=i) for i in range(count)]
    out = ops.concat(tensors, dim=dim)
    np.testing.assert_array_equal(out.data, np.concatenate([t.data for t in tensors], axis=dim))
    assert ops.cat is ops.concat
    gradcheck(lambda *ts: weighted_sum([ops.cat(list(ts), dim)]), tensors)


@pytest.mark.parametrize("count", [3, ops.MAX_JOINED + 2, 3 * ops.MAX_JOINED])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_stack_of_many_tensors_matches_torch_with_gradients(count, dim):
    tensors = [leaf(2, 3, seed=i) for i in range(count)]
    out = ops.stack(tensors, dim=dim)
    expected = torch.stack([torch.from_numpy(np.array(t.data)) for t in tensors], dim=dim)
    np.testing.assert_array_equal(out.data, expected.numpy())
    gradcheck(lambda *ts: weighted_sum([ops.stack(list(ts), dim)]), tensors)


def test_concat_up_to_max_is_one_recorded_op_and_beyond_a_shallow_tree():
    with tape.ExecutionTape() as recorded:
        ops.concat([leaf(2) for _ in range(ops.MAX_JOINED)])
    assert [r.op_name for r in recorded.operations] == ["concat"]
    with tape.ExecutionTape() as recorded:
        ops.concat([leaf(2) for _ in range(ops.MAX_JOINED + 1)])
    assert [r.op_name for r in recorded.operations] == ["concat", "concat", "concat"]
    assert sum(spec is not None for spec in recorded.operations[-1].inputs) == 2


def test_same_tensor_joined_several_times_accumulates():
    x = leaf(3)
    ops.sum(ops.stack([x, x, x * 2.0])).backward()
    np.testing.assert_allclose(x.grad.data, np.full(3, 4.0))


# -- gather / index_select accumulate ----------------------------------------------------------------------
def test_gather_and_index_select_accumulate_repeated_indices_like_torch():
    x = leaf(3, 4)
    index = np.array([[2, 2, 2, 0], [2, 1, 1, 1]])
    g = np.random.default_rng(3).standard_normal((2, 4))
    ops.gather(x, 0, index).backward(g)
    reference = torch.from_numpy(np.array(x.data)).requires_grad_()
    torch.gather(reference, 0, torch.from_numpy(index)).backward(torch.from_numpy(g))
    np.testing.assert_allclose(x.grad.data, reference.grad.numpy())

    y = leaf(4, 2)
    ops.sum(ops.index_select(y, 0, np.array([3, 3, 3, 0]))).backward()
    np.testing.assert_array_equal(y.grad.data[:, 0], [1.0, 0.0, 0.0, 3.0])


def test_index_inputs_are_recorded_as_tensor_inputs_without_gradient():
    x = leaf(3, 4)
    index = tape.tensor(np.array([0, 2]))
    with tape.ExecutionTape() as recorded:
        out = ops.index_select(x, 1, index)
    assert [spec.id for spec in recorded.operations[0].inputs] == [x.id, index.id]
    assert tape.get_op("index_select").differentiable_inputs == ("input",)
    assert tape.get_op("gather").differentiable_inputs == ("input",)
    assert tape.get_op("masked_fill").differentiable_inputs == ("x",)
    assert out.shape == (3, 2)


# -- pad, repeat, masked_fill, tril/triu in float32 --------------------------------------------------------
@pytest.mark.parametrize("mode,pad", [("constant", (1, -1, 2, 0)), ("reflect", (2, 1)), ("replicate", (0, 3, 2, 1)),
                                      ("circular", (3, 1))])
def test_pad_float32_gradients_keep_dtype_and_match_torch(mode, pad):
    x = leaf(2, 3, 4, dtype=np.float32)
    out = ops.pad(x, pad, mode=mode)
    g = np.random.default_rng(4).standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    reference = torch.from_numpy(np.array(x.data)).requires_grad_()
    expected = torch.nn.functional.pad(reference, pad, mode=mode)
    expected.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(out.data, expected.detach().numpy())
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.data, reference.grad.numpy(), rtol=1e-6)


def test_repeat_takes_sizes_as_varargs_or_one_sequence():
    x = leaf(2, 3)
    for out in (ops.repeat(x, 2, 1, 2), ops.repeat(x, (2, 1, 2)), ops.repeat(x, [2, 1, 2])):
        np.testing.assert_array_equal(out.data, np.tile(x.data, (2, 1, 2)))
    gradcheck(lambda t: weighted_sum([ops.repeat(t, 3, 2)]), [x])


def test_masked_fill_broadcasts_the_mask_and_gives_no_gradient_where_filled():
    x = leaf(2, 3)
    mask = np.array([True, False, True])
    out = x.masked_fill(mask, -2.0)
    np.testing.assert_array_equal(out.data, np.where(mask, -2.0, x.data))
    ops.sum(out).backward()
    np.testing.assert_array_equal(x.grad.data, np.broadcast_to(~mask, (2, 3)).astype(float))
    assert ops.masked_fill(leaf(3, dtype=np.float32), mask, 1e-3).dtype == np.float32


# -- the Tensor methods route to these ops -----------------------------------------------------------------
def test_tensor_methods_use_the_shape_ops():
    x = leaf(2, 1, 3)
    a = x.data
    np.testing.assert_array_equal(x.reshape(3, 2).data, a.reshape(3, 2))
    np.testing.assert_array_equal(x.reshape((6,)).data, a.reshape(6))
    np.testing.assert_array_equal(x.flatten(1).data, a.reshape(2, 3))
    np.testing.assert_array_equal(x.transpose(0, 2).data, a.transpose(2, 1, 0))
    np.testing.assert_array_equal(x.permute(2, 0, 1).data, a.transpose(2, 0, 1))
    np.testing.assert_array_equal(x.T.data, a.T)
    assert x.squeeze().shape == (2, 3) and x.squeeze(1).shape == (2, 3) and x.squeeze(0).shape == (2, 1, 3)
    assert x.unsqueeze(-1).shape == (2, 1, 3, 1)
    assert x.expand(4, 2, 5, 3).shape == (4, 2, 5, 3) and x.expand((2, -1, 3)).shape == (2, 1, 3)
    assert ops.broadcast_to(x, (2, 4, 3)).shape == (2, 4, 3)
    np.testing.assert_array_equal(x[1, :, ::2].data, a[1, :, ::2])


# -- bad input names the op and the argument ---------------------------------------------------------------
X = tape.tensor(np.ones((2, 3)))


@pytest.mark.parametrize("call,error,words", [
    (lambda: ops.transpose(X, 0, 2), ValueError, ("transpose", "dim1")),
    (lambda: ops.squeeze(X, 2), ValueError, ("squeeze", "dim")),
    (lambda: ops.unsqueeze(X, -4), ValueError, ("unsqueeze", "dim")),
    (lambda: ops.flatten(X, 1, 0), ValueError, ("flatten", "start_dim")),
    (lambda: ops.permute(X, (0, 0)), ValueError, ("permute", "dims")),
    (lambda: ops.concat([X, X], dim=2), ValueError, ("concat", "dim")),
    (lambda: ops.stack([X, X], dim=-4), ValueError, ("stack", "dim")),
    (lambda: ops.narrow(X, 2, 0, 1), ValueError, ("narrow", "dim")),
    (lambda: ops.gather(X, 5, np.zeros((2, 3), np.int64)), ValueError, ("gather", "dim")),
    (lambda: ops.index_select(X, 1.5, np.zeros(2, np.int64)), TypeError, ("index_select", "dim")),
    (lambda: ops.split(X, 1, dim=3), ValueError, ("split", "dim")),
    (lambda: ops.reshape(X, (4, 2)), ValueError, ("reshape", "shape")),
    (lambda: ops.reshape(X, (2, "3")), TypeError, ("reshape", "shape")),
    (lambda: ops.expand(X, (3,)), ValueError, ("expand", "shape")),
    (lambda: ops.expand(X, (4, 3)), ValueError, ("expand", "shape")),
    (lambda: ops.expand(X, (-1, 2, 3)), ValueError, ("expand", "shape")),
    (lambda: ops.concat([X, np.ones((3, 2))]), ValueError, ("concat", "tensors")),
    (lambda: ops.concat([X, np.ones(3)], dim=1), ValueError, ("concat", "tensors")),
    (lambda: ops.concat([]), ValueError, ("concat", "tensors")),
    (lambda: ops.concat(X), TypeError, ("concat", "tensors")),
    (lambda: ops.concat([np.ones(()), np.ones(())]), ValueError, ("concat", "tensors")),
    (lambda: ops.concat([X, np.ones((2, 3), np.int64)]), TypeError, ("concat", "tensors")),
    (lambda: ops.stack([X, np.ones((2, 2))]), ValueError, ("stack", "tensors")),
    (lambda: ops.split(X, [1, 2], dim=0), ValueError, ("split", "split_size_or_sections")),
    (lambda: ops.split(X, 0), ValueError, ("split", "split_size_or_sections")),
    (lambda: ops.chunk(X, 0), ValueError, ("chunk", "chunks")),
    (lambda: ops.narrow(X, 1, 2, 2), ValueError, ("narrow", "length")),
    (lambda: ops.narrow(X, 1, -4, 1), ValueError, ("narrow", "start")),
    (lambda: ops.gather(X, 0, np.zeros((2, 3))), TypeError, ("gather", "index")),
    (lambda: ops.gather(X, 0, np.zeros((2, 4), np.int64)), ValueError, ("gather", "index")),
    (lambda: ops.gather(X, 0, np.zeros(3, np.int64)), ValueError, ("gather", "index")),
    (lambda: ops.gather(X, 0, np.full((1, 1), 2)), IndexError, ("gather", "index")),
    (lambda: ops.index_select(X, 0, np.array([0.0, 1.0])), TypeError, ("index_select", "index")),
    (lambda: ops.index_select(X, 1, np.array([-1])), IndexError, ("index_select", "index")),
    (lambda: ops.index_select(X, 1, np.zeros((1, 1), np.int64)), ValueError, ("index_select", "index")),
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
    (lambda: ops.tril(np.ones(3)), ValueError, ("tril", "input")),
    (lambda: ops.triu(X, 0.5), TypeError, ("triu", "diagonal")),
    (lambda: ops.repeat(X, 2), ValueError, ("repeat", "repeats")),
    (lambda: ops.repeat(X, 2, -1), ValueError, ("repeat", "repeats")),
])
def test_bad_input_is_refused_naming_op_and_argument(call, error, words):
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} missing from: {message}"
