"""``torch.backends``: ``mps.is_available()`` / ``cuda.is_built()`` are False; ``cudnn`` flags may be set (no-ops)."""

from types import SimpleNamespace

mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
cuda = SimpleNamespace(is_built=lambda: False, matmul=SimpleNamespace(allow_tf32=False))
cudnn = SimpleNamespace(
    is_available=lambda: False, enabled=False, benchmark=False, deterministic=False, allow_tf32=False
)
