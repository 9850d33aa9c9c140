"""What a compiled step's trace (tape/compile.py) asks off its hot path: a call's key (``key_or_none``; an op's
declared random draw marked, ``random_draw``), whether a call would raise on its concrete integer inputs (indices,
targets: values eager's forward checks) before the other inputs have values -- fn must stop where eager stops --, in
words, how a call differs from the plan (for recompile=False's error), and the warning for a step no plan can
replay.

Random draws: an op whose forward draws (dropout's seed from its generator) declares the draw with
``random_draw(op, names, draw)``, ``draw`` being the very function its forward draws with. A compiled step makes
that draw where fn calls the op -- eager's place among fn's own draws, so every generator is left as eager leaves
it -- and keys the call with those attributes marked ``DRAWN``: every call replays with its own draw. A forward that
resolves an attribute without declaring it (``ResolvedAttributes``) runs eagerly every call, warned."""

import warnings

import numpy as np

from .recording import ResolvedAttributes, forward_arrays

__all__ = ["fails", "difference", "unplanned", "key_or_none", "random_draw", "marked", "drawn", "as_given", "DRAWN"]

DRAWN = "drawn at the call"  # how a plan's key holds an attribute a declared draw resolves
_DRAWS: dict = {}  # op -> (the attribute names its draw resolves, draw(attributes) -> {name: value drawn})


def random_draw(op, names: tuple, draw) -> None:
    """Declare that ``op``'s forward draws: ``draw(attributes)`` makes the draw and returns the attributes it
    resolves ({} for a call that draws nothing); ``names``: every attribute it may resolve or read the generator
    from, marked DRAWN in a plan's key."""
    _DRAWS[op] = (tuple(names), draw)


def marked(op, attrs: dict) -> dict:
    """``attrs`` as a plan's key holds them: ``attrs`` itself, or for an op declaring a draw a copy with its names
    marked DRAWN."""
    declared = _DRAWS.get(op)
    return attrs if declared is None else {k: DRAWN if k in declared[0] else v for k, v in attrs.items()}


def drawn(op, attrs: dict, values: list | None) -> tuple[dict, list | None]:
    """A bound call's attributes and values (``recording.bind_call``'s) with ``op``'s declared draw made now: the
    attributes as ResolvedAttributes (as eager's forward records them), the values the forward takes holding them."""
    declared = _DRAWS.get(op)
    made = declared[1](attrs) if declared is not None else None
    if not made:
        return attrs, values
    attrs = ResolvedAttributes(attrs, made)
    values = [None] * len(op.param_names) if values is None else list(values)  # (tensors: filled by the forward call)
    for i in op.attr_pos:
        values[i] = attrs[op.param_names[i]]
    return attrs, values


def as_given(op, attrs) -> tuple[dict, bool]:
    """(a recorded call's attributes as a plan's key holds them: as given, a declared draw's marked; whether its
    forward resolved another attribute -- an undeclared draw, which makes the call run eagerly every time)."""
    given = marked(op, attrs.given if isinstance(attrs, ResolvedAttributes) else attrs)
    return given, any(
        given.get(k, DRAWN) is not DRAWN and key_or_none(v) != key_or_none(given[k]) for k, v in attrs.items()
    )


def fails(op, arrays, attrs, values, seq_lens) -> bool:
    """``arrays``: per tensor input its array, None, or (shape, dtype) for one without values yet (shown to the op as
    zeros). Only a call given an integer array is tried. A failure the real values would not give costs speed only:
    the caller runs the call eagerly. An op that may draw (``rng``/``generator``) is not tried: it would draw."""
    if not any(type(a) is np.ndarray and a.dtype.kind in "iu" for a in (*arrays, *(values or ()))):
        return False
    if "rng" in op.param_index or "generator" in op.param_index:
        return False
    shown = [np.broadcast_to(np.zeros((), a[1]), a[0]) if type(a) is tuple else a for a in arrays]
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            forward_arrays(op, shown, attrs, None if values is None else list(values), seq_lens)
    except Exception:  # noqa: BLE001 -- eager then raises (or, on the real values, does not) in its own words
        return True
    return False


def difference(key, call) -> str:
    """How a traced call's ``key`` differs from the plan's ``call``."""
    if call is None or key is None:
        return "the plan has no op there" if call is None else "it reads a tensor with a graph made outside fn"
    names = ("the op", "its sequence lengths", "its attributes", "its tensor inputs", "grad mode")
    found = (f"{n} differ: {a!r} now, {b!r} in the plan" for n, a, b in zip(names, key, call.key) if a != b)
    return next(found, "a tape records it or anomaly mode is on, which always run eagerly")


def unplanned(fn, why: str | None, plan=None, plans=()) -> None:
    """Warn (once per fn and reason, by the warnings module's own registry) that no plan can replay ``fn``'s step:
    every call runs eagerly -- eager's numbers, none of compile's speed. ``why``: the reason ``_build`` gave, else
    None; a new ``plan`` with the very calls of one already kept shows the other reason: this call matched it but
    ran eagerly from part-way (fn read a value it computed, or changed a tensor an op had read), as it will again."""
    if why is None and plan is not None and any(_same_calls(plan, p) for p in plans):
        why = (
            "every call runs the rest of the step eagerly from where fn reads the values of a tensor it computed "
            "(tape.gradients or backward inside fn, .item(), .numpy(), a bool of a tensor) or changes a tensor an op "
            "already read"
        )
    if why is not None:
        name = getattr(fn, "__qualname__", type(fn).__name__)
        warnings.warn(
            f"tape.compile: no plan can replay {name}: {why}, so every call runs eagerly (eager's results, no "
            "speed-up; docs/compile.md)",
            RuntimeWarning,
            stacklevel=3,
        )


def _same_calls(a, b) -> bool:
    return len(a.calls) == len(b.calls) and all(x.key == y.key for x, y in zip(a.calls, b.calls))


def _value_key(v):
    """A value as a comparable key (floats by their bits, arrays by dtype, shape and bytes); TypeError for one that
    cannot be compared safely (a Generator: such a call always runs eagerly)."""
    kind = type(v)
    if kind is float:
        return (float, v.hex())
    if v is None or kind in (int, bool, str, np.dtype) or isinstance(v, type):
        return (kind, v)
    if kind is np.ndarray:  # an index array's values do not shape the output (the plan checks that it does not)
        return (np.ndarray, v.dtype.str, v.shape, None if v.dtype.kind in "iu" else v.tobytes())
    if kind is dict:  # a call's attributes
        return (dict, tuple((name, _value_key(x)) for name, x in v.items()))
    if kind is tuple or kind is list or kind is slice:
        return (kind, tuple(_value_key(x) for x in ((v.start, v.stop, v.step) if kind is slice else v)))
    if isinstance(v, np.generic):
        return (kind, v.tobytes())
    if v is Ellipsis:
        return (kind,)
    raise TypeError(kind)


def key_or_none(v):
    """``_value_key(v)``, or None for a value without one."""
    try:
        return _value_key(v)
    except TypeError:
        return None
