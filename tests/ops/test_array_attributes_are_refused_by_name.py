"""An array passed where an op takes a number, a string, a flag or a tuple of ints (its attributes) is refused with
an error naming the op and the argument -- never numpy's "truth value of an array is ambiguous" or a broadcast
error from inside the kernel, and never taken silently (addcmul's ``value`` was broadcast over the last axis where
torch refuses anything but a number). Every registered op, its first samples, each attribute in turn."""

import numpy as np
import pytest
from test_bad_input import _run, _samples, clear_error

from tape.registry import registered_ops

# torch.max(input, other) / torch.min(input, other): an array in dim's place is the elementwise overload's `other`
OVERLOADS = {("max", "dim"): "other", ("min", "dim"): "other"}


def _cases():
    for op in registered_ops():
        for index, sample in enumerate(_samples(op)[:3]):
            for name, value in sample.attrs.items():
                if value is not None and not isinstance(value, np.ndarray):
                    yield pytest.param(op, sample, name, id=f"{op.name}-{index}-{name}")


@pytest.mark.parametrize("op, sample, name", list(_cases()))
def test_an_array_attribute_is_refused_naming_the_op_and_the_argument(op, sample, name):
    for array in (np.ones(3), np.array([1.0, 2.0])):
        out, error = _run(op, list(sample.inputs), {**sample.attrs, name: array})
        assert error is not None, f"{op.name} took {array!r} for '{name}'"
        argument = OVERLOADS.get((op.name, name), name)
        assert clear_error(error, op.name, argument), f"{type(error).__name__}: {error}"
