"""Each example runs in-process in a quick mode: its loss must fall, a seed must fix the run, and the
--save / --graph / --plot flags must do what they say. (Their accuracy claims need full runs: see the
README for the commands and the figures measured.)"""

import importlib
import os
import sys

import numpy as np
import pytest

from tape import checkpoint

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
sys.path.insert(0, EXAMPLES)

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
    ckpt, svg, png = tmp_path / "r.npz", tmp_path / "block.svg", tmp_path / "loss.png"
    run("reverse", "--steps", "2", "--save", str(ckpt), "--graph", str(svg), "--plot", str(png))
    state = checkpoint.load(ckpt)
    assert "blocks.0.attn.qkv.weight" in state and "head.weight" in state
    assert svg.read_text().lstrip().startswith(("<?xml", "<svg"))
    assert "scaled_dot_product_attention" in svg.read_text()
    out = capsys.readouterr().out
    try:
        import matplotlib  # noqa: F401
        assert png.exists()
    except ImportError:
        assert "matplotlib is not installed" in out and not png.exists()
