"""Imports point down: engine core (tape/*.py) -> op library (ops/) -> training stack (tape/train) and tooling
(tape/tools). Read from the source with ast, so an import inside a function counts as much as one at the top
(the layering must hold at any time, not only while importing)."""

import ast
import pathlib

from paths import REPO

ROOT = REPO
OPS = ROOT / "ops"
# tape/ files above the engine core: the package's face (loads ops, tape.nn ... on first use), the CLI, and
# tape.distributed (data-parallel training: it saves checkpoints)
ABOVE_THE_CORE = {"__init__.py", "__main__.py", "distributed.py"}
CORE = sorted(p for p in (ROOT / "tape").glob("*.py") if p.name not in ABOVE_THE_CORE)


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``, at any depth; ``from . import a`` gives the
    package's module ``a`` when it is one; ``importlib.import_module("x")`` with a constant counts."""
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:  # ``from . import shape``: the submodule itself; else a name of ``base``
                candidate = ROOT.joinpath(*f"{base}.{alias.name}".split("."))
                submodule = candidate.with_suffix(".py").exists() or (candidate / "__init__.py").exists()
                found.append((node.lineno, f"{base}.{alias.name}" if submodule else base))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant):
                found.append((node.lineno, node.args[0].value))
    return found


def _ops_files():
    return sorted(OPS.rglob("*.py"))


def test_no_file_in_ops_imports_the_package_ops():
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports '{name}'"
        for path in _ops_files()
        for line, name in _imports(path)
        if name == "ops" and path != OPS / "__init__.py"
    ]
    assert not bad, bad


def _ops_graph() -> dict:
    graph = {}
    for path in _ops_files():
        if path == OPS / "__init__.py":  # the package imports its families; none imports it (test above)
            continue
        names = {name for _, name in _imports(path) if name.startswith("ops.")}
        graph[_module_name(path)] = names - {_module_name(path)}
    return graph


def _cycles(graph: dict) -> list:
    """Each import cycle once, as a list of modules, by depth-first search."""
    cycles, state = [], {}

    def visit(node, trail):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycle = trail[trail.index(nxt) :] + [nxt]
                cycles.append(cycle)
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles


def test_the_ops_modules_import_one_another_without_a_cycle():
    graph = _ops_graph()
    assert "ops.shape" in graph["ops.movement"] and "ops.indexing" in graph["ops.shape"]  # the graph is read
    assert not _cycles(graph), _cycles(graph)


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_engine_core_imports_nothing_above_it():
    above = ("ops", "tape.train", "tape.tools", "tape.distributed")
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports '{name}'"
        for path in CORE
        for line, name in _imports(path)
        if name == "tape" or any(name == a or name.startswith(a + ".") for a in above)
    ]
    assert not bad, bad
    assert {"tensors.py", "registry.py", "recording.py", "autodiff.py", "interop.py"} <= {p.name for p in CORE}
