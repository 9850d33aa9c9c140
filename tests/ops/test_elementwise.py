"""Unary elementwise ops: what the generated tests do not cover -- second order on every sample, torch's
gradient at kinks and bounds, stability at +-1e4, gelu's two forms over a wide range, erf/erfc accuracy,
integer inputs and argument errors; and, for the elementwise, binary and reduce families alike, edge values
(0, +-inf, NaN, huge, subnormal) giving torch's values and gradients without a numpy warning."""

import math

import numpy as np
import pytest
from oracle import LazyTorch, ours, run_torch_hvp_parity, theirs

import ops
import tape
from tape.registry import Grad, Sample
from tape.tools.edges import grid_samples, in_dtype
from tape.tools.verify import differentiable_positions, op_samples, run_gradgradcheck

torch = LazyTorch()  # torch imported at first use: the module collects without torch
F = torch.nn.functional

FAMILY = [op for op in tape.registered_ops() if op.family == "elementwise"]
TORCH_DTYPE = {np.float32: torch.float32, np.float64: torch.float64}




def assert_matches_torch(op, fn, x, rtol=1e-7, atol=1e-12, **attrs):
    value, grad = ours(op, x, **attrs)
    expected_value, expected_grad = theirs(fn, x, **attrs)
    assert value.dtype == x.dtype and grad.dtype == x.dtype
    np.testing.assert_allclose(value, expected_value, rtol=rtol, atol=atol)
    np.testing.assert_allclose(grad, expected_grad, rtol=rtol, atol=atol)


# -- the family's declarations -------------------------------------------------------------------------------
EXPECTED = {"neg", "abs", "sign", "exp", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "square", "sin",
            "cos", "tanh", "sigmoid", "relu", "leaky_relu", "elu", "gelu", "silu", "softplus", "clamp", "erf", "erfc"}


def test_every_op_of_the_family_is_registered_with_samples_and_a_torch_reference():
    names = {op.name for op in FAMILY}
    assert EXPECTED <= names
    for op in FAMILY:
        assert op.samples is not None and op.torch_ref is not None, op.name
    assert all(tape.get_op(n).input_states == (tape.Grad.RULE,) for n in EXPECTED - {"clamp"})
    assert ops.clamp.input_states == (tape.Grad.RULE,) * 3  # x, min, max: torch's tensor bounds



# -- second order: every differentiable op, on every sample --------------------------------------------------------
SECOND_ORDER = [pytest.param(op, s, id=f"{op.name}-{i}-{s.label}") for op in FAMILY
                if op.second_order is not Grad.NOT_DIFFERENTIABLE
                for i, s in enumerate(op_samples(op)) if differentiable_positions(op, s)]


@pytest.mark.parametrize("op,sample", SECOND_ORDER)
def test_second_order_matches_finite_differences_and_torch(op, sample):
    assert op.second_order is Grad.RULE, f"{op.name}: second order is {op.second_order}: {op.second_order_note}"
    result = run_gradgradcheck(op, sample)
    assert result.ok, f"{op.name} on {sample}: {result.message}"
    parity = run_torch_hvp_parity(op, sample)
    assert parity is None or parity.ok, f"{op.name} on {sample}: {parity.message}"


# -- kinks and bounds: torch's conventions ---------------------------------------------------------------------
KINKS = [
    ("abs", torch.abs, {}, [-1.0, 0.0, 2.0]),
    ("relu", torch.relu, {}, [-1.0, 0.0, 2.0]),
    ("leaky_relu", F.leaky_relu, {"negative_slope": 0.1}, [-1.0, 0.0, 2.0]),
    ("elu", F.elu, {"alpha": 2.0}, [-1.0, 0.0, 2.0]),
    ("clamp", torch.clamp, {"min": -1.0, "max": 1.0}, [-2.0, -1.0, 0.0, 1.0, 2.0]),
    ("clamp", torch.clamp, {"min": 0.5}, [0.0, 0.5, 1.0]),
    ("clamp", torch.clamp, {"max": 0.5}, [0.0, 0.5, 1.0]),
    ("clamp", torch.clamp, {"min": 1.0, "max": -1.0}, [-2.0, -1.0, 0.0, 1.0, 2.0]),  # min > max: all -> max
    ("softplus", F.softplus, {"beta": 2.0, "threshold": 1.0}, [0.25, 0.5, 0.75]),  # beta * x == threshold
]


@pytest.mark.parametrize("name,fn,attrs,values", KINKS, ids=[f"{k[0]}-{k[2]}" for k in KINKS])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gradient_at_kinks_and_bounds_is_torchs(name, fn, attrs, values, dtype):
    assert_matches_torch(tape.get_op(name), fn, np.array(values, dtype), **attrs)


def test_clamp_passes_the_gradient_at_both_bounds_and_nowhere_when_min_exceeds_max():
    _, grad = ours(ops.clamp, np.array([-1.0, 1.0]), min=-1.0, max=1.0)
    assert (grad != 0).all()
    value, grad = ours(ops.clamp, np.array([-2.0, 0.0, 2.0]), min=1.0, max=-1.0)
    assert (value == -1.0).all() and (grad == 0).all()


def test_sign_matches_torch_at_zero_and_has_zero_gradient_like_torch():
    x = np.array([-2.0, -0.0, 0.0, 3.0])
    np.testing.assert_array_equal(ops.sign(tape.tensor(x)).numpy(), torch.sign(torch.tensor(x)).numpy())
    ours = tape.tensor(x, requires_grad=True)
    (ops.sign(ours) * ours).sum().backward()
    theirs = torch.tensor(x, requires_grad=True)
    (torch.sign(theirs) * theirs).sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


# -- stability -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name,fn,attrs", [("sigmoid", torch.sigmoid, {}), ("silu", F.silu, {}),
                                           ("softplus", F.softplus, {}), ("softplus", F.softplus, {"beta": 0.5}),
                                           ("softplus", F.softplus, {"beta": 3.0, "threshold": 50.0}),
                                           ("tanh", torch.tanh, {}), ("gelu", F.gelu, {}),
                                           ("gelu", F.gelu, {"approximate": "tanh"}), ("elu", F.elu, {})])
def test_large_inputs_give_finite_values_and_gradients_like_torch(name, fn, attrs, dtype):
    x = np.array([-1e4, -300.0, -60.0, -20.0, 20.0, 60.0, 300.0, 1e4], dtype)
    with np.errstate(over="raise", divide="raise", invalid="raise"):  # no overflow, not even an intermediate one
        value, grad = ours(tape.get_op(name), x, **attrs)
    assert np.isfinite(value).all() and np.isfinite(grad).all()
    expected_value, expected_grad = theirs(fn, x, **attrs)
    np.testing.assert_allclose(value, expected_value, rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-6, atol=1e-30)


def test_softplus_without_a_threshold_stays_finite_where_torch_overflows():
    x = np.array([-1e4, 1e4, 1e30])
    value, grad = ours(ops.softplus, x, threshold=1e300)
    np.testing.assert_array_equal(value, [0.0, 1e4, 1e30])  # log(1 + e^x) = x in float64 beyond x ~ 37
    assert np.isfinite(grad).all() and grad[0] == 0 and (grad[1:] > 0).all()
    assert np.isinf(F.softplus(torch.tensor(x), threshold=1e300).numpy()[1])


def test_sigmoid_keeps_relative_accuracy_in_the_left_tail():
    x = np.array([-30.0, -100.0, -700.0])
    np.testing.assert_allclose(ops.sigmoid(tape.tensor(x)).numpy(), np.exp(x) / (1 + np.exp(x)), rtol=1e-12)


# -- gelu ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype,rtol,atol", [(np.float64, 1e-12, 1e-14), (np.float32, 2e-6, 1e-6)])
def test_gelu_matches_torch_over_a_wide_range(approximate, dtype, rtol, atol):
    # atol: 1 + erf(x / sqrt 2) (torch) and 1 + tanh(u) (both) cancel in the left tail; ours keeps the exact tail
    x = np.concatenate([np.linspace(-12, 12, 481), [-40.0, -5.5, -0.3, 0.0, 0.3, 5.5, 40.0]]).astype(dtype)
    assert_matches_torch(ops.gelu, F.gelu, x, rtol=rtol, atol=atol, approximate=approximate)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(1031, 517), (300, 401)])  # many blocks (on the worker pool); a transposed view
def test_gelu_over_many_blocks_matches_torch_and_each_element_alone(approximate, shape):
    # float32 gelu runs over flat blocks of rows (rowwise.flat_blockwise), several threads at this size: every
    # element gets the value and slope it gets alone, and torch's within float32 rounding
    x = (np.random.default_rng(3).standard_normal(shape) * 2).astype(np.float32)
    x = x if shape[0] > 1000 else x.T
    # atol: torch's float32 erf is 1.1e-6 off near x = -3 (ours 4.7e-7, against float64); the tanh form's slope is
    # grouped as in torch's forward, not its backward (1.2e-6 apart at worst here)
    assert_matches_torch(ops.gelu, F.gelu, x, rtol=2e-6, atol=2e-6, approximate=approximate)
    exact = ops.gelu(tape.tensor(x.astype(np.float64)), approximate=approximate).numpy()
    np.testing.assert_allclose(ops.gelu(tape.tensor(x), approximate=approximate).numpy(), exact, rtol=1e-6, atol=6e-7)

    def value_and_slope(a):
        t = tape.tensor(a, requires_grad=True)
        y = ops.gelu(t, approximate=approximate)
        y.backward(np.ones(y.shape, y.dtype))
        return y.numpy().reshape(-1), t.grad.numpy().reshape(-1)

    value, slope = value_and_slope(x)
    for k in np.random.default_rng(4).integers(0, x.size, 50):
        alone = value_and_slope(x.reshape(-1)[k : k + 1].copy())
        assert (value[k], slope[k]) == (alone[0][0], alone[1][0])


def test_exact_gelu_keeps_relative_accuracy_in_both_tails():
    x = np.array([-30.0, -12.0, -6.0, -1.0, -1e-8, 0.0, 1e-8, 0.4, 0.5, 3.9, 4.1, 6.0, 30.0])
    expected = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in x])
    expected_grad = np.array([0.5 * math.erfc(-v / math.sqrt(2)) + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi)
                              for v in x])
    value, grad = ours(ops.gelu, x)
    np.testing.assert_allclose(value, expected, rtol=1e-12, atol=0)
    np.testing.assert_allclose(grad / np.linspace(0.5, 1.5, x.size), expected_grad, rtol=1e-12, atol=0)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_second_order_matches_torch_over_a_wide_range(approximate):
    sample = Sample((np.concatenate([np.linspace(-10, 10, 81), [-30.0, 30.0]]),), {"approximate": approximate})
    result = run_torch_hvp_parity(ops.gelu, sample)
    assert result.ok, result.message


# -- erf, erfc -------------------------------------------------------------------------------------------------
def test_erf_and_erfc_keep_float64_accuracy_in_both_tails():
    x = np.concatenate([np.linspace(-27, 27, 1081), [0.0, -0.0, 1e-300, -1e-300, 0.46875, 0.46876, 4.0, 4.0001]])
    erf, erfc = (op(tape.tensor(x)).numpy() for op in (ops.erf, ops.erfc))
    expected_erf = np.array([math.erf(v) for v in x])
    expected_erfc = np.array([math.erfc(v) for v in x])
    np.testing.assert_allclose(erf, expected_erf, rtol=2e-15, atol=0)
    kept = expected_erfc > 1e-300  # below that erfc is subnormal and has few significant bits
    np.testing.assert_allclose(erfc[kept], expected_erfc[kept], rtol=3e-15, atol=0)
    assert (erfc[~kept] < 1e-299).all()
    np.testing.assert_allclose(erf, torch.erf(torch.tensor(x)).numpy(), rtol=1e-14, atol=0)


@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_erf_and_erfc_in_float32_are_the_float64_values_rounded(name):
    x = np.linspace(-10, 10, 401).astype(np.float32)
    out = tape.get_op(name)(tape.tensor(x)).numpy()
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, tape.get_op(name)(tape.tensor(x.astype(np.float64))).numpy().astype(np.float32))
    np.testing.assert_allclose(out, getattr(torch, name)(torch.tensor(x)).numpy(), rtol=2e-6, atol=1e-37)


def test_gelu_default_is_the_exact_form():
    x = tape.tensor(np.array([-1.0, 0.5, 2.0]))
    np.testing.assert_array_equal(ops.gelu(x).numpy(), ops.gelu(x, approximate="none").numpy())
    assert not np.allclose(ops.gelu(x).numpy(), ops.gelu(x, approximate="tanh").numpy(), rtol=1e-6, atol=0)


# -- dtypes ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,fn", [("neg", torch.neg), ("abs", torch.abs), ("square", torch.square),
                                     ("relu", torch.relu)])
def test_integer_input_stays_integer_like_torch(name, fn):
    x = np.array([-3, 0, 2, 7], np.int64)
    out = tape.get_op(name)(tape.tensor(x)).numpy()
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, fn(torch.tensor(x)).numpy())
    out = ops.clamp(tape.tensor(x), min=-1, max=3).numpy()
    assert out.dtype == np.int64 and out.tolist() == [-1, 0, 2, 3]


def test_numpy_scalar_attributes_keep_float32_forward_and_backward():
    x = tape.tensor(np.array([-1.5, 0.5, 2.0], np.float32), requires_grad=True)
    ys = [ops.leaky_relu(x, negative_slope=np.float64(0.2)), ops.elu(x, alpha=np.float64(0.5)),
          ops.softplus(x, beta=np.float64(2.0), threshold=np.int64(3)), ops.clamp(x, min=np.float64(-1.0), max=1)]
    for y in ys:
        assert y.dtype == np.float32
    ops.sum(ops.add(ops.add(ys[0], ys[1]), ops.add(ys[2], ys[3]))).backward()
    assert x.grad.dtype == np.float32


# -- argument errors -------------------------------------------------------------------------------------------
X = np.array([0.5, 1.5])


@pytest.mark.parametrize("call,error,words", [
    (lambda: ops.gelu(tape.tensor(X), approximate="fast"), ValueError, ["gelu", "approximate", "fast"]),
    (lambda: ops.leaky_relu(tape.tensor(X), negative_slope="steep"), TypeError, ["leaky_relu", "negative_slope"]),
    (lambda: ops.elu(tape.tensor(X), alpha=None), TypeError, ["elu", "alpha"]),
    (lambda: ops.softplus(tape.tensor(X), beta=0), ValueError, ["softplus", "beta"]),
    (lambda: ops.softplus(tape.tensor(X), threshold="high"), TypeError, ["softplus", "threshold"]),
    (lambda: ops.clamp(tape.tensor(X)), ValueError, ["clamp", "min", "max"]),
    (lambda: ops.clamp(tape.tensor(X), min=tape.tensor(np.array([True, False]))), TypeError, ["clamp", "min", "bool"]),
    (lambda: ops.clamp(tape.tensor(np.arange(3)), max=1.5), TypeError, ["clamp", "max"]),
    (lambda: ops.clamp(tape.tensor(np.array([True])), min=0), TypeError, ["clamp", "x", "bool"]),
    (lambda: ops.neg(tape.tensor(np.array([True]))), TypeError, ["neg", "x", "bool"]),
])
def test_bad_arguments_name_the_op_and_the_argument(call, error, words):
    with pytest.raises(error) as info:
        call()
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("name", ["exp", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos",
                                  "tanh", "sigmoid", "leaky_relu", "elu", "gelu", "silu", "softplus", "erf", "erfc"])
def test_float_only_ops_refuse_integer_tensors_naming_op_and_argument(name):
    with pytest.raises(TypeError, match=rf"^{name}: argument 'x' expected a floating tensor.*int64"):
        tape.get_op(name)(tape.tensor(np.array([1, 2])))


# -- edge values: no numpy warning, the mathematical values (float64 reference rounded once) --------------------
EDGE_MODULES = (ops.elementwise, ops.binary, ops.reduce)  # the ops these modules declare (other modules may join
EDGE_OPS = {name for module in EDGE_MODULES for name in module.__all__}  # the families: they test their own)


def _edge_cases():
    """(op, input arrays (float64), attrs) for every op of the three families, over the edge values
    (tape/tools/edges.py, which the ONNX export column reads too): unary ops on all of them, binary ops on every
    pair (same-shape operands, so no gradient is summed over a broadcast), reductions over rows mixing them."""
    return [pytest.param(op, sample.inputs, sample.attrs, id=f"{op.name}-{sample.attrs}")
            for op in tape.registered_ops() if op.name in EDGE_OPS for sample in grid_samples(op)]


def _first(out):
    """The values of a call with several outputs (max with a dim: (values, indices)); the output of any other."""
    return out[0] if isinstance(out, tuple) else out


def _run(backend, op, arrays, attrs, dtype, upstream=None):
    """(output, gradients of sum(out * u) for the float inputs) in minitape or torch; ``u`` is made in ``upstream``
    (default ``dtype``) and widened to ``dtype``, so a float64 reference sees the float32 run's very u."""
    differentiable = [a.dtype.kind == "f" and s is Grad.RULE for a, s in zip(arrays, op.input_states)]
    if backend == "ours":
        leaves = [tape.tensor(a, requires_grad=d) for a, d in zip(arrays, differentiable)]
        out = _first(op(**dict(zip(op.input_names, leaves)), **attrs))
        if out.dtype.kind != "f" or not any(differentiable):
            return out.numpy(), []
        out.backward(np.linspace(0.5, 1.5, out.numel()).reshape(out.shape).astype(out.dtype))
        return out.numpy(), [t.grad.numpy() for t, d in zip(leaves, differentiable) if d]
    leaves = [torch.tensor(a, requires_grad=d) for a, d in zip(arrays, differentiable)]
    out = _first(op.torch_ref(torch, *leaves, **attrs))
    if not out.dtype.is_floating_point or not any(differentiable):
        return out.numpy(), []
    u = np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)).astype(upstream or dtype).astype(dtype)
    out.backward(torch.from_numpy(u))
    return out.detach().numpy(), [t.grad.numpy() for t, d in zip(leaves, differentiable) if d]


def _mathematical(op, arrays, attrs, dtype):
    """The mathematical value and gradients at the edge values, rounded to ``dtype``: torch's float64 kernels on the
    exactly widened inputs (and upstream gradient), then rounded once. torch's float32 CPU kernels differ by CPU
    (AVX2 and AVX-512 paths: ``ATEN_CPU_CAPABILITY``) exactly at such values, so a float32 result of torch is never
    the truth here; ``test_torch_float32_edge_artifacts_are_the_known_ones`` records where it strays."""
    if op.name in DTYPE_DEFINED:
        return _run("torch", op, arrays, attrs, dtype)
    wide = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    value, gradients = _run("torch", op, wide, attrs, np.float64, upstream=dtype)
    narrow = lambda x: x.astype(dtype) if x.dtype.kind == "f" else x
    return narrow(value), [narrow(g) for g in gradients]


@pytest.mark.parametrize("op,arrays,attrs", _edge_cases())
def test_torch_float32_edge_artifacts_are_the_known_ones(op, arrays, attrs):
    """torch's float32 kernels against the mathematical value on the same grid: where they stray (outside
    FLOAT32_RANGE and the other recorded cases), the op must be listed in TORCH_FLOAT32_ARTIFACTS with its condition.
    Whether a listed artifact shows depends on the CPU, so a listed op that matches here passes too."""
    import warnings

    dtype = np.float32
    arrays = [in_dtype(a, dtype) for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torchs = _run("torch", op, arrays, attrs, dtype)
        expected = _mathematical(op, arrays, attrs, dtype)
    try:
        _assert_edge_values_equal(op, arrays, attrs, dtype, torchs, expected, who="torch's float32 ")
    except AssertionError:
        if op.name not in TORCH_FLOAT32_ARTIFACTS and (op.name, dtype) not in KNOWN_DIFFERENCES:
            raise


def test_quiet_ops_leave_numpys_error_state_as_it_was():
    with np.errstate(divide="raise"):
        x = tape.tensor(np.array([0.0, 1.0]), requires_grad=True)
        y = ops.log(x)  # torch's -inf, no FloatingPointError
        y.backward(np.ones(2))
        assert y.numpy()[0] == -np.inf and x.grad.numpy()[0] == np.inf
        with pytest.raises(FloatingPointError):
            np.log(np.array([0.0]))


# Gradients where torch's answer is an artifact of its kernels, not a convention: not compared there.
TORCH_ARTIFACTS = {
    "elu": (lambda x: np.isnan(x), "torch's elu gradient at NaN is 1 on its scalar path and NaN on its vectorised "
                                   "one (it depends on the tensor's length); ours is NaN"),
    "var": (lambda x: np.abs(x) > np.finfo(x.dtype).max / 4,
            "torch's backward recomputes the mean, which overflows for huge entries (-inf where var is 0); ours "
            "uses the forward's mean, computed without overflow, and gives 2 (x - mean) / dof = 0"),
}
TORCH_ARTIFACTS["std"] = TORCH_ARTIFACTS["var"]
TORCH_ARTIFACTS["addcdiv"] = (
    lambda x: (np.abs(x) < np.sqrt(np.finfo(x.dtype).tiny)) | (np.abs(x) > np.sqrt(np.finfo(x.dtype).max)),
    "torch's gradient w.r.t. tensor2 divides by tensor2 * tensor2, which underflows (0/0 = NaN) or overflows where "
    "|tensor2| is beyond sqrt of the range; ours divides by tensor2 twice (the mask is on each input's own entries)",
)

TORCH_ARTIFACTS["logit"] = (
    lambda x: (x == 0) | np.isnan(x),
    "torch's logit gradient depends on its kernel path (ATEN_CPU_CAPABILITY): at -0.0 the AVX-512 kernel gives +inf "
    "and the AVX2 one -inf; at NaN with eps AVX-512 gives NaN and AVX2 0. Ours is +inf at +-0 (the limit inside the "
    "domain [0, 1]) and NaN at NaN: test_logit_gradient_at_zero_and_nan_is_ours pins them",
)

TORCH_ARTIFACTS["frexp"] = (
    lambda x: np.abs(x) >= 2.0**128,
    "torch's frexp gradient g / exp2(exponent) takes exp2 of the int32 exponent in float32, inf from 2^128 on: 0 at "
    "1e300; ours is g * 2^-exponent (1e-300 there)",
)

TORCH_ARTIFACTS["gelu_backward"] = (
    lambda x: np.abs(x) > np.sqrt(np.finfo(x.dtype).max),
    "torch's gelu double backward multiplies exp(-x^2 / 2) = 0 by an overflowing x^2 (NaN at 1e300); ours is "
    "2 phi - x (x phi), 0 there: test_gelu_second_derivative_vanishes_where_x_squared_overflows pins it",
)


def test_gelu_second_derivative_vanishes_where_x_squared_overflows():
    for dtype, huge in ((np.float64, 1e300), (np.float32, 3e38)):
        x = tape.tensor(np.array([huge, -huge, 0.0], dtype), requires_grad=True)
        ops.gelu_backward(tape.tensor(np.ones(3, dtype)), x).backward(np.ones(3, dtype))
        np.testing.assert_array_equal(x.grad.numpy(), np.array([0.0, 0.0, 2 / np.sqrt(2 * np.pi)], dtype))


def test_logit_gradient_at_zero_and_nan_is_ours():
    x = tape.tensor(np.array([0.0, -0.0, 1.0, np.nan]), requires_grad=True)
    ops.logit(x).backward(np.ones(4))
    np.testing.assert_array_equal(x.grad.numpy(), [np.inf, np.inf, np.inf, np.nan])
    x = tape.tensor(np.array([0.0, -0.0, np.nan, 0.5]), requires_grad=True)
    ops.logit(x, eps=0.1).backward(np.ones(4))
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, np.nan, 4.0])


# Values where torch's kernel gives NaN for an exactly representable answer: not compared there.
TORCH_VALUE_ARTIFACTS = {
    name: (lambda arrays: np.logical_and(arrays[1] != 0, np.logical_or(
        np.abs(arrays[1]) < np.finfo(arrays[1].dtype).tiny,
        np.abs(arrays[0]) > np.abs(arrays[1]) * np.finfo(arrays[1].dtype).max)),
           "torch's remainder / fmod give NaN for a subnormal divisor or where input / other overflows; ours is "
           "the exact remainder")
    for name in ("remainder", "fmod")}


# Where float32 arithmetic itself cannot give the mathematical value -- an intermediate overflows to inf or underflows
# to 0 although the float64 result rounds to a finite float32 (x**2 of 3e38 in a norm, a mean's sum, hypot's square,
# round's 10**decimals scaling, tanh-GELU's cube, a subnormal base's x**(b-1)) -- ours and torch's float32 kernels
# alike give inf/NaN/0 there. Condition: float32, and an input entry that is huge (>= 1e38) or subnormal (for a
# reduction, in the reduced row). Those entries are not compared; every other entry of these ops is.
FLOAT32_RANGE = {
    "pow": "a subnormal base: b * a**(b - 1) underflows/overflows in float32",
    "atan2": "subnormal operands: the gradient's denominator a**2 + b**2 underflows to 0 in float32",
    "hypot": "a huge or subnormal operand: the square in the gradient a / hypot(a, b) leaves float32's range",
    "gelu": "tanh form at |x| = 3e38: the cube x**3 overflows in float32 (the gradient becomes NaN)",
    "gelu_backward": "as gelu: the tanh form's cube x**3 at |x| = 3e38 overflows in float32 (the slope becomes NaN)",
    "round": "decimals=1 at 3e38: x * 10 overflows in float32 before it is divided back",
    "mean": "a row of two 3e38 entries: their float32 sum overflows (the mean 3e38 is representable)",
    "nanmean": "as mean",
    "var_mean": "a row with 3e38: the variance (~1e77) itself is beyond float32, and so are the squares",
    "std_mean": "as var_mean: the float32 squares (x - mean)**2 overflow",
    "vector_norm": "a row with 3e38: the norm itself overflows float32, so x / norm is 0, not 1/sqrt(2)",
    "norm": "as vector_norm",
    "addcmul": "tensor1 * tensor2 with 3e38 or a subnormal entry leaves float32's range before input is added",
    "addcdiv": "tensor1 / tensor2 with 3e38 or a subnormal entry leaves float32's range before input is added",
    "ldexp": "the value input * 2^other overflows float32 at 3e38 where its gradient w.r.t. other, value * ln 2, "
             "would not",
}

# Where torch's own float32 CPU kernel strays from the mathematical value on the edge grid, outside FLOAT32_RANGE.
# They depend on the CPU's vector unit (ATen picks its AVX2 or AVX-512 kernel at run time, ATEN_CPU_CAPABILITY), so
# an entry may or may not show on a given machine: never an expected value, only a recorded difference.
TORCH_FLOAT32_ARTIFACTS = {
    "gelu": "AVX-512 kernel: gelu(+inf) = NaN and gelu(3e38) = inf (erf form); the AVX2 kernel and float64 give the "
            "exact +inf and 3e38 (seen with torch 2.13 on an Intel Xeon and an AMD EPYC with AVX-512)",
    "xlogy": "the gradient w.r.t. other, g * input / other, overflows float32 at input = other = 3e38 (inf where the "
             "value is g); ours divides first",
    "lerp": "end - input overflows float32 (-3e38 to 3e38): torch's float32 kernel gives inf where the value, "
            "-1.5e38 at weight 0.25, is representable (ours computes float32 lerp in float64, rounded once)",
}

# Ops whose value is defined by the dtype itself: nan_to_num replaces +-inf with the dtype's own largest value. The
# float64 reference would differ by definition, so these are compared with torch in the dtype itself.
DTYPE_DEFINED = {"nan_to_num", "nextafter"}  # nextafter: the next float of the dtype

# Open differences from the mathematical value, each a strict expectation: the test fails when one stops failing.
KNOWN_DIFFERENCES: dict = {}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("op,arrays,attrs", _edge_cases())
def test_edge_values_give_the_mathematical_values_and_gradients_without_numpy_warnings(op, arrays, attrs, dtype):
    known = KNOWN_DIFFERENCES.get((op.name, dtype))
    if known is None:
        return _compare_edge_values(op, arrays, attrs, dtype)
    try:
        _compare_edge_values(op, arrays, attrs, dtype)
    except AssertionError:
        pytest.xfail(known)
    pytest.fail(f"{op.name} in {np.dtype(dtype).name} now matches torch: remove it from KNOWN_DIFFERENCES")


def _compare_edge_values(op, arrays, attrs, dtype):
    import warnings

    arrays = [in_dtype(a, dtype) for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value, gradients = _run("ours", op, arrays, attrs, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own (var's degrees of freedom)
        expected, expected_gradients = _mathematical(op, arrays, attrs, dtype)
    _assert_edge_values_equal(op, arrays, attrs, dtype, (value, gradients), (expected, expected_gradients))


def _assert_edge_values_equal(op, arrays, attrs, dtype, got, expected, who=""):
    """``got`` == ``expected`` (value, gradients) outside the recorded differences: entries where the reference
    (float64) computes a value that float32 arithmetic cannot reach (FLOAT32_RANGE), and torch's artifacts of
    the reference (TORCH_VALUE_ARTIFACTS, TORCH_ARTIFACTS)."""
    (value, gradients), (expected_value, expected_gradients) = got, expected
    rtol = 1e-6 if dtype == np.float32 else 1e-12
    atol = np.finfo(dtype).tiny  # subnormal results carry only a few significant bits
    assert value.dtype == expected_value.dtype and value.shape == expected_value.shape
    value_skip, input_skip = _float32_range_entries(op, arrays, attrs, dtype)
    if op.name in TORCH_VALUE_ARTIFACTS:
        value_skip = value_skip | TORCH_VALUE_ARTIFACTS[op.name][0](arrays)
    value, expected_value = np.where(value_skip, 0, value), np.where(value_skip, 0, expected_value)
    np.testing.assert_allclose(value, expected_value, rtol=rtol, atol=atol, equal_nan=True,
                               err_msg=f"{who}{op.name} value")
    float_inputs = [a for a, s in zip(arrays, op.input_states) if a.dtype.kind == "f" and s is Grad.RULE]
    for i, (g, e) in enumerate(zip(gradients, expected_gradients, strict=True)):
        skip = np.broadcast_to(input_skip, g.shape) if input_skip.shape else input_skip
        if op.name in TORCH_ARTIFACTS:
            skip = skip | TORCH_ARTIFACTS[op.name][0](float_inputs[i])
        g, e = np.where(skip, 0, g), np.where(skip, 0, e)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"{who}{op.name} gradient {i}")


def _float32_range_entries(op, arrays, attrs, dtype):
    """(output mask, input mask) of the entries FLOAT32_RANGE exempts: for its ops in float32, where an input is
    huge (>= 1e38) or subnormal -- for a reduction, the whole reduced row."""
    if dtype != np.float32 or op.name not in FLOAT32_RANGE:
        return np.bool_(False), np.bool_(False)
    floats = [a for a in arrays if a.dtype.kind == "f"]
    extreme = np.zeros(np.broadcast_shapes(*(a.shape for a in floats)), bool)
    for a in floats:
        magnitude = np.abs(a)
        extreme |= (magnitude >= 1e38) | ((magnitude > 0) & (magnitude < np.finfo(np.float32).tiny))
    if op.family != "reduce":
        return extreme, extreme
    dim = attrs.get("dim")
    row = np.any(extreme, axis=dim, keepdims=True)
    return np.any(extreme, axis=dim), np.broadcast_to(row, extreme.shape)


# -- the torch-named unary ops (tan ... logical_not) -----------------------------------------------------------
def test_erfinv_is_exact_to_float64_rounding_and_matches_torch_at_the_edges():
    x = np.concatenate([np.linspace(-0.999999, 0.999999, 2001), [1e-300, -1e-20, 1 - 1e-15, -1 + 1e-16, 1.0, -1.0,
                                                                 1.5, np.nan]])
    ours_out = ops.erfinv(x).numpy()
    inside = np.abs(x) < 1
    assert max(abs(math.erf(y) - v) for y, v in zip(ours_out[inside], x[inside])) <= 2.3e-16
    np.testing.assert_allclose(ours_out, torch.erfinv(torch.tensor(x)).numpy(), rtol=1e-14, equal_nan=True)
    assert_matches_torch(ops.erfinv, torch.erfinv, np.array([-0.9, 0.0, 0.3, 0.99]), rtol=1e-13)


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round", "frac"])
def test_rounding_ops_match_torch_with_torchs_gradient_also_at_jumps(name):
    x = np.array([-2.5, -1.5, -0.5, 0.0, 0.5, 1.5, 2.5, 1.0, -1.25, 0.7])
    assert_matches_torch(tape.get_op(name), getattr(torch, name), x)


def test_round_with_decimals_matches_torch_in_both_dtypes():
    for dtype in (np.float64, np.float32):
        x = np.array([2.5, 0.125, 1234.5678, 15.0, -0.05, 1e30], dtype)
        for decimals in (2, 1, -1, -2):
            np.testing.assert_array_equal(ops.round(x, decimals=decimals).numpy(),
                                          torch.round(torch.tensor(x), decimals=decimals).numpy())
    ints = np.array([1, -2])
    assert ops.round(ints).dtype == np.int64 and ops.floor(ints).dtype == np.int64
    with pytest.raises(TypeError, match="round: argument 'input' of dtype int64 takes decimals=0 only"):
        ops.round(ints, decimals=1)


def test_nan_to_num_matches_torch_with_its_gradient_masked_at_nonfinite_entries():
    x = np.array([np.nan, np.inf, -np.inf, 0.5, -1.5])
    for attrs in ({}, {"nan": 1.5, "posinf": 100.0, "neginf": -7.0}):
        for dtype in (np.float64, np.float32):
            assert_matches_torch(ops.nan_to_num, torch.nan_to_num, x.astype(dtype), **attrs)


def test_value_tests_give_bools_for_any_dtype_like_torch():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -1.5])
    for name in ("isinf", "isnan", "isfinite", "logical_not"):
        for arr in (x, np.array([0, 3, -1])):
            out = tape.get_op(name)(tape.tensor(arr))
            assert out.dtype == np.bool_
            np.testing.assert_array_equal(out.numpy(), getattr(torch, name)(torch.tensor(arr)).numpy())


@pytest.mark.parametrize("name", ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erfinv",
                                  "exp2", "reciprocal", "frac"])
def test_torch_named_float_ops_refuse_integer_tensors_naming_op_and_argument(name):
    with pytest.raises(TypeError, match=rf"^{name}: argument 'input' expected a floating tensor.*int64"):
        tape.get_op(name)(tape.tensor(np.array([1, 2])))


def test_sgn_is_a_tensor_method_as_in_torch():
    # its declaration's method=True had slipped into a comment, so x.sgn() raised AttributeError
    values = np.array([-2.5, -0.0, 0.0, 3.0, np.nan])
    got = tape.tensor(values).sgn()
    np.testing.assert_array_equal(got.numpy(), torch.tensor(values).sgn().numpy())
