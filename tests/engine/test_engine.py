"""The engine: tensors, registration, the reverse pass and its error paths, gradcheck, and Tensor's methods (each
the op it stands for, called as torch's method is)."""

import numpy as np
import pytest

import ops
import tape
from tape import NOT_DIFFERENTIABLE, STUB, Sample, defop
from tape.tensor_api import ValuesIndices, _OpMethod
from tape.tools.verify import call, flat_leaves, joined, op_samples, sample_tensors


@pytest.fixture
def throwaway_ops():
    """Register ops for one test and remove them afterwards."""
    names = []

    def register(name, **declaration):
        names.append(name)
        return defop(name, **declaration)

    yield register
    for name in names:
        tape.unregister_op(name)


def leaf(shape, seed=0, dtype=np.float64):
    return tape.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype), requires_grad=True)


# -- tensors ---------------------------------------------------------------------------------------------------
def test_tensor_keeps_numpy_float_dtype_and_makes_float32_from_python_floats():
    assert tape.tensor(np.zeros(3)).dtype == np.float64
    assert tape.tensor(np.zeros(3, np.float32)).dtype == np.float32
    assert tape.tensor([1.0, 2.0]).dtype == np.float32
    assert tape.tensor([1, 2]).dtype.kind == "i"


def test_ops_keep_the_dtype_for_float32_and_float64():
    for dtype in (np.float32, np.float64):
        x = leaf((2, 3), dtype=dtype)
        y = (ops.tanh(x * 2.0 + 1) @ ops.transpose(x, 0, 1)).sum()
        y.backward()
        assert y.dtype == dtype and x.grad.dtype == dtype


def test_mixed_float_dtypes_are_refused_naming_the_op():
    a, b = leaf((2,), dtype=np.float32), leaf((2,), dtype=np.float64)
    with pytest.raises(TypeError, match="add.*float32.*float64|add.*share one dtype"):
        a + b


def test_requires_grad_on_an_integer_tensor_is_an_error():
    with pytest.raises(TypeError, match="requires_grad"):
        tape.tensor([1, 2, 3], requires_grad=True)


def test_tensor_arrays_are_read_only():
    x = tape.tensor(np.ones(3))
    with pytest.raises(ValueError):
        x.numpy()[0] = 5.0  # the array is read-only; writes go through the tensor (x[0] = 5.0, as torch)
    source = np.ones(3)
    tape.tensor(source)
    assert source.flags.writeable  # the user's own array is copied, never frozen


def test_repr_detach_numpy_and_array_protocol():
    x = leaf((2, 2))
    y = x * 2
    assert "grad_fn=mul" in repr(y) and "requires_grad=True" in repr(x)
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None
    np.testing.assert_array_equal(np.asarray(d), y.numpy())
    with pytest.raises(TypeError, match="requires grad, and numpy would silently drop its gradient"):
        np.asarray(y)  # a grad-requiring tensor's values are taken explicitly (.numpy(), .data, .detach())
    assert y.shape == (2, 2) and y.ndim == 2 and y.dtype == np.float64


def test_comparisons_are_not_differentiable():
    x = leaf((3,))
    mask = x > 0
    assert mask.dtype == np.bool_ and not mask.requires_grad


def test_logical_operators_on_bool_tensors_are_torchs(torch):
    rng = np.random.default_rng(0)
    a, b = rng.random((3, 4)) > 0.5, rng.random((4,)) > 0.5
    ta, tb = tape.tensor(a), tape.tensor(b)
    A, B = torch.tensor(a), torch.tensor(b)
    cases = {
        "~a": (~ta, ~A),
        "a & b": (ta & tb, A & B),
        "a | b": (ta | tb, A | B),
        "a ^ b": (ta ^ tb, A ^ B),
        "a & True": (ta & True, A & True),
        "False | a": (False | ta, False | A),
        "ndarray ^ a": (b ^ ta, torch.tensor(b) ^ A),
    }
    for what, (ours, theirs) in cases.items():
        assert ours.dtype == np.bool_, what
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=what)


def test_floor_division_remainder_and_unary_plus_operators_are_torchs(torch):
    rng = np.random.default_rng(1)
    a, b = rng.uniform(-5, 5, (3, 4)), rng.uniform(0.5, 3, (4,)) * rng.choice([-1, 1], 4)
    ta, tb = tape.tensor(a, requires_grad=True), tape.tensor(b)
    A, B = torch.tensor(a, requires_grad=True), torch.tensor(b)
    cases = {
        "a // b": (ta // tb, A // B),
        "a % b": (ta % tb, A % B),
        "a % 2.5": (ta % 2.5, A % 2.5),
        "-7.5 % a": (-7.5 % ta, -7.5 % A),
        "7 // b": (7 // tb, 7 // B),
        "+a": (+ta, +A),
    }
    for what, (ours, theirs) in cases.items():
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-12, err_msg=what)
    (ta % tb).sum().backward()
    (A % B).sum().backward()
    np.testing.assert_allclose(ta.grad.numpy(), A.grad.numpy())


@pytest.mark.parametrize("expression", ["~i", "i & m", "m | i", "i ^ 1", "i << 2", "5 >> i", "m & m", "~m"])
def test_bitwise_operators_are_torchs_on_integers_and_logical_on_bools(torch, expression):
    """~ & | ^ are logical on two bools and bitwise otherwise, << >> shift (torch's operators, dtypes included)."""
    data = {"i": np.array([1, -2, 3]), "m": np.array([True, False, True])}
    ours = eval(expression, {k: tape.tensor(v) for k, v in data.items()})
    theirs = eval(expression, {k: torch.tensor(v) for k, v in data.items()}).numpy()
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours.numpy(), theirs)


@pytest.mark.parametrize("expression,op", [("f & m", "bitwise_and"), ("m & 1.5", "bitwise_and"), ("~f", "bitwise_not"),
                                           ("f << 1", "bitwise_left_shift"), ("f | i", "bitwise_or")])
def test_bitwise_operators_refuse_floating_operands_naming_the_op(expression, op):
    i, f, m = tape.tensor(np.array([1, 2, 3])), tape.tensor(np.ones(3)), tape.tensor(np.array([True, False, True]))
    with pytest.raises(TypeError, match=rf"^{op}: argument '\w+' expected an integer or bool tensor, got dtype float"):
        eval(expression, {"i": i, "f": f, "m": m})


# -- reverse pass --------------------------------------------------------------------------------------------
def test_diamond_graph_accumulates_both_paths():
    x = leaf((3,))
    a = ops.exp(x)
    loss = (a * 2 + ops.tanh(a)).sum()  # a feeds two branches
    loss.backward()
    ea = np.exp(x.numpy())
    np.testing.assert_allclose(x.grad.numpy(), ea * (2 + 1 - np.tanh(ea) ** 2))


def test_shared_input_used_twice_by_one_op():
    x = leaf((4,))
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.numpy())


def test_broadcasting_gradients_sum_back_to_each_shape():
    a, b = leaf((2, 1, 3)), leaf((4, 1), seed=1)
    (a * b).sum().backward()
    np.testing.assert_allclose(a.grad.data, np.broadcast_to(b.numpy().sum(), (2, 1, 3)))
    np.testing.assert_allclose(b.grad.data, np.full((4, 1), a.numpy().sum()))


def test_gradients_accumulate_across_backward_calls_like_torch():
    x = leaf((3,))
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 6.0))


def test_matches_torch_on_a_composite_function(torch):
    rng = np.random.default_rng(3)
    w0, x0 = rng.standard_normal((4, 3)), rng.standard_normal((5, 4))
    w, x = tape.tensor(w0, requires_grad=True), tape.tensor(x0, requires_grad=True)
    loss = (ops.tanh(x @ w) ** 2).mean() + ops.exp(w * 0.1).sum()
    loss.backward()
    tw, tx = torch.tensor(w0, requires_grad=True), torch.tensor(x0, requires_grad=True)
    tloss = (torch.tanh(tx @ tw) ** 2).mean() + torch.exp(tw * 0.1).sum()
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)


def test_backward_on_a_non_scalar_needs_a_gradient():
    y = leaf((2, 3)) * 2
    with pytest.raises(RuntimeError, match=r"shape \(2, 3\)"):
        y.backward()
    y.backward(np.ones((2, 3)))


def test_backward_with_a_wrong_gradient_shape_is_an_error():
    y = leaf((2, 3)) * 2
    with pytest.raises(ValueError, match="shape"):
        y.backward(np.ones((3, 2)))


def test_backward_on_a_tensor_without_graph_is_an_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        tape.tensor(np.ones(2)).sum().backward()


def test_second_backward_through_freed_graph_raises_unless_retained():
    x = leaf((3,))
    y = ops.exp(x).sum()
    y.backward(retain_graph=True)
    y.backward()  # the retained graph can be used once more
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(x.numpy()))
    with pytest.raises(tape.GraphFreedError, match="retain_graph=True"):
        y.backward()


def test_saved_values_are_released_after_backward():
    x = leaf((3,))
    y = ops.exp(x)
    z = y.sum()
    node = y.grad_fn
    assert node.residuals is not None
    z.backward()
    assert node.residuals is None and z.grad_fn.residuals is None


def test_no_grad_records_nothing_and_enable_grad_reenables():
    x = leaf((3,))
    with tape.no_grad():
        y = x * 2
        with tape.enable_grad():
            z = x * 2
    assert y.grad_fn is None and not y.requires_grad
    assert z.grad_fn is not None
    assert tape.is_grad_enabled()


def test_inplace_update_of_a_saved_leaf_makes_backward_raise():
    w = leaf((3,))
    loss = (w * w).sum()
    w.data = w.numpy() + 1  # e.g. an optimizer step between forward and backward
    with pytest.raises(tape.InPlaceModificationError, match=r"mul.*version 0 -> 1"):
        loss.backward()


# -- registry and rule validation ------------------------------------------------------------------------------
def test_registration_validates_rule_count_and_duplicates(throwaway_ops):
    with pytest.raises(tape.RegistrationError, match="2 tensor inputs"):
        throwaway_ops("bad_count", family="test", inputs=("a", "b"), forward=np.add, vjps=(lambda g, ans, a, b: g,))
    throwaway_ops("once", family="test", inputs=("x",), forward=np.negative, vjps=(lambda g, ans, x: -g,))
    with pytest.raises(tape.RegistrationError, match="already registered"):
        defop("once", family="test", inputs=("x",), forward=np.negative, vjps=(lambda g, ans, x: -g,))
    with pytest.raises(tape.RegistrationError, match="NOT_DIFFERENTIABLE or Grad.STUB"):
        throwaway_ops("bad_marker", family="test", inputs=("x",), forward=np.negative, vjps=(None,))


def test_a_stub_backward_raises_when_reached_and_is_listed(throwaway_ops):
    half_stub = throwaway_ops("half_stub", family="test", inputs=("a", "b"), forward=lambda a, b: a * b,
                              vjps=(lambda g, ans, a, b: g * b, STUB))
    assert "half_stub" in tape.stubbed_backward_op_names()
    assert tape.stubbed_backward_op_names() == sorted(tape.stubbed_backward_op_names())
    a, b = leaf((2,)), leaf((2,), seed=1)
    with pytest.raises(tape.BackwardNotImplementedError, match=r"half_stub.*\['b'\].*python -m tape coverage"):
        half_stub(a, b).sum().backward()
    # the stubbed input does not need a gradient here: nothing is reached, nothing raises
    half_stub(a, b.detach()).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.numpy())


def test_the_library_has_no_stubs():
    assert tape.stubbed_backward_op_names() == []


def test_a_rule_returning_none_or_a_wrong_shape_or_dtype_raises_naming_op_and_input(throwaway_ops):
    returns_none = throwaway_ops("returns_none", family="test", inputs=("x",), forward=np.exp,
                                 vjps=(lambda g, ans, x: None,))
    wrong_shape = throwaway_ops("wrong_shape", family="test", inputs=("x",), forward=np.exp,
                                vjps=(lambda g, ans, x: g.sum(),))
    wrong_dtype = throwaway_ops("wrong_dtype", family="test", inputs=("x",), forward=np.exp,
                                vjps=(lambda g, ans, x: (g * ans).astype(np.float32),))
    x = leaf((3,))
    with pytest.raises(tape.GradientError, match="returns_none.*'x'.*None"):
        returns_none(x).sum().backward()
    with pytest.raises(tape.GradientError, match=r"wrong_shape.*'x'.*shape \(\)"):
        wrong_shape(x).sum().backward()
    with pytest.raises(tape.GradientError, match="wrong_dtype.*'x'.*float32"):
        wrong_dtype(x).sum().backward()


def test_not_differentiable_inputs_get_no_gradient(throwaway_ops):
    shift = throwaway_ops("shift_by_index", family="test", inputs=("x", "index"),
                          forward=lambda x, index: np.roll(x, int(index)),
                          vjps=(lambda g, ans, x, index: np.roll(g, -int(index)), NOT_DIFFERENTIABLE))
    x = leaf((4,))
    index = tape.tensor(np.array(1))
    y = shift(x, index)
    assert y.grad_fn.needs == [True, False]
    (y * tape.tensor(np.arange(4.0))).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.roll(np.arange(4.0), -1))


def test_user_ops_get_attributes_defaults_and_positional_attributes(throwaway_ops):
    scaled = throwaway_ops("scaled", family="test", inputs=("x",), forward=lambda x, alpha=2.0: x * alpha,
                           vjps=(lambda g, ans, x, alpha=2.0: g * alpha,),
                           samples=lambda rng: [Sample((rng.standard_normal(3),), {"alpha": 0.5})])
    x = leaf((3,))
    np.testing.assert_allclose(scaled(x).numpy(), 2 * x.numpy())
    np.testing.assert_allclose(scaled(x, 3.0).numpy(), 3 * x.numpy())
    with pytest.raises(TypeError, match="scaled: unknown argument.*'beta'"):
        scaled(x, beta=1.0)
    with pytest.raises(TypeError, match="scaled: got multiple values for argument 'alpha'"):
        scaled(x, 3.0, alpha=1.0)


# -- gradcheck -----------------------------------------------------------------------------------------------
def test_gradcheck_passes_a_right_backward_and_catches_a_wrong_one(throwaway_ops):
    wrong = throwaway_ops("wrong_sin", family="test", inputs=("x",), forward=np.sin,
                          vjps=(lambda g, ans, x: g * np.cos(x) * 1.01,))
    right = throwaway_ops("right_sin", family="test", inputs=("x",), forward=np.sin,
                          vjps=(lambda g, ans, x: g * np.cos(x),))
    x = leaf((2, 3))
    assert tape.gradcheck(right, [x])
    assert tape.gradcheck(right, [x], fast_mode=True)
    with pytest.raises(tape.GradcheckError, match=r"input 0: .* worst at position \(\d, \d\)"):
        tape.gradcheck(wrong, [x])
    with pytest.raises(tape.GradcheckError, match="direction"):
        tape.gradcheck(wrong, [x], fast_mode=True)
    assert tape.gradcheck(wrong, [x], raise_exception=False) is False


def test_gradcheck_refuses_float32_and_needs_a_differentiable_input():
    with pytest.raises(TypeError, match="float64"):
        tape.gradcheck(ops.exp, [leaf((2,), dtype=np.float32)])
    with pytest.raises(ValueError, match="requires_grad"):
        tape.gradcheck(ops.exp, [tape.tensor(np.ones(2))])


def test_gradcheck_passes_non_tensor_arguments_through():
    x = leaf((3, 4))
    assert tape.gradcheck(lambda t, dim: ops.sum(ops.exp(t), dim), [x, 1])


def test_a_grad_requiring_tensor_in_a_not_differentiable_slot_is_refused(throwaway_ops):
    scale_by = throwaway_ops("scale_by", family="test", inputs=("x", "factor"), forward=lambda x, factor: x * factor,
                             vjps=(lambda g, ans, x, f: g * f, NOT_DIFFERENTIABLE))
    x, factor = leaf((3,)), leaf((3,), seed=1)
    with pytest.raises(TypeError, match="scale_by: argument 'factor' requires grad.*detach"):
        scale_by(x, factor)
    scale_by(x, factor.detach()).sum().backward()  # detached: fine, and x still gets its gradient
    np.testing.assert_allclose(x.grad.numpy(), factor.numpy())


def test_a_not_differentiable_slot_is_refused_for_an_op_with_several_outputs(throwaway_ops):
    """The refusal above, for an op with several outputs (it raised AttributeError: the check read ``.dtype`` of
    the tuple of outputs)."""
    scale_two = throwaway_ops("scale_two", family="test", inputs=("x", "factor"), outputs=2,
                              forward=lambda x, factor: (x + factor, x - factor),
                              vjps=(lambda g, ans, x, f: sum(gi for gi in g if gi is not None), NOT_DIFFERENTIABLE))
    x, factor = leaf((3,)), leaf((3,), seed=1)
    with pytest.raises(TypeError, match="scale_two: argument 'factor' requires grad.*detach"):
        scale_two(x, factor)
    first, second = scale_two(x, factor.detach())
    (first.sum() + second.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), 2.0)


def test_an_exception_inside_a_rule_is_reported_with_the_op_and_input(throwaway_ops):
    broken = throwaway_ops("broken_rule", family="test", inputs=("x",), forward=np.exp,
                           vjps=(lambda g, ans, x: g @ np.ones((7, 7)),))
    with pytest.raises(tape.GradientError, match=r"broken_rule.*\['x'\].*ValueError"):
        broken(leaf((3,))).sum().backward()


# -- Tensor methods ------------------------------------------------------------------------------------------------
OP_METHODS = sorted(name for name, attr in vars(tape.Tensor).items() if isinstance(attr, _OpMethod))


def _value_and_gradients(out, leaves):
    """The output's arrays and, for a floating output, the leaves' gradients of sum(out * u) with a fixed u."""
    out = joined(out)
    grads = []
    if out.grad_fn is not None:
        out.backward(np.linspace(0.5, 1.5, out.numel()).reshape(out.shape))
        grads = [None if t is None or t.grad is None else t.grad.numpy() for t in leaves]  # None: an absent optional
    return out.numpy(), grads


@pytest.mark.parametrize("name", OP_METHODS)
def test_each_op_method_is_its_op_called_with_the_tensor_first(name):
    """The method and the op give the same values and gradients on every one of the op's samples."""
    op = tape.get_op(vars(tape.Tensor)[name].op_name)
    assert op.tensor_pos[0] == 0 and not op.sequence[0], f"{op.signature}: the tensor is not its first parameter"
    for sample in op_samples(op):
        via_method = sample_tensors(op, sample)
        first, *rest = via_method
        out = getattr(first, name)(**dict(zip(op.input_names[1:], rest)), **sample.attrs)
        via_op = sample_tensors(op, sample)
        expected = call(op, via_op, sample.attrs)
        assert type(out) is type(expected)  # the op's own result: torch's named (values, indices) where it has two
        assert (type(out) is ValuesIndices) == (op.result_type is ValuesIndices)
        value, grads = _value_and_gradients(out, flat_leaves(via_method))
        expected_value, expected_grads = _value_and_gradients(expected, flat_leaves(via_op))
        np.testing.assert_array_equal(value, expected_value, err_msg=f"{name} on {sample}")
        for g, e in zip(grads, expected_grads, strict=True):
            np.testing.assert_array_equal(g, e, err_msg=f"{name} on {sample}")


_RNG = np.random.default_rng(7)
X = _RNG.standard_normal((3, 4))
Y = _RNG.standard_normal((3, 4))
SQUARE = _RNG.standard_normal((3, 3)) + 3 * np.eye(3)
INDEX = np.array([[0, 2, 1, 0], [1, 0, 2, 2]])
ROWS = np.array([2, 0])
MASK = X > 0
TIES = np.array([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, -4.0, -4.0], [0.5, 0.5, 0.5, 0.5]])

# (method, self, positional arguments, keyword arguments): torch's Tensor method called the same way
TORCH_FORMS = [
    ("flip", X, (0,), {}), ("flip", X, (0, 1), {}), ("flip", X, ([1],), {}),
    ("roll", X, (1, 1), {}), ("roll", X, ((1, -1), (0, 1)), {}),
    ("tile", X, (2, 1), {}), ("tile", X, ((2,),), {}),
    ("split", X, (2, 1), {}), ("split", X, ([1, 3],), {"dim": 1}), ("chunk", X, (2,), {"dim": 1}),
    ("unbind", X, (1,), {}), ("unfold", X, (1, 2, 1), {}), ("narrow", X, (1, 1, 2), {}),
    ("repeat_interleave", X, (2,), {"dim": 0}), ("diagonal", X, (), {"offset": 1}), ("diag", X, (-1,), {}),
    ("tril", X, (), {}), ("triu", X, (1,), {}), ("expand", X[:1], (3, 4), {}), ("repeat", X, (1, 2), {}),
    ("topk", X, (2,), {}), ("topk", X, (2, 0, False), {}), ("sort", X, (), {"dim": 0, "descending": True}),
    ("argsort", X, (1,), {}), ("kthvalue", X, (2, 1), {}),
    ("cumsum", X, (1,), {}), ("cumprod", X, (0,), {}), ("cummax", X, (1,), {}), ("cummin", X, (0,), {}),
    ("logcumsumexp", X, (1,), {}),
    ("max", TIES, (), {}), ("max", TIES, (1,), {}), ("max", TIES, (), {"dim": 0, "keepdim": True}),
    ("max", X, (Y,), {}), ("min", TIES, (), {}), ("min", TIES, (1, True), {}), ("min", X, (Y,), {}),
    ("median", X, (), {}), ("median", X, (0,), {}), ("median", X, (), {"dim": 1, "keepdim": True}),
    ("amax", TIES, (1,), {}), ("amin", TIES, ((0, 1),), {}), ("prod", X, (1,), {}), ("logsumexp", X, (1,), {}),
    ("argmin", X, (0,), {}), ("norm", X, (), {"p": 1, "dim": 1}), ("count_nonzero", MASK, (1,), {}),
    ("any", MASK, (1,), {}), ("all", MASK, (), {}),
    ("gather", X, (1, INDEX), {}), ("scatter", X, (0, INDEX[:, :3], Y), {}), ("scatter", X, (0, INDEX, 2.5), {}),
    ("scatter", X, (0, INDEX), {"value": -1.0}), ("scatter_add", X, (0, INDEX, Y), {}),
    ("scatter_reduce", X, (0, INDEX, Y[:2], "amax"), {}), ("index_select", X, (0, ROWS), {}),
    ("index_add", X, (0, ROWS, Y[:2]), {}), ("index_put", X, ((ROWS, ROWS + 1), Y[0, :2]), {}),
    ("take_along_dim", X, (INDEX, 0), {}), ("masked_select", X, (MASK,), {}), ("masked_fill", X, (MASK, 0.5), {}),
    ("where", X, (MASK, Y), {}), ("nonzero", X, (), {}), ("nonzero", MASK, (), {"as_tuple": True}),
    ("pow", X, (2.0,), {}), ("maximum", X, (Y,), {}), ("lerp", X, (Y, 0.3), {}), ("atan2", X, (Y,), {}),
    ("div", X, (Y,), {"rounding_mode": "floor"}), ("isclose", X, (Y,), {}), ("clamp", X, (-0.5, 0.5), {}),
    ("round", X, (), {"decimals": 1}), ("nan_to_num", X, (), {}), ("neg", X, (), {}), ("square", X, (), {}),
    ("matmul", X, (Y.T,), {}), ("outer", X[0], (Y[0],), {}), ("dot", X[0], (Y[0],), {}),
    ("inverse", SQUARE, (), {}), ("det", SQUARE, (), {}), ("softmax", X, (0,), {}), ("hardshrink", X, (0.5,), {}),
    ("long", X, (), {}), ("bool", X, (), {}), ("double", X, (), {}),
]


def _flat(out):
    """An op's or torch's result as a flat list of tensors (tuples, named or not, spread out)."""
    return [t for item in out for t in _flat(item)] if isinstance(out, tuple | list) else [out]


@pytest.mark.parametrize("name, data, args, kwargs", TORCH_FORMS,
                         ids=[f"{n}{a}{k}".replace(" ", "")[:60] for n, _, a, k in TORCH_FORMS])
def test_tensor_methods_read_like_torchs(name, data, args, kwargs, torch):
    """Called as torch's method is, each gives torch's values, dtypes, structure and gradient."""
    x = tape.tensor(data, requires_grad=data.dtype.kind == "f")
    reference = torch.tensor(data, requires_grad=data.dtype.kind == "f")
    out = getattr(x, name)(*[tape.tensor(a) if isinstance(a, np.ndarray) else a for a in args], **kwargs)
    torch_args = [torch.tensor(a) if isinstance(a, np.ndarray) else
                  tuple(torch.tensor(i) for i in a) if name == "index_put" and isinstance(a, tuple) else a
                  for a in args]
    expected = getattr(reference, name)(*torch_args, **kwargs)
    assert isinstance(out, tuple) == isinstance(expected, tuple)
    if type(expected).__module__ == "torch.return_types":  # (values, indices): the same named fields
        assert out._fields == ("values", "indices")
        np.testing.assert_array_equal(out.indices.numpy(), expected.indices.numpy())
    ours_flat, theirs_flat = _flat(out), _flat(expected)
    assert len(ours_flat) == len(theirs_flat)
    for o, e in zip(ours_flat, theirs_flat):
        assert o.shape == tuple(e.shape) and o.dtype == np.dtype(str(e.dtype).replace("torch.", ""))
        np.testing.assert_allclose(o.numpy(), e.detach().numpy(), rtol=1e-12, atol=1e-12)
    floats = [(o, e) for o, e in zip(ours_flat, theirs_flat) if o.dtype.kind == "f"]
    if floats and x.requires_grad:
        u = [np.linspace(0.5, 1.5, o.numel()).reshape(o.shape) for o, _ in floats]
        sum(ops.sum(o * w) for (o, _), w in zip(floats, u)).backward()
        sum((e * torch.tensor(w)).sum() for (_, e), w in zip(floats, u)).backward()
        np.testing.assert_allclose(x.grad.numpy(), reference.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_second_order_through_a_composite_returning_an_input_as_one_of_its_outputs(throwaway_ops):
    """A composite may return an input itself as one output (no node of its own) beside computed ones: the gradient
    arriving at that output flows to the input in the second-order pass too (it was dropped when another output
    had a node: d/dx of sum(g0 * x + g1 * 3x^2) lost its g0 term)."""

    def forward(x):
        return x.copy(), 3.0 * x * x

    def vjp(g, ans, x):
        g0, g1 = g
        total = np.zeros_like(x)
        if g0 is not None:
            total = total + g0
        if g1 is not None:
            total = total + 6.0 * x * g1
        return total

    op = throwaway_ops(
        "passthrough_pair",
        family="test",
        inputs=("x",),
        forward=forward,
        vjps=(vjp,),
        outputs=2,
        composite=lambda x: (x, ops.mul(ops.mul(x, x), 3.0)),
    )
    x = leaf((3,))
    first, second = op(x)
    (first * first + second).sum().backward(create_graph=True)  # dL/dx = 2x + 6x
    grad = x.grad
    x.grad = None
    grad.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0 + 6.0), rtol=1e-12)


def test_a_wrong_dtype_rule_result_is_refused_under_create_graph_for_a_stubbed_second_order(throwaway_ops):
    """An op whose second order is a stub still validates its first-order values under create_graph: a rule returning
    float32 for a float64 input raises GradientError (it was cast silently to float64)."""
    op = throwaway_ops(
        "stub2_wrong_dtype",
        family="test",
        inputs=("x",),
        forward=lambda x: x * 2.0,
        vjps=(lambda g, ans, x: (g * 2.0).astype(np.float32),),
        second_order=STUB,
    )
    x = leaf((3,))
    with pytest.raises(tape.GradientError, match=r"stub2_wrong_dtype.*input 'x'.*float32"):
        op(x).sum().backward(create_graph=True)
