"""``torch.nn.utils``: ``clip_grad_norm_`` (tape/train/optim.py's)."""

from tape.train.optim import clip_grad_norm_

__all__ = ["clip_grad_norm_"]
