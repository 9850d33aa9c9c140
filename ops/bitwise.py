"""Bitwise and number-theoretic ops on integer (and, where torch allows, bool) tensors; none is differentiable.

Semantics, as PyTorch 2.13 (numpy 2's ufuncs give the same values; the ops pin them against torch):
- Operands of two integer dtypes promote as torch does (int8 with uint8 gives int16, anything with int64 gives
  int64); a bool with an integer gives the integer; a Python int takes the tensor's integer dtype, wrapped.
- Two's complement throughout: ~x = -x - 1, and & | ^ on negative numbers act on their two's complement bits.
- Shifts: ``x << s`` and ``x >> s`` for a shift count s outside [0, bits of the dtype) give 0 -- except that
  ``x >> s`` of a negative x gives -1 (the sign fills every bit).
- gcd and lcm are non-negative (gcd(0, 0) = 0, lcm(x, 0) = 0) except where the result does not fit the dtype:
  gcd(-128, 0) in int8 is -128, and lcm wraps, as torch's.
- Floating tensors are refused with an error naming the op (torch: "not implemented for 'Float'"); so are gcd and
  lcm of two bools (torch has no bool kernel for them; a bool with an integer computes in the integer).
"""

__all__ = [
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "gcd",
    "lcm",
]

import numpy as np

from tape.onnx import lowering
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop

from ._onnx import cast_to, scalar, tensor_type

INTEGER_DTYPES = (np.uint8, np.int8, np.int16, np.int32, np.int64)


def _integers(op, names, arrays, bools=True):
    """Refuse floating operands; with ``bools=False`` also two bools (torch's gcd and lcm have no bool kernel)."""
    for name, a in zip(names, arrays):
        if a.dtype.kind not in "iub":
            raise TypeError(f"{op}: argument '{name}' expected an integer or bool tensor, got dtype {a.dtype}")
    if not bools and all(a.dtype.kind == "b" for a in arrays):
        raise TypeError(f"{op}: arguments {', '.join(repr(n) for n in names)} are all bool; expected an integer tensor")


def _pair_forward(name, ufunc, bools=True):
    """``ufunc(input, other)`` on integer/bool tensors, broadcast, with errors naming the op."""

    def forward(input, other):
        _integers(name, ("input", "other"), (input, other), bools)
        try:
            return ufunc(input, other)
        except ValueError:
            raise ValueError(
                f"{name}: arguments 'input' {input.dtype}{list(input.shape)}, 'other' {other.dtype}"
                f"{list(other.shape)} cannot be broadcast together (each trailing dim must match or be 1)"
            ) from None

    forward.__name__ = f"_{name}"
    return forward


def _pair_samples(rng, low=-100, high=100):
    """Every integer dtype, broadcasting, negative numbers, bools, mixed dtypes, a transposed and an empty pair."""
    out = []
    for dtype in INTEGER_DTYPES:
        lo, hi = (0, 255) if dtype is np.uint8 else (low, high)
        a = rng.integers(lo, hi, size=(3, 4)).astype(dtype)
        out.append(Sample((a, rng.integers(lo, hi, size=(4,)).astype(dtype)), {}, f"{np.dtype(dtype).name}"))
    ints = rng.integers(low, high, size=(2, 3))
    out.append(Sample((ints.astype(np.int8), ints.T.astype(np.uint8).T), {}, "int8 with uint8 (int16)"))
    out.append(Sample((ints, rng.integers(low, high, size=(3, 2)).T), {}, "non-contiguous"))
    out.append(Sample((rng.random((2, 3)) > 0.5, ints.astype(np.int16)), {}, "bool with int16"))
    out.append(Sample((np.zeros((0, 3), np.int64), ints[0]), {}, "zero-size"))
    out.append(Sample((np.array(-7), np.array([3, -3, 0, 127])), {}, "scalar, negatives"))
    return out


def _declare(name, forward, samples, torch_name=None, *, doc=""):
    return defop(
        name,
        method=True,
        family="bitwise",
        inputs=("input", "other"),
        forward=forward,
        vjps=(NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE),
        samples=samples,
        torch_ref=lambda torch, input, other: getattr(torch, torch_name or name)(input, other),
        doc=doc,
    )


def _with_bools(rng):
    bools = rng.random((3, 4)) > 0.5
    return _pair_samples(rng) + [Sample((bools, rng.random(4) > 0.5), {}, "bools (logical)")]


bitwise_and = _declare(
    "bitwise_and",
    _pair_forward("bitwise_and", np.bitwise_and),
    _with_bools,
    doc="input & other elementwise, for integer or bool tensors.",
)
bitwise_or = _declare(
    "bitwise_or",
    _pair_forward("bitwise_or", np.bitwise_or),
    _with_bools,
    doc="input | other elementwise, for integer or bool tensors.",
)
bitwise_xor = _declare(
    "bitwise_xor",
    _pair_forward("bitwise_xor", np.bitwise_xor),
    _with_bools,
    doc="input ^ other elementwise, for integer or bool tensors.",
)


def _bitwise_not(input):
    _integers("bitwise_not", ("input",), (input,))
    return np.invert(input)  # bool: logical not; integers: -x - 1


def _not_samples(rng):
    out = [Sample((rng.integers(-100, 100, size=(3, 4)).astype(d),), {}, np.dtype(d).name) for d in INTEGER_DTYPES[1:]]
    out.append(Sample((np.array([0, 1, 127, 128, 255], np.uint8),), {}, "uint8"))
    out.append(Sample((np.array([True, False]),), {}, "bools"))
    out.append(Sample((rng.integers(-9, 9, size=(4, 3)).T,), {}, "non-contiguous"))
    out.append(Sample((np.zeros((0, 2), np.int32),), {}, "zero-size"))
    return out


bitwise_not = defop(
    "bitwise_not",
    method=True,
    family="bitwise",
    inputs=("input",),
    forward=_bitwise_not,
    vjps=(NOT_DIFFERENTIABLE,),
    samples=_not_samples,
    torch_ref=lambda torch, input: torch.bitwise_not(input),
    doc="~input elementwise: bitwise NOT of integers, logical NOT of bools.",
)


def _shift_samples(rng):
    out = []
    for dtype in INTEGER_DTYPES:
        bits = np.dtype(dtype).itemsize * 8
        lo, hi = (0, 255) if dtype is np.uint8 else (-100, 100)
        a = rng.integers(lo, hi, size=(2, 6)).astype(dtype)
        counts = np.array([0, 1, 3, bits - 1, bits, bits + 5], dtype=dtype)  # up to and past the width
        out.append(Sample((a, counts), {}, f"{np.dtype(dtype).name} counts 0 to past the width"))
    out.append(Sample((np.array([-5, 5, -1, 1], np.int8), np.array([8, 8, 100, 100], np.int8)), {}, "int8 past width"))
    out.append(Sample((np.array([-5, 5, 3]), np.array([-1, -1, -64])), {}, "negative counts"))
    out.append(Sample((np.array([True, False, True]), np.array([1, 2, 3])), {}, "bool shifted"))
    out.append(Sample((rng.integers(-9, 9, size=(4, 3)).T, np.array([1, 2, 3, 4])), {}, "non-contiguous, broadcast"))
    out.append(Sample((np.zeros((0, 2), np.int32), np.ones(2, np.int32)), {}, "zero-size"))
    return out


def _shift(name, ufunc, *, doc=""):
    run = _pair_forward(name, ufunc)

    def forward(input, other):
        # numpy's shifts give torch's values past the width and for negative counts (0, or -1 for a negative x >>)
        return run(input, other)

    forward.__name__ = f"_{name}"
    return _declare(name, forward, _shift_samples, doc=doc)


bitwise_left_shift = _shift("bitwise_left_shift", np.left_shift, doc="input << other elementwise, for integer tensors.")
bitwise_right_shift = _shift(
    "bitwise_right_shift", np.right_shift, doc="input >> other elementwise (arithmetic shift), for integer tensors."
)


def _gcd_samples(rng):
    out = _pair_samples(rng, -60, 60)
    out.append(Sample((np.array([0, 0, -4, 7, -128], np.int8), np.array([0, -5, 6, -21, 0], np.int8)), {}, "edges"))
    out.append(Sample((np.array([100, -100, 64], np.int8), np.array([3, 3, 4], np.int8)), {}, "int8 overflow"))
    return out


gcd = _declare(
    "gcd",
    _pair_forward("gcd", np.gcd, bools=False),
    _gcd_samples,
    doc="The greatest common divisor of input and other elementwise, for integer tensors; the result is non-negative.",
)
lcm = _declare(
    "lcm",
    _pair_forward("lcm", np.lcm, bools=False),
    _gcd_samples,
    doc="The least common multiple of input and other elementwise, for integer tensors; the result is non-negative.",
)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_bitwise(op_type: str, logical: str):
    """BitwiseAnd / Or / Xor on the operands cast to the output dtype (bools: the logical op)."""

    def lower(g, rec, input, other):
        want = rec.output.dtype
        a, b = (cast_to(g, n, s.dtype, want) for n, s in zip((input, other), rec.inputs, strict=True))
        return g.op(logical if want == np.bool_ else op_type, a, b)

    return lower


def _onnx_shift(g, rec, input, other):
    """ONNX's BitShift takes unsigned integers only: the two's complement bits shifted as the same-width
    unsigned type (a negative x >> s as ~(~x >> s), the sign filling in), then 0 -- or -1 for a negative x >> --
    for counts outside [0, bits), as the forward. The choices are made in int64 (ONNX Runtime's Where has no
    int16 or unsigned kernel)."""
    dtype = np.dtype(rec.output.dtype)
    unsigned, wide = np.dtype(f"uint{dtype.itemsize * 8}"), np.dtype(np.int64)
    x, s = (cast_to(g, n, spec.dtype, dtype) for n, spec in zip((input, other), rec.inputs, strict=True))
    ux, us = (cast_to(g, v, dtype, unsigned) for v in (x, s))
    left = rec.op_name == "bitwise_left_shift"

    def back(v):  # unsigned bits -> the dtype's value (two's complement) -> int64
        return cast_to(g, cast_to(g, v, unsigned, dtype), dtype, wide)

    out = back(g.op("BitShift", ux, us, direction="LEFT" if left else "RIGHT"))
    past = scalar(g, 0, wide)
    if dtype.kind == "i" and not left:
        negative = g.op("Less", x, scalar(g, 0, dtype))
        flipped = back(g.op("BitwiseNot", g.op("BitShift", g.op("BitwiseNot", ux), us, direction="RIGHT")))
        out = g.op("Where", negative, flipped, out)
        past = g.op("Neg", g.op("Cast", negative, to=tensor_type(wide)))
    s = cast_to(g, s, dtype, wide)
    inside = g.op(
        "And", g.op("GreaterOrEqual", s, scalar(g, 0, wide)), g.op("Less", s, scalar(g, dtype.itemsize * 8, wide))
    )
    return cast_to(g, g.op("Where", inside, out, past), wide, dtype)


def _onnx_bitwise_not(g, rec, input):
    return g.op("Not" if rec.inputs[0].dtype == np.bool_ else "BitwiseNot", input)


lowering(bitwise_and, _onnx_bitwise("BitwiseAnd", "And"))
lowering(bitwise_or, _onnx_bitwise("BitwiseOr", "Or"))
lowering(bitwise_xor, _onnx_bitwise("BitwiseXor", "Xor"))
lowering(bitwise_not, _onnx_bitwise_not)
for _op in (bitwise_left_shift, bitwise_right_shift):
    lowering(_op, _onnx_shift)
for _op in (gcd, lcm):
    lowering(_op, not_exportable="ONNX has no gcd, and Euclid's steps depend on the values (a Loop is not written)")
