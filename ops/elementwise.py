"""Unary elementwise ops: each declared with its forward and its backward side by side."""

__all__ = ['neg', 'exp', 'log', 'tanh', 'relu']

import numpy as np

from tape.registry import defop

from .samples import unary_samples


def _unary(name, forward, vjp, *, low=-2.0, high=2.0, torch_ref=None, samples=None, **declaration):
    """Declare a one-input elementwise op; the torch reference defaults to ``torch.<name>``."""
    return defop(name, family="elementwise", inputs=("x",), forward=forward, vjps=(vjp,),
                 samples=samples or unary_samples(low, high),
                 torch_ref=torch_ref or (lambda torch, x, **attrs: getattr(torch, name)(x, **attrs)),
                 **declaration)


neg = _unary("neg", np.negative, lambda g, ans, x: -g)
exp = _unary("exp", np.exp, lambda g, ans, x: g * ans)
log = _unary("log", np.log, lambda g, ans, x: g / x, low=0.1, high=3.0)
tanh = _unary("tanh", np.tanh, lambda g, ans, x: g * (1 - ans * ans))
relu = _unary("relu", lambda x: np.maximum(x, 0), lambda g, ans, x: g * (x > 0))
