"""Each example runs in-process in a quick mode: its loss must fall, a seed must fix the run, and the
--save / --graph / --plot flags must do what they say. (Their accuracy claims need full runs: see the
README for the commands and the figures measured.) meta_learning.py's MAML meta-gradient is checked against
torch and against finite differences of the outer loss, and a quick run must adapt on held-out tasks."""

import importlib
import sys

import numpy as np
import pytest
from paths import EXAMPLES

import tape
from tape import checkpoint, nn

sys.path.insert(0, str(EXAMPLES))

QUICK = {
    "reverse": ["--steps", "40", "--batch", "32", "--eval-size", "20", "--length", "5"],
    "padded_classification": ["--steps", "60", "--batch", "32", "--eval-size", "50", "--max-length", "16"],
    "char_lm": ["--steps", "40", "--batch", "8", "--context", "32", "--samples", "1"],
}


def run(name, *extra):
    return importlib.import_module(name).main([*QUICK[name], "--quiet", *extra])


def falls(losses, window=10):
    return np.mean(losses[-window:]) < np.mean(losses[:window])


@pytest.mark.parametrize("name", list(QUICK))
def test_example_loss_falls(name, capsys):
    result = run(name)
    assert len(result["losses"]) == int(QUICK[name][1])
    assert falls(result["losses"]), result["losses"]


def test_padded_classification_runs_without_the_mask():
    assert falls(run("padded_classification", "--no-padding-mask")["losses"])


def test_char_lm_reports_baseline_and_samples():
    result = run("char_lm")
    assert 0 < result["valid_loss"] and 2.0 < result["unigram_loss"] < 4.5
    assert result["samples"][0].startswith("Alice ") and len(result["samples"][0]) == len("Alice ") + 200


@pytest.mark.parametrize("name", list(QUICK))
def test_same_seed_same_run_other_seed_other_run(name):
    first = run(name, "--steps", "3", "--seed", "7")["losses"]
    assert run(name, "--steps", "3", "--seed", "7")["losses"] == first
    assert run(name, "--steps", "3", "--seed", "8")["losses"] != first


def test_save_graph_and_plot_flags(tmp_path, capsys, graphviz_dot):
    """(Without matplotlib --plot stops before training: tests/tools/test_report.py checks that.)"""
    import importlib.util

    ckpt, svg, png = tmp_path / "r.npz", tmp_path / "block.svg", tmp_path / "loss.png"
    plot = ["--plot", str(png)] if importlib.util.find_spec("matplotlib") is not None else []
    run("reverse", "--steps", "2", "--save", str(ckpt), "--graph", str(svg), *plot)
    state = checkpoint.load(ckpt)
    assert "blocks.0.attn.qkv.weight" in state and "head.weight" in state
    assert svg.read_text().lstrip().startswith(("<?xml", "<svg"))
    assert "scaled_dot_product_attention" in svg.read_text()
    assert "blocks.0.attn.qkv.weight" in svg.read_text()  # parameters by their module paths
    assert png.exists() == bool(plot)


# -- meta_learning.py: MAML's meta-gradient against torch and finite differences, and a quick run that adapts --
def maml_oracle(torch, params, tasks, inner_steps, inner_lr, first_order):
    """MAML's meta-gradient written independently in torch: one task at a time, ``torch.autograd.grad`` for the
    inner SGD steps (``create_graph`` unless first-order, whose inner gradients are detached constants)."""
    theta = [torch.tensor(p.numpy(), requires_grad=True) for p in params]

    def net(weights, x):
        h = torch.from_numpy(x)
        for layer in range(0, len(weights), 2):
            h = torch.nn.functional.linear(torch.relu(h) if layer else h, weights[layer], weights[layer + 1])
        return h

    query_losses = []
    for sx, sy, qx, qy in zip(*tasks):
        fast = theta
        for _ in range(inner_steps):
            support_loss = ((net(fast, sx) - torch.from_numpy(sy)) ** 2).mean()
            grads = torch.autograd.grad(support_loss, fast, create_graph=not first_order)
            fast = [w - inner_lr * g for w, g in zip(fast, grads)]
        query_losses.append(((net(fast, qx) - torch.from_numpy(qy)) ** 2).mean())
    meta_loss = torch.stack(query_losses).mean()
    return meta_loss.item(), [g.numpy() for g in torch.autograd.grad(meta_loss, theta)]


def small_maml_problem(seed=0):
    import meta_learning

    nn.manual_seed(seed)
    params = list(meta_learning.make_regressor(hidden=6, dtype=np.float64).parameters())
    tasks = meta_learning.sample_tasks(np.random.default_rng(seed), 3, 5, 4, dtype=np.float64)
    return meta_learning, params, tasks


@pytest.mark.parametrize("first_order", [False, True], ids=["maml", "fomaml"])
def test_meta_learning_meta_gradient_matches_torch(torch, first_order):
    meta_learning, params, tasks = small_maml_problem()
    loss = meta_learning.maml_loss(params, tasks, inner_steps=2, inner_lr=0.05, first_order=first_order)
    grads = tape.gradients(loss, params)
    expected_loss, expected_grads = maml_oracle(torch, params, tasks, 2, 0.05, first_order)
    assert np.isclose(loss.item(), expected_loss, rtol=1e-12)
    for got, expected in zip(grads, expected_grads):
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-9, atol=1e-12)


def test_meta_learning_meta_gradient_matches_finite_differences():
    """Central differences of the outer loss along random directions: MAML's gradient predicts the slope, the
    first-order gradient (no Hessian term) does not -- so a zero or wrong second-order term would fail here."""
    meta_learning, params, tasks = small_maml_problem()
    outer = lambda weights, first_order=False: meta_learning.maml_loss(weights, tasks, 2, 0.05, first_order)
    maml, fomaml = (tape.gradients(outer(params, first_order), params) for first_order in (False, True))
    shifted = lambda direction, step: outer(
        [tape.tensor(p.numpy() + step * v, requires_grad=True) for p, v in zip(params, direction)]
    ).item()
    along = lambda grads, direction: sum(np.sum(g.numpy() * v) for g, v in zip(grads, direction))
    rng, eps = np.random.default_rng(1), 1e-6
    for _ in range(3):
        direction = [rng.standard_normal(p.shape) for p in params]
        slope = (shifted(direction, eps) - shifted(direction, -eps)) / (2 * eps)
        assert abs(along(maml, direction) - slope) < 1e-8 * abs(slope), (along(maml, direction), slope)
        assert abs(along(fomaml, direction) - slope) > 1e-2 * abs(slope), (along(fomaml, direction), slope)


def test_meta_learning_adapts_on_held_out_tasks():
    """A quick run (150 meta-steps, seconds): the meta-loss falls, a few SGD steps on 10 support points lower
    the held-out query loss, and by more than they do for the jointly trained network."""
    argv = ["--steps", "150", "--eval-tasks", "100", "--first-order", "--quiet"]
    result = importlib.import_module("meta_learning").main(argv)
    k, maml, baseline = result["inner_steps"], result["curves"]["MAML"], result["curves"]["joint baseline"]
    assert len(result["losses"]) == 150 and falls(result["losses"], window=30), result["losses"]
    assert maml[k] < 0.8 * maml[0], maml
    assert maml[k] < 0.9 * baseline[k], (maml, baseline)
    assert set(result["curves"]) == {"FOMAML", "MAML", "joint baseline"}


# -- options checked before training (issue #35: they used to fail after it, or train on nonsense) -----------
def _refused(name, monkeypatch, capsys, *argv) -> str:
    module = importlib.import_module(name)
    import common

    monkeypatch.setattr(common.Trainer, "__call__", lambda *a: pytest.fail("training started"))
    with pytest.raises(SystemExit):
        module.main([*QUICK.get(name, []), "--quiet", *argv])
    return capsys.readouterr().err


@pytest.mark.parametrize("name", ["reverse", "padded_classification", "char_lm", "meta_learning"])
@pytest.mark.parametrize("flag", ["--save", "--plot", "--report"])
def test_an_output_that_cannot_be_written_stops_before_training(name, flag, tmp_path, monkeypatch, capsys):
    if flag == "--report" and name != "reverse":
        flag = "--save"  # only the flagship writes a report
    # (--plot without matplotlib: both problems are said, its install line and the path)
    err = _refused(name, monkeypatch, capsys, flag, str(tmp_path / "missing" / "out.file"))
    assert f"{flag} " in err and "does not exist" in err
    err = _refused(name, monkeypatch, capsys, flag, str(tmp_path))
    assert "is a directory" in err
    # a read-only mount, where root's os.access still says writable: the write after training failed
    err = _refused(name, monkeypatch, capsys, flag, "/proc/out.file")
    assert f"{flag} /proc/out.file: the directory /proc is not writable" in err


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--batch", "0"], ["--eval-size", "-1"], ["--steps", "x"],
                                  ["--letters", "1"]])
def test_counts_must_be_positive(argv, monkeypatch, capsys):
    err = _refused("reverse", monkeypatch, capsys, *argv)
    assert argv[0] in err and "expected an int >=" in err


def test_distributed_without_mpi_and_mpi_without_distributed_are_refused(monkeypatch, capsys):
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert "--distributed needs an MPI launch" in _refused("reverse", monkeypatch, capsys, "--distributed")
    monkeypatch.setenv("PMI_SIZE", "2")  # what mpiexec -n 2 gives each rank
    err = _refused("reverse", monkeypatch, capsys)
    assert "launched by mpiexec on 2 ranks without --distributed" in err and "add --distributed" in err
    assert "this example trains in one process" in _refused("char_lm", monkeypatch, capsys)


# -- the progress bar: an ETA, and a throughput that counts what was trained ----------------------------------------
class _Clock:
    def __init__(self, tick: float):
        self.now, self.tick = 0.0, tick

    def __call__(self) -> float:
        return self.now


def test_the_progress_bar_gives_the_time_left_in_a_log_and_on_a_terminal():
    import io

    import common

    clock = _Clock(0.5)
    log = io.StringIO()  # a log: a line every 5% of the steps
    bar = common.ProgressBar(200, stream=log, clock=clock)
    for step in range(1, 201):
        clock.now += 0.5  # 0.5 s a step: 100 s in all
        bar.update(step, 1.0, 64)
    lines = log.getvalue().splitlines()
    assert lines[0] == "step 10/200 loss 1.0000 128 tok/s elapsed 0:05 ETA 1:35", lines[0]
    assert lines[-1] == "step 200/200 loss 1.0000 128 tok/s elapsed 1:40 ETA 0:00", lines[-1]

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen, clock = Terminal(), _Clock(0.0)
    bar = common.ProgressBar(10_000, stream=screen, clock=clock)
    clock.now = 3600.0
    bar.update(2500, 1.0, 64)
    assert screen.getvalue().endswith("tok/s  1:00:00<3:00:00 "), screen.getvalue()


COUNTED = {  # items per step the bar should count: what one step trains on
    "reverse": lambda a: int(a["--batch"]) * 2 * int(a["--length"]),  # batch sequences of x SEP reversed(x)[:-1]
    "padded_classification": lambda a: int(a["--batch"]),
    "char_lm": lambda a: int(a["--batch"]) * int(a["--context"]),
}


@pytest.mark.parametrize("name", list(QUICK))
def test_the_throughput_counts_what_a_step_trains_on(name, monkeypatch):
    import common

    counted = []
    monkeypatch.setattr(common.ProgressBar, "update", lambda self, step, loss, items: counted.append(items))
    run(name, "--steps", "2")
    options = dict(zip(QUICK[name][::2], QUICK[name][1::2]))
    assert counted == [COUNTED[name](options)] * 2


def test_meta_learning_counts_its_meta_batch_of_tasks(monkeypatch):
    import common
    import meta_learning

    counted = []
    monkeypatch.setattr(common.ProgressBar, "update", lambda self, step, loss, items: counted.append(items))
    meta_learning.main(["--steps", "2", "--meta-batch", "3", "--quiet", "--eval-tasks", "2"])
    assert set(counted) == {3}



# (example, extra arguments, what each compiled step does): "onnx" -- after its recording call every step runs as one
# ONNX Runtime graph; "eager: why" -- no plan replays it, warned
COMPILED = [
    ("reverse", [], ["onnx"]),
    ("padded_classification", ["--no-padding-mask"], ["onnx"]),
    # the key-padding lengths, other every batch, are fed to the graph every call
    ("padded_classification", [], ["onnx"]),
    ("char_lm", ["--dropout", "0"], ["onnx"]),
    # dropout's masks (nn.Dropout's, attention's) are drawn where fn calls them and fed every call
    ("char_lm", [], ["onnx"]),
    # MAML's inner gradients (tape.gradients inside fn) read the trace's values: each call runs eagerly, warned; the
    # joint baseline compiles
    ("meta_learning", ["--meta-batch", "4", "--eval-tasks", "8", "--eval-steps", "2"],
     ["eager: fn reads the values of a tensor it computed", "onnx"]),
]


@pytest.mark.parametrize(("name", "extra", "expected"), COMPILED)
def test_each_examples_step_runs_through_onnx_runtime_or_says_why_not(name, extra, expected, monkeypatch, ort):
    """`--compile onnxruntime`: every op the step records -- forward and backward -- exports, so after the
    recording call every step runs as one ONNX Runtime graph; where it cannot, the warning says why."""
    import warnings

    steps = []
    original = tape.compile

    def spy(*args, **kwargs):
        steps.append(original(*args, **kwargs))
        return steps[-1]

    monkeypatch.setattr(tape, "compile", spy)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        importlib.import_module(name).main([*QUICK.get(name, []), *extra, "--steps", "6", "--quiet",
                                            "--compile", "onnxruntime"])
    said = [str(w.message) for w in caught if str(w.message).startswith("tape.compile")]
    assert len(steps) == len(expected) and all(step.backend == "onnxruntime" for step in steps)
    for step, want in zip(steps, expected, strict=True):
        counts = (step.records, step.replays, step.onnx_runs)
        if want == "onnx":
            assert counts == (1, 5, 5), counts
        else:
            assert counts == (6, 0, 0) and any(want.split(": ", 1)[1] in m for m in said), (counts, said)
    if expected == ["onnx"]:
        assert not said, said
