"""``torch.nn.modules``: the module classes, also under torch's submodule paths (``nn.modules.rnn.LSTM``,
``nn.modules.linear.Linear``, ...), which is where torch's serialization names them."""

import sys
import types

import tape.train.nn as _nn

_PATHS = {
    "module": ("Module",),
    "container": ("Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"),
    "linear": ("Linear", "Identity"),
    "sparse": ("Embedding",),
    "normalization": ("LayerNorm", "RMSNorm", "GroupNorm"),
    "batchnorm": ("BatchNorm1d", "BatchNorm2d"),
    "instancenorm": ("InstanceNorm1d", "InstanceNorm2d"),
    "dropout": ("Dropout",),
    "rnn": ("RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"),
    "conv": ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d"),
    "activation": ("ReLU", "GELU", "Tanh", "Sigmoid", "SiLU", "LeakyReLU", "Softmax", "LogSoftmax"),
    "loss": ("CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss"),
    "flatten": ("Flatten", "Unflatten"),
}

for _path, _names in _PATHS.items():
    _module = types.ModuleType(f"{__name__}.{_path}", f"torch.nn.modules.{_path}")
    for _name in _names:
        if hasattr(_nn, _name):
            setattr(_module, _name, getattr(_nn, _name))
    sys.modules[_module.__name__] = _module
    globals()[_path] = _module
