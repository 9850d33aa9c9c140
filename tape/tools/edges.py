"""The edge values every op is held to: NaN, +-inf, +-0, huge, subnormal (and division by zero where they pair),
and the empty tensor. One list, read by the op tests (tests/ops/test_elementwise.py, test_activation.py) and by
the coverage matrix's export column, so an exported model is checked where the forward is.

``EDGE`` holds the values per float dtype (float32 takes its own huge and subnormal ones). ``grid_samples(op)``
builds the grids the elementwise, binary and reduction tests run (unary ops on every value, binary ops on every
pair, reductions over rows mixing them); ``edge_samples(op)`` is those for the three families and, for any other
op, its own samples with their floating entries replaced by the edge values, in the order of the sample's own
values (so a sorted sequence stays sorted), in as many versions as it takes to use every value -- plus the empty
version of each (every input cut to length 0 along its first axis). ``dtype_samples(op)``: the op's samples
in each integer dtype and bool, for the checks that hold a lowering to every dtype the op takes.
"""

from __future__ import annotations

import numpy as np

from ..samples import Sample
from .verify import op_samples

__all__ = [
    "EDGE",
    "GRID_FAMILIES",
    "INTEGER_DTYPES",
    "in_dtype",
    "sample_in",
    "grid_samples",
    "edge_samples",
    "dtype_samples",
    "export_cases",
    "flat_inputs",
    "dtype_of",
]

EDGE = {
    np.float64: (0.0, -0.0, 0.5, -1.5, 2.0, np.inf, -np.inf, np.nan, 1e300, -1e300, 1e-310, -1e-310),
    np.float32: (0.0, -0.0, 0.5, -1.5, 2.0, np.inf, -np.inf, np.nan, 3e38, -3e38, 1e-40, -1e-40),
}
GRID_FAMILIES = ("elementwise", "binary", "reduce")
# rows for the reductions: each mixes edge values (cancelling huge entries, inf - inf, NaN, 0 and a divisor)
_ROWS = (
    (0.0, 0.0), (np.inf, -np.inf), (np.inf, np.inf), (-np.inf, -np.inf), (np.nan, 1.0), (1e300, 1e300),
    (-1e300, 1e300), (0.0, np.inf), (0.0, -1.5), (1e-310, 2.0), (2.0, 0.5),
)  # fmt: skip


def in_dtype(array: np.ndarray, dtype) -> np.ndarray:
    """A float64 edge array in ``dtype``: float32 takes its own huge and subnormal values in their places."""
    if array.dtype.kind != "f" or np.dtype(dtype) == np.float64:
        return array
    for big, small in zip(EDGE[np.float64], EDGE[np.float32], strict=True):
        array = np.where(array == big, small, array) if big != 0 and np.isfinite(big) else array
    return array.astype(dtype)


def _attr_sets(op) -> list[dict]:
    sets: list[dict] = []
    for sample in op_samples(op):
        if sample.attrs not in sets:
            sets.append(sample.attrs)
    return sets


def grid_samples(op) -> list[Sample]:
    """The edge grid of an elementwise, binary or reduction op (float64): unary ops on every edge value, binary
    ops on every pair (same-shape operands), reductions over rows mixing them (along the last dim and all)."""
    edge = np.array(EDGE[np.float64])
    a, b = (v.ravel() for v in np.meshgrid(edge, edge))
    if op.family == "reduce":
        extra = {"correction": 1} if op.name in ("var", "std") else {}
        return [Sample((np.array(_ROWS),), {"dim": dim, **extra}, f"edge rows, dim={dim}") for dim in (-1, None)]
    special = {
        "where": (np.arange(a.size) % 3 == 0, a, b),
        "lerp": (a, b, np.resize(np.array([0.0, 0.25, 0.5, 1.0, 1.5, -0.5]), a.size)),
        "addcmul": (a, b, b[::-1].copy()),
        "addcdiv": (a, b, b[::-1].copy()),
        # tensor bounds: min over the edge grid, max over a few values and the edges
        "clamp": (a, b, np.resize(np.array([1.0, -0.5, 2.0, np.inf, -np.inf, np.nan, 0.0]), a.size)),
    }
    arrays = special.get(op.name) or ((a, b) if op.n_inputs == 2 else (edge,))
    return [Sample(arrays, attrs, f"edge grid {attrs}") for attrs in _attr_sets(op)]


_FILL = np.sort([v for v in EDGE[np.float64] if not 1e30 < abs(v) < np.inf])  # -inf ... inf, NaN last; no huge


def _windows(n: int) -> list[int]:
    """Where the stretches of ``_FILL`` an array of ``n`` entries takes start, so that together they hold every
    value (one stretch, spread with repeats, for n >= len(_FILL))."""
    free = _FILL.size - n
    return [0] if free <= 0 else sorted({*range(0, free, n), free})


def _versions(a) -> int:
    if isinstance(a, list | tuple):
        return max((_versions(x) for x in a), default=1)
    if a is None or np.asarray(a).dtype.kind != "f" or np.size(a) == 0:
        return 1
    return len(_windows(np.size(a)))


def _filled(a, k: int, version: int):
    """``a`` with its floating entries replaced by edge values in the order of its own values (-inf for the
    smallest entry ... NaN last; an array smaller than the list takes a stretch of it, the ``version``-th
    (rotated by the input's position ``k``), so the versions together hold every value), in its dtype. The
    order is kept, so what the op relies on -- a sorted sequence, a sorter, a maximum's position -- holds at
    the edge values too. The huge values are left to the grids: in an op that sums, whether they overflow to inf
    or cancel depends on the order of the sum, which ONNX Runtime chooses (numpy's pairwise sums and BLAS's are
    no more right)."""
    if isinstance(a, list | tuple):
        return type(a)(_filled(x, k + i, version) for i, x in enumerate(a))
    if a is None or np.asarray(a).dtype.kind != "f":
        return a
    a = np.asarray(a)
    if a.size == 0:
        return a
    rank = np.argsort(np.argsort(a.ravel(), kind="stable"), kind="stable").reshape(a.shape)
    windows = _windows(a.size)
    if a.size >= _FILL.size:
        index = rank * _FILL.size // a.size
    else:
        index = rank + windows[(version + k) % len(windows)]
    filled = _FILL[index]
    return in_dtype(filled, a.dtype) if a.dtype != np.float64 else filled


def _emptied(a):
    """``a`` cut to length 0 along its first axis (a 0-D array or None is kept)."""
    if isinstance(a, list | tuple):
        return type(a)(_emptied(x) for x in a)
    if a is None or np.ndim(a) == 0:
        return a
    return np.asarray(a)[:0]


def edge_samples(op) -> list[Sample]:
    """The op's samples at the edge values (see the module docstring) and their empty versions. A sample the
    forward refuses there (a domain check) is the caller's to skip."""
    if op.family in GRID_FAMILIES:
        samples = grid_samples(op)
    else:
        samples = [
            Sample(
                tuple(_filled(a, k, v) for k, a in enumerate(s.inputs)), s.attrs, f"edge values {v} in {s.label or i}"
            )
            for i, s in enumerate(op_samples(op))
            for v in range(_versions(s.inputs))
        ]
    empty = [Sample(tuple(_emptied(a) for a in s.inputs), s.attrs, f"empty {s.label}") for s in samples]
    return samples + [s for s in empty if any(np.size(a) == 0 for a in flat_inputs(s.inputs))]


def sample_in(sample: Sample, dtype) -> Sample:
    """``sample`` (float64) with its floating inputs in ``dtype`` (see ``in_dtype``)."""

    def cast(a):
        if isinstance(a, list | tuple):
            return type(a)(cast(x) for x in a)
        return a if a is None or np.asarray(a).dtype.kind != "f" else in_dtype(np.asarray(a), dtype)

    return Sample(tuple(cast(a) for a in sample.inputs), sample.attrs, sample.label, sample.torch)


INTEGER_DTYPES = tuple(map(np.dtype, (np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64)))


def _integral(a, dtype):
    if isinstance(a, list | tuple):
        return type(a)(_integral(x, dtype) for x in a)
    if a is None or np.asarray(a).dtype.kind != "f":
        return a
    a = np.asarray(a)
    if dtype == np.bool_:
        return a > 0
    whole = np.rint(np.nan_to_num(a * 3, nan=0.0, posinf=7.0, neginf=-7.0))  # a few distinct small integers
    if dtype.kind == "u" and whole.size:  # unsigned: shifted up, so a sorted sequence stays sorted
        whole = whole - min(float(whole.min()), 0.0)
    return whole.astype(dtype)


def dtype_samples(op) -> list[tuple[np.dtype, Sample]]:
    """(dtype, sample) for each of the op's samples with its floating inputs as small integers of each integer
    dtype and as bool (the dtypes minitape's ops take beside the floats); the ones the forward refuses are the
    caller's to skip. Samples without a floating input give none."""
    out = []
    for s in op_samples(op):
        if not any(np.asarray(a).dtype.kind == "f" for a in flat_inputs(s.inputs)):
            continue
        for dtype in INTEGER_DTYPES:
            inputs = tuple(_integral(a, dtype) for a in s.inputs)
            out.append((dtype, Sample(inputs, s.attrs, f"{dtype.name} {s.label}".strip())))
    return out


def export_cases(op) -> list[tuple[str, Sample, object, str]]:
    """What the export checks run for ``op``: (group, sample, dtype, scale) for ``tape.onnx.check_sample(op,
    sample, dtype, scale=scale)`` -- each sample in float32 and float64 ("samples", to the largest output), each
    edge sample in both ("edges": a grid entry by entry, as the op tests compare it; edge values filled into any
    other op to the largest input, since its sums round in ONNX Runtime's order), each sample in every integer
    dtype and bool ("dtypes", exactly)."""
    floats = (np.dtype(np.float32), np.dtype(np.float64))
    at_edges = "entry" if op.family in GRID_FAMILIES else "inputs"
    cases: list[tuple[str, Sample, object, str]] = [
        ("samples", s, dt, "output") for s in op_samples(op) for dt in floats
    ]
    cases += [("edges", sample_in(s, dtype), None, at_edges) for s in edge_samples(op) for dtype in floats]
    return cases + [("dtypes", s, None, "output") for _, s in dtype_samples(op)]


def dtype_of(sample: Sample, dtype=None) -> np.dtype:
    """The dtype a check of ``sample`` runs in: ``dtype``, else the sample's first floating input's (else its
    first input's)."""
    if dtype is not None:
        return np.dtype(dtype)
    arrays = [np.asarray(a) for a in flat_inputs(sample.inputs)]
    return next((a.dtype for a in arrays if a.dtype.kind == "f"), arrays[0].dtype if arrays else np.dtype(np.float64))


def flat_inputs(inputs) -> list:
    out: list = []
    for a in inputs:
        if isinstance(a, list | tuple):
            out += flat_inputs(a)
        elif a is not None:
            out.append(a)
    return out
