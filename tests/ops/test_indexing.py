"""Indexing ops (take_along_dim, scatter, scatter_reduce, masked_select, nonzero, one_hot): what the generated
tests do not cover -- scatter_reduce's tie splitting for amax/amin and its exact product gradients with zeros
(first order against torch, second order against the analytic Hessian where torch refuses), scatter's value
form and refused repeats, integer mean, masked_select's data-dependent length on replay, and errors that
name the op and argument."""

import numpy as np
import pytest
from oracle import LazyTorch

import ops
import tape

torch = LazyTorch()  # torch imported at first use: the module collects without torch


def _grads(fn, *arrays):
    """fn's output and the gradients of <output, u> for each floating array (u a fixed ramp)."""
    ts = [tape.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = fn(*ts)
    u = np.linspace(0.5, 1.5, out.numel()).reshape(out.shape)
    out.backward(u)
    return out.numpy(), [t.grad.numpy() if t.requires_grad else None for t in ts]


def _torch_grads(fn, *arrays):
    ts = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = fn(*ts)
    u = np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape))
    out.backward(torch.from_numpy(u))
    return out.detach().numpy(), [t.grad.numpy() if t.requires_grad else None for t in ts]


# -- scatter_reduce ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_scatter_reduce_ties_split_like_torch(reduce):
    x = np.array([[1.0, 0.5, -1.0]])
    src = np.array([[1.0, 0.5, 2.0], [0.0, 0.5, -1.0], [1.0, 3.0, -1.0]])
    index = np.zeros((3, 3), np.int64)
    ours = _grads(lambda a, s: ops.scatter_reduce(a, 0, index, s, reduce), x, src)
    theirs = _torch_grads(lambda a, s: torch.scatter_reduce(a, 0, torch.from_numpy(index), s, reduce), x, src)
    np.testing.assert_allclose(ours[0], theirs[0])
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, b)


def test_scatter_reduce_excluded_self_takes_no_share_of_a_tie():
    # torch 2.13 counts an excluded self equal to the result among the ties (gradients summing to 2/3);
    # ours splits the whole gradient among the values actually reduced
    x = np.array([3.0, 0.0])
    src = np.array([3.0, 1.0, 3.0])
    _, (gx, gs) = _grads(lambda a, s: ops.scatter_reduce(a, 0, np.zeros(3, np.int64), s, "amax",
                                                          include_self=False), x, src)
    u0 = 0.5  # the ramp's first entry: the gradient arriving at position 0
    np.testing.assert_allclose(gx, [0.0, 1.5])
    np.testing.assert_allclose(gs, [u0 / 2, 0.0, u0 / 2])


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_zeros_exact_like_torch(include_self):
    # one zero, two zeros (torch's first order is exact for both), a zero self
    x = np.array([0.0, 1.5, -2.0, 0.7])
    src = np.array([0.0, 2.0, 0.0, 0.0, 0.5, 3.0, 0.0, 0.0, 1.25])
    index = np.array([0, 1, 1, 1, 2, 2, 3, 3, 3])
    ours = _grads(lambda a, s: ops.scatter_reduce(a, 0, index, s, "prod", include_self=include_self), x, src)
    theirs = _torch_grads(lambda a, s: torch.scatter_reduce(a, 0, torch.from_numpy(index), s, "prod",
                                                            include_self=include_self), x, src)
    np.testing.assert_allclose(ours[0], theirs[0])
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, b, atol=1e-15)


def test_scatter_reduce_prod_second_order_with_two_zeros():
    # torch refuses this double backward; the Hessian of self * prod(src) is the product of the other entries
    v = np.array([1.5, 0.0, 2.0, 0.0])  # self, then three src values all reduced into position 0

    def f(w):
        return ops.scatter_reduce(w[:1], 0, np.zeros(3, np.int64), w[1:], "prod").sum()

    hessian = np.asarray(tape.hessian(f)(tape.tensor(v)))
    expected = np.array([[0.0 if i == j else np.prod(np.delete(v, [i, j])) for j in range(4)] for i in range(4)])
    np.testing.assert_allclose(hessian, expected)


def test_scatter_reduce_integer_mean_floors_like_torch():
    x = np.array([1, 2, 3, 4])
    src = np.array([5, 6, 7, 8, -9])
    index = np.array([0, 1, 0, 1, 3])
    for include_self in (True, False):
        ours = ops.scatter_reduce(tape.tensor(x), 0, index, tape.tensor(src), "mean", include_self=include_self)
        theirs = torch.scatter_reduce(torch.from_numpy(x), 0, torch.from_numpy(index), torch.from_numpy(src), "mean",
                                      include_self=include_self)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_scatter_reduce_errors_name_the_argument():
    x, src, index = tape.tensor(np.zeros(3)), tape.tensor(np.ones(2)), np.array([0, 1])
    with pytest.raises(ValueError, match="scatter_reduce: argument 'reduce'"):
        ops.scatter_reduce(x, 0, index, src, "max")
    with pytest.raises(TypeError, match="scatter_reduce: argument 'include_self'"):
        ops.scatter_reduce(x, 0, index, src, "sum", include_self=1)
    with pytest.raises(IndexError, match="scatter_reduce: argument 'index'"):
        ops.scatter_reduce(x, 0, np.array([0, 3]), src, "sum")


# -- scatter -----------------------------------------------------------------------------------------------------
def test_scatter_value_form_like_torch():
    x = np.arange(12.0).reshape(3, 4)
    index = np.array([[2, 0, 1]])
    ours = _grads(lambda a: ops.scatter(a, 0, index, value=-1.5), x)
    theirs = _torch_grads(lambda a: torch.scatter(a, 0, torch.from_numpy(index), -1.5), x)
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1][0], theirs[1][0])
    ints = ops.scatter(tape.tensor(np.zeros((2, 2), np.int64)), 1, np.array([[1], [0]]), value=5)
    np.testing.assert_array_equal(ints.numpy(), [[0, 5], [5, 0]])


def test_scatter_refuses_repeated_positions_and_ambiguous_sources():
    x = tape.tensor(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="scatter: argument 'index' writes one position"):
        ops.scatter(x, 0, np.array([[0, 1], [0, 2]]), tape.tensor(np.ones((2, 2))))
    with pytest.raises(TypeError, match="scatter: expected exactly one of 'src'"):
        ops.scatter(x, 0, np.array([[0, 1]]), tape.tensor(np.ones((1, 2))), value=1.0)
    with pytest.raises(TypeError, match="scatter: expected exactly one of 'src'"):
        ops.scatter(x, 0, np.array([[0, 1]]))
    with pytest.raises(ValueError, match="scatter: argument 'src'"):
        ops.scatter(x, 0, np.array([[0, 1], [1, 2]]), tape.tensor(np.ones((1, 2))))
    # the same position in different columns is not a repeat
    out = ops.scatter(x, 0, np.array([[1, 1]]), tape.tensor(np.ones((1, 2))))
    np.testing.assert_array_equal(out.numpy(), [[0, 0], [1, 1], [0, 0]])


# -- take_along_dim ----------------------------------------------------------------------------------------------
def test_take_along_dim_errors_name_the_argument():
    x = tape.tensor(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="take_along_dim: argument 'indices' expected 2 dims"):
        ops.take_along_dim(x, np.array([0, 1]), 1)
    with pytest.raises(ValueError, match="take_along_dim: argument 'indices' expected a shape broadcastable"):
        ops.take_along_dim(x, np.zeros((3, 3), np.int64), 1)
    with pytest.raises(IndexError, match="take_along_dim: argument 'indices' expected values in \\[0, 5\\]"):
        ops.take_along_dim(x, np.array([6]))
    with pytest.raises(IndexError, match="take_along_dim: argument 'indices'"):
        ops.take_along_dim(x, np.array([[-4]]), 1)  # -3..-1 count from the end (torch); -4 is out of range
    with pytest.raises(TypeError, match="take_along_dim: argument 'indices' expected an integer tensor"):
        ops.take_along_dim(x, np.array([[0.0]]), 1)


# -- masked_select -----------------------------------------------------------------------------------------------
def test_masked_select_replays_with_the_new_mask():
    x = tape.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    mask = tape.tensor(np.array([True, False, True]))
    with tape.ExecutionTape() as recorded:
        out = ops.masked_select(x, mask) * 2
    np.testing.assert_array_equal(out.numpy(), [0, 4, 6, 10])
    replayed = recorded.replay({mask: np.array([False, True, True])})[out.id]
    np.testing.assert_array_equal(replayed, [2, 4, 8, 10])
    replayed = recorded.replay({mask: np.array([False, False, False]), x: np.ones((2, 3))})[out.id]
    assert replayed.shape == (0,)


def test_masked_select_errors_name_the_argument():
    x = tape.tensor(np.zeros((2, 3)))
    with pytest.raises(TypeError, match="masked_select: argument 'mask' expected a bool tensor"):
        ops.masked_select(x, np.array([1, 0, 1]))
    with pytest.raises(ValueError, match="masked_select: argument 'mask' expected a shape broadcastable"):
        ops.masked_select(x, np.ones(2, np.bool_))


# -- nonzero / one_hot -------------------------------------------------------------------------------------------
NONZERO_INPUTS = [
    np.array([[0.0, 1.0, -0.0], [np.nan, 0.0, -2.0]]),
    np.arange(24).reshape(2, 3, 4) % 3,
    np.array([False, True, True, False]),
    np.array(2.0),
    np.array(0.0),
    np.zeros((0, 3)),
    np.zeros((2, 3)),
]


@pytest.mark.parametrize("x", NONZERO_INPUTS, ids=lambda x: f"{x.dtype}{list(x.shape)}")
def test_nonzero_as_tuple_gives_torchs_index_tensors(x):
    expected = torch.nonzero(torch.tensor(x), as_tuple=True)
    for indices in (ops.nonzero(x, as_tuple=True), tape.tensor(x).nonzero(as_tuple=True)):
        assert isinstance(indices, tuple) and len(indices) == len(expected)
        for ours_index, theirs_index in zip(indices, expected):
            assert ours_index.dtype == np.int64 and ours_index.shape == tuple(theirs_index.shape)
            np.testing.assert_array_equal(ours_index.numpy(), theirs_index.numpy())
    np.testing.assert_array_equal(tape.tensor(x).nonzero().numpy(), torch.nonzero(torch.tensor(x)).numpy())


def test_nonzero_and_one_hot_carry_no_gradient():
    x = tape.tensor(np.array([0.0, 3.0]), requires_grad=True)
    positions = ops.nonzero(x)
    assert positions.dtype == np.int64 and positions.shape == (1, 1) and not positions.requires_grad
    hot = ops.one_hot(positions)
    assert hot.dtype == np.int64 and hot.shape == (1, 1, 2)


def test_one_hot_errors_like_torch():
    with pytest.raises(ValueError, match="one_hot: argument 'input' expected class values >= 0"):
        ops.one_hot(tape.tensor(np.array([-1])))
    with pytest.raises(ValueError, match="one_hot: argument 'input' expected class values below num_classes=3"):
        ops.one_hot(tape.tensor(np.array([3])), 3)
    with pytest.raises(ValueError, match="one_hot: cannot infer the number of classes"):
        ops.one_hot(tape.tensor(np.zeros(0, np.int64)))
    with pytest.raises(ValueError, match="one_hot: argument 'num_classes'"):
        ops.one_hot(tape.tensor(np.array([0])), 0)
    with pytest.raises(TypeError, match="one_hot: argument 'input' expected an integer tensor"):
        ops.one_hot(tape.tensor(np.array([0.0])))


def test_one_hot_infers_classes_again_on_replay():
    labels = tape.tensor(np.array([0, 2]))
    with tape.ExecutionTape() as recorded:
        out = ops.one_hot(labels)
    assert out.shape == (2, 3)
    assert recorded.replay({labels: np.array([4, 1])})[out.id].shape == (2, 5)


# -- 0-D inputs (issue #21): torch reads a 0-D input, index or src as 1-D of size 1 ------------------------------
S, I0 = np.array(1.5), np.array(0)


@pytest.mark.parametrize("fn,torch_fn,arrays", [
    (lambda x, i: ops.gather(x, 0, i), lambda x, i: torch.gather(x, 0, i), (S, I0)),
    (lambda x, i: ops.gather(x, -1, i), lambda x, i: torch.gather(x, -1, i), (S, np.array([0, 0]))),
    (lambda x, i: ops.gather(x, 0, i), lambda x, i: torch.gather(x, 0, i), (np.arange(3.0), np.array(2))),
    (lambda x, i, s: ops.scatter_add(x, 0, i, s), lambda x, i, s: torch.scatter_add(x, 0, i, s),
     (S, I0, np.array(2.0))),
    (lambda x, i, s: ops.scatter_add(x, 0, i, s), lambda x, i, s: torch.scatter_add(x, 0, i, s),
     (np.zeros(3), np.array(1), np.array(2.0))),
    (lambda x, i, s: ops.scatter(x, 0, i, s), lambda x, i, s: torch.scatter(x, 0, i, s), (S, I0, np.array(-2.0))),
    (lambda x, i, s: ops.scatter_reduce(x, 0, i, s, "prod"), lambda x, i, s: torch.scatter_reduce(x, 0, i, s, "prod"),
     (S, np.array([0, 0]), np.array([2.0, -3.0]))),
    (lambda x, i: ops.index_select(x, 0, i), lambda x, i: torch.index_select(x, 0, i), (S, I0)),
    (lambda x, i: ops.index_select(x, 0, i), lambda x, i: torch.index_select(x, 0, i), (S, np.array([0]))),
    (lambda x, i, s: ops.index_add(x, 0, i, s, alpha=2), lambda x, i, s: torch.index_add(x, 0, i, s, alpha=2),
     (S, I0, np.array(0.25))),
    (lambda x, i: ops.take_along_dim(x, i), lambda x, i: torch.take_along_dim(x, i), (S, I0)),
])
def test_0d_inputs_give_torchs_values_shapes_and_gradients(fn, torch_fn, arrays):
    ours, grads = _grads(fn, *arrays)
    theirs, t_grads = _torch_grads(torch_fn, *arrays)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-15)
    for a, b in zip(grads, t_grads):
        if b is not None:
            np.testing.assert_allclose(a, b, rtol=1e-15)


@pytest.mark.parametrize("call,torch_call", [
    (lambda: ops.gather(tape.tensor(np.ones((2, 3))), 0, tape.tensor(I0)),
     lambda: torch.gather(torch.ones(2, 3), 0, torch.tensor(0))),
    (lambda: ops.index_select(tape.tensor(S), 0, tape.tensor(np.array([0, 0]))),
     lambda: torch.index_select(torch.tensor(1.5), 0, torch.tensor([0, 0]))),
    (lambda: ops.index_add(tape.tensor(S), 0, tape.tensor(np.array([0])), tape.tensor(np.ones(1))),
     lambda: torch.index_add(torch.tensor(1.5), 0, torch.tensor([0]), torch.ones(1))),
    (lambda: ops.gather(tape.tensor(S), 0, tape.tensor(np.array(1))),
     lambda: torch.gather(torch.tensor(1.5), 0, torch.tensor(1))),
])
def test_0d_inputs_torch_refuses_are_refused(call, torch_call):
    with pytest.raises(RuntimeError):
        torch_call()
    with pytest.raises((ValueError, IndexError)):
        call()


# -- take, index_fill, index_copy, index_reduce, masked_scatter ------------------------------------------------
def test_index_copy_refuses_repeated_positions_and_masked_scatter_a_short_source():
    x = tape.tensor(np.zeros(3))
    with pytest.raises(ValueError, match="index_copy: argument 'index' repeats a position"):
        ops.index_copy(x, 0, tape.tensor(np.array([1, 1])), tape.tensor(np.ones(2)))
    with pytest.raises(ValueError, match="masked_scatter: argument 'source' expected at least 2 entries"):
        ops.masked_scatter(x, tape.tensor(np.array([True, False, True])), tape.tensor(np.ones(1)))
    with pytest.raises(IndexError, match=r"take: argument 'index' expected values in \[-3, 2\]"):
        ops.take(x, tape.tensor(np.array([3])))
    with pytest.raises(ValueError, match="index_reduce: argument 'reduce' expected one of"):
        ops.index_reduce(x, 0, tape.tensor(np.array([0])), tape.tensor(np.ones(1)), "sum")
    with pytest.raises(TypeError, match="index_fill: argument 'value' expected a Tensor or a real array-like, got str"):
        ops.index_fill(x, 0, tape.tensor(np.array([0])), "1")
    with pytest.raises(TypeError, match=r"index_fill: argument 'value' expected a number or a 0-D tensor, got shape"):
        ops.index_fill(x, 0, tape.tensor(np.array([0])), tape.tensor(np.ones(2)))


@pytest.mark.parametrize("reduce", ["amax", "amin", "mean", "prod"])
def test_index_reduce_with_ties_and_zeros_gives_torchs_gradients(reduce):
    x = np.array([[1.0, 0.0], [2.0, 5.0], [-1.0, 3.0]])
    source = np.array([[1.0, 0.0], [1.0, 4.0], [-1.0, 3.0], [0.5, 3.0]])
    index = np.array([0, 0, 2, 2])
    for keep in (True, False):
        ours, grads = _grads(lambda a, i, s, keep=keep: ops.index_reduce(a, 0, i, s, reduce, include_self=keep),
                             x, index, source)
        theirs, t_grads = _torch_grads(
            lambda a, i, s, keep=keep: torch.index_reduce(a, 0, i, s, reduce, include_self=keep), x, index, source)
        np.testing.assert_allclose(ours, theirs, rtol=1e-15)
        if reduce in ("mean", "prod") or keep:  # torch 2.13 lets an excluded self share a tie (see scatter_reduce)
            for a, b in zip(grads, t_grads):
                if b is not None:
                    np.testing.assert_allclose(a, b, rtol=1e-14)
