"""docs/speed.md is generated from docs/speed.json by the benchmark harness; this test fails when they drift.

The figures themselves come from `python benchmarks/run_all.py` (each framework in its own child process); no
timing is asserted here.
"""

import json
import sys

from paths import REPO


def test_docs_speed_md_is_what_its_json_renders_to():
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import _harness
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    results = json.loads((REPO / "docs" / "speed.json").read_text(encoding="utf-8"))
    assert _harness.render_markdown(results) == (REPO / "docs" / "speed.md").read_text(encoding="utf-8"), (
        "docs/speed.md is out of date: regenerate it with `python benchmarks/run_all.py`")


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
