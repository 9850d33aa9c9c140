"""Scaled dot-product attention: one registered op, its argument checks, samples and PyTorch reference.

``scaled_dot_product_attention`` follows ``torch.nn.functional.scaled_dot_product_attention`` (2.13)
and adds key-padding lengths (op metadata, applied tile by tile) and a bottom-right causal alignment.
The math lives once, in ``ops._kernels.flash``: a tiled forward that keeps only the output and the row
log-sum-exp, and one joint backward giving dQ, dK, dV and the float mask's gradient together.
Derivation: docs/attention.md.
"""

__all__ = ["scaled_dot_product_attention", "attention_dropout_keep", "attention_key_mask"]

import math
import numbers
from types import SimpleNamespace

import numpy as np

from tape.compile_guards import random_draw
from tape.onnx import lowering
from tape.random import as_generator
from tape.registry import Grad, Sample, defop

from ._kernels.flash import attention_backward, attention_forward, dropout_keep_masks
from ._onnx import NotExportable, tensor_type
from ._samples import uniform
from ._validation import integer, one_of, require, require_float

OP = "scaled_dot_product_attention"
ALIGNMENTS = ("top_left", "bottom_right")


def _default_scale(E: int) -> float:
    """1 / sqrt(E); with E = 0 every score is an empty dot product (0) whatever the scale, so 1 (torch: uniform
    weights, the mean of V)."""
    return 1 / math.sqrt(E) if E else 1.0


def _draw(attributes: dict) -> dict:
    """The seed an attention call draws for its dropout mask, {'dropout_seed': seed} from ``rng`` (a fresh
    generator when None), or {} without dropout or with ``dropout_seed`` given. The forward draws through it, and
    a compiled step makes the same draw where fn calls the op (tape.compile_guards.random_draw)."""
    if not attributes.get("dropout_p") or attributes.get("dropout_seed") is not None:
        return {}
    return {"dropout_seed": int(as_generator(OP, attributes.get("rng")).integers(0, 2**63))}


def _options(query, key, attributes: dict) -> dict:
    """The kernels' keyword arguments for the op's attributes (every one, by name), resolved once in the forward.
    The dropout seed is ``dropout_seed`` when given, else drawn from ``rng`` (a fresh generator when None); 0
    without dropout."""
    a = SimpleNamespace(**attributes)
    L, S = query.shape[-2], key.shape[-2]
    offset = None
    if a.is_causal:
        offset = 0 if a.causal_alignment == "top_left" else S - L
    dropout_seed = a.dropout_seed if a.dropout_seed is not None else _draw(attributes).get("dropout_seed", 0)
    lengths = None if a.key_padding_lengths is None else np.asarray(a.key_padding_lengths)
    return dict(
        scale=_default_scale(query.shape[-1]) if a.scale is None else float(a.scale),
        causal_offset=offset,
        lengths=lengths,
        dropout_p=float(a.dropout_p),
        seed=int(dropout_seed),
        enable_gqa=bool(a.enable_gqa),
    )


def _complete(attributes: dict) -> dict:
    """``attributes`` with the forward's defaults for those not given (the parameter list is the forward's)."""
    return {**scaled_dot_product_attention.attr_defaults, **attributes}


def _forward(
    query,
    key,
    value,
    attn_mask=None,
    dropout_p=0.0,
    is_causal=False,
    scale=None,
    enable_gqa=False,
    *,
    key_padding_lengths=None,
    causal_alignment="top_left",
    rng=None,
    dropout_seed=None,
):
    """Attention softmax(scale * Q K^T + mask) V over (..., heads, length, features) inputs, as in torch.

    ``attn_mask``: bool (True = attend) or float (added to the scores), broadcast to (..., L, S).
    ``key_padding_lengths``: int array over the batch dims; key j is hidden where j >= length.
    ``causal_alignment``: "top_left" (torch's: query i sees keys j <= i) or "bottom_right" (j <= i + S - L).
    ``rng``: the np.random.Generator dropout draws its seed from (a fresh one when None); ``dropout_seed`` fixes
    the seed instead. The seed used is saved, so the backward regenerates the very same mask.
    """
    options = _options(query, key, locals())  # the forward's own parameters, each by name
    out, row_max, row_log_sum = attention_forward(query, key, value, attn_mask, **options)
    aux = {"row_max": row_max, "row_log_sum": row_log_sum, "options": options}
    if dropout_seed is None and dropout_p:  # a drawn seed is recorded as the attribute (replay, the composite)
        aux["dropout_seed"] = options["seed"]
    return out, aux


def _joint_vjp(g, ans, query, key, value, attn_mask=None, *, needs, row_max, row_log_sum, options, **attributes):
    return attention_backward(
        g, ans, query, key, value, attn_mask, row_max=row_max, row_log_sum=row_log_sum, needs=tuple(needs), **options
    )


def _composite(query, key, value, attn_mask=None, *, options=None, **attributes):
    """The same attention from registered ops, with the full score matrix: what the second-order pass
    differentiates (the tiled kernels are first order only). ``options`` are the forward's resolved ones; without
    them they are resolved from the op's ``attributes`` (the recorded ``dropout_seed`` included)."""
    from .binary import logical_and, where  # at call time: the families register in ops/__init__'s order
    from .cast import cast
    from .elementwise import isfinite
    from .linalg import matmul
    from .normalization import softmax
    from .reduce import any as any_of
    from .shape import expand, transpose

    if options is None:
        options = _options(query, key, _complete(attributes))
    L, S = query.shape[-2], key.shape[-2]
    if options["enable_gqa"] and key.ndim >= 3:
        key, value = (_repeat_heads(a, _heads_of(query) // _heads_of(a)) for a in (key, value))
    scores = matmul(query, transpose(key, -2, -1)) * options["scale"]
    allowed = np.ones((L, S), dtype=bool)
    if options["causal_offset"] is not None:
        allowed = np.arange(S)[None, :] <= np.arange(L)[:, None] + options["causal_offset"]
    if options["lengths"] is not None:  # an op of the lengths: a recorded backward reads them per call
        allowed = logical_and(attention_key_mask(scores, lengths=options["lengths"]), allowed)
    if attn_mask is not None:
        if attn_mask.dtype == np.bool_:
            allowed = logical_and(attn_mask, allowed)
        else:
            scores = scores + attn_mask
    shape = np.broadcast_shapes(allowed.shape, scores.shape)
    scores = expand(scores, shape) if scores.shape != shape else scores
    # rows that see no finite score give 0 and no gradient, never NaN. Decided by ops on the tensors, never from
    # their values read as arrays: a recorded backward (ONNX Runtime's compile) decides it again for each call.
    # Such a row's scores are made 0 (a finite softmax, whose gradient the 0 weight then makes 0), and the weights
    # are the softmax times 1 or 0: a multiplication, not a score-sized choice (ONNX Runtime's Where took 73 us on
    # the tiny GPT's (16, 4, 32, 32) scores, a Mul 12-29 us)
    everywhere = isinstance(allowed, np.ndarray) and bool(allowed.all())  # no mask: nothing hidden
    finite = isfinite(scores)
    seen = any_of(finite if everywhere else logical_and(allowed, finite), dim=-1, keepdim=True)
    if not everywhere:
        scores = where(allowed, scores, np.array(-np.inf, scores.dtype))
    weights = softmax(where(seen, scores, np.array(0, scores.dtype)), -1) * cast(seen, scores.dtype)
    if options["dropout_p"]:  # the mask an op of the seed: a recorded backward reads it per call, not as a constant
        p = options["dropout_p"]
        keep = cast(attention_dropout_keep(weights, p, rng=options["seed"]), weights.dtype)
        weights = weights * (keep * np.asarray(0.0 if p == 1 else 1 / (1 - p), weights.dtype))
    return matmul(weights, value)


def _repeat_heads(a, group):
    """(..., H, S, E) -> (..., H * group, S, E): kv head h serves query heads h * group .. h * group + group - 1."""
    from .shape import expand, reshape, unsqueeze  # at call time: the families register in ops/__init__'s order

    if group == 1:
        return a
    shape = a.shape
    expanded = expand(unsqueeze(a, -3), shape[:-2] + (group,) + shape[-2:])
    return reshape(expanded, shape[:-3] + (shape[-3] * group,) + shape[-2:])


# -- argument checks --------------------------------------------------------------------------------------
def _fail(argument, expected, got, error=ValueError):
    raise error(f"{OP}: argument '{argument}' expected {expected}, got {got}")


def _heads_of(a):
    return a.shape[-3] if a.ndim >= 3 else 1


def _check(query, key, value, attn_mask=None, **attributes):
    """The op's check=."""
    o = SimpleNamespace(**_complete(attributes))
    for name, a in (("query", query), ("key", key), ("value", value)):
        if a.dtype.kind != "f":
            _fail(name, "a floating tensor", f"dtype {a.dtype}", TypeError)
        if not 2 <= a.ndim <= 5:
            _fail(name, "a tensor of rank 2 to 5 (..., heads, length, features)", f"shape {a.shape} (rank {a.ndim})")
    for name, a in (("key", key), ("value", value)):
        if a.dtype != query.dtype:
            _fail(name, f"dtype {query.dtype} (query's)", f"dtype {a.dtype}", TypeError)
    if key.shape[-1] != query.shape[-1]:
        _fail("key", f"last dim {query.shape[-1]} (query's feature size E)", f"shape {key.shape}")
    if value.shape[-2] != key.shape[-2]:
        _fail("value", f"{key.shape[-2]} keys in dim -2 (key's sequence length S)", f"shape {value.shape}")
    batches = [a.shape[:-3] for a in (query, key, value)]
    try:
        batch_shape = np.broadcast_shapes(*batches)
    except ValueError:
        _fail(
            "key",
            f"batch dims that broadcast with query's {query.shape[:-3]}",
            f"key {key.shape[:-3]}, value {value.shape[:-3]}",
        )
    hq, hk, hv = _heads_of(query), _heads_of(key), _heads_of(value)
    if o.enable_gqa:
        for name, h in (("key", hk), ("value", hv)):
            if hq % h:
                _fail(
                    name,
                    f"a head count dividing query's {hq} (enable_gqa=True)",
                    f"{h} heads (shape {(key if name == 'key' else value).shape})",
                )
    else:
        heads = max(hq, hk, hv)
        for name, h in (("query", hq), ("key", hk), ("value", hv)):
            if h not in (1, heads):
                _fail(
                    name,
                    f"{heads} heads (or 1) in dim -3 like the other inputs; pass enable_gqa=True for "
                    f"grouped-query attention",
                    f"{h} heads",
                )
    heads = hq if o.enable_gqa else max(hq, hk, hv)
    rank = max(query.ndim, key.ndim, value.ndim)
    L, S = query.shape[-2], key.shape[-2]
    scores = (tuple(batch_shape) + (heads, L, S))[-rank:] if rank > 2 else (L, S)
    if attn_mask is not None:
        if attn_mask.dtype != np.bool_ and attn_mask.dtype != query.dtype:
            _fail(
                "attn_mask",
                f"a bool mask or a float mask of query's dtype {query.dtype}",
                f"dtype {attn_mask.dtype}",
                TypeError,
            )
        if not _broadcasts_to(attn_mask.shape, scores):
            _fail(
                "attn_mask",
                f"a shape broadcastable to the attention scores {scores} (right-aligned)",
                f"shape {attn_mask.shape}",
            )
    if (
        isinstance(o.dropout_p, bool)
        or not isinstance(o.dropout_p, numbers.Real)
        or o.dropout_p < 0
        or not o.dropout_p < 1
    ):  # not `0 <= p < 1`: numbers.Real declares < but not >=
        _fail("dropout_p", "a probability in [0, 1)", repr(o.dropout_p))
    if o.scale is not None and (
        isinstance(o.scale, bool) or not isinstance(o.scale, numbers.Real) or not math.isfinite(o.scale)
    ):
        _fail("scale", "None or a finite real number", repr(o.scale), TypeError)
    for flag, value in (("is_causal", o.is_causal), ("enable_gqa", o.enable_gqa)):
        if not isinstance(value, bool | np.bool_):
            _fail(flag, "a bool", repr(value), TypeError)
    one_of(OP, "causal_alignment", o.causal_alignment, ALIGNMENTS)
    if o.dropout_seed is not None and (
        isinstance(o.dropout_seed, bool) or not isinstance(o.dropout_seed, numbers.Integral) or o.dropout_seed < 0
    ):
        _fail("dropout_seed", "None or a non-negative int", repr(o.dropout_seed), TypeError)
    if o.rng is not None and not isinstance(o.rng, np.random.Generator):
        _fail("rng", "None or a numpy.random.Generator", type(o.rng).__name__, TypeError)
    if o.key_padding_lengths is not None:
        lengths = o.key_padding_lengths
        if isinstance(lengths, list | tuple):
            lengths = np.asarray(lengths)
        _check_lengths(lengths, tuple(batch_shape), S)


def _broadcasts_to(shape, target) -> bool:
    """Whether numpy broadcasting, right-aligned, stretches ``shape`` to ``target`` (never the reverse)."""
    return len(shape) <= len(target) and all(m in (1, n) for m, n in zip(shape[::-1], target[::-1]))


def _check_lengths(lengths, batch_shape, S):
    if not isinstance(lengths, np.ndarray) or lengths.dtype.kind not in "iu":
        _fail(
            "key_padding_lengths",
            "an integer array of valid key counts",
            f"{type(lengths).__name__} of dtype {getattr(lengths, 'dtype', None)}",
            TypeError,
        )
    if not _broadcasts_to(lengths.shape, batch_shape):
        _fail("key_padding_lengths", f"a shape broadcastable to the batch dims {batch_shape}", f"shape {lengths.shape}")
    if lengths.size and (lengths.min() < 0 or lengths.max() > S):
        _fail(
            "key_padding_lengths",
            f"lengths in [0, {S}] (key's sequence length)",
            f"values from {lengths.min()} to {lengths.max()}",
        )


# -- samples and the PyTorch reference --------------------------------------------------------------------
def _samples(rng):
    """Small inputs (gradcheck perturbs every element) covering every option."""

    def qkv(q_shape, k_shape, v_shape):
        return uniform(rng, q_shape), uniform(rng, k_shape), uniform(rng, v_shape)

    def sample(shapes, mask=None, label="", torch=True, **attrs):
        return Sample((*qkv(*shapes), mask), attrs, label, torch=torch)

    base = ((1, 2, 3, 3), (1, 2, 4, 3), (1, 2, 4, 2))  # L < S, E != Ev
    bool_ls = np.array([[True, False, True, True], [False, False, False, False], [True, True, False, True]])
    neg_inf = np.where(rng.random((2, 3, 4)) < 0.3, -np.inf, uniform(rng, (2, 3, 4)))
    return [
        sample(((2, 2, 3, 3), (2, 2, 4, 3), (2, 2, 4, 2)), label="plain, B=2"),
        sample(((1, 2, 4, 3), (1, 2, 3, 3), (1, 2, 3, 2)), label="causal top-left, L > S", is_causal=True),
        sample(base, label="causal bottom-right, L < S", is_causal=True, causal_alignment="bottom_right"),
        sample(
            ((1, 1, 5, 2), (1, 1, 3, 2), (1, 1, 3, 2)),
            label="bottom-right L > S: empty rows",
            is_causal=True,
            causal_alignment="bottom_right",
        ),
        sample(base, bool_ls, "bool mask (L,S) with an empty row"),
        sample(base, uniform(rng, (1, 4)), "float mask (1,S)"),
        sample(base, uniform(rng, (3, 1)), "float mask (L,1) + causal", is_causal=True),
        sample(base, neg_inf, "float mask (H,L,S) with -inf"),
        sample(((2, 1, 3, 2), (2, 1, 4, 2), (2, 1, 4, 2)), rng.random((2, 1, 1, 4)) < 0.6, "bool mask (B,1,1,S)"),
        sample(((2, 1, 3, 2), (2, 1, 4, 2), (2, 1, 4, 2)), uniform(rng, (2, 1, 3, 1)), "float mask (B,1,L,1)"),
        sample(
            ((2, 1, 3, 2), (2, 1, 4, 2), (2, 1, 4, 2)),
            uniform(rng, (3, 4)),
            "lengths 0 and 3 + float mask",
            key_padding_lengths=np.array([0, 3]),
        ),
        sample(
            ((2, 1, 3, 2), (2, 1, 4, 2), (2, 1, 4, 3)),
            label="lengths 4 and 2 + causal bottom-right",
            key_padding_lengths=np.array([4, 2]),
            is_causal=True,
            causal_alignment="bottom_right",
        ),
        sample(((1, 4, 2, 2), (1, 2, 3, 2), (1, 2, 3, 3)), label="GQA 4 query heads on 2 kv heads", enable_gqa=True),
        sample(((2, 3, 2), (2, 4, 2), (2, 4, 3)), label="3-D"),
        sample(((3, 2), (4, 2), (4, 3)), label="2-D"),
        sample(((2, 1, 1, 3, 2), (1, 2, 1, 4, 2), (1, 2, 1, 4, 2)), label="5-D, broadcast batch dims"),
        sample(base, label="scale=0 (uniform)", scale=0.0),
        sample(base, label="scale=-0.7", scale=-0.7, is_causal=True),
        Sample(
            (
                uniform(rng, (1, 2, 3, 3)).transpose(0, 1, 3, 2),
                uniform(rng, (1, 2, 4, 3)),
                uniform(rng, (1, 2, 4, 2)),
                None,
            ),
            {},
            "non-contiguous query",
        ),
        sample(base, uniform(rng, (3, 4)), "dropout 0.3 + float mask", torch=False, dropout_p=0.3, dropout_seed=7),
        sample(
            ((1, 4, 3, 2), (1, 2, 4, 2), (1, 2, 4, 2)),
            label="dropout 0.5 + causal + GQA + lengths",
            torch=False,
            dropout_p=0.5,
            dropout_seed=11,
            is_causal=True,
            enable_gqa=True,
            key_padding_lengths=np.array([3]),
        ),
    ]


def _torch_ref(torch, query, key, value, attn_mask=None, **attributes):
    """torch's MATH backend with our extras (lengths, bottom-right alignment) as an explicit mask."""
    import importlib

    o = SimpleNamespace(**_complete(attributes))
    attention = importlib.import_module("torch.nn.attention")
    L, S = query.shape[-2], key.shape[-2]
    rank = max(query.dim(), key.dim(), value.dim())
    allowed = None
    if o.is_causal:
        offset = 0 if o.causal_alignment == "top_left" else S - L
        allowed = torch.from_numpy(np.arange(S)[None, :] <= np.arange(L)[:, None] + offset)
    if o.key_padding_lengths is not None:
        visible = np.arange(S) < np.asarray(o.key_padding_lengths)[..., None, None, None]
        visible = visible.reshape(visible.shape[max(0, visible.ndim - rank) :])
        visible = torch.from_numpy(visible)
        allowed = visible if allowed is None else allowed & visible
    mask = attn_mask
    if allowed is not None:
        if mask is None:
            mask = allowed
        elif mask.dtype == torch.bool:
            mask = mask & allowed
        else:
            mask = torch.where(allowed, mask, torch.tensor(float("-inf"), dtype=mask.dtype))
    with attention.sdpa_kernel(attention.SDPBackend.MATH):
        return torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=mask, dropout_p=o.dropout_p, scale=o.scale, enable_gqa=o.enable_gqa
        )


scaled_dot_product_attention = defop(
    OP,
    family="attention",
    inputs=("query", "key", "value", "attn_mask?"),
    forward=_forward,
    joint_vjp=_joint_vjp,
    differentiable=(Grad.RULE, Grad.RULE, Grad.RULE, Grad.RULE),
    returns_aux=True,
    composite=_composite,
    check=_check,
    samples=_samples,
    torch_ref=_torch_ref,
    notes="attn_mask: bool not differentiable; key_padding_lengths: metadata; 2nd order through the full-matrix "
    "composite",
)
random_draw(scaled_dot_product_attention, ("rng", "dropout_seed"), _draw)


def _key_mask(shape, lengths) -> np.ndarray:
    """Key j of scores of ``shape`` (..., L, S) visible where j < its batch element's length: broadcastable."""
    lengths = np.asarray(lengths)
    ndim = len(shape)
    visible = np.arange(shape[-1]) < lengths.reshape(lengths.shape + (1,) * max(0, ndim - 3 - lengths.ndim) + (1, 1, 1))
    return visible.reshape(visible.shape[max(0, visible.ndim - ndim) :])


def _attention_key_mask(scores, *, lengths):
    """Which keys the scores' rows may see under ``lengths`` (key_padding_lengths, an int array over the batch
    dims): key j where j < its batch element's length, in the scores' (..., L, S) shape (their values unread)."""
    return np.broadcast_to(_key_mask(np.shape(scores), lengths), np.shape(scores)).copy()


def _check_attention_key_mask(scores, *, lengths):
    op = "attention_key_mask"
    require_float(op, "scores", scores)
    require(np.ndim(scores) >= 3, op, "scores", "a tensor of (..., heads, L, S) attention scores", np.shape(scores))
    lengths = np.asarray(lengths)
    require(lengths.dtype.kind in "iu", op, "lengths", "an integer array of key counts", f"dtype {lengths.dtype}")
    batch, S = np.shape(scores)[:-3], np.shape(scores)[-1]
    require(_broadcasts_to(lengths.shape, batch), op, "lengths", f"a shape broadcastable to {batch}", lengths.shape)
    require(not lengths.size or 0 <= lengths.min() <= lengths.max() <= S, op, "lengths", f"counts in [0, {S}]", lengths)


attention_key_mask = defop(
    "attention_key_mask",
    family="attention",
    inputs=("scores",),
    forward=_attention_key_mask,
    vjps=(Grad.NOT_DIFFERENTIABLE,),
    check=_check_attention_key_mask,
    samples=lambda rng: [
        Sample((uniform(rng, (3, 2, 4, 5)),), {"lengths": np.array([5, 2, 0])}, "(batch, heads, L, S)"),
        Sample((uniform(rng, (2, 4, 5)),), {"lengths": np.array(3)}, "3-D: one count"),
        Sample((uniform(rng, (0, 2, 3, 3)),), {"lengths": np.zeros(0, np.int64)}, "empty batch"),
    ],
    notes="attention's key-padding mask as an op of its lengths: its recorded backward reads them per call.",
)


def _attention_dropout_keep(weights, p=0.0, *, rng):
    """The attention weights attention's dropout with seed ``rng`` keeps: True where each flat head's (row, key)
    draw passes p, in the weights' (..., L, S) shape (their values are not read): the kernels' own mask."""
    return dropout_keep_masks(int(rng), np.shape(weights), p)


def _check_attention_dropout_keep(weights, p=0.0, *, rng):
    op = "attention_dropout_keep"
    require_float(op, "weights", weights)
    require(np.ndim(weights) >= 2, op, "weights", "a tensor of (..., L, S) attention weights", np.shape(weights))
    require(isinstance(p, numbers.Real) and 0 <= float(p) <= 1, op, "p", "a probability in [0, 1]", p)
    require(integer(op, "rng", rng, 0) < 2**64, op, "rng", "a seed in [0, 2**64)", rng)


attention_dropout_keep = defop(
    "attention_dropout_keep",
    family="attention",
    inputs=("weights",),
    forward=_attention_dropout_keep,
    vjps=(Grad.NOT_DIFFERENTIABLE,),
    check=_check_attention_dropout_keep,
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3, 4, 5)),), {"p": 0.3, "rng": 7}, "(batch, heads, L, S)"),
        Sample((uniform(rng, (4, 4)),), {"p": 1.0, "rng": 1}, "p=1 drops everything"),
        Sample((uniform(rng, (0, 2, 3)),), {"p": 0.5, "rng": 2}, "empty"),
    ],
    notes="attention's dropout mask as an op of its seed: its recorded backward multiplies by it.",
)


# -- ONNX lowering (tape.onnx.export) ------------------------------------------------------------------------
# ONNX's Attention (opset 23) takes 4-D (batch, heads, length, features) inputs, GQA included. Causality with
# torch's top-left alignment is its is_causal; the other options become one mask: bottom-right causality and
# key_padding_lengths (a graph input when the model was exported with it) as a boolean mask, and-ed with a
# boolean attn_mask or selecting a float one (-inf elsewhere).
def _onnx_lengths_mask(g, rec, lengths, L: int, S: int, dims: int):
    """keys j < lengths[b]: a (B, 1, L, S) boolean mask from a 1-D lengths value (an ONNX name) or array (in a
    compiled step's graph an input made from each call's lengths, in an exported model a constant)."""
    if not isinstance(lengths, str):
        if np.ndim(_lengths_array(lengths)) != 1 or dims != 4:
            raise NotExportable("key_padding_lengths other than 1-D over the batch of 4-D inputs has no lowering")
        lengths = g.feed(rec, lambda attributes: _lengths_array(attributes["key_padding_lengths"]))
    elif dims != 4:
        raise NotExportable("key_padding_lengths with other than 4-D inputs has no lowering")
    lengths = g.op("Unsqueeze", g.op("Cast", lengths, to=7), g.ints([1, 2, 3]))  # 7: int64
    visible = g.op("Less", g.const(np.arange(S, dtype=np.int64)), lengths)
    return g.op("And", visible, g.const(np.ones((L, 1), dtype=bool)))  # ONNX Runtime wants the mask's L


def _lengths_array(lengths) -> np.ndarray:
    """key_padding_lengths (an array or a Tensor) as an int64 array."""
    return np.asarray(lengths.numpy() if hasattr(lengths, "numpy") else lengths).astype(np.int64)


def _onnx_sdpa_mask(g, rec, attn_mask, L: int, S: int, use_is_causal: bool):
    """The mask for the op's options (None: none needed) broadcast to (..., L, S), and whether is_causal is
    left to ONNX's Attention (top-left causality and no other mask, when ``use_is_causal``)."""
    a = rec.attributes
    bools = []
    lengths = a.get("key_padding_lengths")
    user = rec.inputs[3]
    if a.get("is_causal"):
        offset = 0 if a.get("causal_alignment", "top_left") == "top_left" else S - L
        if use_is_causal and offset == 0 and lengths is None and user is None:
            return None, True
        bools.append(g.const(np.arange(S)[None, :] <= np.arange(L)[:, None] + offset))
    if lengths is not None:
        bools.append(_onnx_lengths_mask(g, rec, lengths, L, S, len(rec.inputs[0].shape)))
    if user is not None and user.dtype == np.bool_:
        bools.append(attn_mask)
    allowed = bools[0] if bools else None
    for b in bools[1:]:
        allowed = g.op("And", allowed, b)
    if user is not None and user.dtype != np.bool_:
        float_mask = (
            attn_mask if allowed is None else g.op("Where", allowed, attn_mask, g.const(np.array(-np.inf, user.dtype)))
        )
        return g.op("Expand", float_mask, g.ints([L, S])), False
    return (None if allowed is None else g.op("Expand", allowed, g.ints([L, S]))), False


def _onnx_attention_matmul(g, rec, q, k, v, mask, scale: float, dropout=None):
    """softmax(scale * Q K^T (masked)) V with MatMul and Softmax: float64 (ONNX Runtime's Attention computes in
    float32 precision), a scale <= 0 (Attention rejects it), dropout (the weights times ``dropout``, the mask's
    scale fed per call). Rows that see no key give 0, as minitape's."""
    dtype = rec.inputs[0].dtype
    heads_q, heads_kv = ((1, 1, *rec.inputs[i].shape)[-3] for i in (0, 1))  # 2-D, 3-D inputs: one head
    if heads_q != heads_kv:  # GQA: each key/value head serves heads_q // heads_kv query heads
        repeat = g.ints([1, 1, heads_q // heads_kv, 1, 1])
        shape = g.ints([0, heads_q, *rec.inputs[1].shape[-2:-1], -1])
        k, v = (g.op("Reshape", g.op("Expand", g.op("Unsqueeze", x, g.ints([2])), repeat), shape) for x in (k, v))
    scores = g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])), g.const(np.array(scale, dtype)))
    if mask is not None and rec.inputs[3] is not None and rec.inputs[3].dtype != np.bool_:
        scores = g.op("Add", scores, mask)
    elif mask is not None:
        scores = g.op("Where", mask, scores, g.const(np.array(-np.inf, dtype)))
    # the forward's rule: a row whose scores are all -inf (hidden, or -inf itself) gives 0; NaN or +inf stays NaN
    hidden = g.op("Cast", g.op("IsInf", scores, detect_positive=0), to=6)  # 6: INT32
    empty = g.op("Greater", g.op("ReduceMin", hidden, g.ints([-1]), keepdims=1), g.const(np.zeros((), np.int32)))
    weights = g.op("Where", empty, g.const(np.array(0, dtype)), g.op("Softmax", scores, axis=-1))
    if dropout is not None:
        weights = g.op("Mul", weights, dropout)
    return g.op("MatMul", weights, v)


def _fed_keep(g, rec, shape: tuple, names: tuple, refuse=None) -> str:
    """The dropout keep mask of (..., L, S) weights of ``shape`` for the call's seed (``Graph.feed``; ``names``: the
    attributes holding p and the seed): one input per (shape, p, seed), shared by the forward's lowering and the
    attention_dropout_keep its backward records."""
    p, seed = (rec.attributes.get(name) for name in names)

    def compute(attributes):
        return dropout_keep_masks(int(attributes[names[1]]), shape, float(attributes[names[0]]))

    return g.feed(rec, compute, refuse, key=("attention dropout keep", shape, float(p), seed))


def _onnx_sdpa(g, rec, query, key, value, attn_mask=None):
    a = rec.attributes
    ndim = len(rec.inputs[0].shape)
    L, E = rec.inputs[0].shape[-2:] if ndim >= 2 else (0, 0)
    S = rec.inputs[1].shape[-2] if ndim >= 2 else 0
    empty = any(0 in s.shape for s in rec.inputs[:3])  # an empty batch too: ONNX Runtime's Attention fails on it
    if not 2 <= ndim <= 4 or empty or any(len(s.shape) != ndim for s in rec.inputs[1:3]):
        raise NotExportable("only 2-D to 4-D non-empty query, key and value of one rank have a lowering")
    scale = _default_scale(E) if a.get("scale") is None else float(a["scale"])
    keep = dropout = None
    if a.get("dropout_p"):  # a compiled step feeds each call's mask; an exported model would fix one: refused
        refuse = "dropout_p > 0 draws random masks; export with dropout_p=0 (eval mode)"
        keep = _fed_keep(g, rec, tuple(rec.output.shape[:-2]) + (L, S), ("dropout_p", "dropout_seed"), refuse)
    decompose = rec.inputs[0].dtype == np.float64 or scale <= 0 or keep is not None
    mask, causal = _onnx_sdpa_mask(g, rec, attn_mask, L, S, use_is_causal=not decompose)
    lead = None if ndim == 4 else g.ints(range(4 - ndim))
    q, k, v = (x if lead is None else g.op("Unsqueeze", x, lead) for x in (query, key, value))
    if keep is not None:  # the weights times 1 / (1 - p) where kept, 0 where dropped
        p, dtype = float(a["dropout_p"]), rec.inputs[0].dtype
        keep = keep if lead is None else g.op("Unsqueeze", keep, lead)
        dropout = g.op(
            "Mul", g.op("Cast", keep, to=tensor_type(dtype)), g.const(np.asarray(0.0 if p == 1 else 1 / (1 - p), dtype))
        )
    if decompose:
        out = _onnx_attention_matmul(g, rec, q, k, v, mask, scale, dropout)
    else:
        out = g.op("Attention", q, k, v, mask, is_causal=int(causal), scale=scale)
    return out if lead is None else g.op("Squeeze", out, lead)


lowering(
    scaled_dot_product_attention,
    _onnx_sdpa,
    edge_difference="a row whose scores hold inf or NaN (an inf or NaN in query, key or value, or a score of -inf "
    "alone in its row): ONNX Runtime's Attention and Softmax give 0 or finite values where minitape's kernel gives "
    "NaN, or the reverse",
)


def _onnx_attention_key_mask(g, rec, scores):
    """The visible keys of each call's lengths (fed in a compiled step's graph, a constant in an exported model),
    expanded to the scores' shape."""
    shape = rec.inputs[0].shape
    visible = g.feed(rec, lambda attributes: _key_mask(shape, attributes["lengths"]))
    return g.op("Expand", visible, g.op("Shape", scores))


def _onnx_attention_dropout_keep(g, rec, weights):
    """A compiled step's graph: the mask fed from each call's seed. An exported model: the seed's mask, a
    constant (the seed is the op's attribute), in the weights' shape."""
    mask = _fed_keep(g, rec, tuple(rec.inputs[0].shape), ("p", "rng"))
    return mask if g.feeds is not None else g.op("Expand", mask, g.op("Shape", weights))


lowering(attention_dropout_keep, _onnx_attention_dropout_keep)
lowering(attention_key_mask, _onnx_attention_key_mask)
