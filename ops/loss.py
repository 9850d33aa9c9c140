"""Losses and distances of ``torch.nn.functional``, with PyTorch 2.13's names, argument order, defaults and
semantics (the deprecated ``size_average``/``reduce`` arguments are left out):
- classification: cross_entropy (class indices, or class probabilities of the input's shape), nll_loss,
  binary_cross_entropy, binary_cross_entropy_with_logits, kl_div;
- regression: mse_loss, l1_loss, smooth_l1_loss, huber_loss;
- ranking: margin_ranking_loss, triplet_margin_loss;
- distances (family "distance"): cosine_similarity, pairwise_distance.

Reductions. ``reduction`` is 'none', 'mean' or 'sum' (kl_div also 'batchmean': the sum over input.shape[0]).
'mean' divides by the number of loss elements, except: the class losses with class indices divide by the summed
weights of the counted targets; mse_loss and l1_loss with ``weight`` by sum(weight); huber_loss with ``weight``
by the number of elements (torch 2.13's own inconsistency, kept). A mean over nothing -- an empty batch, every
target ignored -- is NaN, as in torch; a 'sum' of nothing is 0.
"""

__all__ = [
    "cross_entropy",
    "nll_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "margin_ranking_loss",
    "triplet_margin_loss",
    "cosine_similarity",
    "pairwise_distance",
]

import inspect
import math
import warnings
from functools import partial

import numpy as np

from tape.broadcast import unbroadcast
from tape.onnx import lowering
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop
from tape.tensors import Tensor

from ._kernels.rowwise import (
    along_last,
    blockwise,
    cross_entropy_grad_block,
    exp_shifted_block,
    from_last,
    log_softmax_block,
)
from ._notes import case_law
from ._numerics import quiet
from ._onnx import NotExportable
from ._samples import KINK_GAP, transposed, uniform
from ._validation import normalize_dim, real, require, require_float, require_integer

# torch's case law, op by op: each entry joins the notes= of the ops it names (shown in docs/coverage.md)
_CASE_LAW = (
    (
        ("cross_entropy", "binary_cross_entropy", "kl_div", "margin_ranking_loss"),
        "What takes a gradient, as in torch: cross_entropy's probability targets; the targets of "
        "binary_cross_entropy (and _with_logits), kl_div and the regression losses; mse/l1/huber's "
        "``weight``; every input of the ranking losses and distances (a float margin_ranking_loss target "
        "too). Class weights and binary_cross_entropy(_with_logits)'s ``weight`` and ``pos_weight`` are not "
        "differentiable. Floating inputs must share one dtype.",
    ),
    (
        ("l1_loss", "smooth_l1_loss", "huber_loss"),
        "l1_loss and smooth_l1_loss with beta=0 at input == target: gradient 0 (sign(0)). smooth_l1_loss / "
        "huber_loss at |input - target| == beta / delta: the first derivative is continuous; the second is "
        "the linear piece's, 0.",
    ),
    (
        ("margin_ranking_loss", "triplet_margin_loss"),
        "margin_ranking_loss and triplet_margin_loss at the hinge (loss exactly 0): the gradient passes, as "
        "torch's clamp_min(z, 0) backward (z >= 0). triplet_margin_loss with swap=True where the two negative"
        " distances tie: each gets half the gradient (torch's minimum).",
    ),
    (
        ("pairwise_distance",),
        "pairwise_distance is ||x1 - x2 + eps||_p over the last dim of the broadcast shape, for any p (inf, "
        "-inf, 0 and negative included). Its gradient is torch's vector-norm subgradient: 0 where the norm is"
        " 0 (p > 1) or where an entry is 0 (p < 1); sign for p=1; for p=+-inf the entries attaining the norm "
        "share the gradient evenly; 0 for p=0. Norms are computed with a power-of-two scale, so huge or tiny "
        "entries (1e+-200) neither overflow nor underflow where torch's do (there the results differ from "
        "torch's inf/0 and are the right ones).",
    ),
    (
        ("cosine_similarity",),
        "cosine_similarity is torch 2.13's sum((x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps))) over "
        "``dim`` of the broadcast inputs. Torch clamps the norms in place under no_grad, so its gradient "
        "treats the clamped norm as the norm itself: where ||x|| < eps that gradient (matched here) is not "
        "the derivative of the forward, whose denominator is then the constant eps. A zero vector gets "
        "gradient (other / max(||other||, eps)) / eps.",
    ),
    (
        ("binary_cross_entropy",),
        "binary_cross_entropy clamps each log at -100 (so input 0 or 1 gives a finite loss of at most 100 per"
        " element); the input gradient is (x - t) / max(x (1 - x), 1e-12) (torch's floor, 1e-12 rounded to "
        "float32) and the target gradient -logit(x), unclamped (+-inf at x = 0, 1), both torch's. The second "
        "order differentiates that input gradient exactly; torch's double backward instead adds 1e-12 to x "
        "and 1 - x, so the two differ by a relative ~1e-12 / min(x, 1 - x): invisibly above x ~ 1e-4, and at "
        "exactly 0 or 1 (torch's is then ~1e24, ours ~1e12).",
    ),
    (
        ("kl_div",),
        "kl_div is xlogy(t, t) - t * input (exp(t) * (t - input) with log_target): 0 at t = 0, NaN for t < 0."
        " Its target gradient log(t) + 1 - input is NaN at t = 0, as torch's (the 0 / 0 of xlogy's "
        "derivative). torch 2.13 warns on reduction='mean' (that 'mean' divides by every element, not the "
        "batch: 'batchmean' is the KL divergence); the values here are the same and no warning is issued.",
    ),
    (
        ("cross_entropy",),
        "cross_entropy with probability targets: loss_n = -sum_c w_c ((1 - s) t_nc + s / C) "
        "log_softmax(x)_nc; 'mean' divides by the number of loss elements (N x d1 ...), not by weights; "
        "``ignore_index`` must then be negative (torch raises otherwise). torch 2.13 accepts a negative "
        "label_smoothing despite its message; it raises here.",
    ),
    (
        ("cross_entropy", "binary_cross_entropy_with_logits"),
        "cross_entropy and binary_cross_entropy_with_logits work from ``x - logsumexp(x)`` / ``softplus``, "
        "never ``log(softmax(x))``, so logits of +-1e4 give finite values and gradients. cross_entropy with "
        "class indices runs the row kernels of ops/_kernels/rowwise.py (row blocks in cache, on the worker "
        "pool when large): its forward keeps exp(x - max) and the row sums, so its backward makes one pass "
        "and computes no exp. Its second order (and binary_cross_entropy_with_logits') is taken through a "
        "``composite=`` written with registered ops (log_softmax, softplus, mul, sum). Every other rule here "
        "is written with numpy functions over its arguments, so the second order traces it.",
    ),
)

FAMILY = "loss"
_REDUCTIONS = ("none", "mean", "sum")


# -- reductions --------------------------------------------------------------------------------------------
def _check_reduction(op: str, reduction, allowed=_REDUCTIONS) -> None:
    if not isinstance(reduction, str) or reduction not in allowed:
        raise ValueError(
            f"{op}: argument 'reduction' expected one of {', '.join(map(repr, allowed))}, got {reduction!r}"
        )


def _reduce(loss, reduction: str, denominator=None):
    """Apply a loss reduction; 'mean' divides by ``denominator`` (default: the number of elements)."""
    if reduction == "none":
        return loss
    total = np.sum(loss)
    if reduction == "sum":
        return total
    with np.errstate(invalid="ignore", divide="ignore"):  # 0/0 -> NaN for an empty or all-ignored batch, as torch
        return total / (np.size(loss) if denominator is None else denominator)


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


def _constant(x) -> np.ndarray:
    """The values of ``x`` (an array, or a Tensor in a traced rule) as an array carrying no gradient: the masks,
    counts and scales of a rule."""
    return x.detach().numpy() if isinstance(x, Tensor) else np.asarray(x)


def _broadcast_shape(op: str, names: tuple, *arrays) -> tuple:
    try:
        return np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        got = ", ".join(f"{n} {a.shape}" for n, a in zip(names, arrays))
        raise ValueError(
            f"{op}: argument '{names[-1]}' expected a shape that broadcasts with {' and '.join(names[:-1])}, got {got}"
        ) from None


def _check_bool(op: str, argument: str, value) -> None:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{op}: argument '{argument}' expected a bool, got {type(value).__name__} {value!r}")


def _quiet_torch(fn):
    """A torch reference with torch's warnings off (it warns when input and target broadcast, and on
    kl_div's reduction='mean'); the values are what is compared."""

    def run(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)

    return run


# -- sample helpers ----------------------------------------------------------------------------------------
def _noncontiguous(a: np.ndarray) -> np.ndarray:
    """The same values in a non-contiguous (Fortran-ordered) layout."""
    return np.asfortranarray(a) if a.ndim > 1 else a[::-1].copy()[::-1]


def _redraw(rng, draw, ok):
    """``draw(rng)`` again until ``ok(result)``: samples whose finite differences keep away from kinks."""
    for _ in range(1000):
        result = draw(rng)
        if ok(*result):
            return result
    raise RuntimeError("no sample kept away from the kinks in 1000 draws")  # pragma: no cover


def _away(values, kinks=(0.0,)) -> bool:
    """Whether every |value| is at least KINK_GAP from each kink (given as non-negative points)."""
    a = np.abs(values)
    return all(bool(np.all(np.abs(a - k) >= KINK_GAP)) for k in kinks)


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
    return np.reshape(weight, (-1,) + (1,) * (input.ndim - 1 - _class_axis(input)))


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


def _smoothed_probabilities(input, target, weight, label_smoothing):
    """q_nc = w_c ((1 - s) t_nc + s / C) with loss_n = -sum_c q_nc log p_nc, for probability targets ``target``
    (an array, or a Tensor in the composite); ``weight`` is an array or None."""
    n_classes = input.shape[_class_axis(input)]
    q = target
    if label_smoothing > 0 and n_classes:
        q = target * (1 - label_smoothing) + label_smoothing / n_classes
    if weight is not None:
        q = q * _class_weights(weight, input).astype(input.dtype, copy=False)
    return q


def _cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """``torch.nn.functional.cross_entropy``: log_softmax over the class dim (dim 1, or 0 for an unbatched (C,)
    input), then the (weighted, smoothed) negative log-likelihood of class indices, or the cross-entropy with
    class probabilities ``target`` (a float tensor of the input's shape)."""
    axis = _class_axis(input)
    if target.dtype.kind == "f":  # class probabilities
        log_probs = np.zeros_like(input)  # in input's layout
        if input.size:
            blockwise(log_softmax_block, along_last(input, axis), along_last(log_probs, axis))
        loss = -np.sum(log_probs * _smoothed_probabilities(input, target, weight, label_smoothing), axis=axis)
        # torch: 'mean' over an empty input (also N > 0 with C = 0) is NaN
        return _reduce(loss, reduction, None if input.size else 0), {"log_probs": log_probs}
    valid, safe, w_target = _targets(input, target, weight, ignore_index)
    if input.size == 0:  # an empty batch: no exp/max over it
        return _reduce(np.zeros(target.shape, input.dtype), reduction, np.sum(w_target)), {}
    # classes last: exps = exp(x - max), kept for the backward (the probabilities are exps / row_sum)
    x = along_last(input, axis)
    exps = np.empty_like(x)
    row_max = np.empty(x.shape[:-1] + (1,), x.dtype)  # columns: one value per row
    row_sum = np.empty_like(row_max)
    shifted_total = np.empty_like(row_max) if label_smoothing > 0 else None  # sum_c w_c (x_c - max)
    blockwise(partial(exp_shifted_block, weight), x, exps, row_max, row_sum, shifted_total)
    log_sum = np.log(row_sum[..., 0])
    loss = -w_target * ((_picked(input, safe) - row_max[..., 0]) - log_sum)
    if shifted_total is not None:  # smoothing: -sum_c w_c log p_c = sum_c(w_c) log_sum - sum_c w_c (x_c - max)
        class_total = input.shape[axis] if weight is None else np.sum(weight)
        smooth = np.where(valid, class_total * log_sum - shifted_total[..., 0], 0)
        loss = (1 - label_smoothing) * loss + (label_smoothing / input.shape[axis]) * smooth
    return _reduce(loss, reduction, np.sum(w_target)), {"exps": exps, "row_sum": row_sum}


def _probability_scale(g, input, reduction):
    """The upstream gradient per loss element (probability targets), with a size-1 class axis."""
    axis = _class_axis(input)
    loss_shape = input.shape[:axis] + input.shape[axis + 1 :]
    return _along_class(_reduction_grad(g, reduction, loss_shape), input)


def _cross_entropy_vjp(
    g, ans, input, target, weight, *, ignore_index, reduction, label_smoothing, exps=None, row_sum=None, log_probs=None
):
    axis = _class_axis(input)
    if target.dtype.kind == "f":  # dloss_n/dx = p * sum_c(q_nc) - q_n
        q = _smoothed_probabilities(input, target, weight, label_smoothing)
        grad = np.exp(log_probs) * np.sum(q, axis=axis, keepdims=True) - q
        return (_probability_scale(g, input, reduction) * grad).astype(input.dtype, copy=False)
    if np.size(input) == 0:
        return np.zeros_like(input)
    # loss_n = -sum_c q_nc log p_nc with q = (1-s) w_y [c = y] + (s/C) w_c, so dloss_n/dx = p * sum_c(q_nc) - q_n
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
    # classes last: p * sum_c(q_nc) - (s/C) w_c with p = exps / row_sum, then each target class's own term
    grad = np.empty_like(exps)
    smooth = smooth_scale[..., None] if label_smoothing > 0 else None
    blockwise(partial(cross_entropy_grad_block, weight), exps, row_total[..., None] / row_sum, smooth, grad)
    grad = from_last(grad, axis)
    index = np.expand_dims(safe, axis)
    np.put_along_axis(grad, index, np.take_along_axis(grad, index, axis) - np.expand_dims(on_target, axis), axis)
    return grad


def _cross_entropy_target_vjp(g, ans, input, target, weight, *, ignore_index, reduction, label_smoothing, log_probs):
    # probability targets only (class indices are integers: never differentiated): -(1-s) w_c log p_nc
    grad = log_probs * -(1 - label_smoothing)
    if weight is not None:
        grad = grad * _class_weights(weight, input)
    return (_probability_scale(g, input, reduction) * grad).astype(target.dtype, copy=False)


def _cross_entropy_composite(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """cross_entropy written with registered ops: -sum(q * log_softmax(input)) with the target distribution q
    (a constant for class indices, a function of the target for probabilities), reduced. What its second
    order differentiates."""
    from . import reduce  # at call time: the families register in ops/__init__'s order
    from .normalization import log_softmax
    from .shape import masked_fill

    axis = _class_axis(input)
    weight = None if weight is None else _values(weight)
    if target.dtype.kind == "f":
        loss = -reduce.sum(
            log_softmax(input, axis) * _smoothed_probabilities(input, target, weight, label_smoothing), dim=axis
        )
        if reduction == "none":
            return loss
        total = reduce.sum(loss)
        if reduction == "sum":
            return total
        # torch fills the mean over an empty input with NaN: a constant, no 0/0 in the derivative
        if np.size(input) == 0:
            return total + np.asarray(np.nan, input.dtype)
        return total / np.asarray(np.size(loss), input.dtype)
    target = _values(target)
    q, denominator = _target_distribution(input, target, weight, ignore_index, label_smoothing)
    loss = -reduce.sum(log_softmax(input, axis) * q, dim=axis)
    loss = masked_fill(loss, target == ignore_index, 0.0)  # ignored: a zero gradient even when 'mean' is 0/0
    if reduction == "none":
        return loss
    total = reduce.sum(loss)
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


def _check_class_weight(op, input, weight):
    n_classes = input.shape[_class_axis(input)]
    if weight is not None:
        require_float(op, "weight", weight)
        require(weight.shape == (n_classes,), op, "weight", f"a 1-D tensor of {n_classes} class weights", weight.shape)


def _check_ignore_index(op, ignore_index):
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int | np.integer):
        raise TypeError(f"{op}: argument 'ignore_index' expected an int, got {type(ignore_index).__name__}")


def _check_class_targets(op, input, target, weight, ignore_index, reduction):
    require_float(op, "input", input)
    if target.dtype.kind == "f":
        raise TypeError(
            f"{op}: argument 'target' expected an integer tensor of class indices, got dtype "
            f"{target.dtype} (probability targets are not supported)"
        )
    require_integer(op, "target", target)
    require(input.ndim >= 1, op, "input", "a tensor of shape (C,), (N, C) or (N, C, d1, ...)", input.shape)
    expected = () if input.ndim == 1 else (input.shape[0],) + input.shape[2:]
    require(target.shape == expected, op, "target", f"shape {expected} for input of shape {input.shape}", target.shape)
    n_classes = input.shape[_class_axis(input)]
    _check_class_weight(op, input, weight)
    _check_ignore_index(op, ignore_index)
    _check_reduction(op, reduction)
    counted = target[target != ignore_index]
    if counted.size:
        low, high = int(counted.min()), int(counted.max())
        require(
            low >= 0 and high < n_classes,
            op,
            "target",
            f"class indices in [0, {n_classes - 1}] (or ignore_index={ignore_index})",
            f"values in [{low}, {high}]",
        )


def _check_cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    op = "cross_entropy"
    require(
        isinstance(label_smoothing, int | float)
        and not isinstance(label_smoothing, bool)
        and 0 <= label_smoothing <= 1,
        op,
        "label_smoothing",
        "a float in [0, 1]",
        label_smoothing,
    )
    if target.dtype.kind != "f":
        _check_class_targets(op, input, target, weight, ignore_index, reduction)
        return
    require_float(op, "input", input)
    require(input.ndim >= 1, op, "input", "a tensor of shape (C,), (N, C) or (N, C, d1, ...)", input.shape)
    indices = () if input.ndim == 1 else (input.shape[0],) + input.shape[2:]
    require(
        target.shape == input.shape,
        op,
        "target",
        f"class probabilities of the input's shape {input.shape} (or integer class indices of shape {indices})",
        f"a {target.dtype} tensor of shape {target.shape}",
    )
    _check_class_weight(op, input, weight)
    _check_ignore_index(op, ignore_index)
    require(
        ignore_index < 0,
        op,
        "ignore_index",
        "a negative value with class-probability targets (no class is ignored there, as in torch)",
        ignore_index,
    )
    _check_reduction(op, reduction)


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
        out.append(
            Sample(
                (uniform(rng, (6, 4)), ignored, weight),
                {"reduction": reduction},
                f"{reduction}, weights, ignore_index hits",
            )
        )
        out.append(Sample((uniform(rng, (0, 4)), t(0), weight), {"reduction": reduction}, f"{reduction}, empty batch"))
    out += [
        Sample((uniform(rng, (2, 4, 3, 2)), spatial, weight), {"ignore_index": 2}, "(N, C, d1, d2), ignore 2"),
        Sample((uniform(rng, (4,)), np.array(1), None), {}, "unbatched (C,)"),
        Sample((transposed(rng, (5, 4)), t(5), None), {"reduction": "sum"}, "non-contiguous"),
        Sample((uniform(rng, (3, 4), -1e4, 1e4), t(3), None), {}, "logits of +-1e4"),
        Sample((uniform(rng, (3, 4)), np.full(3, -100), None), {}, "every target ignored: mean is NaN"),
        Sample((uniform(rng, (2, 4, 0)), t(2, 0), None), {"reduction": "none"}, "(N, C, 0)"),
    ]
    if smoothing:
        for reduction in _REDUCTIONS:
            out.append(
                Sample(
                    (uniform(rng, (6, 4)), ignored, weight),
                    {"reduction": reduction, "label_smoothing": 0.2},
                    f"{reduction}, label_smoothing, weights, ignore_index hits",
                )
            )
        out += [
            Sample((uniform(rng, (5, 4)), t(5), None), {"label_smoothing": 0.1}, "label_smoothing"),
            Sample(
                (uniform(rng, (2, 4, 3, 2)), spatial, None),
                {"label_smoothing": 0.3, "reduction": "none"},
                "(N, C, d1, d2), label_smoothing",
            ),
            Sample((uniform(rng, (4,)), np.array(3), weight), {"label_smoothing": 0.5}, "unbatched smoothing"),
            Sample((uniform(rng, (0, 4)), t(0), None), {"label_smoothing": 0.1}, "empty batch, smoothing"),
        ]
    return out


def _probability_target_samples(rng):
    def probs(*shape, axis=1):
        e = np.exp(uniform(rng, shape, -2.0, 2.0))
        return e / np.sum(e, axis=axis, keepdims=True)

    weight = uniform(rng, (4,), 0.2, 2.0)
    one_hot = np.eye(4)[rng.integers(0, 4, size=5)]
    out = [
        Sample((uniform(rng, (5, 4)), probs(5, 4), None), {"reduction": r}, f"probabilities, {r}") for r in _REDUCTIONS
    ]
    out += [
        Sample(
            (uniform(rng, (5, 4)), probs(5, 4), weight),
            {"reduction": r, "label_smoothing": 0.2},
            f"probabilities, {r}, weights, label_smoothing",
        )
        for r in _REDUCTIONS
    ]
    out += [
        Sample((uniform(rng, (0, 4)), probs(0, 4), weight), {"reduction": r}, f"probabilities, {r}, empty batch")
        for r in _REDUCTIONS
    ]
    return out + [
        Sample(
            (uniform(rng, (2, 4, 3, 2)), probs(2, 4, 3, 2), None),
            {"reduction": "none", "label_smoothing": 0.3},
            "probabilities (N, C, d1, d2), label_smoothing",
        ),
        Sample((uniform(rng, (2, 4, 3)), probs(2, 4, 3), weight), {}, "probabilities (N, C, d1), weights"),
        Sample((uniform(rng, (4,)), probs(4, axis=0), weight), {"label_smoothing": 0.5}, "probabilities, unbatched"),
        Sample(
            (transposed(rng, (5, 4)), _noncontiguous(probs(5, 4)), None),
            {"reduction": "sum"},
            "probabilities, non-contiguous",
        ),
        Sample((uniform(rng, (5, 4)), one_hot, None), {"label_smoothing": 0.1}, "one-hot probabilities"),
        Sample(
            (uniform(rng, (3, 4)), uniform(rng, (3, 4), -0.5, 1.5), None),
            {"ignore_index": -7},
            "unnormalised targets, negative ignore_index",
        ),
        Sample((uniform(rng, (3, 4), -1e4, 1e4), probs(3, 4), None), {}, "probabilities, logits of +-1e4"),
    ]


cross_entropy = defop(
    "cross_entropy",
    family=FAMILY,
    inputs=("input", "target", "weight?"),
    forward=_cross_entropy,
    vjps=(_cross_entropy_vjp, _cross_entropy_target_vjp, NOT_DIFFERENTIABLE),
    saves=True,
    composite=_cross_entropy_composite,
    check=_check_cross_entropy,
    samples=lambda rng: _class_target_samples(rng, smoothing=True) + _probability_target_samples(rng),
    notes=case_law(
        _CASE_LAW,
        "cross_entropy",
        "Class indices or class probabilities (differentiable, as in torch); class weights are not "
        "differentiable, as in torch.",
    ),
    torch_ref=lambda torch, input, target, weight, **attrs: torch.nn.functional.cross_entropy(
        input, target, weight, **attrs
    ),
)

nll_loss = defop(
    "nll_loss",
    family=FAMILY,
    inputs=("input", "target", "weight?"),
    forward=_nll_loss,
    vjps=(_nll_loss_vjp, NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE),
    check=_check_nll_loss,
    samples=lambda rng: _class_target_samples(rng, smoothing=False),
    notes="Class weights are not differentiable, as in torch.",
    torch_ref=lambda torch, input, target, weight, **attrs: torch.nn.functional.nll_loss(
        input, target, weight, **attrs
    ),
)


# -- binary_cross_entropy ----------------------------------------------------------------------------------
_BCE_EPSILON = float(np.float32(1e-12))  # torch's floor on x (1 - x) in the input gradient (a C++ float)


@quiet  # log(0) = -inf before the clamp
def _binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """``torch.nn.functional.binary_cross_entropy`` on probabilities ``input``, each log clamped at -100."""
    loss = (target - 1) * np.maximum(np.log1p(-input), -100) - target * np.maximum(np.log(input), -100)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _weighted_bce_grad(g, grad, weight, reduction):
    if weight is not None:
        grad = grad * weight
    return _reduction_grad(g, reduction, grad.shape) * grad


def _bce_probability_input_vjp(g, ans, input, target, weight, reduction="mean"):
    return _weighted_bce_grad(g, (input - target) / np.maximum((1 - input) * input, _BCE_EPSILON), weight, reduction)


@quiet  # +-inf at input 0 and 1, as torch
def _bce_probability_target_vjp(g, ans, input, target, weight, reduction="mean"):
    return _weighted_bce_grad(g, -np.log(input / (1 - input)), weight, reduction)  # -logit(x), torch's


def _check_probability_range(op, argument, array):
    if array.size:
        low, high = np.min(array), np.max(array)
        require(
            bool(np.all((array >= 0) & (array <= 1))), op, argument, "values in [0, 1]", f"values in [{low}, {high}]"
        )


def _check_weight_fits(op, name, param, input):
    if param is not None:
        require_float(op, name, param)
        try:
            fits = np.broadcast_shapes(param.shape, input.shape) == input.shape
        except ValueError:
            fits = False
        require(fits, op, name, f"a shape that broadcasts to the input's {input.shape}", param.shape)


def _check_binary_cross_entropy(input, target, weight=None, reduction="mean"):
    op = "binary_cross_entropy"
    require_float(op, "input", input)
    require_float(op, "target", target)
    require(target.shape == input.shape, op, "target", f"the input's shape {input.shape}", target.shape)
    _check_probability_range(op, "input", input)
    _check_probability_range(op, "target", target)
    _check_weight_fits(op, "weight", weight, input)
    _check_reduction(op, reduction)


def _binary_cross_entropy_samples(rng):
    def probs(*shape, low=0.02, high=0.98):
        return uniform(rng, shape, low, high)

    hard = np.where(rng.integers(0, 2, size=(3, 4)) == 1, 0.999, 1e-3)  # exact 0 and 1: tests/test_ops_loss.py
    out = [Sample((probs(3, 4), probs(3, 4, low=0.0, high=1.0), None), {"reduction": r}, r) for r in _REDUCTIONS]
    out += [
        Sample(
            (probs(3, 4), probs(3, 4, low=0.0, high=1.0), uniform(rng, (4,), 0.1, 2.0)),
            {"reduction": r},
            f"{r}, weight broadcast (4,)",
        )
        for r in _REDUCTIONS
    ]
    out += [Sample((probs(0, 4), probs(0, 4), None), {"reduction": r}, f"{r}, empty") for r in _REDUCTIONS]
    return out + [
        Sample((probs(3, 4), hard, uniform(rng, (3, 1), 0.1, 2.0)), {}, "near-hard targets, weight (3, 1)"),
        Sample((_noncontiguous(probs(3, 4)), probs(3, 4), None), {"reduction": "sum"}, "non-contiguous"),
        Sample((probs(), probs(), None), {}, "0-d"),
        Sample(
            (np.array([1e-3, 0.999, 0.5, 2e-3]), np.array([0.999, 1e-3, 0.3, 1e-3]), None),
            {"reduction": "none"},
            "inputs near 0 and 1",
        ),
    ]


binary_cross_entropy = defop(
    "binary_cross_entropy",
    family=FAMILY,
    inputs=("input", "target", "weight?"),
    forward=_binary_cross_entropy,
    vjps=(_bce_probability_input_vjp, _bce_probability_target_vjp, NOT_DIFFERENTIABLE),
    check=_check_binary_cross_entropy,
    samples=_binary_cross_entropy_samples,
    notes=case_law(
        _CASE_LAW, "binary_cross_entropy", "Logs clamped at -100 as torch; weight is not differentiable, as in torch."
    ),
    torch_ref=lambda torch, input, target, weight, reduction="mean": torch.nn.functional.binary_cross_entropy(
        input, target, weight, reduction=reduction
    ),
)


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


def _bce_composite(input, target, weight=None, reduction="mean", pos_weight=None):
    """binary_cross_entropy_with_logits written with registered ops (softplus with no linear cut-off): what
    its second order differentiates."""
    from . import reduce  # at call time: the families register in ops/__init__'s order
    from .elementwise import softplus

    softplus_neg = softplus(-input, 1, math.inf)
    if pos_weight is not None:
        softplus_neg = softplus_neg * (1 + (pos_weight - 1) * target)
    loss = (1 - target) * input + softplus_neg
    if weight is not None:
        loss = loss * weight
    if reduction == "none":
        return loss
    return reduce.sum(loss) if reduction == "sum" else reduce.mean(loss)


def _check_bce_with_logits(input, target, weight=None, pos_weight=None, reduction="mean"):
    op = "binary_cross_entropy_with_logits"
    require_float(op, "input", input)
    require_float(op, "target", target)
    require(target.shape == input.shape, op, "target", f"the input's shape {input.shape}", target.shape)
    _check_weight_fits(op, "weight", weight, input)
    _check_weight_fits(op, "pos_weight", pos_weight, input)
    _check_reduction(op, reduction)


def _bce_samples(rng):
    def probs(*shape):
        return uniform(rng, shape, 0.0, 1.0)

    out = [Sample((uniform(rng, (3, 4)), probs(3, 4), None, None), {"reduction": r}, r) for r in _REDUCTIONS]
    out += [
        Sample(
            (uniform(rng, (3, 4)), probs(3, 4), uniform(rng, (3, 4), 0.1, 2.0), uniform(rng, (4,), 0.1, 3.0)),
            {"reduction": r},
            f"{r}, weight and pos_weight",
        )
        for r in _REDUCTIONS
    ]
    out += [
        Sample((uniform(rng, (0, 4)), probs(0, 4), None, uniform(rng, (4,), 0.1, 3.0)), {"reduction": r}, f"{r}, empty")
        for r in _REDUCTIONS
    ]
    out += [
        Sample((uniform(rng, (2, 3)), probs(2, 3), uniform(rng, (3,), 0.1, 2.0), None), {}, "broadcast weight"),
        Sample(
            (transposed(rng, (3, 4)), probs(3, 4), None, uniform(rng, (1, 4), 0.1, 3.0)),
            {"reduction": "sum"},
            "non-contiguous, pos_weight",
        ),
        Sample(
            (uniform(rng, (3, 4), -1e4, 1e4), probs(3, 4), None, uniform(rng, (4,), 0.1, 3.0)), {}, "logits of +-1e4"
        ),
    ]
    return out


binary_cross_entropy_with_logits = defop(
    "binary_cross_entropy_with_logits",
    family=FAMILY,
    inputs=("input", "target", "weight?", "pos_weight?"),
    forward=_bce_with_logits,
    vjps=(_bce_input_vjp, _bce_target_vjp, NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE),
    composite=_bce_composite,
    check=_check_bce_with_logits,
    samples=_bce_samples,
    notes=case_law(
        _CASE_LAW, "binary_cross_entropy_with_logits", "weight and pos_weight are not differentiable, as in torch."
    ),
    torch_ref=lambda torch, input, target, weight, pos_weight, reduction="mean": (
        torch.nn.functional.binary_cross_entropy_with_logits(
            input, target, weight, reduction=reduction, pos_weight=pos_weight
        )
    ),
)


# -- kl_div ------------------------------------------------------------------------------------------------
_KL_REDUCTIONS = ("none", "batchmean", "sum", "mean")


def _kl_denominator(input, loss, reduction):
    """What kl_div's reduction divides the sum by: every element ('mean'), input.shape[0] ('batchmean', none
    for a 0-d input), or nothing."""
    if reduction == "mean":
        return np.size(loss)
    if reduction == "batchmean" and input.ndim:
        return input.shape[0]
    return None


@quiet  # t log t of t < 0 is NaN, as torch's xlogy
def _kl_div(input, target, reduction="mean", log_target=False):
    """``torch.nn.functional.kl_div``: xlogy(t, t) - t * input, or exp(t) * (t - input) with ``log_target``."""
    if log_target:
        loss = np.exp(target) * (target - input)
    else:
        loss = np.where(target == 0, 0, target * np.log(target)) - target * input
    if reduction == "none":
        return loss
    total = np.sum(loss)
    denominator = _kl_denominator(input, loss, reduction)
    return total if denominator is None else total / denominator


def _kl_scale(g, input, target, reduction):
    """The upstream gradient per element of the (broadcast) pointwise loss."""
    shape = np.broadcast_shapes(np.shape(input), np.shape(target))
    if reduction == "none":
        return g
    size = math.prod(shape)
    if reduction == "mean" and size:  # torch's mean of nothing has a zero derivative in g: no 0/0 there
        g = g / size
    elif reduction == "batchmean" and input.ndim:  # torch divides in Python: by 0 for an empty batch, as here
        g = g / input.shape[0]
    return np.broadcast_to(g, shape)


@quiet
def _kl_input_vjp(g, ans, input, target, reduction="mean", log_target=False):
    weight = np.exp(target) if log_target else target
    return unbroadcast(-_kl_scale(g, input, target, reduction) * weight, input.shape)


@quiet
def _kl_target_vjp(g, ans, input, target, reduction="mean", log_target=False):
    if log_target:  # d/dt exp(t) (t - x) = exp(t) (t - x + 1)
        slope = np.exp(target) * (target - input + 1)
    else:  # log t + 1 - x; NaN at t = 0 as torch's (xlogy's derivative there is 0 / 0)
        zero = _constant(target == 0)
        slope = np.where(zero, np.nan, np.log(np.where(zero, 1, target)) + 1 - input)
    return unbroadcast(_kl_scale(g, input, target, reduction) * slope, target.shape)


def _check_kl_div(input, target, reduction="mean", log_target=False):
    op = "kl_div"
    require_float(op, "input", input)
    require_float(op, "target", target)
    _broadcast_shape(op, ("input", "target"), input, target)
    _check_reduction(op, reduction, _KL_REDUCTIONS)
    _check_bool(op, "log_target", log_target)


def _kl_div_samples(rng):
    def log_probs(*shape):
        x = uniform(rng, shape, -2.0, 2.0)
        return x - np.log(np.sum(np.exp(x), axis=-1, keepdims=True))

    def probs(*shape):
        return uniform(rng, shape, 0.05, 1.0)

    out = [Sample((log_probs(3, 4), probs(3, 4)), {"reduction": r}, r) for r in _KL_REDUCTIONS]
    out += [
        Sample(
            (log_probs(3, 4), uniform(rng, (3, 4), -3.0, 0.5)), {"reduction": r, "log_target": True}, f"{r}, log_target"
        )
        for r in _KL_REDUCTIONS
    ]
    out += [Sample((log_probs(0, 4), probs(0, 4)), {"reduction": r}, f"{r}, empty") for r in _KL_REDUCTIONS]
    return out + [
        Sample((log_probs(2, 3), probs(3)), {"reduction": "batchmean"}, "broadcast target (3,)"),
        Sample((log_probs(3), probs(2, 3)), {"reduction": "batchmean"}, "broadcast input (3,): batchmean / 3"),
        Sample((log_probs(2, 1, 3), probs(4, 1)), {"reduction": "sum"}, "(2, 1, 3) with (4, 1)"),
        Sample(
            (_noncontiguous(log_probs(3, 4)), _noncontiguous(probs(3, 4))), {"reduction": "batchmean"}, "non-contiguous"
        ),
        Sample((uniform(rng, (), -2.0, 0.0), probs()), {"reduction": "batchmean"}, "0-d: batchmean is the sum"),
        Sample((uniform(rng, (2, 0)), probs(2, 0)), {"reduction": "batchmean"}, "(2, 0): batchmean of nothing is 0"),
        Sample((uniform(rng, (2, 3), -5.0, 5.0), probs(2, 3)), {"reduction": "none"}, "unnormalised input"),
    ]


kl_div = defop(
    "kl_div",
    family=FAMILY,
    inputs=("input", "target"),
    forward=_kl_div,
    vjps=(_kl_input_vjp, _kl_target_vjp),
    check=_check_kl_div,
    samples=_kl_div_samples,
    notes=case_law(
        _CASE_LAW,
        "kl_div",
        "reduction 'batchmean' is the KL divergence; 'mean' divides by every element (no warning, unlike torch).",
    ),
    torch_ref=_quiet_torch(
        lambda torch, input, target, reduction="mean", log_target=False: torch.nn.functional.kl_div(
            input, target, reduction=reduction, log_target=log_target
        )
    ),
)


# -- mse_loss / l1_loss / smooth_l1_loss / huber_loss ------------------------------------------------------
# Pointwise losses of d = input - target (broadcast), each with its value and its slope dl/dd, written with
# numpy functions so the traced second order differentiates the slope.
def _squared(d, _):
    return d * d


def _squared_slope(d, _):
    return 2 * d


def _absolute(d, _):
    return np.abs(d)


def _absolute_slope(d, _):
    return np.sign(d)  # 0 at d = 0, as torch


def _smooth_l1(d, beta):
    if beta == 0:  # torch's smooth_l1_loss with beta=0 is l1_loss
        return np.abs(d)
    a = np.abs(d)
    return np.where(a < beta, 0.5 * d * d / beta, a - 0.5 * beta)


def _smooth_l1_slope(d, beta):
    if beta == 0:
        return np.sign(d)
    return np.where(np.abs(d) < beta, d / beta, np.sign(d))


def _huber(d, delta):
    a = np.abs(d)
    return np.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))


def _huber_slope(d, delta):
    return np.where(np.abs(d) < delta, d, delta * np.sign(d))


def _pointwise_forward(value, input, target, weight, reduction, param, weighted_mean):
    loss = value(input - target, param)
    if weight is not None:
        loss = loss * weight
    if reduction == "none":
        return loss
    total = np.sum(loss)
    if reduction == "sum":
        return total
    with np.errstate(invalid="ignore", divide="ignore"):  # a mean of nothing (or of zero weights) is NaN
        return total / (np.sum(weight) if weight is not None and weighted_mean else np.size(loss))


def _pointwise_scale(g, shape, weight, reduction, weighted_mean):
    """The upstream gradient per loss element; for a weighted mean, g / sum(weight)."""
    if weight is not None and weighted_mean and reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):  # sum(w) = 0 over nothing: 0/0 as torch's
            return np.broadcast_to(g / np.sum(weight), shape)
    return _reduction_grad(g, reduction, shape)


def _pointwise_diff_grad(g, input, target, weight, reduction, slope, param, weighted_mean):
    d = input - target
    grad = _pointwise_scale(g, d.shape, weight, reduction, weighted_mean) * slope(d, param)
    return grad if weight is None else grad * weight


def _pointwise_weight_grad(g, ans, input, target, weight, reduction, value, param, weighted_mean):
    loss = value(input - target, param)
    grad = unbroadcast(_pointwise_scale(g, loss.shape, weight, reduction, weighted_mean) * loss, weight.shape)
    if weighted_mean and reduction == "mean" and np.size(loss):  # mean = sum(w l) / sum(w): minus mean / sum(w)
        with np.errstate(invalid="ignore", divide="ignore"):
            grad = grad - g * ans / np.sum(weight)
    return grad


def _check_pointwise(name, input, target, weight, reduction):
    require_float(name, "input", input)
    require_float(name, "target", target)
    _broadcast_shape(name, ("input", "target"), input, target)
    if weight is not None:
        require_float(name, "weight", weight)
        require(
            weight.shape == input.shape, name, "weight", f"the input's shape {input.shape} (as torch)", weight.shape
        )
    _check_reduction(name, reduction)


def _mse_loss(input, target, reduction="mean", weight=None):
    """``torch.nn.functional.mse_loss``: (input - target)^2, input and target broadcast."""
    return _pointwise_forward(_squared, input, target, weight, reduction, None, True)


def _l1_loss(input, target, reduction="mean", weight=None):
    """``torch.nn.functional.l1_loss``: |input - target|, input and target broadcast."""
    return _pointwise_forward(_absolute, input, target, weight, reduction, None, True)


def _smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    """``torch.nn.functional.smooth_l1_loss``: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta."""
    return _pointwise_forward(_smooth_l1, input, target, None, reduction, float(beta), True)


def _huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``torch.nn.functional.huber_loss``: 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    return _pointwise_forward(_huber, input, target, weight, reduction, float(delta), False)


# the checks take the tensors first, as the registry calls them
def _check_mse_loss(input, target, weight=None, reduction="mean"):
    _check_pointwise("mse_loss", input, target, weight, reduction)


def _check_l1_loss(input, target, weight=None, reduction="mean"):
    _check_pointwise("l1_loss", input, target, weight, reduction)


def _check_smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    _check_pointwise("smooth_l1_loss", input, target, None, reduction)
    beta = real("smooth_l1_loss", "beta", beta)
    require(beta >= 0, "smooth_l1_loss", "beta", "a non-negative number (as torch)", beta)


def _check_huber_loss(input, target, weight=None, reduction="mean", delta=1.0):
    _check_pointwise("huber_loss", input, target, weight, reduction)
    delta = real("huber_loss", "delta", delta)
    require(delta > 0, "huber_loss", "delta", "a positive number (as torch)", delta)


def _pointwise_loss(name, forward, check, value, slope, *, param=None, weighted_mean=True, samples=None, notes=""):
    """Declare one pointwise loss: its rules from the loss's value and slope; ``param`` names its attribute
    (beta, delta) if any; a ``weight`` parameter of the forward is an optional differentiable tensor."""
    weighted = "weight" in inspect.signature(forward).parameters
    default = inspect.signature(forward).parameters[param].default if param else None

    def attributes(attrs):
        return attrs.get("reduction", "mean"), float(attrs.get(param, default)) if param else None

    @quiet  # zero weights: g / sum(w) = inf, times 0, as torch
    def input_vjp(g, ans, input, target, weight=None, **attrs):
        reduction, p = attributes(attrs)
        grad = _pointwise_diff_grad(g, input, target, weight, reduction, slope, p, weighted_mean)
        return unbroadcast(grad, input.shape)

    @quiet
    def target_vjp(g, ans, input, target, weight=None, **attrs):
        reduction, p = attributes(attrs)
        grad = _pointwise_diff_grad(g, input, target, weight, reduction, slope, p, weighted_mean)
        return unbroadcast(-grad, target.shape)

    @quiet
    def weight_vjp(g, ans, input, target, weight, **attrs):
        reduction, p = attributes(attrs)
        return _pointwise_weight_grad(g, ans, input, target, weight, reduction, value, p, weighted_mean)

    def torch_ref(torch, input, target, weight=None, **attrs):
        fn = getattr(torch.nn.functional, name)
        return fn(input, target, **attrs) if weight is None else fn(input, target, weight=weight, **attrs)

    return defop(
        name,
        family=FAMILY,
        inputs=("input", "target") + (("weight?",) if weighted else ()),
        forward=forward,
        vjps=(input_vjp, target_vjp) + ((weight_vjp,) if weighted else ()),
        check=check,
        samples=samples,
        torch_ref=_quiet_torch(torch_ref),
        notes=notes,
    )


def _pointwise_samples(kinks=(0.0,), weighted=True, attrs=({},)):
    """Samples for a pointwise loss: every difference input - target at least KINK_GAP from +-each kink."""

    def pair(rng, shape_a, shape_b, low=-2.0, high=2.0):
        return _redraw(
            rng,
            lambda r: (uniform(r, shape_a, low, high), uniform(r, shape_b, low, high)),
            lambda a, b: _away(a - b, kinks),
        )

    def generate(rng):
        def w(*shape):
            return uniform(rng, shape, 0.1, 2.0) if weighted else None

        def sample(inputs, extra, label):
            inputs = inputs if weighted else inputs[:2]
            return Sample(inputs, extra, label)

        out = []
        for a in attrs:
            tag = "".join(f", {k}={v}" for k, v in a.items())
            out += [
                sample(pair(rng, (3, 4), (3, 4)) + (None,), {"reduction": r, **a}, f"{r}{tag}") for r in _REDUCTIONS
            ]
        out += [sample(pair(rng, (0, 3), (0, 3)) + (None,), {"reduction": r}, f"{r}, empty") for r in _REDUCTIONS]
        a, b = pair(rng, (2, 5), (2, 5))
        out += [
            sample((_noncontiguous(a), b, None), {}, "non-contiguous"),
            sample(pair(rng, (2, 3), (3,)) + (None,), {"reduction": "sum"}, "broadcast target (3,)"),
            sample(pair(rng, (3, 1), (1, 4)) + (None,), {"reduction": "none"}, "(3, 1) with (1, 4)"),
            sample(pair(rng, (), ()) + (None,), {}, "0-d"),
            sample(pair(rng, (3, 4), (3, 4), -1e3, 1e3) + (None,), {"reduction": "sum"}, "large differences"),
        ]
        if weighted:
            out += [
                sample(pair(rng, (3, 4), (3, 4)) + (w(3, 4),), {"reduction": r}, f"{r}, weight") for r in _REDUCTIONS
            ]
            out += [
                sample(pair(rng, (2, 3), (3,)) + (w(2, 3),), {}, "weight, broadcast target"),
                sample(pair(rng, (3,), (2, 3)) + (w(3),), {"reduction": "mean"}, "weight, target larger than input"),
                sample(pair(rng, (0, 3), (0, 3)) + (w(0, 3),), {}, "weight, empty: mean is NaN"),
                sample((_noncontiguous(a), b, _noncontiguous(w(2, 5))), {"reduction": "sum"}, "weight, non-contiguous"),
            ]
        return out

    return generate


mse_loss = _pointwise_loss(
    "mse_loss",
    _mse_loss,
    _check_mse_loss,
    _squared,
    _squared_slope,
    samples=_pointwise_samples(kinks=()),
    notes="weight (torch 2.13) is differentiable; 'mean' with weight is sum(w l) / sum(w).",
)
l1_loss = _pointwise_loss(
    "l1_loss",
    _l1_loss,
    _check_l1_loss,
    _absolute,
    _absolute_slope,
    samples=_pointwise_samples(),
    notes=case_law(
        _CASE_LAW,
        "l1_loss",
        "Gradient 0 where input == target (sign(0)), as torch; 'mean' with weight is sum(w l) / sum(w).",
    ),
)
smooth_l1_loss = _pointwise_loss(
    "smooth_l1_loss",
    _smooth_l1_loss,
    _check_smooth_l1_loss,
    _smooth_l1,
    _smooth_l1_slope,
    param="beta",
    samples=_pointwise_samples(
        kinks=(0.0, 0.5, 1.0, 2.5), weighted=False, attrs=({}, {"beta": 0.5}, {"beta": 0.0}, {"beta": 2.5})
    ),
    notes=case_law(_CASE_LAW, "smooth_l1_loss", "beta=0 is l1_loss (as torch); quadratic where |d| < beta."),
)
huber_loss = _pointwise_loss(
    "huber_loss",
    _huber_loss,
    _check_huber_loss,
    _huber,
    _huber_slope,
    param="delta",
    weighted_mean=False,
    samples=_pointwise_samples(kinks=(0.0, 0.5, 1.0, 2.5), attrs=({}, {"delta": 0.5}, {"delta": 2.5})),
    notes=case_law(
        _CASE_LAW,
        "huber_loss",
        "Quadratic where |d| < delta; 'mean' with weight divides by the element count (torch 2.13).",
    ),
)


# -- distances: vector norms with torch's subgradients -----------------------------------------------------
DISTANCE = "distance"


def _power_of_two_scale(y, axis):
    """A power of two near max |y| along ``axis`` (1 where that is 0, inf or NaN), as a constant: dividing by
    it is exact and keeps the p-th powers from overflowing or underflowing. ||y|| = s ||y / s|| for every s,
    so the rules may hold it constant."""
    m = np.max(np.abs(_constant(y)), axis=axis, keepdims=True, initial=0)
    return np.where((m > 0) & (m < np.inf), np.ldexp(np.ones_like(m), np.frexp(m)[1] - 1), 1).astype(m.dtype)


@quiet  # 0 ** negative p = inf, as torch
def _vector_norm(y, p, axis):
    """||y||_p along ``axis`` (kept), for any p; written with numpy functions so a traced rule records it."""
    if p == 0:
        return np.sum(_constant(y) != 0, axis=axis, keepdims=True).astype(y.dtype)
    if p == math.inf:
        return np.max(np.abs(y), axis=axis, keepdims=True)
    if p == -math.inf:
        return np.min(np.abs(y), axis=axis, keepdims=True)
    if p == 1:
        return np.sum(np.abs(y), axis=axis, keepdims=True)
    s = _power_of_two_scale(y, axis)
    if p == 2:
        return np.sqrt(np.sum(np.square(y / s), axis=axis, keepdims=True)) * s
    return np.power(np.sum(np.power(np.abs(y / s), p), axis=axis, keepdims=True), 1.0 / p) * s


@quiet
def _norm_slope(y, n, p, axis):
    """d||y||_p / dy as torch's vector-norm backward: 0 where the norm is 0 (or, p < 1, where the entry is 0);
    for p = +-inf the entries attaining it (or NaN) share evenly; 0 for p = 0."""
    if p == 0:
        return np.zeros(np.shape(y), _constant(y).dtype)
    if p == 1:
        return np.sign(y)
    if math.isinf(p):
        y_values = _constant(y)
        hit = (np.abs(y_values) == _constant(n)) | np.isnan(y_values)
        count = np.sum(hit, axis=axis, keepdims=True).astype(y_values.dtype)
        return np.where(hit, np.sign(y) / np.where(count == 0, 1, count), 0)
    zero_norm = _constant(n) == 0
    safe_n = np.where(zero_norm, 1, n)
    if p == 2:
        return np.where(zero_norm, 0, y / safe_n)
    # sign(y) (|y| / n)^(p - 1): torch's sign(y) |y|^(p-1) / n^(p-1), without overflow
    if p < 1:
        zero = _constant(y) == 0
        ratio = np.abs(np.where(zero, 1, y)) / safe_n
        return np.where(zero | zero_norm, 0, np.sign(y) * np.power(ratio, p - 1))
    return np.where(zero_norm, 0, np.sign(y) * np.power(np.abs(y) / safe_n, p - 1))


def _as_vectors(y):
    """(y with at least one dim, whether it was 0-d): a 0-d difference is a vector of one entry."""
    scalar = np.ndim(y) == 0
    return (np.reshape(y, (1,)) if scalar else y), scalar


def _pairwise(x1, x2, p, eps, keepdim=False):
    """pairwise_distance's value: ||x1 - x2 + eps||_p over the last dim of the broadcast shape."""
    y, scalar = _as_vectors(x1 - x2 + eps)
    n = _vector_norm(y, p, -1)
    return np.reshape(n, ()) if scalar else n if keepdim else np.squeeze(n, -1)


def _pairwise_grad(g, x1, x2, p, eps, keepdim=False):
    """The gradient reaching y = x1 - x2 + eps (the broadcast shape) from ``g`` on pairwise_distance."""
    y, scalar = _as_vectors(x1 - x2 + eps)
    if p == 0:
        return np.zeros(np.shape(x1 - x2), _constant(y).dtype)
    n = _vector_norm(y, p, -1)
    g = np.reshape(g, (1,)) if scalar else g if keepdim else np.expand_dims(g, -1)
    grad = g * _norm_slope(y, n, p, -1)
    return np.reshape(grad, ()) if scalar else grad


def _pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``torch.nn.functional.pairwise_distance``: ||x1 - x2 + eps||_p over the last dim (inputs broadcast)."""
    return _pairwise(x1, x2, float(p), float(eps), keepdim)


def _check_norm_order(op, p, argument="p"):
    p = real(op, argument, p)
    require(not math.isnan(p), op, argument, "a number or +-inf", p)
    return p


def _check_pairwise_shapes(op, names, x1, x2, p):
    shape = _broadcast_shape(op, names, x1, x2)
    if shape and shape[-1] == 0:
        require(
            p >= 0 and p != math.inf,
            op,
            "p",
            f"a norm with an identity over the empty last dim of {shape} (0 <= p < inf, as torch)",
            p,
        )


def _check_pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    op = "pairwise_distance"
    require_float(op, "x1", x1)
    require_float(op, "x2", x2)
    p = _check_norm_order(op, p)
    real(op, "eps", eps)
    _check_bool(op, "keepdim", keepdim)
    _check_pairwise_shapes(op, ("x1", "x2"), x1, x2, p)


def _pairwise_samples(rng):
    def pair(shape_a, shape_b, p=2.0, eps=1e-6, low=-2.0, high=2.0):
        def ok(a, b):
            y = a - b + eps
            if high > 1e-2 and not _away(y):  # |y|^p: a kink (or a steep slope) at 0
                return False
            if math.isinf(p) and y.size:  # no ties for the max (min) entry
                s = np.sort(np.abs(np.reshape(y, (-1, y.shape[-1] if y.ndim else 1))), axis=-1)
                return s.shape[-1] < 2 or bool(np.all(np.abs(np.diff(s[:, -2:] if p > 0 else s[:, :2])) >= 1e-2))
            return True

        return _redraw(rng, lambda r: (uniform(r, shape_a, low, high), uniform(r, shape_b, low, high)), ok)

    out = [Sample(pair((3, 4), (3, 4), p), {"p": p}, f"p={p}") for p in (2.0, 1.0, 3.0, 1.5, 0.5, -1.5, 0.0)]
    out += [Sample(pair((3, 4), (3, 4), p), {"p": p}, f"p={p}") for p in (math.inf, -math.inf)]
    a, b = pair((4, 3), (4, 3))
    return out + [
        Sample(pair((2, 3, 4), (2, 3, 4)), {"keepdim": True}, "3-D, keepdim"),
        Sample(pair((4,), (3, 4)), {}, "broadcast (4,) with (3, 4)"),
        Sample(pair((3, 1), (1, 4), 1.0), {"p": 1.0}, "(3, 1) with (1, 4), p=1"),
        Sample(pair((5,), (5,)), {}, "vectors: a 0-d distance"),
        Sample(pair((5,), (5,)), {"keepdim": True}, "vectors, keepdim"),
        Sample(pair((), ()), {"eps": 0.25}, "0-d, eps=0.25"),
        Sample((_noncontiguous(a), b), {"p": 2.0}, "non-contiguous"),
        Sample(pair((0, 3), (0, 3)), {}, "zero rows"),
        Sample(pair((2, 0), (2, 0)), {"p": 2.0}, "empty vectors: distance 0"),
        Sample(pair((3, 4), (3, 4), 2.0, 0.0, -1e-3, 1e-3), {"eps": 0.0}, "small entries, eps=0"),
        Sample(pair((2, 3), (2, 3), 3.0, 1e-6, -1e3, 1e3), {"p": 3.0}, "large entries, p=3"),
    ]


pairwise_distance = defop(
    "pairwise_distance",
    family=DISTANCE,
    inputs=("x1", "x2"),
    forward=_pairwise_distance,
    vjps=(
        lambda g, ans, x1, x2, p=2.0, eps=1e-6, keepdim=False: unbroadcast(
            _pairwise_grad(g, x1, x2, float(p), float(eps), keepdim), x1.shape
        ),
        lambda g, ans, x1, x2, p=2.0, eps=1e-6, keepdim=False: unbroadcast(
            -_pairwise_grad(g, x1, x2, float(p), float(eps), keepdim), x2.shape
        ),
    ),
    check=_check_pairwise_distance,
    samples=_pairwise_samples,
    notes=case_law(_CASE_LAW, "pairwise_distance", "Any p (inf, -inf, 0, negative); torch's vector-norm subgradients."),
    torch_ref=lambda torch, x1, x2, **attrs: torch.nn.functional.pairwise_distance(x1, x2, **attrs),
)


# -- cosine_similarity -------------------------------------------------------------------------------------
def _cosine_axis(shape, dim):
    return int(dim) % max(len(shape), 1)


def _clamped(n, eps):
    """max(n, eps) as torch 2.13 computes it, in place under no_grad: the value is clamped, the derivative
    stays the norm's."""
    if isinstance(n, Tensor):
        return n + (np.maximum(n, eps) - n).detach()
    return np.maximum(n, eps)


def _cosine_parts(x1, x2, dim, eps):
    shape = np.broadcast_shapes(np.shape(x1), np.shape(x2))
    a, b = np.broadcast_to(x1, shape), np.broadcast_to(x2, shape)
    if not shape:  # 0-d: vectors of one entry
        a, b = np.reshape(a, (1,)), np.reshape(b, (1,))
    axis = _cosine_axis(shape, dim)
    n1, n2 = _vector_norm(a, 2, axis), _vector_norm(b, 2, axis)
    c1, c2 = _clamped(n1, eps), _clamped(n2, eps)
    return shape, axis, a, b, n1, n2, c1, c2


def _cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``torch.nn.functional.cosine_similarity`` (torch 2.13): sum((x1 / max(||x1||, eps)) * (x2 / max(||x2||,
    eps))) over ``dim`` of the broadcast inputs; |result| <= 1 and no product of norms overflows."""
    shape, axis, a, b, _, _, c1, c2 = _cosine_parts(x1, x2, dim, float(eps))
    return np.reshape(np.sum((a / c1) * (b / c2), axis=axis), shape[:axis] + shape[axis + 1 :])


def _cosine_grad(g, x1, x2, dim, eps, first: bool):
    """d/dx1 (``first``) or d/dx2 of cosine_similarity: (v - out x1 / ||x1||) / max(||x1||, eps), v = x2 /
    max(||x2||, eps) (torch's: the clamp is invisible to the gradient; 0 / 0 is 0 for a zero vector)."""
    shape, axis, a, b, n1, n2, c1, c2 = _cosine_parts(x1, x2, dim, float(eps))
    if not first:
        a, b, n1, c1, c2 = b, a, n2, c2, c1
    v = b / c2
    out = np.sum((a / c1) * v, axis=axis, keepdims=True)
    unit = a / np.where(_constant(n1) == 0, 1, n1)
    g = np.reshape(g, (1,)) if not shape else np.expand_dims(g, axis)
    grad = g * (v - out * unit) / c1
    return unbroadcast(np.reshape(grad, ()) if not shape else grad, np.shape(x1 if first else x2))


def _check_cosine_similarity(x1, x2, dim=1, eps=1e-8):
    op = "cosine_similarity"
    require_float(op, "x1", x1)
    require_float(op, "x2", x2)
    shape = _broadcast_shape(op, ("x1", "x2"), x1, x2)
    normalize_dim(op, dim, len(shape))
    eps = real(op, "eps", eps)
    require(eps >= 0, op, "eps", "a non-negative number (as torch)", eps)


def _cosine_samples(rng):
    def x(*shape):
        return uniform(rng, shape)

    return [
        Sample((x(3, 4), x(3, 4)), {}, "dim=1 (default)"),
        Sample((x(3, 4), x(3, 4)), {"dim": 0}, "dim=0"),
        Sample((x(2, 1, 3), x(4, 3)), {"dim": -1}, "broadcast (2, 1, 3) with (4, 3), dim=-1"),
        Sample((x(3, 1), x(1, 4)), {"dim": 0}, "(3, 1) with (1, 4), dim=0"),
        Sample((x(2, 3, 4), x(2, 3, 4)), {"dim": 1, "eps": 1e-3}, "3-D, eps=1e-3"),
        Sample((x(5), x(5)), {"dim": 0}, "vectors"),
        Sample((x(), x()), {"dim": 0}, "0-d"),
        Sample((_noncontiguous(x(4, 3)), x(4, 3)), {}, "non-contiguous"),
        Sample((x(0, 3), x(0, 3)), {}, "zero rows"),
        Sample((x(2, 0), x(2, 0)), {}, "empty vectors: 0 (both norms clamped)"),
        Sample((uniform(rng, (3, 4), -1e-3, 1e-3), x(3, 4)), {}, "small vectors, above eps"),
        Sample((uniform(rng, (3, 4), -1e3, 1e3), x(3, 4)), {}, "large vectors"),
    ]


cosine_similarity = defop(
    "cosine_similarity",
    family=DISTANCE,
    inputs=("x1", "x2"),
    forward=_cosine_similarity,
    vjps=(
        lambda g, ans, x1, x2, dim=1, eps=1e-8: _cosine_grad(g, x1, x2, dim, eps, True),
        lambda g, ans, x1, x2, dim=1, eps=1e-8: _cosine_grad(g, x1, x2, dim, eps, False),
    ),
    check=_check_cosine_similarity,
    samples=_cosine_samples,
    notes=case_law(
        _CASE_LAW,
        "cosine_similarity",
        "Norms clamped at eps as torch 2.13 (the clamp does not enter the gradient, as torch's).",
    ),
    torch_ref=lambda torch, x1, x2, **attrs: torch.nn.functional.cosine_similarity(x1, x2, **attrs),
)


# -- margin_ranking_loss -----------------------------------------------------------------------------------
def _as_input_dtype(target, input):
    """An integer target in the input's floating dtype (torch promotes it the same way)."""
    if target.dtype.kind in "iub":
        return _constant(target).astype(input.dtype)
    return target


def _margin_ranking_loss(input1, input2, target, margin=0, reduction="mean"):
    """``torch.nn.functional.margin_ranking_loss``: max(0, -target (input1 - input2) + margin), broadcast."""
    target = _as_input_dtype(target, input1)
    return _reduce(np.maximum(-target * (input1 - input2) + float(margin), 0), reduction)


def _margin_ranking_scale(g, input1, input2, target, margin, reduction):
    """(target as floats, upstream gradient per element where the hinge passes it, 0 elsewhere)."""
    target = _as_input_dtype(target, input1)
    z = -target * (input1 - input2) + float(margin)
    active = _constant(z) >= 0  # torch's clamp_min(z, 0): the gradient passes at z == 0
    return target, np.where(active, _reduction_grad(g, reduction, np.shape(z)), 0)


def _margin_ranking_vjp(which):
    def rule(g, ans, input1, input2, target, margin=0, reduction="mean"):
        t, scale = _margin_ranking_scale(g, input1, input2, target, margin, reduction)
        if which == 0:
            return unbroadcast(-scale * t, input1.shape)
        if which == 1:
            return unbroadcast(scale * t, input2.shape)
        return unbroadcast(-scale * (input1 - input2), target.shape)

    return rule


def _check_margin_ranking_loss(input1, input2, target, margin=0, reduction="mean"):
    op = "margin_ranking_loss"
    require_float(op, "input1", input1)
    require_float(op, "input2", input2)
    require(target.dtype.kind in "fiu", op, "target", "a real tensor (of 1 and -1)", f"dtype {target.dtype}")
    for name, array in (("input2", input2), ("target", target)):
        require(
            array.ndim == input1.ndim,
            op,
            name,
            f"as many dims as input1 ({input1.ndim}, as torch)",
            f"shape {array.shape}",
        )
    _broadcast_shape(op, ("input1", "input2", "target"), input1, input2, target)
    real(op, "margin", margin)
    _check_reduction(op, reduction)


def _margin_ranking_samples(rng):
    def draw(shape1, shape2, shape_t, margin=0.0, signs=True):
        def make(r):
            t = r.choice([-1.0, 1.0], size=shape_t) if signs else uniform(r, shape_t, -1.5, 1.5)
            return uniform(r, shape1), uniform(r, shape2), t

        return _redraw(rng, make, lambda a, b, t: _away(-t * (a - b) + margin))

    out = [Sample(draw((6,), (6,), (6,)), {"reduction": r}, r) for r in _REDUCTIONS]
    out += [Sample(draw((0,), (0,), (0,)), {"reduction": r}, f"{r}, empty") for r in _REDUCTIONS]
    a, b, t = draw((4, 3), (4, 3), (4, 3), 0.5)
    a1, b1, t1 = draw((5,), (5,), (5,), 0.5)
    return out + [
        Sample(draw((4, 3), (4, 3), (4, 3), 0.5), {"margin": 0.5}, "margin=0.5"),
        Sample(draw((3, 1), (1, 4), (3, 4), 0.3), {"margin": 0.3, "reduction": "none"}, "broadcast, same ndim"),
        Sample(draw((5,), (5,), (5,), 0.2, signs=False), {"margin": 0.2, "reduction": "sum"}, "real-valued target"),
        Sample((a1, b1, t1.astype(np.int64)), {"margin": 0.5}, "integer target"),
        Sample(draw((), (), (), 1.0), {"margin": 1.0}, "0-d"),
        Sample((_noncontiguous(a), b, _noncontiguous(t)), {"margin": 0.5}, "non-contiguous"),
        Sample(draw((5,), (5,), (5,), -0.5), {"margin": -0.5}, "negative margin"),
    ]


margin_ranking_loss = defop(
    "margin_ranking_loss",
    family=FAMILY,
    inputs=("input1", "input2", "target"),
    forward=_margin_ranking_loss,
    vjps=(_margin_ranking_vjp(0), _margin_ranking_vjp(1), _margin_ranking_vjp(2)),
    check=_check_margin_ranking_loss,
    samples=_margin_ranking_samples,
    notes=case_law(
        _CASE_LAW,
        "margin_ranking_loss",
        "The hinge passes the gradient at 0 (torch's clamp_min); a float target is differentiable, as in torch.",
    ),
    torch_ref=lambda torch, input1, input2, target, **attrs: torch.nn.functional.margin_ranking_loss(
        input1, input2, target, **attrs
    ),
)


# -- triplet_margin_loss -----------------------------------------------------------------------------------
def _triplet_parts(anchor, positive, negative, margin, p, eps, swap):
    """(d(a, p), d(a, n), d(p, n) or None, weight of d(a, n) in the negative distance, z = margin + d_pos - d_neg)."""
    d_pos = _pairwise(anchor, positive, p, eps)
    d_an = _pairwise(anchor, negative, p, eps)
    if not swap:
        return d_pos, d_an, None, None, margin + d_pos - d_an
    d_pn = _pairwise(positive, negative, p, eps)
    an, pn = _constant(d_an), _constant(d_pn)
    w_an = (an < pn) + 0.5 * (an == pn)  # torch's minimum: a tie splits the gradient evenly
    return d_pos, d_an, d_pn, w_an.astype(an.dtype), margin + d_pos - np.minimum(d_an, d_pn)


def _triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, reduction="mean"):
    """``torch.nn.functional.triplet_margin_loss``: max(margin + d(a, p) - d(a, n), 0) with the pairwise
    distance d; with ``swap``, d(a, n) is min(d(a, n), d(p, n))."""
    *_, z = _triplet_parts(anchor, positive, negative, float(margin), float(p), float(eps), swap)
    return _reduce(np.maximum(z, 0), reduction)


def _triplet_vjp(g, ans, anchor, positive, negative, *, needs, margin=1.0, p=2, eps=1e-6, swap=False, reduction="mean"):
    p, eps = float(p), float(eps)
    d_pos, d_an, d_pn, w_an, z = _triplet_parts(anchor, positive, negative, float(margin), p, eps, swap)
    scale = np.where(_constant(z) >= 0, _reduction_grad(g, reduction, np.shape(z)), 0)  # hinge passes at 0
    g_pos = _pairwise_grad(unbroadcast(scale, np.shape(d_pos)), anchor, positive, p, eps)
    g_an = _pairwise_grad(
        unbroadcast(scale if w_an is None else scale * w_an, np.shape(d_an)), anchor, negative, p, eps
    )
    grads = [
        unbroadcast(g_pos, anchor.shape) - unbroadcast(g_an, anchor.shape),
        -unbroadcast(g_pos, positive.shape),
        unbroadcast(g_an, negative.shape),
    ]
    if swap:
        g_pn = _pairwise_grad(unbroadcast(scale * (1 - w_an), np.shape(d_pn)), positive, negative, p, eps)
        grads[1] = grads[1] - unbroadcast(g_pn, positive.shape)
        grads[2] = grads[2] + unbroadcast(g_pn, negative.shape)
    return tuple(grad if need else None for grad, need in zip(grads, needs))


def _check_triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, reduction="mean"):
    op = "triplet_margin_loss"
    for name, array in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        require_float(op, name, array)
    for name, array in (("positive", positive), ("negative", negative)):
        require(
            array.ndim == anchor.ndim,
            op,
            name,
            f"as many dims as anchor ({anchor.ndim}, as torch)",
            f"shape {array.shape}",
        )
    margin = real(op, "margin", margin)
    require(margin > 0, op, "margin", "a positive number (as torch)", margin)
    p = _check_norm_order(op, p)
    real(op, "eps", eps)
    _check_bool(op, "swap", swap)
    _check_reduction(op, reduction)
    _check_pairwise_shapes(op, ("anchor", "positive"), anchor, positive, p)
    _check_pairwise_shapes(op, ("anchor", "negative"), anchor, negative, p)
    if swap:
        _check_pairwise_shapes(op, ("positive", "negative"), positive, negative, p)
    distances = [np.broadcast_shapes(anchor.shape, other.shape)[:-1] for other in (positive, negative)]
    try:
        np.broadcast_shapes(*distances)
    except ValueError:
        raise ValueError(
            f"{op}: argument 'negative' expected distances that broadcast with the positive "
            f"ones {distances[0]}, got {distances[1]}"
        ) from None


def _triplet_samples(rng):
    def draw(shape_a, shape_p, shape_n, margin=1.0, p=2.0, swap=False, eps=1e-6):
        def ok(a, pos, neg):
            d_pos, d_an, d_pn, _, z = _triplet_parts(a, pos, neg, margin, p, eps, swap)
            if not _away(z) or (swap and not _away(d_an - d_pn)):
                return False
            if p == 1.0:
                return all(_away(x - y + eps) for x, y in ((a, pos), (a, neg), (pos, neg)))
            return True

        return _redraw(rng, lambda r: (uniform(r, shape_a), uniform(r, shape_p), uniform(r, shape_n)), ok)

    out = [Sample(draw((5, 4), (5, 4), (5, 4)), {"reduction": r}, r) for r in _REDUCTIONS]
    out += [Sample(draw((0, 3), (0, 3), (0, 3)), {"reduction": r}, f"{r}, empty") for r in _REDUCTIONS]
    a, pos, neg = draw((4, 3), (4, 3), (4, 3), 0.5)
    return out + [
        Sample(draw((5, 4), (5, 4), (5, 4), swap=True), {"swap": True}, "swap"),
        Sample(draw((5, 4), (5, 4), (5, 4), 0.5, 1.0), {"margin": 0.5, "p": 1.0, "reduction": "sum"}, "p=1"),
        Sample(draw((5, 4), (5, 4), (5, 4), 2.0, 3.0, True), {"margin": 2.0, "p": 3.0, "swap": True}, "p=3, swap"),
        Sample(draw((5, 4), (1, 4), (5, 1)), {"reduction": "none"}, "broadcast (5, 4), (1, 4), (5, 1)"),
        Sample(draw((2, 3, 4), (2, 3, 4), (2, 3, 4), 0.7), {"margin": 0.7, "reduction": "none"}, "3-D"),
        Sample(draw((4,), (4,), (4,), 2.0), {"margin": 2.0}, "1-D: one triplet"),
        Sample((_noncontiguous(a), pos, _noncontiguous(neg)), {"margin": 0.5}, "non-contiguous"),
    ]


triplet_margin_loss = defop(
    "triplet_margin_loss",
    family=FAMILY,
    inputs=("anchor", "positive", "negative"),
    forward=_triplet_margin_loss,
    joint_vjp=_triplet_vjp,
    check=_check_triplet_margin_loss,
    samples=_triplet_samples,
    notes=case_law(
        _CASE_LAW,
        "triplet_margin_loss",
        "The hinge passes the gradient at 0; swap ties split evenly (torch's minimum).",
    ),
    torch_ref=lambda torch, anchor, positive, negative, **attrs: torch.nn.functional.triplet_margin_loss(
        anchor, positive, negative, **attrs
    ),
)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_cross_entropy(g, rec, input, target, weight=None):
    """Class-index targets to ONNX's SoftmaxCrossEntropyLoss (classes on axis 1, ignore_index, class weights, a
    weighted mean as torch's)."""
    a = rec.attributes
    if rec.inputs[1].dtype.kind == "f" or a.get("label_smoothing", 0.0):
        raise NotExportable("class-probability targets and label smoothing have no lowering")
    if len(rec.inputs[0].shape) < 2 or 0 in rec.inputs[0].shape:
        raise NotExportable("an unbatched (C,) or empty input has no lowering")
    target = g.op("Cast", target, to=7)  # 7: int64
    return g.op(
        "SoftmaxCrossEntropyLoss",
        input,
        target,
        weight,
        ignore_index=int(a.get("ignore_index", -100)),
        reduction=a.get("reduction", "mean"),
    )


lowering(cross_entropy, _onnx_cross_entropy)
