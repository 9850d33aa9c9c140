"""Module docstrings say what the module holds (issue #20): at most 15 lines each in ops/, ops/_kernels/ included.
An op's torch case law and its implementation notes belong in its ``notes=`` (shown in docs/coverage.md)."""

import ast
import pathlib

import ops

MOST = 15


def _docstring_lines(path: pathlib.Path) -> int:
    """The source lines a module's docstring spans, its quotes included (0 without one)."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    first = body[0] if body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)):
        return 0
    if not isinstance(first.value.value, str):
        return 0
    return (first.end_lineno or first.lineno) - first.lineno + 1


def test_the_line_count_is_the_docstrings_span(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text('"""One.\n\nThree.\n"""\n\nx = 1\n')
    assert _docstring_lines(sample) == 4
    sample.write_text("x = 1\n")
    assert _docstring_lines(sample) == 0


def test_no_module_docstring_in_ops_is_over_15_lines():
    root = pathlib.Path(ops.__file__).parent
    long = {str(p.relative_to(root)): n for p in sorted(root.rglob("*.py")) if (n := _docstring_lines(p)) > MOST}
    assert not long, f"module docstrings over {MOST} lines (move per-op notes to notes=): {long}"
