"""Applying an op: ``apply`` (``Op.__call__``) runs the forward on the arguments' arrays and, when an input needs a
gradient, records a ``Node`` -- what the reverse pass walks -- on the output; recording tapes get the application
too. Its per-thread switches are in tape/state.py, the arguments' coercion in tape/arguments.py.
"""

from __future__ import annotations

import itertools

import numpy as np

from . import inplace
from .anomaly import check_forward, user_frame
from .arguments import (
    CONSTANTS_32,
    CONSTANTS_64,
    F32,
    FLOAT16,
    coerce,
    flat_states,
    flatten,
    input_name,
    kept,
    mixed_dtypes,
    not_differentiable,
    regroup,
    scalar_constant,
    storage_only,
)
from .registry import Grad, Op
from .state import NUMPY_QUIET, STATE, numpy_errors_reset, numpy_errors_set
from .tensors import Tensor

__all__ = ["Node", "apply"]

_node_counter = itertools.count()
_NEED_ONE, _NEED_BOTH, _NEED_FIRST, _NEED_SECOND = (True,), (True, True), (True, False), (False, True)
_NO_LEAVES_1, _NO_LEAVES_2 = (None,), (None, None)
_ZERO_VERSIONS_1, _ZERO_VERSIONS_2 = (0,), (0, 0)  # apply's short path: shared, so the reverse pass tests identity


def next_node_index() -> int:
    """Draw an index: every Node made afterwards has a larger one."""
    return next(_node_counter)


class Node:
    """One recorded op application (made by ``_node_for`` only, which sets every field). ``parents[i]``: the Node
    that produced input i (None for a leaf or constant); ``leaves[i]``: input i when it is a leaf that needs a
    gradient; ``residuals``: (input arrays, output array(s), aux) until a backward frees them, with ``inputs``;
    ``versions``: the inputs' versions when recorded; ``index`` grows with every application (a topological
    order); ``siblings``: the nodes of all outputs of an op with several."""

    op: Op
    attrs: dict
    _needs: tuple[bool, ...]
    parents: tuple | list
    leaves: tuple | list
    inputs: tuple | list | None
    versions: tuple | list
    residuals: tuple | None
    out_id: int
    index: int
    trace: str | None
    seq_lens: tuple
    siblings: list | None
    __slots__ = (*__annotations__, "__weakref__")

    @property
    def needs(self) -> list[bool]:
        """Whether each input needs a gradient (a fresh list: the node keeps them as a tuple, often a shared one)."""
        return list(self._needs)

    def __repr__(self) -> str:
        return f"<node #{self.index} {self.op.name}>"


class ResolvedAttributes(dict):
    """An application's attributes after its forward resolved some of them (dropout's ``rng`` -> the seed it drew):
    what it really used, as nodes and tapes record it. ``given`` keeps them as the caller gave them: a compiled step
    (tape/compile.py) calls the forward with those again, so that it draws afresh as an eager call does."""

    __slots__ = ("given",)

    def __init__(self, given: dict, aux: dict):
        super().__init__(given)
        self.update((k, v) for k, v in aux.items() if k in given)
        self.given = getattr(given, "given", given)  # (resolved again by the forward: still as the caller gave them)


def _node_for(op, attrs, tensors, arrays, out, aux, seq_lens, watched):
    """THE constructor of a Node: the one recording this (floating-output) application, or None when no input needing
    a gradient can receive one. One or two tensors of an op without NOT_DIFFERENTIABLE inputs (``apply``'s short path)
    are worked out inline, with shared tuples where they fit (fewer objects for the garbage collector to scan); any
    other call by ``_needs_of``. ``watched``: this thread's watched tensor ids. ``out_id`` is set once the output
    Tensor exists, ``siblings`` by ``run_op``."""
    needs: tuple
    parents: tuple | list
    leaves: tuple | list
    versions: tuple | list
    n = len(tensors)
    a = tensors[0] if n else None
    b = tensors[1] if n == 2 else None
    if n == 1 and a is not None and op.all_differentiable:
        if not (a._requires_grad or (watched and a.id in watched)):
            return None
        needs, parents = _NEED_ONE, (a._node,)
        leaves = _NO_LEAVES_1 if parents[0] is not None else (a,)
        versions = _ZERO_VERSIONS_1 if not a._version else (a._version,)
    elif n == 2 and a is not None and b is not None and op.all_differentiable:
        need_a = a._requires_grad or (bool(watched) and a.id in watched)
        need_b = b._requires_grad or (bool(watched) and b.id in watched)
        if not (need_a or need_b):
            return None
        needs = (_NEED_BOTH if need_b else _NEED_FIRST) if need_a else _NEED_SECOND
        parents = (a._node if need_a else None, b._node if need_b else None)
        leaf_a = a if need_a and parents[0] is None else None
        leaf_b = b if need_b and parents[1] is None else None
        leaves = _NO_LEAVES_2 if leaf_a is None and leaf_b is None else (leaf_a, leaf_b)
        versions = _ZERO_VERSIONS_2 if not (a._version or b._version) else (a._version, b._version)
    else:
        found = _needs_of(op, tensors, seq_lens, watched)
        if found is None:
            return None
        needs, parents, leaves, versions = found
    node = Node()
    node.op = op
    node.attrs = attrs
    node._needs = needs
    node.parents = parents
    node.leaves = leaves
    node.inputs = tensors  # the input tensors, to check their versions; released with ``residuals``
    node.versions = versions
    node.residuals = (arrays, out, aux)
    node.seq_lens = seq_lens
    node.siblings = None
    node.trace = None
    node.out_id = 0
    node.index = next(_node_counter)
    return node


def _needs_of(op, tensors, seq_lens, watched):
    """(needs, parents, leaves, versions) of a general application, or None when nothing needs a gradient; an input
    that requires grad where the op declares NOT_DIFFERENTIABLE is refused."""
    needs = []
    for k, (t, state_k) in enumerate(zip(tensors, flat_states(op, seq_lens))):
        need = t is not None and (t._requires_grad or (bool(watched) and t.id in watched))
        if need and state_k is Grad.NOT_DIFFERENTIABLE:
            if t._requires_grad:
                not_differentiable(op, input_name(op, k, seq_lens))
            need = False
        needs.append(need)
    if True not in needs:
        return None
    parents = [t._node if need else None for t, need in zip(tensors, needs)]
    leaves = [t if need and t._node is None else None for t, need in zip(tensors, needs)]
    return tuple(needs), parents, leaves, [0 if t is None else t._version for t in tensors]


def apply(op, *args, **kwargs):
    """``Op.__call__``: run ``op`` on a call's arguments, record it, return the output Tensor. A call of
    ``short_path_arity`` positional tensors (or a tensor and a float) takes the short path here, ``_apply``'s steps
    inline (docs/engine.md); other calls go to ``_apply``, a compiled step's traced calls to its trace."""
    state = STATE.__dict__  # this thread's state (a threading.local's own dict): one lookup, then plain reads
    if state["tracer"] is not None:
        return state["tracer"].apply(op, args, kwargs)
    n = len(args)
    if n != op.short_path_arity or kwargs:
        return _apply(op, args, kwargs)
    a = args[0]
    if type(a) is not Tensor:  # ``1.0 - x``: the float as the shared constant, then the two-tensor short path
        if n == 2 and type(a) is float and type(args[1]) is Tensor and args[1].dtype.kind == "f":
            return apply(op, scalar_constant(a, args[1].dtype), args[1])
        return _apply(op, args, kwargs)
    if n == 2:
        b = args[1]
        da = a._data.dtype
        if type(b) is Tensor:
            db = b._data.dtype
            if db is not da and db.kind == "f" and da.kind == "f" and db != da:
                mixed_dtypes(op, args)
        elif type(b) is float and da.kind == "f":  # the shared constant (``scalar_constant``), looked up inline
            c = CONSTANTS_32.get(b) if da is F32 else CONSTANTS_64.get(b)
            b = scalar_constant(b, da) if c is None else c
        else:
            return _apply(op, args, kwargs)
    tensors: tuple = (a, b) if n == 2 else (a,)
    arrays: tuple = (a._data, b._data) if n == 2 else (a._data,)
    if (arrays[0].dtype is FLOAT16 or (n == 2 and arrays[1].dtype is FLOAT16)) and not op.casts:
        storage_only(op, arrays, ())
    attrs = op.attr_defaults
    check = op.check
    if check is not None and not (  # a check declared to pass for floating inputs need not run for them
        op.check_passes_floats and arrays[0].dtype.kind == "f" and (n == 1 or arrays[1].dtype.kind == "f")
    ):
        check(*arrays, **attrs)
    forward, quiet = op.forward_call
    out = short_forward(forward, quiet, arrays)
    node = None
    if state["grad_enabled"] and out.dtype.kind == "f":  # integer and bool outputs carry no gradient (as torch)
        node = _node_for(op, attrs, tensors, arrays, out, None, (), state["watched"])
    result = Tensor._wrap(out, node)
    if node is not None:
        node.out_id = result.id
    if state["anomaly"] or state["recording_tapes"]:
        _observe(op, tensors, attrs, result, (node,), arrays, ())
    return result


def short_forward(forward, quiet, arrays) -> np.ndarray:
    """An op's forward (``Op.forward_call``) on arrays as ``apply``'s short path and a compiled plan call it: numpy's
    warnings off around a quiet one (what the ``quiet`` wrapper does, without its frame), the result an array."""
    if not quiet:
        out = forward(*arrays)
    else:
        token = numpy_errors_set(NUMPY_QUIET)
        try:
            out = forward(*arrays)
        finally:
            numpy_errors_reset(token)
    out = out if type(out) is np.ndarray else np.asarray(out)
    shared = out.base is not None or out is arrays[0] or out is arrays[-1]  # only torch's views share inputs' memory
    return inplace.owned(out, arrays) if shared else out


def _observe(op, tensors, attrs, output, nodes, arrays, seq_lens) -> None:
    """What anomaly mode and the recording tapes see of an application (off the hot path); ``nodes``: one per
    output (None for an output without one)."""
    state = STATE
    if state.anomaly:
        for node, result in zip(nodes, (output,) if isinstance(output, Tensor) else output):
            if node is not None:
                node.trace = user_frame()
            check_forward(op, result, arrays)
    first = next((node for node in nodes if node is not None), None)
    for tape in state.recording_tapes:
        tape._record(op, tensors, attrs, output, first, seq_lens)


def _apply(op, args, kwargs):
    """Every call ``apply``'s short path does not take: binding, attributes, coercion, sequences, several outputs."""
    tensors, attrs, values, seq_lens = bind_call(op, args, kwargs)
    return run_op(op, tensors, attrs, values, seq_lens)


def bind_call(op, args, kwargs, coerce=coerce):
    """A call's tensor inputs (flat, coerced by ``coerce``), attributes (kept), bound values (None on the fast call)
    and sequence lengths: what ``run_op`` takes (eager ``_apply``, ``ExecutionTape.replay``, a compiled step's
    trace)."""
    if not kwargs and len(args) == op.n_inputs and op.tensors_only_call:
        inputs = args  # the hot path: tensors only, attributes at their defaults
        attrs = op.attr_defaults
        values = None
    else:
        values = op.bind(args, kwargs)
        inputs = [values[i] for i in op.tensor_pos]
        attrs = {}
        for i in op.attr_pos:  # the forward, the checks and the rules all see the kept (frozen) values
            values[i] = attrs[op.param_names[i]] = kept(op, op.param_names[i], values[i])
    seq_lens = ()
    if op.has_sequence:
        inputs, seq_lens = flatten(op, inputs)
    tensors = inputs
    float_dtype = None
    for t in inputs:
        if type(t) is not Tensor and not isinstance(t, Tensor):  # scalars, arrays, None: the slow path
            tensors = coerce(op, inputs, seq_lens)
            break
        dt = t.dtype
        if dt.kind == "f":  # a Tensor's floating dtype is always float32 or float64
            if float_dtype is None:
                float_dtype = dt
            elif dt is not float_dtype and dt != float_dtype:
                mixed_dtypes(op, inputs)
    return tensors, attrs, values, seq_lens


def forward_arrays(op, arrays, attrs, values, seq_lens):
    """THE calling convention of an op on arrays, shared by eager ``run_op`` and a compiled step's plan: the op's
    check, then its forward (``values``: the bound arguments, None for tensors-only calls; filled in here). Returns
    what the forward returns ((out, aux) for ``returns_aux``). ``apply``'s short path inlines this for its calls."""
    slot_arrays = regroup(op, arrays, seq_lens) if seq_lens else arrays
    if op.check is not None:
        op.check(*slot_arrays, **attrs)
    if values is None:
        return op.forward(*arrays)
    for i, a in zip(op.tensor_pos, slot_arrays):
        values[i] = a
    n = op.n_positional
    keywords = {op.param_names[i]: values[i] for i in range(n, len(values))}
    if op.var_positional is not None:
        v = op.var_positional
        return op.forward(*values[:v], *values[v], **keywords)
    return op.forward(*values[:n], **keywords)


def several_outputs(op, out) -> bool:
    """Whether a forward's result is several outputs: an op with named or "variable" outputs may return one array
    for a call (torch.max(x) against torch.max(x, dim); nonzero's as_tuple); one with a fixed count of unnamed
    outputs must return them all."""
    return op.n_outputs != 1 and (
        isinstance(out, tuple | list) or (op.result_type is None and op.n_outputs != "variable")
    )


def run_op(op, tensors, attrs, values, seq_lens):
    """Apply ``op`` to coerced tensors: the forward on their arrays, the Node(s), the output Tensor(s), the tapes. An
    op with several outputs (split, topk, max with a dim) gets one Node per floating output, all sharing the
    application (``node.siblings``): the reverse pass calls the op's rules once, with every output's gradient."""
    arrays = [None if t is None else t._data for t in tensors]
    if not op.casts and any(a is not None and a.dtype is FLOAT16 for a in arrays):
        storage_only(op, arrays, seq_lens)
    out = forward_arrays(op, arrays, attrs, values, seq_lens)
    aux = None
    if op.returns_aux:
        out, aux = out
        if aux.keys() & attrs.keys():  # the forward resolved an attribute (dropout's rng -> the seed it drew):
            attrs = ResolvedAttributes(attrs, aux)  # record what it really used
    several = several_outputs(op, out)
    if several and (not isinstance(out, tuple | list) or (op.n_outputs != "variable" and len(out) != op.n_outputs)):
        raise TypeError(
            f"op '{op.name}': its forward must return a tuple of {op.n_outputs} outputs, got {type(out).__name__}"
        )
    if several:
        outs = tuple(o if type(o) is np.ndarray else np.asarray(o) for o in out)
    else:
        outs = (out if type(out) is np.ndarray else np.asarray(out),)
    if not op.view:
        outs = tuple(inplace.owned(o, arrays) for o in outs)
    state = STATE
    nodes: list = []
    results = []
    for o in outs:
        node = None
        if state.grad_enabled and o.dtype.kind == "f":  # integer and bool outputs carry no gradient (as torch)
            node = _node_for(op, attrs, tensors, arrays, outs if several else o, aux, seq_lens, state.watched)
        result = Tensor._wrap(o, node)
        if node is not None:
            node.out_id = result.id
            node.siblings = nodes if several else None
        nodes.append(node)
        results.append(result)
    if op.view:
        inplace.link_views(tensors, results)
    output = results[0] if not several else tuple(results) if op.result_type is None else op.result_type(*results)
    if state.anomaly or state.recording_tapes:
        _observe(op, tensors, attrs, output, nodes, arrays, seq_lens)
    return output


# calling an op is ``apply`` itself: one Python frame, not two
Op.__call__ = apply  # type: ignore[method-assign,assignment]
