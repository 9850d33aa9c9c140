"""``from tape.torch.utils.data import Dataset, DataLoader, ...``: tape/train/data.py's datasets, samplers and
loader; ``utils.data.dataloader`` and ``utils.data.distributed`` are module paths torch programs also import from."""

from tape.train.data import *  # noqa: F403
from tape.train.data import __all__ as _all

from . import dataloader, distributed  # noqa: F401

__all__ = [*_all, "dataloader", "distributed"]
