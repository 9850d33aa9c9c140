"""Optimizers, gradient clipping and the learning-rate schedule, each compared with PyTorch."""

import math

import numpy as np
import pytest
from oracle import require_torch

import tape
from tape import optim

torch = require_torch()

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
        np.testing.assert_allclose(p.data, q.detach().numpy(), rtol=rtol, atol=atol)


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
    np.testing.assert_array_equal(a.data, np.zeros(3))
    np.testing.assert_array_equal(b.data, np.ones(3))
    assert a._version == version + 1
    assert not a.data.flags.writeable


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
    np.testing.assert_allclose(w.data, target, atol=1e-3)


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
            np.testing.assert_allclose(p.grad.data, q.grad.numpy(), rtol=1e-12)


def test_clip_grad_norm_error_if_nonfinite():
    w = tape.tensor(np.ones(2), requires_grad=True)
    w.grad = tape.tensor(np.array([np.inf, 1.0]))
    with pytest.raises(RuntimeError, match="norm"):
        optim.clip_grad_norm_([w], 1.0, error_if_nonfinite=True)


def test_clip_grad_norm_keeps_float32():
    w = tape.tensor(np.ones(4, dtype=np.float32), requires_grad=True)
    w.grad = tape.tensor(np.full(4, 3.0, dtype=np.float32))
    total = optim.clip_grad_norm_([w], 1.0)
    assert w.grad.dtype == np.float32 and total.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(w.grad.data), 1.0, rtol=1e-5)


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
