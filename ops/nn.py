"""Neural-network ops, as in ``torch.nn.functional``: softmax / log_softmax, layer_norm / rms_norm, dropout,
embedding and the losses cross_entropy, nll_loss, mse_loss and binary_cross_entropy_with_logits.

Every op works on whole arrays (no loops over elements). The softmax family and the logit losses are
computed from ``x - logsumexp(x)``, never ``log(softmax(x))``, so logits of +-1e4 give finite values and
gradients. Class weights and ``pos_weight`` are not differentiable, as in torch.
"""

__all__ = ["softmax", "log_softmax", "layer_norm", "rms_norm", "dropout", "embedding", "cross_entropy",
           "nll_loss", "mse_loss", "binary_cross_entropy_with_logits"]

import numpy as np

from tape.broadcast import unbroadcast
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop
from tape.tensors import as_tensor

from ._samples import transposed, uniform
from ._validation import normalize_dim, require, require_float, require_integer

_REDUCTIONS = ("none", "mean", "sum")


# -- shared helpers ----------------------------------------------------------------------------------------
def _as_1d(x: np.ndarray) -> np.ndarray:
    """A 0-d array viewed as shape (1,) (torch lets softmax run over dim 0 / -1 of a scalar)."""
    return x.reshape(1) if x.ndim == 0 else x


def _check_reduction(op: str, reduction) -> None:
    if not isinstance(reduction, str) or reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: argument 'reduction' expected one of 'none', 'mean', 'sum', got {reduction!r}")


def _reduce(loss: np.ndarray, reduction: str, denominator=None) -> np.ndarray:
    """Apply a loss reduction; 'mean' divides by ``denominator`` (default: the number of elements)."""
    if reduction == "none":
        return loss
    total = np.sum(loss)
    if reduction == "sum":
        return total
    with np.errstate(invalid="ignore", divide="ignore"):  # 0/0 -> NaN when every target is ignored, as torch
        return total / (loss.size if denominator is None else denominator)


def _reduction_grad(g: np.ndarray, reduction: str, shape: tuple, denominator=None) -> np.ndarray:
    """The gradient reaching each unreduced loss element from the gradient ``g`` of the reduced loss."""
    if reduction == "none":
        return g
    if reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            g = g / (int(np.prod(shape, dtype=np.int64)) if denominator is None else denominator)
    return np.broadcast_to(g, shape)


def _normalized_axes(op: str, x: np.ndarray, normalized_shape) -> tuple:
    """The trailing axes ``normalized_shape`` names, after checking it matches the end of ``x``'s shape."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int | np.integer) else tuple(normalized_shape)
    require(len(shape) >= 1 and all(isinstance(n, int | np.integer) and n > 0 for n in shape), op,
            "normalized_shape", "a non-empty shape of positive ints", normalized_shape)
    require(len(shape) <= x.ndim and x.shape[x.ndim - len(shape):] == shape, op, "normalized_shape",
            f"the trailing dims of the input (input shape {x.shape})", shape)
    return tuple(range(x.ndim - len(shape), x.ndim))


def _shape_tuple(normalized_shape) -> tuple:
    return tuple(int(n) for n in np.atleast_1d(normalized_shape))


def _check_affine(op: str, name: str, param, x: np.ndarray, axes: tuple) -> None:
    if param is not None:
        require_float(op, name, param)
        expected = tuple(x.shape[a] for a in axes)
        require(param.shape == expected, op, name, f"shape {expected} (normalized_shape)", param.shape)


# -- softmax / log_softmax ---------------------------------------------------------------------------------
def _shifted(z: np.ndarray, axis: int) -> np.ndarray:
    """z minus its max along ``axis``: every exp of it is at most 1, so nothing overflows."""
    return z - np.max(z, axis=axis, keepdims=True)


def _softmax(x, dim=-1):
    axis = normalize_dim("softmax", dim, x.ndim)
    e = np.exp(_shifted(_as_1d(x), axis))
    e /= np.sum(e, axis=axis, keepdims=True)
    return e.reshape(x.shape)


def _softmax_vjp(g, ans, x, dim=-1):
    axis = normalize_dim("softmax", dim, x.ndim)
    gy = _as_1d(g * ans)
    gy -= _as_1d(ans) * np.sum(gy, axis=axis, keepdims=True)
    return gy.reshape(x.shape)


def _log_softmax(x, dim=-1):
    # (x - max) - log(sum(exp(x - max))): subtracting logsumexp(x) in one step would round at |x| ~ 1e4
    axis = normalize_dim("log_softmax", dim, x.ndim)
    out = _shifted(_as_1d(x), axis)
    out -= np.log(np.sum(np.exp(out), axis=axis, keepdims=True))
    return out.reshape(x.shape)


def _log_softmax_vjp(g, ans, x, dim=-1):
    axis = normalize_dim("log_softmax", dim, x.ndim)
    g1 = _as_1d(g)
    return (g1 - np.exp(_as_1d(ans)) * np.sum(g1, axis=axis, keepdims=True)).reshape(x.shape)


def _softmax_samples(rng):
    return [Sample((uniform(rng, (2, 3, 4)),), {"dim": -1}),
            Sample((uniform(rng, (2, 3, 4)),), {"dim": 1}),
            Sample((uniform(rng, (2, 3, 4)),), {"dim": 0}),
            Sample((transposed(rng, (3, 5)),), {"dim": -1}, "non-contiguous"),
            Sample((uniform(rng, (4, 1)),), {"dim": 1}, "size-1 dim"),
            Sample((uniform(rng, ()),), {"dim": 0}, "scalar"),
            Sample((uniform(rng, (3, 4), -1e4, 1e4),), {"dim": -1}, "logits of +-1e4")]


def _check_dim_input(op):
    def check(x, dim=-1):
        require_float(op, "input", x)
        normalize_dim(op, dim, x.ndim)
    return check


softmax = defop("softmax", family="nn", inputs=("x",), forward=_softmax, vjps=(_softmax_vjp,),
                check=_check_dim_input("softmax"), samples=_softmax_samples,
                torch_ref=lambda torch, x, dim=-1: torch.softmax(x, dim=dim))

log_softmax = defop("log_softmax", family="nn", inputs=("x",), forward=_log_softmax, vjps=(_log_softmax_vjp,),
                    check=_check_dim_input("log_softmax"), samples=_softmax_samples,
                    torch_ref=lambda torch, x, dim=-1: torch.log_softmax(x, dim=dim))


# -- layer_norm / rms_norm ---------------------------------------------------------------------------------
def _as_rows(op: str, x: np.ndarray, normalized_shape) -> np.ndarray:
    """``x`` as a (rows, features) matrix: the normalised trailing dims flattened into one axis."""
    first = _normalized_axes(op, x, normalized_shape)[0]
    return x.reshape(-1, int(np.prod(x.shape[first:], dtype=np.int64)))


def _row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum(a * b) over each row, as a column, without the (rows, features) temporary."""
    return np.einsum("ij,ij->i", a, b)[:, None]


def _row_means(a: np.ndarray) -> np.ndarray:
    """The mean of each row, as a column; a matrix-vector product is several times faster than np.mean on
    short rows."""
    return (a @ np.ones(a.shape[1], a.dtype))[:, None] / a.shape[1]


def _layer_norm(input, weight, bias, normalized_shape, eps=1e-5):
    x = _as_rows("layer_norm", input, normalized_shape)
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


def _layer_norm_vjp(g, ans, input, weight, bias, normalized_shape, eps=1e-5, *, needs, xhat, rstd):
    gx, dw, db = _affine_grads(g.reshape(xhat.shape), xhat, weight, bias, needs)
    dx = _normalization_input_grad(gx, xhat, rstd, True).reshape(input.shape) if needs[0] else None
    return dx, dw, db


def _check_layer_norm(input, weight, bias, normalized_shape, eps=1e-5):
    require_float("layer_norm", "input", input)
    axes = _normalized_axes("layer_norm", input, normalized_shape)
    _check_affine("layer_norm", "weight", weight, input, axes)
    _check_affine("layer_norm", "bias", bias, input, axes)


def _layer_norm_samples(rng):
    return [Sample((uniform(rng, (3, 5)), uniform(rng, (5,)), uniform(rng, (5,))), {"normalized_shape": (5,)}),
            Sample((uniform(rng, (2, 3, 4)), None, None), {"normalized_shape": (3, 4)}, "no affine"),
            Sample((uniform(rng, (2, 3, 4)), uniform(rng, (3, 4)), None), {"normalized_shape": [3, 4],
                                                                            "eps": 1e-3}, "weight only"),
            Sample((transposed(rng, (3, 4)), None, uniform(rng, (4,))), {"normalized_shape": 4},
                   "bias only, non-contiguous"),
            Sample((uniform(rng, (4,)), uniform(rng, (4,)), uniform(rng, (4,))), {"normalized_shape": (4,)},
                   "1-D")]


def _layer_norm_public(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """``torch.nn.functional.layer_norm``: normalise over the trailing ``normalized_shape`` dims."""
    return _layer_norm_op(input, weight, bias, normalized_shape=normalized_shape, eps=eps)


_layer_norm_op = defop(
    "layer_norm", family="nn", inputs=("input", "weight?", "bias?"), forward=_layer_norm,
    joint_vjp=_layer_norm_vjp, saves=True, check=_check_layer_norm, samples=_layer_norm_samples,
    torch_ref=lambda torch, input, weight, bias, normalized_shape, eps=1e-5: torch.nn.functional.layer_norm(
        input, _shape_tuple(normalized_shape), weight, bias, eps))


def _rms_eps(x, eps):
    return np.finfo(x.dtype).eps if eps is None else eps


def _rms_norm(input, weight, normalized_shape, eps=None):
    x = _as_rows("rms_norm", input, normalized_shape)
    rstd = 1 / np.sqrt(_row_dot(x, x) / x.shape[1] + _rms_eps(input, eps))
    out = x * rstd
    if weight is not None:
        out *= weight.reshape(-1)
    return out.reshape(input.shape), {"rstd": rstd}


def _rms_norm_vjp(g, ans, input, weight, normalized_shape, eps=None, *, needs, rstd):
    x = _as_rows("rms_norm", input, normalized_shape)
    xhat = x * rstd
    gx, dw, _ = _affine_grads(g.reshape(x.shape), xhat, weight, None, needs)
    dx = _normalization_input_grad(gx, xhat, rstd, False).reshape(input.shape) if needs[0] else None
    return dx, dw


def _check_rms_norm(input, weight, normalized_shape, eps=None):
    require_float("rms_norm", "input", input)
    _check_affine("rms_norm", "weight", weight, input, _normalized_axes("rms_norm", input, normalized_shape))
    require(eps is None or (isinstance(eps, float | int) and eps >= 0), "rms_norm", "eps", "None or a number >= 0",
            eps)


def _rms_norm_samples(rng):
    return [Sample((uniform(rng, (3, 5)), uniform(rng, (5,))), {"normalized_shape": (5,)}),
            Sample((uniform(rng, (2, 3, 4)), None), {"normalized_shape": (3, 4), "eps": 1e-2}, "no weight"),
            Sample((transposed(rng, (3, 4)), uniform(rng, (4,))), {"normalized_shape": 4}, "non-contiguous")]


def _rms_norm_public(input, normalized_shape, weight=None, eps=None):
    """``torch.nn.functional.rms_norm``; ``eps=None`` means the machine epsilon of the input's dtype."""
    return _rms_norm_op(input, weight, normalized_shape=normalized_shape, eps=eps)


_rms_norm_op = defop(
    "rms_norm", family="nn", inputs=("input", "weight?"), forward=_rms_norm, joint_vjp=_rms_norm_vjp,
    saves=True, check=_check_rms_norm, samples=_rms_norm_samples,
    torch_ref=lambda torch, input, weight, normalized_shape, eps=None: torch.nn.functional.rms_norm(
        input, _shape_tuple(normalized_shape), weight, eps))

layer_norm = _layer_norm_public
rms_norm = _rms_norm_public


# -- dropout -----------------------------------------------------------------------------------------------
def _keep_mask(shape: tuple, p: float, seed: int) -> np.ndarray:
    """The replayable keep mask: element kept when its uniform draw (from ``seed``) is >= p."""
    return np.random.default_rng(seed).random(shape, dtype=np.float32) >= p


def _dropout_scale(p: float) -> float:
    return 0.0 if p == 1 else 1 / (1 - p)


def _dropout(input, p=0.5, training=True, seed=0):
    if not training or p == 0:
        return input
    return np.where(_keep_mask(input.shape, p, seed), input * _dropout_scale(p), 0).astype(input.dtype, copy=False)


def _dropout_vjp(g, ans, input, p=0.5, training=True, seed=0):
    if not training or p == 0:
        return g
    return np.where(_keep_mask(input.shape, p, seed), g * _dropout_scale(p), 0).astype(g.dtype, copy=False)


def _check_dropout_p(p, training) -> None:
    if isinstance(p, bool) or not isinstance(p, int | float | np.floating | np.integer):
        raise TypeError(f"dropout: argument 'p' expected a probability (a float in [0, 1]), got {type(p).__name__}")
    require(0 <= p <= 1, "dropout", "p", "a probability in [0, 1]", p)
    if not isinstance(training, bool | np.bool_):
        raise TypeError(f"dropout: argument 'training' expected a bool, got {type(training).__name__} {training!r}")


def _check_dropout(input, p=0.5, training=True, seed=0):
    require_float("dropout", "input", input)
    _check_dropout_p(p, training)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"dropout: argument 'seed' expected an int, got {type(seed).__name__}")


def _dropout_samples(rng):
    x = uniform(rng, (4, 5))
    return [Sample((x,), {"p": 0.3, "seed": 7}, "p=0.3 (seeded mask)", torch=False),
            Sample((transposed(rng, (3, 4)),), {"p": 0.5, "seed": 1}, "non-contiguous", torch=False),
            Sample((x,), {"p": 0.0, "seed": 7}, "p=0"),
            Sample((x,), {"p": 0.5, "training": False, "seed": 7}, "eval mode"),
            Sample((x,), {"p": 1.0, "seed": 7}, "p=1 drops everything")]


dropout_op = defop(
    "dropout", family="nn", inputs=("input",), forward=_dropout, vjps=(_dropout_vjp,), check=_check_dropout,
    samples=_dropout_samples,
    notes="The mask is drawn from the integer attribute 'seed' and regenerated in the backward.",
    torch_ref=lambda torch, input, p=0.5, training=True, seed=0: torch.nn.functional.dropout(input, p, training))

_default_rng = np.random.default_rng()


def dropout(input, p=0.5, training=True, rng=None):
    """Inverted dropout (kept elements scaled by 1/(1-p)), as ``torch.nn.functional.dropout``.

    The mask's seed is drawn from ``rng`` (a ``np.random.Generator``; a module-level one when None) at
    call time and recorded as the op's ``seed`` attribute, so a replayed tape draws the same mask. Not
    training, or ``p == 0``, returns the input unchanged and records nothing.
    """
    _check_dropout_p(p, training)
    if not training or p == 0:
        return as_tensor(input)
    seed = int((_default_rng if rng is None else rng).integers(0, 2**63 - 1))
    return dropout_op(input, p=p, training=True, seed=seed)


# -- embedding ---------------------------------------------------------------------------------------------
def _padding_row(weight, padding_idx):
    return None if padding_idx is None else padding_idx % weight.shape[0]


def _embedding(input, weight, padding_idx=None):
    return weight[input]


def _embedding_vjp(g, ans, input, weight, padding_idx=None):
    grad = np.zeros(weight.shape, dtype=g.dtype)
    np.add.at(grad, input.reshape(-1), g.reshape(-1, weight.shape[1]))  # repeated indices accumulate
    row = _padding_row(weight, padding_idx)
    if row is not None:
        grad[row] = 0
    return grad


def _check_embedding(input, weight, padding_idx=None):
    require_integer("embedding", "input", input)
    require_float("embedding", "weight", weight)
    require(weight.ndim == 2, "embedding", "weight", "a 2-D (num_embeddings, embedding_dim) tensor", weight.shape)
    n = weight.shape[0]
    if input.size:
        low, high = int(input.min()), int(input.max())
        require(low >= 0 and high < n, "embedding", "input", f"indices in [0, {n - 1}]", f"values in [{low}, {high}]")
    if padding_idx is not None:
        require(isinstance(padding_idx, int | np.integer) and -n <= padding_idx < n, "embedding", "padding_idx",
                f"None or an int in [{-n}, {n - 1}]", padding_idx)


def _embedding_samples(rng):
    weight = uniform(rng, (6, 3))
    # The padding row gets no gradient although the forward reads it (torch's definition), so finite
    # differences cannot agree where it is looked up: samples keep padding_idx out of the indices and
    # tests/test_ops_nn.py checks the hit against torch.
    return [Sample((np.array([[0, 2, 5], [2, 2, 1]]), weight), {}, "repeated indices"),
            Sample((np.array([1, 3, 3, 0]), weight), {"padding_idx": 2}, "padding_idx set, not looked up"),
            Sample((np.array([[4, 0], [0, 1]]), weight), {"padding_idx": -1}, "negative padding_idx"),
            Sample((np.array(2), weight), {}, "scalar index"),
            Sample((np.array([[0, 1, 2]]).T, transposed(rng, (3, 6))), {}, "non-contiguous")]


embedding = defop(
    "embedding", family="nn", inputs=("input", "weight"), forward=_embedding,
    vjps=(NOT_DIFFERENTIABLE, _embedding_vjp), check=_check_embedding, samples=_embedding_samples,
    torch_ref=lambda torch, input, weight, padding_idx=None: torch.nn.functional.embedding(
        input, weight, padding_idx=padding_idx))


# -- cross_entropy / nll_loss ------------------------------------------------------------------------------
def _class_axis(input) -> int:
    return 0 if input.ndim == 1 else 1


def _targets(input, target, weight, ignore_index):
    """Per target: whether it counts, a safe class index (0 where ignored) and its weight (0 where ignored)."""
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    if weight is None:
        w_target = valid.astype(input.dtype)
    else:
        w_target = np.where(valid, weight[safe], 0).astype(input.dtype, copy=False)
    return valid, safe, w_target


def _along_class(values, input):
    """``values`` (one per target) with a size-1 class axis inserted, to broadcast against ``input``."""
    return np.expand_dims(values, _class_axis(input))


def _class_weights(weight, input):
    """The class weights shaped to broadcast along the class axis of ``input``."""
    return weight.reshape((-1,) + (1,) * (input.ndim - 1 - _class_axis(input)))


def _picked(input, safe):
    axis = _class_axis(input)
    return np.squeeze(np.take_along_axis(input, np.expand_dims(safe, axis), axis), axis)


def _cross_entropy(input, target, weight, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    axis = _class_axis(input)
    shift = np.max(input, axis=axis, keepdims=True)
    probs = np.exp(input - shift)
    total = np.sum(probs, axis=axis, keepdims=True)
    log_sum = np.log(total)
    probs /= total  # saved for the backward, as torch saves its log_softmax
    valid, safe, w_target = _targets(input, target, weight, ignore_index)
    loss = -w_target * ((_picked(input, safe) - np.squeeze(shift, axis)) - np.squeeze(log_sum, axis))
    if label_smoothing > 0:
        log_probs = (input - shift) - log_sum
        if weight is not None:
            log_probs *= _class_weights(weight, input)
        smooth = np.where(valid, -np.sum(log_probs, axis=axis), 0)
        loss = (1 - label_smoothing) * loss + (label_smoothing / input.shape[axis]) * smooth
    return _reduce(loss, reduction, np.sum(w_target)), {"probs": probs}


def _cross_entropy_vjp(g, ans, input, target, weight, ignore_index=-100, reduction="mean", label_smoothing=0.0, *,
                       probs):
    # loss_n = -sum_c q_nc log p_nc with q = (1-s) w_y [c = y] + (s/C) w_c, so dloss_n/dx = p * sum_c(q_nc) - q_n
    axis = _class_axis(input)
    n_classes = input.shape[axis]
    valid, safe, w_target = _targets(input, target, weight, ignore_index)
    scale = _reduction_grad(g, reduction, w_target.shape, np.sum(w_target))
    on_target = scale * w_target * (1 - label_smoothing)
    row_total = on_target
    if label_smoothing > 0:
        smooth_scale = np.where(valid, scale * (label_smoothing / n_classes), 0)
        row_total = on_target + smooth_scale * (n_classes if weight is None else np.sum(weight))
    grad = probs * _along_class(row_total, input)
    if label_smoothing > 0:
        grad -= _along_class(smooth_scale, input) * (1 if weight is None else _class_weights(weight, input))
    _subtract_at_targets(grad, safe, on_target, axis)
    return grad


def _subtract_at_targets(grad, safe, amounts, axis):
    index = np.expand_dims(safe, axis)
    np.put_along_axis(grad, index, np.take_along_axis(grad, index, axis) - np.expand_dims(amounts, axis), axis)


def _nll_loss(input, target, weight, ignore_index=-100, reduction="mean"):
    _, safe, w_target = _targets(input, target, weight, ignore_index)
    return _reduce(-w_target * _picked(input, safe), reduction, np.sum(w_target))


def _nll_loss_vjp(g, ans, input, target, weight, ignore_index=-100, reduction="mean"):
    _, safe, w_target = _targets(input, target, weight, ignore_index)
    grad = np.zeros(input.shape, dtype=g.dtype)
    _subtract_at_targets(grad, safe, _reduction_grad(g, reduction, w_target.shape, np.sum(w_target)) * w_target,
                         _class_axis(input))
    return grad


def _check_class_targets(op, input, target, weight, ignore_index, reduction):
    require_float(op, "input", input)
    if target.dtype.kind == "f":
        raise TypeError(f"{op}: argument 'target' expected an integer tensor of class indices, got dtype "
                        f"{target.dtype} (probability targets are not supported)")
    require_integer(op, "target", target)
    require(input.ndim >= 1, op, "input", "a tensor of shape (C,), (N, C) or (N, C, d1, ...)", input.shape)
    expected = () if input.ndim == 1 else (input.shape[0],) + input.shape[2:]
    require(target.shape == expected, op, "target", f"shape {expected} for input of shape {input.shape}",
            target.shape)
    n_classes = input.shape[_class_axis(input)]
    if weight is not None:
        require_float(op, "weight", weight)
        require(weight.shape == (n_classes,), op, "weight", f"a 1-D tensor of {n_classes} class weights",
                weight.shape)
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int | np.integer):
        raise TypeError(f"{op}: argument 'ignore_index' expected an int, got {type(ignore_index).__name__}")
    _check_reduction(op, reduction)
    counted = target[target != ignore_index]
    if counted.size:
        low, high = int(counted.min()), int(counted.max())
        require(low >= 0 and high < n_classes, op, "target", f"class indices in [0, {n_classes - 1}] "
                f"(or ignore_index={ignore_index})", f"values in [{low}, {high}]")


def _check_cross_entropy(input, target, weight, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    _check_class_targets("cross_entropy", input, target, weight, ignore_index, reduction)
    require(isinstance(label_smoothing, int | float) and 0 <= label_smoothing <= 1, "cross_entropy",
            "label_smoothing", "a float in [0, 1]", label_smoothing)


def _check_nll_loss(input, target, weight, ignore_index=-100, reduction="mean"):
    _check_class_targets("nll_loss", input, target, weight, ignore_index, reduction)


def _class_target_samples(rng, smoothing: bool):
    def t(*shape, high=4):
        return rng.integers(0, high, size=shape)

    weight = uniform(rng, (4,), 0.2, 2.0)
    ignored = t(6)
    ignored[[1, 4]] = -100
    spatial = t(2, 3, 2)
    spatial[0, 1, 0] = 2
    out = []
    for reduction in _REDUCTIONS:
        out.append(Sample((uniform(rng, (5, 4)), t(5), None), {"reduction": reduction}, reduction))
        out.append(Sample((uniform(rng, (6, 4)), ignored, weight), {"reduction": reduction},
                          f"{reduction}, weights, ignore_index hits"))
    out += [Sample((uniform(rng, (2, 4, 3, 2)), spatial, weight), {"ignore_index": 2}, "(N, C, d1, d2), ignore 2"),
            Sample((uniform(rng, (4,)), np.array(1), None), {}, "unbatched (C,)"),
            Sample((transposed(rng, (5, 4)), t(5), None), {"reduction": "sum"}, "non-contiguous"),
            Sample((uniform(rng, (3, 4), -1e4, 1e4), t(3), None), {}, "logits of +-1e4")]
    if smoothing:
        for reduction in _REDUCTIONS:
            out.append(Sample((uniform(rng, (6, 4)), ignored, weight), {"reduction": reduction,
                                                                        "label_smoothing": 0.2},
                              f"{reduction}, label_smoothing, weights, ignore_index hits"))
        out += [Sample((uniform(rng, (5, 4)), t(5), None), {"label_smoothing": 0.1}, "label_smoothing"),
                Sample((uniform(rng, (2, 4, 3, 2)), spatial, None), {"label_smoothing": 0.3, "reduction": "none"},
                       "(N, C, d1, d2), label_smoothing"),
                Sample((uniform(rng, (4,)), np.array(3), weight), {"label_smoothing": 0.5}, "unbatched smoothing")]
    return out


def _cross_entropy_public(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """``torch.nn.functional.cross_entropy`` with class-index targets (log_softmax over dim 1, then nll)."""
    return _cross_entropy_op(input, target, weight, ignore_index=ignore_index, reduction=reduction,
                             label_smoothing=label_smoothing)


def _nll_loss_public(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """``torch.nn.functional.nll_loss``: ``input`` holds log-probabilities along dim 1 (dim 0 if 1-D)."""
    return _nll_loss_op(input, target, weight, ignore_index=ignore_index, reduction=reduction)


_cross_entropy_op = defop(
    "cross_entropy", family="nn", inputs=("input", "target", "weight?"), forward=_cross_entropy,
    vjps=(_cross_entropy_vjp, NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE), saves=True, check=_check_cross_entropy,
    samples=lambda rng: _class_target_samples(rng, smoothing=True),
    notes="Class weights are not differentiable, as in torch.",
    torch_ref=lambda torch, input, target, weight, **attrs: torch.nn.functional.cross_entropy(
        input, target, weight, **attrs))

_nll_loss_op = defop(
    "nll_loss", family="nn", inputs=("input", "target", "weight?"), forward=_nll_loss,
    vjps=(_nll_loss_vjp, NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE), check=_check_nll_loss,
    samples=lambda rng: _class_target_samples(rng, smoothing=False),
    notes="Class weights are not differentiable, as in torch.",
    torch_ref=lambda torch, input, target, weight, **attrs: torch.nn.functional.nll_loss(
        input, target, weight, **attrs))

cross_entropy = _cross_entropy_public
nll_loss = _nll_loss_public


# -- mse_loss ----------------------------------------------------------------------------------------------
def _mse_loss(input, target, reduction="mean"):
    diff = input - target
    return _reduce(diff * diff, reduction)


def _mse_grad(g, input, target, reduction):
    diff = input - target
    return 2 * _reduction_grad(g, reduction, diff.shape) * diff


def _check_mse_loss(input, target, reduction="mean"):
    require_float("mse_loss", "input", input)
    require_float("mse_loss", "target", target)
    try:
        np.broadcast_shapes(input.shape, target.shape)
    except ValueError:
        raise ValueError(f"mse_loss: argument 'target' expected a shape that broadcasts with input "
                         f"{input.shape}, got {target.shape}") from None
    _check_reduction("mse_loss", reduction)


def _mse_samples(rng):
    out = [Sample((uniform(rng, (3, 4)), uniform(rng, (3, 4))), {"reduction": r}, r) for r in _REDUCTIONS]
    return out + [Sample((transposed(rng, (2, 5)), uniform(rng, (2, 5))), {}, "non-contiguous"),
                  Sample((uniform(rng, (2, 3)), uniform(rng, (3,))), {"reduction": "sum"}, "broadcast target"),
                  Sample((uniform(rng, ()), uniform(rng, ())), {}, "scalars")]


def _torch_mse(torch, input, target, reduction="mean"):
    import warnings

    with warnings.catch_warnings():  # torch warns when input and target broadcast
        warnings.simplefilter("ignore")
        return torch.nn.functional.mse_loss(input, target, reduction=reduction)


mse_loss = defop(
    "mse_loss", family="nn", inputs=("input", "target"), forward=_mse_loss,
    vjps=(lambda g, ans, input, target, reduction="mean": unbroadcast(_mse_grad(g, input, target, reduction),
                                                                      input.shape),
          lambda g, ans, input, target, reduction="mean": unbroadcast(-_mse_grad(g, input, target, reduction),
                                                                      target.shape)),
    check=_check_mse_loss, samples=_mse_samples, torch_ref=_torch_mse)


# -- binary_cross_entropy_with_logits ----------------------------------------------------------------------
def _softplus(x):
    return np.logaddexp(0, x)


def _bce_with_logits(input, target, weight, pos_weight, reduction="mean"):
    # loss = (1 - t) x + (1 + (pw - 1) t) softplus(-x), which is x - t x + log(1 + exp(-x)) without pos_weight
    softplus_neg = _softplus(-input)
    if pos_weight is not None:
        softplus_neg = softplus_neg * (1 + (pos_weight - 1) * target)
    loss = (1 - target) * input + softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _bce_input_vjp(g, ans, input, target, weight, pos_weight, reduction="mean"):
    sigmoid_neg = np.exp(-_softplus(input))  # sigmoid(-x), accurate in both tails
    if pos_weight is not None:
        sigmoid_neg = sigmoid_neg * (1 + (pos_weight - 1) * target)
    grad = (1 - target) - sigmoid_neg
    return _weighted_bce_grad(g, grad, weight, reduction)


def _bce_target_vjp(g, ans, input, target, weight, pos_weight, reduction="mean"):
    grad = -input if pos_weight is None else (pos_weight - 1) * _softplus(-input) - input
    return _weighted_bce_grad(g, grad, weight, reduction)


def _weighted_bce_grad(g, grad, weight, reduction):
    if weight is not None:
        grad = grad * weight
    return _reduction_grad(g, reduction, grad.shape) * grad


def _check_bce_with_logits(input, target, weight, pos_weight, reduction="mean"):
    op = "binary_cross_entropy_with_logits"
    require_float(op, "input", input)
    require_float(op, "target", target)
    require(target.shape == input.shape, op, "target", f"the input's shape {input.shape}", target.shape)
    for name, param in (("weight", weight), ("pos_weight", pos_weight)):
        if param is not None:
            require_float(op, name, param)
            try:
                fits = np.broadcast_shapes(param.shape, input.shape) == input.shape
            except ValueError:
                fits = False
            require(fits, op, name, f"a shape that broadcasts to the input's {input.shape}", param.shape)
    _check_reduction(op, reduction)


def _bce_samples(rng):
    def probs(*shape):
        return uniform(rng, shape, 0.0, 1.0)

    out = [Sample((uniform(rng, (3, 4)), probs(3, 4), None, None), {"reduction": r}, r) for r in _REDUCTIONS]
    out += [Sample((uniform(rng, (3, 4)), probs(3, 4), uniform(rng, (3, 4), 0.1, 2.0), uniform(rng, (4,), 0.1, 3.0)),
                   {"reduction": r}, f"{r}, weight and pos_weight") for r in _REDUCTIONS]
    out += [Sample((uniform(rng, (2, 3)), probs(2, 3), uniform(rng, (3,), 0.1, 2.0), None), {}, "broadcast weight"),
            Sample((transposed(rng, (3, 4)), probs(3, 4), None, uniform(rng, (1, 4), 0.1, 3.0)), {"reduction": "sum"},
                   "non-contiguous, pos_weight"),
            Sample((uniform(rng, (3, 4), -1e4, 1e4), probs(3, 4), None, uniform(rng, (4,), 0.1, 3.0)), {},
                   "logits of +-1e4")]
    return out


def _bce_with_logits_public(input, target, weight=None, reduction="mean", pos_weight=None):
    """``torch.nn.functional.binary_cross_entropy_with_logits``, computed without overflow."""
    return _bce_op(input, target, weight, pos_weight, reduction=reduction)


_bce_op = defop(
    "binary_cross_entropy_with_logits", family="nn", inputs=("input", "target", "weight?", "pos_weight?"),
    forward=_bce_with_logits, vjps=(_bce_input_vjp, _bce_target_vjp, NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE),
    check=_check_bce_with_logits, samples=_bce_samples,
    notes="weight and pos_weight are not differentiable, as in torch.",
    torch_ref=lambda torch, input, target, weight, pos_weight, reduction="mean":
        torch.nn.functional.binary_cross_entropy_with_logits(input, target, weight, reduction=reduction,
                                                             pos_weight=pos_weight))

binary_cross_entropy_with_logits = _bce_with_logits_public
