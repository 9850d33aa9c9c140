"""Sorting and selection, as in PyTorch 2.13: sort, argsort, topk, kthvalue, median, median_dim.

- sort(input, dim=-1, descending=False, stable=False) -> (values, indices); argsort returns the indices
  (int64, not differentiable). Sorting is always stable, whatever ``stable`` says: equal entries keep their
  input order, ascending and descending alike -- what torch guarantees with stable=True and what its CPU
  kernel does anyway. NaN sorts as the largest value (last ascending, first descending), as in torch.
- topk(input, k, dim=-1, largest=True, sorted=True) -> (values, indices): the first k of the stable sort
  (descending when ``largest``). With sorted=False torch's order is unspecified; this returns the sorted
  order too (one of the orders torch allows).
- kthvalue(input, k, dim=-1, keepdim=False) -> (values, indices): the k-th smallest (k from 1) of the stable
  ascending sort.
- median(input) -> the lower median of all entries (for an even count the smaller of the two middle
  values), NaN when any entry is NaN or there is none (torch's). Its gradient is shared evenly among the
  entries equal to the median (among the NaN entries for a NaN median): torch's median() backward.
- median_dim(input, dim=-1, keepdim=False) -> (values, indices): torch.median(input, dim, keepdim). The two
  are separate ops because an op has a fixed number of outputs, and torch's one name returns a single
  Tensor without ``dim`` but a (values, indices) pair with it, with different gradient conventions (shared
  among ties without dim, routed to the one index with it). ``median_dim`` spells out which one is meant. A
  slice holding a NaN gives NaN and the index of its FIRST NaN (torch's); otherwise the lower median of the
  stable ascending sort.
- Gradients: the values' gradient goes to the entries they were read from (sort: the inverse permutation
  as a gather; topk / kthvalue / median_dim: a scatter into zeros at the returned indices, ops.scatter_add
  on Tensors). The rules are linear in g and recorded with gather / scatter_add, so the second order is exact.
- Ties: where torch documents or deterministically shows its choice (sort, argsort, both orders), the
  indices match it. Which of several tied entries topk, kthvalue and median_dim return is unspecified in
  torch (its CPU kernels use a partial sort: it picks e.g. index 2 of tied entries 0, 2, 3); here it is
  always the stable sort's (lowest index first among the ascending ties, the same for descending), and the
  samples checked against torch have no ties there. The values agree either way.
- Errors: dims out of range, a k outside [0, size] (topk) or [1, size] (kthvalue), a reduction over an empty
  dim (kthvalue, median_dim), non-bool flags: each names the op, the argument, the expected and what came.
- 0-D inputs count as one entry along dim 0 / -1, as in torch; zero-size inputs work when no slice is empty
  (or, for sort and topk, always).
"""

__all__ = ["sort", "argsort", "topk", "kthvalue", "median", "median_dim"]

import numpy as np

from tape.registry import NOT_DIFFERENTIABLE, Sample, defop

from ._numerics import quiet
from ._samples import transposed, uniform
from ._validation import normalize_dim, require
from .indexing import scatter_add

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


# == appended: median(input, dim, keepdim) is one op (torch's), nanmedian, mode, quantile, nanquantile ============
def _values(x):
    """The values of an array or a Tensor (the quantile weights are constants of the sort)."""
    return x if isinstance(x, np.ndarray) else np.asarray(x.data)


def _whole_or_dim(name, whole, whole_vjp, along, along_vjp):
    """One op for torch's two forms: without ``dim`` one value of every entry (its rule ``whole_vjp``), with it
    the named (values, indices) along dim (the gradient to the indices)."""

    def forward(input, dim=None, keepdim=False):
        if dim is None:
            _check_flag(name, "keepdim", keepdim)
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
median = defop(
    "median",
    family=FAMILY,
    inputs=("input",),
    forward=_median_forward,
    vjps=(_median_rule,),
    outputs=("values", "indices"),
    samples=lambda rng: _median_samples(rng) + _median_dim_samples(rng),
    torch_ref=_torch_whole_or_dim("median"),
    notes="median(input) or median(input, dim, keepdim) -> (values, indices), as torch; median_dim is the latter",
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
nanmedian = defop(
    "nanmedian",
    family=FAMILY,
    inputs=("input",),
    forward=_nanmedian_forward,
    vjps=(_nanmedian_rule,),
    outputs=("values", "indices"),
    samples=_nanmedian_samples,
    torch_ref=_torch_whole_or_dim("nanmedian"),
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


mode = defop(
    "mode",
    family=FAMILY,
    inputs=("input",),
    forward=_mode,
    vjps=(_scattered_back("mode"),),
    outputs=("values", "indices"),
    samples=_mode_samples,
    torch_ref=lambda torch, input, dim=-1, keepdim=False: tuple(torch.mode(input, dim, keepdim)),
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
    _check_flag(op, "keepdim", keepdim)
    require(interpolation in _INTERPOLATIONS, op, "interpolation", f"one of {_INTERPOLATIONS}", repr(interpolation))
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
            # sorted entry (a finite number for a NaN value): compared in tests/test_ops_linalg_products.py
            out.append(Sample((x, qs), {"dim": 1}, "an all-NaN row: NaN", torch=False))
        return out

    return generate


def _quantile_op(name, ignore_nan):
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
    )


quantile = _quantile_op("quantile", False)
nanquantile = _quantile_op("nanquantile", True)
__all__ += ["nanmedian", "mode", "quantile", "nanquantile"]
