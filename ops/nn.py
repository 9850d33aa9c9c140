"""nn ops (being written)."""

__all__ = []
