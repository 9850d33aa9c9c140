"""Normalisations, as in ``torch.nn.functional``: softmax / log_softmax along a dim, layer_norm and rms_norm
over the trailing ``normalized_shape`` dims.

Every op works on whole arrays (no loops over elements). softmax / log_softmax are computed from
``x - max(x)``, so logits of +-1e4 give finite values and gradients. layer_norm and rms_norm have fast
joint backward rules that reuse what the forward saved (the normalised rows and 1/std); their second
order is taken through ``composite=`` versions written with registered ops (mean, rsqrt, mul, add).

Empty shapes work as in torch: a softmax over an empty dim, or a norm of zero rows or zero features,
gives an empty output and empty (or zero) gradients.
"""

__all__ = ["softmax", "log_softmax", "layer_norm", "rms_norm"]

import numpy as np

from tape.registry import Sample, defop

from ._samples import transposed, uniform
from ._validation import normalize_dim, require, require_float

FAMILY = "normalization"


# -- softmax / log_softmax ---------------------------------------------------------------------------------
def _as_1d(x):
    """A 0-d array viewed as shape (1,) (torch lets softmax run over dim 0 / -1 of a scalar)."""
    return np.reshape(x, (1,)) if x.ndim == 0 else x


def _shifted(z: np.ndarray, axis: int) -> np.ndarray:
    """z minus its max along ``axis``: every exp of it is at most 1, so nothing overflows."""
    return z - np.max(z, axis=axis, keepdims=True)


def _softmax(input, dim=-1):
    axis = normalize_dim("softmax", dim, input.ndim)
    if input.size == 0:
        return input.copy()
    e = np.exp(_shifted(_as_1d(input), axis))
    e /= np.sum(e, axis=axis, keepdims=True)
    return e.reshape(input.shape)


def _softmax_vjp(g, ans, input, dim=-1):
    axis = normalize_dim("softmax", dim, input.ndim)
    gy = _as_1d(g * ans)
    gy -= _as_1d(ans) * np.sum(gy, axis=axis, keepdims=True)  # in place on arrays; rebinds on Tensors
    return np.reshape(gy, input.shape)


def _log_softmax(input, dim=-1):
    # (x - max) - log(sum(exp(x - max))): subtracting logsumexp(x) in one step would round at |x| ~ 1e4
    axis = normalize_dim("log_softmax", dim, input.ndim)
    if input.size == 0:
        return input.copy()
    out = _shifted(_as_1d(input), axis)
    out -= np.log(np.sum(np.exp(out), axis=axis, keepdims=True))
    return out.reshape(input.shape)


def _log_softmax_vjp(g, ans, input, dim=-1):
    axis = normalize_dim("log_softmax", dim, input.ndim)
    g1 = _as_1d(g)
    return np.reshape(g1 - np.exp(_as_1d(ans)) * np.sum(g1, axis=axis, keepdims=True), input.shape)


def _softmax_samples(rng):
    return [
        Sample((uniform(rng, (2, 3, 4)),), {"dim": -1}),
        Sample((uniform(rng, (2, 3, 4)),), {"dim": 1}),
        Sample((uniform(rng, (2, 3, 4)),), {"dim": 0}),
        Sample((transposed(rng, (3, 5)),), {"dim": -1}, "non-contiguous"),
        Sample((uniform(rng, (4, 1)),), {"dim": 1}, "size-1 dim"),
        Sample((uniform(rng, ()),), {"dim": 0}, "scalar"),
        Sample((uniform(rng, (3, 4), -1e4, 1e4),), {"dim": -1}, "logits of +-1e4"),
        Sample((uniform(rng, (3, 0)),), {"dim": -1}, "empty dim"),
        Sample((uniform(rng, (0, 3)),), {"dim": -1}, "zero rows"),
    ]


def _check_dim_input(op):
    def check(input, dim=-1):
        require_float(op, "input", input)
        normalize_dim(op, dim, input.ndim)

    return check


softmax = defop(
    "softmax",
    family=FAMILY,
    inputs=("input",),
    forward=_softmax,
    vjps=(_softmax_vjp,),
    check=_check_dim_input("softmax"),
    samples=_softmax_samples,
    torch_ref=lambda torch, input, dim=-1: torch.softmax(input, dim=dim),
)

log_softmax = defop(
    "log_softmax",
    family=FAMILY,
    inputs=("input",),
    forward=_log_softmax,
    vjps=(_log_softmax_vjp,),
    check=_check_dim_input("log_softmax"),
    samples=_softmax_samples,
    torch_ref=lambda torch, input, dim=-1: torch.log_softmax(input, dim=dim),
)


# -- layer_norm / rms_norm ---------------------------------------------------------------------------------
def _shape_tuple(normalized_shape) -> tuple:
    return tuple(int(n) for n in np.atleast_1d(normalized_shape))


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
    n = len(_shape_tuple(normalized_shape))
    features = int(np.prod(x.shape[x.ndim - n :], dtype=np.int64))
    return x.reshape(int(np.prod(x.shape[: x.ndim - n], dtype=np.int64)), features)


def _row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum(a * b) over each row, as a column, without the (rows, features) temporary."""
    return np.einsum("ij,ij->i", a, b)[:, None]


def _row_means(a: np.ndarray) -> np.ndarray:
    """The mean of each row, as a column; a matrix-vector product is several times faster than np.mean on
    short rows."""
    return (a @ np.ones(a.shape[1], a.dtype))[:, None] / a.shape[1]


def _layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """``torch.nn.functional.layer_norm``: normalise over the trailing ``normalized_shape`` dims, then scale by
    ``weight`` and shift by ``bias``."""
    x = _as_rows(input, normalized_shape)
    if x.size == 0:  # no rows, or no features: nothing to normalise (and no 0/0)
        return input.copy(), {"xhat": x, "rstd": np.zeros((x.shape[0], 1), x.dtype)}
    xhat = x - _row_means(x)
    rstd = 1 / np.sqrt(_row_dot(xhat, xhat) / x.shape[1] + eps)
    xhat *= rstd
    out = xhat if weight is None else xhat * weight.reshape(-1)
    if bias is not None:
        out = out + bias.reshape(-1) if out is xhat else np.add(out, bias.reshape(-1), out=out)
    return out.reshape(input.shape), {"xhat": xhat, "rstd": rstd}  # the backward reuses the normalised rows


def _normalization_input_grad(gx, xhat, rstd, subtract_mean: bool):
    """d input of the rows of xhat = (x - mean?) * rstd, given gx = dL/dxhat: rstd times gx with its
    components along xhat (and along the constant row, when the mean is subtracted) projected out."""
    if gx.size == 0:
        return np.zeros_like(gx)
    dx = xhat * (_row_dot(gx, xhat) / gx.shape[1])
    np.subtract(gx, dx, out=dx)
    if subtract_mean:
        dx -= _row_means(gx)
    dx *= rstd
    return dx


def _affine_grads(g_rows, xhat, weight, bias, needs):
    """The gradient reaching xhat (g * weight), and those of weight and bias (summed over the rows)."""
    gx = g_rows if weight is None or not needs[0] else g_rows * weight.reshape(-1)
    dw = np.einsum("ij,ij->j", g_rows, xhat).reshape(weight.shape) if needs[1] else None
    db = (np.ones(g_rows.shape[0], g_rows.dtype) @ g_rows).reshape(bias.shape) if len(needs) > 2 and needs[2] else None
    return gx, dw, db


def _layer_norm_vjp(g, ans, input, weight, bias, *, needs, normalized_shape, eps, xhat, rstd):
    gx, dw, db = _affine_grads(g.reshape(xhat.shape), xhat, weight, bias, needs)
    dx = _normalization_input_grad(gx, xhat, rstd, True).reshape(input.shape) if needs[0] else None
    return dx, dw, db


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
    x = _as_rows(input, normalized_shape)
    if x.size == 0:
        return input.copy(), {"rstd": np.zeros((x.shape[0], 1), x.dtype)}
    rstd = 1 / np.sqrt(_row_dot(x, x) / x.shape[1] + _rms_eps(input.dtype, eps))
    out = x * rstd
    if weight is not None:
        out *= weight.reshape(-1)
    return out.reshape(input.shape), {"rstd": rstd}


def _rms_norm_vjp(g, ans, input, weight, *, needs, normalized_shape, eps, rstd):
    x = _as_rows(input, normalized_shape)
    xhat = x * rstd
    gx, dw, _ = _affine_grads(g.reshape(x.shape), xhat, weight, None, needs)
    dx = _normalization_input_grad(gx, xhat, rstd, False).reshape(input.shape) if needs[0] else None
    return dx, dw


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
