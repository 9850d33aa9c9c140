"""Binary ops with numpy broadcasting; every rule sums its gradient back with ``unbroadcast``.

Semantics, as in PyTorch 2.13:
- Operands that cannot broadcast (or a dtype numpy has no loop for) raise ValueError/TypeError naming the op and
  both arguments' shapes and dtypes.
- Arithmetic is quiet about inf/NaN results (overflow, inf - inf, 0 / 0), as torch is: no numpy RuntimeWarning.
  ``quiet`` (shared with elementwise and reduce) switches numpy's warnings off for a call.
- Comparisons return bool tensors and are not differentiable.
"""

__all__ = [
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
    "where",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "atan2",
    "copysign",
    "logaddexp",
    "lerp",
    "remainder",
    "fmod",
    "floor_divide",
    "hypot",
    "isclose",
    "logical_and",
    "logical_or",
    "logical_xor",
    "xlogy",
    "addcmul",
    "addcdiv",
    "logaddexp2",
    "ldexp",
    "fmax",
    "fmin",
    "rsub",
    "heaviside",
    "nextafter",
    "multiply",
    "divide",
    "true_divide",
    "subtract",
    "arctan2",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "not_equal",
]


import numpy as np

from tape.broadcast import unbroadcast
from tape.onnx import lowering
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop

from . import _numpy
from ._notes import case_law
from ._numerics import quiet
from ._onnx import NotExportable, cast_to, elementwise, log1p_graph, scalar, tensor_type
from ._samples import BROADCAST_PAIRS, binary_samples, comparison_samples, transposed, uniform, where_samples
from ._validation import real, require_a_float, require_bool, require_float

# torch's case law, op by op: each entry joins the notes= of the ops it names (shown in docs/coverage.md)
_CASE_LAW = (
    (
        ("div",),
        "A float tensor combined with an integer or bool one computes in the float's dtype (float32 stays "
        "float32); two integer tensors stay integer -- except for div, which refuses them: true division "
        "would invent a float dtype, and minitape never casts silently.",
    ),
    (
        ("pow",),
        "pow's gradients at a zero base follow torch: d/da = 0 where b == 0, d/db = 0 where a == 0 and b >= "
        "0. Its second order is exact where torch's is not: finite at a zero base (torch: NaN), and "
        "d(d/da)/db = 1/a at b == 0 (torch: 0, as its backward masks every b == 0).",
    ),
    (
        ("maximum", "minimum"),
        "maximum / minimum split the gradient evenly where a == b (half to each operand), as torch does; "
        "where either operand is NaN both take the whole gradient (torch's too).",
    ),
    (
        ("where",),
        "where(condition, input, other) takes a bool condition, which is not differentiable.",
    ),
)


def _matched(a, b):
    """``a, b`` with an integer/bool operand cast to the other operand's float dtype."""
    if a.dtype.kind == "f":
        if b.dtype.kind != "f":
            return a, b.astype(a.dtype)
    elif b.dtype.kind == "f":
        return a.astype(b.dtype), b
    return a, b


def _like(array, g):
    """``array`` in the gradient's dtype (it differs only when an integer tensor met a float one). Tensors (the
    second-order pass) are left as they are: the ops match an integer operand to the float one themselves."""
    return array if array.dtype == g.dtype or not isinstance(array, np.ndarray) else array.astype(g.dtype)


def _operand_error(op, names, arrays, error):
    described = ", ".join(f"'{n}' {a.dtype}{list(a.shape)}" for n, a in zip(names, arrays))
    if isinstance(error, ValueError) and "broadcast" in str(error):
        return ValueError(
            f"{op}: arguments {described} cannot be broadcast together (each trailing dim must match or be 1)"
        )
    kind = ValueError if isinstance(error, ValueError) else TypeError
    return kind(f"{op}: cannot compute it for arguments {described}: {error}")


def _broadcasting(name, ufunc, match_floats=True, arithmetic=True, names=("a", "b")):
    """The forward ``ufunc(a, b)``, with mixed int/float operands matched and numpy's errors named;
    ``arithmetic`` is quiet about inf/NaN results (maximum, minimum and comparisons never warn). ``names``: the
    operands' parameter names in errors."""

    def forward(a, b):
        if match_floats and a.dtype != b.dtype:
            a, b = _matched(a, b)
        try:
            return ufunc(a, b)
        except (ValueError, TypeError) as e:
            raise _operand_error(name, names, (a, b), e) from None

    forward.__name__ = f"_{name}"
    return quiet(forward) if arithmetic else forward


def _on_pair(name, ufunc, match_floats=True, arithmetic=True):
    """``_broadcasting`` with torch's parameter names ``(input, other)``."""
    run = _broadcasting(name, ufunc, match_floats, arithmetic, ("input", "other"))

    def forward(input, other):
        return run(input, other)

    forward.__name__ = f"_{name}"
    return forward


def _binary(name, forward, vjp_a, vjp_b, *, samples=None, torch_ref=None, inputs=("a", "b"), **declaration):
    """Declare a two-input op whose tensor parameters are ``inputs`` (the forward's own names: "a", "b" or torch's
    "input", "other"); the torch reference defaults to ``torch.<name>``."""
    return defop(
        name,
        family="binary",
        inputs=inputs,
        forward=forward,
        vjps=(vjp_a, vjp_b),
        samples=samples or binary_samples(),
        torch_ref=torch_ref or (lambda torch, a, b: getattr(torch, name)(a, b)),
        **declaration,
    )


# -- arithmetic ------------------------------------------------------------------------------------------------
# The rules of the commonest ops are written out (``_like`` inline, ``unbroadcast`` called only when a shape
# differs): at small sizes the engine's cost per op is mostly Python calls.
def _add_vjp_a(g, ans, a, b, alpha=1):
    return g if g.shape == a.shape else unbroadcast(g, a.shape)


def _add_vjp_b(g, ans, a, b, alpha=1):
    if alpha != 1:
        g = g * alpha
    return g if g.shape == b.shape else unbroadcast(g, b.shape)


def _sub_vjp_b(g, ans, a, b, alpha=1):
    return unbroadcast(np.negative(g) if alpha == 1 else g * -alpha, b.shape)


@quiet
def _mul_vjp_a(g, ans, a, b):
    if b.dtype != g.dtype and isinstance(b, np.ndarray):  # _like(b, g)
        b = b.astype(g.dtype)
    grad = g * b
    return grad if grad.shape == a.shape else unbroadcast(grad, a.shape)


@quiet
def _mul_vjp_b(g, ans, a, b):
    if a.dtype != g.dtype and isinstance(a, np.ndarray):  # _like(a, g)
        a = a.astype(g.dtype)
    grad = g * a
    return grad if grad.shape == b.shape else unbroadcast(grad, b.shape)


_ADD = _broadcasting("add", np.add, arithmetic=False)  # not quiet itself: the op is (one switch per call)
_SUBTRACT = _broadcasting("sub", np.subtract, arithmetic=False)


def _scaled(op, combine, a, b, alpha):
    """torch's ``a + alpha * b`` (``a - alpha * b``), rounded once: float32 computes in float64 (torch's kernel
    fuses the multiply-add, so alpha * 3e38 does not overflow on its own)."""
    alpha = _alpha(op, alpha, a, b)
    dtype = np.result_type(a, b)
    if dtype == np.float32:
        a, b = a.astype(np.float64), b.astype(np.float64)
    return combine(a, b * alpha).astype(dtype, copy=False)


def _add(a, b, *, alpha=1):
    return _ADD(a, b) if alpha == 1 else _scaled("add", _ADD, a, b, alpha)


def _sub(a, b, *, alpha=1):
    return _SUBTRACT(a, b) if alpha == 1 else _scaled("sub", _SUBTRACT, a, b, alpha)


def _alpha_samples(rng):
    out = binary_samples()(rng)
    out.append(Sample((uniform(rng, (2, 3)), uniform(rng, (3,))), {"alpha": 2.5}, "alpha=2.5"))
    out.append(Sample((uniform(rng, (3,)), uniform(rng, ())), {"alpha": -1}, "alpha=-1"))
    out.append(Sample((np.array([1, 2, 3]), np.array([4, 5, 6])), {"alpha": 3}, "integers, alpha=3"))
    return out


def _alpha_ref(name):
    return lambda torch, a, b, alpha=1: getattr(torch, name)(a, b, alpha=alpha)


_ALPHA_NOTE = "torch's alpha=: a + alpha * b (a - alpha * b), float32 rounded once, as torch's fused kernel."
add = _binary("add", quiet(_add), _add_vjp_a, _add_vjp_b, samples=_alpha_samples, torch_ref=_alpha_ref("add"),
              method=True, numpy=np.add, notes=_ALPHA_NOTE,
              doc="a + alpha * b, elementwise with broadcasting.")  # fmt: skip
sub = _binary("sub", quiet(_sub), _add_vjp_a, _sub_vjp_b, samples=_alpha_samples, torch_ref=_alpha_ref("sub"),
              method=True, numpy=np.subtract, notes=_ALPHA_NOTE,
              doc="a - alpha * b, elementwise with broadcasting.")  # fmt: skip
mul = _binary(
    "mul",
    _broadcasting("mul", np.multiply),
    _mul_vjp_a,
    _mul_vjp_b,
    method=True,
    numpy=np.multiply,
    doc="a * b, elementwise with broadcasting.",
)

_true_divide = _broadcasting("div", np.divide, names=("input", "other"))


def _no_zero_divisor(op, a, b):
    """torch raises for an integer division by zero (numpy would give 0 with a warning)."""
    if a.dtype.kind in "iub" and b.dtype.kind in "iub" and not np.all(b != 0):
        raise ZeroDivisionError(f"{op}: integer division by zero (argument 'other' has a zero entry)")


@quiet
def _trunc_divide(a, b):
    if a.dtype.kind == "f":
        return np.trunc(a / b)
    q = np.floor_divide(a, b)  # integers: round toward zero (C's division)
    return q + np.logical_and(np.remainder(a, b) != 0, (a < 0) != (b < 0))


_floor_divide = _broadcasting("div", np.floor_divide, names=("input", "other"))
_trunc_div = _broadcasting("div", _trunc_divide, names=("input", "other"))


def _div(input, other, *, rounding_mode=None):
    if rounding_mode is None:
        require_a_float(
            "div", input, other, "true division gives floats", " (or pass rounding_mode='trunc' or 'floor')"
        )
        return _true_divide(input, other)
    if rounding_mode not in ("trunc", "floor"):
        raise ValueError(f"div: argument 'rounding_mode' expected None, 'trunc' or 'floor', got {rounding_mode!r}")
    _no_zero_divisor("div", input, other)
    return (_floor_divide if rounding_mode == "floor" else _trunc_div)(input, other)


@quiet
def _div_vjp_input(g, ans, input, other, rounding_mode=None):
    if rounding_mode is not None:  # a step function: gradient 0, as torch
        return np.zeros(input.shape, g.dtype)
    return unbroadcast(g / _like(other, g), input.shape)


@quiet
def _div_vjp_other(g, ans, input, other, rounding_mode=None):
    if rounding_mode is not None:
        return np.zeros(other.shape, g.dtype)
    return unbroadcast(-g * ans / _like(other, g), other.shape)


def _quotient_samples(rng):
    """Pairs for the rounding quotients (which jump where input / other is an integer): divisors in
    {+-0.5, +-1, +-2} and inputs +-(n + f) with an integer n and f in [0.1, 0.4], so every quotient stays at
    least 0.05 away from an integer, also after a finite-difference step."""

    def draw(shape, divisor):
        if divisor:
            return rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], size=shape)
        whole = rng.integers(0, 3, size=shape) + rng.uniform(0.1, 0.4, size=shape)
        return whole * rng.choice([-1.0, 1.0], size=shape)

    out = [Sample((draw(sa, False), draw(sb, True)), {}, f"{sa} with {sb}") for sa, sb in BROADCAST_PAIRS]
    out.append(Sample((draw((4, 3), False).T, draw((3, 4), True)), {}, "non-contiguous"))
    out.append(Sample((np.array([5.25, -5.25, 5.25, -5.25, 0.3]), np.array([2.0, 2.0, -2.0, -2.0, 0.5])), {}, "signs"))
    return out


def _div_samples(rng):
    out = binary_samples(-2.0, 2.0, 0.5, 2.0)(rng)
    for mode in ("trunc", "floor"):
        out += [Sample(s.inputs, {"rounding_mode": mode}, f"{mode} {s.label}") for s in _quotient_samples(rng)]
        out.append(
            Sample(
                (np.array([7, -7, 7, -7, 0]), np.array([2, 2, -2, -2, 3])), {"rounding_mode": mode}, f"{mode} integers"
            )
        )
    return out


div = defop(
    "div",
    family="binary",
    inputs=("input", "other"),
    forward=_div,
    vjps=(_div_vjp_input, _div_vjp_other),
    samples=_div_samples,
    torch_ref=lambda torch, input, other, rounding_mode=None: torch.div(input, other, rounding_mode=rounding_mode),
    method=True,
    numpy=np.true_divide,
    notes=case_law(_CASE_LAW, "div"),
    doc=(
        "input / other elementwise with broadcasting; rounding_mode 'trunc' or 'floor' rounds the quotient.\n"
        "True division (no rounding_mode) refuses two integer operands: it would have to invent a float dtype."
    ),
)


@quiet  # 0 ** -1 = inf, (-1) ** 0.5 = NaN, log(a < 0) = NaN, as in torch
def _pow_vjp_a(g, ans, a, b):
    # torch's order: g * (b * a ** (b - 1)), so b * 0 stays 0 where g * b would overflow
    if b.ndim == 0 and isinstance(b, np.ndarray):  # a scalar exponent (x ** 2, x ** 0.5): no masks needed
        e = float(b)
        if e == 0:
            return np.zeros(a.shape, g.dtype)
        if e == 2:
            return unbroadcast(g * (a * 2), a.shape)
        return unbroadcast(g * (np.power(a, e - 1) * e), a.shape)
    b = _like(b, g)
    slope = b * np.power(a, b - 1)
    # b * a ** (b - 1) is 0 wherever b == 0, except where a ** -1 is inf (a == 0, or a tiny subnormal) or NaN:
    # torch's 0 there. Only those entries are masked, with a base of 1 behind the mask so the second order sees
    # no inf either; elsewhere the product is the derivative, in b too (torch's double backward instead gives
    # d/db = 0 at every b == 0).
    undefined = np.logical_and(b == 0, np.logical_not(np.abs(slope) < np.inf))
    if not np.count_nonzero(undefined):
        return unbroadcast(g * slope, a.shape)
    slope = b * np.power(np.where(undefined, 1, a), b - 1)
    return unbroadcast(np.where(undefined, 0, g * slope), a.shape)


@quiet
def _pow_vjp_b(g, ans, a, b):
    zero = np.logical_and(a == 0, b >= 0)  # torch: no gradient there (a ** b is flat in b, or undefined)
    if np.count_nonzero(zero):  # log(1) instead of log(0) there: no -inf, so no NaN in the second order either
        a = np.where(zero, 1, a)
    grad = g * (ans * np.log(_like(a, g)))  # log(a < 0) is NaN, as in torch
    return unbroadcast(np.where(zero, 0, grad), b.shape)


def _pow_samples(rng):
    out = binary_samples(0.5, 2.0, -2.0, 2.0)(rng)
    for e in (2.0, 3.0, 0.5, -1.5):  # a float exponent, as ``x ** 2.0`` makes it: the base's fast path
        out.append(Sample((uniform(rng, (2, 3), 0.5, 2.0), np.array(e)), {}, f"x ** {e}"))
    for e in (2, 3, 0):  # an integer exponent: negative bases are fine, and b takes no gradient
        out.append(Sample((uniform(rng, (2, 3), -2.0, 2.0), np.array(e)), {}, f"x ** int {e}"))
    # a zero base or exponent, with an integer exponent: torch's double backward is NaN at a zero base for a
    # float exponent and at 0 ** 0 (where minitape's is finite; tests/ops/test_binary.py checks those)
    out.append(Sample((np.array([0.0, 0.0, 1.5]), np.array([2, 3, 0])), {}, "zero base or exponent"))
    return out


pow = _binary(
    "pow",
    _broadcasting("pow", np.power),
    _pow_vjp_a,
    _pow_vjp_b,
    samples=_pow_samples,
    method=True,
    numpy=np.power,
    notes=case_law(_CASE_LAW, "pow"),
    doc="a ** b, elementwise with broadcasting.",
)


# -- maximum / minimum: ties split the gradient evenly ---------------------------------------------------------
def _share(g, wins, ties):
    return np.where(ties, g * 0.5, g * wins)


# An operand takes the gradient unless it loses: a NaN on either side gives it to both, as torch does.
maximum = _binary(
    "maximum",
    _broadcasting("maximum", np.maximum, arithmetic=False),
    lambda g, ans, a, b: unbroadcast(_share(g, np.logical_not(a < b), a == b), a.shape),
    lambda g, ans, a, b: unbroadcast(_share(g, np.logical_not(b < a), a == b), b.shape),
    method=True,
    numpy=np.maximum,
    notes=case_law(_CASE_LAW, "maximum"),
    doc="The elementwise maximum of a and b (NaN if either is NaN), with broadcasting.",
)
minimum = _binary(
    "minimum",
    _broadcasting("minimum", np.minimum, arithmetic=False),
    lambda g, ans, a, b: unbroadcast(_share(g, np.logical_not(a > b), a == b), a.shape),
    lambda g, ans, a, b: unbroadcast(_share(g, np.logical_not(b > a), a == b), b.shape),
    method=True,
    numpy=np.minimum,
    notes=case_law(_CASE_LAW, "minimum"),
    doc="The elementwise minimum of a and b (NaN if either is NaN), with broadcasting.",
)


# -- where -----------------------------------------------------------------------------------------------------
def _where(condition, input, other):
    if condition.dtype.kind != "b":
        raise TypeError(f"where: argument 'condition' expected a bool tensor, got dtype {condition.dtype}")
    if input.dtype != other.dtype:
        input, other = _matched(input, other)
    try:
        return np.where(condition, input, other)
    except ValueError as e:
        raise _operand_error("where", ("condition", "input", "other"), (condition, input, other), e) from None


where = defop(
    "where",
    family="binary",
    inputs=("condition", "input", "other"),
    forward=_where,
    vjps=(
        NOT_DIFFERENTIABLE,
        lambda g, ans, condition, a, b: unbroadcast(g * condition, a.shape),
        lambda g, ans, condition, a, b: unbroadcast(np.where(condition, 0, g), b.shape),
    ),
    samples=where_samples(),
    torch_ref=lambda torch, condition, input, other: torch.where(condition, input, other),
    numpy={np.where: _numpy.where},
    notes=case_law(_CASE_LAW, "where"),
    doc="input where condition is true, else other, elementwise with broadcasting of all three.",
)


# -- comparisons -----------------------------------------------------------------------------------------------
def _comparison(name, ufunc, **declaration):
    # comparing float32 with an integer array is exact in numpy (both go to float64): no matching needed
    return _binary(
        name,
        _broadcasting(name, ufunc, match_floats=False, arithmetic=False),
        NOT_DIFFERENTIABLE,
        NOT_DIFFERENTIABLE,
        samples=comparison_samples(),
        **declaration,
    )


eq = _comparison(
    "eq", np.equal, method=True, numpy=np.equal, doc="a == b elementwise with broadcasting, as a bool tensor."
)
ne = _comparison(
    "ne", np.not_equal, method=True, numpy=np.not_equal, doc="a != b elementwise with broadcasting, as a bool tensor."
)
lt = _comparison(
    "lt", np.less, method=True, numpy=np.less, doc="a < b elementwise with broadcasting, as a bool tensor."
)
le = _comparison(
    "le", np.less_equal, method=True, numpy=np.less_equal, doc="a <= b elementwise with broadcasting, as a bool tensor."
)
gt = _comparison(
    "gt", np.greater, method=True, numpy=np.greater, doc="a > b elementwise with broadcasting, as a bool tensor."
)
ge = _comparison(
    "ge",
    np.greater_equal,
    method=True,
    numpy=np.greater_equal,
    doc="a >= b elementwise with broadcasting, as a bool tensor.",
)


# == more binary ops, in torch's argument names (input, other) ================================================
def _pair(name, forward, vjp_input, vjp_other, **options):
    """Declare a two-input op whose tensor parameters are torch's ``input`` and ``other``."""
    return _binary(name, forward, vjp_input, vjp_other, inputs=("input", "other"), **options)


def _floats(name, ufunc, arithmetic=True):
    """A forward computing in floats only: two integer/bool operands are refused (torch would invent a float
    dtype for some of these, or has no integer kernel)."""
    run = _broadcasting(name, ufunc, arithmetic=arithmetic, names=("input", "other"))

    def forward(input, other):
        require_a_float(name, input, other, f"{name} computes in floats")
        return run(input, other)

    forward.__name__ = f"_{name}"
    return forward


# atan2: torch's gradient is 0 at input = other = 0 (where 1 / (x^2 + y^2) is inf)
def _atan2_scale(g, input, other):
    squares = input * input + other * other
    zero = squares == 0
    return np.where(zero, 0, g / np.where(zero, 1, squares))


def _atan2_samples(rng):
    # input of one sign: the branch cut (input = 0, other < 0) and the origin stay out of finite differences
    out = binary_samples(0.3, 2.0, -2.0, 2.0)(rng)
    out.append(Sample((-uniform(rng, (2, 3), 0.3, 2.0), uniform(rng, (3,))), {}, "negative input"))
    return out


atan2 = _pair(
    "atan2",
    _floats("atan2", np.arctan2),
    quiet(lambda g, ans, input, other: unbroadcast(_atan2_scale(g, input, other) * other, input.shape)),
    quiet(lambda g, ans, input, other: unbroadcast(-_atan2_scale(g, input, other) * input, other.shape)),
    samples=_atan2_samples,
    method=True,
    numpy=np.arctan2,
    doc="The angle of the point (other, input): arctan(input / other) in the right quadrant, elementwise.",
)


# copysign: d/dinput = result / input, 0 at input == 0 (torch's; NaN at an infinite input, as torch); other
# takes no gradient (0, as torch)
def _copysign_vjp_input(g, ans, input, other):
    zero = input == 0
    return unbroadcast(np.where(zero, 0, g * (ans / np.where(zero, 1, input))), input.shape)


copysign = _pair(
    "copysign",
    _floats("copysign", np.copysign),
    quiet(_copysign_vjp_input),
    lambda g, ans, input, other: np.zeros(other.shape, g.dtype),
    method=True,
    numpy=np.copysign,
    doc="|input| with the sign of other, elementwise with broadcasting.",
)


# logaddexp: d/dinput = 1 / (1 + exp(other - input)) = sigmoid(input - other), written exp(-logaddexp(0, d)):
# 1 / (exp(d) + 1) overflows past |d| ~ 709, and traced for the second order gave inf / inf = NaN there. 1 at
# input = inf (torch's form); both -inf gives NaN
logaddexp = _pair(
    "logaddexp",
    _floats("logaddexp", np.logaddexp),
    quiet(lambda g, ans, input, other: unbroadcast(g * np.exp(-np.logaddexp(0, other - input)), input.shape)),
    quiet(lambda g, ans, input, other: unbroadcast(g * np.exp(-np.logaddexp(0, input - other)), other.shape)),
    samples=binary_samples(-4.0, 4.0),
    method=True,
    numpy=np.logaddexp,
    doc="log(exp(input) + exp(other)) elementwise, computed without overflow.",
)


# hypot: d/dinput = input / result; NaN at input = other = 0 (0 / 0), as torch
hypot = _pair(
    "hypot",
    _floats("hypot", np.hypot),
    quiet(lambda g, ans, input, other: unbroadcast(g * input / ans, input.shape)),
    quiet(lambda g, ans, input, other: unbroadcast(g * other / ans, other.shape)),
    method=True,
    numpy=np.hypot,
    doc="sqrt(input ** 2 + other ** 2) elementwise with broadcasting.",
)


# remainder (sign of the divisor, Python's %) and fmod (sign of the dividend, C's): d/dinput = 1,
# d/dother = -floor(input / other) resp. -trunc(input / other), as torch
def _modulo(name, ufunc):
    run = _broadcasting(name, ufunc, names=("input", "other"))

    def forward(input, other):
        if input.dtype.kind == "b" and other.dtype.kind == "b":
            raise TypeError(f"{name}: arguments 'input' and 'other' are both bool; expected numbers")
        _no_zero_divisor(name, input, other)
        return run(input, other)

    forward.__name__ = f"_{name}"
    return forward


remainder = _pair(
    "remainder",
    _modulo("remainder", np.remainder),
    lambda g, ans, input, other: unbroadcast(g, input.shape),
    quiet(lambda g, ans, input, other: unbroadcast(-g * np.floor_divide(input, other), other.shape)),
    samples=_quotient_samples,
    method=True,
    numpy=np.remainder,
    doc="input - floor(input / other) * other elementwise: Python's %, the result has the sign of other.",
)
fmod = _pair(
    "fmod",
    _modulo("fmod", np.fmod),
    lambda g, ans, input, other: unbroadcast(g, input.shape),
    quiet(lambda g, ans, input, other: unbroadcast(-g * np.trunc(input / other), other.shape)),
    samples=_quotient_samples,
    method=True,
    numpy=np.fmod,
    doc="input - trunc(input / other) * other elementwise: C's fmod, the result has the sign of input.",
)


_FLOOR_DIVIDE = _broadcasting("floor_divide", np.floor_divide, names=("input", "other"))


def _floor_divide_op(input, other):
    _no_zero_divisor("floor_divide", input, other)
    return _FLOOR_DIVIDE(input, other)


# torch has no derivative for floor_divide (its backward raises); a step function's gradient is 0, which is
# what minitape gives (as torch's div(..., rounding_mode='floor') does)
floor_divide = _pair(
    "floor_divide",
    _floor_divide_op,
    lambda g, ans, input, other: np.zeros(input.shape, g.dtype),
    lambda g, ans, input, other: np.zeros(other.shape, g.dtype),
    samples=_quotient_samples,
    torch_ref=lambda torch, input, other: torch.div(input, other, rounding_mode="floor"),
    method=True,
    numpy=np.floor_divide,
    doc="floor(input / other) elementwise with broadcasting: Python's //.",
)


# -- lerp ------------------------------------------------------------------------------------------------------
@quiet
def _lerp(input, end, weight):
    require_float("lerp", "input", input)
    require_float("lerp", "end", end)
    if weight.dtype.kind != "f":
        weight = weight.astype(input.dtype)  # a Python number given as weight
    try:
        dtype = np.result_type(input, end)
        if dtype == np.float32:  # in float64, rounded once: weight * diff cannot overflow float32
            input, end, weight = input.astype(np.float64), end.astype(np.float64), weight.astype(np.float64)
        diff = end - input
        # torch's two-sided formula: exact at weight 0 and 1
        out = np.where(np.abs(weight) < 0.5, input + weight * diff, end - diff * (1 - weight))
        return out.astype(dtype, copy=False)
    except ValueError as e:
        raise _operand_error("lerp", ("input", "end", "weight"), (input, end, weight), e) from None


def _lerp_samples(rng):
    out = []
    for shapes in [
        ((2, 3), (2, 3), (2, 3)),
        ((2, 3), (3,), ()),
        ((3, 1), (1, 4), (3, 4)),
        ((), (2, 3), (3,)),
        ((0, 3), (3,), ()),
        ((4, 1), (0,), (1,)),
    ]:
        sa, sb, sw = shapes
        out.append(Sample((uniform(rng, sa), uniform(rng, sb), uniform(rng, sw, -0.5, 1.5)), {}, f"{sa}, {sb}, {sw}"))
    out.append(Sample((transposed(rng, (3, 4)), uniform(rng, (3, 4)), np.array(0.3)), {}, "non-contiguous"))
    out.append(
        Sample(
            (uniform(rng, (5,)), uniform(rng, (5,)), np.array([0.0, 0.25, 0.75, 1.0, 2.0])),
            {},
            "weights 0, 1 and beyond",
        )
    )
    return out


lerp = defop(
    "lerp",
    family="binary",
    inputs=("input", "end", "weight"),
    forward=_lerp,
    vjps=(
        quiet(lambda g, ans, input, end, weight: unbroadcast(g * (1 - weight), input.shape)),
        quiet(lambda g, ans, input, end, weight: unbroadcast(g * weight, end.shape)),
        quiet(lambda g, ans, input, end, weight: unbroadcast(g * (end - input), weight.shape)),
    ),
    samples=_lerp_samples,
    torch_ref=lambda torch, input, end, weight: torch.lerp(input, end, weight),
    method=True,
    doc="Linear interpolation input + weight * (end - input), elementwise with broadcasting.",
)


# -- isclose and logical ops: bool results, not differentiable -------------------------------------------------
def _tolerance(argument, value):
    real("isclose", argument, value)
    if not value >= 0:
        raise ValueError(f"isclose: argument '{argument}' expected a number >= 0, got {value!r}")
    return float(value)


_ISCLOSE_EQUAL = _broadcasting("isclose", np.equal, arithmetic=False, names=("input", "other"))


@quiet
def _isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    rtol, atol = _tolerance("rtol", rtol), _tolerance("atol", atol)
    require_bool("isclose", "equal_nan", equal_nan)
    if input.dtype != other.dtype:
        raise TypeError(
            f"isclose: arguments 'input' ({input.dtype}) and 'other' ({other.dtype}) must have the "
            f"same dtype, as in torch"
        )
    if input.dtype.kind == "b":
        return _ISCLOSE_EQUAL(input, other)
    # torch's definition: equal (infs included), or NaN on both sides when equal_nan, or finitely close
    close = _ISCLOSE_EQUAL(input, other)
    if equal_nan:
        close = close | (np.isnan(input) & np.isnan(other))
    if rtol == 0 and atol == 0:
        return close
    if input.dtype.kind != "f":
        input, other = input.astype(np.float64), other.astype(np.float64)
    actual = np.abs(input - other)
    return close | (np.isfinite(actual) & (actual <= atol + np.abs(other * rtol)))


def _isclose_samples(rng):
    a = uniform(rng, (3, 4))
    b = a + uniform(rng, (3, 4)) * np.array([0.0, 1e-9, 1e-4, 1.0])
    special = np.array([np.nan, np.inf, -np.inf, np.inf, 1.0, 0.0])
    other = np.array([np.nan, np.inf, np.inf, 1e30, 1.0 + 1e-6, 1e-9])
    return [
        Sample((a, b), {}, "near and far"),
        Sample((a, b[0]), {"rtol": 1e-3, "atol": 0.0}, "broadcast rtol"),
        Sample((a.T, b.T), {"rtol": 0.0, "atol": 0.0}, "exact"),
        Sample((special, other), {}, "nan and infs"),
        Sample((special, other), {"equal_nan": True}, "equal_nan"),
        Sample((np.zeros((0, 3)), np.zeros(3)), {}, "zero-size"),
    ]


isclose = _pair(
    "isclose",
    _isclose,
    NOT_DIFFERENTIABLE,
    NOT_DIFFERENTIABLE,
    samples=_isclose_samples,
    torch_ref=lambda torch, input, other, **attrs: torch.isclose(input, other, **attrs),
    method=True,
    doc="|input - other| <= atol + rtol * |other| elementwise, as a bool tensor; NaNs equal only with equal_nan.",
)


def _logical_samples(rng):
    out = binary_samples()(rng)
    z = np.array([0.0, -0.0, 1.5, np.nan, 0.0, 2.0])
    out.append(Sample((z, z[::-1].copy()), {}, "zeros and nan"))
    bools = rng.random((3, 4)) > 0.5
    out.append(Sample((bools, rng.random(4) > 0.5), {}, "bools"))
    out.append(Sample((np.array([0, 1, -2]), np.array([0.0, 0.0, 3.0])), {}, "integer with float"))
    return out


def _logical(name, ufunc, **declaration):
    return _pair(
        name,
        _on_pair(name, ufunc, match_floats=False, arithmetic=False),
        NOT_DIFFERENTIABLE,
        NOT_DIFFERENTIABLE,
        samples=_logical_samples,
        **declaration,
    )


logical_and = _logical(
    "logical_and",
    np.logical_and,
    method=True,
    numpy=np.logical_and,
    doc="The truth (non-zero) of input and of other, combined with AND elementwise, as a bool tensor.",
)
logical_or = _logical(
    "logical_or",
    np.logical_or,
    method=True,
    numpy=np.logical_or,
    doc="The truth (non-zero) of input and of other, combined with OR elementwise, as a bool tensor.",
)
logical_xor = _logical(
    "logical_xor",
    np.logical_xor,
    method=True,
    numpy=np.logical_xor,
    doc="The truth (non-zero) of input and of other, combined with XOR elementwise, as a bool tensor.",
)


# -- xlogy / addcmul / addcdiv ---------------------------------------------------------------------------------
@quiet  # log(0) = -inf: x * log(y) is 0 where x == 0 (unless y is NaN), as torch's xlogy
def _xlogy(input, other):
    require_float("xlogy", "input", input)
    require_float("xlogy", "other", other)
    _broadcastable("xlogy", ("input", "other"), (input, other))
    product = input * np.log(other)
    return np.where(np.logical_and(input == 0, np.logical_not(np.isnan(other))), 0, product)


@quiet
def _xlogy_vjp_input(g, ans, input, other):
    # torch: xlogy(g, other), zeroed where input == 0 and other <= 0 (where log(other) is -inf or NaN)
    flat = np.logical_and(input == 0, other <= 0)
    return unbroadcast(np.where(flat, 0, g * np.log(np.where(flat, 1, other))), input.shape)


@quiet
def _xlogy_vjp_other(g, ans, input, other):
    return unbroadcast(g * (input / other), other.shape)  # the ratio first: g * input overflows float32 at 3e38


def _xlogy_samples(rng):
    pairs = binary_samples(-2.0, 2.0, 0.2, 3.0)(rng)
    zeros = np.array([0.0, 0.0, 1.5, -1.0])
    edges = Sample((zeros, np.array([0.0, 2.0, 0.5, 3.0])), {}, "input 0 (and 0 log 0)")
    # input 0 away from other = 0 (gradient w.r.t. input: log(other)), and with 0 log 0 (w.r.t. other: 0 / 0 = NaN,
    # torch's too)
    return pairs + [Sample((zeros[1:], np.array([2.0, 0.5, 3.0])), {}, "input 0"), edges]


xlogy = _pair(
    "xlogy",
    _xlogy,
    _xlogy_vjp_input,
    _xlogy_vjp_other,
    samples=_xlogy_samples,
    method=True,
    doc="input * log(other) elementwise, 0 where input is 0 (unless other is NaN).",
)


def _broadcastable(op: str, names: tuple, arrays: tuple) -> None:
    try:
        np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError as e:
        raise _operand_error(op, names, arrays, e) from None


def _three(name: str, combine):
    """``name(input, tensor1, tensor2, *, value=1)`` = input + value * combine(tensor1, tensor2), broadcast."""

    def forward(input, tensor1, tensor2, *, value=1):
        for arg, a in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
            require_float(name, arg, a)
        if not (input.dtype == tensor1.dtype == tensor2.dtype):
            raise TypeError(
                f"{name}: arguments 'input', 'tensor1', 'tensor2' expected one dtype, got "
                f"{input.dtype}, {tensor1.dtype}, {tensor2.dtype} (minitape never casts silently)"
            )
        _broadcastable(name, ("input", "tensor1", "tensor2"), (input, tensor1, tensor2))
        return input + value * combine(tensor1, tensor2)

    return quiet(forward)


def _addcmul_vjps():
    return (
        lambda g, ans, input, tensor1, tensor2, value=1: unbroadcast(g, input.shape),
        quiet(lambda g, ans, input, tensor1, tensor2, value=1: unbroadcast(g * (value * tensor2), tensor1.shape)),
        quiet(lambda g, ans, input, tensor1, tensor2, value=1: unbroadcast(g * (value * tensor1), tensor2.shape)),
    )


def _addcdiv_vjps():
    return (
        lambda g, ans, input, tensor1, tensor2, value=1: unbroadcast(g, input.shape),
        quiet(lambda g, ans, input, tensor1, tensor2, value=1: unbroadcast(g * value / tensor2, tensor1.shape)),
        quiet(
            lambda g, ans, input, tensor1, tensor2, value=1: unbroadcast(
                -(g * value) * (tensor1 / tensor2) / tensor2,
                tensor2.shape,  # no tensor2**2: it leaves the range
            )
        ),
    )


def _three_samples(low2=-2.0):
    shapes = [
        ((2, 3), (2, 3), (2, 3)),
        ((2, 3), (3,), (2, 1)),
        ((), (2, 3), (3,)),
        ((4, 1), (1, 3), ()),
        ((0, 3), (3,), (1,)),
    ]

    def generate(rng):
        out = [
            Sample(
                (uniform(rng, a), uniform(rng, b), _away_from_zero(uniform(rng, c, low2))),
                {"value": v},
                f"{a}, {b}, {c} value={v}",
            )
            for (a, b, c), v in zip(shapes, (1, 0.5, -2.0, 3, 1))
        ]
        out.append(
            Sample((transposed(rng, (3, 4)), uniform(rng, (3, 4)), 1 + uniform(rng, (4,), 0, 1)), {}, "non-contiguous")
        )
        return out

    return generate


def _away_from_zero(a: np.ndarray, gap: float = 0.2) -> np.ndarray:
    return np.where(np.abs(a) < gap, np.where(a < 0, -gap, gap), a)


def _declare_three(name, combine, vjps, *, doc=""):
    return defop(
        name,
        method=True,
        family="binary",
        inputs=("input", "tensor1", "tensor2"),
        forward=_three(name, combine),
        vjps=vjps,
        samples=_three_samples(),
        check=lambda input, tensor1, tensor2, value=1: real(name, "value", value),
        torch_ref=lambda torch, input, tensor1, tensor2, value=1: getattr(torch, name)(
            input, tensor1, tensor2, value=value
        ),
        doc=doc,
    )


addcmul = _declare_three(
    "addcmul", np.multiply, _addcmul_vjps(), doc="input + value * tensor1 * tensor2, elementwise with broadcasting."
)
addcdiv = _declare_three(
    "addcdiv", np.divide, _addcdiv_vjps(), doc="input + value * tensor1 / tensor2, elementwise with broadcasting."
)


# -- logaddexp2, ldexp, fmax / fmin, rsub, heaviside, nextafter --------------------------------------------------
_LN2 = float(np.log(2.0))

# logaddexp2: d/dinput = 1 / (1 + 2^(other - input)), as logaddexp's in base 2
logaddexp2 = _pair(
    "logaddexp2",
    _floats("logaddexp2", np.logaddexp2),
    quiet(lambda g, ans, input, other: unbroadcast(g / (np.exp2(other - input) + 1), input.shape)),
    quiet(lambda g, ans, input, other: unbroadcast(g / (np.exp2(input - other) + 1), other.shape)),
    samples=binary_samples(-4.0, 4.0),
    method=True,
    numpy=np.logaddexp2,
    doc="log2(2 ** input + 2 ** other) elementwise, computed without overflow.",
)


@quiet  # 2^1100 overflows: inf, as torch
def _ldexp(input, other):
    # torch: input * 2^other in input's floating dtype; an integer exponent is exact (np.ldexp)
    if input.dtype.kind != "f":
        raise TypeError(f"ldexp: argument 'input' expected a floating tensor, got dtype {input.dtype}")
    _broadcastable("ldexp", ("input", "other"), (input, other))
    if other.dtype.kind in "iu":
        return np.ldexp(input, other.astype(np.int32) if other.dtype.itemsize > 4 else other)
    if other.dtype.kind == "b":
        raise TypeError("ldexp: argument 'other' expected a number tensor, got dtype bool")
    return input * np.exp2(other.astype(input.dtype, copy=False))


def _ldexp_samples(rng):
    # torch's gradient for an integer exponent is input's * pow(2, other) in integers: 0 for a negative exponent
    # and past int64 (torch=False here; gradcheck measures ours, tests/ops/test_math_dtypes_and_aliases.py pins it)
    out = binary_samples(-2.0, 2.0, -3.0, 3.0)(rng)
    out.append(Sample((uniform(rng, (2, 3)), rng.integers(-5, 6, size=(3,))), {}, "integer exponent", torch=False))
    out.append(Sample((uniform(rng, (2, 3)), rng.integers(0, 6, size=(3,))), {}, "integer exponent >= 0"))
    out.append(Sample((np.array([1.5, -1.0, 3.0]), np.array([1030, -1080, 0])), {}, "overflow, underflow", torch=False))
    return out


@quiet
def _ldexp_vjp_input(g, ans, input, other):
    if other.dtype.kind == "f":
        return unbroadcast(g * np.exp2(other), input.shape)
    return unbroadcast(_ldexp(g, other) if isinstance(g, np.ndarray) else ldexp(g, other), input.shape)


ldexp = _pair(
    "ldexp",
    _ldexp,
    _ldexp_vjp_input,
    quiet(lambda g, ans, input, other: unbroadcast(g * ans * _LN2, other.shape)),
    samples=_ldexp_samples,
    method=True,
    doc="input * 2 ** other elementwise with broadcasting.",
)


def _nan_aware(name, ufunc, wins, *, doc=""):
    """fmax / fmin: NaN ignored when the other operand is a number; the gradient goes whole to the operand taken,
    to ``input`` on ties and where both are NaN (torch's)."""

    def vjp_input(g, ans, input, other):
        return unbroadcast(np.where(np.logical_or(wins(input, other), np.isnan(other)), g, 0), input.shape)

    def vjp_other(g, ans, input, other):
        return unbroadcast(np.where(np.logical_or(wins(input, other), np.isnan(other)), 0, g), other.shape)

    def samples(rng):  # no ties: torch gives a tie's gradient to input, which finite differences do not see
        out = binary_samples()(rng)
        nan = np.array([1.0, np.nan, np.nan, 3.0, -np.inf])
        out.append(Sample((nan, np.array([np.nan, 2.0, np.nan, 5.0, 1.0])), {}, "NaN on either side"))
        return out

    return _pair(
        name,
        _on_pair(name, ufunc, arithmetic=False),
        vjp_input,
        vjp_other,
        samples=samples,
        method=True,
        numpy=ufunc,
        doc=doc,
    )


fmax = _nan_aware(
    "fmax",
    np.fmax,
    lambda input, other: input >= other,
    doc="The elementwise maximum of input and other, ignoring a NaN when the other operand is a number.",
)
fmin = _nan_aware(
    "fmin",
    np.fmin,
    lambda input, other: input <= other,
    doc="The elementwise minimum of input and other, ignoring a NaN when the other operand is a number.",
)


def _alpha(op, alpha, *arrays):
    """``alpha`` checked as torch does: a number; an int (or bool) where every operand is integer/bool."""
    if isinstance(alpha, bool | np.bool_):
        if all(a.dtype.kind == "b" for a in arrays):
            return bool(alpha)
        return int(alpha)
    real(op, "alpha", alpha, "a number")
    if isinstance(alpha, float | np.floating) and all(a.dtype.kind in "iub" for a in arrays):
        raise TypeError(
            f"{op}: argument 'alpha' is the float {alpha!r} but the operands are integer/bool "
            f"({', '.join(str(a.dtype) for a in arrays)}); torch takes an integer alpha for them"
        )
    return alpha


_SUB = _broadcasting("rsub", np.subtract, names=("input", "other"))


@quiet
def _rsub(input, other, *, alpha=1):
    # torch: other - alpha * input, rounded once (float32 computes in float64: alpha * 3e38 does not overflow first)
    alpha = _alpha("rsub", alpha, input, other)
    if alpha == 1:
        return _SUB(other, input)
    dtype = np.result_type(input, other)
    if dtype == np.float32:
        input, other = input.astype(np.float64), other.astype(np.float64)
    return _SUB(other, input * alpha).astype(dtype, copy=False)


rsub = _pair(
    "rsub",
    _rsub,
    quiet(lambda g, ans, input, other, alpha=1: unbroadcast(g * -alpha, input.shape)),
    lambda g, ans, input, other, alpha=1: unbroadcast(g, other.shape),
    samples=lambda rng: binary_samples()(rng) + [Sample((uniform(rng, (2, 3)), uniform(rng, (3,))), {"alpha": 2.5})],
    torch_ref=lambda torch, input, other, alpha=1: torch.rsub(input, other, alpha=alpha),
    method=True,
    doc="other - alpha * input (sub with its operands swapped), elementwise with broadcasting.",
)


def _heaviside(input, values):
    # torch: 0 where input < 0, values where input == 0, 1 where input > 0; one dtype for both, NaN stays NaN
    if input.dtype != values.dtype:
        raise TypeError(
            f"heaviside: arguments 'input' ({input.dtype}) and 'values' ({values.dtype}) expected one dtype, as torch"
        )
    if input.dtype.kind == "b":
        raise TypeError("heaviside: argument 'input' expected a number tensor, got dtype bool")
    _broadcastable("heaviside", ("input", "values"), (input, values))
    out = np.where(input == 0, values, (input > 0).astype(input.dtype))  # NaN input: 0, as torch (np.heaviside: NaN)
    return out.astype(np.result_type(input, values), copy=False)


def _heaviside_samples(rng):
    x = np.array([-1.5, 0.0, -0.0, 2.0, np.nan])
    return [
        Sample((x, np.array([0.5])), {}, "zeros take values"),
        Sample((uniform(rng, (2, 3)), uniform(rng, (3,))), {}, "broadcast"),
        Sample((np.array([[1, 0], [-3, 0]]), np.array([7])), {}, "integers"),
        Sample((np.zeros((0, 3)), np.zeros(3)), {}, "zero-size"),
    ]


heaviside = defop(  # torch: "the derivative of heaviside is not implemented"; a step function either way
    "heaviside",
    method=True,
    family="binary",
    inputs=("input", "values"),
    forward=_heaviside,
    vjps=(NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE),
    samples=_heaviside_samples,
    torch_ref=lambda torch, input, values: torch.heaviside(input, values),
    doc="The Heaviside step elementwise: 0 where input < 0, 1 where input > 0, ``values`` where input == 0.",
)


def _nextafter_samples(rng):
    pairs = binary_samples()(rng)
    edges = np.array([0.0, -0.0, 1.0, np.inf, np.nan, 1.0, 5e-324])
    return pairs + [Sample((edges, np.array([1.0, -1.0, 1.0, 0.0, 1.0, np.nan, 0.0])), {}, "zeros, inf, NaN")]


nextafter = _pair(  # torch: not differentiable
    "nextafter",
    _floats("nextafter", np.nextafter, arithmetic=False),
    NOT_DIFFERENTIABLE,
    NOT_DIFFERENTIABLE,
    samples=_nextafter_samples,
    method=True,
    doc="The next floating-point value after input in the direction of other, elementwise.",
)

# numpy's and torch's other names for the same ops
multiply, divide, true_divide, subtract, arctan2 = mul, div, div, sub, atan2
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_div(g, rec, input, other):
    if rec.attributes.get("rounding_mode") is not None:
        raise NotExportable(f"rounding_mode={rec.attributes['rounding_mode']!r} has no lowering")
    want = rec.output.dtype  # true division: integer inputs give a floating quotient
    return g.op("Div", *(cast_to(g, n, s.dtype, want) for n, s in zip((input, other), rec.inputs, strict=True)))


def _onnx_ne(g, rec, a, b):
    return g.op("Not", elementwise("Equal", compute_in_output_dtype=False)(g, rec, a, b))


def _onnx_where(g, rec, condition, input, other):
    want = rec.output.dtype
    input, other = (cast_to(g, n, s.dtype, want) for n, s in zip((input, other), rec.inputs[1:], strict=True))
    return g.op("Where", condition, input, other)


def _onnx_alpha(op_type):
    """Add / Sub with torch's alpha: ``a op alpha * b``."""

    def lower(g, rec, a, b):
        want = rec.output.dtype
        a, b = (cast_to(g, n, s.dtype, want) for n, s in zip((a, b), rec.inputs, strict=True))
        alpha = rec.attributes.get("alpha", 1)
        if alpha == 1:
            return g.op(op_type, a, b)
        # the forward's a + alpha * b rounded once: float32 computes in float64 (alpha * 3e38 stays finite), bool
        # in int64 (True - True is False, True + -1 * False True)
        work = {np.dtype(np.float32): np.float64, np.dtype(np.bool_): np.int64}.get(np.dtype(want), want)
        a, b = cast_to(g, a, want, work), cast_to(g, b, want, work)
        return cast_to(g, g.op(op_type, a, g.op("Mul", b, g.const(np.array(alpha, work)))), work, want)

    return lower


def _onnx_operands(g, rec, *names):
    """The tensor inputs cast to the output's dtype."""
    want = rec.output.dtype
    return [cast_to(g, n, s.dtype, want) for n, s in zip(names, rec.inputs, strict=True)]


def _onnx_copysign(g, rec, input, other):
    input, other = _onnx_operands(g, rec, input, other)
    dtype = rec.output.dtype
    # the sign bit of other: negative, or -0 (1 / -0 = -inf); a NaN counts as positive
    negative = g.op(
        "Or", g.op("Less", other, scalar(g, 0, dtype)), g.op("Less", g.op("Reciprocal", other), scalar(g, 0, dtype))
    )
    magnitude = g.op("Abs", input)
    return g.op("Where", negative, g.op("Neg", magnitude), magnitude)


def _onnx_logaddexp(g, rec, input, other):
    a, b = _onnx_operands(g, rec, input, other)
    dtype = rec.output.dtype
    top = g.op("Max", a, b)
    tail = log1p_graph(g, rec, g.op("Exp", g.op("Neg", g.op("Abs", g.op("Sub", a, b)))))
    # equal inputs (infinities included): a + log 2, as numpy
    return g.op("Where", g.op("Equal", a, b), g.op("Add", a, scalar(g, np.log(2.0), dtype)), g.op("Add", top, tail))


def _onnx_hypot(g, rec, input, other):
    a, b = (g.op("Abs", n) for n in _onnx_operands(g, rec, input, other))
    dtype = rec.output.dtype
    top, low = g.op("Max", a, b), g.op("Min", a, b)
    zero = g.op("Equal", top, scalar(g, 0, dtype))
    ratio = g.op("Div", low, g.op("Where", zero, scalar(g, 1, dtype), top))
    scaled = g.op("Mul", top, g.op("Sqrt", g.op("Add", scalar(g, 1, dtype), g.op("Mul", ratio, ratio))))
    inf = g.op("Or", g.op("IsInf", a), g.op("IsInf", b))  # hypot(inf, NaN) = inf
    return g.op("Where", inf, scalar(g, np.inf, dtype), scaled)


def _onnx_is_negative(g, x, dtype):
    return g.op("Less", x, scalar(g, 0, dtype))


def _onnx_remainder(g, rec, input, other):
    a, b = _onnx_operands(g, rec, input, other)
    dtype = np.dtype(rec.output.dtype)
    if dtype.kind != "f":
        return g.op("Mod", a, b, fmod=0)  # integers: the sign of the divisor
    m = g.op("Mod", a, b, fmod=1)
    # numpy's divmod: a non-zero C remainder of the other sign than b moves by b; a zero one takes b's sign
    shift = g.op(
        "And",
        g.op("Not", g.op("Equal", m, scalar(g, 0, dtype))),
        g.op("Xor", _onnx_is_negative(g, b, dtype), _onnx_is_negative(g, m, dtype)),
    )
    signed_zero = g.op("Where", _onnx_is_negative(g, b, dtype), scalar(g, -0.0, dtype), scalar(g, 0.0, dtype))
    m = g.op("Where", g.op("Equal", m, scalar(g, 0, dtype)), signed_zero, m)
    return g.op("Where", shift, g.op("Add", m, b), m)


def _onnx_fmod(g, rec, input, other):
    return g.op("Mod", *_onnx_operands(g, rec, input, other), fmod=1)


def _onnx_floor_divide(g, rec, input, other):
    a, b = _onnx_operands(g, rec, input, other)
    dtype = np.dtype(rec.output.dtype)
    if dtype.kind != "f":
        return g.op("Div", g.op("Sub", a, g.op("Mod", a, b, fmod=0)), b)  # exact: a - a mod b is a multiple of b
    # numpy's npy_floor_divide: (a - fmod(a, b)) / b, one less where the remainder's sign differs from b's,
    # rounded to the nearest integer; a zero quotient keeps the sign of a / b
    mod = g.op("Mod", a, b, fmod=1)
    div = g.op("Div", g.op("Sub", a, mod), b)
    differs = g.op(
        "And",
        g.op("Not", g.op("Equal", mod, scalar(g, 0, dtype))),
        g.op("Xor", _onnx_is_negative(g, b, dtype), _onnx_is_negative(g, mod, dtype)),
    )
    div = g.op("Where", differs, g.op("Sub", div, scalar(g, 1, dtype)), div)
    floor = g.op("Floor", div)
    floor = g.op(
        "Where",
        g.op("Greater", g.op("Sub", div, floor), scalar(g, 0.5, dtype)),
        g.op("Add", floor, scalar(g, 1, dtype)),
        floor,
    )
    zero = g.op("Mul", scalar(g, 0, dtype), g.op("Div", a, b))
    out = g.op("Where", g.op("Equal", div, scalar(g, 0, dtype)), zero, floor)
    # by zero: a / b (+-inf, NaN for 0 / 0), as numpy; fmod by 0 is NaN, which the steps above carry
    return g.op("Where", g.op("Equal", b, scalar(g, 0, dtype)), g.op("Div", a, b), out)


def _onnx_lerp(g, rec, input, end, weight):
    dtype = np.dtype(rec.output.dtype)
    work = np.float64  # the forward computes in float64 and rounds once
    a, b, w = (cast_to(g, n, s.dtype, work) for n, s in zip((input, end, weight), rec.inputs, strict=True))
    diff = g.op("Sub", b, a)
    low = g.op("Add", a, g.op("Mul", w, diff))
    high = g.op("Sub", b, g.op("Mul", diff, g.op("Sub", scalar(g, 1, work), w)))
    out = g.op("Where", g.op("Less", g.op("Abs", w), scalar(g, 0.5, work)), low, high)
    return cast_to(g, out, work, dtype)


def _onnx_isclose(g, rec, input, other):
    a = rec.attributes
    rtol, atol, equal_nan = float(a.get("rtol", 1e-5)), float(a.get("atol", 1e-8)), bool(a.get("equal_nan", False))
    close = g.op("Equal", input, other)
    dtype = np.dtype(rec.inputs[0].dtype)
    if dtype.kind == "b":
        return close
    if equal_nan and dtype.kind == "f":
        close = g.op("Or", close, g.op("And", g.op("IsNaN", input), g.op("IsNaN", other)))
    if rtol == 0 and atol == 0:
        return close
    x, y = (cast_to(g, n, dtype, np.float64 if dtype.kind != "f" else dtype) for n in (input, other))
    work = np.float64 if dtype.kind != "f" else dtype
    actual = g.op("Abs", g.op("Sub", x, y))
    bound = g.op("Add", scalar(g, atol, work), g.op("Abs", g.op("Mul", y, scalar(g, rtol, work))))
    finite = g.op("Not", g.op("Or", g.op("IsInf", actual), g.op("IsNaN", actual)))
    return g.op("Or", close, g.op("And", finite, g.op("LessOrEqual", actual, bound)))


def _onnx_logical(op_type):
    def lower(g, rec, input, other):
        from onnx import TensorProto

        a, b = (
            n if s.dtype == np.bool_ else g.op("Cast", n, to=TensorProto.BOOL)
            for n, s in zip((input, other), rec.inputs, strict=True)
        )
        return g.op(op_type, a, b)

    return lower


def _onnx_xlogy(g, rec, input, other):
    x, y = _onnx_operands(g, rec, input, other)
    dtype = rec.output.dtype
    zero = g.op("And", g.op("Equal", x, scalar(g, 0, dtype)), g.op("Not", g.op("IsNaN", y)))
    return g.op("Where", zero, scalar(g, 0, dtype), g.op("Mul", x, g.op("Log", y)))


def _onnx_three(op_type):
    def lower(g, rec, input, tensor1, tensor2):
        value = scalar(g, rec.attributes.get("value", 1), rec.output.dtype)
        return g.op("Add", input, g.op("Mul", value, g.op(op_type, tensor1, tensor2)))

    return lower


lowering(add, _onnx_alpha("Add"))
lowering(sub, _onnx_alpha("Sub"))
for _op, _onnx_type in ((mul, "Mul"), (pow, "Pow"), (maximum, "Max"), (minimum, "Min")):
    lowering(_op, elementwise(_onnx_type))
for _op, _onnx_type in ((eq, "Equal"), (lt, "Less"), (le, "LessOrEqual"), (gt, "Greater"), (ge, "GreaterOrEqual")):
    lowering(_op, elementwise(_onnx_type, compute_in_output_dtype=False))
lowering(div, _onnx_div)
lowering(ne, _onnx_ne)
lowering(where, _onnx_where)
lowering(copysign, _onnx_copysign)
lowering(logaddexp, _onnx_logaddexp)
lowering(hypot, _onnx_hypot)
lowering(remainder, _onnx_remainder)
lowering(fmod, _onnx_fmod)
lowering(floor_divide, _onnx_floor_divide)
lowering(lerp, _onnx_lerp)
lowering(isclose, _onnx_isclose)
lowering(logical_and, _onnx_logical("And"))
lowering(logical_or, _onnx_logical("Or"))
lowering(logical_xor, _onnx_logical("Xor"))
lowering(xlogy, _onnx_xlogy)
lowering(addcmul, _onnx_three("Mul"))
lowering(addcdiv, _onnx_three("Div"))


def _onnx_logaddexp2(g, rec, input, other):
    """numpy's logaddexp2: max + log2(1 + 2^-|a - b|) (log1p / ln 2); equal inputs: a + 1."""
    a, b = _onnx_operands(g, rec, input, other)
    dtype = rec.output.dtype
    two = scalar(g, 2, dtype)
    tail = log1p_graph(g, rec, g.op("Pow", two, g.op("Neg", g.op("Abs", g.op("Sub", a, b)))))
    tail = g.op("Mul", tail, scalar(g, 1 / _LN2, dtype))
    return g.op("Where", g.op("Equal", a, b), g.op("Add", a, scalar(g, 1, dtype)), g.op("Add", g.op("Max", a, b), tail))


def _onnx_ldexp(g, rec, input, other):
    """input * 2^other; an integer exponent as two exact halves, so that 2^other alone neither overflows nor
    vanishes where the product does not (0.75 * 2^1024)."""
    dtype = rec.output.dtype
    two = scalar(g, 2, dtype)
    e = cast_to(g, other, rec.inputs[1].dtype, dtype)
    if np.dtype(rec.inputs[1].dtype).kind == "f":
        return g.op("Mul", input, g.op("Pow", two, e))
    first = g.op("Floor", g.op("Div", e, two))
    return g.op("Mul", g.op("Mul", input, g.op("Pow", two, first)), g.op("Pow", two, g.op("Sub", e, first)))


def _onnx_nan_aware(wins: str):
    """fmax (wins: GreaterOrEqual) / fmin (LessOrEqual): input where it wins or other is NaN, else other."""

    def lower(g, rec, input, other):
        a, b = _onnx_operands(g, rec, input, other)
        taken = g.op(wins, a, b)
        if np.dtype(rec.output.dtype).kind == "f":
            taken = g.op("Or", taken, g.op("IsNaN", b))
        return g.op("Where", taken, a, b)

    return lower


def _onnx_rsub(g, rec, input, other):
    """other - alpha * input, float32 computed in float64 as the forward (rounded once)."""
    dtype = np.dtype(rec.output.dtype)
    alpha = rec.attributes.get("alpha", 1)
    work = np.float64 if dtype == np.float32 and alpha != 1 else dtype
    a, b = (cast_to(g, n, s.dtype, work) for n, s in zip((input, other), rec.inputs, strict=True))
    if alpha != 1:
        a = g.op("Mul", a, g.const(np.array(alpha, work)))
    return cast_to(g, g.op("Sub", b, a), work, dtype)


def _onnx_heaviside(g, rec, input, values):
    dtype = rec.output.dtype
    step = g.op("Cast", g.op("Greater", input, scalar(g, 0, dtype)), to=tensor_type(dtype))  # NaN: 0, as torch
    return g.op("Where", g.op("Equal", input, scalar(g, 0, dtype)), values, step)


lowering(logaddexp2, _onnx_logaddexp2)
lowering(ldexp, _onnx_ldexp)
lowering(fmax, _onnx_nan_aware("GreaterOrEqual"))
lowering(fmin, _onnx_nan_aware("LessOrEqual"))
lowering(rsub, _onnx_rsub)
lowering(heaviside, _onnx_heaviside)
lowering(nextafter, not_exportable="ONNX has no nextafter, and no bitcast to step a float's bits")
lowering(
    atan2, not_exportable="ONNX has no Atan2; Atan(y / x) with quadrant fixes misplaces signed zeros and infinities"
)
