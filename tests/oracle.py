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
    u = np.linspace(0.5, 1.5, y.numel()).reshape(y.shape).astype(y.dtype)
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


class _Deferred:
    """Stands for ``torch.<path>`` at collection time when torch is missing: any use inside a test goes through
    ``require_torch`` (a failure, or a knowing skip under MINITAPE_ALLOW_NO_TORCH=1)."""

    def __init__(self, path: str):
        self.__name__ = path

    def _use(self, *args, **kwargs):
        require_torch()
        raise AssertionError(f"torch.{self.__name__} used without torch")  # unreachable: require_torch raised

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Deferred(f"{self.__name__}.{name}")

    __call__ = __getitem__ = __iter__ = __bool__ = __float__ = _use
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __matmul__ = __neg__ = _use


class LazyTorch:
    """``torch`` for a test module's top level without importing it there: ``torch = LazyTorch()``. With torch
    installed each attribute is torch's own (imported at first use); without it a module still collects, and
    only the tests that use torch fail or, under MINITAPE_ALLOW_NO_TORCH=1, skip."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            import torch
        except ImportError:
            return _Deferred(name)
        return getattr(torch, name)


def run_torch_parity(*args, **kwargs):
    """tape.tools.verify's torch parity check for a test: without torch a failure (or knowing skip), not None."""
    from tape.tools import verify

    require_torch()
    return verify.run_torch_parity(*args, **kwargs)


def run_torch_hvp_parity(*args, **kwargs):
    """tape.tools.verify's double-backward parity check, as ``run_torch_parity``."""
    from tape.tools import verify

    require_torch()
    return verify.run_torch_hvp_parity(*args, **kwargs)
