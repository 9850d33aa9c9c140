"""``torch.special``: ``special.<name>`` is ``ops.<name>`` (the registered op or ops' alias: expit, gammaln, psi)."""

import ops as _ops


def __getattr__(name: str):
    if not name.startswith("_") and hasattr(_ops, name):
        return getattr(_ops, name)
    raise AttributeError(f"module 'tape.torch.special' has no attribute '{name}'")
