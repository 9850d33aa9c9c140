"""The architecture's promises: one op, one signature; dependencies point one way.

Engine core (tape/*.py) -> op library (ops/) -> training stack (tape/train) and tooling (tape/tools).
"""

import subprocess
import sys
import types

import ops
import tape


def test_every_public_op_is_its_registered_op():
    for op in tape.registered_ops():
        assert getattr(ops, op.name) is op, f"ops.{op.name} is not the registered op (a wrapper?)"


def test_dir_ops_lists_ops_and_family_modules_only():
    for name in dir(ops):
        if name.startswith("_"):
            continue
        value = getattr(ops, name)
        assert isinstance(value, tape.Op | types.ModuleType), f"ops.{name} is neither an op nor a family module"
        if isinstance(value, types.ModuleType):
            assert value.__name__ == f"ops.{name}", f"ops.{name} re-exports another module"


def _imported_after(statement: str) -> set:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_importing_the_engine_core_imports_neither_ops_nor_the_layers_above():
    loaded = _imported_after("import tape; import tape.autodiff, tape.tapes, tape.functional, tape.compile")
    assert "ops" not in loaded
    assert not any(m.startswith(("tape.train", "tape.tools")) for m in loaded)


def test_import_tape_alone_gives_working_operators_and_ops_imports_alone():
    code = "import tape; x = tape.tensor([1.0, 2.0]); assert ((x * x) + 1).numpy().tolist() == [2.0, 5.0]"
    subprocess.run([sys.executable, "-c", code], check=True)
    subprocess.run([sys.executable, "-c", "import ops; from tape import checkpoint, nn, optim"], check=True)
