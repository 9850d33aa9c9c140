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
# x[index], x[index] = v; torch.median(input, dim) is median_dim (ops/sorting.py)
NO_TORCH_FUNCTION = {"getitem", "setitem", "median_dim"}
# torch documents ``indices_or_sections`` but its parser has one overload per kind, with no keyword of that name
TORCH_KEYWORDS = {name: {"indices_or_sections": "sections"} for name in ("tensor_split", "hsplit", "vsplit", "dsplit")}


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
        return [np.asarray(x.numpy())]
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


# torch.Tensor methods of an op's name that minitape does not give Tensor, each with the reason
NOT_A_METHOD = {
    "lstsq": "removed from torch (Tensor.lstsq raises since 1.9); ops.lstsq is torch.linalg.lstsq",
    "solve": "removed from torch (Tensor.solve raises since 1.9); ops.solve is torch.linalg.solve",
    "svd": "Tensor.svd is torch.svd (some=, returns V); ops.svd is torch.linalg.svd (full_matrices=, returns Vh)",
    "qr": "Tensor.qr is torch.qr (some=True); ops.qr is torch.linalg.qr (mode='reduced'): x.qr(False) would differ",
}


def test_every_op_torch_has_as_a_tensor_method_is_one_here():
    """A port calls ``x.addcmul(a, b)`` or ``x.t()`` as in torch: every registered op whose name torch.Tensor has
    is a Tensor method here too, unless NOT_A_METHOD says why not (16 were missing: a port failed on each)."""
    missing = sorted(
        op.name
        for op in tape.registered_ops()
        if hasattr(torch.Tensor, op.name) and not hasattr(tape.Tensor, op.name) and op.name not in NOT_A_METHOD
    )
    assert not missing, f"ops torch has as Tensor methods but minitape's Tensor lacks: {missing}"
    assert all(not hasattr(tape.Tensor, name) for name in NOT_A_METHOD), "NOT_A_METHOD lists a method we have"


@pytest.mark.parametrize(
    "name", ["addcmul", "addcdiv", "clamp_min", "clamp_max", "logit", "mm", "t", "cov", "corrcoef", "slogdet"]
)
def test_the_new_methods_give_torchs_values(name):
    """Each method added for the port gives torch's method's value on the op's first float64 sample (its other
    tensors given by name: torch's cov takes fweights/aweights by keyword only)."""
    op = tape.get_op(name)
    sample = next(s for s in op_samples(op) if np.asarray(s.inputs[0]).dtype == np.float64)
    others = {n: a for n, a in zip(op.input_names[1:], sample.inputs[1:]) if a is not None}
    ours = getattr(tape.tensor(sample.inputs[0]), name)(
        **{n: tape.tensor(a) for n, a in others.items()}, **sample.attrs
    )
    theirs = getattr(torch.tensor(sample.inputs[0]), name)(
        **{n: torch.tensor(a) for n, a in others.items()}, **sample.attrs
    )
    ours, theirs = (ours, theirs) if isinstance(ours, tuple) else ((ours,), (theirs,))
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)
