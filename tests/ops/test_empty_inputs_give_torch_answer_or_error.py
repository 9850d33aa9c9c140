"""Inputs where something other than torch's answer or a clear error used to escape (issue 19, "Clear errors"):
attention with no queries / no keys / no heads / an empty batch / head dim 0 and MultiHeadAttention on a
length-0 sequence (a ZeroDivisionError), ExecutionTape.prune of a non-tensor (a raw int() TypeError),
take_along_dim with negative indices (torch counts them from the end), transpose of a 0-D tensor (numpy's
AxisError), and pooling an input with an empty channel or length dim (torch refuses; minitape returned)."""

import numpy as np
import pytest

import ops
import tape
from tape import nn
from tape.tapes import ExecutionTape


def _attention_both(torch, shapes, **attrs):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    ours = [tape.tensor(a, requires_grad=True) for a in arrays]
    out = ops.scaled_dot_product_attention(*ours, **attrs)
    w = rng.standard_normal(out.shape)
    ops.sum(out * w).backward()
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    t_out = torch.nn.functional.scaled_dot_product_attention(*theirs, **attrs)
    (t_out * torch.from_numpy(w)).sum().backward()
    assert out.shape == tuple(t_out.shape)
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), atol=1e-12)
    for a, b in zip(ours, theirs):
        expected = np.zeros(a.shape) if b.grad is None else b.grad.numpy()
        assert a.grad.shape == expected.shape
        np.testing.assert_allclose(a.grad.numpy(), expected, atol=1e-12)
    return out


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("label,shapes", [
    ("no queries (L = 0)", [(2, 0, 4), (2, 3, 4), (2, 3, 5)]),
    ("no keys (S = 0): output 0", [(2, 3, 4), (2, 0, 4), (2, 0, 5)]),
    ("no queries, no keys", [(2, 0, 4), (2, 0, 4), (2, 0, 5)]),
    ("no heads", [(0, 3, 4), (0, 3, 4), (0, 3, 5)]),
    ("empty batch", [(1, 0, 3, 4), (1, 0, 3, 4), (1, 0, 3, 4)]),
    ("head dim 0: uniform weights", [(2, 3, 0), (2, 3, 0), (2, 3, 5)]),
    ("value dim 0", [(2, 3, 4), (2, 3, 4), (2, 3, 0)]),
])
def test_attention_on_empty_dims_matches_torch_forward_and_backward(torch, label, shapes, is_causal):
    _attention_both(torch, shapes, is_causal=is_causal)


def test_attention_with_no_queries_and_grouped_heads_matches_torch(torch):
    _attention_both(torch, [(2, 4, 0, 4), (2, 2, 3, 4), (2, 2, 3, 4)], enable_gqa=True)


def test_attention_with_no_keys_gives_zeros_like_torch(torch):
    out = _attention_both(torch, [(1, 2, 3, 4), (1, 2, 0, 4), (1, 2, 0, 5)])
    np.testing.assert_array_equal(out.numpy(), np.zeros((1, 2, 3, 5)))


def test_multi_head_attention_on_a_length_0_sequence_matches_torch(torch):
    m = nn.MultiHeadAttention(8, 2)
    x = tape.tensor(np.zeros((2, 0, 8), dtype=np.float32), requires_grad=True)
    y = m(x)
    t = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    tx = torch.zeros(2, 0, 8)
    assert y.shape == tuple(t(tx, tx, tx)[0].shape) == (2, 0, 8)
    ops.sum(y).backward()
    assert x.grad.shape == (2, 0, 8)
    for p in m.parameters():
        assert p.grad is not None and p.grad.shape == p.shape
        np.testing.assert_array_equal(p.grad.numpy(), np.zeros(p.shape))  # nothing reached the output


@pytest.mark.parametrize("bad", [[None], [1.5], ["3"], [True], None, 3])
def test_prune_of_something_other_than_tensors_or_ids_is_a_clear_type_error(bad):
    with ExecutionTape() as recorded:
        x = tape.tensor([1.0, 2.0])
        ops.sum(x * 2.0)
    with pytest.raises(TypeError, match=r"prune: argument 'keep_outputs' expected"):
        recorded.prune(bad)


def test_take_along_dim_counts_negative_indices_from_the_end_like_torch(torch):
    a = np.arange(12.0).reshape(3, 4)
    index = np.array([[-1, 3, -4], [-2, 1, 0], [0, -3, -1]])
    t = tape.tensor(a, requires_grad=True)
    out = ops.take_along_dim(t, index, dim=1)
    w = np.linspace(0.5, 2.0, out.numel()).reshape(out.shape)
    ops.sum(out * w).backward()
    ref = torch.tensor(a, requires_grad=True)
    t_out = torch.take_along_dim(ref, torch.from_numpy(index), dim=1)
    (t_out * torch.from_numpy(w)).sum().backward()
    np.testing.assert_array_equal(out.numpy(), t_out.detach().numpy())
    np.testing.assert_array_equal(t.grad.numpy(), ref.grad.numpy())
    np.testing.assert_array_equal(out.numpy(), np.take_along_axis(a, index % 4, axis=1))  # the exact reference


@pytest.mark.parametrize("index,dim", [([[4], [0], [0]], 1), ([[-5], [0], [0]], 1), ([-1], None), ([12], None)])
def test_take_along_dim_refuses_indices_out_of_range(index, dim):
    # torch 2.13 wraps 4 and -5 modulo the size with a dim (a silent wrong element) and refuses them without one
    with pytest.raises(IndexError, match="take_along_dim: argument 'indices' expected values in"):
        ops.take_along_dim(tape.tensor(np.ones((3, 4))), np.array(index), dim=dim)


@pytest.mark.parametrize("dims", [(0, 0), (-1, 0), (0, -1), (-1, -1)])
def test_transpose_of_a_0d_tensor_is_itself_like_torch(torch, dims):
    t = tape.tensor(3.0, requires_grad=True)
    out = ops.transpose(t, *dims)
    assert out.shape == tuple(torch.transpose(torch.tensor(3.0), *dims).shape) == ()
    (out * 2.0).backward()
    assert t.grad.numpy() == 2.0


@pytest.mark.parametrize("dims", [(1, 0), (0, -2)])
def test_transpose_of_a_0d_tensor_refuses_other_dims_like_torch(dims):
    with pytest.raises(ValueError, match=r"transpose: argument 'dim[01]' expected a dim in \[-1, 0\]"):
        ops.transpose(tape.tensor(3.0), *dims)


POOLS = [("max_pool1d", 1), ("avg_pool1d", 1), ("max_pool2d", 2), ("avg_pool2d", 2), ("max_pool2d_with_indices", 2)]


def _torch_pool(torch, name):
    if name == "max_pool2d_with_indices":
        return lambda x, k: torch.nn.functional.max_pool2d(x, k, return_indices=True)
    return getattr(torch.nn.functional, name)


@pytest.mark.parametrize("name,spatial", POOLS)
@pytest.mark.parametrize("empty", ["unbatched channels", "batched channels"])
def test_pooling_an_empty_channel_dim_raises_like_torch(torch, name, spatial, empty):
    shape = ((0,) if empty == "unbatched channels" else (2, 0)) + (4,) * spatial
    with pytest.raises(RuntimeError):
        _torch_pool(torch, name)(torch.zeros(shape), 2)
    with pytest.raises(ValueError, match=rf"{name}: argument 'input' expected non-zero channel and spatial dims"):
        getattr(ops, name)(tape.tensor(np.zeros(shape)), 2)


@pytest.mark.parametrize("name,spatial", POOLS)
def test_pooling_an_empty_batch_works_like_torch(torch, name, spatial):
    shape = (0, 3) + (4,) * spatial
    out = getattr(ops, name)(tape.tensor(np.zeros(shape)), 2)
    out = out[0] if isinstance(out, tuple) else out
    expected = _torch_pool(torch, name)(torch.zeros(shape), 2)
    expected = expected[0] if isinstance(expected, tuple) else expected
    assert out.shape == tuple(expected.shape)
