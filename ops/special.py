"""Special functions (torch.special and the gamma family), vectorised numpy in float64.

Every kernel runs on a flat float64 array (float32 input is computed in float64 and rounded once) and picks its
formula per element with boolean masks; no per-element Python. Names follow the registry's style for torch's
namespaced functions (``vector_norm`` for torch.linalg.vector_norm): torch.special.i0e is ``i0e``; the aliases
torch.special has (gammaln, psi, multigammaln, expit) are the same ops under a second name.

Gradients are torch's formulas, each written with registered ops so it is differentiable again. Each op's
algorithm and edges, as PyTorch 2.13's, are its notes (``_CASE_LAW``).
"""

__all__ = [
    "lgamma",
    "digamma",
    "polygamma",
    "mvlgamma",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "erfcx",
    "ndtr",
    "ndtri",
    "log_ndtr",
    "entr",
    "xlog1py",
    "sinc",
    "gammaln",
    "psi",
    "multigammaln",
    "expit",
]

import functools
import math

import numpy as np
import numpy.polynomial.polynomial as npoly

from tape.broadcast import unbroadcast
from tape.onnx import lowering
from tape.registry import Sample, defop

from ._declare import one_input_op
from ._notes import case_law
from ._numerics import quiet
from ._onnx import cast_to, float_only, log1p_graph, scalar
from ._samples import binary_samples, unary_samples
from ._validation import floats_only, integer
from .elementwise import (
    _ERF_A,
    _ERF_B,
    _ERFC_C,
    _ERFC_D,
    _ERFC_P,
    _ERFC_Q,
    _INV_SQRT_PI,
    _SQRT_HALF,
    _cody_ratio,
    _erfc64,
    _normal_cdf64,
    sigmoid,
)

# the algorithms and edges, op by op: each entry joins the notes= of the ops it names (shown in docs/coverage.md)
_CASE_LAW = (
    (
        ("lgamma",),
        "A Taylor series of lgamma(1 + z) in the zeta values on |z| <= 1/2 (so lgamma keeps its relative accuracy "
        "at its zeros 1 and 2), the recurrence down into [1.5, 2.5] below 12, Stirling's series from 12, the "
        "reflection formula below -1/2. +inf at the poles 0, -1, -2, ... and at +-inf. Gradient: digamma.",
    ),
    (
        ("digamma",),
        "torch's algorithm (Cephes): the recurrence up to 10 in ten masked steps, then the asymptotic series; "
        "reflection for negative input. digamma(+-0) = -+inf, NaN at negative integers. Gradient: polygamma(1).",
    ),
    (
        ("polygamma",),
        "polygamma(n >= 1) = (-1)^(n+1) n! zeta(n + 1, x) with Cephes' Hurwitz zeta (Euler-Maclaurin after "
        "shifting q past 9). torch's own trigamma (n = 1) is a shorter series, accurate to ~1e-9 relative; ours "
        "to ~1e-15. Gradient: polygamma(n + 1).",
    ),
    (("i0", "i0e", "i1", "i1e"), "Cephes' Chebyshev expansions (torch's)."),
    (("i0",), "Gradient: i1."),
    (("ndtri",), "Cephes' rational approximations."),
    (
        ("erfcx", "ndtr", "log_ndtr"),
        "From W. J. Cody's erfc approximations (ops/elementwise.py), whose middle and tail branches compute "
        "erfc(x) exp(x^2) directly, so erfcx keeps its accuracy where erfc underflows.",
    ),
)

_EULER_GAMMA = 0.57721566490153286061
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_SQRT_2PI = math.sqrt(2 * math.pi)


# -- shared machinery ------------------------------------------------------------------------------------------
def _in_float64(kernel):
    """A forward ``f(input)`` running ``kernel`` on a flat float64 copy and rounding back to the input's dtype."""

    @quiet
    def forward(input):
        flat = np.asarray(input, dtype=np.float64).reshape(-1)
        return kernel(flat).reshape(input.shape).astype(input.dtype, copy=False)

    forward.__name__ = f"_{kernel.__name__.lstrip('_')}"
    return forward


def _pieces(x, cases, default=np.nan):
    """``out[mask] = formula(x[mask])`` for each (mask, formula) in ``cases``; ``default`` elsewhere."""
    out = np.full(x.shape, default, dtype=np.float64)
    for mask, formula in cases:
        if mask.any():
            out[mask] = formula(x[mask])
    return out


def _on(op, kernel, x):
    """``kernel(x)`` for an array (the first-order pass), the registered ``op`` for a Tensor (the second order)."""
    return kernel(x) if isinstance(x, np.ndarray | np.generic) else op(x)


def _special(name, forward, vjp, *, low=-2.0, high=2.0, edges=(), torch_ref=None, samples=None, **declaration):
    """Declare a one-input special function ``name(input)``; torch's reference defaults to torch.special.<name>."""
    base = samples or unary_samples(low, high)

    def generate(rng):
        out = base(rng)
        if edges:
            out.append(Sample((np.array(edges, dtype=np.float64),), {}, "domain edges"))
        return out

    declaration.setdefault("check", floats_only(name, "input"))
    declaration.setdefault("notes", case_law(_CASE_LAW, name))
    return one_input_op(
        name,
        "special",
        forward,
        vjp,
        samples=generate,
        torch_ref=torch_ref or (lambda torch, input: getattr(torch.special, name)(input)),
        **declaration,
    )


def _horner(z, coefficients):
    """sum c_k z^k with ``coefficients`` lowest degree first."""
    out = np.full(z.shape, coefficients[-1])
    for c in coefficients[-2::-1]:
        out = out * z + c
    return out


def _polevl(z, coefficients):
    """Cephes' polevl: the highest degree first."""
    out = np.full(z.shape, coefficients[0])
    for c in coefficients[1:]:
        out = out * z + c
    return out


def _sinpi(x):
    """sin(pi x), exact at the integers: x reduced to [-1/2, 1/2] first (the reduction is exact)."""
    r = x - np.round(x)
    parity = np.where(np.remainder(np.round(x), 2) == 0, 1.0, -1.0)
    return np.sin(np.pi * r) * parity


# -- Hurwitz zeta (Cephes, as torch) ---------------------------------------------------------------------------
_ZETA_A = (
    12.0,
    -720.0,
    30240.0,
    -1209600.0,
    47900160.0,
    -1.8924375803183791606e9,
    7.47242496e10,
    -2.950130727918164224e12,
    1.1646782814350067249e14,
    -4.5979787224074726105e15,
    1.8152105401943546773e17,
    -7.1661652561756670113e18,
)
_MACHEP = 1.11022302462515654042e-16


def _zeta(s, q):
    """Hurwitz zeta(s, q) = sum_k (q + k)^-s for an integer ``s`` >= 2 (a float64) and flat ``q`` >= 0 or a pole:
    +inf at the poles (q a non-positive integer), 0 at +inf, NaN at NaN. Negative non-integer q is polygamma's
    reflection's business, not this series' (its cost would grow with |q|)."""
    q = np.asarray(q, dtype=np.float64)
    pole, nan = (q <= 0) & (q == np.floor(q)), np.isnan(q)
    total = _zeta_positive(s, np.where(pole | nan, 1.0, q))
    return np.where(pole, np.inf, np.where(nan, np.nan, total))


def _zeta_positive(s, q):
    """Hurwitz zeta for q > 0 (+inf included): the first terms summed until q + k passes 9 (at least 9 of them), then
    Euler-Maclaurin with 12 Bernoulli terms. Each element stops where Cephes stops (a term below the rounding of the
    sum)."""
    infinite = q == np.inf
    q = np.where(infinite, 1.0, q)
    total = np.power(q, -s)
    done = np.zeros(q.shape, dtype=bool)
    a, b = q.copy(), np.zeros_like(q)
    steps = max(9, int(math.ceil(9 - float(np.min(q, initial=9.0)))) + 1)
    for i in range(steps):
        live = ~done & ((i < 9) | (a <= 9.0))
        a = np.where(live, a + 1, a)
        b = np.where(live, np.power(a, -s), b)
        total = np.where(live, total + b, total)
        done = done | (live & (np.abs(b) < _MACHEP * total))
        done = done | ~live
    converged = np.abs(b) < _MACHEP * np.abs(total)
    w = a
    tail = ~converged
    total = np.where(tail, total + b * w / (s - 1) - 0.5 * b, total)
    rising, k = 1.0, 0.0
    for coefficient in _ZETA_A:
        rising = rising * (s + k)
        b = b / w
        t = rising * b / coefficient
        total = np.where(tail, total + t, total)
        tail = tail & ~(np.abs(t / total) < _MACHEP)
        k += 1
        rising = rising * (s + k)
        b = b / w
        k += 1
    return np.where(infinite, 0.0, total)


# -- lgamma ----------------------------------------------------------------------------------------------------
def _lgamma1p_coefficients():
    """lgamma(1 + z) = -gamma z + sum_{k >= 2} (-1)^k zeta(k) / k z^k, to degree 60 (|z| <= 1/2: 2^-60 / 60)."""
    ks = np.arange(2, 61, dtype=np.float64)
    zetas = np.array([_zeta(k, np.ones(1))[0] for k in ks])  # once, at import: 59 values
    return (0.0, -_EULER_GAMMA, *((-1.0) ** ks * zetas / ks))


_LGAMMA1P = _lgamma1p_coefficients()
# Stirling: lgamma(x) = (x - 1/2) log x - x + log(2 pi) / 2 + sum B_2k / (2k (2k - 1) x^(2k - 1))
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400)


def _lgamma1p(z):
    return _horner(z, _LGAMMA1P)


def _lgamma_stirling(x):
    inv = 1 / x
    series = _horner(inv * inv, _STIRLING) * inv
    return (x - 0.5) * np.log(x) - x + _HALF_LOG_2PI + series


def _lgamma_recurrence(x):
    """2.5 < x < 12: lgamma(x) = log((x - 1) ... (x - k)) + lgamma(x - k) with x - k in [1.5, 2.5] (exact)."""
    k = np.floor(x - 1.5)
    product = np.ones_like(x)
    for i in range(1, 11):
        product = np.where(i <= k, product * (x - i), product)
    return np.log(product) + _lgamma_near_two(x - k)


def _lgamma_near_two(x):
    """1.5 <= x <= 2.5: lgamma(2 + z) = log(1 + z) + lgamma(1 + z), z = x - 2 (exact)."""
    z = x - 2
    return np.log1p(z) + _lgamma1p(z)


def _lgamma_positive(x):
    """lgamma for x >= 1/2 (inf included)."""
    return _pieces(
        x,
        (
            (x < 1.5, lambda v: _lgamma1p(v - 1)),
            ((x >= 1.5) & (x <= 2.5), _lgamma_near_two),
            ((x > 2.5) & (x < 12), _lgamma_recurrence),
            (x >= 12, _lgamma_stirling),
        ),
    )


def _lgamma_reflected(x):
    """x < -1/2, not an integer: lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x)."""
    return np.log(np.pi / np.abs(_sinpi(x))) - _lgamma_positive(1 - x)


def _lgamma64(x):
    pole = np.logical_or(np.logical_and(x <= 0, x == np.floor(x)), np.isinf(x))
    small = np.logical_and(np.abs(x) < 0.5, ~pole)
    return _pieces(
        x,
        (
            (pole, lambda v: np.full(v.shape, np.inf)),
            (small, lambda v: _lgamma1p(v) - np.log(np.abs(v))),  # lgamma(x) = lgamma(1 + x) - log|x|
            ((x >= 0.5) & ~pole, _lgamma_positive),
            ((x <= -0.5) & ~pole, _lgamma_reflected),
        ),
    )


_lgamma = _in_float64(_lgamma64)


# -- digamma (torch's algorithm) -------------------------------------------------------------------------------
_PSI_10 = 2.25175258906672110764
_DIGAMMA_A = (
    8.33333333333333333333e-2,
    -2.10927960927960927961e-2,
    7.57575757575757575758e-3,
    -4.16666666666666666667e-3,
    3.96825396825396825397e-3,
    -8.33333333333333333333e-3,
    8.33333333333333333333e-2,
)


def _digamma_positive(x):
    """x > 0: psi(x) = psi(x + n) - sum 1 / (x + i), n steps until x + n >= 10, then the asymptotic series."""
    result = np.zeros_like(x)
    for _ in range(10):
        below = x < 10
        result = np.where(below, result - 1 / x, result)
        x = np.where(below, x + 1, x)
    z = 1 / (x * x)
    series = np.where(x < 1e17, z * _polevl(z, _DIGAMMA_A), 0.0)
    return np.where(x == 10, result + _PSI_10, result + np.log(x) - 0.5 / x - series)


def _digamma_reflected(x):
    """x < 0, not an integer: psi(x) = psi(1 - x) - pi / tan(pi r), r = x's fractional part."""
    return _digamma_positive(1 - x) - np.pi / np.tan(np.pi * np.fmod(x, 1.0))


def _digamma64(x):
    negative_integer = np.logical_and(x < 0, x == np.trunc(x))
    return _pieces(
        x,
        (
            (x == 0, lambda v: np.copysign(np.inf, -v)),
            (x > 0, _digamma_positive),
            ((x < 0) & ~negative_integer, _digamma_reflected),
        ),
    )


_digamma = _in_float64(_digamma64)


# -- polygamma -------------------------------------------------------------------------------------------------
def _order(op, n):
    return integer(op, "n", n, at_least=0)


@functools.cache
def _cot_derivative(n: int) -> tuple:
    """Coefficients (lowest first) of P_n with d^n/dx^n cot(pi x) = pi^n P_n(cot(pi x)): P_0 = c,
    P_(k+1) = -(1 + c^2) P_k'."""
    p = np.array([0.0, 1.0])
    for _ in range(n):
        p = -npoly.polymul([1.0, 0.0, 1.0], npoly.polyder(p))
    return tuple(p)


def _polygamma64(n, x):
    """psi_n(x) = (-1)^(n+1) n! zeta(n + 1, x) for x >= 0 (and the poles, NaN, +inf); for negative non-integer x
    the reflection psi_n(x) = (-1)^n psi_n(1 - x) - pi^(n+1) P_n(cot(pi x)), cot taken at x's fraction in
    [-1/2, 1/2] (exact), so the cost and the digits do not depend on |x| (every float64 below -2^52 is a pole)."""
    if n == 0:
        return _digamma64(x)
    x = np.asarray(x, dtype=np.float64)
    negative = (x < 0) & (x != np.floor(x)) & np.isfinite(x)
    fraction = np.where(negative, x - np.floor(x), 0.5)
    fraction = np.where(fraction > 0.5, fraction - 1.0, fraction)
    a = np.abs(fraction)  # cot(pi a) = tan(pi (1/2 - a)): exactly 0 at half-integers, where 1 / tan is not
    cot = np.sign(fraction) * np.where(a > 0.25, np.tan(np.pi * (0.5 - a)), 1.0 / np.tan(np.pi * a))
    sign = 1.0 if n % 2 else -1.0
    direct = sign * float(math.factorial(n)) * _zeta(float(n + 1), np.where(negative, 1.0 - x, x))
    reflected = (-1.0) ** n * direct - np.pi ** (n + 1) * npoly.polyval(cot, _cot_derivative(n))
    out = np.where(negative, reflected, direct)
    return np.where(np.isnan(x) | (x == -np.inf), np.nan, out)


@quiet
def _polygamma(n, input):
    n = _order("polygamma", n)
    flat = np.asarray(input, dtype=np.float64).reshape(-1)
    return _polygamma64(n, flat).reshape(input.shape).astype(input.dtype, copy=False)


def _polygamma_of(n, x):
    return _polygamma(n, x) if isinstance(x, np.ndarray | np.generic) else polygamma(n, x)


# -- mvlgamma --------------------------------------------------------------------------------------------------
def _dimension(p):
    return integer("mvlgamma", "p", p, at_least=1)


def _mvlgamma_check(input, p):
    p = _dimension(p)
    floats_only("mvlgamma", "input")(input)
    if input.size and not np.all(input > (p - 1) / 2):
        raise ValueError(
            f"mvlgamma: argument 'input' expected every entry > (p - 1) / 2 = {(p - 1) / 2} for p={p}, got a "
            f"minimum of {np.min(input)}"
        )


@quiet
def _mvlgamma(input, p):
    p = _dimension(p)
    shifted = np.asarray(input, dtype=np.float64)[..., None] - np.arange(p) / 2
    out = _lgamma64(shifted.reshape(-1)).reshape(shifted.shape).sum(-1) + p * (p - 1) / 4 * math.log(math.pi)
    return out.astype(input.dtype, copy=False)


def _mvlgamma_vjp(g, ans, input, p):
    return g * sum(_on(digamma, _digamma, input - j / 2) for j in range(p))


def _mvlgamma_samples(rng):
    return [
        Sample((rng.uniform(1.6, 4.0, (2, 3)),), {"p": 3}, "p=3"),
        Sample((rng.uniform(0.1, 3.0, (5,)),), {"p": 1}, "p=1"),
        Sample((rng.uniform(2.1, 4.0, (4, 3)).T,), {"p": 5}, "non-contiguous p=5"),
        Sample((rng.uniform(1.0, 2.0, ()),), {"p": 2}, "scalar p=2"),
        Sample((np.zeros((0, 3)),), {"p": 2}, "zero-size"),
    ]


# -- Bessel functions I0, I1 and their exponentially scaled forms (Cephes, as torch) ----------------------------
_I0E_A = (
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16, 1.71539128555513303061e-15,
    -1.16853328779934516808e-14, 7.67618549860493561688e-14, -4.85644678311192946090e-13, 2.95505266312963983461e-12,
    -1.72682629144155570723e-11, 9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
    -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7, 1.11738753912010371815e-6,
    -4.41673835845875056359e-6, 1.64484480707288970893e-5, -5.75419501008210370398e-5, 1.88502885095841655729e-4,
    -5.76375574538582365885e-4, 1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
    -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2, 1.71620901522208775349e-1,
    -3.04682672343198398683e-1, 6.76795274409476084995e-1,
)  # fmt: skip
_I0E_B = (
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17, 3.46122286769746109310e-17,
    -2.82762398051658348494e-16, -3.42548561967721913462e-16, 1.77256013305652638360e-15, 3.81168066935262242075e-15,
    -9.55484669882830764870e-15, -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11, -3.14991652796324136454e-11,
    1.18891471078464383424e-11, 4.94060238822496958910e-10, 3.39623202570838634515e-9, 2.26666899049817806459e-8,
    2.04891858946906374183e-7, 2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
    8.04490411014108831608e-1,
)  # fmt: skip
_I1E_A = (
    2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16, -1.10559694773538630805e-15,
    7.60068429473540693410e-15, -5.04218550472791168711e-14, 3.22379336594557470981e-13, -1.98397439776494371520e-12,
    1.17361862988909016308e-11, -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-9,
    9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7, -8.56872026469545474066e-7,
    3.47025130813767847674e-6, -1.32731636560394358279e-5, 4.78156510755005422638e-5, -1.61760815825896745588e-4,
    5.12285956168575772895e-4, -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
    2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1, -1.76416518357834055153e-1,
    2.52587186443633654823e-1,
)  # fmt: skip
_I1E_B = (
    7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17, -3.20952592199342395980e-17,
    2.96262899764595013876e-16, 3.30820231092092828324e-16, -1.88035477551078244854e-15, -3.81440307243700780478e-15,
    1.04202769841288027642e-14, 4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11, 3.25260358301548823856e-11,
    -1.89749581235054123450e-11, -5.58974346219658380687e-10, -3.83538038596423702205e-9, -2.63146884688951950684e-8,
    -2.51223623787020892529e-7, -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
    7.78576235018280120474e-1,
)  # fmt: skip


def _chbevl(y, coefficients):
    """Cephes' Chebyshev series sum at ``y`` (Clenshaw's recurrence)."""
    b0, b1, b2 = np.full(y.shape, coefficients[0]), np.zeros_like(y), np.zeros_like(y)
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = y * b1 - b2 + c
    return 0.5 * (b0 - b2)


def _scaled_bessel(x, near, far, times_x):
    """exp(-|x|) I(|x|) from the Chebyshev series on [0, 8] (times |x| for I1) and on (8, inf) (over sqrt|x|)."""
    t = np.abs(x)
    inner = np.minimum(t, 8.0)
    outer = np.maximum(t, 8.0)
    low = _chbevl(inner / 2 - 2, near) * (inner if times_x else 1.0)
    high = _chbevl(32 / outer - 2, far) / np.sqrt(outer)
    return np.where(t <= 8, low, high)


def _i0e64(x):
    return _scaled_bessel(x, _I0E_A, _I0E_B, False)


def _i1e64(x):
    return np.copysign(_scaled_bessel(x, _I1E_A, _I1E_B, True), x)


def _i064(x):
    return np.exp(np.abs(x)) * _i0e64(x)


def _i164(x):
    return np.exp(np.abs(x)) * _i1e64(x)


_i0, _i0e, _i1, _i1e = (_in_float64(k) for k in (_i064, _i0e64, _i164, _i1e64))
_TINY = np.finfo(np.float64).eps  # torch's threshold for i1's and i1e's gradient at 0 (the limit 1/2 there)


def _i1_vjp(g, ans, input):
    # torch: I1'(x) = I0(x) - I1(x) / x, 1/2 where |x| <= eps
    safe = np.where(np.abs(input) > _TINY, input, 1.0)
    return g * np.where(np.abs(input) > _TINY, _on(i0, _i0, safe) - ans / safe, 0.5)


def _i1e_vjp(g, ans, input):
    # torch: i1e'(x) = i0e(x) - i1e(x) (sgn(x) + 1 / x), 1/2 where |x| <= eps
    safe = np.where(np.abs(input) > _TINY, input, 1.0)
    slope = _on(i0e, _i0e, safe) - ans * (np.sign(safe) + 1 / safe)
    return g * np.where(np.abs(input) > _TINY, slope, 0.5)


# -- erfcx, ndtr, log_ndtr, ndtri ------------------------------------------------------------------------------
def _exp_square(x):
    """exp(x^2) as exp(h^2) exp((x - h)(x + h)) with h = x rounded to 1/16 (h^2 exact): x * x itself rounds, and
    exp turns that rounding (relative 1e-16 x^2) into a relative error."""
    h = np.where(np.isfinite(x), np.trunc(x * 16) / 16, 0.0)  # +-inf: exp(inf) = inf
    return np.exp(h * h) * np.exp((x - h) * (x + h))


def _erfcx_positive(x):
    """erfc(x) exp(x^2) for x > 0.46875: Cody's ratios without their exp(-x^2) factor."""
    middle = np.minimum(x, 4.0)
    large = np.maximum(x, 4.0)
    inv_sq = 1 / (large * large)
    far = (_INV_SQRT_PI - inv_sq * _cody_ratio(inv_sq, _ERFC_P, _ERFC_Q)) / large
    return np.where(x <= 4, _cody_ratio(middle, _ERFC_C, _ERFC_D), far)


def _erfcx64(x):
    small = np.abs(x) <= 0.46875
    return _pieces(
        x,
        (
            (small, lambda v: _exp_square(v) * (1 - v * _cody_ratio(v * v, _ERF_A, _ERF_B))),
            (x > 0.46875, _erfcx_positive),
            (x < -0.46875, lambda v: 2 * _exp_square(v) - _erfcx_positive(-v)),
        ),
    )


_erfcx = _in_float64(_erfcx64)


def _erfc_signed(t):
    """erfc(t) for any float64 t."""
    tail = _erfc64(np.abs(t))
    return np.where(t < 0, 2 - tail, tail)


def _log_ndtr64(x):
    return _pieces(
        x,
        (
            (x < -1, lambda v: np.log(_erfcx64(-v * _SQRT_HALF) / 2) - (v * _SQRT_HALF) ** 2),
            (x >= -1, lambda v: np.log1p(-_erfc_signed(v * _SQRT_HALF) / 2)),
        ),
    )


_ndtr = _in_float64(_normal_cdf64)
_log_ndtr = _in_float64(_log_ndtr64)

_NDTRI_P0 = (-5.99633501014107895267e1, 9.80010754185999661536e1, -5.66762857469070293439e1,
             1.39312609387279679503e1, -1.23916583867381258016e0)  # fmt: skip
_NDTRI_Q0 = (1.0, 1.95448858338141759834e0, 4.67627912898881538453e0, 8.63602421390890590575e1,
             -2.25462687854119370527e2, 2.00260212380060660359e2, -8.20372256168333339912e1,
             1.59056225126211695515e1, -1.18331621121330003142e0)  # fmt: skip
_NDTRI_P1 = (4.05544892305962419923e0, 3.15251094599893866154e1, 5.71628192246421288162e1,
             4.40805073893200834700e1, 1.46849561928858024014e1, 2.18663306850790267539e0,
             -1.40256079171354495875e-1, -3.50424626827848203418e-2, -8.57456785154685413611e-4)  # fmt: skip
_NDTRI_Q1 = (1.0, 1.57799883256466749731e1, 4.53907635128879210584e1, 4.13172038254672030440e1,
             1.50425385692907503408e1, 2.50464946208309415979e0, -1.42182922854787788574e-1,
             -3.80806407691578277194e-2, -9.33259480895457427372e-4)  # fmt: skip
_NDTRI_P2 = (3.23774891776946035970e0, 6.91522889068984211695e0, 3.93881025292474443415e0,
             1.33303460815807542389e0, 2.01485389549179081538e-1, 1.23716634817820021358e-2,
             3.01581553508235416007e-4, 2.65806974686737550832e-6, 6.23974539184983293730e-9)  # fmt: skip
_NDTRI_Q2 = (1.0, 6.02427039364742014255e0, 3.67983563856160859403e0, 1.37702099489081330271e0,
             2.16236993594496635890e-1, 1.34204006088543189037e-2, 3.28014464682127739104e-4,
             2.89247864745380683936e-6, 6.79019408009981274425e-9)  # fmt: skip
_EXP_M2 = 0.13533528323661269189  # exp(-2)


def _ndtri_central(y):
    y = y - 0.5
    y2 = y * y
    return (y + y * (y2 * _polevl(y2, _NDTRI_P0) / _polevl(y2, _NDTRI_Q0))) * _SQRT_2PI


def _ndtri_tail(y):
    """The lower tail y <= exp(-2) (the upper one by symmetry): x = sqrt(-2 log y), then a rational correction."""
    x = np.sqrt(-2.0 * np.log(y))
    z = 1 / x
    near = z * _polevl(z, _NDTRI_P1) / _polevl(z, _NDTRI_Q1)
    far = z * _polevl(z, _NDTRI_P2) / _polevl(z, _NDTRI_Q2)
    return x - np.log(x) / x - np.where(x < 8, near, far)


def _ndtri64(y0):
    upper = y0 > 1 - _EXP_M2
    y = np.where(upper, 1 - y0, y0)
    inside = (y0 > 0) & (y0 < 1)
    central = inside & (y > _EXP_M2)
    tail = inside & ~central
    out = _pieces(y, ((central, _ndtri_central), (tail, _ndtri_tail)))
    out = np.where(tail & ~upper, -out, out)
    return np.where(y0 == 0, -np.inf, np.where(y0 == 1, np.inf, out))


_ndtri = _in_float64(_ndtri64)


# -- entr, xlog1py, sinc ---------------------------------------------------------------------------------------
@quiet
def _entr(input):
    # torch: -x log x for x > 0, 0 at 0, -inf below 0, NaN at NaN
    safe = np.where(input > 0, input, 1)
    out = np.where(input > 0, -input * np.log(safe), np.where(input == 0, 0.0, -np.inf))
    return np.where(np.isnan(input), input, out).astype(input.dtype, copy=False)


@quiet
def _xlog1py(input, other):
    if input.dtype.kind != "f" or other.dtype.kind != "f":
        raise TypeError(
            f"xlog1py: arguments 'input' and 'other' expected floating tensors, got {input.dtype}, {other.dtype}"
        )
    try:
        product = input * np.log1p(other)
    except ValueError:
        raise ValueError(
            f"xlog1py: arguments 'input' {input.dtype}{list(input.shape)}, 'other' {other.dtype}"
            f"{list(other.shape)} cannot be broadcast together (each trailing dim must match or be 1)"
        ) from None
    return np.where(np.logical_and(input == 0, np.logical_not(np.isnan(other))), 0, product)


@quiet
def _xlog1py_vjp_input(g, ans, input, other):
    # torch: g * log1p(other), also at input == 0 -- but 0 where input == 0 and other <= -1 (log1p is -inf or NaN)
    flat = np.logical_and(input == 0, other <= -1)
    return unbroadcast(np.where(flat, 0, g * np.log1p(np.where(flat, 0, other))), input.shape)


@quiet
def _xlog1py_vjp_other(g, ans, input, other):
    return unbroadcast(g * (input / (other + 1)), other.shape)


def _xlog1py_samples(rng):
    pairs = binary_samples(-2.0, 2.0, -0.8, 3.0)(rng)
    edges = Sample((np.array([0.0, 0.0, 1.5, -1.0]), np.array([-1.0, 2.0, -0.5, 3.0])), {}, "input 0 (and 0 log 0)")
    return pairs + [Sample((np.array([0.0, 2.0]), np.array([0.5, -0.5])), {}, "input 0"), edges]


@quiet
def _sinc(input):
    product = input * np.pi
    safe = np.where(input == 0, 1.0, product)
    return np.where(input == 0, 1.0, np.sin(safe) / safe).astype(input.dtype, copy=False)


# d/dp sin(p)/p = sum_{k>=1} (-1)^k 2k p^(2k-1) / (2k+1)!: its coefficients of p, p^3, ... p^17
_SINC_SLOPE = tuple((-1) ** k * 2 * k / math.factorial(2 * k + 1) for k in range(1, 10))


@quiet
def _sinc_vjp(g, ans, input):
    # (pi x cos(pi x) - sin(pi x)) / (pi x^2) for |pi x| >= 1/2; below, its Taylor series in p = pi x (exact to
    # rounding: the closed form cancels, and underflows to NaN for |x| < 1e-162). The series is a polynomial, so the
    # second order at 0 is sinc''(0) = -pi^2 / 3 (torch's double backward gives 0 at 0)
    small = np.abs(input) < 0.5 / np.pi
    safe = np.where(small, 1.0, input)
    product = safe * np.pi
    slope = (product * np.cos(product) - np.sin(product)) / (product * safe)
    p = input * np.pi
    p2 = p * p
    series = _SINC_SLOPE[-1]
    for c in reversed(_SINC_SLOPE[:-1]):
        series = series * p2 + c
    return g * np.where(small, np.pi * p * series, slope)


def _lgamma_vjp(g, ans, input):
    return g * _on(digamma, _digamma, input)


# -- declarations ----------------------------------------------------------------------------------------------
lgamma = _special(
    "lgamma",
    _lgamma,
    _lgamma_vjp,
    low=-3.0,
    high=5.0,
    samples=lambda rng: unary_samples(0.2, 6.0)(rng) + unary_samples(-2.9, -0.1)(rng)[1:3],
    edges=(1.0, 2.0, 1.0 + 1e-9, 2.0 - 1e-9, 0.5, 2.5, 12.0, 12.5, 30.0, -2.5, -0.5, 0.01),
    torch_ref=lambda torch, input: torch.lgamma(input),
    method=True,
    doc="log|Gamma(x)| elementwise.",
)
digamma = _special(
    "digamma",
    _digamma,
    lambda g, ans, input: g * _polygamma_of(1, input),
    samples=lambda rng: unary_samples(0.2, 6.0)(rng) + unary_samples(-2.9, -0.1)(rng)[1:3],
    edges=(1.0, 2.0, 0.5, 10.0, 10.5, 30.0, -2.5, -0.5, 1.4616321449683622),
    torch_ref=lambda torch, input: torch.digamma(input),
    method=True,
    doc="The digamma function (the derivative of lgamma) elementwise.",
)


def _polygamma_samples(rng):
    out = []
    for n in (1, 2, 3):
        for s in unary_samples(0.3, 5.0)(rng):
            out.append(Sample(s.inputs, {"n": n}, f"n={n} {s.label}"))
    out.append(Sample((rng.uniform(-2.9, -0.1, (4,)),), {"n": 1}, "n=1 negative"))
    out.append(Sample((rng.uniform(-2.9, -0.1, (4,)),), {"n": 2}, "n=2 negative"))
    out.append(Sample((rng.uniform(0.3, 4.0, (3,)),), {"n": 0}, "n=0 (digamma)"))
    out.append(Sample((np.array([1.0, 9.5, 10.0, 25.0, 0.2, -0.5]),), {"n": 1}, "n=1 edges"))
    return out


polygamma = defop(
    "polygamma",
    notes=case_law(_CASE_LAW, "polygamma"),
    family="special",
    inputs=("input",),
    forward=_polygamma,
    vjps=(lambda g, ans, input, n: g * _polygamma_of(n + 1, input),),
    samples=_polygamma_samples,
    check=lambda input, n: floats_only("polygamma", "input")(input),
    torch_ref=lambda torch, input, n: torch.polygamma(n, input),
    doc="The n-th derivative of digamma elementwise (n a non-negative integer).",
)
mvlgamma = defop(
    "mvlgamma",
    method=True,
    family="special",
    inputs=("input",),
    forward=_mvlgamma,
    vjps=(_mvlgamma_vjp,),
    samples=_mvlgamma_samples,
    check=_mvlgamma_check,
    torch_ref=lambda torch, input, p: torch.mvlgamma(input, p),
    doc="The log of the multivariate gamma function of dimension p elementwise (each x must be > (p - 1) / 2).",
)

_BESSEL_EDGES = (0.0, 7.999, 8.0, 8.001, -8.5, 12.0)  # the branches meet at 8
i1 = _special(
    "i1",
    _i1,
    _i1_vjp,
    low=-10.0,
    high=10.0,
    edges=_BESSEL_EDGES,
    doc="The modified Bessel function of the first kind of order 1 elementwise.",
)
i1e = _special(
    "i1e",
    _i1e,
    _i1e_vjp,
    samples=unary_samples(-10.0, 10.0, kinks=(0.0,)),
    edges=(*_BESSEL_EDGES[1:], 30.0, -50.0, 1e3),
    doc="The exponentially scaled i1: exp(-|x|) * i1(x) elementwise.",
)
i0 = _special(
    "i0",
    _i0,
    lambda g, ans, input: g * _on(i1, _i1, input),
    low=-10.0,
    high=10.0,
    edges=_BESSEL_EDGES,
    torch_ref=lambda torch, input: torch.i0(input),
    method=True,
    doc="The modified Bessel function of the first kind of order 0 elementwise.",
)
i0e = _special(
    "i0e",
    _i0e,
    lambda g, ans, input: g * (_on(i1e, _i1e, input) - np.sign(input) * ans),
    samples=unary_samples(-10.0, 10.0, kinks=(0.0,)),  # exp(-|x|): a kink at 0
    edges=(*_BESSEL_EDGES[1:], 30.0, -50.0, 1e3),
    doc="The exponentially scaled i0: exp(-|x|) * i0(x) elementwise.",
)
erfcx = _special(
    "erfcx",
    _erfcx,
    lambda g, ans, input: g * (input * ans * 2 - 2 * _INV_SQRT_PI),
    low=-3.0,
    high=6.0,
    edges=(-3.0, -0.46875, -0.3, 0.0, 0.46875, 0.47, 3.99, 4.01, 30.0, 60.0),
    doc="The scaled complementary error function exp(x ** 2) * erfc(x) elementwise.",
)
ndtr = _special(
    "ndtr",
    _ndtr,
    quiet(lambda g, ans, input: g * np.exp(input * input * -0.5) * _INV_SQRT_2PI),
    low=-4.0,
    high=4.0,
    edges=(-38.0, -8.0, -1.0, 0.0, 1.0, 8.0),
    doc="The standard normal CDF elementwise.",
)
ndtri = _special(
    "ndtri",
    _ndtri,
    quiet(lambda g, ans, input: g * np.exp(ans * ans * 0.5) * _SQRT_2PI),
    low=0.02,
    high=0.98,
    edges=(1e-3, 0.1, 0.135, 0.5, 0.865, 0.9, 0.999),
    doc="The inverse of the standard normal CDF elementwise, on [0, 1].",
)
log_ndtr = _special(
    "log_ndtr",
    _log_ndtr,
    quiet(lambda g, ans, input: g * np.exp(-(ans + input * input * 0.5)) * _INV_SQRT_2PI),
    low=-6.0,
    high=4.0,
    edges=(-30.0, -10.0, -1.0001, -1.0, -0.5, 0.0, 3.0, 8.0),
    doc="The log of the standard normal CDF elementwise, accurate far in the lower tail.",
)
entr = _special(
    "entr",
    _entr,
    quiet(lambda g, ans, input: g * -(np.log(input) + 1)),
    low=0.05,
    high=3.0,
    edges=(0.01, 0.5, 1.0, 2.0),  # 0 and subnormals: tests/ops/test_special.py (no finite differences there)
    doc="-x * log(x) elementwise: 0 at 0, -inf below 0.",
)
xlog1py = defop(
    "xlog1py",
    family="special",
    inputs=("input", "other"),
    forward=_xlog1py,
    vjps=(_xlog1py_vjp_input, _xlog1py_vjp_other),
    samples=_xlog1py_samples,
    torch_ref=lambda torch, input, other: torch.special.xlog1py(input, other),
    doc="input * log1p(other) elementwise, 0 where input is 0 (unless other is NaN).",
)
sinc = _special(
    "sinc",
    _sinc,
    _sinc_vjp,
    low=-3.0,
    high=3.0,
    edges=(0.5, -1.0, 1.0, 2.5, 0.05),  # nearer 0 torch's float32 gradient cancels (1e-3: 1.4%): test_round4_edges
    torch_ref=lambda torch, input: torch.sinc(input),
    method=True,
    doc="sin(pi * x) / (pi * x) elementwise, 1 at 0.",
)

gammaln, psi, multigammaln, expit = lgamma, digamma, mvlgamma, sigmoid  # torch.special's aliases


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_entr(g, rec, x):
    """-x log x for x > 0, 0 at 0, -inf below, NaN at NaN, as the forward."""
    dtype = float_only(rec)
    positive = g.op("Greater", x, scalar(g, 0, dtype))
    safe = g.op("Where", positive, x, scalar(g, 1, dtype))
    rest = g.op("Where", g.op("Equal", x, scalar(g, 0, dtype)), scalar(g, 0, dtype), scalar(g, -np.inf, dtype))
    out = g.op("Where", positive, g.op("Mul", g.op("Neg", x), g.op("Log", safe)), rest)
    return g.op("Where", g.op("IsNaN", x), x, out)


def _onnx_xlog1py(g, rec, input, other):
    """input * log1p(other) (elementwise's accurate log1p), 0 where input == 0 and other is not NaN."""
    dtype = rec.output.dtype
    x, y = (cast_to(g, n, s.dtype, dtype) for n, s in zip((input, other), rec.inputs, strict=True))
    product = g.op("Mul", x, log1p_graph(g, rec, y))
    zero = g.op("And", g.op("Equal", x, scalar(g, 0, dtype)), g.op("Not", g.op("IsNaN", y)))
    return g.op("Where", zero, scalar(g, 0, dtype), product)


def _onnx_sinc(g, rec, x):
    dtype = float_only(rec)
    zero = g.op("Equal", x, scalar(g, 0, dtype))
    safe = g.op("Where", zero, scalar(g, 1, dtype), g.op("Mul", x, scalar(g, np.pi, dtype)))
    return g.op("Where", zero, scalar(g, 1, dtype), g.op("Div", g.op("Sin", safe), safe))


lowering(entr, _onnx_entr)
lowering(xlog1py, _onnx_xlog1py)
lowering(sinc, _onnx_sinc)
_NO_SERIES = "ONNX has no {} op, and the forward's {} (masked branches in float64) is not written as a graph"
for _op, _how in (
    (lgamma, "Taylor / Stirling series"),
    (digamma, "recurrence and asymptotic series"),
    (polygamma, "Hurwitz zeta series"),
    (mvlgamma, "sum of lgamma series"),
    (i0, "Chebyshev expansions"),
    (i0e, "Chebyshev expansions"),
    (i1, "Chebyshev expansions"),
    (i1e, "Chebyshev expansions"),
    (erfcx, "Cody erfc approximation"),
    (ndtri, "rational approximations"),
):
    lowering(_op, not_exportable=_NO_SERIES.format(_op.name, _how))
for _op in (ndtr, log_ndtr):  # as erfc's: 1 + Erf(x / sqrt 2) loses every digit in the lower tail
    lowering(_op, not_exportable=f"ONNX has no Erfc, and 1 + Erf(x / sqrt(2)) loses every digit of {_op.name} below -5")
