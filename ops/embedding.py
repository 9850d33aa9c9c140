"""Embedding lookup, as ``torch.nn.functional.embedding``, and its backward as an op of its own.

``embedding(input, weight, padding_idx=None)`` gathers rows of ``weight``. Its weight gradient is
``embedding_dense_backward`` (torch's ``aten.embedding_dense_backward``): the output gradient's rows
added into a zero (num_weights, dim) matrix at the looked-up indices -- repeated indices accumulate --
with the ``padding_idx`` row left at zero (torch's definition: the padding row gets no gradient although
the forward reads it). The two ops are each other's adjoints, so each one's backward calls the other and
gradients of any order stay exact. Empty index arrays give empty outputs and zero gradients.
"""

__all__ = ["embedding", "embedding_dense_backward"]

import numpy as np

from tape.onnx import lowering
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop
from tape.tensors import Tensor

from ._samples import transposed, uniform
from ._validation import require, require_float, require_integer


def _indices(t):
    return t.data if isinstance(t, Tensor) else t


def _padding_row(num_weights, padding_idx):
    """``padding_idx`` as a row index in [0, num_weights), or None."""
    return None if padding_idx is None else int(padding_idx) % num_weights


# -- embedding ---------------------------------------------------------------------------------------------
def _embedding(input, weight, padding_idx=None):
    return weight[input]


def _embedding_vjp(g, ans, input, weight, padding_idx=None):
    return _dense_backward(g, _indices(input), weight.shape[0], _padding_row(weight.shape[0], padding_idx))


def _check_embedding(input, weight, padding_idx=None):
    require_integer("embedding", "input", input)
    require_float("embedding", "weight", weight)
    require(weight.ndim == 2, "embedding", "weight", "a 2-D (num_embeddings, embedding_dim) tensor", weight.shape)
    n = weight.shape[0]
    if input.size:
        low, high = int(input.min()), int(input.max())
        require(low >= 0 and high < n, "embedding", "input", f"indices in [0, {n - 1}]", f"values in [{low}, {high}]")
    if padding_idx is not None:
        require(
            isinstance(padding_idx, int | np.integer) and not isinstance(padding_idx, bool) and -n <= padding_idx < n,
            "embedding",
            "padding_idx",
            f"None or an int in [{-n}, {n - 1}]",
            padding_idx,
        )


def _embedding_samples(rng):
    weight = uniform(rng, (6, 3))
    # The padding row gets no gradient although the forward reads it (torch's definition), so finite
    # differences cannot agree where it is looked up: samples keep padding_idx out of the indices and
    # tests/test_ops_nn.py checks the hit against torch.
    return [
        Sample((np.array([[0, 2, 5], [2, 2, 1]]), weight), {}, "repeated indices"),
        Sample((np.array([1, 3, 3, 0]), weight), {"padding_idx": 2}, "padding_idx set, not looked up"),
        Sample((np.array([[4, 0], [0, 1]]), weight), {"padding_idx": -1}, "negative padding_idx"),
        Sample((np.array(2), weight), {}, "scalar index"),
        Sample((np.array([[0, 1, 2]]).T, transposed(rng, (3, 6))), {}, "non-contiguous"),
        Sample((np.zeros((2, 0), dtype=np.int64), weight), {}, "no indices"),
    ]


embedding = defop(
    "embedding",
    family="embedding",
    inputs=("input", "weight"),
    forward=_embedding,
    vjps=(NOT_DIFFERENTIABLE, _embedding_vjp),
    check=_check_embedding,
    samples=_embedding_samples,
    torch_ref=lambda torch, input, weight, padding_idx=None: torch.nn.functional.embedding(
        input, weight, padding_idx=padding_idx
    ),
)


# -- embedding_dense_backward ------------------------------------------------------------------------------
def _dense_backward(grad_output, indices, num_weights, padding_row):
    """The weight gradient: rows of ``grad_output`` summed into (num_weights, dim) at ``indices``. On Tensors
    (a create_graph backward) it is the recorded op; on arrays its kernel."""
    if isinstance(grad_output, Tensor):
        return embedding_dense_backward(grad_output, indices, num_weights, padding_row)
    return _embedding_dense_backward(grad_output, indices, num_weights, padding_row)


def _embedding_dense_backward(grad_output, indices, num_weights, padding_idx=None):
    dim = grad_output.shape[-1]
    grad = np.zeros((num_weights, dim), dtype=grad_output.dtype)
    flat = indices.reshape(-1)
    if flat.size:
        # rows grouped by index, each group summed by reduceat: many times faster than np.add.at's row-by-row
        # scatter; the float32 sums round in reduceat's order instead (~1e-7 relative; torch has its own order)
        order = np.argsort(flat, kind="stable")
        rows = flat[order]
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        grad[rows[starts]] = np.add.reduceat(grad_output.reshape(flat.size, dim)[order], starts, axis=0)
    if padding_idx is not None:
        grad[_padding_row(num_weights, padding_idx)] = 0
    return grad


def _embedding_dense_backward_vjp(g, ans, grad_output, indices, num_weights, padding_idx=None):
    # the adjoint of the scatter is the gather: row n of the gradient is g[indices[n]] (0 at the padding row)
    indices = _indices(indices)
    if padding_idx is not None:
        keep = np.ones((num_weights, 1), dtype=g.dtype)
        keep[_padding_row(num_weights, padding_idx)] = 0
        g = g * keep
    return embedding(indices, g) if isinstance(g, Tensor) else g[indices]


def _check_dense_backward(grad_output, indices, num_weights, padding_idx=None):
    op = "embedding_dense_backward"
    require_float(op, "grad_output", grad_output)
    require_integer(op, "indices", indices)
    require(
        bool(isinstance(num_weights, int | np.integer) and not isinstance(num_weights, bool) and num_weights >= 0),
        op,
        "num_weights",
        "an int >= 0",
        num_weights,
    )
    require(
        grad_output.ndim >= 1 and grad_output.shape[:-1] == indices.shape,
        op,
        "grad_output",
        f"shape indices.shape + (embedding_dim,) = {indices.shape} + (dim,)",
        grad_output.shape,
    )
    if indices.size:
        low, high = int(indices.min()), int(indices.max())
        require(
            low >= 0 and high < num_weights,
            op,
            "indices",
            f"indices in [0, {num_weights - 1}]",
            f"values in [{low}, {high}]",
        )
    if padding_idx is not None:
        require(
            isinstance(padding_idx, int | np.integer)
            and not isinstance(padding_idx, bool)
            and -num_weights <= padding_idx < num_weights,
            op,
            "padding_idx",
            f"None or an int in [{-num_weights}, {num_weights - 1}]",
            padding_idx,
        )


def _dense_backward_samples(rng):
    return [
        Sample((uniform(rng, (2, 3, 4)), np.array([[0, 2, 5], [2, 2, 1]])), {"num_weights": 6}, "repeated indices"),
        Sample((uniform(rng, (4, 3)), np.array([1, 3, 3, 0])), {"num_weights": 5, "padding_idx": 3}, "padding row hit"),
        Sample((uniform(rng, (3,)), np.array(2)), {"num_weights": 4}, "scalar index"),
        Sample(
            (transposed(rng, (3, 2)), np.array([4, 0, 4])),
            {"num_weights": 5, "padding_idx": -1},
            "non-contiguous, negative padding_idx",
        ),
        Sample((uniform(rng, (0, 3)), np.zeros(0, dtype=np.int64)), {"num_weights": 4}, "no indices", torch=False),
    ]  # torch's kernel cannot reshape an empty grad_output


def _torch_dense_backward(torch, grad_output, indices, num_weights, padding_idx=None):
    padding = -1 if padding_idx is None else padding_idx % num_weights
    return torch.ops.aten.embedding_dense_backward(grad_output, indices, num_weights, padding, False)


embedding_dense_backward = defop(
    "embedding_dense_backward",
    family="embedding",
    inputs=("grad_output", "indices"),
    forward=_embedding_dense_backward,
    vjps=(_embedding_dense_backward_vjp, NOT_DIFFERENTIABLE),
    check=_check_dense_backward,
    samples=_dense_backward_samples,
    torch_ref=_torch_dense_backward,
    notes="embedding's weight gradient (torch.ops.aten.embedding_dense_backward without scale_grad_by_freq); "
    "its own backward is embedding.",
)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_embedding(g, rec, input, weight):
    return g.op("Gather", weight, input, axis=0)  # padding_idx only changes the gradient


lowering(embedding, _onnx_embedding)
lowering(embedding_dense_backward, not_exportable="a backward kernel (the export records a forward call for inference)")
