"""Recurrent layers as torch.nn's: ``RNNCell``, ``LSTMCell``, ``GRUCell`` and the multi-layer ``RNN``, ``LSTM``,
``GRU`` (``num_layers``, ``batch_first``, ``bidirectional``, ``dropout`` between layers, an initial state).

Built from registered ops only (``ops.linear``, ``ops.chunk``, ``ops.sigmoid``, ``ops.tanh``, ``ops.stack``, ...),
so they are recorded and differentiated by the engine; the one Python loop is over time steps. The input projection
``x W_ih^T + b_ih`` of a whole sequence is one ``linear``; each step adds ``h W_hh^T + b_hh``. Parameters carry
torch's names, shapes and gate order (LSTM: i, f, g, o; GRU: r, z, n, with ``b_hn`` inside the reset gate's
product), so a torch state dict loads strictly; initialisation is torch's U(-1/sqrt(hidden), 1/sqrt(hidden)) for
every parameter, drawn from the layer's generator.
"""

from __future__ import annotations

import numpy as np

import ops

from ..checks import integer
from ..devices import on_cpu
from ..tensors import Tensor
from .nn import Module, Parameter, _bound, _rng, _uniform

__all__ = ["RNNCell", "LSTMCell", "GRUCell", "RNN", "LSTM", "GRU"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _step(mode: str, x_proj, state: tuple, w_hh, b_hh) -> tuple:
    """One time step: the new state ((h, c) for an LSTM, (h,) otherwise) from the input's projection ``x_proj``."""
    h = state[0]
    h_proj = ops.linear(h, w_hh, b_hh)
    if mode == "LSTM":
        i, f, g, o = ops.chunk(x_proj + h_proj, 4, dim=-1)
        c = ops.sigmoid(f) * state[1] + ops.sigmoid(i) * ops.tanh(g)
        return ops.sigmoid(o) * ops.tanh(c), c
    if mode == "GRU":
        r_x, z_x, n_x = ops.chunk(x_proj, 3, dim=-1)
        r_h, z_h, n_h = ops.chunk(h_proj, 3, dim=-1)
        r, z = ops.sigmoid(r_x + r_h), ops.sigmoid(z_x + z_h)
        n = ops.tanh(n_x + r * n_h)
        return ((1 - z) * n + z * h,)
    pre = x_proj + h_proj
    return (ops.tanh(pre) if mode == "RNN_TANH" else ops.relu(pre),)


def _mode(name: str, nonlinearity: str) -> str:
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"{name}: argument 'nonlinearity' expected 'tanh' or 'relu', got {nonlinearity!r}")
    return "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"


def _weights(module, suffix: str, input_size: int, hidden_size: int, bias: bool, dtype, rng) -> None:
    """weight_ih, weight_hh (and bias_ih, bias_hh) with ``suffix``, in torch's order, each U(-k, k)."""
    rows, k = _GATES[module.mode] * hidden_size, _bound(hidden_size)
    shapes: dict[str, tuple] = {"weight_ih": (rows, input_size), "weight_hh": (rows, hidden_size)}
    if bias:
        shapes.update(bias_ih=(rows,), bias_hh=(rows,))
    for name, shape in shapes.items():
        setattr(module, name + suffix, Parameter(_uniform(rng, k, shape, dtype)))
    if not bias:
        module.__dict__.update({"bias_ih" + suffix: None, "bias_hh" + suffix: None})


def _check_features(name: str, x, input_size: int, ranks: tuple) -> None:
    if x.ndim not in ranks or x.shape[-1] != input_size:
        raise ValueError(
            f"{name}: argument 'input' expected a {' or '.join(map(str, ranks))}-D tensor whose last dim is "
            f"input_size={input_size}, got shape {tuple(x.shape)}"
        )


def _check_state(name: str, what: str, t, shape: tuple) -> None:
    if tuple(t.shape) != shape:
        raise ValueError(f"{name}: argument '{what}' expected shape {shape}, got {tuple(t.shape)}")


# -- cells ------------------------------------------------------------------------------------------------------
def _zeros_along_batch(x, batch_dim: int, shape: tuple):
    """Zeros of ``shape`` (1 along the batch dim) broadcast along ``x``'s batch dim, through ops on ``x``: a size
    taken from ``x.shape`` would be a constant of an exported graph, whose batch could then not be dynamic."""
    other = tuple(d for d in range(x.ndim) if d != batch_dim)
    column = ops.sum(ops.zeros_like(x), dim=other, keepdim=True)  # (N, 1) / (1, N, 1): zeros, also for no steps
    return column + Tensor(np.zeros(shape, x.dtype))


class _CellBase(Module):
    mode = ""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, dtype=np.float32, rng=None, device=None):
        super().__init__()
        on_cpu(type(self).__name__, "device", device)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        _weights(self, "", input_size, hidden_size, bias, dtype, _rng(rng))

    def _state(self, x, hx) -> tuple:
        """The (batched) input and initial state: zeros when ``hx`` is None; an unbatched input gets a batch of 1."""
        name = type(self).__name__
        _check_features(name, x, self.input_size, (1, 2))
        batched = x.ndim == 2
        x = x if batched else ops.unsqueeze(x, 0)
        shape = (x.shape[0], self.hidden_size)
        n = 2 if self.mode == "LSTM" else 1
        if hx is None:
            return x, batched, (_zeros_along_batch(x, 0, (1, shape[1])),) * n
        parts = tuple(hx) if n == 2 else (hx,)
        parts = parts if batched else tuple(ops.unsqueeze(p, 0) for p in parts)
        for what, p in zip(("hx", "cx"), parts):
            _check_state(name, what, p, shape)
        return x, batched, parts

    def forward(self, input, hx=None):
        x, batched, state = self._state(input, hx)
        state = _step(self.mode, ops.linear(x, self.weight_ih, self.bias_ih), state, self.weight_hh, self.bias_hh)
        state = state if batched else tuple(ops.squeeze(s, 0) for s in state)
        return state if self.mode == "LSTM" else state[0]

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, bias={self.bias}"


class RNNCell(_CellBase):
    """torch.nn.RNNCell: ``h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)``, act tanh or relu."""

    def __init__(
        self, input_size, hidden_size, bias=True, nonlinearity="tanh", dtype=np.float32, rng=None, device=None
    ):
        object.__setattr__(self, "mode", _mode("RNNCell", nonlinearity))
        super().__init__(input_size, hidden_size, bias, dtype, rng, device)


class LSTMCell(_CellBase):
    """torch.nn.LSTMCell: ``forward(input, (h, c)) -> (h', c')``."""

    mode = "LSTM"


class GRUCell(_CellBase):
    """torch.nn.GRUCell: ``forward(input, h) -> h'``."""

    mode = "GRU"


# -- multi-layer ----------------------------------------------------------------------------------------------
class _RNNBase(Module):
    mode = ""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        dtype=np.float32,
        rng=None,
        device=None,
    ):
        super().__init__()
        name = type(self).__name__
        on_cpu(name, "device", device)
        num_layers = integer(name, "num_layers", num_layers, at_least=1)
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{name}: argument 'dropout' expected a probability in [0, 1], got {dropout}")
        self.input_size, self.hidden_size, self.num_layers, self.bias = input_size, hidden_size, num_layers, bias
        self.batch_first, self.dropout, self.bidirectional = batch_first, dropout, bidirectional
        self.rng = rng
        directions = 2 if bidirectional else 1
        generator = _rng(rng)
        for layer in range(num_layers):
            for d in range(directions):
                layer_input = input_size if layer == 0 else hidden_size * directions
                suffix = f"_l{layer}" + ("_reverse" if d else "")
                _weights(self, suffix, layer_input, hidden_size, bias, dtype, generator)

    def _initial(self, x, hx, batched: bool) -> tuple:
        """The initial state (h0,) or (h0, c0), each (layers * directions, batch, hidden) -- without the batch dim
        for an unbatched input, as torch's; zeros when ``hx`` is None."""
        name = type(self).__name__
        shape = (self.num_layers * (2 if self.bidirectional else 1), x.shape[1], self.hidden_size)
        n = 2 if self.mode == "LSTM" else 1
        if hx is None:
            return (_zeros_along_batch(x, 1, (shape[0], 1, shape[2])),) * n
        parts = tuple(hx) if n == 2 else (hx,)
        if len(parts) != n:
            raise ValueError(f"{name}: argument 'hx' expected a tuple (h_0, c_0), got {len(parts)} tensors")
        for what, p in zip(("h_0", "c_0"), parts):
            _check_state(name, what, p, shape if batched else shape[:1] + shape[2:])
        return parts if batched else tuple(ops.unsqueeze(p, 1) for p in parts)

    def _direction(self, x, state: tuple, suffix: str, reverse: bool):
        """One layer in one direction over the (L, N, features) sequence: its (L, N, hidden) outputs, last state."""
        w_hh, b_hh = getattr(self, "weight_hh" + suffix), getattr(self, "bias_hh" + suffix)
        projected = ops.linear(x, getattr(self, "weight_ih" + suffix), getattr(self, "bias_ih" + suffix))
        steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
        outputs = []
        for t in steps:
            state = _step(self.mode, projected[t], state, w_hh, b_hh)
            outputs.append(state[0])
        if reverse:
            outputs.reverse()
        return ops.stack(outputs, 0), state

    def forward(self, input, hx=None):
        _check_features(type(self).__name__, input, self.input_size, (2, 3))
        batched = input.ndim == 3
        x = input if batched else ops.unsqueeze(input, 1)
        x = ops.transpose(x, 0, 1) if batched and self.batch_first else x
        if x.shape[0] == 0:
            raise ValueError(
                f"{type(self).__name__}: argument 'input' has a sequence of length 0 (shape {tuple(input.shape)}); "
                "torch refuses it too: give at least one time step"
            )
        initial = self._initial(x, hx, batched)
        directions = 2 if self.bidirectional else 1
        finals: list[list] = [[] for _ in initial]
        for layer in range(self.num_layers):
            if layer > 0 and self.training and self.dropout > 0:
                x = ops.dropout(x, p=self.dropout, training=True, rng=_rng(self.rng))
            outs = []
            for d in range(directions):
                k = layer * directions + d
                out, state = self._direction(x, tuple(s[k] for s in initial), f"_l{layer}" + "_reverse" * d, d == 1)
                outs.append(out)
                for final, s in zip(finals, state):
                    final.append(s)
            x = outs[0] if directions == 1 else ops.concat(outs, -1)
        last = tuple(ops.stack(final, 0) for final in finals)
        if not batched:
            x, last = ops.squeeze(x, 1), tuple(ops.squeeze(s, 1) for s in last)
        elif self.batch_first:
            x = ops.transpose(x, 0, 1)
        return x, (last if self.mode == "LSTM" else last[0])

    def flatten_parameters(self) -> None:
        """No-op, as torch's on the CPU (it packs weights for cuDNN)."""

    def extra_repr(self) -> str:
        extras = [f"num_layers={self.num_layers}"] if self.num_layers != 1 else []
        extras += [f"{k}={getattr(self, k)}" for k in ("batch_first", "bidirectional") if getattr(self, k)]
        extras += [f"dropout={self.dropout}"] if self.dropout else []
        return ", ".join([f"{self.input_size}, {self.hidden_size}", *extras])


class RNN(_RNNBase):
    """torch.nn.RNN (Elman): ``nonlinearity`` 'tanh' or 'relu'; ``forward(input, h_0) -> (output, h_n)``."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", **kwargs):
        object.__setattr__(self, "mode", _mode("RNN", nonlinearity))
        super().__init__(input_size, hidden_size, num_layers, **kwargs)


class LSTM(_RNNBase):
    """torch.nn.LSTM: ``forward(input, (h_0, c_0)) -> (output, (h_n, c_n))``."""

    mode = "LSTM"


class GRU(_RNNBase):
    """torch.nn.GRU: ``forward(input, h_0) -> (output, h_n)``."""

    mode = "GRU"
