"""Checks of one op on one of its samples: finite-difference gradcheck and PyTorch parity.

The generated tests and the coverage matrix both call these, so the matrix's verdicts are exactly what
the tests assert. PyTorch is optional here: ``torch_available()`` says whether the oracle can run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import ops  # noqa: F401  -- the tools check the whole op library (tools sit above ops)

from ..autodiff import reverse_pass
from ..gradcheck import GradcheckError, gradcheck, gradgradcheck
from ..registry import Grad
from ..tensors import Tensor

__all__ = ["CheckResult", "op_samples", "sample_tensors", "call", "run_gradcheck", "run_gradgradcheck",
           "run_torch_parity", "run_torch_hvp_parity", "torch_available",
           "PARITY_TOLERANCE"]

PARITY_TOLERANCE = {np.dtype(np.float64): (1e-7, 1e-9), np.dtype(np.float32): (1e-4, 1e-5)}  # (rtol, atol)


@dataclass
class CheckResult:
    ok: bool
    error: float = 0.0  # worst absolute error seen
    message: str = ""


def op_samples(op, seed: int = 0) -> list:
    """The op's samples (float64), generated from a fixed seed."""
    if op.samples is None:
        return []
    return list(op.samples(np.random.default_rng(seed)))


def call(op, tensors, attrs):
    """Apply ``op`` the way users do: every argument by its parameter name in the op's public signature."""
    return op(**dict(zip(op.input_names, tensors)), **attrs)


def differentiable_positions(op, sample) -> list[int]:
    return [i for i, (a, state) in enumerate(zip(sample.inputs, op.input_states))
            if a is not None and state != Grad.NOT_DIFFERENTIABLE and np.asarray(a).dtype.kind == "f"]


def sample_tensors(op, sample, dtype=np.float64) -> list:
    """Leaf tensors for a sample; floating inputs in ``dtype``, requiring grad where the op can give one."""
    diff = set(differentiable_positions(op, sample))
    tensors = []
    for i, a in enumerate(sample.inputs):
        if a is None:
            tensors.append(None)
            continue
        a = np.asarray(a)
        if a.dtype.kind == "f":
            a = a.astype(dtype)
        tensors.append(Tensor(a, requires_grad=i in diff, dtype=a.dtype))
    return tensors


def run_gradcheck(op, sample) -> CheckResult:
    """Float64 finite differences on every differentiable input of the sample."""
    if not differentiable_positions(op, sample):
        return CheckResult(True, 0.0, "no differentiable input in this sample")
    tensors = sample_tensors(op, sample)
    options = dict(op.gradcheck_tolerance)
    if sum(np.asarray(a).size for a in sample.inputs if a is not None) > 2000:
        options.setdefault("fast_mode", True)
    try:
        gradcheck(lambda *xs: call(op, xs, sample.attrs), tensors, **options)
    except GradcheckError as e:
        return CheckResult(False, _worst_error(str(e)), str(e))
    except Exception as e:  # a stub, a rule returning None, a shape error: all are failures to report
        return CheckResult(False, float("inf"), f"{type(e).__name__}: {e}")
    return CheckResult(True)


def run_gradgradcheck(op, sample) -> CheckResult:
    """Float64 finite differences of the op's recorded (create_graph) backward, on every differentiable input."""
    if not differentiable_positions(op, sample):
        return CheckResult(True, 0.0, "no differentiable input in this sample")
    tensors = sample_tensors(op, sample)
    options = dict(op.gradcheck_tolerance)
    if sum(np.asarray(a).size for a in _flat(sample.inputs) if a is not None) > 500:
        options.setdefault("fast_mode", True)
    try:
        gradgradcheck(lambda *xs: call(op, xs, sample.attrs), tensors, **options)
    except GradcheckError as e:
        return CheckResult(False, _worst_error(str(e)), str(e))
    except Exception as e:  # a second-order stub, an untraceable rule: failures to report
        return CheckResult(False, float("inf"), f"{type(e).__name__}: {e}")
    return CheckResult(True)


def run_torch_hvp_parity(op, sample, seed: int = 0) -> CheckResult | None:
    """The op's double backward against torch's, in float64: for random u and v, d/dx <VJP(x, u), v> and
    d/du <VJP(x, u), v> must agree. None when torch has no reference (or no double backward) for it."""
    if op.torch_ref is None or not sample.torch or not torch_available():
        return None
    diff = differentiable_positions(op, sample)
    if not diff:
        return None
    torch = _torch
    from ..functional import gradients

    rng = np.random.default_rng(seed)
    tensors = sample_tensors(op, sample)
    try:
        out = call(op, tensors, sample.attrs)
    except Exception as e:
        return CheckResult(False, float("inf"), f"minitape forward raised {type(e).__name__}: {e}")
    if out.dtype.kind != "f":
        return None
    u_array = rng.standard_normal(out.shape)
    vs = [rng.standard_normal(tensors[i].shape) for i in diff]
    torch_inputs = [None if t is None else torch.tensor(np.array(t.data), requires_grad=i in diff)
                    for i, t in enumerate(tensors)]
    try:
        expected = op.torch_ref(torch, *torch_inputs, **sample.attrs)
        tu = torch.tensor(u_array, requires_grad=True)
        first = torch.autograd.grad(expected, [torch_inputs[i] for i in diff], tu, create_graph=True,
                                    allow_unused=True)
        inner = sum((g * torch.from_numpy(v)).sum() for g, v in zip(first, vs) if g is not None)
        if not isinstance(inner, torch.Tensor) or not inner.requires_grad:
            return None  # torch's first derivative is constant here: nothing to compare
        theirs = torch.autograd.grad(inner, [torch_inputs[i] for i in diff] + [tu], allow_unused=True)
    except RuntimeError:
        return None  # torch has no double backward for this op
    try:
        u = Tensor(u_array, requires_grad=True)
        ours_first = gradients(out, [tensors[i] for i in diff], [u], create_graph=True, allow_unused=True)
        inner_ours = None
        for g, v in zip(ours_first, vs):
            if g is not None:
                term = (g * v).sum()
                inner_ours = term if inner_ours is None else inner_ours + term
        if inner_ours is None or (inner_ours._node is None and not inner_ours.requires_grad):
            ours = [None] * (len(diff) + 1)
        else:
            ours = gradients(inner_ours, [tensors[i] for i in diff] + [u], allow_unused=True)
    except Exception as e:
        return CheckResult(False, float("inf"), f"minitape double backward raised {type(e).__name__}: {e}")
    rtol, atol = PARITY_TOLERANCE[np.dtype(np.float64)]
    worst, problems = 0.0, []
    names = [op.input_names[i] if i < len(op.input_names) else str(i) for i in diff] + ["cotangent"]
    shapes = [tensors[i].shape for i in diff] + [out.shape]
    for name, shape, g_ours, g_theirs in zip(names, shapes, ours, theirs):
        a = np.zeros(shape) if g_ours is None else g_ours.data
        b = np.zeros(shape) if g_theirs is None else g_theirs.detach().numpy(force=True)
        w, p = _compare(f"second-order grad of '{name}'", a, b, rtol * 10, atol * 10)
        worst, problems = max(worst, w), problems + p
    return CheckResult(not problems, worst, "; ".join(problems))


def _flat(values):
    for v in values:
        if isinstance(v, list | tuple):
            yield from v
        else:
            yield v


def _worst_error(message: str) -> float:
    import re

    errors = [float(x) for x in re.findall(r"error ([0-9.eE+-]+)", message)]
    return max(errors) if errors else float("inf")


_torch = None


def torch_available() -> bool:
    global _torch
    if _torch is None:
        try:
            import torch

            _torch = torch
        except ImportError:
            _torch = False
    return _torch is not False


def run_torch_parity(op, sample, dtype=np.float64, seed: int = 0) -> CheckResult | None:
    """Forward values and input gradients against ``op.torch_ref``; None when there is no oracle."""
    if op.torch_ref is None or not sample.torch or not torch_available():
        return None
    torch = _torch
    rtol, atol = PARITY_TOLERANCE[np.dtype(dtype)]
    tensors = sample_tensors(op, sample, dtype)
    diff = differentiable_positions(op, sample)
    try:
        out = call(op, tensors, sample.attrs)
    except Exception as e:
        return CheckResult(False, float("inf"), f"minitape forward raised {type(e).__name__}: {e}")
    torch_inputs = [None if t is None else torch.tensor(np.array(t.data), requires_grad=i in diff)
                    for i, t in enumerate(tensors)]
    expected = op.torch_ref(torch, *torch_inputs, **sample.attrs)
    worst, problems = _compare("output", out.data, expected.detach().numpy(), rtol, atol)
    if diff and out.dtype.kind == "f" and expected.requires_grad:
        u = np.random.default_rng(seed).standard_normal(out.shape).astype(out.dtype)
        sources = [tensors[i] for i in diff]
        ours = reverse_pass([out], [u], retain_graph=False, sources=sources) if out._node is not None else {}
        expected.backward(torch.from_numpy(u))
        for i in diff:
            g = ours.get(tensors[i].id)
            g = np.zeros(tensors[i].shape, dtype) if g is None else g
            theirs = torch_inputs[i].grad
            theirs = np.zeros_like(g) if theirs is None else theirs.numpy()
            w, p = _compare(f"grad of '{op.input_names[i]}'", g, theirs, rtol, atol)
            worst, problems = max(worst, w), problems + p
    return CheckResult(not problems, worst, "; ".join(problems))


def _compare(what: str, ours: np.ndarray, theirs: np.ndarray, rtol: float, atol: float):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    if ours.shape != theirs.shape:
        return float("inf"), [f"{what}: shape {ours.shape} vs torch {theirs.shape}"]
    if ours.dtype.kind != "f" or theirs.dtype.kind != "f":
        same = np.array_equal(ours, theirs)
        return (0.0 if same else float("inf")), ([] if same else [f"{what}: values differ from torch"])
    same_nonfinite = (np.isnan(ours) == np.isnan(theirs)).all() and (np.isinf(ours) == np.isinf(theirs)).all()
    finite = np.isfinite(ours) & np.isfinite(theirs)
    diff = np.abs(ours - theirs.astype(ours.dtype))[finite]
    scale = np.abs(theirs)[finite]
    worst = float(diff.max()) if diff.size else 0.0
    bad = diff > atol + rtol * scale
    problems = []
    if not same_nonfinite:
        problems.append(f"{what}: NaN/inf pattern differs from torch")
    if bad.any():
        k = int(np.argmax(diff - (atol + rtol * scale)))
        problems.append(f"{what}: {int(bad.sum())} entries differ from torch, worst {diff[k]:.3g} "
                        f"(torch value {theirs[finite][k]:.6g})")
    return worst, problems
