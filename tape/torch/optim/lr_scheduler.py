"""``torch.optim.lr_scheduler``: tape/train/optim.py's learning-rate schedulers."""

from tape.train.optim import (  # noqa: F401
    CosineAnnealingLR,
    ExponentialLR,
    LambdaLR,
    LRScheduler,
    MultiStepLR,
    OneCycleLR,
    ReduceLROnPlateau,
    StepLR,
)

_LRScheduler = LRScheduler  # torch's older name
