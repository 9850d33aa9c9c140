"""Training graphs (tape.onnx.export(..., gradients=params)): the loss and the gradients of the examples' models
and an MLP, recorded as the backward rules run on Tensors, exported as one ONNX graph and run in ONNX Runtime,
equal eager's ``loss.backward()`` within float32 1e-5 / float64 1e-10 (relative to each gradient's largest
entry) -- at the example's inputs and parameters and at other ones fed to the same graph (nothing the data
decides is held as a constant); a graph that would hold such a constant is refused naming the op.
Skips without onnx / onnxruntime (fails instead with MINITAPE_REQUIRE_ONNX=1).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import numpy as np
import pytest
from paths import EXAMPLES

import ops
import tape
from tape import nn
from tape.onnx import NotExportableError

TOLERANCE = {np.float32: 1e-5, np.float64: 1e-10}


def load_example(name):
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module(name)


def run(ort, model_proto, feed):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model_proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feed)


def eager(loss_fn, params, *inputs):
    for p in params:
        p.grad = None
    loss = loss_fn(*inputs)
    loss.backward()
    return loss.numpy(), [p.grad.numpy() for p in params]


def assert_close(got, want, dtype, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype == dtype, (what, got.dtype, want.dtype)
    scale = max(float(np.max(np.abs(want), initial=0.0)), np.finfo(dtype).tiny)
    error = float(np.max(np.abs(got.astype(np.float64) - want), initial=0.0)) / scale
    assert error <= TOLERANCE[dtype], f"{what}: relative error {error:.3g} > {TOLERANCE[dtype]}"


def check_training_graph(ort, loss_fn, params, names, batches, dtype):
    """Export at batches[0]; every batch (and the parameters moved after the first) fed to the same graph."""
    model = tape.onnx.export(loss_fn, batches[0], None, gradients=params, input_names=names, output_names=["loss"])
    outputs = [o.name for o in model.graph.output]
    assert outputs[0] == "loss" and len(outputs) == 1 + len(params)
    assert all(name.startswith("grad_") for name in outputs[1:])
    read = {name for node in model.graph.node for name in node.input} | set(outputs)
    dead = [node.name for node in model.graph.node if not read.intersection(node.output)]
    assert not dead, f"nodes no output depends on (ONNX Runtime runs them all): {dead}"
    for k, batch in enumerate(batches):
        if k == 2:  # other parameter values: an optimizer step
            for p in params:
                p._data = (p._data * 0.9 + 0.01).astype(p.dtype)
        want_loss, want_grads = eager(loss_fn, params, *batch)
        feed = dict(zip(names, batch, strict=True))
        feed.update((i.name, p.numpy()) for i, p in zip(model.graph.input[len(names) :], params, strict=True))
        got = run(ort, model, feed)
        assert_close(got[0], want_loss, dtype, f"batch {k}: loss")
        for p_name, g, w in zip(outputs[1:], got[1:], want_grads, strict=True):
            assert_close(g, w, dtype, f"batch {k}: {p_name}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tinygpt_training_graph_equals_eager(ort, dtype):
    common = load_example("common")
    model = common.TinyGPT(31, 12, d_model=32, num_heads=4, num_layers=2, dtype=dtype, rng=np.random.default_rng(0))
    rng = np.random.default_rng(1)
    batches = []
    for _ in range(3):
        tokens = rng.integers(0, 31, (3, 12))
        targets = rng.integers(0, 31, (3, 12))
        targets[0, :4] = -100  # ignored targets: the mask is the data's, fed per call
        batches.append((tokens, targets))
    check_training_graph(ort, model.loss, list(model.parameters()), ["tokens", "targets"], batches, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mlp_training_graph_equals_eager(ort, dtype):
    nn.manual_seed(0)
    net = nn.Sequential(nn.Linear(20, 32, dtype=dtype), nn.ReLU(), nn.Linear(32, 32, dtype=dtype), nn.GELU(),
                        nn.Linear(32, 10, dtype=dtype))

    def loss_fn(x, y):
        return ops.cross_entropy(net(x), y)

    rng = np.random.default_rng(2)
    batches = [(rng.standard_normal((16, 20)).astype(dtype), rng.integers(0, 10, 16)) for _ in range(3)]
    check_training_graph(ort, loss_fn, list(net.parameters()), ["x", "y"], batches, dtype)


def test_the_training_graph_is_written_to_a_file_with_named_gradients(ort, tmp_path):
    import onnx

    nn.manual_seed(0)
    net = nn.Linear(4, 3)
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    path = tmp_path / "train.onnx"
    tape.onnx.export(lambda x: ops.mean(net(x) ** 2), (x,), path, input_names=["x"], gradients=net.parameters())
    model = onnx.load(str(path))
    assert [i.name for i in model.graph.input] == ["x", "weight", "bias"]
    assert [o.name for o in model.graph.output] == ["output_0", "grad_weight", "grad_bias"]
    loss, gw, gb = run(ort, model, {"x": x, "weight": net.weight.numpy(), "bias": net.bias.numpy()})
    want_loss, (want_w, want_b) = eager(lambda x: ops.mean(net(x) ** 2), [net.weight, net.bias], x)
    assert_close(loss, want_loss, np.float32, "loss")
    assert_close(gw, want_w, np.float32, "weight")
    assert_close(gb, want_b, np.float32, "bias")


def test_a_constant_computed_from_the_parameters_values_is_refused_naming_the_op(ort):
    w = tape.tensor(np.arange(1.0, 5.0), requires_grad=True)

    def loss_fn(x):
        frozen = tape.tensor(w._data * 2)  # the parameter's values read as a numpy array: a constant
        return ops.sum(ops.mul(w * x, frozen))

    with pytest.raises(NotExportableError, match="op 'mul' bakes values read from the inputs or parameters"):
        tape.onnx.export(loss_fn, (np.ones(4),), None, gradients=[w])


def test_gradients_must_be_parameters_and_the_loss_one_element(ort):
    w = tape.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(TypeError, match="argument 'gradients' expected leaf Tensors that require grad"):
        tape.onnx.export(lambda x: ops.sum(x * w), (np.ones(3),), None, gradients=[w * 2])
    with pytest.raises(ValueError, match="first output must be a floating loss of one element"):
        tape.onnx.export(lambda x: x * w, (np.ones(3),), None, gradients=[w])


def test_a_call_refusing_the_other_values_is_refused_not_left_unchecked(ort):
    w = tape.tensor(np.array([0.5, 1.0]), requires_grad=True)

    def loss_fn(x, t):  # x in [0, 1]: binary_cross_entropy's range check refuses x * 1.5 + 0.25 > 1
        return ops.binary_cross_entropy(x, t) * ops.sum(w * w)

    with pytest.raises(NotExportableError, match="lowered again at other input and parameter values"):
        tape.onnx.export(loss_fn, (np.array([0.6, 0.7]), np.array([1.0, 0.0])), None, gradients=[w])
