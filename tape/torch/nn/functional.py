"""``from tape.torch.nn import functional as F``: ``F.<name>`` is the registered op of that name (``F.softmax is
ops.softmax``); nothing is defined here."""

import ops as _ops


def __getattr__(name: str):
    if not name.startswith("_") and hasattr(_ops, name):
        return getattr(_ops, name)
    raise AttributeError(f"module 'tape.torch.nn.functional' has no attribute '{name}' (minitape has no such op yet)")
