"""Rearranging and resampling image batches, as ``torch.nn.functional``: pixel_shuffle / pixel_unshuffle
(depth-to-space and its inverse), channel_shuffle, and affine_grid (the sampling grid of a batch of affine
maps, 2-D and 3-D).

pixel_shuffle, pixel_unshuffle and channel_shuffle are permutations of the input's entries (a reshape, a
transpose, a reshape): each one's gradient is the inverse permutation of ``g``, written with np.reshape and
np.transpose, so on Tensors the rule records registered ops and every order is exact. affine_grid is linear in
``theta``: grid[n, ..., i] = sum_j theta[n, i, j] base[..., j] over the fixed base grid of normalised
coordinates (x, y[, z], 1); its gradient is the einsum's transpose.
"""

__all__ = ["pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "affine_grid"]

import numbers

import numpy as np

from tape.registry import Sample, defop

from ._samples import transposed, uniform
from ._validation import require, require_float

FAMILY = "sampling"


def _positive_int(op: str, argument: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{op}: argument '{argument}' expected a positive int, got {type(value).__name__} {value!r}")
    return int(value)


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
    r = _positive_int(op, "upscale_factor", upscale_factor)
    require(input.ndim >= 3, op, "input", "a tensor of shape (*, C, H, W)", input.shape)
    c = input.shape[-3]
    require(c % (r * r) == 0, op, "input", f"a channel count divisible by upscale_factor^2 = {r * r}", c)


def _check_pixel_unshuffle(input, downscale_factor):
    op = "pixel_unshuffle"
    r = _positive_int(op, "downscale_factor", downscale_factor)
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


pixel_shuffle = defop(
    "pixel_shuffle",
    family=FAMILY,
    inputs=("input",),
    forward=_pixel_shuffle,
    vjps=(lambda g, ans, input, upscale_factor: _unshuffle(g, int(upscale_factor)),),
    check=_check_pixel_shuffle,
    samples=_pixel_shuffle_samples,
    torch_ref=lambda torch, input, upscale_factor: torch.nn.functional.pixel_shuffle(input, upscale_factor),
)

pixel_unshuffle = defop(
    "pixel_unshuffle",
    family=FAMILY,
    inputs=("input",),
    forward=_pixel_unshuffle,
    vjps=(lambda g, ans, input, downscale_factor: _shuffle(g, int(downscale_factor)),),
    check=_check_pixel_unshuffle,
    samples=_pixel_unshuffle_samples,
    torch_ref=lambda torch, input, downscale_factor: torch.nn.functional.pixel_unshuffle(input, downscale_factor),
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
    groups = _positive_int(op, "groups", groups)
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
        and all(isinstance(s, numbers.Integral) and not isinstance(s, bool) and s > 0 for s in size)
    )
    require(ok, op, "size", "(N, C, H, W) or (N, C, D, H, W) as positive ints (as torch)", size)
    k = len(size) - 2
    expected = (size[0], k, k + 1)
    require(theta.shape == expected, op, "theta", f"shape {expected} for size {tuple(size)}", theta.shape)
    if not isinstance(align_corners, bool | np.bool_):
        raise TypeError(f"{op}: argument 'align_corners' expected a bool, got {type(align_corners).__name__}")


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
