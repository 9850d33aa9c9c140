"""docs/speed.md is generated from docs/speed.json by the benchmark harness; this test fails when they drift.

The figures themselves come from `python benchmarks/run_all.py` (each framework in its own child process); no
timing is asserted here.
"""

import json
import sys

import pytest
from paths import REPO


@pytest.mark.parametrize("json_path", sorted((REPO / "docs").glob("**/speed.json")), ids=str)
def test_docs_speed_md_is_what_its_json_renders_to(json_path):
    # docs/speed.md, and docs/avx2/speed.md from the same command with the AVX2 kernels chosen
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import _harness
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    results = json.loads(json_path.read_text(encoding="utf-8"))
    assert _harness.render_markdown(results) == (json_path.parent / "speed.md").read_text(encoding="utf-8"), (
        f"{json_path.parent / 'speed.md'} is out of date: regenerate it with `python benchmarks/run_all.py`")


def test_run_all_lists_every_benchmark_workload_once():
    # run_all.py gathers each module's workloads: one module's workloads() failing stops the whole run
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import bench_ops
        import run_all
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    names = [workload.name for _, workload in run_all.jobs(quick=False, only="")]
    assert len(names) == len(set(names))
    assert {f"ops-{case}" for case in bench_ops.CASES} <= set(names)
    assert {"train-step-gpt", "compiled-train-step-gpt"} <= set(names)


def _benchmarks_module(name):
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


def test_every_target_reads_workloads_that_run_all_runs():
    # a target naming a workload run_all does not run would silently drop out of docs/speed.md's Targets table
    targets, run_all = _benchmarks_module("_targets"), _benchmarks_module("run_all")
    names = {workload.name for _, workload in run_all.jobs(quick=False, only="")}
    for text, needed, _ in targets.TARGETS:
        assert set(needed) <= names, (text, set(needed) - names)


def test_a_target_is_met_or_not_by_its_figure():
    targets = _benchmarks_module("_targets")

    def result(ratio, faults=0.0):
        side = {"median": 1.0, "minor_faults_per_step": faults}
        return {"ratio": ratio, "sides": {"minitape": side, "torch": dict(side)}}

    assert targets.render({}) == []
    met = targets.render({"ops-conv2d": result(1.49)})
    missed = targets.render({"ops-conv2d": result(1.51)})
    assert met[-1] == "| #22 conv2d fwd+bwd <= 1.5x torch | 1.49 | met |"
    assert missed[-1] == "| #22 conv2d fwd+bwd <= 1.5x torch | 1.51 | **not met** |"
    assert "**not met**" in targets.render({"train-step-gpt": result(1.0, faults=501.0)})[-1]
