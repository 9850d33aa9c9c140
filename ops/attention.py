"""attention ops (being written)."""

__all__ = []
