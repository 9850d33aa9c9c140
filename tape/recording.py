"""Applying an op: input coercion, the forward call, and recording.

``apply`` is the single entry point every op call goes through. When any input needs a gradient it
creates a ``Node`` -- the recorded application the reverse pass walks -- and attaches it to the output
tensor; every ExecutionTape that is recording also gets the application appended to its list.

This module also holds the global switches: grad mode (``no_grad`` / ``enable_grad``), anomaly
detection (``detect_anomaly``) and the list of recording tapes.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import traceback

import numpy as np

from .errors import AnomalyError
from .registry import NOT_DIFF
from .tensors import _FLOATS, Tensor, as_tensor

__all__ = ["Node", "apply", "no_grad", "enable_grad", "is_grad_enabled", "detect_anomaly"]


class _State:
    grad_enabled = True
    anomaly = False
    recording_tapes: list = []  # tapes whose is_recording is True, in start order
    watched: set = set()  # ids of tensors watched by a recording GradientTape


STATE = _State()
_node_counter = itertools.count()


class Node:
    """One recorded op application: what the reverse pass needs to send gradients to the op's inputs.

    ``parents[i]`` is the Node that produced input i (None for a leaf or a constant), ``leaves[i]`` the
    input tensor when it is a leaf that needs a gradient, ``needs[i]`` whether input i needs one at all.
    ``saved`` is (input arrays, output array, aux) until a backward without retain_graph frees it;
    ``versions`` are the inputs' versions when recorded (a later ``t.data = ...`` makes backward raise).
    ``index`` grows with every application, so sorting by it is a topological order.
    """

    __slots__ = ("op", "attrs", "needs", "parents", "leaves", "inputs", "versions", "saved", "out_id", "index",
                 "trace", "__weakref__")

    def __init__(self, op, attrs, needs, parents, leaves, inputs, saved):
        self.op = op
        self.attrs = attrs
        self.needs = needs
        self.parents = parents
        self.leaves = leaves
        self.inputs = inputs  # the input tensors, to check their versions; released with ``saved``
        self.versions = [0 if t is None else t._version for t in inputs]
        self.saved = saved
        self.out_id = 0
        self.index = next(_node_counter)
        self.trace = None

    def __repr__(self) -> str:
        return f"<node #{self.index} {self.op.name}>"


def _positional(op, inputs, attrs):
    """Fill absent optional inputs with None; positional arguments past the tensor inputs are attributes,
    in the order the forward declares them (so ``reshape(x, (2, 3))`` and ``sum(x, 1, True)`` work)."""
    n = len(op.input_names)
    if len(inputs) < n:
        if not all(op.optional[len(inputs):]):
            missing = [name for name, opt in zip(op.input_names[len(inputs):], op.optional[len(inputs):]) if not opt]
            raise TypeError(f"{op.name}: missing tensor input(s) {missing}; the op takes {op.input_names}")
        return tuple(inputs) + (None,) * (n - len(inputs)), attrs
    names = list(op.attr_defaults)
    extra = inputs[n:]
    if len(extra) > len(names):
        raise TypeError(f"{op.name}: takes {n} tensor input(s) {op.input_names} and the attributes {names}; "
                        f"got {len(inputs)} positional arguments")
    attrs = dict(attrs)
    for name, value in zip(names, extra):
        if name in attrs:
            raise TypeError(f"{op.name}: got multiple values for argument '{name}'")
        attrs[name] = value
    return tuple(inputs[:n]), attrs


_SCALARS: dict = {}


def _scalar_constant(value, dtype) -> Tensor:
    """A shared read-only constant tensor for a Python scalar (scalars recur: 0.5, 1e-5, 2.0, ...)."""
    key = (type(value), value, dtype)
    t = _SCALARS.get(key)
    if t is None:
        if len(_SCALARS) > 512:
            _SCALARS.clear()
        t = _SCALARS[key] = Tensor._wrap(np.asarray(value, dtype=dtype))
    return t


def _coerce(op, inputs) -> list:
    """Inputs as Tensors (None kept for absent optional inputs); float dtypes must agree."""
    float_dtype = None
    for x in inputs:
        if isinstance(x, Tensor):
            dt = x._data.dtype
            if dt in _FLOATS:
                if float_dtype is None:
                    float_dtype = dt
                elif dt != float_dtype:
                    _mixed_dtypes(op, inputs)
    out = []
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor):
            out.append(x)
        elif x is None:
            if not op.optional[i]:
                raise TypeError(f"{op.name}: input '{op.input_names[i]}' is required, got None")
            out.append(None)
        elif isinstance(x, bool | int | float) and not isinstance(x, np.ndarray):
            if float_dtype is not None and not isinstance(x, bool):
                out.append(_scalar_constant(x, float_dtype))
            else:
                out.append(as_tensor(x))
        else:
            try:
                t = as_tensor(x)
            except (TypeError, ValueError) as e:
                raise TypeError(f"{op.name}: input '{op.input_names[i]}' must be a Tensor or array-like, "
                                f"got {type(x).__name__}: {e}") from None
            if t._data.dtype in _FLOATS and float_dtype is not None and t._data.dtype != float_dtype:
                _mixed_dtypes(op, inputs)
            if t._data.dtype.kind == "f" and t._data.dtype not in _FLOATS:
                raise TypeError(f"{op.name}: input '{op.input_names[i]}' has dtype {t._data.dtype}; "
                                f"minitape computes in float32 or float64")
            out.append(t)
    return out


def _not_differentiable(op, tensors, t):
    name = op.input_names[[i for i, x in enumerate(tensors) if x is t][0]]
    raise TypeError(f"{op.name}: argument '{name}' requires grad, but the op is not differentiable with respect "
                    f"to it (declared NOT_DIFFERENTIABLE); pass it detached (x.detach()) -- minitape will not "
                    f"drop a gradient silently")


def _mixed_dtypes(op, inputs):
    got = ", ".join(f"{name}={getattr(getattr(x, 'dtype', None), 'name', type(x).__name__)}"
                    for name, x in zip(op.input_names, inputs))
    raise TypeError(f"{op.name}: floating inputs must share one dtype (float32 or float64), got {got}; "
                    f"convert one explicitly (minitape never casts silently)")


def _node_for(op, attrs, tensors, arrays, out, aux, watched):
    """The Node recording this application, or None when no input needing a gradient can receive one."""
    needs = []
    parents = []
    leaves = []
    any_need = False
    for t, state_i in zip(tensors, op.input_states):
        if t is not None and (t._requires_grad or (watched and t.id in watched)):
            if state_i == NOT_DIFF:
                if out.dtype.kind == "f" and t._requires_grad:
                    _not_differentiable(op, tensors, t)
            else:
                any_need = True
                needs.append(True)
                parents.append(t._node)
                leaves.append(t if t._node is None else None)
                continue
        needs.append(False)
        parents.append(None)
        leaves.append(None)
    return Node(op, attrs, needs, parents, leaves, tensors, (arrays, out, aux)) if any_need else None


def apply(op, inputs, attrs):
    """Run ``op`` on ``inputs`` with ``attrs``, record it, and return the output Tensor."""
    if len(inputs) != op.n_inputs:
        inputs, attrs = _positional(op, inputs, attrs)
    if attrs:
        unknown = attrs.keys() - op.attr_defaults.keys()
        if unknown:
            raise TypeError(f"{op.name}: unknown argument(s) {sorted(unknown)}; "
                            f"accepted: {sorted(op.attr_defaults)}")
        attrs = {**op.attr_defaults, **attrs}
    else:
        attrs = op.attr_defaults
    tensors = inputs
    float_dtype = None
    for t in inputs:
        if type(t) is not Tensor and not isinstance(t, Tensor):  # scalars, arrays, None: the slow path
            tensors = _coerce(op, inputs)
            break
        dt = t._data.dtype
        if dt.kind == "f":  # a Tensor's floating dtype is always float32 or float64
            if float_dtype is None:
                float_dtype = dt
            elif dt is not float_dtype and dt != float_dtype:
                _mixed_dtypes(op, inputs)
    arrays = [None if t is None else t._data for t in tensors]
    if op.check is not None:
        op.check(*arrays, **attrs)
    out = op.forward(*arrays, **attrs)
    aux = None
    if op.has_aux:
        out, aux = out
    if type(out) is not np.ndarray:
        out = np.asarray(out)

    state = STATE
    node = None
    if state.grad_enabled:
        watched = state.watched
        for t in tensors:
            if t is not None and (t._requires_grad or (watched and t.id in watched)):
                node = _node_for(op, attrs, tensors, arrays, out, aux, watched)
                break
    result = Tensor._wrap(out, node)
    if node is not None:
        node.out_id = result.id
        if state.anomaly:
            node.trace = user_frame()
    if state.anomaly:
        _check_forward(op, result, arrays)
    for tape in state.recording_tapes:
        tape._record(op, tensors, attrs, result, node)
    return result


# -- grad mode ---------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _grad_mode(enabled: bool):
    previous = STATE.grad_enabled
    STATE.grad_enabled = enabled
    try:
        yield
    finally:
        STATE.grad_enabled = previous


def no_grad():
    """Context manager: ops run but record nothing for the reverse pass (tapes still list them)."""
    return _grad_mode(False)


def enable_grad():
    """Context manager: re-enable recording inside a ``no_grad`` block."""
    return _grad_mode(True)


def is_grad_enabled() -> bool:
    return STATE.grad_enabled


# -- anomaly detection -------------------------------------------------------------------------------------
@contextlib.contextmanager
def detect_anomaly():
    """Check every forward output and every backward result for NaN/inf; raise naming the op and the
    line of user code that recorded it."""
    previous = STATE.anomaly
    STATE.anomaly = True
    try:
        yield
    finally:
        STATE.anomaly = previous


_ENGINE_DIRS = (os.path.dirname(__file__), os.path.join(os.path.dirname(os.path.dirname(__file__)), "ops"))


def user_frame() -> str:
    """'file:line in function: source' of the innermost stack frame outside tape/ and ops/."""
    for frame in reversed(traceback.extract_stack()):
        if not os.path.dirname(os.path.abspath(frame.filename)).startswith(_ENGINE_DIRS):
            return f"{frame.filename}:{frame.lineno} in {frame.name}: {frame.line}"
    return "<unknown>"


def _check_forward(op, result, arrays):
    where = user_frame()
    data = result._data
    if data.dtype.kind == "f" and not np.isfinite(data).all():
        bad = "NaN" if np.isnan(data).any() else "inf"
        inputs_ok = all(a is None or a.dtype.kind != "f" or np.isfinite(a).all() for a in arrays)
        origin = "from finite inputs" if inputs_ok else "(an input already held NaN/inf)"
        raise AnomalyError(f"anomaly: forward of op '{op.name}' produced {bad} {origin}; recorded at {where}")


def check_backward_result(node, input_name, grad):
    if grad.dtype.kind == "f" and not np.isfinite(grad).all():
        bad = "NaN" if np.isnan(grad).any() else "inf"
        raise AnomalyError(f"anomaly: backward of op '{node.op.name}' produced {bad} in the gradient for input "
                           f"'{input_name}'; the op was recorded at {node.trace or '<recorded before detect_anomaly>'}")

