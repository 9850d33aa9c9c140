"""Shape ops: views, rearrangements, joins, slices, pads and tiles, with torch 2.13 semantics. The indexing
ops (getitem, gather, index_select and the scatters) live in ops/indexing.py, the ops with a variable number of
outputs (split, chunk, unbind, meshgrid, tensor_split, ...) in ops/movement.py.

Every backward routes the gradient back to the positions the forward read it from: a reshape back, a
broadcast summed, a narrow or constant pad undone by the opposite pad (``pad(g, -pad)``), a tile summed
over its copies, a reflect/replicate/circular pad *added* back with ``index_add`` (positions read twice
get both gradients). Each rule is written with numpy functions that map to registered ops or, where it
scatters, calls the scatter op when given Tensors (``create_graph=True``) and its numpy kernel when given
arrays, so every op here is differentiable twice. Views share memory as torch's do (ops/_inplace.py TORCH_VIEWS)
(docs/porting.md). torch's conventions for each op are its notes (``_CASE_LAW``).
"""

__all__ = [
    "reshape",
    "flatten",
    "squeeze",
    "unsqueeze",
    "transpose",
    "permute",
    "expand",
    "broadcast_to",
    "concat",
    "cat",
    "stack",
    "narrow",
    "pad",
    "tril",
    "triu",
    "masked_fill",
    "repeat",
    "swapaxes",
    "swapdims",
    "movedim",
    "moveaxis",
    "unflatten",
    "ravel",
    "view_as",
    "reshape_as",
    "expand_as",
    "broadcast_tensors",
    "concatenate",
    "select",
    "select_scatter",
    "slice_scatter",
]

import math

import numpy as np

from tape.broadcast import unbroadcast
from tape.onnx import lowering
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop, get_op

from . import _numpy
from ._declare import one_input_op
from ._notes import case_law
from ._onnx import NotExportable, axis_of, cast_to, index_map
from ._samples import transposed, uniform
from ._validation import (
    broadcast_or_fail,
    fill_value,
    integer,
    ints,
    normalize_dim,
    normalize_dims,
    real,
    require_dtype_of_input,
)
from .indexing import _index_add_into, index_add

# torch's case law, op by op: each entry joins the notes= of the ops it names (shown in docs/coverage.md)
_CASE_LAW = (
    (
        ("concat", "stack", "concatenate"),
        "Takes any number of tensors as one sequence input, like ``torch.cat(tensors, dim=0)``.",
    ),
    (
        ("concat", "concatenate"),
        "As in torch, 1-D empty tensors (shape (0,)) are skipped whatever the other tensors' shapes; "
        "``concat`` is also ``cat``, ``concatenate(tensors, axis=0)`` is concat under numpy's argument name.",
    ),
    (("repeat",), "``repeat(input, repeats)`` is ``Tensor.repeat``: ``repeats`` is a tuple (or one int)."),
    (("expand",), "``broadcast_to`` is ``expand`` (both take torch's ``size``)."),
    (
        ("swapaxes", "swapdims"),
        "``swapaxes(input, axis0, axis1)`` and ``swapdims(input, dim0, dim1)`` are transpose's kernel and rule, "
        "under torch's own parameter names (tests/ops/test_torch_keywords.py calls torch by them).",
    ),
    (("movedim",), "Also ``moveaxis``, the same op."),
    (("broadcast_tensors",), "``broadcast_tensors(*tensors)``: each tensor keeps its dtype."),
    (
        ("select", "select_scatter", "slice_scatter"),
        "``select(input, dim, index)`` and its adjoint ``select_scatter(input, src, dim, index)``, and "
        "``slice_scatter(input, src, dim=0, start=None, end=None, step=1)``, differentiate through each other "
        "(select's gradient is a select_scatter into zeros, the scatters' gradient for ``src`` is the selection).",
    ),
)


def _reshape_back(g, ans, input, *args, **attrs):
    return np.reshape(g, input.shape)


# -- reshape / flatten / squeeze / unsqueeze ---------------------------------------------------------------
def _reshape(input, shape):
    shape = ints("reshape", "shape", shape)
    try:
        return input.reshape(shape)
    except ValueError:
        raise ValueError(
            f"reshape: argument 'shape' expected a shape with {input.size} elements for input "
            f"{input.shape}, got {shape}"
        ) from None


reshape = defop(
    "reshape",
    family="shape",
    inputs=("input",),
    forward=_reshape,
    vjps=(_reshape_back,),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3, 4)),), {"shape": (6, 4)}),
        Sample((uniform(rng, (2, 3, 4)),), {"shape": (4, -1)}, "-1"),
        Sample((transposed(rng, (3, 4)),), {"shape": (12,)}, "non-contiguous"),
        Sample((uniform(rng, ()),), {"shape": (1, 1)}, "scalar"),
        Sample((uniform(rng, (1, 3)),), {"shape": 3}, "int shape"),
        Sample((uniform(rng, (0, 3)),), {"shape": (3, 0, 1)}, "zero-size"),
    ],
    torch_ref=lambda torch, input, shape: torch.reshape(input, ints("reshape", "shape", shape)),
    numpy={np.reshape: _numpy.reshape},
    doc="input with a new shape of the same number of entries (one size may be -1, inferred).",
)


def _flat_shape(x, start_dim, end_dim):
    if x.ndim == 0:
        normalize_dim("flatten", start_dim, 0, "start_dim")
        normalize_dim("flatten", end_dim, 0, "end_dim")
        return (1,)
    start = normalize_dim("flatten", start_dim, x.ndim, "start_dim")
    end = normalize_dim("flatten", end_dim, x.ndim, "end_dim")
    if start > end:
        raise ValueError(
            f"flatten: argument 'start_dim' expected a dim not after end_dim ({end_dim}), got "
            f"{start_dim} for a {x.ndim}-D input"
        )
    return x.shape[:start] + (math.prod(x.shape[start : end + 1]),) + x.shape[end + 1 :]


flatten = defop(
    "flatten",
    family="shape",
    inputs=("input",),
    forward=lambda input, start_dim=0, end_dim=-1: input.reshape(_flat_shape(input, start_dim, end_dim)),
    vjps=(_reshape_back,),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3, 4)),), {"start_dim": 0, "end_dim": -1}, "all"),
        Sample((uniform(rng, (2, 3, 4)),), {"start_dim": 1, "end_dim": 2}),
        Sample((uniform(rng, (2, 1, 3, 2)),), {"start_dim": -3, "end_dim": -2}),
        Sample((transposed(rng, (2, 3, 2)),), {"start_dim": 0, "end_dim": 1}, "non-contiguous"),
        Sample((uniform(rng, (2, 3)),), {"start_dim": 1, "end_dim": 1}, "one dim"),
        Sample((uniform(rng, ()),), {"start_dim": 0, "end_dim": -1}, "scalar"),
        Sample((uniform(rng, (2, 0, 3)),), {"start_dim": 1, "end_dim": 2}, "zero-size"),
    ],
    torch_ref=lambda torch, input, start_dim=0, end_dim=-1: torch.flatten(input, start_dim, end_dim),
    method=True,
    doc="input with dims start_dim..end_dim merged into one.",
)


def _squeeze(input, dim=None):
    dims = normalize_dims("squeeze", None if dim is None else ints("squeeze", "dim", dim), input.ndim)
    return np.squeeze(input, axis=tuple(d for d in dims if input.shape[d] == 1))


squeeze = defop(
    "squeeze",
    family="shape",
    inputs=("input",),
    forward=_squeeze,
    vjps=(_reshape_back,),
    samples=lambda rng: [
        Sample((uniform(rng, (1, 3, 1, 2)),), {"dim": None}, "all"),
        Sample((uniform(rng, (1, 3, 1, 2)),), {"dim": -2}),
        Sample((uniform(rng, (1, 3, 1, 2)),), {"dim": 1}, "not size 1: no-op"),
        Sample((uniform(rng, (1, 3, 1, 2)),), {"dim": (0, -2)}, "tuple"),
        Sample((transposed(rng, (2, 1, 3)),), {"dim": 1}, "non-contiguous"),
        Sample((uniform(rng, (0, 1, 3)),), {"dim": None}, "zero-size"),
    ],
    torch_ref=lambda torch, input, dim=None: torch.squeeze(input) if dim is None else torch.squeeze(input, dim),
    method=True,
    numpy={np.squeeze: _numpy.squeeze},
    doc="input without its size-1 dims (only those of ``dim`` when given).",
)


def _unsqueeze(input, dim):
    return np.expand_dims(input, normalize_dim("unsqueeze", dim, input.ndim + 1))


unsqueeze = defop(
    "unsqueeze",
    family="shape",
    inputs=("input",),
    forward=_unsqueeze,
    vjps=(_reshape_back,),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3)),), {"dim": 0}),
        Sample((uniform(rng, (2, 3)),), {"dim": 2}, "after the last"),
        Sample((uniform(rng, (2, 3)),), {"dim": -1}),
        Sample((uniform(rng, (2, 3)),), {"dim": -3}),
        Sample((uniform(rng, ()),), {"dim": 0}, "scalar"),
        Sample((transposed(rng, (3, 4)),), {"dim": 1}, "non-contiguous"),
        Sample((uniform(rng, (0, 3)),), {"dim": 1}, "zero-size"),
    ],
    torch_ref=lambda torch, input, dim: torch.unsqueeze(input, dim),
    method=True,
    numpy={np.expand_dims: _numpy.expand_dims},
    doc="input with a new size-1 dim inserted at ``dim``.",
)


# -- transpose / permute -----------------------------------------------------------------------------------
def _swap_axes(op, input, dim0, dim1, names=("dim0", "dim1")):
    """``input`` with two dims swapped (transpose, swapaxes, swapdims; ``names``: the op's argument names)."""
    if input.ndim == 0:  # torch: dims in [-1, 0] swap a 0-D tensor with itself
        normalize_dim(op, dim0, 0, names[0]), normalize_dim(op, dim1, 0, names[1])
        return input
    return np.swapaxes(
        input, normalize_dim(op, dim0, input.ndim, names[0]), normalize_dim(op, dim1, input.ndim, names[1])
    )


def _transpose(input, dim0=-2, dim1=-1):
    return _swap_axes("transpose", input, dim0, dim1)


def _transpose_samples(rng):
    return [
        Sample((uniform(rng, (2, 3)),), {"dim0": 0, "dim1": 1}),
        Sample((uniform(rng, (2, 3, 4)),), {"dim0": -1, "dim1": 0}),
        Sample((uniform(rng, (2, 3, 4)),), {"dim0": 1, "dim1": 1}, "same dim"),
        Sample((transposed(rng, (2, 1, 3)),), {"dim0": 0, "dim1": -2}, "non-contiguous"),
        Sample((uniform(rng, (0, 3)),), {"dim0": 0, "dim1": 1}, "zero-size"),
        Sample((uniform(rng, ()),), {"dim0": 0, "dim1": -1}, "0-D"),
    ]


transpose = defop(
    "transpose",
    family="shape",
    inputs=("input",),
    forward=_transpose,
    vjps=(lambda g, ans, input, dim0=-2, dim1=-1: _transpose(g, dim0, dim1),),
    samples=_transpose_samples,
    torch_ref=lambda torch, input, dim0=-2, dim1=-1: torch.transpose(input, dim0, dim1),
    method=True,
    numpy={np.swapaxes: _numpy.swapaxes},
    doc="input with dims dim0 and dim1 swapped.",
)


def _permutation(x, dims):
    dims = tuple(normalize_dim("permute", d, x.ndim, "dims") for d in ints("permute", "dims", dims))
    if sorted(dims) != list(range(x.ndim)):
        raise ValueError(f"permute: argument 'dims' expected a permutation of {x.ndim} dims, got {dims}")
    return dims


permute = defop(
    "permute",
    family="shape",
    inputs=("input",),
    forward=lambda input, dims: np.transpose(input, _permutation(input, dims)),
    vjps=(lambda g, ans, input, dims: np.transpose(g, tuple(np.argsort(_permutation(input, dims)))),),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3, 4)),), {"dims": (2, 0, 1)}),
        Sample((uniform(rng, (2, 3)),), {"dims": (-1, 0)}),
        Sample((transposed(rng, (2, 1, 3)),), {"dims": (1, -1, 0)}, "non-contiguous"),
        Sample((uniform(rng, (2, 0, 3)),), {"dims": (1, 2, 0)}, "zero-size"),
    ],
    torch_ref=lambda torch, input, dims: torch.permute(input, dims),
    numpy={np.transpose: _numpy.transpose, np.moveaxis: _numpy.moveaxis},
    doc="input with its dims reordered as ``dims``.",
)


# -- expand / broadcast_to ---------------------------------------------------------------------------------
def _expanded_shape(x, shape, op="expand", argument="size") -> tuple:
    """torch's expand: new leading dims of any size; -1 keeps a dim; a dim may only grow from size 1."""
    shape = ints(op, argument, shape)
    lead = len(shape) - x.ndim
    if lead < 0:
        raise ValueError(
            f"{op}: argument '{argument}' expected at least {x.ndim} sizes for input {x.shape}, got {shape}"
        )
    out = []
    for i, size in enumerate(shape):
        old = x.shape[i - lead] if i >= lead else None
        if size == -1 and old is not None:
            size = old
        if size < 0 or (old is not None and old != 1 and size != old):
            where = "a new leading dim" if old is None else f"a dim of size {old}"
            raise ValueError(
                f"{op}: argument '{argument}' expected sizes matching input {x.shape} (only size-1 dims "
                f"grow), got {shape}: {size} for {where}"
            )
        out.append(size)
    return tuple(out)


expand = defop(
    "expand",
    notes=case_law(_CASE_LAW, "expand"),
    family="shape",
    inputs=("input",),
    forward=lambda input, size: np.broadcast_to(input, _expanded_shape(input, size)),
    vjps=(lambda g, ans, input, size: unbroadcast(g, input.shape),),
    samples=lambda rng: [
        Sample((uniform(rng, (3, 1)),), {"size": (2, 3, 4)}, "new dim + size-1 dim"),
        Sample((uniform(rng, (3, 1)),), {"size": (-1, 4)}, "-1 keeps"),
        Sample((uniform(rng, ()),), {"size": (2, 3)}, "scalar"),
        Sample((uniform(rng, (2, 3)),), {"size": (2, 3)}, "same shape"),
        Sample((transposed(rng, (1, 3)),), {"size": (2, 3, -1, 3)}, "non-contiguous"),
        Sample((uniform(rng, (1, 3)),), {"size": (0, 3)}, "size-1 dim to 0"),
        Sample((uniform(rng, (0, 1)),), {"size": (2, 0, 4)}, "zero-size"),
    ],
    torch_ref=lambda torch, input, size: input.expand(*ints("expand", "size", size)),
    numpy={np.broadcast_to: _numpy.broadcast_to, np.full_like: _numpy.full_like},
    doc="input broadcast to ``size`` without copying (-1 keeps a dim's size); only size-1 dims can grow.",
)
broadcast_to = expand  # torch.broadcast_to(input, size) is Tensor.expand(size): the same signature


# -- variadic joins: concat / stack ------------------------------------------------------------------------
def _skipped(t) -> bool:
    """torch.cat's legacy rule: a 1-D empty tensor joins anything (it is skipped)."""
    return t.shape == (0,)


def _check_join(op, tensors, dim, stacking):
    joined = tensors if stacking else [t for t in tensors if not _skipped(t)] or tensors[:1]
    first = joined[0]
    if not stacking and first.ndim == 0:
        raise ValueError(f"{op}: argument 'tensors' expected tensors with at least 1 dim, got a 0-D tensor")
    axis = normalize_dim(op, dim, first.ndim + 1 if stacking else first.ndim)
    for i, t in enumerate(tensors):
        if t.dtype != first.dtype:
            raise TypeError(
                f"{op}: argument 'tensors' expected one dtype, got {first.dtype} and {t.dtype} (tensor {i})"
            )
        if t is first or (not stacking and _skipped(t)):
            continue
        same = (
            t.shape == first.shape
            if stacking
            else (
                t.ndim == first.ndim and all(a == b for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != axis)
            )
        )
        if not same:
            rule = "the same shape" if stacking else f"the same shape except in dim {dim}"
            raise ValueError(f"{op}: argument 'tensors' expected {rule}, got {first.shape} and {t.shape} (tensor {i})")
    return axis


def _join(op, tensors, dim):
    axis = _check_join(op, tensors, dim, False)
    kept = [t for t in tensors if not _skipped(t)]
    return np.concatenate(kept, axis=axis) if kept else np.concatenate(tensors)


def _concat(tensors, dim=0):
    """``torch.cat(tensors, dim=0)``: join any number of tensors along an existing ``dim``."""
    return _join("concat", tensors, dim)


def _concat_vjp(g, ans, tensors, *, needs, dim=0):
    axis = normalize_dim("concat", dim, g.ndim)
    grads, start = [], 0
    for t, need in zip(tensors, needs[0]):
        if _skipped(t):  # joined nothing (or only 1-D empties were joined): an empty gradient
            grads.append(np.zeros((0,), t.dtype) if need else None)
            continue
        stop = start + t.shape[axis]
        grads.append(g[(slice(None),) * axis + (slice(start, stop),)] if need else None)
        start = stop
    return (grads,)


def _join_samples(stacking):
    def generate(rng):
        def some(*shapes):
            return [uniform(rng, s) for s in shapes]

        if stacking:
            return [
                Sample((some((2, 3), (2, 3)),), {"dim": 0}, "2 tensors"),
                Sample((some((2, 3), (2, 3), (2, 3)),), {"dim": -1}, "3 tensors, dim -1"),
                Sample((some((2, 1), (2, 1), (2, 1)),), {"dim": 1}, "size-1 dims"),
                Sample(([transposed(rng, (2, 3)), uniform(rng, (2, 3))],), {"dim": -2}, "non-contiguous"),
                Sample((some(*[(3,)] * 11),), {"dim": 0}, "11 tensors"),
                Sample((some(()),), {"dim": 0}, "one scalar"),
                Sample((some((0, 3), (0, 3)),), {"dim": 1}, "zero-size"),
            ]
        return [
            Sample((some((2, 3), (1, 3)),), {"dim": 0}, "2 tensors"),
            Sample((some((2, 3), (2, 1), (2, 2)),), {"dim": -1}, "3 tensors, dim -1, unequal"),
            Sample(([transposed(rng, (2, 3)), uniform(rng, (3, 3))],), {"dim": -2}, "non-contiguous"),
            Sample((some((2, 1, 2), (2, 3, 2)),), {"dim": 1}, "size-1 dim"),
            Sample((some(*[(1, 2)] * 11),), {"dim": 0}, "11 tensors"),
            Sample((some((4,)),), {"dim": 0}, "one tensor"),
            Sample((some((2, 3), (0, 3), (1, 3)),), {"dim": 0}, "a zero-size tensor"),
            Sample((some((0,), (2, 3), (0,)),), {"dim": 1}, "1-D empty tensors are skipped"),
            Sample((some((2, 0), (2, 0)),), {"dim": 0}, "all zero-size"),
        ]

    return generate


def _join_op(name, forward, vjp, stacking: bool, torch_name: str, numpy: dict):
    """concat / stack: any number of tensors as one sequence input, joined along ``dim`` (stack: a new one)."""
    return defop(
        name,
        notes=case_law(_CASE_LAW, name),
        family="shape",
        inputs=("*tensors",),
        forward=forward,
        joint_vjp=vjp,
        samples=_join_samples(stacking),
        torch_ref=lambda torch, tensors, dim=0: getattr(torch, torch_name)(tensors, dim=dim),
        numpy=numpy,
    )


concat = _join_op("concat", _concat, _concat_vjp, False, "cat", {np.concatenate: _numpy.concatenate})
cat = concat


def _stack(tensors, dim=0):
    """``torch.stack(tensors, dim=0)``: join any number of same-shape tensors along a new ``dim``."""
    return np.stack(tensors, axis=_check_join("stack", tensors, dim, True))


def _stack_vjp(g, ans, tensors, *, needs, dim=0):
    axis = normalize_dim("stack", dim, g.ndim)
    return ([g[(slice(None),) * axis + (i,)] if need else None for i, need in enumerate(needs[0])],)


stack = _join_op("stack", _stack, _stack_vjp, True, "stack", {np.stack: _numpy.stack})


# -- narrow ----------------------------------------------------------------------------------------------------
def _narrow_index(x, dim, start, length) -> tuple:
    if x.ndim == 0:
        raise ValueError("narrow: argument 'input' expected a tensor with at least 1 dim, got a 0-D tensor")
    axis = normalize_dim("narrow", dim, x.ndim)
    size = x.shape[axis]
    start, length = ints("narrow", "start", start), ints("narrow", "length", length)
    if len(start) != 1 or not -size <= start[0] <= size:
        raise ValueError(
            f"narrow: argument 'start' expected an int in [{-size}, {size}] for dim {dim} of size {size}, got {start}"
        )
    start = start[0] % size if start[0] < 0 else start[0]
    if len(length) != 1 or length[0] < 0 or start + length[0] > size:
        raise ValueError(
            f"narrow: argument 'length' expected an int in [0, {size - start}] (start {start}, size "
            f"{size}), got {length}"
        )
    return (slice(None),) * axis + (slice(start, start + length[0]),)


def _narrow_vjp(g, ans, input, dim, start, length):
    index = _narrow_index(input, dim, start, length)
    if isinstance(g, np.ndarray):
        grad = np.zeros(input.shape, dtype=g.dtype)
        grad[index] = g
        return grad
    axis = len(index) - 1
    kept = index[-1]
    widths = (0, 0) * (input.ndim - 1 - axis) + (kept.start, input.shape[axis] - kept.stop)
    return pad(g, widths)  # zeros around the narrowed part: pad's own rule is narrow-like again


narrow = defop(
    "narrow",
    family="shape",
    inputs=("input",),
    forward=lambda input, dim, start, length: input[_narrow_index(input, dim, start, length)],
    vjps=(_narrow_vjp,),
    samples=lambda rng: [
        Sample((uniform(rng, (4, 3)),), {"dim": 0, "start": 1, "length": 2}),
        Sample((uniform(rng, (2, 5)),), {"dim": -1, "start": -3, "length": 3}, "negative start and dim"),
        Sample((uniform(rng, (2, 1)),), {"dim": 1, "start": 0, "length": 1}, "size-1 dim"),
        Sample((transposed(rng, (3, 4)),), {"dim": 1, "start": 2, "length": 1}, "non-contiguous"),
        Sample((uniform(rng, (3, 4)),), {"dim": 0, "start": 1, "length": 0}, "length 0"),
        Sample((uniform(rng, (0, 4)),), {"dim": 1, "start": 1, "length": 2}, "zero-size input"),
    ],
    torch_ref=lambda torch, input, dim, start, length: torch.narrow(input, dim, start, length),
    method=True,
    doc="The slice start:start + length of input along ``dim``.",
)


# -- pad ---------------------------------------------------------------------------------------------------
_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _pad_widths(x, pad, mode) -> list:
    """[(axis, before, after)] from torch's pad tuple (last dim first), validated as torch does."""
    pad = ints("pad", "pad", pad)
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: argument 'mode' expected one of {_PAD_MODES}, got {mode!r}")
    pairs = len(pad) // 2
    if len(pad) % 2 or pairs > x.ndim:
        raise ValueError(
            f"pad: argument 'pad' expected an even number of sizes, at most 2 per dim of the {x.ndim}-D "
            f"input, got {pad}"
        )
    if mode != "constant" and not (1 <= pairs <= 3 and x.ndim in (pairs + 1, pairs + 2)):
        raise ValueError(
            f"pad: argument 'pad' with mode '{mode}' expected 2, 4 or 6 sizes padding the last 1, 2 or "
            f"3 dims of a 2-D/3-D, 3-D/4-D or 4-D/5-D input (as torch), got {pad} for shape {x.shape}"
        )
    if mode in ("reflect", "replicate") and 0 in x.shape[x.ndim - pairs - 1 :]:
        raise ValueError(
            f"pad: argument 'input' with mode '{mode}' expected non-zero sizes in every dim but the batch "
            f"dim (as torch), got shape {x.shape}"
        )
    widths = []
    for k in range(pairs):
        axis = x.ndim - 1 - k
        before, after, size = pad[2 * k], pad[2 * k + 1], x.shape[axis]
        out = size + before + after
        kept = size - max(-before, 0) - max(-after, 0)  # what is left of the input after the negative pads crop
        if out < 0 or kept < 0 or (mode in ("reflect", "replicate") and out <= 0):
            raise ValueError(
                f"pad: argument 'pad' gives dim {axis} (size {size}) the size {out}"
                f"{'' if kept >= 0 else ', cropping more than it holds'}, got {pad}"
            )
        # circular crops first and wraps within what is left (as torch does)
        limit = {"reflect": size - 1, "circular": kept}.get(mode)
        if limit is not None and max(before, after) > limit:
            raise ValueError(
                f"pad: argument 'pad' expected pads of at most {limit} in mode '{mode}' for dim {axis} "
                f"of size {size}, got {pad}"
            )
        widths.append((axis, before, after))
    return widths


def _source_positions(size, before, after, mode) -> np.ndarray:
    """For reflect/replicate/circular: the input position each output position along one dim copies."""
    i = np.arange(-before, size + after)
    if mode == "reflect":
        i = np.abs(i)
        return np.where(i >= size, 2 * (size - 1) - i, i)
    if mode == "replicate":
        return np.clip(i, 0, size - 1)
    start, kept = max(-before, 0), size - max(-before, 0) - max(-after, 0)
    return start + np.arange(-max(before, 0), kept + max(after, 0)) % max(kept, 1)


def _pad(input, pad, mode="constant", value=None):
    """``torch.nn.functional.pad(input, pad, mode='constant', value=None)``; negative pads crop."""
    widths = _pad_widths(input, pad, mode)
    x = input
    if mode == "constant":
        crop = [slice(None)] * x.ndim
        grow = [(0, 0)] * x.ndim
        for axis, before, after in widths:
            crop[axis] = slice(max(-before, 0), x.shape[axis] - max(-after, 0))
            grow[axis] = (max(before, 0), max(after, 0))
        fill = 0 if value is None else real("pad", "value", value)
        return np.pad(x[tuple(crop)], grow, constant_values=np.asarray(fill).astype(x.dtype))
    for axis, before, after in widths:
        x = np.take(x, _source_positions(x.shape[axis], before, after, mode), axis=axis)
    return x


def _pad_vjp(g, ans, input, pad, mode="constant", value=None):
    return _pad_back(g, input, pad, mode)


def _pad_back(g, input, pads, mode):
    widths = _pad_widths(input, pads, mode)
    if mode == "constant":  # the opposite pad crops what was added and puts zeros where it cropped
        opposite = tuple(-p for p in ints("pad", "pad", pads))
        return _pad(g, opposite) if isinstance(g, np.ndarray) else pad(g, opposite)
    for axis, before, after in reversed(widths):  # undo the forward's takes, last first, adding repeats
        size = input.shape[axis]
        positions = _source_positions(size, before, after, mode)
        zeros = np.zeros(g.shape[:axis] + (size,) + g.shape[axis + 1 :], dtype=g.dtype)
        g = (
            _index_add_into(zeros, axis, positions, g)
            if isinstance(g, np.ndarray)
            else index_add(zeros, axis, positions, g)
        )
    return g


def _pad_samples(rng):
    return [
        Sample((uniform(rng, (2, 3, 4)),), {"pad": (1, 2)}, "last dim"),
        Sample((uniform(rng, (2, 3, 4)),), {"pad": (0, 1, 2, 0, 1, 1), "value": 1.5}, "every side, value"),
        Sample((uniform(rng, (3, 4)),), {"pad": (-1, 2, 1, -2)}, "negative crops"),
        Sample((transposed(rng, (3, 4)),), {"pad": (1, 1, 0, 1)}, "non-contiguous"),
        Sample((uniform(rng, (2, 1, 4)),), {"pad": (0, 0, 1, 2)}, "size-1 dim"),
        Sample((uniform(rng, (2, 3)),), {"pad": (-3, 0)}, "shrink a dim to 0"),
        Sample((uniform(rng, (2, 3)),), {"pad": (-1, -2, 1, 0)}, "crop both sides to 0, grow another"),
        Sample((uniform(rng, (0, 3)),), {"pad": (1, 1, 2, 0)}, "zero-size input grows"),
        Sample((uniform(rng, (2, 2, 4)),), {"pad": (1, 3), "mode": "reflect"}, "reflect"),
        Sample((uniform(rng, (1, 2, 3, 4)),), {"pad": (3, 2, 1, 2), "mode": "reflect"}, "reflect 2 dims"),
        Sample((uniform(rng, (2, 4)),), {"pad": (-1, 2), "mode": "reflect"}, "reflect negative"),
        Sample((uniform(rng, (0, 2, 4)),), {"pad": (2, 1), "mode": "reflect"}, "reflect, zero batch"),
        Sample((uniform(rng, (2, 3)),), {"pad": (4, 1), "mode": "replicate"}, "replicate"),
        Sample((uniform(rng, (1, 2, 2, 3)),), {"pad": (0, 2, 1, 1, 1, 0), "mode": "replicate"}, "replicate 3 dims"),
        Sample((uniform(rng, (2, 4)),), {"pad": (4, 1), "mode": "circular"}, "circular"),
        Sample((uniform(rng, (2, 3, 4)),), {"pad": (-1, 2, 1, -2), "mode": "circular"}, "circular 2 dims, crop"),
        Sample((uniform(rng, (2, 2, 3)),), {"pad": (-1, -2), "mode": "circular"}, "circular crop to 0"),
        Sample((uniform(rng, (2, 0, 3)),), {"pad": (1, 2), "mode": "circular"}, "circular, zero channels"),
    ]


pad = defop(
    "pad",
    family="shape",
    inputs=("input",),
    forward=_pad,
    vjps=(_pad_vjp,),
    samples=_pad_samples,
    torch_ref=lambda torch, input, pad, mode="constant", value=None: torch.nn.functional.pad(
        input, pad, mode=mode, value=value
    ),
)


# -- tril / triu -------------------------------------------------------------------------------------------
def _triangle(name, np_fn, **declaration):
    def forward(input, diagonal=0):
        if input.ndim < 2:
            raise ValueError(f"{name}: argument 'input' expected at least 2 dims, got shape {input.shape}")
        integer(name, "diagonal", diagonal)
        return np_fn(input, k=diagonal)

    return one_input_op(
        name,
        "shape",
        forward,
        lambda g, ans, input, diagonal=0: np_fn(g, k=diagonal),
        samples=lambda rng: [
            Sample((uniform(rng, (3, 3)),), {}, "square"),
            Sample((uniform(rng, (2, 3, 4)),), {"diagonal": 1}, "batched, above"),
            Sample((uniform(rng, (4, 3)),), {"diagonal": -1}, "below"),
            Sample((transposed(rng, (4, 3)),), {"diagonal": 0}, "non-contiguous"),
            Sample((uniform(rng, (1, 3)),), {"diagonal": -2}, "size-1 dim"),
            Sample((uniform(rng, (2, 0, 3)),), {"diagonal": 1}, "zero-size"),
        ],
        torch_ref=lambda torch, input, diagonal=0: getattr(torch, name)(input, diagonal),
        **declaration,
    )


tril = _triangle(
    "tril",
    np.tril,
    method=True,
    numpy={np.tril: _numpy.triangle("tril")},
    doc="The lower triangle of the last two dims (on and below the ``diagonal``-th diagonal), the rest zero.",
)
triu = _triangle(
    "triu",
    np.triu,
    method=True,
    numpy={np.triu: _numpy.triangle("triu")},
    doc="The upper triangle of the last two dims (on and above the ``diagonal``-th diagonal), the rest zero.",
)


# -- masked_fill -------------------------------------------------------------------------------------------
def _check_masked_fill(input, mask, value):
    if mask.dtype != np.bool_:
        raise TypeError(f"masked_fill: argument 'mask' expected a bool tensor, got dtype {mask.dtype}")
    broadcast_or_fail(
        "masked_fill", "mask", (input.shape, mask.shape), f"a shape broadcastable with input {input.shape}", mask.shape
    )
    fill_value("masked_fill", input, value)


def _masked_fill(input, mask, value):
    return np.where(mask, value.astype(input.dtype, copy=False), input)


def _masked_fill_vjp_value(g, ans, input, mask, value):
    """The value's gradient: the sum of the output's gradient over the positions the mask fills."""
    return np.reshape(np.sum(np.where(mask, g, 0)), value.shape)


masked_fill = defop(
    "masked_fill",
    family="shape",
    inputs=("input", "mask", "value"),
    forward=_masked_fill,
    check=_check_masked_fill,
    vjps=(
        lambda g, ans, input, mask, value: unbroadcast(np.where(mask, 0, g), input.shape),
        NOT_DIFFERENTIABLE,
        _masked_fill_vjp_value,
    ),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3)), rng.uniform(size=(2, 3)) > 0.5, np.array(-1.0)), {}),
        Sample((uniform(rng, (2, 3, 4)), rng.uniform(size=(3, 1)) > 0.5, np.array(2.0)), {}, "broadcast mask"),
        Sample((uniform(rng, (3,)), rng.uniform(size=(2, 3)) > 0.5, np.array(0.0)), {}, "mask enlarges"),
        Sample((transposed(rng, (3, 4)), np.tril(np.ones((3, 4), bool)), np.array(-5.0)), {}, "non-contiguous, causal"),
        Sample((uniform(rng, (0, 3)), np.array([True, False, True]), np.array(1.0)), {}, "zero-size"),
        Sample((np.arange(6).reshape(2, 3), np.array([True, False, True]), np.array(-7)), {}, "integers"),
    ],
    torch_ref=lambda torch, input, mask, value: torch.masked_fill(input, mask, value),
    method=True,
    doc="input with ``value`` where the bool ``mask`` (broadcast to input's shape) is true.",
)


# -- repeat ------------------------------------------------------------------------------------------------
def _repeat_shapes(x, repeats):
    repeats = ints("repeat", "repeats", repeats)
    if len(repeats) < x.ndim or any(r < 0 for r in repeats):
        raise ValueError(
            f"repeat: argument 'repeats' expected at least {x.ndim} non-negative counts for input "
            f"{x.shape}, got {repeats}"
        )
    return repeats, (1,) * (len(repeats) - x.ndim) + x.shape


def _repeat_vjp(g, ans, input, repeats):
    repeats, shape = _repeat_shapes(input, repeats)
    interleaved = tuple(n for pair in zip(repeats, shape) for n in pair)  # (r0, d0, r1, d1, ...)
    summed = np.sum(np.reshape(g, interleaved), axis=tuple(range(0, 2 * len(shape), 2)))
    return np.reshape(summed, input.shape)


def _repeat(input, repeats):
    """``Tensor.repeat(*repeats)``: tile ``input`` ``repeats[d]`` times along each dim (new leading dims for
    extra counts). ``repeats`` is a tuple of ints, or one int."""
    repeats, shape = _repeat_shapes(input, repeats)
    return np.tile(input.reshape(shape), repeats)


repeat = defop(
    "repeat",
    notes=case_law(_CASE_LAW, "repeat"),
    family="shape",
    inputs=("input",),
    forward=_repeat,
    vjps=(_repeat_vjp,),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3)),), {"repeats": (2, 1)}),
        Sample((uniform(rng, (2, 1)),), {"repeats": (3, 1, 2)}, "new dim, size-1 dim"),
        Sample((uniform(rng, ()),), {"repeats": (3,)}, "scalar"),
        Sample((transposed(rng, (2, 3)),), {"repeats": (1, 2)}, "non-contiguous"),
        Sample((uniform(rng, (2, 2)),), {"repeats": (0, 2)}, "zero repeats"),
        Sample((uniform(rng, (3,)),), {"repeats": 2}, "one int"),
        Sample((uniform(rng, (0, 2)),), {"repeats": (2, 3)}, "zero-size"),
    ],
    torch_ref=lambda torch, input, repeats: input.repeat(*ints("repeat", "repeats", repeats)),
)


# -- torch's other names and forms of the ops above: swapaxes, swapdims, movedim, unflatten, ravel,
# view_as / reshape_as / expand_as, broadcast_to, broadcast_tensors, concatenate, select and the scatters ------
def _swap_samples(names):
    def generate(rng):
        return [
            Sample(s.inputs, {names[0]: s.attrs["dim0"], names[1]: s.attrs["dim1"]}, s.label)
            for s in _transpose_samples(rng)
        ]

    return generate


def _swapaxes(input, axis0, axis1):
    """``torch.swapaxes(input, axis0, axis1)``: transpose under numpy's argument names."""
    return _swap_axes("swapaxes", input, axis0, axis1, ("axis0", "axis1"))


def _swapdims(input, dim0, dim1):
    """``torch.swapdims(input, dim0, dim1)``: transpose with both dims required."""
    return _swap_axes("swapdims", input, dim0, dim1)


def _swap_op(name: str, forward, names: tuple):
    """transpose under another name and argument ``names``: its gradient is the same swap."""
    return one_input_op(
        name,
        "shape",
        forward,
        lambda g, ans, input, **dims: forward(g, **dims),
        notes=case_law(_CASE_LAW, name),
        method=True,
        samples=_swap_samples(names),
        torch_ref=lambda torch, input, **dims: getattr(torch, name)(input, **dims),
    )


swapaxes = _swap_op("swapaxes", _swapaxes, ("axis0", "axis1"))
swapdims = _swap_op("swapdims", _swapdims, ("dim0", "dim1"))


def _moves(input, source, destination) -> tuple:
    """(source axes, destination axes) of movedim, validated as torch does."""
    src, dst = ints("movedim", "source", source), ints("movedim", "destination", destination)
    if len(src) != len(dst):
        raise ValueError(
            f"movedim: arguments 'source' and 'destination' expected the same number of dims, got source "
            f"{src} and destination {dst}"
        )
    src = tuple(normalize_dim("movedim", d, input.ndim, "source") for d in src)
    dst = tuple(normalize_dim("movedim", d, input.ndim, "destination") for d in dst)
    for argument, dims in (("source", src), ("destination", dst)):
        if len(set(dims)) != len(dims):
            raise ValueError(
                f"movedim: argument '{argument}' repeats a dim: {source if argument == 'source' else destination}"
            )
    return (src, dst) if input.ndim else ((), ())


def _movedim(input, source, destination):
    """``torch.movedim(input, source, destination)`` (alias ``moveaxis``): the dims ``source`` (an int or a
    sequence) moved to the places ``destination``, the other dims keeping their order."""
    return np.moveaxis(input, *_moves(input, source, destination))


def _movedim_vjp(g, ans, input, source, destination):
    src, dst = _moves(input, source, destination)
    return np.moveaxis(g, dst, src)


movedim = defop(
    "movedim",
    notes=case_law(_CASE_LAW, "movedim"),
    method=True,
    family="shape",
    inputs=("input",),
    forward=_movedim,
    vjps=(_movedim_vjp,),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3, 4)),), {"source": 0, "destination": -1}),
        Sample((uniform(rng, (2, 3, 4, 1)),), {"source": (0, -1), "destination": [3, 1]}, "two dims"),
        Sample((uniform(rng, (2, 3, 4)),), {"source": (2, 0, 1), "destination": (0, 1, 2)}, "every dim"),
        Sample((uniform(rng, (2, 3)),), {"source": 1, "destination": 1}, "in place"),
        Sample((transposed(rng, (2, 3, 4)),), {"source": 1, "destination": 0}, "non-contiguous"),
        Sample((uniform(rng, ()),), {"source": 0, "destination": -1}, "0-D"),
        Sample((uniform(rng, (2, 0, 3)),), {"source": -2, "destination": 2}, "zero-size"),
    ],
    torch_ref=lambda torch, input, source, destination: torch.movedim(input, source, destination),
)
moveaxis = movedim  # torch.moveaxis is movedim, the same signature


def _unflattened(input, dim, sizes) -> tuple:
    if input.ndim == 0:
        raise ValueError("unflatten: argument 'input' expected a tensor with at least 1 dim, got a 0-D tensor")
    axis = normalize_dim("unflatten", dim, input.ndim)
    if not isinstance(sizes, tuple | list):
        raise TypeError(
            f"unflatten: argument 'sizes' expected a sequence of ints, got {type(sizes).__name__} {sizes!r}"
        )
    sizes = ints("unflatten", "sizes", sizes)
    size, known = input.shape[axis], math.prod(s for s in sizes if s != -1)
    inferred = sizes.count(-1) == 1 and known != 0 and size % known == 0
    if not sizes or any(s < -1 for s in sizes) or (-1 in sizes and not inferred) or (-1 not in sizes and known != size):
        raise ValueError(
            f"unflatten: argument 'sizes' expected sizes (at most one -1) whose product is {size}, the size of dim "
            f"{dim} of input {input.shape}, got {sizes}"
        )
    sizes = tuple(size // known if s == -1 else s for s in sizes)
    return input.shape[:axis] + sizes + input.shape[axis + 1 :]


unflatten = defop(
    "unflatten",
    method=True,
    family="shape",
    inputs=("input",),
    forward=lambda input, dim, sizes: np.reshape(input, _unflattened(input, dim, sizes)),
    vjps=(_reshape_back,),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 6)),), {"dim": 1, "sizes": (2, 3)}),
        Sample((uniform(rng, (6, 2)),), {"dim": 0, "sizes": [3, -1]}, "-1"),
        Sample((uniform(rng, (2, 4, 3)),), {"dim": -2, "sizes": (1, 2, 1, 2)}, "size-1 dims"),
        Sample((uniform(rng, (3,)),), {"dim": 0, "sizes": (3,)}, "one size"),
        Sample((transposed(rng, (4, 3)),), {"dim": 0, "sizes": (2, 2)}, "non-contiguous"),
        Sample((uniform(rng, (0, 3)),), {"dim": 0, "sizes": (0, 5)}, "zero-size"),
    ],
    torch_ref=lambda torch, input, dim, sizes: torch.unflatten(input, dim, sizes),
    doc="input with dim ``dim`` split into the dims ``sizes`` (one may be -1).",
)


def _one_input_samples(rng):
    return [
        Sample((uniform(rng, (2, 3, 4)),), {}),
        Sample((uniform(rng, ()),), {}, "0-D"),
        Sample((transposed(rng, (3, 4)),), {}, "non-contiguous"),
        Sample((uniform(rng, (0, 3)),), {}, "zero-size"),
    ]


ravel = defop(
    "ravel",
    method=True,
    family="shape",
    inputs=("input",),
    forward=lambda input: np.reshape(input, (-1,)),
    vjps=(_reshape_back,),
    samples=_one_input_samples,
    torch_ref=lambda torch, input: torch.ravel(input),
    doc="input flattened to 1-D.",
)


def _zero_for_other(g, ans, input, other):
    return np.zeros_like(other)  # only other's shape is read


def _reshape_as(op):
    def forward(input, other):
        if input.size != other.size:
            raise ValueError(
                f"{op}: argument 'other' expected a shape with {input.size} elements (those of input "
                f"{input.shape}), got {other.shape}"
            )
        return np.reshape(input, other.shape)

    return forward


def _as_samples(pairs, strided):
    def generate(rng):
        return [Sample((uniform(rng, a), uniform(rng, b)), {}, label) for a, b, label in pairs] + [
            Sample((transposed(rng, strided[0]), uniform(rng, strided[1])), {}, "non-contiguous")
        ]

    return generate


_RESHAPE_PAIRS = [((2, 6), (3, 4), ""), ((), (1, 1), "0-D"), ((4,), (2, 2), "1-D"), ((0, 3), (3, 0), "zero-size")]


def _reshape_as_op(name, torch_ref, notes, *, doc=""):
    """view_as / reshape_as: input reshaped to other's shape; other's gradient is zero."""
    return defop(
        name,
        method=True,
        family="shape",
        inputs=("input", "other"),
        forward=_reshape_as(name),
        vjps=(_reshape_back, _zero_for_other),
        samples=_as_samples(_RESHAPE_PAIRS, ((3, 4), (2, 6))),
        torch_ref=torch_ref,
        notes=notes,
        doc=doc,
    )


view_as = _reshape_as_op(
    "view_as",
    lambda torch, input, other: input.reshape(other.shape),  # torch's view_as needs a viewable stride
    "other gives only its shape: its gradient is zero (torch's None). A copy, as every view here: it also takes a "
    "non-contiguous input that torch's view_as refuses (use .reshape there)",
    doc="input with other's shape, as Tensor.view_as (other gives only its shape).",
)
reshape_as = _reshape_as_op(
    "reshape_as",
    lambda torch, input, other: input.reshape_as(other),
    "other gives only its shape: its gradient is zero (torch's None)",
    doc="input reshaped to other's shape, as Tensor.reshape_as (other gives only its shape).",
)

expand_as = defop(
    "expand_as",
    method=True,
    family="shape",
    inputs=("input", "other"),
    forward=lambda input, other: np.broadcast_to(input, _expanded_shape(input, other.shape, "expand_as", "other")),
    vjps=(lambda g, ans, input, other: unbroadcast(g, input.shape), _zero_for_other),
    samples=_as_samples(
        [
            ((3, 1), (2, 3, 4), "new dim + size-1 dim"),
            ((), (2, 3), "0-D"),
            ((2, 3), (2, 3), "same"),
            ((1, 3), (0, 3), "size-1 dim to 0"),
        ],
        ((1, 3), (2, 3, 3)),
    ),
    torch_ref=lambda torch, input, other: input.expand_as(other),
    notes="other gives only its shape: its gradient is zero (torch's None)",
    doc="input broadcast to other's shape (other gives only its shape).",
)


def _broadcast_shape(tensors) -> tuple:
    shapes = [t.shape for t in tensors]
    return broadcast_or_fail("broadcast_tensors", "tensors", shapes, "broadcastable shapes", shapes)


def _broadcast_tensors(*tensors):
    """``torch.broadcast_tensors(*tensors)``: every tensor expanded to the shape they broadcast to (each keeps
    its dtype)."""
    shape = _broadcast_shape(tensors)
    return tuple(np.broadcast_to(t, shape) for t in tensors)


def _broadcast_tensors_vjp(g, ans, tensors, *, needs):
    return (
        [
            None if not need else np.zeros(t.shape, t.dtype) if gk is None else unbroadcast(gk, t.shape)
            for t, gk, need in zip(tensors, g, needs[0])
        ],
    )


def _broadcast_tensors_samples(rng):
    def u(*shapes):
        return [uniform(rng, s) for s in shapes]

    return [
        Sample((u((2, 3), (3,)),), {}, "two"),
        Sample((u((2, 1, 3), (4, 1), ()),), {}, "three, 0-D"),
        Sample((u((3,)),), {}, "one"),
        Sample(([transposed(rng, (3, 4)), uniform(rng, (1, 4))],), {}, "non-contiguous"),
        Sample((u((0, 3), (1,)),), {}, "zero-size"),
    ]


broadcast_tensors = defop(
    "broadcast_tensors",
    notes=case_law(_CASE_LAW, "broadcast_tensors"),
    family="shape",
    inputs=("*tensors",),
    forward=_broadcast_tensors,
    joint_vjp=_broadcast_tensors_vjp,
    outputs="variable",
    check=lambda tensors: _broadcast_shape(tensors),
    samples=_broadcast_tensors_samples,
    torch_ref=lambda torch, tensors: torch.broadcast_tensors(*tensors),
)


def _concatenate(tensors, axis=0):
    """``torch.concatenate(tensors, axis=0)``: concat under numpy's argument name."""
    return _join("concatenate", tensors, axis)


concatenate = defop(
    "concatenate",
    notes=case_law(_CASE_LAW, "concatenate"),
    family="shape",
    inputs=("*tensors",),
    forward=_concatenate,
    joint_vjp=lambda g, ans, tensors, *, needs, axis=0: _concat_vjp(g, ans, tensors, needs=needs, dim=axis),
    samples=lambda rng: [Sample(s.inputs, {"axis": s.attrs["dim"]}, s.label) for s in _join_samples(False)(rng)],
    torch_ref=lambda torch, tensors, axis=0: torch.concatenate(tensors, axis=axis),
)


def _selected(op, input, dim, index) -> tuple:
    """The index tuple of ``input.select(dim, index)`` (index counted from the end when negative)."""
    if input.ndim == 0:
        raise ValueError(f"{op}: argument 'input' expected a tensor with at least 1 dim, got a 0-D tensor")
    axis = normalize_dim(op, dim, input.ndim)
    index, size = integer(op, "index", index), input.shape[axis]
    if not -size <= index < size:
        raise IndexError(
            f"{op}: argument 'index' expected an int in [{-size}, {size - 1}] for dim {dim} of size {size}, got {index}"
        )
    return (slice(None),) * axis + (index % size, Ellipsis)  # Ellipsis: a 0-D array, not a numpy scalar


def _scatter_into(op, input, src, index):
    """A copy of ``input`` with ``src`` written at the basic ``index`` (select_scatter, slice_scatter)."""
    want = input[index].shape
    if src.shape != want:
        raise ValueError(f"{op}: argument 'src' expected shape {want} (the part of input it replaces), got {src.shape}")
    require_dtype_of_input(op, "src", src, input)
    out = input.copy()
    out[index] = src
    return out


def _select_vjp(g, ans, input, dim, index):
    zeros = np.zeros(input.shape, g.dtype)
    if isinstance(g, np.ndarray):
        return _scatter_into("select", zeros, g, _selected("select", input, dim, index))
    return select_scatter(zeros, g, dim, index)


select = defop(
    "select",
    notes=case_law(_CASE_LAW, "select"),
    method=True,
    family="shape",
    inputs=("input",),
    forward=lambda input, dim, index: input[_selected("select", input, dim, index)],
    vjps=(_select_vjp,),
    samples=lambda rng: [
        Sample((uniform(rng, (3, 4)),), {"dim": 0, "index": 1}),
        Sample((uniform(rng, (2, 3, 4)),), {"dim": -1, "index": -1}, "negative dim and index"),
        Sample((uniform(rng, (4,)),), {"dim": 0, "index": 2}, "1-D: a 0-D result"),
        Sample((transposed(rng, (3, 4)),), {"dim": 1, "index": 0}, "non-contiguous"),
        Sample((uniform(rng, (2, 0)),), {"dim": 0, "index": 1}, "zero-size"),
    ],
    torch_ref=lambda torch, input, dim, index: torch.select(input, dim, index),
    doc="The slice of input at ``index`` along ``dim``, that dim removed.",
)


def _basic_scatter_rules(name: str, forward, where) -> tuple:
    """The rules of select_scatter or slice_scatter, whose ``forward`` writes ``src`` into a copy of ``input`` at
    the basic index ``where(input, **attributes)``: ``input``'s gradient is g with zeros written there (Tensors:
    through the op itself, recorded), ``src``'s is g read there."""

    def vjp_input(g, ans, input, src, **attributes):
        zeros = np.zeros(src.shape, g.dtype)
        return forward(g, zeros, **attributes) if isinstance(g, np.ndarray) else get_op(name)(g, zeros, **attributes)

    def vjp_src(g, ans, input, src, **attributes):
        return g[where(input, **attributes)]

    return vjp_input, vjp_src


def _select_scatter(input, src, dim, index):
    """``torch.select_scatter(input, src, dim, index)``: a copy of ``input`` with ``src`` as its slice
    ``select(dim, index)``."""
    return _scatter_into("select_scatter", input, src, _selected("select_scatter", input, dim, index))


select_scatter = defop(
    "select_scatter",
    notes=case_law(_CASE_LAW, "select_scatter"),
    method=True,
    family="shape",
    inputs=("input", "src"),
    forward=_select_scatter,
    vjps=_basic_scatter_rules(
        "select_scatter", _select_scatter, lambda input, dim, index: _selected("select_scatter", input, dim, index)
    ),
    samples=lambda rng: [
        Sample((uniform(rng, (3, 4)), uniform(rng, (4,))), {"dim": 0, "index": 1}),
        Sample((uniform(rng, (2, 3, 4)), uniform(rng, (2, 3))), {"dim": -1, "index": -2}, "negative"),
        Sample((uniform(rng, (4,)), uniform(rng, ())), {"dim": 0, "index": 3}, "1-D, 0-D src"),
        Sample((transposed(rng, (3, 4)), transposed(rng, (3,))), {"dim": 1, "index": 0}, "non-contiguous"),
        Sample((uniform(rng, (2, 0)), uniform(rng, (0,))), {"dim": 0, "index": 1}, "zero-size"),
    ],
    torch_ref=lambda torch, input, src, dim, index: torch.select_scatter(input, src, dim, index),
)


def _sliced(input, dim=0, start=None, end=None, step=1) -> tuple:
    if input.ndim == 0:
        raise ValueError("slice_scatter: argument 'input' expected a tensor with at least 1 dim, got a 0-D tensor")
    axis = normalize_dim("slice_scatter", dim, input.ndim)
    bounds = [None if v is None else integer("slice_scatter", name, v) for name, v in (("start", start), ("end", end))]
    if integer("slice_scatter", "step", step) < 1:
        raise ValueError(f"slice_scatter: argument 'step' expected a positive int, got {step}")
    return (slice(None),) * axis + (slice(bounds[0], bounds[1], step),)


def _slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """``torch.slice_scatter(input, src, dim=0, start=None, end=None, step=1)``: a copy of ``input`` with
    ``src`` written at ``input[..., start:end:step, ...]`` (the slice along ``dim``)."""
    return _scatter_into("slice_scatter", input, src, _sliced(input, dim, start, end, step))


slice_scatter = defop(
    "slice_scatter",
    notes=case_law(_CASE_LAW, "slice_scatter"),
    method=True,
    family="shape",
    inputs=("input", "src"),
    forward=_slice_scatter,
    vjps=_basic_scatter_rules("slice_scatter", _slice_scatter, _sliced),
    samples=lambda rng: [
        Sample((uniform(rng, (5, 3)), uniform(rng, (2, 3))), {"start": 1, "end": 3}),
        Sample((uniform(rng, (2, 7)), uniform(rng, (2, 3))), {"dim": -1, "start": 1, "step": 2}, "step"),
        Sample((uniform(rng, (2, 4)), uniform(rng, (2, 2))), {"dim": 1, "start": -2}, "negative start"),
        Sample((uniform(rng, (3, 2)), uniform(rng, (3, 2))), {}, "everything"),
        Sample((uniform(rng, (4, 2)), uniform(rng, (2, 2))), {"start": 2, "end": 10}, "end past the size"),
        Sample((transposed(rng, (4, 3)), transposed(rng, (2, 3))), {"end": 2}, "non-contiguous"),
        Sample((uniform(rng, (3, 2)), uniform(rng, (0, 2))), {"start": 2, "end": 1}, "empty slice"),
    ],
    torch_ref=lambda torch, input, src, dim=0, start=None, end=None, step=1: torch.slice_scatter(
        input, src, dim, start, end, step
    ),
)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_reshape(g, rec, input):
    """Reshape to the recorded output shape; a leading dim equal to the input's is written 0 (ONNX: copy it) and
    the first other one -1 (ONNX: what the size leaves), so a model exported with dynamic axes reshapes any size
    (``(B, T, V) -> (B * T, V)`` included); a size that still depends on a dynamic axis is caught by the export's
    dynamic-axis check."""
    have, want = rec.inputs[0].shape, rec.output.shape
    dims, copying = [], True
    for k, n in enumerate(want):
        copying = copying and k < len(have) and have[k] == n and n != 0
        dims.append(0 if copying else n)
    if 0 in want:  # allowzero: a 0 is a size, not "copy" (the shape is baked)
        return g.op("Reshape", input, g.ints(want), allowzero=1)
    free = [k for k, d in enumerate(dims) if d != 0]
    if free:
        dims[free[0]] = -1
    return g.op("Reshape", input, g.ints(dims))


def _onnx_transpose(g, rec, input):
    """transpose, permute, swapaxes, swapdims, movedim: one Transpose, its perm read off the op's own forward
    run on an empty array whose dims all have different sizes (2, 3, 4, ...)."""
    from tape.registry import get_op

    ndim = len(rec.inputs[0].shape)
    if ndim == 0:
        return g.op("Identity", input)
    sizes = list(range(2, ndim + 2))
    moved = get_op(rec.op_name).forward(np.empty(sizes, np.int8), **rec.attributes)
    return g.op("Transpose", input, perm=[sizes.index(n) for n in moved.shape])


def _onnx_squeeze(g, rec, input):
    have, want = rec.inputs[0].shape, rec.output.shape
    return g.op("Reshape", input, g.ints(want), allowzero=1) if have != want else g.op("Identity", input)


def _onnx_unsqueeze(g, rec, input):
    ndim = len(rec.inputs[0].shape)
    return g.op("Unsqueeze", input, g.ints([axis_of(int(rec.attributes["dim"]), ndim + 1)]))


def _onnx_concat(g, rec, tensors):
    """concat (``dim``) and concatenate (``axis``)."""
    ndim = len(rec.output.shape)
    if any(len(s.shape) != ndim or 0 in s.shape for s in rec.inputs):
        raise NotExportable("joining empty tensors has no lowering")
    return g.op("Concat", *tensors, axis=axis_of(int(rec.attributes.get("dim", rec.attributes.get("axis", 0))), ndim))


def _onnx_expand(g, rec, input):
    return g.op("Expand", input, g.ints(rec.output.shape))


def _onnx_stack(g, rec, tensors):
    axis = axis_of(int(rec.attributes.get("dim", 0)), len(rec.output.shape))
    if 0 in rec.output.shape:
        raise NotExportable("stacking empty tensors has no lowering")
    return g.op("Concat", *(g.op("Unsqueeze", t, g.ints([axis])) for t in tensors), axis=axis)


def _onnx_narrow(g, rec, input):
    shape = rec.inputs[0].shape
    axis = axis_of(int(rec.attributes["dim"]), len(shape))
    start = int(np.asarray(rec.attributes["start"]).reshape(-1)[0])
    start = start % shape[axis] if start < 0 else start
    length = int(np.asarray(rec.attributes["length"]).reshape(-1)[0])
    return g.op("Slice", input, g.ints([start]), g.ints([start + length]), g.ints([axis]))


def _onnx_pad(g, rec, input):
    if rec.attributes.get("mode", "constant") != "constant":
        return index_map(g, rec, input)
    value = rec.attributes.get("value")
    return index_map(g, rec, input, fill=0 if value is None else value, value=0)


def _onnx_triangle(upper: int):
    def lower(g, rec, input):
        if 0 in rec.inputs[0].shape:
            raise NotExportable("an empty input has no lowering")
        return g.op("Trilu", input, g.const(np.array(int(rec.attributes.get("diagonal", 0)), np.int64)), upper=upper)

    return lower


def _onnx_masked_fill(g, rec, input, mask, value):
    return g.op("Where", mask, cast_to(g, value, rec.inputs[2].dtype, rec.inputs[0].dtype), input)


def _onnx_repeat(g, rec, input):
    repeats, shape = _repeat_shapes(np.empty(rec.inputs[0].shape, np.int8), rec.attributes["repeats"])
    if 0 in rec.output.shape:
        raise NotExportable("an empty result has no lowering")
    return g.op("Tile", g.op("Reshape", input, g.ints(shape)), g.ints(repeats))


def _onnx_reshape_as(g, rec, input, other):
    """view_as / reshape_as (expand_as: Expand): to ``other``'s shape as ONNX reads it, so any size exports."""
    shape = g.op("Shape", other)
    if rec.op_name == "expand_as":
        return g.op("Expand", input, shape)
    return g.op("Reshape", input, shape, allowzero=1)


def _onnx_broadcast_tensors(g, rec, tensors):
    return tuple(g.op("Expand", t, g.ints(spec.shape)) for t, spec in zip(tensors, rec.output_specs, strict=True))


def _onnx_select(g, rec, input):
    shape = rec.inputs[0].shape
    axis = axis_of(int(rec.attributes["dim"]), len(shape))
    return g.op("Gather", input, g.const(np.int64(int(rec.attributes["index"]) % shape[axis])), axis=axis)


lowering(reshape, _onnx_reshape)
lowering(flatten, _onnx_reshape)
for _op in (unflatten, ravel):
    lowering(_op, _onnx_reshape)
for _op in (view_as, reshape_as, expand_as):
    lowering(_op, _onnx_reshape_as)
lowering(broadcast_tensors, _onnx_broadcast_tensors)
lowering(concatenate, _onnx_concat)
lowering(select, _onnx_select)
for _op in (select_scatter, slice_scatter):
    lowering(_op, lambda g, rec, input, src: index_map(g, rec, input, src))
lowering(stack, _onnx_stack)
lowering(narrow, _onnx_narrow)
lowering(pad, _onnx_pad)
lowering(tril, _onnx_triangle(0))
lowering(triu, _onnx_triangle(1))
lowering(masked_fill, _onnx_masked_fill)
lowering(repeat, _onnx_repeat)
lowering(transpose, _onnx_transpose)
for _op in (permute, swapaxes, swapdims, movedim):
    lowering(_op, _onnx_transpose)
lowering(squeeze, _onnx_squeeze)
lowering(unsqueeze, _onnx_unsqueeze)
lowering(concat, _onnx_concat)
lowering(expand, _onnx_expand)
