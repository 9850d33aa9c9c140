"""A user's program type-checks against minitape's annotations (tape and ops ship py.typed): mypy, run as a user runs
it -- on their own file, outside this repository's config, with minitape importable (as an installed package) --
passes on a typical training program, sees real types (``reveal_type``), and reports the type errors it should. If
tape were read as untyped (every name Any), the program would still pass but the revealed types and the expected
errors would not show: so this test fails then.

Known Any (not asserted, see the notes): an op call (``ops.relu(x)``) is Any, as ``Op.__call__`` is not annotated
(tape/registry.py); a Tensor method the op library adds at run time (``x.sum()``, ``x.T``) is Any
(``Tensor.__getattr__``); ``Module.__call__`` is Any, as torch's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from paths import REPO

pytest.importorskip("mypy")

USER_PROGRAM = '''
from typing import TYPE_CHECKING

import numpy as np

import ops
import tape
from tape import nn, optim


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(3, 8)
        self.out = nn.Linear(8, 1)

    def forward(self, x: tape.Tensor) -> tape.Tensor:
        return self.out(ops.relu(self.hidden(x)))


x = tape.tensor(np.random.randn(16, 3))
y = tape.tensor(np.random.randn(16, 1))
model = MLP().double()
optimizer = optim.Adam(model.parameters(), lr=1e-2)
for _ in range(3):
    optimizer.zero_grad()
    loss = ops.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
scaled = (x * 2 + 1) @ tape.ones(3, 2, dtype=np.float64)
with tape.no_grad():
    prediction = model(x)
if TYPE_CHECKING:
    reveal_type(x)
    reveal_type(scaled)
    reveal_type(-x[0])
    reveal_type(optimizer)
    reveal_type(model.parameters())
    reveal_type(tape.nn.Linear(2, 2))
    reveal_type(tape.optim.SGD)
    reveal_type(scaled.backward())
'''

# Each line from the third: a type error mypy must report, and the words of its message.
WRONG_PROGRAM = '''
import tape

count: int = tape.tensor([1.0, 2.0])
layer: tape.nn.Linear = tape.optim.SGD(tape.nn.Linear(2, 2).parameters(), lr=0.1)
tape.tensor([1.0], requires_gradd=True)
'''
EXPECTED_ERRORS = {
    3: r'Incompatible types in assignment \(expression has type "Tensor", variable has type "int"\)',
    4: r'Incompatible types in assignment \(expression has type "SGD", variable has type "Linear"\)',
    5: r'Unexpected keyword argument "requires_gradd"',
}
EXPECTED_REVEALS = [
    "tape.tensors.Tensor",
    "tape.tensors.Tensor",
    "tape.tensors.Tensor",
    "tape.train.optim.Adam",
    "typing.Iterator[tape.train.nn.Parameter]",
    "tape.train.nn.Linear",
    "def (params: Any, lr: float =",  # the start of SGD's constructor signature
    "None",
]


@pytest.fixture(scope="module")
def mypy_run(tmp_path_factory) -> tuple[str, Path]:
    """mypy on both programs, in a directory of their own (no project config), minitape found on PYTHONPATH."""
    where = tmp_path_factory.mktemp("user")
    (where / "user_program.py").write_text(textwrap.dedent(USER_PROGRAM).lstrip("\n"), encoding="utf-8")
    (where / "wrong_program.py").write_text(textwrap.dedent(WRONG_PROGRAM).lstrip("\n"), encoding="utf-8")
    (where / "mypy.ini").write_text("[mypy]\n", encoding="utf-8")  # a user's default settings
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MYPYPATH", None)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--no-error-summary", "--show-error-codes",
         "user_program.py", "wrong_program.py"],
        cwd=where, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return done.stdout + done.stderr, where


def _lines(output: str, file: str, kind: str) -> list[tuple[int, str]]:
    pattern = re.compile(rf"^{re.escape(file)}:(\d+): {kind}: (.*)$", re.M)
    return [(int(line), message) for line, message in pattern.findall(output)]


def test_the_user_program_passes_and_sees_types(mypy_run):
    output, _ = mypy_run
    assert not _lines(output, "user_program.py", "error"), output
    revealed = [message for _, message in _lines(output, "user_program.py", "note")]
    revealed = [m.removeprefix("Revealed type is ").strip('"') for m in revealed if m.startswith("Revealed type")]
    assert len(revealed) == len(EXPECTED_REVEALS), output
    for got, expected in zip(revealed, EXPECTED_REVEALS):
        assert got.startswith(expected), f"revealed {got!r}, expected {expected!r}\n{output}"


def test_type_errors_in_a_user_program_are_reported(mypy_run):
    output, _ = mypy_run
    errors = dict(_lines(output, "wrong_program.py", "error"))
    assert set(errors) == set(EXPECTED_ERRORS), output
    for line, words in EXPECTED_ERRORS.items():
        assert re.search(words, errors[line]), f"line {line}: {errors[line]!r} lacks {words!r}"


def test_the_user_program_runs(mypy_run):
    """It is a real program: it runs (its reveal_type calls are for the checker only)."""
    _, where = mypy_run
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "user_program.py"], cwd=where, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
