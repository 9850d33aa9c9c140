"""Every registered op explains itself (issue #35): ``help(op)`` shows the op's own generated doc -- its signature,
what it computes, its inputs' backward states, its notes, its coverage row -- and ``inspect.signature(op)`` the
forward's public signature, not the generic ``Op`` class's ``(*args, **kwargs)``."""

import inspect
import pydoc

import pytest

import ops  # noqa: F401 -- the whole library is registered
import tape

OPS = tape.registered_ops()


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_each_op_has_its_own_doc_and_signature(op):
    signature = inspect.signature(op)
    assert set(op.input_names) <= set(signature.parameters), (op.input_names, signature)  # every tensor input named
    doc = op.__doc__
    assert doc.startswith(f"{op.name}{signature}\n"), doc[:200]
    for name, state in zip(op.input_names, op.input_states):
        assert f"    {name}: " in doc and state.value.split()[0] in doc
    assert f"'{op.name}' row of docs/coverage.md" in doc
    if op.notes:
        assert op.notes in doc
    rendered = pydoc.render_doc(op, renderer=pydoc.plaintext)
    assert f"{op.name}{signature}" in rendered and "A registered op." not in rendered


def test_the_op_class_keeps_its_own_doc_and_a_call_signature_follows_the_forward():
    assert tape.Op.__doc__.startswith("A registered op.")
    assert "A registered op." in pydoc.render_doc(tape.Op, renderer=pydoc.plaintext)
    assert str(inspect.signature(ops.cross_entropy)) == (
        "(input, target, weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0)"
    )
    assert inspect.getdoc(ops.cross_entropy).startswith("cross_entropy(input, target, weight=None")
    assert "torch.nn.functional.cross_entropy" in ops.cross_entropy.__doc__
