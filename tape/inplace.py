"""In place, as torch: tensors that share memory, one version counter per memory, and the one path an in-place op
takes (``apply_inplace``: the out-of-place op, recorded as eager records it, then its result written into the
tensor, whose history moves onto the new node).

Memory. A tensor's array is read-only at rest; only ``write`` changes it. Tensors that share memory form a ``Storage``
group: the views an op declared a torch view makes (``ops/_views.py``), ``detach()``, ``.data``, and a tensor whose
array was handed out by ``numpy()``. A write into a group bumps the version of every member, so a node that saved
any of them raises at backward ("modified by an inplace operation"), never computing with changed values. A tensor
alone (no group) is "written" by taking the new array: no memory is shared, so no one can tell, and the old array a
node saved stays as it was.

What is refused (torch refuses the first two; the third is where torch rebuilds the base's history and minitape
does not): an in-place op on a leaf that requires grad while grad mode is on; a write into memory that several
elements share (an ``expand``ed tensor); while grad mode is on, a recorded in-place op on a tensor sharing memory
with another that has a history or requires grad (a view of a tensor in the graph, or the base of such a view).
docs/porting.md says why and what to write instead.
"""

from __future__ import annotations

import functools
import weakref

import numpy as np

from .state import STATE, needs_grad

__all__ = ["Storage", "link", "exported", "write", "set_data", "apply_inplace", "check_target"]


class Storage:
    """The tensors sharing one memory (weakly held, by identity: a Tensor's ``==`` is elementwise), and whether numpy
    arrays of it were handed out."""

    __slots__ = ("refs", "views", "exported", "__weakref__")

    def __init__(self):
        self.refs: dict = {}  # id(tensor) -> weakref to it
        self.views: set = set()  # ids of the members a torch view op made (the others: the base, detached aliases)
        self.exported = False

    def add(self, t) -> None:
        key, refs = id(t), self.refs

        def forget(_) -> None:
            refs.pop(key, None)
            self.views.discard(key)

        refs[key] = weakref.ref(t, forget)

    def discard(self, t) -> None:
        self.refs.pop(id(t), None)
        self.views.discard(id(t))

    @property
    def members(self) -> list:
        return [t for t in (r() for r in list(self.refs.values())) if t is not None]


def group(t) -> Storage:
    """``t``'s Storage, made (holding ``t`` alone) when it has none."""
    storage = t._aliases
    if storage is None:
        storage = t._aliases = Storage()
        storage.add(t)
    return storage


def link(base, alias, is_view: bool = False):
    """``alias`` shares ``base``'s memory from now on (a torch view's output when ``is_view``, else a detached
    alias: ``detach()``, ``.data``); returns ``alias``."""
    storage = group(base)
    storage.add(alias)
    if is_view:
        storage.views.add(id(alias))
    alias._aliases = storage
    return alias


def exported(t) -> np.ndarray:
    """A read-only numpy view of ``t``'s memory, handed out: in-place ops on ``t`` then write into that memory."""
    group(t).exported = True
    return t._data.view()


def unlink(t) -> None:
    """``t`` stops sharing memory with its group (it takes another array)."""
    storage = t._aliases
    if storage is not None:
        storage.discard(t)
        t._aliases = None


def shared(t) -> bool:
    """Whether anything else sees ``t``'s memory."""
    storage = t._aliases
    return storage is not None and (storage.exported or len(storage.refs) > 1)


def write(t, array: np.ndarray) -> None:
    """``t`` takes the values ``array`` (of t's shape; cast to t's dtype), a fresh array nothing else holds when ``t``
    is alone. Alone, ``t`` takes the array itself; sharing memory, the values are written into it, every member's
    version moves, and a node whose saved output lives in that memory keeps a copy of the old values (the history
    of a member is not changed by a write, as in torch)."""
    from .tensors import _readonly

    if not shared(t):
        if array.dtype != t._data.dtype:
            array = array.astype(t._data.dtype)
        elif array.base is not None:  # a view of something: take values, never memory
            array = array.copy()
        t._data = _readonly(array)
        t._version += 1
        return
    storage = t._aliases
    members = storage.members
    for member in members:
        _keep_saved_output(member)
    dest = t._data
    owner = dest
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    owner.setflags(write=True)
    try:
        dest.setflags(write=True)
        np.copyto(dest, array, casting="unsafe")
    finally:
        dest.setflags(write=False)
        owner.setflags(write=False)
    for member in members:
        member._version += 1


def _keep_saved_output(t) -> None:
    """The node that made ``t`` saved t's array as its output: it gets a copy, taken before the memory changes."""
    node = t._node
    residuals = None if node is None else node.residuals
    if residuals is None:
        return
    arrays, ans, aux = residuals
    if ans is t._data:
        node.residuals = (arrays, ans.copy(), aux)
    elif isinstance(ans, tuple) and any(a is t._data for a in ans):
        node.residuals = (arrays, tuple(a.copy() if a is t._data else a for a in ans), aux)


def check_target(t, who: str) -> None:
    """Refuse an in-place op ``who`` on ``t`` where torch refuses it (see the module docstring)."""
    from .tensors import Tensor

    if not isinstance(t, Tensor):
        raise TypeError(f"{who}: expected a Tensor to modify in place, got {type(t).__name__}")
    if t._node is None and t._requires_grad and STATE.grad_enabled:
        raise RuntimeError(
            f"{who}: a leaf Tensor that requires grad (tensor #{t.id}, shape {t.shape}) is being used in an in-place "
            f"operation; update it under tape.no_grad() (as optimizers do), or work on a copy (t.clone())"
        )
    data = t._data
    if data.size > 1 and any(s == 0 and n > 1 for s, n in zip(data.strides, data.shape)):
        raise RuntimeError(
            f"{who}: unsupported operation: more than one element of the written-to tensor (shape {t.shape}) refers "
            f"to a single memory location (an expanded tensor); clone() it first"
        )


def _refuse_a_view_in_the_graph(t, who: str) -> None:
    """A recorded in-place op on ``t``, a torch view, while another tensor of its memory is not a detached alias: torch
    would rebuild that tensor's history (CopySlices); minitape refuses."""
    storage = t._aliases
    if storage is None or id(t) not in storage.views:
        return
    for m in storage.members:
        if m is not t and (id(m) in storage.views or m._node is not None or needs_grad(m) or m is _base_of(t)):
            raise RuntimeError(
                f"{who}: tensor #{t.id} (shape {t.shape}) is a view sharing memory with tensor #{m.id} (shape "
                f"{m.shape}); a recorded in-place op on it would change #{m.id} without giving it a history (torch "
                f"rebuilds it; minitape refuses). Write to the base itself (base[idx] = v), work on a .clone(), or "
                f"update under no_grad"
            )


@functools.cache
def _stale_op():
    """The op of a stale view's node: its version check (-1 recorded) always raises, naming it and the tensor."""
    from .registry import Op

    def unreachable(g, ans, view):  # pragma: no cover -- the node's version check raises before any rule runs
        raise AssertionError("a stale view's node was differentiated")

    return Op(
        "view_changed_by_an_inplace_write (recompute it after the in-place op; torch regenerates its history)",
        family="engine",
        inputs=("view",),
        forward=lambda view: view,
        vjps=(unreachable,),
    )


def _base_of(t):
    """The tensor a view ``t`` was made from, when its node still says so (None otherwise)."""
    node = t._node
    return None if node is None or not node.inputs else node.inputs[0]


def _stale_views(t) -> None:
    """After a recorded write into ``t``'s memory, the other torch views of it and the members with a history hold
    values their history no longer computes: each gets a node that raises if a backward reaches it (its uses
    recorded before the write keep their own node). Detached aliases stay constants, as in torch."""
    from .recording import Node, next_node_index
    from .tensors import Tensor

    storage = t._aliases
    for m in storage.members:
        if m is t or not (id(m) in storage.views or m._node is not None):
            continue
        stand_in = Tensor._wrap(np.broadcast_to(np.empty((), m.dtype), m.shape))
        stand_in.id = m.id
        node = Node()
        node.op, node.attrs, node._needs, node.parents, node.leaves = _stale_op(), {}, (True,), (None,), (None,)
        node.inputs, node.versions, node.residuals = (stand_in,), (-1,), ((stand_in._data,), stand_in._data, None)
        node.seq_lens, node.siblings, node.trace, node.out_id, node.index = (), None, None, m.id, next_node_index()
        m._node, m._requires_grad = node, True


def apply_inplace(op, t, args: tuple, kwargs: dict, who: str, position: int = 0):
    """THE in-place op: ``op`` called with ``args`` (``t``'s old value at ``position``) as eager calls it, its result
    written into ``t``; when it recorded a node, ``t``'s history moves onto it (torch's rebase). Returns ``t``."""
    check_target(t, who)
    for tape in STATE.recording_tapes:
        if not getattr(tape, "records_inplace", False) and tape.has_seen(t):
            raise RuntimeError(
                f"{who}: an ExecutionTape is recording tensor #{t.id}, and a recorded op list cannot replay an "
                f"in-place change of it; use the out-of-place op while recording"
            )
    tracer = STATE.tracer
    if tracer is not None:  # a compiled step: run the rest of fn eagerly, and keep no plan of it
        tracer.materialize()
        tracer.keep_plan = False
    recording = STATE.grad_enabled and (
        needs_grad(t) or any(needs_grad(a) for a in (*args, *kwargs.values()) if _is_tensor(a))
    )
    old = t
    if recording:
        _refuse_a_view_in_the_graph(t, who)
        old = _snapshot(t)
    call = [old if a is t else a for a in args]  # t read twice (``y.mul_(y)``): both are its old value
    call[position] = old
    result = op(*call, **{k: old if v is t else v for k, v in kwargs.items()})
    array = result._data
    if array.shape != t.shape:
        raise RuntimeError(
            f"{who}: the result has shape {array.shape}, which does not fit tensor #{t.id} of shape {t.shape} (an "
            f"in-place op cannot change its tensor's shape; broadcasting may only grow the other operands)"
        )
    if array.dtype != t.dtype and not np.can_cast(array.dtype, t.dtype, "same_kind"):
        raise RuntimeError(
            f"{who}: result type {array.dtype} can't be cast to the desired output type {t.dtype} of tensor #{t.id}"
        )
    write(t, array.copy() if result._aliases is not None else array)  # a view's values, never its memory
    if recording and shared(t):
        _stale_views(t)
    if recording and result._node is not None:
        node = result._node
        node.out_id = t.id
        t._node, t._requires_grad = node, True
    return t


def _snapshot(t):
    """``t``'s current value and history as a tensor of its own, for the in-place op's node to save: nothing can write
    it (a copy of the values when others see t's memory)."""
    from .tensors import Tensor

    array = t._data
    if shared(t):
        array = array.copy()
        _keep_saved_output(t)
    old = Tensor._wrap(array, t._node)
    old._requires_grad = t._requires_grad
    old._version = 0
    return old


def _is_tensor(x) -> bool:
    from .tensors import Tensor

    return isinstance(x, Tensor)


def set_data(t, value) -> None:
    """``Tensor.data = value``: a Tensor's memory shared from now on, its dtype and shape taken (torch's; a gradient
    is cast along); an array or a Python number copied, of t's dtype and shape, and written as an in-place op."""
    from .dtypes import check_dtype
    from .tensors import Tensor

    if not isinstance(value, Tensor):
        dtype = t._data.dtype
        array = np.array(value, copy=True)
        if isinstance(value, np.ndarray | np.generic) and array.dtype != dtype:
            raise TypeError(
                f"Tensor.data: expected an array of dtype {dtype}, got {array.dtype}; convert it explicitly "
                f"(minitape never casts silently)"
            )
        check_dtype("Tensor.data", "value", array, value)
        if array.shape != t._data.shape:
            raise ValueError(f"Tensor.data: expected shape {t._data.shape}, got {array.shape}")
        write(t, array.astype(dtype, copy=False))
        return
    array = value._data
    if t._requires_grad and array.dtype.kind != "f":
        raise TypeError(f"Tensor.data: a tensor that requires grad must stay floating, got {array.dtype}")
    grad = t._grad
    if grad is not None and grad.shape != array.shape:
        raise ValueError(
            f"Tensor.data: the new shape {array.shape} differs from .grad's {grad.shape}; set .grad = None"
        )
    if grad is not None and grad.dtype != array.dtype:
        t._grad = Tensor._wrap(grad._data.astype(array.dtype))
    if array is not t._data:
        unlink(t)
        t._data = array
        link(value, t)
    t._version += 1


def owned(out: np.ndarray, arrays) -> np.ndarray:
    """``out``, or a copy of it when it shares memory with an input array: an op that is not one of torch's views
    never hands out an input's memory, so an in-place change of one tensor cannot reach another unseen."""
    if out.base is None and not any(out is a for a in arrays):
        return out
    for a in arrays:
        if a is not None and np.may_share_memory(out, a):
            return out.copy()
    return out


def link_views(tensors, results) -> None:
    """The outputs of a torch view that share an input's memory share its versions too."""
    for r in results:
        for t in tensors:
            if t is not None and np.may_share_memory(r._data, t._data):
                link(t, r, is_view=True)
                break
