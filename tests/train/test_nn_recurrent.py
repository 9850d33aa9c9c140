"""Recurrent, 3-D / transposed convolution, pooling and reshaping modules against torch.nn in float64: torch's state
dict loads strictly (names, shapes, gate order), and the outputs, final states and the gradient of every parameter,
the input and the initial state equal torch's."""

import math

import numpy as np
import pytest

import ops
import tape
from tape import nn

RTOL, ATOL = 1e-10, 1e-12


def _load_torch_weights(ours, theirs):
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})  # strict


def _close(ours, theirs, what):
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), RTOL, ATOL, err_msg=what, strict=True)


def _compare(torch, ours, theirs, inputs: dict, call):
    """``call(module, lib, **leaves)`` -> a tensor or nested tuple of tensors; every output and every gradient of
    (the sum of squares of the outputs) equal torch's."""
    tl = {k: torch.tensor(a, requires_grad=True) for k, a in inputs.items()}
    ol = {k: tape.tensor(a, requires_grad=True) for k, a in inputs.items()}
    tout, oout = call(theirs, torch, **tl), call(ours, tape, **ol)
    touts, oouts = _flat(tout), _flat(oout)
    assert len(touts) == len(oouts)
    for k, (a, b) in enumerate(zip(oouts, touts)):
        _close(a, b, f"output {k}")
    sum((t * t).sum() for t in touts).backward()
    total = None
    for t in oouts:
        total = (t * t).sum() if total is None else total + (t * t).sum()
    total.backward()
    for name, p in theirs.named_parameters():
        _close(dict(ours.named_parameters())[name].grad, p.grad, f"gradient of {name}")
    for name in inputs:
        _close(ol[name].grad, tl[name].grad, f"gradient of {name}")


def _flat(x):
    return [y for item in x for y in _flat(item)] if isinstance(x, tuple | list) else [x]


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize(
    "layers,bidirectional,batch_first,with_state",
    [(1, False, False, False), (2, True, True, True), (3, False, True, True), (2, True, False, False)],
)
def test_recurrent_layers_equal_torch(torch, cls, layers, bidirectional, batch_first, with_state):
    rng = np.random.default_rng(0)
    extra = {"nonlinearity": "relu"} if cls == "RNN" and layers == 3 else {}
    kw = dict(num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, **extra)
    theirs = getattr(torch.nn, cls)(3, 4, **kw).double()
    ours = getattr(nn, cls)(3, 4, dtype=np.float64, **kw)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    _load_torch_weights(ours, theirs)
    L, N, D = 5, 2, 2 if bidirectional else 1
    x = rng.standard_normal((N, L, 3) if batch_first else (L, N, 3))
    inputs = {"x": x}
    if with_state:
        inputs["h0"] = rng.standard_normal((layers * D, N, 4))
        if cls == "LSTM":
            inputs["c0"] = rng.standard_normal((layers * D, N, 4))

    def call(module, lib, x, h0=None, c0=None):
        if h0 is None:
            return module(x)
        return module(x, (h0, c0) if c0 is not None else h0)

    _compare(torch, ours, theirs, inputs, call)


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_unbatched_input_and_no_bias_equal_torch(torch, cls):
    rng = np.random.default_rng(1)
    theirs = getattr(torch.nn, cls)(3, 2, num_layers=2, bias=False, bidirectional=True).double()
    ours = getattr(nn, cls)(3, 2, num_layers=2, bias=False, bidirectional=True, dtype=np.float64)
    _load_torch_weights(ours, theirs)
    inputs = {"x": rng.standard_normal((4, 3)), "h0": rng.standard_normal((4, 2))}
    if cls == "LSTM":
        inputs["c0"] = rng.standard_normal((4, 2))

    def call(module, lib, x, h0, c0=None):
        return module(x, (h0, c0) if c0 is not None else h0)

    _compare(torch, ours, theirs, inputs, call)


def test_dropout_between_layers(torch):
    """p = 1 drops every input of the upper layers, deterministically: its output then equals torch's; p = 0.5 draws
    reproducibly under a seed, and eval() turns it off."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 2, 3))
    theirs = torch.nn.LSTM(3, 4, num_layers=3, dropout=1.0).double()
    ours = nn.LSTM(3, 4, num_layers=3, dropout=1.0, dtype=np.float64)
    _load_torch_weights(ours, theirs)
    _compare(torch, ours, theirs, {"x": x}, lambda m, lib, x: m(x))
    half = nn.GRU(3, 4, num_layers=2, dropout=0.5, dtype=np.float64)
    runs = []
    for _ in range(2):
        tape.manual_seed(7)
        runs.append(half(tape.tensor(x))[0].numpy())
    np.testing.assert_array_equal(runs[0], runs[1])
    half.eval()
    plain = nn.GRU(3, 4, num_layers=2, dtype=np.float64)
    plain.load_state_dict(half.state_dict())
    evaluated = half(tape.tensor(x))[0].numpy()
    np.testing.assert_array_equal(evaluated, plain(tape.tensor(x))[0].numpy())
    assert not np.allclose(evaluated, runs[0])


@pytest.mark.parametrize("cls", ["LSTMCell", "GRUCell", "RNNCell"])
@pytest.mark.parametrize("batched", [True, False])
def test_cells_equal_torch(torch, cls, batched):
    rng = np.random.default_rng(3)
    extra = {"nonlinearity": "relu"} if cls == "RNNCell" else {}
    theirs, ours = getattr(torch.nn, cls)(3, 4, **extra).double(), getattr(nn, cls)(3, 4, dtype=np.float64, **extra)
    _load_torch_weights(ours, theirs)
    lead = (2,) if batched else ()
    inputs = {"x": rng.standard_normal(lead + (3,)), "h": rng.standard_normal(lead + (4,))}
    if cls == "LSTMCell":
        inputs["c"] = rng.standard_normal(lead + (4,))

    def call(module, lib, x, h, c=None):
        state = (h, c) if c is not None else h
        for _ in range(3):  # three steps of the same cell
            state = module(x, state)
        return state

    _compare(torch, ours, theirs, inputs, call)
    assert ours(tape.tensor(inputs["x"])) is not None  # a zero initial state when none is given


def test_recurrent_layers_refuse_bad_input():
    lstm = nn.LSTM(3, 4, num_layers=2)
    x = tape.tensor(np.zeros((5, 2, 3), np.float32))
    with pytest.raises(ValueError, match="LSTM: argument 'input' expected a 2 or 3-D tensor whose last dim is"):
        lstm(tape.tensor(np.zeros((5, 2, 7), np.float32)))
    with pytest.raises(ValueError, match=r"LSTM: argument 'h_0' expected shape \(2, 2, 4\), got \(1, 2, 4\)"):
        lstm(x, (tape.tensor(np.zeros((1, 2, 4), np.float32)), tape.tensor(np.zeros((2, 2, 4), np.float32))))
    with pytest.raises(ValueError, match="GRU: argument 'num_layers' expected an int >= 1"):
        nn.GRU(3, 4, num_layers=0)
    with pytest.raises(ValueError, match="RNN: argument 'nonlinearity' expected 'tanh' or 'relu'"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match=r"GRUCell: argument 'hx' expected shape \(2, 4\)"):
        nn.GRUCell(3, 4)(tape.tensor(np.zeros((2, 3), np.float32)), tape.tensor(np.zeros((3, 4), np.float32)))
    for cls in (nn.LSTM, nn.GRU, nn.RNN, nn.LSTMCell, nn.RNNCell):  # torch's device=: the CPU, or a clear refusal
        cls(3, 4, device="cpu")
        with pytest.raises(RuntimeError, match=f"{cls.__name__}: argument 'device' names 'cuda'"):
            cls(3, 4, device="cuda")
    # before: an empty sequence failed inside ops.stack ("argument 'tensors' expected at least one tensor")
    for cls, shape, first in ((nn.LSTM, (0, 2, 3), False), (nn.GRU, (2, 0, 3), True), (nn.RNN, (0, 3), False)):
        with pytest.raises(ValueError, match=f"{cls.__name__}: argument 'input' has a sequence of length 0"):
            cls(3, 4, batch_first=first)(tape.tensor(np.zeros(shape, np.float32)))


def test_recurrent_initialisation_follows_torch():
    lstm = nn.LSTM(3, 16, num_layers=2, bidirectional=True, rng=tape.Generator(0))
    bound = 1 / math.sqrt(16)
    for name, p in lstm.named_parameters():
        assert np.abs(p.numpy()).max() <= bound and np.abs(p.numpy()).max() > 0.9 * bound, name


# -- convolutions, pooling, reshaping ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cls,args,kwargs,shape",
    [
        ("Conv3d", (2, 3, (2, 3, 2)), dict(stride=(1, 2, 1), padding=1, dilation=(1, 1, 2)), (2, 2, 4, 5, 6)),
        ("Conv3d", (4, 2, 3), dict(groups=2, bias=False), (1, 4, 3, 4, 3)),
        ("ConvTranspose1d", (3, 4, 3), dict(stride=2, padding=1, output_padding=1), (2, 3, 5)),
        (
            "ConvTranspose2d",
            (4, 6, (2, 3)),
            dict(stride=(2, 1), padding=(0, 1), groups=2, dilation=(1, 2)),
            (2, 4, 3, 4),
        ),
        ("ConvTranspose2d", (2, 3, 3), dict(bias=False), (1, 2, 4, 4)),
    ],
)
def test_conv_modules_equal_torch_and_initialise_within_torchs_bound(torch, cls, args, kwargs, shape):
    theirs = getattr(torch.nn, cls)(*args, **kwargs).double()
    ours = getattr(nn, cls)(*args, **kwargs, dtype=np.float64)
    assert {n: p.shape for n, p in ours.named_parameters()} == {n: tuple(p.shape) for n, p in theirs.named_parameters()}
    fan_in, _ = torch.nn.init._calculate_fan_in_and_fan_out(theirs.weight)
    for p in ours.parameters():
        assert np.abs(p.numpy()).max() <= 1 / math.sqrt(fan_in)
    _load_torch_weights(ours, theirs)
    x = np.random.default_rng(4).standard_normal(shape)
    _compare(torch, ours, theirs, {"x": x}, lambda m, lib, x: m(x))


@pytest.mark.parametrize(
    "cls,args",
    [
        ("Conv2d", (4, 6, (2, 3), (2, 1), (0, 1), (1, 2), 2, False)),  # stride, padding, dilation, groups, bias
        ("ConvTranspose2d", (4, 6, (2, 3), (2, 1), (0, 1), (1, 0), 2, False, (1, 2))),  # output_padding, dilation
    ],
)
def test_conv_modules_take_torchs_arguments_by_position(torch, cls, args):
    theirs, ours = getattr(torch.nn, cls)(*args).double(), getattr(nn, cls)(*args, dtype=np.float64)
    for name in ("stride", "padding", "dilation", "groups", "kernel_size") + ("output_padding",) * ("Transpose" in cls):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.bias is None and repr(ours).startswith(f"{cls}(4, 6, kernel_size=(2, 3), stride=(2, 1), padding=(0, 1)")
    _load_torch_weights(ours, theirs)
    x = np.random.default_rng(6).standard_normal((2, 4, 5, 6))
    _compare(torch, ours, theirs, {"x": x}, lambda m, lib, x: m(x))


def test_a_module_argument_given_by_position_and_by_name_is_refused():
    """Before: the keyword silently won (LeakyReLU(0.1, negative_slope=0.2) had slope 0.2)."""
    with pytest.raises(TypeError, match=r"LeakyReLU: multiple values for argument 'negative_slope'"):
        nn.LeakyReLU(0.1, negative_slope=0.2)
    with pytest.raises(TypeError, match=r"Conv2d: got multiple values for argument\(s\) \['stride'\]"):
        nn.Conv2d(2, 2, 3, 1, stride=2)
    with pytest.raises(TypeError, match=r"ConvTranspose1d: unknown argument\(s\) \['strides'\]"):
        nn.ConvTranspose1d(2, 2, 3, strides=2)


def test_pool_and_reshape_modules_equal_torch(torch):
    rng = np.random.default_rng(5)
    x4, x3 = rng.standard_normal((2, 3, 7, 6)), rng.standard_normal((2, 3, 10))
    for ours, theirs, x in (
        (nn.AdaptiveMaxPool2d((3, 2)), torch.nn.AdaptiveMaxPool2d((3, 2)), x4),
        (nn.AdaptiveAvgPool1d(4), torch.nn.AdaptiveAvgPool1d(4), x3),
        (nn.Unflatten(1, (2, -1)), torch.nn.Unflatten(1, (2, -1)), x3.reshape(2, 30)),
        (nn.Unflatten(-1, (5, 2)), torch.nn.Unflatten(-1, (5, 2)), x3),
        (
            nn.Sequential(nn.Flatten(), nn.Unflatten(1, (3, 7, 6))),
            torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Unflatten(1, (3, 7, 6))),
            x4,
        ),
    ):
        _compare(torch, ours, theirs, {"x": x}, lambda m, lib, x: m(x))
    with pytest.raises(IndexError, match=r"Unflatten: dim 3 is out of range for an input of shape \(2, 3, 10\)"):
        nn.Unflatten(3, (2, 5))(tape.tensor(x3))


def test_an_lstm_trains_under_compile_as_eager():
    """The time loop is Python over ops: a compiled step replays it and equals eager bit for bit."""
    rng = np.random.default_rng(6)
    x, y = tape.tensor(rng.standard_normal((6, 3, 2))), tape.tensor(rng.standard_normal((6, 3, 5)))
    results = []
    for compiled in (True, False):
        model = nn.LSTM(2, 5, num_layers=2, dtype=np.float64, rng=tape.Generator(0))
        params = list(model.parameters())
        opt = tape.optim.SGD(params, lr=0.1)

        def loss_fn(x, y, model=model):
            return ops.mse_loss(model(x)[0], y)

        step = tape.compile(loss_fn, params) if compiled else None
        losses = []
        for _ in range(3):
            opt.zero_grad()
            if compiled:
                loss, _ = step(x, y)
            else:
                loss = loss_fn(x, y)
                loss.backward()
            opt.step()
            losses.append(loss.item())
        results.append((losses, [p.numpy().copy() for p in params], step))
    assert results[0][0] == results[1][0]
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_array_equal(a, b)
    assert results[0][2].replays == 2
