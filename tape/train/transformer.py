"""torch.nn's Transformer layers under torch's names, signatures and parameter names -- ``TransformerEncoderLayer``,
``TransformerDecoderLayer``, ``TransformerEncoder``, ``TransformerDecoder``, ``Transformer`` -- so torch's state dicts
load strictly. Built from ``MultiheadAttention`` (tape/train/mha.py), ``Linear``, ``LayerNorm`` and ``Dropout``;
post-norm by default, ``norm_first=True`` pre-norm, ``activation`` 'relu', 'gelu' or a callable, as torch's.
torch's fast path (nested tensors) computes the same values and is not reproduced."""

from __future__ import annotations

import copy

import numpy as np

import ops

from ..devices import on_cpu
from .mha import MultiheadAttention
from .nn import Dropout, LayerNorm, Linear, Module, ModuleList

__all__ = [
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerDecoder",
    "Transformer",
]


def _activation(activation):
    if callable(activation):
        return activation
    if activation in ("relu", "gelu"):
        return getattr(ops, activation)
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class _Layer(Module):
    def _common(self, d_model, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first, bias,
                device, dtype, norms: int):  # fmt: skip
        on_cpu(type(self).__name__, "device", device)
        dtype = np.dtype(np.float32 if dtype is None else dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        for i in range(1, norms + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(activation)
        self.batch_first = batch_first
        return dtype

    def _sa_block(self, x, attn_mask, key_padding_mask):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return getattr(self, f"dropout{self._ff}")(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoderLayer(_Layer):
    """torch.nn.TransformerEncoderLayer: ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``."""

    _ff = 2

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):  # fmt: skip
        super().__init__()
        dtype = self._common(d_model, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                             bias, device, dtype, norms=2)  # fmt: skip
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            dtype=dtype)  # fmt: skip

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask))
        return self.norm2(x + self._ff_block(x))


class TransformerDecoderLayer(_Layer):
    """torch.nn.TransformerDecoderLayer: ``forward(tgt, memory, tgt_mask=None, memory_mask=None,
    tgt_key_padding_mask=None, memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)``."""

    _ff = 3

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):  # fmt: skip
        super().__init__()
        dtype = self._common(d_model, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                             bias, device, dtype, norms=3)  # fmt: skip
        for name in ("self_attn", "multihead_attn"):
            setattr(self, name, MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                   batch_first=batch_first, dtype=dtype))  # fmt: skip

    def _mha_block(self, x, mem, attn_mask, key_padding_mask):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                need_weights=False)[0]  # fmt: skip
        return self.dropout2(x)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):  # fmt: skip
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask))
        return self.norm3(x + self._ff_block(x))


class TransformerEncoder(Module):
    """torch.nn.TransformerEncoder: ``num_layers`` deep copies of ``encoder_layer``, then ``norm`` if given."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        for layer in self.layers:
            src = layer(src, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return src if self.norm is None else self.norm(src)


class TransformerDecoder(Module):
    """torch.nn.TransformerDecoder: ``num_layers`` deep copies of ``decoder_layer``, then ``norm`` if given."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):  # fmt: skip
        for layer in self.layers:
            tgt = layer(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
        return tgt if self.norm is None else self.norm(tgt)


class Transformer(Module):
    """torch.nn.Transformer: an encoder and a decoder, each ending in a LayerNorm."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation="relu", custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):  # fmt: skip
        super().__init__()
        options = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                       layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first, bias=bias,
                       device=device, dtype=dtype)  # fmt: skip
        dtype = np.dtype(np.float32 if dtype is None else dtype)
        self.encoder = custom_encoder or TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **options), num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))  # fmt: skip
        self.decoder = custom_decoder or TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **options), num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))  # fmt: skip
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):  # fmt: skip
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask)
        return self.decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The float causal mask: -inf above the diagonal, 0 elsewhere (torch's)."""
        on_cpu("generate_square_subsequent_mask", "device", device)
        from ..tensors import Tensor

        dtype = np.dtype(np.float32 if dtype is None else dtype)
        return Tensor(np.triu(np.full((sz, sz), -np.inf, dtype), 1))
