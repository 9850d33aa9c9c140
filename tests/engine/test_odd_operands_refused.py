"""Reliability: odd operands are refused at the op boundary; scalars keep their exact value.

Complex operands used to lose their imaginary part, ``"2.5"`` was parsed, and the scalar-constant cache
returned ``+0.0`` for ``-0.0``.
"""

import numpy as np
import pytest

import ops
import tape


@pytest.mark.parametrize("operand,error", [
    (1 + 2j, TypeError), (np.array([1 + 1j, 2]), TypeError), ("2.5", TypeError), (b"2", TypeError),
    (object(), TypeError), ([[1.0, 2.0], [3.0]], TypeError), (2**70, ValueError), (-(2**64), ValueError),
    (np.array(["a"]), TypeError), (np.array([np.datetime64("2020-01-01")]), TypeError)])
def test_odd_operands_are_refused_naming_the_op_and_argument(operand, error):
    x = tape.tensor(np.ones(1), dtype=np.float64)
    with pytest.raises(error, match=r"mul: argument 'b'"):
        ops.mul(x, operand)


@pytest.mark.parametrize("data", [1 + 2j, "2.5", [[1.0], [2.0, 3.0]], 2**70, object()])
def test_tensor_construction_refuses_what_minitape_cannot_compute(data):
    with pytest.raises(TypeError):
        tape.tensor(data)


def test_negative_zero_scalars_keep_their_sign():
    x = tape.tensor(np.array([1.0, -2.0]), dtype=np.float64)
    assert np.signbit((x * 0.0).numpy()).tolist() == [False, True]
    assert np.signbit((x * -0.0).numpy()).tolist() == [True, False]
    assert np.signbit((x * 0.0).numpy()).tolist() == [False, True]  # and the cache did not swap them back


def test_int64_bounds_are_accepted():
    x = tape.tensor(np.array([1], dtype=np.int64))
    assert (x + (2**63 - 1) - 1).numpy().tolist() == [2**63 - 1]


@pytest.mark.parametrize("flag", ["no", 0, 1, None, [True]])
def test_requires_grad_takes_a_bool_only(flag):
    """requires_grad='no' was read as True (bool('no')), silently making a leaf that collects gradients."""
    with pytest.raises(TypeError, match=r"Tensor: argument 'requires_grad' expected a bool"):
        tape.tensor(np.ones(3), requires_grad=flag)
    t = tape.tensor(np.ones(3))
    with pytest.raises(TypeError, match=r"Tensor: argument 'requires_grad' expected a bool"):
        t.requires_grad = flag
    assert t.requires_grad is False and tape.tensor(np.ones(3), requires_grad=np.bool_(True)).requires_grad is True
