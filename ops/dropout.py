"""The random ops of ``torch.nn.functional``: dropout (inverted: kept elements scaled by 1/(1-p)), the channel-wise
dropout1d / dropout2d / dropout3d, alpha_dropout and feature_alpha_dropout (selu's), rrelu (a random negative
slope in training) and gumbel_softmax.

The mask is a pure function of an integer seed. ``rng`` is where the seed comes from: an int is the seed
itself; a ``tape.Generator`` or ``np.random.Generator`` (None: ``tape.default_generator``, seeded by
``tape.manual_seed``) gives a fresh seed on each call, drawn in the forward. The forward returns the seed it used
under the attribute's own name, ``rng``, so the backward, a replay of the tape and the second-order pass
regenerate the same mask from the recorded attribute. Not training, or ``p == 0``, is the identity.
``dropout_keep`` (the mask as an op of the seed) is what create_graph multiplies by; every op declares its draw
(``random_draw``) for compiled steps. The variants follow the same policy through one helper: each draws a
constant (scale, shift) pair from the seed (rrelu's slopes, a channel's keep mask, alpha dropout's affine map), the
forward is input * scale + shift, the rule g * scale, the second order differentiates input * scale + shift again
with the recorded seed's constants. gumbel_softmax records the seed of its Gumbel noise the same way.
"""

__all__ = [
    "dropout",
    "dropout_keep",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "alpha_dropout",
    "feature_alpha_dropout",
    "rrelu",
    "gumbel_softmax",
]

import math
import numbers

import numpy as np

from tape.compile_guards import random_draw
from tape.onnx import lowering
from tape.random import as_generator
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop

from ._numerics import constant_values
from ._onnx import NotExportable, tensor_type
from ._samples import away_from, transposed, uniform
from ._validation import integer, normalize_dim, require, require_bool, require_float

_SEEDS = 2**63 - 1


def _values(x):
    """The array of ``x`` (a Tensor in a traced rule): the signs that pick rrelu's slopes are constants."""
    return constant_values(x)


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


def _seed_draw(draws):
    """A seeded op's draw for a compiled step (tape.compile_guards.random_draw): {'rng': the seed ``_seed`` draws}
    exactly when its forward draws one -- ``draws(**its other attributes)`` and an rng that is not the seed itself
    -- else {}. The step makes it where fn calls the op, so every generator is left as eager leaves it."""

    def draw(attributes: dict) -> dict:
        rng = attributes.get("rng")
        others = {k: v for k, v in attributes.items() if k != "rng"}
        return {"rng": _seed(rng)} if draws(**others) and not isinstance(rng, numbers.Integral) else {}

    return draw


def _drops(p=0.5, training=True):
    return bool(training) and p != 0


def _dropout(input, p=0.5, training=True, *, rng=None):
    if not _drops(p, training):
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
    """dropout as a product with its mask's scale (an op of the seed, so a recorded backward -- an exported
    training step -- reads it per call, not as a constant): what create_graph differentiates."""
    if not _drops(p, training):
        return input * 1
    from .cast import cast  # at call time: the families register in ops/__init__'s order

    keep = cast(dropout_keep(input, p, rng=_recorded_seed(rng)), input.dtype)  # 1.0 / 0.0, times the scale: exact
    return input * (keep * np.asarray(0.0 if p == 1 else 1 / (1 - p), input.dtype))


def _check_probability(op: str, p) -> None:
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"{op}: argument 'p' expected a probability (a float in [0, 1]), got {type(p).__name__}")
    require(0 <= float(p) <= 1, op, "p", "a probability in [0, 1]", p)


def _check_rng(op: str, rng) -> None:
    if not (
        rng is None
        or isinstance(rng, np.random.Generator)
        or (isinstance(rng, numbers.Integral) and not isinstance(rng, bool))
    ):
        raise TypeError(
            f"{op}: argument 'rng' expected None, an int seed, a tape.Generator or a np.random.Generator, "
            f"got {type(rng).__name__}"
        )
    if isinstance(rng, numbers.Integral):
        require(0 <= int(rng) < 2**64, op, "rng", "a seed in [0, 2**64)", rng)


def _dropout_keep(input, p=0.5, *, rng):
    """The entries dropout with seed ``rng`` keeps: True where its uniform draw is >= p, in input's shape (input's
    values are not read)."""
    return _keep_mask(np.shape(input), p, int(rng))


def _check_dropout_keep(input, p=0.5, *, rng):
    require_float("dropout_keep", "input", input)
    _check_probability("dropout_keep", p)
    require(integer("dropout_keep", "rng", rng, 0) < 2**64, "dropout_keep", "rng", "a seed in [0, 2**64)", rng)


def _dropout_keep_samples(rng):
    return [
        Sample((uniform(rng, (4, 5)),), {"p": 0.3, "rng": 7}, "p=0.3"),
        Sample((uniform(rng, (2, 3, 4)),), {"p": 1.0, "rng": 1}, "p=1 drops everything"),
        Sample((uniform(rng, (0, 3)),), {"p": 0.5, "rng": 2}, "empty"),
    ]


dropout_keep = defop(
    "dropout_keep",
    family="dropout",
    inputs=("input",),
    forward=_dropout_keep,
    vjps=(NOT_DIFFERENTIABLE,),
    check=_check_dropout_keep,
    samples=_dropout_keep_samples,
    notes="dropout's keep mask as an op of its seed: dropout's recorded backward (create_graph, an exported "
    "training step) reads it per call rather than as a constant.",
)


def _check_dropout(input, p=0.5, training=True, *, rng=None):
    require_float("dropout", "input", input)
    _check_probability("dropout", p)
    require_bool("dropout", "training", training)
    _check_rng("dropout", rng)


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
    returns_aux=True,
    composite=_dropout_composite,
    check=_check_dropout,
    samples=_dropout_samples,
    notes="The mask comes from an integer seed (rng=int, or drawn from rng=Generator in the forward) that is "
    "recorded as the 'rng' attribute: backward and replay regenerate the same mask.",
    torch_ref=lambda torch, input, p=0.5, training=True, rng=None: torch.nn.functional.dropout(input, p, training),
    doc="In training, each entry zeroed with probability p and the rest scaled by 1 / (1 - p); else input unchanged.",
)
random_draw(dropout, ("rng",), _seed_draw(_drops))


# -- dropout1d/2d/3d, feature_alpha_dropout, alpha_dropout, rrelu: input * scale + shift -----------------------
# Each draws one constant (scale, shift) pair from the seed; the forward is input * scale (+ shift), the gradient
# g * scale, the second order differentiates input * scale + shift with the recorded seed's constants.
_ALPHA = 1.7580993408473766  # selu's scale * alpha: alpha dropout sets a dropped unit to selu's floor -_ALPHA


def _affine(input, scale, shift):
    out = input * scale
    return out if shift is None else out + shift


def _noise_op(name, forward, noise, draws, check, samples, notes, torch_ref):
    """Declare a random op ``forward`` whose output is input * scale + shift for ``noise(input, seed, **attrs)
    -> (scale, shift or None)``; ``draws(**attrs)``: whether the call draws (a seed is then recorded as 'rng')."""

    def seed_of(rng, attrs):
        return _recorded_seed(rng) if draws(**attrs) else None

    def vjp(g, ans, input, *, rng=None, **attrs):
        return g * noise(input, seed_of(rng, attrs), **attrs)[0]

    def composite(input, *, rng=None, **attrs):
        return _affine(input, *noise(input, seed_of(rng, attrs), **attrs))

    op = defop(
        name,
        family="dropout",
        inputs=("input",),
        forward=forward,
        vjps=(vjp,),
        returns_aux=True,
        composite=composite,
        check=check,
        samples=samples,
        notes=notes,
        torch_ref=torch_ref,
    )
    random_draw(op, ("rng",), _seed_draw(draws))
    return op


def _noise_forward(input, rng, noise, draws, attrs):
    """(input * scale + shift, {'rng': the seed drawn}) -- nothing drawn, and nothing saved, when ``draws`` is False."""
    seed = _seed(rng) if draws(**attrs) else None
    out = _affine(input, *noise(input, seed, **attrs))
    return out, ({} if seed is None else {"rng": seed})


def _mask_shape(shape: tuple, channelwise: bool, unbatched: bool) -> tuple:
    """Elementwise: the input's shape; channel-wise: (N, C, 1, ...) or, unbatched, (C, 1, ...)."""
    if not channelwise:
        return shape
    lead = 1 if unbatched else 2
    return shape[:lead] + (1,) * (len(shape) - lead)


def _dropout_noise(spatial):
    """Channel-wise inverted dropout over ``spatial`` dims (an input of 1 + spatial dims is unbatched)."""

    def noise(input, seed, p=0.5, training=True):
        if seed is None:
            return np.ones((), input.dtype), None
        return _mask_scale(_mask_shape(input.shape, True, input.ndim == spatial + 1), p, seed, input.dtype), None

    return noise


def _alpha_noise(channelwise: bool):
    """torch's alpha dropout: kept x -> a x + b, dropped -> a (-_ALPHA) + b, with a, b keeping mean 0 and
    variance 1 of selu activations; p == 1 gives 0 (torch's input * 0)."""

    def noise(input, seed, p=0.5, training=False):
        if seed is None:
            return np.ones((), input.dtype), None
        if p == 1:
            return np.zeros((), input.dtype), None
        keep = _keep_mask(_mask_shape(input.shape, channelwise, False), p, seed)
        a = 1 / math.sqrt((_ALPHA * _ALPHA * p + 1) * (1 - p))
        shift = (keep - 1.0) * (_ALPHA * a) + _ALPHA * a * p
        return np.where(keep, a, 0).astype(input.dtype), shift.astype(input.dtype)

    return noise


def _check_feature_input(op: str, input, ranks: tuple) -> None:
    require_float(op, "input", input)
    shapes = {
        2: "(C, L)",
        3: "(N, C, L)" if ranks[1] == 2 else "(C, H, W)",
        4: "(N, C, H, W)" if ranks[1] == 3 else "(C, D, H, W)",
        5: "(N, C, D, H, W)",
    }
    expected = " or ".join(shapes[r] for r in ranks)
    require(input.ndim in ranks, op, "input", f"a batched or unbatched tensor {expected}", f"shape {input.shape}")


def _dropout_check(op: str, ranks: tuple | None):
    def check(input, p=0.5, training=True, *, rng=None):
        if ranks is None:
            require_float(op, "input", input)
            require(input.ndim >= 2, op, "input", "at least 2 dims (N, C, ...)", f"shape {input.shape}")
        else:
            _check_feature_input(op, input, ranks)
        _check_probability(op, p)
        require_bool(op, "training", training)
        _check_rng(op, rng)

    return check


def _noise_samples(shapes, training=True, torch_extra=True):
    """Seeded samples (random: no torch reference) over ``shapes``, plus deterministic ones torch matches."""

    def generate(rng):
        out = [
            Sample((uniform(rng, s),), {"p": 0.4, "training": True, "rng": 3 + i}, f"{s}, p=0.4", torch=False)
            for i, s in enumerate(shapes)
        ]
        first = shapes[0]
        return out + [
            Sample(
                (transposed(rng, first[::-1]),), {"p": 0.5, "training": True, "rng": 1}, "non-contiguous", torch=False
            ),
            Sample((uniform(rng, (0,) + first[1:]),), {"p": 0.5, "training": True, "rng": 2}, "empty", torch=False),
            Sample((uniform(rng, first),), {"p": 0.0, "training": True, "rng": 7}, "p=0"),
            Sample((uniform(rng, first),), {"p": 0.5, "training": False}, "eval mode"),
            Sample((uniform(rng, first),), {"p": 1.0, "training": True, "rng": 7}, "p=1 drops everything"),
        ]

    return generate


def _torch_dropout(fn_name):
    return lambda torch, input, p=0.5, training=True, rng=None: getattr(torch.nn.functional, fn_name)(
        input, p, training
    )


_SEEDED = (
    "The mask comes from a seed (rng=int, or drawn from rng=Generator in the forward) recorded as the 'rng' "
    "attribute: backward and replay regenerate it."
)


def _dropout1d(input, p=0.5, training=True, *, rng=None):
    """``torch.nn.functional.dropout1d``: zero whole channels of (N, C, L) or (C, L) with probability p, scale the
    kept ones by 1/(1-p)."""
    return _noise_forward(input, rng, _dropout_noise(1), _drops, {"p": p, "training": training})


def _dropout2d(input, p=0.5, training=True, *, rng=None):
    """``torch.nn.functional.dropout2d``: channel-wise dropout of (N, C, H, W) or (C, H, W)."""
    return _noise_forward(input, rng, _dropout_noise(2), _drops, {"p": p, "training": training})


def _dropout3d(input, p=0.5, training=True, *, rng=None):
    """``torch.nn.functional.dropout3d``: channel-wise dropout of (N, C, D, H, W) or (C, D, H, W)."""
    return _noise_forward(input, rng, _dropout_noise(3), _drops, {"p": p, "training": training})


def _alpha_dropout(input, p=0.5, training=False, *, rng=None):
    """``torch.nn.functional.alpha_dropout`` (training defaults to False, as torch's): dropout for selu networks,
    keeping zero mean and unit variance."""
    return _noise_forward(input, rng, _alpha_noise(False), _drops, {"p": p, "training": training})


def _feature_alpha_dropout(input, p=0.5, training=False, *, rng=None):
    """``torch.nn.functional.feature_alpha_dropout``: alpha dropout of whole channels of (N, C, ...)."""
    return _noise_forward(input, rng, _alpha_noise(True), _drops, {"p": p, "training": training})


def _dropout_op(name, forward, noise, ranks, shapes):
    """Declare a dropout variant of ``torch.nn.functional``: (p, training) and a seeded mask, input ranks ``ranks``
    (None: any of 2 dims or more), samples over ``shapes``."""
    check = _dropout_check(name, ranks)
    return _noise_op(name, forward, noise, _drops, check, _noise_samples(shapes), _SEEDED, _torch_dropout(name))


dropout1d = _dropout_op("dropout1d", _dropout1d, _dropout_noise(1), (3, 2), [(2, 3, 4), (3, 5)])
dropout2d = _dropout_op("dropout2d", _dropout2d, _dropout_noise(2), (4, 3), [(2, 3, 2, 2), (3, 2, 4)])
dropout3d = _dropout_op("dropout3d", _dropout3d, _dropout_noise(3), (5, 4), [(2, 3, 2, 1, 2), (3, 2, 2, 2)])
alpha_dropout = _dropout_op("alpha_dropout", _alpha_dropout, _alpha_noise(False), None, [(4, 5), (2, 3, 4)])
feature_alpha_dropout = _dropout_op(
    "feature_alpha_dropout", _feature_alpha_dropout, _alpha_noise(True), None, [(2, 3, 4), (3, 4, 2, 2)]
)


def _rrelu_noise(input, seed, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """The slope of each entry: 1 where input > 0; where input <= 0 a uniform draw in [lower, upper] (training)
    or (lower + upper) / 2 (eval) -- torch's rule, 0 included."""
    if seed is None:
        slope = np.asarray((lower + upper) / 2, input.dtype)
    else:
        slope = np.random.default_rng(seed).uniform(lower, upper, size=input.shape).astype(input.dtype)
    return np.where(_values(input) <= 0, slope, np.asarray(1, input.dtype)), None


def _rrelu_draws(lower=1.0 / 8, upper=1.0 / 3, training=False):
    return bool(training)


def _rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, *, rng=None):
    """``torch.nn.functional.rrelu``: x where x > 0, slope x elsewhere; the slope drawn per entry in training."""
    return _noise_forward(
        input, rng, _rrelu_noise, _rrelu_draws, {"lower": lower, "upper": upper, "training": training}
    )


def _check_rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, *, rng=None):
    op = "rrelu"
    require_float(op, "input", input)
    for name, value in (("lower", lower), ("upper", upper)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{op}: argument '{name}' expected a float, got {type(value).__name__} {value!r}")
    require(float(lower) <= float(upper), op, "upper", f"a bound >= lower ({lower})", upper)
    require_bool(op, "training", training)
    _check_rng(op, rng)


def _rrelu_samples(rng):
    def x(*shape):
        return away_from(uniform(rng, shape), (0.0,))

    return [
        Sample((x(4, 5),), {"training": True, "rng": 3}, "training", torch=False),
        Sample(
            (x(2, 3, 4),), {"lower": 0.2, "upper": 0.6, "training": True, "rng": 4}, "training, bounds", torch=False
        ),
        Sample(
            (away_from(transposed(rng, (3, 4)), (0.0,)),), {"training": True, "rng": 1}, "non-contiguous", torch=False
        ),
        Sample((x(0, 3),), {"training": True, "rng": 2}, "empty", torch=False),
        Sample((x(4, 5),), {}, "eval"),
        Sample((x(3, 4),), {"lower": 0.1, "upper": 0.9}, "eval, bounds"),
        Sample((x(),), {}, "0-d"),
        Sample((x(4, 5),), {"lower": 0.3, "upper": 0.3, "training": True, "rng": 5}, "lower == upper"),
    ]


rrelu = _noise_op(
    "rrelu",
    _rrelu,
    _rrelu_noise,
    _rrelu_draws,
    _check_rrelu,
    _rrelu_samples,
    "Training draws each slope in [lower, upper] from a seed recorded as the 'rng' attribute (backward and replay "
    "reuse it); eval uses (lower + upper) / 2. Entries <= 0 take the slope, as torch.",
    lambda torch, input, lower=1.0 / 8, upper=1.0 / 3, training=False, rng=None: torch.nn.functional.rrelu(
        input, lower, upper, training
    ),
)


# -- gumbel_softmax ------------------------------------------------------------------------------------------
def _gumbel_noise(shape: tuple, seed: int, dtype) -> np.ndarray:
    """-log(E), E ~ Exponential(1): standard Gumbel noise, a pure function of the seed (torch's construction)."""
    return (-np.log(np.random.default_rng(seed).exponential(size=shape))).astype(dtype)


def _gumbel_parts(logits, tau, dim, seed):
    """(the soft sample softmax((logits + G) / tau) over ``dim``, its one-hot argmax); arrays or Tensors."""
    z = (logits + _gumbel_noise(np.shape(logits), seed, logits.dtype)) / float(tau)
    axis = normalize_dim("gumbel_softmax", dim, np.ndim(logits))
    shifted = z - _values(np.max(_values(z), axis=axis, keepdims=True))
    e = np.exp(shifted)
    soft = e / np.sum(e, axis=axis, keepdims=True)
    values = _values(soft)
    hard = (
        (
            np.arange(values.shape[axis]).reshape((-1,) + (1,) * (values.ndim - 1 - axis))
            == np.argmax(values, axis=axis, keepdims=True)
        )
        if values.ndim
        else np.ones((), bool)
    )
    return soft, hard.astype(values.dtype)


def _gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1, *, rng=None):
    """``torch.nn.functional.gumbel_softmax``: softmax((logits + Gumbel noise) / tau) over ``dim``; with ``hard``
    the one-hot of its argmax in the forward (torch's y_hard - y_soft.detach() + y_soft), the soft gradient in
    the backward. ``eps`` is unused, as in torch."""
    seed = _seed(rng)
    soft, one_hot = _gumbel_parts(logits, tau, dim, seed)
    return ((one_hot - soft) + soft if hard else soft), {"rng": seed}


def _gumbel_softmax_vjp(g, ans, logits, tau=1, hard=False, eps=1e-10, dim=-1, *, rng=None):
    soft, _ = _gumbel_parts(logits, tau, dim, _recorded_seed(rng))
    axis = normalize_dim("gumbel_softmax", dim, np.ndim(logits))
    return soft * (g - np.sum(g * soft, axis=axis, keepdims=True)) / float(tau)


def _gumbel_softmax_composite(logits, tau=1, hard=False, eps=1e-10, dim=-1, *, rng=None):
    from .normalization import softmax

    seed = _recorded_seed(rng)
    noise = _gumbel_noise(logits.shape, seed, logits.dtype)
    soft = softmax((logits + noise) / float(tau), dim=dim)
    return soft + (_gumbel_parts(constant_values(logits), tau, dim, seed)[1] - soft.detach()) if hard else soft


def _check_gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1, *, rng=None):
    op = "gumbel_softmax"
    require_float(op, "logits", logits)
    if isinstance(tau, bool) or not isinstance(tau, numbers.Real):
        raise TypeError(f"{op}: argument 'tau' expected a number, got {type(tau).__name__} {tau!r}")
    require(float(tau) != 0, op, "tau", "a non-zero temperature", tau)
    require_bool(op, "hard", hard)
    normalize_dim(op, dim, logits.ndim)
    _check_rng(op, rng)


def _gumbel_samples(rng):
    def x(*shape):
        return uniform(rng, shape)

    return [
        Sample((x(4, 5),), {"rng": 1}, "soft", torch=False),
        Sample((x(2, 3, 4),), {"tau": 0.5, "dim": 1, "rng": 2}, "tau=0.5, dim=1", torch=False),
        # hard=True is absent: its straight-through gradient is not the derivative of its forward (a one-hot)
        Sample((transposed(rng, (3, 5)),), {"tau": 2.0, "rng": 4}, "non-contiguous", torch=False),
        Sample((x(0, 3),), {"rng": 5}, "empty", torch=False),
        Sample((x(),), {"dim": 0, "rng": 6}, "0-d", torch=False),
    ]


gumbel_softmax = defop(
    "gumbel_softmax",
    family="dropout",
    inputs=("logits",),
    forward=_gumbel_softmax,
    vjps=(_gumbel_softmax_vjp,),
    returns_aux=True,
    composite=_gumbel_softmax_composite,
    check=_check_gumbel_softmax,
    samples=_gumbel_samples,
    notes="The Gumbel noise comes from a seed recorded as the 'rng' attribute: backward and replay reuse it. "
    "hard=True: the forward is the one-hot argmax, the gradient the soft sample's (straight-through), as torch.",
    torch_ref=lambda torch, logits, tau=1, hard=False, eps=1e-10, dim=-1, rng=None: torch.nn.functional.gumbel_softmax(
        logits, tau, hard, eps, dim
    ),
)
random_draw(gumbel_softmax, ("rng",), _seed_draw(lambda **attributes: True))


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_dropout(g, rec, input):
    """Training: input times the keep mask's scale, the mask a graph input a compiled step feeds from each call's
    seed (an exported model refuses: its mask would be fixed). Eval: the input itself."""
    p = rec.attributes.get("p", 0.5)
    if not _drops(p, rec.attributes.get("training", True)):
        return g.op("Identity", input)
    keep = _fed_keep(g, rec, "dropout in training mode draws random masks; export the model in eval mode (.eval())")
    dtype = rec.inputs[0].dtype
    scale = g.op(
        "Mul", g.op("Cast", keep, to=tensor_type(dtype)), g.const(np.asarray(0.0 if p == 1 else 1 / (1 - p), dtype))
    )
    return g.op("Mul", input, scale)


def _onnx_dropout_keep(g, rec, input):
    """A compiled step's graph: the mask fed from each call's seed. An exported model: the seed's mask, a constant
    (the seed is the op's attribute), in the input's shape."""
    mask = _fed_keep(g, rec)
    return mask if g.feeds is not None else g.op("Expand", mask, g.op("Shape", input))


def _fed_keep(g, rec, refuse=None) -> str:
    """The keep mask of the call's seed for its input's shape (``Graph.feed``): one input per (shape, p, seed),
    shared by dropout's forward and the dropout_keep its backward records."""
    shape, p = tuple(rec.inputs[0].shape), float(rec.attributes.get("p", 0.5))

    def compute(attributes):
        return _keep_mask(shape, attributes.get("p", 0.5), _recorded_seed(attributes["rng"]))

    return g.feed(rec, compute, refuse, key=("dropout keep", shape, p, rec.attributes.get("rng")))


def _onnx_noise_eval(g, rec, input):
    """dropout1d/2d/3d, alpha_dropout, feature_alpha_dropout: the input itself when nothing is drawn (eval, or
    p = 0)."""
    if _drops(rec.attributes.get("p", 0.5), rec.attributes.get("training", False)):
        raise NotExportable("training mode draws random masks; export the model in eval mode (.eval())")
    return g.op("Identity", input)


def _onnx_rrelu(g, rec, input):
    """Eval: x times (lower + upper) / 2 where x <= 0, as the forward's slope in x's dtype."""
    a = rec.attributes
    if a.get("training", False):
        raise NotExportable("training mode draws each slope at random; export the model in eval mode (.eval())")
    dtype = rec.inputs[0].dtype
    slope = np.asarray((a.get("lower", 1.0 / 8) + a.get("upper", 1.0 / 3)) / 2, dtype)
    negative = g.op("LessOrEqual", input, g.const(np.zeros((), dtype)))
    return g.op("Mul", input, g.op("Where", negative, g.const(slope), g.const(np.ones((), dtype))))


lowering(dropout, _onnx_dropout)
lowering(dropout_keep, _onnx_dropout_keep)
for _op in (dropout1d, dropout2d, dropout3d, alpha_dropout, feature_alpha_dropout):
    lowering(_op, _onnx_noise_eval)
lowering(rrelu, _onnx_rrelu)
lowering(gumbel_softmax, not_exportable="it draws Gumbel noise on every call (minitape's generator has no ONNX form)")
