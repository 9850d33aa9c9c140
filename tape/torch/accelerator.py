"""``torch.accelerator``: no accelerator here; ``is_available()`` is False and ``current_accelerator()`` None."""


def is_available() -> bool:
    return False


def current_accelerator(check_available: bool = False):
    return None


def device_count() -> int:
    return 0
