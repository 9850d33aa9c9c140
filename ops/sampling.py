"""Rearranging and resampling image batches, as ``torch.nn.functional``: pixel_shuffle / pixel_unshuffle
(depth-to-space and its inverse), channel_shuffle, affine_grid (the sampling grid of a batch of affine
maps, 2-D and 3-D) and grid_sample (bilinear or nearest sampling of a 4-D input at a grid's points).

pixel_shuffle, pixel_unshuffle and channel_shuffle are permutations of the input's entries (a reshape, a
transpose, a reshape): each one's gradient is the inverse permutation of ``g``, written with np.reshape and
np.transpose, so on Tensors the rule records registered ops and every order is exact. affine_grid is linear in
``theta``: grid[n, ..., i] = sum_j theta[n, i, j] base[..., j] over the fixed base grid of normalised
coordinates (x, y[, z], 1); its gradient is the einsum's transpose. grid_sample sums a few taps (4 bilinear
corners or 1 nearest pixel), each a gather of the input planes at indices that are constants of the grid, times a
weight that is a function of the grid: the input gradient scatters back (np.bincount on arrays, the registered
scatter_add on Tensors) and the grid gradient differentiates the weights through the constant slope of torch's
unnormalisation, border clip or reflection, so the second order is recorded.
"""

__all__ = ["pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "affine_grid", "grid_sample"]

from functools import reduce

import numpy as np

from tape.onnx import lowering
from tape.registry import Sample, defop
from tape.tensors import Tensor

from ._numerics import constant_values
from ._onnx import NotExportable, index_map
from ._samples import transposed, uniform
from ._validation import functional, integer, one_of, require, require_bool, require_float

FAMILY = "sampling"


# -- pixel_shuffle / pixel_unshuffle -------------------------------------------------------------------------
def _shuffle(x, r: int):
    """(*, C r^2, H, W) -> (*, C, H r, W r): out[c, h r + i, w r + j] = x[c r^2 + i r + j, h, w]."""
    *batch, c, h, w = np.shape(x)
    y = np.reshape(x, (*batch, c // (r * r), r, r, h, w))
    n = len(batch)
    y = np.transpose(y, (*range(n), n, n + 3, n + 1, n + 4, n + 2))
    return np.reshape(y, (*batch, c // (r * r), h * r, w * r))


def _unshuffle(x, r: int):
    """(*, C, H r, W r) -> (*, C r^2, H, W), _shuffle's inverse."""
    *batch, c, h, w = np.shape(x)
    y = np.reshape(x, (*batch, c, h // r, r, w // r, r))
    n = len(batch)
    y = np.transpose(y, (*range(n), n, n + 2, n + 4, n + 1, n + 3))
    return np.reshape(y, (*batch, c * r * r, h // r, w // r))


def _pixel_shuffle(input, upscale_factor):
    """``torch.nn.functional.pixel_shuffle``: (*, C r^2, H, W) -> (*, C, H r, W r)."""
    return _shuffle(input, int(upscale_factor))


def _pixel_unshuffle(input, downscale_factor):
    """``torch.nn.functional.pixel_unshuffle``: (*, C, H r, W r) -> (*, C r^2, H, W)."""
    return _unshuffle(input, int(downscale_factor))


def _check_pixel_shuffle(input, upscale_factor):
    op = "pixel_shuffle"
    r = integer(op, "upscale_factor", upscale_factor, at_least=1)
    require(input.ndim >= 3, op, "input", "a tensor of shape (*, C, H, W)", input.shape)
    c = input.shape[-3]
    require(c % (r * r) == 0, op, "input", f"a channel count divisible by upscale_factor^2 = {r * r}", c)


def _check_pixel_unshuffle(input, downscale_factor):
    op = "pixel_unshuffle"
    r = integer(op, "downscale_factor", downscale_factor, at_least=1)
    require(input.ndim >= 3, op, "input", "a tensor of shape (*, C, H, W)", input.shape)
    h, w = input.shape[-2:]
    require(
        h % r == 0 and w % r == 0,
        op,
        "input",
        f"a height and width divisible by downscale_factor={r}",
        f"shape {input.shape}",
    )


def _pixel_shuffle_samples(rng):
    return [
        Sample((uniform(rng, (2, 8, 2, 3)),), {"upscale_factor": 2}, "(N, C r^2, H, W)"),
        Sample((uniform(rng, (9, 2, 2)),), {"upscale_factor": 3}, "unbatched, r=3"),
        Sample((uniform(rng, (2, 1, 4, 1, 2)),), {"upscale_factor": 2}, "two batch dims"),
        Sample((transposed(rng, (3, 2, 4, 2)),), {"upscale_factor": 1}, "non-contiguous, r=1"),
        Sample((transposed(rng, (2, 4, 2, 3)),), {"upscale_factor": 2}, "non-contiguous"),
        # torch 2.13's backward of an empty batch fails (it returns the output's shape as the input gradient)
        Sample((uniform(rng, (0, 4, 2, 2)),), {"upscale_factor": 2}, "empty batch", torch=False),
    ]


def _pixel_unshuffle_samples(rng):
    return [
        Sample((uniform(rng, (2, 2, 4, 6)),), {"downscale_factor": 2}, "(N, C, H r, W r)"),
        Sample((uniform(rng, (1, 3, 6)),), {"downscale_factor": 3}, "unbatched, r=3"),
        Sample((uniform(rng, (2, 1, 1, 2, 4)),), {"downscale_factor": 2}, "two batch dims"),
        Sample((transposed(rng, (4, 4, 2, 2)),), {"downscale_factor": 2}, "non-contiguous"),
        # torch 2.13's backward of an empty batch fails (as pixel_shuffle's)
        Sample((uniform(rng, (0, 1, 2, 2)),), {"downscale_factor": 2}, "empty batch", torch=False),
    ]


def _pixel_op(name, forward, adjoint, factor, check, samples):
    """Declare pixel_shuffle or pixel_unshuffle: a permutation whose gradient is the other one's, ``adjoint``, by
    the same ``factor`` attribute."""
    return defop(
        name,
        family=FAMILY,
        inputs=("input",),
        forward=forward,
        vjps=(lambda g, ans, input, **attrs: adjoint(g, int(attrs[factor])),),
        check=check,
        samples=samples,
        torch_ref=functional(name),
    )


pixel_shuffle = _pixel_op(
    "pixel_shuffle", _pixel_shuffle, _unshuffle, "upscale_factor", _check_pixel_shuffle, _pixel_shuffle_samples
)
pixel_unshuffle = _pixel_op(
    "pixel_unshuffle", _pixel_unshuffle, _shuffle, "downscale_factor", _check_pixel_unshuffle, _pixel_unshuffle_samples
)


# -- channel_shuffle -----------------------------------------------------------------------------------------
def _channel_shuffle_kernel(x, groups: int):
    """(N, C, *) with C = g k: channel a k + b moves to b g + a (the (g, k) channel grid transposed)."""
    shape = np.shape(x)
    y = np.reshape(x, (shape[0], groups, shape[1] // groups, *shape[2:]))
    return np.reshape(np.swapaxes(y, 1, 2), shape)


def _channel_shuffle(input, groups):
    """``torch.nn.functional.channel_shuffle``: split the C channels into ``groups`` groups and interleave."""
    return _channel_shuffle_kernel(input, int(groups))


def _channel_shuffle_vjp(g, ans, input, groups):
    return _channel_shuffle_kernel(g, input.shape[1] // int(groups))  # the inverse: the transposed grid


def _check_channel_shuffle(input, groups):
    op = "channel_shuffle"
    groups = integer(op, "groups", groups, at_least=1)
    require(input.ndim >= 3, op, "input", "a tensor of shape (N, C, *) with at least one spatial dim", input.shape)
    require(input.shape[1] % groups == 0, op, "input", f"a channel count divisible by groups={groups}", input.shape[1])


def _channel_shuffle_samples(rng):
    return [
        Sample((uniform(rng, (2, 6, 3)),), {"groups": 2}, "(N, C, L)"),
        Sample((uniform(rng, (2, 6, 2, 2)),), {"groups": 3}, "(N, C, H, W)"),
        Sample((uniform(rng, (1, 4, 1, 2, 2)),), {"groups": 4}, "3-D, groups == C"),
        Sample((transposed(rng, (3, 4, 2)),), {"groups": 2}, "non-contiguous"),
        Sample((uniform(rng, (2, 3, 2)),), {"groups": 1}, "groups=1"),
        Sample((uniform(rng, (0, 4, 2)),), {"groups": 2}, "empty batch"),
    ]


channel_shuffle = defop(
    "channel_shuffle",
    family=FAMILY,
    inputs=("input",),
    forward=_channel_shuffle,
    vjps=(_channel_shuffle_vjp,),
    check=_check_channel_shuffle,
    samples=_channel_shuffle_samples,
    torch_ref=lambda torch, input, groups: torch.nn.functional.channel_shuffle(input, groups),
)


# -- affine_grid ---------------------------------------------------------------------------------------------
def _coordinates(n: int, align_corners: bool, dtype) -> np.ndarray:
    """torch's normalised pixel coordinates along one axis: -1 and 1 at the corner pixels' centres
    (align_corners) or at their outer edges."""
    if n == 1:
        return np.zeros(1, dtype)
    steps = np.arange(n, dtype=np.float64)
    c = 2 * steps / (n - 1) - 1 if align_corners else (2 * steps + 1) / n - 1
    return c.astype(dtype)


def _base_grid(spatial: tuple, align_corners: bool, dtype) -> np.ndarray:
    """(*spatial, k + 1): the coordinates (x, y[, z], 1) of every output pixel, x along the last axis."""
    axes = [_coordinates(n, align_corners, dtype) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # mesh[i] varies along spatial axis i
    return np.stack([*reversed(mesh), np.ones(spatial, dtype)], axis=-1)


def _affine_grid(theta, size, align_corners=False):
    """``torch.nn.functional.affine_grid``: (N, 2, 3) theta and size (N, C, H, W) -> (N, H, W, 2) grid, or
    (N, 3, 4) and (N, C, D, H, W) -> (N, D, H, W, 3); grid[n, ..., i] = sum_j theta[n, i, j] base[..., j]."""
    spatial = tuple(size[2:])
    base = np.reshape(_base_grid(spatial, bool(align_corners), theta.dtype), (-1, len(spatial) + 1))
    return np.reshape(np.einsum("nij,pj->npi", theta, base), (theta.shape[0], *spatial, len(spatial)))


def _affine_grid_vjp(g, ans, theta, size, align_corners=False):
    spatial = tuple(size[2:])
    base = np.reshape(_base_grid(spatial, bool(align_corners), g.dtype), (-1, len(spatial) + 1))
    return np.einsum("npi,pj->nij", np.reshape(g, (theta.shape[0], base.shape[0], len(spatial))), base)


def _check_affine_grid(theta, size, align_corners=False):
    op = "affine_grid"
    require_float(op, "theta", theta)
    ok = (
        isinstance(size, tuple | list)
        and len(size) in (4, 5)
        and all(isinstance(s, int | np.integer) and not isinstance(s, bool) and s > 0 for s in size)
    )
    require(ok, op, "size", "(N, C, H, W) or (N, C, D, H, W) as positive ints (as torch)", size)
    k = len(size) - 2
    expected = (size[0], k, k + 1)
    require(theta.shape == expected, op, "theta", f"shape {expected} for size {tuple(size)}", theta.shape)
    require_bool(op, "align_corners", align_corners)


def _affine_grid_samples(rng):
    return [
        Sample((uniform(rng, (2, 2, 3)),), {"size": (2, 3, 4, 5)}, "2-D"),
        Sample((uniform(rng, (2, 2, 3)),), {"size": (2, 1, 3, 2), "align_corners": True}, "2-D, align_corners"),
        Sample((uniform(rng, (1, 3, 4)),), {"size": (1, 2, 2, 3, 4)}, "3-D"),
        Sample((uniform(rng, (2, 3, 4)),), {"size": (2, 1, 3, 1, 2), "align_corners": True}, "3-D, size-1 axis"),
        Sample((np.transpose(uniform(rng, (3, 2, 2)), (2, 1, 0)),), {"size": (2, 1, 1, 3)}, "non-contiguous"),
    ]


affine_grid = defop(
    "affine_grid",
    family=FAMILY,
    inputs=("theta",),
    forward=_affine_grid,
    vjps=(_affine_grid_vjp,),
    check=_check_affine_grid,
    samples=_affine_grid_samples,
    notes="Linear in theta: the grid is an einsum with the fixed base grid, its gradient the transposed einsum.",
    torch_ref=lambda torch, theta, size, align_corners=False: torch.nn.functional.affine_grid(
        theta, list(size), align_corners=align_corners
    ),
)


# -- grid_sample ---------------------------------------------------------------------------------------------
_GRID_MODES = ("bilinear", "nearest")
_GRID_PADDINGS = ("zeros", "border", "reflection")


def _values(x):
    """The array of ``x`` (a Tensor in a traced rule): indices, masks and piecewise-constant slopes."""
    return np.asarray(constant_values(x))


def _reflect(x, twice_low: int, twice_high: int):
    """torch's reflect_coordinates: ``x`` folded into [twice_low / 2, twice_high / 2]; (value, slope +-1)."""
    if twice_low == twice_high:
        return x * 0, np.zeros(np.shape(x), x.dtype)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    side = np.sign(_values(x) - low)
    distance = np.abs(x - low)
    flips = np.floor(_values(distance) / span)
    extra = distance - flips * span
    even = flips % 2 == 0
    return np.where(even, extra + low, span - extra + low), np.where(even, side, -side)


def _source(coord, size: int, padding_mode: str, align_corners: bool):
    """(pixel coordinate, its constant derivative in the normalised ``coord``): torch's unnormalisation, then
    the border clip or the reflection (clipped too)."""
    scale = (size - 1) / 2 if align_corners else size / 2
    x = (coord + 1) * scale - (0 if align_corners else 0.5)
    slope = np.full(np.shape(x), scale, dtype=coord.dtype)
    if padding_mode == "reflection":
        x, side = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
        slope = slope * side
    if padding_mode != "zeros":
        raw = _values(x)
        inside = (raw > 0) & (raw < size - 1)  # torch's clip: no gradient on or past the border
        x, slope = np.clip(x, 0, size - 1), np.where(inside, slope, 0)
    return x, slope


def _grid_taps(input, grid, mode, padding_mode, align_corners):
    """Per tap (4 bilinear corners, or 1 nearest pixel): (flat plane index (N, 1, P), in-bounds weight (N, 1, P)
    -- a function of grid --, d weight / d x, d weight / d y), and the (x, y) slopes of the source coordinates."""
    n, _, h, w = input.shape
    x, sx = _source(grid[..., 0], w, padding_mode, align_corners)
    y, sy = _source(grid[..., 1], h, padding_mode, align_corners)
    points = grid.shape[1] * grid.shape[2]
    x, y, sx, sy = (np.reshape(a, (n, 1, points)) for a in (x, y, sx, sy))
    if mode == "nearest":
        xi, yi = np.rint(_values(x)), np.rint(_values(y))  # torch's nearbyint: halves to even
        corners = [(xi, yi, np.ones(xi.shape, grid.dtype), None, None)]
    else:
        x0, y0 = np.floor(_values(x)), np.floor(_values(y))
        wx1, wy1 = x - x0, y - y0
        wx0, wy0 = 1 - wx1, 1 - wy1
        corners = [
            (x0, y0, wx0 * wy0, -wy0, -wx0),
            (x0 + 1, y0, wx1 * wy0, wy0, -wx1),
            (x0, y0 + 1, wx0 * wy1, -wy1, wx0),
            (x0 + 1, y0 + 1, wx1 * wy1, wy1, wx1),
        ]
    taps = []
    for xi, yi, weight, dx, dy in corners:
        inside = (xi >= 0) & (xi <= w - 1) & (yi >= 0) & (yi <= h - 1)
        index = (np.clip(yi, 0, h - 1) * w + np.clip(xi, 0, w - 1)).astype(np.int64)
        taps.append((index, np.where(inside, weight, 0), dx, dy, inside))
    return taps, sx, sy


def _gather_planes(input, index):
    """input (N, C, H, W) at flat plane positions ``index`` (N, 1, P): (N, C, P)."""
    n, c = input.shape[:2]
    planes = np.reshape(input, (n, c, input.shape[2] * input.shape[3]))
    return np.take_along_axis(planes, np.broadcast_to(index, (n, c, index.shape[-1])), axis=2)


def _grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """``torch.nn.functional.grid_sample`` of a 4-D input: out[n, c, i, j] samples input[n, c] at the normalised
    (x, y) = grid[n, i, j] ((-1, -1) the top-left corner), bilinear or nearest, outside the input zeros or the
    border's or the reflected values; align_corners None is False, as torch."""
    taps, _, _ = _grid_taps(input, grid, mode, padding_mode, bool(align_corners))
    out = sum(weight * _gather_planes(input, index) for index, weight, *_ in taps)
    return np.reshape(out, input.shape[:2] + grid.shape[1:3])


def _scatter_planes(src, index, shape):
    """The adjoint of _gather_planes: (N, C, P) values added into zeros of the (N, C, H, W) ``shape``."""
    from .indexing import scatter_add

    n, c = shape[:2]
    index = np.broadcast_to(index, (n, c, index.shape[-1]))
    if isinstance(src, Tensor):  # a create_graph backward: the recorded scatter_add (its backward is a gather)
        zeros = np.zeros((n, c, shape[2] * shape[3]), src.dtype)
        return np.reshape(scatter_add(zeros, 2, np.ascontiguousarray(index), src), shape)
    flat = (index + (np.arange(n * c) * (shape[2] * shape[3])).reshape(n, c, 1)).ravel()
    summed = np.bincount(flat, weights=src.ravel(), minlength=n * c * shape[2] * shape[3])
    return summed.astype(src.dtype, copy=False).reshape(shape)


def _grid_sample_vjp(g, ans, input, grid, *, needs, mode="bilinear", padding_mode="zeros", align_corners=None):
    taps, sx, sy = _grid_taps(input, grid, mode, padding_mode, bool(align_corners))
    g = np.reshape(g, input.shape[:2] + (grid.shape[1] * grid.shape[2],))
    grad_input = None
    if needs[0]:
        grad_input = sum(_scatter_planes(weight * g, index, input.shape) for index, weight, *_ in taps)
    grad_grid = None
    if needs[1]:
        if mode == "nearest":
            grad_grid = np.zeros_like(grid)
        else:
            parts = []
            for index, _, dx, dy, inside in taps:
                seen = np.sum(g * _gather_planes(input, index), axis=1, keepdims=True)  # (N, 1, P)
                parts.append((np.where(inside, dx * seen, 0), np.where(inside, dy * seen, 0)))
            gx = reduce(lambda a, b: a + b, [x for x, _ in parts])
            gy = reduce(lambda a, b: a + b, [y for _, y in parts])
            grad_grid = np.reshape(np.stack([gx * sx, gy * sy], axis=-1), grid.shape)
    return grad_input, grad_grid


def _check_grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    op = "grid_sample"
    require_float(op, "input", input)
    require_float(op, "grid", grid)
    require(grid.dtype == input.dtype, op, "grid", f"the input's dtype {input.dtype}", grid.dtype)
    require(
        input.ndim == 4,
        op,
        "input",
        "a 4-D (N, C, H, W) tensor (5-D volumes are not supported yet)",
        f"shape {input.shape}",
    )
    require(
        grid.ndim == 4 and grid.shape[-1] == 2 and grid.shape[0] == input.shape[0],
        op,
        "grid",
        f"shape (N={input.shape[0]}, H_out, W_out, 2)",
        grid.shape,
    )
    require(
        min(input.shape[2:]) >= 1 and input.shape[1] >= 1,
        op,
        "input",
        "non-empty channel and spatial dims",
        f"shape {input.shape}",
    )
    one_of(op, "mode", mode, _GRID_MODES, "'bilinear' or 'nearest' ('bicubic' is not supported yet)")
    one_of(op, "padding_mode", padding_mode, _GRID_PADDINGS, "'zeros', 'border' or 'reflection'")
    if align_corners is not None and not isinstance(align_corners, bool | np.bool_):
        raise TypeError(f"{op}: argument 'align_corners' expected None or a bool, got {type(align_corners).__name__}")


def _grid_samples(rng):
    def grid(n, h, w, low=-1.3, high=1.3):
        # away from pixel centres and borders, where bilinear weights (and nearest picks) jump: finite differences
        # need smooth neighbourhoods, so the normalised coordinates are drawn on a jittered lattice
        return uniform(rng, (n, h, w, 2), low, high)

    def ok_bilinear(g, size, align):
        x = (g + 1) * ((size - 1) / 2 if align else size / 2) - (0 if align else 0.5)
        frac = x - np.floor(x)
        return np.all((frac > 0.01) & (frac < 0.99))

    def draw(n, h, w, size, align, low=-1.3, high=1.3):
        for _ in range(1000):
            g = grid(n, h, w, low, high)
            if ok_bilinear(g, size, align):
                return g
        raise RuntimeError("no grid away from pixel centres")  # pragma: no cover

    x = uniform(rng, (2, 3, 4, 4))
    samples = []
    for padding in _GRID_PADDINGS:
        for align in (False, True):
            attrs = {"padding_mode": padding, "align_corners": align}
            samples.append(Sample((x, draw(2, 3, 2, 4, align)), attrs, f"bilinear, {padding}, align={align}"))
    samples += [
        Sample((x, draw(2, 2, 3, 4, False, -0.9, 0.9)), {"mode": "nearest"}, "nearest"),
        Sample(
            (x, draw(2, 2, 3, 4, True, -1.4, 1.4)),
            {"mode": "nearest", "padding_mode": "reflection", "align_corners": True},
            "nearest, reflection",
        ),
        Sample((uniform(rng, (1, 2, 3, 5)).transpose(0, 1, 3, 2), draw(1, 2, 2, 3, False)), {}, "non-contiguous"),
        Sample(
            (uniform(rng, (1, 1, 1, 3)), draw(1, 2, 2, 1, False, -0.4, 0.4)),
            {"padding_mode": "border"},
            "height 1, border",
        ),
        Sample((uniform(rng, (0, 2, 3, 3)), grid(0, 2, 2)), {}, "empty batch"),
    ]
    return samples


grid_sample = defop(
    "grid_sample",
    family=FAMILY,
    inputs=("input", "grid"),
    forward=_grid_sample,
    joint_vjp=_grid_sample_vjp,
    check=_check_grid_sample,
    samples=_grid_samples,
    notes="4-D input, bilinear or nearest, zeros / border / reflection padding, as torch (align_corners=None is "
    "False). Each tap is a gather of the input planes (its adjoint a scatter_add); the grid gradient is 0 for "
    "nearest and past a clipped border, as torch.",
    torch_ref=lambda torch, input, grid, **attrs: torch.nn.functional.grid_sample(
        input, grid, **{"align_corners": False, **{k: v for k, v in attrs.items() if v is not None}}
    ),
)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_affine_grid(g, rec, theta):
    """The base grid (P, k + 1) as a constant times each theta transposed: (N, P, k), reshaped to the grid."""
    a = rec.attributes
    spatial = tuple(a["size"][2:])
    dtype = rec.inputs[0].dtype
    base = np.reshape(_base_grid(spatial, bool(a.get("align_corners", False)), dtype), (-1, len(spatial) + 1))
    points = g.op("MatMul", g.const(base), g.op("Transpose", theta, perm=[0, 2, 1]))
    return g.op("Reshape", points, g.ints(rec.output.shape))


def _onnx_grid_sample(g, rec, input, grid):
    """ONNX's GridSample (opset 20) has torch's modes, paddings and align_corners."""
    a = rec.attributes
    if 0 in rec.inputs[0].shape:
        raise NotExportable("an empty input has no lowering")
    mode = {"bilinear": "linear", "nearest": "nearest"}[a.get("mode", "bilinear")]
    return g.op(
        "GridSample",
        input,
        grid,
        mode=mode,
        padding_mode=a.get("padding_mode", "zeros"),
        align_corners=int(bool(a.get("align_corners"))),
    )


for _op in (pixel_shuffle, pixel_unshuffle, channel_shuffle):
    lowering(_op, lambda g, rec, input: index_map(g, rec, input))
lowering(affine_grid, _onnx_affine_grid)
lowering(
    grid_sample,
    _onnx_grid_sample,
    edge_difference="a NaN or inf grid coordinate: ONNX Runtime's GridSample gives 0 or a border value where the "
    "forward gives NaN",
)
