"""The engine's exception types: each says which op, which input, what was expected and what was got."""

__all__ = [
    "BackwardNotImplementedError",
    "GradientError",
    "GraphFreedError",
    "AnomalyError",
    "ReplayError",
    "InPlaceModificationError",
    "RegistrationError",
]


class BackwardNotImplementedError(NotImplementedError):
    """The reverse pass reached an op whose backward is a registered stub."""


class GradientError(RuntimeError):
    """A backward rule returned None, or an array of the wrong shape or dtype."""


class GraphFreedError(RuntimeError):
    """A backward went through ops whose saved values an earlier backward already freed."""


class InPlaceModificationError(RuntimeError):
    """A tensor saved for backward got a new value (``t.data = ...``) before the backward ran."""


class AnomalyError(FloatingPointError):
    """detect_anomaly() found NaN or inf in a forward output or a backward result."""


class ReplayError(RuntimeError):
    """A recorded op could not be re-executed (op no longer registered, missing input value)."""


class RegistrationError(ValueError):
    """An op declaration is inconsistent (wrong rule count, duplicate name, bad marker)."""
