"""Anomaly detection (``tape.detect_anomaly``): the NaN/inf checks of forward outputs and backward results, and
the line of user code an op was recorded at."""

from __future__ import annotations

import os
import traceback

import numpy as np

from .errors import AnomalyError

_ENGINE_DIRS = (os.path.dirname(__file__), os.path.join(os.path.dirname(os.path.dirname(__file__)), "ops"))


def user_frame() -> str:
    """'file:line in function: source' of the innermost stack frame outside tape/ and ops/."""
    for frame in reversed(traceback.extract_stack()):
        if not os.path.dirname(os.path.abspath(frame.filename)).startswith(_ENGINE_DIRS):
            return f"{frame.filename}:{frame.lineno} in {frame.name}: {frame.line}"
    return "<unknown>"


def check_forward(op, result, arrays):
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
        raise AnomalyError(
            f"anomaly: backward of op '{node.op.name}' produced {bad} in the gradient for input "
            f"'{input_name}'; the op was recorded at {node.trace or '<recorded before detect_anomaly>'}"
        )
