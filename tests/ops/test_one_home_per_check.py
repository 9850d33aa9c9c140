"""One home for each check and message (issue #20 item 4): every op refusing a non-floating tensor says so in the
same words, worded once in ops/_validation.py."""

import pathlib
import re

import numpy as np
import pytest

import ops
import tape

OPS_DIR = pathlib.Path(ops.__file__).parent
# an int refusal written out: where a bool is not an int (the form tape/checks.integer has)
INT_REFUSAL = re.compile(r"isinstance\((\w+), bool\) or not isinstance\(\1, (int \| np\.integer|numbers\.Integral)\)")
FLOAT_ONLY = "expected a floating tensor (float32 or float64), got dtype int64; convert it explicitly"


def _int(shape=(2, 3)):
    return tape.tensor(np.arange(int(np.prod(shape))).reshape(shape))


def _f(shape=(2, 3)):
    return tape.tensor(np.ones(shape))


def _refusal(call, kind=TypeError) -> str:
    """The message of the ``kind`` error ``call()`` raises (the test fails if it raises none)."""
    with pytest.raises(kind) as error:
        call()
    return str(error.value)


def _files_in_ops(found) -> list:
    """The names of the op library's modules whose source ``found`` (a string or a compiled regex) is in, sorted."""
    hit = found.search if isinstance(found, re.Pattern) else (lambda text: found in text)
    return sorted(p.name for p in OPS_DIR.glob("*.py") if hit(p.read_text()))


CASES = [  # (op call on an integer tensor, the argument the message names)
    (lambda: ops.exp(_int()), "exp", "x"),
    (lambda: ops.hardtanh(_int()), "hardtanh", "input"),
    (lambda: ops.mean(_int()), "mean", "x"),
    (lambda: ops.logcumsumexp(_int(), 0), "logcumsumexp", "input"),
    (lambda: ops.addcmul(_f(), _int(), _f()), "addcmul", "tensor1"),
    (lambda: ops.lerp(_int(), _f(), 0.5), "lerp", "input"),
    (lambda: ops.lerp(_f(), _int(), 0.5), "lerp", "end"),
    (lambda: ops.xlogy(_f(), _int()), "xlogy", "other"),
    (lambda: ops.bernoulli(_int()), "bernoulli", "input"),
    (lambda: ops.multinomial(_int((3,)), 1), "multinomial", "input"),
    (lambda: ops.glu(_int()), "glu", "input"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[1]}-{c[2]}")
def test_float_only_refusals_share_one_message(case):
    call, op, argument = case
    message = _refusal(call)
    assert message.startswith(f"{op}: argument '{argument}' {FLOAT_ONLY}"), message


def test_there_is_one_float_check_in_the_op_library():
    worded = _files_in_ops("expected a floating tensor (float32 or float64)")
    assert worded == ["_validation.py"], worded


REAL_CASES = [  # a number attribute given a string: (call, op, argument)
    (lambda: ops.elu(_f(), alpha="1"), "elu", "alpha"),
    (lambda: ops.hardtanh(_f(), min_val="1"), "hardtanh", "min_val"),
    (lambda: ops.huber_loss(_f(), _f(), delta="1"), "huber_loss", "delta"),
]


@pytest.mark.parametrize("case", REAL_CASES, ids=lambda c: f"{c[1]}-{c[2]}")
def test_number_attributes_are_coerced_by_one_function_with_one_message(case):
    call, op, argument = case
    message = _refusal(call)
    assert message == f"{op}: argument '{argument}' expected a real number, got str '1'", message


def test_there_is_one_number_coercer_in_the_op_library():
    defined = _files_in_ops("int | float | np.integer | np.floating):")
    assert defined == ["_validation.py"], defined


BROADCAST_CASES = [  # shapes that do not broadcast: (call, op, argument)
    (lambda: ops.index_put(_f((3, 4)), (np.array([0, 1]),), _f((3,))), "index_put", "values"),
    (lambda: ops.masked_select(_f((3, 4)), np.ones((2, 4), bool)), "masked_select", "mask"),
    (lambda: ops.masked_scatter(_f((3, 4)), np.ones((2, 4), bool), _f((12,))), "masked_scatter", "mask"),
    (lambda: ops.matmul(_f((2, 3, 4)), _f((3, 4, 5))), "matmul", "other"),
    (lambda: ops.addmm(_f((3, 4)), _f((2, 3)), _f((3, 5))), "addmm", "input"),
    (lambda: ops.cross(_f((2, 3)), _f((4, 3))), "cross", "other"),
    (lambda: ops.dist(_f((2, 3)), _f((4, 3))), "dist", "other"),
    (lambda: ops.cdist(_f((2, 3, 4)), _f((3, 5, 4))), "cdist", "x2"),
    (lambda: ops.solve(_f((2, 3, 3)) + np.eye(3), _f((4, 3, 1))), "solve", "B"),
]


@pytest.mark.parametrize("case", BROADCAST_CASES, ids=lambda c: c[1])
def test_shapes_that_do_not_broadcast_are_refused_in_one_form(case):
    call, op, argument = case
    message = _refusal(call, ValueError)
    assert message.startswith(f"{op}: argument '{argument}' expected ") and " broadcastable " in message, message


def _lower(shape):
    return tape.tensor(np.broadcast_to(np.tril(np.ones(shape[-2:])) + 2 * np.eye(shape[-1]), shape).copy())


BATCH_CASES = [  # matrix operands whose batch dims do not broadcast: (call, the message)
    (lambda: ops.matmul(_f((2, 3, 4)), _f((3, 4, 5))), "matmul", "other", "input's (2,), got shape (3, 4, 5)"),
    (lambda: ops.cdist(_f((2, 3, 4)), _f((3, 5, 4))), "cdist", "x2", "x1's (2,), got shape (3, 5, 4)"),
    (lambda: ops.solve(_lower((2, 3, 3)), _f((4, 3, 1))), "solve", "B", "A's (2,), got shape (4, 3, 1)"),
    (lambda: ops.lstsq(_lower((2, 3, 3)), _f((4, 3, 1))), "lstsq", "B", "A's (2,), got shape (4, 3, 1)"),
    (lambda: ops.solve_triangular(_lower((2, 3, 3)), _f((4, 3, 1)), upper=False), "solve_triangular", "B",
     "A's (2,), got shape (4, 3, 1)"),
    (lambda: ops.cholesky_solve(_f((4, 3, 1)), _lower((2, 3, 3))), "cholesky_solve", "B",
     "L's (2,), got shape (4, 3, 1)"),
]  # fmt: skip


@pytest.mark.parametrize("case", BATCH_CASES, ids=lambda c: c[1])
def test_matrix_batch_dims_that_do_not_broadcast_are_refused_in_one_message(case):
    """Before: lstsq showed A's whole shape as its batch dims, solve_triangular and cholesky_solve named no operand
    and no 'shape'."""
    call, op, argument, rest = case
    assert _refusal(call, ValueError) == f"{op}: argument '{argument}' expected batch dims broadcastable with {rest}"


def test_there_is_one_broadcast_refusal_in_the_op_library():
    # binary.py names both operands of an elementwise op (docs/reliability.md); indexing.py's index arrays raise
    # IndexError as numpy's; attention.py's batch dims belong to the attention check
    found = _files_in_ops(re.compile(r"try:\n\s+[^\n]*np\.broadcast_shapes\("))
    assert found == ["_validation.py", "attention.py", "binary.py", "indexing.py"], found


INT_CASES = [  # an int attribute given 1.5: (call, op, argument, the bound the message states)
    (lambda: ops.rot90(_f(), 1.5), "rot90", "k", ""),
    (lambda: ops.swapaxes(_f(), 1.5, 0), "swapaxes", "axis0", ""),
    (lambda: ops.matrix_power(_f((2, 2)), 1.5), "matrix_power", "n", ""),
    (lambda: ops.round(_f(), decimals=1.5), "round", "decimals", ""),
    (lambda: ops.cov(_f(), correction=1.5), "cov", "correction", ""),
    (lambda: ops.cross_entropy(_f(), np.array([0, 1]), ignore_index=1.5), "cross_entropy", "ignore_index", ""),
    (lambda: ops.tril(_f(), 1.5), "tril", "diagonal", ""),
    (lambda: ops.topk(_f(), 1.5), "topk", "k", ""),
    (lambda: ops.polygamma(1.5, _f()), "polygamma", "n", " >= 0"),
    (lambda: ops.mvlgamma(_f() + 2, 1.5), "mvlgamma", "p", " >= 1"),
    (lambda: ops.diff(_f(), n=1.5), "diff", "n", " >= 0"),
    (lambda: ops.bincount(np.array([0, 1]), minlength=1.5), "bincount", "minlength", " >= 0"),
    (lambda: ops.multinomial(_f((3,)), 1.5), "multinomial", "num_samples", " >= 1"),
    (lambda: ops.pixel_shuffle(_f((1, 4, 2, 2)), 1.5), "pixel_shuffle", "upscale_factor", " >= 1"),
    (lambda: ops.histc(_f(), bins=1.5), "histc", "bins", " >= 1"),
]


@pytest.mark.parametrize("case", INT_CASES, ids=lambda c: f"{c[1]}-{c[2]}")
def test_int_attributes_are_checked_by_one_function_with_one_message(case):
    call, op, argument, bound = case
    message = _refusal(call)
    assert message == f"{op}: argument '{argument}' expected an int{bound}, got float 1.5", message


@pytest.mark.parametrize("call, message", [
    (lambda: ops.diff(_f(), n=-1), "diff: argument 'n' expected an int >= 0, got -1"),
    (lambda: ops.bincount(np.array([0, 1]), minlength=-1),
     "bincount: argument 'minlength' expected an int >= 0, got -1"),
    (lambda: ops.polygamma(-1, _f()), "polygamma: argument 'n' expected an int >= 0, got -1"),
])  # fmt: skip
def test_an_int_below_its_bound_is_a_value_error_in_the_same_words(call, message):
    assert _refusal(call, ValueError) == message


def test_there_is_one_int_coercer_in_the_op_library():
    found = _files_in_ops(INT_REFUSAL)
    # the home is tape/checks.py (_validation.integer and .ints are its functions); tensordot's dims lists name
    # the list they are in
    assert found == ["decompositions.py"], found


BOOL_CASES = [  # a flag given the string "yes": (call, op, argument)
    (lambda: ops.isclose(_f(), _f(), equal_nan="yes"), "isclose", "equal_nan"),
    (lambda: ops.max_pool2d(_f((1, 1, 2, 2)), 2, ceil_mode="yes"), "max_pool2d", "ceil_mode"),
    (lambda: ops.multinomial(_f((3,)), 1, "yes"), "multinomial", "replacement"),
    (lambda: ops.dropout(_f(), 0.5, "yes"), "dropout", "training"),
    (lambda: ops.index_put(_f(), (np.array([0]),), _f((3,)), "yes"), "index_put", "accumulate"),
    (lambda: ops.nonzero(_f(), as_tuple="yes"), "nonzero", "as_tuple"),
    (lambda: ops.combinations(_f((3,)), 2, "yes"), "combinations", "with_replacement"),
    (lambda: ops.vander(_f((3,)), increasing="yes"), "vander", "increasing"),
    (lambda: ops.batch_norm(_f((2, 3)), training="yes"), "batch_norm", "training"),
    (lambda: ops.instance_norm(_f((1, 2, 3)), use_input_stats="yes"), "instance_norm", "use_input_stats"),
    (lambda: ops.sum(_f(), 0, keepdim="yes"), "sum", "keepdim"),
    (lambda: ops.sort(_f(), stable="yes"), "sort", "stable"),
    (lambda: ops.kl_div(_f(), _f(), log_target="yes"), "kl_div", "log_target"),
    (lambda: ops.affine_grid(_f((1, 2, 3)), (1, 1, 2, 2), align_corners="yes"), "affine_grid", "align_corners"),
]


@pytest.mark.parametrize("case", BOOL_CASES, ids=lambda c: f"{c[1]}-{c[2]}")
def test_flags_are_checked_by_one_function_with_one_message(case):
    call, op, argument = case
    message = _refusal(call)
    assert message == f"{op}: argument '{argument}' expected a bool, got str 'yes'", message


def test_there_is_one_flag_refusal_in_the_op_library():
    # the home is tape/checks.py (_validation.require_bool is its function); _numpy.py words numpy's own keywords
    # in numpy's form (np.<name>: ...)
    worded = _files_in_ops("expected a bool, got")
    assert worded == ["_numpy.py"], worded


def test_normalize_validates_its_attributes_once_in_its_check(monkeypatch):
    from ops import activation

    calls = []
    for name in ("normalize_dims", "real"):
        original = getattr(activation, name)
        monkeypatch.setattr(
            activation,
            name,
            lambda *a, _f=original, _n=name, **k: calls.append((_n, a[1] if _n == "real" else "dim")) or _f(*a, **k),
        )
    x = tape.tensor(np.array([[3.0, 4.0], [1.0, 0.0]]), requires_grad=True)
    y = ops.normalize(x, p=2.0, dim=1, eps=1e-12)
    y.backward(np.array([[1.0, 2.0], [0.5, -1.0]]))
    assert sorted(calls) == [("normalize_dims", "dim"), ("real", "eps"), ("real", "p")], calls
    np.testing.assert_allclose(y.numpy(), [[0.6, 0.8], [1.0, 0.0]])
    np.testing.assert_allclose(x.grad.numpy(), [[-0.064, 0.048], [0.0, -1.0]])  # (g - (g.y) y) / ||x||


def test_attentions_parameter_list_is_written_once():
    import inspect

    from ops import attention

    source = pathlib.Path(attention.__file__).read_text()
    assert source.count('causal_alignment="top_left"') == 1, "the attribute list is the forward's signature only"
    assert list(inspect.signature(ops.scaled_dot_product_attention.forward).parameters)[4:] == [
        "dropout_p", "is_causal", "scale", "enable_gqa", "key_padding_lengths", "causal_alignment", "rng",
        "dropout_seed"]  # fmt: skip


# -- the engine core and the training stack word their int and flag refusals in tape/checks.py too -------------
def _nn():
    from tape import nn

    return nn


TAPE_INT_CASES = [  # (call, the message): an int argument given 1.5, or an int below its bound
    (lambda: tape.tril_indices(1.5, 3), "tril_indices: argument 'row' expected an int >= 0, got float 1.5"),
    (lambda: tape.triu_indices(3, 3, 1.5), "triu_indices: argument 'offset' expected an int, got float 1.5"),
    (lambda: tape.randint(1.5, 4, (2,)), "randint: argument 'low' expected an int, got float 1.5"),
    (lambda: tape.Generator(1.5), "Generator: argument 'seed' expected an int, got float 1.5"),
    (lambda: tape.zeros(2).size(1.5), "Tensor.size: argument 'dim' expected an int, got float 1.5"),
    (lambda: _nn().GRU(3, 4, num_layers=1.5), "GRU: argument 'num_layers' expected an int >= 1, got float 1.5"),
    (lambda: _nn().GRU(3, 4, num_layers=True), "GRU: argument 'num_layers' expected an int >= 1, got bool True"),
    (lambda: tape.tril_indices(-1, 3), "tril_indices: argument 'row' expected an int >= 0, got -1"),
    (lambda: _nn().LSTM(3, 4, num_layers=0), "LSTM: argument 'num_layers' expected an int >= 1, got 0"),
    # the argument named is the one given (before: 'size' for each of these)
    (lambda: tape.linspace(0, 1, -1), "linspace: argument 'steps' expected an int >= 0, got -1"),
    (lambda: tape.randperm(-2), "randperm: argument 'n' expected an int >= 0, got -2"),
    (lambda: tape.eye(2, -1), "eye: argument 'm' expected an int >= 0, got -1"),
    # sizes: one form, the entry and the whole sequence
    (lambda: tape.zeros(2, 1.5), "zeros: argument 'size' expected ints >= 0, got float 1.5 in (2, 1.5)"),
    (lambda: tape.ones((2, -1)), "ones: argument 'size' expected ints >= 0, got -1 in (2, -1)"),
    (lambda: tape.zeros(2).new_zeros(2, -1), "Tensor.new_full: argument 'size' expected ints >= 0, got -1 in (2, -1)"),
    (lambda: ops.reshape(_f(), (2, 1.5)), "reshape: argument 'shape' expected ints, got float 1.5 in (2, 1.5)"),
]


@pytest.mark.parametrize("case", TAPE_INT_CASES, ids=lambda c: c[1].split(":")[0])
def test_the_engine_cores_int_arguments_are_refused_in_the_op_librarys_words(case):
    call, message = case
    with pytest.raises((TypeError, ValueError)) as error:
        call()
    assert str(error.value) == message
    assert error.type is (ValueError if message.split("got ")[-1].lstrip("-").split(" ")[0].isdigit() else TypeError)


TAPE_FLAG_CASES = [  # a flag given the string "yes" (before: read as True, silently)
    (lambda: tape.zeros(2, requires_grad="yes"), "zeros"),
    (lambda: tape.rand(2, requires_grad="yes"), "rand"),
    (lambda: tape.arange(3.0, requires_grad="yes"), "arange"),
    (lambda: tape.zeros(2).new_zeros(3, requires_grad="yes"), "Tensor.new_full"),
    (lambda: tape.zeros(2).requires_grad_("yes"), "Tensor.requires_grad_"),
]


@pytest.mark.parametrize("case", TAPE_FLAG_CASES, ids=lambda c: c[1])
def test_the_engine_cores_flags_are_refused_in_the_op_librarys_words(case):
    call, where = case
    assert _refusal(call) == f"{where}: argument 'requires_grad' expected a bool, got str 'yes'"


def test_the_int_and_flag_checks_have_one_home_for_every_layer():
    from ops import _validation
    from tape import checks

    assert (_validation.require, _validation.integer, _validation.ints, _validation.require_bool) == (
        checks.require, checks.integer, checks.ints, checks.require_bool)  # fmt: skip
    root = pathlib.Path(tape.__file__).parent
    worded = re.compile(r"expected (an int|ints|a bool)\b[^\"']*, got")
    found = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if INT_REFUSAL.search(p.read_text()) or worded.search(p.read_text())
    )
    assert found == ["checks.py"], found
