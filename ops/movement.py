"""Movement ops: reorder, repeat, window and re-embed the entries of a tensor without arithmetic, with torch 2.13
semantics (names, signatures, argument checks).

Registered ops (family "movement"), each differentiable twice. One output each: flip, roll, tile,
repeat_interleave, diagonal, diag_embed, diag, unfold_copy, diagonal_scatter, fliplr, flipud, rot90, hstack,
vstack (row_stack), dstack, column_stack, block_diag, cartesian_prod, combinations, kron, vander. A variable number
of outputs (``outputs="variable"``: a tuple of Tensors, views of the input as in torch; one backward rule receives
every output's gradient, zeros standing in for the outputs that got none, so k pieces cost one gradient of the
input's size): split, chunk, unbind, meshgrid, atleast_1d/2d/3d, tensor_split, hsplit, vsplit, dsplit.

The rules use np.concatenate / np.stack / np.sum / np.reshape, which trace on Tensors (differentiable twice). No op
has a kink: every backward is exact (a permutation, copy or sum of the incoming gradient; for kron and vander a
product rule). Each op's signature and torch conventions are its notes (``_CASE_LAW``).
"""

__all__ = [
    "flip",
    "roll",
    "tile",
    "repeat_interleave",
    "diagonal",
    "diag",
    "diag_embed",
    "unfold_copy",
    "split",
    "chunk",
    "unbind",
    "meshgrid",
    "diagonal_scatter",
    "fliplr",
    "flipud",
    "rot90",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "hstack",
    "vstack",
    "row_stack",
    "dstack",
    "column_stack",
    "tensor_split",
    "hsplit",
    "vsplit",
    "dsplit",
    "block_diag",
    "cartesian_prod",
    "combinations",
    "kron",
    "vander",
]

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tape.onnx import lowering
from tape.registry import Sample, defop

from . import _numpy
from ._declare import one_input_op
from ._notes import case_law
from ._onnx import NotExportable, axis_of, cast_to, index_map
from ._samples import transposed, uniform
from ._validation import integer, normalize_dim, require_bool, require_dtype_of_input
from .indexing import _index_add_into, index_add
from .shape import _join, _pad, pad

# torch's case law, op by op: each entry joins the notes= of the ops it names (shown in docs/coverage.md)
_CASE_LAW = (
    (
        ("flip",),
        "``flip(input, dims)``: reverse the listed dims. ``dims`` is a sequence of ints (or one int, as "
        "``Tensor.flip(0)``); repeats are refused, ``()`` is the identity, a 0-D input accepts dim 0 / -1. "
        "Backward: flip again.",
    ),
    (
        ("roll",),
        "``roll(input, shifts, dims=None)``: cyclic shift. ``dims=None`` rolls the flattened input by one "
        "shift and restores the shape; otherwise ``shifts`` and ``dims`` (ints or equal-length sequences) "
        "pair up, a repeated dim adding its shifts. A 0-D input rolls only with ``dims=None``. Backward: roll"
        " by the opposite shifts.",
    ),
    (
        ("tile",),
        "``tile(input, dims)``: ``torch.tile``: ``dims`` shorter than ``input.ndim`` is padded with leading "
        "1s, longer adds leading dims; counts are >= 0. Backward: the gradient reshaped to (copies, size) per"
        " dim and summed over the copies.",
    ),
    (
        ("repeat_interleave",),
        "``repeat_interleave(input, repeats, dim=None, *, output_size=None)``: repeat each entry along "
        "``dim`` (``dim=None``: of the flattened input) ``repeats`` times. ``repeats`` is an int or an "
        "integer tensor/array (0-D, or 1-D of length 1 or of the dim's size), an attribute frozen when the op"
        " is recorded (like getitem's index), never differentiated. ``output_size`` must, if given, equal the"
        " result's length (as in torch). Backward: int repeats reshape and sum; per-entry repeats sum each "
        "segment (``np.add.reduceat`` on arrays, ``index_add`` on Tensors, whose own backward is "
        "``index_select`` = this op's forward).",
    ),
    (
        ("diagonal",),
        "``diagonal(input, offset=0, dim1=0, dim2=1)``: the entries ``[i (dim1), i + offset (dim2)]`` as a "
        "new last dim; an offset past the edge gives an empty diagonal; ``dim1 == dim2`` is refused.",
    ),
    (
        ("diag_embed",),
        "``diag_embed(input, offset=0, dim1=-2, dim2=-1)``: its adjoint: a zero tensor with one more dim "
        "(dims counted in the output), square (size + |offset|) in ``dim1``/``dim2``, holding ``input``'s "
        "last dim on that diagonal, so ``diagonal(diag_embed(x, o, d1, d2), o, d1, d2) == x``.",
    ),
    (
        ("diag",),
        "``diag(input, diagonal=0)``: a 1-D input becomes the square matrix ``diag_embed(input, diagonal)``, "
        "a 2-D input gives its ``diagonal(input, diagonal)``; other ranks are refused. Backward of "
        "diagonal/diag (2-D) on arrays: the gradient written into zeros on the diagonal; on Tensors: "
        "``diag_embed`` of it, padded or cropped (``pad``) to the input's two dims. Backward of "
        "diag_embed/diag (1-D): ``diagonal`` of the gradient. So the pair differentiates through each other.",
    ),
    (
        ("unfold_copy",),
        "``unfold_copy(input, dimension, size, step)``: ``Tensor.unfold`` as a function (torch's own "
        "functional name for it is ``torch.unfold_copy``; ``ops.unfold`` is ``torch.nn.functional.unfold``, "
        "the im2col of ops/conv.py, as in torch, where the two differ too): windows of ``size`` entries every"
        " ``step`` along ``dimension`` ((n - size) // step + 1 of them, replacing that dim) as a new last "
        "dim; ``size`` may be 0, ``step`` must be > 0; a 0-D input gives shape (size,) with size <= 1. "
        "Backward: every window's gradient added back to the entries it read (overlapping windows add up): "
        "slice additions on arrays, ``index_add`` on Tensors.",
    ),
    (
        ("split",),
        "``split(tensor, split_size_or_sections, dim=0)``: pieces of ``split_size_or_sections`` entries along"
        " ``dim`` (the last one shorter if need be; an empty dim gives one empty piece, and accepts size 0) "
        "or of the listed sizes, which must add up to the dim's size (zeros allowed; ``[]`` for an empty dim "
        "gives no pieces).",
    ),
    (
        ("chunk",),
        "``chunk(input, chunks, dim=0)``: pieces of ceil(size / chunks) entries, so possibly fewer than "
        "``chunks``; an empty dim gives ``chunks`` empty pieces. Backward of split/chunk: the pieces' "
        "gradients concatenated along ``dim``.",
    ),
    (
        ("unbind",),
        "``unbind(input, dim=0)``: the slices ``input.select(dim, i)``; an empty dim gives ``()``. Backward: "
        "the gradients stacked along ``dim``.",
    ),
    (
        ("meshgrid",),
        '``meshgrid(*tensors, indexing="ij")`` (or one list of tensors): 0-D/1-D tensors of sizes n1, n2, ...'
        ' give broadcast views of shape (n1, n2, ...), the k-th varying along dim k; ``"xy"`` swaps the first'
        " two dims. One dtype for all. Backward: each grid's gradient summed over the other dims.",
    ),
    (
        ("split", "chunk", "unbind"),
        "A 0-D input is refused, as in torch. A case with no outputs (unbind or ``split(x, [])`` of an empty dim) "
        "has nothing to differentiate and is checked in tests/ops/test_movement.py.",
    ),
    (
        ("fliplr", "flipud", "rot90"),
        "``fliplr`` / ``flipud`` / ``rot90(input, k=1, dims=(0, 1))``: flips (rot90 as flips and a swap); the "
        "gradient turns back.",
    ),
    (
        ("diagonal_scatter",),
        "``diagonal_scatter(input, src, offset=0, dim1=0, dim2=1)``: diagonal's adjoint into a copy.",
    ),
    (
        ("atleast_1d", "atleast_2d", "atleast_3d"),
        "``atleast_1d/2d/3d(*tensors)``: one tensor gives a tensor, several a tuple (``atleast_1d([x])`` gives a "
        "tensor where torch gives a 1-tuple: the call cannot tell [x] from x).",
    ),
    (
        ("hstack", "vstack", "dstack", "column_stack"),
        "``hstack``, ``vstack`` (alias ``row_stack``), ``dstack``, ``column_stack(tensors)``: atleast_*d "
        "(column_stack: 0-D/1-D as columns), then concat's join and checks.",
    ),
    (
        ("tensor_split", "hsplit", "vsplit", "dsplit"),
        "``tensor_split(input, indices_or_sections, dim=0)``, ``hsplit`` / ``vsplit`` / ``dsplit(input, "
        "indices_or_sections)``: views between Python-slice cuts (a cut before the previous one gives an empty "
        "piece and the next piece starts back there: pieces overlap, and their gradients add); hsplit/vsplit/dsplit "
        "need sections that divide the dim, as torch. torch's parser takes the argument as ``sections=`` or "
        "``indices=``.",
    ),
    (("block_diag",), "``block_diag(*tensors)``."),
    (("cartesian_prod",), "``cartesian_prod(*tensors)`` (one tensor: itself)."),
    (
        ("combinations",),
        "``combinations(input, r=2, with_replacement=False)`` (itertools' order; r=0 gives an empty 1-D tensor).",
    ),
    (("kron",), "``kron(input, other)``."),
    (
        ("vander",),
        "``vander(x, N=None, increasing=False)`` (integer input stays int64; its gradient at 0 is the exact "
        "derivative, written with x**max(p - 1, 0)).",
    ),
)


# -- argument helpers --------------------------------------------------------------------------------------
def _int_tuple(op: str, argument: str, value) -> tuple:
    """``value`` (an int or a sequence of ints) as a tuple of Python ints."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return (int(value),)
    if not isinstance(value, tuple | list):
        raise TypeError(
            f"{op}: argument '{argument}' expected an int or a sequence of ints, got {type(value).__name__} {value!r}"
        )
    return tuple(integer(op, argument, v) for v in value)


def _dim_of(axis: int, key) -> tuple:
    """An index tuple selecting ``key`` along ``axis`` (every entry of the dims before it)."""
    return (slice(None),) * axis + (key,)


# -- flip --------------------------------------------------------------------------------------------------
def _flip_axes(input, dims) -> tuple:
    dims = _int_tuple("flip", "dims", dims)
    axes = tuple(normalize_dim("flip", d, input.ndim, "dims") for d in dims)
    if len(set(axes)) != len(axes):
        raise ValueError(f"flip: argument 'dims' expected distinct dims, got {dims} for a {input.ndim}-D input")
    return axes if input.ndim else ()


def _flip(input, dims):
    """``torch.flip(input, dims)``: ``input`` with the entries of each listed dim in reverse order."""
    return np.flip(input, _flip_axes(input, dims))


def _flip_vjp(g, ans, input, dims):
    if isinstance(g, np.ndarray):
        return np.flip(g, _flip_axes(g, dims))
    return flip(g, dims)


flip = defop(
    "flip",
    family="movement",
    inputs=("input",),
    forward=_flip,
    vjps=(_flip_vjp,),
    check=lambda input, dims: _flip_axes(input, dims),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3, 4)),), {"dims": (0, 2)}),
        Sample((uniform(rng, (2, 3, 4)),), {"dims": [-1, -3, 1]}, "every dim, negative"),
        Sample((uniform(rng, (3, 4)),), {"dims": 1}, "one int"),
        Sample((uniform(rng, (3, 4)),), {"dims": ()}, "no dims: identity"),
        Sample((transposed(rng, (3, 4)),), {"dims": (0,)}, "non-contiguous"),
        Sample((uniform(rng, (3, 1)),), {"dims": (-1,)}, "size-1 dim"),
        Sample((uniform(rng, ()),), {"dims": (0,)}, "scalar"),
        Sample((uniform(rng, (0, 3)),), {"dims": (0, 1)}, "zero-size"),
    ],
    torch_ref=lambda torch, input, dims: torch.flip(input, _int_tuple("flip", "dims", dims)),
    numpy={np.flip: _numpy.flip, np.fliplr: _numpy.fliplr, np.flipud: _numpy.flipud},
    notes=case_law(_CASE_LAW, "flip"),
)


# -- roll --------------------------------------------------------------------------------------------------
def _roll_plan(input, shifts, dims) -> tuple:
    """(shifts, axes), axes None for the flattened roll."""
    shifts = _int_tuple("roll", "shifts", shifts)
    if not shifts:
        raise ValueError("roll: argument 'shifts' expected at least one shift, got ()")
    if dims is None:
        if len(shifts) != 1:
            raise ValueError(
                f"roll: argument 'shifts' expected one shift when dims is None (the flattened input "
                f"rolls), got {shifts}"
            )
        return shifts, None
    dims = _int_tuple("roll", "dims", dims)
    if len(dims) != len(shifts):
        raise ValueError(
            f"roll: arguments 'shifts' and 'dims' expected the same length, got shifts {shifts} and dims {dims}"
        )
    if input.ndim == 0:
        raise ValueError(f"roll: argument 'dims' expected None for a 0-D input (it has no dims), got {dims}")
    return shifts, tuple(normalize_dim("roll", d, input.ndim, "dims") for d in dims)


def _roll(input, shifts, dims=None):
    """``torch.roll(input, shifts, dims=None)``: entries shifted cyclically along ``dims`` (``None``: the
    flattened input), the ones pushed off the end coming back at the start."""
    shifts, axes = _roll_plan(input, shifts, dims)
    if axes is None:
        return np.roll(input, shifts[0])
    return np.roll(input, shifts, axes)


def _roll_vjp(g, ans, input, shifts, dims=None):
    shifts, axes = _roll_plan(input, shifts, dims)
    back = tuple(-s for s in shifts)
    if isinstance(g, np.ndarray):
        return np.roll(g, back[0]) if axes is None else np.roll(g, back, axes)
    return roll(g, back, dims)


roll = defop(
    "roll",
    family="movement",
    inputs=("input",),
    forward=_roll,
    vjps=(_roll_vjp,),
    check=lambda input, shifts, dims=None: _roll_plan(input, shifts, dims),
    samples=lambda rng: [
        Sample((uniform(rng, (3, 4)),), {"shifts": 5}, "flattened"),
        Sample((uniform(rng, (3, 4)),), {"shifts": (1, -2), "dims": (0, 1)}, "two dims"),
        Sample((uniform(rng, (2, 3, 4)),), {"shifts": 9, "dims": -1}, "shift past the size"),
        Sample((uniform(rng, (2, 3)),), {"shifts": [1, 1], "dims": [1, 1]}, "repeated dim adds"),
        Sample((transposed(rng, (3, 4)),), {"shifts": (-1,), "dims": (0,)}, "non-contiguous"),
        Sample((uniform(rng, ()),), {"shifts": 3}, "scalar"),
        Sample((uniform(rng, (1, 3)),), {"shifts": 2, "dims": 0}, "size-1 dim"),
        Sample((uniform(rng, (0, 3)),), {"shifts": 2, "dims": 0}, "zero-size dim"),
        Sample((uniform(rng, (0, 3)),), {"shifts": -1}, "zero-size, flattened"),
    ],
    torch_ref=lambda torch, input, shifts, dims=None: (
        torch.roll(input, shifts) if dims is None else torch.roll(input, shifts, dims)
    ),
    method=True,
    numpy={np.roll: _numpy.roll},
    notes=case_law(_CASE_LAW, "roll"),
)


# -- tile --------------------------------------------------------------------------------------------------
def _tile_reps(input, dims) -> tuple:
    reps = _int_tuple("tile", "dims", dims)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: argument 'dims' expected non-negative counts, got {reps}")
    return reps


def _tile(input, dims):
    """``torch.tile(input, dims)``: ``input`` repeated ``dims[d]`` times along each dim (leading 1s pad a short
    ``dims``; a long one adds leading dims)."""
    return np.tile(input, _tile_reps(input, dims))


def _tile_vjp(g, ans, input, dims):
    reps = _tile_reps(input, dims)
    n = max(len(reps), input.ndim)
    reps = (1,) * (n - len(reps)) + reps
    shape = (1,) * (n - input.ndim) + tuple(input.shape)
    interleaved = tuple(k for pair in zip(reps, shape) for k in pair)  # (r0, d0, r1, d1, ...)
    summed = np.sum(np.reshape(g, interleaved), axis=tuple(range(0, 2 * n, 2)))
    return np.reshape(summed, input.shape)


tile = defop(
    "tile",
    family="movement",
    inputs=("input",),
    forward=_tile,
    vjps=(_tile_vjp,),
    check=lambda input, dims: _tile_reps(input, dims),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3)),), {"dims": (2, 3)}),
        Sample((uniform(rng, (2, 3)),), {"dims": (2,)}, "short dims: leading 1s"),
        Sample((uniform(rng, (2, 1)),), {"dims": (3, 1, 2)}, "long dims: a new dim"),
        Sample((uniform(rng, (2, 3)),), {"dims": ()}, "empty dims: identity"),
        Sample((uniform(rng, (3,)),), {"dims": 2}, "one int"),
        Sample((transposed(rng, (2, 3)),), {"dims": [1, 2]}, "non-contiguous"),
        Sample((uniform(rng, ()),), {"dims": (3,)}, "scalar"),
        Sample((uniform(rng, (2, 2)),), {"dims": (0, 2)}, "zero count"),
        Sample((uniform(rng, (0, 2)),), {"dims": (2, 3)}, "zero-size"),
    ],
    torch_ref=lambda torch, input, dims: torch.tile(input, _int_tuple("tile", "dims", dims)),
    numpy={np.tile: _numpy.tile},
    notes=case_law(_CASE_LAW, "tile"),
)


# -- repeat_interleave -------------------------------------------------------------------------------------
def _repeat_plan(input, repeats, dim) -> tuple:
    """(axis of the possibly flattened input, its size, counts: an int or an int64 array of that size)."""
    if dim is None:
        axis, size = 0, np.size(input)
    else:
        if input.ndim == 0:
            raise ValueError(f"repeat_interleave: argument 'dim' expected None for a 0-D input, got {dim!r}")
        axis = normalize_dim("repeat_interleave", dim, input.ndim)
        size = input.shape[axis]
    if isinstance(repeats, int | np.integer) and not isinstance(repeats, bool):
        if repeats < 0:
            raise ValueError(f"repeat_interleave: argument 'repeats' expected a non-negative count, got {repeats}")
        return axis, size, int(repeats)
    if not isinstance(repeats, np.ndarray) or repeats.dtype.kind not in "iu":
        got = f"dtype {repeats.dtype}" if isinstance(repeats, np.ndarray) else f"{type(repeats).__name__} {repeats!r}"
        raise TypeError(f"repeat_interleave: argument 'repeats' expected an int or an integer tensor, got {got}")
    if repeats.ndim > 1 or (repeats.ndim == 1 and repeats.size not in (1, size)):
        raise ValueError(
            f"repeat_interleave: argument 'repeats' expected a 0-D tensor or a 1-D tensor of length 1 "
            f"or {size} (the size of dim {dim} of input {input.shape}), got shape {repeats.shape}"
        )
    if repeats.size and repeats.min() < 0:
        raise ValueError(f"repeat_interleave: argument 'repeats' expected non-negative counts, got {repeats.min()}")
    return axis, size, np.broadcast_to(repeats.reshape(-1).astype(np.int64), (size,))


def _check_repeat_interleave(input, repeats, dim=None, output_size=None):
    axis, size, counts = _repeat_plan(input, repeats, dim)
    if output_size is not None:
        total = size * counts if isinstance(counts, int) else int(counts.sum())
        if integer("repeat_interleave", "output_size", output_size) != total:
            raise ValueError(
                f"repeat_interleave: argument 'output_size' expected {total} (the repeated length), got {output_size}"
            )


def _repeat_interleave(input, repeats, dim=None, *, output_size=None):
    """``torch.repeat_interleave(input, repeats, dim=None, *, output_size=None)``: entry i along ``dim`` (of the
    flattened input when ``dim`` is None) repeated ``repeats`` (or ``repeats[i]``) times, in place."""
    axis, size, counts = _repeat_plan(input, repeats, dim)
    return np.repeat(input.reshape(-1) if dim is None else input, counts, axis=axis)


def _segment_sums(g, axis, counts):
    """Sums of consecutive segments of ``counts[i]`` entries of ``g`` along ``axis`` (empty segments give 0)."""
    out = np.zeros(g.shape[:axis] + (counts.size,) + g.shape[axis + 1 :], g.dtype)
    kept = counts > 0
    if kept.any():
        starts = np.cumsum(counts) - counts
        out[_dim_of(axis, kept)] = np.add.reduceat(g, starts[kept], axis=axis)
    return out


def _repeat_interleave_vjp(g, ans, input, repeats, dim=None, output_size=None):
    axis, size, counts = _repeat_plan(input, repeats, dim)
    shape = (size,) if dim is None else tuple(input.shape)
    if isinstance(counts, int):
        grad = np.sum(np.reshape(g, shape[:axis] + (size, counts) + shape[axis + 1 :]), axis=axis + 1)
    elif isinstance(g, np.ndarray):
        grad = _segment_sums(g, axis, counts)
    else:  # index_add's backward for its source is index_select: this op's forward, recorded
        grad = index_add(np.zeros(shape, g.dtype), axis, np.repeat(np.arange(size), counts), g)
    return np.reshape(grad, input.shape) if dim is None else grad


def _torch_repeats(torch, repeats):
    return torch.from_numpy(np.asarray(repeats, np.int64)) if isinstance(repeats, np.ndarray) else repeats


repeat_interleave = defop(
    "repeat_interleave",
    family="movement",
    inputs=("input",),
    forward=_repeat_interleave,
    vjps=(_repeat_interleave_vjp,),
    check=_check_repeat_interleave,
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3)),), {"repeats": 2}, "flattened"),
        Sample((uniform(rng, (2, 3)),), {"repeats": 3, "dim": 0}),
        Sample((uniform(rng, (2, 3, 2)),), {"repeats": 2, "dim": -2}, "negative dim"),
        Sample((uniform(rng, (2, 3)),), {"repeats": np.array([1, 0, 3]), "dim": 1}, "per-entry, a zero"),
        Sample(
            (uniform(rng, (2, 3)),),
            {"repeats": np.array([2, 0, 1, 1, 3, 0]), "output_size": 7},
            "per-entry, flattened, output_size",
        ),
        Sample((uniform(rng, (3, 2)),), {"repeats": np.array([2]), "dim": 0}, "length-1 tensor broadcasts"),
        Sample((uniform(rng, (3, 2)),), {"repeats": np.array(3), "dim": -1}, "0-D tensor"),
        Sample((transposed(rng, (3, 4)),), {"repeats": np.array([1, 2, 0]), "dim": 0}, "non-contiguous"),
        Sample((uniform(rng, ()),), {"repeats": 3}, "scalar"),
        Sample((uniform(rng, (2, 3)),), {"repeats": 0, "dim": 1}, "zero repeats"),
        Sample((uniform(rng, (0, 3)),), {"repeats": 2, "dim": 1}, "zero-size"),
        Sample((uniform(rng, (0, 3)),), {"repeats": np.zeros(0, np.int64), "dim": 0}, "zero-size, per-entry"),
    ],
    torch_ref=lambda torch, input, repeats, dim=None, output_size=None: torch.repeat_interleave(
        input, _torch_repeats(torch, repeats), dim, output_size=output_size
    ),
    method=True,
    notes=case_law(_CASE_LAW, "repeat_interleave"),
)


# -- diagonal / diag_embed / diag --------------------------------------------------------------------------
def _diagonal_axes(op, ndim, offset, dim1, dim2) -> tuple:
    integer(op, "offset", offset)
    a1, a2 = normalize_dim(op, dim1, ndim, "dim1"), normalize_dim(op, dim2, ndim, "dim2")
    if a1 == a2:
        raise ValueError(
            f"{op}: arguments 'dim1' and 'dim2' expected two different dims, got {dim1} and {dim2} (dim {a1} of {ndim})"
        )
    return a1, a2


def _embed_into(out, values, offset, a1, a2):
    """Write ``values``' last dim onto the ``offset`` diagonal of ``out``'s dims ``a1``, ``a2`` (in place)."""
    length = values.shape[-1]
    moved = np.moveaxis(out, (a1, a2), (-2, -1))  # a view: writing it writes out
    moved[..., np.arange(length) + max(-offset, 0), np.arange(length) + max(offset, 0)] = values
    return out


def _diagonal_back(g, shape, offset, a1, a2):
    """The gradient of ``diagonal(x, offset, a1, a2)`` for an ``x`` of ``shape``: ``g`` on that diagonal of zeros."""
    if isinstance(g, np.ndarray):
        return _embed_into(np.zeros(shape, g.dtype), g, offset, a1, a2)
    length = g.shape[-1]
    if length == 0:
        return np.zeros(shape, g.dtype)  # an empty diagonal: no entry of x was read
    embedded = diag_embed(g, offset, a1, a2)  # square of side length + |offset| in a1, a2
    side = length + abs(offset)
    widths = [0] * (2 * (len(shape) - min(a1, a2)))
    for a in (a1, a2):  # grow (or crop rows/columns past the diagonal, all zero) to the input's sizes
        widths[2 * (len(shape) - 1 - a) + 1] = shape[a] - side
    return pad(embedded, tuple(widths))


def _diagonal(input, offset=0, dim1=0, dim2=1):
    """``torch.diagonal(input, offset=0, dim1=0, dim2=1)``: the entries ``[i, i + offset]`` of dims ``dim1``,
    ``dim2`` as a new last dim (empty past the edge)."""
    a1, a2 = _diagonal_axes("diagonal", input.ndim, offset, dim1, dim2)
    return np.diagonal(input, offset, a1, a2)


def _diagonal_vjp(g, ans, input, offset=0, dim1=0, dim2=1):
    a1, a2 = _diagonal_axes("diagonal", input.ndim, offset, dim1, dim2)
    return _diagonal_back(g, tuple(input.shape), offset, a1, a2)


diagonal = defop(
    "diagonal",
    family="movement",
    inputs=("input",),
    forward=_diagonal,
    vjps=(_diagonal_vjp,),
    check=lambda input, offset=0, dim1=0, dim2=1: _diagonal_axes("diagonal", input.ndim, offset, dim1, dim2),
    samples=lambda rng: [
        Sample((uniform(rng, (3, 3)),), {}, "square"),
        Sample((uniform(rng, (3, 4)),), {"offset": 1}, "above"),
        Sample((uniform(rng, (4, 3)),), {"offset": -2}, "below"),
        Sample((uniform(rng, (2, 3)),), {"offset": 1}, "wide, above: rows run out"),
        Sample((uniform(rng, (2, 3, 4)),), {"offset": 1, "dim1": -1, "dim2": 1}, "batched, dims swapped"),
        Sample((uniform(rng, (2, 3, 4)),), {"offset": -1, "dim1": 2, "dim2": 0}, "batched, dims apart"),
        Sample((uniform(rng, (3, 4)),), {"offset": 4}, "past the edge: empty"),
        Sample((uniform(rng, (3, 4)),), {"offset": -7}, "far below: empty"),
        Sample((transposed(rng, (3, 4)),), {"offset": 0}, "non-contiguous"),
        Sample((uniform(rng, (0, 3)),), {"offset": 1}, "zero-size"),
        Sample((uniform(rng, (2, 0, 3)),), {"dim1": 0, "dim2": 2}, "zero-size batch"),
    ],
    torch_ref=lambda torch, input, offset=0, dim1=0, dim2=1: torch.diagonal(input, offset, dim1, dim2),
    method=True,
    numpy={np.diagonal: _numpy.diagonal},
    notes=case_law(_CASE_LAW, "diagonal"),
)


def _diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """``torch.diag_embed(input, offset=0, dim1=-2, dim2=-1)``: zeros with ``input``'s last dim on the ``offset``
    diagonal of the new dims ``dim1``, ``dim2`` (counted in the output), each of size n + |offset|."""
    a1, a2 = _diagonal_axes("diag_embed", input.ndim + 1, offset, dim1, dim2)
    side = input.shape[-1] + abs(offset)
    shape = list(input.shape[:-1])
    for a in sorted((a1, a2)):
        shape.insert(a, side)
    return _embed_into(np.zeros(shape, input.dtype), input, offset, a1, a2)


def _diag_embed_vjp(g, ans, input, offset=0, dim1=-2, dim2=-1):
    a1, a2 = _diagonal_axes("diag_embed", input.ndim + 1, offset, dim1, dim2)
    return np.diagonal(g, offset, a1, a2) if isinstance(g, np.ndarray) else diagonal(g, offset, a1, a2)


diag_embed = defop(
    "diag_embed",
    family="movement",
    inputs=("input",),
    forward=_diag_embed,
    vjps=(_diag_embed_vjp,),
    check=lambda input, offset=0, dim1=-2, dim2=-1: _diagonal_axes("diag_embed", input.ndim + 1, offset, dim1, dim2),
    samples=lambda rng: [
        Sample((uniform(rng, (3,)),), {}, "vector"),
        Sample((uniform(rng, (2, 3)),), {"offset": 1}, "batched, above"),
        Sample((uniform(rng, (2, 3)),), {"offset": -2, "dim1": 0, "dim2": 2}, "dims apart, below"),
        Sample((uniform(rng, (2, 3)),), {"offset": 1, "dim1": -1, "dim2": 0}, "dims swapped"),
        Sample((transposed(rng, (3, 2)),), {"dim1": 1, "dim2": -3}, "non-contiguous"),
        Sample((uniform(rng, (1,)),), {"offset": 2}, "size-1"),
        Sample((uniform(rng, (0, 3)),), {}, "zero-size batch"),
        Sample((uniform(rng, (2, 0)),), {"offset": 1}, "empty diagonal"),
    ],
    torch_ref=lambda torch, input, offset=0, dim1=-2, dim2=-1: torch.diag_embed(input, offset, dim1, dim2),
    method=True,
    notes=case_law(_CASE_LAW, "diag_embed"),
)


def _check_diag(input, diagonal=0):
    integer("diag", "diagonal", diagonal)
    if input.ndim not in (1, 2):
        raise ValueError(f"diag: argument 'input' expected a 1-D or 2-D tensor, got shape {input.shape}")


def _diag(input, diagonal=0):
    """``torch.diag(input, diagonal=0)``: a 1-D input as the square matrix with it on the ``diagonal``-th
    diagonal; a 2-D input's ``diagonal``-th diagonal."""
    _check_diag(input, diagonal)
    if input.ndim == 1:
        return _diag_embed(input, diagonal, 0, 1)
    return np.diagonal(input, diagonal)


def _diag_vjp(g, ans, input, diagonal=0):
    if input.ndim == 1:
        return np.diagonal(g, diagonal) if isinstance(g, np.ndarray) else diag(g, diagonal)  # 2-D g: its diagonal
    return _diagonal_back(g, tuple(input.shape), diagonal, 0, 1)


diag = defop(
    "diag",
    family="movement",
    inputs=("input",),
    forward=_diag,
    vjps=(_diag_vjp,),
    check=_check_diag,
    samples=lambda rng: [
        Sample((uniform(rng, (3,)),), {}, "vector to matrix"),
        Sample((uniform(rng, (3,)),), {"diagonal": -2}, "vector below"),
        Sample((uniform(rng, (3, 3)),), {}, "matrix to vector"),
        Sample((uniform(rng, (3, 4)),), {"diagonal": 2}, "matrix above"),
        Sample((uniform(rng, (4, 2)),), {"diagonal": -1}, "tall, below"),
        Sample((uniform(rng, (2, 3)),), {"diagonal": -3}, "past the edge: empty"),
        Sample((transposed(rng, (3, 4)),), {"diagonal": 1}, "non-contiguous"),
        Sample((uniform(rng, (1,)),), {"diagonal": 1}, "size-1 vector"),
        Sample((uniform(rng, (0,)),), {}, "empty vector"),
        Sample((uniform(rng, (0,)),), {"diagonal": 2}, "empty vector, offset"),
        Sample((uniform(rng, (0, 3)),), {"diagonal": 1}, "zero-size matrix"),
    ],
    torch_ref=lambda torch, input, diagonal=0: torch.diag(input, diagonal),
    method=True,
    numpy={np.diag: _numpy.diag},
    notes=case_law(_CASE_LAW, "diag"),
)


# -- unfold_copy (Tensor.unfold) --------------------------------------------------------------------------
def _unfold_plan(input, dimension, size, step) -> tuple:
    """(axis, windows): the dim the windows slide along and how many there are (axis None for a 0-D input)."""
    size, step = integer("unfold_copy", "size", size), integer("unfold_copy", "step", step)
    axis = normalize_dim("unfold_copy", dimension, input.ndim, "dimension")
    length = input.shape[axis] if input.ndim else 1
    if size < 0:
        raise ValueError(f"unfold_copy: argument 'size' expected a non-negative window size, got {size}")
    if step <= 0:
        raise ValueError(f"unfold_copy: argument 'step' expected a positive step, got {step}")
    if size > length:
        raise ValueError(
            f"unfold_copy: argument 'size' expected at most {length} (the size of dimension {dimension} "
            f"of input {input.shape}), got {size}"
        )
    return (axis if input.ndim else None), (length - size) // step + 1


def _unfold(input, dimension, size, step):
    """``torch.unfold_copy(input, dimension, size, step)``, i.e. ``input.unfold(dimension, size, step)``: the
    windows ``input[..., k * step : k * step + size, ...]`` along ``dimension``, stacked in that dim, each
    window's entries as a new last dim (a strided view)."""
    axis, windows = _unfold_plan(input, dimension, size, step)
    if axis is None:  # torch: a 0-D input is one entry; its windows of size 0 or 1 give shape (size,)
        return np.reshape(input, (1,))[:size]
    return sliding_window_view(input, size, axis=axis)[_dim_of(axis, slice(None, None, step))]


def _unfold_vjp(g, ans, input, dimension, size, step):
    axis, windows = _unfold_plan(input, dimension, size, step)
    if axis is None:
        return np.reshape(np.sum(g), ())
    shape = tuple(input.shape)
    if isinstance(g, np.ndarray):
        grad = np.zeros(shape, g.dtype)
        by_window = np.moveaxis(g, -1, axis + 1)  # (..., windows, size, ...)
        if size <= windows:  # add offset j of every window at once: positions j, j + step, ...
            for j in range(size):
                grad[_dim_of(axis, slice(j, j + step * (windows - 1) + 1, step))] += by_window[_dim_of(axis + 1, j)]
        else:  # fewer windows than entries in one: add window by window
            for k in range(windows):
                grad[_dim_of(axis, slice(k * step, k * step + size))] += by_window[_dim_of(axis, k)]
        return grad
    positions = (np.arange(windows)[:, None] * step + np.arange(size)).reshape(-1)
    flat = np.reshape(np.moveaxis(g, -1, axis + 1), shape[:axis] + (windows * size,) + shape[axis + 1 :])
    return index_add(np.zeros(shape, g.dtype), axis, positions, flat)  # its backward: index_select, an unfold


unfold_copy = defop(
    "unfold_copy",
    family="movement",
    inputs=("input",),
    forward=_unfold,
    vjps=(_unfold_vjp,),
    check=lambda input, dimension, size, step: _unfold_plan(input, dimension, size, step),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 5)),), {"dimension": 1, "size": 2, "step": 1}, "overlapping"),
        Sample((uniform(rng, (7, 2)),), {"dimension": 0, "size": 3, "step": 2}, "overlapping, step"),
        Sample((uniform(rng, (2, 7, 3)),), {"dimension": -2, "size": 2, "step": 3}, "gaps, leftover"),
        Sample((uniform(rng, (2, 6)),), {"dimension": -1, "size": 4, "step": 1}, "more entries than windows"),
        Sample((uniform(rng, (3, 4)),), {"dimension": 1, "size": 4, "step": 5}, "one full window"),
        Sample((uniform(rng, (3, 4)),), {"dimension": 0, "size": 1, "step": 1}, "size 1"),
        Sample((uniform(rng, (3, 4)),), {"dimension": 1, "size": 0, "step": 2}, "size 0"),
        Sample((transposed(rng, (5, 3)),), {"dimension": 0, "size": 2, "step": 2}, "non-contiguous"),
        Sample((uniform(rng, ()),), {"dimension": 0, "size": 1, "step": 1}, "scalar"),
        Sample((uniform(rng, ()),), {"dimension": -1, "size": 0, "step": 2}, "scalar, size 0"),
        Sample((uniform(rng, (0, 3)),), {"dimension": 1, "size": 2, "step": 1}, "zero-size"),
        Sample((uniform(rng, (0, 3)),), {"dimension": 0, "size": 0, "step": 1}, "zero-size dim, size 0"),
    ],
    torch_ref=lambda torch, input, dimension, size, step: torch.unfold_copy(input, dimension, size, step),
    method="unfold",
    notes=case_law(_CASE_LAW, "unfold_copy"),
)


# -- several outputs, as many as the input asks for: split, chunk, unbind, meshgrid -------------------------
def _split_axis(op: str, input, dim, argument: str) -> tuple:
    """(axis, size) of the dim ``input`` is cut along; a 0-D input has none."""
    if input.ndim == 0:
        raise ValueError(f"{op}: argument '{argument}' expected a tensor with at least 1 dim, got a 0-D tensor")
    axis = normalize_dim(op, dim, input.ndim)
    return axis, input.shape[axis]


def _runs(size: int, step: int) -> tuple:
    """Lengths of consecutive pieces of ``step`` entries covering ``size`` (the last one shorter if need be)."""
    return tuple(min(step, size - start) for start in range(0, size, step))


def _split_plan(tensor, split_size_or_sections, dim) -> tuple:
    """(axis, sizes of the pieces)."""
    axis, size = _split_axis("split", tensor, dim, "tensor")
    if isinstance(split_size_or_sections, int | np.integer) and not isinstance(split_size_or_sections, bool):
        step = int(split_size_or_sections)
        if step < 0 or (step == 0 and size != 0):
            raise ValueError(
                f"split: argument 'split_size_or_sections' expected a positive size (0 only for an "
                f"empty dim), got {step} for dim {dim} of size {size}"
            )
        return axis, (_runs(size, step) if size else (0,))
    sizes = _int_tuple("split", "split_size_or_sections", split_size_or_sections)
    if any(s < 0 for s in sizes) or sum(sizes) != size:
        raise ValueError(
            f"split: argument 'split_size_or_sections' expected non-negative sizes adding up to "
            f"{size} (dim {dim} of shape {tensor.shape}), got {list(sizes)}"
        )
    return axis, sizes


def _chunk_plan(input, chunks, dim) -> tuple:
    """(axis, sizes of the pieces): ceil(size / chunks) entries each, so possibly fewer than ``chunks`` pieces;
    an empty dim gives ``chunks`` empty pieces."""
    chunks = integer("chunk", "chunks", chunks)
    if chunks <= 0:
        raise ValueError(f"chunk: argument 'chunks' expected a positive int, got {chunks}")
    axis, size = _split_axis("chunk", input, dim, "input")
    return axis, (_runs(size, -(-size // chunks)) if size else (0,) * chunks)


def _cut(input, axis, sizes) -> tuple:
    """Consecutive views of ``sizes[k]`` entries along ``axis``."""
    pieces, start = [], 0
    for n in sizes:
        pieces.append(input[_dim_of(axis, slice(start, start + n))])
        start += n
    return tuple(pieces)


def _filled(g, ans) -> list:
    """Every output's gradient, zeros of that output's shape where it received none."""
    return [np.zeros(np.shape(a), a.dtype) if x is None else x for x, a in zip(g, ans)]


def _concatenated_back(g, ans, input, dim):
    """The pieces' gradients joined back along the dim they were cut from."""
    pieces = _filled(g, ans)
    return pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=dim % np.ndim(input))


def _split(tensor, split_size_or_sections, dim=0):
    """``torch.split(tensor, split_size_or_sections, dim=0)``: views along ``dim`` of ``split_size_or_sections``
    entries each (the last one shorter if need be; one empty piece for an empty dim) or of the listed sizes
    (which must add up to the dim's size; ``[]`` for an empty dim gives no pieces)."""
    return _cut(tensor, *_split_plan(tensor, split_size_or_sections, dim))


def _split_vjp(g, ans, tensor, *, needs, split_size_or_sections, dim=0):
    return (_concatenated_back(g, ans, tensor, dim),)


def _split_samples(rng):
    return [
        Sample((uniform(rng, (5, 4)),), {"split_size_or_sections": 2}, "size, last piece shorter"),
        Sample((uniform(rng, (5, 4)),), {"split_size_or_sections": [1, 3, 1], "dim": 0}, "sections"),
        Sample((uniform(rng, (3, 5)),), {"split_size_or_sections": 3, "dim": -1}, "negative dim"),
        Sample((uniform(rng, (3, 5)),), {"split_size_or_sections": (4, 0, 1), "dim": -1}, "a zero section"),
        Sample((uniform(rng, (2, 3)),), {"split_size_or_sections": [0, 3, 0], "dim": 1}, "zero sections at the ends"),
        Sample((uniform(rng, (6,)),), {"split_size_or_sections": [0, 2, 0, 4]}, "1-D, zero sections"),
        Sample((uniform(rng, (2, 3)),), {"split_size_or_sections": 10, "dim": 1}, "size past the dim: one piece"),
        Sample((uniform(rng, (1, 3)),), {"split_size_or_sections": 1}, "size-1 dim"),
        Sample((transposed(rng, (4, 3)),), {"split_size_or_sections": 2, "dim": 1}, "non-contiguous"),
        Sample((uniform(rng, (0, 3)),), {"split_size_or_sections": 2}, "zero-size dim: one empty piece"),
        Sample((uniform(rng, (0, 3)),), {"split_size_or_sections": 0}, "zero-size dim, size 0"),
        Sample((uniform(rng, (2, 0, 3)),), {"split_size_or_sections": [0, 0], "dim": -2}, "zero-size, sections"),
        Sample((uniform(rng, (2, 0)),), {"split_size_or_sections": 1, "dim": 0}, "zero-size pieces"),
    ]


def _pieces_op(name, forward, vjp, samples, torch_ref, parameter="input", **declaration):
    """Declare a Tensor method cutting its one input (named ``parameter``) into a variable number of pieces, views
    of it; ``vjp`` is the joint rule receiving every piece's gradient (zeros for those that got none)."""
    return defop(
        name,
        family="movement",
        inputs=(parameter,),
        forward=forward,
        joint_vjp=vjp,
        outputs="variable",
        samples=samples,
        torch_ref=torch_ref,
        method=True,
        notes=case_law(_CASE_LAW, name),
        **declaration,
    )


split = _pieces_op(
    "split",
    _split,
    _split_vjp,
    parameter="tensor",
    check=lambda tensor, split_size_or_sections, dim=0: _split_plan(tensor, split_size_or_sections, dim),
    samples=_split_samples,
    torch_ref=lambda torch, tensor, split_size_or_sections, dim=0: torch.split(tensor, split_size_or_sections, dim),
)


def _chunk(input, chunks, dim=0):
    """``torch.chunk(input, chunks, dim=0)``: ``split`` into views of ceil(size / chunks) entries, so possibly
    fewer than ``chunks`` of them; an empty dim gives ``chunks`` empty pieces."""
    return _cut(input, *_chunk_plan(input, chunks, dim))


def _chunk_vjp(g, ans, input, *, needs, chunks, dim=0):
    return (_concatenated_back(g, ans, input, dim),)


chunk = _pieces_op(
    "chunk",
    _chunk,
    _chunk_vjp,
    check=lambda input, chunks, dim=0: _chunk_plan(input, chunks, dim),
    samples=lambda rng: [
        Sample((uniform(rng, (5, 2)),), {"chunks": 4}, "fewer pieces than chunks"),
        Sample((uniform(rng, (10,)),), {"chunks": 4}, "last piece shorter"),
        Sample((uniform(rng, (6, 2)),), {"chunks": 3, "dim": 0}, "even"),
        Sample((uniform(rng, (2, 3)),), {"chunks": 5, "dim": -1}, "more chunks than entries"),
        Sample((uniform(rng, (7, 2)),), {"chunks": 1}, "one chunk"),
        Sample((transposed(rng, (3, 4)),), {"chunks": 2, "dim": -2}, "non-contiguous"),
        Sample((uniform(rng, (0, 3)),), {"chunks": 2}, "zero-size dim: chunks empty pieces"),
        Sample((uniform(rng, (2, 0)),), {"chunks": 3, "dim": 1}, "zero-size last dim"),
        Sample((uniform(rng, (0, 3)),), {"chunks": 2, "dim": 1}, "zero-size, other dim"),
    ],
    torch_ref=lambda torch, input, chunks, dim=0: torch.chunk(input, chunks, dim),
)


def _unbind(input, dim=0):
    """``torch.unbind(input, dim=0)``: the views ``input.select(dim, i)`` for every i (none for an empty dim)."""
    axis, size = _split_axis("unbind", input, dim, "input")
    return tuple(input[(slice(None),) * axis + (i, Ellipsis)] for i in range(size))  # 0-D views, not scalars


def _unbind_vjp(g, ans, input, *, needs, dim=0):
    return (np.stack(_filled(g, ans), axis=dim % np.ndim(input)),)


unbind = _pieces_op(
    "unbind",
    _unbind,
    _unbind_vjp,
    check=lambda input, dim=0: _split_axis("unbind", input, dim, "input"),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3)),), {}, "rows"),
        Sample((uniform(rng, (2, 3)),), {"dim": -1}, "negative dim"),
        Sample((uniform(rng, (2, 3, 4)),), {"dim": 1}, "middle dim"),
        Sample((uniform(rng, (4,)),), {}, "1-D: scalars"),
        Sample((uniform(rng, (1, 3)),), {}, "size-1 dim"),
        Sample((transposed(rng, (3, 4)),), {"dim": 1}, "non-contiguous"),
        Sample((uniform(rng, (3, 0)),), {}, "zero-size pieces"),
        Sample((uniform(rng, (2, 0, 3)),), {"dim": 2}, "zero-size, last dim"),
    ],
    torch_ref=lambda torch, input, dim=0: torch.unbind(input, dim),
)


def _grid_plan(tensors, indexing) -> tuple:
    """(the grid's shape, the grid dim each tensor varies along)."""
    if not tensors:
        raise ValueError("meshgrid: argument 'tensors' expected at least one tensor, got none")
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: argument 'indexing' expected 'ij' or 'xy', got {indexing!r}")
    for i, t in enumerate(tensors):
        if t.ndim > 1:
            raise ValueError(
                f"meshgrid: argument 'tensors' expected 0-D or 1-D tensors, got shape {t.shape} (tensor {i})"
            )
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) > 1:
        raise TypeError(f"meshgrid: argument 'tensors' expected one dtype, got {sorted(d.name for d in dtypes)}")
    sizes = [t.size for t in tensors]
    places = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) > 1:  # Cartesian: the first two dims swapped
        places[0], places[1] = 1, 0
        sizes[0], sizes[1] = sizes[1], sizes[0]
    return tuple(sizes), places


def _meshgrid(*tensors, indexing="ij"):
    """``torch.meshgrid(*tensors, indexing='ij')``: for 0-D/1-D tensors of sizes n1, n2, ..., broadcast views of
    shape (n1, n2, ...), the k-th varying along dim k; ``indexing='xy'`` swaps the first two dims."""
    shape, places = _grid_plan(tensors, indexing)
    out = []
    for t, k in zip(tensors, places):
        along = [1] * len(shape)
        along[k] = -1
        out.append(np.broadcast_to(np.reshape(t, along), shape))
    return tuple(out)


def _meshgrid_vjp(g, ans, tensors, *, needs, indexing="ij"):
    shape, places = _grid_plan(tensors, indexing)
    grads: list[np.ndarray | None] = []
    for t, gk, k, need in zip(tensors, g, places, needs[0]):
        if not need:
            grads.append(None)
        elif gk is None:
            grads.append(np.zeros(np.shape(t), t.dtype))
        else:
            others = tuple(a for a in range(len(shape)) if a != k)
            grads.append(np.reshape(np.sum(gk, axis=others) if others else gk, np.shape(t)))
    return (grads,)


def _meshgrid_samples(rng):
    def u(*shapes):
        return [uniform(rng, s) for s in shapes]

    cases = [
        (u((2,), (3,)), "two"),
        (u((2,), (3,), (4,)), "three"),
        (u((3,)), "one"),
        (u((), (3,)), "a 0-D tensor"),
        (u((), ()), "0-D only"),
        (u((2,), (1,), (3,)), "a size-1 tensor"),
        ([uniform(rng, (6,))[::2], uniform(rng, (2,))], "non-contiguous (strided)"),
        (u((0,), (3,)), "zero-size"),
        (u((2,), (0,), (3,)), "zero-size in the middle"),
    ]
    return [Sample((ts,), {"indexing": i}, f"{label}, {i}") for ts, label in cases for i in ("ij", "xy")]


meshgrid = defop(
    "meshgrid",
    family="movement",
    inputs=("*tensors",),
    forward=_meshgrid,
    joint_vjp=_meshgrid_vjp,
    outputs="variable",
    check=lambda tensors, indexing="ij": _grid_plan(tensors, indexing),
    samples=_meshgrid_samples,
    torch_ref=lambda torch, tensors, indexing="ij": torch.meshgrid(*tensors, indexing=indexing),
    notes=case_law(_CASE_LAW, "meshgrid"),
)


# -- diagonal_scatter: diagonal's adjoint into a given tensor ------------------------------------------------
def _diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """``torch.diagonal_scatter(input, src, offset=0, dim1=0, dim2=1)``: a copy of ``input`` with ``src`` on its
    ``diagonal(offset, dim1, dim2)`` (src has that diagonal's shape)."""
    a1, a2 = _diagonal_axes("diagonal_scatter", input.ndim, offset, dim1, dim2)
    want = np.diagonal(input, offset, a1, a2).shape
    if src.shape != want:
        raise ValueError(
            f"diagonal_scatter: argument 'src' expected shape {want} (the diagonal it replaces), got {src.shape}"
        )
    require_dtype_of_input("diagonal_scatter", "src", src, input)
    return _embed_into(input.copy(), src, offset, a1, a2)


def _diagonal_scatter_vjp_input(g, ans, input, src, offset=0, dim1=0, dim2=1):
    zeros = np.zeros(src.shape, g.dtype)
    scatter = _diagonal_scatter if isinstance(g, np.ndarray) else diagonal_scatter
    return scatter(g, zeros, offset, dim1, dim2)


def _diagonal_scatter_vjp_src(g, ans, input, src, offset=0, dim1=0, dim2=1):
    return np.diagonal(g, offset, *_diagonal_axes("diagonal_scatter", input.ndim, offset, dim1, dim2))


def _diagonal_scatter_samples(rng):
    def pair(shape, **attrs):
        x = uniform(rng, shape)
        a1, a2 = attrs.get("dim1", 0), attrs.get("dim2", 1)
        return (x, uniform(rng, np.diagonal(x, attrs.get("offset", 0), a1 % x.ndim, a2 % x.ndim).shape)), attrs

    cases = [
        (pair((3, 3)), "square"),
        (pair((3, 4), offset=1), "above"),
        (pair((4, 3), offset=-2), "below"),
        (pair((2, 3, 4), offset=1, dim1=-1, dim2=1), "batched, dims swapped"),
        (pair((2, 3), offset=3), "empty diagonal"),
        (pair((0, 3)), "zero-size"),
    ]
    out = [Sample(inputs, attrs, label) for (inputs, attrs), label in cases]
    out.append(Sample((transposed(rng, (3, 4)), transposed(rng, (3,))), {}, "non-contiguous"))
    return out


diagonal_scatter = defop(
    "diagonal_scatter",
    notes=case_law(_CASE_LAW, "diagonal_scatter"),
    method=True,
    family="movement",
    inputs=("input", "src"),
    forward=_diagonal_scatter,
    vjps=(_diagonal_scatter_vjp_input, _diagonal_scatter_vjp_src),
    samples=_diagonal_scatter_samples,
    torch_ref=lambda torch, input, src, offset=0, dim1=0, dim2=1: torch.diagonal_scatter(
        input, src, offset, dim1, dim2
    ),
)


# -- fliplr / flipud / rot90 -------------------------------------------------------------------------------
def _at_least(op: str, input, ndim: int) -> None:
    if input.ndim < ndim:
        raise ValueError(f"{op}: argument 'input' expected a tensor with at least {ndim} dims, got shape {input.shape}")


def _flip_dim(name, axis, ndim, *, doc=""):
    def forward(input):
        _at_least(name, input, ndim)
        return np.flip(input, axis)

    samples = [((3, 4), ""), ((2, 3, 4), "3-D"), ((1, 3), "size-1 dim"), ((0, 3), "zero-size")]
    return one_input_op(
        name,
        "movement",
        forward,
        lambda g, ans, input: np.flip(g, axis),
        notes=case_law(_CASE_LAW, name),
        samples=lambda rng: (
            [Sample((uniform(rng, s),), {}, label) for s, label in samples]
            + [Sample((transposed(rng, (3, 4)),), {}, "non-contiguous")]
            + ([Sample((uniform(rng, (4,)),), {}, "1-D")] if ndim == 1 else [])
        ),
        torch_ref=lambda torch, input: getattr(torch, name)(input),
        method=True,
        doc=doc,
    )


fliplr = _flip_dim("fliplr", 1, 2, doc="input with dim 1 reversed (left-right), for at least 2-D input.")
flipud = _flip_dim("flipud", 0, 1, doc="input with dim 0 reversed (up-down), for at least 1-D input.")


def _rot90_axes(input, k, dims) -> tuple:
    integer("rot90", "k", k)
    dims = _int_tuple("rot90", "dims", dims)
    if len(dims) != 2:
        raise ValueError(f"rot90: argument 'dims' expected 2 dims, got {dims}")
    _at_least("rot90", input, 2)
    a, b = (normalize_dim("rot90", d, input.ndim, "dims") for d in dims)
    if a == b:
        raise ValueError(f"rot90: argument 'dims' expected two different dims, got {dims}")
    return a, b


def _rot90(input, k=1, dims=(0, 1)):
    """``torch.rot90(input, k=1, dims=(0, 1))``: ``k`` quarter turns in the plane of ``dims``, from the first
    dim towards the second (negative k turns back)."""
    return np.rot90(input, k, _rot90_axes(input, k, dims))


def _rot90_vjp(g, ans, input, k=1, dims=(0, 1)):
    a, b = _rot90_axes(input, k, dims)
    turns = k % 4  # the gradient turns back: np.rot90 as flips and a swap, each traced on Tensors
    if turns == 0:
        return g
    if turns == 2:
        return np.flip(g, (a, b))
    if turns == 1:  # the forward swapped after flipping b: swap back, then flip b
        return np.flip(np.swapaxes(g, a, b), b)
    return np.swapaxes(np.flip(g, b), a, b)  # three turns: the forward flipped b after swapping


rot90 = defop(
    "rot90",
    notes=case_law(_CASE_LAW, "rot90"),
    method=True,
    family="movement",
    inputs=("input",),
    forward=_rot90,
    vjps=(_rot90_vjp,),
    check=lambda input, k=1, dims=(0, 1): _rot90_axes(input, k, dims),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3)),), {}, "once"),
        Sample((uniform(rng, (2, 3)),), {"k": 2}, "twice"),
        Sample((uniform(rng, (2, 3, 4)),), {"k": -1, "dims": (2, 0)}, "back, dims apart"),
        Sample((uniform(rng, (2, 3)),), {"k": 7}, "k past 4"),
        Sample((uniform(rng, (2, 3)),), {"k": 4, "dims": [1, 0]}, "full turn"),
        Sample((transposed(rng, (3, 4)),), {"k": 3, "dims": (-1, -2)}, "non-contiguous, negative dims"),
        Sample((uniform(rng, (0, 3)),), {"k": 1}, "zero-size"),
    ],
    torch_ref=lambda torch, input, k=1, dims=(0, 1): torch.rot90(input, k, dims),
)


# -- atleast_1d/2d/3d and the stacks built on them: hstack, vstack (row_stack), dstack, column_stack -------
def _at_least_shape(shape: tuple, ndim: int) -> tuple:
    """numpy's and torch's atleast_{1,2,3}d: (n,) -> (1, n) and (1, n, 1), (m, n) -> (m, n, 1)."""
    if len(shape) >= ndim:
        return shape
    if ndim == 3 and len(shape) == 2:
        return shape + (1,)
    if ndim == 3 and len(shape) == 1:
        return (1,) + shape + (1,)
    return (1,) * (ndim - len(shape)) + shape


def _at_least_op(ndim, *, doc=""):
    name = f"atleast_{ndim}d"

    def forward(*tensors):
        out = tuple(np.reshape(t, _at_least_shape(t.shape, ndim)) for t in tensors)
        return out[0] if len(out) == 1 else out  # torch: one tensor gives a tensor, several a tuple

    def vjp(g, ans, tensors, *, needs):
        grads = [g] if len(tensors) == 1 else _filled(g, ans)
        return ([np.reshape(gk, t.shape) if need else None for gk, t, need in zip(grads, tensors, needs[0])],)

    def samples(rng):
        shapes = [(), (3,), (2, 3), (2, 3, 4), (2, 1, 3, 2), (0,)]
        out = [Sample(([uniform(rng, s)],), {}, f"{len(s)}-D" if s != (0,) else "zero-size") for s in shapes]
        out.append(Sample(([transposed(rng, (3, 2))],), {}, "non-contiguous"))
        out.append(Sample(([uniform(rng, s) for s in shapes[:3]],), {}, "several"))
        return out

    return defop(
        name,
        family="movement",
        inputs=("*tensors",),
        forward=forward,
        joint_vjp=vjp,
        outputs="variable",
        samples=samples,
        torch_ref=lambda torch, tensors: getattr(torch, name)(*tensors),
        notes=case_law(_CASE_LAW, name),
        doc=doc,
    )


atleast_1d = _at_least_op(
    1, doc="Each tensor with at least 1 dim (a 0-D one becomes shape (1,)); one tensor in, one out."
)
atleast_2d = _at_least_op(
    2, doc="Each tensor with at least 2 dims (size-1 dims added in front); one tensor in, one out."
)
atleast_3d = _at_least_op(
    3, doc="Each tensor with at least 3 dims (as numpy.atleast_3d places the new dims); one tensor in, one out."
)


def _stack_plan(op, tensors) -> tuple:
    """(each tensor's shape in the join, the join's axis) for hstack/vstack/dstack/column_stack."""
    if op == "column_stack":  # (an empty sequence is refused by the engine, naming the op)
        return [t.shape if t.ndim >= 2 else (math.prod(t.shape), 1) for t in tensors], 1  # Tensor.size: a method
    ndim = {"hstack": 1, "vstack": 2, "dstack": 3}[op]
    shapes = [_at_least_shape(t.shape, ndim) for t in tensors]
    return shapes, {"hstack": 0 if len(shapes[0]) == 1 else 1, "vstack": 0, "dstack": 2}[op]


def _stacker(op, *, doc=""):
    def forward(tensors):
        shapes, axis = _stack_plan(op, tensors)
        return _join(op, [np.reshape(t, s) for t, s in zip(tensors, shapes)], axis)  # concat's checks, op named

    def vjp(g, ans, tensors, *, needs):
        shapes, axis = _stack_plan(op, tensors)
        grads, start = [], 0
        for t, s, need in zip(tensors, shapes, needs[0]):
            if s == (0,) and len(g.shape) > 1:  # concat's legacy rule: a 1-D empty tensor is skipped
                grads.append(np.zeros(t.shape, t.dtype) if need else None)
                continue
            stop = start + s[axis]
            grads.append(np.reshape(g[_dim_of(axis, slice(start, stop))], t.shape) if need else None)
            start = stop
        return (grads,)

    def samples(rng):
        def u(*shapes):
            return [uniform(rng, s) for s in shapes]

        return [
            Sample((u((3,), (2,) if op == "hstack" else (3,)),), {}, "1-D"),
            Sample((u((2, 3), (2, 3)),), {}, "2-D"),
            Sample((u((2, 3, 1), (2, 3, 2)),), {}, "3-D")
            if op == "dstack"
            else Sample((u((1, 2, 3), (1, 2, 3)),), {}, "3-D"),
            Sample((u((), ()),), {}, "0-D"),
            Sample((u((4,)),), {}, "one"),
            Sample(([transposed(rng, (2, 3)), uniform(rng, (2, 3))],), {}, "non-contiguous"),
            Sample((u((0,), (0,)),), {}, "zero-size"),
        ]

    return defop(
        op,
        notes=case_law(_CASE_LAW, op),
        family="movement",
        inputs=("*tensors",),
        forward=forward,
        joint_vjp=vjp,
        samples=samples,
        torch_ref=lambda torch, tensors: getattr(torch, op)(tensors),
        doc=doc,
    )


hstack = _stacker("hstack", doc="The tensors concatenated along dim 1 (dim 0 for 1-D tensors).")
vstack = _stacker("vstack", doc="The tensors, made at least 2-D, concatenated along dim 0.")
row_stack = vstack  # torch.row_stack is vstack, the same signature
dstack = _stacker("dstack", doc="The tensors, made at least 3-D, concatenated along dim 2.")
column_stack = _stacker(
    "column_stack", doc="The tensors as columns side by side: 0-D and 1-D tensors become (n, 1) columns, then hstack."
)


# -- tensor_split, hsplit, vsplit, dsplit -----------------------------------------------------------------------
def _tensor_split_plan(op, input, indices_or_sections, dim, even=False) -> tuple:
    """(axis, [(start, stop)] of the pieces). An int n: n pieces, the first size % n of them one longer (``even``:
    hsplit/vsplit/dsplit, which need n to divide the size); a sequence: cuts at those indices, each piece the
    Python slice between two cuts (negative cuts count from the end; a cut before the previous one gives an empty
    piece and the next piece starts back there, as in torch)."""
    axis, size = _split_axis(op, input, dim, "input")
    if isinstance(indices_or_sections, np.ndarray) and indices_or_sections.dtype.kind in "iu":  # torch's tensor form
        if indices_or_sections.ndim > 1:
            raise ValueError(f"{op}: argument 'indices_or_sections' expected a 0-D or 1-D integer tensor, got "
                             f"shape {indices_or_sections.shape}")  # fmt: skip
        indices_or_sections = indices_or_sections[()] if indices_or_sections.ndim == 0 else indices_or_sections.tolist()
    if isinstance(indices_or_sections, int | np.integer) and not isinstance(indices_or_sections, bool):
        n = int(indices_or_sections)
        if n <= 0 or (even and size % n):
            rule = f"a positive number of sections dividing {size}" if even else "a positive number of sections"
            raise ValueError(
                f"{op}: argument 'indices_or_sections' expected {rule} (dim {axis} of shape {input.shape}), got {n}"
            )
        lengths = [size // n + (k < size % n) for k in range(n)]
        stops = np.cumsum(lengths).tolist()
        return axis, list(zip([0] + stops[:-1], stops))
    if not isinstance(indices_or_sections, tuple | list):
        raise TypeError(
            f"{op}: argument 'indices_or_sections' expected an int or a sequence of ints, got "
            f"{type(indices_or_sections).__name__} {indices_or_sections!r}"
        )
    cuts = [None, *_int_tuple(op, "indices_or_sections", indices_or_sections), None]
    bounds = [slice(a, b).indices(size)[:2] for a, b in zip(cuts[:-1], cuts[1:])]
    return axis, [(start, max(start, stop)) for start, stop in bounds]


def _pieces(input, axis, bounds) -> tuple:
    return tuple(input[_dim_of(axis, slice(start, stop))] for start, stop in bounds)


def _pieces_back(g, ans, input, axis, bounds):
    """The pieces' gradients added back where they were cut from (pieces may overlap after a backward cut)."""
    grads = _filled(g, ans)
    size = input.shape[axis]
    if all(b[0] == a[1] for a, b in zip(bounds, bounds[1:])):  # a partition in order: one concatenation
        return np.concatenate(grads, axis=axis) if len(grads) > 1 else grads[0]
    total = np.zeros(input.shape, grads[0].dtype)
    for gk, (start, stop) in zip(grads, bounds):
        if stop > start:
            widths = (0, 0) * (input.ndim - 1 - axis) + (start, size - stop)
            total = total + (_pad(gk, widths) if isinstance(gk, np.ndarray) else pad(gk, widths))
    return total


def _splitter(op, dim_of, even):
    """tensor_split (``dim_of`` None: the op takes ``dim``) or hsplit/vsplit/dsplit (the dim follows the rank)."""

    def plan(input, indices_or_sections, dim):
        if dim_of is not None:
            least = {"hsplit": 1, "vsplit": 2, "dsplit": 3}[op]
            _at_least(op, input, least)
            dim = dim_of(input.ndim)
        return _tensor_split_plan(op, input, indices_or_sections, dim, even)

    if dim_of is None:

        def forward(input, indices_or_sections, dim=0):
            return _pieces(input, *plan(input, indices_or_sections, dim))

        def vjp(g, ans, input, *, needs, indices_or_sections, dim=0):
            return (_pieces_back(g, ans, input, *plan(input, indices_or_sections, dim)),)

    else:

        def forward(input, indices_or_sections):  # type: ignore[misc]
            return _pieces(input, *plan(input, indices_or_sections, None))

        def vjp(g, ans, input, *, needs, indices_or_sections):  # type: ignore[misc]
            return (_pieces_back(g, ans, input, *plan(input, indices_or_sections, None)),)

    return forward, vjp


def _tensor_split_samples(rng):
    return [
        Sample((uniform(rng, (7, 2)),), {"indices_or_sections": 3}, "sections, uneven"),
        Sample((uniform(rng, (2, 6)),), {"indices_or_sections": (1, 4), "dim": 1}, "indices"),
        Sample((uniform(rng, (6,)),), {"indices_or_sections": [-2, 4]}, "negative index"),
        Sample((uniform(rng, (6,)),), {"indices_or_sections": [3, 1]}, "backward cut: overlapping pieces"),
        Sample((uniform(rng, (2, 3)),), {"indices_or_sections": [5], "dim": -1}, "index past the end"),
        Sample((uniform(rng, (2, 3)),), {"indices_or_sections": 5, "dim": -1}, "more sections than entries"),
        Sample((transposed(rng, (4, 3)),), {"indices_or_sections": 2}, "non-contiguous"),
        Sample((uniform(rng, (0, 3)),), {"indices_or_sections": 2}, "zero-size"),
    ]


_tensor_split, _tensor_split_vjp = _splitter("tensor_split", None, False)
tensor_split = _pieces_op(
    "tensor_split",
    _tensor_split,
    _tensor_split_vjp,
    _tensor_split_samples,
    lambda torch, input, indices_or_sections, dim=0: torch.tensor_split(input, indices_or_sections, dim),
    doc="input split along ``dim`` into n nearly equal parts (an int), or at the given indices; views.",
)


def _rank_split(op, dim_of, shapes, *, doc=""):
    forward, vjp = _splitter(op, dim_of, True)

    def samples(rng):
        return [
            Sample((uniform(rng, shapes[0]),), {"indices_or_sections": 2}, "even sections"),
            Sample((uniform(rng, shapes[1]),), {"indices_or_sections": [1, 3]}, "indices"),
            Sample((uniform(rng, shapes[0]),), {"indices_or_sections": (3, 1)}, "backward cut"),
            Sample((transposed(rng, shapes[0]),), {"indices_or_sections": 1}, "non-contiguous, one piece"),
            Sample((uniform(rng, shapes[2]),), {"indices_or_sections": [1]}, "zero-size"),
        ]

    return _pieces_op(
        op,
        forward,
        vjp,
        samples,
        lambda torch, input, indices_or_sections: getattr(torch, op)(input, indices_or_sections),
        doc=doc,
    )


# torch.hsplit: dim 1 (dim 0 of a 1-D input); vsplit: dim 0 of an at least 2-D input; dsplit: dim 2 of >= 3-D
hsplit = _rank_split(
    "hsplit",
    lambda ndim: 0 if ndim == 1 else 1,
    [(2, 4), (3, 5), (2, 0)],
    doc="tensor_split along dim 1 (dim 0 for 1-D input); an int must divide the dim evenly.",
)
vsplit = _rank_split(
    "vsplit",
    lambda ndim: 0,
    [(4, 2), (5, 3), (0, 2)],
    doc="tensor_split along dim 0 of an at least 2-D input; an int must divide the dim evenly.",
)
dsplit = _rank_split(
    "dsplit",
    lambda ndim: 2,
    [(2, 1, 4), (1, 2, 5), (2, 1, 0)],
    doc="tensor_split along dim 2 of an at least 3-D input; an int must divide the dim evenly.",
)


# -- block_diag, cartesian_prod, combinations, kron, vander ------------------------------------------------------
def _blocks(tensors) -> tuple:
    """(each tensor as a 2-D block shape, the row and column offsets) for block_diag."""
    shapes = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise ValueError(
                f"block_diag: argument 'tensors' expected 0-D, 1-D or 2-D tensors, got shape {t.shape} (tensor {i})"
            )
        shapes.append(((1, 1), (1,) + t.shape, t.shape)[t.ndim])
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) > 1:
        raise TypeError(f"block_diag: argument 'tensors' expected one dtype, got {sorted(d.name for d in dtypes)}")
    rows = np.cumsum([0] + [s[0] for s in shapes]).tolist()
    cols = np.cumsum([0] + [s[1] for s in shapes]).tolist()
    return shapes, rows, cols


def _block_diag(*tensors):
    """``torch.block_diag(*tensors)``: the tensors (0-D as 1 x 1, 1-D as one row) on the diagonal of a zero
    matrix, in order; no tensors give a (1, 0) matrix, as torch."""
    if not tensors:
        return np.zeros((1, 0))
    shapes, rows, cols = _blocks(tensors)
    out = np.zeros((rows[-1], cols[-1]), tensors[0].dtype)
    for t, s, r, c in zip(tensors, shapes, rows, cols):
        out[r : r + s[0], c : c + s[1]] = np.reshape(t, s)
    return out


def _block_diag_vjp(g, ans, tensors, *, needs):
    shapes, rows, cols = _blocks(tensors)
    return (
        [
            np.reshape(g[r : r + s[0], c : c + s[1]], t.shape) if need else None
            for t, s, r, c, need in zip(tensors, shapes, rows, cols, needs[0])
        ],
    )


def _block_diag_samples(rng):
    def u(*shapes):
        return [uniform(rng, s) for s in shapes]

    return [
        Sample((u((2, 3), (1, 2)),), {}, "two matrices"),
        Sample((u((2, 2), (3,), ()),), {}, "matrix, row, 0-D"),
        Sample((u((3, 1)),), {}, "one"),
        Sample(([transposed(rng, (2, 3)), uniform(rng, (2, 2))],), {}, "non-contiguous"),
        Sample((u((2, 0), (0, 3), (1, 1)),), {}, "zero-size blocks"),
    ]


block_diag = defop(
    "block_diag",
    notes=case_law(_CASE_LAW, "block_diag"),
    family="movement",
    inputs=("*tensors",),
    forward=_block_diag,
    joint_vjp=_block_diag_vjp,
    check=lambda tensors: _blocks(tensors),
    samples=_block_diag_samples,
    torch_ref=lambda torch, tensors: torch.block_diag(*tensors),
)


def _check_1d(op, tensors):
    for i, t in enumerate(tensors):
        if t.ndim != 1:
            raise ValueError(f"{op}: argument 'tensors' expected 1-D tensors, got shape {t.shape} (tensor {i})")


def _cartesian_prod(*tensors):
    """``torch.cartesian_prod(*tensors)``: the rows (a_i, b_j, ...) of every combination of entries of the 1-D
    tensors, the last varying fastest: shape (n_a * n_b * ..., k); one tensor is returned as it is (1-D)."""
    _check_1d("cartesian_prod", tensors)
    if len(tensors) == 1:
        return tensors[0]
    grids = _meshgrid(*tensors, indexing="ij")
    return np.stack([np.reshape(grid, (-1,)) for grid in grids], axis=1)


def _cartesian_prod_vjp(g, ans, tensors, *, needs):
    if len(tensors) == 1:
        return ([g],)
    shape = tuple(t.shape[0] for t in tensors)
    return (
        [
            np.sum(np.reshape(g[:, k], shape), axis=tuple(a for a in range(len(shape)) if a != k)) if need else None
            for k, need in enumerate(needs[0])
        ],
    )


cartesian_prod = defop(
    "cartesian_prod",
    notes=case_law(_CASE_LAW, "cartesian_prod"),
    family="movement",
    inputs=("*tensors",),
    forward=_cartesian_prod,
    joint_vjp=_cartesian_prod_vjp,
    check=lambda tensors: _grid_plan(tensors, "ij") and _check_1d("cartesian_prod", tensors),
    samples=lambda rng: [
        Sample(([uniform(rng, (2,)), uniform(rng, (3,))],), {}, "two"),
        Sample(([uniform(rng, (2,)), uniform(rng, (1,)), uniform(rng, (3,))],), {}, "three"),
        Sample(([uniform(rng, (4,))],), {}, "one: itself"),
        Sample(([uniform(rng, (6,))[::2], uniform(rng, (2,))],), {}, "non-contiguous (strided)"),
        Sample(([uniform(rng, (2,)), uniform(rng, (0,))],), {}, "zero-size"),
    ],
    torch_ref=lambda torch, tensors: torch.cartesian_prod(*tensors),
)


def _combination_positions(n: int, r: int, with_replacement: bool) -> np.ndarray:
    """(count, r) int64 positions of the r-combinations of range(n), in lexicographic order (itertools')."""
    import itertools

    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    return np.fromiter(itertools.chain.from_iterable(pick(range(n), r)), np.int64).reshape(-1, r)


def _check_combinations(input, r=2, with_replacement=False):
    if input.ndim != 1:
        raise ValueError(f"combinations: argument 'input' expected a 1-D tensor, got shape {input.shape}")
    integer("combinations", "r", r, at_least=0)
    require_bool("combinations", "with_replacement", with_replacement)


def _combinations(input, r=2, with_replacement=False):
    """``torch.combinations(input, r=2, with_replacement=False)``: the r-combinations of the entries of a 1-D
    input as rows, in lexicographic order of position (itertools'); ``r=0`` gives an empty 1-D tensor, as torch."""
    if r == 0:
        return input[:0]
    return input[_combination_positions(input.shape[0], r, with_replacement)]


def _combinations_vjp(g, ans, input, r=2, with_replacement=False):
    if r == 0:
        return np.zeros(input.shape, g.dtype)
    positions = _combination_positions(input.shape[0], r, with_replacement).reshape(-1)
    flat, zeros = np.reshape(g, (-1,)), np.zeros(input.shape, g.dtype)
    return (
        _index_add_into(zeros, 0, positions, flat)
        if isinstance(g, np.ndarray)
        else index_add(zeros, 0, positions, flat)
    )


combinations = defop(
    "combinations",
    notes=case_law(_CASE_LAW, "combinations"),
    family="movement",
    inputs=("input",),
    forward=_combinations,
    vjps=(_combinations_vjp,),
    check=_check_combinations,
    samples=lambda rng: [
        Sample((uniform(rng, (4,)),), {}, "pairs"),
        Sample((uniform(rng, (4,)),), {"r": 3}, "triples"),
        Sample((uniform(rng, (3,)),), {"r": 2, "with_replacement": True}, "with replacement"),
        Sample((uniform(rng, (3,)),), {"r": 1}, "r=1"),
        Sample((uniform(rng, (3,)),), {"r": 0}, "r=0: empty"),
        Sample((uniform(rng, (2,)),), {"r": 3}, "r past n: none"),
        Sample((uniform(rng, (8,))[::2],), {}, "non-contiguous (strided)"),
        Sample((uniform(rng, (0,)),), {}, "zero-size"),
    ],
    torch_ref=lambda torch, input, r=2, with_replacement=False: torch.combinations(input, r, with_replacement),
)


def _kron_shapes(input, other) -> tuple:
    """The shapes input and other take in the product: the lower rank padded with leading 1s, and the dims
    interleaved with 1s, (a0, 1, a1, 1, ...) and (1, b0, 1, b1, ...)."""
    require_dtype_of_input("kron", "other", other, input)
    n = max(input.ndim, other.ndim)
    a = (1,) * (n - input.ndim) + tuple(input.shape)
    b = (1,) * (n - other.ndim) + tuple(other.shape)
    return (
        tuple(k for d in a for k in (d, 1)),
        tuple(k for d in b for k in (1, d)),
        tuple(x * y for x, y in zip(a, b)),
    )


def _kron(input, other):
    """``torch.kron(input, other)``: the Kronecker product, out[i * b + j] = input[i] * other[j] along every dim
    (the lower rank padded with leading 1s)."""
    sa, sb, out = _kron_shapes(input, other)
    return np.reshape(np.reshape(input, sa) * np.reshape(other, sb), out)


def _kron_vjp(g, ans, input, other, *, needs):
    sa, sb, out = _kron_shapes(input, other)
    blocks = np.reshape(g, tuple(a * b for a, b in zip(sa, sb)))  # (a0, b0, a1, b1, ...)
    n = len(sa) // 2
    grad_input = np.sum(blocks * np.reshape(other, sb), axis=tuple(range(1, 2 * n, 2))) if needs[0] else None
    grad_other = np.sum(blocks * np.reshape(input, sa), axis=tuple(range(0, 2 * n, 2))) if needs[1] else None
    return (
        None if grad_input is None else np.reshape(grad_input, input.shape),
        None if grad_other is None else np.reshape(grad_other, other.shape),
    )


kron = defop(
    "kron",
    notes=case_law(_CASE_LAW, "kron"),
    method=True,
    family="movement",
    inputs=("input", "other"),
    forward=_kron,
    joint_vjp=_kron_vjp,
    check=lambda input, other: _kron_shapes(input, other),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3)), uniform(rng, (2, 2))), {}, "matrices"),
        Sample((uniform(rng, (2, 3)), uniform(rng, (4,))), {}, "ranks differ"),
        Sample((uniform(rng, (3,)), uniform(rng, (2, 1, 2))), {}, "ranks differ, the other way"),
        Sample((uniform(rng, ()), uniform(rng, (3,))), {}, "0-D"),
        Sample((transposed(rng, (2, 3)), transposed(rng, (2, 2))), {}, "non-contiguous"),
        Sample((uniform(rng, (2, 0)), uniform(rng, (3, 2))), {}, "zero-size"),
    ],
    # torch.kron refuses some strided inputs of unequal ranks (a .view inside it): the oracle gets contiguous copies
    torch_ref=lambda torch, input, other: torch.kron(input.contiguous(), other.contiguous()),
)


def _vander_powers(x, N, increasing) -> np.ndarray:
    if x.ndim != 1:
        raise ValueError(f"vander: argument 'x' expected a 1-D tensor, got shape {x.shape}")
    n = x.shape[0] if N is None else integer("vander", "N", N, at_least=0)
    require_bool("vander", "increasing", increasing)
    powers = np.arange(n)
    return powers if increasing else powers[::-1]


def _vander(x, N=None, increasing=False):
    """``torch.vander(x, N=None, increasing=False)``: the columns x**(N-1), ..., x**0 (``increasing``: x**0
    first); ``N`` defaults to len(x). Integer inputs stay integer (int64), as torch."""
    powers = _vander_powers(x, N, increasing)
    dtype = x.dtype if x.dtype.kind == "f" else np.int64
    return np.power(x[:, None].astype(dtype), powers.astype(dtype))


def _vander_vjp(g, ans, x, N=None, increasing=False):
    powers = _vander_powers(x, N, increasing)
    # d x**p / dx = p * x**(p - 1), written with x**max(p - 1, 0) so the p = 0 column (a constant) gives 0, not 0/0
    slopes = powers.astype(g.dtype) * np.power(np.reshape(x, (-1, 1)), np.maximum(powers - 1, 0).astype(g.dtype))
    return np.sum(g * slopes, axis=1)


vander = defop(
    "vander",
    notes=case_law(_CASE_LAW, "vander"),
    family="movement",
    inputs=("x",),
    forward=_vander,
    vjps=(_vander_vjp,),
    check=lambda x, N=None, increasing=False: _vander_powers(x, N, increasing),
    samples=lambda rng: [
        Sample((uniform(rng, (3,)),), {}, "square"),
        Sample((uniform(rng, (4,)),), {"N": 2, "increasing": True}, "increasing, fewer columns"),
        Sample((uniform(rng, (2,)),), {"N": 5}, "more columns"),
        Sample((uniform(rng, (2,)),), {"N": 0}, "no columns"),
        Sample((uniform(rng, (6,))[::2],), {"increasing": True}, "non-contiguous (strided)"),
        Sample((uniform(rng, (0,)),), {}, "zero-size"),
    ],
    # torch 2.13's vander raises in backward (its cumprod is written in place), so the oracle is its definition in
    # torch ops; tests/ops/test_movement.py checks the values against torch.vander itself
    torch_ref=lambda torch, x, N=None, increasing=False: torch.pow(
        x[:, None], torch.from_numpy(_vander_powers(x, N, increasing).copy()).to(x.dtype)
    ),
)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_flip(g, rec, input):
    shape = rec.inputs[0].shape
    dims = rec.attributes["dims"]
    axes = sorted({axis_of(int(d), len(shape)) for d in ((dims,) if isinstance(dims, int | np.integer) else dims)})
    if not shape or not axes:
        return g.op("Identity", input)
    big = np.iinfo(np.int64).max
    return g.op(
        "Slice", input, g.ints([-1] * len(axes)), g.ints([-big] * len(axes)), g.ints(axes), g.ints([-1] * len(axes))
    )


def _onnx_gathered(g, rec, input):
    return index_map(g, rec, input)


def _onnx_filled(g, rec, input):
    return index_map(g, rec, input, fill=0)


def _onnx_diag(g, rec, input):
    return index_map(g, rec, input, fill=0) if len(rec.inputs[0].shape) == 1 else index_map(g, rec, input)


def _onnx_pieces(g, rec, input):
    """split / chunk / unbind: one Slice per recorded piece (unbind's squeezed)."""
    shape = rec.inputs[0].shape
    axis = axis_of(int(rec.attributes.get("dim", 0)), len(shape))
    pieces, start = [], 0
    for spec in rec.output_specs:
        n = 1 if rec.op_name == "unbind" else spec.shape[axis]
        piece = g.op("Slice", input, g.ints([start]), g.ints([start + n]), g.ints([axis]))
        pieces.append(g.op("Squeeze", piece, g.ints([axis])) if rec.op_name == "unbind" else piece)
        start += n
    if not pieces:
        raise NotExportable("no pieces (an empty dim) has no lowering")
    return tuple(pieces)


def _onnx_meshgrid(g, rec, tensors):
    shape = rec.output_specs[0].shape
    if 0 in shape:
        raise NotExportable("an empty grid has no lowering")
    _, places = _grid_plan([np.empty(s.shape, np.int8) for s in rec.inputs], rec.attributes.get("indexing", "ij"))
    out = []
    for t, k in zip(tensors, places, strict=True):
        along = [1] * len(shape)
        along[k] = -1
        out.append(g.op("Expand", g.op("Reshape", t, g.ints(along)), g.ints(shape)))
    return tuple(out)


def _onnx_at_least(g, rec, tensors):
    """atleast_1d/2d/3d: each tensor reshaped to its recorded output shape."""
    specs = rec.output_specs
    out = tuple(g.op("Reshape", t, g.ints(s.shape), allowzero=1) for t, s in zip(tensors, specs, strict=True))
    return out[0] if len(out) == 1 else out


def _onnx_joined(g, rec, tensors):
    """hstack / vstack / dstack / column_stack / cartesian_prod: one Gather from the joined entries."""
    return index_map(g, rec, *tensors)


def _onnx_kron(g, rec, input, other):
    sa, sb, out = _kron_shapes(*(np.empty(s.shape, s.dtype) for s in rec.inputs))
    a, b = (g.op("Reshape", x, g.ints(s), allowzero=1) for x, s in ((input, sa), (other, sb)))
    return g.op("Reshape", g.op("Mul", a, b), g.ints(out), allowzero=1)


def _onnx_vander(g, rec, x):
    dtype = rec.output.dtype
    powers = _vander_powers(np.empty(rec.inputs[0].shape), rec.attributes.get("N"), rec.attributes["increasing"])
    column = g.op("Unsqueeze", cast_to(g, x, rec.inputs[0].dtype, dtype), g.ints([1]))
    return g.op("Pow", column, g.const(powers.astype(dtype)))


lowering(flip, _onnx_flip)
for _op in (fliplr, flipud, rot90, combinations, tensor_split, hsplit, vsplit, dsplit):
    lowering(_op, _onnx_gathered)
lowering(diagonal_scatter, lambda g, rec, input, src: index_map(g, rec, input, src))
for _op in (atleast_1d, atleast_2d, atleast_3d):
    lowering(_op, _onnx_at_least)
for _op in (hstack, vstack, dstack, column_stack, cartesian_prod):
    lowering(_op, _onnx_joined)
lowering(block_diag, lambda g, rec, tensors: index_map(g, rec, *tensors, fill=0))
lowering(kron, _onnx_kron)
lowering(vander, _onnx_vander)
for _op in (roll, tile, repeat_interleave, diagonal, unfold_copy):
    lowering(_op, _onnx_gathered)
lowering(diag_embed, _onnx_filled)
lowering(diag, _onnx_diag)
for _op in (split, chunk, unbind):
    lowering(_op, _onnx_pieces)
lowering(meshgrid, _onnx_meshgrid)
