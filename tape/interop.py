"""numpy's array protocols for Tensor: numpy functions called on tensors run the registered ops, with numpy's meaning.

``np.exp(t)``, ``np.sum(t, axis=1)``, ``np.where(c, t, 0)``, ``ndarray * t`` ... dispatch to ``ops.exp``,
``ops.sum`` ... so they are recorded and stay differentiable (MyGrad's and HIPS autograd's choice). This is
also how backward rules become differentiable: a rule written over the numpy API, called on Tensors by the
second-order pass, records its own computation.

A mapped function means exactly what numpy means. The ops declare what numpy calls run them (``defop(...,
numpy=np.exp)``, or ``{np.sum: handler}`` where numpy's signature or meaning differs: ops/_numpy.py holds those
handlers, each with numpy's own signature); registering fills the tables below, so this module names no op. An
argument a handler cannot honour exactly (``out=`` an array, ``initial=``, ``where=`` a mask, a ``dtype=`` that
would cast, ...) raises a TypeError naming the function and the argument; ``out=None``, ``where=True`` and
``dtype=`` the result's own dtype are accepted. One difference is deliberate: a numpy float scalar next to a
float32 tensor acts as a Python float (torch's rule; numpy 2 would promote to float64).

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

import numpy as np

from . import tensors
from .errors import RegistrationError
from .state import needs_grad

__all__ = ["array_ufunc", "array_function", "UFUNC_OPS", "FUNCTION_OPS", "LOGICAL_UFUNCS", "map_numpy", "unmap_numpy"]


# numpy ufunc -> the op (or the handler giving numpy's meaning), numpy function -> the handler with numpy's own
# signature: filled by the ops that declare ``numpy=`` (tape/registry.py); a ufunc or function missing counts as "no op"
UFUNC_OPS: dict = {}
FUNCTION_OPS: dict = {}

# numpy's bitwise ufuncs on bool operands are the logical ones (``bool_array ^ tensor`` lands here); on integers they
# stay numpy's (non-bool tensors cannot require grad)
LOGICAL_UFUNCS = {
    np.bitwise_and: np.logical_and,
    np.bitwise_or: np.logical_or,
    np.bitwise_xor: np.logical_xor,
    np.invert: np.logical_not,
}


def numpy_entries(op_name: str, numpy) -> dict:
    """An op's ``numpy=`` as {numpy callable: handler, or None for the op itself}: a ufunc or numpy function (called
    with the op's arguments), a dict {numpy callable: handler with numpy's own signature}, or a tuple of those."""
    entries: dict = {}
    for entry in numpy if isinstance(numpy, tuple) else (() if numpy is None else (numpy,)):
        pairs = entry.items() if isinstance(entry, dict) else [(entry, None)]
        for func, handler in pairs:
            if not callable(func) or not (handler is None or callable(handler)) or func in entries:
                raise RegistrationError(
                    f"op '{op_name}': numpy= expected ufuncs / numpy functions, or a dict of them to their "
                    f"handlers, each once; got {entry!r}"
                )
            entries[func] = handler
    return entries


def map_numpy(op) -> None:
    """Enter the numpy ufuncs and functions ``op`` declares (``op.numpy``) in the tables; none when one of them
    already dispatches to another op."""
    taken = [f"{getattr(f, '__name__', f)}" for f in op.numpy if mapped(f) is not None]
    if taken:
        raise RegistrationError(f"op '{op.name}': numpy=: {taken} already dispatch to another op")
    for func, handler in op.numpy.items():
        (UFUNC_OPS if isinstance(func, np.ufunc) else FUNCTION_OPS)[func] = op if handler is None else handler


def unmap_numpy(op) -> None:
    """Remove what ``map_numpy(op)`` entered."""
    for func, handler in op.numpy.items():
        table = UFUNC_OPS if isinstance(func, np.ufunc) else FUNCTION_OPS
        if table.get(func) is (op if handler is None else handler):
            del table[func]


def mapped(func):
    """What numpy's ``func`` dispatches to (an op or a handler), or None."""
    return (UFUNC_OPS if isinstance(func, np.ufunc) else FUNCTION_OPS).get(func)


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
# ufunc keywords a recorded call honours exactly: (the neutral values accepted). ``dtype`` is checked on the result.
_UFUNC_NEUTRAL = {"where": (True,), "casting": ("same_kind",), "order": ("K", "A", "C", "F"), "subok": (True,)}


def array_ufunc(ufunc, method, inputs, kwargs):
    op = UFUNC_OPS.get(ufunc)
    if op is None and ufunc in LOGICAL_UFUNCS and _all_bool(inputs):
        op = UFUNC_OPS.get(LOGICAL_UFUNCS[ufunc])
    if method == "__call__" and op is not None and _honoured(ufunc, kwargs):
        result = op(*inputs)
        if kwargs.get("dtype") is not None:
            same_dtype(f"np.{ufunc.__name__}", kwargs["dtype"], result)
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


def same_dtype(fname: str, dtype, result):
    """``dtype=`` is honoured when it is the result's own dtype (no cast); anything else is refused, naming
    ``fname`` ("np.sum") and the argument."""
    if dtype is not None:
        try:
            wanted = np.dtype(dtype)
        except TypeError:
            wanted = None
        if wanted != result.dtype:
            raise TypeError(
                f"np.{fname.removeprefix('np.')} on a Tensor: argument 'dtype' is not supported (only the result's "
                f"own dtype {result.dtype}; cast explicitly with ops.cast), got {dtype!r}; run numpy on the arrays "
                f"(t.detach().numpy()) or use the ops"
            )
    return result


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
