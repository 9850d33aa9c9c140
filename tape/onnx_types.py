"""Integer and bool tensors where ONNX Runtime has no kernel for them (used by ``tape.onnx.export``).

ONNX Runtime implements many ops for some integer types only: Pow has no int8/uint8/int16 kernel, Neg none
for uint8, ReduceMax/ArgMax/Max/Clip/Where/Trilu none for int16, MatMul/Einsum none for the small integers or
bool, Add/Mul/Less none for bool. A model using them loads nowhere. ``widen(model, ...)`` asks ONNX
Runtime (a one-node session per op type and signature, remembered) whether each node's integer or bool
signature has a kernel; where it has none, the node's inputs of that type go through a Cast to the first wider
integer type that has one (int32, int64, uint32, uint64) and its outputs of that type are cast back. That keeps
every value exactly: a wider integer holds the narrow one's values, order and comparisons are unchanged, and the
sums and products the narrow type wraps are congruent modulo its range, so the cast back wraps them the same
way (a bool is 0/1, and casting a nonzero back gives True: numpy's bool add is or, its multiply and). A node no
wider type serves stops the export naming the minitape op, the ONNX op and the dtype. Without onnxruntime
installed the model is left as it is (nothing to ask).
"""

from __future__ import annotations

import functools

__all__ = ["widen"]

_WIDER = (6, 7, 12, 13)  # TensorProto INT32, INT64, UINT32, UINT64
_FLOAT, _DOUBLE = 1, 11  # TensorProto FLOAT, DOUBLE
_NARROW = {9: (6, 7), 2: (6, 7, 12, 13), 3: (6, 7), 4: (6, 7, 12, 13), 5: (6, 7), 6: (7,), 12: (7, 13), 7: (), 13: ()}
# bool, uint8, int8, uint16, int16, int32, uint32, int64, uint64 -> the wider types holding all their values
# ScatterElements / ScatterND load with a reduction on bool, then fail when run
_FAILS_WHEN_RUN = {("ScatterElements", 9), ("ScatterND", 9)}


def widen(model, owner_of, describe) -> None:
    """Rewrite ``model``'s graph in place (see the module docstring). ``owner_of(k)`` names the minitape op of
    node ``k`` and ``describe(k)`` its call site, for the error."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return
    import onnx

    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    types = _types(onnx.shape_inference.infer_shapes(model))
    nodes = list(model.graph.node)
    del model.graph.node[:]
    for k, node in enumerate(nodes):
        refuse = functools.partial(_refuse, node, k=k, owner_of=owner_of, describe=describe)
        model.graph.node.extend(_node_for_runtime(node, types, opset, refuse))


def _types(model) -> dict[str, int]:
    """value name -> TensorProto element type, for every value type inference knows."""
    g = model.graph
    types = {v.name: v.type.tensor_type.elem_type for v in (*g.input, *g.output, *g.value_info)}
    types.update((t.name, t.data_type) for t in g.initializer)
    return types


def _node_for_runtime(node, types, opset: int, refuse) -> list:
    """[node] when ONNX Runtime runs it as it is (or it takes no integer or bool), else the Casts, the widened
    node and the Casts back; ``refuse(dtype)`` when no wider type serves (int64 has none)."""
    ins = [types.get(n) if n else None for n in node.input]
    if not any(t in _NARROW for t in ins if t is not None):
        return [node]
    import onnx

    schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    formal = [p.type_str for p in schema.inputs]
    of_input = [formal[min(i, len(formal) - 1)] for i in range(len(ins))]
    of_output = [schema.outputs[min(i, len(schema.outputs) - 1)].type_str for i in range(len(node.output))]
    bound = dict(zip(of_input, ins, strict=True))
    # an output inference could not type (the schema has no such signature: Relu of bool) has its parameter's type
    outs = [types.get(n) or bound.get(p) for n, p in zip(node.output, of_output, strict=True)]
    if None in outs or _has_kernel(node, ins, outs, opset):
        return [node]
    narrow = {p: t for p, t in zip(of_input, ins, strict=True) if t in _NARROW}  # type parameter -> its type
    # every narrow type parameter widened together (Pow's base and exponent), then each alone (Where's X and Y,
    # not its bool condition)
    attempts = [list(narrow)] + [[p] for p in narrow] if len(narrow) > 1 else [list(narrow)]
    for params in attempts:
        for wide in _WIDER:
            chosen = {p: wide for p in params if wide in _NARROW[narrow[p]]}
            if not chosen or len(chosen) < len(params):
                continue
            new_ins = [chosen.get(p, t) if t == narrow.get(p) else t for p, t in zip(of_input, ins, strict=True)]
            new_outs = [chosen.get(p, t) if t == narrow.get(p) else t for p, t in zip(of_output, outs, strict=True)]
            if _has_kernel(node, new_ins, new_outs, opset):
                return _rewritten(node, ins, new_ins, outs, new_outs)
    if _DOUBLE in ins:  # is it the float64 kernel that is missing? Then loading the model says so (not refused)
        single = [_FLOAT if t == _DOUBLE else t for t in ins], [_FLOAT if t == _DOUBLE else t for t in outs]
        if _has_kernel(node, *single, opset):
            return [node]
    refuse(next(t for t in ins if t in _NARROW))
    return [node]


def _rewritten(node, ins, new_ins, outs, new_outs) -> list:
    from onnx import helper

    casts, inputs, after, outputs = [], [], [], []
    for name, old, new in zip(node.input, ins, new_ins, strict=True):
        if name and old != new:
            casts.append(helper.make_node("Cast", [name], [f"{name}__wide_{node.name}"], to=new))
            name = casts[-1].output[0]
        inputs.append(name)
    for name, old, new in zip(node.output, outs, new_outs, strict=True):
        if old != new:
            after.append(helper.make_node("Cast", [f"{name}__wide"], [name], to=old))
            name = f"{name}__wide"
        outputs.append(name)
    wide = helper.make_node(node.op_type, inputs, outputs, name=node.name, domain=node.domain)
    wide.attribute.extend(node.attribute)
    return [*casts, wide, *after]


def _has_kernel(node, ins, outs, opset: int) -> bool:
    if any((node.op_type, t) in _FAILS_WHEN_RUN for t in ins) and any(a.name == "reduction" for a in node.attribute):
        return False
    attributes = tuple(a.SerializeToString() for a in node.attribute)
    return _probe(node.op_type, node.domain, attributes, tuple(ins), tuple(outs), opset)


@functools.cache
def _probe(op_type: str, domain: str, attributes: tuple, ins: tuple, outs: tuple, opset: int) -> bool:
    """Whether ONNX Runtime loads a one-node model of this op type, attributes and signature."""
    import onnxruntime as ort
    from onnx import AttributeProto, helper

    names = [f"i{k}" if t is not None else "" for k, t in enumerate(ins)]
    node = helper.make_node(op_type, names, [f"o{k}" for k in range(len(outs))], domain=domain)
    for raw in attributes:
        node.attribute.add().CopyFrom(AttributeProto.FromString(raw))
    graph = helper.make_graph(
        [node],
        "probe",
        [helper.make_tensor_value_info(n, t, None) for n, t in zip(names, ins, strict=True) if n],
        [helper.make_tensor_value_info(f"o{k}", t, None) for k, t in enumerate(outs)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, opset)])
    model.ir_version = min(model.ir_version, 10)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    try:
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception:  # no kernel for this signature (or the op refuses it)
        return False
    return True


def _refuse(node, elem_type: int, *, k: int, owner_of, describe):
    from onnx import helper

    from .onnx import NotExportableError

    dtype = helper.tensor_dtype_to_np_dtype(elem_type).name
    raise NotExportableError(
        f"tape.onnx.export: op '{owner_of(k)}' is not exportable to ONNX: it lowers to ONNX's {node.op_type}, which "
        f"ONNX Runtime has no kernel for in {dtype} (nor in a wider integer type holding its values); called at "
        f"{describe(k)}"
    )
