"""``torch.nn.utils``: ``clip_grad_norm_`` and ``clip_grad_value_`` (tape/train/optim.py's), and
``parameters_to_vector`` / ``vector_to_parameters`` (ops.cat of the flattened parameters; the parameters' values
written in place, as torch's ``param.data = ...``); ``rnn`` holds pad_sequence."""

import ops
from tape.state import no_grad
from tape.train.optim import clip_grad_norm_, clip_grad_value_

from . import rnn  # noqa: F401

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters", "rnn"]


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated into one vector (in the graph, as torch's)."""
    return ops.cat([ops.reshape(p, (-1,)) for p in parameters])


def vector_to_parameters(vec, parameters) -> None:
    """Each parameter's values taken from consecutive slices of ``vec`` (1-D), in place; nothing is recorded."""
    if vec.ndim != 1:
        raise TypeError(f"vector_to_parameters: argument 'vec' expected a 1-D tensor, got shape {tuple(vec.shape)}")
    params = list(parameters)
    need = sum(p.numel() for p in params)
    if vec.numel() != need:
        raise ValueError(f"vector_to_parameters: 'vec' has {vec.numel()} values, the parameters hold {need}")
    start = 0
    with no_grad():
        for p in params:
            p.copy_(ops.reshape(vec[start : start + p.numel()], tuple(p.shape)))
            start += p.numel()
