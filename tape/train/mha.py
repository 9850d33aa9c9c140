"""torch.nn.MultiheadAttention under torch's name, signature and parameter names (``in_proj_weight``,
``in_proj_bias``, ``out_proj.weight``, ``out_proj.bias``), so torch's state dicts load strictly. It computes through
registered ops (linear, matmul, masked_fill, softmax, dropout); masks as torch's: a bool ``attn_mask`` or
``key_padding_mask`` marks with True the positions NOT attended, a float one is added to the scores. The attention
weights are returned averaged over heads (``average_attn_weights=True``) or per head, or None with
``need_weights=False``. Not there (refused): ``add_bias_kv``, ``add_zero_attn``, ``kdim``/``vdim`` other than
``embed_dim``."""

from __future__ import annotations

import math

import numpy as np

import ops

from ..checks import integer
from ..devices import on_cpu
from . import init
from .nn import Linear, Module, Parameter

__all__ = ["MultiheadAttention"]


class MultiheadAttention(Module):
    """``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) -> (attn_output, attn_weights)``, as torch's."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):  # fmt: skip
        super().__init__()
        on_cpu("MultiheadAttention", "device", device)
        embed_dim = integer("MultiheadAttention", "embed_dim", embed_dim, at_least=1)
        num_heads = integer("MultiheadAttention", "num_heads", num_heads, at_least=1)
        if embed_dim % num_heads:
            raise AssertionError("MultiheadAttention: embed_dim must be divisible by num_heads")
        if add_bias_kv or add_zero_attn or kdim not in (None, embed_dim) or vdim not in (None, embed_dim):
            raise NotImplementedError("MultiheadAttention: add_bias_kv, add_zero_attn and kdim/vdim != embed_dim")
        dtype = np.dtype(np.float32 if dtype is None else dtype)
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.dropout, self.batch_first = dropout, batch_first
        self.in_proj_weight = Parameter(np.zeros((3 * embed_dim, embed_dim), dtype))
        self.in_proj_bias = Parameter(np.zeros(3 * embed_dim, dtype)) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        init.xavier_uniform_(self.in_proj_weight)
        if bias:
            init.zeros_(self.out_proj.bias)

    def _heads(self, x, weight, bias):
        """(L, N, E) projected and split into heads: (N, H, L, head_dim)."""
        L, N = x.shape[0], x.shape[1]
        y = ops.linear(x, weight, bias).reshape(L, N * self.num_heads, self.head_dim).transpose(0, 1)
        return y.reshape(N, self.num_heads, L, self.head_dim)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):  # fmt: skip
        if is_causal and attn_mask is None:
            raise RuntimeError("MultiheadAttention: need attn_mask if specifying the is_causal hint")
        batched = query.ndim == 3
        q, k, v = (t if batched else t.unsqueeze(0 if self.batch_first else 1) for t in (query, key, value))
        if self.batch_first:
            q, k, v = (t.transpose(0, 1) for t in (q, k, v))
        E, (L, N) = self.embed_dim, q.shape[:2]
        w, b = self.in_proj_weight, self.in_proj_bias
        parts = [(w[i * E : (i + 1) * E], None if b is None else b[i * E : (i + 1) * E]) for i in range(3)]
        qh, kh, vh = (self._heads(t, *part) for t, part in zip((q, k, v), parts))
        scores = ops.matmul(qh, kh.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        scores = _masked(scores, attn_mask, key_padding_mask, N)
        weights = ops.softmax(scores, dim=-1)
        if self.training and self.dropout > 0:
            weights = ops.dropout(weights, p=self.dropout, training=True)
        out = ops.matmul(weights, vh).permute(2, 0, 1, 3).reshape(L, N, E)
        out = self.out_proj(out)
        if self.batch_first:
            out = out.transpose(0, 1)
        if not batched:
            out = out.squeeze(0 if self.batch_first else 1)
        if not need_weights:
            return out, None
        weights = weights.mean(dim=1) if average_attn_weights else weights
        return out, (weights if batched else weights.squeeze(0))


def _masked(scores, attn_mask, key_padding_mask, batch: int):
    """The scores with torch's masks applied: bool True -> -inf, float added; attn_mask (L, S) or (N*H, L, S),
    key_padding_mask (N, S)."""
    if attn_mask is not None:
        if attn_mask.ndim == 3:
            attn_mask = attn_mask.reshape(batch, -1, *attn_mask.shape[-2:])
        scores = _apply(scores, attn_mask)
    if key_padding_mask is not None:
        scores = _apply(scores, key_padding_mask.reshape(batch, 1, 1, -1))
    return scores


def _apply(scores, mask):
    if mask.dtype == np.bool_:
        return ops.masked_fill(scores, mask, -math.inf)
    return scores + mask
