"""Scans (cumsum, cumprod, cummax, cummin, logcumsumexp): what the generated tests do not cover -- cumprod's
gradient and second order with any number of zeros, cummax/cummin ties and NaN (index and gradient as torch),
logcumsumexp at -inf, +inf and huge magnitudes, integer dtypes, zero-size inputs and errors naming op and
argument."""

import numpy as np
import pytest
from oracle import LazyTorch

import ops
import tape
from tape.registry import Grad

torch = LazyTorch()  # torch imported at first use: the module collects without torch

SCANS = ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp")


def value_and_grad(fn, x, dim, u=None):
    """(values, indices or None, gradient of <values, u>) of a scan of ours, and the same for torch's."""
    t = tape.tensor(x, requires_grad=x.dtype.kind == "f")
    out = fn(t, dim)
    values, indices = out if isinstance(out, tuple) else (out, None)
    u = np.linspace(0.5, 1.5, values.numel()).reshape(values.shape).astype(x.dtype) if u is None else u
    if t.requires_grad:
        values.backward(u)
    return values.numpy(), None if indices is None else indices.numpy(), None if t.grad is None else t.grad.numpy()


def torch_value_and_grad(name, x, dim, u=None):
    t = torch.tensor(x, requires_grad=x.dtype.kind == "f")
    out = getattr(torch, name)(t, dim)
    values, indices = (out.values, out.indices) if isinstance(out, tuple) else (out, None)
    u = np.linspace(0.5, 1.5, values.numel()).reshape(tuple(values.shape)).astype(x.dtype) if u is None else u
    if t.requires_grad:
        values.backward(torch.from_numpy(u))
    return (values.detach().numpy(), None if indices is None else indices.numpy(),
            None if t.grad is None else t.grad.numpy())


def assert_like_torch(name, x, dim, rtol=1e-12, atol=1e-14):
    ours = value_and_grad(getattr(ops, name), x, dim)
    theirs = torch_value_and_grad(name, x, dim)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=rtol, atol=atol)
    assert ours[0].dtype == theirs[0].dtype
    if theirs[1] is not None:
        np.testing.assert_array_equal(ours[1], theirs[1])
        assert ours[1].dtype == np.int64
    if theirs[2] is not None:
        np.testing.assert_allclose(ours[2], theirs[2], rtol=rtol, atol=atol)


def hvp_ours(name, x, dim, u, v):
    """d/dx <d<scan(x), u>/dx, v> and the same in u, ours."""
    t = tape.tensor(x, requires_grad=True)
    ut = tape.tensor(u, requires_grad=True)
    out = getattr(ops, name)(t, dim)
    out = out[0] if isinstance(out, tuple) else out
    (g,) = tape.gradients(out, [t], [ut], create_graph=True)
    found = tape.gradients((g * v).sum(), [t, ut], allow_unused=True)
    return [np.zeros(x.shape) if a is None else a.numpy() for a in found]


def hvp_torch(name, x, dim, u, v):
    t = torch.tensor(x, requires_grad=True)
    ut = torch.tensor(u, requires_grad=True)
    out = getattr(torch, name)(t, dim)
    out = out[0] if isinstance(out, tuple) else out
    (g,) = torch.autograd.grad(out, [t], ut, create_graph=True)
    found = torch.autograd.grad((g * torch.from_numpy(v)).sum(), [t, ut], allow_unused=True)
    return [np.zeros(x.shape) if a is None else a.numpy() for a in found]


# -- the family's declarations ---------------------------------------------------------------------------------
def test_every_scan_is_registered_with_samples_a_torch_reference_and_a_differentiable_second_order():
    for name in SCANS:
        op = tape.get_op(name)
        assert op.family == "scan" and op.samples is not None and op.torch_ref is not None
        assert op.input_states == (Grad.RULE,) and op.second_order is Grad.RULE, name
        assert op.signature == f"{name}(input, dim{', dtype' if name in ('cumsum', 'cumprod') else ''})"
    assert tape.get_op("cummax").n_outputs == tape.get_op("cummin").n_outputs == 2


def test_numpy_cumsum_on_a_tensor_runs_the_op_and_stays_differentiable():
    t = tape.tensor(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), requires_grad=True)
    y = np.cumsum(t, axis=1)
    assert isinstance(y, tape.Tensor)
    y.sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]])


# -- cumsum / cumprod ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_, np.uint8])
def test_integer_and_bool_inputs_accumulate_in_int64_like_torch(name, dtype):
    x = np.array([[1, 2, 0, 3], [2, 1, 1, 4]]).astype(dtype)
    ours = getattr(ops, name)(tape.tensor(x), 1).numpy()
    theirs = getattr(torch, name)(torch.from_numpy(x), 1).numpy()
    assert ours.dtype == theirs.dtype == np.int64
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cumsum_and_cumprod_keep_the_float_dtype(dtype):
    x = np.array([0.5, 1.5, -2.0], dtype)
    assert ops.cumsum(tape.tensor(x), 0).dtype == ops.cumprod(tape.tensor(x), 0).dtype == dtype


ZERO_PATTERNS = [
    [0.0, 1.5, -0.5, 2.0, 0.75],  # leading zero
    [1.5, -0.5, 0.0, 2.0, 0.75],  # one zero in the middle
    [1.5, -0.5, 2.0, 0.75, 0.0],  # zero last
    [1.5, 0.0, 2.0, 0.0, 0.75],  # two zeros
    [0.0, 0.0, 2.0, -1.25, 0.75],  # two leading zeros
    [1.5, 0.0, 0.0, 0.0, 0.75],  # three adjacent zeros
    [0.0, 0.0, 0.0, 0.0, 0.0],  # only zeros
]


@pytest.mark.parametrize("row", ZERO_PATTERNS, ids=lambda r: "".join("0" if v == 0 else "x" for v in r))
def test_cumprod_gradient_is_exact_with_any_number_of_zeros(row):
    x = np.array(row)
    assert_like_torch("cumprod", x, 0)
    # and against the definition: d y_i / d x_k = prod_{j<=i, j!=k} x_j for k <= i
    u = np.linspace(0.5, 1.5, x.size)
    expected = [sum(u[i] * np.prod([x[j] for j in range(i + 1) if j != k]) for i in range(k, x.size))
                for k in range(x.size)]
    np.testing.assert_allclose(value_and_grad(ops.cumprod, x, 0)[2], expected, rtol=1e-13, atol=1e-15)


def test_cumprod_with_zeros_along_either_dim_of_a_matrix_and_in_float32():
    rng = np.random.default_rng(1)
    x = rng.uniform(0.5, 1.5, size=(6, 7)) * rng.choice([-1.0, 1.0], size=(6, 7))
    x[rng.random((6, 7)) < 0.3] = 0.0
    for dim in (0, 1, -1):
        assert_like_torch("cumprod", x, dim)
        assert_like_torch("cumprod", x.astype(np.float32), dim, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("row", ZERO_PATTERNS[:6], ids=lambda r: "".join("0" if v == 0 else "x" for v in r))
def test_cumprod_second_order_is_exact_with_zeros_like_torchs(row):
    x = np.array([row, row[::-1]])
    rng = np.random.default_rng(2)
    u, v = rng.standard_normal(x.shape), rng.standard_normal(x.shape)
    for ours, theirs in zip(hvp_ours("cumprod", x, 1, u, v), hvp_torch("cumprod", x, 1, u, v)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-13)


def test_cumsum_second_order_is_linear():
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    u, v = np.ones(x.shape), np.arange(6.0).reshape(2, 3)
    d_x, d_u = hvp_ours("cumsum", x, 1, u, v)
    np.testing.assert_array_equal(d_x, np.zeros_like(x))
    np.testing.assert_allclose(d_u, np.cumsum(v, axis=1))  # <revcumsum(u), v> = <u, cumsum(v)>


# -- cummax / cummin -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_ties_take_the_latest_index_and_its_gradient_like_torch(name):
    x = np.array([[1.0, 3.0, 3.0, 2.0, 3.0, 0.5], [3.0, 1.0, 1.0, 2.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0, 2.0, 2.0]])
    assert_like_torch(name, x, 1)
    assert_like_torch(name, x.T.copy(), 0)
    _, indices, _ = value_and_grad(getattr(ops, name), np.full(4, 7.0), 0)
    np.testing.assert_array_equal(indices, [0, 1, 2, 3])


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_nan_becomes_the_extremum_and_each_later_nan_takes_the_index(name):
    nan = np.nan
    x = np.array([1.0, 3.0, nan, 5.0, nan, -1.0, 0.0])
    values, indices, grad = value_and_grad(getattr(ops, name), x, 0)
    np.testing.assert_array_equal(indices, [0, 1 if name == "cummax" else 0, 2, 2, 4, 4, 4])
    assert np.isnan(values[2:]).all()
    assert_like_torch(name, x, 0)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_signed_zeros_follow_torch(name):
    assert_like_torch(name, np.array([-0.0, 0.0, -0.0, 1.0, 0.0]), 0)
    assert_like_torch(name, np.array([0.0, -0.0, 0.0, -1.0, -0.0]), 0)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
def test_integer_and_bool_inputs_keep_their_dtype(name, dtype):
    x = np.array([[2, 0, 2, 1, 3, 3], [1, 1, 0, 1, 0, 2]]).astype(dtype)
    values, indices = getattr(ops, name)(tape.tensor(x), 1)
    expected = getattr(torch, name)(torch.from_numpy(x), 1)
    assert values.dtype == dtype and indices.dtype == np.int64
    np.testing.assert_array_equal(values.numpy(), expected.values.numpy())
    np.testing.assert_array_equal(indices.numpy(), expected.indices.numpy())


def test_cummax_gradient_reaches_only_the_entries_that_were_the_running_max():
    x = np.array([1.0, 0.5, 2.0, 1.5, 0.25])
    _, _, grad = value_and_grad(ops.cummax, x, 0, u=np.array([1.0, 10.0, 100.0, 1000.0, 10000.0]))
    np.testing.assert_array_equal(grad, [11.0, 0.0, 11100.0, 0.0, 0.0])


# -- logcumsumexp ----------------------------------------------------------------------------------------------
def test_logcumsumexp_is_stable_for_huge_magnitudes():
    x = np.array([[1e4, 1e4 + 1.0, -1e4, 1e4], [-1e4, -1e4 - 2.0, -1e4 + 0.5, -3e4]])
    values, _, grad = value_and_grad(ops.logcumsumexp, x, 1)
    assert np.isfinite(values).all() and np.isfinite(grad).all()
    assert_like_torch("logcumsumexp", x, 1, rtol=1e-12, atol=1e-12)
    assert_like_torch("logcumsumexp", x.astype(np.float32), 1, rtol=1e-5, atol=1e-5)


def test_logcumsumexp_with_infinities_follows_torch_including_its_nan_gradients():
    inf = np.inf
    rows = [[-inf, -inf, 0.0, -inf, 1.0],  # a leading -inf prefix: output log 0, gradient NaN there (torch's)
            [0.5, -inf, 1.0, -inf, -inf],  # -inf after finite entries: adds nothing, gradient 0
            [-inf, -inf, -inf, -inf, -inf],  # nothing at all
            [0.0, inf, 1.0, -inf, 2.0]]  # +inf: the rest is inf
    for row in rows:
        x = np.array(row)
        ours = value_and_grad(ops.logcumsumexp, x, 0)
        theirs = torch_value_and_grad("logcumsumexp", x, 0)
        np.testing.assert_array_equal(ours[0], theirs[0])
        np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-12, equal_nan=True)
    _, _, grad = value_and_grad(ops.logcumsumexp, np.array([0.5, -inf, 1.0]), 0)
    assert grad[1] == 0.0


def test_logcumsumexp_of_a_0d_minus_inf_has_gradient_g_like_torch():
    assert_like_torch("logcumsumexp", np.array(-np.inf), 0)
    assert_like_torch("logcumsumexp", np.array(0.25), -1)


def test_logcumsumexp_gradient_with_mixed_sign_and_zero_cotangents():
    x = np.array([[0.5, -1.0, 2.0, 0.25], [3.0, 2.5, -4.0, 1.0]])
    u = np.array([[1.0, -2.0, 0.0, 0.5], [0.0, 0.0, -1.0, 3.0]])
    ours = value_and_grad(ops.logcumsumexp, x, 1, u=u)[2]
    theirs = torch_value_and_grad("logcumsumexp", x, 1, u=u)[2]
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)
    y = np.logaddexp.accumulate(x, axis=1)
    weights = np.triu(np.exp(x[:, :, None] - y[:, None, :]))  # [r, k, i] = exp(x_k - y_i) for i >= k
    np.testing.assert_allclose(ours, np.einsum("rki,ri->rk", weights, u), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("zeros", [False, True], ids=["nonzero cotangent", "cotangent with zeros"])
def test_logcumsumexp_second_order_is_exact_also_where_the_cotangent_is_zero(zeros):
    """The gradient is linear in u, so d/du <grad, v> = W^T v even at u_i = 0 -- where torch's double backward
    (log|u|) gives NaN; elsewhere ours and torch's agree."""
    rng = np.random.default_rng(3)
    x = np.array([[0.5, -1.0, 2.0, 0.25], [3.0, 2.5, -4.0, 1.0]])
    u = np.array([[1.0, -2.0, 0.0, 0.5], [0.0, 0.0, -1.0, 3.0]]) if zeros else rng.standard_normal(x.shape)
    v = rng.standard_normal(x.shape)
    d_x, d_u = hvp_ours("logcumsumexp", x, 1, u, v)
    t_x, t_u = hvp_torch("logcumsumexp", x, 1, u, v)
    y = np.logaddexp.accumulate(x, axis=1)
    weights = np.triu(np.exp(x[:, :, None] - y[:, None, :]))
    np.testing.assert_allclose(d_u, np.einsum("rki,rk->ri", weights, v), rtol=1e-12, atol=1e-14)
    finite = np.isfinite(t_u)
    assert finite.all() != zeros  # torch: NaN exactly at the zero entries of u
    np.testing.assert_allclose(d_u[finite], t_u[finite], rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(d_x, t_x, rtol=1e-11, atol=1e-12)
    t = tape.tensor(x, requires_grad=True)
    assert tape.gradgradcheck(lambda a: ops.logcumsumexp(a, 1) * tape.tensor(u), [t])


# -- shapes, zero-size, errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", SCANS)
@pytest.mark.parametrize("shape,dim", [((0, 3), 0), ((0, 3), 1), ((2, 0), 1), ((), 0), ((), -1), ((1,), 0)])
def test_zero_size_and_0d_inputs_work_forward_and_backward(name, shape, dim):
    x = np.random.default_rng(4).uniform(0.5, 1.5, size=shape)
    assert_like_torch(name, x, dim)
    values, _, grad = value_and_grad(getattr(ops, name), x, dim)
    assert values.shape == grad.shape == shape


@pytest.mark.parametrize("name", SCANS)
def test_a_dim_out_of_range_or_not_an_int_names_the_op_and_the_argument(name):
    x = tape.tensor(np.ones((2, 3)))
    with pytest.raises(ValueError, match=rf"{name}: argument 'dim' expected a dim in \[-2, 1\].*got 2"):
        getattr(ops, name)(x, 2)
    with pytest.raises(TypeError, match=rf"{name}: argument 'dim' expected an int, got float"):
        getattr(ops, name)(x, 1.0)
    with pytest.raises(TypeError, match=rf"{name}: missing required argument\(s\) \['dim'\]"):
        getattr(ops, name)(x)  # dim is required


def test_logcumsumexp_refuses_integer_inputs_like_torch():
    with pytest.raises(TypeError, match="logcumsumexp: argument 'input' expected a floating tensor.*int64"):
        ops.logcumsumexp(tape.tensor(np.array([1, 2, 3])), 0)


@pytest.mark.parametrize("name", SCANS)
def test_scans_along_a_non_contiguous_input_match_torch(name):
    x = np.random.default_rng(5).uniform(0.5, 1.5, size=(4, 3, 5)).transpose(2, 0, 1)
    for dim in (0, 1, 2):
        assert_like_torch(name, x, dim)


# -- diff, trapezoid, cumulative_trapezoid (issue #21) ------------------------------------------------------------
def test_diff_of_bool_is_xor_and_of_integers_stays_integer_as_torch():
    b = np.array([True, False, False, True])
    np.testing.assert_array_equal(ops.diff(tape.tensor(b)).numpy(), torch.diff(torch.from_numpy(b)).numpy())
    i = ops.diff(tape.tensor(np.array([1, 4, 9])), n=2)
    assert i.dtype == np.int64 and i.numpy().tolist() == [2]


@pytest.mark.parametrize("name", ["trapezoid", "cumulative_trapezoid"])
def test_trapezoid_gradients_for_y_and_x_are_torchs(name):
    rng = np.random.default_rng(4)
    y, x = rng.standard_normal((2, 5)), np.sort(rng.standard_normal(5))
    ty, tx = torch.tensor(y, requires_grad=True), torch.tensor(x, requires_grad=True)
    oy, ox = tape.tensor(y, requires_grad=True), tape.tensor(x, requires_grad=True)
    out, expected = getattr(ops, name)(oy, ox), getattr(torch, name)(ty, tx)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-13)
    u = rng.standard_normal(out.shape)
    out.backward(u)
    expected.backward(torch.from_numpy(u))
    np.testing.assert_allclose(oy.grad.numpy(), ty.grad.numpy(), rtol=1e-13)
    np.testing.assert_allclose(ox.grad.numpy(), tx.grad.numpy(), rtol=1e-13)


@pytest.mark.parametrize("call,error,match", [
    (lambda: ops.diff(tape.tensor(np.ones((2, 3))), prepend=tape.tensor(np.ones(3))), ValueError,
     r"diff: argument 'prepend' expected input's shape \(2, 3\) apart from dim -1"),
    (lambda: ops.diff(tape.tensor(np.ones(3)), n=-1), ValueError, "diff: argument 'n' expected an int >= 0"),
    (lambda: ops.diff(tape.tensor(np.array(1.0))), ValueError, "diff: argument 'input' expected a tensor with"),
    (lambda: ops.trapezoid(tape.tensor(np.ones(3)), tape.tensor(np.ones(3)), dx=1.0), ValueError,
     "trapezoid: arguments 'x' and 'dx' expected at most one"),
    (lambda: ops.trapezoid(tape.tensor(np.array([1, 2]))), TypeError, "trapezoid: argument 'y' expected a floating"),
    (lambda: ops.cumulative_trapezoid(tape.tensor(np.ones((2, 3))), tape.tensor(np.ones(2))), ValueError,
     r"cumulative_trapezoid: argument 'x' expected y's shape \(2, 3\) or \(3,\)"),
])
def test_bad_input_to_the_difference_ops_names_op_and_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()
