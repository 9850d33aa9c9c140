"""Decompositions at and near rank deficiency (issue 19, item 4): the gradient is right (float64 central finite
differences, and torch where torch is right), or inf/NaN where the decomposition has no derivative -- never a
finite wrong number. The inputs are the ones floating point really produces: a "singular" matrix whose pivot,
gap or singular value comes out of LAPACK as 1e-16 rather than 0, which an exact-zero test misses.

Where the decomposition is differentiable although a pivot is (numerically) zero -- QR with a square Q (m <= n)
whose LAST pivot vanishes: Q's last column is fixed by the others -- the gradient is exact; torch's is right for
wide matrices and wrong for square ones, so finite differences are the reference."""

import numpy as np
import pytest

import ops
import tape
from tape import gradcheck


def leaf(a):
    return tape.tensor(np.array(a, dtype=np.float64), requires_grad=True)


def orthogonal(n, seed):
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def qr_loss(which):
    """A fixed weighting of Q, R or both (no sign gauge issue: LAPACK's Householder QR is smooth in A)."""

    def loss(t):
        q, r = ops.qr(t)
        wq = np.linspace(-1.0, 1.5, q.shape[-2] * q.shape[-1]).reshape(q.shape[-2:])  # the same for each matrix
        wr = np.linspace(0.5, -2.0, r.shape[-2] * r.shape[-1]).reshape(r.shape[-2:])
        return {"Q": ops.sum(q * wq), "R": ops.sum(r * wr), "QR": ops.sum(q * wq) + ops.sum(r * wr)}[which]

    return loss


def grad_of(loss, a):
    t = leaf(a)
    loss(t).backward()
    return t.grad.numpy()


# -- qr ------------------------------------------------------------------------------------------------------
DIFFERENTIABLE_QR = {
    "wide, leading 2 x 2 singular (the issue's)": [[1.0, 2.0, 3.0], [2.0, 4.0, 7.0]],
    "square 2 x 2 singular": [[1.0, 2.0], [2.0, 4.0]],
    "square 3 x 3, last column dependent": [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [2.0, 3.0, 5.0]],
    "wide 3 x 4, third column dependent": [[1.0, 0.0, 1.0, 2.0], [0.0, 1.0, 1.0, 3.0], [2.0, 3.0, 5.0, 1.0]],
    "batched: regular and singular": [[[2.0, 1.0, 0.5], [1.0, 3.0, 1.0]], [[1.0, 2.0, 3.0], [2.0, 4.0, 7.0]]],
}


@pytest.mark.parametrize("which", ["Q", "R", "QR"])
@pytest.mark.parametrize("label", list(DIFFERENTIABLE_QR))
def test_qr_with_a_vanishing_last_pivot_and_a_square_q_has_the_exact_gradient(label, which):
    a = np.array(DIFFERENTIABLE_QR[label])
    assert np.abs(np.diagonal(np.linalg.qr(a)[1], axis1=-2, axis2=-1)).min() < 1e-14  # a rounding-level pivot
    gradcheck(qr_loss(which), [leaf(a)])


def test_qr_wide_singular_leading_block_matches_torch(torch):
    a = np.array(DIFFERENTIABLE_QR["wide, leading 2 x 2 singular (the issue's)"])
    ref = torch.tensor(a, requires_grad=True)
    q, r = torch.linalg.qr(ref)
    wq, wr = np.linspace(-1.0, 1.5, 4).reshape(2, 2), np.linspace(0.5, -2.0, 6).reshape(2, 3)
    ((q * torch.from_numpy(wq)).sum() + (r * torch.from_numpy(wr)).sum()).backward()
    np.testing.assert_allclose(grad_of(qr_loss("QR"), a), ref.grad.numpy(), rtol=1e-9, atol=1e-9)


NON_DIFFERENTIABLE_QR = {
    "square, middle column dependent": [[1.0, 2.0, 1.0], [2.0, 4.0, 0.0], [3.0, 6.0, 1.0]],
    "tall, rank deficient": [[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]],
    "wide, first column zero": [[0.0, 1.0, 2.0], [0.0, 3.0, 1.0]],
    "wide 3 x 4, leading block of rank 1": [[1.0, 2.0, 3.0, 1.0], [2.0, 4.0, 6.0, 0.0], [1.0, 2.0, 3.0, 5.0]],
}


@pytest.mark.parametrize("which", ["Q", "QR"])
@pytest.mark.parametrize("label", list(NON_DIFFERENTIABLE_QR))
def test_qr_without_a_derivative_gives_inf_or_nan_not_a_finite_number(label, which):
    # Q's column for the dependent column is not determined by A: torch gives 1e14-size finite numbers here
    g = grad_of(qr_loss(which), np.array(NON_DIFFERENTIABLE_QR[label]))
    assert not np.isfinite(g).all()


def test_qr_singular_entry_of_a_batch_leaves_the_regular_entries_right():
    regular = [[2.0, 1.0], [1.0, 3.0], [0.5, 1.0]]
    batch = np.array([regular, NON_DIFFERENTIABLE_QR["tall, rank deficient"]])
    g = grad_of(qr_loss("QR"), batch)
    np.testing.assert_allclose(g[0], grad_of(qr_loss("QR"), np.array(regular)), rtol=1e-12)
    assert not np.isfinite(g[1]).all()


def test_qr_small_but_genuine_pivot_keeps_its_large_finite_gradient():
    a = np.array([[1.0, 1.0], [1.0, 1.0 + 1e-5], [0.0, 1.0]])
    a[2, 1] = 1e-5  # the second pivot is ~1e-5: far above rounding, the derivative exists
    gradcheck(qr_loss("QR"), [leaf(a)], eps=1e-9, rtol=1e-4)


# -- eigh and svd: ties and zeros at rounding level --------------------------------------------------------
def noisy_symmetric(w, seed):
    v = orthogonal(len(w), seed)
    a = (v * np.asarray(w, dtype=np.float64)) @ v.T
    return (a + a.T) / 2


def test_eigh_vectors_at_a_repeated_eigenvalue_with_rounding_noise_are_inf_or_nan(torch):
    a = noisy_symmetric([1.0, 1.0, 3.0], seed=5)
    w = np.linalg.eigvalsh(a)
    assert 0 < w[1] - w[0] < 1e-14  # not an exact tie: the exact-zero test misses it
    g = grad_of(lambda t: ops.sum(ops.eigh(t)[1] * np.arange(9.0).reshape(3, 3)), a)
    assert not np.isfinite(g).all()
    # the values alone have torch's (finite) gradient
    ref = torch.tensor(a, requires_grad=True)
    weights = [1.0, 1.0, 3.0]  # the same weight for the tied pair: a smooth function of A (else a kink)
    (torch.linalg.eigh(ref.tril() + ref.tril(-1).mT)[0] * torch.tensor(weights, dtype=ref.dtype)).sum().backward()
    np.testing.assert_allclose(grad_of(lambda t: ops.sum(ops.eigh(t)[0] * np.array(weights)), a),
                               ref.grad.numpy(), atol=1e-12)


def test_eigh_with_close_but_distinct_eigenvalues_keeps_the_exact_gradient():
    a = noisy_symmetric([1.0, 1.0 + 1e-4, 3.0], seed=6)
    gradcheck(lambda t: ops.sum(ops.eigh(t)[1] ** 2 * np.arange(9.0).reshape(3, 3)), [leaf(a)], eps=1e-9, rtol=1e-4)


def svd_u_loss(t):
    return ops.sum(ops.svd(t, full_matrices=False)[0] ** 2 * np.linspace(-1, 2, 9).reshape(3, 3)[: t.shape[-2]])


@pytest.mark.parametrize("label,make", [
    ("repeated singular value", lambda: (orthogonal(3, 6) * [2.0, 1.0, 1.0]) @ orthogonal(3, 7).T),
    ("square of rank 1: two zero singular values", lambda: np.outer([1.0, 2.0, -1.0], [0.5, 1.0, 3.0])),
    ("tall of rank 2: a zero singular value", lambda: np.random.default_rng(8).standard_normal((4, 2))
     @ np.random.default_rng(9).standard_normal((2, 3))),
    ("wide of rank 1", lambda: np.outer([1.0, 2.0], [0.5, 1.0, 3.0])),
])
def test_svd_vectors_at_rounding_level_ties_or_zeros_are_inf_or_nan(label, make):
    a = make()
    s = np.linalg.svd(a, compute_uv=False)
    assert np.isfinite(s).all()
    t = leaf(a)
    u, _, vh = ops.svd(t, full_matrices=False)
    wu, wv = np.linspace(-1, 2, u.numel()).reshape(u.shape), np.linspace(1, 3, vh.numel()).reshape(vh.shape)
    (ops.sum(u * wu) + ops.sum(vh * wv)).backward()
    assert not np.isfinite(t.grad.numpy()).all()


def test_svd_of_a_square_matrix_with_one_zero_singular_value_has_the_exact_vector_gradient():
    a = np.random.default_rng(8).standard_normal((3, 2)) @ np.random.default_rng(9).standard_normal((2, 3))
    assert np.linalg.svd(a, compute_uv=False)[-1] < 1e-15  # distinct values; square: no S^-1 term
    gradcheck(svd_u_loss, [leaf(a)])


def test_svd_with_a_small_but_genuine_singular_value_keeps_the_exact_gradient():
    a = (orthogonal(4, 1)[:, :2] * [2.0, 1e-4]) @ orthogonal(2, 2).T
    gradcheck(lambda t: ops.sum(ops.svd(t, full_matrices=False)[0] ** 2 * np.linspace(-1, 2, 8).reshape(4, 2)),
              [leaf(a)], eps=1e-9, rtol=1e-4)


# -- cholesky, det, slogdet -----------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 7, 13])
def test_cholesky_of_a_semidefinite_matrix_with_a_rounding_level_pivot_gives_inf_or_nan(seed):
    x = np.random.default_rng(seed).standard_normal((3, 2))
    a = x @ x.T  # rank 2: LAPACK completes the factorisation with a ~1e-8 last diagonal entry (pivot ~1e-16)
    try:
        lower = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:  # the rounded pivot came out negative (OpenBLAS's Haswell kernel, seed 13):
        with pytest.raises(Exception, match="cholesky"):  # then the op refuses the matrix, naming itself
            ops.cholesky(tape.tensor(a))
        return
    assert 0 < lower[2, 2] ** 2 <= 3 * np.finfo(np.float64).eps * np.diag(a).max()  # numpy's matrix_rank tolerance
    g = grad_of(lambda t: ops.sum(ops.cholesky(t) * np.tril(np.ones((3, 3)))), a)
    assert not np.isfinite(g).all()


def test_cholesky_with_a_small_but_genuine_pivot_keeps_the_exact_gradient():
    a = np.diag([1.0, 1e-6, 2.0]) + 1e-4 * np.ones((3, 3))
    gradcheck(lambda t: ops.sum(ops.cholesky(t) * np.tril(np.ones((3, 3)))), [leaf(a)], eps=1e-10, rtol=1e-4)


@pytest.mark.parametrize("seed", range(6))
def test_det_gradient_at_a_rounding_level_det_is_the_cofactor_matrix(seed):
    rng = np.random.default_rng(seed)
    n = 2 + seed % 3
    a = rng.standard_normal((n, n - 1)) @ rng.standard_normal((n - 1, n))
    cofactors = np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1)) for j in range(n)]
                          for i in range(n)])
    np.testing.assert_allclose(grad_of(ops.det, a), cofactors, rtol=1e-9, atol=1e-12 * np.abs(cofactors).max())
