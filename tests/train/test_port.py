"""Real PyTorch snippets ported to minitape, checked against torch autograd in float64 (issue #12).

Each snippet is written twice, side by side: ``*_torch`` is ordinary PyTorch code (torch.nn.functional and
Tensor methods), ``*_port`` is the same code as a user porting it to minitape writes it (``ops.*`` under
torch's names and arguments, Tensor methods, ``np`` for constants). Both read their inputs and parameters from
the same namespace ``p`` of leaves and return a dict of named results holding a scalar ``"loss"``; the test
compares every result and the gradient of the loss w.r.t. every floating leaf with torch.

The snippets: a U-Net-style block (conv2d, group and layer norm, max_pool2d, conv_transpose2d and bilinear /
nearest interpolate, a skip concat, a 1x1 head), a top-k sampler (temperature, topk, masking by scatter or by
masked_fill, softmax, inverse-CDF sampling with a fixed uniform draw), scatter-based segment reductions with a
message-passing layer, GRU / LSTM cell steps against torch.nn.GRUCell / LSTMCell, and sinusoidal positional
encodings with masked mean / max pooling. Where minitape lacks a torch idiom the port says so in a comment and
spells it with what exists (hand-written group norm, comparisons for searchsorted, ops.logical_not for ``~``).
"""

import difflib
import importlib
import math
import pathlib
import re
import types
from types import SimpleNamespace

import numpy as np
import pytest

import ops
import tape
import tape.torch
from tape import nn

RTOL, ATOL = 1e-10, 1e-12  # float64 on both sides: only summation order differs


def _leaves(make, arrays: dict, constants: tuple) -> SimpleNamespace:
    """Each array as a leaf made by ``make(array, requires_grad)``; floating arrays not in ``constants``
    require grad."""
    return SimpleNamespace(
        **{name: make(a, a.dtype.kind == "f" and name not in constants) for name, a in arrays.items()}
    )


def check_port(torch, torch_snippet, port_snippet, arrays: dict, constants: tuple = (), **options) -> dict:
    """Run both snippets on the same float64 ``arrays``; assert that every result and the loss's gradient
    w.r.t. every floating leaf (``constants`` excepted) agree with torch, in shape and dtype too (token ids and
    indices exactly). Returns torch's results as numpy."""
    theirs = _leaves(lambda a, grad: torch.tensor(a, requires_grad=grad), arrays, constants)
    ours = _leaves(lambda a, grad: tape.tensor(a, requires_grad=grad), arrays, constants)
    expected, got = torch_snippet(torch, theirs, **options), port_snippet(ours, **options)
    expected["loss"].backward()
    got["loss"].backward()
    assert set(got) == set(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(
            got[name].numpy(), value.detach().numpy(), RTOL, ATOL, err_msg=f"result {name!r}", strict=True
        )
    differentiated = [name for name, leaf in vars(theirs).items() if leaf.requires_grad]
    assert differentiated, "a snippet with nothing to differentiate checks no gradient"
    for name in differentiated:
        assert getattr(ours, name).grad is not None, f"no gradient reached {name!r}"
        np.testing.assert_allclose(
            getattr(ours, name).grad.numpy(),
            getattr(theirs, name).grad.numpy(),
            RTOL,
            ATOL,
            err_msg=f"gradient w.r.t. {name!r}",
            strict=True,
        )
    return {name: value.detach().numpy() for name, value in expected.items()}


# -- 1. a U-Net-style block ----------------------------------------------------------------------------------
GROUPS = 2


def unet_block_torch(torch, p):
    F = torch.nn.functional
    skip = F.relu(F.group_norm(F.conv2d(p.x, p.enc_w, p.enc_b, padding=1), GROUPS, p.gn_w, p.gn_b))
    down = F.max_pool2d(skip, 2)
    mid = F.conv2d(down, p.mid_w, p.mid_b, padding=1)
    mid = F.relu(F.layer_norm(mid, mid.shape[1:], p.ln_w, p.ln_b))
    up_learned = F.conv_transpose2d(mid, p.up_w, p.up_b, stride=2)
    up_bilinear = F.interpolate(mid, scale_factor=2, mode="bilinear", align_corners=False)
    up_nearest = F.interpolate(mid, size=skip.shape[-2:], mode="nearest")
    out = F.conv2d(torch.cat([skip, up_learned, up_bilinear, up_nearest], dim=1), p.head_w, p.head_b)
    return {"out": out, "loss": F.mse_loss(out, p.target)}


def group_norm_port(x, num_groups, weight, bias, eps=1e-5):
    """F.group_norm has no minitape op: the port writes it with reshape, mean and var."""
    n, c = x.shape[:2]
    grouped = x.reshape(n, num_groups, -1)
    mean = grouped.mean(dim=-1, keepdim=True)
    var = grouped.var(dim=-1, correction=0, keepdim=True)  # torch code would also say unbiased=False
    normalized = ((grouped - mean) / ops.sqrt(var + eps)).reshape(x.shape)
    affine_shape = (1, c) + (1,) * (x.ndim - 2)
    return normalized * weight.reshape(affine_shape) + bias.reshape(affine_shape)


def unet_block_port(p):
    F = ops
    skip = F.relu(group_norm_port(F.conv2d(p.x, p.enc_w, p.enc_b, padding=1), GROUPS, p.gn_w, p.gn_b))
    down = F.max_pool2d(skip, 2)
    mid = F.conv2d(down, p.mid_w, p.mid_b, padding=1)
    mid = F.relu(F.layer_norm(mid, mid.shape[1:], p.ln_w, p.ln_b))
    up_learned = F.conv_transpose2d(mid, p.up_w, p.up_b, stride=2)
    up_bilinear = F.interpolate(mid, scale_factor=2, mode="bilinear", align_corners=False)
    up_nearest = F.interpolate(mid, size=skip.shape[-2:], mode="nearest")
    out = F.conv2d(ops.cat([skip, up_learned, up_bilinear, up_nearest], dim=1), p.head_w, p.head_b)
    return {"out": out, "loss": F.mse_loss(out, p.target)}


def test_unet_block(torch):
    rng = np.random.default_rng(1)
    c_in, c_skip, c_mid, c_up, c_out = 3, 4, 6, 5, 2
    arrays = {
        "x": rng.normal(size=(2, c_in, 8, 8)),
        "target": rng.normal(size=(2, c_out, 8, 8)),
        "enc_w": rng.normal(size=(c_skip, c_in, 3, 3)) / 4,
        "enc_b": rng.normal(size=c_skip),
        "gn_w": rng.uniform(0.5, 1.5, size=c_skip),
        "gn_b": rng.normal(size=c_skip),
        "mid_w": rng.normal(size=(c_mid, c_skip, 3, 3)) / 6,
        "mid_b": rng.normal(size=c_mid),
        "ln_w": rng.uniform(0.5, 1.5, size=(c_mid, 4, 4)),
        "ln_b": rng.normal(size=(c_mid, 4, 4)),
        "up_w": rng.normal(size=(c_mid, c_up, 2, 2)) / 2,  # transposed conv: (in, out, kH, kW)
        "up_b": rng.normal(size=c_up),
        "head_w": rng.normal(size=(c_out, c_skip + c_up + 2 * c_mid, 1, 1)) / 4,
        "head_b": rng.normal(size=c_out),
    }
    results = check_port(torch, unet_block_torch, unet_block_port, arrays)
    assert results["out"].shape == (2, c_out, 8, 8)


# -- 2. a top-k sampler --------------------------------------------------------------------------------------
TOP_K = 4


def topk_sampler_torch(torch, p, masking):
    F = torch.nn.functional
    scaled = p.logits / p.temperature
    values, indices = torch.topk(scaled, TOP_K, dim=-1)
    if masking == "scatter":
        masked = torch.full_like(scaled, float("-inf")).scatter(-1, indices, values)
    else:
        masked = scaled.masked_fill(scaled < values[..., -1:], float("-inf"))
    probs = F.softmax(masked, dim=-1)
    cdf = probs.cumsum(dim=-1)
    tokens = torch.searchsorted(cdf, p.uniform[:, None], right=True).squeeze(-1).clamp(max=cdf.shape[-1] - 1)
    log_prob = F.log_softmax(masked, dim=-1).gather(-1, tokens[:, None]).squeeze(-1)
    expected_reward = (probs * p.reward).sum(dim=-1)
    return {
        "indices": indices,
        "probs": probs,
        "tokens": tokens,
        "log_prob": log_prob,
        "loss": expected_reward.sum() - log_prob.mean(),
    }


def topk_sampler_port(p, masking):
    F = ops
    scaled = p.logits / p.temperature
    values, indices = ops.topk(scaled, TOP_K, dim=-1)
    if masking == "scatter":  # no full_like: a constant tensor of numpy's making
        masked = ops.scatter(tape.tensor(np.full(scaled.shape, -np.inf)), -1, indices, values)
    else:
        masked = scaled.masked_fill(scaled < values[..., -1:], float("-inf"))
    probs = F.softmax(masked, dim=-1)
    cdf = ops.cumsum(probs, dim=-1)
    # no searchsorted: the first position whose cdf exceeds u is the count of positions whose cdf does not
    tokens = ops.sum(cdf <= p.uniform[:, None], dim=-1).clamp(max=cdf.shape[-1] - 1)
    log_prob = ops.squeeze(ops.gather(F.log_softmax(masked, dim=-1), -1, tokens[:, None]), -1)
    expected_reward = (probs * p.reward).sum(dim=-1)
    return {
        "indices": indices,
        "probs": probs,
        "tokens": tokens,
        "log_prob": log_prob,
        "loss": expected_reward.sum() - log_prob.mean(),
    }


@pytest.mark.parametrize("masking", ["scatter", "masked_fill"])
def test_topk_sampler(torch, masking):
    rng = np.random.default_rng(2)
    batch, vocab = 8, 11
    arrays = {
        "logits": rng.normal(size=(batch, vocab)) * 2,
        "temperature": np.array(0.7),
        "reward": rng.normal(size=vocab),
        "uniform": np.concatenate([[1e-9, 1 - 1e-9], rng.uniform(size=batch - 2)]),  # both ends of the cdf
    }
    results = check_port(torch, topk_sampler_torch, topk_sampler_port, arrays, constants=("uniform",), masking=masking)
    tokens = results["tokens"]
    assert tokens.dtype == np.int64
    assert all(token in row for token, row in zip(tokens, results["indices"])), "sampled outside the top k"
    assert len(set(tokens)) > 1, "the draws should not all pick one token"


def test_topk_sampler_log_prob_matches_finite_differences():
    """Torch-free check of the masked log-prob gradient: -inf entries must give zero, never NaN."""
    rng = np.random.default_rng(3)
    arrays = {"temperature": np.array(0.7), "reward": rng.normal(size=9), "uniform": rng.uniform(size=5)}

    def loss(logits):
        constants = SimpleNamespace(logits=logits, **{k: tape.tensor(v) for k, v in arrays.items()})
        return topk_sampler_port(constants, masking="masked_fill")["loss"]

    assert tape.gradcheck(loss, [tape.tensor(rng.normal(size=(5, 9)), requires_grad=True)])


# -- 3. segment reductions (graph-network style) -------------------------------------------------------------
NUM_SEGMENTS = 6


def segment_ops_torch(torch, p):
    nodes, features = p.x.shape
    index = p.segment[:, None].expand(-1, features)
    sums = p.x.new_zeros(NUM_SEGMENTS, features).index_add_(0, p.segment, p.x)
    sums_by_scatter = p.x.new_zeros(NUM_SEGMENTS, features).scatter_add_(0, index, p.x)
    counts = torch.bincount(p.segment, minlength=NUM_SEGMENTS)
    means = p.x.new_zeros(NUM_SEGMENTS, features).scatter_reduce(0, index, p.x, reduce="mean", include_self=False)
    maxes = p.x.new_zeros(NUM_SEGMENTS, features).scatter_reduce(0, index, p.x, reduce="amax", include_self=False)
    # one message-passing step: messages along edges, averaged at their destination, read back per node
    messages = torch.nn.functional.linear(p.x.index_select(0, p.edge_src), p.w)
    incoming = messages.new_zeros(nodes, messages.shape[1]).index_add_(0, p.edge_dst, messages)
    degree = torch.bincount(p.edge_dst, minlength=nodes).clamp(min=1)
    updated = torch.tanh(incoming / degree[:, None]) + means.index_select(0, p.segment)
    loss = (updated**2).sum() + (maxes * sums).sum() + (sums_by_scatter / counts.clamp(min=1)[:, None]).sum()
    return {"sums": sums, "sums_by_scatter": sums_by_scatter, "means": means, "maxes": maxes, "loss": loss}


def bincount_port(index, minlength):
    """torch.bincount has no minitape op: an index_add of ones."""
    ones = tape.tensor(np.ones(index.shape, np.int64))
    return ops.index_add(tape.tensor(np.zeros(minlength, np.int64)), 0, index, ones)


def segment_ops_port(p):
    # minitape tensors are immutable: index_add_ / scatter_add_ become their out-of-place forms, and the
    # zero buffers are numpy-made constants (no new_zeros)
    nodes, features = p.x.shape
    index = p.segment[:, None].expand(-1, features)
    zeros = tape.tensor(np.zeros((NUM_SEGMENTS, features)))
    sums = ops.index_add(zeros, 0, p.segment, p.x)
    sums_by_scatter = ops.scatter_add(zeros, 0, index, p.x)
    counts = bincount_port(p.segment, minlength=NUM_SEGMENTS)
    means = ops.scatter_reduce(zeros, 0, index, p.x, reduce="mean", include_self=False)
    maxes = ops.scatter_reduce(zeros, 0, index, p.x, reduce="amax", include_self=False)
    messages = ops.linear(ops.index_select(p.x, 0, p.edge_src), p.w)
    incoming = ops.index_add(tape.tensor(np.zeros((nodes, messages.shape[1]))), 0, p.edge_dst, messages)
    degree = bincount_port(p.edge_dst, minlength=nodes).clamp(min=1)
    updated = ops.tanh(incoming / degree[:, None]) + ops.index_select(means, 0, p.segment)
    loss = (updated**2).sum() + (maxes * sums).sum() + (sums_by_scatter / counts.clamp(min=1)[:, None]).sum()
    return {"sums": sums, "sums_by_scatter": sums_by_scatter, "means": means, "maxes": maxes, "loss": loss}


def test_segment_reductions_and_message_passing(torch):
    rng = np.random.default_rng(4)
    nodes, features = 10, 3
    segment = np.array([0, 0, 1, 3, 3, 3, 1, 0, 5, 3])  # segments 2 and 4 are empty
    x = rng.normal(size=(nodes, features))
    x[7, 0] = max(x[0, 0], x[1, 0])  # nodes 0, 1, 7 form segment 0: a tie for its max, whose gradient splits
    edges = rng.integers(0, nodes, size=(2, 16))
    arrays = {"x": x, "segment": segment, "edge_src": edges[0], "edge_dst": edges[1], "w": rng.normal(size=(3, 3))}
    results = check_port(torch, segment_ops_torch, segment_ops_port, arrays)
    assert np.all(results["means"][[2, 4]] == 0) and np.all(results["maxes"][[2, 4]] == 0), "empty segments"


# -- 4. recurrent cell steps against torch.nn.GRUCell / LSTMCell --------------------------------------------
def gru_torch(torch, p):
    cell = torch.nn.GRUCell(p.xs.shape[-1], p.h0.shape[-1], dtype=torch.float64)
    weights = {"weight_ih": p.w_ih, "weight_hh": p.w_hh, "bias_ih": p.b_ih, "bias_hh": p.b_hh}
    h = p.h0
    for x in p.xs.unbind(0):
        h = torch.func.functional_call(cell, weights, (x, h))
    return {"h": h, "loss": (h * p.target).sum()}


def gru_port(p):
    h = p.h0
    for x in ops.unbind(p.xs, 0):
        i_r, i_z, i_n = ops.chunk(ops.linear(x, p.w_ih, p.b_ih), 3, dim=1)
        h_r, h_z, h_n = ops.chunk(ops.linear(h, p.w_hh, p.b_hh), 3, dim=1)
        reset, update = ops.sigmoid(i_r + h_r), ops.sigmoid(i_z + h_z)
        candidate = ops.tanh(i_n + reset * h_n)
        h = (1 - update) * candidate + update * h
    return {"h": h, "loss": (h * p.target).sum()}


def lstm_torch(torch, p):
    cell = torch.nn.LSTMCell(p.xs.shape[-1], p.h0.shape[-1], dtype=torch.float64)
    weights = {"weight_ih": p.w_ih, "weight_hh": p.w_hh, "bias_ih": p.b_ih, "bias_hh": p.b_hh}
    h, c = p.h0, p.c0
    for x in p.xs.unbind(0):
        h, c = torch.func.functional_call(cell, weights, (x, (h, c)))
    return {"h": h, "c": c, "loss": (h * p.target).sum() + c.sum()}


def lstm_port(p):
    h, c = p.h0, p.c0
    for x in ops.unbind(p.xs, 0):
        gates = ops.linear(x, p.w_ih, p.b_ih) + ops.linear(h, p.w_hh, p.b_hh)
        i, f, g, o = ops.split(gates, h.shape[-1], dim=1)
        c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
        h = ops.sigmoid(o) * ops.tanh(c)
    return {"h": h, "c": c, "loss": (h * p.target).sum() + c.sum()}


@pytest.mark.parametrize("cell, gates", [("gru", 3), ("lstm", 4)])
def test_recurrent_cell_steps(torch, cell, gates):
    rng = np.random.default_rng(5)
    steps, batch, inputs, hidden = 4, 3, 5, 6
    arrays = {
        "xs": rng.normal(size=(steps, batch, inputs)),
        "h0": rng.normal(size=(batch, hidden)),
        "w_ih": rng.normal(size=(gates * hidden, inputs)) / 2,
        "w_hh": rng.normal(size=(gates * hidden, hidden)) / 2,
        "b_ih": rng.normal(size=gates * hidden),
        "b_hh": rng.normal(size=gates * hidden),
        "target": rng.normal(size=(batch, hidden)),
    }
    if cell == "lstm":
        arrays["c0"] = rng.normal(size=(batch, hidden))
    snippets = {"gru": (gru_torch, gru_port), "lstm": (lstm_torch, lstm_port)}[cell]
    check_port(torch, *snippets, arrays)


# -- 5. sinusoidal positional encoding, masked mean and max pooling ------------------------------------------
def positional_pooling_torch(torch, p):
    batch, length, d_model = p.x.shape
    position = torch.arange(length, dtype=torch.float64).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    h = p.x + pe
    mask = torch.arange(length)[None, :] < p.lengths[:, None]
    mean = h.masked_fill(~mask[..., None], 0.0).sum(1) / mask.sum(1, keepdim=True)
    max_ = h.masked_fill(~mask[..., None], float("-inf")).amax(1)
    return {"pe": pe, "mean": mean, "max": max_, "loss": (mean * max_).sum()}


def positional_pooling_port(p):
    batch, length, d_model = p.x.shape
    position = ops.unsqueeze(tape.tensor(np.arange(length, dtype=np.float64)), 1)
    div_term = ops.exp(tape.tensor(np.arange(0, d_model, 2, dtype=np.float64)) * (-math.log(10000.0) / d_model))
    # no item assignment (pe[:, 0::2] = ...): interleave sin and cos by stacking on a last axis
    pe = ops.stack([ops.sin(position * div_term), ops.cos(position * div_term)], dim=-1).reshape(length, d_model)
    h = p.x + pe
    mask = tape.tensor(np.arange(length))[None, :] < p.lengths[:, None]
    padding = ops.logical_not(mask)[..., None]  # no ~ on a bool Tensor
    mean = h.masked_fill(padding, 0.0).sum(1) / mask.sum(1, keepdim=True)
    max_ = ops.amax(h.masked_fill(padding, float("-inf")), 1)
    return {"pe": pe, "mean": mean, "max": max_, "loss": (mean * max_).sum()}


def test_positional_encoding_and_masked_pooling(torch):
    rng = np.random.default_rng(6)
    arrays = {"x": rng.normal(size=(3, 7, 8)), "lengths": np.array([7, 3, 1])}
    check_port(torch, positional_pooling_torch, positional_pooling_port, arrays)


# -- 6. Tensor methods as torch's ----------------------------------------------------------------------------
def test_tensor_methods_answer_as_torchs(torch):
    a = np.arange(24.0).reshape(2, 3, 4)
    ours, theirs = tape.tensor(a), torch.tensor(a)
    assert ours.size() == tuple(theirs.size()) and isinstance(ours.size(), tuple)
    for dim in (0, 1, 2, -1, -3):
        assert ours.size(dim) == theirs.size(dim)
    assert (ours.numel(), ours.dim(), ours.ndimension()) == (theirs.numel(), theirs.dim(), theirs.ndimension())
    assert ours.tolist() == theirs.tolist()
    assert ours.contiguous() is ours
    like = ours.new_zeros(2, 5), ours.new_ones((3,)), ours.new_full((1, 2), 7.0), ours.new_zeros(2, dtype=np.int64)
    expected = theirs.new_zeros(2, 5), theirs.new_ones((3,)), theirs.new_full((1, 2), 7.0)
    for got, want in zip(like, (*expected, theirs.new_zeros(2, dtype=torch.int64))):
        np.testing.assert_array_equal(got.numpy(), want.numpy(), strict=True)
    assert ours.type_as(tape.tensor([1.0])).dtype == np.float32
    assert list(range(tape.tensor(3))) == [0, 1, 2] and [10, 11, 12][tape.tensor(np.int64(-1))] == 12


def test_size_misused_as_numpys_count_raises_and_bad_dims_are_named():
    t = tape.tensor(np.ones((2, 3)))
    for misuse in (lambda: t.size == 6, lambda: bool(t.size), lambda: t.size * 2, lambda: range(t.size)):
        with pytest.raises(TypeError, match=r"Tensor.size is torch's method.*t.numel\(\)"):
            misuse()
    with pytest.raises(IndexError, match=r"Tensor.size: argument 'dim' expected a dim in \[-2, 1\].*got 2"):
        t.size(2)
    with pytest.raises(IndexError, match=r"a 0-d tensor has none\), got 0"):
        tape.tensor(1.0).size(0)
    with pytest.raises(TypeError, match="Tensor.size: argument 'dim' expected an int, got float"):
        t.size(1.0)
    for bad in (tape.tensor([2]), tape.tensor(2.0), tape.tensor(True)):
        with pytest.raises(TypeError, match="Tensor.__index__: only 0-d integer tensors"):
            [1, 2, 3][bad]
    with pytest.raises(ValueError, match=r"Tensor.new_full: argument 'size' expected ints >= 0, got -1 in \(2, -1\)"):
        t.new_full((2, -1), 0.0)  # a negative size is a ValueError, as tape.zeros(2, -1)'s
    with pytest.raises(TypeError, match="Tensor.new_full: argument 'size' expected an int or a sequence of ints"):
        t.new_full(None, 0.0)


def test_clone_stays_in_the_graph_and_requires_grad_returns_the_tensor():
    x = tape.tensor(np.array([1.0, 2.0])).requires_grad_()
    assert x.requires_grad and x.requires_grad_(False) is x and not x.requires_grad
    x.requires_grad_(True)
    (x.clone() * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    with pytest.raises(TypeError, match="requires_grad=True needs a floating tensor"):
        tape.tensor([1, 2]).requires_grad_()


# -- 7. a nanoGPT-style GPT: weight tying, AdamW parameter groups, clip_grad_norm_, generation ------------------
# ``GPTPort`` is nanoGPT's model.py (minus from_pretrained and the flash-attention branch) with the imports
# changed: torch -> tape / ops, torch.nn -> tape.nn, F -> ops. The lines that differ otherwise say why.
GPT_CONFIG = {"block_size": 8, "vocab_size": 13, "n_layer": 2, "n_head": 2, "n_embd": 8, "dropout": 0.0, "bias": True}


def gpt_port_classes():
    from tape import nn

    F = ops

    class CausalSelfAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            self.attn_dropout = nn.Dropout(config.dropout)
            self.resid_dropout = nn.Dropout(config.dropout)
            self.n_head, self.n_embd = config.n_head, config.n_embd
            mask = ops.tril(tape.ones(config.block_size, config.block_size))
            self.register_buffer("bias", mask.view(1, 1, config.block_size, config.block_size))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
            self.mlp = MLP(config)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.transformer = nn.ModuleDict(
                dict(
                    wte=nn.Embedding(config.vocab_size, config.n_embd),
                    wpe=nn.Embedding(config.block_size, config.n_embd),
                    drop=nn.Dropout(config.dropout),
                    h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                    ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
                )
            )
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

        def get_num_params(self, non_embedding=True):
            n_params = sum(p.numel() for p in self.parameters())
            if non_embedding:
                n_params -= self.transformer.wpe.weight.numel()
            return n_params

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = tape.arange(0, t, dtype=np.int64)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            logits = self.lm_head(x)
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [
                {"params": decay_params, "weight_decay": weight_decay},
                {"params": nodecay_params, "weight_decay": 0.0},
            ]
            return tape.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

        def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
            # nanoGPT's loop; returns the sampling distributions too, for the test. Two changes: no item
            # assignment (logits[logits < v[:, [-1]]] = -inf becomes masked_fill), and the generator argument
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size :]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = ops.topk(logits, min(top_k, logits.size(-1)))
                    logits = logits.masked_fill(logits < v[:, [-1]], float("-inf"))
                probs = F.softmax(logits, dim=-1)
                idx_next = ops.multinomial(probs, num_samples=1, generator=generator)
                idx = ops.cat((idx, idx_next), dim=1)
                yield idx, probs

    return GPT


def gpt_torch_classes(torch):
    nn, F = torch.nn, torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            self.attn_dropout = nn.Dropout(config.dropout)
            self.resid_dropout = nn.Dropout(config.dropout)
            self.n_head, self.n_embd = config.n_head, config.n_embd
            mask = torch.tril(torch.ones(config.block_size, config.block_size))
            self.register_buffer("bias", mask.view(1, 1, config.block_size, config.block_size))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
            self.mlp = MLP(config)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.transformer = nn.ModuleDict(
                dict(
                    wte=nn.Embedding(config.vocab_size, config.n_embd),
                    wpe=nn.Embedding(config.block_size, config.n_embd),
                    drop=nn.Dropout(config.dropout),
                    h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                    ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
                )
            )
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # the weights come from the port's state dict

        def get_num_params(self, non_embedding=True):
            n_params = sum(p.numel() for p in self.parameters())
            if non_embedding:
                n_params -= self.transformer.wpe.weight.numel()
            return n_params

        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            logits = self.lm_head(x)
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [
                {"params": decay_params, "weight_decay": weight_decay},
                {"params": nodecay_params, "weight_decay": 0.0},
            ]
            return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

        @torch.no_grad()
        def distributions(self, idx, start, top_k, temperature=1.0):
            """nanoGPT's generate with the tokens given (the port's draws): the distribution at each step."""
            for t in range(start, idx.size(1)):
                context = idx[:, :t] if t <= self.config.block_size else idx[:, t - self.config.block_size : t]
                logits = self(context)[0][:, -1, :] / temperature
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
                yield F.softmax(logits, dim=-1)

    return GPT


def gpt_pair(torch, dtype, seed=0):
    """The port built under ``tape.manual_seed(seed)`` and cast to ``dtype``; torch's GPT loaded strictly from
    the port's state dict (the tied weight is listed under both names, the mask buffer is in it)."""
    config = SimpleNamespace(**GPT_CONFIG)
    tape.manual_seed(seed)
    ours = gpt_port_classes()(config).to(dtype)
    theirs = gpt_torch_classes(torch)(config).to(getattr(torch, np.dtype(dtype).name))
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()}, strict=True)
    assert theirs.transformer.wte.weight is theirs.lm_head.weight
    return ours, theirs


def gpt_batch(rng, batch=3, length=GPT_CONFIG["block_size"]):
    idx = rng.integers(0, GPT_CONFIG["vocab_size"], size=(batch, length))
    targets = np.roll(idx, -1, axis=1)
    targets[0, -2:] = -1  # ignored positions (nanoGPT's ignore_index=-1)
    return idx, targets


def assert_parameters_and_gradients_equal(ours, theirs, rtol, atol, tied=("lm_head.weight",)):
    theirs_named = dict(theirs.named_parameters())
    ours_named = dict(ours.named_parameters())
    assert set(ours_named) == set(theirs_named) and not set(tied) & set(ours_named)  # tied: listed once
    for name, p in ours_named.items():
        np.testing.assert_allclose(p.numpy(), theirs_named[name].detach().numpy(), rtol, atol, err_msg=name)
        assert p.grad is not None, f"no gradient reached {name!r}"
        np.testing.assert_allclose(
            p.grad.numpy(), theirs_named[name].grad.numpy(), rtol, atol, err_msg=f"grad {name}", strict=True
        )


@pytest.mark.parametrize("length", [GPT_CONFIG["block_size"], 5])
def test_gpt_values_and_every_gradient_match_torch_in_float64(torch, length):
    ours, theirs = gpt_pair(torch, np.float64)
    assert ours.get_num_params() == theirs.get_num_params() and ours.get_num_params(False) > ours.get_num_params()
    idx, targets = gpt_batch(np.random.default_rng(7), length=length)
    logits, loss = ours(tape.tensor(idx), tape.tensor(targets))
    expected_logits, expected_loss = theirs(torch.tensor(idx), torch.tensor(targets))
    np.testing.assert_allclose(logits.numpy(), expected_logits.detach().numpy(), RTOL, ATOL, strict=True)
    np.testing.assert_allclose(loss.numpy(), expected_loss.detach().numpy(), RTOL, ATOL, strict=True)
    loss.backward()
    expected_loss.backward()
    assert_parameters_and_gradients_equal(ours, theirs, RTOL, ATOL)
    # the tied weight's gradient is the sum of its embedding and its output-projection uses
    assert np.count_nonzero(ours.transformer.wte.weight.grad.numpy()) > 0


def train_gpt_pair(torch, dtype, steps, check_each_step):
    """Both models through ``steps`` of nanoGPT's loop: forward, backward, clip_grad_norm_(1.0), AdamW with a
    decayed group (matrices) and an undecayed one (biases, LayerNorm). Returns both loss lists."""
    ours, theirs = gpt_pair(torch, dtype)
    optimizer = ours.configure_optimizers(weight_decay=0.1, learning_rate=3e-2, betas=(0.9, 0.95))
    expected_optimizer = theirs.configure_optimizers(weight_decay=0.1, learning_rate=3e-2, betas=(0.9, 0.95))
    group_sizes = [len(g["params"]) for g in optimizer.param_groups]
    assert group_sizes == [len(g["params"]) for g in expected_optimizer.param_groups]
    assert all(len(g["params"]) > 0 for g in optimizer.param_groups)
    idx, targets = gpt_batch(np.random.default_rng(8))  # one batch, as nanoGPT's overfit-a-batch check
    losses, expected_losses = [], []
    for _ in range(steps):
        _, loss = ours(tape.tensor(idx), tape.tensor(targets))
        _, expected_loss = theirs(torch.tensor(idx), torch.tensor(targets))
        optimizer.zero_grad(set_to_none=True)
        expected_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        expected_loss.backward()
        norm = tape.optim.clip_grad_norm_(ours.parameters(), 1.0)
        expected_norm = torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0)
        check_each_step(ours, theirs, norm, expected_norm)
        optimizer.step()
        expected_optimizer.step()
        losses.append(loss.item())
        expected_losses.append(expected_loss.item())
    return losses, expected_losses


def test_gpt_training_steps_match_torch_in_float64(torch):
    clipped = []

    def check(ours, theirs, norm, expected_norm):
        np.testing.assert_allclose(norm.numpy(), expected_norm.numpy(), RTOL, ATOL)
        clipped.append(float(norm) > 1.0)
        assert_parameters_and_gradients_equal(ours, theirs, RTOL, ATOL)

    losses, expected_losses = train_gpt_pair(torch, np.float64, steps=4, check_each_step=check)
    np.testing.assert_allclose(losses, expected_losses, RTOL, ATOL)
    assert losses[-1] < losses[0], "the steps should lower the loss"
    assert any(clipped), "no step clipped: clip_grad_norm_'s scaling went unchecked"


def test_gpt_first_losses_match_torch_in_float32(torch):
    def check(ours, theirs, norm, expected_norm):
        np.testing.assert_allclose(norm.numpy(), expected_norm.numpy(), rtol=1e-5)

    losses, expected_losses = train_gpt_pair(torch, np.float32, steps=3, check_each_step=check)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)


def test_gpt_generation_samples_from_torchs_distributions(torch):
    """Generation with tape's multinomial: reproducible under a seed, each draw inside the top k, and each step's
    distribution equal to torch's for the same context (torch's own draws come from another stream, so torch
    replays the port's tokens). Twelve new tokens from four: the context is cropped to block_size."""
    ours, theirs = gpt_pair(torch, np.float64)
    start = np.random.default_rng(9).integers(0, GPT_CONFIG["vocab_size"], size=(2, 4))
    top_k = 5

    def draw(seed):
        generator = tape.Generator().manual_seed(seed)
        with tape.no_grad():
            return list(ours.generate(tape.tensor(start), 12, temperature=0.8, top_k=top_k, generator=generator))

    steps = draw(3)
    idx = steps[-1][0].numpy()
    assert idx.shape == (2, 16) and idx.dtype == np.int64
    np.testing.assert_array_equal(idx[:, :4], start)
    np.testing.assert_array_equal(draw(3)[-1][0].numpy(), idx)  # the same seed, the same tokens
    expected = list(theirs.distributions(torch.tensor(idx), 4, top_k, temperature=0.8))
    assert len(expected) == len(steps) == 12
    for t, ((_, probs), want) in enumerate(zip(steps, expected)):
        np.testing.assert_allclose(probs.numpy(), want.numpy(), RTOL, ATOL, err_msg=f"step {t}")
        assert np.all(np.count_nonzero(probs.numpy(), axis=1) == top_k)
        assert np.all(probs.numpy()[np.arange(2), idx[:, 4 + t]] > 0), f"step {t} drew a masked token"


# -- 8. a small CNN with BatchNorm and pooling, trained a few steps ------------------------------------------
# One definition, ported by its imports alone: ``nn`` is torch.nn or tape.nn, ``F`` torch.nn.functional or ops.
def cnn_class(nn, F):
    class SmallCNN(nn.Module):
        def __init__(self, classes=3):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(2, 4, 3, padding=1),
                nn.BatchNorm2d(4),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Conv2d(4, 6, 3, stride=1, padding=1, bias=False),
                nn.BatchNorm2d(6, momentum=None),  # the cumulative average
                nn.ReLU(),
                nn.AvgPool2d(2),
                nn.Conv2d(6, 8, 2),
                nn.BatchNorm2d(8),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
            )
            self.head = nn.Linear(8, classes)

        def forward(self, x, targets=None):
            logits = self.head(F.dropout(self.features(x), p=0.0, training=self.training))
            return logits, (None if targets is None else F.cross_entropy(logits, targets, label_smoothing=0.05))

    return SmallCNN


def cnn_pair(torch, dtype):
    """torch's CNN (seeded) and the port, loaded strictly from torch's state dict (BatchNorm buffers included)."""
    torch.manual_seed(0)
    theirs = cnn_class(torch.nn, torch.nn.functional)().to(getattr(torch, np.dtype(dtype).name))
    ours = cnn_class(nn, ops)().to(dtype)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()}, strict=True)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    return ours, theirs


def cnn_batch(rng, dtype, batch=6):
    return rng.standard_normal((batch, 2, 12, 12)).astype(dtype), rng.integers(0, 3, size=batch)


def assert_state_equal(ours, theirs, rtol, atol):
    """Every parameter, gradient and buffer (BatchNorm's running statistics and counts) equal to torch's."""
    assert_parameters_and_gradients_equal(ours, theirs, rtol, atol, tied=())
    expected = theirs.state_dict()
    for name, value in ours.state_dict().items():
        np.testing.assert_allclose(value, expected[name].numpy(), rtol, atol, err_msg=name, strict=True)


def train_pair(torch, ours, theirs, batches, steps, make_optimizers, check_each_step, forward):
    """``steps`` training steps of both models on ``batches`` (cycled); returns both loss lists."""
    optimizer, expected_optimizer = make_optimizers(torch, ours, theirs)
    losses, expected_losses = [], []
    for step in range(steps):
        inputs = batches[step % len(batches)]
        loss = forward(ours, tape, inputs)
        expected_loss = forward(theirs, torch, inputs)
        optimizer.zero_grad(set_to_none=True)
        expected_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        expected_loss.backward()
        check_each_step(ours, theirs)
        optimizer.step()
        expected_optimizer.step()
        losses.append(loss.item())
        expected_losses.append(expected_loss.item())
    return losses, expected_losses


def _cnn_optimizers(torch, ours, theirs):
    options = dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)
    return tape.optim.SGD(ours.parameters(), **options), torch.optim.SGD(theirs.parameters(), **options)


def _cnn_forward(model, lib, inputs):
    x, targets = inputs
    return model(lib.tensor(x), lib.tensor(targets))[1]


def test_cnn_training_steps_match_torch_in_float64(torch):
    """Values, EVERY gradient and the BatchNorm running statistics (momentum and cumulative) after each of four
    nesterov-SGD steps equal torch's; eval() then uses the running statistics as torch's."""
    ours, theirs = cnn_pair(torch, np.float64)
    rng = np.random.default_rng(11)
    batches = [cnn_batch(rng, np.float64) for _ in range(2)]
    logits, loss = ours(tape.tensor(batches[0][0]), tape.tensor(batches[0][1]))
    expected_logits, expected_loss = theirs(torch.tensor(batches[0][0]), torch.tensor(batches[0][1]))
    np.testing.assert_allclose(logits.numpy(), expected_logits.detach().numpy(), RTOL, ATOL, strict=True)
    losses, expected_losses = train_pair(
        torch,
        ours,
        theirs,
        batches,
        4,
        _cnn_optimizers,
        lambda a, b: assert_state_equal(a, b, RTOL, ATOL),
        _cnn_forward,
    )
    np.testing.assert_allclose(losses, expected_losses, RTOL, ATOL)
    assert losses[-1] < losses[0], "the steps should lower the loss"
    assert int(ours.features[1].num_batches_tracked.item()) == 5  # the probe forward and four steps
    ours.eval(), theirs.eval()
    x = batches[1][0]
    np.testing.assert_allclose(
        ours(tape.tensor(x))[0].numpy(), theirs(torch.tensor(x))[0].detach().numpy(), RTOL, ATOL, strict=True
    )


def test_cnn_first_losses_match_torch_in_float32(torch):
    ours, theirs = cnn_pair(torch, np.float32)
    rng = np.random.default_rng(12)
    batches = [cnn_batch(rng, np.float32) for _ in range(3)]
    losses, expected_losses = train_pair(
        torch, ours, theirs, batches, 3, _cnn_optimizers, lambda a, b: None, _cnn_forward
    )
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)
    for name, value in ours.state_dict().items():
        np.testing.assert_allclose(value, theirs.state_dict()[name].numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_cnn_compiled_training_equals_eager():
    """BatchNorm's running-statistics update is an in-place op under no_grad: a compiled step runs such a call
    eagerly, and every parameter and buffer equals eager's, bit for bit."""
    rng = np.random.default_rng(13)
    batches = [cnn_batch(rng, np.float64) for _ in range(2)]
    states, steps = [], []
    for compiled in (True, False):
        tape.manual_seed(0)
        model = cnn_class(nn, ops)().double()
        optimizer = tape.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)

        def loss_fn(x, targets, model=model):
            return model(x, targets)[1]

        step = tape.compile(loss_fn, list(model.parameters()))
        for k in range(5):
            x, targets = (tape.tensor(a) for a in batches[k % 2])
            optimizer.zero_grad()
            if compiled:
                step(x, targets)
            else:
                loss_fn(x, targets).backward()
            optimizer.step()
        states.append(model.state_dict())
        steps.append(step)
    for name, value in states[0].items():
        np.testing.assert_array_equal(value, states[1][name], err_msg=name, strict=True)
    # BatchNorm's running statistics change in place (as torch's): a call with an in-place op runs eagerly
    assert steps[0].replays == 0 and steps[0].records == 5


# -- 9. an LSTM language model ------------------------------------------------------------------------------------
def lstm_lm_class(nn, F):
    class LSTMLanguageModel(nn.Module):
        def __init__(self, vocab=11, embed=6, hidden=7, layers=2):
            super().__init__()
            self.embed = nn.Embedding(vocab, embed)
            self.rnn = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
            self.head = nn.Linear(hidden, vocab)

        def forward(self, idx, state=None, targets=None):
            out, state = self.rnn(self.embed(idx), state)
            logits = self.head(out)
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
            return logits, state, loss

    return LSTMLanguageModel


def lstm_pair(torch, dtype):
    torch.manual_seed(1)
    theirs = lstm_lm_class(torch.nn, torch.nn.functional)().to(getattr(torch, np.dtype(dtype).name))
    ours = lstm_lm_class(nn, ops)().to(dtype)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()}, strict=True)
    return ours, theirs


def lstm_batches(rng, n=3, batch=4, length=6, vocab=11):
    text = rng.integers(0, vocab, size=(batch, n * length + 1))
    return [(text[:, k * length : (k + 1) * length], text[:, k * length + 1 : (k + 1) * length + 1]) for k in range(n)]


def train_lstm_pair(torch, dtype, steps, check_each_step):
    """Truncated backpropagation through time: each step continues from the previous step's (detached) state;
    clip_grad_norm_ then Adam."""
    ours, theirs = lstm_pair(torch, dtype)
    optimizer = tape.optim.Adam(ours.parameters(), lr=0.02)
    expected_optimizer = torch.optim.Adam(theirs.parameters(), lr=0.02)
    batches = lstm_batches(np.random.default_rng(14))
    state = expected_state = None
    losses, expected_losses = [], []
    for step in range(steps):
        idx, targets = batches[step % len(batches)]
        _, state, loss = ours(tape.tensor(idx), state, tape.tensor(targets))
        _, expected_state, expected_loss = theirs(torch.tensor(idx), expected_state, torch.tensor(targets))
        state = tuple(s.detach() for s in state)
        expected_state = tuple(s.detach() for s in expected_state)
        optimizer.zero_grad()
        expected_optimizer.zero_grad()
        loss.backward()
        expected_loss.backward()
        norm = tape.optim.clip_grad_norm_(ours.parameters(), 0.5)
        expected_norm = torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.5)
        check_each_step(ours, theirs, state, expected_state, norm, expected_norm)
        optimizer.step()
        expected_optimizer.step()
        losses.append(loss.item())
        expected_losses.append(expected_loss.item())
    return losses, expected_losses


def test_lstm_language_model_matches_torch_in_float64(torch):
    def check(ours, theirs, state, expected_state, norm, expected_norm):
        assert_parameters_and_gradients_equal(ours, theirs, RTOL, ATOL, tied=())
        for s, e in zip(state, expected_state):
            np.testing.assert_allclose(s.numpy(), e.numpy(), RTOL, ATOL, strict=True)
        np.testing.assert_allclose(norm.numpy(), expected_norm.numpy(), RTOL, ATOL)

    losses, expected_losses = train_lstm_pair(torch, np.float64, steps=4, check_each_step=check)
    np.testing.assert_allclose(losses, expected_losses, RTOL, ATOL)
    assert losses[-1] < losses[0]


def test_lstm_language_model_first_losses_match_torch_in_float32(torch):
    losses, expected_losses = train_lstm_pair(torch, np.float32, steps=3, check_each_step=lambda *a: None)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)


# -- whole programs ported by swapping their imports (issue #32) ---------------------------------------------
# Each program in tests/train/ports/ is ordinary PyTorch code. It runs once as written (real torch) and once from
# its source with only the import lines rewritten to tape.torch; the harness gives both the same initial weights
# (torch's, loaded strictly) and the same data, and compares every loss and the final parameters in float64.
PORTS = pathlib.Path(__file__).resolve().parent / "ports"
_IMPORT = re.compile(r"^(\s*)(import torch(\.[\w.]+)?( as \w+)?|from torch(\.[\w.]+)? import .+)$")


def swap_imports(source: str) -> str:
    """``source`` with each torch import rewritten to tape.torch's (and nothing else changed)."""

    def swap(line: str) -> str:
        match = _IMPORT.match(line)
        if not match:
            return line
        indent, statement = match.group(1), match.group(2)
        if statement.startswith("from torch"):
            return indent + "from tape." + statement[len("from ") :]
        alias = match.group(4) or (" as torch" if match.group(3) is None else None)
        assert alias is not None, f"an 'import torch.x' without 'as' binds the name torch: {line!r}"
        return f"{indent}import tape.torch{match.group(3) or ''}{alias}"

    return "\n".join(swap(line) for line in source.split("\n"))


def changed_lines(a: str, b: str) -> tuple[int, int]:
    """(import lines changed, other lines changed) between two sources."""
    changed = [
        line[1:]
        for line in difflib.unified_diff(a.split("\n"), b.split("\n"), lineterm="", n=0)
        if line[:1] == "-" and not line.startswith("---")
    ]
    imports = sum(bool(_IMPORT.match(line)) for line in changed)
    return imports, len(changed) - imports


def program_pair(name: str):
    """The program as written (imported: real torch) and its import-swapped twin (a module run from the source)."""
    theirs = importlib.import_module(f"tests.train.ports.{name}")
    source = (PORTS / f"{name}.py").read_text()
    swapped = swap_imports(source)
    imports, others = changed_lines(source, swapped)
    assert imports >= 1 and others == 0, f"{name}: {others} lines beyond the imports differ"
    ours = types.ModuleType(f"ported_{name}", theirs.__doc__)
    exec(compile(swapped, f"<{name} with tape.torch imports>", "exec"), ours.__dict__)
    return theirs, ours


def snapshot(model) -> dict:
    """A model's state dict as numpy copies."""
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def load_torch_weights(ours, state: dict) -> None:
    """torch's initial parameters and buffers (a ``snapshot``) into our model, strictly, so both start equal."""
    ours.load_state_dict({k: tape.tensor(v) for k, v in state.items()}, strict=True)


def assert_same_parameters(ours, theirs, rtol=RTOL, atol=ATOL) -> None:
    expected = dict(theirs.named_parameters())
    got = dict(ours.named_parameters())
    assert set(got) == set(expected)
    for name, p in got.items():
        np.testing.assert_allclose(p.numpy(), expected[name].detach().numpy(), rtol, atol, err_msg=name)


@pytest.mark.parametrize("rnn_type, tied", [("LSTM", True), ("GRU", False), ("RNN_TANH", False)])
def test_word_language_model_runs_by_swapping_imports(torch, tmp_path, rnn_type, tied):
    """pytorch/examples' word_language_model, reproduced (tests/train/ports/word_language_model.py): two epochs of
    truncated BPTT with in-place SGD (``p.data.add_(p.grad, alpha=-lr)``), clipping, annealing, the best model
    saved with torch.save and loaded back, in float64: every loss and the final parameters equal torch's."""
    theirs_program, ours_program = program_pair("word_language_model")
    rng = np.random.default_rng(3)
    words = {part: rng.integers(0, 13, size=n) for part, n in (("train", 121), ("valid", 41), ("test", 37))}
    args = SimpleNamespace(model=rnn_type, lr=2.0, clip=0.25, epochs=3, batch_size=4, eval_batch_size=3, bptt=7)
    results = []
    for lib, program in ((torch, theirs_program), (tape.torch, ours_program)):
        corpus = SimpleNamespace(**{part: lib.tensor(w) for part, w in words.items()})
        model = program.RNNModel(rnn_type, 13, 6, 6, 2, dropout=0.0, tie_weights=tied).double()
        if results:
            load_torch_weights(model, results[0][1])
        start = snapshot(model)
        results.append((model, start, program.main(args, corpus, model, tmp_path / f"{lib.__name__}.pt")))
    (theirs, _, expected), (ours, _, got) = results
    np.testing.assert_allclose(got[0], expected[0], RTOL, ATOL)  # every training loss and validation loss
    np.testing.assert_allclose(got[1:], expected[1:], RTOL, ATOL)  # test loss and perplexity
    assert_same_parameters(ours, theirs)
    assert any(np.abs(results[1][1][k] - v.numpy()).max() > 1e-3 for k, v in ours.state_dict().items())


def test_mnist_runs_by_swapping_imports(torch, tmp_path):
    """pytorch/examples' mnist, reproduced (tests/train/ports/mnist.py): DataLoaders over TensorDatasets, Adadelta
    and StepLR(gamma=0.7) for three epochs, the test pass's summed loss and correct count, the state dict saved --
    in float64 equal to torch's (the harness sets the dropout probabilities to 0 in both: the masks come from
    different random streams)."""
    theirs_program, ours_program = program_pair("mnist")
    rng = np.random.default_rng(5)
    images = {part: rng.standard_normal((n, 1, 14, 14)) for part, n in (("train", 20), ("test", 9))}
    labels = {part: rng.integers(0, 10, size=n) for part, n in (("train", 20), ("test", 9))}
    args = SimpleNamespace(
        no_accel=False, batch_size=6, test_batch_size=4, lr=1.0, gamma=0.7, epochs=3, dry_run=False, save_model=True
    )
    results = []
    for lib, program in ((torch, theirs_program), (tape.torch, ours_program)):
        data = [lib.utils.data.TensorDataset(lib.tensor(images[p]), lib.tensor(labels[p])) for p in ("train", "test")]
        model = program.Net().double()
        for module in model.modules():
            if isinstance(module, lib.nn.Dropout):
                module.p = 0.0
        if results:
            load_torch_weights(model, results[0][1])
        start = snapshot(model)
        results.append((model, start, program.main(args, *data, model, tmp_path / f"{lib.__name__}.pt")))
    (theirs, _, expected), (ours, _, got) = results
    assert len(got) == len(expected) == 3 * (4 + 2 + 1)
    np.testing.assert_allclose(got, expected, RTOL, ATOL)  # losses, test loss, correct count, the lr
    assert_same_parameters(ours, theirs)
    saved = tape.torch.load(tmp_path / "tape.torch.pt")
    assert all(np.array_equal(saved[k].numpy(), v.numpy()) for k, v in ours.state_dict().items())


@pytest.mark.parametrize("flash, bias", [(True, True), (False, False)])
def test_nanogpt_runs_by_swapping_imports(torch, flash, bias):
    """karpathy/nanoGPT's model.py and train.py step, reproduced (tests/train/ports/nanogpt.py): logits, loss, five
    training steps (warmup + cosine lr written into the param groups, a disabled GradScaler, clipping, AdamW with a
    decayed and an undecayed group), greedy generation through the top-k mask's item assignment, crop_block_size
    and the parameter counts -- in float64 equal to torch's, the tied embedding included."""
    theirs_program, ours_program = program_pair("nanogpt")
    config = dict(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=8, dropout=0.0, bias=bias, flash=flash)
    rng = np.random.default_rng(11)
    tokens = rng.integers(0, 11, size=(5, 3, 9))
    args = SimpleNamespace(device="cpu", dtype="float64", weight_decay=0.1, learning_rate=3e-2, beta1=0.9,
                           beta2=0.95, grad_clip=1.0, warmup_iters=2, lr_decay_iters=4, min_lr=3e-3)  # fmt: skip
    results = []
    for lib, program in ((torch, theirs_program), (tape.torch, ours_program)):
        model = program.GPT(program.GPTConfig(**config)).double()
        if results:
            load_torch_weights(model, results[0]["start"])
        out = {"start": snapshot(model), "model": model}
        assert model.transformer.wte.weight is model.lm_head.weight
        logits, loss = model(lib.tensor(tokens[0, :, :-1]), lib.tensor(tokens[0, :, 1:]))
        out["first"] = [logits.detach().numpy(), loss.item()]
        batches = [(lib.tensor(t[:, :-1]), lib.tensor(t[:, 1:])) for t in tokens]
        out["losses"] = program.train(model, batches, args)
        out["generated"] = model.generate(lib.tensor(tokens[0, :2, :3]), 9, temperature=0.7, top_k=1).numpy()
        out["counts"] = (model.get_num_params(), model.get_num_params(False), model.estimate_mfu(4, 0.5))
        model.crop_block_size(6)
        out["cropped"] = model(lib.tensor(tokens[1, :, :6]))[0].detach().numpy()
        results.append(out)
    expected, got = results
    np.testing.assert_allclose(got["first"][0], expected["first"][0], RTOL, ATOL)
    np.testing.assert_allclose(got["first"][1], expected["first"][1], RTOL, ATOL)
    np.testing.assert_allclose(got["losses"], expected["losses"], RTOL, ATOL)
    moved = got["model"].lm_head.weight.numpy() - got["start"]["lm_head.weight"]
    assert np.abs(moved).max() > 1e-3, "the steps should change the weights"
    np.testing.assert_array_equal(got["generated"], expected["generated"])
    assert got["counts"] == pytest.approx(expected["counts"], rel=1e-15)
    np.testing.assert_allclose(got["cropped"], expected["cropped"], RTOL, ATOL)
    assert_same_parameters(got["model"], expected["model"])
