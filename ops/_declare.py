"""The declaration form the families share: an op with one tensor input and one rule for it (JAX's
``standard_unop``); each family's own factories add what is particular to it."""

from tape.registry import defop


def one_input_op(name: str, family: str, forward, vjp, *, input_name: str = "input", **declaration):
    """``defop`` of op ``name`` whose one tensor parameter is ``input_name``, with the rule ``vjp`` (or
    NOT_DIFFERENTIABLE) for it; ``declaration`` holds the rest of defop's keywords."""
    return defop(name, family=family, inputs=(input_name,), forward=forward, vjps=(vjp,), **declaration)


def values_indices_op(name: str, family: str, forward, vjp, **declaration):
    """``one_input_op`` returning ``(values, indices)``: the one rule receives both outputs' gradients (the
    indices' is None)."""
    return one_input_op(name, family, forward, vjp, outputs=("values", "indices"), **declaration)
