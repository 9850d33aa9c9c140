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
import re
import sys
import threading
import time
import zlib
from types import FrameType

import numpy as np

from ..errors import BackwardNotImplementedError
from ..registry import get_op
from ..state import no_grad
from ..tapes import (
    DEAD_COLOUR,
    NONFINITE_COLOUR,
    STUB_COLOUR,
    GradientTape,
    GraphView,
    flow_colour,
    flow_scale_colours,
    flow_status,
    text_colour,
)
from ..tensors import Tensor
from ..train import nn

__all__ = ["Trace", "Recorder", "attention_weights", "gradient_norm"]

_TAPE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OPS_DIR = os.path.join(os.path.dirname(_TAPE_DIR), "ops")
ATTENTION_OP = "scaled_dot_product_attention"


def gradient_norm(grad) -> float | None:
    """The 2-norm of a gradient, accumulated in float64 (None for no gradient; NaN/inf propagate)."""
    return None if grad is None else _norm(grad)


def _norm(array) -> float:
    flat = (array._data if isinstance(array, Tensor) else np.asarray(array)).astype(np.float64).ravel()
    return float(np.sqrt(np.dot(flat, flat)))


def _call_site() -> str:
    """'file:line' of the innermost frame outside the engine core (tape/*.py) and the op library (ops/)."""
    frame: FrameType | None = sys._getframe(2)
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
        return {t.id: _norm(g) for t, g in zip(sources, grads) if g is not None}

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


# -- the recorder --------------------------------------------------------------------------------------------
class Recorder:
    """Hook a training loop's numbers into one HTML report.

    Per training step call ``step(step, loss, accuracy=None)`` after the optimizer's update: it records the loss,
    every parameter's gradient norm (``.grad`` as it is then -- call ``gradients()`` right after the backward to
    record them before clipping, ``gradients(grads)`` in a loop whose GradientTape sets no ``.grad``) and update
    ratio ``|p_new - p_old| / |p_old|``, and at ``attention_steps`` the
    attention maps of ``attention_inputs`` (``attention_forward(inputs)`` runs the model, default
    ``model(inputs)``; step 0 is the model before training). ``graph(step, loss_fn, *args)`` records the
    gradient-flow DAG of ``loss_fn(*args)`` at ``graph_step`` with its own forward and reverse pass: no ``.grad``
    changes. ``write(path)`` adds the coverage row of every op the traces used and writes the file; ``seconds``
    is the time all of this took (``write_seconds`` the writing's share).
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        title: str = "minitape training report",
        graph_step: int = 1,
        attention_inputs=None,
        attention_steps=(),
        attention_forward=None,
        coverage: bool = True,
        accuracy_label: str = "accuracy",
    ):
        start = time.perf_counter()
        self.model, self.title, self.graph_step, self.coverage = model, title, graph_step, coverage
        self.accuracy_label = accuracy_label  # what the accuracy passed to step() measures, as the page names it
        self.parameters = list(model.named_parameters())
        self.steps: list[int] = []
        self.losses: list[float] = []
        self.accuracy: list[tuple[int, float]] = []
        self.grad_norms: list[list[float | None]] = []  # per recorded step, one entry per parameter
        self.update_ratios: list[list[float]] = []
        self.flow_graph: dict | None = None
        self.attention_inputs = attention_inputs
        self.attention_steps = set(attention_steps)
        self.attention_forward = attention_forward or model
        self.attention: list[tuple[int, list]] = []  # (step, [(module path, weights (B, H, L, S))])
        self.ops_used: set[str] = set()
        self._previous = [p._data.copy() for _, p in self.parameters]  # values: an update may write in place
        self._pending: list[float | None] | None = None
        self.seconds = 0.0  # everything the recorder did, writing included
        self.write_seconds = 0.0
        if 0 in self.attention_steps:
            self._record_attention(0)
        self.seconds += time.perf_counter() - start

    def gradients(self, grads=None) -> None:
        """Record every parameter's gradient norm now (e.g. after the backward, before clipping): their ``.grad``,
        or ``grads`` -- one per parameter in ``model.named_parameters()`` order (what ``GradientTape.
        compute_gradients(loss, list(model.parameters()))`` returns) or {parameter name: gradient}."""
        start = time.perf_counter()
        if grads is None:
            grads = [p.grad for _, p in self.parameters]
        elif isinstance(grads, dict):
            grads = [grads.get(name) for name, _ in self.parameters]
        elif len(grads) != len(self.parameters):
            raise ValueError(
                f"Recorder.gradients: expected one gradient per parameter ({len(self.parameters)}), got {len(grads)}"
            )
        self._pending = [gradient_norm(g) for g in grads]
        self.seconds += time.perf_counter() - start

    def step(self, step: int, loss: float, accuracy: float | None = None) -> None:
        """Record one finished training step (after the optimizer's update)."""
        start = time.perf_counter()
        norms = self._pending if self._pending is not None else [gradient_norm(p.grad) for _, p in self.parameters]
        self._pending = None
        current = [p._data.copy() for _, p in self.parameters]  # values: the next update may write in place
        self.update_ratios.append([_update_ratio(old, new) for old, new in zip(self._previous, current)])
        self._previous = current
        self.steps.append(int(step))
        self.losses.append(float(loss))
        self.grad_norms.append(norms)
        if accuracy is not None:
            self.accuracy.append((int(step), float(accuracy)))
        if step in self.attention_steps:
            self._record_attention(step)
        self.seconds += time.perf_counter() - start

    def graph(self, step: int, loss_fn, *args, **kwargs) -> None:
        """At ``graph_step``: trace ``loss_fn(*args, **kwargs)`` and keep its gradient-flow DAG."""
        if step != self.graph_step:
            return
        start = time.perf_counter()
        with Trace(self.model) as trace:
            loss = loss_fn(*args, **kwargs)
        self.flow_graph = dag_data(trace, trace.gradient_flow(loss))
        self.flow_graph["step"] = int(step)
        self.ops_used.update(rec.op_name for rec in trace.operations)
        self.seconds += time.perf_counter() - start

    def _record_attention(self, step: int) -> None:
        if self.attention_inputs is None:
            return
        with no_grad(), Trace(self.model) as trace:
            self.attention_forward(self.attention_inputs)
        self.ops_used.update(rec.op_name for rec in trace.operations)
        maps = [(path, w.reshape((-1,) + w.shape[-3:]).astype(np.float32)) for path, w in trace.attention()]
        self.attention.append((int(step), maps))  # each (batch, heads, L, S)

    def dead_parameters(self) -> list[str]:
        """Parameters whose gradient was missing or exactly zero at every recorded step."""
        return [
            name
            for k, (name, _) in enumerate(self.parameters)
            if self.grad_norms and all(flow_status(norms[k]) in ("missing", "zero") for norms in self.grad_norms)
        ]

    def write(self, path: str) -> str:
        """Write the report to ``path`` (one self-contained HTML file); returns the path."""
        start = time.perf_counter()
        rows = _coverage_rows(sorted(self.ops_used)) if self.coverage and self.ops_used else []
        page = _page(self, rows)
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
        self.write_seconds = time.perf_counter() - start
        self.seconds += self.write_seconds
        return path


def _update_ratio(old: np.ndarray, new: np.ndarray) -> float:
    """|new - old| / |old| in float64 (|new - old| itself when old is all zeros)."""
    scale, change = _norm(old), _norm(np.subtract(new, old, dtype=np.float64))
    return change / scale if scale else change


def _coverage_rows(names: list[str]) -> list:
    """The coverage rows of the ops ``names``: forward, backward and gradcheck measured now (torch parity and the
    second order are ``python -m tape coverage``'s: they would cost more than the training run)."""
    from . import coverage

    return coverage.coverage_rows(ops=names, torch=False, order2=False, export=False)


# -- the gradient-flow DAG as data ------------------------------------------------------------------------------
def dag_data(trace: Trace, flow: dict) -> dict:
    """The DAG of ``trace`` with its gradient flow, as JSON-ready nodes and edges (colours resolved here, so the
    page and ``to_dot`` show the same thing): what the report's script lays out and draws."""
    view = trace.view(flow)
    scale = view.flow_scale()
    graph = trace.to_graph()
    nodes, edges = [], []
    for tid, spec in graph.inputs.items():
        tensor = trace.tensors.get(tid)
        name = view.names.get(tid) or (tensor.name if tensor is not None and tensor.name else f"input #{tid}")
        kind = "param" if tid in trace.parameter_names else "input"
        nodes.append(_dag_node(f"t{tid}", name, kind, spec, view, scale, view.modules.get(f"t{tid}", "")))
    for rec in graph.ops:
        out = rec.output
        name = view.names.get(out.id, rec.op_name) if out is not None else rec.op_name
        node = _dag_node(f"op{rec.index}", name, "op", out, view, scale, view.modules.get(f"op{rec.index}", ""))
        node.update(op=rec.op_name, site=view.sites.get(rec.index, ""), stub=list(_stubbed(rec)))
        if node["stub"]:
            node.update(fill=STUB_COLOUR, text="#7f1d1d", status="stub")
        nodes.append(node)
    for tid, consumer in graph.input_edges:
        edges.append(_dag_edge(f"t{tid}", f"op{consumer}", graph.inputs[tid], view, scale))
    for producer, consumer, tid in graph.edges:
        spec = next(s for s in graph.ops[producer].output_specs if s.id == tid)
        edges.append(_dag_edge(f"op{producer}", f"op{consumer}", spec, view, scale))
    return {"nodes": nodes, "edges": edges, "scale": list(scale)}


def _stubbed(rec) -> tuple:
    try:
        return tuple(get_op(rec.op_name).stubbed_inputs)
    except KeyError:  # an op unregistered since it was recorded
        return ()


def _dag_node(key, name, kind, spec, view, scale, module) -> dict:
    node = {"key": key, "name": name, "kind": kind, "module": module, "shape": _shape_text(spec)}
    if spec is not None and spec.requires_grad and view.flow is not None:
        norm = view.flow.get(spec.id)
        fill, label = flow_colour(norm, scale)
        node.update(fill=fill, text=text_colour(fill), status=flow_status(norm), norm=_json_number(norm), grad=label)
    else:
        node.update(fill="#f3f4f6", text="#111827", status="constant", norm=None, grad="no gradient needed")
    return node


def _dag_edge(source, target, spec, view, scale) -> dict:
    edge = {"from": source, "to": target, "shape": _shape_text(spec), "colour": "#9ca3af", "status": "constant"}
    if spec.requires_grad and view.flow is not None:
        norm = view.flow.get(spec.id)
        edge.update(colour=flow_colour(norm, scale)[0], status=flow_status(norm), grad=flow_colour(norm, scale)[1])
    return edge


def _shape_text(spec) -> str:
    return "(no output)" if spec is None else f"{spec.dtype}{list(spec.shape)}"


def _json_number(x: float | None):
    """JSON has no NaN/inf: they become strings."""
    return x if x is None or np.isfinite(x) else str(x)


# -- the page ------------------------------------------------------------------------------------------------
SECTIONS = ("summary", "curves", "gradients", "dag", "attention", "coverage")


def _page(recorder: Recorder, rows: list) -> str:
    body = "\n".join(
        [
            _summary(recorder),
            _curves(recorder),
            _gradients(recorder),
            _dag_section(recorder.flow_graph),
            _attention_section(recorder.attention),
            _coverage_section(rows),
        ]
    )
    title = html.escape(recorder.title)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>\n'
        f"<style>{_asset('report.css')}</style></head>\n<body><h1>{title}</h1>\n{body}\n"
        f"<script>{_asset('report.js')}</script></body></html>\n"
    )


def _section(key: str, heading: str, content: str, note: str = "") -> str:
    note_html = f'<p class="note">{note}</p>' if note else ""
    return f'<section id="{key}"><h2>{heading}</h2>{note_html}\n{content}\n</section>'


def _summary(r: Recorder) -> str:
    items = [f"{len(r.steps)} steps recorded", f"{sum(p.numel() for _, p in r.parameters):,} parameters"]
    if r.losses:
        items.append(f"loss {r.losses[0]:.4g} &rarr; {r.losses[-1]:.4g}")
    if r.accuracy:
        items.append(f"{html.escape(r.accuracy_label)} {r.accuracy[-1][1]:.2%} at step {r.accuracy[-1][0]}")
    alerts = []
    dead = r.dead_parameters()
    if dead:
        alerts.append(
            f"no gradient ever reached {len(dead)} parameter(s): {', '.join(map(html.escape, dead))} (a loop whose "
            f"GradientTape sets no .grad passes its gradients to Recorder.gradients)"
        )
    nonfinite = [
        r.steps[k] for k, norms in enumerate(r.grad_norms) if any(flow_status(n) == "nonfinite" for n in norms)
    ]
    if nonfinite:
        alerts.append(f"NaN/inf gradients at {len(nonfinite)} step(s), first at step {nonfinite[0]}")
    stubs = [n["name"] for n in (r.flow_graph or {}).get("nodes", ()) if n.get("stub")]
    if stubs:
        alerts.append("backward stubs on the gradient path: " + ", ".join(map(html.escape, stubs)))
    alert_html = (
        "".join(f'<p class="alert">{a}</p>' for a in alerts) or '<p class="ok">every parameter got a gradient</p>'
    )
    return _section("summary", "Summary", "<p>" + " &middot; ".join(items) + "</p>" + alert_html)


def _curves(r: Recorder) -> str:
    charts = [_line_chart([("loss", r.steps, r.losses, "#2563eb")], "training loss (log axis)", log=True)]
    if r.accuracy:
        steps, values = zip(*r.accuracy)
        label = html.escape(r.accuracy_label)
        charts.append(_line_chart([(label, list(steps), list(values), "#16a34a")], label, log=False))
    return _section("curves", "Loss and accuracy", '<div class="row">' + "".join(charts) + "</div>")


def _gradients(r: Recorder) -> str:
    names = [name for name, _ in r.parameters]
    norms = np.array([[np.nan if n is None else n for n in row] for row in r.grad_norms], dtype=np.float64).T
    missing = np.array([[n is None for n in row] for row in r.grad_norms], dtype=bool).T
    ratios = np.array(r.update_ratios, dtype=np.float64).T
    total = np.sqrt(np.nansum(np.square(norms), axis=0)) if norms.size else np.zeros(0)
    content = [
        _line_chart([("global gradient norm", r.steps, list(total), "#9333ea")], "global gradient norm", log=True),
        _heatmap(names, r.steps, norms, missing, "gradient norm |g| per parameter (log colour scale)"),
        _heatmap(names, r.steps, ratios, np.zeros_like(missing), "update ratio |&Delta;p| / |p| per parameter"),
    ]
    note = (
        "grey: gradient missing or exactly zero; red: NaN or inf; colour: log scale from dark blue (smallest) to yellow"
    )
    return _section("gradients", "Gradient norms and update ratios", "\n".join(content), note)


def _dag_section(graph: dict | None) -> str:
    if graph is None:
        return _section("dag", "Gradient flow", "<p>no step traced (Recorder.graph was not called at graph_step)</p>")
    low, high = graph["scale"]
    legend = (
        f'<span class="swatch" style="background:linear-gradient(90deg,{_gradient_css()})"></span> '
        f"|g| {low:.2e} &hellip; {high:.2e} (log) "
        f'<span class="swatch" style="background:{DEAD_COLOUR}"></span> zero / no gradient '
        f'<span class="swatch" style="background:{NONFINITE_COLOUR}"></span> NaN / inf '
        f'<span class="swatch" style="background:{STUB_COLOUR};border:2px solid #b91c1c"></span> backward stub'
    )
    controls = '<button id="dag-collapse">collapse all modules</button> <button id="dag-expand">expand all</button>'
    data = json.dumps(graph, separators=(",", ":")).replace("</", "<\\/")
    content = (
        f'<p class="legend">{legend}</p><p>{controls} click a module\'s box to collapse or expand it; hover a node '
        f'for its call site</p><div class="scroll"><svg id="dag-svg"></svg></div>'
        f'<script type="application/json" id="dag-data">{data}</script>'
    )
    return _section("dag", f"Gradient flow at step {graph.get('step', '?')}", content)


def _attention_section(snapshots: list) -> str:
    if not snapshots:
        return _section(
            "attention", "Attention maps", "<p>no attention recorded (attention_inputs, attention_steps)</p>"
        )
    parts = []
    first = snapshots[0][1]
    for b in range(min((w.shape[0] for _, w in first), default=0)):
        header = "".join(f"<th>{html.escape(path)}<br>head {h}</th>" for path, w in first for h in range(w.shape[-3]))
        rows = []
        for step, maps in snapshots:
            images = [_png(_attention_rgb(w[b, h])) for _, w in maps for h in range(w.shape[1])]
            cells = "".join(f'<td><img class="map" alt="attention" src="{image}"></td>' for image in images)
            rows.append(f"<tr><th>step {step}</th>{cells}</tr>")
        parts.append(f'<h3>input {b}</h3><table class="maps"><tr><th></th>{header}</tr>{"".join(rows)}</table>')
    note = "rows: queries, columns: keys; each map scaled to its own largest weight"
    return _section("attention", "Attention maps", "\n".join(parts), note)


def _coverage_section(rows: list) -> str:
    if not rows:
        return _section("coverage", "Coverage of the ops used", "<p>no coverage measured</p>")
    from .coverage import COLUMNS, HEADINGS

    head = "".join(f"<th>{h}</th>" for h in HEADINGS)
    body = "".join(
        f'<tr class="{"fail" if row.failed else ""}"><td>{html.escape(row.op)}</td><td>{html.escape(row.family)}</td>'
        + "".join(f"<td>{_cell(getattr(row, column))}</td>" for column in COLUMNS)
        + f"<td>{_markup(row.notes)}</td></tr>"
        for row in rows
    )
    command = "python -m tape coverage --ops " + " ".join(row.op for row in rows)
    note = (
        "forward, backward and gradcheck measured while writing this report; torch parity, second order and ONNX "
        f"export are not measured here (they would cost more than the training run): <code>{html.escape(command)}"
        "</code> measures them"
    )
    return _section(
        "coverage", "Coverage of the ops used", f'<table class="coverage"><tr>{head}</tr>{body}</table>', note
    )


MARKS = {"pass": "passed", "fail": "failed", "warn": "differs at edge values", "absent": "not measured"}


def _cell(cell) -> str:
    """A coverage cell as a CSS-drawn mark (no emoji font needed) and its text; a column the report skipped for
    its cost says so (coverage words a skip as the command-line flag that asks for it, which the report never
    passes)."""
    text = "not measured here" if cell.status == "absent" and cell.text.startswith("skipped") else cell.text
    mark = f'<span class="mark {cell.status}" role="img" aria-label="{MARKS[cell.status]}"></span>'
    return f"{mark} {_markup(text)}".rstrip()


def _markup(text: str) -> str:
    """``text`` as HTML: escaped, with reStructuredText's ``literal`` spans (the ops' notes use them) as <code>."""
    return re.sub(r"``(.+?)``", r"<code>\1</code>", html.escape(text))


# -- charts: inline SVG and PNG ----------------------------------------------------------------------------------
def _line_chart(series: list, title: str, log: bool, width: int = 520, height: int = 260) -> str:
    """An SVG line chart of ``series`` = [(label, xs, ys, colour)]; ``log``: a log10 y axis (values <= 0 and
    NaN/inf break the line)."""
    left, right, top, bottom = 60, 12, 24, 32
    xs_all = np.concatenate([np.asarray(s[1], dtype=np.float64) for s in series]) if series else np.zeros(0)
    ys_all = np.concatenate([_y(np.asarray(s[2], dtype=np.float64), log) for s in series]) if series else np.zeros(0)
    ok = np.isfinite(ys_all)
    if not ok.any():
        return (
            f'<figure><svg width="{width}" height="{height}"><text x="10" y="20">{title}: no data</text></svg></figure>'
        )
    x0, x1 = float(xs_all.min()), float(max(xs_all.max(), xs_all.min() + 1))
    ticks, labels = _ticks(float(ys_all[ok].min()), float(ys_all[ok].max()), log)
    y0, y1 = min(ticks[0], float(ys_all[ok].min())), max(ticks[-1], float(ys_all[ok].max()))

    def px(x, y):
        return left + (x - x0) / (x1 - x0) * (width - left - right), top + (y1 - y) / (y1 - y0) * (
            height - top - bottom
        )

    parts = [f'<text x="{left}" y="16" class="title">{title}</text>']
    for value, text in zip(ticks, labels):
        _, py = px(x0, value)
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{py:.1f}" y2="{py:.1f}" class="grid"/>')
        parts.append(f'<text x="{left - 4}" y="{py + 3:.1f}" text-anchor="end">{text}</text>')
    for value in (x0, x1):
        qx, _ = px(value, y0)
        parts.append(f'<text x="{qx:.1f}" y="{height - 10}" text-anchor="middle">{value:g}</text>')
    parts.append(f'<text x="{(left + width) / 2:.0f}" y="{height - 10}" text-anchor="middle">step</text>')
    for label, xs, ys, colour in series:
        for run in _runs(np.asarray(xs, dtype=np.float64), _y(np.asarray(ys, dtype=np.float64), log)):
            points = " ".join("{:.1f},{:.1f}".format(*px(x, y)) for x, y in run)
            line = f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.2">'
            parts.append(f"{line}<title>{label}</title></polyline>")
    return f'<figure><svg class="chart" width="{width}" height="{height}">{"".join(parts)}</svg></figure>'


def _y(values: np.ndarray, log: bool) -> np.ndarray:
    if not log:
        return np.where(np.isfinite(values), values, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((values > 0) & np.isfinite(values), np.log10(np.where(values > 0, values, 1)), np.nan)


def _ticks(y0: float, y1: float, log: bool) -> tuple[list, list]:
    """Axis ticks (in the axis's units: log10 of the value on a log axis) and their labels, nice numbers that
    reach from at or below ``y0`` to at or above ``y1``: on a log axis over decades 1, 2 or 5 times a power of ten;
    else (and on a log axis spanning too little for 3 such ticks) equal steps of 1, 2 or 5 times a power of ten."""
    if log:
        for mantissas in ((1,), (1, 2, 5)):  # the fewest tick values that put at least 3 inside the data
            candidates = [
                (np.log10(m) + e, f"{m * 10.0**e:g}")
                for e in range(int(np.floor(y0)) - 1, int(np.ceil(y1)) + 2)
                for m in mantissas
            ]
            if sum(y0 <= t <= y1 for t, _ in candidates) >= 3:
                first = max(k for k, (t, _) in enumerate(candidates) if t <= y0 + 1e-12)
                last = min(k for k, (t, _) in enumerate(candidates) if t >= y1 - 1e-12)
                chosen = candidates[first : last + 1]
                return [t for t, _ in chosen], [text for _, text in chosen]
        values, labels = _linear_ticks(10**y0, 10**y1, positive=True)  # under a decade: even steps of the values
        return [float(np.log10(v)) for v in values], labels
    return _linear_ticks(y0, y1)


def _linear_ticks(low: float, high: float, count: int = 5, positive: bool = False) -> tuple[list, list]:
    """About ``count`` multiples of a step of 1, 2 or 5 times a power of ten, from the one at or below ``low`` to
    the one at or above ``high``, and their labels (as many decimals as the step has); a single value gets the
    step of its own magnitude on either side. ``positive``: no tick at or below 0 (a log axis)."""
    span = high - low if high > low else abs(high) or 1.0
    raw = span / (count - 1)
    power = 10.0 ** np.floor(np.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))
    first, last = int(np.floor(low / step + 1e-9)), int(np.ceil(high / step - 1e-9))
    if first == last:
        first, last = first - 1, last + 1
    if positive and first <= 0:
        first = 1
    decimals = max(0, -int(np.floor(np.log10(step) + 1e-9)))
    ticks = [k * step for k in range(first, last + 1)]
    return ticks, [f"{t:.{decimals}f}" for t in ticks]


def _runs(xs: np.ndarray, ys: np.ndarray) -> list:
    """The stretches of (x, y) points between non-finite y values (each of at least one point)."""
    runs, current = [], []
    for x, y in zip(xs, ys):
        if np.isfinite(y):
            current.append((x, y))
        elif current:
            runs.append(current)
            current = []
    return runs + ([current] if current else [])


def _heatmap(names: list, steps: list, values: np.ndarray, missing: np.ndarray, title: str) -> str:
    """An SVG of one row per parameter and one column per step, coloured on the log scale; grey where the value
    is missing or zero, red where NaN/inf."""
    if values.size == 0:
        return f"<p>{title}: no steps recorded</p>"
    rgb = _log_colours(values, missing)
    row, left, width = 13, 220, 640
    height = row * len(names)
    with np.errstate(divide="ignore", invalid="ignore"):
        positive = values[(values > 0) & np.isfinite(values)]
    scale = f"{positive.min():.1e} &hellip; {positive.max():.1e}" if positive.size else "no positive values"
    labels = "".join(
        f'<text x="{left - 6}" y="{k * row + row - 3 + 20}" text-anchor="end">{html.escape(n)}</text>'
        for k, n in enumerate(names)
    )
    return (
        f'<figure><svg class="heatmap" width="{left + width + 10}" height="{height + 40}">'
        f'<text x="{left}" y="14" class="title">{title} [{scale}]</text>{labels}'
        f'<image x="{left}" y="20" width="{width}" height="{height}" preserveAspectRatio="none" href="{_png(rgb)}"/>'
        f'<text x="{left}" y="{height + 34}">step {steps[0]}</text>'
        f'<text x="{left + width}" y="{height + 34}" text-anchor="end">step {steps[-1]}</text></svg></figure>'
    )


def _log_colours(values: np.ndarray, missing: np.ndarray) -> np.ndarray:
    good = (values > 0) & np.isfinite(values) & ~missing
    logs = np.log10(np.where(good, values, 1.0))
    low, high = (logs[good].min(), logs[good].max()) if good.any() else (0.0, 1.0)
    rgb = flow_scale_colours((logs - low) / (high - low) if high > low else np.full(values.shape, 0.5))
    rgb[~good] = _rgb(DEAD_COLOUR)
    rgb[~np.isfinite(values) & ~missing & ~np.isnan(values)] = _rgb(NONFINITE_COLOUR)
    rgb[np.isnan(values) & ~missing] = _rgb(NONFINITE_COLOUR)
    return rgb


def _attention_rgb(weights: np.ndarray) -> np.ndarray:
    top = float(weights.max()) if weights.size else 0.0
    return flow_scale_colours(weights / top if top > 0 else weights)


def _rgb(colour: str) -> np.ndarray:
    return np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.uint8)


def _gradient_css() -> str:
    return ",".join("#" + "".join(f"{c:02x}" for c in rgb) for rgb in flow_scale_colours(np.linspace(0, 1, 5)))


def _png(rgb: np.ndarray) -> str:
    """A data: URI of the (H, W, 3) uint8 image as PNG (zlib only: no imaging library needed)."""
    height, width = rgb.shape[:2]
    raw = np.concatenate([np.zeros((height, 1), dtype=np.uint8), rgb.reshape(height, width * 3)], axis=1).tobytes()

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _asset(name: str) -> str:
    """The page's stylesheet or script (tape/tools/report.css, report.js), inlined into every report."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), name), encoding="utf-8") as f:
        text = f.read()
    colours = {"__STUB__": STUB_COLOUR, "__NONFINITE__": NONFINITE_COLOUR, "__DEAD__": DEAD_COLOUR}
    for placeholder, colour in colours.items():
        text = text.replace(placeholder, colour)
    return text
