"""Tensor's in-place face, as torch's: ``x.add_(y)``, ``x += y``, ``x[idx] = v``, ``x.zero_()``, ``x.copy_(src)``,
``x.normal_()`` ... Each runs its out-of-place op (or Tensor method) through the engine's one in-place path
(tape/inplace.py ``apply_inplace``): recorded as eager records the op, the result written into ``x``, whose history
moves onto the new node. Which ops are torch's views (their outputs share the input's memory): ``TORCH_VIEWS``.
"""

import operator
from collections.abc import Callable

import numpy as np

from tape import creation
from tape.inplace import apply_inplace
from tape.registry import get_op
from tape.tensors import Tensor

from .binary import where
from .cast import cast
from .indexing import setitem

# torch's view ops among ours: their outputs share memory with the input (numpy's view, where it is one)
TORCH_VIEWS = (
    "getitem", "reshape", "view_as", "reshape_as", "flatten", "unflatten", "ravel", "squeeze", "unsqueeze",
    "transpose", "permute", "movedim", "expand", "expand_as", "broadcast_tensors", "narrow", "select", "split",
    "chunk", "unbind", "tensor_split", "hsplit", "vsplit", "dsplit", "diagonal", "atleast_1d", "atleast_2d",
    "atleast_3d", "meshgrid",
)  # fmt: skip

# torch's in-place methods ``name_`` whose out-of-place ``name`` is a Tensor method here, the tensor's shape kept
# (tests/ops/test_inplace.py checks this list against torch.Tensor: every such method of torch's is here)
INPLACE = (
    "abs", "absolute", "acos", "arccos", "acosh", "arccosh", "add", "addbmm", "addcdiv", "addcmul", "addmm", "addmv",
    "addr", "asin", "arcsin", "asinh", "arcsinh", "atan", "arctan", "atan2", "arctan2", "atanh", "arctanh", "baddbmm",
    "bitwise_and", "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift", "bitwise_xor", "ceil",
    "clamp", "clip", "clamp_max", "clamp_min", "copysign", "cos", "cosh", "cumprod", "cumsum", "deg2rad", "digamma",
    "div", "divide", "true_divide", "eq", "erf", "erfc", "erfinv", "exp2", "exp", "expm1", "fix", "floor",
    "floor_divide", "fmod", "frac", "gcd", "ge", "greater_equal", "gt", "greater", "heaviside", "hypot", "i0",
    "index_add", "index_copy", "index_fill", "index_put", "index_reduce", "lcm", "ldexp", "le", "less_equal", "lerp",
    "lgamma", "log10", "log1p", "log2", "log", "logical_and", "logical_not", "logical_or", "logical_xor", "logit",
    "lt", "less", "masked_fill", "masked_scatter", "mul", "multiply", "mvlgamma", "nan_to_num", "ne", "not_equal",
    "neg", "negative", "nextafter", "polygamma", "pow", "rad2deg", "reciprocal", "relu", "remainder", "renorm",
    "round", "rsqrt", "scatter", "scatter_add", "scatter_reduce", "sgn", "sigmoid", "sign", "sin", "sinc", "sinh",
    "sqrt", "square", "sub", "subtract", "tan", "tanh", "tril", "triu", "trunc", "xlogy",
)  # fmt: skip

# Python's augmented assignments: ``x += y`` is ``x.add_(y)`` (identity kept), as torch's
AUGMENTED = {
    "__iadd__": operator.add, "__isub__": operator.sub, "__imul__": operator.mul, "__itruediv__": operator.truediv,
    "__ifloordiv__": operator.floordiv, "__imod__": operator.mod, "__ipow__": operator.pow, "__iand__": operator.and_,
    "__ior__": operator.or_, "__ixor__": operator.xor, "__ilshift__": operator.lshift, "__irshift__": operator.rshift,
}  # fmt: skip


def _method_inplace(name: str):
    """``Tensor.<name>_``: the method ``name`` on the old value, written into the tensor."""

    def run(old, *args, **kwargs):
        return getattr(old, name)(*args, **kwargs)

    def method(self, *args, **kwargs):
        return apply_inplace(run, self, (self, *args), kwargs, f"Tensor.{name}_")

    method.__doc__ = f"In place: ``t.{name}(...)`` written into ``t`` (torch's ``{name}_``); returns ``t``."
    return method


def _augmented(name: str, fn):
    def method(self, other):
        return apply_inplace(fn, self, (self, other), {}, f"Tensor.{name}")

    method.__doc__ = f"``t {name[3:-2]}= other`` in place, as torch's: ``t`` keeps its identity."
    return method


def _values_of(self, value, who: str):
    """A value to write into ``self``: a Tensor cast to self's dtype (torch's copy semantics, recorded), anything
    else as an array of self's dtype whose values it holds exactly."""
    if isinstance(value, Tensor):
        return value if value.dtype == self.dtype else cast(value, self.dtype)
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{who}: expected numbers or a Tensor to write into a {self.dtype} tensor, got {array.dtype}")
    converted = array.astype(self.dtype)
    if self.dtype.kind in "iu" and not np.array_equal(converted, array):
        raise RuntimeError(f"{who}: value {value!r} cannot be converted to {self.dtype} without overflow or rounding")
    return Tensor._wrap(converted)


def _setitem(self, index, value):
    """``t[index] = value`` in place (ops.setitem): every index form ``t[index]`` reads; a value that requires grad
    gets its gradient, as torch's."""
    apply_inplace(setitem, self, (self, _values_of(self, value, "Tensor.__setitem__")), {"index": index}, "setitem")


_FALSE = Tensor._wrap(np.array(False))


def _copied(old, src):
    """``src`` broadcast to ``old``'s shape, as a function of both: ``old`` gets a zero gradient, as in torch."""
    return where(_FALSE, old, src)


def copy_(self, src, non_blocking=False):
    """``src`` (broadcast to this tensor's shape, cast to its dtype) written into this tensor, as torch's; ``src``'s
    gradient flows from it."""
    return apply_inplace(_copied, self, (self, _values_of(self, src, "Tensor.copy_")), {}, "Tensor.copy_")


def fill_(self, value):
    """Every element set to ``value`` (a number, or a one-element Tensor whose gradient flows from it)."""
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError(f"Tensor.fill_: a Tensor value must have 0 dims, got shape {value.shape}")
    return apply_inplace(_copied, self, (self, _values_of(self, value, "Tensor.fill_")), {}, "Tensor.fill_")


def zero_(self):
    """Every element set to 0, as torch's."""
    return fill_(self, 0)


def detach_(self):
    """Cut this tensor from the graph in place (torch's ``detach_``): it becomes a leaf that needs no gradient."""
    self._node = None
    self._requires_grad = False
    return self


def _drawn(who: str, draw):
    """A method writing values drawn from the generator (torch's ``normal_``, ``uniform_`` ...); the old values get
    a zero gradient, as in torch."""

    def method(self, *args, generator=None):
        rng = creation.generator_of(f"Tensor.{who}", generator)
        values = Tensor._wrap(np.asarray(draw(rng, self.shape, *args)).astype(self.dtype))
        return apply_inplace(_copied, self, (self, values), {}, f"Tensor.{who}")

    method.__name__ = who
    return method


_DRAWS: dict[str, Callable] = {
    "normal_": lambda rng, shape, mean=0.0, std=1.0: rng.normal(mean, std, shape),
    "uniform_": lambda rng, shape, a=0.0, b=1.0: rng.uniform(a, b, shape),
    "bernoulli_": lambda rng, shape, p=0.5: rng.random(shape) < np.asarray(p),
    "exponential_": lambda rng, shape, lambd=1.0: rng.exponential(1.0 / lambd, shape),
    "log_normal_": lambda rng, shape, mean=1.0, std=2.0: rng.lognormal(mean, std, shape),
    "cauchy_": lambda rng, shape, median=0.0, sigma=1.0: median + sigma * rng.standard_cauchy(shape),
    "geometric_": lambda rng, shape, p: rng.geometric(p, shape),
    "random_": lambda rng, shape, low=0, high=None: (
        rng.integers(0, low, shape) if high is None else rng.integers(low, high, shape)
    ),
}


def methods() -> dict:
    """Tensor's in-place methods and Python's in-place operators (installed by ops/_tensor.py)."""
    table = {f"{name}_": _method_inplace(name) for name in INPLACE}
    table.update({name: _augmented(name, fn) for name, fn in AUGMENTED.items()})
    table.update({f"{who}": _drawn(who, draw) for who, draw in _DRAWS.items()})
    table.update({"__setitem__": _setitem, "copy_": copy_, "fill_": fill_, "zero_": zero_, "detach_": detach_})
    return table


def declare_views() -> None:
    for name in TORCH_VIEWS:
        get_op(name).declare_view()
