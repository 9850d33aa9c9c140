"""Binary ops with numpy broadcasting; every rule sums its gradient back with ``unbroadcast``.

Semantics, as in PyTorch 2.13:
- Operands that cannot broadcast (or a dtype numpy has no loop for) raise ValueError/TypeError naming the
  op and both arguments' shapes and dtypes.
- A float tensor combined with an integer or bool one computes in the float's dtype (float32 stays
  float32); two integer tensors stay integer -- except for div, which refuses them: true division would
  invent a float dtype, and minitape never casts silently.
- pow's gradients at a zero base follow torch: d/da = 0 where b == 0, d/db = 0 where a == 0 and b >= 0.
  Its second order is exact where torch's is not: finite at a zero base (torch: NaN), and d(d/da)/db =
  1/a at b == 0 (torch: 0, as its backward masks every b == 0).
- maximum / minimum split the gradient evenly where a == b (half to each operand), as torch does; where
  either operand is NaN both take the whole gradient (torch's too).
- Arithmetic is quiet about inf/NaN results (overflow, inf - inf, 0 / 0), as torch is: no numpy
  RuntimeWarning. ``quiet`` (shared with elementwise and reduce) switches numpy's warnings off for a call.
- where(condition, input, other) takes a bool condition, which is not differentiable.
- Comparisons return bool tensors and are not differentiable.
"""

__all__ = ['add', 'sub', 'mul', 'div', 'pow', 'maximum', 'minimum', 'where', 'eq', 'ne', 'lt', 'le', 'gt', 'ge']

import functools

import numpy as np

from tape.broadcast import unbroadcast
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop

from ._samples import binary_samples, comparison_samples, uniform, where_samples

# -- floating-point warnings -------------------------------------------------------------------------------
try:  # numpy >= 2 keeps its floating-point error state in this context variable (np.errstate sets it)
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
except ImportError:  # pragma: no cover -- another numpy: the public (slower) np.errstate decorator
    _extobj_contextvar = None


def quiet(fn):
    """``fn`` with numpy's floating-point warnings off: overflow, 0/0, log(0) give inf/NaN silently, as torch
    does. For the ops' forwards and rules where such values can arise (elementwise and reduce use it too).

    Setting numpy's context variable directly costs ~0.6 us a call against ~2 us for entering ``np.errstate``
    (which matters for small tensors on the hot path); it is what np.errstate does, and thread- and
    asyncio-safe like it. Other numpy versions use np.errstate's decorator."""
    if _extobj_contextvar is None:
        return functools.wraps(fn)(np.errstate(all="ignore")(fn))
    ignore = _make_extobj(all="ignore")
    setting, resetting = _extobj_contextvar.set, _extobj_contextvar.reset

    @functools.wraps(fn)
    def run(*args, **kwargs):
        token = setting(ignore)
        try:
            return fn(*args, **kwargs)
        finally:
            resetting(token)

    return run


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
        return ValueError(f"{op}: arguments {described} cannot be broadcast together (each trailing dim must "
                          f"match or be 1)")
    kind = ValueError if isinstance(error, ValueError) else TypeError
    return kind(f"{op}: cannot compute it for arguments {described}: {error}")


def _broadcasting(name, ufunc, match_floats=True, arithmetic=True):
    """The forward ``ufunc(a, b)``, with mixed int/float operands matched and numpy's errors named;
    ``arithmetic`` is quiet about inf/NaN results (maximum, minimum and comparisons never warn)."""
    def forward(a, b):
        if match_floats and a.dtype != b.dtype:
            a, b = _matched(a, b)
        try:
            return ufunc(a, b)
        except (ValueError, TypeError) as e:
            raise _operand_error(name, ("a", "b"), (a, b), e) from None
    forward.__name__ = f"_{name}"
    return quiet(forward) if arithmetic else forward


def _binary(name, forward, vjp_a, vjp_b, *, samples=None, torch_ref=None, **declaration):
    return defop(name, family="binary", inputs=("a", "b"), forward=forward, vjps=(vjp_a, vjp_b),
                 samples=samples or binary_samples(),
                 torch_ref=torch_ref or (lambda torch, a, b: getattr(torch, name)(a, b)), **declaration)


# -- arithmetic ------------------------------------------------------------------------------------------------
add = _binary("add", _broadcasting("add", np.add),
              lambda g, ans, a, b: unbroadcast(g, a.shape),
              lambda g, ans, a, b: unbroadcast(g, b.shape))
sub = _binary("sub", _broadcasting("sub", np.subtract),
              lambda g, ans, a, b: unbroadcast(g, a.shape),
              lambda g, ans, a, b: unbroadcast(np.negative(g), b.shape))
mul = _binary("mul", _broadcasting("mul", np.multiply),
              quiet(lambda g, ans, a, b: unbroadcast(g * _like(b, g), a.shape)),
              quiet(lambda g, ans, a, b: unbroadcast(g * _like(a, g), b.shape)))

_true_divide = _broadcasting("div", np.divide)


def _div(a, b):
    if a.dtype.kind != "f" and b.dtype.kind != "f":
        raise TypeError(f"div: arguments 'a' ({a.dtype}) and 'b' ({b.dtype}) are both integer/bool; true division "
                        f"gives floats and minitape never invents a float dtype: convert one to float32 or float64")
    return _true_divide(a, b)


div = _binary("div", _div,
              quiet(lambda g, ans, a, b: unbroadcast(g / _like(b, g), a.shape)),
              quiet(lambda g, ans, a, b: unbroadcast(-g * ans / _like(b, g), b.shape)),
              samples=binary_samples(-2.0, 2.0, 0.5, 2.0))


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
    if not undefined.any():
        return unbroadcast(g * slope, a.shape)
    slope = b * np.power(np.where(undefined, 1, a), b - 1)
    return unbroadcast(np.where(undefined, 0, g * slope), a.shape)


@quiet
def _pow_vjp_b(g, ans, a, b):
    zero = np.logical_and(a == 0, b >= 0)  # torch: no gradient there (a ** b is flat in b, or undefined)
    if zero.any():  # log(1) instead of log(0) there: no -inf, so no NaN in the second order either
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
    # float exponent and at 0 ** 0 (where minitape's is finite; tests/test_ops_binary.py checks those)
    out.append(Sample((np.array([0.0, 0.0, 1.5]), np.array([2, 3, 0])), {}, "zero base or exponent"))
    return out


pow = _binary("pow", _broadcasting("pow", np.power), _pow_vjp_a, _pow_vjp_b, samples=_pow_samples)


# -- maximum / minimum: ties split the gradient evenly ---------------------------------------------------------
def _share(g, wins, ties):
    return np.where(ties, g * 0.5, g * wins)


# An operand takes the gradient unless it loses: a NaN on either side gives it to both, as torch does.
maximum = _binary("maximum", _broadcasting("maximum", np.maximum, arithmetic=False),
                  lambda g, ans, a, b: unbroadcast(_share(g, np.logical_not(a < b), a == b), a.shape),
                  lambda g, ans, a, b: unbroadcast(_share(g, np.logical_not(b < a), a == b), b.shape))
minimum = _binary("minimum", _broadcasting("minimum", np.minimum, arithmetic=False),
                  lambda g, ans, a, b: unbroadcast(_share(g, np.logical_not(a > b), a == b), a.shape),
                  lambda g, ans, a, b: unbroadcast(_share(g, np.logical_not(b > a), a == b), b.shape))


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


where = defop("where", family="binary", inputs=("condition", "input", "other"), forward=_where,
              vjps=(NOT_DIFFERENTIABLE,
                    lambda g, ans, condition, a, b: unbroadcast(g * condition, a.shape),
                    lambda g, ans, condition, a, b: unbroadcast(np.where(condition, 0, g), b.shape)),
              samples=where_samples(),
              torch_ref=lambda torch, condition, input, other: torch.where(condition, input, other))


# -- comparisons -----------------------------------------------------------------------------------------------
def _comparison(name, ufunc):
    # comparing float32 with an integer array is exact in numpy (both go to float64): no matching needed
    return _binary(name, _broadcasting(name, ufunc, match_floats=False, arithmetic=False), NOT_DIFFERENTIABLE,
                   NOT_DIFFERENTIABLE,
                   samples=comparison_samples())


eq = _comparison("eq", np.equal)
ne = _comparison("ne", np.not_equal)
lt = _comparison("lt", np.less)
le = _comparison("le", np.less_equal)
gt = _comparison("gt", np.greater)
ge = _comparison("ge", np.greater_equal)
