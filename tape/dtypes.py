"""The dtype rules of data entering minitape, and ``array_from``, which applies them to user data.

Floating tensors are float32 or float64; float16 is a storage dtype (a tensor may hold it, only ``cast`` takes it as
input). Python floats (also in lists) become float32, as in torch; what has a dtype of its own keeps it.
"""

from __future__ import annotations

import numpy as np

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
FLOAT16 = np.dtype(np.float16)  # a storage dtype: only ops.cast takes it (tape/recording.py refuses it elsewhere)
_KINDS = {
    "c": "complex numbers",
    "O": "Python objects (a ragged list, or an int beyond int64?)",
    "U": "strings",
    "S": "bytes",
    "V": "structured records",
    "M": "datetimes",
    "m": "timedeltas",
}


def check_dtype(who: str, argument: str, array: np.ndarray, value) -> None:
    """Refuse data minitape cannot compute with: complex, object (ragged lists, huge ints), strings, bytes,
    float16/longdouble."""
    kind = array.dtype.kind
    if kind == "f" and array.dtype not in FLOATS and array.dtype != FLOAT16:
        raise TypeError(
            f"{who}: argument '{argument}' has dtype {array.dtype}; minitape computes in float32 or float64 (and "
            f"stores float16)"
        )
    if kind not in "fiub":
        raise TypeError(
            f"{who}: argument '{argument}' expected real numbers (bool, int or float), got "
            f"{_KINDS.get(kind, array.dtype)} ({type(value).__name__} of dtype {array.dtype})"
        )


def array_from(who: str, argument: str, data, dtype) -> np.ndarray:
    """A fresh array of ``data``. What has a dtype (numpy arrays and scalars, torch tensors, anything with
    ``__array__`` or ``__dlpack__``) keeps it; Python floats (also in lists) become float32, as in torch."""
    try:
        if dtype is None and hasattr(data, "__dlpack__") and not hasattr(data, "__array__"):
            data = np.from_dlpack(data)
        with np.errstate(over="ignore"):  # 7e4 as float16 is inf, silently as in torch
            array = np.asarray(data, dtype=dtype)
        if array is data or not array.flags.owndata:  # the caller's array, or a view of its memory: copy
            array = array.copy()
    except (ValueError, TypeError, BufferError) as e:  # ragged nested lists, dtypes numpy lacks (bfloat16)
        raise TypeError(
            f"{who}: argument '{argument}' expected a rectangular array of real numbers, got {type(data).__name__}: {e}"
        ) from None
    check_dtype(who, argument, array, data)
    if array.dtype == FLOAT16 and array.dtype is not FLOAT16:  # another byte order: the engine's checks use ``is``
        array = array.astype(FLOAT16)
    if dtype is None and array.dtype == np.float64 and _untyped(data):
        array = array.astype(np.float32)
    return array


def _untyped(data) -> bool:
    """True for Python numbers and (nested) lists and tuples of them: values without a dtype of their own."""
    if isinstance(data, list | tuple):
        return all(_untyped(x) for x in data)
    return isinstance(data, bool | int | float) and not isinstance(data, np.generic)
