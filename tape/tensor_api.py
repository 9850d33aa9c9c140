"""``TensorAPI``, the part of Tensor that is torch's porting surface rather than the engine: conversions to Python
numbers (``item``, ``float()``, ``__index__``), ``size()``/``numel``/``dim``/``tolist``, ``new_full``/``new_zeros``/
``new_ones``, copies and pickling, ``__repr__``, hooks; and how Tensor reaches the op library without importing it
(``OPERATORS``, ``add_method``, the op methods ``_OpMethod``, the library loader). ``Tensor`` (tape/tensors.py)
inherits it; nothing here holds state of its own.
"""

from __future__ import annotations

import dis
import sys
import types
import warnings
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from . import opdoc
from .checks import integer, ints, require_bool
from .state import STATE, needs_grad


def values_leave(t, how: str) -> bool:
    """``t``'s values leave the graph as Python or numpy values (``how``: "item()", "numpy()", ...): each recording
    tape that watches for it is told (tape.onnx.export refuses one computed from an input: it would be baked).
    False (a refusal raises), so that a check can start with it."""
    for tape in STATE.recording_tapes:
        watch = getattr(tape, "values_leave", None)
        if watch is not None:
            watch(t, how)
    return False


if TYPE_CHECKING:
    from .recording import Node
    from .tensors import Tensor

__all__ = ["TensorAPI", "ValuesIndices", "OPERATORS", "add_method", "remove_method", "set_library_loader"]

_STORE_SUBSCR = dis.opmap["STORE_SUBSCR"]


class ValuesIndices(NamedTuple):
    """(values, indices), as torch's max / min / median along a dim, sort, topk, kthvalue, cummax and cummin
    return them (torch.return_types): unpack it, index it or read ``.values`` and ``.indices``. The ops that
    declare ``outputs=("values", "indices")`` return it (tape/registry.py), and so do their Tensor methods."""

    values: Tensor
    indices: Tensor


class _OpMethod:
    """A Tensor method that *is* a registered op applied to the tensor: ``t.cumsum(1)`` calls ``ops.cumsum(t, 1)``,
    with the same arguments, so no method re-implements its op. Made for each op that declares ``method=``."""

    def __init__(self, op):
        self.op = op
        self.op_name = op.name

    # help(Tensor.cumsum), Tensor.cumsum?: the op's generated doc; the class keeps its own
    __doc__ = opdoc.Doc(
        __doc__,
        lambda m: f"Tensor.{m.op.method}: the op {m.op.name}, this tensor its first argument.\n\n{m.op.__doc__}",
    )

    @property
    def __signature__(self):  # inspect.signature(Tensor.cumsum): the op's, the tensor first
        return self.op.__signature__

    def __call__(self, tensor, *args, **kwargs):  # Tensor.cumsum(t, 1), as a plain method
        return self.op(tensor, *args, **kwargs)

    def __get__(self, tensor, owner=None) -> Any:
        if tensor is None:
            return self
        return types.MethodType(self.op, tensor)  # help(t.cumsum) and inspect.signature(t.cumsum) see the op


class TensorAPI:
    """Tensor's torch-porting methods (see the module docstring); every one reads the tensor through its fields."""

    __slots__ = ()
    if TYPE_CHECKING:
        _data: np.ndarray
        _requires_grad: bool
        _node: Node | None
        _grad: Tensor | None
        id: int
        name: str | None

        # Python's operators are the op library's (ops/_tensor.py sets them when it loads), so checkers see no
        # definition of them; their types (== and != stay object's: a checker needs them to give bool):
        def __add__(self, other: Any) -> Tensor: ...
        def __radd__(self, other: Any) -> Tensor: ...
        def __sub__(self, other: Any) -> Tensor: ...
        def __rsub__(self, other: Any) -> Tensor: ...
        def __mul__(self, other: Any) -> Tensor: ...
        def __rmul__(self, other: Any) -> Tensor: ...
        def __truediv__(self, other: Any) -> Tensor: ...
        def __rtruediv__(self, other: Any) -> Tensor: ...
        def __floordiv__(self, other: Any) -> Tensor: ...
        def __rfloordiv__(self, other: Any) -> Tensor: ...
        def __mod__(self, other: Any) -> Tensor: ...
        def __rmod__(self, other: Any) -> Tensor: ...
        def __pow__(self, other: Any) -> Tensor: ...
        def __rpow__(self, other: Any) -> Tensor: ...
        def __matmul__(self, other: Any) -> Tensor: ...
        def __rmatmul__(self, other: Any) -> Tensor: ...
        def __and__(self, other: Any) -> Tensor: ...
        def __rand__(self, other: Any) -> Tensor: ...
        def __or__(self, other: Any) -> Tensor: ...
        def __ror__(self, other: Any) -> Tensor: ...
        def __xor__(self, other: Any) -> Tensor: ...
        def __rxor__(self, other: Any) -> Tensor: ...
        def __lt__(self, other: Any) -> Tensor: ...
        def __le__(self, other: Any) -> Tensor: ...
        def __gt__(self, other: Any) -> Tensor: ...
        def __ge__(self, other: Any) -> Tensor: ...
        def __neg__(self) -> Tensor: ...
        def __abs__(self) -> Tensor: ...
        def __invert__(self) -> Tensor: ...

        @property
        def shape(self) -> tuple: ...
        @property
        def dtype(self) -> np.dtype: ...
        @property
        def ndim(self) -> int: ...
        @property
        def requires_grad(self) -> bool: ...
        @requires_grad.setter
        def requires_grad(self, flag: bool) -> None: ...
        def __getitem__(self, index) -> Tensor: ...

    # -- copies and pickling: a new leaf with its own identity and version counter --------------------------
    def _copy_leaf(self, array, who: str) -> Tensor:
        if self._node is not None:
            raise RuntimeError(
                f"{who}: only leaf tensors (made by the user, not by an op) can be copied; call "
                f".detach() first to copy the values"
            )
        from .tensors import _unpickle

        return _unpickle(array, self._requires_grad, self.name, None)

    def __copy__(self) -> Tensor:
        """A new leaf with its own identity, version counter and values (an in-place change of one is not seen by
        the other); the gradient is shared."""
        t = self._copy_leaf(self._data.copy(), "copy.copy")
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
        from .tensors import _unpickle  # where pickles made before TensorAPI existed name it too

        return (_unpickle, (np.array(self._data), self._requires_grad, self.name, self.grad))

    # -- Python numbers and lists ---------------------------------------------------------------------------
    def item(self):
        """The one value as a Python number: an explicit exit from the graph, as torch's."""
        return self._scalar("item").item()

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __bool__(self) -> bool:
        if self._data.size != 1:  # numpy's and torch's rule: the truth of several (or no) values is ambiguous
            raise ValueError(f"bool() of a Tensor with {self._data.size} values is ambiguous; use .any() or .all()")
        return bool(self._scalar("bool"))

    def _scalar(self, who: str) -> np.ndarray:
        """The one value of a one-element tensor of any rank, as 0-d (torch's float(), int(), bool(), item())."""
        if self._data.size != 1:
            raise ValueError(
                f"{who}() of a Tensor: only one-element tensors convert to a Python scalar, got shape {self.shape}"
            )
        values_leave(self, f"{who}()")
        frame = sys._getframe(2)  # numpy reads ``arr[i] = t`` through float()/int(); a user's float(t) is a call
        if needs_grad(self) and frame is not None and frame.f_code.co_code[frame.f_lasti] == _STORE_SUBSCR:
            raise TypeError(
                "this Tensor requires grad, and assigning it into a numpy array (arr[i] = t) would silently drop "
                "its gradient. Build the result with ops (ops.stack, ops.index_put, ops.where), or assign the "
                "value explicitly: arr[i] = t.item()"
            )
        return self._data.reshape(())

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

    def tolist(self):
        """The values as (nested) Python numbers: an explicit exit from the graph, as torch's."""
        values_leave(self, "tolist()")
        return self._data.tolist()

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    # -- torch's shape queries -------------------------------------------------------------------------------
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

    def contiguous(self, memory_format=None) -> Tensor:
        """The tensor itself: minitape has no memory layout to make contiguous (torch returns ``self`` when it
        already is); ``view`` works on every tensor."""
        return self  # type: ignore[return-value]

    def is_contiguous(self, memory_format=None) -> bool:
        """True: as ``contiguous()`` says, every tensor is usable as a contiguous one here."""
        return True

    def __pos__(self):
        return self

    # -- new leaves ------------------------------------------------------------------------------------------
    def new_full(self, size, fill_value, *, dtype=None, requires_grad: bool = False, **device) -> Tensor:
        """A new leaf of shape ``size`` filled with ``fill_value``, of this tensor's dtype unless ``dtype``
        says otherwise (torch's; the new tensor is not in the graph). ``device=`` / ``pin_memory=``: the CPU."""
        from .devices import device_arguments
        from .tensors import Tensor

        device_arguments("Tensor.new_full", device)
        require_bool("Tensor.new_full", "requires_grad", requires_grad)
        shape = ints("Tensor.new_full", "size", size, at_least=0)
        return Tensor(
            np.full(shape, fill_value, dtype=self.dtype if dtype is None else dtype), requires_grad=requires_grad
        )

    def new_zeros(self, *size, dtype=None, requires_grad: bool = False, **device) -> Tensor:
        """``new_full(size, 0)``; the size as separate ints or one sequence, as torch's."""
        return self.new_full(_shape_args(size), 0, dtype=dtype, requires_grad=requires_grad, **device)

    def new_ones(self, *size, dtype=None, requires_grad: bool = False, **device) -> Tensor:
        """``new_full(size, 1)``; the size as separate ints or one sequence, as torch's."""
        return self.new_full(_shape_args(size), 1, dtype=dtype, requires_grad=requires_grad, **device)

    # -- gradient conveniences -------------------------------------------------------------------------------
    @property
    def grad(self):
        """The accumulated gradient (a Tensor of this tensor's shape and dtype), or None. Read on a non-leaf that
        does not ``retain_grad()``, it warns as torch does: a backward never fills it."""
        if self._node is not None and not self.retains_grad:
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute "
                "won't be populated during backward(). If you indeed want the .grad field to be populated for a "
                "non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by "
                "mistake, make sure you access the leaf Tensor instead.",
                UserWarning,
                stacklevel=2,
            )
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        from .tensors import Tensor

        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"Tensor.grad: expected a Tensor or None, got {type(value).__name__}")
            if value.shape != self._data.shape:
                raise ValueError(f"Tensor.grad: expected shape {self._data.shape}, got {value.shape}")
            if value.dtype != self._data.dtype:
                raise TypeError(f"Tensor.grad: expected dtype {self._data.dtype}, got {value.dtype}")
        self._grad = value  # type: ignore[misc]  # a slot of Tensor, the class that has this setter

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` and return the tensor, as torch's."""
        require_bool("Tensor.requires_grad_", "requires_grad", requires_grad)
        self.requires_grad = requires_grad
        return self  # type: ignore[return-value]

    def register_hook(self, hook):
        """``hook(grad)`` is called with this tensor's total gradient whenever a reverse pass reaches it, before the
        gradient flows on or is accumulated into ``.grad``; a Tensor it returns replaces the gradient. Returns a
        handle whose ``remove()`` unregisters the hook (torch's)."""
        from .hooks import register_hook

        return register_hook(self, hook)

    def retain_grad(self) -> None:
        """Keep the gradient of this non-leaf tensor in ``.grad`` after backward (a leaf already does), as torch's."""
        from .hooks import retain_grad

        retain_grad(self)

    @property
    def retains_grad(self) -> bool:
        """Whether ``retain_grad()`` was called on this non-leaf tensor."""
        from .hooks import HOOKS

        entry = HOOKS.get(self.id)
        return entry is not None and entry.retained is not None

    def __repr__(self) -> str:
        body = np.array2string(self._data, separator=", ", **PRINT_OPTIONS)
        extra = f", dtype={self._data.dtype}"
        if self._node is not None:
            extra += f", grad_fn={self._node.op.name}"
        elif self._requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    def __getattr__(self, name: str) -> Any:
        """Called only for an attribute Tensor lacks. Its op methods (``t.sum()``) and the methods whose torch
        signature is not one op's (``t.reshape(2, 3)``) come from the op library, loaded on first use."""
        if not name.startswith("_") and _load_library():
            return getattr(self, name)
        raise AttributeError(f"'Tensor' object has no attribute '{name}'{_missing_hint(name)}")


_PRINT_DEFAULTS: dict[str, Any] = {
    "precision": 4,
    "threshold": 20,
    "edgeitems": 2,
    "max_line_width": 75,
    "suppress_small": False,
}
PRINT_OPTIONS: dict[str, Any] = dict(_PRINT_DEFAULTS)  # how repr(tensor) shows values (numpy's array2string options)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """torch.set_printoptions: digits, the element count from which a tensor is summarised, the items shown at
    each end when it is, the line width, and ``sci_mode=False`` (no scientific notation); ``profile='default'``
    first restores minitape's defaults ('short': 2 digits, 'full': every element)."""
    if profile is not None:
        if profile not in ("default", "short", "full"):
            raise ValueError(
                f"set_printoptions: argument 'profile' expected 'default', 'short' or 'full', got {profile!r}"
            )
        PRINT_OPTIONS.update(_PRINT_DEFAULTS)
        PRINT_OPTIONS.update({"short": {"precision": 2}, "full": {"threshold": sys.maxsize}}.get(profile, {}))
    given = {"precision": precision, "threshold": threshold, "edgeitems": edgeitems, "max_line_width": linewidth}
    PRINT_OPTIONS.update({k: v for k, v in given.items() if v is not None})
    if sci_mode is not None:
        PRINT_OPTIONS["suppress_small"] = not sci_mode


class _SizeMethod:
    """``t.size`` uncalled: torch's method, bound to ``t``. Calling it gives the shape or one extent. Every use
    as a number (``t.size == 0``, ``if t.size``, ``n * t.size``, ``range(t.size)``) raises: code written for
    numpy's meaning (the element count) would otherwise compare a method with a number and be silently wrong."""

    __slots__ = ("_tensor",)

    def __init__(self, tensor: TensorAPI):
        self._tensor = tensor

    def __call__(self, dim: int | None = None):
        shape = self._tensor.shape
        if dim is None:
            return shape
        dim = integer("Tensor.size", "dim", dim)
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


def _shape_args(args: tuple):
    """``t.reshape(2, 3)`` and ``t.reshape((2, 3))`` both mean the shape (2, 3)."""
    return args[0] if len(args) == 1 and not isinstance(args[0], int) else args


# -- the op library's side of Tensor -----------------------------------------------------------------------------
# Python's operator protocol: the op library gives each its op (ops/_tensor.py); until it is loaded, each loads it
OPERATORS = (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
    "__pow__", "__rpow__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__matmul__", "__rmatmul__",
    "__neg__", "__abs__", "__getitem__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
    "__invert__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__",
    "__lshift__", "__rlshift__", "__rshift__", "__rrshift__", "__setitem__",
    "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
    "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__",
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
        method = getattr(type(self), name)
        if method is operator:
            raise TypeError(f"Tensor operator {name}: the op library (import ops) has not installed it")
        return method(self, *args)

    operator.__name__ = name
    return operator


def own_attribute(name: str):
    """Tensor's own attribute ``name`` (its class's or ``TensorAPI``'s), or None; the operator stand-ins above are
    not Tensor's own."""
    from .tensors import Tensor

    current = next((vars(c)[name] for c in Tensor.__mro__[:-1] if name in vars(c)), None)
    return None if getattr(current, "_until_loaded", False) else current


def add_method(name: str, method) -> None:
    """Give Tensor the method or operator ``name`` (a function, property or ``_OpMethod``): the op library's
    (``defop(..., method=...)`` and ops/_tensor.py). A name Tensor has of its own is refused."""
    from .tensors import Tensor

    current = own_attribute(name)
    if current is not None:
        raise ValueError(f"Tensor already has '{name}' ({current!r}); an op's method needs a name of its own")
    if callable(method) and hasattr(method, "__code__"):  # a plain function: help() and tracebacks say Tensor.name
        method.__name__, method.__qualname__ = name, f"Tensor.{name}"
    setattr(Tensor, name, method)


def remove_method(name: str, method) -> None:
    """Undo ``add_method(name, method)`` (for ops unregistered again); another owner's ``name`` is left alone."""
    from .tensors import Tensor

    if Tensor.__dict__.get(name) is method:
        delattr(Tensor, name)


for _name in OPERATORS:
    _stub = _until_loaded(_name)
    _stub._until_loaded = True
    setattr(TensorAPI, _name, _stub)
