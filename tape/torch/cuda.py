"""``torch.cuda`` on a machine without CUDA: ``is_available()`` is False (programs take their CPU branch),
``device_count()`` 0, the seeding functions are no-ops (as torch's are without CUDA)."""


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def manual_seed(seed: int) -> None:
    """No-op: there is no CUDA generator (torch's is lazily a no-op without CUDA too)."""


def manual_seed_all(seed: int) -> None:
    """No-op, as ``manual_seed``."""


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False
