"""Movement ops: reorder, repeat, window and re-embed the entries of a tensor without arithmetic, with torch 2.13
semantics (names, signatures, argument checks).

Registered ops (family "movement"), each differentiable twice. One output each: flip, roll, tile,
repeat_interleave, diagonal, diag_embed, diag, unfold_copy. A variable number of outputs (``outputs="variable"``:
a tuple of Tensors, views of the input as in torch; one backward rule receives every output's gradient, zeros
standing in for the outputs that got none, so k pieces cost one gradient of the input's size): split, chunk,
unbind, meshgrid. Each op's signature and torch conventions are its notes (``_CASE_LAW``).

These rules use np.concatenate / np.stack / np.sum / np.reshape, which trace on Tensors (differentiable twice).
A 0-D input to split/chunk/unbind is refused, as in torch. A case with no outputs (unbind or ``split(x, [])`` of
an empty dim) has nothing to differentiate and is checked in tests/test_ops_movement.py.

None of these ops has a kink: every backward is exact (a permutation, copy or sum of the incoming gradient).
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
]

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tape.registry import Sample, defop

from . import _numpy
from ._notes import case_law
from ._samples import transposed, uniform
from ._validation import normalize_dim
from .indexing import index_add
from .shape import pad

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
)


# -- argument helpers --------------------------------------------------------------------------------------
def _int(op: str, argument: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{op}: argument '{argument}' expected an int, got {type(value).__name__} {value!r}")
    return int(value)


def _int_tuple(op: str, argument: str, value) -> tuple:
    """``value`` (an int or a sequence of ints) as a tuple of Python ints."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return (int(value),)
    if not isinstance(value, tuple | list):
        raise TypeError(
            f"{op}: argument '{argument}' expected an int or a sequence of ints, got {type(value).__name__} {value!r}"
        )
    return tuple(_int(op, argument, v) for v in value)


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
        if _int("repeat_interleave", "output_size", output_size) != total:
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
    _int(op, "offset", offset)
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
    _int("diag", "diagonal", diagonal)
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
    size, step = _int("unfold_copy", "size", size), _int("unfold_copy", "step", step)
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
    chunks = _int("chunk", "chunks", chunks)
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


split = defop(
    "split",
    family="movement",
    inputs=("tensor",),
    forward=_split,
    joint_vjp=_split_vjp,
    outputs="variable",
    check=lambda tensor, split_size_or_sections, dim=0: _split_plan(tensor, split_size_or_sections, dim),
    samples=_split_samples,
    torch_ref=lambda torch, tensor, split_size_or_sections, dim=0: torch.split(tensor, split_size_or_sections, dim),
    method=True,
    notes=case_law(_CASE_LAW, "split"),
)


def _chunk(input, chunks, dim=0):
    """``torch.chunk(input, chunks, dim=0)``: ``split`` into views of ceil(size / chunks) entries, so possibly
    fewer than ``chunks`` of them; an empty dim gives ``chunks`` empty pieces."""
    return _cut(input, *_chunk_plan(input, chunks, dim))


def _chunk_vjp(g, ans, input, *, needs, chunks, dim=0):
    return (_concatenated_back(g, ans, input, dim),)


chunk = defop(
    "chunk",
    family="movement",
    inputs=("input",),
    forward=_chunk,
    joint_vjp=_chunk_vjp,
    outputs="variable",
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
    method=True,
    notes=case_law(_CASE_LAW, "chunk"),
)


def _unbind(input, dim=0):
    """``torch.unbind(input, dim=0)``: the views ``input.select(dim, i)`` for every i (none for an empty dim)."""
    axis, size = _split_axis("unbind", input, dim, "input")
    return tuple(input[(slice(None),) * axis + (i, Ellipsis)] for i in range(size))  # 0-D views, not scalars


def _unbind_vjp(g, ans, input, *, needs, dim=0):
    return (np.stack(_filled(g, ans), axis=dim % np.ndim(input)),)


unbind = defop(
    "unbind",
    family="movement",
    inputs=("input",),
    forward=_unbind,
    joint_vjp=_unbind_vjp,
    outputs="variable",
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
    method=True,
    notes=case_law(_CASE_LAW, "unbind"),
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
