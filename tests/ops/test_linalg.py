"""Linear algebra beyond the generated per-sample checks: einsum as one op over any number of operands
(first and second order on every sample, via test_ops_shape's sequence harness), traces, '...' and its
equation errors; matmul's folded (batched @ matrix) paths at training sizes; linear; second order in
composition; zero-size shapes; bad shapes."""

import numpy as np
import pytest
from oracle import LazyTorch
from test_shape import assert_double_backward_matches_torch, sequence_op_check

import ops
import tape
from tape import gradcheck
from tape.gradcheck import gradgradcheck
from tape.tools.verify import op_samples

torch = LazyTorch()  # torch imported at first use: the module collects without torch


def leaves(*shapes, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [tape.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True) for s in shapes]


def assert_matches_torch(fn, torch_fn, inputs, rtol=1e-10, atol=1e-12):
    """Forward value and every input gradient (for a random output cotangent) equal torch's."""
    out = fn(*inputs)
    g = np.random.default_rng(7).standard_normal(out.shape).astype(out.dtype)
    out.backward(g)
    refs = [torch.from_numpy(np.array(t.numpy())).requires_grad_() for t in inputs]
    expected = torch_fn(*refs)
    expected.backward(torch.from_numpy(g))
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=rtol, atol=atol)
    for ours, theirs in zip(inputs, refs):
        assert ours.grad.dtype == ours.dtype
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=rtol, atol=atol)


# -- einsum ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("equation,shapes", [
    ("ii->", [(4, 4)]),
    ("ii", [(3, 3)]),
    ("bii->b", [(2, 3, 3)]),
    ("ii->i", [(3, 3)]),
    ("iij->j", [(3, 3, 2)]),
    ("...ii->...", [(2, 3, 3)]),
    ("...ij->...", [(2, 1, 3, 4)]),
    ("i...->...", [(3, 2, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (4, 3, 5)]),
    ("b...i,b...i->b...", [(2, 3, 4), (2, 1, 4)]),
    ("...,...->...", [(2, 3), (3,)]),
    (",i->i", [(), (3,)]),
    ("ij,ji->", [(3, 4), (4, 3)]),
    ("bhld,bhsd->bhls", [(2, 2, 3, 4), (2, 2, 5, 4)]),
])
def test_einsum_traces_and_ellipsis_match_torch(equation, shapes):
    inputs = leaves(*shapes)
    assert_matches_torch(lambda *xs: ops.einsum(equation, *xs), lambda *xs: torch.einsum(equation, *xs), inputs)


def test_trace_gradient_is_the_identity():
    (a,) = leaves((4, 4))
    ops.einsum("ii", a).backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.eye(4))


def test_einsum_passes_first_and_second_order_checks_and_torch_parity_on_every_sample():
    op = tape.get_op("einsum")
    assert op.signature == "einsum(equation, operands)" and op.sequence == (True,)
    for sample in op_samples(op):
        sequence_op_check(op, sample, lambda op, tensors, attrs: op(attrs["equation"], *tensors))


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk,kl,lm->im", [(2, 3), (3, 2), (2, 4), (4, 2)]),
    ("i,i,i,i,i->", [(3,)] * 5),
    ("ab,bc,cd,de,ea->", [(2, 3), (3, 2), (2, 2), (2, 3), (3, 2)]),
    ("...i,i,ij,...j->...", [(2, 3), (3,), (3, 4), (1, 4)]),
    ("ii,ij,jk,kk->ik", [(3, 3), (3, 2), (2, 2), (2, 2)]),
])
def test_einsum_of_many_operands_is_one_recorded_op_exact_to_second_order(equation, shapes):
    inputs = leaves(*shapes)
    with tape.ExecutionTape() as recorded:
        ops.einsum(equation, *inputs)
    assert [r.op_name for r in recorded.operations] == ["einsum"]
    assert_matches_torch(lambda *xs: ops.einsum(equation, *xs), lambda *xs: torch.einsum(equation, *xs), inputs)
    gradcheck(lambda *xs: ops.einsum(equation, *xs), leaves(*shapes, seed=1))
    gradgradcheck(lambda *xs: ops.einsum(equation, *xs), leaves(*shapes, seed=2))


def test_einsum_accepts_a_list_of_operands_and_float32():
    a, b = leaves((2, 3), (3, 4), dtype=np.float32)
    out = ops.einsum("ij,jk->ik", [a, b])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), a.numpy() @ b.numpy(), rtol=1e-6)
    ops.sum(out).backward()
    assert a.grad.dtype == np.float32 and b.grad.dtype == np.float32


def test_einsum_large_contraction_uses_blas_and_stays_exact():
    a, b = leaves((8, 32, 64), (64, 48))
    assert_matches_torch(lambda x, y: ops.einsum("bij,jk->bik", x, y),
                         lambda x, y: torch.einsum("bij,jk->bik", x, y), [a, b], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("equation,shapes,words", [
    ("ij,jk->ik", [(2, 3)], ("einsum", "equation", "1 operand")),
    ("ij->ij", [(2, 3), (3, 4)], ("einsum", "equation", "2 operand")),
    ("ij,jk->ik", [(2, 3), (4, 5)], ("einsum", "equation", "'j'")),
    ("ii->i", [(2, 3)], ("einsum", "equation", "repeated")),
    ("ij->k", [(2, 3)], ("einsum", "equation", "'k'")),
    ("ij->ii", [(2, 3)], ("einsum", "equation", "'i'")),
    ("ijk->i", [(2, 3)], ("einsum", "equation", "operand 0")),
    ("...i...->i", [(2, 3)], ("einsum", "equation", "'...'")),
    ("i.j->i", [(2, 3)], ("einsum", "equation")),
    ("i1->i", [(2, 3)], ("einsum", "equation", "'1'")),
    ("ij->i->j", [(2, 3)], ("einsum", "equation", "'->'")),
])
def test_einsum_equation_errors_name_the_op_and_the_argument(equation, shapes, words):
    inputs = leaves(*shapes)
    with pytest.raises(ValueError) as info:
        ops.einsum(equation, *inputs)
    for word in words:
        assert word in str(info.value), f"{word!r} missing from: {info.value}"


def test_einsum_other_errors():
    with pytest.raises(ValueError, match="einsum: argument 'operands'"):
        ops.einsum("->")
    with pytest.raises(TypeError, match="einsum: argument 'equation' expected a str"):
        ops.einsum(3, *leaves((2,)))
    with pytest.raises(TypeError, match=r"einsum: argument 'operands\[1\]' expected dtype float64"):
        ops.einsum("i,i->", leaves((2,))[0], np.arange(2))


def test_einsum_can_be_called_by_keyword_as_the_generated_tests_do():
    a, b = leaves((2, 3), (3, 4))
    np.testing.assert_allclose(ops.einsum(equation="ij,jk->ik", operands=[a, b]).numpy(), a.numpy() @ b.numpy())


# -- matmul and linear at training shapes ------------------------------------------------------------------
@pytest.mark.parametrize("shape_a,shape_b", [((4, 8, 16), (16, 8)), ((2, 3, 8, 16), (16,)), ((16,), (3, 16, 4)),
                                             ((4, 8, 16), (4, 16, 2)), ((3, 1, 8, 16), (2, 16, 4))])
def test_matmul_folded_and_batched_paths_match_torch(shape_a, shape_b):
    inputs = leaves(shape_a, shape_b)
    assert_matches_torch(ops.matmul, torch.matmul, inputs, rtol=1e-10, atol=1e-10)


def test_matmul_of_a_transposed_batched_input_matches_torch_in_float32():
    a, b = leaves((4, 16, 8), (16, 8), dtype=np.float32)
    assert_matches_torch(lambda x, y: ops.transpose(x, 1, 2) @ y, lambda x, y: x.transpose(1, 2) @ y, [a, b],
                         rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("x_shape,bias_shape", [((5, 7, 16), (8,)), ((16,), (8,)), ((3, 16), None), ((2, 16), (1,))])
def test_linear_is_x_w_transposed_plus_b_like_torch(x_shape, bias_shape):
    shapes = [x_shape, (8, 16)] + ([bias_shape] if bias_shape else [])
    inputs = leaves(*shapes)
    assert_matches_torch(ops.linear, torch.nn.functional.linear, inputs, rtol=1e-10, atol=1e-10)
    x, w, *b = leaves(*shapes, seed=2)
    gradcheck(lambda *t: ops.linear(*t), [x, w, *b])


def test_linear_does_not_keep_or_change_its_inputs():
    x, w, b = leaves((3, 4), (2, 4), (2,))
    before = [np.array(t.numpy()) for t in (x, w, b)]
    y = ops.linear(x, w, b)
    np.testing.assert_array_equal(y.numpy(), before[0] @ before[1].T + before[2])
    for t, old in zip((x, w, b), before):
        np.testing.assert_array_equal(t.numpy(), old)


@pytest.mark.parametrize("call,words", [
    (lambda a: ops.matmul(a((2, 3)), a((2, 3))), ("matmul", "'other'", "(2, 3)")),
    (lambda a: ops.matmul(a((2, 3, 4)), a((3, 4, 5))), ("matmul", "'other'", "batch")),
    (lambda a: ops.matmul(a(()), a((3,))), ("matmul",)),
    (lambda a: ops.linear(a((2, 3)), a((4, 5))), ("linear", "'weight'", "in_features")),
    (lambda a: ops.linear(a((2, 3)), a((4, 3)), a((3,))), ("linear", "'bias'")),
    (lambda a: ops.linear(a((2, 3)), a((4, 3)), a((2, 4))), ("linear", "'bias'")),
    (lambda a: ops.linear(a((2, 3)), a((2, 4, 3))), ("linear", "'weight'")),
    (lambda a: ops.linear(a(()), a((4, 1))), ("linear", "'input'")),
    (lambda a: ops.linear(a((2, 3)), a((3,)), a((1,))), ("linear", "'bias'")),
])
def test_matmul_and_linear_shape_errors_name_op_and_argument(call, words):
    with pytest.raises(ValueError) as info:
        call(lambda shape: tape.tensor(np.ones(shape)))
    for word in words:
        assert word in str(info.value), f"{word!r} missing from: {info.value}"


def test_linear_and_matmul_refuse_mixed_integer_and_float_operands():
    x = tape.tensor(np.ones((2, 3)))
    with pytest.raises(TypeError, match="linear: argument 'weight' expected dtype float64"):
        ops.linear(x, np.ones((4, 3), np.int64))
    with pytest.raises(TypeError, match="matmul: argument 'other' expected dtype float64"):
        ops.matmul(x, np.ones((3, 4), np.int64))


# -- second order in composition, zero-size shapes -------------------------------------------------------------
def test_a_two_layer_network_has_torch_second_derivatives():
    x, w1, b1, w2 = leaves((5, 3), (4, 3), (4,), (2, 4), seed=3)
    assert_double_backward_matches_torch(
        lambda x, w1, b1, w2: ops.linear(ops.tanh(ops.linear(x, w1, b1)), w2) @ np.ones((2, 2)),
        lambda x, w1, b1, w2: torch.nn.functional.linear(torch.tanh(torch.nn.functional.linear(x, w1, b1)), w2)
        @ torch.ones(2, 2, dtype=torch.float64),
        [x, w1, b1, w2])


@pytest.mark.parametrize("equation,shapes", [("ii,ij->j", [(3, 3), (3, 2)]), ("iij,j->i", [(2, 2, 3), (3,)]),
                                             ("bii->bi", [(2, 3, 3)])])
def test_einsum_with_repeated_labels_is_differentiable_twice_like_torch(equation, shapes):
    assert_double_backward_matches_torch(lambda *xs: ops.einsum(equation, *xs) ** 2,
                                         lambda *xs: torch.einsum(equation, *xs) ** 2, leaves(*shapes, seed=4))


@pytest.mark.parametrize("fn,torch_fn,shapes", [
    (ops.matmul, torch.matmul, [(2, 0), (0, 3)]),
    (ops.matmul, torch.matmul, [(0, 4), (4, 3)]),
    (ops.matmul, torch.matmul, [(3, 2, 0), (0, 5)]),
    (ops.linear, torch.nn.functional.linear, [(2, 0), (4, 0), (4,)]),
    (ops.linear, torch.nn.functional.linear, [(0, 3), (4, 3), (4,)]),
    (lambda a, b: ops.einsum("ij,jk->ik", a, b), lambda a, b: torch.einsum("ij,jk->ik", a, b), [(2, 0), (0, 3)]),
])
def test_zero_size_operands_give_zeros_and_zero_gradients_like_torch(fn, torch_fn, shapes):
    inputs = leaves(*shapes)
    assert_matches_torch(fn, torch_fn, inputs)
    assert_double_backward_matches_torch(lambda *xs: fn(*xs) ** 2, lambda *xs: torch_fn(*xs) ** 2, leaves(*shapes))
