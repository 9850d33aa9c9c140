"""``import tape.torch.optim as optim``: tape/train/optim.py's optimizers; the schedulers in ``optim.lr_scheduler``."""

from tape.train.optim import *  # noqa: F403
from tape.train.optim import __all__ as _all

from . import lr_scheduler  # noqa: F401

__all__ = [*_all, "lr_scheduler"]
