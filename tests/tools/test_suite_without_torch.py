"""The suite without torch: MINITAPE_ALLOW_NO_TORCH=1 promises that only the oracle is skipped. So no test module
imports torch, or calls require_torch, at its top level (outside test functions): either would stop the whole
module from collecting. torch comes from the conftest ``torch`` fixture, tests/oracle.py's ``require_torch``
inside a test, or oracle's ``LazyTorch`` (imported at first use)."""

import ast
import sys

import pytest
from oracle import LazyTorch
from paths import TESTS


def _top_level_nodes(tree):
    """Every node executed when the module is imported: not inside a function body (class bodies and
    decorators do run at import)."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            stack.extend(getattr(node, "decorator_list", []))
            args = node.args
            stack.extend(args.defaults + [d for d in args.kw_defaults if d is not None])
            continue
        stack.extend(ast.iter_child_nodes(node))


def _violations(source: str):
    out = []
    for node in _top_level_nodes(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "torch" for a in node.names):
            out.append(f"line {node.lineno}: import torch")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            out.append(f"line {node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name == "require_torch":
                out.append(f"line {node.lineno}: require_torch() at import")
    return out


@pytest.mark.parametrize("path", sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("*.py")))
def test_no_module_imports_torch_or_requires_it_at_its_top_level(path):
    if path == "oracle.py":
        return  # the one place that imports torch (inside functions)
    if path.startswith("train/ports/"):
        return  # PyTorch programs as written: test_port.py reads them as text and runs them (real torch only via the
        # torch fixture) -- no test module imports them
    assert _violations((TESTS / path).read_text()) == []


@pytest.mark.parametrize("source,found", [
    ("import torch\n", 1),
    ("import torch.nn as tnn\n", 1),
    ("from torch import nn\n", 1),
    ("try:\n    import torch\nexcept ImportError:\n    pass\n", 1),
    ("from oracle import require_torch\ntorch = require_torch()\n", 1),
    ("import pytest\n@pytest.mark.parametrize('f', [require_torch().bmm])\ndef test(f):\n    pass\n", 1),
    ("def test():\n    import torch\n    torch = require_torch()\n", 0),
    ("from oracle import LazyTorch\ntorch = LazyTorch()\nF64 = torch.float64\n", 0),
])
def test_the_scan_finds_top_level_torch_and_only_that(source, found):
    assert len(_violations(source)) == found


def test_lazy_torch_without_torch_collects_and_skips_knowingly_when_used(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    monkeypatch.setenv("MINITAPE_ALLOW_NO_TORCH", "1")
    torch = LazyTorch()
    deferred = [torch.bmm, torch.linalg.svd, torch.float64]  # what a module's top level may hold: no error
    for item in deferred:
        with pytest.raises(pytest.skip.Exception, match="MINITAPE_ALLOW_NO_TORCH=1"):
            item(1.0)
    with pytest.raises(pytest.skip.Exception):
        torch.tensor([1.0]) + 1


def test_lazy_torch_without_torch_fails_unless_the_skip_is_allowed(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.delenv("MINITAPE_ALLOW_NO_TORCH", raising=False)
    with pytest.raises(pytest.fail.Exception, match="torch is a test dependency"):
        LazyTorch().tensor([1.0])


def test_lazy_torch_with_torch_is_torch(torch):
    lazy = LazyTorch()
    assert lazy.float64 is torch.float64 and lazy.linalg.svd is torch.linalg.svd
