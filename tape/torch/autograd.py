"""``torch.autograd``: ``grad`` (tape.gradients, torch's signature), ``backward``, and the anomaly switch
(``detect_anomaly()`` tape's context manager; ``set_detect_anomaly(mode)`` sets it from the call on, or inside a
``with`` block, as torch's)."""

from tape.autodiff import backward  # noqa: F401
from tape.functional import gradients as grad  # noqa: F401
from tape.state import STATE
from tape.state import detect_anomaly as _detect_anomaly


def detect_anomaly(check_nan: bool = True):
    """torch.autograd.detect_anomaly: tape.detect_anomaly() (``check_nan=False`` has nothing left to check)."""
    if not check_nan:
        raise ValueError("detect_anomaly: check_nan=False is not supported: minitape's anomaly mode checks NaN/inf")
    return _detect_anomaly()


class set_detect_anomaly:  # noqa: N801  -- torch's name
    """torch.autograd.set_detect_anomaly(mode): anomaly mode set to ``mode`` from the call on; as a ``with`` block,
    restored after it."""

    def __init__(self, mode: bool, check_nan: bool = True):
        if mode and not check_nan:
            raise ValueError("set_detect_anomaly: check_nan=False is not supported: minitape checks NaN/inf")
        self._before = STATE.anomaly
        STATE.anomaly = bool(mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        STATE.anomaly = self._before
