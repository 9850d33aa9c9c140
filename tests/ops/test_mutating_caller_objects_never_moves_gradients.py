"""Reliability property: after an op's forward, mutating every caller-side object passed to it (input arrays,
index and lengths buffers, mask arrays in attributes) never changes the gradient -- or raises.

Run over every registered op and its first samples: the gradient computed right after the forward is compared
with the one computed after every ndarray the caller handed over (inputs and attribute values, also inside
tuples and lists) has been overwritten.
"""

import numpy as np
import pytest

import tape
from tape.tools.verify import call, differentiable_positions, flat_leaves, joined, op_samples


def _arrays_in(value):
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _arrays_in(v)


def _copy(value):
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, list | tuple):
        return type(value)(_copy(v) for v in value)
    return value


def _cases():
    cases = []
    for op in tape.registered_ops():
        for i, sample in enumerate(op_samples(op)[:3]):
            if differentiable_positions(op, sample):
                cases.append(pytest.param(op, sample, id=f"{op.name}-{i}"))
    return cases


@pytest.mark.parametrize("op,sample", _cases())
def test_mutating_what_the_caller_passed_never_moves_a_gradient(op, sample):
    inputs = [_copy(a) for a in sample.inputs]
    attrs = {k: _copy(v) for k, v in sample.attrs.items()}
    diff = set(differentiable_positions(op, sample))
    tensors = [None if a is None else
               [tape.tensor(x, requires_grad=i in diff and np.asarray(x).dtype.kind == "f") for x in a]
               if isinstance(a, list) else
               tape.tensor(a, requires_grad=i in diff and np.asarray(a).dtype.kind == "f")
               for i, a in enumerate(inputs)]
    leaves = [t for t in flat_leaves(tensors) if t is not None and t.requires_grad]
    out = joined(call(op, tensors, attrs))
    if out.grad_fn is None:
        return
    seed = np.linspace(0.5, 1.5, out.numel()).reshape(out.shape).astype(out.dtype)
    before = tape.gradients(out, leaves, [seed], retain_graph=True, allow_unused=True)
    for array in [*_arrays_in(inputs), *_arrays_in(list(attrs.values()))]:
        if array.flags.writeable and array.size:
            array[...] = np.ones_like(array) if array.dtype.kind == "b" else array.dtype.type(1)
    try:
        after = tape.gradients(out, leaves, [seed], allow_unused=True)
    except tape.InPlaceModificationError:
        return  # raising is allowed
    for b, a in zip(before, after):
        if b is None:
            assert a is None
        else:
            message = f"{op.name}: a caller-side mutation moved a gradient"
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=message)
