"""The engine core stays readable (issue #18's numbers): no function in tape/ longer than 60 lines, and the hot-path
files -- the Tensor, the registry, recording, the reverse pass, compile and the per-thread state -- at most 2,000
lines together. When a change needs more, it is a design change: say so in the issue, then move the number."""

from __future__ import annotations

import ast

from paths import REPO as ROOT

CORE = ("tensors.py", "registry.py", "recording.py", "autodiff.py", "compile.py", "state.py")
CORE_LINES = 2000
FUNCTION_LINES = 60


def test_no_function_in_tape_is_longer_than_60_lines():
    long = []
    for path in sorted((ROOT / "tape").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, f"functions over {FUNCTION_LINES} lines: {long}"


def test_the_hot_path_files_stay_within_their_budget():
    lines = {name: len((ROOT / "tape" / name).read_text().splitlines()) for name in CORE}
    assert sum(lines.values()) <= CORE_LINES, f"{sum(lines.values())} lines > {CORE_LINES}: {lines}"
