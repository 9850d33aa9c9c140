"""Dropout, as ``torch.nn.functional.dropout``: inverted (kept elements scaled by 1/(1-p)).

The mask is a pure function of an integer seed. ``rng`` is where the seed comes from: an int is the seed
itself; a ``tape.Generator`` or ``np.random.Generator`` (None: ``tape.default_generator``, seeded by
``tape.manual_seed``) gives a fresh seed on each call, drawn in the forward.
The forward saves the seed it used under the attribute's own name, ``rng``, so the backward,
a replay of the tape and the second-order pass regenerate the same mask from the recorded attribute
instead of drawing a new one. Not training, or ``p == 0``, is the identity and draws nothing.
"""

__all__ = ["dropout"]

import numbers

import numpy as np

from tape.onnx import lowering
from tape.random import as_generator
from tape.registry import Sample, defop

from ._onnx import NotExportable
from ._samples import transposed, uniform
from ._validation import require, require_float

_SEEDS = 2**63 - 1


def _keep_mask(shape: tuple, p: float, seed: int) -> np.ndarray:
    """The replayable keep mask: element kept when its uniform draw (from ``seed``) is >= p."""
    return np.random.default_rng(seed).random(shape, dtype=np.float32) >= p


def _mask_scale(shape: tuple, p: float, seed: int, dtype) -> np.ndarray:
    """1/(1-p) where kept, 0 where dropped (all 0 when p == 1)."""
    scale = 0.0 if p == 1 else 1 / (1 - p)
    return np.where(_keep_mask(shape, p, seed), np.asarray(scale, dtype), np.asarray(0, dtype))


def _seed(rng) -> int:
    if isinstance(rng, numbers.Integral):
        return int(rng)
    return int(as_generator("dropout", rng).integers(0, _SEEDS))


def _dropout(input, p=0.5, training=True, *, rng=None):
    if not training or p == 0:
        return input, {}
    seed = _seed(rng)
    return input * _mask_scale(input.shape, p, seed, input.dtype), {"rng": seed}


def _dropout_vjp(g, ans, input, *, p, training, rng):
    if not training or p == 0:
        return g
    return g * _mask_scale(input.shape, p, _recorded_seed(rng), g.dtype)


def _recorded_seed(rng) -> int:
    if not isinstance(rng, numbers.Integral):  # never draw a new mask for a recorded application
        raise RuntimeError(
            "dropout: the recorded application holds no seed (its 'rng' attribute is "
            f"{type(rng).__name__}), so its mask cannot be regenerated"
        )
    return int(rng)


def _dropout_composite(input, p=0.5, training=True, *, rng=None):
    """dropout as a product with its constant mask: what its second order differentiates."""
    if not training or p == 0:
        return input * 1
    return input * _mask_scale(input.shape, p, _recorded_seed(rng), input.dtype)


def _check_dropout(input, p=0.5, training=True, *, rng=None):
    require_float("dropout", "input", input)
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"dropout: argument 'p' expected a probability (a float in [0, 1]), got {type(p).__name__}")
    require(0 <= float(p) <= 1, "dropout", "p", "a probability in [0, 1]", p)
    if not isinstance(training, bool | np.bool_):
        raise TypeError(f"dropout: argument 'training' expected a bool, got {type(training).__name__} {training!r}")
    if not (
        rng is None
        or isinstance(rng, np.random.Generator)
        or (isinstance(rng, numbers.Integral) and not isinstance(rng, bool))
    ):
        raise TypeError(
            "dropout: argument 'rng' expected None, an int seed, a tape.Generator or a np.random.Generator, "
            f"got {type(rng).__name__}"
        )
    if isinstance(rng, numbers.Integral):
        require(0 <= int(rng) < 2**64, "dropout", "rng", "a seed in [0, 2**64)", rng)


def _dropout_samples(rng):
    x = uniform(rng, (4, 5))
    return [
        Sample((x,), {"p": 0.3, "rng": 7}, "p=0.3 (seeded mask)", torch=False),
        Sample((transposed(rng, (3, 4)),), {"p": 0.5, "rng": 1}, "non-contiguous", torch=False),
        Sample((uniform(rng, (0, 3)),), {"p": 0.5, "rng": 2}, "empty", torch=False),
        Sample((x,), {"p": 0.0, "rng": 7}, "p=0"),
        Sample((x,), {"p": 0.5, "training": False, "rng": 7}, "eval mode"),
        Sample((x,), {"p": 1.0, "rng": 7}, "p=1 drops everything"),
    ]


dropout = defop(
    "dropout",
    family="dropout",
    inputs=("input",),
    forward=_dropout,
    vjps=(_dropout_vjp,),
    saves=True,
    composite=_dropout_composite,
    check=_check_dropout,
    samples=_dropout_samples,
    notes="The mask comes from an integer seed (rng=int, or drawn from rng=Generator in the forward) that is "
    "recorded as the 'rng' attribute: backward and replay regenerate the same mask.",
    torch_ref=lambda torch, input, p=0.5, training=True, rng=None: torch.nn.functional.dropout(input, p, training),
)


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_dropout(g, rec, input):
    if rec.attributes.get("training", True) and rec.attributes.get("p", 0.5):
        raise NotExportable("dropout in training mode draws random masks; export the model in eval mode (.eval())")
    return g.op("Identity", input)


lowering(dropout, _onnx_dropout)
