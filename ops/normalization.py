"""Normalisations, as in ``torch.nn.functional``: softmax / log_softmax along a dim, layer_norm and rms_norm
over the trailing ``normalized_shape`` dims.

The arithmetic is the row kernels of ops/_kernels/rowwise.py: each op views its reduced dims as the last
axis of rows and runs over blocks of rows that stay in cache (on the worker pool when there are several),
writing into fresh arrays it owns. softmax / log_softmax are computed from ``x - max(x)``, so logits of +-1e4
give finite values and gradients; their rules, written again for Tensors, are traced for the second order.
layer_norm saves its normalised rows and each row's 1/std, rms_norm only the 1/std (its backward recomputes
the rows block by block); their second order is taken through ``composite=`` versions written with registered
ops (mean, rsqrt, mul, add).

Empty shapes work as in torch: a softmax over an empty dim, or a norm of zero rows or zero features,
gives an empty output and empty (or zero) gradients.
"""

__all__ = ["softmax", "log_softmax", "layer_norm", "rms_norm"]

import math
from functools import partial, reduce

import numpy as np

from tape.registry import Sample, defop
from tape.tensors import Tensor

from ._kernels.rowwise import (
    along_last,
    blockwise,
    from_last,
    log_softmax_block,
    log_softmax_grad_block,
    normalize_block,
    normalize_grad_block,
    row_dots,
    row_sums,
    softmax_block,
    softmax_grad_block,
)
from ._samples import along_dim_samples, transposed, uniform
from ._validation import normalize_dim, require, require_float

FAMILY = "normalization"


# -- softmax / log_softmax ---------------------------------------------------------------------------------
def _rows(a, axis: int):
    """``a`` (an array or, in a traced rule, a Tensor) with ``axis`` last; a 0-d ``a`` as shape (1,) (torch lets
    softmax run over dim 0 / -1 of a scalar). Views: writing into them writes into ``a``."""
    return along_last(np.reshape(a, (1,)) if a.ndim == 0 else a, axis)


def _unrows(rows, axis: int, shape: tuple):
    """Undo ``_rows``: ``axis`` back in place, the shape of the original."""
    return np.reshape(from_last(rows, axis), shape)


def _along_dim(op: str, block, grad_block, traced_grad):
    """Declare softmax-like ``op`` (torch.<op>(input, dim)): ``block(x, out)`` and ``grad_block(g, y, out)`` are
    its row kernels (rowwise.py), ``traced_grad(g, y)`` the same gradient written for Tensors (the rule traced
    for create_graph); y is the op's output. Results are fresh arrays in the layout of the input (and output)."""

    def forward(input, dim=-1):
        axis = normalize_dim(op, dim, input.ndim)
        out = np.empty_like(input)
        if out.size:
            blockwise(block, _rows(input, axis), _rows(out, axis))
        return out

    def rule(g, ans, input, dim=-1):
        axis = normalize_dim(op, dim, input.ndim)
        g_rows, y = _rows(g, axis), _rows(ans, axis)
        if isinstance(g, Tensor):
            return _unrows(traced_grad(g_rows, y), axis, input.shape)
        dx = np.empty_like(ans)
        blockwise(grad_block, g_rows, y, _rows(dx, axis))
        return dx

    def check(input, dim=-1):
        require_float(op, "input", input)
        normalize_dim(op, dim, input.ndim)

    return defop(
        op,
        family=FAMILY,
        inputs=("input",),
        forward=forward,
        vjps=(rule,),
        check=check,
        samples=along_dim_samples,
        torch_ref=lambda torch, input, dim=-1: getattr(torch, op)(input, dim=dim),
    )


# softmax's gradient is y * (g - sum(g * y)) (torch's formula), log_softmax's g - exp(y) * sum(g)
softmax = _along_dim("softmax", softmax_block, softmax_grad_block, lambda g, y: y * (g - row_dots(g, y)))
log_softmax = _along_dim(
    "log_softmax", log_softmax_block, log_softmax_grad_block, lambda g, y: g - np.exp(y) * row_sums(g)
)


# -- layer_norm / rms_norm ---------------------------------------------------------------------------------
def _shape_tuple(normalized_shape) -> tuple:
    """``normalized_shape`` (an int or a sequence of ints, as the check accepts) as a tuple of ints."""
    if isinstance(normalized_shape, int | np.integer):
        return (int(normalized_shape),)
    return tuple(int(n) for n in normalized_shape)


def _normalized_axes(op: str, x: np.ndarray, normalized_shape) -> tuple:
    """The trailing axes ``normalized_shape`` names, after checking it matches the end of ``x``'s shape."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int | np.integer) else tuple(normalized_shape)
    require(
        len(shape) >= 1 and all(isinstance(n, int | np.integer) and not isinstance(n, bool) and n >= 0 for n in shape),
        op,
        "normalized_shape",
        "a non-empty shape of ints >= 0",
        normalized_shape,
    )
    require(
        len(shape) <= x.ndim and x.shape[x.ndim - len(shape) :] == shape,
        op,
        "normalized_shape",
        f"the trailing dims of the input (input shape {x.shape})",
        shape,
    )
    return tuple(range(x.ndim - len(shape), x.ndim))


def _check_affine(op: str, name: str, param, x: np.ndarray, axes: tuple) -> None:
    if param is not None:
        require_float(op, name, param)
        expected = tuple(x.shape[a] for a in axes)
        require(param.shape == expected, op, name, f"shape {expected} (normalized_shape)", param.shape)


def _as_rows(x: np.ndarray, normalized_shape) -> np.ndarray:
    """``x`` as a (rows, features) matrix: the normalised trailing dims flattened into one axis."""
    lead = x.ndim - len(_shape_tuple(normalized_shape))
    return x.reshape(math.prod(x.shape[:lead]), math.prod(x.shape[lead:]))


def _flat(param):
    return None if param is None else param.reshape(-1)


def _normalize(input, normalized_shape, weight, bias, eps, subtract_mean: bool):
    """The forward of layer_norm (``subtract_mean``) and rms_norm, over rows: (out, what the backward reuses:
    {"xhat": layer_norm's normalised rows (the output itself without weight and bias), or None for rms_norm,
    which recomputes them from its input, "rstd": 1/std, a column})."""
    x = _as_rows(input, normalized_shape)
    rstd = np.zeros((x.shape[0], 1), x.dtype)
    out = np.empty_like(x)
    affine = weight is not None or bias is not None
    xhat = np.empty_like(x) if subtract_mean and affine else out
    if x.size:  # no rows, or no features: nothing to normalise (and no 0/0)
        kernel = partial(normalize_block, _flat(weight), _flat(bias), eps, subtract_mean)
        blockwise(kernel, x, xhat, out, rstd)
    return out.reshape(input.shape), {"xhat": xhat if subtract_mean else None, "rstd": rstd}


def _normalize_vjp(g, input, weight, bias, needs, normalized_shape, xhat, rstd):
    """The joint rule of layer_norm and rms_norm (``bias`` None; ``xhat`` None: recomputed from the input)."""
    x = _as_rows(input, normalized_shape)
    need_weight, need_bias = needs[1], bias is not None and needs[2]
    dx = np.empty_like(x) if needs[0] else None  # every element is written
    if x.size == 0:
        sums = [(np.zeros(x.shape[1], x.dtype), np.zeros(x.shape[1], x.dtype))]
    else:
        subtract_mean = xhat is not None  # layer_norm saves its normalised rows, rms_norm does not
        kernel = partial(normalize_grad_block, _flat(weight), need_weight, need_bias, subtract_mean)
        sums = blockwise(kernel, g.reshape(x.shape), xhat, None if subtract_mean else x, rstd, dx)
    return (
        None if dx is None else dx.reshape(input.shape),
        reduce(np.add, [dw for dw, _ in sums]).reshape(weight.shape) if need_weight else None,
        reduce(np.add, [db for _, db in sums]).reshape(bias.shape) if need_bias else None,
    )


def _layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """``torch.nn.functional.layer_norm``: normalise over the trailing ``normalized_shape`` dims, then scale by
    ``weight`` and shift by ``bias``."""
    return _normalize(input, normalized_shape, weight, bias, eps, subtract_mean=True)


def _layer_norm_vjp(g, ans, input, weight, bias, *, needs, normalized_shape, eps, xhat, rstd):
    return _normalize_vjp(g, input, weight, bias, needs, normalized_shape, xhat, rstd)


def _trailing_dims(input, normalized_shape) -> tuple:
    n = len(_shape_tuple(normalized_shape))
    return tuple(range(input.ndim - n, input.ndim))


def _layer_norm_composite(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """layer_norm written with registered ops: what its second order differentiates."""
    import ops

    dims = _trailing_dims(input, normalized_shape)
    if input.size == 0:
        out = input * 1
    else:
        centred = input - ops.mean(input, dim=dims, keepdim=True)
        out = centred * ops.rsqrt(ops.mean(centred * centred, dim=dims, keepdim=True) + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def _check_layer_norm(input, weight=None, bias=None, normalized_shape=None, eps=1e-5):
    require_float("layer_norm", "input", input)
    axes = _normalized_axes("layer_norm", input, normalized_shape)
    _check_affine("layer_norm", "weight", weight, input, axes)
    _check_affine("layer_norm", "bias", bias, input, axes)
    require(
        isinstance(eps, float | int) and not isinstance(eps, bool) and eps >= 0,
        "layer_norm",
        "eps",
        "a number >= 0",
        eps,
    )


def _layer_norm_samples(rng):
    return [
        Sample((uniform(rng, (3, 5)), uniform(rng, (5,)), uniform(rng, (5,))), {"normalized_shape": (5,)}),
        Sample((uniform(rng, (2, 3, 4)), None, None), {"normalized_shape": (3, 4)}, "no affine"),
        Sample(
            (uniform(rng, (2, 3, 4)), uniform(rng, (3, 4)), None),
            {"normalized_shape": [3, 4], "eps": 1e-3},
            "weight only",
        ),
        Sample(
            (transposed(rng, (3, 4)), None, uniform(rng, (4,))), {"normalized_shape": 4}, "bias only, non-contiguous"
        ),
        Sample((uniform(rng, (4,)), uniform(rng, (4,)), uniform(rng, (4,))), {"normalized_shape": (4,)}, "1-D"),
        Sample((uniform(rng, (0, 4)), uniform(rng, (4,)), uniform(rng, (4,))), {"normalized_shape": (4,)}, "zero rows"),
        Sample((uniform(rng, (3, 0)), None, None), {"normalized_shape": (0,)}, "zero features"),
    ]


layer_norm = defop(
    "layer_norm",
    family=FAMILY,
    inputs=("input", "weight?", "bias?"),
    forward=_layer_norm,
    joint_vjp=_layer_norm_vjp,
    saves=True,
    composite=_layer_norm_composite,
    check=_check_layer_norm,
    samples=_layer_norm_samples,
    torch_ref=lambda torch, input, weight, bias, normalized_shape, eps=1e-5: torch.nn.functional.layer_norm(
        input, _shape_tuple(normalized_shape), weight, bias, eps
    ),
)


def _rms_eps(dtype, eps):
    return float(np.finfo(dtype).eps) if eps is None else eps


def _rms_norm(input, normalized_shape, weight=None, eps=None):
    """``torch.nn.functional.rms_norm``: x / sqrt(mean(x^2) + eps) over the trailing ``normalized_shape`` dims,
    times ``weight``; ``eps=None`` means the machine epsilon of the input's dtype."""
    return _normalize(input, normalized_shape, weight, None, _rms_eps(input.dtype, eps), subtract_mean=False)


def _rms_norm_vjp(g, ans, input, weight, *, needs, normalized_shape, eps, xhat, rstd):
    return _normalize_vjp(g, input, weight, None, needs, normalized_shape, xhat, rstd)[:2]


def _rms_norm_composite(input, normalized_shape, weight=None, eps=None):
    """rms_norm written with registered ops: what its second order differentiates."""
    import ops

    if input.size == 0:
        out = input * 1
    else:
        dims = _trailing_dims(input, normalized_shape)
        out = input * ops.rsqrt(ops.mean(input * input, dim=dims, keepdim=True) + _rms_eps(input.dtype, eps))
    return out if weight is None else out * weight


def _check_rms_norm(input, weight=None, normalized_shape=None, eps=None):
    require_float("rms_norm", "input", input)
    _check_affine("rms_norm", "weight", weight, input, _normalized_axes("rms_norm", input, normalized_shape))
    require(
        eps is None or (isinstance(eps, float | int) and not isinstance(eps, bool) and eps >= 0),
        "rms_norm",
        "eps",
        "None or a number >= 0",
        eps,
    )


def _rms_norm_samples(rng):
    return [
        Sample((uniform(rng, (3, 5)), uniform(rng, (5,))), {"normalized_shape": (5,)}),
        Sample((uniform(rng, (2, 3, 4)), None), {"normalized_shape": (3, 4), "eps": 1e-2}, "no weight"),
        Sample((transposed(rng, (3, 4)), uniform(rng, (4,))), {"normalized_shape": 4}, "non-contiguous"),
        Sample((uniform(rng, (0, 5)), uniform(rng, (5,))), {"normalized_shape": (5,)}, "zero rows"),
        Sample((uniform(rng, (2, 0)), None), {"normalized_shape": 0}, "zero features"),
    ]


rms_norm = defop(
    "rms_norm",
    family=FAMILY,
    inputs=("input", "weight?"),
    forward=_rms_norm,
    joint_vjp=_rms_norm_vjp,
    saves=True,
    composite=_rms_norm_composite,
    check=_check_rms_norm,
    samples=_rms_norm_samples,
    torch_ref=lambda torch, input, weight, normalized_shape, eps=None: torch.nn.functional.rms_norm(
        input, _shape_tuple(normalized_shape), weight, eps
    ),
)
