"""Sorting and selection (sort, argsort, topk, kthvalue, median, median_dim): what the generated tests do not
cover -- tie-breaking (stable, both orders) and NaN placement as torch, gradients routed through ties, the
median conventions (lower median, shared gradient, NaN, median_dim's first NaN), unspecified tie indices
(values agree), zero-size inputs and errors naming op and argument."""

import numpy as np
import pytest
from oracle import LazyTorch

import ops
import tape
from tape.registry import Grad

torch = LazyTorch()  # torch imported at first use: the module collects without torch

nan = np.nan


def ours(name, x, u=None, **attrs):
    """(values, indices or None, gradient of <values, u>) for one of our ops."""
    t = tape.tensor(x, requires_grad=x.dtype.kind == "f")
    out = getattr(ops, name)(t, **attrs)
    values, indices = out if isinstance(out, tuple) else (out, None)
    if values.dtype.kind == "f" and t.requires_grad:
        u = np.linspace(0.5, 1.5, values.numel()).reshape(values.shape).astype(x.dtype) if u is None else u
        values.backward(u)
    return values.numpy(), None if indices is None else indices.numpy(), None if t.grad is None else t.grad.numpy()


def theirs(fn, x, u=None, **attrs):
    t = torch.tensor(x, requires_grad=x.dtype.kind == "f")
    out = fn(t, **attrs)
    values, indices = (out[0], out[1]) if isinstance(out, tuple) else (out, None)
    if values.is_floating_point() and t.requires_grad:
        u = np.linspace(0.5, 1.5, values.numel()).reshape(tuple(values.shape)).astype(x.dtype) if u is None else u
        values.backward(torch.from_numpy(u))
    return (values.detach().numpy(), None if indices is None else indices.numpy(),
            None if t.grad is None else t.grad.numpy())


def assert_like_torch(name, fn, x, indices=True, **attrs):
    a, b = ours(name, x, **attrs), theirs(fn, x, **attrs)
    np.testing.assert_array_equal(a[0], b[0])
    assert a[0].dtype == b[0].dtype and a[0].shape == b[0].shape
    if indices and b[1] is not None:
        np.testing.assert_array_equal(a[1], b[1])
        assert a[1].dtype == np.int64
    if b[2] is not None:
        np.testing.assert_allclose(a[2], b[2], rtol=1e-15)


# -- declarations --------------------------------------------------------------------------------------------
def test_the_family_is_registered_with_torchs_signatures():
    signatures = {op.name: op.signature for op in tape.registered_ops() if op.family == "sorting"}
    searching = {  # not differentiable (torch defines no gradient for any of them)
        "searchsorted": "searchsorted(sorted_sequence, input, out_int32, right, side, sorter)",
        "bucketize": "bucketize(input, boundaries, out_int32, right)",
        "bincount": "bincount(input, weights, minlength)", "histc": "histc(input, bins, min, max)",
        "unique": "unique(input, sorted, return_inverse, return_counts, dim)",
        "unique_consecutive": "unique_consecutive(input, return_inverse, return_counts, dim)"}
    sorting = {
        "sort": "sort(input, dim, descending, stable)", "argsort": "argsort(input, dim, descending, stable)",
        "topk": "topk(input, k, dim, largest, sorted)", "kthvalue": "kthvalue(input, k, dim, keepdim)",
        "median_dim": "median_dim(input, dim, keepdim)", "median": "median(input, dim, keepdim)",
        "nanmedian": "nanmedian(input, dim, keepdim)", "mode": "mode(input, dim, keepdim)",
        "quantile": "quantile(input, q, dim, keepdim, interpolation)",
        "nanquantile": "nanquantile(input, q, dim, keepdim, interpolation)"}
    assert signatures == {**sorting, **searching}
    for name in searching:
        op = tape.get_op(name)
        assert op.samples is not None and op.torch_ref is not None
        if name != "histc":  # histc: a zero gradient, checked below
            assert op.second_order is Grad.NOT_DIFFERENTIABLE and set(op.input_states) == {Grad.NOT_DIFFERENTIABLE}
    for name in sorting:
        op = tape.get_op(name)
        assert op.samples is not None and op.torch_ref is not None
        assert op.second_order is (Grad.NOT_DIFFERENTIABLE if name == "argsort" else Grad.RULE), name
        assert op.n_outputs == (1 if name in ("argsort", "quantile", "nanquantile") else 2), name
    assert tape.get_op("argsort").input_states == (Grad.NOT_DIFFERENTIABLE,)


# -- sort / argsort: ties keep input order, NaN is largest ---------------------------------------------------
TIES = np.array([[2.0, 1.0, 2.0, 2.0, 1.0, 3.0, 1.0], [0.5, 0.5, 0.5, -1.0, 0.5, -1.0, 2.0]])


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("stable", [False, True])
def test_sort_ties_keep_input_order_in_both_directions_with_torchs_indices_and_gradient(descending, stable):
    assert_like_torch("sort", torch.sort, TIES, dim=1, descending=descending, stable=stable)
    assert_like_torch("sort", torch.sort, TIES.T.copy(), dim=0, descending=descending, stable=stable)
    a = ours("argsort", TIES, dim=1, descending=descending, stable=stable)[0]
    np.testing.assert_array_equal(a, torch.argsort(torch.from_numpy(TIES), dim=1, descending=descending,
                                                   stable=stable).numpy())


@pytest.mark.parametrize("descending", [False, True])
def test_nan_sorts_as_the_largest_and_nans_keep_input_order(descending):
    x = np.array([2.0, nan, 1.0, nan, -np.inf, 3.0, np.inf, nan])
    values, indices, _ = ours("sort", x, dim=0, descending=descending)
    expected = [4, 2, 0, 5, 6, 1, 3, 7] if not descending else [1, 3, 7, 6, 5, 0, 2, 4]
    np.testing.assert_array_equal(indices, expected)
    assert_like_torch("sort", torch.sort, x, dim=0, descending=descending, stable=True)


def test_signed_zeros_compare_equal_and_keep_input_order():
    x = np.array([0.0, -0.0, 1.0, -0.0, 0.0, -1.0])
    for descending in (False, True):
        values, indices, _ = ours("sort", x, dim=0, descending=descending)
        expected = torch.sort(torch.from_numpy(x), descending=descending, stable=True)
        np.testing.assert_array_equal(indices, expected.indices.numpy())
        np.testing.assert_array_equal(np.signbit(values), np.signbit(expected.values.numpy()))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_])
def test_integer_and_bool_sorts_keep_the_dtype_and_do_not_overflow_descending(dtype):
    info = np.iinfo(dtype) if dtype is not np.bool_ else None
    x = np.array([3, 0, 1, 3, 0, 2]).astype(dtype)
    if info is not None:
        x[1], x[4] = info.min, info.max  # descending by negation would overflow here
    for descending in (False, True):
        values, indices = ops.sort(tape.tensor(x), descending=descending)
        expected = torch.sort(torch.from_numpy(x), descending=descending, stable=True)
        assert values.dtype == dtype and indices.dtype == np.int64
        np.testing.assert_array_equal(values.numpy(), expected.values.numpy())
        np.testing.assert_array_equal(indices.numpy(), expected.indices.numpy())


def test_sort_gradient_is_the_inverse_permutation_and_its_second_order_is_linear():
    x = np.array([[0.3, -1.2, 2.5, 0.7], [1.1, 0.2, -0.4, 3.0]])
    u = np.arange(8.0).reshape(2, 4)
    _, indices, grad = ours("sort", x, u=u, dim=1, descending=True)
    expected = np.zeros_like(x)
    np.put_along_axis(expected, indices, u, 1)
    np.testing.assert_array_equal(grad, expected)
    t, ut = tape.tensor(x, requires_grad=True), tape.tensor(u, requires_grad=True)
    (g,) = tape.gradients(ops.sort(t, 1, True)[0], [t], [ut], create_graph=True)
    v = np.linspace(-1.0, 1.0, 8).reshape(2, 4)
    d_x, d_u = tape.gradients((g * v).sum(), [t, ut], allow_unused=True)
    assert d_x is None or not d_x.numpy().any()
    np.testing.assert_array_equal(d_u.numpy(), np.take_along_axis(v, indices, 1))


def test_sort_indices_carry_no_gradient_and_sort_values_used_with_them():
    t = tape.tensor(np.array([0.5, -1.5, 2.0]), requires_grad=True)
    values, indices = ops.sort(t)
    assert indices.requires_grad is False and values.requires_grad is True
    (values * indices).sum().backward()  # indices [1, 0, 2] as constant weights of the sorted values
    np.testing.assert_array_equal(t.grad.numpy(), [0.0, 1.0, 2.0])


def test_a_large_random_sort_matches_torch_in_float32():
    x = np.random.default_rng(0).standard_normal((16, 257)).astype(np.float32)
    assert_like_torch("sort", torch.sort, x, dim=-1, descending=True)
    assert_like_torch("sort", torch.sort, x, dim=0)


# -- topk ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("largest", [True, False])
def test_topk_without_ties_matches_torch_values_indices_and_gradient(largest):
    x = np.random.default_rng(1).permutation(40).reshape(5, 8) * 0.5 - 7.0
    for k in (0, 1, 3, 8):
        assert_like_torch("topk", torch.topk, x, k=k, dim=1, largest=largest)
    assert_like_torch("topk", torch.topk, x, k=2, dim=0, largest=largest)


def test_topk_with_ties_returns_the_same_values_as_torch_and_the_lowest_tied_indices():
    x = np.array([2.0, 1.0, 2.0, 2.0, 1.0, 3.0])
    values, indices, grad = ours("topk", x, k=2)
    np.testing.assert_array_equal(values, torch.topk(torch.from_numpy(x), 2).values.numpy())
    np.testing.assert_array_equal(indices, [5, 0])  # torch's tied index is unspecified (its CPU kernel: 3)
    np.testing.assert_array_equal(grad, [1.5, 0.0, 0.0, 0.0, 0.0, 0.5])
    np.testing.assert_array_equal(ours("topk", x, k=3, largest=False)[1], [1, 4, 0])


def test_topk_unsorted_returns_the_sorted_order_which_torch_allows():
    x = np.random.default_rng(2).standard_normal((3, 50))
    ours_values, ours_indices = (a.numpy() for a in ops.topk(tape.tensor(x), 5, sorted=False))
    theirs = torch.topk(torch.from_numpy(x), 5, sorted=False)
    np.testing.assert_array_equal(np.sort(ours_values, 1), np.sort(theirs.values.numpy(), 1))
    np.testing.assert_array_equal(np.sort(ours_indices, 1), np.sort(theirs.indices.numpy(), 1))
    np.testing.assert_array_equal(ours_values, -np.sort(-ours_values, 1))


def test_topk_nan_counts_as_the_largest():
    x = np.array([[0.5, nan, -1.0, 2.0], [1.0, 0.0, nan, -2.0]])
    values, indices, _ = ours("topk", x, k=2)
    np.testing.assert_array_equal(indices, [[1, 3], [2, 0]])
    np.testing.assert_array_equal(ours("topk", x, k=2, largest=False)[1], [[2, 0], [3, 1]])
    assert_like_torch("topk", torch.topk, x, k=2)


def test_topk_of_a_0d_input_is_the_entry_like_torch():
    assert_like_torch("topk", torch.topk, np.array(1.5), k=1)


# -- kthvalue, median_dim ------------------------------------------------------------------------------------
def test_kthvalue_and_median_dim_match_torch_without_ties_in_both_keepdims():
    x = np.random.default_rng(3).permutation(42).reshape(6, 7) * 0.25
    for keepdim in (False, True):
        for k in (1, 4, 7):
            assert_like_torch("kthvalue", torch.kthvalue, x, k=k, dim=1, keepdim=keepdim)
        assert_like_torch("kthvalue", torch.kthvalue, x, k=6, dim=0, keepdim=keepdim)
        for dim in (0, 1, -1):
            assert_like_torch("median_dim", torch.median, x, dim=dim, keepdim=keepdim)


def test_median_dim_is_the_lower_median_and_a_nan_slice_gives_its_first_nan():
    x = np.array([[4.0, 1.0, 3.0, 2.0], [nan, 1.0, nan, 0.0], [2.0, 0.0, 1.0, nan]])
    values, indices, grad = ours("median_dim", x, dim=1)
    np.testing.assert_array_equal(values, [2.0, nan, nan])
    np.testing.assert_array_equal(indices, [3, 0, 3])
    np.testing.assert_array_equal(grad != 0, [[0, 0, 0, 1], [1, 0, 0, 0], [0, 0, 0, 1]])
    assert_like_torch("median_dim", torch.median, x, dim=1)


def test_tied_selections_give_torchs_values_and_the_gradient_to_one_of_the_tied_entries():
    """Which tied index torch returns is unspecified; ours is the stable sort's. The value, and the total
    gradient over the tied entries, agree with torch."""
    x = np.array([[2.0, 1.0, 2.0, 2.0, 1.0, 3.0], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]])
    for name, fn, attrs in [("kthvalue", torch.kthvalue, {"k": 3, "dim": 1}),
                            ("median_dim", torch.median, {"dim": 1})]:
        a, b = ours(name, x, **attrs), theirs(fn, x, **attrs)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(np.take_along_axis(x, a[1][:, None], 1)[:, 0], a[0])
        assert (np.count_nonzero(a[2], axis=1) == 1).all()
        for row in range(2):
            tied = x[row] == a[0][row]
            np.testing.assert_allclose(a[2][row][tied].sum(), b[2][row][tied].sum())
    np.testing.assert_array_equal(ours("kthvalue", x, k=3, dim=1)[1], [0, 2])  # the 3rd of the stable sort


# -- median of every entry -----------------------------------------------------------------------------------
def test_median_shares_its_gradient_among_tied_entries_like_torch():
    assert_like_torch("median", torch.median, np.array([[1.0, 2.0, 2.0], [2.0, 3.0, 0.5]]))
    assert_like_torch("median", torch.median, np.array([5.0, 5.0, 5.0, 5.0]))


def test_median_is_the_lower_of_the_two_middle_values():
    values, _, grad = ours("median", np.array([4.0, 1.0, 3.0, 2.0]), u=np.array(1.0))
    assert values == 2.0
    np.testing.assert_array_equal(grad, [0.0, 0.0, 0.0, 1.0])


def test_a_nan_median_shares_its_gradient_among_the_nans_like_torch():
    assert_like_torch("median", torch.median, np.array([[1.0, nan], [nan, 0.5]]))


def test_median_of_no_entries_is_nan_with_an_empty_gradient_like_torch():
    assert_like_torch("median", torch.median, np.zeros((0, 3)))
    with pytest.raises(ValueError, match=r"median: argument 'input' expected at least one entry for dtype int64"):
        ops.median(tape.tensor(np.zeros((0,), np.int64)))


def test_median_with_a_dim_is_median_dim_as_torchs_median():
    x = np.array([[3.0, 1.0, 2.0, 0.5], [1.0, 4.0, -1.0, 2.5]])
    for dim, keepdim in ((1, False), (0, True), (-1, True)):
        values, indices = ops.median(tape.tensor(x), dim, keepdim=keepdim)
        same = ops.median_dim(tape.tensor(x), dim, keepdim)
        expected = torch.median(torch.from_numpy(x), dim, keepdim)
        assert values.numpy().tolist() == same.values.numpy().tolist() == expected.values.numpy().tolist()
        assert indices.numpy().tolist() == same.indices.numpy().tolist() == expected.indices.numpy().tolist()
    assert_like_torch("median", torch.median, x, dim=1)
    with pytest.raises(TypeError, match=r"median: argument 'keepdim' needs a dim"):
        ops.median(tape.tensor(x), keepdim=True)


# -- zero-size, 0-D, non-contiguous ------------------------------------------------------------------------
@pytest.mark.parametrize("name,fn,attrs", [
    ("sort", torch.sort, {"dim": 0}), ("sort", torch.sort, {"dim": 1}),
    ("topk", torch.topk, {"k": 0, "dim": 0}), ("topk", torch.topk, {"k": 2, "dim": 1}),
    ("kthvalue", torch.kthvalue, {"k": 3, "dim": 1}), ("median_dim", torch.median, {"dim": 1, "keepdim": True})])
def test_zero_size_inputs_work_forward_and_backward(name, fn, attrs):
    x = np.zeros((0, 3))
    assert_like_torch(name, fn, x, **attrs)
    assert ours(name, x, **attrs)[2].shape == (0, 3)


@pytest.mark.parametrize("name,fn,attrs", [
    ("sort", torch.sort, {"dim": 0}), ("topk", torch.topk, {"k": 1, "dim": -1}),
    ("kthvalue", torch.kthvalue, {"k": 1, "dim": 0}), ("kthvalue", torch.kthvalue, {"k": 1, "keepdim": True}),
    ("median_dim", torch.median, {"dim": -1}), ("median", torch.median, {})])
def test_0d_inputs_count_as_one_entry(name, fn, attrs):
    assert_like_torch(name, fn, np.array(0.75), **attrs)


@pytest.mark.parametrize("name,fn,attrs", [
    ("sort", torch.sort, {"dim": 1}), ("topk", torch.topk, {"k": 2, "dim": 0}),
    ("kthvalue", torch.kthvalue, {"k": 2, "dim": 2}), ("median_dim", torch.median, {"dim": 1}),
    ("median", torch.median, {})])
def test_non_contiguous_inputs_match_torch(name, fn, attrs):
    x = (np.random.default_rng(4).permutation(60).reshape(5, 3, 4) * 0.5).transpose(1, 2, 0)
    assert_like_torch(name, fn, x, **attrs)


# -- errors --------------------------------------------------------------------------------------------------
def test_errors_name_the_op_the_argument_the_expected_and_what_came():
    x = tape.tensor(np.ones((2, 3)))
    cases = [
        (lambda: ops.sort(x, dim=2), ValueError, r"sort: argument 'dim' expected a dim in \[-2, 1\].*got 2"),
        (lambda: ops.argsort(x, descending=1), TypeError, r"argsort: argument 'descending' expected a bool, got int"),
        (lambda: ops.sort(x, stable="yes"), TypeError, r"sort: argument 'stable' expected a bool, got str"),
        (lambda: ops.topk(x, 4), ValueError, r"topk: argument 'k' expected an int in \[0, 3\].*got 4"),
        (lambda: ops.topk(x, -1), ValueError, r"topk: argument 'k' expected an int in \[0, 3\].*got -1"),
        (lambda: ops.topk(x, 1.0), TypeError, r"topk: argument 'k' expected an int, got float"),
        (lambda: ops.topk(x, 1, largest=None), TypeError, r"topk: argument 'largest' expected a bool"),
        (lambda: ops.kthvalue(x, 0), ValueError, r"kthvalue: argument 'k' expected an int in \[1, 3\].*got 0"),
        (lambda: ops.kthvalue(x, 3, dim=0), ValueError, r"kthvalue: argument 'k' expected an int in \[1, 2\]"),
        (lambda: ops.kthvalue(tape.tensor(np.ones((0, 3))), 1, dim=0), ValueError,
         r"kthvalue: argument 'input' expected a non-empty dim 0.*got shape \(0, 3\)"),
        (lambda: ops.median_dim(tape.tensor(np.ones((2, 0))), 1), ValueError,
         r"median_dim: argument 'input' expected a non-empty dim 1"),
        (lambda: ops.median_dim(x, 0, keepdim="no"), TypeError, r"median_dim: argument 'keepdim' expected a bool"),
    ]
    for fn, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            fn()


# -- searching and counting (issue #21) ---------------------------------------------------------------------------
@pytest.mark.parametrize("x,attrs", [
    (np.array([0.0, 0.5, 1.0]), {"bins": 2, "min": 0, "max": 1}),  # 0.5 on an edge, max in the last bin
    (np.array([1.0, 1.0, 1.0]), {"bins": 2}),  # one value: the range widened by 1 each way
    (np.array([-2.0, 0.25, 3.0, 3.0]), {"bins": 5}),  # the data's range
    (np.array([-0.5, 0.0, 2.0, 2.5]), {"bins": 4, "min": 0, "max": 2}),  # outside entries are not counted
])
def test_histc_edges_and_ranges_are_torchs(x, attrs):
    for dtype in (np.float64, np.float32):
        ours = ops.histc(tape.tensor(x.astype(dtype)), **attrs)
        theirs = torch.histc(torch.from_numpy(x.astype(dtype)), **attrs)
        assert ours.dtype == dtype
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_histc_of_a_tensor_that_requires_grad_is_constant_as_in_torch():
    x = tape.tensor(np.array([0.2, 0.7, 0.9]), requires_grad=True)
    ops.sum(ops.histc(x, 2, 0, 1) * 3.0).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(3))


def test_unique_values_and_bincount_weights_refuse_a_tensor_that_requires_grad():
    x = tape.tensor(np.array([2.0, 1.0, 2.0]), requires_grad=True)
    with pytest.raises(TypeError, match="unique: argument 'input' requires grad"):
        ops.unique(x, return_counts=True)
    with pytest.raises(TypeError, match="bincount: argument 'weights' requires grad"):
        ops.bincount(tape.tensor(np.array([0, 1, 1])), x)
    values, counts = ops.unique(x.detach(), return_counts=True)
    np.testing.assert_array_equal(values.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(counts.numpy(), [1, 2])


def test_unique_sorted_false_is_torchs_sorted_order_and_nan_stays_distinct():
    x = np.array([3.0, np.nan, 1.0, 3.0, np.nan, 2.0])
    for flags in ({}, {"return_inverse": True, "return_counts": True}):
        ours = ops.unique(tape.tensor(x), sorted=False, **flags)
        theirs = torch.unique(torch.from_numpy(x), sorted=False, **flags)
        for a, b in zip((ours,) if not flags else ours, (theirs,) if not flags else theirs):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("call,error,match", [
    (lambda: ops.searchsorted(tape.tensor(np.arange(3.0)), tape.tensor(np.ones(2)), right=True, side="left"),
     ValueError, "searchsorted: arguments 'side' and 'right' expected the same side"),
    (lambda: ops.searchsorted(tape.tensor(np.ones((2, 3))), tape.tensor(np.ones((3, 1)))),
     ValueError, r"searchsorted: argument 'input' expected leading dims \(2,\)"),
    (lambda: ops.bucketize(tape.tensor(np.ones(2)), tape.tensor(np.ones((2, 2)))),
     ValueError, "bucketize: argument 'boundaries' expected a 1-D tensor"),
    (lambda: ops.bincount(tape.tensor(np.array([1, -1]))), ValueError, "bincount: argument 'input' expected non-neg"),
    (lambda: ops.bincount(tape.tensor(np.ones(2))), TypeError, "bincount: argument 'input' expected a 1-D integer"),
    (lambda: ops.histc(tape.tensor(np.ones(2)), 3, 2, 1), ValueError, "histc: arguments 'min' and 'max' expected"),
    (lambda: ops.histc(tape.tensor(np.array([1, 2])), 3), TypeError, "histc: argument 'input' expected a floating"),
    (lambda: ops.unique(tape.tensor(np.ones(2)), dim=1), ValueError, r"unique: argument 'dim' expected a dim"),
])
def test_bad_input_to_the_search_ops_names_op_and_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()
