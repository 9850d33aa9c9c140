"""Tensor: an immutable numpy array plus the bookkeeping the reverse pass needs.

A tensor's array is read-only: nothing -- neither the user nor an op -- can change a value that a
recorded op saved for its backward. Assigning ``t.data = new`` swaps in a new array and bumps the
tensor's version; a backward through an op that recorded the older version raises instead of returning
a gradient for values that no longer exist.

Dtype rule: floating tensors are float32 or float64. An op whose floating tensor inputs mix float32 and
float64 raises (minitape never up- or down-casts silently); Python scalars and integer arrays adopt the
dtype of the op's floating tensor inputs. ``tensor()`` keeps a numpy array's float dtype, and makes
float32 from Python floats (as torch does).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

from .state import needs_grad

if TYPE_CHECKING:
    from .recording import Node

__all__ = ["Tensor", "tensor", "as_tensor"]

_ids = itertools.count(1)
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


class _UnboundOps:
    """Stands in for the op library until ``ops`` binds itself (``bind_operators``): the first operator used
    imports it. The engine core never imports ``ops`` at load time (ops is built on it)."""

    def __getattr__(self, name):
        import importlib

        importlib.import_module("ops")
        if isinstance(ops, _UnboundOps):
            raise ImportError("importing 'ops' did not bind Tensor's operators")
        return getattr(ops, name)


ops = _UnboundOps()
OPERATOR_OPS = (
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "matmul",
    "neg",
    "abs",
    "getitem",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "sum",
    "mean",
    "max",
    "min",
    "var",
    "std",
    "reshape",
    "flatten",
    "transpose",
    "permute",
    "squeeze",
    "unsqueeze",
    "expand",
    "exp",
    "log",
    "sqrt",
    "tanh",
    "sigmoid",
    "relu",
    "softmax",
    "log_softmax",
    "argmax",
    "clamp",
    "masked_fill",
    "cast",
    "repeat",
)


def bind_operators(library) -> None:
    """The one binding of Tensor's operators and methods to the op library (called by ``ops/__init__``);
    checks that every op they call is there."""
    global ops
    missing = [name for name in OPERATOR_OPS if not callable(getattr(library, name, None))]
    if missing:
        raise ImportError(f"the op library lacks the ops Tensor's operators call: {missing}")
    ops = library


def _readonly(array: np.ndarray) -> np.ndarray:
    """Freeze ``array`` (and the base it views). ``setflags`` is used: far cheaper than ``flags.writeable``."""
    array.setflags(write=False)
    base = array.base
    if base is not None and type(base) is np.ndarray:
        base.setflags(write=False)
    return array


def _exposed(array: np.ndarray) -> np.ndarray:
    """What users get of a tensor's array: always a fresh view -- numpy lets the owner of memory set itself
    writeable again but refuses that for a view of a frozen base, and assigning ``.shape``/``.strides`` to
    the view cannot reshape the array an op saved."""
    return array.view()


class Tensor:
    """A node value in the graph. Create with ``tape.tensor(data, requires_grad=...)``."""

    __slots__ = ("_data", "_requires_grad", "_grad", "_node", "id", "_version", "name", "__weakref__")
    __array_priority__ = 1000  # numpy defers to Tensor's reflected operators

    _data: np.ndarray
    _requires_grad: bool
    _grad: Tensor | None
    _node: Node | None
    id: int
    _version: int
    name: str | None

    def __init__(self, data, requires_grad: bool = False, dtype=None, name: str | None = None):
        try:
            array = np.array(data._data if isinstance(data, Tensor) else data, dtype=dtype, copy=True)
        except ValueError as e:  # ragged nested lists
            raise TypeError(
                f"tensor: expected a rectangular array of real numbers, got {type(data).__name__}: {e}"
            ) from None
        if dtype is None and array.dtype == np.float64 and not isinstance(data, np.ndarray | np.generic):
            array = array.astype(np.float32)  # Python floats -> float32, as in torch
        _check_dtype("tensor", "data", array, data)
        self._data = _readonly(array)
        self._requires_grad = False
        self._grad = None
        self._node = None
        self.id = next(_ids)
        self._version = 0
        self.name = name
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
        return t

    # -- value ---------------------------------------------------------------------------------------------
    @property
    def data(self) -> np.ndarray:
        """The read-only array. Assigning a new array bumps the version (see the module docstring)."""
        return _exposed(self._data)

    @data.setter
    def data(self, value) -> None:
        dtype = self._data.dtype
        if isinstance(value, Tensor | np.ndarray | np.generic):
            array = np.array(value._data if isinstance(value, Tensor) else value, copy=True)
            if array.dtype != dtype:
                raise TypeError(
                    f"Tensor.data: expected an array of dtype {dtype}, got {array.dtype}; convert it "
                    f"explicitly (minitape never casts silently)"
                )
        else:  # Python scalars and lists take the tensor's dtype, as in tensor()
            array = np.array(value, copy=True)
            _check_dtype("Tensor.data", "value", array, value)
            array = array.astype(dtype)
        if array.shape != self._data.shape:
            raise ValueError(f"Tensor.data: expected shape {self._data.shape}, got {array.shape}")
        self._data = _readonly(array)
        self._version += 1

    def numpy(self) -> np.ndarray:
        """The read-only array (copy it with ``np.array(t)`` to get a writable one)."""
        return _exposed(self._data)

    def __array__(self, dtype=None, copy=None):
        if needs_grad(self):
            raise TypeError(
                "this Tensor requires grad, and numpy would silently drop its gradient by converting it to an "
                "array. Call numpy functions on it directly (np.exp(t) runs ops.exp and stays differentiable), or "
                "take the values explicitly with t.detach().numpy() or t.data"
            )
        if dtype is not None and dtype != self._data.dtype:
            return self._data.astype(dtype)
        return self._data.copy() if copy else _exposed(self._data)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return interop.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return interop.array_function(func, args, kwargs)

    # -- copies ----------------------------------------------------------------------------------------------
    def _copy_leaf(self, array, who: str) -> Tensor:
        if self._node is not None:
            raise RuntimeError(
                f"{who}: only leaf tensors (made by the user, not by an op) can be copied; call "
                f".detach() first to copy the values"
            )
        t = Tensor._wrap(array)
        t._requires_grad = self._requires_grad
        t.name = self.name
        return t

    def __copy__(self) -> Tensor:
        """A new leaf with its own identity and version counter, sharing the read-only array."""
        t = self._copy_leaf(self._data, "copy.copy")
        t.grad = self.grad
        return t

    def __deepcopy__(self, memo) -> Tensor:
        """A new leaf with its own identity, version counter and a read-only copy of the array (and grad)."""
        t = self._copy_leaf(self._data.copy(), "copy.deepcopy")
        memo[id(self)] = t
        t.grad = None if self.grad is None else self.grad.__deepcopy__(memo)
        return t

    def __reduce__(self):
        if self._node is not None:
            raise RuntimeError(
                "pickle: only leaf tensors (made by the user, not by an op) can be pickled; call .detach() first"
            )
        return (_unpickle, (np.array(self._data), self._requires_grad, self.name, self.grad))

    def item(self):
        return self._data.item()

    def __float__(self) -> float:
        return float(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    @property
    def shape(self) -> tuple:
        return self._data.shape

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def size(self) -> int:
        return self._data.size

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

    # -- autograd flags ------------------------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        flag = bool(flag)
        if flag and self._data.dtype.kind != "f":
            raise TypeError(
                f"requires_grad=True needs a floating tensor (float32 or float64); this tensor is {self._data.dtype}"
            )
        if not flag and self._node is not None:
            raise ValueError(
                "requires_grad cannot be switched off on a tensor computed by a recorded op; use .detach()"
            )
        self._requires_grad = flag

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def grad_fn(self):
        """The recorded op that produced this tensor (None for leaves)."""
        return self._node

    def detach(self) -> Tensor:
        """The same values, cut from the graph (shares the read-only array)."""
        return Tensor._wrap(self._data)

    def backward(self, grad=None, retain_graph: bool | None = None, create_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into ``.grad`` of every leaf that requires grad. With ``create_graph`` the
        gradients are Tensors whose computation is recorded (differentiable again); ``retain_graph`` defaults
        to ``create_graph``."""
        from .autodiff import backward

        backward([self], None if grad is None else [grad], retain_graph=retain_graph, create_graph=create_graph)

    def zero_grad(self) -> None:
        self.grad = None

    def __repr__(self) -> str:
        body = np.array2string(self._data, separator=", ", precision=4, threshold=20, edgeitems=2)
        extra = f", dtype={self._data.dtype}"
        if self._node is not None:
            extra += f", grad_fn={self._node.op.name}"
        elif self._requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    __hash__ = object.__hash__

    # -- operators (all through the op registry) -----------------------------------------------------------
    def __add__(self, other):
        return ops.add(self, other)

    def __radd__(self, other):
        return ops.add(other, self)

    def __sub__(self, other):
        return ops.sub(self, other)

    def __rsub__(self, other):
        return ops.sub(other, self)

    def __mul__(self, other):
        return ops.mul(self, other)

    def __rmul__(self, other):
        return ops.mul(other, self)

    def __truediv__(self, other):
        return ops.div(self, other)

    def __rtruediv__(self, other):
        return ops.div(other, self)

    def __pow__(self, other):
        return ops.pow(self, other)

    def __rpow__(self, other):
        return ops.pow(other, self)

    def __matmul__(self, other):
        return ops.matmul(self, other)

    def __rmatmul__(self, other):
        return ops.matmul(other, self)

    def __neg__(self):
        return ops.neg(self)

    def __abs__(self):
        return ops.abs(self)

    def __getitem__(self, index):
        return ops.getitem(self, index)

    def __eq__(self, other):
        return ops.eq(self, other)

    def __ne__(self, other):
        return ops.ne(self, other)

    def __lt__(self, other):
        return ops.lt(self, other)

    def __le__(self, other):
        return ops.le(self, other)

    def __gt__(self, other):
        return ops.gt(self, other)

    def __ge__(self, other):
        return ops.ge(self, other)

    def __bool__(self) -> bool:
        return bool(self._data)

    # -- common ops as methods -----------------------------------------------------------------------------
    def sum(self, dim=None, keepdim=False):
        return ops.sum(self, dim=dim, keepdim=keepdim)

    def mean(self, dim=None, keepdim=False):
        return ops.mean(self, dim=dim, keepdim=keepdim)

    def max(self, dim=None, keepdim=False):
        return ops.max(self, dim=dim, keepdim=keepdim)

    def min(self, dim=None, keepdim=False):
        return ops.min(self, dim=dim, keepdim=keepdim)

    def var(self, dim=None, correction=1, keepdim=False):
        return ops.var(self, dim, correction, keepdim)

    def std(self, dim=None, correction=1, keepdim=False):
        return ops.std(self, dim, correction, keepdim)

    def reshape(self, *shape):
        return ops.reshape(self, _shape_args(shape))

    def view(self, *shape):
        return self.reshape(*shape)

    def flatten(self, start_dim=0, end_dim=-1):
        return ops.flatten(self, start_dim=start_dim, end_dim=end_dim)

    def transpose(self, dim0=-2, dim1=-1):
        return ops.transpose(self, dim0, dim1)

    def permute(self, *dims):
        return ops.permute(self, _shape_args(dims))

    def squeeze(self, dim=None):
        return ops.squeeze(self, dim)

    def unsqueeze(self, dim):
        return ops.unsqueeze(self, dim)

    def expand(self, *shape):
        return ops.expand(self, _shape_args(shape))

    def repeat(self, *repeats):
        return ops.repeat(self, _shape_args(repeats))

    def exp(self):
        return ops.exp(self)

    def log(self):
        return ops.log(self)

    def sqrt(self):
        return ops.sqrt(self)

    def tanh(self):
        return ops.tanh(self)

    def sigmoid(self):
        return ops.sigmoid(self)

    def relu(self):
        return ops.relu(self)

    def abs(self):
        return ops.abs(self)

    def softmax(self, dim=-1):
        return ops.softmax(self, dim=dim)

    def log_softmax(self, dim=-1):
        return ops.log_softmax(self, dim=dim)

    def argmax(self, dim=None, keepdim=False):
        return ops.argmax(self, dim=dim, keepdim=keepdim)

    def clamp(self, min=None, max=None):
        return ops.clamp(self, min=min, max=max)

    def masked_fill(self, mask, value):
        return ops.masked_fill(self, mask, value)

    def to(self, dtype):
        return ops.cast(self, dtype)

    def float(self):
        return ops.cast(self, np.float32)

    def double(self):
        return ops.cast(self, np.float64)

    @property
    def T(self):
        return ops.permute(self, tuple(reversed(range(self.ndim))))


def _unpickle(array, requires_grad, name, grad) -> Tensor:
    """A pickled tensor comes back as a new leaf: its own identity and version counter, a read-only array."""
    t = Tensor._wrap(array)
    t._requires_grad = requires_grad
    t.name = name
    t.grad = grad
    return t


def _check_dtype(who: str, argument: str, array: np.ndarray, value) -> None:
    """Refuse data minitape cannot compute with: complex, object (ragged lists, huge ints), strings, bytes,
    float16/longdouble."""
    kind = array.dtype.kind
    if kind == "f" and array.dtype not in _FLOATS:
        raise TypeError(
            f"{who}: argument '{argument}' has dtype {array.dtype}; minitape computes in float32 or float64"
        )
    if kind not in "fiub":
        what = {
            "c": "complex numbers",
            "O": "Python objects (a ragged list, or an int beyond int64?)",
            "U": "strings",
            "S": "bytes",
            "V": "structured records",
            "M": "datetimes",
            "m": "timedeltas",
        }
        raise TypeError(
            f"{who}: argument '{argument}' expected real numbers (bool, int or float), got "
            f"{what.get(kind, array.dtype)} ({type(value).__name__} of dtype {array.dtype})"
        )


from . import interop  # noqa: E402,I001  -- numpy's protocols on Tensor; interop reads Tensor from this module


def _shape_args(args: tuple):
    """``t.reshape(2, 3)`` and ``t.reshape((2, 3))`` both mean the shape (2, 3)."""
    return args[0] if len(args) == 1 and not isinstance(args[0], int) else args


def tensor(data, requires_grad: bool = False, dtype=None, name: str | None = None) -> Tensor:
    """Make a leaf tensor from array-like data (always copies)."""
    return Tensor(data, requires_grad=requires_grad, dtype=dtype, name=name)


def as_tensor(value, dtype=None) -> Tensor:
    """``value`` itself when it is a Tensor, else a constant tensor (no grad) holding a copy of it (the
    caller's array is never frozen or shared)."""
    if isinstance(value, Tensor):
        return value
    try:
        array = np.array(value, dtype=dtype, copy=True)
    except ValueError as e:  # ragged nested lists
        raise TypeError(
            f"as_tensor: expected a rectangular array of real numbers, got {type(value).__name__}: {e}"
        ) from None
    _check_dtype("as_tensor", "value", array, value)
    if dtype is None and array.dtype == np.float64 and not isinstance(value, np.ndarray | np.generic):
        array = array.astype(np.float32)
    return Tensor._wrap(array)
