"""``torch.utils``: ``utils.data`` (tape/train/data.py)."""

from . import data  # noqa: F401
