"""torch.nn's modules that are one op with their constructor's options: activations, losses, distances, pooling,
padding, resampling, shuffles and the dropout family. Each class is made by ``op_module`` from torch's constructor
signature (names, order and defaults, so positional arguments bind as torch binds them; tests/train/
test_op_modules.py compares every one with torch's) and the op it runs: ``forward(*inputs)`` is
``ops.<op>(*inputs, **options)``. Three kinds of option are not passed to the op:

- ``inplace=True``: the result is written into the input through the engine's one in-place path
  (``tape.inplace.apply_inplace``), as torch's ``ReLU(inplace=True)`` does;
- torch's deprecated options (``size_average`` / ``reduce`` of the losses, ``min_value`` / ``max_value`` of
  Hardtanh), kept in the signature so positions bind alike: only ``None`` is accepted, the refusal names what
  replaced them;
- the dropout family takes ``training`` from the module's mode (``train()`` / ``eval()``).
"""

from __future__ import annotations

import inspect

import ops

from ..checks import ints
from ..inplace import apply_inplace
from .nn import Module

REQUIRED = inspect.Parameter.empty
_DEPRECATED = {
    "size_average": "reduction='mean', 'sum' or 'none'",
    "reduce": "reduction='mean', 'sum' or 'none'",
    "min_value": "min_val",
    "max_value": "max_val",
}


def _signature(fields: tuple, defaults: tuple) -> inspect.Signature:
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature(
        [inspect.Parameter("self", kind)] + [inspect.Parameter(f, kind, default=d) for f, d in zip(fields, defaults)]
    )


def _bound(class_name: str, signature: inspect.Signature, module, args, kwargs) -> inspect.BoundArguments:
    """The constructor's arguments bound as Python binds them; a mismatch names the class and its signature."""
    try:
        return signature.bind(module, *args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{class_name}: {e}; the signature is {class_name}{signature}") from None


def op_module(class_name: str, op_name: str, fields: tuple = (), defaults: tuple = (), *, training=False) -> type:
    """A Module class named ``class_name`` whose constructor is torch's (``fields`` with ``defaults``, REQUIRED for
    an argument without one) and whose forward is ``ops.<op_name>(*inputs, **options)``; see the module docstring
    for ``inplace``, ``size_average``/``reduce`` and ``training``."""
    signature = _signature(fields, defaults)
    passed = tuple(f for f in fields if f != "inplace" and f not in _DEPRECATED)

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        bound = _bound(class_name, signature, self, args, kwargs)
        bound.apply_defaults()
        for name, instead in _DEPRECATED.items():
            if bound.arguments.get(name) is not None:
                raise ValueError(
                    f"{class_name}: '{name}' is deprecated in torch and not supported here; pass {instead}"
                )
        for name in passed + (("inplace",) if "inplace" in fields else ()):
            setattr(self, name, bound.arguments[name])

    __init__.__signature__ = signature  # type: ignore[attr-defined]

    def forward(self, *inputs):
        options = {f: getattr(self, f) for f in passed}
        if training:
            options["training"] = self.training
        op = getattr(ops, op_name)
        if getattr(self, "inplace", False):
            return apply_inplace(op, inputs[0], inputs, options, f"nn.{class_name}(inplace=True)")
        return op(*inputs, **options)

    def extra_repr(self) -> str:
        return ", ".join(f"{f}={getattr(self, f)!r}" for f in passed + (("inplace",) if "inplace" in fields else ()))

    return type(
        class_name,
        (Module,),
        {
            "__init__": __init__,
            "forward": forward,
            "extra_repr": extra_repr,
            "__module__": __name__,
            "__doc__": f"torch.nn.{class_name}{signature}: ``ops.{op_name}`` as a module.",
        },
    )


def _pad_module(class_name: str, dims: int, mode: str) -> type:
    """torch's ``<Mode>Pad<n>d(padding[, value])``: ``ops.pad`` with ``padding`` an int (every side) or the
    2 * ``dims`` sides, last dim first."""
    constant = mode == "constant" and not class_name.startswith("Zero")
    signature = _signature(("padding", "value") if constant else ("padding",), (REQUIRED, REQUIRED)[: 1 + constant])

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        bound = _bound(class_name, signature, self, args, kwargs)
        padding = ints(class_name, "padding", bound.arguments["padding"])
        self.padding = padding * (2 * dims) if len(padding) == 1 else padding
        if len(self.padding) != 2 * dims:
            raise ValueError(f"{class_name}: argument 'padding' needs {2 * dims} sides (or one for all), got {padding}")
        self.value = float(bound.arguments.get("value", 0.0))

    __init__.__signature__ = signature  # type: ignore[attr-defined]

    def forward(self, input):
        return ops.pad(input, self.padding, mode=mode, value=self.value if mode == "constant" else None)

    def extra_repr(self) -> str:
        return f"{self.padding}" + (f", value={self.value}" if constant else "")

    doc = f"torch.nn.{class_name}{signature}: ``ops.pad(input, padding, mode='{mode}')`` as a module."
    return type(
        class_name,
        (Module,),
        {"__init__": __init__, "forward": forward, "extra_repr": extra_repr, "__module__": __name__, "__doc__": doc},
    )


_R, _LOSS = REQUIRED, ("size_average", "reduce", "reduction")

# -- activations
ReLU = op_module("ReLU", "relu", ("inplace",), (False,))
ReLU6 = op_module("ReLU6", "relu6", ("inplace",), (False,))
SiLU = op_module("SiLU", "silu", ("inplace",), (False,))
Mish = op_module("Mish", "mish", ("inplace",), (False,))
SELU = op_module("SELU", "selu", ("inplace",), (False,))
ELU = op_module("ELU", "elu", ("alpha", "inplace"), (1.0, False))
CELU = op_module("CELU", "celu", ("alpha", "inplace"), (1.0, False))
LeakyReLU = op_module("LeakyReLU", "leaky_relu", ("negative_slope", "inplace"), (0.01, False))
Hardtanh = op_module(
    "Hardtanh", "hardtanh", ("min_val", "max_val", "inplace", "min_value", "max_value"), (-1.0, 1.0, False, None, None)
)
Hardsigmoid = op_module("Hardsigmoid", "hardsigmoid", ("inplace",), (False,))
Hardswish = op_module("Hardswish", "hardswish", ("inplace",), (False,))
Threshold = op_module("Threshold", "threshold", ("threshold", "value", "inplace"), (_R, _R, False))
Tanh = op_module("Tanh", "tanh")
Sigmoid = op_module("Sigmoid", "sigmoid")
LogSigmoid = op_module("LogSigmoid", "logsigmoid")
Softsign = op_module("Softsign", "softsign")
Tanhshrink = op_module("Tanhshrink", "tanhshrink")
Softplus = op_module("Softplus", "softplus", ("beta", "threshold"), (1.0, 20.0))
Hardshrink = op_module("Hardshrink", "hardshrink", ("lambd",), (0.5,))
Softshrink = op_module("Softshrink", "softshrink", ("lambd",), (0.5,))
GLU = op_module("GLU", "glu", ("dim",), (-1,))
Softmax = op_module("Softmax", "softmax", ("dim",), (None,))
Softmin = op_module("Softmin", "softmin", ("dim",), (None,))
LogSoftmax = op_module("LogSoftmax", "log_softmax", ("dim",), (None,))

# -- losses (torch's deprecated size_average / reduce keep their positions)
CrossEntropyLoss = op_module(
    "CrossEntropyLoss",
    "cross_entropy",
    ("weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing"),
    (None, None, -100, None, "mean", 0.0),
)
NLLLoss = op_module(
    "NLLLoss",
    "nll_loss",
    ("weight", "size_average", "ignore_index", "reduce", "reduction"),
    (None, None, -100, None, "mean"),
)
MSELoss = op_module("MSELoss", "mse_loss", _LOSS, (None, None, "mean"))
L1Loss = op_module("L1Loss", "l1_loss", _LOSS, (None, None, "mean"))
SoftMarginLoss = op_module("SoftMarginLoss", "soft_margin_loss", _LOSS, (None, None, "mean"))
MultiLabelMarginLoss = op_module("MultiLabelMarginLoss", "multilabel_margin_loss", _LOSS, (None, None, "mean"))
SmoothL1Loss = op_module("SmoothL1Loss", "smooth_l1_loss", (*_LOSS, "beta"), (None, None, "mean", 1.0))
HuberLoss = op_module("HuberLoss", "huber_loss", ("reduction", "delta"), ("mean", 1.0))
KLDivLoss = op_module("KLDivLoss", "kl_div", (*_LOSS, "log_target"), (None, None, "mean", False))
BCELoss = op_module("BCELoss", "binary_cross_entropy", ("weight", *_LOSS), (None, None, None, "mean"))
BCEWithLogitsLoss = op_module(
    "BCEWithLogitsLoss",
    "binary_cross_entropy_with_logits",
    ("weight", *_LOSS, "pos_weight"),
    (None, None, None, "mean", None),
)
MultiLabelSoftMarginLoss = op_module(
    "MultiLabelSoftMarginLoss", "multilabel_soft_margin_loss", ("weight", *_LOSS), (None, None, None, "mean")
)
MarginRankingLoss = op_module("MarginRankingLoss", "margin_ranking_loss", ("margin", *_LOSS), (0.0, None, None, "mean"))
HingeEmbeddingLoss = op_module(
    "HingeEmbeddingLoss", "hinge_embedding_loss", ("margin", *_LOSS), (1.0, None, None, "mean")
)
CosineEmbeddingLoss = op_module(
    "CosineEmbeddingLoss", "cosine_embedding_loss", ("margin", *_LOSS), (0.0, None, None, "mean")
)
PoissonNLLLoss = op_module(
    "PoissonNLLLoss",
    "poisson_nll_loss",
    ("log_input", "full", "size_average", "eps", "reduce", "reduction"),
    (True, False, None, 1e-8, None, "mean"),
)
MultiMarginLoss = op_module(
    "MultiMarginLoss",
    "multi_margin_loss",
    ("p", "margin", "weight", *_LOSS),
    (1, 1.0, None, None, None, "mean"),
)
TripletMarginLoss = op_module(
    "TripletMarginLoss",
    "triplet_margin_loss",
    ("margin", "p", "eps", "swap", *_LOSS),
    (1.0, 2.0, 1e-6, False, None, None, "mean"),
)

# -- distances
CosineSimilarity = op_module("CosineSimilarity", "cosine_similarity", ("dim", "eps"), (1, 1e-8))
PairwiseDistance = op_module("PairwiseDistance", "pairwise_distance", ("p", "eps", "keepdim"), (2.0, 1e-6, False))

# -- pooling, resampling, shuffles, folds
_MAX_POOL = ("kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode")
MaxPool1d = op_module("MaxPool1d", "max_pool1d", _MAX_POOL, (_R, None, 0, 1, False, False))
MaxPool2d = op_module("MaxPool2d", "max_pool2d", _MAX_POOL, (_R, None, 0, 1, False, False))
MaxPool3d = op_module("MaxPool3d", "max_pool3d", _MAX_POOL, (_R, None, 0, 1, False, False))
_AVG_POOL = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")
AvgPool1d = op_module("AvgPool1d", "avg_pool1d", _AVG_POOL[:5], (_R, None, 0, False, True))
AvgPool2d = op_module("AvgPool2d", "avg_pool2d", _AVG_POOL, (_R, None, 0, False, True, None))
AvgPool3d = op_module("AvgPool3d", "avg_pool3d", _AVG_POOL, (_R, None, 0, False, True, None))
LPPool1d = op_module(
    "LPPool1d", "lp_pool1d", ("norm_type", "kernel_size", "stride", "ceil_mode"), (_R, _R, None, False)
)
LPPool2d = op_module(
    "LPPool2d", "lp_pool2d", ("norm_type", "kernel_size", "stride", "ceil_mode"), (_R, _R, None, False)
)
AdaptiveAvgPool1d = op_module("AdaptiveAvgPool1d", "adaptive_avg_pool1d", ("output_size",), (_R,))
AdaptiveAvgPool2d = op_module("AdaptiveAvgPool2d", "adaptive_avg_pool2d", ("output_size",), (_R,))
AdaptiveAvgPool3d = op_module("AdaptiveAvgPool3d", "adaptive_avg_pool3d", ("output_size",), (_R,))
AdaptiveMaxPool1d = op_module(
    "AdaptiveMaxPool1d", "adaptive_max_pool1d", ("output_size", "return_indices"), (_R, False)
)
AdaptiveMaxPool2d = op_module(
    "AdaptiveMaxPool2d", "adaptive_max_pool2d", ("output_size", "return_indices"), (_R, False)
)
Upsample = op_module(
    "Upsample",
    "interpolate",
    ("size", "scale_factor", "mode", "align_corners", "recompute_scale_factor"),
    (None, None, "nearest", None, None),
)
PixelShuffle = op_module("PixelShuffle", "pixel_shuffle", ("upscale_factor",), (_R,))
PixelUnshuffle = op_module("PixelUnshuffle", "pixel_unshuffle", ("downscale_factor",), (_R,))
ChannelShuffle = op_module("ChannelShuffle", "channel_shuffle", ("groups",), (_R,))
LocalResponseNorm = op_module(
    "LocalResponseNorm", "local_response_norm", ("size", "alpha", "beta", "k"), (_R, 1e-4, 0.75, 1.0)
)
Fold = op_module("Fold", "fold", ("output_size", "kernel_size", "dilation", "padding", "stride"), (_R, _R, 1, 0, 1))
Unfold = op_module("Unfold", "unfold", ("kernel_size", "dilation", "padding", "stride"), (_R, 1, 0, 1))
Flatten = op_module("Flatten", "flatten", ("start_dim", "end_dim"), (1, -1))

# -- the dropout family (training from the module's mode)
Dropout1d = op_module("Dropout1d", "dropout1d", ("p", "inplace"), (0.5, False), training=True)
Dropout2d = op_module("Dropout2d", "dropout2d", ("p", "inplace"), (0.5, False), training=True)
Dropout3d = op_module("Dropout3d", "dropout3d", ("p", "inplace"), (0.5, False), training=True)
AlphaDropout = op_module("AlphaDropout", "alpha_dropout", ("p", "inplace"), (0.5, False), training=True)
FeatureAlphaDropout = op_module(
    "FeatureAlphaDropout", "feature_alpha_dropout", ("p", "inplace"), (0.5, False), training=True
)

# -- padding
_PADS = {"Zero": "constant", "Constant": "constant", "Reflection": "reflect", "Replication": "replicate"}
_PADS["Circular"] = "circular"
_pad_classes = {
    f"{kind}Pad{n}d": _pad_module(f"{kind}Pad{n}d", n, mode) for kind, mode in _PADS.items() for n in (1, 2, 3)
}
globals().update(_pad_classes)

__all__ = sorted(
    name
    for name, value in globals().items()
    if isinstance(value, type) and issubclass(value, Module) and value is not Module
)
