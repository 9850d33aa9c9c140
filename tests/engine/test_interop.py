"""Reliability: numpy functions on tensors run the registered ops, or refuse -- never drop a gradient.

``np.exp(x)`` used to return a plain array through ``__array__`` for a tensor that requires grad, and the
gradient through it vanished silently.
"""

import numpy as np
import pytest

import ops
import tape


def leaf(*shape):
    return tape.tensor(np.random.default_rng(0).uniform(0.5, 1.5, shape), requires_grad=True, dtype=np.float64)


@pytest.mark.parametrize("fn,op", [(np.exp, ops.exp), (np.log, ops.log), (np.tanh, ops.tanh), (np.sqrt, ops.sqrt),
                                   (np.negative, ops.neg), (np.square, ops.square), (np.sin, ops.sin)])
def test_numpy_ufuncs_dispatch_to_the_op_and_stay_differentiable(fn, op):
    x = leaf(3)
    y = fn(x)
    assert isinstance(y, tape.Tensor) and y.grad_fn is not None and y.grad_fn.op is op
    y.sum().backward()
    expected = leaf(3)
    op(expected).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), expected.grad.numpy())


def test_numpy_binary_ufuncs_and_reflected_arrays():
    x = leaf(2, 3)
    a = np.full((2, 3), 2.0)
    for y in (a * x, np.multiply(a, x), x * a, np.add(x, a), np.maximum(x, a), a @ x.T):
        assert isinstance(y, tape.Tensor) and y.grad_fn is not None


@pytest.mark.parametrize("call", [
    lambda x: np.sum(x, axis=1, keepdims=True), lambda x: np.mean(x, axis=0), lambda x: np.reshape(x, (3, 2)),
    lambda x: np.transpose(x), lambda x: np.swapaxes(x, 0, 1), lambda x: np.expand_dims(x, (0, 2)),
    lambda x: np.broadcast_to(x, (4, 2, 3)), lambda x: np.concatenate([x, x], axis=1), lambda x: np.stack([x, x]),
    lambda x: np.where(x.detach().numpy() > 1, x, 0.0), lambda x: np.einsum("ij,kj->ik", x, x),
    lambda x: np.clip(x, 0.8, 1.2), lambda x: np.max(x, axis=1), lambda x: np.moveaxis(x, 0, -1)])
def test_numpy_functions_dispatch_and_match_finite_differences(call):
    x = leaf(2, 3)
    y = call(x)
    assert isinstance(y, tape.Tensor) and y.grad_fn is not None
    tape.gradcheck(lambda t: call(t), [x])


@pytest.mark.parametrize("call", [lambda x: np.arctan(x) if not hasattr(ops, "atan") else np.cbrt(x),
                                  lambda x: np.add.reduce(x), lambda x: np.exp(x, out=np.empty(3)),
                                  lambda x: np.cumprod(x) if not hasattr(ops, "cumprod") else np.ptp(x),
                                  lambda x: np.asarray(x), lambda x: np.array(x), lambda x: np.fft.fft(x),
                                  lambda x: x.__array__()])
def test_numpy_without_an_op_refuses_a_tensor_that_requires_grad(call):
    with pytest.raises(TypeError, match="requires grad"):
        call(leaf(3))


def test_a_watched_tensor_counts_as_requiring_grad():
    x = tape.tensor(np.ones(3), dtype=np.float64)
    with tape.GradientTape() as t:
        t.watch(x)
        with pytest.raises(TypeError, match="requires grad"):
            np.asarray(x)
        y = np.exp(x).sum()
    np.testing.assert_allclose(t.compute_gradients(y, [x])[0].numpy(), np.e)


def test_constant_tensors_still_convert_and_compute():
    c = tape.tensor(np.arange(3.0))
    np.testing.assert_array_equal(np.asarray(c), [0.0, 1.0, 2.0])
    assert isinstance(np.exp(c), tape.Tensor)
    assert np.allclose(c, [0.0, 1.0, 2.0]) and np.shape(c) == (3,)
    np.testing.assert_array_equal(np.fft.fft(c).real, np.fft.fft(np.arange(3.0)).real)  # no op, no gradient: fine
