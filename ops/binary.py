"""Binary ops with numpy broadcasting; every rule sums its gradient back with ``unbroadcast``."""

__all__ = ['add', 'sub', 'mul', 'div', 'pow', 'eq', 'ne', 'lt', 'le', 'gt', 'ge']

import numpy as np

from tape.broadcast import unbroadcast
from tape.registry import NOT_DIFFERENTIABLE, defop

from .samples import binary_samples


def _binary(name, forward, vjp_a, vjp_b, *, samples=None, torch_ref=None, **declaration):
    return defop(name, family="binary", inputs=("a", "b"), forward=forward, vjps=(vjp_a, vjp_b),
                 samples=samples or binary_samples(),
                 torch_ref=torch_ref or (lambda torch, a, b: getattr(torch, name)(a, b)), **declaration)


add = _binary("add", np.add,
              lambda g, ans, a, b: unbroadcast(g, a.shape),
              lambda g, ans, a, b: unbroadcast(g, b.shape))
sub = _binary("sub", np.subtract,
              lambda g, ans, a, b: unbroadcast(g, a.shape),
              lambda g, ans, a, b: unbroadcast(-g, b.shape))
mul = _binary("mul", np.multiply,
              lambda g, ans, a, b: unbroadcast(g * b, a.shape),
              lambda g, ans, a, b: unbroadcast(g * a, b.shape))
div = _binary("div", np.divide,
              lambda g, ans, a, b: unbroadcast(g / b, a.shape),
              lambda g, ans, a, b: unbroadcast(-g * ans / b, b.shape),
              samples=binary_samples(-2.0, 2.0, 0.5, 2.0))
pow = _binary("pow", np.power,
              lambda g, ans, a, b: unbroadcast(g * b * np.power(a, b - 1), a.shape),
              lambda g, ans, a, b: unbroadcast(g * ans * np.log(a), b.shape),
              samples=binary_samples(0.5, 2.0, -2.0, 2.0))


def _comparison(name, forward):
    return _binary(name, forward, NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE)


eq = _comparison("eq", np.equal)
ne = _comparison("ne", np.not_equal)
lt = _comparison("lt", np.less)
le = _comparison("le", np.less_equal)
gt = _comparison("gt", np.greater)
ge = _comparison("ge", np.greater_equal)
