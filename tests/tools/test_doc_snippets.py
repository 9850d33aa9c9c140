"""Every ```python block of README.md and docs/*.md runs, as written: the blocks of one page run in order in one
namespace (as a notebook does), in a fresh Python process per page, in a temporary directory (files a snippet
writes land there). One test id per page and block (``docs/compile.md:9``: the fence's line), so a failure names
the page and the line; a block fails when it raises, and every later block of its page fails with it (the namespace
is cut short there).

Shell blocks (```bash, ```sh, ```console, and unlabelled fences: commands and printed output) are not Python and
are not collected. A Python block that must not run carries a marker on the line right before its fence, with
its reason::

    <!-- snippet: skip (needs mpiexec: two MPI ranks) -->

A marker without a reason is an error. Keep them rare: readers copy the snippets.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from paths import DOCS, REPO

PAGES = [REPO / "README.md", *sorted(DOCS.glob("**/*.md"))]
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
_SKIP = re.compile(r"<!--\s*snippet:\s*skip\b(?P<rest>.*?)-->")
_PYTHON = {"python", "py", "python3"}
TIMEOUT = 240  # seconds for one page's blocks together (each block is meant to take < a few seconds)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    code: str
    skip: str | None  # the marker's reason, or None to run it

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO) if self.page.is_relative_to(REPO) else self.page.name}:{self.line}"


def python_blocks(page: Path) -> list[Block]:
    """The page's ```python blocks, in order, each with its skip marker's reason (None: it runs)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, start = opening["fence"], i
        end = start + 1
        while end < len(lines) and not re.match(rf"^ {{0,3}}{fence[0]}{{{len(fence)},}}\s*$", lines[end]):
            end += 1
        if opening["info"].lower() in _PYTHON:
            skip = None
            previous = lines[start - 1] if start else ""
            marker = _SKIP.search(previous)
            if marker:
                reason = marker["rest"].strip().strip("()").strip()
                if not reason:
                    raise ValueError(f"{page}:{start}: a snippet skip marker needs its reason: (why)")
                skip = reason
            indent = len(opening["indent"])
            code = "\n".join(line[indent:] if line[:indent].isspace() else line for line in lines[start + 1 : end])
            blocks.append(Block(page, start + 1, code, skip))
        i = end + 1
    return blocks


# Runs in the child process: each block exec'd in one shared namespace, in order; a JSON line per block on stdout's
# last line tells which block failed and why.
_RUNNER = r"""
import json, sys, traceback
blocks = json.loads(sys.stdin.read())
namespace = {"__name__": "__main__"}
results = []
for block in blocks:
    if block["skip"] is not None:
        results.append({"line": block["line"], "status": "skipped"})
        continue
    try:
        exec(compile(block["code"], f"{block['page']}:{block['line']}", "exec"), namespace)
    except BaseException:
        results.append({"line": block["line"], "status": "failed", "error": traceback.format_exc()})
        break
    results.append({"line": block["line"], "status": "passed"})
sys.stdout.flush()
print("\n" + json.dumps(results))
"""


def run_page(blocks: list[Block], timeout: float = TIMEOUT) -> dict[int, dict]:
    """Run one page's blocks in order in one namespace, in a fresh Python process in a temporary directory: a result
    per block that ran (a block after a failed one has none)."""
    payload = [{"page": b.id.rsplit(":", 1)[0], "line": b.line, "code": b.code, "skip": b.skip} for b in blocks]
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, "PYTHONPATH": path, "MPLBACKEND": "Agg"}
    with tempfile.TemporaryDirectory(prefix="snippets-") as cwd:
        done = subprocess.run(
            [sys.executable, "-c", _RUNNER],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            timeout=timeout,
        )
    try:
        results = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise AssertionError(f"the snippets' process died (exit {done.returncode}):\n{done.stderr[-4000:]}") from None
    return {r["line"]: r for r in results}


@cache
def _page_results(page: Path) -> dict[int, dict]:
    return run_page(python_blocks(page))


def check_block(block: Block, results: dict[int, dict]) -> None:
    """Fail naming the page and line for a block that raised, or that never ran because an earlier one raised."""
    result = results.get(block.line)
    if result is None:
        raise AssertionError(f"{block.id}: not run -- an earlier block of the page failed")
    if result["status"] == "failed":
        raise AssertionError(f"{block.id}: the snippet raised\n{block.code}\n---\n{result['error']}")


_BLOCKS = [block for page in PAGES for block in python_blocks(page)]


@pytest.mark.parametrize("block", _BLOCKS, ids=[b.id for b in _BLOCKS])
def test_doc_snippet_runs(block: Block):
    if block.skip is not None:
        pytest.skip(f"{block.id}: {block.skip}")
    check_block(block, _page_results(block.page))


def test_every_page_with_code_is_collected():
    assert any(b.page.name == "README.md" for b in _BLOCKS)
    assert sum(b.skip is None for b in _BLOCKS) >= 10


def test_a_broken_snippet_fails(tmp_path: Path):
    """The same functions on a page whose second block raises: it fails naming its line, the first passes, the
    third is reported as not run, the shell block is not collected, the marked one is skipped with its reason."""
    page = tmp_path / "broken.md"
    page.write_text(
        "# A page\n\n```python\nimport numpy as np\nx = np.ones(3)\n```\n\n```bash\nexit 1\n```\n\n"
        "```python\nassert x.sum() == 4, 'wrong sum'\n```\n\n```python\nprint(x)\n```\n\n"
        "<!-- snippet: skip (shows an error on purpose) -->\n```python\nraise SystemExit(3)\n```\n",
        encoding="utf-8",
    )
    blocks = python_blocks(page)
    assert [(b.line, b.skip) for b in blocks] == [(3, None), (12, None), (16, None), (21, "shows an error on purpose")]
    results = run_page(blocks, timeout=60)
    check_block(blocks[0], results)
    with pytest.raises(AssertionError, match=r"broken.md:12: the snippet raised(.|\n)*wrong sum"):
        check_block(blocks[1], results)
    with pytest.raises(AssertionError, match="broken.md:16: not run"):
        check_block(blocks[2], results)


def test_a_skip_marker_needs_a_reason(tmp_path: Path):
    page = tmp_path / "marker.md"
    page.write_text("<!-- snippet: skip -->\n```python\npass\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match="needs its reason"):
        python_blocks(page)
