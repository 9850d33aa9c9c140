"""Broadcasting's reverse, written once: sum a gradient back down to the shape of the input it is for."""

import numpy as np

__all__ = ["unbroadcast"]


def unbroadcast(grad: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum ``grad`` over the axes numpy broadcasting added or stretched to reach ``grad.shape`` from ``shape``."""
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    axes = tuple(range(extra)) + tuple(extra + i for i, n in enumerate(shape) if n == 1 and grad.shape[extra + i] != 1)
    summed = np.sum(grad, axis=axes, keepdims=True) if axes else grad
    return np.reshape(summed, shape)  # numpy functions, not methods: the rule also runs on Tensors
