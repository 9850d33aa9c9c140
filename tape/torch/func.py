"""``torch.func``: ``functional_call`` (tape/train/func.py) and the transforms (tape/functional.py)."""

from tape.functional import grad, hessian, jacobian, vjp  # noqa: F401
from tape.train.func import functional_call  # noqa: F401

jacrev = jacobian
