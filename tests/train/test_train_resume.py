"""Resuming training from a checkpoint: a run interrupted at step 10 of 20, saved (model, optimizer and
learning-rate schedule in one file) and loaded into freshly built objects, ends bit for bit where the
uninterrupted run ends."""

import numpy as np
import pytest

import ops
import tape
from tape import checkpoint, nn, optim

TOTAL, HALF = 20, 10


def _build(seed):
    rng = np.random.default_rng(seed)
    model = nn.Sequential(nn.Linear(4, 16, rng=rng), nn.GELU(), nn.Linear(16, 3, rng=rng))
    return model


OPTIMIZERS = {
    "adam": lambda params: (optim.Adam(params, lr=0.05), None),
    "adamw-amsgrad-schedule": lambda params: (
        (opt := optim.AdamW(params, lr=0.05, weight_decay=0.1, amsgrad=True)),
        optim.WarmupCosineLR(opt, warmup_steps=4, total_steps=TOTAL, min_lr=0.001)),
    "sgd-nesterov-schedule": lambda params: (
        (opt := optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)),
        optim.WarmupCosineLR(opt, warmup_steps=4, total_steps=TOTAL)),
}


def _batch(step):
    """The data of one step depends on the step only, so an interrupted run sees the same batches."""
    rng = np.random.default_rng(1000 + step)
    return rng.normal(size=(8, 4)).astype(np.float32), rng.integers(0, 3, size=8)


def _train(model, opt, schedule, start, stop):
    for step in range(start, stop):
        x, y = _batch(step)
        opt.zero_grad()
        ops.cross_entropy(model(tape.tensor(x)), y).backward()
        optim.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if schedule is not None:
            schedule.step()


def _assert_same_state(model_a, opt_a, model_b, opt_b):
    for (name, a), (other, b) in zip(model_a.state_dict().items(), model_b.state_dict().items()):
        assert name == other and a.dtype == b.dtype
        assert np.array_equal(a, b), f"parameter {name} differs"
    state_a, state_b = opt_a.state_dict(), opt_b.state_dict()
    assert state_a.keys() == state_b.keys()
    for key in state_a:
        assert state_a[key].dtype == state_b[key].dtype and np.array_equal(state_a[key], state_b[key]), key


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_resumed_run_ends_bit_for_bit_where_the_uninterrupted_run_ends(tmp_path, name):
    make = OPTIMIZERS[name]
    model = _build(0)
    opt, schedule = make(model.parameters())
    _train(model, opt, schedule, 0, TOTAL)

    first = _build(0)
    first_opt, first_schedule = make(first.parameters())
    _train(first, first_opt, first_schedule, 0, HALF)
    path = checkpoint.save(first, tmp_path / "step10.npz", optimizer=first_opt, schedule=first_schedule, step=HALF)
    del first, first_opt, first_schedule

    resumed = _build(123)  # other initial weights: everything must come from the file
    resumed_opt, resumed_schedule = make(resumed.parameters())
    extra = checkpoint.load(path, resumed, optimizer=resumed_opt, schedule=resumed_schedule)
    start = int(extra["step"])
    assert start == HALF
    _train(resumed, resumed_opt, resumed_schedule, start, TOTAL)

    _assert_same_state(model, opt, resumed, resumed_opt)
    assert resumed_opt.lr == opt.lr


def test_resuming_without_the_optimizer_state_does_not_end_in_the_same_place(tmp_path):
    """The control for the test above: it would notice a checkpoint that lost the optimizer's state."""
    model = _build(0)
    opt, _ = OPTIMIZERS["adam"](model.parameters())
    _train(model, opt, None, 0, TOTAL)

    first = _build(0)
    first_opt, _ = OPTIMIZERS["adam"](first.parameters())
    _train(first, first_opt, None, 0, HALF)
    path = checkpoint.save(first, tmp_path / "step10.npz")

    resumed = _build(123)
    resumed_opt, _ = OPTIMIZERS["adam"](resumed.parameters())
    checkpoint.load(path, resumed)
    _train(resumed, resumed_opt, None, HALF, TOTAL)
    assert not all(np.array_equal(a, b) for a, b in zip(model.state_dict().values(), resumed.state_dict().values()))
