"""``torch.nn.utils``: ``clip_grad_norm_`` and ``clip_grad_value_`` (tape/train/optim.py's)."""

from tape.train.optim import clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad_norm_", "clip_grad_value_"]
