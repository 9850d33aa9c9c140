"""Reliability: copies and pickles of tensors are new leaves -- own identity, own version, read-only arrays.

A deep copy used to be writable (in-place writes changed recorded values with no error) and kept the
original's id (an EMA teacher's gradients leaked into the student's through GradientTape).
"""

import copy
import pickle

import numpy as np
import pytest

import ops
import tape


@pytest.mark.parametrize("make", [copy.copy, copy.deepcopy, lambda t: pickle.loads(pickle.dumps(t))],
                         ids=["copy", "deepcopy", "pickle"])
def test_copies_are_new_read_only_leaves(make):
    x = tape.tensor(np.arange(3.0), requires_grad=True, dtype=np.float64, name="w")
    y = make(x)
    assert y.id != x.id and y.requires_grad and y.name == "w" and y.is_leaf
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    with pytest.raises(ValueError):
        y.numpy()[0] = 5.0
    with pytest.raises(ValueError):
        y.numpy().setflags(write=True)
    z = ops.mul(x, 2.0)
    y.data = np.ones(3)  # the copy's version moves; the original's recorded op is unaffected
    z.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_gradients_of_a_deep_copy_never_land_on_the_original_through_a_gradient_tape():
    student = tape.tensor(np.ones(3), requires_grad=True, dtype=np.float64)
    teacher = copy.deepcopy(student)
    with tape.GradientTape() as t:
        loss = (ops.mul(student, 3.0) + ops.mul(teacher, 5.0)).sum()
    g_student, g_teacher = t.compute_gradients(loss, [student, teacher])
    np.testing.assert_array_equal(g_student.numpy(), [3.0] * 3)
    np.testing.assert_array_equal(g_teacher.numpy(), [5.0] * 3)


def test_copying_a_computed_tensor_asks_for_detach():
    x = tape.tensor(np.ones(2), requires_grad=True, dtype=np.float64)
    y = x * 2
    for make in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(RuntimeError, match="detach"):
            make(y)
    assert copy.deepcopy(y.detach()).id != y.id


def test_a_pickle_names_tape_tensors_unpickle_so_pickles_of_every_version_load():
    """Tensor's pickling sits on its base class TensorAPI (tape/tensor_api.py), but a pickle still names
    ``tape.tensors._unpickle``, as pickles made before the split do: both load, and they are the same bytes."""
    x = tape.tensor(np.arange(3.0), requires_grad=True, name="w")
    data = pickle.dumps(x, protocol=4)
    assert b"tape.tensors" in data and b"_unpickle" in data and b"tensor_api" not in data
    y = pickle.loads(data)
    assert y is not x and y.id != x.id and y.name == "w" and y.requires_grad and not y.numpy().flags.writeable
    np.testing.assert_array_equal(y.numpy(), np.arange(3.0))
