"""Function transforms over the engine, as users know them from ``torch.func`` and JAX: ``grad``,
``value_and_grad``, ``vjp``, ``hvp``, ``jacobian``, ``hessian``, and ``gradients`` (``torch.autograd.grad``).

Each call of a transform is one level of differentiation with its own perturbation, as in torch.func: the
arguments it differentiates at are fresh tensors -- a new leaf, or, for an argument that already carries a graph,
a recorded alias of it (so the level differentiates with respect to its own argument, never in place of an outer
variable, and an enclosing computation still differentiates through it). The backward is recorded
(``create_graph``) whenever an enclosing computation may differentiate the result: when anything that reaches the
output other than the level's own fresh leaves may need a gradient (a closed-over tensor that requires grad, an
outer level's variable, a tensor a GradientTape watches) and grad mode is on at the call. Otherwise -- at the
outermost level -- results, values and aux included, are plain constants and no graph is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from .autodiff import reverse_pass, seed_gradients
from .state import enable_grad, is_grad_enabled, needs_grad
from .tensors import Tensor, as_tensor

__all__ = ["gradients", "grad", "value_and_grad", "vjp", "hvp", "jacobian", "hessian"]


def gradients(
    outputs,
    inputs,
    grad_outputs=None,
    *,
    create_graph: bool = False,
    retain_graph: bool | None = None,
    allow_unused: bool = False,
) -> list:
    """d(outputs)/d(inputs) contracted with ``grad_outputs`` (1 for single-element outputs), one Tensor per
    input, in order. Nothing is accumulated into ``.grad``. An input the outputs do not depend on raises,
    unless ``allow_unused`` (then its entry is None)."""
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is not None and not isinstance(grad_outputs, list | tuple):
        grad_outputs = [grad_outputs]
    for k, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"gradients: inputs[{k}] must be a Tensor, got {type(t).__name__}")
    for k, out in enumerate(outputs):
        if not isinstance(out, Tensor):
            raise TypeError(f"gradients: outputs[{k}] must be a Tensor, got {type(out).__name__}")
    retain_graph = create_graph if retain_graph is None else retain_graph
    seeds = seed_gradients(outputs, grad_outputs, "gradients", create_graph)
    keep = [k for k, out in enumerate(outputs) if out._node is not None or needs_grad(out)]  # by position
    found = {}
    if keep:
        found = reverse_pass(
            [outputs[k] for k in keep],
            [seeds[k] for k in keep],
            retain_graph=retain_graph,
            sources=inputs,
            create_graph=create_graph,
        )
    result = []
    for k, t in enumerate(inputs):
        g = found.get(t.id)
        if g is None and not allow_unused:
            raise RuntimeError(
                f"gradients: inputs[{k}] (tensor #{t.id}, shape {t.shape}) is not used to compute "
                f"the outputs; pass allow_unused=True to get None for it"
            )
        if g is not None and not isinstance(g, Tensor):
            g = Tensor._wrap(g)
        result.append(g)
    return result


# -- one level of differentiation ----------------------------------------------------------------------------
def _argnums(argnums, n_args: int, who: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise ValueError(f"{who}: argnums must name at least one argument, got {argnums!r}")
    for a in nums:
        if not isinstance(a, int) or isinstance(a, bool) or not -n_args <= a < n_args:
            raise ValueError(f"{who}: argnums {argnums!r} does not name arguments of a call with {n_args} arguments")
    nums = tuple(a % n_args for a in nums)
    if len(set(nums)) != len(nums):
        raise ValueError(f"{who}: argnums {argnums!r} names an argument twice")
    return nums


def _perturbed(args, nums, who: str) -> tuple[list, list[Tensor]]:
    """The call's arguments with those in ``nums`` replaced by this level's own tensors to differentiate at (in
    ``nums`` order): a recorded alias of an argument that already needs a gradient (the enclosing computation
    differentiates through it; this level differentiates with respect to the alias only), a fresh leaf for
    anything else."""
    args = list(args)
    own = []
    for a in nums:
        x = args[a]
        if isinstance(x, Tensor) and needs_grad(x) and is_grad_enabled():
            y = cast(Tensor, np.reshape(x, x.shape))  # the identity, recorded (its op): a new tensor and node fed by x
            if y is x or y._node is None:
                raise RuntimeError(f"{who}: could not record an alias of argument {a}")  # pragma: no cover
        else:
            x = as_tensor(x)
            if x.dtype.kind != "f":
                raise TypeError(f"{who}: argument {a} must be floating to differentiate at, got {x.dtype}")
            y = Tensor._wrap(x._data)
            y._requires_grad = True
        args[a] = y
        own.append(y)
    return args, own


def _call_at(fn: Callable, args, nums, who: str) -> tuple[bool, list[Tensor], Any]:
    """``fn`` called, gradients on, with the arguments in ``nums`` replaced by this level's own tensors
    (``_perturbed``): whether gradients were on outside, the own tensors and ``fn``'s result."""
    outer = is_grad_enabled()
    call, own = _perturbed(args, nums, who)
    with enable_grad():
        result = fn(*call)
    return outer, own, result


def _reaches_outside(roots, own: list[Tensor]) -> bool:
    """Whether the graphs of ``roots`` (Tensors, or anything else: ignored) reach a tensor that needs a gradient
    other than this level's fresh leaves ``own`` -- something an enclosing computation may differentiate."""
    own_ids = {t.id for t in own if t._node is None}
    stack = []
    for r in roots:
        if isinstance(r, Tensor):
            if r._node is not None:
                stack.append(r._node)
            elif needs_grad(r) and r.id not in own_ids:
                return True
    seen = set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        for parent, leaf in zip(node.parents, node.leaves):
            if parent is not None:
                stack.append(parent)
            elif leaf is not None and leaf.id not in own_ids:
                return True
    return False


def _tensors_in(tree) -> list:
    """The Tensors in a (nested) tuple / list / dict, or ``tree`` itself when it is one."""
    if isinstance(tree, Tensor):
        return [tree]
    if isinstance(tree, dict):
        tree = list(tree.values())
    if isinstance(tree, tuple | list):
        return [t for x in tree for t in _tensors_in(x)]
    return []


def _detached(tree):
    """``tree`` with every Tensor in it detached (the level's graph is not kept in what it returns)."""
    if isinstance(tree, Tensor):
        return tree.detach()
    if isinstance(tree, dict):
        return {k: _detached(v) for k, v in tree.items()}
    if isinstance(tree, tuple | list):
        items = [_detached(x) for x in tree]
        return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)  # a namedtuple takes fields
    return tree


def _zeros_for_unused(grads, own) -> list:
    return [Tensor._wrap(np.zeros(t.shape, t.dtype)) if g is None else g for g, t in zip(grads, own)]


def _scalar_output(value, who: str) -> None:
    if not isinstance(value, Tensor) or value.numel() != 1 or value.dtype.kind != "f":
        raise TypeError(
            f"{who}: fn must return a single-element floating Tensor, got {type(value).__name__}"
            f"{' of shape ' + str(value.shape) + ' dtype ' + str(value.dtype) if isinstance(value, Tensor) else ''}"
        )


# -- the transforms ------------------------------------------------------------------------------------------
def value_and_grad(fn: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """``fn``'s value and its gradient with respect to the arguments in ``argnums`` (``fn`` must return a
    single-element Tensor, or ``(value, aux)`` with ``has_aux``). Returns ``(value, grads)`` or
    ``((value, aux), grads)``; ``grads`` is one Tensor, or a tuple when ``argnums`` is a tuple."""

    def wrapped(*args):
        outer, own, result = _call_at(fn, args, _argnums(argnums, len(args), "grad"), "grad")
        if has_aux and not (isinstance(result, tuple | list) and len(result) == 2):
            raise TypeError(f"grad: with has_aux=True fn must return (value, aux), got {type(result).__name__}")
        value, aux = result if has_aux else (result, None)
        _scalar_output(value, "grad")
        create = outer and _reaches_outside([value, *_tensors_in(aux)], own)
        grads = _zeros_for_unused(gradients(value, own, create_graph=create, allow_unused=True), own)
        if not create:
            value, aux = value.detach(), _detached(aux)
        out = grads[0] if isinstance(argnums, int) else tuple(grads)
        return ((value, aux) if has_aux else value), out

    return wrapped


def grad(fn: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """The gradient of a scalar-valued ``fn`` with respect to the arguments in ``argnums``; composes
    (``grad(grad(f))``), and closes over tensors that require grad (the gradient is then differentiable in
    them)."""
    inner = value_and_grad(fn, argnums, has_aux)

    def wrapped(*args):
        (value_aux, grads) = inner(*args)
        return (grads, value_aux[1]) if has_aux else grads

    return wrapped


def vjp(fn: Callable, *primals):
    """``(fn(*primals), vjp_fn)``: ``vjp_fn(cotangent)`` returns the vector-Jacobian product for every primal
    (a tuple). The cotangent may require grad: the products are then differentiable in it too."""
    outer, own, out = _call_at(fn, primals, tuple(range(len(primals))), "vjp")
    if not isinstance(out, Tensor) or out.dtype.kind != "f":
        raise TypeError(f"vjp: fn must return a floating Tensor, got {type(out).__name__}")
    reaches = _reaches_outside([out], own)

    def vjp_fn(cotangent):
        create = is_grad_enabled() and (
            reaches or (isinstance(cotangent, Tensor) and _reaches_outside([cotangent], []))
        )
        if not create and isinstance(cotangent, Tensor):
            cotangent = cotangent._data
        grads = gradients(out, own, [cotangent], create_graph=create, retain_graph=True, allow_unused=True)
        return tuple(_zeros_for_unused(grads, own))

    return (out if outer and reaches else out.detach()), vjp_fn


def _tangent(v, primal: Tensor, k: int):
    """Tangent ``k`` as a Tensor of its primal's shape and dtype: a Tensor as given (its graph is kept, so the
    product is differentiable in it), anything else a constant of the primal's dtype."""
    t = v if isinstance(v, Tensor) else as_tensor(v, dtype=primal.dtype)
    if t.shape != primal.shape or t.dtype != primal.dtype:
        raise ValueError(
            f"hvp: tangents[{k}] has shape {t.shape} dtype {t.dtype}, but primals[{k}] has shape {primal.shape} "
            f"dtype {primal.dtype}"
        )
    return t


def hvp(fn: Callable, primals: Sequence, tangents: Sequence):
    """``(fn(*primals), H v)``: the Hessian of scalar ``fn`` times the tangents, by reverse over reverse."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"hvp: {len(primals)} primals but {len(tangents)} tangents")
    outer = is_grad_enabled()
    args, own = _perturbed(primals, tuple(range(len(primals))), "hvp")
    tangents = tuple(_tangent(v, x, k) for k, (v, x) in enumerate(zip(tangents, own)))
    with enable_grad():
        value = fn(*args)
        _scalar_output(value, "hvp")
        first = gradients(value, own, create_graph=True, allow_unused=True)
        terms = [(g * v).sum() for g, v in zip(first, tangents) if g is not None]
        inner = sum(terms[1:], terms[0]) if terms else None
    create = outer and _reaches_outside([value, *tangents], own)
    products = [None] * len(own)
    if inner is not None and inner._node is not None:
        products = gradients(inner, own, create_graph=create, allow_unused=True)
    return (value if create else value.detach()), tuple(_zeros_for_unused(products, own))


def _jacobian_of(out: Tensor, own: list[Tensor], create: bool) -> list[Tensor]:
    """d out / d each of ``own``, shape ``out.shape + t.shape``: one reverse pass per element of ``out``."""
    rows: list[list[Tensor]] = [[] for _ in own]
    for k in range(out.numel()):
        seed = np.zeros(out.numel(), out.dtype)
        seed[k] = 1
        grads = gradients(
            out, own, [seed.reshape(out.shape)], create_graph=create, retain_graph=True, allow_unused=True
        )
        for row, g in zip(rows, _zeros_for_unused(grads, own)):
            row.append(g)
    result = []
    for t, row in zip(own, rows):
        stacked = cast(Tensor, np.stack(row, 0)) if row else Tensor._wrap(np.zeros((0,) + t.shape, t.dtype))
        result.append(cast(Tensor, np.reshape(stacked, out.shape + t.shape)))
    return result


def jacobian(fn: Callable, argnums=0) -> Callable:
    """The full Jacobian ``d fn(*args) / d args[argnums]``, shape ``out.shape + arg.shape``, one reverse pass
    per output element (meant for small inputs). As ``torch.func.jacrev``: a tuple ``argnums`` gives a tuple per
    output, and ``fn`` returning a tuple of Tensors gives a tuple (one entry per output)."""

    def wrapped(*args):
        outer, own, out = _call_at(fn, args, _argnums(argnums, len(args), "jacobian"), "jacobian")
        outs = out if isinstance(out, tuple) else (out,)
        for k, o in enumerate(outs):
            if not isinstance(o, Tensor) or o.dtype.kind != "f":
                raise TypeError(
                    f"jacobian: fn must return a floating Tensor or a tuple of them, got {type(o).__name__}"
                    f"{' dtype ' + str(o.dtype) if isinstance(o, Tensor) else ''}"
                    + (f" at [{k}]" if out is outs else "")
                )
        create = outer and _reaches_outside(list(outs), own)
        per_out = [_jacobian_of(o, own, create) for o in outs]
        result = [j[0] if isinstance(argnums, int) else tuple(j) for j in per_out]
        return tuple(result) if isinstance(out, tuple) else result[0]

    return wrapped


def hessian(fn: Callable, argnums=0) -> Callable:
    """The Hessian of scalar ``fn``: the Jacobian of its gradient. With a tuple ``argnums`` the blocks
    ``H[i][j] = d^2 fn / d args[i] d args[j]``, as ``torch.func.hessian``."""
    return jacobian(grad(fn, argnums), argnums)
