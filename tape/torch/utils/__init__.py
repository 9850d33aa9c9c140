"""``torch.utils``: ``utils.data`` (tape/train/data.py) and ``utils.checkpoint``."""

from . import checkpoint, data  # noqa: F401
