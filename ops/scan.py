"""Scans (cumulative ops along one dim), as in PyTorch 2.13: cumsum, cumprod, cummax, cummin, logcumsumexp.

Every op takes ``(input, dim)``; ``dim`` is an int (negative counts from the end) and a 0-D input takes dim 0
or -1 (the scan of one entry is that entry). Each op's torch conventions are its notes (``_CASE_LAW``).
"""

__all__ = ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "diff", "trapezoid", "cumulative_trapezoid"]

import numpy as np

from tape.broadcast import unbroadcast
from tape.onnx import lowering
from tape.registry import Sample, defop

from . import _numpy
from ._declare import one_input_op, values_indices_op
from ._notes import case_law
from ._numerics import constant_values, quiet
from ._onnx import axis_of, cast_to, scalar
from ._samples import transposed, uniform
from ._validation import integer, normalize_dim, require_dtype_of_input, require_float
from .indexing import index_select, scatter_add
from .reduce import _as_dtype, _cast_for, _grad_as, _torch_dtype
from .shape import _pad, pad

# torch's case law, op by op: each entry joins the notes= of the ops it names (shown in docs/coverage.md)
_CASE_LAW = (
    (
        ("cumsum", "cumprod"),
        "cumsum / cumprod keep a floating dtype and turn integer and bool inputs into int64 (torch's default "
        "promotion; integer outputs carry no gradient). cummax / cummin keep any dtype. logcumsumexp needs a "
        "floating input (torch has no integer kernel).",
    ),
    (
        ("cumsum",),
        "cumsum's gradient is the reversed cumulative sum of ``g``; its second order is cumsum again.",
    ),
    (
        ("cumprod",),
        "cumprod's gradient is exact with zeros in the input, any number of them (torch's formula): for a "
        "slice whose first zero is at z, entry k < z gets sum_{i>=k} g_i y_i / x_k (those y_i past z are 0), "
        "the first zero gets sum_{i>=z} g_i prod_{j<=i, j!=z} x_j (the cumulative product with x_z replaced "
        "by 1, no division), and every entry after z gets 0 (each of its terms holds the factor x_z = 0). "
        "Without zeros it is the reversed cumulative sum of g * y divided by x. The recorded (second-order) "
        "rule is the same without zeros; with zeros it is torch's O(n^2) differentiable form, sum_{i>=k} g_i "
        "prod_{j<=i, j!=k} x_j, built as the cumprod of an n x n matrix holding x with its diagonal set to 1 "
        "-- whose own derivatives are exact at zeros too (the O(n) form above is not: its derivative in x_z "
        "of the entries after z is not 0).",
    ),
    (
        ("cummax", "cummin"),
        "cummax / cummin return (values, indices). An entry replaces the running extremum when it is >= (<=) "
        "it, so ties give the LATEST index, a NaN becomes the extremum and stays (each later NaN takes the "
        "index over), and the value is the input's entry at the index (0.0 after -0.0 gives 0.0), as torch's "
        "kernels do. The gradient routes ``g`` to the returned indices, adding where an index repeats "
        "(scatter_add; its second order is gather).",
    ),
    (
        ("logcumsumexp",),
        "logcumsumexp accumulates with logaddexp (stable for any magnitude; -inf entries add nothing). Its "
        "gradient is torch's sign-split log-space form, exp(reversed logcumsumexp(log|g| - y) + x) for the "
        "positive and the negative parts of g, so no exp overflows. Where an entry and every entry before it "
        "are -inf (the output is log 0), the gradient is NaN, as torch's is; a 0-D input's gradient is g, as "
        "torch's. The recorded (second-order) rule is the same form, except where g holds exact zeros: there "
        "the log-space form has no derivative in g (torch's double backward gives NaN for those cotangent "
        "entries), so the rule is the O(n^2) sum_{i>=k} g_i exp(x_k - y_i), linear in g, whose derivatives "
        "are exact.",
    ),
)

FAMILY = "scan"


# -- shared helpers ----------------------------------------------------------------------------------------------
def _check_dim(op: str, input, dim) -> None:
    normalize_dim(op, dim, input.ndim)


def _check_float(op: str, input, dim) -> None:
    require_float(op, "input", input)
    normalize_dim(op, dim, input.ndim)


def _flip(a, axis: int):
    """``a`` reversed along ``axis``: a view for arrays, index_select (recorded, differentiable) for Tensors."""
    if isinstance(a, np.ndarray):
        return np.flip(a, axis)
    return index_select(a, axis, np.arange(a.shape[axis] - 1, -1, -1))


def _reversed_cumsum(a, axis: int):
    """out_k = sum_{i>=k} a_i along ``axis`` (np.cumsum on a Tensor runs ops.cumsum)."""
    return _flip(np.cumsum(_flip(a, axis), axis), axis)


def _integral_as_int64(input):
    """torch's dtype for cumsum / cumprod: floats stay, integers and bools accumulate in int64."""
    return np.int64 if input.dtype.kind in "biu" else None


def _scatter_add_along(axis: int, index: np.ndarray, src):
    """zeros like ``src`` with ``src`` added at ``index`` along ``axis`` (index, src and the result share one
    shape; repeated positions add up). Arrays: a bincount over flat positions; Tensors: ops.scatter_add,
    recorded (its gradient for ``src`` is gather)."""
    if not isinstance(src, np.ndarray):
        return scatter_add(np.zeros(src.shape, src.dtype), axis, index, src)
    if src.size == 0:
        return np.zeros(src.shape, src.dtype)
    moved_shape = np.moveaxis(src, axis, -1).shape
    n = moved_shape[-1]
    rows = np.moveaxis(index, axis, -1).reshape(-1, n)
    flat = rows + (np.arange(rows.shape[0]) * n)[:, None]
    values = np.moveaxis(src, axis, -1).reshape(-1)
    total = np.bincount(flat.reshape(-1), weights=values, minlength=flat.size).astype(src.dtype, copy=False)
    return np.moveaxis(total.reshape(moved_shape), -1, axis)


# -- cumsum ------------------------------------------------------------------------------------------------------
def _with_dtype(op: str, forward, vjp):
    """torch's ``dtype=`` on cumsum / cumprod: the input cast before the scan, the gradient cast back."""

    def run(input, dim, *, dtype=None):
        return forward(input if dtype is None else _cast_for(op, input, dtype), dim)

    def rule(g, ans, input, dim, *, dtype=None):
        if dtype is None:
            return vjp(g, ans, input, dim)
        return _grad_as(vjp(g, ans, _as_dtype(input, dtype), dim), input)

    run.__name__, rule.__name__ = forward.__name__, vjp.__name__
    return run, rule


def _dtype_samples(samples):
    def generate(rng):
        return samples(rng) + [
            Sample((uniform(rng, (2, 3)),), {"dim": 1, "dtype": np.float64}, "dtype=float64"),
            Sample((rng.integers(-3, 4, (2, 3)),), {"dim": 0, "dtype": "float64"}, "int64 to float64"),
        ]

    return generate


def _torch_scan(name):
    def ref(torch, input, dim, dtype=None):
        return getattr(torch, name)(input, dim, dtype=_torch_dtype(torch, dtype))

    return ref


def _dtype_scan(name: str, forward, vjp, samples, *, doc=""):
    """Declare cumsum / cumprod: ``name(input, dim, *, dtype=None)`` (``_with_dtype``), a Tensor method and
    numpy's ``np.<name>``."""
    run, rule = _with_dtype(name, forward, vjp)
    return one_input_op(
        name,
        FAMILY,
        run,
        rule,
        check=lambda input, dim, dtype=None: _check_dim(name, input, dim),
        samples=_dtype_samples(samples),
        torch_ref=_torch_scan(name),
        method=True,
        numpy={getattr(np, name): _numpy.scan(name)},
        notes=case_law(_CASE_LAW, name),
        doc=doc,
    )


def _cumsum(input, dim):
    axis = normalize_dim("cumsum", dim, input.ndim)
    if input.ndim == 0:
        return np.array(input, dtype=_integral_as_int64(input) or input.dtype)
    return np.cumsum(input, axis, dtype=_integral_as_int64(input))


def _cumsum_vjp(g, ans, input, dim):
    if input.ndim == 0:
        return g
    return _reversed_cumsum(g, normalize_dim("cumsum", dim, input.ndim))


def _scan_samples(low=-2.0, high=2.0, integers=True):
    """The inputs every scan runs on: a vector, both dims of a matrix, a non-contiguous 3-D input, a size-1
    dim, a 0-D input, zero-size inputs (scanned along the empty dim and along another one) and an integer
    input (forward and indices only)."""

    def generate(rng):
        out = [
            Sample((uniform(rng, (5,), low, high),), {"dim": 0}, "vector"),
            Sample((uniform(rng, (3, 4), low, high),), {"dim": 1}, "matrix dim=1"),
            Sample((uniform(rng, (3, 4), low, high),), {"dim": -2}, "matrix dim=-2"),
            Sample((transposed(rng, (2, 5, 3), low, high),), {"dim": 1}, "non-contiguous"),
            Sample((uniform(rng, (4, 1), low, high),), {"dim": -1}, "size-1 dim"),
            Sample((uniform(rng, (), low, high),), {"dim": 0}, "0-D"),
            Sample((uniform(rng, (0, 3), low, high),), {"dim": 0}, "zero-size along dim"),
            Sample((uniform(rng, (0, 3), low, high),), {"dim": 1}, "zero-size other dim"),
        ]
        if integers:
            out.append(Sample((rng.integers(-3, 4, size=(3, 5)),), {"dim": 1}, "int64"))
        return out

    return generate


cumsum = _dtype_scan(
    "cumsum",
    _cumsum,
    _cumsum_vjp,
    _scan_samples(),
    doc="The cumulative sum along ``dim``; integers and bools accumulate as int64 unless ``dtype`` is given.",
)


# -- cumprod -----------------------------------------------------------------------------------------------------
def _cumprod(input, dim):
    axis = normalize_dim("cumprod", dim, input.ndim)
    if input.ndim == 0:
        return np.array(input, dtype=_integral_as_int64(input) or input.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.cumprod(input, axis, dtype=_integral_as_int64(input))


@quiet  # overflowing products, 0 * inf: torch's inf / NaN
def _cumprod_vjp(g, ans, input, dim):
    axis = normalize_dim("cumprod", dim, input.ndim)
    if input.ndim == 0 or input.shape[axis] <= 1:
        return g
    zero = input == 0
    if np.count_nonzero(zero) == 0:
        return _reversed_cumsum(g * ans, axis) / input
    if not isinstance(g, np.ndarray):
        return _cumprod_vjp_recorded(g, input, axis)
    zeros_so_far = np.cumsum(zero, axis)
    before = zeros_so_far == 0  # entries before the slice's first zero
    first = zero & (zeros_so_far == 1)
    grad = np.where(before, _reversed_cumsum(g * ans, axis) / np.where(before, input, 1), 0)
    omitted = np.cumprod(np.where(first, 1, input), axis)  # prod_{j<=i, j!=z} x_j
    return np.where(first, _reversed_cumsum(g * omitted, axis), grad).astype(g.dtype, copy=False)


def _cumprod_vjp_recorded(g, input, axis: int):
    """grad_k = sum_{i>=k} g_i prod_{j<=i, j!=k} x_j on Tensors (torch's O(n^2) differentiable form): row k of an
    n x n matrix holds x with x_k replaced by 1, its cumprod gives the products, an upper triangle keeps i >= k."""
    n = input.shape[axis]
    x = np.moveaxis(input, axis, -1)
    rows = np.where(np.eye(n, dtype=bool), 1.0, np.expand_dims(x, -2))  # [..., k, j]
    omitted = cumprod(rows, -1)  # [..., k, i] = prod_{j<=i, j!=k} x_j
    upper = np.triu(np.ones((n, n), dtype=g.dtype))  # i >= k
    grad = np.sum(np.expand_dims(np.moveaxis(g, axis, -1), -2) * omitted * upper, axis=-1)
    return np.moveaxis(grad, -1, axis)


def _cumprod_samples(rng):
    out = _scan_samples(0.5, 1.5)(rng)
    signs = rng.choice([-1.0, 1.0], size=(3, 5))
    x = uniform(rng, (3, 5), 0.5, 1.5) * signs
    x[0, 2] = 0.0  # one zero in the middle
    x[1, 0] = x[1, 3] = 0.0  # two zeros, the first one leading
    x[2, 1] = x[2, 2] = x[2, 4] = 0.0  # three zeros, two adjacent, one last
    out.append(Sample((x.copy(),), {"dim": 1}, "zeros dim=1"))
    out.append(Sample((x.T.copy(),), {"dim": 0}, "zeros dim=0"))
    out.append(Sample((np.array([1.5, -0.75, 1.25, 0.0]),), {"dim": 0}, "zero last"))
    out.append(Sample((np.array([0.0, 0.0, 0.0]),), {"dim": 0}, "all zeros"))
    out.append(Sample((np.array([0.0]),), {"dim": 0}, "one zero entry"))
    return out


cumprod = _dtype_scan(
    "cumprod",
    _cumprod,
    _cumprod_vjp,
    _cumprod_samples,
    doc="The cumulative product along ``dim``; integers and bools accumulate as int64 unless ``dtype`` is given.",
)


# -- cummax / cummin ---------------------------------------------------------------------------------------------
def _running_extremum(name: str, ufunc):
    def forward(input, dim):
        axis = normalize_dim(name, dim, input.ndim)
        if input.ndim == 0:
            return input.copy(), np.zeros((), np.int64)
        running = ufunc.accumulate(input, axis)  # NaN propagates, so a NaN stays the extremum
        hits = input == running  # where the entry is (or ties) the running extremum: torch's >= / <=
        if input.dtype.kind == "f":
            hits |= np.isnan(input)
        shape = [1] * input.ndim
        shape[axis] = input.shape[axis]
        positions = np.arange(input.shape[axis], dtype=np.int64).reshape(shape)
        indices = np.maximum.accumulate(np.where(hits, positions, 0), axis)  # the latest hit so far
        return np.take_along_axis(input, indices, axis), indices

    def vjp(g, ans, input, dim):
        g_values = g[0]
        if g_values is None:
            return np.zeros(input.shape, input.dtype)
        if input.ndim == 0:
            return g_values
        return _scatter_add_along(normalize_dim(name, dim, input.ndim), np.asarray(ans[1]), g_values)

    forward.__name__, vjp.__name__ = f"_{name}", f"_{name}_vjp"
    return forward, vjp


def _extremum_samples(rng):
    out = _scan_samples()(rng)
    ties = rng.integers(0, 3, size=(4, 6))  # many ties: exact index parity with torch (no gradient)
    out.append(Sample((ties,), {"dim": 1}, "int64 ties dim=1"))
    out.append(Sample((ties.T.copy(),), {"dim": 0}, "int64 ties dim=0"))
    out.append(Sample((np.array([True, False, True, True]),), {"dim": 0}, "bool"))
    # a NaN becomes the extremum and stays; each later NaN takes the index over (values are NaN: no gradcheck)
    nan = np.array([[0.5, 1.5, np.nan, 2.0, np.nan, -1.0], [1.0, -0.5, 0.25, np.nan, 3.0, 2.5]])
    out.append(Sample((nan,), {"dim": 1}, "NaN"))
    return out


def _extremum_op(name, ufunc, **declaration):
    forward, vjp = _running_extremum(name, ufunc)
    return values_indices_op(
        name,
        FAMILY,
        forward,
        vjp,
        check=lambda input, dim: _check_dim(name, input, dim),
        samples=_extremum_samples,
        torch_ref=lambda torch, input, dim: getattr(torch, name)(input, dim),
        **declaration,
    )


cummax = _extremum_op(
    "cummax",
    np.maximum,
    method=True,
    notes=case_law(_CASE_LAW, "cummax"),
    doc="The running maximum along ``dim`` and where it was: (values, indices).",
)
cummin = _extremum_op(
    "cummin",
    np.minimum,
    method=True,
    notes=case_law(_CASE_LAW, "cummin"),
    doc="The running minimum along ``dim`` and where it was: (values, indices).",
)


# -- logcumsumexp ------------------------------------------------------------------------------------------------
@quiet  # -inf - -inf, overflow: torch's NaN / inf
def _logcumsumexp(input, dim):
    axis = normalize_dim("logcumsumexp", dim, input.ndim)
    if input.ndim == 0:
        return input.copy()
    return np.logaddexp.accumulate(input, axis)


def _reversed_logcumsumexp(a, axis: int):
    if isinstance(a, np.ndarray):
        return np.flip(np.logaddexp.accumulate(np.flip(a, axis), axis), axis)
    return _flip(logcumsumexp(_flip(a, axis), axis), axis)


@quiet  # log 0, inf - inf: torch's values
def _logcumsumexp_vjp(g, ans, input, dim):
    """grad_k = sum_{i>=k} g_i exp(x_k - y_i), split by the sign of g and summed in log space (torch's form)."""
    if input.ndim == 0:
        return g
    axis = normalize_dim("logcumsumexp", dim, input.ndim)
    if not isinstance(g, np.ndarray) and np.count_nonzero(constant_values(g)) != np.size(g):
        return _logcumsumexp_vjp_recorded(g, ans, input, axis)
    lowest = float(np.finfo(input.dtype).min)  # stands for log 0 (finite, so lowest - y stays ordered)
    positive, negative = g > 0, g < 0
    log_abs = np.log(np.where(g != 0, np.abs(g), 1.0))
    grad = None
    for part in (positive, negative):
        log_part = np.where(part, log_abs, lowest)
        term = np.exp(_reversed_logcumsumexp(log_part - ans, axis) + input)
        grad = term if grad is None else grad - term
    return grad


def _logcumsumexp_vjp_recorded(g, ans, input, axis: int):
    """grad_k = sum_{i>=k} g_i exp(x_k - y_i) as an n x n matrix product, on Tensors whose g holds zeros: the
    log-space form's derivative in g is 0 / 0 at g_i = 0 (torch's double backward gives NaN there, and a
    where around it would give a wrong 0), while this form is linear in g. exp(x_k - y_i) <= 1 for i >= k."""
    n = input.shape[axis]
    x, y, g_last = (np.moveaxis(a, axis, -1) for a in (input, ans, g))
    upper = np.triu(np.ones((n, n), dtype=bool))  # [k, i]: i >= k
    weights = np.exp(np.where(upper, np.expand_dims(x, -1) - np.expand_dims(y, -2), -np.inf))
    return np.moveaxis(np.sum(weights * np.expand_dims(g_last, -2), axis=-1), -1, axis)


def _logcumsumexp_samples(rng):
    out = _scan_samples(integers=False)(rng)
    out.append(Sample((uniform(rng, (3, 6)) * 400.0,), {"dim": 1}, "spread +-800"))
    out.append(Sample((uniform(rng, (2, 5)) - 100.0,), {"dim": -1}, "near -100"))
    inf = np.array([[0.5, -np.inf, 1.0, -np.inf, -0.25], [-1.5, 0.75, -np.inf, -np.inf, 2.0]])
    out.append(Sample((inf,), {"dim": 1}, "-inf after a finite entry"))
    return out


logcumsumexp = defop(
    "logcumsumexp",
    family=FAMILY,
    inputs=("input",),
    forward=_logcumsumexp,
    vjps=(_logcumsumexp_vjp,),
    check=lambda input, dim: _check_float("logcumsumexp", input, dim),
    samples=_logcumsumexp_samples,
    torch_ref=lambda torch, input, dim: torch.logcumsumexp(input, dim),
    method=True,
    notes=case_law(_CASE_LAW, "logcumsumexp"),
    doc="log(cumsum(exp(x))) along ``dim``, computed without overflow.",
)


# -- diff, trapezoid, cumulative_trapezoid: differences and integrals along one dim --------------------------------
def _along(axis: int, key) -> tuple:
    return (slice(None),) * axis + (key,)


def _pad_along(a, axis: int, before: int, after: int):
    """``a`` with ``before`` / ``after`` zeros along ``axis``: shape's numpy kernel on arrays, pad on Tensors."""
    widths = (0, 0) * (np.ndim(a) - 1 - axis) + (before, after)
    return _pad(a, widths) if isinstance(a, np.ndarray) else pad(a, widths)


def _diff_parts(input, prepend, append, n, dim) -> tuple:
    """(axis, the tensors joined along it: prepend, input, append), validated as torch."""
    if input.ndim == 0:
        raise ValueError("diff: argument 'input' expected a tensor with at least 1 dim, got a 0-D tensor")
    axis = normalize_dim("diff", dim, input.ndim)
    integer("diff", "n", n, at_least=0)
    parts = [input]
    for name, t in (("prepend", prepend), ("append", append)):
        if t is None:
            continue
        if t.ndim != input.ndim or any(a != b for d, (a, b) in enumerate(zip(t.shape, input.shape)) if d != axis):
            raise ValueError(
                f"diff: argument '{name}' expected input's shape {input.shape} apart from dim {dim}, got {t.shape}"
            )
        require_dtype_of_input("diff", name, t, input)
        parts.insert(0 if name == "prepend" else len(parts), t)
    return axis, parts


def _diff(input, n=1, dim=-1, prepend=None, append=None):
    """``torch.diff(input, n=1, dim=-1, prepend=None, append=None)``: the n-th forward difference along ``dim``
    of prepend, input and append joined there (bool: logical xor, as torch)."""
    axis, parts = _diff_parts(input, prepend, append, n, dim)
    if n == 0:  # the input itself, prepend and append unused (torch's and numpy's)
        return np.array(input, copy=True)
    joined = np.concatenate(parts, axis=axis) if len(parts) > 1 else input
    return np.diff(joined, n, axis=axis)


def _diff_vjp(g, ans, input, prepend, append, *, needs, n=1, dim=-1):
    axis, parts = _diff_parts(input, prepend, append, n, dim)
    if n == 0:
        unused = (np.zeros(np.shape(t), g.dtype) if t is not None else None for t in (prepend, append))
        return tuple(grad if need else None for grad, need in zip((g, *unused), needs))
    for _ in range(n):  # the adjoint of one difference y_i = x_{i+1} - x_i: g shifted down minus g
        g = _pad_along(g, axis, 1, 0) - _pad_along(g, axis, 0, 1)
    grads, start = {}, 0
    for t, name in zip(
        parts, [p for p, t in (("prepend", prepend), ("input", input), ("append", append)) if t is not None]
    ):
        grads[name] = g[_along(axis, slice(start, start + t.shape[axis]))]
        start += t.shape[axis]
    return tuple(grads.get(name) if need else None for name, need in zip(("input", "prepend", "append"), needs))


def _diff_samples(rng):
    return [
        Sample((uniform(rng, (3, 5)), None, None), {}, "rows"),
        Sample((uniform(rng, (4, 3)), None, None), {"n": 2, "dim": 0}, "second difference"),
        Sample((uniform(rng, (2, 3)), uniform(rng, (2, 2)), uniform(rng, (2, 1))), {"dim": 1}, "prepend, append"),
        Sample((uniform(rng, (3, 2)), None, uniform(rng, (1, 2))), {"n": 3, "dim": -2}, "append, n=3"),
        Sample((uniform(rng, (4,)), None, None), {"n": 0}, "n=0: the input"),
        Sample((uniform(rng, (3,)), None, None), {"n": 5}, "n past the size: empty"),
        Sample((transposed(rng, (3, 4)), transposed(rng, (1, 4)), None), {"dim": 0}, "non-contiguous"),
        Sample((uniform(rng, (0, 3)), None, None), {}, "zero-size"),
    ]


diff = defop(
    "diff",
    method=True,
    family=FAMILY,
    inputs=("input", "prepend?", "append?"),
    forward=_diff,
    joint_vjp=_diff_vjp,
    check=lambda input, prepend=None, append=None, n=1, dim=-1: _diff_parts(input, prepend, append, n, dim),
    samples=_diff_samples,
    torch_ref=lambda torch, input, prepend=None, append=None, n=1, dim=-1: torch.diff(input, n, dim, prepend, append),
)


def _trapezoid_plan(op, y, x, dx, dim) -> tuple:
    """(axis, x aligned with y -- or None -- and the spacing dx) for trapezoid / cumulative_trapezoid."""
    require_float(op, "y", y)
    if y.ndim == 0:
        raise ValueError(f"{op}: argument 'y' expected a tensor with at least 1 dim, got a 0-D tensor")
    axis = normalize_dim(op, dim, y.ndim)
    if x is None:
        if dx is not None and (isinstance(dx, bool) or np.ndim(dx) != 0 or np.asarray(dx).dtype.kind not in "iuf"):
            raise TypeError(f"{op}: argument 'dx' expected a number, got {type(dx).__name__} {dx!r}")
        return axis, None, 1.0 if dx is None else float(dx)
    if dx is not None:
        raise ValueError(f"{op}: arguments 'x' and 'dx' expected at most one of them, got both")
    if x.dtype != y.dtype:
        raise TypeError(f"{op}: argument 'x' expected dtype {y.dtype} (that of 'y'), got {x.dtype}")
    if x.shape != y.shape and x.shape != (y.shape[axis],):
        raise ValueError(
            f"{op}: argument 'x' expected y's shape {y.shape} or ({y.shape[axis]},) (along dim {dim}), got {x.shape}"
        )
    along = [1] * y.ndim
    along[axis] = -1
    return axis, (np.reshape(x, along) if x.shape != y.shape else x), None


def _intervals(y, x, dx, axis) -> tuple:
    """(the spacing of each interval along ``axis``, y_i + y_{i+1} of each): numpy API, traced on Tensors."""
    sums = y[_along(axis, slice(1, None))] + y[_along(axis, slice(None, -1))]
    spacing = dx if x is None else x[_along(axis, slice(1, None))] - x[_along(axis, slice(None, -1))]
    return spacing, sums


def _trapezoid_back(G, y, x, x_aligned, dx, axis, needs) -> tuple:
    """The gradients of sum_i G_i * spacing_i * sums_i / 2 for y and x, G the cotangent of each interval."""
    if y.shape[axis] == 0:
        return (
            np.zeros(y.shape, y.dtype) if needs[0] else None,
            None if x is None or not needs[1] else np.zeros(x.shape, x.dtype),
        )
    spacing, sums = _intervals(y, x_aligned, dx, axis)
    half = G * spacing / 2
    half = np.broadcast_to(half, np.broadcast_shapes(np.shape(half), np.shape(sums)))  # a constant dx: every interval
    gy = unbroadcast(_pad_along(half, axis, 1, 0) + _pad_along(half, axis, 0, 1), y.shape) if needs[0] else None
    gx = None
    if x is not None and needs[1]:
        t = G * sums / 2
        gx = np.reshape(unbroadcast(_pad_along(t, axis, 1, 0) - _pad_along(t, axis, 0, 1), x_aligned.shape), x.shape)
    return gy, gx


def _trapezoid(y, x=None, *, dx=None, dim=-1):
    """``torch.trapezoid(y, x=None, *, dx=None, dim=-1)``: the trapezoidal rule along ``dim``, sample points
    ``x`` (1-D along dim, or y's shape) or a constant spacing ``dx`` (default 1); fewer than 2 points give 0."""
    axis, xa, spacing = _trapezoid_plan("trapezoid", y, x, dx, dim)
    if y.shape[axis] == 0:
        return np.zeros(y.shape[:axis] + y.shape[axis + 1 :], y.dtype)
    step, sums = _intervals(y, xa, spacing, axis)
    return np.sum(np.asarray(step * sums / 2, y.dtype), axis=axis)


def _trapezoid_vjp(g, ans, y, x, *, needs, dx=None, dim=-1):
    axis, xa, spacing = _trapezoid_plan("trapezoid", y, x, dx, dim)
    return _trapezoid_back(np.expand_dims(g, axis), y, x, xa, spacing, axis, needs)


def _cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """``torch.cumulative_trapezoid(y, x=None, *, dx=None, dim=-1)``: the running trapezoidal integral along
    ``dim``, one entry fewer than y there (none for an empty dim)."""
    axis, xa, spacing = _trapezoid_plan("cumulative_trapezoid", y, x, dx, dim)
    if y.shape[axis] == 0:
        return np.zeros(y.shape, y.dtype)
    step, sums = _intervals(y, xa, spacing, axis)
    return np.cumsum(np.asarray(step * sums / 2, y.dtype), axis=axis)


def _cumulative_trapezoid_vjp(g, ans, y, x, *, needs, dx=None, dim=-1):
    axis, xa, spacing = _trapezoid_plan("cumulative_trapezoid", y, x, dx, dim)
    G = _reversed_cumsum(g, axis) if y.shape[axis] else g
    return _trapezoid_back(G, y, x, xa, spacing, axis, needs)


def _trapezoid_samples(rng):
    return [
        Sample((uniform(rng, (2, 5)), None), {}, "unit spacing"),
        Sample((uniform(rng, (4, 3)), None), {"dx": 0.5, "dim": 0}, "dx"),
        Sample((uniform(rng, (2, 4)), np.sort(uniform(rng, (4,)))), {}, "1-D x"),
        Sample((uniform(rng, (3, 2)), uniform(rng, (3, 2))), {"dim": -2}, "x of y's shape"),
        Sample((transposed(rng, (3, 4)), transposed(rng, (3, 4))), {"dim": 1}, "non-contiguous"),
        Sample((uniform(rng, (3, 1)), None), {}, "one point"),
        Sample((uniform(rng, (2, 0)), None), {}, "no points"),
        Sample((uniform(rng, (0, 3)), uniform(rng, (3,))), {}, "zero-size"),
    ]


def _trapezoid_op(name, forward, joint_vjp):
    """Declare trapezoid or cumulative_trapezoid: the integral of y over x (or a spacing dx, 1 by default)."""

    def torch_ref(torch, y, x=None, dx=None, dim=-1):
        integrate = getattr(torch, name)
        return integrate(y, dx=dx if dx is not None else 1, dim=dim) if x is None else integrate(y, x, dim=dim)

    return defop(
        name,
        family=FAMILY,
        inputs=("y", "x?"),
        forward=forward,
        joint_vjp=joint_vjp,
        check=lambda y, x=None, dx=None, dim=-1: _trapezoid_plan(name, y, x, dx, dim),
        samples=_trapezoid_samples,
        torch_ref=torch_ref,
    )


trapezoid = _trapezoid_op("trapezoid", _trapezoid, _trapezoid_vjp)
cumulative_trapezoid = _trapezoid_op("cumulative_trapezoid", _cumulative_trapezoid, _cumulative_trapezoid_vjp)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_cumsum(g, rec, input):
    shape = rec.inputs[0].shape
    x = cast_to(g, input, rec.inputs[0].dtype, rec.output.dtype)
    if not shape:
        return g.op("Identity", x)
    return g.op("CumSum", x, g.const(np.array(axis_of(int(rec.attributes["dim"]), len(shape)), np.int64)))


def _onnx_shifted(g, x, axis: int) -> tuple:
    """(x[1:], x[:-1]) along ``axis``."""
    big = np.iinfo(np.int64).max
    return g.op("Slice", x, g.ints([1]), g.ints([big]), g.ints([axis])), g.op(
        "Slice", x, g.ints([0]), g.ints([-1]), g.ints([axis])
    )


def _onnx_diff(g, rec, input, prepend=None, append=None):
    """n differences x[1:] - x[:-1] (bool: Xor) of prepend, input and append joined along dim."""
    axis = axis_of(int(rec.attributes.get("dim", -1)), len(rec.inputs[0].shape))
    parts = [t for t in (prepend, input, append) if t is not None]
    x = parts[0] if len(parts) == 1 else g.op("Concat", *parts, axis=axis)
    for _ in range(int(rec.attributes.get("n", 1))):
        x = g.op("Xor" if rec.inputs[0].dtype == np.bool_ else "Sub", *_onnx_shifted(g, x, axis))
    return g.op("Identity", x) if x == input else x


def _onnx_trapezoid(g, rec, y, x=None):
    """Each interval's spacing * (y_i + y_{i+1}) / 2, as the forward computes it, then summed (trapezoid) or
    summed up along dim (cumulative_trapezoid)."""
    shape, dtype = rec.inputs[0].shape, rec.inputs[0].dtype
    axis = axis_of(int(rec.attributes.get("dim", -1)), len(shape))
    if x is None:
        dx = rec.attributes.get("dx")
        step = scalar(g, 1.0 if dx is None else float(dx), dtype)
    else:
        along = [1] * len(shape)
        along[axis] = -1
        aligned = x if rec.inputs[1].shape == shape else g.op("Reshape", x, g.ints(along))
        step = g.op("Sub", *_onnx_shifted(g, aligned, axis))
    area = g.op("Div", g.op("Mul", step, g.op("Add", *_onnx_shifted(g, y, axis))), scalar(g, 2, dtype))
    if rec.op_name == "cumulative_trapezoid":
        return g.op("CumSum", area, g.const(np.array(axis, np.int64)))
    return g.op("ReduceSum", area, g.ints([axis]), keepdims=0)


_NO_SCAN = "ONNX has no cumulative {} (only CumSum); a Scan loop over the dim is not written"
lowering(cumsum, _onnx_cumsum)
lowering(diff, _onnx_diff)
for _op in (trapezoid, cumulative_trapezoid):
    lowering(_op, _onnx_trapezoid)
lowering(cumprod, not_exportable=_NO_SCAN.format("product"))
lowering(cummax, not_exportable=_NO_SCAN.format("maximum with indices"))
lowering(cummin, not_exportable=_NO_SCAN.format("minimum with indices"))
lowering(logcumsumexp, not_exportable=_NO_SCAN.format("log-sum-exp"))
