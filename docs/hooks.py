"""mkdocs hooks (mkdocs.yml ``hooks:``): the pages made at build time, so none of them is committed and goes stale.

- ``index.md``: the README, its ``docs/...`` links pointed at the site's pages.
- ``api/ops/index.md`` and ``api/ops/<family>.md``: one page per op family (``Op.family``), each op with its name,
  signature, generated ``__doc__`` (tape/opdoc.py) and a link to its row of the coverage matrix; the nav entry
  ``api/ops/index.md`` is expanded into the families.
- ``coverage.md``: each op's row gets an anchor (``#op-<name>``) for those links.

Ops are registry objects, not module functions, so mkdocstrings cannot document them: this hook imports ``ops`` and
reads ``tape.registered_ops()``.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections import defaultdict
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
OPS_INDEX = "api/ops/index.md"


def _importable() -> None:
    """`mkdocs build` from a clone without `pip install -e .` (mkdocs restores sys.path after loading this file)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def _families() -> dict[str, list]:
    _importable()
    import ops  # noqa: F401  -- registers every op
    from tape.registry import registered_ops

    families: dict[str, list] = defaultdict(list)
    for op in registered_ops():
        families[op.family].append(op)
    return {family: families[family] for family in sorted(families)}


def _family_page(family: str) -> str:
    return f"api/ops/{family}.md"


def on_config(config):
    """Expand the nav entry of the ops' index into one page per family."""

    def expand(items):
        for i, item in enumerate(items):
            if isinstance(item, dict):
                (title, value), *_ = item.items()
                if value == OPS_INDEX:
                    pages = [{f"{family}": _family_page(family)} for family in _families()]
                    items[i] = {title: [OPS_INDEX, *pages]}
                elif isinstance(value, list):
                    expand(value)

    if config.nav:
        expand(config.nav)
    return config


def _fence(text: str) -> str:
    ticks = "~" * max(3, 1 + max((len(m) for m in re.findall(r"~+", text)), default=0))
    return f'<div class="op-doc" markdown>\n\n{ticks}text\n{text}\n{ticks}\n\n</div>'


def _op_section(op) -> str:
    try:
        signature = f"{op.name}{inspect.signature(op)}"
    except (TypeError, ValueError):
        signature = op.signature
    return "\n\n".join(
        [
            f"## {op.name}",
            f"```python\n{signature}\n```",
            _fence(inspect.cleandoc(op.__doc__ or "")),
            f"Coverage: [the `{op.name}` row of the coverage matrix](../../coverage.md#op-{op.name}).",
        ]
    )


def _family_markdown(family: str, members: list) -> str:
    names = ", ".join(f"[`{op.name}`](#{op.name})" for op in members)
    head = (
        f"# Ops: {family}\n\nThe `{family}` family's {len(members)} registered op{'s' if len(members) != 1 else ''}, "
        "in registration order "
        f"(`ops.<name>`, and `tape.torch.<name>` where torch has it): {names}.\n\nEach op's text is its "
        "`__doc__` (`help(ops.<name>)`), generated from its declaration."
    )
    return "\n\n".join([head, *(_op_section(op) for op in members)]) + "\n"


def _index_markdown(families: dict[str, list]) -> str:
    rows = "\n".join(
        f"| [{family}]({family}.md) | {len(members)} | {', '.join(f'`{op.name}`' for op in members[:6])}"
        f"{', ...' if len(members) > 6 else ''} |"
        for family, members in families.items()
    )
    total = sum(len(members) for members in families.values())
    return (
        f"# Ops by family\n\nminitape registers {total} ops, each declared once with `tape.defop` "
        "([Defining an op](../../defining-ops.md)) and called as `ops.<name>` with PyTorch's name and semantics. "
        "Each family has a page listing its ops with their signatures and generated docs; the "
        "[coverage matrix](../../coverage.md) holds what is measured for each.\n\n"
        f"| family | ops | e.g. |\n| --- | --- | --- |\n{rows}\n"
    )


def _readme_markdown() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.sub(r"\]\(docs/", "](", text)


def on_files(files: Files, config) -> Files:
    families = _families()
    files.append(File.generated(config, "index.md", content=_readme_markdown()))
    files.append(File.generated(config, OPS_INDEX, content=_index_markdown(families)))
    for family, members in families.items():
        files.append(File.generated(config, _family_page(family), content=_family_markdown(family, members)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    """coverage.md: an anchor on each op's first row, ``#op-<name>``, which the family pages link to."""
    if page.file.src_uri != "coverage.md":
        return markdown
    _importable()
    from tape.registry import registered_ops

    names = {op.name for op in registered_ops()}
    seen: set[str] = set()

    def anchor(match: re.Match) -> str:
        name = match.group(1)
        if name not in names or name in seen:
            return match.group(0)
        seen.add(name)
        return f'| <a id="op-{name}"></a>{name} |'

    return re.sub(r"^\| ([A-Za-z_][A-Za-z0-9_]*) \|", anchor, markdown, flags=re.M)
