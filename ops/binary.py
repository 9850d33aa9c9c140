"""Binary ops with numpy broadcasting; every rule sums its gradient back with ``unbroadcast``.

Semantics, as in PyTorch 2.13:
- Operands that cannot broadcast (or a dtype numpy has no loop for) raise ValueError/TypeError naming the
  op and both arguments' shapes and dtypes.
- A float tensor combined with an integer or bool one computes in the float's dtype (float32 stays
  float32); two integer tensors stay integer -- except for div, which refuses them: true division would
  invent a float dtype, and minitape never casts silently.
- pow's gradients at a zero base follow torch: d/da = 0 where b == 0, d/db = 0 where a == 0 and b >= 0.
- maximum / minimum split the gradient evenly where a == b (half to each operand), as torch does.
- where(condition, input, other) takes a bool condition, which is not differentiable.
- Comparisons return bool tensors and are not differentiable.
"""

__all__ = ['add', 'sub', 'mul', 'div', 'pow', 'maximum', 'minimum', 'where', 'eq', 'ne', 'lt', 'le', 'gt', 'ge']

import numpy as np

from tape.broadcast import unbroadcast
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop

from ._samples import binary_samples, comparison_samples, uniform, where_samples


def _matched(a, b):
    """``a, b`` with an integer/bool operand cast to the other operand's float dtype."""
    if a.dtype.kind == "f":
        if b.dtype.kind != "f":
            return a, b.astype(a.dtype)
    elif b.dtype.kind == "f":
        return a.astype(b.dtype), b
    return a, b


def _like(array, g):
    """``array`` in the gradient's dtype (it differs only when an integer tensor met a float one)."""
    return array if array.dtype == g.dtype else array.astype(g.dtype)


def _operand_error(op, names, arrays, error):
    described = ", ".join(f"'{n}' {a.dtype}{list(a.shape)}" for n, a in zip(names, arrays))
    if isinstance(error, ValueError) and "broadcast" in str(error):
        return ValueError(f"{op}: arguments {described} cannot be broadcast together (each trailing dim must "
                          f"match or be 1)")
    kind = ValueError if isinstance(error, ValueError) else TypeError
    return kind(f"{op}: cannot compute it for arguments {described}: {error}")


def _broadcasting(name, ufunc, match_floats=True):
    """The forward ``ufunc(a, b)``, with mixed int/float operands matched and numpy's errors named."""
    def forward(a, b):
        if match_floats and a.dtype != b.dtype:
            a, b = _matched(a, b)
        try:
            return ufunc(a, b)
        except (ValueError, TypeError) as e:
            raise _operand_error(name, ("a", "b"), (a, b), e) from None
    forward.__name__ = f"_{name}"
    return forward


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
              lambda g, ans, a, b: unbroadcast(g * _like(b, g), a.shape),
              lambda g, ans, a, b: unbroadcast(g * _like(a, g), b.shape))

_true_divide = _broadcasting("div", np.divide)


def _div(a, b):
    if a.dtype.kind != "f" and b.dtype.kind != "f":
        raise TypeError(f"div: arguments 'a' ({a.dtype}) and 'b' ({b.dtype}) are both integer/bool; true division "
                        f"gives floats and minitape never invents a float dtype: convert one to float32 or float64")
    return _true_divide(a, b)


div = _binary("div", _div,
              lambda g, ans, a, b: unbroadcast(g / _like(b, g), a.shape),
              lambda g, ans, a, b: unbroadcast(-g * ans / _like(b, g), b.shape),
              samples=binary_samples(-2.0, 2.0, 0.5, 2.0))


def _pow_vjp_a(g, ans, a, b):
    if b.ndim == 0:  # a scalar exponent (x ** 2, x ** 0.5): the common case, no masks needed
        e = float(b)
        if e == 0:
            return np.zeros(a.shape, g.dtype)
        if e == 2:
            return unbroadcast(g * a * 2, a.shape)
        return unbroadcast(g * np.power(a, e - 1) * e, a.shape)
    b = _like(b, g)
    with np.errstate(divide="ignore", invalid="ignore"):  # entries the mask below discards
        grad = g * b * np.power(a, b - 1)
    return unbroadcast(np.where(b == 0, 0, grad), a.shape)


def _pow_vjp_b(g, ans, a, b):
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0) where the mask discards it; log(a < 0) is NaN
        grad = g * ans * np.log(_like(a, g))
    return unbroadcast(np.where((a == 0) & (b >= 0), 0, grad), b.shape)


def _pow_samples(rng):
    out = binary_samples(0.5, 2.0, -2.0, 2.0)(rng)
    for e in (2.0, 3.0, 0.5, -1.5):  # a float exponent, as ``x ** 2.0`` makes it: the base's fast path
        out.append(Sample((uniform(rng, (2, 3), 0.5, 2.0), np.array(e)), {}, f"x ** {e}"))
    for e in (2, 3, 0):  # an integer exponent: negative bases are fine, and b takes no gradient
        out.append(Sample((uniform(rng, (2, 3), -2.0, 2.0), np.array(e)), {}, f"x ** int {e}"))
    out.append(Sample((np.array([0.0, 0.0, 1.5]), np.array([2.0, 3.0, 0.0])), {},
                      "zero base or exponent: torch's zero gradients"))
    return out


pow = _binary("pow", _broadcasting("pow", np.power), _pow_vjp_a, _pow_vjp_b, samples=_pow_samples)


# -- maximum / minimum: ties split the gradient evenly ---------------------------------------------------------
def _share(g, wins, ties):
    return np.where(ties, g * 0.5, g * wins)


maximum = _binary("maximum", _broadcasting("maximum", np.maximum),
                  lambda g, ans, a, b: unbroadcast(_share(g, a > b, a == b), a.shape),
                  lambda g, ans, a, b: unbroadcast(_share(g, b > a, a == b), b.shape))
minimum = _binary("minimum", _broadcasting("minimum", np.minimum),
                  lambda g, ans, a, b: unbroadcast(_share(g, a < b, a == b), a.shape),
                  lambda g, ans, a, b: unbroadcast(_share(g, b < a, a == b), b.shape))


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
    return _binary(name, _broadcasting(name, ufunc, match_floats=False), NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE,
                   samples=comparison_samples())


eq = _comparison("eq", np.equal)
ne = _comparison("ne", np.not_equal)
lt = _comparison("lt", np.less)
le = _comparison("le", np.less_equal)
gt = _comparison("gt", np.greater)
ge = _comparison("ge", np.greater_equal)
