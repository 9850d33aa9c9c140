"""tape.compile: a compiled step gives eager's losses, gradients and parameters bit for bit (the three examples'
models with their optimizers, a 200-op chain, ops with several outputs, sequences and attributes read from the
batch); the cache guard re-records or raises; what a plan cannot follow raises CompileError. No timing here:
benchmarks/bench_compile.py measures the speed."""

import sys
import warnings

import numpy as np
import pytest
import threadpoolctl
from paths import EXAMPLES

import ops
import tape
from tape import nn, optim
from tape.compile import CompileError, compile

sys.path.insert(0, str(EXAMPLES))

import char_lm  # noqa: E402
import common  # noqa: E402
import padded_classification  # noqa: E402
import reverse  # noqa: E402

STEPS = 50


@pytest.fixture(autouse=True, scope="module")
def one_blas_thread():
    """As the examples run (common.py): small matrices, one BLAS thread; no spinning threads on a busy machine."""
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        yield


def assert_same(eager, compiled, what):
    for k, (a, b) in enumerate(zip(eager, compiled)):
        a, b = (None if x is None else np.asarray(x.numpy() if isinstance(x, tape.Tensor) else x) for x in (a, b))
        assert (a is None) == (b is None), f"{what} {k}: one side is None"
        if a is not None:
            assert a.dtype == b.dtype and np.array_equal(a, b), f"{what} {k} differs by {np.max(np.abs(a - b))}"


def train_both(build, loss_fn, batches, clip=1.0):
    """The same model trained eagerly and compiled (each with its optimizer and schedule, gradients clipped as the
    examples do): loss, every gradient and every parameter must be identical after each step."""
    (model_a, opt_a, sched_a), (model_b, opt_b, sched_b) = build(), build()
    params_a, params_b = list(model_a.parameters()), list(model_b.parameters())
    step = compile(lambda *batch: loss_fn(model_b, *batch), params_b)
    for batch in batches:
        opt_a.zero_grad()
        loss_a = loss_fn(model_a, *batch)
        loss_a.backward()
        opt_b.zero_grad()
        loss_b, grads = step(*batch)
        assert loss_b.item() == loss_a.item()
        assert all(g is p.grad for g, p in zip(grads, params_b))
        assert_same([p.grad for p in params_a], grads, "gradient")
        for opt, sched, params in ((opt_a, sched_a, params_a), (opt_b, sched_b, params_b)):
            optim.clip_grad_norm_(params, clip)
            opt.step()
            sched.step()
        assert_same(params_a, params_b, "parameter")
    assert step.records >= 1 and step.records + step.replays == len(batches)
    return step


def next_token_loss(model, tokens, targets):
    logits = model(tokens)
    return ops.cross_entropy(ops.reshape(logits, (-1, logits.shape[-1])), ops.reshape(targets, (-1,)))


def gpt_builder(vocab, context, dropout=0.0):
    def build():
        nn.manual_seed(0)
        # its own generator: the eager and the compiled model draw the same dropout masks (the default one is shared)
        model = common.TinyGPT(
            vocab, context, d_model=32, num_heads=4, num_layers=2, dropout=dropout, rng=tape.Generator(0)
        )
        optimizer = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
        return model, optimizer, optim.WarmupCosineLR(optimizer, warmup_steps=5, total_steps=STEPS)

    return build


def test_reverse_example_model():
    rng = np.random.default_rng(0)
    batches = [reverse.make_batch(rng, 16, 5, 8)[1:] for _ in range(STEPS)]
    assert train_both(gpt_builder(9, 10), next_token_loss, batches).replays == STEPS - 1


def test_char_lm_example_model_with_dropout():
    with open(char_lm.TEXT, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    ids = np.array([chars.index(c) for c in text[:4000]])
    rng = np.random.default_rng(0)
    windows = [ids[rng.integers(0, len(ids) - 17, size=8)[:, None] + np.arange(17)] for _ in range(STEPS)]
    train_both(gpt_builder(len(chars), 16, dropout=0.1), next_token_loss, [(w[:, :-1], w[:, 1:]) for w in windows])


def test_padded_classification_example_model():
    """The key-padding lengths are an attribute of attention read from the step's argument on every call."""

    def build():
        nn.manual_seed(0)
        model = padded_classification.Encoder(12, d_model=32)
        optimizer = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
        return model, optimizer, optim.WarmupCosineLR(optimizer, warmup_steps=5, total_steps=STEPS)

    rng = np.random.default_rng(0)
    batches = [padded_classification.make_batch(rng, 16, 1, 12) for _ in range(STEPS)]
    train_both(build, lambda model, tokens, lengths, labels: ops.cross_entropy(model(tokens, lengths), labels), batches)


def chain(x, n_ops=200):
    """benchmarks/bench_overhead.py's chain: tanh(y * 1.01 + 0.1), then y * y, 50 times; summed."""
    y = x
    for _ in range(n_ops // 4):
        y = ops.tanh(ops.add(ops.mul(y, 1.01), 0.1))
        y = ops.mul(y, y)
    return y.sum()


def test_200_op_chain():
    data = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    x_a, x_b = tape.tensor(data, requires_grad=True), tape.tensor(data, requires_grad=True)
    opt_a, opt_b = optim.SGD([x_a], lr=0.5), optim.SGD([x_b], lr=0.5)
    step = compile(lambda: chain(x_b), [x_b])
    for _ in range(10):
        opt_a.zero_grad()
        loss_a = chain(x_a)
        loss_a.backward()
        opt_a.step()
        opt_b.zero_grad()
        loss_b, (grad,) = step()
        opt_b.step()
        assert loss_b.item() == loss_a.item()
        assert_same([x_a.grad, x_a], [grad, x_b], "chain")
    assert (step.records, step.replays) == (1, 9)
    assert "(201 ops)" in repr(step)


def test_gradients_accumulate_like_backward():
    """Without zero_grad the gradient lands on the one already there, in the order backward() adds it."""
    w_a, w_b = (tape.tensor(np.linspace(-1, 1, 6, dtype=np.float32), requires_grad=True) for _ in range(2))
    fn = lambda w, x: ops.sum(ops.tanh(w * x) * w)  # noqa: E731
    step = compile(lambda x: fn(w_b, x), [w_b])
    for k in range(5):
        x = np.full(6, 0.3 * k, np.float32)
        fn(w_a, x).backward()
        step(x)
        assert_same([w_a.grad], [w_b.grad], "accumulated gradient")


def test_several_outputs_sequences_and_attributes_from_the_batch():
    """topk (two outputs, one without gradient), concat (a sequence), einsum (*operands), getitem whose index is
    a step argument (an attribute read from the batch on every call) and a requires-grad argument."""
    rng = np.random.default_rng(1)
    w_a = tape.tensor(rng.standard_normal((5, 6)).astype(np.float32), requires_grad=True)
    w_b = tape.tensor(w_a.numpy(), requires_grad=True)

    def fn(w, x, rows, bias):
        values, _ = ops.topk(ops.tanh(ops.matmul(x, w)), 3)
        both = ops.concat([values, ops.mul(values, 2.0) + bias], 1)
        picked = both[rows]
        return ops.mean(ops.einsum("ij,ij->i", picked, picked)) + ops.sum(both[:, 0])

    step = compile(lambda x, rows, bias: fn(w_b, x, rows, bias), [w_b])
    for _ in range(5):
        x = rng.standard_normal((4, 5)).astype(np.float32)
        rows = rng.integers(0, 4, size=3)
        bias_a, bias_b = (tape.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True) for _ in range(2))
        bias_b.data = bias_a.numpy()
        w_a.grad = None
        loss_a = fn(w_a, x, rows, bias_a)
        loss_a.backward()
        w_b.grad = None
        loss_b, _ = step(x, rows, bias_b)
        assert loss_b.item() == loss_a.item()
        assert_same([w_a.grad, bias_a.grad], [w_b.grad, bias_b.grad], "gradient")
    assert step.replays == 4


# -- randomness --------------------------------------------------------------------------------------------------
def test_dropout_draws_a_fresh_mask_each_replay_as_eager_does():
    x = np.ones((4, 8), np.float32)
    w_a, w_b = (tape.tensor(np.linspace(0.5, 1.5, 8, dtype=np.float32), requires_grad=True) for _ in range(2))
    fn = lambda w, rng: ops.sum(ops.dropout(w * x, p=0.5, rng=rng) * w)  # noqa: E731
    gen_a, gen_b = np.random.default_rng(7), np.random.default_rng(7)
    step = compile(lambda: fn(w_b, gen_b), [w_b])
    losses = []
    for _ in range(6):
        w_a.grad = w_b.grad = None
        loss_a = fn(w_a, gen_a)
        loss_a.backward()
        loss_b, _ = step()
        assert loss_b.item() == loss_a.item()
        assert_same([w_a.grad], [w_b.grad], "gradient")
        losses.append(loss_b.item())
    assert len(set(losses)) == len(losses)  # a new mask on every call, replays included


def test_an_int_seed_is_a_constant_as_in_eager():
    w = tape.tensor(np.ones(16, np.float32), requires_grad=True)
    step = compile(lambda: ops.sum(ops.dropout(w, p=0.5, rng=3)), [w])
    assert len({step()[0].item() for _ in range(4)}) == 1


# -- the guard ---------------------------------------------------------------------------------------------------
def test_a_new_shape_or_dtype_records_a_new_plan():
    fn = lambda x: ops.sum(ops.tanh(x) * x)  # noqa: E731
    step = compile(fn)
    shapes = [((4, 4), np.float32)] * 3 + [((3, 5), np.float32)] * 3 + [((4, 4), np.float64)] * 3
    for shape, dtype in shapes + [((4, 4), np.float32)]:
        x = np.random.default_rng(len(shape)).standard_normal(shape).astype(dtype)
        loss, _ = step(x)
        assert loss.dtype == dtype and loss.item() == fn(tape.tensor(x)).item()
    assert (step.records, step.replays) == (3, 7)


def test_recompile_false_raises_saying_what_differs():
    step = compile(lambda x: ops.sum(x * x), recompile=False)
    step(np.ones((4, 4), np.float32))
    with pytest.raises(CompileError, match=r"op #0 'sum' fits no recorded plan \(recompile=False\): its tensor inputs"):
        step(np.ones((4, 4), np.float64))
    with pytest.raises(CompileError, match=r"op #0 'sum' fits no recorded plan"):
        step(np.ones((2, 4), np.float32))


def test_a_python_number_argument_is_read_on_every_call():
    w = tape.tensor(np.arange(3, dtype=np.float32), requires_grad=True)
    fn = lambda scale: ops.sum(w * scale)  # noqa: E731
    step = compile(fn, [w])
    for scale in (2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 2.0):
        w.grad = None
        loss, (grad,) = step(scale)
        assert loss.item() == 3 * scale and np.array_equal(grad.numpy(), np.full(3, scale, np.float32))
    assert (step.records, step.replays) == (1, 6)


def test_a_parameter_changed_behind_the_plan_is_read_afresh_or_re_recorded():
    w = tape.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    step = compile(lambda: ops.sum(w * w), [w])
    for _ in range(3):
        step()
    w.grad = None
    w.data = np.full((2, 3), 2.0, np.float32)  # what an optimizer does: read afresh, same plan
    assert step()[0].item() == 24.0 and step.replays == 3
    w.grad = None
    w._data = np.ones((4,), np.float32)  # the public setter refuses a new shape; the plan must not trust it either
    loss, (grad,) = step()
    assert loss.item() == 4.0 and grad.shape == (4,) and step.records == 2
    w.requires_grad = False  # every parameter frozen: the plan is not used, and backward() raises as in eager
    w.grad = None
    with pytest.raises(RuntimeError, match="backward: this tensor does not require grad"):
        step()
    assert step.replays == 3 and w.grad is None


def test_recompile_false_names_the_changed_parameter():
    w = tape.tensor(np.ones(3, np.float32), requires_grad=True, name="w")
    step = compile(lambda: ops.sum(w * w), [w], recompile=False)
    step(), step(), step()
    w.requires_grad = False
    with pytest.raises(CompileError, match=r"op #0 'mul' fits no recorded plan .*its tensor inputs differ"):
        step()


def test_each_branch_of_python_control_flow_gets_its_plan():
    state = {"relu": True}
    w = tape.tensor(np.linspace(-1, 1, 5, dtype=np.float32), requires_grad=True)
    fn = lambda: ops.sum(ops.relu(w) if state["relu"] else ops.tanh(w))  # noqa: E731
    step = compile(fn, [w])
    for flag in (True, False) * 4:
        state["relu"] = flag
        w.grad = None
        loss, (grad,) = step()
        w.grad = None
        fn().backward()
        assert loss.item() == fn().item() and np.array_equal(grad.numpy(), w.grad.numpy())
    assert (step.records, step.replays) == (2, 6)


def test_at_most_max_plans_are_kept():
    step = compile(lambda x: ops.sum(x), max_plans=2)
    for n in (1, 2, 3, 1):
        step(np.ones(n, np.float32)), step(np.ones(n, np.float32))
    assert step.records == 4 and len(step._plans) == 2


def test_an_outer_tape_sees_the_ops_of_an_eager_call():
    w = tape.tensor(np.ones(3, np.float32), requires_grad=True)
    step = compile(lambda: ops.sum(ops.exp(w)), [w])
    step(), step(), step()
    with tape.ExecutionTape() as recorded:
        step()
    assert [r.op_name for r in recorded.operations] == ["exp", "sum"] and step.replays == 2


# -- what fn does with values: eager's result ------------------------------------------------------------------
@pytest.mark.parametrize(
    "read",
    [
        lambda t: ops.sum(tape.tensor(np.asarray(t) * 1.0)),  # the examples' np.asarray(targets)
        lambda t: ops.sum(t) * t.sum().item(),
        lambda t: ops.sum(t) if t.sum() > 0 else ops.sum(-t),
        lambda t: ops.sum(t) + float(np.argmax(t)),
        lambda t: ops.sum(t.detach().numpy()),
    ],
)
def test_reading_values_runs_eagerly_with_eagers_result(read):
    step = compile(read)
    for k in range(3):
        x = np.full(3, k - 1.0, np.float32)
        assert step(tape.tensor(x))[0].item() == read(tape.tensor(x)).item()


def test_numpy_randomness_and_control_flow_inside_fn_run_as_in_eager():
    rng_a, rng_b = np.random.default_rng(0), np.random.default_rng(0)
    fn = lambda x, rng: ops.sum(ops.add(x, rng.standard_normal(3).astype(np.float32)))  # noqa: E731
    step = compile(lambda x: fn(x, rng_b))
    for _ in range(4):
        assert step(np.ones(3, np.float32))[0].item() == fn(np.ones(3, np.float32), rng_a).item()
    assert step.replays == 3


def test_a_boolean_mask_index_is_read_by_value():
    fn = lambda x, mask: ops.sum(x[mask])  # noqa: E731
    step = compile(fn)
    x = np.arange(4, dtype=np.float32)
    for mask in ([True, False, True, False], [True, False, True, False], [True, True, True, False]):
        assert step(x, np.array(mask))[0].item() == fn(tape.tensor(x), np.array(mask)).item()
    assert (step.records, step.replays) == (2, 1)


def test_an_output_shape_that_differs_from_the_plan_gives_eagers_result_when_fn_did_not_read_it():
    fn = lambda x, repeats: ops.sum(ops.repeat_interleave(x, repeats) ** 2)  # noqa: E731
    step = compile(fn)
    x = tape.tensor(np.arange(3, dtype=np.float32), requires_grad=True)
    for repeats in ([1, 2, 1], [2, 1, 1], [2, 2, 2], [3, 0, 1]):
        loss, _ = step(x, np.array(repeats))
        grad = x.grad.numpy().copy()
        x.grad = None
        fn(x, np.array(repeats)).backward()
        assert loss.item() == fn(x, np.array(repeats)).item() and np.array_equal(grad, x.grad.numpy())
        x.grad = None
    assert (step.records, step.replays) == (1, 3)  # the plan ran with the data's shapes: values from the data


@pytest.mark.parametrize(
    "read", [lambda y: y.shape[0], lambda y: y.size(0), lambda y: y.numel(), lambda y: y.ndim * y.dim() * 4]
)
def test_an_output_shape_fn_read_from_the_plan_is_refused_when_the_data_gives_another(read):
    def fn(x, repeats):
        y = ops.repeat_interleave(x, repeats)
        return ops.sum(y) * float(read(y))  # fn reads the planned shape

    step = compile(fn)
    x = np.arange(3, dtype=np.float32)
    step(x, np.array([1, 2, 1])), step(x, np.array([2, 1, 1]))
    with pytest.raises(CompileError, match="'repeat_interleave' gave output"):
        step(x, np.array([2, 2, 2]))
    replays = step.replays
    for repeats in ([2, 2, 2], [1, 1, 1], [3, 1, 2], [1, 1, 1]):  # eager from then on: no plan, no other error
        assert step(x, np.array(repeats))[0].item() == fn(tape.tensor(x), np.array(repeats)).item()
    assert step.replays == replays and "0 plan(s)" in repr(step)


def test_len_reads_the_values_so_the_datas_shape():
    def fn(x, repeats):
        y = ops.repeat_interleave(x, repeats)
        return ops.sum(y) * float(len(y))  # len reads y's values: the trace runs eagerly from there

    step = compile(fn)
    x = np.arange(3, dtype=np.float32)
    for repeats in ([1, 2, 1], [2, 1, 1], [2, 2, 2]):
        assert step(x, np.array(repeats))[0].item() == fn(tape.tensor(x), np.array(repeats)).item()


def test_a_planned_shape_read_before_the_trace_turned_eager_is_refused():
    """fn reads a data-dependent output's planned shape, then a value (the trace runs eagerly from there): the real
    shape differs, so what fn computed from the planned one is refused, never returned (it gave 12, eager 24)."""

    def fn(x, mask):
        y = ops.masked_select(x, mask)
        n = y.shape[0]
        ops.sum(y).item()
        return ops.sum(y) * float(n)

    step = compile(fn)
    x = tape.tensor(np.arange(6.0), requires_grad=True)
    small, large = np.array([1, 1, 0, 0, 0, 0], bool), np.array([1, 1, 1, 1, 0, 0], bool)
    assert step(x, small)[0].item() == fn(x, small).item()
    with pytest.raises(CompileError, match="'masked_select' gave output"):
        step(x, large)
    assert step(x, large)[0].item() == fn(x, large).item() == 24.0


def test_an_op_drawing_randomness_draws_where_fn_calls_it():
    """dropout with the default generator draws its seed in its forward; fn draws from the same generator before
    and after it. A plan's forwards run after fn returns, so the step makes the op's declared draw where fn calls it
    (tape.compile_guards.random_draw): every replay draws in eager's order and gives eager's numbers bit for bit
    (it ran every call eagerly before)."""

    def fn(x):
        noise = tape.randn(6, dtype=x.dtype)  # fn's own draw, before and after the op's
        y = ops.dropout(x * noise, 0.5)
        return ops.sum(y * tape.randn(6, dtype=x.dtype))

    x = tape.tensor(np.arange(6.0), requires_grad=True)
    step = compile(fn, [x])
    losses = set()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "no plan can replay" warning
        for seed in range(5):
            tape.manual_seed(seed)
            loss, (grad,) = step(x)
            grad = grad.numpy().copy()
            after = tape.randn(1).item()  # the generator is left where eager leaves it
            x.grad = None
            tape.manual_seed(seed)
            eager = fn(x)
            eager.backward()
            assert loss.item() == eager.item() and np.array_equal(grad, x.grad.numpy())
            assert after == tape.randn(1).item()
            losses.add(loss.item())
            x.grad = None
    assert step.replays == 4 and len(losses) == 5


def test_an_op_drawing_without_declaring_its_draw_runs_eagerly_and_says_so():
    """An op whose forward resolves an attribute it did not declare as a draw (a test op drawing a seed) can
    never be replayed: every call runs eagerly, with eager's numbers, warned once (silent before)."""

    def forward(x, *, rng=None):
        seed = int(np.random.default_rng(rng).integers(0, 2**31)) if not isinstance(rng, int) else rng
        return x * (1 + seed % 7), {"rng": seed}

    op = tape.defop("compiletest_undeclared_draw", family="compiletest", inputs=("x",), forward=forward,
                    vjps=(lambda g, ans, x, rng: g * (1 + rng % 7),), returns_aux=True,
                    second_order=tape.Grad.NOT_DIFFERENTIABLE)
    try:
        w = tape.tensor(np.ones(3), requires_grad=True)
        step = compile(lambda: ops.sum(op(w, rng=np.random.default_rng(0)) * w), [w])
        with pytest.warns(RuntimeWarning, match="op 'compiletest_undeclared_draw' draws random numbers every call"):
            for _ in range(3):
                step()
        assert step.replays == 0 and "0 plan(s)" in repr(step)
    finally:
        tape.unregister_op("compiletest_undeclared_draw")


@pytest.mark.parametrize("reads", ["item", "gradients"])
def test_a_step_reading_its_own_values_every_call_says_it_runs_eagerly(reads):
    """fn reading a value it computed (``.item()`` for a branch) runs eagerly from there on every call and records
    the plan it already had; fn taking gradients inside (MAML's inner step) reads graphs its trace did not record.
    Eager's numbers, and a warning saying why -- both were silent: a compiled step that never replays."""
    w = tape.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)

    def fn(x):
        inner = ops.sum(ops.tanh(w * x) ** 2)
        if reads == "item":
            return inner * 2.0 if inner.item() > 0 else inner * -3.0
        (g,) = tape.gradients(inner, [w], create_graph=True)
        return ops.sum((w - 0.1 * g) * x)

    step = compile(fn, [w])
    x = np.array([1.0, 2.0, 3.0])
    why = "fn reads the values of a tensor it computed" if reads == "item" else "reads a graph fn did not record"
    with pytest.warns(RuntimeWarning, match=f"no plan can replay .*fn: .*{why}"):
        for _ in range(3):
            w.grad = None
            loss, (grad,) = step(x)
    got = grad.numpy().copy()
    w.grad = None
    eager = fn(x)
    eager.backward()
    assert loss.item() == eager.item() and np.array_equal(got, w.grad.numpy()) and step.replays == 0


def test_recompile_false_says_why_a_call_inside_a_recording_tape_fits_no_plan():
    """A GradientTape recording inside fn makes its ops run eagerly: with recompile=False that is a CompileError
    saying so (a bare StopIteration escaped before: the key equals the plan's, no part of it differs)."""
    w = tape.tensor(np.ones(3), requires_grad=True)

    def fn(x):
        with tape.GradientTape():
            return ops.sum(x * w)

    step = compile(fn, [w], recompile=False)
    step(tape.tensor(np.ones(3)))
    with pytest.raises(CompileError, match="a tape records it or anomaly mode is on"):
        step(tape.tensor(np.ones(3)))


def test_bad_results_and_arguments():
    with pytest.raises(TypeError, match="single-element floating loss"):
        compile(lambda x: x * 2.0)(np.ones(3, np.float32))
    w = tape.tensor(np.ones(3, np.float32), requires_grad=True)
    step = compile(lambda t: ops.sum(t))  # a graph made outside fn: the gradient flows beyond it, as in eager
    step(w * 2.0), step(w * 2.0)
    assert np.array_equal(w.grad.numpy(), np.full(3, 4.0, np.float32))


def test_a_compiled_step_inside_a_compiled_function_runs_eagerly():
    w = tape.tensor(np.ones(3, np.float32), requires_grad=True)
    inner = compile(lambda: ops.sum(w * w), [w])
    outer = compile(lambda: inner()[0] * 2.0)
    for _ in range(3):
        w.grad = None
        assert outer()[0].item() == 6.0 and np.array_equal(w.grad.numpy(), np.full(3, 2.0, np.float32))


def test_a_replayed_step_checks_indices_as_eager_does():
    w = tape.tensor(np.ones((4, 2), np.float32), requires_grad=True)
    step = compile(lambda idx: ops.sum(ops.embedding(idx, w)), [w])
    step(np.array([0, 1])), step(np.array([2, 3]))
    with pytest.raises(Exception) as eager:
        ops.embedding(np.array([0, 9]), w)
    with pytest.raises(type(eager.value), match=str(eager.value)[:30].replace("(", r"\(").replace("[", r"\[")):
        step(np.array([0, 9]))
    assert step.replays == 1
