"""``tape.compile(..., backend="onnxruntime")``: a plan's forward, loss and gradients as ONE ONNX graph held in an
ONNX Runtime session (docs/compile.md, "Two backends").

The graph is built from the plan's own recording, not by running ``fn`` again: the recorded op calls are replayed
on an export tape with grad enabled and the backward rules run on Tensors (create_graph), every tensor the plan
reads from outside (parameters, batch tensors, closed-over arrays, Python numbers made constants) a graph input
-- fed on every call with this call's arrays, never baked. What the graph does hold is what the plan's key
compares (op, attributes, shapes, dtypes) plus what a lowering bakes from an integer-array attribute (an index):
those arrays are kept and compared by value on every call. tape.onnx's value check refuses a graph holding a
constant computed from the values it is fed. A call that differs in any of this, a plan that cannot be
lowered (warned once, naming the op) or a call with backward hooks runs the numpy plan instead.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

from .hooks import HOOKS
from .tensors import Tensor, tensor

__all__ = ["OrtProgram", "build_program", "require_onnxruntime", "checked", "program", "result"]


def checked(backend: str) -> str:
    """``backend`` when it is one tape.compile has (onnxruntime: importable), else the error."""
    if backend not in ("numpy", "onnxruntime"):
        raise ValueError(f"compile: argument 'backend' expected 'numpy' or 'onnxruntime', got {backend!r}")
    if backend == "onnxruntime":
        require_onnxruntime()
    return backend


def threads() -> int | None:
    """ONNX Runtime's intra-op threads: the kernels' rule, the one place minitape sets a thread count
    (ops/_kernels/runtime.threads: the CPUs, capped by numpy's BLAS threads -- OMP_NUM_THREADS, threadpoolctl's
    limits), read from the op library the plan's ops come from (loaded: they ran; the engine does not import it)."""
    runtime = sys.modules.get("ops._kernels.runtime")
    return None if runtime is None else int(runtime.threads())


def program(step, records, loss):
    """The plan's OrtProgram for a step compiled with backend="onnxruntime" (None: numpy's steps)."""
    return build_program(records, loss, step.providers, threads()) if step.backend == "onnxruntime" else None


def result(step, loss, value, grads):
    """As ``CompiledStep._result``: the loss placeholder fn holds given its value; each leaf's gradient accumulated
    into ``.grad`` as eager's reverse pass does (an array added to the one there)."""
    from .autodiff import add_gradients
    from .tensors import _readonly

    loss.__class__ = Tensor
    loss._data, loss._node, loss._requires_grad = _readonly(np.asarray(value)), None, False
    for leaf, g in grads:
        leaf.grad = Tensor._wrap(g if leaf.grad is None else add_gradients(leaf.grad._data, g))
    return Tensor._wrap(loss._data), [p.grad for p in step.params]


def require_onnxruntime():
    try:
        import onnx  # noqa: F401  (the export needs it)
        import onnxruntime
    except ImportError as e:
        raise ImportError(
            f"tape.compile(backend='onnxruntime') needs onnx and onnxruntime ({e}); install them with "
            "pip install -e '.[onnx]' in a clone of this repository"
        ) from None
    return onnxruntime


def _outside(entries_tensors, is_internal):
    """(the outside tensors in order of first read, the slot pattern: per (entry, position) the input index)."""
    order: dict[int, int] = {}
    tensors: list = []
    pattern: list = []
    for tensors_k in entries_tensors:
        row = []
        for t in tensors_k:
            if t is None or is_internal(t):
                row.append(-1)
                continue
            if t.id not in order:
                order[t.id] = len(tensors)
                tensors.append(t)
            row.append(order[t.id])
        pattern.append(tuple(row))
    return tensors, tuple(pattern)


def _int_arrays(attrs) -> list:
    """The integer and bool arrays among an op call's attributes (nested in tuples / lists): values a lowering may
    bake, compared on every call."""
    found: list = []

    def visit(v):
        if _is_int_array(v):
            found.append(v)
        elif isinstance(v, tuple | list):
            for x in v:
                visit(x)

    for v in (attrs or {}).values():
        visit(v)
    return found


class OrtProgram:
    """A plan's training graph in an ONNX Runtime session: ``matches(entries)`` this call's inputs (None: run the
    numpy plan instead), ``run`` them."""

    def __init__(self, session, pattern, int_attrs, grad_inputs, n_inputs, unused):
        self.session, self.pattern, self.int_attrs = session, pattern, int_attrs
        self.grad_inputs = grad_inputs  # indices (into the outside tensors) of the leaves that require grad
        self.input_names = [i.name for i in session.get_inputs()]
        self.n_inputs = n_inputs
        self.unused = unused  # positions in grad_inputs the loss does not reach: no .grad, as in eager
        self.feeds: list = []  # the graph's per-run inputs (tape.onnx.Graph.feed): (name, attributes, compute)
        self.drawn: dict = {}  # a value the build call drew (a dropout seed) -> (its op call's index, attribute)
        # True when the graph holds none of the integer-array attributes (they reach it only as per-run inputs):
        # they are then not compared; ``arrays``: each op call's (index, name, array at build) of them
        self.fed_arrays, self.arrays = False, []

    def matches(self, entries) -> tuple | None:
        """(this call's outside tensors, the per-run inputs made from its attributes) when its pattern and the
        integer attributes the graph holds equal the graph's, else None: what ``run`` takes."""
        from .compile import _Pending

        tensors, pattern = _outside((e[1] for e in entries), lambda t: type(t) is _Pending)
        if pattern != self.pattern or len(tensors) != self.n_inputs:
            return None
        now = [(e[0].name, a) for e in entries for a in _int_arrays(e[2])]
        if len(now) != len(self.int_attrs):
            return None
        for (name, a), b in zip(now, self.int_attrs, strict=True):
            if a.shape != b.shape or a.dtype != b.dtype or (not self.fed_arrays and not np.array_equal(a, b)):
                _warn(
                    f"tape.compile(backend='onnxruntime'): op '{name}' takes an integer array attribute whose values "
                    "differ from those its ONNX graph was built with (the graph holds them), so such calls run the "
                    "numpy plan (exact)"
                )
                return None
        if HOOKS and any(t.id in HOOKS for t in tensors):
            return None
        try:  # a value the build call drew or an integer attribute it had: this call's instead
            feeds = {name: compute({k: self._now(v, entries) for k, v in a.items()}) for name, a, compute in self.feeds}
        except LookupError as e:
            _warn(f"tape.compile(backend='onnxruntime'): such calls run the numpy plan (exact): {e}")
            return None
        return tensors, feeds

    def run(self, matched) -> tuple[np.ndarray, list]:
        """(the loss array, [(leaf, gradient array)]): the session on this call's arrays (C order; a 0-D array stays
        0-D -- np.ascontiguousarray would make it (1,)) and the per-run inputs."""
        tensors, feeds = matched
        feed = {name: np.asarray(t._data, order="C") for name, t in zip(self.input_names, tensors, strict=False)}
        feed.update((name, np.asarray(x, order="C")) for name, x in feeds.items())
        out = self.session.run(None, feed)
        pairs = zip(self.grad_inputs, out[1:], strict=True)
        return out[0], [(tensors[k], g) for j, (k, g) in enumerate(pairs) if j not in self.unused]

    def _now(self, value, entries):
        """``value`` of an attribute at build time as this call has it: a drawn seed is this call's draw; an integer
        array the op calls that had it at build now have (LookupError when none did, or they now differ)."""
        if type(value) is int and value in self.drawn:
            k, name = self.drawn[value]
            return entries[k][2][name]
        if isinstance(value, tuple | list) and _int_arrays({"": value}):
            raise LookupError("an integer array nested in an attribute the ONNX graph is fed cannot be matched")
        if not _is_int_array(value):
            return value
        places = [(k, n) for k, n, a in self.arrays if a.shape == value.shape and np.array_equal(a, value)]
        now = [np.asarray(entries[k][2][n]) for k, n in places]
        if not now or any(x.shape != now[0].shape or not np.array_equal(x, now[0]) for x in now[1:]):
            raise LookupError(
                "integer array attributes that were equal when the ONNX graph was built (it feeds them as one) differ"
            )
        return now[0]


_WARNED: set = set()


def build_program(records, loss, providers, threads: int | None) -> OrtProgram | None:
    """The training graph of an eager call's recording (``_Trace.records``), or None with a warning (once per
    reason) when it cannot be lowered. A value the call drew (a dropout seed) may reach the graph only as a per-run
    input (``tape.onnx.Graph.feed``): with draws, the call is lowered again with other draws and a graph that
    changed is refused, as ``tape.onnx`` refuses one holding the values it is fed."""
    from .onnx import NotExportableError

    ort = require_onnxruntime()
    produced: set[int] = set()
    for record in records:
        result = record[3]
        produced.update(r.id for r in ((result,) if isinstance(result, Tensor) else tuple(result)))
    outside, pattern = _outside((r[1] for r in records), lambda t: t.id in produced)
    grad_inputs = [k for k, t in enumerate(outside) if t._requires_grad]
    int_attrs = [a.copy() for r in records for a in _int_arrays(r[2])]
    try:
        drawn = _drawn(records)
        model, unused, feeds = _training_graph(records, loss, outside, grad_inputs, {})
        if drawn and _nodes(_training_graph(records, loss, outside, grad_inputs, drawn)[0]) != _nodes(model):
            raise NotExportableError("a lowering holds a value the call drew (a random seed) as a constant")
        fed_arrays = bool(int_attrs) and _holds_no_arrays(records, loss, outside, grad_inputs, model)
    except Exception as e:  # not exportable (named), or a lowering failing: the numpy plan is exact
        _warn(f"tape.compile(backend='onnxruntime'): this plan runs on the numpy backend: {type(e).__name__}: {e}")
        return None
    session = _session(ort, model, providers, threads)
    if session is None:
        return None
    program = OrtProgram(session, pattern, int_attrs, grad_inputs, len(outside), set(unused))
    # graph inputs: the fed ones (in_k), then the leaves (param_j): in the outside tensors' order; then the feeds
    fed = [k for k, t in enumerate(outside) if not t._requires_grad]
    program.input_names = [""] * len(outside)
    for k, name in zip(fed + grad_inputs, [i.name for i in session.get_inputs()][: len(outside)], strict=True):
        program.input_names[k] = name
    program.feeds, program.drawn, program.fed_arrays = feeds, drawn, fed_arrays
    program.arrays = [(k, n, a.copy()) for k, r in enumerate(records) for n, a in r[2].items() if _is_int_array(a)]
    return program


def _is_int_array(v) -> bool:
    return isinstance(v, np.ndarray) and v.dtype.kind in "iub"


def _holds_no_arrays(records, loss, outside, grad_inputs, model) -> bool:
    """Whether the graph holds none of the call's integer-array attributes (lowered again with each of them at
    other values -- ``tape.onnx``'s probe values --, it is the same): they then reach it only as per-run inputs."""
    from .onnx import _other_values

    def other(v):
        if _is_int_array(v):
            return _other_values(v)
        return type(v)(other(x) for x in v) if isinstance(v, tuple | list) else v

    others = [[*r[:2], {k: other(v) for k, v in r[2].items()}, *r[3:]] for r in records]
    try:
        return _nodes(_training_graph(others, loss, outside, grad_inputs, {})[0]) == _nodes(model)
    except Exception:  # noqa: BLE001 -- the call refuses other values (a range check): they stay compared
        return False


def _training_graph(records, loss, outside, grad_inputs, redraw: dict):
    """``tape.onnx.training_graph`` of the records replayed on an export tape (fed: the outside tensors that need
    no gradient; the others leaves), each drawn value in ``redraw`` replaced by another."""
    from . import onnx as tonnx
    from .recording import regroup, run_op
    from .state import STATE

    fed = [k for k, t in enumerate(outside) if not t._requires_grad]
    leaves = [tensor(np.array(outside[k]._data, copy=True), requires_grad=True) for k in grad_inputs]

    def replay(*given):
        values: dict[int, Tensor] = {outside[k].id: t for k, t in zip(fed, given, strict=True)}
        values.update((outside[k].id, leaf) for k, leaf in zip(grad_inputs, leaves, strict=True))
        for op, tensors, attrs, result, _node, seq_lens, grad_enabled in records:
            if redraw:
                attrs = {k: (v + 1) % 2**63 if type(v) is int and v in redraw else v for k, v in attrs.items()}
            ins = [None if t is None else values[t.id] for t in tensors]
            previous, STATE.grad_enabled = STATE.grad_enabled, grad_enabled
            try:
                slot = regroup(op, ins, seq_lens) if seq_lens else ins
                bound = op.bind((), {**dict(zip(op.input_names, slot, strict=False)), **attrs})
                out = run_op(op, ins, attrs, bound, seq_lens)
            finally:
                STATE.grad_enabled = previous
            results = (result,) if isinstance(result, Tensor) else tuple(result)
            outs = (out,) if isinstance(out, Tensor) else tuple(out)
            values.update((r.id, o) for r, o in zip(results, outs, strict=True))
        return values[loss.id]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arrays = [np.array(outside[k]._data, copy=True) for k in fed]
        return tonnx.training_graph(replay, arrays, [f"in_{k}" for k in fed], leaves, feeds=True)


def _nodes(model) -> list:
    """A model's nodes and initializers, serialized: what two lowerings of a call must agree on."""
    return [x.SerializeToString() for x in (*model.graph.node, *model.graph.initializer)]


def _drawn(records) -> dict:
    """Each value the recorded call drew (an attribute its forward resolved: a dropout seed) -> (the op call's
    index, the attribute's name): a graph input made from it is made from that call's draw on every run. Two
    equal draws (2**-63 apart) could not be told apart: refused."""
    from .compile_guards import key_or_none
    from .onnx import NotExportableError
    from .recording import ResolvedAttributes

    drawn: dict = {}
    for k, record in enumerate(records):
        attrs = record[2]
        if isinstance(attrs, ResolvedAttributes):
            for name, v in attrs.items():
                if type(v) is int and key_or_none(v) != key_or_none(attrs.given.get(name)):
                    if v in drawn:
                        raise NotExportableError(
                            f"two of the call's random draws gave the same value ({v}: generators seeded alike?), "
                            "so the graph could not tell the masks made from them apart"
                        )
                    drawn[v] = (k, name)
    return drawn


def _session(ort, model, providers, threads):
    """An InferenceSession of ``model`` (None, warned, when ONNX Runtime cannot load it)."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    try:
        return ort.InferenceSession(
            model.SerializeToString(), options, providers=list(providers or ["CPUExecutionProvider"])
        )
    except Exception as e:  # no kernel for an op in this dtype
        _warn(f"tape.compile(backend='onnxruntime'): this plan runs on the numpy backend: ONNX Runtime: {e}")
        return None


def _warn(message: str) -> None:
    key = message.split("; called at")[0]
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=4)
