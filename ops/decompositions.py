"""Matrix products and decompositions, as in PyTorch 2.13: ``bmm``, ``outer``, ``dot``, ``tensordot`` (torch.*)
and ``inv``, ``solve``, ``det``, ``slogdet``, ``cholesky``, ``qr``, ``eigh``, ``svd`` (torch.linalg.*, flat in
ops). Family "linalg". numpy's LAPACK does the factorisations; every op takes batches (``(*, m, n)``) where
torch does, and zero-size batches and 0 x 0 matrices work forward and backward as in torch. Each op's semantics,
gradient formula and conditions are its notes (``_CASE_LAW``, shown in docs/coverage.md).
"""

__all__ = ["bmm", "outer", "dot", "tensordot", "inv", "solve", "det", "slogdet", "cholesky", "qr", "eigh", "svd"]

import numpy as np

from tape.broadcast import unbroadcast
from tape.onnx import lowering
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop

from . import _numpy
from ._notes import case_law
from ._numerics import constant_values, quiet
from ._onnx import NotExportable
from ._samples import transposed, uniform
from ._validation import batch_dims_or_fail, integer, normalize_dim, one_of, real, require, require_bool, require_float
from .reduce import _norm_of, _norm_vjp_of

# torch's case law, op by op: each entry joins the notes= of the ops it names (shown in docs/coverage.md)
_CASE_LAW = (
    (
        ("bmm", "outer", "dot", "tensordot"),
        "bmm(input, mat2): 3-D only, equal batch sizes, no broadcasting. outer(input, vec2) and dot(input, "
        "tensor): 1-D only. tensordot(a, b, dims=2): ``dims`` an int (a's last dims with b's first) or a pair"
        " of lists of dims; a contracted dim of size 1 against a larger one is summed first (torch's "
        "broadcast). Unlike torch's outer, mixed dtypes are refused (minitape never promotes silently), as "
        "for every op here.",
    ),
    (
        ("inv", "det", "slogdet", "cholesky", "eigh"),
        "inv, det, slogdet, cholesky, eigh: square matrices ``(*, n, n)`` of a floating dtype. A singular "
        "matrix (numpy's LinAlgError) makes inv and solve raise ValueError naming the op; det/slogdet of a "
        "singular matrix are 0 / (sign 0, logabsdet -inf) like torch's.",
    ),
    (
        ("solve",),
        "solve(A, B, *, left=True): B is a batch of vectors when it is 1-D or has shape ``A.shape[:-1]`` "
        "(torch's rule; so a (3, 3, 3) A with a (3, 3) B is a batch of vectors), else a batch of matrices "
        "``(*, n, k)``; batch dims broadcast. ``left=False`` solves X A = B for matrices B ``(*, k, n)`` "
        "(torch refuses vectors there).",
    ),
    (
        ("cholesky", "eigh"),
        'cholesky(A, *, upper=False) and eigh(A, UPLO="L") read ONE triangle of A (the lower one, or the '
        "upper with upper=True / UPLO=\"U\"), as torch's and LAPACK's do; the other triangle is ignored. A non "
        "positive-definite input to cholesky raises ValueError.",
    ),
    (
        ("qr",),
        'qr(A, mode="reduced"): Q ``(*, m, k)``, R ``(*, k, n)``, k = min(m, n), LAPACK\'s Householder signs '
        '(the same as torch\'s). Only mode="reduced" is implemented.',
    ),
    (
        ("svd",),
        "svd(A, full_matrices=True): returns U ``(*, m, k)``, S ``(*, k)`` descending, Vh ``(*, k, n)``. Only"
        " the reduced decomposition is implemented: full_matrices=True is accepted for square matrices (where"
        " it is the same) and refused otherwise -- pass full_matrices=False.",
    ),
    (
        ("eigh", "svd"),
        "Sign gauge: eigenvectors and singular vectors are defined up to sign, and numpy's and torch's LAPACK"
        " builds pick different signs. eigh and svd fix the gauge: each eigenvector (column of V) and each "
        "left singular vector (column of U, its row of Vh flipped along) has its largest-magnitude entry "
        "positive (the first such entry on an exact tie). torch documents the sign as unspecified, so this is"
        " one of its valid outputs; the torch references in this module apply the same convention.",
    ),
    (
        ("bmm", "outer", "dot", "tensordot"),
        "bmm: gA = g B^T, gB = A^T g. outer: g_a = g b, g_b = g^T a. dot: g_a = g b, g_b = g a. tensordot: a "
        "tensordot of g with the other operand over its free dims, permuted back (and broadcast over summed "
        "dims).",
    ),
    (
        ("inv",),
        "inv: X = A^-1, dX = -X dA X, so gA = -X^T g X^T.",
    ),
    (
        ("solve",),
        "solve: X = A^-1 B, gB = A^-T g (a solve), gA = -gB X^T (vectors: the outer product); summed over "
        "broadcast batch dims. left=False: X = B A^-1, gB = g A^-T, gA = -X^T gB.",
    ),
    (
        ("det",),
        "det: d det = det tr(A^-1 dA), so gA = g det A^-T. At a singular matrix (det exactly 0) torch's LU "
        "formula gives 0, which is wrong: the true gradient is the cofactor matrix adj(A)^T, computed from "
        "the SVD A = U S Vh as det(U) det(Vh) U diag(prod_{j!=i} s_j) Vh; minitape returns it. Recorded "
        "(second order) it goes through the svd and prod ops, so its own derivative is exact where A's "
        "singular values are distinct (rank n - 1).",
    ),
    (
        ("slogdet",),
        "slogdet: d log|det| = tr(A^-1 dA), so gA = g_logabs A^-T; the sign is piecewise constant (its "
        "cotangent is ignored). At a singular matrix the gradient is infinite: adj(A)^T / 0 gives inf/NaN, as"
        " torch's does.",
    ),
    (
        ("cholesky",),
        "cholesky (Murray 2016, arXiv:1602.07527; torch's form): A = L L^T gives L^-1 dL = Phi(L^-1 dA L^-T),"
        " Phi taking the lower triangle with half the diagonal, hence for symmetric dA: gA_sym = L^-T P L^-1 "
        "with P = sym(Phi(L^T gL)) = (Phi(M) + Phi(M)^T) / 2, M = L^T gL. upper=True: the same with L = U^T.",
    ),
    (
        ("qr",),
        "qr (Walter & Lehmann 2018; Liao et al. 2019, arXiv:1903.09650): m > n: M = R gR^T - gQ^T Q and gA = "
        "(gQ + Q copyltu(M)) R^-T, copyltu(M) = tril(M) + tril(M, -1)^T. m <= n (Q square): A = [X | Y], R = "
        "[U | V], X = Q U, Y = Q V: gY = Q gV, and with gQ' = gQ + Y gV^T, N = Q^T gQ' the same rule reads gX"
        " = Q Z, Z U^T = C = copyltu(U gU^T) + tril(N - N^T). C's last column is u_mm gU[:, -1] exactly, so "
        "Z's is gU[:, -1] and the last pivot is never divided by: Q's last column is fixed by the others, and"
        " the gradient is exact when A's last leading column depends on the ones before (torch's is right "
        "there for m < n only).",
    ),
    (
        ("eigh",),
        "eigh: A = V diag(w) V^T, dw = diag(V^T dA V), V^T dV = F o (V^T dA V) with F_ij = 1 / (w_j - w_i) "
        "off the diagonal, so gA_sym = V (diag(gw) + F o skew(V^T gV)) V^T, skew(X) = (X - X^T) / 2 (torch's "
        "form).",
    ),
    (
        ("svd",),
        "svd (torch's svd_backward, real case): with E_jk = s_k^2 - s_j^2, skew(X) = X - X^T, gA = U "
        "[(skew(U^T gU) S + S skew(V^T gV)) / E + diag(gS)] Vh, plus (I - U U^T) gU S^-1 Vh when m > n and U "
        "S^-1 gVh (I - V V^T) when m < n (the part of A's column/row space U, V do not span).",
    ),
    (
        ("cholesky", "eigh"),
        "Symmetric inputs (cholesky, eigh): the formulas above give torch's gradient gA_sym, symmetric, valid"
        " for symmetric perturbations only. The op reads one triangle, so its exact derivative (what finite "
        'differences measure) is gA_sym folded onto that triangle: tril(gA_sym) + tril(gA_sym^T, -1) for "L" '
        "(off-diagonal entries doubled, the other triangle 0). minitape returns the folded gradient. It "
        "differs from torch's number for a leaf A, but agrees with torch for every symmetric parametrisation "
        "of A (A = S + S^T, A = X X^T, ...: the chain rule gives the same parameter gradients), and it is the"
        " one finite differences confirm; the torch references here read the triangle explicitly (``tril(A) +"
        " tril(A, -1)^T``) so autograd folds the same way.",
    ),
    (
        ("inv", "solve", "slogdet", "cholesky", "qr", "eigh", "svd"),
        "Gradient conditions: where a decomposition has no derivative the gradient is inf/NaN, never a finite"
        " number. LAPACK returns a tie or a zero as a rounding-level value (2e-16, not 0), so a pivot, a gap "
        "or a singular value at most max(m, n) eps ||A|| (numpy's matrix_rank tolerance) counts as 0. eigh's "
        "gradient through the eigenvectors is inf/NaN at repeated eigenvalues (F divides by w_j - w_i); svd's"
        " through U or Vh at repeated singular values, and for non-square A also at a zero singular value "
        "(S^-1), as torch's at exact ties. Gradients through eigenvalues or singular values alone need no "
        "distinct values. A loss must not depend on the vectors' signs (the gauge); with this module's sign "
        "convention the vectors are locally smooth functions of A away from ties, so finite differences "
        "agree. qr's gradient is NaN for a matrix with a zero pivot other than the last one of a square Q "
        "(A's columns up to min(m, n) dependent); cholesky's NaN at a zero pivot (A semidefinite). inv, solve"
        " and slogdet near a singular matrix are as torch's: finite, as accurate as A's condition number "
        "allows.",
    ),
    (
        ("bmm", "outer", "dot", "tensordot", "inv", "solve", "det", "slogdet", "cholesky", "qr", "eigh", "svd"),
        "Second order: every rule is written with numpy functions over its arguments (matmul, swapaxes, tril,"
        " einsum, ...) and calls this module's ops (inv, solve, tensordot, svd) when given Tensors, so "
        "``create_graph=True`` records the backward and every op here differentiates twice. slogdet's "
        "recorded backward at a singular matrix raises (inv refuses it) instead of giving inf/NaN.",
    ),
)

FAMILY = "linalg"


# -- shared helpers ----------------------------------------------------------------------------------------------
def _mT(x):
    """The matrix transpose of the last two dims (works on arrays and, recorded, on Tensors)."""
    return np.swapaxes(x, -1, -2)


def _is_array(*xs) -> bool:
    return all(isinstance(x, np.ndarray | np.generic) for x in xs)


def _values(x) -> np.ndarray:
    """The values of an array or a Tensor (for tests on them, never for arithmetic that must be recorded)."""
    return x if _is_array(x) else constant_values(x)


def _same_dtype(op: str, names: tuple, arrays) -> None:
    first = arrays[0]
    for name, a in zip(names[1:], arrays[1:]):
        if a.dtype != first.dtype:
            raise TypeError(
                f"{op}: argument '{name}' expected dtype {first.dtype} (that of '{names[0]}'), got {a.dtype}"
            )


def _check_matrices(op: str, A, name: str = "A", square: bool = True) -> None:
    require_float(op, name, A)
    require(A.ndim >= 2, op, name, "a matrix or a batch of matrices (at least 2 dims)", f"shape {A.shape}")
    if square:
        require(A.shape[-1] == A.shape[-2], op, name, "square matrices (*, n, n)", f"shape {A.shape}")


def _eye(n: int, dtype):
    return np.eye(n, dtype=dtype)


def _diag_embed(v):
    """(*, k) -> (*, k, k) with v on the diagonal."""
    return np.expand_dims(v, -1) * _eye(v.shape[-1], v.dtype)


def _inverse(A):
    """A^-1: numpy's on arrays, the inv op on Tensors (recorded)."""
    return np.linalg.inv(A) if _is_array(A) else inv(A)


def _solve_matrices(A, B):
    """A^-1 B for a matrix (stack) B ``(*, n, k)``: numpy's on arrays, the solve op on Tensors (recorded)."""
    if _is_array(A, B):
        return np.linalg.solve(A, B)
    return solve(A, B)


def _rounding_level(scale, size: int, dtype):
    """The magnitude below which LAPACK's value of a quantity (a pivot, a gap, a singular value) of a matrix of
    norm ~``scale`` is rounding noise: numpy's matrix_rank tolerance. Such a value is treated as exactly 0."""
    return size * np.finfo(dtype).eps * np.asarray(scale)


def _untied(values, size: int):
    """(*, k, k) 0/1: 0 where two of ``values`` (eigen- or singular values, *, k) are equal up to rounding, so the
    gap 1 / (v_j - v_i) that differentiating the vectors needs is 1 / 0 (inf/NaN, torch's at an exact tie)."""
    v = _values(values)
    tol = _rounding_level(np.max(np.abs(v), axis=-1, initial=0.0), size, v.dtype)[..., None, None]
    return (np.abs(np.expand_dims(v, -2) - np.expand_dims(v, -1)) > tol).astype(v.dtype)


def _nan_where(grad, bad):
    """``grad`` with the matrices where ``bad`` (batch shape) set to NaN: no derivative exists there."""
    if not np.any(bad):
        return grad
    return grad + np.expand_dims(np.where(bad, np.nan, 0.0).astype(grad.dtype), (-1, -2))


def _quiet(fn):
    """Run ``fn`` without numpy's divide/invalid warnings: repeated eigenvalues give torch's inf/NaN."""

    def run(*args, **kwargs):
        with np.errstate(divide="ignore", invalid="ignore"):
            return fn(*args, **kwargs)

    run.__name__, run.__doc__ = fn.__name__, fn.__doc__
    return run


def _sign_gauge(U):
    """(*, 1, k) signs making each column's largest-magnitude entry positive (ones for empty columns)."""
    if U.shape[-2] == 0:
        return np.ones(U.shape[:-2] + (1, U.shape[-1]), U.dtype)
    top = np.take_along_axis(U, np.argmax(np.abs(U), axis=-2)[..., None, :], axis=-2)
    return np.where(top < 0, -1, 1).astype(U.dtype)


def _torch_sign_gauge(torch, U):
    """torch's version of ``_sign_gauge`` (a constant: no gradient flows through the choice of sign)."""
    if U.shape[-2] == 0 or U.numel() == 0:
        return torch.ones(U.shape[:-2] + (1, U.shape[-1]), dtype=U.dtype)
    top = torch.gather(U, -2, U.abs().argmax(-2, keepdim=True))
    return torch.where(top < 0, -1.0, 1.0).to(U.dtype).detach()


def _fold(G, lower: bool):
    """A gradient for the symmetric matrix onto the triangle the op read: the exact derivative of that op."""
    return np.tril(G) + np.tril(_mT(G), -1) if lower else np.triu(G) + np.triu(_mT(G), 1)


def _torch_triangle(torch, A, lower: bool):
    return A.tril() + A.tril(-1).mT if lower else A.triu() + A.triu(1).mT


# -- sample matrices ---------------------------------------------------------------------------------------------
def _orthogonal(rng, n):
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def _stacked(batch: tuple, make):
    """``make()`` matrices stacked to batch dims ``batch`` (which may hold 0)."""
    first = make()
    if not batch:
        return first
    count = int(np.prod(batch))
    if count == 0:
        return np.zeros(batch + first.shape)
    return np.stack([first] + [make() for _ in range(count - 1)]).reshape(batch + first.shape)


def _well_conditioned(rng, shape, negative=False):
    """Random entries in [-1, 1] plus n I (diagonally dominant: invertible, condition number ~ 1); with
    ``negative`` the first row is negated, so det < 0."""
    n = shape[-1]
    a = uniform(rng, shape, -1.0, 1.0) + n * np.eye(n)
    if negative and n:
        a[..., 0, :] *= -1
    return a


def _spd(rng, shape):
    n = shape[-1]
    x = uniform(rng, shape, -1.0, 1.0)
    return x @ _mT(x) + n * np.eye(n)


def _symmetric_spread(rng, shape):
    """Symmetric matrices with eigenvalues at least 0.5 apart: V diag(w) V^T."""
    n = shape[-1]

    def make():
        w = -1.5 + 0.8 * np.arange(n) + rng.uniform(0.0, 0.3, n)
        v = _orthogonal(rng, n)
        return (v * w) @ v.T

    return _stacked(shape[:-2], make)


def _spread_singular_values(rng, shape):
    """Matrices with singular values at least 0.4 apart and at least 0.5: U diag(s) V^T."""
    m, n = shape[-2:]
    k = min(m, n)

    def make():
        s = 0.5 + 0.7 * np.arange(k)[::-1] + rng.uniform(0.0, 0.3, k)
        return (_orthogonal(rng, m)[:, :k] * s) @ _orthogonal(rng, n)[:, :k].T

    return _stacked(shape[:-2], make)


def _non_contiguous(a):
    """The same values in a transposed (non-contiguous) memory layout."""
    return np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)


# -- bmm ---------------------------------------------------------------------------------------------------------
def _check_bmm(input, mat2):
    require(input.ndim == 3, "bmm", "input", "a 3-D tensor (b, n, m)", f"shape {input.shape}")
    require(mat2.ndim == 3, "bmm", "mat2", "a 3-D tensor (b, m, p)", f"shape {mat2.shape}")
    require(
        mat2.shape[:2] == (input.shape[0], input.shape[2]),
        "bmm",
        "mat2",
        f"shape ({input.shape[0]}, {input.shape[2]}, p) to match input {input.shape} (no broadcasting)",
        f"shape {mat2.shape}",
    )
    _same_dtype("bmm", ("input", "mat2"), (input, mat2))


def _bmm(input, mat2):
    """``torch.bmm(input, mat2)``: (b, n, m) @ (b, m, p) -> (b, n, p)."""
    return np.matmul(input, mat2)


def _bmm_samples(rng):
    def u(*shape):
        return uniform(rng, shape)

    return [
        Sample((u(2, 3, 4), u(2, 4, 5)), {}, "(2, 3, 4) @ (2, 4, 5)"),
        Sample((u(1, 2, 1), u(1, 1, 3)), {}, "size-1 dims"),
        Sample((transposed(rng, (2, 3, 4)), transposed(rng, (2, 4, 2))), {}, "non-contiguous"),
        Sample((rng.integers(-3, 4, (2, 2, 3)), rng.integers(-3, 4, (2, 3, 2))), {}, "int64"),
        Sample((u(0, 2, 3), u(0, 3, 4)), {}, "zero-size batch"),
        Sample((u(2, 3, 0), u(2, 0, 4)), {}, "inner dim 0: zeros"),
        Sample((u(2, 0, 3), u(2, 3, 2)), {}, "no rows"),
    ]


bmm = defop(
    "bmm",
    family=FAMILY,
    inputs=("input", "mat2"),
    forward=_bmm,
    vjps=(lambda g, ans, input, mat2: np.matmul(g, _mT(mat2)), lambda g, ans, input, mat2: np.matmul(_mT(input), g)),
    check=_check_bmm,
    samples=_bmm_samples,
    torch_ref=lambda torch, input, mat2: torch.bmm(input, mat2),
    method=True,
    notes=case_law(_CASE_LAW, "bmm"),
)


# -- outer -------------------------------------------------------------------------------------------------------
def _check_vectors(op, names, a, b, same_size):
    require(a.ndim == 1, op, names[0], "a 1-D tensor", f"shape {a.shape}")
    require(b.ndim == 1, op, names[1], "a 1-D tensor", f"shape {b.shape}")
    if same_size:
        require(a.shape == b.shape, op, names[1], f"{a.shape[0]} elements (as '{names[0]}')", f"shape {b.shape}")
    _same_dtype(op, names, (a, b))


def _outer(input, vec2):
    """``torch.outer(input, vec2)``: (n,) x (m,) -> (n, m)."""
    return np.multiply.outer(input, vec2)


def _vector_samples(rng, second_size=None):
    def u(*shape):
        return uniform(rng, shape)

    def other(n):
        return u(n if second_size is None else second_size)

    return [
        Sample((u(3), other(3)), {}, "3"),
        Sample((u(1), other(1)), {}, "1 element"),
        Sample(
            (u(8)[::2], uniform(rng, (8,))[1::2] if second_size is None else u(5)[::-1]), {}, "non-contiguous (strided)"
        ),
        Sample((rng.integers(-3, 4, 4), rng.integers(-3, 4, 4 if second_size is None else second_size)), {}, "int64"),
        Sample((u(0), other(0)), {}, "zero-size"),
    ]


def _outer_samples(rng):
    return _vector_samples(rng, second_size=4) + [Sample((uniform(rng, (3,)), uniform(rng, (0,))), {}, "(3,) x (0,)")]


outer = defop(
    "outer",
    family=FAMILY,
    inputs=("input", "vec2"),
    forward=_outer,
    vjps=(lambda g, ans, input, vec2: np.matmul(g, vec2), lambda g, ans, input, vec2: np.matmul(input, g)),
    check=lambda input, vec2: _check_vectors("outer", ("input", "vec2"), input, vec2, False),
    samples=_outer_samples,
    torch_ref=lambda torch, input, vec2: torch.outer(input, vec2),
    method=True,
    numpy={np.outer: _numpy.outer},
    notes=case_law(_CASE_LAW, "outer"),
)


# -- dot ---------------------------------------------------------------------------------------------------------
def _dot(input, tensor):
    """``torch.dot(input, tensor)``: the inner product of two 1-D tensors of the same size (0-D result)."""
    return np.asarray(np.dot(input, tensor))


dot = defop(
    "dot",
    family=FAMILY,
    inputs=("input", "tensor"),
    forward=_dot,
    vjps=(lambda g, ans, input, tensor: g * tensor, lambda g, ans, input, tensor: g * input),
    check=lambda input, tensor: _check_vectors("dot", ("input", "tensor"), input, tensor, True),
    samples=_vector_samples,
    torch_ref=lambda torch, input, tensor: torch.dot(input, tensor),
    method=True,
    numpy={np.dot: _numpy.dot},
    notes=case_law(_CASE_LAW, "dot"),
)


# -- tensordot ---------------------------------------------------------------------------------------------------
def _tensordot_dim_list(a_ndim, dims, which, name):
    if not isinstance(dims, list | tuple):
        raise TypeError(
            f"tensordot: argument 'dims' expected an int or a pair of lists of dims, got {which} "
            f"{type(dims).__name__} {dims!r}"
        )
    out = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int | np.integer):
            raise TypeError(f"tensordot: argument 'dims' expected ints in its list for '{name}', got {d!r}")
        require(
            -a_ndim <= d < a_ndim, "tensordot", "dims", f"dims of '{name}' in [{-a_ndim}, {a_ndim - 1}] ({a_ndim}-D)", d
        )
        out.append(int(d) % a_ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"tensordot: argument 'dims' repeats a dim of '{name}': {list(dims)}")
    return tuple(out)


def _tensordot_plan(a_shape, b_shape, dims):
    """(dims_a, dims_b, a's dims to sum first, b's dims to sum first), validated as torch does."""
    if isinstance(dims, bool):
        raise TypeError(f"tensordot: argument 'dims' expected an int or a pair of lists of dims, got {dims!r}")
    if isinstance(dims, int | np.integer):
        require(
            bool(0 <= dims <= min(len(a_shape), len(b_shape))),
            "tensordot",
            "dims",
            f"an int in [0, {min(len(a_shape), len(b_shape))}] (at most both operands' dims)",
            dims,
        )
        dims_a = tuple(range(len(a_shape) - int(dims), len(a_shape)))
        dims_b = tuple(range(int(dims)))
    elif isinstance(dims, list | tuple) and len(dims) == 2:
        dims_a = _tensordot_dim_list(len(a_shape), dims[0], "first", "a")
        dims_b = _tensordot_dim_list(len(b_shape), dims[1], "second", "b")
        require(len(dims_a) == len(dims_b), "tensordot", "dims", "two lists of the same length", list(dims))
    else:
        raise TypeError(f"tensordot: argument 'dims' expected an int or a pair of lists of dims, got {dims!r}")
    sum_a, sum_b = [], []
    for da, db in zip(dims_a, dims_b):
        sa, sb = a_shape[da], b_shape[db]
        if sb == 1 and sa != 1:
            sum_a.append(da)  # b broadcasts along this dim: a's entries can be summed first (torch's rule)
        elif sa == 1 and sb != 1:
            sum_b.append(db)
        elif sa != sb:
            raise ValueError(
                f"tensordot: argument 'b' expected size {sa} (or 1) in dim {db} to contract with dim "
                f"{da} of 'a' (shape {a_shape}), got shape {b_shape}"
            )
    return dims_a, dims_b, tuple(sum_a), tuple(sum_b)


def _check_tensordot(a, b, dims=2):
    _same_dtype("tensordot", ("a", "b"), (a, b))
    _tensordot_plan(a.shape, b.shape, dims)


def _summed(x, axes):
    return np.sum(x, axis=axes, keepdims=True) if axes else x


def _tensordot(a, b, dims=2):
    """``torch.tensordot(a, b, dims=2)``."""
    dims_a, dims_b, sum_a, sum_b = _tensordot_plan(a.shape, b.shape, dims)
    if not dims_a:  # an outer product: numpy's tensordot of a 0-D operand gives 0 for 0 * inf and 0 * NaN
        return np.multiply.outer(a, b)
    return np.asarray(np.tensordot(_summed(a, sum_a), _summed(b, sum_b), axes=(dims_a, dims_b)))


def _contract(x, y, axes_x, axes_y):
    if _is_array(x, y):
        return np.tensordot(x, y, axes=(axes_x, axes_y))
    return tensordot(x, y, dims=(list(axes_x), list(axes_y)))


def _order(labels) -> list:
    """The permutation putting axes labelled ``labels`` (their target positions) in place."""
    return [int(i) for i in np.argsort(labels)]


def _tensordot_vjp(g, ans, a, b, *, needs, dims=2):
    dims_a, dims_b, sum_a, sum_b = _tensordot_plan(a.shape, b.shape, dims)
    a_, b_ = _summed(a, sum_a), _summed(b, sum_b)
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    ga = gb = None
    if needs[0]:
        # g's b-part against b's free dims leaves g's a-part, then b's contracted dims in b's order
        grad = _contract(g, b_, range(len(free_a), g.ndim), free_b)
        labels = free_a + [dims_a[dims_b.index(d)] for d in sorted(dims_b)]
        ga = np.transpose(grad, _order(labels))
        ga = np.broadcast_to(ga, a.shape) if sum_a else ga
    if needs[1]:
        grad = _contract(a_, g, free_a, range(len(free_a)))
        labels = [dims_b[dims_a.index(d)] for d in sorted(dims_a)] + free_b
        gb = np.transpose(grad, _order(labels))
        gb = np.broadcast_to(gb, b.shape) if sum_b else gb
    return ga, gb


def _tensordot_samples(rng):
    def u(*shape):
        return uniform(rng, shape)

    cases = [
        ((u(2, 3, 4), u(3, 4, 5)), 2, "dims=2"),
        ((u(2, 3), u(3, 4)), 1, "dims=1 (matmul)"),
        ((u(2), u(3)), 0, "dims=0 (outer)"),
        ((u(), u(3)), 0, "0-D, dims=0"),
        ((u(3, 4, 2), u(4, 3, 2)), ([1, 0], [0, 1]), "pair of lists, reordered"),
        ((u(2, 3), u(4, 3)), ([-1], [-1]), "negative dims"),
        ((u(2, 3), u(2, 3)), ([0, 1], [0, 1]), "full contraction"),
        ((u(2, 1, 3), u(4, 3, 5)), ([1, 2], [0, 1]), "size-1 dim of a broadcast: b summed"),
        ((u(2, 4, 3), u(1, 3, 5)), ([1, 2], [0, 1]), "size-1 dim of b broadcast: a summed"),
        ((transposed(rng, (3, 4)), transposed(rng, (4, 2, 3))), ([1], [0]), "non-contiguous"),
        ((rng.integers(-3, 4, (2, 3)), rng.integers(-3, 4, (3, 2))), 1, "int64"),
        ((u(2, 0), u(0, 3)), 1, "zero-size contracted dim: zeros"),
        ((u(0, 3), u(3, 2)), 1, "zero-size free dim"),
        ((u(2, 0, 3), u(1, 3)), ([1, 2], [0, 1]), "zero-size dim against size 1"),
    ]
    return [Sample(inputs, {"dims": dims}, label) for inputs, dims, label in cases]


tensordot = defop(
    "tensordot",
    family=FAMILY,
    inputs=("a", "b"),
    forward=_tensordot,
    joint_vjp=_tensordot_vjp,
    check=_check_tensordot,
    samples=_tensordot_samples,
    torch_ref=lambda torch, a, b, dims=2: torch.tensordot(a, b, dims=dims),
    numpy={np.tensordot: _numpy.tensordot},
    notes=case_law(_CASE_LAW, "tensordot"),
)


# -- inv ---------------------------------------------------------------------------------------------------------
def _singular(op: str, error) -> ValueError:
    return ValueError(f"{op}: argument 'A' expected invertible matrices, got a singular one (numpy: {error})")


def _inv(A):
    """``torch.linalg.inv(A)``."""
    try:
        return np.linalg.inv(A)
    except np.linalg.LinAlgError as e:
        raise _singular("inv", e) from None


def _inv_vjp(g, ans, A):
    xt = _mT(ans)
    return -np.matmul(np.matmul(xt, g), xt)


def _square_samples(make, extra=()):
    """Samples of one square-matrix argument: single, batched, 1 x 1, non-contiguous, zero-size."""

    def generate(rng):
        out = [
            Sample((make(rng, (3, 3)),), {}, "3 x 3"),
            Sample((make(rng, (2, 4, 4)),), {}, "batched"),
            Sample((make(rng, (2, 1, 2, 2)),), {}, "two batch dims"),
            Sample((make(rng, (1, 1)),), {}, "1 x 1"),
            Sample((_non_contiguous(make(rng, (2, 3, 3))),), {}, "non-contiguous"),
            Sample((make(rng, (0, 3, 3)),), {}, "zero-size batch"),
            Sample((make(rng, (0, 0)),), {}, "0 x 0"),
        ]
        return out + [make_extra(rng) for make_extra in extra]

    return generate


def _check_square(op):
    def check(A, **attrs):
        _check_matrices(op, A)

    return check


inv = defop(
    "inv",
    family=FAMILY,
    inputs=("A",),
    forward=_inv,
    vjps=(_inv_vjp,),
    check=_check_square("inv"),
    samples=_square_samples(
        _well_conditioned, [lambda rng: Sample((_well_conditioned(rng, (3, 3), negative=True),), {}, "negative det")]
    ),
    torch_ref=lambda torch, A: torch.linalg.inv(A),
    method="inverse",
    notes=case_law(_CASE_LAW, "inv"),
)


# -- solve -------------------------------------------------------------------------------------------------------
def _vector_rhs(A_shape, B_shape) -> bool:
    """torch's rule: B is a (batch of) vector(s) when 1-D or shaped like A without its last dim."""
    return len(B_shape) == 1 or (len(B_shape) == len(A_shape) - 1 and tuple(B_shape) == tuple(A_shape[:-1]))


def _check_solve(A, B, *, left=True):
    require_bool("solve", "left", left)
    _check_matrices("solve", A)
    _same_dtype("solve", ("A", "B"), (A, B))
    require(B.ndim >= 1, "solve", "B", "a vector or a matrix (or batches of them)", f"shape {B.shape}")
    n = A.shape[-1]
    vector = _vector_rhs(A.shape, B.shape)
    if left:
        rows = B.shape[-1] if vector else B.shape[-2]
        require(
            rows == n,
            "solve",
            "B",
            f"{n} rows for A X = B with A {A.shape} (a vector B of {n} entries, or a matrix (*, {n}, k))",
            f"shape {B.shape}",
        )
    else:
        require(
            not vector and B.shape[-1] == n,
            "solve",
            "B",
            f"matrices (*, k, {n}) for X A = B with A {A.shape} (left=False takes no vectors, as torch)",
            f"shape {B.shape}",
        )
    batch_b = B.shape[:-1] if vector else B.shape[:-2]
    batch_dims_or_fail("solve", "B", B.shape, batch_b, "A", A.shape[:-2])


def _solve(A, B, *, left=True):
    """``torch.linalg.solve(A, B, *, left=True)``: X with A X = B (left) or X A = B."""
    try:
        if not left:
            return _mT(np.linalg.solve(_mT(A), _mT(B)))
        if _vector_rhs(A.shape, B.shape):
            return np.linalg.solve(A, B[..., None])[..., 0]
        return np.linalg.solve(A, B)
    except np.linalg.LinAlgError as e:
        raise _singular("solve", e) from None


def _solve_vjp(g, ans, A, B, *, needs, left=True):
    if not left:  # X = B A^-1: gB = g A^-T, gA = -X^T gB
        gb = _mT(_solve_matrices(A, _mT(g)))
        ga = -unbroadcast(np.matmul(_mT(ans), gb), A.shape) if needs[0] else None
        return ga, (unbroadcast(gb, B.shape) if needs[1] else None)
    vector = _vector_rhs(A.shape, B.shape)
    x, g = (np.expand_dims(ans, -1), np.expand_dims(g, -1)) if vector else (ans, g)
    gb = _solve_matrices(_mT(A), g)  # A^-T g
    ga = -unbroadcast(np.matmul(gb, _mT(x)), A.shape) if needs[0] else None
    if not needs[1]:
        return ga, None
    b_shape = B.shape + (1,) if vector else B.shape
    return ga, np.reshape(unbroadcast(gb, b_shape), B.shape)


def _solve_samples(rng):
    def a(*shape):
        return _well_conditioned(rng, shape)

    def u(*shape):
        return uniform(rng, shape)

    cases = [
        ((a(3, 3), u(3)), {}, "vector"),
        ((a(3, 3), u(3, 2)), {}, "matrix"),
        ((a(2, 3, 3), u(3)), {}, "batched A, one vector (broadcast)"),
        ((a(2, 3, 3), u(2, 3)), {}, "batch of vectors (B.shape == A.shape[:-1])"),
        ((a(3, 3, 3), u(3, 3)), {}, "(3, 3, 3) with (3, 3): vectors, torch's rule"),
        ((a(2, 1, 3, 3), u(4, 3, 2)), {}, "batch dims broadcast"),
        ((a(3, 3), u(2, 3, 2)), {}, "batched B, one A (broadcast)"),
        ((a(3, 3), u(2, 3)), {"left": False}, "left=False: X A = B"),
        ((a(2, 3, 3), u(1, 4, 3)), {"left": False}, "left=False batched, broadcast"),
        ((_non_contiguous(a(2, 3, 3)), transposed(rng, (2, 3, 2))), {}, "non-contiguous"),
        ((a(1, 1), u(1)), {}, "1 x 1"),
        ((a(0, 3, 3), u(3)), {}, "zero-size batch"),
        ((a(3, 3), u(3, 0)), {}, "no right-hand sides"),
        ((a(0, 0), u(0, 2)), {}, "0 x 0"),
    ]
    return [Sample(inputs, attrs, label) for inputs, attrs, label in cases]


solve = defop(
    "solve",
    family=FAMILY,
    inputs=("A", "B"),
    forward=_solve,
    joint_vjp=_solve_vjp,
    check=_check_solve,
    samples=_solve_samples,
    torch_ref=lambda torch, A, B, left=True: torch.linalg.solve(A, B, left=left),
    notes=case_law(_CASE_LAW, "solve"),
)


# -- det ---------------------------------------------------------------------------------------------------------
def _det(A):
    """``torch.linalg.det(A)``."""
    return np.asarray(np.linalg.det(A))


def _cofactors(A):
    """adj(A)^T = det(U) det(Vh) U diag(prod_{j != i} s_j) Vh from the SVD: exact at singular matrices too. On
    Tensors it is recorded through the svd and prod ops (its own derivative needs distinct singular values)."""
    if A.shape[-1] == 0:
        return np.zeros(A.shape, A.dtype)
    if _is_array(A):
        u, s, vh = np.linalg.svd(A)
        ones = np.ones(s.shape[:-1] + (1,), s.dtype)
        before = np.cumprod(np.concatenate([ones, s[..., :-1]], -1), -1)  # prod_{j < i} s_j
        after = np.cumprod(np.concatenate([ones, s[..., :0:-1]], -1), -1)[..., ::-1]  # prod_{j > i} s_j
        others = before * after
    else:
        u, s, vh = svd(A)
        eye = _eye(s.shape[-1], s.dtype)
        others = np.prod(np.expand_dims(s, -2) * (1 - eye) + eye, axis=-1)  # row i: s with s_i replaced by 1
    signs = np.linalg.det(_values(u)) * np.linalg.det(_values(vh))  # +-1: constant (d det U = 0 on O(n))
    return np.expand_dims(np.asarray(signs, A.dtype), (-1, -2)) * np.matmul(u * np.expand_dims(others, -2), vh)


def _det_vjp(g, ans, A):
    if np.all(_values(ans) != 0):
        if _is_array(A):
            try:
                return np.expand_dims(g * ans, (-1, -2)) * _mT(np.linalg.inv(A))
            except np.linalg.LinAlgError:
                pass
        else:
            return np.expand_dims(g * ans, (-1, -2)) * _mT(inv(A))
    return np.expand_dims(g, (-1, -2)) * _cofactors(A)  # a singular matrix: torch's LU formula gives 0 here


det = defop(
    "det",
    family=FAMILY,
    inputs=("A",),
    forward=_det,
    vjps=(_det_vjp,),
    check=_check_square("det"),
    samples=_square_samples(
        _well_conditioned,
        [
            lambda rng: Sample((_well_conditioned(rng, (3, 3), negative=True),), {}, "negative det"),
            lambda rng: Sample((_well_conditioned(rng, (2, 2, 2), negative=True),), {}, "negative det, batched"),
        ],
    ),
    torch_ref=lambda torch, A: torch.linalg.det(A),
    method=True,
    notes=case_law(_CASE_LAW, "det"),
)


# -- slogdet -----------------------------------------------------------------------------------------------------
def _slogdet(A):
    """``torch.linalg.slogdet(A)`` -> (sign, logabsdet)."""
    sign, logabsdet = np.linalg.slogdet(A)
    return np.asarray(sign), np.asarray(logabsdet)


def _slogdet_vjp(g, ans, A):
    g_logabsdet = g[1]  # the sign is piecewise constant: its cotangent contributes nothing
    if g_logabsdet is None:
        return np.zeros(A.shape, A.dtype)
    if _is_array(A) and np.any(ans[0] == 0):  # singular: adj(A)^T / 0, torch's inf/NaN
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.expand_dims(g_logabsdet / np.linalg.det(A), (-1, -2)) * _cofactors(A)
    return np.expand_dims(g_logabsdet, (-1, -2)) * _mT(_inverse(A))


slogdet = defop(
    "slogdet",
    method=True,
    family=FAMILY,
    inputs=("A",),
    forward=_slogdet,
    vjps=(_slogdet_vjp,),
    outputs=2,
    check=_check_square("slogdet"),
    samples=_square_samples(
        _well_conditioned,
        [
            lambda rng: Sample((_well_conditioned(rng, (3, 3), negative=True),), {}, "negative det: sign -1"),
            lambda rng: Sample((0.01 * _well_conditioned(rng, (4, 4)),), {}, "small det: logabsdet < 0"),
        ],
    ),
    torch_ref=lambda torch, A: tuple(torch.linalg.slogdet(A)),
    notes=case_law(_CASE_LAW, "slogdet"),
)


# -- cholesky ----------------------------------------------------------------------------------------------------
def _check_cholesky(A, *, upper=False):
    require_bool("cholesky", "upper", upper)
    _check_matrices("cholesky", A)


def _cholesky(A, *, upper=False):
    """``torch.linalg.cholesky(A, *, upper=False)``: L (lower, A = L L^T) or U = L^T, from one triangle of A."""
    try:
        lower = np.linalg.cholesky(_mT(A) if upper else A)  # numpy reads the lower triangle
    except np.linalg.LinAlgError as e:
        raise ValueError(
            f"cholesky: argument 'A' expected symmetric positive-definite matrices (read from the "
            f"{'upper' if upper else 'lower'} triangle), got one that is not positive-definite "
            f"(numpy: {e})"
        ) from None
    return _mT(lower) if upper else lower


def _cholesky_vjp(g, ans, A, *, upper=False):
    L, gL = (_mT(ans), _mT(g)) if upper else (ans, g)
    phi = np.tril(np.matmul(_mT(L), gL))
    phi = 0.5 * (phi + _mT(np.tril(phi, -1)))  # sym(Phi(L^T gL)): halved diagonal, mirrored
    l_inv = _inverse(L)
    grad = _fold(np.matmul(np.matmul(_mT(l_inv), phi), l_inv), lower=not upper)
    return _nan_where(grad, _cholesky_zero_pivots(L))


def _cholesky_zero_pivots(L):
    """(*) bool: a pivot L_ii^2 at rounding level (A semidefinite up to rounding: no derivative)."""
    L = _values(L)
    pivots = np.diagonal(L, axis1=-2, axis2=-1) ** 2
    scale = np.max(np.sum(L * L, axis=-1), axis=-1, initial=0.0)  # max_i A_ii
    return np.any(pivots <= _rounding_level(scale, L.shape[-1], L.dtype)[..., None], axis=-1)


def _cholesky_samples(rng):
    out = _square_samples(_spd)(rng)
    garbage = _spd(rng, (3, 3))
    garbage[np.triu_indices(3, 1)] = uniform(rng, (3,), 5.0, 9.0)  # ignored: only the lower triangle is read
    spd = _spd(rng, (2, 3, 3))
    spd_upper = spd.copy()
    spd_upper[..., 2, 0] = 7.0  # the lower triangle is ignored with upper=True
    out += [
        Sample((garbage,), {}, "upper triangle ignored"),
        Sample((spd,), {"upper": True}, "upper=True"),
        Sample((spd_upper,), {"upper": True}, "upper=True, lower triangle ignored"),
    ]
    return out


cholesky = defop(
    "cholesky",
    family=FAMILY,
    inputs=("A",),
    forward=_cholesky,
    vjps=(_cholesky_vjp,),
    check=_check_cholesky,
    samples=_cholesky_samples,
    torch_ref=lambda torch, A, upper=False: torch.linalg.cholesky(_torch_triangle(torch, A, not upper), upper=upper),
    method=True,
    notes=case_law(_CASE_LAW, "cholesky"),
)


# -- qr ----------------------------------------------------------------------------------------------------------
def _check_qr(A, mode="reduced"):
    _check_matrices("qr", A, square=False)
    require(mode == "reduced", "qr", "mode", "'reduced' (minitape implements only the reduced QR)", repr(mode))


def _qr(A, mode="reduced"):
    """``torch.linalg.qr(A, mode='reduced')`` -> (Q, R)."""
    q, r = np.linalg.qr(A, mode="reduced")
    return q, r


def _copyltu(m):
    return np.tril(m) + _mT(np.tril(m, -1))


def _qr_zero_pivots(r, size: int):
    """(*, k) bool: R's diagonal entries at rounding level (A's column dependent on the ones before it)."""
    r = _values(r)
    scale = np.max(np.abs(r), axis=(-2, -1), initial=0.0)
    return np.abs(np.diagonal(r, axis1=-2, axis2=-1)) <= _rounding_level(scale, size, r.dtype)[..., None]


def _times_upper_inverse_transpose(b, r, unit):
    """b R'^-T for upper-triangular R ``(*, k, k)`` with the diagonal entries where ``unit`` replaced by 1."""
    if np.any(unit):
        ones = _diag_embed(unit.astype(r.dtype))
        r = r * (1 - ones) + ones
    return _mT(_solve_matrices(r, _mT(b)))


def _qr_tall_vjp(gq, gr, q, r, zero):
    """m > n: gA = (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q. A zero pivot: no derivative (NaN)."""
    if gr is None:
        m = -np.matmul(_mT(gq), q)
    elif gq is None:
        m = np.matmul(r, _mT(gr))
    else:
        m = np.matmul(r, _mT(gr)) - np.matmul(_mT(gq), q)
    b = np.matmul(q, _copyltu(m))
    if gq is not None:
        b = b + gq
    return _nan_where(_times_upper_inverse_transpose(b, r, zero), np.any(zero, axis=-1))


def _qr_square_vjp(gq, gu, q, u, zero):
    """Q square (m <= n), X = Q U: gX = Q Z with Z U^T = C = copyltu(U gU^T) + tril(N - N^T), N = Q^T gQ (the
    m > n rule with gQ = Q Q^T gQ). C's last column is u_mm gU[:, -1] exactly, so Z's is gU[:, -1]: no division
    by the last pivot, which may vanish (Q's last column is fixed by the others). Another zero pivot: NaN."""
    parts = []
    if gu is not None:
        parts.append(_copyltu(np.matmul(u, _mT(gu))))
    if gq is not None:
        n_ = np.matmul(_mT(q), gq)
        parts.append(np.tril(n_ - _mT(n_)))
    c = parts[0] if len(parts) == 1 else parts[0] + parts[1]
    last = np.zeros(u.shape[:-1] + (1,), u.dtype) if gu is None else gu[..., -1:]
    c = np.concatenate([c[..., :-1], last], axis=-1)
    unit = zero.copy()
    unit[..., -1] = True
    z = _times_upper_inverse_transpose(c, u, unit)
    return _nan_where(np.matmul(q, z), np.any(zero[..., :-1], axis=-1))


def _qr_vjp(g, ans, A, mode="reduced"):
    gq, gr = g
    q, r = ans
    m, n = A.shape[-2:]
    if (gq is None and gr is None) or min(m, n) == 0:
        return np.zeros(A.shape, A.dtype)
    zero = _qr_zero_pivots(r, max(m, n))
    if m > n:
        return _qr_tall_vjp(gq, gr, q, r, zero)
    # A = [X | Y], R = [U | V], X = Q U (square), Y = Q V: gY = Q gV, gX by the square rule with gQ + Y gV^T
    y = A[..., m:]
    gu = None if gr is None else gr[..., :m]
    gv = None if gr is None or n == m else gr[..., m:]
    gq_x = gq if gv is None else (np.matmul(y, _mT(gv)) if gq is None else gq + np.matmul(y, _mT(gv)))
    gx = _qr_square_vjp(gq_x, gu, q, r[..., :m], zero)
    if n == m:
        return gx
    gy = np.zeros(y.shape, A.dtype) if gv is None else np.matmul(q, gv)
    return np.concatenate([gx, gy], axis=-1)


def _qr_samples(rng):
    def u(*shape):
        return uniform(rng, shape)

    return [
        Sample((u(3, 3),), {}, "3 x 3"),
        Sample((u(4, 2),), {}, "tall"),
        Sample((u(2, 4),), {}, "wide"),
        Sample((u(2, 4, 3),), {}, "batched tall"),
        Sample((u(2, 1, 2, 3),), {}, "batched wide"),
        Sample((u(1, 1),), {}, "1 x 1"),
        Sample((transposed(rng, (2, 3, 3)),), {}, "non-contiguous"),
        Sample((u(0, 3, 2),), {}, "zero-size batch"),
        Sample((u(3, 0),), {}, "no columns"),
        Sample((u(0, 3),), {}, "no rows"),
    ]


qr = defop(
    "qr",
    family=FAMILY,
    inputs=("A",),
    forward=_qr,
    vjps=(_qr_vjp,),
    outputs=2,
    check=_check_qr,
    samples=_qr_samples,
    torch_ref=lambda torch, A, mode="reduced": tuple(torch.linalg.qr(A, mode=mode)),
    notes=case_law(_CASE_LAW, "qr"),
)


# -- eigh --------------------------------------------------------------------------------------------------------
def _check_eigh(A, UPLO="L", op="eigh"):
    _check_matrices(op, A)
    require(UPLO in ("L", "U"), op, "UPLO", "'L' or 'U'", repr(UPLO))


def _eigh(A, UPLO="L"):
    """``torch.linalg.eigh(A, UPLO='L')`` -> (eigenvalues ascending, eigenvectors as columns), signs fixed."""
    w, v = np.linalg.eigh(A, UPLO=UPLO)
    return w, v * _sign_gauge(v)


@_quiet
def _eigh_vjp(g, ans, A, UPLO="L"):
    gw, gv = g
    w, v = ans
    if gw is None and gv is None:
        return np.zeros(A.shape, A.dtype)
    if gv is None:
        inner = _diag_embed(gw)
    else:
        m = np.matmul(_mT(v), gv)
        gaps = (np.expand_dims(w, -2) - np.expand_dims(w, -1)) * _untied(w, w.shape[-1])  # w_j - w_i at (i, j)
        inner = (0.5 * (m - _mT(m))) / (gaps + _eye(w.shape[-1], w.dtype))  # the diagonal is 0 / 1
        if gw is not None:
            inner = inner + _diag_embed(gw)
    return _fold(np.matmul(np.matmul(v, inner), _mT(v)), lower=UPLO == "L")


def _eigh_ref(torch, A, UPLO="L"):
    w, v = torch.linalg.eigh(_torch_triangle(torch, A, UPLO == "L"), UPLO=UPLO)
    return w, v * _torch_sign_gauge(torch, v)


def _eigh_samples(rng):
    out = _square_samples(_symmetric_spread)(rng)
    garbage = _symmetric_spread(rng, (3, 3))
    garbage[np.triu_indices(3, 1)] = uniform(rng, (3,), 5.0, 9.0)
    sym = _symmetric_spread(rng, (2, 3, 3))
    sym_lower_garbage = sym.copy()
    sym_lower_garbage[..., 1, 0] = -4.0
    out += [
        Sample((garbage,), {}, "upper triangle ignored"),
        Sample((sym,), {"UPLO": "U"}, "UPLO='U'"),
        Sample((sym_lower_garbage,), {"UPLO": "U"}, "UPLO='U', lower triangle ignored"),
    ]
    return out


eigh = defop(
    "eigh",
    family=FAMILY,
    inputs=("A",),
    forward=_eigh,
    vjps=(_eigh_vjp,),
    outputs=2,
    check=_check_eigh,
    samples=_eigh_samples,
    torch_ref=_eigh_ref,
    notes=case_law(_CASE_LAW, "eigh"),
)


# -- svd ---------------------------------------------------------------------------------------------------------
def _check_svd(A, full_matrices=True):
    require_bool("svd", "full_matrices", full_matrices)
    _check_matrices("svd", A, square=False)


def _svd(A, full_matrices=True):
    """``torch.linalg.svd(A, full_matrices)`` -> (U, S descending, Vh), signs fixed; with full_matrices U is
    (*, m, m) and Vh (*, n, n), the columns of U (rows of Vh) beyond k = min(m, n) an orthonormal basis of the
    rest, each with its own sign gauge."""
    u, s, vh = np.linalg.svd(A, full_matrices=bool(full_matrices))
    k = s.shape[-1]
    signs = _sign_gauge(u)
    vh_signs = _mT(signs[..., :k])
    if vh.shape[-2] > k:  # the extra rows of Vh: the gauge of the columns of Vh^T
        vh_signs = np.concatenate([vh_signs, _mT(_sign_gauge(_mT(vh[..., k:, :])))], axis=-2)
    return u * signs, s, vh * vh_signs


@_quiet
def _svd_vjp(g, ans, A, full_matrices=True):
    """The reduced SVD's rule on the first k columns of U and rows of Vh. With full_matrices on a non-square A
    the extra ones are not functions of A (any orthonormal basis of the rest will do): a cotangent on them has
    no derivative to meet, so the gradient is NaN there (torch drops that cotangent silently)."""
    gu, gs, gvh = g
    u, s, vh = ans
    k = s.shape[-1]
    extra = np.zeros(A.shape[:-2], bool)
    if gu is not None and u.shape[-1] > k:
        extra = extra | np.any(_values(gu)[..., k:] != 0, axis=(-2, -1))
        gu, u = gu[..., :k], u[..., :k]
    if gvh is not None and vh.shape[-2] > k:
        extra = extra | np.any(_values(gvh)[..., k:, :] != 0, axis=(-2, -1))
        gvh = gvh[..., :k, :]
    if vh.shape[-2] > k:
        vh = vh[..., :k, :]
    if u.shape[-1] > k:
        u = u[..., :k]
    return _nan_where(_svd_reduced_vjp(gu, gs, gvh, u, s, vh, A), extra)


def _svd_reduced_vjp(gu, gs, gvh, u, s, vh, A):
    if gu is None and gvh is None:
        if gs is None:
            return np.zeros(A.shape, A.dtype)
        return np.matmul(u * np.expand_dims(gs, -2), vh)
    m, n = A.shape[-2:]
    k = s.shape[-1]
    s_row, s_col = np.expand_dims(s, -2), np.expand_dims(s, -1)
    s2 = s * s
    gaps = (np.expand_dims(s2, -2) - np.expand_dims(s2, -1)) * _untied(s, max(m, n)) + _eye(k, s.dtype)
    inner = None
    if gu is not None:
        x = np.matmul(_mT(u), gu)
        inner = (x - _mT(x)) * s_row
    if gvh is not None:
        x = np.matmul(vh, _mT(gvh))
        term = s_col * (x - _mT(x))
        inner = term if inner is None else inner + term
    inner = inner / gaps
    if gs is not None:
        inner = inner + _diag_embed(gs)
    if m != n:  # S^-1 below: a rounding-level singular value is 0 (inf/NaN, as torch's at an exact 0)
        s_values = _values(s)
        nonzero = s_values > _rounding_level(np.max(s_values, axis=-1, initial=0.0), max(m, n), s.dtype)[..., None]
        s_row, s_col = np.expand_dims(s * nonzero, -2), np.expand_dims(s * nonzero, -1)
    if m > n and gu is not None:
        gu_sinv = gu / s_row
        ga = np.matmul(u, inner) + gu_sinv - np.matmul(u, np.matmul(_mT(u), gu_sinv))
        return np.matmul(ga, vh)
    if m < n and gvh is not None:
        sinv_gvh = gvh / s_col
        ga = np.matmul(inner, vh) + sinv_gvh - np.matmul(np.matmul(sinv_gvh, _mT(vh)), vh)
        return np.matmul(u, ga)
    return np.matmul(np.matmul(u, inner), vh)


def _svd_ref(torch, A, full_matrices=True):
    u, s, vh = torch.linalg.svd(A, full_matrices=full_matrices)
    k = s.shape[-1]
    signs = _torch_sign_gauge(torch, u)
    vh_signs = signs[..., :k].mT
    if vh.shape[-2] > k:
        vh_signs = torch.cat([vh_signs, _torch_sign_gauge(torch, vh[..., k:, :].mT).mT], dim=-2)
    return u * signs, s, vh * vh_signs


def _svd_samples(rng):
    def a(*shape):
        return _spread_singular_values(rng, shape)

    f = {"full_matrices": False}
    return [
        Sample((a(3, 3),), f, "3 x 3"),
        Sample((a(4, 2),), f, "tall"),
        Sample((a(2, 4),), f, "wide"),
        Sample((a(2, 3, 2),), f, "batched tall"),
        Sample((a(2, 1, 2, 3),), f, "batched wide"),
        Sample((a(3, 3),), {"full_matrices": True}, "full_matrices=True, square"),
        Sample((a(1, 1),), f, "1 x 1"),
        Sample((_non_contiguous(a(2, 4, 3)),), f, "non-contiguous"),
        Sample((a(0, 3, 2),), f, "zero-size batch"),
        Sample((uniform(rng, (3, 0)),), f, "no columns"),
        Sample((uniform(rng, (0, 3)),), f, "no rows"),
    ]


svd = defop(
    "svd",
    family=FAMILY,
    inputs=("A",),
    forward=_svd,
    vjps=(_svd_vjp,),
    outputs=3,
    check=_check_svd,
    samples=_svd_samples,
    torch_ref=_svd_ref,
    notes=case_law(_CASE_LAW, "svd"),
)


# == more of torch.linalg (and torch.logdet, torch.cholesky_solve, torch.cholesky_inverse): appended =================
def _svd_of(A):
    """(U, S, Vh), reduced: numpy's on arrays, the svd op on Tensors (recorded). Signs are irrelevant to the
    products U f(S) Vh the rules below form."""
    if _is_array(A):
        return np.linalg.svd(A, full_matrices=False)
    return svd(A, full_matrices=False)


def _eigh_of(A, UPLO="L"):
    return np.linalg.eigh(A, UPLO=UPLO) if _is_array(A) else eigh(A, UPLO=UPLO)


# -- matrix_power ------------------------------------------------------------------------------------------------
def _check_matrix_power(A, n):
    integer("matrix_power", "n", n)
    _check_matrices("matrix_power", A)


def _matrix_power(A, n):
    """``torch.linalg.matrix_power(A, n)``: A^n for an int n; n = 0 the identity, n < 0 powers of A^-1."""
    try:
        return np.linalg.matrix_power(A, int(n))
    except np.linalg.LinAlgError as e:
        raise ValueError(
            f"matrix_power: argument 'A' expected invertible matrices for n = {n} < 0, got a singular one ({e})"
        ) from None


def _matrix_power_vjp(g, ans, A, n):
    """A^m with m > 0: gA = sum_k (A^T)^k g (A^T)^(m-1-k). n < 0: that with B = A^-1, then gA = -B^T gB B^T."""
    if n == 0:
        return np.zeros(A.shape, A.dtype)
    base = A if n > 0 else _inverse(A)
    m = abs(int(n))
    powers = [None, _mT(base)]  # powers[k] = (B^T)^k, k >= 1
    for _ in range(2, m):
        powers.append(np.matmul(powers[-1], powers[1]))
    grad = g if m == 1 else np.matmul(g, powers[m - 1])
    for k in range(1, m):
        term = np.matmul(powers[k], g)
        grad = grad + (term if k == m - 1 else np.matmul(term, powers[m - 1 - k]))
    if n > 0:
        return grad
    return -np.matmul(np.matmul(powers[1], grad), powers[1])


matrix_power = defop(
    "matrix_power",
    family=FAMILY,
    inputs=("A",),
    forward=_matrix_power,
    vjps=(_matrix_power_vjp,),
    check=_check_matrix_power,
    samples=lambda rng: [
        Sample((uniform(rng, (3, 3), -1, 1),), {"n": 3}, "n=3"),
        Sample((uniform(rng, (2, 2, 2), -1, 1),), {"n": 2}, "batched n=2"),
        Sample((uniform(rng, (3, 3)),), {"n": 1}, "n=1"),
        Sample((uniform(rng, (3, 3)),), {"n": 0}, "n=0: identity"),
        Sample((_well_conditioned(rng, (3, 3)),), {"n": -1}, "n=-1: the inverse"),
        Sample((_well_conditioned(rng, (2, 3, 3)),), {"n": -3}, "n=-3"),
        Sample((_non_contiguous(uniform(rng, (2, 3, 3), -1, 1)),), {"n": 4}, "non-contiguous n=4"),
        Sample((uniform(rng, (0, 2, 2)),), {"n": 2}, "zero-size batch"),
        Sample((uniform(rng, (0, 0)),), {"n": 3}, "0 x 0"),
    ],
    torch_ref=lambda torch, A, n: torch.linalg.matrix_power(A, n),
    method=True,
)


# -- matrix_exp --------------------------------------------------------------------------------------------------
_PADE13 = (
    64764752532480000.0,
    32382376266240000.0,
    7771770303897600.0,
    1187353796428800.0,
    129060195264000.0,
    10559470521600.0,
    670442572800.0,
    33522128640.0,
    1323241920.0,
    40840800.0,
    960960.0,
    16380.0,
    182.0,
    1.0,
)
_PADE13_THETA = 5.371920351148152  # Higham 2005: the [13/13] Pade approximant is accurate to eps for ||A||_1 <= it


def _expm(A):
    """exp(A) by scaling and squaring with the [13/13] Pade approximant (Higham 2005), one scaling per batch."""
    if A.size == 0:
        return np.array(A)
    norm = float(np.max(np.sum(np.abs(A), axis=-2)))
    s = max(0, int(np.ceil(np.log2(norm / _PADE13_THETA)))) if norm > 0 else 0
    a = A / 2.0**s
    b = [np.asarray(c, A.dtype) for c in _PADE13]
    eye = np.broadcast_to(np.eye(A.shape[-1], dtype=A.dtype), A.shape)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    r = np.linalg.solve(v - u, v + u)
    for _ in range(s):
        r = r @ r
    return r


def _matrix_exp_vjp(g, ans, A):
    """The adjoint of the Frechet derivative: gA = L(A^T, g), the top-right block of exp([[A^T, g], [0, A^T]])."""
    n = A.shape[-1]
    at = _mT(A)
    zeros = np.zeros(A.shape, A.dtype)
    block = np.concatenate([np.concatenate([at, g], axis=-1), np.concatenate([zeros, at], axis=-1)], axis=-2)
    big = _expm(block) if _is_array(block) else matrix_exp(block)
    return big[..., :n, n:]


matrix_exp = defop(
    "matrix_exp",
    family=FAMILY,
    inputs=("A",),
    forward=_expm,
    vjps=(_matrix_exp_vjp,),
    check=_check_square("matrix_exp"),
    samples=_square_samples(
        lambda rng, shape: uniform(rng, shape, -1.0, 1.0),
        [
            lambda rng: Sample((uniform(rng, (3, 3), -4.0, 4.0),), {}, "norm > theta: squared"),
            lambda rng: Sample((np.zeros((2, 2)),), {}, "zero: identity"),
        ],
    ),
    torch_ref=lambda torch, A: torch.linalg.matrix_exp(A),
    method=True,
)


# -- eigvalsh, svdvals -------------------------------------------------------------------------------------------
def _eigvalsh(A, UPLO="L"):
    """``torch.linalg.eigvalsh(A, UPLO='L')``: eigenvalues ascending, from one triangle."""
    return np.linalg.eigvalsh(A, UPLO=UPLO)


def _eigvalsh_vjp(g, ans, A, UPLO="L"):
    """dw_i = v_i^T dA v_i: gA_sym = V diag(g) V^T (no gaps: repeated eigenvalues are fine), folded on the triangle."""
    _, v = _eigh_of(A, UPLO)
    return _fold(np.matmul(v * np.expand_dims(g, -2), _mT(v)), lower=UPLO == "L")


def _eigvalsh_samples(rng):
    out = _square_samples(_symmetric_spread)(rng)
    sym = _symmetric_spread(rng, (2, 3, 3))
    sym[..., 1, 0] = -4.0
    out.append(Sample((sym,), {"UPLO": "U"}, "UPLO='U', lower triangle ignored"))
    return out


eigvalsh = defop(
    "eigvalsh",
    family=FAMILY,
    inputs=("A",),
    forward=_eigvalsh,
    vjps=(_eigvalsh_vjp,),
    check=lambda A, UPLO="L": _check_eigh(A, UPLO, "eigvalsh"),
    samples=_eigvalsh_samples,
    torch_ref=lambda torch, A, UPLO="L": torch.linalg.eigvalsh(_torch_triangle(torch, A, UPLO == "L"), UPLO=UPLO),
)


def _svdvals_vjp(g, ans, A):
    """ds_i = u_i^T dA v_i: gA = U diag(g) Vh (no gaps needed)."""
    u, _, vh = _svd_of(A)
    return np.matmul(u * np.expand_dims(g, -2), vh)


def _svdvals_samples(rng):
    def a(*shape):
        return _spread_singular_values(rng, shape)

    return [
        Sample((a(3, 3),), {}, "3 x 3"),
        Sample((a(4, 2),), {}, "tall"),
        Sample((a(2, 1, 2, 3),), {}, "batched wide"),
        Sample((_non_contiguous(a(2, 4, 3)),), {}, "non-contiguous"),
        Sample((a(0, 3, 2),), {}, "zero-size batch"),
        Sample((uniform(rng, (3, 0)),), {}, "no columns"),
    ]


svdvals = defop(
    "svdvals",
    family=FAMILY,
    inputs=("A",),
    forward=lambda A: np.linalg.svd(A, compute_uv=False),
    vjps=(_svdvals_vjp,),
    check=lambda A: _check_matrices("svdvals", A, square=False),
    samples=_svdvals_samples,
    torch_ref=lambda torch, A: torch.linalg.svdvals(A),
    doc="The singular values of each matrix in A (..., m, n), in descending order.",
)


# -- logdet ------------------------------------------------------------------------------------------------------
@quiet
def _logdet(input):
    """``torch.logdet(input)``: log det; NaN where det < 0, -inf where det = 0 (torch's)."""
    sign, logabsdet = np.linalg.slogdet(input)
    return np.asarray(np.where(sign < 0, np.nan, logabsdet))


@_quiet
def _logdet_vjp(g, ans, input):
    """slogdet's gradient; 0 where det < 0 (torch's: log det is NaN there, constant in A)."""
    sign = np.linalg.slogdet(_values(input))[0]
    if np.any(sign < 0):
        g = g * (sign >= 0).astype(input.dtype)
    return _slogdet_vjp((None, g), (sign, None), input)


logdet = defop(
    "logdet",
    family=FAMILY,
    inputs=("input",),
    forward=_logdet,
    vjps=(_logdet_vjp,),
    check=lambda input: _check_matrices("logdet", input, "input"),
    samples=_square_samples(_well_conditioned),  # det <= 0 (NaN, -inf): tests/ops/test_linalg_products.py
    torch_ref=lambda torch, input: torch.logdet(input),
    method=True,
)


# -- cholesky_solve, cholesky_inverse, solve_triangular: one triangle read ----------------------------------------
def _triangle(A, upper: bool, unit: bool = False):
    """The triangle of A an op reads (the strict one plus a unit diagonal with ``unit``), recorded on Tensors."""
    t = np.triu(A, 1 if unit else 0) if upper else np.tril(A, -1 if unit else 0)
    return t + _eye(A.shape[-1], A.dtype) if unit else t


def _check_triangular_rhs(op, A, B, names=("A", "B"), left=True):
    _check_matrices(op, A, names[0])
    _check_matrices(op, B, names[1], square=False)
    _same_dtype(op, names, (A, B))
    n = A.shape[-1]
    rows = B.shape[-2] if left else B.shape[-1]
    require(rows == n, op, names[1], f"{n} {'rows' if left else 'columns'} to match {names[0]} {A.shape}", B.shape)
    batch_dims_or_fail(op, names[1], B.shape, B.shape[:-2], names[0], A.shape[:-2])


def _check_cholesky_solve(B, L, upper=False):
    require_bool("cholesky_solve", "upper", upper)
    _check_triangular_rhs("cholesky_solve", L, B, ("L", "B"))


def _cholesky_solve(B, L, upper=False):
    """``torch.cholesky_solve(B, L, upper=False)``: X with L L^T X = B (U^T U X = B with upper), L's triangle."""
    t = _triangle(L, upper)
    lower = _mT(t) if upper else t
    return np.linalg.solve(_mT(lower), np.linalg.solve(lower, B))


def _cholesky_solve_vjp(g, ans, B, L, *, needs, upper=False):
    """X = A^-1 B, A = L L^T: gB = A^-1 g (a cholesky_solve); gA = -gB X^T, so gL = tril(-(gB X^T + X gB^T) L)
    (U: triu(-U (gB X^T + X gB^T))), summed over broadcast batch dims."""
    gb = _cholesky_solve(g, L, upper) if _is_array(g, L) else cholesky_solve(g, L, upper)
    gl = None
    if needs[1]:
        common = np.matmul(gb, _mT(ans))
        common = common + _mT(common)
        t = _triangle(L, upper)
        gl = unbroadcast(-np.matmul(t, common) if upper else -np.matmul(common, t), L.shape)
        gl = np.triu(gl) if upper else np.tril(gl)
    return (unbroadcast(gb, B.shape) if needs[0] else None), gl


def _cholesky_factor(rng, shape, upper=False):
    lower = np.linalg.cholesky(_spd(rng, shape))
    return _mT(lower) if upper else lower


def _cholesky_solve_samples(rng):
    def u(*shape):
        return uniform(rng, shape)

    garbage = _cholesky_factor(rng, (3, 3))
    garbage[0, 2] = 7.0  # ignored: only the lower triangle is read
    return [
        Sample((u(3, 2), _cholesky_factor(rng, (3, 3))), {}, "3 x 3"),
        Sample((u(2, 3, 2), _cholesky_factor(rng, (2, 3, 3))), {}, "batched"),
        Sample((u(3, 2), _cholesky_factor(rng, (3, 3), True)), {"upper": True}, "upper=True"),
        Sample((u(2, 1, 3, 1), _cholesky_factor(rng, (4, 3, 3))), {}, "batch broadcast"),
        Sample((u(3, 2), garbage), {}, "upper triangle ignored"),
        Sample((transposed(rng, (3, 2)), _non_contiguous(_cholesky_factor(rng, (3, 3)))), {}, "non-contiguous"),
        Sample((u(3, 0), _cholesky_factor(rng, (3, 3))), {}, "no right-hand sides"),
        Sample((u(0, 2, 2), _cholesky_factor(rng, (2, 2))), {}, "zero-size batch"),
    ]


cholesky_solve = defop(
    "cholesky_solve",
    family=FAMILY,
    inputs=("B", "L"),
    forward=_cholesky_solve,
    joint_vjp=_cholesky_solve_vjp,
    check=_check_cholesky_solve,
    samples=_cholesky_solve_samples,
    torch_ref=lambda torch, B, L, upper=False: torch.cholesky_solve(B, L.triu() if upper else L.tril(), upper),
    method=True,
)


def _cholesky_inverse(L, upper=False):
    """``torch.cholesky_inverse(L, upper=False)``: (L L^T)^-1 (or (U^T U)^-1), from L's triangle."""
    t = _triangle(L, upper)
    lower = _mT(t) if upper else t
    inverse = np.linalg.inv(lower)
    return np.matmul(_mT(inverse), inverse)


def _cholesky_inverse_vjp(g, ans, L, upper=False):
    """X = (L L^T)^-1: gA = -X g X, so gL = tril(-X (g + g^T) X L) (U: triu(-U X (g + g^T) X))."""
    common = np.matmul(ans, np.matmul(g + _mT(g), ans))
    t = _triangle(L, upper)
    return np.triu(-np.matmul(t, common)) if upper else np.tril(-np.matmul(common, t))


def _check_cholesky_inverse(L, upper=False):
    require_bool("cholesky_inverse", "upper", upper)
    _check_matrices("cholesky_inverse", L, "L")


cholesky_inverse = defop(
    "cholesky_inverse",
    family=FAMILY,
    inputs=("L",),
    forward=_cholesky_inverse,
    vjps=(_cholesky_inverse_vjp,),
    check=_check_cholesky_inverse,
    samples=lambda rng: [
        Sample((_cholesky_factor(rng, (3, 3)),), {}, "3 x 3"),
        Sample((_cholesky_factor(rng, (2, 3, 3)),), {}, "batched"),
        Sample((_cholesky_factor(rng, (3, 3), True),), {"upper": True}, "upper=True"),
        Sample((_cholesky_factor(rng, (3, 3)) + np.triu(np.ones((3, 3)), 1),), {}, "upper triangle ignored"),
        Sample((_non_contiguous(_cholesky_factor(rng, (2, 2, 2))),), {}, "non-contiguous"),
        Sample((uniform(rng, (0, 2, 2)),), {}, "zero-size batch"),
    ],
    torch_ref=lambda torch, L, upper=False: torch.cholesky_inverse(L.triu() if upper else L.tril(), upper),
    method=True,
)


def _check_solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    for name, value in (("upper", upper), ("left", left), ("unitriangular", unitriangular)):
        require_bool("solve_triangular", name, value)
    _check_triangular_rhs("solve_triangular", A, B, left=left)


def _solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """``torch.linalg.solve_triangular(A, B, *, upper, left=True, unitriangular=False)``: X with T X = B (or
    X T = B), T the triangle of A (its diagonal taken as ones with unitriangular). A singular T gives inf/NaN."""
    t = _triangle(A, upper, unitriangular)
    try:
        return _mT(np.linalg.solve(_mT(t), _mT(B))) if not left else np.linalg.solve(t, B)
    except np.linalg.LinAlgError as e:
        raise _singular("solve_triangular", e) from None


def _solve_triangular_vjp(g, ans, A, B, *, needs, upper, left=True, unitriangular=False):
    """left: X = T^-1 B, gB = T^-T g, gT = -gB X^T; right: X = B T^-1, gB = g T^-T, gT = -X^T gB; gA is gT on
    the triangle read (the strict one with unitriangular), summed over broadcast batch dims."""
    t = _triangle(A, upper, unitriangular)
    gb = _solve_matrices(_mT(t), g) if left else _mT(_solve_matrices(t, _mT(g)))
    ga = None
    if needs[0]:
        gt = unbroadcast(-np.matmul(gb, _mT(ans)) if left else -np.matmul(_mT(ans), gb), A.shape)
        k = 1 if unitriangular else 0
        ga = np.triu(gt, k) if upper else np.tril(gt, -k)
    return ga, (unbroadcast(gb, B.shape) if needs[1] else None)


def _solve_triangular_samples(rng):
    def t(*shape, upper=False):
        a = _well_conditioned(rng, shape)
        return a + 5 * (np.tril(np.ones(shape[-2:]), -1) if upper else np.triu(np.ones(shape[-2:]), 1))  # ignored

    def u(*shape):
        return uniform(rng, shape)

    cases = [
        ((t(3, 3), u(3, 2)), {"upper": False}, "lower"),
        ((t(3, 3, upper=True), u(3, 2)), {"upper": True}, "upper"),
        ((t(3, 3), u(2, 3)), {"upper": False, "left": False}, "left=False"),
        ((t(3, 3, upper=True), u(3, 2)), {"upper": True, "unitriangular": True}, "unitriangular"),
        ((t(2, 1, 3, 3), u(4, 3, 2)), {"upper": False}, "batch broadcast"),
        ((_non_contiguous(t(2, 3, 3)), transposed(rng, (2, 3, 2))), {"upper": False}, "non-contiguous"),
        ((t(3, 3), u(3, 0)), {"upper": True}, "no right-hand sides"),
        ((t(0, 2, 2), u(2, 1)), {"upper": False}, "zero-size batch"),
    ]
    return [Sample(inputs, attrs, label) for inputs, attrs, label in cases]


solve_triangular = defop(
    "solve_triangular",
    family=FAMILY,
    inputs=("A", "B"),
    forward=_solve_triangular,
    joint_vjp=_solve_triangular_vjp,
    check=_check_solve_triangular,
    samples=_solve_triangular_samples,
    torch_ref=lambda torch, A, B, upper, left=True, unitriangular=False: torch.linalg.solve_triangular(
        A, B, upper=upper, left=left, unitriangular=unitriangular
    ),
)


# -- matrix_norm, linalg_norm (torch.linalg.matrix_norm / torch.linalg.norm) ---------------------------------------
_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf)


def _matrix_dims(op, A, ord, dim):
    number = isinstance(ord, int | float | np.integer | np.floating) and not isinstance(ord, bool)
    if not ((isinstance(ord, str) or number) and ord in _MATRIX_ORDS):
        raise ValueError(f"{op}: argument 'ord' expected one of 'fro', 'nuc', 1, -1, 2, -2, inf, -inf, got {ord!r}")
    require_float(op, "A", A)
    if not isinstance(dim, tuple | list) or len(dim) != 2:
        raise TypeError(f"{op}: argument 'dim' expected a pair of dims, got {dim!r}")
    axes = tuple(normalize_dim(op, d, A.ndim) for d in dim) if A.ndim >= 2 else ()
    require(A.ndim >= 2 and axes[0] != axes[1], op, "dim", f"two distinct dims of a matrix (A {A.shape})", dim)
    return axes


def _reinsert(x, axes, keepdim):
    """The result with the two reduced dims back as size 1 at ``axes`` (keepdim)."""
    return np.expand_dims(x, tuple(sorted(axes))) if keepdim else x


def _matrix_norm_last(op, A, ord):
    """The norm over the last two dims of A (rows -2, columns -1)."""
    if ord == "fro":
        return np.sqrt(np.sum(A * A, axis=(-2, -1)))
    if ord in ("nuc", 2, -2):
        if A.shape[-1] * A.shape[-2] == 0 and ord != "nuc":
            raise ValueError(f"{op}: the {ord} norm of an empty matrix has no value (as torch), got shape {A.shape}")
        s = np.linalg.svd(A, compute_uv=False)
        return np.sum(s, axis=-1) if ord == "nuc" else (np.max if ord == 2 else np.min)(s, axis=-1)
    summed = np.sum(np.abs(A), axis=-2 if abs(ord) == 1 else -1)  # column sums (1) or row sums (inf)
    if summed.shape[-1] == 0:
        raise ValueError(f"{op}: the {ord} norm of an empty matrix has no value (as torch), got shape {A.shape}")
    return (np.max if ord > 0 else np.min)(summed, axis=-1)


def _shared(values, largest: bool):
    """(*, k) weights: 1 / (number of ties) at the largest (smallest) of ``values`` (*, k), 0 elsewhere (amax's
    rule). The extremum is taken from ``values`` themselves: LAPACK's singular values computed with vectors may
    differ from the forward's (computed without) in the last bit."""
    v = _values(values)
    hits = v == (np.max if largest else np.min)(v, axis=-1, keepdims=True)
    return hits / np.sum(hits, axis=-1, keepdims=True)


def _matrix_norm_last_vjp(g, ans, A, ord):
    if ord == "fro":
        nonzero = _values(ans) != 0  # torch: gradient 0 at the zero matrix
        return A * np.expand_dims(np.where(nonzero, g / np.where(nonzero, ans, 1), 0), (-1, -2))
    if ord in ("nuc", 2, -2):
        u, s, vh = _svd_of(A)
        weights = np.expand_dims(g, -1) * (1 if ord == "nuc" else _shared(s, ord == 2).astype(A.dtype))
        return np.matmul(u * np.expand_dims(weights, -2), vh)
    axis = -2 if abs(ord) == 1 else -1
    summed = np.sum(np.abs(A), axis=axis)
    weights = np.expand_dims(g, -1) * _shared(summed, ord > 0).astype(A.dtype)
    return np.sign(A) * np.expand_dims(weights, axis)


def _matrix_norm_as(op, A, ord, dim, keepdim):
    axes = _matrix_dims(op, A, ord, dim)
    require_bool(op, "keepdim", keepdim)
    return _reinsert(_matrix_norm_last(op, np.moveaxis(A, axes, (-2, -1)), ord), axes, keepdim)


def _matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False):
    """``torch.linalg.matrix_norm(A, ord='fro', dim=(-2, -1), keepdim=False)``."""
    return _matrix_norm_as("matrix_norm", A, ord, dim, keepdim)


@_quiet
def _matrix_norm_vjp(g, ans, A, ord="fro", dim=(-2, -1), keepdim=False):
    axes = _matrix_dims("matrix_norm", A, ord, dim)
    if keepdim:
        g, ans = np.squeeze(g, tuple(sorted(axes))), np.squeeze(ans, tuple(sorted(axes)))
    return np.moveaxis(_matrix_norm_last_vjp(g, ans, np.moveaxis(A, axes, (-2, -1)), ord), (-2, -1), axes)


def _matrix_norm_samples(rng):
    out = []
    for ord in _MATRIX_ORDS:
        make = _spread_singular_values if ord in ("nuc", 2, -2) else uniform
        out += [
            Sample((make(rng, (3, 4)),), {"ord": ord}, f"ord={ord}"),
            Sample((make(rng, (2, 4, 3)),), {"ord": ord, "keepdim": True}, f"ord={ord} batched keepdim"),
        ]
    out += [
        Sample((uniform(rng, (3, 2, 4)),), {"ord": 1, "dim": (0, 2)}, "dim=(0, 2)"),
        Sample((uniform(rng, (3, 2, 4)),), {"ord": np.inf, "dim": (2, 0), "keepdim": True}, "dim=(2, 0) keepdim"),
        Sample((_spread_singular_values(rng, (4, 3)).T.copy()[None],), {"ord": "nuc", "dim": (-1, -2)}, "dims swapped"),
        Sample((transposed(rng, (3, 4)),), {}, "non-contiguous"),
        Sample((uniform(rng, (0, 3, 3)),), {"ord": 2}, "zero-size batch"),
        Sample((uniform(rng, (3, 0)),), {}, "fro of an empty matrix: 0"),
        Sample((uniform(rng, (0, 3)),), {"ord": "nuc"}, "nuc of an empty matrix: 0"),
    ]
    return out


matrix_norm = defop(
    "matrix_norm",
    family=FAMILY,
    inputs=("A",),
    forward=_matrix_norm,
    vjps=(_matrix_norm_vjp,),
    samples=_matrix_norm_samples,
    torch_ref=lambda torch, A, ord="fro", dim=(-2, -1), keepdim=False: torch.linalg.matrix_norm(
        A, ord=ord, dim=dim, keepdim=keepdim
    ),
)


def _norm_kind(A, ord, dim):
    """torch.linalg.norm's dispatch: ('matrix', ord, dim) or ('vector', ord, dim)."""
    if isinstance(dim, int | np.integer) and not isinstance(dim, bool):
        dim = (dim,)
    if dim is None:
        if ord is None:
            return "vector", 2, None
        require(A.ndim in (1, 2), "linalg_norm", "A", "a 1-D or 2-D tensor when ord is given without dim", A.shape)
        dim = tuple(range(A.ndim))
    if not isinstance(dim, tuple | list) or len(dim) not in (1, 2):
        raise TypeError(f"linalg_norm: argument 'dim' expected None, an int or a pair of ints, got {dim!r}")
    if len(dim) == 2:
        return "matrix", "fro" if ord is None else ord, tuple(dim)
    if isinstance(ord, str):
        raise ValueError(f"linalg_norm: argument 'ord' {ord!r} needs a matrix (two dims), got dim={dim!r}")
    return "vector", 2 if ord is None else ord, tuple(dim)


def _linalg_norm(A, ord=None, dim=None, keepdim=False):
    """``torch.linalg.norm(A, ord=None, dim=None, keepdim=False)``: a vector norm over one dim (or every entry
    with ord and dim None), a matrix norm over two dims (or a 2-D A with ord given and dim None)."""
    kind, ord, dim = _norm_kind(A, ord, dim)
    if kind == "matrix":
        return _matrix_norm_as("linalg_norm", A, ord, dim, keepdim)
    return _norm_of("linalg_norm", A, ord, dim, keepdim)


def _linalg_norm_vjp(g, ans, A, ord=None, dim=None, keepdim=False):
    kind, ord, dim = _norm_kind(A, ord, dim)
    if kind == "matrix":
        return _matrix_norm_vjp(g, ans, A, ord, dim, keepdim)
    return _norm_vjp_of("linalg_norm", g, ans, A, ord, dim, keepdim)


def _linalg_norm_samples(rng):
    def u(*shape):
        return uniform(rng, shape, 0.2, 2.0) * rng.choice([-1.0, 1.0], size=shape)

    return [
        Sample((u(2, 3, 4),), {}, "defaults: 2-norm of every entry"),
        Sample((u(3, 4),), {"ord": "fro"}, "2-D, ord='fro'"),
        Sample((u(3, 4),), {"ord": np.inf}, "2-D, ord=inf: matrix norm"),
        Sample((_spread_singular_values(rng, (3, 4)),), {"ord": "nuc"}, "2-D, ord='nuc'"),
        Sample((u(5),), {"ord": 3}, "1-D, ord=3"),
        Sample((u(2, 3, 4),), {"dim": 1, "ord": 1}, "dim=1, ord=1"),
        Sample((u(2, 3, 4),), {"dim": (0, 2), "ord": -1, "keepdim": True}, "dim=(0, 2), ord=-1, keepdim"),
        Sample((u(2, 3, 4),), {"dim": (-1,), "keepdim": True}, "dim=(-1,) keepdim"),
        Sample((transposed(rng, (3, 4)),), {"dim": 0}, "non-contiguous"),
        Sample((uniform(rng, (0, 3)),), {}, "zero-size"),
    ]


linalg_norm = defop(
    "linalg_norm",
    family=FAMILY,
    inputs=("A",),
    forward=_linalg_norm,
    vjps=(_linalg_norm_vjp,),
    samples=_linalg_norm_samples,
    torch_ref=lambda torch, A, ord=None, dim=None, keepdim=False: torch.linalg.norm(A, ord, dim, keepdim),
)


# -- pinv, matrix_rank, cond, lstsq ------------------------------------------------------------------------------
def _check_tolerances(op, A, atol, rtol, hermitian):
    _check_matrices(op, A, square=hermitian)
    require_bool(op, "hermitian", hermitian)
    for name, value in (("atol", atol), ("rtol", rtol)):
        if value is not None:
            real(op, name, value, "None or a number")
            require(bool(value >= 0), op, name, "a number >= 0", value)


def _kept_values(values, shape, dtype, atol, rtol):
    """(*, k) bool: the singular values (or |eigenvalues|) above torch's cutoff max(atol, rtol * largest); rtol
    defaults to eps * max(m, n) when atol is None or 0, else to 0."""
    if rtol is None:
        rtol = np.finfo(dtype).eps * max(shape[-2:]) if not atol else 0.0
    largest = np.max(values, axis=-1, keepdims=True, initial=0.0)
    return values > np.maximum(0.0 if atol is None else atol, rtol * largest)


def _pinv(A, *, atol=None, rtol=None, hermitian=False):
    """``torch.linalg.pinv(A, *, atol=None, rtol=None, hermitian=False)``: V diag(1 / s) U^T over the singular
    values above the cutoff; with hermitian, from eigh of A's lower triangle (the upper one is ignored)."""
    _check_tolerances("pinv", A, atol, rtol, hermitian)
    if hermitian:
        w, v = np.linalg.eigh(A)
        keep = _kept_values(np.abs(w), A.shape, A.dtype, atol, rtol)
        inverse = np.where(keep, 1 / np.where(keep, w, 1), 0)
        return np.matmul(v * np.expand_dims(inverse, -2), _mT(v))
    u, s, vh = np.linalg.svd(A, full_matrices=False)
    keep = _kept_values(s, A.shape, A.dtype, atol, rtol)
    inverse = np.where(keep, 1 / np.where(keep, s, 1), 0)
    return np.matmul(_mT(vh) * np.expand_dims(inverse, -2), _mT(u))


def _pinv_grad(g, p, A):
    """Golub & Pereyra 1973 (torch's pinv_backward), valid where the rank is locally constant:
    gA = -P^T g P^T + (I - A P) g^T P P^T + P^T P g^T (I - P A)."""
    pt, gt = _mT(p), _mT(g)
    gtp = np.matmul(gt, p)  # g^T P (n x n... m x m)
    first = -np.matmul(np.matmul(pt, g), pt)
    second = np.matmul(gtp - np.matmul(A, np.matmul(p, gtp)), pt)  # (I - A P) g^T P P^T
    third = np.matmul(np.matmul(pt, p), gt - np.matmul(gtp, A))  # P^T P g^T (I - P A)
    return first + second + third


def _pinv_vjp(g, ans, A, *, atol=None, rtol=None, hermitian=False):
    if not hermitian:
        return _pinv_grad(g, ans, A)
    sym = np.tril(A) + _mT(np.tril(A, -1))  # what eigh reads
    return _fold(_pinv_grad(g, ans, sym), lower=True)


def _rank_deficient(rng, shape, rank):
    m, n = shape[-2:]
    return _stacked(shape[:-2], lambda: uniform(rng, (m, rank)) @ uniform(rng, (rank, n)))


def _pinv_samples(rng):
    def a(*shape):
        return _spread_singular_values(rng, shape)

    return [
        Sample((a(3, 3),), {}, "3 x 3"),
        Sample((a(4, 2),), {}, "tall"),
        Sample((a(2, 2, 4),), {}, "batched wide"),
        Sample((_rank_deficient(rng, (4, 3), 2),), {"atol": 1e-3}, "rank 2 of 3, atol=1e-3"),
        Sample((_rank_deficient(rng, (3, 4), 1),), {"rtol": 1e-4}, "rank 1, rtol=1e-4"),
        Sample((_symmetric_spread(rng, (3, 3)),), {"hermitian": True}, "hermitian"),
        Sample((_non_contiguous(a(2, 3, 3)),), {}, "non-contiguous"),
        Sample((a(0, 3, 2),), {}, "zero-size batch"),
        Sample((uniform(rng, (3, 0)),), {}, "no columns"),
    ]


def _torch_pinv(torch, A, atol=None, rtol=None, hermitian=False):
    if hermitian:
        A = _torch_triangle(torch, A, True)
    return torch.linalg.pinv(A, atol=atol, rtol=rtol, hermitian=hermitian)


pinv = defop(
    "pinv",
    family=FAMILY,
    inputs=("A",),
    forward=_pinv,
    vjps=(_pinv_vjp,),
    samples=_pinv_samples,
    torch_ref=_torch_pinv,
)


def _matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    """``torch.linalg.matrix_rank(A, *, atol=None, rtol=None, hermitian=False)``: int64, not differentiable."""
    _check_tolerances("matrix_rank", A, atol, rtol, hermitian)
    values = np.abs(np.linalg.eigvalsh(A)) if hermitian else np.linalg.svd(A, compute_uv=False)
    return np.asarray(np.sum(_kept_values(values, A.shape, A.dtype, atol, rtol), axis=-1), np.int64)


matrix_rank = defop(
    "matrix_rank",
    family=FAMILY,
    inputs=("A",),
    forward=_matrix_rank,
    vjps=(NOT_DIFFERENTIABLE,),
    samples=lambda rng: [
        Sample((uniform(rng, (3, 3)),), {}, "full rank"),
        Sample((_rank_deficient(rng, (2, 4, 3), 2),), {}, "rank 2, batched"),
        Sample((_rank_deficient(rng, (3, 5), 1),), {"atol": 1e-4}, "rank 1, atol"),
        Sample((_spread_singular_values(rng, (3, 3)),), {"atol": 1.0}, "atol cuts the small ones"),
        Sample((_spread_singular_values(rng, (4, 3)),), {"rtol": 0.5}, "rtol"),
        Sample((_symmetric_spread(rng, (3, 3)),), {"hermitian": True}, "hermitian"),
        Sample((np.zeros((3, 3)),), {}, "zero matrix: rank 0"),
        Sample((uniform(rng, (0, 3, 2)),), {}, "zero-size batch"),
    ],
    torch_ref=lambda torch, A, atol=None, rtol=None, hermitian=False: torch.linalg.matrix_rank(
        A, atol=atol, rtol=rtol, hermitian=hermitian
    ),
)


def _check_cond(A, p=None):
    one_of("cond", "p", p, (None, "fro", "nuc", np.inf, -np.inf, 1, -1, 2, -2))
    if p in (None, 2, -2):
        _check_matrices("cond", A, square=False)
    else:
        _check_matrices("cond", A)
        _matrix_dims("cond", A, p, (-2, -1))


def _cond(A, p=None):
    """``torch.linalg.cond(A, p=None)``: s_max / s_min for p None / 2 (any shape; -2: s_min / s_max), else
    ||A||_p ||A^-1||_p for square A; a singular A gives inf (numpy's cond, as torch's)."""
    _check_cond(A, p)
    if A.size == 0:
        return np.zeros(A.shape[:-2], A.dtype)
    return np.asarray(np.linalg.cond(A, p), A.dtype)


def _norm_last_of(A, p):
    return _matrix_norm_last("cond", A, p) if _is_array(A) else matrix_norm(A, p)


@_quiet
def _cond_vjp(g, ans, A, p=None):
    if p in (None, 2, -2):  # kappa = s_0 / s_-1: d kappa = (ds_0 - kappa ds_-1) / s_-1 (the inverse for -2)
        u, s, vh = _svd_of(A)
        kappa = s[..., 0] / s[..., -1]
        first, last = 1 / s[..., -1], -kappa / s[..., -1]
        if p == -2:
            first, last = -first / (kappa * kappa), -last / (kappa * kappa)
        grad_first = np.expand_dims(g * first, (-1, -2)) * (u[..., :, :1] * vh[..., :1, :])
        return grad_first + np.expand_dims(g * last, (-1, -2)) * (u[..., :, -1:] * vh[..., -1:, :])
    inverse = _inverse(A)
    norm_a, norm_inv = _norm_last_of(A, p), _norm_last_of(inverse, p)
    g_inv = _matrix_norm_last_vjp(g * norm_a, norm_inv, inverse, p)  # through ||A^-1||: d A^-1 = -X dA X
    inv_t = _mT(inverse)
    return _matrix_norm_last_vjp(g * norm_inv, norm_a, A, p) - np.matmul(np.matmul(inv_t, g_inv), inv_t)


def _cond_samples(rng):
    out = [Sample((_spread_singular_values(rng, (3, 3)),), {}, "p=None")]
    for p in ("fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf):
        out.append(Sample((_spread_singular_values(rng, (2, 3, 3)),), {"p": p}, f"p={p}"))
    out += [
        Sample((_spread_singular_values(rng, (4, 2)),), {}, "tall, p=None"),
        Sample((_spread_singular_values(rng, (2, 3)),), {"p": -2}, "wide, p=-2"),
        Sample((_non_contiguous(_spread_singular_values(rng, (3, 3))),), {"p": 1}, "non-contiguous"),
        Sample((_spread_singular_values(rng, (0, 2, 2)),), {"p": "fro"}, "zero-size batch"),
    ]
    return out


def _torch_cond(torch, A, p=None):
    """torch.linalg.cond; for p other than None / +-2 its own formula ||A|| ||A^-1|| spelled out, because torch's
    backward of cond there fails (an in-place write to inv's output, torch 2.13)."""
    if p in (None, 2, -2):
        return torch.linalg.cond(A, p)
    return torch.linalg.matrix_norm(A, p) * torch.linalg.matrix_norm(torch.linalg.inv(A), p)


cond = defop(
    "cond",
    family=FAMILY,
    inputs=("A",),
    forward=_cond,
    vjps=(_cond_vjp,),
    samples=_cond_samples,
    torch_ref=_torch_cond,
)


_LSTSQ_DRIVERS = (None, "gels", "gelsy", "gelsd", "gelss")


def _check_lstsq(A, B, rcond=None, *, driver=None):
    _check_matrices("lstsq", A, square=False)
    _same_dtype("lstsq", ("A", "B"), (A, B))
    one_of("lstsq", "driver", driver, _LSTSQ_DRIVERS, f"one of {_LSTSQ_DRIVERS} (CPU drivers)")
    if rcond is not None:
        real("lstsq", "rcond", rcond, "None or a number")
    require(
        A.ndim - 1 <= B.ndim <= A.ndim,
        "lstsq",
        "B",
        f"{A.ndim} dims (a matrix per A) or {A.ndim - 1} (a vector), as torch (A {A.shape})",
        f"shape {B.shape}",
    )
    vector = B.ndim == A.ndim - 1
    rows = B.shape[-1] if vector else (B.shape[-2] if B.ndim >= 2 else -1)
    require(B.ndim >= 1 and rows == A.shape[-2], "lstsq", "B", f"{A.shape[-2]} rows (A {A.shape})", B.shape)
    batch_dims_or_fail("lstsq", "B", B.shape, B.shape[:-1] if vector else B.shape[:-2], "A", A.shape[:-2])


def _lstsq(A, B, rcond=None, *, driver=None):
    """``torch.linalg.lstsq(A, B, rcond=None, *, driver=None)`` -> (solution, residuals, rank, singular_values):
    the minimum-norm least-squares solution (every LAPACK driver's, A of full rank or not), singular values at most
    rcond * s_max (default eps * max(m, n)) counted as 0. As torch on CPU (driver None is 'gelsy'): residuals (the
    squared residual norms, (*, k)) only for m > n, with gels always, with gelsd / gelss for a full-rank A; rank
    for every driver but gels; singular values for gelsd / gelss; the others are empty. A B of A's rank - 1 dims
    is a (batch of) vector(s). gels (LAPACK's assumes full rank) refuses a rank-deficient A."""
    _check_lstsq(A, B, rcond, driver=driver)
    driver = driver or "gelsy"
    vector = B.ndim == A.ndim - 1
    b = B[..., None] if vector else B
    m, n = A.shape[-2:]
    u, s, vh = np.linalg.svd(A, full_matrices=False)
    rtol = np.finfo(A.dtype).eps * max(m, n) if rcond is None or rcond < 0 else rcond
    keep = _kept_values(s, A.shape, A.dtype, None, rtol)
    inverse = np.where(keep, 1 / np.where(keep, s, 1), 0)
    x = np.matmul(_mT(vh) * np.expand_dims(inverse, -2), np.matmul(_mT(u), b))
    rank = np.sum(keep, axis=-1).astype(np.int64)
    if driver == "gels" and np.any(rank < min(m, n)):  # LAPACK's gels assumes full rank: torch's result is garbage
        raise ValueError(
            f"lstsq: driver 'gels' expected A of full rank {min(m, n)}, got rank {rank.min()} (use 'gelsy' / 'gelsd')"
        )
    empty = np.zeros((0,), A.dtype)
    residuals = empty
    if m > n and (driver == "gels" or (driver != "gelsy" and np.all(rank == n))):  # gels assumes full rank
        residuals = np.sum(np.square(np.matmul(A, x) - b), axis=-2)
    return (
        x[..., 0] if vector else x,
        residuals,
        np.asarray(rank) if driver != "gels" else np.zeros((0,), np.int64),
        s if driver in ("gelsd", "gelss") else empty,
    )


def _lstsq_vjp(g, ans, A, B, *, needs, rcond=None, driver=None):
    """Through the solution X = pinv(A) B: gB = P^T gX, gA = pinv's rule for gP = gX B^T (P at the cutoff's rank).
    Through the residuals r = ||A X - B||^2 per column: at the least-squares solution A^T (A X - B) = 0, so the
    path through X vanishes: gA = 2 R diag(gr) X^T, gB = -2 R diag(gr), R = A X - B."""
    gx, gr, gs = g[0], g[1], g[3]
    x = ans[0]
    vector = B.ndim == A.ndim - 1
    b = B[..., None] if vector else B
    x = np.expand_dims(x, -1) if vector else x
    ga = gb = None
    if gx is not None:
        gx = np.expand_dims(gx, -1) if vector else gx
        rtol = np.finfo(A.dtype).eps * max(A.shape[-2:]) if rcond is None or rcond < 0 else rcond
        p = _pinv(A, rtol=rtol) if _is_array(A) else pinv(A, rtol=rtol)
        gb = np.matmul(_mT(p), gx)
        ga = _pinv_grad(np.matmul(gx, _mT(b)), p, A)
    if gr is not None and gr.shape[-1:] != (0,) and np.size(gr):
        r2 = 2 * (np.matmul(A, x) - b) * np.expand_dims(gr, -2)
        ga = np.matmul(r2, _mT(x)) if ga is None else ga + np.matmul(r2, _mT(x))
        gb = -r2 if gb is None else gb - r2
    if gs is not None and gs.shape[-1:] != (0,) and np.size(gs):  # the singular values (gelsd, gelss): svdvals'
        ga = _svdvals_vjp(gs, None, A) if ga is None else ga + _svdvals_vjp(gs, None, A)
    ga = np.zeros(A.shape, A.dtype) if ga is None else unbroadcast(ga, A.shape)
    gb = np.zeros(B.shape, B.dtype) if gb is None else np.reshape(unbroadcast(gb, b.shape), B.shape)
    return (ga if needs[0] else None), (gb if needs[1] else None)


def _lstsq_samples(rng):
    def a(*shape):
        return _spread_singular_values(rng, shape)

    def u(*shape):
        return uniform(rng, shape)

    cases = [
        ((a(4, 2), u(4, 3)), {}, "tall (gelsy: no residuals)"),
        ((a(4, 2), u(4, 3)), {"driver": "gels"}, "tall, gels: residuals"),
        ((a(2, 4, 3), u(2, 4, 2)), {"driver": "gels"}, "batched, gels"),
        ((a(2, 4), u(2, 3)), {"driver": "gelsy"}, "wide: minimum norm"),
        ((a(3, 3), u(3)), {}, "vector B"),
        ((_non_contiguous(a(3, 2)), transposed(rng, (3, 2))), {}, "non-contiguous"),
        ((a(0, 3, 2), u(0, 3, 1)), {}, "zero-size batch"),
    ]
    out = [Sample(inputs, attrs, label) for inputs, attrs, label in cases]
    # torch's singular_values carry no gradient (its lstsq backward ignores them; here they have svdvals' exact one),
    # and torch's backward differentiates the full pinv, not the one at rcond's rank: no torch comparison there
    out += [
        Sample((a(4, 2), u(4, 3)), {"driver": "gelsd"}, "gelsd: singular values", torch=False),
        Sample((a(2, 4), u(2, 3)), {"driver": "gelss"}, "wide, gelss", torch=False),
        Sample((_rank_deficient(rng, (4, 3), 2), u(4, 2)), {"rcond": 1e-3}, "rank 2 of 3, rcond", torch=False),
    ]
    return out


lstsq = defop(
    "lstsq",
    family=FAMILY,
    inputs=("A", "B"),
    forward=_lstsq,
    joint_vjp=_lstsq_vjp,
    outputs=("solution", "residuals", "rank", "singular_values"),
    check=_check_lstsq,
    samples=_lstsq_samples,
    torch_ref=lambda torch, A, B, rcond=None, driver=None: tuple(torch.linalg.lstsq(A, B, rcond, driver=driver)),
)
__all__ += [
    "matrix_power",
    "matrix_exp",
    "eigvalsh",
    "svdvals",
    "logdet",
    "cholesky_solve",
    "cholesky_inverse",
    "solve_triangular",
    "matrix_norm",
    "linalg_norm",
    "pinv",
    "matrix_rank",
    "cond",
    "lstsq",
]


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_bmm(g, rec, input, mat2):
    return g.op("MatMul", input, mat2)


def _onnx_outer(g, rec, input, vec2):
    return g.op("Mul", g.op("Unsqueeze", input, g.ints([1])), g.op("Unsqueeze", vec2, g.ints([0])))


def _onnx_tensordot(g, rec, a, b):
    import string

    shape_a, shape_b = rec.inputs[0].shape, rec.inputs[1].shape
    dims_a, dims_b, sum_a, sum_b = _tensordot_plan(shape_a, shape_b, rec.attributes.get("dims", 2))
    if sum_a or sum_b:
        raise NotExportable("dims summed on one side only have no lowering")
    letters = iter(string.ascii_letters)
    la = [next(letters) for _ in shape_a]
    lb = [next(letters) for _ in shape_b]
    for i, j in zip(dims_a, dims_b, strict=True):
        lb[j] = la[i]
    out = [c for k, c in enumerate(la) if k not in dims_a] + [c for k, c in enumerate(lb) if k not in dims_b]
    return g.op("Einsum", a, b, equation=f"{''.join(la)},{''.join(lb)}->{''.join(out)}")


def _onnx_det(g, rec, A):
    if 0 in rec.inputs[0].shape:
        raise NotExportable("an empty matrix has no lowering")
    return g.op("Det", A)


lowering(bmm, _onnx_bmm)
lowering(outer, _onnx_outer)
lowering(dot, _onnx_bmm)
lowering(tensordot, _onnx_tensordot)
lowering(
    det,
    _onnx_det,
    edge_difference="a matrix holding inf or NaN: ONNX Runtime's Det (its own elimination) gives NaN where LAPACK's "
    "pivoted LU gives 0 or +-inf",
)
_NO_FACTOR = "ONNX has no {} (only Det among the matrix decompositions)"
lowering(inv, not_exportable=_NO_FACTOR.format("matrix inverse"))
lowering(solve, not_exportable=_NO_FACTOR.format("linear solve"))
lowering(slogdet, not_exportable=_NO_FACTOR.format("log-determinant with sign"))
lowering(cholesky, not_exportable=_NO_FACTOR.format("Cholesky factorisation"))
lowering(qr, not_exportable=_NO_FACTOR.format("QR factorisation"))
lowering(eigh, not_exportable=_NO_FACTOR.format("symmetric eigendecomposition"))
lowering(svd, not_exportable=_NO_FACTOR.format("singular value decomposition"))
for _op, _what in (
    (eigvalsh, "symmetric eigendecomposition"),
    (svdvals, "singular value decomposition"),
    (pinv, "singular value decomposition (the pseudo-inverse's)"),
    (matrix_rank, "singular value decomposition (the rank's)"),
    (cond, "singular value decomposition (the condition number's)"),
    (lstsq, "least-squares solve"),
    (cholesky_solve, "triangular solve"),
    (cholesky_inverse, "triangular solve"),
    (solve_triangular, "triangular solve"),
    (matrix_exp, "matrix exponential"),
    (logdet, "log-determinant (Det's sign and underflow differ from the forward's slogdet)"),
):
    lowering(_op, not_exportable=_NO_FACTOR.format(_what))
lowering(
    matrix_power,
    not_exportable="a negative power needs a matrix inverse (not in ONNX); the positive powers' lowering "
    "(the forward's squaring order) is not written",
)
for _op in (matrix_norm, linalg_norm):
    lowering(
        _op,
        not_exportable="the 2 and nuclear norms need a singular value decomposition (not in ONNX); the other "
        "orders' lowering is not written",
    )
