"""tape.compile(..., backend="onnxruntime"): a matched plan runs as one ONNX Runtime graph (forward, loss and the
gradients the backward rules record) and gives eager's loss and ``.grad`` within float32 1e-5 / float64 1e-10
(relative to each gradient's largest entry); what changes between calls is fed, never baked; a plan that cannot
be lowered runs the numpy plan with one warning naming the op. Skips without onnx / onnxruntime (fails instead
with MINITAPE_REQUIRE_ONNX=1).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings

import numpy as np
import pytest
from paths import EXAMPLES

import ops
import tape
from tape import nn, optim

TOLERANCE = {np.float32: 1e-5, np.float64: 1e-10}


pytestmark = pytest.mark.usefixtures("ort")  # the fixture is tests/conftest.py's


def relative(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want), initial=0.0) / max(np.max(np.abs(want), initial=0.0), 1e-300))


def twins(build):
    """The same model twice (eager, compiled), from the same seed."""
    nn.manual_seed(0)
    a = build()
    nn.manual_seed(0)
    return a, build()


def mlp(dtype):
    return nn.Sequential(nn.Linear(12, 24, dtype=dtype), nn.ReLU(), nn.Linear(24, 24, dtype=dtype), nn.GELU(),
                         nn.Linear(24, 5, dtype=dtype))


def check_step(eager_model, loss_eager, step, params_eager, params_compiled, batch, dtype):
    for p in params_eager + params_compiled:
        p.grad = None
    want = loss_eager(*batch)
    want.backward()
    loss, grads = step(*batch)
    assert loss.dtype == dtype and relative(loss.numpy(), want.numpy()) <= TOLERANCE[dtype]
    assert grads == [p.grad for p in params_compiled]
    for pe, pc in zip(params_eager, params_compiled, strict=True):
        assert (pe.grad is None) == (pc.grad is None)
        if pe.grad is not None:
            assert pc.grad.dtype == dtype and relative(pc.grad.numpy(), pe.grad.numpy()) <= TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_mlp_step_equals_eager_for_every_batch(dtype):
    eager, compiled = twins(lambda: mlp(dtype))
    step = tape.compile(lambda x, y: ops.cross_entropy(compiled(x), y), compiled.parameters(), backend="onnxruntime")
    rng = np.random.default_rng(0)
    for _ in range(4):  # other batch values every call: the same graph, this call's values
        batch = (rng.standard_normal((8, 12)).astype(dtype), rng.integers(0, 5, 8))
        check_step(eager, lambda x, y: ops.cross_entropy(eager(x), y), step, list(eager.parameters()),
                   list(compiled.parameters()), batch, dtype)
    assert step.records == 1 and step.onnx_runs == 3


def load_common():
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module("common")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_tiny_gpt_step_equals_eager(dtype):
    common = load_common()
    eager, compiled = twins(lambda: common.TinyGPT(31, 12, d_model=32, num_heads=4, num_layers=2, dtype=dtype))
    step = tape.compile(compiled.loss, compiled.parameters(), backend="onnxruntime")
    rng = np.random.default_rng(1)
    for _ in range(3):
        tokens, targets = rng.integers(0, 31, (3, 12)), rng.integers(0, 31, (3, 12))
        targets[0, :3] = -100
        check_step(eager, eager.loss, step, list(eager.parameters()), list(compiled.parameters()),
                   (tokens, targets), dtype)
    assert step.onnx_runs == 2


def test_thirty_adam_steps_of_the_tiny_gpt_track_eager():
    """float64: every parameter and the loss to 1e-9 relative after 30 Adam steps (measured 2.5e-12). (float32
    tracks to ~5e-7 except the attention key bias, whose exact gradient is 0 -- softmax ignores a shift of the
    keys -- so eager's and ONNX Runtime's gradients are rounding noise of opposite signs (3e-10 vs -3e-10) and
    Adam, which normalises the gradient, turns that into full steps of opposite sign: 2e-3 after 30 steps.)"""
    common = load_common()
    eager, compiled = twins(lambda: common.TinyGPT(31, 12, d_model=32, num_heads=4, num_layers=2, dtype=np.float64))
    opt_e, opt_c = optim.Adam(eager.parameters(), lr=1e-3), optim.Adam(compiled.parameters(), lr=1e-3)
    step = tape.compile(compiled.loss, compiled.parameters(), backend="onnxruntime")
    rng = np.random.default_rng(2)
    for _ in range(30):
        tokens, targets = rng.integers(0, 31, (3, 12)), rng.integers(0, 31, (3, 12))
        opt_e.zero_grad()
        want = eager.loss(tokens, targets)
        want.backward()
        opt_e.step()
        opt_c.zero_grad()
        loss, _ = step(tokens, targets)
        opt_c.step()
        assert relative(loss.numpy(), want.numpy()) <= 1e-9
    for pe, pc in zip(eager.parameters(), compiled.parameters(), strict=True):
        assert relative(pc.numpy(), pe.numpy()) <= 1e-9
    assert step.onnx_runs == 29


def test_an_op_without_a_lowering_runs_the_numpy_plan_and_warns_once_naming_it():
    w = tape.tensor(np.linspace(0.1, 0.9, 6), requires_grad=True)
    step = tape.compile(lambda x: ops.sum(ops.cumprod(w * x, dim=0)), [w], backend="onnxruntime")
    x = np.linspace(1.0, 2.0, 6)
    with pytest.warns(RuntimeWarning, match="numpy backend.*'cumprod'"):
        loss, (g,) = step(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once
        for k in range(2):
            w.grad = None
            loss, (g,) = step(x * (k + 2))
            w2 = tape.tensor(w.numpy(), requires_grad=True)
            want = ops.sum(ops.cumprod(w2 * (x * (k + 2)), dim=0))
            want.backward()
            assert np.array_equal(loss.numpy(), want.numpy()) and np.array_equal(g.numpy(), w2.grad.numpy())
    assert step.onnx_runs == 0 and step.replays == 2


def test_closed_over_arrays_and_python_numbers_are_fed_not_baked():
    w = tape.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    shift = np.array([1.0, 2.0, 3.0])
    scale = [2.0]

    def fn(x):
        return ops.sum((w * x + tape.tensor(shift)) ** 2) * scale[0]

    step = tape.compile(fn, [w], backend="onnxruntime")
    x = np.array([1.0, 1.5, -0.5])
    for k in range(4):
        shift[:] = shift * 1.5 - k  # refilled in place between calls
        scale[0] = 2.0 + k
        w.grad = None
        loss, (g,) = step(x)
        w2 = tape.tensor(w.numpy(), requires_grad=True)
        want = ops.sum((w2 * x + tape.tensor(shift)) ** 2) * scale[0]
        want.backward()
        assert relative(loss.numpy(), want.numpy()) <= 1e-12 and relative(g.numpy(), w2.grad.numpy()) <= 1e-12
    assert step.onnx_runs == 3



@pytest.mark.parametrize("kind", ["float", "bool"])
def test_attention_masks_are_read_in_the_graph_for_every_call(kind):
    """A mask fed per call decides the attention backward in the graph: a later call whose mask hides a whole row
    (float -inf, or a bool row of False) gives eager's gradients -- 0 for that row, not the NaN of a graph that kept
    the first call's rows-that-see-a-key (it did, silently, before the composite computed them with ops)."""
    rng = np.random.default_rng(0)
    q, k, v = (tape.tensor(rng.standard_normal((1, 2, 4, 8)), requires_grad=True) for _ in range(3))

    def fn(mask):
        return ops.sum(ops.scaled_dot_product_attention(q, k, v, attn_mask=tape.tensor(mask)) ** 2)

    step = tape.compile(fn, [q, k, v], backend="onnxruntime")
    open_mask = np.zeros((4, 4)) if kind == "float" else np.ones((4, 4), bool)
    hidden_row = open_mask.copy()
    hidden_row[2] = -np.inf if kind == "float" else False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to the numpy plan
        for mask in (open_mask, open_mask, hidden_row, open_mask, hidden_row):
            for p in (q, k, v):
                p.grad = None
            loss, grads = step(mask)
            got = [g.numpy().copy() for g in grads]
            for p in (q, k, v):
                p.grad = None
            want = fn(mask)
            want.backward()
            assert relative(loss.numpy(), want.numpy()) <= 1e-12
            for g, p in zip(got, (q, k, v)):
                assert not np.isnan(g).any() and relative(g, p.grad.numpy()) <= 1e-12
    assert step.onnx_runs == 4

def test_other_index_values_run_the_numpy_plan_and_equal_eager():
    w = tape.tensor(np.arange(1.0, 7.0), requires_grad=True)
    index = np.array([0, 2, 2, 5])

    def fn():
        return ops.sum(w[index] ** 2)

    step = tape.compile(fn, [w], backend="onnxruntime")
    for k, new in enumerate(([0, 2, 2, 5], [1, 1, 3, 4], [0, 2, 2, 5])):
        index[:] = new
        w.grad = None
        loss, (g,) = step()
        want = np.zeros(6)
        np.add.at(want, index, 2 * w.numpy()[index])
        assert loss.item() == pytest.approx(float(np.sum(w.numpy()[index] ** 2)), rel=1e-12)
        assert relative(g.numpy(), want) <= 1e-12, k
    assert step.onnx_runs == 1  # the graph holds the first index: the second runs the numpy plan, the third ORT


def test_a_value_read_inside_fn_runs_eagerly_with_eager_values():
    w = tape.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)

    def fn(x):
        s = ops.sum(w * x)
        return s * 2.0 if s.item() > 0 else s * -3.0

    step = tape.compile(fn, [w], backend="onnxruntime")
    for x, factor in ((np.array([1.0, 0.0, 1.0]), 2.0), (np.array([-1.0, 0.0, -1.0]), -3.0)):
        w.grad = None
        loss, (g,) = step(x)
        assert loss.item() == pytest.approx(factor * float(np.dot(w.numpy(), x)))
        assert np.allclose(g.numpy(), factor * x)


def test_a_parameter_the_loss_does_not_use_keeps_no_grad_as_in_eager():
    used = tape.tensor(np.ones(3), requires_grad=True)
    unused = tape.tensor(np.ones(2), requires_grad=True)
    step = tape.compile(lambda x: ops.sum(used * x), [used, unused], backend="onnxruntime")
    for _ in range(2):
        loss, (g_used, g_unused) = step(np.arange(3.0))
    assert g_unused is None and unused.grad is None and np.array_equal(g_used.numpy(), 2 * np.arange(3.0))
    assert step.onnx_runs == 1


def test_the_default_backend_is_numpy_and_others_are_refused(monkeypatch):
    assert tape.compile(lambda: None).backend == "numpy"
    with pytest.raises(ValueError, match="argument 'backend' expected 'numpy' or 'onnxruntime'"):
        tape.compile(lambda: None, backend="tvm")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[onnx\]'"):
        tape.compile(lambda: None, backend="onnxruntime")


def test_zero_dimensional_parameters_and_constants_keep_their_shape():
    w = tape.tensor(np.array(1.5), requires_grad=True)
    weight = np.random.default_rng(1).standard_normal(())  # a numpy scalar: a 0-D constant fed every call
    step = tape.compile(lambda: sum(ops.sum(a * weight) for a in (ops.neg(w),)), [w], backend="onnxruntime")
    for _ in range(2):
        w.grad = None
        loss, (g,) = step()
        assert loss.shape == () and g.shape == () and g.item() == pytest.approx(-float(weight), rel=1e-12)
    assert step.onnx_runs == 1


def _registry_cases():
    """(op, sample) for every op with a lowering, samples and a differentiable input: its first two samples."""
    from tape.registry import Grad

    cases = []
    for op in tape.registered_ops():
        if tape.onnx.lowering_of(op) is None or op.samples is None or Grad.RULE not in op.input_states:
            continue
        cases += [(op, s) for s in list(op.samples(np.random.default_rng(0)))[:2]]
    return cases


def test_every_lowered_op_with_a_loss_path_compiles_to_eager_values():
    """Property sweep: loss = sum_k sum(out_k * w_k) of each op's sample (float64), compiled with ONNX Runtime,
    called twice: the ORT graph gives eager's loss (to 1e-10 of the sum of its terms' magnitudes) and gradients (to
    1e-10 of the largest entry), or the
    plan runs on numpy (a backward that cannot be lowered: warned) and gives them bit for bit. At least 200 ops must
    run through ONNX Runtime (measured: 219 of 281 ops that compile; the rest fall back, each warned with why)."""
    from tape.onnx import _sample_call

    through_ort, fell_back = set(), set()
    for op, sample in _registry_cases():
        flat, call = _sample_call(op, sample, np.float64)
        if any(np.asarray(x).size == 0 for x in flat) or not any(np.asarray(x).dtype.kind == "f" for x in flat):
            continue
        leaves = [tape.tensor(x, requires_grad=True) if np.asarray(x).dtype.kind == "f" else x for x in flat]
        params = [t for t in leaves if isinstance(t, tape.Tensor)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                outs = call(*leaves)
            except Exception:  # the sample is for another dtype (a cast's)
                continue
        outs = outs if isinstance(outs, tuple | list) else (outs,)
        if not all(o.dtype.kind == "f" and o.requires_grad for o in outs):
            continue
        weights = [np.asarray(np.random.default_rng(1).standard_normal(o.shape), o.dtype) for o in outs]

        def fn(call=call, leaves=leaves, weights=weights):
            got = call(*leaves)
            got = got if isinstance(got, tuple | list) else (got,)
            return sum(ops.sum(o * w) for o, w in zip(got, weights, strict=True))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for p in params:
                p.grad = None
            want = fn()
            want.backward()
            wanted = [None if p.grad is None else p.grad.numpy() for p in params]
            step = tape.compile(fn, params, backend="onnxruntime")
            for _ in range(2):
                for p in params:
                    p.grad = None
                loss, grads = step()
        exact = step.onnx_runs == 0
        (fell_back if exact else through_ort).add(op.name)
        where = f"{op.name} ({sample.label})"
        tolerance = 0.0 if exact else 1e-10
        terms = sum(float(np.sum(np.abs(o.numpy() * w))) for o, w in zip(outs, weights, strict=True))
        assert abs(loss.item() - want.item()) <= tolerance * max(terms, 1e-300), where  # the sum's own conditioning
        for g, w in zip(grads, wanted, strict=True):
            assert (g is None) == (w is None), where
            if w is not None:
                finite = np.isfinite(w)
                assert np.array_equal(np.isfinite(g.numpy()), finite), where
                assert relative(g.numpy()[finite], w[finite]) <= tolerance, where
    assert len(through_ort) >= 200, (len(through_ort), sorted(fell_back))


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_classification_losses_with_class_weights_run_through_onnx_runtime(loss):
    """cross_entropy with class weights and nll_loss (over log_softmax: PyTorch's common pair), an ignored target
    among them: the backward reads the targets and the weights in the graph (fed every call), so the step runs
    through ONNX Runtime and gives eager's gradients for every batch -- it ran the numpy plan (their rules read
    the targets and weights as arrays, which the export refuses)."""
    rng = np.random.default_rng(3)
    w = tape.tensor(rng.standard_normal((6, 4)), requires_grad=True)
    class_weights = np.array([0.5, 2.0, 1.0, 3.0])

    def fn(x, y):
        logits = x @ w
        if loss == "nll_loss":
            return ops.nll_loss(ops.log_softmax(logits, 1), y, weight=tape.tensor(class_weights), ignore_index=1)
        return ops.cross_entropy(logits, y, weight=tape.tensor(class_weights), ignore_index=1)

    step = tape.compile(fn, [w], backend="onnxruntime")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to the numpy plan
        for k in range(3):
            x, y = rng.standard_normal((5, 6)), rng.integers(0, 4, 5)
            class_weights[:] = rng.uniform(0.5, 2.0, 4)  # refilled between calls: fed, not baked
            w.grad = None
            loss_value, (g,) = step(x, y)
            w.grad = None
            eager = fn(x, y)
            eager.backward()
            assert relative(loss_value.numpy(), eager.numpy()) <= 1e-12, k
            assert relative(g.numpy(), w.grad.numpy()) <= 1e-12, k
    assert step.onnx_runs == 2


def test_dropout_masks_are_drawn_where_fn_calls_dropout_and_fed_every_call():
    """dropout's seed is drawn where fn calls it (fn draws from the same generator before and after), and its mask
    -- forward and backward -- is a graph input made from this call's seed: every call gives eager's loss and
    gradients, a new mask each time, through ONNX Runtime."""
    rng = np.random.default_rng(0)
    w = tape.tensor(rng.standard_normal((6, 8)), requires_grad=True)

    def fn(x):
        h = ops.dropout(x @ w, 0.3)
        return ops.sum(ops.tanh(h) * tape.randn(8, dtype=x.dtype))

    step = tape.compile(fn, [w], backend="onnxruntime")
    losses = set()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback
        for seed in range(5):
            x = rng.standard_normal((4, 6))
            tape.manual_seed(seed)
            w.grad = None
            loss, (g,) = step(x)
            got, after = g.numpy().copy(), tape.randn(1).item()
            tape.manual_seed(seed)
            w.grad = None
            want = fn(x)
            want.backward()
            assert relative(loss.numpy(), want.numpy()) <= 1e-12 and relative(got, w.grad.numpy()) <= 1e-12
            assert after == tape.randn(1).item()  # the generator left where eager leaves it
            losses.add(loss.item())
    assert step.onnx_runs == 4 and len(losses) == 5


def test_a_lowering_holding_a_drawn_value_is_refused():
    """A lowering that bakes what its call drew (here a test op's seed, as a constant) would replay the first
    call's draw: the plan is lowered again with other draws, the graph changes, and it runs the numpy plan
    (warned), with eager's numbers."""
    from tape.compile_guards import random_draw
    from tape.onnx import lowering

    def forward(x, *, rng=None):
        seed = rng if isinstance(rng, int) else int(tape.random.as_generator("t", rng).integers(0, 2**31))
        return x * (1.0 + seed % 5), {"rng": seed}

    op = tape.defop("compiletest_baked_draw", family="compiletest", inputs=("x",), forward=forward,
                    vjps=(lambda g, ans, x, rng: g * (1.0 + rng % 5),), returns_aux=True,
                    second_order=tape.Grad.NOT_DIFFERENTIABLE)
    try:
        random_draw(op, ("rng",), lambda a: {} if isinstance(a.get("rng"), int) else {
            "rng": int(tape.random.as_generator("t", a.get("rng")).integers(0, 2**31))})
        lowering(op, lambda g, rec, x: g.op("Mul", x, g.const(np.asarray(1.0 + rec.attributes["rng"] % 5))))
        w = tape.tensor(np.ones(3), requires_grad=True)
        step = tape.compile(lambda: ops.sum(op(w) * w), [w], backend="onnxruntime")
        with pytest.warns(RuntimeWarning, match="holds a value the call drew"):
            for seed in range(3):
                tape.manual_seed(seed)
                w.grad = None
                loss, (g,) = step()
                tape.manual_seed(seed)
                w2 = tape.tensor(np.ones(3), requires_grad=True)
                want = ops.sum(op(w2) * w2)
                want.backward()
                assert loss.item() == want.item() and np.array_equal(g.numpy(), w2.grad.numpy())
        assert step.onnx_runs == 0 and step.replays == 2
    finally:
        tape.unregister_op("compiletest_baked_draw")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_tiny_gpt_with_dropout_trains_through_onnx_runtime_as_eager(dtype):
    """TinyGPT with dropout (nn.Dropout and attention's dropout_p), each twin drawing from its own generator: every
    compiled call runs through ONNX Runtime -- the masks made from this call's seeds, fed -- and gives eager's loss
    and gradients (it ran eagerly every call before, then attention's dropout had no lowering)."""
    common = load_common()
    eager, compiled = twins(lambda: common.TinyGPT(31, 12, d_model=32, num_heads=4, num_layers=2, dropout=0.2,
                                                   dtype=dtype, rng=np.random.default_rng(5)))
    for model in (eager, compiled):
        generator = np.random.default_rng(11)  # one per twin: the same draws on both sides
        for m in model.modules():
            if hasattr(m, "rng"):
                m.rng = generator
    step = tape.compile(compiled.loss, compiled.parameters(), backend="onnxruntime")
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback
        for _ in range(4):
            tokens, targets = rng.integers(0, 31, (3, 12)), rng.integers(0, 31, (3, 12))
            check_step(eager, eager.loss, step, list(eager.parameters()), list(compiled.parameters()),
                       (tokens, targets), dtype)
    assert step.onnx_runs == 3


def test_key_padding_lengths_are_fed_every_call():
    """Attention's key_padding_lengths (an integer attribute) reach the graph only as per-run inputs -- its lowering
    and its create_graph composite (attention_key_mask) make the mask from each call's lengths -- so other lengths
    every batch run through ONNX Runtime with eager's numbers (they ran the numpy plan, warned). Two attention calls
    whose lengths were equal at build but differ later cannot be told apart in the graph: that call runs the numpy
    plan, exact."""
    rng = np.random.default_rng(0)
    q, k, v = (tape.tensor(rng.standard_normal((3, 2, 5, 4)), requires_grad=True) for _ in range(3))
    first, second = np.array([5, 2, 3]), np.array([5, 2, 3])

    def fn():
        a = ops.scaled_dot_product_attention(q, k, v, key_padding_lengths=first)
        b = ops.scaled_dot_product_attention(a, k, v, key_padding_lengths=second)
        return ops.sum(b * b)

    step = tape.compile(fn, [q, k, v], backend="onnxruntime")
    runs = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback while the two lengths agree
        for lengths in ([5, 2, 3], [1, 5, 4], [3, 3, 0], [2, 4, 5]):
            first[:], second[:] = lengths, lengths
            for p in (q, k, v):
                p.grad = None
            loss, grads = step()
            got = [g.numpy().copy() for g in grads]
            runs += 1
            for p in (q, k, v):
                p.grad = None
            want = fn()
            want.backward()
            assert relative(loss.numpy(), want.numpy()) <= 1e-12
            for g, p in zip(got, (q, k, v)):
                assert relative(g, p.grad.numpy()) <= 1e-12
    assert step.onnx_runs == runs - 1
    second[:] = [4, 4, 4]  # equal to first at build, not now: which one feeds which mask is unknown
    for p in (q, k, v):
        p.grad = None
    with pytest.warns(RuntimeWarning, match="numpy plan .*equal when the ONNX graph was built"):
        loss, grads = step()
    got = [g.numpy().copy() for g in grads]
    for p in (q, k, v):
        p.grad = None
    want = fn()
    want.backward()
    assert loss.item() == want.item() and all(np.array_equal(g, p.grad.numpy()) for g, p in zip(got, (q, k, v)))
    assert step.onnx_runs == runs - 1  # the numpy plan ran
