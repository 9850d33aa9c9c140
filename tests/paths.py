"""Where the suite finds the repository's folders (test files live one level below tests/)."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
EXAMPLES = REPO / "examples"
DOCS = REPO / "docs"
