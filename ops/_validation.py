"""Argument checks shared by the op library: each error names the op, the argument, expected and got."""

import numpy as np

__all__ = ["normalize_dim", "normalize_dims", "require", "require_float", "require_integer"]


def require(condition: bool, op: str, argument: str, expected: str, got) -> None:
    if not condition:
        raise ValueError(f"{op}: argument '{argument}' expected {expected}, got {got}")


def normalize_dim(op: str, dim, ndim: int, argument: str = "dim") -> int:
    """``dim`` as a non-negative axis of an ``ndim``-dimensional input (negative dims count from the end)."""
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer):
        raise TypeError(f"{op}: argument '{argument}' expected an int, got {type(dim).__name__} {dim!r}")
    low, high = (-max(ndim, 1), max(ndim, 1) - 1)
    if not low <= dim <= high:
        raise ValueError(
            f"{op}: argument '{argument}' expected a dim in [{low}, {high}] for a {ndim}-D input, got {dim}"
        )
    return int(dim) % max(ndim, 1)


def normalize_dims(op: str, dim, ndim: int, argument: str = "dim") -> tuple:
    """``dim`` (None, an int or a sequence of ints) as a sorted tuple of distinct non-negative axes."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int | np.integer):
        dims = (dim,)
    elif isinstance(dim, tuple | list):
        dims = tuple(dim)
    else:
        raise TypeError(
            f"{op}: argument '{argument}' expected None, an int or a tuple of ints, got {type(dim).__name__} {dim!r}"
        )
    axes = tuple(sorted(normalize_dim(op, d, ndim, argument) for d in dims))
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: argument '{argument}' repeats a dim: {dim}")
    if ndim == 0:
        return ()
    return axes


def require_float(op: str, argument: str, array) -> None:
    if array is not None and array.dtype.kind != "f":
        raise TypeError(f"{op}: argument '{argument}' expected a floating tensor, got dtype {array.dtype}")


def require_integer(op: str, argument: str, array) -> None:
    if array is not None and array.dtype.kind not in "iu":
        raise TypeError(f"{op}: argument '{argument}' expected an integer tensor, got dtype {array.dtype}")
