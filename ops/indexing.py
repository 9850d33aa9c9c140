"""Indexing ops: getitem (``x[index]``), gather, index_select and their scatters (scatter_add, index_add,
index_put), take_along_dim, scatter, scatter_reduce, masked_select, nonzero and one_hot, with torch 2.13 semantics.

Every backward scatters the gradient back to the positions read, *adding* where positions repeat. The
scatters are public ops themselves, each differentiable again: gather's backward is scatter_add (whose
gradient for ``src`` is gather), index_select's is index_add (whose gradient for ``source`` is
index_select), getitem's is index_put with ``accumulate=True`` into zeros (whose gradient for ``values``
is getitem). A rule given arrays (first order) runs the numpy kernel directly; given Tensors
(``create_graph=True``) it calls the op, so the backward is recorded. Index tensors must hold integers (any
integer dtype; torch wants int64) with values in range. Each op's torch conventions are its notes (``_CASE_LAW``).
"""

__all__ = [
    "getitem",
    "setitem",
    "gather",
    "index_select",
    "scatter_add",
    "index_add",
    "index_put",
    "take_along_dim",
    "scatter",
    "scatter_reduce",
    "masked_select",
    "nonzero",
    "one_hot",
    "take",
    "index_fill",
    "index_copy",
    "index_reduce",
    "masked_scatter",
    "argwhere",
]

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tape.broadcast import unbroadcast
from tape.onnx import lowering
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop

from . import _numpy
from ._notes import case_law
from ._numerics import constant_values
from ._onnx import NotExportable, axis_of, cast_to, index_map, scalar
from ._samples import transposed, uniform
from ._validation import (
    broadcast_or_fail,
    fill_value,
    normalize_dim,
    one_of,
    require_bool,
    require_dtype_of_input,
    require_integer,
)

# torch's case law, op by op: each entry joins the notes= of the ops it names (shown in docs/coverage.md)
_CASE_LAW = (
    (
        ("gather", "scatter_add", "scatter", "scatter_reduce", "index_select", "index_add"),
        "0-D tensors: a 0-D input, index or src reads as 1-D of size 1 and gives a 0-D result back, as torch does "
        "(index_select/index_add of a 0-D input take exactly one position, index_add a 0-D source).",
    ),
    (
        ("take", "index_fill", "index_copy", "index_reduce", "masked_scatter", "argwhere"),
        "take(input, index): the flattened input at index (negative positions count from the end); gradient: "
        "index_add into zeros. index_fill allows negative positions, as torch's number-value form (its Tensor-value "
        "form refuses them; here both wrap), and its value, a number or a 0-D tensor, gets the sum of the gradient "
        "over the filled positions, each counted once; index_copy refuses repeated positions "
        "(torch leaves which value lands undefined); both give the input a zero gradient at the written positions. "
        "index_reduce is scatter_reduce with index[i] standing for all of source's slice i (the same kernel and "
        "rules). masked_scatter: the True positions take source's first entries in row-major order. argwhere is "
        "nonzero.",
    ),
    (
        ("getitem",),
        "Indexing follows PyTorch, not numpy, where the two differ. torch applies the Python ints of an index"
        " first (each selects, removing its dim), then indexes what is left with the remaining slices, None, "
        "Ellipsis, bools and index arrays, numpy-style. So ``x[0, :, [1, 2]]`` on shape (2, 3, 4, 5) is "
        "``x[0][:, [1, 2]]`` of shape (3, 2, 5) (numpy: (2, 3, 5)); the index arrays' dims go where the "
        "arrays stand when they are adjacent, else first. A 0-D integer array or Tensor counts as an int; a "
        "bool mask stands for the positions of its True entries and covers as many dims as it has; a Python "
        "bool adds a dim of size 1 (True) or 0 (False). A list of ints (or an inner tuple) is an index array,"
        " so ``x[[0, 0, 1]]`` reads row 0 twice and its gradient accumulates there twice. Refused rather than"
        " guessed: float and uint8 index arrays (torch reads uint8 as a deprecated mask, numpy as positions),"
        " a top-level list holding sequences, slices, None or Ellipsis (torch 2.13 reads it as a tuple with a"
        " deprecation warning, numpy as an array) and slice steps below 1 (torch has none). Out-of-range "
        "positions raise IndexError naming the dim.",
    ),
    (
        ("gather", "index_select", "scatter_add", "index_add", "getitem", "index_put"),
        "Index inputs of gather/index_select/scatter_add/index_add are integer *tensor inputs* marked "
        "NOT_DIFFERENTIABLE, so the tape records them as graph edges. getitem's index and index_put's indices"
        " are attributes: the engine copies and freezes them when the op is recorded (a Tensor inside keeps "
        "the array it held then), so refilling an index buffer or reassigning an index tensor's ``.data`` "
        "later cannot move a recorded gradient. ``index_put`` with ``accumulate=False`` refuses repeated "
        "positions (torch leaves which value lands undefined). gather, scatter_add, index_select and "
        "index_add need inputs of at least 1 dim.",
    ),
    (
        ("take_along_dim",),
        "take_along_dim(input, indices, dim=None): gather after broadcasting input and indices in every dim "
        "but ``dim`` (``dim=None``: on the flattened input); the gradient is scatter_add's, summed over the "
        "broadcast dims. With a dim, indices in [-size, -1] count from the end, as torch's; torch 2.13 also "
        "wraps every other out-of-range index modulo the size (3 of a size-3 dim reads element 0), minitape "
        "refuses those. With dim=None negative indices are refused, as torch refuses them.",
    ),
    (
        ("scatter",),
        "scatter(input, dim, index, src) and the value form scatter(input, dim, index, value=v): refuses an "
        "index that writes one position twice (torch leaves the value undefined). Gradient: zero for "
        "``input`` at the written positions (a scatter of 0), gather of ``g`` for ``src``.",
    ),
    (
        ("scatter_reduce",),
        'scatter_reduce(input, dim, index, src, reduce, include_self=True), reduce "sum", "prod", "mean", '
        '"amax", "amin"; integer "mean" floor-divides as torch. Gradients as torch: "mean" divides by the '
        'count; "amax"/"amin" split the gradient evenly among the values equal to the result -- except that '
        "an excluded self (``include_self=False``) never takes a share (torch 2.13 counts it when it equals "
        'the result, so its gradients then sum to less than the incoming one); "prod" gives each value the '
        "product of the others at its position, exact with zeros (no division by a zero). Its second order is"
        " exact too, also where torch refuses it (two zeros reduced into one position): the rule keeps the "
        "zero values as variables.",
    ),
    (
        ("masked_select",),
        "masked_select(input, mask): input and mask broadcast; a 1-D output whose length depends on the "
        "mask's values (a tensor input, so a replay with another mask selects anew). Gradient: g put back at "
        "the mask, summed over broadcast dims.",
    ),
    (
        ("nonzero", "one_hot"),
        "nonzero(input) (int64 positions, NaN counts as nonzero) and one_hot(tensor, num_classes=-1) (int64; "
        "``num_classes=-1`` infers ``max + 1`` from the data, on replay too) are not differentiable. nonzero "
        "refuses ``as_tuple=True`` (an op's output count is fixed at registration); "
        "``Tensor.nonzero(as_tuple=True)`` gives torch's tuple, the columns of ``ops.nonzero`` "
        "(``ops.unbind(ops.nonzero(x), 1)``, a 0-D x counting as 1-D).",
    ),
)


# -- resolving an index the way torch does -------------------------------------------------------------------
@dataclass(frozen=True)
class _Resolved:
    """An index as two numpy steps: ``basic`` (ints, slices, None, Ellipsis: always a view) and then, when the
    index holds arrays, ``advanced`` applied to the result: full slices and non-negative intp position arrays
    (masks already turned into positions), whose placement numpy and torch agree on."""

    basic: tuple
    advanced: tuple | None

    def apply(self, x):
        basic = self.basic
        if Ellipsis not in basic and isinstance(x, np.ndarray):
            basic = (*basic, Ellipsis)  # a view even when every dim is taken by an int (numpy: a scalar copy)
        out = x[basic]
        return out if self.advanced is None else out[self.advanced]


def _array_of(op, value):
    """An index array from a Tensor, array, list or tuple (refusing dtypes torch refuses or reads otherwise)."""
    data = getattr(value, "_data", None)
    if data is not None:
        value = data
    if isinstance(value, list | tuple):
        try:
            array = np.asarray(value)
        except ValueError as e:
            raise IndexError(f"{op}: an index sequence is not rectangular: {e}") from None
        if array.size == 0 and array.dtype.kind == "f":
            array = array.astype(np.int64)  # [] is an empty integer index, as in torch
    else:
        array = value
    if array.dtype == np.uint8:
        raise IndexError(
            f"{op}: index arrays of dtype uint8 are ambiguous (torch reads them as a deprecated "
            f"mask, numpy as positions); pass a bool mask or int64 positions"
        )
    if array.dtype.kind not in "biu":
        raise IndexError(
            f"{op}: index arrays must hold integers or bools (tensors used as indices must be long, "
            f"int or bool tensors), got dtype {array.dtype}"
        )
    return array


def _items(op, index) -> list:
    """The index as a list of (kind, value): int, slice, none, ellipsis, bool, array (int, >= 1-D), mask."""
    if isinstance(index, list):
        if any(
            isinstance(v, list | tuple | slice | np.ndarray) or v is None or v is Ellipsis or hasattr(v, "_data")
            for v in index
        ):
            raise IndexError(
                f"{op}: a list index holding sequences, tensors, slices, None or Ellipsis is ambiguous "
                f"(torch 2.13 reads it as a tuple, with a deprecation warning; numpy as one array); "
                f"pass x[tuple(index)] or x[np.array(index)], got {index!r}"
            )
        parts: tuple = (index,)
    else:
        parts = index if isinstance(index, tuple) else (index,)
    items: list[tuple[str, Any]] = []
    for v in parts:
        if v is None:
            items.append(("none", None))
        elif v is Ellipsis:
            items.append(("ellipsis", None))
        elif isinstance(v, slice):
            if v.step is not None and not (isinstance(v.step, int | np.integer) and v.step > 0):
                raise ValueError(
                    f"{op}: slice steps must be positive integers (as in torch; use ops.flip to reverse), got {v!r}"
                )
            items.append(("slice", v))
        elif isinstance(v, bool | np.bool_):
            items.append(("bool", bool(v)))
        elif isinstance(v, int | np.integer):
            items.append(("int", int(v)))
        elif isinstance(v, np.ndarray | list | tuple) or hasattr(v, "_data"):
            a = _array_of(op, v)
            if a.dtype == np.bool_:
                items.append(("bool", bool(a)) if a.ndim == 0 else ("mask", a))
            else:
                items.append(("int", int(a)) if a.ndim == 0 else ("array", a))
        else:
            raise IndexError(
                f"{op}: only ints, slices, None, Ellipsis, bools and integer or bool arrays/tensors "
                f"are valid indices, got {type(v).__name__} {v!r}"
            )
    return items


_BASIC_STEP = {
    "int": lambda v: (v,),
    "slice": lambda v: (v,),
    "none": lambda v: (None,),
    "ellipsis": lambda v: (Ellipsis,),
    "bool": lambda v: (None,),
    "array": lambda v: (slice(None),),
    "mask": lambda v: (slice(None),) * v.ndim,
}


def _resolve(op: str, index, shape: tuple) -> _Resolved:
    """``index`` on an input of ``shape`` as torch reads it (see the module docstring), validated."""
    items = _items(op, index)
    basic = tuple(part for kind, v in items for part in _BASIC_STEP[kind](v))
    try:
        probe = np.broadcast_to(np.empty((), np.int8), shape)[basic]  # validates ints, counts dims, no memory
    except IndexError as e:
        raise IndexError(f"{op}: index {_describe(index)} does not fit input of shape {shape}: {e}") from None
    if all(kind in ("int", "slice", "none", "ellipsis") for kind, _ in items):
        return _Resolved(basic, None)
    mid = np.shape(probe)
    width = {"slice": 1, "none": 1, "bool": 1, "array": 1, "int": 0, "ellipsis": 0}
    fixed = sum(v.ndim if kind == "mask" else width[kind] for kind, v in items)
    advanced: list[slice | np.ndarray | int] = []  # an int: the position of its array in ``arrays`` (for now)
    arrays, sizes, pos = [], [], 0
    for kind, v in items:
        if kind == "int":
            continue
        if kind == "ellipsis":
            advanced += [slice(None)] * (len(mid) - fixed)
            pos += len(mid) - fixed
        elif kind in ("slice", "none"):
            advanced.append(slice(None))
            pos += 1
        elif kind == "bool":  # the dim it added, read at position 0 (True) or not at all (False)
            arrays.append(np.zeros(1 if v else 0, np.intp))
            advanced.append(arrays[-1])
            pos += 1
        elif kind == "mask":
            covered = mid[pos : pos + v.ndim]
            if v.shape != covered:
                raise IndexError(
                    f"{op}: the shape of the mask {v.shape} does not match the shape {covered} of the "
                    f"dims it indexes (input {shape}, index {_describe(index)})"
                )
            arrays += list(np.nonzero(v))
            advanced += arrays[-v.ndim :]
            pos += v.ndim
        else:
            arrays.append(v)
            advanced.append(len(arrays) - 1)  # placeholder: bounds are checked once the result size is known
            sizes.append((pos, mid[pos]))
            pos += 1
    try:
        result = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        raise IndexError(
            f"{op}: shape mismatch: index arrays could not be broadcast together with shapes "
            f"{[a.shape for a in arrays]} (index {_describe(index)})"
        ) from None
    checked = iter(sizes)
    for k, part in enumerate(advanced):
        if not isinstance(part, int):
            continue
        v, (dim, size) = arrays[part], next(checked)
        if math.prod(result) == 0:  # nothing is read (torch checks no position then): any in-range stand-in
            advanced[k] = np.zeros(v.shape, np.intp)
            continue
        if v.size and (v.min() < -size or v.max() >= size):
            bad = v.min() if v.min() < -size else v.max()
            raise IndexError(
                f"{op}: index {bad} is out of bounds for dimension {dim} with size {size} (input "
                f"{shape}, index {_describe(index)})"
            )
        advanced[k] = np.where(v < 0, v + size, v).astype(np.intp, copy=False)
    return _Resolved(basic, tuple(advanced))


def _describe(index) -> str:
    text = repr(index)
    return text if len(text) <= 200 else text[:200] + "..."


def _flat_positions(resolved: _Resolved, shape: tuple) -> np.ndarray:
    """The flat position in an input of ``shape`` that every element of the indexed result reads."""
    return np.asarray(resolved.apply(np.arange(math.prod(shape), dtype=np.intp).reshape(shape)))


# -- index_put ---------------------------------------------------------------------------------------------
def _index_put_resolved(input_shape, indices) -> _Resolved:
    if not isinstance(indices, tuple | list):
        raise TypeError(
            f"index_put: argument 'indices' expected a tuple of index tensors, got {type(indices).__name__}"
        )
    if not indices:
        raise ValueError("index_put: argument 'indices' expected at least one index tensor, got an empty tuple")
    for k, i in enumerate(indices):
        if not (isinstance(i, np.ndarray | list | tuple) or hasattr(i, "_data")):
            raise TypeError(
                f"index_put: argument 'indices' expected index tensors (integer or bool), got "
                f"{type(i).__name__} {i!r} at position {k}"
            )
    return _resolve("index_put", tuple(indices), input_shape)


def _check_put(op: str, resolved: _Resolved, input, values, repeats: str | None) -> None:
    """index_put's and setitem's checks: values of input's dtype, broadcastable to the indexed shape; with
    ``repeats`` (the refusal), no position written twice."""
    require_dtype_of_input(op, "values", values, input)
    target = np.shape(resolved.apply(np.broadcast_to(np.empty((), np.int8), input.shape)))
    broadcast_or_fail(
        op, "values", (values.shape, target), f"a shape broadcastable to the indexed shape {target}", values.shape,
        to=target,
    )  # fmt: skip
    if repeats is not None and resolved.advanced is not None:
        positions = _flat_positions(resolved, input.shape).reshape(-1)
        if np.unique(positions).size != positions.size:
            raise ValueError(repeats)


def _check_index_put(input, values, indices, accumulate=False):
    require_bool("index_put", "accumulate", accumulate)
    repeats = (
        "index_put: argument 'indices' repeats a position while accumulate=False; which value lands there is "
        "undefined (torch leaves it unspecified): pass accumulate=True to add them, or unique indices"
    )
    _check_put("index_put", _index_put_resolved(input.shape, indices), input, values, None if accumulate else repeats)


def _put(out, resolved: _Resolved, values, accumulate: bool):
    """The numpy kernel: write (or add, repeats accumulating) ``values`` into ``out`` in place."""
    if resolved.advanced is None:
        if accumulate:
            out[resolved.basic] += values
        else:
            out[resolved.basic] = values
    elif accumulate:
        np.add.at(out[resolved.basic], resolved.advanced, values)
    else:
        out[resolved.basic][resolved.advanced] = values
    return out


def _index_put(input, indices, values, accumulate=False):
    """``torch.index_put(input, indices, values, accumulate=False)``: a copy of ``input`` with ``values``
    (broadcast) written at ``input[indices]`` -- or added there, repeated positions adding up, when
    ``accumulate``."""
    return _put(input.copy(), _index_put_resolved(input.shape, indices), values, bool(accumulate))


def _index_put_vjp_input(g, ans, input, values, indices, accumulate=False):
    if accumulate:
        return g
    if isinstance(g, np.ndarray):
        return _put(g.copy(), _index_put_resolved(input.shape, indices), 0, False)
    return index_put(g, indices, np.zeros((), g.dtype), accumulate=False)


def _index_put_vjp_values(g, ans, input, values, indices, accumulate=False):
    if isinstance(g, np.ndarray):
        picked = np.asarray(_index_put_resolved(input.shape, indices).apply(g))
    else:
        picked = getitem(g, tuple(indices))
    return unbroadcast(picked, values.shape)


def _index_put_samples(rng):
    x = uniform(rng, (4, 3))
    return [
        Sample(
            (x, uniform(rng, (5, 3))),
            {"indices": (np.array([0, 2, 2, 3, 0]),), "accumulate": True},
            "repeated rows, accumulate",
        ),
        Sample((x, uniform(rng, (2,))), {"indices": (np.array([0, 3]), np.array([2, -1]))}, "two arrays, neg"),
        Sample((x, uniform(rng, ())), {"indices": (np.array([1, 2]),)}, "scalar value broadcast"),
        Sample(
            (uniform(rng, (2, 3, 4)), uniform(rng, (1, 4))),
            {"indices": (np.array([[0], [1]]), np.array([0, 2, 2])), "accumulate": True},
            "broadcast index arrays and values, repeats",
        ),
        Sample(
            (x, uniform(rng, (1,))),
            {"indices": (np.arange(12).reshape(4, 3) % 5 < 2,), "accumulate": False},
            "bool mask",
        ),
        Sample((transposed(rng, (3, 4)), uniform(rng, (4,))), {"indices": (np.array(1),)}, "non-contiguous, 0-D"),
        Sample((x, uniform(rng, (0, 3))), {"indices": (np.zeros(0, np.int64),), "accumulate": True}, "empty index"),
        Sample((uniform(rng, (0, 3)), uniform(rng, (3,))), {"indices": (np.zeros(0, np.int64),)}, "zero-size input"),
    ]


def _torch_indices(torch, indices):
    return tuple(torch.from_numpy(np.asarray(i)) for i in indices)


index_put = defop(
    "index_put",
    family="shape",
    inputs=("input", "values"),
    forward=_index_put,
    vjps=(_index_put_vjp_input, _index_put_vjp_values),
    check=_check_index_put,
    samples=_index_put_samples,
    torch_ref=lambda torch, input, values, indices, accumulate=False: torch.index_put(
        input, _torch_indices(torch, indices), values, accumulate
    ),
    method=True,
    notes=case_law(_CASE_LAW, "index_put"),
)


# -- getitem -----------------------------------------------------------------------------------------------
def _getitem(input, index):
    """``input[index]`` with torch's indexing rules (see the module docstring)."""
    return _resolve("getitem", index, input.shape).apply(input)


def _getitem_vjp(g, ans, input, index):
    resolved = _resolve("getitem", index, input.shape)
    if isinstance(g, np.ndarray):
        grad = np.zeros(input.shape, dtype=g.dtype)
        return _put(grad, resolved, g, True)  # repeated positions accumulate
    positions = _flat_positions(resolved, input.shape)
    flat = index_put(np.zeros(np.size(input), g.dtype), (positions,), g, accumulate=True)
    return np.reshape(flat, input.shape)


def _getitem_samples(rng):
    x = uniform(rng, (4, 5))
    y = uniform(rng, (2, 3, 4, 5))
    return [
        Sample((x,), {"index": (1,)}, "int"),
        Sample((x,), {"index": (slice(None, None, 2), slice(1, 4))}, "slices with step"),
        Sample((x,), {"index": (Ellipsis, -1)}, "ellipsis"),
        Sample((x,), {"index": (np.array([0, 2, 2, 3]),)}, "repeated integer array"),
        Sample((x,), {"index": [0, 0, 1]}, "list of ints, repeated"),
        Sample((x,), {"index": ([3, 3], -1)}, "inner list and int"),
        Sample((x,), {"index": (np.array([0, 1]), np.array([4, 4]))}, "paired integer arrays"),
        Sample((uniform(rng, (3, 4, 2)),), {"index": (slice(None), None, np.array([1, 3]))}, "newaxis + array"),
        Sample((x,), {"index": (x > 0,)}, "boolean mask"),
        Sample((y,), {"index": (slice(None), y[0, :, :, 0] > 0, 1)}, "2-D mask after a slice, int"),
        Sample((y,), {"index": ([0, 1, 1], slice(None), [1, 2, 2])}, "arrays split by a slice go first"),
        Sample((y,), {"index": (0, slice(None), [1, 2, 1])}, "int, slice, array: int selects first"),
        Sample((y,), {"index": (None, 0, Ellipsis, np.array([[1], [-5]]))}, "None, int, ellipsis, 2-D array"),
        Sample((y,), {"index": (slice(1, None), [2, 0], slice(None), np.array(3))}, "0-D array counts as int"),
        Sample((y,), {"index": ([1, 0], True)}, "Python bool adds a dim"),
        Sample((y,), {"index": (Ellipsis, [-1, 0], None, [2, 2])}, "arrays split by None"),
        Sample((x,), {"index": (np.zeros(0, np.int64),)}, "empty index array"),
        Sample((x,), {"index": (slice(3, 1),)}, "empty slice"),
        Sample((uniform(rng, (0, 3)),), {"index": (slice(None), [2, 2])}, "zero-size input"),
        Sample((transposed(rng, (3, 4)),), {"index": (slice(None, None, 2), 2)}, "non-contiguous"),
        Sample((transposed(rng, (3, 4)),), {"index": ([2, 0, 2],)}, "non-contiguous, repeated rows"),
    ]


def _torch_index(torch, index):
    if isinstance(index, tuple):
        return tuple(_torch_index(torch, i) for i in index)
    if isinstance(index, np.ndarray):
        return torch.from_numpy(index)
    return index


getitem = defop(
    "getitem",
    family="shape",
    inputs=("input",),
    forward=_getitem,
    vjps=(_getitem_vjp,),
    samples=_getitem_samples,
    torch_ref=lambda torch, input, index: input[_torch_index(torch, index)],
    notes=case_law(_CASE_LAW, "getitem"),
)


# -- setitem: ``x[index] = values`` ---------------------------------------------------------------------------------
def _setitem(input, values, index):
    """A copy of ``input`` with ``values`` (broadcast) written at ``input[index]``: ``x[index] = values`` as an op
    (Tensor.__setitem__ runs it in place), every index form getitem takes."""
    return _put(input.copy(), _resolve("setitem", index, input.shape), values, False)


def _check_setitem(input, values, index):
    repeats = (
        f"setitem: index {_describe(index)} writes one position twice; which value lands there is undefined (torch "
        f"leaves it unspecified): index each position once"
    )
    _check_put("setitem", _resolve("setitem", index, input.shape), input, values, repeats)


def _setitem_vjp_input(g, ans, input, values, index):
    if isinstance(g, np.ndarray):
        return _put(g.copy(), _resolve("setitem", index, input.shape), 0, False)
    return setitem(g, np.zeros((), g.dtype), index)


def _setitem_vjp_values(g, ans, input, values, index):
    if isinstance(g, np.ndarray):
        picked = np.asarray(_resolve("setitem", index, input.shape).apply(g))
    else:
        picked = getitem(g, index)
    return unbroadcast(picked, values.shape)


def _setitem_samples(rng):
    samples = []
    for s in _getitem_samples(rng):
        (x,), index = s.inputs, s.attrs["index"]
        try:
            _check_setitem(x, np.zeros(()), index)
        except ValueError:  # getitem's repeated positions: a write there is refused
            continue
        shape = np.shape(_resolve("setitem", index, x.shape).apply(x))
        samples.append(Sample((x, uniform(rng, shape)), {"index": index}, s.label))
        if shape:
            samples.append(Sample((x, uniform(rng, shape[-1:])), {"index": index}, s.label + ", broadcast"))
    return samples


def _torch_setitem(torch, input, values, index):
    out = input.clone()
    out[_torch_index(torch, index)] = values
    return out


setitem = defop(
    "setitem",
    family="shape",
    inputs=("input", "values"),
    forward=_setitem,
    vjps=(_setitem_vjp_input, _setitem_vjp_values),
    check=_check_setitem,
    samples=_setitem_samples,
    torch_ref=_torch_setitem,
    notes="``x[index] = values`` as an op, with getitem's index forms; Tensor.__setitem__ runs it in place. A write "
    "of one position twice (repeated integer indices) is refused.",
)


# -- gather / scatter_add ----------------------------------------------------------------------------------
def _check_index_values(op, index, size, dim, argument="index", low=0):
    """Every entry of ``index`` in [low, size - 1] (``low`` is 0, or -size where negative positions wrap)."""
    if index.size and (index.min() < low or index.max() >= size):
        bad = index.min() if index.min() < low else index.max()
        raise IndexError(
            f"{op}: argument '{argument}' expected values in [{low}, {size - 1}] for dim {dim} of size {size}, "
            f"got {bad}"
        )


def _lift(x):
    """A 0-D array or Tensor as 1-D of size 1 (others as they are): how torch's gather and scatter ops read a 0-D
    input, index or src; their results are given back in the 0-D shape."""
    return np.reshape(x, (1,)) if x is not None and np.ndim(x) == 0 else x


def _check_along(op, input, index, dim, *, src=None):
    """gather's and scatter_add's shape rules: index has input's dims, no larger than input apart from ``dim``
    (and, for scatter_add, no larger than src anywhere); a 0-D tensor counts as 1-D of size 1, as in torch."""
    require_integer(op, "index", index)
    input, index, src = _lift(input), _lift(index), _lift(src)
    axis = normalize_dim(op, dim, input.ndim)
    if index.ndim != input.ndim or any(i > s for d, (i, s) in enumerate(zip(index.shape, input.shape)) if d != axis):
        raise ValueError(
            f"{op}: argument 'index' expected {input.ndim} dims, each no larger than input {input.shape} "
            f"apart from dim {dim}, got shape {index.shape}"
        )
    if src is not None:
        if src.ndim != index.ndim or any(i > s for i, s in zip(index.shape, src.shape)):
            raise ValueError(
                f"{op}: argument 'src' expected {index.ndim} dims, each no smaller than index "
                f"{index.shape}, got shape {src.shape}"
            )
        require_dtype_of_input(op, "src", src, input)
    _check_index_values(op, index, input.shape[axis], dim)
    return axis


def _along(index, axis) -> tuple:
    """The block ``[:n0, :n1, ...]`` of index's shape, and the positions index addresses along ``axis``."""
    block = tuple(slice(0, n) for n in index.shape)
    grids = list(np.ix_(*[np.arange(n) for n in index.shape]))
    grids[axis] = index
    return block, tuple(grids)


def _scatter_add_into(out, axis, index, src):
    """The numpy kernel: ``out[index[i][j]][j] += src[i][j]`` (for axis 0) in place, repeats adding up."""
    block, positions = _along(index, axis)
    np.add.at(out, positions, src[block])
    return out


def _gather(input, dim, index):
    """``torch.gather(input, dim, index)``: ``out[i][j] = input[index[i][j]][j]`` for dim 0 (and so on); the
    result has index's shape."""
    x, i = _lift(input), _lift(index)
    axis = normalize_dim("gather", dim, x.ndim)
    block = tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(i.shape))
    return np.take_along_axis(x[block], i, axis).reshape(index.shape)


def _gather_vjp(g, ans, input, index, dim):
    if isinstance(g, np.ndarray):
        zeros, i = np.zeros(_lift(input).shape, g.dtype), _lift(index)
        axis = normalize_dim("gather", dim, zeros.ndim)
        return _scatter_add_into(zeros, axis, i, np.reshape(g, i.shape)).reshape(input.shape)
    return scatter_add(np.zeros(input.shape, g.dtype), dim, index, g)


def _gather_samples(rng):
    return [
        Sample((uniform(rng, (3, 4)), np.array([[0, 2, 2, 1], [1, 1, 0, 2]])), {"dim": 0}, "repeated"),
        Sample((uniform(rng, (3, 4)), np.array([[3, 3], [0, 1], [2, 3]])), {"dim": -1}, "dim -1, repeated"),
        Sample((uniform(rng, (4, 5, 2)), np.array([[[4], [0]]])), {"dim": 1}, "smaller index"),
        Sample((transposed(rng, (3, 2)), np.array([[0], [0], [1]])), {"dim": 1}, "non-contiguous"),
        Sample((uniform(rng, (1, 3)), np.array([[0, 0, 0]])), {"dim": 0}, "size-1 dim"),
        Sample((uniform(rng, (2, 3)), np.zeros((0, 3), np.int64)), {"dim": 0}, "zero-size index"),
        Sample((uniform(rng, (2, 0)), np.zeros((3, 0), np.int64)), {"dim": 0}, "zero-size input"),
        Sample((uniform(rng, ()), np.array(0)), {"dim": 0}, "0-D input and index"),
        Sample((uniform(rng, ()), np.array([0, 0])), {"dim": -1}, "0-D input, 1-D index"),
        Sample((uniform(rng, (3,)), np.array(2)), {"dim": 0}, "0-D index"),
    ]


gather = defop(
    "gather",
    family="shape",
    inputs=("input", "index"),
    forward=_gather,
    vjps=(_gather_vjp, NOT_DIFFERENTIABLE),
    check=lambda input, index, dim: _check_along("gather", input, index, dim),
    samples=_gather_samples,
    torch_ref=lambda torch, input, index, dim: torch.gather(input, dim, index.long()),
    method=True,
    notes=case_law(_CASE_LAW, "gather"),
)


def _scatter_add(input, dim, index, src):
    """``torch.scatter_add(input, dim, index, src)``: a copy of ``input`` with ``src[i][j]`` added at
    ``[index[i][j]][j]`` (dim 0; and so on), repeated positions adding up. Only the ``index``-shaped block
    of ``src`` is read."""
    out = _lift(input).copy()
    axis = normalize_dim("scatter_add", dim, out.ndim)
    return _scatter_add_into(out, axis, _lift(index), _lift(src)).reshape(input.shape)


def _scatter_add_vjp_src(g, ans, input, index, src, dim):
    picked = _gather(g, dim, _raw(index)) if isinstance(g, np.ndarray) else gather(g, dim, index)
    return np.reshape(_pad_to(picked, _lift(src).shape), src.shape)  # only src's index-shaped block was read


def _scatter_add_samples(rng):
    return [
        Sample(
            (uniform(rng, (3, 4)), np.array([[0, 2, 2, 1], [1, 1, 0, 2]]), uniform(rng, (2, 4))), {"dim": 0}, "repeated"
        ),
        Sample(
            (uniform(rng, (3, 4)), np.array([[3, 3, 0], [0, 1, 1], [2, 3, 3]]), uniform(rng, (3, 3))),
            {"dim": -1},
            "dim -1, repeated",
        ),
        Sample(
            (uniform(rng, (4, 2)), np.array([[1], [3], [1]]), uniform(rng, (3, 2))),
            {"dim": 0},
            "index smaller than src",
            torch=False,
        ),  # torch's backward for src fails on this shape
        Sample(
            (transposed(rng, (3, 2)), np.array([[0], [0], [1]]), transposed(rng, (3, 1))), {"dim": 1}, "non-contiguous"
        ),
        Sample(
            (uniform(rng, (2, 3)), np.array([[0, 1, 1, 0]]), uniform(rng, (1, 4))),
            {"dim": 1},
            "index longer than input along dim",
        ),
        Sample((uniform(rng, (2, 3)), np.zeros((0, 3), np.int64), uniform(rng, (0, 3))), {"dim": 0}, "zero-size index"),
        Sample((uniform(rng, (0, 3)), np.zeros((0, 2), np.int64), uniform(rng, (0, 2))), {"dim": 1}, "zero-size input"),
        Sample((uniform(rng, ()), np.array(0), uniform(rng, ())), {"dim": 0}, "0-D"),
        Sample((uniform(rng, ()), np.array([0, 0]), uniform(rng, (2,))), {"dim": -1}, "0-D input, 1-D index"),
        Sample((uniform(rng, (3,)), np.array(1), uniform(rng, ())), {"dim": 0}, "0-D index and src"),
    ]


scatter_add = defop(
    "scatter_add",
    family="shape",
    inputs=("input", "index", "src"),
    forward=_scatter_add,
    vjps=(lambda g, ans, input, index, src, dim: g, NOT_DIFFERENTIABLE, _scatter_add_vjp_src),
    check=lambda input, index, src, dim: _check_along("scatter_add", input, index, dim, src=src),
    samples=_scatter_add_samples,
    torch_ref=lambda torch, input, index, src, dim: torch.scatter_add(input, dim, index.long(), src),
    method=True,
    notes=case_law(_CASE_LAW, "scatter_add"),
)


# -- index_select / index_add ------------------------------------------------------------------------------
def _along_index(op, input, index, dim, wrap=False, one_for_0d=False) -> tuple:
    """(axis, the index as 1-D non-negative positions) for the index_* ops: index 0-D or 1-D, integer, in range
    (``wrap``: negative positions count from the end, as index_fill's); a 0-D input counts as 1-D of size 1
    (``one_for_0d``: indexed by exactly one position, as index_select's and index_add's)."""
    require_integer(op, "index", index)
    axis = normalize_dim(op, dim, input.ndim)
    if index.ndim > 1:
        raise ValueError(f"{op}: argument 'index' expected a 0-D or 1-D tensor, got shape {index.shape}")
    if one_for_0d and input.ndim == 0 and index.size != 1:
        raise ValueError(f"{op}: argument 'index' expected one position for a 0-D input, got shape {index.shape}")
    size = input.shape[axis] if input.ndim else 1
    _check_index_values(op, index, size, dim, low=-size if wrap else 0)
    return axis, np.reshape(index, (-1,)) % max(size, 1)


def _check_source(op, input, source, expected, dim, length=""):
    """index_add's, index_copy's and index_reduce's source: shape ``expected`` and input's dtype."""
    if source.shape != expected:
        raise ValueError(
            f"{op}: argument 'source' expected shape {expected} (input {input.shape} with dim {dim} of the "
            f"index's length{length}), got {source.shape}"
        )
    require_dtype_of_input(op, "source", source, input)


def _check_index_select(input, index, dim):
    _along_index("index_select", input, index, dim, one_for_0d=True)


def _index_select(input, dim, index):
    """``torch.index_select(input, dim, index)``: the entries at ``index`` (0-D or 1-D) along ``dim`` (a 0-D
    input: its one entry, 0-D)."""
    out = np.take(_lift(input), index.reshape(-1), axis=normalize_dim("index_select", dim, input.ndim))
    return out.reshape(input.shape) if input.ndim == 0 else out


def _source_shape(shape, axis, n):
    return shape[:axis] + (n,) + shape[axis + 1 :]


def _index_add_into(out, axis, index, source):
    """The numpy kernel: ``out[..., index[i], ...] += source[..., i, ...]`` in place, repeats adding up."""
    np.add.at(out, (slice(None),) * axis + (index.reshape(-1),), source)
    return out


def _index_select_vjp(g, ans, input, index, dim):
    if isinstance(g, np.ndarray):
        zeros = np.zeros(_lift(input).shape, g.dtype)
        axis = normalize_dim("index_select", dim, input.ndim)
        return _index_add_into(zeros, axis, _raw(index), _lift(g)).reshape(input.shape)
    return index_add(np.zeros(input.shape, g.dtype), dim, index, g)


index_select = defop(
    "index_select",
    family="shape",
    inputs=("input", "index"),
    forward=_index_select,
    vjps=(_index_select_vjp, NOT_DIFFERENTIABLE),
    check=_check_index_select,
    samples=lambda rng: [
        Sample((uniform(rng, (4, 3)), np.array([0, 2, 2, 3, 2])), {"dim": 0}, "repeated"),
        Sample((uniform(rng, (2, 3, 4)), np.array([3, 1])), {"dim": -1}),
        Sample((uniform(rng, (2, 3)), np.array(1)), {"dim": 1}, "0-D index"),
        Sample((transposed(rng, (3, 4)), np.array([0, 0])), {"dim": 1}, "non-contiguous"),
        Sample((uniform(rng, (1, 3)), np.array([0, 0, 0])), {"dim": 0}, "size-1 dim"),
        Sample((uniform(rng, (2, 3)), np.zeros(0, np.int64)), {"dim": 1}, "empty index"),
        Sample((uniform(rng, (0, 3)), np.array([2, 2])), {"dim": 1}, "zero-size input"),
        Sample((uniform(rng, ()), np.array(0)), {"dim": 0}, "0-D input"),
        Sample((uniform(rng, ()), np.array([0])), {"dim": -1}, "0-D input, 1-D index"),
    ],
    torch_ref=lambda torch, input, index, dim: torch.index_select(input, dim, index.long()),
    method=True,
    notes=case_law(_CASE_LAW, "index_select"),
)


def _check_index_add(input, index, source, dim, alpha=1):
    axis, _ = _along_index("index_add", input, index, dim, one_for_0d=True)
    expected = _source_shape(input.shape, axis, index.size) if input.ndim else ()
    _check_source("index_add", input, source, expected, dim, f" {index.size}")
    if isinstance(alpha, bool) or np.ndim(alpha) != 0 or np.asarray(alpha).dtype.kind not in "iuf":
        raise TypeError(f"index_add: argument 'alpha' expected a number, got {alpha!r}")


def _index_add(input, dim, index, source, alpha=1):
    """``torch.index_add(input, dim, index, source, alpha=1)``: a copy of ``input`` with ``alpha * source[i]``
    added at position ``index[i]`` along ``dim``, repeated positions adding up."""
    scaled = source if alpha == 1 else source * np.asarray(alpha, source.dtype)
    out = _index_add_into(_lift(input).copy(), normalize_dim("index_add", dim, input.ndim), index, _lift(scaled))
    return out.reshape(input.shape)


def _index_add_vjp_source(g, ans, input, index, source, dim, alpha=1):
    if isinstance(g, np.ndarray):
        picked = _index_select(g, dim, index)
    else:
        picked = index_select(g, dim, index)
    return picked if alpha == 1 else picked * np.asarray(alpha, source.dtype)


index_add = defop(
    "index_add",
    family="shape",
    inputs=("input", "index", "source"),
    forward=_index_add,
    vjps=(lambda g, ans, input, index, source, dim, alpha=1: g, NOT_DIFFERENTIABLE, _index_add_vjp_source),
    check=_check_index_add,
    samples=lambda rng: [
        Sample((uniform(rng, (4, 3)), np.array([0, 2, 2, 3, 2]), uniform(rng, (5, 3))), {"dim": 0}, "repeated"),
        Sample(
            (uniform(rng, (2, 3, 4)), np.array([3, 1, 3]), uniform(rng, (2, 3, 3))),
            {"dim": -1, "alpha": -1.5},
            "dim -1, alpha",
        ),
        Sample((uniform(rng, (2, 3)), np.array(1), uniform(rng, (2, 1))), {"dim": 1, "alpha": 2}, "0-D index"),
        Sample((transposed(rng, (3, 4)), np.array([0, 0]), transposed(rng, (3, 2))), {"dim": 1}, "non-contiguous"),
        Sample((uniform(rng, (2, 3)), np.zeros(0, np.int64), uniform(rng, (2, 0))), {"dim": 1}, "empty index"),
        Sample((uniform(rng, (0, 3)), np.array([1, 1]), uniform(rng, (0, 2))), {"dim": 1}, "zero-size input"),
        Sample((uniform(rng, ()), np.array(0), uniform(rng, ())), {"dim": 0, "alpha": 2.0}, "0-D input"),
        Sample((uniform(rng, ()), np.array([0]), uniform(rng, ())), {"dim": -1}, "0-D input, 1-D index"),
    ],
    torch_ref=lambda torch, input, index, source, dim, alpha=1: torch.index_add(
        input, dim, index.long(), source, alpha=alpha
    ),
    method=True,
    notes=case_law(_CASE_LAW, "index_add"),
)


# -- shared helpers for the ops below: one body for arrays (first order) and Tensors (create_graph) --------------
def _raw(x):
    """The array of a Tensor (or the array itself): for constants such as index positions and tie masks."""
    return constant_values(x)


def _gather_any(x, axis, index):
    """gather along ``axis``: the numpy kernel for arrays, the recorded op for Tensors."""
    return _gather(x, axis, index) if isinstance(x, np.ndarray) else gather(x, axis, index)


def _scatter_add_any(base, axis, index, src):
    """``base`` with ``src`` added at ``index`` along ``axis``: kernel for arrays, the recorded op for Tensors."""
    if isinstance(base, np.ndarray) and isinstance(src, np.ndarray):
        return _scatter_add_into(base.copy(), axis, index, src)
    return scatter_add(base, axis, index, src)


def _pad_to(x, shape):
    """``x`` (the leading block of ``shape``) padded with zeros at the end of every dim up to ``shape`` (a 0-D x
    as the block of size 1)."""
    if np.ndim(x) == 0 and len(shape):
        x = np.reshape(x, (1,) * len(shape))
    if x.shape == tuple(shape):
        return x
    if isinstance(x, np.ndarray):
        out = np.zeros(shape, x.dtype)
        out[tuple(slice(0, n) for n in x.shape)] = x
        return out
    block = np.ix_(*(np.arange(n) for n in x.shape))  # set, not added: -0.0 stays -0.0, as a pad keeps it
    return index_put(np.zeros(shape, x.dtype), indices=block, values=x)


def _targets(shape, axis, index) -> np.ndarray:
    """A bool array of ``shape``: True at the positions that ``index`` addresses along ``axis``."""
    hit = np.zeros(shape, np.bool_)
    if index.size:
        hit[_along(index, axis)[1]] = True
    return hit


# -- take_along_dim ----------------------------------------------------------------------------------------------
def _along_shapes(input_shape, indices_shape, axis):
    """The shapes input and indices broadcast to in take_along_dim: equal apart from ``axis``, where each keeps
    its own size."""
    other = np.broadcast_shapes(
        input_shape[:axis] + (1,) + input_shape[axis + 1 :], indices_shape[:axis] + (1,) + indices_shape[axis + 1 :]
    )
    return (
        other[:axis] + (input_shape[axis],) + other[axis + 1 :],
        other[:axis] + (indices_shape[axis],) + other[axis + 1 :],
    )


def _check_take_along_dim(input, indices, dim=None):
    require_integer("take_along_dim", "indices", indices)
    if dim is None:
        _check_index_values("take_along_dim", indices, input.size, "None (the flattened input)", "indices")
        return
    if input.ndim == 0:
        raise ValueError(
            "take_along_dim: argument 'input' expected a tensor with at least 1 dim when dim is given, got a 0-D tensor"
        )
    axis = normalize_dim("take_along_dim", dim, input.ndim)
    if indices.ndim != input.ndim:
        raise ValueError(
            f"take_along_dim: argument 'indices' expected {input.ndim} dims (those of input), got shape {indices.shape}"
        )
    try:
        _along_shapes(input.shape, indices.shape, axis)
    except ValueError:
        raise ValueError(
            f"take_along_dim: argument 'indices' expected a shape broadcastable with input "
            f"{input.shape} apart from dim {dim}, got {indices.shape}"
        ) from None
    size = input.shape[axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        bad = indices.min() if indices.min() < -size else indices.max()
        raise IndexError(
            f"take_along_dim: argument 'indices' expected values in [{-size}, {size - 1}] for dim {dim} of size "
            f"{size} (negative ones count from the end, as torch's), got {bad}"
        )


def _wrapped(indices, size):
    """Negative indices along a dim counted from its end (torch's take_along_dim with a dim)."""
    return np.where(indices < 0, indices + size, indices) if indices.size and indices.min() < 0 else indices


def _take_along_dim(input, indices, dim=None):
    """``torch.take_along_dim(input, indices, dim=None)``: gather along ``dim`` after broadcasting input and
    indices against each other in every other dim; with ``dim=None``, ``input.flatten()[indices.flatten()]``."""
    if dim is None:
        return np.take(input.reshape(-1), indices.reshape(-1))
    axis = normalize_dim("take_along_dim", dim, input.ndim)
    shape_in, shape_ix = _along_shapes(input.shape, indices.shape, axis)
    index = _wrapped(indices, input.shape[axis])
    return np.take_along_axis(np.broadcast_to(input, shape_in), np.broadcast_to(index, shape_ix), axis)


def _take_along_dim_vjp(g, ans, input, indices, dim=None):
    index = _raw(indices)
    if dim is None:
        zeros = np.zeros(np.size(input), g.dtype)
        return np.reshape(_scatter_add_any(zeros, 0, index.reshape(-1), g), input.shape)
    axis = normalize_dim("take_along_dim", dim, input.ndim)
    shape_in, shape_ix = _along_shapes(input.shape, index.shape, axis)
    index = _wrapped(index, input.shape[axis])
    grad = _scatter_add_any(np.zeros(shape_in, g.dtype), axis, np.broadcast_to(index, shape_ix), g)
    return unbroadcast(grad, input.shape)


def _take_along_dim_samples(rng):
    return [
        Sample((uniform(rng, (3, 4)), np.array([[0, 3, 3], [1, 1, 0], [2, 0, 2]])), {"dim": 1}, "repeated"),
        Sample(
            (uniform(rng, (3, 4)), np.array([[-1, 3, -4], [-2, 1, 0], [0, -3, -1]])),
            {"dim": 1},
            "negative: from the end",
        ),
        Sample((uniform(rng, (3, 2)), np.array([[2, 2], [0, 1]]).T), {"dim": 0}, "non-contiguous index"),
        Sample(
            (uniform(rng, (2, 1, 3)), np.array([[[0, 2]], [[1, 1]]]).repeat(4, 1)),
            {"dim": -1},
            "input broadcast along dim 1",
        ),
        Sample(
            (transposed(rng, (3, 1, 4)), np.array([[[3], [0]]])), {"dim": 2}, "both broadcast, non-contiguous input"
        ),
        Sample((uniform(rng, (3, 4)), np.array([[11, 0, 0], [5, 11, 2]])), {}, "dim None, repeated"),
        Sample((uniform(rng, ()), np.array([0, 0])), {}, "0-D input, dim None"),
        Sample((uniform(rng, (2, 3)), np.zeros((2, 0), np.int64)), {"dim": 1}, "zero-size indices"),
        Sample((uniform(rng, (0, 3)), np.zeros((0, 2), np.int64)), {"dim": 1}, "zero-size input"),
        Sample((uniform(rng, (2, 0)), np.zeros((3, 0), np.int64)), {"dim": 0}, "zero-size along the other dim"),
    ]


take_along_dim = defop(
    "take_along_dim",
    family="shape",
    inputs=("input", "indices"),
    forward=_take_along_dim,
    vjps=(_take_along_dim_vjp, NOT_DIFFERENTIABLE),
    check=_check_take_along_dim,
    samples=_take_along_dim_samples,
    torch_ref=lambda torch, input, indices, dim=None: torch.take_along_dim(input, indices.long(), dim),
    method=True,
    numpy={np.take_along_axis: _numpy.take_along_axis},
    notes=case_law(_CASE_LAW, "take_along_dim"),
)


# -- scatter -----------------------------------------------------------------------------------------------------
def _check_scatter(input, index, src=None, dim=0, value=None):
    if (src is None) == (value is None):
        raise TypeError(
            "scatter: expected exactly one of 'src' (a tensor) and 'value' (a number), got "
            + ("both" if src is not None else "neither")
        )
    if value is not None and (
        isinstance(value, bool | np.bool_) or np.ndim(value) != 0 or np.asarray(value).dtype.kind not in "iuf"
    ):
        raise TypeError(f"scatter: argument 'value' expected a number, got {type(value).__name__} {value!r}")
    axis = _check_along("scatter", input, index, dim, src=src)
    if index.size:
        flat = np.ravel_multi_index(_along(_lift(index), axis)[1], _lift(input).shape).reshape(-1)
        if np.unique(flat).size != flat.size:
            raise ValueError(
                "scatter: argument 'index' writes one position of 'input' more than once; which value "
                "lands there is undefined (torch leaves it unspecified): use scatter_add or "
                "scatter_reduce to combine them, or unique indices"
            )


def _scatter(input, dim, index, src=None, value=None):
    """``torch.scatter(input, dim, index, src)`` / ``torch.scatter(input, dim, index, value)``: a copy of
    ``input`` with ``src[i][j]`` (or ``value``) written at ``[index[i][j]][j]`` (dim 0; and so on). Only the
    ``index``-shaped block of ``src`` is read; positions must not repeat."""
    out = _lift(input).copy()
    block, positions = _along(_lift(index), normalize_dim("scatter", dim, out.ndim))
    out[positions] = _lift(src)[block] if src is not None else value
    return out.reshape(input.shape)


def _scatter_vjp_input(g, ans, input, index, src=None, dim=0, value=None):
    if isinstance(g, np.ndarray):
        return _scatter(g, dim, _raw(index), value=0)
    return scatter(g, dim, index, value=0)


def _scatter_vjp_src(g, ans, input, index, src=None, dim=0, value=None):
    picked = _gather_any(g, normalize_dim("scatter", dim, input.ndim), _raw(index))
    return np.reshape(_pad_to(picked, _lift(src).shape), src.shape)


def _scatter_samples(rng):
    return [
        Sample((uniform(rng, (3, 4)), np.array([[0, 2, 1, 1], [1, 1, 0, 2]]), uniform(rng, (2, 4))), {"dim": 0}, "src"),
        Sample(
            (uniform(rng, (3, 4)), np.array([[3, 0], [1, 2], [0, 3]]), uniform(rng, (3, 3))),
            {"dim": -1},
            "src larger than index",
            torch=False,
        ),  # torch's backward for src fails on this shape
        Sample(
            (transposed(rng, (3, 2)), np.array([[1], [0], [1]]), transposed(rng, (3, 1))), {"dim": 1}, "non-contiguous"
        ),
        Sample((uniform(rng, (3, 4)), np.array([[2, 0, 1]]), None), {"dim": 0, "value": 2.5}, "value"),
        Sample((uniform(rng, (2, 3)), np.zeros((0, 3), np.int64), uniform(rng, (0, 3))), {"dim": 0}, "zero-size index"),
        Sample((uniform(rng, (0, 3)), np.zeros((0, 2), np.int64), uniform(rng, (0, 2))), {"dim": 1}, "zero-size input"),
        Sample((uniform(rng, ()), np.array(0), uniform(rng, ())), {"dim": 0}, "0-D"),
        Sample((uniform(rng, (3,)), np.array(2), None), {"dim": -1, "value": -1.0}, "0-D index, value"),
    ]


scatter = defop(
    "scatter",
    family="shape",
    inputs=("input", "index", "src?"),
    forward=_scatter,
    vjps=(_scatter_vjp_input, NOT_DIFFERENTIABLE, _scatter_vjp_src),
    check=_check_scatter,
    samples=_scatter_samples,
    torch_ref=lambda torch, input, index, src=None, dim=0, value=None: torch.scatter(
        input, dim, index.long(), src if src is not None else value
    ),
    notes=case_law(_CASE_LAW, "scatter"),
)


# -- scatter_reduce ----------------------------------------------------------------------------------------------
_REDUCES = ("sum", "prod", "mean", "amax", "amin")
_REDUCE_UFUNC = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


def _check_scatter_reduce(input, index, src, dim, reduce, include_self=True):
    one_of("scatter_reduce", "reduce", reduce, _REDUCES)
    require_bool("scatter_reduce", "include_self", include_self)
    _check_along("scatter_reduce", input, index, dim, src=src)
    if reduce == "mean" and input.dtype == np.bool_:
        raise TypeError(
            "scatter_reduce: argument 'input' expected a numeric tensor for reduce='mean' (as torch), got dtype bool"
        )


def _identity(reduce, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    if info is None:  # bool
        return reduce == "amin"
    return info.min if reduce == "amax" else info.max


def _counts(shape, axis, index, include_self, dtype):
    """How many values reduce into each position of the output: the scattered ones, plus self if included;
    1 where none does (torch's divisor for mean)."""
    n = np.full(shape, 1 if include_self else 0, dtype)
    _scatter_add_into(n, axis, index, np.ones(index.shape, dtype))
    return np.where(n == 0, np.ones((), dtype), n)


def _scatter_reduce(input, dim, index, src, reduce, include_self=True):
    """``torch.scatter_reduce(input, dim, index, src, reduce, include_self=True)``: a copy of ``input`` where
    every position that ``index`` addresses holds the ``reduce`` ("sum", "prod", "mean", "amax", "amin") of
    the ``src`` values scattered there, and of its own value when ``include_self``. Positions nothing is
    scattered to keep ``input``; "mean" divides by the count (floor division for integers, as torch)."""
    shape, input, index, src = input.shape, _lift(input), _lift(index), _lift(src)
    axis = normalize_dim("scatter_reduce", dim, input.ndim)
    block, positions = _along(index, axis)
    out = input.copy()
    if not include_self:
        out[positions] = _identity(reduce, input.dtype)
    _REDUCE_UFUNC[reduce].at(out, positions, src[block])
    if reduce == "mean":
        n = _counts(input.shape, axis, index, include_self, input.dtype)
        out = out // n if input.dtype.kind in "iu" else out / n
    return out.reshape(shape)


def _others_product(v, zero, q, zcount, zsum, traced):
    """The product of the other values reduced into the same position as each value ``v``, exact where values
    are zero: ``q`` is the product of the nonzero values there, ``zcount`` how many are zero, ``zsum`` the sum
    of the zero ones (0, but differentiable: with one other zero, the product of the others is
    ``q / v * that zero``, which is what the second order needs). ``zero`` is ``v == 0``."""
    one = np.ones((), _raw(v).dtype)
    others = zcount - zero
    nonzero_part = q / np.where(zero, one, v)
    if not traced:
        return nonzero_part * (others == 0)
    own_zero = np.where(zero, v, np.zeros((), one.dtype))
    factor = np.where(others == 0, one, np.where(others == 1, zsum - own_zero, np.zeros((), one.dtype)))
    return nonzero_part * factor


def _scatter_reduce_vjp(g, ans, input, index, src, needs, dim, reduce, include_self=True):
    if min(np.ndim(input), np.ndim(index), np.ndim(src)) == 0:  # read as 1-D of size 1, as torch does
        lifted = _lift(input).shape
        grads = _scatter_reduce_vjp(
            np.reshape(g, lifted),
            np.reshape(ans, lifted),
            _lift(input),
            _lift(index),
            _lift(src),
            needs,
            dim,
            reduce,
            include_self,
        )
        return tuple(None if gk is None else np.reshape(gk, np.shape(t)) for gk, t in zip(grads, (input, index, src)))
    index = _raw(index)
    axis = normalize_dim("scatter_reduce", dim, input.ndim)
    block = tuple(slice(0, n) for n in index.shape)
    traced = not isinstance(g, np.ndarray)
    dtype = _raw(g).dtype
    hit = _targets(input.shape, axis, index)
    if reduce in ("sum", "mean"):
        scale = _counts(input.shape, axis, index, include_self, dtype) if reduce == "mean" else None
        gs = g if scale is None else g / scale
        grad_self = gs if include_self else gs * ~hit
        grad_src = _gather_any(gs, axis, index)
    elif reduce in ("amax", "amin"):
        # ties split the gradient evenly among the values equal to the result (as torch); self counts only when
        # included (torch 2.13 also counts an excluded self that equals the result, losing part of the gradient)
        res, x, s = _raw(ans), _raw(input), _raw(src)[block]
        self_is = ~hit | ((x == res) & include_self)
        src_is = s == _gather(res, axis, index)
        n = self_is.astype(dtype)
        _scatter_add_into(n, axis, index, src_is.astype(dtype))
        share = np.where(n == 0, np.zeros((), dtype), 1 / np.where(n == 0, np.ones((), dtype), n))
        grad_self = g * (self_is * share)
        grad_src = _gather_any(g * share, axis, index) * src_is
    else:  # prod: the product of the other values at the same position, exact with zeros
        x, s = input, src[block]
        x_zero, s_zero = _raw(x) == 0, _raw(s) == 0
        one, zero = np.ones((), dtype), np.zeros((), dtype)
        base = np.where(x_zero, one, x) if include_self else np.ones(input.shape, dtype)
        masked_src = np.where(s_zero, one, s)
        q = (
            _scatter_reduce(base, axis, index, masked_src, "prod")
            if not traced
            else scatter_reduce(base, axis, index, masked_src, "prod")
        )
        zcount = (x_zero & include_self).astype(np.int64)
        _scatter_add_into(zcount, axis, index, s_zero.astype(np.int64))
        zsum = None
        if traced:
            zbase = np.where(x_zero, x, zero) if include_self else np.zeros(input.shape, dtype)
            zsum = scatter_add(zbase, axis, index, np.where(s_zero, s, zero))
        grad_self = g * _others_product(x, x_zero, q, zcount, zsum, traced) if include_self else g * ~hit
        grad_src = _gather_any(g, axis, index) * _others_product(
            s,
            s_zero,
            _gather_any(q, axis, index),
            _gather(zcount, axis, index),
            None if zsum is None else gather(zsum, axis, index),
            traced,
        )
    return (grad_self if needs[0] else None, None, _pad_to(grad_src, src.shape) if needs[2] else None)


def _scatter_reduce_samples(rng):
    x, idx, src = uniform(rng, (3, 4)), np.array([[0, 2, 2, 1], [1, 2, 0, 2], [0, 0, 2, 2]]), uniform(rng, (3, 4))
    out = []
    for reduce in _REDUCES:
        for include_self in (True, False):
            out.append(
                Sample(
                    (x, idx, src),
                    {"dim": 0, "reduce": reduce, "include_self": include_self},
                    f"{reduce}, include_self={include_self}, repeated",
                )
            )
        out += [
            Sample(
                (transposed(rng, (3, 2)), np.array([[0, 0], [1, 0], [1, 1]]), transposed(rng, (3, 2))),
                {"dim": -1, "reduce": reduce},
                f"{reduce}, non-contiguous",
            ),
            Sample(
                (uniform(rng, (2, 3)), np.zeros((0, 3), np.int64), uniform(rng, (0, 3))),
                {"dim": 0, "reduce": reduce, "include_self": False},
                f"{reduce}, zero-size index",
            ),
            Sample(
                (uniform(rng, (0, 3)), np.zeros((0, 2), np.int64), uniform(rng, (0, 2))),
                {"dim": 1, "reduce": reduce},
                f"{reduce}, zero-size input",
            ),
        ]
    for reduce in ("sum", "prod", "amax"):  # a 0-D input reads as 1-D of size 1 (torch's rule)
        out.append(
            Sample(
                (uniform(rng, ()), np.array([0, 0]), uniform(rng, (2,))),
                {"dim": 0, "reduce": reduce},
                f"{reduce}, 0-D input",
            )
        )
    out.append(Sample((uniform(rng, ()), np.array(0), uniform(rng, ())), {"dim": -1, "reduce": "mean"}, "mean, 0-D"))
    # ties (kinks: no finite differences there) are checked against torch in tests/ops/test_indexing.py
    zeros = np.array([0.0, 2.0, 0.0, -1.5, 0.0, 0.5, 3.0])
    out += [
        Sample(
            (np.array([0.0, 1.5, -2.0, 0.7]), np.array([0, 1, 1, 2, 2, 3, 3]), zeros),
            {"dim": 0, "reduce": "prod", "include_self": i},
            f"prod, zeros, include_self={i}",
        )
        for i in (True, False)
    ]
    # two zeros reduced into one position: torch refuses the double backward; its first order is in the tests
    out += [
        Sample(
            (np.array([1.5, -2.0]), np.array([0, 0, 0, 1]), np.array([0.0, 2.0, 0.0, 0.5])),
            {"dim": 0, "reduce": "prod"},
            "prod, two zeros at one position",
            torch=False,
        ),
        Sample(
            (uniform(rng, (4, 2)), np.array([[1], [3], [1]]), uniform(rng, (3, 2))),
            {"dim": 0, "reduce": "mean"},
            "index smaller than src",
            torch=False,
        ),
    ]  # torch's backward fails
    return out


scatter_reduce = defop(
    "scatter_reduce",
    family="shape",
    inputs=("input", "index", "src"),
    forward=_scatter_reduce,
    joint_vjp=_scatter_reduce_vjp,
    differentiable=(True, NOT_DIFFERENTIABLE, True),
    check=_check_scatter_reduce,
    samples=_scatter_reduce_samples,
    torch_ref=lambda torch, input, index, src, dim, reduce, include_self=True: torch.scatter_reduce(
        input, dim, index.long(), src, reduce, include_self=include_self
    ),
    method=True,
    notes=case_law(_CASE_LAW, "scatter_reduce"),
)


# -- masked_select, nonzero, one_hot -----------------------------------------------------------------------------
def _check_masked_select(input, mask):
    if mask.dtype != np.bool_:
        raise TypeError(f"masked_select: argument 'mask' expected a bool tensor, got dtype {mask.dtype}")
    broadcast_or_fail(
        "masked_select",
        "mask",
        (input.shape, mask.shape),
        f"a shape broadcastable with input {input.shape}",
        mask.shape,
    )


def _masked_select(input, mask):
    """``torch.masked_select(input, mask)``: the 1-D array of the entries of ``input`` where ``mask`` is True,
    both broadcast to their common shape, in row-major order. Its length depends on the mask's values."""
    shape = np.broadcast_shapes(input.shape, mask.shape)
    return np.broadcast_to(input, shape)[np.broadcast_to(mask, shape)]


def _masked_select_vjp(g, ans, input, mask):
    m = _raw(mask)
    shape = np.broadcast_shapes(input.shape, m.shape)
    m = np.broadcast_to(m, shape)
    if isinstance(g, np.ndarray):
        grad = np.zeros(shape, g.dtype)
        grad[m] = g
    else:
        grad = index_put(np.zeros(shape, g.dtype), (m,), g)
    return unbroadcast(grad, input.shape)


masked_select = defop(
    "masked_select",
    family="shape",
    inputs=("input", "mask"),
    forward=_masked_select,
    vjps=(_masked_select_vjp, NOT_DIFFERENTIABLE),
    check=_check_masked_select,
    samples=lambda rng: [
        Sample((uniform(rng, (3, 4)), uniform(rng, (3, 4)) > 0), {}, "same shape"),
        Sample((uniform(rng, (4,)), uniform(rng, (3, 4)) > 0), {}, "input broadcast (entries read repeatedly)"),
        Sample((uniform(rng, (3, 1)), np.array([True, False, True, True])), {}, "both broadcast"),
        Sample((transposed(rng, (3, 4)), (uniform(rng, (4, 3)) > 0).T), {}, "non-contiguous"),
        Sample((uniform(rng, ()), np.array(True)), {}, "0-D"),
        Sample((uniform(rng, (2, 3)), np.zeros((2, 3), np.bool_)), {}, "nothing selected"),
        Sample((uniform(rng, (0, 3)), np.ones(3, np.bool_)), {}, "zero-size input"),
    ],
    torch_ref=lambda torch, input, mask: torch.masked_select(input, mask),
    method=True,
    notes=case_law(_CASE_LAW, "masked_select"),
)


def _check_nonzero(input, as_tuple=False):
    require_bool("nonzero", "as_tuple", as_tuple)


def _nonzero(input, as_tuple=False):
    """``torch.nonzero(input)``: the int64 positions of the nonzero entries (NaN counts as nonzero), one row
    each, shape (count, input.ndim), in row-major order; with ``as_tuple`` one 1-D index tensor per dim (a 0-D
    input counting as 1-D, as torch). Not differentiable."""
    if as_tuple:
        return tuple(i.astype(np.int64, copy=False) for i in np.nonzero(np.atleast_1d(input)))
    return np.argwhere(input).astype(np.int64, copy=False)


def _nonzero_samples(rng):
    inputs = [
        (np.array([[0.0, 1.5, -0.0], [np.nan, 0.0, -2.0]]), "NaN is nonzero, -0.0 is zero"),
        (transposed(rng, (3, 4)) > 0, "bool, non-contiguous"),
        (np.array([3, 0, -1, 0]), "int64"),
        (np.array(2.0), "0-D nonzero"),
        (np.array(0.0), "0-D zero"),
        (np.zeros((0, 3)), "zero-size"),
    ]
    return [Sample((x,), {"as_tuple": t}, f"{label}{', as_tuple' * t}") for t in (False, True) for x, label in inputs]


nonzero = defop(
    "nonzero",
    family="shape",
    inputs=("input",),
    forward=_nonzero,
    vjps=(NOT_DIFFERENTIABLE,),
    outputs="variable",
    check=_check_nonzero,
    samples=_nonzero_samples,
    torch_ref=lambda torch, input, as_tuple=False: torch.nonzero(input, as_tuple=as_tuple),
    method=True,
    notes=case_law(_CASE_LAW, "nonzero"),
)


def _check_one_hot(input, num_classes=-1):
    require_integer("one_hot", "input", input)
    if (
        isinstance(num_classes, bool)
        or not isinstance(num_classes, int | np.integer)
        or not (num_classes == -1 or num_classes > 0)
    ):
        raise ValueError(
            f"one_hot: argument 'num_classes' expected -1 (infer from the data) or a positive int, got {num_classes!r}"
        )
    if num_classes == -1 and input.size == 0:
        raise ValueError("one_hot: cannot infer the number of classes from an empty tensor; pass num_classes")
    if input.size and input.min() < 0:
        raise ValueError(f"one_hot: argument 'input' expected class values >= 0, got {input.min()}")
    if input.size and num_classes != -1 and input.max() >= num_classes:
        raise ValueError(
            f"one_hot: argument 'input' expected class values below num_classes={num_classes}, got {input.max()}"
        )


def _one_hot(input, num_classes=-1):
    """``torch.nn.functional.one_hot(input, num_classes=-1)``: int64 of shape ``input.shape + (num_classes,)``,
    1 at each value's class; ``num_classes=-1`` takes ``input.max() + 1`` (from the data, also on replay)."""
    n = int(input.max()) + 1 if num_classes == -1 else int(num_classes)
    return (input[..., None] == np.arange(n)).astype(np.int64)


one_hot = defop(
    "one_hot",
    family="shape",
    inputs=("input",),
    forward=_one_hot,
    vjps=(NOT_DIFFERENTIABLE,),
    check=_check_one_hot,
    samples=lambda rng: [
        Sample((np.array([0, 2, 2, 1]),), {}, "inferred classes, repeated"),
        Sample((np.array([[0, 3], [1, 0]]).T,), {"num_classes": 5}, "non-contiguous, more classes"),
        Sample((np.array(1),), {"num_classes": 3}, "0-D"),
        Sample((np.zeros((0, 2), np.int64),), {"num_classes": 4}, "zero-size"),
    ],
    torch_ref=lambda torch, input, num_classes=-1: torch.nn.functional.one_hot(input.long(), num_classes),
    notes=case_law(_CASE_LAW, "one_hot"),
)


# -- take, index_fill, index_copy, index_reduce, masked_scatter, argwhere ----------------------------------------
def _check_take(input, index):
    require_integer("take", "index", index)
    n = input.size
    if index.size and (index.min() < -n or index.max() >= n):
        bad = index.min() if index.min() < -n else index.max()
        raise IndexError(
            f"take: argument 'index' expected values in [{-n}, {n - 1}] (input has {n} entries), got {bad}"
        )


def _take(input, index):
    """``torch.take(input, index)``: the entries of the flattened input at ``index`` (negative positions count
    from the end), in index's shape."""
    return np.reshape(input, (-1,))[np.reshape(index, (-1,)) % max(input.size, 1)].reshape(index.shape)


def _take_vjp(g, ans, input, index):
    n = math.prod(input.shape)  # Tensor.size is a method: the element count from the shape
    positions, flat, zeros = np.reshape(_raw(index), (-1,)) % max(n, 1), np.reshape(g, (-1,)), np.zeros(n, g.dtype)
    grad = (
        _index_add_into(zeros, 0, positions, flat)
        if isinstance(g, np.ndarray)
        else index_add(zeros, 0, positions, flat)
    )
    return np.reshape(grad, input.shape)


take = defop(
    "take",
    method=True,
    notes=case_law(_CASE_LAW, "take"),
    family="shape",
    inputs=("input", "index"),
    forward=_take,
    vjps=(_take_vjp, NOT_DIFFERENTIABLE),
    check=_check_take,
    samples=lambda rng: [
        Sample((uniform(rng, (3, 4)), np.array([[0, 11], [5, 5]])), {}, "repeated"),
        Sample((uniform(rng, (2, 3)), np.array([-1, -6, 2])), {}, "negative"),
        Sample((uniform(rng, ()), np.array(0)), {}, "0-D"),
        Sample((transposed(rng, (3, 4)), np.array([1, 4, 9])), {}, "non-contiguous"),
        Sample((uniform(rng, (2, 3)), np.zeros((0, 2), np.int64)), {}, "empty index"),
        Sample((uniform(rng, (0, 3)), np.zeros(0, np.int64)), {}, "zero-size input"),
    ],
    torch_ref=lambda torch, input, index: torch.take(input, index.long()),
)


def _check_index_fill(input, index, value, dim):
    _along_index("index_fill", input, index, dim, wrap=True)
    if np.asarray(value).dtype.kind == "b":
        raise TypeError("index_fill: argument 'value' expected a number or a 0-D tensor, got a bool")
    fill_value("index_fill", input, value)


def _index_fill(input, dim, index, value):
    """``torch.index_fill(input, dim, index, value)``: a copy of ``input`` with ``value`` at positions ``index``
    (0-D or 1-D; negative count from the end) along ``dim``."""
    axis, positions = _along_index("index_fill", input, index, dim, wrap=True)
    out = np.array(input, copy=True, ndmin=1)  # a 0-D input: one entry along dim 0
    out[(slice(None),) * axis + (positions,)] = np.asarray(value).astype(input.dtype)
    return out.reshape(input.shape)


def _index_fill_vjp(g, ans, input, index, value, dim):
    if isinstance(g, np.ndarray):
        return _index_fill(g, dim, index, 0)
    return index_fill(g, dim, index, 0)


def _index_fill_vjp_value(g, ans, input, index, value, dim):
    """The value's gradient: the sum of the output's gradient over the filled positions (each once)."""
    index = constant_values(index)  # create_graph: a constant Tensor
    axis, positions = _along_index("index_fill", np.empty(np.shape(input), np.int8), index, dim, wrap=True)
    picked = np.reshape(g, (1,) if np.ndim(g) == 0 else np.shape(g))[(slice(None),) * axis + (np.unique(positions),)]
    return np.reshape(np.sum(picked), np.shape(value))


def _index_samples(rng, source_of=None):
    """Samples (input, index[, source]) for index_fill / index_copy; ``source_of(input shape, axis, n)`` gives
    the source's shape (None: no source)."""
    cases = [
        ((4, 3), [0, 2], 0, ""),
        ((2, 3, 4), [3, 1], -1, "dim -1"),
        ((2, 3), 1, 1, "0-D index"),
        ((1, 3), [0], 0, "size-1 dim"),
        ((2, 3), np.zeros(0, np.int64), 1, "empty index"),
        ((0, 3), [2, 0], 1, "zero-size input"),
    ]
    out = []
    for shape, index, dim, label in cases:
        x, i = uniform(rng, shape), np.asarray(index, np.int64)
        extra = () if source_of is None else (uniform(rng, source_of(shape, dim % len(shape), i.size)),)
        out.append(Sample((x, i, *extra), {"dim": dim}, label))
    x = transposed(rng, (3, 4))
    extra = () if source_of is None else (transposed(rng, (3, 2)),)
    out.append(Sample((x, np.array([3, 0]), *extra), {"dim": 1}, "non-contiguous"))
    return out


index_fill = defop(
    "index_fill",
    method=True,
    notes=case_law(_CASE_LAW, "index_fill"),
    family="shape",
    inputs=("input", "index", "value"),
    forward=_index_fill,
    vjps=(_index_fill_vjp, NOT_DIFFERENTIABLE, _index_fill_vjp_value),
    check=_check_index_fill,
    samples=lambda rng: (
        [Sample((*s.inputs, np.array(-1.5)), s.attrs, s.label) for s in _index_samples(rng)]
        + [
            Sample((uniform(rng, (3, 2)), np.array([-1, 0]), np.array(2.0)), {"dim": 0}, "negative index"),
            Sample((uniform(rng, (3, 2)), np.array([1, 1, 0]), np.array(0.5)), {"dim": 1}, "repeated position"),
            Sample((uniform(rng, ()), np.array(0), np.array(1.0)), {"dim": 0}, "0-D input"),
            Sample((np.arange(6).reshape(3, 2), np.array([2]), np.array(9)), {"dim": 0}, "integers"),
        ]
    ),
    # torch's number-value form wraps negative positions, its Tensor-value form refuses them: the reference wraps
    # them first (the same positions), so the Tensor form -- and the value's gradient -- is compared on every sample
    torch_ref=lambda torch, input, index, value, dim: torch.index_fill(
        input, dim, index.long() % (input.shape[dim] if input.ndim else 1), value
    ),
)


def _check_index_copy(input, index, source, dim):
    axis, positions = _along_index("index_copy", input, index, dim)
    expected = _source_shape(input.shape, axis, positions.size) if input.ndim else index.shape
    _check_source("index_copy", input, source, expected, dim)
    if len(np.unique(positions)) != positions.size:
        raise ValueError(
            "index_copy: argument 'index' repeats a position (torch leaves which value lands undefined); "
            "use index_add to add them, or distinct positions"
        )


def _index_copy(input, dim, index, source):
    """``torch.index_copy(input, dim, index, source)``: a copy of ``input`` with ``source[..., i, ...]`` written at
    position ``index[i]`` along ``dim`` (distinct positions)."""
    axis, positions = _along_index("index_copy", input, index, dim)
    out = np.array(input, copy=True, ndmin=1)
    out[(slice(None),) * axis + (positions,)] = np.reshape(source, _source_shape(out.shape, axis, positions.size))
    return out.reshape(input.shape)


def _index_copy_vjp_source(g, ans, input, index, source, dim):
    g1 = np.reshape(g, (-1,)) if input.ndim == 0 else g  # a 0-D input counts as 1-D of size 1
    out = _index_select(g1, dim, _raw(index)) if isinstance(g, np.ndarray) else index_select(g1, dim, index)
    return np.reshape(out, source.shape)


index_copy = defop(
    "index_copy",
    method=True,
    notes=case_law(_CASE_LAW, "index_copy"),
    family="shape",
    inputs=("input", "index", "source"),
    forward=_index_copy,
    vjps=(
        lambda g, ans, input, index, source, dim: _index_fill_vjp(g, ans, input, index, 0, dim),
        NOT_DIFFERENTIABLE,
        _index_copy_vjp_source,
    ),
    check=_check_index_copy,
    samples=lambda rng: (
        _index_samples(rng, _source_shape)
        + [Sample((uniform(rng, ()), np.array(0), uniform(rng, ())), {"dim": 0}, "0-D input")]
    ),
    torch_ref=lambda torch, input, index, source, dim: torch.index_copy(input, dim, index.long(), source),
)


_INDEX_REDUCES = ("prod", "mean", "amax", "amin")


def _expanded_index(input, index, source, dim):
    """index_reduce's index as scatter_reduce's: ``index[i]`` at every position of ``source`` along ``dim``."""
    axis = normalize_dim("index_reduce", dim, input.ndim)
    along = [1] * source.ndim
    along[axis] = -1
    return np.broadcast_to(np.reshape(_raw(index), along), source.shape)


def _check_index_reduce(input, index, source, dim, reduce, include_self=True):
    one_of("index_reduce", "reduce", reduce, _INDEX_REDUCES)
    require_bool("index_reduce", "include_self", include_self)
    if reduce == "mean" and input.dtype == np.bool_:
        raise TypeError("index_reduce: argument 'input' expected a numeric tensor for reduce='mean', got dtype bool")
    if input.ndim == 0:
        raise ValueError("index_reduce: argument 'input' expected a tensor with at least 1 dim, got a 0-D tensor")
    axis, positions = _along_index("index_reduce", input, index, dim)
    _check_source("index_reduce", input, source, _source_shape(input.shape, axis, positions.size), dim)


def _index_reduce(input, dim, index, source, reduce, include_self=True):
    """``torch.index_reduce(input, dim, index, source, reduce, include_self=True)``: scatter_reduce with
    ``index[i]`` standing for every entry of ``source``'s slice i along ``dim`` (reduce "prod", "mean", "amax",
    "amin"); the same kernel and gradients."""
    return _scatter_reduce(input, dim, _expanded_index(input, index, source, dim), source, reduce, include_self)


def _index_reduce_vjp(g, ans, input, index, source, *, needs, dim, reduce, include_self=True):
    expanded = _expanded_index(input, index, source, dim)
    return _scatter_reduce_vjp(g, ans, input, expanded, source, needs, dim, reduce, include_self)


def _index_reduce_samples(rng):
    out = []
    for reduce in _INDEX_REDUCES:
        for include_self in (True, False):
            out.append(
                Sample(
                    (uniform(rng, (3, 2)), np.array([0, 2, 2, 0]), uniform(rng, (4, 2))),
                    {"dim": 0, "reduce": reduce, "include_self": include_self},
                    f"{reduce}, include_self={include_self}, repeated",
                )
            )
        out += [
            Sample(
                (transposed(rng, (2, 3)), np.array([1, 1]), transposed(rng, (2, 2))),
                {"dim": -1, "reduce": reduce},
                f"{reduce}, non-contiguous",
            ),
            Sample(
                (uniform(rng, (2, 3)), np.zeros(0, np.int64), uniform(rng, (0, 3))),
                {"dim": 0, "reduce": reduce},
                f"{reduce}, empty index",
            ),
        ]
    return out


index_reduce = defop(
    "index_reduce",
    method=True,
    notes=case_law(_CASE_LAW, "index_reduce"),
    family="shape",
    inputs=("input", "index", "source"),
    forward=_index_reduce,
    joint_vjp=_index_reduce_vjp,
    differentiable=(True, NOT_DIFFERENTIABLE, True),
    check=_check_index_reduce,
    samples=_index_reduce_samples,
    torch_ref=lambda torch, input, index, source, dim, reduce, include_self=True: torch.index_reduce(
        input, dim, index.long(), source, reduce, include_self=include_self
    ),
)


def _check_masked_scatter(input, mask, source):
    if mask.dtype != np.bool_:
        raise TypeError(f"masked_scatter: argument 'mask' expected a bool tensor, got dtype {mask.dtype}")
    shape = broadcast_or_fail(
        "masked_scatter",
        "mask",
        (input.shape, mask.shape),
        f"a shape broadcastable with input {input.shape}",
        mask.shape,
    )
    count = int(np.count_nonzero(np.broadcast_to(mask, shape)))
    if source.size < count:
        raise ValueError(
            f"masked_scatter: argument 'source' expected at least {count} entries (the True entries of mask), got "
            f"{source.size} (shape {source.shape})"
        )
    require_dtype_of_input("masked_scatter", "source", source, input)


def _masked_scatter(input, mask, source):
    """``torch.masked_scatter(input, mask, source)``: input and mask broadcast; the True positions (in row-major
    order) take the first entries of the flattened source, the others keep input's values."""
    shape = np.broadcast_shapes(input.shape, mask.shape)
    m = np.broadcast_to(mask, shape)
    out = np.array(np.broadcast_to(input, shape))
    out[m] = np.reshape(source, (-1,))[: np.count_nonzero(m)]
    return out


def _masked_scatter_vjp_source(g, ans, input, mask, source):
    m = np.broadcast_to(_raw(mask), np.shape(g))
    n, picked = math.prod(source.shape), g[m] if isinstance(g, np.ndarray) else masked_select(g, m)
    if isinstance(g, np.ndarray):
        flat = np.zeros(n, g.dtype)
        flat[: picked.shape[0]] = picked
        return flat.reshape(source.shape)
    return np.reshape(_pad_to(picked, (n,)), source.shape)


masked_scatter = defop(
    "masked_scatter",
    method=True,
    notes=case_law(_CASE_LAW, "masked_scatter"),
    family="shape",
    inputs=("input", "mask", "source"),
    forward=_masked_scatter,
    vjps=(
        lambda g, ans, input, mask, source: unbroadcast(np.where(_raw(mask), np.zeros((), g.dtype), g), input.shape),
        NOT_DIFFERENTIABLE,
        _masked_scatter_vjp_source,
    ),
    check=_check_masked_scatter,
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3)), uniform(rng, (2, 3)) > 0, uniform(rng, (2, 3))), {}, "same shape"),
        Sample(
            (uniform(rng, (2, 3)), np.array([True, False, True]), uniform(rng, (2, 5))),
            {},
            "mask broadcast, more source",
        ),
        Sample(
            (uniform(rng, (3,)), np.array([[True, False, True], [False, False, True]]), uniform(rng, (4,))),
            {},
            "input broadcast",
        ),
        Sample((transposed(rng, (3, 4)), (uniform(rng, (4, 3)) > 0).T, transposed(rng, (4, 3))), {}, "non-contiguous"),
        Sample((uniform(rng, ()), np.array(True), uniform(rng, (1,))), {}, "0-D"),
        Sample((uniform(rng, (2, 3)), np.zeros((2, 3), np.bool_), uniform(rng, (2,))), {}, "nothing scattered"),
        Sample((uniform(rng, (0, 3)), np.ones(3, np.bool_), uniform(rng, (0,))), {}, "zero-size"),
    ],
    torch_ref=lambda torch, input, mask, source: torch.masked_scatter(input, mask, source),
)


argwhere = defop(
    "argwhere",
    method=True,
    notes=case_law(_CASE_LAW, "argwhere"),
    family="shape",
    inputs=("input",),
    forward=lambda input: _nonzero(input),  # torch.argwhere(input) is torch.nonzero(input)
    vjps=(NOT_DIFFERENTIABLE,),
    samples=lambda rng: [Sample(s.inputs, {}, s.label) for s in _nonzero_samples(rng) if not s.attrs["as_tuple"]],
    torch_ref=lambda torch, input: torch.argwhere(input),
    doc="The indices of input's non-zero entries, one row per entry: an (n, input.ndim) int64 tensor.",
)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_basic_index(index, ndim: int) -> list:
    """``index`` as one entry (int or slice) per leading dim; NotExportable for anything but ints, slices with
    a positive step and one Ellipsis."""
    entries = list(index) if isinstance(index, tuple) else [index]
    ellipses = [k for k, e in enumerate(entries) if e is Ellipsis]
    if len(ellipses) > 1 or not all(
        e is Ellipsis or isinstance(e, slice) or (isinstance(e, int | np.integer) and not isinstance(e, bool))
        for e in entries
    ):
        raise NotExportable("only ints, slices and one Ellipsis have a lowering (not arrays, None or bools)")
    if ellipses:
        k = ellipses[0]
        entries[k : k + 1] = [slice(None)] * (ndim - len(entries) + 1)
    if any(isinstance(e, slice) and e.step is not None and e.step <= 0 for e in entries):
        raise NotExportable("a slice step <= 0 has no lowering")
    return entries


def _onnx_getitem(g, rec, input):
    """Ints, slices, one Ellipsis and None (new axes) as Slice, Gather and Unsqueeze; any other index (integer
    arrays, bool masks, lists) as one Gather of the positions the forward itself picks (``index_map``: the
    index and every shape baked in, as the recorded call's)."""
    shape = rec.inputs[0].shape
    index = rec.attributes["index"]
    entries = list(index) if isinstance(index, tuple) else [index]
    try:
        basic = _onnx_basic_index(tuple(e for e in entries if e is not None), len(shape))
    except NotExportable:
        return index_map(g, rec, input)
    if any(e is None for e in entries):  # None entries: the basic index, then a new axis at each None's place
        return _onnx_with_new_axes(g, rec, input, entries)
    entries = basic
    big = np.iinfo(np.int64).max
    sliced = [(k, e) for k, e in enumerate(entries) if isinstance(e, slice) and e != slice(None)]
    out = input
    if sliced:
        starts = [0 if e.start is None else int(e.start) for _, e in sliced]
        ends = [big if e.stop is None else int(e.stop) for _, e in sliced]
        steps = [1 if e.step is None else int(e.step) for _, e in sliced]
        out = g.op("Slice", out, g.ints(starts), g.ints(ends), g.ints([k for k, _ in sliced]), g.ints(steps))
    for k in reversed([k for k, e in enumerate(entries) if not isinstance(e, slice)]):
        out = g.op("Gather", out, g.const(np.int64(entries[k])), axis=k)
    return out if out != input else g.op("Identity", input)


def _onnx_with_new_axes(g, rec, input, entries):
    """``input[entries]`` with None entries: the index without them, then Unsqueeze at the output axes they take
    (an int removes its axis, a slice keeps it, Ellipsis stands for the dims no other entry names)."""
    ndim = len(rec.inputs[0].shape)
    named = sum(1 for e in entries if e is not None and e is not Ellipsis)
    axes, out_axis = [], 0
    for e in entries:
        if e is None:
            axes.append(out_axis)
            out_axis += 1
        elif e is Ellipsis:
            out_axis += ndim - named
        elif isinstance(e, slice):
            out_axis += 1
    if Ellipsis not in entries:
        entries = [*entries, Ellipsis]
    rest = tuple(e for e in entries if e is not None)
    out = _onnx_getitem(g, dataclasses.replace(rec, attributes={**rec.attributes, "index": rest}), input)
    return g.op("Unsqueeze", out, g.ints(axes))


def _onnx_block(g, x, shape):
    """``x[:shape[0], :shape[1], ...]`` (gather / scatter read only the index-shaped block)."""
    return g.op("Slice", x, g.ints([0] * len(shape)), g.ints(shape), g.ints(range(len(shape))))


def _onnx_axis(rec) -> int:
    return axis_of(int(rec.attributes["dim"]), len(rec.inputs[0].shape))


def _onnx_gather(g, rec, input, index):
    """GatherElements over the index-shaped block; a 0-D input or index counts as 1-D of size 1 (the forward's
    ``_lift``)."""
    shape_in, shape = rec.inputs[0].shape or (1,), rec.inputs[1].shape or (1,)
    if 0 in shape:
        raise NotExportable("an empty index has no lowering")
    x, i = (t if spec.shape else g.op("Reshape", t, g.ints([1])) for t, spec in zip((input, index), rec.inputs))
    axis = axis_of(int(rec.attributes["dim"]), len(shape_in))
    block = [n if d != axis else shape_in[axis] for d, n in enumerate(shape)]
    out = g.op("GatherElements", _onnx_block(g, x, block), i, axis=axis)
    return out if rec.inputs[1].shape else g.op("Reshape", out, g.ints([]))


def _onnx_index_select(g, rec, input, index):
    if not rec.inputs[0].shape:
        raise NotExportable("a 0-D input has no lowering")
    return g.op("Gather", input, g.op("Reshape", index, g.ints([-1])), axis=_onnx_axis(rec))


def _onnx_take_along_dim(g, rec, input, indices):
    shape_in, shape_ix = rec.inputs[0].shape, rec.inputs[1].shape
    if 0 in shape_in or 0 in shape_ix:
        raise NotExportable("an empty input or index has no lowering")
    if rec.attributes.get("dim") is None:
        return g.op("Gather", g.op("Reshape", input, g.ints([-1])), g.op("Reshape", indices, g.ints([-1])), axis=0)
    axis = axis_of(int(rec.attributes["dim"]), len(shape_in))
    to_in, to_ix = _along_shapes(shape_in, shape_ix, axis)
    return g.op(
        "GatherElements", g.op("Expand", input, g.ints(to_in)), g.op("Expand", indices, g.ints(to_ix)), axis=axis
    )


def _onnx_scattered(g, rec, input, index, src, reduction: str = "none"):
    """ScatterElements of ``src``'s index-shaped block (ONNX Runtime applies repeated positions in order, so the
    last write wins as numpy's; "add" sums them)."""
    shape = rec.inputs[1].shape
    if not shape or 0 in shape or not rec.inputs[0].shape:
        raise NotExportable("a 0-D or empty input or index has no lowering")
    return g.op("ScatterElements", input, index, src, axis=_onnx_axis(rec), reduction=reduction)


def _onnx_scatter(g, rec, input, index, src=None):
    shape = rec.inputs[1].shape
    if src is None:
        value = np.asarray(rec.attributes["value"]).astype(rec.inputs[0].dtype)
        src = g.op("Expand", scalar(g, value, rec.inputs[0].dtype), g.ints(shape))
    else:
        src = _onnx_block(g, src, shape)
    return _onnx_scattered(g, rec, input, index, src)


def _onnx_scatter_add(g, rec, input, index, src):
    return _onnx_scattered(g, rec, input, index, _onnx_block(g, src, rec.inputs[1].shape), "add")


_ONNX_REDUCTION = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min", "mean": "add"}


def _onnx_scatter_reduce(g, rec, input, index, src):
    reduce, include_self = rec.attributes["reduce"], bool(rec.attributes.get("include_self", True))
    dtype = np.dtype(rec.inputs[0].dtype)
    if reduce == "mean" and dtype.kind != "f":
        raise NotExportable("an integer mean (floor division) has no lowering")
    if reduce in ("amax", "amin") and dtype.kind == "f":
        raise NotExportable("amax / amin: ONNX Runtime's max / min reductions skip NaN, numpy's keep it")
    shape = rec.inputs[1].shape
    block = _onnx_block(g, src, shape)
    base = input
    if not include_self:  # the addressed positions start from the reduction's identity
        identity = _identity(reduce, dtype)
        base = _onnx_scattered(g, rec, input, index, g.op("Expand", scalar(g, identity, dtype), g.ints(shape)))
    out = _onnx_scattered(g, rec, base, index, block, _ONNX_REDUCTION[reduce])
    if reduce != "mean":
        return out
    ones = g.op("Expand", scalar(g, 1, dtype), g.ints(shape))
    start = g.op("ConstantOfShape", g.op("Shape", input), value=g.tensor(np.array([1], dtype)))
    if not include_self:
        start = _onnx_scattered(g, rec, start, index, g.op("Mul", ones, scalar(g, 0, dtype)))
    counts = _onnx_scattered(g, rec, start, index, ones, "add")
    counts = g.op("Max", counts, scalar(g, 1, dtype))  # nothing scattered and no self: the input stays
    return g.op("Div", out, counts)


def _onnx_index_add(g, rec, input, index, source):
    shape_src = rec.inputs[2].shape
    if not rec.inputs[0].shape or 0 in shape_src:
        raise NotExportable("a 0-D input or an empty source has no lowering")
    axis = _onnx_axis(rec)
    alpha = rec.attributes.get("alpha", 1)
    if alpha != 1:
        source = g.op("Mul", source, scalar(g, alpha, rec.inputs[2].dtype))
    return g.op("ScatterElements", input, _onnx_spread(g, index, axis, shape_src), source, axis=axis, reduction="add")


def _onnx_spread(g, index, axis: int, shape) -> str:
    """The 1-D ``index`` at every position of a ``shape``-d tensor along ``axis`` (the index_* ops' positions
    as ScatterElements' indices)."""
    along = [1] * len(shape)
    along[axis] = -1
    return g.op("Expand", g.op("Reshape", index, g.ints(along)), g.ints(shape))


def _onnx_index_written(g, rec, input, index, source):
    """index_fill (source: the 0-D value) and index_copy: ScatterElements along dim of the source's shape
    (ONNX takes index_fill's negative positions as counted from the end, as the forward); a 0-D input counts as
    1-D of size 1."""
    shape_in = rec.inputs[0].shape or (1,)
    axis = axis_of(int(rec.attributes["dim"]), len(shape_in))
    n = int(np.prod(rec.inputs[1].shape, dtype=np.int64))
    shape = shape_in[:axis] + (n,) + shape_in[axis + 1 :]
    if 0 in shape:
        raise NotExportable("an empty index or input has no lowering")
    dtype = rec.inputs[0].dtype
    if rec.op_name == "index_fill":  # source: the 0-D value
        source = g.op("Expand", cast_to(g, source, rec.inputs[2].dtype, dtype), g.ints(shape))
    x = input if rec.inputs[0].shape else g.op("Reshape", input, g.ints([1]))
    source = g.op("Reshape", source, g.ints(shape))
    out = g.op("ScatterElements", x, _onnx_spread(g, index, axis, shape), source, axis=axis)
    return out if rec.inputs[0].shape else g.op("Reshape", out, g.ints([]))


def _onnx_index_reduce(g, rec, input, index, source):
    """scatter_reduce's lowering with the index spread over the source's shape (the forward's
    ``_expanded_index``)."""
    shape = rec.inputs[2].shape
    if 0 in shape:
        raise NotExportable("an empty index has no lowering")
    spread = _onnx_spread(g, index, _onnx_axis(rec), shape)
    spread_spec = rec.inputs[1]._replace(shape=shape)
    return _onnx_scatter_reduce(
        g, dataclasses.replace(rec, inputs=(rec.inputs[0], spread_spec, rec.inputs[2])), input, spread, source
    )


def _onnx_masked_scatter(g, rec, input, mask, source):
    """The k-th True position of the broadcast mask (row-major) takes source's k-th entry: the entries of the
    flat source at (running count of Trues) - 1, kept where the mask holds."""
    shape = rec.output.shape
    if 0 in shape:
        raise NotExportable("an empty result has no lowering")
    m = g.op("Expand", mask, g.ints(shape))
    count = g.op("CumSum", g.op("Cast", g.op("Reshape", m, g.ints([-1])), to=7), g.const(np.array(0, np.int64)))
    at = g.op("Max", g.op("Sub", count, g.const(np.array(1, np.int64))), g.const(np.array(0, np.int64)))  # 7: INT64
    picked = g.op("Gather", g.op("Reshape", source, g.ints([-1])), at, axis=0)
    return g.op("Where", m, g.op("Reshape", picked, g.ints(shape), allowzero=1), input)


def _onnx_take(g, rec, input, index):
    """The flat input's entries at index (ONNX's Gather counts negative positions from the end, as take)."""
    if 0 in rec.inputs[0].shape:
        raise NotExportable("an empty input has no lowering")
    return g.op("Gather", g.op("Reshape", input, g.ints([-1])), index, axis=0)


def _onnx_one_hot(g, rec, tensor):
    n = int(rec.attributes.get("num_classes", -1))
    if n == -1:
        raise NotExportable("num_classes=-1 counts the classes from the example's values; give num_classes")
    values = g.const(np.array([0, 1], np.int64))
    if not rec.inputs[0].shape:  # ONNX's OneHot takes indices of rank >= 1
        return g.op(
            "Reshape",
            g.op("OneHot", g.op("Reshape", tensor, g.ints([1])), g.const(np.array(n, np.int64)), values, axis=-1),
            g.ints([n]),
        )
    return g.op("OneHot", tensor, g.const(np.array(n, np.int64)), values, axis=-1)


_DATA_SIZED = "its output's size depends on the input's values, and the export records (and bakes) one size"
lowering(getitem, _onnx_getitem)
lowering(gather, _onnx_gather)
lowering(index_select, _onnx_index_select)
lowering(take_along_dim, _onnx_take_along_dim)
lowering(scatter, _onnx_scatter)
lowering(scatter_add, _onnx_scatter_add)
lowering(scatter_reduce, _onnx_scatter_reduce)
lowering(index_add, _onnx_index_add)
lowering(one_hot, _onnx_one_hot)
lowering(take, _onnx_take)
for _op in (index_fill, index_copy):
    lowering(_op, _onnx_index_written)
lowering(index_reduce, _onnx_index_reduce)
lowering(masked_scatter, _onnx_masked_scatter)
lowering(argwhere, not_exportable=_DATA_SIZED)
lowering(masked_select, not_exportable=_DATA_SIZED)
lowering(nonzero, not_exportable=_DATA_SIZED)


def _onnx_index_put(g, rec, input, values):
    """ScatterND into the flattened input at the flat positions the forward's own index resolution picks (the
    indices and shapes baked in, as the recorded call's); reduction 'add' when ``accumulate``. Without it a
    position written twice (numpy keeps the last write, ONNX leaves it undefined) is refused."""
    shape, dtype = rec.inputs[0].shape, np.dtype(rec.inputs[0].dtype)
    accumulate = bool(rec.attributes.get("accumulate", False))
    size = int(np.prod(shape, dtype=np.int64))
    flat = np.arange(size, dtype=np.int64).reshape(shape)
    positions = np.asarray(_index_put_resolved(shape, rec.attributes["indices"]).apply(flat), dtype=np.int64)
    if positions.size == 0:
        raise NotExportable("an index picking no entry has no lowering")
    if not accumulate and np.unique(positions).size != positions.size:
        raise NotExportable("a position written twice without accumulate (numpy keeps the last write) has no lowering")
    values = cast_to(g, values, rec.inputs[1].dtype, dtype)
    spread = g.op("Expand", values, g.ints(positions.shape))
    updates = g.op("Reshape", spread, g.ints([-1]))
    target = g.op("Reshape", input, g.ints([-1]))
    rows = g.const(positions.reshape(-1, 1))
    out = g.op("ScatterND", target, rows, updates, **({"reduction": "add"} if accumulate else {}))
    return g.op("Reshape", out, g.ints(shape))


lowering(index_put, _onnx_index_put)
lowering(setitem, not_exportable="its index is recorded as a constant; a ScatterND lowering is not written")
