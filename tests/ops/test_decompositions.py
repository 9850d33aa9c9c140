"""Matrix products and decompositions (ops/decompositions.py) beyond the generated per-sample checks: values and
first and second derivatives against torch's own functions (not the module's references) for losses that do
not depend on the vectors' sign gauge, the sign convention, the one-triangle convention of cholesky/eigh and
its relation to torch's symmetric gradient, the gradient conditions (repeated eigenvalues / singular values,
singular matrices, rank-deficient QR), solve's vector-or-matrix rule, tensordot's dims forms, and the errors."""

import numpy as np
import pytest
from oracle import LazyTorch

import ops
import tape
from tape import gradcheck
from tape.functional import gradients
from tape.gradcheck import gradgradcheck

torch = LazyTorch()  # torch imported at first use: the module collects without torch

F64 = torch.float64  # explicit everywhere: the default dtype is global state other tests rely on


def leaf(array):
    return tape.tensor(np.array(array, dtype=np.float64), requires_grad=True)


def spd(rng, n, batch=()):
    x = rng.uniform(-1, 1, batch + (n, n))
    return x @ np.swapaxes(x, -1, -2) + n * np.eye(n)


def assert_matches_torch(fn, torch_fn, arrays, rtol=1e-9, atol=1e-10, second_order=True, seed=3):
    """``fn(*tensors)`` (a Tensor, any shape) equals ``torch_fn``'s value, its gradients for a random cotangent u,
    and (``second_order``) the gradients of <those gradients, v> with respect to the inputs and u."""
    rng = np.random.default_rng(seed)
    inputs = [leaf(a) for a in arrays]
    out = fn(*inputs)
    refs = [torch.tensor(np.array(a, dtype=np.float64), requires_grad=True) for a in arrays]
    expected = torch_fn(*refs)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=rtol, atol=atol)
    u = tape.tensor(rng.standard_normal(out.shape), requires_grad=True)
    tu = torch.tensor(np.array(u.numpy()), requires_grad=True)
    first = gradients(out, inputs, [u], create_graph=second_order, allow_unused=True)
    t_first = torch.autograd.grad(expected, refs, tu, create_graph=second_order, allow_unused=True)
    for ours, theirs in zip(first, t_first):
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)
    if not second_order:
        return
    vs = [rng.standard_normal(a.shape) for a in arrays]
    inner = sum(ops.sum(g * v) for g, v in zip(first, vs))
    t_inner = sum((g * torch.from_numpy(v)).sum() for g, v in zip(t_first, vs))
    second = gradients(inner, inputs + [u], allow_unused=True)
    t_second = torch.autograd.grad(t_inner, refs + [tu], allow_unused=True)
    for ours, theirs, shape in zip(second, t_second, [a.shape for a in arrays] + [out.shape]):
        a = np.zeros(shape) if ours is None else ours.numpy()
        b = np.zeros(shape) if theirs is None else theirs.numpy()
        np.testing.assert_allclose(a, b, rtol=rtol * 10, atol=atol * 10)


# -- products ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape_a,shape_b,dims", [
    ((2, 3, 4), (3, 4, 5), 2), ((2, 3), (3, 4), 1), ((2, 3), (4,), 0), ((3, 4, 2), (4, 3, 2), ([1, 0], [0, 1])),
    ((3, 5, 4, 6), (6, 4, 5, 3), ([2, 1, 3], [1, 2, 0])), ((2, 3), (4, 3), ([-1], [-1])),
    ((2, 1, 3), (4, 3, 5), ([1, 2], [0, 1])), ((2, 4, 3), (1, 3, 5), ([1, 2], [0, 1])),
    ((2, 1), (1, 3), ([1], [0])), ((2, 3), (2, 3), ([0, 1], [0, 1])),
])
def test_tensordot_matches_torch_to_second_order(shape_a, shape_b, dims):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape_a), rng.standard_normal(shape_b)]
    assert_matches_torch(lambda a, b: ops.tensordot(a, b, dims=dims) ** 2,
                         lambda a, b: torch.tensordot(a, b, dims=dims) ** 2, arrays)


def test_tensordot_accepts_lists_of_lists_and_tuples_like_torch():
    rng = np.random.default_rng(1)
    a, b = leaf(rng.standard_normal((2, 3))), leaf(rng.standard_normal((3, 4)))
    for dims in ([[1], [0]], ([1], [0]), ((1,), (0,))):
        np.testing.assert_allclose(ops.tensordot(a, b, dims).numpy(), a.numpy() @ b.numpy())


@pytest.mark.parametrize("fn,torch_fn,shapes", [
    (ops.bmm, torch.bmm, [(3, 2, 4), (3, 4, 5)]),
    (ops.outer, torch.outer, [(3,), (4,)]),
    (ops.dot, torch.dot, [(5,), (5,)]),
])
def test_bmm_outer_dot_match_torch_to_second_order(fn, torch_fn, shapes):
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(s) for s in shapes]
    assert_matches_torch(lambda a, b: fn(a, b) ** 3, lambda a, b: torch_fn(a, b) ** 3, arrays)


def test_integer_products_stay_integer_like_torch():
    a, b = np.arange(6).reshape(1, 2, 3), np.arange(6).reshape(1, 3, 2)
    out = ops.bmm(tape.tensor(a), tape.tensor(b))
    assert out.dtype == np.int64 and np.array_equal(out.numpy(), a @ b)
    assert ops.dot(tape.tensor(np.arange(3)), tape.tensor(np.arange(3))).numpy() == 5


# -- inv, solve, det, slogdet ----------------------------------------------------------------------------------
def well_conditioned(rng, shape):
    return rng.uniform(-1, 1, shape) + shape[-1] * np.eye(shape[-1])


@pytest.mark.parametrize("name,fn,torch_fn", [
    ("inv", lambda a: ops.inv(a), lambda a: torch.linalg.inv(a)),
    ("det", lambda a: ops.det(a), lambda a: torch.linalg.det(a)),
    ("logabsdet", lambda a: ops.slogdet(a)[1], lambda a: torch.linalg.slogdet(a)[1]),
    ("sign * logabsdet", lambda a: ops.slogdet(a)[0] * ops.slogdet(a)[1],
     lambda a: torch.linalg.slogdet(a)[0] * torch.linalg.slogdet(a)[1]),
])
def test_inverse_and_determinants_match_torch_to_second_order(name, fn, torch_fn):
    rng = np.random.default_rng(4)
    a = well_conditioned(rng, (2, 3, 3))
    a[1, 0] *= -1  # one negative determinant
    assert_matches_torch(fn, torch_fn, [a])


@pytest.mark.parametrize("shape_a,shape_b,left", [
    ((3, 3), (3,), True), ((3, 3), (3, 2), True), ((2, 3, 3), (3,), True), ((2, 3, 3), (2, 3), True),
    ((3, 3, 3), (3, 3), True), ((2, 1, 3, 3), (4, 3, 2), True), ((3, 3), (2, 3, 2), True),
    ((3, 3), (2, 3), False), ((2, 3, 3), (1, 4, 3), False),
])
def test_solve_matches_torch_including_its_vector_rule_and_broadcasting(shape_a, shape_b, left):
    rng = np.random.default_rng(5)
    arrays = [well_conditioned(rng, shape_a), rng.standard_normal(shape_b)]
    assert_matches_torch(lambda a, b: ops.solve(a, b, left=left), lambda a, b: torch.linalg.solve(a, b, left=left),
                         arrays)


def test_solve_treats_b_shaped_like_a_without_its_last_dim_as_vectors():
    rng = np.random.default_rng(6)
    a, b = well_conditioned(rng, (3, 3, 3)), rng.standard_normal((3, 3))
    x = ops.solve(tape.tensor(a), tape.tensor(b)).numpy()
    np.testing.assert_allclose(np.einsum("bij,bj->bi", a, x), b, atol=1e-12)  # each b[k] solves with a[k]


def test_det_gradient_at_a_singular_matrix_is_the_cofactor_matrix():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])  # rank 2
    t = leaf(a)
    d = ops.det(t)
    assert d.numpy() == 0
    d.backward()
    cofactors = np.array([[np.linalg.det(np.delete(np.delete(a, i, 0), j, 1)) * (-1) ** (i + j) for j in range(3)]
                          for i in range(3)])
    np.testing.assert_allclose(t.grad.numpy(), cofactors, atol=1e-12)
    assert np.abs(cofactors).max() > 1  # not torch's zeros
    gradcheck(lambda x: ops.det(x), [leaf(a)])  # det is a polynomial: exact finite differences
    gradcheck(lambda x: ops.det(x), [leaf(np.stack([a, np.zeros((3, 3)), np.eye(3)]))])


def test_det_second_order_at_a_singular_matrix_is_exact():
    rank_2 = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    gradgradcheck(lambda x: ops.det(x), [leaf(np.stack([rank_2, np.diag([1.0, 2.0, 0.0]), 2 * np.eye(3)]))])


def test_slogdet_of_a_singular_matrix_is_sign_0_and_minus_inf_with_an_infinite_gradient():
    t = leaf([[1.0, 2.0], [2.0, 4.0]])
    sign, logabsdet = ops.slogdet(t)
    assert sign.numpy() == 0 and logabsdet.numpy() == -np.inf
    logabsdet.backward()
    assert not np.isfinite(t.grad.numpy()).all()  # torch: inf/NaN as well


def test_slogdet_sign_gets_no_gradient():
    t = leaf(well_conditioned(np.random.default_rng(7), (3, 3)))
    sign, _ = ops.slogdet(t)
    ops.sum(sign * 5.0).backward()
    np.testing.assert_array_equal(t.grad.numpy(), np.zeros((3, 3)))


# -- cholesky and eigh: one triangle read ------------------------------------------------------------------------
def fold_lower(g):
    return np.tril(g) + np.tril(np.swapaxes(g, -1, -2), -1)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_reads_one_triangle_and_its_gradient_is_torchs_folded_onto_it(upper):
    rng = np.random.default_rng(8)
    a = spd(rng, 4, (2,))
    ignored = np.triu_indices(4, 1) if not upper else np.tril_indices(4, -1)
    a[(slice(None),) + ignored] = 9.0  # the triangle cholesky does not read
    t, ref = leaf(a), torch.tensor(a, requires_grad=True)
    out, expected = ops.cholesky(t, upper=upper), torch.linalg.cholesky(ref, upper=upper)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-12, atol=1e-12)
    u = rng.standard_normal(a.shape)
    out.backward(u)
    expected.backward(torch.from_numpy(u))
    theirs = ref.grad.numpy()
    np.testing.assert_allclose(theirs, np.swapaxes(theirs, -1, -2), atol=1e-12)  # torch's: symmetric
    folded = fold_lower(theirs) if not upper else np.swapaxes(fold_lower(np.swapaxes(theirs, -1, -2)), -1, -2)
    np.testing.assert_allclose(t.grad.numpy(), folded, rtol=1e-10, atol=1e-12)
    assert np.all(t.grad.numpy()[(slice(None),) + ignored] == 0)
    gradcheck(lambda x: ops.cholesky(x, upper=upper), [leaf(a)])


def test_eigh_reads_one_triangle_and_its_gradient_is_torchs_folded_onto_it():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((4, 4))
    a = x + x.T
    a[np.triu_indices(4, 1)] = 7.0
    t, ref = leaf(a), torch.tensor(a, requires_grad=True)
    w, v = ops.eigh(t)
    tw, tv = torch.linalg.eigh(ref)
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.abs(v.numpy()), np.abs(tv.detach().numpy()), atol=1e-10)  # up to sign
    loss = ops.sum(w ** 3) + ops.sum(v ** 4)  # sign-invariant in the vectors
    loss.backward()
    ((tw ** 3).sum() + (tv ** 4).sum()).backward()
    np.testing.assert_allclose(t.grad.numpy(), fold_lower(ref.grad.numpy()), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("which", ["cholesky", "eigh"])
def test_symmetric_parametrisations_get_exactly_torchs_gradients(which):
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2, 4, 4))
    if which == "cholesky":
        def fn(t):
            return ops.cholesky(ops.matmul(t, ops.transpose(t, -1, -2)) + 4 * np.eye(4)) ** 3

        def torch_fn(t):
            return torch.linalg.cholesky(t @ t.mT + 4 * torch.eye(4, dtype=F64)) ** 3
    else:
        def fn(t):
            w, v = ops.eigh(t + ops.transpose(t, -1, -2))
            return ops.sum(w ** 3) + ops.sum(v ** 4)

        def torch_fn(t):
            w, v = torch.linalg.eigh(t + t.mT)
            return (w ** 3).sum() + (v ** 4).sum()
    assert_matches_torch(fn, torch_fn, [x])


def test_eigh_upper_triangle():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 3))
    a = x + x.T
    a[np.tril_indices(3, -1)] = -5.0
    w, _ = ops.eigh(tape.tensor(a), UPLO="U")
    np.testing.assert_allclose(w.numpy(), torch.linalg.eigh(torch.tensor(a), UPLO="U")[0].numpy(), atol=1e-12)
    gradcheck(lambda t: ops.eigh(t, UPLO="U")[1], [leaf(a)])


# -- the sign gauge --------------------------------------------------------------------------------------------
def test_eigenvectors_and_singular_vectors_have_their_largest_entry_positive_and_reconstruct_a():
    rng = np.random.default_rng(12)
    for _ in range(20):
        x = rng.standard_normal((3, 5, 4))
        u, s, vh = (o.numpy() for o in ops.svd(tape.tensor(x), full_matrices=False))
        np.testing.assert_allclose((u * s[..., None, :]) @ vh, x, atol=1e-12)
        top = np.take_along_axis(u, np.argmax(np.abs(u), axis=-2)[..., None, :], axis=-2)
        assert np.all(top > 0)
        sym = x[..., :4, :] + np.swapaxes(x[..., :4, :], -1, -2)
        w, v = (o.numpy() for o in ops.eigh(tape.tensor(sym)))
        np.testing.assert_allclose((v * w[..., None, :]) @ np.swapaxes(v, -1, -2), sym, atol=1e-12)
        assert np.all(np.diff(w, axis=-1) > 0)
        top = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], axis=-2)
        assert np.all(top > 0)


# -- qr and svd --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3), (2, 3, 4)])
def test_qr_matches_torch_to_second_order(shape):
    rng = np.random.default_rng(13)
    a = rng.standard_normal(shape)
    weights = rng.standard_normal(shape[:-1] + (min(shape[-2:]),))
    assert_matches_torch(lambda t: ops.sum(ops.qr(t)[0] * weights) + ops.sum(ops.qr(t)[1] ** 2),
                         lambda t: (torch.linalg.qr(t)[0] * torch.from_numpy(weights)).sum()
                         + (torch.linalg.qr(t)[1] ** 2).sum(), [a])


@pytest.mark.parametrize("output", [0, 1])
def test_qr_with_one_output_used(output):
    a = np.random.default_rng(14).standard_normal((4, 3))
    assert_matches_torch(lambda t: ops.qr(t)[output] ** 3, lambda t: torch.linalg.qr(t)[output] ** 3, [a])


def test_qr_gradient_with_dependent_columns_is_torchs_inf_nan_not_an_error():
    a = np.random.default_rng(15).standard_normal((4, 3))
    a[:, 2] = 0  # R[2, 2] is exactly 0: QR has no derivative here
    t, ref = leaf(a), torch.tensor(a, requires_grad=True)
    q, r = ops.qr(t)
    (ops.sum(q) + ops.sum(r)).backward()
    tq, tr = torch.linalg.qr(ref)
    (tq.sum() + tr.sum()).backward()
    assert not torch.isfinite(ref.grad).all()
    assert np.isnan(t.grad.numpy()).all()  # no derivative: the whole matrix's gradient is NaN (torch: some entries)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3), (2, 3, 4)])
def test_svd_matches_torch_to_second_order_for_sign_invariant_losses(shape):
    rng = np.random.default_rng(16)
    a = rng.standard_normal(shape)

    def fn(t):
        u, s, vh = ops.svd(t, full_matrices=False)
        return ops.sum(u ** 4) + ops.sum(s ** 3) + ops.sum(vh ** 4)

    def torch_fn(t):
        u, s, vh = torch.linalg.svd(t, full_matrices=False)
        return (u ** 4).sum() + (s ** 3).sum() + (vh ** 4).sum()
    assert_matches_torch(fn, torch_fn, [a], rtol=1e-8, atol=1e-9)


def test_eigh_and_svd_with_only_the_values_used_match_torch_to_second_order():
    rng = np.random.default_rng(17)
    a = rng.standard_normal((2, 4, 3))
    assert_matches_torch(lambda t: ops.svd(t, full_matrices=False)[1] ** 2,
                         lambda t: torch.linalg.svd(t, full_matrices=False)[1] ** 2, [a])
    sym = a[:, :3] + np.swapaxes(a[:, :3], -1, -2)
    assert_matches_torch(lambda t: ops.eigh(t + ops.transpose(t, -1, -2))[0] ** 2,
                         lambda t: torch.linalg.eigh(t + t.mT)[0] ** 2, [sym])


def test_repeated_values_give_finite_value_gradients_and_non_finite_vector_gradients_like_torch():
    a = np.diag([1.0, 1.0, 3.0])  # a repeated eigenvalue and a repeated singular value
    for op, torch_op, values, vectors in [
            (ops.eigh, torch.linalg.eigh, 0, 1),
            (lambda t: ops.svd(t, full_matrices=False), lambda t: torch.linalg.svd(t, full_matrices=False), 1, 0)]:
        t, ref = leaf(a), torch.tensor(a, requires_grad=True)
        ops.sum(op(t)[values] ** 2).backward()
        (torch_op(ref)[values] ** 2).sum().backward()
        np.testing.assert_allclose(t.grad.numpy(), ref.grad.numpy(), atol=1e-12)
        assert np.isfinite(t.grad.numpy()).all()
        t, ref = leaf(a), torch.tensor(a, requires_grad=True)
        ops.sum(op(t)[vectors] * np.arange(9.0).reshape(3, 3)).backward()
        (torch_op(ref)[vectors] * torch.arange(9.0, dtype=F64).reshape(3, 3)).sum().backward()
        assert not np.isfinite(t.grad.numpy()).all() and not torch.isfinite(ref.grad).all()


def test_full_matrices_true_works_on_square_matrices():
    a = np.random.default_rng(18).standard_normal((3, 3))
    full = [o.numpy() for o in ops.svd(tape.tensor(a))]
    reduced = [o.numpy() for o in ops.svd(tape.tensor(a), full_matrices=False)]
    for x, y in zip(full, reduced):
        np.testing.assert_array_equal(x, y)


def test_float32_stays_float32():
    rng = np.random.default_rng(19)
    a = tape.tensor(spd(rng, 3).astype(np.float32), requires_grad=True)
    outs = [ops.inv(a), ops.det(a), *ops.slogdet(a), ops.cholesky(a), *ops.qr(a), *ops.eigh(a), *ops.svd(a),
            ops.solve(a, a)]
    assert all(o.dtype == np.float32 for o in outs)
    sum(ops.sum(o) for o in outs).backward()
    assert a.grad.dtype == np.float32


def test_zero_size_batches_work_forward_and_backward():
    for fn in [ops.inv, ops.det, lambda t: ops.slogdet(t)[1], ops.cholesky, lambda t: ops.qr(t)[0],
               lambda t: ops.eigh(t)[1], lambda t: ops.svd(t)[0]]:
        t = leaf(np.zeros((0, 3, 3)))
        out = fn(t)
        ops.sum(out).backward()
        assert t.grad.shape == (0, 3, 3)
    assert ops.det(tape.tensor(np.zeros((0, 0)))).numpy() == 1.0  # the empty product, as torch


# -- errors ----------------------------------------------------------------------------------------------------
def t(shape, dtype=np.float64):
    return tape.tensor(np.ones(shape, dtype=dtype))


@pytest.mark.parametrize("call,error,words", [
    (lambda: ops.inv(t((2, 3))), ValueError, ("inv", "'A'", "square")),
    (lambda: ops.det(t((3,))), ValueError, ("det", "'A'", "2 dims")),
    (lambda: ops.slogdet(t((2, 3))), ValueError, ("slogdet", "'A'", "square")),
    (lambda: ops.eigh(t((2, 3, 4))), ValueError, ("eigh", "'A'", "square")),
    (lambda: ops.cholesky(t((4, 3))), ValueError, ("cholesky", "'A'", "square")),
    (lambda: ops.qr(t((3,))), ValueError, ("qr", "'A'")),
    (lambda: ops.svd(t((3,))), ValueError, ("svd", "'A'")),
    (lambda: ops.inv(t((2, 2), np.int64)), TypeError, ("inv", "'A'", "floating")),
    (lambda: ops.inv(t((2, 2))), ValueError, ("inv", "singular")),
    (lambda: ops.solve(t((2, 2)), t((2,))), ValueError, ("solve", "singular")),
    (lambda: ops.cholesky(tape.tensor(-np.eye(2))), ValueError, ("cholesky", "positive-definite")),
    (lambda: ops.solve(tape.tensor(np.eye(3)), t((2, 3))), ValueError, ("solve", "'B'", "3 rows")),
    (lambda: ops.solve(tape.tensor(np.eye(3)), t((3,)), left=False), ValueError, ("solve", "'B'", "left=False")),
    (lambda: ops.solve(tape.tensor(np.eye(3)), t((3,), np.float32)), TypeError, ("solve", "B", "dtype")),
    (lambda: ops.solve(tape.tensor(np.ones((2, 3, 3))), t((4, 3, 1))), ValueError, ("solve", "'B'", "batch")),
    (lambda: ops.solve(tape.tensor(np.eye(3)), t((3,)), left=1), TypeError, ("solve", "'left'", "bool")),
    (lambda: ops.svd(t((3, 2)), full_matrices=1), TypeError, ("svd", "'full_matrices'", "bool")),
    (lambda: ops.qr(t((3, 2)), mode="complete"), ValueError, ("qr", "'mode'", "reduced")),
    (lambda: ops.eigh(t((3, 3)), UPLO="X"), ValueError, ("eigh", "'UPLO'")),
    (lambda: ops.bmm(t((2, 3)), t((2, 3, 4))), ValueError, ("bmm", "'input'", "3-D")),
    (lambda: ops.bmm(t((2, 2, 3)), t((1, 3, 4))), ValueError, ("bmm", "'mat2'", "broadcasting")),
    (lambda: ops.bmm(t((2, 2, 3)), t((2, 2, 3))), ValueError, ("bmm", "'mat2'")),
    (lambda: ops.outer(t((2, 1)), t((3,))), ValueError, ("outer", "'input'", "1-D")),
    (lambda: ops.dot(t((3,)), t((2,))), ValueError, ("dot", "'tensor'", "3 elements")),
    (lambda: ops.dot(t((3,)), t((3,), np.int64)), TypeError, ("dot", "'tensor'", "dtype")),
    (lambda: ops.tensordot(t((2, 3)), t((2, 4)), dims=([1], [0])), ValueError, ("tensordot", "'b'", "size 3")),
    (lambda: ops.tensordot(t((2, 3)), t((3, 4)), dims=3), ValueError, ("tensordot", "'dims'")),
    (lambda: ops.tensordot(t((2, 3)), t((3, 4)), dims=-1), ValueError, ("tensordot", "'dims'")),
    (lambda: ops.tensordot(t((2, 3)), t((3, 4)), dims=([1], [0, 1])), ValueError, ("tensordot", "same length")),
    (lambda: ops.tensordot(t((2, 3)), t((3, 4)), dims=([1, 1], [0, 0])), ValueError, ("tensordot", "repeats")),
    (lambda: ops.tensordot(t((2, 3)), t((3, 4)), dims=([2], [0])), ValueError, ("tensordot", "'dims'")),
    (lambda: ops.tensordot(t((2, 3)), t((3, 4)), dims=(1, 0)), TypeError, ("tensordot", "'dims'")),
])
def test_errors_name_the_op_and_the_argument(call, error, words):
    with pytest.raises(error) as info:
        call()
    for word in words:
        assert word in str(info.value), f"{word!r} missing from: {info.value}"


def test_single_outputs_pass_gradgradcheck_on_batched_samples():
    rng = np.random.default_rng(20)
    cases = [
        (lambda a: ops.inv(a), well_conditioned(rng, (2, 3, 3))),
        (lambda a: ops.cholesky(a), spd(rng, 3, (2,))),
        (lambda a: ops.qr(a)[0], rng.standard_normal((2, 4, 3))),
        (lambda a: ops.qr(a)[1], rng.standard_normal((2, 3, 4))),
        (lambda a: ops.eigh(a)[1], spd(rng, 3, (2,))),
        (lambda a: ops.svd(a, full_matrices=False)[2], rng.standard_normal((2, 3, 4))),
    ]
    for fn, a in cases:
        gradgradcheck(fn, [leaf(a)])
