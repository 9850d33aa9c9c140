"""numpy's meaning for the numpy functions and ufuncs that ops declare (``defop(..., numpy={np.sum: ...})``).

Each handler has numpy's own signature (positional arguments land where numpy puts them), checks ``axis`` as numpy
does (``axis=()`` reduces nothing, an axis out of range raises numpy's AxisError, a list is refused where numpy
refuses it) and gives numpy's values, bridging where the op's (torch's) meaning differs (``np.sign(nan)`` is nan,
``np.outer`` flattens, ``np.take_along_axis`` broadcasts, ``np.dot`` of N-D arrays contracts as numpy's). An
argument a handler cannot honour exactly (``out=`` an array, ``initial=``, ``where=`` a mask, a ``dtype=`` that
would cast, ...) raises a TypeError naming the function and the argument. The dispatch itself is tape/interop.py.
"""

import operator

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from tape.interop import same_dtype as _same_dtype
from tape.registry import get_op
from tape.state import needs_grad
from tape.tensors import Tensor


class _Registered:
    """The registered ops by name, looked up when a handler runs: handlers are declared with the ops they serve,
    before all the ops they call exist."""

    def __getattr__(self, name: str):
        return get_op(name)


_ops = _Registered()


def _arrays(value):
    """``value`` with every Tensor (also inside lists and tuples) replaced by its array."""
    if isinstance(value, Tensor):
        return value._data
    if isinstance(value, list | tuple):
        return type(value)(_arrays(v) for v in value)
    return value


def sign(x):
    """numpy's sign: nan at nan (ops.sign is torch's, 0 there)."""
    return _ops.where(_ops.isnan(x), x, _ops.sign(x))


# -- argument checks shared by the numpy functions ---------------------------------------------------------------
class _NoValueType:
    """numpy's "argument not given" marker, so each handler's signature reads as numpy's own."""

    def __repr__(self) -> str:
        return "<no value>"


_NoValue = _NoValueType()


def _unsupported(fname: str, argument: str, value, reason: str):
    raise TypeError(
        f"np.{fname} on a Tensor: argument '{argument}' is not supported ({reason}), got {value!r}; "
        f"run numpy on the arrays (t.detach().numpy()) or use the ops"
    )


def _no_out(fname: str, out) -> None:
    if out is not None:
        _unsupported(fname, "out", type(out).__name__, "in-place outputs are not recorded")


def _absent(fname: str, **given) -> None:
    """Refuse every argument of ``given`` that was passed (numpy's ``<no value>`` marker means not given)."""
    for argument, value in given.items():
        if value is not _NoValue:
            _unsupported(fname, argument, value, "minitape does not record it")


def _where_all(fname: str, where) -> None:
    if where is not _NoValue and where is not True:
        _unsupported(fname, "where", type(where).__name__, "only where=True (every element) is recorded")


def _flag(fname: str, argument: str, value) -> bool:
    """numpy's keepdims: a bool (or an int), as numpy reads it."""
    if value is _NoValue:
        return False
    if isinstance(value, bool | np.bool_):
        return bool(value)
    try:
        return bool(operator.index(value))
    except TypeError:
        raise TypeError(f"np.{fname}: argument '{argument}' expected a bool, got {value!r}") from None


def _integer(fname: str, argument: str, value) -> int:
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise TypeError(f"np.{fname}: argument '{argument}' expected an int, got {type(value).__name__} {value!r}")
    return int(value)


def _axis(fname: str, axis, ndim: int, argument: str = "axis") -> int:
    return normalize_axis_index(_integer(fname, argument, axis), ndim, f"np.{fname}: argument '{argument}'")


def _axes(fname: str, axis, ndim: int, argument: str = "axis", lists: bool = False):
    """numpy's axis argument: None (all), an int or a tuple of ints (``lists``: also a list, where numpy takes
    one), each in range and distinct; the normalized tuple (None kept)."""
    if axis is None:
        return None
    if isinstance(axis, tuple) or lists and isinstance(axis, list):
        axes = tuple(_integer(fname, argument, a) for a in axis)
    elif isinstance(axis, int | np.integer) and not isinstance(axis, bool | np.bool_):
        axes = (int(axis),)
    else:
        kinds = "an int or a sequence of ints" if lists else "None, an int or a tuple of ints"
        raise TypeError(f"np.{fname}: argument '{argument}' expected {kinds}, got {type(axis).__name__} {axis!r}")
    return normalize_axis_tuple(axes, ndim, f"np.{fname}: argument '{argument}'")


def _reduce(op_name: str, fname: str, a, axis, keepdims, **attrs):
    """``ops.<op_name>`` over numpy's axes: ``axis=()`` reduces nothing (one unit axis is added and reduced, so
    var's count is 1 as numpy's), ``axis=None`` everything. numpy's ufunc reductions (sum, prod, max, min) also
    take the int axis 0 or -1 of a 0-d array, meaning nothing to reduce; mean, var and std do not."""
    op = get_op(op_name)
    ufunc_reduction = op_name in ("sum", "prod", "amax", "amin")
    if ufunc_reduction and np.ndim(a) == 0 and isinstance(axis, int | np.integer) and axis in (0, -1):
        axis = ()
    axes = _axes(fname, axis, np.ndim(a))
    keep = _flag(fname, "keepdims", keepdims)
    if axes == ():
        return op(_ops.unsqueeze(a, 0), dim=0, keepdim=False, **attrs)
    return op(a, dim=axes, keepdim=keep, **attrs)


# -- numpy functions, each with numpy's own signature ---------------------------------------------------------------
def sum_like(op_name: str, fname: str):
    def run(a, axis=None, dtype=None, out=None, keepdims=_NoValue, initial=_NoValue, where=_NoValue):
        _no_out(fname, out)
        _absent(fname, initial=initial)
        _where_all(fname, where)
        return _same_dtype(fname, dtype, _reduce(op_name, fname, a, axis, keepdims))

    return run


def max_like(op_name: str, fname: str):
    def run(a, axis=None, out=None, keepdims=_NoValue, initial=_NoValue, where=_NoValue):
        _no_out(fname, out)
        _absent(fname, initial=initial)
        _where_all(fname, where)
        return _reduce(op_name, fname, a, axis, keepdims)

    return run


def mean(a, axis=None, dtype=None, out=None, keepdims=_NoValue, *, where=_NoValue):
    _no_out("mean", out)
    _where_all("mean", where)
    return _same_dtype("mean", dtype, _reduce("mean", "mean", a, axis, keepdims))


def moments(op_name: str):
    def run(
        a,
        axis=None,
        dtype=None,
        out=None,
        ddof=0,
        keepdims=_NoValue,
        *,
        where=_NoValue,
        mean=_NoValue,
        correction=_NoValue,
    ):
        _no_out(op_name, out)
        _where_all(op_name, where)
        _absent(op_name, mean=mean)
        if correction is not _NoValue:
            if ddof != 0:
                raise ValueError(f"np.{op_name}: ddof and correction can't be provided simultaneously")
            ddof = correction
        if isinstance(ddof, bool | np.bool_ | np.integer):  # numpy reads ddof=True as 1
            ddof = int(ddof)
        result = _reduce(op_name, op_name, a, axis, keepdims, correction=ddof)
        return _same_dtype(op_name, dtype, result)

    return run


def where(condition, x=None, y=None, /):
    if x is None and y is None:  # numpy's one-argument form is nonzero: indices, no gradient
        return np.nonzero(_arrays(condition))
    if x is None or y is None:
        raise ValueError("np.where: either both or neither of x and y should be given")
    if np.result_type(_arrays(condition)) != np.bool_:  # numpy reads any condition as "nonzero"
        condition = _ops.ne(condition, 0) if isinstance(condition, Tensor) else np.asarray(condition) != 0
    return _ops.where(condition, x, y)


def reshape(a, /, shape, order="C", *, copy=None):
    if copy is False:
        _unsupported(
            "reshape",
            "copy",
            copy,
            "a view is promised only where the layout allows; copy=None or True",
        )
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    if order == "F":  # column-major: reverse the axes, reshape, reverse back
        return transpose(_ops.reshape(transpose(a), shape[::-1]))
    if order != "C":
        _unsupported("reshape", "order", order, "order='C' or 'F'")
    return _ops.reshape(a, shape)


def transpose(a, axes=None):
    if axes is None:
        return _ops.permute(a, tuple(reversed(range(np.ndim(a)))))
    axes = _axes("transpose", axes, np.ndim(a), "axes", lists=True)
    if len(axes) != np.ndim(a):
        raise ValueError(f"np.transpose: axes don't match array: {len(axes)} axes for a {np.ndim(a)}-D array")
    return _ops.permute(a, axes)


def swapaxes(a, axis1, axis2):
    ndim = np.ndim(a)
    return _ops.transpose(a, _axis("swapaxes", axis1, ndim, "axis1"), _axis("swapaxes", axis2, ndim, "axis2"))


def moveaxis(a, source, destination):
    source = _axes("moveaxis", source, np.ndim(a), "source", lists=True)
    destination = _axes("moveaxis", destination, np.ndim(a), "destination", lists=True)
    if len(source) != len(destination):
        raise ValueError("np.moveaxis: `source` and `destination` arguments must have the same number of elements")
    order = [n for n in range(np.ndim(a)) if n not in source]
    for dest, src in sorted(zip(destination, source, strict=True)):
        order.insert(dest, src)
    return _ops.permute(a, tuple(order))


def expand_dims(a, axis):
    axes = _axes("expand_dims", axis, np.ndim(a) + (len(axis) if isinstance(axis, tuple | list) else 1), lists=True)
    shape = iter(np.shape(a))
    return _ops.reshape(a, tuple(1 if ax in axes else next(shape) for ax in range(np.ndim(a) + len(axes))))


def squeeze(a, axis=None):
    shape = np.shape(a)
    axes = tuple(n for n, size in enumerate(shape) if size == 1) if axis is None else _axes("squeeze", axis, len(shape))
    if any(shape[ax] != 1 for ax in axes):
        raise ValueError(f"np.squeeze: cannot select an axis to squeeze out which has size not equal to one: {axis}")
    return _ops.reshape(a, tuple(size for n, size in enumerate(shape) if n not in axes))


def broadcast_to(array, shape, subok=False):
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    if any(_integer("broadcast_to", "shape", n) < 0 for n in shape):
        raise ValueError(f"np.broadcast_to: all elements of broadcast shape must be non-negative, got {shape}")
    return _ops.expand(array, shape)


def _joined(fname: str, arrays, out, dtype, casting):
    _no_out(fname, out)
    if casting != "same_kind":
        _unsupported(fname, "casting", casting, "only the default 'same_kind'")
    if isinstance(arrays, Tensor) or not isinstance(arrays, list | tuple):
        _unsupported(fname, "arrays", type(arrays).__name__, "a list or tuple of arrays")
    if not arrays:
        raise ValueError(f"np.{fname}: need at least one array to {fname}")
    return list(arrays)


def concatenate(arrays, /, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = _joined("concatenate", arrays, out, dtype, casting)
    if axis is None:
        arrays, axis = [_ops.reshape(x, (-1,)) for x in arrays], 0
    if np.ndim(arrays[0]) == 0:
        raise ValueError("np.concatenate: zero-dimensional arrays cannot be concatenated")
    return _same_dtype("concatenate", dtype, _ops.concat(arrays, _axis("concatenate", axis, np.ndim(arrays[0]))))


def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = _joined("stack", arrays, out, dtype, casting)
    return _same_dtype("stack", dtype, _ops.stack(arrays, _axis("stack", axis, np.ndim(arrays[0]) + 1)))


_EINSUM_KWARGS = {"dtype": None, "order": "K", "casting": "safe"}


def einsum(*operands, out=None, optimize=False, **kwargs):
    _no_out("einsum", out)
    if not operands or not isinstance(operands[0], str):
        _unsupported("einsum", "subscripts", type(operands[0]).__name__ if operands else None, "a subscripts string")
    if optimize not in (False, True, "greedy", "optimal"):  # the contraction order: never the values
        _unsupported("einsum", "optimize", optimize, "False, True, 'greedy' or 'optimal'")
    for key, value in kwargs.items():
        if key not in _EINSUM_KWARGS:
            raise TypeError(f"np.einsum: got an unexpected keyword argument '{key}'")
        if key == "casting" and value != "safe":
            _unsupported("einsum", key, value, "only the default 'safe'")
    result = _ops.einsum(operands[0], *operands[1:])
    return _same_dtype("einsum", kwargs.get("dtype"), result)


def clip(a, a_min=_NoValue, a_max=_NoValue, out=None, *, min=_NoValue, max=_NoValue, **kwargs):
    _no_out("clip", out)
    for key, value in kwargs.items():
        _unsupported("clip", key, value, "ufunc keywords are not recorded")
    low, high = _clip_bounds(a_min, a_max, min, max)
    if all(isinstance(v, int | float | type(None)) and not isinstance(v, bool) for v in (low, high)):
        return a if low is None and high is None else _ops.clamp(a, low, high)
    if low is not None:  # array bounds: numpy's clip is minimum(maximum(a, low), high), broadcast
        a = _ops.maximum(a, low)
    return a if high is None else _ops.minimum(a, high)


def _clip_bounds(a_min, a_max, min, max):
    """numpy's rules for clip's two spellings of the bounds (a_min/a_max or min/max), None meaning unbounded."""
    if a_min is _NoValue and a_max is _NoValue:
        return (None if min is _NoValue else min), (None if max is _NoValue else max)
    if a_min is _NoValue or a_max is _NoValue:
        missing = "a_min" if a_min is _NoValue else "a_max"
        raise TypeError(f"np.clip: missing 1 required positional argument: '{missing}'")
    if min is not _NoValue or max is not _NoValue:
        raise ValueError("np.clip: passing `min` or `max` keyword argument when `a_min` and `a_max` are provided")
    return a_min, a_max


def take_along_axis(arr, indices, axis=-1):
    """numpy's take_along_axis: negative indices count from the end and the other axes broadcast (torch's gather
    would take a sub-block instead)."""
    index = np.asarray(_arrays(indices))
    if index.dtype.kind not in "iu":
        raise IndexError(f"np.take_along_axis: `indices` must be an integer array, got dtype {index.dtype}")
    if axis is None:
        arr, axis = _ops.reshape(arr, (-1,)), 0
    if index.ndim != np.ndim(arr):
        raise ValueError("np.take_along_axis: `indices` and `arr` must have the same number of dimensions")
    axis = _axis("take_along_axis", axis, np.ndim(arr))
    size = np.shape(arr)[axis]
    index = np.where(index < 0, index + size, index)
    shape = np.broadcast_shapes(_with(np.shape(arr), axis, 1), _with(index.shape, axis, 1))  # all axes but axis
    arr_shape = _with(shape, axis, size)
    arr = arr if np.shape(arr) == arr_shape else _ops.expand(arr, arr_shape)
    return _ops.gather(arr, axis, np.ascontiguousarray(np.broadcast_to(index, _with(shape, axis, index.shape[axis]))))


def _with(shape: tuple, axis: int, size: int) -> tuple:
    """``shape`` with ``shape[axis]`` replaced by ``size``."""
    return (*shape[:axis], size, *shape[axis + 1 :])


def triangle(op_name: str):
    def run(m, k=0):
        if np.ndim(m) < 2:
            _unsupported(op_name, "m", f"{np.ndim(m)}-D", "arrays of at least 2 dimensions")
        return get_op(op_name)(m, _integer(op_name, "k", k))

    return run


def dot(a, b, out=None):
    _no_out("dot", out)
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return _ops.mul(a, b)
    if np.ndim(a) <= 2 and np.ndim(b) <= 2:
        return _ops.matmul(a, b)
    # numpy's N-D dot: the last axis of a with the second-to-last of b (the only one, for 1-D b)
    return _ops.tensordot(a, b, ([np.ndim(a) - 1], [max(np.ndim(b) - 2, 0)]))


def scan(op_name: str):
    def run(a, axis=None, dtype=None, out=None):
        _no_out(op_name, out)
        if axis is None or np.ndim(a) == 0:  # numpy scans the flattened array (a 0-d one as 1-D)
            a, axis = _ops.reshape(a, (-1,)), 0 if axis is None else axis
        result = get_op(op_name)(a, _axis(op_name, axis, np.ndim(a)))
        return _same_dtype(op_name, dtype, result)

    return run


def flip(m, axis=None):
    axes = _axes("flip", axis, np.ndim(m), lists=True)
    return _ops.flip(m, tuple(range(np.ndim(m))) if axes is None else axes)


def roll(a, shift, axis=None):
    if axis is None:  # numpy rolls the flattened array by the sum of the shifts
        shifts = np.broadcast_to(np.asarray(shift), np.shape(np.asarray(shift))).ravel()
        flat = _ops.roll(_ops.reshape(a, (-1,)), sum(_integer("roll", "shift", s) for s in shifts), 0)
        return _ops.reshape(flat, np.shape(a))
    given = axis if isinstance(axis, tuple | list) else (axis,)  # numpy's roll allows an axis twice
    axes = normalize_axis_tuple(
        [_integer("roll", "axis", n) for n in given], np.ndim(a), "np.roll: argument 'axis'", True
    )
    total = dict.fromkeys(axes, 0)
    for s, ax in np.broadcast(shift, axes):  # numpy broadcasts shifts against axes; shifts of one axis add up
        total[int(ax)] += _integer("roll", "shift", s.item() if isinstance(s, np.generic) else s)
    return _ops.roll(a, tuple(total.values()), tuple(total))


def tile(A, reps):
    reps = (reps,) if isinstance(reps, int | np.integer) else tuple(reps)
    if any(_integer("tile", "reps", r) < 0 for r in reps):
        raise ValueError(f"np.tile: negative dimensions are not allowed, got reps {reps}")
    return _ops.tile(A, reps)


def diagonal(a, offset=0, axis1=0, axis2=1):
    ndim = np.ndim(a)
    if ndim < 2:
        raise ValueError("np.diagonal: diag requires an array of at least two dimensions")
    axis1, axis2 = _axis("diagonal", axis1, ndim, "axis1"), _axis("diagonal", axis2, ndim, "axis2")
    if axis1 == axis2:
        raise ValueError("np.diagonal: axis1 and axis2 cannot be the same")
    return _ops.diagonal(a, _integer("diagonal", "offset", offset), axis1, axis2)


def diag(v, k=0):
    if np.ndim(v) not in (1, 2):
        raise ValueError(f"np.diag: input must be 1- or 2-d, got {np.ndim(v)}-d")
    return _ops.diag(v, _integer("diag", "k", k))


def fliplr(m):
    if np.ndim(m) < 2:
        raise ValueError("np.fliplr: input must be >= 2-d")
    return _ops.flip(m, (1,))


def flipud(m):
    if np.ndim(m) < 1:
        raise ValueError("np.flipud: input must be >= 1-d")
    return _ops.flip(m, (0,))


def outer(a, b, out=None):
    _no_out("outer", out)  # numpy's outer flattens both (torch's takes vectors only)
    return _ops.outer(_ops.reshape(a, (-1,)), _ops.reshape(b, (-1,)))


def tensordot(a, b, axes=2):
    if isinstance(axes, int | np.integer):
        if axes < 0:
            _unsupported("tensordot", "axes", axes, "a non-negative int or a pair of axis lists")
        return _ops.tensordot(a, b, int(axes))
    try:
        axes_a, axes_b = axes
    except (TypeError, ValueError):
        raise TypeError(
            f"np.tensordot: argument 'axes' expected an int or a pair of axis lists, got {axes!r}"
        ) from None
    lists = [[_integer("tensordot", "axes", n) for n in np.atleast_1d(x).tolist()] for x in (axes_a, axes_b)]
    if len(lists[0]) != len(lists[1]):
        raise ValueError("np.tensordot: shape-mismatch for sum (axes of different lengths)")
    return _ops.tensordot(a, b, tuple(lists))


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """A fill value that requires grad is broadcast by an op (recorded); otherwise numpy's result on the arrays."""
    if isinstance(fill_value, Tensor) and needs_grad(fill_value):
        if (dtype is not None and np.dtype(dtype) != fill_value.dtype) or fill_value.dtype != np.result_type(a):
            _unsupported(
                "full_like", "fill_value", fill_value.dtype, f"a fill that requires grad casts to {np.result_type(a)}"
            )
        return _ops.expand(fill_value, np.shape(a) if shape is None else shape)
    return np.full_like(_arrays(a), _arrays(fill_value), dtype, order, subok, shape, device=device)
