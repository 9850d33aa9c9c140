"""The pieces of ``tape.torch``'s top level that are not a plain re-export: tape's constructors taking torch's
``device=`` / ``pin_memory=`` / ``memory_format=`` / ``layout=`` (checked, then dropped: one CPU device),
``inference_mode`` and ``set_grad_enabled`` (context managers and decorators over ``tape.no_grad``), the default
dtype (float32, torch's; float64 is refused for now, see ``set_default_dtype``) and the legacy ``LongTensor`` /
``FloatTensor`` constructors."""

from __future__ import annotations

import contextlib
import functools
import numbers

import numpy as np

import tape
from tape.devices import PLACEMENT, device_arguments, on_cpu
from tape.state import STATE
from tape.tensors import Tensor

_CONSTRUCTORS = (*tape.creation.__all__, "tensor", "as_tensor")


def _on_cpu(make):
    """``make`` taking torch's device and layout arguments: the device must be the CPU; the others are no-ops."""

    @functools.wraps(make)
    def on_cpu_make(*args, **kwargs):
        device_arguments(make.__name__, {name: kwargs.pop(name) for name in PLACEMENT if name in kwargs})
        return make(*args, **kwargs)

    return on_cpu_make


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor holding ``array``'s values (a copy: minitape's tensors own their arrays; torch's shares memory)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray, got {type(array).__name__}")
    return tape.tensor(array)


def constructors() -> dict:
    return {name: _on_cpu(getattr(tape, name)) for name in _CONSTRUCTORS} | {"from_numpy": from_numpy}


def _legacy(dtype, name: str):
    def make(*data, device=None):
        on_cpu(name, "device", device)
        if len(data) == 1 and not isinstance(data[0], numbers.Integral):
            return tape.tensor(data[0], dtype=dtype)  # LongTensor([1, 2]) / FloatTensor(array): the values
        return tape.zeros(*data, dtype=dtype)  # LongTensor(n): n elements (torch leaves them uninitialised)

    make.__name__ = make.__qualname__ = name
    make.__doc__ = f"torch.{name}: ``{name}(*sizes)`` (zeros) or ``{name}(data)`` (values), dtype {np.dtype(dtype)}."
    return make


LongTensor = _legacy(np.int64, "LongTensor")
FloatTensor = _legacy(np.float32, "FloatTensor")


class _GradMode(contextlib.ContextDecorator):
    """A context manager that is also a decorator (``@inference_mode()`` and bare ``@inference_mode``)."""

    def __new__(cls, mode=True):
        if callable(mode):  # used bare as a decorator
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        self.mode = bool(mode)

    _disables: bool
    _stack: list

    def __enter__(self):
        self.__dict__.setdefault("_stack", []).append(STATE.grad_enabled)
        STATE.grad_enabled = STATE.grad_enabled and not self.mode if self._disables else self.mode

    def __exit__(self, *exc) -> None:
        STATE.grad_enabled = self._stack.pop()


class inference_mode(_GradMode):  # noqa: N801  -- torch's name
    """torch.inference_mode(mode=True): no recording inside (minitape's no_grad; torch's stronger mode also skips
    version counting, which minitape keeps)."""

    _disables = True


class set_grad_enabled(_GradMode):  # noqa: N801
    """torch.set_grad_enabled(mode): grad mode set to ``mode`` inside the block (or from the call on, as a function:
    torch's form ``torch.set_grad_enabled(False)``)."""

    _disables = False

    def __init__(self, mode):
        super().__init__(mode)
        self._before = STATE.grad_enabled
        STATE.grad_enabled = self.mode  # the call itself sets the mode, as torch's

    def __enter__(self):
        self.__dict__.setdefault("_stack", []).append(self._before)
        STATE.grad_enabled = self.mode


def get_default_dtype() -> np.dtype:
    return np.dtype(np.float32)


def set_default_dtype(d) -> None:
    """torch.set_default_dtype: float32 (minitape's default) is accepted; another dtype raises, naming the way to
    get it (minitape's constructors, layers and Python floats default to float32; cast with ``.double()``)."""
    if np.dtype(d) != np.float32:
        raise NotImplementedError(
            f"set_default_dtype: minitape's default floating dtype is float32 and cannot be changed yet (got {d}); "
            f"pass dtype= to constructors and call model.double() / tensor.double()"
        )
