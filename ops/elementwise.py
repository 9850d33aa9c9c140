"""Unary elementwise ops: each declared with its forward and its backward side by side.

Conventions, all as in PyTorch 2.13:
- Ops defined only on floats (exp, log, sigmoid, gelu, ...) refuse integer and bool tensors instead of casting
  them; neg, abs, square, relu and clamp keep an integer dtype, as torch does.
- Values torch returns silently (log(0) = -inf, exp(1000) = inf, sqrt(-1) = NaN, sin(inf) = NaN) come back without
  numpy's RuntimeWarning: the forwards and rules that can meet them run ``quiet`` (ops/binary.py).
"""

__all__ = [
    "neg",
    "abs",
    "sign",
    "exp",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "rsqrt",
    "square",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "relu",
    "leaky_relu",
    "elu",
    "gelu",
    "gelu_backward",
    "silu",
    "softplus",
    "clamp",
    "erf",
    "erfc",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "erfinv",
    "exp2",
    "reciprocal",
    "floor",
    "ceil",
    "round",
    "trunc",
    "frac",
    "nan_to_num",
    "isinf",
    "isnan",
    "isfinite",
    "logical_not",
    "clamp_min",
    "clamp_max",
    "logit",
    "clone",
    "deg2rad",
    "rad2deg",
    "sgn",
    "positive",
    "signbit",
    "isposinf",
    "isneginf",
    "isreal",
    "frexp",
    "fix",
    "absolute",
    "negative",
    "clip",
    "arcsin",
    "arccos",
    "arctan",
    "arcsinh",
    "arccosh",
    "arctanh",
]

import math

import numpy as np

from tape.broadcast import unbroadcast
from tape.onnx import lowering
from tape.registry import NOT_DIFFERENTIABLE, Grad, Sample, defop
from tape.tensors import Tensor

from . import _numpy
from ._declare import one_input_op
from ._kernels.rowwise import flat_blockwise, owned_like
from ._notes import case_law
from ._numerics import quiet
from ._onnx import cast_to, elementwise, float_only, log1p_graph, scalar, tensor_type
from ._onnx import clip as onnx_clip
from ._samples import away_from, transposed, unary_samples, uniform
from ._validation import broadcast_or_fail, functional, integer, real, require, require_float
from ._validation import floats_only as float_check

# torch's case law, op by op: each entry joins the notes= of the ops it names (shown in docs/coverage.md)
_CASE_LAW = (
    (
        ("abs", "relu", "leaky_relu", "elu", "clamp"),
        "At a kink the gradient is torch's: abs'(0) = 0, relu'(0) = 0, leaky_relu'(0) = negative_slope, "
        "elu'(0) = alpha; clamp passes the gradient where min <= x <= max (bounds included) and nowhere when "
        "min > max (every output is then ``max``). clamp's bounds may be tensors (torch's clamp.Tensor), with "
        "torch's gradients for them: min's where x < min < max, max's where x > max or max < min.",
    ),
    (
        ("sign",),
        "sign's gradient is 0 (its derivative wherever it exists; torch's convention at 0 too), so a tensor "
        "that requires grad can flow through it -- the engine refuses such tensors in NOT_DIFFERENTIABLE "
        "slots.",
    ),
    (
        ("abs", "sign", "relu", "elu"),
        "At NaN: sign(NaN) = 0 and abs'(NaN) = 0, relu passes the gradient, as torch does; elu's gradient is "
        "NaN (torch's is 1 or NaN depending on which of its kernels runs).",
    ),
    (
        ("sigmoid", "silu", "softplus"),
        "sigmoid, silu and softplus go through ``logaddexp``: inputs of +-1e4 give finite values and gradients.",
    ),
    (
        ("erf", "erfc"),
        "erf and erfc use W. J. Cody's rational approximations in float64 (relative error ~1e-15; erfc keeps "
        "it in the right tail, erf near 0); float32 input is computed in float64 and rounded.",
    ),
    (
        ("gelu", "silu"),
        "gelu's exact form needs the normal CDF: float64 uses Cody's erfc, float32 Abramowitz & Stegun 7.1.26"
        " (absolute error < 1e-7, below float32's resolution of the CDF), evaluated in place (gelu sits on "
        "the training hot path). The forward saves gelu's slope (silu its sigmoid), so the backward is a "
        "single multiplication. Under create_graph gelu's rule records ``gelu_backward`` (torch's aten op: one "
        "node, with its own rules for the second order and a short ONNX lowering); silu's second order "
        "differentiates a ``composite`` (x * sigmoid(x)).",
    ),
)

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


# -- argument checks -------------------------------------------------------------------------------------------
def _no_bool(name):
    def check(x, **attrs):
        if x.dtype.kind == "b":
            raise TypeError(f"{name}: argument 'x' expected a number tensor, got dtype bool")

    check.passes_floats = True  # type: ignore[attr-defined]  # the engine need not call it for a float tensor
    return check


def _unary(
    name,
    forward,
    vjp,
    *,
    low=-2.0,
    high=2.0,
    kinks=(),
    attrs=None,
    floats_only=True,
    torch_ref=None,
    samples=None,
    parameter="x",
    **declaration,
):
    """Declare a one-input elementwise op whose tensor parameter is ``parameter`` (the forward's own name for
    it: "x", or torch's "input"); the torch reference defaults to ``torch.<name>``."""
    if floats_only:
        declaration.setdefault("check", float_check(name, parameter))
    return one_input_op(
        name,
        "elementwise",
        forward,
        vjp,
        input_name=parameter,
        samples=samples or unary_samples(low, high, attrs, kinks),
        torch_ref=torch_ref or (lambda torch, x, **attrs: getattr(torch, name)(x, **attrs)),
        **declaration,
    )


def _quiet_ufunc(ufunc, parameter="x"):
    """A one-input ufunc as a forward quiet about inf/NaN results (log(0) = -inf, exp(1000) = inf, as torch),
    whose parameter is called ``parameter`` ("x" or "input": callers may pass it by keyword)."""

    def forward(x):
        return ufunc(x)

    def forward_input(input):
        return ufunc(input)

    chosen = forward_input if parameter == "input" else forward
    chosen.__name__ = f"_{ufunc.__name__}"
    return quiet(chosen)


def _ufunc(name, ufunc, vjp, low=-2.0, high=2.0, parameter="x", **options):
    """Declare a one-input ufunc op: its forward is ``ufunc`` quiet about inf/NaN results (``_quiet_ufunc``), and
    it is a Tensor method and ``ufunc``'s numpy dispatch; samples on [low, high]."""
    options.setdefault("numpy", ufunc)
    return _unary(
        name, _quiet_ufunc(ufunc, parameter), vjp, low=low, high=high, parameter=parameter, method=True, **options
    )


# -- arithmetic ------------------------------------------------------------------------------------------------
def _sign(x):
    return np.where(x == x, np.sign(x), 0)  # torch: sign(NaN) = 0


neg = _unary(
    "neg",
    np.negative,
    lambda g, ans, x: np.negative(g),
    floats_only=False,
    check=_no_bool("neg"),
    method=True,
    numpy=np.negative,
    doc="-x elementwise.",
)
abs = _unary(
    "abs",
    np.abs,
    lambda g, ans, x: g * _sign(x),
    kinks=(0.0,),
    floats_only=False,
    method=True,
    numpy=np.absolute,
    notes=case_law(_CASE_LAW, "abs"),
    doc="|x| elementwise.",
)
sign = _unary(
    "sign",
    _sign,
    lambda g, ans, x: np.zeros_like(g),
    floats_only=False,
    check=_no_bool("sign"),
    kinks=(0.0,),
    method=True,
    numpy={np.sign: _numpy.sign},
    notes=case_law(_CASE_LAW, "sign"),
    doc="-1, 0 or 1 elementwise, as x is negative, zero or positive (0 for NaN).",
)
square = _unary(
    "square",
    _quiet_ufunc(np.square),
    quiet(lambda g, ans, x: g * (x * 2)),
    floats_only=False,
    check=_no_bool("square"),
    method=True,
    numpy=np.square,
    doc="x * x elementwise.",
)


# -- exponentials, logarithms, roots ---------------------------------------------------------------------------
exp = _ufunc("exp", np.exp, lambda g, ans, x: g * ans, doc="e ** x elementwise.")
expm1 = _ufunc("expm1", np.expm1, lambda g, ans, x: g * (ans + 1), doc="exp(x) - 1 elementwise, accurate for small x.")
log = _ufunc("log", np.log, quiet(lambda g, ans, x: g / x), 0.1, 3.0, doc="The natural logarithm elementwise.")
log2 = _ufunc(
    "log2", np.log2, quiet(lambda g, ans, x: g / (x * _LN2)), 0.1, 3.0, doc="The base-2 logarithm elementwise."
)
log10 = _ufunc(
    "log10", np.log10, quiet(lambda g, ans, x: g / (x * _LN10)), 0.1, 3.0, doc="The base-10 logarithm elementwise."
)
log1p = _ufunc(
    "log1p",
    np.log1p,
    quiet(lambda g, ans, x: g / (x + 1)),
    -0.9,
    2.0,
    doc="log(1 + x) elementwise, accurate for small x.",
)
sqrt = _ufunc(
    "sqrt", np.sqrt, quiet(lambda g, ans, x: g / (ans * 2)), 0.1, 3.0, doc="The square root elementwise (NaN below 0)."
)


@quiet
def _rsqrt(x):
    return np.reciprocal(np.sqrt(x))


rsqrt = _unary(
    "rsqrt",
    _rsqrt,
    quiet(lambda g, ans, x: g * (ans * ans * ans) * -0.5),
    low=0.1,
    high=3.0,
    method=True,
    doc="1 / sqrt(x) elementwise.",
)


# -- trigonometric and hyperbolic ------------------------------------------------------------------------------
sin = _ufunc("sin", np.sin, quiet(lambda g, ans, x: g * np.cos(x)), -3.0, 3.0, doc="The sine elementwise (radians).")
cos = _ufunc("cos", np.cos, quiet(lambda g, ans, x: g * -np.sin(x)), -3.0, 3.0, doc="The cosine elementwise (radians).")
tanh = _unary(
    "tanh",
    np.tanh,
    lambda g, ans, x: g * (1 - ans * ans),
    method=True,
    numpy=np.tanh,
    doc="The hyperbolic tangent elementwise.",
)


@quiet  # logaddexp(0, NaN) warns
def _sigmoid(x):
    # 1 / (1 + exp(-x)) = exp(-log(1 + exp(-x))); logaddexp never overflows
    return np.exp(-np.logaddexp(0, -x))


sigmoid = _unary(
    "sigmoid",
    _sigmoid,
    lambda g, ans, x: g * ans * (1 - ans),
    low=-4.0,
    high=4.0,
    method=True,
    notes=case_law(_CASE_LAW, "sigmoid"),
    doc="1 / (1 + exp(-x)) elementwise.",
)


# -- activations -----------------------------------------------------------------------------------------------
# not g * (x > 0): torch passes the gradient at NaN
relu = _unary(
    "relu",
    lambda x: np.maximum(x, 0),
    lambda g, ans, x: np.where(x <= 0, 0, g),
    kinks=(0.0,),
    floats_only=False,
    method=True,
    notes=case_law(_CASE_LAW, "relu"),
    doc="max(x, 0) elementwise.",
)


def _leaky_relu(x, negative_slope=0.01):
    return np.where(x > 0, x, x * real("leaky_relu", "negative_slope", negative_slope))


def _leaky_relu_vjp(g, ans, x, negative_slope=0.01):
    return np.where(x > 0, g, g * float(negative_slope))


leaky_relu = _unary(
    "leaky_relu",
    _leaky_relu,
    _leaky_relu_vjp,
    kinks=(0.0,),
    attrs=[{}, {"negative_slope": 0.2}],
    torch_ref=functional("leaky_relu"),
    notes=case_law(_CASE_LAW, "leaky_relu"),
    doc="x where x > 0, else negative_slope * x, elementwise.",
)


def _elu(x, alpha=1.0):
    alpha = real("elu", "alpha", alpha)
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)) * alpha)


def _elu_vjp(g, ans, x, alpha=1.0):
    # alpha * exp(x) for x <= 0; not elu(x) + alpha, which rounds to 0 in the far left tail
    return np.where(x > 0, g, g * np.exp(np.minimum(x, 0)) * float(alpha))


elu = _unary(
    "elu",
    _elu,
    _elu_vjp,
    kinks=(0.0,),
    attrs=[{}, {"alpha": 0.5}],
    torch_ref=functional("elu"),
    notes=case_law(_CASE_LAW, "elu"),
    doc="x where x > 0, else alpha * (exp(x) - 1), elementwise.",
)


# gelu(x) = x * Phi(x), Phi the standard normal CDF; 'tanh' approximates Phi(x) by (1 + tanh(u)) / 2 with
# u = sqrt(2 / pi) * (x + 0.044715 x^3).
_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_GELU_CUBIC = 0.044715

# W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp. 23 (1969): erf on
# [0, 0.46875], erfc * exp(z^2) on (0.46875, 4] and on (4, inf).
_ERF_A = (
    3.16112374387056560e00,
    1.13864154151050156e02,
    3.77485237685302021e02,
    3.20937758913846947e03,
    1.85777706184603153e-1,
)
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
_ERFC_C = (
    5.64188496988670089e-1,
    8.88314979438837594e00,
    6.61191906371416295e01,
    2.98635138197400131e02,
    8.81952221241769090e02,
    1.71204761263407058e03,
    2.05107837782607147e03,
    1.23033935479799725e03,
    2.15311535474403846e-8,
)
_ERFC_D = (
    1.57449261107098347e01,
    1.17693950891312499e02,
    5.37181101862009858e02,
    1.62138957456669019e03,
    3.29079923573345963e03,
    4.36261909014324716e03,
    3.43936767414372164e03,
    1.23033935480374942e03,
)
_ERFC_P = (
    3.05326634961232344e-1,
    3.60344899949804439e-1,
    1.25781726111229246e-1,
    1.60837851487422766e-2,
    6.58749161529837803e-4,
    1.63153871373020978e-2,
)
_ERFC_Q = (
    2.56852019228982242e00,
    1.87295284992346047e00,
    5.27905102951428412e-1,
    6.05183413124413191e-2,
    2.33520497626869185e-3,
)


def _cody_ratio(y, num, den):
    """Cody's rational function in ``y``: ``num`` holds len(den) + 1 coefficients, the leading one last."""
    m = len(den)
    top = num[m] * y
    bottom = y
    for i in range(m - 1):
        top = (top + num[i]) * y
        bottom = (bottom + den[i]) * y
    return (top + num[m - 1]) / (bottom + den[m - 1])


def _erfc_small(z):
    return 1 - z * _cody_ratio(z * z, _ERF_A, _ERF_B)


def _erfc_middle(z):
    return _cody_ratio(z, _ERFC_C, _ERFC_D) * np.exp(-z * z)


def _erfc_large(z):
    z = np.minimum(z, 30.0)  # erfc(30) underflows to 0 already; keeps z * z finite
    inv_sq = 1 / (z * z)
    # exp(-z^2) as exp(-h^2) exp(-(z - h)(z + h)) with h = z rounded down to 1/16 (exact h^2): z * z itself
    # rounds, and exp turns its rounding error (relative 1e-16 * z^2) into a relative error of the tail
    h = np.floor(z * 16) / 16
    gauss = np.exp(-h * h) * np.exp(-(z - h) * (z + h))
    return (_INV_SQRT_PI - inv_sq * _cody_ratio(inv_sq, _ERFC_P, _ERFC_Q)) / z * gauss


def _erfc64(z):
    """erfc(z) for float64 z >= 0 (NaN stays NaN), to ~1e-15 relative."""
    small = z <= 0.46875
    large = z > 4.0
    middle = ~(small | large)  # NaN lands here and stays NaN
    if middle.all():
        return _erfc_middle(z)
    out = np.empty_like(z)
    for part, formula in ((small, _erfc_small), (middle, _erfc_middle), (large, _erfc_large)):
        if part.any():
            out[part] = formula(z[part])
    return out


# Abramowitz & Stegun 7.1.26: erfc(z) ~ t * poly(t) * exp(-z^2), t = 1 / (1 + p z). With z = |x| / sqrt 2 the
# tail P(N > |x|) = erfc(z) / 2 is t * poly(t) * exp(-x^2 / 2) with the 1/2 folded into the coefficients.
_AS_P = 0.3275911
_AS_COEF = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_INV_TAIL_P = np.float32(1 / (_AS_P * _SQRT_HALF))
_TAIL_COEF = tuple(np.float32(c * 0.5) for c in _AS_COEF)
_HALF_LOG2E = np.float32(-0.5 / math.log(2.0))  # exp(-x^2 / 2) = exp2(x^2 * _HALF_LOG2E)


def _gelu_exact32_block(x, out, slope, t, gauss, mask) -> None:
    """``out = gelu(x)`` and ``slope = Phi(x) + x phi(x)`` (its derivative) for a block of float32 ``x``, in
    place in the scratch blocks ``t``, ``gauss`` (float32) and ``mask`` (bool): P(N > |x|) by Abramowitz &
    Stegun 7.1.26 (built up in ``slope``), then Phi from it."""
    np.abs(x, out=t)
    t += _INV_TAIL_P
    np.divide(_INV_TAIL_P, t, out=t)  # t = 1 / (1 + p |x|) in three passes; np.divide is twice np.reciprocal's speed
    a1, a2, a3, a4, a5 = _TAIL_COEF
    tail = np.multiply(t, a5, out=slope)
    for c in (a4, a3, a2):
        tail += c
        tail *= t
    tail += a1
    tail *= t
    np.square(x, out=gauss)
    gauss *= _HALF_LOG2E
    np.exp2(gauss, out=gauss)  # exp(-x^2 / 2): numpy's float32 exp2 is twice as fast as its exp, as accurate
    tail *= gauss
    # Phi(x) = tail where x < 0, 1 - tail elsewhere; blended arithmetically, as np.where and masked copies are
    # 5-7 times slower on mixed signs. For x < 0 the added term is exactly 0, so the left tail keeps its
    # relative accuracy.
    upper = np.multiply(tail, np.float32(-2), out=t)
    upper += 1
    upper *= np.greater_equal(x, 0, out=mask)
    cdf = tail
    cdf += upper
    np.multiply(x, cdf, out=out)
    gauss *= x
    gauss *= np.float32(_INV_SQRT_2PI)
    cdf += gauss  # cdf becomes the slope


def _gelu_tanh_block(x, out, slope, u, du, t, a) -> None:
    """``out`` = gelu's tanh form of a block of ``x`` and ``slope`` its derivative, in place in the scratch blocks
    ``u``, ``du``, ``t``, ``a``, in torch's order of operations."""
    np.multiply(x, x, out=u)
    np.multiply(u, 3 * _GELU_CUBIC, out=du)
    du += 1
    du *= _SQRT_2_OVER_PI  # du/dx of the tanh's argument
    np.multiply(u, x, out=t)
    t *= _GELU_CUBIC
    t += x
    t *= _SQRT_2_OVER_PI
    np.tanh(t, out=t)
    np.add(t, 1, out=a)
    np.multiply(x, 0.5, out=out)
    out *= a  # x * 0.5 * (1 + t)
    np.multiply(t, t, out=u)
    np.subtract(1, u, out=u)
    u *= x
    u *= du
    u *= 0.5
    a *= 0.5
    np.add(a, u, out=slope)  # (1 + t) * 0.5 + x * (1 - t * t) * du * 0.5


def _gelu_blocks(kernel, scratch, x):
    """(gelu, slope) of ``x`` (any shape) by the block ``kernel`` over flat blocks (rowwise.flat_blockwise)."""
    flat = x.reshape(-1)  # a copy only when x is not contiguous
    out, slope = owned_like(flat), owned_like(flat)
    flat_blockwise(kernel, scratch, flat, out, slope)
    return out.reshape(x.shape), slope.reshape(x.shape)


def _normal_cdf64(x):
    """Phi(x) = erfc(-x / sqrt(2)) / 2 for float64, from the tail P(N > |x|) so both tails keep their accuracy."""
    tail = _erfc64(np.abs(x) * _SQRT_HALF) * 0.5
    return np.where(x < 0, tail, 1 - tail)


def _erf_small(z):
    return z * _cody_ratio(z * z, _ERF_A, _ERF_B)


def _erf_forward(x):
    """erf(x), odd: z * R(z^2) near 0 (no cancellation), 1 - erfc(|x|) with x's sign beyond. float32 input is
    computed in float64 and rounded."""
    x64 = x.astype(np.float64).reshape(-1)  # 1-D: ufuncs on 0-D arrays give scalars, which take no item writes
    out = np.copysign(1 - _erfc64(np.abs(x64)), x64)
    small = np.abs(x64) <= 0.46875
    if small.any():
        out[small] = _erf_small(x64[small])
    return out.reshape(x.shape).astype(x.dtype, copy=False)


def _erfc_forward(x):
    """erfc(x): erfc(|x|) for x >= 0 and 2 - erfc(|x|) below, so the right tail keeps its relative accuracy."""
    x64 = x.astype(np.float64).reshape(-1)
    tail = _erfc64(np.abs(x64))
    return np.where(x64 < 0, 2 - tail, tail).reshape(x.shape).astype(x.dtype, copy=False)


def _erf_samples(rng):
    """The default samples plus every branch of Cody's approximations, both tails included."""
    x = np.array([-6.0, -4.5, -2.0, -0.7, -0.3, -1e-3, 0.0, 1e-3, 0.3, 0.7, 2.0, 4.5, 6.0])
    return unary_samples(-3.0, 3.0)(rng) + [Sample((x,), {}, "every branch")]


@quiet  # x^2 may overflow (exp(-inf) = 0 then)
def _gauss_slope(g, x, scale):
    """g * scale * exp(-x^2): erf's derivative up to the sign."""
    return g * np.exp(-(x * x)) * scale


erf = _unary(
    "erf",
    _erf_forward,
    lambda g, ans, x: _gauss_slope(g, x, 2 * _INV_SQRT_PI),
    samples=_erf_samples,
    method=True,
    notes=case_law(_CASE_LAW, "erf"),
)
erfc = _unary(
    "erfc",
    _erfc_forward,
    lambda g, ans, x: _gauss_slope(g, x, -2 * _INV_SQRT_PI),
    samples=_erf_samples,
    method=True,
    notes=case_law(_CASE_LAW, "erfc"),
)


# The forward saves gelu's slope, so the backward is one multiplication.
@quiet  # x^2 overflows for huge x, inf * 0 in the tails: torch's inf/NaN
def _gelu(x, approximate="none"):
    if approximate == "none":
        if x.dtype == np.float32:
            out, slope = _gelu_blocks(_gelu_exact32_block, (np.float32, np.float32, np.bool_), x)
            return out, {"saved": slope}
        cdf = _normal_cdf64(x)
        return x * cdf, {"saved": cdf + x * np.exp(x * x * -0.5) * _INV_SQRT_2PI}
    if approximate == "tanh":
        out, slope = _gelu_blocks(_gelu_tanh_block, (x.dtype,) * 4, x)
        return out, {"saved": slope}
    raise ValueError(f"gelu: argument 'approximate' expected 'none' or 'tanh', got {approximate!r}")


def _gelu_vjp(g, ans, x, approximate="none", saved=None):
    if saved is None:  # create_graph: the rule on Tensors, without the forward's saved slope
        return gelu_backward(g, x, approximate=approximate)
    if isinstance(g, np.ndarray) and g.shape == saved.shape and g.dtype == saved.dtype:
        return np.multiply(g, saved, out=owned_like(saved))
    return g * saved


gelu = _unary(
    "gelu",
    _gelu,
    _gelu_vjp,
    low=-3.0,
    high=3.0,
    attrs=[{}, {"approximate": "tanh"}],
    returns_aux=True,
    second_order=Grad.RULE,  # the rule records gelu_backward when given no saved slope
    torch_ref=functional("gelu"),
    notes=case_law(_CASE_LAW, "gelu"),
    doc="x * Phi(x) elementwise, Phi the standard normal CDF; approximate='tanh' uses the tanh approximation of it.",
)


# -- gelu_backward: gelu's derivative times a gradient, one op (torch's aten.gelu_backward) -------------------
@quiet  # inf * 0 where the slope vanishes: torch's NaN
def _gelu_backward(grad_output, input, approximate="none"):
    """``grad_output * gelu'(input)``: gelu's backward as one op (aten.gelu_backward in torch), what gelu's rule
    records under create_graph (a recorded backward then holds one node per gelu: 11 ONNX nodes, not ~36)."""
    return _gelu_vjp(grad_output, None, input, approximate, saved=_gelu(input, approximate)[1]["saved"])


@quiet  # x^2 overflows for huge x: torch's inf/NaN
def _gelu_curvature(x, approximate):
    """gelu''(x), from registered ops on Tensors (the second order) or numpy on arrays: 2 phi(x) - x^2 phi(x), or the
    tanh form's (1 - t^2) (u' + 3 a c x^2 - x t u'^2) with u = c (x + a x^3), t = tanh(u), u' = c (1 + 3 a x^2)."""
    x2 = x * x
    if approximate == "tanh":
        t = np.tanh((x + x2 * x * _GELU_CUBIC) * _SQRT_2_OVER_PI)
        du = (x2 * (3 * _GELU_CUBIC) + 1) * _SQRT_2_OVER_PI
        return (1 - t * t) * (du + x2 * (3 * _GELU_CUBIC * _SQRT_2_OVER_PI) - x * t * du * du)
    phi = np.exp(x2 * -0.5) * _INV_SQRT_2PI
    return phi * 2 - x * (x * phi)  # not phi (2 - x^2): 0, not 0 * -inf, where float32's x^2 overflows


def _gelu_backward_grad_vjp(g, ans, grad_output, input, approximate="none"):
    return (
        gelu_backward(g, input, approximate=approximate)
        if isinstance(g, Tensor)
        else _gelu_backward(g, input, approximate)
    )


@quiet  # x^2 overflows for huge x: torch's inf/NaN
def _gelu_backward_input_vjp(g, ans, grad_output, input, approximate="none"):
    return g * grad_output * _gelu_curvature(input, approximate)


def _check_gelu_backward(grad_output, input, approximate="none"):
    op = "gelu_backward"
    require_float(op, "grad_output", grad_output)
    require_float(op, "input", input)
    require(input.dtype == grad_output.dtype, op, "input", f"dtype {grad_output.dtype} (grad_output's)", input.dtype)
    require(input.shape == grad_output.shape, op, "input", f"shape {grad_output.shape} (grad_output's)", input.shape)
    require(
        isinstance(approximate, str) and approximate in ("none", "tanh"),
        op,
        "approximate",
        "'none' or 'tanh'",
        repr(approximate),
    )


def _gelu_backward_samples(rng):
    return [
        Sample((uniform(rng, shape), uniform(rng, shape, -3.0, 3.0)), attrs, f"{what}, {attrs or 'exact'}")
        for attrs in ({}, {"approximate": "tanh"})
        for shape, what in (((), "scalar"), ((2, 3), "matrix"), ((0, 3), "zero-size"))
    ] + [Sample((transposed(rng, (3, 4)), transposed(rng, (3, 4), -3.0, 3.0)), {}, "non-contiguous")]


gelu_backward = defop(
    "gelu_backward",
    family="elementwise",
    inputs=("grad_output", "input"),
    forward=_gelu_backward,
    vjps=(_gelu_backward_grad_vjp, _gelu_backward_input_vjp),
    check=_check_gelu_backward,
    samples=_gelu_backward_samples,
    torch_ref=lambda torch, grad_output, input, **attrs: torch.ops.aten.gelu_backward(grad_output, input, **attrs),
)


@quiet
def _silu(x):
    s = _sigmoid(x)
    return x * s, {"saved": s}


@quiet
def _silu_vjp(g, ans, x, saved=None):
    s = saved
    return g * s * (1 + x * (1 - s))


silu = _unary(
    "silu",
    _silu,
    _silu_vjp,
    low=-4.0,
    high=4.0,
    returns_aux=True,
    composite=lambda x: x * sigmoid(x),
    torch_ref=functional("silu"),
    notes=case_law(_CASE_LAW, "silu"),
    doc="x * sigmoid(x) elementwise (swish).",
)


@quiet
def _softplus(x, beta=1, threshold=20):
    b = real("softplus", "beta", beta)
    t = real("softplus", "threshold", threshold)
    if b == 0:
        raise ValueError("softplus: argument 'beta' expected a non-zero number, got 0")
    if b == 1:
        return np.where(x > t, x, np.logaddexp(0, x))
    z = x * b
    return np.where(z > t, x, np.logaddexp(0, z) / b)  # log(1 + exp(z)) / beta, stable for any z


@quiet
def _softplus_vjp(g, ans, x, beta=1, threshold=20):
    # below the threshold d/dx = sigmoid(beta x) = 1 - exp(-beta * softplus(x)): no second logaddexp
    b = float(beta)
    z = x if b == 1 else x * b
    return np.where(z > float(threshold), g, g * -np.expm1(ans * -b))


softplus = _unary(
    "softplus",
    _softplus,
    _softplus_vjp,
    kinks=(1.5,),
    attrs=[{}, {"beta": 2.0, "threshold": 3.0}],
    torch_ref=functional("softplus"),
    notes=case_law(_CASE_LAW, "softplus"),
    doc="log(1 + exp(beta * x)) / beta elementwise; x itself where beta * x > threshold.",
)


# -- clamp -----------------------------------------------------------------------------------------------------
def _clamp_bounds(x, min, max, op="clamp", parameter="x"):
    """torch's checks of clamp's bounds (Tensors here: numbers arrive as 0-D constants): at least one, numbers
    (not bool) of x's kind -- an integer tensor takes integer bounds; clamp_min / clamp_max name themselves and
    their ``input``."""
    if min is None and max is None:
        raise ValueError(f"{op}: at least one of the arguments 'min' and 'max' must be given (not None)")
    if x.dtype.kind == "b":
        raise TypeError(f"{op}: argument '{parameter}' expected a number tensor, got dtype bool")
    for name, bound in (("min", min), ("max", max)):
        if bound is None:
            continue
        if bound.dtype.kind == "b":
            raise TypeError(f"{op}: argument '{name}' expected a number or a number tensor, got dtype bool")
        if x.dtype.kind != "f" and bound.dtype.kind == "f":
            raise TypeError(
                f"{op}: argument '{name}' is floating ({bound.dtype}) but '{parameter}' is {x.dtype}; an integer "
                f"tensor takes integer bounds (minitape never casts silently)"
            )
    shapes = [x.shape]
    for name, bound in (("min", min), ("max", max)):
        if bound is not None:
            shapes.append(bound.shape)
            expected = f"a shape broadcastable with {parameter} {x.shape}" + (" and min" if len(shapes) == 3 else "")
            broadcast_or_fail(op, name, shapes, expected, bound.shape)


def _clamp(x, min=None, max=None):
    return _clamped(x, min, max, "clamp", "x")


def _clamped(x, min, max, op, parameter):
    """clamp's forward, its refusals naming ``op`` and its tensor ``parameter`` (clamp_min / clamp_max: input)."""
    _clamp_bounds(x, min, max, op, parameter)
    out = x
    if min is not None:
        out = np.maximum(out, min.astype(x.dtype, copy=False) if x.dtype.kind == "f" else min)
    if max is not None:
        out = np.minimum(out, max.astype(x.dtype, copy=False) if x.dtype.kind == "f" else max)
    return out


# torch's rules (clamp_backward, clamp_backward_min_max): x takes the gradient where min <= x <= max (bounds
# included; nowhere when min > max, where every output is max); min where x < min < max; max where x > max or
# max < min
def _clamp_vjp_x(g, ans, x, min, max):
    if max is None:
        return unbroadcast(np.where(x >= min, g, 0), x.shape)
    if min is None:
        return unbroadcast(np.where(x <= max, g, 0), x.shape)
    return unbroadcast(np.where(np.logical_and(x >= min, x <= max), g, 0), x.shape)


def _clamp_vjp_min(g, ans, x, min, max):
    below = x < min if max is None else np.logical_and(x < min, min < max)
    return unbroadcast(np.where(below, g, 0), min.shape)


def _clamp_vjp_max(g, ans, x, min, max):
    above = x > max if min is None else np.logical_or(x > max, max < min)
    return unbroadcast(np.where(above, g, 0), max.shape)


def _clamp_samples(rng):
    kinks = (-1.0, -0.5, 0.5, 0.75)
    out = []
    for low, high in ((-0.5, 0.75), (-1.0, None), (None, 0.5), (0.5, -0.5)):  # numbers (0-D tensors), min > max last
        for s in unary_samples(kinks=kinks)(rng):
            bound = [None if v is None else np.array(v) for v in (low, high)]
            out.append(Sample((s.inputs[0], *bound), {}, f"{s.label} min={low} max={high}"))
    x = away_from(uniform(rng, (3, 4)), (-0.5, 0.5))
    lower = x + np.where(rng.random((3, 4)) > 0.5, 0.3, -0.3)  # bounds on both sides of x, never at it
    out.append(Sample((x, lower, lower + 1.0), {}, "tensor bounds"))
    out.append(Sample((x, uniform(rng, (4,), -0.4, 0.4) + 0.01 * np.arange(4), None), {}, "tensor min, broadcast"))
    out.append(Sample((x.T, None, uniform(rng, (3,), -0.4, 0.4)[None, :].repeat(4, 0)), {}, "tensor max, transposed x"))
    out.append(Sample((x, x - 0.3, x - 0.6), {}, "tensor min > max: every output is max"))
    out.append(Sample((uniform(rng, (0, 3)), uniform(rng, (3,)), None), {}, "zero-size"))
    out.append(Sample((np.array([-3, 0, 2, 7]), np.array(-1), np.array([3, 3, 1, 9])), {}, "integers"))
    return out


clamp = defop(
    "clamp",
    family="elementwise",
    inputs=("x", "min?", "max?"),
    forward=_clamp,
    vjps=(_clamp_vjp_x, _clamp_vjp_min, _clamp_vjp_max),
    samples=_clamp_samples,
    torch_ref=lambda torch, x, min=None, max=None: torch.clamp(x, min, max),
    method=True,
    numpy={np.clip: _numpy.clip},
    notes=case_law(_CASE_LAW, "clamp"),
    doc="x limited to [min, max] elementwise; either bound may be None, a number or a tensor broadcast against x.",
)


# == ops in torch's own argument names (input) ================================================================
def _on_input(name, forward, vjp, **options):
    """Declare a one-input elementwise op whose tensor parameter is torch's ``input``."""
    return _unary(name, forward, vjp, parameter="input", **options)


def _ufunc_on_input(name, ufunc, vjp, low=-2.0, high=2.0, **options):
    """Declare a one-input ufunc op (``_ufunc``) whose tensor parameter is torch's ``input``."""
    return _ufunc(name, ufunc, vjp, low, high, parameter="input", **options)


def _with_edges(samples, *values):
    """``samples`` plus one vector of the given edge values."""

    def generate(rng):
        return samples(rng) + [Sample((np.array(values, dtype=np.float64),), {}, "domain edges")]

    return generate


# -- trigonometric and hyperbolic ------------------------------------------------------------------------------
tan = _ufunc_on_input(
    "tan", np.tan, lambda g, ans, input: g * (ans * ans + 1), -1.2, 1.2, doc="The tangent elementwise (radians)."
)
asin = _ufunc_on_input(
    "asin",
    np.arcsin,
    quiet(lambda g, ans, input: g / np.sqrt(1 - input * input)),
    -0.9,
    0.9,
    doc="The inverse sine elementwise (NaN outside [-1, 1]).",
)
acos = _ufunc_on_input(
    "acos",
    np.arccos,
    quiet(lambda g, ans, input: -g / np.sqrt(1 - input * input)),
    -0.9,
    0.9,
    doc="The inverse cosine elementwise (NaN outside [-1, 1]).",
)
atan = _ufunc_on_input(
    "atan",
    np.arctan,
    quiet(lambda g, ans, input: g / (input * input + 1)),
    -3.0,
    3.0,
    doc="The inverse tangent elementwise.",
)
sinh = _ufunc_on_input(
    "sinh", np.sinh, quiet(lambda g, ans, input: g * np.cosh(input)), -3.0, 3.0, doc="The hyperbolic sine elementwise."
)
cosh = _ufunc_on_input(
    "cosh",
    np.cosh,
    quiet(lambda g, ans, input: g * np.sinh(input)),
    -3.0,
    3.0,
    doc="The hyperbolic cosine elementwise.",
)
asinh = _ufunc_on_input(
    "asinh",
    np.arcsinh,
    quiet(lambda g, ans, input: g / np.sqrt(input * input + 1)),
    -3.0,
    3.0,
    doc="The inverse hyperbolic sine elementwise.",
)
# torch's formula, g / sqrt(x^2 - 1): finite for x < -1 too (outside the domain, where the value is NaN)
acosh = _ufunc_on_input(
    "acosh",
    np.arccosh,
    quiet(lambda g, ans, input: g / np.sqrt(input * input - 1)),
    1.1,
    3.0,
    doc="The inverse hyperbolic cosine elementwise (NaN below 1).",
)
atanh = _ufunc_on_input(
    "atanh",
    np.arctanh,
    quiet(lambda g, ans, input: g / (1 - input * input)),
    -0.9,
    0.9,
    doc="The inverse hyperbolic tangent elementwise (NaN outside [-1, 1]).",
)


# -- erfinv ----------------------------------------------------------------------------------------------------
_WINITZKI_A = 0.147
_TWO_OVER_PI_A = 2 / (math.pi * _WINITZKI_A)
_HALF_SQRT_PI = math.sqrt(math.pi) / 2


def _erfinv64(x):
    """erfinv for float64 ``x`` (1-D): Winitzki's closed form (relative error < 2e-3), then Halley steps on
    erf(y) = x, each cubing the error. Near 0 the residual is erf(y) - x; for |x| > 0.5 it is (1 - |x|) - erfc(|y|),
    exact in the tails (1 - |x| has no rounding there and Cody's erfc keeps its relative accuracy)."""
    t = np.abs(x)
    inside = t < 1  # NaN and |x| >= 1 are settled below
    t_in = np.where(inside, t, 0.5)
    log_term = np.log1p(-t_in * t_in)
    first = _TWO_OVER_PI_A + log_term / 2
    y = np.sqrt(np.sqrt(first * first - log_term / _WINITZKI_A) - first)
    tail = t_in > 0.5
    for _ in range(3):
        slope = np.exp(-y * y) / _HALF_SQRT_PI  # erf'(y)
        residual = np.where(tail, (1 - t_in) - _erfc64(y), _erf_small_or_not(y) - t_in)
        step = residual / slope
        y = y - step / (1 + y * step)  # Halley: f'' / f' = -2 y
    y = np.where(inside, y, np.where(t == 1, np.inf, np.nan))
    return np.copysign(y, x)


def _erf_small_or_not(y):
    """erf(y) for float64 y >= 0 (1-D)."""
    out = 1 - _erfc64(y)
    small = y <= 0.46875
    if small.any():
        out[small] = _erf_small(y[small])
    return out


@quiet
def _erfinv(input):
    x64 = input.astype(np.float64).reshape(-1)
    return _erfinv64(x64).reshape(input.shape).astype(input.dtype, copy=False)


@quiet  # exp(inf ** 2) at +-1: inf, as torch
def _erfinv_vjp(g, ans, input):
    return g * np.exp(ans * ans) * _HALF_SQRT_PI


erfinv = _on_input(
    "erfinv",
    _erfinv,
    _erfinv_vjp,
    samples=_with_edges(unary_samples(-0.95, 0.95), -0.999, -1e-12, 0.0, 1e-300, 0.6, 0.999),
    method=True,
    doc="The inverse of the error function elementwise, on [-1, 1].",
)


# -- exponentials, reciprocal ----------------------------------------------------------------------------------
exp2 = _ufunc_on_input("exp2", np.exp2, lambda g, ans, input: g * (ans * _LN2), doc="2 ** x elementwise.")


def _reciprocal_samples(rng):
    out = unary_samples(0.5, 2.0)(rng)
    out.append(Sample((-uniform(rng, (2, 3), 0.5, 2.0),), {}, "negative"))
    return out


reciprocal = _ufunc_on_input(
    "reciprocal",
    np.reciprocal,
    quiet(lambda g, ans, input: g * -(ans * ans)),
    samples=_reciprocal_samples,
    doc="1 / x elementwise.",
)


# -- rounding: gradient 0 everywhere (torch's, also at the jumps) ----------------------------------------------
def _zero_gradient(g, ans, input, **attrs):
    return np.zeros_like(g)


def _keeps_integers(ufunc):
    def forward(input):
        if input.dtype.kind in "iu":
            return input.copy()  # torch: integer input gives a copy
        if input.dtype.kind == "b":
            raise TypeError(f"{ufunc.__name__}: argument 'input' expected a number tensor, got dtype bool")
        return ufunc(input)

    forward.__name__ = f"_{ufunc.__name__}"
    return forward


_INTEGERS = tuple(float(k) for k in range(-3, 4))
_HALVES = tuple(k + 0.5 for k in range(-4, 4))


def _rounding(name, ufunc, *, doc=""):
    return _on_input(name, _keeps_integers(ufunc), _zero_gradient, low=-2.5, high=2.5, kinks=_INTEGERS,
                     floats_only=False, method=True, numpy=ufunc, doc=doc)  # fmt: skip


floor = _rounding("floor", np.floor, doc="The largest integer <= x elementwise; integer input is returned unchanged.")
ceil = _rounding("ceil", np.ceil, doc="The smallest integer >= x elementwise; integer input is returned unchanged.")
trunc = _rounding("trunc", np.trunc, doc="x rounded towards zero elementwise; integer input is returned unchanged.")


@quiet  # x * 10^d may overflow: inf, as torch
def _round(input, *, decimals=0):
    integer("round", "decimals", decimals)
    if input.dtype.kind == "b":
        raise TypeError("round: argument 'input' expected a number tensor, got dtype bool")
    if input.dtype.kind in "iu":
        if decimals != 0:
            raise TypeError(
                f"round: argument 'input' of dtype {input.dtype} takes decimals=0 only (torch has no "
                f"integer kernel for decimals={decimals})"
            )
        return input.copy()
    if decimals == 0:
        return np.round(input)  # half to even, as torch
    # torch's formula, in the input's dtype: round(x * 10^d) / 10^d, or round(x / 10^-d) * 10^-d
    scale = np.array(10.0 ** (decimals if decimals > 0 else -decimals), dtype=input.dtype)
    if decimals > 0:
        return np.round(input * scale) / scale
    return np.round(input / scale) * scale


def _round_samples(rng):
    out = unary_samples(-2.5, 2.5, kinks=_HALVES)(rng)
    kinks = tuple(k / 10 + 0.05 for k in range(-26, 26))
    out += unary_samples(-2.5, 2.5, attrs=[{"decimals": 1}], kinks=kinks)(rng)[:3]
    out += unary_samples(-250.0, 250.0, attrs=[{"decimals": -2}], kinks=(-150.0, -50.0, 50.0, 150.0))(rng)[:3]
    return out


round = _on_input(
    "round",
    _round,
    _zero_gradient,
    samples=_round_samples,
    floats_only=False,
    torch_ref=lambda torch, input, decimals=0: torch.round(input, decimals=decimals),
    method=True,
    doc="x rounded to ``decimals`` decimal places elementwise, halves to even.",
)


@quiet  # frac(inf) = inf - inf = NaN, as torch
def _frac(input):
    return input - np.trunc(input)


frac = _on_input(
    "frac",
    _frac,
    lambda g, ans, input: g,
    low=-2.5,
    high=2.5,
    kinks=_INTEGERS,
    method=True,
    doc="The fractional part x - trunc(x) elementwise.",
)


# -- nan_to_num ------------------------------------------------------------------------------------------------
def _replacement(argument, value):
    if value is None:
        return None
    return real("nan_to_num", argument, value, "a real number or None")


def _nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    nan, posinf, neginf = (_replacement(n, v) for n, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf)))
    if input.dtype.kind != "f":
        if input.dtype.kind == "b":
            raise TypeError("nan_to_num: argument 'input' expected a number tensor, got dtype bool")
        return input.copy()  # torch: integers have nothing to replace
    # None: the dtype's largest / lowest finite value (torch's default); numbers are rounded to the dtype
    return np.nan_to_num(input, nan=nan, posinf=posinf, neginf=neginf)


def _nan_to_num_samples(rng):
    out = unary_samples()(rng)
    special = np.array([[np.nan, np.inf, -np.inf, 0.5], [-1.5, np.nan, 2.0, -np.inf]])
    out.append(Sample((special,), {}, "nan and infs"))
    out.append(Sample((special.T,), {"nan": 1.5, "posinf": 100.0, "neginf": -7.0}, "replacements"))
    return out


nan_to_num = _on_input(
    "nan_to_num",
    _nan_to_num,
    lambda g, ans, input, **attrs: g * np.isfinite(input),
    samples=_nan_to_num_samples,
    floats_only=False,
    method=True,
    doc="NaN, +inf and -inf replaced by nan, posinf and neginf (by default 0 and the dtype's largest and smallest).",
)


# -- tests of values: bool outputs, not differentiable ---------------------------------------------------------
def _classify(name, ufunc, integer_answer):
    def forward(input):
        if input.dtype.kind != "f":
            return np.full(input.shape, integer_answer)  # torch: integers are finite, never inf or NaN
        return ufunc(input)

    forward.__name__ = f"_{name}"
    return forward


def _special_samples(rng):
    out = unary_samples()(rng)
    out.append(Sample((np.array([np.nan, np.inf, -np.inf, 0.0, -1.5, 1e30]),), {}, "nan and infs"))
    out.append(Sample((np.array([[1, -2], [0, 3]]),), {}, "integers"))
    return out


def _value_test(name, forward, samples=_special_samples, **options):
    """Declare a test of values on ``input``: a bool output, not differentiable, any dtype, a Tensor method."""
    return _on_input(name, forward, NOT_DIFFERENTIABLE, floats_only=False, samples=samples, method=True, **options)


isinf = _value_test(
    "isinf",
    _classify("isinf", np.isinf, False),
    numpy=np.isinf,
    doc="Whether each entry is +inf or -inf, as a bool tensor.",
)
isnan = _value_test(
    "isnan", _classify("isnan", np.isnan, False), numpy=np.isnan, doc="Whether each entry is NaN, as a bool tensor."
)
isfinite = _value_test(
    "isfinite",
    _classify("isfinite", np.isfinite, True),
    numpy=np.isfinite,
    doc="Whether each entry is finite (not NaN nor infinite), as a bool tensor.",
)


def _logical_not_samples(rng):
    out = unary_samples()(rng)
    out.append(Sample((np.array([0.0, -0.0, np.nan, 1.5, np.inf]),), {}, "zeros and nan"))
    out.append(Sample((np.array([[True, False], [False, True]]),), {}, "bools"))
    out.append(Sample((np.array([0, 3, -1]),), {}, "integers"))
    return out


logical_not = _value_test(
    "logical_not",
    np.logical_not,
    _logical_not_samples,
    numpy=np.logical_not,
    doc="Whether each entry is zero (the logical NOT of its truth), as a bool tensor.",
)


# -- clamp_min / clamp_max / logit / clone ------------------------------------------------------------------
def _one_bound_samples(side: str):
    """clamp_min's (``side`` 'min') or clamp_max's samples: numbers at kinks (0-D tensors), a broadcast tensor
    bound, a NaN bound (propagates, as torch's), integers."""

    def generate(rng):
        out = []
        for value in (-0.5, 0.25):
            for s in unary_samples(kinks=(-0.5, 0.25))(rng):
                out.append(Sample((s.inputs[0], np.array(value)), {}, f"{s.label} {side}={value}"))
        x = away_from(uniform(rng, (3, 4)), (-0.5, 0.5))
        out.append(Sample((x, x + np.where(rng.random((3, 4)) > 0.5, 0.3, -0.3)), {}, f"tensor {side}"))
        out.append(Sample((x, uniform(rng, (4,), -0.4, 0.4) + 0.01 * np.arange(4)), {}, f"tensor {side}, broadcast"))
        out.append(Sample((x, np.array([np.nan, 0.1, -0.1, 0.2])), {}, f"NaN in {side}: NaN out"))
        out.append(Sample((np.array([-3, 0, 2, 7]), np.array(1)), {}, "integers"))
        return out

    return generate


def _one_bound(name: str, side: str, forward, vjps, *, doc=""):
    """torch's clamp_min / clamp_max: clamp with one bound, a number or a tensor broadcast against ``input``; the
    bound gets its gradient where it is the output (torch's clamp_min.Tensor / clamp_max.Tensor)."""
    passes = ">=" if side == "min" else "<="
    return defop(
        name,
        family="elementwise",
        inputs=("input", side),
        forward=forward,
        vjps=vjps,
        samples=_one_bound_samples(side),
        torch_ref=lambda torch, input, bound: getattr(torch, name)(input, bound),
        method=True,
        notes=f"``clamp(input, {side}=...)``: the gradient passes to input where input {passes} the bound (bound "
        "included), to the bound elsewhere; a NaN bound gives NaN, as torch's.",
        doc=doc,
    )


def _clamp_min(input, min):
    return _clamped(input, min, None, "clamp_min", "input")


def _clamp_max(input, max):
    return _clamped(input, None, max, "clamp_max", "input")


clamp_min = _one_bound(
    "clamp_min",
    "min",
    _clamp_min,
    (lambda g, ans, input, min: _clamp_vjp_x(g, ans, input, min, None),
     lambda g, ans, input, min: _clamp_vjp_min(g, ans, input, min, None)),
 doc="max(input, min) elementwise: clamp with a lower bound only (a number or a broadcast tensor).",)  # fmt: skip
clamp_max = _one_bound(
    "clamp_max",
    "max",
    _clamp_max,
    (lambda g, ans, input, max: _clamp_vjp_x(g, ans, input, None, max),
     lambda g, ans, input, max: _clamp_vjp_max(g, ans, input, None, max)),
 doc="min(input, max) elementwise: clamp with an upper bound only (a number or a broadcast tensor).",)  # fmt: skip


def _logit_input(input, eps):
    return input if eps is None else np.clip(input, eps, 1 - eps)


@quiet  # logit(0) = -inf, logit(1) = inf, outside [0, 1] NaN: as torch, without numpy's warning
def _logit(input, eps=None):
    z = _logit_input(input, eps)
    return np.log(z / (1 - z))


@quiet
def _logit_vjp(g, ans, input, eps=None):
    # torch: g / (x (1 - x)); NaN outside [0, 1] without eps, 0 outside [eps, 1 - eps] with it (the clamp is flat)
    grad = g / np.abs(input * (1 - input))  # abs: x (1 - x) >= 0 where it is used; at x = -0.0, +inf as torch
    if eps is None:
        return np.where(np.logical_or(input < 0, input > 1), np.nan, grad)
    return np.where(np.logical_or(input < eps, input > 1 - eps), 0, grad)  # NaN input: NaN, as torch


logit = _on_input(
    "logit",
    _logit,
    _logit_vjp,
    samples=_with_edges(unary_samples(0.05, 0.95, [{}, {"eps": 0.1}], kinks=(0.1, 0.9)), 0.0, 1.0, 1.5, -0.5),
    torch_ref=lambda torch, input, eps=None: torch.logit(input, eps),
    method=True,
    doc="log(x / (1 - x)) elementwise; with eps, x is first clamped to [eps, 1 - eps].",
)
clone = _on_input(
    "clone",
    lambda input: np.array(input, copy=True),
    lambda g, ans, input: g,
    floats_only=False,
    notes="a new tensor equal to the input, owning its memory (an in-place change of one is not seen by the other)",
    doc="A copy of input with its own memory; the gradient passes through unchanged.",
)


# -- deg2rad / rad2deg / sgn / positive / signbit / isposinf / isneginf / isreal / frexp ----------------------------
_DEG, _RAD = math.pi / 180, 180 / math.pi
deg2rad = _on_input(
    "deg2rad",
    lambda input: input * _DEG,
    lambda g, ans, input: g * _DEG,
    low=-360.0,
    high=360.0,
    method=True,
    numpy=np.deg2rad,
    doc="Degrees converted to radians elementwise (x * pi / 180).",
)
rad2deg = _on_input(  # 3e38 * 57.3 overflows float32: inf, as torch
    "rad2deg",
    quiet(lambda input: input * _RAD),
    quiet(lambda g, ans, input: g * _RAD),
    low=-7.0,
    high=7.0,
    method=True,
    doc="Radians converted to degrees elementwise (x * 180 / pi).",
)
# torch: sgn is sign for real tensors (bool stays bool: True where True); gradient 0
sgn = _on_input(
    "sgn",
    lambda input: input.copy() if input.dtype.kind == "b" else _sign(input),
    _zero_gradient,
    floats_only=False,
    kinks=(0.0,),
    samples=unary_samples(kinks=(0.0,)),
    torch_ref=lambda torch, input: torch.sign(input),  # torch.sgn's backward gives a ZeroTensor numpy cannot read
    method=True,
    doc="The sign of x elementwise; for real tensors the same as sign.",
)


def _positive(input):
    if input.dtype.kind == "b":
        raise TypeError("positive: argument 'input' expected a number tensor, got dtype bool (torch refuses + on bool)")
    return input.copy()


positive = _on_input(
    "positive",
    _positive,
    lambda g, ans, input: g,
    floats_only=False,
    method=True,
    numpy=np.positive,
    doc="input itself (unary +).",
)


def _sign_samples(rng):
    out = _special_samples(rng)
    out.append(Sample((np.array([-0.0, 0.0, -1e-320, 1e-320]),), {}, "signed zeros and subnormals"))
    out.append(Sample((np.array([True, False]),), {}, "bools"))
    return out


signbit = _value_test(
    "signbit",
    lambda input: np.signbit(input) if input.dtype.kind != "b" else np.zeros(input.shape, bool),
    _sign_samples,
    numpy=np.signbit,
    doc="Whether each entry's sign bit is set (true for negative numbers and -0.0), as a bool tensor.",
)
isposinf = _value_test(
    "isposinf", _classify("isposinf", np.isposinf, False), doc="Whether each entry is +inf, as a bool tensor."
)
isneginf = _value_test(
    "isneginf", _classify("isneginf", np.isneginf, False), doc="Whether each entry is -inf, as a bool tensor."
)
isreal = _value_test(
    "isreal",
    lambda input: np.ones(input.shape, bool),
    doc="Whether each entry is real-valued, as a bool tensor (true for every entry of a real tensor).",
)  # no complex dtype: every entry is real


def _frexp(input):
    # torch: mantissa in (-1, -0.5] u [0.5, 1) and an int32 exponent, x = mantissa * 2^exponent; (0, 0) at 0,
    # (+-inf, 0) and (NaN, 0) as numpy gives them
    mantissa, exponent = np.frexp(input)
    return mantissa, exponent.astype(np.int32, copy=False)


@quiet  # g * 2^-exponent overflows for a subnormal input's large exponent: inf, as torch
def _frexp_vjp(g, ans, input):
    # torch: d mantissa / dx = 2^-exponent (the exponent is a step function: no gradient)
    from .binary import ldexp

    if g[0] is None:
        return np.zeros(input.shape, input.dtype)
    if isinstance(g[0], np.ndarray):
        return np.ldexp(g[0], -ans[1])

    return ldexp(g[0], neg(ans[1]))


_POWERS_OF_TWO = tuple(sign * 2.0**k for k in range(-3, 5) for sign in (1, -1)) + (0.0,)


def _frexp_samples(rng):
    # the mantissa jumps at every power of two (from 1 down to 1/2): the samples keep away from them
    return unary_samples(-20.0, 20.0, kinks=_POWERS_OF_TWO)(rng) + [
        Sample((np.array([3.0, -3.0, 0.75, 5.5, -0.3]),), {}, "between powers of two")
    ]


frexp = _on_input(
    "frexp",
    _frexp,
    _frexp_vjp,
    outputs=("mantissa", "exponent"),
    samples=_frexp_samples,
    torch_ref=lambda torch, input: tuple(torch.frexp(input)),
    method=True,
    doc="(mantissa, exponent) with x = mantissa * 2 ** exponent and 0.5 <= |mantissa| < 1 elementwise.",
)

# numpy's and torch's other names for the same ops
fix, absolute, negative, clip = trunc, abs, neg, clamp
arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_square(g, rec, x):
    return g.op("Mul", x, x)


def _onnx_rsqrt(g, rec, x):
    return g.op("Reciprocal", g.op("Sqrt", x))


def _onnx_gelu_backward(g, rec, grad_output, x):
    """grad_output * gelu'(x), gelu'(x) = Phi(x) + x phi(x) (float32's Phi from ONNX Runtime's Erf, to float32's
    resolution as the forward's Abramowitz & Stegun; float64's from the Cody erfc graph) or the tanh form's
    (1 + t) / 2 + x (1 - t^2) u' / 2."""
    dtype = rec.inputs[1].dtype

    def c(v):
        return scalar(g, v, dtype)

    if rec.attributes.get("approximate", "none") == "tanh":
        x2 = g.op("Mul", x, x)
        t = g.op(
            "Tanh", g.op("Mul", g.op("Add", x, g.op("Mul", g.op("Mul", x2, x), c(_GELU_CUBIC))), c(_SQRT_2_OVER_PI))
        )
        du = g.op("Mul", g.op("Add", g.op("Mul", x2, c(3 * _GELU_CUBIC)), c(1.0)), c(_SQRT_2_OVER_PI))
        bend = g.op("Mul", g.op("Mul", x, g.op("Sub", c(1.0), g.op("Mul", t, t))), du)
        slope = g.op("Mul", g.op("Add", g.op("Add", t, c(1.0)), bend), c(0.5))
    else:
        if dtype == np.float64:  # ONNX Runtime has no float64 Erf
            cdf = g.op("Mul", _erfc64_graph(g, g.op("Mul", x, c(-_SQRT_HALF))), c(0.5))
        else:
            cdf = g.op("Add", g.op("Mul", g.op("Erf", g.op("Mul", x, c(_SQRT_HALF))), c(0.5)), c(0.5))
        gauss = g.op("Mul", g.op("Exp", g.op("Mul", g.op("Mul", x, x), c(-0.5))), c(_INV_SQRT_2PI))
        slope = g.op("Add", cdf, g.op("Mul", x, gauss))
    return g.op("Mul", grad_output, slope)


def _onnx_gelu(g, rec, x):
    approximate = rec.attributes.get("approximate", "none")
    dtype = rec.inputs[0].dtype
    if dtype == np.float64 and approximate == "none":
        # ONNX Runtime has no float64 Erf (its Gelu's expansion): x Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2
        phi = _erfc64_graph(g, g.op("Mul", x, g.const(np.array(-_SQRT_HALF, dtype))))
        return g.op("Mul", g.op("Mul", x, g.const(np.array(0.5, dtype))), phi)
    if approximate != "tanh" or dtype != np.float64:
        return g.op("Gelu", x, approximate=approximate)
    # ONNX Runtime's float64 Gelu(tanh) is float32-accurate: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
    cube = g.op("Mul", g.op("Mul", x, x), x)
    inner = g.op("Add", x, g.op("Mul", cube, g.const(np.array(0.044715, dtype))))
    tanh = g.op("Tanh", g.op("Mul", inner, g.const(np.array(math.sqrt(2 / math.pi), dtype))))
    return g.op("Mul", g.op("Mul", x, g.const(np.array(0.5, dtype))), g.op("Add", tanh, g.const(np.array(1, dtype))))


def _onnx_silu(g, rec, x):
    return g.op("Mul", x, g.op("Sigmoid", x))


def _onnx_leaky_relu(g, rec, x):
    return g.op("LeakyRelu", x, alpha=float(rec.attributes.get("negative_slope", 0.01)))


def _onnx_elu(g, rec, x):
    return g.op("Elu", x, alpha=float(rec.attributes.get("alpha", 1.0)))


def _onnx_log_base(base: float):
    def lower(g, rec, x):
        return g.op("Div", g.op("Log", x), scalar(g, math.log(base), float_only(rec)))

    return lower


def _onnx_expm1(g, rec, x):
    # Kahan: with u = exp(x) rounded, (u - 1) * x / log(u) is accurate to a few ulps where u - 1 cancels
    dtype = float_only(rec)
    u = g.op("Exp", x)
    um1 = g.op("Sub", u, scalar(g, 1, dtype))
    kahan = g.op("Div", g.op("Mul", um1, x), g.op("Log", u))
    tiny = g.op("Equal", u, scalar(g, 1, dtype))  # |x| below half an ulp of 1: expm1(x) = x
    plain = g.op("Or", g.op("Equal", um1, scalar(g, -1, dtype)), g.op("IsInf", u))  # no cancellation
    return g.op("Where", tiny, x, g.op("Where", plain, um1, kahan))


def _onnx_softplus(g, rec, x):
    dtype = float_only(rec)
    beta, threshold = float(rec.attributes.get("beta", 1)), float(rec.attributes.get("threshold", 20))
    z = x if beta == 1 else g.op("Mul", x, scalar(g, beta, dtype))
    # log(1 + exp(z)) = max(z, 0) + log1p(exp(-|z|)), stable for any z
    tail = log1p_graph(g, rec, g.op("Exp", g.op("Neg", g.op("Abs", z))))
    soft = g.op("Add", g.op("Max", z, scalar(g, 0, dtype)), tail)
    soft = soft if beta == 1 else g.op("Div", soft, scalar(g, beta, dtype))
    return g.op("Where", g.op("Greater", z, scalar(g, threshold, dtype)), x, soft)


def _onnx_bounds(g, rec, x, low, high):
    return onnx_clip(g, x, rec.inputs[0].dtype, low, high)


def _onnx_clamped(*sides: str):
    """The lowering of clamp (sides 'min', 'max'), clamp_min ('min') or clamp_max ('max'): Max with the min bound,
    then Min with the max bound, each a tensor input after x; NaN from either operand kept (numpy's maximum/minimum)."""

    def lower(g, rec, x, *bounds):
        dtype = np.dtype(rec.inputs[0].dtype)
        for bound, spec, side in zip(bounds, rec.inputs[1:], sides):
            if bound is None:
                continue
            bound = cast_to(g, bound, spec.dtype, dtype)
            out = g.op("Max" if side == "min" else "Min", x, bound)
            if dtype.kind == "f":
                out = g.op("Where", g.op("IsNaN", x), x, g.op("Where", g.op("IsNaN", bound), bound, out))
            x = out
        return x

    return lower


def _onnx_exp2(g, rec, x):
    return g.op("Pow", scalar(g, 2, float_only(rec)), x)


def _onnx_relu(g, rec, x):
    """Relu for floats; max(x, 0) for integers (ONNX Runtime's Relu has no integer kernel but int8's)."""
    if np.dtype(rec.output.dtype).kind == "f":
        return elementwise("Relu")(g, rec, x)
    x = cast_to(g, x, rec.inputs[0].dtype, rec.output.dtype)
    return g.op("Max", x, scalar(g, 0, rec.output.dtype))


def _onnx_rounding(op_type: str):
    """floor / ceil: an integer or bool input is its own value (ONNX's Floor and Ceil take floats only)."""

    def lower(g, rec, x):
        return g.op("Identity", x) if np.dtype(rec.inputs[0].dtype).kind != "f" else elementwise(op_type)(g, rec, x)

    return lower


def _onnx_trunc(g, rec, x):
    if np.dtype(rec.inputs[0].dtype).kind != "f":
        return g.op("Identity", x)
    return g.op("Where", g.op("Less", x, scalar(g, 0, rec.inputs[0].dtype)), g.op("Ceil", x), g.op("Floor", x))


def _onnx_frac(g, rec, x):
    return g.op("Sub", x, _onnx_trunc(g, rec, x))


def _onnx_round(g, rec, x):
    decimals = int(rec.attributes.get("decimals", 0))
    dtype = np.dtype(rec.inputs[0].dtype)
    if dtype.kind != "f":
        return g.op("Identity", x)
    if decimals == 0:
        return g.op("Round", x)
    scale = scalar(g, 10.0 ** abs(decimals), dtype)  # torch's formula, as the forward
    if decimals > 0:
        return g.op("Div", g.op("Round", g.op("Mul", x, scale)), scale)
    return g.op("Mul", g.op("Round", g.op("Div", x, scale)), scale)


def _onnx_nan_to_num(g, rec, x):
    dtype = np.dtype(rec.inputs[0].dtype)
    if dtype.kind != "f":
        return g.op("Identity", x)
    info = np.finfo(dtype)
    a = rec.attributes
    nan, posinf, neginf = a.get("nan", 0.0), a.get("posinf"), a.get("neginf")
    posinf, neginf = (info.max if posinf is None else posinf), (info.min if neginf is None else neginf)
    x = g.op("Where", g.op("IsNaN", x), scalar(g, 0.0 if nan is None else nan, dtype), x)
    x = g.op("Where", g.op("IsInf", x, detect_negative=0), scalar(g, posinf, dtype), x)
    return g.op("Where", g.op("IsInf", x, detect_negative=1, detect_positive=0), scalar(g, neginf, dtype), x)


def _onnx_isnan(g, rec, x):
    return g.op("Not", g.op("Equal", x, x))  # any dtype: only NaN differs from itself


def _onnx_isinf(g, rec, x):
    if np.dtype(rec.inputs[0].dtype).kind != "f":
        return g.op("Not", g.op("Equal", x, x))  # all False
    return g.op("IsInf", x)


def _onnx_isfinite(g, rec, x):
    if np.dtype(rec.inputs[0].dtype).kind != "f":
        return g.op("Equal", x, x)  # all True
    # x - x is 0 exactly where x is finite, NaN at +-inf and NaN: two nodes, half the time of Not(IsInf or IsNaN)
    return g.op("Equal", g.op("Sub", x, x), scalar(g, 0, rec.inputs[0].dtype))


def _onnx_logical_not(g, rec, x):
    from onnx import TensorProto

    return g.op("Not", x if rec.inputs[0].dtype == np.bool_ else g.op("Cast", x, to=TensorProto.BOOL))


def _onnx_logit(g, rec, x):
    dtype = float_only(rec)
    eps = rec.attributes.get("eps")
    if eps is not None:
        x = _onnx_bounds(g, rec, x, float(eps), 1 - float(eps))
    return g.op("Log", g.op("Div", x, g.op("Sub", scalar(g, 1, dtype), x)))


for _op, _onnx_type in (
    (neg, "Neg"),
    (abs, "Abs"),
    (exp, "Exp"),
    (log, "Log"),
    (sqrt, "Sqrt"),
    (sin, "Sin"),
    (cos, "Cos"),
    (tanh, "Tanh"),
    (sigmoid, "Sigmoid"),
    (erf, "Erf"),
    (tan, "Tan"),
    (asin, "Asin"),
    (acos, "Acos"),
    (atan, "Atan"),
    (sinh, "Sinh"),
    (cosh, "Cosh"),
    (asinh, "Asinh"),
    (acosh, "Acosh"),
    (atanh, "Atanh"),
    (reciprocal, "Reciprocal"),
    (clone, "Identity"),
):
    lowering(_op, elementwise(_onnx_type))
lowering(square, _onnx_square)
lowering(rsqrt, _onnx_rsqrt)
lowering(gelu, _onnx_gelu)
lowering(gelu_backward, _onnx_gelu_backward)
lowering(silu, _onnx_silu)
lowering(leaky_relu, _onnx_leaky_relu)
lowering(elu, _onnx_elu)
lowering(log2, _onnx_log_base(2.0))
lowering(log10, _onnx_log_base(10.0))
lowering(expm1, _onnx_expm1)
lowering(log1p, log1p_graph)
lowering(softplus, _onnx_softplus)
lowering(clamp, _onnx_clamped("min", "max"))
lowering(clamp_min, _onnx_clamped("min"))
lowering(clamp_max, _onnx_clamped("max"))
lowering(exp2, _onnx_exp2)
lowering(trunc, _onnx_trunc)
lowering(relu, _onnx_relu)
lowering(floor, _onnx_rounding("Floor"))
lowering(ceil, _onnx_rounding("Ceil"))
lowering(frac, _onnx_frac)
lowering(round, _onnx_round)
lowering(nan_to_num, _onnx_nan_to_num)
lowering(isnan, _onnx_isnan)
lowering(isinf, _onnx_isinf)
lowering(isfinite, _onnx_isfinite)
lowering(logical_not, _onnx_logical_not)
lowering(logit, _onnx_logit)


def _onnx_scaled(factor: float):
    """deg2rad / rad2deg: x times the constant, in x's dtype (numpy's weak Python float)."""

    def lower(g, rec, x):
        return g.op("Mul", x, scalar(g, factor, float_only(rec)))

    return lower


def _onnx_sign(g, rec, x):
    """ONNX's Sign of NaN is NaN; minitape's (and torch's) is 0."""
    if rec.inputs[0].dtype == np.bool_:
        return g.op("Identity", x)
    out = elementwise("Sign")(g, rec, x)
    dtype = np.dtype(rec.output.dtype)
    return g.op("Where", g.op("IsNaN", x), scalar(g, 0, dtype), out) if dtype.kind == "f" else out


def _onnx_signed_inf(positive: bool):
    """isposinf / isneginf (all False for integers and bools)."""

    def lower(g, rec, x):
        if np.dtype(rec.inputs[0].dtype).kind != "f":
            return g.op("Not", g.op("Equal", x, x))
        return g.op("IsInf", x, detect_positive=int(positive), detect_negative=int(not positive))

    return lower


def _onnx_frexp(g, rec, x):
    """exponent = floor(log2 |x|) + 1, then corrected by one where log2 rounded across a power of two, mantissa
    = x / 2^exponent (exact: a power of two; the division is split in two for exponents past the float's range);
    (x, 0) for 0, infinities and NaN, as numpy."""
    dtype = float_only(rec)
    one, half = scalar(g, 1, dtype), scalar(g, 0.5, dtype)
    size = g.op("Abs", x)
    special = g.op("Or", g.op("Equal", size, scalar(g, 0, dtype)), g.op("IsNaN", g.op("Sub", x, x)))
    # Sub(x, x) is NaN exactly for inf and NaN: "special" holds for 0, inf and NaN
    safe = g.op("Where", special, one, size)
    e = g.op("Add", g.op("Floor", g.op("Div", g.op("Log", safe), scalar(g, math.log(2), dtype))), one)
    for _ in range(2):  # a log2 one off either way: pull the mantissa back into [0.5, 1)
        m = _onnx_over_power_of_two(g, safe, e, dtype)
        e = g.op(
            "Add",
            e,
            g.op(
                "Sub",
                g.op("Cast", g.op("GreaterOrEqual", m, one), to=tensor_type(dtype)),
                g.op("Cast", g.op("Less", m, half), to=tensor_type(dtype)),
            ),
        )
    e = g.op("Where", special, scalar(g, 0, dtype), e)
    mantissa = g.op("Where", special, x, _onnx_over_power_of_two(g, x, e, dtype))
    return mantissa, g.op("Cast", e, to=6)  # 6: INT32


def _onnx_over_power_of_two(g, x, e, dtype):
    """x / 2^e for a float-valued integer e, as two exact halves (2^e alone can overflow or vanish)."""
    two = scalar(g, 2, dtype)
    first = g.op("Floor", g.op("Div", e, two))
    return g.op("Div", g.op("Div", x, g.op("Pow", two, first)), g.op("Pow", two, g.op("Sub", e, first)))


lowering(deg2rad, _onnx_scaled(_DEG))
lowering(rad2deg, _onnx_scaled(_RAD))


def _onnx_cody_ratio(g, y, num, den) -> str:
    """``_cody_ratio`` in the graph (float64 ``y``): the same Horner steps in the same order."""
    m = len(den)

    def c(v):
        return scalar(g, v, np.float64)

    top, bottom = g.op("Mul", c(num[m]), y), y
    for i in range(m - 1):
        top = g.op("Mul", g.op("Add", top, c(num[i])), y)
        bottom = g.op("Mul", g.op("Add", bottom, c(den[i])), y)
    return g.op("Div", g.op("Add", top, c(num[m - 1])), g.op("Add", bottom, c(den[m - 1])))


def _onnx_erfc(g, rec, x):
    """The forward's own formula in float64 (ONNX has no Erfc, and 1 - Erf(x) loses every digit for x > 4):
    Cody's three ranges of |x| each computed on every entry and chosen with Where, 2 - erfc(|x|) for x < 0."""
    dtype = float_only(rec)
    if dtype == np.float32:
        return _erfc32_graph(g, x)
    return _erfc64_graph(g, x)


# Numerical Recipes' erfcc (Chebyshev fit): erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2), relative error
# < 1.2e-7 for every z >= 0 -- float32's precision in one formula (no ranges to choose between)
_ERFCC = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


def _erfc32_graph(g, x) -> str:
    """erfc of the float32 ``x`` in the graph, to ~1e-6 relative in both tails: 29 nodes, all float32 (the float64
    form is ~3x the nodes and casts, and made gelu's backward the tiny GPT's costliest part in ONNX Runtime)."""

    def c(v):
        return scalar(g, v, np.float32)

    z = g.op("Abs", x)
    t = g.op("Div", c(1.0), g.op("Add", c(1.0), g.op("Mul", z, c(0.5))))
    poly = c(_ERFCC[-1])
    for coefficient in reversed(_ERFCC[:-1]):
        poly = g.op("Add", g.op("Mul", poly, t), c(coefficient))
    tail = g.op("Mul", t, g.op("Exp", g.op("Sub", poly, g.op("Mul", z, z))))
    # 2 - tail below 0, as tail + [x < 0] (2 - 2 tail): ONNX Runtime's Where takes ~15 ns an entry, 10x a Mul
    negative = g.op("Cast", g.op("Less", x, c(0.0)), to=tensor_type(np.float32))
    return g.op("Add", tail, g.op("Mul", negative, g.op("Sub", c(2.0), g.op("Mul", tail, c(2.0)))))


def _erfc64_graph(g, x64) -> str:
    """erfc of the float64 ``x64`` in the graph (``_erfc_forward``'s formula; see ``_onnx_erfc``)."""

    def c(v):
        return scalar(g, v, np.float64)

    z = g.op("Abs", x64)
    small = g.op("Sub", c(1.0), g.op("Mul", z, _onnx_cody_ratio(g, g.op("Mul", z, z), _ERF_A, _ERF_B)))
    middle = g.op("Mul", _onnx_cody_ratio(g, z, _ERFC_C, _ERFC_D), g.op("Exp", g.op("Neg", g.op("Mul", z, z))))
    zl = g.op("Max", g.op("Min", z, c(30.0)), c(4.0))  # the large range's z (below 4: unused, kept finite)
    inv_sq = g.op("Div", c(1.0), g.op("Mul", zl, zl))
    h = g.op("Div", g.op("Floor", g.op("Mul", zl, c(16.0))), c(16.0))
    gauss = g.op(
        "Mul",
        g.op("Exp", g.op("Neg", g.op("Mul", h, h))),
        g.op("Exp", g.op("Neg", g.op("Mul", g.op("Sub", zl, h), g.op("Add", zl, h)))),
    )
    ratio = g.op("Mul", inv_sq, _onnx_cody_ratio(g, inv_sq, _ERFC_P, _ERFC_Q))
    large = g.op("Mul", g.op("Div", g.op("Sub", c(_INV_SQRT_PI), ratio), zl), gauss)
    # NaN fails both comparisons and takes the middle range (NaN), as in the forward
    tail = g.op(
        "Where", g.op("LessOrEqual", z, c(0.46875)), small, g.op("Where", g.op("Greater", z, c(4.0)), large, middle)
    )
    return g.op("Where", g.op("Less", x64, c(0.0)), g.op("Sub", c(2.0), tail), tail)


lowering(sign, _onnx_sign)
lowering(sgn, _onnx_sign)
lowering(positive, elementwise("Identity"))
lowering(isposinf, _onnx_signed_inf(True))
lowering(isneginf, _onnx_signed_inf(False))
lowering(isreal, lambda g, rec, x: g.op("Expand", g.const(np.array(True)), g.op("Shape", x)))
lowering(frexp, _onnx_frexp)
lowering(
    signbit,
    not_exportable="a NaN's sign bit cannot be read in ONNX (no bitcast; -NaN compares like NaN), and x86 makes "
    "-NaN from 0/0 and inf - inf",
)
lowering(erfc, _onnx_erfc)
lowering(erfinv, not_exportable="ONNX has no inverse error function (no Erfinv op)")
