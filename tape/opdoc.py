"""Each registered op's ``__doc__`` and ``__signature__``, generated from its declaration when first asked for (so
``help(ops.X)``, ``inspect.signature``, IDEs and Jupyter's ``?`` see the op, not the generic ``Op`` class, at no
import cost): the forward's public signature, what it computes (the declaration's ``doc=``, else the forward's own
docstring), which inputs are differentiable and how, the second order, its notes, and where its coverage row is.
Nothing here imports the registry: an op is read through its attributes."""

from __future__ import annotations

import inspect

import numpy as np

from .errors import RegistrationError

COVERAGE = "docs/coverage.md"
# what an op declared with neither says (a test's throwaway op); tests/engine/test_op_docs.py: no library op does
UNDOCUMENTED = "UNDOCUMENTED: give the forward a docstring or declare defop(doc=...) (docs/defining-ops.md)."


def signature(op) -> inspect.Signature:
    """The forward's signature: what a call of the op accepts (a ufunc forward: its tensor inputs)."""
    if isinstance(op.forward, np.ufunc):
        return inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in op.input_names])
    return inspect.signature(op.forward)


def own_doc(forward) -> str | None:
    """The forward's own docstring (a numpy ufunc's is numpy's, not the op's: None)."""
    return None if isinstance(forward, np.ufunc) else inspect.getdoc(forward)


def declared(name: str, forward, doc: str) -> str:
    """``defop``'s ``doc=``, checked: one source per op's summary -- ``doc=`` or the forward's own docstring."""
    if doc and own_doc(forward):
        raise RegistrationError(f"op '{name}': its forward has a docstring; declare doc= only where it has none")
    if doc is not None and not isinstance(doc, str):
        raise RegistrationError(f"op '{name}': doc= must be a str, got {doc!r}")
    return doc


def _summary(op) -> str:
    """What the op computes: its declaration's ``doc=``, else its forward's own docstring."""
    return op.doc or own_doc(op.forward) or UNDOCUMENTED


def _inputs(op) -> list[str]:
    lines = []
    for name, state, optional, sequence in zip(op.input_names, op.input_states, op.optional, op.sequence):
        what = {"rule": "differentiable (registered rule)", "not differentiable": "not differentiable",
                "stub": "STUB: its backward raises BackwardNotImplementedError"}[state.value]  # fmt: skip
        kind = "a sequence of tensors" if sequence else "a tensor" + (" or None" if optional else "")
        lines.append(f"    {name}: {kind}; {what}")
    return lines


def text(op) -> str:
    """The op's docstring."""
    parts = [f"{op.name}{signature(op)}", "", _summary(op), "", "Tensor inputs:", *_inputs(op)]
    if op.n_outputs != 1:
        parts += ["", f"Outputs: {op.n_outputs}" + (f" {op.result_type._fields}" if op.result_type else "")]
    order = op.second_order.value
    parts += ["", f"Second order: {order}" + (f" ({op.second_order_note})" if op.second_order_note else "")]
    if op.method:
        parts.append(f"Tensor method: Tensor.{op.method}")
    if op.view:
        parts.append("Returns a view: the output shares the input's memory and version counter, as torch's.")
    if op.notes:
        parts += ["", "Notes:", op.notes]
    parts += ["", f"Family: {op.family}. Checked (forward, gradcheck, torch parity, 2nd order, ONNX export): the "
              f"'{op.name}' row of {COVERAGE} (python -m tape coverage --ops {op.name})."]  # fmt: skip
    return "\n".join(parts)


class Doc:
    """``__doc__`` of a class whose instances stand for an op: the class's own docstring on the class, ``describe``
    of the instance on each one (``Op``: the op's generated doc; a Tensor op method's: that doc, named as a method)."""

    def __init__(self, class_doc: str, describe=text):
        self.class_doc, self.describe = class_doc, describe

    def __get__(self, instance, owner=None) -> str:
        return self.class_doc if instance is None else self.describe(instance)


class Signature:
    """``Op.__signature__``: read by ``inspect.signature(op)``; the class itself has none of its own."""

    def __get__(self, op, owner=None) -> inspect.Signature | None:
        return None if op is None else signature(op)
