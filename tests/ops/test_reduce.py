"""Reductions: what the generated tests do not cover -- no second-order stub, ties in max/min (shared)
and max_dim/min_dim (to the returned index, as torch.max(x, dim)), Tensor.max/min's torch forms, prod
with zeros, logsumexp at +-1e4, argmax/argmin dtype, ties and keepdim, std at 0, zero-size inputs (torch's
values over no entries, errors for an extremum of none), dim conventions and errors naming op and argument."""

import math
import warnings

import numpy as np
import pytest
from oracle import LazyTorch, ours, theirs

import ops
import tape
from tape.registry import Grad

torch = LazyTorch()  # torch imported at first use: the module collects without torch

FAMILY = [op for op in tape.registered_ops() if op.family == "reduce"]




def assert_matches_torch(op, fn, x, rtol=1e-12, atol=0.0, **attrs):
    value, grad = ours(op, x, **attrs)
    expected_value, expected_grad = theirs(fn, x, **attrs)
    assert value.shape == expected_value.shape and grad.dtype == x.dtype
    np.testing.assert_allclose(value, expected_value, rtol=rtol, atol=atol)
    np.testing.assert_allclose(grad, expected_grad, rtol=rtol, atol=atol)


# -- the family's declarations -------------------------------------------------------------------------------
def test_every_op_of_the_family_is_registered_with_samples_and_a_torch_reference():
    names = {op.name for op in FAMILY}
    assert {"sum", "mean", "var", "std", "max", "min", "prod", "logsumexp", "argmax", "argmin"} <= names
    for op in FAMILY:
        assert op.samples is not None and op.torch_ref is not None, op.name
    assert tape.get_op("argmax").input_states == tape.get_op("argmin").input_states == (Grad.NOT_DIFFERENTIABLE,)


def test_tensor_methods_call_the_reductions_with_torchs_signatures():
    data = np.array([[1.0, 4.0, 2.0], [3.0, 0.0, 5.0]])
    x, t = tape.tensor(data), torch.tensor(data)
    np.testing.assert_array_equal(x.max().numpy(), t.max().numpy())
    values, indices = x.min(dim=1, keepdim=True)
    np.testing.assert_array_equal(values.numpy(), t.min(dim=1, keepdim=True).values.numpy())
    np.testing.assert_array_equal(indices.numpy(), t.min(dim=1, keepdim=True).indices.numpy())
    assert x.max(0).indices.numpy().tolist() == t.max(0).indices.tolist()
    np.testing.assert_array_equal(x.max(tape.tensor(np.full(3, 2.5))).numpy(), t.max(torch.full((3,), 2.5)).numpy())
    np.testing.assert_allclose(x.var(dim=0, correction=0).numpy(), [1.0, 4.0, 2.25])
    np.testing.assert_allclose(x.std().numpy(), t.std().numpy())
    assert x.argmax(dim=1, keepdim=True).numpy().tolist() == [[1], [2]]
    with pytest.raises(TypeError, match="max: argument 'keepdim' needs a dim"):
        x.max(keepdim=True)



# -- second order: gradgradcheck and torch's HVP run on every sample in tests/ops/test_generated.py -----------------
def test_every_differentiable_reduction_is_differentiable_twice():
    for op in FAMILY:
        assert op.second_order in (Grad.RULE, Grad.NOT_DIFFERENTIABLE), f"{op.name}: {op.second_order_note}"


# -- max / min: ties ---------------------------------------------------------------------------------------------
TIED = np.array([[3.0, 1.0, 3.0, 3.0], [0.5, 2.0, 2.0, -1.0], [1.0, -4.0, 0.0, -4.0]])


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dim,keepdim", [(None, False)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ties_split_the_gradient_evenly_like_torch_amax(name, dim, keepdim, dtype):
    amax = getattr(torch, "a" + name)
    assert_matches_torch(tape.get_op(name), lambda t, dim, keepdim: amax(t, dim=() if dim is None else dim,
                                                                         keepdim=keepdim),
                         TIED.astype(dtype), dim=dim, keepdim=keepdim)


@pytest.mark.parametrize("name", ["max", "min"])
def test_a_full_reduction_matches_torch_max_without_dim(name):
    assert_matches_torch(tape.get_op(name), lambda t: getattr(t, name)(), TIED)


# -- max_dim / min_dim: torch.max(x, dim) and torch.min(x, dim) ------------------------------------------------------
@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dim,keepdim", [(1, False), (0, True), (-1, True), (-2, False)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_max_dim_gives_torchs_values_indices_and_sends_a_ties_gradient_to_the_returned_index(name, dim, keepdim,
                                                                                            dtype):
    op = tape.get_op(name)
    t = tape.tensor(TIED.astype(dtype), requires_grad=True)
    values, indices = op(t, dim, keepdim=keepdim)
    reference = torch.tensor(TIED.astype(dtype), requires_grad=True)
    expected = getattr(torch, name)(reference, dim, keepdim=keepdim)
    assert indices.dtype == np.int64 and indices.grad_fn is None and values.dtype == dtype
    np.testing.assert_array_equal(values.numpy(), expected.values.detach().numpy())
    np.testing.assert_array_equal(indices.numpy(), expected.indices.numpy())
    u = np.linspace(0.5, 1.5, values.numel()).reshape(values.shape).astype(dtype)
    values.backward(u)
    expected.values.backward(torch.from_numpy(u))
    np.testing.assert_array_equal(t.grad.numpy(), reference.grad.numpy())  # one index per slice, never shared
    assert np.count_nonzero(t.grad.numpy()) == values.numel()


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_dim_of_nan_points_at_the_first_nan_and_integers_keep_their_dtype_like_torch(name):
    x = np.array([[2.0, np.nan, 1.0, np.nan], [np.inf, -np.inf, 0.0, 3.0]])
    ours_out = tape.get_op(name)(x, 1)
    expected = getattr(torch, name)(torch.tensor(x), 1)
    np.testing.assert_array_equal(ours_out[0].numpy(), expected.values.numpy())
    np.testing.assert_array_equal(ours_out[1].numpy(), expected.indices.numpy())
    ints = np.array([[3, 7, 7], [-1, -1, 0]], np.int32)
    values, indices = tape.get_op(name)(ints, 1, True)
    expected = getattr(torch, name)(torch.tensor(ints), 1, True)
    assert values.dtype == np.int32 and expected.values.dtype == torch.int32
    np.testing.assert_array_equal(values.numpy(), expected.values.numpy())
    np.testing.assert_array_equal(indices.numpy(), expected.indices.numpy())


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_dim_takes_one_int_dim_and_refuses_an_empty_one_as_torch(name):
    op = tape.get_op(name)
    with pytest.raises(TypeError, match=rf"^{name}: argument 'dim' expected an int, got tuple"):
        op(X, (0, 1))
    with pytest.raises(ValueError, match=rf"^{name}: argument 'input' of shape \(0, 3\) has no entries.*dim=0"):
        op(np.ones((0, 3)), 0)
    with pytest.raises(IndexError):
        getattr(torch, name)(torch.ones(0, 3), 0)
    values, indices = op(np.ones((0, 3)), 1)  # a non-empty dim of a zero-size input works
    assert values.shape == indices.shape == tuple(getattr(torch, name)(torch.ones(0, 3), 1).values.shape)
    values, indices = op(np.array(2.5), -1, True)  # 0-D: dim 0 or -1, index 0
    assert values.item() == 2.5 and indices.item() == 0 and indices.dtype == np.int64


# -- prod with zeros -----------------------------------------------------------------------------------------------
ZEROS = np.array([[0.0, 2.0, -1.5, 0.5], [0.0, 3.0, 0.0, 1.25], [1.5, -2.0, 0.75, 0.5]])  # 1, 2 and 0 zeros per row


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("dim,keepdim", [(1, False), (-1, True), (0, False)])
def test_prod_gradient_with_zeros_matches_torch_without_dividing_by_zero(dtype, dim, keepdim):
    with np.errstate(all="raise"):
        assert_matches_torch(ops.prod, torch.prod, ZEROS.astype(dtype), rtol=1e-6, dim=dim, keepdim=keepdim)


@pytest.mark.parametrize("row", [0, 1, 2])
def test_prod_of_everything_with_zero_one_or_two_zeros_matches_torch(row):
    with np.errstate(all="raise"):
        assert_matches_torch(ops.prod, torch.prod, ZEROS[row].copy())


def test_prod_over_a_tuple_of_dims_with_zeros():
    x = ZEROS.reshape(3, 2, 2)
    with np.errstate(all="raise"):
        value, grad = ours(ops.prod, x, dim=(0, 2))
    expected = [np.prod(np.delete(x[:, j, :].ravel(), k)) for j in range(2) for k in range(6)]
    u = np.linspace(0.5, 1.5, 2)
    np.testing.assert_allclose(grad.transpose(1, 0, 2).reshape(2, 6), np.reshape(expected, (2, 6)) * u[:, None])
    np.testing.assert_allclose(value, np.prod(x, axis=(0, 2)))


# -- logsumexp ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_logsumexp_of_huge_logits_is_finite_and_matches_torch(dtype):
    x = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, -1e4], [1e4, 1e4 - 1.0, 1e4]], dtype)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        value, grad = ours(ops.logsumexp, x, dim=1)
    assert np.isfinite(value).all() and np.isfinite(grad).all()
    expected_value, expected_grad = theirs(torch.logsumexp, x, dim=1)
    np.testing.assert_allclose(value, expected_value, rtol=1e-6)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-6, atol=1e-7)


def test_logsumexp_of_infinite_entries_matches_torch():
    inf = np.inf
    x = np.array([[-inf, -inf], [inf, 0.0], [-inf, 1.0]])
    value = ops.logsumexp(tape.tensor(x), dim=1).numpy()
    np.testing.assert_array_equal(value, torch.logsumexp(torch.tensor(x), dim=1).numpy())


# -- argmax / argmin -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin_give_int64_first_ties_and_keepdim_shapes_like_torch(name, dim, keepdim):
    out = tape.get_op(name)(tape.tensor(TIED, requires_grad=True), dim=dim, keepdim=keepdim)
    expected = getattr(torch, name)(torch.tensor(TIED), dim=dim, keepdim=keepdim).numpy()
    assert out.dtype == np.int64 and out.shape == expected.shape and out.grad_fn is None
    np.testing.assert_array_equal(out.numpy(), expected)


# -- dims ----------------------------------------------------------------------------------------------------------
FULL = {"sum": torch.sum, "mean": torch.mean, "prod": torch.prod, "var": torch.var,
        "logsumexp": lambda t: torch.logsumexp(t, dim=(0, 1))}


@pytest.mark.parametrize("name", FULL)
def test_an_empty_dim_tuple_reduces_every_dim_like_torch(name):
    out = tape.get_op(name)(tape.tensor(TIED), dim=())
    expected = FULL[name](torch.tensor(TIED))
    assert out.shape == tuple(expected.shape) == ()
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-12)
    if name in ("sum", "mean", "var", "max"):  # torch.prod takes no tuple; torch.logsumexp fails on dim=()
        torch_fn = torch.amax if name == "max" else getattr(torch, name)
        np.testing.assert_array_equal(torch_fn(torch.tensor(TIED), dim=()).numpy(), expected.numpy())


def test_integer_sums_and_products_give_int64_like_torch():
    x = np.array([[1, 2], [3, 4]], np.int32)
    for name in ("sum", "prod"):
        out = tape.get_op(name)(tape.tensor(x), dim=0)
        expected = getattr(torch, name)(torch.tensor(x), dim=0)
        assert out.dtype == np.int64 and expected.dtype == torch.int64
        np.testing.assert_array_equal(out.numpy(), expected.numpy())
    assert ops.max(tape.tensor(x)).dtype == np.int32


# -- var / std edge cases ------------------------------------------------------------------------------------------
def test_std_of_constant_input_has_zero_gradient_like_torch():
    x = np.full((2, 3), 0.75)
    assert_matches_torch(ops.std, torch.std, x, dim=1)
    _, grad = ours(ops.std, x, dim=1)
    assert (grad == 0).all()


STD_ZERO = [(np.full((2, 3), 0.75), {"dim": 1}), (np.array(0.3), {"dim": -1, "keepdim": True, "correction": 0}),
            (np.ones((2, 0, 4)), {"dim": 1})]  # constant rows, a single entry, no entries (std NaN)


@pytest.mark.parametrize("x,attrs", STD_ZERO, ids=["constant rows", "0-D", "no entries"])
def test_std_at_zero_or_over_no_entries_has_torchs_gradient_and_a_zero_second_order(x, attrs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's degrees-of-freedom warning
        assert_matches_torch(ops.std, torch.std, x, **attrs)
    t = tape.tensor(x, requires_grad=True)
    out = ops.std(t, **attrs)
    u = tape.tensor(np.full(out.shape, 1.3), requires_grad=True)
    (first,) = tape.gradients(out, [t], [u], create_graph=True)
    assert not first.numpy().any()
    second = tape.gradients(ops.sum(first * 0.7), [t, u], allow_unused=True)
    # the gradient is 0 whatever u is, and std is not twice differentiable at 0 (torch: NaN for u)
    assert all(g is None or not g.numpy().any() for g in second)


def test_correction_at_least_n_gives_torchs_inf_and_nan():
    with np.errstate(divide="ignore", invalid="ignore"):
        values = [ops.var(tape.tensor(np.array(v)), correction=c).item() for v, c in (([1.0, 2.0], 2), ([1.0, 1.0], 2))]
    with pytest.warns(UserWarning, match="degrees of freedom"):
        expected = [torch.var(torch.tensor(v), correction=c).item() for v, c in (([1.0, 2.0], 2), ([1.0, 1.0], 2))]
    assert np.isinf(values[0]) and np.isinf(expected[0]) and np.isnan(values[1]) and np.isnan(expected[1])


# -- errors --------------------------------------------------------------------------------------------------------
X = tape.tensor(np.ones((2, 3)))
REDUCTIONS = ["sum", "mean", "var", "std", "max", "min", "prod", "logsumexp", "argmax", "argmin"]


@pytest.mark.parametrize("name", REDUCTIONS)
def test_out_of_range_dim_names_op_and_argument(name):
    for dim in (2, -3):
        with pytest.raises(ValueError, match=rf"^{name}: argument 'dim' expected a dim in \[-2, 1\].*got {dim}"):
            tape.get_op(name)(X, dim=dim)
    with pytest.raises(TypeError, match=rf"^{name}: argument 'dim'"):
        tape.get_op(name)(X, dim=1.0)
    with pytest.raises(TypeError, match=rf"^{name}: argument 'keepdim' expected a bool, got str"):
        tape.get_op(name)(X, dim=0, keepdim="yes")


@pytest.mark.parametrize("name", [n for n in REDUCTIONS if not n.startswith("arg") and n not in ("max", "min")])
def test_repeated_or_out_of_range_dims_in_a_tuple_name_op_and_argument(name):
    with pytest.raises(ValueError, match=rf"^{name}: argument 'dim' expected distinct dims, got \(1, -1\)"):
        tape.get_op(name)(X, dim=(1, -1))
    with pytest.raises(ValueError, match=rf"^{name}: argument 'dim'"):
        tape.get_op(name)(X, dim=(0, 5))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_takes_no_tuple_of_dims(name):
    with pytest.raises(TypeError, match=rf"^{name}: argument 'dim' expected None or an int, got tuple"):
        tape.get_op(name)(X, dim=(0, 1))


@pytest.mark.parametrize("name", ["var", "std"])
def test_bad_correction_names_op_and_argument(name, torch):
    # a negative correction divides by N + |c|, as torch computes it (refused before: OpInfo's var/std samples)
    ours = tape.get_op(name)(X, correction=-1).numpy()
    np.testing.assert_allclose(ours, getattr(torch, name)(torch.tensor(X.numpy()), correction=-1).numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match=rf"^{name}: argument 'correction' expected a number, got nan"):
        tape.get_op(name)(X, correction=float("nan"))
    with pytest.raises(TypeError, match=rf"^{name}: argument 'correction' expected a number, got str"):
        tape.get_op(name)(X, correction="bessel")


@pytest.mark.parametrize("name", ["mean", "var", "std", "logsumexp"])
def test_float_only_reductions_refuse_integer_tensors(name):
    with pytest.raises(TypeError, match=rf"^{name}: argument 'x' expected a floating tensor.*int64"):
        tape.get_op(name)(tape.tensor(np.arange(4)))


# -- zero-size inputs ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("dim", [0, -2, None, (0, 1)])
def test_an_extremum_of_no_entries_raises_naming_the_op_as_torch_raises(name, dim):
    if isinstance(dim, tuple) and name not in ("amax", "amin"):
        return
    with pytest.raises(ValueError, match=rf"^{name}: argument '(x|input)' of shape \(0, 3\) has no entries"):
        tape.get_op(name)(tape.tensor(np.ones((0, 3))), dim=dim)
    with pytest.raises((RuntimeError, IndexError)):
        getattr(torch, name)(torch.ones(0, 3)) if dim is None else getattr(torch, name)(torch.ones(0, 3), dim=dim)


EMPTY = {"sum": torch.sum, "mean": torch.mean, "var": torch.var, "std": torch.std, "logsumexp": torch.logsumexp}


@pytest.mark.parametrize("name", [*EMPTY, "prod"])
@pytest.mark.parametrize("dim,keepdim", [(1, False), (1, True), ((0, 1), False), (-1, True)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_reductions_of_a_zero_size_input_give_torchs_values_and_empty_gradients(name, dim, keepdim, dtype):
    x = np.ones((2, 0, 3), dtype)  # dim 1 (alone or in a tuple) has no entries: sum 0, mean NaN, prod 1, ...
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value, grad = ours(tape.get_op(name), x, dim=dim, keepdim=keepdim)
    fn = EMPTY.get(name, _prod_reference)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "degrees of freedom <= 0" for var and std
        expected_value, expected_grad = theirs(fn, x, dim=dim, keepdim=keepdim)
    assert value.shape == expected_value.shape and value.dtype == dtype
    np.testing.assert_array_equal(value, expected_value)
    assert grad.shape == x.shape == expected_grad.shape and grad.dtype == dtype


def _prod_reference(t, dim, keepdim):
    return tape.get_op("prod").torch_ref(torch, t, dim=dim, keepdim=keepdim)


def test_an_empty_product_is_one_and_an_empty_logsumexp_minus_inf_like_torch():
    x = tape.tensor(np.ones((0, 2)))
    assert ops.prod(x, dim=0).numpy().tolist() == [1.0, 1.0] == torch.prod(torch.ones(0, 2), dim=0).tolist()
    assert ops.logsumexp(x, dim=0).numpy().tolist() == [-np.inf, -np.inf]
    assert np.isnan(ops.mean(x).item()) and ops.sum(x).item() == 0.0


@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin", "sum", "prod"])
def test_reducing_a_non_empty_dim_of_a_zero_size_input_works_like_torch(name):
    x = np.ones((0, 3))
    out = tape.get_op(name)(tape.tensor(x), dim=1)
    expected = getattr(torch, name)(torch.tensor(x), dim=1)
    if name in ("max", "min"):
        out, expected = out.values, expected.values
    assert out.shape == tuple(expected.shape) == (0,)


# -- amax / amin, norms, any / all / count_nonzero ------------------------------------------------------------
@pytest.mark.parametrize("name", ["amax", "amin"])
def test_amax_amin_split_the_gradient_among_ties_like_torch(name):
    x = np.array([[1.0, 3.0, 3.0, -1.0], [-2.0, -2.0, 0.5, -2.0], [0.25, 0.25, 0.25, 0.25]])
    for attrs in ({"dim": 1}, {"dim": ()}, {"dim": (0, 1), "keepdim": True}):
        assert_matches_torch(tape.get_op(name), getattr(torch, name), x, **attrs)


@pytest.mark.parametrize("ord", [2, 1, math.inf, -math.inf, 3, 0.5])  # ord=0: torch gives no gradient at all
def test_vector_norm_gradients_at_zeros_and_ties_like_torch(ord):
    x = np.array([[0.0, -3.0, 3.0, 1.0], [0.0, 0.0, 0.0, 0.0], [-2.0, 2.0, 0.5, -2.0]])
    fn = lambda t, **a: torch.linalg.vector_norm(t, **a)  # noqa: E731
    assert_matches_torch(ops.vector_norm, fn, x, ord=ord, dim=1)


def test_norm_takes_fro_and_numbers_like_torch():
    x = np.array([[0.5, -3.0, 3.0], [1.0, -2.0, 0.25]])
    for attrs in ({}, {"p": "fro", "dim": 1}, {"p": 1, "dim": 0, "keepdim": True}, {"p": math.inf}):
        assert_matches_torch(ops.norm, torch.norm, x, **attrs)
    with pytest.raises(NotImplementedError, match="norm: argument 'p' is 'nuc'"):
        ops.norm(x, p="nuc")
    with pytest.raises(ValueError, match="vector_norm: cannot compute the inf norm"):
        ops.vector_norm(np.zeros((0, 3)), ord=math.inf)


def test_any_all_count_nonzero_give_torchs_values_and_dtypes():
    x = np.array([[0.0, 0.0, 1.5], [0.0, -0.0, 0.0], [np.nan, 2.0, -1.0]])
    t = torch.tensor(x)
    for dim in (None, 0, 1):
        for name in ("any", "all"):
            ours_out = tape.get_op(name)(x, dim=dim)
            assert ours_out.dtype == np.bool_
            expected = getattr(torch, name)(t) if dim is None else getattr(torch, name)(t, dim=dim)
            np.testing.assert_array_equal(ours_out.numpy(), expected.numpy())
        out = ops.count_nonzero(x, dim=dim)
        assert out.dtype == np.int64
        np.testing.assert_array_equal(out.numpy(), torch.count_nonzero(t, dim=dim).numpy())
