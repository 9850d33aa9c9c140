"""tape.distributed: data-parallel training on MPI ranks.

The MPI tests launch this very file with ``mpiexec -n N python tests/train/test_distributed.py SCENARIO OUT`` (the
``__main__`` part at the bottom: each rank writes what it saw to OUT) and compare in the pytest process, where
the one-process reference runs. They skip with a reason when mpi4py or ``mpiexec`` is missing, and fail instead
where ``MINITAPE_REQUIRE_MPI=1`` (CI). Sharding and the missing-mpi4py error are tested in-process.
"""

from __future__ import annotations

import sys  # noqa: I001 -- tests/ (oracle, paths) on the path when this file runs as a script
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository first: tests/ops must not hide ops/

import importlib.util
import os
import shutil
import subprocess
import time

import numpy as np
import pytest
from paths import REPO

sys.path.insert(0, str(REPO / "examples"))

import common  # noqa: E402  -- examples/common.py: TinyGPT, the flagship's model

import tape  # noqa: E402
from tape import distributed as dist  # noqa: E402
from tape import nn, optim  # noqa: E402

BATCH = 12  # the global batch: 6 rows per rank on 2 ranks, 4 on 3


# -- the training run compared: one process, or this rank's shard of the same global batches -----------------
def train(dtype, optimizer: str, steps: int, distributed: bool, seed: int = 0):
    """A small TinyGPT, ``steps`` compiled steps on batches of BATCH; returns (model, global losses, own losses)."""
    nn.manual_seed(seed)
    model = common.TinyGPT(vocab_size=7, context=8, d_model=16, num_heads=2, num_layers=1, dtype=dtype)
    if distributed:
        dist.broadcast_parameters(model)
    if optimizer == "sgd":  # plain SGD sees the gradients' scale: a sum instead of a mean would show
        opt = optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    else:
        # The key projection's bias has a gradient that is zero up to rounding (softmax ignores a shift shared by
        # every key), and Adam scales such noise by lr / eps: with eps = 1e-8 a last-bit difference between two
        # ways of summing the same gradient (one process, or two shards) reaches 1.5e-12 in 5 steps.
        opt = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01, eps=1e-6)
    step = tape.compile(model.loss, model.parameters())
    rng = np.random.default_rng(1)
    losses, own = [], []
    for _ in range(steps):
        tokens, targets = rng.integers(0, 7, size=(BATCH, 8)), rng.integers(0, 7, size=(BATCH, 8))
        if distributed:
            tokens, targets = dist.shard(tokens, targets)
        opt.zero_grad()
        loss, _ = step(tokens, targets)
        own.append(loss.item())
        if distributed:
            dist.allreduce_gradients(model)
        optim.clip_grad_norm_(model.parameters(), 100.0)
        opt.step()
        losses.append(float(dist.allreduce(loss.item(), average=True)) if distributed else loss.item())
    return model, losses, own


# -- launching ---------------------------------------------------------------------------------------------
@pytest.fixture
def mpiexec():
    """The ``mpiexec`` beside this Python (the mpich wheel's), else one on PATH; skip (or, with
    MINITAPE_REQUIRE_MPI=1, fail) without it or without mpi4py."""
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    missing = importlib.util.find_spec("mpi4py") is None or found is None
    if missing:
        message = "MPI is not installed (pip install -e '.[mpi]': mpi4py and the mpich wheel)"
        if os.environ.get("MINITAPE_REQUIRE_MPI") == "1":
            pytest.fail(message + "; MINITAPE_REQUIRE_MPI=1 requires it")
        pytest.skip(message)
    return found


def launch(mpiexec, ranks: int, *args, timeout: float = 120, launcher=()):
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1")
    command = [mpiexec, *launcher, "-n", str(ranks), sys.executable, __file__, *map(str, args)]
    start = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - start


def ran(done) -> None:
    assert done.returncode == 0, f"mpiexec failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"


def per_rank(out: Path, ranks: int) -> list[dict]:
    return [dict(np.load(out / f"rank{r}.npz")) for r in range(ranks)]


def params_of(result: dict) -> dict:
    return {k[len("param/") :]: v for k, v in result.items() if k.startswith("param/")}


# -- N ranks = one process --------------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_two_ranks_float64_equal_one_process(mpiexec, tmp_path, optimizer):
    steps = 5
    ran(launch(mpiexec, 2, "train", tmp_path, "float64", optimizer, steps)[0])
    ranks = per_rank(tmp_path, 2)
    model, losses, _ = train(np.float64, optimizer, steps, distributed=False)
    for name, value in model.state_dict().items():
        np.testing.assert_allclose(params_of(ranks[0])[name], value, rtol=1e-12, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(ranks[0]["losses"], losses, rtol=1e-12)
    assert not np.array_equal(ranks[0]["own"], ranks[1]["own"]), "the two ranks trained on the same rows"
    initial, _, _ = train(np.float64, optimizer, 0, distributed=False)
    moved = max(np.max(np.abs(model.state_dict()[n] - v)) for n, v in initial.state_dict().items())
    assert moved > 1e-3, "training barely moved the parameters: the comparison would not see lost gradients"


@pytest.mark.parametrize("ranks", [2, 3])
def test_float32_losses_equal_one_process_and_ranks_bit_identical(mpiexec, tmp_path, ranks):
    steps = 6
    ran(launch(mpiexec, ranks, "train", tmp_path, "float32", "adamw", steps)[0])
    results = per_rank(tmp_path, ranks)
    _, losses, _ = train(np.float32, "adamw", steps, distributed=False)
    np.testing.assert_allclose(results[0]["losses"], losses, rtol=1e-6)
    for r in range(1, ranks):
        for name, value in params_of(results[0]).items():
            assert params_of(results[r])[name].tobytes() == value.tobytes(), f"rank {r} differs in {name}"
        assert results[r]["losses"].tobytes() == results[0]["losses"].tobytes()


def test_checkpoint_written_by_rank_zero_holds_the_trained_parameters(mpiexec, tmp_path):
    ran(launch(mpiexec, 2, "train", tmp_path, "float64", "sgd", 2)[0])
    saved = tape.checkpoint.load(tmp_path / "model.npz")
    trained = params_of(per_rank(tmp_path, 2)[1])
    assert saved.keys() == trained.keys()
    for name, value in trained.items():
        assert saved[name].tobytes() == value.tobytes(), name
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".npz" and p.name.startswith("model")] == ["model.npz"]


def test_broadcast_makes_differently_initialised_ranks_equal(mpiexec, tmp_path):
    ran(launch(mpiexec, 2, "broadcast", tmp_path)[0])
    before, after = per_rank(tmp_path, 2), None
    after = [{k[len("after/") :]: v for k, v in r.items() if k.startswith("after/")} for r in before]
    first = {k[len("before/") :]: v for k, v in before[0].items() if k.startswith("before/")}
    second = {k[len("before/") :]: v for k, v in before[1].items() if k.startswith("before/")}
    assert any(not np.array_equal(first[k], second[k]) for k in first), "the ranks started equal: nothing tested"
    for name, value in first.items():
        assert after[0][name].tobytes() == value.tobytes(), f"rank 0 changed {name}"
        assert after[1][name].tobytes() == value.tobytes(), f"rank 1 did not get rank 0's {name}"


def test_batchnorm_buffers_follow_rank_zero_as_torchs_ddp(mpiexec, tmp_path):
    # each rank's BatchNorm updates its running statistics from its own shard: without a broadcast the ranks'
    # models differ in eval mode (torch's DDP broadcasts buffers from rank 0); broadcast_parameters gives them too
    ran(launch(mpiexec, 2, "buffers", tmp_path)[0])
    ranks = per_rank(tmp_path, 2)
    for key in ("running_mean", "running_var"):
        assert not np.array_equal(ranks[0][f"drift/{key}"], ranks[1][f"drift/{key}"]), "nothing drifted: not tested"
        for r in (0, 1):
            assert ranks[r][f"after/{key}"].tobytes() == ranks[0][f"drift/{key}"].tobytes(), (r, key)
            assert ranks[r][f"start/{key}"].tobytes() == ranks[0][f"initial/{key}"].tobytes(), (r, key)
    assert ranks[1]["after/num_batches_tracked"] == ranks[0]["drift/num_batches_tracked"] == 1
    assert ranks[1]["same_object"]  # written in place: what a step's closures hold sees the broadcast


def test_mismatched_models_raise_instead_of_reducing_unrelated_numbers(mpiexec, tmp_path):
    done, _ = launch(mpiexec, 2, "mismatch", tmp_path, timeout=60)
    assert done.returncode != 0
    assert "allreduce_gradients: the ranks disagree: rank(s) [1] called another collective" in done.stderr
    assert "shapes/dtypes differ" in done.stderr


def test_flagship_trains_on_two_ranks_like_one_process(mpiexec, tmp_path):
    """examples/reverse.py --distributed: rank 0 alone prints and saves; the trained float32 model is the
    one-process model up to float32 rounding, amplified by AdamW over the steps."""
    import reverse

    flags = ["--steps", "8", "--eval-size", "20", "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1")
    command = [mpiexec, "-n", "2", sys.executable, str(REPO / "examples" / "reverse.py"), "--distributed", *flags]
    done = subprocess.run([*command, "--save", str(tmp_path / "two.npz")], env=env, capture_output=True, text=True,
                          timeout=300)
    ran(done)
    assert done.stdout.count("model: ") == 1 and "on 2 MPI ranks" in done.stdout
    assert done.stdout.count("checkpoint (") == 1 and "token accuracy" in done.stdout
    one = reverse.main([*flags, "--save", str(tmp_path / "one.npz")])
    two, one_saved = tape.checkpoint.load(tmp_path / "two.npz"), tape.checkpoint.load(tmp_path / "one.npz")
    assert f"final training loss {np.mean(one['losses'][-20:]):.4f}" in done.stdout
    # Compared as functions: the key projection's bias gets a gradient that is rounding noise (softmax ignores a
    # shift shared by all keys), which AdamW turns into steps of lr size, differently in the two runs.
    tokens = np.random.default_rng(5).integers(0, 27, size=(8, 24))
    logits = []
    for state in (one_saved, two):
        model = common.TinyGPT(vocab_size=27, context=24, d_model=64, num_heads=4, num_layers=2)
        model.load_state_dict(state)
        with tape.no_grad():
            logits.append(model(tokens).numpy())
    np.testing.assert_allclose(logits[1], logits[0], rtol=1e-4, atol=1e-4)
    assert not np.allclose(logits[0], common.TinyGPT(27, 24)(tokens).numpy(), atol=1e-2), "8 steps changed nothing"


@pytest.mark.parametrize("how", ["shape", "dtype", "size", "order"])
def test_collectives_that_disagree_between_ranks_raise_on_every_rank(mpiexec, tmp_path, how):
    """allreduce of (3,) on one rank and (5,) on the other used to return other numbers on each rank (one read past
    the other's buffer); float32 against float64 summed bytes of different meaning. Now each collective first
    compares a small signature (which collective, call count, shape, dtype) and every rank raises."""
    done, _ = launch(mpiexec, 2, "disagree", tmp_path, how, timeout=60)
    ran(done)
    messages = [str(r["error"]) for r in per_rank(tmp_path, 2)]
    for r, message in enumerate(messages):
        assert message.startswith("tape.distributed."), f"rank {r} did not raise: {message!r}"
        assert "the ranks disagree" in message, message


# -- a rank that fails: the others end too, with a clear error, within a timeout -----------------------------
def test_a_rank_raising_ends_every_rank(mpiexec, tmp_path):
    done, seconds = launch(mpiexec, 2, "fail", tmp_path, "raise", timeout=60)
    assert done.returncode != 0
    assert "[minitape rank 1 of 2] uncaught exception; aborting every rank" in done.stderr
    assert "ValueError: rank 1 fails on purpose" in done.stderr
    assert seconds < 30


def test_a_hung_rank_makes_the_others_fail_after_the_timeout(mpiexec, tmp_path):
    done, seconds = launch(mpiexec, 2, "fail", tmp_path, "hang", timeout=60)
    assert done.returncode != 0
    assert "tape.distributed.allreduce_gradients: rank 0 of 2 waited 3 s for the other ranks" in done.stderr
    assert "[minitape rank 0 of 2] uncaught exception; aborting every rank" in done.stderr
    assert 3 <= seconds < 30


def test_a_killed_rank_ends_the_job_with_the_signal_named(mpiexec, tmp_path):
    """MPICH's mpiexec notices a rank killed by a signal and ends every rank (``-disable-auto-cleanup`` too, as
    measured: MPICH 5.0.2); the deadline is for what it cannot see (a hang, the test above)."""
    done, seconds = launch(mpiexec, 2, "fail", tmp_path, "kill", timeout=60)
    assert done.returncode != 0
    assert "Killed (signal 9)" in done.stdout + done.stderr
    assert seconds < 30


# -- in-process: sharding, and no mpi4py -----------------------------------------------------------------
@pytest.mark.parametrize("size", [0, 1, 7, 10, 12])
@pytest.mark.parametrize("replicas", [1, 3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_sampler_matches_torch_without_shuffle(torch, size, replicas, drop_last):
    from torch.utils.data import DistributedSampler as TorchSampler

    for r in range(replicas):
        ours = dist.DistributedSampler(size, replicas, r, shuffle=False, drop_last=drop_last)
        theirs = TorchSampler(range(size), replicas, r, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_sampler_shuffles_by_epoch_into_equal_disjoint_shards():
    shards = [dist.DistributedSampler(10, 2, r, seed=3) for r in range(2)]
    first = [s.indices() for s in shards]
    assert len(first[0]) == len(first[1]) == 5
    assert sorted(np.concatenate(first).tolist()) == list(range(10))
    assert not np.array_equal(np.concatenate(first), np.arange(10)), "not shuffled"
    for s in shards:
        s.set_epoch(1)
    second = np.concatenate([s.indices() for s in shards])
    assert sorted(second.tolist()) == list(range(10)) and not np.array_equal(second, np.concatenate(first))


def test_sampler_takes_negative_seeds_and_numpy_integers_as_torch(torch):
    """torch's sampler takes a negative seed (its generator maps it to uint64) and numpy integers; ours gave numpy's
    bare "expected non-negative integer" error and refused np.int64(10)."""
    from torch.utils.data import DistributedSampler as TorchSampler

    shards = [dist.DistributedSampler(10, 2, r, seed=-3) for r in range(2)]
    assert sorted(np.concatenate([s.indices() for s in shards]).tolist()) == list(range(10))
    assert len(list(TorchSampler(range(10), 2, 0, seed=-3))) == len(shards[0]) == 5
    for s in shards:
        s.set_epoch(np.int64(2))
    assert sorted(np.concatenate([s.indices() for s in shards]).tolist()) == list(range(10))
    typed = dist.DistributedSampler(np.int64(10), np.int64(3), np.int32(1), shuffle=False)
    assert list(typed) == list(TorchSampler(range(10), 3, 1, shuffle=False))
    for bad, match in ((dict(dataset=-1), "dataset"), (dict(dataset=2.5), "dataset"),
                       (dict(seed=1.5), "seed"), (dict(seed="0"), "seed")):
        with pytest.raises((ValueError, TypeError), match=f"DistributedSampler: .*{match}"):
            dist.DistributedSampler(**{"dataset": 10, "num_replicas": 2, "rank": 0, **bad})
    # torch's form: the dataset itself (its len), also where torch programs import it from
    from tape.torch.utils.data.distributed import DistributedSampler

    assert list(DistributedSampler(list("abcdefghij"), 3, 1, shuffle=False)) == list(typed)
    with pytest.raises(TypeError, match="DistributedSampler.set_epoch: .*epoch"):
        shards[0].set_epoch(0.5)


def test_shard_splits_rows_equally_and_refuses_uneven_splits():
    rows = np.arange(12).reshape(6, 2)
    parts = [dist.shard(rows, rows[:, 0], num_replicas=3, rank=r) for r in range(3)]
    assert np.array_equal(np.concatenate([p[0] for p in parts]), rows)
    assert all(np.array_equal(p[1], p[0][:, 0]) for p in parts)
    with pytest.raises(ValueError, match="7 rows do not split into 2 equal shards"):
        dist.shard(np.arange(7), num_replicas=2, rank=0)
    with pytest.raises(ValueError, match="0 <= rank < num_replicas, got num_replicas=2, rank=2"):
        dist.shard(rows, num_replicas=2, rank=2)


def test_without_mpi4py_tape_imports_and_init_names_the_install(monkeypatch):
    code = ("import sys; sys.modules['mpi4py'] = None; import tape, ops; from tape import distributed\n"
            "try:\n    distributed.init()\nexcept ImportError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr
    assert "tape.distributed.init needs mpi4py and an MPI library: pip install -e '.[mpi]' in a clone" in done.stdout


def test_uninitialised_use_says_to_call_init():
    if dist.is_initialized():
        pytest.skip("this process joined an MPI job")
    with pytest.raises(RuntimeError, match=r"tape.distributed.allreduce_gradients: call tape.distributed.init"):
        dist.allreduce_gradients([])


# -- the ranks' side -----------------------------------------------------------------------------------------
def _dump(out: Path, **parts) -> None:
    np.savez(out / f"rank{dist.rank()}.npz", **parts)


def _scenario_train(out: Path, dtype: str, optimizer: str, steps: str) -> None:
    model, losses, own = train(np.dtype(dtype).type, optimizer, int(steps), distributed=True)
    dist.save_checkpoint(model, out / "model.npz")
    _dump(out, losses=losses, own=own, **{f"param/{k}": v for k, v in model.state_dict().items()})


def _scenario_broadcast(out: Path) -> None:
    nn.manual_seed(dist.rank())
    model = common.TinyGPT(vocab_size=7, context=8, d_model=16, num_heads=2, num_layers=1)
    before = {f"before/{k}": np.array(v) for k, v in model.state_dict().items()}
    dist.broadcast_parameters(model)
    _dump(out, **before, **{f"after/{k}": v for k, v in model.state_dict().items()})


def _scenario_buffers(out: Path) -> None:
    bn = nn.BatchNorm1d(3, dtype=np.float64)
    with tape.no_grad():
        bn.running_mean.fill_(float(dist.rank() + 1))  # ranks built apart: broadcast_parameters evens them
    initial = {f"initial/{k}": np.array(v) for k, v in bn.state_dict().items()}
    dist.broadcast_parameters(bn)
    start = {f"start/{k}": np.array(v) for k, v in bn.state_dict().items()}
    bn(tape.tensor(np.random.default_rng(dist.rank()).normal(size=(4, 3))))  # this rank's shard
    drift = {f"drift/{k}": np.array(v) for k, v in bn.state_dict().items()}
    held = bn.running_mean
    dist.broadcast_buffers(bn)
    after = {f"after/{k}": np.array(v) for k, v in bn.state_dict().items()}
    _dump(out, **initial, **start, **drift, **after, same_object=np.array(bn.running_mean is held))


def _scenario_mismatch(out: Path) -> None:
    layers = [nn.Linear(3, 4, dtype=np.float64)] + [nn.Linear(4, 4, dtype=np.float64)] * dist.rank()
    params = [p for layer in layers for p in layer.parameters()]
    for p in params:
        p.grad = tape.tensor(np.ones(p.shape))
    dist.allreduce_gradients(params)


def _scenario_fail(out: Path, how: str) -> None:
    model = common.TinyGPT(vocab_size=7, context=8, d_model=16, num_heads=2, num_layers=1)
    if dist.rank() == 1:
        if how == "raise":
            raise ValueError("rank 1 fails on purpose")
        if how == "kill":
            os.kill(os.getpid(), 9)
        time.sleep(60)  # "hang": never joins the collective
    model.loss(np.zeros((2, 8), dtype=np.int64), np.zeros((2, 8), dtype=np.int64)).backward()
    dist.allreduce_gradients(model)


def _scenario_disagree(out: Path, how: str) -> None:
    r = dist.rank()
    value = {
        "shape": np.ones(3 + 2 * r),
        "dtype": np.ones(4, dtype=np.float64 if r else np.float32),
        "size": np.ones((2, 3) if r else (3, 2)),
        "order": np.ones(3),
    }[how]
    try:
        if how == "order" and r == 1:
            dist.broadcast_parameters([tape.tensor(value)])
        else:
            dist.allreduce(value)
        error = "no error"
    except dist.DistributedError as e:
        error = str(e)
    _dump(out, error=np.array(error))


if __name__ == "__main__":
    scenario, where, *rest = sys.argv[1:]
    dist.init(timeout=3 if scenario == "fail" else 60)
    globals()[f"_scenario_{scenario}"](Path(where), *rest)
