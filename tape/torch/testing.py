"""``torch.testing``: ``assert_close`` -- every element of ``actual`` within ``atol + rtol * |expected|`` of
``expected`` (ops.isclose; NaN equal to NaN unless ``equal_nan=False``), shapes equal; defaults by dtype as torch's
(float32: rtol 1.3e-6, atol 1e-5; float64: 1e-7, 1e-7; integers and bool: exact)."""

from __future__ import annotations

import ops
from tape.tensors import Tensor, as_tensor

_TOLERANCES = {"float16": (1e-3, 1e-5), "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7)}


def assert_close(actual, expected, *, rtol=None, atol=None, equal_nan: bool = True, msg=None, **unused) -> None:
    a = actual if isinstance(actual, Tensor) else as_tensor(actual)
    e = expected if isinstance(expected, Tensor) else as_tensor(expected)
    if (rtol is None) != (atol is None):
        raise ValueError("assert_close: both 'rtol' and 'atol' must be given, or neither")
    if rtol is None:
        rtol, atol = _TOLERANCES.get(str(a.dtype), (0.0, 0.0))
    if tuple(a.shape) != tuple(e.shape):
        raise AssertionError(msg or f"The values are not close: shapes differ, {tuple(a.shape)} vs {tuple(e.shape)}")
    close = ops.isclose(a.detach(), e.detach(), rtol=rtol, atol=atol, equal_nan=equal_nan)
    if not bool(ops.all(close)):
        bad = int(ops.sum(ops.logical_not(close)))
        largest = float(ops.max(ops.abs(ops.sub(a.detach(), e.detach()))))
        raise AssertionError(
            msg
            or f"Tensor-likes are not close! Mismatched elements: {bad} / {a.numel()}; greatest absolute "
            f"difference: {largest} (rtol={rtol}, atol={atol})"
        )
