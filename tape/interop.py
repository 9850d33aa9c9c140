"""numpy's array protocols for Tensor: numpy functions called on tensors run the registered ops.

``np.exp(t)``, ``np.sum(t, axis=1)``, ``np.where(c, t, 0)``, ``ndarray * t`` ... dispatch to ``ops.exp``,
``ops.sum`` ... so they are recorded and stay differentiable (MyGrad's and HIPS autograd's choice). This is
also how backward rules become differentiable: a rule written over the numpy API, called on Tensors by the
second-order pass, records its own computation.

What has no registered op is refused with a TypeError when a tensor involved needs a gradient (numpy would
otherwise drop that gradient silently); on constant tensors it runs on the arrays and returns numpy's result.
In-place forms (``out=``), ufunc methods (``np.add.at``, ``.reduce``) and unknown keywords count as having no op.
"""

from __future__ import annotations

import numpy as np

from . import tensors
from .state import needs_grad

__all__ = ["array_ufunc", "array_function", "UFUNC_OPS", "FUNCTION_OPS"]

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


def array_ufunc(ufunc, method, inputs, kwargs):
    name = UFUNC_OPS.get(ufunc)
    if name is None and ufunc in LOGICAL_UFUNCS and _all_bool(inputs):
        name = LOGICAL_UFUNCS[ufunc]
    op = getattr(_lib(), name, None) if name is not None else None
    if method == "__call__" and op is not None and not kwargs:
        return op(*inputs)
    if _any_needs_grad(inputs) or _any_needs_grad(tuple(kwargs.values())):
        if op is None:
            _refuse(f"{ufunc.__name__}", "minitape has no registered op for it")
        if method != "__call__":
            _refuse(f"{ufunc.__name__}.{method}", "ufunc methods are not recorded")
        _refuse(
            f"{ufunc.__name__}(..., {', '.join(kwargs)}=...)", "in-place outputs and ufunc keywords are not recorded"
        )
    return getattr(ufunc, method)(*_arrays(inputs), **{k: _arrays(v) for k, v in kwargs.items()})


# -- numpy functions -------------------------------------------------------------------------------------------
def _reduction(op_name):
    def run(a, axis=None, keepdims=False):
        return getattr(_lib(), op_name)(a, dim=axis, keepdim=keepdims)

    return run


def _moments(op_name):
    def run(a, axis=None, ddof=0, keepdims=False):
        return getattr(_lib(), op_name)(a, dim=axis, correction=ddof, keepdim=keepdims)

    return run


def _transpose(a, axes=None):
    return _lib().permute(a, tuple(reversed(range(a.ndim))) if axes is None else tuple(axes))


def _moveaxis(a, source, destination):
    source = [s % a.ndim for s in np.atleast_1d(source)]
    destination = [d % a.ndim for d in np.atleast_1d(destination)]
    order = [n for n in range(a.ndim) if n not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return _lib().permute(a, tuple(order))


def _expand_dims(a, axis):
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    ndim = a.ndim + len(axes)
    for ax in sorted(int(x) % ndim for x in axes):
        a = _lib().unsqueeze(a, ax)
    return a


def _dot(a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return _lib().mul(a, b)
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        _refuse("dot", "only dot of 1-D and 2-D arrays maps to matmul")
    return _lib().matmul(a, b)


FUNCTION_OPS = {
    np.sum: _reduction("sum"),
    np.mean: _reduction("mean"),
    np.max: _reduction("amax"),  # numpy's max is torch's amax: values only, any dims, ties sharing the gradient
    np.min: _reduction("amin"),
    np.amax: _reduction("amax"),
    np.amin: _reduction("amin"),
    np.prod: _reduction("prod"),
    np.var: _moments("var"),
    np.std: _moments("std"),
    np.where: lambda condition, x, y: _lib().where(condition, x, y),
    np.reshape: lambda a, shape: _lib().reshape(a, shape),
    np.transpose: _transpose,
    np.swapaxes: lambda a, axis1, axis2: _lib().transpose(a, axis1, axis2),
    np.moveaxis: _moveaxis,
    np.expand_dims: _expand_dims,
    np.squeeze: lambda a, axis=None: _lib().squeeze(a, axis),
    np.broadcast_to: lambda array, shape: _lib().expand(array, tuple(shape)),
    np.concatenate: lambda arrays, axis=0: _lib().concat(list(arrays), axis),
    np.stack: lambda arrays, axis=0: _lib().stack(list(arrays), axis),
    np.einsum: lambda subscripts, *operands: _lib().einsum(subscripts, *operands),
    np.clip: lambda a, a_min=None, a_max=None: _lib().clamp(a, a_min, a_max),
    np.take_along_axis: lambda arr, indices, axis: _lib().gather(arr, axis, indices),
    np.tril: lambda m, k=0: _lib().tril(m, k),
    np.triu: lambda m, k=0: _lib().triu(m, k),
    np.dot: _dot,
    np.cumsum: lambda a, axis=None: _lib().cumsum(a, axis),
    np.flip: lambda m, axis=None: _lib().flip(m, tuple(range(np.ndim(m))) if axis is None else axis),
    np.roll: lambda a, shift, axis=None: _lib().roll(a, shift, axis),
    np.tile: lambda A, reps: _lib().tile(A, reps),
    np.diagonal: lambda a, offset=0, axis1=0, axis2=1: _lib().diagonal(a, offset, axis1, axis2),
    np.cumprod: lambda a, axis=None: _lib().cumprod(a, axis),
    np.diag: lambda v, k=0: _lib().diag(v, k),
    np.fliplr: lambda m: _lib().flip(m, (1,)),
    np.flipud: lambda m: _lib().flip(m, (0,)),
    np.outer: lambda a, b: _lib().outer(a, b),
    np.tensordot: lambda a, b, axes=2: _lib().tensordot(a, b, axes),
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
    np.full_like,
    np.array2string,
    np.array_repr,
    np.array_str,
    np.isclose,
}


def array_function(func, args, kwargs):
    handler = FUNCTION_OPS.get(func)
    if handler is not None:
        return handler(*args, **kwargs)
    if func not in NO_GRADIENT_FUNCTIONS and (_any_needs_grad(args) or _any_needs_grad(tuple(kwargs.values()))):
        _refuse(func.__name__, "minitape has no registered op for it")
    return func(*_arrays(args), **{k: _arrays(v) for k, v in kwargs.items()})
