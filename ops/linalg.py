"""Linear algebra: matmul (1-D, 2-D and batched with broadcasting)."""

__all__ = ['matmul']

import numpy as np

from tape.broadcast import unbroadcast
from tape.registry import Sample, defop

from .samples import uniform


def _check_matmul(a, b):
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: both arguments need at least 1 dim, got shapes {a.shape} and {b.shape}")
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a != k_b:
        raise ValueError(f"matmul: argument 'b' expected {k_a} rows to match a's last dim (a: {a.shape}), "
                         f"got shape {b.shape}")


def _as_matrices(g, a, b):
    """View 1-D operands (and the matching gradient) as matrices, as matmul itself does."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    if b.ndim == 1:
        g = g[..., None]
    if a.ndim == 1:
        g = g[..., None, :]
    return g, a2, b2


def _matmul_vjp_a(g, ans, a, b):
    g2, a2, b2 = _as_matrices(g, a, b)
    return unbroadcast(g2 @ np.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)


def _matmul_vjp_b(g, ans, a, b):
    g2, a2, b2 = _as_matrices(g, a, b)
    return unbroadcast(np.swapaxes(a2, -1, -2) @ g2, b2.shape).reshape(b.shape)


def _matmul_samples(rng):
    shapes = [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
              ((2, 3), (5, 3, 4)), ((2, 1, 2, 3), (4, 3, 2)), ((4,), (2, 4, 3)), ((2, 2, 3), (3,))]
    out = [Sample((uniform(rng, sa), uniform(rng, sb)), {}, f"{sa} @ {sb}") for sa, sb in shapes]
    out.append(Sample((uniform(rng, (3, 2)).T, uniform(rng, (4, 3)).T), {}, "non-contiguous"))
    return out


matmul = defop("matmul", family="linalg", inputs=("a", "b"), forward=np.matmul,
               vjps=(_matmul_vjp_a, _matmul_vjp_b), check=_check_matmul, samples=_matmul_samples,
               torch_ref=lambda torch, a, b: torch.matmul(a, b))
