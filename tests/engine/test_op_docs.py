"""Every registered op explains itself (issue #35): ``help(op)`` shows the op's own generated doc -- its signature,
what it computes, its inputs' backward states, its notes, its coverage row -- and ``inspect.signature(op)`` the
forward's public signature, not the generic ``Op`` class's ``(*args, **kwargs)``."""

import collections
import inspect
import pydoc

import pytest

import ops  # the whole library is registered
import tape
from tape import opdoc
from tape.registry import defop, unregister_op
from tape.tensor_api import _OpMethod

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


# -- what each op computes: its own words, from one source (defop's doc= or the forward's docstring) -------------
GENERIC = ("torch's ``", "op of the", "with its semantics", "UNDOCUMENTED", "The op ")


def _summary_of(doc: str) -> str:
    """The paragraph after the signature line of a generated doc."""
    return doc.split("\n\n")[1]


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_each_op_says_what_it_computes_in_its_own_words_from_one_source(op):
    own = opdoc.own_doc(op.forward)
    assert bool(op.doc) != bool(own), f"{op.name}: doc= {op.doc!r} and the forward's docstring {own!r}: give one"
    summary = op.doc or own
    assert op.__doc__.startswith(f"{op.name}{inspect.signature(op)}\n\n{summary}\n\n") and summary.strip()
    assert not any(g in summary.splitlines()[0] for g in GENERIC), summary
    if op.doc:  # declared: one sentence, optionally a second short line, within the source's line length
        assert len(op.doc.splitlines()) <= 2 and all(len(line) <= 116 for line in op.doc.splitlines()), op.doc
    # help() shows it, with the signature and the op's name
    rendered = pydoc.render_doc(op, renderer=pydoc.plaintext)
    assert f"{op.name}{inspect.signature(op)}" in rendered and summary.splitlines()[0] in rendered


def test_no_two_ops_share_a_declared_summary():
    declared = collections.Counter(op.doc for op in OPS if op.doc)
    assert not [doc for doc, n in declared.items() if n > 1]


def test_a_declaration_gives_doc_or_a_forward_docstring_not_both_and_a_bare_op_says_so():
    def documented(x):
        """x itself."""
        return x

    with pytest.raises(tape.RegistrationError, match="declare doc= only where it has none"):
        defop("_doc_twice", family="test", inputs=("x",), forward=documented, vjps=(lambda g, ans, x: g,), doc="x.")
    assert "_doc_twice" not in {op.name for op in tape.registered_ops()}
    try:
        bare = defop("_doc_bare", family="test", inputs=("x",), forward=lambda x: x, vjps=(lambda g, ans, x: g,))
        assert _summary_of(bare.__doc__) == opdoc.UNDOCUMENTED
        said = defop("_doc_said", family="test", inputs=("x",), forward=lambda x: x, vjps=(lambda g, ans, x: g,),
                     doc="x itself, as declared.")  # fmt: skip
        assert _summary_of(said.__doc__) == "x itself, as declared."
    finally:
        unregister_op("_doc_bare")
        unregister_op("_doc_said")


METHODS = sorted((op.method, op) for op in OPS if op.method)


@pytest.mark.parametrize("method, op", METHODS, ids=[m for m, _ in METHODS])
def test_each_op_method_on_tensor_shows_its_op_doc_and_signature(method, op):
    descriptor = vars(tape.Tensor)[method]
    assert isinstance(descriptor, _OpMethod) and descriptor.op is op
    unbound = getattr(tape.Tensor, method)
    assert unbound.__doc__.startswith(f"Tensor.{method}: the op {op.name}") and op.__doc__ in unbound.__doc__
    assert inspect.signature(unbound) == inspect.signature(op)  # the tensor is the first parameter
    bound = getattr(tape.tensor([1.0, 2.0]), method)
    assert bound.__doc__ == op.__doc__
    first, *rest = inspect.signature(op).parameters.values()
    assert list(inspect.signature(bound).parameters.values()) == rest
    rendered = pydoc.render_doc(bound, renderer=pydoc.plaintext)
    assert _summary_of(op.__doc__).splitlines()[0] in rendered


def test_a_method_called_on_the_class_or_the_tensor_is_its_op():
    t = tape.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert (tape.Tensor.cumsum(t, 1).numpy() == ops.cumsum(t, 1).numpy()).all()
    assert (t.cumsum(dim=0).numpy() == ops.cumsum(t, dim=0).numpy()).all()
    assert tape.Tensor.cumsum.__class__.__doc__.startswith("A Tensor method that *is* a registered op")
