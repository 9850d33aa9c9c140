"""Optimizers, gradient clipping and the learning-rate schedule, each compared with PyTorch."""

import math

import numpy as np
import pytest
from oracle import LazyTorch

import tape
from tape import optim

torch = LazyTorch()  # torch imported at first use: the module collects without torch

SHAPES = [(3, 4), (5,), (2, 1, 3)]


def _params(rng, dtype=np.float64):
    values = [rng.normal(size=s).astype(dtype) for s in SHAPES]
    ours = [tape.tensor(v, requires_grad=True) for v in values]
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    return ours, theirs


def _run(make_ours, make_theirs, steps=5, dtype=np.float64, groups=None):
    """Apply the same gradients (drawn fresh each step) to both optimizers and return both parameter lists."""
    rng = np.random.default_rng(0)
    ours, theirs = _params(rng, dtype)
    opt_ours = make_ours(ours if groups is None else groups(ours))
    opt_theirs = make_theirs(theirs if groups is None else groups(theirs))
    for _ in range(steps):
        for p, q in zip(ours, theirs):
            g = rng.normal(size=p.shape).astype(dtype)
            p.grad = tape.tensor(g)
            q.grad = torch.tensor(g)
        opt_ours.step()
        opt_theirs.step()
    return ours, theirs


def _assert_close(ours, theirs, rtol=1e-12, atol=1e-14):
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("kwargs", [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01),
    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1),
])
def test_sgd_matches_torch(kwargs):
    ours, theirs = _run(lambda p: optim.SGD(p, **kwargs), lambda p: torch.optim.SGD(p, **kwargs))
    _assert_close(ours, theirs)


@pytest.mark.parametrize("kwargs", [
    dict(lr=1e-2),
    dict(lr=3e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    dict(lr=1e-2, amsgrad=True, weight_decay=0.01),
])
@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_adam_family_matches_torch(name, kwargs):
    ours, theirs = _run(lambda p: getattr(optim, name)(p, **kwargs),
                        lambda p: getattr(torch.optim, name)(p, **kwargs), steps=7)
    _assert_close(ours, theirs)


def test_adamw_default_weight_decay_is_torchs():
    ours, theirs = _run(lambda p: optim.AdamW(p, lr=0.1), lambda p: torch.optim.AdamW(p, lr=0.1))
    _assert_close(ours, theirs)


def test_float32_stays_float32_and_close_to_torch():
    ours, theirs = _run(lambda p: optim.AdamW(p, lr=1e-2, weight_decay=0.1),
                        lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1), dtype=np.float32)
    assert all(p.dtype == np.float32 for p in ours)
    _assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


def test_parameter_groups_override_defaults():
    def groups(params):
        return [{"params": params[:1], "weight_decay": 0.0}, {"params": params[1:], "lr": 0.5}]
    ours, theirs = _run(lambda g: optim.AdamW(g, lr=0.1, weight_decay=0.2),
                        lambda g: torch.optim.AdamW(g, lr=0.1, weight_decay=0.2), groups=groups)
    _assert_close(ours, theirs)


def test_step_skips_parameters_without_gradient_and_bumps_version():
    a = tape.tensor(np.ones(3), requires_grad=True)
    b = tape.tensor(np.ones(3), requires_grad=True)
    opt = optim.SGD([a, b], lr=0.5)
    a.grad = tape.tensor(np.full(3, 2.0))
    version = a._version
    opt.step()
    np.testing.assert_array_equal(a.numpy(), np.zeros(3))
    np.testing.assert_array_equal(b.numpy(), np.ones(3))
    assert a._version == version + 1
    assert not a.numpy().flags.writeable


def test_step_after_update_invalidates_old_graph():
    w = tape.tensor(np.array([1.0, 2.0]), requires_grad=True)
    loss = (w * w).sum()
    opt = optim.SGD([w], lr=0.1)
    loss.backward(retain_graph=True)
    opt.step()
    with pytest.raises(tape.InPlaceModificationError):
        loss.backward()


def test_training_through_the_tape_minimises_a_quadratic():
    target = np.array([1.0, -2.0, 3.0])
    w = tape.tensor(np.zeros(3), requires_grad=True)
    opt = optim.Adam([w], lr=0.1)
    for _ in range(300):
        opt.zero_grad()
        diff = w - target
        (diff * diff).sum().backward()
        opt.step()
    np.testing.assert_allclose(w.numpy(), target, atol=1e-3)


def test_zero_grad_clears_gradients():
    w = tape.tensor(np.ones(2), requires_grad=True)
    w.grad = tape.tensor(np.ones(2))
    optim.SGD([w], lr=1.0).zero_grad()
    assert w.grad is None


@pytest.mark.parametrize("bad", [
    lambda p: optim.SGD(p, lr=-1.0),
    lambda p: optim.Adam(p, betas=(1.0, 0.9)),
    lambda p: optim.SGD(p, lr=0.1, nesterov=True),
    lambda p: optim.SGD(p + p, lr=0.1),
    lambda p: optim.SGD([], lr=0.1),
    lambda p: optim.SGD([{"params": p, "momentun": 0.9}], lr=0.1),
    lambda p: optim.SGD([tape.tensor(np.ones(2))], lr=0.1),
])
def test_bad_arguments_raise_clear_errors(bad):
    params = [tape.tensor(np.ones(2), requires_grad=True)]
    with pytest.raises((ValueError, TypeError)):
        bad(params)


# -- clip_grad_norm_ -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("max_norm,norm_type", [(0.5, 2.0), (100.0, 2.0), (0.3, 1.0), (0.2, math.inf), (1.0, 3.0)])
def test_clip_grad_norm_matches_torch(max_norm, norm_type):
    rng = np.random.default_rng(1)
    ours, theirs = _params(rng)
    for p, q in zip(ours, theirs):
        g = rng.normal(size=p.shape)
        p.grad = tape.tensor(g)
        q.grad = torch.tensor(g)
    ours[1].grad = None
    theirs[1].grad = None
    total = optim.clip_grad_norm_(ours, max_norm, norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    np.testing.assert_allclose(total.item(), expected.item(), rtol=1e-12)
    for p, q in zip(ours, theirs):
        if p.grad is None:
            assert q.grad is None
        else:
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)


def test_clip_grad_norm_error_if_nonfinite_is_a_runtime_error():
    w = tape.tensor(np.ones(2), requires_grad=True)
    w.grad = tape.tensor(np.array([np.inf, 1.0]))
    with pytest.raises(RuntimeError, match="norm"):
        optim.clip_grad_norm_([w], 1.0, error_if_nonfinite=True)


def test_clip_grad_norm_keeps_float32():
    w = tape.tensor(np.ones(4, dtype=np.float32), requires_grad=True)
    w.grad = tape.tensor(np.full(4, 3.0, dtype=np.float32))
    total = optim.clip_grad_norm_([w], 1.0)
    assert w.grad.dtype == np.float32 and total.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(w.grad.numpy()), 1.0, rtol=1e-5)


# -- warmup + cosine schedule ----------------------------------------------------------------------------------
def test_warmup_cosine_matches_torch_linear_then_cosine():
    warmup, total, base, min_lr = 5, 30, 0.1, 0.01
    w = tape.tensor(np.ones(2), requires_grad=True)
    opt = optim.SGD([w], lr=base)
    schedule = optim.WarmupCosineLR(opt, warmup, total, min_lr=min_lr)
    tw = torch.zeros(2, requires_grad=True)
    topt = torch.optim.SGD([tw], lr=base)
    tsched = torch.optim.lr_scheduler.SequentialLR(topt, [
        torch.optim.lr_scheduler.LinearLR(topt, start_factor=1 / warmup, end_factor=1.0, total_iters=warmup - 1),
        torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=total - warmup, eta_min=min_lr)],
        milestones=[warmup])
    for step in range(total + 1):
        assert opt.lr == pytest.approx(topt.param_groups[0]["lr"], rel=1e-9), step
        assert schedule.get_last_lr()[0] == opt.lr
        opt.step()
        topt.step()
        schedule.step()
        tsched.step()


def test_warmup_cosine_endpoints():
    assert optim.warmup_cosine_lr(0, 1.0, 10, 110) == pytest.approx(0.1)
    assert optim.warmup_cosine_lr(9, 1.0, 10, 110) == pytest.approx(1.0)
    assert optim.warmup_cosine_lr(10, 1.0, 10, 110) == pytest.approx(1.0)
    assert optim.warmup_cosine_lr(60, 1.0, 10, 110) == pytest.approx(0.5)
    assert optim.warmup_cosine_lr(110, 1.0, 10, 110, min_lr=0.1) == pytest.approx(0.1)
    assert optim.warmup_cosine_lr(500, 1.0, 10, 110, min_lr=0.1) == pytest.approx(0.1)
    assert optim.warmup_cosine_lr(0, 1.0, 0, 10) == pytest.approx(1.0)


# -- clip_grad_norm_ with a non-finite norm: torch's numbers, or torch's error ------------------------------------
NONFINITE = {
    "inf": [[np.inf, 1.0], [2.0, -3.0]],
    "-inf": [[-np.inf, 1.0], [2.0, -3.0]],
    "nan": [[np.nan, 1.0], [2.0, -3.0]],
    "nan and inf": [[np.nan, np.inf], [2.0, -3.0]],
    "overflowing squares": [[1e200, 1e200], [2.0, -3.0]],
}


def _clip_pair(grads, dtype):
    ours = [tape.tensor(np.zeros(len(g), dtype=dtype), requires_grad=True) for g in grads]
    theirs = [torch.zeros(len(g), dtype=getattr(torch, np.dtype(dtype).name), requires_grad=True) for g in grads]
    for p, q, g in zip(ours, theirs, grads):
        p.grad = tape.tensor(np.array(g, dtype=dtype))
        q.grad = torch.tensor(np.array(g, dtype=dtype))
    return ours, theirs


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("case", list(NONFINITE))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_clip_grad_norm_nonfinite_matches_torch(case, norm_type, dtype):
    grads = NONFINITE[case]
    if dtype == np.float32 and case == "overflowing squares":
        grads = [[3e38, 3e38], [2.0, -3.0]]
    ours, theirs = _clip_pair(grads, dtype)
    with np.errstate(all="raise"):  # no numpy warnings either
        total = optim.clip_grad_norm_(ours, 1.0, norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, 1.0, norm_type)
    assert total.dtype == dtype
    np.testing.assert_array_equal(total.numpy(), expected.numpy())  # nan == nan, inf == inf
    for p, q in zip(ours, theirs):
        assert p.grad.dtype == dtype
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6, atol=0)  # nan where torch has nan


@pytest.mark.parametrize("case,norm_type", [("inf", 2.0), ("inf", math.inf), ("nan", 2.0), ("nan", math.inf),
                                             ("overflowing squares", 2.0)])
def test_clip_grad_norm_error_if_nonfinite_raises_like_torch_and_changes_nothing(case, norm_type):
    ours, theirs = _clip_pair(NONFINITE[case], np.float64)
    with pytest.raises(RuntimeError) as torch_info:
        torch.nn.utils.clip_grad_norm_(theirs, 1.0, norm_type, error_if_nonfinite=True)
    before = [p.grad for p in ours]
    with pytest.raises(RuntimeError, match=r"clip_grad_norm_: the total norm of order .* is non-finite") as info:
        optim.clip_grad_norm_(ours, 1.0, norm_type, error_if_nonfinite=True)
    assert "error_if_nonfinite=False" in str(info.value) and "error_if_nonfinite=False" in str(torch_info.value)
    assert all(p.grad is g for p, g in zip(ours, before))


@pytest.mark.parametrize("max_norm", [-1.0, float("nan")])
def test_clip_grad_norm_refuses_a_negative_or_nan_max_norm(max_norm):
    """torch scales by it (a negative max_norm flips every gradient); minitape says what is wrong instead."""
    ours, _ = _clip_pair([[3.0, 4.0]], np.float64)
    with pytest.raises(ValueError, match=r"clip_grad_norm_: argument 'max_norm' expected a number >= 0, got"):
        optim.clip_grad_norm_(ours, max_norm)
    np.testing.assert_array_equal(ours[0].grad.numpy(), [3.0, 4.0])


@pytest.mark.parametrize("norm_type", [2.0, math.inf])
def test_clip_grad_norm_counts_empty_gradients_as_zero(norm_type):
    """A size-0 parameter (e.g. nn.Linear(0, n)'s weight) adds nothing (torch raises for the inf-norm)."""
    ours, _ = _clip_pair([[], [3.0, 4.0]], np.float64)
    total = optim.clip_grad_norm_(ours, 1.0, norm_type)
    assert total.item() == (5.0 if norm_type == 2.0 else 4.0)
    assert ours[0].grad.shape == (0,)


def test_clip_grad_norm_mixed_dtypes_give_a_float64_norm_as_torch():
    a = tape.tensor(np.zeros(2, dtype=np.float32), requires_grad=True)
    b = tape.tensor(np.zeros(2), requires_grad=True)
    a.grad, b.grad = tape.tensor(np.ones(2, dtype=np.float32)), tape.tensor(np.ones(2))
    total = optim.clip_grad_norm_([a, b], 1.0)
    assert total.dtype == np.float64 and a.grad.dtype == np.float32 and b.grad.dtype == np.float64
    np.testing.assert_allclose(total.item(), 2.0)


@pytest.mark.parametrize("norm_type", [0, -1.0, -math.inf, float("nan")])
def test_clip_grad_norm_refuses_a_norm_type_that_is_not_a_norm(norm_type):
    w = tape.tensor(np.ones(2), requires_grad=True)
    w.grad = tape.tensor(np.array([3.0, 4.0]))
    with pytest.raises(ValueError, match=r"clip_grad_norm_: argument 'norm_type'.*got"):
        optim.clip_grad_norm_([w], 1.0, norm_type)


# -- state_dict / load_state_dict ---------------------------------------------------------------------------------
def _stepped(make, steps=3, seed=0):
    rng = np.random.default_rng(seed)
    params = [tape.tensor(rng.normal(size=s), requires_grad=True) for s in SHAPES]
    opt = make(params)
    for _ in range(steps):
        for p in params:
            p.grad = tape.tensor(rng.normal(size=p.shape))
        opt.step()
    return params, opt


MAKERS = {
    "sgd": lambda p: optim.SGD(p, lr=0.1),
    "sgd-momentum": lambda p: optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    "adam": lambda p: optim.Adam(p, lr=0.01, betas=(0.8, 0.95)),
    "adamw-amsgrad": lambda p: optim.AdamW(p, lr=0.01, amsgrad=True),
    "groups": lambda p: optim.AdamW([{"params": p[:1], "weight_decay": 0.0}, {"params": p[1:], "lr": 0.5}], lr=0.1),
    "adamax": lambda p: optim.Adamax(p, lr=0.05),
    "nadam": lambda p: optim.NAdam(p, lr=0.05, maximize=True),  # a float32 scalar in its state (mu_product)
    "radam": lambda p: optim.RAdam(p, lr=0.05, decoupled_weight_decay=True, weight_decay=0.1),
}


@pytest.mark.parametrize("name", list(MAKERS))
def test_state_dict_restores_the_trajectory_exactly(name):
    make = MAKERS[name]
    params, opt = _stepped(make)
    state = opt.state_dict()
    assert all(isinstance(k, str) and isinstance(v, np.ndarray) and v.dtype.kind in "fiub" for k, v in state.items())
    copies = [tape.tensor(p.numpy(), requires_grad=True) for p in params]
    # a fresh optimizer with another learning rate: loading restores the saved hyper-parameters, as torch does
    fresh = make(copies)
    fresh.lr = 123.0
    fresh.load_state_dict(state)
    assert [{k: v for k, v in g.items() if k != "params"} for g in fresh.param_groups] == \
        [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
    rng = np.random.default_rng(5)
    for _ in range(3):
        for p, c in zip(params, copies):
            p.grad = c.grad = tape.tensor(rng.normal(size=p.shape))
        opt.step()
        fresh.step()
    for p, c in zip(params, copies):
        np.testing.assert_array_equal(p.numpy(), c.numpy())
    assert fresh.steps_taken == opt.steps_taken


def test_state_dict_is_a_snapshot():
    params, opt = _stepped(MAKERS["adam"])
    state = opt.state_dict()
    saved = {k: v.copy() for k, v in state.items()}
    for p in params:
        p.grad = tape.tensor(np.ones(p.shape))
    opt.step()
    for k, v in state.items():
        np.testing.assert_array_equal(v, saved[k])


def test_loaded_state_is_private_to_the_optimizer():
    params, opt = _stepped(MAKERS["adam"])
    state = {k: v.copy() for k, v in opt.state_dict().items()}
    copies = [tape.tensor(p.numpy(), requires_grad=True) for p in params]
    fresh = optim.Adam(copies)
    fresh.load_state_dict(state)
    for c in copies:
        c.grad = tape.tensor(np.ones(c.shape))
    fresh.step()
    np.testing.assert_array_equal(state["state.0.exp_avg"], opt.state_dict()["state.0.exp_avg"])


def _load_error(make, mutate, params_for_load=None):
    params, opt = _stepped(MAKERS["adam"])
    state = dict(opt.state_dict())
    mutate(state)
    target_params = params_for_load or [tape.tensor(p.numpy(), requires_grad=True) for p in params]
    target = make(target_params)
    before = target.state_dict()
    with pytest.raises(ValueError) as info:
        target.load_state_dict(state)
    after = target.state_dict()
    assert before.keys() == after.keys() and all(np.array_equal(before[k], after[k]) for k in before)
    return str(info.value)


@pytest.mark.parametrize("mutate,fragment", [
    (lambda s: s.pop("state.1.exp_avg_sq"), "missing key(s): state.1.exp_avg_sq"),
    (lambda s: s.pop("param_groups.0.lr"), "missing key(s): param_groups.0.lr"),
    (lambda s: s.update({"state.0.momentum": np.zeros(1)}), "unexpected key(s): state.0.momentum"),
    (lambda s: s.update({"state.7.step": np.array(1)}), "unexpected key(s): state.7.step"),
    (lambda s: s.update({"state.0.exp_avg": np.zeros((4, 3))}), "'state.0.exp_avg' has shape (4, 3); the parameter "
                                                               "has shape (3, 4)"),
    (lambda s: s.update({"state.0.exp_avg": np.zeros((3, 4), np.float32)}), "'state.0.exp_avg' has dtype float32; "
                                                                            "the parameter has dtype float64"),
    (lambda s: s.update({"state.0.step": np.array(2.5)}), "'state.0.step' must be a non-negative integer"),
    (lambda s: s.update({"param_groups.0.betas": np.array(0.9)}), "'param_groups.0.betas' must be 2 numbers"),
    (lambda s: s.update({"param_groups.0.amsgrad": np.array(1.0)}), "'param_groups.0.amsgrad' must be a bool"),
    (lambda s: s.update({"param_groups.0.lr": np.array([0.1, 0.2])}), "'param_groups.0.lr' must be one number"),
    (lambda s: s.update({"param_groups.0.params": np.arange(4)}), "group 0 has 3 parameter(s) in the optimizer but 4 "
                                                                  "in the state dict"),
])
def test_load_state_dict_names_the_problem_and_changes_nothing(mutate, fragment):
    message = _load_error(lambda p: optim.Adam(p), mutate)
    assert message.startswith("Adam.load_state_dict: ")
    assert fragment in message, message


def test_load_state_dict_refuses_another_optimizers_state():
    message = _load_error(lambda p: optim.SGD(p, lr=0.1, momentum=0.9), lambda s: None)
    assert message.startswith("SGD.load_state_dict: ") and "unexpected key(s)" in message and "missing" in message


def test_load_state_dict_refuses_a_different_parameter_count():
    message = _load_error(lambda p: optim.Adam(p[:2]), lambda s: None)
    assert "group 0 has 2 parameter(s) in the optimizer but 3 in the state dict" in message


def test_load_state_dict_refuses_a_different_group_count():
    message = _load_error(lambda p: optim.Adam([{"params": p[:1]}, {"params": p[1:]}]), lambda s: None)
    assert "2 parameter group(s) in the optimizer but 1 in the state dict" in message


def test_load_state_dict_refuses_non_dicts():
    with pytest.raises(TypeError, match=r"Adam.load_state_dict: argument 'state_dict' expected a dict.*got list"):
        optim.Adam([tape.tensor(np.ones(2), requires_grad=True)]).load_state_dict([])


def test_schedule_state_dict_round_trip_and_validation():
    w = tape.tensor(np.ones(2), requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    schedule = optim.WarmupCosineLR(opt, warmup_steps=3, total_steps=10, min_lr=0.01)
    for _ in range(5):
        schedule.step()
    state = schedule.state_dict()
    other_opt = optim.SGD([tape.tensor(np.ones(2), requires_grad=True)], lr=0.1)
    other = optim.WarmupCosineLR(other_opt, warmup_steps=1, total_steps=2)
    other.load_state_dict(state)
    assert (other.last_step, other.warmup_steps, other.total_steps, other.min_lr) == (5, 3, 10, 0.01)
    assert other_opt.lr == opt.lr and other.base_lrs == schedule.base_lrs
    schedule.step()
    other.step()
    assert other_opt.lr == opt.lr
    with pytest.raises(ValueError, match=r"WarmupCosineLR.load_state_dict: .*missing key\(s\): last_step"):
        other.load_state_dict({k: v for k, v in state.items() if k != "last_step"})
    two_groups = optim.SGD([{"params": [tape.tensor(np.ones(2), requires_grad=True)]},
                            {"params": [tape.tensor(np.ones(2), requires_grad=True)]}], lr=0.1)
    with pytest.raises(ValueError, match=r"'base_lrs' has 1 learning rate\(s\); the optimizer has 2 parameter group"):
        optim.WarmupCosineLR(two_groups, 1, 2).load_state_dict(state)


def test_a_step_takes_the_rules_fresh_arrays_as_they_are_and_copies_anything_else():
    """The new value a rule returns becomes the parameter's read-only array without a copy when it is a fresh
    array; a rule returning one of its own state arrays (or a view) gets a copy, so the parameter never aliases
    the optimizer's private, mutable state."""

    class Returns(optim.Optimizer):
        def __init__(self, params, what):
            super().__init__(params, {"lr": 0.1})
            self.what = what

        def _update(self, p, grad, state, group):
            state.setdefault("buf", np.zeros_like(p))
            state["buf"] += grad
            return {"fresh": p - state["buf"], "state": state["buf"], "view": (p - state["buf"])[...]}[self.what]

    for what in ("fresh", "state", "view"):
        p = tape.tensor(np.ones(3), requires_grad=True)
        opt = Returns([p], what)
        for _ in range(2):
            p.grad = tape.tensor(np.full(3, 0.5))
            version = p._version
            opt.step()
            assert p._version == version + 1 and not p.numpy().flags.writeable
        buf = opt.state[id(p)]["buf"]
        assert not np.shares_memory(p.numpy(), buf), what
        expected = np.ones(3) if what == "state" else np.full(3, -0.5)  # 1 - 0.5, then - (0.5 + 0.5)
        np.testing.assert_array_equal(p.numpy(), expected)


def test_an_update_that_returns_an_array_it_keeps_is_copied_not_adopted():
    # the optimizer takes a fresh update result as the parameter's array without a copy; an array the rule
    # still refers to (a buffer it reuses, the gradient itself) must be copied, or the next parameter's update
    # would write into this one's values (or fail on the array the parameter froze)
    class Reusing(optim.SGD):
        kept: dict = {}

        def _update(self, p, grad, state, group):
            buf = self.kept.setdefault(p.shape, np.empty_like(p))
            np.subtract(p, group["lr"] * grad, out=buf)
            return buf

    class ReturnsGradient(optim.SGD):
        def _update(self, p, grad, state, group):
            return grad

    a = tape.tensor(np.ones(3), requires_grad=True)
    b = tape.tensor(np.full(3, 5.0), requires_grad=True)
    opt = Reusing([a, b], lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        (a.sum() + 2 * b.sum()).backward()
        opt.step()
    np.testing.assert_array_equal(a.numpy(), [0.8] * 3)
    np.testing.assert_array_equal(b.numpy(), [4.6] * 3)
    c = tape.tensor(np.ones(2), requires_grad=True)
    (3 * c.sum()).backward()
    ReturnsGradient([c], lr=0.1).step()
    assert not np.shares_memory(c.numpy(), c.grad.numpy())
