"""Newcomer frictions (issue #35): a torch habit that minitape does not share gets an error naming the op or layer,
the argument, what was expected and what came, and what to write instead -- never a message blaming the wrong
argument (an int64 input to Linear once said the *weight* should be int64)."""

import numpy as np
import pytest

import ops
import tape
import tape.torch as torch

nn = tape.nn


def _t(shape, dtype):
    return tape.tensor(np.ones(shape, dtype=dtype))


def _message(call, kind=TypeError) -> str:
    with pytest.raises(kind) as error:
        call()
    return str(error.value)


# -- devices: CPU only ------------------------------------------------------------------------------------------
DEVICE_CALLS = [
    ("Tensor.to", lambda: _t((2,), np.float32).to("cuda")),
    ("Tensor.to", lambda: _t((2,), np.float32).to(device="cuda:0")),
    ("Tensor.cuda", lambda: _t((2,), np.float32).cuda()),
    ("Linear.to", lambda: nn.Linear(3, 2).to("cuda")),
    ("Linear.cuda", lambda: nn.Linear(3, 2).cuda()),
    ("Sequential.cuda", lambda: nn.Sequential(nn.Linear(3, 2)).cuda(0)),
    ("zeros", lambda: torch.zeros(2, device="cuda")),
    ("tensor", lambda: torch.tensor([1.0], device="cuda")),
    ("Linear", lambda: nn.Linear(3, 2, device="cuda")),
    ("Embedding", lambda: nn.Embedding(3, 2, device="cuda")),
    ("LayerNorm", lambda: nn.LayerNorm(3, device="cuda")),
    ("RMSNorm", lambda: nn.RMSNorm(3, device="cuda")),
    ("Conv2d", lambda: nn.Conv2d(3, 2, 1, device="cuda")),
    ("ConvTranspose1d", lambda: nn.ConvTranspose1d(3, 2, 1, device="cuda")),
    ("BatchNorm1d", lambda: nn.BatchNorm1d(3, device="cuda")),
    ("GroupNorm", lambda: nn.GroupNorm(1, 3, device="cuda")),
    ("InstanceNorm2d", lambda: nn.InstanceNorm2d(3, device="cuda")),
    ("MultiHeadAttention", lambda: nn.MultiHeadAttention(4, 2, device="cuda")),
    ("TransformerBlock", lambda: nn.TransformerBlock(4, 2, device="cuda")),
]


@pytest.mark.parametrize("who, call", DEVICE_CALLS, ids=[f"{w}-{i}" for i, (w, _) in enumerate(DEVICE_CALLS)])
def test_cuda_says_minitape_is_cpu_only_and_what_to_do(who, call):
    message = _message(call, RuntimeError)
    assert message.startswith(f"{who}: "), message
    assert "CUDA is not available in minitape" in message and "CPU only" in message, message
    assert "device='cpu'" in message and "drop" in message, message  # what to do instead


def test_other_accelerators_are_named_too():
    message = _message(lambda: _t((2,), np.float32).to("mps"), RuntimeError)
    assert "MPS is not available in minitape" in message and "CPU only" in message, message


def test_the_cpu_is_accepted_where_a_device_is():
    for layer in (nn.Linear(3, 2, device="cpu"), nn.Embedding(3, 2, device="cpu"), nn.LayerNorm(3, device="cpu")):
        assert layer.weight.dtype == np.float32
    assert nn.Conv2d(3, 2, 1, device=torch.device("cpu")).weight.shape == (2, 3, 1, 1)
    assert nn.RMSNorm(3, device="cpu:0").weight.shape == (3,)
    assert nn.TransformerBlock(4, 2, device="cpu").norm1.weight.shape == (4,)
    assert nn.BatchNorm1d(3, device="cpu").running_mean.shape == (3,)


# -- a layer fed the wrong dtype ---------------------------------------------------------------------------------
FLOAT_INPUT = [  # (what is called, the op or layer the message names, the argument)
    (lambda: nn.Linear(3, 2)(_t((2, 3), np.int64)), "linear", "input"),
    (lambda: nn.Linear(3, 2)(_t((2, 3), bool)), "linear", "input"),
    (lambda: ops.matmul(_t((2, 3), np.int64), _t((3, 2), np.float32)), "matmul", "input"),
    (lambda: nn.MultiHeadAttention(4, 2)(_t((1, 3, 4), np.int64)), "linear", "input"),
    (lambda: nn.LSTM(3, 2)(_t((4, 1, 3), np.int64)), "linear", "input"),
    (lambda: nn.LayerNorm(3)(_t((2, 3), np.int64)), "layer_norm", "input"),
    (lambda: nn.RMSNorm(3)(_t((2, 3), np.int64)), "rms_norm", "input"),
    (lambda: nn.Conv1d(2, 2, 1)(_t((1, 2, 4), np.int64)), "conv1d", "input"),
    (lambda: nn.Conv2d(2, 2, 1)(_t((1, 2, 4, 4), np.int64)), "conv2d", "input"),
    (lambda: nn.BatchNorm1d(2)(_t((3, 2), np.int64)), "batch_norm", "input"),
    (lambda: nn.GroupNorm(1, 2)(_t((3, 2), np.int64)), "group_norm", "input"),
    (lambda: nn.Dropout(0.5)(_t((3, 2), np.int64)), "dropout", "input"),
    (lambda: ops.cross_entropy(_t((2, 3), np.int64), _t((2,), np.int64)), "cross_entropy", "input"),
]


@pytest.mark.parametrize("case", FLOAT_INPUT, ids=lambda c: c[1] if isinstance(c, str) else None)
def test_a_non_floating_input_is_blamed_and_the_conversion_named(case):
    call, op, argument = case
    message = _message(call)
    assert message.startswith(f"{op}: argument '{argument}' expected a floating tensor"), message
    assert ".float()" in message and ".double()" in message, message


def test_linear_with_an_integer_input_does_not_ask_for_an_integer_weight():
    message = _message(lambda: nn.Linear(3, 2)(_t((2, 3), np.int64)))
    assert "got dtype int64" in message and "'weight' expected dtype int64" not in message, message
    # a float input and an integer weight: the weight is converted, to the input's dtype
    message = _message(lambda: ops.linear(_t((2, 3), np.float64), _t((2, 3), np.int64)))
    assert message.startswith("linear: argument 'weight' expected dtype float64 (that of 'input'), got int64"), message


INDEX_INPUT = [  # a floating tensor where integer indices are expected
    (lambda: nn.Embedding(5, 3)(_t((3,), np.float64)), "Embedding", "input"),
    (lambda: nn.Embedding(5, 3)(_t((3,), np.float32)), "Embedding", "input"),
    (lambda: ops.embedding(_t((3,), np.float32), _t((5, 3), np.float32)), "embedding", "input"),
    (lambda: ops.one_hot(_t((3,), np.float32), 4), "one_hot", "input"),
    (lambda: ops.gather(_t((2, 3), np.float32), 1, _t((2, 1), np.float32)), "gather", "index"),
    (lambda: ops.nll_loss(_t((2, 3), np.float32), _t((2,), np.float32)), "nll_loss", "target"),
    (lambda: ops.cross_entropy(_t((2, 3), np.float32), _t((2,), np.float32)), "cross_entropy", "target"),
    (lambda: nn.CrossEntropyLoss()(_t((2, 3), np.float32), _t((2,), np.float32)), "cross_entropy", "target"),
]


@pytest.mark.parametrize("case", INDEX_INPUT, ids=lambda c: c[1] if isinstance(c, str) else None)
def test_floating_indices_are_told_to_be_integer(case):
    call, op, argument = case
    message = _message(call, (TypeError, ValueError))
    assert message.startswith(f"{op}: argument '{argument}' expected"), message
    assert "integer" in message and ".long()" in message, message
    assert "must share one dtype" not in message, message
