"""What a user's install sees (issue #35): one version, single-sourced; the type markers and the LICENSE shipped;
install lines that name this repository, never a PyPI name we do not own; graphviz an extra, its absence said."""

import re
import sys

import pytest
import tomllib
from paths import REPO

import tape


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_version_is_written_once_and_read_by_pyproject():
    project = _pyproject()
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "tape.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", tape.__version__)


def test_both_packages_ship_their_type_marker_and_the_license_is_there():
    data = _pyproject()["tool"]["setuptools"]["package-data"]
    for package in ("tape", "ops"):
        assert (REPO / package / "py.typed").exists() and "py.typed" in data[package]
    assert (REPO / "LICENSE").read_text().startswith("MIT License")
    assert _pyproject()["project"]["license"] == {"text": "MIT"}


def test_no_install_line_names_an_unpublished_package():
    # minitape is not on PyPI: `pip install 'minitape[mpi]'` would fetch whatever someone published under the name
    pattern = re.compile(r"pip install\s+['\"]?minitape")
    roots = [REPO / d for d in ("tape", "ops", "examples", "docs", "tests", "benchmarks")] + [REPO / "README.md"]
    files = [p for root in roots for p in ([root] if root.is_file() else [*root.rglob("*.py"), *root.rglob("*.md")])]
    found = [f"{p.relative_to(REPO)}:{n}" for p in files for n, line in enumerate(p.read_text().splitlines(), 1)
             if pattern.search(line) and p.name != "test_packaging.py"]  # fmt: skip
    assert found == []


def test_graphviz_is_an_extra_and_render_without_it_says_what_to_install(monkeypatch, tmp_path):
    project = _pyproject()["project"]
    assert not any(d.startswith("graphviz") for d in project["dependencies"])
    assert project["optional-dependencies"]["graph"] == ["graphviz>=0.20"]
    import ops

    with tape.ExecutionTape() as recorded:
        ops.exp(tape.tensor([1.0], requires_grad=True))
    monkeypatch.setitem(sys.modules, "graphviz", None)  # an import of it raises ImportError
    with pytest.raises(ImportError, match=r"render needs the graphviz package: pip install -e '\.\[graph\]'"):
        recorded.render(str(tmp_path / "dag.svg"))
    assert list(tmp_path.iterdir()) == []
    assert "digraph" in recorded.to_dot()  # the text needs nothing


def test_render_without_dot_says_so_and_leaves_no_file(monkeypatch, tmp_path):
    import graphviz  # noqa: F401 -- the test extra installs it: this is the path past the import

    import ops

    with tape.ExecutionTape() as recorded:
        ops.exp(tape.tensor([1.0], requires_grad=True))
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))  # no dot on it
    with pytest.raises(RuntimeError, match="needs Graphviz's dot program on PATH"):
        recorded.render(str(tmp_path / "dag.svg"))
    assert list(tmp_path.iterdir()) == [], "a partial file was left"
