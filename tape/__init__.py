"""minitape's engine: tensors, the execution tape, the op registry and the reverse pass.

Import ``tape`` for the engine and ``ops`` for the op library (importing either loads both).
"""

from .autodiff import backward
from .broadcast import unbroadcast
from .errors import (
    AnomalyError,
    BackwardNotImplementedError,
    GradientError,
    GraphFreedError,
    InPlaceModificationError,
    ReplayError,
)
from .gradcheck import GradcheckError, gradcheck
from .recording import Node, detect_anomaly, enable_grad, is_grad_enabled, no_grad
from .registry import (
    NOT_DIFFERENTIABLE,
    STUB,
    Op,
    RegistrationError,
    Sample,
    defop,
    get_op,
    registered_ops,
    stubbed_backward_op_names,
    unregister_op,
)
from .tapes import ExecutionTape, GradientTape, RecordedOp, TapeGraph, TapeStack, TensorSpec, tape_stack
from .tensors import Tensor, as_tensor, tensor

__all__ = [
    "Tensor", "tensor", "as_tensor",
    "ExecutionTape", "GradientTape", "TapeStack", "tape_stack", "RecordedOp", "TensorSpec", "TapeGraph", "Node",
    "no_grad", "enable_grad", "is_grad_enabled", "detect_anomaly", "backward",
    "defop", "Op", "Sample", "NOT_DIFFERENTIABLE", "STUB", "get_op", "registered_ops", "unregister_op",
    "stubbed_backward_op_names", "RegistrationError", "unbroadcast",
    "gradcheck", "GradcheckError",
    "BackwardNotImplementedError", "GradientError", "GraphFreedError", "InPlaceModificationError",
    "AnomalyError", "ReplayError",
]

import ops as _ops  # noqa: E402,F401  -- registers the op library (ops imports tape.registry)

from . import checkpoint, nn, optim  # noqa: E402,F401  -- the training stack (built on ops)
