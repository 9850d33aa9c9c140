"""Reductions over ``dim`` (an int, a tuple or None) with ``keepdim``, as in torch.

``dim=None`` and ``dim=()`` reduce every dim (torch's convention); a repeated or out-of-range dim, a
non-int dim or a non-bool keepdim raises naming the op and the argument. Values torch returns silently (inf - inf,
overflow, 0 / 0) come without numpy's RuntimeWarning. Each op's torch conventions are its notes (``_CASE_LAW``).
"""

__all__ = [
    "sum",
    "mean",
    "var",
    "std",
    "max",
    "min",
    "prod",
    "logsumexp",
    "argmax",
    "argmin",
    "amax",
    "amin",
    "vector_norm",
    "norm",
    "any",
    "all",
    "count_nonzero",
]

import dataclasses
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from tape.onnx import lowering, lowering_of
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop

from . import _numpy
from ._declare import one_input_op
from ._notes import case_law
from ._numerics import constant_values, quiet
from ._onnx import NotExportable, axis_of, cast_to, extremum, scalar, tensor_type
from ._samples import index_reduction_samples, reduction_samples, transposed, uniform
from ._validation import broadcast_or_fail, normalize_dim, real, require_bool, require_float
from .binary import maximum, minimum
from .cast import cast
from .sorting import _scattered_back

# torch's case law, op by op: each entry joins the notes= of the ops it names (shown in docs/coverage.md)
_CASE_LAW = (
    (
        ("max", "min", "amax", "amin"),
        "max / min are torch.max / torch.min: without ``dim``, the extremum of every entry, the gradient "
        "split evenly among tied extrema (as torch.max() and torch.amax do; a NaN extremum gives NaN "
        "gradients to its slice); with ``dim``, the named tuple (values, int64 indices of the first extremum,"
        " a NaN counting as one), the values' whole gradient going to those indices (a tie is not shared) -- "
        "a scatter at the indices, so the second order is exact. One op returns one output or two depending "
        'on the call, as torch\'s does (``outputs=("values", "indices")``). amax / amin take any dims and '
        "return values only (numpy's np.max on a Tensor is amax).",
    ),
    (
        ("var", "std"),
        "var / std take torch's ``correction`` (default 1, Bessel's); N - correction <= 0 gives inf/NaN as in"
        " torch. std's gradient is 0 where std is 0 (torch's convention, instead of 0/0), and so is its "
        "second order there (torch's double backward gives NaN for the cotangent). The mean is summed as x / "
        "N when the plain sum overflows, so var of huge equal entries is 0, as torch's (and the backward uses"
        " that mean).",
    ),
    (
        ("prod",),
        "prod's gradient is the product of the other entries: ans / x when the product is finite and nonzero,"
        " else exclusive cumulative products (exact with zeros, infs and under/overflow); a slice with two or"
        " more zeros gets 0 (torch's).",
    ),
    (
        ("logsumexp",),
        "logsumexp subtracts the max first: logits of +-1e4 give finite values and gradients.",
    ),
    (
        ("sum", "mean", "var", "std", "max", "min", "prod", "logsumexp", "argmax", "argmin"),
        "Zero-size inputs: over no entries sum is 0, mean / var / std NaN, prod 1, logsumexp -inf (torch's "
        "values); max, min, argmax and argmin of no entries raise ValueError naming the op, as torch raises.",
    ),
    (
        ("sum", "mean", "var", "std", "max", "min", "prod", "logsumexp"),
        "Second order: sum, mean, max, min and logsumexp rules are traceable; var, std and prod are "
        "differentiated through composites (prod as a pairwise product tree, exact at zeros like torch's "
        "double backward).",
    ),
    (
        ("argmax", "argmin"),
        "argmax / argmin return int64 indices of the first extremum, are not differentiable, and take "
        "dim=None (index into the flattened input) or an int.",
    ),
    (
        ("sum", "mean", "var", "std", "max", "min", "prod", "logsumexp"),
        "mean, var, std and logsumexp need a float tensor; sum, prod, max and min also take integer tensors "
        "(sum and prod of integers give int64, as in torch).",
    ),
)


# -- dims ------------------------------------------------------------------------------------------------------
def _axes(op: str, dim, ndim: int, keepdim):
    """numpy's ``axis`` for torch's ``dim``: None (every dim) or a sorted tuple of non-negative axes.
    Validates ``keepdim`` too. Ints and None take a fast path: this runs on every call."""
    _check_keepdim(op, keepdim)
    if dim is None:
        return None
    if type(dim) is int:
        if 0 <= dim < ndim:
            return (dim,)
        if -ndim <= dim < 0:
            return (dim + ndim,)
    if isinstance(dim, tuple | list):
        if len(dim) == 0:
            return None
        axes = [normalize_dim(op, d, ndim) for d in dim]
        if len(set(axes)) != len(axes):
            raise ValueError(f"{op}: argument 'dim' expected distinct dims, got {dim!r} (a dim appears twice)")
        return tuple(sorted(axes)) if ndim else ()
    if isinstance(dim, int | np.integer) and not isinstance(dim, bool):
        normalize_dim(op, dim, ndim)  # raises when out of range
        return (int(dim) % ndim,) if ndim else ()
    raise TypeError(f"{op}: argument 'dim' expected None, an int or a tuple of ints, got {type(dim).__name__} {dim!r}")


def _check_keepdim(op: str, keepdim) -> None:
    require_bool(op, "keepdim", keepdim)


def _count(shape: tuple, axes) -> int:
    """How many entries each output entry reduces."""
    if axes is None:
        return math.prod(shape)
    if len(axes) == 1:
        return shape[axes[0]]
    return math.prod(shape[a] for a in axes)


def _kept(g: np.ndarray, shape: tuple, axes, keepdim) -> np.ndarray:
    """``g`` (an output-shaped array) with the reduced dims back as size 1, so it broadcasts against the input."""
    if keepdim or axes is None:  # a full reduction without keepdim is 0-D: it broadcasts as it is
        return g
    if len(axes) == 1:
        a = axes[0]
        return g.reshape(shape[:a] + (1,) + shape[a + 1 :])  # Tensor.reshape takes a shape tuple too
    kept = list(shape)
    for a in axes:
        kept[a] = 1
    return g.reshape(tuple(kept))


def _kept_shape(shape: tuple, axes) -> tuple:
    """``shape`` with the reduced dims as size 1 (keepdim's output shape)."""
    return tuple(1 if axes is None or a in axes else n for a, n in enumerate(shape))


def _spread(g: np.ndarray, x: np.ndarray, axes, keepdim) -> np.ndarray:
    """``g`` copied to every input position it reduced (a fresh array: cheaper than np.broadcast_to)."""
    out = np.empty(x.shape, g.dtype)
    out[...] = _kept(g, x.shape, axes, keepdim)
    return out


def _empty_error(op, x, dim):
    return ValueError(f"{op}: argument 'x' of shape {x.shape} has no entries to reduce over dim={dim!r}")


def _torch_reduce(name):
    def ref(torch, x, dim=None, keepdim=False, **attrs):
        if dim is None:
            dim = tuple(range(x.ndim))
        if "dtype" in attrs:
            attrs["dtype"] = _torch_dtype(torch, attrs["dtype"])
        return getattr(torch, name)(x, dim=dim, keepdim=keepdim, **attrs)

    return ref


def _torch_moments(name):
    """torch.var / std / var_mean / std_mean in whichever spelling the call used (correction or unbiased), without
    their UserWarning when N - correction <= 0 (our NaN/inf is silent too)."""

    def run(torch, x, dim=None, correction=None, keepdim=False, unbiased=None):
        dim, correction = _moment_args(name, dim, correction, unbiased)
        if dim is None and x.ndim:
            dim = tuple(range(x.ndim))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*degrees of freedom", category=UserWarning)
            return getattr(torch, name)(x, dim, correction=correction, keepdim=keepdim)

    return run


def _cast_for(op: str, x, dtype):
    """torch's ``dtype=``: the input cast before the reduction (None: as it is)."""
    if dtype is None:
        return x
    try:
        target = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: argument 'dtype' expected None or a numpy dtype, got {dtype!r}") from None
    if target.kind not in "fiub":
        raise TypeError(f"{op}: argument 'dtype' expected a float, int or bool dtype, got {target}")
    return x.astype(target, copy=False)


def _as_dtype(x, dtype):
    """``x`` in ``dtype``: a copy on arrays, the cast op on Tensors (recorded)."""
    if x.dtype == np.dtype(dtype):
        return x
    return x.astype(dtype) if isinstance(x, np.ndarray) else cast(x, dtype)


def _grad_as(g, x):
    """A gradient computed in the reduction's dtype, back in the input's (recorded as a cast on Tensors)."""
    if g.dtype == x.dtype:
        return g
    return g.astype(x.dtype) if isinstance(g, np.ndarray) else cast(g, x.dtype)


def _plain(x):
    """The values of an array or a Tensor (for masks, not for arithmetic that must be recorded)."""
    return constant_values(x)


def _torch_dtype(torch, dtype):
    return None if dtype is None else getattr(torch, np.dtype(dtype).name)


def _with_a_0d_input(samples, **attrs):
    """``samples`` plus a 0-D input reduced over dim=0 (torch allows dims 0 and -1 there)."""

    def generate(rng):
        return samples(rng) + [Sample((uniform(rng, ()),), {"dim": 0, "keepdim": False, **attrs}, "0-D")]

    return generate


def _reduction(name, forward, vjp, samples=None, torch_ref=None, **declaration):
    return one_input_op(
        name,
        "reduce",
        forward,
        vjp,
        input_name="x",
        samples=samples or _with_a_0d_input(reduction_samples()),
        torch_ref=torch_ref or _torch_reduce(name),
        **declaration,
    )


def _int64_for_unsigned(x):
    """torch sums and multiplies every integer dtype in int64; numpy takes uint64 for unsigned ones."""
    return np.int64 if x.dtype.kind == "u" else None


# -- sum, mean -------------------------------------------------------------------------------------------------
@quiet  # inf - inf, overflow: torch's NaN/inf
def _sum(x, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        x = _cast_for("sum", x, dtype)
    return np.add.reduce(x, axis=_axes("sum", dim, x.ndim, keepdim), keepdims=keepdim, dtype=_int64_for_unsigned(x))


def _sum_vjp(g, ans, x, dim=None, keepdim=False, *, dtype=None):
    axes = _axes("sum", dim, x.ndim, keepdim)
    if dtype is not None:
        g = _grad_as(g, x)
    if isinstance(g, np.ndarray):
        return _spread(g, x, axes, keepdim)
    return np.broadcast_to(_kept(g, x.shape, axes, keepdim), x.shape)  # Tensors (second order): expand


def _with_dtype_samples(samples, integers=True):
    """``samples`` plus torch's ``dtype=``: the input cast before reducing (an int64 input to float64 too)."""

    def generate(rng):
        out = samples(rng) + [
            Sample((uniform(rng, (2, 3)),), {"dim": 1, "keepdim": False, "dtype": np.float64}, "dtype=float64"),
            Sample((uniform(rng, (2, 3)),), {"dim": None, "keepdim": True, "dtype": "float64"}, "dtype by name"),
        ]
        if integers:
            ints = rng.integers(-3, 4, (2, 3))
            out.append(Sample((ints,), {"dim": 0, "keepdim": False, "dtype": np.float64}, "int64 to float64"))
        return out

    return generate


sum = _reduction(
    "sum",
    _sum,
    _sum_vjp,
    samples=_with_dtype_samples(_with_a_0d_input(reduction_samples())),
    method=True,
    numpy={np.sum: _numpy.sum_like("sum", "sum")},
    notes=case_law(_CASE_LAW, "sum"),
    doc="The sum of input's entries over ``dim`` (all of them when None); integers and bools sum as int64.",
)


@quiet  # also 0 / 0 over no entries: NaN, as in torch
def _mean(x, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        x = _cast_for("mean", x, dtype)
    require_float("mean", "x", x)
    axes = _axes("mean", dim, x.ndim, keepdim)
    return np.add.reduce(x, axis=axes, keepdims=keepdim) / _count(x.shape, axes)


def _mean_vjp(g, ans, x, dim=None, keepdim=False, *, dtype=None):
    axes = _axes("mean", dim, x.ndim, keepdim)
    if dtype is not None:
        g = _grad_as(g, x)
    n = _count(x.shape, axes)
    if n == 0:  # nothing was averaged: x has a zero-size dim, so its gradient is empty (and g / 0 never runs)
        return np.zeros(x.shape, g.dtype)
    if isinstance(g, np.ndarray):
        out = np.empty(x.shape, g.dtype)
        np.divide(_kept(g, x.shape, axes, keepdim), n, out=out)
        return out
    return np.broadcast_to(_kept(g, x.shape, axes, keepdim) / n, x.shape)  # Tensors (second order)


mean = _reduction(
    "mean",
    _mean,
    _mean_vjp,
    samples=_with_dtype_samples(_with_a_0d_input(reduction_samples())),
    method=True,
    numpy={np.mean: _numpy.mean},
    notes=case_law(_CASE_LAW, "mean"),
    doc="The mean of input's entries over ``dim`` (all of them when None), for floating input.",
)


# -- var, std: the forward saves the mean for the backward -----------------------------------------------------
def _moment_args(op, dim, correction, unbiased):
    """(dim, correction) from torch's spellings: ``correction`` (None: 1, Bessel's) or ``unbiased`` (True: 1, False:
    0); a bool where torch's other overload has ``unbiased`` positionally -- var(x, dim, unbiased) or var(x,
    unbiased) -- is that flag."""
    if isinstance(dim, bool | np.bool_):  # torch.var(x, unbiased)
        dim, unbiased = None, _flag_once(op, unbiased, dim)
    if isinstance(correction, bool | np.bool_):  # torch.var(x, dim, unbiased)
        correction, unbiased = None, _flag_once(op, unbiased, correction)
    if unbiased is not None:
        require_bool(op, "unbiased", unbiased)
        if correction is not None:
            raise TypeError(
                f"{op}: pass either 'correction' or 'unbiased', not both (got {correction!r}, {unbiased!r})"
            )
        return dim, 1 if unbiased else 0
    return dim, 1 if correction is None else correction


def _flag_once(op, unbiased, flag):
    if unbiased is not None:
        raise TypeError(f"{op}: argument 'unbiased' given twice (positionally as {flag!r} and by keyword)")
    return flag


def _dims_and_dof(op, x, dim, correction, keepdim, unbiased=None):
    """(axes, N, degrees of freedom N - correction), validating the arguments."""
    require_float(op, "x", x)
    dim, correction = _moment_args(op, dim, correction, unbiased)
    real(op, "correction", correction, "a number")  # any real, as torch's (a negative one divides by N + |c|)
    if correction != correction:
        raise ValueError(f"{op}: argument 'correction' expected a number, got nan")
    axes = _axes(op, dim, x.ndim, keepdim)
    n = _count(x.shape, axes)
    return axes, n, n - correction


def _variance(op, x, dim, correction, keepdim, unbiased=None):
    """(variance, mean with the reduced dims kept)."""
    axes, n, dof = _dims_and_dof(op, x, dim, correction, keepdim, unbiased)
    mean = np.add.reduce(x, axis=axes, keepdims=True) / n
    if np.count_nonzero(np.isfinite(mean)) != mean.size:  # the sum overflowed (or x holds inf/NaN): sum x / n
        mean = np.add.reduce(x / n, axis=axes, keepdims=True)  # (torch's running mean never overflows)
    centered = x - mean
    squares = np.add.reduce(centered * centered, axis=axes, keepdims=keepdim)
    return squares / (dof if dof > 0 else 0.0), mean  # torch: divide by max(0, N - correction)


@quiet
def _var(x, dim=None, correction=None, keepdim=False, *, unbiased=None):
    variance, mean = _variance("var", x, dim, correction, keepdim, unbiased)
    return variance, {"mean": mean}


@quiet
def _var_vjp(g, ans, x, dim=None, correction=None, keepdim=False, *, unbiased=None, mean=None):
    axes, _, dof = _dims_and_dof("var", x, dim, correction, keepdim, unbiased)
    return _kept(g, x.shape, axes, keepdim) * (x - mean) * (2 / dof if dof > 0 else math.inf)


@quiet
def _std(x, dim=None, correction=None, keepdim=False, *, unbiased=None):
    variance, mean = _variance("std", x, dim, correction, keepdim, unbiased)
    return np.sqrt(variance), {"mean": mean}


@quiet
def _std_vjp(g, ans, x, dim=None, correction=None, keepdim=False, *, unbiased=None, mean=None):
    axes, _, dof = _dims_and_dof("std", x, dim, correction, keepdim, unbiased)
    std_kept = _kept(ans, x.shape, axes, keepdim)
    nonzero_std = np.where(std_kept == 0, np.inf, std_kept)  # torch: gradient 0 where std == 0
    return _kept(g, x.shape, axes, keepdim) / nonzero_std * (x - mean) * (1 / dof if dof > 0 else math.inf)


def _var_composite(x, dim=None, correction=None, keepdim=False, *, unbiased=None):
    """var with registered ops, for the second order (the first-order rule uses the mean the forward saved)."""
    axes, _, dof = _dims_and_dof("var", x, dim, correction, keepdim, unbiased)
    dim = None if axes is None else axes
    centered = x - mean(x, dim=dim, keepdim=True)
    # scaled before the sum, as torch's backward does: with no entries the cotangent's gradient is then an empty
    # sum (0), not 0 * inf
    return sum(centered * centered * (1 / dof if dof > 0 else math.inf), dim=dim, keepdim=keepdim)


def _std_composite(x, dim=None, correction=None, keepdim=False, *, unbiased=None):
    """sqrt(var), with torch's zero gradient where std is 0: sqrt only sees nonzero variances (the inner where),
    so no inf * 0 reaches the second order."""
    variance = _var_composite(x, dim, correction, keepdim, unbiased=unbiased)
    zero = variance == 0
    return np.where(zero, 0, np.sqrt(np.where(zero, 1, variance)))


def _correction_samples(zero_spread):
    def generate(rng):
        out = reduction_samples(empty_dims=zero_spread)(rng)  # correction left at its default, 1
        for correction in (0, 2, 0.5):
            out.append(
                Sample(
                    (uniform(rng, (2, 3, 4)),),
                    {"dim": -1, "keepdim": False, "correction": correction},
                    f"dim=-1 correction={correction}",
                )
            )
        out.append(Sample((uniform(rng, (3, 4)),), {"dim": None, "keepdim": True, "correction": 0}, "correction=0 all"))
        out.append(Sample((uniform(rng, (3, 4)),), {"dim": 1, "unbiased": False}, "unbiased=False"))
        out.append(Sample((uniform(rng, (3, 4)),), {"dim": (0, 1), "unbiased": True, "keepdim": True}, "unbiased=True"))
        out.append(Sample((uniform(rng, (3, 4)),), {"dim": 0, "correction": False}, "positional unbiased=False"))
        out.append(Sample((uniform(rng, (3, 4)),), {"dim": None, "correction": None}, "correction=None"))
        if zero_spread:  # inputs whose variance is 0 (and above: over no entries, NaN)
            out.append(Sample((np.full((2, 3), 0.75),), {"dim": 1, "keepdim": False}, "constant rows (var 0)"))
            out.append(Sample((uniform(rng, ()),), {"dim": -1, "keepdim": True, "correction": 0}, "0-D"))
        return out

    return generate


def _moment(name, forward, vjp, composite, zero_spread, *, doc=""):
    """var or std, a Tensor method and ``np.<name>``: the forward saves the mean for its rule; the composite serves
    the second order."""
    return _reduction(
        name,
        forward,
        vjp,
        samples=_correction_samples(zero_spread),
        returns_aux=True,
        composite=composite,
        torch_ref=_torch_moments(name),
        method=True,
        numpy={getattr(np, name): _numpy.moments(name)},
        notes=case_law(_CASE_LAW, name),
        doc=doc,
    )


var = _moment(
    "var",
    _var,
    _var_vjp,
    _var_composite,
    True,
    doc="The variance over ``dim`` (all entries when None), dividing by N - correction (correction 1 by default).",
)
# std is not differentiable where it is 0 (a cone's tip): finite differences cannot check a gradient there, and
# torch's double backward gives NaN for the cotangent there and over no entries (where the exact value is 0).
# tests/ops/test_reduce.py checks those cases instead (constant rows, a 0-D input, an empty dim).
std = _moment(
    "std",
    _std,
    _std_vjp,
    _std_composite,
    False,
    doc="The standard deviation over ``dim`` (all entries when None): the square root of var with the same correction.",
)


# -- max, min: ties share the gradient evenly ------------------------------------------------------------------
def _extremum(name, ufunc, nan_shares=False) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """amax/amin (and max/min without a dim): ties share the gradient. A NaN extremum gives NaN gradients to its
    slice (torch.amax's), or with ``nan_shares`` the NaN entries share it (torch.max()'s)."""

    def forward(x, dim=None, keepdim=False):
        axes = _axes(name, dim, x.ndim, keepdim)
        try:
            return ufunc.reduce(x, axis=axes, keepdims=keepdim)
        except ValueError:
            raise _empty_error(name, x, dim) from None

    def vjp(g, ans, x, dim=None, keepdim=False):
        axes = _axes(name, dim, x.ndim, keepdim)
        ans_kept = _kept(ans, x.shape, axes, keepdim)
        hits = x == ans_kept
        g_kept = _kept(g, x.shape, axes, keepdim)
        if np.count_nonzero(hits) == np.size(ans) and np.count_nonzero(ans == ans) == np.size(ans):
            return hits * g_kept  # no NaN and one hit per slice: no ties to share
        if nan_shares:
            hits = np.logical_or(hits, np.logical_and(np.isnan(x), np.isnan(ans_kept)))
        ties = np.add.reduce(hits, axis=axes, keepdims=True, dtype=g.dtype)
        return hits * (g_kept / ties)

    forward.__name__, vjp.__name__ = f"_{name}", f"_{name}_vjp"
    return forward, quiet(vjp)  # a NaN slice has no hits: 0 * (g / 0) gives its NaN gradients


_EXTREMUM_SAMPLES = _with_a_0d_input(reduction_samples(empty_dims=False))  # no extremum of no entries


# -- max_dim, min_dim: torch.max(input, dim) / torch.min(input, dim) -------------------------------------------
def _extremum_dim(name, find) -> Callable[..., Any]:
    def forward(input, dim, keepdim=False):
        axis = normalize_dim(name, dim, input.ndim)
        _check_keepdim(name, keepdim)
        if input.ndim == 0:  # one entry, at index 0 along dim 0 / -1 (as torch)
            return input.copy(), np.zeros((), np.int64)
        if input.shape[axis] == 0:
            raise ValueError(f"{name}: argument 'input' of shape {input.shape} has no entries to reduce over dim={dim}")
        indices = np.expand_dims(find(input, axis=axis), axis).astype(np.int64, copy=False)  # the first extremum
        values = np.take_along_axis(input, indices, axis)
        if not keepdim:
            values, indices = np.squeeze(values, axis), np.squeeze(indices, axis)
        return values, indices

    forward.__name__ = f"_{name}"
    return forward


def _extremum_dim_samples(rng):
    """Distinct floats (a tie has no derivative: finite differences cannot check one); ties in integer samples,
    whose indices are compared with torch's; NaN (its first occurrence wins, as in torch)."""
    ties = np.array([[3, 1, 3, 3], [0, 2, 2, -1], [-4, 1, 0, -4]])
    return [
        Sample((uniform(rng, (5,)),), {"dim": 0}, "vector"),
        Sample((uniform(rng, (3, 4)),), {"dim": 1}, "matrix dim=1"),
        Sample((uniform(rng, (3, 4)),), {"dim": 0, "keepdim": True}, "matrix dim=0 keepdim"),
        Sample((transposed(rng, (2, 4, 3)),), {"dim": -2}, "non-contiguous dim=-2"),
        Sample((np.array([[2.0, np.nan, 1.0, np.nan], [0.5, -1.0, 4.0, 2.5]]),), {"dim": 1}, "NaN: the first one"),
        Sample((ties,), {"dim": 1}, "int64 ties: the first index"),
        Sample((ties.T.copy(),), {"dim": 0, "keepdim": True}, "int64 ties dim=0 keepdim"),
        Sample((np.array([[False, True, True], [False, False, False]]),), {"dim": 1}, "bool"),
        Sample((uniform(rng, (3, 1)),), {"dim": 1}, "size-1 dim"),
        Sample((uniform(rng, ()),), {"dim": -1, "keepdim": True}, "0-D"),
        Sample((uniform(rng, (0, 3)),), {"dim": 1}, "zero-size other dim"),
    ]


def _max_min(name, ufunc, find, pair, **declaration):
    """torch.max / torch.min: without ``dim`` the extremum of every entry (ties share the gradient, as torch's);
    with ``dim`` the named (values, indices) of the first extremum along it (the whole gradient to that index);
    with a tensor ``other`` -- positionally where dim goes, torch.max(input, other) -- the elementwise ``pair``
    (ops.maximum / ops.minimum, its rules: ties split evenly)."""
    whole, whole_vjp = _extremum(name, ufunc, nan_shares=True)
    along, along_vjp = _extremum_dim(name, find), _scattered_back(name)

    def forward(input, dim=None, keepdim=False, *, other=None):
        if other is not None:
            if dim is not None or keepdim:
                raise TypeError(f"{name}: a tensor 'other' (torch.{name}(input, other)) takes no dim or keepdim")
            broadcast_or_fail(
                name,
                "other",
                (input.shape, other.shape),
                f"a shape broadcastable with input's {input.shape}",
                other.shape,
            )
            return pair.forward(input, other)
        if dim is None:
            if keepdim:
                raise TypeError(f"{name}: argument 'keepdim' needs a dim (torch.{name} takes it only with one)")
            return whole(input)
        return along(input, dim, keepdim)

    def vjp(g, ans, input, other, dim=None, keepdim=False):
        if other is not None:
            return pair.vjps[0](g, ans, input, other)
        return whole_vjp(g, ans, input) if dim is None else along_vjp(g, ans, input, dim=dim, keepdim=keepdim)

    def vjp_other(g, ans, input, other, dim=None, keepdim=False):
        return pair.vjps[1](g, ans, input, other)

    def samples(rng):
        wholes = [Sample(s.inputs, {}, s.label) for s in _EXTREMUM_SAMPLES(rng) if s.attrs["dim"] in (None, ())]
        ones = wholes[:2] + _extremum_dim_samples(rng)
        pairs = [Sample(s.inputs, {}, f"other: {s.label}") for s in pair.samples(rng)]
        return [Sample((s.inputs[0], None), s.attrs, s.label, s.torch) for s in ones] + pairs

    def torch_ref(torch, input, other=None, dim=None, keepdim=False):
        if other is not None:
            return getattr(torch, name)(input, other)
        return getattr(torch, name)(input) if dim is None else getattr(torch, name)(input, dim, keepdim)

    forward.__name__, vjp.__name__, vjp_other.__name__ = f"_{name}", f"_{name}_vjp", f"_{name}_vjp_other"
    return defop(
        name,
        family="reduce",
        inputs=("input", "other?"),
        forward=forward,
        vjps=(vjp, vjp_other),
        outputs=("values", "indices"),
        samples=samples,
        torch_ref=torch_ref,
        retargets={"dim": "other"},
        **declaration,
    )


max = _max_min(
    "max",
    np.maximum,
    np.argmax,
    maximum,
    notes=case_law(_CASE_LAW, "max"),
    doc="The largest entry; with ``dim``, (values, indices) along it; with a tensor ``other``, elementwise maximum.",
)
min = _max_min(
    "min",
    np.minimum,
    np.argmin,
    minimum,
    notes=case_law(_CASE_LAW, "min"),
    doc="The smallest entry; with ``dim``, (values, indices) along it; with a tensor ``other``, elementwise minimum.",
)


# -- prod ------------------------------------------------------------------------------------------------------
@quiet  # overflow, 0 * inf
def _prod(x, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        x = _cast_for("prod", x, dtype)
    return np.multiply.reduce(
        x, axis=_axes("prod", dim, x.ndim, keepdim), keepdims=keepdim, dtype=_int64_for_unsigned(x)
    )


def _moved_last(x: np.ndarray, axes) -> tuple[np.ndarray, tuple, tuple]:
    """``x`` with the reduced axes moved last and flattened into one, (that array, the permutation, the
    permuted shape)."""
    reduced = tuple(range(x.ndim)) if axes is None else axes
    order = tuple(a for a in range(x.ndim) if a not in reduced) + reduced
    shape = tuple(x.shape[a] for a in order)
    return np.transpose(x, order).reshape(shape[: x.ndim - len(reduced)] + (-1,)), order, shape


def _others_product(x: np.ndarray, axes) -> np.ndarray:
    """For every entry, the product of the other entries of its slice: exclusive cumulative products from
    both ends (torch's way when there are zeros), exact for any number of zeros, infs or an under/overflowing
    total."""
    flat, order, shape = _moved_last(x, axes)
    before = np.ones_like(flat)
    after = np.ones_like(flat)
    np.cumprod(flat[..., :-1], axis=-1, out=before[..., 1:])
    np.cumprod(flat[..., :0:-1], axis=-1, out=after[..., -2::-1])
    return np.transpose((before * after).reshape(shape), np.argsort(order))


@quiet
def _prod_vjp(g, ans, x, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None and np.dtype(dtype) != x.dtype:  # the rule in the reduction's dtype, cast back
        return _grad_as(_prod_vjp(g, ans, _as_dtype(x, dtype), dim, keepdim), x)
    axes = _axes("prod", dim, x.ndim, keepdim)
    g_kept = _kept(g, x.shape, axes, keepdim)
    if np.count_nonzero(ans) == np.size(ans) and np.count_nonzero(np.isfinite(ans)) == np.size(ans):
        # a finite nonzero product: no zero, inf or NaN entry, and dividing it by an entry is exact to rounding
        return g_kept * (_kept(ans, x.shape, axes, keepdim) / x)
    # a slice with two or more zeros has product 0 whichever entry moves: gradient 0 (torch's, also next to an
    # inf, where the product of the others would be 0 * inf)
    several_zeros = np.add.reduce(x == 0, axis=axes, keepdims=True) > 1
    return g_kept * np.where(several_zeros, 0, _others_product(x, axes))


def _torch_prod(torch, x, dim=None, keepdim=False, dtype=None):
    """torch.prod takes one int dim: reduce a tuple one dim at a time."""
    if dtype is not None:
        x = x.to(_torch_dtype(torch, dtype))
    if dim is None or dim == ():
        out = torch.prod(x)
        return out.reshape((1,) * x.ndim) if keepdim else out
    dims = sorted({d % (x.ndim or 1) for d in (dim if isinstance(dim, tuple | list) else (dim,))}, reverse=True)
    for d in dims:
        x = torch.prod(x, dim=d, keepdim=keepdim)
    return x


def _prod_samples(rng):
    out = reduction_samples(0.5, 1.5)(rng)
    x = uniform(rng, (3, 4), 0.5, 1.5) * rng.choice([-1.0, 1.0], size=(3, 4))
    x[0, 1] = 0.0  # row 0 (and column 1) has one zero
    x[1, 0] = x[1, 2] = 0.0  # row 1 has two zeros
    for dim in (None, 1, 0, -1):
        out.append(Sample((x.copy(),), {"dim": dim, "keepdim": dim == 0}, f"zeros dim={dim}"))
    out.append(Sample((np.array([0.0, 1.5, -0.75]),), {"dim": None, "keepdim": False}, "one zero"))
    out.append(Sample((np.array([0.0, 1.5, 0.0]),), {"dim": None, "keepdim": False}, "two zeros"))
    out.append(Sample((np.array(0.0),), {"dim": -1, "keepdim": True}, "0-D zero"))
    return out


def _prod_composite(x, dim=None, keepdim=False, *, dtype=None):
    """prod with registered ops, for the second order: the reduced dims flattened into one last axis, then
    multiplied pairwise (log2(n) rounds of getitem and mul). Exact at zeros, in every order, like torch's
    double backward (which multiplies exclusive cumulative products)."""
    if dtype is not None:
        x = _as_dtype(x, dtype)
    axes = _axes("prod", dim, x.ndim, keepdim)
    reduced = tuple(range(x.ndim)) if axes is None else axes
    kept = tuple(a for a in range(x.ndim) if a not in reduced)
    lead = tuple(x.shape[a] for a in kept)
    n = _count(x.shape, axes)
    flat = np.reshape(np.transpose(x, kept + reduced), lead + (n,))
    if n == 0:
        out = sum(flat, dim=-1) + 1  # the empty product (recorded, as the pass expects; x has no entries anyway)
    else:
        leftover = None  # the product of the entries an odd length left out of the pairs
        while n > 1:
            if n % 2:
                last = flat[..., n - 1]
                leftover = last if leftover is None else leftover * last
                flat = flat[..., : n - 1]
                n -= 1
            pairs = np.reshape(flat, lead + (n // 2, 2))
            flat = pairs[..., 0] * pairs[..., 1]
            n //= 2
        out = flat[..., 0] if leftover is None else flat[..., 0] * leftover
    return np.reshape(out, _kept_shape(x.shape, axes)) if keepdim else out


prod = _reduction(
    "prod",
    _prod,
    _prod_vjp,
    samples=_with_dtype_samples(_prod_samples),
    torch_ref=_torch_prod,
    composite=_prod_composite,
    method=True,
    numpy={np.prod: _numpy.sum_like("prod", "prod")},
    notes=case_law(_CASE_LAW, "prod"),
    doc="The product of input's entries over ``dim`` (all of them when None).",
)


# -- logsumexp -------------------------------------------------------------------------------------------------
def _shifted_logsumexp(x, shift, axes, keepdim):
    total = np.add.reduce(np.exp(x - shift), axis=axes, keepdims=keepdim)
    return np.log(total) + shift.reshape(np.shape(total))


@quiet  # x - shift may overflow to -inf (then exp gives 0)
def _logsumexp(x, dim=None, keepdim=False):
    require_float("logsumexp", "x", x)
    axes = _axes("logsumexp", dim, x.ndim, keepdim)
    if x.size == 0 and _count(x.shape, axes) == 0:  # log(sum of no exps) = log(0), as in torch
        return np.add.reduce(x, axis=axes, keepdims=keepdim) - np.inf
    shift = np.maximum.reduce(x, axis=axes, keepdims=True)
    if np.count_nonzero(np.isfinite(shift)) == shift.size:
        return _shifted_logsumexp(x, shift, axes, keepdim)
    # an infinite or NaN max: shift by 0 there, so all -inf gives -inf, +inf gives inf and NaN stays NaN
    return _shifted_logsumexp(x, np.where(np.isfinite(shift), shift, 0), axes, keepdim)


@quiet  # inf - inf: NaN, as in torch
def _logsumexp_vjp(g, ans, x, dim=None, keepdim=False):
    axes = _axes("logsumexp", dim, x.ndim, keepdim)
    return _kept(g, x.shape, axes, keepdim) * np.exp(x - _kept(ans, x.shape, axes, keepdim))  # softmax


def _logsumexp_samples(rng):
    out = _with_a_0d_input(reduction_samples())(rng)
    out.append(Sample((uniform(rng, (3, 4)) + 100.0,), {"dim": -1, "keepdim": False}, "shifted by 100"))
    out.append(Sample((uniform(rng, (3, 4)) * 20.0,), {"dim": 0, "keepdim": True}, "spread +-40"))
    return out


logsumexp = _reduction(
    "logsumexp",
    _logsumexp,
    _logsumexp_vjp,
    samples=_logsumexp_samples,
    method=True,
    notes=case_law(_CASE_LAW, "logsumexp"),
    doc="log(sum(exp(x))) over ``dim`` (all entries when None), computed without overflow.",
)


# -- argmax, argmin --------------------------------------------------------------------------------------------
def _index_of(name, fn):
    def forward(x, dim=None, keepdim=False):
        _check_keepdim(name, keepdim)
        axis = None
        if dim is not None:
            if isinstance(dim, tuple | list):
                raise TypeError(f"{name}: argument 'dim' expected None or an int, got {type(dim).__name__} {dim!r}")
            axis = normalize_dim(name, dim, x.ndim)
            if x.ndim == 0:
                return np.zeros((), np.int64)
        try:
            return np.asarray(fn(x, axis=axis, keepdims=bool(keepdim))).astype(np.int64, copy=False)
        except ValueError:
            raise _empty_error(name, x, dim) from None

    forward.__name__ = f"_{name}"
    return forward


def _index_reduction(name, fn, **declaration):
    """argmax or argmin: int64 indices, not differentiable."""
    return _reduction(
        name,
        _index_of(name, fn),
        NOT_DIFFERENTIABLE,
        samples=index_reduction_samples(),
        torch_ref=lambda torch, x, dim=None, keepdim=False: getattr(torch, name)(x, dim=dim, keepdim=keepdim),
        **declaration,
    )


argmax = _index_reduction(
    "argmax",
    np.argmax,
    method=True,
    notes=case_law(_CASE_LAW, "argmax"),
    doc="The index of the largest entry (the first one on ties): along ``dim``, or into the flattened input.",
)
argmin = _index_reduction(
    "argmin",
    np.argmin,
    method=True,
    notes=case_law(_CASE_LAW, "argmin"),
    doc="The index of the smallest entry (the first one on ties): along ``dim``, or into the flattened input.",
)


# == amax / amin, norms, any / all / count_nonzero: torch's own parameter names ===============================
def _on_input(name, forward, vjp, samples, torch_ref, **declaration):
    """Declare a reduction whose tensor parameter is torch's ``input``."""
    return one_input_op(name, "reduce", forward, vjp, samples=samples, torch_ref=torch_ref, **declaration)


def _amax_amin(name, ufunc) -> tuple[Callable[..., Any], Callable[..., Any]]:
    forward, vjp = _extremum(name, ufunc)

    def run(input, dim=(), keepdim=False):
        return forward(input, dim, keepdim)

    def rule(g, ans, input, dim=(), keepdim=False):
        return vjp(g, ans, input, dim, keepdim)

    run.__name__, rule.__name__ = f"_{name}", f"_{name}_vjp"
    return run, rule


def _torch_amax_amin(name):
    return lambda torch, input, dim=(), keepdim=False: getattr(torch, name)(input, dim=dim, keepdim=keepdim)


def _amax_samples(rng):
    # ties are not differentiable (finite differences cannot check them): tests/ops/test_reduce.py compares them
    # with torch instead
    return _EXTREMUM_SAMPLES(rng) + [Sample((uniform(rng, (2, 3, 4)),), {"dim": (), "keepdim": True}, "dim=()")]


def _amax_amin_op(name: str, ufunc, numpy_names: tuple, *, doc=""):
    return _on_input(
        name,
        *_amax_amin(name, ufunc),
        _amax_samples,
        _torch_amax_amin(name),
        method=True,
        numpy={getattr(np, n): _numpy.max_like(name, n) for n in numpy_names},
        notes=case_law(_CASE_LAW, name),
        doc=doc,
    )


amax = _amax_amin_op(
    "amax",
    np.maximum,
    ("max", "amax"),
    doc="The largest entry over ``dim`` (all dims when empty); ties share the gradient evenly.",
)
amin = _amax_amin_op(
    "amin",
    np.minimum,
    ("min", "amin"),
    doc="The smallest entry over ``dim`` (all dims when empty); ties share the gradient evenly.",
)


# -- vector_norm, norm -----------------------------------------------------------------------------------------
def _order(op, ord):
    ord = real(op, "ord", ord, "a number (any p, inf or -inf)")
    if math.isnan(ord):
        raise ValueError(f"{op}: argument 'ord' expected a number, got NaN")
    return ord


@quiet  # overflow of x^p gives inf, as torch (which does not rescale either)
def _norm_of(op, x, ord, dim, keepdim):
    require_float(op, "x", x)
    ord = _order(op, ord)
    axes = _axes(op, dim, x.ndim, keepdim)
    magnitude = np.abs(x)
    if math.isinf(ord) or ord < 0:
        if _count(x.shape, axes) == 0:
            raise ValueError(
                f"{op}: cannot compute the {ord} norm of argument of shape {x.shape} over "
                f"dim={dim!r}: no entries, and the operation has no identity (as torch)"
            )
    if math.isinf(ord):
        return (np.maximum if ord > 0 else np.minimum).reduce(magnitude, axis=axes, keepdims=keepdim)
    if ord == 0:
        return np.add.reduce(x != 0, axis=axes, keepdims=keepdim, dtype=x.dtype)
    if ord == 1:
        return np.add.reduce(magnitude, axis=axes, keepdims=keepdim)
    if ord == 2:
        return np.sqrt(np.add.reduce(magnitude * magnitude, axis=axes, keepdims=keepdim))
    return np.power(np.add.reduce(np.power(magnitude, ord), axis=axes, keepdims=keepdim), 1 / ord)


@quiet
def _norm_vjp_of(op, g, ans, x, ord, dim, keepdim):
    ord = float(ord)
    axes = _axes(op, dim, x.ndim, keepdim)
    g_kept = _kept(g, x.shape, axes, keepdim)
    if ord == 0:
        return np.zeros(x.shape, g.dtype)  # a count: gradient 0, as torch
    if ord == 1:
        return g_kept * np.sign(x)  # 0 at 0, as torch's sgn
    norm = _kept(ans, x.shape, axes, keepdim)
    if math.isinf(ord):  # the entries of extreme magnitude share the gradient evenly, with their sign
        hits = np.abs(x) == norm
        ties = np.add.reduce(hits, axis=axes, keepdims=True, dtype=g.dtype)
        return np.sign(x) * hits * (g_kept / ties)
    zero = norm == 0  # torch: gradient 0 where the norm is 0 (its subgradient for p = 2)
    safe = np.where(zero, 1, norm)
    if ord == 2:
        return np.where(zero, 0, x * (g_kept / safe))
    # d/dx ||x||_p = sign(x) |x|^(p-1) / ||x||^(p-1); 0 at x = 0 (for p < 1 too, as torch)
    magnitude = np.abs(x)
    nonzero = magnitude != 0
    powered = np.where(nonzero, np.power(np.where(nonzero, magnitude, 1), ord - 1), 0)
    return np.where(zero, 0, np.sign(x) * powered * (g_kept / np.power(safe, ord - 1)))


def _vector_norm(x, ord=2, dim=None, keepdim=False):
    return _norm_of("vector_norm", x, ord, dim, keepdim)


def _vector_norm_vjp(g, ans, x, ord=2, dim=None, keepdim=False):
    return _norm_vjp_of("vector_norm", g, ans, x, ord, dim, keepdim)


def _norm_samples(attrs_list, full_key):
    """Every ord on the default reduction samples (no empty dims for +-inf), ties for +-inf, zeros for 1 / p."""

    def generate(rng):
        out = []
        for attrs in attrs_list:
            p = attrs[full_key]
            finite = isinstance(p, str) or (p >= 0 and not math.isinf(p))  # no identity: no empty reductions
            base = reduction_samples(0.2, 2.0, empty_dims=finite)(rng)
            for s in base:
                x = s.inputs[0] * np.where(uniform(rng, s.inputs[0].shape) < 0, -1.0, 1.0)  # both signs, off 0
                out.append(Sample((x,), {**s.attrs, **attrs}, f"{attrs} {s.label}"))
        return out

    return generate


_VECTOR_ORDS = [
    {"ord": 2},
    {"ord": 1},
    {"ord": math.inf},
    {"ord": -math.inf},
    {"ord": 3},
    {"ord": 0.5},
    {"ord": 0},
    {"ord": -1},
    {"ord": -2.5},
]


def _vector_norm_samples(rng):
    # torch's double backward of a general p-norm over no entries gives the cotangent a NaN gradient where the
    # exact one (an empty sum) is 0, which minitape gives: no torch comparison there
    return [
        Sample(s.inputs, s.attrs, s.label, torch=not (s.attrs["ord"] == 3 and s.inputs[0].size == 0))
        for s in _norm_samples(_VECTOR_ORDS, "ord")(rng)
    ]


def _torch_vector_norm(torch, x, ord=2, dim=None, keepdim=False):
    return torch.linalg.vector_norm(x, ord=ord, dim=dim, keepdim=keepdim)


vector_norm = _on_input(
    "vector_norm",
    _vector_norm,
    _vector_norm_vjp,
    _vector_norm_samples,
    _torch_vector_norm,
    input_name="x",
    doc="The ord-norm of input's entries over ``dim`` (all of them, as one vector, when None).",
)


def _p_of(p):
    """torch.norm's p as vector_norm's ord: 'fro' is the 2-norm over the given dims (torch: at most 2 of them)."""
    if isinstance(p, str) and p == "fro":
        return 2.0
    if isinstance(p, str):
        raise NotImplementedError(
            f"norm: argument 'p' is {p!r}; minitape supports 'fro' and numbers (for the nuclear norm use svd)"
        )
    return real("norm", "p", p, "'fro' or a number")


def _norm(input, p="fro", dim=None, keepdim=False):
    ord = _p_of(p)
    if p == "fro" and isinstance(dim, tuple | list) and len(dim) > 2:
        raise ValueError(f"norm: p='fro' takes at most 2 dims (torch's matrix norm), got dim={dim!r}")
    return _norm_of("norm", input, ord, dim, keepdim)


def _norm_vjp(g, ans, input, p="fro", dim=None, keepdim=False):
    return _norm_vjp_of("norm", g, ans, input, _p_of(p), dim, keepdim)


def _norm_op_samples(rng):
    out = [
        s
        for s in _norm_samples([{"p": "fro"}, {"p": 1}, {"p": 2}, {"p": math.inf}, {"p": -1.5}], "p")(rng)
        if not (s.attrs["p"] == "fro" and isinstance(s.attrs["dim"], tuple) and len(s.attrs["dim"]) > 2)
    ]
    return out


norm = _on_input(
    "norm",
    _norm,
    _norm_vjp,
    _norm_op_samples,
    lambda torch, input, p="fro", dim=None, keepdim=False: torch.norm(input, p=p, dim=dim, keepdim=keepdim),
    method=True,
    doc="The p-norm of input over ``dim`` ('fro': the 2-norm of the entries), as torch.norm.",
)


# -- any, all, count_nonzero: not differentiable ---------------------------------------------------------------
def _truth_samples(rng):
    out = _with_a_0d_input(reduction_samples())(rng)
    x = np.array([[0.0, 0.0, 1.5], [0.0, -0.0, 0.0], [np.nan, 2.0, -1.0]])
    out += [Sample((x,), {"dim": d, "keepdim": False}, f"zeros dim={d}") for d in (0, 1, None)]
    out.append(Sample((x != 0,), {"dim": 1, "keepdim": True}, "bools"))
    out.append(Sample((np.array([[0, 3], [0, 0]]),), {"dim": 0, "keepdim": False}, "integers"))
    return out


def _truth_reduction(name, ufunc, *, doc=""):
    """Declare any or all: ``ufunc`` reduces the truth (non-zero) of the entries over ``dim`` (None: all of them)."""

    def forward(input, dim=None, keepdim=False):
        return ufunc.reduce(input != 0, axis=_axes(name, dim, input.ndim, keepdim), keepdims=keepdim)

    def ref(torch, input, dim=None, keepdim=False):
        if dim is None or dim == ():
            out = getattr(torch, name)(input)
            return out.reshape((1,) * input.ndim) if keepdim else out
        return getattr(torch, name)(input, dim=dim, keepdim=keepdim)

    forward.__name__ = f"_{name}"
    return _on_input(name, forward, NOT_DIFFERENTIABLE, _truth_samples, ref, method=True, doc=doc)


any = _truth_reduction(
    "any", np.logical_or, doc="Whether any entry over ``dim`` (all of them when None) is non-zero, as a bool tensor."
)
all = _truth_reduction(
    "all", np.logical_and, doc="Whether every entry over ``dim`` (all of them when None) is non-zero, as a bool tensor."
)


def _count_nonzero(input, dim=None):
    axes = _axes("count_nonzero", dim, input.ndim, False)
    return np.asarray(np.count_nonzero(input, axis=axes)).astype(np.int64, copy=False)


def _count_samples(rng):
    return [Sample(s.inputs, {"dim": s.attrs["dim"]}, s.label) for s in _truth_samples(rng) if not s.attrs["keepdim"]]


count_nonzero = _on_input(
    "count_nonzero",
    _count_nonzero,
    NOT_DIFFERENTIABLE,
    _count_samples,
    lambda torch, input, dim=None: torch.count_nonzero(input, dim=dim),
    method=True,
    doc="The number of non-zero entries over ``dim`` (all of them when None), as int64.",
)


# == appended: var_mean / std_mean, nansum / nanmean, aminmax, nanmedian, quantile / nanquantile, mode ==========
def _moment_and_mean(name, is_std, *, doc=""):
    """torch.var_mean / torch.std_mean -> (var or std, mean). The rules recompute the mean with np.mean (recorded
    on Tensors), so both are differentiable twice without a composite."""

    @quiet
    def forward(input, dim=None, correction=None, keepdim=False, *, unbiased=None):
        variance, mean = _variance(name, input, dim, correction, keepdim, unbiased)
        if _dims_and_dof(name, input, dim, correction, keepdim, unbiased)[1] == 0:
            mean = np.full(variance.shape, np.nan, input.dtype)  # the mean of no entries (not _variance's fallback)
        return (np.sqrt(variance) if is_std else variance), np.reshape(mean, variance.shape)

    @quiet
    def vjp(g, ans, input, dim=None, correction=None, keepdim=False, *, unbiased=None):
        g_stat, g_mean = g
        axes, n, dof = _dims_and_dof(name, input, dim, correction, keepdim, unbiased)
        if _count(input.shape, axes) == 0:
            return np.zeros(input.shape, input.dtype)
        grad = None
        if g_stat is not None:
            centered = input - np.sum(input / n, axis=axes, keepdims=True)  # x / n first: no float32 overflow
            scale = _kept(g_stat, input.shape, axes, keepdim) * (1 / dof if dof > 0 else math.inf)
            if is_std:
                std = _kept(ans[0], input.shape, axes, keepdim)
                grad = np.where(std == 0, 0, centered * (scale / np.where(std == 0, 1, std)))  # torch: 0 at std 0
            else:
                grad = 2 * centered * scale
        if g_mean is not None:
            spread = np.broadcast_to(_kept(g_mean, input.shape, axes, keepdim) / n, input.shape)
            grad = spread if grad is None else grad + spread
        return grad

    def samples(rng):
        return _correction_samples(not is_std)(rng)

    forward.__name__, vjp.__name__ = f"_{name}", f"_{name}_vjp"
    return one_input_op(
        name,
        "reduce",
        forward,
        vjp,
        outputs=2,
        samples=samples,
        torch_ref=_torch_moments(name),
        doc=doc,
    )


var_mean = _moment_and_mean(
    "var_mean", False, doc="(var, mean) over ``dim`` in one call, var dividing by N - correction."
)
std_mean = _moment_and_mean(
    "std_mean", True, doc="(std, mean) over ``dim`` in one call, std dividing by N - correction."
)


# -- nansum, nanmean: NaN entries count as absent ------------------------------------------------------------------
def _nan_reduction(name, average, **declaration):
    @quiet
    def forward(input, dim=None, keepdim=False, *, dtype=None):
        x = _cast_for(name, input, dtype)
        if average:
            require_float(name, "x", x)
        axes = _axes(name, dim, x.ndim, keepdim)
        present = ~np.isnan(x) if x.dtype.kind == "f" else np.ones(x.shape, bool)
        total = np.add.reduce(np.where(present, x, 0), axis=axes, keepdims=keepdim)
        if not average:
            return total.astype(np.int64) if x.dtype.kind in "biu" else total
        return total / np.add.reduce(present, axis=axes, keepdims=keepdim, dtype=x.dtype)

    @quiet
    def vjp(g, ans, input, dim=None, keepdim=False, *, dtype=None):
        g = _grad_as(g, input)
        axes = _axes(name, dim, input.ndim, keepdim)
        present = ~np.isnan(_plain(input))
        g_kept = _kept(g, input.shape, axes, keepdim)
        if average:  # an all-NaN slice: g / 0 times the 0 mask, NaN (torch's nansum / count)
            g_kept = g_kept / np.add.reduce(present, axis=axes, keepdims=True, dtype=input.dtype)
            return np.broadcast_to(g_kept, input.shape) * present.astype(input.dtype)
        return np.where(present, np.broadcast_to(g_kept, input.shape), 0)

    def samples(rng):
        out = _with_a_0d_input(reduction_samples(empty_dims=not average))(rng)
        x = uniform(rng, (3, 4))
        x[0, 1] = x[2, 0] = x[2, 3] = np.nan
        x[1] = np.nan
        out += [
            Sample((x,), {"dim": d, "keepdim": k}, f"NaNs dim={d}") for d, k in ((None, False), (1, True), (0, False))
        ]
        out.append(Sample((uniform(rng, (2, 3)).astype(np.float32),), {"dim": 1, "dtype": np.float64}, "dtype=float64"))
        if not average:
            out.append(Sample((rng.integers(-3, 4, (2, 3)),), {"dim": 0}, "int64"))
        return out

    def torch_ref(torch, input, dim=None, keepdim=False, dtype=None):
        dim = tuple(range(input.ndim)) if dim is None and input.ndim else dim
        return getattr(torch, name)(input, dim=dim, keepdim=keepdim, dtype=_torch_dtype(torch, dtype))

    forward.__name__, vjp.__name__ = f"_{name}", f"_{name}_vjp"
    return _on_input(name, forward, vjp, samples, torch_ref, **declaration)


nansum = _nan_reduction("nansum", False, method=True, doc="sum treating NaNs as zero.")
nanmean = _nan_reduction(
    "nanmean", True, method=True, doc="mean of the non-NaN entries over ``dim`` (all of them when None)."
)


# -- aminmax -----------------------------------------------------------------------------------------------------
_amin_forward, _amin_vjp = _extremum("aminmax", np.minimum)
_amax_forward, _amax_vjp = _extremum("aminmax", np.maximum)


def _aminmax_dim(input, dim):
    if dim is not None and not (isinstance(dim, int | np.integer) and not isinstance(dim, bool)):
        raise TypeError(f"aminmax: argument 'dim' expected None or an int, got {type(dim).__name__} {dim!r}")
    return dim


def _aminmax(input, *, dim=None, keepdim=False):
    """``torch.aminmax(input, *, dim=None, keepdim=False)`` -> (min, max); ties share the gradient (amin / amax)."""
    dim = _aminmax_dim(input, dim)
    return _amin_forward(input, dim, keepdim), _amax_forward(input, dim, keepdim)


def _aminmax_vjp(g, ans, input, *, dim=None, keepdim=False):
    g_min, g_max = g
    grad = None if g_min is None else _amin_vjp(g_min, ans[0], input, dim, keepdim)
    if g_max is not None:
        term = _amax_vjp(g_max, ans[1], input, dim, keepdim)
        grad = term if grad is None else grad + term
    return grad


aminmax = defop(
    "aminmax",
    family="reduce",
    inputs=("input",),
    forward=_aminmax,
    vjps=(_aminmax_vjp,),
    outputs=("min", "max"),
    samples=lambda rng: [
        Sample(s.inputs, {k: v for k, v in s.attrs.items()}, s.label)
        for s in _EXTREMUM_SAMPLES(rng)
        if not isinstance(s.attrs.get("dim"), tuple)
    ],
    torch_ref=lambda torch, input, dim=None, keepdim=False: tuple(torch.aminmax(input, dim=dim, keepdim=keepdim)),
    method=True,
)
__all__ += ["var_mean", "std_mean", "nansum", "nanmean", "aminmax"]


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_axes(rec, dim_default=None) -> tuple[tuple, int]:
    """(the reduced axes, every one when dim is None or (), and keepdims) of a reduction's record."""
    ndim = len(rec.inputs[0].shape)
    keep = bool(rec.attributes.get("keepdim", False))
    axes = _axes(rec.op_name, rec.attributes.get("dim", dim_default), ndim, keep)
    return (tuple(range(ndim)) if axes is None else axes), int(keep)


def _onnx_reduce(g, op_type: str, x, axes, keep: int, dtype=None):
    """``op_type`` over ``axes`` (a 0-D input: unchanged). ReduceMax / ReduceMin of a floating ``dtype`` give
    NaN for a slice holding one, as numpy (ONNX Runtime's skip NaN)."""
    if not axes:
        return g.op("Identity", x)
    if op_type in ("ReduceMax", "ReduceMin") and dtype is not None:
        return extremum(g, op_type, x, axes, keep, dtype)
    return g.op(op_type, x, g.ints(axes), keepdims=keep)


def _onnx_reduction(op_type, empty_ok: bool = False):
    def lower(g, rec, x):
        spec = rec.inputs[0]
        axes, keep = _onnx_axes(rec, () if rec.op_name in ("amax", "amin") else None)
        if 0 in spec.shape and not (empty_ok and (op_type != "ReduceMean" or _count(spec.shape, axes))):
            raise NotExportable("this reduction over an empty tensor has no lowering (ONNX Runtime's differs)")
        return _onnx_reduce(g, op_type, cast_to(g, x, spec.dtype, rec.output.dtype), axes, keep, rec.output.dtype)

    return lower


def _onnx_moment(g, rec, x):
    spec = rec.inputs[0]
    if 0 in spec.shape:
        raise NotExportable("a variance over an empty tensor has no lowering")
    axes, keep = _onnx_axes(rec)
    a = rec.attributes
    correction = _moment_args(rec.op_name, a.get("dim"), a.get("correction"), a.get("unbiased"))[1]
    dof = _count(spec.shape, axes) - float(correction)
    if not axes:
        centered = g.op("Sub", x, x)
    else:
        centered = g.op("Sub", x, _onnx_mean_without_overflow(g, x, axes, _count(spec.shape, axes), spec.dtype))
    squares = _onnx_reduce(g, "ReduceSum", g.op("Mul", centered, centered), axes, keep)
    variance = g.op("Div", squares, scalar(g, dof if dof > 0 else 0.0, spec.dtype))
    return variance if rec.op_name == "var" else g.op("Sqrt", variance)


def _onnx_mean_without_overflow(g, x, axes, n, dtype):
    """The forward's mean (``_variance``): sum / n, or sum(x / n) everywhere when any sum overflowed or is NaN."""
    axes_name = g.ints(axes)
    mean = g.op("Div", g.op("ReduceSum", x, axes_name, keepdims=1), scalar(g, n, dtype))
    bad = g.op("Cast", g.op("Or", g.op("IsInf", mean), g.op("IsNaN", mean)), to=tensor_type(np.int32))
    any_bad = g.op("Greater", g.op("ReduceMax", bad, keepdims=0), g.const(np.zeros((), np.int32)))
    return g.op("Where", any_bad, g.op("ReduceSum", g.op("Div", x, scalar(g, n, dtype)), axes_name, keepdims=1), mean)


def _onnx_nonzero(g, rec, x):
    return g.op("Not", g.op("Equal", x, scalar(g, 0, rec.inputs[0].dtype)))


def _onnx_first_extremum(g, op_type: str, x, dtype, axis: int, keep: int):
    """ArgMax / ArgMin along ``axis`` as numpy's: the first extremum, or the first NaN of a slice holding one
    (ONNX Runtime skips NaN)."""
    from onnx import TensorProto

    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        x = g.op("Cast", x, to=TensorProto.INT32)
    found = g.op(op_type, x, axis=axis, keepdims=keep)
    if dtype.kind != "f":
        return found
    nan = g.op("Cast", g.op("IsNaN", x), to=TensorProto.INT32)
    first_nan = g.op("ArgMax", nan, axis=axis, keepdims=keep)
    has_nan = g.op("Greater", g.op("ReduceMax", nan, g.ints([axis]), keepdims=keep), g.const(np.zeros((), np.int32)))
    return g.op("Where", has_nan, first_nan, found)


def _onnx_arg(op_type):
    def lower(g, rec, x):
        spec = rec.inputs[0]
        if 0 in spec.shape:
            raise NotExportable("an empty input has no lowering")
        dim, keep = rec.attributes.get("dim"), int(bool(rec.attributes.get("keepdim", False)))
        if dim is None or not spec.shape:
            flat = _onnx_first_extremum(g, op_type, g.op("Reshape", x, g.ints([-1])), spec.dtype, 0, 0)
            return g.op("Reshape", flat, g.ints([1] * len(spec.shape))) if keep else flat
        return _onnx_first_extremum(g, op_type, x, spec.dtype, axis_of(int(dim), len(spec.shape)), keep)

    return lower


def _onnx_max_min(g, rec, x, other=None):
    if other is not None:  # max(input, other): the elementwise maximum / minimum
        from .binary import maximum, minimum

        pair = lowering_of(maximum if rec.op_name == "max" else minimum)
        assert pair is not None  # binary declares both
        return pair(g, dataclasses.replace(rec, op_name=f"{rec.op_name}imum", attributes={}), x, other)
    spec = rec.inputs[0]
    find, whole = ("ArgMax", "ReduceMax") if rec.op_name == "max" else ("ArgMin", "ReduceMin")
    dim = rec.attributes.get("dim")
    if 0 in spec.shape:
        raise NotExportable("an empty input has no lowering")
    if dim is None:
        return _onnx_reduction(whole)(g, rec, x)
    if not spec.shape:
        return g.op("Identity", x), _onnx_first_extremum(g, find, g.op("Reshape", x, g.ints([-1])), spec.dtype, 0, 0)
    axis, keep = axis_of(int(dim), len(spec.shape)), int(bool(rec.attributes.get("keepdim", False)))
    indices = _onnx_first_extremum(g, find, x, spec.dtype, axis, 1)
    values = g.op("GatherElements", x, indices, axis=axis)
    if keep:
        return values, indices
    return g.op("Squeeze", values, g.ints([axis])), g.op("Squeeze", indices, g.ints([axis]))


def _onnx_logsumexp(g, rec, x):
    spec = rec.inputs[0]
    if 0 in spec.shape:
        raise NotExportable("an empty input has no lowering")
    axes, keep = _onnx_axes(rec)
    if not axes:
        return g.op("Identity", x)
    shift = g.op("ReduceMax", x, g.ints(axes), keepdims=1)
    finite = g.op("Not", g.op("Or", g.op("IsInf", shift), g.op("IsNaN", shift)))
    shift = g.op("Where", finite, shift, scalar(g, 0, spec.dtype))
    total = _onnx_reduce(g, "ReduceSum", g.op("Exp", g.op("Sub", x, shift)), axes, keep)
    return g.op("Add", g.op("Log", total), shift if keep else g.op("Squeeze", shift, g.ints(axes)))


def _onnx_vector_norm(g, rec, x):
    from onnx import TensorProto

    spec = rec.inputs[0]
    ord = float(_p_of(rec.attributes.get("p", "fro")) if rec.op_name == "norm" else rec.attributes.get("ord", 2))
    axes, keep = _onnx_axes(rec)
    if 0 in spec.shape and math.isinf(ord):
        raise NotExportable("an infinity norm over an empty tensor has no lowering")
    if not spec.shape:
        x, axes = g.op("Reshape", x, g.ints([1])), (0,)
    magnitude = g.op("Abs", x)
    if math.isinf(ord):
        out = _onnx_reduce(g, "ReduceMax" if ord > 0 else "ReduceMin", magnitude, axes, keep, spec.dtype)
    elif ord == 0:
        nonzero = g.op("Cast", g.op("Not", g.op("Equal", x, scalar(g, 0, spec.dtype))), to=TensorProto.FLOAT)
        out = cast_to(g, g.op("ReduceSum", nonzero, g.ints(axes), keepdims=keep), np.float32, spec.dtype)
    elif ord == 1:
        out = g.op("ReduceSum", magnitude, g.ints(axes), keepdims=keep)
    elif ord == 2:
        out = g.op("Sqrt", g.op("ReduceSum", g.op("Mul", magnitude, magnitude), g.ints(axes), keepdims=keep))
    else:
        powered = g.op("ReduceSum", g.op("Pow", magnitude, scalar(g, ord, spec.dtype)), g.ints(axes), keepdims=keep)
        out = g.op("Pow", powered, scalar(g, 1 / ord, spec.dtype))
    return g.op("Reshape", out, g.ints([])) if not spec.shape else out


def _onnx_truth(g, rec, x):
    """any / all: ReduceMax / ReduceMin of the flags as uint8 (ONNX Runtime's int64 ReduceSum, the count, took ~10x
    as long on attention's scores); count_nonzero: that count. A bool input is its own flags."""
    from onnx import TensorProto

    axes, keep = _onnx_axes(rec)
    flags = x if np.dtype(rec.inputs[0].dtype) == np.bool_ else _onnx_nonzero(g, rec, x)
    if rec.op_name == "count_nonzero":
        return _onnx_reduce(g, "ReduceSum", g.op("Cast", flags, to=TensorProto.INT64), axes, keep)
    reduction = "ReduceMin" if rec.op_name == "all" else "ReduceMax"
    found = _onnx_reduce(g, reduction, g.op("Cast", flags, to=TensorProto.UINT8), axes, keep)
    return g.op("Cast", found, to=TensorProto.BOOL)


def _onnx_nan_reduction(g, rec, x):
    """nansum / nanmean: NaN entries as 0 and not counted, as the forward."""
    spec = rec.inputs[0]
    if 0 in spec.shape or rec.attributes.get("dtype") is not None:
        raise NotExportable("an empty input or a dtype= cast has no lowering")
    axes, keep = _onnx_axes(rec)
    dtype = np.dtype(spec.dtype)
    if dtype.kind != "f":
        return _onnx_reduce(g, "ReduceSum", cast_to(g, x, dtype, rec.output.dtype), axes, keep)
    present = g.op("Not", g.op("IsNaN", x))
    total = _onnx_reduce(g, "ReduceSum", g.op("Where", present, x, scalar(g, 0, dtype)), axes, keep)
    if rec.op_name == "nansum":
        return total
    count = _onnx_reduce(g, "ReduceSum", g.op("Cast", present, to=tensor_type(dtype)), axes, keep)
    return g.op("Div", total, count)


def _onnx_aminmax(g, rec, x):
    spec = rec.inputs[0]
    if 0 in spec.shape:
        raise NotExportable("an empty input has no lowering")
    axes, keep = _onnx_axes(rec)
    return tuple(_onnx_reduce(g, op_type, x, axes, keep, spec.dtype) for op_type in ("ReduceMin", "ReduceMax"))


for _op in (nansum, nanmean):
    lowering(_op, _onnx_nan_reduction)
lowering(aminmax, _onnx_aminmax)
for _op in (var_mean, std_mean):
    lowering(_op, not_exportable="the (moment, mean) pair's lowering is not written (var / std have one)")
lowering(sum, _onnx_reduction("ReduceSum", empty_ok=True))
lowering(mean, _onnx_reduction("ReduceMean", empty_ok=True))
lowering(prod, _onnx_reduction("ReduceProd", empty_ok=True))
lowering(amax, _onnx_reduction("ReduceMax"))
lowering(amin, _onnx_reduction("ReduceMin"))
lowering(var, _onnx_moment)
lowering(std, _onnx_moment)
lowering(max, _onnx_max_min)
lowering(min, _onnx_max_min)
lowering(argmax, _onnx_arg("ArgMax"))
lowering(argmin, _onnx_arg("ArgMin"))
lowering(logsumexp, _onnx_logsumexp)
lowering(vector_norm, _onnx_vector_norm)
lowering(norm, _onnx_vector_norm)
lowering(any, _onnx_truth)
lowering(all, _onnx_truth)
lowering(count_nonzero, _onnx_truth)
