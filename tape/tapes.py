"""Execution tapes, after SKaiNET's: record op applications, replay, prune, copy, export the DAG.

``ExecutionTape`` lists every op applied while it records (``operations``), whether or not anything
needs a gradient. ``GradientTape`` adds ``watch`` and ``compute_gradients(targets, sources)``, which runs
the shared reverse pass restricted to the ops this tape recorded (ops run while it was stopped count
as constants). ``TapeStack`` nests tapes; ``with tape:`` pushes and records, leaving pops and stops.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .autodiff import reverse_pass, seed_gradients
from .errors import ReplayError
from .recording import bind_call, regroup, run_op
from .registry import get_op
from .state import STATE, no_grad
from .tensors import Tensor

__all__ = [
    "TensorSpec",
    "RecordedOp",
    "TapeGraph",
    "GraphView",
    "flow_colour",
    "flow_status",
    "ExecutionTape",
    "GradientTape",
    "TapeStack",
    "tape_stack",
]


class TensorSpec(NamedTuple):
    """What the tape knows of a tensor: its id, shape, dtype and requires_grad."""

    id: int
    shape: tuple
    dtype: np.dtype
    requires_grad: bool

    @classmethod
    def of(cls, t: Tensor | None):
        return None if t is None else cls(t.id, t.shape, t.dtype, t.requires_grad)


@dataclass
class RecordedOp:
    """One op application on a tape."""

    index: int  # order on this tape
    op_name: str
    inputs: tuple  # TensorSpec per tensor input (None for an absent optional input)
    output: TensorSpec | None  # None for an op that returned no output (unbind of an empty dim)
    attributes: dict
    node: object = field(default=None, repr=False)  # the reverse-pass Node, when a gradient was needed
    seq_lens: tuple = ()  # lengths of the op's sequence parameters (concat's tensors), if it has any
    outputs: tuple = ()  # TensorSpec of every output (ops with several outputs); ``output`` is the first

    @property
    def output_specs(self) -> tuple:
        """Every output's TensorSpec (none for an op that returned no output)."""
        if self.outputs or self.output is None:
            return self.outputs
        return (self.output,)

    @property
    def backward_stubbed(self) -> bool:
        return bool(get_op(self.op_name).stubbed_inputs)


@dataclass
class TapeGraph:
    """The recorded DAG. Op nodes are indices into ``ops``; an edge (producer, consumer, tensor id) exists
    only where the consumer really reads the producer's output. Tensors produced outside the tape are
    ``inputs``; ``input_edges`` are (tensor id, consumer index)."""

    ops: list
    edges: list
    inputs: dict  # tensor id -> TensorSpec
    input_edges: list


class ExecutionTape:
    """Records op applications while recording is on."""

    def __init__(self):
        self._ops: list[RecordedOp] = []
        self._externals: dict[int, Tensor] = {}  # tensors read by the tape but not produced on it
        self._produced: set[int] = set()
        self.is_recording = False

    # -- recording -----------------------------------------------------------------------------------------
    def start_recording(self) -> None:
        if not self.is_recording:
            self.is_recording = True
            self._owner_tapes = STATE.recording_tapes  # this thread's list: recording belongs to the thread
            self._owner_tapes.append(self)
            self._on_start()

    def stop_recording(self) -> None:
        if self.is_recording:
            self.is_recording = False
            self._owner_tapes.remove(self)
            self._on_stop()

    def _on_start(self):
        pass

    def _on_stop(self):
        pass

    def has_seen(self, t) -> bool:
        """Whether a recorded op produced or read tensor ``t`` (an in-place change of it could not be replayed)."""
        return t.id in self._produced or t.id in self._externals

    def _record(self, op, tensors, attrs, result, node, seq_lens=()) -> None:
        for t in tensors:
            if t is not None and t.id not in self._produced and t.id not in self._externals:
                self._externals[t.id] = t
        results = result if isinstance(result, tuple) else (result,)
        self._produced.update(r.id for r in results)
        specs = tuple(TensorSpec.of(r) for r in results)
        first = specs[0] if specs else None  # an op may return no output at all (unbind of an empty dim)
        self._ops.append(
            RecordedOp(
                len(self._ops),
                op.name,
                tuple(TensorSpec.of(t) for t in tensors),
                first,
                dict(attrs),
                node,
                seq_lens,
                specs if len(specs) != 1 else (),
            )
        )

    def __enter__(self):
        tape_stack.push(self)
        self.start_recording()
        return self

    def __exit__(self, *exc):
        self.stop_recording()
        tape_stack.pop(self)
        return False

    @property
    def operations(self) -> list[RecordedOp]:
        return list(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def clear(self) -> None:
        self._ops.clear()
        self._externals.clear()
        self._produced.clear()

    # -- transformations -----------------------------------------------------------------------------------
    def copy(self) -> ExecutionTape:
        """An independent tape holding the same recorded ops (not recording)."""
        new = type(self).__new__(type(self))
        new.__dict__.update({k: v for k, v in self.__dict__.items()})
        new._ops = list(self._ops)
        new._externals = dict(self._externals)
        new._produced = set(self._produced)
        new.is_recording = False
        new._copy_extra(self)
        return new

    def _copy_extra(self, other):
        pass

    def prune(self, keep_outputs) -> ExecutionTape:
        """A copy keeping only the ops the given outputs (tensors or ids) depend on -- which is also all
        their gradients need. Dead ops are dropped; order and indices are renumbered."""
        if isinstance(keep_outputs, Tensor | int | str | bytes) or not hasattr(keep_outputs, "__iter__"):
            raise TypeError(
                f"prune: argument 'keep_outputs' expected a sequence of Tensors or tensor ids, got "
                f"{type(keep_outputs).__name__}"
            )
        wanted = set()
        for k, t in enumerate(keep_outputs):
            if isinstance(t, bool) or not isinstance(t, Tensor | int | np.integer):
                raise TypeError(
                    f"prune: argument 'keep_outputs' expected Tensors or tensor ids (ints), got "
                    f"{type(t).__name__} {t!r} at position {k}"
                )
            wanted.add(t.id if isinstance(t, Tensor) else int(t))
        produced = {spec.id for rec in self._ops for spec in rec.output_specs}
        missing = wanted - produced - set(self._externals)
        if missing:
            raise ValueError(f"prune: tensor id(s) {sorted(missing)} are not on this tape")
        kept = []
        for rec in reversed(self._ops):
            if any(spec.id in wanted for spec in rec.output_specs):
                kept.append(rec)
                wanted.update(spec.id for spec in rec.inputs if spec is not None)
        new = self.copy()
        new._ops = [dataclasses.replace(r, index=i) for i, r in enumerate(reversed(kept))]
        new._produced = {spec.id for r in new._ops for spec in r.output_specs}
        needed = {s.id for r in new._ops for s in r.inputs if s is not None}
        new._externals = {k: v for k, v in self._externals.items() if k in needed}
        return new

    def replay(self, inputs: dict | None = None) -> dict[int, np.ndarray]:
        """Re-execute the recorded ops through the registry. ``inputs`` maps an input tensor (or its id) to
        a new value; inputs not given keep their current value. Returns {tensor id: array} for every
        output. Nothing is recorded and no gradient is tracked: each op runs through eager's own
        ``bind_call`` + ``run_op`` (never a compiled step's trace), under no_grad, with no tape recording."""
        values = dict(self._externals)
        for key, value in (inputs or {}).items():
            tid, tensor = self._replay_input(key, value)
            values[tid] = tensor
        outputs: dict[int, np.ndarray] = {}
        saved_tapes = STATE.recording_tapes
        STATE.recording_tapes = []  # a replay is not recorded on the tapes that are recording now
        try:
            with no_grad():
                for rec in self._ops:
                    op = _replayed_op(rec)
                    tensors, attrs, bound, seq_lens = bind_call(
                        op, (), {**_replay_args(op, rec, values), **rec.attributes}
                    )
                    out = run_op(op, tensors, attrs, bound, seq_lens)
                    produced = out if isinstance(out, tuple) else (out,)
                    if len(produced) != len(rec.output_specs):
                        raise ReplayError(
                            f"replay: op '{rec.op_name}' (tape index {rec.index}) gave {len(produced)} outputs where "
                            f"{len(rec.output_specs)} were recorded (its output count depends on the input's shape)"
                        )
                    for spec, t in zip(rec.output_specs, produced):
                        values[spec.id] = t
                        outputs[spec.id] = t._data
        finally:
            STATE.recording_tapes = saved_tapes
        return outputs

    def _replay_input(self, key, value) -> tuple[int, Tensor]:
        """A replay input as (the tape input's id, a Tensor of its recorded shape and dtype)."""
        if not isinstance(key, Tensor | int) or isinstance(key, bool):
            raise ReplayError(f"replay: inputs are keyed by an input Tensor or its id, got {type(key).__name__}")
        tid = key.id if isinstance(key, Tensor) else int(key)
        if tid not in self._externals:
            raise ReplayError(
                f"replay: tensor id {tid} is not an input of this tape (inputs: {sorted(self._externals)})"
            )
        recorded = self._externals[tid]
        try:
            array = np.array(value._data if isinstance(value, Tensor) else value, copy=True)
        except ValueError as e:
            raise ReplayError(f"replay: the value for input #{tid} is not an array: {e}") from None
        if array.shape != recorded.shape:
            raise ReplayError(f"replay: input #{tid} was recorded with shape {recorded.shape}, got {array.shape}")
        if array.dtype != recorded.dtype:
            if array.dtype.kind == recorded.dtype.kind == "f" or isinstance(value, Tensor | np.ndarray):
                raise ReplayError(
                    f"replay: input #{tid} was recorded as {recorded.dtype}, got {array.dtype}; "
                    f"replay never changes a graph's dtype"
                )
            array = array.astype(recorded.dtype)  # Python scalars and lists take the recorded dtype
        return tid, Tensor._wrap(array)

    # -- graph export --------------------------------------------------------------------------------------
    def to_graph(self) -> TapeGraph:
        producer: dict[int, int] = {}  # tensor id -> index of the op that produced it
        edges, input_edges, inputs = [], [], {}
        for rec in self._ops:
            for spec in rec.inputs:
                if spec is None:
                    continue
                if spec.id in producer:
                    edges.append((producer[spec.id], rec.index, spec.id))
                else:
                    inputs[spec.id] = spec
                    input_edges.append((spec.id, rec.index))
            for spec in rec.output_specs:
                producer[spec.id] = rec.index
        return TapeGraph(list(self._ops), edges, inputs, input_edges)

    def to_dot(self, name: str = "tape", view: GraphView | None = None) -> str:
        """Graphviz source of the DAG: boxes for ops (with output shape), ovals for input tensors, edges
        labelled with the tensor's shape; an op whose backward is a stub is filled red. ``view`` adds names
        (module paths instead of tensor ids), call sites (tooltips), module clusters and gradient flow."""
        graph = self.to_graph()
        view = view or GraphView()
        scale = view.flow_scale()
        nodes = {}
        for tid, spec in graph.inputs.items():
            nodes[f"t{tid}"] = self._input_dot(tid, spec, view, scale)
        for rec in graph.ops:
            nodes[f"op{rec.index}"] = _op_dot(rec, view, scale)
        lines = [f"digraph {name} {{", "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];']
        lines += _clustered(nodes, view.modules)
        for tid, consumer in graph.input_edges:
            lines.append(f"  t{tid} -> op{consumer}{_edge_dot(graph.inputs[tid], False, view, scale)};")
        for producer, consumer, tid in graph.edges:
            spec = next(s for s in graph.ops[producer].output_specs if s.id == tid)
            lines.append(f"  op{producer} -> op{consumer}{_edge_dot(spec, True, view, scale)};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def _input_dot(self, tid: int, spec: TensorSpec, view: GraphView, scale) -> str:
        tensor = self._externals.get(tid)
        label = view.names.get(tid) or (tensor.name if tensor is not None and tensor.name else f"#{tid}")
        style = ', style=filled, fillcolor="#dbeafe"' if spec.requires_grad else ""
        if view.flow is not None and spec.requires_grad:
            colour, text = flow_colour(view.flow.get(tid), scale)
            style = f', style=filled, fillcolor="{colour}", fontcolor="{text_colour(colour)}"'
            label += f"\\n{text}"
        return f'shape=ellipse, label="{_quoted(label)}\\n{_shape(spec)}"{style}'

    def render(self, path: str, format: str | None = None, view: GraphView | None = None) -> str:
        """Render the DAG with Graphviz (the ``graphviz`` package, the ``graph`` extra, and the ``dot`` program);
        returns the written path. Without either it raises saying what to install, and leaves no file;
        ``to_dot()`` needs neither."""
        import os

        try:
            import graphviz
        except ImportError:
            raise ImportError(
                "ExecutionTape.render needs the graphviz package: pip install -e '.[graph]' in a clone of this "
                "repository (or: pip install graphviz), and Graphviz's dot program; to_dot() gives the DOT text "
                "without them"
            ) from None
        stem, ext = os.path.splitext(path)
        source = graphviz.Source(self.to_dot(view=view))
        try:
            return source.render(stem, format=format or ext.lstrip(".") or "svg", cleanup=True)
        except graphviz.ExecutableNotFound:
            if os.path.exists(stem):  # the DOT source graphviz wrote before it looked for dot
                os.remove(stem)
            raise RuntimeError(
                "ExecutionTape.render needs Graphviz's dot program on PATH (apt-get install graphviz, or brew "
                "install graphviz); to_dot() gives the DOT text without it"
            ) from None


@dataclass
class GraphView:
    """What a DAG drawing shows beyond the tape itself, each keyed by tensor id or node key (``t<id>`` for an
    input tensor, ``op<index>`` for an op): ``names`` (tensor id -> module path, e.g. a parameter's
    ``blocks.0.attn.qkv.weight`` or a module's output ``blocks.0.attn``), ``sites`` (op index -> the call site,
    ``file:line``), ``modules`` (node key -> the module path it ran in: the clusters) and ``flow`` (tensor id
    -> the norm of its gradient after a backward; an id absent from it got no gradient at all)."""

    names: dict = field(default_factory=dict)
    sites: dict = field(default_factory=dict)
    modules: dict = field(default_factory=dict)
    flow: dict | None = None

    def flow_scale(self) -> tuple[float, float]:
        """The (low, high) finite positive gradient norms: the ends of the log colour scale."""
        norms = np.array([v for v in (self.flow or {}).values() if np.isfinite(v) and v > 0], dtype=np.float64)
        return (float(norms.min()), float(norms.max())) if norms.size else (1.0, 1.0)


# The gradient-flow colours: a norm on a log scale through viridis' stops, from the smallest norm of the graph
# (dark blue) to the largest (yellow); exactly zero or no gradient at all is grey (a dead path), NaN or inf red.
_FLOW_STOPS = np.array(
    [[0x44, 0x01, 0x54], [0x3B, 0x52, 0x8B], [0x21, 0x91, 0x8C], [0x5E, 0xC9, 0x62], [0xFD, 0xE7, 0x25]]
)
DEAD_COLOUR, NONFINITE_COLOUR, STUB_COLOUR = "#d1d5db", "#ef4444", "#fecaca"


def flow_status(norm: float | None) -> str:
    """'missing' (no gradient reached it), 'zero' (exactly zero), 'nonfinite' (NaN or inf) or 'ok'."""
    if norm is None:
        return "missing"
    if not np.isfinite(norm):
        return "nonfinite"
    return "zero" if norm == 0 else "ok"


def flow_colour(norm: float | None, scale: tuple[float, float]) -> tuple[str, str]:
    """(fill colour, label text) of one gradient norm on the log scale ``scale`` = (low, high)."""
    status = flow_status(norm)
    if status != "ok":
        colour = NONFINITE_COLOUR if status == "nonfinite" else DEAD_COLOUR
        return colour, {"missing": "no gradient", "zero": "grad = 0", "nonfinite": f"grad {norm}"}[status]
    assert norm is not None
    low, high = np.log10(scale[0]), np.log10(scale[1])
    t = 0.5 if high == low else float(np.clip((np.log10(norm) - low) / (high - low), 0, 1))
    rgb = flow_scale_colours(np.array(t))
    return "#" + "".join(f"{c:02x}" for c in rgb), f"|g| {norm:.2e}"


def flow_scale_colours(t: np.ndarray) -> np.ndarray:
    """The colour scale at positions ``t`` in [0, 1] (any shape): uint8 RGB in a last axis of 3."""
    stops = np.linspace(0, 1, len(_FLOW_STOPS))
    rgb = [np.interp(np.clip(t, 0, 1), stops, _FLOW_STOPS[:, c]) for c in range(3)]
    return np.rint(np.stack(rgb, axis=-1)).astype(np.uint8)


def text_colour(fill: str) -> str:
    """Black or white, whichever reads better on ``fill`` ('#rrggbb')."""
    r, g, b = (int(fill[i : i + 2], 16) for i in (1, 3, 5))
    return "#000000" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#ffffff"


def _op_dot(rec: RecordedOp, view: GraphView, scale) -> str:
    stubbed = get_op(rec.op_name).stubbed_inputs if _registered(rec.op_name) else ()
    out = rec.output
    name = view.names.get(out.id) if out is not None else None
    label = rec.op_name if name is None else f"{name}\\n{rec.op_name}"
    fill = "#f3f4f6"
    if view.flow is not None and out is not None and out.requires_grad:
        fill, text = flow_colour(view.flow.get(out.id), scale)
        label += f"\\n{text}"
    if stubbed:
        style = f', style="filled,bold", fillcolor="{STUB_COLOUR}", color="#b91c1c", penwidth=2'
        label += "\\nBACKWARD STUB: " + ", ".join(stubbed)
    else:
        style = f', style=filled, fillcolor="{fill}", fontcolor="{text_colour(fill)}"'
    site = view.sites.get(rec.index)
    tooltip = f', tooltip="{_quoted(site)}"' if site else ""
    return f'shape=box, label="{_quoted(label)}\\n{_shape(out)}"{style}{tooltip}'


def _edge_dot(spec: TensorSpec, labelled: bool, view: GraphView, scale) -> str:
    attrs = [f'label="{_shape(spec)}"', "fontsize=8"] if labelled else []
    if view.flow is not None and spec.requires_grad:
        colour, text = flow_colour(view.flow.get(spec.id), scale)
        attrs += [f'color="{colour}"', "penwidth=2", f'tooltip="{text}"']
    return f" [{', '.join(attrs)}]" if attrs else ""


def _clustered(nodes: dict, modules: dict) -> list:
    """DOT lines of ``nodes`` ({key: attributes}), nested in one ``subgraph cluster`` per module path."""
    tree: dict = {}  # path part -> subtree; the key None lists the node keys at that level
    for key in nodes:
        level = tree
        for part in modules.get(key, "").split(".") if modules.get(key) else ():
            level = level.setdefault(part, {})
        level.setdefault(None, []).append(key)
    lines: list = []
    counter = iter(range(len(nodes) * 4 + 1))

    def emit(level: dict, path: str, indent: str) -> None:
        for key in level.get(None, ()):
            lines.append(f"{indent}{key} [{nodes[key]}];")
        for part, sub in level.items():
            if part is None:
                continue
            inner = f"{path}.{part}" if path else part
            lines.append(f'{indent}subgraph cluster_{next(counter)} {{ label="{_quoted(inner)}"; style=rounded;')
            emit(sub, inner, indent + "  ")
            lines.append(f"{indent}}}")

    emit(tree, "", "  ")
    return lines


def _quoted(text: str) -> str:
    return text.replace('"', '\\"')


def _replayed_op(rec: RecordedOp):
    try:
        return get_op(rec.op_name)
    except KeyError:
        raise ReplayError(f"replay: op '{rec.op_name}' (tape index {rec.index}) is no longer registered") from None


def _replay_args(op, rec: RecordedOp, values: dict) -> dict:
    """A recorded op's tensor arguments by parameter name (a list for a sequence parameter), from ``values``."""
    args: list[Tensor | None] = []
    for spec in rec.inputs:
        if spec is not None and spec.id not in values:
            raise ReplayError(
                f"replay: op '{rec.op_name}' (tape index {rec.index}) reads tensor #{spec.id}, which is neither an "
                f"input nor produced earlier on the tape"
            )
        args.append(None if spec is None else values[spec.id])
    return dict(zip(op.input_names, regroup(op, args, rec.seq_lens) if rec.seq_lens else args))


def _registered(name: str) -> bool:
    try:
        get_op(name)
        return True
    except KeyError:
        return False


def _shape(spec) -> str:
    return "(no output)" if spec is None else f"{spec.dtype}{list(spec.shape)}"


_LIVE_GRADIENT_TAPES: weakref.WeakSet = weakref.WeakSet()


class GradientTape(ExecutionTape):
    """An ExecutionTape that can differentiate what it recorded.

    ``watch(tensors)`` makes floating tensors that do not require grad count as differentiable while the
    tape records. ``compute_gradients(targets, sources)`` returns one gradient per source, in order:
    ``None`` for a source the targets do not depend on, or zeros when ``unconnected="zero"``. A
    non-persistent tape lets go of its recorded nodes after the first call; a second call raises.
    """

    records_inplace = True  # its nodes are what it differentiates: an in-place op's node is one of them

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True):
        super().__init__()
        self.persistent = persistent
        self._watched: dict[int, Tensor] = {}
        self._nodes: set = set()
        self._used = False
        _LIVE_GRADIENT_TAPES.add(self)

    def _copy_extra(self, other):
        self._watched = dict(other._watched)
        self._nodes = set(other._nodes)

    def _on_start(self):
        STATE.watched.update(self._watched)

    def _on_stop(self):
        self._refresh_watched()

    @staticmethod
    def _refresh_watched():
        STATE.watched = {
            tid for tape in STATE.recording_tapes if isinstance(tape, GradientTape) for tid in tape._watched
        }

    def watch(self, tensors) -> None:
        for t in tensors if isinstance(tensors, list | tuple) else [tensors]:
            if not isinstance(t, Tensor):
                raise TypeError(f"watch: expected Tensors, got {type(t).__name__}")
            if t.dtype.kind != "f":
                raise TypeError(f"watch: only floating tensors can be differentiated, got {t.dtype}")
            self._watched[t.id] = t
        if self.is_recording:
            STATE.watched.update(self._watched)

    @property
    def watched(self) -> list[Tensor]:
        return list(self._watched.values())

    def _record(self, op, tensors, attrs, result, node, seq_lens=()) -> None:
        super()._record(op, tensors, attrs, result, node, seq_lens)
        if node is not None:
            self._nodes.update(n for n in (node.siblings or (node,)) if n is not None)

    def compute_gradients(
        self, targets, sources, output_gradients=None, unconnected: str = "none", create_graph: bool = False
    ):
        """Gradients of the sum of ``targets`` with respect to each of ``sources``. With ``create_graph`` they
        are Tensors whose computation is recorded (on this thread's recording tapes too, so an outer
        GradientTape can differentiate them again)."""
        if unconnected not in ("none", "zero"):
            raise ValueError(f"compute_gradients: unconnected must be 'none' or 'zero', got {unconnected!r}")
        if self._used and not self.persistent:
            raise RuntimeError(
                "compute_gradients: this GradientTape is not persistent and was already used; "
                "create it with persistent=True to call compute_gradients more than once"
            )
        single_target = isinstance(targets, Tensor)
        targets = [targets] if single_target else list(targets)
        single_source = isinstance(sources, Tensor)
        sources = [sources] if single_source else list(sources)
        for s in sources:
            if not isinstance(s, Tensor):
                raise TypeError(f"compute_gradients: sources must be Tensors, got {type(s).__name__}")
        if output_gradients is not None and single_target:
            output_gradients = [output_gradients]
        seeds = seed_gradients(targets, output_gradients, "compute_gradients", create_graph)
        found = reverse_pass(
            targets, seeds, retain_graph=True, sources=sources, allowed=self._nodes, create_graph=create_graph
        )
        self._used = True
        if not self.persistent:
            self._release(free_saved=not create_graph)
        grads = []
        for s in sources:
            g = found.get(s.id)
            if g is None and unconnected == "zero":
                g = np.zeros(s.shape, dtype=s.dtype)
            grads.append(g if g is None or isinstance(g, Tensor) else Tensor._wrap(g))
        return grads[0] if single_source else grads

    def _release(self, free_saved: bool = True) -> None:
        """After its one use a non-persistent tape frees the saved arrays of the nodes it recorded -- unless
        another live GradientTape (an enclosing one) also recorded them -- so memory stays flat over steps
        even when the caller keeps its loss tensors. Not after ``create_graph``: the gradients' own graph runs
        through those nodes (an enclosing transform differentiates them again); they live as long as it does."""
        if free_saved:
            others = [t for t in list(_LIVE_GRADIENT_TAPES) if t is not self and not t._used]
            for node in self._nodes:
                if not any(node in t._nodes for t in others):
                    node.residuals = node.inputs = None
        self._nodes = set()
        for rec in self._ops:
            rec.node = None

    gradient = compute_gradients


class TapeStack:
    """The stack of active tapes, innermost last; ``with tape:`` pushes and pops. Each thread has its own."""

    def __init__(self):
        self._local = threading.local()

    @property
    def _tapes(self) -> list:
        tapes = getattr(self._local, "tapes", None)
        if tapes is None:
            tapes = self._local.tapes = []
        return tapes

    def push(self, tape: ExecutionTape) -> None:
        self._tapes.append(tape)

    def pop(self, expected: ExecutionTape | None = None) -> ExecutionTape:
        if not self._tapes:
            raise RuntimeError("TapeStack.pop: the stack is empty")
        if expected is not None and self._tapes[-1] is not expected:
            raise RuntimeError("TapeStack.pop: tapes must be closed innermost first")
        return self._tapes.pop()

    def current(self) -> ExecutionTape | None:
        return self._tapes[-1] if self._tapes else None

    def __len__(self) -> int:
        return len(self._tapes)


tape_stack = TapeStack()
