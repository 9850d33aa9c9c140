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
OPERATOR_OPS = (  # the ops Tensor's operators and explicitly written methods call (``_OpMethod`` adds its own)
    "floor_divide",
    "remainder",
    "logical_not",
    "logical_and",
    "logical_or",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "polygamma",
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
    "max",
    "min",
    "maximum",
    "minimum",
    "median",
    "median_dim",
    "where",
    "scatter",
    "reshape",
    "permute",
    "expand",
    "repeat",
    "tile",
    "flip",
    "cast",
)
METHOD_OPS: list[str] = []  # the ops ``_OpMethod`` attributes of Tensor stand for


def bind_operators(library) -> None:
    """The one binding of Tensor's operators and methods to the op library (called by ``ops/__init__``);
    checks that every op they call is there."""
    global ops
    missing = [name for name in (*OPERATOR_OPS, *METHOD_OPS) if not callable(getattr(library, name, None))]
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


def _is_bool(value) -> bool:
    """True for a bool tensor, array or Python bool."""
    dtype = getattr(value, "dtype", None)
    return isinstance(value, bool | np.bool_) or (dtype is not None and np.dtype(dtype) == np.bool_)


def _bitwise(logical, bitwise, a, b):
    """torch's ``a & b`` (and | ^): the logical op when both are bool, else the bitwise op."""
    return logical(a, b) if _is_bool(a) and _is_bool(b) else bitwise(a, b)


class _OpMethod:
    """A Tensor method that *is* a registered op applied to the tensor: ``t.cumsum(1)`` calls ``ops.cumsum(t, 1)``,
    with the same arguments, positional or keyword, so no method re-implements its op (``name = _OpMethod()`` in
    the class body; ``_OpMethod("inv")`` where torch's method name is not the op's). Ops declaring
    ``outputs=("values", "indices")`` (sort, topk, ...) return ``ValuesIndices`` themselves."""

    def __init__(self, op_name: str | None = None):
        self.op_name = op_name

    def __set_name__(self, owner, name: str) -> None:
        self.op_name = self.op_name or name
        METHOD_OPS.append(self.op_name)

    def __get__(self, tensor, owner=None) -> Any:
        if tensor is None:
            return self
        op = getattr(ops, str(self.op_name))
        return functools.partial(op, tensor)


class ValuesIndices(NamedTuple):
    """(values, indices), as torch's max / min / median along a dim, sort, topk, kthvalue, cummax and cummin
    return them (torch.return_types): unpack it, index it or read ``.values`` and ``.indices``. The ops that
    declare ``outputs=("values", "indices")`` return it (tape/registry.py), and so do their Tensor methods."""

    values: Tensor
    indices: Tensor


def _whole_or_along(whole, along, tensor, dim, keepdim):
    """torch's Tensor.median: the one value of every entry without ``dim`` (``whole``), or the
    (values, indices) along ``dim`` (``along``)."""
    if dim is None:
        if keepdim:
            raise TypeError("keepdim=True needs a dim (torch's max / min / median take keepdim only with a dim)")
        return whole(tensor)
    return along(tensor, dim, keepdim)


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

    def clone(self) -> Tensor:
        """A copy that stays in the graph (ops.clone): its gradient flows back to this tensor."""
        return ops.clone(self)

    def type_as(self, other: Tensor) -> Tensor:
        """This tensor cast to ``other``'s dtype (ops.cast)."""
        return ops.cast(self, other.dtype)

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

    def __floordiv__(self, other):
        return ops.floor_divide(self, other)

    def __rfloordiv__(self, other):
        return ops.floor_divide(other, self)

    def __mod__(self, other):
        return ops.remainder(self, other)

    def __rmod__(self, other):
        return ops.remainder(other, self)

    def __pos__(self):
        return self

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
        if self._data.size != 1:  # numpy's and torch's rule: the truth of several (or no) values is ambiguous
            raise ValueError(f"bool() of a Tensor with {self._data.size} values is ambiguous; use .any() or .all()")
        return bool(self._scalar("bool"))

    # ~ & | ^ are torch's logical operators on bool tensors and its bitwise ones on integers (a bool with an
    # integer is bitwise); << >> shift integers. Floating operands are refused by the bitwise ops, naming them.
    def __invert__(self):
        return ops.logical_not(self) if _is_bool(self) else ops.bitwise_not(self)

    def __and__(self, other):
        return _bitwise(ops.logical_and, ops.bitwise_and, self, other)

    def __rand__(self, other):
        return _bitwise(ops.logical_and, ops.bitwise_and, other, self)

    def __or__(self, other):
        return _bitwise(ops.logical_or, ops.bitwise_or, self, other)

    def __ror__(self, other):
        return _bitwise(ops.logical_or, ops.bitwise_or, other, self)

    def __xor__(self, other):
        return _bitwise(ops.logical_xor, ops.bitwise_xor, self, other)

    def __rxor__(self, other):
        return _bitwise(ops.logical_xor, ops.bitwise_xor, other, self)

    def __lshift__(self, other):
        return ops.bitwise_left_shift(self, other)

    def __rlshift__(self, other):
        return ops.bitwise_left_shift(other, self)

    def __rshift__(self, other):
        return ops.bitwise_right_shift(self, other)

    def __rrshift__(self, other):
        return ops.bitwise_right_shift(other, self)

    # -- ops as methods: each is the op, called with the tensor first ----------------------------------------
    # reductions and scans
    sum = _OpMethod()
    mean = _OpMethod()
    var = _OpMethod()
    std = _OpMethod()
    prod = _OpMethod()
    logsumexp = _OpMethod()
    argmax = _OpMethod()
    argmin = _OpMethod()
    amax = _OpMethod()
    amin = _OpMethod()
    norm = _OpMethod()
    any = _OpMethod()
    all = _OpMethod()
    count_nonzero = _OpMethod()
    cumsum = _OpMethod()
    cumprod = _OpMethod()
    logcumsumexp = _OpMethod()
    cummax = _OpMethod()
    cummin = _OpMethod()
    # sorting and selection
    sort = _OpMethod()
    argsort = _OpMethod()
    topk = _OpMethod()
    kthvalue = _OpMethod()
    # elementwise
    exp = _OpMethod()
    log = _OpMethod()
    sqrt = _OpMethod()
    tanh = _OpMethod()
    sigmoid = _OpMethod()
    relu = _OpMethod()
    abs = _OpMethod()
    neg = _OpMethod()
    sign = _OpMethod()
    square = _OpMethod()
    expm1 = _OpMethod()
    exp2 = _OpMethod()
    log2 = _OpMethod()
    log10 = _OpMethod()
    log1p = _OpMethod()
    rsqrt = _OpMethod()
    reciprocal = _OpMethod()
    sin = _OpMethod()
    cos = _OpMethod()
    tan = _OpMethod()
    asin = _OpMethod()
    acos = _OpMethod()
    atan = _OpMethod()
    sinh = _OpMethod()
    cosh = _OpMethod()
    asinh = _OpMethod()
    acosh = _OpMethod()
    atanh = _OpMethod()
    erf = _OpMethod()
    erfc = _OpMethod()
    erfinv = _OpMethod()
    floor = _OpMethod()
    ceil = _OpMethod()
    trunc = _OpMethod()
    round = _OpMethod()
    frac = _OpMethod()
    clamp = _OpMethod()
    nan_to_num = _OpMethod()
    isinf = _OpMethod()
    isnan = _OpMethod()
    isfinite = _OpMethod()
    logical_not = _OpMethod()
    deg2rad = _OpMethod()
    rad2deg = _OpMethod()
    sgn = _OpMethod()
    signbit = _OpMethod()
    positive = _OpMethod()
    isposinf = _OpMethod()
    isneginf = _OpMethod()
    isreal = _OpMethod()
    frexp = _OpMethod()
    fix = _OpMethod("trunc")
    absolute = _OpMethod("abs")
    negative = _OpMethod("neg")
    clip = _OpMethod("clamp")
    arcsin = _OpMethod("asin")
    arccos = _OpMethod("acos")
    arctan = _OpMethod("atan")
    arcsinh = _OpMethod("asinh")
    arccosh = _OpMethod("acosh")
    arctanh = _OpMethod("atanh")
    # special functions
    lgamma = _OpMethod()
    digamma = _OpMethod()
    mvlgamma = _OpMethod()
    i0 = _OpMethod()
    sinc = _OpMethod()
    hardshrink = _OpMethod()
    softmax = _OpMethod()
    log_softmax = _OpMethod()
    prelu = _OpMethod()
    # binary
    add = _OpMethod()
    sub = _OpMethod()
    mul = _OpMethod()
    div = _OpMethod()
    pow = _OpMethod()
    maximum = _OpMethod()
    minimum = _OpMethod()
    atan2 = _OpMethod()
    copysign = _OpMethod()
    logaddexp = _OpMethod()
    hypot = _OpMethod()
    remainder = _OpMethod()
    fmod = _OpMethod()
    floor_divide = _OpMethod()
    lerp = _OpMethod()
    isclose = _OpMethod()
    logical_and = _OpMethod()
    logical_or = _OpMethod()
    logical_xor = _OpMethod()
    logaddexp2 = _OpMethod()
    ldexp = _OpMethod()
    fmax = _OpMethod()
    fmin = _OpMethod()
    rsub = _OpMethod()
    heaviside = _OpMethod()
    nextafter = _OpMethod()
    xlogy = _OpMethod()
    multiply = _OpMethod("mul")
    divide = _OpMethod("div")
    true_divide = _OpMethod("div")
    subtract = _OpMethod("sub")
    arctan2 = _OpMethod("atan2")
    greater = _OpMethod("gt")
    greater_equal = _OpMethod("ge")
    less = _OpMethod("lt")
    less_equal = _OpMethod("le")
    not_equal = _OpMethod("ne")
    # bitwise (integer tensors)
    bitwise_and = _OpMethod()
    bitwise_or = _OpMethod()
    bitwise_xor = _OpMethod()
    bitwise_not = _OpMethod()
    bitwise_left_shift = _OpMethod()
    bitwise_right_shift = _OpMethod()
    gcd = _OpMethod()
    lcm = _OpMethod()
    eq = _OpMethod()
    ne = _OpMethod()
    lt = _OpMethod()
    le = _OpMethod()
    gt = _OpMethod()
    ge = _OpMethod()
    matmul = _OpMethod()
    bmm = _OpMethod()
    outer = _OpMethod()
    dot = _OpMethod()
    det = _OpMethod()
    inverse = _OpMethod("inv")
    cholesky = _OpMethod()
    # indexing
    gather = _OpMethod()
    scatter_add = _OpMethod()
    scatter_reduce = _OpMethod()
    index_select = _OpMethod()
    index_add = _OpMethod()
    index_put = _OpMethod()
    take_along_dim = _OpMethod()
    masked_select = _OpMethod()
    masked_fill = _OpMethod()
    # shape and movement
    flatten = _OpMethod()
    transpose = _OpMethod()
    squeeze = _OpMethod()
    unsqueeze = _OpMethod()
    narrow = _OpMethod()
    tril = _OpMethod()
    triu = _OpMethod()
    roll = _OpMethod()
    repeat_interleave = _OpMethod()
    diagonal = _OpMethod()
    diag = _OpMethod()
    diag_embed = _OpMethod()
    split = _OpMethod()
    chunk = _OpMethod()
    unbind = _OpMethod()
    unfold = _OpMethod("unfold_copy")  # Tensor.unfold(dimension, size, step), not F.unfold
    movedim = _OpMethod()
    moveaxis = _OpMethod("movedim")
    swapaxes = _OpMethod()
    swapdims = _OpMethod()
    unflatten = _OpMethod()
    select = _OpMethod()
    view_as = _OpMethod()
    reshape_as = _OpMethod()
    expand_as = _OpMethod()
    broadcast_to = _OpMethod("expand")
    ravel = _OpMethod()
    fliplr = _OpMethod()
    flipud = _OpMethod()
    rot90 = _OpMethod()
    tensor_split = _OpMethod()
    hsplit = _OpMethod()
    vsplit = _OpMethod()
    dsplit = _OpMethod()
    kron = _OpMethod()
    diff = _OpMethod()
    take = _OpMethod()
    index_fill = _OpMethod()
    index_copy = _OpMethod()
    index_reduce = _OpMethod()
    masked_scatter = _OpMethod()
    select_scatter = _OpMethod()
    slice_scatter = _OpMethod()
    diagonal_scatter = _OpMethod()
    argwhere = _OpMethod()
    unique = _OpMethod()
    unique_consecutive = _OpMethod()
    bincount = _OpMethod()
    histc = _OpMethod()

    # -- methods whose torch signature is not the op's -------------------------------------------------------
    def max(self, dim=None, keepdim=False):
        """torch's Tensor.max: ops.max (the largest entry, or with ``dim`` the named (values, indices)); with a
        tensor, the elementwise maximum."""
        return ops.maximum(self, dim) if isinstance(dim, Tensor) else ops.max(self, dim, keepdim)

    def min(self, dim=None, keepdim=False):
        """torch's Tensor.min, as ``max``."""
        return ops.minimum(self, dim) if isinstance(dim, Tensor) else ops.min(self, dim, keepdim)

    def median(self, dim=None, keepdim=False):
        """torch's Tensor.median: the lower median of every entry, or (values, indices) along ``dim``."""
        return _whole_or_along(ops.median, ops.median_dim, self, dim, keepdim)

    nonzero = _OpMethod()

    def polygamma(self, n):
        """torch's Tensor.polygamma(n): ops.polygamma(n, self) (the order comes first in the op, as in torch)."""
        return ops.polygamma(n, self)

    def where(self, condition, other):
        """torch's Tensor.where: ``self`` where ``condition`` holds, else ``other`` (ops.where(condition, self,
        other))."""
        return ops.where(condition, self, other)

    def scatter(self, dim, index, src=None, value=None):
        """torch's Tensor.scatter(dim, index, src) and its number form scatter(dim, index, value)."""
        if isinstance(src, int | float):
            src, value = None, src
        return ops.scatter(self, dim, index, src, value)

    def reshape(self, *shape):
        return ops.reshape(self, _shape_args(shape))

    def view(self, *shape):
        return self.reshape(*shape)

    def permute(self, *dims):
        return ops.permute(self, _shape_args(dims))

    def expand(self, *shape):
        return ops.expand(self, _shape_args(shape))

    def repeat(self, *repeats):
        return ops.repeat(self, _shape_args(repeats))

    def tile(self, *dims):
        return ops.tile(self, _shape_args(dims))

    def flip(self, *dims):
        return ops.flip(self, _shape_args(dims))

    def to(self, dtype):
        return ops.cast(self, dtype)

    def float(self):
        return ops.cast(self, np.float32)

    def double(self):
        return ops.cast(self, np.float64)

    def long(self):
        return ops.cast(self, np.int64)

    def int(self):
        return ops.cast(self, np.int32)

    def short(self):
        return ops.cast(self, np.int16)

    def char(self):
        return ops.cast(self, np.int8)

    def byte(self):
        return ops.cast(self, np.uint8)

    def half(self):
        return ops.cast(self, np.float16)

    def bool(self):
        return ops.cast(self, np.bool_)

    @property
    def T(self):
        return ops.permute(self, tuple(reversed(range(self.ndim))))


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
