"""Argument checks shared by the op library (each error names the op, the argument, expected and got), and the
torch reference of an op that is ``torch.nn.functional``'s own. ``require``, ``integer``, ``ints`` and
``require_bool`` are tape/checks.py's, the engine core's too: one wording for every layer."""

import os
import sys
import warnings
from types import FrameType

import numpy as np

from tape.checks import integer, ints, require, require_bool

__all__ = [
    "batch_dims_or_fail",
    "broadcast_or_fail",
    "floats_only",
    "functional",
    "integer",
    "ints",
    "normalize_dim",
    "normalize_dims",
    "real",
    "require",
    "require_float",
    "require_integer",
    "require_indices",
    "require_dtype_of_input",
    "require_a_float",
    "require_bool",
    "one_of",
    "fill_value",
]


def broadcast_or_fail(op: str, argument: str, shapes, expected: str, got, to: tuple | None = None) -> tuple:
    """The shape ``shapes`` broadcast together to -- with ``to``, it must be ``to`` itself (the others broadcast
    to it one way) -- else the one refusal of shapes that do not broadcast, naming ``argument``."""
    try:
        shape: tuple = np.broadcast_shapes(*shapes)
        fits = to is None or shape == to
    except ValueError:
        shape, fits = (), False
    require(fits, op, argument, expected, got)
    return shape


def batch_dims_or_fail(op: str, argument: str, shape: tuple, batch: tuple, first: str, first_batch: tuple) -> tuple:
    """The batch dims ``batch`` of argument ``argument`` (of shape ``shape``) broadcast with those of ``first``
    (``first_batch``), else the one refusal of the matrix ops' batch dims; returns the broadcast batch shape."""
    return broadcast_or_fail(
        op, argument, (first_batch, batch), f"batch dims broadcastable with {first}'s {first_batch}", f"shape {shape}"
    )


def one_of(op: str, argument: str, value, choices: tuple, expected: str | None = None):
    """``value`` when it is one of ``choices`` (strings, numbers, None), else the refusal naming ``argument``. Only a
    value of those kinds is compared, so an array is refused by name, not by numpy's ambiguous truth value."""
    kind = isinstance(value, str | int | float | np.integer | np.floating | type(None)) and not isinstance(value, bool)
    if kind and value in choices:
        return value
    raise ValueError(f"{op}: argument '{argument}' expected {expected or f'one of {choices}'}, got {value!r}")


def real(op: str, argument: str, value, expected: str = "a real number", hint: str = "") -> float:
    """A number attribute as a Python float (a weak scalar: it keeps float32 arrays float32); bools are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{op}: argument '{argument}' expected {expected}, got {type(value).__name__} {value!r}{hint}")
    return float(value)


def normalize_dim(op: str, dim, ndim: int, argument: str = "dim") -> int:
    """``dim`` as a non-negative axis of an ``ndim``-dimensional input (negative dims count from the end)."""
    integer(op, argument, dim)
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
    """The one "float inputs only" refusal: ``array`` (None: an absent optional tensor) must be floating."""
    if array is not None and array.dtype.kind != "f":
        raise TypeError(
            f"{op}: argument '{argument}' expected a floating tensor (float32 or float64), got dtype {array.dtype}; "
            f"convert it explicitly with {argument}.float() or {argument}.double() (minitape never casts silently)"
        )


def floats_only(op: str, argument: str = "x"):
    """The ``check=`` of an op defined only on floats: its first tensor parameter (named ``argument``) must be
    floating. Declared to pass for floating inputs, so the engine does not even call it for them."""

    def check(x, *rest, **attrs):
        require_float(op, argument, x)

    check.passes_floats = True  # type: ignore[attr-defined]
    return check


def require_integer(op: str, argument: str, array) -> None:
    """The one "integer indices only" refusal (indices, class targets, positions); names torch's ``.long()``."""
    if array is not None and array.dtype.kind not in "iu":
        raise TypeError(
            f"{op}: argument '{argument}' expected an integer tensor, got dtype {array.dtype}; convert it with "
            f"{argument}.long() (minitape never casts silently)"
        )


def require_indices(op: str, argument: str, array, low: int, high: int, expected: str) -> None:
    """Every entry of the integer tensor ``array`` in [low, high) -- an empty one passes -- else the refusal
    says ``expected`` and the range of values got."""
    if array.size:
        least, most = int(array.min()), int(array.max())
        require(least >= low and most < high, op, argument, expected, f"values in [{least}, {most}]")


def functional(name: str):
    """The ``torch_ref=`` of an op that is ``torch.nn.functional.<name>``: the tensors in order, then the attributes."""
    return lambda torch, *tensors, **attrs: getattr(torch.nn.functional, name)(*tensors, **attrs)


def require_a_float(op: str, input, other, why: str, hint: str = "") -> None:
    """A binary op computing in floats: at least one of ``input`` and ``other`` must be floating (the result's dtype
    comes from it; ``why`` says why floats, ``hint`` adds a way out)."""
    if input.dtype.kind != "f" and other.dtype.kind != "f":
        raise TypeError(
            f"{op}: arguments 'input' ({input.dtype}) and 'other' ({other.dtype}) are both integer/bool; {why} and "
            f"minitape never invents a float dtype: convert one to float32 or float64{hint}"
        )


def require_dtype_of_input(op: str, argument: str, array, input) -> None:
    """``array`` (the values an op writes into, or joins with, ``input``) must have input's dtype: no silent cast."""
    if array.dtype != input.dtype:
        raise TypeError(
            f"{op}: argument '{argument}' expected dtype {input.dtype} (that of 'input'), got {array.dtype}"
        )


def implicit_dim(op: str, dim, ndim: int, warn: bool = False) -> int:
    """``dim``, or torch's implicit choice when it is None (dim 0 for 0-, 1- and 3-D input, else 1), with torch's
    UserWarning when ``warn`` (the forward; the rule and the check resolve it again quietly)."""
    if dim is not None:
        return dim
    chosen = 0 if ndim in (0, 1, 3) else 1
    if warn:
        warnings.warn(
            f"Implicit dimension choice for {op} has been deprecated. Change the call to include dim=X as an "
            f"argument (torch's rule chose dim={chosen} for this {ndim}-D input).",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    return chosen


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued by its caller point at the first frame outside minitape."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_LIBRARY):
        frame, level = frame.f_back, level + 1
    return level


_LIBRARY = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), d, "") for d in ("ops", "tape")
)


def fill_value(op: str, input, value) -> None:
    """masked_fill's and index_fill's ``value``: a number or a 0-D tensor (torch's), representable in an integer
    ``input``'s dtype (a float is truncated, as torch's; NaN, inf and overflow refused, as torch's)."""
    if np.ndim(value) != 0 or np.asarray(value).dtype.kind not in "biuf":
        raise TypeError(f"{op}: argument 'value' expected a number or a 0-D tensor, got shape {np.shape(value)}")
    if input.dtype.kind in "iu" and np.asarray(value).dtype.kind == "f":
        v = float(value)
        info = np.iinfo(input.dtype)
        if not (np.isfinite(v) and info.min <= v <= info.max):
            raise RuntimeError(f"{op}: value {v} cannot be converted to type {input.dtype} without overflow")
