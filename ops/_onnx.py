"""Helpers the op modules' ONNX lowerings share (each op declares its own lowering in its module with
``tape.onnx.lowering``; nothing here lists ops)."""

from __future__ import annotations

import numpy as np

from tape.onnx import NotExportable

__all__ = [
    "cast_to",
    "tensor_type",
    "log1p_graph",
    "elementwise",
    "no_attributes",
    "axis_of",
    "scalar",
    "float_only",
    "clip",
    "pnorm",
    "extremum",
    "index_map",
    "NotExportable",
]


def cast_to(g, name: str, have, want) -> str:
    """``name`` cast from dtype ``have`` to ``want`` (unchanged when they agree)."""
    from onnx import helper

    if np.dtype(have) == np.dtype(want):
        return name
    return g.op("Cast", name, to=helper.np_dtype_to_tensor_dtype(np.dtype(want)))


def tensor_type(dtype) -> int:
    """ONNX's TensorProto type of a numpy dtype (a Cast's ``to``)."""
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def no_attributes(rec) -> None:
    if rec.attributes:
        raise NotExportable(f"its attributes {sorted(rec.attributes)} have no lowering")


def elementwise(op_type: str, *, compute_in_output_dtype: bool = True):
    """A lowering to the ONNX op ``op_type`` over the op's tensor inputs, with no attribute. The inputs are cast
    to the output's dtype first (``compute_in_output_dtype``), else to their common numpy result type (the
    comparisons, whose output is bool)."""

    def lower(g, rec, *inputs):
        no_attributes(rec)
        want = rec.output.dtype if compute_in_output_dtype else np.result_type(*(s.dtype for s in rec.inputs))
        return g.op(op_type, *(cast_to(g, n, s.dtype, want) for n, s in zip(inputs, rec.inputs, strict=True)))

    lower.__name__ = f"onnx_{op_type}"
    return lower


def axis_of(dim: int, ndim: int) -> int:
    """``dim`` as a non-negative axis of an ``ndim``-D tensor (0-D: axis 0)."""
    return dim % max(ndim, 1)


def scalar(g, value, dtype) -> str:
    """A 0-D initializer holding ``value`` in ``dtype`` (broadcasts against any operand)."""
    return g.const(np.array(value, dtype=dtype))


def float_only(rec, what: str = "a non-floating input") -> np.dtype:
    """The first input's dtype; NotExportable unless it is floating."""
    dtype = np.dtype(rec.inputs[0].dtype)
    if dtype.kind != "f":
        raise NotExportable(f"{what} ({dtype}) has no lowering")
    return dtype


def clip(g, x, dtype, low=None, high=None) -> str:
    """max(x, low) then min(., high), as numpy: NaN stays NaN, low > high gives high."""
    dtype = np.dtype(dtype)
    for bound, op_type in ((low, "Max"), (high, "Min")):
        if bound is not None:
            out = g.op(op_type, x, scalar(g, bound, dtype))
            x = g.op("Where", g.op("IsNaN", x), x, out) if dtype.kind == "f" else out
    return x


def pnorm(g, x, dtype, p: float, axes, keepdims: int = 1) -> str:
    """||x||_p over ``axes``; for p not 1 or inf the entries are scaled by max |x| first, so the powers neither
    overflow nor underflow (the forward's scaling)."""
    if p in (np.inf, -np.inf):
        return extremum(g, "ReduceMax" if p > 0 else "ReduceMin", g.op("Abs", x), axes, keepdims, dtype)
    axes = g.ints(axes)
    magnitude = g.op("Abs", x)
    if p == 1:
        return g.op("ReduceSum", magnitude, axes, keepdims=keepdims)
    top = g.op("ReduceMax", magnitude, axes, keepdims=1)
    usable = g.op("And", g.op("Greater", top, scalar(g, 0, dtype)), g.op("Not", g.op("IsInf", top)))
    s = g.op("Where", usable, top, scalar(g, 1, dtype))
    y = g.op("Div", magnitude, s)
    if p == 2:
        total = g.op("Sqrt", g.op("ReduceSum", g.op("Mul", y, y), axes, keepdims=1))
    else:
        powered = g.op("ReduceSum", g.op("Pow", y, scalar(g, p, dtype)), axes, keepdims=1)
        total = g.op("Pow", powered, scalar(g, 1.0 / p, dtype))
    out = g.op("Mul", total, s)
    return out if keepdims else g.op("Squeeze", out, axes)


def index_map(g, rec, *inputs, fill=None, **overrides):
    """An op that only moves, repeats or drops its inputs' entries, lowered as one Gather per output: the op's
    own forward applied to the entries' flat positions (numbered across the inputs, in order) says where each
    output entry comes from. With ``fill`` the forward runs on positions + 1 so that its zeros (padding,
    off-diagonal entries) are told apart and take ``fill`` (``overrides``: attributes the forward takes instead,
    such as a fill value of 0). Several inputs are cast to the (first) output's dtype and joined first.
    The positions are constants: every shape is baked in (the export refuses dynamic axes through it)."""
    from tape.recording import forward_arrays, several_outputs
    from tape.registry import get_op

    op, specs = get_op(rec.op_name), [s for s in rec.inputs if s is not None]
    if not rec.output_specs:
        raise NotExportable("a call with no output has no lowering")
    sizes = [int(np.prod(s.shape, dtype=np.int64)) for s in specs]
    # float64 positions (exact below 2**53) pass the forwards that take floating inputs only
    starts = np.cumsum([0 if fill is None else 1, *sizes[:-1]])
    positions = iter([np.arange(n, dtype=np.float64).reshape(s.shape) + k for s, n, k in zip(specs, sizes, starts)])
    arrays = [None if s is None else next(positions) for s in rec.inputs]
    attrs = {**rec.attributes, **overrides}
    values = op.bind((), {**dict.fromkeys(op.input_names), **attrs})
    moved = forward_arrays(op, arrays, attrs, values, rec.seq_lens)
    moved = moved[0] if op.returns_aux else moved
    several = several_outputs(op, moved)
    dtype = rec.output.dtype
    names = [cast_to(g, x, s.dtype, dtype) for x, s in zip([x for x in inputs if x is not None], specs, strict=True)]
    flat = [g.op("Reshape", x, g.ints([-1])) for x in names]
    source = flat[0] if len(flat) == 1 else g.op("Concat", *flat, axis=0)
    outs = tuple(_gathered(g, source, names[0], m, fill, dtype, sum(sizes)) for m in (moved if several else [moved]))
    return outs if several else outs[0]


def _gathered(g, source, first, moved, fill, dtype, size: int) -> str:
    """The entries of the flat ``source`` at the positions ``moved`` (see index_map); ``first``: an input."""
    moved = np.rint(np.asarray(moved)).astype(np.int64)
    if size == 0:
        if moved.size:
            raise NotExportable("filling an empty input has no lowering")
        return g.op("Reshape", first, g.ints(moved.shape), allowzero=1)  # a 0 is a size, not "copy"
    if fill is None:
        return g.op("Gather", source, g.const(moved), axis=0)
    gathered = g.op("Gather", source, g.const(np.maximum(moved - 1, 0)), axis=0)
    return g.op("Where", g.const(moved == 0), scalar(g, fill, dtype), gathered)


def extremum(g, op_type: str, x, axes, keepdims: int, dtype) -> str:
    """ReduceMax / ReduceMin over ``axes``, NaN for a slice holding one as numpy's (ONNX Runtime's skip NaN)."""
    out = g.op(op_type, x, g.ints(axes), keepdims=keepdims)
    if np.dtype(dtype).kind != "f":
        return out
    nan = g.op("ReduceMax", g.op("Cast", g.op("IsNaN", x), to=6), g.ints(axes), keepdims=keepdims)  # 6: INT32
    return g.op("Where", g.op("Greater", nan, g.const(np.zeros((), np.int32))), scalar(g, np.nan, dtype), out)


def log1p_graph(g, rec, x) -> str:
    """log1p(x) in the graph, accurate where 1 + x drops digits of x (shared by the lowerings that need it)."""
    # Goldberg: with u = 1 + x rounded, log(u) * x / (u - 1) is accurate where 1 + x drops digits of x
    dtype = float_only(rec)
    u = g.op("Add", x, scalar(g, 1, dtype))
    um1 = g.op("Sub", u, scalar(g, 1, dtype))
    log = g.op("Log", u)
    exact = g.op("Or", g.op("Equal", u, scalar(g, 1, dtype)), g.op("IsInf", u))
    fixed = g.op("Mul", log, g.op("Div", x, um1))  # x / (u - 1) first: log(u) * x overflows for x near the max
    return g.op("Where", g.op("Equal", u, scalar(g, 1, dtype)), x, g.op("Where", exact, log, fixed))
