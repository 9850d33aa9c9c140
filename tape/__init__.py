"""minitape's engine: tensors, the execution tape, the op registry and the reverse pass.

Import ``tape`` for the engine and ``ops`` for the op library (``import ops`` loads both; the first Tensor
operator or op method used loads ``ops`` too).
"""

from . import random, state  # noqa: F401  -- tape.state: the per-thread modes; tape.random: the generators
from .autodiff import backward
from .broadcast import unbroadcast
from .compile import CompiledStep, CompileError, compile
from .creation import (
    arange,
    empty,
    eye,
    full,
    linspace,
    logspace,
    normal,
    ones,
    rand,
    randint,
    randn,
    randperm,
    tril_indices,
    triu_indices,
    zeros,
)
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
from .random import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
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
    "Generator",
    "default_generator",
    "manual_seed",
    "seed",
    "initial_seed",
    "get_rng_state",
    "set_rng_state",
    "tensor",
    "as_tensor",
    "arange",
    "zeros",
    "ones",
    "full",
    "empty",
    "eye",
    "tril_indices",
    "triu_indices",
    "linspace",
    "logspace",
    "rand",
    "randn",
    "randint",
    "randperm",
    "normal",
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


def __getattr__(name):
    """``tape.nn``, ``tape.optim``, ``tape.checkpoint`` and ``tape.report`` load on first use: they sit above the
    op library, which sits above this engine core, so the core never imports them (no import cycle)."""
    if name in _TRAINING_STACK:
        import importlib

        module = importlib.import_module(_TRAINING_STACK[name])
        globals()[name] = module
        return module
    raise AttributeError(f"module 'tape' has no attribute '{name}'")
