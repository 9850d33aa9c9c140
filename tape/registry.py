"""The op registry: every op minitape can record, declared once.

An op declaration holds, in one place: the op's name and family, its forward (numpy in, numpy out),
one backward rule (VJP) per tensor input -- or the explicit marker ``NOT_DIFFERENTIABLE`` or ``STUB`` --
its sample inputs for the generated tests, and optionally a PyTorch reference used as a test oracle.

A VJP has the signature ``rule(g, ans, *inputs, **attrs) -> ndarray``: ``g`` is the gradient flowing
into the op's output, ``ans`` its forward output, ``inputs`` the forward's input arrays and ``attrs``
its (defaults-completed) attributes. It returns the gradient for *one* input, in that input's shape
and dtype. Ops whose inputs share most of the backward work (attention, convolution) may instead
declare one ``joint_vjp(g, ans, *inputs, needs=(bool, ...), **attrs) -> tuple`` returning one entry
per input (``None`` only where ``needs`` is False).

Dispatch is a lookup on the ``Op`` object; there is no switch over op-name strings anywhere.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "NOT_DIFFERENTIABLE",
    "STUB",
    "Op",
    "Sample",
    "defop",
    "get_op",
    "registered_ops",
    "unregister_op",
    "stubbed_backward_op_names",
    "RegistrationError",
]


class _Marker:
    """A named sentinel used in place of a backward rule."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


NOT_DIFFERENTIABLE = _Marker("NOT_DIFFERENTIABLE")
"""The input carries no gradient by nature (indices, lengths, boolean masks)."""

STUB = _Marker("STUB")
"""The backward for this input is not written yet: reaching it raises BackwardNotImplementedError."""

RULE = "rule"
NOT_DIFF = "not differentiable"
STUBBED = "stub"


class RegistrationError(ValueError):
    """An op declaration is inconsistent (wrong rule count, duplicate name, bad marker)."""


@dataclass
class Sample:
    """One set of inputs for an op: arrays (``None`` for an absent optional input) and attributes."""

    inputs: tuple
    attrs: dict = field(default_factory=dict)
    label: str = ""
    torch: bool = True  # False when torch's reference does not support this particular sample

    def __repr__(self) -> str:
        shapes = ", ".join("None" if a is None else f"{getattr(a, 'dtype', type(a).__name__)}"
                           f"{list(getattr(a, 'shape', ()))}" for a in self.inputs)
        label = f" {self.label}" if self.label else ""
        return f"Sample({shapes}; {self.attrs}){label}"


class Op:
    """A registered op. Calling it applies it to tensors and records it on the tape."""

    def __init__(
        self,
        name: str,
        *,
        family: str,
        inputs: tuple[str, ...],
        forward: Callable,
        vjps: tuple | None = None,
        joint_vjp: Callable | None = None,
        differentiable: tuple | None = None,
        samples: Callable | None = None,
        torch_ref: Callable | None = None,
        has_aux: bool = False,
        check: Callable | None = None,
        notes: str = "",
        gradcheck_tolerance: dict | None = None,
    ):
        self.name = name
        self.family = family
        self.input_names = tuple(n.rstrip("?") for n in inputs)
        self.optional = tuple(n.endswith("?") for n in inputs)
        self.n_inputs = len(self.input_names)
        self.forward = forward
        self.joint_vjp = joint_vjp
        self.samples = samples
        self.torch_ref = torch_ref
        self.has_aux = has_aux
        self.check = check
        self.notes = notes
        self.gradcheck_tolerance = gradcheck_tolerance or {}
        n = len(self.input_names)
        if (vjps is None) == (joint_vjp is None):
            raise RegistrationError(f"op '{name}': declare exactly one of vjps= (one rule per input) or joint_vjp=")
        if joint_vjp is not None:
            entries = differentiable if differentiable is not None else (True,) * n
            if len(entries) != n:
                raise RegistrationError(
                    f"op '{name}': differentiable= has {len(entries)} entries but the op has {n} tensor inputs "
                    f"{self.input_names}")
            self.vjps = tuple(None if e is True else e for e in entries)
            states = [RULE if e is True else e for e in entries]
        else:
            if len(vjps) != n:
                raise RegistrationError(
                    f"op '{name}': {len(vjps)} backward rules declared but the forward takes {n} tensor inputs "
                    f"{self.input_names}; give one rule (or NOT_DIFFERENTIABLE / STUB) per input")
            self.vjps = tuple(vjps)
            states = list(vjps)
        self.input_states = tuple(_state_of(name, self.input_names[i], s) for i, s in enumerate(states))
        self.has_stub = STUBBED in self.input_states
        self.attr_defaults = _keyword_defaults(name, forward, n)

    # -- introspection -------------------------------------------------------------------------------------
    @property
    def stubbed_inputs(self) -> tuple[str, ...]:
        return tuple(n for n, s in zip(self.input_names, self.input_states) if s == STUBBED)

    @property
    def differentiable_inputs(self) -> tuple[str, ...]:
        return tuple(n for n, s in zip(self.input_names, self.input_states) if s != NOT_DIFF)

    def __repr__(self) -> str:
        return f"<op {self.name} ({self.family}) inputs={self.input_names}>"

    # -- application ---------------------------------------------------------------------------------------
    def __call__(self, *inputs, **attrs):
        return _apply(self, inputs, attrs)


def _state_of(op_name: str, input_name: str, entry: Any) -> str:
    if entry is NOT_DIFFERENTIABLE:
        return NOT_DIFF
    if entry is STUB:
        return STUBBED
    if entry == RULE or callable(entry):
        return RULE
    raise RegistrationError(
        f"op '{op_name}': the backward entry for input '{input_name}' must be a callable rule, "
        f"NOT_DIFFERENTIABLE or STUB; got {entry!r}")


def _keyword_defaults(op_name: str, forward: Callable, n_inputs: int) -> dict:
    """The forward's attributes (parameters after the tensor inputs) and their defaults."""
    if isinstance(forward, np.ufunc):  # positional inputs only; its keyword options are not attributes
        return {}
    params = list(inspect.signature(forward).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < n_inputs and not any(p.kind == p.VAR_POSITIONAL for p in params):
        raise RegistrationError(
            f"op '{op_name}': the forward takes {len(positional)} positional arguments but {n_inputs} tensor "
            f"inputs are declared")
    defaults = {}
    for p in params[n_inputs:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        defaults[p.name] = None if p.default is p.empty else p.default
    return defaults


_REGISTRY: dict[str, Op] = {}


def _apply(op, inputs, attrs):
    """Bound to ``tape.recording.apply`` on first use (recording imports this module)."""
    global _apply
    from .recording import apply

    _apply = apply
    return apply(op, inputs, attrs)


def defop(name: str, **declaration) -> Op:
    """Declare and register an op; returns the callable ``Op``. See ``Op`` for the fields."""
    if name in _REGISTRY:
        raise RegistrationError(f"an op named '{name}' is already registered ({_REGISTRY[name]!r})")
    op = Op(name, **declaration)
    _REGISTRY[name] = op
    return op


def get_op(name: str) -> Op:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no op named '{name}' is registered; see tape.registered_ops()") from None


def registered_ops() -> list[Op]:
    """All registered ops, in registration order."""
    return list(_REGISTRY.values())


def unregister_op(name: str) -> None:
    """Remove an op (meant for tests that register throwaway ops)."""
    _REGISTRY.pop(name, None)


def stubbed_backward_op_names() -> list[str]:
    """Names of the ops whose backward is a stub for at least one input, computed from the registry."""
    return sorted(op.name for op in _REGISTRY.values() if op.stubbed_inputs)
