"""Tensor hooks (``Tensor.register_hook``, ``retain_grad``) and module hooks, against torch in float64.

A hook sees a tensor's *total* gradient once per reverse pass, before it flows on (a non-leaf) or is accumulated
into ``.grad`` (a leaf); a Tensor it returns replaces that gradient for everything upstream. ``retain_grad`` keeps a
non-leaf's gradient -- the one after its hooks -- accumulated across passes. Under ``tape.compile`` a step whose
tensors have hooks runs them as eager does.
"""

import gc
import tracemalloc
import warnings

import numpy as np
import pytest

import ops
import tape
from tape import nn

RTOL, ATOL = 1e-12, 1e-14


def _close(ours, theirs, what=""):
    np.testing.assert_allclose(np.asarray(ours), theirs.detach().numpy(), RTOL, ATOL, err_msg=what, strict=True)


def _mlp(x, w1, w2, hooks, keep):
    """``sum(tanh(x @ w1) @ w2 ** 2)`` with ``hooks[name]`` registered on its intermediates (name -> tensor in keep)."""
    h = x @ w1
    a = h.tanh()
    o = a @ w2
    for name, t in (("h", h), ("a", a), ("o", o)):
        keep[name] = t
        if name in hooks:
            t.register_hook(hooks[name])
    return (o * o).sum()


def _pair(torch, rng):
    arrays = [rng.standard_normal(s) for s in ((4, 3), (3, 5), (5, 2))]
    return [torch.tensor(a, requires_grad=True) for a in arrays], [tape.tensor(a, requires_grad=True) for a in arrays]


@pytest.mark.parametrize("where", ["h", "a", "o", "leaf"])
def test_a_scaling_hook_changes_every_upstream_gradient_as_torch(torch, where):
    rng = np.random.default_rng(0)
    (tx, tw1, tw2), (x, w1, w2) = _pair(torch, rng)
    scale = rng.standard_normal(2 if where == "o" else 5)  # a per-column scale: not a uniform factor
    seen = {}

    def make(lib, key):
        s = lib.tensor(scale)

        def hook(g):
            seen.setdefault(key, []).append(np.array(g.detach().numpy() if key == "torch" else g.numpy()))
            return g * s

        return hook

    if where == "leaf":
        tw1.register_hook(lambda g: g * torch.tensor(scale))
        w1.register_hook(lambda g: g * tape.tensor(scale))
        thooks, hooks = {}, {}
    else:
        thooks, hooks = {where: make(torch, "torch")}, {where: make(tape, "tape")}
    tkeep, keep = {}, {}
    _mlp(tx, tw1, tw2, thooks, tkeep).backward()
    _mlp(x, w1, w2, hooks, keep).backward()
    for name, ours, theirs in (("x", x, tx), ("w1", w1, tw1), ("w2", w2, tw2)):
        _close(ours.grad.numpy(), theirs.grad, f"gradient of {name}")
    if where != "leaf":
        assert len(seen["tape"]) == len(seen["torch"]) == 1  # once, with the total
        np.testing.assert_allclose(seen["tape"][0], seen["torch"][0], RTOL, ATOL)
    unhooked = tape.tensor(w1.numpy(), requires_grad=True)
    _mlp(x, unhooked, w2, {}, {}).backward()
    assert not np.allclose(unhooked.grad.numpy(), w1.grad.numpy())  # the hook did change something


def test_a_leaf_hook_sees_the_total_of_all_its_uses_once(torch):
    a = np.array([1.0, -2.0, 0.5])
    tx, x = torch.tensor(a, requires_grad=True), tape.tensor(a, requires_grad=True)
    theirs, ours = [], []
    tx.register_hook(lambda g: theirs.append(g.clone()))
    x.register_hook(lambda g: ours.append(g))
    (tx * tx + 3 * tx.sin()).sum().backward()
    (x * x + 3 * ops.sin(x)).sum().backward()
    assert len(ours) == len(theirs) == 1
    _close(ours[0].numpy(), theirs[0])
    _close(x.grad.numpy(), tx.grad)


def test_hooks_run_in_registration_order_each_on_the_previous_result(torch):
    log = []
    x = tape.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: log.append(("first", g.numpy().copy())) or g + 1)
    y.register_hook(lambda g: log.append(("second", g.numpy().copy())) or g * 3)
    y.sum().backward()
    assert [name for name, _ in log] == ["first", "second"]
    np.testing.assert_array_equal(log[1][1], [2.0, 2.0])
    np.testing.assert_array_equal(x.grad.numpy(), [12.0, 12.0])  # (1 + 1) * 3 * 2


def test_retain_grad_keeps_the_gradient_after_the_hooks_and_accumulates(torch):
    a = np.array([[0.3, -1.2], [2.0, 0.7]])
    tx, x = torch.tensor(a, requires_grad=True), tape.tensor(a, requires_grad=True)
    ty, y = tx.exp(), ops.exp(x)
    tz, z = ty * ty.sum(), y * y.sum()
    for t in (ty, tz, y, z):
        t.retain_grad()
    ty.register_hook(lambda g: g * 2)
    y.register_hook(lambda g: g * 2)
    assert y.retains_grad and not x.retains_grad
    for _ in range(2):  # the second pass accumulates, as torch's
        (tz**2).sum().backward(retain_graph=True)
        (z**2).sum().backward(retain_graph=True)
        for name, ours, theirs in (("y", y, ty), ("z", z, tz), ("x", x, tx)):
            _close(ours.grad.numpy(), theirs.grad, f"gradient of {name}")
    x.retain_grad()  # a leaf: nothing changes
    assert not x.retains_grad


def test_a_hook_on_a_tensor_dropped_before_backward_still_runs(torch):
    """The usual pattern: a hook registered inside a forward on an intermediate the caller never sees."""

    def forward(lib, x):
        h = x * 2
        h.register_hook(lambda g: g * 10)
        return (h * 3).sum()

    a = np.array([1.0, 2.0])
    tx, x = torch.tensor(a, requires_grad=True), tape.tensor(a, requires_grad=True)
    tloss, loss = forward(torch, tx), forward(tape, x)
    gc.collect()
    tloss.backward()
    loss.backward()
    _close(x.grad.numpy(), tx.grad)


def test_hooks_on_outputs_of_an_op_with_several_outputs(torch):
    a = np.arange(12.0).reshape(3, 4) / 7
    tx, x = torch.tensor(a, requires_grad=True), tape.tensor(a, requires_grad=True)
    tparts, parts = tx.split([1, 3], dim=1), ops.split(x, [1, 3], dim=1)
    tparts[1].register_hook(lambda g: g * -4)
    parts[1].register_hook(lambda g: g * -4)
    (tparts[0].exp().sum() + (tparts[1] ** 2).sum()).backward()
    (ops.exp(parts[0]).sum() + (parts[1] ** 2).sum()).backward()
    _close(x.grad.numpy(), tx.grad)


def test_hooks_under_create_graph_are_differentiated_through(torch):
    a = np.array([0.4, -0.9, 1.3])
    tx, x = torch.tensor(a, requires_grad=True), tape.tensor(a, requires_grad=True)
    ty, y = tx.sin(), ops.sin(x)
    ty.register_hook(lambda g: g * ty)  # a hook whose result depends on x: part of the second order
    y.register_hook(lambda g: g * y)
    (tg,) = torch.autograd.grad((ty**3).sum(), tx, create_graph=True)
    (g,) = tape.gradients((y**3).sum(), x, create_graph=True)
    _close(g.numpy(), tg)
    tg.sum().backward()
    g.sum().backward()
    _close(x.grad.numpy(), tx.grad)


@pytest.mark.parametrize("source", ["x", "b"])
def test_hooks_run_in_gradients_for_intermediates_and_sources(torch, source):
    """A source's gradient is the one after its hooks (torch's, for one source; with a leaf and a non-leaf source
    in one call torch hands back the non-leaf's gradient before its hook -- minitape's stays the one rule)."""
    a = np.array([0.5, 1.5])
    got = {}
    for lib, grad in ((torch, torch.autograd.grad), (tape, tape.gradients)):
        x = lib.tensor(a, requires_grad=True)
        b = x * 2
        x.register_hook(lambda g: g * 5)
        b.register_hook(lambda g: g * 10)
        got[lib.__name__] = grad((b * b).sum(), [{"x": x, "b": b}[source]])
    _close(got["tape"][0].numpy(), got["torch"][0])


def test_a_hook_on_the_input_of_an_op_with_a_composite_runs_once(torch):
    """max_pool2d's second order runs an inner reverse pass through its composite: the user's hook is not called
    there, only in the user's pass."""
    a = np.random.default_rng(1).standard_normal((1, 1, 4, 4))
    tx, x = torch.tensor(a, requires_grad=True), tape.tensor(a, requires_grad=True)
    calls = []
    tx.register_hook(lambda g: g * 3)
    x.register_hook(lambda g: calls.append(1) or g * 3)
    (tg,) = torch.autograd.grad((torch.nn.functional.max_pool2d(tx, 2) ** 2).sum(), tx, create_graph=True)
    (g,) = tape.gradients((ops.max_pool2d(x, 2) ** 2).sum(), x, create_graph=True)
    assert len(calls) == 1
    _close(g.numpy(), tg)


def test_remove_takes_the_hook_off_and_twice_is_harmless():
    x = tape.tensor(np.array([1.0, 2.0]), requires_grad=True)
    handle = x.register_hook(lambda g: g * 100)
    handle.remove()
    handle.remove()
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_hook_errors_name_the_function_and_what_was_expected():
    with pytest.raises(RuntimeError, match="register_hook.*does not require grad"):
        tape.tensor(np.ones(2)).register_hook(lambda g: None)
    with pytest.raises(RuntimeError, match="retain_grad.*does not require grad"):
        tape.tensor(np.ones(2)).retain_grad()
    x = tape.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(TypeError, match="register_hook: argument 'hook' expected a callable, got int"):
        x.register_hook(3)
    y = x * 2
    y.register_hook(lambda g: tape.tensor(np.ones(3)))
    with pytest.raises(ValueError, match=r"returned shape \(3,\) dtype float64; expected the gradient's shape \(2,\)"):
        y.sum().backward()
    z = x * 2
    z.register_hook(lambda g: g.numpy())
    with pytest.raises(TypeError, match="returned ndarray; expected None or a Tensor of shape"):
        z.sum().backward()
    w = x * 2
    w.register_hook(lambda g: ops.cast(g, np.float32))
    with pytest.raises(ValueError, match="dtype float32; expected the gradient's shape"):
        w.sum().backward()


# -- under tape.compile -------------------------------------------------------------------------------------
def _compiled_vs_eager(make_fn, steps=3):
    """Run ``make_fn(params, log)`` compiled and eagerly from the same parameters: (compiled, eager) (grads, logs)."""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((3, 4)), rng.standard_normal((4,))]
    x = tape.tensor(rng.standard_normal((5, 3)))
    results = []
    for compiled in (True, False):
        params = [tape.tensor(a, requires_grad=True) for a in arrays]
        log: list = []
        fn = make_fn(params, log)
        step = tape.compile(fn, params) if compiled else None
        grads = []
        for _ in range(steps):
            for p in params:
                p.grad = None
            if compiled:
                _, gs = step(x)
            else:
                fn(x).backward()
                gs = [p.grad for p in params]
            grads.append([g.numpy().copy() for g in gs])
        results.append((grads, log, step))
    return results


@pytest.mark.parametrize("replaces", [False, True])
def test_compiled_step_with_a_hook_on_a_parameter_equals_eager(replaces):
    def make(params, log):
        params[0].register_hook(lambda g: log.append(g.numpy().copy()) or (g * 0.5 if replaces else None))
        return lambda x: (ops.tanh(x @ params[0] + params[1]) ** 2).sum()

    (cg, clog, step), (eg, elog, _) = _compiled_vs_eager(make)
    assert len(clog) == len(elog) == 3  # the hook ran at every compiled step, not only when recording
    for c, e in zip(cg, eg):
        for a, b in zip(c, e):
            np.testing.assert_array_equal(a, b)
    assert step.replays == 2  # a plan's backward is eager's reverse pass: the hooks run in it


def test_compiled_step_with_hooks_registered_inside_fn_equals_eager():
    def make(params, log):
        def fn(x):
            h = x @ params[0] + params[1]
            h.register_hook(lambda g: log.append("hook") or g * -2)
            a = ops.tanh(h)
            a.retain_grad()
            log.append(("retained", a))
            return (a**2).sum()

        return fn

    (cg, clog, _), (eg, elog, _) = _compiled_vs_eager(make)
    assert clog.count("hook") == elog.count("hook") == 3
    retained = [t[1].grad.numpy() for t in clog if t != "hook"]
    expected = [t[1].grad.numpy() for t in elog if t != "hook"]
    assert len(retained) == 3
    for a, b in zip(retained, expected):
        np.testing.assert_array_equal(a, b)
    for c, e in zip(cg, eg):
        for a, b in zip(c, e):
            np.testing.assert_array_equal(a, b)


# -- module hooks -------------------------------------------------------------------------------------------
def _linear_pair(torch):
    """torch's Linear(3, 4) in float64 and ours holding its weights."""
    tlin = torch.nn.Linear(3, 4).double()
    lin = nn.Linear(3, 4, dtype=np.float64)
    lin.load_state_dict({k: v.detach().numpy() for k, v in tlin.state_dict().items()})
    return tlin, lin


def test_module_forward_hooks_as_torch(torch):
    a = np.random.default_rng(3).standard_normal((2, 3))
    tlin, lin = _linear_pair(torch)
    results = {}
    for name, module, lib in (("torch", tlin, torch), ("tape", lin, tape)):
        log = []
        pre = module.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
        post = module.register_forward_hook(lambda m, args, out, log=log: log.append(args[0]) or out + 1)
        out = module(lib.tensor(a))
        pre.remove()
        plain = module(lib.tensor(a))
        post.remove()
        results[name] = (out, log[0], plain, module(lib.tensor(a)))
    for ours, theirs in zip(results["tape"], results["torch"]):
        _close(ours.numpy(), theirs)


def test_module_full_backward_hook_as_torch(torch):
    a = np.random.default_rng(4).standard_normal((2, 3))
    tlin, lin = _linear_pair(torch)
    seen = {}
    for name, module, lib in (("torch", tlin, torch), ("tape", lin, tape)):
        log = seen[name] = []

        def hook(m, grad_input, grad_output, log=log):
            log.append((grad_input, grad_output))
            return (grad_input[0] * 3,)

        module.register_full_backward_hook(hook)
        x = lib.tensor(a, requires_grad=True)
        (module(x).tanh() ** 2).sum().backward()
        log.append(x.grad)
        log.append(module.weight.grad)
    (tgi, tgo), tx_grad, tw_grad = seen["torch"]
    (gi, go), x_grad, w_grad = seen["tape"]
    assert len(gi) == len(tgi) == 1 and len(go) == len(tgo) == 1
    _close(gi[0].numpy(), tgi[0])
    _close(go[0].numpy(), tgo[0])
    _close(x_grad.numpy(), tx_grad)
    _close(w_grad.numpy(), tw_grad)


@pytest.mark.parametrize("how", ["copy", "deepcopy"])
def test_a_module_copy_has_its_own_hooks(how):
    import copy

    lin = nn.Linear(2, 2, dtype=np.float64)
    calls = []
    lin.register_forward_hook(lambda m, args, out: calls.append("original"))
    twin = getattr(copy, how)(lin)
    twin.register_forward_hook(lambda m, args, out: calls.append("twin"))
    x = tape.tensor(np.ones(2))
    lin(x)
    twin(x)
    assert calls == ["original", "original", "twin"]  # the copy keeps the hooks it had, as torch's deepcopy


def test_module_full_backward_hook_sees_each_pass_own_grad_output_as_torch(torch):
    """Two backward passes through one forward (retain_graph): each hook call gets that pass's grad_output (one
    entry), not the passes' gradients accumulated in a list that grows (the second call used to see the first's)."""
    a = np.random.default_rng(5).standard_normal((2, 3))
    tlin, lin = _linear_pair(torch)
    seen = {}
    for name, module, lib in (("torch", tlin, torch), ("tape", lin, tape)):
        log = seen[name] = []
        module.register_full_backward_hook(lambda m, gi, go, log=log: log.append(go))
        for with_input_grad in (True, False):
            x = lib.tensor(a, requires_grad=with_input_grad)
            y = module(x)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch's: the hook fires for outputs when no input needs grad
                (y * 2).sum().backward(retain_graph=True)
                (y**2).sum().backward()
    for ours, theirs in zip(seen["tape"], seen["torch"], strict=True):
        assert len(ours) == len(theirs) == 1
        _close(ours[0].numpy(), theirs[0])


@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_module_with_a_full_backward_hook_does_not_keep_its_inputs(input_requires_grad):
    """Each call used to leave its (cloned) input alive for good: 100 steps of a 1 MiB input kept +300 MiB."""
    lin = nn.Linear(256, 256, dtype=np.float64)
    lin.register_full_backward_hook(lambda m, gi, go: None)

    def step():
        x = tape.tensor(np.ones((512, 256)), requires_grad=input_requires_grad)
        lin(x).sum().backward()
        lin.zero_grad()

    for _ in range(3):
        step()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20):
            step()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 1 << 20, f"20 calls of a 1 MiB input kept {grown / 2**20:.1f} MiB"
