"""The losses and distances (ops/loss.py) against PyTorch 2.13 beyond the generated sample checks: torch's
signatures and defaults, cross_entropy with class-probability targets (target gradient, label smoothing,
ignore_index), binary_cross_entropy at exactly 0 and 1, the kinks and hinges where the gradient follows
torch's convention (l1 at 0, smooth_l1/huber at beta/delta, margin losses at 0, swap and inf-norm ties),
kl_div at target 0 and its reductions, cosine_similarity's eps clamp, norms of huge entries, empty inputs,
first and second order, and the errors bad arguments raise. Warnings are errors here: the ops never warn."""

import inspect
import math
import re
import warnings

import numpy as np
import pytest
from oracle import LazyTorch, require_torch, run_torch_hvp_parity

import ops
import tape
from tape.functional import gradients
from tape.registry import Sample

torch = LazyTorch()  # torch imported at first use: the module collects without torch
F = torch.nn.functional

pytestmark = pytest.mark.filterwarnings("error")

RTOL, ATOL = 1e-10, 1e-12


def both(name, arrays, differentiable, seed=0, **attrs):
    """(ours, torch's) as (value, [gradients of the differentiable arrays]) for the same random cotangent;
    float64. torch's warnings (broadcasting, kl_div 'mean') are silenced: the values are compared."""
    mt = [None if a is None else tape.tensor(a, requires_grad=d, dtype=a.dtype) for a, d in zip(arrays, differentiable)]
    th = [None if a is None else torch.tensor(a, requires_grad=d) for a, d in zip(arrays, differentiable)]
    names = tape.get_op(name).input_names  # by keyword: torch puts reduction before weight
    out = getattr(ops, name)(**dict(zip(names, mt)), **attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = getattr(F, name)(**{k: v for k, v in zip(names, th) if v is not None}, **attrs)
    u = np.random.default_rng(seed).standard_normal(out.shape)
    grads = gradients(out, [t for t, d in zip(mt, differentiable) if d], [tape.tensor(u)], allow_unused=True)
    theirs = torch.autograd.grad(expected, [t for t, d in zip(th, differentiable) if d], torch.from_numpy(u),
                                 allow_unused=True)
    ours = (out.numpy(), [np.zeros(t.shape) if g is None else g.numpy() for g, t in
                          zip(grads, [t for t, d in zip(mt, differentiable) if d])])
    return ours, (expected.detach().numpy(), [np.zeros(tuple(t.shape)) if g is None else g.numpy()
                                              for g, t in zip(theirs, [t for t, d in zip(th, differentiable) if d])])


def assert_like_torch(name, arrays, differentiable, rtol=RTOL, atol=ATOL, **attrs):
    (value, grads), (expected, expected_grads) = both(name, arrays, differentiable, **attrs)
    assert value.shape == expected.shape
    np.testing.assert_allclose(value, expected, rtol=rtol, atol=atol, equal_nan=True)
    for ours, theirs in zip(grads, expected_grads):
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, equal_nan=True)
    return value, grads


def assert_hvp_like_torch(name, arrays, **attrs):
    result = run_torch_hvp_parity(tape.get_op(name), Sample(tuple(arrays), attrs))
    assert result is not None and result.ok, result and result.message


# -- signatures --------------------------------------------------------------------------------------------
NEW_OPS = ["cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
           "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "margin_ranking_loss", "triplet_margin_loss",
           "cosine_similarity", "pairwise_distance", "soft_margin_loss", "multilabel_soft_margin_loss",
           "multi_margin_loss", "multilabel_margin_loss", "hinge_embedding_loss", "cosine_embedding_loss",
           "poisson_nll_loss", "gaussian_nll_loss"]


def _torch_signature(name):
    """torch's (parameter, default) list, without the deprecated size_average and reduce."""
    fn = getattr(require_torch().nn.functional, name)  # not LazyTorch's stand-in: its signature is (*args)
    try:
        params = inspect.signature(fn).parameters.values()
        pairs = [(p.name, None if p.default is p.empty else p.default) for p in params]
    except (TypeError, ValueError):  # a builtin: its docstring's first line holds the signature
        text = re.search(rf"{name}\((.*?)\)", fn.__doc__).group(1)
        pairs = []
        for item in text.split(","):
            key, _, default = item.strip().partition("=")
            pairs.append((key, eval(default) if default else None))
    return [(k, v) for k, v in pairs if k not in ("size_average", "reduce")]


@pytest.mark.parametrize("name", NEW_OPS)
def test_signature_and_defaults_are_torchs(name):
    op = tape.get_op(name)
    assert getattr(ops, name) is op
    ours = [(n, None if d is inspect.Parameter.empty else d) for n, d in zip(op.param_names, op.defaults)]
    assert ours == _torch_signature(name)
    assert op.family == ("distance" if name in ("cosine_similarity", "pairwise_distance") else "loss")


# -- cross_entropy with class probabilities ----------------------------------------------------------------
def _probabilities(rng, shape, axis):
    e = np.exp(rng.normal(size=shape))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape", [(7, 5), (3, 4, 2, 3), (6,)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("use_weight", [False, True])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.3])
def test_cross_entropy_probability_targets_match_torch(shape, reduction, use_weight, label_smoothing):
    rng = np.random.default_rng(len(shape) + 3 * use_weight)
    axis = 0 if len(shape) == 1 else 1
    x = rng.normal(size=shape) * 3
    target = _probabilities(rng, shape, axis)
    weight = rng.uniform(0.2, 2.0, size=shape[axis]) if use_weight else None
    attrs = dict(reduction=reduction, label_smoothing=label_smoothing)
    assert_like_torch("cross_entropy", [x, target, weight], [True, True, False], **attrs)
    assert_hvp_like_torch("cross_entropy", [x, target, weight], **attrs)


def test_cross_entropy_one_hot_probabilities_equal_class_indices():
    rng = np.random.default_rng(0)
    x, labels = rng.normal(size=(6, 4)), rng.integers(0, 4, size=6)
    for smoothing in (0.0, 0.2):
        by_index = ops.cross_entropy(tape.tensor(x), labels, label_smoothing=smoothing).item()
        by_probability = ops.cross_entropy(tape.tensor(x), np.eye(4)[labels], label_smoothing=smoothing).item()
        assert by_probability == pytest.approx(by_index, rel=1e-12)


def test_cross_entropy_probability_mean_divides_by_the_count_not_the_weights():
    x, target, weight = np.zeros((3, 2)), np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]), np.array([1.0, 3.0])
    loss = ops.cross_entropy(tape.tensor(x), target, weight).item()
    assert loss == pytest.approx(np.log(2) * (1 + 3 + 2) / 3)
    assert_like_torch("cross_entropy", [x, target, weight], [True, True, False])


def test_cross_entropy_probability_target_gradient_is_minus_the_log_softmax():
    rng = np.random.default_rng(1)
    x, target = rng.normal(size=(4, 3)), _probabilities(rng, (4, 3), 1)
    t = tape.tensor(target, requires_grad=True)
    ops.cross_entropy(tape.tensor(x), t, reduction="sum", label_smoothing=0.4).backward()
    log_p = x - np.log(np.exp(x).sum(1, keepdims=True))
    np.testing.assert_allclose(t.grad.numpy(), -(1 - 0.4) * log_p, rtol=1e-12)


def test_cross_entropy_probabilities_of_an_empty_batch():
    for reduction in ("mean", "sum", "none"):
        assert_like_torch("cross_entropy", [np.ones((0, 4)), np.ones((0, 4))], [True, True], reduction=reduction)
    assert math.isnan(ops.cross_entropy(tape.tensor(np.ones((0, 4))), np.ones((0, 4))).item())


def test_cross_entropy_probabilities_on_huge_logits():
    x = np.array([[1e4, -1e4, 0.0], [-1e4, 1e4, 1e4]])
    target = np.array([[0.2, 0.5, 0.3], [1.0, 0.0, 0.0]])
    value, grads = assert_like_torch("cross_entropy", [x, target], [True, True], label_smoothing=0.1)
    assert np.isfinite(value).all() and all(np.isfinite(g).all() for g in grads)


def test_cross_entropy_negative_ignore_index_is_accepted_with_probabilities():
    rng = np.random.default_rng(2)
    x, target = rng.normal(size=(3, 4)), _probabilities(rng, (3, 4), 1)
    assert_like_torch("cross_entropy", [x, target], [True, True], ignore_index=-3)


# -- binary_cross_entropy ----------------------------------------------------------------------------------
def test_binary_cross_entropy_at_exactly_0_and_1_clamps_the_log_as_torch():
    x = np.array([0.0, 1.0, 0.0, 1.0, 1e-50, 0.5, 1 - 1e-17, 1e-3])
    t = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 0.3, 0.0, 1.0])
    xt, tt = tape.tensor(x, requires_grad=True), tape.tensor(t, requires_grad=True)
    value = ops.binary_cross_entropy(xt, tt, reduction="none")
    value.sum().backward()
    np.testing.assert_array_equal(value.numpy()[:5], [100.0, 100.0, 0.0, 0.0, 100.0])  # log clamped at -100
    floor = float(np.float32(1e-12))  # torch's EPSILON is a C float
    np.testing.assert_array_equal(xt.grad.numpy()[:2], [-1 / floor, 1 / floor])  # (x - t) / max(x (1 - x), 1e-12)
    assert tt.grad.numpy()[0] == np.inf and tt.grad.numpy()[1] == -np.inf  # -logit(x), unclamped, as torch
    assert_like_torch("binary_cross_entropy", [x, t], [True, True], reduction="none")
    assert_like_torch("binary_cross_entropy", [x, t, np.linspace(0.5, 2, 8)], [True, True, False], reduction="sum")


def test_binary_cross_entropy_in_float32_at_the_edges():
    x = np.array([1e-30, 1 - 1e-8, 0.25], dtype=np.float32)
    t = np.array([1.0, 0.0, 1.0], dtype=np.float32)
    ours = ops.binary_cross_entropy(tape.tensor(x), tape.tensor(t), reduction="none").numpy()
    assert ours.dtype == np.float32
    # the mathematical value: torch's float64 kernel on the exactly widened inputs (its float32 kernels differ by CPU)
    exact = F.binary_cross_entropy(torch.tensor(x, dtype=torch.float64), torch.tensor(t, dtype=torch.float64),
                                   reduction="none").numpy().astype(np.float32)
    np.testing.assert_allclose(ours, exact, rtol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_weight_broadcasts_and_second_order_matches_torch(reduction):
    rng = np.random.default_rng(3)
    x, t, w = rng.uniform(0.05, 0.95, (3, 4)), rng.uniform(0, 1, (3, 4)), rng.uniform(0.1, 2, (3, 1))
    assert_like_torch("binary_cross_entropy", [x, t, w], [True, True, False], reduction=reduction)
    assert_hvp_like_torch("binary_cross_entropy", [x, t, w], reduction=reduction)


# -- pointwise regression losses ---------------------------------------------------------------------------
KINK_CASES = [("l1_loss", {}), ("smooth_l1_loss", {"beta": 1.0}), ("smooth_l1_loss", {"beta": 0.0}),
              ("smooth_l1_loss", {"beta": 0.5}), ("huber_loss", {"delta": 1.0}), ("huber_loss", {"delta": 0.5}),
              ("mse_loss", {})]


@pytest.mark.parametrize("name, attrs", KINK_CASES)
def test_pointwise_losses_at_their_kinks_follow_torch(name, attrs):
    # differences of exactly 0, +-0.5 and +-1 (the kinks of l1, smooth_l1 and huber), and smooth points
    x = np.array([[0.0, 1.0, -1.0, 2.0, 0.5, -0.5, 0.25, 3.0]])
    y = np.zeros((1, 8))
    for reduction in ("none", "sum", "mean"):
        assert_like_torch(name, [x, y], [True, True], reduction=reduction, **attrs)
    assert_hvp_like_torch(name, [x, y], reduction="sum", **attrs)


def test_l1_gradient_at_a_tie_is_zero():
    x = tape.tensor(np.array([1.0, 2.0]), requires_grad=True)
    ops.l1_loss(x, np.array([1.0, 0.0]), reduction="sum").backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0])


@pytest.mark.parametrize("name, attrs", [("mse_loss", {}), ("l1_loss", {}), ("huber_loss", {"delta": 0.7})])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_weighted_pointwise_losses_match_torch(name, attrs, reduction):
    rng = np.random.default_rng(4)
    x, y, w = rng.normal(size=(3, 4)), rng.normal(size=(3, 4)), rng.uniform(0.1, 2.0, size=(3, 4))
    assert_like_torch(name, [x, y, w], [True, True, True], reduction=reduction, **attrs)
    assert_hvp_like_torch(name, [x, y, w], reduction=reduction, **attrs)
    # a target larger than the input: the weight has the input's shape, as torch requires; torch warns, as we do
    with pytest.warns(UserWarning, match=f"{name}: Using a target size"):
        assert_like_torch(name, [x[0], y, w[0]], [True, True, True], reduction=reduction, **attrs)


def test_weighted_means_divide_as_torch_2_13():
    x, y, w = np.array([1.0, 3.0]), np.zeros(2), np.array([1.0, 3.0])
    assert ops.l1_loss(tape.tensor(x), y, weight=w).item() == pytest.approx((1 + 9) / 4)  # by sum(w)
    assert ops.mse_loss(tape.tensor(x), y, weight=w).item() == pytest.approx((1 + 27) / 4)
    huber = (0.5 + 1 * (3 - 0.5) * 3) / 2  # by the element count
    assert ops.huber_loss(tape.tensor(x), y, weight=w).item() == pytest.approx(huber)
    zero = np.zeros(2)  # every weight 0: 0 / 0, as torch
    assert_like_torch("l1_loss", [x, y, zero], [True, True, True])


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_pointwise_losses_broadcast_with_torchs_warning(name):
    rng = np.random.default_rng(5)
    with pytest.warns(UserWarning, match=f"{name}: Using a target size"):
        assert_like_torch(name, [rng.normal(size=(2, 3)), rng.normal(size=(3,))], [True, True])
    with pytest.warns(UserWarning, match=f"{name}: Using a target size"):
        assert_like_torch(name, [rng.normal(size=(3, 1)), rng.normal(size=(1, 4))], [True, True], reduction="none")


# -- kl_div ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["none", "batchmean", "sum", "mean"])
def test_kl_div_at_zero_targets_follows_torch(reduction):
    x = np.log(np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]))
    t = np.array([[0.0, 0.5, 0.5], [0.2, 0.3, 0.5]])
    value, grads = assert_like_torch("kl_div", [x, t], [True, True], reduction=reduction)
    assert np.isnan(grads[1][0, 0]) and np.isfinite(np.delete(grads[1].ravel(), 0)).all()  # xlogy's 0/0, torch's
    assert np.isfinite(value).all()  # t log t is 0 at t = 0


def test_kl_div_log_target_and_negative_targets():
    rng = np.random.default_rng(6)
    x, t = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    assert_like_torch("kl_div", [x, t], [True, True], reduction="sum", log_target=True)
    value, _ = assert_like_torch("kl_div", [x, -np.abs(t)], [True, False], reduction="none")
    assert np.isnan(value).all()  # t log t of t < 0, as torch


def test_kl_div_batchmean_divides_by_the_inputs_first_dim():
    rng = np.random.default_rng(7)
    x, t = np.log(_probabilities(rng, (3,), 0)), rng.uniform(0.1, 1, (2, 3))
    value, _ = assert_like_torch("kl_div", [x, t], [True, True], reduction="batchmean")
    assert value == pytest.approx(ops.kl_div(tape.tensor(x), t, reduction="sum").item() / 3)
    scalar, _ = assert_like_torch("kl_div", [np.array(-1.0), np.array(0.3)], [True, True], reduction="batchmean")
    assert scalar == pytest.approx(0.3 * (np.log(0.3) + 1))  # 0-d: the sum
    for shape in [(0, 3), (2, 0)]:  # nothing: NaN for an empty batch, 0 for empty rows
        assert_like_torch("kl_div", [np.zeros(shape), np.ones(shape)], [True, True], reduction="batchmean")


def test_kl_div_mean_does_not_warn_where_torch_does():
    x, t = np.log(np.full((2, 2), 0.5)), np.full((2, 2), 0.5)
    ours = ops.kl_div(tape.tensor(x), t).item()  # warnings are errors in this module
    with pytest.warns(UserWarning, match="batchmean"):
        theirs = F.kl_div(torch.tensor(x), torch.tensor(t)).item()
    assert ours == pytest.approx(theirs, abs=1e-15)


def test_kl_div_second_order_matches_torch():
    rng = np.random.default_rng(8)
    x, t = rng.normal(size=(3, 4)), rng.uniform(0.1, 1.0, (3, 4))
    for reduction in ("batchmean", "mean", "none"):
        assert_hvp_like_torch("kl_div", [x, t], reduction=reduction)
        assert_hvp_like_torch("kl_div", [x, np.log(t)], reduction=reduction, log_target=True)


# -- cosine_similarity -------------------------------------------------------------------------------------
def test_cosine_similarity_clamps_small_norms_as_torch_2_13():
    x1 = np.array([[1e-9, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 2.0, 3.0], [1e-9, -2e-9, 3e-9]])
    x2 = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [2.0, 1.0, -1.0]])
    value, grads = assert_like_torch("cosine_similarity", [x1, x2], [True, True], rtol=1e-9)
    assert value[1] == 0 and value[2] == 0
    u = np.random.default_rng(0).standard_normal(4)  # both()'s cotangent
    np.testing.assert_allclose(grads[0][1], u[1] * x2[1] / np.linalg.norm(x2[1]) / 1e-8, rtol=1e-12)  # v / eps


def test_cosine_similarity_of_huge_vectors_is_exact_where_torch_overflows():
    x1, x2 = np.array([[1e200, 1e200]]), np.array([[1e200, 0.0]])
    ours = ops.cosine_similarity(tape.tensor(x1), tape.tensor(x2)).numpy()
    np.testing.assert_allclose(ours, [1 / np.sqrt(2)], rtol=1e-15)
    assert F.cosine_similarity(torch.tensor(x1), torch.tensor(x2)).item() == 0  # torch's squares overflow


@pytest.mark.parametrize("shapes, dim", [(((2, 1, 3), (4, 3)), -1), (((3, 1), (1, 4)), 0), (((), ()), 0),
                                         (((5,), (5,)), -1), (((0, 3), (0, 3)), 1), (((2, 0), (2, 0)), 1)])
def test_cosine_similarity_broadcasts_as_torch(shapes, dim):
    rng = np.random.default_rng(9)
    arrays = [rng.normal(size=s) for s in shapes]
    value, _ = assert_like_torch("cosine_similarity", arrays, [True, True], dim=dim)
    assert (np.abs(value) <= 1).all()
    if all(math.prod(s) for s in shapes):
        assert_hvp_like_torch("cosine_similarity", arrays, dim=dim)


# -- pairwise_distance -------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 1.5, 0.5, 0.0, -1.0, math.inf, -math.inf])
def test_pairwise_distance_at_zero_entries_and_ties_follows_torch(p):
    # row 0: entries tied in |y| (inf norms share the gradient); row 1: x1 = x2 - eps, a zero distance;
    # row 2: one zero entry of y
    eps = 1e-6
    x1 = np.array([[2.0, -2.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, -3.0]])
    x2 = np.array([[-eps, -eps, -eps], [eps, eps, eps], [0.0, eps, 0.0]])
    assert_like_torch("pairwise_distance", [x1, x2], [True, True], p=p)
    assert_like_torch("pairwise_distance", [x1, x2], [True, True], p=p, keepdim=True)


def test_pairwise_distance_inf_norm_ties_share_the_gradient_evenly():
    x1 = tape.tensor(np.array([[2.0, -2.0, 1.0]]), requires_grad=True)
    ops.pairwise_distance(x1, np.zeros((1, 3)), p=math.inf, eps=0.0).sum().backward()
    np.testing.assert_array_equal(x1.grad.numpy(), [[0.5, -0.5, 0.0]])


def test_pairwise_distance_of_huge_entries_does_not_overflow():
    x1 = np.array([[1e200, 1e200]])
    for p, expected in [(2.0, np.sqrt(2) * 1e200), (3.0, 2 ** (1 / 3) * 1e200), (0.5, 4e200)]:
        ours = ops.pairwise_distance(tape.tensor(x1), np.zeros((1, 2)), p=p).item()
        assert ours == pytest.approx(expected, rel=1e-14)
    tiny = ops.pairwise_distance(tape.tensor(np.array([[3e-200, 4e-200]])), np.zeros((1, 2)), eps=0.0).item()
    assert tiny == pytest.approx(5e-200, rel=1e-14)  # torch's squares underflow to 0 here


@pytest.mark.parametrize("shapes", [((4,), (3, 4)), ((3, 1), (1, 4)), ((), ()), ((5,), (5,)), ((0, 3), (0, 3)),
                                    ((2, 0), (2, 0))])
@pytest.mark.parametrize("keepdim", [False, True])
def test_pairwise_distance_shapes_match_torch(shapes, keepdim):
    rng = np.random.default_rng(10)
    assert_like_torch("pairwise_distance", [rng.normal(size=s) for s in shapes], [True, True], keepdim=keepdim)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.5, math.inf])
def test_pairwise_distance_second_order_matches_torch(p):
    rng = np.random.default_rng(11)
    assert_hvp_like_torch("pairwise_distance", [rng.normal(size=(4, 5)), rng.normal(size=(5,))], p=p)


# -- margin_ranking_loss -----------------------------------------------------------------------------------
@pytest.mark.parametrize("margin", [0.0, 1.0, -0.5])
def test_margin_ranking_hinge_at_zero_passes_the_gradient_as_torch(margin):
    # element 0 sits exactly on the hinge (z = 0) in each case
    i1, i2 = np.array([1.0, 2.0, 3.0, 0.5]), np.array([1.0 - margin, 1.0, 4.0, -1.0])
    y = np.array([1.0, -1.0, 1.0, 1.0])
    for reduction in ("none", "mean", "sum"):
        _, grads = assert_like_torch("margin_ranking_loss", [i1, i2, y], [True, True, True], margin=margin,
                                     reduction=reduction)
    assert grads[0][0] != 0  # the hinge passes the gradient at z == 0


def test_margin_ranking_integer_target_and_broadcasting():
    rng = np.random.default_rng(12)
    i1, i2 = rng.normal(size=(3, 1)), rng.normal(size=(1, 4))
    target = rng.choice([-1, 1], size=(3, 4))
    assert_like_torch("margin_ranking_loss", [i1, i2, target], [True, True, False], margin=0.3, reduction="none")
    assert_like_torch("margin_ranking_loss", [i1, i2, target.astype(float)], [True, True, True], margin=0.3)


# -- triplet_margin_loss -----------------------------------------------------------------------------------
def test_triplet_swap_tie_splits_the_gradient_as_torch():
    a, p, n = np.zeros((1, 2)), np.zeros((1, 2)), np.ones((1, 2))  # d(a, n) == d(p, n)
    _, grads = assert_like_torch("triplet_margin_loss", [a, p, n], [True, True, True], margin=3.0, swap=True)
    assert_hvp_like_torch("triplet_margin_loss", [a, p, n], margin=3.0, swap=True)


def test_triplet_hinge_at_zero_passes_the_gradient_as_torch():
    a, p, n = np.array([[0.0, 0.0]]), np.array([[1.0, 0.0]]), np.array([[0.0, 2.0]])  # 1 + 1 - 2 == 0 exactly
    value, grads = assert_like_torch("triplet_margin_loss", [a, p, n], [True, True, True], p=1, eps=0.0)
    assert value == 0 and np.abs(grads[0]).sum() > 0


@pytest.mark.parametrize("p", [2.0, 1.0, math.inf, 0.5])
@pytest.mark.parametrize("swap", [False, True])
def test_triplet_options_match_torch(p, swap):
    rng = np.random.default_rng(13)
    a, pos, neg = rng.normal(size=(6, 4)), rng.normal(size=(1, 4)), rng.normal(size=(6, 1))
    for reduction in ("none", "mean", "sum"):
        assert_like_torch("triplet_margin_loss", [a, pos, neg], [True, True, True], p=p, swap=swap,
                          reduction=reduction, margin=0.8)
    assert_hvp_like_torch("triplet_margin_loss", [a, pos, neg], p=p, swap=swap, margin=0.8)


def test_triplet_of_single_vectors_and_scalars():
    rng = np.random.default_rng(14)
    assert_like_torch("triplet_margin_loss", [rng.normal(size=4) for _ in range(3)], [True] * 3)
    assert_like_torch("triplet_margin_loss", [np.array(x) for x in (1.0, 1.5, -0.5)], [True] * 3)


# -- empty inputs ------------------------------------------------------------------------------------------
EMPTY_CASES = [
    ("binary_cross_entropy", [np.zeros((0, 3)), np.zeros((0, 3))], {}),
    ("kl_div", [np.zeros((0, 3)), np.ones((0, 3))], {"reduction": "mean"}),
    ("mse_loss", [np.zeros((0, 3)), np.zeros((0, 3)), np.ones((0, 3))], {}),
    ("l1_loss", [np.zeros((0, 3)), np.zeros((0, 3))], {}),
    ("smooth_l1_loss", [np.zeros((0, 3)), np.zeros((0, 3))], {}),
    ("huber_loss", [np.zeros((0, 3)), np.zeros((0, 3)), np.ones((0, 3))], {}),
    ("margin_ranking_loss", [np.zeros(0), np.zeros(0), np.zeros(0)], {}),
    ("triplet_margin_loss", [np.zeros((0, 3))] * 3, {}),
    ("cross_entropy", [np.zeros((0, 3)), np.zeros((0, 3))], {"label_smoothing": 0.2}),
]


@pytest.mark.parametrize("name, arrays, attrs", EMPTY_CASES, ids=[c[0] for c in EMPTY_CASES])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_empty_inputs_work_forward_and_backward_as_torch(name, arrays, attrs, reduction):
    attrs = {**attrs, "reduction": reduction}
    value, grads = assert_like_torch(name, arrays, [True] * len(arrays), **attrs)
    assert (reduction != "mean") or math.isnan(value)
    assert all(g.shape == a.shape for g, a in zip(grads, arrays))


# -- errors ------------------------------------------------------------------------------------------------
f64 = np.zeros((4, 3))
half = np.full((4, 3), 0.5)


@pytest.mark.parametrize("call, error, pattern", [
    (lambda: ops.cross_entropy(f64, half, ignore_index=0), ValueError, "cross_entropy: argument 'ignore_index'"),
    (lambda: ops.cross_entropy(f64, np.zeros((4, 2))), ValueError, "cross_entropy: argument 'target'"),
    (lambda: ops.cross_entropy(f64, half, label_smoothing=-0.1), ValueError,
     "cross_entropy: argument 'label_smoothing'"),
    (lambda: ops.cross_entropy(f64, half, np.ones(4)), ValueError, "cross_entropy: argument 'weight'"),
    (lambda: ops.binary_cross_entropy(f64 + 1.5, half), ValueError, "binary_cross_entropy: argument 'input'"),
    (lambda: ops.binary_cross_entropy(f64 + np.nan, half), ValueError, "binary_cross_entropy: argument 'input'"),
    (lambda: ops.binary_cross_entropy(half, half - 1), ValueError, "binary_cross_entropy: argument 'target'"),
    (lambda: ops.binary_cross_entropy(half, half[0]), ValueError, "binary_cross_entropy: argument 'target'"),
    (lambda: ops.binary_cross_entropy(half, half, np.ones((2, 4, 3))), ValueError,
     "binary_cross_entropy: argument 'weight'"),
    (lambda: ops.l1_loss(f64, np.zeros((2, 3))), ValueError, "l1_loss: argument 'target'"),
    (lambda: ops.l1_loss(f64, f64, weight=np.ones(3)), ValueError, "l1_loss: argument 'weight'"),
    (lambda: ops.mse_loss(f64, f64, reduction="batchmean"), ValueError, "mse_loss: argument 'reduction'"),
    (lambda: ops.smooth_l1_loss(f64, f64, beta=-1.0), ValueError, "smooth_l1_loss: argument 'beta'"),
    (lambda: ops.smooth_l1_loss(f64, f64, beta="1"), TypeError, "smooth_l1_loss: argument 'beta'"),
    (lambda: ops.huber_loss(f64, f64, delta=0.0), ValueError, "huber_loss: argument 'delta'"),
    (lambda: ops.huber_loss(np.zeros(3, dtype=np.int64), np.zeros(3)), TypeError, "huber_loss: argument 'input'"),
    (lambda: ops.kl_div(f64, f64, reduction="avg"), ValueError, "kl_div: argument 'reduction'"),
    (lambda: ops.kl_div(f64, f64, log_target=1), TypeError, "kl_div: argument 'log_target'"),
    (lambda: ops.kl_div(f64, np.zeros(2)), ValueError, "kl_div: argument 'target'"),
    (lambda: ops.cosine_similarity(f64, f64, dim=2), ValueError, "cosine_similarity: argument 'dim'"),
    (lambda: ops.cosine_similarity(f64, f64, eps=-1.0), ValueError, "cosine_similarity: argument 'eps'"),
    (lambda: ops.cosine_similarity(f64, np.zeros((3, 4))), ValueError, "cosine_similarity: argument 'x2'"),
    (lambda: ops.pairwise_distance(np.zeros((2, 0)), np.zeros((2, 0)), p=math.inf), ValueError,
     "pairwise_distance: argument 'p'"),
    (lambda: ops.pairwise_distance(f64, f64, p=math.nan), ValueError, "pairwise_distance: argument 'p'"),
    (lambda: ops.pairwise_distance(f64, f64, keepdim=None), TypeError, "pairwise_distance: argument 'keepdim'"),
    (lambda: ops.margin_ranking_loss(f64[0], f64[:1], f64[0]), ValueError, "margin_ranking_loss: argument 'input2'"),
    (lambda: ops.margin_ranking_loss(f64, f64, f64 > 0), ValueError, "margin_ranking_loss: argument 'target'"),
    (lambda: ops.triplet_margin_loss(f64, f64, f64, margin=0.0), ValueError,
     "triplet_margin_loss: argument 'margin'"),
    (lambda: ops.triplet_margin_loss(f64, f64[0], f64), ValueError, "triplet_margin_loss: argument 'positive'"),
    (lambda: ops.triplet_margin_loss(f64, f64, f64, swap="yes"), TypeError, "triplet_margin_loss: argument 'swap'"),
    (lambda: ops.triplet_margin_loss(f64, np.zeros((4, 2)), f64), ValueError,
     "triplet_margin_loss: argument 'positive'"),
])
def test_bad_arguments_raise_naming_op_and_argument(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


# -- issue 21's losses at their edges ------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_gaussian_nll_loss_var_below_eps_is_clamped_with_torchs_gradient(reduction):
    """torch clamps var at eps in place under no_grad: the value uses max(var, eps), the gradient in var is
    that of the clamped value (not 0, which the derivative of the forward would be); finite differences cannot
    see this, so it is pinned against torch here."""
    rng = np.random.default_rng(3)
    x, t, v = rng.normal(size=(4, 3)), rng.normal(size=(4, 3)), rng.uniform(0.2, 2.0, size=(4, 3))
    v[0, 0], v[1, 2], v[3, 1] = 1e-8, 0.0, 1e-3
    _, grads = assert_like_torch("gaussian_nll_loss", [x, t, v], [True, True, True], eps=1e-3, reduction=reduction)
    assert np.all(grads[2][[0, 1], [0, 2]] != 0)


def test_cosine_embedding_loss_of_a_zero_vector_matches_torch():
    """a zero vector: cos = 0 through the 1e-12 added to each squared norm, and a huge but finite gradient."""
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    b[1] = 0.0
    target = np.array([1.0, 1.0, -1.0, -1.0])
    # rtol 1e-8: torch forms the 1e5-sized gradient in another order (relative rounding ~2e-9 here)
    value, grads = assert_like_torch("cosine_embedding_loss", [a, b, target], [True, True, False], rtol=1e-8,
                                     margin=-0.5, reduction="none")
    assert value[1] == 1.0 and np.all(np.isfinite(grads[1])) and np.abs(grads[1][1]).max() > 1e5


@pytest.mark.parametrize("name, arrays, attrs", [
    ("multi_margin_loss", [np.array([[1.0, 2.0, 0.0, 1.5]]), np.array([1])], {"reduction": "sum"}),
    ("multilabel_margin_loss", [np.array([[1.0, 2.0, 0.0, 1.5]]), np.array([[1, 3, -1, 0]])], {"reduction": "sum"}),
    ("hinge_embedding_loss", [np.array([1.0, 0.5, 2.0]), np.array([-1.0, -1.0, 1.0])], {"reduction": "sum"}),
    ("cosine_embedding_loss", [np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]), np.array([-1.0])],
     {"reduction": "sum"}),
])
def test_margin_losses_at_exactly_the_hinge_follow_torch(name, arrays, attrs):
    """z == 0 exactly: multi_margin / multilabel_margin pass no gradient (torch's kernels test z > 0), the
    clamp_min hinges of hinge_embedding / cosine_embedding pass it."""
    assert_like_torch(name, arrays, [True] + [False] * (len(arrays) - 1), **attrs)


@pytest.mark.parametrize("name, arrays, message", [
    ("soft_margin_loss", [np.zeros((3, 1)), np.ones(4)], "soft_margin_loss: argument 'target' expected the input's"),
    ("multi_margin_loss", [np.zeros((2, 3)), np.array([0, 3])], "multi_margin_loss: argument 'target' expected class"),
    ("multilabel_margin_loss", [np.zeros((2, 3)), np.array([[0, -2, 1]] * 2)],
     "multilabel_margin_loss: argument 'target' expected class indices"),
    ("cosine_embedding_loss", [np.zeros((2, 3)), np.zeros((2, 4)), np.ones(2)],
     "cosine_embedding_loss: argument 'input2' expected input1's shape"),
    ("gaussian_nll_loss", [np.zeros((2, 3)), np.zeros((2, 3)), -np.ones((2, 3))],
     "gaussian_nll_loss: argument 'var' expected non-negative"),
    ("gaussian_nll_loss", [np.zeros((2, 3)), np.zeros((2, 3)), np.ones((3,))],
     "gaussian_nll_loss: argument 'var' expected the input's shape"),
])
def test_issue_21_losses_refuse_bad_arguments_naming_them(name, arrays, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        getattr(ops, name)(*[tape.tensor(a) for a in arrays])


def test_multi_margin_loss_refuses_p_other_than_1_or_2():
    with pytest.raises(ValueError, match=re.escape("multi_margin_loss: argument 'p' expected 1 or 2")):
        ops.multi_margin_loss(tape.tensor(np.zeros((2, 3))), tape.tensor(np.array([0, 1])), p=3)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("concatenated", [False, True])
def test_ctc_loss_matches_torch_through_log_softmax(reduction, concatenated):
    """torch's ctc_loss gradient in log_probs adds exp(log_probs) (it is the gradient of ctc_loss(log_softmax(x))
    in x); ours is the derivative in log_probs. Through a log_softmax the two are the same function of x: values
    and gradients are compared there, with padded and concatenated targets, a blank
    other than 0, repeated labels and an empty target."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(7, 3, 5))
    padded = np.array([[1, 1, 2], [4, 2, 0], [0, 0, 0]])
    lengths, frames = np.array([3, 2, 0]), np.array([7, 5, 3])
    targets = np.array([1, 1, 2, 4, 2]) if concatenated else padded
    mt = tape.tensor(x, requires_grad=True)
    ours = ops.ctc_loss(ops.log_softmax(mt, -1), tape.tensor(targets), tape.tensor(frames), tape.tensor(lengths),
                        blank=3, reduction=reduction)
    th = torch.tensor(x, requires_grad=True)
    theirs = F.ctc_loss(th.log_softmax(-1), torch.tensor(targets), torch.tensor(frames), torch.tensor(lengths),
                        blank=3, reduction=reduction)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-12)
    u = rng.normal(size=ours.shape)
    (g,) = gradients(ours, [mt], [tape.tensor(u)])
    (expected,) = torch.autograd.grad(theirs, [th], torch.from_numpy(u))
    np.testing.assert_allclose(g.numpy(), expected.numpy(), rtol=1e-10, atol=1e-12)
    # torch 2.13 has no double backward for ctc_loss: the second order is checked by the generated gradgradcheck


def test_ctc_loss_of_an_impossible_alignment_is_inf_or_zero_as_torch():
    lp = np.log(np.full((2, 1, 3), 1 / 3))  # two frames cannot emit "1 1" (it needs a blank between)
    args = [tape.tensor(lp, requires_grad=True), tape.tensor(np.array([[1, 1]])), tape.tensor(np.array([2])),
            tape.tensor(np.array([2]))]
    assert ops.ctc_loss(*args, reduction="sum").numpy() == np.inf
    zero = ops.ctc_loss(*args, reduction="sum", zero_infinity=True)
    assert zero.numpy() == 0
    (g,) = gradients(zero, [args[0]])
    np.testing.assert_array_equal(g.numpy(), 0)
    expected = F.ctc_loss(torch.tensor(lp), torch.tensor([[1, 1]]), [2], [2], reduction="sum").item()
    assert expected == np.inf


@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_an_ignored_target_on_a_row_of_nan_or_inf_counts_zero_as_torchs(name, reduction):
    """Before: the ignored row's loss was NaN (NaN or inf - inf times its weight 0), so one such row made the
    mean NaN where torch skips it (found by the ONNX export's edge-value check: ONNX Runtime gives torch's 0)."""
    x = np.array([[2.0, np.inf, -np.inf], [np.nan, 1.0, 2.0], [np.inf, np.inf, 1.0], [1.0, 2.0, 3.0]])
    target, weight = np.array([-100, -100, 2, 1]), np.array([0.5, 1.0, 2.0])
    ours = getattr(ops, name)(tape.tensor(x), tape.tensor(target), weight=tape.tensor(weight), reduction=reduction)
    theirs = getattr(torch.nn.functional, name)(torch.tensor(x), torch.tensor(target), weight=torch.tensor(weight),
                                                reduction=reduction)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
