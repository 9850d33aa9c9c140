"""``torch.optim.lr_scheduler``: tape/train/schedules.py's learning-rate schedulers."""

from tape.train.schedules import *  # noqa: F403
from tape.train.schedules import LRScheduler
from tape.train.schedules import __all__ as __all__  # noqa: PLC0414

_LRScheduler = LRScheduler  # torch's older name
