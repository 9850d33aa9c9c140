"""Checks of one op on one of its samples: finite-difference gradcheck and PyTorch parity.

The generated tests and the coverage matrix both call these, so the matrix's verdicts are exactly what
the tests assert. PyTorch is optional here: ``torch_available()`` says whether the oracle can run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import ops  # noqa: F401  -- the tools check the whole op library (tools sit above ops)

from ..autodiff import reverse_pass
from ..gradcheck import GradcheckError, gradcheck, gradgradcheck
from ..registry import Grad
from ..tensors import Tensor

__all__ = [
    "CheckResult",
    "op_samples",
    "sample_tensors",
    "call",
    "run_gradcheck",
    "run_gradgradcheck",
    "run_torch_parity",
    "run_torch_hvp_parity",
    "torch_available",
    "PARITY_TOLERANCE",
]

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


def _is_float(a) -> bool:
    if isinstance(a, list | tuple):  # a sequence input (concat's tensors): floating when its elements are
        return any(_is_float(x) for x in a)
    return np.asarray(a).dtype.kind == "f"


def differentiable_positions(op, sample) -> list[int]:
    """The tensor inputs (slots in ``inputs`` order) of the sample that can receive a gradient."""
    return [
        i
        for i, (a, state) in enumerate(zip(sample.inputs, op.input_states))
        if a is not None and state != Grad.NOT_DIFFERENTIABLE and _is_float(a)
    ]


def _leaf(a, dtype, requires_grad):
    if isinstance(a, list | tuple):
        return [_leaf(x, dtype, requires_grad) for x in a]
    a = np.asarray(a)
    if a.dtype.kind == "f":
        a = a.astype(dtype)
    return Tensor(a, requires_grad=requires_grad and a.dtype.kind == "f", dtype=a.dtype)


def sample_tensors(op, sample, dtype=np.float64) -> list:
    """Leaf tensors for a sample, one entry per tensor input (a list for a sequence input); floating inputs
    in ``dtype``, requiring grad where the op can give one."""
    diff = set(differentiable_positions(op, sample))
    return [None if a is None else _leaf(a, dtype, i in diff) for i, a in enumerate(sample.inputs)]


def flat_leaves(tensors) -> list:
    """The slots' tensors as one flat list (sequence inputs spread out)."""
    flat = []
    for t in tensors:
        if isinstance(t, list):
            flat.extend(t)
        else:
            flat.append(t)
    return flat


def _regrouped(tensors, flat_values) -> list:
    """``tensors``' slot structure filled with ``flat_values`` in order."""
    values = iter(flat_values)
    return [[next(values) for _ in t] if isinstance(t, list) else next(values) for t in tensors]


def _torch_inputs(torch, op, tensors, diff):
    """torch leaves mirroring ``tensors`` (lists for sequence inputs) and the differentiable pairs as
    ``[(name, our leaf, torch leaf)]``, flat."""
    pairs = []

    def mirror(name, t, need):
        if isinstance(t, list):
            return [mirror(f"{name}[{k}]", x, need) for k, x in enumerate(t)]
        theirs = torch.tensor(np.array(t._data), requires_grad=need and t.dtype.kind == "f")
        if theirs.requires_grad:
            pairs.append((name, t, theirs))
        return theirs

    inputs = [None if t is None else mirror(op.input_names[i], t, i in diff) for i, t in enumerate(tensors)]
    return inputs, pairs


def joined(out):
    """An op's result as one Tensor: itself, or for several outputs its floating outputs flattened and joined
    (so one check covers every output's gradient)."""
    if not isinstance(out, tuple | list):
        return out

    floats = [ops.reshape(o, (-1,)) for o in out if o.dtype.kind == "f"]
    if not floats:
        return out[0] if out else Tensor(np.zeros(0), dtype=np.float64)
    return ops.concat(floats, 0)


def _torch_joined(torch, out):
    if not isinstance(out, tuple | list):
        return out
    floats = [o.reshape(-1) for o in out if o.is_floating_point()]
    return torch.cat(floats) if floats else out[0]


def _flat_fn(op, tensors, attrs):
    """A function of the flat leaves that applies the op (what gradcheck and gradgradcheck perturb)."""

    def applied(*xs):
        out = joined(call(op, _regrouped(tensors, xs), attrs))
        if out.dtype == np.float32:  # an explicit cast to float32: checked through the cast back to float64
            import ops

            out = ops.cast(out, np.float64)
        return out

    return applied


FULL_GRADCHECK_UP_TO = 2000  # input entries; above, gradcheck checks random directions (its fast mode)
FULL_GRADGRADCHECK_UP_TO = 500


def _options(op, sample, full_up_to: int) -> dict:
    """The op's gradcheck tolerances, in fast mode (random directions) when the sample has more entries
    than ``full_up_to``: entry-by-entry finite differences cost two evaluations per entry."""
    options = dict(op.gradcheck_tolerance)
    if sum(np.asarray(a).size for a in _flat(sample.inputs) if a is not None) > full_up_to:
        options.setdefault("fast_mode", True)
    return options


def run_gradcheck(op, sample, full_up_to: int = FULL_GRADCHECK_UP_TO) -> CheckResult:
    """Float64 finite differences on every differentiable input of the sample (entry by entry up to
    ``full_up_to`` input entries, in random directions above)."""
    if not differentiable_positions(op, sample):
        return CheckResult(True, 0.0, "no differentiable input in this sample")
    tensors = sample_tensors(op, sample)
    probe = joined(call(op, tensors, sample.attrs))
    if probe.dtype.kind != "f":  # e.g. a cast to int64: no gradient may flow, and none must be recorded
        if probe.grad_fn is not None:
            return CheckResult(False, float("inf"), f"a {probe.dtype} output was recorded for the reverse pass")
        return CheckResult(True, 0.0, f"{probe.dtype} output: carries no gradient (checked: nothing recorded)")
    options = _options(op, sample, full_up_to)
    try:
        gradcheck(_flat_fn(op, tensors, sample.attrs), flat_leaves(tensors), **options)
    except GradcheckError as e:
        return CheckResult(False, _worst_error(str(e)), str(e))
    except Exception as e:  # a stub, a rule returning None, a shape error: all are failures to report
        return CheckResult(False, float("inf"), f"{type(e).__name__}: {e}")
    return CheckResult(True)


def run_gradgradcheck(op, sample, full_up_to: int = FULL_GRADGRADCHECK_UP_TO) -> CheckResult:
    """Float64 finite differences of the op's recorded (create_graph) backward, on every differentiable input
    and the cotangent (entry by entry up to ``full_up_to`` input entries, in random directions above)."""
    if not differentiable_positions(op, sample):
        return CheckResult(True, 0.0, "no differentiable input in this sample")
    tensors = sample_tensors(op, sample)
    if joined(call(op, tensors, sample.attrs)).dtype.kind != "f":
        return run_gradcheck(op, sample)  # no gradient at all: the first-order check says so
    options = _options(op, sample, full_up_to)
    try:
        gradgradcheck(_flat_fn(op, tensors, sample.attrs), flat_leaves(tensors), **options)
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
    rng = np.random.default_rng(seed)
    tensors = sample_tensors(op, sample)
    try:
        out = call(op, tensors, sample.attrs)
    except Exception as e:
        return CheckResult(False, float("inf"), f"minitape forward raised {type(e).__name__}: {e}")
    if isinstance(out, tuple):
        out = joined(out)
    if out.dtype.kind != "f":
        return None
    u_array = rng.standard_normal(out.shape)
    torch_inputs, pairs = _torch_inputs(torch, op, tensors, diff)
    leaves = [ours for _, ours, _ in pairs]
    vs = [rng.standard_normal(t.shape) for t in leaves]
    try:
        expected = _torch_joined(torch, op.torch_ref(torch, *torch_inputs, **sample.attrs))
        tu = torch.tensor(u_array, requires_grad=True)
        first = torch.autograd.grad(
            expected, [theirs for _, _, theirs in pairs], tu, create_graph=True, allow_unused=True
        )
        inner = sum((g * torch.from_numpy(v)).sum() for g, v in zip(first, vs) if g is not None)
        if not isinstance(inner, torch.Tensor) or not inner.requires_grad:
            return None  # torch's first derivative is constant here: nothing to compare
        theirs = torch.autograd.grad(inner, [t for _, _, t in pairs] + [tu], allow_unused=True)
    except RuntimeError:
        return None  # torch has no double backward for this op
    try:
        ours = _our_hvp(out, leaves, vs, u_array)
    except Exception as e:
        return CheckResult(False, float("inf"), f"minitape double backward raised {type(e).__name__}: {e}")
    rtol, atol = PARITY_TOLERANCE[np.dtype(np.float64)]
    worst = 0.0
    problems: list[str] = []
    names = [name for name, _, _ in pairs] + ["cotangent"]
    shapes = [t.shape for t in leaves] + [out.shape]
    for name, shape, g_ours, g_theirs in zip(names, shapes, ours, theirs):
        a = np.zeros(shape) if g_ours is None else g_ours._data
        b = np.zeros(shape) if g_theirs is None else g_theirs.detach().numpy(force=True)
        w, p = _compare(f"second-order grad of '{name}'", a, b, rtol * 10, atol * 10)
        worst, problems = max(worst, w), problems + p
    return CheckResult(not problems, worst, "; ".join(problems))


def _our_hvp(out, leaves, vs, u_array) -> list:
    """minitape's d/dx <VJP(x, u), v> for each leaf and d/du (None where it is zero), by two reverse passes."""
    from ..functional import gradients

    u = Tensor(u_array.astype(out.dtype), requires_grad=True)
    inner = None
    for g, v in zip(gradients(out, leaves, [u], create_graph=True, allow_unused=True), vs):
        if g is not None:
            term = (g * v).sum()
            inner = term if inner is None else inner + term
    if inner is None or (inner._node is None and not inner.requires_grad):
        return [None] * (len(leaves) + 1)
    return gradients(inner, leaves + [u], allow_unused=True)


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


_torch: Any = None  # the torch module once imported, False when it is not installed


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
    torch_inputs, pairs = _torch_inputs(torch, op, tensors, diff)
    expected = op.torch_ref(torch, *torch_inputs, **sample.attrs)
    if isinstance(out, tuple):
        expected = tuple(expected)
        if len(expected) != len(out):
            return CheckResult(False, float("inf"), f"{len(out)} outputs vs torch's {len(expected)}")
        worst, problems = 0.0, list[str]()
        for k, (a, b) in enumerate(zip(out, expected)):
            w, p = _compare(f"output {k}", a._data, b.detach().numpy(), rtol, atol)
            worst, problems = max(worst, w), problems + p
        out, expected = joined(out), _torch_joined(torch, expected)
    else:
        worst, problems = _compare("output", out._data, expected.detach().numpy(), rtol, atol)
    if diff and out.dtype.kind == "f" and expected.requires_grad:
        u = np.random.default_rng(seed).standard_normal(out.shape).astype(out.dtype)
        sources = [leaf for _, leaf, _ in pairs]
        ours = reverse_pass([out], [u], retain_graph=False, sources=sources) if out._node is not None else {}
        expected.backward(torch.from_numpy(u))
        for name, leaf, torch_leaf in pairs:
            g = ours.get(leaf.id)
            g = np.zeros(leaf.shape, dtype) if g is None else g
            theirs = torch_leaf.grad
            theirs = np.zeros_like(g) if theirs is None else theirs.numpy()
            w, p = _compare(f"grad of '{name}'", g, theirs, rtol, atol)
            worst, problems = max(worst, w), problems + p
    return CheckResult(not problems, worst, "; ".join(problems))


def _compare(what: str, ours: np.ndarray, theirs: np.ndarray, rtol: float, atol: float):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    if ours.shape != theirs.shape:
        return float("inf"), [f"{what}: shape {ours.shape} vs torch {theirs.shape}"]
    if ours.dtype != theirs.dtype and "f" not in (ours.dtype.kind, theirs.dtype.kind):  # integer promotion is torch's
        return float("inf"), [f"{what}: dtype {ours.dtype} vs torch {theirs.dtype}"]
    if ours.dtype.kind != "f" or theirs.dtype.kind != "f":
        same = np.array_equal(ours, theirs)
        return (0.0 if same else float("inf")), ([] if same else [f"{what}: values differ from torch"])
    infinite = np.isinf(ours)
    same_nonfinite = (
        (np.isnan(ours) == np.isnan(theirs)).all()
        and (infinite == np.isinf(theirs)).all()
        and (ours[infinite] == theirs[infinite]).all()
    )  # +inf is not -inf
    finite = np.isfinite(ours) & np.isfinite(theirs)
    diff = np.abs(ours[finite] - theirs[finite].astype(ours.dtype))
    scale = np.abs(theirs)[finite]
    worst = float(diff.max()) if diff.size else 0.0
    bad = diff > atol + rtol * scale
    problems = []
    if not same_nonfinite:
        problems.append(f"{what}: NaN/inf pattern differs from torch")
    if bad.any():
        k = int(np.argmax(diff - (atol + rtol * scale)))
        problems.append(
            f"{what}: {int(bad.sum())} entries differ from torch, worst {diff[k]:.3g} "
            f"(torch value {theirs[finite][k]:.6g})"
        )
    return worst, problems
