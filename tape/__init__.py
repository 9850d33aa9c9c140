"""minitape's engine: tensors, the execution tape, the op registry and the reverse pass.

Import ``tape`` for the engine and ``ops`` for the op library (``import ops`` loads both; the first Tensor
operator or op method used loads ``ops`` too).
"""

__version__ = "0.4.0"  # pyproject.toml reads it (single-sourced)


from types import ModuleType
from typing import TYPE_CHECKING

from . import creation, random, state  # noqa: F401  -- tape.state: the per-thread modes; tape.random: the generators
from .autodiff import backward
from .broadcast import unbroadcast
from .compile import CompiledStep, CompileError, compile
from .creation import *  # noqa: F403  -- torch's constructors, listed in creation.__all__
from .errors import (
    AnomalyError,
    BackwardNotImplementedError,
    GradientError,
    GraphFreedError,
    InPlaceModificationError,
    ReplayError,
)
from .functional import grad, gradients, hessian, hvp, jacobian, value_and_grad, vjp
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .memory import keep_freed_memory
from .random import *  # noqa: F403  -- the generators and torch's seeding functions, listed in random.__all__
from .recording import Node
from .registry import (
    NOT_DIFFERENTIABLE,
    STUB,
    Grad,
    Op,
    RegistrationError,
    Sample,
    defop,
    get_op,
    registered_ops,
    stubbed_backward_op_names,
    unregister_op,
)
from .state import detect_anomaly, enable_grad, is_grad_enabled, no_grad
from .tapes import ExecutionTape, GradientTape, RecordedOp, TapeGraph, TapeStack, TensorSpec, tape_stack
from .tensor_api import set_library_loader
from .tensors import Tensor, as_tensor, tensor

__all__ = [
    "keep_freed_memory",
    "Tensor",
    *random.__all__,
    "tensor",
    "as_tensor",
    *creation.__all__,
    "ExecutionTape",
    "GradientTape",
    "TapeStack",
    "tape_stack",
    "RecordedOp",
    "TensorSpec",
    "TapeGraph",
    "Node",
    "no_grad",
    "enable_grad",
    "is_grad_enabled",
    "detect_anomaly",
    "backward",
    "defop",
    "Op",
    "Sample",
    "Grad",
    "NOT_DIFFERENTIABLE",
    "STUB",
    "get_op",
    "registered_ops",
    "unregister_op",
    "stubbed_backward_op_names",
    "RegistrationError",
    "unbroadcast",
    "gradcheck",
    "gradgradcheck",
    "GradcheckError",
    "gradients",
    "grad",
    "value_and_grad",
    "vjp",
    "hvp",
    "jacobian",
    "hessian",
    "compile",
    "CompiledStep",
    "CompileError",
    "BackwardNotImplementedError",
    "GradientError",
    "GraphFreedError",
    "InPlaceModificationError",
    "AnomalyError",
    "ReplayError",
]

if TYPE_CHECKING:  # what __getattr__ below loads on first use, typed for checkers (mypy, IDEs): not Any
    from . import distributed as distributed
    from . import onnx as onnx
    from .tools import report as report
    from .train import checkpoint as checkpoint
    from .train import data as data
    from .train import func as func
    from .train import nn as nn
    from .train import optim as optim

_TRAINING_STACK = {
    "nn": "tape.train.nn",
    "optim": "tape.train.optim",
    "checkpoint": "tape.train.checkpoint",
    "func": "tape.train.func",
    "data": "tape.train.data",
    "report": "tape.tools.report",
    "distributed": "tape.distributed",
    "onnx": "tape.onnx",
}


def _load_op_library() -> None:
    """Tensor's operators and op methods are the op library's (``ops``), which sits above this engine core: the
    first use of one loads it, as ``tape.nn`` loads on first use."""
    import importlib

    importlib.import_module("ops")


set_library_loader(_load_op_library)


def __getattr__(name: str) -> ModuleType:
    """``tape.nn``, ``tape.optim``, ``tape.checkpoint`` and ``tape.report`` load on first use: they sit above the
    op library, which sits above this engine core, so the core never imports them (no import cycle)."""
    if name in _TRAINING_STACK:
        import importlib

        module = importlib.import_module(_TRAINING_STACK[name])
        globals()[name] = module
        return module
    raise AttributeError(f"module 'tape' has no attribute '{name}'")
