"""ONNX export (tape.onnx): every lowered op's samples, exported and run in ONNX Runtime, equal minitape's forward;
the examples' models, trained briefly, exported and run on held-out inputs (and other batch sizes, through a dynamic
batch axis) give minitape's outputs; what cannot be exported says which op and where.

The tests skip with a reason without onnx/onnxruntime, and fail instead where ``MINITAPE_REQUIRE_ONNX=1`` (CI).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from paths import EXAMPLES, REPO

import ops
import tape
from tape import nn, optim
from tape.onnx import (
    NotExportableError,
    check_sample,
    declares_lowering,
    edge_difference,
    lowering_of,
    not_exportable_reason,
)
from tape.tools.edges import dtype_of, export_cases

LOWERED = [op for op in tape.registered_ops() if lowering_of(op) is not None and op.samples is not None]
# the ops the three examples' models record; each must have a lowering
EXAMPLE_OPS = ("linear", "embedding", "layer_norm", "gelu", "scaled_dot_product_attention", "reshape", "permute",
               "transpose", "getitem", "add", "relu", "matmul", "unsqueeze", "dropout", "softmax", "rms_norm",
               "cross_entropy", "mean", "sub", "mul")



def session(ort, path_or_bytes):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    given = path_or_bytes if isinstance(path_or_bytes, bytes) else str(path_or_bytes)
    return ort.InferenceSession(given, options, providers=["CPUExecutionProvider"])


def relative_error(got, want) -> float:
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)) / np.max(np.abs(want)))


# -- ops --------------------------------------------------------------------------------------------------------
def test_every_registered_op_declares_its_lowering():
    """One ONNX op, a decomposition, or lowering(op, not_exportable="why") next to the op's declaration."""

    missing = [
        f"{op.name} (add lowering({op.name}, ...) or lowering({op.name}, not_exportable='why') in "
        f"{Path(inspect.getsourcefile(op.forward) or '?').relative_to(REPO)})"
        for op in tape.registered_ops()
        if not declares_lowering(op)
    ]
    assert not missing, "ops that declare no ONNX lowering: " + "; ".join(missing)


def test_a_not_exportable_declaration_says_why():
    op = tape.get_op("cumprod")
    reason = not_exportable_reason(op)
    assert lowering_of(op) is None and reason and len(reason) > 10
    with pytest.raises(TypeError, match="not_exportable"):
        tape.onnx.lowering(op, not_exportable="  ")
    with pytest.raises(TypeError, match="either"):
        tape.onnx.lowering(op, "Exp", not_exportable="why")


def test_the_example_ops_have_lowerings():
    missing = [name for name in EXAMPLE_OPS if lowering_of(tape.get_op(name)) is None]
    assert not missing


@pytest.mark.parametrize("op", LOWERED, ids=lambda op: op.name)
def test_lowered_op_samples_run_in_onnxruntime(ort, op):
    """float32 to rtol 1e-5, float64 to 1e-10 where ONNX Runtime has a float64 kernel; a sample the lowering
    refuses must say so clearly; at least one float32 sample must run."""
    outcomes = []
    for sample in op.samples(np.random.default_rng(0)):
        for dtype in (np.float32, np.float64):
            status, detail = check_sample(op, sample, dtype)
            outcomes.append((np.dtype(dtype).name, status, sample, detail))
    differs = [o for o in outcomes if o[1] == "differs"]
    assert not differs, differs
    assert not [o for o in outcomes if o[1] == "no kernel" and o[0] == "float32"]
    for _, status, _, detail in outcomes:
        if status == "not exportable":
            assert f"op '{op.name}' is not exportable" in detail and "called at" in detail, detail
    assert any(o[:2] == ("float32", "equal") for o in outcomes), outcomes


def _failures(op, group):
    """The export checks of ``group`` (tape/tools/edges.export_cases, as the coverage column runs them) that fail:
    a model ONNX Runtime rejects or that computes other values than the forward."""
    failures = []
    for kind, sample, dtype, scale in export_cases(op):
        if kind != group:
            continue
        status, detail = check_sample(op, sample, dtype, scale=scale)
        dtype_name = dtype_of(sample, dtype).name
        if status == "differs" or (status == "no kernel" and dtype_name != "float64"):
            failures.append(f"{sample.label} ({dtype_name}): {detail}")
        if status == "not exportable":  # refused at export: the error names the op and the call site
            assert f"op '{op.name}' is not exportable" in detail and "called at" in detail, detail
    return failures


@pytest.mark.parametrize("op", LOWERED, ids=lambda op: op.name)
def test_lowered_op_edge_values_run_in_onnxruntime(ort, op):
    """The op tests' edge values (tape/tools/edges.py: NaN, +-inf, +-0, huge, subnormal, division by zero, empty
    inputs): the exported model gives the forward's values there too (sign(NaN) was NaN after export, 0 in
    minitape; float floor_divide by 0 NaN, not +-inf)."""
    failures = _failures(op, "edges")
    if edge_difference(op) is None:
        assert not failures, failures
    else:  # declared with its reason (the coverage column shows it): it must still show, or the declaration goes
        assert failures, f"{op.name} declares an edge difference that no longer shows: {edge_difference(op)}"


@pytest.mark.parametrize("op", LOWERED, ids=lambda op: op.name)
def test_lowered_op_in_every_integer_dtype_runs_in_onnxruntime(ort, op):
    """Each sample as bool and in every integer dtype the forward takes: the model loads in ONNX Runtime and gives
    the forward's values, or the export refuses naming the op and the dtype (int8 pow, uint8 neg, int16 amax and
    argmax, int16 clamp exported into models ONNX Runtime rejects)."""
    failures = _failures(op, "dtypes")
    assert not failures, failures


def test_small_integers_run_through_a_wider_type_and_unserved_dtypes_are_refused_by_name(ort):
    """int8 pow, uint8 neg, int16 amax / argmax / clamp wrote models ONNX Runtime refuses to load; now they compute
    in int32 (exact: the cast back wraps as int8 arithmetic does) -- and a dtype no wider type serves (a uint64
    sum) is refused at export naming the op, the ONNX op and the dtype."""
    x = np.array([[-128, -3, 0, 5, 127]], np.int8)
    cases = [(lambda t: ops.pow(t, 3), x), (lambda t: ops.neg(t), x.astype(np.uint8)),
             (lambda t: ops.amax(t, dim=1), x.astype(np.int16)), (lambda t: ops.argmax(t, dim=1), x.astype(np.int16)),
             (lambda t: ops.clamp(t, -2, 4), x.astype(np.int16))]
    for fn, a in cases:
        model = tape.onnx.export(fn, (a,), None)
        (got,) = session(ort, model.SerializeToString()).run(None, {"input_0": a})
        want = fn(tape.tensor(a)).numpy()
        assert got.dtype == want.dtype and np.array_equal(got, want), (a.dtype, got, want)

    def trace_of(t):
        return ops.trace(t)  # uint8's trace is a uint64 sum: ONNX Runtime has no uint64 ReduceSum

    with pytest.raises(NotExportableError, match=r"op 'trace' .*ONNX's ReduceSum.* no kernel for in uint64.*test_onnx"):
        tape.onnx.export(trace_of, (np.ones((2, 2), np.uint8),), None)


def test_known_values(ort, tmp_path):
    """A small graph against values worked by hand: (x * 2 + 1)[1:], softmax of equal entries, x[..., -1]."""
    x = tape.tensor(np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]], np.float32))
    path = tmp_path / "known.onnx"
    tape.onnx.export(lambda x: ((x * 2 + 1)[1:], ops.softmax(x * 0, dim=-1), x[..., -1]), (x,), path)
    a, b, c = session(ort, path).run(None, {"input_0": x.numpy()})
    np.testing.assert_array_equal(a, [[5.0, 7.0], [9.0, 11.0]])
    np.testing.assert_array_equal(b, np.full((3, 2), 0.5, np.float32))
    np.testing.assert_array_equal(c, [1.0, 3.0, 5.0])



def test_reading_a_detached_alias_of_a_computed_tensor_is_refused():
    """``t.detach()`` shares t's memory: its values are the example's as much as t's (an attention composite read
    its scores this way and baked which rows see a key into compiled training graphs)."""

    def fn(x):
        y = x * 2
        return y + float(y.detach().numpy().sum())

    with pytest.raises(NotExportableError, match=r"reads the values of a tensor computed from input_0 through numpy"):
        tape.onnx.export(fn, (tape.tensor(np.ones((2, 3))),), None)

@pytest.mark.parametrize(
    "equation, shapes",
    [("...i,...i->...", [(2, 3, 4)] * 2), ("...i->...", [(2, 3, 4)]), ("ij,ij->j", [(3, 5)] * 2),
     ("bij,bij,bij->bi", [(2, 3, 4)] * 3), ("ij,ij->ij", [(3, 5)] * 2), ("ij,jk->ik", [(3, 4), (4, 2)])],
)
def test_einsum_products_summed_over_axes_lower_to_mul_and_reduce_sum(ort, tmp_path, equation, shapes):
    """ONNX Runtime's Einsum is ~10x slower than Mul + ReduceSum on a row dot (attention's backward): an einsum
    that multiplies equal-shaped operands elementwise and sums some axes lowers to them, with numpy's value."""
    import onnx

    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    path = tmp_path / "einsum.onnx"
    tape.onnx.export(lambda *xs: ops.einsum(equation, *xs), tuple(tape.tensor(a) for a in arrays), path)
    kinds = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert ("Einsum" in kinds) == (equation == "ij,jk->ik"), kinds
    (got,) = session(ort, path).run(None, {f"input_{k}": a for k, a in enumerate(arrays)})
    np.testing.assert_allclose(got, np.einsum(equation, *arrays), rtol=1e-5, atol=1e-6)

# -- the examples' models -----------------------------------------------------------------------------------------
def load_example(name):
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module(name)


def train(model, loss_fn, batches, steps: int = 15):
    optimizer = optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(steps):
        optimizer.zero_grad()
        loss_fn(*batches(step)).backward()
        optimizer.step()
    model.eval()
    return model


def test_tinygpt_runs_in_onnxruntime_with_a_dynamic_batch(ort, tmp_path):
    common = load_example("common")
    reverse = load_example("reverse")
    nn.manual_seed(0)
    model = common.TinyGPT(vocab_size=9, context=12, d_model=32, num_heads=4, num_layers=2)
    rng = np.random.default_rng(0)
    train(model, model.loss, lambda step: reverse.make_batch(rng, 16, 6, 8)[1:])
    _, tokens, _ = reverse.make_batch(rng, 4, 6, 8)
    path = tmp_path / "tinygpt.onnx"
    written = tape.onnx.export(model, (tokens,), path, input_names=["tokens"], output_names=["logits"],
                               dynamic_axes={"tokens": {0: "batch"}, "logits": {0: "batch"}})
    initializers = {i.name for i in written.graph.initializer}
    assert {name for name, _ in model.named_parameters()} <= initializers
    assert "blocks.0.attn.qkv.weight" in initializers, initializers
    run = session(ort, path)
    for batch in (4, 1, 33):  # held-out inputs; 1 and 33 through the dynamic batch axis
        x, tokens, _ = reverse.make_batch(np.random.default_rng(100 + batch), batch, 6, 8)
        (got,) = run.run(None, {"tokens": tokens})
        with tape.no_grad():
            want = model(tokens).numpy()
        assert got.shape == want.shape
        assert relative_error(got, want) <= 1e-5
        assert np.array_equal(np.argmax(got, -1), np.argmax(want, -1))  # the same predictions, so the same accuracy


def test_tinygpt_with_dynamic_batch_and_sequence_runs_at_other_sizes(ort, tmp_path):
    """Batch and sequence both dynamic: the positions, reshapes and causal attention follow the input's sizes, so
    ONNX Runtime gives minitape's logits (and loss) at batch sizes and lengths other than the example's."""
    common = load_example("common")
    reverse = load_example("reverse")
    nn.manual_seed(0)
    model = common.TinyGPT(vocab_size=9, context=12, d_model=32, num_heads=4, num_layers=2)
    model.eval()
    _, tokens, targets = reverse.make_batch(np.random.default_rng(0), 4, 6, 8)
    axes = {0: "batch", 1: "sequence"}
    path, loss_path = tmp_path / "gpt.onnx", tmp_path / "loss.onnx"
    tape.onnx.export(model, (tokens,), path, input_names=["tokens"], output_names=["logits"],
                     dynamic_axes={"tokens": axes, "logits": axes})
    tape.onnx.export(model.loss, (tokens, targets), loss_path, input_names=["tokens", "targets"],
                     dynamic_axes={"tokens": axes, "targets": axes})
    run, run_loss = session(ort, path), session(ort, loss_path)
    for batch, length in ((4, 12), (1, 5), (7, 9), (3, 1)):
        _, tokens, targets = reverse.make_batch(np.random.default_rng(batch + 10 * length), batch, 6, 8)
        tokens, targets = tokens[:, :length], targets[:, :length]
        targets[:, 0] = 1  # at least one target not ignored: a finite loss
        (got,) = run.run(None, {"tokens": tokens})
        (got_loss,) = run_loss.run(None, {"tokens": tokens, "targets": targets})
        with tape.no_grad():
            want, want_loss = model(tokens).numpy(), model.loss(tokens, targets).numpy()
        assert got.shape == want.shape == (batch, length, 9)
        assert relative_error(got, want) <= 1e-5 and relative_error(got_loss, want_loss) <= 1e-5


def test_a_size_baked_from_a_dynamic_axis_is_refused(ort):
    """A Python int from .shape becomes a constant of the graph: with a dynamic axis the model would divide by
    the example's batch size at every batch size (a silently wrong mean), or gather the example's positions."""

    def mean_over_batch(x):
        return ops.sum(x, dim=0) / x.shape[0]  # the line the error must name

    line = mean_over_batch.__code__.co_firstlineno + 1
    with pytest.raises(NotExportableError) as e:
        tape.onnx.export(mean_over_batch, (np.ones((4, 3), np.float32),), None, input_names=["x"],
                         dynamic_axes={"x": {0: "batch"}})
    assert ("a constant the call built from a size (read first by op 'div') bakes a size that depends on dynamic "
            "axis 'batch' (x.shape[0] = 4)") in str(e.value)
    assert f"test_onnx.py:{line}" in str(e.value)
    # without the dynamic axis the same call exports (its sizes are fixed)
    assert tape.onnx.export(mean_over_batch, (np.ones((4, 3), np.float32),), None) is not None
    # the padded classifier's positions come from np.arange(tokens.shape[1]): a dynamic length is refused there
    padded = load_example("padded_classification")
    nn.manual_seed(0)
    model = padded.Encoder(10, d_model=16, num_heads=2, num_layers=1)
    model.eval()
    tokens, lengths, _ = padded.make_batch(np.random.default_rng(1), 4, 1, 10)
    tokens, lengths = tokens[:, :6], np.minimum(lengths, 6)  # room for a longer probe than the example
    with pytest.raises(NotExportableError,
                       match=r"read first by op 'embedding'\) bakes .*'length'.*padded_classification.py:\d+"):
        tape.onnx.export(model, (tokens, lengths), None, input_names=["tokens", "lengths"],
                         dynamic_axes={"tokens": {0: "batch", 1: "length"}, "lengths": {0: "batch"}})


SIZE_READS = {  # a size computed from the dynamic axis that one other size leaves unchanged
    "half": (lambda x: x[: x.shape[0] // 2], 4),  # 5 // 2 == 4 // 2: probing at batch 5 alone accepted it
    "even part": (lambda x: x[: x.shape[0] - x.shape[0] % 2], 4),
    "at most 4": (lambda x: x[: min(x.shape[0], 4)], 4),  # only smaller sizes show it
    "len": (lambda x: x[: len(x) // 3], 6),
}


@pytest.mark.parametrize("name", sorted(SIZE_READS))
def test_a_size_computed_from_a_dynamic_axis_is_refused_even_where_one_other_size_agrees(ort, name):
    """Before: the check re-exported at one other size only, so x[:x.shape[0] // 2] exported at batch 4 was
    accepted (batch 5 gives the same graph) and wrong at batch 8. Now it probes several sizes, larger and
    smaller."""
    fn, batch = SIZE_READS[name]
    with pytest.raises(NotExportableError, match=r"op 'getitem' bakes a size that depends on dynamic axis"):
        tape.onnx.export(fn, (np.ones((batch, 3), np.float32),), None, dynamic_axes={"input_0": [0]})


def test_tinygpt_loss_with_ignored_targets_runs_in_onnxruntime(ort, tmp_path):
    """The training loss too: reshape to (-1, vocab) and cross-entropy ignoring the -100 targets."""
    common = load_example("common")
    reverse = load_example("reverse")
    nn.manual_seed(0)
    model = common.TinyGPT(vocab_size=9, context=12, d_model=32, num_heads=4, num_layers=1)
    model.eval()
    _, tokens, targets = reverse.make_batch(np.random.default_rng(3), 4, 6, 8)
    assert (targets == -100).any()
    path = tmp_path / "loss.onnx"
    tape.onnx.export(model.loss, (tokens, targets), path, input_names=["tokens", "targets"])
    _, tokens, targets = reverse.make_batch(np.random.default_rng(4), 4, 6, 8)
    (got,) = session(ort, path).run(None, {"tokens": tokens, "targets": targets})
    with tape.no_grad():
        want = model.loss(tokens, targets).numpy()
    assert got.shape == () and relative_error(got, want) <= 1e-5


def test_padded_classifier_runs_in_onnxruntime_with_lengths_as_an_input(ort, tmp_path):
    padded = load_example("padded_classification")
    nn.manual_seed(0)
    model = padded.Encoder(10, d_model=32, num_heads=4, num_layers=2)
    rng = np.random.default_rng(1)
    train(model, lambda t, lengths, labels: ops.cross_entropy(model(t, lengths), labels),
          lambda step: padded.make_batch(rng, 16, 1, 10))
    tokens, lengths, _ = padded.make_batch(rng, 8, 1, 10)
    path = tmp_path / "classifier.onnx"
    tape.onnx.export(model, (tokens, lengths), path, input_names=["tokens", "lengths"],
                     dynamic_axes={"tokens": [0], "lengths": [0], "output_0": [0]})
    run = session(ort, path)
    for batch in (8, 3, 50):
        tokens, lengths, labels = padded.make_batch(np.random.default_rng(200 + batch), batch, 1, 10)
        (got,) = run.run(None, {"tokens": tokens, "lengths": lengths})
        with tape.no_grad():
            want = model(tokens, lengths).numpy()
        assert relative_error(got, want) <= 1e-5
        assert np.array_equal(np.argmax(got, -1), np.argmax(want, -1))
    # the lengths are read at run time: other lengths change the logits as they change minitape's
    short = np.ones_like(lengths)
    (got,) = run.run(None, {"tokens": tokens, "lengths": short})
    with tape.no_grad():
        want = model(tokens, short).numpy()
    assert relative_error(got, want) <= 1e-5


def test_meta_learning_regressor_runs_in_onnxruntime(ort, tmp_path):
    meta = load_example("meta_learning")
    nn.manual_seed(0)
    model = meta.make_regressor(hidden=16)
    rng = np.random.default_rng(2)

    def batch(step):
        x = rng.uniform(-5, 5, (32, 1)).astype(np.float32)
        return x, np.sin(x)

    train(model, lambda x, y: ops.mean((model(x) - y) * (model(x) - y)), batch)
    path = tmp_path / "regressor.onnx"
    tape.onnx.export(model, (batch(0)[0],), path, dynamic_axes={"input_0": [0], "output_0": [0]})
    x = np.linspace(-5, 5, 101, dtype=np.float32)[:, None]
    (got,) = session(ort, path).run(None, {"input_0": x})
    with tape.no_grad():
        want = model(x).numpy()
    assert relative_error(got, want) <= 1e-5


# -- what cannot be exported --------------------------------------------------------------------------------------
def test_an_op_without_lowering_names_the_op_and_the_call_site(ort):
    unlowered = next(op for op in tape.registered_ops() if lowering_of(op) is None and op.name == "cumprod")

    def fn(x):
        return unlowered(x * 2, dim=0)  # the line the error must name

    line = fn.__code__.co_firstlineno + 1
    with pytest.raises(NotExportableError) as e:
        tape.onnx.export(fn, (np.ones((2, 3), np.float32),), None)
    assert "op 'cumprod' is not exportable to ONNX: ONNX has no cumulative product" in str(e.value)
    assert f"test_onnx.py:{line}" in str(e.value)


def test_training_mode_dropout_is_refused(ort):
    layer = nn.Dropout(0.5)
    with pytest.raises(NotExportableError, match=r"op 'dropout' .*eval"):
        tape.onnx.export(layer, (np.ones((2, 3), np.float32),), None)
    layer.eval()
    assert tape.onnx.export(layer, (np.ones((2, 3), np.float32),), None) is not None


def test_an_input_read_as_a_constant_is_refused(ort):
    """An input the call turns into a numpy value would be baked in with its example value: refused at the read;
    one it ignores entirely is refused too (it would be an input the model never reads)."""
    with pytest.raises(NotExportableError, match=r"reads the values of input_1 .*numpy\(\)"):
        tape.onnx.export(lambda x, y: x * float(y.numpy().sum()), (np.ones(3, np.float32), np.ones(1)), None)
    with pytest.raises(NotExportableError, match=r"input\(s\) \['input_1'\]"):
        tape.onnx.export(lambda x, y: x * 2, (np.ones(3, np.float32), np.ones(1)), None)


READS = {"float": float, "int": int, "bool": bool, "item": lambda t: t.item(), "tolist": lambda t: t.tolist()[0],
         "numpy": lambda t: t.numpy()[0], "np.asarray": lambda t: np.asarray(t)[0]}


@pytest.mark.parametrize("how", sorted(READS))
def test_reading_a_value_computed_from_an_input_is_refused_naming_the_line(ort, how):
    """Before: float(t) / int(t) / bool(t) / .item() / .tolist() / .numpy() of a tensor computed from an input
    baked the example's number into the graph silently (torch's exporter warns, TracerWarning): the model gave
    that number's result for every other input. Refused, naming the read and the user's line; a read of a
    constant (a parameter) stays allowed."""
    read = READS[how]

    def scaled(x):
        return x * read(ops.amax(x, dim=0, keepdim=True) > 1.5)  # the line the error must name

    # the line that reads: the lambda's for a method call, the function's for float() / int() / bool()
    line = getattr(read, "__code__", scaled.__code__).co_firstlineno + (0 if hasattr(read, "__code__") else 1)
    with pytest.raises(NotExportableError) as e:
        tape.onnx.export(scaled, (np.array([1.0, 2.0], np.float32),), None)
    assert "reads the values of a tensor computed from input_0" in str(e.value), str(e.value)
    assert f"test_onnx.py:{line}" in str(e.value)
    w = tape.tensor(np.array([2.0], np.float32))
    model = tape.onnx.export(lambda x: x * read(w > 1.5), (np.array([1.0, 2.0], np.float32),), None)
    (got,) = session(ort, model.SerializeToString()).run(None, {"input_0": np.array([3.0, 4.0], np.float32)})
    np.testing.assert_array_equal(got, [3.0, 4.0])


def test_bad_arguments(ort):
    with pytest.raises(TypeError, match="example_inputs.*got int at position 0"):
        tape.onnx.export(lambda x: x, (3,), None)
    with pytest.raises(ValueError, match="dynamic_axes.*'nope'"):
        tape.onnx.export(lambda x: x * 1, (np.ones(2),), None, dynamic_axes={"nope": [0]})
    with pytest.raises(ValueError, match="input_names.*expected 1 distinct names"):
        tape.onnx.export(lambda x: x * 1, (np.ones(2),), None, input_names=["a", "b"])


# ONNX Runtime's ReduceMax / ReduceMin / ArgMax / ArgMin skip NaN; numpy's (and torch's) propagate it (the first NaN
# is the arg-extremum): every lowering over them must give minitape's NaN, never the extremum of the other entries
NAN_ROWS = np.array([[1.0, np.nan, 3.0], [np.nan, -1.0, np.nan], [0.5, 2.0, -3.0]])
NAN_CASES = [("amax", {"dim": 1}), ("amin", {"dim": 0}), ("max", {}), ("min", {"dim": 1}), ("max", {"dim": 0}),
             ("argmax", {"dim": 1}), ("argmin", {}), ("vector_norm", {"ord": float("inf"), "dim": 1}),
             ("norm", {"p": float("inf")}), ("logsumexp", {"dim": 1}), ("maximum", None), ("clamp_min", {}),
             ("normalize", {"p": float("inf")}), ("pairwise_distance", {"p": float("-inf")}),
             ("median_dim", {"dim": 1}),
             ("sort", {"dim": 1, "descending": True}), ("topk", {"k": 2}), ("adaptive_max_pool2d", {"output_size": 2}),
             ("adaptive_max_pool1d", {"output_size": 2}), ("max_pool1d", {"kernel_size": 2, "stride": 1}),
             ("max_pool2d", {"kernel_size": 2, "stride": 1}), ("max_pool3d", {"kernel_size": (1, 2, 2), "stride": 1})]
# the inputs where they are not the rows (or the rows and their transpose): unbatched (C, ...) for the poolings
NAN_INPUTS = {
    "clamp_min": (NAN_ROWS, np.array(0.0)),  # the bound is a tensor input (a number arrives as a 0-D constant)
    "adaptive_max_pool2d": (NAN_ROWS[None],),
    "max_pool2d": (NAN_ROWS[None],),
    "max_pool3d": (NAN_ROWS[None, None],),
}


@pytest.mark.parametrize("name, attrs", NAN_CASES, ids=lambda c: str(c))
def test_nan_propagates_as_in_minitape(ort, name, attrs):
    from tape.registry import Sample

    rows = NAN_ROWS
    inputs = (rows, rows.T.copy()) if attrs is None or name == "pairwise_distance" else (rows,)
    inputs = NAN_INPUTS.get(name, inputs)
    for dtype in (np.float32, np.float64):
        status, detail = check_sample(tape.get_op(name), Sample(inputs, attrs or {}, "NaN"), dtype)
        assert status == "equal", (dtype, detail)


# -- python -m tape export -----------------------------------------------------------------------------------------
EXPORT_RUNS = [  # (example, its training flags for a tiny checkpoint, held-out inputs of another batch size)
    ("reverse", ["--steps", "3", "--length", "4", "--letters", "5", "--eval-size", "10"],
     lambda rng: (rng.integers(0, 6, (5, 8)),)),
    ("padded_classification", ["--steps", "2", "--max-length", "6", "--eval-size", "10", "--batch", "8"],
     lambda rng: load_example("padded_classification").make_batch(rng, 5, 1, 6)[:2]),
    ("meta_learning", ["--steps", "2", "--meta-batch", "2", "--eval-tasks", "2", "--eval-steps", "2"],
     lambda rng: (rng.uniform(-5, 5, (5, 1)).astype(np.float32),)),
]


@pytest.mark.parametrize("example, flags, held_out", EXPORT_RUNS, ids=[r[0] for r in EXPORT_RUNS])
def test_the_export_command_writes_a_trained_checkpoint(ort, tmp_path, example, flags, held_out):
    """Train a tiny checkpoint with the example's --save, export it with `python -m tape export ...
    --dynamic-batch` (a subprocess, as a user runs it), run it in ONNX Runtime at another batch size and compare
    with the checkpoint loaded into minitape through the same hook."""
    import subprocess

    from tape.train import checkpoint

    module = load_example(example)
    saved, written = tmp_path / f"{example}.npz", tmp_path / f"{example}.onnx"
    module.main([*flags, "--quiet", "--save", str(saved)])
    env = {**os.environ, "PYTHONPATH": str(EXAMPLES.parent)}
    done = subprocess.run([sys.executable, "-m", "tape", "export", str(EXAMPLES / f"{example}.py"), str(saved),
                           "-o", str(written), "--dynamic-batch"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "batch dynamic" in done.stdout
    state = checkpoint.read(saved).model
    model, _, input_names, output_names = module.exported(state)
    model.load_state_dict(state)
    model.eval()
    inputs = held_out(np.random.default_rng(7))
    run = session(ort, written)
    assert [i.name for i in run.get_inputs()] == input_names and [o.name for o in run.get_outputs()] == output_names
    (got,) = run.run(None, dict(zip(input_names, inputs, strict=True)))
    with tape.no_grad():
        want = model(*inputs).numpy()
    assert got.shape == want.shape and got.shape[0] == 5
    assert relative_error(got, want) <= 1e-5


def test_the_export_command_names_a_missing_hook(tmp_path, capsys):
    from tape.tools import cli

    script = tmp_path / "no_hook.py"
    script.write_text("x = 1\n")
    assert cli.main(["export", str(script), "x.npz", "-o", str(tmp_path / "x.onnx")]) == 2
    assert "defines no exported(state) hook" in capsys.readouterr().err


# -- nested inputs and outputs, attributes given as inputs ----------------------------------------------------------
def _lstm():
    nn.manual_seed(0)
    lstm = nn.LSTM(3, 4, num_layers=2, batch_first=True)
    lstm.eval()
    return lstm


def test_nested_tuple_inputs_and_outputs_export_flattened(ort):
    """An LSTM's state (h, c) is one nested argument and its result (output, (h_n, c_n)) a nested one: before,
    the export refused both (TypeError); now they are flattened into graph inputs and outputs in order (torch's
    rule), and input_names / dynamic_axes name the flattened ones."""
    lstm, rng = _lstm(), np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    h, c = (rng.standard_normal((2, 2, 4)).astype(np.float32) for _ in range(2))
    model = tape.onnx.export(lstm, (x, (h, c)), None, input_names=["x", "h0", "c0"],
                             output_names=["y", "h_n", "c_n"], dynamic_axes={"x": [0], "h0": [1], "c0": [1]})
    run = session(ort, model.SerializeToString())
    assert [i.name for i in run.get_inputs()] == ["x", "h0", "c0"]
    for batch in (2, 5):
        x, h, c = (rng.standard_normal(s).astype(np.float32) for s in ((batch, 5, 3), (2, batch, 4), (2, batch, 4)))
        got = run.run(None, {"x": x, "h0": h, "c0": c})
        with tape.no_grad():
            y, (h_n, c_n) = lstm(x, (tape.tensor(h), tape.tensor(c)))
        for have, want in zip(got, (y, h_n, c_n), strict=True):
            assert relative_error(have, want.numpy()) <= 1e-5


@pytest.mark.parametrize("layer", ["LSTM", "GRUCell", "LSTMCell"])
def test_a_recurrent_layer_without_initial_state_exports_with_a_dynamic_batch(ort, layer):
    """Before: its zero initial state was a constant of the example's batch size, and the refusal blamed
    'getitem'. The zeros now follow the input's batch (through an op), so the dynamic batch exports."""
    rng = np.random.default_rng(1)
    nn.manual_seed(0)
    module = _lstm() if layer == "LSTM" else getattr(nn, layer)(3, 4)
    module.eval()
    shape = (2, 5, 3) if layer == "LSTM" else (2, 3)

    def first(x):
        out = module(x)
        return out[0] if isinstance(out, tuple) else out

    model = tape.onnx.export(first, (rng.standard_normal(shape).astype(np.float32),), None,
                             dynamic_axes={"input_0": [0]})
    run = session(ort, model.SerializeToString())
    for batch in (1, 2, 7):
        x = rng.standard_normal((batch, *shape[1:])).astype(np.float32)
        with tape.no_grad():
            want = first(x).numpy()
        assert relative_error(run.run(None, {"input_0": x})[0], want) <= 1e-5


def test_a_constant_built_from_a_dynamic_size_is_blamed_as_such():
    """A constant the call made from a size (np.zeros(x.shape)) is named as the culprit, with the op reading it,
    not the reading op alone (which looked like getitem's own fault)."""

    def fn(x):
        zeros = tape.tensor(np.zeros(x.shape[0], np.float32))  # the size baked into a constant
        return x[:, 0] + zeros

    with pytest.raises(NotExportableError, match=r"a constant the call built from a size .*read first by op 'add'"):
        tape.onnx.export(fn, (np.ones((4, 3), np.float32),), None, dynamic_axes={"input_0": [0]})


ARRAY_ATTRIBUTES = [(op, key) for op in LOWERED for key in sorted(
    {k for s in op.samples(np.random.default_rng(0)) for k, v in s.attrs.items() if isinstance(v, np.ndarray)})]


@pytest.mark.parametrize("op, key", ARRAY_ATTRIBUTES, ids=lambda v: getattr(v, "name", v))
def test_an_array_attribute_given_as_an_input_exports_or_is_refused_by_name(ort, op, key):
    """repeat_interleave's repeats (and every op's array attribute) passed as a graph input: the model equals the
    forward, or the export refuses naming the op -- before, repeats raised a TypeError from inside its lowering."""
    from tape.onnx import _sample_call

    for sample in op.samples(np.random.default_rng(0)):
        if not isinstance(sample.attrs.get(key), np.ndarray):
            continue
        flat, call = _sample_call(op, sample, None)

        def with_attribute(*tensors, call=call):
            return call(*tensors[:-1], **{key: tensors[-1]})  # the attribute: the last graph input

        arrays = [*flat, sample.attrs[key]]
        with tape.no_grad():
            want = with_attribute(*map(tape.tensor, arrays))
        try:
            model = tape.onnx.export(with_attribute, arrays, None)
        except NotExportableError as e:
            assert f"op '{op.name}'" in str(e), str(e)
            continue
        got = session(ort, model.SerializeToString()).run(None, {f"input_{k}": a for k, a in enumerate(arrays)})
        wants = want if isinstance(want, tuple) else (want,)
        for have, w in zip(got, wants, strict=True):
            np.testing.assert_allclose(have, w.numpy(), rtol=1e-5)
