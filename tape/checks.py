"""The argument checks every layer shares, each refusal worded once: it names the function or op, the argument,
what was expected and what was got. numpy only, so the engine core (creation, random, Tensor's methods), the op
library (ops/_validation.py re-exports these) and the training stack all import it."""

import numpy as np

__all__ = ["require", "integer", "ints", "require_bool"]


def require(condition: bool, where: str, argument: str, expected: str, got) -> None:
    if not condition:
        raise ValueError(f"{where}: argument '{argument}' expected {expected}, got {got}")


def _scalar(value):
    """A 0-D integer array as its number (torch takes a 0-D integer tensor where it takes an int)."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
        return value[()]
    return value


def integer(where: str, argument: str, value, at_least: int | None = None) -> int:
    """An int argument as a Python int (a 0-D integer array counts): bools and non-integers are refused
    (TypeError), and with ``at_least`` an int below it (ValueError)."""
    value = _scalar(value)
    expected = "an int" if at_least is None else f"an int >= {at_least}"
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{where}: argument '{argument}' expected {expected}, got {type(value).__name__} {value!r}")
    if at_least is not None and value < at_least:
        raise ValueError(f"{where}: argument '{argument}' expected {expected}, got {value}")
    return int(value)


def ints(where: str, argument: str, value, at_least: int | None = None) -> tuple:
    """``value`` (an int or a sequence of ints; 0-D or 1-D integer arrays too) as a tuple of Python ints, each >=
    ``at_least`` when given; the refusal of an entry shows the whole sequence."""
    value = _scalar(value)
    if isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "iu":
        value = tuple(value.tolist())
    items = (value,) if isinstance(value, int | np.integer) else value
    try:
        items = tuple(items)
    except TypeError:
        items = None
    if items is None or isinstance(value, str | bytes):
        raise TypeError(
            f"{where}: argument '{argument}' expected an int or a sequence of ints, got {type(value).__name__} "
            f"{value!r}"
        )
    expected = "ints" if at_least is None else f"ints >= {at_least}"
    for v in items:
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise TypeError(
                f"{where}: argument '{argument}' expected {expected}, got {type(v).__name__} {v!r} in {value!r}"
            )
        require(at_least is None or bool(v >= at_least), where, argument, expected, f"{v} in {value!r}")
    return tuple(int(v) for v in items)


def require_bool(where: str, argument: str, value) -> None:
    """A flag: a Python or numpy bool (an int or a string is refused, not read as true or false)."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{where}: argument '{argument}' expected a bool, got {type(value).__name__} {value!r}")
