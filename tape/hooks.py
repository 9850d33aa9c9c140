"""Tensor hooks (``Tensor.register_hook``, ``retain_grad``), kept by tensor id in ``HOOKS``; the reverse pass
(tape/autodiff.py, ``_Pass.hooked``) runs them on a tensor's total gradient."""

from __future__ import annotations

import weakref

from .tensors import Tensor


class _Hooks:
    """One tensor's hooks: ``fns`` {handle id: fn} in registration order, ``retained`` a weak reference to the
    tensor when it retains its gradient."""

    __slots__ = ("fns", "retained")

    def __init__(self):
        self.fns: dict = {}
        self.retained = None


HOOKS: dict[int, _Hooks] = {}  # {tensor id: its hooks}; an entry goes with its leaf tensor, or a non-leaf's node
_handle_ids = iter(range(1, 2**62))


class RemovableHandle:
    """What ``register_hook`` returns: ``remove()`` takes the hook off (again: nothing happens), as torch's."""

    def __init__(self, tid: int, key: int):
        self.tid, self.key = tid, key

    def remove(self) -> None:
        entry = HOOKS.get(self.tid)
        if entry is not None:
            entry.fns.pop(self.key, None)
            if not entry.fns and entry.retained is None:
                del HOOKS[self.tid]


def _entry(tensor, who: str) -> _Hooks:
    if not tensor._requires_grad:
        raise RuntimeError(
            f"Tensor.{who}: cannot register a hook on a tensor that does not require grad (shape {tensor.shape}, "
            f"dtype {tensor.dtype}); set requires_grad=True on it or on the inputs it is computed from"
        )
    entry = HOOKS.get(tensor.id)
    if entry is None:
        entry = HOOKS[tensor.id] = _Hooks()
        # a non-leaf's hooks live as long as its node (the graph), as torch's: the tensor may be dropped before backward
        weakref.finalize(tensor if tensor._node is None else tensor._node, HOOKS.pop, tensor.id, None)
    return entry


def register_hook(tensor, fn) -> RemovableHandle:
    """``fn(grad)`` called with ``tensor``'s total gradient in every reverse pass that reaches it; a Tensor it returns
    (same shape and dtype) replaces the gradient. Returns a handle whose ``remove()`` unregisters it."""
    if not callable(fn):
        raise TypeError(f"Tensor.register_hook: argument 'hook' expected a callable, got {type(fn).__name__}")
    tensor._node  # noqa: B018 -- a compiled step's placeholder materializes here: its hooks then run eagerly
    key = next(_handle_ids)
    _entry(tensor, "register_hook").fns[key] = fn
    return RemovableHandle(tensor.id, key)


def retain_grad(tensor) -> None:
    """A non-leaf tensor keeps its gradient in ``.grad`` (accumulated, after its hooks ran); a leaf already does."""
    if tensor._node is None and tensor._requires_grad:
        return
    _entry(tensor, "retain_grad").retained = weakref.ref(tensor)


def hook_result(fn, result, given, create_graph: bool):
    """A hook's replacement gradient, checked: a Tensor of the gradient's shape and dtype."""
    name = getattr(fn, "__qualname__", type(fn).__name__)
    if not isinstance(result, Tensor):
        raise TypeError(
            f"Tensor.register_hook: hook '{name}' returned {type(result).__name__}; expected None or a Tensor of "
            f"shape {given.shape} and dtype {given.dtype}"
        )
    if result.shape != given.shape or result.dtype != given.dtype:
        raise ValueError(
            f"Tensor.register_hook: hook '{name}' returned shape {result.shape} dtype {result.dtype}; expected the "
            f"gradient's shape {given.shape} and dtype {given.dtype}"
        )
    return result if create_graph else result._data
