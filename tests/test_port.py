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

import math
from types import SimpleNamespace

import numpy as np
import pytest

import ops
import tape

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
