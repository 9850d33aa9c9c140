"""RMSprop, Adagrad, SGD with nesterov and torch's schedulers (tape/train/optim.py) against torch.optim: the same
parameters, gradients and hyper-parameters for several steps give parameters equal in float64 to 1e-12 and the
same learning rates (and momenta, for OneCycleLR) at every step."""

import inspect
import math

import numpy as np
import pytest

import tape
from tape import optim

STEPS = 8


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(3, 4)), rng.normal(size=(4,))], [
        [rng.normal(size=(3, 4)), rng.normal(size=(4,))] for _ in range(STEPS)
    ]


def _run_both(torch, make_ours, make_theirs, schedule=None, metrics=None):
    """Step both optimizers (and schedules) through the same gradients; compare after every step."""
    start, grads = _problem()
    ours = [tape.tensor(a, requires_grad=True) for a in start]
    theirs = [torch.tensor(a, requires_grad=True) for a in start]
    # two groups, so per-group options and lrs are exercised
    opt_a = make_ours([{"params": ours[:1]}, {"params": ours[1:], "lr": 0.05}])
    opt_b = make_theirs([{"params": theirs[:1]}, {"params": theirs[1:], "lr": 0.05}])
    sched_a, sched_b = schedule(opt_a, opt_b) if schedule else (None, None)
    for k, step_grads in enumerate(grads):
        for p, q, g in zip(ours, theirs, step_grads):
            p.grad, q.grad = tape.tensor(g), torch.tensor(g)
        opt_a.step(), opt_b.step()
        if sched_a is not None:
            if metrics is None:
                sched_a.step(), sched_b.step()
            else:
                sched_a.step(metrics[k]), sched_b.step(metrics[k])
            assert sched_a.get_last_lr() == pytest.approx(sched_b.get_last_lr(), rel=1e-14, abs=0), f"lr at {k}"
            for ga, gb in zip(opt_a.param_groups, opt_b.param_groups):
                for key in ("momentum", "betas"):
                    if key in gb:
                        assert ga[key] == pytest.approx(gb[key], rel=1e-14), f"{key} at step {k}"
        for p, q in zip(ours, theirs):
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-12, err_msg=f"step {k}")


OPTIMIZERS = {
    "RMSprop": dict(lr=0.01),
    "RMSprop centered momentum wd": dict(lr=0.01, alpha=0.9, momentum=0.8, centered=True, weight_decay=0.1),
    "Adagrad": dict(lr=0.1),
    "Adagrad decay wd init": dict(lr=0.1, lr_decay=0.05, weight_decay=0.01, initial_accumulator_value=0.3),
    "SGD nesterov": dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    # maximize: the gradient negated before weight decay and the rule (an AttributeError/TypeError before)
    "SGD maximize": dict(lr=0.1, momentum=0.9, weight_decay=0.01, maximize=True, foreach=False),
    "Adam maximize amsgrad": dict(lr=0.1, weight_decay=0.1, amsgrad=True, maximize=True, fused=False),
    "Adam decoupled_weight_decay": dict(lr=0.1, weight_decay=0.1, decoupled_weight_decay=True),
    "AdamW maximize": dict(lr=0.1, maximize=True, capturable=False),
    "RMSprop maximize": dict(lr=0.01, momentum=0.5, maximize=True),
    "Adagrad maximize": dict(lr=0.1, weight_decay=0.01, maximize=True),
    "Adadelta maximize": dict(lr=0.5, weight_decay=0.01, maximize=True, foreach=True),
    # torch's other Adam variants (an AttributeError before)
    "Adamax": dict(lr=0.05),
    "Adamax wd maximize": dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1, maximize=True),
    "NAdam": dict(lr=0.05),
    "NAdam decoupled": dict(lr=0.05, weight_decay=0.1, momentum_decay=0.01, decoupled_weight_decay=True),
    "NAdam l2": dict(lr=0.05, weight_decay=0.1),
    "RAdam": dict(lr=0.05),  # 8 steps: rho_t passes 5 at step 6 with beta2 = 0.999, both branches run
    "RAdam decoupled": dict(lr=0.05, betas=(0.9, 0.9), weight_decay=0.1, decoupled_weight_decay=True),
}


@pytest.mark.parametrize("label", OPTIMIZERS)
def test_optimizer_matches_torch(torch, label):
    name, options = label.split()[0], OPTIMIZERS[label]
    _run_both(torch, lambda p: getattr(optim, name)(p, **options), lambda p: getattr(torch.optim, name)(p, **options))


SCHEDULES = {
    "StepLR": (dict(step_size=3, gamma=0.5), "SGD"),
    "MultiStepLR": (dict(milestones=[2, 5, 5], gamma=0.3), "SGD"),
    "ExponentialLR": (dict(gamma=0.8), "SGD"),
    "CosineAnnealingLR": (dict(T_max=3, eta_min=0.001), "SGD"),  # 8 steps: past T_max, the periodic branch too
    "LambdaLR": (dict(lr_lambda=lambda e: 1 / (1 + e)), "SGD"),
    "OneCycleLR": (dict(max_lr=[0.5, 0.2], total_steps=STEPS), "SGD"),
    "OneCycleLR three-phase linear": (
        dict(max_lr=0.3, total_steps=STEPS + 1, three_phase=True, anneal_strategy="linear"),
        "SGD",
    ),
    "OneCycleLR adam": (dict(max_lr=0.01, total_steps=STEPS, pct_start=0.4), "Adam"),
}


@pytest.mark.parametrize("label", SCHEDULES)
def test_schedule_matches_torch(torch, label):
    options, optimizer = SCHEDULES[label]
    name = label.split()[0]
    extra = dict(momentum=0.9) if optimizer == "SGD" else {}
    _run_both(
        torch,
        lambda p: getattr(optim, optimizer)(p, lr=0.1, **extra),
        lambda p: getattr(torch.optim, optimizer)(p, lr=0.1, **extra),
        schedule=lambda a, b: (
            getattr(optim, name)(a, **options),
            getattr(torch.optim.lr_scheduler, name)(b, **options),
        ),
    )


@pytest.mark.parametrize("options", [dict(patience=1), dict(mode="max", patience=0, threshold_mode="abs", cooldown=1)])
def test_reduce_lr_on_plateau_matches_torch(torch, options):
    metrics = [1.0, 0.9, 0.95, 0.95, 0.96, 0.5, 0.5, 0.5]
    _run_both(
        torch,
        lambda p: optim.SGD(p, lr=0.1),
        lambda p: torch.optim.SGD(p, lr=0.1),
        schedule=lambda a, b: (
            optim.ReduceLROnPlateau(a, factor=0.5, **options),
            torch.optim.lr_scheduler.ReduceLROnPlateau(b, factor=0.5, **options),
        ),
        metrics=metrics,
    )


def test_scheduler_state_round_trip_and_refusals():
    p = tape.tensor(np.zeros(2), requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    sched = optim.CosineAnnealingLR(opt, T_max=4)
    for _ in range(2):
        sched.step()
    state = sched.state_dict()
    other = optim.CosineAnnealingLR(optim.SGD([p], lr=1.0), T_max=4)
    other.load_state_dict(state)
    sched.step(), other.step()
    assert other.get_last_lr() == sched.get_last_lr() and math.isclose(
        sched.get_last_lr()[0], 0.5 * (1 + math.cos(0.75 * math.pi))
    )
    with pytest.raises(ValueError, match="CosineAnnealingLR.load_state_dict"):
        other.load_state_dict({"last_epoch": np.array(1)})
    with pytest.raises(ValueError, match="OneCycleLR: stepped"):
        one = optim.OneCycleLR(optim.SGD([p], lr=1.0, momentum=0.9), max_lr=1.0, total_steps=2)
        for _ in range(3):
            one.step()
    with pytest.raises(ValueError, match="RMSprop: alpha must be >= 0"):
        optim.RMSprop([p], alpha=-1.0)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"])
def test_optimizers_take_torchs_arguments_in_torchs_order_with_torchs_defaults(torch, name):
    """Every argument: positional ones in torch's order, keyword-only ones by name, each with torch's default."""
    ours = list(inspect.signature(getattr(optim, name)).parameters.values())
    theirs = list(inspect.signature(getattr(torch.optim, name)).parameters.values())
    assert [(p.name, p.kind) for p in ours if p.kind is not p.KEYWORD_ONLY] == [
        (p.name, p.kind) for p in theirs if p.kind is not p.KEYWORD_ONLY
    ]
    assert {p.name for p in ours if p.kind is p.KEYWORD_ONLY} == {p.name for p in theirs if p.kind is p.KEYWORD_ONLY}
    defaults = {q.name: q.default.item() if hasattr(q.default, "item") else q.default for q in theirs}  # lr: a Tensor
    for p in ours[1:]:
        assert p.default == defaults[p.name], (name, p.name)


def test_a_differentiable_step_is_refused_and_flags_must_be_bools():
    p = tape.tensor(np.zeros(2), requires_grad=True)
    with pytest.raises(ValueError, match="Adam: differentiable=True .* is not supported"):
        optim.Adam([p], differentiable=True)
    with pytest.raises(TypeError, match="SGD: argument 'maximize' expected a bool, got str 'yes'"):
        optim.SGD([p], lr=0.1, maximize="yes")


def test_reduce_lr_on_plateau_state_round_trip():
    """A plateau schedule restored from its state_dict mid-run continues as the uninterrupted one (its best metric,
    bad-epoch and cooldown counts are state: losing them restarts patience and changes when the lr drops)."""
    metrics = [1.0, 0.9, 0.95, 0.95, 0.96, 0.5, 0.5, 0.5, 0.5, 0.5]
    p = tape.tensor(np.zeros(2), requires_grad=True)
    whole = optim.ReduceLROnPlateau(optim.SGD([p], lr=0.1), factor=0.5, patience=1, cooldown=1)
    half = optim.ReduceLROnPlateau(optim.SGD([p], lr=0.1), factor=0.5, patience=1, cooldown=1)
    for m in metrics[:4]:
        whole.step(m), half.step(m)
    state = half.state_dict()
    resumed = optim.ReduceLROnPlateau(optim.SGD([p], lr=0.1), factor=0.5, patience=1, cooldown=1)
    resumed.load_state_dict(state)
    lrs_whole, lrs_resumed = [], []
    for m in metrics[4:]:
        whole.step(m), resumed.step(m)
        lrs_whole.append(whole.get_last_lr()), lrs_resumed.append(resumed.get_last_lr())
    assert lrs_resumed == lrs_whole and lrs_whole[-1] < lrs_whole[0]
    with pytest.raises(ValueError, match="ReduceLROnPlateau.load_state_dict"):
        resumed.load_state_dict({"best": np.array(1.0)})


# schedulers built from others or from several arguments: (ours, theirs) from each library's optim and optimizer
COMPOSED = {
    "MultiplicativeLR": lambda m, o: m.lr_scheduler.MultiplicativeLR(o, lr_lambda=lambda e: 0.9 if e % 2 else 1.1),
    "ConstantLR": lambda m, o: m.lr_scheduler.ConstantLR(o, factor=0.25, total_iters=3),
    "LinearLR": lambda m, o: m.lr_scheduler.LinearLR(o, start_factor=0.1, end_factor=0.9, total_iters=4),
    "PolynomialLR": lambda m, o: m.lr_scheduler.PolynomialLR(o, total_iters=5, power=2.0),
    "CosineAnnealingWarmRestarts": lambda m, o: m.lr_scheduler.CosineAnnealingWarmRestarts(o, 2, 2, eta_min=0.01),
    "SequentialLR warmup then cosine": lambda m, o: m.lr_scheduler.SequentialLR(
        o, [m.lr_scheduler.LinearLR(o, 0.1, total_iters=3), m.lr_scheduler.CosineAnnealingLR(o, T_max=4)], [3]
    ),
    "SequentialLR three": lambda m, o: m.lr_scheduler.SequentialLR(
        o,
        [m.lr_scheduler.ConstantLR(o, 0.5, total_iters=2), m.lr_scheduler.ExponentialLR(o, 0.9),
         m.lr_scheduler.StepLR(o, 2, 0.5)],
        [2, 5],
    ),
    "ChainedScheduler": lambda m, o: m.lr_scheduler.ChainedScheduler(
        [m.lr_scheduler.ConstantLR(o, 0.5, total_iters=3), m.lr_scheduler.ExponentialLR(o, 0.9)]
    ),
}  # fmt: skip


@pytest.mark.parametrize("label", COMPOSED)
def test_composed_and_warmup_schedules_match_torch(torch, label):
    """Each a NameError/AttributeError before; SequentialLR restarts its next scheduler at epoch 0 through the
    closed form (step(0)), ChainedScheduler composes factors on the groups' lrs -- as torch's."""
    import tape.torch as tt

    _run_both(
        torch,
        lambda p: optim.SGD(p, lr=0.1, momentum=0.9),
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
        schedule=lambda a, b: (COMPOSED[label](tt.optim, a), COMPOSED[label](torch.optim, b)),
    )


@pytest.mark.parametrize("label", ["CosineAnnealingLR", "StepLR", "LinearLR", "PolynomialLR", "ConstantLR"])
def test_stepping_to_an_epoch_uses_the_closed_form_as_torchs(torch, label):
    import tape.torch as tt

    options = {"CosineAnnealingLR": dict(T_max=6), "StepLR": dict(step_size=2, gamma=0.5),
               "LinearLR": dict(start_factor=0.2, total_iters=4), "PolynomialLR": dict(total_iters=4),
               "ConstantLR": dict(factor=0.5, total_iters=3)}[label]  # fmt: skip
    a = getattr(tt.optim.lr_scheduler, label)(optim.SGD([tape.tensor(np.zeros(1), requires_grad=True)], 0.1), **options)
    b = getattr(torch.optim.lr_scheduler, label)(torch.optim.SGD([torch.zeros(1, requires_grad=True)], 0.1), **options)
    for epoch in (3, 0, 5, 1):
        a.step(epoch), b.step(epoch)
        assert a.get_last_lr() == pytest.approx(b.get_last_lr(), rel=1e-14), epoch


def test_composite_schedule_state_round_trip():
    import tape.torch as tt

    def make(p):
        o = optim.SGD([p], lr=0.1)
        s = tt.optim.lr_scheduler.SequentialLR(
            o, [tt.optim.lr_scheduler.LinearLR(o, 0.1, total_iters=3), tt.optim.lr_scheduler.ExponentialLR(o, 0.9)], [3]
        )
        return o, s

    p = tape.tensor(np.zeros(2), requires_grad=True)
    whole_opt, whole = make(p)
    half_opt, half = make(p)
    for _ in range(2):
        whole.step(), half.step()
    state, opt_state = half.state_dict(), half_opt.state_dict()
    resumed_opt, resumed = make(p)
    resumed_opt.load_state_dict(opt_state)
    resumed.load_state_dict(state)
    for _ in range(4):
        whole.step(), resumed.step()
        assert resumed.get_last_lr() == whole.get_last_lr()
