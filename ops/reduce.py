"""Reductions over ``dim`` (an int, a tuple or None) with ``keepdim``, as in torch."""

__all__ = ['sum', 'mean', 'restore_dims']

import numpy as np

from tape.registry import defop

from .samples import reduction_samples
from .validation import normalize_dims


def restore_dims(g: np.ndarray, x: np.ndarray, dim, keepdim: bool, op: str) -> np.ndarray:
    """Reinsert the reduced axes of ``g`` (when keepdim was False) so it broadcasts against ``x``."""
    if keepdim:
        return g
    return np.expand_dims(g, normalize_dims(op, dim, x.ndim))


def _torch_reduce(name):
    def ref(torch, x, dim=None, keepdim=False, **attrs):
        if dim is None:
            dim = tuple(range(x.ndim))
        return getattr(torch, name)(x, dim=dim, keepdim=keepdim, **attrs)
    return ref


def _sum(x, dim=None, keepdim=False):
    return np.sum(x, axis=normalize_dims("sum", dim, x.ndim), keepdims=keepdim)


def _sum_vjp(g, ans, x, dim=None, keepdim=False):
    return np.broadcast_to(restore_dims(g, x, dim, keepdim, "sum"), x.shape)


sum = defop("sum", family="reduce", inputs=("x",), forward=_sum, vjps=(_sum_vjp,),
            samples=reduction_samples(), torch_ref=_torch_reduce("sum"))


def _count(x, dim):
    return int(np.prod([x.shape[a] for a in normalize_dims("mean", dim, x.ndim)], dtype=np.int64))


def _mean(x, dim=None, keepdim=False):
    return np.mean(x, axis=normalize_dims("mean", dim, x.ndim), keepdims=keepdim)


def _mean_vjp(g, ans, x, dim=None, keepdim=False):
    return np.broadcast_to(restore_dims(g, x, dim, keepdim, "mean") / _count(x, dim), x.shape)


mean = defop("mean", family="reduce", inputs=("x",), forward=_mean, vjps=(_mean_vjp,),
             samples=reduction_samples(), torch_ref=_torch_reduce("mean"))
