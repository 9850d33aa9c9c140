"""The op library's side of Tensor: Python's operators (``+``, ``==``, ``[]``, ``&``, ``<<`` ...) and the Tensor methods
whose torch signature is not one op's (``t.reshape(2, 3)``, ``t.max(dim)``, ``t.float()`` ...). The engine core
names no op; the ops that are Tensor methods as they are declare ``method=`` (tape/registry.py)."""

import numpy as np

from tape.tensor_api import OPERATORS, _OpMethod, _shape_args, add_method
from tape.tensors import Tensor

from . import _inplace
from ._torch_methods import methods as torch_methods
from .binary import (
    add,
    div,
    eq,
    floor_divide,
    ge,
    gt,
    le,
    logical_and,
    logical_or,
    logical_xor,
    lt,
    maximum,
    minimum,
    mul,
    ne,
    pow,
    remainder,
    sub,
    where,
)
from .bitwise import bitwise_and, bitwise_left_shift, bitwise_not, bitwise_or, bitwise_right_shift, bitwise_xor
from .cast import cast
from .elementwise import abs, clone, logical_not, neg
from .indexing import getitem, scatter
from .linalg import matmul
from .movement import flip, tile
from .reduce import max, min
from .shape import expand, permute, repeat, reshape, transpose
from .sorting import median, median_dim, nanmedian
from .special import polygamma


def _is_bool(value) -> bool:
    """True for a bool tensor, array or Python bool."""
    dtype = getattr(value, "dtype", None)
    return isinstance(value, bool | np.bool_) or (dtype is not None and np.dtype(dtype) == np.bool_)


def _binary(op):
    """The operator and its reflected form (``a + b`` and ``b + a`` with ``b`` not a Tensor)."""
    return (lambda self, other: op(self, other)), (lambda self, other: op(other, self))


def _logical_or_bitwise(logical, bitwise):
    """``&``, ``|``, ``^`` as torch's: the logical op when both operands are bool, else the bitwise op (which
    refuses floating operands, naming itself)."""

    def pick(a, b):
        return logical(a, b) if _is_bool(a) and _is_bool(b) else bitwise(a, b)

    return (lambda self, other: pick(self, other)), (lambda self, other: pick(other, self))


def _operators() -> dict:
    """Each of Python's operators on Tensor (``tape.tensors.OPERATORS``) and its op."""
    table = {}
    for name, op in [("add", add), ("sub", sub), ("mul", mul), ("truediv", div), ("pow", pow),
                     ("floordiv", floor_divide), ("mod", remainder), ("matmul", matmul)]:  # fmt: skip
        table[f"__{name}__"], table[f"__r{name}__"] = _binary(op)
    for name, logical, bitwise in [("and", logical_and, bitwise_and), ("or", logical_or, bitwise_or),
                                   ("xor", logical_xor, bitwise_xor)]:  # fmt: skip
        table[f"__{name}__"], table[f"__r{name}__"] = _logical_or_bitwise(logical, bitwise)
    table["__lshift__"], table["__rlshift__"] = _binary(bitwise_left_shift)
    table["__rshift__"], table["__rrshift__"] = _binary(bitwise_right_shift)
    for name, op in [("eq", eq), ("ne", ne), ("lt", lt), ("le", le), ("gt", gt), ("ge", ge), ("getitem", getitem)]:
        table[f"__{name}__"] = _binary(op)[0]
    table["__neg__"] = lambda self: neg(self)
    table["__abs__"] = lambda self: abs(self)
    table["__invert__"] = lambda self: logical_not(self) if _is_bool(self) else bitwise_not(self)
    return table


# -- methods whose torch signature is not the op's -------------------------------------------------------------
def _max(self, dim=None, keepdim=False):
    """torch's Tensor.max: ops.max (the largest entry, or with ``dim`` the named (values, indices)); with a
    tensor, the elementwise maximum."""
    return maximum(self, dim) if isinstance(dim, Tensor) else max(self, dim, keepdim)


def _min(self, dim=None, keepdim=False):
    """torch's Tensor.min, as ``max``."""
    return minimum(self, dim) if isinstance(dim, Tensor) else min(self, dim, keepdim)


def _median(self, dim=None, keepdim=False):
    """torch's Tensor.median: the lower median of every entry, or (values, indices) along ``dim``."""
    if dim is None:
        if keepdim:
            raise TypeError("keepdim=True needs a dim (torch's max / min / median take keepdim only with a dim)")
        return median(self)
    return median_dim(self, dim, keepdim)


def _polygamma(self, n):
    """torch's Tensor.polygamma(n): ops.polygamma(n, self) (the order comes first in the op, as in torch)."""
    return polygamma(n, self)


def _nanmedian(self, dim=None, keepdim=False):
    """torch's Tensor.nanmedian: one value without ``dim`` (the op returns (values, indices) with it)."""
    return nanmedian(self, dim, keepdim)


def _where(self, condition, other):
    """torch's Tensor.where: ``self`` where ``condition`` holds, else ``other`` (ops.where(condition, self,
    other))."""
    return where(condition, self, other)


def _scatter(self, dim, index, src=None, value=None):
    """torch's Tensor.scatter(dim, index, src) and its number form scatter(dim, index, value)."""
    if isinstance(src, int | float):
        src, value = None, src
    return scatter(self, dim, index, src, value)


def _shaped(op):
    """A method taking its shape or dims as separate ints or one sequence (``t.reshape(2, 3)``, ``t.flip(0, 1)``)."""

    def method(self, *shape):
        return op(self, _shape_args(shape))

    method.__name__ = op.name
    method.__doc__ = f"The op {op.signature}; the sizes as separate ints or one sequence, as torch's."
    return method


def _cast_to(dtype):
    def method(self):
        return cast(self, dtype)

    method.__doc__ = f"This tensor cast to {np.dtype(dtype)} (ops.cast)."
    return method


def _type_as(self, other: Tensor) -> Tensor:
    """This tensor cast to ``other``'s dtype (ops.cast)."""
    return cast(self, other.dtype)


def _clone(self) -> Tensor:
    """A copy that stays in the graph (ops.clone): its gradient flows back to this tensor."""
    return clone(self)


def _transposed(self) -> Tensor:
    """The tensor with its dims reversed (torch's Tensor.T)."""
    return permute(self, tuple(reversed(range(self.ndim))))


def _matrix_transposed(name: str):
    def transposed(self) -> Tensor:
        if self.ndim < 2:
            raise ValueError(
                f"{name}: expected a matrix or a batch of matrices (at least 2 dimensions), got a {self.ndim}-D tensor"
            )
        return transpose(self, -2, -1)

    transposed.__doc__ = f"Tensor.{name}: the last two dims swapped (real tensors: mT and mH are the same)."
    return property(transposed)


def _methods() -> dict:
    return {
        "max": _max,
        "min": _min,
        "median": _median,
        "where": _where,
        "polygamma": _polygamma,
        "nanmedian": _nanmedian,
        "scatter": _scatter,
        **{op.name: _shaped(op) for op in (reshape, permute, expand, repeat, tile, flip)},
        "view": _shaped(reshape),
        "float": _cast_to(np.float32),
        "double": _cast_to(np.float64),
        "long": _cast_to(np.int64),
        "int": _cast_to(np.int32),
        "short": _cast_to(np.int16),
        "char": _cast_to(np.int8),
        "byte": _cast_to(np.uint8),
        "half": _cast_to(np.float16),
        "bool": _cast_to(np.bool_),
        "type_as": _type_as,
        "clone": _clone,
        "T": property(_transposed),
        "mT": _matrix_transposed("mT"),
        "mH": _matrix_transposed("mH"),
        **torch_methods(),  # to / cpu / cuda / device / type (ops/_torch_methods.py)
    }


# torch's other names for ops that are Tensor methods under their own name: alias -> the op's name
METHOD_ALIASES = {
    "fix": "trunc", "absolute": "abs", "negative": "neg", "clip": "clamp", "arcsin": "asin", "arccos": "acos",
    "arctan": "atan", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "arctan2": "atan2",
    "multiply": "mul", "divide": "div", "true_divide": "div", "subtract": "sub", "greater": "gt",
    "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne", "moveaxis": "movedim",
    "broadcast_to": "expand",
}  # fmt: skip


def _aliases() -> dict:
    from tape.registry import get_op

    return {alias: _OpMethod(get_op(name)) for alias, name in METHOD_ALIASES.items()}


def install() -> None:
    """Give Tensor its operators and these methods, and its in-place face (ops/_inplace.py), once, by ops/__init__."""
    _inplace.declare_views()
    inplace_methods = _inplace.methods()
    operators = {**_operators(), **{k: v for k, v in inplace_methods.items() if k in OPERATORS}}
    if set(operators) != set(OPERATORS):
        raise ImportError(f"ops/_tensor.py: Tensor's operators and their ops differ: {set(OPERATORS) ^ set(operators)}")
    for name, function in {**inplace_methods, **operators, **_methods(), **_aliases()}.items():
        add_method(name, function)
