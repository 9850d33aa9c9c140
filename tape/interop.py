"""numpy's array protocols for Tensor: numpy functions called on tensors run the registered ops, with numpy's meaning.

``np.exp(t)``, ``np.sum(t, axis=1)``, ``np.where(c, t, 0)``, ``ndarray * t`` ... dispatch to ``ops.exp``,
``ops.sum`` ... so they are recorded and stay differentiable (MyGrad's and HIPS autograd's choice). This is
also how backward rules become differentiable: a rule written over the numpy API, called on Tensors by the
second-order pass, records its own computation.

A mapped function means exactly what numpy means: each handler below has numpy's own signature (positional
arguments land where numpy puts them), checks ``axis`` as numpy does (``axis=()`` reduces nothing, an axis out
of range raises numpy's AxisError, a list is refused where numpy refuses it) and gives numpy's values. Where
the op's (torch's) meaning differs, the handler bridges it (``np.sign(nan)`` is nan, ``np.outer`` flattens,
``np.take_along_axis`` broadcasts, ``np.dot`` of N-D arrays contracts as numpy's). An argument a handler
cannot honour exactly (``out=`` an array, ``initial=``, ``where=`` a mask, a ``dtype=`` that would cast, ...)
raises a TypeError naming the function and the argument; ``out=None``, ``where=True`` and ``dtype=`` the
result's own dtype are accepted. One difference is deliberate: a numpy float scalar next to a float32
tensor acts as a Python float (torch's rule; numpy 2 would promote to float64).

What has no registered op is refused with a TypeError when a tensor involved needs a gradient (numpy would
otherwise drop that gradient silently); on constant tensors it runs on the arrays and returns numpy's result.
In-place forms (``out=``) and ufunc methods (``np.add.at``, ``.reduce``) count as having no op.

Leaving the graph: a gradient leaves only through an explicit exit -- ``t.item()``, ``float(t)``, ``int(t)``,
``t.detach()``, ``t.numpy()`` / ``t.data``. Every numpy conversion of a tensor that requires grad is refused:
``np.asarray(t)``, ``np.array([t])``, ``np.float32(t)``, ``arr[:] = t`` (all through ``__array__``) and
``arr[i] = t`` (numpy reads the value through float(); torch lets this one through). What calls Python's
float() itself passes, as minitape cannot tell it from the explicit exit: ``np.float64(t)`` (np.float64
subclasses float; torch refuses it), ``arr.fill(t)`` and ``math.exp(t)`` (torch lets both through).
"""

from __future__ import annotations

import operator

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from . import tensors
from .state import needs_grad

__all__ = ["array_ufunc", "array_function", "UFUNC_OPS", "FUNCTION_OPS", "UFUNC_MEANINGS"]


# numpy ufunc -> registered op name (an op not registered yet counts as "no op")
UFUNC_OPS = {
    np.add: "add",
    np.subtract: "sub",
    np.multiply: "mul",
    np.true_divide: "div",
    np.power: "pow",
    np.negative: "neg",
    np.absolute: "abs",
    np.sign: "sign",
    np.square: "square",
    np.exp: "exp",
    np.expm1: "expm1",
    np.exp2: "exp2",
    np.log: "log",
    np.log2: "log2",
    np.log10: "log10",
    np.log1p: "log1p",
    np.sqrt: "sqrt",
    np.sin: "sin",
    np.cos: "cos",
    np.tan: "tan",
    np.arcsin: "asin",
    np.arccos: "acos",
    np.arctan: "atan",
    np.arctan2: "atan2",
    np.sinh: "sinh",
    np.cosh: "cosh",
    np.tanh: "tanh",
    np.arcsinh: "asinh",
    np.arccosh: "acosh",
    np.arctanh: "atanh",
    np.maximum: "maximum",
    np.minimum: "minimum",
    np.matmul: "matmul",
    np.equal: "eq",
    np.not_equal: "ne",
    np.less: "lt",
    np.less_equal: "le",
    np.greater: "gt",
    np.greater_equal: "ge",
    np.reciprocal: "reciprocal",
    np.floor: "floor",
    np.ceil: "ceil",
    np.trunc: "trunc",
    np.copysign: "copysign",
    np.logaddexp: "logaddexp",
    np.remainder: "remainder",
    np.fmod: "fmod",
    np.floor_divide: "floor_divide",
    np.hypot: "hypot",
    np.isinf: "isinf",
    np.isnan: "isnan",
    np.isfinite: "isfinite",
    np.logical_and: "logical_and",
    np.logical_or: "logical_or",
    np.logical_xor: "logical_xor",
    np.logical_not: "logical_not",
    np.deg2rad: "deg2rad",
    np.logaddexp2: "logaddexp2",
    np.fmax: "fmax",
    np.fmin: "fmin",
    np.signbit: "signbit",
    np.positive: "positive",
}


# numpy's bitwise ufuncs on bool operands are the logical ops (``bool_array ^ tensor`` lands here); on integers they
# stay numpy's (non-bool tensors cannot require grad)
LOGICAL_UFUNCS = {
    np.bitwise_and: "logical_and",
    np.bitwise_or: "logical_or",
    np.bitwise_xor: "logical_xor",
    np.invert: "logical_not",
}


def _lib():
    return tensors.ops


def _all_bool(values) -> bool:
    return all(isinstance(v, bool | np.bool_) or getattr(v, "dtype", None) == np.bool_ for v in values)


def _any_needs_grad(values) -> bool:
    for v in values:
        if isinstance(v, tensors.Tensor):
            if needs_grad(v):
                return True
        elif isinstance(v, list | tuple) and _any_needs_grad(v):
            return True
    return False


def _arrays(value):
    """``value`` with every Tensor (also inside lists and tuples) replaced by its array."""
    if isinstance(value, tensors.Tensor):
        return value._data
    if isinstance(value, list | tuple):
        return type(value)(_arrays(v) for v in value)
    return value


def _refuse(what: str, reason: str):
    raise TypeError(
        f"numpy's {what} on a Tensor that requires grad: {reason}, so numpy would drop the gradient "
        f"silently. Use the ops (python -m tape ops lists them), or detach the tensor (t.detach()) "
        f"when no gradient should flow"
    )


# -- ufuncs ----------------------------------------------------------------------------------------------------
def _numpy_sign(x):
    """numpy's sign: nan at nan (ops.sign is torch's, 0 there)."""
    return _lib().where(_lib().isnan(x), x, _lib().sign(x))


UFUNC_MEANINGS = {np.sign: _numpy_sign}  # where numpy's meaning differs from the registered op's (torch's)

# ufunc keywords a recorded call honours exactly: (the neutral values accepted). ``dtype`` is checked on the result.
_UFUNC_NEUTRAL = {"where": (True,), "casting": ("same_kind",), "order": ("K", "A", "C", "F"), "subok": (True,)}


def array_ufunc(ufunc, method, inputs, kwargs):
    name = UFUNC_OPS.get(ufunc)
    if name is None and ufunc in LOGICAL_UFUNCS and _all_bool(inputs):
        name = LOGICAL_UFUNCS[ufunc]
    op = getattr(_lib(), name, None) if name is not None else None
    if method == "__call__" and op is not None and _honoured(ufunc, kwargs):
        result = UFUNC_MEANINGS.get(ufunc, op)(*inputs)
        if kwargs.get("dtype") is not None:
            _same_dtype(f"np.{ufunc.__name__}", kwargs["dtype"], result)
        return result
    if _any_needs_grad(inputs) or _any_needs_grad(tuple(kwargs.values())):
        if op is None:
            _refuse(f"{ufunc.__name__}", "minitape has no registered op for it")
        if method != "__call__":
            _refuse(f"{ufunc.__name__}.{method}", "ufunc methods are not recorded")
        _refuse(
            f"{ufunc.__name__}(..., {', '.join(kwargs)}=...)", "in-place outputs and these keywords are not recorded"
        )
    return getattr(ufunc, method)(*_arrays(inputs), **{k: _arrays(v) for k, v in kwargs.items()})


def _honoured(ufunc, kwargs) -> bool:
    """True when every ufunc keyword has a value the recorded op honours exactly (numpy drops ``out=None``)."""
    for key, value in kwargs.items():
        if key == "dtype" or value is None and key == "signature":
            continue
        neutral = _UFUNC_NEUTRAL.get(key)
        if neutral is None or not any(value is n or (type(value) is type(n) and value == n) for n in neutral):
            return False
    return True


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


def _same_dtype(fname: str, dtype, result):
    """``dtype=`` is honoured when it is the result's own dtype (no cast); anything else is refused."""
    if dtype is not None:
        try:
            wanted = np.dtype(dtype)
        except TypeError:
            wanted = None
        if wanted != result.dtype:
            _unsupported(
                fname.removeprefix("np."),
                "dtype",
                dtype,
                f"only the result's own dtype {result.dtype}; cast explicitly with ops.cast",
            )
    return result


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
    op = getattr(_lib(), op_name)
    ufunc_reduction = op_name in ("sum", "prod", "amax", "amin")
    if ufunc_reduction and np.ndim(a) == 0 and isinstance(axis, int | np.integer) and axis in (0, -1):
        axis = ()
    axes = _axes(fname, axis, np.ndim(a))
    keep = _flag(fname, "keepdims", keepdims)
    if axes == ():
        return op(_lib().unsqueeze(a, 0), dim=0, keepdim=False, **attrs)
    return op(a, dim=axes, keepdim=keep, **attrs)


# -- numpy functions, each with numpy's own signature ---------------------------------------------------------------
def _sum_like(op_name: str, fname: str):
    def run(a, axis=None, dtype=None, out=None, keepdims=_NoValue, initial=_NoValue, where=_NoValue):
        _no_out(fname, out)
        _absent(fname, initial=initial)
        _where_all(fname, where)
        return _same_dtype(fname, dtype, _reduce(op_name, fname, a, axis, keepdims))

    return run


def _max_like(op_name: str, fname: str):
    def run(a, axis=None, out=None, keepdims=_NoValue, initial=_NoValue, where=_NoValue):
        _no_out(fname, out)
        _absent(fname, initial=initial)
        _where_all(fname, where)
        return _reduce(op_name, fname, a, axis, keepdims)

    return run


def _mean(a, axis=None, dtype=None, out=None, keepdims=_NoValue, *, where=_NoValue):
    _no_out("mean", out)
    _where_all("mean", where)
    return _same_dtype("mean", dtype, _reduce("mean", "mean", a, axis, keepdims))


def _moments(op_name: str):
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


def _where(condition, x=None, y=None, /):
    if x is None and y is None:  # numpy's one-argument form is nonzero: indices, no gradient
        return np.nonzero(_arrays(condition))
    if x is None or y is None:
        raise ValueError("np.where: either both or neither of x and y should be given")
    if np.result_type(_arrays(condition)) != np.bool_:  # numpy reads any condition as "nonzero"
        condition = _lib().ne(condition, 0) if isinstance(condition, tensors.Tensor) else np.asarray(condition) != 0
    return _lib().where(condition, x, y)


def _reshape(a, /, shape, order="C", *, copy=None):
    if copy is False:
        _unsupported("reshape", "copy", copy, "a tensor's values are immutable; copy=None or True")
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    if order == "F":  # column-major: reverse the axes, reshape, reverse back
        return _transpose(_lib().reshape(_transpose(a), shape[::-1]))
    if order != "C":
        _unsupported("reshape", "order", order, "order='C' or 'F'")
    return _lib().reshape(a, shape)


def _transpose(a, axes=None):
    if axes is None:
        return _lib().permute(a, tuple(reversed(range(np.ndim(a)))))
    axes = _axes("transpose", axes, np.ndim(a), "axes", lists=True)
    if len(axes) != np.ndim(a):
        raise ValueError(f"np.transpose: axes don't match array: {len(axes)} axes for a {np.ndim(a)}-D array")
    return _lib().permute(a, axes)


def _swapaxes(a, axis1, axis2):
    ndim = np.ndim(a)
    return _lib().transpose(a, _axis("swapaxes", axis1, ndim, "axis1"), _axis("swapaxes", axis2, ndim, "axis2"))


def _moveaxis(a, source, destination):
    source = _axes("moveaxis", source, np.ndim(a), "source", lists=True)
    destination = _axes("moveaxis", destination, np.ndim(a), "destination", lists=True)
    if len(source) != len(destination):
        raise ValueError("np.moveaxis: `source` and `destination` arguments must have the same number of elements")
    order = [n for n in range(np.ndim(a)) if n not in source]
    for dest, src in sorted(zip(destination, source, strict=True)):
        order.insert(dest, src)
    return _lib().permute(a, tuple(order))


def _expand_dims(a, axis):
    axes = _axes("expand_dims", axis, np.ndim(a) + (len(axis) if isinstance(axis, tuple | list) else 1), lists=True)
    shape = iter(np.shape(a))
    return _lib().reshape(a, tuple(1 if ax in axes else next(shape) for ax in range(np.ndim(a) + len(axes))))


def _squeeze(a, axis=None):
    shape = np.shape(a)
    axes = tuple(n for n, size in enumerate(shape) if size == 1) if axis is None else _axes("squeeze", axis, len(shape))
    if any(shape[ax] != 1 for ax in axes):
        raise ValueError(f"np.squeeze: cannot select an axis to squeeze out which has size not equal to one: {axis}")
    return _lib().reshape(a, tuple(size for n, size in enumerate(shape) if n not in axes))


def _broadcast_to(array, shape, subok=False):
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    if any(_integer("broadcast_to", "shape", n) < 0 for n in shape):
        raise ValueError(f"np.broadcast_to: all elements of broadcast shape must be non-negative, got {shape}")
    return _lib().expand(array, shape)


def _joined(fname: str, arrays, out, dtype, casting):
    _no_out(fname, out)
    if casting != "same_kind":
        _unsupported(fname, "casting", casting, "only the default 'same_kind'")
    if isinstance(arrays, tensors.Tensor) or not isinstance(arrays, list | tuple):
        _unsupported(fname, "arrays", type(arrays).__name__, "a list or tuple of arrays")
    if not arrays:
        raise ValueError(f"np.{fname}: need at least one array to {fname}")
    return list(arrays)


def _concatenate(arrays, /, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = _joined("concatenate", arrays, out, dtype, casting)
    if axis is None:
        arrays, axis = [_lib().reshape(x, (-1,)) for x in arrays], 0
    if np.ndim(arrays[0]) == 0:
        raise ValueError("np.concatenate: zero-dimensional arrays cannot be concatenated")
    return _same_dtype("concatenate", dtype, _lib().concat(arrays, _axis("concatenate", axis, np.ndim(arrays[0]))))


def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = _joined("stack", arrays, out, dtype, casting)
    return _same_dtype("stack", dtype, _lib().stack(arrays, _axis("stack", axis, np.ndim(arrays[0]) + 1)))


_EINSUM_KWARGS = {"dtype": None, "order": "K", "casting": "safe"}


def _einsum(*operands, out=None, optimize=False, **kwargs):
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
    result = _lib().einsum(operands[0], *operands[1:])
    return _same_dtype("einsum", kwargs.get("dtype"), result)


def _clip(a, a_min=_NoValue, a_max=_NoValue, out=None, *, min=_NoValue, max=_NoValue, **kwargs):
    _no_out("clip", out)
    for key, value in kwargs.items():
        _unsupported("clip", key, value, "ufunc keywords are not recorded")
    low, high = _clip_bounds(a_min, a_max, min, max)
    if all(isinstance(v, int | float | type(None)) and not isinstance(v, bool) for v in (low, high)):
        return a if low is None and high is None else _lib().clamp(a, low, high)
    if low is not None:  # array bounds: numpy's clip is minimum(maximum(a, low), high), broadcast
        a = _lib().maximum(a, low)
    return a if high is None else _lib().minimum(a, high)


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


def _take_along_axis(arr, indices, axis=-1):
    """numpy's take_along_axis: negative indices count from the end and the other axes broadcast (torch's gather
    would take a sub-block instead)."""
    index = np.asarray(_arrays(indices))
    if index.dtype.kind not in "iu":
        raise IndexError(f"np.take_along_axis: `indices` must be an integer array, got dtype {index.dtype}")
    if axis is None:
        arr, axis = _lib().reshape(arr, (-1,)), 0
    if index.ndim != np.ndim(arr):
        raise ValueError("np.take_along_axis: `indices` and `arr` must have the same number of dimensions")
    axis = _axis("take_along_axis", axis, np.ndim(arr))
    size = np.shape(arr)[axis]
    index = np.where(index < 0, index + size, index)
    shape = np.broadcast_shapes(_with(np.shape(arr), axis, 1), _with(index.shape, axis, 1))  # all axes but axis
    arr_shape = _with(shape, axis, size)
    arr = arr if np.shape(arr) == arr_shape else _lib().expand(arr, arr_shape)
    return _lib().gather(arr, axis, np.ascontiguousarray(np.broadcast_to(index, _with(shape, axis, index.shape[axis]))))


def _with(shape: tuple, axis: int, size: int) -> tuple:
    """``shape`` with ``shape[axis]`` replaced by ``size``."""
    return (*shape[:axis], size, *shape[axis + 1 :])


def _triangle(op_name: str):
    def run(m, k=0):
        if np.ndim(m) < 2:
            _unsupported(op_name, "m", f"{np.ndim(m)}-D", "arrays of at least 2 dimensions")
        return getattr(_lib(), op_name)(m, _integer(op_name, "k", k))

    return run


def _dot(a, b, out=None):
    _no_out("dot", out)
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return _lib().mul(a, b)
    if np.ndim(a) <= 2 and np.ndim(b) <= 2:
        return _lib().matmul(a, b)
    # numpy's N-D dot: the last axis of a with the second-to-last of b (the only one, for 1-D b)
    return _lib().tensordot(a, b, ([np.ndim(a) - 1], [max(np.ndim(b) - 2, 0)]))


def _scan(op_name: str):
    def run(a, axis=None, dtype=None, out=None):
        _no_out(op_name, out)
        if axis is None or np.ndim(a) == 0:  # numpy scans the flattened array (a 0-d one as 1-D)
            a, axis = _lib().reshape(a, (-1,)), 0 if axis is None else axis
        result = getattr(_lib(), op_name)(a, _axis(op_name, axis, np.ndim(a)))
        return _same_dtype(op_name, dtype, result)

    return run


def _flip(m, axis=None):
    axes = _axes("flip", axis, np.ndim(m), lists=True)
    return _lib().flip(m, tuple(range(np.ndim(m))) if axes is None else axes)


def _roll(a, shift, axis=None):
    if axis is None:  # numpy rolls the flattened array by the sum of the shifts
        shifts = np.broadcast_to(np.asarray(shift), np.shape(np.asarray(shift))).ravel()
        flat = _lib().roll(_lib().reshape(a, (-1,)), sum(_integer("roll", "shift", s) for s in shifts), 0)
        return _lib().reshape(flat, np.shape(a))
    given = axis if isinstance(axis, tuple | list) else (axis,)  # numpy's roll allows an axis twice
    axes = normalize_axis_tuple(
        [_integer("roll", "axis", n) for n in given], np.ndim(a), "np.roll: argument 'axis'", True
    )
    total = dict.fromkeys(axes, 0)
    for s, ax in np.broadcast(shift, axes):  # numpy broadcasts shifts against axes; shifts of one axis add up
        total[int(ax)] += _integer("roll", "shift", s.item() if isinstance(s, np.generic) else s)
    return _lib().roll(a, tuple(total.values()), tuple(total))


def _tile(A, reps):
    reps = (reps,) if isinstance(reps, int | np.integer) else tuple(reps)
    if any(_integer("tile", "reps", r) < 0 for r in reps):
        raise ValueError(f"np.tile: negative dimensions are not allowed, got reps {reps}")
    return _lib().tile(A, reps)


def _diagonal(a, offset=0, axis1=0, axis2=1):
    ndim = np.ndim(a)
    if ndim < 2:
        raise ValueError("np.diagonal: diag requires an array of at least two dimensions")
    axis1, axis2 = _axis("diagonal", axis1, ndim, "axis1"), _axis("diagonal", axis2, ndim, "axis2")
    if axis1 == axis2:
        raise ValueError("np.diagonal: axis1 and axis2 cannot be the same")
    return _lib().diagonal(a, _integer("diagonal", "offset", offset), axis1, axis2)


def _diag(v, k=0):
    if np.ndim(v) not in (1, 2):
        raise ValueError(f"np.diag: input must be 1- or 2-d, got {np.ndim(v)}-d")
    return _lib().diag(v, _integer("diag", "k", k))


def _fliplr(m):
    if np.ndim(m) < 2:
        raise ValueError("np.fliplr: input must be >= 2-d")
    return _lib().flip(m, (1,))


def _flipud(m):
    if np.ndim(m) < 1:
        raise ValueError("np.flipud: input must be >= 1-d")
    return _lib().flip(m, (0,))


def _outer(a, b, out=None):
    _no_out("outer", out)  # numpy's outer flattens both (torch's takes vectors only)
    return _lib().outer(_lib().reshape(a, (-1,)), _lib().reshape(b, (-1,)))


def _tensordot(a, b, axes=2):
    if isinstance(axes, int | np.integer):
        if axes < 0:
            _unsupported("tensordot", "axes", axes, "a non-negative int or a pair of axis lists")
        return _lib().tensordot(a, b, int(axes))
    try:
        axes_a, axes_b = axes
    except (TypeError, ValueError):
        raise TypeError(
            f"np.tensordot: argument 'axes' expected an int or a pair of axis lists, got {axes!r}"
        ) from None
    lists = [[_integer("tensordot", "axes", n) for n in np.atleast_1d(x).tolist()] for x in (axes_a, axes_b)]
    if len(lists[0]) != len(lists[1]):
        raise ValueError("np.tensordot: shape-mismatch for sum (axes of different lengths)")
    return _lib().tensordot(a, b, tuple(lists))


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """A fill value that requires grad is broadcast by an op (recorded); otherwise numpy's result on the arrays."""
    if isinstance(fill_value, tensors.Tensor) and needs_grad(fill_value):
        if (dtype is not None and np.dtype(dtype) != fill_value.dtype) or fill_value.dtype != np.result_type(a):
            _unsupported(
                "full_like", "fill_value", fill_value.dtype, f"a fill that requires grad casts to {np.result_type(a)}"
            )
        return _lib().expand(fill_value, np.shape(a) if shape is None else shape)
    return np.full_like(_arrays(a), _arrays(fill_value), dtype, order, subok, shape, device=device)


FUNCTION_OPS = {
    np.sum: _sum_like("sum", "sum"),
    np.prod: _sum_like("prod", "prod"),
    np.mean: _mean,
    np.max: _max_like("amax", "max"),  # numpy's max is torch's amax: values only, any dims, ties sharing the gradient
    np.min: _max_like("amin", "min"),
    np.amax: _max_like("amax", "amax"),
    np.amin: _max_like("amin", "amin"),
    np.var: _moments("var"),
    np.std: _moments("std"),
    np.where: _where,
    np.reshape: _reshape,
    np.transpose: _transpose,
    np.swapaxes: _swapaxes,
    np.moveaxis: _moveaxis,
    np.expand_dims: _expand_dims,
    np.squeeze: _squeeze,
    np.broadcast_to: _broadcast_to,
    np.concatenate: _concatenate,
    np.stack: _stack,
    np.einsum: _einsum,
    np.clip: _clip,
    np.take_along_axis: _take_along_axis,
    np.tril: _triangle("tril"),
    np.triu: _triangle("triu"),
    np.dot: _dot,
    np.cumsum: _scan("cumsum"),
    np.cumprod: _scan("cumprod"),
    np.flip: _flip,
    np.roll: _roll,
    np.tile: _tile,
    np.diagonal: _diagonal,
    np.diag: _diag,
    np.fliplr: _fliplr,
    np.flipud: _flipud,
    np.outer: _outer,
    np.tensordot: _tensordot,
    np.full_like: _full_like,
}

# Functions whose result carries no gradient (shapes, booleans, indices, fresh arrays): run on the arrays.
NO_GRADIENT_FUNCTIONS = {
    np.shape,
    np.ndim,
    np.size,
    np.result_type,
    np.may_share_memory,
    np.shares_memory,
    np.allclose,
    np.array_equal,
    np.array_equiv,
    np.argmax,
    np.argmin,
    np.argsort,
    np.nonzero,
    np.count_nonzero,
    np.any,
    np.all,
    np.zeros_like,
    np.ones_like,
    np.empty_like,
    np.array2string,
    np.array_repr,
    np.array_str,
    np.isclose,
}


def array_function(func, args, kwargs):
    """numpy's __array_function__: numpy's dispatcher has already checked the call against numpy's signature,
    and each handler has that same signature."""
    handler = FUNCTION_OPS.get(func)
    if handler is not None:
        return handler(*args, **kwargs)
    if func not in NO_GRADIENT_FUNCTIONS and (_any_needs_grad(args) or _any_needs_grad(tuple(kwargs.values()))):
        _refuse(func.__name__, "minitape has no registered op for it")
    return func(*_arrays(args), **{k: _arrays(v) for k, v in kwargs.items()})
