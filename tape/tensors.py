"""Tensor: a numpy array plus the bookkeeping the reverse pass needs.

A tensor's array is read-only at rest: only an in-place op (tape/inplace.py) changes it, moving the version of every
tensor sharing that memory (views, ``.data``, ``detach()``); a backward through an op that recorded an older version
raises. Dtype rules: tape/dtypes.py; torch's porting surface (``size()``, ``item()``, copies, pickling, the op
methods): ``TensorAPI`` in tape/tensor_api.py.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

from .checks import require_bool
from .dtypes import array_from
from .state import needs_grad
from .tensor_api import TensorAPI

if TYPE_CHECKING:
    from .inplace import Storage
    from .recording import Node

__all__ = ["Tensor", "tensor", "as_tensor"]

_ids = itertools.count(1)


def _readonly(array: np.ndarray) -> np.ndarray:
    """Freeze ``array`` (and the base it views). ``setflags`` is used: far cheaper than ``flags.writeable``."""
    array.setflags(write=False)
    base = array.base
    if base is not None and type(base) is np.ndarray:
        base.setflags(write=False)
    return array


class Tensor(TensorAPI):
    """A node value in the graph. Create with ``tape.tensor(data, requires_grad=...)``."""

    __slots__ = ("_data", "_requires_grad", "_grad", "_node", "id", "_version", "name", "_aliases", "__weakref__")
    __array_priority__ = 1000  # numpy defers to Tensor's reflected operators

    _data: np.ndarray
    _requires_grad: bool
    _grad: Tensor | None
    _node: Node | None
    id: int
    _version: int
    name: str | None
    _aliases: Storage | None  # the tensors sharing this memory (tape/inplace.py), None while it is this one's alone

    def __init__(self, data, requires_grad: bool = False, dtype=None, name: str | None = None):
        array = array_from("tensor", "data", data._data if isinstance(data, Tensor) else data, dtype)
        self._data = _readonly(array)
        self._requires_grad = False
        self._grad = None
        self._node = None
        self.id = next(_ids)
        self._version = 0
        self.name = name
        self._aliases = None
        self.requires_grad = requires_grad

    @classmethod
    def _wrap(cls, array: np.ndarray, node=None) -> Tensor:
        """Fast path for op outputs: no copy, no validation."""
        t = cls.__new__(cls)
        t._data = _readonly(array)
        t._requires_grad = node is not None
        t._grad = None
        t._node = node
        t.id = next(_ids)
        t._version = 0
        t.name = None
        t._aliases = None
        return t

    # -- value -------------------------------------------------------------------------------------------------
    @property
    def data(self) -> Tensor:
        """``detach()`` (torch's ``.data``): ``p.data -= lr * g`` changes p and, unlike torch, moves its version."""
        return self.detach()

    @data.setter
    def data(self, value) -> None:
        inplace.set_data(self, value)  # a Tensor's memory, dtype and shape taken (torch's); anything else copied

    def _adopt(self, array: np.ndarray) -> None:
        """Take the values of ``array`` (of this shape and dtype, given away: an optimizer's update) in place."""
        assert array.shape == self._data.shape and array.dtype == self._data.dtype
        inplace.write(self, array)

    def numpy(self) -> np.ndarray:
        """A read-only view that follows in-place changes, as torch's (``np.array(t)`` copies)."""
        return inplace.exported(self)

    def __array__(self, dtype=None, copy=None):
        if needs_grad(self):
            raise TypeError(
                "this Tensor requires grad, and numpy would silently drop its gradient by converting it to an "
                "array. Call numpy functions on it directly (np.exp(t) runs ops.exp and stays differentiable), or "
                "take the values explicitly with t.detach().numpy() or t.data"
            )
        if dtype is not None and dtype != self._data.dtype:
            if copy is False:  # numpy's protocol: copy=False promises no copy, and a cast is one
                raise ValueError(f"Tensor.__array__: dtype {np.dtype(dtype)} needs a copy of the {self.dtype} values")
            return self._data.astype(dtype)
        return self._data.copy() if copy else self.numpy()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return interop.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return interop.array_function(func, args, kwargs)

    @property
    def shape(self) -> tuple:
        return self._data.shape

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    # -- autograd --------------------------------------------------------------------------------------------
    @property
    def grad(self):
        """The accumulated gradient (a Tensor of this tensor's shape and dtype), or None."""
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"Tensor.grad: expected a Tensor or None, got {type(value).__name__}")
            if value.shape != self._data.shape:
                raise ValueError(f"Tensor.grad: expected shape {self._data.shape}, got {value.shape}")
            if value.dtype != self._data.dtype:
                raise TypeError(f"Tensor.grad: expected dtype {self._data.dtype}, got {value.dtype}")
        self._grad = value

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        require_bool("Tensor", "requires_grad", flag)  # a string or an int is refused, not read as truthy
        if flag and self._data.dtype.kind != "f":
            raise TypeError(
                f"requires_grad=True needs a floating tensor (float32 or float64); this tensor is {self._data.dtype}"
            )
        if not flag and self._node is not None:
            raise ValueError(
                "requires_grad cannot be switched off on a tensor computed by a recorded op; use .detach()"
            )
        self._requires_grad = bool(flag)

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def grad_fn(self):
        """The recorded op that produced this tensor (None for leaves)."""
        return self._node

    def detach(self) -> Tensor:
        """The same values, cut from the graph, sharing memory and versions with this tensor, as torch's."""
        return inplace.link(self, Tensor._wrap(self._data))

    def backward(self, grad=None, retain_graph: bool | None = None, create_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into ``.grad`` of every leaf that requires grad. With ``create_graph`` the
        gradients are Tensors whose computation is recorded (differentiable again); ``retain_graph`` defaults
        to ``create_graph``."""
        from .autodiff import backward

        backward([self], None if grad is None else [grad], retain_graph=retain_graph, create_graph=create_graph)

    def zero_grad(self) -> None:
        self.grad = None

    __hash__ = object.__hash__


def _unpickle(array, requires_grad, name, grad) -> Tensor:
    """A pickled (or copied) tensor comes back as a new leaf: its own id and version counter, a read-only array."""
    t = Tensor._wrap(array)
    t._requires_grad, t.name, t.grad = requires_grad, name, grad
    return t


from . import inplace, interop  # noqa: E402,I001  -- numpy's protocols and in-place writes; both read Tensor here


def tensor(data, requires_grad: bool = False, dtype=None, name: str | None = None) -> Tensor:
    """Make a leaf tensor from array-like data (always copies)."""
    return Tensor(data, requires_grad=requires_grad, dtype=dtype, name=name)


def as_tensor(value, dtype=None) -> Tensor:
    """``value`` itself when it is a Tensor, else a constant tensor (no grad) holding a copy of it (the
    caller's array is never frozen or shared)."""
    if isinstance(value, Tensor):
        return value
    return Tensor._wrap(array_from("as_tensor", "value", value, dtype))
