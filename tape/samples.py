"""``Sample``: one set of arguments an op declares for its generated tests (tests/ops/test_generated.py) and docs."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Sample:
    """One set of arguments for an op: tensor arrays (in ``inputs`` order; ``None`` for an absent optional
    tensor, a list for a sequence parameter) and attributes. ``call_args`` gives them by parameter name."""

    inputs: tuple
    attrs: dict = field(default_factory=dict)
    label: str = ""
    torch: bool = True  # False when torch's reference does not support this particular sample

    def __repr__(self) -> str:
        def describe(a):
            if a is None:
                return "None"
            if isinstance(a, list | tuple):
                return "[" + ", ".join(describe(x) for x in a) + "]"
            return f"{getattr(a, 'dtype', type(a).__name__)}{list(getattr(a, 'shape', ()))}"

        label = f" {self.label}" if self.label else ""
        return f"Sample({', '.join(describe(a) for a in self.inputs)}; {self.attrs}){label}"
