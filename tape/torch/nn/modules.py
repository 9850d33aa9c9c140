"""``torch.nn.modules``: the module classes, also under torch's submodule paths (``nn.modules.rnn.LSTM``,
``nn.modules.linear.Linear``, ...), which is where torch's serialization names them."""

import sys
import types

import tape.train.nn as _nn

_PATHS = {  # torch's submodule of each class (tests/train/test_op_modules.py checks them against torch's __module__)
    "module": ("Module",),
    "parameter": ("Parameter",),
    "container": ("Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"),
    "linear": ("Linear", "Identity"),
    "sparse": ("Embedding",),
    "normalization": ("LayerNorm", "RMSNorm", "GroupNorm", "LocalResponseNorm"),
    "batchnorm": ("BatchNorm1d", "BatchNorm2d"),
    "instancenorm": ("InstanceNorm1d", "InstanceNorm2d"),
    "dropout": ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"),
    "rnn": ("RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"),
    "transformer": (
        "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer", "TransformerDecoderLayer",
    ),
    "conv": ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d"),
    "activation": (
        "ReLU", "GELU", "Tanh", "Sigmoid", "SiLU", "LeakyReLU", "Softmax", "LogSoftmax", "MultiheadAttention", "CELU",
        "ELU", "GLU", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "LogSigmoid", "Mish", "ReLU6", "SELU",
        "Softmin", "Softplus", "Softshrink", "Softsign", "Tanhshrink", "Threshold",
    ),
    "loss": (
        "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss", "BCELoss", "CosineEmbeddingLoss",
        "HingeEmbeddingLoss", "HuberLoss", "KLDivLoss", "MarginRankingLoss", "MultiLabelMarginLoss",
        "MultiLabelSoftMarginLoss", "MultiMarginLoss", "PoissonNLLLoss", "SmoothL1Loss", "SoftMarginLoss",
        "TripletMarginLoss",
    ),
    "pooling": (
        "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "LPPool1d", "LPPool2d",
        "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
    ),
    "padding": tuple(f"{kind}Pad{n}d" for kind in ("Zero", "Constant", "Reflection", "Replication", "Circular")
                     for n in (1, 2, 3)),
    "distance": ("CosineSimilarity", "PairwiseDistance"),
    "fold": ("Fold", "Unfold"),
    "pixelshuffle": ("PixelShuffle", "PixelUnshuffle"),
    "channelshuffle": ("ChannelShuffle",),
    "upsampling": ("Upsample",),
    "flatten": ("Flatten", "Unflatten"),
}  # fmt: skip

for _path, _names in _PATHS.items():
    _module = types.ModuleType(f"{__name__}.{_path}", f"torch.nn.modules.{_path}")
    for _name in _names:
        if hasattr(_nn, _name):
            setattr(_module, _name, getattr(_nn, _name))
    sys.modules[_module.__name__] = _module
    globals()[_path] = _module
