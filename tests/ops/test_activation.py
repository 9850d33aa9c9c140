"""The activation family (ops/activation.py) against PyTorch beyond the generated sample checks: torch's
gradient exactly at every kink, edge values (0, +-inf, NaN, huge, subnormal) giving torch's values and
gradients without a numpy warning, the documented NaN-gradient conventions where torch's kernels disagree
with themselves, stability and accuracy in the tails, prelu's weight gradient, normalize's eps clamp, ties
and huge rows, zero-size inputs and the errors bad arguments raise."""

import math
import warnings

import numpy as np
import pytest
from oracle import LazyTorch, ours, run_torch_hvp_parity, theirs

import ops
import tape
from tape.functional import gradients
from tape.registry import Grad, Sample
from tape.tools.edges import EDGE  # the edge values the ONNX export column reads too
from tape.tools.verify import op_samples

torch = LazyTorch()  # torch imported at first use: the module collects without torch
F = torch.nn.functional

FAMILY = [op for op in tape.registered_ops() if op.family == "activation"]
NAMES = {"hardtanh", "relu6", "hardswish", "hardsigmoid", "selu", "celu", "mish", "softsign", "logsigmoid",
         "softmin", "glu", "prelu", "threshold", "hardshrink", "softshrink", "tanhshrink", "normalize"}
ELEMENTWISE = sorted(NAMES - {"softmin", "glu", "prelu", "normalize"})
TOLERANCE = {np.float64: dict(rtol=1e-12, atol=1e-300), np.float32: dict(rtol=1e-6, atol=1e-38)}


def quietly_ours(op, x, **attrs):
    """``oracle.ours`` with every warning an error: values torch returns silently must come silently."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return ours(op, x, **attrs)


# torch's float64 hardsigmoid backward multiplies by 1/6 rounded to float32 (relative error 3e-8); ours by 1/6
GRADIENT_RTOL = {"hardsigmoid": 5e-8}


def assert_close(value, expected, dtype, what="", **tolerance):
    np.testing.assert_allclose(value, expected, equal_nan=True, err_msg=what, **{**TOLERANCE[dtype], **tolerance})


def assert_gradient_close(name, grad, expected, dtype, what=""):
    rtol = max(TOLERANCE[dtype]["rtol"], GRADIENT_RTOL.get(name, 0.0))
    assert_close(grad, expected, dtype, what, rtol=rtol)


# -- declarations ----------------------------------------------------------------------------------------------
def test_every_op_is_registered_with_torchs_signature_samples_a_reference_and_rules():
    assert {op.name for op in FAMILY} == NAMES
    for op in FAMILY:
        assert getattr(ops, op.name) is op
        assert op.samples is not None and op.torch_ref is not None, op.name
        assert op.input_states == (Grad.RULE,) * op.n_inputs, op.name
        assert op.second_order is Grad.RULE, f"{op.name}: {op.second_order_note}"
        labels = " ".join(s.label for s in op_samples(op))
        assert "non-contiguous" in labels and "zero" in labels, op.name
    signatures = {op.name: op.signature for op in FAMILY}
    assert signatures["hardtanh"] == "hardtanh(input, min_val, max_val)"
    assert signatures["normalize"] == "normalize(input, p, dim, eps)"
    assert signatures["prelu"] == "prelu(input, weight)"
    assert signatures["threshold"] == "threshold(input, threshold, value)"
    assert signatures["softmin"] == "softmin(input, dim, dtype)"
    assert ops.normalize.attr_defaults == {"p": 2.0, "dim": 1, "eps": 1e-12}
    assert ops.hardtanh.attr_defaults == {"min_val": -1.0, "max_val": 1.0}
    assert ops.glu.attr_defaults == {"dim": -1} and ops.celu.attr_defaults == {"alpha": 1.0}
    assert ops.hardshrink.attr_defaults == ops.softshrink.attr_defaults == {"lambd": 0.5}


# -- kinks: torch's gradient exactly there ---------------------------------------------------------------------
KINKS = [
    ("hardtanh", F.hardtanh, {}, [-2.0, -1.0, 0.0, 1.0, 2.0]),
    ("hardtanh", F.hardtanh, {"min_val": -0.5, "max_val": 1.5}, [-0.5, 0.0, 1.5]),
    ("hardtanh", F.hardtanh, {"min_val": 0.25, "max_val": 0.25}, [0.0, 0.25, 1.0]),
    ("relu6", F.relu6, {}, [-1.0, 0.0, 3.0, 6.0, 7.0]),
    ("hardswish", F.hardswish, {}, [-4.0, -3.0, 0.0, 3.0, 4.0]),
    ("hardsigmoid", F.hardsigmoid, {}, [-4.0, -3.0, 0.0, 3.0, 4.0]),
    ("selu", F.selu, {}, [-1.0, 0.0, 1.0]),
    ("celu", F.celu, {}, [-1.0, 0.0, 1.0]),
    ("celu", F.celu, {"alpha": -1.5}, [-1.0, 0.0, 1.0]),
    ("threshold", F.threshold, {"threshold": 0.5, "value": -1.0}, [0.0, 0.5, 1.0]),
    ("hardshrink", F.hardshrink, {}, [-1.0, -0.5, 0.0, 0.5, 1.0]),
    ("hardshrink", F.hardshrink, {"lambd": 0.0}, [-1.0, 0.0, 1.0]),
    ("softshrink", F.softshrink, {}, [-1.0, -0.5, -0.25, 0.0, 0.5, 1.0]),
    ("softshrink", F.softshrink, {"lambd": 0.0}, [-1.0, 0.0, 1.0]),
    ("softsign", F.softsign, {}, [-1.0, 0.0, 1.0]),
]


@pytest.mark.parametrize("name,fn,attrs,values", KINKS, ids=[f"{k[0]}-{k[2]}" for k in KINKS])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gradient_at_kinks_is_torchs(name, fn, attrs, values, dtype):
    x = np.array(values, dtype)
    value, grad = quietly_ours(tape.get_op(name), x, **attrs)
    expected_value, expected_grad = theirs(fn, x, **attrs)
    assert value.dtype == grad.dtype == x.dtype
    assert_close(value, expected_value, dtype)
    np.testing.assert_array_equal(np.signbit(value), np.signbit(expected_value))  # softshrink's -0.0 too
    assert_gradient_close(name, grad, expected_grad, dtype)


def test_kink_conventions_in_words():
    _, grad = ours(ops.hardswish, np.array([-3.0, 3.0]))
    assert grad.tolist() == [0.0, 1.5]  # 0 at -3, g at 3 (the cotangent is [0.5, 1.5])
    _, grad = ours(ops.hardtanh, np.array([-1.0, 1.0]))
    assert grad.tolist() == [0.0, 0.0]
    _, grad = ours(ops.selu, np.array([0.0]))
    assert grad[0] == pytest.approx(0.5 * 1.6732632423543772 * 1.0507009873554805, rel=1e-15)


SECOND_ORDER_AT_KINKS = [("hardtanh", {}), ("relu6", {}), ("hardswish", {}), ("selu", {}), ("celu", {}),
                         ("celu", {"alpha": -1.5}), ("logsigmoid", {}), ("mish", {}), ("softsign", {}),
                         ("tanhshrink", {}), ("hardshrink", {}), ("softshrink", {}),
                         ("threshold", {"threshold": 1.0, "value": 2.0})]


@pytest.mark.parametrize("name,attrs", SECOND_ORDER_AT_KINKS, ids=[f"{n}-{a}" for n, a in SECOND_ORDER_AT_KINKS])
def test_second_order_exactly_at_kinks_and_zero_is_torchs(name, attrs):
    x = np.array([-6.0, -3.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 3.0, 6.0, 7.0])
    result = run_torch_hvp_parity(tape.get_op(name), Sample((x,), attrs))
    assert result is not None and result.ok, result.message


# -- edge values: the mathematical values and gradients (float64 reference rounded once), no numpy warning ------

# Where torch's kernels give g on one path and 0 or NaN on another (scalar vs vectorised), for a NaN input:
# our gradient there (the module docstring's convention); torch's is not compared.
NAN_GRADIENT = {"hardtanh": 0.0, "relu6": 0.0, "hardshrink": 0.0, "softshrink": 0.0, "hardswish": np.nan,
                "selu": np.nan, "celu": np.nan}


def _edge_cases():
    cases = []
    for name in ELEMENTWISE:
        op = tape.get_op(name)
        attr_sets = []
        for sample in op_samples(op):
            if sample.attrs not in attr_sets:
                attr_sets.append(sample.attrs)
        cases += [pytest.param(name, attrs, id=f"{name}-{attrs}") for attrs in attr_sets]
    return cases


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name,attrs", _edge_cases())
def test_edge_values_give_the_mathematical_values_and_gradients_without_numpy_warnings(name, attrs, dtype):
    op = tape.get_op(name)
    kinks = [-6.0, -3.0, -1.0, -0.5, 0.25, 0.5, 1.0, 3.0, 6.0]
    x = np.array(EDGE[dtype] + tuple(kinks), dtype)
    value, grad = quietly_ours(op, x, **attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected_value, expected_grad = _mathematical(getattr(F, name), x, attrs)
    assert value.dtype == grad.dtype == x.dtype
    assert_close(value, expected_value, dtype, f"{name} value")
    if name in NAN_GRADIENT:
        nan = np.isnan(x)
        assert_close(grad[nan] / np.linspace(0.5, 1.5, x.size)[nan], NAN_GRADIENT[name], dtype, f"{name} at NaN")
        grad, expected_grad = grad[~nan], expected_grad[~nan]
    assert_gradient_close(name, grad, expected_grad, dtype, f"{name} gradient")


def _mathematical(fn, x, attrs):
    """The value and gradient of an elementwise op at ``x``, rounded once to x's dtype: torch's float64 kernel on the
    exactly widened input (torch's float32 kernels differ by CPU -- AVX2 / AVX-512 -- exactly at edge values). The
    gradient is u * f'(x), so the float64 one is rescaled to the very float32 cotangent ``ours`` uses."""
    value, grad = theirs(fn, x.astype(np.float64), **attrs)
    u64 = np.linspace(0.5, 1.5, x.size)
    return value.astype(x.dtype), (grad / u64 * u64.astype(x.dtype)).astype(x.dtype)


def test_nan_gradient_conventions():
    x = np.array([np.nan])
    for name in ("hardtanh", "relu6", "hardsigmoid", "hardshrink", "softshrink"):
        assert ours(tape.get_op(name), x)[1][0] == 0.0, name
    for name in ("hardswish", "selu", "celu", "mish", "softsign", "logsigmoid", "tanhshrink"):
        assert np.isnan(ours(tape.get_op(name), x)[1][0]), name
    assert ours(ops.threshold, x, threshold=0.0, value=1.0)[1][0] == 0.5  # passes the cotangent, like torch


# -- stability and accuracy ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["logsigmoid", "mish", "selu", "celu", "softsign", "tanhshrink", "hardswish"])
def test_large_inputs_give_finite_values_and_gradients_like_torch(name, dtype):
    x = np.array([-1e4, -300.0, -60.0, -20.0, -5.0, 5.0, 20.0, 60.0, 300.0, 1e4], dtype)
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        value, grad = ours(tape.get_op(name), x)
    assert np.isfinite(value).all() and np.isfinite(grad).all()
    expected_value, expected_grad = theirs(getattr(F, name), x)
    # softsign: torch's own gradient loses ~|x| ulps (below); mish: torch's 1 - tanh^2 rounds to 0 at 20
    atol = {"softsign": 1e-12, "mish": 1e-12}.get(name, 1e-30) if dtype == np.float64 else 1e-6
    assert_close(value, expected_value, dtype, rtol=1e-6, atol=1e-30)
    assert_close(grad, expected_grad, dtype, rtol=1e-6, atol=atol)


def test_logsigmoid_and_mish_keep_relative_accuracy_in_the_tails():
    x = np.array([-700.0, -100.0, -30.0, 30.0, 100.0])
    value, grad = ours(ops.logsigmoid, x)
    expected = [-math.log1p(math.exp(-v)) if v > 0 else v - math.log1p(math.exp(v)) for v in x]
    np.testing.assert_allclose(value, expected, rtol=1e-15, atol=0)
    u = np.linspace(0.5, 1.5, x.size)
    np.testing.assert_allclose(grad / u, [1 / (1 + math.exp(v)) for v in x], rtol=1e-15, atol=0)
    value, grad = ours(ops.mish, x)
    tsp = [math.tanh(math.log1p(math.exp(v))) if v < 0 else 1.0 for v in x]
    np.testing.assert_allclose(value[:3], x[:3] * tsp[:3], rtol=1e-13, atol=0)  # e.g. mish(-100) ~ -100 e^-100
    np.testing.assert_allclose(value[3:], x[3:], rtol=1e-15)
    assert (value[:3] < 0).all() and (grad[:3] < 0).all()  # not rounded to 0 in the left tail


def test_softsign_and_tanhshrink_gradients_keep_relative_accuracy():
    x = np.array([1e-8, 1e-4, 0.3, 1e4, 1e8, -1e8])
    u = np.linspace(0.5, 1.5, x.size)
    _, grad = ours(ops.softsign, x)
    np.testing.assert_allclose(grad / u, 1 / (1 + np.abs(x)) ** 2, rtol=1e-14, atol=0)  # torch's: 1e-8 at 1e8
    _, grad = ours(ops.tanhshrink, x)
    np.testing.assert_allclose(grad / u, np.tanh(x) ** 2, rtol=1e-14, atol=0)  # torch's: 1e-8 at 1e-4


def test_glu_is_finite_and_accurate_where_the_gate_saturates():
    b = np.array([-800.0, -40.0, -1.0, 0.0, 1.0, 40.0, 800.0])
    x = np.concatenate([np.full(b.size, 2.0), b])
    value, grad = quietly_ours(ops.glu, x, dim=0)
    u = np.linspace(0.5, 1.5, b.size)
    s = np.array([1 / (1 + math.exp(-v)) if v > -700 else 0.0 for v in b])
    rest = np.array([1 / (1 + math.exp(v)) if v < 700 else 0.0 for v in b])
    np.testing.assert_allclose(value, 2 * s, rtol=1e-15, atol=0)
    np.testing.assert_allclose(grad[:b.size], u * s, rtol=1e-15, atol=0)
    np.testing.assert_allclose(grad[b.size:], u * 2 * s * rest, rtol=1e-14, atol=0)
    assert grad[b.size + 5] > 0  # sigmoid'(40) ~ 4e-18: torch's 1 - sigmoid rounds it to 0
    expected_value, expected_grad = theirs(lambda t: F.glu(t, dim=0), x)
    assert_close(value, expected_value, np.float64)
    assert_close(grad, expected_grad, np.float64, atol=1e-16)


# -- glu, softmin ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_glu_on_edge_values_matches_torch(dim, dtype):
    edge = np.array(EDGE[dtype], dtype)
    a, b = (v.ravel() for v in np.meshgrid(edge, edge))
    x = np.stack([a, b]) if dim == 0 else np.stack([a, b], axis=-1)
    x = x.reshape((2, -1) if dim == 0 else (-1, 2))
    value, grad = quietly_ours(ops.glu, x, dim=dim)
    expected_value, expected_grad = theirs(lambda t: F.glu(t, dim=dim), x)
    assert_close(value, expected_value, dtype)
    assert_close(grad, expected_grad, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_softmin_is_softmax_of_minus_x_on_edge_rows(dtype):
    x = np.array([[1e4, -1e4, 0.0, 1e4 - 3], [np.inf, 1.0, 2.0, 3.0], [-np.inf, 1.0, 2.0, 3.0],
                  [np.inf, np.inf, np.inf, np.inf], [np.nan, 1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 0.0]], dtype)
    for dim in (1, -1):
        value, grad = quietly_ours(ops.softmin, x, dim=dim)
        expected_value, expected_grad = theirs(F.softmin, x, dim=dim)
        assert_close(value, expected_value, dtype, rtol=1e-6 if dtype == np.float32 else 1e-14)
        assert_close(grad, expected_grad, dtype, rtol=1e-6 if dtype == np.float32 else 1e-14, atol=1e-15)
    assert np.isfinite(value[0]).all() and np.isfinite(grad[0]).all()


def test_zero_size_inputs_work_forward_and_backward_like_torch():
    cases = [(ops.glu, F.glu, (3, 0), {"dim": 1}), (ops.glu, F.glu, (0, 4), {"dim": 1}),
             (ops.softmin, F.softmin, (3, 0), {"dim": 1}), (ops.normalize, F.normalize, (3, 0), {}),
             (ops.normalize, F.normalize, (0, 3), {"p": math.inf}), (ops.hardswish, F.hardswish, (0, 3), {}),
             (ops.mish, F.mish, (2, 0, 3), {})]
    for op, fn, shape, attrs in cases:
        x = np.zeros(shape)
        value, grad = quietly_ours(op, x, **attrs)
        expected_value, expected_grad = theirs(fn, x, **attrs)
        assert value.shape == expected_value.shape and grad.shape == expected_grad.shape == x.shape, op.name
    x = tape.tensor(np.zeros((0, 3)), requires_grad=True)
    w = tape.tensor(np.array([0.1, 0.2, 0.3]), requires_grad=True)
    ops.prelu(x, w).sum().backward()
    assert x.grad.shape == (0, 3) and w.grad.numpy().tolist() == [0.0, 0.0, 0.0]


# -- prelu -----------------------------------------------------------------------------------------------------
def _prelu_both(x, w, dtype):
    x, w = x.astype(dtype), w.astype(dtype)
    xs, ws = tape.tensor(x, requires_grad=True), tape.tensor(w, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ops.prelu(xs, ws)
        u = np.linspace(0.5, 1.5, out.numel()).reshape(out.shape).astype(dtype)
        out.backward(u)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    expected = F.prelu(xt, wt)
    expected.backward(torch.from_numpy(u))
    return [(out.numpy(), expected.detach().numpy()), (xs.grad.numpy(), xt.grad.numpy()),
            (ws.grad.numpy(), wt.grad.numpy())]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_prelu_matches_torch_on_edge_values_per_channel_and_shared(dtype):
    edge = np.array(EDGE[dtype], dtype)
    x = np.stack([edge, edge[::-1], np.roll(edge, 3)], axis=1)[:, :, None].repeat(2, axis=2)  # (12, 3, 2)
    for w in (np.array([0.25, -0.5, 2.0]), np.array([0.25]), np.array(0.25)):
        for ours_, theirs_ in _prelu_both(x, w, dtype):
            assert ours_.dtype == np.dtype(dtype) and ours_.shape == theirs_.shape
            assert_close(ours_, theirs_, dtype, rtol=1e-12 if dtype == np.float64 else 1e-5)


def test_prelu_gradient_at_zero_is_the_weight_and_the_weight_gets_none():
    pairs = _prelu_both(np.array([[-1.0, 0.0, 2.0], [0.0, -0.0, -3.0]]), np.array([0.25, 0.5, 2.0]), np.float64)
    (_, _), (grad_x, expected_x), (grad_w, expected_w) = pairs
    u = np.linspace(0.5, 1.5, 6).reshape(2, 3)
    np.testing.assert_array_equal(grad_x, expected_x)
    assert grad_x[0, 1] == 0.5 * u[0, 1] and grad_x[1, 0] == 0.25 * u[1, 0]
    np.testing.assert_array_equal(grad_w, expected_w)
    assert grad_w.tolist() == [-u[0, 0], 0.0, -3 * u[1, 2]]


def test_prelu_second_order_at_zero_differentiates_the_first_order_rule():
    # torch's double backward takes the x >= 0 side at 0, so its d(grad_x)/du is 1 there though grad_x = w u
    x = tape.tensor(np.array([0.0, -1.0, 1.0]), requires_grad=True)
    w = tape.tensor(np.array([0.3]), requires_grad=True)
    u = tape.tensor(np.ones(3), requires_grad=True)
    grad_x, grad_w = gradients(ops.prelu(x, w), [x, w], [u], create_graph=True)
    np.testing.assert_allclose(grad_x.numpy(), [0.3, 0.3, 1.0])
    du, dw = gradients(grad_x.sum(), [u, w], allow_unused=True)
    np.testing.assert_allclose(du.numpy(), [0.3, 0.3, 1.0])
    np.testing.assert_allclose(dw.numpy(), [2.0])
    (du,) = gradients(grad_w.sum(), [u])
    np.testing.assert_allclose(du.numpy(), [0.0, -1.0, 0.0])


def test_prelu_second_order_matches_torch_for_both_inputs():
    rng = np.random.default_rng(1)
    sample = Sample((rng.uniform(-2, 2, (3, 4, 5)), np.array([0.3, -0.7, 1.2, 0.1])), {})
    result = run_torch_hvp_parity(ops.prelu, sample)
    assert result is not None and result.ok, result.message


# -- normalize -------------------------------------------------------------------------------------------------
def _normalize_both(x, dtype=np.float64, **attrs):
    x = np.asarray(x, dtype)
    value, grad = quietly_ours(ops.normalize, x, **attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected_value, expected_grad = theirs(F.normalize, x, **attrs)
    return value, grad, expected_value, expected_grad


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("p", [1.0, 2.0, math.inf, 3.0, 0.5])
def test_normalize_matches_torch_on_edge_rows(p, dtype):
    rows = np.array([[0.0, 0.0, 0.0], [3.0, -4.0, 0.0], [np.inf, 1.0, 2.0], [-np.inf, np.inf, 1.0],
                     [np.nan, 1.0, 2.0], [1e-310 if dtype == np.float64 else 1e-40, 0.0, 0.0], [0.5, -1.5, 2.0],
                     [2.0, -2.0, 1.0], [1e-13, -1e-13, 0.0]])
    value, grad, expected_value, expected_grad = _normalize_both(rows, dtype, p=p)
    assert value.dtype == grad.dtype == np.dtype(dtype)
    assert_close(value, expected_value, dtype, rtol=1e-14 if dtype == np.float64 else 1e-6)
    assert_close(grad, expected_grad, dtype, rtol=1e-13 if dtype == np.float64 else 1e-5)


def test_normalize_below_eps_gives_g_over_eps_and_at_eps_passes_through_the_norm():
    u = np.linspace(0.5, 1.5, 2)
    for p, row in ((2.0, [3.0, 4.0]), (1.0, [2.0, -3.0]), (math.inf, [5.0, -2.0])):
        value, grad, expected_value, expected_grad = _normalize_both([row], p=p, eps=5.0)  # ||row|| == eps
        np.testing.assert_allclose(value, expected_value, rtol=1e-15)
        np.testing.assert_allclose(grad, expected_grad, rtol=1e-14, atol=1e-15)
        assert not np.allclose(grad[0], u / 5.0)  # the norm's term is there
        value, grad, expected_value, expected_grad = _normalize_both([row], p=p, eps=5.5)  # below eps: x / eps
        np.testing.assert_allclose(value[0], np.array(row) / 5.5, rtol=1e-15)
        np.testing.assert_allclose(grad[0], u / 5.5, rtol=1e-15)
        np.testing.assert_allclose(grad, expected_grad, rtol=1e-15)


def test_normalize_inf_norm_shares_the_gradient_among_ties_like_torch():
    x = np.array([[3.0, -3.0, 1.0, 3.0], [2.0, 1.0, 0.0, -1.0]])
    value, grad, expected_value, expected_grad = _normalize_both(x, p=math.inf)
    np.testing.assert_allclose(value, expected_value, rtol=1e-15)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-14, atol=1e-16)


def test_normalize_of_huge_and_tiny_rows_does_not_overflow_or_underflow():
    x = np.array([[1e300, 1e300, -1e299], [1e-200, -1e-200, 3e-201], [0.8e308, 0.8e308, 0.0], [3.0, 4.0, 0.0]])
    for p in (1.0, 2.0, 3.0, math.inf):
        value, grad = quietly_ours(ops.normalize, x, p=p, eps=0.0)
        m = np.max(np.abs(x), axis=1, keepdims=True)
        norm = m * np.sum(np.abs(x / m) ** p, axis=1, keepdims=True) ** (1 / p) if p != math.inf else m
        np.testing.assert_allclose(value, x / norm, rtol=1e-14)
        assert np.isfinite(grad).all()
        # normalize(m z) = normalize(z), so the gradient at m z is the one at z over m
        _, unit_grad = ours(ops.normalize, x / m, p=p, eps=0.0)
        np.testing.assert_allclose(grad * m, unit_grad, rtol=1e-12, atol=1e-14)
    value, grad, expected_value, expected_grad = _normalize_both(x[1:2] * 1e100, eps=0.0)  # torch's fine here
    np.testing.assert_allclose(value, expected_value, rtol=1e-15)
    assert F.normalize(torch.tensor(x[:1])).abs().max() == 0  # torch's sum of squares overflows


def test_normalize_over_several_dims_and_a_scalar_match_torch():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (2, 3, 4))
    for attrs in ({"dim": (1, 2)}, {"dim": (0, 2), "p": 1.0}, {"dim": -1, "p": math.inf}, {"dim": None}):
        value, grad, expected_value, expected_grad = _normalize_both(x, **attrs)
        np.testing.assert_allclose(value, expected_value, rtol=1e-14)
        np.testing.assert_allclose(grad, expected_grad, rtol=1e-13, atol=1e-15)
    for v in (-3.0, 0.0, 1e-13):
        value, grad, expected_value, expected_grad = _normalize_both(np.array(v), dim=0)
        np.testing.assert_allclose(value, expected_value, rtol=1e-15)
        np.testing.assert_allclose(grad, expected_grad, rtol=1e-15)


@pytest.mark.parametrize("p", [2.0, 1.0, math.inf])
def test_normalize_second_order_matches_torch_below_and_above_eps(p):
    x = np.array([[0.3, -0.2, 0.1], [1.5, -0.7, 0.4]])  # row 0 below eps = 0.5
    result = run_torch_hvp_parity(ops.normalize, Sample((x,), {"p": p, "eps": 0.5}))
    assert result is not None and result.ok, result.message


# -- dtypes and arguments --------------------------------------------------------------------------------------
def test_numpy_scalar_attributes_keep_float32():
    x = tape.tensor(np.array([-1.5, 0.25, 2.0], np.float32), requires_grad=True)
    ys = [ops.hardtanh(x, np.float64(-1.0), np.int64(1)), ops.celu(x, alpha=np.float64(0.5)),
          ops.threshold(x, np.float64(0.1), np.float64(-2.0)), ops.softshrink(x, np.float64(0.1)),
          ops.hardshrink(x, np.float64(0.1)), ops.normalize(x, p=np.float64(3.0), dim=0, eps=np.float64(1e-6))]
    total = ys[0]
    for y in ys:
        assert y.dtype == np.float32
        total = total + y
    total.sum().backward()
    assert x.grad.dtype == np.float32


X = np.array([[0.5, -1.5], [2.0, 0.25]])


@pytest.mark.parametrize("call,error,words", [
    (lambda: ops.hardtanh(tape.tensor(X), 1.0, -1.0), ValueError, ["hardtanh", "min_val", "max_val"]),
    (lambda: ops.hardtanh(tape.tensor(X), "low"), TypeError, ["hardtanh", "min_val"]),
    (lambda: ops.celu(tape.tensor(X), alpha=0.0), ValueError, ["celu", "alpha"]),
    (lambda: ops.softshrink(tape.tensor(X), -0.5), ValueError, ["softshrink", "lambd"]),
    (lambda: ops.hardshrink(tape.tensor(X), None), TypeError, ["hardshrink", "lambd"]),
    (lambda: ops.threshold(tape.tensor(X), 0.5, "zero"), TypeError, ["threshold", "value"]),
    (lambda: ops.threshold(tape.tensor(X), 0.5), TypeError, ["threshold", "value"]),
    (lambda: ops.softmin(tape.tensor(X), dim=1.5), TypeError, ["softmin", "dim", "int", "1.5"]),
    (lambda: ops.softmin(tape.tensor(X), dim=2), ValueError, ["softmin", "dim"]),
    (lambda: ops.glu(tape.tensor(np.ones((2, 3)))), ValueError, ["glu", "input", "even"]),
    (lambda: ops.glu(tape.tensor(np.array(1.0)), dim=0), ValueError, ["glu", "input", "0-d"]),
    (lambda: ops.prelu(tape.tensor(X), tape.tensor(np.ones(3))), ValueError, ["prelu", "weight", "channel"]),
    (lambda: ops.prelu(tape.tensor(np.ones(3)), tape.tensor(np.ones(3))), ValueError, ["prelu", "weight"]),
    (lambda: ops.prelu(tape.tensor(X), tape.tensor(np.ones((1, 2)))), ValueError, ["prelu", "weight", "1-D"]),
    (lambda: ops.prelu(tape.tensor(X), tape.tensor(np.array([1]))), TypeError, ["prelu", "weight"]),
    (lambda: ops.normalize(tape.tensor(X), p=0), ValueError, ["normalize", "p"]),
    (lambda: ops.normalize(tape.tensor(X), p=-math.inf), ValueError, ["normalize", "p"]),
    (lambda: ops.normalize(tape.tensor(X), p="fro"), TypeError, ["normalize", "p"]),
    (lambda: ops.normalize(tape.tensor(X), dim=2), ValueError, ["normalize", "dim"]),
    (lambda: ops.normalize(tape.tensor(X), eps=None), TypeError, ["normalize", "eps"]),
])
def test_bad_arguments_name_the_op_and_the_argument(call, error, words):
    with pytest.raises(error) as info:
        call()
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("name", sorted(NAMES - {"prelu", "threshold", "softmin"}))
def test_integer_inputs_are_refused_naming_op_and_argument(name):
    with pytest.raises(TypeError, match=rf"^{name}: argument 'input' expected a floating tensor.*int64"):
        tape.get_op(name)(tape.tensor(np.array([[1, 2], [3, 4]])))
    with pytest.raises(TypeError, match=r"^threshold: argument 'input'"):
        ops.threshold(tape.tensor(np.array([1, 2])), 1.0, 0.0)


def test_prelu_refuses_mixed_float_dtypes():
    with pytest.raises(TypeError):
        ops.prelu(tape.tensor(X), tape.tensor(np.array([0.25], np.float32)))
