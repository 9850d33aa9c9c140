"""A compiled training step: ``fn`` runs on every call, its ops traced cheaply (placeholders, no values); a trace
that matches a plan runs its calls through eager's own steps and then eager's reverse pass, anything else runs (and
is recorded as a new plan) eagerly. The result is eager's, bit for bit, or a CompileError. docs/compile.md has the full
story: what a trace is matched by, what a plan depends on, when a call runs eagerly.

    step = tape.compile(loss_fn, model.parameters())   # loss_fn(*batch) -> a scalar loss Tensor, through ops
    loss, grads = step(tokens, targets)                 # loss: a constant Tensor; grads: [p.grad for p in params]
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

import numpy as np

from . import arguments, compile_ort
from .arguments import scalar_constant
from .autodiff import backward, reverse_pass, seed_gradients
from .compile_guards import as_given, difference, drawn, fails, key_or_none, marked, unplanned
from .recording import _node_for, bind_call, run_op, short_forward
from .state import STATE, enable_grad
from .tensors import Tensor, _ids, _readonly

__all__ = ["compile", "CompiledStep", "CompileError"]


class CompileError(RuntimeError):
    """A compiled call cannot give eager's result (a data-dependent shape), or fits no plan with recompile=False."""


def compile(
    fn: Callable, params: Iterable[Tensor] = (), *, recompile=True, max_plans=8, backend="numpy", providers=None
):
    """Compile ``fn(*args, **kwargs) -> scalar loss Tensor`` into a step returning ``(loss, grads)``; see the module
    docstring. ``params``: the tensors whose ``.grad`` is returned, in order (every leaf that requires grad gets its
    ``.grad`` as after ``backward()`` anyway; given, a loss needing no grad raises as there). ``recompile=False``: a
    call that fits no plan raises CompileError. ``backend="onnxruntime"``: tape/compile_ort.py, on ``providers``."""
    return CompiledStep(fn, params, recompile=recompile, max_plans=max_plans, backend=backend, providers=providers)


class CompiledStep:
    """The callable ``tape.compile`` returns. ``records`` counts eager calls (each records a plan), ``replays`` the
    calls a plan ran."""

    def __init__(self, fn, params=(), *, recompile=True, max_plans=8, backend="numpy", providers=None):
        self.backend, self.providers, self.onnx_runs = compile_ort.checked(backend), providers, 0  # runs: of replays
        self.fn, self.params = fn, list(params)
        for k, p in enumerate(self.params):
            if not isinstance(p, Tensor):
                raise TypeError(f"compile: params[{k}] must be a Tensor, got {type(p).__name__}")
        if max_plans < 1:
            raise ValueError(f"compile: max_plans must be >= 1, got {max_plans}")
        self.recompile, self.max_plans = recompile, max_plans
        self._plans: list[_Plan] = []
        self._eager_at: set = set()  # (index, op) of calls whose output shape fn read and the data changed
        self.records = self.replays = 0

    def reset(self) -> None:  # forget every plan
        self._plans.clear()

    def __repr__(self) -> str:
        ops = " (" + "/".join(f"{len(p.calls)} ops" for p in self._plans) + ")" if self._plans else ""
        name, counts = getattr(self.fn, "__qualname__", self.fn), f"{self.records} recorded and {self.replays} replayed"
        return f"<compiled {name}: {len(self._plans)} plan(s){ops}, {counts} calls>"

    def __call__(self, *args, **kwargs):
        if STATE.recording_tapes or STATE.anomaly or STATE.tracer is not None:  # plain eager
            with enable_grad():
                loss = _checked_loss(self.fn(*args, **kwargs))
            return self._result(loss)
        trace = STATE.tracer = _Trace(self)
        try:
            try:
                with enable_grad():
                    loss = _checked_loss(self.fn(*args, **kwargs))
            except Exception:
                trace.materialize()  # an op traced before the error may fail its check: eager raised that first
                raise
            STATE.tracer = None  # fn has returned: the plan, the backward and its hooks run as eager code
            plan = None if trace.eager else trace.finished(loss)
            if plan is not None:
                if plan.ort is not None and (tensors := plan.ort.matches(trace.entries)) is not None:
                    self.replays, self.onnx_runs = self.replays + 1, self.onnx_runs + 1
                    return compile_ort.result(self, loss, *plan.ort.run(tensors))
                made = plan.run(trace)
                self.replays += 1
                return self._result(loss, made)
            trace.materialize()
            trace.close()  # the recording is complete: the backward is not part of it
            result = self._result(loss)
            self.records += 1
            plan, why = _build(trace.records, loss, self._eager_at) if trace.keep_plan else (None, None)
            unplanned(self.fn, why, plan, self._plans)
            if plan is not None:
                plan.ort = compile_ort.program(self, trace.records, loss)
                self._plans.insert(0, plan)
                del self._plans[self.max_plans :]
            return result
        finally:
            trace.close()

    def _result(self, loss, nodes=None):
        """(the loss as a constant, the params' grads) after ``loss.backward()`` -- over ``nodes``, when a plan made
        every node the loss reaches."""
        if loss._node is None and self.params:  # eager's ``loss.backward()`` raises: every parameter is frozen
            backward([loss], retain_graph=False)
        elif loss._node is not None:
            reverse_pass([loss], seed_gradients([loss], None, "backward"), retain_graph=False, nodes=nodes)
        return Tensor._wrap(loss._data), [p.grad for p in self.params]


def _checked_loss(loss):
    if not isinstance(loss, Tensor) or loss.numel() != 1 or loss.dtype.kind != "f":
        got = f"Tensor {loss.dtype}{list(loss.shape)}" if isinstance(loss, Tensor) else type(loss).__name__
        raise TypeError(f"compile: fn must return a single-element floating loss Tensor, got {got}")
    return loss


# -- placeholders: a ``_Pending``'s ``_data`` slot holds (shape, dtype, cell, slot) until it has a value; ``cell``
# is its trace's one-item list [trace], emptied when the call ends ------------------------------------------------
_DATA, _NODE = Tensor.__dict__["_data"], Tensor.__dict__["_node"]  # the slots themselves
_SPEC, _SET_DATA, _SET_NODE = _DATA.__get__, _DATA.__set__, _NODE.__set__


def _materialize(t) -> None:
    if type(t) is _Pending:
        trace = _SPEC(t, Tensor)[2][0]
        if trace is None:
            raise CompileError("compile: this tensor was computed in a compiled step that raised; it has no value")
        trace.materialize()


def _materializing(slot):
    """A property for a Tensor slot that materializes the trace first (then reads or sets the slot itself)."""

    def get(t):
        _materialize(t)
        return slot.__get__(t, Tensor)

    def set_(t, value):
        _materialize(t)
        slot.__set__(t, value)

    return property(get, set_)


def _planned_shape(p) -> tuple:
    """A placeholder's shape as the plan has it, noted as read by fn: the data may not give it another then."""
    spec = _SPEC(p, Tensor)
    if spec[2][0] is not None:
        spec[2][0].shapes_read.add(spec[3])
    return spec[0]


class _Pending(Tensor):
    """An op output of a trace: shape and dtype known, values not yet. Reading its values (or graph) materializes
    the trace; it then becomes a plain Tensor (``__class__`` reassigned)."""

    __slots__ = ()
    _data, _node = _materializing(_DATA), _materializing(_NODE)
    shape = property(_planned_shape)
    dtype = property(lambda self: _SPEC(self, Tensor)[1])
    ndim = property(lambda self: len(_planned_shape(self)))

    def numel(self) -> int:  # (``size()``, ``dim()`` read ``shape``/``ndim`` above; anything else materializes)
        return math.prod(_planned_shape(self))


def _placeholder(cell, slot, spec) -> _Pending:
    p = _NEW(_Pending)
    _SET_DATA(p, (spec[0], spec[1], cell, slot))
    _SET_NODE(p, None)
    p._requires_grad, p._grad, p.id, p._version, p.name, p._aliases = spec[2], None, next(_ids), 0, None, None
    return p


_NEW = _Pending.__new__
_standin = functools.cache(lambda dtype: Tensor._wrap(np.empty(0, dtype)))  # an empty tensor of a dtype, shared


def _coerce_traced(op, inputs, seq_lens):
    """``arguments.coerce`` on a traced call: placeholders are shown to it as empty tensors of their dtype."""
    shown = [_standin(_SPEC(x, Tensor)[1]) if type(x) is _Pending else x for x in inputs]
    return [x if type(x) is _Pending else o for x, o in zip(inputs, arguments.coerce(op, shown, seq_lens))]


# -- the trace: entry k is (op, tensors, attrs, values, seq_lens, captured, outs, result): the bound call,
# (tensor, array, version) per outside tensor read, the placeholder outputs and what fn got -----------------------
class _Trace:
    """The op calls of one run of ``fn`` while they match a plan (call k against entry k of the candidates: by its
    ``fast`` signature, else bound and keyed as eager binds it); then (materialized) an eager recording."""

    records_inplace = True  # an in-place op materializes the trace and keeps no plan (tape/inplace.py)

    def __init__(self, step):
        self.keep_plan = True
        self.step = step
        self.candidates = list(step._plans)
        self.calls = self.candidates[0].calls if self.candidates else ()
        self.entries: list = []
        self.cell: list = [self]
        self.eager = False
        self.records: list = []  # an eager call's op applications, recorded as a tape records them: its plan
        self.shapes_read: set = set()  # the slots of the placeholders whose (planned) shape fn read

    def apply(self, op, args, kwargs):
        k = len(self.entries)
        call: Any = self.calls[k] if k < len(self.calls) else None
        sig = None if call is None or call.op is not op or kwargs else call.fast
        state = STATE.__dict__  # (this thread's state, read as ``apply`` reads it)
        if sig is None or len(args) != len(sig) or state["grad_enabled"] is not call.grad_enabled:
            return self._slow(op, args, kwargs, k)
        if state["recording_tapes"] or state["anomaly"]:
            return self._slow(op, args, kwargs, k)
        cell, tensors = self.cell, args
        captured: tuple = ()
        for i, s in enumerate(sig):
            a, kind = args[i], type(s)
            if kind is int:  # an earlier output of this trace
                if type(a) is not _Pending or (spec := _SPEC(a, Tensor))[2] is not cell or spec[3] != s:
                    return self._slow(op, args, kwargs, k)
            elif kind is tuple:  # an outside tensor without a graph: (shape, dtype, requires_grad)
                if type(a) is _Pending or not isinstance(a, Tensor) or a._node is not None:
                    return self._slow(op, args, kwargs, k)
                d = a._data
                if d.shape != s[0] or d.dtype != s[1] or a._requires_grad is not s[2]:
                    return self._slow(op, args, kwargs, k)
                captured += ((a, d, a._version),)
            else:  # a Python float, as the shared constant of dtype ``s`` eager makes of it
                if type(a) is not float:
                    return self._slow(op, args, kwargs, k)
                if tensors is args:
                    tensors = list(args)
                tensors[i] = scalar_constant(a, s)
        if len(self.candidates) > 1:
            self.candidates = [p for p in self.candidates if k < len(p.calls) and p.calls[k].key == call.key]
        return self._enter(op, tensors, op.attr_defaults, None, (), captured, call)

    def _slow(self, op, args, kwargs, k):
        """The call bound and coerced as eager does, keyed, matched against the candidates' entry k."""
        tensors, attrs, values, seq_lens = bind_call(op, args, kwargs, _coerce_traced)
        if self.eager:  # binding read a placeholder's values (a tensor attribute): eager from here
            return run_op(op, tensors, attrs, values, seq_lens)
        keys: list = []
        for t in tensors:
            if type(t) is _Pending and _SPEC(t, Tensor)[2] is self.cell:
                keys.append(_SPEC(t, Tensor)[3])
            elif t is not None and t._node is not None:  # a graph made outside fn: gradients flow beyond it
                return self._eager_from_here(op, args, kwargs, None)
            else:
                keys.append(None if t is None else (t._data.shape, t._data.dtype, t._requires_grad))
        given = marked(op, attrs)  # a declared random draw's attributes marked: each call makes its own draw
        attr_key = key_or_none(given)
        key = (op, seq_lens, attr_key, tuple(keys), STATE.grad_enabled)
        matching = [p for p in self.candidates if k < len(p.calls) and p.calls[k].key == key]
        if attr_key is None or not matching or STATE.recording_tapes or STATE.anomaly:
            return self._eager_from_here(op, args, kwargs, key)
        self.candidates, self.calls = matching, matching[0].calls
        call = self.calls[k]
        if values is None and not seq_lens and not kwargs and given is attrs:
            call.fast = _fast_signature(args, tensors, keys)
        captured = tuple((t, t._data, t._version) for t, key in zip(tensors, keys) if type(key) is tuple)
        shown = [_SPEC(t, Tensor)[:2] if type(t) is _Pending else None if t is None else t._data for t in tensors]
        if fails(op, shown, attrs, values, seq_lens):  # it raises on its indices: here, where eager raises
            self.materialize()
            return op(*args, **kwargs)
        return self._enter(op, tensors, *drawn(op, attrs, values), seq_lens, captured, call)  # here, as eager draws

    def _enter(self, op, tensors, attrs, values, seq_lens, captured, call):
        result: Any
        if call.single:
            result = _placeholder(self.cell, call.first, call.out_specs[0])
            outs: tuple = (result,)
        else:
            outs = tuple(_placeholder(self.cell, call.first + m, s) for m, s in enumerate(call.out_specs))
            result = outs if op.result_type is None else op.result_type(*outs)
        self.entries.append((op, tensors, attrs, values, seq_lens, captured, outs, result))
        return result

    def _eager_from_here(self, op, args, kwargs, key):
        step = self.step
        if not step.recompile and step._plans:
            k = len(self.entries)
            plan = self.candidates[0] if self.candidates else step._plans[0]
            had = plan.calls[k] if k < len(plan.calls) else None
            raise CompileError(
                f"compile: op #{k} '{op.name}' fits no recorded plan (recompile=False): {difference(key, had)}"
            )
        self.materialize()
        return op(*args, **kwargs)

    def materialize(self) -> None:
        """Run every traced op through eager ``run_op``, in order, on its captured arrays; then record eagerly."""
        if self.eager:
            return
        self.eager = True
        STATE.tracer = None
        try:
            for k, (e, call) in enumerate(zip(self.entries, self.calls)):
                _run_traced(k, call, e, self, record=True)
        finally:
            STATE.recording_tapes.append(self)  # the rest of fn records as it runs

    def finished(self, loss):
        """The plan this complete trace matches (with ``loss`` its loss and no captured input changed since), or
        None."""
        if type(loss) is not _Pending or _SPEC(loss, Tensor)[2] is not self.cell:
            return None
        for e in self.entries:
            for t, a, v in e[5]:
                if t._data is not a or t._version != v:
                    return None
        slot = _SPEC(loss, Tensor)[3]
        return next((p for p in self.candidates if len(p.calls) == len(self.entries) and p.loss_slot == slot), None)

    def _record(self, op, tensors, attrs, result, node, seq_lens):
        self.records.append([op, tensors, attrs, result, node, seq_lens, STATE.grad_enabled])

    def close(self) -> None:
        STATE.tracer = None
        if self in STATE.recording_tapes:
            STATE.recording_tapes.remove(self)
        self.cell[0] = None


def _fast_signature(args, tensors, keys):
    """Per positional argument an output slot, an outside tensor's (shape, dtype, requires_grad) or a Python float's
    constant dtype; None when an argument is anything else."""
    sig = []
    for a, t, key in zip(args, tensors, keys):
        if isinstance(a, Tensor) and key is not None and not (type(key) is tuple and key[1].kind in "iu"):
            sig.append(key)  # (an integer array stays on the bound path: ``compile_guards.fails`` tries the call)
        elif type(a) is float and t._data.dtype.kind == "f" and scalar_constant(a, t._data.dtype) is t:
            sig.append(t._data.dtype)
        else:
            return None
    return tuple(sig)


# -- plans ------------------------------------------------------------------------------------------------------
class _Call(SimpleNamespace):
    """One op call of a plan (its fields set by ``_build``): ``op``, ``key``, ``fast`` (its signature, set at the first
    bound match), ``grad_enabled``, ``out_specs`` ((shape, dtype, requires_grad) per output) from slot ``first``,
    ``single`` (one Tensor result), ``short`` ((check or None, forward, quiet?, shape, dtype) for a call of
    ``apply``'s short path, else None)."""


class _Plan:
    """A recorded call: each op call's key, output specs and short-path facts, and the loss's slot."""

    def __init__(self, calls, loss_slot):
        self.calls, self.loss_slot = calls, loss_slot
        self.ort: Any = None  # the OrtProgram (backend="onnxruntime"), None: the numpy steps

    def run(self, trace) -> list:
        """Each traced call as eager runs it -- ``apply``'s short-path steps or ``recording.run_op``'s, making the
        same Nodes -- its outputs checked against the plan's and given to the placeholders fn holds. Returns the
        Nodes made, last first."""
        watched = STATE.watched
        made: list = []
        for k, (call, e) in enumerate(zip(self.calls, trace.entries)):
            if call.short is None or e[3] is not None:
                made.extend(_run_traced(k, call, e, trace))
                continue
            check, forward, quiet, shape, dtype = call.short
            arrays = []  # (a loop: a comprehension is a call of its own on Python 3.11)
            for t in e[1]:
                arrays.append(t._data)
            if check is not None:
                check(*arrays, **e[2])
            out = short_forward(forward, quiet, arrays)
            if out.shape != shape or (out.dtype is not dtype and out.dtype != dtype):
                _check_outputs(k, call, e, (out,), trace)
            node = None
            if call.grad_enabled and out.dtype.kind == "f":
                node = _node_for(call.op, e[2], e[1], arrays, out, None, (), watched)
            p = e[6][0]
            p.__class__ = Tensor  # the Tensor eager makes (``Tensor._wrap``), in the placeholder fn holds
            p._data, p._node, p._requires_grad = _readonly(out), node, node is not None
            if node is not None:
                node.out_id = p.id
                made.append(node)
        trace.entries = []
        made.reverse()
        return made


def _run_traced(k, call, e, trace, record=False) -> list:
    """Traced call k through eager's ``run_op`` -- on the arrays fn gave it (a later ``p.data = ...`` aside), in its
    grad mode, recorded into ``trace`` with ``record`` -- its outputs checked against the plan's and given to the
    placeholders fn holds. Returns the Nodes it made."""
    op, tensors, attrs, values, seq_lens, captured, outs, result = e
    restore = [(t, t._data, t._version) for t, a, v in captured if t._data is not a or t._version != v]
    for t, a, v in captured:
        t._data, t._version = a, v
    previous, STATE.grad_enabled = STATE.grad_enabled, call.grad_enabled
    if record:
        STATE.recording_tapes.append(trace)  # records what eager records (resolved attributes included)
    try:
        real = run_op(op, tensors, attrs, values, seq_lens)
    finally:
        if record:
            STATE.recording_tapes.remove(trace)
        STATE.grad_enabled = previous
        for t, a, v in restore:
            t._data, t._version = a, v
    reals = (real,) if isinstance(real, Tensor) else tuple(real)
    _check_outputs(k, call, e, [r._data for r in reals], trace)
    for p, r in zip(outs, reals):  # the placeholders become the Tensors eager made
        p.__class__ = Tensor
        p._data, p._node, p._requires_grad = r._data, r._node, r._requires_grad
        if r._node is not None:
            r._node.out_id = p.id
    if record:
        trace.records[-1][3] = result  # the placeholders are the tensors fn holds
    return [r._node for r in reals if r._node is not None]


def _check_outputs(k, call, e, outs, trace) -> None:
    """A call's outputs against the plan's: other shapes (the data shapes them: a boolean mask, repeats) are eager's
    values all the same, unless fn read a planned shape of them; that, or other dtypes or counts: CompileError."""
    specs = call.out_specs
    if len(outs) == len(specs) and all(o.dtype == s[1] for o, s in zip(outs, specs)):
        if all(o.shape == s[0] for o, s in zip(outs, specs)) or not any(
            call.first + m in trace.shapes_read for m in range(len(specs))
        ):
            return
    step = trace.step  # this call runs eagerly from now on: no plan is kept with it
    step._eager_at.add((k, call.op))
    step._plans = [p for p in step._plans if all(c is not call for c in p.calls)]
    raise CompileError(
        f"compile: op #{k} '{e[0].name}' gave output(s) {[(o.shape, o.dtype.name) for o in outs]} where "
        f"the plan has {[(s[0], s[1].name) for s in specs]}: its shape depends on the data (a boolean mask?), and "
        f"fn read the planned shape; the next call runs it eagerly"
    )


def _build(records, loss, eager_at):
    """(the plan of an eager call's recording, None) or (None, why a trace could never match it: it reads a graph
    made outside fn, its loss is not one of its ops' outputs, or a call runs eagerly every time: one that draws in
    its forward or has an attribute without a key; None for a call in ``eager_at``, which raised already)."""
    slot_of: dict[int, int] = {}
    calls: list[_Call] = []
    for op, tensors, attrs, result, _node, seq_lens, grad_enabled in records:
        keys: list = []
        for t in tensors:
            if t is not None and t.id not in slot_of and t._node is not None:
                return None, f"op '{op.name}' reads a graph fn did not record (from outside fn, or a backward in it)"
            keys.append(None if t is None else slot_of.get(t.id, (t.shape, t.dtype, t._requires_grad)))
        call = _Call()
        given, draws = as_given(op, attrs)
        attr_key = None if draws else key_or_none(given)  # an undeclared draw runs eagerly: in eager's order
        if attr_key is None or (len(calls), op) in eager_at:
            kind = "draws random numbers every call" if draws else "has an attribute without a key"
            return None, None if attr_key is not None else f"op '{op.name}' {kind}"
        call.key = (op, seq_lens, attr_key, tuple(keys), grad_enabled)
        call.op, call.fast, call.grad_enabled, call.single = op, None, grad_enabled, isinstance(result, Tensor)
        results = (result,) if call.single else tuple(result)
        call.out_specs = tuple((r.shape, r.dtype, r._requires_grad) for r in results)
        call.first = len(slot_of)
        slot_of.update((r.id, call.first + m) for m, r in enumerate(results))
        call.short = None
        if call.single and op.n_outputs == 1 and not op.returns_aux and not seq_lens and None not in keys:
            floats = all(t.dtype.kind == "f" for t in tensors)  # apply's short path facts
            check = None if op.check_passes_floats and floats else op.check
            call.short = (check, *op.forward_call, *call.out_specs[0][:2])
        calls.append(call)
    return (_Plan(calls, slot_of[loss.id]), None) if loss.id in slot_of else (None, "its ops do not compute the loss")
