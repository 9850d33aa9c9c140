"""Module and container API torch programs use beyond forward and parameters (each an AttributeError/TypeError
before, or a list where torch gives a module): lookups by dotted name, add_module/register_module/
register_parameter, state_dict(prefix=, keep_vars=), load_state_dict(assign=), hooks with_kwargs and prepend,
Sequential from an OrderedDict and its slices, ModuleList's list methods -- each compared with torch."""

from collections import OrderedDict

import numpy as np
import pytest

torch_ = pytest.importorskip("torch")  # the oracle

import tape.torch as torch  # noqa: E402

LIBS = (torch, torch_)


def _net(ns):
    class Net(ns.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = ns.nn.Linear(3, 2)
            self.seq = ns.nn.Sequential(ns.nn.Linear(2, 2), ns.nn.ReLU())
            self.register_buffer("running", ns.zeros(2))

        def forward(self, x, scale=1.0):
            return self.seq(self.fc(x)) * scale + self.running

    return Net()


def test_lookups_by_dotted_name_and_registration_as_torchs():
    for ns in LIBS:
        m = _net(ns)
        assert m.get_submodule("seq.0") is m.seq[0] and m.get_submodule("") is m
        assert m.get_parameter("seq.0.bias") is m.seq[0].bias and m.get_buffer("running") is m.running
        with pytest.raises(AttributeError):
            m.get_submodule("seq.5")
        with pytest.raises(AttributeError):
            m.get_parameter("fc.running")
        m.add_module("extra", ns.nn.Identity())
        m.register_module("extra2", ns.nn.Tanh())
        m.register_parameter("scale", ns.nn.Parameter(ns.ones(1)))
        m.register_parameter("nothing", None)
        assert [n for n, _ in m.named_children()] == ["fc", "seq", "extra", "extra2"]
        assert "scale" in dict(m.named_parameters()) and "nothing" not in m.state_dict()
    with pytest.raises(KeyError, match="register_parameter: 'fc' is already"):
        _net(torch).register_parameter("fc", torch.nn.Parameter(torch.ones(1)))


def test_state_dict_prefix_keep_vars_and_assign_as_torchs():
    ours, theirs = _net(torch), _net(torch_)
    assert list(ours.state_dict(prefix="model.")) == list(theirs.state_dict(prefix="model."))
    kept = ours.state_dict(keep_vars=True)
    assert kept["fc.weight"] is ours.fc.weight and isinstance(kept["fc.weight"], torch.nn.Parameter)
    assert not ours.state_dict()["fc.weight"].requires_grad
    values = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    result = ours.load_state_dict(values, assign=True)
    assert tuple(result) == ([], [])
    np.testing.assert_array_equal(ours.fc.weight.detach().numpy(), values["fc.weight"])


def _hooked_run(ns) -> list:
    m, seen = _net(ns), []

    def pre(mod, args, kwargs):
        seen.append(("pre", sorted(kwargs)))
        return args, {**kwargs, "scale": 2.0}

    m.register_forward_pre_hook(pre, with_kwargs=True)
    m.register_forward_hook(lambda mod, args, kwargs, out: seen.append(("post", kwargs["scale"])), with_kwargs=True)
    m.register_forward_hook(lambda mod, args, out: seen.append(("first",)), prepend=True)
    m(ns.ones(1, 3), scale=1.0)
    return seen


def test_hooks_with_kwargs_and_prepend_as_torchs():
    assert _hooked_run(torch) == _hooked_run(torch_) == [("pre", ["scale"]), ("first",), ("post", 2.0)]


def test_sequential_and_module_list_as_torchs():
    for ns in LIBS:
        nn = ns.nn
        seq = nn.Sequential(OrderedDict(a=nn.ReLU(), b=nn.Tanh(), c=nn.Sigmoid()))
        assert [n for n, _ in seq.named_children()] == ["a", "b", "c"] and seq.b is seq[1]
        part = seq[1:]
        assert type(part) is nn.Sequential and [n for n, _ in part.named_children()] == ["b", "c"]
        layers = nn.ModuleList([nn.ReLU()])
        layers.extend([nn.Tanh(), nn.Sigmoid()])
        layers.insert(1, nn.Identity())
        layers[0] = nn.GELU()
        del layers[2]
        assert [type(x).__name__ for x in layers] == ["GELU", "Identity", "Sigmoid"]
        assert [n for n, _ in layers.named_children()] == ["0", "1", "2"]
        assert type(layers[1:]) is nn.ModuleList and len(layers[::2]) == 2
        assert [type(x).__name__ for x in layers + nn.ModuleList([nn.ReLU()])][-1] == "ReLU"
        popped = layers.pop(0)
        assert type(popped).__name__ == "GELU" and len(layers) == 2
        x = ns.tensor(np.array([-1.0, 0.5]))
        np.testing.assert_allclose(seq(x).numpy(), 1 / (1 + np.exp(-np.tanh(np.maximum(np.array([-1.0, 0.5]), 0)))))
