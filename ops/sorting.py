"""Sorting and selection, as in PyTorch 2.13: sort, argsort, topk, kthvalue, median, median_dim. Each op's
signature and torch conventions (ties, NaN, gradients) are its notes (``_CASE_LAW``)."""

__all__ = ["sort", "argsort", "topk", "kthvalue", "median", "median_dim"]

import numpy as np

from tape.registry import NOT_DIFFERENTIABLE, Sample, defop

from ._notes import case_law
from ._samples import transposed, uniform
from ._validation import normalize_dim
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
def _check_flag(op: str, argument: str, value) -> None:
    if value is not True and value is not False and not isinstance(value, np.bool_):
        raise TypeError(f"{op}: argument '{argument}' expected a bool, got {type(value).__name__} {value!r}")


def _check_k(op: str, k, size: int, low: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise TypeError(f"{op}: argument 'k' expected an int, got {type(k).__name__} {k!r}")
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


# -- sort / argsort ----------------------------------------------------------------------------------------------
def _check_sort(op):
    def check(input, dim=-1, descending=False, stable=False):
        normalize_dim(op, dim, input.ndim)
        _check_flag(op, "descending", descending)
        if stable is not None:  # torch takes None for its default
            _check_flag(op, "stable", stable)

    return check


def _sort(input, dim=-1, descending=False, stable=False):
    axis = normalize_dim("sort", dim, input.ndim)
    if input.ndim == 0:
        return input.copy(), np.zeros((), np.int64)
    indices = _stable_order(input, axis, bool(descending))
    return np.take_along_axis(input, indices, axis), indices


def _sort_vjp(g, ans, input, dim=-1, descending=False, stable=False):
    g_values = g[0]
    if g_values is None:
        return np.zeros(input.shape, input.dtype)
    if input.ndim == 0:
        return g_values
    axis = normalize_dim("sort", dim, input.ndim)
    indices = np.asarray(ans[1])
    if isinstance(g_values, np.ndarray):
        out = np.empty(input.shape, g_values.dtype)
        np.put_along_axis(out, indices, g_values, axis)
        return out
    # Tensors: gather through the inverse permutation (the sort of the indices), recorded
    return np.take_along_axis(g_values, np.argsort(indices, axis=axis, kind="stable"), axis)


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


sort = defop(
    "sort",
    family=FAMILY,
    inputs=("input",),
    forward=_sort,
    vjps=(_sort_vjp,),
    outputs=("values", "indices"),
    check=_check_sort("sort"),
    samples=_sort_samples,
    torch_ref=lambda torch, input, dim=-1, descending=False, stable=False: torch.sort(
        input, dim=dim, descending=descending, stable=stable
    ),
    method=True,
    notes=case_law(_CASE_LAW, "sort"),
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
    check=_check_sort("argsort"),
    samples=_sort_samples,
    torch_ref=lambda torch, input, dim=-1, descending=False, stable=False: torch.argsort(
        input, dim=dim, descending=descending, stable=stable
    ),
    method=True,
    notes=case_law(_CASE_LAW, "argsort"),
)


# -- topk --------------------------------------------------------------------------------------------------------
def _check_topk(input, k, dim=-1, largest=True, sorted=True):
    axis = normalize_dim("topk", dim, input.ndim)
    _check_k("topk", k, _size(input, axis), 0)
    _check_flag("topk", "largest", largest)
    _check_flag("topk", "sorted", sorted)


def _topk(input, k, dim=-1, largest=True, sorted=True):
    axis = normalize_dim("topk", dim, input.ndim)
    _check_k("topk", k, _size(input, axis), 0)
    if input.ndim == 0:  # torch returns the entry for k = 0 and 1 alike
        return input.copy(), np.zeros((), np.int64)
    indices = np.take(_stable_order(input, axis, bool(largest)), np.arange(k), axis=axis)
    return np.take_along_axis(input, indices, axis), indices


def _topk_vjp(g, ans, input, k, dim=-1, largest=True, sorted=True):
    g_values = g[0]
    if g_values is None:
        return np.zeros(input.shape, input.dtype)
    if input.ndim == 0:
        return g_values
    return _put_along(input.shape, normalize_dim("topk", dim, input.ndim), np.asarray(ans[1]), g_values)


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


topk = defop(
    "topk",
    family=FAMILY,
    inputs=("input",),
    forward=_topk,
    vjps=(_topk_vjp,),
    outputs=("values", "indices"),
    check=_check_topk,
    samples=_topk_samples,
    torch_ref=_torch_topk,
    method=True,
    notes=case_law(_CASE_LAW, "topk"),
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


def _scattered_back(name):
    def vjp(g, ans, input, *args, dim=-1, keepdim=False, **attrs):
        g_values = g[0]
        if g_values is None:
            return np.zeros(input.shape, input.dtype)
        if input.ndim == 0:
            return g_values
        axis = normalize_dim(name, dim, input.ndim)
        indices = np.asarray(ans[1])
        if not keepdim:
            g_values, indices = np.expand_dims(g_values, axis), np.expand_dims(indices, axis)
        return _put_along(input.shape, axis, indices, g_values)

    vjp.__name__ = f"_{name}_vjp"
    return vjp


def _check_reduced(op, input, dim, keepdim):
    axis = normalize_dim(op, dim, input.ndim)
    _check_flag(op, "keepdim", keepdim)
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


kthvalue = defop(
    "kthvalue",
    family=FAMILY,
    inputs=("input",),
    forward=_kthvalue,
    vjps=(_scattered_back("kthvalue"),),
    outputs=("values", "indices"),
    check=_check_kthvalue,
    samples=_kthvalue_samples,
    torch_ref=lambda torch, input, k, dim=-1, keepdim=False: torch.kthvalue(input, k, dim, keepdim),
    method=True,
    notes=case_law(_CASE_LAW, "kthvalue"),
)


def _check_median_dim(input, dim=-1, keepdim=False):
    _check_reduced("median_dim", input, dim, keepdim)


def _median_dim(input, dim=-1, keepdim=False):
    axis = _check_reduced("median_dim", input, dim, keepdim)
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


median_dim = defop(
    "median_dim",
    family=FAMILY,
    inputs=("input",),
    forward=_median_dim,
    vjps=(_scattered_back("median_dim"),),
    outputs=("values", "indices"),
    check=_check_median_dim,
    samples=_median_dim_samples,
    torch_ref=lambda torch, input, dim=-1, keepdim=False: torch.median(input, dim, keepdim),
    notes=case_law(_CASE_LAW, "median_dim"),
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
    x, value = (input, ans) if isinstance(input, np.ndarray) else (input.data, ans.data)
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
        # the exact value is 0 (the gradient is empty); tests/test_ops_sorting.py checks value and gradient
        Sample((uniform(rng, (0, 3)),), {}, "zero-size: NaN", torch=False),
    ]


median = defop(
    "median",
    family=FAMILY,
    inputs=("input",),
    forward=_median,
    vjps=(_median_vjp,),
    samples=_median_samples,
    torch_ref=lambda torch, input: torch.median(input),
    notes=case_law(
        _CASE_LAW, "median", "torch.median(input) without dim; median_dim is torch.median(input, dim, keepdim)"
    ),
)
