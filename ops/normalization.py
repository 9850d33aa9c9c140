"""Normalisations, as in ``torch.nn.functional``: softmax / log_softmax along a dim, layer_norm and rms_norm
over the trailing ``normalized_shape`` dims, batch_norm / group_norm / instance_norm over the channels (with
optional running statistics, read and never updated) and local_response_norm across neighbouring channels.

softmax, log_softmax, layer_norm and rms_norm run on the row kernels of ops/_kernels/rowwise.py: each views its
reduced dims as the last axis of rows and runs over blocks of rows that stay in cache (on the worker pool when
there are several), writing into arrays it owns (reused from step to step: rowwise.owned_like). What each op
saves, how its second order is taken and what it does at the edges is in its ``notes=`` (docs/coverage.md).
"""

__all__ = [
    "softmax",
    "log_softmax",
    "layer_norm",
    "rms_norm",
    "batch_norm",
    "group_norm",
    "instance_norm",
    "local_response_norm",
]

import math
import warnings
from functools import partial, reduce

import numpy as np

from tape.creation import float_dtype
from tape.onnx import lowering
from tape.registry import Grad, Sample, defop
from tape.tensors import Tensor

from ._kernels.rowwise import (
    along_last,
    blockwise,
    from_last,
    log_softmax_block,
    log_softmax_grad_block,
    normalize_block,
    normalize_grad_block,
    owned_like,
    row_dots,
    row_sums,
    softmax_block,
    softmax_grad_block,
)
from ._notes import case_law
from ._onnx import NotExportable, axis_of, scalar
from ._samples import along_dim_samples, transposed, uniform
from ._validation import implicit_dim, normalize_dim, require, require_bool, require_float

# torch's case law and what each op saves, op by op: each entry joins the notes= of the ops it names (shown in
# docs/coverage.md)
_CASE_LAW = (
    (
        ("softmax", "log_softmax"),
        "Computed from x - max(x), so logits of +-1e4 give finite values and gradients; the rule, written again for "
        "Tensors, is traced for the second order. Over an empty dim: an empty output and gradient, as torch.",
    ),
    (("softmax",), "exp(x) is taken unshifted in the rows where it cannot under- or overflow (rowwise.softmax_block)."),
    (
        ("layer_norm",),
        "Saves its normalised rows and each row's 1/std. Under create_graph its rule runs on Tensors in closed form, "
        "dx = rstd (gw - mean(gw) - xhat mean(gw xhat)) with gw = g * weight, recomputing xhat and rstd with "
        "registered ops (mean, rsqrt, mul): the second order differentiates that, and a recorded backward (ONNX) "
        "holds ~20 nodes per layer_norm instead of the derivative of its forward.",
    ),
    (
        ("rms_norm",),
        "Saves each row's 1/std only (its backward recomputes the rows block by block); the second order is taken "
        "through a composite= version written with registered ops.",
    ),
    (
        ("layer_norm", "rms_norm"),
        "Zero rows or zero features give an empty output and empty (or zero) gradients, as torch.",
    ),
    (
        ("batch_norm",),
        "training uses the batch statistics and, unlike torch, does not update running_mean/var: nn.BatchNorm* "
        "computes torch's updated values and writes them into its buffers in place",
    ),
    (("instance_norm",), "running statistics are read (use_input_stats=False), never updated"),
)

FAMILY = "normalization"


# -- softmax / log_softmax ---------------------------------------------------------------------------------
def _rows(a, axis: int):
    """``a`` (an array or, in a traced rule, a Tensor) with ``axis`` last; a 0-d ``a`` as shape (1,) (torch lets
    softmax run over dim 0 / -1 of a scalar). Views: writing into them writes into ``a``."""
    return along_last(np.reshape(a, (1,)) if a.ndim == 0 else a, axis)


def _unrows(rows, axis: int, shape: tuple):
    """Undo ``_rows``: ``axis`` back in place, the shape of the original."""
    return np.reshape(from_last(rows, axis), shape)


def _along_dim(op: str, block, grad_block, traced_grad, **declaration):
    """Declare softmax-like ``op`` (torch.<op>(input, dim, dtype=None)): ``block(x, out)`` and ``grad_block(g, y,
    out)`` are its row kernels (rowwise.py), ``traced_grad(g, y)`` the same gradient written for Tensors (the rule
    traced for create_graph); y is the op's output. ``dtype`` casts the input first, as torch (the output has that
    dtype, the gradient is cast back to the input's). Results are fresh arrays in the layout of the input."""

    def forward(input, dim=None, *, dtype=None):
        axis = normalize_dim(op, implicit_dim(op, dim, input.ndim, warn=True), input.ndim)
        x = input if dtype is None else input.astype(float_dtype(op, dtype), copy=False)
        out = owned_like(x)
        if out.size:
            blockwise(block, _rows(x, axis), _rows(out, axis))
        return out

    def rule(g, ans, input, dim=None, *, dtype=None):
        axis = normalize_dim(op, implicit_dim(op, dim, input.ndim), input.ndim)
        g_rows, y = _rows(g, axis), _rows(ans, axis)
        if isinstance(g, Tensor):
            dx = _unrows(traced_grad(g_rows, y), axis, input.shape)
            from .cast import cast  # at call time: the families register in ops/__init__'s order

            return dx if dx.dtype == input.dtype else cast(dx, input.dtype)
        dx = owned_like(ans)
        blockwise(grad_block, g_rows, y, _rows(dx, axis))
        return dx.astype(input.dtype, copy=False)

    def check(input, dim=None, *, dtype=None):
        if dtype is None:
            require_float(op, "input", input)
        else:
            float_dtype(op, dtype)
            require(input.dtype.kind in "fiub", op, "input", "a real tensor", f"dtype {input.dtype}")
        normalize_dim(op, implicit_dim(op, dim, input.ndim), input.ndim)

    def samples(rng):
        x = along_dim_samples(rng)[0].inputs
        return along_dim_samples(rng) + [
            # (dtype=float32 of a float64 input is in tests/ops/test_nn.py: float64 finite differences cannot check
            # a float32 result)
            Sample(x, {"dim": -1, "dtype": np.float64}, "dtype=float64 (cast first)"),
        ]

    def torch_ref(torch, input, dim=None, dtype=None):
        torch_dtype = None if dtype is None else getattr(torch, np.dtype(dtype).name)
        return getattr(torch.nn.functional, op)(input, dim=dim, dtype=torch_dtype)

    return defop(
        op,
        family=FAMILY,
        inputs=("input",),
        forward=forward,
        vjps=(rule,),
        check=check,
        samples=samples,
        torch_ref=torch_ref,
        notes=case_law(_CASE_LAW, op),
        **declaration,
    )


# softmax's gradient is y * (g - sum(g * y)) (torch's formula), log_softmax's g - exp(y) * sum(g)
softmax = _along_dim(
    "softmax",
    softmax_block,
    softmax_grad_block,
    lambda g, y: y * (g - row_dots(g, y)),
    method=True,
    doc="exp(x) / sum(exp(x)) along ``dim``, computed stably; ``dtype`` casts the input first.",
)
log_softmax = _along_dim(
    "log_softmax",
    log_softmax_block,
    log_softmax_grad_block,
    lambda g, y: g - np.exp(y) * row_sums(g),
    method=True,
    doc="x - logsumexp(x) along ``dim`` (log of softmax), computed stably; ``dtype`` casts the input first.",
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
    out = owned_like(x)
    affine = weight is not None or bias is not None
    xhat = owned_like(x) if subtract_mean and affine else out
    if x.size:  # no rows, or no features: nothing to normalise (and no 0/0)
        kernel = partial(normalize_block, _flat(weight), _flat(bias), eps, subtract_mean)
        blockwise(kernel, x, xhat, out, rstd)
    return out.reshape(input.shape), {"xhat": xhat if subtract_mean else None, "rstd": rstd}


def _normalize_vjp(g, input, weight, bias, needs, normalized_shape, xhat, rstd):
    """The joint rule of layer_norm and rms_norm (``bias`` None; ``xhat`` None: recomputed from the input)."""
    x = _as_rows(input, normalized_shape)
    need_weight, need_bias = needs[1], bias is not None and needs[2]
    dx = owned_like(x) if needs[0] else None  # every element is written
    if np.size(x) == 0:
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


def _layer_norm_vjp(g, ans, input, weight, bias, *, needs, normalized_shape, eps, xhat=None, rstd=None):
    if rstd is None:  # create_graph: Tensors, without the forward's saved rows
        return _layer_norm_graph_vjp(g, input, weight, bias, needs, normalized_shape, eps)
    return _normalize_vjp(g, input, weight, bias, needs, normalized_shape, xhat, rstd)


def _trailing_dims(input, normalized_shape) -> tuple:
    n = len(_shape_tuple(normalized_shape))
    return tuple(range(input.ndim - n, input.ndim))


def _layer_norm_graph_vjp(g, input, weight, bias, needs, normalized_shape, eps):
    """layer_norm's rule on Tensors, from registered ops (differentiable again): xhat and rstd recomputed, then
    dx = rstd (gw - mean(gw) - xhat mean(gw xhat)), dweight = sum(g xhat), dbias = sum(g) over the leading dims."""
    from .elementwise import rsqrt  # at call time: the families register in ops/__init__'s order
    from .reduce import mean
    from .reduce import sum as total

    dims = _trailing_dims(input, normalized_shape)
    lead = tuple(range(input.ndim - len(dims)))

    def leading_sum(t):
        return total(t, dim=lead) if lead else t

    centred = input - mean(input, dim=dims, keepdim=True)
    rstd = rsqrt(mean(centred * centred, dim=dims, keepdim=True) + eps)
    xhat = centred * rstd
    gw = g if weight is None else g * weight
    dx = rstd * (gw - mean(gw, dim=dims, keepdim=True) - xhat * mean(gw * xhat, dim=dims, keepdim=True))
    return (
        dx if needs[0] else None,
        leading_sum(g * xhat) if weight is not None and needs[1] else None,
        leading_sum(g) if bias is not None and needs[2] else None,
    )


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
    returns_aux=True,
    second_order=Grad.RULE,  # the rule runs on Tensors when given no saved rows
    check=_check_layer_norm,
    samples=_layer_norm_samples,
    notes=case_law(_CASE_LAW, "layer_norm"),
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
    from .elementwise import rsqrt  # at call time: the families register in ops/__init__'s order
    from .reduce import mean as reduce_mean

    if np.size(input) == 0:
        out = input * 1
    else:
        dims = _trailing_dims(input, normalized_shape)
        out = input * rsqrt(reduce_mean(input * input, dim=dims, keepdim=True) + _rms_eps(input.dtype, eps))
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
    returns_aux=True,
    composite=_rms_norm_composite,
    check=_check_rms_norm,
    samples=_rms_norm_samples,
    notes=case_law(_CASE_LAW, "rms_norm"),
    torch_ref=lambda torch, input, weight, normalized_shape, eps=None: torch.nn.functional.rms_norm(
        input, _shape_tuple(normalized_shape), weight, eps
    ),
)


# -- batch_norm / group_norm / instance_norm ---------------------------------------------------------------
# All three normalise a (N, C, *) input viewed as (N, G, C // G, *): batch_norm over (N, *) per channel
# (G = C), instance_norm over * per sample and channel (G = C), group_norm over (C // G, *) per sample and
# group; weight and bias are per channel. The forward and the rules are written with numpy functions (no saved
# values), so create_graph traces the rules on Tensors for the second order.
def _channel_view(a, groups: int):
    """``a`` (N, C, *) as (N, G, C // G, *)."""
    shape = a.shape
    return np.reshape(a, (shape[0], groups, shape[1] // groups) + tuple(shape[2:]))


def _per_channel(param, x_shape: tuple, groups: int):
    """A (C,) weight or bias broadcast against the (N, G, C // G, *) view."""
    return np.reshape(param, (1, groups, x_shape[1] // groups) + (1,) * (len(x_shape) - 2))


def _stats_axes(kind: str, ndim: int) -> tuple:
    """The axes of the (N, G, C // G, *) view (ndim + 1 dims) each kind reduces over."""
    return (0,) + tuple(range(2, ndim + 1)) if kind == "batch" else tuple(range(2, ndim + 1))


def _normalized(x, groups, axes, mean, var, eps):
    """(xhat, rstd) of the (N, G, C // G, *) view: batch statistics when ``mean`` is None, else the given ones
    (running statistics of shape (C,))."""
    xv = _channel_view(x, groups)
    if mean is None:
        mean = np.mean(xv, axis=axes, keepdims=True)
        var = np.mean(np.square(xv - mean), axis=axes, keepdims=True)
    else:
        mean, var = _per_channel(mean, x.shape, groups), _per_channel(var, x.shape, groups)
    with np.errstate(invalid="ignore", divide="ignore"):  # a negative eps can make var + eps < 0: NaN, as torch
        rstd = 1 / np.sqrt(var + eps)
    return (xv - mean) * rstd, rstd


def _norm_forward(kind, input, groups, running_mean, running_var, weight, bias, use_running, eps):
    if input.size == 0:
        return input * 1
    xhat, _ = _normalized(
        input, groups, _stats_axes(kind, input.ndim), running_mean if use_running else None, running_var, eps
    )
    out = xhat if weight is None else xhat * _per_channel(weight, input.shape, groups)
    out = out if bias is None else out + _per_channel(bias, input.shape, groups)
    return np.reshape(out, input.shape)


def _norm_vjp(kind, g, input, groups, running_mean, running_var, weight, needs, use_running, eps):
    """(dx, dweight, dbias). With batch statistics, dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)) over
    the reduced axes (gh = g * weight); with running statistics (constants) dx = gh * rstd."""
    if np.size(input) == 0:
        zeros = [None if p is None else np.zeros_like(p) for p in (input, weight, weight)]
        return tuple(z if need else None for z, need in zip(zeros, needs))
    axes = _stats_axes(kind, input.ndim)
    xhat, rstd = _normalized(input, groups, axes, running_mean if use_running else None, running_var, eps)
    gv = _channel_view(g, groups)
    gh = gv if weight is None else gv * _per_channel(weight, input.shape, groups)
    dx = None
    if needs[0]:
        if use_running:
            dx = gh * rstd
        else:
            dx = rstd * (
                gh - np.mean(gh, axis=axes, keepdims=True) - xhat * np.mean(gh * xhat, axis=axes, keepdims=True)
            )
        dx = np.reshape(dx, input.shape)
    channel_axes = (0,) + tuple(range(3, input.ndim + 1))  # all but (G, C // G)
    dw = np.reshape(np.sum(gv * xhat, axis=channel_axes), (input.shape[1],)) if needs[1] else None
    db = np.reshape(np.sum(gv, axis=channel_axes), (input.shape[1],)) if needs[2] else None
    return dx, dw, db


def _check_norm_input(op: str, input, weight, bias) -> None:
    require_float(op, "input", input)
    require(input.ndim >= 2, op, "input", "a tensor of shape (N, C, *)", f"shape {input.shape}")
    for name, param in (("weight", weight), ("bias", bias)):
        if param is not None:
            require_float(op, name, param)
            require(param.shape == (input.shape[1],), op, name, f"shape ({input.shape[1]},) (C)", param.shape)


def _check_eps(op: str, eps) -> None:
    """A real ``eps``: torch takes any (one below 0 can make the variance plus eps negative: NaN, as torch's)."""
    require(isinstance(eps, float | int) and not isinstance(eps, bool) and eps == eps, op, "eps", "a real number", eps)


def _norm_samples(extra_attrs: dict, running: bool):
    """(N, C, *) inputs: 2-D, 3-D, 4-D non-contiguous, with and without affine parameters."""

    def stats(rng, c):
        return (uniform(rng, (c,)), rng.uniform(0.5, 2.0, size=(c,))) if running else ()

    def generate(rng):
        return [
            Sample((uniform(rng, (4, 3)), *stats(rng, 3), uniform(rng, (3,)), uniform(rng, (3,))), dict(extra_attrs)),
            Sample((uniform(rng, (2, 4, 5)), *stats(rng, 4), None, None), dict(extra_attrs), "no affine"),
            Sample(
                (uniform(rng, (2, 4, 5, 3)).transpose(0, 1, 3, 2), *stats(rng, 4), uniform(rng, (4,)), None),
                dict(extra_attrs),
                "4-D non-contiguous, weight only",
            ),
            Sample((uniform(rng, (3, 2, 4)), *stats(rng, 2), None, uniform(rng, (2,))), dict(extra_attrs), "bias"),
        ]

    return generate


def _batch_norm(
    input, running_mean=None, running_var=None, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5
):
    """``torch.nn.functional.batch_norm``. The running statistics are not updated here (torch's are):
    ``nn.BatchNorm*`` computes the new ones and writes them into its buffers."""
    use_running = not training
    return _norm_forward("batch", input, input.shape[1], running_mean, running_var, weight, bias, use_running, eps)


def _running_stats_vjp(kind, g, input, running_mean, running_var, weight, needs, use_running, eps):
    """batch_norm's and instance_norm's joint rule: (d input, None, None, d weight, d bias) -- the running
    statistics are not differentiable."""
    needed = (needs[0], needs[3], needs[4])
    dx, dw, db = _norm_vjp(kind, g, input, input.shape[1], running_mean, running_var, weight, needed, use_running, eps)
    return dx, None, None, dw, db


def _batch_norm_vjp(g, ans, input, running_mean, running_var, weight, bias, *, needs, training, momentum, eps):
    return _running_stats_vjp("batch", g, input, running_mean, running_var, weight, needs, not training, eps)


def _check_running_stats(op, input, running_mean, running_var, used: bool, when: str) -> None:
    """batch_norm's and instance_norm's optional running statistics: floating tensors of shape (C,), both given
    when the op normalises with them (``used``; ``when`` says by which attribute)."""
    for name, stat in (("running_mean", running_mean), ("running_var", running_var)):
        if stat is not None:
            require_float(op, name, stat)
            require(stat.shape == (input.shape[1],), op, name, f"shape ({input.shape[1]},)", stat.shape)
    if used:
        both = running_mean is not None and running_var is not None
        require(both, op, "running_mean", f"running_mean and running_var when {when}", "None")


def _check_batch_norm(
    input, running_mean=None, running_var=None, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5
):
    _check_norm_input("batch_norm", input, weight, bias)
    require_bool("batch_norm", "training", training)
    _check_running_stats("batch_norm", input, running_mean, running_var, not training, "training=False")
    if training and (running_mean is not None or running_var is not None):
        warnings.warn(
            "batch_norm: training=True with running_mean/running_var given: minitape's functional batch_norm does not "
            "update them (torch's writes into them); use nn.BatchNorm*d, which does, or update them yourself",
            UserWarning,
            stacklevel=2,
        )
    if training:
        require(
            input.size // input.shape[1] > 1 or input.size == 0,
            "batch_norm",
            "input",
            "more than 1 value per channel when training",
            f"shape {input.shape}",
        )
    _check_eps("batch_norm", eps)


def _batch_norm_samples(rng):
    train = _norm_samples({"training": True}, running=False)(rng)
    train = [Sample((s.inputs[0], None, None) + s.inputs[1:], s.attrs, "training " + s.label) for s in train]
    return train + _norm_samples({"training": False, "eps": 1e-3}, running=True)(rng)


def _cloned_stats(name):
    """The torch reference ``torch.nn.functional.<name>`` on copies of running_mean / running_var (torch updates
    them in place)."""

    def torch_ref(torch, input, running_mean, running_var, weight, bias, **attrs):
        stats = [None if s is None else s.clone() for s in (running_mean, running_var)]
        return getattr(torch.nn.functional, name)(input, *stats, weight, bias, **attrs)

    return torch_ref


def _running_stats_op(name, forward, joint_vjp, check, samples):
    """Declare batch_norm or instance_norm: optional running statistics, read and never differentiated (nor
    updated here), then the optional affine weight and bias."""
    return defop(
        name,
        family=FAMILY,
        inputs=("input", "running_mean?", "running_var?", "weight?", "bias?"),
        forward=forward,
        joint_vjp=joint_vjp,
        differentiable=(True, Grad.NOT_DIFFERENTIABLE, Grad.NOT_DIFFERENTIABLE, True, True),
        check=check,
        samples=samples,
        notes=case_law(_CASE_LAW, name),
        torch_ref=_cloned_stats(name),
    )


batch_norm = _running_stats_op("batch_norm", _batch_norm, _batch_norm_vjp, _check_batch_norm, _batch_norm_samples)


def _group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """``torch.nn.functional.group_norm``: normalise each sample over the channels of each of ``num_groups``
    groups and the spatial dims, then scale and shift per channel."""
    return _norm_forward("group", input, num_groups, None, None, weight, bias, False, eps)


def _group_norm_vjp(g, ans, input, weight, bias, *, needs, num_groups, eps):
    return _norm_vjp("group", g, input, num_groups, None, None, weight, needs, False, eps)


def _check_group_norm(input, weight=None, bias=None, num_groups=1, eps=1e-5):
    _check_norm_input("group_norm", input, weight, bias)
    require(
        bool(isinstance(num_groups, int | np.integer))
        and not isinstance(num_groups, bool)
        and num_groups > 0
        and input.shape[1] % num_groups == 0,
        "group_norm",
        "num_groups",
        f"a positive divisor of the {input.shape[1]} channels",
        num_groups,
    )
    _check_eps("group_norm", eps)


def _group_norm_samples(rng):
    one = _norm_samples({"num_groups": 1}, False)(rng)[:2]
    two = [
        Sample(s.inputs, {"num_groups": 2, "eps": 1e-3}, s.label + ", 2 groups")
        for s in _norm_samples({}, False)(rng)[1:]
    ]
    # torch's group_norm backward with a bias and no weight raises "tensor does not have a device" (torch 2.13)
    return one + [Sample(s.inputs, s.attrs, s.label, torch=s.inputs[1] is not None or s.inputs[2] is None) for s in two]


group_norm = defop(
    "group_norm",
    family=FAMILY,
    inputs=("input", "weight?", "bias?"),
    forward=_group_norm,
    joint_vjp=_group_norm_vjp,
    check=_check_group_norm,
    samples=_group_norm_samples,
    torch_ref=lambda torch, input, weight, bias, num_groups, eps=1e-5: torch.nn.functional.group_norm(
        input, num_groups, weight, bias, eps
    ),
)


def _instance_norm(
    input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True, momentum=0.1, eps=1e-5
):
    """``torch.nn.functional.instance_norm``: each sample and channel normalised over its spatial dims
    (``use_input_stats=False``: with the given running statistics instead)."""
    return _norm_forward(
        "instance", input, input.shape[1], running_mean, running_var, weight, bias, not use_input_stats, eps
    )


def _instance_norm_vjp(
    g, ans, input, running_mean, running_var, weight, bias, *, needs, use_input_stats, momentum, eps
):
    return _running_stats_vjp("instance", g, input, running_mean, running_var, weight, needs, not use_input_stats, eps)


def _check_instance_norm(
    input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True, momentum=0.1, eps=1e-5
):
    _check_norm_input("instance_norm", input, weight, bias)
    require(input.ndim >= 3, "instance_norm", "input", "a tensor of shape (N, C, L, *)", f"shape {input.shape}")
    require_bool("instance_norm", "use_input_stats", use_input_stats)
    stats = (running_mean, running_var)
    _check_running_stats("instance_norm", input, *stats, not use_input_stats, "use_input_stats=False")
    _check_eps("instance_norm", eps)


def _instance_norm_samples(rng):
    samples = [s for s in _norm_samples({}, False)(rng) if s.inputs[0].ndim >= 3]
    with_stats = [s for s in _norm_samples({"use_input_stats": False}, True)(rng) if s.inputs[0].ndim >= 3]
    return [Sample((s.inputs[0], None, None) + s.inputs[1:], s.attrs, s.label) for s in samples] + with_stats


instance_norm = _running_stats_op(
    "instance_norm", _instance_norm, _instance_norm_vjp, _check_instance_norm, _instance_norm_samples
)


# -- local_response_norm -------------------------------------------------------------------------------------
def _channel_window_sum(y, before: int, after: int):
    """sum_{j = c - before}^{c + after} y_j along the channel axis 1 (zero outside): one slice add per window
    offset, on arrays or Tensors (concatenate, getitem and add are registered ops)."""
    shape = np.shape(y)
    pad_before = np.zeros(shape[:1] + (before,) + shape[2:], dtype=y.dtype)
    pad_after = np.zeros(shape[:1] + (after,) + shape[2:], dtype=y.dtype)
    padded = np.concatenate([pad_before, y, pad_after], axis=1)
    return reduce(
        lambda total, o: total + padded[:, o : o + shape[1]], range(1, before + after + 1), padded[:, : shape[1]]
    )


def _lrn_denominator(input, size, alpha, beta, k):
    """k + alpha / size * (the sum of x^2 over the channel window [c - size // 2, c + (size - 1) // 2])."""
    return float(k) + float(alpha) / size * _channel_window_sum(input * input, size // 2, (size - 1) // 2)


def _local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """``torch.nn.functional.local_response_norm``: x / (k + alpha / size * sum of x^2 over ``size`` neighbouring
    channels, zero-padded)^beta, over dim 1 of an (N, C, *) input."""
    return input * _lrn_denominator(input, int(size), alpha, beta, k) ** -float(beta)


def _local_response_norm_vjp(g, ans, input, size, alpha=1e-4, beta=0.75, k=1.0):
    # out_c = x_c D_c^-b with D_c = k + a/n sum_{j in W(c)} x_j^2: the second term sums over the windows that
    # contain channel i, the window with its two sides swapped
    size, beta = int(size), float(beta)
    d = _lrn_denominator(input, size, alpha, beta, k)
    back = _channel_window_sum(g * input * d ** (-beta - 1), (size - 1) // 2, size // 2)
    return g * d**-beta - (2 * float(alpha) * beta / size) * input * back


def _check_local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    op = "local_response_norm"
    require_float(op, "input", input)
    require(input.ndim >= 3, op, "input", "a tensor (N, C, *) of at least 3 dims (as torch)", f"shape {input.shape}")
    require(
        bool(isinstance(size, int | np.integer) and not isinstance(size, bool) and size >= 1),
        op,
        "size",
        "a positive int",
        size,
    )
    for name, value in (("alpha", alpha), ("beta", beta), ("k", k)):
        require(
            isinstance(value, int | float | np.floating) and not isinstance(value, bool), op, name, "a number", value
        )


def _lrn_samples(rng):
    def x(*shape):
        return uniform(rng, shape)

    return [
        Sample((x(2, 5, 3),), {"size": 3}, "(N, C, L)"),
        Sample((x(1, 6, 2, 3),), {"size": 2, "alpha": 0.5, "beta": 0.6, "k": 2.0}, "even size, strong"),
        Sample((x(1, 3, 2, 2, 2),), {"size": 5, "alpha": 1.0}, "5-D, window wider than C"),
        Sample((uniform(rng, (3, 2, 4)).transpose(2, 0, 1),), {"size": 3, "alpha": 0.3}, "non-contiguous"),
        Sample((x(2, 4, 3),), {"size": 1, "alpha": 0.2, "beta": 1.5, "k": 0.5}, "size 1"),
        Sample((x(0, 4, 3),), {"size": 3}, "empty batch"),
    ]


local_response_norm = defop(
    "local_response_norm",
    family="normalization",
    inputs=("input",),
    forward=_local_response_norm,
    vjps=(_local_response_norm_vjp,),
    check=_check_local_response_norm,
    samples=_lrn_samples,
    notes="The channel window sum is one slice add per window offset (concatenated zero padding); the rule is "
    "traced for the second order.",
    torch_ref=lambda torch, input, size, alpha=1e-4, beta=0.75, k=1.0: torch.nn.functional.local_response_norm(
        input, size, alpha, beta, k
    ),
)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_along_dim(op_type):
    def lower(g, rec, input):
        ndim = len(rec.inputs[0].shape)
        if ndim == 0:
            raise NotExportable("a 0-D input has no lowering")
        dtype = rec.attributes.get("dtype")
        if dtype is not None:  # dtype=: cast first, as the forward (ONNX's codes: 1 float, 11 double)
            input = g.op("Cast", input, to={"float32": 1, "float64": 11}[np.dtype(dtype).name])
        axis = axis_of(int(implicit_dim(rec.op_name, rec.attributes.get("dim"), ndim)), ndim)
        out = g.op(op_type, input, axis=axis)
        if op_type != "LogSoftmax" or np.dtype(rec.output.dtype).kind != "f":
            return out
        # a slice holding +inf or NaN is NaN throughout in the forward (x - max: inf - inf, NaN); ONNX Runtime
        # gives -inf, or finite values beside the NaN
        bad = g.op("Or", g.op("IsInf", input, detect_negative=0), g.op("IsNaN", input))
        infinite = g.op("Cast", bad, to=6)  # 6: INT32
        has_inf = g.op(
            "Greater", g.op("ReduceMax", infinite, g.ints([axis]), keepdims=1), g.const(np.zeros((), np.int32))
        )
        return g.op("Where", has_inf, scalar(g, np.nan, rec.output.dtype), out)

    return lower


def _onnx_norm_axis(rec) -> tuple:
    normalized = _shape_tuple(rec.attributes["normalized_shape"])
    if not normalized or 0 in rec.inputs[0].shape:
        raise NotExportable("an empty normalized shape or input has no lowering")
    return -len(normalized), normalized


def _onnx_layer_norm(g, rec, input, weight=None, bias=None):
    axis, normalized = _onnx_norm_axis(rec)
    dtype = rec.inputs[0].dtype
    scale = weight if weight is not None else g.const(np.ones(normalized, dtype))
    bias = bias if bias is not None else g.const(np.zeros(normalized, dtype))  # ONNX Runtime 1.32 crashes without
    return g.op("LayerNormalization", input, scale, bias, axis=axis, epsilon=float(rec.attributes.get("eps", 1e-5)))


def _onnx_rms_norm(g, rec, input, weight=None):
    axis, normalized = _onnx_norm_axis(rec)
    dtype = rec.inputs[0].dtype
    scale = weight if weight is not None else g.const(np.ones(normalized, dtype))
    eps = float(_rms_eps(dtype, rec.attributes.get("eps")))
    return g.op("RMSNormalization", input, scale, axis=axis, epsilon=eps)


def _onnx_channel_norm(g, rec, kind: str, input, groups: int, mean, var, weight, bias, eps: float):
    """The forward's normalisation of the (N, G, C // G, rest) view (the spatial dims flattened into one):
    ``mean``/``var`` None for statistics of the input, else (C,) running ones."""
    shape = rec.inputs[0].shape
    dtype = rec.inputs[0].dtype
    if 0 in shape:
        raise NotExportable("an empty input has no lowering")
    c = shape[1]
    view = g.op("Reshape", input, g.ints([0, groups, c // groups, -1]))  # 0: the batch size as it comes
    per_channel = g.ints([1, groups, c // groups, 1])
    axes = g.ints([0, 2, 3] if kind == "batch" else [2, 3])
    if mean is None:
        mean = g.op("ReduceMean", view, axes, keepdims=1)
        centered = g.op("Sub", view, mean)
        var = g.op("ReduceMean", g.op("Mul", centered, centered), axes, keepdims=1)
    else:
        mean, var = g.op("Reshape", mean, per_channel), g.op("Reshape", var, per_channel)
        centered = g.op("Sub", view, mean)
    rstd = g.op("Div", scalar(g, 1, dtype), g.op("Sqrt", g.op("Add", var, scalar(g, eps, dtype))))
    out = g.op("Mul", centered, rstd)
    if weight is not None:
        out = g.op("Mul", out, g.op("Reshape", weight, per_channel))
    if bias is not None:
        out = g.op("Add", out, g.op("Reshape", bias, per_channel))
    return g.op("Reshape", out, g.op("Shape", input))


def _onnx_batch_norm(g, rec, input, running_mean=None, running_var=None, weight=None, bias=None):
    a = rec.attributes
    if a.get("training", False):
        raise NotExportable("training=True (batch statistics, running-statistics updates); call model.eval()")
    if running_mean is None or running_var is None:
        raise NotExportable("evaluation without running statistics has no lowering")
    c = rec.inputs[0].shape[1]
    return _onnx_channel_norm(
        g, rec, "batch", input, c, running_mean, running_var, weight, bias, float(a.get("eps", 1e-5))
    )


def _onnx_instance_norm(g, rec, input, running_mean=None, running_var=None, weight=None, bias=None):
    a = rec.attributes
    c = rec.inputs[0].shape[1]
    if a.get("use_input_stats", True):
        running_mean = running_var = None
    elif running_mean is None or running_var is None:
        raise NotExportable("use_input_stats=False without running statistics has no lowering")
    return _onnx_channel_norm(
        g, rec, "instance", input, c, running_mean, running_var, weight, bias, float(a.get("eps", 1e-5))
    )


def _onnx_group_norm(g, rec, input, weight=None, bias=None):
    a = rec.attributes
    return _onnx_channel_norm(
        g, rec, "group", input, int(a["num_groups"]), None, None, weight, bias, float(a.get("eps", 1e-5))
    )


def _onnx_local_response_norm(g, rec, input):
    """As the forward (ONNX's LRN centres an even window on the other side): the channel window sums of x^2 as
    the zero-padded slices added in order, then x * (k + alpha / size * sums)^-beta."""
    a = rec.attributes
    shape, dtype = rec.inputs[0].shape, rec.inputs[0].dtype
    size = int(a["size"])
    if 0 in shape:
        raise NotExportable("an empty input has no lowering")
    before, after = size // 2, (size - 1) // 2
    pads = [0] * (2 * len(shape))
    pads[1], pads[len(shape) + 1] = before, after
    padded = g.op("Pad", g.op("Mul", input, input), g.ints(pads))
    c = shape[1]
    total = g.op("Slice", padded, g.ints([0]), g.ints([c]), g.ints([1]))
    for o in range(1, before + after + 1):
        total = g.op("Add", total, g.op("Slice", padded, g.ints([o]), g.ints([o + c]), g.ints([1])))
    scale = scalar(g, float(a.get("alpha", 1e-4)) / size, dtype)
    d = g.op("Add", scalar(g, float(a.get("k", 1.0)), dtype), g.op("Mul", scale, total))
    return g.op("Mul", input, g.op("Pow", d, scalar(g, -float(a.get("beta", 0.75)), dtype)))


lowering(local_response_norm, _onnx_local_response_norm)
lowering(batch_norm, _onnx_batch_norm)
lowering(instance_norm, _onnx_instance_norm)
lowering(group_norm, _onnx_group_norm)
lowering(softmax, _onnx_along_dim("Softmax"))
lowering(log_softmax, _onnx_along_dim("LogSoftmax"))
lowering(layer_norm, _onnx_layer_norm)
lowering(rms_norm, _onnx_rms_norm)
