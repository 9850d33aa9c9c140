"""A compiled training step: record one step of a loss function, then replay it as a flat, pre-planned program.

    step = tape.compile(loss_fn, model.parameters())   # loss_fn(*batch) -> a scalar loss Tensor, through ops
    for tokens, targets in batches:
        optimizer.zero_grad()
        loss, grads = step(tokens, targets)             # loss: a constant Tensor; grads: [p.grad for p in params]
        optimizer.step()                                # reads p.grad, as after loss.backward()

**Recording.** A call whose signature has no plan yet runs ``fn`` eagerly on a private ExecutionTape and then
``loss.backward()``: the call *is* an eager step (same values, same ``.grad``), and every check of the ops and
of the reverse pass runs as usual. The tape's applications become the plan. Every tensor gets a *slot*: the
step's array arguments, the tensors ``fn`` reads that it did not compute ("variables": parameters, constants;
read afresh from the Tensor object on every call) and every op output. An attribute that is the very array of
a slot (``key_padding_lengths=lengths`` of an argument, a getitem index tensor) is read from that slot too;
any other attribute is a constant. The reverse plan follows the recorded Nodes exactly as the reverse pass
walks them: the ops reached from the loss in decreasing application order, each op's rules (``op.vjps`` or
``op.joint_vjp``) with the same ``needs``, and where each gradient goes (an op output's slot, summed in the
same order, or a leaf's ``.grad``). A liveness pass lists after which step each slot's array is no longer
needed, so the replay holds no more memory than the eager pass does.

**Replay.** A later call with the same signature runs that program: each op's forward on arrays (no Tensor,
no Node, no argument binding, no ``op.check``), then its rules with the values the forward saved; no result
validation either. The arithmetic is the eager one, call for call and in the same order, so the results are
bit-identical to eager. Checks that depend on *values* (an index in range, a valid class) ran at record time
only; an error raised inside an op during a replay gets a note naming the op. Gradients accumulate into
``.grad`` exactly as ``backward()`` does (onto a gradient already there).

**The guard.** A plan is keyed by the call's signature: each array or Tensor argument's shape, dtype and
requires_grad, every other argument's type and value (Python scalars are captured as constants, so a new
value is a new plan), keyword names, and ``key(*args, **kwargs)`` when given. Each call also checks every
variable (shape, dtype, requires_grad): a parameter changed behind the plan's back drops the plan. A miss
re-records (at most ``max_plans`` plans, oldest dropped), or with ``recompile=False`` raises CompileError
saying what differs. The first recording of a signature is *verified* by the second call, which records
again and must record the same thing: same ops, attributes, constants (by value), data flow. What changes
between two calls without showing in the signature -- a Python number or numpy array computed inside ``fn``
(random noise, a step counter), Python branches on state -- is caught there and raises CompileError. An op
output whose shape differs from the recording's during a replay (a boolean-mask index: a shape that depends
on the data) raises CompileError too.

**Reading values while recording raises.** The step's array arguments reach ``fn`` as constant Tensors, and
every tensor an op computes while recording is marked: reading its values into Python or numpy (``.item()``,
``float()``, ``bool()``, ``.data``, ``.numpy()``, ``np.asarray``, a numpy function minitape has no op for)
raises CompileError, because the replay would freeze them. Compute with ops instead (``ops.reshape(targets,
(-1,))``, not ``np.asarray(targets).reshape(-1)``). Python control flow that depends on data or on outside
state (``model.training``) needs a ``key=`` giving its decision, or ``step.reset()`` after a change.

**Randomness.** Ops that draw in the forward take a ``np.random.Generator`` attribute (dropout's ``rng``,
attention's ``rng``). Nodes and tapes record the seed an application drew (``recording.ResolvedAttributes``);
the plan keeps the attributes as ``fn`` gave them (``.given``): the Generator object itself, so every replay
draws a fresh seed from it exactly as an eager call would (the same sequence, bit-identical masks), and the
rules use the seed saved by that replay's forward. An int seed is a constant, as in eager. ``nn.manual_seed``
installs a new Generator that the plan cannot see: call ``step.reset()`` after it.

**Falls back to eager** (no plan used or made) while a tape records (an outer ExecutionTape or GradientTape
sees the ops) and under ``detect_anomaly()``. Grad mode is ignored: a step always computes gradients.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from operator import itemgetter

import numpy as np

from .recording import group
from .state import STATE, enable_grad
from .tapes import ExecutionTape
from .tensors import Tensor, as_tensor

__all__ = ["compile", "CompiledStep", "CompileError"]


class CompileError(RuntimeError):
    """``fn`` cannot be compiled as written, or a call fits no plan and re-recording is off."""


def compile(
    fn: Callable,
    params: Iterable[Tensor] = (),
    *,
    key: Callable | None = None,
    recompile: bool = True,
    max_plans: int = 8,
    verify: bool = True,
) -> CompiledStep:
    """Compile ``fn(*args, **kwargs) -> scalar loss Tensor`` into a step returning ``(loss, grads)``; see the module
    docstring. ``params``: the tensors whose ``.grad`` is returned, in order (every leaf that requires grad gets its
    ``.grad`` as after ``backward()`` anyway). ``key``: called with the step's arguments, a hashable value naming
    the branch ``fn``'s Python control flow takes. ``verify=False`` trusts the first recording."""
    return CompiledStep(fn, params, key=key, recompile=recompile, max_plans=max_plans, verify=verify)


class CompiledStep:
    """The callable ``tape.compile`` returns. ``records`` and ``replays`` count the calls of each kind."""

    def __init__(self, fn, params=(), *, key=None, recompile=True, max_plans=8, verify=True):
        self.fn = fn
        self.params = list(params)
        for k, p in enumerate(self.params):
            if not isinstance(p, Tensor):
                raise TypeError(f"compile: params[{k}] must be a Tensor, got {type(p).__name__}")
        if max_plans < 1:
            raise ValueError(f"compile: max_plans must be >= 1, got {max_plans}")
        self.key, self.recompile, self.max_plans, self.verify = key, recompile, max_plans, verify
        self._plans: dict = {}  # signature -> _Plan (one not yet verified is replaced by the second recording's)
        self.records = self.replays = 0

    def reset(self) -> None:
        """Forget every plan: the next call records again (after a change the signature cannot see)."""
        self._plans.clear()

    def __repr__(self) -> str:
        plans = [p for p in self._plans.values() if p.verified]
        ops = "/".join(f"{len(p.forward)} ops, {len(p.backward)} rule calls" for p in plans)
        return (
            f"<compiled {getattr(self.fn, '__qualname__', self.fn)}: {len(plans)} plan(s)"
            f"{' (' + ops + ')' if ops else ''}, {self.records} recorded and {self.replays} replayed calls>"
        )

    def __call__(self, *args, **kwargs):
        values = args + tuple(kwargs.values()) if kwargs else args
        names = tuple(kwargs)
        if STATE.recording_tapes or STATE.anomaly:
            if getattr(_LOCAL, "depth", 0):
                raise CompileError(
                    "compile: a compiled step was called inside a function being compiled; its "
                    "backward and .grad writes are not ops, so the outer plan could not replay them"
                )
            return self._eager(values, names)
        signature = self._signature(values, names, args, kwargs)
        plan = self._plans.get(signature)
        if plan is not None and plan.verified:
            loss = plan.run(values)
            if loss is not None:
                self.replays += 1
                return Tensor._wrap(loss), [p.grad for p in self.params]
        if plan is not None and plan.stale():  # a variable changed behind the plan's back: record afresh
            del self._plans[signature]
            if not self.recompile:
                raise CompileError(f"compile: {plan.stale()}; the plan no longer fits (recompile=False)")
            plan = None
        if plan is None and self._plans and not self.recompile:
            raise CompileError(
                f"compile: this call fits no recorded plan (recompile=False): "
                f"{_difference(signature, list(self._plans))}"
            )
        return self._record(signature, values, names, plan)

    # -- calls that run fn ---------------------------------------------------------------------------------------
    def _signature(self, values, names, args, kwargs):
        spec: list[tuple] = []
        for v in values:
            if isinstance(v, np.ndarray):
                spec.append((v.shape, v.dtype, False))
            elif isinstance(v, Tensor):
                spec.append((v.shape, v.dtype, v._requires_grad))
            else:
                spec.append((type(v), v))
        signature = (tuple(spec), names, None if self.key is None else self.key(*args, **kwargs))
        try:
            hash(signature)
        except TypeError:
            raise TypeError(
                "compile: a step's arguments must be arrays, Tensors or hashable values (numbers, "
                "strings, tuples of them), and key= must return a hashable value"
            ) from None
        return signature

    def _eager(self, values, names):
        loss = self._call_fn([as_tensor(v) if isinstance(v, np.ndarray) else v for v in values], names)
        if loss._node is not None:
            loss.backward()
        return Tensor._wrap(loss._data), [p.grad for p in self.params]

    def _call_fn(self, values, names):
        n = len(values) - len(names)
        with enable_grad():
            loss = self.fn(*values[:n], **dict(zip(names, values[n:])))
        if not isinstance(loss, Tensor) or loss.numel() != 1 or loss.dtype.kind != "f":
            raise TypeError(
                f"compile: fn must return a single-element floating loss Tensor, got {_describe_value(loss)}"
            )
        return loss

    def _record(self, signature, values, names, pending):
        wrapped, inputs = [], []
        for k, v in enumerate(values):
            if isinstance(v, Tensor) and v._requires_grad:
                if v._node is not None:
                    raise CompileError(
                        f"compile: argument {k} was computed by ops outside fn (it has a graph); a "
                        f"compiled step cannot send gradients beyond fn: detach it or compute it in fn"
                    )
            elif isinstance(v, Tensor):
                v = _Traced._wrap(v._data)
            elif isinstance(v, np.ndarray):
                v = _Traced._wrap(np.array(v))  # a copy: the caller's array stays writable
            wrapped.append(v)
            if isinstance(v, Tensor):
                inputs.append((k, v))
        watermark = Tensor._wrap(np.empty(0)).id  # tensors fn creates have larger ids
        recorder = _Recorder()
        _LOCAL.depth = getattr(_LOCAL, "depth", 0) + 1
        recorder.start_recording()
        try:
            loss = self._call_fn(wrapped, names)
        finally:
            recorder.stop_recording()
            _LOCAL.depth -= 1
        plan = _build(recorder.applications, loss, inputs, watermark)
        del recorder
        if loss._node is not None:
            loss.backward()
        self.records += 1
        if self.verify and pending is not None:
            problem = _compare(pending.fingerprint, plan.fingerprint)
            if problem:
                del self._plans[signature]
                raise CompileError(
                    f"compile: fn recorded something else on its second call with the same signature: {problem}. "
                    f"A compiled step replays only the ops, so this cannot be compiled as written: pass what changes "
                    f"as an argument of the step (arrays are runtime inputs; numbers are part of the signature), "
                    f"compute it with ops, or give compile a key= naming the variant"
                )
        if pending is not None or not self.verify:
            plan.verified, plan.fingerprint = True, None
        self._store(signature, plan)
        return Tensor._wrap(loss._data), [p.grad for p in self.params]

    def _store(self, signature, entry):
        self._plans.pop(signature, None)
        self._plans[signature] = entry
        while len(self._plans) > self.max_plans:
            del self._plans[next(iter(self._plans))]


# -- recording -----------------------------------------------------------------------------------------------
_LOCAL = threading.local()  # .depth: recordings running on this thread
_METADATA = {
    np.shape,
    np.ndim,
    np.size,
    np.result_type,
    np.array_repr,
    np.array_str,
    np.array2string,
    np.may_share_memory,
    np.shares_memory,
}


def _refuse_read(what: str) -> None:
    if getattr(_LOCAL, "depth", 0):
        raise CompileError(
            f"compile: while recording, fn read the values of a tensor it received or computed ({what}); a compiled "
            f"step replays only the ops, so that value would be frozen into the plan. Compute with ops instead "
            f"(e.g. ops.reshape(t, (-1,)), not np.asarray(t).reshape(-1)); for Python control flow on values, "
            f"give compile a key= naming the branch, or do not compile this function"
        )


def _all_tensors(out) -> bool:
    return isinstance(out, Tensor) or (isinstance(out, tuple | list) and all(isinstance(o, Tensor) for o in out))


class _Traced(Tensor):
    """A step argument or an op output while a step is recorded: its values must not leave the ops."""

    __slots__ = ()

    def __array__(self, dtype=None, copy=None):
        _refuse_read("np.asarray / np.array")
        return super().__array__(dtype, copy)

    @property
    def data(self) -> np.ndarray:
        _refuse_read(".data")
        return self._data.view()

    @data.setter
    def data(self, value) -> None:
        Tensor.data.fset(self, value)  # type: ignore[attr-defined]

    def numpy(self) -> np.ndarray:
        _refuse_read(".numpy()")
        return super().numpy()

    def item(self):
        _refuse_read(".item()")
        return super().item()

    def __float__(self) -> float:
        _refuse_read("float()")
        return super().__float__()

    def __bool__(self) -> bool:
        _refuse_read("bool(), an if or a while on a tensor")
        return super().__bool__()

    def detach(self) -> Tensor:  # shares the array (so it reads the same slot), and stays marked
        t = super().detach()
        t.__class__ = _Traced
        return t

    def __copy__(self) -> Tensor:
        t = super().__copy__()
        t.__class__ = _Traced
        return t

    def __deepcopy__(self, memo):
        _refuse_read("copy.deepcopy")
        return super().__deepcopy__(memo)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = super().__array_ufunc__(ufunc, method, *inputs, **kwargs)
        if not _all_tensors(out):
            _refuse_read(f"numpy's {ufunc.__name__}{'.' + method if method != '__call__' else ''}, not an op here")
        return out

    def __array_function__(self, func, types, args, kwargs):
        out = super().__array_function__(func, types, args, kwargs)
        if func not in _METADATA and not _all_tensors(out):
            _refuse_read(f"numpy's {func.__name__}, not an op here")
        return out


class _Recorder(ExecutionTape):
    """Keeps each application with its tensors, and marks the outputs as ``_Traced``."""

    def __init__(self):
        super().__init__()
        self.applications: list[tuple] = []

    def _record(self, op, tensors, attrs, result, node, seq_lens=()) -> None:
        results = result if isinstance(result, tuple) else (result,)
        for r in results:
            r.__class__ = _Traced
        self.applications.append((op, list(tensors), attrs, result, node, seq_lens))


# -- the plan ------------------------------------------------------------------------------------------------
class _Ref:
    """A slot standing where the recorded call had that slot's array (a tensor input, an attribute)."""

    __slots__ = ("slot",)

    def __init__(self, slot: int):
        self.slot = slot

    def __eq__(self, other) -> bool:
        return type(other) is _Ref and other.slot == self.slot

    def __hash__(self) -> int:
        return hash(self.slot)


def _template(value, arrays: dict):
    """``value`` with every array that is a slot's very array replaced by a ``_Ref`` (inside tuples and lists too)."""
    if type(value) is np.ndarray:
        hit = arrays.get(id(value))
        return _Ref(hit[1]) if hit is not None and hit[0] is value else value
    if type(value) is tuple or type(value) is list:
        return type(value)(_template(v, arrays) for v in value)
    return value


def _refs(template) -> list[int]:
    if type(template) is _Ref:
        return [template.slot]
    if type(template) is tuple or type(template) is list:
        return [s for v in template for s in _refs(v)]
    return []


def _resolve(template, vals):
    if type(template) is _Ref:
        return vals[template.slot]
    if type(template) is tuple or type(template) is list:
        return type(template)(_resolve(v, vals) for v in template)
    return template


def _reader(slots) -> Callable:
    """``reader(vals)``: the tuple of those slots' values (-1: the slot that is always None, an absent input)."""
    if len(slots) == 1:
        slot = slots[0]
        return lambda vals: (vals[slot],)
    return itemgetter(*slots)


class _Apply:
    """One op application of the forward: ``forward(*args, **kwargs)`` with slots filled in."""

    __slots__ = (
        "op",
        "forward",
        "args",
        "kwargs",
        "fills",
        "read",
        "dynamic",
        "outs",
        "shapes",
        "single",
        "saves",
        "keep_saved",
        "index",
        "attrs",
        "dynamic_attrs",
        "reads",
        "free",
    )

    def __init__(self, op, index, values, attrs, outs, shapes, single):
        self.op, self.forward, self.index, self.outs = op, op.forward, index, tuple(outs)
        self.shapes = shapes[0] if single else shapes  # what the outputs must be at every replay
        self.single = single
        self.saves, self.keep_saved = op.saves, False
        n = op.n_positional
        if op.var_positional is not None:
            args = values[: op.var_positional] + list(values[op.var_positional])
        else:
            args = values[:n]
        self.kwargs = {op.param_names[i]: values[i] for i in range(n, len(values))}
        self.fills = [(i, a.slot) for i, a in enumerate(args) if type(a) is _Ref]
        self.read = _reader([a.slot for a in args]) if args and len(self.fills) == len(args) else None
        self.dynamic = [(i, a) for i, a in enumerate(args) if type(a) is not _Ref and _refs(a)] + [
            (k, v) for k, v in self.kwargs.items() if _refs(v)
        ]
        self.args = tuple(args)
        self.attrs = attrs  # for the rules: the recorded attributes, _Refs where they are slots' arrays
        self.dynamic_attrs = [(k, v) for k, v in attrs.items() if _refs(v)]
        self.reads = [s for v in values for s in _refs(v)]
        self.free: list[int] = []


class _Reverse:
    """The rule call of one op in the reverse plan, and where each gradient it returns goes."""

    __slots__ = ("apply", "op", "read", "seq_lens", "needs", "rules", "calls", "dests", "free")

    def __init__(self, apply, in_slots, seq_lens, needs, dests):
        op = apply.op
        self.apply, self.op, self.seq_lens, self.dests = apply, op, seq_lens, dests
        self.read = _reader([-1 if s is None else s for s in in_slots])
        self.needs = tuple(group(op, list(needs), seq_lens)) if seq_lens else tuple(needs)
        self.rules = (
            None
            if op.joint_vjp is not None
            else [
                rule if (any(need) if isinstance(need, list) else need) else None
                for rule, need in zip(op.vjps, self.needs)
            ]
        )
        self.calls = [(pos, rule) for pos, rule in enumerate(self.rules or ()) if rule is not None]
        self.free: list[int] = []


class _Plan:
    """A recorded step as two flat programs over slots, and what each call reads and writes."""

    def __init__(self, n_slots, inputs, variables, forward, backward, leaves, loss_slot, fingerprint):
        self.n_slots, self.inputs, self.variables = n_slots, inputs, variables
        self.forward, self.backward, self.leaves, self.loss_slot = forward, backward, leaves, loss_slot
        self.fingerprint = fingerprint  # until the plan is verified
        self.verified = False

    def stale(self) -> str:
        """What changed in a variable since the recording ('' if nothing)."""
        for _, t, shape, dtype, flag in self.variables:
            if t._data.shape != shape or t._data.dtype != dtype or t._requires_grad != flag:
                return (
                    f"tensor #{t.id}{' (' + t.name + ')' if t.name else ''} read by fn was recorded as "
                    f"{_spec(shape, dtype, flag)} and is now {_spec(t.shape, t.dtype, t._requires_grad)}"
                )
        return ""

    def run(self, values):
        """One step: the loss array (``.grad`` written), or None when a variable no longer fits the plan."""
        vals: list = [None] * (self.n_slots + 1)  # the last one stays None: an absent optional input reads it
        for s, t, shape, dtype, flag in self.variables:
            data = t._data
            if data.shape != shape or data.dtype != dtype or t._requires_grad is not flag:
                return None
            vals[s] = data
        for k, s in self.inputs:
            v = values[k]
            vals[s] = v._data if isinstance(v, Tensor) else np.array(v)  # a copy, as eager's as_tensor makes
        a = None
        try:
            saved: list = [None] * len(self.forward)
            for a in self.forward:
                if a.read is not None:
                    args = a.read(vals)
                else:
                    args = a.args
                    if a.fills:
                        args = list(args)
                        for i, s in a.fills:
                            args[i] = vals[s]
                kwargs = a.kwargs
                if a.dynamic:
                    args, kwargs = list(args), dict(kwargs)
                    for where, template in a.dynamic:
                        if type(where) is int:
                            args[where] = _resolve(template, vals)
                        else:
                            kwargs[where] = _resolve(template, vals)
                out = a.forward(*args, **kwargs) if kwargs else a.forward(*args)
                if a.saves:
                    out, aux = out
                    if a.keep_saved:
                        saved[a.index] = aux
                if a.single:
                    if type(out) is not np.ndarray:
                        out = np.asarray(out)
                    if out.shape != a.shapes:
                        _data_dependent(a, a.shapes, out.shape)
                    vals[a.outs[0]] = out
                else:
                    out = tuple(o if type(o) is np.ndarray else np.asarray(o) for o in out)
                    if tuple(o.shape for o in out) != a.shapes:
                        _data_dependent(a, a.shapes, tuple(o.shape for o in out))
                    for s, o in zip(a.outs, out):
                        vals[s] = o
                for s in a.free:
                    vals[s] = None

            leaves = [values[x] if type(x) is int else x for x in self.leaves]
            acc: list = [None if t._grad is None else t._grad._data for t in leaves]
            grads: list = [None] * self.n_slots
            if self.backward:
                loss = vals[self.loss_slot]
                grads[self.loss_slot] = np.ones(loss.shape, dtype=loss.dtype)
            for r in self.backward:
                a = r.apply
                if a.single:
                    s = a.outs[0]
                    g, ans = grads[s], vals[s]
                    grads[s] = None
                else:
                    g, ans = tuple(grads[s] for s in a.outs), tuple(vals[s] for s in a.outs)
                    for s in a.outs:
                        grads[s] = None
                inputs = r.read(vals)
                if r.seq_lens:
                    inputs = group(r.op, list(inputs), r.seq_lens)
                attrs = a.attrs
                if a.dynamic_attrs:
                    attrs = {**attrs, **{k: _resolve(v, vals) for k, v in a.dynamic_attrs}}
                aux = saved[a.index]
                if aux is not None:
                    attrs = {**attrs, **aux}
                    saved[a.index] = None
                if r.rules is None:
                    results = r.op.joint_vjp(g, ans, *inputs, needs=r.needs, **attrs)
                else:
                    results = [None] * len(r.rules)
                    for pos, rule in r.calls:
                        results[pos] = rule(g, ans, *inputs, **attrs) if attrs else rule(g, ans, *inputs)
                for pos, sub, dest in r.dests:
                    grad = results[pos] if sub is None else results[pos][sub]
                    if type(grad) is not np.ndarray:
                        grad = np.asarray(grad)
                    if dest >= 0:
                        old = grads[dest]
                        grads[dest] = grad if old is None else old + grad
                    else:
                        old = acc[~dest]
                        acc[~dest] = grad if old is None else old + grad
                for s in r.free:
                    vals[s] = None
        except Exception as e:  # name the op: the replay skipped the checks that would have named it
            if a is not None and hasattr(e, "add_note"):
                e.add_note(
                    f"(raised replaying op #{a.index} '{a.op.name}' of a compiled step; its checks ran only "
                    f"when the step was recorded)"
                )
            raise
        for t, g in zip(leaves, acc):
            t.grad = Tensor._wrap(g)
        return vals[self.loss_slot]


def _data_dependent(apply, recorded, got):
    raise CompileError(
        f"compile: op #{apply.index} '{apply.op.name}' gave output shape(s) {got} on replay but "
        f"{recorded} when recorded: its shape depends on the data (a boolean mask?), which a plan "
        f"cannot follow; do not compile this function"
    )


def _build(applications, loss, inputs, watermark) -> _Plan:
    """The plan of a recorded step (see the module docstring), with its fingerprint for verification."""
    slot_of: dict[int, int] = {}  # tensor id -> slot
    arrays: dict[int, tuple] = {}  # id(array) -> (array, slot): a tensor or attribute holding it reads the slot
    described: list = []  # per slot, how a second recording must see it
    variables: list = []

    def define(t, description=None) -> int:
        s = slot_of[t.id] = len(described)
        arrays[id(t._data)] = (t._data, s)
        described.append(description or ("slot", s))
        return s

    input_slots = [(k, define(t)) for k, t in inputs]
    forward, fingerprint = [], []
    for index, (op, tensors, attrs, result, node, seq_lens) in enumerate(applications):
        single = not isinstance(result, tuple)  # an op with several outputs may return one for a call
        results = (result,) if single else result
        flat = []
        for t in tensors:
            s = None if t is None else slot_of.get(t.id)
            if t is not None and s is None:
                hit = arrays.get(id(t._data))
                if hit is not None and hit[0] is t._data:  # the same array as a slot (detach(), a copy)
                    s = slot_of[t.id] = hit[1]
                elif t._node is not None:
                    raise CompileError(
                        f"compile: op '{op.name}' reads tensor #{t.id}, computed by ops outside fn with "
                        f"a graph; a compiled step cannot send gradients beyond fn: detach it, or "
                        f"compute it inside fn"
                    )
                else:  # a variable; made before fn ran (a parameter), it must be the same object every call
                    s = define(t, ("variable", t, t.id < watermark))
                    variables.append((s, t, t.shape, t.dtype, t._requires_grad))
            flat.append(s)
        values: list = [None] * len(op.param_names)
        refs = [None if s is None else _Ref(s) for s in flat]
        for i, v in zip(op.tensor_pos, group(op, refs, seq_lens) if seq_lens else refs):
            values[i] = v
        given = getattr(attrs, "given", attrs)  # as fn gave them: a Generator, not the seed the forward drew from it
        kept = {name: _template(value, arrays) for name, value in given.items()}
        for i in op.attr_pos:
            values[i] = kept[op.param_names[i]]
        apply = _Apply(op, index, values, kept, [define(r) for r in results], tuple(r.shape for r in results), single)
        forward.append(apply)
        fingerprint.append(
            (
                op,
                seq_lens,
                [None if s is None else described[s] for s in flat],
                kept,
                None if node is None else list(node.needs),
            )
        )

    loss_slot = slot_of.get(loss.id)
    if loss_slot is None or not any(loss_slot in a.outs for a in forward):
        raise CompileError(
            "compile: fn must return a loss computed by ops inside it (not an argument or a tensor made outside fn)"
        )
    backward, leaves = _reverse_plan(applications, forward, slot_of, inputs, loss, loss_slot)
    _plan_frees(forward, backward, len(described), loss_slot)
    return _Plan(len(described), input_slots, variables, forward, backward, leaves, loss_slot, fingerprint)


def _reverse_plan(applications, forward, slot_of, inputs, loss, loss_slot):
    """The rule calls the reverse pass makes from ``loss``, in its order, and where each gradient goes."""
    input_position = {t.id: k for k, t in inputs}
    leaves: list = []  # the leaf tensors (an int: the step argument at that position) whose .grad is written
    leaf_of: dict[int, int] = {}
    receives = {loss_slot} if loss._node is not None else set()
    backward = []
    for apply, (op, tensors, _, _, node, seq_lens) in zip(reversed(forward), reversed(applications)):
        nodes = (node.group or [node]) if node is not None else []
        if not any(n is not None and s in receives for s, n in zip(apply.outs, nodes)):
            continue
        positions = _flat_positions(op, seq_lens)
        dests = []
        for i, need in enumerate(node.needs):
            if not need:
                continue
            parent, leaf = node.parents[i], node.leaves[i]
            if parent is not None:
                dest = slot_of[parent.out_id]
                receives.add(dest)
            elif leaf is not None and leaf._requires_grad:  # (a tensor only watched by a GradientTape gets nothing)
                if id(leaf) not in leaf_of:
                    leaf_of[id(leaf)] = len(leaves)
                    leaves.append(input_position.get(leaf.id, leaf))
                dest = ~leaf_of[id(leaf)]
            else:
                continue
            dests.append((*positions[i], dest))
        in_slots = [None if t is None else slot_of[t.id] for t in tensors]
        apply.keep_saved = True
        backward.append(_Reverse(apply, in_slots, seq_lens, node.needs, dests))
    return backward, leaves


def _flat_positions(op, seq_lens) -> list[tuple]:
    """For each flat tensor input: (index among the rule's results, index inside a sequence's list or None)."""
    if not seq_lens:
        return [(i, None) for i in range(op.n_inputs)]
    lens = iter(seq_lens)
    return [
        (i, j) if is_seq else (i, None)
        for i, is_seq in enumerate(op.sequence)
        for j in range(next(lens) if is_seq else 1)
    ]


def _plan_frees(forward, backward, n_slots, loss_slot) -> None:
    """After which step each slot's array is read for the last time (the loss is kept): free it there."""
    last = [-1] * n_slots
    steps = [*forward, *backward]
    for position, a in enumerate(forward):
        for s in a.reads:
            last[s] = position
        for s in a.outs:
            last[s] = max(last[s], position)
    for position, r in enumerate(backward, len(forward)):
        for s in [*r.apply.reads, *r.apply.outs]:
            last[s] = position
    for s, position in enumerate(last):
        if s != loss_slot and position >= 0:
            steps[position].free.append(s)


# -- verification and messages -------------------------------------------------------------------------------
def _equal(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if type(a) is np.ndarray:
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if type(a) is tuple or type(a) is list:
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, Tensor):
        return a is b
    if isinstance(a, float) and a != a:
        return b != b
    try:
        return a is b or bool(a == b)
    except Exception:
        return False


def _compare(first, second) -> str:
    """'' when two recordings' fingerprints agree, else the first difference in words."""
    for index, (one, two) in enumerate(zip(first, second)):
        op = one[0]
        where = f"op #{index} '{op.name}'"
        if one[0] is not two[0]:
            return f"op #{index} was '{op.name}' on the first call and '{two[0].name}' on the second"
        if one[1] != two[1] or len(one[2]) != len(two[2]):
            return f"{where} got sequences of other lengths"
        for k, (x, y) in enumerate(zip(one[2], two[2])):
            if not _same_input(x, y):
                what = (
                    "a constant made inside fn (from a numpy array or a Python number)"
                    if x is not None and x[0] == "variable" and not x[2]
                    else "another tensor"
                )
                return f"{where} read {what} as its tensor input {k}, and it changed"
        for name in one[3]:
            if not _equal(one[3][name], two[3].get(name)):
                return f"{where}: its attribute '{name}' was {one[3][name]!r} and is now {two[3].get(name)!r}"
        if not _equal(one[4], two[4]):
            return f"{where}: which of its inputs need a gradient changed"
    if len(first) != len(second):
        return f"fn applied {len(first)} ops on the first call and {len(second)} on the second"
    return ""


def _same_input(x, y) -> bool:
    """Whether two recordings read the same thing: the same slot, the same variable, or two constants made inside
    fn (not pinned) with equal values."""
    if x is None or y is None or x[0] != "variable" or y[0] != "variable":
        return x == y
    one, two = x[1], y[1]
    return one is two or (
        not x[2] and not y[2] and one._requires_grad == two._requires_grad and _equal(one._data, two._data)
    )


def _spec(shape, dtype, requires_grad) -> str:
    return f"{np.dtype(dtype).name}{list(shape)}{' requiring grad' if requires_grad else ''}"


def _describe_value(v) -> str:
    if isinstance(v, Tensor | np.ndarray):
        return f"{type(v).__name__} {_spec(v.shape, v.dtype, isinstance(v, Tensor) and v.requires_grad)}"
    return f"{type(v).__name__} {v!r}"


def _difference(signature, known) -> str:
    """How ``signature`` differs from the closest recorded one."""
    spec, names, key = signature
    best = min(
        known,
        key=lambda other: (
            sum(not _equal(a, b) for a, b in zip(spec, other[0]))
            + 99 * (len(spec) != len(other[0]) or names != other[1])
        ),
    )
    if len(spec) != len(best[0]) or names != best[1]:
        return (
            f"recorded with {len(best[0])} arguments (keywords {list(best[1])}), called with {len(spec)} "
            f"(keywords {list(names)})"
        )
    for k, (got, had) in enumerate(zip(spec, best[0])):
        if not _equal(got, had):
            show = lambda s: _spec(*s) if len(s) == 3 else f"{s[0].__name__} {s[1]!r}"
            return f"argument {k} was {show(had)} when recorded, now {show(got)}"
    return f"key() returned {key!r}, recorded {best[2]!r}"
