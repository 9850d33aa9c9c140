"""``tape.func``: calling a module with other tensors in place of its parameters and buffers, as ``torch.func``.

``functional_call(module, {name: tensor}, args)`` runs ``module(*args)`` with each named parameter or buffer replaced
by the given tensor for the duration of the call, so gradients flow to the given tensors (not the module's own), and
puts the module's own tensors back afterwards, also when the call raises. A buffer the call replaces (BatchNorm's
running statistics) is written back into the given tensor (``given.data = new``, which bumps its version), as torch
updates it in place.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..tensors import Tensor

__all__ = ["functional_call"]


def functional_call(
    module,
    parameter_and_buffer_dicts,
    args=None,
    kwargs=None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
):
    """``module(*args, **kwargs)`` with the named tensors of ``parameter_and_buffer_dicts`` (a dict, or a sequence of
    dicts with distinct keys) in place of the module's parameters and buffers, as ``torch.func.functional_call``.
    ``tie_weights``: a tensor given for one name of a tied parameter is used under all of them (two different ones
    raise). ``strict``: every parameter and buffer must be given."""
    given = _merged(parameter_and_buffer_dicts)
    slots = _slots(module)
    unknown = [name for name in given if name not in slots]
    if unknown:
        raise AttributeError(
            f"functional_call: {type(module).__name__} has no parameter or buffer named {', '.join(unknown)}"
        )
    if tie_weights:
        given = _tied(slots, given)
    if strict:
        missing = [name for name in slots if name not in given]
        if missing:
            raise RuntimeError(
                f"functional_call (strict=True): missing parameter(s) or buffer(s): {', '.join(missing)}"
            )
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    originals = {name: slots[name][0][slots[name][1]] for name in given}
    try:
        for name, value in given.items():
            table, key, _ = slots[name]
            table[key] = value
        return module(*args, **(kwargs or {}))
    finally:
        for name, value in given.items():
            table, key, is_buffer = slots[name]
            replaced = table[key]
            table[key] = originals[name]
            if is_buffer and replaced is not value and _same_kind(replaced, value):
                value.data = replaced._data  # torch's module updated the given buffer in place


def _merged(dicts) -> dict:
    parts = [dicts] if isinstance(dicts, Mapping) else list(dicts)
    merged: dict = {}
    for k, part in enumerate(parts):
        if not isinstance(part, Mapping):
            raise TypeError(
                f"functional_call: argument 'parameter_and_buffer_dicts' expected a dict or a sequence of dicts, "
                f"got {type(part).__name__} at position {k}"
            )
        for name, value in part.items():
            if name in merged:
                raise ValueError(f"functional_call: '{name}' appears in more than one of the given dicts")
            if not isinstance(value, Tensor):
                raise TypeError(f"functional_call: '{name}' expected a Tensor, got {type(value).__name__}")
            merged[name] = value
    return merged


def _slots(module) -> dict:
    """{dotted name: (the owning module's parameter or buffer table, key, is a buffer)} of every parameter and
    buffer (non-persistent ones too), a tied one under each of its names."""
    slots = {}
    for module_name, m in module.named_modules():
        prefix = f"{module_name}." if module_name else ""
        for table, is_buffer in ((m._parameters, False), (m._buffers, True)):
            for key, t in table.items():
                if t is not None:
                    slots[prefix + key] = (table, key, is_buffer)
    return slots


def _tied(slots, given) -> dict:
    """``given`` with a tensor given under one name of a tied parameter or buffer added under its other names."""
    names_of: dict[int, list[str]] = {}
    for name, (table, key, _) in slots.items():
        names_of.setdefault(id(table[key]), []).append(name)
    result = dict(given)
    for names in names_of.values():
        values = {id(given[n]): given[n] for n in names if n in given}
        if len(values) > 1:
            raise ValueError(
                f"functional_call: different tensors were given for {', '.join(n for n in names if n in given)}, "
                f"which are tied in the module; pass one of them, or tie_weights=False"
            )
        if values:
            value = next(iter(values.values()))
            result.update((n, value) for n in names)
    return result


def _same_kind(a, b) -> bool:
    return isinstance(a, Tensor) and a.shape == b.shape and a.dtype == b.dtype
