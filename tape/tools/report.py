"""A training report: see the gradients flow (``tape.report``).

``Trace`` records one forward pass with its module paths (``blocks.0.attn.qkv.weight``, ``blocks.0.attn``), the
call site of every op and the module it ran in; ``Trace.gradient_flow(loss)`` is the norm of the gradient every
recorded tensor receives -- an absent entry is a tensor no gradient reaches (a detached branch, a path cut by a
backward stub). ``Trace.view(flow)`` turns both into the ``GraphView`` that ``ExecutionTape.to_dot`` draws.

``Recorder`` hooks into any training loop and writes ONE self-contained HTML file (inline SVG, PNG and JS; no
network): loss and accuracy curves on a log axis, per-parameter gradient norms and update ratios, the
gradient-flow DAG of one chosen step (drawn by its own layout, collapsible by module), the attention maps of
each head for a few fixed inputs at several points in training and the coverage row of every op the model used.
"""

from __future__ import annotations

import base64
import html
import json
import os
import sys
import threading
import time
import zlib

import numpy as np

from ..errors import BackwardNotImplementedError
from ..state import no_grad
from ..tapes import DEAD_COLOUR, NONFINITE_COLOUR, STUB_COLOUR, GradientTape, GraphView, flow_colour, flow_status
from ..tensors import Tensor
from ..train import nn

__all__ = ["Trace", "Recorder", "attention_weights", "gradient_norm"]

_TAPE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OPS_DIR = os.path.join(os.path.dirname(_TAPE_DIR), "ops")
ATTENTION_OP = "scaled_dot_product_attention"


def gradient_norm(grad) -> float | None:
    """The 2-norm of a gradient, accumulated in float64 (None for no gradient; NaN/inf propagate)."""
    if grad is None:
        return None
    array = grad._data if isinstance(grad, Tensor) else np.asarray(grad)
    return float(np.sqrt(np.sum(np.square(array, dtype=np.float64))))


def _call_site() -> str:
    """'file:line' of the innermost frame outside the engine core (tape/*.py) and the op library (ops/)."""
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        folder = os.path.dirname(path)
        if folder != _TAPE_DIR and not folder.startswith(_OPS_DIR):
            return f"{os.path.relpath(path) if not path.startswith('<') else path}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


class Trace(GradientTape):
    """A persistent GradientTape that also knows, for the model it traces, the module path of every parameter
    and module output, the module each op ran in and each op's call site. Use it as ``with Trace(model) as t:``
    around one forward pass; ``t.gradient_flow(loss)`` then differentiates it without touching any ``.grad``."""

    def __init__(self, model: nn.Module | None = None):
        super().__init__(persistent=True)
        modules = model.named_modules() if model is not None else ()
        self._paths = {id(m): path for path, m in modules}
        self.parameter_names = {p.id: name for name, p in model.named_parameters()} if model is not None else {}
        self.output_names: dict[int, str] = {}  # tensor id -> path of the (outermost) module that returned it
        self.tensors: dict[int, Tensor] = {}  # every tensor read or produced while recording
        self.sites: dict[int, str] = {}  # op index -> call site
        self.op_modules: dict[int, str] = {}  # op index -> innermost module path
        self._stack: list[tuple[str, int]] = []  # (module path, index of its first op) of the calls under way
        self._producer: dict[int, int] = {}  # tensor id -> index of the op that produced it
        self._thread = threading.get_ident()

    def __enter__(self):
        self._thread = threading.get_ident()
        nn._CALL_OBSERVERS.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        nn._CALL_OBSERVERS.remove(self)
        return super().__exit__(*exc)

    # -- module-call observer (tape.train.nn) --------------------------------------------------------------
    def enter(self, module) -> None:
        if threading.get_ident() == self._thread:
            self._stack.append((self._paths.get(id(module), type(module).__name__), len(self._ops)))

    def exit(self, module, output) -> None:
        if threading.get_ident() != self._thread:
            return
        path, first_op = self._stack.pop()
        for t in output if isinstance(output, tuple) else (output,):
            # a tensor is named by the outermost module that computed it (that call exits last), never by a
            # module that merely passed it through (Dropout(0) returns its input)
            if isinstance(t, Tensor) and path and self._producer.get(t.id, -1) >= first_op:
                self.output_names[t.id] = path

    def _record(self, op, tensors, attrs, result, node, seq_lens=()) -> None:
        index = len(self._ops)
        super()._record(op, tensors, attrs, result, node, seq_lens)
        results = result if isinstance(result, tuple) else (result,)
        for t in (*tensors, *results):
            if t is not None:
                self.tensors[t.id] = t
        self._producer.update((t.id, index) for t in results)
        self.sites[index] = _call_site()
        if self._stack:
            self.op_modules[index] = self._stack[-1][0]

    # -- gradient flow -------------------------------------------------------------------------------------
    def gradient_flow(self, loss: Tensor) -> dict[int, float]:
        """{tensor id: norm of d loss / d tensor} for every recorded floating tensor that requires grad and
        that a gradient reaches; a tensor upstream of a backward stub, of a detach or of nothing is absent."""
        sources = [t for t in self.tensors.values() if t.requires_grad and t.dtype.kind == "f"]
        blocked = self._upstream_of_stubs()
        try:
            grads = self.compute_gradients(loss, sources)
        except BackwardNotImplementedError:  # the stubs' paths get nothing; everything else still shows
            sources = [t for t in sources if t.id not in blocked]
            grads = self.compute_gradients(loss, sources)
        flow = {}
        for t, g in zip(sources, grads):
            if g is not None:
                flow[t.id] = gradient_norm(g)
        return flow

    def _upstream_of_stubs(self) -> set:
        """Ids of the tensors a stubbed op's inputs depend on (a gradient would have to pass its stub)."""
        producers = {spec.id: rec for rec in self._ops for spec in rec.output_specs}
        pending = [spec.id for rec in self._ops if rec.backward_stubbed for spec in rec.inputs if spec is not None]
        seen: set = set()
        while pending:
            tid = pending.pop()
            if tid not in seen:
                seen.add(tid)
                rec = producers.get(tid)
                pending += [s.id for s in rec.inputs if s is not None] if rec is not None else []
        return seen

    def view(self, flow: dict | None = None) -> GraphView:
        """The GraphView of this trace: names, call sites, module clusters and (when given) gradient flow."""
        modules = {f"op{i}": path for i, path in self.op_modules.items() if path}
        for tid, name in self.parameter_names.items():
            if tid in self._externals and "." in name:
                modules[f"t{tid}"] = name.rsplit(".", 1)[0]  # a parameter sits in its module's cluster
        names = {**self.output_names, **self.parameter_names}
        return GraphView(names=names, sites=dict(self.sites), modules=modules, flow=flow)

    def attention(self) -> list[tuple[str, np.ndarray]]:
        """(module path, attention weights (..., heads, L, S)) of every attention op recorded, in order."""
        maps = []
        for rec in self._ops:
            if rec.op_name == ATTENTION_OP:
                q, k, mask = self._attention_inputs(rec)
                maps.append((self.op_modules.get(rec.index, ""), attention_weights(q, k, mask, **rec.attributes)))
        return maps

    def _attention_inputs(self, rec):
        arrays = [None if s is None else self.tensors[s.id]._data for s in rec.inputs]
        return arrays[0], arrays[1], arrays[3] if len(arrays) > 3 else None


def attention_weights(
    query,
    key,
    attn_mask=None,
    *,
    is_causal=False,
    scale=None,
    enable_gqa=False,
    key_padding_lengths=None,
    causal_alignment="top_left",
    **_ignored,
) -> np.ndarray:
    """softmax(scale * Q K^T + mask) in float64 as ``ops.scaled_dot_product_attention`` uses it (without dropout):
    (..., Hq, L, S); a fully masked query row is all zeros."""
    q, k = np.asarray(query, dtype=np.float64), np.asarray(key, dtype=np.float64)
    if enable_gqa and k.shape[-3] != q.shape[-3]:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
    L, S = q.shape[-2], k.shape[-2]
    scores = (1 / np.sqrt(q.shape[-1]) if scale is None else float(scale)) * (q @ np.swapaxes(k, -1, -2))
    visible = np.ones(scores.shape, dtype=bool)
    if attn_mask is not None:
        mask = np.asarray(attn_mask)
        if mask.dtype == bool:
            visible = visible & mask
        else:
            scores = scores + mask
    if is_causal:
        offset = 0 if causal_alignment == "top_left" else S - L
        visible = visible & (np.arange(S)[None, :] <= np.arange(L)[:, None] + offset)
    if key_padding_lengths is not None:
        lengths = np.asarray(key_padding_lengths)
        visible = visible & (np.arange(S) < lengths.reshape(lengths.shape + (1, 1, 1)))
    visible = visible & (scores > -np.inf)
    scores = np.where(visible, scores, -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    weights = np.where(visible, np.exp(scores - np.where(np.isfinite(top), top, 0)), 0.0)
    total = weights.sum(axis=-1, keepdims=True)
    return np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)
