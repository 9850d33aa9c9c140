"""An op declares its faces -- its Tensor method (``defop(..., method=True)``) and the numpy functions that run it on
Tensors (``numpy=``) -- and Tensor's methods and the numpy dispatch tables are generated from the registry: the
engine core (tape/tensors.py, tape/interop.py) names no op. Adding an op with a method and a numpy alias touches
one file, its family module."""

import ast
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from paths import REPO

import ops
import tape
from tape import RegistrationError, interop
from tape.tensor_api import OPERATORS, _OpMethod

ROOT = REPO
CORE = [
    ROOT / "tape" / name
    for name in ("tensors.py", "tensor_api.py", "interop.py", "registry.py", "recording.py", "functional.py")
]


@pytest.fixture
def throwaway():
    names = []

    def make(name, **declaration):
        names.append(name)
        return tape.defop(name, family="test", inputs=("x",), **declaration)

    yield make
    for name in names:
        tape.unregister_op(name)


def test_an_op_declaring_method_and_numpy_gets_both_and_loses_them_when_unregistered(throwaway):
    op = throwaway("cube_face", forward=lambda x: x**3, vjps=(lambda g, ans, x: g * 3 * x**2,), method=True,
                   numpy={np.cbrt: lambda x: x**3})  # fmt: skip
    x = tape.tensor([1.0, -2.0], requires_grad=True)
    y = x.cube_face()
    assert y.grad_fn.op is op and y.numpy().tolist() == [1.0, -8.0]
    z = np.cbrt(x)  # the handler given for np.cbrt (a deliberately wrong meaning, to see that it is the one called)
    assert isinstance(z, tape.Tensor) and z.numpy().tolist() == [1.0, -8.0]
    (y.sum() + z.sum()).backward()
    assert x.grad.numpy().tolist() == [6.0, 24.0]
    tape.unregister_op("cube_face")
    with pytest.raises(AttributeError, match="cube_face"):
        x.cube_face()
    with pytest.raises(TypeError, match="cbrt"):  # no op any more: refused for a tensor that requires grad
        np.cbrt(x)


def test_a_ufunc_declared_bare_dispatches_to_the_op_itself(throwaway):
    op = throwaway("spacing_face", forward=np.spacing, vjps=(lambda g, ans, x: np.zeros_like(g),), numpy=np.spacing)
    assert interop.UFUNC_OPS[np.spacing] is op
    assert np.spacing(tape.tensor([1.0])).grad_fn is None  # a constant: recorded without a node
    assert np.spacing(tape.tensor([1.0], requires_grad=True)).grad_fn.op is op


def test_a_method_name_is_the_ops_own_or_the_one_given():
    assert vars(tape.Tensor)["cumsum"].op is ops.cumsum
    assert vars(tape.Tensor)["inverse"].op is ops.inv and "inv" not in vars(tape.Tensor)
    assert vars(tape.Tensor)["unfold"].op is ops.unfold_copy


def test_clashing_declarations_are_refused_naming_the_op(throwaway):
    with pytest.raises(RegistrationError, match="clash_a.*method='backward'.*already has"):
        throwaway("clash_a", forward=np.exp, vjps=(lambda g, ans, x: g,), method="backward")
    with pytest.raises(RegistrationError, match="clash_b.*exp.*another op"):
        throwaway("clash_b", forward=np.exp, vjps=(lambda g, ans, x: g,), numpy=np.exp)
    with pytest.raises(RegistrationError, match="clash_c.*method="):
        throwaway("clash_c", forward=np.exp, vjps=(lambda g, ans, x: g,), method="not a name")
    with pytest.raises(RegistrationError, match="clash_d.*numpy="):
        throwaway("clash_d", forward=np.exp, vjps=(lambda g, ans, x: g,), numpy={np.exp: "not callable"})
    assert "clash_a" not in [op.name for op in tape.registered_ops()]
    assert interop.UFUNC_OPS[np.exp] is ops.exp


@pytest.mark.parametrize("name", ["numel", "size", "item", "tolist", "new_zeros", "register_hook", "__repr__"])
def test_a_method_name_tensor_inherits_is_refused_too(throwaway, name):
    """Tensor's torch-porting methods sit on its base class TensorAPI: an op's method= may not shadow them either."""
    before = getattr(tape.Tensor, name)
    with pytest.raises(RegistrationError, match=f"method='{name}'.*already has"):
        throwaway(f"clash_{name.strip('_')}", forward=np.exp, vjps=(lambda g, ans, x: g,), method=name)
    assert getattr(tape.Tensor, name) is before and name not in vars(tape.Tensor)


def test_tensors_op_methods_and_numpy_tables_are_exactly_what_the_registry_declares():
    from ops._tensor import METHOD_ALIASES

    methods = {name: attr.op for name, attr in vars(tape.Tensor).items() if isinstance(attr, _OpMethod)}
    aliases = {name: methods.pop(name) for name in METHOD_ALIASES}  # torch's other names, ops/_tensor.py
    assert all(op.name == METHOD_ALIASES[name] for name, op in aliases.items())
    assert methods == {op.method: op for op in tape.registered_ops() if op.method}
    assert len(methods) >= 127  # at least as many as tape/tensors.py listed by hand
    declared = {func: op if handler is None else handler for op in tape.registered_ops()
                for func, handler in op.numpy.items()}  # fmt: skip
    assert {**interop.UFUNC_OPS, **interop.FUNCTION_OPS} == declared
    assert len(interop.UFUNC_OPS) >= 56 and len(interop.FUNCTION_OPS) >= 37  # tape/interop.py's hand-written tables
    for name in OPERATORS:  # Python's operators are the op library's, installed once it loaded
        assert not getattr(vars(tape.Tensor)[name], "_until_loaded", False), name


def _op_names_in(path: pathlib.Path, names: set) -> list:
    """Places in ``path`` that name an op: ``ops.<x>`` / ``tensors.ops``, or a literal table (tuple, list, set,
    dict) holding op names."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ops":
            found.append(f"{path.name}:{node.lineno} ops.{node.attr}")
        if isinstance(node, ast.Attribute) and node.attr == "ops" and isinstance(node.value, ast.Name):
            found.append(f"{path.name}:{node.lineno} {node.value.id}.ops")
        if isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict):
            items = node.values if isinstance(node, ast.Dict) else node.elts
            named = [i.value for i in items if isinstance(i, ast.Constant) and i.value in names]
            if len(named) >= 2:
                found.append(f"{path.name}:{node.lineno} {named[:4]}")
    return found


def test_the_engine_core_names_no_op():
    names = {op.name for op in tape.registered_ops()}
    found = [place for path in CORE for place in _op_names_in(path, names)]
    assert not found, found


def test_a_method_before_the_op_library_loads_loads_it_and_a_missing_one_says_what_is_missing():
    code = (
        "import sys, tape\n"
        "x = tape.tensor([1.0, 2.0])\n"
        "assert 'ops' not in sys.modules\n"
        "assert x.cumsum(0).numpy().tolist() == [1.0, 3.0] and 'ops' in sys.modules\n"
        "try:\n    x.cumsun\nexcept AttributeError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "'Tensor' object has no attribute 'cumsun'" in out and "method=" in out
