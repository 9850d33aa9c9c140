"""One home for each check and message (issue #20 item 4): every op refusing a non-floating tensor says so in the
same words, worded once in ops/_validation.py."""

import numpy as np
import pytest

import ops
import tape

FLOAT_ONLY = "expected a floating tensor (float32 or float64), got dtype int64; convert it explicitly"


def _int(shape=(2, 3)):
    return tape.tensor(np.arange(int(np.prod(shape))).reshape(shape))


def _f(shape=(2, 3)):
    return tape.tensor(np.ones(shape))


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
    with pytest.raises(TypeError) as error:
        call()
    assert str(error.value).startswith(f"{op}: argument '{argument}' {FLOAT_ONLY}"), str(error.value)


def test_there_is_one_float_check_in_the_op_library():
    import pathlib

    root = pathlib.Path(ops.__file__).parent
    worded = [p.name for p in root.glob("*.py") if "expected a floating tensor (float32 or float64)" in p.read_text()]
    assert worded == ["_validation.py"], worded


REAL_CASES = [  # a number attribute given a string: (call, op, argument)
    (lambda: ops.elu(_f(), alpha="1"), "elu", "alpha"),
    (lambda: ops.hardtanh(_f(), min_val="1"), "hardtanh", "min_val"),
    (lambda: ops.huber_loss(_f(), _f(), delta="1"), "huber_loss", "delta"),
]


@pytest.mark.parametrize("case", REAL_CASES, ids=lambda c: f"{c[1]}-{c[2]}")
def test_number_attributes_are_coerced_by_one_function_with_one_message(case):
    call, op, argument = case
    with pytest.raises(TypeError) as error:
        call()
    assert str(error.value) == f"{op}: argument '{argument}' expected a real number, got str '1'", str(error.value)


def test_there_is_one_number_coercer_in_the_op_library():
    import pathlib

    root = pathlib.Path(ops.__file__).parent
    defined = [p.name for p in root.glob("*.py") if "int | float | np.integer | np.floating):" in p.read_text()]
    assert defined == ["_validation.py"], defined
