"""numpy's meanings, not ours: every numpy function and ufunc the interop maps is swept against numpy itself.

The sweep is driven by the interop tables (tape.interop.FUNCTION_OPS, UFUNC_OPS): a newly mapped function fails
``test_every_mapped_function_has_samples`` until it has samples here. For each call -- numpy's keywords and its
positional forms -- the result on tensors must equal numpy's on the arrays (values, dtype, shape) and its gradient
must match finite differences; a call numpy refuses must be refused with numpy's kind of error; a call numpy
accepts and minitape does not support must raise a TypeError/ValueError naming the function and the argument.
Then every optional numpy parameter each function has is probed with values numpy accepts (``PROBES``).

Before this sweep: np.sum(t, axis=()) reduced every axis, np.squeeze(t, 0) on a size-2 axis did nothing,
axis=[0, 2], np.mean(t0d, axis=0), np.moveaxis(t, 5, 0) and np.expand_dims(t, 5) were accepted, positional
arguments landed in the wrong slot, dtype=/initial=/where= leaked a private wrapper's signature,
np.take_along_axis with a broadcasting index took a sub-block, np.outer of 2-D inputs was refused, np.dot of
N-D arrays was refused, np.sign(nan) gave 0 and np.where(x) (one argument) raised.
"""

import inspect
import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest

import ops
import tape
from tape import interop


class T:
    """A float64 array that the sweep passes as a Tensor requiring grad (numpy gets the array)."""

    def __init__(self, array):
        self.array = np.asarray(array, dtype=np.float64)


_rng = np.random.default_rng(7)


def t(*shape, low=0.5, high=1.5):
    """Distinct values (no ties for max/min, no kinks for clip at the bounds)."""
    n = int(np.prod(shape))
    return T((low + (high - low) * (_rng.permutation(n) + _rng.uniform(0.1, 0.9, n)) / n).reshape(shape))


@dataclass
class Call:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    refused: str | None = None  # numpy accepts it; minitape refuses, naming this argument

    def __repr__(self) -> str:
        show = [f"T{a.array.shape}" if isinstance(a, T) else repr(a) for a in self.args]
        return f"({', '.join(show + [f'{k}={v!r}' for k, v in self.kwargs.items()])})"


def c(*args, refused=None, **kwargs):
    return Call(args, kwargs, refused)


x, x2, m, m2, v, v2, s0 = t(2, 3, 4), t(2, 3, 4), t(3, 4), t(3, 4), t(4), t(4), t()
sq, col, ones13 = t(4, 4), t(3), t(1, 3, 1)
idx = np.array([[0, 3], [2, 1], [1, 1]])
mask = x.array > 1.0


def reductions(positional_dtype: bool):
    calls = [c(x), c(x, 1), c(x, -1), c(x, (0, 2)), c(x, ()), c(x, None), c(x, axis=(), keepdims=True),
             c(x, 1, keepdims=True), c(s0), c(s0, ()), c(s0, None), c(x, axis=1, out=None), c(x, where=True),
             c(x, axis=[0, 2]), c(x, 3), c(s0, 0), c(x, (0, 0)), c(x, 1.0), c(x, keepdims="yes")]
    if positional_dtype:
        calls += [c(x, 1, None, None, True), c(x, 1, np.float64), c(x, dtype=np.float64)]
    else:
        calls += [c(x, 1, None, True)]
    return calls


def moments():
    return reductions(True) + [c(x, 1, None, None, 1), c(x, ddof=1), c(x, correction=1), c(x, (), ddof=1),
                               c(x, 1, ddof=1, correction=1), c(x, (0, 2), ddof=2, keepdims=True)]


SAMPLES = {
    np.sum: reductions(True),
    np.prod: reductions(True),
    np.mean: reductions(True),
    np.max: reductions(False),
    np.min: reductions(False),
    np.amax: reductions(False),
    np.amin: reductions(False),
    np.var: moments(),
    np.std: moments(),
    np.where: [c(mask, x, x2), c(mask, x, 0.0), c(x.array - 1.0, x, x2), c(mask[0], 2.0, x), c(x), c(mask),
               c(mask, x)],
    np.reshape: [c(x, (4, 6)), c(x, -1), c(x, [6, -1]), c(x, (4, 6), "F"), c(x, shape=(24,)), c(x, (4, 6), order="C"),
                 c(x, (4, 6), copy=True), c(x, (5, 5))],
    np.transpose: [c(x), c(x, (2, 0, 1)), c(x, [1, 0, 2]), c(x, (-1, 0, 1)), c(x, axes=None), c(v), c(x, (0, 1)),
                   c(x, (0, 0, 1)), c(x, (0, 1, 3))],
    np.swapaxes: [c(x, 0, 2), c(x, -1, 0), c(x, 1, 1), c(x, 0, 3)],
    np.moveaxis: [c(x, 0, -1), c(x, [0, 1], [2, 0]), c(x, (0,), (1,)), c(x, -1, 0), c(x, 5, 0), c(x, 0, -4),
                  c(x, [0], [1, 2]), c(x, [0, 0], [1, 2])],
    np.expand_dims: [c(x, 0), c(x, -1), c(x, (0, 2)), c(x, [0, 4]), c(s0, 0), c(x, 3), c(x, 5), c(x, -6),
                     c(x, (0, 0))],
    np.squeeze: [c(ones13), c(ones13, 0), c(ones13, (0, 2)), c(ones13, -1), c(x), c(x, 0), c(ones13, 3),
                 c(ones13, [0])],
    np.broadcast_to: [c(v, (3, 4)), c(v, [2, 3, 4]), c(s0, 5), c(v, (4,)), c(v, (3,)), c(v, (-1, 4)),
                      c(v, (3, 4), subok=True)],
    np.concatenate: [c([m, m2]), c([m, m2], 1), c((m, m2), -1), c([m, m2], None), c([m, m2.array], 0),
                     c([m, m2], axis=0, out=None), c([m, m2], 2), c([s0, s0]), c([m, v])],
    np.stack: [c([m, m2]), c([m, m2], 2), c([m, m2], -1), c((m, m2), axis=1), c([m, m2.array]), c([m, m2], 3),
               c([m, v])],
    np.einsum: [c("ij,jk->ik", m, t(4, 2)), c("ii->i", sq), c("ij->", m), c("ij", m), c("ij,j->i", m, v),
                c("ij->ji", m, optimize=True), c("ij->ji", m, optimize="greedy"), c("ij->i", m, order="C"),
                c(m, [0, 1], [1], refused="subscripts"), c("ij->i", m, casting="unsafe", refused="casting")],
    np.clip: [c(m, 0.8, 1.2), c(m, None, 1.0), c(m, 0.9, None), c(m, 0.8), c(m, min=0.8, max=1.2), c(m, a_max=1.1),
              c(m), c(m, np.full(4, 0.9), 1.2), c(m, 0.8, t(3, 1, low=1.0, high=1.3)), c(m, t(4, low=0.4, high=0.7)),
              c(m, 1.2, 0.8), c(m, 0.8, 1.2, min=0.5)],
    np.take_along_axis: [c(m, idx, 1), c(m, idx - 4, 1), c(m, idx[:1], 1), c(m, np.array([[0, 1, 2, 1]]), 0),
                         c(v, np.array([3, 0, 0]), None), c(x, np.zeros((2, 3, 1), int), -1),
                         c(m.array, idx, 1), c(m, idx, axis=1), c(m, idx.astype(float), 1), c(m, idx[0], 1),
                         c(m, idx, 2)],
    np.tril: [c(m), c(m, 1), c(m, -1), c(x, 1), c(m, k=2), c(v, refused="m"), c(m, 1.5, refused="k")],
    np.triu: [c(m), c(m, 1), c(m, -1), c(x, 1), c(m, k=2), c(v, refused="m"), c(m, 1.5, refused="k")],
    np.dot: [c(v, v2), c(m, v), c(col, m), c(m, t(4, 2)), c(x, v), c(x, t(4, 2)), c(x, t(5, 4, 2)),
             c(v, t(2, 4, 3)), c(s0, m), c(m, s0), c(v, v2, out=None), c(m, m2)],
    np.cumsum: [c(x), c(x, 1), c(x, -1), c(s0), c(x, 1, None, None), c(x, axis=0, dtype=np.float64), c(x, 3),
                c(x, (0, 1))],
    np.cumprod: [c(x), c(x, 1), c(x, -1), c(s0), c(x, 1, None, None), c(x, axis=0, dtype=np.float64), c(x, 3)],
    np.flip: [c(x), c(x, 0), c(x, (0, 2)), c(x, [1]), c(x, -1), c(x, axis=None), c(x, 3), c(x, (0, 0))],
    np.roll: [c(x, 1), c(x, -2, 1), c(x, (1, 2), (0, 2)), c(x, (1, 2), 1), c(x, 1, (0, 1)), c(x, 5, None), c(x, (1, 2)),
              c(x, 7, -1), c(x, (1, 2), (0, 0)), c(x, (1, -3), [2, -1]),
              c(x, shift=1, axis=[0, 2]), c(x, (1, 2), (0, 1, 2)), c(x, 1, 3)],
    np.tile: [c(m, 2), c(m, (2, 1)), c(m, (2, 1, 3)), c(v, ()), c(v, [2]), c(m, -1)],
    np.diagonal: [c(m), c(m, 1), c(m, -1), c(x, 0, 0, 2), c(x, 1, -1, 0), c(m, offset=5), c(v), c(x, 0, 1, 1),
                  c(x, 0, 0, 3)],
    np.diag: [c(v), c(v, 1), c(v, -2), c(m), c(m, 1), c(m, k=-1), c(x)],
    np.fliplr: [c(m), c(x), c(v)],
    np.flipud: [c(v), c(m), c(x), c(s0)],
    np.outer: [c(v, v2), c(m, v), c(s0, v), c(v, col, out=None)],
    np.tensordot: [c(x, t(3, 4, 5)), c(x, t(4, 2), 1), c(x, t(4, 3), ([2, 1], [0, 1])), c(x, t(3, 2), (1, 0)),
                   c(x, t(4, 2), ([-1], [0])), c(m, v, 0), c(m, m2, axes=([0, 1], [0, 1])), c(x, t(3, 4), 3),
                   c(x, t(3, 4), -1, refused="axes")],
    np.full_like: [c(m, 2.0), c(m, s0), c(m, 2.0, np.float32), c(m, 1.0, shape=(2, 2)), c(m, v),
                   c(m, 2.0, order="F")],
}


# optional numpy parameters probed on each function's first sample, with values numpy accepts there
def _probe_values(name, expected, first):
    a = first.args[0].array if isinstance(first.args[0], T) else None
    return {
        "dtype": [np.float64, np.float32],
        "out": [np.empty_like(expected)] if isinstance(expected, np.ndarray) else [],
        "keepdims": [True, False],
        "initial": [100.0],
        "where": [True] + ([a > 1.0] if a is not None else []),
        "ddof": [1],
        "correction": [1],
        "mean": [np.mean(a, keepdims=True)] if a is not None else [],
        "order": ["C", "F", "A", "K"],
        "copy": [True, False, None],
        "casting": ["same_kind", "unsafe", "no"],
        "optimize": [True, "greedy", False],
        "subok": [True, False],
        "device": ["cpu"],
        "shape": [(2, 2)] if name == "full_like" else [],
    }


def _arrays(value):
    if isinstance(value, T):
        return value.array.copy()
    if isinstance(value, list | tuple):
        return type(value)(_arrays(v) for v in value)
    return value


def _tensors(value, leaves):
    if isinstance(value, T):
        if len(leaves) == len(leaves.pool):
            leaves.pool.append(tape.tensor(value.array, requires_grad=True))
        leaf = leaves.pool[len(leaves)]
        leaves.append(leaf)
        return leaf
    if isinstance(value, list | tuple):
        return type(value)(_tensors(v, leaves) for v in value)
    return value


class _Leaves(list):
    def __init__(self, pool):
        super().__init__()
        self.pool = pool


def _run_numpy(func, call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # var with ddof >= count: numpy warns and gives nan/inf
        try:
            return func(*_arrays(call.args), **_arrays(call.kwargs)), None
        except Exception as e:  # noqa: BLE001 -- numpy's refusal is what we compare with
            return None, e


def _run_ours(func, call, pool=None):
    leaves = _Leaves([] if pool is None else pool)
    args, kwargs = _tensors(call.args, leaves), _tensors(call.kwargs, leaves)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return func(*args, **kwargs), leaves.pool


def _values(result):
    if isinstance(result, tape.Tensor):
        return result.detach().numpy()
    if isinstance(result, tuple):
        return tuple(_values(r) for r in result)
    return np.asarray(result)


def _assert_same(func, call, got, expected):
    got, expected = _values(got), _values(expected)
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected), (func.__name__, call)
        for g, e in zip(got, expected):
            _assert_same(func, call, g, e)
        return
    assert got.shape == expected.shape and got.dtype == expected.dtype, (func.__name__, call, got, expected)
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=0, equal_nan=True, err_msg=f"{func.__name__}{call}")


def _check(func, call, label=""):
    """One call against numpy: the same result, or the same refusal, or a refusal naming the argument."""
    expected, numpy_error = _run_numpy(func, call)
    try:
        got, leaves = _run_ours(func, call)
    except Exception as ours:  # noqa: BLE001
        text = str(ours) + str(ours.__cause__ or "")
        assert "run()" not in text and "_reduce" not in text and "lambda" not in text, (func.__name__, call, text)
        if numpy_error is not None:
            assert isinstance(ours, type(numpy_error)), (func.__name__, call, repr(ours), repr(numpy_error))
            return None
        assert call.refused is not None, f"np.{func.__name__}{call} {label}: numpy accepts it, minitape raised {ours!r}"
        assert isinstance(ours, TypeError | ValueError), (func.__name__, call, repr(ours))
        assert func.__name__ in text and f"'{call.refused}'" in text, (func.__name__, call, text)
        return None
    assert numpy_error is None, f"np.{func.__name__}{call} {label}: numpy raises {numpy_error!r}, minitape gave {got}"
    assert call.refused is None, f"np.{func.__name__}{call}: expected a refusal naming '{call.refused}'"
    _assert_same(func, call, got, expected)
    return got, leaves


def _gradcheck(func, call, got, leaves):
    if not isinstance(got, tape.Tensor) or got.grad_fn is None or not got.numel() or not np.isfinite(got.numpy()).all():
        return
    tape.gradcheck(lambda *ts: _run_ours(func, call, list(ts))[0], leaves)


def test_every_mapped_function_has_samples():
    assert set(interop.FUNCTION_OPS) <= set(SAMPLES), set(interop.FUNCTION_OPS) - set(SAMPLES)


@pytest.mark.parametrize("func", list(interop.FUNCTION_OPS), ids=lambda f: f.__name__)
def test_each_handler_has_numpys_own_signature(func):
    # positional arguments land where numpy puts them, every keyword numpy has exists
    assert str(inspect.signature(interop.FUNCTION_OPS[func])) == str(inspect.signature(func))


@pytest.mark.parametrize("func", list(interop.FUNCTION_OPS), ids=lambda f: f.__name__)
def test_every_call_means_what_numpy_means_with_finite_difference_gradients(func):
    for call in SAMPLES[func]:
        checked = _check(func, call)
        if checked is not None:
            _gradcheck(func, call, *checked)


@pytest.mark.parametrize("func", list(interop.FUNCTION_OPS), ids=lambda f: f.__name__)
def test_every_optional_numpy_parameter_is_honoured_exactly_or_refused_by_name(func):
    first = SAMPLES[func][0]
    expected, error = _run_numpy(func, first)
    assert error is None, (func.__name__, first, error)
    probes = _probe_values(func.__name__, expected, first)
    params = inspect.signature(func).parameters.values()
    tried = 0
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is p.empty:
            continue
        positional = [q for q in params if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)]
        if p.name in first.kwargs or p in positional[: len(first.args)]:
            continue
        for value in probes.get(p.name, ()):
            call = Call(first.args, {**first.kwargs, p.name: value}, refused=p.name)
            expected, numpy_error = _run_numpy(func, call)
            tried += numpy_error is None
            try:
                got, leaves = _run_ours(func, call)
            except Exception as ours:  # noqa: BLE001
                if numpy_error is None:  # refused: by name, as TypeError/ValueError
                    assert isinstance(ours, TypeError | ValueError), (func.__name__, call, repr(ours))
                    assert func.__name__ in str(ours) and p.name in str(ours), (func.__name__, call, str(ours))
                continue
            assert numpy_error is None, (func.__name__, call, numpy_error)
            _assert_same(func, call, got, expected)
    probeable = [p for p in params if probes.get(p.name) and p.kind not in (p.POSITIONAL_ONLY, p.VAR_KEYWORD)]
    assert tried or not probeable, f"numpy accepted none of the probes of np.{func.__name__}"


def test_the_bugs_the_issue_names_are_gone():
    """Each line was a silent wrong result (or a leaked wrapper signature) before this sweep."""
    xt = tape.tensor(x.array, requires_grad=True)
    assert np.sum(xt, axis=()).shape == (2, 3, 4)
    np.testing.assert_array_equal(np.var(xt, axis=()).numpy(), np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="squeeze"):
        np.squeeze(xt, axis=0)
    with pytest.raises(TypeError, match="'axis'"):
        np.sum(xt, axis=[0, 2])
    with pytest.raises(np.exceptions.AxisError, match="mean"):
        np.mean(tape.tensor(2.0, requires_grad=True), axis=0)
    with pytest.raises(np.exceptions.AxisError, match="moveaxis"):
        np.moveaxis(xt, 5, 0)
    with pytest.raises(np.exceptions.AxisError, match="expand_dims"):
        np.expand_dims(xt, 5)
    assert np.sum(xt, 1, None).shape == (2, 4)  # numpy's third positional is dtype, not keepdims
    for kwargs, name in [({"dtype": np.float32}, "dtype"), ({"initial": 1.0}, "initial"), ({"where": mask}, "where")]:
        with pytest.raises(TypeError, match=f"np.sum.*'{name}'"):
            np.sum(xt, **kwargs)
    with pytest.raises(TypeError, match="einsum.*'optimize'"):
        np.einsum("ijk->i", xt, optimize="fastest")
    with pytest.raises(TypeError, match="reshape.*'order'"):
        np.reshape(xt, (4, 6), order="A")
    np.testing.assert_array_equal(np.where(xt)[0], np.where(x.array)[0])


# -- ufuncs -------------------------------------------------------------------------------------------------------
EDGES = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.5, 3.0, 1e-30, 1e30])


def _ufunc_operands(ufunc, dtype):
    if ufunc is np.matmul:
        return [t(3, 4).array.astype(dtype), t(4, 2).array.astype(dtype)]
    if ufunc.nin == 1:
        return [EDGES.astype(dtype)]
    a, b = np.meshgrid(EDGES, EDGES)
    return [a.ravel().astype(dtype), b.ravel().astype(dtype)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("ufunc", list(interop.UFUNC_OPS), ids=lambda u: u.__name__)
def test_each_mapped_ufunc_gives_numpys_values_at_edge_values(ufunc, dtype):
    operands = _ufunc_operands(ufunc, dtype)
    with np.errstate(all="ignore"):
        expected = ufunc(*operands)
        got = ufunc(*[tape.tensor(a) for a in operands])
    assert isinstance(got, tape.Tensor)
    got = got.numpy()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    if expected.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected), err_msg="signed zeros")


@pytest.mark.parametrize("ufunc", list(interop.LOGICAL_UFUNCS), ids=lambda u: u.__name__)
def test_bitwise_ufuncs_on_bools_give_numpys_values(ufunc):
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    operands = [a] if ufunc.nin == 1 else [a, b]
    np.testing.assert_array_equal(ufunc(*[tape.tensor(o) for o in operands]).numpy(), ufunc(*operands))


@pytest.mark.parametrize("ufunc", list(interop.UFUNC_OPS), ids=lambda u: u.__name__)
def test_each_mapped_ufunc_is_the_right_op_by_its_gradient(ufunc):
    low, high = (1.2, 1.8) if ufunc is np.arccosh else (0.2, 0.8)
    operands = [tape.tensor(a, requires_grad=True) for a in _ufunc_operands(ufunc, np.float64)]
    if ufunc is not np.matmul:
        operands = [tape.tensor(t(6, low=low, high=high).array, requires_grad=True) for _ in range(ufunc.nin)]
    out = ufunc(*operands)
    if out.dtype.kind != "f":
        assert out.grad_fn is None or not out.requires_grad
        return
    tape.gradcheck(lambda *ts: ufunc(*ts), operands)


@pytest.mark.parametrize("ufunc", [np.exp, np.add], ids=lambda u: u.__name__)
def test_ufunc_keywords_are_honoured_exactly_or_refused_by_name(ufunc):
    a = t(3).array
    leaf = tape.tensor(a, requires_grad=True)
    operands = (leaf,) * ufunc.nin
    for kwargs in [{"out": None}, {"dtype": np.float64}, {"where": True}, {"casting": "same_kind"}, {"order": "C"}]:
        got = ufunc(*operands, **kwargs)
        assert isinstance(got, tape.Tensor) and got.grad_fn is not None, kwargs
        np.testing.assert_array_equal(got.numpy(), ufunc(*(a,) * ufunc.nin, **kwargs))
    for kwargs, name in [({"dtype": np.float32}, "dtype"), ({"where": a > 1}, "where"), ({"out": np.empty(3)}, "out"),
                         ({"casting": "unsafe"}, "casting")]:
        with pytest.raises(TypeError, match=f"{ufunc.__name__}.*{name}"):
            ufunc(*operands, **kwargs)


# -- conversions at the door and out of the graph ---------------------------------------------------------------
class _ArrayLike:
    def __init__(self, array):
        self.array = array

    def __array__(self, dtype=None, copy=None):
        return self.array


class _DLPackOnly:
    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_data_that_has_a_dtype_keeps_it_at_the_door(torch):
    a64 = np.array([1.0, 1.0 + 2**-40])  # a float32 cast would round the second value to 1.0
    for make in (tape.tensor, tape.as_tensor):
        for data in (torch.tensor(a64), _ArrayLike(a64), _DLPackOnly(a64), a64, [np.float64(1.0), np.float64(2.0)]):
            got = make(data)
            assert got.dtype == np.float64, (make.__name__, type(data).__name__, got.dtype)
        np.testing.assert_array_equal(make(torch.tensor(a64)).numpy(), a64)
        assert make(np.float64(0.1)).dtype == np.float64 and make(np.float32(0.1)).dtype == np.float32
        assert make(torch.tensor(a64, dtype=torch.float32)).dtype == np.float32
        assert make([1.0, 2.0]).dtype == np.float32 and make(0.1).dtype == np.float32  # Python floats: torch's rule
        assert make([[1, 2]]).dtype == np.int64
        for data in (torch.tensor(a64, dtype=torch.float16), np.float16(1.0)):  # float16: kept, as a storage dtype
            assert make(data).dtype == np.float16
        with pytest.raises(TypeError, match=f"{make.__name__}.*BFloat16"):
            make(torch.tensor(a64, dtype=torch.bfloat16))


def test_a_numpy_float_scalar_acts_as_a_python_float(torch):
    xs = np.array([1.0, 2.5, -3.0], np.float32)
    x32 = tape.tensor(xs, requires_grad=True)
    for scalar in (np.float64(0.1), np.sqrt(np.float64(2.0)), np.float32(0.1), np.float16(0.5)):
        for got, ref in [(x32 * scalar, torch.tensor(xs) * scalar), (scalar - x32, scalar - torch.tensor(xs)),
                         (x32 / scalar, torch.tensor(xs) / scalar), (x32 ** scalar, torch.tensor(xs).abs() ** scalar)]:
            if got is not None and not np.isnan(got.numpy()).any():
                assert got.dtype == np.float32 and ref.dtype == torch.float32
                np.testing.assert_array_equal(got.numpy(), ref.numpy())
    (x32 * np.float64(3.0)).sum().backward()
    np.testing.assert_array_equal(x32.grad.numpy(), np.full(3, 3.0, np.float32))
    x64 = tape.tensor(xs.astype(np.float64))
    assert (x64 * np.float32(0.1)).dtype == np.float64 == (torch.tensor(xs, dtype=torch.float64) * np.float32(0.1)
                                                          ).numpy().dtype
    assert ops.exp(np.float64(1.0)).dtype == np.float64  # alone, it is float64 data: no cast


@pytest.mark.parametrize("shape", [(), (1,), (1, 1), (2,), (0,), (1, 2)])
@pytest.mark.parametrize("convert", [float, int, bool, lambda v: v.item()], ids=["float", "int", "bool", "item"])
def test_scalar_conversions_follow_torch(torch, shape, convert):
    values = np.full(shape, 2.5)
    ours, theirs = tape.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # torch warns on a scalar of a tensor that requires grad
            expected = convert(theirs)
    except (RuntimeError, ValueError):
        with pytest.raises(ValueError):
            convert(ours)
        return
    got = convert(ours)
    assert type(got) is type(expected) and got == expected


def test_a_tensor_that_requires_grad_leaves_the_graph_only_through_an_explicit_exit():
    s = tape.tensor(2.0, requires_grad=True)
    arr = np.zeros(3)
    with pytest.raises(ValueError) as raised:  # numpy reports "setting an array element with a sequence"
        arr[0] = s
    assert "requires grad" in str(raised.value.__cause__)
    ints = np.zeros(3, int)
    with pytest.raises(TypeError, match="requires grad"):
        ints[0] = s
    with pytest.raises(TypeError, match="requires grad"):
        arr[:] = tape.tensor(np.ones(3), requires_grad=True)
    for convert in (np.asarray, np.array, np.float32, lambda v: np.array([v])):
        with pytest.raises(TypeError, match="requires grad"):
            convert(s)
    arr[0], arr[1], arr[2] = s.item(), float(s), tape.tensor(5.0)  # explicit exits, and a constant tensor
    np.testing.assert_array_equal(arr, [2.0, 2.0, 5.0])
    # documented: np.float64 subclasses float and its constructor is float(s) -- indistinguishable from the exit
    assert np.float64(s) == float(s)


def test_full_like_with_a_fill_that_requires_grad_is_recorded():
    fill = tape.tensor(1.5, requires_grad=True, dtype=np.float64)
    out = np.full_like(tape.tensor(np.zeros((2, 3))), fill)
    assert out.grad_fn is not None
    out.sum().backward()
    assert fill.grad.item() == 6.0
    tape.gradcheck(lambda f: np.full_like(tape.tensor(np.zeros((2, 3))), f), [fill])
    with pytest.raises(TypeError, match="full_like.*'fill_value'"):
        np.full_like(tape.tensor(np.zeros(3, np.float32)), fill)  # would cast the float64 fill to float32


def test_probing_covers_the_keywords_the_issue_lists():
    names = {p.name for f in interop.FUNCTION_OPS for p in inspect.signature(f).parameters.values()}
    probed = set(_probe_values("x", np.zeros(1), Call((t(1),))))
    assert {"dtype", "initial", "where", "optimize", "order", "out"} <= names & probed


def test_array_protocol_copy_false_never_casts():
    c32 = tape.tensor(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="copy"):
        np.asarray(c32, dtype=np.float64, copy=False)
    assert np.asarray(c32, dtype=np.float64).dtype == np.float64 and np.asarray(c32, copy=False).dtype == np.float32
