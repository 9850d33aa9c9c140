"""In place, as torch (issue #31): every in-place method is its out-of-place op written into the tensor.

Generated from the registry: for every ``name_`` of ops/_inplace.py ``INPLACE`` and every sample of its op that keeps
the first input's shape, ``y.name_(...)`` on a non-leaf ``y`` returns ``y`` itself, holds exactly the out-of-place
op's values, and gives every leaf exactly the out-of-place op's gradient (float64 and float32). The out-of-place ops
are checked against torch by tests/ops/test_generated.py; what an in-place method adds of its own (identity, versions,
the errors torch raises, views, ``copy_``/``fill_``/``zero_``/``x[idx] = v``) is checked against torch directly below
and in tests/engine/test_inplace_engine.py.
"""

import numpy as np
import pytest
from oracle import LazyTorch

import ops
import tape
from ops._inplace import INPLACE
from tape.registry import get_op
from tape.tensor_api import _OpMethod
from tape.tensors import Tensor
from tape.tools.verify import op_samples, sample_tensors

torch = LazyTorch()  # torch imported at first use: the module collects without torch


def _op_of(name):
    method = Tensor.__dict__.get(name)
    return method.op if isinstance(method, _OpMethod) else get_op(name)


def _cases():
    cases = []
    for name in INPLACE:
        op = _op_of(name)
        for i, sample in enumerate(op_samples(op)):
            first = sample.inputs[0]
            if first is None or isinstance(first, list | tuple) or not _keeps_shape(op, sample):
                continue  # torch's in-place form refuses what changes the shape (and so does ours: below)
            cases.append(pytest.param(name, op, sample, id=f"{name}_-{i}"))
    return cases


def _keeps_shape(op, sample) -> bool:
    tensors = sample_tensors(op, sample)
    try:
        out = op(**dict(zip(op.input_names, tensors)), **sample.attrs)
    except Exception:  # noqa: BLE001 -- the sample's refusals are the generated suite's business
        return False
    return not isinstance(out, tuple) and out.shape == tensors[0].shape


CASES = _cases()


def _clone(t):
    return ops.clone(t) if t.dtype.kind == "f" else tape.tensor(t.numpy())


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("name,op,sample", CASES)
def test_inplace_method_equals_its_op_in_values_gradients_and_identity(name, op, sample, dtype):
    tensors = sample_tensors(op, sample, dtype)
    kwargs = dict(zip(op.input_names[1:], tensors[1:]))
    expected = op(**dict(zip(op.input_names, tensors)), **sample.attrs)
    y = _clone(tensors[0])
    version = y._version
    if not np.can_cast(expected.dtype, y.dtype, "same_kind"):
        with pytest.raises(RuntimeError, match="can't be cast"):
            getattr(y, f"{name}_")(**kwargs, **sample.attrs)
        return
    result = getattr(y, f"{name}_")(**kwargs, **sample.attrs)
    assert result is y and y._version > version
    np.testing.assert_array_equal(y.numpy(), expected.numpy().astype(y.dtype), err_msg=name)
    leaves = [t for t in tensors if isinstance(t, Tensor) and t.requires_grad]
    if not leaves or expected.dtype != y.dtype or y.grad_fn is None:
        return
    w = np.random.default_rng(1).standard_normal(y.shape).astype(dtype)
    ours = tape.gradients((y * w).sum(), leaves, allow_unused=True)
    theirs = tape.gradients((expected * w).sum(), leaves, allow_unused=True)
    for a, b in zip(ours, theirs):
        if b is None:
            assert a is None or not np.any(a.numpy())
        else:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12 if dtype == np.float64 else 1e-5, atol=0)


def test_every_torch_inplace_method_of_our_ops_is_here():
    """The list cannot rot: each of torch's ``name_`` methods whose ``name`` is one of our Tensor methods (and keeps
    the shape) exists, and is ours."""
    shape_changing = {"squeeze", "unsqueeze", "transpose", "t", "swapaxes", "swapdims", "resize", "as_strided"}
    special = {"bernoulli"}  # torch's bernoulli_(p) draws; it is not bernoulli(self) in place (ops/_inplace._DRAWS)
    ours = {n for n in dir(Tensor) if not n.startswith("_") and not n.endswith("_")}
    missing = [
        f"{n}_"
        for n in ours - shape_changing - special
        if hasattr(torch.Tensor, f"{n}_") and not callable(getattr(Tensor, f"{n}_", None))
    ]
    assert not missing, missing


# -- what an in-place method adds, against torch --------------------------------------------------------------------
def _pair(values, requires_grad=True):
    ours = tape.tensor(np.array(values, dtype=np.float64), requires_grad=requires_grad)
    theirs = torch.tensor(np.array(values, dtype=np.float64), requires_grad=requires_grad)
    return ours, theirs


PROGRAMS = {
    "add_ mul_ chain": lambda m, x, v: x.mul(2).add_(v).mul_(v),
    "augmented": lambda m, x, v: _aug(x * 1, v),
    "setitem slice": lambda m, x, v: _set(x * 1, (slice(1, 3),), v[:2]),
    "setitem int": lambda m, x, v: _set(x * 1, (0,), v[3]),
    "setitem mask": lambda m, x, v: _set(x * 1, (m.tensor([True, False, True, False]),), v[:2]),
    "setitem array": lambda m, x, v: _set(x * 1, (m.tensor([3, 0]),), v[1:3]),
    "setitem on a zeros buffer": lambda m, x, v: _set(m.zeros(4, dtype=x.dtype), (slice(None, 2),), x[2:] * v[:2]),
    "copy_": lambda m, x, v: (x * 1).copy_(v * 3),
    "copy_ broadcast": lambda m, x, v: (x * 1).copy_(v[1] * 3),
    "fill_ tensor": lambda m, x, v: (x * 1).fill_(v.sum()) * x,
    "zero_": lambda m, x, v: (x * 1).zero_() + v,
    "clamp_": lambda m, x, v: (x * 3).clamp_(-1.0, 1.0) * v,
    "masked_fill_": lambda m, x, v: (x * 1).masked_fill_(m.tensor([True, False, False, True]), 2.0) * v,
    "sub_ then exp_": lambda m, x, v: (x * 1).sub_(v).exp_(),
    "normal_ keeps a zero gradient": lambda m, x, v: (x * 1).normal_() * 0 + x * v,
    "index_add_": lambda m, x, v: (x * 1).index_add_(0, m.tensor([0, 0, 2]), v[:3]),
    "scatter_add_": lambda m, x, v: (x * 1).scatter_add_(0, m.tensor([1, 1, 3]), v[1:]),
}


def _aug(y, v):
    y += v
    y *= v
    y -= 1.0
    y /= 2.0
    return y


def _set(y, index, value):
    y[index] = value
    return y


@pytest.mark.parametrize("program", list(PROGRAMS), ids=list(PROGRAMS))
def test_inplace_programs_match_torch_in_values_and_gradients(program):
    fn = PROGRAMS[program]
    rng = np.random.default_rng(3)
    xv, vv = rng.standard_normal(4), rng.standard_normal(4)
    x, tx = _pair(xv)
    v, tv = _pair(vv)
    out = fn(tape, x, v)
    expected = fn(torch, tx, tv)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-13, atol=1e-15)
    w = rng.standard_normal(4)
    (out * tape.tensor(w)).sum().backward()
    (expected * torch.tensor(w)).sum().backward()
    for ours, theirs in ((x, tx), (v, tv)):
        if theirs.grad is None:
            assert ours.grad is None or not np.any(ours.grad.numpy())
        else:
            np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_random_fills_keep_identity_draw_from_the_generator_and_cut_the_history():
    g1, g2 = tape.Generator(5), tape.Generator(5)
    a = tape.zeros(1000, dtype=np.float64)
    assert a.normal_(2.0, 0.5, generator=g1) is a
    np.testing.assert_array_equal(a.numpy(), tape.zeros(1000, dtype=np.float64).normal_(2.0, 0.5, generator=g2).numpy())
    assert abs(a.numpy().mean() - 2.0) < 0.1 and abs(a.numpy().std() - 0.5) < 0.05
    u = tape.zeros(1000).uniform_(-1, 3)
    assert u.dtype == np.float32 and u.numpy().min() >= -1 and u.numpy().max() < 3
    b = tape.zeros(1000).bernoulli_(0.25)
    assert set(np.unique(b.numpy())) <= {0.0, 1.0} and 0.15 < b.numpy().mean() < 0.35
    x = tape.tensor(np.ones(3), requires_grad=True)
    y = x * 2
    y.normal_()
    y.sum().backward()  # its values no longer depend on x: a zero gradient, as torch's
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(3))


def test_a_shape_changing_result_is_refused():
    with pytest.raises(RuntimeError, match="does not fit"):
        tape.ones(3).add_(tape.ones(2, 3))


def test_torch_refusals_are_ours():
    x = tape.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Tensor that requires grad"):
        x.add_(1.0)
    with pytest.raises(RuntimeError, match="leaf Tensor that requires grad"):
        x += 1.0
    with pytest.raises(RuntimeError, match="leaf Tensor that requires grad"):
        x[0] = 2.0
    with tape.no_grad():
        x.add_(1.0)  # how optimizers update
    np.testing.assert_array_equal(x.numpy(), [2.0, 2.0, 2.0])
    with pytest.raises(RuntimeError, match="single memory location"):
        tape.ones(3).expand(2, 3).add_(1.0)
    with pytest.raises(RuntimeError, match="can't be cast"):
        tape.tensor(np.arange(3)).mul_(0.5)
    with pytest.raises(RuntimeError, match="does not fit"):
        tape.ones(3).add_(tape.ones(2, 3))
    i8 = tape.tensor(np.zeros(3, np.int8))
    with pytest.raises(RuntimeError, match="int8 without overflow"):
        i8[0] = 300
    with pytest.raises(ValueError, match="setitem.*twice"):
        tape.zeros(3)[tape.tensor([0, 0])] = tape.tensor(np.array([1.0, 2.0], np.float32))
