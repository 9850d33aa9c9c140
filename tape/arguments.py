"""An op call's arguments as the engine takes them: Python scalars and arrays as Tensors (shared scalar constants,
the dtype rules between an op's inputs), attributes kept (arrays frozen copies), sequence parameters flattened --
and the messages that refuse what does not fit, naming the op and the argument."""

from __future__ import annotations

import math

import numpy as np

from .dtypes import FLOAT16, FLOATS
from .errors import GradientError
from .state import needs_grad
from .tensors import Tensor, as_tensor

_SCALARS: dict = {}
F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
CONSTANTS_32: dict[float, Tensor] = {}  # the floats' own caches, keyed by value alone: ``apply`` reads them inline
CONSTANTS_64: dict[float, Tensor] = {}
_BY_VALUE = {F32: CONSTANTS_32, _F64: CONSTANTS_64}


def scalar_constant(value, dtype) -> Tensor:
    """A shared read-only constant tensor for a Python scalar (scalars recur: 0.5, 1e-5, 2.0, ...). A float meeting
    float32/float64 is keyed by its value; signed zeros and NaN (whose keys would collide or never match), ints,
    bools and other dtypes by (type, value, sign, dtype)."""
    cache: dict | None = _BY_VALUE.get(dtype) if type(value) is float and value == value and value != 0.0 else None
    if cache is None:
        cache = _SCALARS
        key = (type(value), value, math.copysign(1.0, value) if type(value) is float else 1.0, dtype)
    else:
        key = value
    t = cache.get(key)
    if t is None:
        if len(cache) > 512:
            cache.clear()
        # an int is wrapped into a narrower integer dtype (two's complement, as torch), not refused as numpy does
        array = np.asarray(value).astype(dtype) if type(value) is int else np.asarray(value, dtype=dtype)
        t = cache[key] = Tensor._wrap(array)
    return t


def coerce(op, inputs, seq_lens=()) -> list:
    """Inputs as Tensors (None kept for absent optional inputs); float dtypes must agree."""
    float_dtype = None
    for x in inputs:
        if isinstance(x, Tensor):
            dt = x._data.dtype
            if dt in FLOATS:
                if float_dtype is None:
                    float_dtype = dt
                elif dt != float_dtype:
                    mixed_dtypes(op, inputs)
    out: list[Tensor | None] = []
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor):
            out.append(x)
        elif x is None:
            if seq_lens or not op.optional[i]:
                raise TypeError(f"{op.name}: argument '{input_name(op, i, seq_lens)}' expected a Tensor, got None")
            out.append(None)
        elif float_dtype is not None and isinstance(x, np.float16 | np.float32 | np.float64):
            out.append(scalar_constant(float(x), float_dtype))  # a numpy float scalar acts as a Python float
        elif type(x) in (bool, int, float):
            if type(x) is int and not _INT64_MIN <= x <= _INT64_MAX:
                raise ValueError(
                    f"{op.name}: argument '{input_name(op, i, seq_lens)}' is the Python int {x}, "
                    f"outside int64; minitape computes in int64, float32 or float64"
                )
            if float_dtype is not None and type(x) is not bool:
                out.append(scalar_constant(x, float_dtype))
            elif type(x) is int and (int_dtype := _integer_dtype(inputs)) is not None:
                out.append(scalar_constant(x, int_dtype))  # torch: the tensors' integer dtype, wrapped
            else:
                out.append(as_tensor(x))
        else:
            try:
                t = as_tensor(x)
            except (TypeError, ValueError) as e:
                raise TypeError(
                    f"{op.name}: argument '{input_name(op, i, seq_lens)}' expected a Tensor or a real "
                    f"array-like, got {type(x).__name__}: {e}"
                ) from None
            if t._data.dtype in FLOATS and float_dtype is not None and t._data.dtype != float_dtype:
                mixed_dtypes(op, inputs)
            out.append(t)
    return out


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _integer_dtype(inputs):
    """The promoted dtype of the integer tensors and arrays among ``inputs`` (None without any): what a Python int
    operand takes, as torch's weak scalars do (int8 tensor + 300 is int8, 300 wrapped to 44)."""
    dtypes = [x.dtype for x in inputs if isinstance(x, Tensor | np.ndarray) and x.dtype.kind in "iu"]
    return np.result_type(*dtypes) if dtypes else None


def not_differentiable(op, name, why="the op is not differentiable with respect to it (declared NOT_DIFFERENTIABLE)"):
    raise TypeError(
        f"{op.name}: argument '{name}' requires grad, but {why}; pass it detached (x.detach()) -- minitape will not "
        f"drop a gradient silently"
    )


def storage_only(op, arrays, seq_lens):
    """float16 is a storage dtype: an op other than cast refuses it, naming itself and the argument."""
    i = next(i for i, a in enumerate(arrays) if a is not None and a.dtype is FLOAT16)
    raise TypeError(
        f"{op.name}: argument '{input_name(op, i, seq_lens)}' has dtype float16, a storage dtype in minitape: "
        f"convert it to compute (t.float() or ops.cast(t, float32)), and back with t.half() (torch's CPU kernels "
        f"compute float16 in ways numpy does not reproduce, so minitape does not compute in it)"
    )


def mixed_dtypes(op, inputs):
    got = ", ".join(
        f"{name}={getattr(getattr(x, 'dtype', None), 'name', type(x).__name__)}"
        for name, x in zip(op.input_names, inputs)
    )
    raise TypeError(
        f"{op.name}: floating inputs must share one dtype (float32 or float64), got {got}; "
        f"convert one explicitly (minitape never casts silently)"
    )


def flatten(op, values):
    """The tensor arguments as one flat list (sequence parameters spread out) and the sequences' lengths."""
    flat: list = []
    lens = []
    for value, is_seq, name in zip(values, op.sequence, op.input_names):
        if is_seq:
            if not isinstance(value, list | tuple):
                raise TypeError(
                    f"{op.name}: argument '{name}' expected a sequence of tensors, got {type(value).__name__}"
                )
            if not value:
                raise ValueError(f"{op.name}: argument '{name}' expected at least one tensor, got an empty sequence")
            flat.extend(value)
            lens.append(len(value))
        else:
            flat.append(value)
    return flat, tuple(lens)


def regroup(op, flat, seq_lens):
    """The inverse of ``flatten``: one entry per tensor parameter (a list for a sequence parameter)."""
    if not seq_lens:
        return list(flat)
    out = []
    k = 0
    lens = iter(seq_lens)
    for is_seq in op.sequence:
        if is_seq:
            n = next(lens)
            out.append(list(flat[k : k + n]))
            k += n
        else:
            out.append(flat[k])
            k += 1
    return out


def flat_gradients(op, results, seq_lens) -> list:
    """A backward's results, one per tensor parameter (a list for a sequence), as one per flat input."""
    flat = []
    for result, is_seq, n in zip(results, op.sequence, slot_sizes(op, seq_lens)):
        if is_seq:
            result = [None] * n if result is None else list(result)
            if len(result) != n:
                raise GradientError(
                    f"op '{op.name}': the backward rule for a sequence of {n} tensors returned {len(result)} gradients"
                )
            flat.extend(result)
        else:
            flat.append(result)
    return flat


def input_name(op, k, seq_lens=()) -> str:
    """The parameter name of flat input ``k`` (``tensors[2]`` inside a sequence): how every message names it."""
    if not seq_lens:
        return op.input_names[k]
    pos = 0
    for name, n, is_seq in zip(op.input_names, slot_sizes(op, seq_lens), op.sequence):
        if k < pos + n:
            return f"{name}[{k - pos}]" if is_seq else name
        pos += n
    return str(k)


def slot_sizes(op, seq_lens) -> list[int]:
    """How many flat inputs each tensor parameter holds (a sequence's length, else 1)."""
    lens = iter(seq_lens)
    return [next(lens) if is_seq else 1 for is_seq in op.sequence]


def flat_states(op, seq_lens) -> tuple | list:
    """Each flat input's backward state (a sequence parameter's state once for each of its tensors)."""
    if not seq_lens:
        return op.input_states
    return [s for s, n in zip(op.input_states, slot_sizes(op, seq_lens)) for _ in range(n)]


def kept(op, name, value):
    """An attribute as the op keeps it: arrays copied and frozen, tensors as their (read-only) arrays, inside
    tuples and lists too -- so a caller refilling an index or lengths buffer cannot move a recorded gradient."""
    kind = type(value)
    if kind is np.ndarray:
        return _frozen_copy(value)
    if kind is tuple or kind is list:
        return kind(kept(op, name, v) for v in value)
    if isinstance(value, Tensor):
        if needs_grad(value):
            not_differentiable(op, name, "it is an attribute of the op, not a tensor input: no gradient can flow to it")
        return value._data
    return value


def _frozen_copy(array):
    array = array.copy()
    array.setflags(write=False)
    return array
