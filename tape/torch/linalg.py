"""``torch.linalg``: ``linalg.<name>`` is the registered linalg-family op ``linalg_<name>`` (norm, cross) or
``<name>`` (svd, solve, inv, det, ...); ops of other families are not torch.linalg's (its ``vander`` and
``diagonal`` differ from torch's top-level ones)."""

import ops as _ops
from tape.registry import get_op as _get_op


def __getattr__(name: str):
    for candidate in (f"linalg_{name}", name):
        if not name.startswith("_") and hasattr(_ops, candidate):
            op = getattr(_ops, candidate)
            if getattr(_get_op(op.name), "family", None) == "linalg":
                return op
    raise AttributeError(f"module 'tape.torch.linalg' has no attribute '{name}'")
