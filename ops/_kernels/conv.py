"""Convolution kernels over any number of spatial axes (ops/conv.py's conv1d / conv2d / conv3d and, as their
adjoints, the transposed convolutions): ``forward`` and ``backward`` (the input and weight gradients) of a
grouped, strided, dilated, zero-padded convolution of an (N, C, *spatial) batch with an (O, C/G, *kernel) weight.

By im2col over blocks of a few whole images, or bands of one image's first output axis, of about ``BLOCK_BYTES``
of columns: one strided copy per kernel offset (tap) fills a block's columns from the input, one GEMM per group
(per tap of the first kernel axis with stride 1 there: ``SPLIT_ROWS``) writes its output, and the backward fills
the columns again for dW and adds dcolumns back tap by tap (col2im). The padding is never built: the column
buffers are ``buffers.Scratch`` arrays whose unwritten entries stay 0. Blocks run on the worker pool from the
measured GEMM crossover on; each block's weight gradient is summed in block order, so no result depends on which
thread ran which block. The design and its measurements: docs/kernels.md.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from . import buffers, runtime

__all__ = ["BLOCK_BYTES", "forward", "backward"]

BLOCK_BYTES = 1 << 21  # a block's column matrix: about the L2 cache of one core
SPLIT_ROWS = 64  # the fewest GEMM rows per tap for which the forward splits the first kernel axis
_EVERY = (slice(None), slice(None))  # the batch and channel axes
# the column buffers, kept per thread between calls: made per call, they faulted ~2,150 pages in per conv2d
# 8x32x32x32 -> 64 fwd + bwd step (malloc returned them), 14.3 -> 19.6 ms (docs/kernels.md)
_SCRATCH = buffers.Scratch()


def _taps(geo, in_spatial: tuple, lo: int, hi: int) -> list:
    """(offset, out_region, in_region) for every kernel offset that sees any input from the band [lo, hi) of the
    first output axis: the output positions (counted from lo on that axis) whose window's ``offset`` tap lies
    inside the input, and the input positions it lies on."""
    axes = []
    for axis, (k, s, d, (before, _), n_in, n_out) in enumerate(
        zip(geo.kernel, geo.stride, geo.dilation, geo.pads, in_spatial, geo.out)
    ):
        a, b = (lo, hi) if axis == 0 else (0, n_out)
        per_tap = []
        for t in range(k):
            shift = t * d - before  # the input index output 0's tap t meets
            first, stop = max(a, -(shift // s)), min(b, (n_in - 1 - shift) // s + 1)
            if first < stop:
                per_tap.append((t, slice(first - a, stop - a), slice(first * s + shift, (stop - 1) * s + shift + 1, s)))
        axes.append(per_tap)
    return [tuple(zip(*combo)) for combo in itertools.product(*axes)]


class _Band:
    """The band [lo, hi) of the first output axis, with what every image of it shares: its taps, its column
    shape after the (B, C) axes and the layout key of its column buffer's zeros."""

    def __init__(self, geo, in_spatial: tuple, lo: int, hi: int):
        self.lo, self.hi = lo, hi
        self.taps = _taps(geo, in_spatial, lo, hi)
        self.shape = tuple(geo.kernel) + (hi - lo,) + tuple(geo.out[1:])
        self.layout = (self.shape, [(offset, tuple((r.start, r.stop) for r in out)) for offset, out, _ in self.taps])
        # per tap: (the column entries, the input region) as indices of the (B, C, ...) arrays
        self.pairs = [(_EVERY + offset + out, _EVERY + region) for offset, out, region in self.taps]


def _plan(make_band, out0: int, n: int, image_bytes: int, workers: int, whole_images: bool) -> list:
    """The blocks: (index, image slice, bands). Whole images, several per block up to BLOCK_BYTES of columns, in
    a multiple of ``workers`` blocks of even sizes where there are images enough; an image larger than that in
    bands of output rows (``make_band(lo, hi)``), all of an image's bands in one block when ``whole_images``."""
    if n == 0:
        return []
    if image_bytes <= BLOCK_BYTES:
        count = -(-n // max(1, BLOCK_BYTES // max(image_bytes, 1)))  # the fewest blocks
        count = min(n, -(-count // workers) * workers)
        per_block = -(-n // max(count, 1))
        whole = [make_band(0, out0)]
        return [(k, slice(i, i + per_block), whole) for k, i in enumerate(range(0, n, per_block))]
    rows = -(-out0 // -(-image_bytes // BLOCK_BYTES))  # the fewest bands of at most ~BLOCK_BYTES, even sizes
    bands = [make_band(lo, min(lo + rows, out0)) for lo in range(0, out0, rows)]
    if whole_images:
        return [(i, slice(i, i + 1), bands) for i in range(n)]
    pairs = [(i, band) for i in range(n) for band in bands]
    return [(k, slice(i, i + 1), [band]) for k, (i, band) in enumerate(pairs)]


def _workers(flops: int) -> int:
    """Threads for a convolution of ``flops`` GEMM operations: BLAS's thread count (what the caller gave numpy)
    from the measured crossover on, else 1."""
    return 1 if flops < runtime.gemm_crossover() else runtime.threads()


def _columns(x: np.ndarray, band: _Band, dtype, name: str = "columns") -> np.ndarray:
    """This thread's (B, C, *kernel, *band's out) column buffer ``name`` filled from the (B, C, *spatial) images
    ``x`` (zeros where a window reaches into the padding)."""
    cols = _SCRATCH(name, x.shape[:2] + band.shape, dtype, zeros=band.layout)
    for entries, region in band.pairs:
        cols[entries] = x[region]
    return cols


def _add_columns(dx: np.ndarray, d_cols: np.ndarray, band: _Band) -> None:
    """col2im: add the (B, C, *kernel, *band's out) column gradients into the (B, C, *spatial) ``dx``."""
    for entries, region in band.pairs:
        dx[region] += d_cols[entries]


def _grouped(a: np.ndarray, band: _Band, groups: int) -> np.ndarray:
    """The (B, G, rows/G, positions) view of the band of the first spatial axis of (B, rows, *spatial) ``a``
    (a view, never a copy: the bands of the first axis keep the later axes whole)."""
    part = a[:, :, band.lo : band.hi]
    return np.reshape(part, (a.shape[0], groups, a.shape[1] // groups, -1), copy=False)


def _weight_grad(x: np.ndarray, g_band: np.ndarray, band: _Band, dtype) -> np.ndarray:
    """(G, C/G*K, O/G): the transposed weight gradient from the band of the (B, C, *spatial) images ``x`` and
    its (B, G, O/G, L) output gradient, as columns @ g^T (the faster orientation of this GEMM in OpenBLAS)."""
    cols = np.reshape(_columns(x, band, dtype), g_band.shape[:2] + (-1, g_band.shape[3]), copy=False)
    return np.matmul(cols, g_band.swapaxes(-1, -2)).sum(axis=0)


def _input_grad(dx: np.ndarray, g_band: np.ndarray, w_t: np.ndarray, band: _Band) -> None:
    """Add the band's share of the input gradient into the (B, C, *spatial) ``dx``: column gradients
    (G, C/G*K, O/G) @ (B, G, O/G, L), then col2im."""
    shape = g_band.shape[:2] + (w_t.shape[1], g_band.shape[3])
    d_cols = np.matmul(w_t, g_band, out=_SCRATCH("column_grads", shape, dx.dtype))
    _add_columns(dx, d_cols.reshape(dx.shape[:2] + band.shape), band)


def _run(blocks: list, work, workers: int, gemm_flops: int) -> None:
    """The blocks on ``workers`` threads (one BLAS thread each), or in order here with BLAS threaded by the size
    of one block's GEMM."""
    with runtime.blas_for(gemm_flops):
        runtime.run(blocks, work, workers)


class _RowGeometry:
    """The geometry of a forward's columns without the first kernel axis: a kernel of 1 there, over the rows
    every tap of that axis reads together (``extent`` more than the output's), so the first axis's taps are row
    offsets into one column buffer."""

    def __init__(self, geo):
        self.extent = (geo.kernel[0] - 1) * geo.dilation[0]
        self.kernel = (1,) + tuple(geo.kernel[1:])
        self.stride, self.dilation, self.pads = geo.stride, geo.dilation, geo.pads
        self.out = (geo.out[0] + self.extent,) + tuple(geo.out[1:])


def _row_split(geo, rows: int) -> bool:
    """Whether the forward runs one GEMM per tap of the first kernel axis over the row columns (``rows`` =
    C/G * prod(kernel[1:]) of them per group): stride 1 on that axis, and GEMMs deep enough to run at speed."""
    return geo.kernel[0] > 1 and geo.stride[0] == 1 and rows >= SPLIT_ROWS


def _sum_row_taps(w_taps: list, cols: np.ndarray, geo, target: np.ndarray) -> None:
    """target (B, G, O/G, L) = the sum over the first kernel axis's taps t of w_taps[t] (G, O/G, C/G*K') @ the
    row columns (B, C, 1, *K', rows, *out') from row t * dilation on (a view: one GEMM operand per tap)."""
    rows, step = target.shape[3] // math.prod(geo.out[1:]), geo.dilation[0]
    lead = (slice(None), slice(None), 0) + (slice(None),) * (len(geo.kernel) - 1)
    partial = _SCRATCH("row_products", target.shape, target.dtype) if len(w_taps) > 1 else None
    for t, w_tap in enumerate(w_taps):
        part = np.reshape(
            cols[lead + (slice(t * step, t * step + rows),)], target.shape[:2] + (-1, target.shape[3]), copy=False
        )
        if t == 0:
            np.matmul(w_tap, part, out=target)
        else:
            target += np.matmul(w_tap, part, out=partial)


def forward(x: np.ndarray, w: np.ndarray, bias, geo, groups: int) -> np.ndarray:
    """The (N, O, *out) convolution of the (N, C, *spatial) batch ``x`` with the (O, C/G, *kernel) weight plus
    the (O,) ``bias`` (None: none)."""
    n, channels = x.shape[:2]
    dtype = np.result_type(x.dtype, w.dtype)
    out_channels, taps, positions = w.shape[0], math.prod(geo.kernel), math.prod(geo.out)
    w = np.ascontiguousarray(w, dtype)
    split = _row_split(geo, channels // groups * math.prod(geo.kernel[1:]))
    fill = _RowGeometry(geo) if split else geo
    w_taps = [w[:, :, t].reshape(groups, out_channels // groups, -1) for t in range(geo.kernel[0])] if split else []
    w_groups = w.reshape(groups, out_channels // groups, -1)
    bias_column = None if bias is None else np.reshape(bias, (groups, -1, 1))
    out = np.empty((n, out_channels) + tuple(geo.out), dtype)
    image_flops = 2 * out_channels * channels // groups * taps * positions
    workers = _workers(n * image_flops)
    extent = fill.extent if split else 0
    image_bytes = channels * math.prod(fill.kernel) * math.prod(fill.out) * dtype.itemsize
    blocks = _plan(lambda lo, hi: _Band(fill, x.shape[2:], lo, hi + extent), geo.out[0], n, image_bytes, workers, False)

    def work(worker, block):
        _, images, bands = block
        for band in bands:
            cols = _columns(x[images], band, dtype, "forward_columns")  # not the backward's: no re-zeroing by turns
            rows = out[images, :, band.lo : band.hi - extent]
            target: np.ndarray = np.reshape(rows, rows.shape[:1] + (groups, out_channels // groups, -1), copy=False)
            if split:
                _sum_row_taps(w_taps, cols, geo, target)
            else:
                np.matmul(w_groups, np.reshape(cols, target.shape[:2] + (-1, target.shape[-1]), copy=False), out=target)
            if bias_column is not None:
                target += bias_column

    _run(blocks, work, workers, image_flops * (blocks[0][1].stop - blocks[0][1].start) if blocks else 0)
    return out


def backward(g: np.ndarray, x, w: np.ndarray, geo, groups: int, needs: tuple, x_shape: tuple):
    """(dx, dw) of the convolution for its (N, O, *out) output gradient ``g``: the (N, C, *spatial) input's
    gradient when ``needs[0]`` and the weight's when ``needs[1]`` (else None; ``x`` is read only for dw)."""
    n, channels = x_shape[:2]
    out_channels, taps, positions = w.shape[0], math.prod(geo.kernel), math.prod(geo.out)
    dtype = np.result_type(g.dtype, w.dtype, *(() if x is None else (x.dtype,)))
    w_t = np.ascontiguousarray(w, dtype).reshape(groups, out_channels // groups, -1).transpose(0, 2, 1)
    dx = np.zeros(x_shape, dtype) if needs[0] else None
    image_flops = 2 * out_channels * channels // groups * taps * positions
    workers = _workers(n * image_flops * (bool(needs[0]) + bool(needs[1])))
    image_bytes = channels * taps * positions * dtype.itemsize
    spatial = tuple(x_shape[2:])
    blocks = _plan(lambda lo, hi: _Band(geo, spatial, lo, hi), geo.out[0], n, image_bytes, workers, bool(needs[0]))
    partials = np.zeros((len(blocks),) + w_t.shape, dtype) if needs[1] else None

    def work(worker, block):
        k, images, bands = block
        for band in bands:
            g_band = _grouped(g[images], band, groups)  # (B, G, O/G, L)
            if partials is not None:
                partials[k] += _weight_grad(x[images], g_band, band, dtype)
            if dx is not None:
                _input_grad(dx[images], g_band, w_t, band)

    _run(blocks, work, workers, image_flops * (blocks[0][1].stop - blocks[0][1].start) if blocks else 0)
    dw = None if partials is None else partials.sum(axis=0).transpose(0, 2, 1).reshape(w.shape)
    return dx, dw
