"""Tensor: an immutable numpy array plus the bookkeeping the reverse pass needs.

A tensor's array is read-only: nothing -- neither the user nor an op -- can change a value that a
recorded op saved for its backward. Assigning ``t.data = new`` swaps in a new array and bumps the
tensor's version; a backward through an op that recorded the older version raises instead of returning
a gradient for values that no longer exist.

Dtype rule: floating tensors are float32 or float64 (float16 is a storage dtype: a tensor may hold it, and only
``cast`` -- ``.half()``, ``.float()`` -- takes it as input). An op whose floating tensor inputs mix float32 and
float64 raises (minitape never up- or down-casts silently); Python scalars and integer arrays adopt the
dtype of the op's floating tensor inputs. ``tensor()`` keeps a numpy array's float dtype, and makes
float32 from Python floats (as torch does).
"""

from __future__ import annotations

import dis
import functools
import itertools
import sys
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .state import needs_grad

if TYPE_CHECKING:
    from .recording import Node

__all__ = ["Tensor", "ValuesIndices", "tensor", "as_tensor"]

_ids = itertools.count(1)
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
FLOAT16 = np.dtype(np.float16)  # a storage dtype: only ops.cast takes it (tape/recording.py refuses it elsewhere)
_STORE_SUBSCR = dis.opmap["STORE_SUBSCR"]


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


class _OpMethod:
    """A Tensor method that *is* a registered op applied to the tensor: ``t.cumsum(1)`` calls ``ops.cumsum(t, 1)``,
    with the same arguments, positional or keyword, so no method re-implements its op. Made for each op that
    declares ``method=`` (tape/registry.py). Ops declaring ``outputs=("values", "indices")`` (sort, topk, ...) return
    ``ValuesIndices`` themselves."""

    def __init__(self, op):
        self.op = op
        self.op_name = op.name
        self.__doc__ = f"The op {op.signature} with this tensor as its first argument."

    def __get__(self, tensor, owner=None) -> Any:
        if tensor is None:
            return self
        return functools.partial(self.op, tensor)


class ValuesIndices(NamedTuple):
    """(values, indices), as torch's max / min / median along a dim, sort, topk, kthvalue, cummax and cummin
    return them (torch.return_types): unpack it, index it or read ``.values`` and ``.indices``. The ops that
    declare ``outputs=("values", "indices")`` return it (tape/registry.py), and so do their Tensor methods."""

    values: Tensor
    indices: Tensor


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
        array = _array_from("tensor", "data", data._data if isinstance(data, Tensor) else data, dtype)
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

    def _adopt(self, array: np.ndarray) -> None:
        """``data = array`` without its copy, for an array the caller made and gives away (an optimizer's new
        parameter value): of this tensor's shape and dtype, owning its memory, referred to by nothing else."""
        assert array.shape == self._data.shape and array.dtype == self._data.dtype and array.base is None
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
            if copy is False:  # numpy's protocol: copy=False promises no copy, and a cast is one
                raise ValueError(f"Tensor.__array__: dtype {np.dtype(dtype)} needs a copy of the {self.dtype} values")
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
        """The one value as a Python number: an explicit exit from the graph, as torch's."""
        return self._scalar("item").item()

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def _scalar(self, who: str) -> np.ndarray:
        """The one value of a one-element tensor of any rank, as 0-d (torch's float(), int(), bool(), item())."""
        if self._data.size != 1:
            raise ValueError(
                f"{who}() of a Tensor: only one-element tensors convert to a Python scalar, got shape {self.shape}"
            )
        if needs_grad(self) and _assigned_into_an_array(sys._getframe(2)):
            raise TypeError(
                "this Tensor requires grad, and assigning it into a numpy array (arr[i] = t) would silently drop "
                "its gradient. Build the result with ops (ops.stack, ops.index_put, ops.where), or assign the "
                "value explicitly: arr[i] = t.item()"
            )
        return self._data.reshape(())

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
    def size(self) -> _SizeMethod:
        """torch's method: ``t.size()`` is the shape (a tuple), ``t.size(dim)`` one extent. Numpy's element count
        is ``t.numel()``; using ``t.size`` uncalled as a number raises (see ``_SizeMethod``)."""
        return _SizeMethod(self)

    def numel(self) -> int:
        """The number of elements (numpy's ``array.size``)."""
        return self._data.size

    def dim(self) -> int:
        """The number of dimensions (``ndim``), as torch's."""
        return self.ndim

    ndimension = dim

    def tolist(self):
        """The values as (nested) Python numbers: an explicit exit from the graph, as torch's."""
        return self._data.tolist()

    def __index__(self) -> int:
        """A 0-d integer tensor used as a Python int (``range(t)``, ``seq[t]``). torch takes any one-element
        integer tensor; minitape only 0-d ones: numpy indexes an array with anything that has ``__index__`` as
        a scalar, so ``array[t]`` for a shape-(1,) ``t`` would silently lose its axis."""
        if self._data.dtype.kind not in "iu" or self._data.ndim != 0:
            raise TypeError(
                f"Tensor.__index__: only 0-d integer tensors can be used as an index (take t.reshape(()) or "
                f"t.item() of a one-element tensor), got shape {self.shape} of dtype {self.dtype}"
            )
        return int(self._data.reshape(()))

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

    def register_hook(self, hook):
        """``hook(grad)`` is called with this tensor's total gradient whenever a reverse pass reaches it, before the
        gradient flows on or is accumulated into ``.grad``; a Tensor it returns replaces the gradient. Returns a
        handle whose ``remove()`` unregisters the hook (torch's)."""
        from .autodiff import register_hook

        return register_hook(self, hook)

    def retain_grad(self) -> None:
        """Keep the gradient of this non-leaf tensor in ``.grad`` after backward (a leaf already does), as torch's."""
        from .autodiff import retain_grad

        retain_grad(self)

    @property
    def retains_grad(self) -> bool:
        """Whether ``retain_grad()`` was called on this non-leaf tensor."""
        from .autodiff import HOOKS

        entry = HOOKS.get(self.id)
        return entry is not None and entry.retained is not None

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` and return the tensor, as torch's."""
        self.requires_grad = requires_grad
        return self

    def contiguous(self) -> Tensor:
        """The tensor itself: minitape has no memory layout to make contiguous (torch returns ``self`` when it
        already is)."""
        return self

    def new_full(self, size, fill_value, *, dtype=None, requires_grad: bool = False) -> Tensor:
        """A new leaf of shape ``size`` filled with ``fill_value``, of this tensor's dtype unless ``dtype``
        says otherwise (torch's; the new tensor is not in the graph)."""
        array = np.full(_shape_of("Tensor.new_full", size), fill_value, dtype=self.dtype if dtype is None else dtype)
        return Tensor(array, requires_grad=requires_grad)

    def new_zeros(self, *size, dtype=None, requires_grad: bool = False) -> Tensor:
        """``new_full(size, 0)``; the size as separate ints or one sequence, as torch's."""
        return self.new_full(_shape_args(size), 0, dtype=dtype, requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, requires_grad: bool = False) -> Tensor:
        """``new_full(size, 1)``; the size as separate ints or one sequence, as torch's."""
        return self.new_full(_shape_args(size), 1, dtype=dtype, requires_grad=requires_grad)

    def __repr__(self) -> str:
        body = np.array2string(self._data, separator=", ", precision=4, threshold=20, edgeitems=2)
        extra = f", dtype={self._data.dtype}"
        if self._node is not None:
            extra += f", grad_fn={self._node.op.name}"
        elif self._requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    __hash__ = object.__hash__

    # -- Python's operators (+, *, ==, [] ...) are the op library's (``OPERATORS`` below) ----------------------------
    def __pos__(self):
        return self

    def __bool__(self) -> bool:
        if self._data.size != 1:  # numpy's and torch's rule: the truth of several (or no) values is ambiguous
            raise ValueError(f"bool() of a Tensor with {self._data.size} values is ambiguous; use .any() or .all()")
        return bool(self._scalar("bool"))

    if TYPE_CHECKING:  # Python's operators are the op library's (``OPERATORS`` below); the core itself indexes

        def __getitem__(self, index) -> Tensor: ...

    def __getattr__(self, name: str) -> Any:
        """Called only for an attribute Tensor lacks. Its op methods (``t.sum()``) and the methods whose torch
        signature is not one op's (``t.reshape(2, 3)``) come from the op library, loaded on first use."""
        if not name.startswith("_") and _load_library():
            return getattr(self, name)
        raise AttributeError(f"'Tensor' object has no attribute '{name}'{_missing_hint(name)}")


class _SizeMethod:
    """``t.size`` uncalled: torch's method, bound to ``t``. Calling it gives the shape or one extent. Every use
    as a number (``t.size == 0``, ``if t.size``, ``n * t.size``, ``range(t.size)``) raises: code written for
    numpy's meaning (the element count) would otherwise compare a method with a number and be silently wrong."""

    __slots__ = ("_tensor",)

    def __init__(self, tensor: Tensor):
        self._tensor = tensor

    def __call__(self, dim: int | None = None):
        shape = self._tensor.shape
        if dim is None:
            return shape
        if isinstance(dim, bool) or not isinstance(dim, int | np.integer):
            raise TypeError(f"Tensor.size: argument 'dim' expected an int or None, got {type(dim).__name__}")
        if not -len(shape) <= dim < len(shape):
            raise IndexError(
                f"Tensor.size: argument 'dim' expected a dim in [{-len(shape)}, {len(shape) - 1}] for a tensor of "
                f"shape {shape} (a 0-d tensor has none), got {dim}"
            )
        return shape[dim]

    def __repr__(self) -> str:
        return f"<Tensor.size method of a tensor of shape {self._tensor.shape}>"

    def _refuse(self, *args):
        raise TypeError(
            "Tensor.size is torch's method: call t.size() for the shape or t.size(dim) for one extent; the "
            "element count (numpy's array.size) is t.numel()"
        )

    __bool__ = __int__ = __index__ = __float__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __neg__ = _refuse
    __hash__ = None  # type: ignore[assignment]


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
    if kind == "f" and array.dtype not in _FLOATS and array.dtype != FLOAT16:
        raise TypeError(
            f"{who}: argument '{argument}' has dtype {array.dtype}; minitape computes in float32 or float64 (and "
            f"stores float16)"
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


# -- the op library's side of Tensor -----------------------------------------------------------------------------
# Python's operator protocol: the op library gives each its op (ops/_tensor.py); until it is loaded, each loads it
OPERATORS = (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
    "__pow__", "__rpow__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__matmul__", "__rmatmul__",
    "__neg__", "__abs__", "__getitem__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
    "__invert__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__",
    "__lshift__", "__rlshift__", "__rshift__", "__rrshift__",
)  # fmt: skip
_library: dict[str, Any] = {"load": None, "loaded": False}


def set_library_loader(load) -> None:
    """How Tensor reaches the op library without importing it: ``load()`` imports it (set by ``tape/__init__``,
    which loads the layers above the engine core on first use)."""
    _library["load"] = load


def _load_library() -> bool:
    """Load the op library once; True when this call loaded it (so an attribute may now exist)."""
    if _library["loaded"] or _library["load"] is None:
        return False
    _library["loaded"] = True
    _library["load"]()
    return True


def _missing_hint(name: str) -> str:
    if not _library["loaded"]:
        return " (the op library, which gives Tensor its op methods, is not loaded: import ops)"
    return " (Tensor's op methods are the registered ops that declare method=; python -m tape ops lists the ops)"


def _until_loaded(name: str):
    """Python's operator ``name`` before the op library has installed its own: loads the library, then runs it."""

    def operator(self, *args):
        _load_library()
        method = getattr(Tensor, name)
        if method is operator:
            raise TypeError(f"Tensor operator {name}: the op library (import ops) has not installed it")
        return method(self, *args)

    operator.__name__ = name
    return operator


def add_method(name: str, method) -> None:
    """Give Tensor the method or operator ``name`` (a function, property or ``_OpMethod``): the op library's
    (``defop(..., method=...)`` and ops/_tensor.py). A name Tensor has of its own is refused."""
    current = Tensor.__dict__.get(name)
    if current is not None and not getattr(current, "_until_loaded", False):
        raise ValueError(f"Tensor already has '{name}' ({current!r}); an op's method needs a name of its own")
    if callable(method) and hasattr(method, "__code__"):  # a plain function: help() and tracebacks say Tensor.name
        method.__name__, method.__qualname__ = name, f"Tensor.{name}"
    setattr(Tensor, name, method)


def remove_method(name: str, method) -> None:
    """Undo ``add_method(name, method)`` (for ops unregistered again); another owner's ``name`` is left alone."""
    if Tensor.__dict__.get(name) is method:
        delattr(Tensor, name)


for _name in OPERATORS:
    _stub = _until_loaded(_name)
    _stub._until_loaded = True
    setattr(Tensor, _name, _stub)


from . import interop  # noqa: E402,I001  -- numpy's protocols on Tensor; interop reads Tensor from this module


def _shape_args(args: tuple):
    """``t.reshape(2, 3)`` and ``t.reshape((2, 3))`` both mean the shape (2, 3)."""
    return args[0] if len(args) == 1 and not isinstance(args[0], int) else args


def _shape_of(who: str, size) -> tuple:
    """``size`` (an int or a sequence of ints) as a shape, or a TypeError naming ``who``."""
    shape = (size,) if isinstance(size, int | np.integer) else size
    ok = isinstance(shape, tuple | list) or (isinstance(shape, np.ndarray) and shape.ndim == 1)
    if ok and all(isinstance(n, int | np.integer) and not isinstance(n, bool) and n >= 0 for n in shape):
        return tuple(int(n) for n in shape)
    raise TypeError(f"{who}: argument 'size' expected an int or a sequence of non-negative ints, got {size!r}")


def tensor(data, requires_grad: bool = False, dtype=None, name: str | None = None) -> Tensor:
    """Make a leaf tensor from array-like data (always copies)."""
    return Tensor(data, requires_grad=requires_grad, dtype=dtype, name=name)


def as_tensor(value, dtype=None) -> Tensor:
    """``value`` itself when it is a Tensor, else a constant tensor (no grad) holding a copy of it (the
    caller's array is never frozen or shared)."""
    if isinstance(value, Tensor):
        return value
    return Tensor._wrap(_array_from("as_tensor", "value", value, dtype))


def _array_from(who: str, argument: str, data, dtype) -> np.ndarray:
    """A fresh array of ``data``. What has a dtype (numpy arrays and scalars, torch tensors, anything with
    ``__array__`` or ``__dlpack__``) keeps it; Python floats (also in lists) become float32, as in torch."""
    try:
        if dtype is None and hasattr(data, "__dlpack__") and not hasattr(data, "__array__"):
            data = np.from_dlpack(data)
        with np.errstate(over="ignore"):  # 7e4 as float16 is inf, silently as in torch
            array = np.asarray(data, dtype=dtype)
        if array is data or not array.flags.owndata:  # the caller's array, or a view of its memory: copy
            array = array.copy()
    except (ValueError, TypeError, BufferError) as e:  # ragged nested lists, dtypes numpy lacks (bfloat16)
        raise TypeError(
            f"{who}: argument '{argument}' expected a rectangular array of real numbers, got {type(data).__name__}: {e}"
        ) from None
    _check_dtype(who, argument, array, data)
    if array.dtype == FLOAT16 and array.dtype is not FLOAT16:  # another byte order: the engine's checks use ``is``
        array = array.astype(FLOAT16)
    if dtype is None and array.dtype == np.float64 and _untyped(data):
        array = array.astype(np.float32)
    return array


def _untyped(data) -> bool:
    """True for Python numbers and (nested) lists and tuples of them: values without a dtype of their own."""
    if isinstance(data, list | tuple):
        return all(_untyped(x) for x in data)
    return isinstance(data, bool | int | float) and not isinstance(data, np.generic)


def _assigned_into_an_array(frame) -> bool:
    """True when the Python code running in ``frame`` is an item assignment (``arr[i] = t``): numpy reads the
    value through float()/int()/bool() there, where a user's own float(t) is a call."""
    return frame is not None and frame.f_code.co_code[frame.f_lasti] == _STORE_SUBSCR
