"""Tensor methods torch programs call for devices and dtypes: ``to`` (dtype, device, another tensor; ``copy=``,
``non_blocking=``), ``cpu()``, ``cuda()`` (raises, naming the device), the ``device`` and ``is_cuda`` properties and
``type(dtype)``. They resolve their arguments and call ``ops.cast`` / ``ops.clone``; on the one CPU device a device
argument is checked (tape/devices.py) and is otherwise a no-op. Installed by ops/_tensor.py."""

from __future__ import annotations

import numpy as np

from tape.devices import CPU, device_arguments, on_cpu, to_arguments
from tape.tensors import Tensor

from .binary import eq, isclose
from .cast import cast
from .elementwise import clone
from .reduce import all as all_

# torch's legacy type names (Tensor.type() and torch.FloatTensor ...) and their dtypes
TYPE_NAMES = {
    "torch.FloatTensor": np.float32,
    "torch.DoubleTensor": np.float64,
    "torch.HalfTensor": np.float16,
    "torch.LongTensor": np.int64,
    "torch.IntTensor": np.int32,
    "torch.ShortTensor": np.int16,
    "torch.CharTensor": np.int8,
    "torch.ByteTensor": np.uint8,
    "torch.BoolTensor": np.bool_,
}
_NAME_OF = {np.dtype(dtype): name for name, dtype in TYPE_NAMES.items()}


def _to(self: Tensor, *args, **kwargs) -> Tensor:
    """torch's Tensor.to: this tensor itself when nothing changes (as torch's), a cast (ops.cast) to a new dtype, a
    copy in the graph (ops.clone) with ``copy=True``. Devices other than the CPU raise."""
    dtype, copy = to_arguments("Tensor.to", args, kwargs)
    if dtype is not None and np.dtype(dtype) != self.dtype:
        return cast(self, dtype)
    return clone(self) if copy else self


def _cpu(self: Tensor, memory_format=None) -> Tensor:
    """This tensor itself: it is on the CPU (torch returns self when no copy is needed)."""
    return self


def _cuda(self: Tensor, device=None, non_blocking: bool = False, memory_format=None) -> Tensor:
    """Always raises: minitape has no CUDA device."""
    on_cpu(
        "Tensor.cuda", "device", "cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device
    )
    raise AssertionError("unreachable: on_cpu raised")  # pragma: no cover


def _device(self: Tensor):
    """The tensor's device: always ``device(type='cpu')``."""
    return CPU


def _type(self: Tensor, dtype=None, non_blocking: bool = False, **kwargs):
    """torch's Tensor.type: with no argument the legacy type name ('torch.FloatTensor'); with a dtype or such a name,
    this tensor cast to it (itself when the dtype is already that)."""
    if dtype is None:
        if self.dtype not in _NAME_OF:
            raise TypeError(f"Tensor.type: no torch type name for dtype {self.dtype}")
        return _NAME_OF[self.dtype]
    if isinstance(dtype, str) and dtype in TYPE_NAMES:
        dtype = TYPE_NAMES[dtype]
    return _to(self, dtype)


def _new_tensor(self: Tensor, data, dtype=None, requires_grad: bool = False, **device) -> Tensor:
    """torch's Tensor.new_tensor: a new leaf holding ``data`` (copied), of this tensor's dtype unless ``dtype``."""
    device_arguments("Tensor.new_tensor", device)
    return Tensor(np.asarray(data, dtype=self.dtype if dtype is None else dtype), requires_grad=requires_grad)


def _new_empty(self: Tensor, *size, **kwargs) -> Tensor:
    """torch's Tensor.new_empty: ``new_zeros`` (minitape's empty is zeros: no uninitialised memory)."""
    return self.new_zeros(*size, **kwargs)


def _equal(self: Tensor, other: Tensor) -> bool:
    """torch's Tensor.equal: the same shape and every element equal (NaN is not equal to itself)."""
    return tuple(self.shape) == tuple(other.shape) and bool(all_(eq(self, other)))


def _allclose(self: Tensor, other, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> bool:
    """torch's Tensor.allclose: ``isclose`` everywhere (broadcasting), as a Python bool."""
    return bool(all_(isclose(self, other, rtol=rtol, atol=atol, equal_nan=equal_nan)))


def _itself(self: Tensor, *args, **kwargs) -> Tensor:
    """This tensor itself: a no-op on one CPU device with real dtypes (torch returns ``self`` there too)."""
    return self


def _conjugate_transposed(self: Tensor) -> Tensor:
    """torch's Tensor.H of a matrix (real: its transpose); a 0-D tensor is itself."""
    if self.ndim not in (0, 2):
        raise ValueError(f"Tensor.H: only matrices (2-D tensors) have it, got a {self.ndim}-D tensor; use mH")
    return self.mT if self.ndim == 2 else self


def _no(self: Tensor) -> bool:
    return False


def methods() -> dict:
    return {
        "to": _to,
        "cpu": _cpu,
        "cuda": _cuda,
        "device": property(_device),
        "is_cuda": property(lambda self: False),
        "is_cpu": property(lambda self: True),
        "type": _type,
        "new_tensor": _new_tensor,
        "new_empty": _new_empty,
        "equal": _equal,
        "allclose": _allclose,
        "is_floating_point": lambda self: self.dtype.kind == "f",
        "is_signed": lambda self: self.dtype.kind in "if",
        "element_size": lambda self: self.dtype.itemsize,
        "itemsize": property(lambda self: self.dtype.itemsize),
        "nbytes": property(lambda self: self.dtype.itemsize * self.numel()),
        "nelement": lambda self: self.numel(),
        "get_device": lambda self: -1,  # torch's answer for a CPU tensor
        **dict.fromkeys(("is_complex", "is_pinned", "is_inference", "is_conj", "is_neg"), _no),
        **dict.fromkeys(("pin_memory", "share_memory_", "conj", "resolve_conj", "resolve_neg"), _itself),
        "real": property(_itself),
        "H": property(_conjugate_transposed),
        "adjoint": lambda self: self.mT,
    }
