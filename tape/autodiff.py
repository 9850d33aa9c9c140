"""The reverse pass: one iterative walk shared by ``Tensor.backward`` and ``GradientTape.compute_gradients``.

Nodes are visited in decreasing application index (a reverse topological order): the gradient arriving at a node
is complete when it is visited. Every rule's result is validated (``GradientError`` naming the op and the input); a
stub raises ``BackwardNotImplementedError``. ``create_graph=True`` runs the same rules on Tensors, recorded. How
the walk, hooks and the second order fit together: docs/engine.md.
"""

from __future__ import annotations

import operator

import numpy as np

from .anomaly import check_backward_result
from .arguments import flat_gradients, flat_states, input_name, regroup
from .errors import BackwardNotImplementedError, GradientError, GraphFreedError, InPlaceModificationError
from .hooks import HOOKS, hook_result
from .recording import _ZERO_VERSIONS_1, _ZERO_VERSIONS_2, next_node_index
from .registry import Grad, Op
from .state import NUMPY_QUIET, STATE, enable_grad, numpy_errors_reset, numpy_errors_set
from .tensors import Tensor, as_tensor

__all__ = ["backward", "reverse_pass", "seed_gradients"]


def backward(roots, grads=None, retain_graph: bool | None = None, create_graph: bool = False) -> None:
    """Accumulate the gradients of ``roots`` into ``.grad`` of every leaf that requires grad."""
    for root in roots:
        if root._node is None and not root._requires_grad:
            raise RuntimeError(
                "backward: this tensor does not require grad and was not computed by a recorded "
                "op, so there is nothing to differentiate (set requires_grad=True on the inputs, "
                "and do not compute it under no_grad)"
            )
    seeds = seed_gradients(roots, grads, "backward", create_graph)
    reverse_pass(
        roots, seeds, retain_graph=create_graph if retain_graph is None else retain_graph, create_graph=create_graph
    )


def seed_gradients(roots, grads, who: str, create_graph: bool = False) -> list:
    """The gradient each root starts with: 1 for a single-element root, else the one the caller gave (a copy:
    the caller's array is neither frozen nor shared). Tensors with ``create_graph``, else arrays."""
    seeds: list = []
    for k, root in enumerate(roots):
        g = None if grads is None else grads[k]
        if g is None:
            if root.numel() != 1:
                raise RuntimeError(
                    f"{who}: output {k} has shape {root.shape}; only a single-element output gets "
                    f"an implicit gradient of 1, pass its gradient explicitly for the others"
                )
            array = np.ones(root.shape, dtype=root.dtype)
        elif create_graph and isinstance(g, Tensor):
            if g.dtype != root.dtype or g.shape != root.shape:
                raise ValueError(
                    f"{who}: gradient {k} has shape {g.shape} dtype {g.dtype} but its output has "
                    f"shape {root.shape} dtype {root.dtype}"
                )
            seeds.append(g)  # may itself require grad: the result is then differentiable in it too
            continue
        else:
            array = np.asarray(g._data if isinstance(g, Tensor) else g)
            if array.dtype.kind not in "fiub":
                raise TypeError(f"{who}: gradient {k} must hold real numbers, got dtype {array.dtype}")
            if array.dtype.kind == "f" and array.dtype != root.dtype:
                raise TypeError(f"{who}: gradient {k} has dtype {array.dtype} but its output is {root.dtype}")
            if array.shape != root.shape:
                raise ValueError(f"{who}: gradient {k} has shape {array.shape} but its output has shape {root.shape}")
            array = np.array(array, dtype=root.dtype, copy=True)  # never alias the caller's array
        seeds.append(Tensor._wrap(array) if create_graph else array)
    return seeds


_by_index = operator.attrgetter("index")


def add_gradients(a, b):
    """``a + b`` for two gradients: an array stays an array (two 0-d arrays sum to a numpy scalar, which a rule's
    ``isinstance(g, np.ndarray)`` would not take for one); Tensors (create_graph) add as ops."""
    total = a + b
    return np.asarray(total) if isinstance(total, np.generic) else total


def _reachable(start_nodes, allowed) -> list:
    seen = set(start_nodes)
    stack = list(start_nodes)
    pop, push, add = stack.pop, stack.append, seen.add
    while stack:
        for parent in pop().parents:
            if parent is not None and parent not in seen and (allowed is None or parent in allowed):
                add(parent)
                push(parent)
    return sorted(seen, key=_by_index, reverse=True)


def _inputs_leading_to(nodes_descending, source_ids, allowed) -> dict:
    """For each node, which inputs are (or depend on) one of the sources -- the only ones worth a rule."""
    leads_node = set()
    leading = {}
    for node in reversed(nodes_descending):
        flags = []
        for parent, leaf in zip(node.parents, node.leaves):
            if parent is not None:
                flag = parent.out_id in source_ids or ((allowed is None or parent in allowed) and parent in leads_node)
            else:
                flag = leaf is not None and leaf.id in source_ids
            flags.append(flag)
        leading[node] = tuple(need and flag for need, flag in zip(node._needs, flags))
        if node.out_id in source_ids or any(flags):
            leads_node.add(node)
    return leading


def reverse_pass(roots, seeds, *, retain_graph, sources=None, allowed=None, create_graph=False, hooks=True, nodes=None):
    """Propagate ``seeds`` from ``roots`` back through the recorded nodes.

    With ``sources=None`` the gradients accumulate into ``.grad`` of the leaves that require grad. With a
    list of source tensors only the paths leading to them are computed and ``{tensor id: array}`` is
    returned. ``allowed`` restricts the walk to a tape's own nodes (others count as constants). ``hooks=False``
    (an inner pass of the engine's own, through a composite) runs no tensor hooks. ``nodes``: those to walk, by
    decreasing index, from a caller that made every node the roots reach (a compiled plan's own): not searched for.
    """
    walk = _Pass(sources, allowed, retain_graph, create_graph, hooks and bool(HOOKS))
    grads = walk.grads
    for root, seed in zip(roots, seeds):
        node = root._node
        if node is None or (allowed is not None and node not in allowed):
            walk.deliver(root, seed)
        else:
            grads[node] = seed if node not in grads else add_gradients(grads[node], seed)
    if nodes is None:
        nodes = _reachable(list(grads), allowed)
    if walk.source_ids is not None:
        walk.leading = _inputs_leading_to(nodes, walk.source_ids, allowed)
    if create_graph or walk.anomaly or walk.source_ids is not None or allowed is not None or walk.hooks:
        for node in nodes:
            walk.visit(node, walk.take(node))
    else:  # the plain first-order backward: the same steps, the common nodes' inline
        _first_order_walk(nodes, grads, retain_graph, walk.deliver, walk.visit)
    walk.finish()
    return walk.found


class _Pass:
    """One reverse pass's state: the gradients arriving at nodes (``grads``), those found for the sources
    (``found``), and the steps every node takes (``visit``) and every leaf (``deliver``)."""

    def __init__(self, sources, allowed, retain_graph, create_graph, hooks=False):
        self.source_ids = None if sources is None else {t.id for t in sources}
        self.allowed, self.retain_graph, self.create_graph = allowed, retain_graph, create_graph
        self.found: dict = {}
        self.grads: dict = {}
        self.leading: dict | None = None
        self.anomaly = STATE.anomaly
        self.input_gradients = _input_gradients_graph if create_graph else _input_gradients
        self.hooks = hooks
        self.held: dict = {}  # {tensor id: (leaf or None, summed gradient)} of hooked tensors reached as leaves

    def take(self, node):
        """The gradient arriving at ``node``, now complete (every consumer was visited), through its hooks."""
        g = self.grads.pop(node, None)
        return g if g is None or not self.hooks or node.out_id not in HOOKS else self.hooked(node.out_id, g)

    def deliver(self, leaf, g) -> None:
        """A gradient reaching a tensor without a node: into its ``.grad``, or ``found`` when it is a source (held
        until the walk ends when the tensor has hooks: they get its total gradient)."""
        if self.source_ids is not None:
            if leaf.id in self.source_ids:
                self._found(leaf.id, g)
        elif self.hooks and leaf.id in HOOKS:
            self._hold(leaf.id, leaf, g)
        elif leaf._requires_grad:
            self._accumulate(leaf, g)

    def _accumulate(self, t, g) -> None:
        if self.create_graph:
            t.grad = g if t.grad is None else t.grad + g
        else:
            t.grad = Tensor._wrap(g if t.grad is None else add_gradients(t.grad._data, g))

    def _found(self, tid, g) -> None:
        found = self.found
        if self.hooks and tid in HOOKS:
            self._hold(tid, None, g)
        else:
            found[tid] = g if tid not in found else add_gradients(found[tid], g)

    def _hold(self, tid, leaf, g) -> None:
        held = self.held.get(tid)
        self.held[tid] = (leaf, g if held is None else add_gradients(held[1], g))

    def finish(self) -> None:
        """The held gradients, now totals, through their tensors' hooks and on to ``.grad`` or ``found``."""
        for tid, (leaf, g) in self.held.items():
            g = self.hooked(tid, g)
            if leaf is None or self.source_ids is not None:
                self.found[tid] = g
            elif leaf._requires_grad:
                self._accumulate(leaf, g)

    def hooked(self, tid, g):
        """THE place tensor hooks run: each hook of tensor ``tid`` in registration order on its total gradient (a
        hook returning a Tensor replaces it), then ``retain_grad``'s accumulation into the tensor's ``.grad``."""
        entry = HOOKS.get(tid)
        if entry is None:
            return g
        for fn in list(entry.fns.values()):
            given = g if isinstance(g, Tensor) else Tensor._wrap(g)
            result = fn(given)
            if result is not None:
                g = hook_result(fn, result, given, self.create_graph)
        retained = entry.retained() if entry.retained is not None else None
        if retained is not None:
            self._accumulate(retained, g)
        return g

    def visit(self, node, g) -> None:
        """One node's step: call its rules with the gradient(s) arriving at it, send theirs on."""
        if node.siblings is not None:  # an op with several outputs: one rule call with every output's gradient
            g, needs = self._siblings_step(node, g)
        elif g is None:
            return
        else:
            if self.source_ids is not None and node.out_id in self.source_ids:
                self.found[node.out_id] = g
            needs = node._needs if self.leading is None else self.leading[node]
        if g is None or True not in needs:  # nothing to compute here (the node is kept: another pass may need it)
            return
        grads, allowed = self.grads, self.allowed
        for i, grad in enumerate(self.input_gradients(node, g, needs)):
            if grad is None:
                continue
            if self.anomaly:
                check_backward_result(node, input_name(node.op, i, node.seq_lens), getattr(grad, "_data", grad))
            parent = node.parents[i]
            if parent is None:
                self.deliver(node.leaves[i], grad)
            elif allowed is None or parent in allowed:
                grads[parent] = grad if parent not in grads else add_gradients(grads[parent], grad)
            elif self.source_ids is not None and parent.out_id in self.source_ids:
                self._found(parent.out_id, grad)
        if not self.retain_graph:
            for freed in node.siblings or (node,):
                if freed is not None:
                    freed.residuals = freed.inputs = None

    def _siblings_step(self, node, g):
        """(every output's gradient, the inputs needed) for a node of an op with several outputs; (None, ()) when
        none of its outputs received a gradient."""
        siblings = node.siblings
        gs = [g if sib is node else (self.take(sib) if sib is not None else None) for sib in siblings]
        if all(x is None for x in gs):
            return None, ()
        if self.source_ids is not None:
            for sib, x in zip(siblings, gs):
                if sib is not None and x is not None and sib.out_id in self.source_ids:
                    self.found[sib.out_id] = x
        leading = self.leading
        if leading is None:
            return tuple(gs), node._needs
        present = [sib for sib in siblings if sib is not None and sib in leading]
        return tuple(gs), tuple(any(leading[sib][k] for sib in present) for k in range(len(node._needs)))


def _first_order_walk(nodes, grads, retain_graph, deliver, visit) -> None:
    """``reverse_pass``'s loop for a plain first-order backward: a node with ``Op.direct_rules`` is stepped here
    (``_check_node`` and ``_input_gradients`` inline, in order; leaves get theirs once all rules succeeded)."""
    pop, get = grads.pop, grads.get
    for node in nodes:
        g = pop(node, None)
        rules = node.op.direct_rules
        if rules is None:
            visit(node, g)
            continue
        if g is None:
            continue
        needs, residuals, versions = node._needs, node.residuals, node.versions
        if residuals is None or (  # apply's short path shares the all-zero versions: identity tests, then ints
            (versions is not _ZERO_VERSIONS_1 and (versions is not _ZERO_VERSIONS_2 or node.inputs[1]._version))
            or node.inputs[0]._version
        ):
            _check_node(node, needs)  # raises GraphFreedError / InPlaceModificationError, or passes
        arrays, ans, aux = residuals
        attrs = node.attrs if aux is None else {**node.attrs, **aux}
        parents = node.parents
        to_leaves = None
        for i in range(len(needs)):  # (indices rather than zip: fewer temporary objects per node)
            if needs[i]:
                rule, quiet = rules[i]
                token = numpy_errors_set(NUMPY_QUIET) if quiet else None  # numpy's warnings off for a quiet rule
                try:
                    grad = rule(g, ans, *arrays, **attrs) if attrs else rule(g, ans, *arrays)
                except (GradientError, BackwardNotImplementedError):
                    raise
                except Exception as e:  # a bug in a rule: name the op and the inputs, keep the original as cause
                    raise _rule_failed(node, needs, e) from e
                finally:
                    if token is not None:
                        numpy_errors_reset(token)
                expected = arrays[i]
                if (
                    type(grad) is not np.ndarray
                    or grad.shape != expected.shape
                    or (grad.dtype is not expected.dtype and grad.dtype != expected.dtype)
                ):
                    grad = _checked_result(node, i, grad, expected)
                parent = parents[i]
                if parent is None:
                    to_leaves = [*(to_leaves or ()), (node.leaves[i], grad)]
                elif (previous := get(parent)) is None:
                    grads[parent] = grad
                else:
                    grads[parent] = add_gradients(previous, grad)
        for leaf, grad in to_leaves or ():
            deliver(leaf, grad)
        if not retain_graph:
            node.residuals = node.inputs = None


def _rule_failed(node, needs, error: Exception) -> GradientError:
    """The error for a rule that raised: the op and the inputs it was asked for, the original kept as its cause."""
    wanted = [input_name(node.op, k, node.seq_lens) for k, need in enumerate(needs) if need]
    return GradientError(
        f"op '{node.op.name}': the backward rule for input(s) {wanted} raised {type(error).__name__}: {error}"
    )


def _checked_result(node, i, grad, expected):
    """A rule's result for input ``i``, validated against the input ``expected``: an array of its shape and dtype (a
    numpy scalar becomes one), or under create_graph (``expected`` a Tensor) a Tensor (anything else not None is
    wrapped); else ``GradientError`` naming the op and the input -- the one wording of every path."""
    if isinstance(expected, Tensor):
        kind_ok = grad is not None
        if kind_ok and not isinstance(grad, Tensor):
            grad = as_tensor(np.asarray(grad))
    else:
        kind_ok = isinstance(grad, np.ndarray | np.generic)
        if kind_ok and type(grad) is not np.ndarray:
            grad = np.asarray(grad)
    if not kind_ok:
        got = "None" if grad is None else type(grad).__name__
        what = f"{got}, expected an array of shape {expected.shape} and dtype {expected.dtype}"
    elif grad.shape != expected.shape or (grad.dtype is not expected.dtype and grad.dtype != expected.dtype):
        what = f"shape {grad.shape} dtype {grad.dtype}, expected shape {expected.shape} dtype {expected.dtype}"
    else:
        return grad
    name = input_name(node.op, i, node.seq_lens)
    raise GradientError(f"op '{node.op.name}': the backward rule for input '{name}' returned {what}")


def _check_node(node, needs) -> None:
    """Before any rule runs: the saved values still exist, no input was reassigned, no stub is reached."""
    op = node.op
    if node.residuals is None:
        raise GraphFreedError(
            f"backward reached op '{op.name}' (node #{node.index}) whose saved values were freed by an earlier "
            f"backward; pass retain_graph=True to the first backward (or persistent=True to the GradientTape) "
            f"to differentiate the same graph twice"
        )
    for t, version in zip(node.inputs, node.versions):
        if t is not None and t._version != version and not op.view:  # a view's rules read its input's shape only
            name = input_name(op, next(j for j, x in enumerate(node.inputs) if x is t), node.seq_lens)
            raise InPlaceModificationError(
                f"op '{op.name}': input '{name}' (tensor #{t.id}, shape {t.shape}) was modified in place after the op "
                f"recorded it (version {version} -> {t._version}); the gradients would be for values that no longer "
                f"exist. Run the forward again after the update"
            )
    if op.has_stub:
        stubbed = [
            input_name(op, i, node.seq_lens)
            for i, (need, state) in enumerate(zip(needs, flat_states(op, node.seq_lens)))
            if need and state is Grad.STUB
        ]
        if stubbed:
            order = getattr(op, "second_order_of", None)
            if order is not None:
                raise BackwardNotImplementedError(
                    f"op '{order.name}' has no second-order backward ({order.second_order_note or 'declared a stub'}"
                    f"); this gradient was computed with create_graph=True and is being differentiated again. "
                    f"`python -m tape coverage` lists every op's second-order status"
                )
            raise BackwardNotImplementedError(
                f"the backward of op '{op.name}' is a registered stub for input(s) {stubbed}, and the reverse "
                f"pass needs a gradient for them here. minitape never drops a gradient silently: implement the "
                f"rule, or detach these inputs. `python -m tape coverage` lists every op's backward status"
            )


def _call_rules(op, node, g, ans, inputs, needs, attrs) -> list:
    """Call the op's rules on ``inputs`` (arrays, or Tensors for create_graph), one flat entry per input."""
    seq_lens = node.seq_lens
    slot_inputs = regroup(op, inputs, seq_lens) if seq_lens else inputs
    slot_needs = regroup(op, needs, seq_lens) if seq_lens else needs
    try:
        if op.joint_vjp is not None:
            results = op.joint_vjp(g, ans, *slot_inputs, needs=tuple(slot_needs), **attrs)
            if not isinstance(results, tuple | list) or len(results) != len(slot_inputs):
                raise GradientError(
                    f"op '{op.name}': its joint backward must return a tuple of {len(slot_inputs)} "
                    f"entries (one per input), got {type(results).__name__}"
                )
        else:
            results = [
                rule(g, ans, *slot_inputs, **attrs) if (any(need) if isinstance(need, list) else need) else None
                for rule, need in zip(op.vjps, slot_needs)
            ]
    except (GradientError, BackwardNotImplementedError):
        raise
    except Exception as e:  # a bug in a rule: say which op and which inputs, keep the original as the cause
        raise _rule_failed(node, needs, e) from e
    return flat_gradients(op, results, seq_lens) if seq_lens else list(results)


def _input_gradients(node, g, needs) -> list:
    """THE backward call of an op application on arrays: its rules for the inputs in ``needs`` (the forward's aux
    with the attributes), every result validated (an array of its input's shape and dtype, else GradientError
    naming the op and the input). ``_first_order_walk`` inlines this for ops with direct rules."""
    _check_node(node, needs)
    arrays, ans, aux = node.residuals
    attrs = node.attrs if aux is None else {**node.attrs, **aux}
    results = _call_rules(node.op, node, g, ans, arrays, needs, attrs)
    for i, grad in enumerate(results):
        if needs[i]:
            results[i] = _checked_result(node, i, grad, arrays[i])
    return results


# -- create_graph: the backward pass recorded as a computation of its own ------------------------------------
def _input_gradients_graph(node, g, needs) -> list:
    """The rules' results as Tensors whose computation is recorded (differentiable again)."""
    op = node.op
    _check_node(node, needs)
    inputs = node.inputs
    with enable_grad():
        if op.second_order is Grad.STUB:
            results = _stubbed_second_order(node, g, needs)
        elif op.composite is not None:
            results = _through_composite(node, g, needs)
        else:
            results = _call_rules(op, node, g, _output_tensors(node), list(inputs), needs, node.attrs)
    return [_checked_result(node, i, grad, inputs[i]) if needs[i] else None for i, grad in enumerate(results)]


def _output_tensors(node):
    """The op's output as its rules see it under create_graph: the saved output array as a Tensor produced by
    ``node`` itself -- the value the forward returned, at the same place in the graph (a rule's use of it is
    recorded as a use of the node), whether or not the tensor the forward returned still exists. For several
    outputs a tuple of them (constants for outputs without a node)."""
    if node.siblings is None:
        return Tensor._wrap(node.residuals[1], node)
    return tuple(Tensor._wrap(array, sib) for sib, array in zip(node.siblings, node.residuals[1]))


def _through_composite(node, g, needs) -> list:
    """The VJP of ``op.composite`` (the op written with registered ops), recorded: its gradients are exact and
    differentiable because the composite's own rules are."""
    op = node.op
    inputs = node.inputs
    slot_inputs = regroup(op, inputs, node.seq_lens) if node.seq_lens else inputs
    start = next_node_index()
    out = op.composite(**dict(zip(op.input_names, slot_inputs)), **node.attrs)
    outs, gs = (tuple(out), tuple(g)) if isinstance(out, tuple | list) else ((out,), (g,))
    roots = [(o, x) for o, x in zip(outs, gs) if x is not None]  # an input returned as is: delivered to it as a source
    composite_nodes = {
        n for n in _reachable([o._node for o, _ in roots if o._node is not None], None) if n.index > start
    }
    found = reverse_pass(
        [o for o, _ in roots],
        [x for _, x in roots],
        retain_graph=True,
        sources=[t for t, need in zip(inputs, needs) if need],
        allowed=composite_nodes,
        create_graph=True,
        hooks=False,
    )
    results: list[Tensor | None] = []
    for t, need in zip(inputs, needs):  # the same tensor in two slots: its whole gradient goes to the first one
        grad = found.pop(t.id, None) if need else None
        results.append(grad if grad is not None or not need else Tensor._wrap(np.zeros(t.shape, t.dtype)))
    return results


def _stubbed_second_order(node, g, needs) -> list:
    """First-order values, attached to a node whose own backward raises: differentiating them again is an
    error naming the op, never a silent zero."""
    several = isinstance(g, tuple)
    values = _input_gradients(node, tuple(None if x is None else x._data for x in g) if several else g._data, needs)
    g_any = next(x for x in g if x is not None) if several else g
    stub = _second_order_stub(node.op)
    return [stub(t, g_any, value=value) if need else None for t, need, value in zip(node.inputs, needs, values)]


_STUBS: dict = {}


def _second_order_stub(op) -> Op:
    stub = _STUBS.get(op.name)
    if stub is None:
        stub = _STUBS[op.name] = Op(
            f"{op.name}_backward",
            family=op.family,
            inputs=("input", "grad"),
            forward=lambda input, grad, value: value,
            vjps=(Grad.STUB, Grad.STUB),
        )
        stub.second_order_of = op
    return stub
