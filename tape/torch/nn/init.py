"""``torch.nn.init``: tape/train/init.py's initialisers."""

from tape.train.init import *  # noqa: F403
from tape.train.init import __all__  # noqa: F401
