"""Creation and random functions, as torch's: ``arange``, ``zeros``, ``full``, ``eye``, ``linspace``, ``rand``,
``randn``, ``randint``, ``randperm``, ``normal`` (plain functions returning leaf Tensors) and the ops with a tensor
input: ``zeros_like``, ``ones_like``, ``full_like``, ``empty_like``, ``rand_like``, ``randn_like``,
``randint_like``, ``bernoulli`` and ``multinomial``.

Dtypes follow torch: floats default to float32 (torch's default dtype), integer-only ``arange`` / ``full``
arguments give int64, ``randint`` and ``randperm`` int64. Random functions draw from ``generator=`` (a
``tape.Generator``, a numpy Generator, or an int seed) or from ``tape.default_generator`` (seeded by
``tape.manual_seed``); the streams are numpy's, not torch's. The ``*_like`` ops and ``bernoulli`` have a zero
gradient (their output does not depend on the input's values, torch's rule); ``multinomial`` returns indices.
"""

__all__ = [
    "arange",
    "zeros",
    "ones",
    "full",
    "empty",
    "eye",
    "linspace",
    "logspace",
    "rand",
    "randn",
    "randint",
    "randperm",
    "normal",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "rand_like",
    "randn_like",
    "randint_like",
    "bernoulli",
    "multinomial",
]

import math
import numbers

import numpy as np

from tape.random import Generator, as_generator
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop
from tape.tensors import Tensor

from ._samples import transposed, uniform
from ._validation import require

_DTYPES = (np.float32, np.float64, np.int64, np.int32, np.bool_)
_DEFAULT_FLOAT = np.dtype(np.float32)


# -- arguments -----------------------------------------------------------------------------------------------
def _dtype(where: str, dtype, default) -> np.dtype:
    if dtype is None:
        return np.dtype(default)
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{where}: argument 'dtype' expected a numpy dtype, got {dtype!r}") from None
    if resolved.type not in _DTYPES:
        raise TypeError(f"{where}: argument 'dtype' expected one of float32, float64, int64, int32, bool, got {dtype}")
    return resolved


def _float_dtype(where: str, dtype, default=_DEFAULT_FLOAT) -> np.dtype:
    resolved = _dtype(where, dtype, default)
    if resolved.kind != "f":
        raise TypeError(f"{where}: argument 'dtype' expected a floating dtype (float32, float64), got {resolved}")
    return resolved


def _size(where: str, size) -> tuple:
    """torch's ``*size``: ints, or one sequence of ints (``zeros(2, 3)``, ``zeros((2, 3))``)."""
    if len(size) == 1 and isinstance(size[0], list | tuple):
        size = tuple(size[0])
    for n in size:
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError(f"{where}: argument 'size' expected ints, got {type(n).__name__} {n!r}")
        require(int(n) >= 0, where, "size", "non-negative dimension sizes", tuple(size))
    return tuple(int(n) for n in size)


def _number(where: str, name: str, value):
    if isinstance(value, Tensor | np.ndarray) and np.ndim(value) == 0:
        value = value.item()
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: argument '{name}' expected a real number, got {type(value).__name__} {value!r}")
    return value


def _generator(where: str, generator) -> np.random.Generator:
    """``generator`` to draw from; an int is a seed (a fresh ``tape.Generator``), as dropout's ``rng=int``."""
    if isinstance(generator, numbers.Integral) and not isinstance(generator, bool):
        return Generator(int(generator))
    return as_generator(where, generator)


def _leaf(where: str, array: np.ndarray, requires_grad: bool) -> Tensor:
    if requires_grad and array.dtype.kind != "f":
        raise TypeError(f"{where}: argument 'requires_grad' needs a floating dtype, got dtype {array.dtype}")
    return Tensor(array, requires_grad=bool(requires_grad), dtype=array.dtype)


# -- plain creation functions -------------------------------------------------------------------------------
def arange(start, end=None, step=1, *, dtype=None, requires_grad=False) -> Tensor:
    """``torch.arange``: [start, end) by ``step`` (``arange(end)`` from 0); int64 when every argument is an int."""
    if end is None:
        start, end = 0, start
    start, end, step = (_number("arange", n, v) for n, v in (("start", start), ("end", end), ("step", step)))
    integral = all(isinstance(v, numbers.Integral) for v in (start, end, step))
    out_dtype = _dtype("arange", dtype, np.int64 if integral else _DEFAULT_FLOAT)
    require(step != 0, "arange", "step", "a nonzero step", step)
    require((end - start) * step >= 0, "arange", "end", f"a bound reachable from start={start} by step={step}", end)
    count = int(math.ceil((end - start) / step)) if not integral else max(0, -((start - end) // step))
    if integral and out_dtype.kind in "iu":
        values = start + step * np.arange(count, dtype=np.int64)
    else:
        values = start + step * np.arange(count, dtype=np.float64)  # torch: computed in double, rounded once
    return _leaf("arange", values.astype(out_dtype), requires_grad)


def _filled(where: str, size, value, dtype, requires_grad) -> Tensor:
    return _leaf(where, np.full(_size(where, size), value, dtype=_dtype(where, dtype, _DEFAULT_FLOAT)), requires_grad)


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
    return np.dtype(np.int64) if isinstance(fill_value, numbers.Integral) else _DEFAULT_FLOAT


def full(size, fill_value, *, dtype=None, requires_grad=False) -> Tensor:
    """``torch.full``: the dtype follows ``fill_value`` (bool, int64, float32) unless given."""
    fill_value = _number("full", "fill_value", fill_value)
    resolved = _dtype("full", dtype, _fill_dtype(fill_value))
    return _leaf("full", np.full(_size("full", (size,)), fill_value, dtype=resolved), requires_grad)


def eye(n, m=None, *, dtype=None, requires_grad=False) -> Tensor:
    n, m = _size("eye", (n, n if m is None else m))
    return _leaf("eye", np.eye(n, m, dtype=_dtype("eye", dtype, _DEFAULT_FLOAT)), requires_grad)


def _linspace(where: str, start, end, steps, dtype) -> np.ndarray:
    """torch's kernel: ``start + i * step`` for i < steps // 2, ``end - (steps - 1 - i) * step`` for the rest,
    each a fused multiply-add (one rounding: computed in long double, then rounded to the output's float dtype;
    float64 for integer outputs, then truncated). One step gives ``start``."""
    start, end = _number(where, "start", start), _number(where, "end", end)
    (steps,) = _size(where, (steps,))
    work = dtype if dtype.kind == "f" else np.dtype(np.float64)
    a, b = work.type(start), work.type(end)
    step = np.longdouble((b - a) / work.type(max(steps - 1, 1)))
    i = np.arange(steps)
    values = np.where(i < steps // 2, np.longdouble(a) + step * i, np.longdouble(b) - step * (steps - 1 - i))
    if steps == 1:
        values[:] = a
    return values.astype(work)


def linspace(start, end, steps, *, dtype=None, requires_grad=False) -> Tensor:
    resolved = _dtype("linspace", dtype, _DEFAULT_FLOAT)
    return _leaf("linspace", _linspace("linspace", start, end, steps, resolved).astype(resolved), requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, requires_grad=False) -> Tensor:
    resolved = _float_dtype("logspace", dtype)
    exponents = _linspace("logspace", start, end, steps, np.dtype(np.float64))
    base = _number("logspace", "base", base)
    return _leaf("logspace", np.power(float(base), exponents).astype(resolved), requires_grad)


# -- plain random functions ---------------------------------------------------------------------------------
def rand(*size, generator=None, dtype=None, requires_grad=False) -> Tensor:
    """Uniform on [0, 1)."""
    resolved = _float_dtype("rand", dtype)
    values = _generator("rand", generator).random(_size("rand", size), dtype=resolved)
    return _leaf("rand", values, requires_grad)


def randn(*size, generator=None, dtype=None, requires_grad=False) -> Tensor:
    """Standard normal."""
    resolved = _float_dtype("randn", dtype)
    values = _generator("randn", generator).standard_normal(_size("randn", size), dtype=resolved)
    return _leaf("randn", values, requires_grad)


def _randint_bounds(where: str, low, high) -> tuple:
    low, high = _number(where, "low", low), _number(where, "high", high)
    for name, v in (("low", low), ("high", high)):
        if not isinstance(v, numbers.Integral):
            raise TypeError(f"{where}: argument '{name}' expected an int, got {type(v).__name__} {v!r}")
    require(low < high, where, "high", f"a bound above low={low} (sampling [low, high))", high)
    return int(low), int(high)


def randint(*args, size=None, generator=None, dtype=None, requires_grad=False) -> Tensor:
    """``torch.randint(high, size)`` or ``randint(low, high, size)``: integers uniform on [low, high), int64."""
    if size is not None:
        args = (*args, size)
    if len(args) not in (2, 3):
        raise TypeError(f"randint: expected (high, size) or (low, high, size), got {len(args)} argument(s)")
    low, high = _randint_bounds("randint", *((0,) + args[:-1] if len(args) == 2 else args[:-1]))
    shape = _size("randint", (args[-1],))
    values = _generator("randint", generator).integers(low, high, size=shape, dtype=np.int64)
    return _leaf("randint", values.astype(_dtype("randint", dtype, np.int64)), requires_grad)


def randperm(n, *, generator=None, dtype=None, requires_grad=False) -> Tensor:
    """A random permutation of 0..n-1, int64."""
    (n,) = _size("randperm", (n,))
    values = _generator("randperm", generator).permutation(n).astype(_dtype("randperm", dtype, np.int64))
    return _leaf("randperm", values, requires_grad)


def _constant(where: str, name: str, value):
    if isinstance(value, Tensor):
        if value.requires_grad:
            raise TypeError(
                f"{where}: argument '{name}' requires grad; normal's gradient is zero in torch too -- pass it detached"
            )
        return value.data
    return np.asarray(value) if isinstance(value, np.ndarray) else _number(where, name, value)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, requires_grad=False) -> Tensor:
    """Normal draws with ``mean`` and ``std`` (numbers, or arrays/Tensors broadcast together; ``size`` for
    numbers). The dtype is the tensors' (float32 for numbers)."""
    mean, std = _constant("normal", "mean", mean), _constant("normal", "std", std)
    arrays = [a for a in (mean, std) if isinstance(a, np.ndarray)]
    shape = np.broadcast_shapes(*(a.shape for a in arrays)) if arrays else None
    if size is not None or shape is None:
        require(size is not None, "normal", "size", "a size when mean and std are numbers", size)
        shape = _size("normal", (size,))
    resolved = _float_dtype("normal", dtype, arrays[0].dtype if arrays else _DEFAULT_FLOAT)
    require(bool(np.all(np.asarray(std) >= 0)), "normal", "std", "non-negative values", std)
    draws = _generator("normal", generator).standard_normal(shape)
    return _leaf("normal", (mean + std * draws).astype(resolved), requires_grad)


# -- ops with a tensor input --------------------------------------------------------------------------------
def _zero_vjp(g, ans, input, *args, **attrs):
    return np.zeros_like(input)


def _like_samples(**attrs):
    def generate(rng):
        return [
            Sample((uniform(rng, (2, 3)),), dict(attrs), "matrix"),
            Sample((uniform(rng, ()),), dict(attrs), "scalar"),
            Sample((transposed(rng, (3, 4)),), dict(attrs), "non-contiguous"),
            Sample((uniform(rng, (0, 3)),), dict(attrs), "zero-size"),
        ]

    return generate


def _like(name: str, forward, torch_ref, samples, random=False):
    return defop(
        name,
        family="creation",
        inputs=("input",),
        forward=forward,
        vjps=(_zero_vjp,),
        samples=samples,
        torch_ref=None if random else torch_ref,
        notes="the output does not depend on the input's values: the gradient is zero (torch's output requires "
        "no grad)" + ("; the draws are numpy's stream, not torch's" if random else ""),
    )


def _like_dtype(where: str, input, dtype) -> np.dtype:
    return _dtype(where, dtype, input.dtype)


def _torch_dtype(torch, dtype):
    return None if dtype is None else getattr(torch, np.dtype(dtype).name)


zeros_like = _like(
    "zeros_like",
    lambda input, *, dtype=None: np.zeros(input.shape, _like_dtype("zeros_like", input, dtype)),
    lambda torch, input, dtype=None: torch.zeros_like(input, dtype=_torch_dtype(torch, dtype)),
    _like_samples(),
)
ones_like = _like(
    "ones_like",
    lambda input, *, dtype=None: np.ones(input.shape, _like_dtype("ones_like", input, dtype)),
    lambda torch, input, dtype=None: torch.ones_like(input, dtype=_torch_dtype(torch, dtype)),
    _like_samples(),
)
empty_like = _like(
    "empty_like",
    lambda input, *, dtype=None: np.zeros(input.shape, _like_dtype("empty_like", input, dtype)),
    lambda torch, input, dtype=None: torch.zeros_like(input, dtype=_torch_dtype(torch, dtype)),  # ours: zeros
    _like_samples(),
)


def _full_like(input, fill_value, *, dtype=None):
    return np.full(input.shape, _number("full_like", "fill_value", fill_value), _like_dtype("full_like", input, dtype))


full_like = _like(
    "full_like",
    _full_like,
    lambda torch, input, fill_value, dtype=None: torch.full_like(input, fill_value, dtype=_torch_dtype(torch, dtype)),
    _like_samples(fill_value=2.5),
)


def _random_float_dtype(where: str, input, dtype) -> np.dtype:
    """torch refuses an integer input unless a float ``dtype`` is given."""
    if dtype is None and input.dtype.kind != "f":
        raise TypeError(f"{where}: argument 'input' expected a floating tensor (or a float dtype=), got {input.dtype}")
    return _float_dtype(where, dtype, input.dtype)


def _rand_like(input, *, generator=None, dtype=None):
    resolved = _random_float_dtype("rand_like", input, dtype)
    return _generator("rand_like", generator).random(input.shape, dtype=resolved)


def _randn_like(input, *, generator=None, dtype=None):
    resolved = _random_float_dtype("randn_like", input, dtype)
    return _generator("randn_like", generator).standard_normal(input.shape, dtype=resolved)


def _randint_like(input, low=0, high=None, *, generator=None, dtype=None):
    """``randint_like(input, high)`` or ``randint_like(input, low, high)``; the input's dtype."""
    low, high = _randint_bounds("randint_like", *((0, low) if high is None else (low, high)))
    draws = _generator("randint_like", generator).integers(low, high, size=input.shape, dtype=np.int64)
    return draws.astype(_like_dtype("randint_like", input, dtype))


rand_like = _like("rand_like", _rand_like, None, _like_samples(generator=0), random=True)
randn_like = _like("randn_like", _randn_like, None, _like_samples(generator=0), random=True)
randint_like = _like("randint_like", _randint_like, None, _like_samples(low=-3, high=4, generator=0), random=True)


def _bernoulli(input, p=None, *, generator=None):
    """1 with probability ``input`` (or ``p`` when given), else 0; the input's dtype."""
    probability = input if p is None else _number("bernoulli", "p", p)
    return (_generator("bernoulli", generator).random(input.shape) < probability).astype(input.dtype)


def _check_bernoulli(input, p=None, *, generator=None):
    if input.dtype.kind != "f":
        raise TypeError(f"bernoulli: argument 'input' expected a floating tensor, got dtype {input.dtype}")
    probability = input if p is None else np.asarray(_number("bernoulli", "p", p))
    require(
        bool(np.all((probability >= 0) & (probability <= 1))),
        "bernoulli",
        "input" if p is None else "p",
        "probabilities in [0, 1]",
        "values outside it" if p is None else p,
    )


bernoulli = defop(
    "bernoulli",
    family="creation",
    inputs=("input",),
    forward=_bernoulli,
    vjps=(_zero_vjp,),
    check=_check_bernoulli,
    samples=lambda rng: [
        Sample((rng.random((3, 4)),), {"generator": 1}, "probabilities"),
        Sample((transposed(rng, (3, 4), 0.0, 1.0),), {"p": 0.3, "generator": 2}, "p=0.3, non-contiguous"),
        Sample((rng.random((0, 2)),), {"generator": 3}, "zero-size"),
    ],
    notes="not differentiable in effect: the gradient is zero, torch's rule; the draws are numpy's stream",
)


def _multinomial(input, num_samples, replacement=False, *, generator=None):
    """Category indices drawn per row of ``input`` (non-negative weights, 1-D or 2-D), as torch.multinomial."""
    rows = input.reshape(-1, input.shape[-1]).astype(np.float64)
    rng = _generator("multinomial", generator)
    if replacement:  # inverse CDF: the category is the number of CDF entries <= u (exact; memory rows*n*C)
        cdf = np.cumsum(rows, axis=1)
        cdf /= cdf[:, -1:]
        u = rng.random((len(rows), num_samples))
        out = np.minimum((u[:, :, None] >= cdf[:, None, :]).sum(axis=-1), rows.shape[1] - 1)
    else:  # sequential sampling without replacement == the top-k of log(u) / weight (Efraimidis-Spirakis)
        with np.errstate(divide="ignore"):
            keys = np.log(rng.random(rows.shape)) / rows
        out = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    return out.reshape(input.shape[:-1] + (num_samples,)).astype(np.int64)


def _check_multinomial(input, num_samples, replacement=False, *, generator=None):
    require(input.ndim in (1, 2), "multinomial", "input", "a 1-D or 2-D tensor of weights", f"{input.ndim}-D")
    if input.dtype.kind != "f":
        raise TypeError(f"multinomial: argument 'input' expected a floating tensor, got dtype {input.dtype}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, numbers.Integral):
        raise TypeError(f"multinomial: argument 'num_samples' expected an int, got {type(num_samples).__name__}")
    require(int(num_samples) > 0, "multinomial", "num_samples", "a positive number of samples", num_samples)
    if not isinstance(replacement, bool | np.bool_):
        raise TypeError(f"multinomial: argument 'replacement' expected a bool, got {type(replacement).__name__}")
    require(
        bool(replacement) or int(num_samples) <= input.shape[-1],
        "multinomial",
        "num_samples",
        f"at most {input.shape[-1]} (the number of categories) without replacement",
        num_samples,
    )
    require(bool(np.all(np.isfinite(input) & (input >= 0))), "multinomial", "input", "finite weights >= 0", "others")
    require(
        bool(np.all(input.reshape(-1, input.shape[-1]).sum(axis=1) > 0)),
        "multinomial",
        "input",
        "rows with a positive sum of weights",
        "a row summing to 0",
    )


multinomial = defop(
    "multinomial",
    family="creation",
    inputs=("input",),
    forward=_multinomial,
    vjps=(NOT_DIFFERENTIABLE,),
    check=_check_multinomial,
    samples=lambda rng: [
        Sample((rng.random((2, 5)),), {"num_samples": 3, "generator": 1}, "rows, without replacement"),
        Sample((rng.random((4,)),), {"num_samples": 6, "replacement": True, "generator": 2}, "with replacement"),
        Sample((np.array([0.0, 1.0, 0.0]),), {"num_samples": 2, "generator": 3}, "zero weights"),
    ],
    notes="indices (int64), not differentiable; the draws are numpy's stream, not torch's",
)
