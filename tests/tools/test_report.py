"""The training report (tape.tools.report) and the DAG's gradient flow: the numbers it shows are the gradients
(checked against torch with retain_grad, and against .grad after backward() and GradientTape), a detached branch
and a branch multiplied by zero show dead, a backward stub shows red with what lies behind it cut off, NaN/inf
red; the HTML is self-contained and a headless Chromium renders it without console errors. The examples' up-front
checks, log-friendly progress bar and option help are here too."""

import base64
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from paths import EXAMPLES

import ops
import tape
from tape import STUB, defop, nn, optim
from tape.tapes import DEAD_COLOUR, NONFINITE_COLOUR, STUB_COLOUR
from tape.tools.report import SECTIONS, Recorder, Trace, attention_weights, dag_data

sys.path.insert(0, str(EXAMPLES))


class TwoBranch(nn.Module):
    """``live`` reaches the loss; ``detached`` is cut by detach(), ``zeroed`` is multiplied by exactly 0."""

    def __init__(self, rng):
        super().__init__()
        self.live = nn.Linear(3, 4, dtype=np.float64, rng=rng)
        self.detached = nn.Linear(3, 4, dtype=np.float64, rng=rng)
        self.zeroed = nn.Linear(3, 4, dtype=np.float64, rng=rng)
        self.head = nn.Linear(4, 2, dtype=np.float64, rng=rng)

    def forward(self, x):
        h = ops.tanh(self.live(x)) + self.detached(x).detach() + self.zeroed(x) * 0.0
        return self.head(h)

    def loss(self, x):
        return ops.sum(self(x) ** 2)


@pytest.fixture
def model():
    return TwoBranch(np.random.default_rng(0))


X = np.random.default_rng(1).normal(size=(5, 3))


def nodes_by_name(graph):
    return {n["name"]: n for n in graph["nodes"]}


def test_flow_equals_torch_gradients_of_parameters_and_intermediates(model, torch):
    with Trace(model) as trace:
        pre = model.live(X)
        loss = ops.sum(model.head(ops.tanh(pre)) ** 2)
    flow = trace.gradient_flow(loss)
    t = {name: torch.tensor(p.numpy(), requires_grad=True) for name, p in model.named_parameters()}
    t_pre = torch.tensor(X) @ t["live.weight"].T + t["live.bias"]
    t_pre.retain_grad()
    t_loss = ((torch.tanh(t_pre) @ t["head.weight"].T + t["head.bias"]) ** 2).sum()
    t_loss.backward()
    for name, p in model.named_parameters():
        if name.startswith("live") or name.startswith("head"):
            assert flow[p.id] == pytest.approx(float(t[name].grad.norm()), rel=1e-12)
    assert flow[pre.id] == pytest.approx(float(t_pre.grad.norm()), rel=1e-12)
    assert flow[loss.id] == 1.0


def test_flow_equals_grad_after_backward_and_gradient_tape(model):
    with Trace(model) as trace:
        loss = model.loss(X)
    flow = trace.gradient_flow(loss)
    assert all(p.grad is None for p in model.parameters())  # the flow touches no .grad
    model.loss(X).backward()
    with tape.GradientTape() as gt:
        taped = model.loss(X)
    params = list(model.parameters())
    for p, g in zip(params, gt.compute_gradients(taped, params)):
        if p.grad is None:
            assert p.id not in flow and g is None
        else:
            assert flow[p.id] == pytest.approx(np.linalg.norm(p.grad.numpy()), rel=1e-12)
            assert flow[p.id] == pytest.approx(np.linalg.norm(g.numpy()), rel=1e-12)


def test_detached_and_zeroed_branches_show_dead(model):
    with Trace(model) as trace:
        loss = model.loss(X)
    flow = trace.gradient_flow(loss)
    graph = dag_data(trace, flow)
    nodes = nodes_by_name(graph)
    for name in ("detached.weight", "detached.bias"):
        assert nodes[name]["status"] == "missing" and nodes[name]["fill"] == DEAD_COLOUR
    for name in ("zeroed.weight", "zeroed.bias"):
        assert nodes[name]["status"] == "zero" and nodes[name]["fill"] == DEAD_COLOUR
    for name in ("live.weight", "head.weight", "live"):
        assert nodes[name]["status"] == "ok" and nodes[name]["fill"] != DEAD_COLOUR
    assert nodes["detached"]["status"] == "missing"  # the module's output: the whole branch is grey
    dead_edges = [e for e in graph["edges"] if e["from"] == nodes["detached.weight"]["key"]]
    assert dead_edges and all(e["status"] == "missing" and e["colour"] == DEAD_COLOUR for e in dead_edges)
    dot_line = next(line for line in trace.to_dot(view=trace.view(flow)).splitlines() if "detached.weight" in line)
    assert "no gradient" in dot_line and f'fillcolor="{DEAD_COLOUR}"' in dot_line


@pytest.fixture
def stubbed_op():
    op = defop("report_stub_mul", family="test", inputs=("a", "b"), forward=lambda a, b: a * b,
               vjps=(lambda g, ans, a, b: g * b, STUB))
    yield op
    tape.unregister_op("report_stub_mul")


def test_a_stub_shows_red_and_cuts_what_lies_behind_it(model, stubbed_op):
    w = tape.tensor(np.ones(4), requires_grad=True)
    with Trace(model) as trace:
        h = model.live(X)
        loss = ops.sum(model.head(stubbed_op(h, model.detached(X))) ** 2) + ops.sum(w * w)
    flow = trace.gradient_flow(loss)  # the stub's path raises in a plain backward; the flow shows the rest
    graph = dag_data(trace, flow)
    nodes = nodes_by_name(graph)
    stub = next(n for n in graph["nodes"] if n.get("op") == "report_stub_mul")
    assert stub["status"] == "stub" and stub["fill"] == STUB_COLOUR and stub["stub"] == ["b"]
    assert nodes["detached.weight"]["status"] == "missing"
    assert nodes["live.weight"]["status"] == "missing"  # behind the stub too: its other input's rule never ran
    assert nodes["head.weight"]["status"] == "ok"
    assert flow[w.id] == pytest.approx(2 * np.linalg.norm(w.numpy()))
    assert "BACKWARD STUB: b" in trace.to_dot(view=trace.view(flow))


def test_nonfinite_gradients_are_red():
    x = tape.tensor(np.array([0.0, 4.0]), requires_grad=True)
    with Trace() as trace:
        loss = ops.sum(ops.sqrt(x))
    flow = trace.gradient_flow(loss)
    assert np.isinf(flow[x.id])
    node = next(n for n in dag_data(trace, flow)["nodes"] if n["kind"] == "input")
    assert node["status"] == "nonfinite" and node["fill"] == NONFINITE_COLOUR and node["norm"] == "inf"
    assert f'fillcolor="{NONFINITE_COLOUR}"' in trace.to_dot(view=trace.view(flow))


def test_names_call_sites_and_clusters():
    nn.manual_seed(0)
    block = nn.Sequential(nn.TransformerBlock(8, 2, causal=True, dtype=np.float64))
    x = tape.tensor(np.random.default_rng(0).normal(size=(1, 4, 8)))
    with Trace(block) as trace:
        out = ops.sum(block(x))  # this line is the call site of the sum
    line = sys._getframe().f_lineno - 1
    view = trace.view()
    qkv = block[0].attn.qkv.weight
    assert view.names[qkv.id] == "0.attn.qkv.weight"
    # a tensor is named by the outermost module returning it: attn.out's output is 0.attn's, mlp.2's is 0.mlp's
    assert sorted({view.names[t] for t in view.names if t not in trace.parameter_names}) == [
        "0", "0.attn", "0.attn.qkv", "0.mlp", "0.mlp.0", "0.mlp.1", "0.norm1", "0.norm2"]
    sum_index = next(r.index for r in trace.operations if r.output.id == out.id)
    assert view.sites[sum_index] == f"{os.path.relpath(__file__)}:{line}"
    sdpa = next(r.index for r in trace.operations if r.op_name == "scaled_dot_product_attention")
    assert view.modules[f"op{sdpa}"] == "0.attn" and re.match(r".*nn\.py:\d+$", view.sites[sdpa])
    dot = trace.to_dot(view=view)
    assert 'label="0.attn"' in dot and 'label="0.attn.qkv.weight' in dot and "tooltip=" in dot
    assert dot.count("subgraph cluster_") >= 5 and dot.count("{") == dot.count("}")
    assert f"#{qkv.id}" not in dot


@pytest.mark.parametrize("case", ["causal", "bool_mask", "float_mask", "gqa", "lengths", "bottom_right"])
def test_attention_weights_reproduce_the_op(case):
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(2, 4, 5, 3)), rng.normal(size=(2, 4, 7, 3)), rng.normal(size=(2, 4, 7, 2))
    kwargs, mask = {}, None
    if case == "causal":
        kwargs = {"is_causal": True, "scale": 0.7}
    elif case == "bool_mask":
        mask = rng.random((5, 7)) > 0.3
        mask[2] = False  # a fully masked row: zero weights
    elif case == "float_mask":
        mask = rng.normal(size=(4, 1, 7))
    elif case == "gqa":
        k, v, kwargs = k[:, :2], v[:, :2], {"enable_gqa": True}
    elif case == "lengths":
        kwargs = {"key_padding_lengths": np.array([3, 7])}
    else:
        kwargs = {"is_causal": True, "causal_alignment": "bottom_right"}
    out = ops.scaled_dot_product_attention(q, k, v, mask, **kwargs).numpy()
    weights = attention_weights(q, k, mask, **kwargs)
    if kwargs.get("enable_gqa"):
        v = np.repeat(v, 2, axis=-3)
    np.testing.assert_allclose(weights @ v, out, rtol=1e-10, atol=1e-12)
    sums = weights.sum(-1)
    assert np.allclose(sums[sums > 0], 1) and (case != "bool_mask" or np.all(weights[..., 2, :] == 0))


def tiny_gpt(layers=1):
    import common

    nn.manual_seed(0)
    return common.TinyGPT(vocab_size=6, context=8, d_model=8, num_heads=2, num_layers=layers)


def train_with_recorder(model, steps=6, **options):
    rng = np.random.default_rng(0)
    optimizer = optim.SGD(model.parameters(), lr=0.1)
    recorder = Recorder(model, attention_inputs=rng.integers(0, 6, (2, 8)), attention_steps=(0, 3, steps), **options)
    history = []
    for step in range(1, steps + 1):
        x = rng.integers(0, 6, (4, 8))
        recorder.graph(step, model.loss, x, x[:, ::-1].copy())
        optimizer.zero_grad()
        loss = model.loss(x, x[:, ::-1].copy())
        loss.backward()
        before = [p.numpy().copy() for p in model.parameters()]
        grads = [np.linalg.norm(p.grad.numpy()) for p in model.parameters()]
        optimizer.step()
        params = list(model.parameters())
        changes = [(np.linalg.norm(p.numpy().astype(float) - b), np.linalg.norm(b)) for p, b in zip(params, before)]
        ratios = [change / size if size else change for change, size in changes]  # |dp| itself for a zero p
        recorder.step(step, loss.item(), accuracy=step / steps)
        history.append((loss.item(), grads, ratios))
    return recorder, history


def test_recorder_records_the_gradients_and_updates():
    model = tiny_gpt()
    recorder, history = train_with_recorder(model)
    assert recorder.steps == list(range(1, 7)) and recorder.losses == [h[0] for h in history]
    np.testing.assert_allclose(np.array(recorder.grad_norms, dtype=float), [h[1] for h in history], rtol=1e-6)
    np.testing.assert_allclose(np.array(recorder.update_ratios), [h[2] for h in history], rtol=1e-5)
    assert [step for step, _ in recorder.attention] == [0, 3, 6]
    paths = [path for path, _ in recorder.attention[0][1]]
    assert paths == ["blocks.0.attn"] and recorder.attention[0][1][0][1].shape == (2, 2, 8, 8)
    assert recorder.flow_graph["step"] == 1 and recorder.dead_parameters() == []
    assert {"scaled_dot_product_attention", "cross_entropy", "layer_norm"} <= recorder.ops_used


def test_recorder_names_a_parameter_that_never_gets_a_gradient(model, tmp_path):
    recorder = Recorder(model, coverage=False)
    recorder.graph(1, model.loss, X)
    model.loss(X).backward()
    recorder.step(1, 0.5)
    assert recorder.dead_parameters() == ["detached.weight", "detached.bias", "zeroed.weight", "zeroed.bias"]
    page = open(recorder.write(tmp_path / "r.html"), encoding="utf-8").read()
    assert "no gradient ever reached 4 parameter(s): detached.weight, detached.bias, zeroed.weight" in page


@pytest.fixture(scope="module")
def report_path(tmp_path_factory):
    recorder, _ = train_with_recorder(tiny_gpt(layers=2), steps=5)
    return recorder.write(str(tmp_path_factory.mktemp("report") / "report.html"))


def test_the_html_is_self_contained_with_every_section(report_path):
    page = open(report_path, encoding="utf-8").read()
    assert not re.search(r"https?://", page) and "<link" not in page and "@import" not in page
    assert not re.search(r"""src=["'](?!data:)""", page)  # every image inline
    for key in SECTIONS:
        assert f'<section id="{key}">' in page
    data = json.loads(re.search(r'<script type="application/json" id="dag-data">(.*?)</script>', page).group(1))
    names = {n["name"] for n in data["nodes"]}
    assert {"blocks.0.attn.qkv.weight", "blocks.1.attn", "head.weight"} <= names
    uris = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    assert len(uris) == 2 + 3 * 2 * 2 * 2  # two heatmaps; 3 steps x 2 inputs x 2 layers x 2 heads
    assert all(base64.b64decode(u).startswith(b"\x89PNG\r\n\x1a\n") for u in uris)
    assert "scaled_dot_product_attention" in page.split('id="coverage"')[1]


def chromium():
    binary = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if binary is None:
        message = "Chromium is not installed (apt-get install chromium)"
        if os.environ.get("MINITAPE_REQUIRE_BROWSER") == "1":
            pytest.fail(message + " and MINITAPE_REQUIRE_BROWSER=1")
        pytest.skip(message)
    return binary


def open_in_chromium(path, *extra):
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0"]
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([chromium(), *flags, f"--user-data-dir={profile}", *extra, f"file://{path}"],
                              capture_output=True, text=True, timeout=120)


def console_errors(stderr: str) -> list:
    return [line for line in stderr.splitlines() if "CONSOLE" in line]


def test_the_browser_check_sees_a_console_error(tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text("<html><body><p>x</p><script>undefined_function();</script></body></html>")
    assert any("undefined_function" in line for line in console_errors(open_in_chromium(broken, "--dump-dom").stderr))


def test_chromium_renders_the_report(report_path, tmp_path):
    result = open_in_chromium(report_path, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    assert console_errors(result.stderr) == []
    dom = result.stdout
    for key in SECTIONS:
        assert f'<section id="{key}">' in dom
    drawn = re.search(r'<svg id="dag-svg"[^>]*>(.*?)</svg>', dom, re.S).group(1)  # drawn by the page's script
    assert drawn.count('class="node ') >= 40 and 'class="cluster"' in drawn and "blocks.0.attn.qkv.weight" in drawn
    shot = tmp_path / "report.png"
    result = open_in_chromium(report_path, "--window-size=1200,1600", f"--screenshot={shot}")
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000


# -- the examples: up-front checks, the progress bar in a log, help on every option ---------------------------
def test_missing_graphviz_and_matplotlib_fail_before_training(monkeypatch, capsys):
    import common
    import reverse

    monkeypatch.setattr(common.shutil, "which", lambda name: None)
    monkeypatch.setattr(common.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(common.Trainer, "__call__", lambda *a: pytest.fail("training started"))
    with pytest.raises(SystemExit):
        reverse.main(["--steps", "2", "--graph", "g.svg", "--plot", "p.png"])
    err = capsys.readouterr().err
    assert "apt-get install graphviz" in err and "pip install matplotlib" in err and "pip install -e '.[graph]'" in err


def test_progress_bar_in_a_log_writes_a_line_every_n_steps():
    import common

    log = io.StringIO()  # not a terminal
    bar = common.ProgressBar(100, stream=log)
    for step in range(1, 101):
        bar.update(step, 1.0, 10)
    bar.close()
    lines = log.getvalue().splitlines()
    assert len(lines) == 20 and "\r" not in log.getvalue() and lines[-1].startswith("step 100/100 loss")


@pytest.mark.parametrize("name", ["reverse", "char_lm", "padded_classification", "meta_learning"])
def test_every_example_option_has_help(name, monkeypatch):
    import importlib

    import common

    def capture(parser, argv=None):
        raise LookupError(parser)

    monkeypatch.setattr(common, "parse_args", capture)
    with pytest.raises(LookupError) as caught:
        importlib.import_module(name).main([])
    parser = caught.value.args[0]
    missing = [a.option_strings for a in parser._actions if a.option_strings and not a.help]
    assert missing == []


def test_an_edge_from_a_second_output_is_labelled_with_that_output():
    """The DAG labelled every edge with its producer's first output: topk's indices edge read float64[3, 2]."""
    with tape.ExecutionTape() as recorded:
        result = ops.topk(tape.tensor(np.arange(12.0).reshape(3, 4)), 2)
        ops.reshape(result.indices, (-1,))
    edge = next(line for line in recorded.to_dot().splitlines() if "op0 -> op1" in line)
    assert 'label="int64[3, 2]"' in edge


def test_recorder_takes_a_gradient_tapes_gradients(model):
    """A GradientTape loop sets no .grad: the recorder must be given the gradients, never report them missing."""
    recorder = Recorder(model, coverage=False)
    params = list(model.parameters())
    with tape.GradientTape() as gt:
        loss = model.loss(X)
    grads = gt.compute_gradients(loss, params)
    recorder.gradients(grads)
    recorder.step(1, loss.item())
    expected = [None if g is None else np.linalg.norm(g.numpy()) for g in grads]
    (recorded,) = recorder.grad_norms
    missing = [False, False, True, True] + [False] * 4  # detached.weight, detached.bias
    assert [n is None for n in recorded] == [e is None for e in expected] == missing
    for n, e in zip(recorded, expected):
        assert n is None or n == pytest.approx(e, rel=1e-12)
    recorder.gradients({"live.weight": grads[0]})
    recorder.step(2, loss.item())
    assert recorder.grad_norms[1][0] == pytest.approx(expected[0]) and recorder.grad_norms[1][1:] == [None] * 7
    with pytest.raises(ValueError, match=r"Recorder.gradients: expected one gradient per parameter \(8\), got 1"):
        recorder.gradients(grads[:1])


# -- the page reads right without help: coverage cells, markup, marks, ticks, labels, a DAG without overlaps -------
def _coverage_html(page: str) -> str:
    return page.split('<section id="coverage">')[1].split("</section>")[0]


def test_the_coverage_table_says_what_the_report_did_not_measure(report_path):
    table = _coverage_html(open(report_path, encoding="utf-8").read())
    # the report skips parity (and 2nd order, export) for its cost, with or without torch: it never blames a flag
    assert "--no-torch" not in table and "torch not installed" not in table
    assert table.count("not measured here") >= 3 * table.count('<tr class="')
    assert "python -m tape coverage --ops " in table and "scaled_dot_product_attention" in table


def test_rst_markup_is_rendered_as_code(report_path):
    page = open(report_path, encoding="utf-8").read()
    assert "``" not in page.split("<script")[0]
    assert "<code>composite</code>" in _coverage_html(page)  # gelu's note: ``composite``


EMOJI = re.compile("[\u2600-\u27bf\U0001f000-\U0001faff\ufe0f]")


def test_no_mark_needs_an_emoji_font(report_path):
    page = open(report_path, encoding="utf-8").read()
    assert EMOJI.findall(page) == []
    table = _coverage_html(page)
    assert table.count('<span class="mark pass" role="img" aria-label="passed"></span>') >= 3


def _tick_labels(page: str) -> list:
    """The y-axis labels of every line chart, one list per chart."""
    charts = re.findall(r'<svg class="chart".*?</svg>', page, re.S)
    label = re.compile(r'<text x="56" y="[\d.]+" text-anchor="end">([^<]+)</text>')
    return [[float(t) for t in label.findall(chart)] for chart in charts]


def _nice(step: float) -> bool:
    mantissa = step / 10 ** np.floor(np.log10(step))
    return any(np.isclose(mantissa, m) for m in (1, 2, 5, 10))


@pytest.mark.parametrize("values, log", [
    ([0.0391, 0.1, 0.279], False), ([3.15, 3.3, 3.41], True), ([0.026, 0.169], False), ([1e-4, 3e-2, 2.5], True),
    ([0.5, 0.5], False), ([7.0, 7.0], True), ([0.0, 1.0], False), ([1e-8, 1.2e-8], True),
])  # fmt: skip
def test_axis_ticks_are_nice_numbers(values, log):
    from tape.tools.report import _line_chart

    labels = _tick_labels(_line_chart([("y", list(range(len(values))), values, "#000")], "t", log=log))[0]
    assert len(labels) >= 2, labels
    steps = np.diff(labels)
    if log and not np.allclose(steps, steps[0]):  # over decades: 1, 2 or 5 times a power of ten
        assert all(_nice(v) for v in labels) and max(values) / min(values) >= 3, labels
    else:  # equal steps of 1, 2 or 5 times a power of ten, each tick a multiple of the step
        assert np.allclose(steps, steps[0]) and _nice(steps[0]), labels
        assert np.allclose(np.round(np.array(labels) / steps[0]) * steps[0], labels), labels
    assert min(labels) <= min(values) + 1e-12 and max(labels) >= max(values) - 1e-12, labels  # the data inside


def test_the_accuracy_curve_says_what_it_measures():
    recorder, _ = train_with_recorder(tiny_gpt(), steps=2, accuracy_label="token accuracy, teacher-forced, 32 probes")
    page = _page_of(recorder)
    assert "token accuracy, teacher-forced, 32 probes" in page.split('<section id="curves">')[1].split("</section>")[0]
    assert "token accuracy, teacher-forced, 32 probes 100.00% at step 2" in page


def _page_of(recorder) -> str:
    with tempfile.TemporaryDirectory() as folder:
        return open(recorder.write(os.path.join(folder, "r.html")), encoding="utf-8").read()


def _boxes(svg: str, kind: str) -> list:
    """(x, y, width, height, label) of each drawn node rect (kind 'node') or module cluster rect ('cluster')."""
    found = []
    pattern = rf'<g class="{kind}[^"]*"[^>]*><rect ([^>]*)>.*?<text[^>]*>([^<]*)</text>'
    for attrs, label in re.findall(pattern, svg, re.S):
        a = dict(re.findall(r'([\w-]+)="([^"]*)"', attrs))
        found.append((float(a["x"]), float(a["y"]), float(a["width"]), float(a["height"]), label))
    return found


def _overlap(a, b) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def _inside(inner, outer) -> bool:
    return (outer[0] <= inner[0] and inner[0] + inner[2] <= outer[0] + outer[2]
            and outer[1] <= inner[1] and inner[1] + inner[3] <= outer[1] + outer[3])  # fmt: skip


def test_the_browser_lays_out_modules_without_overlap(report_path):
    dom = open_in_chromium(report_path, "--dump-dom").stdout
    svg = re.search(r'<svg id="dag-svg"[^>]*>(.*?)</svg>', dom, re.S).group(1)
    nodes, clusters = _boxes(svg, "node"), _boxes(svg, "cluster")
    assert len(nodes) >= 40 and len(clusters) >= 4
    _layout_is_clean(nodes, clusters)


def _layout_is_clean(nodes, clusters) -> None:
    """No two nodes overlap; two module boxes are nested (one inside the other) or apart."""
    assert [(a[4], b[4]) for i, a in enumerate(nodes) for b in nodes[i + 1 :] if _overlap(a, b)] == []
    names = [c[4].lstrip("\u25be ").strip() for c in clusters]
    for i, a in enumerate(clusters):
        for j, b in enumerate(clusters[i + 1 :], i + 1):
            if names[j].startswith(names[i] + ".") or names[i].startswith(names[j] + "."):
                assert _inside(b, a) or _inside(a, b), (names[i], names[j])
            else:
                assert not _overlap(a, b), (names[i], a[:4], names[j], b[:4])


def test_collapsing_modules_redraws_without_overlap_or_console_errors(report_path, tmp_path):
    page = open(report_path, encoding="utf-8").read()
    clicks = (  # collapse every top-level module, then expand 'blocks' again (with all it holds)
        "<script>document.getElementById('dag-collapse').click();"
        "[...document.querySelectorAll('#dag-svg g.node.module')].find(g => g.textContent.startsWith('blocks'))"
        ".dispatchEvent(new MouseEvent('click'));</script></body>"
    )
    clicked = tmp_path / "clicked.html"
    clicked.write_text(page.replace("</body>", clicks), encoding="utf-8")
    result = open_in_chromium(clicked, "--dump-dom")
    assert console_errors(result.stderr) == []
    svg = re.search(r'<svg id="dag-svg"[^>]*>(.*?)</svg>', result.stdout, re.S).group(1)
    nodes, clusters = _boxes(svg, "node"), _boxes(svg, "cluster")
    assert {c[4].lstrip("\u25be ").split(".")[0] for c in clusters} == {"blocks"}  # the others are collapsed
    assert {"token_embedding", "position_embedding", "norm", "head"} <= {n[4] for n in nodes}
    assert "blocks.1.attn.qkv.weight" in {n[4] for n in nodes}
    _layout_is_clean(nodes, clusters)
