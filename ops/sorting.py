"""Sorting and selection, as in PyTorch 2.13: sort, argsort, topk, kthvalue, median, median_dim. Each op's
signature and torch conventions (ties, NaN, gradients) are its notes (``_CASE_LAW``)."""

__all__ = [
    "sort",
    "argsort",
    "topk",
    "kthvalue",
    "median",
    "median_dim",
    "searchsorted",
    "bucketize",
    "bincount",
    "histc",
    "unique",
    "unique_consecutive",
]

import math
from typing import Any

import numpy as np

from tape.onnx import lowering
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop

from ._declare import one_input_op, values_indices_op
from ._notes import case_law
from ._numerics import constant_values, quiet
from ._onnx import NotExportable, axis_of, cast_to, extremum, scalar
from ._samples import transposed, uniform
from ._validation import integer, normalize_dim, one_of, require_bool
from .indexing import scatter_add

# torch's case law, op by op: each entry joins the notes= of the ops it names (shown in docs/coverage.md)
_CASE_LAW = (
    (
        ("sort", "argsort"),
        "sort(input, dim=-1, descending=False, stable=False) -> (values, indices); argsort returns the "
        "indices (int64, not differentiable). Sorting is always stable, whatever ``stable`` says: equal "
        "entries keep their input order, ascending and descending alike -- what torch guarantees with "
        "stable=True and what its CPU kernel does anyway. NaN sorts as the largest value (last ascending, "
        "first descending), as in torch.",
    ),
    (
        ("topk",),
        "topk(input, k, dim=-1, largest=True, sorted=True) -> (values, indices): the first k of the stable "
        "sort (descending when ``largest``). With sorted=False torch's order is unspecified; this returns the"
        " sorted order too (one of the orders torch allows).",
    ),
    (
        ("kthvalue",),
        "kthvalue(input, k, dim=-1, keepdim=False) -> (values, indices): the k-th smallest (k from 1) of the "
        "stable ascending sort.",
    ),
    (
        ("median",),
        "median(input) -> the lower median of all entries (for an even count the smaller of the two middle "
        "values), NaN when any entry is NaN or there is none (torch's). Its gradient is shared evenly among "
        "the entries equal to the median (among the NaN entries for a NaN median): torch's median() backward.",
    ),
    (
        ("median_dim",),
        "median_dim(input, dim=-1, keepdim=False) -> (values, indices): torch.median(input, dim, keepdim). "
        "The two are separate ops because an op has a fixed number of outputs, and torch's one name returns a"
        " single Tensor without ``dim`` but a (values, indices) pair with it, with different gradient "
        "conventions (shared among ties without dim, routed to the one index with it). ``median_dim`` spells "
        "out which one is meant. A slice holding a NaN gives NaN and the index of its FIRST NaN (torch's); "
        "otherwise the lower median of the stable ascending sort.",
    ),
    (
        ("sort", "topk", "kthvalue", "median_dim"),
        "Gradients: the values' gradient goes to the entries they were read from (sort: the inverse "
        "permutation as a gather; topk / kthvalue / median_dim: a scatter into zeros at the returned indices,"
        " ops.scatter_add on Tensors). The rules are linear in g and recorded with gather / scatter_add, so "
        "the second order is exact.",
    ),
    (
        ("sort", "argsort", "topk", "kthvalue", "median_dim"),
        "Ties: where torch documents or deterministically shows its choice (sort, argsort, both orders), the "
        "indices match it. Which of several tied entries topk, kthvalue and median_dim return is unspecified "
        "in torch (its CPU kernels use a partial sort: it picks e.g. index 2 of tied entries 0, 2, 3); here "
        "it is always the stable sort's (lowest index first among the ascending ties, the same for "
        "descending), and the samples checked against torch have no ties there. The values agree either way.",
    ),
    (
        ("topk", "kthvalue", "median_dim"),
        "Errors: dims out of range, a k outside [0, size] (topk) or [1, size] (kthvalue), a reduction over an"
        " empty dim (kthvalue, median_dim), non-bool flags: each names the op, the argument, the expected and"
        " what came.",
    ),
    (
        ("sort", "topk"),
        "0-D inputs count as one entry along dim 0 / -1, as in torch; zero-size inputs work when no slice is "
        "empty (or, for sort and topk, always).",
    ),
)

FAMILY = "sorting"


# -- shared helpers ----------------------------------------------------------------------------------------------
def _check_k(op: str, k, size: int, low: int) -> None:
    integer(op, "k", k)
    if not low <= k <= size:
        raise ValueError(f"{op}: argument 'k' expected an int in [{low}, {size}] (the size of dim), got {k}")


def _size(input, axis: int) -> int:
    return input.shape[axis] if input.ndim else 1


def _stable_order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """int64 indices sorting ``x`` along ``axis``, equal entries in input order, NaN largest. Descending: the
    ascending stable sort of the reversed input, reversed (no negation, so integers cannot overflow and NaN
    comes first)."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable").astype(np.int64, copy=False)
    n = x.shape[axis]
    order = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return (n - 1 - np.flip(order, axis)).astype(np.int64, copy=False)


def _put_along(shape: tuple, axis: int, index: np.ndarray, src):
    """zeros(shape) with ``src`` written at ``index`` (distinct positions) along ``axis``. Arrays: numpy's
    put_along_axis; Tensors: ops.scatter_add, recorded (its gradient for ``src`` is gather)."""
    if not isinstance(src, np.ndarray):
        return scatter_add(np.zeros(shape, src.dtype), axis, index, src)
    out = np.zeros(shape, src.dtype)
    if src.size:
        np.put_along_axis(out, index, src, axis)
    return out


def _scattered_back(name, reduces=True):
    """The rule of a (values, indices) op: the values' gradient written back at the indices' positions along
    ``dim``, zeros elsewhere. ``reduces``: the op drops ``dim`` unless keepdim (kthvalue, median, mode); else its
    indices have the input's rank (sort, topk)."""

    def vjp(g, ans, input, *args, dim=-1, keepdim=False, **attrs):
        g_values = g[0]
        if g_values is None:
            return np.zeros(input.shape, input.dtype)
        if input.ndim == 0:
            return g_values
        axis = normalize_dim(name, dim, input.ndim)
        indices = np.asarray(ans[1])
        if reduces and not keepdim:
            g_values, indices = np.expand_dims(g_values, axis), np.expand_dims(indices, axis)
        return _put_along(input.shape, axis, indices, g_values)

    vjp.__name__ = f"_{name}_vjp"
    return vjp


# -- sort / argsort ----------------------------------------------------------------------------------------------
def _check_sort(op):
    def check(input, dim=-1, descending=False, stable=False):
        normalize_dim(op, dim, input.ndim)
        require_bool(op, "descending", descending)
        if stable is not None:  # torch takes None for its default
            require_bool(op, "stable", stable)

    return check


def _sort(input, dim=-1, descending=False, stable=False):
    axis = normalize_dim("sort", dim, input.ndim)
    if input.ndim == 0:
        return input.copy(), np.zeros((), np.int64)
    indices = _stable_order(input, axis, bool(descending))
    return np.take_along_axis(input, indices, axis), indices


def _sort_samples(rng):
    """No ties among floats (each float gets a gradient); ties, NaN and bools in integer or NaN samples, where
    the indices are compared with torch's exactly."""
    ties = rng.integers(-2, 3, size=(4, 7))
    nan = np.array([[2.0, np.nan, 1.0, 3.0, np.nan, 0.0], [np.nan, 0.5, -1.0, 4.0, 2.5, np.nan]])
    out = []
    for descending in (False, True):
        d = {"descending": descending}
        out += [
            Sample((uniform(rng, (6,)),), {"dim": 0, **d}, f"vector descending={descending}"),
            Sample((uniform(rng, (3, 5)),), {"dim": -1, **d}, f"matrix dim=-1 descending={descending}"),
            Sample((uniform(rng, (3, 5)),), {"dim": 0, **d}, f"matrix dim=0 descending={descending}"),
            Sample((transposed(rng, (2, 4, 3)),), {"dim": 1, **d}, f"non-contiguous descending={descending}"),
            Sample((ties,), {"dim": 1, "stable": True, **d}, f"int64 ties stable descending={descending}"),
            Sample((ties.T.copy(),), {"dim": 0, **d}, f"int64 ties dim=0 descending={descending}"),
            Sample((nan,), {"dim": 1, **d}, f"NaN descending={descending}"),
        ]
    out += [
        Sample((uniform(rng, ()),), {"dim": 0}, "0-D"),
        Sample((uniform(rng, (4, 1)),), {"dim": 1}, "size-1 dim"),
        Sample((uniform(rng, (0, 3)),), {"dim": 0}, "zero-size along dim"),
        Sample((uniform(rng, (0, 3)),), {"dim": 1, "descending": True}, "zero-size other dim"),
        Sample((np.array([True, False, True, False]),), {"dim": 0, "descending": True}, "bool"),
    ]
    return out


def _as_sort(name) -> dict:
    """The declaration sort and argsort share (their attributes are the same: dim, descending, stable)."""

    def torch_ref(torch, input, dim=-1, descending=False, stable=False):
        return getattr(torch, name)(input, dim=dim, descending=descending, stable=stable)

    return dict(
        check=_check_sort(name),
        samples=_sort_samples,
        torch_ref=torch_ref,
        method=True,
        notes=case_law(_CASE_LAW, name),
    )


sort = values_indices_op(
    "sort",
    FAMILY,
    _sort,
    _scattered_back("sort", reduces=False),
    **_as_sort("sort"),
    doc="input sorted along ``dim`` (ascending unless descending=True): (values, indices), indices into ``dim``.",
)


def _argsort(input, dim=-1, descending=False, stable=False):
    axis = normalize_dim("argsort", dim, input.ndim)
    if input.ndim == 0:
        return np.zeros((), np.int64)
    return _stable_order(input, axis, bool(descending))


argsort = defop(
    "argsort",
    family=FAMILY,
    inputs=("input",),
    forward=_argsort,
    vjps=(NOT_DIFFERENTIABLE,),
    **_as_sort("argsort"),
    doc="The indices that sort input along ``dim`` (ascending unless descending=True).",
)


# -- topk --------------------------------------------------------------------------------------------------------
def _check_topk(input, k, dim=-1, largest=True, sorted=True):
    axis = normalize_dim("topk", dim, input.ndim)
    _check_k("topk", k, _size(input, axis), 0)
    require_bool("topk", "largest", largest)
    require_bool("topk", "sorted", sorted)


def _topk(input, k, dim=-1, largest=True, sorted=True):
    axis = normalize_dim("topk", dim, input.ndim)
    _check_k("topk", k, _size(input, axis), 0)
    if input.ndim == 0:  # torch returns the entry for k = 0 and 1 alike
        return input.copy(), np.zeros((), np.int64)
    indices = np.take(_stable_order(input, axis, bool(largest)), np.arange(k), axis=axis)
    return np.take_along_axis(input, indices, axis), indices


def _topk_samples(rng):
    nan = np.array([[2.0, np.nan, 1.0, 3.0, -0.5, 0.0], [0.25, 0.5, -1.0, 4.0, 2.5, np.nan]])
    return [
        Sample((uniform(rng, (7,)),), {"k": 3}, "vector k=3"),
        Sample((uniform(rng, (3, 6)),), {"k": 2, "dim": 1, "largest": False}, "smallest k=2"),
        Sample((uniform(rng, (4, 3)),), {"k": 4, "dim": 0}, "k = size"),
        Sample((uniform(rng, (4, 3)),), {"k": 0, "dim": 0}, "k = 0"),
        Sample((uniform(rng, (3, 6)),), {"k": 3, "sorted": False}, "sorted=False"),
        Sample((uniform(rng, (3, 6)),), {"k": 3, "largest": False, "sorted": False}, "smallest sorted=False"),
        Sample((transposed(rng, (2, 5, 3)),), {"k": 2, "dim": 1}, "non-contiguous"),
        Sample((nan,), {"k": 2, "dim": 1}, "NaN counts as largest"),
        Sample((nan,), {"k": 2, "dim": 1, "largest": False}, "NaN smallest"),
        Sample((rng.permutation(12).reshape(3, 4),), {"k": 2}, "int64"),
        Sample((uniform(rng, ()),), {"k": 1}, "0-D"),
        Sample((uniform(rng, (0, 3)),), {"k": 2, "dim": 1}, "zero-size other dim"),
        Sample((uniform(rng, (0, 3)),), {"k": 0, "dim": 0}, "zero-size along dim"),
    ]


def _torch_topk(torch, input, k, dim=-1, largest=True, sorted=True):
    values, indices = torch.topk(input, k, dim=dim, largest=largest, sorted=sorted)
    if sorted or input.ndim == 0:
        return values, indices
    # unsorted: torch's order is unspecified; put its k entries in sorted order to compare them
    order = torch.sort(values, dim=dim, descending=largest, stable=True).indices
    return torch.gather(values, dim, order), torch.gather(indices, dim, order)


topk = values_indices_op(
    "topk",
    FAMILY,
    _topk,
    _scattered_back("topk", reduces=False),
    check=_check_topk,
    samples=_topk_samples,
    torch_ref=_torch_topk,
    method=True,
    notes=case_law(_CASE_LAW, "topk"),
    doc="The k largest (or, with largest=False, smallest) entries along ``dim``: (values, indices).",
)


# -- kthvalue / median_dim: one entry per slice ------------------------------------------------------------------
def _picked(input, axis, position, keepdim):
    """(values, indices) of the stable ascending sort's entry at ``position`` (an int, or an array with one
    entry per slice, kept dim of size 1) along ``axis``."""
    order = _stable_order(input, axis, False)
    if isinstance(position, int):
        indices = np.take(order, [position], axis=axis)
    else:
        indices = np.take_along_axis(order, position, axis)
    values = np.take_along_axis(input, indices, axis)
    if not keepdim:
        values, indices = np.squeeze(values, axis), np.squeeze(indices, axis)
    return values, indices


def _check_reduced(op, input, dim, keepdim):
    axis = normalize_dim(op, dim, input.ndim)
    require_bool(op, "keepdim", keepdim)
    if input.ndim and input.shape[axis] == 0:
        raise ValueError(
            f"{op}: argument 'input' expected a non-empty dim {dim} to select from, got shape {input.shape}"
        )
    return axis


def _check_kthvalue(input, k, dim=-1, keepdim=False):
    axis = _check_reduced("kthvalue", input, dim, keepdim)
    _check_k("kthvalue", k, _size(input, axis), 1)


def _kthvalue(input, k, dim=-1, keepdim=False):
    _check_kthvalue(input, k, dim, keepdim)
    if input.ndim == 0:
        return input.copy(), np.zeros((), np.int64)
    return _picked(input, normalize_dim("kthvalue", dim, input.ndim), int(k) - 1, keepdim)


def _slice_samples(rng, **attrs):
    """Inputs without ties for kthvalue / median_dim (torch's tied index is unspecified)."""

    def distinct(shape):  # a shuffled grid: distinct values, at least 0.25 apart
        return rng.permutation(np.arange(int(np.prod(shape))) * 0.25 - 1.0).reshape(shape)

    nan = np.array([[2.0, np.nan, 1.0, 3.0, 0.0], [0.25, 0.5, -1.0, 4.0, 2.5]])
    return [
        ("vector", distinct((5,)), {"dim": 0}),
        ("matrix dim=1", distinct((3, 6)), {"dim": 1}),
        ("matrix dim=0 keepdim", distinct((4, 3)), {"dim": 0, "keepdim": True}),
        ("non-contiguous", distinct((3, 5, 2)).transpose(2, 1, 0), {"dim": 1}),
        ("one NaN per slice", nan, {"dim": 1}),
        ("int64", rng.permutation(15).reshape(3, 5), {"dim": -1}),
        ("size-1 dim", distinct((3, 1)), {"dim": 1, "keepdim": True}),
        ("0-D", uniform(rng, ()), {"dim": 0}),
        ("zero-size other dim", uniform(rng, (0, 3)), {"dim": 1}),
        ("zero-size other dim keepdim", uniform(rng, (3, 0)), {"dim": 0, "keepdim": True}),
    ]


def _kthvalue_samples(rng):
    out = []
    for label, x, attrs in _slice_samples(rng):
        size = x.shape[attrs["dim"]] if x.ndim else 1
        ks = sorted({1, (size + 1) // 2, size}) if label in ("vector", "matrix dim=1") else [size]
        if label == "one NaN per slice":
            ks = [2, 5]  # a value below the NaN, and the NaN itself (the 5th of 5)
        out += [Sample((x,), {"k": k, **attrs}, f"{label} k={k}") for k in ks]
    return out


kthvalue = values_indices_op(
    "kthvalue",
    FAMILY,
    _kthvalue,
    _scattered_back("kthvalue"),
    check=_check_kthvalue,
    samples=_kthvalue_samples,
    torch_ref=lambda torch, input, k, dim=-1, keepdim=False: torch.kthvalue(input, k, dim, keepdim),
    method=True,
    notes=case_law(_CASE_LAW, "kthvalue"),
    doc="The k-th smallest entry along ``dim`` (k counted from 1): (values, indices).",
)


def _check_median_dim(input, dim=-1, keepdim=False):
    _check_reduced("median_dim", input, dim, keepdim)


def _median_dim(input, dim=-1, keepdim=False):
    return _median_along("median_dim", input, dim, keepdim)


def _median_along(op, input, dim, keepdim):
    axis = _check_reduced(op, input, dim, keepdim)
    if input.ndim == 0:
        return input.copy(), np.zeros((), np.int64)
    n = input.shape[axis]
    if input.dtype.kind != "f":
        return _picked(input, axis, (n - 1) // 2, keepdim)
    nans = np.sum(np.isnan(input), axis=axis, keepdims=True)
    # NaNs sort last in input order: the first NaN sits at n - (number of NaNs)
    position = np.where(nans > 0, n - nans, (n - 1) // 2)
    return _picked(input, axis, position, keepdim)


def _median_dim_samples(rng):
    return [Sample((x,), attrs, label) for label, x, attrs in _slice_samples(rng)] + [
        Sample(
            (np.array([[1.0, np.nan, 3.0, np.nan], [np.nan, 2.0, 0.5, -1.0]]),),
            {"dim": 1},
            "several NaNs: the first one",
        )
    ]


median_dim = values_indices_op(
    "median_dim",
    FAMILY,
    _median_dim,
    _scattered_back("median_dim"),
    check=_check_median_dim,
    samples=_median_dim_samples,
    torch_ref=lambda torch, input, dim=-1, keepdim=False: torch.median(input, dim, keepdim),
    notes=case_law(_CASE_LAW, "median_dim"),
    doc="The median along ``dim``, the lower of the two middle values for an even count: (values, indices).",
)


# -- median of all entries ---------------------------------------------------------------------------------------
def _median(input):
    if input.size == 0:
        if input.dtype.kind != "f":
            raise ValueError(
                f"median: argument 'input' expected at least one entry for dtype {input.dtype} "
                f"(NaN has no integer form), got shape {input.shape}"
            )
        return np.array(np.nan, input.dtype)
    flat = input.reshape(-1)
    if input.dtype.kind == "f" and np.isnan(flat).any():
        return np.array(np.nan, input.dtype)
    middle = (flat.size - 1) // 2
    return np.array(np.partition(flat, middle)[middle], input.dtype)


def _median_vjp(g, ans, input):
    """g shared evenly among the entries equal to the median (the NaN entries for a NaN median); the mask is a
    constant, so on Tensors only g times constant weights is recorded."""
    x, value = (input, ans) if isinstance(input, np.ndarray) else (constant_values(input), constant_values(ans))
    mask = np.isnan(x) if value != value else x == value
    weights = (mask / max(np.count_nonzero(mask), 1)).astype(x.dtype)
    return g * weights


def _median_samples(rng):
    def distinct(shape):
        return rng.permutation(np.arange(int(np.prod(shape))) * 0.25 - 1.5).reshape(shape)

    return [
        Sample((distinct((5,)),), {}, "odd count"),
        Sample((distinct((3, 4)),), {}, "even count: the lower one"),
        Sample((distinct((4, 3)).T,), {}, "non-contiguous"),
        Sample((uniform(rng, ()),), {}, "0-D"),
        Sample((np.array([[1.0, np.nan], [np.nan, 0.5]]),), {}, "NaN"),
        Sample((rng.permutation(9).reshape(3, 3),), {}, "int64"),
        # torch=False: torch's double backward gives NaN for the cotangent here (0 / 0 in its even share), where
        # the exact value is 0 (the gradient is empty); tests/ops/test_sorting.py checks value and gradient
        Sample((uniform(rng, (0, 3)),), {}, "zero-size: NaN", torch=False),
    ]


# == appended: median(input, dim, keepdim) is one op (torch's), nanmedian, mode, quantile, nanquantile ============
def _values(x):
    """The values of an array or a Tensor (the quantile weights are constants of the sort)."""
    return constant_values(x)


def _whole_or_dim(name, whole, whole_vjp, along, along_vjp):
    """One op for torch's two forms: without ``dim`` one value of every entry (its rule ``whole_vjp``), with it
    the named (values, indices) along dim (the gradient to the indices)."""

    def forward(input, dim=None, keepdim=False):
        if dim is None:
            require_bool(name, "keepdim", keepdim)
            if keepdim:
                raise TypeError(f"{name}: argument 'keepdim' needs a dim (torch.{name} takes it only with one)")
            return whole(input)
        return along(input, dim, keepdim)

    def vjp(g, ans, input, dim=None, keepdim=False):
        return whole_vjp(g, ans, input) if dim is None else along_vjp(g, ans, input, dim=dim, keepdim=keepdim)

    forward.__name__, vjp.__name__ = f"_{name}", f"_{name}_vjp"
    return forward, vjp


def _torch_whole_or_dim(name):
    return lambda torch, input, dim=None, keepdim=False: (
        getattr(torch, name)(input) if dim is None else tuple(getattr(torch, name)(input, dim, keepdim))
    )


def _median_of_dim(input, dim, keepdim):
    return _median_along("median", input, dim, keepdim)


_median_forward, _median_rule = _whole_or_dim("median", _median, _median_vjp, _median_of_dim, _scattered_back("median"))
median = values_indices_op(
    "median",
    FAMILY,
    _median_forward,
    _median_rule,
    samples=lambda rng: _median_samples(rng) + _median_dim_samples(rng),
    torch_ref=_torch_whole_or_dim("median"),
    notes=case_law(
        _CASE_LAW,
        "median",
        "median(input) or median(input, dim, keepdim) -> (values, indices), as torch; median_dim is the latter",
    ),
    doc=(
        "The median of all entries (the lower middle value for an even count); with ``dim``, (values, indices)\n"
        "along it."
    ),
)


def _nan_position(input, axis):
    """(kept dim of size 1) the lower median's position among each slice's non-NaN entries (NaN sorts last); 0 for
    an all-NaN slice (its first NaN)."""
    valid = np.sum(~np.isnan(input), axis=axis, keepdims=True) if input.dtype.kind == "f" else input.shape[axis]
    return np.maximum((np.asarray(valid) - 1) // 2, 0) * np.ones((1,) * input.ndim, np.int64)


def _nanmedian_all(input):
    """The lower median of the non-NaN entries; NaN when there is none (torch.nanmedian())."""
    if input.dtype.kind != "f":
        return _median(input)
    flat = input.reshape(-1)
    kept = flat[~np.isnan(flat)]
    if kept.size == 0:
        return np.array(np.nan, input.dtype)
    middle = (kept.size - 1) // 2
    return np.array(np.partition(kept, middle)[middle], input.dtype)


def _nanmedian_dim(input, dim, keepdim):
    axis = _check_reduced("nanmedian", input, dim, keepdim)
    if input.ndim == 0:
        return input.copy(), np.zeros((), np.int64)
    return _picked(input, axis, _nan_position(input, axis), keepdim)


def _nanmedian_samples(rng):
    x = np.array([[2.0, np.nan, 1.0, 3.0, 0.0], [0.25, np.nan, -1.0, np.nan, 2.5], [1.5, 0.5, -0.5, 4.0, -2.0]])
    whole = [s for s in _median_samples(rng) if s.label != "NaN"]
    along = [s for s in _median_dim_samples(rng) if "NaN" not in s.label]
    return (
        whole
        + along
        + [
            Sample((x,), {}, "NaNs ignored"),
            Sample((x,), {"dim": 1}, "NaNs ignored along dim"),
            Sample((x.T.copy(),), {"dim": 0, "keepdim": True}, "NaNs ignored along dim 0, keepdim"),
            Sample((np.full((2, 2), np.nan),), {}, "all NaN: NaN"),
        ]
    )


_nanmedian_forward, _nanmedian_rule = _whole_or_dim(
    "nanmedian", _nanmedian_all, _median_vjp, _nanmedian_dim, _scattered_back("nanmedian")
)
nanmedian = values_indices_op(
    "nanmedian",
    FAMILY,
    _nanmedian_forward,
    _nanmedian_rule,
    samples=_nanmedian_samples,
    torch_ref=_torch_whole_or_dim("nanmedian"),
    doc="median ignoring NaNs: of all entries, or (values, indices) along ``dim``.",
)


# -- mode --------------------------------------------------------------------------------------------------------
def _mode(input, dim=-1, keepdim=False):
    """``torch.mode(input, dim=-1, keepdim=False)`` -> (values, indices): the most frequent value of each slice
    (the smallest among equally frequent ones) and the LAST index holding it (torch's CPU kernel). Each slice
    compares all pairs: O(n^2) per slice."""
    axis = _check_reduced("mode", input, dim, keepdim)
    if input.ndim == 0:
        return input.copy(), np.zeros((), np.int64)
    x = np.moveaxis(input, axis, -1)
    counts = np.sum(np.expand_dims(x, -1) == np.expand_dims(x, -2), axis=-1)
    frequent = counts == np.max(counts, axis=-1, keepdims=True)
    big = np.inf if x.dtype.kind == "f" else (True if x.dtype.kind == "b" else np.iinfo(x.dtype).max)
    value = np.min(np.where(frequent, x, big), axis=-1, keepdims=True).astype(x.dtype)
    last = x.shape[-1] - 1 - np.argmax(np.flip(x == value, -1), axis=-1, keepdims=True)
    values, indices = np.moveaxis(value, -1, axis), np.moveaxis(last.astype(np.int64), -1, axis)
    if not keepdim:
        values, indices = np.squeeze(values, axis), np.squeeze(indices, axis)
    return values, indices


def _mode_samples(rng):
    """Ties in frequency only in integer samples (values and indices compared with torch): a float mode of several
    equal entries has no derivative finite differences can check (moving one copy changes the mode). Distinct
    floats: every value is as frequent, the mode is the smallest."""
    ties = np.array([[1, 2, 2, 3, 3], [0, -1, 0, 4, -1], [2, 1, 0, -1, 3]])
    return [
        Sample((ties,), {"dim": 1}, "ties in frequency: the smallest value, its last index"),
        Sample((ties.T.copy(),), {"dim": 0, "keepdim": True}, "int64 dim=0 keepdim"),
        Sample((np.asfortranarray(ties),), {}, "non-contiguous, dim=-1 default"),
        Sample((rng.permutation(12).reshape(3, 4) * 0.25,), {"dim": 1}, "distinct floats: the smallest"),
        Sample((rng.permutation(12).reshape(3, 4).T * 0.5,), {"dim": 0, "keepdim": True}, "floats, keepdim"),
        Sample((uniform(rng, ()),), {"dim": 0}, "0-D"),
        Sample((uniform(rng, (0, 3)),), {"dim": 1}, "zero-size other dim"),
    ]


mode = values_indices_op(
    "mode",
    FAMILY,
    _mode,
    _scattered_back("mode"),
    samples=_mode_samples,
    torch_ref=lambda torch, input, dim=-1, keepdim=False: tuple(torch.mode(input, dim, keepdim)),
    method=True,
)


# -- quantile, nanquantile ---------------------------------------------------------------------------------------
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _check_quantile(op, input, q, dim, keepdim, interpolation):
    if input.dtype.kind != "f":
        raise TypeError(f"{op}: argument 'input' expected a floating tensor, got dtype {input.dtype}")
    if q.ndim > 1 or (q.dtype.kind != "f") or q.dtype != input.dtype and q.ndim:
        raise ValueError(
            f"{op}: argument 'q' expected a number or a 1-D tensor of input's dtype, got {q.dtype} {q.shape}"
        )
    if np.any(~((q >= 0) & (q <= 1))):
        raise ValueError(f"{op}: argument 'q' expected values in [0, 1], got {q}")
    require_bool(op, "keepdim", keepdim)
    one_of(op, "interpolation", interpolation, _INTERPOLATIONS)
    if dim is not None:
        normalize_dim(op, dim, input.ndim)
    if input.size == 0:  # torch refuses every empty input
        raise ValueError(f"{op}: argument 'input' expected a non-empty tensor to take quantiles of, got {input.shape}")


def _quantile_plan(op, input, q, dim, keepdim, interpolation, ignore_nan):
    """(weights (Q, *rest, n) at input positions along the reduced dim moved last, NaN slices (*rest, 1), the
    moved input, the output shape). Each quantile is a weighted sum of two order statistics: the weights are
    constants of the sort, so the gradient is g times them."""
    _check_quantile(op, input, q, dim, keepdim, interpolation)
    if dim is None or input.ndim == 0:
        x = np.reshape(input, (-1,))
    else:
        x = np.moveaxis(input, normalize_dim(op, dim, input.ndim), -1)
    n = x.shape[-1]
    order = np.argsort(x, axis=-1, kind="stable")  # NaN last
    nan = np.isnan(x)
    valid = n - np.sum(nan, axis=-1, keepdims=True) if ignore_nan else np.full(x.shape[:-1] + (1,), n)
    qs = np.reshape(np.asarray(q, np.float64), (-1,) + (1,) * x.ndim)  # (Q, 1..., 1)
    rank = qs * np.maximum(valid - 1, 0)  # (Q, *rest, 1)
    low, high = np.floor(rank), np.ceil(rank)
    if interpolation == "linear":
        w_high = rank - low
    elif interpolation == "lower":
        w_high = np.zeros_like(rank)
    elif interpolation == "higher":
        w_high = (high > low).astype(np.float64)
    elif interpolation == "midpoint":
        w_high = np.where(high > low, 0.5, 0.0)
    else:  # nearest: torch rounds half to even
        w_high = (np.round(rank) > low).astype(np.float64)
    weights = np.zeros(qs.shape[:1] + x.shape, input.dtype)
    positions = np.broadcast_to(order, weights.shape)
    for ranks, w in ((low, 1 - w_high), (high, w_high)):
        index = np.take_along_axis(
            positions, np.broadcast_to(ranks.astype(np.int64), qs.shape[:1] + x.shape[:-1] + (1,)), -1
        )
        current = np.take_along_axis(weights, index, -1)
        np.put_along_axis(weights, index, current + w.astype(input.dtype), -1)
    bad = np.any(nan, axis=-1, keepdims=True) if not ignore_nan else valid == 0
    out_shape = _quantile_shape(input, q, dim, keepdim)
    return weights, bad, x, out_shape


def _quantile_shape(input, q, dim, keepdim):
    if dim is None:
        rest = (1,) * input.ndim if keepdim else ()
    else:
        axis = normalize_dim("quantile", dim, input.ndim)
        rest = tuple(1 if a == axis else n for a, n in enumerate(input.shape) if keepdim or a != axis)
    return (q.shape[0],) + rest if q.ndim else rest


def _quantile_of(op, ignore_nan):
    @quiet
    def forward(input, q, dim=None, keepdim=False, *, interpolation="linear"):
        weights, bad, x, shape = _quantile_plan(op, input, q, dim, keepdim, interpolation, ignore_nan)
        values = np.sum(weights * np.where(np.isnan(x), 0, x), axis=-1)  # (Q, *rest)
        values = np.where(bad[..., 0], np.nan, values)
        return np.reshape(values, shape)

    def vjp(g, ans, input, q, dim=None, keepdim=False, *, interpolation="linear"):
        weights, bad, x, _ = _quantile_plan(op, _values(input), _values(q), dim, keepdim, interpolation, ignore_nan)
        weights = np.where(bad, np.nan, weights)  # a NaN quantile: NaN gradient for its slice (torch's)
        g = np.reshape(g, weights.shape[:-1] + (1,))
        grad = np.sum(g * weights, axis=0)  # (*rest, n), the reduced dim last
        if dim is None or input.ndim == 0:
            return np.reshape(grad, input.shape)
        return np.moveaxis(grad, -1, normalize_dim(op, dim, input.ndim))

    forward.__name__, vjp.__name__ = f"_{op}", f"_{op}_vjp"
    return forward, quiet(vjp)


def _quantile_samples(ignore_nan):
    def generate(rng):
        def distinct(*shape):  # no ties: finite differences cannot check a tie
            return rng.permutation(np.arange(int(np.prod(shape))) * 0.25 - 1.0).reshape(shape)

        qs = np.array([0.1, 0.5, 0.8])
        out = [Sample((distinct(3, 5), np.array(0.3)), {"dim": 1, "interpolation": m}, f"{m}") for m in _INTERPOLATIONS]
        out += [
            Sample((distinct(3, 5), qs), {"dim": 1, "keepdim": True}, "1-D q, keepdim"),
            Sample((distinct(2, 3, 4), qs), {}, "dim=None: every entry"),
            Sample((distinct(2, 3, 4), np.array(0.25)), {"dim": None, "keepdim": True}, "dim=None keepdim"),
            Sample((distinct(4, 3).T, np.array([0.0, 1.0])), {"dim": 0, "interpolation": "nearest"}, "q 0 and 1"),
            Sample((distinct(5), np.array(0.5)), {"dim": 0, "interpolation": "nearest"}, "nearest, rank 2"),
            Sample((uniform(rng, ()), np.array(0.5)), {}, "0-D"),
            Sample((uniform(rng, ()), np.array(0.5)), {"dim": 0, "keepdim": True}, "0-D, dim=0"),
        ]
        x = distinct(3, 5)
        x[0, 1] = x[2, 3] = np.nan
        x[1] = np.nan
        if ignore_nan:
            out.append(Sample((x[[0, 2]], qs), {"dim": 1}, "NaNs ignored"))
            # an all-NaN row: NaN, and a NaN gradient for its slice here; torch routes its gradient to the first
            # sorted entry (a finite number for a NaN value): compared in tests/ops/test_linalg_products.py
            out.append(Sample((x, qs), {"dim": 1}, "an all-NaN row: NaN", torch=False))
        return out

    return generate


def _quantile_op(name, ignore_nan, **declaration):
    forward, vjp = _quantile_of(name, ignore_nan)
    return defop(
        name,
        family=FAMILY,
        inputs=("input", "q"),
        forward=forward,
        vjps=(vjp, NOT_DIFFERENTIABLE),
        samples=_quantile_samples(ignore_nan),
        torch_ref=lambda torch, input, q, dim=None, keepdim=False, interpolation="linear": getattr(torch, name)(
            input, q, dim, keepdim, interpolation=interpolation
        ),
        **declaration,
    )


quantile = _quantile_op(
    "quantile",
    False,
    method=True,
    doc="The q-th quantiles of input (all entries, or along ``dim``), between data points as ``interpolation`` says.",
)
nanquantile = _quantile_op(
    "nanquantile", True, method=True, doc="quantile ignoring NaNs: the q-th quantiles of the non-NaN entries."
)
__all__ += ["nanmedian", "mode", "quantile", "nanquantile"]


# == searching and counting: searchsorted, bucketize, bincount, histc, unique, unique_consecutive ===============
# None of these is differentiable, as in torch: integer positions and counts carry no gradient; histc's float
# counts get a zero one (piecewise constant); bincount's weights and unique's values, whose gradients torch does
# not define, refuse a tensor that requires grad (pass it detached).
def _check_side(op, right, side, out_int32) -> str:
    require_bool(op, "right", right)
    require_bool(op, "out_int32", out_int32)
    if side not in (None, "left", "right"):
        raise ValueError(f"{op}: argument 'side' expected None, 'left' or 'right', got {side!r}")
    if side is not None and (side == "right") != bool(right) and right:
        raise ValueError(f"{op}: arguments 'side' and 'right' expected the same side, got side={side!r} and right=True")
    return side or ("right" if right else "left")


def _check_searchsorted(sorted_sequence, input, sorter=None, out_int32=False, right=False, side=None):
    _check_side("searchsorted", right, side, out_int32)
    if sorted_sequence.ndim == 0:
        raise ValueError("searchsorted: argument 'sorted_sequence' expected at least 1 dim, got a 0-D tensor")
    lead = sorted_sequence.shape[:-1]
    if lead and input.shape[:-1] != lead:
        raise ValueError(
            f"searchsorted: argument 'input' expected leading dims {lead} (those of sorted_sequence "
            f"{sorted_sequence.shape}), got shape {input.shape}"
        )
    if sorter is not None:
        if sorter.dtype.kind not in "iu" or sorter.shape != sorted_sequence.shape:
            raise ValueError(
                f"searchsorted: argument 'sorter' expected integer positions of sorted_sequence's shape "
                f"{sorted_sequence.shape}, got {sorter.dtype} of shape {sorter.shape}"
            )
        n = sorted_sequence.shape[-1]
        if sorter.size and (sorter.min() < 0 or sorter.max() >= n):
            raise IndexError(f"searchsorted: argument 'sorter' expected values in [0, {n - 1}]")


def _searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """``torch.searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None)``
    (torch documents the values as ``values``; its parser takes them as ``input``): for each value, the position
    in its row of ``sorted_sequence`` (the last dim; a 1-D sequence serves every value) where it would be inserted
    keeping the order: before equal entries (``side='left'``) or after them (``right=True`` / ``side='right'``).
    ``sorter`` sorts an unsorted sequence. torch's binary search itself, vectorised (one step per bit of the
    length): a NaN value goes last, and a NaN in the sequence answers as torch's does (every comparison with it
    false)."""
    how: Any = _check_side("searchsorted", right, side, out_int32)
    seq = sorted_sequence if sorter is None else np.take_along_axis(sorted_sequence, sorter.astype(np.intp), -1)
    dtype = np.int32 if out_int32 else np.int64
    n = seq.shape[-1]
    lead = math.prod(seq.shape[:-1])
    rows = seq.reshape(lead, n)
    values = input.reshape(1, input.size) if seq.ndim == 1 else input.reshape(lead, input.shape[-1])
    lo = np.zeros(values.shape, np.intp)
    hi = np.full(values.shape, n, np.intp)
    for _ in range(n.bit_length() + 1):
        active = lo < hi
        if not active.any():
            break
        mid = (lo + hi) // 2
        entry = np.take_along_axis(rows, np.minimum(mid, n - 1), -1)
        after = ~(values < entry) if how == "right" else ~(values <= entry)  # torch's comparisons, NaN included
        lo = np.where(active & after, mid + 1, lo)
        hi = np.where(active & ~after, mid, hi)
    return lo.astype(dtype).reshape(input.shape)


def _searchsorted_samples(rng):
    seq = np.sort(uniform(rng, (6,)))
    ties = np.array([0.0, 1.0, 1.0, 1.0, 2.5])
    out = []
    for right in (False, True):
        out += [
            Sample((seq, uniform(rng, (2, 3)), None), {"right": right}, f"1-D, right={right}"),
            Sample((ties, np.array([1.0, 0.0, 2.5, 3.0, -1.0]), None), {"right": right}, f"ties, right={right}"),
        ]
    rows = np.sort(uniform(rng, (2, 3, 4)), axis=-1)
    out += [
        Sample((rows, uniform(rng, (2, 3, 5)), None), {"side": "right"}, "rows, side='right'"),
        Sample((np.array([1.0, 2.0, 3.0]), np.array([np.nan, 2.0, 5.0]), None), {}, "a NaN value goes last"),
        Sample((np.array([3.0, 1.0, 2.0]), np.array([2.0, 0.5]), np.array([1, 2, 0])), {"out_int32": True}, "sorter"),
        Sample((np.sort(transposed(rng, (4, 3)), axis=-1), transposed(rng, (4, 2)), None), {}, "non-contiguous"),
        Sample((seq, uniform(rng, ()), None), {}, "0-D values"),
        Sample((np.zeros(0), uniform(rng, (3,)), None), {}, "empty sequence"),
        Sample((seq, np.zeros((0, 2)), None), {}, "zero-size values"),
    ]
    return out


def _torch_searchsorted(torch, sorted_sequence, input, sorter=None, out_int32=False, right=False, side=None):
    return torch.searchsorted(
        sorted_sequence,
        input,
        out_int32=out_int32,
        right=right,
        side=side,
        sorter=None if sorter is None else sorter.long(),
    )


searchsorted = defop(
    "searchsorted",
    family=FAMILY,
    inputs=("sorted_sequence", "input", "sorter?"),
    forward=_searchsorted,
    vjps=(NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE),
    check=_check_searchsorted,
    samples=_searchsorted_samples,
    torch_ref=_torch_searchsorted,
)


def _check_bucketize(input, boundaries, out_int32=False, right=False):
    _check_side("bucketize", right, None, out_int32)
    if boundaries.ndim != 1:
        raise ValueError(f"bucketize: argument 'boundaries' expected a 1-D tensor, got shape {boundaries.shape}")


def _bucketize(input, boundaries, *, out_int32=False, right=False):
    """``torch.bucketize(input, boundaries, *, out_int32=False, right=False)``: the bucket of each entry,
    searchsorted(boundaries, input, right=right): boundaries[i-1] < x <= boundaries[i] (``right``: <= x <)."""
    return _searchsorted(boundaries, input, out_int32=out_int32, right=right)


bucketize = defop(
    "bucketize",
    family=FAMILY,
    inputs=("input", "boundaries"),
    forward=_bucketize,
    vjps=(NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE),
    check=_check_bucketize,
    samples=lambda rng: [
        Sample((s.inputs[1], s.inputs[0]), {k: v for k, v in s.attrs.items() if k != "side"}, s.label)
        for s in _searchsorted_samples(rng)
        if s.inputs[0].ndim == 1 and s.inputs[2] is None
    ],
    torch_ref=lambda torch, input, boundaries, out_int32=False, right=False: torch.bucketize(
        input, boundaries, out_int32=out_int32, right=right
    ),
)


def _check_bincount(input, weights=None, minlength=0):
    if input.dtype.kind not in "iu" or input.ndim != 1:
        raise TypeError(
            f"bincount: argument 'input' expected a 1-D integer tensor, got {input.dtype} of shape {input.shape}"
        )
    if input.size and input.min() < 0:
        raise ValueError(f"bincount: argument 'input' expected non-negative values, got {input.min()}")
    if weights is not None and weights.shape != input.shape:
        raise ValueError(f"bincount: argument 'weights' expected input's shape {input.shape}, got {weights.shape}")
    integer("bincount", "minlength", minlength, at_least=0)


def _bincount(input, weights=None, minlength=0):
    """``torch.bincount(input, weights=None, minlength=0)``: how often each value 0, 1, ... occurs (at least
    ``minlength`` bins); with ``weights`` their sums, in the weights' float dtype (float64 for integer ones)."""
    counts = np.bincount(input, weights, minlength=minlength)
    if weights is None:
        return counts.astype(np.int64)
    return counts.astype(weights.dtype if weights.dtype.kind == "f" else np.float64)


bincount = defop(
    "bincount",
    method=True,
    family=FAMILY,
    inputs=("input", "weights?"),
    forward=_bincount,
    vjps=(NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE),
    check=_check_bincount,
    samples=lambda rng: [
        Sample((np.array([0, 3, 3, 1]), None), {}, "counts"),
        Sample((np.array([2, 0, 2]), uniform(rng, (3,))), {}, "weights"),
        Sample((np.array([1, 1]), None), {"minlength": 5}, "minlength"),
        Sample((np.array([4, 0, 4, 2])[::2], uniform(rng, (4,))[::2]), {"minlength": 2}, "non-contiguous"),
        Sample((np.zeros(0, np.int64), None), {"minlength": 3}, "empty"),
    ],
    torch_ref=lambda torch, input, weights=None, minlength=0: torch.bincount(input, weights, minlength),
)


def _histc_range(input, bins, min, max) -> tuple:
    if input.dtype.kind != "f":
        raise TypeError(f"histc: argument 'input' expected a floating tensor (as torch), got dtype {input.dtype}")
    integer("histc", "bins", bins, at_least=1)
    for name, v in (("min", min), ("max", max)):
        if isinstance(v, bool) or np.ndim(v) != 0 or np.asarray(v).dtype.kind not in "iuf":
            raise TypeError(f"histc: argument '{name}' expected a number, got {type(v).__name__} {v!r}")
    low, high = float(min), float(max)
    if low > high:
        raise ValueError(f"histc: arguments 'min' and 'max' expected min <= max, got min={min} and max={max}")
    if low == high and input.size:  # torch: the data's range, widened by 1 each way when it is one value
        low, high = float(np.min(input)), float(np.max(input))
    if low == high:
        low, high = low - 1, high + 1
    if not (np.isfinite(low) and np.isfinite(high)):
        raise ValueError(f"histc: the range [{low}, {high}] is not finite")
    return low, high


def _histc(input, bins=100, min=0, max=0):
    """``torch.histc(input, bins=100, min=0, max=0)``: counts of the entries in ``bins`` equal bins over
    [min, max] (the data's range when min == max), in input's dtype; entries outside are not counted, ``max``
    itself falls in the last bin."""
    low, high = _histc_range(input, bins, min, max)
    x = np.reshape(input, (-1,))
    x = x[(x >= low) & (x <= high)]
    edges = np.linspace(low, high, bins + 1).astype(input.dtype)
    positions = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
    return np.bincount(positions, minlength=bins).astype(input.dtype)


histc = defop(
    "histc",
    method=True,
    family=FAMILY,
    inputs=("input",),
    forward=_histc,
    # counts are piecewise constant in the input: a zero gradient (as sign's or floor's), and torch's output
    # takes none, so histc of a tensor that requires grad works as in torch
    vjps=(lambda g, ans, input, bins=100, min=0, max=0: np.zeros_like(input),),
    check=lambda input, bins=100, min=0, max=0: _histc_range(input, bins, min, max),
    samples=lambda rng: [
        Sample((uniform(rng, (20,)),), {"bins": 4, "min": -1.5, "max": 1.5}, "range, outside entries"),
        Sample((uniform(rng, (3, 5)),), {"bins": 3}, "data range"),
        Sample((np.array([0.25, 1.75, 0.6]),), {"bins": 2, "min": 0, "max": 1}, "one entry past max"),
        Sample((transposed(rng, (3, 4)),), {"bins": 5, "min": -2, "max": 2}, "non-contiguous"),
        Sample((np.zeros(0),), {"bins": 3}, "empty"),
    ],  # entries on a bin edge (no finite differences there) are checked in tests/ops/test_sorting.py
    torch_ref=lambda torch, input, bins=100, min=0, max=0: torch.histc(input, bins, min, max),
)


def _check_unique(op, input, flags, dim) -> None:
    for name, value in flags.items():
        require_bool(op, name, value)
    if dim is not None:
        if input.ndim == 0:
            raise ValueError(f"{op}: argument 'dim' expected None for a 0-D input, got {dim}")
        normalize_dim(op, dim, input.ndim)


def _runs_of(input, starts, dim, return_inverse, return_counts):
    """(values, inverse?, counts?) of the runs that begin where ``starts`` (bool, one per slice along dim) holds."""
    first = np.flatnonzero(starts)
    if dim is None:
        values = np.reshape(input, (-1,))[first]
        inverse_shape = input.shape
    else:
        axis = normalize_dim("unique", dim, input.ndim)
        values = np.take(input, first, axis=axis)
        inverse_shape = (input.shape[axis],)
    out = [values]
    if return_inverse:
        out.append((np.cumsum(starts) - 1).astype(np.int64).reshape(inverse_shape))
    if return_counts:
        out.append(np.diff(np.append(first, starts.size)).astype(np.int64))
    return out[0] if len(out) == 1 else tuple(out)


def _slices(input, dim):
    """The input as rows: one row per entry (dim None) or per slice along dim."""
    if dim is None:
        return np.reshape(input, (-1, 1))
    moved = np.moveaxis(input, normalize_dim("unique", dim, input.ndim), 0)
    return moved.reshape(moved.shape[0], math.prod(moved.shape[1:]))  # (an empty dim: no rows, not -1)


def _unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """``torch.unique_consecutive(input, return_inverse=False, return_counts=False, dim=None)``: one entry (or
    slice along ``dim``) per run of equal consecutive ones; ``inverse``: the run of each, ``counts``: each run's
    length. NaN equals nothing, so every NaN starts a run."""
    rows = _slices(input, dim)
    starts = np.ones(rows.shape[0], bool)
    starts[1:] = np.any(rows[1:] != rows[:-1], axis=1) if rows.shape[1] else False
    return _runs_of(input, starts, dim, return_inverse, return_counts)


def _unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """``torch.unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None)``: the distinct
    entries (or slices along ``dim``) in ascending order (lexicographic for slices), also for sorted=False (what
    torch's CPU kernel returns); NaN entries are each distinct, last."""
    rows = _slices(input, dim)
    order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(rows.shape[0])  # stable, NaN last
    ranked = rows[order]
    starts = np.ones(rows.shape[0], bool)
    starts[1:] = np.any(ranked[1:] != ranked[:-1], axis=1) if rows.shape[1] else False
    if dim is None:
        source = np.reshape(input, (-1,))[order]
    else:  # the slices along dim in sorted order
        axis = normalize_dim("unique", dim, input.ndim)
        source = np.moveaxis(np.moveaxis(input, axis, 0)[order], 0, axis)
    result = _runs_of(source, starts, dim, return_inverse, return_counts)
    if not return_inverse:
        return result
    result = list(result)
    inverse = np.empty(rows.shape[0], np.int64)
    inverse[order] = result[1].reshape(-1)
    result[1] = inverse.reshape(input.shape if dim is None else (rows.shape[0],))
    return tuple(result)


def _unique_samples(rng, dims=True):
    ties = np.array([[2.0, 1.0, 2.0], [1.0, 1.0, 3.0]])
    out = []
    for inverse, counts in ((False, False), (True, False), (False, True), (True, True)):
        out.append(
            Sample((ties,), {"return_inverse": inverse, "return_counts": counts}, f"inverse={inverse} counts={counts}")
        )
    rows = np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 5.0], [1.0, 2.0]])
    out += [
        Sample((rows,), {"dim": 0, "return_inverse": True, "return_counts": True}, "rows, dim=0"),
        Sample((rows.T.copy(),), {"dim": -1, "return_counts": True}, "columns, dim=-1"),
        Sample((np.array([1.0, np.nan, np.nan, 1.0]),), {"return_counts": True}, "NaN"),
        Sample((np.array([3, 3, 1, 3]),), {"return_inverse": True}, "int64"),
        Sample((transposed(rng, (3, 2)).round(),), {}, "non-contiguous"),
        Sample((np.array(2.0),), {"return_inverse": True}, "0-D"),
        Sample((np.zeros((0, 2)),), {"return_counts": True}, "zero-size"),
    ]
    return out


def _unique_op(name, forward, torch_ref):
    """unique / unique_consecutive: the distinct values (and inverse, counts on request); not differentiable."""
    return one_input_op(
        name,
        FAMILY,
        forward,
        NOT_DIFFERENTIABLE,
        method=True,
        outputs="variable",
        check=lambda input, dim=None, **flags: _check_unique(name, input, flags, dim),
        samples=_unique_samples,
        torch_ref=torch_ref,
    )


unique = _unique_op(
    "unique",
    _unique,
    lambda torch, input, sorted=True, return_inverse=False, return_counts=False, dim=None: torch.unique(
        input, sorted, return_inverse, return_counts, dim
    ),
)
# torch_ref by keyword: torch 2.13's unique_consecutive misreads positional flags (return_inverse=True gives no inverse)
unique_consecutive = _unique_op(
    "unique_consecutive",
    _unique_consecutive,
    lambda torch, input, return_inverse=False, return_counts=False, dim=None: torch.unique_consecutive(
        input, return_inverse=return_inverse, return_counts=return_counts, dim=dim
    ),
)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_stable_top(g, rec, x, k: int, axis: int, largest: bool):
    """(values, int64 indices) in the forward's stable order: ONNX's TopK breaks ties by the lower index, as the
    forward does in both directions."""
    if rec.inputs[0].dtype == np.bool_:  # TopK takes numbers: sort the bools as int8, then cast back
        values, indices = g.op("TopK", g.op("Cast", x, to=3), g.ints([k]), axis=axis, largest=int(largest), outputs=2)
        return g.op("Cast", values, to=9), indices  # 3: INT8, 9: BOOL
    return g.op("TopK", x, g.ints([k]), axis=axis, largest=int(largest), sorted=1, outputs=2)


def _onnx_sorted(g, rec, input):
    shape = rec.inputs[0].shape
    if not shape or 0 in shape:
        raise NotExportable("a 0-D or empty input has no lowering")
    a = rec.attributes
    axis = axis_of(int(a.get("dim", -1)), len(shape))
    if rec.op_name == "topk":
        k, largest = int(a["k"]), bool(a.get("largest", True))
    else:
        k, largest = shape[axis], bool(a.get("descending", False))
    values, indices = _onnx_stable_top(g, rec, input, k, axis, largest)
    return indices if rec.op_name == "argsort" else (values, indices)


def _onnx_picked(g, rec, input, position):
    """(values, indices) at ``position`` (the int64 name of a keepdim-shaped tensor) of the ascending stable
    order along the op's dim, as the forward's _picked."""
    shape = rec.inputs[0].shape
    if not shape or 0 in shape:
        raise NotExportable("a 0-D or empty input has no lowering")
    axis = axis_of(int(rec.attributes.get("dim", -1)), len(shape))
    values, indices = _onnx_stable_top(g, rec, input, shape[axis], axis, False)
    values = g.op("GatherElements", values, position, axis=axis)
    indices = g.op("GatherElements", indices, position, axis=axis)
    if not rec.attributes.get("keepdim", False):
        values, indices = (g.op("Squeeze", v, g.ints([axis])) for v in (values, indices))
    return values, indices


def _onnx_slice_shape(rec) -> list:
    shape = list(rec.inputs[0].shape)
    if shape:
        shape[axis_of(int(rec.attributes.get("dim", -1)), len(shape))] = 1
    return shape


def _onnx_kthvalue(g, rec, input):
    position = g.const(np.full(_onnx_slice_shape(rec), int(rec.attributes["k"]) - 1, np.int64))
    return _onnx_picked(g, rec, input, position)


def _onnx_median_dim(g, rec, input):
    shape = rec.inputs[0].shape
    if not shape or 0 in shape:
        raise NotExportable("a 0-D or empty input has no lowering")
    axis = axis_of(int(rec.attributes.get("dim", -1)), len(shape))
    n = shape[axis]
    middle = g.const(np.full(_onnx_slice_shape(rec), (n - 1) // 2, np.int64))
    if np.dtype(rec.inputs[0].dtype).kind != "f":
        return _onnx_picked(g, rec, input, middle)
    # NaNs sort last in input order: a slice holding some gives its first NaN, at n - (number of NaNs)
    nans = g.op("ReduceSum", g.op("Cast", g.op("IsNaN", input), to=7), g.ints([axis]), keepdims=1)  # 7: INT64
    has = g.op("Greater", nans, g.const(np.int64(0)))
    return _onnx_picked(g, rec, input, g.op("Where", has, g.op("Sub", g.const(np.int64(n)), nans), middle))


def _onnx_median(g, rec, input):
    if rec.attributes.get("dim") is not None:  # median(input, dim): (values, indices), as median_dim
        return _onnx_median_dim(g, rec, input)
    shape, dtype = rec.inputs[0].shape, rec.inputs[0].dtype
    size = int(np.prod(shape))
    if size == 0:
        raise NotExportable("an empty input has no lowering")
    flat = g.op("Reshape", input, g.ints([-1]))
    values = g.op("TopK", flat, g.ints([size]), axis=0, largest=0, sorted=1, outputs=2)[0]
    middle = g.op("Gather", values, g.const(np.int64((size - 1) // 2)), axis=0)
    if np.dtype(dtype).kind != "f":
        return middle
    any_nan = g.op(
        "Greater", g.op("ReduceMax", g.op("Cast", g.op("IsNaN", flat), to=6), keepdims=0), g.const(np.int32(0))
    )
    return g.op("Where", any_nan, g.const(np.array(np.nan, dtype)), middle)


def _onnx_before(g, a, b, dtype) -> str:
    """a < b in numpy's sort order, NaN last (bool)."""
    less = g.op("Less", a, b)
    if np.dtype(dtype).kind != "f":
        return less
    return g.op("Or", less, g.op("And", g.op("IsNaN", b), g.op("Not", g.op("IsNaN", a))))


def _onnx_searchsorted(g, rec, *tensors):
    """searchsorted (sorted_sequence, input, sorter) and bucketize (input, boundaries): in a sorted row the
    insertion point is a count -- of the entries before the value (side 'left') or not after it ('right'), in
    numpy's order (NaN last) -- so one broadcast comparison of every value with its row, summed (memory: values
    x row length)."""
    bucketize = rec.op_name == "bucketize"
    seq, values, sorter = (tensors[1], tensors[0], None) if bucketize else tensors
    seq_spec, value_spec = (rec.inputs[1], rec.inputs[0]) if bucketize else rec.inputs[:2]
    a = rec.attributes
    side = _check_side(rec.op_name, a.get("right", False), a.get("side"), a.get("out_int32", False))
    dtype = np.result_type(seq_spec.dtype, value_spec.dtype)
    row, value = cast_to(g, seq, seq_spec.dtype, dtype), cast_to(g, values, value_spec.dtype, dtype)
    if sorter is not None:
        row = g.op("GatherElements", row, cast_to(g, sorter, rec.inputs[2].dtype, np.int64), axis=-1)
    if len(seq_spec.shape) > 1:  # (..., n) rows against (..., m) values: (..., m, n)
        row = g.op("Unsqueeze", row, g.ints([-2]))
    value = g.op("Unsqueeze", value, g.ints([-1]))
    counted = _onnx_before(g, row, value, dtype) if side == "left" else g.op("Not", _onnx_before(g, value, row, dtype))
    count = g.op("ReduceSum", g.op("Cast", counted, to=7), g.ints([-1]), keepdims=0)  # 7: INT64
    return g.op("Cast", count, to=6) if a.get("out_int32", False) else count  # 6: INT32


def _onnx_linspace(g, low, high, num: int) -> str:
    """np.linspace(low, high, num) of two float64 0-D names, as numpy computes it (num >= 2)."""
    div = scalar(g, num - 1, np.float64)
    ramp = g.const(np.arange(num, dtype=np.float64))
    delta = g.op("Sub", high, low)
    step = g.op("Div", delta, div)
    tiny = g.op("Mul", g.op("Div", ramp, div), delta)  # numpy's branch for a step that underflows to 0
    y = g.op("Add", g.op("Where", g.op("Equal", step, scalar(g, 0, np.float64)), tiny, g.op("Mul", ramp, step)), low)
    head = g.op("Slice", y, g.ints([0]), g.ints([num - 1]), g.ints([0]))
    return g.op("Concat", head, g.op("Unsqueeze", high, g.ints([0])), axis=0)  # the last edge is high itself


def _onnx_histc(g, rec, input):
    """Each entry in [low, high] counted in bin (number of edges <= it) - 1, clipped to the last bin; the range
    min == max is the data's (widened by 1 each way when it is one value), its edges computed in the graph as
    numpy's linspace; a NaN or infinite data range gives NaN counts (the forward raises)."""
    shape, dtype = rec.inputs[0].shape, rec.inputs[0].dtype
    a = rec.attributes
    bins, low, high = int(a.get("bins", 100)), float(a.get("min", 0)), float(a.get("max", 0))
    flat = g.op("Reshape", input, g.ints([-1]))
    bad = None
    if low == high and 0 not in shape:
        lo, hi = (
            g.op("Cast", extremum(g, op_type, flat, [0], 0, dtype), to=11) for op_type in ("ReduceMin", "ReduceMax")
        )  # 11: DOUBLE
        same = g.op("Equal", lo, hi)
        lo = g.op("Where", same, g.op("Sub", lo, scalar(g, 1, np.float64)), lo)
        hi = g.op("Where", same, g.op("Add", hi, scalar(g, 1, np.float64)), hi)
        bad = g.op("Or", g.op("IsNaN", g.op("Sub", hi, lo)), g.op("IsInf", g.op("Sub", hi, lo)))
        edges = cast_to(g, _onnx_linspace(g, lo, hi, bins + 1), np.float64, dtype)
        lo, hi = (cast_to(g, v, np.float64, dtype) for v in (lo, hi))
    else:
        low, high = (low - 1, high + 1) if low == high else (low, high)
        edges = g.const(np.linspace(low, high, bins + 1).astype(dtype))
        lo, hi = scalar(g, low, dtype), scalar(g, high, dtype)
    x = g.op("Unsqueeze", flat, g.ints([-1]))  # (N, 1)
    inside = g.op("And", g.op("GreaterOrEqual", x, lo), g.op("LessOrEqual", x, hi))
    count = g.op("ReduceSum", g.op("Cast", g.op("LessOrEqual", edges, x), to=7), g.ints([-1]), keepdims=1)
    position = g.op(
        "Max",
        g.op("Min", g.op("Sub", count, g.const(np.array(1, np.int64))), g.const(np.array(bins - 1, np.int64))),
        g.const(np.array(0, np.int64)),
    )
    hits = g.op("And", g.op("Equal", position, g.const(np.arange(bins, dtype=np.int64))), inside)  # (N, bins)
    counts = g.op("ReduceSum", g.op("Cast", hits, to=7), g.ints([0]), keepdims=0)
    counts = cast_to(g, counts, np.int64, dtype)
    return counts if bad is None else g.op("Where", bad, scalar(g, np.nan, dtype), counts)


_SIZED_BY_VALUES = "its output's size depends on the input's values, and the export records (and bakes) one size"
for _op in (sort, argsort, topk):
    lowering(_op, _onnx_sorted)
for _op in (searchsorted, bucketize):
    lowering(
        _op,
        _onnx_searchsorted,
        edge_difference="a NaN in the sequence or among the values: the forward is torch's binary search, whose "
        "answer there depends on where it probes; the lowering counts in numpy's order (NaN last)",
    )
lowering(histc, _onnx_histc)
for _op in (bincount, unique, unique_consecutive):
    lowering(_op, not_exportable=_SIZED_BY_VALUES)
lowering(kthvalue, _onnx_kthvalue)
lowering(median_dim, _onnx_median_dim)
lowering(median, _onnx_median)
for _op in (quantile, nanquantile, nanmedian, mode):
    lowering(
        _op, not_exportable="its lowering (a TopK sort and the forward's interpolation / tie rules) is not written yet"
    )
