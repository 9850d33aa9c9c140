"""The shape, movement, indexing, scan and sorting ops take torch's own parameter names: each op (and each
alias the ops modules export, such as ``broadcast_to`` or ``moveaxis``) is called on its first sample with every
argument by keyword, under our names, on torch's function of the same name -- which must accept them and give
our values. The generated parity tests call torch positionally and so cannot see a renamed parameter (expand's
``shape`` where torch's is ``size``)."""

import numpy as np
import pytest
from oracle import LazyTorch

import ops
import tape
from tape.tools.verify import op_samples

torch = LazyTorch()

FAMILIES = ("shape", "movement", "scan", "sorting")
NO_TORCH_FUNCTION = {"getitem", "median_dim"}  # x[index]; torch.median(input, dim) is median_dim (ops/sorting.py)
# torch documents ``indices_or_sections`` but its parser has one overload per kind, with no keyword of that name
TORCH_KEYWORDS = {
    name: {"indices_or_sections": "sections"} for name in ("tensor_split", "hsplit", "vsplit", "dsplit")
}


def _names():
    """(exported name, op) for every op of FAMILIES and every alias of one in ``ops``."""
    out = []
    for name in sorted(dir(ops)):
        op = getattr(ops, name)
        if isinstance(op, tape.registry.Op) and op.family in FAMILIES and name not in NO_TORCH_FUNCTION:
            if op.var_positional is None:  # f(*tensors) cannot take its tensors by keyword
                out.append(pytest.param(name, op, id=name))
    return out


def _torch_function(name):
    for namespace in (torch.torch, torch.nn.functional):
        if hasattr(namespace, name):
            return getattr(namespace, name), False
    if hasattr(torch.Tensor, name):
        return getattr(torch.Tensor, name), True
    return None, False


def _values(x) -> list:
    """An op's or torch's result as a list of arrays (one per output)."""
    if isinstance(x, tuple | list):
        return [a for v in x for a in _values(v)]
    if isinstance(x, tape.Tensor):
        return [np.asarray(x.data)]
    return [x.detach().numpy()]


@pytest.mark.parametrize("name,op", _names())
def test_torch_takes_our_parameter_names_by_keyword(name, op):
    fn, method = _torch_function(name)
    assert fn is not None, f"ops.{name} has no torch function of its name (list it in NO_TORCH_FUNCTION)"
    sample = op_samples(op)[0]
    args = {k: v for k, v in op.call_args(sample).items() if v is not None}  # torch's overloads refuse None

    def convert(k, v, make):
        if k not in op.input_names:  # an attribute; index arrays in it (index_put's indices) are tensors in torch
            if make is torch.tensor and isinstance(v, tuple) and all(isinstance(a, np.ndarray) for a in v):
                return tuple(torch.from_numpy(a) for a in v)
            return torch.from_numpy(v) if make is torch.tensor and isinstance(v, np.ndarray) else v
        return [make(np.array(t)) for t in v] if op.sequence[op.input_names.index(k)] else make(np.array(v))

    ours = op(**{k: convert(k, v, tape.tensor) for k, v in args.items()})
    kwargs = {k: convert(k, v, torch.tensor) for k, v in args.items()}
    for ours_name, torch_name in TORCH_KEYWORDS.get(name, {}).items():
        kwargs[torch_name] = kwargs.pop(ours_name)
    theirs = fn(kwargs.pop(op.input_names[0]), **kwargs) if method else fn(**kwargs)  # a method: self first
    got, expected = _values(ours), _values(theirs)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-12)
