"""Export one recorded forward call to ONNX (run by ONNX Runtime or any other ONNX engine).

``export(fn_or_module, example_inputs, path)`` runs the call once on an ExecutionTape, then lowers every
recorded op through the lowering the op declared next to its forward, in its own module (``lowering(op, ...)``
below: an ONNX op type for a one-to-one mapping, a function building a small decomposition, or
``not_exportable="why"``). An op declared not exportable -- or a lowering that refuses an attribute it cannot
express (``NotExportable``) -- stops the export with an error naming the op, why, and the user's line that
called it.

Dynamic axes: a lowering may bake recorded sizes into the graph. ``_check_dynamic`` lowers the call again with
each dynamic input axis at up to three other sizes and refuses a graph that changed (naming the op, the axis and
the call site), so an exported model is never silently wrong at other sizes. Reading the values of a tensor
computed from an input (``.item()``, ``float(t)``, ``.numpy()``, ...) is refused (``_ExportTape.values_leave``):
the graph would hold the example's. Nested inputs and outputs are flattened in order. ``_Kept`` restores the
model (parameters, buffers, flags, generators, global random states) after the export, also when it refuses.
Integer and bool nodes ONNX Runtime has no kernel for are widened exactly or refused (tape/onnx_types.py).

Tensors the call read but did not produce become initializers: a Module's parameters and buffers under their
module paths (``blocks.0.attn.qkv.weight``), other constants as ``const_<k>``. The ``onnx`` package is
imported only by ``export`` (the op library imports this module at load time for ``lowering``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from .anomaly import user_frame
from .state import enable_grad, no_grad
from .tapes import ExecutionTape, RecordedOp
from .tensors import Tensor, as_tensor

__all__ = [
    "export",
    "lowering",
    "lowering_of",
    "not_exportable_reason",
    "edge_difference",
    "declares_lowering",
    "check_sample",
    "check_sample_gradients",
    "Graph",
    "Value",
    "NotExportable",
    "NotExportableError",
]

_NO_LOWERING = "no ONNX lowering is declared for it"


class NotExportable(Exception):  # noqa: N818  -- raised by a lowering, turned into NotExportableError
    """Raised by a lowering for an attribute value (or dtype) it cannot express in ONNX; says why."""


class NotExportableError(ValueError):
    """An op of the exported call cannot be lowered to ONNX: names the op, why, and the user's call site."""


class Value(str):
    """The ONNX name of an exported graph input that reached an op as an attribute (``key_padding_lengths``)."""


def lowering(
    op, how: str | Callable | None = None, *, not_exportable: str | None = None, edge_difference: str | None = None
) -> Callable | None:
    """Declare ``op``'s ONNX lowering, next to its forward: ``how`` is an ONNX op type taking the op's tensor
    inputs unchanged (and no attribute), or ``fn(graph, rec, *inputs) -> name | tuple of names`` with ``inputs``
    the ONNX names of the tensor inputs (None for an absent optional one) and ``rec`` the RecordedOp (shapes,
    dtypes, attributes). ``not_exportable="why"`` instead declares that ONNX cannot express the op, and why.
    ``edge_difference="where and why"``: the lowering is exact on ordinary values but ONNX Runtime's kernel
    gives other values at some edge values (inf or NaN inside a factorisation, ...); the coverage matrix shows
    the op ⚠ with the reason (and ❌ once the difference no longer shows)."""
    if (how is None) == (not_exportable is None) or (not_exportable is not None and not not_exportable.strip()):
        raise TypeError(f"lowering({op.name}): give either 'how' or a non-empty 'not_exportable' reason")
    if edge_difference is not None and (how is None or not edge_difference.strip()):
        raise TypeError(f"lowering({op.name}): 'edge_difference' is a non-empty reason beside 'how'")
    if isinstance(how, str):
        op_type = how

        def one_to_one(g: Graph, rec: RecordedOp, *inputs):
            return g.op(op_type, *inputs)

        one_to_one.__name__ = f"onnx_{op_type}"
        how = one_to_one
    op.onnx_lowering = how
    op.onnx_not_exportable = not_exportable
    op.onnx_edge_difference = edge_difference
    return how


def lowering_of(op) -> Callable | None:
    """The op's declared lowering, or None when it is not exportable (or declares nothing)."""
    return getattr(op, "onnx_lowering", None)


def not_exportable_reason(op) -> str | None:
    """Why the op is declared not exportable (None: it has a lowering, or declares nothing)."""
    return getattr(op, "onnx_not_exportable", None)


def edge_difference(op) -> str | None:
    """Where and why the op's exported model differs from its forward at edge values (None: nowhere)."""
    return getattr(op, "onnx_edge_difference", None)


def declares_lowering(op) -> bool:
    """Whether the op declared a lowering or why it has none (every registered op must)."""
    return lowering_of(op) is not None or not_exportable_reason(op) is not None


class Graph:
    """What a lowering builds with: ``op`` appends a node, ``const`` an initializer, ``feed`` a per-run input."""

    def __init__(self, helper, numpy_helper, feeds: bool = False):
        self._helper, self._numpy_helper = helper, numpy_helper
        self.nodes: list = []
        self.initializers: list = []
        # a compiled step's graph: [(input name, the op's attributes, compute(attributes) -> array)], else None
        self.feeds: list | None = [] if feeds else None
        self._fed: dict = {}  # a feed's key -> its input
        self._count = 0
        self.lowering: int | None = None  # the index of the recorded op being lowered
        self.owners: list = []  # per node, then per initializer: the recorded op that made it (None: the call)
        self.initializer_owners: list = []

    def fresh(self, stem: str = "t") -> str:
        self._count += 1
        return f"_{stem}{self._count}"

    def op(self, op_type: str, *inputs, outputs: int = 1, **attributes):
        """Append ``op_type(*inputs)`` (None: an absent optional input); its output name, or a tuple of them."""
        names = [self.fresh(op_type.lower()) for _ in range(outputs)]
        ins = ["" if i is None else i for i in inputs]
        self.nodes.append(self._helper.make_node(op_type, ins, names, name=names[0], **attributes))
        self.owners.append(self.lowering)
        return names[0] if outputs == 1 else tuple(names)

    def const(self, value, dtype=None, name: str | None = None) -> str:
        """An initializer holding ``value`` (in ``dtype`` when given)."""
        array = np.asarray(value, dtype=dtype)
        name = name or self.fresh("c")
        self.initializers.append(self._numpy_helper.from_array(np.array(array, order="C"), name))  # 0-D stays 0-D
        self.initializer_owners.append(self.lowering)
        return name

    def feed(self, rec, compute, refuse: str | None = None, key=None) -> str:
        """An array an op makes from its attributes alone (a dropout mask from its seed): in a compiled step's graph
        an input, given on every run ``compute`` of that run's attributes (tape/compile_ort.py: the seed this call
        drew) -- one input per ``key`` when given (the same mask in a forward and in the backward it records); in an
        exported model the constant ``compute(rec.attributes)``, or NotExportable(``refuse``) when a fixed value
        would misrepresent the op (a mask drawn anew at every call)."""
        if self.feeds is None:
            if refuse is not None:
                raise NotExportable(refuse)
            return self.const(compute(dict(rec.attributes)))
        if key is not None and key in self._fed:
            return self._fed[key]
        name = self.fresh("feed")
        self.feeds.append((name, dict(rec.attributes), compute))
        if key is not None:
            self._fed[key] = name
        return name

    def tensor(self, value):
        """``value`` as an ONNX TensorProto (for a tensor-valued attribute such as ConstantOfShape's)."""
        return self._numpy_helper.from_array(np.asarray(value))

    def ints(self, values) -> str:
        """An int64 1-D initializer (shapes, axes, slice bounds)."""
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(-1))


class _ExportTape(ExecutionTape):
    """An ExecutionTape that also keeps each op's call site (for the not-exportable error) and which tensors
    derive from the graph inputs (``derived``: tensor id -> the input's name), so that reading their values
    as Python or numpy values is refused."""

    def __init__(self, inputs: dict | None = None):
        super().__init__()
        self.sites: dict[int, str] = {}
        self.inputs: dict[int, str] = dict(inputs or {})
        self.derived: dict[int, str] = dict(self.inputs)

    def _record(self, op, tensors, attrs, result, node, seq_lens=()) -> None:
        self.sites[len(self._ops)] = user_frame()
        source = next((self.derived[t.id] for t in tensors if t is not None and t.id in self.derived), None)
        if source is not None:
            self.derived.update((r.id, source) for r in (result if isinstance(result, tuple) else (result,)))
        super()._record(op, tensors, attrs, result, node, seq_lens)

    def values_leave(self, t, how: str) -> None:
        """Refuse reading the values of a tensor computed from an input, or of an alias of one (``t.detach()``
        shares its memory): the model would hold the example's."""
        members = [t] if t._aliases is None else t._aliases.members
        derived = next((m for m in members if m.id in self.derived), None)
        if derived is None:
            return
        source = self.derived[derived.id]
        what = source if derived.id in self.inputs else f"a tensor computed from {source}"
        raise NotExportableError(
            f"tape.onnx.export: the call reads the values of {what} through {how}, so the model would hold the "
            "example's values and give their result for every other input (torch's exporter warns here, "
            "TracerWarning); compute with ops on the tensor instead (ops.where for a choice), or pass the value "
            f"as a constant; called at {user_frame()}"
        )

    def has_seen(self, t) -> bool:
        """Asked before an in-place change of ``t``: one of a tensor the call read or made cannot be exported."""
        if super().has_seen(t):
            raise NotExportableError(
                f"tape.onnx.export: the call changes tensor #{t.id} in place (a layer's running statistics in "
                "training mode -- BatchNorm -- or an in-place op on a tensor it read), which an ONNX model cannot "
                f"hold; export the model in eval mode (.eval()), or use the out-of-place op; called at {user_frame()}"
            )
        return False


def _require_onnx():
    try:
        import onnx
        from onnx import helper, numpy_helper
    except ImportError as e:
        raise ImportError(
            f"tape.onnx.export needs the onnx package ({e}); install it with pip install -e '.[onnx]' in a clone "
            f"of this repository (or: pip install onnx)"
        ) from None
    return onnx, helper, numpy_helper


def _as_input_tensor(x, k) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return as_tensor(x)
    raise TypeError(
        f"tape.onnx.export: argument 'example_inputs' expected Tensors or numpy arrays (or tuples / lists of them), "
        f"got {type(x).__name__} at position {k}"
    )


def _flattened(given, path: str = "") -> tuple[list[Tensor], Any]:
    """The leaves of nested tuples / lists of example inputs as Tensors (the graph inputs, in order: torch's
    rule for an LSTM's (h, c)), and the structure ``_rebuilt`` puts them back into."""
    if isinstance(given, tuple | list):
        parts = [_flattened(x, f"{path}{'.' if path else ''}{k}") for k, x in enumerate(given)]
        return [t for leaves, _ in parts for t in leaves], (type(given), [structure for _, structure in parts])
    return [_as_input_tensor(given, path)], None


def _rebuilt(structure, leaves):
    """The nested arguments ``structure`` describes, from an iterator over its leaves."""
    if structure is None:
        return next(leaves)
    kind, parts = structure
    return kind(_rebuilt(part, leaves) for part in parts)


def _flat_call(fn_or_module, structure):
    """``fn_or_module`` taking the flattened inputs (and returning its outputs flattened by ``_trace``)."""

    def call(*leaves):
        return fn_or_module(*_rebuilt(structure, iter(leaves)))

    call.__name__ = getattr(fn_or_module, "__name__", type(fn_or_module).__name__)
    call.__wrapped__ = fn_or_module  # type: ignore[attr-defined]  # its parameters' names (_constant_names)
    return call


def _names(kind: str, given, n: int) -> list[str]:
    if given is None:
        return [f"{kind}_{k}" for k in range(n)]
    given = list(given)
    if len(given) != n or len(set(given)) != n or not all(isinstance(s, str) and s for s in given):
        raise ValueError(f"tape.onnx.export: argument '{kind}_names' expected {n} distinct names, got {given!r}")
    return given


def _outputs_of(result, where: str) -> list[Tensor]:
    """The call's outputs, nested tuples / lists flattened in order (an LSTM's (output, (h_n, c_n)))."""
    if not isinstance(result, tuple | list):
        result = [result]
    outputs: list = []
    for item in result:
        outputs += _outputs_of(item, where) if isinstance(item, tuple | list) else [item]
    for k, t in enumerate(outputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"tape.onnx.export: {where} returned {type(t).__name__} at output {k}; expected Tensors")
    return outputs


def _constant_names(fn_or_module) -> dict[int, str]:
    """tensor id -> module path of every parameter and buffer of ``fn_or_module`` (when it is a Module)."""
    fn_or_module = getattr(fn_or_module, "__wrapped__", fn_or_module)
    named = getattr(fn_or_module, "named_parameters", None)
    if named is None:
        return {}
    names = {p.id: name for name, p in named()}
    names.update((b.id, name) for name, b in fn_or_module.named_buffers())
    return names


def _value_info(helper, name: str, t: Tensor, axes) -> Any:
    dims: list = list(t.shape)
    axes = axes or {}
    for axis, label in axes.items() if isinstance(axes, dict) else ((a, f"{name}_dim{a}") for a in axes):
        dims[axis] = label
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(t.dtype), dims)


def _lower(g: Graph, rec: RecordedOp, op, inputs: list, site: str) -> list[str]:
    fn = lowering_of(op)
    reason = not_exportable_reason(op) or _NO_LOWERING
    if fn is not None:
        try:
            out = fn(g, rec, *inputs)
            return list(out) if isinstance(out, tuple | list) else [out]
        except NotExportable as e:
            reason = str(e)
        except Exception:  # a lowering reading an attribute the call gave as a graph input (a Value) as a constant
            given = {k: v for k, v in rec.attributes.items() if isinstance(v, Value)}
            if not given:
                raise
            reason = (
                f"its attribute(s) {', '.join(f'{k!r} (the graph input {v})' for k, v in given.items())} come from "
                "the exported call's inputs, and this lowering needs them as constants (they decide the output's "
                "size or positions); pass them as constants, not example inputs"
            )
    raise NotExportableError(
        f"tape.onnx.export: op '{rec.op_name}' is not exportable to ONNX: {reason}; called at {site}"
    )


def _lower_all(g: Graph, recorder: _ExportTape, names: dict[int, str], attribute_inputs: dict[int, str]) -> None:
    from .registry import get_op

    copies = _output_copies(recorder)

    for rec in recorder.operations:
        op = get_op(rec.op_name)
        inputs: list = []
        cursor, seq_lens = 0, iter(rec.seq_lens)
        for is_sequence in op.sequence:
            n = next(seq_lens) if is_sequence else 1
            group = [None if s is None else names[s.id] for s in rec.inputs[cursor : cursor + n]]
            inputs.append(group if is_sequence else group[0])
            cursor += n
        attrs = {
            key: Value(attribute_inputs[id(v)]) if id(v) in attribute_inputs else v for key, v in rec.attributes.items()
        }
        lowered = RecordedOp(rec.index, rec.op_name, rec.inputs, rec.output, attrs, None, rec.seq_lens, rec.outputs)
        g.lowering = rec.index
        outs = _lower(g, lowered, op, inputs, recorder.sites[rec.index])
        g.lowering = None
        for spec, name in zip(rec.output_specs, outs, strict=True):
            names[spec.id] = name
            names.update((tid, name) for tid in copies.get(spec.id, ()))


def _output_copies(recorder: _ExportTape) -> dict[int, list[int]]:
    """A recorded op's output id -> the ids of the tensors a create_graph backward read as that output: a rule
    sees the saved output as a new Tensor of the op's own node (autodiff._output_tensors), which the tape finds
    as a tensor it did not produce; it is the op's output, not a constant."""
    produced_by: dict[int, int] = {}
    for rec in recorder.operations:
        if rec.node is not None:
            nodes = getattr(rec.node, "siblings", None) or [rec.node]
            produced_by.update((id(node), spec.id) for node, spec in zip(nodes, rec.output_specs, strict=False))
    copies: dict[int, list[int]] = {}
    for tid, t in recorder._externals.items():
        source = produced_by.get(id(t._node)) if t._node is not None else None
        if source is not None:
            copies.setdefault(source, []).append(tid)
    return copies


class _Kept:
    """What an export must leave as it found it, saved when made; ``restore()`` puts it back. The modules the
    callable holds (itself, a bound method's object, the modules its closure or its globals name): their
    attributes and training flags, their parameters' and buffers' values (BatchNorm's running statistics and
    batch count move in training mode), the generators they hold; minitape's default generator and numpy's and
    Python's global random states (dropout draws, even when the export then refuses it)."""

    def __init__(self, fn_or_module):
        import random

        modules = {id(m): m for holder in _holders(fn_or_module) for m in holder.modules()}
        self.attributes = [
            (m, dict(vars(m)), {k: dict(v) for k, v in vars(m).items() if type(v) is dict}) for m in modules.values()
        ]
        tensors = {id(t): t for m in modules.values() for t in vars(m).get("_parameters", {}).values()}
        tensors.update((id(t), t) for m in modules.values() for t in vars(m).get("_buffers", {}).values())
        self.tensors = [(t, t._data, np.array(t._data, copy=True)) for t in tensors.values() if isinstance(t, Tensor)]
        generators = {
            id(g): g for m in modules.values() for g in vars(m).values() if isinstance(g, np.random.Generator)
        }
        self.generators = [(g, g.bit_generator.state) for g in generators.values()]
        from . import random as tape_random

        self.random = (tape_random.get_rng_state(), np.random.get_state(), random.getstate())

    def restore(self) -> None:
        import random

        from . import random as tape_random

        for m, saved, dicts in self.attributes:
            vars(m).clear()
            vars(m).update(saved)
            for key, content in dicts.items():
                saved[key].clear()
                saved[key].update(content)
        for t, data, values in self.tensors:
            if data.flags.writeable:
                np.copyto(data, values)
            t._data = data if data.flags.writeable or np.array_equal(data, values, equal_nan=True) else values
        for g, state in self.generators:
            g.bit_generator.state = state
        tape_state, numpy_state, python_state = self.random
        tape_random.set_rng_state(tape_state)
        np.random.set_state(numpy_state)
        random.setstate(python_state)


def _is_module(x) -> bool:
    return callable(getattr(x, "modules", None)) and callable(getattr(x, "named_buffers", None))


def _holders(fn) -> list:
    """The modules ``fn`` is or holds: itself, its bound object, its closure's cells, the globals its code names."""
    found = [fn, getattr(fn, "__self__", None)]
    found += [c.cell_contents for c in getattr(fn, "__closure__", None) or () if c.cell_contents is not None]
    code, names = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    found += [names[n] for n in (code.co_names if code else ()) if n in names]
    return [x for x in found if _is_module(x)]


def _check_inputs_used(g: Graph, in_names: list[str]) -> None:
    """Every graph input must feed a node: an input the call read only as a constant (through np.asarray,
    .numpy(), .item(), or a copy) would be baked into the model with its example value."""
    used = {i for node in g.nodes for i in node.input}
    unused = [n for n in in_names if n not in used]
    if unused:
        raise NotExportableError(
            f"tape.onnx.export: input(s) {unused} reach no recorded op as a tensor (nor as a Tensor attribute): "
            "the call read them as constants (np.asarray, .numpy(), .item(), a Python value) or ignored them, so "
            "the model would hold their example values; pass them to ops as Tensors, or leave them out"
        )


class _Training:
    """``export(..., gradients=params)``: the parameters (graph inputs, named by module path when the callable is
    a Module or holds one, else ``param_<k>``) and the gradients the export adds as outputs."""

    def __init__(self, params, fn_or_module):
        self.params = list(params)
        for k, p in enumerate(self.params):
            if not isinstance(p, Tensor) or not p.requires_grad or p._node is not None:
                raise TypeError(
                    f"tape.onnx.export: argument 'gradients' expected leaf Tensors that require grad (parameters), "
                    f"got {type(p).__name__ if not isinstance(p, Tensor) else 'a tensor that is not one'} at "
                    f"position {k}"
                )
        if len({p.id for p in self.params}) != len(self.params):
            raise ValueError("tape.onnx.export: argument 'gradients' names a tensor twice")
        known: dict[int, str] = {}
        for holder in _holders(fn_or_module):
            known.update((p.id, name) for name, p in holder.named_parameters())
        self.names = [known.get(p.id, f"param_{k}") for k, p in enumerate(self.params)]
        self.unused: list[int] = []
        self.feeds = False  # whether lowerings may add per-run inputs (Graph.feed): a compiled step's graph

    def gradients(self, outputs: list, who: str) -> list:
        """d outputs[0] / d params (zeros for a parameter the loss does not use), recorded on the tape."""
        from .functional import gradients

        loss = outputs[0] if outputs else None
        if loss is None or loss.numel() != 1 or loss.dtype.kind != "f":
            raise ValueError(
                f"tape.onnx.export: with 'gradients', {who}'s first output must be a floating loss of one element, "
                f"got {'nothing' if loss is None else f'{loss.dtype} of shape {loss.shape}'}"
            )
        found = gradients(loss, self.params, create_graph=True, allow_unused=True)
        self.unused = [k for k, gr in enumerate(found) if gr is None]
        return [
            as_tensor(np.zeros_like(p._data)) if gr is None else gr for gr, p in zip(found, self.params, strict=True)
        ]


def _trace(fn_or_module, inputs: list, in_names: list[str], helper, numpy_helper, training=None):
    """Record ``fn_or_module(*inputs)`` and lower it: (graph, outputs, recorder, tensor id -> ONNX name). With
    ``training`` (a ``_Training``), the parameters are graph inputs too and the outputs are followed by the first
    output's gradients in them, recorded as the backward rules run on Tensors (create_graph)."""
    fed = list(zip(inputs, in_names, strict=True)) + (list(zip(training.params, training.names)) if training else [])
    recorder = _ExportTape({t.id: name for t, name in fed})
    who = getattr(fn_or_module, "__name__", type(fn_or_module).__name__)
    with enable_grad() if training else no_grad(), recorder:
        outputs = _outputs_of(fn_or_module(*inputs), who)
        if training:
            outputs += training.gradients(outputs, who)
    g = Graph(helper, numpy_helper, feeds=training is not None and training.feeds)
    names = {t.id: name for t, name in fed}
    # a Tensor passed as an op's attribute is recorded as its own array (arguments.kept)
    attribute_inputs = {id(t._data): name for t, name in fed}
    constant_names = _constant_names(fn_or_module)
    copied = {tid for tids in _output_copies(recorder).values() for tid in tids}
    constants = ((tid, t) for tid, t in recorder._externals.items() if tid not in names and tid not in copied)
    for k, (tid, t) in enumerate(constants):
        names[tid] = g.const(t._data, name=constant_names.get(tid, f"const_{k}"))
    _lower_all(g, recorder, names, attribute_inputs)
    return g, outputs, recorder, names


def export(
    fn_or_module,
    example_inputs,
    path: str | os.PathLike | None,
    *,
    opset: int = 23,
    input_names=None,
    output_names=None,
    dynamic_axes: dict | None = None,
    gradients=None,
):
    """Record ``fn_or_module(*example_inputs)`` once and write it to ``path`` as an ONNX model (opset ``opset``).

    ``input_names`` / ``output_names`` name the graph's inputs and outputs (default ``input_<k>`` /
    ``output_<k>``); ``dynamic_axes`` maps an input or output name to the axes left free -- a list of axes or
    ``{axis: label}`` (``{"tokens": {0: "batch"}}``). A lowering that bakes a size depending on a dynamic input
    axis is refused (see ``_check_dynamic``). An example input that reaches an op as an attribute (the
    ``key_padding_lengths`` of attention) stays a graph input. Returns the ``onnx.ModelProto`` (written to
    ``path`` unless it is None).

    ``gradients=params`` writes a training graph: the parameters (leaf Tensors that require grad) become graph
    inputs after the call's own -- named by module path (``blocks.0.attn.qkv.weight``) when the callable is or
    holds a Module, else ``param_<k>`` -- and the outputs are followed by ``grad_<name>``, the gradient of the first
    output (a one-element floating loss) in each, recorded as the backward rules run on Tensors (create_graph;
    zeros for a parameter the loss does not use). Everything the graph holds as a constant is checked not to
    depend on the values of the inputs (``_check_values``)."""
    onnx, helper, numpy_helper = _require_onnx()
    kept = _Kept(fn_or_module)
    training = None if gradients is None else _Training(gradients, fn_or_module)
    try:
        naming = (input_names, output_names, dynamic_axes)
        return _export(fn_or_module, example_inputs, path, opset, naming, kept, training)
    finally:
        kept.restore()  # the export leaves the model as it was, also when it refuses


def training_graph(fn, example_inputs, input_names, params, feeds: bool = False) -> tuple[Any, list[int], list]:
    """``export(fn, example_inputs, None, input_names=..., output_names=["loss"], gradients=params)``, the
    positions of the parameters the loss does not use (eager's backward leaves their ``.grad`` untouched; the
    graph gives them zeros) and, with ``feeds``, the inputs lowerings added to be given on every run
    (``Graph.feed``: (name, attributes, compute), after the parameters). For ``tape.compile(backend="onnxruntime")``
    and the coverage matrix."""
    _require_onnx()
    kept = _Kept(fn)
    training = _Training(params, fn)
    training.feeds = feeds
    try:
        model, g = _export(fn, example_inputs, None, 23, (input_names, ["loss"], None), kept, training, graph=True)
    finally:
        kept.restore()
    return model, training.unused, g.feeds or []


def _export(fn_or_module, example_inputs, path, opset: int, naming, kept: _Kept, training=None, graph=False):
    """``export``'s body; ``kept`` restores the model before each further run of the call. ``graph``: return the
    lowered Graph with the model."""
    onnx, helper, numpy_helper = _require_onnx()
    input_names, output_names, dynamic_axes = naming
    given = example_inputs if isinstance(example_inputs, tuple | list) else (example_inputs,)
    inputs, structure = _flattened(tuple(given))
    fn_or_module = _flat_call(fn_or_module, structure)
    in_names = _names("input", input_names, len(inputs))
    g, outputs, recorder, names = _trace(fn_or_module, inputs, in_names, helper, numpy_helper, training)
    n_grads = len(training.params) if training else 0
    out_names = _names("output", output_names, len(outputs) - n_grads)
    if training:
        out_names += [f"grad_{name}" for name in training.names]
        graph_inputs = inputs + training.params
        all_in_names = in_names + training.names
    else:
        graph_inputs, all_in_names = inputs, in_names
    dynamic_axes = dict(dynamic_axes or {})
    unknown = set(dynamic_axes) - set(in_names) - set(out_names)
    if unknown:
        raise ValueError(f"tape.onnx.export: argument 'dynamic_axes' names {sorted(unknown)}: no such input or output")
    _check_dynamic(fn_or_module, inputs, in_names, dynamic_axes, (g, recorder), (helper, numpy_helper), kept, training)
    if training:
        _check_values(fn_or_module, inputs, in_names, (g, recorder), (helper, numpy_helper), kept, training)
    for t, name in zip(outputs, out_names, strict=True):
        if t.id not in names:  # a tensor the call returned without reading or computing it: a constant
            names[t.id] = g.const(t._data)
        g.nodes.append(helper.make_node("Identity", [names[t.id]], [name], name=f"output:{name}"))
    _check_inputs_used(g, all_in_names)
    fed = [as_tensor(compute(attributes)) for _, attributes, compute in g.feeds or ()]  # (their build-time values)
    graph_inputs, all_in_names = graph_inputs + fed, all_in_names + [name for name, _, _ in g.feeds or ()]
    onnx_graph = helper.make_graph(
        g.nodes,
        getattr(fn_or_module, "__name__", type(fn_or_module).__name__),
        [_value_info(helper, n, t, dynamic_axes.get(n)) for t, n in zip(graph_inputs, all_in_names, strict=True)],
        [_value_info(helper, n, t, dynamic_axes.get(n)) for t, n in zip(outputs, out_names, strict=True)],
        g.initializers,
    )
    model = helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="minitape")
    model.ir_version = min(model.ir_version, 10)  # what ONNX Runtime 1.2x reads
    _widen_for_runtime(model, g, recorder)
    _drop_dead_nodes(model.graph)
    onnx.checker.check_model(model)
    if path is not None:
        onnx.save(model, os.fspath(path))
    return (model, g) if graph else model


def _widen_for_runtime(model, g: Graph, recorder: _ExportTape) -> None:
    """Integer and bool nodes ONNX Runtime has no kernel for, computed in a wider integer type or refused naming
    the op (tape/onnx_types.py)."""
    from .onnx_types import widen

    def owner(k: int):
        index = g.owners[k] if k < len(g.owners) else None
        return (recorder.operations[index].op_name, recorder.sites[index]) if index is not None else ("?", "?")

    widen(model, lambda k: owner(k)[0], lambda k: owner(k)[1])


def _drop_dead_nodes(graph) -> None:
    """Remove the nodes no graph output depends on, and the initializers only they read: ONNX Runtime runs every
    node it is given (a composite's own output its backward does not read: attention's P @ V, a MatMul each)."""
    needed = {o.name for o in graph.output}
    live = []
    for node in reversed(graph.node):
        if any(name in needed for name in node.output):
            live.append(node)
            needed.update(node.input)
    if len(live) == len(graph.node):
        return
    kept = [t for t in graph.initializer if t.name in needed]
    del graph.node[:], graph.initializer[:]
    graph.node.extend(reversed(live))
    graph.initializer.extend(kept)


# -- dynamic axes: a lowering must not bake a size that depends on one -----------------------------------------
def _dynamic_labels(in_names: list[str], dynamic_axes: dict, inputs: list) -> dict[str, list[tuple[int, int]]]:
    """label -> the (input index, axis) pairs it names. Axes given as a list, without labels, are grouped by
    their size (a batch axis of tokens and of their lengths changes together)."""
    labels: dict[str, list[tuple[int, int]]] = {}
    for k, name in enumerate(in_names):
        axes = dynamic_axes.get(name) or {}
        for axis, label in axes.items() if isinstance(axes, dict) else ((a, None) for a in axes):
            axis = int(axis) % max(len(inputs[k].shape), 1)
            label = f"unlabelled, size {inputs[k].shape[axis]}" if label is None else label
            labels.setdefault(str(label), []).append((k, axis))
    return labels


def _resized(inputs: list, places, size_of) -> list:
    """The inputs with each (input, axis) of ``places`` resized by ``size_of(n)``, repeating entries cyclically
    (token ids, lengths and values stay in their range)."""
    arrays = [np.asarray(t._data) for t in inputs]
    for k, axis in places:
        n = arrays[k].shape[axis]
        arrays[k] = np.take(arrays[k], np.arange(size_of(n)) % max(n, 1), axis=axis)
    return [as_tensor(a) for a in arrays]


_PROBES = 3  # other sizes each dynamic axis is exported at (a size computed from it can agree at one or two)


def _probe_sizes(n: int) -> list[int]:
    """Other sizes to export a dynamic axis of size ``n`` at, larger and smaller: x.shape[0] // 2 agrees at n + 1
    when n is even, min(x.shape[0], n) at every larger size."""
    sizes = [n + 1, 2 * n, n - 1, 2 * n + 1, 3 * n + 1, n + 2, n - 2]
    return [m for m in dict.fromkeys(sizes) if m >= 1 and m != n]


def _check_dynamic(fn_or_module, inputs, in_names, dynamic_axes, traced, helpers, kept, training=None) -> None:
    """Lower the call again with each dynamic input axis at up to three other sizes (larger and smaller): a graph
    that changes bakes a size from that axis (a reshape target, an expand size, a mask or range from a shape, a
    slice bound computed from .shape), so the model would be wrong or fail at other sizes -- refused, naming the
    op, the axis and the call site. Fewer than two sizes the call runs at: refused too (it cannot be checked)."""
    g, recorder = traced
    for label, places in _dynamic_labels(in_names, dynamic_axes, inputs).items():
        axis = ", ".join(f"{in_names[k]}.shape[{a}]" for k, a in places)
        n = inputs[places[0][0]].shape[places[0][1]]
        checked: list[int] = []
        failures: list[str] = []
        for m in _probe_sizes(n):
            if len(checked) == _PROBES:
                break
            try:
                kept.restore()  # each run starts from the model as the export found it
                resized = _resized(inputs, places, lambda _, m=m: m)
                probe = _trace(fn_or_module, resized, in_names, helpers[0], helpers[1], training)[0]
            except Exception as e:  # the call itself refuses that size (a context length, an even size, ...)
                failures.append(f"{m}: {type(e).__name__}: {e}")
                continue
            checked.append(m)
            difference = _first_difference(g, probe)
            if difference is not False:
                owner, constant = difference
                rec = recorder.operations[owner] if owner is not None else None
                who = f"op '{rec.op_name}'" if rec else "a constant the call built from a size"
                if constant:
                    who = "a constant the call built from a size" + (
                        f" (read first by op '{rec.op_name}')" if rec else ""
                    )
                site = f"; called at {recorder.sites[owner]}" if rec else ""
                raise NotExportableError(
                    f"tape.onnx.export: {who} bakes a size that depends on dynamic axis '{label}' ({axis} = {n}): "
                    f"its graph differs at size {m}, so the model would be wrong or fail at other sizes{site}. "
                    "Compute sizes with ops on the inputs (not Python ints from .shape), or export without that "
                    "dynamic axis"
                )
        if len(checked) < 2:
            raise NotExportableError(
                f"tape.onnx.export: dynamic axis '{label}' ({axis}) cannot be checked: the call runs at "
                f"{len(checked)} of the other sizes tried (two needed); it fails at {'; '.join(failures[:3])}"
            )


def _other_values(x: np.ndarray) -> np.ndarray:
    """``x`` with other values of the same kind, shape and range: integer and bool entries rolled by one place
    (indices and class ids stay valid), floating ones reversed and scaled."""
    flat = x.reshape(-1)
    if x.dtype.kind in "fc":
        return (flat[::-1] * 1.5 + 0.25).astype(x.dtype).reshape(x.shape)
    return np.roll(flat, 1).reshape(x.shape)


def _check_values(fn_or_module, inputs, in_names, traced, helpers, kept, training) -> None:
    """A training graph must hold no constant computed from the inputs' or the parameters' values (a rule that
    reads a mask, a class id or an index from the data as a numpy array): the call is lowered again with every
    input and parameter at other values (``_other_values``) and a graph that changed is refused, naming the op."""
    g, recorder = traced
    saved = [p._data for p in training.params]
    try:
        kept.restore()
        for p in training.params:
            p._data = _other_values(p._data)
        others = [as_tensor(_other_values(t._data)) for t in inputs]
        probe = _trace(fn_or_module, others, in_names, helpers[0], helpers[1], training)
    except NotExportableError:
        raise
    except Exception as e:  # the call refuses the other values (a range check): nothing shows it bakes none
        raise NotExportableError(
            "tape.onnx.export: with 'gradients', the call is lowered again at other input and parameter values to "
            f"check the graph holds none of them as a constant, and it fails there ({type(e).__name__}: {e}); "
            "export it with inputs the call takes at other values too"
        ) from e
    finally:
        for p, data in zip(training.params, saved, strict=True):
            p._data = data
    difference = _first_difference(g, probe[0])
    if difference is not False:
        owner, constant = difference
        rec = recorder.operations[owner] if owner is not None else None
        who = f"op '{rec.op_name}'" if rec else "a constant the call built"
        site = f"; called at {recorder.sites[owner]}" if rec else ""
        raise NotExportableError(
            f"tape.onnx.export: {who} bakes values read from the inputs or parameters into the training graph "
            f"(its graph differs when their values do), so the graph would give the example's result for other "
            f"values{site}"
        )


def _first_difference(g: Graph, probe: Graph):
    """(the recorded op whose lowering differs between two graphs -- its index, None for none --, whether what
    differs is a constant the call made itself, charged to the first op reading it), or False when they are
    equal."""
    for k, (a, b) in enumerate(zip(g.nodes, probe.nodes)):
        if a.SerializeToString() != b.SerializeToString():
            return g.owners[k], False
    if len(g.nodes) != len(probe.nodes):
        return (g.owners[min(len(g.nodes), len(probe.nodes)) - 1] if g.nodes else None), False
    for k, (a, b) in enumerate(zip(g.initializers, probe.initializers, strict=True)):
        if a.SerializeToString() != b.SerializeToString():
            owner = g.initializer_owners[k]
            if owner is not None:  # a constant a lowering made
                return owner, False
            readers = [g.owners[j] for j, node in enumerate(g.nodes) if a.name in node.input]
            return (readers[0] if readers else None), True
    return False


# -- checking a lowering on an op's samples (tests, the coverage matrix's export column) ---------------------
def _sample_call(op, sample, dtype):
    """(flat input arrays, fn(*tensors) applying ``op`` to them): floating inputs cast to ``dtype`` (None: kept),
    a sequence parameter flattened, absent optional inputs left out."""
    flat: list = []
    layout: list = []  # None (absent), -1 (one tensor) or n (a sequence of n)
    for a in sample.inputs:
        items = a if isinstance(a, list | tuple) else [a]
        layout.append(None if a is None else (len(items) if isinstance(a, list | tuple) else -1))
        if a is not None:
            flat += [
                x.astype(dtype) if dtype is not None and x.dtype.kind == "f" else x for x in map(np.asarray, items)
            ]

    def call(*tensors, **attributes):  # ``attributes``: more of them, or others (given as tensors)
        it = iter(tensors)
        args = [None if n is None else (next(it) if n == -1 else [next(it) for _ in range(n)]) for n in layout]
        args += [None] * (len(op.input_names) - len(args))  # a sample may leave trailing optional inputs out
        return op(**dict(zip(op.input_names, args, strict=True)), **{**sample.attrs, **attributes})

    call.__name__ = op.name
    return flat, call


def check_sample(op, sample, dtype=None, *, scale: str = "output") -> tuple[str, str]:
    """Export ``op`` on ``sample`` (floating inputs in ``dtype``), run it in ONNX Runtime and compare with
    minitape's forward: ("equal" | "differs" | "not exportable" | "no kernel" | "forward refuses", detail).
    Floats must agree to rtol 1e-5 (float32) or 1e-10 (float64) times ``scale``: "output", the largest finite
    output entry (an ordinary sample: sums cancel); "entry", each entry itself (edge values through an
    elementwise op or a short reduction, as the op tests compare them); "inputs", the largest finite input or
    output entry (edge values filled into an op that sums: huge entries cancelling against small ones round in
    ONNX Runtime's order, not the forward's). NaN and the infinities must be where minitape has them, in every
    mode; other dtypes agree exactly."""
    import warnings

    flat, call = _sample_call(op, sample, dtype)
    try:
        with no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = call(*(as_tensor(x) for x in flat))
    except Exception as e:  # the forward refuses the sample (a domain check at an edge value)
        return "forward refuses", f"{type(e).__name__}: {e}"
    expected = [t.numpy() for t in (expected if isinstance(expected, tuple | list) else (expected,))]
    try:
        model = export(call, flat, None)
    except NotExportableError as e:
        return "not exportable", str(e)
    got = _run_model(model, flat)
    if isinstance(got, tuple):
        return got
    for k, (want, have) in enumerate(zip(expected, got, strict=True)):
        problem = _difference(want, np.asarray(have), _scale(scale, want, flat))
        if problem:
            return "differs", f"output {k}: {problem}"
    return "equal", ""


def check_sample_gradients(op, sample, dtype) -> tuple[str, str]:
    """Export the gradients of ``op`` on ``sample`` (floating inputs in ``dtype``) as a training graph -- loss =
    sum_k sum(output_k * w_k) with fixed random weights ``w_k``, gradients in every floating input the op
    differentiates, recorded as its backward rules run on Tensors (what ``tape.compile(backend="onnxruntime")``
    runs, per-run inputs such as a dropout mask given their values for the sample) -- run it in ONNX Runtime and
    compare with minitape's reverse pass: ("equal" | "differs" | "not exportable" | "no kernel" |
    "not differentiable" | "forward refuses", detail). The loss and each
    gradient must agree to rtol 1e-5 (float32) or 1e-10 (float64) of its largest finite entry, NaN and the
    infinities where minitape has them."""
    import warnings

    from .functional import gradients

    case = _GradientCase(op, sample, dtype)
    if not case.learned:
        return "not differentiable", "no floating input the op differentiates"
    try:
        with enable_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loss = case.loss(*(as_tensor(x) for x in case.fed))
            if loss is None:
                return "not differentiable", "no output requires grad"
            found = gradients(loss, case.params, allow_unused=True)
    except Exception as e:  # the forward refuses the sample in this dtype
        return "forward refuses", f"{type(e).__name__}: {e}"
    expected = [loss.numpy()] + [
        np.zeros_like(p.numpy()) if g is None else g.numpy() for g, p in zip(found, case.params, strict=True)
    ]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            names = [f"input_{k}" for k in range(len(case.fed))]
            model, _, feeds = training_graph(case.loss, case.fed, names, case.params, feeds=True)
    except Exception as e:  # a rule refusing (wrapped in the reverse pass's GradientError) or a lowering crashing
        cause: BaseException | None = e
        while cause is not None and not isinstance(cause, NotExportableError):
            cause = cause.__cause__
        if cause is not None:
            return "not exportable", str(cause)
        return "differs", f"the export fails: {type(e).__name__}: {e}"
    got = _run_model(model, case.fed + [p.numpy() for p in case.params] + [f(a) for _, a, f in feeds])
    if isinstance(got, tuple):
        return got
    for k, (want, have) in enumerate(zip(expected, got, strict=True)):
        problem = _difference(want, np.asarray(have), _scale("output", want, []))
        if problem:
            return "differs", f"{'the loss' if k == 0 else f'the gradient in input {case.owners[k - 1]}'}: {problem}"
    return "equal", ""


class _GradientCase:
    """``check_sample_gradients``' call: the floating inputs the op differentiates become parameters (``params``,
    their input positions ``owners``), the others are ``fed``; ``loss(*fed)`` is the weighted sum of the outputs
    that require grad (None when none does)."""

    def __init__(self, op, sample, dtype):
        from .registry import Grad

        flat, self.call = _sample_call(op, sample, dtype)
        slots = [
            i
            for i, a in enumerate(sample.inputs)
            if a is not None
            for _ in (a if isinstance(a, list | tuple) else (a,))
        ]
        self.learned = [
            j
            for j, (x, i) in enumerate(zip(flat, slots, strict=True))
            if x.dtype.kind == "f" and x.size and op.input_states[i] != Grad.NOT_DIFFERENTIABLE
        ]
        self.owners = [slots[j] for j in self.learned]
        self.params = [Tensor(flat[j], requires_grad=True, dtype=flat[j].dtype) for j in self.learned]
        self.positions = [j for j in range(len(flat)) if j not in self.learned]
        self.fed = [flat[j] for j in self.positions]
        self.n = len(flat)

    def loss(self, *given):
        leaves = dict(zip(self.positions, given, strict=True)) | dict(zip(self.learned, self.params, strict=True))
        outs = self.call(*(leaves[j] for j in range(self.n)))
        outs = [o for o in (outs if isinstance(outs, tuple | list) else (outs,)) if o.requires_grad]
        weights = [np.random.default_rng(k).standard_normal(o.shape).astype(o.dtype) for k, o in enumerate(outs)]
        terms = [(o * w).sum() for o, w in zip(outs, weights, strict=True)]
        return sum(terms[1:], terms[0]) if terms else None


def _run_model(model, feeds: list):
    """ONNX Runtime's outputs of ``model`` on ``feeds`` (its inputs in order), or ("no kernel" | "differs",
    detail)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # a kernel that fails is reported in the result, not logged
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # ONNX Runtime has no kernel for this op in this dtype (float64 mostly)
        return "no kernel", str(e).splitlines()[0][:200]
    try:
        return session.run(None, {i.name: x for i, x in zip(session.get_inputs(), feeds, strict=True)})
    except Exception as e:  # the model loads but ONNX Runtime fails on these inputs where minitape computes
        return "differs", f"ONNX Runtime fails: {str(e).splitlines()[0][:200]}"


def _scale(kind: str, want: np.ndarray, inputs: list) -> float | None:
    """The magnitude ``check_sample``'s tolerance is relative to (None: each entry's own)."""
    if kind not in ("output", "entry", "inputs"):
        raise ValueError(f"check_sample: argument 'scale' expected 'output', 'entry' or 'inputs', got {kind!r}")
    if kind == "entry" or want.dtype.kind not in "fc":
        return None
    arrays = [want] + ([np.asarray(x) for x in inputs if np.asarray(x).dtype.kind in "fc"] if kind == "inputs" else [])
    return max(float(np.max(np.abs(a[np.isfinite(a)]), initial=1.0)) for a in arrays)


def _difference(want: np.ndarray, have: np.ndarray, scale: float | None) -> str:
    if want.shape != have.shape or want.dtype != have.dtype:
        return f"minitape gives {want.dtype}{list(want.shape)}, ONNX Runtime {have.dtype}{list(have.shape)}"
    if want.dtype.kind not in "fc":
        if np.array_equal(want, have):
            return ""
        k = np.flatnonzero(want != have)[0]
        return f"values differ; first at flat index {k}: {want.flat[k]!r} vs {have.flat[k]!r}"
    rtol = 1e-5 if want.dtype == np.float32 else 1e-10
    scale = np.finfo(want.dtype).tiny / rtol if scale is None else scale
    close = np.isclose(have, want, rtol=rtol, atol=rtol * scale, equal_nan=True)
    if close.all():
        return ""
    k = np.flatnonzero(~close)[0]
    return (
        f"{(~close).sum()} of {want.size} values differ; first at flat index {k}: {want.flat[k]!r} vs {have.flat[k]!r}"
    )
