"""``import tape.torch as torch``: torch's namespace as a face over minitape's one engine and op library, so that a
PyTorch program runs by changing its import lines. Nothing here computes: ``torch.<op>`` is the registered op
(``torch.exp is ops.exp``), ``torch.tensor/zeros/...`` are tape's constructors (taking and checking torch's
``device=`` / ``pin_memory=`` / ``memory_format=`` / ``layout=``), dtypes are numpy dtypes under torch's names, and
the submodules (``nn``, ``optim``, ``utils.data``, ``func``, ``onnx``, ``linalg``, ``special``, ``cuda``,
``backends``, ``accelerator``, ``serialization``) load on first use and re-export the training stack.

One device, the CPU: ``device('cpu')`` and ``.to('cpu')`` are no-ops, ``cuda.is_available()`` is False, naming
another device raises (tape/devices.py). ``save`` / ``load`` are tape/torch/serialization.py's (no pickle).
"""

from __future__ import annotations

import builtins
import importlib

import numpy as np

from tape.devices import device, on_cpu
from tape.random import Generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from tape.state import STATE, enable_grad, is_grad_enabled, no_grad
from tape.tensor_api import set_printoptions
from tape.tensors import Tensor

from ._faces import (
    FloatTensor,
    LongTensor,
    constructors,
    get_default_dtype,
    inference_mode,
    set_default_dtype,
    set_grad_enabled,
)
from ._info import (
    Size,
    allclose,
    can_cast,
    compile,
    equal,
    finfo,
    iinfo,
    is_complex,
    is_floating_point,
    promote_types,
    typename,
)

# dtypes: numpy's, under torch's names (``x.dtype == torch.float32`` holds)
float32 = float = np.dtype(np.float32)  # noqa: A001  -- torch's names
float64 = double = np.dtype(np.float64)
float16 = half = np.dtype(np.float16)
int64 = long = np.dtype(np.int64)
int32 = int = np.dtype(np.int32)  # noqa: A001
int16 = short = np.dtype(np.int16)
int8 = np.dtype(np.int8)
uint8 = np.dtype(np.uint8)
bool = np.dtype(np.bool_)  # noqa: A001
dtype = np.dtype

globals().update(constructors())  # tensor, as_tensor, from_numpy, zeros, ones, full, empty, arange, ... (device=)

_SUBMODULES = (
    "nn",
    "optim",
    "utils",
    "func",
    "onnx",
    "linalg",
    "special",
    "cuda",
    "backends",
    "accelerator",
    "serialization",
    "autograd",
    "amp",
    "testing",
    "random",
    "version",
    "distributed",
)


def is_tensor(obj):  # -> bool (the name is torch.bool here)
    return isinstance(obj, Tensor)


def numel(input: Tensor):  # noqa: A002  -- torch's parameter name
    return input.numel()


def autocast(device_type: str, dtype=None, enabled=True, cache_enabled=None):  # (the name bool is torch.bool here)
    """torch.autocast: torch.amp.autocast (a no-op with ``enabled=False``; enabling it raises)."""
    return importlib.import_module("tape.torch.amp").autocast(device_type, dtype, enabled, cache_enabled)


def is_anomaly_enabled():  # -> bool (the name is torch.bool here)
    return STATE.anomaly


def set_num_threads(int) -> None:  # noqa: A002  -- torch's parameter name
    """torch.set_num_threads: the threads numpy's BLAS and minitape's kernel pool may use (ops/_kernels/runtime.py)."""
    importlib.import_module("ops._kernels.runtime").set_threads(int)


def get_num_threads():  # -> int (the name is torch.int here)
    """torch.get_num_threads: the threads minitape's kernels may use now."""
    return importlib.import_module("ops._kernels.runtime").threads()


_MATMUL_PRECISION = ["highest"]


def set_float32_matmul_precision(precision: str) -> None:
    """torch.set_float32_matmul_precision: accepted and reported. It lets torch use TF32 / bfloat16 on hardware that
    has them; minitape's float32 matmuls are numpy's float32 GEMMs whatever the setting."""
    if precision not in ("highest", "high", "medium"):
        raise ValueError(f"set_float32_matmul_precision: expected 'highest', 'high' or 'medium', got {precision!r}")
    _MATMUL_PRECISION[0] = precision


def get_float32_matmul_precision() -> str:
    return _MATMUL_PRECISION[0]


def get_default_device():
    """The CPU: minitape's one device."""
    return device("cpu")


def set_default_device(device) -> None:  # noqa: F811  -- torch's parameter name
    """Accepts the CPU (or None); another device raises, naming it."""
    if device is not None:
        on_cpu("set_default_device", "device", device)


_DETERMINISTIC = [False]


def use_deterministic_algorithms(mode, *, warn_only=False) -> None:
    """torch.use_deterministic_algorithms: accepted and reported by ``are_deterministic_algorithms_enabled()``.
    minitape has no nondeterministic implementation to switch off: no op uses atomics or a reduction order that
    depends on thread timing (the kernel pool's blocks write disjoint outputs)."""
    _DETERMINISTIC[0] = builtins.bool(mode)


def are_deterministic_algorithms_enabled():  # -> bool
    return _DETERMINISTIC[0]


def save(obj, f, *args, **kwargs) -> None:
    """torch.save: tape/torch/serialization.py (a pickle-free archive)."""
    return importlib.import_module("tape.torch.serialization").save(obj, f, *args, **kwargs)


def load(f, *args, **kwargs):
    """torch.load: tape/torch/serialization.py (never runs code from the file)."""
    return importlib.import_module("tape.torch.serialization").load(f, *args, **kwargs)


# torch's top-level functions whose meaning differs from the registered op of the same name (that op is torch.linalg's
# or torch.nn.functional's): reaching them here would compute something else silently, so they raise, naming the op
# that is there. tests/train/test_torch_namespace.py shows each one differs in torch.
OTHER_MEANING = {
    "svd": "torch.svd returns V, the registered svd is torch.linalg.svd (returns Vh): use torch.linalg.svd",
    "cond": "torch.cond is control flow; the registered cond is torch.linalg.cond",
    "solve": "torch.solve was removed from torch; use torch.linalg.solve",
    "lstsq": "torch.lstsq was removed from torch; use torch.linalg.lstsq",
    "matrix_rank": "torch.matrix_rank was removed from torch; use torch.linalg.matrix_rank",
    "embedding": "torch.embedding takes (weight, indices); use torch.nn.functional.embedding(input, weight)",
    "embedding_bag": "torch.embedding_bag takes (weight, indices, ...); use torch.nn.functional.embedding_bag",
    "batch_norm": "torch.batch_norm orders its arguments otherwise; use torch.nn.functional.batch_norm",
    "instance_norm": "torch.instance_norm orders its arguments otherwise; use torch.nn.functional.instance_norm",
}


def __getattr__(name: str):
    """Submodules on first use; then the op library: ``torch.<name>`` is ``ops.<name>`` (the registered op, or
    ops' alias of one such as ``cat``)."""
    if name in OTHER_MEANING:
        raise AttributeError(f"tape.torch.{name}: not provided -- {OTHER_MEANING[name]}")
    if name in _SUBMODULES:
        module = importlib.import_module(f"tape.torch.{name}")
        globals()[name] = module
        return module
    if not name.startswith("_"):
        ops = importlib.import_module("ops")
        if name in getattr(ops, "__all__", ()) or (
            hasattr(ops, name) and not isinstance(getattr(ops, name), type(ops))
        ):
            return getattr(ops, name)
    raise AttributeError(f"module 'tape.torch' has no attribute '{name}' (minitape has no such op or function yet)")


__all__ = [
    "Tensor",
    "device",
    "Generator",
    "manual_seed",
    "seed",
    "initial_seed",
    "get_rng_state",
    "set_rng_state",
    "no_grad",
    "enable_grad",
    "is_grad_enabled",
    "set_grad_enabled",
    "inference_mode",
    "set_default_dtype",
    "get_default_dtype",
    "LongTensor",
    "FloatTensor",
    "is_tensor",
    "numel",
    "is_anomaly_enabled",
    "set_float32_matmul_precision",
    "get_float32_matmul_precision",
    "get_default_device",
    "set_default_device",
    "autocast",
    "set_printoptions",
    "Size",
    "allclose",
    "can_cast",
    "compile",
    "equal",
    "finfo",
    "iinfo",
    "is_complex",
    "is_floating_point",
    "promote_types",
    "typename",
    "set_num_threads",
    "get_num_threads",
    "use_deterministic_algorithms",
    "are_deterministic_algorithms_enabled",
    "save",
    "load",
]
