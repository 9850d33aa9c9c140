"""Bad input at every public op, table-driven from the registry, and the engine's own errors.

For every registered op and every one of its samples, bad variants are generated generically:

- ``int_or_bool``: integer / bool arrays where the op differentiates a float. An op may either refuse
  (TypeError/ValueError naming the op) or, when it is exact on integers (add, reshape, indexing...),
  compute in the integer dtype; it must never turn integers into floats behind the user's back.
- ``mixed_float``: float32 and float64 tensors in one call (minitape refuses with TypeError), and a
  float16 array (unsupported dtype).
- ``dim_out_of_range``: every dim-like attribute (dim, dims, dim0, start_dim, ...) set past the input's
  rank, both ways, and to a float: IndexError/ValueError/TypeError naming the op and the argument.
- ``bool_attribute``: a string where a bool attribute (keepdim, ...) belongs: TypeError/ValueError naming
  the op and the argument.
- ``shapes``: each float input with its rank raised, lowered, or its first/last dim grown. PyTorch
  (``op.torch_ref``, forward only) is the oracle: what torch refuses must be refused with an error naming
  the op; what minitape accepts must have torch's output shape and must run backward -- a raw numpy error
  from a backward rule never reaches the user.

An op's known bug is listed in ``KNOWN_BUGS`` and its test is a strict xfail: fixing the op makes the
test XPASS (a failure), and the entry is then removed.

``python tests/ops/test_bad_input.py`` prints the markdown table of docs/reliability.md from live runs.
"""

from __future__ import annotations

import sys  # noqa: I001 -- tests/ (oracle, paths) on the path when this file runs as a script
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository first: tests/ops must not hide ops/

import copy
import os
import re
import warnings

import numpy as np
import pytest
from oracle import require_torch
from paths import DOCS, REPO

import ops
import tape
from tape.autodiff import reverse_pass
from tape.tools.verify import call, differentiable_positions, joined, op_samples

CLEAR_ERRORS = (TypeError, ValueError, IndexError, ZeroDivisionError)  # the last: integer division by 0, as torch
DIM_ATTRIBUTE = re.compile(r"^(dim\d?|dims|axis|axes|start_dim|end_dim|source|destination)$")
NOT_DIMS = {("tile", "dims")}  # tile's dims are repeat counts, as in torch.tile

# (kind, op name) -> what is wrong. Each entry makes that table test a strict xfail (see module docstring).
KNOWN_BUGS: dict[tuple[str, str], str] = {}


# -- running an op on raw arrays ---------------------------------------------------------------------------
def _tensors(arrays) -> list:
    return [None if a is None else tape.Tensor(a, dtype=np.asarray(a).dtype) for a in arrays]


def _run(op, arrays, attrs):
    """(output Tensor, None) or (None, exception) for op applied to leaf tensors built from ``arrays``."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return call(op, _tensors(arrays), attrs), None
    except Exception as e:  # noqa: BLE001 -- the exception itself is what is being judged
        return None, e


def names(message: str, word: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(word)}(?!\w)", message) is not None


def clear_error(exc: BaseException, op_name: str, argument: str | None = None) -> bool:
    """A TypeError/ValueError/IndexError naming the op (and the argument, when given)."""
    text = str(exc)
    return (isinstance(exc, CLEAR_ERRORS) and names(text, op_name)
            and (argument is None or names(text, argument)))


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def _samples(op) -> list:
    """The op's samples for the table-driven sweep. Ops taking a sequence of tensors (concat, stack, einsum)
    are left out: the variants below perturb one array per tensor input; their own tests cover bad input."""
    if op.has_sequence:
        return []
    try:  # zero-size samples are left out too: there is no element to perturb (they have their own tests)
        return [s for s in op_samples(op) if all(a is None or np.size(a) for a in s.inputs)]
    except Exception:  # noqa: BLE001 -- a broken sample generator is the generated tests' business
        return []


# -- variant generators: each yields (label, arrays, attrs, argument-that-is-wrong or None) ---------------------
def int_or_bool_variants(op, sample):
    floats = differentiable_positions(op, sample)
    if not floats:
        return
    as_int = lambda a: np.round(np.nan_to_num(np.asarray(a) * 3, posinf=9, neginf=-9)).astype(np.int64)  # noqa: E731
    for kind, convert in (("int64", as_int),
                          ("bool", lambda a: np.asarray(a) > 0)):
        arrays = [convert(a) if i in floats else a for i, a in enumerate(sample.inputs)]
        yield f"{kind} for {[op.input_names[i] for i in floats]}", arrays, sample.attrs, None


def mixed_float_variants(op, sample):
    floats = [i for i, a in enumerate(sample.inputs) if a is not None and np.asarray(a).dtype.kind == "f"]
    if len(floats) >= 2:
        for first, rest in ((np.float32, np.float64), (np.float64, np.float32)):
            arrays = list(sample.inputs)
            for k, i in enumerate(floats):
                arrays[i] = np.asarray(arrays[i]).astype(first if k == 0 else rest)
            yield f"{np.dtype(first).name} with {np.dtype(rest).name}", arrays, sample.attrs, None


def _dim_values(value, ndim):
    """Bad replacements for a dim-like attribute value (an int or a sequence of ints)."""
    rank = max(ndim, 1)
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int | np.integer):
        return [rank + 2, -rank - 3, 1.5]
    if isinstance(value, tuple | list) and value and all(isinstance(v, int | np.integer) for v in value):
        return [type(value)([rank + 2, *value[1:]]), type(value)([-rank - 3, *value[1:]])]
    return []


def dim_variants(op, sample):
    first = next((a for a in sample.inputs if a is not None), None)
    if first is None:
        return
    for name, value in sample.attrs.items():
        if DIM_ATTRIBUTE.match(name) and (op.name, name) not in NOT_DIMS:
            for bad in _dim_values(value, np.ndim(first)):
                yield f"{name}={bad!r} for a {np.ndim(first)}-D input", list(sample.inputs), \
                    {**sample.attrs, name: bad}, name


def bool_attribute_variants(op, sample):
    for name, value in sample.attrs.items():
        if isinstance(value, bool):
            yield f"{name}='yes'", list(sample.inputs), {**sample.attrs, name: "yes"}, name


def _reshaped(a, how):
    a = np.asarray(a)
    if how == "rank+1":
        return np.stack([a, a])
    if how == "rank-1":
        return a[0] if a.ndim >= 1 else None
    if how == "first dim+1":
        return np.concatenate([a, a[:1]]) if a.ndim >= 1 else None
    if how == "last dim+1":
        return np.concatenate([a, a[..., :1]], axis=-1) if a.ndim >= 1 else None
    raise ValueError(how)


def shape_variants(op, sample):
    for i in differentiable_positions(op, sample):
        for how in ("rank+1", "rank-1", "first dim+1", "last dim+1"):
            changed = _reshaped(sample.inputs[i], how)
            if changed is not None:
                arrays = list(sample.inputs)
                arrays[i] = changed
                yield f"'{op.input_names[i]}' {np.shape(sample.inputs[i])} -> {changed.shape} ({how})", \
                    arrays, sample.attrs, None


# -- judging a variant ---------------------------------------------------------------------------------------
def judge_refusal(op, label, arrays, attrs, argument):
    """The variant must be refused with a clear error naming the op (and the argument)."""
    out, exc = _run(op, arrays, attrs)
    if exc is None:
        return f"{label}: accepted (output {out.dtype}{list(out.shape)}), expected an error"
    if not clear_error(exc, op.name, argument):
        wanted = f"naming '{op.name}'" + (f" and '{argument}'" if argument else "")
        return f"{label}: unclear error (expected TypeError/ValueError/IndexError {wanted}): {describe(exc)}"
    return None


def judge_int_or_bool(op, label, arrays, attrs, argument):
    """Refused clearly, or computed without inventing a float dtype."""
    out, exc = _run(op, arrays, attrs)
    if exc is not None:
        return None if clear_error(exc, op.name) else f"{label}: unclear error {describe(exc)}"
    explicit = "dtype" in attrs  # an explicit conversion (cast) may make floats from integers: it was asked to
    if not explicit and any(o.dtype.kind == "f" for o in _outputs(out)) and not any(
            a is not None and np.asarray(a).dtype.kind == "f" for a in arrays):
        return f"{label}: silently computed in {out.dtype} from non-float inputs (expected a TypeError naming the op)"
    return None


def _torch_verdict(op, arrays, attrs):
    """(True, None) when torch's reference refuses the input, (False, its output shape) when it accepts
    it, None when there is no oracle."""
    if op.torch_ref is None:
        return None
    torch = require_torch()

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = op.torch_ref(torch, *[None if a is None else torch.tensor(np.array(a)) for a in arrays],
                                    **attrs)
    except Exception:  # noqa: BLE001 -- any refusal by torch counts
        return True, None
    return False, tuple(tuple(o.shape) for o in _outputs(expected))


def _outputs(out) -> tuple:
    """An op's result as a tuple of its outputs (ops with several outputs return tuples, torch namedtuples)."""
    return tuple(out) if isinstance(out, tuple | list) else (out,)


def judge_shapes(op, label, arrays, attrs, argument):
    oracle = _torch_verdict(op, arrays, attrs)
    out, exc = _run(op, arrays, attrs)
    if exc is not None:
        return None if clear_error(exc, op.name) else f"{label}: unclear error {describe(exc)}"
    if oracle is not None:
        refused, torch_shape = oracle
        shapes = tuple(o.shape for o in _outputs(out))
        if refused:
            return f"{label}: accepted (output shapes {shapes}) but torch refuses it"
        if shapes != torch_shape:
            return f"{label}: output shapes {shapes}, torch gives {torch_shape}"
    return _backward_problem(op, label, arrays, attrs)


def _backward_problem(op, label, arrays, attrs):
    """Run the backward of an accepted variant; any exception is a problem (the forward took the input)."""
    diff = [i for i, (a, state) in enumerate(zip(arrays, op.input_states))
            if a is not None and state is tape.Grad.RULE and np.asarray(a).dtype.kind == "f"]
    if not diff:
        return None
    leaves = [None if a is None else tape.Tensor(a, requires_grad=i in diff, dtype=np.asarray(a).dtype)
              for i, a in enumerate(arrays)]
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            out = joined(call(op, leaves, attrs))
            if out._node is not None and out.dtype.kind == "f":
                reverse_pass([out], [np.ones(out.shape, out.dtype)], retain_graph=False,
                             sources=[leaves[i] for i in diff])
    except Exception as e:  # noqa: BLE001
        return f"{label}: forward accepted it but backward raised {describe(e)}"
    return None


KINDS = {
    "int_or_bool": (int_or_bool_variants, judge_int_or_bool),
    "mixed_float": (mixed_float_variants, judge_refusal),
    "dim_out_of_range": (dim_variants, judge_refusal),
    "bool_attribute": (bool_attribute_variants, judge_refusal),
    "shapes": (shape_variants, judge_shapes),
}


def problems_of(kind: str, op) -> tuple[int, list[str]]:
    """(variants tried, problems found) for one op and one kind of bad input, over all its samples."""
    make, judge = KINDS[kind]
    tried, problems = 0, []
    for s_index, sample in enumerate(_samples(op)):
        for label, arrays, attrs, argument in make(op, sample):
            tried += 1
            problem = judge(op, label, arrays, attrs, argument)
            if problem:
                problems.append(f"sample {s_index} {sample!r}: {problem}")
    return tried, problems


def _cases(kind: str) -> list:
    make, _ = KINDS[kind]
    params = []
    for op in tape.registered_ops():
        if not any(True for sample in _samples(op) for _ in make(op, sample)):
            continue
        reason = KNOWN_BUGS.get((kind, op.name))
        marks = [pytest.mark.xfail(strict=True, reason=f"bug: {reason}")] if reason else []
        params.append(pytest.param(op.name, id=op.name, marks=marks))
    return params


def _check(kind: str, op_name: str) -> None:
    tried, problems = problems_of(kind, tape.get_op(op_name))
    assert tried > 0
    assert not problems, f"{len(problems)} of {tried} bad variants of '{op_name}' mishandled:\n  " + \
        "\n  ".join(problems[:12])


@pytest.mark.parametrize("op_name", _cases("int_or_bool"))
def test_integer_or_bool_input_is_refused_or_stays_exact(op_name):
    _check("int_or_bool", op_name)


@pytest.mark.parametrize("op_name", _cases("mixed_float"))
def test_mixed_float32_float64_is_refused_naming_the_op(op_name):
    _check("mixed_float", op_name)


@pytest.mark.parametrize("op_name", _cases("dim_out_of_range"))
def test_out_of_range_or_non_int_dims_are_refused_naming_op_and_argument(op_name):
    _check("dim_out_of_range", op_name)


@pytest.mark.parametrize("op_name", _cases("bool_attribute"))
def test_non_bool_flags_are_refused_naming_op_and_argument(op_name):
    _check("bool_attribute", op_name)


@pytest.mark.parametrize("op_name", _cases("shapes"))
def test_wrong_rank_and_incompatible_shapes_are_refused_or_work_in_backward(op_name):
    _check("shapes", op_name)


def _first_float_input(op):
    """(sample, position) of the op's first sample input that is a float array, or None."""
    for sample in _samples(op):
        for i, a in enumerate(sample.inputs):
            if a is not None and np.asarray(a).dtype.kind == "f":
                return sample, i
    return None


@pytest.mark.parametrize("op_name", [op.name for op in tape.registered_ops() if _first_float_input(op) and
                                     not op.casts])
def test_float16_arrays_are_refused_naming_the_op_and_dtype(op_name):
    """float16 is a storage dtype: every op but cast (``casts=True``) refuses it, as an array or a Tensor."""
    op = tape.get_op(op_name)
    sample, i = _first_float_input(op)
    arrays = list(sample.inputs)
    arrays[i] = np.asarray(arrays[i]).astype(np.float16)
    with pytest.raises(TypeError) as info:
        call(op, arrays, sample.attrs)
    assert names(str(info.value), op.name) and "float16" in str(info.value)


# -- the engine's own errors ---------------------------------------------------------------------------------
@pytest.fixture
def throwaway():
    """Register ops for one test; unregister them in finally."""
    made = []

    def make(name, **declaration):
        op = tape.defop(name, **declaration)
        made.append(name)
        return op

    try:
        yield make
    finally:
        for name in made:
            tape.unregister_op(name)


def _identity_op(make, name, rule):
    return make(name, family="test", inputs=("x",), forward=lambda x: x.copy(), vjps=(rule,))


def test_backward_on_a_non_scalar_without_a_gradient_names_the_shape():
    y = ops.exp(tape.tensor(np.ones((2, 3)), requires_grad=True))
    with pytest.raises(RuntimeError, match=r"backward: output 0 has shape \(2, 3\)"):
        y.backward()
    with pytest.raises(ValueError, match=r"gradient 0 has shape \(3,\) but its output has shape \(2, 3\)"):
        y.backward(np.ones(3))
    with pytest.raises(TypeError, match="gradient 0 has dtype float32 but its output is float64"):
        y.backward(np.ones((2, 3), np.float32))


def test_second_backward_after_free_names_the_op():
    x = tape.tensor(np.array([0.5, 1.0]), requires_grad=True)
    loss = ops.sum(ops.tanh(x))
    loss.backward()
    with pytest.raises(tape.GraphFreedError, match="op 'sum'.*retain_graph=True"):
        loss.backward()


def test_a_rule_returning_none_a_wrong_shape_or_dtype_names_op_and_input(throwaway):
    cases = {"bad_none_rule": (lambda g, ans, x: None, "returned None"),
             "bad_shape_rule": (lambda g, ans, x: g[:1], r"returned shape \(1,\)"),
             "bad_dtype_rule": (lambda g, ans, x: g.astype(np.float32), r"returned shape \(3,\) dtype float32")}
    for name, (rule, message) in cases.items():
        op = _identity_op(throwaway, name, rule)
        y = op(tape.tensor(np.ones(3), requires_grad=True))
        with pytest.raises(tape.GradientError, match=f"op '{name}': the backward rule for input 'x' {message}"):
            ops.sum(y).backward()


def test_a_stub_rule_names_the_op_and_input(throwaway):
    op = throwaway("stubbed_identity", family="test", inputs=("x",), forward=lambda x: x.copy(), vjps=(tape.STUB,))
    y = op(tape.tensor(np.ones(3), requires_grad=True))
    with pytest.raises(tape.BackwardNotImplementedError, match=r"op 'stubbed_identity'.*\['x'\]"):
        ops.sum(y).backward()


def test_a_raw_numpy_error_inside_a_backward_rule_is_reported_with_the_op_name(throwaway):
    op = _identity_op(throwaway, "broadcast_bug_rule", lambda g, ans, x: g + np.ones(7))
    y = op(tape.tensor(np.ones(3), requires_grad=True))
    with pytest.raises(Exception) as info:  # noqa: B017 -- the point is what the message says
        ops.sum(y).backward()
    assert names(str(info.value), "broadcast_bug_rule") and names(str(info.value), "x")


def test_requires_grad_on_integer_or_bool_tensors_is_a_type_error():
    for data in (np.arange(3), np.array([True, False])):
        with pytest.raises(TypeError, match=f"requires_grad=True needs a floating tensor.*{data.dtype}"):
            tape.tensor(data, requires_grad=True)
    assert tape.tensor(np.ones(2, np.float16), requires_grad=True).dtype == np.float16  # storage; cast takes it
    with pytest.raises(TypeError, match="float128; minitape computes in float32 or float64"):
        tape.tensor(np.ones(2, np.longdouble))


def test_mixed_float_dtypes_name_the_op_and_both_dtypes():
    a = tape.tensor(np.ones(3, np.float32), requires_grad=True)
    b = tape.tensor(np.ones(3, np.float64))
    with pytest.raises(TypeError, match=r"mul: floating inputs must share one dtype.*a=float32, b=float64"):
        ops.mul(a, b)
    with pytest.raises(TypeError, match=r"mul: floating inputs must share one dtype"):
        a * np.ones(3)  # a raw float64 array is not cast silently either
    assert (a * 2.0).dtype == np.float32  # Python scalars adopt the tensor's dtype


def test_unknown_arguments_missing_inputs_and_extra_positionals_name_the_op():
    x = tape.tensor(np.ones((2, 3)))
    with pytest.raises(TypeError, match=r"sum: unknown argument 'axis'"):
        ops.sum(x, axis=0)
    with pytest.raises(TypeError, match=r"add: missing required argument\(s\) \['b'\]; the op is add\(a, b, alpha\)"):
        ops.add(x)
    with pytest.raises(TypeError, match=r"exp: takes 1 positional argument\(s\), got 2; the op is exp\(x\)"):
        ops.exp(x, x)
    with pytest.raises(TypeError, match="sum: got multiple values for argument 'dim'"):
        ops.sum(x, 0, dim=0)


# -- the table of docs/reliability.md, from live runs --------------------------------------------------------
def _example(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        root = str(REPO) + os.sep
        message = str(e).replace(root, "").replace("|", "\\|").replace("\n", " ")
        message = re.sub(r"#\d+", "#N", re.sub(r"(\.py):\d+", r"\1:N", message))  # ids and lines vary by run
        return type(e).__name__, message
    return "(accepted)", ""


def markdown_table() -> str:
    """Each kind of bad input, its exception and a message captured by running it, plus per-kind counts."""
    t = tape.tensor
    f64 = lambda *shape: t(np.ones(shape), requires_grad=True)  # noqa: E731
    examples = [
        ("int tensor where a float is needed", lambda: ops.exp(t(np.arange(3)))),
        ("bool tensor where a float is needed", lambda: ops.log(t(np.array([True, False])))),
        ("mixed float32 / float64", lambda: ops.add(t(np.ones(3, np.float32)), f64(3))),
        ("float16 array", lambda: ops.exp(np.ones(3, np.float16))),
        ("requires_grad on an int tensor", lambda: t(np.arange(3), requires_grad=True)),
        ("incompatible broadcast shapes", lambda: ops.add(f64(2, 3), f64(4))),
        ("matmul inner dims differ", lambda: ops.matmul(f64(2, 3), f64(2, 3))),
        ("dim out of range", lambda: ops.sum(f64(2, 3), dim=5)),
        ("dim not an int", lambda: ops.sum(f64(2, 3), dim=1.5)),
        ("repeated dim", lambda: ops.mean(f64(2, 3), dim=(0, 0))),
        ("bool attribute given a string", lambda: ops.sum(f64(2, 3), dim=0, keepdim="yes")),
        ("reshape to a wrong size", lambda: ops.reshape(f64(2, 3), (5,))),
        ("permute with too few dims", lambda: ops.permute(f64(2, 3), (0,))),
        ("index out of range", lambda: ops.getitem(f64(2, 3), (5,))),
        ("unknown keyword argument", lambda: ops.sum(f64(2, 3), axis=0)),
        ("backward of a non-scalar without gradient", lambda: ops.exp(f64(2, 3)).backward()),
        ("second backward after the graph was freed", _second_backward),
        ("backward after an input got a new value (t.data = ...)", _inplace_then_backward),
        ("a backward rule returns None", lambda: _throwaway_backward(lambda g, ans, x: None)),
        ("a backward rule returns a wrong shape", lambda: _throwaway_backward(lambda g, ans, x: g[:1])),
        ("a backward rule is a registered STUB", lambda: _throwaway_backward(tape.STUB)),
        ("a backward rule raises a raw numpy error",
         lambda: _throwaway_backward(lambda g, ans, x: g + np.ones(7))),
        ("NaN in a forward under detect_anomaly()", _anomaly),
        ("backward after a constant input got a new value", _constant_changed_then_backward),
        ("a numpy function with no op on a tensor that requires grad", lambda: np.fft.fft(f64(3))),
        ("np.asarray of a tensor that requires grad", lambda: np.asarray(f64(3))),
        ("a complex operand", lambda: ops.mul(f64(3), 1 + 2j)),
        ("a string operand", lambda: ops.mul(f64(3), "2.5")),
        ("a Python int beyond int64", lambda: ops.mul(f64(3), 2**70)),
        ("a ragged list", lambda: ops.add(f64(2), [[1.0], [2.0, 3.0]])),
        ("an attribute given a tensor that requires grad", lambda: ops.sum(f64(3), dim=f64())),
        ("Tensor.data given another dtype", lambda: setattr(t(np.ones(3, np.float32)), "data", np.ones(3))),
        ("Tensor.grad given a wrong shape", lambda: setattr(f64(3), "grad", t(np.ones(2)))),
        ("copy.deepcopy of a tensor computed by an op", lambda: copy.deepcopy(f64(2) * 2)),
        ("replay with another float dtype", _replay_other_dtype),
        ("the second order of an op whose double backward is a stub", _second_order_stub),
    ]
    lines = ["| bad input | exception | message (captured live) |", "|---|---|---|"]
    for what, fn in examples:
        kind, message = _example(fn)
        lines.append(f"| {what} | `{kind}` | {message[:260]} |")
    lines += ["", "| table-driven kind | ops | variants tried | mishandled (ops) |", "|---|---|---|---|"]
    for kind in KINDS:
        n_ops = tried = bad = 0
        bad_ops = []
        for op in tape.registered_ops():
            k_tried, problems = problems_of(kind, op)
            if k_tried:
                n_ops, tried, bad = n_ops + 1, tried + k_tried, bad + len(problems)
                if problems:
                    bad_ops.append(op.name)
        lines.append(f"| {kind} | {n_ops} | {tried} | {bad} ({', '.join(bad_ops) or '-'}) |")
    return "\n".join(lines)


def _replay_other_dtype():
    x = tape.tensor(np.ones(3))
    with tape.ExecutionTape() as rec:
        ops.exp(x)
    rec.replay({x: np.ones(3, np.float32)})


def _second_order_stub():
    op = tape.defop("doc_example_op", family="test", inputs=("x",), forward=lambda x: x * x,
                    vjps=(lambda g, ans, x: g * 2 * x,), second_order=tape.STUB,
                    second_order_note="an example stub")
    try:
        x = tape.tensor(np.ones(3), requires_grad=True)
        (g,) = tape.gradients(op(x).sum(), [x], create_graph=True)
        g.sum().backward()
    finally:
        tape.unregister_op("doc_example_op")


def _second_backward():
    loss = ops.sum(ops.exp(tape.tensor(np.ones(2), requires_grad=True)))
    loss.backward()
    loss.backward()


def _throwaway_backward(rule):
    try:
        op = tape.defop("doc_example_op", family="test", inputs=("x",), forward=lambda x: x.copy(), vjps=(rule,))
        ops.sum(op(tape.tensor(np.ones(3), requires_grad=True))).backward()
    finally:
        tape.unregister_op("doc_example_op")


def _anomaly():
    with tape.detect_anomaly(), np.errstate(invalid="ignore"):
        ops.log(tape.tensor(np.array([-1.0, 2.0]), requires_grad=True))


def _constant_changed_then_backward():
    x, w = tape.tensor(np.ones(2), requires_grad=True), tape.tensor(np.ones(2))
    loss = ops.sum(ops.mul(x, w))
    w.data = np.zeros(2)
    loss.backward()


def _inplace_then_backward():
    x = tape.tensor(np.ones(2), requires_grad=True)
    loss = ops.sum(ops.exp(x))
    x.data = np.zeros(2)
    loss.backward()


GENERATED_BEGIN = "<!-- generated by `python tests/ops/test_bad_input.py --write`: do not edit by hand -->"
GENERATED_END = "<!-- end of generated tables -->"
RELIABILITY_DOC = str(DOCS / "reliability.md")


def generated_section(text: str) -> str:
    """The part of docs/reliability.md between the generated-table markers."""
    start, end = text.index(GENERATED_BEGIN) + len(GENERATED_BEGIN), text.index(GENERATED_END)
    return text[start:end].strip()


@pytest.mark.slow
def test_docs_reliability_tables_are_what_the_code_does_now():
    with open(RELIABILITY_DOC, encoding="utf-8") as f:
        stored = generated_section(f.read())
    assert stored == markdown_table(), ("docs/reliability.md is out of date: regenerate it with "
                                        "`python tests/ops/test_bad_input.py --write`")


if __name__ == "__main__":
    table = markdown_table()
    if "--write" in sys.argv:
        with open(RELIABILITY_DOC, encoding="utf-8") as f:
            text = f.read()
        start, end = text.index(GENERATED_BEGIN) + len(GENERATED_BEGIN), text.index(GENERATED_END)
        with open(RELIABILITY_DOC, "w", encoding="utf-8") as f:
            f.write(text[:start] + "\n\n" + table + "\n\n" + text[end:])
    else:
        print(table)
    sys.exit(0)
