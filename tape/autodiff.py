"""The reverse pass: one iterative walk shared by ``Tensor.backward`` and ``GradientTape.compute_gradients``.

Nodes reachable from the roots are visited in decreasing application index (a reverse topological
order, no recursion); the gradient arriving at a node is complete when it is visited, because every
consumer of its output was applied later. Each rule's result is validated: ``None``, a non-array, or
a wrong shape or dtype raises ``GradientError`` naming the op and the input; a stub raises
``BackwardNotImplementedError``. Without ``retain_graph`` the visited nodes' saved arrays are freed.
"""

from __future__ import annotations

import numpy as np

from .errors import BackwardNotImplementedError, GradientError, GraphFreedError, InPlaceModificationError
from .recording import STATE, check_backward_result
from .registry import STUBBED
from .tensors import Tensor

__all__ = ["backward", "reverse_pass", "seed_gradients"]


def backward(roots, grads=None, retain_graph: bool = False) -> None:
    """Accumulate the gradients of ``roots`` into ``.grad`` of every leaf that requires grad."""
    for root in roots:
        if root._node is None and not root._requires_grad:
            raise RuntimeError("backward: this tensor does not require grad and was not computed by a recorded "
                               "op, so there is nothing to differentiate (set requires_grad=True on the inputs, "
                               "and do not compute it under no_grad)")
    reverse_pass(roots, seed_gradients(roots, grads, "backward"), retain_graph=retain_graph)


def seed_gradients(roots, grads, who: str) -> list:
    """The gradient each root starts with: 1 for a single-element root, else the one the caller gave."""
    seeds = []
    for k, root in enumerate(roots):
        g = None if grads is None else grads[k]
        if g is None:
            if root.size != 1:
                raise RuntimeError(f"{who}: output {k} has shape {root.shape}; only a single-element output gets "
                                   f"an implicit gradient of 1, pass its gradient explicitly for the others")
            seeds.append(np.ones(root.shape, dtype=root.dtype))
            continue
        array = np.asarray(g._data if isinstance(g, Tensor) else g)
        if array.dtype.kind == "f" and array.dtype != root.dtype:
            raise TypeError(f"{who}: gradient {k} has dtype {array.dtype} but its output is {root.dtype}")
        if array.shape != root.shape:
            raise ValueError(f"{who}: gradient {k} has shape {array.shape} but its output has shape {root.shape}")
        seeds.append(array.astype(root.dtype, copy=False))
    return seeds


def _reachable(start_nodes, allowed) -> list:
    seen = set(start_nodes)
    stack = list(start_nodes)
    while stack:
        for parent in stack.pop().parents:
            if parent is not None and parent not in seen and (allowed is None or parent in allowed):
                seen.add(parent)
                stack.append(parent)
    return sorted(seen, key=lambda node: node.index, reverse=True)


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
        leading[node] = tuple(need and flag for need, flag in zip(node.needs, flags))
        if node.out_id in source_ids or any(flags):
            leads_node.add(node)
    return leading


def reverse_pass(roots, seeds, *, retain_graph: bool, sources=None, allowed=None):
    """Propagate ``seeds`` from ``roots`` back through the recorded nodes.

    With ``sources=None`` the gradients accumulate into ``.grad`` of the leaves that require grad. With a
    list of source tensors only the paths leading to them are computed and ``{tensor id: array}`` is
    returned. ``allowed`` restricts the walk to a tape's own nodes (others count as constants).
    """
    source_ids = None if sources is None else {t.id for t in sources}
    found: dict = {}
    grads: dict = {}

    def deliver_to_tensor(leaf, g):
        if source_ids is None:
            if leaf._requires_grad:
                leaf.grad = Tensor._wrap(g if leaf.grad is None else leaf.grad._data + g)
        elif leaf.id in source_ids:
            found[leaf.id] = g if leaf.id not in found else found[leaf.id] + g

    for root, seed in zip(roots, seeds):
        node = root._node
        if node is None or (allowed is not None and node not in allowed):
            deliver_to_tensor(root, seed)
        else:
            grads[node] = seed if node not in grads else grads[node] + seed

    nodes = _reachable(list(grads), allowed)
    leading = None if source_ids is None else _inputs_leading_to(nodes, source_ids, allowed)
    anomaly = STATE.anomaly
    for node in nodes:
        g = grads.pop(node, None)
        if g is None:
            continue
        if source_ids is not None and node.out_id in source_ids:
            found[node.out_id] = g
        needs = node.needs if leading is None else leading[node]
        if True not in needs:
            continue
        for i, grad in enumerate(_input_gradients(node, g, needs)):
            if grad is None:
                continue
            if anomaly:
                check_backward_result(node, node.op.input_names[i], grad)
            parent = node.parents[i]
            if parent is None:
                deliver_to_tensor(node.leaves[i], grad)
            elif allowed is None or parent in allowed:
                grads[parent] = grad if parent not in grads else grads[parent] + grad
            elif source_ids is not None and parent.out_id in source_ids:
                found[parent.out_id] = grad if parent.out_id not in found else found[parent.out_id] + grad
        if not retain_graph:
            node.saved = node.inputs = None
    return found


def _input_gradients(node, g, needs) -> list:
    """Call the op's rules for the inputs in ``needs`` and validate what they return."""
    op = node.op
    if node.saved is None:
        raise GraphFreedError(
            f"backward reached op '{op.name}' (node #{node.index}) whose saved values were freed by an earlier "
            f"backward; pass retain_graph=True to the first backward (or persistent=True to the GradientTape) "
            f"to differentiate the same graph twice")
    for t, version in zip(node.inputs, node.versions):
        if t is not None and t._version != version:
            i = next(j for j, x in enumerate(node.inputs) if x is t)
            raise InPlaceModificationError(
                f"op '{op.name}': input '{op.input_names[i]}' (tensor #{t.id}, shape {t.shape}) was given a "
                f"new value after the op recorded it (version {version} -> {t._version}); the "
                f"gradients would be for values that no longer exist. Run the forward again after the update")
    if op.has_stub:
        stubbed = [name for name, need, state in zip(op.input_names, needs, op.input_states)
                   if need and state == STUBBED]
        if stubbed:
            raise BackwardNotImplementedError(
                f"the backward of op '{op.name}' is a registered stub for input(s) {stubbed}, and the reverse "
                f"pass needs a gradient for them here. minitape never drops a gradient silently: implement the "
                f"rule, or detach these inputs. `python -m tape coverage` lists every op's backward status")
    arrays, ans, aux = node.saved
    attrs = node.attrs if aux is None else {**node.attrs, **aux}
    try:
        if op.joint_vjp is not None:
            results = op.joint_vjp(g, ans, *arrays, needs=needs, **attrs)
            if not isinstance(results, tuple | list) or len(results) != len(arrays):
                raise GradientError(f"op '{op.name}': its joint backward must return a tuple of {len(arrays)} "
                                    f"entries (one per input), got {type(results).__name__}")
            results = list(results)
        else:
            results = [rule(g, ans, *arrays, **attrs) if need else None for rule, need in zip(op.vjps, needs)]
    except GradientError:
        raise
    except Exception as e:  # a bug in a rule: say which op and which inputs, keep the original as the cause
        wanted = [name for name, need in zip(op.input_names, needs) if need]
        raise GradientError(f"op '{op.name}': the backward rule for input(s) {wanted} raised "
                            f"{type(e).__name__}: {e}") from e
    for i, grad in enumerate(results):
        if not needs[i]:
            continue
        expected = arrays[i]
        if type(grad) is not np.ndarray:
            if not isinstance(grad, np.generic):
                raise GradientError(
                    f"op '{op.name}': the backward rule for input '{op.input_names[i]}' returned "
                    f"{'None' if grad is None else type(grad).__name__}, expected an array of shape "
                    f"{expected.shape} and dtype {expected.dtype}")
            results[i] = grad = np.asarray(grad)
        if grad.shape != expected.shape or (grad.dtype is not expected.dtype and grad.dtype != expected.dtype):
            raise GradientError(
                f"op '{op.name}': the backward rule for input '{op.input_names[i]}' returned shape {grad.shape} "
                f"dtype {grad.dtype}, expected shape {expected.shape} dtype {expected.dtype}")
    return results
