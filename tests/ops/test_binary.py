"""Binary ops: what the generated tests do not cover -- second order on every sample, ties in maximum/minimum,
pow's conventions at a zero base (first and second order) and with scalar exponents, where, zero-size and mixed
integer/float operands, and errors naming op and arguments."""

import numpy as np
import pytest
from oracle import LazyTorch, run_torch_hvp_parity

import ops
import tape
from tape.registry import Grad
from tape.tools.verify import differentiable_positions, op_samples, run_gradgradcheck

torch = LazyTorch()  # torch imported at first use: the module collects without torch

FAMILY = [op for op in tape.registered_ops() if op.family == "binary"]


def grads(fn, arrays, backend):
    """(output, gradient of sum(out * u) for every float input) in minitape or torch."""
    if backend == "ours":
        leaves = [tape.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
        out = fn(*leaves)
        u = np.linspace(0.5, 1.5, out.numel()).reshape(out.shape).astype(out.dtype)
        out.backward(u)
        return out.numpy(), [t.grad.numpy() for t in leaves if t.requires_grad]
    leaves = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = fn(*leaves)
    u = np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)).astype(out.detach().numpy().dtype)
    out.backward(torch.from_numpy(u))
    return out.detach().numpy(), [t.grad.numpy() for t in leaves if t.requires_grad]


def assert_same_as_torch(ours_fn, torch_fn, arrays, rtol=1e-12):
    value, gradients = grads(ours_fn, arrays, "ours")
    expected_value, expected_gradients = grads(torch_fn, arrays, "torch")
    np.testing.assert_allclose(value, expected_value, rtol=rtol)
    for g, e in zip(gradients, expected_gradients, strict=True):
        assert g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=rtol)


# -- the family's declarations -------------------------------------------------------------------------------
def test_every_op_of_the_family_is_registered_with_samples_and_a_torch_reference():
    names = {op.name for op in FAMILY}
    assert {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "where", "eq", "ne", "lt", "le", "gt",
            "ge"} <= names
    for op in FAMILY:
        assert op.samples is not None and op.torch_ref is not None, op.name
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        assert tape.get_op(name).input_states == (Grad.NOT_DIFFERENTIABLE, Grad.NOT_DIFFERENTIABLE)
    assert tape.get_op("where").input_names == ("condition", "input", "other")
    assert tape.get_op("where").input_states == (Grad.NOT_DIFFERENTIABLE, Grad.RULE, Grad.RULE)



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


# -- maximum / minimum: ties share the gradient evenly, as in torch --------------------------------------------
@pytest.mark.parametrize("name", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ties_split_the_gradient_evenly_like_torch(name, dtype):
    a = np.array([[1.0, 2.0, 3.0], [2.0, 2.0, -1.0]], dtype)
    b = np.array([2.0, 2.0, -1.0], dtype)  # broadcast; ties at [0,1], [1,0], [1,1], [1,2]
    assert_same_as_torch(tape.get_op(name), getattr(torch, name), [a, b])
    _, (ga, gb) = grads(tape.get_op(name), [a, a.copy()], "ours")  # every entry tied: half each
    np.testing.assert_array_equal(ga, gb)


# -- pow -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_python_scalar_exponents_and_bases_through_the_operators(dtype):
    x = np.array([0.5, 1.25, 2.0], dtype)
    for e in (2, 3, 0.5, -1.5, 0, 1):
        assert_same_as_torch(lambda t, e=e: t ** e, lambda t, e=e: t ** e, [x], rtol=1e-6)
    assert_same_as_torch(lambda t: 2.0 ** t, lambda t: 2.0 ** t, [x], rtol=1e-6)
    out = tape.tensor(x) ** 2
    assert out.dtype == dtype


def test_negative_base_with_an_integer_exponent():
    x = np.array([-2.0, -0.5, 1.5])
    assert_same_as_torch(lambda t: t ** 3, lambda t: t ** 3, [x])
    assert_same_as_torch(lambda t: ops.pow(t, np.array(2)), lambda t: t ** torch.tensor(2), [x])


def test_zero_base_follows_torchs_conventions():
    a = np.array([0.0, 0.0, 0.0, 0.0, 2.0])
    b = np.array([0.0, 2.0, 3.0, 0.5, 0.0])
    assert_same_as_torch(ops.pow, torch.pow, [a, b])  # d/da = 0 where b == 0; d/db = 0 where a == 0, b >= 0
    with np.errstate(divide="ignore"):  # 0 ** -1 = inf (numpy warns in the forward; torch does not)
        _, (ga, gb) = grads(ops.pow, [np.array([0.0]), np.array([-1.0])], "ours")
    _, (ta, tb) = grads(torch.pow, [np.array([0.0]), np.array([-1.0])], "torch")
    np.testing.assert_array_equal(ga, ta)
    np.testing.assert_array_equal(gb, tb)


def test_integer_to_a_negative_integer_power_is_refused_naming_pow():
    with pytest.raises(ValueError, match=r"^pow: .*'a' int64\[2\].*'b' int64\[2\].*negative"):
        ops.pow(tape.tensor(np.array([2, 3])), tape.tensor(np.array([1, -1])))


# -- where -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_where_broadcasts_and_routes_gradients_like_torch(dtype):
    condition = np.array([[True, False, True], [False, False, True]])
    a = np.array([1.0, -2.0, 3.0], dtype)
    b = np.array([[0.5], [-0.25]], dtype)
    assert_same_as_torch(lambda a, b: ops.where(condition, a, b), lambda a, b: torch.where(torch.tensor(condition),
                                                                                             a, b), [a, b])


def test_where_takes_a_python_scalar_and_keeps_float32():
    x = tape.tensor(np.array([1.0, -2.0], np.float32), requires_grad=True)
    y = ops.where(x > 0, x, 0.0)
    assert y.dtype == np.float32 and y.numpy().tolist() == [1.0, 0.0]
    ops.sum(y).backward()
    assert x.grad.dtype == np.float32 and x.grad.numpy().tolist() == [1.0, 0.0]


def test_where_refuses_a_non_bool_condition():
    with pytest.raises(TypeError, match=r"^where: argument 'condition' expected a bool tensor, got dtype float64"):
        ops.where(tape.tensor(np.array([1.0, 0.0])), tape.tensor(np.ones(2)), tape.tensor(np.zeros(2)))


# -- dtypes ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
def test_float32_with_an_integer_tensor_stays_float32_like_torch(name):
    a = np.array([[0.5, 1.5, 2.5]], np.float32)
    b = np.array([[1], [2]], np.int64)
    value, (ga,) = grads(tape.get_op(name), [a, b], "ours")
    expected, (ea,) = grads(getattr(torch, name), [a, b], "torch")
    assert value.dtype == np.float32 and ga.dtype == np.float32
    np.testing.assert_allclose(value, expected, rtol=1e-6)
    np.testing.assert_allclose(ga, ea, rtol=1e-6)


def test_integer_arithmetic_stays_integer_and_integer_division_is_refused():
    a, b = tape.tensor(np.array([7, -3])), tape.tensor(np.array([2, 2], np.int32))
    for name in ("add", "sub", "mul", "maximum", "minimum"):
        out = tape.get_op(name)(a, b)
        assert out.dtype == np.int64
        np.testing.assert_array_equal(out.numpy(), getattr(torch, name)(torch.tensor(a.numpy()),
                                                                        torch.tensor(b.numpy())).numpy())
    with pytest.raises(TypeError, match=r"^div: arguments 'input' \(int64\) and 'other' \(int32\) are both integer"):
        ops.div(a, b)


# -- zero-size operands ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
@pytest.mark.parametrize("shapes", [((4, 1), (0,)), ((0, 3), (3,)), ((0, 3), ())])
def test_a_zero_size_operand_gives_an_empty_result_and_torchs_gradients(name, shapes):
    a, b = (np.full(shape, 1.5) for shape in shapes)  # (4, 1) with (0,): a's gradient sums over no entries: 0
    assert_same_as_torch(tape.get_op(name), getattr(torch, name), [a, b])
    _, (ga, gb) = grads(tape.get_op(name), [a, b], "ours")
    assert ga.shape == a.shape and gb.shape == b.shape and not ga.any() and not gb.any()


def test_where_and_comparisons_of_zero_size_operands():
    a, b = np.ones((2, 0)), np.ones((1, 1))
    assert_same_as_torch(lambda a, b: ops.where(np.ones((2, 1), bool), a, b),
                         lambda a, b: torch.where(torch.ones(2, 1, dtype=torch.bool), a, b), [a, b])
    assert ops.lt(tape.tensor(a), tape.tensor(b)).shape == (2, 0)


# -- pow's second order where torch's is NaN or flat -----------------------------------------------------------
def test_pow_second_order_at_a_zero_base_is_finite_and_matches_finite_differences():
    from tape.gradcheck import gradgradcheck

    a = tape.tensor(np.array([0.0, 0.0, 0.0, 1.5]), requires_grad=True)
    b = tape.tensor(np.array([2.0, 3.0, 0.0, 0.0]), requires_grad=True)
    x, y = (torch.tensor(t.numpy(), requires_grad=True) for t in (a, b))
    ga, gb = torch.autograd.grad(torch.pow(x, y).sum(), [x, y], create_graph=True)
    torch_hessian = torch.autograd.grad((ga + gb).sum(), [x, y])
    assert torch.isnan(torch_hessian[0][:3]).any()  # torch: NaN at a zero base, and d/db = 0 at b == 0
    ours_a, ours_b = tape.gradients(ops.sum(ops.pow(a, b)), [a, b], create_graph=True)
    hessian = tape.gradients(ops.sum(ours_a + ours_b), [a, b])
    assert all(np.isfinite(h.numpy()).all() for h in hessian)
    # d2/da2 at (0, 2) is 2; at (1.5, 0), d/db (dpow/da + dpow/db) = 1 / 1.5 + log(1.5)^2 (torch drops the 1 / 1.5)
    assert hessian[0].numpy()[0] == 2.0
    np.testing.assert_allclose(hessian[1].numpy()[3], 1 / 1.5 + np.log(1.5) ** 2, rtol=1e-14)
    np.testing.assert_allclose(torch_hessian[1][3].item(), np.log(1.5) ** 2, rtol=1e-14)
    assert gradgradcheck(lambda a, b: ops.pow(a, b), [tape.tensor(a.numpy()[3:], requires_grad=True),
                                                      tape.tensor(b.numpy()[3:], requires_grad=True)])


# -- comparisons -----------------------------------------------------------------------------------------------
def test_comparisons_give_bool_tensors_without_gradient():
    a = tape.tensor(np.array([[1.0, 2.0, 3.0]]), requires_grad=True)
    b = np.array([[2.0], [3.0]])
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        out = tape.get_op(name)(a, b)
        assert out.dtype == np.bool_ and out.grad_fn is None and not out.requires_grad
        expected = getattr(torch, name)(torch.tensor(a.numpy()), torch.tensor(b)).numpy()
        np.testing.assert_array_equal(out.numpy(), expected)
    assert (a == 2.0).numpy().tolist() == [[False, True, False]] and (a >= 2).numpy().tolist() == [[False, True, True]]


# -- errors ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "lt", "atan2",
                                  "hypot", "remainder", "logical_and", "isclose"])
def test_shapes_that_do_not_broadcast_name_the_op_both_arguments_and_shapes(name):
    a, b = tape.get_op(name).input_names
    with pytest.raises(ValueError, match=rf"^{name}: arguments '{a}' float64\[2, 3\], '{b}' float64\[4\] cannot be "
                                         rf"broadcast"):
        tape.get_op(name)(tape.tensor(np.ones((2, 3))), tape.tensor(np.ones(4)))


def test_where_shapes_that_do_not_broadcast_name_all_three_arguments():
    with pytest.raises(ValueError, match=r"^where: arguments 'condition' bool\[2\], 'input' float64\[3\], "
                                         r"'other' float64\[\] cannot be broadcast"):
        ops.where(np.array([True, False]), tape.tensor(np.ones(3)), tape.tensor(np.array(0.0)))


def test_a_dtype_numpy_has_no_loop_for_is_named():
    with pytest.raises(TypeError, match=r"^sub: cannot compute it for arguments 'a' bool\[2\], 'b' bool\[2\]"):
        ops.sub(tape.tensor(np.array([True, False])), tape.tensor(np.array([True, True])))


# -- the torch-named binary ops (atan2 ... logical_xor) --------------------------------------------------------
def test_div_rounding_modes_match_torch_for_floats_and_integers_with_zero_gradient():
    a, b = np.array([7.5, -7.5, 7.5, -7.5, 0.0]), np.array([2.0, 2.0, -2.0, -2.0, 3.0])
    for mode in ("trunc", "floor"):
        fn = lambda x, y, mode=mode: ops.div(x, y, rounding_mode=mode)  # noqa: E731
        assert_same_as_torch(fn, lambda x, y, mode=mode: torch.div(x, y, rounding_mode=mode), [a, b])
        ia, ib = np.array([7, -7, 7, -7, 0]), np.array([2, 2, -2, -2, 3])
        out = ops.div(tape.tensor(ia), tape.tensor(ib), rounding_mode=mode)
        assert out.dtype == np.int64
        np.testing.assert_array_equal(out.numpy(), torch.div(torch.tensor(ia), torch.tensor(ib),
                                                             rounding_mode=mode).numpy())
    with pytest.raises(ValueError, match="div: argument 'rounding_mode'"):
        ops.div(tape.tensor(a), tape.tensor(b), rounding_mode="round")
    for name in ("remainder", "fmod", "floor_divide"):
        with pytest.raises(ZeroDivisionError, match=f"^{name}: integer division by zero"):
            tape.get_op(name)(tape.tensor(np.array([3])), tape.tensor(np.array([0])))


def test_remainder_and_fmod_follow_the_divisor_and_the_dividend_sign_like_torch():
    a, b = np.array([5.5, -5.5, 5.5, -5.5]), np.array([2.0, 2.0, -2.0, -2.0])
    for name in ("remainder", "fmod"):
        assert_same_as_torch(tape.get_op(name), getattr(torch, name), [a, b])


def test_atan2_gradient_at_the_origin_is_zero_like_torch():
    assert_same_as_torch(ops.atan2, torch.atan2, [np.array([0.0, 0.0, 1.0]), np.array([0.0, -0.0, -2.0])])


def test_copysign_gradient_at_zero_and_signed_zeros_like_torch():
    assert_same_as_torch(ops.copysign, torch.copysign,
                         [np.array([0.0, -0.0, 1.5, -1.5, 0.5]), np.array([-1.0, 1.0, -0.0, 0.0, np.nan])])


def test_logaddexp_is_stable_at_large_values_like_torch():
    a, b = np.array([1e4, -1e4, 0.0, np.inf]), np.array([1e4 - 1, -1e4, -1e4, 1.0])
    assert_same_as_torch(ops.logaddexp, torch.logaddexp, [a, b])


def test_lerp_with_a_float_weight_and_a_tensor_weight_like_torch():
    a, b = np.array([1.0, -2.0, 3.0]), np.array([2.0, 4.0, -1.0])
    assert_same_as_torch(lambda x, y: ops.lerp(x, y, 0.3), lambda x, y: torch.lerp(x, y, 0.3), [a, b])
    assert_same_as_torch(ops.lerp, torch.lerp, [a, b, np.array([0.0, 0.7, 1.0])])


def test_isclose_matches_torch_including_infs_nan_and_equal_nan():
    a = np.array([np.nan, np.inf, -np.inf, 1.0, 1.0, 0.0, 1e-9])
    b = np.array([np.nan, np.inf, np.inf, 1.0 + 1e-6, 1.0001, 1e-9, 0.0])
    for attrs in ({}, {"equal_nan": True}, {"rtol": 0.0, "atol": 0.0}, {"rtol": 1e-3, "atol": 0.0}):
        np.testing.assert_array_equal(ops.isclose(a, b, **attrs).numpy(),
                                      torch.isclose(torch.tensor(a), torch.tensor(b), **attrs).numpy())
    with pytest.raises(TypeError, match="isclose: arguments 'input' \\(float64\\) and 'other' \\(int64\\)"):
        ops.isclose(a, np.arange(7))


def test_logical_ops_take_any_dtype_and_give_bools_without_gradient():
    x = tape.tensor(np.array([0.0, 1.5, np.nan, -0.0]), requires_grad=True)
    y = np.array([1, 0, 1, 0])
    for name in ("logical_and", "logical_or", "logical_xor"):
        out = tape.get_op(name)(x, y)
        assert out.dtype == np.bool_ and not out.requires_grad
        np.testing.assert_array_equal(out.numpy(), getattr(torch, name)(torch.tensor(x.numpy()),
                                                                         torch.tensor(y)).numpy())


@pytest.mark.filterwarnings("error")
def test_logaddexp_second_order_far_apart_is_finite():
    """exp(other - input) overflows once the operands are more than ~709 apart: the rule g / (exp(d) + 1) had a
    first order of 0 but, traced for the second order, inf / inf = NaN (and a warning; torch 2.13's double
    backward is NaN there too). The rule is now the stable sigmoid exp(-logaddexp(0, d)). Checked against the
    closed form: with s = sigmoid(a - b), d/da of sum(s^2 + (1 - s)) = (2 s - 1) s (1 - s), d/db its negative."""
    from tape.functional import gradients

    a_values, b_values = np.array([0.0, -1000.0, 3.0, -1e30, 0.5]), np.array([-1000.0, 0.0, 2.5, 1.0, -0.25])
    a = tape.tensor(a_values, requires_grad=True)
    b = tape.tensor(b_values, requires_grad=True)
    ga, gb = gradients(ops.sum(ops.logaddexp(a, b)), [a, b], create_graph=True)
    da, db = gradients(ops.sum(ga * ga + gb), [a, b])
    with np.errstate(over="ignore"):
        s = 1 / (1 + np.exp(b_values - a_values))
    np.testing.assert_allclose(ga.numpy(), s, rtol=1e-14)
    np.testing.assert_allclose(gb.numpy(), 1 - s, rtol=1e-14)
    np.testing.assert_allclose(da.numpy(), (2 * s - 1) * s * (1 - s), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(db.numpy(), -(2 * s - 1) * s * (1 - s), rtol=1e-12, atol=1e-300)
