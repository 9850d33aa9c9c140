"""Gradients summed in the reverse pass stay arrays (issue #19 item 5): two 0-d gradients sum to a numpy scalar,
which rules branching on ``isinstance(g, np.ndarray)`` (getitem, sum, cast, pad ...) took for a Tensor."""

import numpy as np
import pytest

import ops
import tape


@pytest.mark.parametrize("shape", [(2,), (2, 3), (2, 3, 2)])
@pytest.mark.parametrize("create_graph", [False, True])
def test_an_output_used_twice_at_every_rank(shape, create_graph):
    data = np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape) / 4
    x = tape.tensor(data, requires_grad=True)
    y = x[(0,) * (len(shape) - 1)]  # rank len(shape) - 1, down to 0-d for shape (2,)... and a 0-d pick below
    z = y[0] if y.ndim else y
    loss = ops.sum(z * z) + ops.sum(ops.sum(y) * ops.sum(y))
    loss.backward(create_graph=create_graph)
    expected = np.zeros(shape)
    picked = data[(0,) * (len(shape) - 1)]
    expected[(0,) * (len(shape) - 1)] += 2 * picked.sum()
    expected[(0,) * len(shape)] += 2 * picked.flat[0]
    assert isinstance(x.grad.numpy(), np.ndarray)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)
    assert x.grad.shape == shape


def test_issue_19_item_5():
    x = tape.tensor(np.array([1.5, 2.0]), requires_grad=True)
    y = x[0]
    (y * y).backward()
    assert np.array_equal(x.grad.numpy(), np.array([3.0, 0.0]))


def test_zero_d_sums_through_sum_and_cast():
    x = tape.tensor(np.array(1.5), requires_grad=True)
    y = ops.sum(x)
    loss = ops.sum(y * y) + ops.sum(y)
    loss.backward()
    assert x.grad.numpy().shape == () and x.grad.item() == 4.0
