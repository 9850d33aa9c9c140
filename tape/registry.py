"""The op registry: ``defop`` declares an op once -- name, family, forward (its signature is the op's public one),
which parameters are tensors (``"weight?"`` optional, ``"*tensors"`` a sequence), one backward rule per tensor input
(or ``Grad.NOT_DIFFERENTIABLE`` / ``Grad.STUB``) or one ``joint_vjp``, samples, faces (``method=``, ``numpy=``) --
and ``Op`` derives once what the engine needs to call it. How to write one: docs/defining-ops.md."""

from __future__ import annotations

import collections
import enum
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from . import interop, opdoc, tensor_api
from .errors import RegistrationError
from .samples import Sample
from .state import unwrapped
from .tensor_api import ValuesIndices
from .tensors import Tensor

__all__ = [
    "Grad",
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


class Grad(enum.Enum):
    """The backward state of one tensor input of an op (and of an op's second order)."""

    RULE = "rule"
    NOT_DIFFERENTIABLE = "not differentiable"  # indices, lengths, boolean masks: no gradient by nature
    STUB = "stub"  # not written yet: reaching it raises BackwardNotImplementedError

    def __repr__(self) -> str:
        return f"Grad.{self.name}"


NOT_DIFFERENTIABLE = Grad.NOT_DIFFERENTIABLE
STUB = Grad.STUB


_MISSING = inspect.Parameter.empty


class Op:
    # each op's own __doc__ and __signature__ (help, inspect, IDEs) are generated from its declaration: tape/opdoc.py
    __doc__ = opdoc.Doc("A registered op. Calling it (with the forward's own signature) applies it and records it.")
    __signature__ = opdoc.Signature()

    # Set only on the stub op standing for another op's second-order backward (autodiff._second_order_stub);
    # other ops lack the attribute, so it is read with getattr(op, "second_order_of", None).
    second_order_of: Op

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
        returns_aux: bool = False,
        casts: bool = False,
        check: Callable | None = None,
        notes: str = "",
        gradcheck_tolerance: dict | None = None,
        composite: Callable | None = None,
        second_order: Grad | None = None,
        second_order_note: str = "",
        outputs: int | str | tuple[str, ...] = 1,
        method: bool | str = False,
        numpy: Any = None,
        retargets: dict[str, str] | None = None,
        doc: str = "",
    ):
        self.name = self.__name__ = name  # __name__: help(t.cumsum), a method bound to the op, names it
        # attribute -> tensor input: a tensor given for the attribute is that input (torch.max(input, other) beside
        # torch.max(input, dim): one positional slot, two meanings, told apart by the value's type)
        self.retargets = retargets or {}
        self.family = family
        self.input_names = tuple(n.rstrip("?").lstrip("*") for n in inputs)
        self.optional = tuple(n.endswith("?") for n in inputs)
        self.sequence = tuple(n.startswith("*") for n in inputs)
        self.has_sequence = any(self.sequence)
        self.n_inputs = len(self.input_names)
        self.forward, self.joint_vjp, self.check, self.composite = forward, joint_vjp, check, composite
        self.returns_aux = returns_aux  # the forward returns (out, aux): values computed once, handed to the rules
        self.casts = casts  # a dtype conversion (ops.cast): the one op that takes float16, a storage dtype
        self.samples, self.torch_ref, self.gradcheck_tolerance = samples, torch_ref, gradcheck_tolerance or {}
        self.notes, self.doc = notes, opdoc.declared(name, forward, doc)  # doc=: what it computes (tape/opdoc.py)
        self.n_outputs = self._declare_outputs(outputs)
        if not (method is False or method is True or (isinstance(method, str) and method.isidentifier())):
            raise RegistrationError(f"op '{name}': method= must be True, False or a method name, got {method!r}")
        self.method = name if method is True else method or None  # torch's method name, where it is not the op's
        self.numpy = interop.numpy_entries(name, numpy)
        self.input_states = self._declare_backward(vjps, joint_vjp, differentiable)
        self.has_stub = Grad.STUB in self.input_states
        self.second_order, self.second_order_note = self._declare_second_order(second_order, second_order_note)
        self.view = False  # torch returns a view: outputs sharing an input's memory share its versions
        self._bind_signature(forward)
        self._hot_path_facts()

    def declare_view(self) -> None:
        """torch's op returns a view: an output sharing an input's memory shares its versions (tape/inplace.py)."""
        self.view = True
        self._hot_path_facts()

    def _declare_outputs(self, outputs) -> int | str:
        """``n_outputs`` (and ``result_type`` for named outputs). != 1: the forward returns a tuple (of any length for
        "variable": split, unbind); rules get g and ans as tuples, g None where an output received no gradient. A
        forward may also return a single array for a call (torch.max(x) against torch.max(x, dim), torch.nonzero's
        as_tuple): that call has one output, and its rules get g and ans as arrays."""
        self.result_type: Any = None
        if isinstance(outputs, tuple):
            if len(outputs) < 2 or not all(isinstance(n, str) and n.isidentifier() for n in outputs):
                raise RegistrationError(f"op '{self.name}': outputs= names at least two outputs, got {outputs!r}")
            # (values, indices) -- max/min with a dim, sort, topk, ... -- is one type, as Tensor's methods return it
            self.result_type = (
                ValuesIndices if outputs == ("values", "indices") else collections.namedtuple(self.name, outputs)
            )
            outputs = len(outputs)
        if outputs != "variable" and (not isinstance(outputs, int) or outputs < 1):
            raise RegistrationError(
                f"op '{self.name}': outputs= must be a positive int, 'variable' or a tuple of names, got {outputs!r}"
            )
        return outputs

    def _declare_backward(self, vjps, joint_vjp, differentiable) -> tuple[Grad, ...]:
        """``vjps`` (None for a joint backward) and each tensor input's backward state."""
        name, n = self.name, self.n_inputs
        if (vjps is None) == (joint_vjp is None):
            raise RegistrationError(f"op '{name}': declare exactly one of vjps= (one rule per input) or joint_vjp=")
        entries: tuple = tuple(vjps if vjps is not None else differentiable or (Grad.RULE,) * n)
        self.vjps = entries if vjps is not None else None
        if len(entries) != n:
            raise RegistrationError(
                f"op '{name}': {'vjps' if vjps is not None else 'differentiable'}= has {len(entries)} entries but "
                f"the forward takes {n} tensor inputs {self.input_names}; give one (a rule, or NOT_DIFFERENTIABLE / "
                f"STUB) per input"
            )
        states = tuple(Grad.RULE if (callable(e) if vjps is not None else e is True) else e for e in entries)
        for input_name, state in zip(self.input_names, states):
            if not isinstance(state, Grad):
                raise RegistrationError(
                    f"op '{name}': the backward entry for input '{input_name}' must be a callable rule, "
                    f"Grad.NOT_DIFFERENTIABLE or Grad.STUB; got {state!r}"
                )
        return states

    def _declare_second_order(self, second_order, note) -> tuple[Grad, str]:
        """The second-order state: by default a stub when the rules use saved values and no composite is given
        (declared ``Grad.RULE``: they also run without them, on Tensors), not differentiable when no input is."""
        stub = second_order is None and self.returns_aux and self.composite is None
        second_order = (Grad.STUB if stub else Grad.RULE) if second_order is None else second_order
        note = note or ("its rules use values the forward saved; declare a composite= to differentiate them" * stub)
        if not isinstance(second_order, Grad):
            raise RegistrationError(f"op '{self.name}': second_order= must be a Grad state, got {second_order!r}")
        if Grad.RULE not in self.input_states:
            second_order = Grad.NOT_DIFFERENTIABLE
        return second_order, note

    def _hot_path_facts(self) -> None:
        """Facts the engine's short paths read instead of re-deriving them at every call (docs/engine.md): nothing
        is skipped that the general paths check, it is only known in advance."""
        # ``apply``'s short path: one or two tensors, positionally, one output, no aux (-1: the op has none)
        short = self.tensors_only_call and self.n_outputs == 1 and not self.returns_aux and not self.view
        self.short_path_arity = self.n_inputs if short and 1 <= self.n_inputs <= 2 else -1
        self.all_differentiable = Grad.NOT_DIFFERENTIABLE not in self.input_states  # nothing to refuse when recording
        # a check declaring ``passes_floats = True`` passes whenever every tensor input is floating: not called then
        self.check_passes_floats = getattr(self.check, "passes_floats", False) is True
        # the forward and the rules as (function, quiet?): a ``quiet`` one unwrapped, numpy's warnings switched off
        # around it by ``apply`` / ``_first_order_walk`` themselves (one frame fewer)
        self.forward_call = unwrapped(self.forward)
        # one rule per input, no stub, no sequence, one output: ``_first_order_walk`` calls them directly
        direct = self.vjps is not None and not self.has_stub and not self.has_sequence and self.n_outputs == 1
        self.direct_rules = tuple(map(unwrapped, self.vjps or ())) if direct else None

    def _bind_signature(self, forward: Callable) -> None:
        """Resolve, once, where each tensor parameter sits in the forward's signature."""
        if isinstance(forward, np.ufunc):  # positional inputs only; its keyword options are not parameters
            params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in self.input_names]
        else:
            params = list(inspect.signature(forward).parameters.values())
        self.var_positional = None  # index of a ``*operands`` parameter (einsum's torch signature)
        for i, p in enumerate(params):
            if p.kind == p.VAR_KEYWORD or (
                p.kind == p.VAR_POSITIONAL
                and not (p.name in self.input_names and self.sequence[self.input_names.index(p.name)])
            ):
                raise RegistrationError(
                    f"op '{self.name}': the forward may not take **kwargs, nor *args other than "
                    f"a sequence of tensors declared '*{p.name}'"
                )
            if p.kind == p.VAR_POSITIONAL:
                self.var_positional = i
        self.param_names = tuple(p.name for p in params)
        self.param_index = {n: i for i, n in enumerate(self.param_names)}
        self.n_positional = sum(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params
        )
        missing = [n for n in self.input_names if n not in self.param_index]
        if missing:
            raise RegistrationError(
                f"op '{self.name}': tensor inputs {missing} are not parameters of the forward {self.param_names}"
            )
        self.tensor_pos = tuple(self.param_index[n] for n in self.input_names)
        self.attr_pos = tuple(i for i in range(len(params)) if i not in self.tensor_pos)
        self.defaults = tuple(() if p.kind == p.VAR_POSITIONAL else p.default for p in params)
        for i, opt in zip(self.tensor_pos, self.optional):
            if opt and self.defaults[i] is _MISSING:
                self.defaults = self.defaults[:i] + (None,) + self.defaults[i + 1 :]
        self.attr_defaults = {
            self.param_names[i]: (None if self.defaults[i] is _MISSING else self.defaults[i]) for i in self.attr_pos
        }
        # a call with just the tensors, positionally, needs no binding (the hot path); an op with a required
        # attribute (cumsum's dim) always goes through ``bind``, which names what is missing
        self.tensors_only_call = (
            self.tensor_pos == tuple(range(self.n_inputs))
            and not self.has_sequence
            and self.var_positional is None
            and all(self.defaults[i] is not _MISSING for i in self.attr_pos)
        )

    # -- introspection -------------------------------------------------------------------------------------
    @property
    def stubbed_inputs(self) -> tuple[str, ...]:
        return tuple(n for n, s in zip(self.input_names, self.input_states) if s is Grad.STUB)

    @property
    def differentiable_inputs(self) -> tuple[str, ...]:
        return tuple(n for n, s in zip(self.input_names, self.input_states) if s is not Grad.NOT_DIFFERENTIABLE)

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(self.param_names)})"

    def call_args(self, sample: Sample) -> dict:
        """A sample's arguments by parameter name, as a user passes them."""
        return {**dict(zip(self.input_names, sample.inputs)), **sample.attrs}

    def __repr__(self) -> str:
        return f"<op {self.signature} ({self.family})>"

    # -- application ---------------------------------------------------------------------------------------
    def bind(self, args: tuple, kwargs: dict) -> list:
        """The call's arguments as one value per forward parameter (defaults filled); TypeError like Python's."""
        if self.var_positional is not None and len(args) > self.var_positional:
            v = self.var_positional
            rest = args[v:]
            if len(rest) == 1 and isinstance(rest[0], list | tuple):
                rest = tuple(rest[0])  # einsum(eq, [a, b]) as well as einsum(eq, a, b)
            args = tuple(args[:v]) + (tuple(rest),)
        if len(args) > self.n_positional:
            raise TypeError(
                f"{self.name}: takes {self.n_positional} positional argument(s), got {len(args)}; "
                f"the op is {self.signature}"
            )
        values = list(args)
        values.extend(self.defaults[len(args) :])
        if kwargs:
            index = self.param_index
            for key, value in kwargs.items():
                i = index.get(key)
                if i is None:
                    raise TypeError(
                        f"{self.name}: unknown argument '{key}'; {self.signature} accepts {list(self.param_names)}"
                    )
                if i < len(args):
                    raise TypeError(f"{self.name}: got multiple values for argument '{key}'")
                values[i] = value
        for attribute, target in self.retargets.items():
            i, j = self.param_index[attribute], self.param_index[target]
            if isinstance(values[i], Tensor | np.ndarray):
                if values[j] is not None:
                    raise TypeError(f"{self.name}: got a tensor for '{attribute}' and for '{target}'")
                values[i], values[j] = self.defaults[i], values[i]
        if any(v is _MISSING for v in values):
            missing = [n for n, v in zip(self.param_names, values) if v is _MISSING]
            raise TypeError(f"{self.name}: missing required argument(s) {missing}; the op is {self.signature}")
        return values

    def __call__(self, *args, **kwargs):  # replaced by ``tape.recording.apply`` when tape/recording.py loads
        raise ImportError("tape.recording is not loaded; import tape")


_REGISTRY: dict[str, Op] = {}


def defop(name: str, **declaration) -> Op:
    """Declare and register an op; returns the callable ``Op``. See ``Op`` for the fields."""
    if name in _REGISTRY:
        raise RegistrationError(f"an op named '{name}' is already registered ({_REGISTRY[name]!r})")
    op = Op(name, **declaration)
    if op.method is not None and tensor_api.own_attribute(op.method) is not None:
        raise RegistrationError(f"op '{name}': method='{op.method}': Tensor already has '{op.method}'")
    interop.map_numpy(op)  # refuses a numpy callable another op already stands for
    _REGISTRY[name] = op
    if op.method is not None:
        tensor_api.add_method(op.method, tensor_api._OpMethod(op))
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
    """Remove an op (meant for tests that register throwaway ops), with its Tensor method and numpy entries."""
    op = _REGISTRY.pop(name, None)
    if op is not None:
        current = vars(Tensor).get(op.method or "")
        if isinstance(current, tensor_api._OpMethod) and current.op is op:
            tensor_api.remove_method(op.method, current)
        interop.unmap_numpy(op)


def stubbed_backward_op_names() -> list[str]:
    """Names of the ops whose backward is a stub for at least one input, computed from the registry."""
    return sorted(op.name for op in _REGISTRY.values() if op.stubbed_inputs)
