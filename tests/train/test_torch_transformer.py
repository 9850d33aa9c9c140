"""End-to-end cross-check with PyTorch: the same tiny transformer, identical weights, float64.

The loss and every parameter's gradient must agree -- through embedding, layer norm, attention (causal,
padding lengths, grouped-query), GELU MLP, residuals and cross-entropy -- and so must a few Adam/AdamW
steps against torch.optim. Each torch mirror below is written with torch's own functional API only.
"""

import sys

import numpy as np
import pytest
from oracle import LazyTorch
from paths import EXAMPLES

import tape
from tape import nn, optim

torch = LazyTorch()  # torch imported at first use: the module collects without torch
F = torch.nn.functional

sys.path.insert(0, str(EXAMPLES))
from common import TinyGPT  # noqa: E402


def torch_params(module: nn.Module) -> dict:
    """Leaf torch tensors holding copies of the module's parameters, by name."""
    return {name: torch.tensor(np.array(p.numpy()), requires_grad=True) for name, p in module.named_parameters()}


def torch_attention(P: dict, prefix: str, x, attn: nn.MultiHeadAttention, lengths=None):
    batch, length, _ = x.shape
    hq, hk, hd = attn.num_heads, attn.num_kv_heads, attn.head_dim
    qkv = F.linear(x, P[f"{prefix}qkv.weight"], P[f"{prefix}qkv.bias"]).reshape(batch, length, hq + 2 * hk, hd)
    qkv = qkv.permute(0, 2, 1, 3)
    q, k, v = qkv[:, :hq], qkv[:, hq:hq + hk], qkv[:, hq + hk:]
    mask = None
    if lengths is not None:
        mask = torch.tensor(np.arange(length)[None, None, None, :] < np.asarray(lengths)[:, None, None, None])
    if attn.causal:
        causal = torch.ones(length, length, dtype=torch.bool).tril()
        mask = causal if mask is None else mask & causal
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=hk != hq)
    merged = heads.transpose(1, 2).reshape(batch, length, hq * hd)
    return F.linear(merged, P[f"{prefix}out.weight"], P[f"{prefix}out.bias"])


def torch_block(P: dict, prefix: str, x, block: nn.TransformerBlock, lengths=None):
    d = x.shape[-1]
    h = F.layer_norm(x, (d,), P[f"{prefix}norm1.weight"], P[f"{prefix}norm1.bias"])
    x = x + torch_attention(P, f"{prefix}attn.", h, block.attn, lengths)
    h = F.layer_norm(x, (d,), P[f"{prefix}norm2.weight"], P[f"{prefix}norm2.bias"])
    h = F.gelu(F.linear(h, P[f"{prefix}mlp.0.weight"], P[f"{prefix}mlp.0.bias"]))
    return x + F.linear(h, P[f"{prefix}mlp.2.weight"], P[f"{prefix}mlp.2.bias"])


def torch_gpt_loss(P: dict, model: TinyGPT, tokens, targets):
    length = tokens.shape[1]
    x = F.embedding(torch.tensor(tokens), P["token_embedding.weight"]) + P["position_embedding.weight"][:length]
    for i, block in enumerate(model.blocks):
        x = torch_block(P, f"blocks.{i}.", x, block)
    d = x.shape[-1]
    logits = F.linear(F.layer_norm(x, (d,), P["norm.weight"], P["norm.bias"]), P["head.weight"], P["head.bias"])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.tensor(targets).reshape(-1))


def _data(rng, vocab, batch, length):
    tokens = rng.integers(0, vocab, size=(batch, length))
    targets = rng.integers(0, vocab, size=(batch, length))
    targets[0, :3] = -100  # ignored positions take part too
    return tokens, targets


def _tiny_gpt(seed=0, **kwargs):
    config = dict(vocab_size=11, context=12, d_model=16, num_heads=4, num_layers=2, mlp_hidden=24)
    config.update(kwargs)
    return TinyGPT(**config, dtype=np.float64, rng=np.random.default_rng(seed))


def test_loss_and_every_gradient_match_torch():
    model = _tiny_gpt()
    tokens, targets = _data(np.random.default_rng(1), 11, 3, 10)
    loss = model.loss(tokens, targets)
    loss.backward()
    P = torch_params(model)
    expected = torch_gpt_loss(P, model, tokens, targets)
    expected.backward()
    np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-10)
    names = [name for name, _ in model.named_parameters()]
    assert len(names) == 6 + 2 * 12, names  # every parameter was compared below
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        np.testing.assert_allclose(p.grad.numpy(), P[name].grad.numpy(), rtol=1e-7, atol=1e-11, err_msg=name)


def test_grouped_query_and_padding_lengths_match_torch():
    rng = np.random.default_rng(2)
    block = nn.TransformerBlock(16, num_heads=4, num_kv_heads=2, mlp_hidden=20, dtype=np.float64, rng=rng)
    x_np = rng.normal(size=(3, 7, 16))
    lengths = np.array([7, 4, 1])
    x = tape.tensor(x_np, requires_grad=True)
    out = block(x, key_padding_lengths=lengths)
    weights = rng.normal(size=out.shape)
    (out * weights).sum().backward()
    P = torch_params(block)
    tx = torch.tensor(x_np, requires_grad=True)
    expected = torch_block(P, "", tx, block, lengths)
    (expected * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-7, atol=1e-11)
    for name, p in block.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), P[name].grad.numpy(), rtol=1e-7, atol=1e-11, err_msg=name)


@pytest.mark.parametrize("name,kwargs", [("Adam", dict(lr=1e-2)), ("AdamW", dict(lr=1e-2, weight_decay=0.1)),
                                         ("SGD", dict(lr=0.1, momentum=0.9))])
def test_a_few_optimizer_steps_match_torch(name, kwargs):
    model = _tiny_gpt(seed=3)
    P = torch_params(model)
    ours = getattr(optim, name)(model.parameters(), **kwargs)
    theirs = getattr(torch.optim, name)(list(P.values()), **kwargs)
    rng = np.random.default_rng(4)
    for _ in range(4):
        tokens, targets = _data(rng, 11, 2, 9)
        ours.zero_grad()
        loss = model.loss(tokens, targets)
        loss.backward()
        ours.step()
        theirs.zero_grad()
        expected = torch_gpt_loss(P, model, tokens, targets)
        expected.backward()
        theirs.step()
        np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-9)
    for pname, p in model.named_parameters():
        np.testing.assert_allclose(p.numpy(), P[pname].detach().numpy(), rtol=1e-7, atol=1e-10, err_msg=pname)
