"""The normalization, loss, dropout and embedding ops against PyTorch beyond the generated sample checks:
each public name is the registered op with torch's signature, stability on logits of +-1e4, every
cross_entropy option (first and second order), empty shapes, embedding's padding row and repeated indices,
dropout's replayable mask, and the errors bad arguments raise."""

import importlib.util
import re

import numpy as np
import pytest
from oracle import LazyTorch, run_torch_hvp_parity

import ops
import tape
from tape.functional import gradients
from tape.registry import Sample

torch = LazyTorch()  # torch imported at first use: the module collects without torch
F = torch.nn.functional

TOLERANCE = {np.float64: dict(rtol=1e-7, atol=1e-9), np.float32: dict(rtol=1e-4, atol=1e-5)}


def run_both(ours, theirs, arrays, differentiable, dtype, seed=0):
    """Output and input gradients of ``ours`` (minitape) and ``theirs`` (torch) on the same arrays, for the
    same random upstream gradient. ``differentiable[i]`` says whether arrays[i] gets a gradient."""
    arrays = [a.astype(dtype) if a is not None and a.dtype.kind == "f" else a for a in arrays]
    mt = [None if a is None else tape.tensor(a, requires_grad=d, dtype=a.dtype) for a, d in zip(arrays, differentiable)]
    th = [None if a is None else torch.tensor(a, requires_grad=d) for a, d in zip(arrays, differentiable)]
    out, expected = ours(*mt), theirs(*th)
    upstream = np.random.default_rng(seed).standard_normal(out.shape).astype(dtype)
    out.backward(upstream)
    expected.backward(torch.from_numpy(upstream))
    grads = [(t.grad.numpy(), e.grad.numpy()) for t, e, d in zip(mt, th, differentiable) if d]
    return (out.numpy(), expected.detach().numpy()), grads


def assert_matches(pairs, dtype):
    for ours, theirs in pairs:
        assert ours.dtype == np.dtype(dtype)
        np.testing.assert_allclose(ours, theirs, **TOLERANCE[dtype])


# -- stability ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_family_is_finite_and_matches_torch_on_huge_logits(name, dtype):
    x = np.array([[1e4, -1e4, 0.0, 1e4 - 3], [-1e4, -1e4 + 1, -1e4 + 2, -1e4]])
    value, grads = run_both(lambda t: getattr(ops, name)(t, dim=-1), lambda t: getattr(torch, name)(t, dim=-1),
                            [x], [True], dtype)
    assert np.isfinite(value[0]).all() and np.isfinite(grads[0][0]).all()
    assert_matches([value] + grads, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_is_finite_and_matches_torch_on_huge_logits(dtype):
    x = np.array([[1e4, -1e4, 0.0], [-1e4, 1e4, 1e4], [-1e4, -1e4, -1e4]])
    target = np.array([1, 0, 2])
    value, grads = run_both(lambda i, t: ops.cross_entropy(i, t, label_smoothing=0.1),
                            lambda i, t: F.cross_entropy(i, t, label_smoothing=0.1), [x, target], [True, False], dtype)
    assert np.isfinite(value[0]).all() and np.isfinite(grads[0][0]).all()
    assert value[0] > 1e4  # target 1 of row 0 is 2e4 below the best logit
    assert_matches([value] + grads, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bce_with_logits_is_finite_and_matches_torch_on_huge_logits(dtype):
    x = np.array([1e4, -1e4, 1e4, -1e4, 30.0, -30.0])
    target = np.array([1.0, 0.0, 0.0, 1.0, 0.5, 0.25])
    pos_weight = np.array([2.0])
    value, grads = run_both(
        lambda i, t, pw: ops.binary_cross_entropy_with_logits(i, t, reduction="none", pos_weight=pw),
        lambda i, t, pw: F.binary_cross_entropy_with_logits(i, t, reduction="none", pos_weight=pw),
        [x, target, pos_weight], [True, True, False], dtype)
    assert np.isfinite(value[0]).all() and all(np.isfinite(g[0]).all() for g in grads)
    assert value[0][0] == 0 and value[0][1] == 0  # confident and right: no loss
    assert_matches([value] + grads, dtype)


# -- cross_entropy / nll_loss ------------------------------------------------------------------------------
def _class_problem(shape, rng, ignore_index):
    n_classes = shape[0] if len(shape) == 1 else shape[1]
    target_shape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    x = rng.normal(size=shape) * 3
    target = rng.integers(0, n_classes, size=target_shape)
    if target.ndim:
        target.reshape(-1)[::3] = ignore_index  # every third target is ignored
    return x, target, rng.uniform(0.2, 2.0, size=n_classes)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7, 5), (3, 4, 2, 3), (6,)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("use_weight", [False, True])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.25])
@pytest.mark.parametrize("ignore_index", [-100, 1])
def test_cross_entropy_options_match_torch(dtype, shape, reduction, use_weight, label_smoothing, ignore_index):
    rng = np.random.default_rng(len(shape) * 7 + int(use_weight))
    x, target, weight = _class_problem(shape, rng, ignore_index)
    kwargs = dict(ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing)
    value, grads = run_both(lambda i, t, w: ops.cross_entropy(i, t, w, **kwargs),
                            lambda i, t, w: F.cross_entropy(i, t, w, **kwargs),
                            [x, target, weight if use_weight else None], [True, False, False], dtype)
    assert_matches([value] + grads, dtype)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("use_weight", [False, True])
def test_nll_loss_matches_torch_with_ignored_targets(reduction, use_weight):
    rng = np.random.default_rng(3)
    x, target, weight = _class_problem((2, 5, 3), rng, -100)
    value, grads = run_both(
        lambda i, t, w: ops.nll_loss(ops.log_softmax(i, dim=1), t, w, reduction=reduction),
        lambda i, t, w: F.nll_loss(F.log_softmax(i, dim=1), t, w, reduction=reduction),
        [x, target, weight if use_weight else None], [True, False, False], np.float64)
    assert_matches([value] + grads, np.float64)


def test_cross_entropy_mean_divides_by_the_weights_of_counted_targets():
    x = np.zeros((3, 2))  # every log-probability is log(1/2)
    target = np.array([0, 1, -100])
    weight = np.array([1.0, 3.0])
    loss = ops.cross_entropy(tape.tensor(x), target, tape.tensor(weight)).item()
    assert loss == pytest.approx(np.log(2) * (1 + 3) / (1 + 3))
    loss_sum = ops.cross_entropy(tape.tensor(x), target, tape.tensor(weight), reduction="sum").item()
    assert loss_sum == pytest.approx(np.log(2) * 4)


# -- norms -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rms_norm_default_eps_is_the_dtype_epsilon(dtype):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 8)) * 1e-4  # mean square ~1e-8: the eps (1.2e-7 in float32) is visible
    weight = rng.normal(size=(8,))
    value, grads = run_both(lambda i, w: ops.rms_norm(i, (8,), w), lambda i, w: F.rms_norm(i, (8,), w),
                            [x, weight], [True, True], dtype)
    assert_matches([value] + grads, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_matches_torch_on_a_wide_input(dtype):
    rng = np.random.default_rng(1)
    x, w, b = rng.normal(size=(4, 6, 32)) * 5 + 3, rng.normal(size=(32,)), rng.normal(size=(32,))
    value, grads = run_both(lambda i, w, b: ops.layer_norm(i, (32,), w, b),
                            lambda i, w, b: F.layer_norm(i, (32,), w, b), [x, w, b], [True, True, True], dtype)
    assert_matches([value] + grads, dtype)


# -- embedding ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding_padding_row_gets_no_gradient_and_repeats_accumulate(padding_idx):
    rng = np.random.default_rng(0)
    weight = rng.normal(size=(5, 3))
    indices = np.array([[2, 2, 4], [0, 2, 4]])
    value, grads = run_both(lambda i, w: ops.embedding(i, w, padding_idx=padding_idx),
                            lambda i, w: F.embedding(i, w, padding_idx=padding_idx),
                            [indices, weight], [False, True], np.float64)
    assert_matches([value] + grads, np.float64)
    w = tape.tensor(weight, requires_grad=True, dtype=np.float64)
    ops.embedding(indices, w, padding_idx=padding_idx).sum().backward()
    counts = np.bincount(indices.ravel(), minlength=5).astype(float)
    if padding_idx is not None:
        counts[padding_idx] = 0
    np.testing.assert_array_equal(w.grad.numpy(), np.repeat(counts[:, None], 3, axis=1))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 4])
def test_embedding_bag_keeps_a_non_finite_row_inside_its_bags(torch, mode, padding_idx):
    """A NaN or inf in one looked-up row reaches only the bags holding it (0 * NaN, 0 * inf must not leak into the
    others). max: infinities only -- torch's max keeps a NaN only when it comes first in the bag (its kernel
    compares with >), minitape's is NaN wherever the bag holds one (numpy's argmax)."""
    weight = np.random.default_rng(0).random((6, 3))
    weight[4, 1], weight[1, 2] = (-np.inf if mode == "max" else np.nan), np.inf
    index, offsets = np.array([1, 4, 4, 0, 5, 2, 3]), np.array([0, 2, 2, 5])
    got = ops.embedding_bag(index, weight, offsets, mode=mode, padding_idx=padding_idx).numpy()
    want = torch.nn.functional.embedding_bag(
        torch.tensor(index), torch.tensor(weight), torch.tensor(offsets), mode=mode, padding_idx=padding_idx
    ).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)  # NaN where torch has NaN, and only there


# -- dropout -----------------------------------------------------------------------------------------------
def test_dropout_backward_reuses_the_forward_mask():
    x = tape.tensor(np.random.default_rng(0).uniform(1, 2, size=(50, 40)), requires_grad=True, dtype=np.float64)
    out = ops.dropout(x, p=0.4, rng=np.random.default_rng(5))
    out.backward(np.ones(out.shape))
    kept = out.numpy() != 0  # inputs are >= 1, so a zero output means dropped
    np.testing.assert_allclose(out.numpy()[kept], x.numpy()[kept] / 0.6)
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.6)


def test_dropout_keep_rate_and_generator_state():
    p, n = 0.3, 200_000
    x = tape.tensor(np.ones(n, dtype=np.float32))
    out = ops.dropout(x, p=p, rng=np.random.default_rng(1)).numpy()
    kept = np.count_nonzero(out)
    sigma = np.sqrt(n * p * (1 - p))
    assert abs(kept - n * (1 - p)) < 5 * sigma
    assert out.dtype == np.float32 and set(np.unique(out)) == {np.float32(0), np.float32(1 / (1 - p))}
    assert abs(out.mean() - 1) < 0.01  # inverted scaling keeps the expectation
    again = ops.dropout(x, p=p, rng=np.random.default_rng(1)).numpy()
    np.testing.assert_array_equal(out, again)  # same generator state, same mask
    other = ops.dropout(x, p=p, rng=np.random.default_rng(2)).numpy()
    assert not np.array_equal(out, other)


def test_dropout_with_an_int_rng_is_a_fixed_mask():
    x = tape.tensor(np.ones((6, 7)))
    a, b = ops.dropout(x, p=0.5, rng=11).numpy(), ops.dropout(x, p=0.5, rng=11).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, ops.dropout(x, p=0.5, rng=12).numpy())


def test_dropout_is_the_registered_op_without_a_seed_argument():
    op = tape.get_op("dropout")
    assert ops.dropout is op and op.param_names == ("input", "p", "training", "rng")


def test_dropout_records_the_seed_it_drew_and_replays_the_same_mask():
    x = tape.tensor(np.ones((8, 8)), requires_grad=True)
    with tape.ExecutionTape() as recorded:
        out = ops.dropout(x, p=0.5, rng=np.random.default_rng(3))
    seed = out.grad_fn.attrs["rng"]
    assert isinstance(seed, int)  # the attribute holds the seed the forward drew, not the generator
    np.testing.assert_array_equal(ops.dropout(x, p=0.5, rng=seed).numpy(), out.numpy())
    (replayed,) = recorded.replay().values()
    np.testing.assert_array_equal(replayed, out.numpy())


def test_dropout_second_order_uses_the_forward_mask():
    x = tape.tensor(np.random.default_rng(0).uniform(1, 2, size=(5, 6)), requires_grad=True)
    out = ops.dropout(x, p=0.5, rng=np.random.default_rng(4))
    kept = out.numpy() != 0
    (g,) = gradients(ops.sum(out * out), [x], create_graph=True)  # 2 * out * mask / (1 - p)
    np.testing.assert_allclose(g.numpy(), 2 * out.numpy() * kept / 0.5)
    (gg,) = gradients(ops.sum(g), [x])
    np.testing.assert_allclose(gg.numpy(), 2 * kept / 0.25)


def test_dropout_identity_and_extremes():
    x = tape.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    for same in (ops.dropout(x, p=0.5, training=False), ops.dropout(x, p=0.0)):
        np.testing.assert_array_equal(same.numpy(), x.numpy())
        (g,) = gradients(ops.sum(same), [x])
        np.testing.assert_array_equal(g.numpy(), 1)
    zeros = ops.dropout(x, p=1.0, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(zeros.numpy(), 0)
    zeros.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 0)
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="dropout: argument 'p'"):
            ops.dropout(x, p=bad)
    with pytest.raises(TypeError, match="dropout: argument 'rng'"):
        ops.dropout(x, p=0.5, rng="seed")


# -- the ops are the registered ops, with torch's signatures ------------------------------------------------
SIGNATURES = {
    "softmax": ("input", "dim", "dtype"),
    "log_softmax": ("input", "dim", "dtype"),
    "layer_norm": ("input", "normalized_shape", "weight", "bias", "eps"),
    "rms_norm": ("input", "normalized_shape", "weight", "eps"),
    "embedding": ("input", "weight", "padding_idx"),
    "embedding_dense_backward": ("grad_output", "indices", "num_weights", "padding_idx"),
    "cross_entropy": ("input", "target", "weight", "ignore_index", "reduction", "label_smoothing"),
    "nll_loss": ("input", "target", "weight", "ignore_index", "reduction"),
    "mse_loss": ("input", "target", "reduction", "weight"),
    "binary_cross_entropy_with_logits": ("input", "target", "weight", "reduction", "pos_weight"),
}


@pytest.mark.parametrize("name", SIGNATURES)
def test_public_name_is_the_registered_op_with_torchs_signature(name):
    op = tape.get_op(name)
    assert getattr(ops, name) is op
    assert op.param_names == SIGNATURES[name]
    assert op.family in ("normalization", "loss", "dropout", "embedding")


def test_the_functional_ops_module_named_nn_is_gone():
    assert importlib.util.find_spec("ops.nn") is None  # tape.train.nn holds the Modules; ops has no "nn"


def test_layer_norm_positional_call_as_in_torch():
    rng = np.random.default_rng(0)
    x, w, b = rng.normal(size=(2, 5)), rng.normal(size=5), rng.normal(size=5)
    ours = ops.layer_norm(tape.tensor(x), [5], tape.tensor(w), tape.tensor(b), 1e-3).numpy()
    np.testing.assert_allclose(ours, F.layer_norm(*map(torch.tensor, (x,)), [5], torch.tensor(w), torch.tensor(b),
                                                  1e-3).numpy(), **TOLERANCE[np.float64])


# -- empty shapes ------------------------------------------------------------------------------------------
def _long(*shape):
    return np.zeros(shape, dtype=np.int64)


EMPTY_CASES = {
    "softmax over an empty dim": (lambda lib, x: lib.softmax(x, dim=-1), [np.ones((3, 0))], [True]),
    "log_softmax of zero rows": (lambda lib, x: lib.log_softmax(x, dim=1), [np.ones((0, 4))], [True]),
    "layer_norm of (0, 4)": (lambda lib, x, w, b: _functional(lib).layer_norm(x, (4,), w, b),
                             [np.ones((0, 4)), np.ones(4), np.ones(4)], [True, True, True]),
    "layer_norm of zero features": (lambda lib, x: _functional(lib).layer_norm(x, (0,)), [np.ones((3, 0))], [True]),
    "rms_norm of (0, 5)": (lambda lib, x, w: _functional(lib).rms_norm(x, (5,), w), [np.ones((0, 5)), np.ones(5)],
                           [True, True]),
    "cross_entropy mean of an empty batch": (lambda lib, x, t: _functional(lib).cross_entropy(x, t),
                                             [np.ones((0, 4)), _long(0)], [True, False]),
    "cross_entropy sum of an empty batch": (lambda lib, x, t: _functional(lib).cross_entropy(x, t, reduction="sum"),
                                            [np.ones((0, 4)), _long(0)], [True, False]),
    "cross_entropy none, smoothing, (N, C, 0)": (
        lambda lib, x, t: _functional(lib).cross_entropy(x, t, reduction="none", label_smoothing=0.2),
        [np.ones((2, 4, 0)), _long(2, 0)], [True, False]),
    "nll_loss mean of an empty batch": (lambda lib, x, t, w: _functional(lib).nll_loss(x, t, w),
                                        [np.ones((0, 4)), _long(0), np.ones(4)], [True, False, False]),
    "mse_loss mean of nothing": (lambda lib, x, y: _functional(lib).mse_loss(x, y), [np.ones((0, 3))] * 2,
                                 [True, True]),
    "bce_with_logits of nothing": (lambda lib, x, y: _functional(lib).binary_cross_entropy_with_logits(x, y),
                                   [np.ones((0, 3)), np.ones((0, 3))], [True, True]),
    "embedding of no indices": (lambda lib, i, w: _functional(lib).embedding(i, w), [_long(2, 0), np.ones((5, 3))],
                                [False, True]),
    "dropout of nothing": (lambda lib, x: _functional(lib).dropout(x, 0.5), [np.ones((0, 3))], [True]),
}


def _functional(lib):
    return F if lib is torch else ops


@pytest.mark.parametrize("name", EMPTY_CASES)
def test_empty_shapes_work_forward_and_backward_as_in_torch(name):
    fn, arrays, differentiable = EMPTY_CASES[name]
    ours = lambda *xs: fn(ops, *xs)  # noqa: E731
    theirs = lambda *xs: fn(torch, *xs)  # noqa: E731
    value, grads = run_both(ours, theirs, arrays, differentiable, np.float64)
    assert value[0].shape == value[1].shape
    np.testing.assert_array_equal(np.isnan(value[0]), np.isnan(value[1]))  # mean over nothing is NaN, as torch
    assert_matches([value] + grads, np.float64)


# -- second order ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("use_weight", [False, True])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.25])
@pytest.mark.parametrize("shape", [(7, 5), (3, 4, 2, 3)])
def test_cross_entropy_second_order_matches_torch(reduction, use_weight, label_smoothing, shape):
    rng = np.random.default_rng(11)
    x, target, weight = _class_problem(shape, rng, 1)
    sample = Sample((x, target, weight if use_weight else None),
                    {"ignore_index": 1, "reduction": reduction, "label_smoothing": label_smoothing})
    result = run_torch_hvp_parity(tape.get_op("cross_entropy"), sample)
    assert result is not None and result.ok, result and result.message


@pytest.mark.parametrize("name, arrays, attrs", [
    ("layer_norm", [(4, 6, 8), (8,), (8,)], {"normalized_shape": (8,)}),
    ("layer_norm", [(3, 2, 5), None, None], {"normalized_shape": (2, 5), "eps": 1e-2}),
    ("rms_norm", [(4, 6, 8), (8,)], {"normalized_shape": 8}),
    ("rms_norm", [(3, 2, 5), None], {"normalized_shape": [2, 5], "eps": None}),
    ("softmax", [(4, 9)], {"dim": 0}),
    ("log_softmax", [(4, 9)], {"dim": 1}),
    ("binary_cross_entropy_with_logits", [(5, 4), (5, 4), (4,), (5, 4)], {"reduction": "mean"}),
])
def test_second_order_of_wide_inputs_matches_torch(name, arrays, attrs):
    rng = np.random.default_rng(3)
    inputs = tuple(None if s is None else rng.uniform(0.1, 1.0, size=s) if k > 0 and name.startswith("binary")
                   else None if s is None else rng.normal(size=s) * 2 for k, s in enumerate(arrays))
    result = run_torch_hvp_parity(tape.get_op(name), Sample(inputs, attrs))
    assert result is not None and result.ok, result and result.message


def test_embedding_second_order_flows_through_its_dense_backward():
    rng = np.random.default_rng(0)
    weight = tape.tensor(rng.normal(size=(5, 3)), requires_grad=True)
    indices = np.array([[1, 1, 4], [0, 2, 1]])
    u = tape.tensor(rng.normal(size=(2, 3, 3)), requires_grad=True)
    (g,) = gradients(ops.embedding(indices, weight, padding_idx=4), [weight], [u], create_graph=True)
    assert g.grad_fn.op is tape.get_op("embedding_dense_backward")
    v = rng.normal(size=(5, 3))
    (gu,) = gradients(ops.sum(g * v), [u])
    expected = v[indices]
    expected[indices == 4] = 0  # the padding row's gradient is 0, so v never reaches those positions
    np.testing.assert_allclose(gu.numpy(), expected)


@pytest.mark.parametrize("padding_idx", [None, 3, -1])
def test_embedding_dense_backward_matches_torch(padding_idx):
    rng = np.random.default_rng(1)
    indices = rng.integers(0, 6, size=(40, 7))
    grad = rng.normal(size=(40, 7, 5))
    ours = ops.embedding_dense_backward(tape.tensor(grad), indices, 6, padding_idx).numpy()
    theirs = torch.ops.aten.embedding_dense_backward(torch.tensor(grad), torch.tensor(indices), 6,
                                                     -1 if padding_idx is None else padding_idx % 6, False)
    np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-12, atol=1e-12)


# -- errors ------------------------------------------------------------------------------------------------
def test_tensor_methods_use_the_softmax_ops():
    x = tape.tensor(np.array([[1.0, 2.0, 3.0]]))
    np.testing.assert_allclose(x.softmax(dim=-1).numpy(), F.softmax(torch.tensor([[1.0, 2.0, 3.0]]), -1).numpy())
    np.testing.assert_allclose(x.log_softmax().numpy(), F.log_softmax(torch.tensor([[1.0, 2.0, 3.0]]), -1).numpy())


f64 = np.zeros((4, 3))
labels = np.array([0, 1, 2, 1])


@pytest.mark.parametrize("call, error, pattern", [
    (lambda: ops.cross_entropy(f64, labels, reduction="avg"), ValueError, "cross_entropy: argument 'reduction'"),
    (lambda: ops.nll_loss(f64, labels, reduction=None), ValueError, "nll_loss: argument 'reduction'"),
    (lambda: ops.mse_loss(f64, f64, reduction="total"), ValueError, "mse_loss: argument 'reduction'"),
    (lambda: ops.binary_cross_entropy_with_logits(f64, f64, reduction="meen"), ValueError,
     "binary_cross_entropy_with_logits: argument 'reduction'"),
    (lambda: ops.cross_entropy(f64, np.array([0, 1, 3, 1])), ValueError, "cross_entropy: argument 'target'"),
    (lambda: ops.cross_entropy(f64, np.array([0, -1, 2, 1])), ValueError, "cross_entropy: argument 'target'"),
    (lambda: ops.nll_loss(f64, np.array([0, 1, 2])), ValueError, "nll_loss: argument 'target'"),
    (lambda: ops.cross_entropy(f64, labels.astype(float)), TypeError, "cross_entropy: argument 'target' expected int"),
    (lambda: ops.cross_entropy(np.zeros((4, 3), dtype=np.int64), labels), TypeError,
     "cross_entropy: argument 'input'"),
    (lambda: ops.cross_entropy(f64, labels, np.ones(4)), ValueError, "cross_entropy: argument 'weight'"),
    (lambda: ops.cross_entropy(f64, labels, label_smoothing=1.5), ValueError,
     "cross_entropy: argument 'label_smoothing'"),
    (lambda: ops.cross_entropy(np.zeros(()), np.array(0)), ValueError, "cross_entropy: argument 'input'"),
    (lambda: ops.softmax(np.arange(3), dim=0), TypeError, "softmax: argument 'input'"),
    (lambda: ops.log_softmax(f64, dim=2), ValueError, "log_softmax: argument 'dim'"),
    (lambda: ops.layer_norm(f64, (4,)), ValueError, "layer_norm: argument 'normalized_shape'"),
    (lambda: ops.layer_norm(f64, (3,), np.ones(4)), ValueError, "layer_norm: argument 'weight'"),
    (lambda: ops.rms_norm(f64, 3, np.ones((1, 3))), ValueError, "rms_norm: argument 'weight'"),
    (lambda: ops.embedding(labels, np.zeros(3)), ValueError, "embedding: argument 'weight'"),
    (lambda: ops.embedding(labels, np.zeros((2, 3))), ValueError, "embedding: argument 'input'"),
    (lambda: ops.embedding(labels.astype(float), f64), TypeError, "embedding: argument 'input'"),
    (lambda: ops.embedding(labels, f64, padding_idx=4), ValueError, "embedding: argument 'padding_idx'"),
    (lambda: ops.mse_loss(f64, np.zeros((2, 3))), ValueError, "mse_loss: argument 'target'"),
    (lambda: ops.binary_cross_entropy_with_logits(f64, np.zeros((4, 1))), ValueError,
     "binary_cross_entropy_with_logits: argument 'target'"),
    (lambda: ops.binary_cross_entropy_with_logits(f64, f64, pos_weight=np.ones(2)), ValueError,
     "binary_cross_entropy_with_logits: argument 'pos_weight'"),
    (lambda: ops.dropout(np.ones(3, dtype=np.int64), p=0.5), TypeError, "dropout: argument 'input'"),
    (lambda: ops.layer_norm(f64, (3,), eps=-1.0), ValueError, "layer_norm: argument 'eps'"),
    (lambda: ops.embedding_dense_backward(np.zeros((4, 2)), labels, 2), ValueError,
     "embedding_dense_backward: argument 'indices'"),
    (lambda: ops.embedding_dense_backward(np.zeros((3, 2)), labels, 3), ValueError,
     "embedding_dense_backward: argument 'grad_output'"),
])
def test_bad_arguments_raise_naming_op_and_argument(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_dropout_training_flag_must_be_a_bool():
    with pytest.raises(TypeError, match="dropout: argument 'training'"):
        ops.dropout(tape.tensor(np.ones(3)), p=0.5, training="yes")


# -- channel dropout, alpha dropout, rrelu (issue 21) --------------------------------------------------------
@pytest.mark.parametrize("name, shape, mask_shape", [
    ("dropout1d", (30, 40, 5), (30, 40, 1)),
    ("dropout1d", (40, 5), (40, 1)),
    ("dropout2d", (20, 30, 2, 3), (20, 30, 1, 1)),
    ("dropout2d", (30, 2, 3), (30, 1, 1)),
    ("dropout3d", (10, 30, 2, 1, 2), (10, 30, 1, 1, 1)),
    ("dropout3d", (30, 2, 2, 2), (30, 1, 1, 1)),
    ("feature_alpha_dropout", (20, 30, 4), (20, 30, 1)),
])
def test_channel_dropout_drops_whole_channels_and_reuses_its_mask(name, shape, mask_shape):
    p = 0.4
    x = tape.tensor(np.random.default_rng(0).uniform(1, 2, size=shape), requires_grad=True)
    out = getattr(ops, name)(x, p=p, training=True, rng=np.random.default_rng(5))
    (g,) = gradients(ops.sum(out), [x])
    scale = g.numpy()
    per_channel = scale.reshape(int(np.prod(mask_shape)), -1)
    assert np.all(per_channel == per_channel[:, :1])  # one value a channel
    kept = scale != 0
    fraction = np.mean(per_channel[:, 0] != 0)
    assert abs(fraction - (1 - p)) < 5 * np.sqrt(p * (1 - p) / np.prod(mask_shape))
    if name != "feature_alpha_dropout":
        np.testing.assert_allclose(out.numpy(), x.numpy() * kept / (1 - p))
        np.testing.assert_array_equal(scale, kept / (1 - p))
    again = getattr(ops, name)(x, p=p, training=True, rng=out.grad_fn.attrs["rng"])  # the recorded seed
    np.testing.assert_array_equal(again.numpy(), out.numpy())


@pytest.mark.parametrize("name", ["alpha_dropout", "feature_alpha_dropout"])
@pytest.mark.parametrize("p", [0.2, 0.5])
def test_alpha_dropout_values_are_torchs(name, p):
    """On zeros every output is torch's shift of a kept or a dropped unit: the two values torch produces; on a
    standard normal input the mean and variance stay 0 and 1, as torch's."""
    zeros = np.zeros((64, 64, 2))
    ours = np.unique(getattr(ops, name)(tape.tensor(zeros), p=p, training=True, rng=1).numpy())
    theirs = np.unique(getattr(F, name)(torch.tensor(zeros), p=p, training=True).numpy())
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    x = np.random.default_rng(2).standard_normal((400, 500))
    out = getattr(ops, name)(tape.tensor(x), p=p, training=True, rng=3).numpy()
    tolerance = 0.05 if name == "feature_alpha_dropout" else 0.01  # channel-wise: 400 x 500 masks, not 200,000
    assert abs(out.mean()) < tolerance and abs(out.var() - 1) < 2 * tolerance
    for deterministic in ({"training": False}, {"p": 0.0, "training": True}):
        np.testing.assert_array_equal(getattr(ops, name)(tape.tensor(x), **{"p": p, **deterministic}).numpy(), x)
    np.testing.assert_array_equal(getattr(ops, name)(tape.tensor(x), p=1.0, training=True).numpy(), 0)


def test_alpha_dropout_trains_off_by_default_as_torch():
    assert tape.get_op("alpha_dropout").attr_defaults["training"] is False
    assert tape.get_op("feature_alpha_dropout").attr_defaults["training"] is False
    assert tape.get_op("dropout2d").attr_defaults["training"] is True


def test_rrelu_training_draws_slopes_in_the_bounds_and_its_gradient_is_the_drawn_slope():
    lower, upper = 0.1, 0.4
    x = tape.tensor(-np.random.default_rng(0).uniform(0.5, 1.5, size=(300, 300)), requires_grad=True)
    out = ops.rrelu(x, lower, upper, training=True, rng=np.random.default_rng(1))
    slope = out.numpy() / x.numpy()
    assert slope.min() >= lower and slope.max() <= upper
    assert abs(slope.mean() - (lower + upper) / 2) < 0.002 and np.unique(slope).size > 1000
    (g,) = gradients(ops.sum(out), [x], create_graph=True)
    np.testing.assert_allclose(g.numpy(), slope, rtol=1e-12)
    theirs = F.rrelu(torch.tensor(x.numpy()), lower, upper, training=True).numpy() / x.numpy()
    assert theirs.min() >= lower and theirs.max() <= upper and abs(theirs.mean() - slope.mean()) < 0.004
    mixed = tape.tensor(np.array([-2.0, 0.0, 3.0]))
    np.testing.assert_allclose(ops.rrelu(mixed, 0.2, 0.2, training=True).numpy(), [-0.4, 0.0, 3.0])
    np.testing.assert_allclose(ops.rrelu(mixed).numpy(), F.rrelu(torch.tensor(mixed.numpy())).numpy())


def test_random_ops_follow_the_default_generator():
    x = tape.tensor(np.ones((6, 8, 3)))
    for op in (ops.dropout1d, ops.dropout2d, ops.alpha_dropout, ops.feature_alpha_dropout):
        tape.manual_seed(7)
        a = op(x, p=0.5, training=True).numpy()
        tape.manual_seed(7)
        np.testing.assert_array_equal(op(x, p=0.5, training=True).numpy(), a)
    tape.manual_seed(7)
    a = ops.rrelu(-x, training=True).numpy()
    tape.manual_seed(7)
    np.testing.assert_array_equal(ops.rrelu(-x, training=True).numpy(), a)


@pytest.mark.parametrize("call, message", [
    (lambda x: ops.dropout2d(x[0, 0], p=0.5), "dropout2d: argument 'input' expected a batched or unbatched tensor"),
    (lambda x: ops.dropout1d(x, p=0.5), "dropout1d: argument 'input' expected a batched or unbatched tensor"),
    (lambda x: ops.dropout3d(x[0], p=0.5), "dropout3d: argument 'input' expected a batched or unbatched tensor"),
    (lambda x: ops.dropout2d(x, p=1.5), "dropout2d: argument 'p' expected a probability in [0, 1], got 1.5"),
    (lambda x: ops.alpha_dropout(x, p=0.5, rng="seed"), "alpha_dropout: argument 'rng' expected None, an int"),
    (lambda x: ops.rrelu(x, 0.5, 0.1), "rrelu: argument 'upper' expected a bound >= lower (0.5), got 0.1"),
])
def test_issue_21_random_ops_refuse_bad_arguments_naming_them(call, message):
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        call(tape.tensor(np.ones((2, 3, 4, 5))))


def test_gumbel_softmax_samples_the_softmax_and_hard_is_straight_through():
    """Gumbel-max: the argmax of logits + Gumbel noise is distributed as softmax(logits); hard=True gives the
    one-hot of the soft sample's argmax with the soft sample's gradient (torch's straight-through estimator)."""
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    draws = ops.gumbel_softmax(tape.tensor(np.tile(logits, (40_000, 1))), tau=0.5, rng=1).numpy()
    frequency = np.bincount(draws.argmax(axis=1), minlength=4) / 40_000
    np.testing.assert_allclose(frequency, [0.1, 0.2, 0.3, 0.4], atol=0.01)
    np.testing.assert_allclose(draws.sum(axis=1), 1)
    x = tape.tensor(np.random.default_rng(0).normal(size=(5, 4)), requires_grad=True)
    soft = ops.gumbel_softmax(x, tau=0.7, rng=9)
    hard = ops.gumbel_softmax(x, tau=0.7, hard=True, rng=9)
    np.testing.assert_array_equal(hard.numpy(), np.eye(4)[soft.numpy().argmax(axis=1)])
    u = tape.tensor(np.random.default_rng(1).normal(size=(5, 4)))
    (g_soft,) = gradients(ops.sum(soft * u), [x])
    (g_hard,) = gradients(ops.sum(hard * u), [x])
    np.testing.assert_allclose(g_hard.numpy(), g_soft.numpy(), rtol=1e-12)
    s = soft.numpy()  # the softmax Jacobian-vector product at the recorded noise, divided by tau
    np.testing.assert_allclose(g_soft.numpy(), s * (u.numpy() - (u.numpy() * s).sum(1, keepdims=True)) / 0.7)
    hard = ops.gumbel_softmax(x, tau=0.7, hard=True, rng=9)  # fresh graphs: the first backward freed the others
    soft = ops.gumbel_softmax(x, tau=0.7, rng=9)
    (g2,) = gradients(ops.sum(gradients(ops.sum(hard * u), [x], create_graph=True)[0] ** 2), [x])
    (g2_soft,) = gradients(ops.sum(gradients(ops.sum(soft * u), [x], create_graph=True)[0] ** 2), [x])
    assert np.abs(g2_soft.numpy()).max() > 0
    np.testing.assert_allclose(g2.numpy(), g2_soft.numpy(), rtol=1e-10)
    theirs = F.gumbel_softmax(torch.tensor(np.tile(logits, (40_000, 1))), tau=0.5).numpy()
    np.testing.assert_allclose(np.bincount(theirs.argmax(axis=1), minlength=4) / 40_000, frequency, atol=0.015)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("source, target", [(np.float64, np.float32), (np.float32, np.float64), (np.int64, np.float64)])
def test_softmax_dtype_casts_first_as_torch(name, source, target):
    """dtype=: the input is cast before the op (torch's order), the output has that dtype and the input's
    gradient comes back in the input's dtype."""
    x = (np.random.default_rng(0).normal(size=(3, 5)) * 3).astype(source)
    float_input = np.dtype(source).kind == "f"
    t = tape.tensor(x, requires_grad=float_input, dtype=source)
    out = getattr(ops, name)(t, 1, dtype=target)
    torch_dtype = getattr(torch, np.dtype(target).name)
    theirs = getattr(torch, name)(torch.tensor(x), 1, dtype=torch_dtype)
    assert out.dtype == np.dtype(target)
    tolerance = TOLERANCE[np.float32] if np.float32 in (source, target) else TOLERANCE[np.float64]
    np.testing.assert_allclose(out.numpy(), theirs.detach().numpy(), **tolerance)
    assert np.array_equal(out.numpy(), getattr(ops, name)(tape.tensor(x.astype(target)), 1).numpy())
    if float_input:
        u = np.random.default_rng(1).normal(size=x.shape).astype(target)
        (g,) = gradients(out, [t], [tape.tensor(u)])
        th_x = torch.tensor(x, requires_grad=True)
        (expected,) = torch.autograd.grad(getattr(torch, name)(th_x, 1, dtype=torch_dtype), [th_x], torch.from_numpy(u))
        assert g.dtype == np.dtype(source)
        np.testing.assert_allclose(g.numpy(), expected.numpy(), **tolerance)


def test_softmax_dtype_refuses_a_non_float_dtype():
    with pytest.raises(TypeError, match="softmax: argument 'dtype' expected a floating dtype"):
        ops.softmax(tape.tensor(np.ones(3)), 0, dtype=np.int64)


@pytest.mark.parametrize("max_norm", [np.ones(8), [1.0, 2.0], 2.0])
def test_embedding_bag_refuses_a_max_norm_naming_the_op_and_argument(max_norm):
    # torch's 4th positional parameter is max_norm: per_sample_weights passed there was an array compared with None
    # by ==, and numpy's "truth value of an array is ambiguous" came out naming no op
    weight = tape.tensor(np.random.default_rng(0).standard_normal((10, 3)))
    with pytest.raises(ValueError, match=r"embedding_bag: argument 'max_norm' expected None"):
        ops.embedding_bag(np.array([1, 2, 4, 5, 4, 3, 2, 9]), weight, np.array([0, 4]), max_norm)


RUNNING_FLAGS = [("batch_norm", {"training": False}), ("instance_norm", {"use_input_stats": False})]


@pytest.mark.parametrize("op, flag", RUNNING_FLAGS)
def test_running_statistics_are_checked_in_one_form(op, flag):
    x, stat = tape.tensor(np.ones((2, 3, 4))), tape.tensor(np.ones(3))
    (name, value), = flag.items()
    with pytest.raises(ValueError) as error:
        getattr(ops, op)(x, None, None, **flag)
    expected = f"running_mean and running_var when {name}={value}"
    assert str(error.value) == f"{op}: argument 'running_mean' expected {expected}, got None"
    with pytest.raises(ValueError) as error:
        getattr(ops, op)(x, stat, tape.tensor(np.ones(4)), **flag)
    assert str(error.value) == f"{op}: argument 'running_var' expected shape (3,), got (4,)"
    with pytest.raises(TypeError, match=f"{op}: argument 'running_mean' expected a floating tensor"):
        getattr(ops, op)(x, tape.tensor(np.ones(3, np.int64)), stat, **flag)
