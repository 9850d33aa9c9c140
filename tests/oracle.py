"""PyTorch as the test oracle, and the value-and-gradient comparison the per-family tests share.

torch is a test dependency: a missing torch makes these tests fail, never skip, unless the environment
says ``MINITAPE_ALLOW_NO_TORCH=1`` (then they are skipped knowingly).
"""

import os

import numpy as np
import pytest

import tape


def require_torch():
    """The torch module; without it a failure naming the fix, or a knowing skip under MINITAPE_ALLOW_NO_TORCH=1."""
    try:
        import torch
    except ImportError:
        if os.environ.get("MINITAPE_ALLOW_NO_TORCH") == "1":
            pytest.skip("torch is not installed and MINITAPE_ALLOW_NO_TORCH=1")
        pytest.fail("torch is a test dependency (pip install -e '.[test]'): the oracle cannot run. Set "
                    "MINITAPE_ALLOW_NO_TORCH=1 to skip the torch tests knowingly")
    return torch


def ours(op, x, **attrs):
    """(value, gradient of sum(op(x) * u)) with a fixed cotangent u."""
    t = tape.tensor(x, requires_grad=True)
    y = op(t, **attrs)
    u = np.linspace(0.5, 1.5, y.size).reshape(y.shape).astype(y.dtype)
    y.backward(u)
    return y.numpy(), t.grad.numpy()


def theirs(fn, x, **attrs):
    """The same for a torch function."""
    torch = require_torch()
    t = torch.tensor(x, requires_grad=True)
    y = fn(t, **attrs)
    u = np.linspace(0.5, 1.5, y.numel()).reshape(tuple(y.shape)).astype(x.dtype)
    y.backward(torch.from_numpy(u))
    return y.detach().numpy(), t.grad.numpy()
