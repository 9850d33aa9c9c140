"""Shape ops: views, rearrangements, joins, slices, pads and tiles, with torch 2.13 semantics. The indexing
ops (getitem, gather, index_select and the scatters) live in ops/indexing.py.

Every backward routes the gradient back to the positions the forward read it from: a reshape back, a
broadcast summed, a narrow or constant pad undone by the opposite pad (``pad(g, -pad)``), a tile summed
over its copies, a reflect/replicate/circular pad *added* back with ``index_add`` (positions read twice
get both gradients). Each rule is written with numpy functions that map to registered ops or, where it
scatters, calls the scatter op when given Tensors (``create_graph=True``) and its numpy kernel when given
arrays, so every op here is differentiable twice.

``concat`` (alias ``cat``) and ``stack`` take any number of tensors as one sequence input, like
``torch.cat(tensors, dim=0)``; as in torch, ``concat`` skips 1-D empty tensors (shape (0,)) whatever the
other tensors' shapes. ``repeat(input, repeats)`` is ``Tensor.repeat``: ``repeats`` is a tuple (or one int);
``broadcast_to`` is ``expand``. The ops with a variable number of outputs (split, chunk, unbind, meshgrid) are in
ops/movement.py.
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
]

import math

import numpy as np

from tape.broadcast import unbroadcast
from tape.onnx import lowering
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop

from . import _numpy
from ._onnx import NotExportable, axis_of
from ._samples import transposed, uniform
from ._validation import normalize_dim, normalize_dims
from .indexing import _index_add_into, index_add


def _ints(op: str, argument: str, value) -> tuple:
    """``value`` (an int or a sequence of ints) as a tuple of Python ints."""
    items = (value,) if isinstance(value, int | np.integer) else value
    try:
        items = tuple(items)
    except TypeError:
        raise TypeError(
            f"{op}: argument '{argument}' expected an int or a sequence of ints, got {type(value).__name__} {value!r}"
        ) from None
    for v in items:
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise TypeError(f"{op}: argument '{argument}' expected ints, got {type(v).__name__} {v!r} in {value!r}")
    return tuple(int(v) for v in items)


def _reshape_back(g, ans, input, *args, **attrs):
    return np.reshape(g, input.shape)


# -- reshape / flatten / squeeze / unsqueeze ---------------------------------------------------------------
def _reshape(input, shape):
    shape = _ints("reshape", "shape", shape)
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
    torch_ref=lambda torch, input, shape: torch.reshape(input, _ints("reshape", "shape", shape)),
    numpy={np.reshape: _numpy.reshape},
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
)


def _squeeze(input, dim=None):
    dims = normalize_dims("squeeze", None if dim is None else _ints("squeeze", "dim", dim), input.ndim)
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
)


# -- transpose / permute -----------------------------------------------------------------------------------
def _transpose(input, dim0=-2, dim1=-1):
    if input.ndim == 0:  # torch: dims in [-1, 0] swap a 0-D tensor with itself
        normalize_dim("transpose", dim0, 0, "dim0"), normalize_dim("transpose", dim1, 0, "dim1")
        return input
    return np.swapaxes(
        input,
        normalize_dim("transpose", dim0, input.ndim, "dim0"),
        normalize_dim("transpose", dim1, input.ndim, "dim1"),
    )


transpose = defop(
    "transpose",
    family="shape",
    inputs=("input",),
    forward=_transpose,
    vjps=(lambda g, ans, input, dim0=-2, dim1=-1: _transpose(g, dim0, dim1),),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3)),), {"dim0": 0, "dim1": 1}),
        Sample((uniform(rng, (2, 3, 4)),), {"dim0": -1, "dim1": 0}),
        Sample((uniform(rng, (2, 3, 4)),), {"dim0": 1, "dim1": 1}, "same dim"),
        Sample((transposed(rng, (2, 1, 3)),), {"dim0": 0, "dim1": -2}, "non-contiguous"),
        Sample((uniform(rng, (0, 3)),), {"dim0": 0, "dim1": 1}, "zero-size"),
        Sample((uniform(rng, ()),), {"dim0": 0, "dim1": -1}, "0-D"),
    ],
    torch_ref=lambda torch, input, dim0=-2, dim1=-1: torch.transpose(input, dim0, dim1),
    method=True,
    numpy={np.swapaxes: _numpy.swapaxes},
)


def _permutation(x, dims):
    dims = tuple(normalize_dim("permute", d, x.ndim, "dims") for d in _ints("permute", "dims", dims))
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
)


# -- expand / broadcast_to ---------------------------------------------------------------------------------
def _expanded_shape(x, shape) -> tuple:
    """torch's expand: new leading dims of any size; -1 keeps a dim; a dim may only grow from size 1."""
    shape = _ints("expand", "shape", shape)
    lead = len(shape) - x.ndim
    if lead < 0:
        raise ValueError(f"expand: argument 'shape' expected at least {x.ndim} sizes for input {x.shape}, got {shape}")
    out = []
    for i, size in enumerate(shape):
        old = x.shape[i - lead] if i >= lead else None
        if size == -1 and old is not None:
            size = old
        if size < 0 or (old is not None and old != 1 and size != old):
            where = "a new leading dim" if old is None else f"a dim of size {old}"
            raise ValueError(
                f"expand: argument 'shape' expected sizes matching input {x.shape} (only size-1 dims "
                f"grow), got {shape}: {size} for {where}"
            )
        out.append(size)
    return tuple(out)


expand = defop(
    "expand",
    family="shape",
    inputs=("input",),
    forward=lambda input, shape: np.broadcast_to(input, _expanded_shape(input, shape)),
    vjps=(lambda g, ans, input, shape: unbroadcast(g, input.shape),),
    samples=lambda rng: [
        Sample((uniform(rng, (3, 1)),), {"shape": (2, 3, 4)}, "new dim + size-1 dim"),
        Sample((uniform(rng, (3, 1)),), {"shape": (-1, 4)}, "-1 keeps"),
        Sample((uniform(rng, ()),), {"shape": (2, 3)}, "scalar"),
        Sample((uniform(rng, (2, 3)),), {"shape": (2, 3)}, "same shape"),
        Sample((transposed(rng, (1, 3)),), {"shape": (2, 3, -1, 3)}, "non-contiguous"),
        Sample((uniform(rng, (1, 3)),), {"shape": (0, 3)}, "size-1 dim to 0"),
        Sample((uniform(rng, (0, 1)),), {"shape": (2, 0, 4)}, "zero-size"),
    ],
    torch_ref=lambda torch, input, shape: input.expand(*_ints("expand", "shape", shape)),
    numpy={np.broadcast_to: _numpy.broadcast_to, np.full_like: _numpy.full_like},
)

broadcast_to = expand  # torch.broadcast_to(input, size) is Tensor.expand


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


def _concat(tensors, dim=0):
    """``torch.cat(tensors, dim=0)``: join any number of tensors along an existing ``dim``."""
    axis = _check_join("concat", tensors, dim, False)
    kept = [t for t in tensors if not _skipped(t)]
    return np.concatenate(kept, axis=axis) if kept else np.concatenate(tensors)


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


concat = defop(
    "concat",
    family="shape",
    inputs=("*tensors",),
    forward=_concat,
    joint_vjp=_concat_vjp,
    samples=_join_samples(False),
    torch_ref=lambda torch, tensors, dim=0: torch.cat(tensors, dim=dim),
    numpy={np.concatenate: _numpy.concatenate},
)
cat = concat


def _stack(tensors, dim=0):
    """``torch.stack(tensors, dim=0)``: join any number of same-shape tensors along a new ``dim``."""
    return np.stack(tensors, axis=_check_join("stack", tensors, dim, True))


def _stack_vjp(g, ans, tensors, *, needs, dim=0):
    axis = normalize_dim("stack", dim, g.ndim)
    return ([g[(slice(None),) * axis + (i,)] if need else None for i, need in enumerate(needs[0])],)


stack = defop(
    "stack",
    family="shape",
    inputs=("*tensors",),
    forward=_stack,
    joint_vjp=_stack_vjp,
    samples=_join_samples(True),
    torch_ref=lambda torch, tensors, dim=0: torch.stack(tensors, dim=dim),
    numpy={np.stack: _numpy.stack},
)


# -- narrow ----------------------------------------------------------------------------------------------------
def _narrow_index(x, dim, start, length) -> tuple:
    if x.ndim == 0:
        raise ValueError("narrow: argument 'input' expected a tensor with at least 1 dim, got a 0-D tensor")
    axis = normalize_dim("narrow", dim, x.ndim)
    size = x.shape[axis]
    start, length = _ints("narrow", "start", start), _ints("narrow", "length", length)
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
)


# -- pad ---------------------------------------------------------------------------------------------------
_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _pad_widths(x, pad, mode) -> list:
    """[(axis, before, after)] from torch's pad tuple (last dim first), validated as torch does."""
    pad = _ints("pad", "pad", pad)
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
        fill = 0 if value is None else value
        return np.pad(x[tuple(crop)], grow, constant_values=np.asarray(fill).astype(x.dtype))
    for axis, before, after in widths:
        x = np.take(x, _source_positions(x.shape[axis], before, after, mode), axis=axis)
    return x


def _pad_vjp(g, ans, input, pad, mode="constant", value=None):
    return _pad_back(g, input, pad, mode)


def _pad_back(g, input, pads, mode):
    widths = _pad_widths(input, pads, mode)
    if mode == "constant":  # the opposite pad crops what was added and puts zeros where it cropped
        opposite = tuple(-p for p in _ints("pad", "pad", pads))
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
        if isinstance(diagonal, bool) or not isinstance(diagonal, int | np.integer):
            raise TypeError(f"{name}: argument 'diagonal' expected an int, got {type(diagonal).__name__}")
        return np_fn(input, k=diagonal)

    return defop(
        name,
        family="shape",
        inputs=("input",),
        forward=forward,
        vjps=(lambda g, ans, input, diagonal=0: np_fn(g, k=diagonal),),
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


tril = _triangle("tril", np.tril, method=True, numpy={np.tril: _numpy.triangle("tril")})
triu = _triangle("triu", np.triu, method=True, numpy={np.triu: _numpy.triangle("triu")})


# -- masked_fill -------------------------------------------------------------------------------------------
def _check_masked_fill(input, mask, value):
    if mask.dtype != np.bool_:
        raise TypeError(f"masked_fill: argument 'mask' expected a bool tensor, got dtype {mask.dtype}")
    try:
        np.broadcast_shapes(input.shape, mask.shape)
    except ValueError:
        raise ValueError(
            f"masked_fill: argument 'mask' expected a shape broadcastable with input {input.shape}, got {mask.shape}"
        ) from None
    if getattr(value, "requires_grad", False):
        raise TypeError(
            "masked_fill: argument 'value' is a constant; it got a tensor that requires grad, whose "
            "gradient would be lost (fill with ops.where-style arithmetic instead)"
        )
    if np.ndim(value) != 0 or np.asarray(value).dtype.kind not in "biuf":
        raise TypeError(f"masked_fill: argument 'value' expected a number, got {value!r}")


def _masked_fill(input, mask, value):
    return np.where(mask, np.asarray(value).astype(input.dtype), input)


masked_fill = defop(
    "masked_fill",
    family="shape",
    inputs=("input", "mask"),
    forward=_masked_fill,
    check=_check_masked_fill,
    vjps=(lambda g, ans, input, mask, value: unbroadcast(np.where(mask, 0, g), input.shape), NOT_DIFFERENTIABLE),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3)), rng.uniform(size=(2, 3)) > 0.5), {"value": -1.0}),
        Sample((uniform(rng, (2, 3, 4)), rng.uniform(size=(3, 1)) > 0.5), {"value": 2.0}, "broadcast mask"),
        Sample((uniform(rng, (3,)), rng.uniform(size=(2, 3)) > 0.5), {"value": 0.0}, "mask enlarges"),
        Sample((transposed(rng, (3, 4)), np.tril(np.ones((3, 4), bool))), {"value": -5.0}, "non-contiguous, causal"),
        Sample((uniform(rng, (0, 3)), np.array([True, False, True])), {"value": 1.0}, "zero-size"),
    ],
    torch_ref=lambda torch, input, mask, value: torch.masked_fill(input, mask, value),
    method=True,
)


# -- repeat ------------------------------------------------------------------------------------------------
def _repeat_shapes(x, repeats):
    repeats = _ints("repeat", "repeats", repeats)
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
    torch_ref=lambda torch, input, repeats: input.repeat(*_ints("repeat", "repeats", repeats)),
)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_reshape(g, rec, input):
    """Reshape to the recorded output shape; a leading dim equal to the input's is written 0 (ONNX: copy it), so
    a model exported with a dynamic batch axis reshapes any batch."""
    have, want = rec.inputs[0].shape, rec.output.shape
    dims, copying = [], True
    for k, n in enumerate(want):
        copying = copying and k < len(have) and have[k] == n and n != 0
        dims.append(0 if copying else n)
    if 0 in want:
        raise NotExportable("an empty output shape has no lowering")
    return g.op("Reshape", input, g.ints(dims))


def _onnx_transpose(g, rec, input):
    ndim = len(rec.inputs[0].shape)
    if ndim == 0:
        return g.op("Identity", input)
    perm = list(range(ndim))
    a, b = axis_of(rec.attributes.get("dim0", -2), ndim), axis_of(rec.attributes.get("dim1", -1), ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return g.op("Transpose", input, perm=perm)


def _onnx_permute(g, rec, input):
    ndim = len(rec.inputs[0].shape)
    return g.op("Transpose", input, perm=[axis_of(int(d), ndim) for d in rec.attributes["dims"]])


def _onnx_squeeze(g, rec, input):
    have, want = rec.inputs[0].shape, rec.output.shape
    return g.op("Reshape", input, g.ints(want)) if have != want else g.op("Identity", input)


def _onnx_unsqueeze(g, rec, input):
    ndim = len(rec.inputs[0].shape)
    return g.op("Unsqueeze", input, g.ints([axis_of(int(rec.attributes["dim"]), ndim + 1)]))


def _onnx_concat(g, rec, tensors):
    ndim = len(rec.output.shape)
    if any(len(s.shape) != ndim or 0 in s.shape for s in rec.inputs):
        raise NotExportable("joining empty tensors has no lowering")
    return g.op("Concat", *tensors, axis=axis_of(int(rec.attributes.get("dim", 0)), ndim))


def _onnx_expand(g, rec, input):
    return g.op("Expand", input, g.ints(rec.output.shape))


lowering(reshape, _onnx_reshape)
lowering(transpose, _onnx_transpose)
lowering(permute, _onnx_permute)
lowering(squeeze, _onnx_squeeze)
lowering(unsqueeze, _onnx_unsqueeze)
lowering(concat, _onnx_concat)
lowering(expand, _onnx_expand)
