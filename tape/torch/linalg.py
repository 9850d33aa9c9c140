"""``torch.linalg``: ``linalg.<name>`` is the registered op ``linalg_<name>`` (norm, cross) or ``<name>``."""

import ops as _ops


def __getattr__(name: str):
    for candidate in (f"linalg_{name}", name):
        if not name.startswith("_") and hasattr(_ops, candidate):
            return getattr(_ops, candidate)
    raise AttributeError(f"module 'tape.torch.linalg' has no attribute '{name}'")
