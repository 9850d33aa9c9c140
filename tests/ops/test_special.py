"""Special functions (ops/special.py): what the generated tests do not cover -- the values at poles, infinities
and extremes (which finite differences cannot sample), accuracy to ~1e-14 relative against torch on wide ranges,
sinc's second order at 0, the gradient chain lgamma -> digamma -> polygamma, the aliases and argument errors."""

import math

import numpy as np
import pytest
from oracle import ours, theirs

import ops
import tape

RNG = np.random.default_rng(21)


def _same(ours_value, torch_value, rtol):
    """Equal where finite to ``rtol`` relative, and the same inf/NaN pattern (signs included)."""
    ours_value, torch_value = np.asarray(ours_value), np.asarray(torch_value)
    finite = np.isfinite(torch_value)
    np.testing.assert_array_equal(np.isnan(ours_value), np.isnan(torch_value))
    infinite = ~finite & ~np.isnan(torch_value)
    np.testing.assert_array_equal(ours_value[infinite], torch_value[infinite])
    np.testing.assert_allclose(ours_value[finite], torch_value[finite], rtol=rtol, atol=0)


def _values(op, x, **attrs):
    return op(tape.tensor(x), **attrs).numpy()


EDGES = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, -1.0, -2.0, -7.0, 1e-300, 5e-324, 1e300, 170.5, 1e6, -1e6 - 0.5])


@pytest.mark.parametrize(
    "name,fn",
    [
        ("lgamma", lambda torch, t: torch.lgamma(t)),
        ("digamma", lambda torch, t: torch.digamma(t)),
        ("i0", lambda torch, t: torch.i0(t)),
        ("i0e", lambda torch, t: torch.special.i0e(t)),
        ("i1", lambda torch, t: torch.special.i1(t)),
        ("i1e", lambda torch, t: torch.special.i1e(t)),
        ("erfcx", lambda torch, t: torch.special.erfcx(t)),
        ("log_ndtr", lambda torch, t: torch.special.log_ndtr(t)),
        ("entr", lambda torch, t: torch.special.entr(t)),
        ("sinc", lambda torch, t: torch.sinc(t)),
    ],
)
def test_edge_values_are_torchs(torch, name, fn):
    """Poles, +-inf, NaN, +-0, subnormals and huge inputs: torch's value, inf and NaN included."""
    x = EDGES.copy()
    _same(_values(getattr(ops, name), x), fn(torch, torch.tensor(x)).numpy(), rtol=1e-13)


def test_ndtr_and_ndtri_edges(torch):
    y = np.array([0.0, 1.0, -0.1, 1.1, np.nan, 5e-324, 1e-300, 1e-20, 0.5, 1 - 1e-16])
    _same(_values(ops.ndtri, y), torch.special.ndtri(torch.tensor(y)).numpy(), rtol=1e-14)
    x = np.array([-np.inf, np.inf, np.nan, 0.0, -1.0, 8.0, 40.0])
    _same(_values(ops.ndtr, x), torch.special.ndtr(torch.tensor(x)).numpy(), rtol=1e-14)


def test_ndtr_keeps_the_left_tail_where_torchs_underflows():
    """torch's ndtr(-38) is 0 (1 + erf(x / sqrt 2) cancels); ours is erfc(38 / sqrt 2) / 2 = 2.885428351e-316."""
    value = _values(ops.ndtr, np.array([-38.0, -20.0]))
    np.testing.assert_allclose(value, [2.8854283516672e-316, 2.7536241186062337e-89], rtol=1e-12)


@pytest.mark.parametrize(
    "name,fn,low,high",
    [
        ("lgamma", lambda torch, t: torch.lgamma(t), 0.01, 60.0),
        ("lgamma", lambda torch, t: torch.lgamma(t), 0.9, 2.1),  # its zeros 1 and 2: relative accuracy kept
        ("digamma", lambda torch, t: torch.digamma(t), -9.9, 40.0),
        ("i0", lambda torch, t: torch.i0(t), -40.0, 40.0),
        ("i0e", lambda torch, t: torch.special.i0e(t), -40.0, 40.0),
        ("i1", lambda torch, t: torch.special.i1(t), -40.0, 40.0),
        ("i1e", lambda torch, t: torch.special.i1e(t), -40.0, 40.0),
        ("erfcx", lambda torch, t: torch.special.erfcx(t), -6.0, 80.0),
        ("log_ndtr", lambda torch, t: torch.special.log_ndtr(t), -30.0, 8.0),
        ("ndtri", lambda torch, t: torch.special.ndtri(t), 1e-12, 1 - 1e-12),
    ],
)
def test_accuracy_against_torch_over_a_wide_range(torch, name, fn, low, high):
    x = RNG.uniform(low, high, 4000)
    _same(_values(getattr(ops, name), x), fn(torch, torch.tensor(x)).numpy(), rtol=1e-13)


def test_lgamma_on_negative_non_integers_against_torch(torch):
    # the reflection formula cancels near lgamma's negative zeros (-2.457..., -2.747...): there the relative
    # error grows like 1 / |lgamma(x)|; away from them it is ~1e-14
    x = RNG.uniform(-20.0, -0.01, 4000)
    expected = torch.lgamma(torch.tensor(x)).numpy()
    away = np.abs(expected) > 0.1
    np.testing.assert_allclose(_values(ops.lgamma, x)[away], expected[away], rtol=1e-13)
    np.testing.assert_allclose(_values(ops.lgamma, x), expected, rtol=0, atol=1e-13)


def test_lgamma_at_its_zeros_is_exactly_zero_and_keeps_relative_accuracy():
    x = np.array([1.0, 2.0, 1 + 1e-10, 2 + 1e-10])
    value = _values(ops.lgamma, x)
    assert value[0] == 0 and value[1] == 0
    euler, z = 0.5772156649015329, x[2:] - np.array([1.0, 2.0])  # the offsets as stored (exact differences)
    np.testing.assert_allclose(value[2:], [-euler * z[0], (1 - euler) * z[1]], rtol=1e-9)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_polygamma_is_the_derivative_chain_of_lgamma(torch, n):
    """trigamma: torch's own series is accurate to ~1e-9 relative (ours: ~1e-15), so n=1 compares at 1e-8."""
    x = np.concatenate([RNG.uniform(0.05, 30.0, 500), RNG.uniform(-5.0, -0.05, 100)])
    expected = torch.polygamma(n, torch.tensor(x)).numpy()
    np.testing.assert_allclose(ops.polygamma(n, tape.tensor(x)).numpy(), expected, rtol=1e-8 if n == 1 else 1e-12)


def test_trigamma_exact_values():
    value = ops.polygamma(1, tape.tensor(np.array([1.0, 0.5, 2.0]))).numpy()
    np.testing.assert_allclose(value, [math.pi**2 / 6, math.pi**2 / 2, math.pi**2 / 6 - 1], rtol=1e-15)


def test_third_derivative_of_lgamma_is_polygamma_2():
    x = tape.tensor(np.array([0.7, 3.2, 11.0]), requires_grad=True)
    d1 = _derivative(ops.lgamma(x), x)
    d2 = _derivative(d1, x)
    d3 = _derivative(d2, x)
    np.testing.assert_allclose(d1.numpy(), _values(ops.digamma, x.numpy()), rtol=1e-15)
    np.testing.assert_allclose(d2.numpy(), ops.polygamma(1, x.detach()).numpy(), rtol=1e-15)
    np.testing.assert_allclose(d3.numpy(), ops.polygamma(2, x.detach()).numpy(), rtol=1e-15)


def _derivative(y, x):
    """d sum(y) / dx, recorded (differentiable again)."""
    x.grad = None
    y.sum().backward(create_graph=True)
    return x.grad


def test_sinc_at_zero_first_and_second_order(torch):
    x = np.array([0.0, 0.25, -1.5])
    value, grad = ours(ops.sinc, x)
    expected_value, expected_grad = theirs(lambda t: torch.sinc(t), x)
    np.testing.assert_allclose(value, expected_value, rtol=1e-15)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-14, atol=1e-300)
    t = tape.tensor(np.array([0.0]), requires_grad=True)
    d1 = _derivative(ops.sinc(t), t)
    d2 = _derivative(d1, t)
    assert d1.numpy()[0] == 0
    np.testing.assert_allclose(d2.numpy(), [-(math.pi**2) / 3], rtol=1e-15)  # torch's double backward gives 0


def test_mvlgamma_against_its_definition():
    x = np.array([2.5, 4.0, 7.25])
    expected = [3 * math.log(math.pi) / 2 + sum(math.lgamma(v - j / 2) for j in range(3)) for v in x]
    np.testing.assert_allclose(_values(ops.mvlgamma, x, p=3), expected, rtol=1e-15)


def test_aliases_are_the_same_ops():
    assert ops.gammaln is ops.lgamma and ops.psi is ops.digamma
    assert ops.multigammaln is ops.mvlgamma and ops.expit is ops.sigmoid


def test_argument_errors_name_the_op_and_argument():
    x = tape.tensor(np.array([0.5, 2.0]))
    with pytest.raises(ValueError, match=r"polygamma: argument 'n' expected an int >= 0, got -1"):
        ops.polygamma(-1, x)
    with pytest.raises(TypeError, match=r"polygamma: argument 'n' expected an int >= 0, got float 1.0"):
        ops.polygamma(1.0, x)
    with pytest.raises(ValueError, match=r"mvlgamma: argument 'input' expected every entry > \(p - 1\) / 2 = 1.0"):
        ops.mvlgamma(x, p=3)
    with pytest.raises(ValueError, match=r"mvlgamma: argument 'p' expected an int >= 1, got 0"):
        ops.mvlgamma(x, p=0)
    with pytest.raises(TypeError, match=r"lgamma: argument 'input' expected a floating tensor"):
        ops.lgamma(tape.tensor(np.array([1, 2])))
    with pytest.raises(TypeError, match=r"xlog1py: arguments 'input' and 'other' expected floating tensors"):
        ops.xlog1py(tape.tensor(np.array([1, 2])), tape.tensor(np.array([1, 2])))


def test_float32_is_computed_in_float64_and_rounded_once(torch):
    x = RNG.uniform(0.1, 10.0, 1000).astype(np.float32)
    for op, fn in ((ops.lgamma, torch.lgamma), (ops.digamma, torch.digamma), (ops.i0, torch.i0)):
        value = _values(op, x)
        assert value.dtype == np.float32
        exact = fn(torch.tensor(x.astype(np.float64))).numpy().astype(np.float32)
        np.testing.assert_array_equal(value, exact)
