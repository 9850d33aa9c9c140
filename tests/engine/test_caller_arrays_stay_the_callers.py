"""Reliability: what an op keeps is immutable to the caller, and the caller's arrays stay the caller's.

Refilling a reused index or lengths buffer before backward used to move the gradient silently;
``backward(grad=array)`` froze the caller's array (and let ``.grad`` share its memory).
"""

import numpy as np
import pytest

import ops
import tape


def test_backward_grad_array_is_neither_frozen_nor_shared():
    x = tape.tensor(np.ones((2, 2)), requires_grad=True, dtype=np.float64)
    seed = np.full((2, 2), 3.0)
    base = np.zeros(8)
    view = base[:4].reshape(2, 2)
    view[...] = 3.0
    (x * 1.0).backward(seed)
    assert seed.flags.writeable and base.flags.writeable and view.flags.writeable
    seed[...] = 100.0
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 2), 3.0))
    x.grad = None
    (x * 1.0).backward(view)
    view[...] = -1.0
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 2), 3.0))


def test_numpy_of_any_tensor_cannot_change_what_an_op_saved():
    x = tape.tensor(np.array([1.0, 2.0]), requires_grad=True, dtype=np.float64)
    y = x * x
    for array in (x.numpy(), x.numpy(), y.numpy(), y.detach().numpy()):
        with pytest.raises(ValueError):
            array[0] = 0.0
        with pytest.raises(ValueError):
            array.setflags(write=True)
        array.shape = (1, 2)  # reshaping the exposed view in place cannot reach the saved array
        array.strides = (0, 0)
    assert x.shape == y.shape == (2,) and x.numpy().strides == (8,)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])


def test_an_index_buffer_refilled_after_the_forward_does_not_move_the_gradient():
    x = tape.tensor(np.arange(4.0), requires_grad=True, dtype=np.float64)
    index = np.array([0, 0, 3])
    y = x[index]
    index[:] = 1  # the caller reuses its buffer
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0, 0.0, 1.0])


def test_an_index_tensor_reassigned_before_backward_raises():
    x = tape.tensor(np.arange(4.0), requires_grad=True, dtype=np.float64)
    index = tape.tensor(np.array([[0, 0, 3]]))
    y = ops.gather(x.reshape(1, 4), 1, index)
    index.data = np.array([[1, 1, 1]])
    with pytest.raises(tape.InPlaceModificationError, match="gather.*index"):
        y.sum().backward()


def test_key_padding_lengths_refilled_after_the_forward_do_not_move_the_gradient():
    rng = np.random.default_rng(0)
    q, k, v = (tape.tensor(rng.standard_normal((2, 1, 3, 4)), requires_grad=True, dtype=np.float64)
               for _ in range(3))
    lengths = np.array([2, 3])
    out = ops.scaled_dot_product_attention(q, k, v, key_padding_lengths=lengths)
    expected_k = tape.tensor(k.numpy(), requires_grad=True, dtype=np.float64)
    ops.scaled_dot_product_attention(q.detach(), expected_k, v.detach(), key_padding_lengths=np.array([2, 3])
                                     ).sum().backward()
    lengths[:] = 1
    out.sum().backward()
    np.testing.assert_allclose(k.grad.numpy(), expected_k.grad.numpy(), rtol=1e-12)


def test_an_attribute_that_requires_grad_is_refused():
    x = tape.tensor(np.ones(3), requires_grad=True, dtype=np.float64)
    with pytest.raises(TypeError, match="attribute"):
        ops.sum(x, dim=tape.tensor(np.array(0.5), requires_grad=True))


@pytest.mark.parametrize("value,error,match", [
    ("grad", TypeError, "Tensor"), (np.ones(3), TypeError, "Tensor"),
    (tape.tensor(np.ones(2), dtype=np.float64), ValueError, "shape"),
    (tape.tensor(np.ones(3), dtype=np.float32), TypeError, "dtype")])
def test_assigning_grad_is_validated(value, error, match):
    p = tape.tensor(np.ones(3), requires_grad=True, dtype=np.float64)
    with pytest.raises(error, match=match):
        p.grad = value


def test_assigning_data_never_casts_an_array():
    p = tape.tensor(np.ones(3), dtype=np.float32)
    with pytest.raises(TypeError, match="dtype float32"):
        p.data = np.zeros(3)  # float64: refused, not cast
    p.data = [1.0, 2.0, 3.0]  # Python values take the tensor's dtype, as in tensor()
    assert p.dtype == np.float32
