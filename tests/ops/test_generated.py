"""Tests generated from the op registry at collection time: nobody keeps a list of ops.

Every registered op x every one of its samples gets: a forward that keeps the float dtype (float64 and
float32), a float64 finite-difference gradcheck, and -- where the op declares a ``torch_ref`` -- parity
with PyTorch in float64 (rtol 1e-7) and float32 (rtol 1e-4). Where the op's second order is a rule (not
a declared stub), its create_graph backward gets a float64 gradgradcheck and, where torch double-differentiates
the op, Hessian-vector-product parity with torch; where it is a stub, reaching it raises naming the op.
Registry-wide tests check that each op's declaration is complete. Test ids read "<op>-<sample index>-<label>".

PyTorch is a test dependency: without it the parity tests FAIL, unless MINITAPE_ALLOW_NO_TORCH=1 is set
(then they are skipped) -- a skipped oracle is not a passing oracle.
"""

import re

import numpy as np
import pytest
from oracle import require_torch

import tape
from tape.registry import Grad
from tape.tools.verify import (
    call,
    differentiable_positions,
    flat_leaves,
    joined,
    op_samples,
    run_gradcheck,
    run_gradgradcheck,
    run_torch_hvp_parity,
    run_torch_parity,
    sample_tensors,
)

OPS = tape.registered_ops()  # the library's ops, as registered when this module is collected


def _label(sample) -> str:
    if sample.label:
        return re.sub(r"\s+", " ", sample.label.strip())
    return ",".join("None" if a is None else f"{np.asarray(a).dtype.name}{list(np.shape(a))}".replace(" ", "")
                    for a in sample.inputs)


def _cases(keep):
    """pytest params (op, sample) for every op x sample that ``keep(op, sample)`` accepts."""
    cases = []
    for op in OPS:
        try:
            samples = op_samples(op)
        except Exception as e:  # a broken generator must fail a test, not collection
            cases.append(pytest.param(op, e, id=f"{op.name}-samples-raised"))
            continue
        for i, sample in enumerate(samples):
            if keep(op, sample):
                cases.append(pytest.param(op, sample, id=f"{op.name}-{i}-{_label(sample)}"))
    return cases


def _sample(sample):
    if isinstance(sample, Exception):
        raise AssertionError(f"the op's sample generator raised {type(sample).__name__}: {sample}")
    return sample


ALL_SAMPLES = _cases(lambda op, s: True)
GRADCHECK_SAMPLES = _cases(lambda op, s: bool(differentiable_positions(op, s)))
TORCH_SAMPLES = _cases(lambda op, s: op.torch_ref is not None and s.torch)
ORDER2_SAMPLES = _cases(lambda op, s: op.second_order is Grad.RULE and bool(differentiable_positions(op, s)))
ORDER2_TORCH_SAMPLES = _cases(lambda op, s: op.second_order is Grad.RULE and op.torch_ref is not None and s.torch
                              and bool(differentiable_positions(op, s)))
ORDER2_STUB_SAMPLES = _cases(lambda op, s: op.second_order is Grad.STUB and bool(differentiable_positions(op, s)))
if not ORDER2_STUB_SAMPLES:  # the library has none: the mechanism is still checked, on a throwaway stub
    ORDER2_STUB_SAMPLES = [pytest.param(None, None, id="throwaway-stub")]


# -- per op x sample ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("op,sample", ALL_SAMPLES)
def test_forward_keeps_float_dtype(op, sample, dtype):
    sample = _sample(sample)
    inputs = sample_tensors(op, sample, dtype)
    out = joined(call(op, inputs, sample.attrs))
    if "dtype" in sample.attrs:  # an explicit conversion (cast): the output has the dtype asked for
        assert out.dtype == np.dtype(sample.attrs["dtype"])
    elif out.dtype.kind == "f" and any(t is not None and t.dtype.kind == "f" for t in flat_leaves(inputs)):
        assert out.dtype == dtype, f"{op.name}: {np.dtype(dtype).name} inputs gave a {out.dtype} output"


@pytest.mark.parametrize("op,sample", GRADCHECK_SAMPLES)
def test_gradcheck(op, sample):
    result = run_gradcheck(op, _sample(sample))
    assert result.ok, f"{op.name} on {sample}:\n{result.message}"


@pytest.mark.parametrize("op,sample", ORDER2_SAMPLES)
def test_gradgradcheck(op, sample):
    result = run_gradgradcheck(op, _sample(sample))
    assert result.ok, f"{op.name} on {sample} (second order):\n{result.message}"


@pytest.mark.parametrize("op,sample", ORDER2_TORCH_SAMPLES)
def test_torch_hvp_parity(op, sample):
    sample = _sample(sample)
    require_torch()
    result = run_torch_hvp_parity(op, sample)
    if result is None:
        return  # torch's first derivative is constant here, or torch has no double backward: nothing to compare
    assert result.ok, f"{op.name} on {sample} (Hessian-vector product): {result.message}"


@pytest.mark.parametrize("op,sample", ORDER2_STUB_SAMPLES)
def test_second_order_stub_raises_naming_the_op_when_reached(op, sample):
    if op is None:
        from tape.registry import Sample

        op = tape.defop("throwaway_second_order_stub", family="test", inputs=("x",), forward=lambda x: x * x,
                        vjps=(lambda g, ans, x: g * 2 * x,), second_order=Grad.STUB, second_order_note="a test stub")
        try:
            return test_second_order_stub_raises_naming_the_op_when_reached(op, Sample((np.ones(3),)))
        finally:
            tape.unregister_op(op.name)
    sample = _sample(sample)
    tensors = sample_tensors(op, sample)
    diff = [tensors[i] for i in differentiable_positions(op, sample)]
    out = joined(call(op, tensors, sample.attrs))
    u = tape.tensor(np.ones(out.shape), requires_grad=True)
    first = tape.gradients(out, diff, [u], create_graph=True, allow_unused=True)
    total = sum((g * 1.0).sum() for g in first if g is not None)
    with pytest.raises(tape.BackwardNotImplementedError, match=f"op '{op.name}' has no second-order backward"):
        tape.gradients(total, diff + [u], allow_unused=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("op,sample", TORCH_SAMPLES)
def test_torch_parity(op, sample, dtype):
    sample = _sample(sample)
    require_torch()
    result = run_torch_parity(op, sample, dtype)
    assert result is not None, f"{op.name}: the parity check did not run"
    assert result.ok, f"{op.name} on {sample} in {np.dtype(dtype).name}: {result.message}"


# -- per op ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_op_has_samples(op):
    assert op.samples is not None, f"{op.name}: declares no samples, so nothing checks it"
    assert len(op_samples(op)) > 0, f"{op.name}: its sample generator returned no samples"


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_one_backward_entry_per_tensor_input(op):
    n = len(op.input_names)
    assert len(op.input_states) == n and len(op.optional) == n
    assert all(isinstance(state, Grad) for state in op.input_states)
    if op.joint_vjp is None:
        assert len(op.vjps) == n
        for name, entry, state in zip(op.input_names, op.vjps, op.input_states):
            assert entry is state if isinstance(entry, Grad) else (callable(entry) and state is Grad.RULE), (
                op.name, name, entry, state)


@pytest.mark.parametrize("op", [op for op in OPS if op.differentiable_inputs], ids=lambda op: op.name)
def test_differentiable_op_has_a_differentiable_sample(op):
    assert any(differentiable_positions(op, s) for s in op_samples(op)), (
        f"{op.name}: no sample gives a float array to any of its differentiable inputs "
        f"{op.differentiable_inputs}, so gradcheck never runs on it")


def test_no_library_op_has_a_stub_backward():
    import ops  # noqa: F401  -- the whole library is registered

    assert tape.stubbed_backward_op_names() == []


def test_the_registry_is_not_empty():
    assert len(ALL_SAMPLES) > 0 and len(GRADCHECK_SAMPLES) > 0 and len(TORCH_SAMPLES) > 0
