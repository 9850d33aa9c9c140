"""Embedding lookup, as ``torch.nn.functional.embedding``, and its backward as an op of its own.

``embedding(input, weight, padding_idx=None)`` gathers rows of ``weight``. Its weight gradient is
``embedding_dense_backward`` (torch's ``aten.embedding_dense_backward``): the output gradient's rows
added into a zero (num_weights, dim) matrix at the looked-up indices -- repeated indices accumulate --
with the ``padding_idx`` row left at zero (torch's definition: the padding row gets no gradient although
the forward reads it). The two ops are each other's adjoints, so each one's backward calls the other and
gradients of any order stay exact. Empty index arrays give empty outputs and zero gradients.
"""

__all__ = ["embedding", "embedding_dense_backward", "embedding_bag"]

import types

import numpy as np

from tape.onnx import lowering
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop
from tape.tensors import Tensor

from ._numerics import constant_values
from ._onnx import NotExportable, extremum, scalar, tensor_type
from ._samples import transposed, uniform
from ._validation import require, require_bool, require_float, require_indices, require_integer


def _indices(t):
    return constant_values(t)


def _padding_row(num_weights, padding_idx):
    """``padding_idx`` as a row index in [0, num_weights), or None."""
    return None if padding_idx is None else int(padding_idx) % num_weights


# -- embedding ---------------------------------------------------------------------------------------------
def _embedding(input, weight, padding_idx=None):
    return weight[input]


def _embedding_vjp(g, ans, input, weight, padding_idx=None):
    return _dense_backward(g, input, weight.shape[0], _padding_row(weight.shape[0], padding_idx))


def _check_padding_idx(op, padding_idx, n: int) -> None:
    """padding_idx: None or a row of the n-row weight, counted from the end when negative."""
    if padding_idx is not None:
        require(
            bool(
                isinstance(padding_idx, int | np.integer)
                and not isinstance(padding_idx, bool)
                and -n <= padding_idx < n
            ),
            op,
            "padding_idx",
            f"None or an int in [{-n}, {n - 1}]",
            padding_idx,
        )


def _check_embedding(input, weight, padding_idx=None):
    require_integer("embedding", "input", input)
    require_float("embedding", "weight", weight)
    require(weight.ndim == 2, "embedding", "weight", "a 2-D (num_embeddings, embedding_dim) tensor", weight.shape)
    n = weight.shape[0]
    require_indices("embedding", "input", input, 0, n, f"indices in [0, {n - 1}]")
    _check_padding_idx("embedding", padding_idx, n)


def _embedding_samples(rng):
    weight = uniform(rng, (6, 3))
    # The padding row gets no gradient although the forward reads it (torch's definition), so finite
    # differences cannot agree where it is looked up: samples keep padding_idx out of the indices and
    # tests/ops/test_nn.py checks the hit against torch.
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
    doc=(
        "The rows of ``weight`` at the integer ``input``: output shape input.shape + (embedding_dim,);\n"
        "the row padding_idx receives no gradient."
    ),
)


# -- embedding_dense_backward ------------------------------------------------------------------------------
def _dense_backward(grad_output, indices, num_weights, padding_row):
    """The weight gradient: rows of ``grad_output`` summed into (num_weights, dim) at ``indices``. On Tensors
    (a create_graph backward) it is the recorded op, reading the indices as the tensor they are (a recorded graph
    then takes them as its input, not as a constant); on arrays its kernel."""
    if isinstance(grad_output, Tensor):
        return embedding_dense_backward(grad_output, indices, num_weights, padding_row)
    return _embedding_dense_backward(grad_output, _indices(indices), num_weights, padding_row)


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
    if padding_idx is not None:
        keep = np.ones((num_weights, 1), dtype=g.dtype)
        keep[_padding_row(num_weights, padding_idx)] = 0
        g = g * keep
    return embedding(indices, g) if isinstance(g, Tensor) else g[_indices(indices)]


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
    require_indices(op, "indices", indices, 0, num_weights, f"indices in [0, {num_weights - 1}]")
    _check_padding_idx(op, padding_idx, num_weights)


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
    doc=(
        "embedding's weight gradient: the rows of grad_output summed into (num_weights, dim) at ``indices``,\n"
        "the padding_idx row zero."
    ),
)


# -- embedding_bag -------------------------------------------------------------------------------------------
_BAG_MODES = ("sum", "mean", "max")


def _bags(input, offsets, num_weights, include_last_offset, padding_idx):
    """(flat indices (n,), the (B, n) bool membership of each index in each bag -- entries equal to padding_idx
    belong to none). A 2-D input is one bag per row; a 1-D one is cut at ``offsets`` (bag b starts at
    offsets[b]; with include_last_offset the last offset ends the last bag)."""
    input = _indices(input)
    flat = input.reshape(-1)
    if input.ndim == 2:
        n_bags, bag = input.shape[0], np.repeat(np.arange(input.shape[0]), input.shape[1])
    else:
        offsets = _indices(offsets).astype(np.int64)
        starts = offsets[:-1] if include_last_offset else offsets
        end = offsets[-1] if include_last_offset and offsets.size else flat.size
        n_bags = starts.size
        bag = np.searchsorted(starts, np.arange(flat.size), side="right") - 1
        bag = np.where(np.arange(flat.size) < end, bag, -1)
    member = bag[None, :] == np.arange(n_bags)[:, None]
    padding = _padding_row(num_weights, padding_idx)
    if padding is not None:
        member &= flat[None, :] != padding
    return flat, member


def _bag_max_choice(rows, member):
    """(B, n, D) one-hot of the entry each bag's max takes per column (the first maximum, as torch), and
    whether the bag is non-empty (B, 1)."""
    values = np.where(member[:, :, None], _indices(rows)[None], -np.inf)
    pick = np.argmax(values, axis=1) if values.shape[1] else np.zeros(values.shape[::2], np.int64)  # (B, D)
    choice = (np.arange(values.shape[1])[None, :, None] == pick[:, None, :]) & member[:, :, None]
    return choice.astype(rows.dtype), np.any(member, axis=1, keepdims=True)


def _bag_parts(input, weight, offsets, per_sample_weights, mode, include_last_offset, padding_idx):
    """(flat indices, membership, the looked-up rows (n, D) scaled by per_sample_weights, the (B, n) reduction
    coefficients for 'sum' and 'mean' -- 1 / count for mean, an empty bag giving 0)."""
    flat, member = _bags(input, offsets, weight.shape[0], include_last_offset, padding_idx)
    rows = weight[flat]
    if per_sample_weights is not None:
        rows = rows * np.reshape(per_sample_weights, (-1, 1))
    coefficients = member.astype(weight.dtype)
    if mode == "mean":
        coefficients = coefficients / np.maximum(np.sum(member, axis=1, keepdims=True), 1).astype(weight.dtype)
    return flat, member, rows, coefficients


def _embedding_bag(
    input,
    weight,
    offsets=None,
    max_norm=None,
    norm_type=2,
    scale_grad_by_freq=False,
    mode="mean",
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=None,
):
    """``torch.nn.functional.embedding_bag``: the sum, mean or max of each bag's embedding rows (sum: each row
    times its per_sample_weight), an empty bag giving zeros."""
    _, member, rows, coefficients = _bag_parts(
        input, weight, offsets, per_sample_weights, mode, include_last_offset, padding_idx
    )
    # each bag sums only its members' rows: a matmul with the coefficients would add 0 * NaN (or 0 * inf) of the
    # other bags' rows
    if mode != "max":
        return np.sum(np.where(member[:, :, None], rows[None], 0) * coefficients[:, :, None], axis=1)
    choice, filled = _bag_max_choice(rows, member)
    return np.where(filled, np.sum(np.where(choice > 0, rows[None], 0), axis=1), 0)


def _embedding_bag_vjp(
    g,
    ans,
    input,
    weight,
    offsets,
    per_sample_weights,
    *,
    needs,
    mode="mean",
    include_last_offset=False,
    padding_idx=None,
    **attrs,
):
    flat, member, rows, coefficients = _bag_parts(
        input, weight, offsets, per_sample_weights, mode, include_last_offset, padding_idx
    )
    if mode == "max":
        choice, _ = _bag_max_choice(rows, member)
        grad_rows = np.sum(choice * g[:, None, :], axis=0)  # (n, D): each bag's column max gets its gradient
    else:
        grad_rows = np.transpose(coefficients) @ g
    grad_psw = None
    if needs[3]:
        grad_psw = np.reshape(np.sum(grad_rows * weight[flat], axis=1), per_sample_weights.shape)
    if needs[1] and per_sample_weights is not None:
        grad_rows = grad_rows * np.reshape(per_sample_weights, (-1, 1))
    grad_weight = _dense_backward(grad_rows, flat, weight.shape[0], None) if needs[1] else None
    return None, grad_weight, None, grad_psw


def _check_bag_offsets(op, input, offsets, include_last_offset):
    if input.ndim == 2:
        require(offsets is None, op, "offsets", "None for a 2-D input (each row is a bag)", "a tensor")
        return
    require(offsets is not None, op, "offsets", "a 1-D tensor of bag starts for a 1-D input", None)
    require_integer(op, "offsets", offsets)
    require(offsets.ndim == 1, op, "offsets", "a 1-D tensor", f"shape {offsets.shape}")
    if offsets.size:
        ok = int(offsets[0]) == 0 and bool(np.all(np.diff(offsets) >= 0)) and int(offsets[-1]) <= input.size
        require(
            ok, op, "offsets", f"non-decreasing starts from 0 up to the input's size {input.size}", offsets.tolist()
        )
    require(
        not include_last_offset or offsets.size >= 1, op, "offsets", "at least one entry (include_last_offset)", "none"
    )


def _check_embedding_bag(input, weight, offsets=None, per_sample_weights=None, **attributes):
    op = "embedding_bag"
    a = types.SimpleNamespace(**{**embedding_bag.attr_defaults, **attributes})  # the parameter list is the forward's
    require_integer(op, "input", input)
    require(input.ndim in (1, 2), op, "input", "a 1-D (with offsets) or 2-D (B, L) tensor of indices", input.shape)
    require_float(op, "weight", weight)
    require(weight.ndim == 2, op, "weight", "a 2-D (num_embeddings, embedding_dim) tensor", weight.shape)
    n = weight.shape[0]
    require_indices(op, "input", input, 0, n, f"indices in [0, {n - 1}]")
    _check_bag_offsets(op, input, offsets, a.include_last_offset)
    for name in ("scale_grad_by_freq", "sparse", "include_last_offset"):
        require_bool(op, name, getattr(a, name))
    require(isinstance(a.mode, str) and a.mode in _BAG_MODES, op, "mode", "'sum', 'mean' or 'max'", repr(a.mode))
    for name, supported in (("max_norm", None), ("scale_grad_by_freq", False), ("sparse", False)):
        value = getattr(a, name)
        require(
            value is supported,  # the flags are bools by now; max_norm's only supported value is None
            op,
            name,
            f"{supported} (no renormalisation of the weight in place, no sparse gradients)",
            value,
        )
    if per_sample_weights is not None:
        require(a.mode == "sum", op, "per_sample_weights", "None unless mode='sum' (as torch)", f"mode={a.mode!r}")
        require_float(op, "per_sample_weights", per_sample_weights)
        require(
            per_sample_weights.shape == input.shape,
            op,
            "per_sample_weights",
            f"the input's shape {input.shape}",
            per_sample_weights.shape,
        )
    _check_padding_idx(op, a.padding_idx, n)


def _embedding_bag_samples(rng):
    weight = uniform(rng, (6, 3))
    idx = np.array([0, 2, 5, 2, 2, 1, 4])
    offsets = np.array([0, 3, 3, 5])  # bag 1 is empty
    psw = uniform(rng, (7,), 0.2, 2.0)
    return [
        Sample((idx, weight, offsets, None), {"mode": "sum"}, "sum, an empty bag"),
        Sample((idx, weight, offsets, None), {}, "mean"),
        Sample((idx, weight, offsets, None), {"mode": "max"}, "max"),
        Sample((idx, weight, offsets, psw), {"mode": "sum"}, "per_sample_weights"),
        Sample(
            (idx, weight, np.array([0, 2, 7]), None),
            {"mode": "mean", "include_last_offset": True},
            "include_last_offset",
        ),
        Sample(
            (np.array([[0, 2, 5], [2, 3, 1]]), weight, None, None),
            {"mode": "sum", "padding_idx": 2},
            "2-D, padding_idx",
        ),
        Sample(
            (np.array([[4, 0], [0, 1]]), transposed(rng, (6, 3)), None, None),
            {"mode": "max"},
            "2-D, non-contiguous weight",
        ),
        Sample((np.array([[2, 2], [1, 2]]), weight, None, None), {"padding_idx": -4}, "mean over padding only"),
        Sample((np.zeros(0, np.int64), weight, np.array([0, 0]), None), {"mode": "sum"}, "no indices"),
    ]


def _torch_embedding_bag(torch, input, weight, offsets=None, per_sample_weights=None, **attrs):
    return torch.nn.functional.embedding_bag(input, weight, offsets, per_sample_weights=per_sample_weights, **attrs)


embedding_bag = defop(
    "embedding_bag",
    family="embedding",
    inputs=("input", "weight", "offsets?", "per_sample_weights?"),
    forward=_embedding_bag,
    joint_vjp=_embedding_bag_vjp,
    differentiable=(NOT_DIFFERENTIABLE, True, NOT_DIFFERENTIABLE, True),
    check=_check_embedding_bag,
    samples=_embedding_bag_samples,
    notes="Bags as a (B, n) membership matrix (a matmul for sum and mean, the first column maximum for max); the "
    "weight gradient is embedding_dense_backward of the rows' gradients, so every order is recorded. max_norm, "
    "scale_grad_by_freq and sparse are refused.",
    torch_ref=_torch_embedding_bag,
)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_embedding(g, rec, input, weight):
    return g.op("Gather", weight, input, axis=0)  # padding_idx only changes the gradient


lowering(embedding, _onnx_embedding)


def _onnx_dense_backward(g, rec, grad_output, indices):
    """ScatterND with reduction 'add' of the rows into zeros (num_weights, dim); the padding row set to 0 after.
    ONNX Runtime sums the repeated indices in its own order (float32: ~1e-7 relative, as the forward's
    reduceat differs from np.add.at)."""
    a = rec.attributes
    num_weights, shape = int(a["num_weights"]), rec.inputs[0].shape
    dtype = np.dtype(rec.inputs[0].dtype)
    if dtype.kind != "f":
        raise NotExportable(f"a non-floating grad_output ({dtype}) has no lowering")
    if 0 in shape or num_weights == 0:
        raise NotExportable("an empty grad_output or num_weights=0 has no lowering (the gradient is a constant)")
    dim = shape[-1]
    zeros = g.op("ConstantOfShape", g.ints([num_weights, dim]), value=g.tensor(np.zeros(1, dtype)))
    rows = g.op("Reshape", indices, g.ints([-1, 1]))
    updates = g.op("Reshape", grad_output, g.ints([-1, dim]))
    out = g.op("ScatterND", zeros, rows, updates, reduction="add")
    padding = _padding_row(num_weights, a.get("padding_idx"))
    if padding is not None:
        row = np.zeros((num_weights, 1), bool)
        row[padding] = True
        out = g.op("Where", g.const(row), scalar(g, 0, dtype), out)  # 0 also where the row sums NaN or inf
    return out


lowering(embedding_dense_backward, _onnx_dense_backward)


def _onnx_bag_membership(g, rec, flat, offsets, n: int):
    """The (B, n) bool membership of _bags: a 2-D input's rows as bags (a constant), a 1-D input's entries in the
    bag whose start is the last one <= their position (the forward's searchsorted, as a count) and before the
    end; entries equal to padding_idx in none."""
    a = rec.attributes
    shape = rec.inputs[0].shape
    positions = g.const(np.arange(n, dtype=np.int64))
    if len(shape) == 2:
        member = g.const(np.arange(n)[None, :] // shape[1] == np.arange(shape[0])[:, None])
    else:
        offsets = g.op("Cast", offsets, to=7)  # 7: INT64
        count = rec.inputs[2].shape[0]
        last = bool(a.get("include_last_offset", False))
        starts = g.op("Slice", offsets, g.ints([0]), g.ints([count - 1 if last else count]), g.ints([0]))
        before = g.op("LessOrEqual", g.op("Unsqueeze", starts, g.ints([1])), positions)  # (B, n)
        bag = g.op("Sub", g.op("ReduceSum", g.op("Cast", before, to=7), g.ints([0]), keepdims=1), g.ints([1]))
        member = g.op("Equal", bag, g.op("Unsqueeze", g.const(np.arange(count - last, dtype=np.int64)), g.ints([1])))
        if last:
            end = g.op("Slice", offsets, g.ints([count - 1]), g.ints([count]), g.ints([0]))
            member = g.op("And", member, g.op("Less", positions, end))
    padding = _padding_row(rec.inputs[1].shape[0], a.get("padding_idx"))
    if padding is not None:
        member = g.op("And", member, g.op("Not", g.op("Equal", flat, g.const(np.array(padding, np.int64)))))
    return member


def _onnx_embedding_bag(g, rec, input, weight, offsets=None, per_sample_weights=None):
    """sum / mean as the forward's coefficient-weighted sums of each bag's member rows; max as each bag's NaN-keeping
    maximum over its members (0 for an empty bag)."""
    a = rec.attributes
    dtype = rec.inputs[1].dtype
    n = int(np.prod(rec.inputs[0].shape, dtype=np.int64))
    if n == 0 or (offsets is not None and rec.inputs[2].shape[0] <= bool(a.get("include_last_offset", False))):
        raise NotExportable("no indices, or no bags, have no lowering")
    flat = g.op("Reshape", g.op("Cast", input, to=7), g.ints([-1]))  # 7: INT64
    member = _onnx_bag_membership(g, rec, flat, offsets, n)
    rows = g.op("Gather", weight, flat, axis=0)
    if per_sample_weights is not None:
        rows = g.op("Mul", rows, g.op("Reshape", per_sample_weights, g.ints([-1, 1])))
    mode = a.get("mode", "mean")
    if mode == "max":
        values = g.op("Where", g.op("Unsqueeze", member, g.ints([2])), rows, scalar(g, -np.inf, dtype))  # (B, n, D)
        top = extremum(g, "ReduceMax", values, [1], 0, dtype)
        filled = g.op(
            "Not",
            g.op(
                "Equal",
                g.op("ReduceMax", g.op("Cast", member, to=6), g.ints([1]), keepdims=1),
                g.const(np.array(0, np.int32)),
            ),
        )
        return g.op("Where", filled, top, scalar(g, 0, dtype))
    coefficients = g.op("Cast", member, to=tensor_type(dtype))
    if mode == "mean":
        counts = g.op("ReduceSum", g.op("Cast", member, to=7), g.ints([1]), keepdims=1)
        counts = g.op("Cast", g.op("Max", counts, g.const(np.array(1, np.int64))), to=tensor_type(dtype))
        coefficients = g.op("Div", coefficients, counts)
    kept = g.op("Where", g.op("Unsqueeze", member, g.ints([2])), rows, scalar(g, 0, dtype))  # (B, n, D)
    return g.op("ReduceSum", g.op("Mul", kept, g.op("Unsqueeze", coefficients, g.ints([2]))), g.ints([1]), keepdims=0)


lowering(embedding_bag, _onnx_embedding_bag)
