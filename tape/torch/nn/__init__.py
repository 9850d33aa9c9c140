"""``import tape.torch.nn as nn``: minitape's modules (tape/train/nn.py, tape/train/rnn.py) under torch.nn's names,
with ``nn.functional``, ``nn.init``, ``nn.utils`` and ``nn.modules`` as submodules."""

from tape.train.nn import *  # noqa: F403
from tape.train.nn import __all__ as _modules

from . import functional, init, modules, parallel, utils  # type: ignore[no-redef]  # noqa: F401
from .parallel import DataParallel

__all__ = [*_modules, "DataParallel", "functional", "init", "modules", "parallel", "utils"]
