"""Applying an op: input coercion, the forward call, and recording.

``apply`` is the single entry point every op call goes through. When any input needs a gradient it
creates a ``Node`` -- the recorded application the reverse pass walks -- and attaches it to the output
tensor; every ExecutionTape that is recording also gets the application appended to its list.

This module also holds the global switches: grad mode (``no_grad`` / ``enable_grad``), anomaly
detection (``detect_anomaly``) and the list of recording tapes.
"""

from __future__ import annotations

import itertools
import math
import os
import traceback
import weakref

import numpy as np

from .errors import AnomalyError
from .registry import Grad, bind_apply
from .state import STATE, detect_anomaly, enable_grad, is_grad_enabled, needs_grad, no_grad
from .tensors import _FLOATS, Tensor, as_tensor

__all__ = ["Node", "apply", "no_grad", "enable_grad", "is_grad_enabled", "detect_anomaly"]

_node_counter = itertools.count()


def next_node_index() -> int:
    """Draw an index: every Node made afterwards has a larger one."""
    return next(_node_counter)


class Node:
    """One recorded op application: what the reverse pass needs to send gradients to the op's inputs.

    ``parents[i]`` is the Node that produced input i (None for a leaf or a constant), ``leaves[i]`` the
    input tensor when it is a leaf that needs a gradient, ``needs[i]`` whether input i needs one at all.
    ``saved`` is (input arrays, output array, aux) until a backward without retain_graph frees it;
    ``versions`` are the inputs' versions when recorded (a later ``t.data = ...`` makes backward raise).
    ``index`` grows with every application, so sorting by it is a topological order.
    """

    __slots__ = (
        "op",
        "attrs",
        "needs",
        "parents",
        "leaves",
        "inputs",
        "versions",
        "saved",
        "out_id",
        "out_ref",
        "index",
        "trace",
        "seq_lens",
        "group",
        "__weakref__",
    )

    def __init__(self, op, attrs, needs, parents, leaves, inputs, saved, seq_lens=None):
        self.op = op
        self.attrs = attrs
        self.needs = needs
        self.parents = parents
        self.leaves = leaves
        self.inputs = inputs  # the input tensors, to check their versions; released with ``saved``
        self.versions = [0 if t is None else t._version for t in inputs]
        self.saved = saved
        self.out_id = 0
        self.out_ref = None  # weak reference to the output tensor (the second-order pass differentiates it)
        self.seq_lens = seq_lens  # lengths of sequence parameters, when the op has any
        self.group = None  # for an op with several outputs: the nodes of all its outputs, in output order
        self.index = next(_node_counter)
        self.trace = None

    def __repr__(self) -> str:
        return f"<node #{self.index} {self.op.name}>"


class ResolvedAttributes(dict):
    """An application's attributes after its forward resolved some of them (dropout's ``rng`` -> the seed it drew):
    what it really used, as nodes and tapes record it. ``given`` keeps them as the caller gave them: a compiled step
    (tape/compile.py) calls the forward with those again, so that it draws afresh as an eager call does."""

    __slots__ = ("given",)

    def __init__(self, given: dict, saved: dict):
        super().__init__(given)
        self.update((k, v) for k, v in saved.items() if k in given)
        self.given = given


_SCALARS: dict = {}


def _scalar_constant(value, dtype) -> Tensor:
    """A shared read-only constant tensor for a Python scalar (scalars recur: 0.5, 1e-5, 2.0, ...)."""
    key = (type(value), value, math.copysign(1.0, value) if type(value) is float else 1.0, dtype)
    t = _SCALARS.get(key)
    if t is None:
        if len(_SCALARS) > 512:
            _SCALARS.clear()
        t = _SCALARS[key] = Tensor._wrap(np.asarray(value, dtype=dtype))
    return t


def _coerce(op, inputs, seq_lens=()) -> list:
    """Inputs as Tensors (None kept for absent optional inputs); float dtypes must agree."""
    float_dtype = None
    for x in inputs:
        if isinstance(x, Tensor):
            dt = x._data.dtype
            if dt in _FLOATS:
                if float_dtype is None:
                    float_dtype = dt
                elif dt != float_dtype:
                    _mixed_dtypes(op, inputs)
    out: list[Tensor | None] = []
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor):
            out.append(x)
        elif x is None:
            if seq_lens or not op.optional[i]:
                raise TypeError(f"{op.name}: argument '{_input_name(op, i, seq_lens)}' expected a Tensor, got None")
            out.append(None)
        elif type(x) in (bool, int, float):
            if type(x) is int and not _INT64_MIN <= x <= _INT64_MAX:
                raise ValueError(
                    f"{op.name}: argument '{_input_name(op, i, seq_lens)}' is the Python int {x}, "
                    f"outside int64; minitape computes in int64, float32 or float64"
                )
            if float_dtype is not None and type(x) is not bool:
                out.append(_scalar_constant(x, float_dtype))
            else:
                out.append(as_tensor(x))
        else:
            try:
                t = as_tensor(x)
            except (TypeError, ValueError) as e:
                raise TypeError(
                    f"{op.name}: argument '{_input_name(op, i, seq_lens)}' expected a Tensor or a real "
                    f"array-like, got {type(x).__name__}: {e}"
                ) from None
            if t._data.dtype in _FLOATS and float_dtype is not None and t._data.dtype != float_dtype:
                _mixed_dtypes(op, inputs)
            if t._data.dtype.kind == "f" and t._data.dtype not in _FLOATS:
                raise TypeError(
                    f"{op.name}: argument '{_input_name(op, i, seq_lens)}' has dtype {t._data.dtype}; "
                    f"minitape computes in float32 or float64"
                )
            out.append(t)
    return out


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _not_differentiable(op, name):
    raise TypeError(
        f"{op.name}: argument '{name}' requires grad, but the op is not differentiable with respect "
        f"to it (declared NOT_DIFFERENTIABLE); pass it detached (x.detach()) -- minitape will not "
        f"drop a gradient silently"
    )


def _mixed_dtypes(op, inputs):
    got = ", ".join(
        f"{name}={getattr(getattr(x, 'dtype', None), 'name', type(x).__name__)}"
        for name, x in zip(op.input_names, inputs)
    )
    raise TypeError(
        f"{op.name}: floating inputs must share one dtype (float32 or float64), got {got}; "
        f"convert one explicitly (minitape never casts silently)"
    )


def _flatten(op, values):
    """The tensor arguments as one flat list (sequence parameters spread out) and the sequences' lengths."""
    flat: list = []
    lens = []
    for value, is_seq, name in zip(values, op.sequence, op.input_names):
        if is_seq:
            if not isinstance(value, list | tuple):
                raise TypeError(
                    f"{op.name}: argument '{name}' expected a sequence of tensors, got {type(value).__name__}"
                )
            if not value:
                raise ValueError(f"{op.name}: argument '{name}' expected at least one tensor, got an empty sequence")
            flat.extend(value)
            lens.append(len(value))
        else:
            flat.append(value)
    return flat, tuple(lens)


def group(op, flat, seq_lens):
    """The inverse of ``_flatten``: one entry per tensor parameter (a list for a sequence parameter)."""
    if not seq_lens:
        return list(flat)
    out = []
    k = 0
    lens = iter(seq_lens)
    for is_seq in op.sequence:
        if is_seq:
            n = next(lens)
            out.append(list(flat[k : k + n]))
            k += n
        else:
            out.append(flat[k])
            k += 1
    return out


def _input_name(op, k, seq_lens):
    """The parameter name of flat input ``k`` (``tensors[2]`` inside a sequence)."""
    if not seq_lens:
        return op.input_names[k]
    lens = iter(seq_lens)
    pos = 0
    for name, is_seq in zip(op.input_names, op.sequence):
        n = next(lens) if is_seq else 1
        if k < pos + n:
            return f"{name}[{k - pos}]" if is_seq else name
        pos += n
    return "?"


def _node_for(op, attrs, tensors, arrays, out, saved, seq_lens):
    """The Node recording this application, or None when no input needing a gradient can receive one."""
    watched = STATE.watched
    if seq_lens:
        states = [s for s, n in zip(op.input_states, _slot_sizes(op, seq_lens)) for _ in range(n)]
    else:
        states = op.input_states
    needs = []
    parents = []
    leaves = []
    any_need = False
    for k, (t, state_i) in enumerate(zip(tensors, states)):
        if t is not None and (t._requires_grad or (watched and t.id in watched)):
            if state_i is Grad.NOT_DIFFERENTIABLE:
                if out.dtype.kind == "f" and t._requires_grad:
                    _not_differentiable(op, _input_name(op, k, seq_lens))
            else:
                any_need = True
                needs.append(True)
                parents.append(t._node)
                leaves.append(t if t._node is None else None)
                continue
        needs.append(False)
        parents.append(None)
        leaves.append(None)
    if not any_need:
        return None
    return Node(op, attrs, needs, parents, leaves, tensors, (arrays, out, saved), seq_lens)


def _slot_sizes(op, seq_lens):
    lens = iter(seq_lens)
    return [next(lens) if is_seq else 1 for is_seq in op.sequence]


def _kept(op, name, value):
    """An attribute as the op keeps it: arrays copied and frozen, tensors as their (read-only) arrays, inside
    tuples and lists too -- so a caller refilling an index or lengths buffer cannot move a recorded gradient."""
    kind = type(value)
    if kind is np.ndarray:
        return _frozen_copy(value)
    if kind is tuple or kind is list:
        return kind(_kept(op, name, v) for v in value)
    if isinstance(value, Tensor):
        if needs_grad(value):
            raise TypeError(
                f"{op.name}: argument '{name}' is an attribute of the op, not a tensor input, so no "
                f"gradient can flow to it, and this tensor requires grad; pass it detached "
                f"(x.detach()) -- minitape will not drop a gradient silently"
            )
        return value._data
    return value


def _frozen_copy(array):
    array = array.copy()
    array.setflags(write=False)
    return array


def apply(op, args, kwargs):
    """Run ``op`` on a call's arguments (the forward's own signature), record it, return the output Tensor."""
    if not kwargs and len(args) == op.n_inputs and op.fast_call:
        inputs = args  # the hot path: tensors only, attributes at their defaults
        attrs = op.attr_defaults
        values = None
    else:
        values = op.bind(args, kwargs)
        inputs = [values[i] for i in op.tensor_pos]
        attrs = {}
        for i in op.attr_pos:  # the forward, the checks and the rules all see the kept (frozen) values
            values[i] = attrs[op.param_names[i]] = _kept(op, op.param_names[i], values[i])
    seq_lens = ()
    if op.has_sequence:
        inputs, seq_lens = _flatten(op, inputs)
    tensors = inputs
    float_dtype = None
    for t in inputs:
        if type(t) is not Tensor and not isinstance(t, Tensor):  # scalars, arrays, None: the slow path
            tensors = _coerce(op, inputs, seq_lens)
            break
        dt = t._data.dtype
        if dt.kind == "f":  # a Tensor's floating dtype is always float32 or float64
            if float_dtype is None:
                float_dtype = dt
            elif dt is not float_dtype and dt != float_dtype:
                _mixed_dtypes(op, inputs)
    arrays = [None if t is None else t._data for t in tensors]
    slot_arrays = group(op, arrays, seq_lens) if seq_lens else arrays
    if op.check is not None:
        op.check(*slot_arrays, **attrs)
    if values is None:
        out = op.forward(*arrays)
    else:
        for i, a in zip(op.tensor_pos, slot_arrays):
            values[i] = a
        n = op.n_positional
        keywords = {op.param_names[i]: values[i] for i in range(n, len(values))}
        if op.var_positional is not None:
            v = op.var_positional
            out = op.forward(*values[:v], *values[v], **keywords)
        else:
            out = op.forward(*values[:n], **keywords)
    saved = None
    if op.saves:
        out, saved = out
        if saved.keys() & attrs.keys():  # the forward resolved an attribute (dropout's rng -> the seed it drew):
            attrs = ResolvedAttributes(attrs, saved)  # record what it really used
    if op.n_outputs != 1:
        return _apply_several(op, tensors, attrs, arrays, out, saved, seq_lens)
    if type(out) is not np.ndarray:
        out = np.asarray(out)

    state = STATE
    node = None
    if state.grad_enabled and out.dtype.kind == "f":  # integer and bool outputs carry no gradient (as torch)
        watched = state.watched
        for t in tensors:
            if t is not None and (t._requires_grad or (watched and t.id in watched)):
                node = _node_for(op, attrs, tensors, arrays, out, saved, seq_lens)
                break
    result = Tensor._wrap(out, node)
    if node is not None:
        node.out_id = result.id
        node.out_ref = weakref.ref(result)
        if state.anomaly:
            node.trace = user_frame()
    if state.anomaly:
        _check_forward(op, result, arrays)
    for tape in state.recording_tapes:
        tape._record(op, tensors, attrs, result, node, seq_lens)
    return result


def _apply_several(op, tensors, attrs, arrays, outs, saved, seq_lens):
    """An op with several outputs (split, topk, max with a dim): one Node per floating output, all sharing the
    application (``node.group``); the reverse pass calls the op's rules once, with every output's gradient."""
    if not isinstance(outs, tuple | list) or (op.n_outputs != "variable" and len(outs) != op.n_outputs):
        raise TypeError(
            f"op '{op.name}': its forward must return a tuple of {op.n_outputs} outputs, got {type(outs).__name__}"
        )
    outs = tuple(o if type(o) is np.ndarray else np.asarray(o) for o in outs)
    state = STATE
    needs_node = state.grad_enabled and any(
        t is not None and (t._requires_grad or (state.watched and t.id in state.watched)) for t in tensors
    )
    results = []
    group: list = []
    for out in outs:
        node = None
        if needs_node and out.dtype.kind == "f":
            node = _node_for(op, attrs, tensors, arrays, outs, saved, seq_lens)
        result = Tensor._wrap(out, node)
        if node is not None:
            node.out_id = result.id
            node.out_ref = weakref.ref(result)
            node.group = group
            if state.anomaly:
                node.trace = user_frame()
        group.append(node)
        results.append(result)
        if state.anomaly:
            _check_forward(op, result, arrays)
    first = next((node for node in group if node is not None), None)
    outputs = tuple(results)
    for tape in state.recording_tapes:
        tape._record(op, tensors, attrs, outputs, first, seq_lens)
    return outputs


bind_apply(apply)


# -- anomaly detection -------------------------------------------------------------------------------------
_ENGINE_DIRS = (os.path.dirname(__file__), os.path.join(os.path.dirname(os.path.dirname(__file__)), "ops"))


def user_frame() -> str:
    """'file:line in function: source' of the innermost stack frame outside tape/ and ops/."""
    for frame in reversed(traceback.extract_stack()):
        if not os.path.dirname(os.path.abspath(frame.filename)).startswith(_ENGINE_DIRS):
            return f"{frame.filename}:{frame.lineno} in {frame.name}: {frame.line}"
    return "<unknown>"


def _check_forward(op, result, arrays):
    where = user_frame()
    data = result._data
    if data.dtype.kind == "f" and not np.isfinite(data).all():
        bad = "NaN" if np.isnan(data).any() else "inf"
        inputs_ok = all(a is None or a.dtype.kind != "f" or np.isfinite(a).all() for a in arrays)
        origin = "from finite inputs" if inputs_ok else "(an input already held NaN/inf)"
        raise AnomalyError(f"anomaly: forward of op '{op.name}' produced {bad} {origin}; recorded at {where}")


def check_backward_result(node, input_name, grad):
    if grad.dtype.kind == "f" and not np.isfinite(grad).all():
        bad = "NaN" if np.isnan(grad).any() else "inf"
        raise AnomalyError(
            f"anomaly: backward of op '{node.op.name}' produced {bad} in the gradient for input "
            f"'{input_name}'; the op was recorded at {node.trace or '<recorded before detect_anomaly>'}"
        )
