"""``tape.nn.init``: torch.nn.init's initialisers. Each one writes the parameter's values in place (``p.data = new``
under no_grad: the parameter keeps its identity, views of it see the values) and returns the parameter. Random ones
draw from ``generator=`` (a tape.Generator or numpy Generator) or ``tape.default_generator``; fan-in/fan-out
and gains are torch's (``calculate_gain``, ``_calculate_fan_in_and_fan_out``).
"""

from __future__ import annotations

import math

import numpy as np

from ..random import as_generator
from ..state import no_grad
from ..tensors import Tensor

__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "constant_",
    "zeros_",
    "ones_",
    "eye_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "trunc_normal_",
    "orthogonal_",
]


def _set(tensor: Tensor, values) -> Tensor:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"nn.init: expected a Tensor (a Parameter), got {type(tensor).__name__}")
    with no_grad():
        tensor.data = np.asarray(values, dtype=tensor.dtype).reshape(tensor.shape)
    return tensor


def calculate_gain(nonlinearity: str, param=None) -> float:
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    known = linear + ("tanh", "relu", "leaky_relu", "selu")
    raise ValueError(f"calculate_gain: argument 'nonlinearity' expected one of {known}, got {nonlinearity!r}")


def _fans(tensor: Tensor) -> tuple[int, int]:
    if tensor.ndim < 2:
        raise ValueError(f"nn.init: fan in and fan out need a tensor with at least 2 dims, got shape {tensor.shape}")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"nn.init: argument 'mode' expected 'fan_in' or 'fan_out', got {mode!r}")
    return _fans(tensor)[0 if mode == "fan_in" else 1]


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    return _set(tensor, as_generator("uniform_", generator).uniform(a, b, size=tensor.shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    return _set(tensor, mean + std * as_generator("normal_", generator).standard_normal(tensor.shape))


def constant_(tensor: Tensor, val: float) -> Tensor:
    return _set(tensor, np.full(tensor.shape, val))


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def eye_(tensor: Tensor) -> Tensor:
    if tensor.ndim != 2:
        raise ValueError(f"eye_: expected a 2-D tensor, got shape {tensor.shape}")
    return _set(tensor, np.eye(*tensor.shape))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def kaiming_uniform_(
    tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None
) -> Tensor:
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return uniform_(tensor, -math.sqrt(3.0) * std, math.sqrt(3.0) * std, generator)


def kaiming_normal_(
    tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None
) -> Tensor:
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode)), generator)


def trunc_normal_(
    tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, generator=None
) -> Tensor:
    """N(mean, std) restricted to [a, b] (absolute bounds, as torch's), by rejection: draws outside are drawn
    again, all at once, until none is left (the exact truncated distribution)."""
    if not a < b:
        raise ValueError(f"trunc_normal_: argument 'b' expected a bound above a={a}, got {b}")
    rng = as_generator("trunc_normal_", generator)
    values = mean + std * rng.standard_normal(tensor.shape)
    for _ in range(1000):
        outside = (values < a) | (values > b)
        if not outside.any():
            return _set(tensor, values)
        values[outside] = mean + std * rng.standard_normal(int(outside.sum()))
    raise ValueError(f"trunc_normal_: [a, b] = [{a}, {b}] holds almost no mass of N({mean}, {std}**2)")


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """A (semi-)orthogonal matrix from the QR decomposition of a normal draw, signs fixed as torch does."""
    if tensor.ndim < 2:
        raise ValueError(f"orthogonal_: expected a tensor with at least 2 dims, got shape {tensor.shape}")
    rows, cols = tensor.shape[0], tensor.numel() // tensor.shape[0]
    flat = as_generator("orthogonal_", generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _set(tensor, gain * q)
