"""Convolution and pooling, as in ``torch.nn.functional``: conv1d, conv2d, conv3d, conv_transpose1d,
conv_transpose2d, conv_transpose3d, unfold / fold (im2col and its adjoint col2im), max_pool1d, max_pool2d,
max_pool3d, max_pool2d_with_indices, max_unpool1d, max_unpool2d, avg_pool1d, avg_pool2d, avg_pool3d, lp_pool1d,
lp_pool2d, adaptive_avg_pool1d/2d/3d, adaptive_max_pool1d/2d, adaptive_max_pool2d_with_indices, interpolate
(nearest, nearest-exact, area, linear, bilinear, bicubic, trilinear) and the nearest-neighbour upsample2d. How
they are computed (im2col, separable matmuls), their second order and ties are the ops' notes (``_CASE_LAW``,
shown in docs/coverage.md).
"""

__all__ = [
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "unfold",
    "fold",
    "max_pool1d",
    "max_pool2d",
    "max_pool2d_with_indices",
    "max_unpool2d",
    "avg_pool1d",
    "avg_pool2d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool2d",
    "adaptive_max_pool2d_with_indices",
    "upsample2d",
    "interpolate",
    "lp_pool1d",
    "lp_pool2d",
    "adaptive_max_pool1d",
    "max_unpool1d",
    "adaptive_avg_pool3d",
    "conv_transpose3d",
    "avg_pool3d",
    "max_pool3d",
]

import functools
import math
from functools import partial, reduce

import numpy as np
from numpy.lib.stride_tricks import as_strided

from tape.onnx import lowering
from tape.registry import Grad, Sample, defop
from tape.tensors import Tensor

from ._kernels import conv as conv_kernels
from ._notes import case_law
from ._numerics import constant_values
from ._onnx import NotExportable, index_map, scalar, tensor_type
from ._samples import uniform
from ._validation import functional, real, require, require_bool, require_float, require_indices, require_integer

# torch's case law, op by op: each entry joins the notes= of the ops it names (shown in docs/coverage.md)
_CASE_LAW = (
    (
        (
            "conv1d",
            "conv2d",
            "conv3d",
            "conv_transpose1d",
            "conv_transpose2d",
            "max_pool1d",
            "max_pool2d",
            "avg_pool1d",
            "avg_pool2d",
            "adaptive_avg_pool1d",
            "adaptive_avg_pool2d",
            "interpolate",
        ),
        "Convolutions use im2col over any number of spatial axes (conv1d, conv2d and conv3d are one "
        "declaration each; the kernel is ops/_kernels/conv.py): over blocks of whole images (or bands of one), "
        "one strided copy per kernel offset fills a reused column buffer (the padding is never built), one GEMM "
        "per group writes the block's output; the backward fills the columns again for the weight gradient and"
        " adds the input gradient back (col2im) with one strided add per kernel offset (prod(kernel) adds, never "
        "a loop over output positions or np.add.at). A transposed convolution is conv's adjoint: its forward "
        "is conv's input-gradient kernel, its input gradient conv's forward. Pooling works on windows of the "
        "padded input (one n-d kernel for 1-D, 2-D and 3-D max and average pools). The forwards resolve their "
        "geometry once and hand it to the backward. Adaptive average pooling and interpolate are separable "
        "linear maps: a matmul with one (out, in) weight matrix per spatial axis, whose transposes are the backward. "
        "An inf or NaN input reaches only the outputs whose weight for it is nonzero (a plain matmul would spread "
        "0 * inf = NaN over the row). Known difference: torch's linear modes also multiply the neighbour of weight "
        "exactly 0 at an output on an input grid point, so torch gives NaN there next to an inf; ours is the value. "
        "Bicubic too, and there torch also weighs a border cell once per clamped tap (weights of both signs), so "
        "inf * w1 + inf * w2 gives NaN where the cell's total weight is nonzero and ours is +-inf.",
    ),
    (
        ("max_pool2d", "max_pool2d_with_indices", "adaptive_max_pool2d", "adaptive_max_pool2d_with_indices"),
        "torch returns max pooling's indices only with ``return_indices=True``; an op's output count is "
        "fixed, so the two-output forms are ops of their own under torch's names "
        "(``max_pool2d_with_indices``, ``adaptive_max_pool2d_with_indices``: values and int64 indices ``h * W"
        " + w`` into each input plane), and max_pool2d / adaptive_max_pool2d return the values alone.",
    ),
    (
        (
            "conv2d",
            "conv1d",
            "conv3d",
            "unfold",
            "fold",
            "max_pool2d",
            "avg_pool2d",
            "upsample2d",
            "conv_transpose2d",
            "conv_transpose1d",
            "max_pool1d",
            "avg_pool1d",
            "max_pool2d_with_indices",
            "max_unpool2d",
            "adaptive_avg_pool1d",
            "adaptive_avg_pool2d",
            "adaptive_max_pool2d",
            "adaptive_max_pool2d_with_indices",
            "interpolate",
        ),
        "Second order: unfold and fold are linear and each other's adjoint, so each one's backward is the "
        "other op (on Tensors) or its kernel (on arrays). The convolutions, the transposed convs, the avg and"
        " max pools are differentiated again through composites built on registered ops: conv2d as the "
        "windows of the (padded) input as ``unfold`` columns times the weight; conv1d and conv_transpose1d as"
        " the 2-D composites over a height of 1; conv3d as a sum over the kernel's depth of conv2d's "
        "composite over the input planes each kernel plane meets; the pools as a sum (avg) or a selection of "
        "the forward's argmax (max) of unfold columns; conv_transpose2d as a matmul with the transposed "
        "weight then ``fold``; a ``gather`` at the forward's flat indices (the with-indices and adaptive max "
        "pools). max_unpool2d's backward is a gather (np.take_along_axis), adaptive_avg_pool and "
        "interpolate's are matmuls: those rules are traced as they stand.",
    ),
    (
        (
            "max_pool1d",
            "max_pool2d",
            "max_pool2d_with_indices",
            "adaptive_max_pool2d",
            "adaptive_max_pool2d_with_indices",
        ),
        "Ties: the max pools send a window's gradient to its first maximum in row-major order, a NaN counting"
        " as the maximum -- what torch's CPU kernels do (and the indices they return). Empty batches work as "
        "in torch.",
    ),
)


# -- argument handling -------------------------------------------------------------------------------------
def _ints(op: str, name: str, value, n: int, minimum: int, one_for_all: bool = False) -> tuple:
    """An int or a sequence of ``n`` ints, each >= ``minimum``, as a tuple of ``n`` ints; ``one_for_all``: a
    one-entry sequence stands for every dim (torch's convolutions and poolings read it so; fold does not)."""
    values = (value,) * n if isinstance(value, int | np.integer) else value
    if one_for_all and isinstance(values, tuple | list) and len(values) == 1:
        values = tuple(values) * n
    ok = (
        isinstance(values, tuple | list)
        and len(values) == n
        and all(isinstance(v, int | np.integer) and not isinstance(v, bool) and v >= minimum for v in values)
    )
    require(ok, op, name, f"an int >= {minimum} or a tuple of {n} such ints", value)
    return tuple(int(v) for v in values)


_LAYOUTS = {1: "(C, L) or (N, C, L)", 2: "(C, H, W) or (N, C, H, W)", 3: "(C, D, H, W) or (N, C, D, H, W)"}
_KERNEL_DIMS = {1: "kL", 2: "kH, kW", 3: "kD, kH, kW"}


def _check_input_rank(op: str, x: np.ndarray, spatial: int) -> None:
    require_float(op, "input", x)
    require(
        x.ndim in (spatial + 1, spatial + 2),
        op,
        "input",
        f"a {spatial + 1}-D or {spatial + 2}-D tensor {_LAYOUTS[spatial]}",
        f"shape {x.shape}",
    )


def _batched(x: np.ndarray, spatial: int) -> np.ndarray:
    """The input with a batch axis (unbatched inputs get one of size 1)."""
    return x[None] if x.ndim == spatial + 1 else x


def _windows(xp: np.ndarray, kernel: tuple, stride: tuple, dilation: tuple, out: tuple, kernel_last: bool):
    """A read-only strided view of the receptive fields of the padded (A, B, *spatial) array ``xp``, over any
    number of spatial axes: shape (A, B, *kernel, *out) for im2col, or (A, B, *out, *kernel) with
    ``kernel_last``."""
    axis_strides = xp.strides[2:]
    kernel_part = (tuple(kernel), tuple(s * d for s, d in zip(axis_strides, dilation)))
    out_part = (tuple(out), tuple(s * step for s, step in zip(axis_strides, stride)))
    first, second = (out_part, kernel_part) if kernel_last else (kernel_part, out_part)
    shape = xp.shape[:2] + first[0] + second[0]
    return as_strided(xp, shape, xp.strides[:2] + first[1] + second[1], writeable=False)


def _scatter_windows(grad_windows: np.ndarray, padded_shape: tuple, stride: tuple, dilation: tuple) -> np.ndarray:
    """The adjoint of ``_windows``: add (A, B, *kernel, *out) window gradients back into a zero (A, B, *spatial)
    array of ``padded_shape``, one vectorised add per kernel offset."""
    n = len(stride)
    kernel, out = grad_windows.shape[2 : 2 + n], grad_windows.shape[2 + n :]
    grad = np.zeros(padded_shape, dtype=grad_windows.dtype)
    every = (slice(None), slice(None))
    for offset in np.ndindex(*kernel):
        region = tuple(slice(k * d, k * d + s * (o - 1) + 1, s) for k, d, s, o in zip(offset, dilation, stride, out))
        grad[every + region] += grad_windows[every + offset]
    return grad


def _no_stride(stride) -> bool:
    """A pool's stride left to its default (None, or torch's empty tuple / list): the kernel size."""
    return stride is None or (isinstance(stride, tuple | list) and len(stride) == 0)


def _pad(x: np.ndarray, pads: tuple, value=0) -> np.ndarray:
    """Pad the spatial axes of (A, B, *spatial) ``x`` by ``pads``, one (before, after) pair per spatial axis."""
    if not any(before or after for before, after in pads):
        return x
    return np.pad(x, ((0, 0), (0, 0)) + tuple(pads), constant_values=value)


def _unpad(grad: np.ndarray, pads: tuple, shape: tuple) -> np.ndarray:
    """The region of a padded-input gradient that belongs to the unpadded input of (A, B, *spatial) ``shape``."""
    return grad[(slice(None), slice(None)) + tuple(slice(a, a + n) for (a, _), n in zip(pads, shape[2:]))]


# -- convolution core: im2col over any number of spatial axes ----------------------------------------------
class _ConvGeometry:
    """Padding (a (before, after) pair per spatial axis), stride, dilation and kernel of one convolution, the
    padded input size and the output size they give (a transposed conv's geometry adds its output_padding
    ``extra`` and output size ``out_size``)."""

    extra: tuple
    out_size: tuple

    def __init__(self, op, x_shape, w_shape, stride, padding, dilation, spatial):
        self.stride = _ints(op, "stride", stride, spatial, 1, one_for_all=True)
        self.dilation = _ints(op, "dilation", dilation, spatial, 1, one_for_all=True)
        self.kernel = tuple(w_shape[2:])
        if isinstance(padding, str):
            require(
                padding in ("same", "valid"), op, "padding", "'same', 'valid', an int or a tuple of ints", repr(padding)
            )
            if padding == "same":
                require(
                    self.stride == (1,) * spatial, op, "padding", "stride 1 with padding='same'", f"stride {stride}"
                )
            # 'same' pads the total d*(k-1) with the odd element after (right/bottom/back), as torch
            totals = [d * (k - 1) if padding == "same" else 0 for d, k in zip(self.dilation, self.kernel)]
            self.pads = tuple((t // 2, t - t // 2) for t in totals)
        else:
            self.pads = tuple((p, p) for p in _ints(op, "padding", padding, spatial, 0, one_for_all=True))
        self.padded = tuple(n + a + b for n, (a, b) in zip(x_shape[-spatial:], self.pads))
        effective = tuple(d * (k - 1) + 1 for d, k in zip(self.dilation, self.kernel))
        require(
            all(e <= p for e, p in zip(effective, self.padded)),
            op,
            "weight",
            f"a (dilated) kernel no larger than the padded input {self.padded}",
            f"kernel extent {effective}",
        )
        self.out = tuple((p - e) // s + 1 for p, e, s in zip(self.padded, effective, self.stride))


def _conv_forward(x, w, bias, geo, groups):
    """The (N, O, *out) convolution of the (N, C, *spatial) batch ``x`` with the (O, C/G, *kernel) weight."""
    return conv_kernels.forward(x, w, bias, geo, groups)


def _conv_backward(g, x, w, geo, groups, needs, x_shape=None):
    """Input, weight and bias gradients of conv for the (N, O, *out) output gradient ``g`` (``x_shape`` stands
    for ``x.shape`` when only the input gradient is needed; ``x`` may then be None)."""
    x_shape = x.shape if x_shape is None else x_shape
    dx, dw = conv_kernels.backward(g, x, w, geo, groups, (bool(needs[0]), bool(needs[1])), tuple(x_shape))
    db = np.sum(g, axis=(0, *range(2, g.ndim))) if len(needs) > 2 and needs[2] else None
    return dx, dw, db


def _check_conv_arguments(op, spatial, x, weight, groups, weight_layout) -> int:
    """What a convolution and a transposed one check alike (ranks, dtypes, groups dividing the input's
    channels); returns the input's channel count."""
    _check_input_rank(op, x, spatial)
    require_float(op, "weight", weight)
    require(
        weight.ndim == spatial + 2,
        op,
        "weight",
        f"a {spatial + 2}-D tensor ({weight_layout}, {_KERNEL_DIMS[spatial]})",
        f"shape {weight.shape}",
    )
    require(
        bool(isinstance(groups, int | np.integer) and not isinstance(groups, bool) and groups >= 1),
        op,
        "groups",
        "an int >= 1",
        groups,
    )
    in_channels = _batched(x, spatial).shape[1]
    require(in_channels % groups == 0, op, "groups", f"a divisor of the input's {in_channels} channels", groups)
    return in_channels


def _check_bias(op, bias, channels) -> None:
    if bias is not None:
        require_float(op, "bias", bias)
        require(bias.shape == (channels,), op, "bias", f"shape ({channels},)", bias.shape)


def _check_conv(op, spatial, x, weight, bias, stride, padding, dilation, groups):
    in_channels = _check_conv_arguments(op, spatial, x, weight, groups, "out_channels, in_channels/groups")
    require(
        weight.shape[0] % groups == 0,
        op,
        "groups",
        f"a divisor of the weight's {weight.shape[0]} output channels",
        groups,
    )
    require(
        weight.shape[1] * groups == in_channels,
        op,
        "weight",
        f"in_channels/groups = {in_channels // groups} in dim 1 (input has {in_channels} channels, groups={groups})",
        f"shape {weight.shape}",
    )
    _check_bias(op, bias, weight.shape[0])
    _ConvGeometry(op, x.shape, weight.shape, stride, padding, dilation, spatial)


def _window_columns(x4, geo):
    """(N, C*KH*KW, OH*OW) Tensor: every window of the (N, C, H, W) Tensor ``x4`` under ``geo``'s (possibly
    asymmetric) padding, built with registered ops -- the composites' im2col."""
    from .shape import pad  # at call time: the families register in ops/__init__'s order

    (top, bottom), (left, right) = geo.pads
    if top == bottom and left == right:
        return unfold(x4, geo.kernel, geo.dilation, (top, left), geo.stride)
    return unfold(pad(x4, (left, right, top, bottom)), geo.kernel, geo.dilation, 0, geo.stride)


def _with_unit_axis(value, unit: int):
    """A 1-D op's int-or-tuple argument as the 2-D op's for a leading axis of size 1 (strings pass as they are)."""
    if isinstance(value, str):
        return value
    return (unit, value) if isinstance(value, int | np.integer) else (unit, *value)


def _conv_op(name, spatial, composite, samples, notes="", *, doc=""):
    """Declare conv1d, conv2d or conv3d: the im2col kernels above in the first order; ``composite`` (the conv
    written with registered ops) for the second."""

    def forward(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        geo = _ConvGeometry(name, input.shape, weight.shape, stride, padding, dilation, spatial)
        out = _conv_forward(_batched(input, spatial), weight, bias, geo, groups)
        return out.reshape(input.shape[: input.ndim - spatial - 1] + out.shape[1:]), {"geo": geo}

    def joint_vjp(g, ans, input, weight, bias, *, needs, stride, padding, dilation, groups, geo):
        dx, dw, db = _conv_backward(_batched(g, spatial), _batched(input, spatial), weight, geo, groups, needs)
        return (None if dx is None else dx.reshape(input.shape)), dw, db

    def check(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        _check_conv(name, spatial, input, weight, bias, stride, padding, dilation, groups)

    return _declare_conv(name, forward, joint_vjp, check, composite, samples, notes, doc=doc)


def _declare_conv(name, forward, joint_vjp, check, composite, samples, notes="", *, doc=""):
    """Register a convolution or a transposed one: input, weight and optional bias sharing one backward (the
    forward saves its geometry for it), a composite for the second order, torch.nn.functional's op as oracle."""
    return defop(
        name,
        family="conv",
        inputs=("input", "weight", "bias?"),
        forward=forward,
        joint_vjp=joint_vjp,
        returns_aux=True,
        composite=composite,
        check=check,
        samples=samples,
        notes=notes,
        torch_ref=lambda torch, input, weight, bias, **attrs: _torch_conv(torch, name, input, weight, bias, **attrs),
        doc=doc,
    )


def _torch_conv(torch, name, input, weight, bias, **attrs):
    import warnings

    with warnings.catch_warnings():  # torch warns that padding='same' with an even kernel copies the input
        warnings.simplefilter("ignore")
        return getattr(torch.nn.functional, name)(input, weight, bias, **attrs)


def _conv2d_composite(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """conv2d with registered ops, for its second order: unfold's window columns times the weight."""
    from .linalg import matmul  # at call time: the families register in ops/__init__'s order
    from .shape import reshape, unsqueeze

    geo = _ConvGeometry("conv2d", input.shape, weight.shape, stride, padding, dilation, 2)
    x4 = input if input.ndim == 4 else unsqueeze(input, 0)
    n, channels, out_channels = x4.shape[0], x4.shape[1], weight.shape[0]
    rows = channels // groups * geo.kernel[0] * geo.kernel[1]
    cols = reshape(_window_columns(x4, geo), (n, groups, rows, geo.out[0] * geo.out[1]))
    out = matmul(reshape(weight, (groups, out_channels // groups, rows)), cols)  # (N, G, O/G, L)
    out = reshape(out, (n, out_channels) + geo.out)
    if bias is not None:
        out = out + reshape(bias, (out_channels, 1, 1))
    return reshape(out, input.shape[: input.ndim - 3] + (out_channels,) + geo.out)


def _over_unit_height(composite_2d, input, weight, bias, groups, **per_axis):
    """A 1-D convolution as the 2-D one's composite over a height of 1 (there stride and dilation 1, paddings 0),
    for its second order."""
    from .shape import squeeze, unsqueeze  # at call time: the families register in ops/__init__'s order

    spread = {k: _with_unit_axis(v, 1 if k in ("stride", "dilation") else 0) for k, v in per_axis.items()}
    return squeeze(composite_2d(unsqueeze(input, -2), unsqueeze(weight, -2), bias, groups=groups, **spread), -2)


def _conv1d_composite(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _over_unit_height(
        _conv2d_composite, input, weight, bias, groups, stride=stride, padding=padding, dilation=dilation
    )


def _conv3d_composite(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """conv3d with registered ops, for its second order: the sum over the kernel's depth of conv2d's composite
    over the input planes that kernel plane meets (the output depths folded into the batch)."""
    from .shape import pad, permute, reshape, unsqueeze  # at call time: the families register in ops/__init__'s order

    geo = _ConvGeometry("conv3d", input.shape, weight.shape, stride, padding, dilation, 3)
    x = input if input.ndim == 5 else unsqueeze(input, 0)
    if any(before or after for before, after in geo.pads):
        x = pad(x, tuple(p for pair in reversed(geo.pads) for p in pair))  # torch's order: last axis first
    n, channels, out_channels = x.shape[0], x.shape[1], weight.shape[0]
    depth, step, spacing = geo.out[0], geo.stride[0], geo.dilation[0]
    out = None
    for k in range(geo.kernel[0]):
        planes = x[:, :, k * spacing : k * spacing + step * (depth - 1) + 1 : step]  # (N, C, OD, H, W)
        planes = reshape(permute(planes, (0, 2, 1, 3, 4)), (n * depth, channels) + tuple(planes.shape[3:]))
        term = _conv2d_composite(planes, weight[:, :, k], None, geo.stride[1:], 0, geo.dilation[1:], groups)
        out = term if out is None else out + term
    out = permute(reshape(out, (n, depth, out_channels) + geo.out[1:]), (0, 2, 1, 3, 4))
    if bias is not None:
        out = out + reshape(bias, (out_channels, 1, 1, 1))
    return reshape(out, input.shape[: input.ndim - 4] + (out_channels,) + geo.out)


def _conv_samples(spatial, cases):
    """Samples from (input shape, weight shape, with bias, label, attributes) rows; a non-contiguous input and
    weight (channels last in memory) and an empty batch are added to every list."""

    def generate(rng):
        def sample(x, w, bias, label, attrs):
            return Sample((x, w, uniform(rng, (w.shape[0],)) if bias else None), attrs, label)

        rows = [sample(uniform(rng, x), uniform(rng, w), bias, label, attrs) for x, w, bias, label, attrs in cases]
        channels_last = (0, spatial + 1, *range(1, spatial + 1))  # (N, *spatial, C) in memory, seen as (N, C, ...)
        x = uniform(rng, (1,) + (5 - spatial,) * spatial + (2,)).transpose(channels_last)
        w = uniform(rng, (2,) + (2,) * spatial + (2,)).transpose(channels_last)
        rows.append(sample(x, w, False, "non-contiguous input and weight", {"padding": 1}))
        empty = (0, 2) + (3,) * spatial
        rows.append(sample(uniform(rng, empty), uniform(rng, (3, 2) + (2,) * spatial), True, "empty batch", {}))
        return rows

    return generate


_conv1d_samples = _conv_samples(
    1,
    [
        ((2, 3, 7), (4, 3, 3), True, "plain with bias", {}),
        ((2, 2, 8), (2, 2, 3), False, "stride 2, padding 2, dilation 2", dict(stride=2, padding=2, dilation=2)),
        ((1, 4, 6), (6, 2, 2), True, "groups 2, padding same", dict(groups=2, padding="same")),
        ((1, 2, 6), (2, 1, 3), False, "depthwise, padding valid", dict(groups=2, padding="valid")),
        ((3, 9), (2, 3, 4), True, "unbatched, tuple stride", dict(stride=(3,), padding=(1,))),
    ],
)
_conv2d_samples = _conv_samples(
    2,
    [
        ((1, 2, 5, 5), (3, 2, 3, 3), True, "plain with bias", {}),
        ((2, 2, 5, 4), (2, 2, 2, 3), False, "stride 2, padding 1", dict(stride=2, padding=1)),
        ((1, 2, 6, 6), (2, 2, 2, 2), True, "dilation 2, tuple stride", dict(stride=(1, 2), dilation=2)),
        ((1, 4, 4, 4), (4, 2, 2, 2), True, "groups 2, asymmetric padding", dict(groups=2, padding=(1, 0))),
        ((1, 3, 4, 4), (3, 1, 3, 3), False, "depthwise, padding same", dict(groups=3, padding="same")),
        (
            (1, 2, 4, 5),
            (2, 2, 2, 2),
            False,
            "padding same even kernel, dilation",
            dict(padding="same", dilation=(2, 1)),
        ),
        ((1, 2, 4, 4), (3, 2, 3, 2), True, "padding valid", dict(padding="valid")),
        (
            (2, 4, 4),
            (2, 1, 3, 3),
            True,
            "unbatched, groups 2, stride 2, padding 2",
            dict(groups=2, stride=2, padding=2),
        ),
    ],
)
_conv3d_samples = _conv_samples(
    3,
    [
        ((1, 2, 2, 3, 3), (2, 2, 2, 2, 2), True, "plain with bias", {}),
        ((1, 2, 3, 2, 3), (2, 1, 2, 1, 2), False, "groups 2, stride 2, padding 1", dict(groups=2, stride=2, padding=1)),
        (
            (1, 1, 3, 3, 2),
            (1, 1, 2, 2, 1),
            False,
            "padding same even kernel, dilation",
            dict(padding="same", dilation=(2, 1, 1)),
        ),
        (
            (1, 2, 3, 2, 4),
            (1, 2, 2, 1, 3),
            True,
            "padding valid, tuple stride",
            dict(padding="valid", stride=(1, 2, 1)),
        ),
        ((2, 2, 2, 3), (1, 2, 2, 1, 2), True, "unbatched, tuple padding", dict(padding=(1, 0, 1))),
    ],
)

conv2d = _conv_op(
    "conv2d",
    2,
    _conv2d_composite,
    _conv2d_samples,
    notes=case_law(_CASE_LAW, "conv2d"),
    doc=(
        "2-D cross-correlation of an (N, C_in, H, W) input with (C_out, C_in/groups, kH, kW) weights, plus an\n"
        "optional bias, as torch.nn.functional.conv2d."
    ),
)
conv1d = _conv_op(
    "conv1d",
    1,
    _conv1d_composite,
    _conv1d_samples,
    notes=case_law(_CASE_LAW, "conv1d"),
    doc=(
        "1-D cross-correlation of an (N, C_in, L) input with (C_out, C_in/groups, k) weights, plus an optional bias,\n"
        "as torch.nn.functional.conv1d."
    ),
)
conv3d = _conv_op(
    "conv3d",
    3,
    _conv3d_composite,
    _conv3d_samples,
    notes=case_law(_CASE_LAW, "conv3d"),
    doc=(
        "3-D cross-correlation of an (N, C_in, D, H, W) input with (C_out, C_in/groups, kD, kH, kW) weights, plus an\n"
        "optional bias, as torch.nn.functional.conv3d."
    ),
)


# -- unfold / fold -----------------------------------------------------------------------------------------
class _BlockGeometry:
    """unfold / fold: kernel, dilation, symmetric padding and stride over a spatial size, and the number of
    sliding blocks along each axis (the same fields the convolution and pooling geometries have)."""

    def __init__(self, op, size, kernel_size, dilation, padding, stride):
        self.kernel = _ints(op, "kernel_size", kernel_size, 2, 1)
        self.dilation = _ints(op, "dilation", dilation, 2, 1)
        padding = _ints(op, "padding", padding, 2, 0)
        self.stride = _ints(op, "stride", stride, 2, 1)
        self.size = tuple(size)
        self.pads = tuple((p, p) for p in padding)
        self.padded = tuple(n + 2 * p for n, p in zip(size, padding))
        effective = tuple(d * (k - 1) + 1 for d, k in zip(self.dilation, self.kernel))
        self.out = tuple((p - e) // s + 1 for p, e, s in zip(self.padded, effective, self.stride))
        require(
            min(self.out) >= 1,
            op,
            "kernel_size",
            f"a (dilated) kernel no larger than the padded spatial size {self.padded}",
            f"kernel extent {effective}",
        )


def _unfold_kernel(input, geo):
    x4 = _batched(input, 2)
    windows = _windows(_pad(x4, geo.pads), geo.kernel, geo.stride, geo.dilation, geo.out, kernel_last=False)
    cols = windows.reshape(x4.shape[0], x4.shape[1] * geo.kernel[0] * geo.kernel[1], geo.out[0] * geo.out[1])
    return cols if input.ndim == 4 else cols[0]


def _fold_kernel(input, geo):
    c3 = input if input.ndim == 3 else input[None]
    n, channels = c3.shape[0], c3.shape[1] // (geo.kernel[0] * geo.kernel[1])
    windows = c3.reshape((n, channels) + geo.kernel + geo.out)
    padded = _scatter_windows(windows, (n, channels) + geo.padded, geo.stride, geo.dilation)
    out = _unpad(padded, geo.pads, (n, channels) + geo.size)
    return out if input.ndim == 3 else out[0]


def _unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """``torch.nn.functional.unfold`` (im2col): (N, C, H, W) -> (N, C*kH*kW, L), one column per sliding block,
    rows in (channel, kernel row, kernel column) order; (C, H, W) -> (C*kH*kW, L)."""
    return _unfold_kernel(input, _BlockGeometry("unfold", input.shape[-2:], kernel_size, dilation, padding, stride))


def _unfold_vjp(g, ans, input, kernel_size, dilation=1, padding=0, stride=1):
    if isinstance(g, Tensor):
        return fold(g, input.shape[-2:], kernel_size, dilation, padding, stride)
    return _fold_kernel(g, _BlockGeometry("unfold", input.shape[-2:], kernel_size, dilation, padding, stride))


def _fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """``torch.nn.functional.fold`` (col2im), unfold's adjoint: (N, C*kH*kW, L) -> (N, C, H, W), each column
    added back where its block lies, overlaps summed; (C*kH*kW, L) -> (C, H, W)."""
    size = _ints("fold", "output_size", output_size, 2, 1)
    return _fold_kernel(input, _BlockGeometry("fold", size, kernel_size, dilation, padding, stride))


def _fold_vjp(g, ans, input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    if isinstance(g, Tensor):
        return unfold(g, kernel_size, dilation, padding, stride)
    size = _ints("fold", "output_size", output_size, 2, 1)
    return _unfold_kernel(g, _BlockGeometry("fold", size, kernel_size, dilation, padding, stride))


def _check_unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    require_float("unfold", "input", input)
    require(
        input.ndim in (3, 4), "unfold", "input", "a 3-D (C, H, W) or 4-D (N, C, H, W) tensor", f"shape {input.shape}"
    )
    _BlockGeometry("unfold", input.shape[-2:], kernel_size, dilation, padding, stride)


def _check_fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    require_float("fold", "input", input)
    require(
        input.ndim in (2, 3),
        "fold",
        "input",
        "a 2-D (C*kH*kW, L) or 3-D (N, C*kH*kW, L) tensor",
        f"shape {input.shape}",
    )
    geo = _BlockGeometry(
        "fold", _ints("fold", "output_size", output_size, 2, 1), kernel_size, dilation, padding, stride
    )
    k = geo.kernel[0] * geo.kernel[1]
    require(input.shape[-2] % k == 0, "fold", "input", f"a dim -2 divisible by kH*kW = {k}", f"shape {input.shape}")
    blocks = geo.out[0] * geo.out[1]
    require(
        input.shape[-1] == blocks,
        "fold",
        "input",
        f"{blocks} blocks in dim -1 ({geo.out[0]} x {geo.out[1]} for output_size {geo.size})",
        f"shape {input.shape}",
    )


def _unfold_samples(rng):
    return [
        Sample((uniform(rng, (2, 3, 4, 5)),), {"kernel_size": 2}, "2x2"),
        Sample(
            (uniform(rng, (1, 2, 5, 6)),),
            {"kernel_size": (2, 3), "dilation": (2, 1), "padding": 1, "stride": 2},
            "dilation, padding, stride",
        ),
        Sample((uniform(rng, (2, 4, 4)),), {"kernel_size": 3, "padding": (1, 0)}, "unbatched, overlapping"),
        Sample((uniform(rng, (1, 5, 4, 2)).transpose(0, 3, 1, 2),), {"kernel_size": (2, 1)}, "non-contiguous"),
        Sample((uniform(rng, (0, 2, 4, 4)),), {"kernel_size": 2, "stride": 2}, "empty batch"),
    ]


def _fold_samples(rng):
    return [
        Sample((uniform(rng, (2, 12, 12)),), {"output_size": (4, 5), "kernel_size": 2}, "2x2, overlapping"),
        Sample(
            (uniform(rng, (1, 12, 9)),),
            {"output_size": (5, 6), "kernel_size": (2, 3), "dilation": (2, 1), "padding": 1, "stride": 2},
            "dilation, padding, stride",
        ),
        Sample((uniform(rng, (18, 8)),), {"output_size": 4, "kernel_size": 3, "padding": (1, 0)}, "unbatched"),
        Sample(
            (uniform(rng, (6, 8, 1)).transpose(2, 1, 0),), {"output_size": (3, 4), "kernel_size": 2}, "non-contiguous"
        ),
        Sample((uniform(rng, (0, 8, 4)),), {"output_size": 4, "kernel_size": 2, "stride": 2}, "empty batch"),
    ]


unfold = defop(
    "unfold",
    family="conv",
    inputs=("input",),
    forward=_unfold,
    vjps=(_unfold_vjp,),
    check=_check_unfold,
    samples=_unfold_samples,
    notes=case_law(_CASE_LAW, "unfold", "Its backward is fold."),
    torch_ref=functional("unfold"),
)

fold = defop(
    "fold",
    family="conv",
    inputs=("input",),
    forward=_fold,
    vjps=(_fold_vjp,),
    check=_check_fold,
    samples=_fold_samples,
    notes=case_law(_CASE_LAW, "fold", "Its backward is unfold."),
    torch_ref=functional("fold"),
)


# -- pooling -----------------------------------------------------------------------------------------------
class _PoolGeometry:
    """Kernel, stride, padding and dilation of a pooling over the last ``spatial`` (2 or 3) axes, torch's output
    size (``ceil_mode`` included) and the padding each side needs so every window lies inside the padded array."""

    def __init__(self, op, shape, kernel_size, stride, padding, dilation, ceil_mode, spatial=2):
        self.kernel = _ints(op, "kernel_size", kernel_size, spatial, 1, one_for_all=True)
        self.stride = self.kernel if _no_stride(stride) else _ints(op, "stride", stride, spatial, 1)
        padding = _ints(op, "padding", padding, spatial, 0, one_for_all=True)
        self.dilation = _ints(op, "dilation", dilation, spatial, 1, one_for_all=True)
        require_bool(op, "ceil_mode", ceil_mode)
        effective = tuple(d * (k - 1) + 1 for d, k in zip(self.dilation, self.kernel))
        require(
            all(2 * p <= e for p, e in zip(padding, effective)),
            op,
            "padding",
            f"at most half of the (dilated) kernel size {effective}",
            padding,
        )
        out, pads = [], []
        for n, k, s, p in zip(shape[-spatial:], effective, self.stride, padding):
            size = (n + 2 * p - k + (s - 1 if ceil_mode else 0)) // s + 1
            if ceil_mode and (size - 1) * s >= n + p:  # the last window must start inside input or left padding
                size -= 1
            out.append(size)
            pads.append((p, max((size - 1) * s + k - n - p, 0)))
        require(
            min(out) >= 1,
            op,
            "input",
            f"a spatial size of at least the kernel extent {effective} after padding {padding}",
            f"shape {shape}",
        )
        self.out, self.pads, self.padding = tuple(out), tuple(pads), padding
        self.padded = tuple(n + a + b for n, (a, b) in zip(shape[-spatial:], pads))


def _require_only_batch_empty(op, x, spatial):
    """torch's pooling rule: of (C, *spatial) or (N, C, *spatial) only the batch dim N may be 0."""
    dims = x.shape[1:] if x.ndim == spatial + 2 else x.shape
    require(
        min(dims, default=1) >= 1,
        op,
        "input",
        f"non-zero channel and spatial dims ((C, *spatial) or (N, C, *spatial) with {spatial} spatial dim(s); "
        "only the batch dim N may be 0)",
        f"shape {x.shape}",
    )


def _pool_input(op, x, spatial=2):
    _check_input_rank(op, x, spatial)
    _require_only_batch_empty(op, x, spatial)
    return _batched(x, spatial)


def _max_pool_index(xb, geo):
    """The (N, C, *out) position, in row-major kernel order, of each window's first maximum in the (N, C, *spatial)
    batch ``xb`` (a NaN wins, as in torch's CPU kernels), and that maximum.
    A window whose input cells are all -inf ties with its -inf padding: torch's kernels start from the window's
    first input cell, so that cell (never padding) is the position there."""
    spatial = len(geo.kernel)
    view = (geo.kernel, geo.stride, geo.dilation, geo.out)
    windows = _windows(_pad(xb, geo.pads, -np.inf), *view, kernel_last=True)
    flat = windows.reshape(windows.shape[: 2 + spatial] + (math.prod(geo.kernel),))
    index = np.argmax(flat, axis=-1)
    values = np.take_along_axis(flat, index[..., None], axis=-1)[..., 0]
    if not any(before or after for before, after in geo.pads) or not np.isneginf(values).any():
        return index, values
    inside = _windows(_pad(np.ones((1, 1) + xb.shape[2:], bool), geo.pads, False), *view, kernel_last=True)
    inside = inside.reshape((1, 1) + flat.shape[2:])
    on_padding = ~np.take_along_axis(inside, index[..., None], axis=-1)[..., 0]
    return np.where(on_padding, np.argmax(inside, axis=-1), index), values  # the input cell is -inf too


def _flat_input_indices(index, geo, shape):
    """The window positions ``index`` (row-major kernel offsets, (N, C, *out)) as torch's indices: the flat
    position (``h * W + w``, ``d * H * W + h * W + w``) in the unpadded input plane or volume of ``shape``."""
    spatial = len(geo.kernel)
    offsets = np.unravel_index(index.astype(np.int64), geo.kernel)
    position = 0
    for axis, (n, offset) in enumerate(zip(shape[-spatial:], offsets)):
        starts = np.arange(geo.out[axis]) * geo.stride[axis] - geo.pads[axis][0]
        position = position * n + starts.reshape((-1,) + (1,) * (spatial - 1 - axis)) + offset * geo.dilation[axis]
    return position


def _max_pool(x, geo, return_indices):
    """Max pooling ``geo`` of ``x`` (its last len(geo.kernel) axes): (values, with return_indices=True (values,
    torch's int64 flat indices)), and what the backward needs (the window offsets of the maxima, the geometry)."""
    spatial = len(geo.kernel)
    index, values = _max_pool_index(_batched(x, spatial), geo)
    out = values.reshape(x.shape[:-spatial] + geo.out)
    saved = {"indices": index.astype(np.min_scalar_type(math.prod(geo.kernel))), "geo": geo}
    if return_indices:
        return (out, _flat_input_indices(saved["indices"], geo, x.shape).reshape(out.shape)), saved
    return out, saved


# return_indices=True gives (output, indices) -- a named pair, unpacked like torch's tuple; False one array
_VALUES_INDICES = ("output", "indices")


def _values_rule(rule):
    """A max pool's rule serving calls with return_indices=True too, whose outputs are (values, indices): the
    values' gradient g[0] goes to ``rule`` (zeros when only the indices were used)."""

    def wrapped(g, ans, input, *args, return_indices=False, **attrs):
        if isinstance(g, tuple):
            if g[0] is None:
                return np.zeros_like(input)
            g, ans = g[0], ans[0]
        return rule(g, ans, input, *args, **attrs)

    return wrapped


def _values_composite(composite, indices_of):
    """A max pool's composite serving return_indices=True too: (the values' composite, the forward's indices
    ``indices_of(input array, **attrs)`` as a constant)."""

    def wrapped(input, *, return_indices=False, **attrs):
        out = composite(input, **attrs)
        return (out, Tensor._wrap(indices_of(constant_values(input), **attrs))) if return_indices else out

    return wrapped


def _with_return_indices(samples: list) -> list:
    """A max pool's samples plus the first two and the last (an empty batch) again with return_indices=True."""
    again = [samples[0], samples[1], samples[-1]]
    return samples + [
        Sample(x.inputs, {**x.attrs, "return_indices": True}, f"{x.label}, return_indices", x.torch) for x in again
    ]


def _max_pool_vjp(g, ans, input, *, indices, geo, **attrs):
    """Each output's gradient added at its maximum's flat position in its input plane (volume): one bincount."""
    spatial = len(geo.kernel)
    size = math.prod(input.shape[-spatial:])
    planes = math.prod(indices.shape[:2])
    position = _flat_input_indices(indices, geo, input.shape).reshape(planes, math.prod(geo.out))
    target = (position + (np.arange(planes) * size)[:, None]).ravel()
    summed = np.bincount(target, weights=np.reshape(g, -1), minlength=planes * size)
    return summed.astype(g.dtype, copy=False).reshape(input.shape)


def _gather_flat(input, flat, spatial=2):
    """The entries of (N, C, *spatial) or (C, *spatial) Tensor ``input`` at flat plane (volume) positions ``flat``
    (an int array of the output's shape), with registered ops (gather, whose backward is scatter_add)."""
    from .indexing import gather  # at call time: the families register in ops/__init__'s order
    from .shape import reshape

    planes = reshape(input, input.shape[:-spatial] + (math.prod(input.shape[-spatial:]),))
    picked = gather(planes, planes.ndim - 1, flat.reshape(flat.shape[:-spatial] + (math.prod(flat.shape[-spatial:]),)))
    return reshape(picked, flat.shape)


def _max_pool_selection(input, geo):
    """A max pool's values with registered ops: the input gathered at the forward's argmax (a constant) -- what
    its second order differentiates."""
    spatial = len(geo.kernel)
    index, _ = _max_pool_index(_batched(constant_values(input), spatial), geo)
    flat = _flat_input_indices(index, geo, input.shape).reshape(input.shape[:-spatial] + geo.out)
    return _gather_flat(input, flat, spatial)


def _max_pool_nd(op, spatial):
    """max_pool2d's or max_pool3d's forward, composite and check: one kernel over ``spatial`` axes."""

    def forward(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        geo = _PoolGeometry(op, input.shape, kernel_size, stride, padding, dilation, ceil_mode, spatial)
        return _max_pool(input, geo, return_indices)

    def composite(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        geo = _PoolGeometry(op, input.shape, kernel_size, stride, padding, dilation, ceil_mode, spatial)
        return _max_pool_selection(input, geo)

    def check(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        require_bool(op, "return_indices", return_indices)
        _pool_input(op, input, spatial)
        _PoolGeometry(op, input.shape, kernel_size, stride, padding, dilation, ceil_mode, spatial)

    return forward, composite, check


def _pool_op(name, forward, vjp, check, samples, notes, **declaration):
    """Declare a pooling (or resampling) op of one tensor, ``input``; its torch reference is
    ``torch.nn.functional.<name>`` unless ``declaration`` (defop's other fields) gives one."""
    declaration.setdefault("torch_ref", functional(name))
    return defop(
        name,
        family="conv",
        inputs=("input",),
        forward=forward,
        vjps=(vjp,),
        check=check,
        samples=samples,
        notes=notes,
        **declaration,
    )


def _max_pool_op(name, forward, vjp, composite, check, samples, notes, *, doc=""):
    """Declare a max pool: values, or (values, indices) with return_indices=True (the forward's own indices, a
    constant, in the composite)."""
    return _pool_op(
        name,
        forward,
        _values_rule(vjp),
        check,
        lambda rng: _with_return_indices(samples(rng)),
        notes,
        returns_aux=True,
        outputs=_VALUES_INDICES,
        composite=_values_composite(composite, lambda x, **attrs: forward(x, **attrs, return_indices=True)[0][1]),
        doc=doc,
    )


def _max_pool_samples(rng):
    return [
        Sample((uniform(rng, (2, 2, 4, 4)),), {"kernel_size": 2}, "2x2, stride defaults to kernel"),
        Sample((uniform(rng, (1, 3, 5, 5)),), {"kernel_size": 3, "stride": 1, "padding": 1}, "overlapping"),
        Sample(
            (uniform(rng, (1, 2, 5, 6)),),
            {"kernel_size": (2, 3), "stride": (2, 1), "ceil_mode": True},
            "ceil_mode, tuple kernel",
        ),
        Sample(
            (uniform(rng, (1, 2, 7, 7)),),
            {"kernel_size": 2, "stride": 2, "dilation": 2, "padding": 1},
            "dilation 2, padding 1",
        ),
        Sample(
            (uniform(rng, (2, 5, 5)),),
            {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
            "unbatched, ceil_mode",
        ),
        Sample((uniform(rng, (1, 5, 5, 2)).transpose(0, 3, 1, 2),), {"kernel_size": 2, "stride": 1}, "non-contiguous"),
        Sample((uniform(rng, (0, 2, 4, 4)),), {"kernel_size": 2}, "empty batch"),
    ]
    # tied maxima are not differentiable, so finite differences cannot check them: tests/ops/test_conv.py
    # compares the tie choice with torch


_max_pool2d, _max_pool2d_composite, _check_max_pool2d = _max_pool_nd("max_pool2d", 2)
max_pool2d = _max_pool_op(
    "max_pool2d",
    _max_pool2d,
    _max_pool_vjp,
    _max_pool2d_composite,
    _check_max_pool2d,
    _max_pool_samples,
    notes=case_law(
        _CASE_LAW,
        "max_pool2d",
        "Ties: the gradient goes to the first maximum of each window in row-major (kh, kw) order, a NaN "
        "counting as the maximum -- what torch's CPU kernel does. return_indices=True returns (output, int64 "
        "indices) as torch's; the indices take no gradient.",
    ),
    doc=(
        "The maximum over each sliding window of the last two dims, as torch.nn.functional.max_pool2d;\n"
        "return_indices=True also returns where each maximum was (flat indices into each H x W plane)."
    ),
)


def _avg_divisor(geo, shape, count_include_pad, divisor_override, dtype):
    """The (*out) divisor of each window: torch counts padding cells but not cells past the padding
    (which only ceil_mode windows reach), or only input cells when ``count_include_pad`` is False."""
    if divisor_override is not None:
        return np.asarray(divisor_override, dtype=dtype)
    counts = []
    for n, k, s, p, size in zip(shape[-len(geo.kernel) :], geo.kernel, geo.stride, geo.padding, geo.out):
        start = np.arange(size) * s - p
        end = np.minimum(start + k, n + p)
        if not count_include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, n)
        counts.append(end - start)
    return reduce(np.multiply.outer, counts).astype(dtype)


def _avg_pool_vjp(g, ans, input, *, geo, divisor, **attrs):
    spatial = len(geo.kernel)
    gb = _batched(g / divisor, spatial)
    grad_windows = np.broadcast_to(gb[(slice(None),) * 2 + (None,) * spatial], gb.shape[:2] + geo.kernel + geo.out)
    grad = _scatter_windows(grad_windows, gb.shape[:2] + geo.padded, geo.stride, geo.dilation)
    return _unpad(grad, geo.pads, _batched(input, spatial).shape).reshape(input.shape)


def _window_sums(input, geo):
    """The sum of each window of Tensor ``input`` (zero padding) with registered ops: conv1d / conv2d / conv3d of
    each channel with a kernel of ones."""
    from .shape import pad, reshape, unsqueeze  # at call time: the families register in ops/__init__'s order

    spatial = len(geo.kernel)
    x = input if input.ndim == spatial + 2 else unsqueeze(input, 0)
    n, c = x.shape[:2]
    x = pad(x, tuple(p for pair in reversed(geo.pads) for p in pair))  # torch's order: last axis first
    ones = np.ones((1, 1) + geo.kernel, input.dtype)
    sums = (conv1d, conv2d, conv3d)[spatial - 1](reshape(x, (n * c, 1) + tuple(x.shape[2:])), ones, None, geo.stride)
    return reshape(sums, input.shape[:-spatial] + geo.out)


def _check_divisor_override(op, divisor_override):
    require(
        bool(divisor_override is None or (isinstance(divisor_override, int | np.integer) and divisor_override > 0)),
        op,
        "divisor_override",
        "None or a positive int",
        divisor_override,
    )


def _avg_pool_nd(op, spatial):
    """avg_pool2d's or avg_pool3d's forward, composite (window sums through a convolution with ones, over the
    divisor) and check: one kernel over ``spatial`` axes."""

    def forward(
        input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
    ):
        geo = _PoolGeometry(op, input.shape, kernel_size, stride, padding, 1, ceil_mode, spatial)
        windows = _windows(
            _pad(_batched(input, spatial), geo.pads), geo.kernel, geo.stride, geo.dilation, geo.out, True
        )
        divisor = _avg_divisor(geo, input.shape, count_include_pad, divisor_override, input.dtype)
        out = np.sum(windows, axis=tuple(range(-spatial, 0))) / divisor
        return out.reshape(input.shape[:-spatial] + geo.out), {"geo": geo, "divisor": divisor}

    def composite(
        input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
    ):
        geo = _PoolGeometry(op, input.shape, kernel_size, stride, padding, 1, ceil_mode, spatial)
        return _window_sums(input, geo) / _avg_divisor(
            geo, input.shape, count_include_pad, divisor_override, input.dtype
        )

    def check(
        input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
    ):
        _pool_input(op, input, spatial)
        _PoolGeometry(op, input.shape, kernel_size, stride, padding, 1, ceil_mode, spatial)
        require_bool(op, "count_include_pad", count_include_pad)
        _check_divisor_override(op, divisor_override)

    return forward, composite, check


def _avg_pool_op(name, forward, vjp, composite, check, samples, notes=None, *, doc=""):
    """Declare an average pool (its notes: the case law's unless given)."""
    notes = case_law(_CASE_LAW, name) if notes is None else notes
    return _pool_op(name, forward, vjp, check, samples, notes, returns_aux=True, composite=composite, doc=doc)


def _avg_pool_samples(rng):
    return [
        Sample((uniform(rng, (2, 2, 4, 4)),), {"kernel_size": 2}, "2x2"),
        Sample((uniform(rng, (1, 2, 5, 5)),), {"kernel_size": 3, "stride": 1, "padding": 1}, "padding counted"),
        Sample(
            (uniform(rng, (1, 2, 5, 5)),),
            {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
            "padding not counted",
        ),
        Sample(
            (uniform(rng, (1, 2, 5, 6)),),
            {"kernel_size": (3, 2), "stride": 2, "padding": (1, 1), "ceil_mode": True},
            "ceil_mode with padding",
        ),
        Sample(
            (uniform(rng, (1, 2, 5, 6)),),
            {"kernel_size": 3, "stride": 2, "ceil_mode": True, "count_include_pad": False},
            "ceil_mode, padding not counted",
        ),
        Sample(
            (uniform(rng, (3, 4, 4)),),
            {"kernel_size": 2, "stride": 1, "divisor_override": 3},
            "unbatched, divisor_override",
        ),
        Sample((uniform(rng, (1, 5, 4, 2)).transpose(0, 3, 1, 2),), {"kernel_size": (2, 1)}, "non-contiguous"),
        Sample((uniform(rng, (0, 2, 4, 4)),), {"kernel_size": 3, "stride": 1, "padding": 1}, "empty batch"),
    ]


_avg_pool2d, _avg_pool2d_composite, _check_avg_pool2d = _avg_pool_nd("avg_pool2d", 2)
avg_pool2d = _avg_pool_op(
    "avg_pool2d",
    _avg_pool2d,
    _avg_pool_vjp,
    _avg_pool2d_composite,
    _check_avg_pool2d,
    _avg_pool_samples,
    doc="The mean over each sliding window of the last two dims, as torch.nn.functional.avg_pool2d.",
)


# -- nearest upsampling ------------------------------------------------------------------------------------
def _require_size_or_scale(op, size, scale_factor) -> None:
    require(
        (scale_factor is None) != (size is None),
        op,
        "size / scale_factor",
        "exactly one of them",
        f"size={size!r}, scale_factor={scale_factor!r}",
    )


def _resize_plan(op, shape, scale_factor, size):
    """Per spatial axis: (output size, scale) where scale is 1/scale_factor if given, else in/out -- what
    torch's nearest kernel uses to map an output index to ``floor(index * scale)``."""
    _require_size_or_scale(op, size, scale_factor)
    if size is not None:
        sizes = _ints(op, "size", size, 2, 1)
        return [(out, None) for out in sizes]
    return [(out, 1.0 / f) for out, f in _scaled_sizes(op, shape, scale_factor, 2, "an output of at least 1x1")]


def _scaled_sizes(op, shape, scale_factor, spatial: int, at_least: str) -> list[tuple[int, float]]:
    """Per spatial axis (the last ``spatial`` of ``shape``): (``floor(in * factor)``, factor) for a positive
    scale_factor (one number or one per axis), each size at least 1. The factor is a Python float first, as
    torch's: float32(0.7) * 10 is 7 in float32 but 6.99999988 in double."""
    factors = tuple(scale_factor) if isinstance(scale_factor, tuple | list) else (scale_factor,) * spatial
    ok = len(factors) == spatial and all(
        isinstance(f, int | float | np.number) and not isinstance(f, bool) and f > 0 for f in factors
    )
    require(ok, op, "scale_factor", f"a positive number or a tuple of {spatial}", scale_factor)
    sizes = [(math.floor(n * float(f)), float(f)) for n, f in zip(shape[len(shape) - spatial :], factors)]
    require(
        all(out >= 1 for out, _ in sizes),
        op,
        "scale_factor",
        f"a factor giving {at_least} from input {shape}",
        scale_factor,
    )
    return sizes


def _source_indices(n_in: int, n_out: int, scale) -> np.ndarray:
    """The input index each output index copies (torch's nearest rule, in float32 arithmetic as torch)."""
    if n_out == n_in:
        return np.arange(n_out)
    if n_out == 2 * n_in:
        return np.arange(n_out) // 2
    scale = np.float32(n_in / n_out if scale is None else scale)
    return np.minimum(np.floor(np.arange(n_out, dtype=np.float32) * scale).astype(np.int64), n_in - 1)


def _upsample_indices(input, scale_factor, size):
    plan = _resize_plan("upsample2d", input.shape, scale_factor, size)
    return [_source_indices(n, out, scale) for n, (out, scale) in zip(input.shape[-2:], plan)]


def _upsample2d(input, scale_factor=None, size=None):
    rows, cols = _upsample_indices(input, scale_factor, size)
    return input[:, :, rows[:, None], cols[None, :]]


def _upsample2d_vjp(g, ans, input, scale_factor=None, size=None):
    # dx = R^T g C with R, C the one-hot (output, input) selection matrices of rows and columns
    rows, cols = _upsample_indices(input, scale_factor, size)
    select_rows = (rows[:, None] == np.arange(input.shape[2])).astype(g.dtype)
    select_cols = (cols[:, None] == np.arange(input.shape[3])).astype(g.dtype)
    return select_rows.T @ g @ select_cols


def _check_upsample2d(input, scale_factor=None, size=None):
    require_float("upsample2d", "input", input)
    require(input.ndim == 4, "upsample2d", "input", "a 4-D tensor (N, C, H, W)", f"shape {input.shape}")
    _resize_plan("upsample2d", input.shape, scale_factor, size)


def _upsample_samples(rng):
    return [
        Sample((uniform(rng, (1, 2, 3, 3)),), {"scale_factor": 2}, "scale 2"),
        Sample((uniform(rng, (2, 1, 2, 3)),), {"scale_factor": (3, 2)}, "scale (3, 2)"),
        Sample((uniform(rng, (1, 2, 4, 3)),), {"size": (6, 7)}, "size, not a multiple"),
        Sample((uniform(rng, (1, 1, 5, 6)),), {"size": (3, 4)}, "size smaller than input"),
        Sample((uniform(rng, (1, 2, 3, 4)),), {"scale_factor": 1.5}, "float scale"),
        Sample((uniform(rng, (1, 3, 4, 2)).transpose(0, 3, 1, 2),), {"size": 5}, "non-contiguous, int size"),
        Sample((uniform(rng, (0, 2, 3, 3)),), {"scale_factor": 2}, "empty batch"),
    ]


upsample2d = _pool_op(
    "upsample2d",
    _upsample2d,
    _upsample2d_vjp,
    _check_upsample2d,
    _upsample_samples,
    notes=case_law(_CASE_LAW, "upsample2d", "torch.nn.functional.interpolate(mode='nearest') on (N, C, H, W) input."),
    torch_ref=lambda torch, input, scale_factor=None, size=None: torch.nn.functional.interpolate(
        input, size=size, scale_factor=scale_factor, mode="nearest"
    ),
    doc=(
        "Nearest-neighbour resize of an (N, C, H, W) input by scale_factor or to size, as\n"
        "torch.nn.functional.interpolate(mode='nearest')."
    ),
)


# -- transposed convolution --------------------------------------------------------------------------------
def _transpose_geometry(op, spatial, x_shape, w_shape, stride, padding, output_padding, dilation):
    """The conv geometry whose input-gradient this transposed convolution is: the conv runs over the
    transposed conv's output (``(in - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding
    + 1`` per axis) and gives back the transposed conv's input size."""
    strides = _ints(op, "stride", stride, spatial, 1, one_for_all=True)
    pads = _ints(op, "padding", padding, spatial, 0, one_for_all=True)
    dilations = _ints(op, "dilation", dilation, spatial, 1, one_for_all=True)
    extra = _ints(op, "output_padding", output_padding, spatial, 0, one_for_all=True)
    require(
        all(e < s or e < d for e, s, d in zip(extra, strides, dilations)),
        op,
        "output_padding",
        f"smaller than either stride {strides} or dilation {dilations}",
        output_padding,
    )
    out = tuple(
        (n - 1) * s - 2 * p + d * (k - 1) + e + 1
        for n, s, p, d, k, e in zip(x_shape[-spatial:], strides, pads, dilations, w_shape[2:], extra)
    )
    require(
        min(out) >= 1, op, "input", f"a size giving a positive output size, got output {out} from", f"shape {x_shape}"
    )
    geo = _ConvGeometry(op, out, w_shape, strides, pads, dilations, spatial)
    geo.extra, geo.out_size = extra, out
    # the windows are the transposed conv's input positions (an output_padding >= stride would give one more)
    geo.out = tuple(x_shape[-spatial:])
    return geo


def _check_conv_transpose(op, spatial, x, weight, bias, stride, padding, output_padding, groups, dilation):
    in_channels = _check_conv_arguments(op, spatial, x, weight, groups, "in_channels, out_channels/groups")
    require(
        weight.shape[0] == in_channels, op, "weight", f"in_channels = {in_channels} in dim 0", f"shape {weight.shape}"
    )
    _check_bias(op, bias, weight.shape[1] * groups)
    _transpose_geometry(op, spatial, x.shape, weight.shape, stride, padding, output_padding, dilation)


def _conv_transpose_op(name, spatial, composite, samples, notes="", *, doc=""):
    """Declare conv_transpose1d or conv_transpose2d: the adjoint of conv, so its forward is conv's input
    gradient kernel, its input gradient is conv's forward and its weight gradient conv's weight gradient with
    the roles of input and output gradient swapped."""

    def forward(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        geo = _transpose_geometry(name, spatial, input.shape, weight.shape, stride, padding, output_padding, dilation)
        x = _batched(input, spatial)
        shape = (x.shape[0], weight.shape[1] * groups) + geo.out_size
        out, _, _ = _conv_backward(x, None, weight, geo, groups, (True, False), x_shape=shape)
        if bias is not None:
            out = out + bias.reshape((-1,) + (1,) * spatial)
        return np.ascontiguousarray(out).reshape(input.shape[: input.ndim - spatial - 1] + shape[1:]), {"geo": geo}

    def joint_vjp(g, ans, input, weight, bias, *, needs, stride, padding, output_padding, groups, dilation, geo):
        g_batched, x = _batched(g, spatial), _batched(input, spatial)
        dx = dw = db = None
        if needs[0]:
            dx = _conv_forward(g_batched, weight, None, geo, groups).reshape(input.shape)
        if needs[1]:
            dw = _conv_backward(x, g_batched, weight, geo, groups, (False, True))[1]
        if len(needs) > 2 and needs[2]:
            db = np.sum(g_batched, axis=(0, *range(2, g_batched.ndim)))
        return dx, dw, db

    def check(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        _check_conv_transpose(name, spatial, input, weight, bias, stride, padding, output_padding, groups, dilation)

    own = "The adjoint of conv: weight (in_channels, out_channels/groups, *kernel)."
    return _declare_conv(name, forward, joint_vjp, check, composite, samples, f"{own} {notes}".rstrip(), doc=doc)


def _conv_transpose2d_composite(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """conv_transpose2d with registered ops, for its second order: a matmul with the transposed weight gives
    every input position's contribution to a window, and fold adds the windows up (then output_padding's rows)."""
    from .linalg import matmul  # at call time: the families register in ops/__init__'s order
    from .shape import pad, reshape, transpose, unsqueeze

    geo = _transpose_geometry(
        "conv_transpose2d", 2, input.shape, weight.shape, stride, padding, output_padding, dilation
    )
    x4 = input if input.ndim == 4 else unsqueeze(input, 0)
    n, in_channels = x4.shape[:2]
    out_channels = weight.shape[1] * groups
    k = geo.kernel[0] * geo.kernel[1]
    rows = out_channels // groups * k
    w_t = transpose(reshape(weight, (groups, in_channels // groups, rows)), 1, 2)  # (G, O/G*k, C/G)
    positions = x4.shape[2] * x4.shape[3]
    cols = matmul(w_t, reshape(x4, (n, groups, in_channels // groups, positions)))
    # fold without padding gives the full (in - 1) * stride + dilated kernel extent; the output is its
    # [padding, padding + out) part, zero past the end when output_padding > padding
    full = tuple(
        (size - 1) * s + d * (kk - 1) + 1 for size, s, d, kk in zip(x4.shape[2:], geo.stride, geo.dilation, geo.kernel)
    )
    out = fold(reshape(cols, (n, out_channels * k, positions)), full, geo.kernel, geo.dilation, 0, geo.stride)
    (top, _), (left, _) = geo.pads
    size = geo.out_size
    beyond = [max(top + size[0] - full[0], 0), max(left + size[1] - full[1], 0)]
    if any(beyond):
        out = pad(out, (0, beyond[1], 0, beyond[0]))
    out = out[:, :, top : top + size[0], left : left + size[1]]
    if bias is not None:
        out = out + reshape(bias, (out_channels, 1, 1))
    return reshape(out, input.shape[: input.ndim - 3] + (out_channels,) + size)


def _conv_transpose1d_composite(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _over_unit_height(
        _conv_transpose2d_composite,
        input,
        weight,
        bias,
        groups,
        stride=stride,
        padding=padding,
        output_padding=output_padding,
        dilation=dilation,
    )


def _conv_transpose_sample(rng, x_shape, w_shape, bias, label, groups=1, **attrs):
    """One transposed-convolution sample: input, weight (in, out/groups, *kernel), a bias of out channels or None."""
    return Sample(
        (uniform(rng, x_shape), uniform(rng, w_shape), uniform(rng, (w_shape[1] * groups,)) if bias else None),
        dict(attrs, groups=groups),
        label,
    )


def _conv_transpose2d_samples(rng):
    s = functools.partial(_conv_transpose_sample, rng)

    return [
        s((1, 2, 3, 3), (2, 3, 3, 3), True, "plain with bias"),
        s(
            (2, 2, 3, 4),
            (2, 2, 2, 3),
            False,
            "stride 2, padding 1, output_padding 1",
            stride=2,
            padding=1,
            output_padding=1,
        ),
        s((1, 2, 3, 3), (2, 2, 2, 2), True, "dilation 2, tuple stride", stride=(1, 2), dilation=2),
        s((1, 4, 3, 3), (4, 1, 2, 2), True, "groups 2, tuple padding", groups=2, padding=(1, 0), stride=2),
        s((1, 2, 3, 3), (2, 2, 2, 2), False, "output_padding below dilation", dilation=2, output_padding=1),
        s((2, 3, 3), (2, 2, 3, 3), True, "unbatched, stride 2", stride=2, padding=1),
        Sample(
            (uniform(rng, (1, 3, 4, 2)).transpose(0, 3, 1, 2), uniform(rng, (2, 2, 2, 2)).transpose(3, 2, 0, 1), None),
            {"stride": 2},
            "non-contiguous input and weight",
        ),
        s((0, 2, 3, 3), (2, 3, 2, 2), True, "empty batch", stride=2),
    ]


def _conv_transpose1d_samples(rng):
    s = functools.partial(_conv_transpose_sample, rng)

    return [
        s((2, 3, 5), (3, 4, 3), True, "plain with bias"),
        s(
            (2, 2, 4),
            (2, 2, 3),
            False,
            "stride 3, padding 1, output_padding 2, dilation 2",
            stride=3,
            padding=1,
            output_padding=2,
            dilation=2,
        ),
        s((1, 4, 4), (4, 3, 2), True, "groups 2", groups=2, stride=2),
        s((3, 5), (3, 2, 4), True, "unbatched, tuple stride", stride=(2,), padding=(1,)),
        Sample(
            (uniform(rng, (5, 3, 2)).transpose(1, 2, 0), uniform(rng, (3, 2, 2)).transpose(1, 2, 0), None),
            {"padding": 1},
            "non-contiguous",
        ),
        s((0, 2, 5), (2, 3, 2), True, "empty batch", stride=2),
    ]


conv_transpose2d = _conv_transpose_op(
    "conv_transpose2d",
    2,
    _conv_transpose2d_composite,
    _conv_transpose2d_samples,
    notes=case_law(_CASE_LAW, "conv_transpose2d"),
    doc=(
        "2-D transposed convolution (conv2d's input gradient) of an (N, C_in, H, W) input with\n"
        "(C_in, C_out/groups, kH, kW) weights, plus an optional bias, as torch.nn.functional.conv_transpose2d."
    ),
)
conv_transpose1d = _conv_transpose_op(
    "conv_transpose1d",
    1,
    _conv_transpose1d_composite,
    _conv_transpose1d_samples,
    notes=case_law(_CASE_LAW, "conv_transpose1d"),
    doc=(
        "1-D transposed convolution (conv1d's input gradient) of an (N, C_in, L) input with (C_in, C_out/groups, k)\n"
        "weights, plus an optional bias, as torch.nn.functional.conv_transpose1d."
    ),
)


# -- 1-D pooling (2-D pooling over a height of 1) ----------------------------------------------------------
def _pool1d_args(op, kernel_size, stride, padding, dilation=1) -> tuple[tuple, tuple, tuple, tuple]:
    """1-D pooling arguments as the 2-D ones of a height-1 pooling."""
    k = _ints(op, "kernel_size", kernel_size, 1, 1)[0]
    s = k if _no_stride(stride) else _ints(op, "stride", stride, 1, 1)[0]
    p = _ints(op, "padding", padding, 1, 0)[0]
    d = _ints(op, "dilation", dilation, 1, 1)[0]
    return (1, k), (1, s), (0, p), (1, d)


def _check_pool1d_input(op, x):
    _check_input_rank(op, x, 1)
    _require_only_batch_empty(op, x, 1)


def _max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    kernel, strides, pads, dilations = _pool1d_args("max_pool1d", kernel_size, stride, padding, dilation)
    x2 = input[..., None, :]
    geo = _PoolGeometry("max_pool1d", x2.shape, kernel, strides, pads, dilations, ceil_mode)
    out, saved = _max_pool(x2, geo, return_indices)  # over a height of 1, h * W + w is the position along L
    length = input.shape[:-1] + geo.out[1:]
    return (tuple(a.reshape(length) for a in out) if return_indices else out.reshape(length)), saved


def _on_height_one(rule_2d):
    """A 1-D pooling's rule: the 2-D pooling's rule over a height of 1 (the forward saved that pooling's
    geometry)."""

    def rule(g, ans, input, **attrs):
        return rule_2d(g[..., None, :], None, input[..., None, :], **attrs).reshape(input.shape)

    return rule


def _max_pool1d_composite(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    from .shape import reshape, unsqueeze  # at call time: the families register in ops/__init__'s order

    x2 = unsqueeze(input, input.ndim - 1)
    out = _max_pool2d_composite(x2, *_pool1d_args("max_pool1d", kernel_size, stride, padding, dilation), ceil_mode)
    return reshape(out, out.shape[:-2] + out.shape[-1:])


def _check_max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    require_bool("max_pool1d", "return_indices", return_indices)
    _check_pool1d_input("max_pool1d", input)
    _PoolGeometry(
        "max_pool1d",
        input[..., None, :].shape,
        *_pool1d_args("max_pool1d", kernel_size, stride, padding, dilation),
        ceil_mode,
    )


def _pool1d_samples(rng, max_pool):
    extra = {"dilation": 2} if max_pool else {"count_include_pad": False}
    return [
        Sample((uniform(rng, (2, 3, 6)),), {"kernel_size": 2}, "stride defaults to kernel"),
        Sample((uniform(rng, (1, 2, 7)),), {"kernel_size": 3, "stride": 1, "padding": 1}, "overlapping, padding"),
        Sample(
            (uniform(rng, (1, 2, 8)),),
            dict({"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, **extra),
            f"ceil_mode, {next(iter(extra))}",
        ),
        Sample((uniform(rng, (3, 7)),), {"kernel_size": (3,), "stride": (2,)}, "unbatched, tuple args"),
        Sample((uniform(rng, (7, 2, 2)).transpose(1, 2, 0),), {"kernel_size": 2, "stride": 1}, "non-contiguous"),
        Sample((uniform(rng, (0, 2, 6)),), {"kernel_size": 2}, "empty batch"),
    ]


max_pool1d = _max_pool_op(
    "max_pool1d",
    _max_pool1d,
    _on_height_one(_max_pool_vjp),
    _max_pool1d_composite,
    _check_max_pool1d,
    lambda rng: _pool1d_samples(rng, True),
    notes=case_law(
        _CASE_LAW,
        "max_pool1d",
        "Ties as max_pool2d: the first maximum of each window gets the gradient, a NaN counting as the maximum.",
    ),
    doc=(
        "The maximum over each sliding window of the last dim, as torch.nn.functional.max_pool1d;\n"
        "return_indices=True also returns where each maximum was."
    ),
)


def _avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    kernel, strides, pads, _ = _pool1d_args("avg_pool1d", kernel_size, stride, padding)
    out, saved = _avg_pool2d(input[..., None, :], kernel, strides, pads, ceil_mode, count_include_pad)
    return out.reshape(out.shape[:-2] + out.shape[-1:]), saved


def _avg_pool1d_composite(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    from .shape import reshape, unsqueeze  # at call time: the families register in ops/__init__'s order

    kernel, strides, pads, _ = _pool1d_args("avg_pool1d", kernel_size, stride, padding)
    out = _avg_pool2d_composite(unsqueeze(input, input.ndim - 1), kernel, strides, pads, ceil_mode, count_include_pad)
    return reshape(out, out.shape[:-2] + out.shape[-1:])


def _check_avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    _check_pool1d_input("avg_pool1d", input)
    kernel, strides, pads, _ = _pool1d_args("avg_pool1d", kernel_size, stride, padding)
    _PoolGeometry("avg_pool1d", input[..., None, :].shape, kernel, strides, pads, 1, ceil_mode)
    require_bool("avg_pool1d", "count_include_pad", count_include_pad)


avg_pool1d = _avg_pool_op(
    "avg_pool1d",
    _avg_pool1d,
    _on_height_one(_avg_pool_vjp),
    _avg_pool1d_composite,
    _check_avg_pool1d,
    lambda rng: _pool1d_samples(rng, False),
    doc="The mean over each sliding window of the last dim, as torch.nn.functional.avg_pool1d.",
)


# -- max pooling with indices, max unpooling -----------------------------------------------------------------
def _max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    out, saved = _max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)
    flat = _flat_input_indices(saved["indices"], saved["geo"], input.shape)
    return (out, flat.reshape(out.shape)), saved


def _max_pool2d_with_indices_vjp(g, ans, input, *, indices, **attrs):
    if g[0] is None:
        return np.zeros_like(input)
    return _max_pool_vjp(g[0], ans[0], input, indices=indices, **attrs)


def _max_pool2d_with_indices_composite(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """The values as a gather of the input at the forward's (constant) indices: what the second order
    differentiates."""
    (_, flat), _ = _max_pool2d_with_indices(constant_values(input), kernel_size, stride, padding, dilation, ceil_mode)
    return _gather_flat(input, flat), Tensor._wrap(flat)


def _check_max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    _pool_input("max_pool2d_with_indices", input)
    _PoolGeometry("max_pool2d_with_indices", input.shape, kernel_size, stride, padding, dilation, ceil_mode)


max_pool2d_with_indices = _pool_op(
    "max_pool2d_with_indices",
    _max_pool2d_with_indices,
    _max_pool2d_with_indices_vjp,
    _check_max_pool2d_with_indices,
    _max_pool_samples,
    returns_aux=True,
    outputs=2,
    composite=_max_pool2d_with_indices_composite,
    notes=case_law(
        _CASE_LAW,
        "max_pool2d_with_indices",
        "max_pool2d(..., return_indices=True) as its own op (an op's output count is fixed): (values, int64 "
        "indices of each maximum in its flattened input plane, h * W + w), as torch.",
    ),
    torch_ref=lambda torch, input, **attrs: torch.nn.functional.max_pool2d(input, return_indices=True, **attrs),
    doc="max_pool2d returning (values, indices): each window's maximum and its flat index into the H x W plane.",
)


def _unpool_size(op, shape, kernel_size, stride, padding, output_size):
    """max_unpool2d's output (H, W): ``(in - 1) * stride - 2 * padding + kernel`` unless ``output_size`` gives it
    (as (H, W) or an (N, C, H, W) shape whose last two entries are used), less than a stride from that default,
    as torch."""
    kernel = _ints(op, "kernel_size", kernel_size, 2, 1)
    strides = kernel if _no_stride(stride) else _ints(op, "stride", stride, 2, 1)
    pads = _ints(op, "padding", padding, 2, 0)
    default = tuple((n - 1) * s - 2 * p + k for n, s, p, k in zip(shape[-2:], strides, pads, kernel))
    if output_size is None:
        size = default
    else:
        ok = isinstance(output_size, tuple | list) and len(output_size) in (2, 4)
        require(ok, op, "output_size", "None or a sequence of 2 or 4 ints", output_size)
        size = _ints(op, "output_size", tuple(output_size)[-2:], 2, 0)
        require(
            all(d - s < n < d + s for n, d, s in zip(size, default, strides)),
            op,
            "output_size",
            f"sizes strictly between {tuple(d - s for d, s in zip(default, strides))} and "
            f"{tuple(d + s for d, s in zip(default, strides))}",
            output_size,
        )
    require(min(size) >= 1, op, "input", "a size giving a positive output", f"shape {shape} -> {size}")
    return size


def _max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    size = _unpool_size("max_unpool2d", input.shape, kernel_size, stride, padding, output_size)
    lead = input.shape[:-2]
    out = np.zeros(lead + (size[0] * size[1],), dtype=input.dtype)
    plane = (input.shape[-2] * input.shape[-1],)
    np.put_along_axis(out, indices.reshape(lead + plane), input.reshape(lead + plane), axis=-1)
    return out.reshape(lead + size)


def _max_unpool2d_vjp(g, ans, input, indices, kernel_size, stride=None, padding=0, output_size=None):
    lead = input.shape[:-2]
    picked = np.take_along_axis(
        np.reshape(g, lead + (g.shape[-2] * g.shape[-1],)),
        indices.reshape(lead + (input.shape[-2] * input.shape[-1],)),
        axis=-1,
    )
    return np.reshape(picked, input.shape)


def _check_max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    op = "max_unpool2d"
    _pool_input(op, input)
    require_integer(op, "indices", indices)
    require(indices.shape == input.shape, op, "indices", f"the input's shape {input.shape}", indices.shape)
    size = _unpool_size(op, input.shape, kernel_size, stride, padding, output_size)
    n = size[0] * size[1]
    require_indices(op, "indices", indices, 0, n, f"values in [0, {n}) for an output of {size}")


def _max_unpool2d_samples(rng):
    def plain(shape, kernel, stride, out):
        # indices of each window's top-left corner: distinct, no torch needed
        n_out = tuple((s - 1) * st + k for s, st, k in zip(shape[-2:], stride, kernel)) if out is None else out
        rows = np.arange(shape[-2])[:, None] * stride[0]
        cols = np.arange(shape[-1]) * stride[1]
        idx = np.broadcast_to(rows * n_out[1] + cols, shape).copy()
        return uniform(rng, shape), idx

    x, i = plain((2, 2, 3, 3), (2, 2), (2, 2), None)
    samples = [Sample((x, i), {"kernel_size": 2}, "stride defaults to kernel")]
    x, i = plain((1, 2, 3, 2), (3, 2), (2, 3), (8, 7))
    samples.append(Sample((x, i), {"kernel_size": (3, 2), "stride": (2, 3), "output_size": (8, 7)}, "output_size"))
    x, i = plain((2, 3, 3), (2, 2), (2, 2), (6, 7))
    samples.append(Sample((x, i), {"kernel_size": 2, "padding": 0, "output_size": [6, 7]}, "unbatched, list size"))
    x, i = plain((1, 1, 2, 2), (2, 2), (2, 2), (3, 5))
    samples.append(Sample((x, i), {"kernel_size": 2, "output_size": (1, 1, 3, 5)}, "4-entry output_size"))
    x, i = plain((1, 2, 2, 3), (3, 3), (2, 2), (3, 5))
    samples.append(
        Sample((np.asfortranarray(x), i), {"kernel_size": 3, "stride": 2, "padding": 1}, "non-contiguous, padding")
    )
    samples.append(
        Sample((uniform(rng, (0, 2, 2, 2)), np.zeros((0, 2, 2, 2), np.int64)), {"kernel_size": 2}, "empty batch")
    )
    return samples


max_unpool2d = defop(
    "max_unpool2d",
    family="conv",
    inputs=("input", "indices"),
    forward=_max_unpool2d,
    vjps=(_max_unpool2d_vjp, Grad.NOT_DIFFERENTIABLE),
    check=_check_max_unpool2d,
    samples=_max_unpool2d_samples,
    notes=case_law(
        _CASE_LAW,
        "max_unpool2d",
        "Puts each value at its flat plane index (max_pool2d_with_indices' second output); the input gradient "
        "gathers the output gradient there. Repeated indices: the output keeps one of the values (torch "
        "leaves which unspecified), the gradient reaches every one.",
    ),
    torch_ref=functional("max_unpool2d"),
    doc=(
        "The inverse of max_pool2d: each value placed at the flat index ``indices`` gives it in a zero\n"
        "(N, C, H_out, W_out) output, as torch.nn.functional.max_unpool2d."
    ),
)


# -- adaptive pooling --------------------------------------------------------------------------------------
def _adaptive_sizes(op, shape, output_size, spatial):
    """The output size per spatial axis; None entries keep the input's size, as torch."""
    sizes = (
        (output_size,) * spatial if output_size is None or isinstance(output_size, int | np.integer) else output_size
    )
    ok = (
        isinstance(sizes, tuple | list)
        and len(sizes) == spatial
        and all(s is None or (isinstance(s, int | np.integer) and not isinstance(s, bool) and s >= 0) for s in sizes)
    )
    require(ok, op, "output_size", f"an int >= 0 or a tuple of {spatial} such ints (or None)", output_size)
    return tuple(n if s is None else int(s) for n, s in zip(shape[-spatial:], sizes))


def _adaptive_bounds(n_in: int, n_out: int):
    """torch's adaptive windows: output i pools input [floor(i * in / out), ceil((i + 1) * in / out))."""
    i = np.arange(n_out)
    return (i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)


def _adaptive_avg_matrix(n_in: int, n_out: int, dtype) -> np.ndarray:
    """(out, in): row i averages output i's window (adaptive average pooling is separable)."""
    start, end = _adaptive_bounds(n_in, n_out)
    j = np.arange(n_in)
    inside = (j >= start[:, None]) & (j < end[:, None])
    return np.where(inside, 1 / (end - start)[:, None], 0).astype(dtype)


def _adaptive_avg(op, spatial):
    """The forward and rule of adaptive average pooling over the last ``spatial`` axes: separable, one
    window-average matrix per axis either side of the input (its transpose for the gradient)."""

    def forward(input, output_size):
        return _separable(_adaptive_avg_matrices(op, input, output_size, spatial), input, adjoint=False)

    def vjp(g, ans, input, output_size):
        return _separable(_adaptive_avg_matrices(op, input, output_size, spatial), g, adjoint=True)

    forward.__name__, vjp.__name__ = f"_{op}", f"_{op}_vjp"
    return forward, vjp


def _adaptive_check(op, spatial):
    def check(input, output_size, return_indices=False):
        require_bool(op, "return_indices", return_indices)
        _check_input_rank(op, input, spatial)
        require(min(input.shape[-spatial:]) >= 1, op, "input", "non-empty spatial dims", f"shape {input.shape}")
        _adaptive_sizes(op, input.shape, output_size, spatial)

    return check


def _adaptive_samples(rng, spatial):
    def x(shape):
        return uniform(rng, shape[: -spatial - 1] + (shape[-spatial - 1],) + shape[-spatial:])

    if spatial == 1:
        return [
            Sample((x((2, 3, 7)),), {"output_size": 3}, "uneven windows"),
            Sample((x((1, 2, 4)),), {"output_size": 6}, "output larger than input"),
            Sample((x((3, 6)),), {"output_size": (2,)}, "unbatched, tuple"),
            Sample((uniform(rng, (5, 2, 2)).transpose(1, 2, 0),), {"output_size": 4}, "non-contiguous"),
            Sample((x((0, 2, 5)),), {"output_size": 2}, "empty batch"),
        ]
    return [
        Sample((x((2, 2, 7, 5)),), {"output_size": 3}, "uneven windows"),
        Sample((x((1, 2, 5, 6)),), {"output_size": (2, None)}, "None keeps a size"),
        Sample((x((1, 2, 3, 4)),), {"output_size": (5, 3)}, "output larger than input"),
        Sample((x((3, 6, 6)),), {"output_size": (4, 1)}, "unbatched"),
        Sample((uniform(rng, (1, 6, 5, 2)).transpose(0, 3, 1, 2),), {"output_size": (4, 3)}, "non-contiguous"),
        Sample((x((0, 2, 5, 5)),), {"output_size": 2}, "empty batch"),
    ]


_adaptive_avg_pool1d, _adaptive_avg_pool1d_vjp = _adaptive_avg("adaptive_avg_pool1d", 1)
adaptive_avg_pool1d = _pool_op(
    "adaptive_avg_pool1d",
    _adaptive_avg_pool1d,
    _adaptive_avg_pool1d_vjp,
    _adaptive_check("adaptive_avg_pool1d", 1),
    lambda rng: _adaptive_samples(rng, 1),
    notes=case_law(_CASE_LAW, "adaptive_avg_pool1d", "A matmul with the (out, in) window-average matrix."),
    doc="The mean over L_out windows of the last dim, sized to cover it evenly, for an output of length output_size.",
)

_adaptive_avg_pool2d, _adaptive_avg_pool2d_vjp = _adaptive_avg("adaptive_avg_pool2d", 2)
adaptive_avg_pool2d = _pool_op(
    "adaptive_avg_pool2d",
    _adaptive_avg_pool2d,
    _adaptive_avg_pool2d_vjp,
    _adaptive_check("adaptive_avg_pool2d", 2),
    lambda rng: _adaptive_samples(rng, 2),
    notes=case_law(
        _CASE_LAW,
        "adaptive_avg_pool2d",
        "Separable: the row and column window-average matrices either side of the input.",
    ),
    doc="The mean over windows of the last two dims, sized to cover them evenly, for an output of size output_size.",
)


def _adaptive_max_flat(input, output_size, op):
    """Each adaptive window's first maximum (row-major, a NaN winning) as the flat ``h * W + w`` index in its
    input plane, and the values. Windows shorter than the longest repeat their last cell, which cannot change
    the first maximum."""
    out = _adaptive_sizes(op, input.shape, output_size, 2)
    axes = []
    for n_in, n_out in zip(input.shape[-2:], out):
        start, end = _adaptive_bounds(n_in, n_out)
        longest = int(np.max(end - start, initial=1))
        axes.append(np.minimum(start[:, None] + np.arange(longest), end[:, None] - 1))  # (out, longest)
    rows, cols = axes
    x4 = _batched(input, 2)
    windows = x4[:, :, rows[:, :, None, None], cols[None, None, :, :]]  # (N, C, OH, KH, OW, KW)
    windows = windows.transpose(0, 1, 2, 4, 3, 5).reshape(x4.shape[:2] + out + (rows.shape[1] * cols.shape[1],))
    pick = np.argmax(windows, axis=-1) if windows.size else np.zeros(windows.shape[:-1], np.int64)
    kh, kw = np.divmod(pick, cols.shape[1])
    flat = rows[np.arange(out[0])[:, None], kh] * input.shape[-1] + cols[np.arange(out[1]), kw]
    values = np.take_along_axis(windows, pick[..., None], axis=-1)[..., 0]
    shape = input.shape[:-2] + out
    return values.reshape(shape), flat.reshape(shape)


def _scatter_flat(g, flat, input_shape):
    """The adjoint of gathering at flat plane indices: ``g`` added into zeros of ``input_shape`` (arrays)."""
    planes = int(np.prod(input_shape[:-2], dtype=np.int64))
    size = input_shape[-2] * input_shape[-1]
    offsets = (np.arange(planes) * size)[:, None]
    target = (flat.reshape(planes, -1) + offsets).ravel() if planes else np.zeros(0, np.int64)
    summed = np.bincount(target, weights=g.reshape(-1), minlength=planes * size)
    return summed.astype(g.dtype, copy=False).reshape(input_shape)


def _adaptive_max_pool2d(input, output_size, return_indices=False):
    values, flat = _adaptive_max_flat(input, output_size, "adaptive_max_pool2d")
    return ((values, flat) if return_indices else values), {"flat": flat}


def _adaptive_max_pool2d_vjp(g, ans, input, output_size, flat):
    return _scatter_flat(g, flat, input.shape)


def _adaptive_max_pool2d_composite(input, output_size):
    _, flat = _adaptive_max_flat(constant_values(input), output_size, "adaptive_max_pool2d")
    return _gather_flat(input, flat)


def _adaptive_max_pool2d_with_indices(input, output_size):
    values, flat = _adaptive_max_flat(input, output_size, "adaptive_max_pool2d_with_indices")
    return (values, flat), {"flat": flat}


def _adaptive_max_pool2d_with_indices_vjp(g, ans, input, output_size, flat):
    return np.zeros_like(input) if g[0] is None else _scatter_flat(g[0], flat, input.shape)


def _adaptive_max_pool2d_with_indices_composite(input, output_size):
    _, flat = _adaptive_max_flat(constant_values(input), output_size, "adaptive_max_pool2d_with_indices")
    return _gather_flat(input, flat), Tensor._wrap(flat)


def _adaptive_max_samples(rng):
    return [
        Sample((uniform(rng, (2, 2, 7, 5)),), {"output_size": 3}, "uneven, overlapping windows"),
        Sample((uniform(rng, (1, 2, 5, 6)),), {"output_size": (2, None)}, "None keeps a size"),
        Sample((uniform(rng, (1, 2, 3, 4)),), {"output_size": (5, 3)}, "output larger than input"),
        Sample((uniform(rng, (3, 6, 6)),), {"output_size": (4, 1)}, "unbatched"),
        Sample((uniform(rng, (1, 6, 5, 2)).transpose(0, 3, 1, 2),), {"output_size": (4, 3)}, "non-contiguous"),
        Sample((uniform(rng, (0, 2, 5, 5)),), {"output_size": 2}, "empty batch"),
    ]


_ADAPTIVE_MAX_NOTES = (
    "Ties: the first maximum of each window in row-major order gets the gradient, a NaN counting "
    "as the maximum. Windows as torch: [floor(i * in / out), ceil((i + 1) * in / out))."
)

adaptive_max_pool2d = _max_pool_op(
    "adaptive_max_pool2d",
    _adaptive_max_pool2d,
    _adaptive_max_pool2d_vjp,
    _adaptive_max_pool2d_composite,
    _adaptive_check("adaptive_max_pool2d", 2),
    lambda rng: _adaptive_max_samples(rng),
    notes=case_law(_CASE_LAW, "adaptive_max_pool2d", _ADAPTIVE_MAX_NOTES),
    doc=(
        "The maximum over windows of the last two dims, sized to cover them evenly, for an output of size\n"
        "output_size; return_indices=True also returns where each maximum was."
    ),
)

adaptive_max_pool2d_with_indices = _pool_op(
    "adaptive_max_pool2d_with_indices",
    _adaptive_max_pool2d_with_indices,
    _adaptive_max_pool2d_with_indices_vjp,
    _adaptive_check("adaptive_max_pool2d_with_indices", 2),
    _adaptive_max_samples,
    returns_aux=True,
    outputs=2,
    composite=_adaptive_max_pool2d_with_indices_composite,
    notes=case_law(
        _CASE_LAW,
        "adaptive_max_pool2d_with_indices",
        "adaptive_max_pool2d(..., return_indices=True) as its own op: (values, int64 flat plane indices). "
        + _ADAPTIVE_MAX_NOTES,
    ),
    torch_ref=lambda torch, input, output_size: torch.nn.functional.adaptive_max_pool2d(input, output_size, True),
    doc=(
        "adaptive_max_pool2d returning (values, indices): each window's maximum and its flat index into\n"
        "the H x W plane."
    ),
)


# -- interpolate -------------------------------------------------------------------------------------------
_INTERPOLATE_MODES = {
    "nearest": (1, 2, 3),
    "nearest-exact": (1, 2, 3),
    "linear": (1,),
    "bilinear": (2,),
    "trilinear": (3,),
    "bicubic": (2,),
    "area": (1, 2, 3),
}
_CUBIC_A = -0.75  # torch's bicubic kernel parameter


def _interpolate_plan(input_shape, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias):
    """Per spatial axis (output size, scale_factor or None) as torch.nn.functional.interpolate resolves them:
    a scale_factor gives ``floor(in * scale_factor)`` and reaches the kernel too, unless
    ``recompute_scale_factor`` (then the kernel uses in / out, as for ``size``)."""
    op = "interpolate"
    require(mode in _INTERPOLATE_MODES, op, "mode", f"one of {sorted(_INTERPOLATE_MODES)}", repr(mode))
    spatial = len(input_shape) - 2
    ranks = " or ".join(f"{s + 2}-D" for s in _INTERPOLATE_MODES[mode])
    require(
        spatial in _INTERPOLATE_MODES[mode], op, "input", f"a {ranks} tensor for mode {mode!r}", f"shape {input_shape}"
    )
    if mode.startswith("nearest") or mode == "area":
        require(
            align_corners is None,
            op,
            "align_corners",
            f"None for mode {mode!r} (only the interpolating modes take it)",
            align_corners,
        )
    else:
        require(
            align_corners is None or isinstance(align_corners, bool | np.bool_),
            op,
            "align_corners",
            "None or a bool",
            align_corners,
        )
    require(antialias is False, op, "antialias", "False (antialiasing is not implemented)", antialias)
    require(
        recompute_scale_factor in (None, False, True),
        op,
        "recompute_scale_factor",
        "None or a bool",
        recompute_scale_factor,
    )
    _require_size_or_scale(op, size, scale_factor)
    if size is not None:
        require(
            not recompute_scale_factor,
            op,
            "recompute_scale_factor",
            "None or False when size is given",
            recompute_scale_factor,
        )
        sizes = size if isinstance(size, tuple | list) else (size,) * spatial
        require(len(sizes) == spatial, op, "size", f"an int or a tuple of {spatial} ints", size)
        return [(out, None) for out in _ints(op, "size", tuple(sizes), spatial, 1)]
    plan = _scaled_sizes(op, input_shape, scale_factor, spatial, "outputs of at least 1")
    return [(out, None if recompute_scale_factor else f) for out, f in plan]


def _interpolation_matrix(
    n_in: int, n_out: int, scale_factor, mode: str, align_corners, dtype, spatial: int
) -> np.ndarray:
    """(out, in) weights of one axis, with torch's index arithmetic (float32 for nearest; the input's dtype for
    linear, i.e. torch's opmath for float32 / float64):
    nearest: src = min(floor(dst * scale), in - 1) (2-D only: dst // 2 for an exact doubling, identity for equal
    sizes -- torch's 2-D kernel takes these shortcuts, its 1-D one does not);
    nearest-exact: src = min(floor((dst + 0.5) * scale), in - 1);
    linear, align_corners: src = dst * (in - 1) / (out - 1) (0 for out = 1);
    linear otherwise: src = max((dst + 0.5) * scale - 0.5, 0);
    with scale = 1 / scale_factor when the kernel gets one, else in / out; then weights 1 - frac and frac for
    floor(src) and its successor (clamped at in - 1). A linear axis whose size is unchanged is copied (torch
    does so even when a scale_factor like 1.3 leaves the size as it was); a nearest one is not."""
    dst = np.arange(n_out)
    if mode == "area":  # torch: adaptive average pooling to the output size
        return _adaptive_avg_matrix(n_in, n_out, dtype)
    if mode == "bicubic":
        return _cubic_matrix(n_in, n_out, scale_factor, align_corners, dtype)
    if mode == "nearest" or mode == "nearest-exact":
        scale = np.float32(1.0 / scale_factor) if scale_factor is not None else np.float32(n_in) / np.float32(n_out)
        if mode == "nearest" and spatial == 2 and n_out == n_in:
            src = dst
        elif mode == "nearest" and spatial == 2 and n_out == 2 * n_in:
            src = dst // 2
        else:
            offset = np.float32(0.5) if mode == "nearest-exact" else np.float32(0)
            src = np.minimum(np.floor((dst.astype(np.float32) + offset) * scale).astype(np.int64), n_in - 1)
        return (src[:, None] == np.arange(n_in)).astype(dtype)
    real = np.dtype(dtype).type
    if n_out == n_in:  # torch copies an axis whose size is unchanged, whatever the scale_factor
        return np.eye(n_in, dtype=dtype)
    if align_corners:
        scale = (real(n_in) - real(1)) / real(n_out - 1) if n_out > 1 else real(0)
        src = dst.astype(dtype) * scale
    else:
        scale = real(1.0 / scale_factor) if scale_factor is not None else real(n_in) / real(n_out)
        src = np.maximum(scale * (dst.astype(dtype) + real(0.5)) - real(0.5), real(0))
    low = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    frac = np.clip(src - low.astype(dtype), 0, 1).astype(dtype)
    high = np.minimum(low + 1, n_in - 1)
    j = np.arange(n_in)
    return ((low[:, None] == j) * (1 - frac)[:, None] + (high[:, None] == j) * frac[:, None]).astype(dtype)


def _cubic_matrix(n_in: int, n_out: int, scale_factor, align_corners, dtype) -> np.ndarray:
    """(out, in) bicubic weights, torch's: src = dst * (in - 1) / (out - 1) (align_corners) or
    (dst + 0.5) * scale - 0.5 (not clamped at 0, unlike linear), t = src - floor(src), the four taps floor(src) - 1
    ... + 2 (clamped into the input) weighted by the cubic convolution kernel with A = -0.75."""
    real = np.dtype(dtype).type
    dst = np.arange(n_out).astype(dtype)
    if align_corners:
        src = dst * ((real(n_in) - real(1)) / real(n_out - 1) if n_out > 1 else real(0))
    else:
        scale = real(1.0 / scale_factor) if scale_factor is not None else real(n_in) / real(n_out)
        src = scale * (dst + real(0.5)) - real(0.5)
    low = np.floor(src)
    t = (src - low).astype(dtype)
    a = real(_CUBIC_A)

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    weights = (far(t + 1), near(t), near(1 - t), far(2 - t))
    j = np.arange(n_in)
    matrix = np.zeros((n_out, n_in), dtype)
    for k, w in enumerate(weights):  # four taps: a clamped index may repeat, its weights add up
        index = np.clip(low.astype(np.int64) - 1 + k, 0, n_in - 1)
        matrix += (index[:, None] == j) * w[:, None]
    return matrix


def _interpolation_matrices(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias):
    plan = _interpolate_plan(input.shape, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)
    return [
        _interpolation_matrix(n, out, f, mode, align_corners, input.dtype, len(plan))
        for n, (out, f) in zip(input.shape[2:], plan)
    ]


def _separable(matrices, x, adjoint: bool):
    """``x`` under the separable linear map of ``matrices`` (one (out, in) matrix per spatial axis, the last axes of
    ``x``), or under its adjoint (each matrix transposed: the backward). An output sees an inf or NaN of ``x`` only
    where its weight for it is nonzero, as a sum over its window would (a matmul would add 0 * inf = NaN into
    every output of the row)."""
    if adjoint:
        matrices = [m.T for m in matrices]
    with np.errstate(invalid="ignore"):  # 0 * inf in the product of a non-finite x, mapped again below
        if len(matrices) == 1:
            out = x @ matrices[0].T
        elif len(matrices) == 3:
            out = np.einsum("ai,bj,ck,...ijk->...abc", *matrices, x)
        else:
            out = matrices[0] @ x @ matrices[1].T
    # every output sums over a whole row of x, so an inf or NaN in x leaves the product non-finite: only then
    # (and not for a finite x whose sums overflowed) is x mapped again, axis by axis
    if np.isfinite(out).all() or np.isfinite(x).all():
        return out
    for k, m in enumerate(matrices):
        x = _nonfinite_axis_map(m, x, k - len(matrices))
    return x


def _nonfinite_axis_map(m, x, axis):
    """``m`` (out, in) applied along ``axis`` of an ``x`` holding inf or NaN, with IEEE sums over the nonzero
    weights only: the finite part by a matmul, then +inf / -inf where positive-signed infinite terms (weight sign
    times inf sign) meet, NaN where a NaN or both signs meet."""

    def apply(weights, values):
        return np.moveaxis(np.tensordot(weights, values.astype(x.dtype), axes=([1], [axis])), 0, axis)

    finite = np.isfinite(x)
    out = apply(m, np.where(finite, x, 0))
    positive, negative = m > 0, m < 0
    up = apply(positive, x == np.inf) + apply(negative, x == -np.inf)
    down = apply(positive, x == -np.inf) + apply(negative, x == np.inf)
    out[up > 0] = np.inf
    out[down > 0] = -np.inf
    out[((up > 0) & (down > 0)) | (apply(m != 0, np.isnan(x)) > 0)] = np.nan
    return out


def _interpolate(
    input,
    size=None,
    scale_factor=None,
    mode="nearest",
    align_corners=None,
    recompute_scale_factor=None,
    antialias=False,
):
    """``torch.nn.functional.interpolate`` for modes nearest, nearest-exact and area (3-D, 4-D or 5-D input),
    linear (3-D), bilinear and bicubic (4-D) and trilinear (5-D): separable, so a matmul with each axis's
    (out, in) weight matrix."""
    options = (size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)
    return _separable(_interpolation_matrices(input, *options), input, adjoint=False)


def _interpolate_vjp(g, ans, input, **options):  # options: the forward's, every one given (the engine fills defaults)
    return _separable(_interpolation_matrices(input, **options), g, adjoint=True)


def _check_interpolate(input, **options):
    require_float("interpolate", "input", input)
    require(
        input.ndim in (3, 4, 5),
        "interpolate",
        "input",
        "a 3-D (N, C, L), 4-D (N, C, H, W) or 5-D (N, C, D, H, W) tensor",
        f"shape {input.shape}",
    )
    _interpolate_plan(input.shape, **options)


def _interpolate_samples(rng):
    def s(shape, label, **attrs):
        return Sample((uniform(rng, shape),), attrs, label)

    return [
        s((1, 2, 3, 3), "nearest scale 2", scale_factor=2),
        s((2, 1, 3, 4), "nearest size, not a multiple", size=(5, 7)),
        s((1, 2, 4), "nearest 1-D scale 1.7", scale_factor=1.7),
        s((1, 2, 5, 3), "nearest-exact shrink", size=(3, 2), mode="nearest-exact"),
        s((2, 2, 5), "linear scale 2.5", scale_factor=2.5, mode="linear"),
        s((1, 2, 6), "linear size, align_corners", size=4, mode="linear", align_corners=True),
        s((1, 2, 3, 4), "bilinear scale (1.5, 2.25)", scale_factor=(1.5, 2.25), mode="bilinear"),
        s((1, 2, 4, 3), "bilinear size, align_corners", size=(7, 5), mode="bilinear", align_corners=True),
        s(
            (1, 1, 5, 6),
            "bilinear shrink, recompute_scale_factor",
            scale_factor=0.7,
            mode="bilinear",
            recompute_scale_factor=True,
        ),
        s((1, 2, 1, 3), "bilinear height 1 to 3, align_corners", size=(3, 1), mode="bilinear", align_corners=True),
        Sample(
            (uniform(rng, (1, 4, 3, 2)).transpose(0, 3, 1, 2),),
            {"size": 5, "mode": "bilinear"},
            "non-contiguous, int size",
        ),
        s((0, 2, 3, 3), "empty batch", scale_factor=2, mode="bilinear"),
        s((0, 2, 4), "linear empty batch", size=3, mode="linear"),
        s((1, 2, 3, 4), "bicubic scale 2", scale_factor=2, mode="bicubic"),
        s((1, 2, 5, 4), "bicubic size, align_corners", size=(3, 6), mode="bicubic", align_corners=True),
        s((2, 1, 4, 6), "bicubic shrink 0.6", scale_factor=0.6, mode="bicubic"),
        s((1, 2, 5, 7), "area shrink", size=(2, 3), mode="area"),
        s((1, 2, 7), "area 1-D scale 0.5", scale_factor=0.5, mode="area"),
        s((1, 1, 3, 4, 5), "area 3-D", size=(2, 2, 3), mode="area"),
        s((1, 2, 2, 3, 2), "trilinear scale 2", scale_factor=2, mode="trilinear"),
        s((1, 1, 3, 2, 4), "trilinear size, align_corners", size=(4, 3, 3), mode="trilinear", align_corners=True),
        s((1, 2, 2, 3, 2), "nearest 3-D", scale_factor=(2, 1.5, 3), mode="nearest"),
        s((1, 1, 4, 3, 3), "nearest-exact 3-D", size=(3, 5, 2), mode="nearest-exact"),
        s((0, 2, 2, 2, 2), "trilinear empty batch", size=3, mode="trilinear"),
    ]


interpolate = defop(
    "interpolate",
    family="conv",
    inputs=("input",),
    forward=_interpolate,
    vjps=(_interpolate_vjp,),
    check=_check_interpolate,
    samples=_interpolate_samples,
    notes=case_law(
        _CASE_LAW,
        "interpolate",
        "Modes nearest, nearest-exact, area, linear, bilinear, bicubic, trilinear (3-D to 5-D inputs); torch's index "
        "and weight formulas (align_corners both ways, scale_factor reaching the kernel unless "
        "recompute_scale_factor). Linear in the input, so its rule (the transposed weight matrices) is "
        "differentiable as it stands.",
    ),
    torch_ref=lambda torch, input, **attrs: _torch_interpolate(torch, input, **attrs),
)


def _torch_interpolate(torch, input, **attrs):
    import warnings

    with warnings.catch_warnings():  # torch warns when a linear mode's align_corners is left to its default
        warnings.simplefilter("ignore")
        return torch.nn.functional.interpolate(input, **attrs)


# -- issue 21: Lp pooling, 1-D adaptive max pooling and unpooling, 3-D adaptive average pooling ---------------
def _lp_power(op: str, norm_type) -> float:
    norm_type = real(op, "norm_type", norm_type, "a number")
    require(math.isfinite(norm_type) and norm_type != 0, op, "norm_type", "a finite non-zero power", norm_type)
    return float(norm_type)


def _lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``torch.nn.functional.lp_pool2d``: (sum of x^p over each window)^(1/p), computed as torch does: the
    average pool of x^p (no padding) times kH * kW (so a ceil_mode window past the edge is scaled up)."""
    p = float(norm_type)
    mean, saved = _avg_pool2d(input**p, kernel_size, stride, 0, ceil_mode)
    k = saved["geo"].kernel[0] * saved["geo"].kernel[1]
    return (mean * k) ** (1 / p), saved


def _lp_pool2d_vjp(g, ans, input, norm_type, kernel_size, stride=None, ceil_mode=False, *, geo, divisor):
    # out = (k mean(x^p))^(1/p): d out / d mean = k out^(1-p) / p, d mean(x^p) / dx = avg-pool adjoint * p x^(p-1)
    p = float(norm_type)
    k = geo.kernel[0] * geo.kernel[1]
    upstream = g * k * ans ** (1 - p)
    return _avg_pool_vjp(upstream, None, input, geo=geo, divisor=divisor) * input ** (p - 1)


def _lp_pool2d_composite(input, norm_type, kernel_size, stride=None, ceil_mode=False, **saved):
    p = float(norm_type)
    mean = _avg_pool2d_composite(input**p, kernel_size, stride, 0, ceil_mode)
    kernel = _ints("lp_pool2d", "kernel_size", kernel_size, 2, 1)
    return (mean * (kernel[0] * kernel[1])) ** (1 / p)


def _check_lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    _lp_power("lp_pool2d", norm_type)
    _pool_input("lp_pool2d", input)
    _PoolGeometry("lp_pool2d", input.shape, kernel_size, stride, 0, 1, ceil_mode)


def _lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``torch.nn.functional.lp_pool1d``: lp_pool2d over a height of 1."""
    kernel, strides, _, _ = _pool1d_args("lp_pool1d", kernel_size, stride, 0)
    out, saved = _lp_pool2d(input[..., None, :], norm_type, kernel, strides, ceil_mode)
    return out.reshape(out.shape[:-2] + out.shape[-1:]), saved


def _lp_pool1d_vjp(g, ans, input, norm_type, kernel_size, stride=None, ceil_mode=False, **saved):
    grad = _lp_pool2d_vjp(g[..., None, :], ans[..., None, :], input[..., None, :], norm_type, None, **saved)
    return grad.reshape(input.shape)


def _lp_pool1d_composite(input, norm_type, kernel_size, stride=None, ceil_mode=False, **saved):
    from .shape import reshape, unsqueeze

    kernel, strides, _, _ = _pool1d_args("lp_pool1d", kernel_size, stride, 0)
    out = _lp_pool2d_composite(unsqueeze(input, input.ndim - 1), norm_type, kernel, strides, ceil_mode)
    return reshape(out, out.shape[:-2] + out.shape[-1:])


def _check_lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    _lp_power("lp_pool1d", norm_type)
    _check_pool1d_input("lp_pool1d", input)
    kernel, strides, _, _ = _pool1d_args("lp_pool1d", kernel_size, stride, 0)
    _PoolGeometry("lp_pool1d", input[..., None, :].shape, kernel, strides, (0, 0), 1, ceil_mode)


def _lp_samples(rng, spatial):
    def x(*shape, low=0.2, high=2.0):
        return uniform(rng, shape, low, high)

    if spatial == 1:
        return [
            Sample((x(2, 3, 6),), {"norm_type": 2, "kernel_size": 2}, "p=2, stride defaults to kernel"),
            Sample((x(1, 2, 7),), {"norm_type": 3.0, "kernel_size": 3, "stride": 1}, "p=3, overlapping"),
            Sample((x(1, 2, 8),), {"norm_type": 1.5, "kernel_size": 3, "stride": 2, "ceil_mode": True}, "ceil_mode"),
            Sample((x(3, 7, low=-2.0),), {"norm_type": 2, "kernel_size": 3, "stride": (2,)}, "unbatched, signs"),
            Sample((x(7, 2, 2).transpose(1, 2, 0),), {"norm_type": 1, "kernel_size": 2, "stride": 1}, "non-contiguous"),
            Sample((x(0, 2, 6),), {"norm_type": 2, "kernel_size": 2}, "empty batch"),
        ]
    return [
        Sample((x(2, 2, 4, 4),), {"norm_type": 2, "kernel_size": 2}, "p=2"),
        Sample((x(1, 2, 5, 5),), {"norm_type": 3, "kernel_size": 3, "stride": 1}, "p=3, overlapping"),
        Sample(
            (x(1, 2, 5, 6),), {"norm_type": 1.5, "kernel_size": (3, 2), "stride": 2, "ceil_mode": True}, "ceil_mode"
        ),
        Sample((x(3, 4, 4, low=-2.0),), {"norm_type": 2.0, "kernel_size": 2, "stride": 1}, "unbatched, signs"),
        Sample((x(1, 5, 4, 2).transpose(0, 3, 1, 2),), {"norm_type": 1, "kernel_size": (2, 1)}, "non-contiguous"),
        Sample((x(0, 2, 4, 4),), {"norm_type": 2, "kernel_size": 2}, "empty batch"),
    ]


_LP_NOTES = (
    "x^p then torch's average pool times the kernel size, then the 1/p power: negative entries with a "
    "fractional p are NaN, as torch."
)


def _lp_pool_op(name, forward, vjp, composite, check, spatial):
    """Declare lp_pool1d or lp_pool2d: an average pool of x^p, saved for the backward, differentiated again through
    the composite."""
    samples = partial(_lp_samples, spatial=spatial)
    return _pool_op(name, forward, vjp, check, samples, _LP_NOTES, returns_aux=True, composite=composite)


lp_pool2d = _lp_pool_op("lp_pool2d", _lp_pool2d, _lp_pool2d_vjp, _lp_pool2d_composite, _check_lp_pool2d, 2)
lp_pool1d = _lp_pool_op("lp_pool1d", _lp_pool1d, _lp_pool1d_vjp, _lp_pool1d_composite, _check_lp_pool1d, 1)


def _adaptive_max_pool1d(input, output_size, return_indices=False):
    """``torch.nn.functional.adaptive_max_pool1d``: adaptive_max_pool2d over a height of 1 (whose flat index
    h * W + w is then the position along the length)."""
    sizes = _adaptive_sizes("adaptive_max_pool1d", input.shape, output_size, 1)
    values, flat = _adaptive_max_flat(input[..., None, :], (1,) + sizes, "adaptive_max_pool1d")
    return ((values[..., 0, :], flat[..., 0, :]) if return_indices else values[..., 0, :]), {"flat": flat}


def _adaptive_max_pool1d_vjp(g, ans, input, output_size, flat):
    return _scatter_flat(g[..., None, :], flat, input.shape[:-1] + (1,) + input.shape[-1:]).reshape(input.shape)


def _adaptive_max_pool1d_composite(input, output_size, **saved):
    from .shape import unsqueeze

    sizes = _adaptive_sizes("adaptive_max_pool1d", input.shape, output_size, 1)
    _, flat = _adaptive_max_flat(constant_values(input)[..., None, :], (1,) + sizes, "adaptive_max_pool1d")
    return _gather_flat(unsqueeze(input, input.ndim - 1), flat)[..., 0, :]


adaptive_max_pool1d = _max_pool_op(
    "adaptive_max_pool1d",
    _adaptive_max_pool1d,
    _adaptive_max_pool1d_vjp,
    _adaptive_max_pool1d_composite,
    _adaptive_check("adaptive_max_pool1d", 1),
    lambda rng: _adaptive_samples(rng, 1),
    notes=_ADAPTIVE_MAX_NOTES,
)


def _unpool1d_args(op, kernel_size, stride, padding, output_size):
    """max_unpool1d's arguments as max_unpool2d's over a height of 1 (output_size: (L,) or (N, C, L))."""
    kernel, strides, pads, _ = _pool1d_args(op, kernel_size, stride, padding)
    if output_size is not None:
        ok = isinstance(output_size, tuple | list) and len(output_size) in (1, 3)
        require(ok, op, "output_size", "None or a sequence of 1 or 3 ints", output_size)
        output_size = (1, tuple(output_size)[-1])
    return kernel, strides, pads, output_size


def _max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """``torch.nn.functional.max_unpool1d``: each value put at its index (max_pool1d's) in a zero output."""
    args = _unpool1d_args("max_unpool1d", kernel_size, stride, padding, output_size)
    return _max_unpool2d(input[..., None, :], indices[..., None, :], *args)[..., 0, :]


def _max_unpool1d_vjp(g, ans, input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return np.take_along_axis(g, indices, axis=-1)


def _check_max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    op = "max_unpool1d"
    _check_pool1d_input(op, input)
    require_integer(op, "indices", indices)
    require(indices.shape == input.shape, op, "indices", f"the input's shape {input.shape}", indices.shape)
    args = _unpool1d_args(op, kernel_size, stride, padding, output_size)
    (_, length) = _unpool_size(op, input[..., None, :].shape, *args)
    require_indices(op, "indices", indices, 0, length, f"values in [0, {length}) for an output of length {length}")


def _max_unpool1d_samples(rng):
    def plain(shape, stride, offset=0):
        return uniform(rng, shape), np.broadcast_to(np.arange(shape[-1]) * stride + offset, shape).copy()

    x, i = plain((2, 3, 4), 2, 1)
    return [
        Sample((x, i), {"kernel_size": 2}, "stride defaults to kernel"),
        Sample(plain((1, 2, 3), 3), {"kernel_size": 2, "stride": 3, "output_size": (8,)}, "output_size"),
        Sample(
            plain((2, 4), 2),
            {"kernel_size": 3, "stride": 2, "padding": 1, "output_size": [1, 2, 8]},
            "unbatched, padding, 3-entry output_size",
        ),
        Sample((np.asfortranarray(x), i), {"kernel_size": 2}, "non-contiguous"),
        Sample((uniform(rng, (0, 2, 3)), np.zeros((0, 2, 3), np.int64)), {"kernel_size": 2}, "empty batch"),
    ]


max_unpool1d = defop(
    "max_unpool1d",
    family="conv",
    inputs=("input", "indices"),
    forward=_max_unpool1d,
    vjps=(_max_unpool1d_vjp, Grad.NOT_DIFFERENTIABLE),
    check=_check_max_unpool1d,
    samples=_max_unpool1d_samples,
    notes="max_unpool2d over a height of 1; the input gradient gathers the output gradient at the indices.",
    torch_ref=functional("max_unpool1d"),
)


def _adaptive_avg_matrices(name, input, output_size, n):
    """One window-average (out, in) matrix per spatial axis of ``input``'s last ``n`` (adaptive average pooling is
    separable)."""
    out = _adaptive_sizes(name, input.shape, output_size, n)
    return [_adaptive_avg_matrix(size, o, input.dtype) for size, o in zip(input.shape[-n:], out)]


def _adaptive_avg3d_samples(rng):
    return [
        Sample((uniform(rng, (2, 2, 5, 4, 3)),), {"output_size": 2}, "uneven windows"),
        Sample((uniform(rng, (1, 2, 3, 5, 4)),), {"output_size": (4, None, 2)}, "None keeps a size, larger"),
        Sample((uniform(rng, (3, 4, 4, 2)),), {"output_size": (1, 3, 2)}, "unbatched"),
        Sample((uniform(rng, (3, 4, 2, 2, 1)).transpose(4, 3, 0, 1, 2),), {"output_size": 2}, "non-contiguous"),
        Sample((uniform(rng, (0, 2, 3, 3, 3)),), {"output_size": 2}, "empty batch"),
    ]


_adaptive_avg_pool3d, _adaptive_avg_pool3d_vjp = _adaptive_avg("adaptive_avg_pool3d", 3)
adaptive_avg_pool3d = _pool_op(
    "adaptive_avg_pool3d",
    _adaptive_avg_pool3d,
    _adaptive_avg_pool3d_vjp,
    _adaptive_check("adaptive_avg_pool3d", 3),
    _adaptive_avg3d_samples,
    notes="Separable: an einsum with the depth, row and column window-average matrices.",
    doc="The mean over windows of the last three dims, sized to cover them evenly, for an output of size output_size.",
)


# -- conv_transpose3d ----------------------------------------------------------------------------------------
def _spread(planes, step: int, axis: int):
    """``planes`` with step - 1 zero planes after each one along ``axis`` (the last ones cut): the placement of a
    strided transposed convolution's contributions, with registered ops."""
    from .shape import narrow, reshape, stack

    if step == 1:
        return planes
    n = planes.shape[axis]
    zeros = Tensor._wrap(np.zeros(planes.shape, planes.dtype))
    spread = stack([planes] + [zeros] * (step - 1), dim=axis + 1)
    spread = reshape(spread, planes.shape[:axis] + (n * step,) + planes.shape[axis + 1 :])
    return narrow(spread, axis, 0, (n - 1) * step + 1)


def _conv_transpose3d_composite(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """conv_transpose3d with registered ops, for its second order: for each kernel depth k, conv_transpose2d's
    composite of every input depth plane (folded into the batch) lands at output depths id * stride + k * dilation;
    the sum over k, cut to [padding, padding + out) (zeros past the end for output_padding), plus the bias."""
    from .shape import narrow, pad, permute, reshape, unsqueeze

    geo = _transpose_geometry(
        "conv_transpose3d", 3, input.shape, weight.shape, stride, padding, output_padding, dilation
    )
    x = input if input.ndim == 5 else unsqueeze(input, 0)
    n, channels, depth = x.shape[:3]
    out_channels, step, spacing = weight.shape[1] * groups, geo.stride[0], geo.dilation[0]
    planes = reshape(permute(x, (0, 2, 1, 3, 4)), (n * depth, channels) + tuple(x.shape[3:]))
    full = (depth - 1) * step + spacing * (geo.kernel[0] - 1) + 1
    total = None
    for k in range(geo.kernel[0]):
        term = _conv_transpose2d_composite(
            planes,
            weight[:, :, k],
            None,
            geo.stride[1:],
            tuple(before for before, _ in geo.pads[1:]),
            geo.extra[1:],
            groups,
            geo.dilation[1:],
        )
        term = reshape(term, (n, depth) + tuple(term.shape[1:]))
        term = _spread(term, step, 1)
        term = pad(term, (0, 0) * 3 + (k * spacing, full - term.shape[1] - k * spacing))
        total = term if total is None else total + term
    top, size = geo.pads[0][0], geo.out_size[0]
    if top + size > full:
        total = pad(total, (0, 0) * 3 + (0, top + size - full))
    out = permute(narrow(total, 1, top, size), (0, 2, 1, 3, 4))
    if bias is not None:
        out = out + reshape(bias, (out_channels, 1, 1, 1))
    return reshape(out, input.shape[: input.ndim - 4] + (out_channels,) + geo.out_size)


def _conv_transpose3d_samples(rng):
    s = functools.partial(_conv_transpose_sample, rng)

    return [
        s((1, 2, 2, 3, 2), (2, 2, 2, 2, 2), True, "plain with bias"),
        s(
            (1, 2, 3, 2, 2),
            (2, 1, 2, 2, 1),
            False,
            "stride 2, padding 1, output_padding 1",
            stride=2,
            padding=1,
            output_padding=1,
        ),
        s((1, 2, 2, 2, 2), (2, 2, 2, 1, 2), True, "dilation 2, tuple stride", stride=(2, 1, 1), dilation=(2, 1, 1)),
        s((1, 4, 2, 2, 2), (4, 1, 2, 2, 2), True, "groups 2, tuple padding", groups=2, padding=(1, 0, 1), stride=2),
        s((2, 2, 2, 2), (2, 2, 2, 2, 1), True, "unbatched, stride 3", stride=3, padding=(0, 1, 0)),
        Sample(
            (uniform(rng, (1, 2, 3, 2, 2)).transpose(0, 4, 1, 2, 3), uniform(rng, (2, 2, 1, 2, 2)), None),
            {"stride": 2},
            "non-contiguous input",
        ),
        s((0, 2, 2, 2, 2), (2, 3, 2, 2, 2), True, "empty batch", stride=2),
    ]


conv_transpose3d = _conv_transpose_op(
    "conv_transpose3d",
    3,
    _conv_transpose3d_composite,
    _conv_transpose3d_samples,
    doc=(
        "3-D transposed convolution (conv3d's input gradient) of an (N, C_in, D, H, W) input with\n"
        "(C_in, C_out/groups, kD, kH, kW) weights, plus an optional bias, as torch.nn.functional.conv_transpose3d."
    ),
)


# -- avg_pool3d / max_pool3d: the 2-D pools' kernels over three axes ----------------------------------------
def _pool3d_samples(rng, max_pool):
    extra = {"dilation": 2} if max_pool else {"count_include_pad": False}
    samples = [
        Sample((uniform(rng, (2, 2, 4, 4, 2)),), {"kernel_size": 2}, "stride defaults to kernel"),
        Sample((uniform(rng, (1, 2, 3, 4, 3)),), {"kernel_size": 3, "stride": 1, "padding": 1}, "overlapping, padding"),
        Sample(
            (uniform(rng, (1, 1, 5, 5, 4)),),
            dict({"kernel_size": (3, 2, 3), "stride": 2, "padding": (1, 1, 0), "ceil_mode": True}, **extra),
            f"ceil_mode, {next(iter(extra))}",
        ),
        Sample((uniform(rng, (2, 3, 4, 2)),), {"kernel_size": (2, 1, 2), "stride": (1, 1, 2)}, "unbatched, tuples"),
        Sample(
            (uniform(rng, (1, 3, 2, 4, 2)).transpose(0, 4, 1, 2, 3),), {"kernel_size": 2, "stride": 1}, "non-contiguous"
        ),
        Sample((uniform(rng, (0, 2, 3, 3, 3)),), {"kernel_size": 2}, "empty batch"),
    ]
    if not max_pool:
        samples.append(
            Sample((uniform(rng, (1, 2, 4, 4, 4)),), {"kernel_size": 2, "divisor_override": 3}, "divisor_override")
        )
    return samples


_avg_pool3d, _avg_pool3d_composite, _check_avg_pool3d = _avg_pool_nd("avg_pool3d", 3)
avg_pool3d = _avg_pool_op(
    "avg_pool3d",
    _avg_pool3d,
    _avg_pool_vjp,
    _avg_pool3d_composite,
    _check_avg_pool3d,
    lambda rng: _pool3d_samples(rng, False),
    notes="avg_pool2d's window kernels over three axes; the second order through conv3d with a kernel of ones.",
    doc="The mean over each sliding window of the last three dims, as torch.nn.functional.avg_pool3d.",
)
_max_pool3d, _max_pool3d_composite, _check_max_pool3d = _max_pool_nd("max_pool3d", 3)
max_pool3d = _max_pool_op(
    "max_pool3d",
    _max_pool3d,
    _max_pool_vjp,
    _max_pool3d_composite,
    _check_max_pool3d,
    lambda rng: _pool3d_samples(rng, True),
    notes="Ties: the first maximum of each window (row-major) gets the gradient, a NaN counting as the maximum.",
    doc=(
        "The maximum over each sliding window of the last three dims, as torch.nn.functional.max_pool3d;\n"
        "return_indices=True also returns where each maximum was."
    ),
)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_batched(g, rec, x, spatial: int):
    """(the input with a batch axis, whether one was added)."""
    shape = rec.inputs[0].shape
    if 0 in shape:
        raise NotExportable("an empty input has no lowering")
    if len(shape) == spatial + 1:
        return g.op("Unsqueeze", x, g.ints([0])), True
    return x, False


def _onnx_unbatched(g, out, added: bool):
    return g.op("Squeeze", out, g.ints([0])) if added else out


def _onnx_conv(spatial: int):
    def lower(g, rec, input, weight, bias=None):
        a = rec.attributes
        x, added = _onnx_batched(g, rec, input, spatial)
        geo = _ConvGeometry(
            rec.op_name,
            rec.inputs[0].shape,
            rec.inputs[1].shape,
            a.get("stride", 1),
            a.get("padding", 0),
            a.get("dilation", 1),
            spatial,
        )
        pads = [b for b, _ in geo.pads] + [e for _, e in geo.pads]
        out = g.op(
            "Conv",
            x,
            weight,
            bias,
            pads=pads,
            strides=list(geo.stride),
            dilations=list(geo.dilation),
            group=int(a.get("groups", 1)),
            kernel_shape=list(geo.kernel),
        )
        return _onnx_unbatched(g, out, added)

    return lower


def _onnx_conv_transpose(spatial: int):
    def lower(g, rec, input, weight, bias=None):
        a = rec.attributes
        x, added = _onnx_batched(g, rec, input, spatial)
        stride = _ints(rec.op_name, "stride", a.get("stride", 1), spatial, 1, one_for_all=True)
        if any(
            p >= s
            for p, s in zip(
                _ints(rec.op_name, "output_padding", a.get("output_padding", 0), spatial, 0, one_for_all=True), stride
            )
        ):
            raise NotExportable("output_padding >= stride (torch allows it below the dilation) has no lowering")
        pads = list(_ints(rec.op_name, "padding", a.get("padding", 0), spatial, 0, one_for_all=True)) * 2
        out = g.op(
            "ConvTranspose",
            x,
            weight,
            bias,
            pads=pads,
            strides=list(stride),
            dilations=list(_ints(rec.op_name, "dilation", a.get("dilation", 1), spatial, 1, one_for_all=True)),
            output_padding=list(
                _ints(rec.op_name, "output_padding", a.get("output_padding", 0), spatial, 0, one_for_all=True)
            ),
            group=int(a.get("groups", 1)),
            kernel_shape=list(rec.inputs[1].shape[2:]),
        )
        return _onnx_unbatched(g, out, added)

    return lower


def _onnx_pool_geometry(rec):
    """(the 2-D pooling geometry, whether the op is 1-D) of a pooling record."""
    a = rec.attributes
    shape = rec.inputs[0].shape
    if rec.op_name.endswith("1d"):
        kernel, strides, pads, dilations = _pool1d_args(
            rec.op_name, a["kernel_size"], a.get("stride"), a.get("padding", 0), a.get("dilation", 1)
        )
        geo = _PoolGeometry(
            rec.op_name, shape[:-1] + (1,) + shape[-1:], kernel, strides, pads, dilations, a.get("ceil_mode", False)
        )
        return geo, True
    geo = _PoolGeometry(
        rec.op_name,
        shape,
        a["kernel_size"],
        a.get("stride"),
        a.get("padding", 0),
        a.get("dilation", 1),
        a.get("ceil_mode", False),
        spatial=3 if rec.op_name.endswith("3d") else 2,
    )
    return geo, False


def _no_indices(rec) -> None:
    if rec.attributes.get("return_indices"):
        raise NotExportable("return_indices=True: torch's flat argmax indices have no lowering written")


def _onnx_pool(g, rec, input):
    """max / avg pooling (2-D, 3-D; 1-D as 2-D over a height of 1): each window lies inside the geometry's padding
    (the ceil_mode windows included); the average divides the window sums by the forward's own divisors."""
    _no_indices(rec)
    geo, one_d = _onnx_pool_geometry(rec)
    x, added = _onnx_batched(g, rec, input, 1 if one_d else len(geo.kernel))
    if one_d:
        x = g.op("Unsqueeze", x, g.ints([2]))
    pads = [b for b, _ in geo.pads] + [e for _, e in geo.pads]
    common = {"kernel_shape": list(geo.kernel), "strides": list(geo.stride), "pads": pads}
    if rec.op_name.startswith("max"):
        out = g.op("MaxPool", x, dilations=list(geo.dilation), **common)
        dtype = rec.inputs[0].dtype
        if np.dtype(dtype).kind == "f":  # ONNX Runtime's MaxPool skips NaN; the forward's maximum is NaN there
            nan = g.op("Cast", g.op("IsNaN", x), to=tensor_type(dtype))
            nan = g.op("MaxPool", nan, dilations=list(geo.dilation), **common)
            out = g.op("Where", g.op("Greater", nan, scalar(g, 0, dtype)), scalar(g, np.nan, dtype), out)
    else:
        a = rec.attributes
        dtype = rec.inputs[0].dtype
        shape = rec.inputs[0].shape
        shape2 = shape[:-1] + (1,) + shape[-1:] if one_d else shape
        divisor = _avg_divisor(geo, shape2, a.get("count_include_pad", True), a.get("divisor_override"), dtype)
        area = scalar(g, math.prod(geo.kernel), dtype)
        sums = g.op("Mul", g.op("AveragePool", x, count_include_pad=1, **common), area)
        out = g.op("Div", sums, g.const(divisor))
    if one_d:
        out = g.op("Squeeze", out, g.ints([2]))
    return _onnx_unbatched(g, out, added)


def _onnx_adaptive_avg(g, rec, input):
    """As the forward, one spatial axis at a time: each window's entries (gathered as (out, longest window)
    positions) times its weights, the padding of a shorter window left out, then summed. An inf or NaN reaches
    only the outputs whose window holds it (a MatMul with the window matrix would add 0 * inf = NaN into every
    output of its row)."""
    shape, dtype = rec.inputs[0].shape, rec.inputs[0].dtype
    out_shape = rec.output.shape
    if 0 in shape or 0 in out_shape:
        raise NotExportable("an empty input or output has no lowering")
    spatial = int(rec.op_name[-2])  # adaptive_avg_pool1d / 2d / 3d
    x = input
    for axis in range(len(shape) - spatial, len(shape)):
        start, end = _adaptive_bounds(shape[axis], out_shape[axis])
        longest = int(np.max(end - start))
        span = start[:, None] + np.arange(longest)
        inside = span < end[:, None]
        weights = np.where(inside, 1 / (end - start)[:, None], 0).astype(dtype)  # _adaptive_avg_matrix's entries
        trailing = (1,) * (len(shape) - axis - 1)
        gathered = g.op("Gather", x, g.const(np.minimum(span, end[:, None] - 1)), axis=axis)
        terms = g.op("Mul", gathered, g.const(weights.reshape(weights.shape + trailing)))
        terms = g.op("Where", g.const(inside.reshape(inside.shape + trailing)), terms, scalar(g, 0, dtype))
        x = g.op("ReduceSum", terms, g.ints([axis + 1]), keepdims=0)
    return x


def _onnx_adaptive_max(g, rec, input):
    """Max over each window, one spatial axis at a time (a rectangle's max is separable): the windows gathered
    as (out, longest window) positions, a shorter window repeating its last position, then a NaN-keeping
    ReduceMax."""
    from .reduce import _onnx_reduce

    _no_indices(rec)

    shape, dtype = rec.inputs[0].shape, rec.inputs[0].dtype
    out_shape = rec.output_specs[0].shape
    if 0 in shape or 0 in out_shape:
        raise NotExportable("an empty input or output has no lowering")
    x = input
    for axis in range(len(shape) - (1 if rec.op_name.endswith("1d") else 2), len(shape)):
        start, end = _adaptive_bounds(shape[axis], out_shape[axis])
        longest = int(np.max(end - start))
        positions = np.minimum(start[:, None] + np.arange(longest), end[:, None] - 1)
        x = _onnx_reduce(g, "ReduceMax", g.op("Gather", x, g.const(positions), axis=axis), (axis + 1,), 0, dtype)
    return x


def _onnx_lp_pool(g, rec, input):
    """As the forward: the average pool of x^p (no padding; the forward's divisors) times the window area, to
    the power 1/p."""
    dtype = rec.inputs[0].dtype
    p = float(rec.attributes["norm_type"])
    geo, _ = _onnx_pool_geometry(rec)
    mean = _onnx_pool(g, rec, g.op("Pow", input, scalar(g, p, dtype)))
    return g.op("Pow", g.op("Mul", mean, scalar(g, math.prod(geo.kernel), dtype)), scalar(g, 1 / p, dtype))


def _onnx_selection(g, rec, input):
    if rec.op_name == "interpolate" and rec.attributes.get("mode", "nearest") not in ("nearest", "nearest-exact"):
        raise NotExportable(f"mode={rec.attributes.get('mode')!r} (an interpolation, not a selection) has no lowering")
    return index_map(g, rec, input)


def _onnx_fold(g, rec, input):
    """ONNX's Col2Im (the same adjoint of im2col: overlapping windows summed); ONNX Runtime has a float32 kernel
    only (a float64 graph is reported as having none)."""
    a = rec.attributes
    shape = rec.inputs[0].shape
    if 0 in shape:
        raise NotExportable("an empty input has no lowering")
    size = _ints("fold", "output_size", a["output_size"], 2, 1)
    geo = _BlockGeometry("fold", size, a["kernel_size"], a.get("dilation", 1), a.get("padding", 0), a.get("stride", 1))
    x = g.op("Unsqueeze", input, g.ints([0])) if len(shape) == 2 else input
    begins = [before for before, _ in geo.pads]
    ends = [after for _, after in geo.pads]
    out = g.op(
        "Col2Im",
        x,
        g.ints(size),
        g.ints(geo.kernel),
        dilations=list(geo.dilation),
        pads=begins + ends,
        strides=list(geo.stride),
    )
    return g.op("Squeeze", out, g.ints([0])) if len(shape) == 2 else out


lowering(conv1d, _onnx_conv(1))
lowering(conv2d, _onnx_conv(2))
lowering(conv3d, _onnx_conv(3))
lowering(conv_transpose1d, _onnx_conv_transpose(1))
lowering(conv_transpose2d, _onnx_conv_transpose(2))
lowering(conv_transpose3d, _onnx_conv_transpose(3))
for _op in (max_pool1d, max_pool2d, max_pool3d, avg_pool1d, avg_pool2d, avg_pool3d):
    lowering(_op, _onnx_pool)
for _op in (lp_pool1d, lp_pool2d):
    lowering(_op, _onnx_lp_pool)
lowering(adaptive_avg_pool1d, _onnx_adaptive_avg)
lowering(adaptive_avg_pool2d, _onnx_adaptive_avg)
lowering(adaptive_avg_pool3d, _onnx_adaptive_avg)
lowering(adaptive_max_pool1d, _onnx_adaptive_max)
lowering(adaptive_max_pool2d, _onnx_adaptive_max)
lowering(unfold, lambda g, rec, input: index_map(g, rec, input, fill=0))
lowering(upsample2d, _onnx_selection)
lowering(interpolate, _onnx_selection)
lowering(fold, _onnx_fold)
lowering(
    max_pool2d_with_indices, not_exportable="MaxPool's Indices count over the whole (N, C, H, W) tensor; not mapped"
)
for _op in (max_unpool1d, max_unpool2d):
    lowering(_op, not_exportable="the ScatterElements lowering of the per-plane indices is not written")
lowering(adaptive_max_pool2d_with_indices, not_exportable="the separable window maximum gives no argmax; not written")
