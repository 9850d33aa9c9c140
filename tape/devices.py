"""The one device minitape computes on, the CPU, under torch's names: ``device('cpu')`` and the checks that take
``device=`` / ``.to(device)`` arguments. Naming ``'cpu'`` (or ``'cpu:0'``) is a no-op; naming any other device
(``'cuda'``, ``'mps'``, ...) raises a RuntimeError naming it, saying minitape computes on the CPU only and what to
write instead. A ``device('cuda')`` object can be built, as in torch
(programs build one before asking ``cuda.is_available()``); using it raises."""

from __future__ import annotations

import numpy as np

KNOWN_TYPES = ("cpu", "cuda", "mps", "xpu", "meta", "hip", "xla", "mtia", "privateuseone")


class device:  # noqa: N801  -- torch's name
    """torch.device: ``device('cpu')``, ``device('cuda', 0)``, ``device('cuda:1')``, ``device(other_device)``."""

    __slots__ = ("type", "index")
    type: str
    index: int | None

    def __init__(self, type, index: int | None = None):  # noqa: A002  -- torch's parameter name
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        if isinstance(type, int) and not isinstance(type, bool):
            type, index = "cuda", type  # torch.device(0) is cuda:0
        if not isinstance(type, str):
            raise TypeError(f"device(): argument 'type' expected a string or a device, got {type.__class__.__name__}")
        name, _, number = type.partition(":")
        if name not in KNOWN_TYPES:
            raise RuntimeError(f"device(): expected one of {', '.join(KNOWN_TYPES)} device type, got {type!r}")
        if number:
            if index is not None or not number.isdigit():
                raise RuntimeError(f"device(): invalid device string {type!r}")
            index = int(number)
        self.type, self.index = name, index

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + ("" if self.index is None else f", index={self.index}") + ")"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __enter__(self):  # ``with torch.device('cpu'):`` -- the only device is already the default
        on_cpu("torch.device", "device", self)
        return self

    def __exit__(self, *exc) -> None:
        return None


CPU = device("cpu")
PLACEMENT = ("device", "pin_memory", "memory_format", "layout", "non_blocking")  # torch's keywords that place data


def on_cpu(who: str, argument: str, value) -> None:
    """Accept ``value`` as a device argument naming the CPU (or None); raise naming any other device."""
    if value is None:
        return
    if not isinstance(value, device | str | int) or isinstance(value, bool):
        raise TypeError(f"{who}: argument '{argument}' expected a device or a string, got {type(value).__name__}")
    resolved = device(value)
    if resolved.type != "cpu" or resolved.index not in (None, 0):
        accelerator = _ACCELERATOR_NAMES.get(resolved.type, resolved.type)
        raise RuntimeError(
            f"{who}: argument '{argument}' names {str(resolved)!r}, but {accelerator} "
            f"is not available in minitape: it computes on the CPU only (torch.cuda.is_available() is False here). "
            f"Tensors and modules already live on the CPU: drop the .to({str(resolved)!r}) / .cuda() / "
            f"device={str(resolved)!r}, or write device='cpu' (code that picks its device: "
            f"'cuda' if torch.cuda.is_available() else 'cpu')"
        )


_ACCELERATOR_NAMES = {"cuda": "CUDA", "mps": "MPS", "xpu": "XPU", "hip": "HIP", "xla": "XLA", "mtia": "MTIA"}


def is_device(value) -> bool:
    """True when ``value`` names a device (a device or a string such as 'cpu' / 'cuda:0'), not a dtype."""
    if isinstance(value, device):
        return True
    if isinstance(value, str):
        try:
            np.dtype(value)
        except TypeError:
            return True
        return value.partition(":")[0] in KNOWN_TYPES
    return False


def device_arguments(who: str, arguments: dict) -> None:
    """Check torch's placement keywords of a constructor (``device=``, ``pin_memory=``, ``memory_format=``,
    ``layout=``): the device must be the CPU, the rest are no-ops on it; any other keyword is refused."""
    for name, value in arguments.items():
        if name == "device":
            on_cpu(who, name, value)
        elif name not in PLACEMENT:
            raise TypeError(f"{who}: unexpected keyword argument '{name}'")


def to_arguments(who: str, args: tuple, kwargs: dict):
    """torch's three forms of ``to``: (dtype), (device=None, dtype=None), (other tensor) -> (the dtype asked for or
    None, copy); the device is checked to be the CPU."""
    from .tensors import Tensor

    kwargs = dict(kwargs)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    copy = kwargs.pop("copy", False)
    device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    if kwargs:
        raise TypeError(f"{who}: unexpected keyword argument {next(iter(kwargs))!r}")
    rest = list(args)
    if rest and isinstance(rest[0], Tensor):
        other = rest.pop(0)
        dtype = other.dtype
    elif rest and is_device(rest[0]):
        device = rest.pop(0)
    if rest and dtype is None and not isinstance(rest[0], bool):
        dtype = rest.pop(0)
    if rest and isinstance(rest[0], bool):  # torch's positional non_blocking, then copy
        rest.pop(0)
        if rest and isinstance(rest[0], bool):
            copy = rest.pop(0)
    if rest:
        raise TypeError(f"{who}: unexpected positional arguments {tuple(rest)!r}")
    on_cpu(who, "device", device)
    return dtype, copy
