"""Tensor constructors, as torch's: ``arange``, ``zeros``, ``ones``, ``full``, ``empty`` (zeros), ``eye``,
``tril_indices`` / ``triu_indices`` (int64 positions), ``linspace``, ``logspace`` and the random ``rand``,
``randn``, ``randint``, ``randperm``, ``normal`` -- leaf Tensors made from numbers (``tape.zeros(2, 3)`` for
``torch.zeros(2, 3)``). The ops with a tensor input (``zeros_like``, ``rand_like``, ``bernoulli``,
``multinomial``, ...) are in ops/creation.py.

Dtypes follow torch: floats default to float32 (torch's default dtype), integer-only ``arange`` / ``full``
arguments give int64, ``randint`` and ``randperm`` int64. Random functions draw from ``generator=`` (a
``tape.Generator``, a numpy Generator, or an int seed) or from ``tape.default_generator`` (seeded by
``tape.manual_seed``); the streams are numpy's, not torch's. The argument helpers here are the ones
ops/creation.py uses too.
"""

__all__ = [
    "arange",
    "zeros",
    "ones",
    "full",
    "empty",
    "eye",
    "tril_indices",
    "triu_indices",
    "linspace",
    "logspace",
    "rand",
    "randn",
    "randint",
    "randperm",
    "normal",
]

import math
import numbers

import numpy as np

from .checks import integer, ints, require, require_bool
from .random import Generator, as_generator
from .tensors import Tensor

_DTYPES = (np.float32, np.float64, np.int64, np.int32, np.bool_)
DEFAULT_FLOAT = np.dtype(np.float32)


# -- arguments -----------------------------------------------------------------------------------------------
def resolve_dtype(where: str, dtype, default) -> np.dtype:
    if dtype is None:
        return np.dtype(default)
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{where}: argument 'dtype' expected a numpy dtype, got {dtype!r}") from None
    if resolved.type not in _DTYPES:
        raise TypeError(f"{where}: argument 'dtype' expected one of float32, float64, int64, int32, bool, got {dtype}")
    return resolved


def float_dtype(where: str, dtype, default=DEFAULT_FLOAT) -> np.dtype:
    resolved = resolve_dtype(where, dtype, default)
    if resolved.kind != "f":
        raise TypeError(f"{where}: argument 'dtype' expected a floating dtype (float32, float64), got {resolved}")
    return resolved


def size_tuple(where: str, size) -> tuple:
    """torch's ``*size``: ints, or one sequence of ints (``zeros(2, 3)``, ``zeros((2, 3))``)."""
    return ints(where, "size", size[0] if len(size) == 1 and isinstance(size[0], list | tuple) else size, at_least=0)


def real_number(where: str, name: str, value):
    if isinstance(value, Tensor | np.ndarray) and np.ndim(value) == 0:
        value = value.item()
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: argument '{name}' expected a real number, got {type(value).__name__} {value!r}")
    return value


def generator_of(where: str, generator) -> np.random.Generator:
    """``generator`` to draw from; an int is a seed (a fresh ``tape.Generator``), as dropout's ``rng=int``."""
    if isinstance(generator, numbers.Integral) and not isinstance(generator, bool):
        return Generator(int(generator))
    return as_generator(where, generator)


def _leaf(where: str, array: np.ndarray, requires_grad: bool) -> Tensor:
    require_bool(where, "requires_grad", requires_grad)
    if requires_grad and array.dtype.kind != "f":
        raise TypeError(f"{where}: argument 'requires_grad' needs a floating dtype, got dtype {array.dtype}")
    return Tensor(array, requires_grad=bool(requires_grad), dtype=array.dtype)


# -- plain creation functions -------------------------------------------------------------------------------
def arange(start, end=None, step=1, *, dtype=None, requires_grad=False) -> Tensor:
    """``torch.arange``: [start, end) by ``step`` (``arange(end)`` from 0); int64 when every argument is an int."""
    if end is None:
        start, end = 0, start
    start, end, step = (real_number("arange", n, v) for n, v in (("start", start), ("end", end), ("step", step)))
    integral = all(isinstance(v, numbers.Integral) for v in (start, end, step))
    out_dtype = resolve_dtype("arange", dtype, np.int64 if integral else DEFAULT_FLOAT)
    require(step != 0, "arange", "step", "a nonzero step", step)
    require((end - start) * step >= 0, "arange", "end", f"a bound reachable from start={start} by step={step}", end)
    count = int(math.ceil((end - start) / step)) if not integral else max(0, -((start - end) // step))
    if integral and out_dtype.kind in "iu":
        values = start + step * np.arange(count, dtype=np.int64)
    else:
        values = start + step * np.arange(count, dtype=np.float64)  # torch: computed in double, rounded once
    return _leaf("arange", values.astype(out_dtype), requires_grad)


def _filled(where: str, size, value, dtype, requires_grad) -> Tensor:
    return _leaf(
        where, np.full(size_tuple(where, size), value, dtype=resolve_dtype(where, dtype, DEFAULT_FLOAT)), requires_grad
    )


def zeros(*size, dtype=None, requires_grad=False) -> Tensor:
    return _filled("zeros", size, 0, dtype, requires_grad)


def ones(*size, dtype=None, requires_grad=False) -> Tensor:
    return _filled("ones", size, 1, dtype, requires_grad)


def empty(*size, dtype=None, requires_grad=False) -> Tensor:
    """``torch.empty``, filled with zeros (an uninitialised array would make results depend on memory)."""
    return _filled("empty", size, 0, dtype, requires_grad)


def _fill_dtype(fill_value) -> np.dtype:
    if isinstance(fill_value, bool | np.bool_):
        return np.dtype(np.bool_)
    return np.dtype(np.int64) if isinstance(fill_value, numbers.Integral) else DEFAULT_FLOAT


def full(size, fill_value, *, dtype=None, requires_grad=False) -> Tensor:
    """``torch.full``: the dtype follows ``fill_value`` (bool, int64, float32) unless given."""
    fill_value = real_number("full", "fill_value", fill_value)
    resolved = resolve_dtype("full", dtype, _fill_dtype(fill_value))
    return _leaf("full", np.full(size_tuple("full", (size,)), fill_value, dtype=resolved), requires_grad)


def eye(n, m=None, *, dtype=None, requires_grad=False) -> Tensor:
    n = integer("eye", "n", n, at_least=0)
    m = n if m is None else integer("eye", "m", m, at_least=0)
    return _leaf("eye", np.eye(n, m, dtype=resolve_dtype("eye", dtype, DEFAULT_FLOAT)), requires_grad)


def _triangle_indices(where: str, row, col, offset, dtype) -> Tensor:
    row, col = integer(where, "row", row, at_least=0), integer(where, "col", col, at_least=0)
    offset = integer(where, "offset", offset)
    out_dtype = resolve_dtype(where, dtype, np.int64)
    require(out_dtype.kind in "iu", where, "dtype", "an integer dtype (torch: int32 or int64)", out_dtype)
    pick = np.tril_indices if where == "tril_indices" else np.triu_indices
    return _leaf(where, np.stack(pick(row, offset, col)).astype(out_dtype).reshape(2, -1), False)


def tril_indices(row, col, offset=0, *, dtype=None) -> Tensor:
    """``torch.tril_indices(row, col, offset=0)``: the (2, N) int64 row and column positions of the lower
    triangle of a row x col matrix (on and below diagonal ``offset``), in row-major order."""
    return _triangle_indices("tril_indices", row, col, offset, dtype)


def triu_indices(row, col, offset=0, *, dtype=None) -> Tensor:
    """``torch.triu_indices(row, col, offset=0)``: the upper triangle's positions (on and above ``offset``)."""
    return _triangle_indices("triu_indices", row, col, offset, dtype)


def _linspace(where: str, start, end, steps, dtype) -> np.ndarray:
    """torch's kernel: ``start + i * step`` for i < steps // 2, ``end - (steps - 1 - i) * step`` for the rest,
    each a fused multiply-add (one rounding: computed in long double, then rounded to the output's float dtype;
    float64 for integer outputs, then truncated). One step gives ``start``."""
    start, end = real_number(where, "start", start), real_number(where, "end", end)
    steps = integer(where, "steps", steps, at_least=0)
    work = dtype if dtype.kind == "f" else np.dtype(np.float64)
    a, b = work.type(start), work.type(end)
    step = np.longdouble((b - a) / work.type(max(steps - 1, 1)))
    i = np.arange(steps)
    values = np.where(i < steps // 2, np.longdouble(a) + step * i, np.longdouble(b) - step * (steps - 1 - i))
    if steps == 1:
        values[:] = a
    return values.astype(work)


def linspace(start, end, steps, *, dtype=None, requires_grad=False) -> Tensor:
    resolved = resolve_dtype("linspace", dtype, DEFAULT_FLOAT)
    return _leaf("linspace", _linspace("linspace", start, end, steps, resolved).astype(resolved), requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, requires_grad=False) -> Tensor:
    resolved = float_dtype("logspace", dtype)
    exponents = _linspace("logspace", start, end, steps, np.dtype(np.float64))
    base = real_number("logspace", "base", base)
    return _leaf("logspace", np.power(float(base), exponents).astype(resolved), requires_grad)


# -- plain random functions ---------------------------------------------------------------------------------
def rand(*size, generator=None, dtype=None, requires_grad=False) -> Tensor:
    """Uniform on [0, 1)."""
    resolved = float_dtype("rand", dtype)
    values = generator_of("rand", generator).random(size_tuple("rand", size), dtype=resolved)
    return _leaf("rand", values, requires_grad)


def randn(*size, generator=None, dtype=None, requires_grad=False) -> Tensor:
    """Standard normal."""
    resolved = float_dtype("randn", dtype)
    values = generator_of("randn", generator).standard_normal(size_tuple("randn", size), dtype=resolved)
    return _leaf("randn", values, requires_grad)


def randint_bounds(where: str, low, high) -> tuple:
    low, high = real_number(where, "low", low), real_number(where, "high", high)
    low, high = integer(where, "low", low), integer(where, "high", high)
    require(low < high, where, "high", f"a bound above low={low} (sampling [low, high))", high)
    return low, high


def randint(*args, size=None, generator=None, dtype=None, requires_grad=False) -> Tensor:
    """``torch.randint(high, size)`` or ``randint(low, high, size)``: integers uniform on [low, high), int64."""
    if size is not None:
        args = (*args, size)
    if len(args) not in (2, 3):
        raise TypeError(f"randint: expected (high, size) or (low, high, size), got {len(args)} argument(s)")
    low, high = randint_bounds("randint", *((0,) + args[:-1] if len(args) == 2 else args[:-1]))
    shape = size_tuple("randint", (args[-1],))
    values = generator_of("randint", generator).integers(low, high, size=shape, dtype=np.int64)
    return _leaf("randint", values.astype(resolve_dtype("randint", dtype, np.int64)), requires_grad)


def randperm(n, *, generator=None, dtype=None, requires_grad=False) -> Tensor:
    """A random permutation of 0..n-1, int64."""
    n = integer("randperm", "n", n, at_least=0)
    values = generator_of("randperm", generator).permutation(n).astype(resolve_dtype("randperm", dtype, np.int64))
    return _leaf("randperm", values, requires_grad)


def _constant(where: str, name: str, value):
    if isinstance(value, Tensor):
        if value.requires_grad:
            raise TypeError(
                f"{where}: argument '{name}' requires grad; normal's gradient is zero in torch too -- pass it detached"
            )
        return value._data
    return np.asarray(value) if isinstance(value, np.ndarray) else real_number(where, name, value)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, requires_grad=False) -> Tensor:
    """Normal draws with ``mean`` and ``std`` (numbers, or arrays/Tensors broadcast together; ``size`` for
    numbers). The dtype is the tensors' (float32 for numbers)."""
    mean, std = _constant("normal", "mean", mean), _constant("normal", "std", std)
    arrays = [a for a in (mean, std) if isinstance(a, np.ndarray)]
    shape = np.broadcast_shapes(*(a.shape for a in arrays)) if arrays else None
    if size is not None or shape is None:
        require(size is not None, "normal", "size", "a size when mean and std are numbers", size)
        shape = size_tuple("normal", (size,))
    resolved = float_dtype("normal", dtype, arrays[0].dtype if arrays else DEFAULT_FLOAT)
    require(bool(np.all(np.asarray(std) >= 0)), "normal", "std", "non-negative values", std)
    draws = generator_of("normal", generator).standard_normal(shape)
    return _leaf("normal", (mean + std * draws).astype(resolved), requires_grad)
