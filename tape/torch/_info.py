"""torch's top-level functions about dtypes and values that programs call around the ops: ``finfo`` / ``iinfo``
(numpy's, which hold torch's fields), ``promote_types`` / ``can_cast`` (torch's rules: an integer with a floating
dtype gives the floating one), ``is_floating_point`` / ``is_complex``, ``equal`` / ``allclose`` (the Tensor methods,
computed by ops), ``typename``, ``Size`` (shapes are tuples), and ``compile`` (returns what it is given)."""

from __future__ import annotations

import numpy as np

from tape.tensors import Tensor

finfo = np.finfo
iinfo = np.iinfo
Size = tuple  # a tensor's shape is a tuple: torch.Size([2, 3]) == x.shape, isinstance(x.shape, torch.Size)


def promote_types(type1, type2) -> np.dtype:
    """torch.promote_types: two floating (or two integer/bool) dtypes promote as numpy's; an integer or bool with a
    floating dtype gives the floating one (numpy would widen int64 with float32 to float64; torch keeps float32)."""
    a, b = np.dtype(type1), np.dtype(type2)
    if (a.kind == "f") != (b.kind == "f"):
        return a if a.kind == "f" else b
    return np.promote_types(a, b)


def can_cast(from_, to) -> bool:
    """torch.can_cast: whether torch's casting rules allow it implicitly (no float to integer, no number to bool)."""
    return bool(np.can_cast(np.dtype(from_), np.dtype(to), casting="same_kind"))


def is_floating_point(input: Tensor) -> bool:  # noqa: A002  -- torch's parameter name
    return input.is_floating_point()


def is_complex(input: Tensor) -> bool:  # noqa: A002
    return False


def equal(input: Tensor, other: Tensor) -> bool:  # noqa: A002
    return input.equal(other)


def allclose(input: Tensor, other, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> bool:  # noqa: A002
    return input.allclose(other, rtol=rtol, atol=atol, equal_nan=equal_nan)


def typename(obj) -> str:
    """torch.typename: a tensor's legacy type name ('torch.FloatTensor'), else the object's qualified type name."""
    if isinstance(obj, Tensor):
        return obj.type()
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def compile(model=None, **options):  # noqa: A001  -- torch's name
    """torch.compile: ``model`` (a module or function) itself, also as ``@torch.compile(...)``. torch's contract is
    that compiling changes no result, so running the model uncompiled keeps it; minitape compiles a whole training
    step instead, forward and backward: ``tape.compile(step_fn, params)`` (docs/compile.md)."""
    return (lambda m: m) if model is None else model
