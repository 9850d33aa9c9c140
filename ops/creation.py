"""Creation ops with a tensor input, as torch's: ``zeros_like``, ``ones_like``, ``full_like``, ``empty_like``
(zeros), ``rand_like``, ``randn_like``, ``randint_like``, ``bernoulli`` and ``multinomial``. The constructors from
numbers (``tape.arange``, ``tape.zeros``, ``tape.randn``, ...) are in tape/creation.py, whose argument rules
(dtypes: torch's, float32 by default; ``generator=``: a tape.Generator, numpy Generator, int seed or None for
``tape.default_generator``) these share.

The ``*_like`` ops and ``bernoulli`` have a zero gradient (their output does not depend on the input's values,
torch's rule); ``multinomial`` returns indices. Random draws are numpy's stream, not torch's.
"""

__all__ = [
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


import numpy as np

from tape.creation import filled, float_dtype, generator_of, randint_bounds, real_number, resolve_dtype
from tape.devices import on_cpu
from tape.onnx import lowering
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop

from ._declare import one_input_op
from ._samples import transposed, uniform
from ._validation import integer, require, require_bool, require_float


# -- ops with a tensor input --------------------------------------------------------------------------------
def _zero_vjp(g, ans, input, *args, **attrs):
    return np.zeros_like(input)


def _like_samples(**attrs):
    def generate(rng):
        return [
            Sample((uniform(rng, (2, 3)),), dict(attrs), "matrix"),
            Sample((uniform(rng, (2, 3)),), {**attrs, "device": "cpu"}, "device='cpu'"),
            Sample((uniform(rng, ()),), dict(attrs), "scalar"),
            Sample((transposed(rng, (3, 4)),), dict(attrs), "non-contiguous"),
            Sample((uniform(rng, (0, 3)),), dict(attrs), "zero-size"),
        ]

    return generate


def _like(name: str, forward, torch_ref, samples, random=False, *, doc=""):
    return one_input_op(
        name,
        "creation",
        forward,
        _zero_vjp,
        samples=samples,
        torch_ref=None if random else torch_ref,
        notes="the output does not depend on the input's values: the gradient is zero (torch's output requires "
        "no grad)" + ("; the draws are numpy's stream, not torch's" if random else ""),
        doc=doc,
    )


def _like_dtype(where: str, input, dtype, device=None) -> np.dtype:
    """The dtype of a ``*_like`` result (the input's unless ``dtype``); ``device`` is torch's (the CPU or None)."""
    on_cpu(where, "device", device)
    return resolve_dtype(where, dtype, input.dtype)


def _torch_dtype(torch, dtype):
    return None if dtype is None else getattr(torch, np.dtype(dtype).name)


def _like_ref(name: str):
    """The torch reference of a ``*_like`` op: ``torch.<name>`` with the dtype and device given."""
    return lambda torch, input, dtype=None, device=None: getattr(torch, name)(
        input, dtype=_torch_dtype(torch, dtype), device=device
    )


zeros_like = _like(
    "zeros_like",
    lambda input, *, dtype=None, device=None: np.zeros(input.shape, _like_dtype("zeros_like", input, dtype, device)),
    lambda torch, input, dtype=None, device=None: torch.zeros_like(
        input, dtype=_torch_dtype(torch, dtype), device=device
    ),
    _like_samples(),
    doc="A tensor of zeros with input's shape (and its dtype, unless ``dtype`` is given).",
)
ones_like = _like(
    "ones_like",
    lambda input, *, dtype=None, device=None: np.ones(input.shape, _like_dtype("ones_like", input, dtype, device)),
    lambda torch, input, dtype=None, device=None: torch.ones_like(
        input, dtype=_torch_dtype(torch, dtype), device=device
    ),
    _like_samples(),
    doc="A tensor of ones with input's shape (and its dtype, unless ``dtype`` is given).",
)
empty_like = _like(
    "empty_like",
    lambda input, *, dtype=None, device=None: np.zeros(input.shape, _like_dtype("empty_like", input, dtype, device)),
    lambda torch, input, dtype=None, device=None: torch.zeros_like(
        input, dtype=_torch_dtype(torch, dtype), device=device
    ),  # ours: zeros
    _like_samples(),
    doc=(
        "A tensor with input's shape (and its dtype, unless ``dtype`` is given) whose values are unspecified, as\n"
        "torch.empty_like's; here they are zeros."
    ),
)


def _full_like(input, fill_value, *, dtype=None, device=None):
    value = real_number("full_like", "fill_value", fill_value)
    return filled("full_like", input.shape, value, _like_dtype("full_like", input, dtype, device))


full_like = _like(
    "full_like",
    _full_like,
    lambda torch, input, fill_value, dtype=None, device=None: torch.full_like(
        input, fill_value, dtype=_torch_dtype(torch, dtype), device=device
    ),
    _like_samples(fill_value=2.5),
    doc="A tensor of ``fill_value`` with input's shape (and its dtype, unless ``dtype`` is given).",
)


def _randomfloat_dtype(where: str, input, dtype, device=None) -> np.dtype:
    """torch refuses an integer input unless a float ``dtype`` is given."""
    on_cpu(where, "device", device)
    if dtype is None and input.dtype.kind != "f":
        raise TypeError(f"{where}: argument 'input' expected a floating tensor (or a float dtype=), got {input.dtype}")
    return float_dtype(where, dtype, input.dtype)


def _rand_like(input, *, generator=None, dtype=None, device=None):
    resolved = _randomfloat_dtype("rand_like", input, dtype, device)
    return generator_of("rand_like", generator).random(input.shape, dtype=resolved)


def _randn_like(input, *, generator=None, dtype=None, device=None):
    resolved = _randomfloat_dtype("randn_like", input, dtype, device)
    return generator_of("randn_like", generator).standard_normal(input.shape, dtype=resolved)


def _randint_like(input, low=0, high=None, *, generator=None, dtype=None, device=None):
    """``randint_like(input, high)`` or ``randint_like(input, low, high)``; the input's dtype."""
    low, high = randint_bounds("randint_like", *((0, low) if high is None else (low, high)))
    draws = generator_of("randint_like", generator).integers(low, high, size=input.shape, dtype=np.int64)
    return draws.astype(_like_dtype("randint_like", input, dtype, device))


rand_like = _like(
    "rand_like",
    _rand_like,
    None,
    _like_samples(generator=0),
    random=True,
    doc="Uniform random numbers in [0, 1) with input's shape, drawn from ``generator`` (else the global one).",
)
randn_like = _like(
    "randn_like",
    _randn_like,
    None,
    _like_samples(generator=0),
    random=True,
    doc="Standard normal random numbers with input's shape, drawn from ``generator`` (else the global one).",
)
randint_like = _like("randint_like", _randint_like, None, _like_samples(low=-3, high=4, generator=0), random=True)


def _bernoulli(input, p=None, *, generator=None):
    """1 with probability ``input`` (or ``p`` when given), else 0; the input's dtype."""
    probability = input if p is None else real_number("bernoulli", "p", p)
    return (generator_of("bernoulli", generator).random(input.shape) < probability).astype(input.dtype)


def _check_bernoulli(input, p=None, *, generator=None):
    require_float("bernoulli", "input", input)
    probability = input if p is None else np.asarray(real_number("bernoulli", "p", p))
    require(
        bool(np.all((probability >= 0) & (probability <= 1))),
        "bernoulli",
        "input" if p is None else "p",
        "probabilities in [0, 1]",
        "values outside it" if p is None else p,
    )


bernoulli = defop(
    "bernoulli",
    method=True,
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
    rng = generator_of("multinomial", generator)
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
    require_float("multinomial", "input", input)
    integer("multinomial", "num_samples", num_samples, at_least=1)
    require_bool("multinomial", "replacement", replacement)
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
    method=True,
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


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_filled_like(value):
    def lower(g, rec, input):
        fill = rec.attributes.get("fill_value", value)
        return g.op("ConstantOfShape", g.op("Shape", input), value=g.tensor(np.array([fill], rec.output.dtype)))

    return lower


_RANDOM = "random: ONNX's Random* ops draw other numbers than minitape's seeded generator, so no model equals it"
lowering(zeros_like, _onnx_filled_like(0))
lowering(ones_like, _onnx_filled_like(1))
lowering(empty_like, _onnx_filled_like(0))  # minitape's empty_like gives zeros
lowering(full_like, _onnx_filled_like(None))
for _op in (rand_like, randn_like, randint_like, bernoulli, multinomial):
    lowering(_op, not_exportable=_RANDOM)
