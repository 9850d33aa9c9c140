"""An export never changes the model: it runs the call (and again at other sizes for the dynamic axes), but the
model's parameters, buffers (BatchNorm's running statistics and batch count), training flags, the random
generators it holds, minitape's default generator and numpy's and Python's global random states are as they
were afterwards -- also when the export is refused (training-mode dropout). Checked for every stateful layer of
tape.nn: each that registers a buffer or takes an ``rng``."""

from __future__ import annotations

import inspect
import random

import numpy as np
import pytest

import tape
from tape import nn
from tape.onnx import NotExportableError

pytest.importorskip("onnx")

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 5, 8)).astype(np.float32)
# name -> (module factory, the call on it, example input): every tape.nn layer with a buffer or an rng
STATEFUL = {
    "BatchNorm1d": (lambda: nn.BatchNorm1d(8), lambda m: m, X[:, 0]),
    "BatchNorm2d": (lambda: nn.BatchNorm2d(5), lambda m: m, X[:, :, :, None]),
    "Dropout": (lambda: nn.Dropout(0.5), lambda m: m, X),
    "Dropout with its own rng": (lambda: nn.Dropout(0.5, rng=tape.Generator(7)), lambda m: m, X),
    "Embedding": (lambda: nn.Embedding(6, 4), lambda m: m, np.array([[1, 2, 5], [0, 3, 3]])),
    "Linear": (lambda: nn.Linear(8, 3), lambda m: m, X),
    "MultiHeadAttention": (lambda: nn.MultiHeadAttention(8, 2, dropout=0.5), lambda m: m, X),
    "TransformerBlock": (lambda: nn.TransformerBlock(8, 2, dropout=0.5), lambda m: m, X),
    "RNNCell": (lambda: nn.RNNCell(8, 4), lambda m: m, X[:, 0]),
    "LSTMCell": (lambda: nn.LSTMCell(8, 4), lambda m: lambda x: m(x)[0], X[:, 0]),
    "GRUCell": (lambda: nn.GRUCell(8, 4), lambda m: m, X[:, 0]),
    "RNN": (lambda: nn.RNN(8, 4, num_layers=2, dropout=0.5, rng=tape.Generator(3)), lambda m: lambda x: m(x)[0], X),
    "LSTM": (lambda: nn.LSTM(8, 4, num_layers=2, dropout=0.5), lambda m: lambda x: m(x)[0], X),
    "GRU": (lambda: nn.GRU(8, 4, num_layers=2, dropout=0.5), lambda m: lambda x: m(x)[0], X),
}


def _stateful_layers() -> set[str]:
    """The public tape.nn Module classes that register a buffer or take an rng."""

    def source(cls) -> str:
        try:
            return inspect.getsource(cls)
        except (OSError, TypeError):
            return ""

    names = set()
    for name in dir(nn):
        cls = getattr(nn, name)
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)) or name.startswith("_"):
            continue
        bases = [base for base in cls.__mro__ if base.__module__.startswith("tape.train") and base is not nn.Module]
        text = "".join(map(source, bases))
        if "rng" in inspect.signature(cls.__init__).parameters or "register_buffer" in text:
            names.add(name)
    return names


def test_every_stateful_layer_is_checked():
    missing = _stateful_layers() - {name.split(" ")[0] for name in STATEFUL}
    assert not missing, f"add these tape.nn layers to STATEFUL: {sorted(missing)}"


def _state(module) -> dict:
    generators = {id(g): g for m in module.modules() for g in vars(m).values() if isinstance(g, np.random.Generator)}
    return {
        "tensors": {k: v.numpy().copy() for k, v in module.state_dict().items()},
        "training": [m.training for m in module.modules()],
        "generators": [repr(g.bit_generator.state) for g in generators.values()],
        "default generator": repr(tape.get_rng_state()),
        "numpy": repr(np.random.get_state()),
        "python": random.getstate(),
    }


def _assert_same(before: dict, after: dict):
    assert before.keys() == after.keys()
    for key in before:
        if key == "tensors":
            assert before[key].keys() == after[key].keys()
            for name in before[key]:
                np.testing.assert_array_equal(after[key][name], before[key][name], err_msg=name)
        else:
            assert after[key] == before[key], key


@pytest.mark.parametrize("name", sorted(STATEFUL))
@pytest.mark.parametrize("dynamic", [False, True], ids=["fixed", "dynamic batch"])
def test_an_export_in_training_mode_leaves_the_model_as_it_was(name, dynamic):
    """Before: exporting a BatchNorm left in training mode moved its running statistics (once per call the export
    made: the example, and each probe size of a dynamic axis), and a refused export of training-mode dropout
    advanced the generators."""
    factory, call, x = STATEFUL[name]
    tape.manual_seed(0)
    module = factory()
    module.train()
    fn = call(module)
    before = _state(module)
    axes = {"input_0": [0]} if dynamic else None
    try:
        tape.onnx.export(fn, (x,), None, dynamic_axes=axes)
    except NotExportableError:
        pass  # refused (dropout while training): the model must still be as it was
    _assert_same(before, _state(module))


def test_a_batch_norm_in_training_mode_is_refused_naming_eval_mode():
    """Its running statistics change in place, which a recorded op list cannot replay: a clear export error (not
    the in-place engine's RuntimeError), the statistics untouched; in eval mode it exports."""
    layer = nn.BatchNorm1d(8)
    with pytest.raises(NotExportableError, match=r"changes tensor #\d+ in place .*BatchNorm.*\.eval\(\)"):
        tape.onnx.export(layer, (X[:, 0],), None)
    np.testing.assert_array_equal(layer.running_mean.numpy(), np.zeros(8))
    layer.eval()
    assert tape.onnx.export(layer, (X[:, 0],), None) is not None
