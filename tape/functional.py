"""Function transforms over the engine, as users know them from ``torch.func`` and JAX: ``grad``,
``value_and_grad``, ``vjp``, ``hvp``, ``jacobian``, ``hessian``, and ``gradients`` (``torch.autograd.grad``).

They compose (``grad(grad(f))``): an argument that already carries a graph is differentiated where it is, and
the gradients are computed with ``create_graph`` whenever an outer transform or a grad-requiring argument
may differentiate them again; at the outermost level they are plain constant Tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .autodiff import reverse_pass, seed_gradients
from .state import enable_grad, needs_grad
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
    single = isinstance(outputs, Tensor)
    outputs = [outputs] if single else list(outputs)
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
    connected = [out for out in outputs if out._node is not None or needs_grad(out)]
    found = {}
    if connected:
        keep = [k for k, out in enumerate(outputs) if out in connected]
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


def _argnums(argnums, n_args: int) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for a in nums:
        if not isinstance(a, int) or not -n_args <= a < n_args:
            raise ValueError(f"argnums: {argnums!r} does not name arguments of a call with {n_args} arguments")
    return tuple(a % n_args for a in nums)


def _differentiable_args(args, nums):
    """The call's arguments with those in ``nums`` as tensors to differentiate at: an argument that already
    needs a gradient is kept (so transforms nest); anything else becomes a fresh leaf."""
    args = list(args)
    nested = False
    for a in nums:
        x = args[a]
        if isinstance(x, Tensor) and needs_grad(x):
            nested = True
            continue
        x = as_tensor(x)
        if x.dtype.kind != "f":
            raise TypeError(f"grad: argument {a} must be floating to differentiate at, got {x.dtype}")
        args[a] = Tensor(x._data, requires_grad=True, dtype=x.dtype)
    return args, nested


def value_and_grad(fn: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """``fn``'s value and its gradient with respect to the arguments in ``argnums`` (``fn`` must return a
    single-element Tensor, or ``(value, aux)`` with ``has_aux``). Returns ``(value, grads)`` or
    ``((value, aux), grads)``; ``grads`` is one Tensor, or a tuple when ``argnums`` is a tuple."""

    def wrapped(*args):
        nums = _argnums(argnums, len(args))
        args, nested = _differentiable_args(args, nums)
        with enable_grad():
            result = fn(*args)
        value, aux = result if has_aux else (result, None)
        if not isinstance(value, Tensor) or value.size != 1:
            raise TypeError(
                f"grad: fn must return a single-element Tensor, got "
                f"{type(value).__name__} {getattr(value, 'shape', '')}"
            )
        grads = gradients(value, [args[a] for a in nums], create_graph=nested, allow_unused=True)
        grads = [Tensor._wrap(np.zeros(args[a].shape, args[a].dtype)) if g is None else g for g, a in zip(grads, nums)]
        out = grads[0] if isinstance(argnums, int) else tuple(grads)
        return ((value, aux) if has_aux else value), out

    return wrapped


def grad(fn: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """The gradient of a scalar-valued ``fn`` with respect to the arguments in ``argnums``; composes
    (``grad(grad(f))``)."""
    inner = value_and_grad(fn, argnums, has_aux)

    def wrapped(*args):
        (value_aux, grads) = inner(*args)
        return (grads, value_aux[1]) if has_aux else grads

    return wrapped


def vjp(fn: Callable, *primals):
    """``(fn(*primals), vjp_fn)``: ``vjp_fn(cotangent)`` returns the vector-Jacobian product for every primal
    (a tuple). The cotangent may require grad: the products are then differentiable in it too."""
    args, nested = _differentiable_args(primals, tuple(range(len(primals))))
    with enable_grad():
        out = fn(*args)
    if not isinstance(out, Tensor):
        raise TypeError(f"vjp: fn must return a Tensor, got {type(out).__name__}")

    def vjp_fn(cotangent):
        create = nested or (isinstance(cotangent, Tensor) and needs_grad(cotangent))
        if not create and isinstance(cotangent, Tensor):
            cotangent = cotangent._data
        grads = gradients(out, args, [cotangent], create_graph=create, retain_graph=True, allow_unused=True)
        return tuple(Tensor._wrap(np.zeros(a.shape, a.dtype)) if g is None else g for g, a in zip(grads, args))

    return out, vjp_fn


def hvp(fn: Callable, primals: Sequence, tangents: Sequence):
    """``(fn(*primals), H v)``: the Hessian of scalar ``fn`` times the tangents, by reverse over reverse."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"hvp: {len(primals)} primals but {len(tangents)} tangents")
    args, nested = _differentiable_args(primals, tuple(range(len(primals))))
    with enable_grad():
        value = fn(*args)
        first = gradients(value, args, create_graph=True, allow_unused=True)
        inner = None
        for g, v in zip(first, tangents):
            if g is None:
                continue
            term = (g * as_tensor(v._data if isinstance(v, Tensor) else v, dtype=g.dtype)).sum()
            inner = term if inner is None else inner + term
    if inner is None or inner._node is None:
        products = [None] * len(args)
    else:
        products = gradients(inner, args, create_graph=nested, allow_unused=True)
    return value, tuple(Tensor._wrap(np.zeros(a.shape, a.dtype)) if p is None else p for p, a in zip(products, args))


def jacobian(fn: Callable, argnums=0) -> Callable:
    """The full Jacobian ``d fn(*args) / d args[argnums]``, shape ``out.shape + arg.shape``, one reverse pass
    per output element (meant for small inputs)."""

    def wrapped(*args):
        nums = _argnums(argnums, len(args))
        args, nested = _differentiable_args(args, nums)
        with enable_grad():
            out = fn(*args)
        rows: dict[int, list[Tensor]] = {a: [] for a in nums}
        for k in range(out.size):
            seed = np.zeros(out.size, out.dtype)
            seed[k] = 1
            grads = gradients(
                out,
                [args[a] for a in nums],
                [seed.reshape(out.shape)],
                create_graph=nested,
                retain_graph=True,
                allow_unused=True,
            )
            for a, g in zip(nums, grads):
                rows[a].append(Tensor._wrap(np.zeros(args[a].shape, args[a].dtype)) if g is None else g)
        from . import tensors

        result = []
        for a in nums:
            stacked = (
                tensors.ops.stack(rows[a], 0)
                if rows[a]
                else Tensor._wrap(np.zeros((0,) + args[a].shape, args[a].dtype))
            )
            result.append(tensors.ops.reshape(stacked, out.shape + args[a].shape))
        return result[0] if isinstance(argnums, int) else tuple(result)

    return wrapped


def hessian(fn: Callable, argnums=0) -> Callable:
    """The Hessian of scalar ``fn``: the Jacobian of its gradient."""
    return jacobian(grad(fn, argnums), argnums)
