"""Shape ops: views, rearrangements, joins, slices, gathers and pads, with torch 2.13 semantics.

Every backward routes the gradient back to the positions the forward read it from: a reshape back, a
broadcast summed, a slice scattered into zeros, a gather scatter-*added* (repeated indices accumulate).

Index inputs (``gather``/``index_select``'s ``index``) and masks (``masked_fill``'s ``mask``) are integer
or bool *tensor inputs* marked NOT_DIFFERENTIABLE, so the tape records them as graph edges. The ops take
``(input, index, dim=)``; the public ``gather``/``index_select`` keep torch's order ``(input, dim, index)``.

Variable numbers of tensors (``concat``/``cat``, ``stack``): a registered op has a fixed list of tensor
inputs, so each is ONE op with ``MAX_JOINED`` inputs of which all but the first are optional
(``tensor0, tensor1?, ...``); absent ones are None and never reach a rule. The public functions
``concat(tensors, dim)`` and ``stack(tensors, dim)`` take any number of tensors: up to ``MAX_JOINED`` they
are one recorded op; beyond, they join groups of ``MAX_JOINED`` and then join the groups (a shallow tree:
two levels up to 64 tensors), which keeps one op name on the tape and one set of samples to check.
``split`` and ``chunk`` return tuples of ``narrow`` views; ``repeat`` and ``broadcast_to`` are thin public
functions over the ``repeat`` and ``expand`` ops.
"""

__all__ = ['reshape', 'flatten', 'squeeze', 'unsqueeze', 'transpose', 'permute', 'expand', 'broadcast_to',
           'concat', 'cat', 'stack', 'narrow', 'split', 'chunk', 'getitem', 'gather', 'index_select', 'pad',
           'tril', 'triu', 'masked_fill', 'repeat', 'MAX_JOINED']

import inspect
import math

import numpy as np

from tape.broadcast import unbroadcast
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop

from ._samples import transposed, uniform
from ._validation import normalize_dim, normalize_dims, require_integer


def _ints(op: str, argument: str, value) -> tuple:
    """``value`` (an int or a sequence of ints) as a tuple of Python ints."""
    items = (value,) if isinstance(value, int | np.integer) else value
    try:
        items = tuple(items)
    except TypeError:
        raise TypeError(f"{op}: argument '{argument}' expected an int or a sequence of ints, got "
                        f"{type(value).__name__} {value!r}") from None
    for v in items:
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise TypeError(f"{op}: argument '{argument}' expected ints, got {type(v).__name__} {v!r} in {value!r}")
    return tuple(int(v) for v in items)


def _sizes_or_sequence(args) -> object:
    """``f(x, 2, 3)`` and ``f(x, (2, 3))`` both mean the sizes (2, 3), as in torch's Tensor methods."""
    return args[0] if len(args) == 1 and not isinstance(args[0], int | np.integer) else args


def _reshape_back(g, ans, x, *args, **attrs):
    return g.reshape(x.shape)


# -- reshape / flatten / squeeze / unsqueeze ---------------------------------------------------------------
def _reshape(x, shape):
    shape = _ints("reshape", "shape", shape)
    try:
        return x.reshape(shape)
    except ValueError:
        raise ValueError(f"reshape: argument 'shape' expected a shape with {x.size} elements for input "
                         f"{x.shape}, got {shape}") from None


reshape = defop("reshape", family="shape", inputs=("x",), forward=_reshape, vjps=(_reshape_back,),
                samples=lambda rng: [Sample((uniform(rng, (2, 3, 4)),), {"shape": (6, 4)}),
                                     Sample((uniform(rng, (2, 3, 4)),), {"shape": (4, -1)}, "-1"),
                                     Sample((transposed(rng, (3, 4)),), {"shape": (12,)}, "non-contiguous"),
                                     Sample((uniform(rng, ()),), {"shape": (1, 1)}, "scalar"),
                                     Sample((uniform(rng, (1, 3)),), {"shape": 3}, "int shape")],
                torch_ref=lambda torch, x, shape: torch.reshape(x, _ints("reshape", "shape", shape)))


def _flat_shape(x, start_dim, end_dim):
    if x.ndim == 0:
        normalize_dim("flatten", start_dim, 0, "start_dim")
        normalize_dim("flatten", end_dim, 0, "end_dim")
        return (1,)
    start = normalize_dim("flatten", start_dim, x.ndim, "start_dim")
    end = normalize_dim("flatten", end_dim, x.ndim, "end_dim")
    if start > end:
        raise ValueError(f"flatten: argument 'start_dim' expected a dim not after end_dim ({end_dim}), got "
                         f"{start_dim} for a {x.ndim}-D input")
    return x.shape[:start] + (math.prod(x.shape[start:end + 1]),) + x.shape[end + 1:]


flatten = defop("flatten", family="shape", inputs=("x",),
                forward=lambda x, start_dim=0, end_dim=-1: x.reshape(_flat_shape(x, start_dim, end_dim)),
                vjps=(_reshape_back,),
                samples=lambda rng: [Sample((uniform(rng, (2, 3, 4)),), {"start_dim": 0, "end_dim": -1}, "all"),
                                     Sample((uniform(rng, (2, 3, 4)),), {"start_dim": 1, "end_dim": 2}),
                                     Sample((uniform(rng, (2, 1, 3, 2)),), {"start_dim": -3, "end_dim": -2}),
                                     Sample((transposed(rng, (2, 3, 2)),), {"start_dim": 0, "end_dim": 1},
                                            "non-contiguous"),
                                     Sample((uniform(rng, (2, 3)),), {"start_dim": 1, "end_dim": 1}, "one dim"),
                                     Sample((uniform(rng, ()),), {"start_dim": 0, "end_dim": -1}, "scalar")],
                torch_ref=lambda torch, x, start_dim=0, end_dim=-1: torch.flatten(x, start_dim, end_dim))


def _squeeze(x, dim=None):
    dims = normalize_dims("squeeze", None if dim is None else _ints("squeeze", "dim", dim), x.ndim)
    return np.squeeze(x, axis=tuple(d for d in dims if x.shape[d] == 1))


squeeze = defop("squeeze", family="shape", inputs=("x",), forward=_squeeze, vjps=(_reshape_back,),
                samples=lambda rng: [Sample((uniform(rng, (1, 3, 1, 2)),), {"dim": None}, "all"),
                                     Sample((uniform(rng, (1, 3, 1, 2)),), {"dim": -2}),
                                     Sample((uniform(rng, (1, 3, 1, 2)),), {"dim": 1}, "not size 1: no-op"),
                                     Sample((uniform(rng, (1, 3, 1, 2)),), {"dim": (0, -2)}, "tuple"),
                                     Sample((transposed(rng, (2, 1, 3)),), {"dim": 1}, "non-contiguous")],
                torch_ref=lambda torch, x, dim=None: torch.squeeze(x) if dim is None else torch.squeeze(x, dim))


def _unsqueeze(x, dim):
    return np.expand_dims(x, normalize_dim("unsqueeze", dim, x.ndim + 1))


unsqueeze = defop("unsqueeze", family="shape", inputs=("x",), forward=_unsqueeze, vjps=(_reshape_back,),
                  samples=lambda rng: [Sample((uniform(rng, (2, 3)),), {"dim": 0}),
                                       Sample((uniform(rng, (2, 3)),), {"dim": 2}, "after the last"),
                                       Sample((uniform(rng, (2, 3)),), {"dim": -1}),
                                       Sample((uniform(rng, (2, 3)),), {"dim": -3}),
                                       Sample((uniform(rng, ()),), {"dim": 0}, "scalar"),
                                       Sample((transposed(rng, (3, 4)),), {"dim": 1}, "non-contiguous")],
                  torch_ref=lambda torch, x, dim: torch.unsqueeze(x, dim))


# -- transpose / permute -----------------------------------------------------------------------------------
def _transpose(x, dim0=-2, dim1=-1):
    return np.swapaxes(x, normalize_dim("transpose", dim0, x.ndim, "dim0"),
                       normalize_dim("transpose", dim1, x.ndim, "dim1"))


transpose = defop("transpose", family="shape", inputs=("x",), forward=_transpose,
                  vjps=(lambda g, ans, x, dim0=-2, dim1=-1: _transpose(g, dim0, dim1),),
                  samples=lambda rng: [Sample((uniform(rng, (2, 3)),), {"dim0": 0, "dim1": 1}),
                                       Sample((uniform(rng, (2, 3, 4)),), {"dim0": -1, "dim1": 0}),
                                       Sample((uniform(rng, (2, 3, 4)),), {"dim0": 1, "dim1": 1}, "same dim"),
                                       Sample((transposed(rng, (2, 1, 3)),), {"dim0": 0, "dim1": -2},
                                              "non-contiguous")],
                  torch_ref=lambda torch, x, dim0=-2, dim1=-1: torch.transpose(x, dim0, dim1))


def _permutation(x, dims):
    dims = tuple(normalize_dim("permute", d, x.ndim, "dims") for d in _ints("permute", "dims", dims))
    if sorted(dims) != list(range(x.ndim)):
        raise ValueError(f"permute: argument 'dims' expected a permutation of {x.ndim} dims, got {dims}")
    return dims


permute = defop("permute", family="shape", inputs=("x",),
                forward=lambda x, dims: np.transpose(x, _permutation(x, dims)),
                vjps=(lambda g, ans, x, dims: np.transpose(g, np.argsort(_permutation(x, dims))),),
                samples=lambda rng: [Sample((uniform(rng, (2, 3, 4)),), {"dims": (2, 0, 1)}),
                                     Sample((uniform(rng, (2, 3)),), {"dims": (-1, 0)}),
                                     Sample((transposed(rng, (2, 1, 3)),), {"dims": (1, -1, 0)}, "non-contiguous")],
                torch_ref=lambda torch, x, dims: torch.permute(x, dims))


# -- expand / broadcast_to ---------------------------------------------------------------------------------
def _expanded_shape(x, shape) -> tuple:
    """torch's expand: new leading dims of any size; -1 keeps a dim; a dim may only grow from size 1."""
    shape = _ints("expand", "shape", shape)
    lead = len(shape) - x.ndim
    if lead < 0:
        raise ValueError(f"expand: argument 'shape' expected at least {x.ndim} sizes for input {x.shape}, got "
                         f"{shape}")
    out = []
    for i, size in enumerate(shape):
        old = x.shape[i - lead] if i >= lead else None
        if size == -1 and old is not None:
            size = old
        if size < 0 or (old is not None and old != 1 and size != old):
            where = "a new leading dim" if old is None else f"a dim of size {old}"
            raise ValueError(f"expand: argument 'shape' expected sizes matching input {x.shape} (only size-1 dims "
                             f"grow), got {shape}: {size} for {where}")
        out.append(size)
    return tuple(out)


expand = defop("expand", family="shape", inputs=("x",),
               forward=lambda x, shape: np.broadcast_to(x, _expanded_shape(x, shape)),
               vjps=(lambda g, ans, x, shape: unbroadcast(g, x.shape),),
               samples=lambda rng: [Sample((uniform(rng, (3, 1)),), {"shape": (2, 3, 4)}, "new dim + size-1 dim"),
                                    Sample((uniform(rng, (3, 1)),), {"shape": (-1, 4)}, "-1 keeps"),
                                    Sample((uniform(rng, ()),), {"shape": (2, 3)}, "scalar"),
                                    Sample((uniform(rng, (2, 3)),), {"shape": (2, 3)}, "same shape"),
                                    Sample((transposed(rng, (1, 3)),), {"shape": (2, 3, -1, 3)},
                                           "non-contiguous")],
               torch_ref=lambda torch, x, shape: x.expand(*_ints("expand", "shape", shape)))


def broadcast_to(x, shape):
    """``torch.broadcast_to``: the same as ``expand(x, shape)`` (recorded as an ``expand`` op)."""
    return expand(x, shape)


# -- variadic joins: concat / stack ------------------------------------------------------------------------
MAX_JOINED = 8
_JOIN_INPUTS = ("tensor0",) + tuple(f"tensor{i}?" for i in range(1, MAX_JOINED))


def _with_join_signature(forward):
    """Give a ``forward(*tensors, dim)`` the explicit signature the registry reads: MAX_JOINED tensor
    parameters (all but the first defaulting to None) and the keyword attribute ``dim``."""
    P = inspect.Parameter
    params = [P(name.rstrip("?"), P.POSITIONAL_OR_KEYWORD, default=P.empty if i == 0 else None)
              for i, name in enumerate(_JOIN_INPUTS)]
    forward.__signature__ = inspect.Signature(params + [P("dim", P.KEYWORD_ONLY, default=0)])
    return forward


def _present(tensors) -> list:
    return [t for t in tensors if t is not None]


def _check_join(op, tensors, dim, stacking):
    tensors = _present(tensors)
    first = tensors[0]
    if not stacking and first.ndim == 0:
        raise ValueError(f"{op}: argument 'tensors' expected tensors with at least 1 dim, got a 0-D tensor")
    axis = normalize_dim(op, dim, first.ndim + 1 if stacking else first.ndim)
    for i, t in enumerate(tensors[1:], 1):
        if t.dtype != first.dtype:
            raise TypeError(f"{op}: argument 'tensors' expected one dtype, got {first.dtype} (tensor 0) and "
                            f"{t.dtype} (tensor {i})")
        same = t.shape == first.shape if stacking else (
            t.ndim == first.ndim and all(a == b for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != axis))
        if not same:
            rule = "the same shape" if stacking else f"the same shape except in dim {dim}"
            raise ValueError(f"{op}: argument 'tensors' expected {rule}, got {first.shape} (tensor 0) and {t.shape} "
                             f"(tensor {i})")
    return axis


def _concat_forward(*tensors, dim=0):
    return np.concatenate(_present(tensors), axis=_check_join("concat", tensors, dim, False))


def _concat_rule(position):
    def rule(g, ans, *tensors, dim=0):
        axis = normalize_dim("concat", dim, g.ndim)
        start = sum(t.shape[axis] for t in tensors[:position])
        return g[(slice(None),) * axis + (slice(start, start + tensors[position].shape[axis]),)]
    return rule


def _join_samples(stacking):
    def generate(rng):
        def some(*shapes):
            return tuple(uniform(rng, s) for s in shapes)
        if stacking:
            return [Sample(some((2, 3), (2, 3)), {"dim": 0}, "2 tensors"),
                    Sample(some((2, 3), (2, 3), (2, 3)), {"dim": -1}, "3 tensors, dim -1"),
                    Sample(some((2, 1), (2, 1), (2, 1)), {"dim": 1}, "size-1 dims"),
                    Sample((transposed(rng, (2, 3)), uniform(rng, (2, 3))), {"dim": -2}, "non-contiguous"),
                    Sample(some(*[(3,)] * MAX_JOINED), {"dim": 0}, f"{MAX_JOINED} tensors"),
                    Sample(some(()), {"dim": 0}, "one scalar")]
        return [Sample(some((2, 3), (1, 3)), {"dim": 0}, "2 tensors"),
                Sample(some((2, 3), (2, 1), (2, 2)), {"dim": -1}, "3 tensors, dim -1, unequal"),
                Sample((transposed(rng, (2, 3)), uniform(rng, (3, 3))), {"dim": -2}, "non-contiguous"),
                Sample(some((2, 1, 2), (2, 3, 2)), {"dim": 1}, "size-1 dim"),
                Sample(some(*[(1, 2)] * MAX_JOINED), {"dim": 0}, f"{MAX_JOINED} tensors"),
                Sample(some((4,)), {"dim": 0}, "one tensor")]
    return generate


_concat_op = defop("concat", family="shape", inputs=_JOIN_INPUTS, forward=_with_join_signature(_concat_forward),
                   vjps=tuple(_concat_rule(i) for i in range(MAX_JOINED)), samples=_join_samples(False),
                   torch_ref=lambda torch, *tensors, dim=0: torch.cat(_present(tensors), dim=dim))


def _stack_forward(*tensors, dim=0):
    return np.stack(_present(tensors), axis=_check_join("stack", tensors, dim, True))


def _stack_rule(position):
    def rule(g, ans, *tensors, dim=0):
        return g[(slice(None),) * normalize_dim("stack", dim, g.ndim) + (position,)]
    return rule


_stack_op = defop("stack", family="shape", inputs=_JOIN_INPUTS, forward=_with_join_signature(_stack_forward),
                  vjps=tuple(_stack_rule(i) for i in range(MAX_JOINED)), samples=_join_samples(True),
                  torch_ref=lambda torch, *tensors, dim=0: torch.stack(_present(tensors), dim=dim))


def _tensor_list(op, tensors) -> list:
    if not isinstance(tensors, list | tuple):
        raise TypeError(f"{op}: argument 'tensors' expected a list or tuple of tensors, got {type(tensors).__name__}")
    if not tensors:
        raise ValueError(f"{op}: argument 'tensors' expected a non-empty list of tensors, got an empty one")
    return list(tensors)


def concat(tensors, dim=0):
    """``torch.cat``: join any number of tensors along an existing ``dim``."""
    tensors = _tensor_list("concat", tensors)
    if len(tensors) <= MAX_JOINED:
        return _concat_op(*tensors, dim=dim)
    groups = [_concat_op(*tensors[i:i + MAX_JOINED], dim=dim) for i in range(0, len(tensors), MAX_JOINED)]
    return concat(groups, dim)


cat = concat


def stack(tensors, dim=0):
    """``torch.stack``: join any number of same-shape tensors along a new ``dim``."""
    tensors = _tensor_list("stack", tensors)
    if len(tensors) <= MAX_JOINED:
        return _stack_op(*tensors, dim=dim)
    return concat([_stack_op(*tensors[i:i + MAX_JOINED], dim=dim) for i in range(0, len(tensors), MAX_JOINED)], dim)


# -- narrow / split / chunk --------------------------------------------------------------------------------
def _narrow_index(x, dim, start, length) -> tuple:
    if x.ndim == 0:
        raise ValueError("narrow: argument 'input' expected a tensor with at least 1 dim, got a 0-D tensor")
    axis = normalize_dim("narrow", dim, x.ndim)
    size = x.shape[axis]
    start, length = _ints("narrow", "start", start), _ints("narrow", "length", length)
    if len(start) != 1 or not -size <= start[0] <= size:
        raise ValueError(f"narrow: argument 'start' expected an int in [{-size}, {size}] for dim {dim} of size "
                         f"{size}, got {start}")
    start = start[0] % size if start[0] < 0 else start[0]
    if len(length) != 1 or length[0] < 0 or start + length[0] > size:
        raise ValueError(f"narrow: argument 'length' expected an int in [0, {size - start}] (start {start}, size "
                         f"{size}), got {length}")
    return (slice(None),) * axis + (slice(start, start + length[0]),)


def _narrow_vjp(g, ans, x, dim, start, length):
    grad = np.zeros(x.shape, dtype=g.dtype)
    grad[_narrow_index(x, dim, start, length)] = g
    return grad


narrow = defop("narrow", family="shape", inputs=("x",),
               forward=lambda x, dim, start, length: x[_narrow_index(x, dim, start, length)],
               vjps=(_narrow_vjp,),
               samples=lambda rng: [Sample((uniform(rng, (4, 3)),), {"dim": 0, "start": 1, "length": 2}),
                                    Sample((uniform(rng, (2, 5)),), {"dim": -1, "start": -3, "length": 3},
                                           "negative start and dim"),
                                    Sample((uniform(rng, (2, 1)),), {"dim": 1, "start": 0, "length": 1}, "size-1 dim"),
                                    Sample((transposed(rng, (3, 4)),), {"dim": 1, "start": 2, "length": 1},
                                           "non-contiguous")],
               torch_ref=lambda torch, x, dim, start, length: torch.narrow(x, dim, start, length))


def split(x, split_size_or_sections, dim=0):
    """``torch.split``: a tuple of ``narrow`` views along ``dim``, of size ``split_size_or_sections`` (the last
    one smaller if need be) or of the listed sizes (which must add up to the dim's size)."""
    x_shape = np.shape(x)
    axis = normalize_dim("split", dim, len(x_shape))
    size = x_shape[axis] if x_shape else 1
    if isinstance(split_size_or_sections, int | np.integer) and not isinstance(split_size_or_sections, bool):
        step = int(split_size_or_sections)
        if step <= 0:
            raise ValueError(f"split: argument 'split_size_or_sections' expected a positive size, got {step}")
        sizes = [min(step, size - start) for start in range(0, size, step)] or [0]
    else:
        sizes = list(_ints("split", "split_size_or_sections", split_size_or_sections))
        if any(s < 0 for s in sizes) or sum(sizes) != size:
            raise ValueError(f"split: argument 'split_size_or_sections' expected non-negative sizes adding up to "
                             f"{size} (dim {dim} of {x_shape}), got {sizes}")
    starts = np.cumsum([0] + sizes[:-1])
    return tuple(narrow(x, dim, int(start), length) for start, length in zip(starts, sizes))


def chunk(x, chunks, dim=0):
    """``torch.chunk``: ``split`` into pieces of ceil(size / chunks) (so possibly fewer than ``chunks``)."""
    if isinstance(chunks, bool) or not isinstance(chunks, int | np.integer) or chunks <= 0:
        raise ValueError(f"chunk: argument 'chunks' expected a positive int, got {chunks!r}")
    x_shape = np.shape(x)
    size = x_shape[normalize_dim("chunk", dim, len(x_shape))] if x_shape else 1
    return split(x, max(-(-size // int(chunks)), 1), dim)


# -- getitem -----------------------------------------------------------------------------------------------
def _index(index):
    """The index with any Tensor inside replaced by its array."""
    if isinstance(index, tuple):
        return tuple(_index(i) for i in index)
    data = getattr(index, "_data", None)
    return data if data is not None else index


def _has_arrays(index) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, np.ndarray | list) for p in parts)


def _getitem(x, index):
    try:
        return x[_index(index)]
    except IndexError as e:
        raise IndexError(f"getitem: index {index!r} does not fit input of shape {x.shape}: {e}") from None


def _getitem_vjp(g, ans, x, index):
    index = _index(index)
    grad = np.zeros(x.shape, dtype=g.dtype)
    if _has_arrays(index):
        np.add.at(grad, index, g)  # repeated integer indices accumulate
    else:
        grad[index] = g
    return grad


def _getitem_samples(rng):
    x = uniform(rng, (4, 5))
    return [Sample((x,), {"index": (1,)}, "int"),
            Sample((x,), {"index": (slice(None, None, 2), slice(1, 4))}, "slices with step"),
            Sample((x,), {"index": (Ellipsis, -1)}, "ellipsis"),
            Sample((x,), {"index": (np.array([0, 2, 2, 3]),)}, "repeated integer array"),
            Sample((x,), {"index": (np.array([0, 1]), np.array([4, 4]))}, "paired integer arrays"),
            Sample((uniform(rng, (3, 4, 2)),), {"index": (slice(None), None, np.array([1, 3]))}, "newaxis + array"),
            Sample((x,), {"index": (x > 0,)}, "boolean mask"),
            Sample((transposed(rng, (3, 4)),), {"index": (slice(None, None, 2), 2)}, "non-contiguous")]


def _torch_index(torch, index):
    if isinstance(index, tuple):
        return tuple(_torch_index(torch, i) for i in index)
    return torch.from_numpy(index) if isinstance(index, np.ndarray) else index


getitem = defop("getitem", family="shape", inputs=("x",), forward=_getitem, vjps=(_getitem_vjp,),
                samples=_getitem_samples,
                torch_ref=lambda torch, x, index: x[_torch_index(torch, _index(index))])


# -- gather / index_select ---------------------------------------------------------------------------------
def _check_index_values(op, index, size, dim):
    if index.size and (index.min() < 0 or index.max() >= size):
        bad = index.min() if index.min() < 0 else index.max()
        raise IndexError(f"{op}: argument 'index' expected values in [0, {size - 1}] for dim {dim} of size {size}, "
                         f"got {bad}")


def _check_gather(x, index, dim):
    require_integer("gather", "index", index)
    if x.ndim == 0:
        raise ValueError("gather: argument 'input' expected a tensor with at least 1 dim, got a 0-D tensor")
    axis = normalize_dim("gather", dim, x.ndim)
    if index.ndim != x.ndim or any(i > s for d, (i, s) in enumerate(zip(index.shape, x.shape)) if d != axis):
        raise ValueError(f"gather: argument 'index' expected {x.ndim} dims, each no larger than input {x.shape} "
                         f"apart from dim {dim}, got shape {index.shape}")
    _check_index_values("gather", index, x.shape[axis], dim)


def _gather_positions(x, index, dim) -> tuple:
    """The input sub-block gather reads and the full index tuple addressing it."""
    axis = normalize_dim("gather", dim, x.ndim)
    block = tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(index.shape))
    grids = list(np.ix_(*[np.arange(n) for n in index.shape]))
    grids[axis] = index
    return block, tuple(grids)


def _gather(input, dim, index):
    """``torch.gather(input, dim, index)``: ``out[i][j] = input[index[i][j]][j]`` for dim 0 (and so on)."""
    axis = normalize_dim("gather", dim, input.ndim)
    block = tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(index.shape))
    return np.take_along_axis(input[block], index, axis)


def _gather_vjp(g, ans, x, index, dim):
    block, positions = _gather_positions(x, index, dim)
    grad = np.zeros(x.shape, dtype=g.dtype)
    np.add.at(grad[block], positions, g)  # repeated indices accumulate
    return grad


def _gather_samples(rng):
    return [Sample((uniform(rng, (3, 4)), np.array([[0, 2, 2, 1], [1, 1, 0, 2]])), {"dim": 0}, "repeated"),
            Sample((uniform(rng, (3, 4)), np.array([[3, 3], [0, 1], [2, 3]])), {"dim": -1}, "dim -1, repeated"),
            Sample((uniform(rng, (4, 5, 2)), np.array([[[4], [0]]])), {"dim": 1}, "smaller index"),
            Sample((transposed(rng, (3, 2)), np.array([[0], [0], [1]])), {"dim": 1}, "non-contiguous"),
            Sample((uniform(rng, (1, 3)), np.array([[0, 0, 0]])), {"dim": 0}, "size-1 dim")]


gather = defop("gather", family="shape", inputs=("input", "index"), forward=_gather,
               vjps=(_gather_vjp, NOT_DIFFERENTIABLE), check=_check_gather, samples=_gather_samples,
               torch_ref=lambda torch, x, index, dim: torch.gather(x, dim, index.long()))


def _check_index_select(x, index, dim):
    require_integer("index_select", "index", index)
    if x.ndim == 0:
        raise ValueError("index_select: argument 'input' expected a tensor with at least 1 dim, got a 0-D tensor")
    axis = normalize_dim("index_select", dim, x.ndim)
    if index.ndim > 1:
        raise ValueError(f"index_select: argument 'index' expected a 0-D or 1-D tensor, got shape {index.shape}")
    _check_index_values("index_select", index, x.shape[axis], dim)


def _index_select_vjp(g, ans, x, index, dim):
    grad = np.zeros(x.shape, dtype=g.dtype)
    np.add.at(grad, (slice(None),) * normalize_dim("index_select", dim, x.ndim) + (index.reshape(-1),), g)
    return grad


def _index_select(input, dim, index):
    """``torch.index_select(input, dim, index)``: the entries at ``index`` (0-D or 1-D) along ``dim``."""
    return np.take(input, index.reshape(-1), axis=normalize_dim("index_select", dim, input.ndim))


index_select = defop(
    "index_select", family="shape", inputs=("input", "index"), forward=_index_select,
    vjps=(_index_select_vjp, NOT_DIFFERENTIABLE), check=_check_index_select,
    samples=lambda rng: [Sample((uniform(rng, (4, 3)), np.array([0, 2, 2, 3, 2])), {"dim": 0}, "repeated"),
                         Sample((uniform(rng, (2, 3, 4)), np.array([3, 1])), {"dim": -1}),
                         Sample((uniform(rng, (2, 3)), np.array(1)), {"dim": 1}, "0-D index"),
                         Sample((transposed(rng, (3, 4)), np.array([0, 0])), {"dim": 1}, "non-contiguous"),
                         Sample((uniform(rng, (1, 3)), np.array([0, 0, 0])), {"dim": 0}, "size-1 dim")],
    torch_ref=lambda torch, x, index, dim: torch.index_select(x, dim, index.long()))


# -- pad ---------------------------------------------------------------------------------------------------
_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _pad_widths(x, pad, mode) -> list:
    """[(axis, before, after)] from torch's pad tuple (last dim first), validated as torch does."""
    pad = _ints("pad", "pad", pad)
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: argument 'mode' expected one of {_PAD_MODES}, got {mode!r}")
    pairs = len(pad) // 2
    if len(pad) % 2 or pairs > x.ndim:
        raise ValueError(f"pad: argument 'pad' expected an even number of sizes, at most 2 per dim of the {x.ndim}-D "
                         f"input, got {pad}")
    if mode != "constant" and not (1 <= pairs <= 3 and x.ndim in (pairs + 1, pairs + 2)):
        raise ValueError(f"pad: argument 'pad' with mode '{mode}' expected 2, 4 or 6 sizes padding the last 1, 2 or "
                         f"3 dims of a 2-D/3-D, 3-D/4-D or 4-D/5-D input (as torch), got {pad} for shape {x.shape}")
    widths = []
    for k in range(pairs):
        axis = x.ndim - 1 - k
        before, after, size = pad[2 * k], pad[2 * k + 1], x.shape[axis]
        out = size + before + after
        if out < 0 or (mode != "constant" and (size == 0 or out <= 0)):
            raise ValueError(f"pad: argument 'pad' gives dim {axis} (size {size}) the size {out}, got {pad}")
        # circular crops first and wraps within what is left (as torch does)
        limit = {"reflect": size - 1, "circular": size - max(-before, 0) - max(-after, 0)}.get(mode)
        if limit is not None and max(before, after) > limit:
            raise ValueError(f"pad: argument 'pad' expected pads of at most {limit} in mode '{mode}' for dim {axis} "
                             f"of size {size}, got {pad}")
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
    return start + np.arange(-max(before, 0), kept + max(after, 0)) % kept


def _pad(x, pad, mode="constant", value=None):
    widths = _pad_widths(x, pad, mode)
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


def _pad_vjp(g, ans, x, pad, mode="constant", value=None):
    widths = _pad_widths(x, pad, mode)
    if mode == "constant":
        keep = [slice(None)] * x.ndim
        zeros = [(0, 0)] * x.ndim
        for axis, before, after in widths:
            keep[axis] = slice(max(before, 0), g.shape[axis] - max(after, 0))
            zeros[axis] = (max(-before, 0), max(-after, 0))
        return np.pad(g[tuple(keep)], zeros)
    for axis, before, after in reversed(widths):  # undo the forward's takes, last first, adding repeats
        size = x.shape[axis]
        summed = np.zeros(g.shape[:axis] + (size,) + g.shape[axis + 1:], dtype=g.dtype)
        np.add.at(summed, (slice(None),) * axis + (_source_positions(size, before, after, mode),), g)
        g = summed
    return g


def _pad_samples(rng):
    return [Sample((uniform(rng, (2, 3, 4)),), {"pad": (1, 2)}, "last dim"),
            Sample((uniform(rng, (2, 3, 4)),), {"pad": (0, 1, 2, 0, 1, 1), "value": 1.5}, "every side, value"),
            Sample((uniform(rng, (3, 4)),), {"pad": (-1, 2, 1, -2)}, "negative crops"),
            Sample((transposed(rng, (3, 4)),), {"pad": (1, 1, 0, 1)}, "non-contiguous"),
            Sample((uniform(rng, (2, 1, 4)),), {"pad": (0, 0, 1, 2)}, "size-1 dim"),
            Sample((uniform(rng, (2, 2, 4)),), {"pad": (1, 3), "mode": "reflect"}, "reflect"),
            Sample((uniform(rng, (1, 2, 3, 4)),), {"pad": (3, 2, 1, 2), "mode": "reflect"}, "reflect 2 dims"),
            Sample((uniform(rng, (2, 4)),), {"pad": (-1, 2), "mode": "reflect"}, "reflect negative"),
            Sample((uniform(rng, (2, 3)),), {"pad": (4, 1), "mode": "replicate"}, "replicate"),
            Sample((uniform(rng, (1, 2, 2, 3)),), {"pad": (0, 2, 1, 1, 1, 0), "mode": "replicate"},
                   "replicate 3 dims"),
            Sample((uniform(rng, (2, 4)),), {"pad": (4, 1), "mode": "circular"}, "circular"),
            Sample((uniform(rng, (2, 3, 4)),), {"pad": (-1, 2, 1, -2), "mode": "circular"}, "circular 2 dims, crop")]


pad = defop("pad", family="shape", inputs=("x",), forward=_pad, vjps=(_pad_vjp,), samples=_pad_samples,
            torch_ref=lambda torch, x, pad, mode="constant", value=None:
                torch.nn.functional.pad(x, pad, mode=mode, value=value))


# -- tril / triu -------------------------------------------------------------------------------------------
def _triangle(name, np_fn):
    def forward(x, diagonal=0):
        if x.ndim < 2:
            raise ValueError(f"{name}: argument 'input' expected at least 2 dims, got shape {x.shape}")
        if isinstance(diagonal, bool) or not isinstance(diagonal, int | np.integer):
            raise TypeError(f"{name}: argument 'diagonal' expected an int, got {type(diagonal).__name__}")
        return np_fn(x, k=diagonal)

    return defop(name, family="shape", inputs=("x",), forward=forward,
                 vjps=(lambda g, ans, x, diagonal=0: np_fn(g, k=diagonal),),
                 samples=lambda rng: [Sample((uniform(rng, (3, 3)),), {}, "square"),
                                      Sample((uniform(rng, (2, 3, 4)),), {"diagonal": 1}, "batched, above"),
                                      Sample((uniform(rng, (4, 3)),), {"diagonal": -1}, "below"),
                                      Sample((transposed(rng, (4, 3)),), {"diagonal": 0}, "non-contiguous"),
                                      Sample((uniform(rng, (1, 3)),), {"diagonal": -2}, "size-1 dim")],
                 torch_ref=lambda torch, x, diagonal=0: getattr(torch, name)(x, diagonal))


tril = _triangle("tril", np.tril)
triu = _triangle("triu", np.triu)


# -- masked_fill -------------------------------------------------------------------------------------------
def _check_masked_fill(x, mask, value):
    if mask.dtype != np.bool_:
        raise TypeError(f"masked_fill: argument 'mask' expected a bool tensor, got dtype {mask.dtype}")
    try:
        np.broadcast_shapes(x.shape, mask.shape)
    except ValueError:
        raise ValueError(f"masked_fill: argument 'mask' expected a shape broadcastable with input {x.shape}, got "
                         f"{mask.shape}") from None
    if getattr(value, "requires_grad", False):
        raise TypeError("masked_fill: argument 'value' is a constant; it got a tensor that requires grad, whose "
                        "gradient would be lost (fill with ops.where-style arithmetic instead)")
    if np.ndim(value) != 0 or np.asarray(value).dtype.kind not in "biuf":
        raise TypeError(f"masked_fill: argument 'value' expected a number, got {value!r}")


def _masked_fill(x, mask, value):
    return np.where(mask, np.asarray(value).astype(x.dtype), x)


masked_fill = defop(
    "masked_fill", family="shape", inputs=("x", "mask"), forward=_masked_fill, check=_check_masked_fill,
    vjps=(lambda g, ans, x, mask, value: unbroadcast(np.where(mask, 0, g), x.shape), NOT_DIFFERENTIABLE),
    samples=lambda rng: [Sample((uniform(rng, (2, 3)), rng.uniform(size=(2, 3)) > 0.5), {"value": -1.0}),
                         Sample((uniform(rng, (2, 3, 4)), rng.uniform(size=(3, 1)) > 0.5), {"value": 2.0},
                                "broadcast mask"),
                         Sample((uniform(rng, (3,)), rng.uniform(size=(2, 3)) > 0.5), {"value": 0.0},
                                "mask enlarges"),
                         Sample((transposed(rng, (3, 4)), np.tril(np.ones((3, 4), bool))), {"value": -5.0},
                                "non-contiguous, causal")],
    torch_ref=lambda torch, x, mask, value: torch.masked_fill(x, mask, value))


# -- repeat ------------------------------------------------------------------------------------------------
def _repeat_shapes(x, repeats):
    repeats = _ints("repeat", "repeats", repeats)
    if len(repeats) < x.ndim or any(r < 0 for r in repeats):
        raise ValueError(f"repeat: argument 'repeats' expected at least {x.ndim} non-negative counts for input "
                         f"{x.shape}, got {repeats}")
    return repeats, (1,) * (len(repeats) - x.ndim) + x.shape


def _repeat_vjp(g, ans, x, repeats):
    repeats, shape = _repeat_shapes(x, repeats)
    interleaved = tuple(n for pair in zip(repeats, shape) for n in pair)  # (r0, d0, r1, d1, ...)
    return g.reshape(interleaved).sum(axis=tuple(range(0, 2 * len(shape), 2))).reshape(x.shape)


def _repeat(x, repeats):
    repeats, shape = _repeat_shapes(x, repeats)
    return np.tile(x.reshape(shape), repeats)


_repeat_op = defop(
    "repeat", family="shape", inputs=("x",), forward=_repeat, vjps=(_repeat_vjp,),
    samples=lambda rng: [Sample((uniform(rng, (2, 3)),), {"repeats": (2, 1)}),
                         Sample((uniform(rng, (2, 1)),), {"repeats": (3, 1, 2)}, "new dim, size-1 dim"),
                         Sample((uniform(rng, ()),), {"repeats": (3,)}, "scalar"),
                         Sample((transposed(rng, (2, 3)),), {"repeats": (1, 2)}, "non-contiguous"),
                         Sample((uniform(rng, (2, 2)),), {"repeats": (0, 2)}, "zero repeats")],
    torch_ref=lambda torch, x, repeats: x.repeat(*repeats))


def repeat(x, *repeats):
    """``torch.Tensor.repeat``: tile ``x``; ``repeat(x, 2, 3)`` or ``repeat(x, (2, 3))``."""
    return _repeat_op(x, repeats=_sizes_or_sequence(repeats))
