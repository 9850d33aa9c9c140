"""A compiled training step: ``fn`` runs on every call; its ops are traced cheaply and, when the trace matches a
plan, run as a flat program through the engine's own lowered op calls. The result is eager's, bit for bit, or an
error.

    step = tape.compile(loss_fn, model.parameters())   # loss_fn(*batch) -> a scalar loss Tensor, through ops
    for tokens, targets in batches:
        optimizer.zero_grad()
        loss, grads = step(tokens, targets)             # loss: a constant Tensor; grads: [p.grad for p in params]
        optimizer.step()                                # reads p.grad, as after loss.backward()

**Every call runs fn.** Its Python -- ``zero_grad``, counters, reads of ``model.training``, ``Dropout.p``, a config
number, submodule replacement -- happens as in eager, by construction. While ``fn`` runs, ``apply`` hands each op
call to the step's trace: the call is bound and coerced as eager does (closed-over arrays and Python numbers become
constant tensors, copied now; an attribute array is copied now), and matched against entry k of the cached plans:
the same op object, attributes equal by value (floats by their bits, arrays by dtype, shape and bytes), each tensor
input the same slot (an earlier op's output, or an outside tensor of the same shape, dtype and requires_grad, whose
array is captured at this moment), the same grad mode. A match returns placeholder outputs: Tensors with the
recorded shape and dtype and no data yet.

**A plan runs** when ``fn`` returns, if the whole trace matched one plan and the loss is its loss: each op's
forward through ``recording.forward_arrays`` (the op's check and forward, as eager: index ranges and class ids are
checked on this call's data), then the rules in the reverse pass's order through ``autodiff.input_gradients``
(validated), the gradients summed in the reverse pass's order into the leaves' ``.grad``. The placeholders then
hold their values (as constants: no graph). An output whose shape or dtype differs from the plan's (a boolean
mask) raises CompileError -- fn's Python may have used the planned shape -- and that op is traced eagerly from
then on.

**Anything else runs eagerly.** On a mismatch, or when ``fn`` reads a placeholder's values (``.item()``,
``float()``, ``bool()``, ``.data``, ``.numpy()``, ``np.asarray``, ``.grad_fn``, a numpy function without an op),
the trace is *materialized*: every op so far runs through eager ``recording.run_op`` in order, on the arrays
captured when it was called (the values and Nodes eager makes), and ``fn`` continues eagerly; the call ends with
``loss.backward()`` and its recording becomes a new plan (at most ``max_plans``, newest first). Ops whose forward
draws randomness (dropout with a Generator: ``recording.ResolvedAttributes``) and tensors with a graph made
outside ``fn`` are always materialized; so is a call whose inputs have tensor hooks (``register_hook``,
``retain_grad``: a placeholder materializes when one is registered on it), so that the hooks run as in eager.
Plain eager, no trace, while a tape records or under ``detect_anomaly()``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .arguments import coerce as _coerce
from .autodiff import HOOKS, add_gradients, input_gradients
from .recording import Node, ResolvedAttributes, bind_call, forward_arrays, run_op, several_outputs
from .state import STATE, enable_grad
from .tensors import Tensor, _ids, _readonly

__all__ = ["compile", "CompiledStep", "CompileError"]


class CompileError(RuntimeError):
    """A compiled call cannot give eager's result (a data-dependent shape), or fits no plan with recompile=False."""


def compile(fn: Callable, params: Iterable[Tensor] = (), *, recompile: bool = True, max_plans: int = 8) -> CompiledStep:
    """Compile ``fn(*args, **kwargs) -> scalar loss Tensor`` into a step returning ``(loss, grads)``; see the module
    docstring. ``params``: the tensors whose ``.grad`` is returned, in order (every leaf that requires grad gets its
    ``.grad`` as after ``backward()`` anyway). ``recompile=False``: a call that fits no plan raises CompileError."""
    return CompiledStep(fn, params, recompile=recompile, max_plans=max_plans)


class CompiledStep:
    """The callable ``tape.compile`` returns. ``records`` counts eager calls (each records a plan), ``replays`` the
    calls a plan ran."""

    def __init__(self, fn, params=(), *, recompile=True, max_plans=8):
        self.fn = fn
        self.params = list(params)
        for k, p in enumerate(self.params):
            if not isinstance(p, Tensor):
                raise TypeError(f"compile: params[{k}] must be a Tensor, got {type(p).__name__}")
        if max_plans < 1:
            raise ValueError(f"compile: max_plans must be >= 1, got {max_plans}")
        self.recompile, self.max_plans = recompile, max_plans
        self._plans: list[_Plan] = []
        self.records = self.replays = 0

    def reset(self) -> None:
        """Forget every plan."""
        self._plans.clear()

    def __repr__(self) -> str:
        ops = "/".join(f"{len(p.calls)} ops, {len(p.reverse)} rule calls" for p in self._plans)
        return (
            f"<compiled {getattr(self.fn, '__qualname__', self.fn)}: {len(self._plans)} plan(s)"
            f"{' (' + ops + ')' if ops else ''}, {self.records} recorded and {self.replays} replayed calls>"
        )

    def __call__(self, *args, **kwargs):
        if STATE.recording_tapes or STATE.anomaly or STATE.tracer is not None:
            return self._eager(args, kwargs)
        trace = _Trace(self)
        STATE.tracer = trace
        try:
            loss = self._call_fn(trace, args, kwargs)
            if not trace.eager:
                plan = trace.finished(loss)
                if plan is not None:
                    value = plan.run(trace)
                    self.replays += 1
                    return Tensor._wrap(value), [p.grad for p in self.params]
                trace.materialize()
            if loss._node is not None:
                loss.backward()
            self.records += 1
            self._remember(_build(trace.recorder.records, loss))
            return Tensor._wrap(loss._data), [p.grad for p in self.params]
        finally:
            trace.close()

    def _eager(self, args, kwargs):
        with enable_grad():
            loss = _checked_loss(self.fn(*args, **kwargs))
        if loss._node is not None:
            loss.backward()
        return Tensor._wrap(loss._data), [p.grad for p in self.params]

    def _call_fn(self, trace, args, kwargs):
        try:
            with enable_grad():
                return _checked_loss(self.fn(*args, **kwargs))
        except Exception:
            if not trace.eager:  # an op traced before the error may fail its check: eager raised that first
                trace.materialize()
            raise

    def _remember(self, plan) -> None:
        if plan is not None:
            self._plans.insert(0, plan)
            del self._plans[self.max_plans :]


def _checked_loss(loss):
    if not isinstance(loss, Tensor) or loss.numel() != 1 or loss.dtype.kind != "f":
        got = f"Tensor {loss.dtype}{list(loss.shape)}" if isinstance(loss, Tensor) else type(loss).__name__
        raise TypeError(f"compile: fn must return a single-element floating loss Tensor, got {got}")
    return loss


# -- placeholders ---------------------------------------------------------------------------------------------------
_DATA, _NODE = Tensor.__dict__["_data"], Tensor.__dict__["_node"]  # the slots themselves


class _Spec:
    """What a placeholder holds in its ``_data`` slot until it has a value."""

    __slots__ = ("shape", "dtype", "trace", "slot")

    def __init__(self, shape, dtype, trace, slot):
        self.shape, self.dtype, self.trace, self.slot = shape, dtype, trace, slot


def _materialize(t) -> None:
    if type(t) is _Pending:
        trace = _DATA.__get__(t, Tensor).trace
        if trace is None:
            raise CompileError("compile: this tensor was computed in a compiled step that raised; it has no value")
        trace.materialize()


class _Pending(Tensor):
    """An op output of a trace: shape and dtype known, values not yet. Reading its values (or graph) materializes
    the trace; it then becomes a plain Tensor (``__class__`` reassigned)."""

    __slots__ = ()

    def _get_data(self):
        _materialize(self)
        return _DATA.__get__(self, Tensor)

    def _set_data(self, value):
        _materialize(self)
        _DATA.__set__(self, value)

    def _get_node(self):
        _materialize(self)
        return _NODE.__get__(self, Tensor)

    def _set_node(self, value):
        _materialize(self)
        _NODE.__set__(self, value)

    _data = property(_get_data, _set_data)
    _node = property(_get_node, _set_node)
    shape = property(lambda self: _DATA.__get__(self, Tensor).shape)
    dtype = property(lambda self: _DATA.__get__(self, Tensor).dtype)
    ndim = property(lambda self: len(_DATA.__get__(self, Tensor).shape))

    def numel(self) -> int:  # (``size()``, ``dim()`` read ``shape``/``ndim`` above; anything else materializes)
        return math.prod(_DATA.__get__(self, Tensor).shape)


def _placeholder(trace, slot, shape, dtype, requires_grad) -> _Pending:
    p = _Pending.__new__(_Pending)
    _DATA.__set__(p, _Spec(shape, dtype, trace, slot))
    _NODE.__set__(p, None)
    p._requires_grad, p._grad, p.id, p._version, p.name = requires_grad, None, next(_ids), 0, None
    return p


def _become(p, array, node, requires_grad) -> None:
    """A placeholder turned into the Tensor eager would have made (or a constant holding a plan's value)."""
    p.__class__ = Tensor
    p._data, p._node, p._requires_grad = array, node, requires_grad


_STANDINS: dict = {}


def _coerce_traced(op, inputs, seq_lens):
    """``recording._coerce`` on a traced call: placeholders are shown to it as empty tensors of their dtype."""
    shown = []
    for x in inputs:
        if type(x) is _Pending:
            dtype = _DATA.__get__(x, Tensor).dtype
            x = _STANDINS.get(dtype)
            if x is None:
                x = _STANDINS[dtype] = Tensor._wrap(np.empty(0, dtype))
        shown.append(x)
    out = _coerce(op, shown, seq_lens)
    return [x if type(x) is _Pending else o for x, o in zip(inputs, out)]


# -- the trace --------------------------------------------------------------------------------------------------
class _Entry:
    """One traced op call: what was bound, the captured input arrays (or slots), the placeholder outputs."""

    op: Any
    tensors: list
    attrs: dict
    values: Any
    seq_lens: tuple
    inputs: list
    captured: list
    grad_enabled: bool
    outs: list
    result: Any


class _Trace:
    """The op calls of one run of ``fn`` while they match a plan; then (materialized) an eager recording."""

    def __init__(self, step):
        self.step = step
        self.candidates = list(step._plans)
        self.entries: list[_Entry] = []
        self.n_slots = 0
        self.eager = False
        self.recorder = _Recorder()
        self.swapped: list = []

    def apply(self, op, args, kwargs):
        tensors, attrs, values, seq_lens = bind_call(op, args, kwargs, _coerce_traced)
        if self.eager:  # binding read a placeholder's values (a tensor attribute): eager from here
            return run_op(op, tensors, attrs, values, seq_lens)
        keys: list = []
        inputs: list = []
        for t in tensors:
            if t is None:
                keys.append(None)
                inputs.append(None)
            elif type(t) is _Pending and _DATA.__get__(t, Tensor).trace is self:
                keys.append(_DATA.__get__(t, Tensor).slot)
                inputs.append(keys[-1])
            elif t._node is not None:  # a graph made outside fn: gradients must flow beyond it, as eager sends them
                return self._eager_from_here(op, args, kwargs, None)
            else:
                array = t._data
                keys.append((array.shape, array.dtype, t._requires_grad))
                inputs.append(array)
        attr_key = _attr_key(attrs)
        key = (op, seq_lens, attr_key, tuple(keys), STATE.grad_enabled)
        k = len(self.entries)
        matching = [p for p in self.candidates if k < len(p.calls) and p.calls[k].key == key]
        if attr_key is None or not matching or STATE.recording_tapes or STATE.anomaly or _draws(attrs):
            return self._eager_from_here(op, args, kwargs, key)
        self.candidates = matching
        call = matching[0].calls[k]
        e = _Entry()
        e.op, e.tensors, e.attrs, e.values, e.seq_lens, e.inputs = op, tensors, attrs, values, seq_lens, inputs
        e.captured = [(t, t._data, t._version) for t, x in zip(tensors, inputs) if x is not None and type(x) is not int]
        e.grad_enabled = STATE.grad_enabled
        e.outs = [_placeholder(self, self.n_slots + m, *spec) for m, spec in enumerate(call.out_specs)]
        self.n_slots += len(e.outs)
        if call.single:
            e.result = e.outs[0]
        else:
            e.result = tuple(e.outs) if op.result_type is None else op.result_type(*e.outs)
        self.entries.append(e)
        return e.result

    def _eager_from_here(self, op, args, kwargs, key):
        step = self.step
        if not step.recompile and step._plans:
            k = len(self.entries)
            plan = self.candidates[0] if self.candidates else step._plans[0]
            had = plan.calls[k].key if k < len(plan.calls) else None
            raise CompileError(
                f"compile: op #{k} '{op.name}' fits no recorded plan (recompile=False): {_difference(key, had)}"
            )
        self.materialize()
        return op(*args, **kwargs)

    def materialize(self) -> None:
        """Run every traced op through eager ``run_op``, in order, on its captured arrays; then record eagerly."""
        if self.eager:
            return
        self.eager = True
        state = STATE
        state.tracer = None
        try:
            for e in self.entries:
                self._run_eagerly(e)
        finally:
            state.recording_tapes.append(self.recorder)  # the rest of fn records as it runs

    def _run_eagerly(self, e) -> None:
        restore = [(t, t._data, t._version) for t, a, v in e.captured if t._data is not a or t._version != v]
        for t, a, v in e.captured:  # as eager saw them when the op was called (a later ``p.data = ...`` aside)
            t._data, t._version = a, v
        previous = STATE.grad_enabled
        STATE.grad_enabled = e.grad_enabled
        STATE.recording_tapes.append(self.recorder)  # records what eager records (resolved attributes included)
        try:
            result = run_op(e.op, e.tensors, e.attrs, e.values, e.seq_lens)
        finally:
            STATE.recording_tapes.remove(self.recorder)
            STATE.grad_enabled = previous
            for t, a, v in restore:
                t._data, t._version = a, v
        real = (result,) if isinstance(result, Tensor) else tuple(result)
        for p, r in zip(e.outs, real):
            _become(p, r._data, r._node, r._requires_grad)
            if r._node is not None:
                r._node.out_id = p.id
        self.recorder.records[-1][3] = e.result  # the placeholders are the tensors fn holds

    def finished(self, loss):
        """The plan this complete trace matches (with ``loss`` its loss and no captured input changed since), or
        None."""
        if type(loss) is not _Pending or _DATA.__get__(loss, Tensor).trace is not self:
            return None
        slot = _DATA.__get__(loss, Tensor).slot
        for e in self.entries:
            for t, a, v in e.captured:
                if t._data is not a or t._version != v or (HOOKS and t.id in HOOKS):  # hooks run in eager's walk
                    return None
        for plan in self.candidates:
            if len(plan.calls) == len(self.entries) and plan.loss_slot == slot:
                return plan
        return None

    def close(self) -> None:
        STATE.tracer = None
        tapes = STATE.recording_tapes
        if self.recorder in tapes:
            tapes.remove(self.recorder)
        for e in self.entries:
            for p in e.outs:
                if type(p) is _Pending:
                    _DATA.__get__(p, Tensor).trace = None


class _Recorder:
    """Collects an eager call's op applications (as a recording tape would) to make its plan."""

    def __init__(self):
        self.records: list = []

    def _record(self, op, tensors, attrs, result, node, seq_lens):
        self.records.append([op, tensors, attrs, result, node, seq_lens, STATE.grad_enabled])


def _attr_key(attrs):
    """Attributes as a comparable value (floats by their bits, arrays by dtype, shape and bytes, a Generator by its
    type: the plan calls the forward with this call's own); None when one cannot be compared safely."""
    try:
        return tuple((name, _value_key(v)) for name, v in attrs.items())
    except TypeError:
        return None


def _value_key(v):
    kind = type(v)
    if kind is float:
        return (float, v.hex())
    if v is None or kind in (int, bool, str, np.dtype) or isinstance(v, type):
        return (kind, v)
    if kind is np.ndarray:  # an index array's values do not shape the output (the plan checks that it does not)
        return (np.ndarray, v.dtype.str, v.shape, None if v.dtype.kind in "iu" else v.tobytes())
    if kind is tuple or kind is list or kind is slice:
        items = (v.start, v.stop, v.step) if kind is slice else v
        return (kind, tuple(_value_key(x) for x in items))
    if isinstance(v, np.generic):
        return (kind, v.tobytes())
    if v is Ellipsis:
        return (kind,)
    raise TypeError(kind)


def _draws(attrs) -> bool:
    for v in attrs.values():
        if isinstance(v, _RANDOM):
            return True
    return False


def _key_or_none(v):
    try:
        return _value_key(v)
    except TypeError:
        return None


def _difference(key, had) -> str:
    if had is None:
        return "the plan has no op there"
    if key is None:
        return "it reads a tensor with a graph made outside fn"
    names = ("the op", "its sequence lengths", "its attributes", "its tensor inputs", "grad mode")
    for name, a, b in zip(names, key, had):
        if a != b:
            return f"{name} differ: {a!r} now, {b!r} in the plan"
    return "it draws randomness in its forward"


# -- plans ------------------------------------------------------------------------------------------------------
class _Call:
    """One op call of a plan: its key, output specs, first output slot, a Node naming it in messages."""

    key: Any
    out_specs: tuple
    single: bool
    first: int
    site: Node
    resolved: dict


_RANDOM = (np.random.Generator, np.random.RandomState)  # an attribute drawn from: such a call always runs eagerly


class _Plan:
    """A recorded call: each op call's key and output specs, and the reverse pass's rule calls in order."""

    def __init__(self, calls, reverse, loss_slot, loss_needs):
        self.calls, self.reverse, self.loss_slot, self.loss_needs = calls, reverse, loss_slot, loss_needs

    def run(self, trace):
        vals: list = []
        ran = []
        for k, (call, e) in enumerate(zip(self.calls, trace.entries)):
            arrays = [vals[x] if type(x) is int else x for x in e.inputs]
            out = forward_arrays(e.op, arrays, e.attrs, e.values, e.seq_lens)
            saved = None
            if e.op.returns_aux:
                out, saved = out
                if any(
                    _key_or_none(saved[n]) != _key_or_none(call.resolved.get(n, e.attrs[n]))
                    for n in e.attrs
                    if n in saved
                ):
                    call.key = None  # traced eagerly from now on
                    raise CompileError(
                        f"compile: op #{k} '{e.op.name}' resolved its attributes to other values than when recorded "
                        f"(it drew randomness, after fn's Python had run on); the next call runs it eagerly"
                    )
            several = several_outputs(e.op, out)
            outs = tuple(np.asarray(o) for o in out) if several else (np.asarray(out),)
            if several == call.single or [(o.shape, o.dtype) for o in outs] != [s[:2] for s in call.out_specs]:
                call.key = None  # traced eagerly from now on
                raise CompileError(
                    f"compile: op #{k} '{e.op.name}' gave output(s) {[(o.shape, o.dtype.name) for o in outs]} where "
                    f"the plan has {[(s[0], s[1].name) for s in call.out_specs]}: its shape depends on the data (a "
                    f"boolean mask?), and fn may have used the planned shape; the next call runs it eagerly"
                )
            vals.extend(outs)
            ran.append((arrays, outs if several else outs[0], saved))
        self._backward(trace, vals, ran)
        for e in trace.entries:
            for p in e.outs:
                _become(p, _readonly(vals[_DATA.__get__(p, Tensor).slot]), None, False)
        return vals[self.loss_slot]

    def _backward(self, trace, vals, ran) -> None:
        """The reverse pass's rule calls, sums and ``.grad`` deliveries, in its order."""
        grads: list = [None] * len(vals)
        if self.loss_needs:
            loss = vals[self.loss_slot]
            grads[self.loss_slot] = np.ones(loss.shape, dtype=loss.dtype)
        delivered: dict = {}
        for index, needs, dests in self.reverse:
            call, e = self.calls[index], trace.entries[index]
            slots = range(call.first, call.first + len(call.out_specs))
            g = grads[call.first] if call.single else tuple(grads[s] for s in slots)
            for s in slots:
                grads[s] = None
            if g is None or (not call.single and all(x is None for x in g)):
                continue
            arrays, ans, saved = ran[index]
            attrs = e.attrs if saved is None else {**e.attrs, **saved}
            results = input_gradients(call.site, g, ans, arrays, attrs, needs)
            for i, dest in dests:
                grad = results[i]
                if dest >= 0:
                    grads[dest] = grad if grads[dest] is None else add_gradients(grads[dest], grad)
                else:
                    leaf = e.tensors[i]
                    old = delivered.get(id(leaf), (leaf, None if leaf.grad is None else leaf.grad._data))[1]
                    delivered[id(leaf)] = (leaf, grad if old is None else add_gradients(old, grad))
        for leaf, grad in delivered.values():
            leaf.grad = Tensor._wrap(grad)


def _build(records, loss):
    """The plan of an eager call's recording, or None when a trace could never match it safely."""
    slot_of: dict[int, int] = {}
    calls = []
    for op, tensors, attrs, result, _node, seq_lens, grad_enabled in records:
        keys: list = []
        for t in tensors:
            if t is None:
                keys.append(None)
            elif t.id in slot_of:
                keys.append(slot_of[t.id])
            elif t._node is not None:
                return None
            else:
                keys.append((t.shape, t.dtype, t._requires_grad))
        call = _Call()
        given = attrs.given if isinstance(attrs, ResolvedAttributes) else attrs
        call.resolved = {k: v for k, v in attrs.items() if k in given and _key_or_none(v) != _key_or_none(given[k])}
        attr_key = None if any(isinstance(v, _RANDOM) for v in given.values()) else _attr_key(given)
        call.key = None if attr_key is None else (op, seq_lens, attr_key, tuple(keys), grad_enabled)
        call.single = isinstance(result, Tensor)
        results = (result,) if call.single else tuple(result)
        call.out_specs = tuple((r.shape, r.dtype, r._requires_grad) for r in results)
        call.first = len(slot_of)
        for r in results:
            slot_of[r.id] = len(slot_of)
        call.site = site = Node()
        site.op, site.seq_lens = op, seq_lens
        calls.append(call)
    if loss.id not in slot_of:
        return None
    reverse = _reverse(records, calls, slot_of, slot_of[loss.id], loss._node is not None)
    return None if reverse is None else _Plan(calls, reverse, slot_of[loss.id], loss._node is not None)


def _reverse(records, calls, slot_of, loss_slot, loss_needs):
    """(call index, needs, [(input, destination slot or -1 for the input's own .grad)]) per rule call, in the order
    the reverse pass makes them: decreasing application order, from the calls whose outputs receive a gradient."""
    receives = {loss_slot} if loss_needs else set()
    reverse = []
    for index in range(len(calls) - 1, -1, -1):
        call, result = calls[index], records[index][3]
        results = (result,) if call.single else tuple(result)
        nodes = [r._node for r in results]
        if not any(n is not None and call.first + m in receives for m, n in enumerate(nodes)):
            continue
        node = next(n for n in nodes if n is not None)
        dests = []
        for i, need in enumerate(node._needs):
            parent, leaf = node.parents[i], node.leaves[i]
            if not need:
                continue
            if parent is not None:
                if parent.out_id not in slot_of:
                    return None
                dests.append((i, slot_of[parent.out_id]))
                receives.add(slot_of[parent.out_id])
            elif leaf is not None and leaf._requires_grad:
                dests.append((i, -1))
        reverse.append((index, node._needs, dests))
    return reverse
