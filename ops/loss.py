"""Losses and distances of ``torch.nn.functional``, with PyTorch 2.13's names, argument order, defaults and
semantics (the deprecated ``size_average``/``reduce`` arguments are left out):
- classification: cross_entropy (class indices, or class probabilities of the input's shape), nll_loss,
  binary_cross_entropy, binary_cross_entropy_with_logits, kl_div;
- regression: mse_loss, l1_loss, smooth_l1_loss, huber_loss;
- ranking: margin_ranking_loss, triplet_margin_loss;
- margins: soft_margin_loss, multilabel_soft_margin_loss, multi_margin_loss, multilabel_margin_loss,
  hinge_embedding_loss, cosine_embedding_loss;
- likelihoods: poisson_nll_loss, gaussian_nll_loss, ctc_loss;
- distances (family "distance"): cosine_similarity, pairwise_distance.
``reduction`` is 'none', 'mean' or 'sum'; where an op's 'mean' divides by something else than the number of loss
elements, and how CTC is computed, are the ops' notes (``_CASE_LAW``, shown in docs/coverage.md).
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
    "soft_margin_loss",
    "multilabel_soft_margin_loss",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "hinge_embedding_loss",
    "cosine_embedding_loss",
    "poisson_nll_loss",
    "gaussian_nll_loss",
    "ctc_loss",
]

import dataclasses
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
    owned_like,
)
from ._notes import case_law
from ._numerics import constant_values, quiet
from ._onnx import NotExportable, cast_to, clip, extremum, log1p_graph, pnorm, scalar, tensor_type
from ._samples import KINK_GAP, away_from, transposed, uniform
from ._validation import (
    broadcast_or_fail,
    functional,
    integer,
    normalize_dim,
    real,
    require,
    require_bool,
    require_float,
    require_indices,
    require_integer,
    user_stacklevel,
)

_DISTANCES = ("cosine_similarity", "pairwise_distance")
_LOSSES = tuple(name for name in __all__ if name not in _DISTANCES)

# torch's case law, op by op: each entry joins the notes= of the ops it names (shown in docs/coverage.md)
_CASE_LAW = (
    (
        _LOSSES,
        "Reductions: ``reduction`` is 'none', 'mean' or 'sum' (kl_div also 'batchmean': the sum over "
        "input.shape[0]). 'mean' divides by the number of loss elements, except: the class losses with class "
        "indices divide by the summed weights of the counted targets; mse_loss and l1_loss with ``weight`` by "
        "sum(weight); huber_loss with ``weight`` by the number of elements (torch 2.13's own inconsistency, kept). "
        "A mean over nothing -- an empty batch, every target ignored -- is NaN, as in torch; a 'sum' of nothing "
        "is 0.",
    ),
    (
        ("hinge_embedding_loss", "cosine_embedding_loss", "multi_margin_loss", "multilabel_margin_loss"),
        "At the hinge (loss exactly 0) hinge_embedding_loss and cosine_embedding_loss pass the gradient, as torch's "
        "clamp_min(z, 0) backward; multi_margin_loss and multilabel_margin_loss pass none there (torch's kernels test "
        "z > 0). An empty batch's 'mean' in multi_margin_loss and multilabel_margin_loss is NaN as every mean here "
        "(torch 2.13's is uninitialised memory, or 0).",
    ),
    (
        ("gaussian_nll_loss",),
        "var is clamped at eps as torch does (in place, under no_grad): the var gradient is the clamped value's.",
    ),
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
def _loss(name, inputs, forward, vjps, check, samples, notes, **declaration):
    """Declare a loss (or, with ``family=DISTANCE``, a distance): its notes are its own then the case law's, its
    torch reference ``torch.nn.functional.<name>`` unless ``declaration`` (defop's other fields) gives one."""
    declaration.setdefault("family", FAMILY)
    declaration.setdefault("torch_ref", functional(name))
    notes = case_law(_CASE_LAW, name, notes)
    return defop(
        name, inputs=inputs, forward=forward, vjps=vjps, check=check, samples=samples, notes=notes, **declaration
    )


def _check_same_ndim(op: str, reference: str, array, others: tuple) -> None:
    """torch's rule for the pairwise losses: each (name, array) of ``others`` has as many dims as ``array``."""
    for name, other in others:
        require(
            other.ndim == array.ndim,
            op,
            name,
            f"as many dims as {reference} ({array.ndim}, as torch)",
            f"shape {other.shape}",
        )


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
    return constant_values(t)


def _constant(x) -> np.ndarray:
    """The values of ``x`` (an array, or a Tensor in a traced rule) as an array carrying no gradient: the masks,
    counts and scales of a rule."""
    return np.asarray(constant_values(x))


def _broadcast_shape(op: str, names: tuple, *arrays) -> tuple:
    return broadcast_or_fail(
        op,
        names[-1],
        [a.shape for a in arrays],
        f"a shape that broadcasts with {' and '.join(names[:-1])}",
        ", ".join(f"{n} {a.shape}" for n, a in zip(names, arrays)),
    )


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
    """The class weights in ``input``'s dtype, shaped to broadcast along its class axis: an array, or a Tensor in a
    composite (read in the recorded graph, never as values: an exported training step feeds them every call)."""
    shape = (-1,) + (1,) * (input.ndim - 1 - _class_axis(input))
    if isinstance(weight, Tensor):
        from .cast import cast  # at call time: the families register in ops/__init__'s order
        from .shape import reshape

        return reshape(cast(weight, input.dtype), shape)
    return np.reshape(weight, shape).astype(input.dtype, copy=False)


def _picked(input, safe):
    """Each target's own entry of ``input`` (its class ``safe`` along the class axis)."""
    if input.ndim == 2:  # (N, C): one fancy index, without take_along_axis's index arrays (~3x faster at N = 512)
        return input[np.arange(input.shape[0]), safe]
    axis = _class_axis(input)
    return np.squeeze(np.take_along_axis(input, np.expand_dims(safe, axis), axis), axis)


def _one_hot(input, safe):
    """(input's shape) booleans: True at each target's class."""
    axis = _class_axis(input)
    classes = np.arange(input.shape[axis]).reshape((-1,) + (1,) * (input.ndim - 1 - axis))
    return np.expand_dims(safe, axis) == classes


def _smoothed_probabilities(input, target, weight, label_smoothing):
    """q_nc = w_c ((1 - s) t_nc + s / C) with loss_n = -sum_c q_nc log p_nc, for probability targets ``target``
    (an array, or a Tensor in the composite); ``weight`` likewise, or None."""
    n_classes = input.shape[_class_axis(input)]
    q = target
    if label_smoothing > 0 and n_classes:
        q = target * (1 - label_smoothing) + label_smoothing / n_classes
    if weight is not None:
        q = q * _class_weights(weight, input)
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
        with np.errstate(invalid="ignore"):  # a 0 probability at a -inf logit: 0 * -inf, NaN as in torch
            loss = -np.sum(log_probs * _smoothed_probabilities(input, target, weight, label_smoothing), axis=axis)
        # torch: 'mean' over an empty input (also N > 0 with C = 0) is NaN
        return _reduce(loss, reduction, None if input.size else 0), {"log_probs": log_probs}
    valid, safe, w_target = _targets(input, target, weight, ignore_index)
    total_weight = w_target.sum()
    if input.size == 0:  # an empty batch: no exp/max over it
        return _reduce(np.zeros(target.shape, input.dtype), reduction, total_weight), {}
    # classes last: exps = exp(x - shift), kept for the backward (the probabilities are exps / row_sum); the
    # shift is each row's target logit (its max where that overflows: exp_shifted_block)
    x = along_last(input, axis)
    exps = owned_like(x)
    picked = _picked(input, safe)
    shift = picked[..., None].copy()  # columns: one value per row
    row_sum = np.empty_like(shift)
    shifted_total = np.empty_like(shift) if label_smoothing > 0 else None  # sum_c w_c (x_c - shift)
    blockwise(partial(exp_shifted_block, weight), x, shift, exps, row_sum, shifted_total)
    log_sum = np.log(row_sum[..., 0])
    # loss_n = w_y (log_sum - (x_y - shift)), as torch's -w_y ((x_y - max) - log_sum) where the shift is the max
    loss = picked
    with np.errstate(invalid="ignore"):  # inf - inf where a row's max is +-inf: NaN as in torch
        loss -= shift[..., 0]
    np.subtract(log_sum, loss, out=loss)
    loss *= w_target
    loss[~valid] = 0  # an ignored row holding NaN or inf - inf: 0, as torch (its weight 0 times NaN is NaN)
    if shifted_total is not None:  # smoothing: -sum_c w_c log p_c = sum_c(w_c) log_sum - sum_c w_c (x_c - shift)
        class_total = input.shape[axis] if weight is None else np.sum(weight)
        smooth = np.where(valid, class_total * log_sum - shifted_total[..., 0], 0)
        loss = (1 - label_smoothing) * loss + (label_smoothing / input.shape[axis]) * smooth
    return _reduce(loss, reduction, total_weight), {"exps": exps, "row_sum": row_sum}


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
    scale = _loss_scale(g, reduction, w_target)
    # ignored targets get exactly 0, also when 'mean' divides by a zero total weight (torch's convention)
    with np.errstate(invalid="ignore"):  # inf * 0 there: masked
        on_target = scale * w_target if label_smoothing == 0 else scale * w_target * (1 - label_smoothing)
        if not valid.all():
            on_target[~valid] = 0
    row_total = on_target
    smooth = None
    if label_smoothing > 0:
        smooth_scale = np.where(valid, scale * (label_smoothing / n_classes), 0)
        row_total = on_target + smooth_scale * (n_classes if weight is None else np.sum(weight))
        smooth = smooth_scale[..., None]
    # classes last: p * sum_c(q_nc) - (s/C) w_c with p = exps / row_sum, then each target class's own term
    grad = owned_like(exps)
    blockwise(partial(cross_entropy_grad_block, weight), exps, row_total[..., None] / row_sum, smooth, grad)
    grad = from_last(grad, axis)
    if grad.ndim == 2:  # (N, C): the targets are distinct (row, class) pairs, so one fancy subtraction
        grad[np.arange(grad.shape[0]), safe] -= on_target
        return grad
    index = np.expand_dims(safe, axis)
    np.put_along_axis(grad, index, np.take_along_axis(grad, index, axis) - np.expand_dims(on_target, axis), axis)
    return grad


def _loss_scale(g, reduction: str, w_target):
    """The gradient reaching each target's loss from ``g``: g itself per target ('none'), or one number, g or
    g / (the summed weights) for 'mean' (inf or NaN when that is 0: the caller masks the ignored targets)."""
    if reduction != "mean":
        return g
    with np.errstate(invalid="ignore", divide="ignore"):
        return g / w_target.sum()


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

    axis = _class_axis(input)
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
    return _class_index_loss(log_softmax(input, axis), target, weight, ignore_index, reduction, label_smoothing)


def _class_index_loss(log_probs, target, weight, ignore_index, reduction, label_smoothing):
    """-sum(q * log_probs) over the class axis with ``_target_distribution_ops``' q, ignored targets 0, reduced:
    cross_entropy's composite for class indices (over log_softmax) and nll_loss's (over its input)."""
    from . import reduce  # at call time: the families register in ops/__init__'s order
    from .shape import masked_fill

    q, denominator, ignored = _target_distribution_ops(log_probs, target, weight, ignore_index, label_smoothing)
    loss = -reduce.sum(log_probs * q, dim=_class_axis(log_probs))
    loss = masked_fill(loss, ignored, 0.0)  # ignored: a zero gradient even when 'mean' is 0/0
    if reduction == "none":
        return loss
    total = reduce.sum(loss)
    return total if reduction == "sum" else total / denominator


def _target_distribution_ops(input, target, weight, ignore_index, label_smoothing):
    """``_target_distribution``'s q and denominator (and the ignored targets), computed with registered ops from
    the class indices ``target``: a recorded graph (an exported training step) then reads the targets as an
    input rather than holding the example's one-hot as a constant. The same values: one nonzero per row."""
    from . import reduce
    from .binary import eq, ne
    from .cast import cast
    from .shape import unsqueeze

    axis, dtype = _class_axis(input), input.dtype
    target = target if isinstance(target, Tensor) else Tensor._wrap(np.asarray(target))
    valid = ne(target, ignore_index)
    classes = np.arange(input.shape[axis]).reshape((-1,) + (1,) * (input.ndim - 1 - axis))
    hit = cast(eq(unsqueeze(target, axis), classes), dtype) * cast(unsqueeze(valid, axis), dtype)
    if weight is not None:
        hit = hit * _class_weights(weight, input)
    q = hit * np.asarray(1 - label_smoothing, dtype)
    if label_smoothing > 0:
        n_classes = input.shape[axis]
        smooth = cast(unsqueeze(valid, axis), dtype) * np.asarray(label_smoothing / n_classes, dtype)
        q = q + (smooth if weight is None else smooth * _class_weights(weight, input))
    return q, reduce.sum(reduce.sum(hit, dim=axis)), ~valid


def _nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """``torch.nn.functional.nll_loss``: ``input`` holds log-probabilities along dim 1 (dim 0 if 1-D)."""
    valid, safe, w_target = _targets(input, target, weight, ignore_index)
    picked = _picked(input, safe) if input.size else np.zeros(target.shape, input.dtype)
    with np.errstate(invalid="ignore"):  # an ignored NaN or inf entry times its weight 0: masked to 0, as torch
        loss = np.where(valid, -w_target * picked, 0).astype(input.dtype, copy=False)
    return _reduce(loss, reduction, np.sum(w_target))


def _nll_loss_composite(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """nll_loss written with registered ops, the targets and weights read in the graph: what create_graph (the
    second order, an exported training step) differentiates."""
    return _class_index_loss(input, target, weight, ignore_index, reduction, 0.0)


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
    integer(op, "ignore_index", ignore_index)


def _check_class_indices(op, counted, n_classes: int, or_else: str = "") -> None:
    """Every entry of ``counted`` (the targets that count) is a class index in [0, n_classes)."""
    require_indices(op, "target", counted, 0, n_classes, f"class indices in [0, {n_classes - 1}]{or_else}")


def _check_class_targets(op, input, target, weight, ignore_index, reduction):
    require_float(op, "input", input)
    if target.dtype.kind == "f":
        raise TypeError(
            f"{op}: argument 'target' expected an integer tensor of class indices, got dtype "
            f"{target.dtype} (probability targets are not supported); convert them with target.long()"
        )
    require_integer(op, "target", target)
    require(input.ndim >= 1, op, "input", "a tensor of shape (C,), (N, C) or (N, C, d1, ...)", input.shape)
    expected = () if input.ndim == 1 else (input.shape[0],) + input.shape[2:]
    require(target.shape == expected, op, "target", f"shape {expected} for input of shape {input.shape}", target.shape)
    n_classes = input.shape[_class_axis(input)]
    _check_class_weight(op, input, weight)
    _check_ignore_index(op, ignore_index)
    _check_reduction(op, reduction)
    if target.size and 0 <= target.min() and target.max() < n_classes:
        return  # the common call: every target a class index, none to leave out first
    _check_class_indices(op, target[target != ignore_index], n_classes, f" (or ignore_index={ignore_index})")


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
    if target.shape == indices != input.shape:  # torch's "expected scalar type Long but found Float"
        raise TypeError(
            f"{op}: argument 'target' expected integer class indices of shape {indices} (or class probabilities of "
            f"the input's shape {input.shape}), got a {target.dtype} tensor of shape {target.shape}; class indices "
            f"must be integer: convert them with target.long()"
        )
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


cross_entropy = _loss(
    "cross_entropy",
    ("input", "target", "weight?"),
    _cross_entropy,
    (_cross_entropy_vjp, _cross_entropy_target_vjp, NOT_DIFFERENTIABLE),
    _check_cross_entropy,
    lambda rng: _class_target_samples(rng, smoothing=True) + _probability_target_samples(rng),
    "Class indices or class probabilities (differentiable, as in torch); class weights are not "
    "differentiable, as in torch.",
    returns_aux=True,
    composite=_cross_entropy_composite,
)

nll_loss = _loss(
    "nll_loss",
    ("input", "target", "weight?"),
    _nll_loss,
    (_nll_loss_vjp, NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE),
    _check_nll_loss,
    lambda rng: _class_target_samples(rng, smoothing=False),
    "Class weights are not differentiable, as in torch.",
    composite=_nll_loss_composite,
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
        broadcast_or_fail(
            op,
            name,
            (param.shape, input.shape),
            f"a shape that broadcasts to the input's {input.shape}",
            param.shape,
            to=input.shape,
        )


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

    hard = np.where(rng.integers(0, 2, size=(3, 4)) == 1, 0.999, 1e-3)  # exact 0 and 1: tests/ops/test_loss.py
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


binary_cross_entropy = _loss(
    "binary_cross_entropy",
    ("input", "target", "weight?"),
    _binary_cross_entropy,
    (_bce_probability_input_vjp, _bce_probability_target_vjp, NOT_DIFFERENTIABLE),
    _check_binary_cross_entropy,
    _binary_cross_entropy_samples,
    "Logs clamped at -100 as torch; weight is not differentiable, as in torch.",
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


binary_cross_entropy_with_logits = _loss(
    "binary_cross_entropy_with_logits",
    ("input", "target", "weight?", "pos_weight?"),
    _bce_with_logits,
    (_bce_input_vjp, _bce_target_vjp, NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE),
    _check_bce_with_logits,
    _bce_samples,
    "weight and pos_weight are not differentiable, as in torch.",
    composite=_bce_composite,
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
    require_bool(op, "log_target", log_target)


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


kl_div = _loss(
    "kl_div",
    ("input", "target"),
    _kl_div,
    (_kl_input_vjp, _kl_target_vjp),
    _check_kl_div,
    _kl_div_samples,
    "reduction 'batchmean' is the KL divergence; 'mean' divides by every element (no warning, unlike torch).",
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


def _pointwise_denominator(weight, reduction, weighted_mean):
    """What a pointwise loss's 'mean' divides by: sum(weight) for a weighted mean (0/0 is NaN over nothing or zero
    weights, as torch's), else None (the number of elements)."""
    return np.sum(weight) if weight is not None and weighted_mean and reduction == "mean" else None


def _pointwise_forward(value, input, target, weight, reduction, param, weighted_mean):
    loss = value(input - target, param)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, _pointwise_denominator(weight, reduction, weighted_mean))


def _pointwise_scale(g, shape, weight, reduction, weighted_mean):
    """The upstream gradient per loss element."""
    return _reduction_grad(g, reduction, shape, _pointwise_denominator(weight, reduction, weighted_mean))


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
    if target.shape != input.shape:  # torch's warning, word for word (the broadcast is rarely what was meant)
        warnings.warn(
            f"{name}: Using a target size ({target.shape}) that is different to the input size ({input.shape}). This "
            f"will likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
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
    notes=case_law(
        _CASE_LAW, "mse_loss", "weight (torch 2.13) is differentiable; 'mean' with weight is sum(w l) / sum(w)."
    ),
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
    require_bool(op, "keepdim", keepdim)
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


pairwise_distance = _loss(
    "pairwise_distance",
    ("x1", "x2"),
    _pairwise_distance,
    (
        lambda g, ans, x1, x2, p=2.0, eps=1e-6, keepdim=False: unbroadcast(
            _pairwise_grad(g, x1, x2, float(p), float(eps), keepdim), x1.shape
        ),
        lambda g, ans, x1, x2, p=2.0, eps=1e-6, keepdim=False: unbroadcast(
            -_pairwise_grad(g, x1, x2, float(p), float(eps), keepdim), x2.shape
        ),
    ),
    _check_pairwise_distance,
    _pairwise_samples,
    "Any p (inf, -inf, 0, negative); torch's vector-norm subgradients.",
    family=DISTANCE,
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


cosine_similarity = _loss(
    "cosine_similarity",
    ("x1", "x2"),
    _cosine_similarity,
    (
        lambda g, ans, x1, x2, dim=1, eps=1e-8: _cosine_grad(g, x1, x2, dim, eps, True),
        lambda g, ans, x1, x2, dim=1, eps=1e-8: _cosine_grad(g, x1, x2, dim, eps, False),
    ),
    _check_cosine_similarity,
    _cosine_samples,
    "Norms clamped at eps as torch 2.13 (the clamp does not enter the gradient, as torch's).",
    family=DISTANCE,
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
    _check_same_ndim(op, "input1", input1, (("input2", input2), ("target", target)))
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


margin_ranking_loss = _loss(
    "margin_ranking_loss",
    ("input1", "input2", "target"),
    _margin_ranking_loss,
    (_margin_ranking_vjp(0), _margin_ranking_vjp(1), _margin_ranking_vjp(2)),
    _check_margin_ranking_loss,
    _margin_ranking_samples,
    "The hinge passes the gradient at 0 (torch's clamp_min); a float target is differentiable, as in torch.",
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
    _check_same_ndim(op, "anchor", anchor, (("positive", positive), ("negative", negative)))
    margin = real(op, "margin", margin)
    require(margin > 0, op, "margin", "a positive number (as torch)", margin)
    p = _check_norm_order(op, p)
    real(op, "eps", eps)
    require_bool(op, "swap", swap)
    _check_reduction(op, reduction)
    _check_pairwise_shapes(op, ("anchor", "positive"), anchor, positive, p)
    _check_pairwise_shapes(op, ("anchor", "negative"), anchor, negative, p)
    if swap:
        _check_pairwise_shapes(op, ("positive", "negative"), positive, negative, p)
    distances = [np.broadcast_shapes(anchor.shape, other.shape)[:-1] for other in (positive, negative)]
    broadcast_or_fail(
        op, "negative", distances, f"distances that broadcast with the positive ones {distances[0]}", distances[1]
    )


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


triplet_margin_loss = _loss(
    "triplet_margin_loss",
    ("anchor", "positive", "negative"),
    _triplet_margin_loss,
    None,
    _check_triplet_margin_loss,
    _triplet_samples,
    "The hinge passes the gradient at 0; swap ties split evenly (torch's minimum).",
    joint_vjp=_triplet_vjp,
)


# -- soft_margin_loss / multilabel_soft_margin_loss ------------------------------------------------------------
def _check_real_target(op, target, what="a real tensor"):
    require(target.dtype.kind in "fiub", op, "target", what, f"dtype {target.dtype}")


def _check_same_float_dtype(op, names, *arrays):
    require_float(op, names[0], arrays[0])
    for name, array in zip(names[1:], arrays[1:]):
        if array is not None and array.dtype.kind == "f":
            require(
                array.dtype == arrays[0].dtype, op, name, f"the dtype of {names[0]} ({arrays[0].dtype})", array.dtype
            )


def _sigmoid(z):
    """sigmoid(z) = exp(-softplus(-z)), finite for any z (and traced: logaddexp and exp are registered ops)."""
    return np.exp(-np.logaddexp(0, -z))


def _soft_margin_loss(input, target, reduction="mean"):
    """``torch.nn.functional.soft_margin_loss``: log(1 + exp(-target * input)), broadcast."""
    return _reduce(np.logaddexp(0, -_as_input_dtype(target, input) * input), reduction)


def _soft_margin_vjp(g, ans, input, target, reduction="mean"):
    t = _as_input_dtype(target, input)
    z = -t * input
    return unbroadcast(-t * _sigmoid(z) * _reduction_grad(g, reduction, np.shape(z)), input.shape)


def _check_soft_margin_loss(input, target, reduction="mean"):
    op = "soft_margin_loss"
    _check_same_float_dtype(op, ("input", "target"), input, target)
    _check_real_target(op, target, "a real tensor (of 1 and -1)")
    require(target.shape == input.shape, op, "target", f"the input's shape {input.shape} (as torch)", target.shape)
    _check_reduction(op, reduction)


def _soft_margin_samples(rng):
    def signs(*shape):
        return rng.choice([-1.0, 1.0], size=shape)

    out = [Sample((uniform(rng, (4, 3)), signs(4, 3)), {"reduction": r}, r) for r in _REDUCTIONS]
    out += [Sample((uniform(rng, (0, 3)), signs(0, 3)), {"reduction": r}, f"{r}, empty") for r in _REDUCTIONS]
    return out + [
        Sample((transposed(rng, (3, 4)), signs(3, 4).astype(np.int64)), {}, "non-contiguous, integer target"),
        Sample((uniform(rng, (5,), -30, 30), uniform(rng, (5,), -1.5, 1.5)), {"reduction": "sum"}, "real target"),
        Sample((uniform(rng, ()), signs()), {}, "0-d"),
    ]


soft_margin_loss = _loss(
    "soft_margin_loss",
    ("input", "target"),
    _soft_margin_loss,
    (_soft_margin_vjp, NOT_DIFFERENTIABLE),
    _check_soft_margin_loss,
    _soft_margin_samples,
    "log1p(exp(-y x)) as softplus: finite for any logits. The target is not differentiable (as torch).",
    torch_ref=_quiet_torch(
        lambda torch, input, target, **attrs: torch.nn.functional.soft_margin_loss(input, target, **attrs)
    ),
)


def _mlsm_elementwise(input, target, weight):
    """-(t log sigmoid(x) + (1 - t) log sigmoid(-x)) = softplus(-x) + (1 - t) x, times the weight."""
    loss = np.logaddexp(0, -input) + (1 - target) * input
    return loss if weight is None else loss * weight


def _multilabel_soft_margin_loss(input, target, weight=None, reduction="mean"):
    """``torch.nn.functional.multilabel_soft_margin_loss``: the (weighted) binary logistic loss of every class,
    averaged over the classes (the last dim)."""
    with np.errstate(invalid="ignore", divide="ignore"):  # no classes: 0 / 0, NaN as torch
        loss = np.sum(_mlsm_elementwise(input, target, weight), axis=-1) / input.shape[-1]
    return _reduce(loss, reduction)


def _mlsm_scale(g, input, reduction):
    """The upstream gradient of each (sample, class) element: the loss's over the number of classes."""
    per_sample = _reduction_grad(g, reduction, input.shape[:-1])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.expand_dims(per_sample, -1) / input.shape[-1]


def _mlsm_input_vjp(g, ans, input, target, weight, reduction="mean"):
    grad = (_sigmoid(input) - target) * _mlsm_scale(g, input, reduction)
    return grad if weight is None else unbroadcast(grad * weight, input.shape)


def _mlsm_target_vjp(g, ans, input, target, weight, reduction="mean"):
    grad = -input * _mlsm_scale(g, input, reduction)
    return unbroadcast(grad if weight is None else grad * weight, target.shape)


def _mlsm_weight_vjp(g, ans, input, target, weight, reduction="mean"):
    return unbroadcast(_mlsm_elementwise(input, target, None) * _mlsm_scale(g, input, reduction), weight.shape)


def _check_multilabel_soft_margin_loss(input, target, weight=None, reduction="mean"):
    op = "multilabel_soft_margin_loss"
    _check_same_float_dtype(op, ("input", "target", "weight"), input, target, weight)
    require_float(op, "target", target)
    require(input.ndim >= 1, op, "input", "a tensor of shape (C,) or (N, C)", input.shape)
    for name, array in (("target", target), ("weight", weight)):
        if array is not None:
            shape = _broadcast_shape(op, ("input", name), input, array)
            require(
                shape == input.shape, op, name, f"a shape that broadcasts to the input's {input.shape}", array.shape
            )
    _check_reduction(op, reduction)


def _mlsm_samples(rng):
    def draw(*shape):
        return uniform(rng, shape), rng.random(shape)

    out = [Sample(draw(4, 3) + (None,), {"reduction": r}, r) for r in _REDUCTIONS]
    out += [Sample(draw(0, 3) + (None,), {"reduction": r}, f"{r}, empty") for r in _REDUCTIONS]
    x, t = draw(4, 3)
    return out + [
        Sample(draw(4, 3) + (uniform(rng, (3,), 0.2, 2.0),), {}, "class weights"),
        Sample(draw(4, 3) + (uniform(rng, (4, 3), 0.2, 2.0),), {"reduction": "sum"}, "element weights"),
        Sample(draw(5) + (None,), {"reduction": "none"}, "unbatched (C,)"),
        Sample(draw(2, 3, 4) + (uniform(rng, (4,), 0.2, 2.0),), {"reduction": "none"}, "3-D"),
        Sample((_noncontiguous(x), _noncontiguous(t), None), {}, "non-contiguous"),
        Sample((uniform(rng, (3, 4), -40, 40), (rng.random((3, 4)) > 0.5) * 1.0, None), {}, "logits of +-40"),
    ]


multilabel_soft_margin_loss = _loss(
    "multilabel_soft_margin_loss",
    ("input", "target", "weight?"),
    _multilabel_soft_margin_loss,
    (_mlsm_input_vjp, _mlsm_target_vjp, _mlsm_weight_vjp),
    _check_multilabel_soft_margin_loss,
    _mlsm_samples,
    "Softplus form (finite for any logits); target and weight are differentiable, as torch's composite.",
)


# -- multi_margin_loss / multilabel_margin_loss ----------------------------------------------------------------
def _as_rows(input):
    """A (C,) or (N, C) input as (N, C) rows."""
    return np.reshape(input, (-1, input.shape[-1]))


def _multi_margin_parts(input, target, margin, weight):
    """(rows (N, C), the hinge z_ni = margin - x_n,y + x_ni, where it is active (z > 0 off the target class),
    the (N, 1) weight of each row's target)."""
    x = _as_rows(input)
    y = np.reshape(_constant(target), (-1, 1)).astype(np.intp)
    z = float(margin) - np.take_along_axis(x, y, axis=1) + x
    active = (_constant(z) > 0) & (np.arange(x.shape[1]) != y)  # torch: strictly positive, as its kernel
    w_y = None if weight is None else _values(weight)[y].astype(x.dtype)
    return x, z, active, w_y


def _multi_margin_loss(input, target, p=1, margin=1.0, weight=None, reduction="mean"):
    """``torch.nn.functional.multi_margin_loss``: sum over i != y of w_y max(0, margin - x_y + x_i)^p / C."""
    x, z, active, w_y = _multi_margin_parts(input, target, margin, weight)
    hinge = np.where(active, z, 0) ** int(p)
    hinge = hinge if w_y is None else hinge * w_y
    with np.errstate(invalid="ignore", divide="ignore"):
        loss = np.sum(hinge, axis=1) / x.shape[1]
    return _reduce(np.reshape(loss, target.shape), reduction)


def _multi_margin_vjp(g, ans, input, target, weight, p=1, margin=1.0, reduction="mean"):
    x, z, active, w_y = _multi_margin_parts(input, target, margin, weight)
    scale = np.reshape(_reduction_grad(g, reduction, target.shape), (-1, 1)) / x.shape[1]
    scale = scale if w_y is None else scale * w_y
    slope = np.where(active, 2 * z, 0) if int(p) == 2 else active.astype(x.dtype)
    c = slope * scale
    one_hot = np.arange(x.shape[1]) == np.reshape(_constant(target), (-1, 1))
    return np.reshape(c - one_hot * np.sum(c, axis=1, keepdims=True), input.shape)


def _check_class_rows(op, input, target, what):
    require_float(op, "input", input)
    require_integer(op, "target", target)
    require(input.ndim in (1, 2), op, "input", "a tensor of shape (C,) or (N, C)", input.shape)
    require(input.ndim == 1 or input.shape[1] > 0, op, "input", "at least one class", input.shape)
    expected = (input.shape[0],) if input.ndim == 2 else what
    return expected


def _check_multi_margin_loss(input, target, weight=None, p=1, margin=1.0, reduction="mean"):
    op = "multi_margin_loss"
    _check_class_rows(op, input, target, None)
    ok = target.shape == (input.shape[0],) if input.ndim == 2 else target.shape in ((), (1,))
    expected = f"shape ({input.shape[0]},)" if input.ndim == 2 else "shape () or (1,)"
    require(ok, op, "target", f"{expected} for input of shape {input.shape}", target.shape)
    _check_class_indices(op, target, input.shape[-1])
    require(not isinstance(p, bool) and p in (1, 2), op, "p", "1 or 2 (as torch)", p)
    real(op, "margin", margin)
    _check_class_weight(op, input, weight)
    _check_same_float_dtype(op, ("input", "weight"), input, weight)
    _check_reduction(op, reduction)


def _multi_margin_samples(rng):
    def draw(n, c, margin=1.0, p=1):
        def make(r):
            return uniform(r, (n, c)), r.integers(0, c, size=(n,))

        return _redraw(rng, make, lambda x, y: _away(_multi_margin_parts(x, y, margin, None)[1]))

    out = [Sample(draw(5, 4), {"reduction": r}, r) for r in _REDUCTIONS]
    x, y = draw(4, 3, 0.5, 2)
    x1, y1 = draw(1, 5)
    return out + [
        Sample(draw(5, 4, 0.5, 2), {"p": 2, "margin": 0.5}, "p=2, margin=0.5"),
        Sample(draw(5, 4) + (uniform(rng, (4,), 0.2, 2.0),), {"reduction": "sum"}, "class weights"),
        Sample(draw(5, 4, 1.0, 2) + (uniform(rng, (4,), 0.2, 2.0),), {"p": 2, "reduction": "none"}, "p=2, weights"),
        Sample((_noncontiguous(x), y), {"p": 2, "margin": 0.5}, "non-contiguous"),
        Sample((x1[0], y1[0]), {"reduction": "none"}, "unbatched (C,), 0-d target"),
        Sample((x1[0], y1), {"reduction": "none"}, "unbatched (C,), (1,) target"),
        Sample((uniform(rng, (0, 3)), np.zeros((0,), np.int64)), {"reduction": "none"}, "empty, none"),
        # torch 2.13 returns uninitialised memory for the 'sum' and 'mean' of an empty batch; ours are 0 and NaN
        Sample((uniform(rng, (0, 3)), np.zeros((0,), np.int64)), {"reduction": "sum"}, "empty, sum", torch=False),
        Sample((uniform(rng, (0, 3)), np.zeros((0,), np.int64)), {}, "empty, mean", torch=False),
    ]


multi_margin_loss = _loss(
    "multi_margin_loss",
    ("input", "target", "weight?"),
    _multi_margin_loss,
    (_multi_margin_vjp, NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE),
    _check_multi_margin_loss,
    _multi_margin_samples,
    "The hinge passes no gradient at exactly 0 (torch's kernel tests z > 0); class weights are not "
    "differentiable (as torch). An empty batch's 'sum' is 0, its 'mean' NaN (torch 2.13's are uninitialised).",
    torch_ref=lambda torch, input, target, weight=None, **attrs: torch.nn.functional.multi_margin_loss(
        input, target, weight=weight, **attrs
    ),
)


def _multilabel_margin_parts(input, target):
    """(rows x (N, C), the hinge z_nji = 1 - x_n,y_j + x_ni (N, J=C, C), where it counts: y_j is one of the
    targets (the entries before the first negative one), i is not a target, z > 0; and the (N, J, C) one-hot
    of the targets)."""
    x = _as_rows(input)
    y = _as_rows(_constant(target)).astype(np.intp)
    valid = np.cumprod(y >= 0, axis=1).astype(bool)
    safe = np.where(valid, y, 0)
    one_hot = (safe[:, :, None] == np.arange(x.shape[1])) & valid[:, :, None]
    is_target = np.any(one_hot, axis=1)
    z = 1 - np.take_along_axis(x, safe, axis=1)[:, :, None] + x[:, None, :]
    active = valid[:, :, None] & ~is_target[:, None, :] & (_constant(z) > 0)
    return x, z, active, one_hot


def _multilabel_margin_loss(input, target, reduction="mean"):
    """``torch.nn.functional.multilabel_margin_loss``: sum over targets j and non-targets i of
    max(0, 1 - (x_y_j - x_i)) / C; a target row lists class indices and ends at its first -1."""
    x, z, active, _ = _multilabel_margin_parts(input, target)
    loss = np.sum(np.where(active, z, 0), axis=(1, 2)) / x.shape[1]
    return _reduce(np.reshape(loss, input.shape[:-1]), reduction)


def _multilabel_margin_vjp(g, ans, input, target, reduction="mean"):
    x, _, active, one_hot = _multilabel_margin_parts(input, target)
    scale = np.reshape(_reduction_grad(g, reduction, input.shape[:-1]), (-1, 1, 1)) / x.shape[1]
    c = np.where(active, scale, 0)  # (N, J, C): d loss / d x_i for each (target j, class i) pair
    grad = np.sum(c, axis=1) - np.sum(np.sum(c, axis=2, keepdims=True) * one_hot, axis=1)
    return np.reshape(grad, input.shape)


def _check_multilabel_margin_loss(input, target, reduction="mean"):
    op = "multilabel_margin_loss"
    _check_class_rows(op, input, target, None)
    require(target.shape == input.shape, op, "target", f"the input's shape {input.shape}", target.shape)
    n = input.shape[-1]
    require_indices(op, "target", target, -1, n, f"class indices in [0, {n - 1}] padded with -1")
    _check_reduction(op, reduction)


def _multilabel_margin_samples(rng):
    def targets(n, c):
        rows = [np.concatenate([rng.permutation(c)[: rng.integers(0, c + 1)], [-1] * c])[:c] for _ in range(n)]
        return np.array(rows, dtype=np.int64).reshape(n, c)

    def draw(n, c):
        def make(r):
            return uniform(r, (n, c)), targets(n, c)

        return _redraw(rng, make, lambda x, y: _away(_multilabel_margin_parts(x, y)[1]))

    out = [Sample(draw(5, 4), {"reduction": r}, r) for r in _REDUCTIONS]
    x, y = draw(4, 5)
    x1, y1 = draw(1, 5)
    y_after = y.copy()
    y_after[:, -1] = np.where(y_after[:, -2] < 0, 2, y_after[:, -1])  # entries after the first -1 are ignored
    return out + [
        Sample((_noncontiguous(x), y), {"reduction": "sum"}, "non-contiguous"),
        Sample((x, y_after), {"reduction": "none"}, "indices after the first -1"),
        Sample((x1[0], y1[0]), {"reduction": "none"}, "unbatched (C,)"),
        Sample((x1, np.full((1, 5), -1)), {}, "no targets"),
        # torch 2.13's 'sum' of an empty batch is uninitialised memory in float32 (ours 0), its 'mean' 0 (ours
        # NaN, 0 / 0, as every other mean here)
        Sample((uniform(rng, (0, 3)), np.zeros((0, 3), np.int64)), {"reduction": "sum"}, "empty, sum", torch=False),
        Sample((uniform(rng, (0, 3)), np.zeros((0, 3), np.int64)), {}, "empty, mean", torch=False),
    ]


multilabel_margin_loss = _loss(
    "multilabel_margin_loss",
    ("input", "target"),
    _multilabel_margin_loss,
    (_multilabel_margin_vjp, NOT_DIFFERENTIABLE),
    _check_multilabel_margin_loss,
    _multilabel_margin_samples,
    "Vectorised over (sample, target, class) triples; the hinge passes no gradient at exactly 0 (torch's "
    "kernel). An empty batch's 'mean' is NaN (torch 2.13 returns 0).",
)


# -- hinge_embedding_loss / cosine_embedding_loss --------------------------------------------------------------
def _hinge_embedding_loss(input, target, margin=1.0, reduction="mean"):
    """``torch.nn.functional.hinge_embedding_loss``: x where target != -1 plus max(0, margin - x) where
    target != 1 (torch's two masks: a target of neither 1 nor -1 gets both terms), broadcast."""
    t = _constant(target)
    loss = np.where(t != 1, np.maximum(float(margin) - input, 0), 0) + np.where(t != -1, input, 0)
    return _reduce(loss, reduction)


def _hinge_embedding_vjp(g, ans, input, target, margin=1.0, reduction="mean"):
    t = _constant(target)
    shape = np.broadcast_shapes(input.shape, t.shape)
    scale = _reduction_grad(g, reduction, shape)
    hinge = (t != 1) & (float(margin) - _constant(input) >= 0)  # clamp_min passes the gradient at 0, as torch
    return unbroadcast(np.where(t != -1, scale, 0) - np.where(hinge, scale, 0), input.shape)


def _check_hinge_embedding_loss(input, target, margin=1.0, reduction="mean"):
    op = "hinge_embedding_loss"
    require_float(op, "input", input)
    _check_real_target(op, target, "a real tensor (of 1 and -1)")
    _broadcast_shape(op, ("input", "target"), input, target)
    real(op, "margin", margin)
    _check_reduction(op, reduction)


def _hinge_embedding_samples(rng):
    def draw(shape, t_shape, margin=1.0):
        def make(r):
            return uniform(r, shape), r.choice([-1.0, 1.0], size=t_shape)

        return _redraw(rng, make, lambda x, t: _away(x - margin))

    out = [Sample(draw((4, 3), (4, 3)), {"reduction": r}, r) for r in _REDUCTIONS]
    out += [Sample(draw((0, 3), (0, 3)), {"reduction": r}, f"{r}, empty") for r in _REDUCTIONS]
    x, t = draw((3, 4), (3, 4), 0.5)
    return out + [
        Sample(draw((4, 3), (4, 3), 0.5), {"margin": 0.5}, "margin=0.5"),
        Sample(draw((3, 1), (4,)), {"reduction": "none"}, "broadcast (3, 1) with (4,)"),
        Sample((_noncontiguous(x), t.astype(np.int64)), {"margin": 0.5}, "non-contiguous, integer target"),
        Sample((x, np.where(t > 0, 0.0, 1.0)), {"margin": 0.5, "reduction": "sum"}, "targets 0 and 1"),
    ]


hinge_embedding_loss = _loss(
    "hinge_embedding_loss",
    ("input", "target"),
    _hinge_embedding_loss,
    (_hinge_embedding_vjp, NOT_DIFFERENTIABLE),
    _check_hinge_embedding_loss,
    _hinge_embedding_samples,
    "The hinge passes the gradient at 0 (torch's clamp_min); the target only selects terms (no gradient).",
)

_COSINE_EMBEDDING_EPS = 1e-12  # torch's EPSILON, added to each squared norm


def _cosine_embedding_parts(input1, input2):
    """(cos, its denominator sqrt(m1 m2), m1, m2) over the last dim, m = sum(x^2) + 1e-12 (torch's)."""
    m1 = np.sum(input1 * input1, axis=-1) + _COSINE_EMBEDDING_EPS
    m2 = np.sum(input2 * input2, axis=-1) + _COSINE_EMBEDDING_EPS
    denom = np.sqrt(m1 * m2)
    return np.sum(input1 * input2, axis=-1) / denom, denom, m1, m2


def _cosine_embedding_loss(input1, input2, target, margin=0, reduction="mean"):
    """``torch.nn.functional.cosine_embedding_loss``: 1 - cos where target == 1, max(0, cos - margin) where
    target == -1, 0 elsewhere; cos over the last dim."""
    cos = _cosine_embedding_parts(input1, input2)[0]
    t = _constant(target)
    return _reduce(np.where(t == 1, 1 - cos, 0) + np.where(t == -1, np.maximum(cos - float(margin), 0), 0), reduction)


def _cosine_embedding_vjp(g, ans, input1, input2, target, *, needs, margin=0, reduction="mean"):
    cos, denom, m1, m2 = _cosine_embedding_parts(input1, input2)
    t = _constant(target)
    scale = _reduction_grad(g, reduction, np.shape(cos))
    passes = (t == -1) & (_constant(cos) - float(margin) >= 0)  # clamp_min passes the gradient at 0
    d_cos = np.expand_dims(np.where(t == 1, -scale, 0) + np.where(passes, scale, 0), -1)
    cos, denom = np.expand_dims(cos, -1), np.expand_dims(denom, -1)
    g1 = d_cos * (input2 / denom - cos * input1 / np.expand_dims(m1, -1)) if needs[0] else None
    g2 = d_cos * (input1 / denom - cos * input2 / np.expand_dims(m2, -1)) if needs[1] else None
    return g1, g2, None


def _check_cosine_embedding_loss(input1, input2, target, margin=0, reduction="mean"):
    op = "cosine_embedding_loss"
    _check_same_float_dtype(op, ("input1", "input2"), input1, input2)
    require(input1.ndim in (1, 2), op, "input1", "a tensor of shape (D,) or (N, D)", input1.shape)
    require(input2.shape == input1.shape, op, "input2", f"input1's shape {input1.shape}", input2.shape)
    _check_real_target(op, target, "a real tensor (of 1 and -1)")
    expected = input1.shape[:1] if input1.ndim == 2 else ()
    require(
        target.shape == expected, op, "target", f"shape {expected} for inputs of shape {input1.shape}", target.shape
    )
    real(op, "margin", margin)
    _check_reduction(op, reduction)


def _cosine_embedding_samples(rng):
    def draw(n, d, margin=0.0):
        def make(r):
            return uniform(r, (n, d)), uniform(r, (n, d)), r.choice([-1.0, 1.0], size=(n,))

        return _redraw(rng, make, lambda a, b, t: _away(_cosine_embedding_parts(a, b)[0] - margin))

    out = [Sample(draw(5, 4), {"reduction": r}, r) for r in _REDUCTIONS]
    out += [Sample(draw(0, 4), {"reduction": r}, f"{r}, empty") for r in _REDUCTIONS]
    a, b, t = draw(4, 3, 0.3)
    a1, b1, t1 = draw(1, 6, -0.2)
    return out + [
        Sample(draw(5, 4, 0.3), {"margin": 0.3}, "margin=0.3"),
        Sample(
            (_noncontiguous(a), b, t.astype(np.int64)),
            {"margin": 0.3, "reduction": "none"},
            "non-contiguous, integer target",
        ),
        Sample((a1[0], b1[0], t1[0]), {"margin": -0.2, "reduction": "none"}, "unbatched (D,)"),
    ]


cosine_embedding_loss = _loss(
    "cosine_embedding_loss",
    ("input1", "input2", "target"),
    _cosine_embedding_loss,
    None,
    _check_cosine_embedding_loss,
    _cosine_embedding_samples,
    "cos = x1.x2 / sqrt((|x1|^2 + 1e-12)(|x2|^2 + 1e-12)) as torch; the hinge passes the gradient at 0.",
    joint_vjp=_cosine_embedding_vjp,
    differentiable=(True, True, NOT_DIFFERENTIABLE),
)


# -- poisson_nll_loss / gaussian_nll_loss ----------------------------------------------------------------------
def _stirling_parts(target):
    """(where Stirling's term counts, target > 1; the target with 2 elsewhere, so its logs stay finite)."""
    counts = _constant(target) > 1
    return counts, np.where(counts, target, 2)


def _poisson_nll_loss(input, target, log_input=True, full=False, eps=1e-8, reduction="mean"):
    """``torch.nn.functional.poisson_nll_loss``: exp(x) - t x (log_input) or x - t log(x + eps), plus with
    ``full`` Stirling's t log t - t + log(2 pi t) / 2 where t > 1; broadcast."""
    loss = np.exp(input) - target * input if log_input else input - target * np.log(input + float(eps))
    if full:
        counts, t = _stirling_parts(target)
        loss = loss + np.where(counts, t * np.log(t) - t + 0.5 * np.log(2 * math.pi * t), 0)
    return _reduce(loss, reduction)


def _poisson_input_vjp(g, ans, input, target, log_input=True, full=False, eps=1e-8, reduction="mean"):
    slope = np.exp(input) - target if log_input else 1 - target / (input + float(eps))
    return unbroadcast(slope * _reduction_grad(g, reduction, np.shape(slope)), input.shape)


def _poisson_target_vjp(g, ans, input, target, log_input=True, full=False, eps=1e-8, reduction="mean"):
    slope = -input if log_input else -np.log(input + float(eps))
    if full:
        counts, t = _stirling_parts(target)
        slope = slope + np.where(counts, np.log(t) + 0.5 / t, 0)
    shape = np.broadcast_shapes(input.shape, target.shape)
    return unbroadcast(slope * _reduction_grad(g, reduction, shape), target.shape)


def _check_poisson_nll_loss(input, target, log_input=True, full=False, eps=1e-8, reduction="mean"):
    op = "poisson_nll_loss"
    _check_same_float_dtype(op, ("input", "target"), input, target)
    require_float(op, "target", target)
    _broadcast_shape(op, ("input", "target"), input, target)
    require_bool(op, "log_input", log_input)
    require_bool(op, "full", full)
    real(op, "eps", eps)
    _check_reduction(op, reduction)


def _poisson_samples(rng):
    def counts(*shape):
        return away_from(uniform(rng, shape, 0.05, 4.0), (1.0,))

    out = [Sample((uniform(rng, (4, 3)), counts(4, 3)), {"reduction": r}, r) for r in _REDUCTIONS]
    out += [Sample((uniform(rng, (0, 3)), counts(0, 3)), {"reduction": r}, f"{r}, empty") for r in _REDUCTIONS]
    rates = uniform(rng, (4, 3), 0.1, 3.0)
    return out + [
        Sample((uniform(rng, (4, 3)), counts(4, 3)), {"full": True}, "full"),
        Sample((rates, counts(4, 3)), {"log_input": False}, "rates"),
        Sample(
            (rates, counts(4, 3)),
            {"log_input": False, "full": True, "eps": 1e-3, "reduction": "sum"},
            "rates, full, eps",
        ),
        Sample((uniform(rng, (3, 1)), counts(4)), {"reduction": "none", "full": True}, "broadcast"),
        Sample((_noncontiguous(rates), counts(4, 3)), {"log_input": False}, "non-contiguous"),
        Sample((uniform(rng, (5,)), rng.integers(0, 5, size=5).astype(np.float64) + 0.0), {}, "integral counts"),
    ]


poisson_nll_loss = _loss(
    "poisson_nll_loss",
    ("input", "target"),
    _poisson_nll_loss,
    (_poisson_input_vjp, _poisson_target_vjp),
    _check_poisson_nll_loss,
    _poisson_samples,
    "torch's signature without size_average/reduce. Stirling's term counts where target > 1; the target is "
    "differentiable (as torch's composite).",
)


def _gaussian_var(input, var):
    """var shaped to broadcast against input: one dim short of the input (homoscedastic) gets a trailing 1."""
    return np.expand_dims(var, -1) if var.shape != input.shape and var.shape == input.shape[:-1] else var


def _clamped_var(var, eps):
    """max(var, eps) whose derivative in var is 1 everywhere: torch clamps in place under no_grad."""
    return var + _constant(np.maximum(_constant(var), eps) - _constant(var))


def _gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """``torch.nn.functional.gaussian_nll_loss``: (log(max(var, eps)) + (x - t)^2 / max(var, eps)) / 2,
    plus log(2 pi) / 2 with ``full``."""
    v = _clamped_var(_gaussian_var(input, var), float(eps))
    loss = 0.5 * (np.log(v) + (input - target) ** 2 / v)
    return _reduce(loss + 0.5 * math.log(2 * math.pi) if full else loss, reduction)


def _gaussian_vjp(g, ans, input, target, var, *, needs, full=False, eps=1e-6, reduction="mean"):
    v_shape = _gaussian_var(input, var)
    v = _clamped_var(v_shape, float(eps))
    d = input - target
    scale = _reduction_grad(g, reduction, np.broadcast_shapes(np.shape(d), np.shape(v)))
    dx = scale * d / v
    g_in = unbroadcast(dx, input.shape) if needs[0] else None
    g_t = unbroadcast(-dx, target.shape) if needs[1] else None
    g_v = None
    if needs[2]:
        g_v = np.reshape(unbroadcast(scale * 0.5 * (1 / v - d * d / (v * v)), np.shape(v_shape)), var.shape)
    return g_in, g_t, g_v


def _check_gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    op = "gaussian_nll_loss"
    _check_same_float_dtype(op, ("input", "target", "var"), input, target, var)
    require_float(op, "target", target)
    require_float(op, "var", var)
    _broadcast_shape(op, ("input", "target"), input, target)
    homoscedastic = var.shape == input.shape[:-1] or (
        var.ndim == input.ndim and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1
    )
    require(
        var.shape == input.shape or homoscedastic,
        op,
        "var",
        f"the input's shape {input.shape}, that shape without its last dim, or with one dim of size 1",
        var.shape,
    )
    require(not np.any(var < 0), op, "var", "non-negative variances", "a negative entry")
    require_bool(op, "full", full)
    real(op, "eps", eps)
    _check_reduction(op, reduction)


def _gaussian_samples(rng):
    def draw(shape, v_shape):
        return uniform(rng, shape), uniform(rng, shape), uniform(rng, v_shape, 0.2, 2.0)

    out = [Sample(draw((4, 3), (4, 3)), {"reduction": r}, r) for r in _REDUCTIONS]
    out += [Sample(draw((0, 3), (0, 3)), {"reduction": r}, f"{r}, empty") for r in _REDUCTIONS]
    x, t, v = draw((4, 3), (4, 3))
    return out + [
        Sample(draw((4, 3), (4, 3)), {"full": True}, "full"),
        Sample(draw((4, 3), (4,)), {"reduction": "none"}, "homoscedastic var (4,)"),
        Sample(draw((4, 3), (4, 1)), {"reduction": "sum"}, "homoscedastic var (4, 1)"),
        Sample(draw((2, 3, 4), (2, 1, 4)), {"reduction": "none"}, "var (2, 1, 4)"),
        Sample((_noncontiguous(x), t, _noncontiguous(v)), {"eps": 1e-3}, "non-contiguous"),
    ]


gaussian_nll_loss = _loss(
    "gaussian_nll_loss",
    ("input", "target", "var"),
    _gaussian_nll_loss,
    None,
    _check_gaussian_nll_loss,
    _gaussian_samples,
    "var is clamped at eps as torch does (in place, under no_grad): the gradient in var treats the clamped "
    "value as var itself. A float var is not accepted (pass a tensor).",
    joint_vjp=_gaussian_vjp,
)


# -- ctc_loss --------------------------------------------------------------------------------------------------
_CTC_NONE = -1e30  # "log 0" of the recursions: finite, so that the traced composite's logaddexp has finite
# gradients; exp underflows to exactly 0, and x + _CTC_NONE stays _CTC_NONE for any log-probability x


def _ctc_labels(targets, input_lengths, target_lengths, blank, n_classes):
    """(extended labels l' (N, 2S + 1): blank, y_1, blank, ..., y_S, blank; where a skip from s - 2 is allowed;
    each sequence's last two positions (N, 2); each sequence's T_n). Targets are (N, S) padded or 1-D
    concatenated, lengths tensors."""
    lengths = _values(target_lengths).astype(np.int64).reshape(-1)
    targets = _values(targets).astype(np.int64)
    n, width = lengths.size, int(lengths.max(initial=0))
    if targets.ndim == 1:  # concatenated: sequence k is targets[start_k : start_k + length_k]
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        index = np.minimum(starts[:, None] + np.arange(width), max(targets.size - 1, 0))
        labels = targets[index] if targets.size else np.zeros((n, width), np.int64)
    else:
        labels = targets[:, :width]
    labels = np.where(np.arange(width) < lengths[:, None], labels, blank)
    ext = np.full((n, 2 * width + 1), blank, np.int64)
    ext[:, 1::2] = labels
    allow = np.zeros(ext.shape, bool)
    allow[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    last = np.stack([2 * lengths, np.maximum(2 * lengths - 1, 0)], axis=1)
    return ext, allow, last, lengths, _values(input_lengths).astype(np.int64).reshape(-1)


def _ctc_shift(a, k: int):
    """``a`` (N, L') moved k positions right along the labels, "log 0" coming in."""
    if k == 0:
        return a
    pad = np.full((a.shape[0], k), _CTC_NONE, dtype=a.dtype)
    return np.concatenate([pad, a[:, : a.shape[1] - k]], axis=1)


def _ctc_alphas(log_probs, ext, allow, frames):
    """The forward variables log alpha_t(s), (T, N, L') list, vectorised over sequences and labels, one step a
    time step; frozen past each sequence's length. Arrays or Tensors (the composite)."""
    emit = [np.take_along_axis(log_probs[t], ext, axis=1) for t in range(log_probs.shape[0])]
    start = np.full(ext.shape, _CTC_NONE, dtype=log_probs.dtype)
    start[:, :2] = 0
    alpha = np.where(np.arange(ext.shape[1]) < 2, emit[0], start) if emit else start
    out = [alpha]
    for t in range(1, len(emit)):
        stay = np.logaddexp(alpha, _ctc_shift(alpha, 1))
        step = np.logaddexp(stay, np.where(allow, _ctc_shift(alpha, 2), _CTC_NONE)) + emit[t]
        alpha = np.where((t < frames)[:, None], step, alpha)
        out.append(alpha)
    return out


def _ctc_nll(log_probs, targets, input_lengths, target_lengths, blank):
    """(per-sequence -log p(target | input), where no alignment exists, the alphas, the labels)."""
    labels = _ctc_labels(targets, input_lengths, target_lengths, blank, log_probs.shape[-1])
    ext, allow, last, _, frames = labels
    alphas = _ctc_alphas(log_probs, ext, allow, frames)
    final = alphas[-1] if alphas else np.full(ext.shape, _CTC_NONE, log_probs.dtype)
    ends = np.take_along_axis(final, last, axis=1)
    ends = np.where(
        last[:, :1] == last[:, 1:],
        np.stack([ends[:, 0], np.full(ends.shape[:1], _CTC_NONE, log_probs.dtype)], axis=1),
        ends,
    )
    nll = -np.logaddexp(ends[:, 0], ends[:, 1])
    impossible = _values(nll) > -_CTC_NONE / 2
    return nll, impossible, alphas, labels


def _ctc_reduce(nll, impossible, lengths, reduction, zero_infinity, dtype):
    inf = np.asarray(0 if zero_infinity else np.inf, dtype)
    loss = np.where(impossible, inf, nll)
    if reduction == "mean":  # torch: each loss over its target length (at least 1), then the batch mean
        return np.mean(loss / np.maximum(lengths, 1).astype(dtype))
    return _reduce(loss, reduction)


def _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """``torch.nn.functional.ctc_loss`` of (T, N, C) log-probabilities: -log of the summed probability of every
    alignment of each target (blanks between and around labels, repeats merged), by the forward recursion."""
    nll, impossible, _, labels = _ctc_nll(log_probs, targets, input_lengths, target_lengths, blank)
    return _ctc_reduce(nll, impossible, labels[3], reduction, zero_infinity, log_probs.dtype)


def _ctc_betas(log_probs, ext, allow, last, frames):
    """log beta_t(s) (emission at t included), the backward recursion from each sequence's own last frame."""
    n_frames, n = log_probs.shape[0], ext.shape[0]
    rows = np.arange(n)[:, None]
    ends = np.zeros(ext.shape, bool)
    ends[rows, last] = True
    beta = np.full(ext.shape, _CTC_NONE, log_probs.dtype)
    out = [beta] * n_frames
    allow_next = np.concatenate([allow[:, 2:], np.zeros((n, 2), bool)], axis=1)  # a skip from s to s + 2
    for t in range(n_frames - 1, -1, -1):
        emit = np.take_along_axis(log_probs[t], ext, axis=1)
        none = np.full((n, 1), _CTC_NONE, log_probs.dtype)
        ahead1 = np.concatenate([beta[:, 1:], none], axis=1)
        ahead2 = np.concatenate([beta[:, 2:], none, none], axis=1)
        step = np.logaddexp(np.logaddexp(beta, ahead1), np.where(allow_next, ahead2, _CTC_NONE)) + emit
        beta = np.where(
            (t == frames - 1)[:, None],
            np.where(ends, emit, _CTC_NONE),
            np.where((t < frames - 1)[:, None], step, _CTC_NONE),
        )
        out[t] = beta
    return out


def _ctc_vjp(g, ans, log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    nll, impossible, alphas, (ext, allow, last, lengths, frames) = _ctc_nll(
        log_probs, targets, input_lengths, target_lengths, blank
    )
    betas = _ctc_betas(log_probs, ext, allow, last, frames)
    emit = np.stack([np.take_along_axis(log_probs[t], ext, axis=1) for t in range(log_probs.shape[0])])
    with np.errstate(over="ignore", invalid="ignore"):
        gamma = np.exp(np.stack(alphas) + np.stack(betas) - emit + nll[None, :, None])  # (T, N, L')
    one_hot = (ext[:, :, None] == np.arange(log_probs.shape[-1])).astype(log_probs.dtype)
    grad = -np.einsum("tns,nsc->tnc", gamma, one_hot)
    if reduction == "mean":
        scale = np.broadcast_to(g, lengths.shape) / (lengths.size * np.maximum(lengths, 1))
    else:
        scale = _reduction_grad(g, reduction, lengths.shape)
    scale = np.where(impossible, 0 if zero_infinity else np.nan, scale)
    return (grad * scale[None, :, None]).astype(log_probs.dtype, copy=False)


def _ctc_composite(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """The forward recursion itself written over registered ops (logaddexp, where, gather, concat): what the
    second order differentiates."""
    nll, impossible, _, labels = _ctc_nll(log_probs, targets, input_lengths, target_lengths, blank)
    return _ctc_reduce(nll, impossible, labels[3], reduction, zero_infinity, log_probs.dtype)


def _check_ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    op = "ctc_loss"
    require_float(op, "log_probs", log_probs)
    require(log_probs.ndim == 3, op, "log_probs", "a (T, N, C) tensor", log_probs.shape)
    n_frames, n, n_classes = log_probs.shape
    for name, lengths in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        require_integer(op, name, lengths)
        require(lengths.shape == (n,), op, name, f"shape ({n},), one length per sequence", lengths.shape)
    require(
        bool(np.all((0 < input_lengths) & (input_lengths <= n_frames))) if n else True,
        op,
        "input_lengths",
        f"lengths in [1, {n_frames}]",
        input_lengths.tolist(),
    )
    require_integer(op, "targets", targets)
    require(bool(np.all(target_lengths >= 0)), op, "target_lengths", "non-negative lengths", target_lengths.tolist())
    if targets.ndim == 2:
        require(
            targets.shape[0] == n and bool(np.all(target_lengths <= targets.shape[1])),
            op,
            "targets",
            f"(N={n}, S) padded targets with every target length <= S",
            targets.shape,
        )
    else:
        require(
            targets.ndim == 1 and targets.size == int(np.sum(target_lengths)),
            op,
            "targets",
            f"an (N, S) tensor, or 1-D of sum(target_lengths) = {int(np.sum(target_lengths))} labels",
            targets.shape,
        )
    require(
        isinstance(blank, int | np.integer) and not isinstance(blank, bool) and 0 <= blank < n_classes,
        op,
        "blank",
        f"a class in [0, {n_classes - 1}]",
        blank,
    )
    _check_reduction(op, reduction)
    require_bool(op, "zero_infinity", zero_infinity)
    _, _, _, lengths, _ = _ctc_labels(targets, input_lengths, target_lengths, blank, n_classes)
    if targets.size:
        ext = _ctc_labels(targets, input_lengths, target_lengths, blank, n_classes)[0][:, 1::2]
        used = ext[np.arange(ext.shape[1]) < lengths[:, None]]
        require(
            used.size == 0 or bool(np.all((used >= 0) & (used < n_classes) & (used != blank))),
            op,
            "targets",
            f"labels in [0, {n_classes - 1}] other than blank={blank}",
            used.tolist(),
        )


def _ctc_samples(rng):
    def log_softmax(x):
        return x - np.log(np.sum(np.exp(x), axis=-1, keepdims=True))

    def lp(t, n, c):
        return log_softmax(uniform(rng, (t, n, c)))

    padded = np.array([[1, 2, 2], [3, 1, 0]])
    lengths = np.array([3, 2])
    # torch's gradient is the one of ctc_loss(log_softmax(x)) in x (it adds exp(log_probs)), not the derivative
    # in log_probs: these samples compare values only through torch; tests/ops/test_loss.py pins the gradients
    return [
        Sample((lp(6, 2, 4), padded, np.array([6, 5]), lengths), {"reduction": r}, r, torch=False) for r in _REDUCTIONS
    ] + [
        Sample(
            (lp(5, 2, 4), np.array([1, 2, 2, 3, 1]), np.array([5, 4]), lengths),
            {"blank": 0},
            "concatenated targets",
            torch=False,
        ),
        Sample(
            (lp(4, 3, 3), np.array([[1, 1], [2, 0], [0, 0]]), np.array([4, 3, 2]), np.array([2, 1, 0])),
            {"blank": 0, "reduction": "sum"},
            "empty target, repeated labels",
            torch=False,
        ),
        Sample(
            (lp(5, 2, 4), np.array([[0, 2], [1, 0]]), np.array([5, 5]), np.array([2, 1])),
            {"blank": 3},
            "blank=3",
            torch=False,
        ),
        Sample(
            (lp(2, 1, 3), np.array([[1, 1]]), np.array([2]), np.array([2])),
            {"zero_infinity": True, "reduction": "sum"},
            "impossible, zero_infinity",
            torch=False,
        ),
    ]


ctc_loss = _loss(
    "ctc_loss",
    ("log_probs", "targets", "input_lengths", "target_lengths"),
    _ctc_loss,
    (_ctc_vjp, NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE, NOT_DIFFERENTIABLE),
    _check_ctc_loss,
    _ctc_samples,
    "Forward and backward recursions vectorised over sequences and labels, one step per time step. The "
    "gradient is the derivative in log_probs (torch's adds exp(log_probs): it is ctc_loss(log_softmax(x))'s "
    "gradient in x); after a log_softmax both agree.",
    composite=_ctc_composite,
)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_class_loss(g, rec, onnx_op: str, input, target, weight):
    """A class-index loss as ONNX's ``onnx_op`` (classes on axis 1, ignore_index, class weights, a weighted mean
    as torch's)."""
    if len(rec.inputs[0].shape) < 2 or 0 in rec.inputs[0].shape:
        raise NotExportable("an unbatched (C,) or empty input has no lowering")
    a = rec.attributes
    target = g.op("Cast", target, to=7)  # 7: int64
    ignore_index = int(a.get("ignore_index", -100))
    return g.op(onnx_op, input, target, weight, ignore_index=ignore_index, reduction=a.get("reduction", "mean"))


def _onnx_cross_entropy(g, rec, input, target, weight=None):
    """Class-index targets to ONNX's SoftmaxCrossEntropyLoss per target, NaN where the row holds +inf or NaN (the
    forward's inf - inf, NaN; ONNX Runtime gives inf, or skips the NaN), then the reduction: 'mean' divides by
    the summed weights of the targets that count, as torch."""
    if rec.inputs[1].dtype.kind == "f" or rec.attributes.get("label_smoothing", 0.0):
        raise NotExportable("class-probability targets and label smoothing have no lowering")
    reduction = rec.attributes.get("reduction", "mean")
    per_target = dataclasses.replace(rec, attributes={**rec.attributes, "reduction": "none"})
    loss = _onnx_class_loss(g, per_target, "SoftmaxCrossEntropyLoss", input, target, weight)
    dtype = rec.inputs[0].dtype
    bad = g.op("Or", g.op("IsInf", input, detect_negative=0), g.op("IsNaN", input))  # ONNX Runtime skips NaN
    infinite = g.op("Cast", bad, to=tensor_type(np.int32))
    has_inf = g.op("Greater", g.op("ReduceMax", infinite, g.ints([1]), keepdims=0), g.const(np.zeros((), np.int32)))
    ignore_index = g.const(np.array(rec.attributes.get("ignore_index", -100), rec.inputs[1].dtype))
    counts = g.op("Not", g.op("Equal", target, ignore_index))
    loss = g.op("Where", g.op("And", has_inf, counts), scalar(g, np.nan, dtype), loss)
    if reduction == "none":
        return loss
    total = g.op("ReduceSum", loss, keepdims=0)
    if reduction == "sum":
        return total
    w = cast_to(g, g.op("Cast", counts, to=tensor_type(np.int32)), np.int32, dtype)
    if weight is not None:
        safe = g.op("Where", counts, g.op("Cast", target, to=tensor_type(np.int64)), g.const(np.zeros((), np.int64)))
        w = g.op("Mul", w, g.op("Gather", weight, safe, axis=0))
    return g.op("Div", total, g.op("ReduceSum", w, keepdims=0))


def _onnx_nll_loss(g, rec, input, target, weight=None):
    return _onnx_class_loss(g, rec, "NegativeLogLikelihoodLoss", input, target, weight)


lowering(cross_entropy, _onnx_cross_entropy)


def _onnx_reduced(g, rec, loss, denominator=None):
    """A loss reduction: 'none', 'sum', or 'mean' (ReduceMean; or ReduceSum / ``denominator``)."""
    reduction = rec.attributes.get("reduction", "mean")
    if reduction == "none":
        return loss
    if reduction == "mean" and denominator is None and 0 in rec.output.shape + tuple(rec.inputs[0].shape):
        raise NotExportable("a mean over no elements (NaN in minitape, 0 in ONNX Runtime) has no lowering")
    if reduction == "sum" or denominator is not None:
        total = g.op("ReduceSum", loss, keepdims=0)
        return total if reduction == "sum" else g.op("Div", total, denominator)
    return g.op("ReduceMean", loss, keepdims=0)


def _onnx_pointwise(value):
    def lower(g, rec, input, target, weight=None):
        a = rec.attributes
        dtype = rec.inputs[0].dtype
        d = g.op("Sub", input, target)
        loss = value(g, d, dtype, a)
        if weight is not None:
            loss = g.op("Mul", loss, weight)
        weighted_mean = weight is not None and rec.op_name != "huber_loss"
        if weighted_mean and 0 in rec.inputs[0].shape and a.get("reduction", "mean") == "mean":
            raise NotExportable("a weighted mean over no elements has no lowering")
        return _onnx_reduced(g, rec, loss, g.op("ReduceSum", weight, keepdims=0) if weighted_mean else None)

    return lower


def _onnx_smooth(g, d, dtype, a, key: str, default: float, huber: bool):
    t = float(a.get(key, default))
    size = g.op("Abs", d)
    if t == 0 and not huber:
        return size
    half_square = g.op("Mul", g.op("Mul", d, d), scalar(g, 0.5, dtype))
    if huber:
        inside, outside = half_square, g.op("Mul", scalar(g, t, dtype), g.op("Sub", size, scalar(g, 0.5 * t, dtype)))
    else:
        inside, outside = g.op("Div", half_square, scalar(g, t, dtype)), g.op("Sub", size, scalar(g, 0.5 * t, dtype))
    return g.op("Where", g.op("Less", size, scalar(g, t, dtype)), inside, outside)


def _onnx_binary_cross_entropy(g, rec, input, target, weight=None):
    dtype = rec.inputs[0].dtype
    floor = scalar(g, -100.0, dtype)
    log_rest = g.op("Max", log1p_graph(g, rec, g.op("Neg", input)), floor)
    log_p = g.op("Max", g.op("Log", input), floor)
    loss = g.op("Sub", g.op("Mul", g.op("Sub", target, scalar(g, 1, dtype)), log_rest), g.op("Mul", target, log_p))
    if weight is not None:
        loss = g.op("Mul", loss, weight)
    return _onnx_reduced(g, rec, loss)


def _onnx_bce_with_logits(g, rec, input, target, weight=None, pos_weight=None):
    dtype = rec.inputs[0].dtype
    one = scalar(g, 1, dtype)
    z = g.op("Neg", input)  # softplus(z) = logaddexp(0, z) = max(z, 0) + log1p(exp(-|z|)), as numpy
    tail = log1p_graph(g, rec, g.op("Exp", g.op("Neg", g.op("Abs", z))))
    softplus_neg = g.op("Add", g.op("Max", z, scalar(g, 0, dtype)), tail)
    if pos_weight is not None:
        softplus_neg = g.op("Mul", softplus_neg, g.op("Add", one, g.op("Mul", g.op("Sub", pos_weight, one), target)))
    loss = g.op("Add", g.op("Mul", g.op("Sub", one, target), input), softplus_neg)
    if weight is not None:
        loss = g.op("Mul", loss, weight)
    return _onnx_reduced(g, rec, loss)


def _onnx_kl_div(g, rec, input, target):
    a = rec.attributes
    dtype = rec.inputs[0].dtype
    if a.get("log_target", False):
        loss = g.op("Mul", g.op("Exp", target), g.op("Sub", target, input))
    else:
        t_log_t = g.op(
            "Where",
            g.op("Equal", target, scalar(g, 0, dtype)),
            scalar(g, 0, dtype),
            g.op("Mul", target, g.op("Log", target)),
        )
        loss = g.op("Sub", t_log_t, g.op("Mul", target, input))
    reduction = a.get("reduction", "mean")
    if reduction == "none":
        return loss
    total = g.op("ReduceSum", loss, keepdims=0)
    shape = rec.inputs[0].shape
    if reduction == "batchmean" and shape:
        return g.op(
            "Div", total, cast_to(g, g.op("Gather", g.op("Shape", input), g.const(np.int64(0))), np.int64, dtype)
        )
    if reduction == "mean":
        return _onnx_reduced(g, rec, loss)
    return total


def _onnx_margin_ranking(g, rec, input1, input2, target):
    dtype = rec.inputs[0].dtype
    t = cast_to(g, target, rec.inputs[2].dtype, dtype)
    z = g.op(
        "Add",
        g.op("Mul", g.op("Neg", t), g.op("Sub", input1, input2)),
        scalar(g, float(rec.attributes.get("margin", 0)), dtype),
    )
    return _onnx_reduced(g, rec, g.op("Max", z, scalar(g, 0, dtype)))


def _onnx_vector_norm(g, y, dtype, p: float, axis: int):
    """As the forward's _vector_norm: ||y||_p along ``axis``, kept."""
    if p == 0:
        nonzero = g.op("Cast", g.op("Not", g.op("Equal", y, scalar(g, 0, dtype))), to=1)  # 1: FLOAT
        return cast_to(g, g.op("ReduceSum", nonzero, g.ints([axis]), keepdims=1), np.float32, dtype)
    if p == -math.inf:
        return extremum(g, "ReduceMin", g.op("Abs", y), [axis], 1, dtype)
    return pnorm(g, y, dtype, p, [axis])


def _onnx_pairwise(g, rec, x1, x2, p: float, eps: float, keepdim: bool = False):
    """pairwise_distance's value over the last dim (a 0-D difference: a vector of one entry)."""
    dtype = rec.inputs[0].dtype
    shape = np.broadcast_shapes(*(s.shape for s in rec.inputs[:2]))
    if 0 in shape:
        raise NotExportable("an empty input has no lowering")
    y = g.op("Add", g.op("Sub", x1, x2), scalar(g, eps, dtype))
    if not shape:
        return g.op("Reshape", _onnx_vector_norm(g, g.op("Reshape", y, g.ints([1])), dtype, p, 0), g.ints([]))
    n = _onnx_vector_norm(g, y, dtype, p, len(shape) - 1)
    return n if keepdim else g.op("Squeeze", n, g.ints([len(shape) - 1]))


def _onnx_pairwise_distance(g, rec, x1, x2):
    a = rec.attributes
    return _onnx_pairwise(
        g, rec, x1, x2, float(a.get("p", 2.0)), float(a.get("eps", 1e-6)), bool(a.get("keepdim", False))
    )


def _onnx_cosine_similarity(g, rec, x1, x2):
    dtype = rec.inputs[0].dtype
    shape = np.broadcast_shapes(*(s.shape for s in rec.inputs))
    if not shape or 0 in shape:
        raise NotExportable("a 0-D or empty input has no lowering")
    axis = _cosine_axis(shape, rec.attributes.get("dim", 1))
    eps = scalar(g, float(rec.attributes.get("eps", 1e-8)), dtype)
    a, b = (g.op("Expand", x, g.ints(shape)) for x in (x1, x2))
    c1, c2 = (g.op("Max", pnorm(g, v, dtype, 2.0, [axis]), eps) for v in (a, b))
    return g.op("ReduceSum", g.op("Mul", g.op("Div", a, c1), g.op("Div", b, c2)), g.ints([axis]), keepdims=0)


def _onnx_triplet_margin_loss(g, rec, anchor, positive, negative):
    a = rec.attributes
    dtype = rec.inputs[0].dtype
    p, eps = float(a.get("p", 2)), float(a.get("eps", 1e-6))
    d_pos = _onnx_pairwise(g, rec, anchor, positive, p, eps)
    d_neg = _onnx_pairwise(g, rec, anchor, negative, p, eps)
    if a.get("swap", False):
        d_neg = g.op("Min", d_neg, _onnx_pairwise(g, rec, positive, negative, p, eps))
    z = g.op("Sub", g.op("Add", scalar(g, float(a.get("margin", 1.0)), dtype), d_pos), d_neg)
    return _onnx_reduced(g, rec, g.op("Max", z, scalar(g, 0, dtype)))


lowering(pairwise_distance, _onnx_pairwise_distance)
lowering(cosine_similarity, _onnx_cosine_similarity)
lowering(triplet_margin_loss, _onnx_triplet_margin_loss)
lowering(mse_loss, _onnx_pointwise(lambda g, d, dtype, a: g.op("Mul", d, d)))
lowering(l1_loss, _onnx_pointwise(lambda g, d, dtype, a: g.op("Abs", d)))
lowering(smooth_l1_loss, _onnx_pointwise(lambda g, d, dtype, a: _onnx_smooth(g, d, dtype, a, "beta", 1.0, False)))
lowering(huber_loss, _onnx_pointwise(lambda g, d, dtype, a: _onnx_smooth(g, d, dtype, a, "delta", 1.0, True)))
lowering(nll_loss, _onnx_nll_loss)
lowering(binary_cross_entropy, _onnx_binary_cross_entropy)
lowering(binary_cross_entropy_with_logits, _onnx_bce_with_logits)
lowering(kl_div, _onnx_kl_div)
lowering(margin_ranking_loss, _onnx_margin_ranking)


def _onnx_softplus0(g, rec, z, dtype):
    """numpy's logaddexp(0, z) = max(z, 0) + log1p(exp(-|z|)) (NaN stays NaN)."""
    top = g.op("Where", g.op("Greater", z, scalar(g, 0, dtype)), z, scalar(g, 0, dtype))
    return g.op("Add", top, log1p_graph(g, rec, g.op("Exp", g.op("Neg", g.op("Abs", z)))))


def _onnx_target(g, rec, target, k: int = 1):
    """The target (input k) in the input's dtype, as the forwards' _as_input_dtype."""
    return cast_to(g, target, rec.inputs[k].dtype, rec.inputs[0].dtype)


def _onnx_soft_margin(g, rec, input, target):
    dtype = rec.inputs[0].dtype
    z = g.op("Mul", g.op("Neg", _onnx_target(g, rec, target)), input)
    return _onnx_reduced(g, rec, _onnx_softplus0(g, rec, z, dtype))


def _onnx_multilabel_soft_margin(g, rec, input, target, weight=None):
    """(softplus(-x) + (1 - t) x) [* weight], summed over the classes over their number, then reduced."""
    dtype = rec.inputs[0].dtype
    one_minus = g.op("Sub", scalar(g, 1, dtype), target)
    loss = g.op("Add", _onnx_softplus0(g, rec, g.op("Neg", input), dtype), g.op("Mul", one_minus, input))
    if weight is not None:
        loss = g.op("Mul", loss, weight)
    classes = scalar(g, rec.inputs[0].shape[-1], dtype)
    return _onnx_reduced(g, rec, g.op("Div", g.op("ReduceSum", loss, g.ints([-1]), keepdims=0), classes))


def _onnx_hinge_embedding(g, rec, input, target):
    """max(0, margin - x) where target != 1 plus x where target != -1 (np.maximum keeps NaN)."""
    dtype, t_dtype = rec.inputs[0].dtype, rec.inputs[1].dtype
    margin = scalar(g, float(rec.attributes.get("margin", 1.0)), dtype)
    zero = scalar(g, 0, dtype)
    hinge = clip(g, g.op("Sub", margin, input), dtype, low=0)
    loss = g.op(
        "Add",
        g.op("Where", g.op("Equal", target, scalar(g, 1, t_dtype)), zero, hinge),
        g.op("Where", g.op("Equal", target, scalar(g, -1, t_dtype)), zero, input),
    )
    return _onnx_reduced(g, rec, loss)


def _onnx_cosine_embedding(g, rec, input1, input2, target):
    """As the forward: cos over the last dim with 1e-12 added to each squared norm, 1 - cos for target 1,
    max(cos - margin, 0) for -1."""
    dtype, t_dtype = rec.inputs[0].dtype, rec.inputs[2].dtype

    def total(a, b):
        return g.op("ReduceSum", g.op("Mul", a, b), g.ints([-1]), keepdims=0)

    eps = scalar(g, _COSINE_EMBEDDING_EPS, dtype)
    m1, m2 = (g.op("Add", total(x, x), eps) for x in (input1, input2))
    cos = g.op("Div", total(input1, input2), g.op("Sqrt", g.op("Mul", m1, m2)))
    zero = scalar(g, 0, dtype)
    margin = scalar(g, float(rec.attributes.get("margin", 0)), dtype)
    loss = g.op(
        "Add",
        g.op("Where", g.op("Equal", target, scalar(g, 1, t_dtype)), g.op("Sub", scalar(g, 1, dtype), cos), zero),
        g.op(
            "Where",
            g.op("Equal", target, scalar(g, -1, t_dtype)),
            clip(g, g.op("Sub", cos, margin), dtype, low=0),
            zero,
        ),
    )
    return _onnx_reduced(g, rec, loss)


def _onnx_poisson_nll(g, rec, input, target):
    """exp(x) - t x (log_input) or x - t log(x + eps), plus Stirling's term where t > 1 with ``full``."""
    a = rec.attributes
    dtype = rec.inputs[0].dtype
    if a.get("log_input", True):
        loss = g.op("Sub", g.op("Exp", input), g.op("Mul", target, input))
    else:
        shifted = g.op("Add", input, scalar(g, float(a.get("eps", 1e-8)), dtype))
        loss = g.op("Sub", input, g.op("Mul", target, g.op("Log", shifted)))
    if a.get("full", False):
        counts = g.op("Greater", target, scalar(g, 1, dtype))
        t = g.op("Where", counts, target, scalar(g, 2, dtype))
        two_pi_t = g.op("Mul", scalar(g, 2 * math.pi, dtype), t)
        term = g.op("Sub", g.op("Mul", t, g.op("Log", t)), t)
        term = g.op("Add", term, g.op("Mul", scalar(g, 0.5, dtype), g.op("Log", two_pi_t)))
        loss = g.op("Add", loss, g.op("Where", counts, term, scalar(g, 0, dtype)))
    return _onnx_reduced(g, rec, loss)


def _onnx_gaussian_nll(g, rec, input, target, var):
    """0.5 (log v + (x - t)^2 / v), v = var + (max(var, eps) - var) as the forward, (+ log(2 pi) / 2 with full)."""
    a = rec.attributes
    dtype = rec.inputs[0].dtype
    shape_in, shape_var = rec.inputs[0].shape, rec.inputs[2].shape
    if shape_var != shape_in and shape_var == shape_in[:-1]:
        var = g.op("Unsqueeze", var, g.ints([-1]))
    v = g.op("Add", var, g.op("Sub", clip(g, var, dtype, low=float(a.get("eps", 1e-6))), var))
    d = g.op("Sub", input, target)
    loss = g.op("Mul", scalar(g, 0.5, dtype), g.op("Add", g.op("Log", v), g.op("Div", g.op("Mul", d, d), v)))
    if a.get("full", False):
        loss = g.op("Add", loss, scalar(g, 0.5 * math.log(2 * math.pi), dtype))
    return _onnx_reduced(g, rec, loss)


def _onnx_class_rows(g, rec, input, target):
    """(input as (N, C) rows, the target as int64 of shape (N, k), C) for the margin losses."""
    c = rec.inputs[0].shape[-1]
    x = g.op("Reshape", input, g.ints([-1, c]))
    k = 1 if rec.op_name == "multi_margin_loss" else c
    return x, g.op("Reshape", g.op("Cast", target, to=7), g.ints([-1, k])), c  # 7: INT64


def _onnx_multi_margin(g, rec, input, target, weight=None):
    """sum over i != y of w_y max(0, margin - x_y + x_i)^p / C, as the forward (z > 0 strictly)."""
    a = rec.attributes
    dtype = rec.inputs[0].dtype
    if 0 in rec.inputs[0].shape:
        raise NotExportable("an empty input has no lowering")
    x, y, c = _onnx_class_rows(g, rec, input, target)
    z = g.op("Add", g.op("Sub", scalar(g, float(a.get("margin", 1.0)), dtype), g.op("GatherElements", x, y, axis=1)), x)
    others = g.op("Not", g.op("Equal", g.const(np.arange(c, dtype=np.int64)), y))
    hinge = g.op("Where", g.op("And", g.op("Greater", z, scalar(g, 0, dtype)), others), z, scalar(g, 0, dtype))
    if int(a.get("p", 1)) == 2:
        hinge = g.op("Mul", hinge, hinge)
    if weight is not None:
        hinge = g.op("Mul", hinge, g.op("Gather", weight, y, axis=0))
    loss = g.op("Div", g.op("ReduceSum", hinge, g.ints([1]), keepdims=0), scalar(g, c, dtype))
    return _onnx_reduced(g, rec, g.op("Reshape", loss, g.ints(rec.inputs[1].shape), allowzero=1))


def _onnx_multilabel_margin(g, rec, input, target):
    """sum over listed targets j and non-targets i of max(0, 1 - x_y_j + x_i) / C; a target row ends at its
    first negative entry (no CumProd in ONNX: a CumSum of the negatives is still 0 before it)."""
    dtype = rec.inputs[0].dtype
    if 0 in rec.inputs[0].shape:
        raise NotExportable("an empty input has no lowering")
    x, y, c = _onnx_class_rows(g, rec, input, target)
    negative = g.op("Cast", g.op("Less", y, g.const(np.array(0, np.int64))), to=7)
    valid = g.op("Equal", g.op("CumSum", negative, g.const(np.array(1, np.int64))), g.const(np.array(0, np.int64)))
    safe = g.op("Where", valid, y, g.const(np.array(0, np.int64)))
    column = g.op("Unsqueeze", valid, g.ints([2]))  # (N, J, 1)
    one_hot = g.op(
        "And", g.op("Equal", g.op("Unsqueeze", safe, g.ints([2])), g.const(np.arange(c, dtype=np.int64))), column
    )
    is_target = g.op("ReduceMax", g.op("Cast", one_hot, to=6), g.ints([1]), keepdims=1)  # (N, 1, C); 6: INT32
    picked = g.op("Unsqueeze", g.op("GatherElements", x, safe, axis=1), g.ints([2]))
    z = g.op("Add", g.op("Sub", scalar(g, 1, dtype), picked), g.op("Unsqueeze", x, g.ints([1])))
    active = g.op("And", column, g.op("Equal", is_target, g.const(np.array(0, np.int32))))
    active = g.op("And", active, g.op("Greater", z, scalar(g, 0, dtype)))
    hinge = g.op("Where", active, z, scalar(g, 0, dtype))
    loss = g.op("Div", g.op("ReduceSum", hinge, g.ints([1, 2]), keepdims=0), scalar(g, c, dtype))
    return _onnx_reduced(g, rec, g.op("Reshape", loss, g.ints(rec.inputs[0].shape[:-1]), allowzero=1))


lowering(multi_margin_loss, _onnx_multi_margin)
lowering(multilabel_margin_loss, _onnx_multilabel_margin)
lowering(soft_margin_loss, _onnx_soft_margin)
lowering(multilabel_soft_margin_loss, _onnx_multilabel_soft_margin)
lowering(hinge_embedding_loss, _onnx_hinge_embedding)
lowering(cosine_embedding_loss, _onnx_cosine_embedding)
lowering(poisson_nll_loss, _onnx_poisson_nll)
lowering(gaussian_nll_loss, _onnx_gaussian_nll)
lowering(ctc_loss, not_exportable="its forward-backward recursion over time has no ONNX op (a Loop is not written)")
