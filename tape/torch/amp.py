"""``torch.amp`` on one CPU device without mixed precision: ``GradScaler(enabled=False)`` passes everything through
(torch's disabled scaler); ``autocast(..., enabled=False)`` is a no-op context. Enabling either raises: minitape
computes in float32 / float64 only (float16 is a storage dtype)."""

from tape.devices import on_cpu


class GradScaler:
    """torch.amp.GradScaler: only ``enabled=False`` (the form CPU programs take), where it changes nothing."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):  # fmt: skip
        if enabled:
            raise NotImplementedError(
                "GradScaler(enabled=True): minitape has no float16 arithmetic to scale for; pass enabled=False"
            )
        self._enabled = False

    def is_enabled(self) -> bool:
        return False

    def scale(self, outputs):
        return outputs

    def unscale_(self, optimizer) -> None:
        return None

    def step(self, optimizer, *args, **kwargs):
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None) -> None:
        return None

    def get_scale(self) -> float:
        return 1.0

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        return None


class autocast:  # noqa: N801  -- torch's name
    """torch.amp.autocast: only ``enabled=False`` (a no-op); the device must be the CPU."""

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled=None):
        on_cpu("autocast", "device_type", device_type)
        if enabled:
            raise NotImplementedError("autocast(enabled=True): minitape has no mixed precision; pass enabled=False")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None
