"""``torch.autograd``: ``grad`` (tape.gradients, torch's signature) and ``backward``."""

from tape.autodiff import backward  # noqa: F401
from tape.functional import gradients as grad  # noqa: F401
