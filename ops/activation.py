"""Activations of ``torch.nn.functional`` beyond ops/elementwise.py's (relu, leaky_relu, elu, gelu, silu, softplus):
hardtanh, relu6, hardswish, hardsigmoid, selu, celu, mish, softsign, logsigmoid, threshold, hardshrink,
softshrink, tanhshrink (elementwise), softmin and normalize (along dims), glu (halves along a dim) and prelu
(a learnable slope per channel). Names, signatures, defaults and values are torch's (PyTorch 2.13), without
torch's ``inplace``/``dtype`` options; every op needs a floating input (torch's hardtanh, relu6 and threshold
also take integers). Each op's torch conventions (kinks, NaN, infinities, stability) are its notes (``_CASE_LAW``).
"""

__all__ = [
    "hardtanh",
    "relu6",
    "hardswish",
    "hardsigmoid",
    "selu",
    "celu",
    "mish",
    "softsign",
    "logsigmoid",
    "softmin",
    "glu",
    "prelu",
    "threshold",
    "hardshrink",
    "softshrink",
    "tanhshrink",
    "normalize",
]

import math

import numpy as np

from tape.creation import float_dtype
from tape.onnx import lowering
from tape.registry import Sample, defop
from tape.tensors import Tensor

from ._declare import one_input_op
from ._notes import case_law
from ._numerics import constant_values, quiet
from ._onnx import NotExportable, axis_of, cast_to, clip, float_only, log1p_graph, pnorm, scalar
from ._samples import along_dim_samples, away_from, transposed, unary_samples, uniform
from ._validation import floats_only, functional, implicit_dim, normalize_dim, normalize_dims, real, require_float

# torch's case law, op by op: each entry joins the notes= of the ops it names (shown in docs/coverage.md)
_CASE_LAW = (
    (
        (
            "hardtanh",
            "relu6",
            "hardswish",
            "hardsigmoid",
            "threshold",
            "hardshrink",
            "softshrink",
            "selu",
            "celu",
            "prelu",
        ),
        "At a kink the gradient is torch's: hardtanh and relu6 pass it only strictly inside (min_val, "
        "max_val), so 0 at both bounds; hardswish gives 0 at x = -3 and g at x = 3 (the outer slopes); "
        "hardsigmoid 0 at +-3; threshold 0 at x == threshold; hardshrink and softshrink 0 at x = +-lambd; "
        "selu scale * alpha at 0 (its left slope), celu 1 (it is smooth there); prelu ``weight`` at x = 0, "
        "with no gradient for ``weight`` there.",
    ),
    (
        ("normalize",),
        "normalize(x) = x / max(||x||_p, eps): the clamp passes the gradient where ||x||_p >= eps (the bound "
        "included) and otherwise the gradient is g / eps. ||.||_1's derivative at 0 is 0 (sign); ||.||_inf "
        "shares the gradient evenly among the entries tied for the largest |x|, as torch's norm backward "
        "does.",
    ),
    (
        ("hardtanh", "relu6", "hardswish", "hardsigmoid", "threshold", "hardshrink", "softshrink", "selu", "celu"),
        "NaN: values are NaN where torch's are. For the gradient at a NaN input torch's kernels disagree "
        "among themselves (their scalar and vectorised paths give g or 0 for hardtanh, relu6, hardshrink, "
        "softshrink and g or NaN for hardswish, selu, celu); ours gives 0 for hardtanh, relu6, hardsigmoid, "
        "hardshrink and softshrink (a NaN lies in none of the ranges where they pass the gradient), NaN for "
        "hardswish, selu and celu (as ops.elu), and g for threshold (torch's, consistently).",
    ),
    (
        ("hardswish", "mish", "softsign"),
        "Infinities give torch's values, including its NaNs: hardswish(-inf) = -inf * 0, softsign(+-inf) = "
        "inf / inf and mish(-inf) = -inf * 0 are NaN, and so are the gradients there (softsign's and mish's "
        "at +-inf). Values torch returns silently come without numpy's RuntimeWarning.",
    ),
    (
        ("logsigmoid", "mish", "glu"),
        "Stability: logsigmoid, mish and glu's sigmoid are written over exp(-|x|), which never overflows: "
        "finite values and gradients for every finite input, with relative accuracy in both tails. mish uses "
        "the closed form tanh(softplus(x)) = n / (n + 2), n = e^x (e^x + 2).",
    ),
    (
        ("hardsigmoid", "softsign", "tanhshrink", "glu", "normalize"),
        "Where torch's own arithmetic loses accuracy, ours keeps it (values differ from torch's in the last "
        "bits): softsign's gradient is g / (1 + |x|)^2 (torch's autograd subtracts two nearly equal terms for"
        " large |x|), tanhshrink's is g * tanh(x)^2 (torch's g - g * (1 - tanh^2) cancels near 0), glu's uses"
        " 1 - sigmoid(b) computed without cancellation, hardsigmoid's is g / 6 (torch's float64 kernel "
        "multiplies by 1/6 rounded to float32, a relative error of 3e-8). normalize computes the p-norm of x "
        "scaled by a power of two near max |x| (exact), so rows of huge or tiny entries neither overflow nor "
        "underflow: normalize([1e300, 1e300]) is [0.7071, 0.7071] where torch's sum of squares overflows and "
        "gives [0, 0]. Elsewhere the values are torch's (the scaling is exact). p is a positive number or "
        "inf.",
    ),
    (
        ("glu", "prelu"),
        "Zero-size inputs work forward and backward; glu needs an even size along ``dim`` (0 is even) and a "
        "0-d input is refused, as in torch; prelu's weight has 1 entry or one per channel (dim 1 of the "
        "input; a 1-D input has one channel).",
    ),
    (
        ("selu", "celu", "prelu"),
        "Second order: every rule is written with numpy functions over its arguments (np.where, np.exp, "
        "np.sum, slicing), so ``create_graph=True`` traces it. Where a derivative would pass through |x| at 0"
        " (abs'(0) = 0 would be wrong there) the rules use np.where(x >= 0, -x, x) instead, whose derivative "
        "is right on both sides. At the kinks the second order is torch's double backward too (selu's and "
        "celu's second derivative at 0 is 0, the right side's, as torch's), except prelu's at x = 0 exactly: "
        "torch's double backward takes the x >= 0 side there, contradicting its own first-order gradient "
        "weight * g (d/dg of it is 1 instead of weight); ours differentiates the first-order rule as it is.",
    ),
)

FAMILY = "activation"

# torch's SELU constants (Klambauer et al. 2017), and the coefficient of its negative branch computed as torch does
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_NEGATIVE = _SELU_ALPHA * _SELU_SCALE


# -- shared helpers --------------------------------------------------------------------------------------------
def _elementwise(name, forward, vjp, *, low=-2.0, high=2.0, kinks=(), attrs=None, samples=None, **declaration):
    return one_input_op(
        name,
        FAMILY,
        forward,
        vjp,
        check=floats_only(name, "input"),
        samples=samples or unary_samples(low, high, attrs, kinks),
        torch_ref=functional(name),
        **declaration,
    )


def _exp_minus_abs(x):
    """exp(-|x|) (in (0, 1], never overflows), with the derivative of each side at 0 itself: -|x| written as
    np.where(x >= 0, -x, x), as traced np.abs would give it slope 0 there."""
    return np.exp(np.where(x >= 0, -x, x))


def _sigmoids(x):
    """(sigmoid(x), 1 - sigmoid(x)), both with relative accuracy in either tail, from e = exp(-|x|)."""
    e = _exp_minus_abs(x)
    big, small = 1 / (1 + e), e / (1 + e)
    right = x >= 0
    return np.where(right, big, small), np.where(right, small, big)


def _with_tails(base, values):
    """A sample generator: ``base``'s samples plus one vector of ``values`` (tails, both sides of a kink)."""

    def generate(rng):
        return base(rng) + [Sample((np.array(values, dtype=np.float64),), {}, "tails")]

    return generate


# -- piecewise linear: hardtanh, relu6, hardsigmoid, hardswish, threshold, shrinks -------------------------------
def _hardtanh(input, min_val=-1.0, max_val=1.0):
    low, high = real("hardtanh", "min_val", min_val), real("hardtanh", "max_val", max_val)
    if low > high:
        raise ValueError(f"hardtanh: argument 'min_val' ({low}) cannot be greater than 'max_val' ({high})")
    return np.minimum(np.maximum(input, low), high)


def _inside(g, x, low, high):
    """g where low < x < high, else 0 (NaN included)."""
    return np.where(x > low, np.where(x < high, g, 0), 0)


def _hardtanh_vjp(g, ans, input, min_val=-1.0, max_val=1.0):
    return _inside(g, input, float(min_val), float(max_val))


hardtanh = _elementwise(
    "hardtanh",
    _hardtanh,
    _hardtanh_vjp,
    kinks=(-1.0, 1.0, -0.5, 1.5, 0.25),
    attrs=[{}, {"min_val": -0.5, "max_val": 1.5}, {"min_val": 0.25, "max_val": 0.25}],
    notes=case_law(_CASE_LAW, "hardtanh"),
    doc="x clamped to [min_val, max_val] elementwise.",
)

relu6 = _elementwise(
    "relu6",
    lambda input: np.minimum(np.maximum(input, 0.0), 6.0),
    lambda g, ans, input: _inside(g, input, 0.0, 6.0),
    low=-2.0,
    high=8.0,
    kinks=(0.0, 6.0),
    notes=case_law(_CASE_LAW, "relu6"),
    doc="min(max(x, 0), 6) elementwise.",
)


@quiet  # -inf * 0 = NaN, as torch
def _hardswish(input):
    return input * (np.minimum(np.maximum(input + 3.0, 0.0), 6.0) / 6.0)  # (x * 6 would overflow at 3e38)


def _hardswish_vjp(g, ans, input):
    # torch 2.13: 0 for x <= -3, g for x >= 3, g (x / 3 + 1/2) between (NaN lands there: NaN)
    return np.where(input <= -3.0, 0, np.where(input >= 3.0, g, g * (input / 3.0 + 0.5)))


hardswish = _elementwise(
    "hardswish",
    _hardswish,
    _hardswish_vjp,
    low=-5.0,
    high=5.0,
    kinks=(-3.0, 3.0),
    notes=case_law(_CASE_LAW, "hardswish"),
    doc="x * relu6(x + 3) / 6 elementwise: a piecewise-linear approximation of silu.",
)

hardsigmoid = _elementwise(
    "hardsigmoid",
    lambda input: np.minimum(np.maximum(input + 3.0, 0.0), 6.0) / 6.0,
    lambda g, ans, input: _inside(g * (1.0 / 6.0), input, -3.0, 3.0),
    low=-5.0,
    high=5.0,
    kinks=(-3.0, 3.0),
    notes=case_law(_CASE_LAW, "hardsigmoid"),
    doc="relu6(x + 3) / 6 elementwise: a piecewise-linear approximation of sigmoid.",
)


def _threshold(input, threshold, value):
    bound = real("threshold", "threshold", threshold)
    return np.where(input <= bound, real("threshold", "value", value), input)


def _threshold_vjp(g, ans, input, threshold, value):
    return np.where(input <= float(threshold), 0, g)  # a NaN input passes it, as in torch


threshold = _elementwise(
    "threshold",
    _threshold,
    _threshold_vjp,
    kinks=(0.5, -1.0),
    attrs=[{"threshold": 0.5, "value": -1.0}, {"threshold": -1.0, "value": 3.0}],
    notes=case_law(_CASE_LAW, "threshold"),
    doc="x where x > threshold, else ``value``, elementwise.",
)


def _outside(g, x, lambd):
    """g where |x| > lambd, else 0 (NaN included)."""
    return np.where(x < -lambd, g, np.where(x > lambd, g, 0))


def _hardshrink(input, lambd=0.5):
    lambd = real("hardshrink", "lambd", lambd)
    return np.where(input >= -lambd, np.where(input <= lambd, 0, input), input)  # torch's: NaN stays NaN


def _shrink(name, forward, **declaration):
    """Declare hardshrink or softshrink: both pass the gradient where |x| > lambd."""
    return _elementwise(
        name,
        forward,
        lambda g, ans, input, lambd=0.5: _outside(g, input, float(lambd)),
        attrs=[{}, {"lambd": 1.0}, {"lambd": 0.0}],
        kinks=(-1.0, -0.5, 0.0, 0.5, 1.0),
        notes=case_law(_CASE_LAW, name),
        **declaration,
    )


hardshrink = _shrink("hardshrink", _hardshrink, method=True, doc="x where |x| > lambd, else 0, elementwise.")


@quiet  # inf * 0 in the branch not taken
def _softshrink(input, lambd=0.5):
    lambd = real("softshrink", "lambd", lambd)
    if not lambd >= 0:
        raise ValueError(f"softshrink: argument 'lambd' expected a number >= 0, got {lambd}")
    # torch's x * 0 in the middle: -0.0 for negative x, NaN for NaN
    return np.where(input > lambd, input - lambd, np.where(input < -lambd, input + lambd, input * 0))


softshrink = _shrink(
    "softshrink",
    _softshrink,
    doc="x shrunk towards 0 by lambd elementwise: x - lambd above lambd, x + lambd below -lambd, else 0.",
)


# -- exponential family: selu, celu, logsigmoid, mish ---------------------------------------------------------
def _selu(input):
    return np.where(input <= 0, np.expm1(np.minimum(input, 0.0)) * _SELU_NEGATIVE, input * _SELU_SCALE)


def _negative_part(x):
    """x where x < 0, else x * 0 (NaN stays NaN): as the exponent of selu's and celu's left branch, traced, its
    slope at 0 is 0, so their second derivative at 0 is torch's (elu's double backward masks x < 0)."""
    return np.where(x < 0, x, x * 0)


@quiet  # inf * 0 in the branch not taken
def _selu_vjp(g, ans, input):
    return np.where(input > 0, g * _SELU_SCALE, g * (np.exp(_negative_part(input)) * _SELU_NEGATIVE))


selu = _elementwise(
    "selu",
    _selu,
    _selu_vjp,
    low=-3.0,
    high=3.0,
    kinks=(0.0,),
    notes=case_law(_CASE_LAW, "selu"),
    doc="scale * elu(x, alpha) elementwise, with the fixed self-normalising constants alpha ~ 1.6733, scale ~ 1.0507.",
)


def _celu_alpha(alpha):
    alpha = real("celu", "alpha", alpha)
    if alpha == 0:
        raise ValueError("celu: argument 'alpha' expected a non-zero number, got 0")
    return alpha


@quiet  # exp overflows to inf for a negative alpha, x * (1 / alpha) may overflow: torch's +-inf
def _celu(input, alpha=1.0):
    alpha = _celu_alpha(alpha)
    return np.where(input <= 0, np.expm1(np.minimum(input, 0.0) * (1.0 / alpha)) * alpha, input)


@quiet
def _celu_vjp(g, ans, input, alpha=1.0):
    inverse = 1.0 / float(alpha)
    # torch's order: g * (1 / alpha) * alpha * exp(x / alpha)
    return np.where(input > 0, g, g * inverse * float(alpha) * np.exp(_negative_part(input) * inverse))


celu = _elementwise(
    "celu",
    _celu,
    _celu_vjp,
    low=-3.0,
    high=3.0,
    kinks=(0.0,),
    attrs=[{}, {"alpha": 0.5}, {"alpha": -1.5}],
    notes=case_law(_CASE_LAW, "celu"),
    doc="max(x, 0) + min(0, alpha * (exp(x / alpha) - 1)) elementwise.",
)


def _logsigmoid(input):
    # torch's min(x, 0) - log1p(exp(-|x|)): exact in both tails
    return np.minimum(input, 0.0) - np.log1p(_exp_minus_abs(input))


logsigmoid = _elementwise(
    "logsigmoid",
    _logsigmoid,
    lambda g, ans, input: g * _sigmoids(input)[1],
    samples=_with_tails(unary_samples(-6.0, 6.0), [-40.0, -15.0, 15.0, 40.0]),
    notes=case_law(_CASE_LAW, "logsigmoid"),
    doc="log(sigmoid(x)) elementwise, computed without overflow for large |x|.",
)


def _mish_parts(x):
    """(tanh(softplus(x)), 1 - that squared, sigmoid(x)) from e = exp(-|x|), without cancellation:
    tanh(log(1 + e^x)) = n / (n + 2) with n = e^x (e^x + 2), divided through by e^(2x) for x >= 0."""
    e = _exp_minus_abs(x)
    one_e = (1 + e) * (1 + e)
    right_den = 1 + 2 * e + 2 * (e * e)
    n = e * (e + 2)
    left_den = n + 2
    right = x >= 0
    t = np.where(right, (1 + 2 * e) / right_den, n / left_den)
    # 1 - t^2 = (den - num)(den + num) / den^2, with den + num = 2 (1 + e)^2
    rest = np.where(right, 4 * (e * e) * one_e / (right_den * right_den), 4 * one_e / (left_den * left_den))
    sigmoid = np.where(right, 1 / (1 + e), e / (1 + e))
    return t, rest, sigmoid


@quiet  # -inf * 0 = NaN, as torch
def _mish(input):
    return input * _mish_parts(input)[0]


@quiet  # +-inf * 0 = NaN, as torch
def _mish_vjp(g, ans, input):
    t, rest, sigmoid = _mish_parts(input)
    return g * (t + input * sigmoid * rest)


mish = _elementwise(
    "mish",
    _mish,
    _mish_vjp,
    samples=_with_tails(unary_samples(-4.0, 4.0), [-40.0, -15.0, 15.0, 40.0]),
    notes=case_law(_CASE_LAW, "mish"),
    doc="x * tanh(softplus(x)) elementwise.",
)


# -- rational and hyperbolic: softsign, tanhshrink -------------------------------------------------------------
@quiet  # inf / inf = NaN, as torch
def _softsign(input):
    return input / (np.abs(input) + 1)


@quiet
def _softsign_vjp(g, ans, input):
    d = np.abs(input) + 1
    # g / (1 + |x|)^2; NaN at +-inf where the value is NaN too (torch's autograd gives NaN there)
    return np.where(np.abs(input) < np.inf, g / (d * d), np.nan)


softsign = _elementwise(
    "softsign",
    _softsign,
    _softsign_vjp,
    low=-4.0,
    high=4.0,
    kinks=(0.0,),
    notes=case_law(_CASE_LAW, "softsign"),
    doc="x / (1 + |x|) elementwise.",
)


def _tanhshrink_vjp(g, ans, input):
    t = np.tanh(input)
    return g * (t * t)


tanhshrink = _elementwise(
    "tanhshrink",
    lambda input: input - np.tanh(input),
    _tanhshrink_vjp,
    low=-3.0,
    high=3.0,
    notes=case_law(_CASE_LAW, "tanhshrink"),
    doc="x - tanh(x) elementwise.",
)


# -- along a dim: softmin, glu ---------------------------------------------------------------------------------
def _as_1d(x):
    """A 0-d array viewed as shape (1,) (torch lets softmin run over dim 0 / -1 of a scalar)."""
    return np.reshape(x, (1,)) if np.ndim(x) == 0 else x


@quiet  # a row of +inf: -inf - (-inf) = NaN, as torch's softmin
def _softmin(input, dim=None, *, dtype=None):
    """``torch.nn.functional.softmin``: softmax of ``-input`` along ``dim``; ``dtype`` casts the input first, as
    torch's (the output has that dtype; the gradient is cast back to the input's)."""
    axis = normalize_dim("softmin", implicit_dim("softmin", dim, input.ndim, warn=True), input.ndim)
    input = input if dtype is None else input.astype(float_dtype("softmin", dtype), copy=False)
    if np.size(input) == 0:
        return input.copy()
    z = -_as_1d(input)
    e = np.exp(z - np.max(z, axis=axis, keepdims=True))
    e /= np.sum(e, axis=axis, keepdims=True)
    return e.reshape(input.shape)


def _softmin_vjp(g, ans, input, dim=None, *, dtype=None):
    # softmin(x) = softmax(-x): the negated softmax backward, y (sum(g y) - g)
    axis = normalize_dim("softmin", implicit_dim("softmin", dim, input.ndim), input.ndim)
    y, g1 = _as_1d(ans), _as_1d(g)
    dx = np.reshape(y * (np.sum(g1 * y, axis=axis, keepdims=True) - g1), input.shape)
    if dx.dtype == input.dtype:
        return dx
    if isinstance(dx, Tensor):
        from .cast import cast  # at call time: the families register in ops/__init__'s order

        return cast(dx, input.dtype)
    return dx.astype(input.dtype)


def _check_softmin(input, dim=None, *, dtype=None):
    if dtype is None:
        require_float("softmin", "input", input)
    else:
        float_dtype("softmin", dtype)
    normalize_dim("softmin", implicit_dim("softmin", dim, input.ndim), input.ndim)


softmin = defop(
    "softmin",
    family=FAMILY,
    inputs=("input",),
    forward=_softmin,
    vjps=(_softmin_vjp,),
    check=_check_softmin,
    samples=lambda rng: (
        along_dim_samples(rng)
        + [Sample(along_dim_samples(rng)[0].inputs, {"dim": -1, "dtype": np.float64}, "dtype=float64 (cast first)")]
    ),
    torch_ref=lambda torch, input, dim=None, dtype=None: torch.nn.functional.softmin(
        input, dim=dim, dtype=None if dtype is None else getattr(torch, np.dtype(dtype).name)
    ),
)


def _halves(x, axis):
    """The two halves of ``x`` along ``axis`` (basic slices: views of arrays, getitem on Tensors)."""
    half = x.shape[axis] // 2
    before = (slice(None),) * axis
    return x[before + (slice(0, half),)], x[before + (slice(half, None),)]


@quiet  # inf * 0 = NaN, as torch
def _glu(input, dim=-1):
    a, b = _halves(input, normalize_dim("glu", dim, input.ndim))
    return a * _sigmoids(b)[0]


@quiet
def _glu_vjp(g, ans, input, dim=-1):
    axis = normalize_dim("glu", dim, input.ndim)
    a, b = _halves(input, axis)
    s, rest = _sigmoids(b)  # rest = 1 - s without cancellation
    return np.concatenate([g * s, s * rest * a * g], axis=axis)  # torch's order: a * g may overflow where s * rest is 0


def _check_glu(input, dim=-1):
    require_float("glu", "input", input)
    if input.ndim == 0:
        raise ValueError("glu: argument 'input' expected at least 1 dim (the halved dim), got a 0-d tensor")
    axis = normalize_dim("glu", dim, input.ndim)
    if input.shape[axis] % 2:
        raise ValueError(
            f"glu: argument 'input' expected an even size along dim {dim} (it is halved), got shape {input.shape}"
        )


def _glu_samples(rng):
    tails = np.array([[1.5, -0.5, 2.0, -40.0, 0.0, 40.0]])
    return [
        Sample((uniform(rng, (2, 6)),), {}, "dim=-1 (default)"),
        Sample((uniform(rng, (4, 3)),), {"dim": 0}),
        Sample((uniform(rng, (2, 4, 3)),), {"dim": 1}),
        Sample((uniform(rng, (6,)),), {"dim": 0}, "vector"),
        Sample((transposed(rng, (4, 3)),), {"dim": 0}, "non-contiguous"),
        Sample((tails,), {"dim": 1}, "sigmoid tails"),
        Sample((uniform(rng, (2, 0)),), {"dim": 1}, "zero-size halved dim"),
        Sample((uniform(rng, (0, 4)),), {"dim": 1}, "zero rows"),
    ]


glu = defop(
    "glu",
    family=FAMILY,
    inputs=("input",),
    forward=_glu,
    vjps=(_glu_vjp,),
    check=_check_glu,
    samples=_glu_samples,
    torch_ref=functional("glu"),
    notes=case_law(_CASE_LAW, "glu"),
    doc=(
        "Gated linear unit: input split in two halves a, b along ``dim``, returns a * sigmoid(b).\n"
        "The size of ``dim`` must be even; the output has half of it."
    ),
)


# -- prelu -----------------------------------------------------------------------------------------------------
def _channel_shape(input, weight):
    """The shape ``weight`` takes to broadcast against ``input``: its channel on dim 1, or a scalar."""
    if np.size(weight) == 1 or input.ndim < 2:
        return ()
    return (1, np.size(weight)) + (1,) * (input.ndim - 2)


@quiet  # weight * x may overflow: torch's +-inf
def _prelu(input, weight):
    w = np.reshape(weight, _channel_shape(input, weight))
    return np.where(input > 0, input, w * input)


@quiet
def _prelu_vjp_input(g, ans, input, weight):
    return np.where(input > 0, g, np.reshape(weight, _channel_shape(input, weight)) * g)


@quiet
def _prelu_vjp_weight(g, ans, input, weight):
    part = np.where(input > 0, 0, input * g)
    shape = _channel_shape(input, weight)
    axes = tuple(i for i in range(input.ndim) if not shape or i != 1)
    return np.reshape(np.sum(part, axis=axes), weight.shape) if axes else np.reshape(part, weight.shape)


def _check_prelu(input, weight):
    require_float("prelu", "input", input)
    require_float("prelu", "weight", weight)
    if weight.ndim > 1:
        raise ValueError(f"prelu: argument 'weight' expected a 0-d or 1-D tensor, got shape {weight.shape}")
    if weight.size != 1:
        channels = input.shape[1] if input.ndim > 1 else 1
        if input.ndim == 0 or weight.size != channels:
            raise ValueError(
                f"prelu: argument 'weight' expected 1 entry or one per channel (dim 1 of 'input', "
                f"size {channels}), got {weight.size} entries for input shape {input.shape}"
            )


def _prelu_samples(rng):
    def x(shape, make=uniform):
        return away_from(make(rng, shape), (0.0,))

    return [
        Sample((x((2, 3, 4)), uniform(rng, (3,), -0.5, 1.5)), {}, "one weight per channel"),
        Sample((x((2, 3)), uniform(rng, (1,), -0.5, 1.5)), {}, "one shared weight"),
        Sample((x((5,)), uniform(rng, (1,), -0.5, 1.5)), {}, "vector input"),
        Sample((x(()), np.array(0.25)), {}, "0-d input and weight"),
        Sample((x((2, 3, 4), transposed), uniform(rng, (3,), -0.5, 1.5)), {}, "non-contiguous"),
        Sample((x((2, 3, 2, 2)), uniform(rng, (3,), -0.5, 1.5)), {}, "4-D"),
        Sample((x((0, 3)), uniform(rng, (3,), -0.5, 1.5)), {}, "zero-size"),
    ]


prelu = defop(
    "prelu",
    family=FAMILY,
    inputs=("input", "weight"),
    forward=_prelu,
    vjps=(_prelu_vjp_input, _prelu_vjp_weight),
    check=_check_prelu,
    samples=_prelu_samples,
    torch_ref=functional("prelu"),
    method=True,
    notes=case_law(_CASE_LAW, "prelu"),
    doc="max(x, 0) + weight * min(x, 0), with a learned slope ``weight``: one value, or one per channel (dim 1).",
)


# -- normalize -------------------------------------------------------------------------------------------------
def _order(p) -> float:
    p = real("normalize", "p", p)
    if not (p > 0):
        raise ValueError(f"normalize: argument 'p' expected a positive number or inf, got {p}")
    return p


def _constant(x) -> np.ndarray:
    """The values of ``x`` (an array, or a Tensor in a traced rule) as an array carrying no gradient."""
    return np.asarray(constant_values(x))


def _scale(x, axes):
    """A power of two near max |x| along ``axes`` (1 where that is 0, inf or NaN), as a constant: dividing by
    it is exact and brings the largest entry into [1, 2), so the p-norm's powers neither overflow nor underflow.
    ||x|| = s ||x / s|| for every s, so its derivatives through s cancel: the rules may hold it constant."""
    m = np.max(np.abs(_constant(x)), axis=axes, keepdims=True)
    exponent = np.frexp(m)[1] - 1
    return np.where(np.logical_and(m > 0, m < np.inf), np.ldexp(np.ones_like(m), exponent), 1)


def _norm(x, p, axes):
    """||x||_p along ``axes`` (keepdims), written with numpy functions so a traced rule records it."""
    if p == math.inf:
        return np.max(np.abs(x), axis=axes, keepdims=True)
    s = _scale(x, axes)
    if p == 2:
        return np.sqrt(np.sum(np.square(x / s), axis=axes, keepdims=True)) * s
    if p == 1:
        return np.sum(np.abs(x / s), axis=axes, keepdims=True) * s
    return np.power(np.sum(np.power(np.abs(x / s), p), axis=axes, keepdims=True), 1.0 / p) * s


def _axes_of(dim, ndim: int) -> tuple:
    """normalize's ``dim`` (an int or a sequence, already validated) as non-negative axes."""
    if ndim == 0:
        return ()
    dims = range(ndim) if dim is None else (dim,) if isinstance(dim, int | np.integer) else dim
    return tuple(sorted(int(d) % ndim for d in dims))


def _denominator(n, eps):
    return np.where(n < eps, eps, n)  # torch's clamp_min(eps): NaN stays NaN


@quiet  # 0 / 0 with eps = 0, inf / inf, as torch
def _normalize(input, p=2.0, dim=1, eps=1e-12):
    p, eps, axes = float(p), float(eps), _axes_of(dim, input.ndim)  # validated by _check_normalize
    if input.size == 0:
        return input.copy()
    return input / _denominator(_norm(input, p, axes), eps)


def _norm_slope(ans, input, n, p, axes):
    """d||x||_p / dx where the norm is not clamped (so ans = x / ||x||)."""
    if p == 2:
        return ans
    if p == 1:
        return np.sign(input)
    if p == math.inf:  # torch: the entries with |x| == max, or NaN, share the gradient evenly
        hit = np.logical_or(_constant(np.abs(input) == n), _constant(input != input))
        count = np.sum(hit, axis=axes, keepdims=True).astype(input.dtype)  # a constant array
        return np.where(hit, np.sign(input) / count, 0)
    # sign(x) |x|^(p-1) / ||x||^(p-1) = sign(y) |y|^(p-1); 0 where y = 0 (torch's, for p < 1 too)
    zero = _constant(ans == 0)
    return np.where(zero, 0, np.sign(ans) * np.power(np.where(zero, 1, np.abs(ans)), p - 1))


@quiet
def _normalize_vjp(g, ans, input, p=2.0, dim=1, eps=1e-12):
    if np.size(input) == 0:
        return g * 1
    p, eps, axes = float(p), float(eps), _axes_of(dim, np.ndim(input))
    n = _norm(input, p, axes)
    passes = _constant(n >= eps)  # the clamp passes the gradient to the norm (torch's: bound included)
    projection = np.where(passes, np.sum(g * ans, axis=axes, keepdims=True), 0)
    return (g - projection * _norm_slope(ans, input, n, p, axes)) / _denominator(n, eps)


def _check_normalize(input, p=2.0, dim=1, eps=1e-12):
    require_float("normalize", "input", input)
    _order(p)
    real("normalize", "eps", eps)
    normalize_dims("normalize", dim, input.ndim)


def _normalize_samples(rng):
    # row 0 above eps = 0.5 (norm >= sqrt(3)), row 1 below it (norm <= sqrt(0.12)), both well clear of it
    small = np.stack([uniform(rng, (3,), 1.0, 2.0) * rng.choice([-1.0, 1.0], 3), uniform(rng, (3,), -0.2, 0.2)])
    return [
        Sample((uniform(rng, (3, 4)),), {}, "p=2 dim=1 (defaults)"),
        Sample((uniform(rng, (3, 4)),), {"p": 1.0}, "p=1"),
        Sample((uniform(rng, (3, 4)),), {"p": math.inf}, "p=inf"),
        Sample((uniform(rng, (3, 4)),), {"p": 3.0, "dim": 0}, "p=3 dim=0"),
        Sample((away_from(uniform(rng, (3, 4)), (0.0,), 0.05),), {"p": 0.5, "dim": -1}, "p=0.5 dim=-1"),
        Sample((uniform(rng, (2, 3, 4)),), {"dim": (1, 2)}, "dim=(1, 2)"),
        Sample((uniform(rng, (2, 3, 4)),), {"p": math.inf, "dim": -1}, "p=inf 3-D"),
        Sample((transposed(rng, (3, 4)),), {"dim": 0}, "non-contiguous"),
        Sample((uniform(rng, (5,)),), {"dim": 0}, "vector"),
        Sample((uniform(rng, ()),), {"dim": 0}, "scalar"),
        Sample((small,), {"eps": 0.5}, "a row below eps"),
        Sample((uniform(rng, (2, 3), -1e4, 1e4),), {"p": 1.0}, "large entries"),
        Sample((uniform(rng, (0, 3)),), {}, "zero rows"),
        Sample((uniform(rng, (2, 0)),), {}, "zero-size normalised dim"),
    ]


normalize = defop(
    "normalize",
    family=FAMILY,
    inputs=("input",),
    forward=_normalize,
    vjps=(_normalize_vjp,),
    check=_check_normalize,
    samples=_normalize_samples,
    torch_ref=functional("normalize"),
    notes=case_law(_CASE_LAW, "normalize"),
    doc="input divided by its p-norm along ``dim`` (the norm clamped below by eps), as torch.nn.functional.normalize.",
)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_hardtanh(g, rec, x):
    a = rec.attributes
    return clip(g, x, float_only(rec), float(a.get("min_val", -1.0)), float(a.get("max_val", 1.0)))


def _onnx_relu6(g, rec, x):
    return clip(g, x, float_only(rec), 0.0, 6.0)


def _onnx_hardsigmoid(g, rec, x):
    dtype = float_only(rec)
    return g.op("Div", clip(g, g.op("Add", x, scalar(g, 3.0, dtype)), dtype, 0.0, 6.0), scalar(g, 6.0, dtype))


def _onnx_hardswish(g, rec, x):
    return g.op("Mul", x, _onnx_hardsigmoid(g, rec, x))


def _onnx_threshold(g, rec, x):
    dtype = float_only(rec)
    bound, value = float(rec.attributes["threshold"]), float(rec.attributes["value"])
    return g.op("Where", g.op("LessOrEqual", x, scalar(g, bound, dtype)), scalar(g, value, dtype), x)


def _onnx_hardshrink(g, rec, x):
    dtype = float_only(rec)
    lambd = float(rec.attributes.get("lambd", 0.5))
    inside = g.op("Where", g.op("LessOrEqual", x, scalar(g, lambd, dtype)), scalar(g, 0, dtype), x)
    return g.op("Where", g.op("GreaterOrEqual", x, scalar(g, -lambd, dtype)), inside, x)


def _onnx_softshrink(g, rec, x):
    dtype = float_only(rec)
    lambd = scalar(g, float(rec.attributes.get("lambd", 0.5)), dtype)
    below = g.op(
        "Where", g.op("Less", x, g.op("Neg", lambd)), g.op("Add", x, lambd), g.op("Mul", x, scalar(g, 0, dtype))
    )
    return g.op("Where", g.op("Greater", x, lambd), g.op("Sub", x, lambd), below)


def _onnx_expm1_of(g, rec, x):
    from .elementwise import _onnx_expm1

    return _onnx_expm1(g, rec, x)


def _onnx_selu(g, rec, x):
    dtype = float_only(rec)
    left = g.op("Mul", _onnx_expm1_of(g, rec, g.op("Min", x, scalar(g, 0.0, dtype))), scalar(g, _SELU_NEGATIVE, dtype))
    return g.op(
        "Where", g.op("LessOrEqual", x, scalar(g, 0, dtype)), left, g.op("Mul", x, scalar(g, _SELU_SCALE, dtype))
    )


def _onnx_celu(g, rec, x):
    dtype = float_only(rec)
    alpha = float(rec.attributes.get("alpha", 1.0))
    z = g.op("Mul", g.op("Min", x, scalar(g, 0.0, dtype)), scalar(g, 1.0 / alpha, dtype))
    left = g.op("Mul", _onnx_expm1_of(g, rec, z), scalar(g, alpha, dtype))
    return g.op("Where", g.op("LessOrEqual", x, scalar(g, 0, dtype)), left, x)


def _onnx_exp_minus_abs(g, x):
    return g.op("Exp", g.op("Neg", g.op("Abs", x)))


def _onnx_logsigmoid(g, rec, x):
    dtype = float_only(rec)
    return g.op("Sub", g.op("Min", x, scalar(g, 0.0, dtype)), log1p_graph(g, rec, _onnx_exp_minus_abs(g, x)))


def _onnx_mish(g, rec, x):
    # the forward's tanh(softplus(x)) from e = exp(-|x|), without cancellation (see _mish_parts)
    dtype = float_only(rec)
    one, two = scalar(g, 1, dtype), scalar(g, 2, dtype)
    e = _onnx_exp_minus_abs(g, x)
    n = g.op("Mul", e, g.op("Add", e, two))
    right = g.op(
        "Div",
        g.op("Add", one, g.op("Mul", two, e)),
        g.op("Add", g.op("Add", one, g.op("Mul", two, e)), g.op("Mul", two, g.op("Mul", e, e))),
    )
    left = g.op("Div", n, g.op("Add", n, two))
    t = g.op("Where", g.op("GreaterOrEqual", x, scalar(g, 0, dtype)), right, left)
    return g.op("Mul", x, t)


def _onnx_softsign(g, rec, x):
    dtype = float_only(rec)
    return g.op("Div", x, g.op("Add", g.op("Abs", x), scalar(g, 1, dtype)))


def _onnx_tanhshrink(g, rec, x):
    float_only(rec)
    return g.op("Sub", x, g.op("Tanh", x))


def _onnx_softmin(g, rec, x):
    ndim = len(rec.inputs[0].shape)
    if ndim == 0:
        raise NotExportable("a 0-D input has no lowering")
    dim = implicit_dim("softmin", rec.attributes.get("dim"), ndim)
    dtype = rec.attributes.get("dtype")
    x = x if dtype is None else cast_to(g, x, rec.inputs[0].dtype, np.dtype(dtype))  # cast first, as the forward
    return g.op("Softmax", g.op("Neg", x), axis=axis_of(int(dim), ndim))


def _onnx_glu(g, rec, x):
    shape = rec.inputs[0].shape
    if not shape:
        raise NotExportable("a 0-D input has no lowering")
    axis = axis_of(int(rec.attributes.get("dim", -1)), len(shape))
    half = shape[axis] // 2
    a = g.op("Slice", x, g.ints([0]), g.ints([half]), g.ints([axis]))
    b = g.op("Slice", x, g.ints([half]), g.ints([shape[axis]]), g.ints([axis]))
    return g.op("Mul", a, g.op("Sigmoid", b))


def _onnx_prelu(g, rec, input, weight):
    float_only(rec)
    shape = _channel_shape(np.empty(rec.inputs[0].shape, np.int8), np.empty(rec.inputs[1].shape, np.int8))
    w = g.op("Reshape", weight, g.ints(shape))
    zero = scalar(g, 0, rec.inputs[0].dtype)
    return g.op("Where", g.op("Greater", input, zero), input, g.op("Mul", w, input))


def _onnx_normalize(g, rec, x):
    dtype = float_only(rec)
    shape = rec.inputs[0].shape
    if not shape or 0 in shape:
        raise NotExportable("a 0-D or empty input has no lowering")
    a = rec.attributes
    axes = normalize_dims("normalize", a.get("dim", 1), len(shape))
    norm = pnorm(g, x, dtype, float(a.get("p", 2.0)), axes)
    eps = scalar(g, float(a.get("eps", 1e-12)), dtype)
    return g.op("Div", x, g.op("Where", g.op("Less", norm, eps), eps, norm))


lowering(hardtanh, _onnx_hardtanh)
lowering(relu6, _onnx_relu6)
lowering(hardsigmoid, _onnx_hardsigmoid)
lowering(hardswish, _onnx_hardswish)
lowering(threshold, _onnx_threshold)
lowering(hardshrink, _onnx_hardshrink)
lowering(softshrink, _onnx_softshrink)
lowering(selu, _onnx_selu)
lowering(celu, _onnx_celu)
lowering(logsigmoid, _onnx_logsigmoid)
lowering(mish, _onnx_mish)
lowering(softsign, _onnx_softsign)
lowering(tanhshrink, _onnx_tanhshrink)
lowering(softmin, _onnx_softmin)
lowering(glu, _onnx_glu)
lowering(prelu, _onnx_prelu)
lowering(normalize, _onnx_normalize)
