"""Explicit dtype conversion inside a graph: ``cast(input, dtype)`` (``Tensor.to(dtype)``, ``.float()``,
``.double()``).

minitape never casts silently (an op refuses float32 mixed with float64); this is the explicit way. It is also the
one op that takes float16, a storage dtype (every other op refuses it, naming itself). Between
floating dtypes the gradient is cast back to the input's dtype; a cast to an integer or bool dtype is not
differentiable (the output has no gradient, as in torch), and a cast from them needs no gradient.
"""

__all__ = ["cast"]

import numpy as np

from tape.onnx import lowering
from tape.registry import Sample, defop

from ._numerics import quiet
from ._samples import transposed, uniform

_ALLOWED = (np.float32, np.float64, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint8, np.bool_)
_NAMES = "float32, float64, float16, int64, int32, int16, int8, uint8, bool"


def _dtype(value) -> np.dtype:
    try:
        dtype = np.dtype(value)
    except TypeError:
        raise TypeError(f"cast: argument 'dtype' expected a numpy dtype ({_NAMES}), got {value!r}") from None
    if dtype.type not in _ALLOWED:
        raise TypeError(f"cast: argument 'dtype' expected one of {_NAMES}, got {dtype}")
    return dtype


@quiet  # 1e300 -> float32 is inf, inf/NaN -> int64 is undefined, as torch: no numpy warning
def _cast(input, dtype):
    return input.astype(_dtype(dtype), copy=True)


def _cast_vjp(g, ans, input, dtype):
    if isinstance(g, np.ndarray):
        return g.astype(input.dtype)
    return cast(g, input.dtype)  # differentiable again: the cast back is a cast


def _check(input, dtype):
    _dtype(dtype)


def _samples(rng):
    # no float16 sample: gradcheck cannot compute in it (tests/ops/test_math_dtypes_and_aliases.py checks its
    # casts against torch)
    return [
        Sample((uniform(rng, (2, 3)),), {"dtype": np.float32}, "float64 -> float32"),
        Sample((uniform(rng, (3,)),), {"dtype": np.float64}, "same dtype"),
        Sample((transposed(rng, (3, 2)),), {"dtype": "float32"}, "non-contiguous, dtype by name"),
        Sample((uniform(rng, (0, 3)),), {"dtype": np.float32}, "zero-size"),
        Sample((np.array([1.7, -2.2, 0.0]),), {"dtype": np.int64}, "to int64: truncates, no gradient"),
        Sample((np.array([1.5, 0.0]),), {"dtype": np.bool_}, "to bool"),
        Sample((np.array([1.7, 200.0, 0.0]),), {"dtype": np.uint8}, "to uint8"),
        Sample((np.array([-1.7, 100.0, 0.0]),), {"dtype": np.int8}, "to int8"),
        Sample((np.array([-1.7, 30000.0, 0.0]),), {"dtype": np.int16}, "to int16"),
    ]


def _torch_ref(torch, input, dtype):
    return input.to(getattr(torch, np.dtype(dtype).name))


cast = defop(
    "cast",
    family="elementwise",
    inputs=("input",),
    forward=_cast,
    vjps=(_cast_vjp,),
    check=_check,
    casts=True,
    samples=_samples,
    torch_ref=_torch_ref,
    gradcheck_tolerance={"eps": 1e-3, "atol": 1e-4, "rtol": 1e-4},
    doc="input's values converted to ``dtype`` (as Tensor.to(dtype)); the gradient is converted back.",
)  # linear: a large step is exact,
# and it keeps float32's rounding of the output (1e-7 relative) far below the tolerance


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_cast(g, rec, input):
    from onnx import helper

    return g.op("Cast", input, to=helper.np_dtype_to_tensor_dtype(np.dtype(rec.output.dtype)))


lowering(cast, _onnx_cast)
