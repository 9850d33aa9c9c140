"""The BLAS-style, distance, decomposition and reduction ops of issue 21 where the generated tests cannot look:
points without a second derivative (zero distances), NaN / -inf values, conventions that differ from torch on
purpose (and say so), torch's two spellings of an argument, dtype= casts, and the torch references that had to
spell a formula out (cond)."""

import math

import numpy as np
import pytest

import ops
import tape


def leaf(x, dtype=np.float64):
    return tape.tensor(np.asarray(x, dtype), requires_grad=True)


def value_and_grads(fn, arrays, cotangent_seed=3):
    """(value, input gradients) of fn at ``arrays`` for a fixed random cotangent, as numpy."""
    leaves = [leaf(a, np.asarray(a).dtype) for a in arrays]
    out = fn(*leaves)
    g = np.random.default_rng(cotangent_seed).standard_normal(out.shape).astype(out.dtype)
    out.backward(g)
    return out.numpy(), [t.grad.numpy() for t in leaves], g


def torch_value_and_grads(torch, fn, arrays, g):
    leaves = [torch.tensor(np.asarray(a), requires_grad=True) for a in arrays]
    out = fn(*leaves)
    out.backward(torch.from_numpy(g))
    return out.detach().numpy(), [t.grad.numpy() for t in leaves]


def assert_like_torch(torch, ours_fn, torch_fn, arrays, rtol=1e-10, atol=1e-12):
    value, grads, g = value_and_grads(ours_fn, arrays)
    expected, expected_grads = torch_value_and_grads(torch, torch_fn, arrays, g)
    np.testing.assert_allclose(value, expected, rtol=rtol, atol=atol)
    for ours, theirs in zip(grads, expected_grads):
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)


# -- beta = 0 ignores the input, as torch -------------------------------------------------------------------------
@pytest.mark.parametrize("name,shapes", [
    ("addmm", [(2, 4), (2, 3), (3, 4)]), ("addmv", [(2,), (2, 3), (3,)]), ("addr", [(2, 3), (2,), (3,)]),
    ("addbmm", [(2, 4), (5, 2, 3), (5, 3, 4)]), ("baddbmm", [(5, 2, 4), (5, 2, 3), (5, 3, 4)])])
def test_beta_zero_ignores_nan_and_inf_in_input_like_torch(torch, name, shapes):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    arrays[0][...] = np.nan
    arrays[0].reshape(-1)[0] = np.inf
    value, grads, g = value_and_grads(lambda *t: getattr(ops, name)(*t, beta=0, alpha=1.5), arrays)
    assert np.isfinite(value).all()
    expected, expected_grads = torch_value_and_grads(
        torch, lambda *t: getattr(torch, name)(*t, beta=0, alpha=1.5), arrays, g)
    np.testing.assert_allclose(value, expected, rtol=1e-12)
    np.testing.assert_array_equal(grads[0], np.zeros(shapes[0]))  # the input takes no part
    for ours, theirs in zip(grads, expected_grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


# -- distances at zero, and p = inf ties ---------------------------------------------------------------------------
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.5, 1.5, math.inf, 0.0])
def test_cdist_and_pdist_gradients_at_zero_distance_are_torchs(torch, p):
    x1 = np.array([[0.5, -1.0, 2.0], [1.0, 0.25, -0.5]])
    x2 = np.array([[0.5, -1.0, 2.0], [0.0, 1.0, 2.0], [1.5, 0.25, -0.5]])  # row 0 equal to x1's: distance 0
    assert_like_torch(torch, lambda a, b: ops.cdist(a, b, p=p), lambda a, b: torch.cdist(a, b, p=p), [x1, x2])
    rows = np.concatenate([x1, x2])
    assert_like_torch(torch, lambda a: ops.pdist(a, p=p), lambda a: torch.pdist(a, p=p), [rows])


def test_cdist_p_inf_gives_every_tied_extreme_entry_the_whole_gradient_like_torch(torch):
    x1, x2 = np.array([[0.0, 1.0, 2.0]]), np.array([[1.0, 0.0, 2.0]])  # |d| = 1, 1, 0: a tie of two
    _, grads, g = value_and_grads(lambda a, b: ops.cdist(a, b, p=math.inf), [x1, x2])
    np.testing.assert_array_equal(grads[0], g[0, 0] * np.array([[-1.0, 1.0, 0.0]]))  # not split between them
    assert_like_torch(torch, lambda a, b: ops.cdist(a, b, p=math.inf),
                      lambda a, b: torch.cdist(a, b, p=math.inf), [x1, x2])


def test_dist_at_zero_distance_has_gradient_zero_like_torch(torch):
    a = np.array([[1.0, 2.0], [3.0, -1.0]])
    assert_like_torch(torch, lambda x, y: ops.dist(x, y), lambda x, y: torch.dist(x, y), [a, a.copy()])


# -- logdet where det <= 0 -----------------------------------------------------------------------------------------
def test_logdet_is_nan_with_gradient_zero_for_a_negative_det_and_minus_inf_at_zero_like_torch(torch):
    negative = np.array([[-2.0, 0.3], [0.1, 1.0]])
    value, grads, _ = value_and_grads(ops.logdet, [negative])
    assert np.isnan(value) and np.all(grads[0] == 0)
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    value, grads, g = value_and_grads(ops.logdet, [singular])
    expected, expected_grads = torch_value_and_grads(torch, torch.logdet, [singular], g)
    assert value == expected == -np.inf
    np.testing.assert_array_equal(np.isinf(grads[0]), np.isinf(expected_grads[0]))
    batch = np.stack([negative, np.eye(2) * 2.0])
    value, grads, _ = value_and_grads(ops.logdet, [batch])
    assert np.isnan(value[0]) and value[1] == pytest.approx(math.log(4.0))
    assert np.all(grads[0][0] == 0) and np.allclose(grads[0][1], np.eye(2) * 0.5 * (grads[0][1][0, 0] / 0.5))


# -- cond: torch's reference for p other than None / +-2 spells out ||A|| ||A^-1|| ------------------------------
@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf])
def test_cond_forward_is_torchs_cond_itself(torch, p):
    a = np.random.default_rng(4).standard_normal((2, 3, 3))
    np.testing.assert_allclose(ops.cond(tape.tensor(a), p).numpy(), torch.linalg.cond(torch.from_numpy(a), p).numpy(),
                               rtol=1e-10)


def test_cond_of_a_singular_matrix_is_inf_like_torch(torch):
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    for p in (1, "fro", math.inf):
        assert ops.cond(tape.tensor(a), p).numpy() == torch.linalg.cond(torch.from_numpy(a), p).item() == np.inf


# -- nanquantile of an all-NaN slice -------------------------------------------------------------------------------
def test_nanquantile_of_an_all_nan_row_is_nan_with_a_nan_gradient_and_the_other_rows_are_torchs(torch):
    nan = np.nan
    x = np.array([[1.0, nan, 2.0, 3.0], [nan, nan, nan, nan], [0.5, -1.0, 4.0, 2.5]])
    q = np.array([0.3, 0.5])
    t = leaf(x)
    out = ops.nanquantile(t, q, dim=1)
    out.backward(np.ones(out.shape))
    ref = torch.tensor(x, requires_grad=True)
    expected = torch.nanquantile(ref, torch.from_numpy(q), dim=1)
    expected.backward(torch.ones(expected.shape, dtype=torch.float64))
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-12)  # NaN in the same places
    assert np.isnan(t.grad.numpy()[1]).all()  # torch gives 2.0 at index 0 of a NaN row: a number for a NaN value
    np.testing.assert_allclose(t.grad.numpy()[[0, 2]], ref.grad.numpy()[[0, 2]], rtol=1e-12)


# -- svd(full_matrices=True) on non-square input -------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 2), (2, 5), (2, 4, 3)])
def test_svd_full_matrices_matches_torch_and_a_cotangent_on_the_extra_vectors_gives_nan(torch, shape):
    a = np.random.default_rng(5).standard_normal(shape)
    u, s, vh = (o.numpy() for o in ops.svd(tape.tensor(a), full_matrices=True))
    m, n = shape[-2:]
    k = min(m, n)
    assert u.shape[-2:] == (m, m) and vh.shape[-2:] == (n, n)
    np.testing.assert_allclose(u @ np.swapaxes(u, -1, -2), np.broadcast_to(np.eye(m), u.shape), atol=1e-12)
    np.testing.assert_allclose(vh @ np.swapaxes(vh, -1, -2), np.broadcast_to(np.eye(n), vh.shape), atol=1e-12)
    np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a, atol=1e-12)
    np.testing.assert_allclose(s, torch.linalg.svdvals(torch.from_numpy(a)).numpy(), rtol=1e-12)

    def first_k(fn_svd, t):  # a loss on S and the first k vectors: the reduced SVD's gradient (torch's too)
        uu, ss, vv = fn_svd(t)
        return (uu[..., :k] ** 2 * 0.5).sum() + ss.sum() + (vv[..., :k, :] ** 2 * 0.25).sum()

    t = leaf(a)
    first_k(lambda x: ops.svd(x, full_matrices=True), t).backward()
    ref = torch.tensor(a, requires_grad=True)
    first_k(lambda x: torch.linalg.svd(x, full_matrices=True), ref).backward()
    np.testing.assert_allclose(t.grad.numpy(), ref.grad.numpy(), rtol=1e-9, atol=1e-12)

    t = leaf(a)
    extra = ops.svd(t, full_matrices=True)[0 if m > n else 2]
    ops.sum(extra * extra * np.linspace(0.5, 1.5, extra.numel()).reshape(extra.shape)).backward()
    assert np.isnan(t.grad.numpy()).all()  # no derivative: the extra vectors are any basis of the rest


# -- var / std: torch's two spellings ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
def test_unbiased_and_correction_none_are_torchs(torch, name):
    x = np.random.default_rng(6).standard_normal((3, 4))

    def check(ours_call, torch_call):
        got, want = ours_call(tape.tensor(x)), torch_call(torch.from_numpy(x))
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)

    op, fn = getattr(ops, name), getattr(torch, name)
    check(lambda t: op(t, unbiased=False), lambda t: fn(t, unbiased=False))
    check(lambda t: op(t, 1, unbiased=False, keepdim=True), lambda t: fn(t, 1, unbiased=False, keepdim=True))
    check(lambda t: op(t, 1, False), lambda t: fn(t, 1, False))  # torch's positional unbiased
    check(lambda t: op(t, False), lambda t: fn(t, False))
    check(lambda t: op(t, 0, correction=None), lambda t: fn(t, 0, correction=None))
    with pytest.raises(TypeError, match=f"{name}: pass either 'correction' or 'unbiased'"):
        op(tape.tensor(x), 0, correction=1, unbiased=True)
    with pytest.raises(TypeError, match=f"{name}: argument 'unbiased' expected a bool"):
        op(tape.tensor(x), unbiased=1)


# -- dtype= casts before reducing ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,attrs", [("sum", {"dim": 1}), ("mean", {}), ("prod", {"dim": 0}),
                                        ("cumsum", {"dim": 1}), ("cumprod", {"dim": 0}), ("nansum", {}),
                                        ("nanmean", {"dim": 1})])
def test_dtype_casts_float32_input_before_reducing_and_the_gradient_comes_back_float32(torch, name, attrs):
    x = (np.random.default_rng(7).uniform(0.5, 1.5, (3, 4)) + 1e-7).astype(np.float32)
    t = leaf(x, np.float32)
    out = getattr(ops, name)(t, dtype=np.float64, **attrs)
    assert out.dtype == np.float64
    ref = torch.tensor(x, requires_grad=True)
    expected = getattr(torch, name)(ref, dtype=torch.float64, **attrs)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-12)  # summed in float64
    ops.sum(out).backward()
    expected.sum().backward()
    assert t.grad.dtype == np.float32
    np.testing.assert_allclose(t.grad.numpy(), ref.grad.numpy(), rtol=1e-6)


def test_mean_of_integers_with_a_float_dtype_like_torch(torch):
    x = np.array([[1, 2, 4], [3, 5, 8]])
    np.testing.assert_allclose(ops.mean(tape.tensor(x), 1, dtype=np.float64).numpy(),
                               torch.mean(torch.from_numpy(x), 1, dtype=torch.float64).numpy())


# -- negative p ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [-1, -2.5, -0.5])
def test_negative_p_norms_are_torchs_and_no_entries_are_refused(torch, p):
    x = np.random.default_rng(8).uniform(0.2, 2.0, (3, 4)) * np.array([1.0, -1.0, 1.0, -1.0])
    assert_like_torch(torch, lambda t: ops.vector_norm(t, p, 1), lambda t: torch.linalg.vector_norm(t, p, 1), [x])
    assert_like_torch(torch, lambda t: ops.norm(t, p), lambda t: torch.norm(t, p), [x])
    assert_like_torch(torch, lambda t: ops.linalg_norm(t, p, 0), lambda t: torch.linalg.norm(t, p, 0), [x])
    with pytest.raises(ValueError, match="vector_norm: cannot compute the -?[0-9.]+ norm"):
        ops.vector_norm(tape.tensor(np.zeros((0, 3))), p, 0)


# -- cholesky_solve / cholesky_inverse through cholesky: the triangle convention agrees with torch -----------------
def test_cholesky_solve_and_inverse_through_cholesky_match_torch_for_the_matrix_parameter(torch):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 3))
    a, b = x @ x.T + 3 * np.eye(3), rng.standard_normal((3, 2))

    def ours_fn(a, b):
        factor = ops.cholesky(a)
        return ops.cholesky_solve(b, factor) + ops.sum(ops.cholesky_inverse(factor))

    def torch_fn(a, b):
        factor = torch.linalg.cholesky(a.tril() + a.tril(-1).mT)
        return torch.cholesky_solve(b, factor) + torch.cholesky_inverse(factor).sum()

    assert_like_torch(torch, ours_fn, torch_fn, [a, b], rtol=1e-9)


# -- torch.max(input, other) / torch.min(input, other) --------------------------------------------------------------
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_and_min_of_two_tensors_are_the_elementwise_extremum_with_torchs_gradients(torch, name):
    a = np.array([[1.0, 5.0, 3.0], [-2.0, 0.5, 4.0]])
    b = np.array([2.0, 4.0, 3.0])  # broadcast, and a tie (3 = 3): half the gradient to each, as torch
    assert_like_torch(torch, getattr(ops, name), getattr(torch, name), [a, b])
    assert_like_torch(torch, lambda x, y: getattr(ops, name)(x, other=y), getattr(torch, name), [a, b])
    values, indices = getattr(ops, name)(tape.tensor(a), 1)  # an int is still the dim
    expected = getattr(torch, name)(torch.from_numpy(a), 1)
    np.testing.assert_array_equal(values.numpy(), expected.values.numpy())
    np.testing.assert_array_equal(indices.numpy(), expected.indices.numpy())
    with pytest.raises(TypeError, match=f"{name}: a tensor 'other' .* takes no dim or keepdim"):
        getattr(ops, name)(tape.tensor(a), other=tape.tensor(b), keepdim=True)


def test_tensordot_without_contracted_dims_multiplies_zero_by_inf_as_ieee(torch):
    """dims=0 is an outer product: 0 * inf is NaN (torch's); numpy's tensordot of a 0-D operand skipped the product
    and gave 0 (found by the ONNX export's edge-value check, where ONNX Runtime gives NaN)."""
    b = np.array([-np.inf, -1e-310, np.nan, 2.0])
    for a in (np.float64(-0.0), np.array([0.0, 1.0])):
        ours = ops.tensordot(tape.tensor(a), tape.tensor(b), dims=0).numpy()
        theirs = torch.tensordot(torch.tensor(a), torch.tensor(b), dims=0).numpy()
        np.testing.assert_array_equal(ours, theirs)
