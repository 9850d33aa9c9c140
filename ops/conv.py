"""Convolution and pooling, as in ``torch.nn.functional``: conv1d, conv2d, unfold / fold (im2col and its
adjoint col2im), max_pool2d, avg_pool2d and nearest-neighbour upsample2d.

Convolutions use im2col: a strided view of the padded input gathers every receptive field into one
column matrix (a single copy), and one batched matmul per group does the rest. Their joint backward
shares that column matrix between the weight gradient and the input gradient; the input gradient
scatters back (col2im) with one vectorised add per kernel offset (kh * kw adds, never a loop over
output positions). Pooling works the same way on windows of the padded input. The forwards resolve
their geometry once and hand it to the backward.

Second order: unfold and fold are linear and each other's adjoint, so each one's backward is the other
op (on Tensors) or its kernel (on arrays). conv1d, conv2d, max_pool2d and avg_pool2d are differentiated
again through composites built on them: the windows of the (padded) input as ``unfold`` columns, then a
matmul with the weight (conv), a sum (avg) or a selection of the forward's argmax (max).

Ties: max_pool2d sends a window's gradient to its first maximum in row-major (kh, kw) order, a NaN
counting as the maximum -- what torch's CPU kernel does. Empty batches work as in torch.
"""

__all__ = ["conv1d", "conv2d", "unfold", "fold", "max_pool2d", "avg_pool2d", "upsample2d"]

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

import ops
from tape.registry import Sample, defop
from tape.tensors import Tensor

from ._samples import uniform
from ._validation import require, require_float


# -- argument handling -------------------------------------------------------------------------------------
def _ints(op: str, name: str, value, n: int, minimum: int) -> tuple:
    """An int or a sequence of ``n`` ints, each >= ``minimum``, as a tuple of ``n`` ints."""
    values = (value,) * n if isinstance(value, int | np.integer) else value
    ok = (isinstance(values, tuple | list) and len(values) == n
          and all(isinstance(v, int | np.integer) and not isinstance(v, bool) and v >= minimum for v in values))
    require(ok, op, name, f"an int >= {minimum} or a tuple of {n} such ints", value)
    return tuple(int(v) for v in values)


def _require_bool(op: str, name: str, value) -> None:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{op}: argument '{name}' expected a bool, got {type(value).__name__} {value!r}")


def _check_input_rank(op: str, x: np.ndarray, spatial: int) -> None:
    require_float(op, "input", x)
    layout = ("(C, L) or (N, C, L)", "(C, H, W) or (N, C, H, W)")[spatial - 1]
    require(x.ndim in (spatial + 1, spatial + 2), op, "input", f"a {spatial + 1}-D or {spatial + 2}-D tensor "
            f"{layout}", f"shape {x.shape}")


def _batched(x: np.ndarray, spatial: int) -> np.ndarray:
    """The input with a batch axis (unbatched inputs get one of size 1)."""
    return x[None] if x.ndim == spatial + 1 else x


def _windows(xp: np.ndarray, kernel: tuple, stride: tuple, dilation: tuple, out: tuple, kernel_last: bool):
    """A read-only strided view of the receptive fields of the padded (N, C, H, W) array ``xp``:
    shape (N, C, KH, KW, OH, OW) for im2col, or (N, C, OH, OW, KH, KW) with ``kernel_last``."""
    sn, sc, sh, sw = xp.strides
    kernel_part = (kernel, (sh * dilation[0], sw * dilation[1]))
    out_part = (out, (sh * stride[0], sw * stride[1]))
    first, second = (out_part, kernel_part) if kernel_last else (kernel_part, out_part)
    shape = xp.shape[:2] + first[0] + second[0]
    strides = (sn, sc) + first[1] + second[1]
    return as_strided(xp, shape, strides, writeable=False)


def _scatter_windows(grad_windows: np.ndarray, padded_shape: tuple, stride: tuple, dilation: tuple) -> np.ndarray:
    """The adjoint of ``_windows``: add (A, B, KH, KW, OH, OW) window gradients back into a zero (A, B, H, W)
    array of ``padded_shape``, one vectorised add per kernel offset."""
    kh, kw, oh, ow = grad_windows.shape[2:]
    grad = np.zeros(padded_shape, dtype=grad_windows.dtype)
    for i in range(kh):
        rows = slice(i * dilation[0], i * dilation[0] + stride[0] * (oh - 1) + 1, stride[0])
        for j in range(kw):
            cols = slice(j * dilation[1], j * dilation[1] + stride[1] * (ow - 1) + 1, stride[1])
            grad[:, :, rows, cols] += grad_windows[:, :, i, j]
    return grad


def _pad(x: np.ndarray, pads: tuple, value=0) -> np.ndarray:
    """Pad the two trailing axes of (N, C, H, W) ``x`` by ``pads`` = ((top, bottom), (left, right))."""
    if not any(pads[0] + pads[1]):
        return x
    return np.pad(x, ((0, 0), (0, 0)) + tuple(pads), constant_values=value)


def _unpad(grad: np.ndarray, pads: tuple, shape: tuple) -> np.ndarray:
    """The region of a padded-input gradient that belongs to the unpadded input of (N, C, H, W) ``shape``."""
    (top, _), (left, _) = pads
    return grad[:, :, top:top + shape[2], left:left + shape[3]]


# -- convolution core (2-D; conv1d runs it with a height of 1) ---------------------------------------------
class _ConvGeometry:
    """Padding, stride and dilation of one convolution, and the output size they give."""

    def __init__(self, op, x_shape, w_shape, stride, padding, dilation, spatial):
        self.stride = _ints(op, "stride", stride, spatial, 1)
        self.dilation = _ints(op, "dilation", dilation, spatial, 1)
        kernel = w_shape[2:]
        if isinstance(padding, str):
            require(padding in ("same", "valid"), op, "padding", "'same', 'valid', an int or a tuple of ints",
                    repr(padding))
            if padding == "same":
                require(self.stride == (1,) * spatial, op, "padding", "stride 1 with padding='same'",
                        f"stride {stride}")
            # 'same' pads the total d*(k-1) with the odd element on the right/bottom, as torch
            totals = [d * (k - 1) if padding == "same" else 0 for d, k in zip(self.dilation, kernel)]
            pads = tuple((t // 2, t - t // 2) for t in totals)
        else:
            pads = tuple((p, p) for p in _ints(op, "padding", padding, spatial, 0))
        if spatial == 1:
            pads, kernel = ((0, 0),) + pads, (1,) + tuple(kernel)
            self.stride, self.dilation = (1,) + self.stride, (1,) + self.dilation
        self.pads, self.kernel = pads, tuple(kernel)
        in_size = x_shape[-2:] if spatial == 2 else (1, x_shape[-1])
        self.padded = tuple(n + a + b for n, (a, b) in zip(in_size, pads))
        effective = tuple(d * (k - 1) + 1 for d, k in zip(self.dilation, self.kernel))
        require(all(e <= p for e, p in zip(effective, self.padded)), op, "weight",
                "a (dilated) kernel no larger than the padded input "
                f"{self.padded if spatial == 2 else self.padded[1:]}",
                f"kernel extent {effective if spatial == 2 else effective[1:]}")
        self.out = tuple((p - e) // s + 1 for p, e, s in zip(self.padded, effective, self.stride))


def _im2col(x4, geo, groups):
    """(G, C/G*KH*KW, N*OH*OW) columns: every receptive field of the batch as one column (a single copy),
    so each group's convolution is one GEMM over the whole batch."""
    xp = _pad(x4, geo.pads).transpose(1, 0, 2, 3)  # channel-major, so the rows are (C, KH, KW)
    windows = _windows(xp, geo.kernel, geo.stride, geo.dilation, geo.out, kernel_last=False)  # (C,N,KH,KW,OH,OW)
    rows = x4.shape[1] // groups * geo.kernel[0] * geo.kernel[1]
    return windows.transpose(0, 2, 3, 1, 4, 5).reshape(groups, rows, x4.shape[0] * geo.out[0] * geo.out[1])


def _conv_forward(x4, w4, bias, geo, groups):
    n, out_channels = x4.shape[0], w4.shape[0]
    out = np.matmul(w4.reshape(groups, out_channels // groups, -1), _im2col(x4, geo, groups))  # (G, O/G, N*L)
    out = out.reshape(out_channels, n * geo.out[0] * geo.out[1])
    if bias is not None:
        out += bias[:, None]
    return np.ascontiguousarray(out.reshape(out_channels, n, *geo.out).transpose(1, 0, 2, 3))


def _conv_backward(g4, x4, w4, geo, groups, needs):
    n, channels = x4.shape[:2]
    out_channels = w4.shape[0]
    g_cols = g4.transpose(1, 0, 2, 3).reshape(groups, out_channels // groups, n * geo.out[0] * geo.out[1])
    dx = dw = db = None
    if needs[0]:
        w_groups = w4.reshape(groups, out_channels // groups, -1)
        d_cols = np.matmul(w_groups.transpose(0, 2, 1), g_cols)  # (G, C/G*KH*KW, N*L)
        d_windows = d_cols.reshape(channels, *geo.kernel, n, *geo.out).transpose(0, 3, 1, 2, 4, 5)
        d_padded = _scatter_windows(d_windows, (channels, n) + geo.padded, geo.stride, geo.dilation)
        dx = _unpad(d_padded.transpose(1, 0, 2, 3), geo.pads, x4.shape)
    if needs[1]:
        dw = np.matmul(g_cols, _im2col(x4, geo, groups).transpose(0, 2, 1)).reshape(w4.shape)
    if len(needs) > 2 and needs[2]:
        db = np.sum(g4, axis=(0, 2, 3))
    return dx, dw, db


def _check_conv(op, spatial, x, weight, bias, stride, padding, dilation, groups):
    _check_input_rank(op, x, spatial)
    require_float(op, "weight", weight)
    require(weight.ndim == spatial + 2, op, "weight", f"a {spatial + 2}-D tensor (out_channels, in_channels/groups, "
            f"{'kL' if spatial == 1 else 'kH, kW'})", f"shape {weight.shape}")
    require(bool(isinstance(groups, int | np.integer) and not isinstance(groups, bool) and groups >= 1), op, "groups",
            "an int >= 1", groups)
    in_channels = _batched(x, spatial).shape[1]
    require(in_channels % groups == 0, op, "groups", f"a divisor of the input's {in_channels} channels", groups)
    require(weight.shape[0] % groups == 0, op, "groups", f"a divisor of the weight's {weight.shape[0]} output "
            "channels", groups)
    require(weight.shape[1] * groups == in_channels, op, "weight", f"in_channels/groups = {in_channels // groups} "
            f"in dim 1 (input has {in_channels} channels, groups={groups})", f"shape {weight.shape}")
    if bias is not None:
        require_float(op, "bias", bias)
        require(bias.shape == (weight.shape[0],), op, "bias", f"shape ({weight.shape[0]},)", bias.shape)
    _ConvGeometry(op, x.shape, weight.shape, stride, padding, dilation, spatial)


def _window_columns(x4, geo):
    """(N, C*KH*KW, OH*OW) Tensor: every window of the (N, C, H, W) Tensor ``x4`` under ``geo``'s (possibly
    asymmetric) padding, built with registered ops -- the composites' im2col."""
    (top, bottom), (left, right) = geo.pads
    if top == bottom and left == right:
        return unfold(x4, geo.kernel, geo.dilation, (top, left), geo.stride)
    return unfold(ops.pad(x4, (left, right, top, bottom)), geo.kernel, geo.dilation, 0, geo.stride)


def _conv_op(name, spatial):
    """Declare conv1d or conv2d; conv1d views its arrays as 2-D ones of height 1."""

    def as4(x, w):
        x4 = _batched(x, spatial)
        return (x4[:, :, None], w[:, :, None]) if spatial == 1 else (x4, w)

    def out_shape(input, weight, geo):
        size = geo.out if spatial == 2 else geo.out[1:]
        return input.shape[:input.ndim - spatial - 1] + (weight.shape[0],) + size

    def forward(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        geo = _ConvGeometry(name, input.shape, weight.shape, stride, padding, dilation, spatial)
        x4, w4 = as4(input, weight)
        out = _conv_forward(x4, w4, bias, geo, groups)
        return out.reshape(out_shape(input, weight, geo)), {"geo": geo}

    def joint_vjp(g, ans, input, weight, bias, *, needs, stride, padding, dilation, groups, geo):
        x4, w4 = as4(input, weight)
        g4 = _batched(g, spatial)
        g4 = g4[:, :, None] if spatial == 1 else g4
        dx, dw, db = _conv_backward(g4, x4, w4, geo, groups, needs)
        if dx is not None:
            dx = dx.reshape(input.shape)
        if dw is not None:
            dw = dw.reshape(weight.shape)
        return dx, dw, db

    def composite(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        geo = _ConvGeometry(name, input.shape, weight.shape, stride, padding, dilation, spatial)
        x4 = input if input.ndim == spatial + 2 else ops.unsqueeze(input, 0)
        w4 = weight
        if spatial == 1:
            x4, w4 = ops.unsqueeze(x4, 2), ops.unsqueeze(weight, 2)
        n, channels, out_channels = x4.shape[0], x4.shape[1], weight.shape[0]
        rows = channels // groups * geo.kernel[0] * geo.kernel[1]
        cols = ops.reshape(_window_columns(x4, geo), (n, groups, rows, geo.out[0] * geo.out[1]))
        out = ops.matmul(ops.reshape(w4, (groups, out_channels // groups, rows)), cols)  # (N, G, O/G, L)
        out = ops.reshape(out, (n, out_channels) + geo.out)
        if bias is not None:
            out = out + ops.reshape(bias, (out_channels, 1, 1))
        return ops.reshape(out, out_shape(input, weight, geo))

    def check(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        _check_conv(name, spatial, input, weight, bias, stride, padding, dilation, groups)

    return defop(name, family="conv", inputs=("input", "weight", "bias?"), forward=forward, joint_vjp=joint_vjp,
                 saves=True, composite=composite, check=check,
                 samples=_conv1d_samples if spatial == 1 else _conv2d_samples,
                 torch_ref=lambda torch, input, weight, bias, **attrs: _torch_conv(torch, name, input, weight, bias,
                                                                                    **attrs))


def _torch_conv(torch, name, input, weight, bias, **attrs):
    import warnings

    with warnings.catch_warnings():  # torch warns that padding='same' with an even kernel copies the input
        warnings.simplefilter("ignore")
        return getattr(torch.nn.functional, name)(input, weight, bias, **attrs)


def _conv2d_samples(rng):
    def s(x_shape, w_shape, bias, label, **attrs):
        x = uniform(rng, x_shape)
        w = uniform(rng, w_shape)
        return Sample((x, w, uniform(rng, (w_shape[0],)) if bias else None), attrs, label)

    nhwc = uniform(rng, (1, 5, 4, 2)).transpose(0, 3, 1, 2)
    return [s((1, 2, 5, 5), (3, 2, 3, 3), True, "plain with bias"),
            s((2, 2, 5, 4), (2, 2, 2, 3), False, "stride 2, padding 1", stride=2, padding=1),
            s((1, 2, 6, 6), (2, 2, 2, 2), True, "dilation 2, tuple stride", stride=(1, 2), dilation=2),
            s((1, 4, 4, 4), (4, 2, 2, 2), True, "groups 2, asymmetric padding", groups=2, padding=(1, 0)),
            s((1, 3, 4, 4), (3, 1, 3, 3), False, "depthwise, padding same", groups=3, padding="same"),
            s((1, 2, 4, 5), (2, 2, 2, 2), False, "padding same even kernel, dilation", padding="same",
              dilation=(2, 1)),
            s((1, 2, 4, 4), (3, 2, 3, 2), True, "padding valid", padding="valid"),
            s((2, 4, 4), (2, 1, 3, 3), True, "unbatched, groups 2, stride 2, padding 2", groups=2, stride=2,
              padding=2),
            Sample((nhwc, uniform(rng, (3, 3, 2, 2)).transpose(2, 3, 0, 1), None), {"padding": 1},
                   "non-contiguous input and weight"),
            s((0, 2, 4, 4), (3, 2, 2, 2), True, "empty batch", padding=1)]


def _conv1d_samples(rng):
    def s(x_shape, w_shape, bias, label, **attrs):
        return Sample((uniform(rng, x_shape), uniform(rng, w_shape),
                       uniform(rng, (w_shape[0],)) if bias else None), attrs, label)

    return [s((2, 3, 7), (4, 3, 3), True, "plain with bias"),
            s((2, 2, 8), (2, 2, 3), False, "stride 2, padding 2, dilation 2", stride=2, padding=2, dilation=2),
            s((1, 4, 6), (6, 2, 2), True, "groups 2, padding same", groups=2, padding="same"),
            s((1, 2, 6), (2, 1, 3), False, "depthwise, padding valid", groups=2, padding="valid"),
            s((3, 9), (2, 3, 4), True, "unbatched, tuple stride", stride=(3,), padding=(1,)),
            Sample((uniform(rng, (7, 3, 2)).transpose(1, 2, 0), uniform(rng, (3, 2, 2)).transpose(2, 1, 0), None),
                   {"padding": 1}, "non-contiguous"),
            s((0, 2, 5), (3, 2, 2), True, "empty batch", stride=2)]


conv2d = _conv_op("conv2d", 2)
conv1d = _conv_op("conv1d", 1)


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
        require(min(self.out) >= 1, op, "kernel_size", f"a (dilated) kernel no larger than the padded spatial size "
                f"{self.padded}", f"kernel extent {effective}")


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
    require(input.ndim in (3, 4), "unfold", "input", "a 3-D (C, H, W) or 4-D (N, C, H, W) tensor",
            f"shape {input.shape}")
    _BlockGeometry("unfold", input.shape[-2:], kernel_size, dilation, padding, stride)


def _check_fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    require_float("fold", "input", input)
    require(input.ndim in (2, 3), "fold", "input", "a 2-D (C*kH*kW, L) or 3-D (N, C*kH*kW, L) tensor",
            f"shape {input.shape}")
    geo = _BlockGeometry("fold", _ints("fold", "output_size", output_size, 2, 1), kernel_size, dilation, padding,
                         stride)
    k = geo.kernel[0] * geo.kernel[1]
    require(input.shape[-2] % k == 0, "fold", "input", f"a dim -2 divisible by kH*kW = {k}", f"shape {input.shape}")
    blocks = geo.out[0] * geo.out[1]
    require(input.shape[-1] == blocks, "fold", "input", f"{blocks} blocks in dim -1 ({geo.out[0]} x {geo.out[1]} "
            f"for output_size {geo.size})", f"shape {input.shape}")


def _unfold_samples(rng):
    return [Sample((uniform(rng, (2, 3, 4, 5)),), {"kernel_size": 2}, "2x2"),
            Sample((uniform(rng, (1, 2, 5, 6)),), {"kernel_size": (2, 3), "dilation": (2, 1), "padding": 1,
                                                   "stride": 2}, "dilation, padding, stride"),
            Sample((uniform(rng, (2, 4, 4)),), {"kernel_size": 3, "padding": (1, 0)}, "unbatched, overlapping"),
            Sample((uniform(rng, (1, 5, 4, 2)).transpose(0, 3, 1, 2),), {"kernel_size": (2, 1)}, "non-contiguous"),
            Sample((uniform(rng, (0, 2, 4, 4)),), {"kernel_size": 2, "stride": 2}, "empty batch")]


def _fold_samples(rng):
    return [Sample((uniform(rng, (2, 12, 12)),), {"output_size": (4, 5), "kernel_size": 2}, "2x2, overlapping"),
            Sample((uniform(rng, (1, 12, 9)),), {"output_size": (5, 6), "kernel_size": (2, 3), "dilation": (2, 1),
                                                 "padding": 1, "stride": 2}, "dilation, padding, stride"),
            Sample((uniform(rng, (18, 8)),), {"output_size": 4, "kernel_size": 3, "padding": (1, 0)},
                   "unbatched"),
            Sample((uniform(rng, (6, 8, 1)).transpose(2, 1, 0),), {"output_size": (3, 4), "kernel_size": 2},
                   "non-contiguous"),
            Sample((uniform(rng, (0, 8, 4)),), {"output_size": 4, "kernel_size": 2, "stride": 2}, "empty batch")]


unfold = defop(
    "unfold", family="conv", inputs=("input",), forward=_unfold, vjps=(_unfold_vjp,), check=_check_unfold,
    samples=_unfold_samples, notes="Its backward is fold.",
    torch_ref=lambda torch, input, **attrs: torch.nn.functional.unfold(input, **attrs))

fold = defop(
    "fold", family="conv", inputs=("input",), forward=_fold, vjps=(_fold_vjp,), check=_check_fold,
    samples=_fold_samples, notes="Its backward is unfold.",
    torch_ref=lambda torch, input, **attrs: torch.nn.functional.fold(input, **attrs))


# -- pooling -----------------------------------------------------------------------------------------------
class _PoolGeometry:
    """Kernel, stride, padding and dilation of a 2-D pooling, torch's output size (``ceil_mode`` included)
    and the padding each side needs so every window lies inside the padded array."""

    def __init__(self, op, shape, kernel_size, stride, padding, dilation, ceil_mode):
        self.kernel = _ints(op, "kernel_size", kernel_size, 2, 1)
        self.stride = self.kernel if stride is None or stride == () or stride == [] else _ints(op, "stride",
                                                                                                 stride, 2, 1)
        padding = _ints(op, "padding", padding, 2, 0)
        self.dilation = _ints(op, "dilation", dilation, 2, 1)
        _require_bool(op, "ceil_mode", ceil_mode)
        effective = tuple(d * (k - 1) + 1 for d, k in zip(self.dilation, self.kernel))
        require(all(2 * p <= e for p, e in zip(padding, effective)), op, "padding",
                f"at most half of the (dilated) kernel size {effective}", padding)
        out, pads = [], []
        for n, k, s, p in zip(shape[-2:], effective, self.stride, padding):
            size = (n + 2 * p - k + (s - 1 if ceil_mode else 0)) // s + 1
            if ceil_mode and (size - 1) * s >= n + p:  # the last window must start inside input or left padding
                size -= 1
            out.append(size)
            pads.append((p, max((size - 1) * s + k - n - p, 0)))
        require(min(out) >= 1, op, "input", f"a spatial size of at least the kernel extent {effective} after "
                f"padding {padding}", f"shape {shape}")
        self.out, self.pads, self.padding = tuple(out), tuple(pads), padding
        self.padded = tuple(n + a + b for n, (a, b) in zip(shape[-2:], pads))


def _pool_input(op, x):
    _check_input_rank(op, x, 2)
    return _batched(x, 2)


def _max_pool_index(x4, geo):
    """The (N, C, OH, OW) position, in row-major (kh, kw) order, of each window's first maximum (a NaN wins,
    as in torch's CPU kernel), and the windows flattened to (N, C, OH, OW, KH*KW)."""
    windows = _windows(_pad(x4, geo.pads, -np.inf), geo.kernel, geo.stride, geo.dilation, geo.out, kernel_last=True)
    flat = windows.reshape(windows.shape[:4] + (geo.kernel[0] * geo.kernel[1],))
    return np.argmax(flat, axis=-1), flat


def _max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    geo = _PoolGeometry("max_pool2d", input.shape, kernel_size, stride, padding, dilation, ceil_mode)
    index, flat = _max_pool_index(_batched(input, 2), geo)
    out = np.take_along_axis(flat, index[..., None], axis=-1)[..., 0]
    return out.reshape(input.shape[:-2] + geo.out), {"indices": index.astype(np.min_scalar_type(flat.shape[-1])),
                                                     "geo": geo}


def _max_pool2d_vjp(g, ans, input, *, kernel_size, stride, padding, dilation, ceil_mode, indices, geo):
    g4 = _batched(g, 2)
    kh, kw = geo.kernel
    offsets = np.arange(kh * kw, dtype=indices.dtype).reshape(kh, kw, 1, 1)
    grad_windows = np.where(indices[:, :, None, None] == offsets, g4[:, :, None, None], 0).astype(g.dtype, copy=False)
    grad = _scatter_windows(grad_windows, g4.shape[:2] + geo.padded, geo.stride, geo.dilation)
    return _unpad(grad, geo.pads, _batched(input, 2).shape).reshape(input.shape)


def _max_pool2d_composite(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """max_pool2d as a selection from the unfold windows of the forward's argmax (a constant): what its second
    order differentiates."""
    geo = _PoolGeometry("max_pool2d", input.shape, kernel_size, stride, padding, dilation, ceil_mode)
    x4 = input if input.ndim == 4 else ops.unsqueeze(input, 0)
    n, c = x4.shape[:2]
    k, blocks = geo.kernel[0] * geo.kernel[1], geo.out[0] * geo.out[1]
    windows = ops.reshape(_window_columns(x4, geo), (n, c, k, blocks))
    index, _ = _max_pool_index(_batched(input.data, 2), geo)
    chosen = index.reshape(n, c, 1, blocks) == np.arange(k).reshape(1, 1, k, 1)
    out = ops.sum(ops.where(chosen, windows, 0), dim=2)
    return ops.reshape(out, input.shape[:-2] + geo.out)


def _check_max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    _pool_input("max_pool2d", input)
    _PoolGeometry("max_pool2d", input.shape, kernel_size, stride, padding, dilation, ceil_mode)


def _max_pool_samples(rng):
    return [Sample((uniform(rng, (2, 2, 4, 4)),), {"kernel_size": 2}, "2x2, stride defaults to kernel"),
            Sample((uniform(rng, (1, 3, 5, 5)),), {"kernel_size": 3, "stride": 1, "padding": 1}, "overlapping"),
            Sample((uniform(rng, (1, 2, 5, 6)),), {"kernel_size": (2, 3), "stride": (2, 1), "ceil_mode": True},
                   "ceil_mode, tuple kernel"),
            Sample((uniform(rng, (1, 2, 7, 7)),), {"kernel_size": 2, "stride": 2, "dilation": 2, "padding": 1},
                   "dilation 2, padding 1"),
            Sample((uniform(rng, (2, 5, 5)),), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
                   "unbatched, ceil_mode"),
            Sample((uniform(rng, (1, 5, 5, 2)).transpose(0, 3, 1, 2),), {"kernel_size": 2, "stride": 1},
                   "non-contiguous"),
            Sample((uniform(rng, (0, 2, 4, 4)),), {"kernel_size": 2}, "empty batch")]
    # tied maxima are not differentiable, so finite differences cannot check them: tests/test_ops_conv.py
    # compares the tie choice with torch


max_pool2d = defop(
    "max_pool2d", family="conv", inputs=("input",), forward=_max_pool2d, vjps=(_max_pool2d_vjp,), saves=True,
    composite=_max_pool2d_composite, check=_check_max_pool2d, samples=_max_pool_samples,
    notes="Ties: the gradient goes to the first maximum of each window in row-major (kh, kw) order, a NaN "
          "counting as the maximum -- what torch's CPU kernel does.",
    torch_ref=lambda torch, input, **attrs: torch.nn.functional.max_pool2d(input, **attrs))


def _avg_divisor(geo, shape, count_include_pad, divisor_override, dtype):
    """The (OH, OW) divisor of each window: torch counts padding cells but not cells past the padding
    (which only ceil_mode windows reach), or only input cells when ``count_include_pad`` is False."""
    if divisor_override is not None:
        return np.asarray(divisor_override, dtype=dtype)
    counts = []
    for n, k, s, p, size in zip(shape[-2:], geo.kernel, geo.stride, geo.padding, geo.out):
        start = np.arange(size) * s - p
        end = np.minimum(start + k, n + p)
        if not count_include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, n)
        counts.append(end - start)
    return np.outer(counts[0], counts[1]).astype(dtype)


def _avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    geo = _PoolGeometry("avg_pool2d", input.shape, kernel_size, stride, padding, 1, ceil_mode)
    windows = _windows(_pad(_batched(input, 2), geo.pads), geo.kernel, geo.stride, geo.dilation, geo.out,
                       kernel_last=True)
    divisor = _avg_divisor(geo, input.shape, count_include_pad, divisor_override, input.dtype)
    out = np.sum(windows, axis=(-2, -1)) / divisor
    return out.reshape(input.shape[:-2] + geo.out), {"geo": geo, "divisor": divisor}


def _avg_pool2d_vjp(g, ans, input, *, kernel_size, stride, padding, ceil_mode, count_include_pad,
                    divisor_override, geo, divisor):
    g4 = _batched(g / divisor, 2)
    grad_windows = np.broadcast_to(g4[:, :, None, None], g4.shape[:2] + geo.kernel + geo.out)
    grad = _scatter_windows(grad_windows, g4.shape[:2] + geo.padded, geo.stride, geo.dilation)
    return _unpad(grad, geo.pads, _batched(input, 2).shape).reshape(input.shape)


def _avg_pool2d_composite(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                          divisor_override=None):
    """avg_pool2d as window sums of unfold columns over the divisor: what its second order differentiates."""
    geo = _PoolGeometry("avg_pool2d", input.shape, kernel_size, stride, padding, 1, ceil_mode)
    x4 = input if input.ndim == 4 else ops.unsqueeze(input, 0)
    n, c = x4.shape[:2]
    k, blocks = geo.kernel[0] * geo.kernel[1], geo.out[0] * geo.out[1]
    windows = ops.reshape(_window_columns(x4, geo), (n, c, k, blocks))
    divisor = _avg_divisor(geo, input.shape, count_include_pad, divisor_override, input.dtype).reshape(-1)
    return ops.reshape(ops.sum(windows, dim=2) / divisor, input.shape[:-2] + geo.out)


def _check_avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                      divisor_override=None):
    _pool_input("avg_pool2d", input)
    _PoolGeometry("avg_pool2d", input.shape, kernel_size, stride, padding, 1, ceil_mode)
    _require_bool("avg_pool2d", "count_include_pad", count_include_pad)
    require(bool(divisor_override is None or (isinstance(divisor_override, int | np.integer) and divisor_override > 0)),
            "avg_pool2d", "divisor_override", "None or a positive int", divisor_override)


def _avg_pool_samples(rng):
    return [Sample((uniform(rng, (2, 2, 4, 4)),), {"kernel_size": 2}, "2x2"),
            Sample((uniform(rng, (1, 2, 5, 5)),), {"kernel_size": 3, "stride": 1, "padding": 1}, "padding counted"),
            Sample((uniform(rng, (1, 2, 5, 5)),), {"kernel_size": 3, "stride": 2, "padding": 1,
                                                   "count_include_pad": False}, "padding not counted"),
            Sample((uniform(rng, (1, 2, 5, 6)),), {"kernel_size": (3, 2), "stride": 2, "padding": (1, 1),
                                                   "ceil_mode": True}, "ceil_mode with padding"),
            Sample((uniform(rng, (1, 2, 5, 6)),), {"kernel_size": 3, "stride": 2, "ceil_mode": True,
                                                   "count_include_pad": False}, "ceil_mode, padding not counted"),
            Sample((uniform(rng, (3, 4, 4)),), {"kernel_size": 2, "stride": 1, "divisor_override": 3},
                   "unbatched, divisor_override"),
            Sample((uniform(rng, (1, 5, 4, 2)).transpose(0, 3, 1, 2),), {"kernel_size": (2, 1)}, "non-contiguous"),
            Sample((uniform(rng, (0, 2, 4, 4)),), {"kernel_size": 3, "stride": 1, "padding": 1}, "empty batch")]


avg_pool2d = defop(
    "avg_pool2d", family="conv", inputs=("input",), forward=_avg_pool2d, vjps=(_avg_pool2d_vjp,), saves=True,
    composite=_avg_pool2d_composite, check=_check_avg_pool2d, samples=_avg_pool_samples,
    torch_ref=lambda torch, input, **attrs: torch.nn.functional.avg_pool2d(input, **attrs))


# -- nearest upsampling ------------------------------------------------------------------------------------
def _resize_plan(op, shape, scale_factor, size):
    """Per spatial axis: (output size, scale) where scale is 1/scale_factor if given, else in/out -- what
    torch's nearest kernel uses to map an output index to ``floor(index * scale)``."""
    require((scale_factor is None) != (size is None), op, "size / scale_factor", "exactly one of them",
            f"size={size!r}, scale_factor={scale_factor!r}")
    if size is not None:
        sizes = _ints(op, "size", size, 2, 1)
        return [(out, None) for out in sizes]
    factors = (scale_factor,) * 2 if isinstance(scale_factor, int | float | np.number) else scale_factor
    ok = (isinstance(factors, tuple | list) and len(factors) == 2
          and all(isinstance(f, int | float | np.number) and not isinstance(f, bool) and f > 0 for f in factors))
    require(ok, op, "scale_factor", "a positive number or a tuple of 2", scale_factor)
    plan = [(math.floor(n * float(f)), 1.0 / float(f)) for n, f in zip(shape[-2:], factors)]
    require(all(out >= 1 for out, _ in plan), op, "scale_factor", f"a factor giving an output of at least 1x1 "
            f"from input {shape}", scale_factor)
    return plan


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
    return [Sample((uniform(rng, (1, 2, 3, 3)),), {"scale_factor": 2}, "scale 2"),
            Sample((uniform(rng, (2, 1, 2, 3)),), {"scale_factor": (3, 2)}, "scale (3, 2)"),
            Sample((uniform(rng, (1, 2, 4, 3)),), {"size": (6, 7)}, "size, not a multiple"),
            Sample((uniform(rng, (1, 1, 5, 6)),), {"size": (3, 4)}, "size smaller than input"),
            Sample((uniform(rng, (1, 2, 3, 4)),), {"scale_factor": 1.5}, "float scale"),
            Sample((uniform(rng, (1, 3, 4, 2)).transpose(0, 3, 1, 2),), {"size": 5}, "non-contiguous, int size"),
            Sample((uniform(rng, (0, 2, 3, 3)),), {"scale_factor": 2}, "empty batch")]


upsample2d = defop(
    "upsample2d", family="conv", inputs=("input",), forward=_upsample2d, vjps=(_upsample2d_vjp,),
    check=_check_upsample2d, samples=_upsample_samples,
    notes="torch.nn.functional.interpolate(mode='nearest') on (N, C, H, W) input.",
    torch_ref=lambda torch, input, scale_factor=None, size=None: torch.nn.functional.interpolate(
        input, size=size, scale_factor=scale_factor, mode="nearest"))
