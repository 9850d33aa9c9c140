"""Losses, as in ``torch.nn.functional``: cross_entropy and nll_loss with class-index targets, mse_loss and
binary_cross_entropy_with_logits, each with ``reduction`` 'none', 'mean' or 'sum'.

cross_entropy and binary_cross_entropy_with_logits work from ``x - logsumexp(x)`` / ``softplus``, never
``log(softmax(x))``, so logits of +-1e4 give finite values and gradients. Class weights, ``weight`` and
``pos_weight`` are not differentiable, as in torch. cross_entropy's fast backward reuses the forward's
probabilities; its second order (and binary_cross_entropy_with_logits') is taken through a ``composite=``
written with registered ops (log_softmax, softplus, mul, sum).

'mean' divides by the number of elements (by the summed weights of the counted targets for the class
losses): an empty batch, or one whose targets are all ``ignore_index``, gives NaN, as in torch; 'sum' gives 0.
"""

__all__ = ["cross_entropy", "nll_loss", "mse_loss", "binary_cross_entropy_with_logits"]

import math

import numpy as np

import ops
from tape.broadcast import unbroadcast
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop
from tape.tensors import Tensor

from ._samples import transposed, uniform
from ._validation import require, require_float, require_integer

FAMILY = "loss"
_REDUCTIONS = ("none", "mean", "sum")


# -- reductions --------------------------------------------------------------------------------------------
def _check_reduction(op: str, reduction) -> None:
    if not isinstance(reduction, str) or reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: argument 'reduction' expected one of 'none', 'mean', 'sum', got {reduction!r}")


def _reduce(loss, reduction: str, denominator=None):
    """Apply a loss reduction; 'mean' divides by ``denominator`` (default: the number of elements)."""
    if reduction == "none":
        return loss
    total = np.sum(loss)
    if reduction == "sum":
        return total
    with np.errstate(invalid="ignore", divide="ignore"):  # 0/0 -> NaN for an empty or all-ignored batch, as torch
        return total / (loss.size if denominator is None else denominator)


def _reduction_grad(g, reduction: str, shape: tuple, denominator=None):
    """The gradient reaching each unreduced loss element from the gradient ``g`` of the reduced loss."""
    if reduction == "none":
        return g
    if reduction == "mean" and (denominator is not None or math.prod(shape)):
        # an elementwise loss over no elements: the gradient is empty; dividing g by 0 first would make its
        # derivative in g NaN where torch's (an empty sum) is 0
        with np.errstate(invalid="ignore", divide="ignore"):
            g = g / (math.prod(shape) if denominator is None else denominator)
    return np.broadcast_to(g, shape)


def _values(t):
    """The array of a tensor argument that takes no gradient (targets, class weights), Tensor or array."""
    return t.data if isinstance(t, Tensor) else t


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


def _one_hot(input, safe):
    """(input's shape) booleans: True at each target's class."""
    axis = _class_axis(input)
    classes = np.arange(input.shape[axis]).reshape((-1,) + (1,) * (input.ndim - 1 - axis))
    return np.expand_dims(safe, axis) == classes


def _target_distribution(input, target, weight, ignore_index, label_smoothing):
    """The constant q with loss_n = -sum_c q_nc log p_nc: (1-s) w_y at the target class plus (s/C) w_c on
    every class, zero for ignored targets; and the 'mean' denominator, the summed weights of the targets."""
    valid, safe, w_target = _targets(input, target, weight, ignore_index)
    q = _one_hot(input, safe) * _along_class(w_target * (1 - label_smoothing), input)
    if label_smoothing > 0:
        n_classes = input.shape[_class_axis(input)]
        smooth = _along_class(valid * (label_smoothing / n_classes), input)
        q = q + (smooth if weight is None else smooth * _class_weights(weight, input))
    return q.astype(input.dtype, copy=False), np.sum(w_target)


def _cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """``torch.nn.functional.cross_entropy`` with class-index targets: log_softmax over the class dim (dim 1,
    or 0 for an unbatched (C,) input), then the (weighted, smoothed) negative log-likelihood."""
    axis = _class_axis(input)
    if input.size == 0:  # an empty batch: no exp/max over it
        valid, _, w_target = _targets(input, target, weight, ignore_index)
        return _reduce(np.zeros(target.shape, input.dtype), reduction, np.sum(w_target)), \
            {"probs": np.zeros(input.shape, input.dtype)}
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


def _cross_entropy_vjp(g, ans, input, target, weight, *, ignore_index, reduction, label_smoothing, probs):
    # loss_n = -sum_c q_nc log p_nc with q = (1-s) w_y [c = y] + (s/C) w_c, so dloss_n/dx = p * sum_c(q_nc) - q_n
    axis = _class_axis(input)
    n_classes = input.shape[axis]
    valid, safe, w_target = _targets(input, target, weight, ignore_index)
    scale = _reduction_grad(g, reduction, w_target.shape, np.sum(w_target))
    # ignored targets get exactly 0, also when 'mean' divides by a zero total weight (torch's convention)
    with np.errstate(invalid="ignore"):  # inf * 0 there: masked
        on_target = np.where(valid, scale * w_target * (1 - label_smoothing), 0)
    row_total = on_target
    if label_smoothing > 0:
        smooth_scale = np.where(valid, scale * (label_smoothing / n_classes), 0)
        row_total = on_target + smooth_scale * (n_classes if weight is None else np.sum(weight))
    grad = probs * _along_class(row_total, input)
    if label_smoothing > 0:
        grad -= _along_class(smooth_scale, input) * (1 if weight is None else _class_weights(weight, input))
    index = np.expand_dims(safe, axis)
    np.put_along_axis(grad, index, np.take_along_axis(grad, index, axis) - np.expand_dims(on_target, axis), axis)
    return grad


def _cross_entropy_composite(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """cross_entropy written with registered ops: -sum(q * log_softmax(input)) with the constant target
    distribution q, reduced. What its second order differentiates."""
    target = _values(target)
    q, denominator = _target_distribution(input, target, None if weight is None else _values(weight), ignore_index,
                                          label_smoothing)
    loss = -ops.sum(ops.log_softmax(input, _class_axis(input)) * q, dim=_class_axis(input))
    loss = ops.masked_fill(loss, target == ignore_index, 0.0)  # ignored: a zero gradient even when 'mean' is 0/0
    if reduction == "none":
        return loss
    total = ops.sum(loss)
    return total if reduction == "sum" else total / np.asarray(denominator, input.dtype)


def _nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """``torch.nn.functional.nll_loss``: ``input`` holds log-probabilities along dim 1 (dim 0 if 1-D)."""
    _, safe, w_target = _targets(input, target, weight, ignore_index)
    picked = _picked(input, safe) if input.size else np.zeros(target.shape, input.dtype)
    return _reduce(-w_target * picked, reduction, np.sum(w_target))


def _nll_loss_vjp(g, ans, input, target, weight, ignore_index=-100, reduction="mean"):
    # d loss_n / d input_nc = -w_n [c = y_n]: the upstream gradient spread onto each target's class
    target, weight = _values(target), None if weight is None else _values(weight)
    valid, safe, w_target = _targets(input, target, weight, ignore_index)
    with np.errstate(invalid="ignore"):  # inf * 0 where 'mean' divides by a zero total weight: masked below
        scale = _reduction_grad(g, reduction, w_target.shape, np.sum(w_target)) * -w_target
    # exactly 0 off the targets and at ignored ones, also when 'mean' divides by a zero total weight (torch)
    return np.where(_one_hot(input, safe) & _along_class(valid, input), _along_class(scale, input), 0)


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


def _check_cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    _check_class_targets("cross_entropy", input, target, weight, ignore_index, reduction)
    require(isinstance(label_smoothing, int | float) and not isinstance(label_smoothing, bool)
            and 0 <= label_smoothing <= 1, "cross_entropy", "label_smoothing", "a float in [0, 1]", label_smoothing)


def _check_nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
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
        out.append(Sample((uniform(rng, (0, 4)), t(0), weight), {"reduction": reduction},
                          f"{reduction}, empty batch"))
    out += [Sample((uniform(rng, (2, 4, 3, 2)), spatial, weight), {"ignore_index": 2}, "(N, C, d1, d2), ignore 2"),
            Sample((uniform(rng, (4,)), np.array(1), None), {}, "unbatched (C,)"),
            Sample((transposed(rng, (5, 4)), t(5), None), {"reduction": "sum"}, "non-contiguous"),
            Sample((uniform(rng, (3, 4), -1e4, 1e4), t(3), None), {}, "logits of +-1e4"),
            Sample((uniform(rng, (3, 4)), np.full(3, -100), None), {}, "every target ignored: mean is NaN"),
            Sample((uniform(rng, (2, 4, 0)), t(2, 0), None), {"reduction": "none"}, "(N, C, 0)")]
    if smoothing:
        for reduction in _REDUCTIONS:
            out.append(Sample((uniform(rng, (6, 4)), ignored, weight), {"reduction": reduction,
                                                                        "label_smoothing": 0.2},
                              f"{reduction}, label_smoothing, weights, ignore_index hits"))
        out += [Sample((uniform(rng, (5, 4)), t(5), None), {"label_smoothing": 0.1}, "label_smoothing"),
                Sample((uniform(rng, (2, 4, 3, 2)), spatial, None), {"label_smoothing": 0.3, "reduction": "none"},
                       "(N, C, d1, d2), label_smoothing"),
                Sample((uniform(rng, (4,)), np.array(3), weight), {"label_smoothing": 0.5}, "unbatched smoothing"),
                Sample((uniform(rng, (0, 4)), t(0), None), {"label_smoothing": 0.1}, "empty batch, smoothing")]
    return out


cross_entropy = defop(
    "cross_entropy", family=FAMILY, inputs=("input", "target", "weight?"), forward=_cross_entropy,
    vjps=(_cross_entropy_vjp, NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE), saves=True,
    composite=_cross_entropy_composite, check=_check_cross_entropy,
    samples=lambda rng: _class_target_samples(rng, smoothing=True),
    notes="Class weights are not differentiable, as in torch.",
    torch_ref=lambda torch, input, target, weight, **attrs: torch.nn.functional.cross_entropy(
        input, target, weight, **attrs))

nll_loss = defop(
    "nll_loss", family=FAMILY, inputs=("input", "target", "weight?"), forward=_nll_loss,
    vjps=(_nll_loss_vjp, NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE), check=_check_nll_loss,
    samples=lambda rng: _class_target_samples(rng, smoothing=False),
    notes="Class weights are not differentiable, as in torch.",
    torch_ref=lambda torch, input, target, weight, **attrs: torch.nn.functional.nll_loss(
        input, target, weight, **attrs))


# -- mse_loss ----------------------------------------------------------------------------------------------
def _mse_loss(input, target, reduction="mean"):
    """``torch.nn.functional.mse_loss``: (input - target)^2, reduced; input and target broadcast."""
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
    out += [Sample((uniform(rng, (0, 3)), uniform(rng, (0, 3))), {"reduction": r}, f"{r}, empty") for r in _REDUCTIONS]
    return out + [Sample((transposed(rng, (2, 5)), uniform(rng, (2, 5))), {}, "non-contiguous"),
                  Sample((uniform(rng, (2, 3)), uniform(rng, (3,))), {"reduction": "sum"}, "broadcast target"),
                  Sample((uniform(rng, ()), uniform(rng, ())), {}, "scalars")]


def _torch_mse(torch, input, target, reduction="mean"):
    import warnings

    with warnings.catch_warnings():  # torch warns when input and target broadcast
        warnings.simplefilter("ignore")
        return torch.nn.functional.mse_loss(input, target, reduction=reduction)


mse_loss = defop(
    "mse_loss", family=FAMILY, inputs=("input", "target"), forward=_mse_loss,
    vjps=(lambda g, ans, input, target, reduction="mean": unbroadcast(_mse_grad(g, input, target, reduction),
                                                                      input.shape),
          lambda g, ans, input, target, reduction="mean": unbroadcast(-_mse_grad(g, input, target, reduction),
                                                                      target.shape)),
    check=_check_mse_loss, samples=_mse_samples, torch_ref=_torch_mse)


# -- binary_cross_entropy_with_logits ----------------------------------------------------------------------
def _softplus(x):
    return np.logaddexp(0, x)


def _bce_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    """``torch.nn.functional.binary_cross_entropy_with_logits``, computed without overflow."""
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


def _bce_composite(input, target, weight=None, reduction="mean", pos_weight=None):
    """binary_cross_entropy_with_logits written with registered ops (softplus with no linear cut-off): what
    its second order differentiates."""
    softplus_neg = ops.softplus(-input, 1, math.inf)
    if pos_weight is not None:
        softplus_neg = softplus_neg * (1 + (pos_weight - 1) * target)
    loss = (1 - target) * input + softplus_neg
    if weight is not None:
        loss = loss * weight
    if reduction == "none":
        return loss
    return ops.sum(loss) if reduction == "sum" else ops.mean(loss)


def _check_bce_with_logits(input, target, weight=None, pos_weight=None, reduction="mean"):
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
    out += [Sample((uniform(rng, (0, 4)), probs(0, 4), None, uniform(rng, (4,), 0.1, 3.0)), {"reduction": r},
                   f"{r}, empty") for r in _REDUCTIONS]
    out += [Sample((uniform(rng, (2, 3)), probs(2, 3), uniform(rng, (3,), 0.1, 2.0), None), {}, "broadcast weight"),
            Sample((transposed(rng, (3, 4)), probs(3, 4), None, uniform(rng, (1, 4), 0.1, 3.0)), {"reduction": "sum"},
                   "non-contiguous, pos_weight"),
            Sample((uniform(rng, (3, 4), -1e4, 1e4), probs(3, 4), None, uniform(rng, (4,), 0.1, 3.0)), {},
                   "logits of +-1e4")]
    return out


binary_cross_entropy_with_logits = defop(
    "binary_cross_entropy_with_logits", family=FAMILY, inputs=("input", "target", "weight?", "pos_weight?"),
    forward=_bce_with_logits, vjps=(_bce_input_vjp, _bce_target_vjp, NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE),
    composite=_bce_composite, check=_check_bce_with_logits, samples=_bce_samples,
    notes="weight and pos_weight are not differentiable, as in torch.",
    torch_ref=lambda torch, input, target, weight, pos_weight, reduction="mean":
        torch.nn.functional.binary_cross_entropy_with_logits(input, target, weight, reduction=reduction,
                                                             pos_weight=pos_weight))
