"""conv ops (being written)."""

__all__ = []
